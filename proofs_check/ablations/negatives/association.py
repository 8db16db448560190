"""Association on the lattice of sorted rank tuples: the exact check that proves Theorem 1 for a correlated law.

Symmetrizing g (every family is exchangeable and h is symmetric), the bound L_hard >= L_plain holds for every psi
(R1) and every non-decreasing eta as soon as the law of the sorted rank tuple satisfies Cov(1_U, 1_V) >= 0 for every
pair of up-sets U, V (association): every non-decreasing function is a constant plus a non-negative combination of
up-set indicators (docs/theory.md, section 4, Theorem 1, proof step 3).

Sources: docs/theory.md, section 4 (Theorems 1-3 and their proofs); jiang2025hard, Theorems 1-3; harris1960.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import Any

import numpy as np

from ncgeom.validate import require_int
from proofs_check.ablations.negatives.laws import tuple_law

__all__ = ["sorted_rank_law", "upsets", "association_defect", "association_table"]


_F = Fraction


def sorted_rank_law(masses: Sequence[Fraction], *, num_negatives: int, family: str, rho: Any,
                    classes: Sequence[int] | None = None) -> dict[tuple[int, ...], Fraction]:
    """The law of the sorted rank tuple of the k negatives when the n eligible points are ranked 0..n-1 by
    similarity (``masses`` [n] their plain law; ``classes`` [n] for ``same-class``): P_rho pushed forward by sort."""
    n = len(masses)
    law = tuple_law(dict(enumerate(masses)), num_negatives=num_negatives, family=family, rho=rho,
                    classes=None if classes is None else dict(enumerate(classes)),
                    similarities={j: _F(j) for j in range(n)})
    out: dict[tuple[int, ...], Fraction] = {}
    for t, p in law.items():
        key = tuple(sorted(t))
        out[key] = out.get(key, _F(0)) + p
    return out


@functools.cache
def upsets(n: int, k: int) -> tuple[tuple[tuple[int, ...], ...], tuple[frozenset, ...]]:
    """(elements, up-sets) of the lattice of sorted k-tuples of {0..n-1} under the coordinate-wise order.

    Elements are processed from the top; an element may join an up-set only if every upper cover already has.
    """
    n, k = require_int("n", n, min_value=1), require_int("k", k, min_value=1)
    elements = tuple(itertools.combinations_with_replacement(range(n), k))
    order = sorted(elements, key=lambda e: -sum(e))

    def covers(e):
        return [e[:i] + (e[i] + 1,) + e[i + 1:] for i in range(k)
                if e[i] + 1 < n and (i == k - 1 or e[i] + 1 <= e[i + 1])]

    found: list[frozenset] = []

    def grow(index: int, current: frozenset) -> None:
        if index == len(order):
            found.append(current)
            return
        e = order[index]
        grow(index + 1, current)
        if all(c in current for c in covers(e)):
            grow(index + 1, current | {e})

    grow(0, frozenset())
    return elements, tuple(found)


def association_defect(law: Mapping[tuple[int, ...], Fraction], n: int, k: int) -> tuple[Fraction, Any]:
    """min over pairs of up-sets U, V of Cov(1_U, 1_V) under ``law`` (sorted k-tuples of {0..n-1}), exactly.

    >= 0 iff Cov(g, h) >= 0 for every pair of non-decreasing functions of the sorted tuple (both are constants
    plus non-negative combinations of up-set indicators), i.e. Theorem 1's step 3 holds for every psi and every
    (even joint) eta. Returns (the minimum, the witness (U, V) as sorted lists, or None when the minimum is >= 0).
    Integer arithmetic: the law is scaled by the lcm D of its denominators.
    """
    elements, ups = upsets(n, k)
    denominator = math.lcm(*(p.denominator for p in law.values()))
    if denominator > 2**28:  # keeps D^2 * (a sum of <= 10^3 terms) inside int64
        raise ValueError(f"law denominators too large for the integer check (lcm {denominator})")
    w = np.array([int(law.get(e, _F(0)) * denominator) for e in elements], dtype=np.int64)
    a = np.array([[e in u for e in elements] for u in ups], dtype=np.int64)  # [U, M]
    mass = a @ w
    cov = denominator * ((a * w) @ a.T) - np.outer(mass, mass)  # D^2 Cov, exact
    i, j = np.unravel_index(int(np.argmin(cov)), cov.shape)
    low = _F(int(cov[i, j]), denominator**2)
    return low, ([list(e) for e in sorted(ups[i])], [list(e) for e in sorted(ups[j])]) if low < 0 else None


def association_table(family: str, *, sizes: Sequence[tuple[int, int]], rhos: Sequence[Fraction],
                      masses: Sequence[Sequence[int]] = ()) -> list[dict[str, Any]]:
    """:func:`association_defect` of ``family`` for each (n, k) in ``sizes``, rho in ``rhos`` and mass vector (integer
    weights, normalized; uniform always included, the others only where they have length n and the family allows).
    ``same-class`` ranks alternate between two classes (0, 1, 0, ...)."""
    rows = []
    for n, k in sizes:
        vectors = [[1] * n, *(m for m in masses if len(m) == n and family == "copies")]
        for weights, rho in itertools.product(vectors, rhos):
            q = [_F(x, sum(weights)) for x in weights]
            law = sorted_rank_law(q, num_negatives=k, family=family, rho=rho, classes=[j % 2 for j in range(n)])
            low, witness = association_defect(law, n, k)
            rows.append({"n": n, "k": k, "rho": str(rho), "masses": [str(x) for x in q], "min_cov": str(low),
                         "witness": witness})
    return rows
