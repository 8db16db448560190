"""Sweeps: every config of a spec trained resumably, in parallel, into one folder; summarized as CSV and JSON.

:func:`run_sweep` plans the runs to do into units (:mod:`ncgeom.campaigns.plan`: stacks of equal shapes with the
default ``stacked`` engine, one run per unit with ``sequential``) and hands each unit to the executor
(:mod:`ncgeom.campaigns.executors`: none, a process pool, or a Dask cluster); a unit that raises fails all its
runs. Every run writes its own directory ``OUT/<run name>`` (:mod:`ncgeom.runs.folder`), a stacked run too.
summary.json is written last and atomically, so killing a sweep loses no finished run (the runs of a stack end
together and write their summaries one after another at the stack's end: a stack killed before then reruns
whole). On resume a run whose summary.json exists is skipped only if its files are whole
(:func:`ncgeom.runs.integrity.check_run`: every record parses, the counts match the summary, the embeddings have
the expected shapes); a damaged one is rerun, and its record says why (:attr:`RunRecord.invalid`). A unit whose
worker process died (killed by the kernel's out-of-memory killer, say: the pool is then broken) is retried once
in a fresh pool; a run still missing is recorded "failed" with the reason, never dropped. At the end
``OUT/summary.csv`` (one row per run, :func:`summary_table`) and ``OUT/sweep.json`` (:class:`SweepRecord`) are
written, atomically too. The sweep holds the lock of ``OUT`` (:mod:`ncgeom.locking`) from the first check to the
last write: a second sweep into the same folder is refused (or waits, ``wait``).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass, field
from pathlib import Path

from ncgeom.atomic_io import atomic_write_text
from ncgeom.campaigns.executors import make_executor
from ncgeom.campaigns.plan import check_backends, check_data_dirs, check_devices, sweep_configs
from ncgeom.campaigns.records import SweepRecord, SweepRunEntry
from ncgeom.campaigns.spec import SweepSpec, load_spec, run_name
from ncgeom.campaigns.units import execute_units
from ncgeom.locking import folder_lock, prepare_folder
from ncgeom.runs.budget import check_run_memory
from ncgeom.runs.config import Config
from ncgeom.runs.integrity import check_run, is_finished
from ncgeom.runs.records import SUMMARY_FILE, RunSummary
from ncgeom.threads import require_workers
from ncgeom.validate import require_int
from ncgeom.vocabulary import DEFAULT_ENGINE, Engine, SeedSet, SweepStatus, engine_name

__all__ = [
    "RunRecord",
    "SweepResult",
    "run_sweep",
    "make_executor",
    "count_finished",
    "summary_table",
    "TABLE_COLUMNS",
]

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
    failed :func:`~ncgeom.runs.integrity.check_run` (the one-line reason), so it was run again.
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
    seeds: SeedSet = "confirmatory"

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
    seeds: SeedSet = "confirmatory",
) -> SweepResult:
    """Run every config of ``spec`` at ``scale`` into ``out_dir``, skipping finished runs whose files are whole.

    Parameters
    ----------
    spec : SweepSpec, a shipped spec name or a path to a TOML spec
    out_dir : path
        Receives one directory per run, summary.csv and sweep.json (:class:`SweepRecord`); locked for the whole call
        (:func:`ncgeom.locking.folder_lock`).
    scale : {"tiny", "quick", "full"}
    workers : int
        Without ``executor``: at most this many processes of a :func:`process_pool`, one per unit of work at most
        (1: serially, in this process; above :func:`ncgeom.threads.max_workers`: ValueError). With
        ``executor``: only the count of its workers that sizes the stacks (:func:`~ncgeom.campaigns.plan.plan_units`), raised
        to the executor's own width where it has one (a process or thread pool, a Dask executor).
    executor : concurrent.futures.Executor, optional
        Any executor whose ``submit`` returns a Future (a process pool, ``Client.get_executor()`` of
        Dask); the caller shuts it down.
    engine : {"stacked", "sequential"}
        The plan of :func:`ncgeom.campaigns.plan.plan_units`: ``stacked`` cuts the runs to do into stacks, each
        trained as one task by :func:`~ncgeom.runs.stacked.run_stack` (a stack of one run too: a run is always
        trained by the same driver, whatever stack it falls in; bitwise the same in any stack in float64, to
        rounding in float32). ``sequential``: one :func:`~ncgeom.runs.run` per task. ("batched", the stacked
        engine's earlier name, is accepted with a DeprecationWarning.)
    progress : bool
        A tqdm bar over this sweep's runs (stderr); a stack of R runs advances it by R when it ends.
    on_run : callable, optional
        Called with each RunRecord as it is known (finished earlier, finished now, or failed).
    wait : float
        Seconds to wait while another process writes ``out_dir`` (0: refuse at once; ``math.inf``: no limit).
    device : str, optional
        Train every run on this device ("cpu", "cuda", "cuda:N") whatever its spec says
        (:func:`~ncgeom.campaigns.plan.sweep_configs`);
        a device that does not exist here is refused before the first run (ValueError naming --device).
    data_dir : path, optional
        The folder of every image config's data set, in place of the spec's (:func:`~ncgeom.campaigns.plan.sweep_configs`); the
        shipped paper presets (``paper_*`` specs, docs/experiments.md, "Paper presets") say ``data``.
    seeds : {"confirmatory", "exploratory"}
        Which of the scale's seed sets to train (:meth:`~ncgeom.campaigns.spec.SweepSpec.grids_at`; a spec without
        seed sets has only "confirmatory", its plain ``seeds``); recorded in sweep.json.

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
    # without an executor, workers bounds the processes this call starts (at most one per unit of work)
    workers = require_int("workers", workers, min_value=1) if executor is not None else require_workers("workers", workers)
    engine = engine_name(engine)
    configs = sweep_configs(spec, scale=scale, seeds=seeds, device=device, data_dir=data_dir)
    for cfg in dict.fromkeys(configs):  # every run must fit the memory budget, checked before the first starts
        if not cfg.is_image:  # an image run's memory is known once its data are read (ncgeom.runs.images)
            check_run_memory(cfg)
    check_devices(c.device for c in configs)  # and its device must exist here
    check_backends(configs)  # and its loss backend there
    check_data_dirs(c.data_dir for c in configs if c.is_image)  # and its data folder
    keys = spec.grid_keys(scale)
    out = prepare_folder(out_dir)
    names = [run_name(c, keys) for c in configs]
    with folder_lock(out, wait=wait):
        return _run_locked(spec, scale, seeds, out, names, configs, keys, workers, executor, engine, progress, on_run)


