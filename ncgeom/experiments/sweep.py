"""Sweeps: a grid of configs from a TOML spec, run in parallel, resumable, summarized as CSV.

Spec format (tomllib; docs/experiments.md)::

    name = "claim1_scl_hscl_nc"          # also the default output folder name
    claim = "1"                           # optional: the theory.md section 9 claim it tests
    description = "..."
    [base]                                # Config fields shared by every run
    model = "unconstrained"
    [[grid]]                              # one table: the product of its lists;
    setting = ["scl"]                     # several [[grid]] tables: the union of their products
    [[grid]]
    setting = ["hscl"]
    beta = [1.0, 5.0]
    [quick]                               # scale overrides of [base]; may hold [[quick.grid]]
    epochs = 100                          # that replaces the grid
    [full]
    epochs = 500

Every run writes its own directory ``OUT/<run name>`` (see :mod:`ncgeom.experiments.result`); a run
whose summary.json exists is skipped, and summary.json is written last and atomically (temp file +
os.replace), so killing a sweep loses no finished run. At the end ``OUT/summary.csv`` (one row per run)
and ``OUT/sweep.json`` are written, atomically too.
"""

from __future__ import annotations

import contextlib
import csv
import hashlib
import io
import itertools
import re
import tomllib
from concurrent.futures import Executor, Future, ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ncgeom.experiments.config import Config, config_fields, config_from_dict
from ncgeom.experiments.result import read_summary, write_bytes_atomic, write_json_atomic
from ncgeom.threads import limit_cpu_threads
from ncgeom.validate import require_choice, require_int

__all__ = [
    "SCALES",
    "SweepSpec",
    "RunRecord",
    "SweepResult",
    "load_spec",
    "expand",
    "run_name",
    "run_sweep",
    "dask_executor",
    "limit_cpu_threads",
    "TABLE_COLUMNS",
]

SCALES: tuple[str, ...] = ("base", "quick", "full")
TABLE_COLUMNS: tuple[str, ...] = (
    "status", "nc_value", "loss", "gap", "rel_gap", "etf_distance", "within_class", "nc1", "unit_norm",
    "zero_sum", "equal_inner_product", "rankme", "spectrum_min", "ncc_accuracy", "test_ncc_accuracy",
    "mean_norm", "initial_etf_distance", "epochs_run", "wall_time_s",
)


@dataclass(frozen=True)
class SweepSpec:
    """A parsed sweep spec (module docstring). ``grids`` is a tuple of {field: tuple of values}."""

    name: str
    description: str
    claim: str | None
    base: dict = field(repr=False)
    grids: tuple[dict, ...] = field(repr=False)
    scales: dict = field(repr=False)
    path: str | None = None

    def grid_keys(self, scale: str = "base") -> tuple[str, ...]:
        """Fields that the grid of ``scale`` varies (in first-seen order)."""
        keys: dict[str, None] = {}
        for g in self.grids_at(scale):
            keys.update(dict.fromkeys(g))
        return tuple(keys)

    def grids_at(self, scale: str) -> tuple[dict, ...]:
        """The grid tables in force at ``scale`` (the scale's own grid if it has one)."""
        over = self.scales.get(scale, {}) if scale != "base" else {}
        return tuple(over["grid"]) if "grid" in over else self.grids



@dataclass(frozen=True)
class RunRecord:
    """One run of a sweep: its name, config, summary (None unless finished) and status.

    status: ``completed`` / ``diverged`` (from summary.json), or ``failed`` (an exception, in ``error``).
    ``skipped``: True if it was already finished before this sweep call (resumed).
    """

    name: str
    config: Config
    status: str
    summary: dict | None = field(default=None, repr=False)
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

    def summaries(self) -> list[dict]:
        """summary.json objects of the finished runs (each holds its "config")."""
        return [r.summary for r in self.runs if r.summary is not None]


def load_spec(path: str | Path) -> SweepSpec:
    """Parse and validate a sweep spec TOML file (every config of every scale is validated here)."""
    path = Path(path)
    with open(path, "rb") as fh:
        try:
            raw = tomllib.load(fh)
        except tomllib.TOMLDecodeError as exc:
            raise ValueError(f"spec {path}: invalid TOML: {exc}") from None
    return spec_from_dict(raw, path=str(path))


