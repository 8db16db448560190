"""Run a phase map: train its cells level by level, refine along the boundary, write its records and figures.

:func:`run_map` (``ncgeom phase NAME|SPEC --out DIR``) takes a map spec (:mod:`ncgeom.phase.spec`) at one scale and
seed set, and for each level of the refinement (:mod:`ncgeom.phase.lattice`; one level with ``uniform``):

1. trains the level's new cells, every seed of each, as one sweep into ``DIR/runs``
   (:func:`ncgeom.campaigns.sweep.run_sweep` with the stacked engine: the runs of one shape, a cell's seeds and the
   cells of the same shape, are one unit of the process pool or the Dask cluster; a finished run is skipped, so a
   map resumes at run granularity, and ``DIR/runs`` is a sweep folder that ``ncgeom summarize`` reads);
2. classifies each run (:func:`ncgeom.phase.cells.run_class`) and labels each cell (:func:`~ncgeom.phase.cells.
   cell_label`);
3. asks the lattice which new points of the next level to train and which it infers.

A level with a failed run stops the map (its next level depends on every label): the records are written with
status "incomplete" and the failed runs named; the same command resumes it. At the end ``DIR`` holds ``cells.json``
(:class:`~ncgeom.phase.records.PhaseMap`), ``cells.csv``, ``table.txt``, ``overlays.json`` (the theory lines,
:mod:`ncgeom.phase.overlays`) and the figures (:mod:`ncgeom.phase.figure`). The call holds the lock of ``DIR``.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from concurrent.futures import Executor
from pathlib import Path
from typing import Any, cast

from ncgeom.atomic_io import atomic_write_text
from ncgeom.campaigns.executors import pool_executor
from ncgeom.campaigns.plan import check_devices
from ncgeom.campaigns.rules import mean_interval
from ncgeom.campaigns.spec import SweepSpec, run_name
from ncgeom.campaigns.sweep import RunRecord, run_sweep
from ncgeom.locking import folder_lock, prepare_folder
from ncgeom.metrics.outcome import DC_SPECTRUM, NC_ETF, NC_WITHIN, classify_geometry
from ncgeom.phase.cells import cell_label, class_counts, run_class
from ncgeom.phase.lattice import Lattice
from ncgeom.phase.overlays import theory_lines
from ncgeom.phase.records import (
    CELLS_CSV,
    RUNS_FOLDER,
    TABLE_FILE,
    AxisRecord,
    CellRecord,
    Overlays,
    PanelRecord,
    PhaseMap,
    RunEntry,
)
from ncgeom.phase.spec import Axis, MapPlan, MapSpec, load_map_spec
from ncgeom.runs.budget import check_run_memory
from ncgeom.runs.config import Config
from ncgeom.runs.mechanism import mechanism
from ncgeom.runs.records import load_history
from ncgeom.threads import require_workers
from ncgeom.vocabulary import SCALES, CellLabel, SeedSet

__all__ = ["run_map", "map_keys", "run_steps"]

Cell = tuple[int, int, int]  # (panel, ix, iy)


def run_steps(config: Config, epochs_run: int) -> int:
    """Optimizer steps of a run of ``config`` that trained ``epochs_run`` epochs: ceil(N / B) class-balanced batches
    per epoch, floor(N / B) shuffled ones (docs/experiments.md, "Data")."""
    n, b = config.num_train, config.batch_size
    return epochs_run * (-(-n // b) if config.batches == "balanced" else n // b)


def map_keys(plan: MapPlan) -> tuple[str, ...]:
    """The config fields that differ between the cells of a map (its run names show them, then the seed)."""
    keys: dict[str, None] = {}
    for p in plan.panels:
        keys.update(dict.fromkeys(p.x.fields))
        keys.update(dict.fromkeys(p.y.fields))
    for p in plan.panels:
        keys.update(dict.fromkeys(k for k in p.fields if len(plan.panels) > 1))
    return tuple(keys)


def _axis_record(axis: Axis) -> AxisRecord:
    return AxisRecord(axis.name, axis.title, axis.config_field, axis.labels, axis.numeric, axis.refine,
                      tuple(dict(p) for p in axis.points))


def _level_spec(spec: MapSpec, plan: MapPlan, cells: list[Cell], seeds: tuple[int, ...], keys: tuple[str, ...],
                configs: dict[Cell, Config]) -> SweepSpec:
    """A sweep spec whose runs are the ``cells`` (every seed): the base holds the fields common to the map, each grid
    table one cell's values of ``keys`` (so the run names are the same at every level)."""
    base = {k: v for k, v in configs[cells[0]].to_dict().items() if k not in keys and k != "seed"}
    tables = tuple({**{k: (getattr(configs[c], k),) for k in keys}, "seed": seeds} for c in cells)
    return SweepSpec(name=spec.name, description=spec.description, claim=None, base=base, grids=tables,
                     scales={s: {} for s in SCALES}, path=spec.path, shipped=spec.shipped)


