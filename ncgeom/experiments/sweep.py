"""Sweeps: every config of a spec run in parallel, resumably, summarized as CSV; the one executor builder.

Two engines (``engine``; the default is ``batched``, ncgeom.vocabulary.DEFAULT_ENGINE): ``batched`` cuts the runs to do into stacks of equal shapes
(:func:`plan_units`: grouped by :func:`~ncgeom.experiments.stacked.stack_key`, cut by the memory budget
of a worker and so that every worker gets work) and trains each stack as one task with
:func:`~ncgeom.experiments.stacked.run_stack`; ``sequential`` trains one run per task with
:func:`~ncgeom.experiments.train.run`. A task is the unit handed to the executor; a stack that raises
fails all its runs. Every run writes its own directory ``OUT/<run name>`` (:mod:`ncgeom.experiments.records`),
a stacked run too. summary.json is written last and atomically, so killing a sweep loses no finished run
(the runs of a stack end together and write their summaries one after another at the stack's end: a
stack killed before then reruns whole). On resume a run whose summary.json
exists is skipped only if its files are whole (:func:`ncgeom.experiments.integrity.check_run`: every
record parses, the counts match the summary, the embeddings have the expected shapes); a damaged one
is rerun, and its record says why (:attr:`RunRecord.invalid`). At the end ``OUT/summary.csv`` (one row
per run) and ``OUT/sweep.json`` are written, atomically too. The sweep holds the lock of ``OUT``
(:mod:`ncgeom.locking`) from the first check to the last write: a second sweep into the same folder is
refused (or waits, ``wait``).

:func:`~ncgeom.experiments.executors.make_executor` (re-exported here) is the one executor builder: none,
a process pool whose workers die with their parent, or a Dask cluster (:mod:`ncgeom.experiments.executors`).
"""

from __future__ import annotations

import contextlib
import csv
import io
from collections.abc import Callable, Iterable
from concurrent.futures import Executor, Future, as_completed
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Literal

from ncgeom.atomic_io import atomic_write_json, atomic_write_text
from ncgeom.budget import check_run_memory, memory_budget, run_memory_estimate
from ncgeom.experiments.config import Config
from ncgeom.experiments.executors import dask_executor, make_executor, process_pool, terminate_pool
from ncgeom.experiments.integrity import check_run, is_finished
from ncgeom.experiments.records import SUMMARY_FILE, RunSummary
from ncgeom.experiments.spec import SweepSpec, expand, load_spec, run_name
from ncgeom.experiments.stacked import group_stacks, run_stack, stack_memory_bytes, stackable
from ncgeom.experiments.train import check_device, run
from ncgeom.locking import folder_lock, prepare_folder
from ncgeom.validate import require_choice, require_int
from ncgeom.vocabulary import DEFAULT_ENGINE, ENGINES, Engine, device_type

__all__ = [
    "ENGINES",
    "Engine",
    "plan_units",
    "SweepStatus",
    "RunRecord",
    "SweepResult",
    "run_sweep",
    "make_executor",
    "process_pool",
    "terminate_pool",
    "dask_executor",
    "count_finished",
    "sweep_configs",
    "check_devices",
    "check_data_dirs",
    "summary_table",
    "TABLE_COLUMNS",
]

SweepStatus = Literal["completed", "diverged", "failed"]
Unit = list[tuple[str, Config]]  # one task: (run name, config) pairs, trained together
TABLE_COLUMNS: tuple[str, ...] = (
    "status", "nc_value", "loss", "gap", "rel_gap", "etf_distance", "within_class", "nc1", "unit_norm",
    "zero_sum", "equal_inner_product", "rankme", "spectrum_min", "ncc_accuracy", "test_ncc_accuracy",
    "mean_norm", "initial_etf_distance", "epochs_run", "wall_time_s",
)


@dataclass(frozen=True)
class RunRecord:
    """One run of a sweep: its name, config, summary (None unless finished) and status.

    status: the summary's ``completed`` / ``diverged``, or ``failed`` (an exception, in ``error``; the
    run directory has no summary.json, so the next call retries it). ``skipped``: finished before this
    call (resumed, its files checked whole). ``invalid``: the run had a summary.json but its files
    failed :func:`~ncgeom.experiments.integrity.check_run` (the one-line reason), so it was run again.
    """

    name: str
    config: Config
    status: SweepStatus
    summary: RunSummary | None = field(default=None, repr=False)
    skipped: bool = False
    error: str | None = None
    invalid: str | None = None


