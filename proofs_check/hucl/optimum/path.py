"""The path of the best HUCL geometry along beta: a grid, refinement near every change, continuous or first order.

For each beta of an ascending grid and each number n of points per class in ``per_class`` (n = 1: collapsed
classes), :func:`proofs_check.hucl.optimum.search.search_optimum` finds the best configuration; the *optimum at
beta* is the best over n (on a tie within ``VALUE_TOL`` the smallest n: a collapsed configuration is also an
n-point one). Every start list includes the winners at the previous grid point (continuation) and, for n > 1, the
collapsed winner with its points repeated, so the n-point search never ends above the collapsed one.

A **change** of the optimal geometry is a change of :func:`proofs_check.hucl.optimum.patterns.signature` between
consecutive grid points (within-class collapse, collisions, antipodal pairs, rank, symmetry group). Each change is
refined by bisection on beta to ``refine_tol``, re-searching at each midpoint with both ends' winners as extra
starts. It is **first order** when the winners at the two ends of the final bracket are apart (distance
:func:`jump` > ``JUMP_TOL``: the optimum jumps between two local minima whose values cross) and **continuous**
otherwise (a bifurcation: the new branch grows from the old one; the Hessian thresholds of
``proofs_check.hucl.optimum.split`` and ``proofs_check.hucl.local`` locate it exactly).

Evidence: numerical (a search can miss a better configuration; certified cases: ``proofs_check.hucl.optimum.certify``).
Source: docs/theory.md, section 4 ("HUCL: an open problem").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from ncgeom.validate import require_int, require_real
from proofs_check.hucl.optimum.loss import PsiOption
from proofs_check.hucl.optimum.patterns import gram_distance, signature
from proofs_check.hucl.optimum.search import OptimumSearch, search_optimum

__all__ = ["BETA_GRID", "PAPER_BETAS", "VALUE_TOL", "JUMP_TOL", "REFINE_TOL", "PathPoint", "Change", "OptimumPath",
           "jump", "optimum_at", "optimum_path", "point_summary"]

#: The grid over [0, 50]; it contains the betas the paper trains with (PAPER_BETAS).
BETA_GRID: tuple[float, ...] = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 5.0, 7.5, 10.0, 15.0, 20.0, 30.0, 50.0)
PAPER_BETAS: tuple[float, ...] = (2.0, 5.0, 10.0, 30.0)
# float64 losses are means of <= N n M terms of size O(1): rounding <= ~1e-14; the searches end with gradient
# norms <= ~1e-7, i.e. values within ~1e-13 of their local minimum; 1e-10 separates ties from differences.
VALUE_TOL = 1e-10
JUMP_TOL = 0.05  # the distance of :func:`jump` above which the two ends of a refined change are different minima
REFINE_TOL = 1e-3


@dataclass(frozen=True)
class PathPoint:
    """The optimum at one beta: the best search over n (``best``) and every n's search (``by_n``)."""

    beta: float
    best: OptimumSearch
    by_n: tuple[OptimumSearch, ...]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Change:
    """A change of the optimal geometry: the refined bracket [lo, hi], the patterns on either side, the distance of
    the two winners (:func:`jump`) and the kind ("first-order" or "continuous")."""

    bracket: tuple[float, float]
    before: str
    after: str
    before_signature: tuple
    after_signature: tuple
    jump: float
    kind: str
    before_point: PathPoint
    after_point: PathPoint

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class OptimumPath:
    """The path at one (C, d, k, tau, psi): the grid points, the changes, and the coverage of the searches."""

    num_classes: int
    dim: int
    num_negatives: int
    tau: float
    psi: str
    per_class: tuple[int, ...]
    points: tuple[PathPoint, ...]
    changes: tuple[Change, ...]
    num_random: int
    refine_tol: float
    seed: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def jump(a: OptimumSearch, b: OptimumSearch) -> float:
    """Distance of two optima: the class-Gram distance modulo class permutations, or the difference of their smallest
    within-class inner products, whichever is larger."""
    ga, gb = np.asarray(a.pattern.class_gram), np.asarray(b.pattern.class_gram)
    return max(gram_distance(ga, gb), abs(a.pattern.min_within - b.pattern.min_within))


