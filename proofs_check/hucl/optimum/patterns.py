"""Names for a configuration of n points per class: within-class collapse, collisions, pairs, symmetry group.

A configuration Z [C n, d] (point j in class j // n) is summarized by

- its **within-class structure**: the number of distinct positions of each class (points closer than
  ``position_tol`` in inner product, 1 - s <= tol, count as one) and the smallest within-class inner product;
- its **class Gram** M: the Gram of the normalized class means (for a collapsed configuration the Gram of the
  class vectors, unit diagonal);
- **collisions** (M_cc' >= 1 - ``tol``: two classes at one point), **antipodal pairs** (M_cc' <= -1 + ``pair_tol``) and
  the numerical rank of M;
- the **symmetry group** of M: the permutations sigma of the classes with ||M - P_sigma M P_sigma^T||_inf <=
  ``tol`` (its order and its orbits on the classes). NC has the full symmetric group S_C.

:func:`signature` is the tuple compared along beta (``proofs_check.hucl.optimum.path``): a change of it is a change
of the optimal geometry. :func:`gram_distance` is the Frobenius distance of two class Grams minimized over class
permutations (exact enumeration for C <= 7; a lower bound of it above).

Source: docs/theory.md, section 4 ("HUCL: an open problem"; the ETF and its Gram).
"""

from __future__ import annotations

import itertools
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from ncgeom.geometry import gram_etf_residual
from ncgeom.validate import require_int

__all__ = ["Pattern", "describe", "signature", "gram_distance", "class_gram", "automorphisms", "MAX_PERMUTED_CLASSES",
           "SYMMETRY_TOL", "POSITION_TOL", "PAIR_TOL", "RANK_TOL", "NEAR_ETF"]

MAX_PERMUTED_CLASSES = 7  # 7! = 5040 permutations: the largest C for exact symmetry groups and distances
# The searches stop at gradient norms <= ~1e-7 (recorded), so Gram entries are accurate to ~1e-6 away from
# degenerate minima; 1e-4 separates "equal" from "different" with a wide margin on both sides.
SYMMETRY_TOL = 1e-4
POSITION_TOL = 1e-6  # 1 - s below this: one position (s = cos of an angle; 1e-6 is an angle of 1.4e-3)
PAIR_TOL = 0.05  # M_cc' <= -1 + 0.05: a near-antipodal pair (the convention of docs/results.md)
RANK_TOL = 1e-6  # eigenvalues of M above this count towards its rank
NEAR_ETF = 0.05  # ||M - G_ETF||_F below this: "near the ETF" (proofs_check.hucl.search.NEAR_NC)


@dataclass(frozen=True)
class Pattern:
    """The summary of one configuration (module docstring).

    collapsed : every class at one position; positions : distinct positions per class (sorted, descending);
    min_within : smallest within-class inner product (1.0 when collapsed); class_gram : M [C][C];
    etf_residual : ||M - G_ETF||_F; collisions / pairs : class pairs (c, c') that collide / are near-antipodal;
    rank : numerical rank of M; symmetry_order : |Aut(M)|; orbits : the orbits of Aut(M) on the classes;
    name : a short name ("NC", "split NC", "1 near-antipodal pair", "cluster", ...).
    """

    collapsed: bool
    positions: tuple[int, ...]
    min_within: float
    class_gram: tuple[tuple[float, ...], ...]
    etf_residual: float
    collisions: tuple[tuple[int, int], ...]
    pairs: tuple[tuple[int, int], ...]
    rank: int
    symmetry_order: int | None
    orbits: tuple[tuple[int, ...], ...] | None
    name: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def class_gram(points: np.ndarray, per_class: int) -> np.ndarray:
    """Gram [C, C] of the normalized class means of ``points`` [C n, d] (rows normalized first)."""
    z = np.asarray(points, dtype=np.float64)
    z = z / np.linalg.norm(z, axis=1, keepdims=True)
    n = require_int("per_class", per_class, min_value=1)
    means = z.reshape(-1, n, z.shape[1]).mean(axis=1)
    means = means / np.linalg.norm(means, axis=1, keepdims=True)
    return means @ means.T


def automorphisms(gram: np.ndarray, *, tol: float = SYMMETRY_TOL) -> list[tuple[int, ...]] | None:
    """The class permutations sigma with max |M - M[sigma][:, sigma]| <= tol (None for C > MAX_PERMUTED_CLASSES)."""
    m = np.asarray(gram, dtype=np.float64)
    c = m.shape[0]
    if c > MAX_PERMUTED_CLASSES:
        return None
    return [p for p in itertools.permutations(range(c)) if np.abs(m - m[np.ix_(p, p)]).max() <= tol]