def run_map(spec: MapSpec | str | Path, out_dir: str | Path, *, scale: str = "quick", seeds: SeedSet = "confirmatory",
            workers: int = 1, executor: Executor | None = None, uniform: bool = False, progress: bool = False,
            wait: float = 0.0, device: str | None = None, figures: bool = True, formats: tuple[str, ...] = ("png",),
            log: Callable[[str], None] | None = None) -> PhaseMap:
    """Run (or resume) the map ``spec`` at ``scale`` into ``out_dir`` (module docstring); its :class:`PhaseMap`.

    Parameters
    ----------
    spec : MapSpec, a shipped map name or a path to a TOML map spec
    out_dir : path
        Receives cells.json, cells.csv, table.txt, overlays.json, the figures and ``runs/``; locked for the call.
    scale : {"tiny", "quick", "full"}
    seeds : {"confirmatory", "exploratory"}
        The seed set of the scale to train (docs/theory.md, section 9, "Confirmatory seeds").
    workers : int
        Without ``executor``: processes of one pool kept for every level (1: in this process); with it, the width
        that sizes the stacks.
    executor : concurrent.futures.Executor, optional
        A process pool or a Dask executor (``Client.get_executor()``), shut down by the caller.
    uniform : bool
        Train every cell of the full-resolution grid (levels 0): the reference the refinement is checked against.
    progress : bool
        A tqdm bar per level (stderr): runs done / total with an ETA, and cells done / total.
    wait : float
        Seconds to wait while another process writes ``out_dir`` (0: refuse at once).
    device : str, optional
        Train every run on this device ("cpu", "cuda", "cuda:N") whatever the spec says (a device that does not exist
        here is refused before anything is written).
    figures : bool
        Draw the heat map and the spectra (:mod:`ncgeom.phase.figure`; matplotlib) in ``formats``.
    log : callable, optional
        One line per level and per file written (default: nothing).
    """
    if not isinstance(spec, MapSpec):
        spec = load_map_spec(spec)
    plan = spec.at(scale)
    seed_values = plan.seeds(seeds)
    if executor is None:
        workers = require_workers("workers", workers)
    levels = 0 if uniform else plan.levels
    lattices = [Lattice(len(p.x), len(p.y), levels, p.x.refine and levels > 0, p.y.refine and levels > 0)
                for p in plan.panels]
    configs = {(k, ix, iy): plan.config(k, ix, iy, seed_values[0])
               for k, p in enumerate(plan.panels) for ix in range(len(p.x)) for iy in range(len(p.y))}
    if device is not None:
        configs = {cell: c.replace(device=device) for cell, c in configs.items()}
    check_devices(c.device for c in configs.values())
    for config in dict.fromkeys(configs.values()):  # every run fits the memory budget, before anything is written
        check_run_memory(config)
    say = log or (lambda message: None)
    out = prepare_folder(out_dir, what="--out")
    with folder_lock(out, wait=wait):
        if executor is None and workers > 1:
            with pool_executor(workers) as pool:
                return _run_locked(spec, plan, seeds, seed_values, lattices, levels, configs, out, workers, pool,
                                   progress, figures, formats, say)
        return _run_locked(spec, plan, seeds, seed_values, lattices, levels, configs, out, workers, executor,
                           progress, figures, formats, say)