def _run_locked(spec: SweepSpec, scale: str, seeds: SeedSet, out: Path, names: list[str], configs: list[Config],
                keys: tuple[str, ...], workers: int, executor: Executor | None, engine: Engine, progress: bool,
                on_run: Callable[[RunRecord], None] | None) -> SweepResult:
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
    configs_of = dict(todo)
    try:
        for name, outcome in execute_units(todo, out, engine=engine, workers=workers, executor=executor):
            cfg = configs_of[name]
            if isinstance(outcome, RunSummary):
                record(RunRecord(name, cfg, outcome.status, outcome, invalid=invalid.get(name)))
            else:
                record(RunRecord(name, cfg, "failed", None, error=outcome, invalid=invalid.get(name)))
    finally:
        if bar is not None:
            bar.close()
        runs = tuple(records[n] for n in names if n in records)
        table = atomic_write_text(out / "summary.csv", summary_table(runs, keys))
        SweepRecord(name=spec.name, claim=spec.claim, description=spec.description, scale=scale, seeds=seeds,
                    spec_path=spec.path, grid_keys=keys, engine=engine,
                    runs=tuple(SweepRunEntry(r.name, r.status, r.error, r.invalid) for r in runs)).save(out)
    return SweepResult(spec, scale, str(out), runs, str(table), seeds)


def _clear_for_rerun(run_dir: Path) -> None:
    """Before a run (re)starts in ``run_dir``: drop its summary.json, so a damaged run never again counts as
    finished, even if this call is interrupted (the temporary files of atomic writes cut short by a kill are removed
    by the run's :class:`~ncgeom.runs.folder.RunFolder` when it starts, as for ``ncgeom train``)."""
    if run_dir.is_dir():
        (run_dir / SUMMARY_FILE).unlink(missing_ok=True)


def count_finished(spec: SweepSpec | str | Path, out_dir: str | Path, *, scale: str = "quick",
                   seeds: SeedSet = "confirmatory", device: str | None = None,
                   data_dir: str | Path | None = None) -> tuple[int, int]:
    """(runs of ``spec`` at ``scale`` (on ``device``, :func:`~ncgeom.campaigns.plan.sweep_configs`) with a summary.json in ``out_dir``,
    runs in the grid): progress on disk."""
    if not isinstance(spec, SweepSpec):
        spec = load_spec(spec)
    configs = sweep_configs(spec, scale=scale, seeds=seeds, device=device, data_dir=data_dir)
    keys = spec.grid_keys(scale)
    done = sum(is_finished(Path(out_dir) / run_name(c, keys)) for c in configs)
    return done, len(configs)


def summary_table(runs, keys) -> str:
    """CSV text: run name, the grid fields (blank where the run does not read the field: :meth:`Config.applies`),
    then TABLE_COLUMNS, one row per run."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(["run", *keys, *TABLE_COLUMNS])
    for r in runs:
        s = r.summary
        values: dict = {"status": r.status}
        if s is not None:
            values.update({col: s.final.value(col) for col in TABLE_COLUMNS if col in _FINAL_COLUMNS})
            values.update(nc_value=s.nc_value, rel_gap=s.rel_gap, spectrum_min=s.spectrum_min,
                          initial_etf_distance=s.initial.value("etf_distance"), epochs_run=s.epochs_run,
                          wall_time_s=s.wall_time_s)
        # a grid field the run does not read (beta of an scl run, say) is left blank: it is not the run's value
        row = [r.name, *(_short(getattr(r.config, k)) if r.config.applies(k) else "" for k in keys)]
        for col in TABLE_COLUMNS:
            v = values.get(col)
            row.append("" if v is None else (f"{v:.6g}" if isinstance(v, float) else v))
        writer.writerow(row)
    return buf.getvalue()


_FINAL_COLUMNS = ("loss", "gap", "etf_distance", "within_class", "nc1", "unit_norm", "zero_sum",
                  "equal_inner_product", "rankme", "ncc_accuracy", "test_ncc_accuracy", "mean_norm")


def _short(v) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)
