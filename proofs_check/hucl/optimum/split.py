"""Where NC stops being a local minimizer of HUCL among n points per class: the split and the collapsed blocks.

Model: C balanced classes of n equally likely points, label positives, k negatives from the tilted marginal
(:mod:`proofs_check.hucl.optimum.loss`). NC puts every point of class c at the ETF vertex v_c. Modulo rotations the
tangent space at NC splits [derived] into

- *collapsed* moves (every point of a class moves alike): the blocks of ``proofs_check.hucl.jets`` (standard,
  two-row, and the lift when d >= C), whose eigenvalues are those of the collapsed loss;
- *split* moves: z_{c,j} = v_c + a_j w_c with sum_j a_j = 0. A second-order term couples two points only through
  a summand that contains both; summed over copies at NC, cross-class couplings carry (sum_j a_j)(sum_l a_l) = 0
  and same-class couplings carry (K_same - K_other) sum_j a_j^2. So the split Hessian is block diagonal over
  classes and proportional to ||a||^2: its sign **does not depend on n**. On T_{v_c} the stabilizer of v_c acts by
  the standard representation of S_{C-1} on the ETF's span (one eigenvalue, *in-span*) and, for d >= C, trivially
  on the orthogonal complement, where O(d - C + 1) makes it scalar (one eigenvalue, *out-of-span*).

Each eigenvalue is f''(0) / ||delta||^2 along one curve: class 0's two points (n = 2) at
z_{0,j}(t) = (v_0 +- t w)/||v_0 +- t w|| (in-span w = v_1 - v_2, out-of-span w = a unit vector orthogonal to the
ETF's span), or the collapsed block directions of :func:`proofs_check.hucl.jets.block_gram_jet`. The Gram of the 2C
points along the curve has exact rational Taylor coefficients up to t^2; :class:`Jet2` pushes them through the loss
(any k, infonce or infonce-mean, any tau) in floats or in the outward-rounded intervals of
``proofs_check.hucl.optimum.intervals`` (then an enclosure: a proof of the sign when 0 is outside it).

:func:`local_thresholds` scans beta for the first sign change of each block and bisects; :func:`certify_threshold`
encloses every block eigenvalue at beta -/+ width. Sources: docs/theory.md, section 4 ("HUCL: an open problem");
jiang2025hard.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from fractions import Fraction
from typing import Any, Literal

import numpy as np

from ncgeom.validate import require_choice, require_int, require_real
from proofs_check.hucl.jets import block_gram_jet, blocks_for
from proofs_check.hucl.local import first_negative
from proofs_check.hucl.optimum import intervals as iv
from proofs_check.hucl.optimum.intervals import Interval
from proofs_check.hucl.optimum.loss import PSI_NAMES, PsiOption, multiset_table

__all__ = ["SPLIT_BLOCKS", "Jet2", "blocks", "curvature", "LocalThresholds", "local_thresholds", "certify_threshold"]

SPLIT_BLOCKS: tuple[str, ...] = ("split-in-span", "split-out-of-span")


def blocks(num_classes: int, dim: int) -> tuple[str, ...]:
    """The collapsed blocks of :func:`proofs_check.hucl.jets.blocks_for` and the split blocks that exist in R^d."""
    c = require_int("num_classes", num_classes, min_value=3)
    d = require_int("dim", dim, min_value=c - 1)
    return tuple(blocks_for(c, d)) + (("split-in-span", "split-out-of-span") if d >= c else ("split-in-span",))


@dataclass(frozen=True)
class Jet2:
    """a0 + a1 t + a2 t^2 (mod t^3) with :class:`Interval` coefficients (arrays)."""

    a0: Interval
    a1: Interval
    a2: Interval

    def __add__(self, other) -> Jet2:
        if isinstance(other, Jet2):
            return Jet2(self.a0 + other.a0, self.a1 + other.a1, self.a2 + other.a2)
        return Jet2(self.a0 + other, self.a1, self.a2)

    def __sub__(self, other) -> Jet2:
        if isinstance(other, Jet2):
            return Jet2(self.a0 - other.a0, self.a1 - other.a1, self.a2 - other.a2)
        return Jet2(self.a0 - other, self.a1, self.a2)

    def __mul__(self, other) -> Jet2:
        if isinstance(other, Jet2):
            return Jet2(self.a0 * other.a0, self.a0 * other.a1 + self.a1 * other.a0,
                        self.a0 * other.a2 + self.a1 * other.a1 + self.a2 * other.a0)
        return Jet2(self.a0 * other, self.a1 * other, self.a2 * other)

    def __getitem__(self, key) -> Jet2:
        return Jet2(self.a0[key], self.a1[key], self.a2[key])

    def sum(self, axis: int) -> Jet2:
        return Jet2(self.a0.sum(axis), self.a1.sum(axis), self.a2.sum(axis))

    def exp(self) -> Jet2:
        e = iv.exp(self.a0)
        return Jet2(e, e * self.a1, e * (self.a2 + self.a1 * self.a1 * 0.5))

    def log(self) -> Jet2:
        r = 1.0 / self.a0
        return Jet2(iv.log(self.a0), self.a1 * r, (self.a2 - self.a1 * self.a1 * r * 0.5) * r)

    def expand(self, axis: int) -> Jet2:
        return Jet2(*(Interval(np.expand_dims(a.lo, axis), np.expand_dims(a.hi, axis)) for a in (self.a0, self.a1, self.a2)))


def _enclose(values: np.ndarray) -> Interval:
    """Intervals around an array of Fractions (float(Fraction) is correctly rounded: one ulp outward encloses)."""
    f = np.vectorize(float, otypes=[np.float64])(values)
    return Interval(np.nextafter(f, -np.inf), np.nextafter(f, np.inf))


def _etf_products(c: int, a: int, b: int) -> Fraction:
    return Fraction(1) if a == b else Fraction(-1, c - 1)


def _split_jet(block: str, c: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, Fraction, int]:
    """Exact Taylor coefficients of the Gram [2C, 2C] of n = 2 points per class along the split curve, and
    ||delta||^2 (module docstring). Point 2c + j is copy j of class c."""
    if block == "split-in-span":
        w_dot = [Fraction(0)] * c  # <v_c, w>, w = v_1 - v_2
        w_dot[1] = _etf_products(c, 1, 1) - _etf_products(c, 1, 2)
        w_dot[2] = _etf_products(c, 2, 1) - _etf_products(c, 2, 2)
        ww = 2 - 2 * _etf_products(c, 1, 2)
    else:  # a unit vector orthogonal to the ETF's span
        w_dot, ww = [Fraction(0)] * c, Fraction(1)
    n = 2 * c
    cls = [p // 2 for p in range(n)]
    sign = [(1 if p % 2 == 0 else -1) if cls[p] == 0 else 0 for p in range(n)]
    m0 = np.empty((n, n), dtype=object)
    m1 = np.empty((n, n), dtype=object)
    m2 = np.empty((n, n), dtype=object)
    for p in range(n):
        for q in range(n):
            base = _etf_products(c, cls[p], cls[q])
            m0[p, q] = base
            m1[p, q] = sign[p] * w_dot[cls[q]] + sign[q] * w_dot[cls[p]]
            second = Fraction(0)
            if cls[p] == 0:
                second += -ww / 2 * _etf_products(c, 0, cls[q])
            if cls[q] == 0:
                second += -ww / 2 * _etf_products(c, cls[p], 0)
            second += sign[p] * sign[q] * ww
            m2[p, q] = second
    return m0, m1, m2, 2 * ww, 2


def _loss_jet(m: Jet2, *, per_class: int, beta: float, tau: float, num_negatives: int, psi: str) -> Jet2:
    """The HUCL loss of :func:`proofs_check.hucl.optimum.loss.point_loss` on a Gram jet [N, N] (N = C n)."""
    n_points = m.a0.shape[0]
    n, k = per_class, num_negatives
    tuples, _ = multiset_table(n_points, k)
    counts = np.stack([np.bincount(t, minlength=n_points) for t in tuples])
    coef = np.array([math.factorial(k) // math.prod(math.factorial(int(x)) for x in row) for row in counts],
                    dtype=np.float64)  # exact integers (<= 24 for k = 4)
    tilt = (m * beta).exp()  # [N, N]
    z = tilt.sum(axis=1).expand(1)  # [N, 1]
    log_q = (m * beta) - z.log()
    log_w = log_q[:, tuples].sum(axis=2)  # [N, M]
    weight = log_w.exp() * iv.point(coef)
    u = (m * (1.0 / tau)).exp()[:, tuples].sum(axis=2)  # [N, M]: sum_i e^{s_{x y_i}/tau}
    if psi == "infonce-mean":
        u = u * (1.0 / iv.point(float(k)))
    own = np.array([[(x // n) * n + j for j in range(n)] for x in range(n_points)])  # [N, n]
    rows = np.arange(n_points)[:, None]
    pos = (m * (-1.0 / tau)).exp()[rows, own]  # [N, n]: e^{-s_{xp}/tau}
    terms = (u.expand(1) * pos.expand(2) + 1.0).log()  # [N, n, M]
    per_anchor = (terms * weight.expand(1)).sum(axis=2).sum(axis=1) * (1.0 / n)  # [N]
    return per_anchor.sum(axis=0) * (1.0 / n_points)


def curvature(block: str, *, num_classes: int, beta: float, tau: float = 1.0, num_negatives: int = 1,
              psi: PsiOption = "infonce", arithmetic: Literal["float", "interval"] = "float"):
    """Eigenvalue of the Hessian of the n-point HUCL loss at NC on one block (module docstring): a float, or an
    :class:`Interval` of one element enclosing it (``arithmetic="interval"``)."""
    c = require_int("num_classes", num_classes, min_value=3)
    beta = require_real("beta", beta, min_value=0.0)
    tau = require_real("tau", tau, min_value=0.0, min_inclusive=False)
    k = require_int("num_negatives", num_negatives, min_value=1)
    psi = require_choice("psi", psi, PSI_NAMES)
    arithmetic = require_choice("arithmetic", arithmetic, ("float", "interval"))
    if block in SPLIT_BLOCKS:
        m0, m1, m2, norm2, per_class = _split_jet(block, c)
    else:
        m0, m1, m2, norm2 = block_gram_jet(require_choice("block", block, ("standard", "two-row", "lift")), c)
        per_class = 1
    jet = Jet2(_enclose(m0), _enclose(m1), _enclose(m2))
    value = _loss_jet(jet, per_class=per_class, beta=beta, tau=tau, num_negatives=k, psi=psi).a2
    value = value * 2.0 * (1.0 / _enclose(np.array(norm2, dtype=object)))
    if arithmetic == "interval":
        return value
    return float(value.mid)


@dataclass(frozen=True)
class LocalThresholds:
    """Per block, the first beta (bisected) where its eigenvalue turns negative (None up to beta_max); ``beta`` the
    smallest over blocks and ``block`` which; ``collapsed_beta`` the smallest over the collapsed blocks only."""

    num_classes: int
    dim: int
    tau: float
    num_negatives: int
    psi: str
    per_block: dict[str, float | None]
    beta: float | None
    block: str | None
    collapsed_beta: float | None
    grid_step: float
    beta_max: float
    tol: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def local_thresholds(*, num_classes: int, dim: int, tau: float = 1.0, num_negatives: int = 1,
                     psi: PsiOption = "infonce", grid_step: float = 1 / 16, beta_max: float = 16.0,
                     tol: float = 1e-9) -> LocalThresholds:
    """The first sign change of every block eigenvalue on beta = 0, grid_step, ... <= beta_max, bisected to tol."""
    per: dict[str, float | None] = {}
    for b in blocks(num_classes, dim):

        def value(beta: float, block: str = b) -> float:
            return float(curvature(block, num_classes=num_classes, beta=beta, tau=tau, num_negatives=num_negatives,
                                   psi=psi))

        found = first_negative(value, grid_step=grid_step, beta_max=beta_max, tol=tol)
        per[b] = None if found is None else (found[0] + found[1]) / 2
    found_blocks = {b: v for b, v in per.items() if v is not None}
    first = min(found_blocks, key=found_blocks.__getitem__) if found_blocks else None
    collapsed = [v for b, v in found_blocks.items() if b not in SPLIT_BLOCKS]
    return LocalThresholds(num_classes, dim, tau, num_negatives, psi, per, None if first is None else per[first], first,
                           min(collapsed) if collapsed else None, grid_step, beta_max, tol)


def certify_threshold(*, num_classes: int, dim: int, beta: float, tau: float = 1.0, num_negatives: int = 1,
                      psi: PsiOption = "infonce", width: float = 1e-6) -> dict[str, Any]:
    """Interval enclosures of every block eigenvalue at beta - width and beta + width. ``certified``: all > 0 below
    and one < 0 above (NC is a strict local minimizer of the n-point loss modulo rotations below, a saddle above)."""
    out: dict[str, Any] = {"beta_below": max(beta - width, 0.0), "beta_above": beta + width, "below": {}, "above": {}}
    positive_below, negative_above = True, False
    for side in ("below", "above"):
        for b in blocks(num_classes, dim):
            x = curvature(b, num_classes=num_classes, beta=out[f"beta_{side}"], tau=tau, num_negatives=num_negatives,
                          psi=psi, arithmetic="interval")
            lo, hi = float(x.lo), float(x.hi)
            out[side][b] = [lo, hi]
            if side == "below":
                positive_below &= lo > 0
            else:
                negative_above |= hi < 0
    out["certified"] = bool(positive_below and negative_above)
    out["arithmetic"] = "float64 intervals, outward rounding (proofs_check.hucl.optimum.intervals)"
    return out
