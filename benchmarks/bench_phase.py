#!/usr/bin/env python3
"""The cost of a phase map (issue 24's targets, BENCHMARKS.md "Phase maps"): the adaptive map against the uniform
grid at the same resolution, side by side, and whether they agree.

``run`` trains, one after the other with the same ``--workers``, the map with its refinement and the uniform grid
(``ncgeom phase ... --uniform``) into two folders, timing each command's wall clock and reading the machine's load
average before and after; ``record`` builds the record from two finished folders and times measured by the caller
(``/usr/bin/time``). Both write :class:`PhaseBenchmark` as JSON (``figures/phase/phase_benchmark.json`` for the
shipped numbers, which tools/docs_numbers.py reads). The record holds, for each map, its wall time, runs trained,
optimizer steps (the run-steps: each run's epochs times its batches per epoch), run-steps per second (the uniform
grid is one sweep of the map's shapes: its throughput is the sweeps', the adaptive map's the same runs cut into
levels), and the cells of the full-resolution grid on which both maps give the same label (every cell of the adaptive
map, trained or inferred, against the uniform map's trained label). ``replays``: the refinement replayed on the
uniform map's cells (:func:`replay`) at other levels and with a looser label (the class of a majority of the seeds):
what it would have trained, and how many cells it would have labelled differently from the uniform grid.

Usage::

    python benchmarks/bench_phase.py run phase_classes_batch --seeds exploratory --workers 2 --out DIR --json OUT.json
    python benchmarks/bench_phase.py record --adaptive DIR_A --adaptive-seconds S --uniform DIR_U --uniform-seconds S \\
        --load "..." --machine "..." --json OUT.json
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from ncgeom.phase.records import CellRecord, PhaseMap  # noqa: E402

__all__ = ["MapCost", "PhaseBenchmark", "map_cost", "agreement", "majority", "replay", "main"]


@dataclass(frozen=True)
class MapCost:
    """One map's cost: how it was run (levels 0: uniform), its wall seconds, runs, run-steps and run-steps per second,
    its cells trained and inferred, and its label counts."""

    levels: int
    wall_seconds: float
    runs: int
    steps: int
    steps_per_second: float
    cells_trained: int
    cells_inferred: int
    labels: dict[str, int]


@dataclass(frozen=True)
class PhaseBenchmark:
    """``phase_benchmark.json``: the adaptive and the uniform map of one spec, scale and seed set, on one machine; and,
    where measured, the shipped map (the same spec and scale on its confirmatory seeds: ``shipped``, its seeds and the
    load during it)."""

    map: str
    scale: str
    seeds: str
    seed_values: list[int]
    workers: int
    date: str
    commit: str
    machine: str
    load_average: str
    adaptive: MapCost
    uniform: MapCost
    run_ratio: float
    wall_ratio: float
    cells: int
    cells_agree: int
    inferred_agree: int
    inferred: int
    origin: str
    shipped: MapCost | None = None
    shipped_seeds: list[int] | None = None
    shipped_load: str | None = None
    replays: dict[str, dict[str, int]] | None = None

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PhaseBenchmark:
        names = [f.name for f in dataclasses.fields(cls)]
        optional = {"shipped", "shipped_seeds", "shipped_load", "replays"}
        unknown, missing = sorted(set(data) - set(names)), [n for n in names if n not in data and n not in optional]
        if unknown or missing:
            raise ValueError(f"phase benchmark: unknown keys {unknown}, missing keys {missing}")
        shipped = data.get("shipped")
        return cls(**{**data, "adaptive": MapCost(**data["adaptive"]), "uniform": MapCost(**data["uniform"]),
                      "shipped": None if shipped is None else MapCost(**shipped)})

    @classmethod
    def load(cls, path: Path) -> PhaseBenchmark:
        return cls.from_dict(json.loads(Path(path).read_text()))


def map_cost(record: PhaseMap, wall_seconds: float) -> MapCost:
    return MapCost(record.levels, round(wall_seconds, 1), record.runs_trained, record.steps,
                   round(record.steps / wall_seconds, 1), sum(c.source == "trained" for c in record.cells),
                   sum(c.source == "inferred" for c in record.cells), record.label_counts())


def agreement(adaptive: PhaseMap, uniform: PhaseMap) -> tuple[int, int, int, int]:
    """(cells, cells whose labels agree, inferred cells, inferred cells that agree): every cell of the adaptive map
    against the uniform map's label of it."""
    if (adaptive.name, adaptive.scale, adaptive.seed_values) != (uniform.name, uniform.scale, uniform.seed_values):
        raise ValueError("the two maps must be the same spec, scale and seeds")
    cells = agree = inferred = inferred_agree = 0
    for cell in adaptive.cells:
        other = uniform.cell(cell.panel, cell.ix, cell.iy)
        if other is None:
            raise ValueError(f"the uniform map has no cell {cell.panel, cell.ix, cell.iy}: is it complete?")
        same = other.label == cell.label
        cells, agree = cells + 1, agree + same
        if cell.source == "inferred":
            inferred, inferred_agree = inferred + 1, inferred_agree + same
    return cells, agree, inferred, inferred_agree


