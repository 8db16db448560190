"""Certified global minimum of the collapsed HUCL loss: an interval branch and bound (C = 3, d = 2; C = 4, d = 3).

Over collapsed configurations (one unit vector v_c per class, Gram M; docs/theory.md, section 4), the loss of
:func:`proofs_check.hucl.optimum.loss.collapsed_gram_loss` depends on M only. Modulo rotations and reflections:

- C = 3, d = 2 (:data:`PARAMETRIZATIONS` ``"C3_d2"``): the points at angles 0, a, a + b; M_01 = cos a, M_12 = cos b,
  M_02 = cos(a + b). Relabelling and reflecting sorts the three arcs a <= b <= 2 pi - a - b, so the domain
  D = {0 <= a <= 2 pi / 3, a <= b <= pi - a / 2} meets every configuration; the search box is [0, 2 pi/3] x [0, pi]
  minus the boxes that lie entirely below b = a.
- C = 4, d = 3 (``"C4_d3"``): v_0 = e_3, v_1 = (sin t_1, 0, cos t_1), v_c = (sin t_c cos p_c, sin t_c sin p_c, cos t_c)
  for c = 2, 3; relabelling makes (0, 1) a most distant pair (t_2, t_3 <= t_1) and a reflection p_2 in [0, pi]: the
  box [0, pi] x [0, pi] x [0, pi] x [0, pi] x [-pi, pi] over (t_1, t_2, p_2, t_3, p_3), minus the boxes where t_2 or
  t_3 surely exceeds t_1.

Every point of the box is a configuration, so the minimum over the box is the global minimum, and every global
minimizer is a critical point of the loss as a function of the (periodic) parameters.
:func:`proofs_check.hucl.optimum.bnb.branch_and_bound` encloses the minimum to ``eps`` by interval arithmetic
(``proofs_check.hucl.optimum.intervals``: natural and mean-value forms, gradient by forward-mode duals); the
upper bound starts from the ``starts`` (a numerical search's optimum). A closed bound is a proof (evidence "exact":
interval arithmetic, on the instances run); every global minimizer lies in one of the settled boxes. More than
``max_boxes`` boxes at once stops the run: the bound did not close, and the certificate gives the lower bound reached.

Sources: docs/theory.md, section 4 ("HUCL: an open problem"); R. E. Moore, R. B. Kearfott, M. J. Cloud,
*Introduction to Interval Analysis*, SIAM 2009, chapter 8 (branch and bound for global optimization).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from ncgeom.validate import require_choice, require_int, require_real
from proofs_check.hucl.optimum import intervals as iv
from proofs_check.hucl.optimum.bnb import MAX_BOXES, BnBResult, branch_and_bound
from proofs_check.hucl.optimum.intervals import Dual, Interval
from proofs_check.hucl.optimum.loss import PSI_NAMES, PsiOption, multiset_table

__all__ = ["PARAMETRIZATIONS", "DEFAULT_EPS", "Certificate", "gram_entries", "interval_loss", "interval_row_loss",
           "parameters_of", "certify_minimum", "certify_switch", "local_minimum", "loss_enclosure"]

PARAMETRIZATIONS: tuple[str, ...] = ("C3_d2", "C4_d3")
DEFAULT_EPS = 1e-7
_PI = math.pi


@dataclass(frozen=True)
class Certificate:
    """The outcome of :func:`certify_minimum`: the problem, the branch and bound's result (``bnb``: closed, lower,
    upper, the best parameters, the settled boxes, the coverage) and the Gram of the best point (float)."""

    parametrization: str
    beta: float
    tau: float
    num_negatives: int
    psi: str
    bnb: BnBResult
    best_gram: tuple[tuple[float, ...], ...]

    @property
    def closed(self) -> bool:
        return self.bnb.closed

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _domain(parametrization: str) -> tuple[np.ndarray, np.ndarray]:
    """The search box of the parameters (module docstring); the upper ends are padded by 1e-9 so that the closed
    box surely contains the domain after the floats' rounding of pi."""
    if parametrization == "C3_d2":
        return np.array([0.0, 0.0]), np.array([2 * _PI / 3, _PI]) + 1e-9
    return np.array([0.0, 0.0, 0.0, 0.0, -_PI - 1e-9]), np.full(5, _PI + 1e-9)


