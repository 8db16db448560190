"""Adaptive refinement of a map: a quadtree along the boundary between cells that disagree (docs/theory.md, section 9,
"Phase maps").

A map's full-resolution grid has ``nx`` x ``ny`` cells, indexed (i, j). With L ``levels``, each refined axis takes
every :math:`2^L`-th index first (its length is :math:`2^L k + 1`, so both ends are in); an axis that is not refined
keeps every index throughout. Level by level the strides halve, and each new index pair is one of three kinds:

- the **midpoint of an edge** between two points of the coarser lattice along one axis: it is trained when its two
  ends disagree, and **inferred** (it takes their label) when they agree;
- the **centre of a box** of the coarser lattice (both axes refined): trained when the box's four corners disagree,
  inferred from them when they agree;

where "agree" means the same label and not ``"mixed"`` (a cell whose seeds disagree lies on a boundary: its
neighbourhood is always refined). Inferred points are corners of the next level like trained ones. So only the boxes
a boundary crosses are split, down to single cells: a quadtree along the boundary. The assumption, stated: a region
of another label that lies wholly inside a box (or along an edge) whose corners (ends) agree is not seen; the
coarser the first grid, the larger such a region can be. ``ncgeom phase --uniform`` trains every cell (levels 0) to
check it on a map (BENCHMARKS.md, "Phase maps").

All functions are pure: labels go in as a mapping from (i, j) to a label.

>>> lat = Lattice(5, 5, levels=1, refine_x=True, refine_y=True)
>>> lat.first()
[(0, 0), (0, 2), (0, 4), (2, 0), (2, 2), (2, 4), (4, 0), (4, 2), (4, 4)]
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ncgeom.validate import require_int

__all__ = ["Lattice", "Step", "agree", "MIXED"]

#: The label of a cell whose seeds disagree (never agrees with anything, itself included).
MIXED = "mixed"
Point = tuple[int, int]


def agree(labels: list[str]) -> str | None:
    """The common label of ``labels`` when they are all equal and not :data:`MIXED`, else None."""
    first = labels[0]
    return first if first != MIXED and all(label == first for label in labels) else None


@dataclass(frozen=True)
class Step:
    """What one level of refinement asks for: the points to train and the points inferred, with their labels."""

    train: tuple[Point, ...]
    inferred: Mapping[Point, str]


@dataclass(frozen=True)
class Lattice:
    """The full-resolution grid of one panel and how it is refined (module docstring)."""

    nx: int
    ny: int
    levels: int
    refine_x: bool
    refine_y: bool

    def __post_init__(self) -> None:
        require_int("nx", self.nx, min_value=2)
        require_int("ny", self.ny, min_value=2)
        require_int("levels", self.levels, min_value=0)
        if self.levels and not (self.refine_x or self.refine_y):
            raise ValueError("levels > 0 needs refine_x or refine_y")
        for name, n, refined in (("nx", self.nx, self.refine_x), ("ny", self.ny, self.refine_y)):
            if refined and (n - 1) % 2 ** self.levels:
                raise ValueError(f"{name} must be 2^levels k + 1 on a refined axis, got {n} with levels {self.levels}")

    def strides(self, level: int) -> tuple[int, int]:
        """(sx, sy) at ``level`` (``levels`` is the first grid, 0 the full resolution)."""
        step = 2 ** level
        return (step if self.refine_x else 1, step if self.refine_y else 1)

    def points(self, level: int) -> list[Point]:
        """Every point of the lattice at ``level``, in (i, j) order."""
        sx, sy = self.strides(level)
        return [(i, j) for i in range(0, self.nx, sx) for j in range(0, self.ny, sy)]

    def first(self) -> list[Point]:
        """The points of the first grid (every point when ``levels`` is 0)."""
        return self.points(self.levels)

    def refine(self, level: int, labels: Mapping[Point, str]) -> Step:
        """From ``level`` (every point of its lattice labelled in ``labels``) to ``level - 1``: the new points to train
        and those inferred (module docstring). ValueError when a corner has no label or ``level`` < 1."""
        require_int("level", level, min_value=1, max_value=self.levels)
        sx, sy = self.strides(level)
        fine_x, fine_y = self.strides(level - 1)
        coarse = set(self.points(level))
        train: list[Point] = []
        inferred: dict[Point, str] = {}
        for i in range(0, self.nx, fine_x):
            for j in range(0, self.ny, fine_y):
                if (i, j) in coarse:
                    continue
                on_x, on_y = i % sx == 0, j % sy == 0  # on a coarse column / row
                if on_x:  # between two coarse points of one column
                    corners = [(i, j - sy // 2), (i, j + sy // 2)]
                elif on_y:  # between two coarse points of one row
                    corners = [(i - sx // 2, j), (i + sx // 2, j)]
                else:  # the centre of a coarse box
                    corners = [(i + a, j + b) for a in (-(sx // 2), sx // 2) for b in (-(sy // 2), sy // 2)]
                missing = [c for c in corners if c not in labels]
                if missing:
                    raise ValueError(f"labels must hold every point of level {level}: {missing[0]} has none")
                common = agree([labels[c] for c in corners])
                if common is None:
                    train.append((i, j))
                else:
                    inferred[(i, j)] = common
        return Step(tuple(train), inferred)