def majority(cell: CellRecord) -> str:
    """The class of more than half of a trained cell's seeds, else "mixed" (a looser label than the map's "every
    seed", for :func:`replay`)."""
    n = sum(cell.counts.values())
    return next((c for c, k in cell.counts.items() if k > n / 2), "mixed")


def replay(uniform: PhaseMap, *, levels: int, label=None) -> dict[str, int]:
    """The refinement of :mod:`ncgeom.phase.lattice` replayed on a uniform map's cells (every cell trained): the cells
    it would train and the cells whose final label would differ from the uniform map's, at ``levels`` and with
    ``label`` (a function of a cell; default: the map's own label). With the map's levels and label it gives the
    adaptive map of the same seeds exactly (its runs are the uniform map's runs: a check of the implementation)."""
    from ncgeom.phase.lattice import Lattice

    label = label or (lambda cell: cell.label)
    trained = wrong = 0
    for k, panel in enumerate(uniform.panels):
        nx, ny = len(panel.x.labels), len(panel.y.labels)
        rx = panel.x.refine and (nx - 1) % 2 ** levels == 0 and levels > 0
        ry = panel.y.refine and (ny - 1) % 2 ** levels == 0 and levels > 0
        if levels and not (rx or ry):
            raise ValueError(f"panel {k}: no axis refines over {levels} levels")
        lattice = Lattice(nx, ny, levels, rx, ry)

        def truth(i: int, j: int, k: int = k) -> str:
            cell = uniform.cell(k, i, j)
            assert cell is not None
            return label(cell)

        labels = {p: truth(*p) for p in lattice.first()}
        seen = set(labels)
        for level in range(levels, 0, -1):
            step = lattice.refine(level, labels)
            labels.update(step.inferred)
            for point in step.train:
                labels[point] = truth(*point)
                seen.add(point)
        trained += len(seen)
        wrong += sum(labels[(i, j)] != truth(i, j) for i in range(nx) for j in range(ny))
    return {"cells_trained": trained, "cells": uniform.cells.__len__(), "cells_wrong": wrong}


