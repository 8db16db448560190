"""Profile ``ncgeom reproduce --full`` without running it: where the paper-scale CPU time goes, per claim.

The full reproduction takes hours, so it is estimated from short measured runs (issue "batched training
engine", first target). For each claim (``ncgeom.experiments.claims.CLAIMS``) the full-scale configs
(``expand(load_spec(spec), scale="full")``) are grouped by shape (dataset, C, N, B, d, model and sizes,
positives, normalization, estimator, epochs, metrics cadence). For one representative config of every
group (the group's first config), a short run of ``ncgeom.experiments.train.run`` (``Config.replace``
of ``epochs``, written to a temporary run directory) is timed in this process with one torch thread,
its phases timed by wrapping the functions ``run`` calls:

- **setup**: ``check_run_memory``, ``make_data``, ``build_model``, ``run_nc_value`` (once per run);
- **metrics**: ``_evaluate`` (the initial state and every ``metrics_every`` epochs: ``nc_metrics``,
  test NCC accuracy, norms);
- **I/O**: ``provenance``, ``save_config``, ``HistoryWriter`` (history.jsonl rewritten whole by atomic
  rename after every epoch), ``atomic_write_bytes`` (embeddings.npz), ``RunSummary.save``;
- **train**: the rest of the wall time of ``run``: batch draws, forward, ``batch_loss``, backward, Adam,
  the per-epoch state snapshot, the final embedding. Per-step cost = train / steps.

Each group is measured ``--repeats`` times after one warm-up run; the medians are used. History I/O
grows with the epoch count (the whole file is rewritten each epoch, O(E^2) bytes), so it is not scaled
from the short run: a ``HistoryWriter`` in a temporary folder is fed the full number of epochs of the
short run's last record (with metrics) and timed. Process start is the median wall time of a fresh
``python -c "import ncgeom.experiments.train, torch"`` (what a spawn worker pays before its first run).
The 3-GEMM floor of a shape is the median time of S = Z Z^T ([B, B] from Z [B, d]) and the two matmuls
of its gradient (G Z, G^T Z), float32, one thread (B = 2 x batch for noise positives: two views).

Estimate per group: runs x (setup + epochs x steps/epoch x per-step + metric evaluations x per-evaluation
+ fixed I/O + history I/O at full epochs); per claim, one process start (the claim's sweep on one
worker); the total adds (1 + workers) starts for ``ncgeom reproduce`` (its parent and its pool, shared by
all claims). All figures are CPU seconds of one thread (wall time on one worker).

``--check`` runs one complete full-scale sweep of the cheapest claim (``ncgeom sweep SPEC --scale full
--workers 1``, a subprocess) if its estimate is under ``--check-limit`` seconds, and prints measured vs
estimated wall time.

Usage: python benchmarks/profile_full.py [--repeats 3] [--target-steps 150] [--claims 1 6] [--check]
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import math
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch

import ncgeom.models
from ncgeom.experiments import train
from ncgeom.experiments.claims import CLAIMS
from ncgeom.experiments.config import Config
from ncgeom.experiments.records import HistoryWriter, RunSummary
from ncgeom.experiments.spec import expand, load_spec
from ncgeom.threads import limit_cpu_threads

PHASES = ("setup", "metrics", "io_history", "io_other")
#: The clock of every phase and step timing: process CPU time by default (robust on a machine whose other jobs
#: take turns on the cores; one torch thread, so CPU seconds = wall seconds on an idle machine), or wall time.
CLOCKS: dict[str, Callable[[], float]] = {"cpu": time.process_time, "wall": time.perf_counter}
clock = CLOCKS["cpu"]
START_COMMAND = "import ncgeom.experiments.train, torch"


@dataclasses.dataclass
class Group:
    """Full-scale configs of one claim sharing a shape; ``config`` is the one measured."""

    claim: str
    key: tuple
    configs: list[Config]

    @property
    def config(self) -> Config:
        return self.configs[0]

    @property
    def num_train(self) -> int:
        return self.config.num_train

    @property
    def steps_per_epoch(self) -> int:
        return math.ceil(self.num_train / self.config.batch_size)

    @property
    def metric_evaluations(self) -> int:
        """``_evaluate`` calls of a full run: the initial state and every metrics epoch (the last included)."""
        e, every = self.config.epochs, self.config.metrics_every
        return 1 + sum(1 for k in range(1, e + 1) if k % every == 0 or k == e)

    def shape(self) -> str:
        c = self.config
        model = c.model if c.model != "mlp" else f"mlp{c.depth}x{c.hidden_dim}"
        extra = "" if c.positives == "label" else f", {c.positives} positives"
        extra += "" if c.dataset == "gaussian" else f", {c.dataset}"
        extra += "" if c.norm == "sphere" else f", norm={c.norm}"
        return f"({c.classes}, {self.num_train}, {c.batch_size}, {c.embedding_dim}, {model}{extra})"


@dataclasses.dataclass
class Measure:
    """Medians over repeats of one group's short run (seconds unless said)."""

    epochs: int
    step_ms: float
    setup_s: float
    metric_s: float  # per _evaluate call
    io_fixed_s: float  # per run: provenance, config, embeddings, summary, history open/close of the short run
    io_history_full_s: float  # per run: the history rewrites of a full run (simulated at full epochs)
    floor_ms: float
    wall_s: float  # the short run, end to end