def _lift(points: Sequence[Sequence[float]], n_from: int, n_to: int) -> np.ndarray | None:
    """A configuration with n_from points per class as one with n_to (repeating points), when n_from divides n_to."""
    z = np.asarray(points, dtype=np.float64)
    if n_to % n_from:
        return None
    c = z.shape[0] // n_from
    return np.concatenate([np.tile(z[i * n_from:(i + 1) * n_from], (n_to // n_from, 1)) for i in range(c)])


def optimum_at(beta: float, *, num_classes: int, dim: int, per_class: Sequence[int], tau: float, num_negatives: int,
               psi: PsiOption, num_random: int, generator, warm: Sequence[PathPoint] = ()) -> PathPoint:
    """The optimum at one beta (module docstring); ``warm`` are path points whose winners are extra starts."""
    by_n: list[OptimumSearch] = []
    for n in sorted(per_class):
        extra = []
        for point in warm:
            for s in point.by_n:
                lifted = _lift(s.points, s.per_class, n)
                if lifted is not None:
                    extra.append(lifted)
        for s in by_n:  # this beta's smaller n (the collapsed winner first)
            lifted = _lift(s.points, s.per_class, n)
            if lifted is not None:
                extra.append(lifted)
        by_n.append(search_optimum(num_classes=num_classes, dim=dim, per_class=n, beta=beta, tau=tau,
                                   num_negatives=num_negatives, psi=psi, num_random=num_random, generator=generator,
                                   extra=extra))
    best = by_n[0]
    for s in by_n[1:]:
        if s.value < best.value - VALUE_TOL:
            best = s
    return PathPoint(beta, best, tuple(by_n))


def optimum_path(*, num_classes: int, dim: int, tau: float = 1.0, num_negatives: int = 1, psi: PsiOption = "infonce",
                 per_class: Sequence[int] = (1, 2, 3), betas: Sequence[float] = BETA_GRID, num_random: int = 12,
                 refine_tol: float = REFINE_TOL, seed: int = 0) -> OptimumPath:
    """The path of the optimum along ``betas`` with every change refined and classified (module docstring)."""
    import torch  # heavy optional import

    c = require_int("num_classes", num_classes, min_value=2)
    d = require_int("dim", dim, min_value=2)
    refine_tol = require_real("refine_tol", refine_tol, min_value=0.0, min_inclusive=False)
    grid = [require_real("beta", float(b), min_value=0.0) for b in betas]
    if grid != sorted(grid) or not grid:
        raise ValueError(f"betas must be a non-empty ascending sequence, got {betas}")
    if not per_class or min(per_class) < 1:
        raise ValueError(f"per_class must be a non-empty sequence of n >= 1, got {per_class}")
    generator = torch.Generator().manual_seed(int(seed))
    common: dict[str, Any] = {"num_classes": c, "dim": d, "per_class": tuple(per_class), "tau": tau, "num_negatives": num_negatives,
              "psi": psi, "num_random": num_random, "generator": generator}
    points: list[PathPoint] = []
    for beta in grid:
        points.append(optimum_at(beta, warm=points[-1:], **common))
    changes = []
    for left, right in zip(points, points[1:]):
        if signature(left.best.pattern) == signature(right.best.pattern):
            continue
        changes.extend(_refine(left, right, refine_tol=refine_tol, common=common))
    return OptimumPath(c, d, num_negatives, tau, psi, tuple(per_class), tuple(points), tuple(changes), num_random,
                       refine_tol, int(seed))


def _refine(left: PathPoint, right: PathPoint, *, refine_tol: float, common: dict) -> list[Change]:
    """Bisect a change between two path points; a midpoint with a third signature splits it into two changes."""
    lo, hi = left, right
    while hi.beta - lo.beta > refine_tol:
        mid = optimum_at((lo.beta + hi.beta) / 2, warm=(lo, hi), **common)
        sig = signature(mid.best.pattern)
        if sig == signature(lo.best.pattern):
            lo = mid
        elif sig == signature(hi.best.pattern):
            hi = mid
        else:  # a third geometry in between: two changes
            return (_refine(lo, mid, refine_tol=refine_tol, common=common)
                    + _refine(mid, hi, refine_tol=refine_tol, common=common))
    distance = jump(lo.best, hi.best)
    return [Change((lo.beta, hi.beta), lo.best.pattern.name, hi.best.pattern.name, signature(lo.best.pattern),
                   signature(hi.best.pattern), distance, "first-order" if distance > JUMP_TOL else "continuous", lo, hi)]


def point_summary(point: PathPoint) -> dict[str, Any]:
    """A JSON-ready summary of a path point (the best configuration over n and every n's value)."""
    best = point.best
    return {"beta": point.beta, "value": best.value, "nc_value": best.nc_value, "per_class": best.per_class,
            "pattern": best.pattern.name, "collapsed": best.pattern.collapsed, "positions": list(best.pattern.positions),
            "min_within": best.pattern.min_within, "class_gram": [list(r) for r in best.pattern.class_gram],
            "rank": best.pattern.rank, "symmetry_order": best.pattern.symmetry_order,
            "orbits": None if best.pattern.orbits is None else [list(o) for o in best.pattern.orbits],
            "collisions": [list(p) for p in best.pattern.collisions], "pairs": [list(p) for p in best.pattern.pairs],
            "max_grad": best.max_grad, "by_n": [{"per_class": s.per_class, "value": s.value, "pattern": s.pattern.name,
                                                  "min_within": s.pattern.min_within} for s in point.by_n]}