def _run_locked(spec: MapSpec, plan: MapPlan, seeds: SeedSet, seed_values: tuple[int, ...], lattices: list[Lattice],
                levels: int, configs: dict[Cell, Config], out: Path, workers: int, executor: Executor | None,
                progress: bool, figures: bool, formats: tuple[str, ...],
                say: Callable[[str], None]) -> PhaseMap:
    keys = map_keys(plan)
    run_keys = (*keys, "seed")
    labels: list[dict[tuple[int, int], str]] = [{} for _ in plan.panels]
    sources: dict[Cell, tuple[str, int]] = {}
    runs_of: dict[Cell, list[RunRecord]] = {}
    trained: list[Cell] = []
    failed: list[str] = []
    for level in range(levels, -1, -1):
        new: list[Cell] = []
        for k, lattice in enumerate(lattices):
            if level == levels:
                points = lattice.first()
            else:
                step = lattice.refine(level + 1, labels[k])
                points = list(step.train)
                for point, label in step.inferred.items():
                    labels[k][point] = label
                    sources[(k, *point)] = ("inferred", level)
            new += [(k, i, j) for i, j in points]
        if not new:
            continue
        trained += new
        names = {run_name(configs[c].replace(seed=s), run_keys): c for c in new for s in seed_values}
        say(f"level {levels - level + 1}/{levels + 1}: {len(new)} cells, {len(names)} runs "
            f"(stride {2 ** level}; {len(trained)} cells trained so far)")
        records = _train_level(spec, plan, trained, new, names, seed_values, keys, configs, out, workers, executor,
                               progress, seeds, level, levels)
        for cell in new:
            cell_runs = [records[n] for n, c in names.items() if c == cell]
            bad = [r for r in cell_runs if r.summary is None]
            failed += [f"{r.name}: {r.error}" for r in bad]
            runs_of[cell] = cell_runs
            if not bad:
                classes = [run_class(r.summary, decide=plan.decide) for r in cell_runs if r.summary is not None]
                labels[cell[0]][cell[1:]] = cell_label(classes)
                sources[cell] = ("trained", level)
        if failed:
            say(f"{len(failed)} run(s) failed at this level: the map stops here (rerun the same command to resume)")
            break
    result = _record(spec, plan, seeds, seed_values, levels, labels, sources, runs_of, out, failed)
    result.save(out)
    atomic_write_text(out / CELLS_CSV, result.to_csv())
    atomic_write_text(out / TABLE_FILE, result.table_text())
    say(f"wrote {out / 'cells.json'}, {CELLS_CSV}, {TABLE_FILE}")
    try:
        overlays = theory_lines(plan)
    except Exception as exc:  # noqa: BLE001 - a theory computation that fails is said, the map stands
        overlays = Overlays(plan.spec, (), (f"the theory lines failed: {type(exc).__name__}: {exc}"[:300],))
    overlays.save(out)
    if figures:
        from ncgeom.phase.figure import plot_map, plot_spectra  # matplotlib: only when drawing

        for path in (*plot_map(result, overlays, out, formats=formats), *plot_spectra(result, out, formats=formats)):
            say(f"wrote {path}")
    return result


def _train_level(spec: MapSpec, plan: MapPlan, trained: list[Cell], new: list[Cell], names: dict[str, Cell],
                 seed_values: tuple[int, ...], keys: tuple[str, ...], configs: dict[Cell, Config], out: Path,
                 workers: int, executor: Executor | None, progress: bool, seeds: SeedSet, level: int,
                 levels: int) -> dict[str, RunRecord]:
    """Train the runs of every cell trained so far (the earlier levels' are skipped, finished) and return the records
    of this level's runs by name."""
    bar = None
    cells_left = {c: len(seed_values) for c in new}
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=len(names), unit="run", desc=f"{spec.name} level {levels - level + 1}/{levels + 1}",
                   file=sys.stderr)
        bar.set_postfix_str(f"cells 0/{len(new)}")
    records: dict[str, RunRecord] = {}

    def on_run(record: RunRecord) -> None:
        cell = names.get(record.name)
        if cell is None:  # a run of an earlier level, resumed
            return
        records[record.name] = record
        cells_left[cell] -= 1
        if bar is not None:
            bar.update(1)
            bar.set_postfix_str(f"cells {sum(n == 0 for n in cells_left.values())}/{len(new)}")

    sweep = _level_spec(spec, plan, trained, seed_values, keys, configs)
    try:
        run_sweep(sweep, out / RUNS_FOLDER, scale=plan.scale, workers=workers, executor=executor, on_run=on_run,
                  seeds=seeds)
    finally:
        if bar is not None:
            bar.close()
    return records


