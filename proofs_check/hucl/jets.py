"""Second-order Taylor arithmetic (jets) in floats or intervals, and the symmetry-reduced Hessian at NC.

At the simplex ETF the HUCL loss over collapsed configurations (``proofs_check.hucl.loss``) is invariant
under rotations and under the permutations of the classes that the ETF realizes by rotations. NC is a
critical point for every beta (the Euclidean gradient of L at v_c is a multiple of v_c: the off-diagonal
entries of dL/dM are all equal by 2-transitivity). Modulo rotations, the tangent space at NC carries the
representation of the symmetric group S_C on the off-diagonal Gram perturbations dM (zero diagonal) that
the dimension allows:

- d = C - 1: dM with 1^T dM 1 = 0, i.e. the *standard* block (dM_cc' = x_c + x_c', sum x = 0; multiplicity
  C - 1) and, for C >= 4, the *two-row* block (zero row sums; multiplicity C(C - 3)/2);
- d >= C: in addition the *lift* block: every class moves along the same unit vector e orthogonal to the
  ETF's span, which raises all inner products together (the equiangular path (1 - rho) I + rho 11^T).

Each block is irreducible and appears once, so (Schur) the Riemannian Hessian is a scalar lambda on each,
and lambda = f''(0) / ||delta||^2 along any curve V(t) = normalize(V + t delta) whose direction delta lies
in the block and is orthogonal to the rotations (the minimum-norm lift below is). This module computes
f''(0) with jets of M(t) (exact rationals) pushed through the loss, either in float64 or in mpmath
intervals (outward rounded: an enclosure, hence a proof of the sign when 0 is outside it).

Coordinates: v_c = s (e_c - 1/C) in R^C, s = sqrt(C/(C-1)), P = I - 11^T / C. For dM with 1^T dM 1 = 0
the lift delta = (dM P - P dM P / 2) / s satisfies delta V^T + V delta^T = dM, delta_c is orthogonal to
v_c and to 1, and delta^T V is symmetric (so delta is orthogonal to every rotation V A, A skew). Then

.. math::

    M(t) = M_0 + t\\, dM + t^2 \\big(\\delta\\delta^T - M_0 \\circ (n 1^T + 1 n^T) / 2\\big) + O(t^3), \\qquad
    n_c = \\lVert \\delta_c \\rVert^2,

all entries rational. The lift block uses delta_c = e (n_c = 1, dM = 0, second-order term 11^T - M_0).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Literal

import numpy as np

from ncgeom.validate import require_choice, require_int, require_real

__all__ = ["Block", "BLOCKS", "Jet", "blocks_for", "block_multiplicity", "block_gram_jet", "reduced_curvature",
           "reduced_curvatures"]

Block = Literal["standard", "two-row", "lift"]
BLOCKS: tuple[Block, ...] = ("standard", "two-row", "lift")


def blocks_for(num_classes: int, dim: int) -> tuple[Block, ...]:
    """The blocks of the tangent space modulo rotations at NC in R^dim (module docstring)."""
    c = require_int("num_classes", num_classes, min_value=3)
    d = require_int("dim", dim, min_value=c - 1)
    blocks: tuple[Block, ...] = ("standard",)
    if c >= 4:
        blocks += ("two-row",)
    if d >= c:
        blocks += ("lift",)
    return blocks


def block_multiplicity(block: Block, num_classes: int) -> int:
    """Dimension of a block: standard C - 1, two-row C(C - 3)/2, lift 1."""
    c = num_classes
    return {"standard": c - 1, "two-row": c * (c - 3) // 2, "lift": 1}[block]


@dataclass(frozen=True)
class Jet:
    """a0 + a1 t + a2 t^2 (mod t^3), coefficients are arrays of floats or of mpmath intervals."""

    a0: Any
    a1: Any
    a2: Any

    def __add__(self, other: Jet | float) -> Jet:
        if isinstance(other, Jet):
            return Jet(self.a0 + other.a0, self.a1 + other.a1, self.a2 + other.a2)
        return Jet(self.a0 + other, self.a1, self.a2)

    def __mul__(self, other: Jet | float) -> Jet:
        if isinstance(other, Jet):
            return Jet(self.a0 * other.a0, self.a0 * other.a1 + self.a1 * other.a0,
                       self.a0 * other.a2 + self.a1 * other.a1 + self.a2 * other.a0)
        return Jet(self.a0 * other, self.a1 * other, self.a2 * other)

    def reciprocal(self) -> Jet:
        r = 1 / self.a0
        return Jet(r, -self.a1 * r * r, (self.a1 * self.a1 * r - self.a2) * r * r)

    def exp(self, exp) -> Jet:
        e = exp(self.a0)
        return Jet(e, e * self.a1, e * (self.a2 + self.a1 * self.a1 / 2))

    def log(self, log) -> Jet:
        r = 1 / self.a0
        return Jet(log(self.a0), self.a1 * r, (self.a2 - self.a1 * self.a1 * r / 2) * r)

    def sum(self, axis: int) -> Jet:
        return Jet(self.a0.sum(axis=axis), self.a1.sum(axis=axis), self.a2.sum(axis=axis))

    def expand(self, axis: int) -> Jet:
        return Jet(np.expand_dims(self.a0, axis), np.expand_dims(self.a1, axis), np.expand_dims(self.a2, axis))


def _direction(block: Block, c: int) -> np.ndarray:
    """An integer dM of the block (zero diagonal); None-like zeros for the lift block."""
    dm = np.zeros((c, c), dtype=object)
    if block == "standard":  # x = e_0 - e_1: dM_cc' = x_c + x_c'
        x = [0] * c
        x[0], x[1] = 1, -1
        for a in range(c):
            for b in range(c):
                dm[a, b] = 0 if a == b else x[a] + x[b]
    elif block == "two-row":  # alternating 4-cycle 0-1-3-2: zero row sums
        for (a, b), sign in (((0, 1), 1), ((2, 3), 1), ((0, 2), -1), ((1, 3), -1)):
            dm[a, b] = dm[b, a] = sign
    else:
        dm[:, :] = 0
    return dm


def block_gram_jet(block: Block, num_classes: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, Fraction]:
    """Exact (m0, m1, m2, ||delta||^2) of M(t) along the block's direction (arrays of Fraction, [C, C]; copies)."""
    c = require_int("num_classes", num_classes, min_value=3)
    block = require_choice("block", block, BLOCKS)
    if block == "two-row" and c < 4:
        raise ValueError(f"block 'two-row' needs num_classes >= 4, got {c}")
    m0, m1, m2, norm2 = _block_gram_jet(block, c)
    return m0.copy(), m1.copy(), m2.copy(), norm2