def build(adaptive_dir: Path, adaptive_seconds: float, uniform_dir: Path, uniform_seconds: float, *, workers: int,
          machine: str, load_average: str, origin: str) -> PhaseBenchmark:
    from ncgeom.provenance import provenance

    a, u = PhaseMap.load(adaptive_dir), PhaseMap.load(uniform_dir)
    if a.status != "complete" or u.status != "complete" or u.levels != 0:
        raise ValueError("both maps must be complete and the second one uniform (levels 0)")
    cells, agree, inferred, inferred_agree = agreement(a, u)
    replays = {}
    for n in range(1, a.levels + 2):  # the map's levels, one less and one more (where the axes allow them)
        for name, rule in (("every seed", None), ("majority", majority)):
            try:
                replays[f"levels {n}, {name}"] = replay(u, levels=n, label=rule)
            except ValueError:  # no axis fits that many levels
                break
    prov = provenance()
    return PhaseBenchmark(a.name, a.scale, a.seeds, list(a.seed_values), workers, str(prov["time_utc"])[:10],
                          str(prov["git_commit"])[:7], machine, load_average, map_cost(a, adaptive_seconds),
                          map_cost(u, uniform_seconds), round(a.runs_trained / u.runs_trained, 3),
                          round(adaptive_seconds / uniform_seconds, 3), cells, agree, inferred_agree, inferred, origin,
                          replays=replays)


def _timed(argv: list[str]) -> float:
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "ncgeom.cli.main", *argv], check=True, env=env)
    return time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="benchmarks/bench_phase.py", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="train the adaptive map and the uniform grid, timed")
    run.add_argument("spec")
    run.add_argument("--scale", default="quick")
    run.add_argument("--seeds", default="exploratory")
    run.add_argument("--workers", type=int, default=2)
    run.add_argument("--out", type=Path, required=True)
    run.add_argument("--machine", default="the project's 2-core CPU machine")
    run.add_argument("--json", type=Path, required=True)
    rec = sub.add_parser("record", help="the record of two finished maps and the caller's times")
    rec.add_argument("--adaptive", type=Path, required=True)
    rec.add_argument("--adaptive-seconds", type=float, required=True)
    rec.add_argument("--uniform", type=Path, required=True)
    rec.add_argument("--uniform-seconds", type=float, required=True)
    rec.add_argument("--workers", type=int, default=2)
    rec.add_argument("--load", required=True, help="the load averages during the runs, in words")
    rec.add_argument("--machine", required=True)
    rec.add_argument("--origin", default="times measured by /usr/bin/time around each ncgeom phase command")
    rec.add_argument("--shipped", type=Path, default=None, help="the shipped map's folder (confirmatory seeds)")
    rec.add_argument("--shipped-seconds", type=float, default=None)
    rec.add_argument("--shipped-load", default=None)
    rec.add_argument("--json", type=Path, required=True)
    args = parser.parse_args(argv)
    if args.command == "run":
        common = ["phase", args.spec, "--scale", args.scale, "--seeds", args.seeds, "--workers", str(args.workers),
                  "--quiet"]
        before = os.getloadavg()
        adaptive_s = _timed([*common, "--out", str(args.out / "adaptive")])
        middle = os.getloadavg()
        uniform_s = _timed([*common, "--uniform", "--out", str(args.out / "uniform")])
        after = os.getloadavg()
        load = (f"1-minute load average {before[0]:.1f} before the adaptive map, {middle[0]:.1f} after it, "
                f"{after[0]:.1f} after the uniform grid")
        record = build(args.out / "adaptive", adaptive_s, args.out / "uniform", uniform_s, workers=args.workers,
                       machine=args.machine, load_average=load, origin="benchmarks/bench_phase.py run")
    else:
        record = build(args.adaptive, args.adaptive_seconds, args.uniform, args.uniform_seconds, workers=args.workers,
                       machine=args.machine, load_average=args.load, origin=args.origin)
        if args.shipped is not None:
            shipped = PhaseMap.load(args.shipped)
            if (shipped.name, shipped.scale, shipped.status) != (record.map, record.scale, "complete"):
                raise SystemExit("--shipped must be the same map at the same scale, complete")
            record = dataclasses.replace(record, shipped=map_cost(shipped, args.shipped_seconds),
                                         shipped_seeds=list(shipped.seed_values), shipped_load=args.shipped_load)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(record.to_dict(), indent=2) + "\n")
    print(json.dumps(record.to_dict(), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
