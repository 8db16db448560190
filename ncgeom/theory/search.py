"""Does a configuration beat neural collapse? A multi-start search over finite latent models (docs/theory.md, section 4).

When a user's psi or eta fails a hypothesis of Theorems 2-3 (:func:`ncgeom.theory.check_conditions`), the theorems
are silent: NC may still be optimal, or not. :func:`search_beats_nc` looks for a counterexample. It minimizes the
exact population loss (docs/theory.md, section 3) of a balanced latent model with ``points_per_class`` unit
vectors per class (one: collapsed classes, the configurations of Theorem 2's reduction; more: classes spread
over several points, as the cross-polytope of section 4 needs) over the sphere S^{d-1}, from ``num_starts``
random starts (L-BFGS on unnormalized points u, z = u / ||u||, finite-difference gradients), and compares the
best value found with the loss of NC (the simplex ETF, every point of class c at vertex v_c, d >= C - 1).

The objective of the search is the full expectation over ordered k-tuples of negatives,

.. math:: L(z) = \\sum_x p(x) \\sum_{x^+} p^+(x^+ \\mid x) \\sum_{m_1..m_k} \\prod_i q(m_i \\mid x)\\,
    \\psi_k\\big(\\langle z_x, z_{m_1}\\rangle - \\langle z_x, z_{x^+}\\rangle, \\dots\\big),

with p^+ and q the laws of :func:`ncgeom.population.positive_law` and :func:`ncgeom.population.negative_law`
(the tilt of the hard settings recomputed from the current similarities). The best configuration and NC are
then evaluated again by :func:`ncgeom.population.population_loss` (a separate enumeration that groups equal
similarities and multisets of negatives), and those two numbers are the ones compared and returned.

A search that finds nothing is evidence, never a proof: it says how hard it looked (starts, iterations,
evaluations). The searches of ``proofs_check`` certify the known cases (the cross-polytope, the cubic psi of
hypothesis 2.4); this one takes any psi and eta.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field

import numpy as np
from scipy.optimize import minimize

from ncgeom.geometry import simplex_etf
from ncgeom.losses.eta import Eta, exponential_tilt, tilt_weights
from ncgeom.losses.psi import Psi, make_psi
from ncgeom.population import FiniteLatentModel, negative_law, population_loss, positive_law
from ncgeom.validate import require_choice, require_int, require_real
from ncgeom.vocabulary import SETTINGS, PositiveLaw, PsiName, Setting, is_hard

__all__ = ["NCSearchResult", "search_beats_nc", "MAX_SEARCH_TERMS"]

#: Most psi evaluations of one objective value (anchors x positives x ordered k-tuples of negatives): each of the
#: thousands of evaluations of a search pays them, so a larger model or k is refused before the search starts.
MAX_SEARCH_TERMS = 2_000_000
_POSITIVES: tuple[PositiveLaw, ...] = ("label", "instance")
_EPS = float(np.finfo(np.float64).eps)


@dataclass(frozen=True)
class NCSearchResult:
    """The outcome of :func:`search_beats_nc`.

    Attributes
    ----------
    beats_nc : bool
        True when the best configuration's loss is below the NC value by more than ``tol``.
    best_loss : float
        Exact population loss of the best configuration found (:func:`ncgeom.population.population_loss`).
    nc_value : float or None
        Exact population loss of NC in the same model (None when d < C - 1: no simplex ETF exists).
    gap : float or None
        ``best_loss - nc_value`` (negative when a configuration beats NC).
    tol : float
        The margin a gap must exceed to count: 64 x (terms of the enumeration) x eps x max(1, |nc_value|), a
        bound on the rounding of the two float64 sums compared.
    points : numpy.ndarray [C, n, d]
        The best configuration (unit vectors; ``points[c]`` the n points of class c).
    setting, psi, eta, num_classes, dim, num_negatives, positives, points_per_class
        What was searched (``psi`` and ``eta`` by name).
    num_starts, max_iter, num_evaluations : int
        The effort: random starts, the L-BFGS iteration limit of each, and the objective values computed.
    """

    beats_nc: bool
    best_loss: float
    nc_value: float | None
    gap: float | None
    tol: float
    points: np.ndarray = field(repr=False, compare=False)
    setting: str
    psi: str
    eta: str | None
    num_classes: int
    dim: int
    num_negatives: int
    positives: str
    points_per_class: int
    num_starts: int
    max_iter: int
    num_evaluations: int

    def statement(self) -> str:
        """One line saying what was found, with the numbers and the search effort."""
        model = (f"{self.setting}, psi {self.psi}{'' if self.eta is None else f', eta {self.eta}'}, C = {self.num_classes}, "
                 f"d = {self.dim}, k = {self.num_negatives}, {self.positives} positives, {self.points_per_class} "
                 f"point(s) per class")
        effort = f"{self.num_starts} starts of at most {self.max_iter} L-BFGS iterations, {self.num_evaluations} evaluations"
        if self.nc_value is None:
            return (f"no NC to compare with (d = {self.dim} < C - 1 = {self.num_classes - 1}: no simplex ETF); the best "
                    f"configuration found has L = {self.best_loss:.6g} ({model}; {effort})")
        if self.beats_nc:
            return (f"a configuration beats NC: L = {self.best_loss:.6g} < L_NC = {self.nc_value:.6g} (gap "
                    f"{self.gap:.3g}; {model}; {effort})")
        return (f"no configuration below L_NC = {self.nc_value:.6g} found (best {self.best_loss:.6g}, gap {self.gap:.3g} "
                f">= -{self.tol:.1g}; {model}; {effort}): evidence that NC is optimal here, not a proof")


class _Objective:
    """The search's loss of a configuration (module docstring), vectorized over all (anchor, positive, tuple)."""

    def __init__(self, labels: np.ndarray, setting: Setting, psi: Psi, eta: Eta | None, k: int,
                 positives: PositiveLaw, dim: int):
        self.labels, self.psi, self.eta, self.k, self.dim = labels, psi, eta, k, dim
        n = labels.size
        # the laws of a balanced model with uniform points: they depend on the labels only (the tilt aside)
        shape = FiniteLatentModel([np.ones((int(np.sum(labels == c)), 1)) for c in range(int(labels.max()) + 1)])
        self.prob = shape.probabilities
        self.pos = positive_law(shape, positives)
        self.base = negative_law(shape, "scl" if setting in ("scl", "hscl") else "ucl")
        self.tuples = np.array(list(itertools.product(range(n), repeat=k)), dtype=np.int64).reshape(-1, k)
        self.evaluations = 0

    def points(self, u: np.ndarray) -> np.ndarray:
        z = u.reshape(self.labels.size, self.dim)
        return z / np.linalg.norm(z, axis=1, keepdims=True)

    def __call__(self, u: np.ndarray) -> float:
        self.evaluations += 1
        z = self.points(u)
        s = z @ z.T
        q = self.base if self.eta is None else tilt_weights(self.eta, s, self.base)
        neg = s[:, self.tuples]  # [N anchors, T, k]
        t = neg[:, None, :, :] - s[:, :, None, None]  # [N anchors, N positives, T, k]
        values = np.asarray(self.psi(t), dtype=np.float64)  # [N, N, T]
        weights = np.prod(q[:, self.tuples], axis=-1)  # [N, T]: the law of the tuple given the anchor
        value = float(np.einsum("x,xj,xjt,xt->", self.prob, self.pos, values, weights))
        return value if math.isfinite(value) else math.inf