@dataclasses.dataclass
class Estimate:
    runs: int
    train_s: float
    metrics_s: float
    io_s: float
    setup_s: float

    @property
    def total(self) -> float:
        return self.train_s + self.metrics_s + self.io_s + self.setup_s


@contextmanager
def instrumented(acc: dict[str, float]) -> Iterator[None]:
    """Wrap the functions ``train.run`` calls so that their wall time accumulates in ``acc`` by phase."""
    targets: list[tuple[Any, str, str]] = [
        (train, "check_run_memory", "setup"), (train, "make_data", "setup"), (ncgeom.models, "build_model", "setup"),
        (train, "run_nc_value", "setup"), (train, "_evaluate", "metrics"), (train, "provenance", "io_other"),
        (train, "save_config", "io_other"), (train, "atomic_write_bytes", "io_other"), (RunSummary, "save", "io_other"),
        (HistoryWriter, "__init__", "io_other"), (HistoryWriter, "close", "io_other"),
        (HistoryWriter, "append", "io_history"),
    ]
    saved = [(obj, name, obj.__dict__[name]) for obj, name, _ in targets]

    def wrap(fn: Callable, phase: str) -> Callable:
        def timed(*args, **kwargs):
            t0 = clock()
            try:
                return fn(*args, **kwargs)
            finally:
                acc[phase] += clock() - t0
                acc[f"calls_{phase}"] += 1

        return timed

    try:
        for obj, name, phase in targets:
            setattr(obj, name, wrap(obj.__dict__[name], phase))
        yield
    finally:
        for obj, name, original in saved:
            setattr(obj, name, original)


def timed_run(config: Config) -> tuple[dict[str, float], Any]:
    """One instrumented ``train.run`` into a temporary run directory: phase times and the Result."""
    acc: dict[str, float] = collections.defaultdict(float)
    with tempfile.TemporaryDirectory(prefix="ncgeom-profile-") as tmp, instrumented(acc):
        t0 = clock()
        result = train.run(config, out_dir=Path(tmp) / "run")
        acc["wall"] = clock() - t0
    return acc, result


def history_io_seconds(record, epochs: int) -> float:
    """Wall time of a full run's history.jsonl writes: ``epochs`` appends of ``record`` and the close."""
    with tempfile.TemporaryDirectory(prefix="ncgeom-profile-") as tmp:
        t0 = clock()
        writer = HistoryWriter(tmp)
        for _ in range(epochs):
            writer.append(record)
        writer.close()
        return clock() - t0


def floor_ms(rows: int, dim: int, *, repeats: int = 7) -> float:
    """Median ms of the 3-GEMM floor at z [rows, dim] float32: S = Z Z^T, S Z, S^T Z."""
    z = torch.nn.functional.normalize(torch.randn(rows, dim, generator=torch.Generator().manual_seed(0)), dim=1)
    inner = max(1, int(2e-3 / max(_floor_once(z), 1e-7)))  # ~2 ms per sample: timer resolution is no issue
    samples = []
    for _ in range(repeats):
        t0 = clock()
        for _ in range(inner):
            _floor_once(z)
        samples.append((clock() - t0) / inner)
    return statistics.median(samples) * 1e3


def _floor_once(z: torch.Tensor) -> float:
    t0 = time.perf_counter()
    s = z @ z.T
    s @ z
    s.T @ z
    return time.perf_counter() - t0