def spec_from_dict(raw: dict[str, Any], *, path: str | None = None) -> SweepSpec:
    """A SweepSpec from the parsed TOML mapping (see load_spec)."""
    where = f"spec {path}" if path else "spec"
    known = {"name", "description", "claim", "base", "grid", "quick", "full"}
    unknown = sorted(set(raw) - known)
    if unknown:
        raise ValueError(f"{where}: unknown key(s) {', '.join(unknown)}; accepted: {', '.join(sorted(known))}")
    name = raw.get("name") or (Path(path).stem if path else "sweep")
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", str(name)):
        raise ValueError(f"{where}: name must use letters, digits, '_', '.', '-' only, got {name!r}")
    base = dict(raw.get("base", {}))
    grids = _parse_grids(raw.get("grid", {}), where)
    scales = {}
    for s in ("quick", "full"):
        over = dict(raw.get(s, {}))
        if "grid" in over:
            over["grid"] = _parse_grids(over["grid"], f"{where} [{s}]")
        scales[s] = over
    claim = raw.get("claim")
    spec = SweepSpec(str(name), str(raw.get("description", "")), None if claim is None else str(claim),
                     base, grids, scales, path)
    for scale in SCALES:
        expand(spec, scale=scale)  # validates every config now, before anything runs
    return spec


def _parse_grids(raw, where: str) -> tuple[dict, ...]:
    tables = [raw] if isinstance(raw, dict) else list(raw)
    names = {f.name for f in config_fields()}
    out = []
    for t in tables:
        if not isinstance(t, dict):
            raise ValueError(f"{where}: grid must be a table or an array of tables")
        g = {}
        for k, v in t.items():
            if k not in names:
                raise ValueError(f"{where}: unknown config field {k!r} in grid")
            values = tuple(v) if isinstance(v, list) else (v,)
            if not values:
                raise ValueError(f"{where}: grid field {k!r} has no values")
            g[k] = values
        out.append(g)
    return tuple(out) if out else ({},)


def expand(spec: SweepSpec, *, scale: str = "quick") -> list[Config]:
    """The configs of a spec at a scale: base <- scale overrides <- each grid point (deduplicated)."""
    scale = require_choice("scale", scale, SCALES)
    over = {k: v for k, v in spec.scales.get(scale, {}).items() if k != "grid"} if scale != "base" else {}
    base = {**spec.base, **over}
    configs, seen = [], set()
    for g in spec.grids_at(scale):
        keys = list(g)
        for values in itertools.product(*(g[k] for k in keys)):
            values_dict = dict(zip(keys, values))
            try:
                cfg = config_from_dict({**base, **values_dict})
            except (ValueError, TypeError) as exc:
                where = f"spec {spec.path or spec.name} (scale {scale}, {values_dict})"
                raise ValueError(f"{where}: {exc}") from None
            key = cfg.to_json()
            if key not in seen:
                seen.add(key)
                configs.append(cfg)
    return configs


def run_name(config: Config, keys) -> str:
    """Directory name of a run: the grid fields' values, then a hash of the whole config."""
    parts = [f"{k}={_short(getattr(config, k))}" for k in keys]
    digest = hashlib.sha1(config.to_json().encode()).hexdigest()[:8]
    return re.sub(r"[^A-Za-z0-9_.=,-]", "_", ",".join(parts + [digest]))


def _short(v) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)


def _execute(config_dict: dict, run_dir: str) -> dict:
    """Worker: run one config into its directory; return its summary (module-level, picklable)."""
    from ncgeom.experiments.train import run

    return run(Config(**config_dict), out_dir=run_dir).summary()


def _init_worker() -> None:  # pragma: no cover - runs in child processes
    limit_cpu_threads(1)  # one core per worker: the workers are the parallelism


