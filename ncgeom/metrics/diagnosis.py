"""A diagnosis of a set of embeddings: the metrics, the NC / DC verdict, and how far their loss is from the optimum.

What ``ncgeom metrics`` prints (docs/theory.md, sections 4, 5, 7 and 8). :func:`diagnose` takes embeddings z [N, d]
with labels [N] and returns a :class:`Diagnosis`:

- the features the metrics see: z as given or normalized (``normalize``), and the normalization they already
  have (``detected``: every norm within ``d 2^-24`` of 1 is "sphere", at most 1 + that is "ball", else "none";
  d 2^-24 bounds the float32 rounding of a unit norm);
- the metrics of section 8 (:func:`ncgeom.metrics.nc_metrics`), the NCC accuracy by the rule asked for
  (``ncc``: "inner", the authors' rule and the one every run history records, or "euclidean", Papyan et al.'s),
  and with train embeddings the test NCC accuracy with the train class means;
- the verdict NC / DC / neither / undefined of :func:`ncgeom.metrics.classify_geometry`, the rule and the
  thresholds (NC_ETF, NC_WITHIN, DC_SPECTRUM) of every claim, imported from :mod:`ncgeom.metrics.outcome`;
- with ``loss`` (a :class:`LossSpec`), the loss of the embeddings against the optimum: the batch loss of all of
  them as one batch (:func:`ncgeom.losses.batch_loss`) against its value at an exact NC batch with the same class
  counts (:func:`ncgeom.theory.batch_nc_value`, section 7), and the population loss of their empirical law
  (:func:`ncgeom.population.population_loss`, label positives, the classes' frequencies as the prior) against
  the NC value (:func:`ncgeom.theory.nc_value`, section 5) and the theorems' lower bound, with whether it is
  one here (:func:`ncgeom.theory.check_conditions`: it is not without normalization, with d < C - 1, with
  imbalanced classes, ...);
- warnings: unnormalized features (and the two NCC rules' values on them), d < C - 1 (no simplex ETF: NC is
  unreachable, etf_distance cannot reach 0).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from ncgeom import budget
from ncgeom.geometry import normalize as normalize_rows
from ncgeom.metrics.groups import _embeddings, class_means
from ncgeom.metrics.ncc import NCC_RULES, NCCRule, ncc_accuracy
from ncgeom.metrics.outcome import DC_SPECTRUM, NC_ETF, NC_WITHIN, classify_geometry, spectrum_min
from ncgeom.metrics.record import NCMetrics, nc_metrics
from ncgeom.population import model_from_embeddings, population_loss
from ncgeom.ranges import require_beta, require_tau
from ncgeom.theory import batch_nc_value, check_conditions, hucl_lower_bound, nc_value, scl_lower_bound, ucl_lower_bound
from ncgeom.validate import require_choice, require_int
from ncgeom.vocabulary import (
    NORMALIZATIONS,
    PSI_NAMES,
    SETTINGS,
    Estimator,
    GeometryOutcome,
    Normalization,
    PsiName,
    Setting,
    is_hard,
    is_supervised,
)

__all__ = ["LossSpec", "LossReport", "Diagnosis", "diagnose", "detect_normalization", "POPULATION_SAMPLES"]

#: Monte Carlo draws of the population loss when its exact sum has more than a million terms.
POPULATION_SAMPLES = 20_000


def detect_normalization(z: np.ndarray) -> tuple[Normalization, float, float]:
    """("sphere" | "ball" | "none", smallest norm, largest norm) of the rows of z [N, d] (module docstring)."""
    norms = np.linalg.norm(z, axis=1)
    tol = max(1e-12, z.shape[1] * 2.0**-24)
    lo, hi = float(norms.min()), float(norms.max())
    if lo >= 1.0 - tol and hi <= 1.0 + tol:
        return "sphere", lo, hi
    return ("ball" if hi <= 1.0 + tol else "none"), lo, hi


@dataclass(frozen=True)
class LossSpec:
    """The loss to compare the embeddings with: a setting, its hardness and temperature, psi and k."""

    setting: Setting
    beta: float = 0.0
    tau: float = 1.0
    psi: PsiName = "infonce"
    num_negatives: int = 1

    def __post_init__(self) -> None:
        require_choice("setting", self.setting, SETTINGS)
        require_beta(self.beta)
        require_tau(self.tau)
        require_choice("psi", self.psi, PSI_NAMES)
        require_int("num_negatives", self.num_negatives, min_value=1)


@dataclass(frozen=True)
class LossReport:
    """The loss of the embeddings against the optimum (module docstring); None fields were not computed.

    ``population_note`` says why the population loss was skipped (memory) or how it was computed; ``is_bound``
    whether ``bound`` is a lower bound of the population loss here, ``bound_reason`` which theorem, or which
    hypotheses fail.
    """

    spec: LossSpec
    estimator: str
    batch_loss: float
    batch_nc_value: float
    batch_nc_source: str
    population_loss: float | None
    population_stderr: float | None
    population_method: str | None
    population_note: str
    nc_value: float
    bound: float
    is_bound: bool
    bound_reason: str

    @property
    def batch_gap(self) -> float:
        return self.batch_loss - self.batch_nc_value

    @property
    def population_gap(self) -> float | None:
        return None if self.population_loss is None else self.population_loss - self.nc_value

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out.update(batch_gap=self.batch_gap, population_gap=self.population_gap)
        return out


@dataclass(frozen=True)
class Diagnosis:
    """The outcome of :func:`diagnose` (module docstring)."""

    num_samples: int
    dim: int
    num_classes: int
    normalize: Normalization
    detected: Normalization
    norm_range: tuple[float, float]
    metrics: NCMetrics
    ncc_rule: NCCRule
    verdict: GeometryOutcome
    test_ncc_accuracy: float | None
    loss: LossReport | None
    warnings: tuple[str, ...]
    other_ncc: float = field(default=math.nan, repr=False)

    @property
    def spectrum_min(self) -> float | None:
        return spectrum_min(self.metrics.spectrum)

    @property
    def etf_reachable(self) -> bool:
        """d >= C - 1: a simplex ETF exists (docs/theory.md, section 4)."""
        return self.dim >= self.num_classes - 1

    def verdict_reason(self) -> str:
        """Why the verdict is what it is, with the numbers and the thresholds of the rule."""
        m, smallest = self.metrics, self.spectrum_min
        if self.verdict == "undefined":
            return "a metric the rule needs is undefined (all class means coincide)"
        if self.verdict == "DC":
            return f"the smallest normalized class-mean eigenvalue {smallest:.3g} < {DC_SPECTRUM:g} (DC_SPECTRUM)"
        if self.verdict == "NC":
            return (f"etf_distance {m.etf_distance:.3g} < {NC_ETF:g} (NC_ETF) and within_class {m.within_class:.3g} < "
                    f"{NC_WITHIN:g} (NC_WITHIN); spectrum min {smallest:.3g} >= {DC_SPECTRUM:g}")
        missed = []
        if not self.etf_reachable:
            missed.append(f"d = {self.dim} < C - 1 = {self.num_classes - 1}: NC is unreachable")
        if m.etf_distance >= NC_ETF:
            missed.append(f"etf_distance {m.etf_distance:.3g} >= {NC_ETF:g}")
        if m.within_class >= NC_WITHIN:
            missed.append(f"within_class {m.within_class:.3g} >= {NC_WITHIN:g}")
        return "; ".join(missed) + f"; spectrum min {smallest:.3g} >= {DC_SPECTRUM:g} (not DC)"

    def to_dict(self) -> dict[str, Any]:
        """The metric names of :meth:`NCMetrics.to_dict` (``ncc_accuracy`` by ``ncc_rule``) and the diagnosis."""
        out: dict[str, Any] = self.metrics.to_dict()
        out.update(
            num_samples=self.num_samples, dim=self.dim, num_classes=self.num_classes, normalize=self.normalize,
            normalization_detected=self.detected, norm_min=self.norm_range[0], norm_max=self.norm_range[1],
            ncc_rule=self.ncc_rule, test_ncc_accuracy=self.test_ncc_accuracy, spectrum_min=self.spectrum_min,
            verdict=self.verdict, verdict_reason=self.verdict_reason(),
            rule={"nc_etf": NC_ETF, "nc_within": NC_WITHIN, "dc_spectrum": DC_SPECTRUM,
                  "source": "ncgeom.metrics.outcome (docs/theory.md, sections 8 and 9)"},
            loss=None if self.loss is None else self.loss.to_dict(), warnings=list(self.warnings),
        )
        return out


def diagnose(z, labels, *, normalize: Normalization = "none", ncc: NCCRule = "inner", train: tuple[Any, Any] | None = None,
             loss: LossSpec | None = None, seed: int = 0, num_classes: int | None = None) -> Diagnosis:
    """The diagnosis of embeddings ``z`` [N, d] with ``labels`` [N] (module docstring).

    Parameters
    ----------
    z, labels : arrays
        As :func:`ncgeom.metrics.nc_metrics` takes them (any integer labels).
    normalize : {"none", "ball", "sphere"}
        Applied to z (and to the train embeddings) before anything is computed.
    ncc : {"inner", "euclidean"}
        The nearest-class-mean rule of ``ncc_accuracy`` and ``test_ncc_accuracy``.
    train : (z_train, labels_train), optional
        Train embeddings: ``test_ncc_accuracy`` scores z with their class means (every label of z must be one
        of theirs).
    loss : LossSpec, optional
        Compare the loss of the embeddings with NC (module docstring).
    seed : int
        Seeds the draws of the sampled estimator (psi other than infonce) and of a Monte Carlo population loss.
    num_classes : int, optional
        Require labels 0..C-1, all present.
    """
    normalize = require_choice("normalize", normalize, NORMALIZATIONS)
    if ncc not in NCC_RULES:
        raise ValueError(f"ncc must be one of {', '.join(NCC_RULES)}, got {ncc!r}")
    seed = require_int("seed", seed, min_value=0)
    zz = normalize_rows(_embeddings(z), normalize)
    metrics = nc_metrics(zz, labels, num_classes=num_classes)
    classes, ids = np.unique(np.asarray(labels), return_inverse=True)
    n, d = zz.shape
    c = classes.size
    detected, lo, hi = detect_normalization(zz)
    other: NCCRule = "euclidean" if ncc == "inner" else "inner"
    accuracy = ncc_accuracy(zz, labels, num_classes=num_classes, rule=ncc)
    other_accuracy = ncc_accuracy(zz, labels, num_classes=num_classes, rule=other)
    metrics = NCMetrics(**{**metrics.__dict__, "ncc_accuracy": accuracy})
    test = None
    if train is not None:
        z_train = normalize_rows(_embeddings(train[0], "train embeddings"), normalize)
        if z_train.shape[1] != d:
            raise ValueError(f"train embeddings have d = {z_train.shape[1]} columns, the embeddings {d} (they must match)")
        train_classes = np.unique(np.asarray(train[1]))
        means = class_means(z_train, train[1])
        test = ncc_accuracy(zz, labels, class_means=means, class_labels=train_classes, rule=ncc)
    warnings = []
    if detected == "none":
        warnings.append(f"the features are not normalized (norms {lo:.3g} to {hi:.3g}): the theorems hold on the ball or "
                        f"the sphere (docs/theory.md, section 1; --normalize); unit_norm and within_class are in their "
                        f"units, and the NCC rules disagree here: {ncc} {accuracy:.4g}, {other} {other_accuracy:.4g}")
    if d < c - 1:
        warnings.append(f"d = {d} < C - 1 = {c - 1}: no simplex ETF exists (docs/theory.md, section 4), so NC is "
                        "unreachable: etf_distance and equal_inner_product cannot reach 0")
    verdict = classify_geometry(metrics.to_dict(), dim=d, num_classes=c)
    report = None if loss is None else _loss_report(zz, ids, c, d, detected, loss, seed)
    return Diagnosis(n, d, c, normalize, detected, (lo, hi), metrics, ncc, verdict, test, report, tuple(warnings),
                     other_accuracy)


def _loss_report(z: np.ndarray, ids: np.ndarray, c: int, d: int, detected: Normalization, spec: LossSpec,
                 seed: int) -> LossReport:
    """The batch and population losses of the embeddings against NC (module docstring)."""
    import torch

    from ncgeom.losses import batch_loss, make_psi

    counts = np.bincount(ids, minlength=c)
    psi = make_psi(spec.psi, tau=spec.tau)
    estimator: Estimator = "weighted" if spec.psi == "infonce" else "sampled"
    n = z.shape[0]
    if estimator == "sampled":  # one draw of k negatives per pair: O(P k) indices
        pairs = int(np.sum(counts * (counts - 1)))  # positive pairs (i, j), j != i of i's class
        budget.require_within_budget("--psi, --num-negatives", 24.0 * pairs * spec.num_negatives,
                                     what=f"the sampled estimator on {pairs} pairs with k = {spec.num_negatives}")
        batch_nc = nc_value(spec.setting, psi, num_classes=c, num_negatives=spec.num_negatives, beta=spec.beta,
                            tau=spec.tau)
        batch_source = "nc_value (the sampled estimator's expectation at NC; docs/theory.md, section 5)"
    else:
        batch_nc = batch_nc_value(spec.setting, class_counts=counts, num_negatives=spec.num_negatives, beta=spec.beta,
                                  tau=spec.tau)
        batch_source = "batch_nc_value at an exact NC batch with these class counts (docs/theory.md, section 7)"
    generator = torch.Generator().manual_seed(seed)
    value = float(batch_loss(torch.as_tensor(z), torch.as_tensor(ids), spec.setting, beta=spec.beta, tau=spec.tau,
                             num_negatives=spec.num_negatives, estimator=estimator, psi=psi, generator=generator))
    prior = counts / n
    eta = spec.beta if is_hard(spec.setting) else None
    need = 8 * 4 * n * n  # similarities, the two laws, the grouping of a row: about 4 N x N float64 arrays
    population = stderr = method = None
    limit = budget.memory_budget()
    if need > limit:
        note = (f"skipped: the empirical law of N = {n} points needs about {budget.format_bytes(need)}, above the memory "
                f"budget of {budget.format_bytes(limit)} (--max-memory, or a subset of the embeddings)")
    else:
        model = model_from_embeddings(z, ids, prior=prior)
        result = population_loss(model, spec.setting, psi, num_negatives=spec.num_negatives, eta=eta,
                                 rng=np.random.default_rng(seed), num_samples=POPULATION_SAMPLES, tau=spec.tau)
        population, stderr, method = result.value, result.stderr, result.method
        note = ("exact: every (anchor, positive, negatives) of the empirical law" if method == "exact" else
                f"Monte Carlo, {POPULATION_SAMPLES} draws (seed {seed}): more than a million exact terms")
    nc = nc_value(spec.setting, psi, num_classes=c, num_negatives=spec.num_negatives, beta=spec.beta, tau=spec.tau)
    bound, is_bound, reason = _bound(spec, psi, c, d, detected, prior)
    return LossReport(spec, estimator, value, float(batch_nc), batch_source, population, stderr, method, note,
                      float(nc), float(bound), is_bound, reason)


def _bound(spec: LossSpec, psi, c: int, d: int, detected: Normalization, prior: np.ndarray) -> tuple[float, bool, str]:
    """(the theorems' lower bound of the population loss, whether it is one for these embeddings, why)."""
    k = spec.num_negatives
    balanced = bool(np.max(np.abs(prior - 1.0 / c)) <= 64 * np.finfo(np.float64).eps)
    report = check_conditions(spec.setting, num_classes=c, dim=d, psi=psi, eta=spec.beta if is_hard(spec.setting) else None,
                              normalization=detected, prior=prior if not balanced else None, positives="label",
                              num_negatives=k)
    shared = ("balanced", "normalized", "dim_ge_c_minus_1", "psi_convex", "psi_monotone")
    if is_supervised(spec.setting):
        bound = scl_lower_bound(psi, num_classes=c, num_negatives=k, tau=spec.tau)
        needed = shared + (("eta_monotone_nonnegative",) if is_hard(spec.setting) else ())
        why = "Theorem 2: attained at NC" if spec.setting == "scl" else "Theorems 1 + 2: attained at NC"
    elif spec.setting == "ucl":
        bound = ucl_lower_bound(psi, num_classes=c, num_negatives=k, tau=spec.tau)
        needed = shared + ("conditionally_independent_positives",)
        why = "Theorem 3: attained at NC"
    else:
        bound = hucl_lower_bound(psi, num_classes=c, num_negatives=k, tau=spec.tau)
        needed = shared + ("conditionally_independent_positives", "eta_monotone_nonnegative")
        why = "Theorems 1 + 3: a lower bound, not attained at NC (whether NC minimizes HUCL is open)"
    failing = [cond for cond in report.conditions if cond.name in needed and not cond.holds]
    if failing:
        return bound, False, "; ".join(f"{x.name} fails ({x.reason})" for x in failing)
    return bound, True, why