def child(command: list[str]) -> tuple[float, float]:
    """Run ``command`` to completion: (wall seconds, CPU seconds of the child, user + system)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def start_seconds(repeats: int) -> float:
    """Median time (the chosen clock) of a fresh interpreter importing the training module and torch."""
    samples = [child([sys.executable, "-c", START_COMMAND]) for _ in range(repeats)]
    return statistics.median(s[1] if clock is CLOCKS["cpu"] else s[0] for s in samples)


def groups_of(claim_id: str) -> list[Group]:
    out: dict[tuple, Group] = {}
    for cfg in expand(load_spec(CLAIMS[claim_id].spec), scale="full"):
        key = (cfg.dataset, cfg.classes, cfg.num_train, cfg.batch_size, cfg.embedding_dim, cfg.model, cfg.hidden_dim,
               cfg.depth, cfg.positives, cfg.norm, cfg.estimator, cfg.epochs, cfg.metrics_every, cfg.dtype)
        out.setdefault(key, Group(claim_id, key, [])).configs.append(cfg)
    return list(out.values())


def measure(group: Group, *, repeats: int, target_steps: int) -> Measure:
    """Short instrumented runs of the group's config (module docstring); medians over ``repeats``."""
    full = group.config
    epochs = max(2, min(full.epochs, math.ceil(target_steps / group.steps_per_epoch)))
    short = full.replace(epochs=epochs)
    timed_run(full.replace(epochs=1))  # warm-up: imports, allocator, caches (a worker's runs after its first)
    samples = []
    last = None
    for _ in range(repeats):
        acc, result = timed_run(short)
        steps = len(result.history) * group.steps_per_epoch
        other = sum(acc[p] for p in PHASES)
        history_calls = max(acc["calls_io_history"], 1)
        samples.append({
            "step_ms": (acc["wall"] - other) / max(steps, 1) * 1e3,
            "setup_s": acc["setup"],
            "metric_s": acc["metrics"] / max(acc["calls_metrics"], 1),
            "history_per_append": acc["io_history"] / history_calls,
            "io_fixed_s": acc["io_other"],
            "wall_s": acc["wall"],
        })
        last = result
    med = {k: statistics.median(s[k] for s in samples) for k in samples[0]}
    assert last is not None
    record = next((r for r in reversed(last.history) if r.metrics is not None), last.history[-1])
    hist = statistics.median(history_io_seconds(record, full.epochs) for _ in range(max(1, repeats)))
    rows = 2 * full.batch_size if full.positives == "noise" else full.batch_size
    return Measure(epochs, med["step_ms"], med["setup_s"], med["metric_s"], med["io_fixed_s"], hist,
                   floor_ms(rows, full.embedding_dim), med["wall_s"])


def estimate(group: Group, m: Measure) -> Estimate:
    runs = len(group.configs)
    steps = group.config.epochs * group.steps_per_epoch
    return Estimate(runs, runs * steps * m.step_ms / 1e3, runs * group.metric_evaluations * m.metric_s,
                    runs * (m.io_fixed_s + m.io_history_full_s), runs * m.setup_s)