def _orbits(perms: list[tuple[int, ...]], c: int) -> tuple[tuple[int, ...], ...]:
    seen: set[int] = set()
    out = []
    for i in range(c):
        if i in seen:
            continue
        orbit = tuple(sorted({p[i] for p in perms}))
        seen |= set(orbit)
        out.append(orbit)
    return tuple(out)


def _positions(points: np.ndarray, per_class: int, tol: float) -> tuple[list[int], float]:
    z = np.asarray(points, dtype=np.float64)
    z = z / np.linalg.norm(z, axis=1, keepdims=True)
    n = per_class
    counts, low = [], 1.0
    for c in range(z.shape[0] // n):
        block = z[c * n:(c + 1) * n]
        s = block @ block.T
        low = min(low, float(s.min()))
        reps: list[int] = []
        for j in range(n):
            if not any(1.0 - s[j, r] <= tol for r in reps):
                reps.append(j)
        counts.append(len(reps))
    return counts, low


def describe(points: np.ndarray, per_class: int, *, tol: float = SYMMETRY_TOL, position_tol: float = POSITION_TOL,
             pair_tol: float = PAIR_TOL) -> Pattern:
    """The :class:`Pattern` of ``points`` [C n, d] (module docstring).

    Example: the simplex ETF with n = 1 is "NC" with symmetry order C!.
    """
    n = require_int("per_class", per_class, min_value=1)
    counts, low = _positions(points, n, position_tol)
    m = class_gram(points, n)
    c = m.shape[0]
    collapsed = all(x == 1 for x in counts)
    pairs_all = [(a, b) for a in range(c) for b in range(a + 1, c)]
    collisions = tuple(p for p in pairs_all if m[p] >= 1.0 - tol)
    pairs = tuple(p for p in pairs_all if m[p] <= -1.0 + pair_tol)
    rank = int((np.linalg.eigvalsh(m) > RANK_TOL).sum())
    perms = automorphisms(m, tol=tol)
    order = None if perms is None else len(perms)
    orbits = None if perms is None else _orbits(perms, c)
    residual = gram_etf_residual(m)
    off = m[~np.eye(c, dtype=bool)]
    prefix = "" if collapsed else f"split ({'+'.join(map(str, sorted(counts, reverse=True)))} positions): "
    if residual < tol:
        name = "NC" if collapsed else "split NC (class means at the ETF)"
    elif off.max() - off.min() <= tol:
        name = prefix + f"equiangular, inner product {off.mean():.4f}; rank {rank}"
    else:
        parts = []
        if collisions:
            parts.append(f"{len(collisions)} colliding class pair(s)")
        if pairs:
            parts.append(f"{len(pairs)} near-antipodal pair(s)")
        if off.min() > 0:
            parts.append("cluster (all class inner products > 0)")
        if orbits is not None:
            parts.append(f"|Aut| = {order}, orbits " + " ".join("{" + ",".join(map(str, o)) + "}" for o in orbits))
        parts.append(f"rank {rank}")
        name = prefix + "; ".join(parts)
    return Pattern(collapsed, tuple(sorted(counts, reverse=True)), low, tuple(tuple(float(x) for x in row) for row in m),
                   residual, collisions, pairs, rank, order, orbits, name)


def signature(pattern: Pattern) -> tuple:
    """What a change of the optimal geometry changes: collapse and positions, collisions, rank, symmetry group.

    The orbit sizes (not the labels) of the symmetry group enter, so a relabelling of the classes is no change.
    Near-antipodal pairs and "cluster" are names, not part of the signature: they are thresholds on an inner product
    that moves continuously (an antipodal pair opening up is not a change of geometry).
    """
    orbit_sizes = None if pattern.orbits is None else tuple(sorted(len(o) for o in pattern.orbits))
    return (pattern.collapsed, pattern.positions, len(pattern.collisions), pattern.rank, pattern.symmetry_order,
            orbit_sizes)


def gram_distance(a: np.ndarray, b: np.ndarray) -> float:
    """min over class permutations sigma of ||A - P_sigma B P_sigma^T||_F for C <= MAX_PERMUTED_CLASSES.

    Above that, a lower bound of it: the larger of the distance of the sorted spectra (Hoffman-Wielandt) and of the
    sorted off-diagonal entries (a permutation of the classes permutes the off-diagonal entries).
    """
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    c = a.shape[0]
    if b.shape != a.shape:
        raise ValueError(f"a and b must have the same shape, got {a.shape} and {b.shape}")
    if c <= MAX_PERMUTED_CLASSES:
        return min(float(np.linalg.norm(a - b[np.ix_(p, p)])) for p in itertools.permutations(range(c)))
    off = ~np.eye(c, dtype=bool)
    spectra = np.linalg.norm(np.linalg.eigvalsh(a) - np.linalg.eigvalsh(b))
    entries = np.linalg.norm(np.sort(a[off]) - np.sort(b[off]))
    return float(max(spectra, entries))
