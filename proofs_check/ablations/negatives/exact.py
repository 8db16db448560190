"""Exact losses of finite models under the correlated laws, and where along rho Theorem 1 fails (Fractions, sympy).

L_hard - L_plain = E_x Cov_{P_rho}(g, h) / Z_rho(x), g = psi(S - s^+), h = prod_i eta(S_i) (docs/theory.md, section 4,
Theorem 1, proof steps 2-3, on the correlated law P_rho of :mod:`.laws`). :func:`counterexamples` gives the smallest
finite models with L_hard < L_plain for ``same-class``, ``without-replacement`` and ``antithetic``, and
:func:`failure_threshold` the exact set of rho where they fail.

Sources: docs/theory.md, section 4 (Theorems 1-3 and their proofs); jiang2025hard, Theorems 1-3; harris1960.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from fractions import Fraction
from typing import Any

import sympy

from ncgeom.validate import require_choice
from ncgeom.vocabulary import SETTINGS, is_hard, is_supervised
from proofs_check.ablations.negatives.laws import tuple_law
from proofs_check.harris import FiniteModel, hinge_psi, step_eta

__all__ = ["max_hinge_psi", "correlated_model_loss", "failure_threshold", "counterexamples"]


_F = Fraction
_ZERO = _F(0)
_ROOT_TOL = _F(1, 10**12)  # width of the isolating intervals of failure_threshold


def _product(values) -> Fraction:
    return functools.reduce(lambda a, b: a * b, values, _F(1))


def max_hinge_psi(margin: Fraction = _ZERO) -> Callable[[tuple], Fraction]:
    """psi(t) = max(0, max_i t_i + margin): convex and argument-wise non-decreasing (R1, R2), exact."""
    return lambda t: max(_F(0), max(t) + margin)


def _anchor_terms(model: FiniteModel, i: int, setting: str, psi: Callable, eta: Callable | None, *, num_negatives: int,
                  family: str, rho: Any) -> tuple[Fraction, Fraction, Fraction]:
    """(E_P[g h], E_P[h], E_P[g]) for anchor i under P_rho, g = E_{x+}[psi(S - s+)], h = prod eta(S_i) (1 if None)."""
    n = len(model.labels)
    eligible = [j for j in range(n) if not is_supervised(setting) or model.labels[j] != model.labels[i]]
    total = sum((model.mass(j) for j in eligible), _F(0))
    law = tuple_law({j: model.mass(j) / total for j in eligible}, num_negatives=num_negatives, family=family, rho=rho,
                    classes={j: model.labels[j] for j in eligible}, similarities={j: model.gram[i][j] for j in eligible})
    own = [j for j in range(n) if model.labels[j] == model.labels[i]]
    own_mass = sum((model.mass(j) for j in own), _F(0))
    egh = eh = eg = _F(0)
    for t, p in law.items():
        if p == 0:
            continue
        s = [model.gram[i][j] for j in t]
        g = sum((model.mass(j) / own_mass * psi(tuple(x - model.gram[i][j] for x in s)) for j in own), _F(0))
        h = _product(eta(x) for x in s) if eta is not None else _F(1)
        egh, eh, eg = egh + p * g * h, eh + p * h, eg + p * g
    return egh, eh, eg


def correlated_model_loss(model: FiniteModel, setting: str, psi: Callable, *, num_negatives: int, family: str,
                          rho: Any, eta: Callable | None = None) -> Fraction:
    """Exact loss of a finite model with negatives from P_rho (tilted by prod eta in the hard case).

    .. math::

        L = \\sum_x m_x \\frac{\\mathbb E_{P_\\rho}[g\\,h]}{\\mathbb E_{P_\\rho}[h]}, \\qquad
        g(y) = \\sum_{x^+} p(x^+ \\mid x)\\, \\psi\\big((s_{x y_i} - s_{x x^+})_i\\big), \\quad h(y) = \\prod_i \\eta(s_{x y_i}),

    where m = the model's masses, positives are drawn from the anchor's class (masses renormalized) and
    ``setting`` (scl or ucl) says which points are eligible negatives; eta = None is the plain loss (h = 1).
    At rho = 0 this is :func:`proofs_check.harris.model_loss`.
    """
    if is_hard(require_choice("setting", setting, SETTINGS)):
        raise ValueError(f"setting must be 'scl' or 'ucl' (the tilt is given by eta), got {setting!r}")
    total = _F(0)
    for i in range(len(model.labels)):
        egh, eh, _ = _anchor_terms(model, i, setting, psi, eta, num_negatives=num_negatives, family=family, rho=rho)
        total += model.mass(i) * egh / eh
    return total


def failure_threshold(model: FiniteModel, setting: str, psi: Callable, eta: Callable, *, num_negatives: int,
                      family: str, tol: Fraction = _ROOT_TOL) -> dict[str, Any]:
    """Where L_hard - L_plain < 0 along rho in [0, 1], exactly.

    Each anchor's E_P[g h], E_P[h], E_P[g] is affine in rho, so the gap is a rational function of rho with a
    positive denominator; the real roots of its numerator in (0, 1) are isolated by sympy in intervals of rational
    endpoints of width <= ``tol``, and the sign between consecutive roots is evaluated exactly. Returns the roots'
    intervals, the exact gap at rho = 0 and 1, and ``negative_on``: the pieces of [0, 1] where the gap is < 0, each
    as [left, right] with a root's interval (or the exact end point 0 or 1) at either end.
    """
    r = sympy.Symbol("rho")
    gap = sympy.Integer(0)
    for i in range(len(model.labels)):
        ends = [_anchor_terms(model, i, setting, psi, eta, num_negatives=num_negatives, family=family, rho=x)
                for x in (0, 1)]
        egh, eh, eg = (sympy.Rational(a) + (sympy.Rational(b) - sympy.Rational(a)) * r for a, b in zip(*ends))
        gap += sympy.Rational(model.mass(i)) * (egh / eh - eg)
    gap = sympy.together(gap)
    numerator, _ = sympy.fraction(gap)
    poly = sympy.Poly(sympy.expand(numerator), r)
    eps = sympy.Rational(tol.numerator, tol.denominator)
    roots = [(lo, hi) for (lo, hi), _ in poly.intervals(eps=eps) if hi > 0 and lo < 1 and not lo == hi == 1
             and not lo == hi == 0]
    cuts: list[Any] = [sympy.Integer(0), *roots, sympy.Integer(1)]
    negative_on = []
    for left, right in zip(cuts, cuts[1:]):
        a = left[1] if isinstance(left, tuple) else left
        b = right[0] if isinstance(right, tuple) else right
        if _as_fraction(gap.subs(r, (a + b) / 2)) < 0:
            negative_on.append([[str(x) for x in left] if isinstance(left, tuple) else str(left),
                                [str(x) for x in right] if isinstance(right, tuple) else str(right)])
    return {"roots": [[str(lo), str(hi)] for lo, hi in roots], "roots_float": [float((lo + hi) / 2) for lo, hi in roots],
            "gap_at_0": _as_fraction(gap.subs(r, 0)), "gap_at_1": _as_fraction(gap.subs(r, 1)),
            "negative_on": negative_on}


def _as_fraction(value) -> Fraction:
    """A sympy Rational as a Fraction."""
    value = sympy.Rational(value)
    return _F(int(value.p), int(value.q))


def _model(points: Sequence[Fraction], labels: Sequence[int]) -> FiniteModel:
    """Points of R^1 (exact), uniform masses."""
    return FiniteModel(tuple(tuple(a * b for b in points) for a in points), tuple(labels))


def counterexamples() -> list[dict[str, Any]]:
    """The smallest finite models with L_hard < L_plain (module docstring), one per failing family and setting.

    Points of the unit ball of R^1 with uniform masses, psi a hinge and eta a step (1.1 and 1.2 hold). They are
    minimal in points and k: with k = 1 every law is i.i.d.; with at most two distinct similarities per anchor an
    exchangeable law cannot fail (h is a non-decreasing function of the number N of high similarities and
    E[g | N] is non-decreasing in N), so an anchor needs three eligible points: 3 points for UCL, 4 for SCL; and
    ``without-replacement`` cannot fail with k = 2 (module docstring), so its model has k = 3.
    """
    half, one = _F(1, 2), _F(1)
    # family, setting, points, labels, k, rho, psi, its text, eta's knot and height
    cases: list[tuple[str, str, tuple, tuple, int, Fraction, Callable, str, Fraction, int]] = [
        ("same-class", "ucl", (-1, 1, 0), (0, 0, 1), 2, one, max_hinge_psi(-one), "max(0, max_i t_i - 1)", _ZERO, 3),
        ("same-class", "scl", (-1, 1, -half, -half), (0, 0, 1, 2), 2, one, max_hinge_psi(_ZERO), "max(0, max_i t_i)",
         _ZERO, 3),
        ("without-replacement", "ucl", (-1, 0, 1), (0, 0, 1), 3, _F(9, 10), max_hinge_psi(one),
         "max(0, max_i t_i + 1)", _ZERO, 9),
        ("antithetic", "ucl", (-1, 0, 1), (0, 0, 1), 2, one, hinge_psi(one), "(1/2) sum_i max(0, t_i + 1)", -half, 3),
        ("antithetic", "scl", (-1, -half, 1, 1), (0, 0, 1, 2), 2, one, hinge_psi(_F(3, 2)),
         "(1/2) sum_i max(0, t_i + 3/2)", -half, 3),
    ]
    out = []
    for family, setting, coords, labels, k, rho, psi, psi_text, knot, height in cases:
        points = [_F(x) for x in coords]
        model = _model(points, labels)
        eta = step_eta([knot], [_F(height)])
        plain, hard = (correlated_model_loss(model, setting, psi, num_negatives=k, family=family, rho=rho, eta=e)
                       for e in (None, eta))
        out.append({"family": family, "setting": setting, "points": points, "labels": list(labels), "k": k,
                    "rho": rho, "psi": psi, "psi_text": psi_text, "eta": eta, "eta_text": f"1 + {height} [s >= {knot}]",
                    "plain": plain, "hard": hard, "model": model,
                    "threshold": failure_threshold(model, setting, psi, eta, num_negatives=k, family=family)})
    return out