def search_beats_nc(
    psi: PsiName | Psi,
    *,
    setting: Setting,
    num_classes: int,
    dim: int,
    eta: Eta | float | None = None,
    num_negatives: int = 1,
    positives: PositiveLaw = "label",
    points_per_class: int = 1,
    num_starts: int = 8,
    max_iter: int = 200,
    rng: np.random.Generator,
    tau: float = 1.0,
    margin: float = 1.0,
) -> NCSearchResult:
    """Search for a configuration on the sphere whose population loss is below the loss of NC (module docstring).

    Parameters
    ----------
    psi : str or Psi
        A built-in name (with ``tau``, ``margin``) or any :class:`ncgeom.losses.Psi` (numpy in, numpy out), convex
        or not, monotone or not.
    setting : {"scl", "hscl", "ucl", "hucl"}
    num_classes, dim : int
        C >= 2 classes in R^d, d >= 1 (with d < C - 1 there is no NC to compare with; the best configuration is
        still returned).
    eta : Eta, float or None
        The hardening of hscl/hucl (an Eta, a beta >= 0 of the exponential tilt, None: eta = 1); ignored by
        scl/ucl.
    num_negatives : int
        k >= 1 (the objective enumerates the N^k ordered tuples of negatives, N = C x points_per_class).
    positives : {"label", "instance"}
        The positive of an anchor: an independent draw from its class, or the anchor itself (docs/theory.md,
        section 4: NC is not optimal for UCL with instance positives).
    points_per_class : int
        n >= 1 unit vectors per class, each of mass 1/(C n): 1 searches collapsed classes.
    num_starts, max_iter : int
        Random starts (points drawn uniformly on the sphere from ``rng``) and the L-BFGS iteration limit of each.
    rng : numpy.random.Generator
        The starts' draws (randomness is an argument).

    Returns
    -------
    NCSearchResult
        ``beats_nc`` and the numbers; :meth:`NCSearchResult.statement` says it in one line.

    Raises
    ------
    ValueError
        A bad argument (naming it and its range); an objective of more than :data:`MAX_SEARCH_TERMS` terms; a psi
        that fails on numpy arrays or returns a non-finite value at NC.

    Examples
    --------
    The cubic psi (t + 1)^3 of hypothesis 2.4 (non-decreasing, not convex) on collapsed SCL classes, C = 3, d = 2:
    one antipodal pair and an orthogonal class reach -1/3 < -1/8 = L_NC.

    >>> import numpy as np
    >>> from ncgeom.losses import custom_psi
    >>> cubic = custom_psi(lambda t: np.mean((t + 1.0) ** 3, axis=-1), name="cubic")
    >>> r = search_beats_nc(cubic, setting="scl", num_classes=3, dim=2, num_starts=4, rng=np.random.default_rng(0))
    >>> r.beats_nc, round(r.nc_value, 6), r.best_loss < -0.3
    (True, -0.125, True)
    """
    setting = require_choice("setting", setting, SETTINGS)
    c = require_int("num_classes", num_classes, min_value=2)
    d = require_int("dim", dim, min_value=1)
    k = require_int("num_negatives", num_negatives, min_value=1)
    positives = require_choice("positives", positives, _POSITIVES)
    n = require_int("points_per_class", points_per_class, min_value=1)
    starts = require_int("num_starts", num_starts, min_value=1)
    iterations = require_int("max_iter", max_iter, min_value=1)
    if not isinstance(rng, np.random.Generator):
        raise ValueError("rng must be a numpy.random.Generator (the starts are random draws)")
    if not isinstance(psi, Psi):
        psi = make_psi(psi, tau=tau, margin=margin)
    eta_obj = None
    if is_hard(setting) and eta is not None:
        eta_obj = eta if isinstance(eta, Eta) else exponential_tilt(require_real("eta", eta, min_value=0.0))
    total = c * n
    terms = total * total * total**k
    if terms > MAX_SEARCH_TERMS:
        raise ValueError(f"num_negatives, points_per_class: the objective of C = {c} classes x {n} points and k = {k} "
                         f"has {terms} terms (N^(k+2), N = {total}), above {MAX_SEARCH_TERMS}; lower k or points_per_class")
    labels = np.repeat(np.arange(c), n)
    objective = _Objective(labels, setting, psi, eta_obj, k, positives, d)

    def exact(points: np.ndarray) -> tuple[float, int]:
        loss = population_loss(FiniteLatentModel(list(points)), setting, psi, num_negatives=k, eta=eta_obj,
                               positives=positives, method="exact")
        return loss.value, int(loss.num_terms or 0)

    nc_value, nc_terms = None, 1
    if d >= c - 1:
        etf = simplex_etf(c, d)
        try:
            nc_value, nc_terms = exact(np.repeat(etf[:, None, :], n, axis=1))
        except Exception as exc:  # noqa: BLE001 - a user psi failing on numpy arrays is bad input
            raise ValueError(f"psi {psi.name!r} must accept numpy arrays t [..., k] (the population loss is numpy): "
                             f"{type(exc).__name__}: {' '.join(str(exc).split())[:160]}") from None
        if not math.isfinite(nc_value):
            raise ValueError(f"psi {psi.name!r} is not finite at NC (L_NC = {nc_value}); the search compares finite losses")
    best_u, best_value = None, math.inf
    for _ in range(starts):
        u0 = rng.standard_normal(total * d)
        found = minimize(objective, u0, method="L-BFGS-B", options={"maxiter": iterations})
        for u in (found.x, u0):
            value = objective(u)
            if value < best_value:
                best_u, best_value = u, value
    if best_u is None:
        raise ValueError(f"psi {psi.name!r}: no start gave a finite loss")
    points = objective.points(best_u).reshape(c, n, d)
    best_loss, best_terms = exact(points)
    tol = 64.0 * max(nc_terms, best_terms) * _EPS * max(1.0, abs(nc_value or 0.0))
    gap = None if nc_value is None else best_loss - nc_value
    return NCSearchResult(
        beats_nc=gap is not None and gap < -tol, best_loss=best_loss, nc_value=nc_value, gap=gap, tol=tol,
        points=points, setting=setting, psi=psi.name, eta=None if eta_obj is None else eta_obj.name, num_classes=c,
        dim=d, num_negatives=k, positives=positives, points_per_class=n, num_starts=starts, max_iter=iterations,
        num_evaluations=objective.evaluations,
    )