def _outside(parametrization: str, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Boxes [B, p] that surely contain no point of the fundamental domain (module docstring)."""
    if parametrization == "C3_d2":
        return (hi[:, 1] < lo[:, 0] - 1e-12) | (lo[:, 0] / 2 + lo[:, 1] > _PI + 1e-9)
    return (lo[:, 1] > hi[:, 0] + 1e-12) | (lo[:, 3] > hi[:, 0] + 1e-12)


def gram_entries(parametrization: str, x: Sequence[Any]) -> dict[tuple[int, int], Any]:
    """{(c, c'): M_cc'} (c < c') as functions of the parameters ``x`` (Duals or Intervals, module docstring)."""
    parametrization = require_choice("parametrization", parametrization, PARAMETRIZATIONS)
    if parametrization == "C3_d2":
        a, b = x
        return {(0, 1): a.cos(), (1, 2): b.cos(), (0, 2): (a + b).cos()}
    t1, t2, p2, t3, p3 = x
    c1, s1, c2, s2, c3, s3 = t1.cos(), t1.sin(), t2.cos(), t2.sin(), t3.cos(), t3.sin()
    return {(0, 1): c1, (0, 2): c2, (0, 3): c3,
            (1, 2): s1 * s2 * p2.cos() + c1 * c2, (1, 3): s1 * s3 * p3.cos() + c1 * c3,
            (2, 3): s2 * s3 * (p2 - p3).cos() + c2 * c3}


def interval_row_loss(row: Sequence[Any], *, beta: float, tau: float, num_negatives: int, psi: PsiOption) -> Any:
    """The loss of one anchor whose Gram row to the C - 1 other classes is ``row`` (Duals), in interval arithmetic:

    .. math::

        F(m) = \\sum_{\\mu} \\binom{k}{\\mu} \\prod_{j=0}^{C-1} q_j^{\\mu_j}\\,
            \\log\\Big(1 + e^{-\\sigma} \\sum_{j} \\mu_j e^{(m_j - 1)/\\tau}\\Big), \\qquad
        q_j = \\frac{e^{\\beta (m_j - 1)}}{\\sum_{j'} e^{\\beta (m_{j'} - 1)}},

    over the multisets mu of k classes, class 0 the anchor's own (m_0 = 1: a collision), sigma = 0 (infonce) or
    log k (infonce-mean). The collapsed loss is the mean of F over the anchors' rows (:func:`interval_loss`).
    """
    k = num_negatives
    beta_i, tau_i = iv.point(beta), iv.point(tau)
    template = row[0]
    one = Dual(iv.point(np.ones(template.value.shape)), tuple(g * 0.0 for g in template.grad))
    tilt = [one] + [((m - 1.0) * beta_i).exp() for m in row]  # e^{beta (m_j - 1)}; 1 for the own class
    denominator = tilt[0]
    for e in tilt[1:]:
        denominator = denominator + e
    q = [e / denominator for e in tilt]
    x = [one] + [((m - 1.0) * (1.0 / tau_i)).exp() for m in row]  # e^{(m_j - 1)/tau}
    scale = None if psi == "infonce" else 1.0 / iv.point(float(k))  # e^{-sigma} = 1/k for infonce-mean
    tuples, _ = multiset_table(len(tilt), k)
    total: Any = None
    for tup in tuples:
        counts = np.bincount(tup, minlength=len(tilt))
        coef = math.factorial(k) // math.prod(math.factorial(int(c)) for c in counts)  # exact integer
        weight: Any = None
        inner: Any = None
        for j, count in enumerate(counts):
            if count == 0:
                continue
            power = q[j]
            for _ in range(int(count) - 1):
                power = power * q[j]
            weight = power if weight is None else weight * power
            term = x[j] * float(count)
            inner = term if inner is None else inner + term
        if scale is not None:
            inner = inner * scale
        value = weight * float(coef) * (inner + 1.0).log()
        total = value if total is None else total + value
    return total


def interval_loss(entries: dict[tuple[int, int], Any], *, num_classes: int, beta: float, tau: float,
                  num_negatives: int, psi: PsiOption) -> Any:
    """The collapsed HUCL loss (:func:`proofs_check.hucl.optimum.loss.collapsed_gram_loss`) on enclosures of the
    off-diagonal Gram entries {(c, c'): M_cc'} (Duals, c < c'): the mean over anchors c of
    :func:`interval_row_loss` of row c."""
    c = num_classes
    total: Any = None
    for anchor in range(c):
        row = [entries[(min(anchor, o), max(anchor, o))] for o in range(c) if o != anchor]
        value = interval_row_loss(row, beta=beta, tau=tau, num_negatives=num_negatives, psi=psi)
        total = value if total is None else total + value
    return total * (1.0 / iv.point(float(c)))


def _make_duals(lo: np.ndarray, hi: np.ndarray, *, with_grad: bool) -> list[Dual]:
    p = lo.shape[1]
    out = []
    for i in range(p):
        value = Interval(lo[:, i], hi[:, i])
        grad = tuple(iv.point(np.full(lo.shape[0], 1.0 if j == i else 0.0)) for j in range(p)) if with_grad else ()
        out.append(Dual(value, grad))
    return out


def loss_enclosure(parametrization: str, lo: np.ndarray, hi: np.ndarray, *, beta: float, tau: float,
                   num_negatives: int, psi: PsiOption, with_grad: bool = True) -> Dual:
    """The loss and (``with_grad``) its gradient enclosed over boxes [lo, hi] ([B, p] each)."""
    num_classes = 3 if parametrization == "C3_d2" else 4
    entries = gram_entries(parametrization, _make_duals(lo, hi, with_grad=with_grad))
    return interval_loss(entries, num_classes=num_classes, beta=beta, tau=tau, num_negatives=num_negatives, psi=psi)


def parameters_of(parametrization: str, gram: np.ndarray) -> np.ndarray:
    """Parameters (module docstring) of a configuration with class Gram ``gram`` [C, C] (float; for upper bounds).

    The classes are relabelled (and reflected) into the fundamental domain; the result reproduces the Gram up to
    rounding (the upper bound is then evaluated at these parameters, whatever Gram they give exactly).
    """
    m = np.asarray(gram, dtype=np.float64)
    if parametrization == "C3_d2":
        angles = np.arccos(np.clip([m[0, 1], m[1, 2], m[0, 2]], -1, 1))  # the three pairwise angles
        arcs = np.sort(angles)
        # three points on a circle: the arcs between consecutive points sum to 2 pi; the pairwise angles are
        # min(arc, 2 pi - arc); for arcs a <= b <= c with a + b + c = 2 pi, the two smallest pairwise angles are a, b
        return np.array([arcs[0], arcs[1]])
    c = m.shape[0]
    i, j = np.unravel_index(np.argmin(m + 2 * np.eye(c)), m.shape)
    order = [int(i), int(j)] + [r for r in range(c) if r not in (i, j)]
    m = m[np.ix_(order, order)]
    vals, vecs = np.linalg.eigh(m)
    v = vecs[:, -3:] * np.sqrt(np.clip(vals[-3:], 0, None))  # [4, 3] vectors with this Gram
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    # rotate v_0 to e_3 and v_1 into the xz-plane
    e3 = v[0]
    u = v[1] - (v[1] @ e3) * e3
    e1 = u / np.linalg.norm(u)
    e2 = np.cross(e3, e1)
    w = v @ np.stack([e1, e2, e3], axis=1)
    t = np.arccos(np.clip(w[:, 2], -1, 1))
    p = np.arctan2(w[:, 1], w[:, 0])
    if p[2] < 0:  # reflection y -> -y
        p = -p
    return np.array([t[1], t[2], p[2], t[3], p[3]])


def certify_minimum(parametrization: str, *, beta: float, tau: float = 1.0, num_negatives: int = 1,
                    psi: PsiOption = "infonce", eps: float = DEFAULT_EPS, starts: Sequence[Any] = (),
                    max_boxes: int = MAX_BOXES, progress: Callable[[str], None] | None = None) -> Certificate:
    """The certified global minimum of the collapsed HUCL loss (module docstring).

    ``starts`` are parameter vectors (e.g. :func:`parameters_of` of a searched optimum) whose point enclosures
    give the first upper bound.
    """
    parametrization = require_choice("parametrization", parametrization, PARAMETRIZATIONS)
    beta = require_real("beta", beta, min_value=0.0)
    tau = require_real("tau", tau, min_value=0.0, min_inclusive=False)
    k = require_int("num_negatives", num_negatives, min_value=1)
    psi = require_choice("psi", psi, PSI_NAMES)
    opts: dict[str, Any] = {"beta": beta, "tau": tau, "num_negatives": k, "psi": psi}
    lo, hi = _domain(parametrization)
    result = branch_and_bound(
        lambda a, b, grad: loss_enclosure(parametrization, a, b, with_grad=grad, **opts), lo, hi, eps=eps,
        outside=lambda a, b: _outside(parametrization, a, b), free=[True] * len(lo), starts=starts,
        per_side=8 if parametrization == "C3_d2" else 3, max_boxes=max_boxes, progress=progress)
    gram = _float_gram(parametrization, np.asarray(result.best))
    return Certificate(parametrization, beta, tau, k, psi, result,
                       tuple(tuple(float(x) for x in row) for row in gram))


def _float_gram(parametrization: str, x: np.ndarray) -> np.ndarray:
    duals = [Dual(iv.point(np.array([v])), ()) for v in x]
    entries = gram_entries(parametrization, duals)
    c = 3 if parametrization == "C3_d2" else 4
    m = np.eye(c)
    for (a, b), e in entries.items():
        m[a, b] = m[b, a] = float(e.value.mid[0])
    return m


def _settled_side(cert: Certificate, near_a: np.ndarray, near_b: np.ndarray, radius: float) -> str:
    """"A" when the hull of the settled boxes lies within ``radius`` of the parameters ``near_a`` (sup norm) and
    away from ``near_b``, "B" for the converse, "undecided" otherwise (or when the bound did not close)."""
    if not cert.closed or not cert.bnb.settled_hull:
        return "undecided"
    hull = np.array(cert.bnb.settled_hull)  # [p, 2]

    def within(target: np.ndarray) -> bool:
        return bool(np.all(np.maximum(np.abs(hull[:, 0] - target), np.abs(hull[:, 1] - target)) <= radius))

    in_a, in_b = within(near_a), within(near_b)
    if in_a and not in_b:
        return "A"
    if in_b and not in_a:
        return "B"
    return "undecided"


def local_minimum(parametrization: str, start: np.ndarray, *, beta: float, tau: float = 1.0, num_negatives: int = 1,
                  psi: PsiOption = "infonce") -> np.ndarray:
    """A local minimizer of the collapsed loss in the parameters, from ``start`` (scipy L-BFGS-B, float values and
    gradients from the midpoints of the point enclosures): the branch followed by :func:`certify_switch`."""
    from scipy.optimize import minimize

    opts: dict[str, Any] = {"beta": beta, "tau": tau, "num_negatives": num_negatives, "psi": psi}

    def fun(x: np.ndarray) -> tuple[float, np.ndarray]:
        d = loss_enclosure(parametrization, x[None, :], x[None, :], with_grad=True, **opts)
        return float(d.value.mid[0]), np.array([float(g.mid[0]) for g in d.grad])

    return np.asarray(minimize(fun, np.asarray(start, dtype=np.float64), jac=True, method="L-BFGS-B",
                               options={"gtol": 1e-12, "ftol": 1e-16, "maxiter": 2000}).x)


def certify_switch(parametrization: str, *, before_gram: np.ndarray, after_gram: np.ndarray,
                   bracket: tuple[float, float], tau: float = 1.0, num_negatives: int = 1, psi: PsiOption = "infonce",
                   eps: float = 1e-9, beta_tol: float = 1e-5, max_steps: int = 40) -> dict[str, Any]:
    """Bracket a change of the global minimizer from geometry A (``before_gram``) to B (``after_gram``) rigorously.

    At each beta the two branches are followed by local minimization (:func:`local_minimum`, from the last decided
    beta); when the branch and bound closes with every settled box within r of branch A's parameters (sup norm,
    r = min(0.1, |p_A - p_B| / 4)), every global minimizer is near A; likewise for B. Starting from ``bracket`` (a
    search's), the ends are checked and the bracket is bisected while the midpoint is decided, to ``beta_tol``.
    Returns ``{"certified": both ends decided as A then B, "bracket": [lo, hi], "steps", "radius", ...}``; the switch
    (the first beta whose global minimizers leave A's neighbourhood) lies in [lo, hi].
    """
    model: dict[str, Any] = {"tau": tau, "num_negatives": num_negatives, "psi": psi}
    branches = {"A": parameters_of(parametrization, before_gram), "B": parameters_of(parametrization, after_gram)}
    radii: list[float] = []

    def side(beta: float) -> str:
        pa = local_minimum(parametrization, branches["A"], beta=beta, **model)
        pb = local_minimum(parametrization, branches["B"], beta=beta, **model)
        apart = float(np.max(np.abs(pa - pb)))
        distinct = apart >= 1e-3  # else branch B does not exist here (its start fell back onto A)
        radius = min(0.1, apart / 4) if distinct else 0.1
        radii.append(radius)
        cert = certify_minimum(parametrization, beta=beta, eps=eps, starts=[pa, pb], **model)
        found = _settled_side(cert, pa, pb if distinct else pa + 1e9, radius)
        if found in branches:  # continuation: follow the branches from the last decided beta (B only where it exists)
            branches["A"] = pa
            if distinct:
                branches["B"] = pb
        return found

    lo, hi = float(bracket[0]), float(bracket[1])
    side_lo, side_hi = side(lo), side(hi)
    steps = 0
    if side_lo == "A" and side_hi == "B":
        while hi - lo > beta_tol and steps < max_steps:
            mid = (lo + hi) / 2
            s = side(mid)
            steps += 1
            if s == "A":
                lo = mid
            elif s == "B":
                hi = mid
            else:
                break
    pa, pb = parameters_of(parametrization, before_gram), parameters_of(parametrization, after_gram)
    radius = min(radii) if radii else None
    return {"certified": side_lo == "A" and side_hi == "B", "bracket": [lo, hi], "side_at_start": [side_lo, side_hi],
            "steps": steps, "radius": radius, "eps": eps, "beta_tol": beta_tol, "parameters_before": pa.tolist(),
            "parameters_after": pb.tolist()}
