"""How the symbolic checks decide a statement: proven, refuted by a witness, or undecided.

A symbolic check never compares two sympy expressions with ``==``. It decides

- an identity ``lhs = rhs`` by ``simplify(lhs - rhs)`` being the integer 0 (or sympy proving
  ``is_zero``), after trying ``expand``/``cancel`` normal forms;
- a sign ``e >= 0`` by sympy's assumption system on ``factor(cancel(e))`` (symbols carry their
  assumptions, e.g. ``u = exp(t / tau)`` is ``positive``).

What sympy cannot decide is searched for a *witness*: the expression is evaluated at rational probe
points with 50 significant digits (sympy's ``evalf`` / mpmath). A value of magnitude well above
10^-30 refutes the statement (``False``); no witness leaves it undecided (``None``), which a checker
reports as ``unresolved``, never ``pass``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from fractions import Fraction

import sympy as sp

from proofs_check.records import Status

__all__ = [
    "DIGITS",
    "WITNESS_THRESHOLD",
    "probe_points",
    "decide_zero",
    "decide_nonnegative",
    "to_sympy",
    "fmt",
    "status_of",
    "VERDICT_WORDS",
]

VERDICT_WORDS = {True: "proven", False: "refuted", None: "undecided"}

DIGITS = 50
"""Significant digits of every numerical evaluation in proofs_check.symbolic."""

WITNESS_THRESHOLD = sp.Float("1e-30", DIGITS)
"""A 50-digit value beyond this magnitude is certainly non-zero (20 digits of margin)."""

# Generic rationals, far from the singular points 0, 1 and from each other.
_PROBE_VALUES = (sp.Rational(7, 3), sp.Rational(1, 3), sp.Rational(13, 5), sp.Rational(2, 7), sp.Rational(29, 11))
_PROBE_INTEGERS = (sp.Integer(3), sp.Integer(5), sp.Integer(7), sp.Integer(11), sp.Integer(13))
_PROBE_SIGNED = (sp.Rational(-1, 3), sp.Rational(5, 7), sp.Rational(-9, 4), sp.Rational(3, 2), sp.Rational(-2, 5))


def to_sympy(x) -> sp.Expr:
    """Exact sympy number from an int, Fraction or sympy object (floats are rejected: not exact)."""
    if isinstance(x, float):
        raise ValueError(f"exact value expected (int, Fraction, sympy), got float {x!r}")
    if isinstance(x, Fraction):
        return sp.Rational(x.numerator, x.denominator)
    return sp.sympify(x)


def fmt(x) -> str:
    """Short printable form of a sympy/mpmath value for the ``details`` of a CheckResult."""
    try:
        return str(sp.N(x, 20)) if not isinstance(x, str) else x
    except (TypeError, ValueError):
        return str(x)


def probe_points(symbols: Iterable[sp.Symbol], *, count: int = 3) -> list[dict]:
    """``count`` substitutions of generic rationals for ``symbols`` (positive ones get positive values)."""
    syms = sorted(set(symbols), key=lambda s: s.name)
    points = []
    for i in range(count):
        point = {}
        for j, s in enumerate(syms):
            if s.is_integer:
                pool = _PROBE_INTEGERS
            elif s.is_positive or s.is_nonnegative:
                pool = _PROBE_VALUES
            else:
                pool = _PROBE_SIGNED
            point[s] = pool[(i + 2 * j) % len(pool)]
        points.append(point)
    return points


def _evaluate(expr: sp.Expr, point: Mapping) -> sp.Expr | None:
    try:
        val = sp.N(expr.subs(point), DIGITS)
    except (TypeError, ValueError, ZeroDivisionError):
        return None
    if not val.is_number or val.has(sp.zoo, sp.nan, sp.oo, -sp.oo) or val.is_real is not True:
        return None  # undefined or non-real there: not a witness
    return val


def decide_zero(expr, *, probes: Sequence[Mapping] | None = None) -> tuple[bool | None, dict]:
    """Decide whether ``expr`` is identically zero.

    Returns ``(True, info)`` when ``simplify`` (or an expand/cancel normal form) gives 0,
    ``(False, info)`` with ``info["witness"]`` when a 50-digit evaluation at a probe point is
    non-zero, ``(None, info)`` otherwise.
    """
    expr = sp.sympify(expr)
    for normal_form in (sp.expand, sp.cancel, sp.simplify):
        reduced = normal_form(expr)
        if reduced == 0 or reduced.is_zero is True:  # structural test against the integer 0 only
            return True, {"method": normal_form.__name__}
        if normal_form is sp.cancel and reduced.is_rational_function():
            break  # canonical p/q form and not 0: simplify cannot do better; look for the witness
    if not expr.free_symbols:
        val = _evaluate(expr, {})
        if val is not None and abs(val) > WITNESS_THRESHOLD:
            return False, {"value": fmt(val)}
        return None, {"residual": str(reduced)}
    for point in probes if probes is not None else probe_points(expr.free_symbols):
        val = _evaluate(expr, point)
        if val is not None and abs(val) > WITNESS_THRESHOLD:
            return False, {"witness": {str(k): str(v) for k, v in point.items()}, "value": fmt(val)}
    return None, {"residual": str(reduced)}


def decide_nonnegative(expr, *, probes: Sequence[Mapping] | None = None) -> tuple[bool | None, dict]:
    """Decide ``expr >= 0`` for all values of its symbols allowed by their assumptions.

    sympy's assumptions on ``factor(cancel(expr))`` first; then a search for a point where the
    50-digit value is below ``-WITNESS_THRESHOLD``.
    """
    expr = sp.sympify(expr)
    reduced = sp.factor(sp.cancel(expr)) if expr.free_symbols else expr
    verdict = reduced.is_nonnegative
    if verdict is True:
        return True, {"form": str(reduced)}
    pts = list(probes) if probes is not None else probe_points(expr.free_symbols)
    for point in pts or [{}]:
        val = _evaluate(reduced, point)
        if val is not None and val < -WITNESS_THRESHOLD:
            return False, {"witness": {str(k): str(v) for k, v in point.items()}, "value": fmt(val), "form": str(reduced)}
    return None, {"form": str(reduced)}


def status_of(decisions: Iterable[bool | None]) -> Status:
    """``fail`` if any decision is False, else ``unresolved`` if any is None, else ``pass``."""
    ds = list(decisions)
    if any(d is False for d in ds):
        return "fail"
    if any(d is None for d in ds):
        return "unresolved"
    return "pass"