@dataclass(frozen=True)
class SweepResult:
    """All runs of a sweep, in grid order, and where the table was written."""

    spec: SweepSpec
    scale: str
    out_dir: str
    runs: tuple[RunRecord, ...]
    table_path: str

    @property
    def failed(self) -> tuple[RunRecord, ...]:
        return tuple(r for r in self.runs if r.status == "failed")

    @property
    def invalid(self) -> tuple[RunRecord, ...]:
        """The runs found finished but damaged at the start of this call, and run again."""
        return tuple(r for r in self.runs if r.invalid is not None)

    def summaries(self) -> list[RunSummary]:
        """The summaries of the finished runs."""
        return [r.summary for r in self.runs if r.summary is not None]


def _execute(config_dict: dict, run_dir: str) -> dict:
    """Worker: run one config into its directory; return its summary.json object (picklable)."""
    return run(Config(**config_dict), out_dir=run_dir).summary()


def _execute_stack(config_dicts: list[dict], run_dirs: list[str]) -> list[dict]:
    """Worker: train the configs as one stack (:func:`~ncgeom.experiments.stacked.run_stack`) into their
    directories; return their summary.json objects, in order (picklable). An image config (a unit of its
    own, :func:`plan_units`), like one with shuffled batches, is trained by :func:`~ncgeom.experiments.run`."""
    configs = [Config(**c) for c in config_dicts]
    if len(configs) == 1 and not stackable(configs[0]):
        return [run(configs[0], out_dir=run_dirs[0]).summary()]
    results = run_stack(configs, out_dirs=run_dirs)
    return [r.summary() for r in results]


