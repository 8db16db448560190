"""The correlated laws P_rho of the k negatives given the anchor, on ordered k-tuples (exact).

.. math::

    P_\\rho(y_1, \\dots, y_k \\mid x) = (1 - \\rho) \\prod_i q(y_i \\mid x) + \\rho\\, P_F(y_1, \\dots, y_k \\mid x),

with q the plain law of one negative and P_F one of :data:`FAMILIES` (the package docstring of
:mod:`proofs_check.ablations.negatives` defines them); every family keeps each negative's marginal law equal to q.

Sources: docs/theory.md, section 4 (Theorems 1-3 and their proofs); jiang2025hard, Theorems 1-3; harris1960.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Mapping
from fractions import Fraction
from typing import Any

from ncgeom.validate import require_choice, require_int, require_real

__all__ = ["FAMILIES", "SEARCH_FAMILIES", "SEED", "VALUE_TOL", "START_NOISE", "require_rho", "tuple_law"]


#: Correlated negative laws P_F (module docstring); the first three are searched for Theorems 2 and 3.
FAMILIES: tuple[str, ...] = ("same-class", "copies", "without-replacement", "antithetic")
SEARCH_FAMILIES: tuple[str, ...] = FAMILIES[:3]
SEED = 0
# A configuration "beats" NC when its loss is below L(NC) - VALUE_TOL: the losses are weighted means of at most
# 8 x 2 x 120 float64 terms of size O(1) (rounding ~1e-15); 1e-9 leaves a wide margin.
VALUE_TOL = 1e-9
START_NOISE = 0.05
_F = Fraction


def require_rho(rho: Any) -> Fraction:
    """rho in [0, 1] as an exact Fraction (a float is taken at its exact binary value); ValueError naming rho."""
    require_real("rho", rho, min_value=0.0, max_value=1.0)
    return _F(rho)


def _product(values) -> Fraction:
    return functools.reduce(lambda a, b: a * b, values, _F(1))


def tuple_law(masses: Mapping[int, Fraction], *, num_negatives: int, family: str, rho: Any,
              classes: Mapping[int, int] | None = None,
              similarities: Mapping[int, Fraction] | None = None) -> dict[tuple[int, ...], Fraction]:
    """P_rho of the module docstring on ordered k-tuples of the eligible points (exact).

    ``masses`` {point: q(point | x)} sums to 1 over the eligible points; ``classes`` {point: class} is needed by
    ``same-class``, ``similarities`` {point: s} by ``antithetic`` (which sorts by it, ties by point id).
    """
    k = require_int("num_negatives", num_negatives, min_value=1)
    family = require_choice("family", family, FAMILIES)
    r = require_rho(rho)
    points = sorted(masses)
    if sum(masses.values(), _F(0)) != 1:
        raise ValueError("masses must sum to 1 over the eligible points")
    out = {t: (1 - r) * _product(masses[j] for j in t) for t in itertools.product(points, repeat=k)}
    if r == 0:
        return out
    corr: dict[tuple[int, ...], Fraction] = {}
    equal = len(set(masses.values())) == 1
    if family in ("without-replacement", "antithetic") and not equal:
        raise ValueError(f"family {family!r} needs eligible points of equal masses")
    if family == "same-class":
        if classes is None:
            raise ValueError("family 'same-class' needs classes")
        for c in sorted({classes[j] for j in points}):
            members = [j for j in points if classes[j] == c]
            weight = sum((masses[j] for j in members), _F(0))
            for t in itertools.product(members, repeat=k):
                corr[t] = weight * _product(masses[j] / weight for j in t)
    elif family == "copies":
        corr = {(j,) * k: masses[j] for j in points}
    elif family == "without-replacement":
        if len(points) < k:
            raise ValueError(f"family 'without-replacement' needs >= num_negatives = {k} eligible points")
        ordered = list(itertools.permutations(points, k))
        corr = {t: _F(1, len(ordered)) for t in ordered}
    else:  # antithetic
        if k != 2:
            raise ValueError(f"family 'antithetic' is defined for num_negatives = 2, got {k}")
        if similarities is None:
            raise ValueError("family 'antithetic' needs similarities")
        ranked = sorted(points, key=lambda j: (similarities[j], j))
        n = len(ranked)
        for i in range(n):
            corr[(ranked[i], ranked[n - 1 - i])] = _F(1, n)
    for t, p in corr.items():
        out[t] = out.get(t, _F(0)) + r * p
    return out
