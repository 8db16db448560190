"""Which theorem of jiang2025hard applies to a setup, hypothesis by hypothesis (docs/theory.md section 4).

:func:`check_conditions` turns a description of a training setup (setting, C, d, psi, eta,
normalization, prior, positives) into a :class:`ConditionReport`: one :class:`Condition` per
hypothesis (with the reason it holds or fails) and, for Theorems 1-3, whether it applies and why not.
Built-in psi and eta are known convex / non-decreasing (proofs: docs/theory.md section 2, and
``proofs_check`` for small k); user functions are checked numerically with
:func:`ncgeom.losses.check_convex` and :func:`ncgeom.losses.check_monotone`, which needs ``rng``, on the box of
arguments the features reach (``scale``: |t| <= 2 and |s| <= 1 for normalized features; the reasons name the box).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ncgeom.losses.eta import Eta, exponential_tilt
from ncgeom.losses.properties import REACHABLE_T, check_convex, check_monotone
from ncgeom.losses.psi import Psi, make_psi
from ncgeom.validate import require_choice, require_int, require_real
from ncgeom.vocabulary import (
    DOMAINS,
    NORMALIZATIONS,
    POSITIVE_LAWS,
    PSI_NAMES,
    SETTINGS,
    Normalization,
    PositiveLaw,
    PsiName,
    Setting,
    is_hard,
    is_supervised,
)

__all__ = ["Condition", "TheoremApplicability", "ConditionReport", "check_conditions"]


@dataclass(frozen=True)
class Condition:
    """One hypothesis: its name, whether it holds, and why."""

    name: str
    holds: bool
    reason: str


@dataclass(frozen=True)
class TheoremApplicability:
    """Whether a theorem applies to the setup; ``reason`` names the failing hypotheses if not."""

    theorem: int
    statement: str
    applies: bool
    reason: str


@dataclass(frozen=True)
class ConditionReport:
    """Result of :func:`check_conditions`.

    Attributes
    ----------
    setting : str
    conditions : tuple of Condition
        Names: ``balanced``, ``dim_ge_c_minus_1``, ``dim_ge_c``, ``psi_convex``, ``psi_monotone``,
        ``eta_monotone_nonnegative``, ``normalized``, ``conditionally_independent_positives``.
    theorems : tuple of TheoremApplicability
        Theorems 1, 2, 3 in that order.
    """

    setting: str
    conditions: tuple[Condition, ...]
    theorems: tuple[TheoremApplicability, ...]

    def condition(self, name: str) -> Condition:
        """The condition called ``name`` (ValueError if unknown)."""
        for cond in self.conditions:
            if cond.name == name:
                return cond
        raise ValueError(f"name must be one of {[c.name for c in self.conditions]}, got {name!r}")

    def theorem(self, number: int) -> TheoremApplicability:
        """The applicability record of Theorem ``number`` (1, 2 or 3)."""
        number = require_int("number", number, min_value=1, max_value=3)
        return self.theorems[number - 1]


def _psi_conditions(psi: Psi, k: int, rng, scale: float, note: str) -> tuple[Condition, Condition]:
    if psi.builtin and psi.name in PSI_NAMES:
        why = f"built-in psi {psi.name!r}: a log-sum-exp / hinge of affine maps, convex and non-decreasing (docs/theory.md section 2)"
        return Condition("psi_convex", True, why), Condition("psi_monotone", True, why)
    convex = check_convex(psi, k=k, rng=rng, scale=scale)
    mono = check_monotone(psi, k=k, rng=rng, scale=scale)
    return (
        Condition("psi_convex", convex.holds, f"{convex.describe()}{note}"),
        Condition("psi_monotone", mono.holds, f"{mono.describe()}{note}"),
    )


def _eta_condition(eta: Eta | None, rng, scale: float, note: str) -> Condition:
    name = "eta_monotone_nonnegative"
    if eta is None:
        return Condition(name, True, "no hardening (eta = 1, constant)")
    if eta.builtin:
        return Condition(name, True, f"built-in exponential tilt exp(beta s), beta = {eta.beta} >= 0: positive and non-decreasing")
    verdict = check_monotone(eta, rng=rng, scale=scale / 2.0)  # |s| <= r^2 = scale / 2 (ncgeom.losses.properties)
    return Condition(name, verdict.holds, f"{verdict.describe()}{note}")


def _balanced_condition(num_classes: int, prior) -> Condition:
    if prior is None:
        return Condition("balanced", True, "no prior given: balanced classes (lambda_c = 1/C) assumed")
    lam = np.asarray(prior, dtype=np.float64)
    if lam.shape != (num_classes,) or np.any(lam < 0) or not np.isclose(lam.sum(), 1.0, rtol=0, atol=1e-12):
        raise ValueError(f"prior must be a probability vector of length num_classes = {num_classes}, got {prior!r}")
    dev = float(np.max(np.abs(lam - 1.0 / num_classes)))
    tol = 64 * np.finfo(np.float64).eps
    if dev <= tol:
        return Condition("balanced", True, "prior is uniform (lambda_c = 1/C)")
    return Condition("balanced", False, f"prior is not uniform: max |lambda_c - 1/C| = {dev:.3g}")


def _applicability(number: int, statement: str, needed: list[Condition], extra: str | None = None) -> TheoremApplicability:
    failing = [c for c in needed if not c.holds]
    if extra is not None:
        return TheoremApplicability(number, statement, False, extra)
    if failing:
        return TheoremApplicability(number, statement, False, "fails: " + "; ".join(f"{c.name} ({c.reason})" for c in failing))
    return TheoremApplicability(number, statement, True, "all hypotheses hold: " + ", ".join(c.name for c in needed))


def check_conditions(
    setting: Setting,
    *,
    num_classes: int,
    dim: int,
    psi: PsiName | Psi,
    eta: Eta | float | None = None,
    normalization: Normalization,
    prior=None,
    positives: PositiveLaw = "label",
    num_negatives: int = 1,
    rng: np.random.Generator | None = None,
    scale: float | None = None,
) -> ConditionReport:
    """Check the hypotheses of jiang2025hard, Theorems 1-3, for a setup (docs/theory.md section 4).

    Theorem 1 (L_HSCL >= L_SCL, L_HUCL >= L_UCL): psi non-decreasing, eta non-decreasing and >= 0.
    Theorem 2 (NC optimal for SCL/HSCL): setting scl or hscl, balanced, ball or sphere, d >= C-1, psi
    convex and non-decreasing (for HSCL also Theorem 1's eta condition). Theorem 3 (NC optimal for UCL):
    setting ucl, balanced, label-based positives, ball or sphere, d >= C-1 (the report also says whether
    d >= C, in case the paper's statement needs it), psi convex and non-decreasing. For hucl Theorem 3
    gives only a lower bound (not attained), and the report says so.

    Parameters
    ----------
    setting : {"scl", "hscl", "ucl", "hucl"}
    num_classes, dim : int
        C >= 2 and d >= 1.
    psi : str or Psi
    eta : Eta, float (beta of the exponential tilt) or None (no hardening)
    normalization : {"none", "ball", "sphere"}
    prior : array [C], optional
        Class prior; None means balanced.
    positives : {"label", "instance", "noise"}
        ``label``: x+ drawn independently from the anchor's class; ``instance`` (x+ = x) and ``noise``
        (x+ = x + noise) are not conditionally independent given the class.
    num_negatives : int
        k, the arity at which a user psi is checked.
    rng : numpy.random.Generator
        Required when psi or eta is a user function (numerical checks).
    scale : float, optional
        Half-width of the box of psi's arguments t the numerical checks sample (eta's s in half of it), > 0.
        Default: the box the features reach, |t| <= 2 (|s| <= 1) for ball and sphere (radius r = 1 gives
        2 r^2, :func:`ncgeom.losses.properties.reachable_scale`). Without normalization t is unbounded: the
        default box is still |t| <= 2 (unit-norm features) and the reasons say so; pass ``scale`` = 2 r^2 for
        features of norm <= r. A user psi that is convex and monotone on the reachable box only satisfies the
        hypotheses: the theorems never evaluate it outside.

    Examples
    --------
    A psi that is monotone for t >= -2 only (it bends down below): it passes on the reachable box.

    >>> import numpy as np
    >>> from ncgeom.losses import custom_psi
    >>> psi = custom_psi(lambda t: np.mean((t + 2.0) ** 2, axis=-1), name="square+2")
    >>> r = check_conditions("scl", num_classes=3, dim=2, psi=psi, normalization="sphere", rng=np.random.default_rng(0))
    >>> r.theorem(2).applies, "[-2, 2]" in r.condition("psi_monotone").reason
    (True, True)
    """
    setting = require_choice("setting", setting, SETTINGS)
    c = require_int("num_classes", num_classes, min_value=2)
    d = require_int("dim", dim, min_value=1)
    k = require_int("num_negatives", num_negatives, min_value=1)
    normalization = require_choice("normalization", normalization, NORMALIZATIONS)
    positives = require_choice("positives", positives, POSITIVE_LAWS)
    if not isinstance(psi, Psi):
        psi = make_psi(psi)
    if eta is not None and not isinstance(eta, Eta):
        eta = exponential_tilt(require_real("eta", eta, min_value=0.0))
    needs_rng = not (psi.builtin and psi.name in PSI_NAMES) or (eta is not None and not eta.builtin)
    if needs_rng and not isinstance(rng, np.random.Generator):
        raise ValueError("rng must be a numpy.random.Generator when psi or eta is a user function (numerical checks)")
    box = REACHABLE_T if scale is None else require_real("scale", scale, min_value=0.0, min_inclusive=False)
    note = ""
    if scale is None and normalization == "none":
        note = " (normalization 'none' reaches any t: the box of unit-norm features was sampled; pass scale = 2 r^2)"

    balanced = _balanced_condition(c, prior)
    dim1 = Condition("dim_ge_c_minus_1", d >= c - 1, f"d = {d} {'>=' if d >= c - 1 else '<'} C-1 = {c - 1} (a simplex ETF exists iff d >= C-1)")
    dim2 = Condition("dim_ge_c", d >= c, f"d = {d} {'>=' if d >= c else '<'} C = {c} (in case Theorem 3 is stated with d >= C)")
    psi_convex, psi_mono = _psi_conditions(psi, k, rng, box, note)
    eta_cond = _eta_condition(eta, rng, box, note)
    norm = Condition("normalized", normalization in DOMAINS, f"normalization {normalization!r}" + ("" if normalization != "none" else ": the bounds need ||z|| <= 1"))
    indep = Condition(
        "conditionally_independent_positives",
        positives == "label",
        "label-based positives are independent draws from the anchor's class" if positives == "label" else f"{positives!r} positives depend on the anchor beyond its class",
    )
    conditions = (balanced, dim1, dim2, psi_convex, psi_mono, eta_cond, norm, indep)

    t1 = _applicability(1, "L_HSCL >= L_SCL and L_HUCL >= L_UCL (Harris)", [psi_mono, eta_cond])
    not_sup = None if is_supervised(setting) else f"setting {setting!r}: Theorem 2 is about SCL/HSCL"
    t2_needed = [balanced, norm, dim1, psi_convex, psi_mono] + ([eta_cond] if is_hard(setting) else [])
    t2 = _applicability(2, "NC minimizes L_SCL and L_HSCL; min = psi_k(-C/(C-1), ...)", t2_needed, not_sup)
    t3_needed = [balanced, indep, norm, dim1, psi_convex, psi_mono]
    not_unsup = None
    if is_supervised(setting):
        not_unsup = f"setting {setting!r}: Theorem 3 is about UCL"
    elif is_hard(setting):
        not_unsup = "setting 'hucl': Theorems 1 + 3 give only a lower bound (not attained at NC; open problem)"
    t3 = _applicability(3, "NC minimizes L_UCL; min = binomial(k, 1/C) average of psi", t3_needed, not_unsup)
    if t3.applies and not dim2.holds:
        t3 = TheoremApplicability(3, t3.statement, True, t3.reason + f"; note d = {d} < C = {c}: holds under d >= C-1 (our derivation), check if the paper needs d >= C")
    return ConditionReport(setting, conditions, (t1, t2, t3))