def plan_units(configs: list[Config], *, engine: Engine = DEFAULT_ENGINE, workers: int = 1,
               budget: int | None = None) -> list[list[int]]:
    """The units of work of a sweep: lists of indices into ``configs``, each trained as one task.

    ``sequential``: one run per unit. ``batched``: the runs are grouped by
    :func:`~ncgeom.experiments.stacked.stack_key` (first-seen order) and each group is cut into
    ceil(n / m) units of nearly equal size (they differ by at most one run), where m is the smaller of

    - ``budget / workers // per_run`` (at least 1): what one worker's share of the memory budget holds,
      with per_run = the largest :func:`~ncgeom.budget.run_memory_estimate` of the group plus its share
      :func:`~ncgeom.experiments.stacked.stack_memory_bytes` of one run (linear in the stack size);
    - ceil(len(configs) / workers): so that every worker gets work.

    ``budget``: bytes (default :func:`ncgeom.budget.memory_budget`). Sizing a stack imports torch. An image
    config (``Config.is_image``, a ResNet) or one with ``batches="shuffle"`` is a unit of its own in both engines
    (:func:`~ncgeom.experiments.stacked.stackable`), trained by ``run``.
    """
    engine = require_choice("engine", engine, ENGINES)
    workers = require_int("workers", workers, min_value=1)
    if engine == "sequential":
        return [[i] for i in range(len(configs))]
    share = (memory_budget() if budget is None else budget) // workers
    spread = -(-len(configs) // workers)
    units = [[i] for i, c in enumerate(configs) if not stackable(c)]  # images, shuffled batches: never stacked
    together = [i for i, c in enumerate(configs) if stackable(c)]
    for local in group_stacks([configs[i] for i in together]):
        group = [together[i] for i in local]
        per_run = max(sum(part[2] for part in run_memory_estimate(configs[i])) for i in group)
        per_run += stack_memory_bytes([configs[group[0]]])
        size = max(1, min(share // max(per_run, 1), spread))
        count = -(-len(group) // size)
        bounds = [len(group) * k // count for k in range(count + 1)]
        units += [group[a:b] for a, b in zip(bounds, bounds[1:]) if b > a]
    return units


def sweep_configs(spec: SweepSpec, *, scale: str = "quick", device: str | None = None,
                  data_dir: str | Path | None = None) -> list[Config]:
    """The configs of ``spec`` at ``scale`` (:func:`~ncgeom.experiments.spec.expand`), each with ``device`` in
    place of its own when given ("cpu", "cuda" or "cuda:N"; ValueError naming ``device`` otherwise), and each
    image config (``Config.is_image``) with ``data_dir`` in place of its own when given (made absolute; the
    synthetic configs have no data folder and keep theirs).

    The device and the data folder are config fields: a CPU config keeps its run name, a CUDA one gets its own
    (docs/experiments.md, "Devices"), and an image run's name depends on its data folder (resume with the same
    ``--data-dir``).
    """
    configs = expand(spec, scale=scale)
    if data_dir is not None:
        if not isinstance(data_dir, (str, Path)) or not str(data_dir):
            raise ValueError(f"data_dir must be a folder path, got {data_dir!r}")
        folder = str(Path(data_dir).expanduser().absolute())
        configs = list(dict.fromkeys(c.replace(data_dir=folder) if c.is_image else c for c in configs))
    if device is None:
        return configs
    device_type(device, name="device")
    return list(dict.fromkeys(c.replace(device=device) for c in configs))


def check_data_dirs(folders: Iterable[str | None]) -> None:
    """Every image run's data folder exists (ValueError naming it and --data-dir otherwise): checked before the
    first run, so that a wrong ``--data-dir`` is one line, not one failed run per config. The layout and the
    files are checked by each run when it reads them (docs/images.md, "Errors")."""
    for folder in dict.fromkeys(folders):
        if folder is None or not Path(folder).expanduser().is_dir():
            raise ValueError(f"data_dir {folder}: no such folder (give the data set's folder with --data-dir; "
                             "docs/images.md, 'Layouts accepted')")


def check_devices(devices: Iterable[str]) -> None:
    """:func:`~ncgeom.experiments.train.check_device` of each distinct device name (ValueError naming --device
    for one that does not exist here); "cpu" always exists and imports no torch."""
    for dev in dict.fromkeys(devices):
        if device_type(dev) != "cpu":
            check_device(dev)


def run_sweep(
    spec: SweepSpec | str | Path,
    out_dir: str | Path,
    *,
    scale: str = "quick",
    workers: int = 1,
    executor: Executor | None = None,
    engine: Engine = DEFAULT_ENGINE,
    progress: bool = False,
    on_run: Callable[[RunRecord], None] | None = None,
    wait: float = 0.0,
    device: str | None = None,
    data_dir: str | Path | None = None,
) -> SweepResult:
    """Run every config of ``spec`` at ``scale`` into ``out_dir``, skipping finished runs whose files are whole.

    Parameters
    ----------
    spec : SweepSpec, a shipped spec name or a path to a TOML spec
    out_dir : path
        Receives one directory per run, summary.csv and sweep.json; locked for the whole call
        (:func:`ncgeom.locking.folder_lock`).
    scale : {"tiny", "quick", "full"}
    workers : int
        Without ``executor``: processes of a :func:`process_pool` (1: serially, in this process). With
        ``executor``: only the count of its workers that sizes the stacks (:func:`plan_units`), raised
        to the executor's own width where it has one (a process or thread pool, a Dask executor).
    executor : concurrent.futures.Executor, optional
        Any executor whose ``submit`` returns a Future (a process pool, ``Client.get_executor()`` of
        Dask); the caller shuts it down.
    engine : {"batched", "sequential"}
        ``batched``: the runs to do are cut into stacks (:func:`plan_units`), each trained as one task
        by :func:`~ncgeom.experiments.stacked.run_stack` (a stack of one run too: a run is always trained by
        the same engine, whatever chunk it falls in; bitwise the same in any stack in float64, to rounding
        in float32). ``sequential``: one :func:`~ncgeom.experiments.run` per task.
    progress : bool
        A tqdm bar over this sweep's runs (stderr); a stack of R runs advances it by R when it ends.
    on_run : callable, optional
        Called with each RunRecord as it is known (finished earlier, finished now, or failed).
    wait : float
        Seconds to wait while another process writes ``out_dir`` (0: refuse at once; ``math.inf``: no limit).
    device : str, optional
        Train every run on this device ("cpu", "cuda", "cuda:N") whatever its spec says (:func:`sweep_configs`);
        a device that does not exist here is refused before the first run (ValueError naming --device).
    data_dir : path, optional
        The folder of every image config's data set, in place of the spec's (:func:`sweep_configs`); the
        shipped paper presets (``paper_*`` specs, docs/experiments.md, "Paper presets") say ``data``.

    Returns
    -------
    SweepResult
        Failed runs (exceptions) are recorded with status "failed" and no summary; rerunning the
        sweep retries them (a stack that raises fails all its runs). Runs found damaged are rerun and
        carry the reason in ``invalid``.

    Raises
    ------
    ncgeom.locking.LockedError
        Another process is writing ``out_dir`` (a ValueError naming its pid).
    ValueError
        ``out_dir`` is a file or cannot be created or written; a bad spec.
    """
    if not isinstance(spec, SweepSpec):
        spec = load_spec(spec)
    workers = require_int("workers", workers, min_value=1)
    engine = require_choice("engine", engine, ENGINES)
    configs = sweep_configs(spec, scale=scale, device=device, data_dir=data_dir)
    for cfg in dict.fromkeys(configs):  # every run must fit the memory budget, checked before the first starts
        check_run_memory(cfg)
    check_devices(c.device for c in configs)  # and its device must exist here
    check_data_dirs(c.data_dir for c in configs if c.is_image)  # and its data folder
    keys = spec.grid_keys(scale)
    out = prepare_folder(out_dir)
    names = [run_name(c, keys) for c in configs]
    with folder_lock(out, wait=wait):
        return _run_locked(spec, scale, out, names, configs, keys, workers, executor, engine, progress, on_run)


def _run_locked(spec, scale, out: Path, names, configs, keys, workers, executor, engine, progress,
                on_run) -> SweepResult:
    records: dict[str, RunRecord] = {}
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=len(configs), unit="run", desc=spec.name)

    def record(rec: RunRecord) -> None:
        records[rec.name] = rec
        if bar is not None:
            bar.update(1)
        if on_run is not None:
            on_run(rec)

    todo: list[tuple[str, Config]] = []
    invalid: dict[str, str] = {}
    for name, cfg in zip(names, configs):
        run_dir = out / name
        if is_finished(run_dir):
            problem = check_run(run_dir, cfg)
            if problem is None:
                summary = RunSummary.load(run_dir)
                assert summary is not None  # check_run read it
                record(RunRecord(name, cfg, summary.status, summary, skipped=True))
                continue
            invalid[name] = problem
        _clear_for_rerun(run_dir)
        todo.append((name, cfg))
    try:
        width = workers if executor is None else max(workers, _executor_width(executor))
        units = [[todo[i] for i in unit] for unit in plan_units([c for _, c in todo], engine=engine, workers=width)]
        if units and executor is None and workers > 1:
            pool = process_pool(min(workers, len(units)))
            try:
                _submit_all(pool, units, out, engine, record, invalid)
            except BaseException:  # an error or a stop signal: stop the workers, do not wait for them
                terminate_pool(pool)
                raise
            pool.shutdown(wait=True)
        elif units and executor is not None:
            _submit_all(executor, units, out, engine, record, invalid)
        else:
            for unit in units:
                fn, args = _task(unit, out, engine)
                for rec in _collect(unit, partial(fn, *args), engine, invalid):
                    record(rec)
    finally:
        if bar is not None:
            bar.close()
        runs = tuple(records[n] for n in names if n in records)
        table = atomic_write_text(out / "summary.csv", summary_table(runs, keys))
        atomic_write_json(out / "sweep.json", {
            "name": spec.name, "claim": spec.claim, "description": spec.description, "scale": scale,
            "spec_path": spec.path, "grid_keys": list(keys), "engine": engine,
            "runs": [{"name": r.name, "status": r.status, "error": r.error, "invalid": r.invalid} for r in runs],
        })
    return SweepResult(spec, scale, str(out), runs, str(table))


def _clear_for_rerun(run_dir: Path) -> None:
    """Before a run (re)starts in ``run_dir``: drop its summary.json (so a damaged run never again counts as
    finished, even if this call is interrupted) and the temporary files of atomic writes cut short by a kill."""
    if not run_dir.is_dir():
        return
    (run_dir / SUMMARY_FILE).unlink(missing_ok=True)
    for tmp in run_dir.glob(".*.tmp"):
        if tmp.is_file() and not tmp.is_symlink():
            tmp.unlink(missing_ok=True)


def count_finished(spec: SweepSpec | str | Path, out_dir: str | Path, *, scale: str = "quick",
                   device: str | None = None, data_dir: str | Path | None = None) -> tuple[int, int]:
    """(runs of ``spec`` at ``scale`` (on ``device``, :func:`sweep_configs`) with a summary.json in ``out_dir``,
    runs in the grid): progress on disk."""
    if not isinstance(spec, SweepSpec):
        spec = load_spec(spec)
    configs = sweep_configs(spec, scale=scale, device=device, data_dir=data_dir)
    keys = spec.grid_keys(scale)
    done = sum(is_finished(Path(out_dir) / run_name(c, keys)) for c in configs)
    return done, len(configs)


def _executor_width(executor: Executor) -> int:
    """The number of tasks ``executor`` runs at once, where it says so (1 where it does not)."""
    width = getattr(executor, "_max_workers", None)  # ProcessPoolExecutor, ThreadPoolExecutor
    if isinstance(width, int):
        return width
    client = getattr(executor, "_client", None)  # dask.distributed's ClientExecutor
    if client is not None:
        with contextlib.suppress(Exception):  # a cluster that does not answer: size for one worker
            return max(1, sum(client.nthreads().values()))
    return 1


def _task(unit: Unit, out: Path, engine: str) -> tuple[Callable, tuple]:
    """The worker function and its (picklable) arguments for one unit of work."""
    if engine == "sequential":
        [(name, cfg)] = unit
        return _execute, (cfg.to_dict(), str(out / name))
    return _execute_stack, ([cfg.to_dict() for _, cfg in unit], [str(out / name) for name, _ in unit])


def _submit_all(ex: Executor, units: list[Unit], out: Path, engine: str, record, invalid: dict[str, str]) -> None:
    futures: dict[Future, Unit] = {}
    for unit in units:
        fn, args = _task(unit, out, engine)
        futures[ex.submit(fn, *args)] = unit
    for fut in as_completed(futures):
        for rec in _collect(futures[fut], fut.result, engine, invalid):
            record(rec)


def _collect(unit: Unit, get, engine: str, invalid: dict[str, str]) -> list[RunRecord]:
    """One RunRecord per run of ``unit`` from its task's result (``get()``); all failed if the task raised."""
    try:
        got = get()
        summaries = [RunSummary.from_dict(d) for d in ([got] if engine == "sequential" else got)]
        if len(summaries) != len(unit):
            raise RuntimeError(f"a stack of {len(unit)} runs returned {len(summaries)} summaries")
    except Exception as exc:  # a failed run or stack must not stop the sweep; its runs are retried on resume
        error = f"{type(exc).__name__}: {exc}"
        return [RunRecord(name, cfg, "failed", None, error=error, invalid=invalid.get(name)) for name, cfg in unit]
    return [RunRecord(name, cfg, s.status, s, invalid=invalid.get(name)) for (name, cfg), s in zip(unit, summaries)]


def summary_table(runs, keys) -> str:
    """CSV text: run name, the grid fields, then TABLE_COLUMNS, one row per run."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(["run", *keys, *TABLE_COLUMNS])
    for r in runs:
        s = r.summary
        values: dict = {"status": r.status}
        if s is not None:
            final = s.final
            spectrum = [v for v in (final.value("spectrum") or []) if v is not None]
            values.update({col: final.value(col) for col in TABLE_COLUMNS if col in _FINAL_COLUMNS})
            values.update(
                nc_value=s.nc_value, rel_gap=None if final.gap is None or not s.nc_value else final.gap / abs(s.nc_value),
                spectrum_min=min(spectrum, default=None), initial_etf_distance=s.initial.value("etf_distance"),
                epochs_run=s.epochs_run, wall_time_s=s.wall_time_s,
            )
        row = [r.name, *(_short(getattr(r.config, k)) for k in keys)]
        for col in TABLE_COLUMNS:
            v = values.get(col)
            row.append("" if v is None else (f"{v:.6g}" if isinstance(v, float) else v))
        writer.writerow(row)
    return buf.getvalue()


_FINAL_COLUMNS = ("loss", "gap", "etf_distance", "within_class", "nc1", "unit_norm", "zero_sum",
                  "equal_inner_product", "rankme", "ncc_accuracy", "test_ncc_accuracy", "mean_norm")


def _short(v) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)