@functools.cache
def _block_gram_jet(block: Block, c: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, Fraction]:
    one = Fraction(1)
    p = np.array([[one * (a == b) - Fraction(1, c) for b in range(c)] for a in range(c)], dtype=object)
    m0 = np.array([[one if a == b else Fraction(-1, c - 1) for b in range(c)] for a in range(c)], dtype=object)
    if block == "lift":
        m1 = np.zeros((c, c), dtype=object) * one
        m2 = np.ones((c, c), dtype=object) * one - m0  # delta delta^T = 11^T, n_c = 1
        return m0, m1, m2, Fraction(c)
    dm = _direction(block, c) * one
    x = dm.dot(p) - p.dot(dm).dot(p) / 2  # delta = x / s, 1 / s^2 = (C - 1) / C
    dd = x.dot(x.T) * Fraction(c - 1, c)  # delta delta^T
    n = np.array([dd[a, a] for a in range(c)], dtype=object)
    m2 = dd - m0 * (n[:, None] + n[None, :]) / 2
    return m0, dm, m2, sum(n, Fraction(0))


@functools.cache
def _float_gram_jet(block: Block, num_classes: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    m0, m1, m2, norm2 = block_gram_jet(block, num_classes)
    arrays = tuple(a.astype(float) for a in (m0, m1, m2))
    for a in arrays:
        a.setflags(write=False)
    return arrays[0], arrays[1], arrays[2], float(norm2)


def _loss_jet(m: Jet, beta, tau, exp, log) -> Jet:
    """Jet of L_HUCL (k = 1, infonce, temperature tau) from the jet of M [C, C]."""
    tilt = (m * beta).exp(exp)  # e^{beta M}
    q = tilt * tilt.sum(axis=1).expand(1).reciprocal()
    psi = ((m + -1) * (1 / tau)).exp(exp)  # e^{(M - 1) / tau}
    psi = (psi + 1).log(log)
    return (q * psi).sum(axis=1).sum(axis=0) * (1 / m.a0.shape[0])


def reduced_curvature(block: Block, *, num_classes: int, beta: float, tau: float = 1.0,
                      arithmetic: Literal["float", "interval"] = "float"):
    """Eigenvalue of the Riemannian Hessian of L_HUCL (k = 1, infonce) at NC on one block (module docstring).

    ``arithmetic="float"`` returns a float; ``"interval"`` returns an mpmath interval (``mpmath.iv.mpf``)
    that encloses the exact value for the given float ``beta`` and ``tau`` (taken as exact binary numbers).
    Example: the lift block of C = 4 at beta = 0 is positive (NC minimizes UCL, Theorem 3).
    """
    beta = require_real("beta", beta, min_value=0.0)
    tau = require_real("tau", tau, min_value=0.0, min_inclusive=False)
    arithmetic = require_choice("arithmetic", arithmetic, ("float", "interval"))
    if arithmetic == "float":
        f0, f1, f2, fnorm2 = _float_gram_jet(block, num_classes)
        value = _loss_jet(Jet(f0, f1, f2), beta, tau, np.exp, np.log).a2
        return float(2 * value / fnorm2)
    m0, m1, m2, norm2 = block_gram_jet(block, num_classes)
    from mpmath import iv  # heavy optional import (interval arithmetic), only for certificates

    def enclose(a: np.ndarray) -> np.ndarray:
        return np.vectorize(lambda f: iv.mpf(f.numerator) / f.denominator, otypes=[object])(a)

    jet = Jet(enclose(m0), enclose(m1), enclose(m2))
    exp = np.vectorize(iv.exp, otypes=[object])
    log = np.vectorize(iv.log, otypes=[object])
    value = _loss_jet(jet, iv.mpf(beta), iv.mpf(tau), exp, log).a2
    return 2 * value / (iv.mpf(norm2.numerator) / norm2.denominator)


def reduced_curvatures(*, num_classes: int, dim: int, beta: float, tau: float = 1.0) -> dict[Block, float]:
    """{block: eigenvalue} (float) for every block of :func:`blocks_for`."""
    return {b: reduced_curvature(b, num_classes=num_classes, beta=beta, tau=tau) for b in blocks_for(num_classes, dim)}

