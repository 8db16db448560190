"""Sweeps: every config of a spec run in parallel, resumably, summarized as CSV; the one executor builder.

Every run writes its own directory ``OUT/<run name>`` (:mod:`ncgeom.experiments.records`); a run whose
summary.json exists is skipped, and summary.json is written last and atomically, so killing a sweep
loses no finished run. At the end ``OUT/summary.csv`` (one row per run) and ``OUT/sweep.json`` are
written, atomically too.

:func:`make_executor` is the one place where runs get their parallelism (used by ``ncgeom sweep``,
:func:`ncgeom.experiments.claims.run_claims` and ``ncgeom reproduce``): none (runs in this process),
a process pool (spawn start method, one CPU thread per worker) or a Dask cluster.
"""

from __future__ import annotations

import contextlib
import csv
import io
import multiprocessing
from collections.abc import Callable, Iterator
from concurrent.futures import Executor, Future, ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from ncgeom.atomic_io import atomic_write_json, atomic_write_text
from ncgeom.experiments.config import Config
from ncgeom.experiments.records import RunSummary
from ncgeom.experiments.spec import SweepSpec, expand, load_spec, run_name
from ncgeom.experiments.train import run
from ncgeom.threads import limit_cpu_threads
from ncgeom.validate import require_int

__all__ = [
    "SweepStatus",
    "RunRecord",
    "SweepResult",
    "run_sweep",
    "make_executor",
    "process_pool",
    "dask_executor",
    "summary_table",
    "TABLE_COLUMNS",
]

SweepStatus = Literal["completed", "diverged", "failed"]
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
    call (resumed).
    """

    name: str
    config: Config
    status: SweepStatus
    summary: RunSummary | None = field(default=None, repr=False)
    skipped: bool = False
    error: str | None = None


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

    def summaries(self) -> list[RunSummary]:
        """The summaries of the finished runs."""
        return [r.summary for r in self.runs if r.summary is not None]


def _execute(config_dict: dict, run_dir: str) -> dict:
    """Worker: run one config into its directory; return its summary.json object (picklable)."""
    return run(Config(**config_dict), out_dir=run_dir).summary()


def _init_worker() -> None:  # pragma: no cover - runs in child processes
    limit_cpu_threads(1)  # one core per worker: the workers are the parallelism


def process_pool(workers: int) -> ProcessPoolExecutor:
    """A pool of ``workers`` processes (spawn start method: no inherited torch state; one CPU thread each)."""
    workers = require_int("workers", workers, min_value=1)
    return ProcessPoolExecutor(max_workers=workers, initializer=_init_worker,
                               mp_context=multiprocessing.get_context("spawn"))


@contextlib.contextmanager
def dask_executor(address) -> Iterator[Executor]:
    """A Dask distributed executor, as a context manager.

    ``address`` is a scheduler address (``tcp://host:8786``) or a ``dask.distributed`` cluster object
    (e.g. a LocalCluster). The run directories must be on a filesystem the Dask workers share with this
    process. Needs the optional extra ``ncgeom[distributed]``; imported here, lazily.
    """
    try:
        from dask.distributed import Client
    except ImportError:
        raise ValueError(
            "scheduler: dask.distributed is not installed; install the extra: pip install 'ncgeom[distributed]'"
        ) from None
    try:
        client = Client(address, timeout=30)
    except (OSError, TimeoutError) as exc:
        raise ValueError(f"scheduler: cannot connect to the Dask scheduler at {address!r}: {exc}") from None
    try:
        yield client.get_executor()
    finally:
        client.close()


@contextlib.contextmanager
def make_executor(workers: int = 1, *, scheduler=None) -> Iterator[Executor | None]:
    """The executor of a batch of runs: a Dask cluster (``scheduler``), a :func:`process_pool` of
    ``workers`` (> 1), or None (``workers`` = 1: the runs go serially in this process, whose thread
    settings are left alone; the CLI limits them to one thread, as in a worker: ncgeom.threads)."""
    workers = require_int("workers", workers, min_value=1)
    if scheduler is not None:
        with dask_executor(scheduler) as ex:
            yield ex
    elif workers > 1:
        pool = process_pool(workers)
        try:
            yield pool
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
    else:
        yield None


def run_sweep(
    spec: SweepSpec | str | Path,
    out_dir: str | Path,
    *,
    scale: str = "quick",
    workers: int = 1,
    executor: Executor | None = None,
    progress: bool = False,
    on_run: Callable[[RunRecord], None] | None = None,
) -> SweepResult:
    """Run every config of ``spec`` at ``scale`` into ``out_dir``, skipping finished runs.

    Parameters
    ----------
    spec : SweepSpec, a shipped spec name or a path to a TOML spec
    out_dir : path
        Receives one directory per run, summary.csv and sweep.json.
    scale : {"tiny", "quick", "full"}
    workers : int
        Without ``executor``: processes of a :func:`process_pool` (1: serially, in this process).
    executor : concurrent.futures.Executor, optional
        Any executor whose ``submit`` returns a Future (a process pool, ``Client.get_executor()`` of
        Dask); ``workers`` is then ignored and the caller shuts it down.
    progress : bool
        A tqdm bar over this sweep's runs (stderr).
    on_run : callable, optional
        Called with each RunRecord as it is known (finished earlier, finished now, or failed).

    Returns
    -------
    SweepResult
        Failed runs (exceptions) are recorded with status "failed" and no summary; rerunning the
        sweep retries them.
    """
    if not isinstance(spec, SweepSpec):
        spec = load_spec(spec)
    workers = require_int("workers", workers, min_value=1)
    configs = expand(spec, scale=scale)
    keys = spec.grid_keys(scale)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    names = [run_name(c, keys) for c in configs]
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

    todo = []
    for name, cfg in zip(names, configs):
        summary = RunSummary.load(out / name)
        if summary is not None:
            record(RunRecord(name, cfg, summary.status, summary, skipped=True))
        else:
            todo.append((name, cfg))
    try:
        if todo and executor is None and workers > 1:
            with process_pool(min(workers, len(todo))) as pool:
                _submit_all(pool, todo, out, record)
        elif todo and executor is not None:
            _submit_all(executor, todo, out, record)
        else:
            for name, cfg in todo:
                record(_collect(name, cfg, lambda c=cfg, n=name: _execute(c.to_dict(), str(out / n))))
    finally:
        if bar is not None:
            bar.close()
        runs = tuple(records[n] for n in names if n in records)
        table = atomic_write_text(out / "summary.csv", summary_table(runs, keys))
        atomic_write_json(out / "sweep.json", {
            "name": spec.name, "claim": spec.claim, "description": spec.description, "scale": scale,
            "spec_path": spec.path, "grid_keys": list(keys),
            "runs": [{"name": r.name, "status": r.status, "error": r.error} for r in runs],
        })
    return SweepResult(spec, scale, str(out), runs, str(table))


def _submit_all(ex: Executor, todo, out: Path, record) -> None:
    futures: dict[Future, tuple[str, Config]] = {
        ex.submit(_execute, cfg.to_dict(), str(out / name)): (name, cfg) for name, cfg in todo
    }
    for fut in as_completed(futures):
        name, cfg = futures[fut]
        record(_collect(name, cfg, fut.result))


def _collect(name: str, cfg: Config, get) -> RunRecord:
    try:
        summary = RunSummary.from_dict(get())
    except Exception as exc:  # a failed run must not stop the sweep; it is retried on resume
        return RunRecord(name, cfg, "failed", None, error=f"{type(exc).__name__}: {exc}")
    return RunRecord(name, cfg, summary.status, summary)


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