def run_sweep(
    spec: SweepSpec | str | Path,
    out_dir: str | Path,
    *,
    scale: str = "quick",
    workers: int = 1,
    executor: Executor | None = None,
    progress: bool = False,
) -> SweepResult:
    """Run every config of ``spec`` at ``scale`` into ``out_dir``, skipping finished runs.

    Parameters
    ----------
    spec : SweepSpec or path to a TOML spec
    out_dir : path
        Receives one directory per run, summary.csv and sweep.json.
    scale : {"quick", "full", "base"}
        Which overrides of the spec to apply ("base": none).
    workers : int
        Processes of the default ProcessPoolExecutor (spawn start method, one torch thread each);
        1 runs in this process, serially.
    executor : concurrent.futures.Executor, optional
        Any executor with ``submit`` returning concurrent.futures.Future (e.g. a Dask
        ``Client.get_executor()``); then ``workers`` is ignored and the caller shuts it down.
    progress : bool
        A tqdm bar over runs.

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
    todo = []
    for name, cfg in zip(names, configs):
        summary = read_summary(out / name)
        if summary is not None:
            records[name] = RunRecord(name, cfg, summary.get("status", "completed"), summary, skipped=True)
        else:
            todo.append((name, cfg))

    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=len(configs), initial=len(records), unit="run", desc=spec.name)
    try:
        if todo and executor is None and workers == 1:
            for name, cfg in todo:
                records[name] = _collect(name, cfg, lambda c=cfg, n=name: _execute(c.to_dict(), str(out / n)))
                if bar is not None:
                    bar.update(1)
        elif todo:
            own = executor is None
            if own:
                import multiprocessing

                executor = ProcessPoolExecutor(max_workers=min(workers, len(todo)), initializer=_init_worker,
                                               mp_context=multiprocessing.get_context("spawn"))
            try:
                futures: dict[Future, tuple[str, Config]] = {
                    executor.submit(_execute, cfg.to_dict(), str(out / name)): (name, cfg) for name, cfg in todo
                }
                for fut in as_completed(futures):
                    name, cfg = futures[fut]
                    records[name] = _collect(name, cfg, fut.result)
                    if bar is not None:
                        bar.update(1)
            finally:
                if own:
                    executor.shutdown(wait=True, cancel_futures=True)
    finally:
        if bar is not None:
            bar.close()
        runs = tuple(records[n] for n in names if n in records)
        table = out / "summary.csv"
        write_bytes_atomic(table, summary_table(runs, keys).encode())
        write_json_atomic(out / "sweep.json", {
            "name": spec.name, "claim": spec.claim, "description": spec.description, "scale": scale,
            "spec_path": spec.path, "grid_keys": list(keys),
            "runs": [{"name": r.name, "status": r.status, "error": r.error} for r in runs],
        })
    return SweepResult(spec, scale, str(out), runs, str(table))


def _collect(name: str, cfg: Config, get) -> RunRecord:
    try:
        summary = get()
    except Exception as exc:  # a failed run must not stop the sweep; it is retried on resume
        return RunRecord(name, cfg, "failed", None, error=f"{type(exc).__name__}: {exc}")
    return RunRecord(name, cfg, summary.get("status", "completed"), summary)


def summary_table(runs, keys) -> str:
    """CSV text: run name, the grid fields, then TABLE_COLUMNS, one row per run."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(["run", *keys, *TABLE_COLUMNS])
    for r in runs:
        s = r.summary or {}
        final, initial = s.get("final") or {}, s.get("initial") or {}
        loss, ncv = final.get("loss"), s.get("nc_value")
        spectrum = final.get("spectrum") or []
        values = {
            "status": r.status, "nc_value": ncv, "loss": loss, "gap": s.get("gap"),
            "rel_gap": None if loss is None or not ncv else (loss - ncv) / abs(ncv),
            "spectrum_min": min((v for v in spectrum if v is not None), default=None),
            "initial_etf_distance": initial.get("etf_distance"),
            "epochs_run": s.get("epochs_run"), "wall_time_s": s.get("wall_time_s"),
        }
        row = [r.name, *(_short(getattr(r.config, k)) for k in keys)]
        for col in TABLE_COLUMNS:
            v = values[col] if col in values else final.get(col)
            row.append("" if v is None else (f"{v:.6g}" if isinstance(v, float) else v))
        writer.writerow(row)
    return buf.getvalue()


@contextlib.contextmanager
def dask_executor(address):
    """A Dask distributed executor for ``run_sweep(executor=...)``, as a context manager.

    ``with dask_executor("tcp://host:8786") as ex: run_sweep(spec, out, executor=ex)``. ``address``
    is a scheduler address or a ``dask.distributed`` cluster object (e.g. a LocalCluster). The run
    directories must be on a filesystem the Dask workers share with this process. Needs the optional
    extra ``ncgeom[distributed]`` (dask[distributed]); imported here, lazily.
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