def _entry(record: RunRecord, out: Path, decide: str) -> RunEntry:
    s = record.summary
    assert s is not None
    history = load_history(out / RUNS_FOLDER / record.name)
    mech = mechanism((s.initial, *history))
    metrics = s.final.metrics or {}
    geometry = classify_geometry(metrics, dim=s.config.embedding_dim, num_classes=s.config.classes)
    return RunEntry(record.name, s.config.seed, s.status, run_class(s, decide=decide),  # type: ignore[arg-type]
                    geometry, s.convergence, s.epochs_run, run_steps(s.config, s.epochs_run),
                    _finite(metrics.get("etf_distance")), _finite(metrics.get("within_class")), s.spectrum_min,
                    mech.rank_drop_epoch, mech.nc_entry_epoch, tuple(zip(mech.epochs, mech.effective_rank)))


def _finite(x: Any) -> float | None:
    return float(x) if isinstance(x, (int, float)) and math.isfinite(x) else None


def _record(spec: MapSpec, plan: MapPlan, seeds: SeedSet, seed_values: tuple[int, ...], levels: int,
            labels: list[dict[tuple[int, int], str]], sources: dict[Cell, tuple[str, int]],
            runs_of: dict[Cell, list[RunRecord]], out: Path, failed: list[str]) -> PhaseMap:
    cells: list[CellRecord] = []
    trained_runs = 0
    steps = 0
    for k, p in enumerate(plan.panels):
        for ix in range(len(p.x)):
            for iy in range(len(p.y)):
                cell = (k, ix, iy)
                if cell not in sources:
                    continue
                source, level = sources[cell]
                if source == "inferred":
                    cells.append(CellRecord(k, ix, iy, "inferred", level, cast(CellLabel, labels[k][(ix, iy)]), {}, {},
                                            None, {}, ()))
                    continue
                entries = tuple(_entry(r, out, plan.decide) for r in runs_of[cell])
                trained_runs += len(entries)
                steps += sum(e.steps for e in entries)
                estimates = {
                    "etf_distance": mean_interval([e.etf_distance for e in entries]),
                    "within_class": mean_interval([e.within_class for e in entries]),
                    "spectrum_min": mean_interval([e.spectrum_min for e in entries], log=True),
                    "rank_drop_epoch": mean_interval([e.rank_drop_epoch for e in entries]),
                    "nc_entry_epoch": mean_interval([e.nc_entry_epoch for e in entries]),
                }
                converged = sum(e.convergence == "converged" and e.status == "completed" for e in entries)
                cells.append(CellRecord(k, ix, iy, "trained", level, cast(CellLabel, labels[k][(ix, iy)]),
                                        class_counts([e.run_class for e in entries]),
                                        {g: n for g in ("NC", "DC", "neither", "undefined")
                                         if (n := sum(e.geometry == g for e in entries))},
                                        converged, estimates, entries))
    panels = tuple(PanelRecord(p.title, dict(p.fields), _axis_record(p.x), _axis_record(p.y)) for p in plan.panels)
    return PhaseMap(spec.name, spec.description, spec.claims, spec.path, plan.scale, seeds, seed_values, plan.decide,
                    levels, dict(plan.base), panels, tuple(cells), "incomplete" if failed else "complete",
                    tuple(failed), trained_runs, plan.cells() * len(seed_values), steps,
                    {"NC_ETF": NC_ETF, "NC_WITHIN": NC_WITHIN, "DC_SPECTRUM": DC_SPECTRUM})
