"""Vectorized interval arithmetic in float64 with outward rounding, and first-order derivatives (for the certificates).

An :class:`Interval` holds arrays ``lo <= hi``; every operation returns an enclosure of the exact result for every
real point of its inputs. The arithmetic operations (+, -, *, /) of IEEE 754 float64 are correctly rounded (error
<= half an ulp), so widening each computed endpoint by one ulp (``numpy.nextafter``) encloses the exact value. The
elementary functions are built from those operations only, with a proven remainder, so they do not depend on the
accuracy of a libm:

- exp(x) = 2^n e^r, r = x - n ln 2 (ln 2 enclosed in two floats), |r| <= 0.35,
  e^r = sum_{j <= 20} r^j / j! + R, |R| <= |r|^21 / 21! e^{|r|};
- log(x) = e ln 2 + log m, x = m 2^e, m in [1/sqrt 2, sqrt 2), log m = 2 atanh(s), s = (m - 1)/(m + 1), |s| <= 0.172,
  2 atanh(s) = 2 sum_{j <= 15} s^{2j+1}/(2j + 1) + R, |R| <= 2 |s|^33 / (33 (1 - s^2));
- cos, sin: r = x - q pi/2 (pi/2 enclosed), |r| <= 0.79, Taylor to degree 26 with remainder |r|^27/27!, then the
  quadrant; on an interval, cos and sin also take the extrema (+-1) of every critical point q pi (or q pi + pi/2)
  that may lie inside.

Every exact constant (ln 2, pi/2) is enclosed by two floats computed with mpmath at 50 digits and rounded outward.
:class:`Dual` carries a value and its gradient with respect to a few parameters, both as intervals (forward mode):
evaluated on a box, it encloses the function and its gradient over the box (the mean-value form of
``proofs_check.hucl.optimum.certify``). tests/test_hucl_optimum.py checks every enclosure against 50-digit mpmath.

Sources: R. E. Moore, R. B. Kearfott, M. J. Cloud, *Introduction to Interval Analysis*, SIAM 2009 (outward rounding,
natural and mean-value extensions); docs/theory.md, section 4 (the HUCL loss these certify).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import mpmath
import numpy as np

__all__ = ["Interval", "Dual", "point", "interval", "exp", "log", "log1p_exp", "cos", "sin", "logsumexp_free"]

_INF = np.inf


def _down(x):
    return np.nextafter(x, -_INF)


def _up(x):
    return np.nextafter(x, _INF)


def _enclose(value: mpmath.mpf) -> tuple[float, float]:
    """Two floats around a 50-digit mpmath value (rounded outward by one ulp past the nearest float)."""
    f = float(value)
    return float(np.nextafter(f, -_INF)), float(np.nextafter(f, _INF))


with mpmath.workdps(50):
    _LN2 = _enclose(mpmath.log(2))
    _PI_HALF = _enclose(mpmath.pi / 2)
    _PI = _enclose(mpmath.pi)
# 1/j! and 1/(2j + 1): Python's int / int true division is correctly rounded, so one ulp outward encloses them.
_INV_FACT = [(float(_down(1 / math.factorial(j))), float(_up(1 / math.factorial(j)))) for j in range(28)]
_INV_ODD = [(float(_down(1 / (2 * j + 1))), float(_up(1 / (2 * j + 1)))) for j in range(17)]


@dataclass(frozen=True)
class Interval:
    """An array of intervals [lo, hi] (numpy float64, broadcastable shapes), with enclosing arithmetic."""

    lo: Any
    hi: Any

    def __post_init__(self):
        object.__setattr__(self, "lo", np.asarray(self.lo, dtype=np.float64))
        object.__setattr__(self, "hi", np.asarray(self.hi, dtype=np.float64))

    @property
    def shape(self) -> tuple[int, ...]:
        return np.broadcast_shapes(self.lo.shape, self.hi.shape)

    @property
    def mid(self) -> np.ndarray:
        return self.lo / 2 + self.hi / 2

    @property
    def width(self) -> np.ndarray:
        return self.hi - self.lo

    def __getitem__(self, key) -> Interval:
        shape = self.shape
        return Interval(np.broadcast_to(self.lo, shape)[key], np.broadcast_to(self.hi, shape)[key])

    def __neg__(self) -> Interval:
        return Interval(-self.hi, -self.lo)

    def __add__(self, other) -> Interval:
        o = _as_interval(other)
        return Interval(_down(self.lo + o.lo), _up(self.hi + o.hi))

    __radd__ = __add__

    def __sub__(self, other) -> Interval:
        o = _as_interval(other)
        return Interval(_down(self.lo - o.hi), _up(self.hi - o.lo))

    def __rsub__(self, other) -> Interval:
        return _as_interval(other) - self

    def __mul__(self, other) -> Interval:
        o = _as_interval(other)
        products = [self.lo * o.lo, self.lo * o.hi, self.hi * o.lo, self.hi * o.hi]
        lo = np.minimum(np.minimum(products[0], products[1]), np.minimum(products[2], products[3]))
        hi = np.maximum(np.maximum(products[0], products[1]), np.maximum(products[2], products[3]))
        return Interval(_down(lo), _up(hi))

    __rmul__ = __mul__

    def __truediv__(self, other) -> Interval:
        o = _as_interval(other)
        if np.any(o.lo <= 0):
            raise ValueError("interval division needs a divisor with lo > 0")
        return self * Interval(_down(1.0 / o.hi), _up(1.0 / o.lo))

    def __rtruediv__(self, other) -> Interval:
        return _as_interval(other) / self

    def sum(self, axis: int) -> Interval:
        """Sum along ``axis``: numpy's float sum of each endpoint, widened by the bound gamma_{n-1} sum |x_i| on the
        rounding error of any summation order of n floats (Higham, *Accuracy and Stability of Numerical
        Algorithms*, 2002, section 4.2), gamma_m = m u / (1 - m u), u = 2^-53."""
        shape = self.shape
        lo, hi = np.broadcast_to(self.lo, shape), np.broadcast_to(self.hi, shape)
        n = shape[axis]
        gamma = (n - 1) * 2.0**-53 / (1 - (n - 1) * 2.0**-53) * (1 + 2.0**-50)
        slack = 1 + 4 * gamma  # the computed sum of |x_i| is within gamma of the true one
        err_lo = _up(gamma * slack * np.sum(np.abs(lo), axis=axis))
        err_hi = _up(gamma * slack * np.sum(np.abs(hi), axis=axis))
        return Interval(_down(_down(np.sum(lo, axis=axis)) - err_lo), _up(_up(np.sum(hi, axis=axis)) + err_hi))

    def contains(self, x) -> np.ndarray:
        x = np.asarray(x, dtype=np.float64)
        return (self.lo <= x) & (x <= self.hi)


def _as_interval(x) -> Interval:
    if isinstance(x, Interval):
        return x
    if isinstance(x, (int, float, np.floating, np.integer)) and not isinstance(x, bool):
        f = float(x)
        if float(f) != x:  # an int not exactly representable
            return Interval(_down(f), _up(f))
        return Interval(f, f)
    arr = np.asarray(x, dtype=np.float64)
    return Interval(arr, arr)


def point(x) -> Interval:
    """Degenerate intervals [x, x] for float64 ``x`` (taken as exact)."""
    arr = np.asarray(x, dtype=np.float64)
    return Interval(arr, arr)


def interval(lo, hi) -> Interval:
    """Intervals [lo, hi] (float64 arrays taken as exact); ValueError if some lo > hi."""
    lo, hi = np.asarray(lo, dtype=np.float64), np.asarray(hi, dtype=np.float64)
    if np.any(lo > hi):
        raise ValueError("interval needs lo <= hi everywhere")
    return Interval(lo, hi)


def _const(pair: tuple[float, float]) -> Interval:
    return Interval(np.float64(pair[0]), np.float64(pair[1]))


def _horner(coefficients: Sequence[tuple[float, float]], r: Interval) -> Interval:
    acc = _const(coefficients[-1])
    for c in reversed(coefficients[:-1]):
        acc = acc * r + _const(c)
    return acc


def _exp_point(x: np.ndarray) -> Interval:
    """Enclosure of e^x for float x (exact inputs), x finite."""
    x = np.asarray(x, dtype=np.float64)
    small = x < -740.0  # e^x < 5e-322: enclose by [0, smallest subnormal * 2]
    big = x > 709.0
    xs = np.where(small | big, 0.0, x)
    n = np.rint(xs / _LN2[0])
    r = point(xs) - point(n) * _const(_LN2)  # n is an integer-valued float: exact as a point
    rmax = np.maximum(np.abs(r.lo), np.abs(r.hi))
    poly = _horner(_INV_FACT[:21], r)
    rem = _up(2.0 * rmax ** 21 * _INV_FACT[21][1] * 1.5)  # e^{|r|} <= e^{0.36} < 1.5; x2 covers pow's rounding
    val = Interval(_down(poly.lo - rem), _up(poly.hi + rem))
    lo = _down(np.ldexp(val.lo, n.astype(np.int64)))
    hi = _up(np.ldexp(val.hi, n.astype(np.int64)))
    lo = np.where(small, 0.0, np.where(big, np.finfo(np.float64).max, lo))
    hi = np.where(small, 1e-320, np.where(big, _INF, hi))
    return Interval(np.maximum(lo, 0.0), hi)


def exp(x: Interval) -> Interval:
    """e^x (monotone: the endpoints' enclosures)."""
    x = _as_interval(x)
    return Interval(_exp_point(x.lo).lo, _exp_point(x.hi).hi)


def _log_point(x: np.ndarray) -> Interval:
    """Enclosure of log x for float x > 0."""
    x = np.asarray(x, dtype=np.float64)
    if np.any(x <= 0):
        raise ValueError("log needs x > 0")
    m, e = np.frexp(x)  # x = m 2^e exactly, m in [0.5, 1)
    low = m < 0.7071067811865476
    m = np.where(low, 2 * m, m)  # exact
    e = np.where(low, e - 1, e)
    s = (point(m) - 1.0) / (point(m) + 1.0)  # m - 1 is exact (Sterbenz); the division is enclosed
    s2 = s * s
    smax = np.maximum(np.abs(s.lo), np.abs(s.hi))
    series = _horner(_INV_ODD[:16], s2) * s * 2.0  # 2 sum_{j < 16} s^{2j+1}/(2j+1)
    rem = _up(4.0 * smax ** 33 / (33.0 * (1.0 - smax * smax)))  # x2 covers the rounding of the bound
    log_m = Interval(_down(series.lo - rem), _up(series.hi + rem))
    return log_m + point(e.astype(np.float64)) * _const(_LN2)


def log(x: Interval) -> Interval:
    """log x for x > 0 (monotone)."""
    x = _as_interval(x)
    return Interval(_log_point(x.lo).lo, _log_point(x.hi).hi)


def log1p_exp(x: Interval) -> Interval:
    """softplus(x) = log(1 + e^x), x <= ~700."""
    return log(exp(x) + 1.0)


def _trig_point(x: np.ndarray, shift: int) -> Interval:
    """Enclosure of cos(x + shift pi/2) for float x, |x| <= 1e6 (shift = 0: cos, shift = -1: sin)."""
    x = np.asarray(x, dtype=np.float64)
    if np.any(np.abs(x) > 1e6):
        raise ValueError("cos / sin need |x| <= 1e6")
    q = np.rint(x / _PI_HALF[0])
    r = point(x) - point(q) * _const(_PI_HALF)
    rmax = np.maximum(np.abs(r.lo), np.abs(r.hi))
    r2 = r * r
    cos_r = _horner([(-c[1], -c[0]) if j % 2 else c for j, c in enumerate(_INV_FACT[0:27:2])], r2)
    sin_r = _horner([(-c[1], -c[0]) if j % 2 else c for j, c in enumerate(_INV_FACT[1:28:2])], r2) * r
    rem = _up(2.0 * rmax ** 27 * _INV_FACT[27][1])  # x2 covers pow's rounding
    cos_r = Interval(_down(cos_r.lo - rem), _up(cos_r.hi + rem))
    sin_r = Interval(_down(sin_r.lo - rem), _up(sin_r.hi + rem))
    quadrant = (q.astype(np.int64) + shift) % 4
    lo = np.select([quadrant == 0, quadrant == 1, quadrant == 2], [cos_r.lo, -sin_r.hi, -cos_r.hi], sin_r.lo)
    hi = np.select([quadrant == 0, quadrant == 1, quadrant == 2], [cos_r.hi, -sin_r.lo, -cos_r.lo], sin_r.hi)
    return Interval(np.maximum(lo, -1.0), np.minimum(hi, 1.0))


def _trig(x: Interval, shift: int) -> Interval:
    """cos(x + shift pi/2) on intervals: endpoints, plus +-1 at every critical point that may lie inside."""
    x = _as_interval(x)
    a, b = _trig_point(x.lo, shift), _trig_point(x.hi, shift)
    lo, hi = np.minimum(a.lo, b.lo), np.maximum(a.hi, b.hi)
    # critical points of cos(y + shift pi/2): y = j pi - shift pi/2, value (-1)^j; enclose j pi - shift pi/2
    wide = (x.hi - x.lo) >= 6.3
    j_lo = np.floor((x.lo + shift * _PI_HALF[0]) / _PI[0]) - 2  # a margin of 2 covers every rounding here
    j_hi = np.ceil((x.hi + shift * _PI_HALF[0]) / _PI[0]) + 2
    for offset in range(int(np.max(np.where(wide, 0, j_hi - j_lo), initial=0)) + 1):
        j = j_lo + offset
        valid = j <= j_hi
        crit = point(j) * _const(_PI) - point(float(shift)) * _const(_PI_HALF)
        inside = valid & (crit.hi >= x.lo) & (crit.lo <= x.hi)
        even = (np.abs(j) % 2) == 0
        hi = np.where(inside & even, 1.0, hi)
        lo = np.where(inside & ~even, -1.0, lo)
    lo, hi = np.where(wide, -1.0, lo), np.where(wide, 1.0, hi)
    return Interval(lo, hi)


def cos(x: Interval) -> Interval:
    """cos x on intervals."""
    return _trig(x, 0)


def sin(x: Interval) -> Interval:
    """sin x = cos(x - pi/2) on intervals."""
    return _trig(x, -1)


def logsumexp_free(x: Interval, axis: int) -> Interval:
    """log sum_i e^{x_i} along ``axis``, shifted by the largest upper end (no overflow)."""
    shift = np.max(x.hi, axis=axis, keepdims=True)
    return log(exp(x - point(shift)).sum(axis)) + point(np.squeeze(shift, axis=axis))


@dataclass(frozen=True)
class Dual:
    """A value and its gradient with respect to p parameters, all intervals (forward-mode derivatives).

    ``value`` has shape [...]; ``grad`` is a tuple of p intervals of the same shape.
    """

    value: Interval
    grad: tuple[Interval, ...]

    def __neg__(self) -> Dual:
        return Dual(-self.value, tuple(-g for g in self.grad))

    def __add__(self, other) -> Dual:
        if isinstance(other, Dual):
            return Dual(self.value + other.value, tuple(a + b for a, b in zip(self.grad, other.grad)))
        return Dual(self.value + other, self.grad)

    __radd__ = __add__

    def __sub__(self, other) -> Dual:
        return self + (-other if isinstance(other, Dual) else -_as_interval(other))

    def __rsub__(self, other) -> Dual:
        return (-self) + other

    def __mul__(self, other) -> Dual:
        if isinstance(other, Dual):
            return Dual(self.value * other.value,
                        tuple(a * other.value + self.value * b for a, b in zip(self.grad, other.grad)))
        o = _as_interval(other)
        return Dual(self.value * o, tuple(g * o for g in self.grad))

    __rmul__ = __mul__

    def __truediv__(self, other) -> Dual:
        if isinstance(other, Dual):
            inv = 1.0 / other.value
            return self * Dual(inv, tuple(-g * inv * inv for g in other.grad))
        return self * (1.0 / _as_interval(other))

    def __getitem__(self, key) -> Dual:
        return Dual(self.value[key], tuple(g[key] for g in self.grad))

    def sum(self, axis: int) -> Dual:
        return Dual(self.value.sum(axis), tuple(g.sum(axis) for g in self.grad))

    def exp(self) -> Dual:
        e = exp(self.value)
        return Dual(e, tuple(g * e for g in self.grad))

    def log(self) -> Dual:
        inv = 1.0 / self.value
        return Dual(log(self.value), tuple(g * inv for g in self.grad))

    def cos(self) -> Dual:
        s = sin(self.value)
        return Dual(cos(self.value), tuple(-(g * s) for g in self.grad))

    def sin(self) -> Dual:
        c = cos(self.value)
        return Dual(sin(self.value), tuple(g * c for g in self.grad))