def load() -> str:
    return "/".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3, help="short runs per shape (median) [3]")
    parser.add_argument("--target-steps", type=int, default=150, help="training steps of a short run (>= 2 epochs) [150]")
    parser.add_argument("--claims", nargs="*", default=list(CLAIMS), help="claim ids [all]")
    parser.add_argument("--workers", type=int, default=min(os.cpu_count() or 1, 4),
                        help="workers of `ncgeom reproduce` (its default: min(cpus, 4)) for the start cost of the total")
    parser.add_argument("--clock", choices=tuple(CLOCKS), default="cpu", help="process CPU time or wall time [cpu]")
    parser.add_argument("--check", action="store_true", help="run the cheapest claim's full sweep and compare")
    parser.add_argument("--check-limit", type=float, default=120.0, help="largest estimate (s) to check [120]")
    args = parser.parse_args()
    global clock
    clock = CLOCKS[args.clock]
    limit_cpu_threads(1)
    loads = [load()]
    print(f"# clock: {args.clock} seconds; torch {torch.__version__}, threads {torch.get_num_threads()}, cpus {os.cpu_count()}, load avg (1/5/15 min) {loads[0]}")
    start = start_seconds(max(3, args.repeats + 2))
    print(f"# process start (python -c {START_COMMAND!r}): {start:.2f} s median")

    per_claim: dict[str, list[tuple[Group, Measure, Estimate]]] = {}
    for cid in args.claims:
        per_claim[cid] = []
        for g in groups_of(cid):
            m = measure(g, repeats=args.repeats, target_steps=args.target_steps)
            e = estimate(g, m)
            per_claim[cid].append((g, m, e))
            print(f"# claim {cid} {g.shape()} x{len(g.configs)}: short run {m.epochs} ep {m.wall_s:.2f} s, "
                  f"step {m.step_ms:.3f} ms, floor {m.floor_ms:.4f} ms, metrics {m.metric_s * 1e3:.2f} ms/eval, "
                  f"setup {m.setup_s * 1e3:.1f} ms, io {m.io_fixed_s * 1e3:.1f} ms + history {m.io_history_full_s:.2f} s/run; "
                  f"load {load()}", flush=True)
        loads.append(load())

    grand = sum(e.total for rows in per_claim.values() for _, _, e in rows) + len(per_claim) * start
    print()
    print("| claim | runs | shape (C, N, B, d, model) | epochs | steps/run | per-step ms | floor ms | ratio | "
          "est. train s | est. metrics s | est. I/O s | est. setup s | est. start s | est. total s | share of total |")
    print("|" + "---|" * 15)
    sums: dict[str, float] = collections.defaultdict(float)
    for cid, rows in per_claim.items():
        for i, (g, m, e) in enumerate(rows):
            label = cid if len(rows) == 1 else f"{cid}{'abcdefgh'[i]}"
            steps = g.config.epochs * g.steps_per_epoch
            own_start = start if len(rows) == 1 else 0.0  # a claim's start is on its "(all)" row when it has several
            tot = e.total + own_start
            print(f"| {label} | {e.runs} | {g.shape()} | {g.config.epochs} | {steps} | {m.step_ms:.2f} | {m.floor_ms:.3f} | "
                  f"{m.step_ms / m.floor_ms:.0f} | {e.train_s:.0f} | {e.metrics_s:.0f} | {e.io_s:.1f} | {e.setup_s:.1f} | "
                  f"{own_start:.1f} | {tot:.0f} | {tot / grand:.1%} |")
            for name, value in (("runs", e.runs), ("train", e.train_s), ("metrics", e.metrics_s), ("io", e.io_s),
                                ("setup", e.setup_s), ("steps", e.runs * steps)):
                sums[name] += value
        if len(rows) > 1:
            claim_total = sum(e.total for _, _, e in rows) + start
            print(f"| {cid} (all) | {sum(e.runs for _, _, e in rows)} | | | | | | | "
                  f"{sum(e.train_s for _, _, e in rows):.0f} | {sum(e.metrics_s for _, _, e in rows):.0f} | "
                  f"{sum(e.io_s for _, _, e in rows):.1f} | {sum(e.setup_s for _, _, e in rows):.1f} | {start:.1f} | "
                  f"{claim_total:.0f} | {claim_total / grand:.1%} |")
    starts = len(per_claim) * start
    print(f"| total | {sums['runs']:.0f} | | | {sums['steps']:.0f} run-steps | | | | {sums['train']:.0f} | {sums['metrics']:.0f} | "
          f"{sums['io']:.1f} | {sums['setup']:.1f} | {starts:.1f} | {grand:.0f} | 100% |")
    print(f"| share | | | | | | | | {sums['train'] / grand:.1%} | {sums['metrics'] / grand:.1%} | {sums['io'] / grand:.1%} | "
          f"{sums['setup'] / grand:.1%} | {starts / grand:.1%} | | |")
    reproduce_start = (1 + args.workers) * start
    print(f"\n# total CPU estimate: {grand:.0f} s = {grand / 3600:.2f} CPU-h with one start per claim; `ncgeom reproduce "
          f"--full --workers {args.workers}` pays {1 + args.workers} starts ({reproduce_start:.1f} s) instead of "
          f"{len(per_claim)}: {grand - starts + reproduce_start:.0f} CPU-s, about "
          f"{(grand - starts) / args.workers + start * 2:.0f} s wall on {args.workers} workers if perfectly balanced")
    print(f"# load avg during the measurements: {', '.join(loads)}; at the end {load()}")

    if args.check:
        check(per_claim, start, args.check_limit)


def check(per_claim, start: float, limit: float) -> None:
    """Run the cheapest claim's full sweep end to end (one worker) and compare with its estimate."""
    totals = {cid: sum(e.total for _, _, e in rows) + start for cid, rows in per_claim.items()}
    cid = min(totals, key=lambda c: totals[c])
    if totals[cid] > limit:
        print(f"# check skipped: the cheapest claim ({cid}) is estimated at {totals[cid]:.0f} s > {limit:.0f} s")
        return
    spec = CLAIMS[cid].spec
    exe = Path(sys.executable).with_name("ncgeom")
    with tempfile.TemporaryDirectory(prefix="ncgeom-profile-") as tmp:
        before = load()
        wall, cpu = child([str(exe), "sweep", spec, "--scale", "full", "--out", str(Path(tmp) / "out"), "--workers", "1",
                           "--quiet"])
    print(f"# check: claim {cid} ({spec}) full sweep, `ncgeom sweep --scale full --workers 1`: wall {wall:.1f} s, CPU "
          f"{cpu:.1f} s; estimated {totals[cid]:.1f} s (measured / estimated: wall {wall / totals[cid]:.2f}, CPU "
          f"{cpu / totals[cid]:.2f}); load before {before}, after {load()}")


if __name__ == "__main__":
    main()
