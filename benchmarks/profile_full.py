"""Profile ``ncgeom reproduce --full`` without running it: where the paper-scale CPU time goes, per claim.

The full reproduction takes hours, so it is estimated from short measured runs (issue "batched training
engine", first target). Two engines: ``--engine sequential`` (the "before" table of BENCHMARKS.md, one
``ncgeom.runs.run`` per config; described first) and ``--engine batched`` (the default engine
of sweeps, ``ncgeom.runs.stacked.run_stack``; described after it).

Sequential. For each claim (``ncgeom.campaigns.claims.CLAIMS``) the full-scale configs
(``expand(load_spec(spec), scale="full")``) are grouped by shape (dataset, C, N, B, d, model and sizes,
positives, normalization, estimator, epochs, metrics cadence). For one representative config of every
group (the group's first config), a short run of ``ncgeom.runs.run`` (``Config.replace``
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
``python -c "import ncgeom.runs.single, torch"`` (what a spawn worker pays before its first run).
The 3-GEMM floor of a shape is the median time of S = Z Z^T ([B, B] from Z [B, d]) and the two matmuls
of its gradient (G Z, G^T Z), float32, one thread (B = 2 x batch for noise positives: two views).

Estimate per group: runs x (setup + epochs x steps/epoch x per-step + metric evaluations x per-evaluation
+ fixed I/O + history I/O at full epochs); per claim, one process start (the claim's sweep on one
worker); the total adds (1 + workers) starts for ``ncgeom reproduce`` (its parent and its pool, shared by
all claims). All figures are CPU seconds of one thread (wall time on one worker).

Batched. Each claim's full configs are grouped by ``ncgeom.runs.stacked.stack_key`` (the runs that
can share a stack). For each group, one stack of R = min(runs, ``--cap``) of its runs (the first R) is
trained by ``run_stack`` for a short number of epochs, a multiple of the group's ``metrics_every`` (the
smallest giving >= ``--target-steps`` steps per run), into temporary run directories, in this process with
one torch thread, after a one-epoch warm-up stack of the same R; ``--repeats`` times, medians. Its phases
are timed by wrapping what ``run_stack`` calls:

- **setup**: ``check_run_memory``, ``seed_streams``, ``make_data``, ``build_model``, ``run_nc_value``;
- **metrics**: ``metrics_record`` and ``StackedEncoder.embed`` (the embeddings it is given, and the final ones);
- **I/O**: ``prepare_run_dir``, ``provenance``, ``save_config``, ``HistoryWriter`` (``append`` rewrites the
  file at the metric epochs only), ``write_run_outputs``;
- **train**: the rest of the wall time of ``run_stack``, itself split (printed per group) into the batch
  draws (``class_balanced_batches``, ``two_view_batch``), forward (``StackedEncoder.__call__``), loss
  (``stacked_weighted`` or ``batch_loss``, forward only), backward (``Tensor.backward``, the loss's
  included), Adam (``StackedAdam.step``, ``zero_grad``), state (``snapshot``, ``restore``) and the remainder
  (the Python step loop, stacking the parameters). Per run-step cost = train / (R x steps).

A group larger than the cap is also measured at R = cap // 2: its estimate scales the R = cap per-run
costs linearly to the group's size, which holds when the two per-run-step costs agree (both printed; the
sweep's stacks are larger still: a claim's group whole on one worker, half of it on two). History I/O at
full epochs is simulated as in the sequential mode, with the engine's pattern (a rewrite at the metric
epochs only). Process start: a fresh ``python -c "import ncgeom.campaigns.sweep, ..., torch"``. The
estimate per group is the sequential formula with the per-run costs of the stack (setup, metrics per
evaluation, I/O per run: the stack's divided by R).

``--check`` runs one complete full-scale sweep of the cheapest claim (``ncgeom sweep SPEC --scale full
--workers 1 --engine ENGINE``, a subprocess) if its estimate is under ``--check-limit`` seconds, and prints
measured vs estimated wall time.

Usage: python benchmarks/profile_full.py [--engine batched|sequential] [--repeats 3] [--target-steps N]
[--cap 16] [--claims 1 6] [--check]
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

import ncgeom.losses
import ncgeom.models
from ncgeom.campaigns.claims import CLAIMS
from ncgeom.campaigns.spec import expand, load_spec
from ncgeom.losses.kernels import stacked as stacked_loss
from ncgeom.models.stacked import StackedEncoder
from ncgeom.optim import StackedAdam
from ncgeom.runs import single as train
from ncgeom.runs import stacked as stacked_engine
from ncgeom.runs.config import Config
from ncgeom.runs.records import EpochRecord, HistoryWriter, RunSummary
from ncgeom.runs.stacked import run_stack, stack_key
from ncgeom.threads import limit_cpu_threads

PHASES = ("setup", "metrics", "io_history", "io_other")
#: The clock of every phase and step timing: process CPU time by default (robust on a machine whose other jobs
#: take turns on the cores; one torch thread, so CPU seconds = wall seconds on an idle machine), or wall time.
CLOCKS: dict[str, Callable[[], float]] = {"cpu": time.process_time, "wall": time.perf_counter}
clock = CLOCKS["cpu"]
START_COMMAND = "import ncgeom.runs.single, torch"
#: What a spawn worker of a batched sweep imports before its first stack.
STACKED_START_COMMAND = "import ncgeom.campaigns.sweep, ncgeom.losses.kernels.stacked, torch"
ENGINES = ("batched", "sequential")
#: The parts of a stack's training time (module docstring, "Batched"); "other" is the remainder.
TRAIN_PARTS = ("batches", "forward", "loss", "backward", "adam", "state")


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
    stack: int = 1  # runs of the measured stack (batched; 1: one sequential run)
    half_step_ms: float | None = None  # batched, groups larger than the cap: the per-run-step cost at R = cap // 2
    parts_ms: dict[str, float] = dataclasses.field(default_factory=dict)  # batched: train parts per run-step


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


def _timing(fn: Callable, acc: dict, clock: Callable[[], float], phase: str, counter: str) -> Callable:
    """``fn`` wrapped to add its time to ``acc[phase]`` and count its calls in ``acc[counter]``."""

    def timed(*args, **kwargs):
        t0 = clock()
        try:
            return fn(*args, **kwargs)
        finally:
            acc[phase] += clock() - t0
            acc[counter] += 1

    return timed


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

    try:
        for obj, name, phase in targets:
            setattr(obj, name, _timing(obj.__dict__[name], acc, clock, phase, f"calls_{phase}"))
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


def start_seconds(repeats: int, command: str = START_COMMAND) -> float:
    """Median time (the chosen clock) of a fresh interpreter running ``command`` (the imports of a worker)."""
    samples = [child([sys.executable, "-c", command]) for _ in range(repeats)]
    return statistics.median(s[1] if clock is CLOCKS["cpu"] else s[0] for s in samples)


def groups_of(claim_id: str, engine: str = "sequential") -> list[Group]:
    """The claim's full configs grouped by shape (sequential) or by ``stack_key`` (batched), first-seen order."""
    out: dict[tuple, Group] = {}
    for cfg in expand(load_spec(CLAIMS[claim_id].spec), scale="full"):
        if engine == "batched":
            key = stack_key(cfg)
        else:
            key = (cfg.dataset, cfg.classes, cfg.num_train, cfg.batch_size, cfg.embedding_dim, cfg.model,
                   cfg.hidden_dim, cfg.depth, cfg.positives, cfg.norm, cfg.estimator, cfg.epochs, cfg.metrics_every,
                   cfg.dtype)
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


def stack_targets() -> list[tuple[Any, str, str]]:
    """(owner, attribute, phase) of everything ``run_stack`` calls that is timed (module docstring, "Batched").

    ``run_stack`` imports build_model, stacked_weighted, batch_loss, StackedEncoder and StackedAdam when
    called, from their modules: wrapping the module attributes reaches it.
    """
    engine = stacked_engine
    return [
        (engine, "check_run_memory", "setup"), (engine, "seed_streams", "setup"), (engine, "make_data", "setup"),
        (ncgeom.models, "build_model", "setup"), (engine, "run_nc_value", "setup"),
        (engine, "metrics_record", "metrics"), (StackedEncoder, "embed", "metrics"),
        (engine, "prepare_run_dir", "io_other"), (engine, "provenance", "io_other"),
        (engine, "save_config", "io_other"), (HistoryWriter, "__init__", "io_other"),
        (HistoryWriter, "close", "io_other"), (HistoryWriter, "append", "io_history"),
        (engine, "write_run_outputs", "io_other"),
        (engine, "class_balanced_batches", "batches"), (engine, "two_view_batch", "batches"),
        (StackedEncoder, "__call__", "forward"), (stacked_loss, "stacked_weighted", "loss"),
        (ncgeom.losses, "batch_loss", "loss"), (torch.Tensor, "backward", "backward"),
        (StackedAdam, "step", "adam"), (StackedAdam, "zero_grad", "adam"),
        (StackedEncoder, "snapshot", "state"), (StackedEncoder, "restore", "state"),
    ]


@contextmanager
def instrumented_stack(acc: dict[str, float]) -> Iterator[None]:
    """Wrap what ``run_stack`` calls (:func:`stack_targets`) so that their time accumulates in ``acc`` by phase."""
    targets = stack_targets()
    saved = [(obj, name, getattr(obj, name)) for obj, name, _ in targets]  # getattr: ncgeom.losses loads lazily

    try:
        for (obj, name, phase), (_, _, original) in zip(targets, saved, strict=True):
            setattr(obj, name, _timing(original, acc, clock, phase, f"calls_{name}"))
        yield
    finally:
        for obj, name, original in saved:
            setattr(obj, name, original)


def timed_stack(configs: list[Config]) -> tuple[dict[str, float], list[Any]]:
    """One instrumented ``run_stack`` into temporary run directories: phase times and the Results."""
    acc: dict[str, float] = collections.defaultdict(float)
    with tempfile.TemporaryDirectory(prefix="ncgeom-profile-") as tmp, instrumented_stack(acc):
        dirs = [Path(tmp) / f"run{i}" for i in range(len(configs))]
        t0 = clock()
        results = run_stack(configs, out_dirs=dirs)
        acc["wall"] = clock() - t0
    return acc, results


def stack_history_io_seconds(records: list[EpochRecord], every: int, epochs: int) -> float:
    """Time of a full run's history.jsonl writes in the batched engine: an append per epoch, rewriting the
    file at the metric epochs (``records[0]``, with metrics) only, other epochs ``records[1]``; then the close."""
    with tempfile.TemporaryDirectory(prefix="ncgeom-profile-") as tmp:
        t0 = clock()
        writer = HistoryWriter(tmp)
        for epoch in range(1, epochs + 1):
            metric = epoch % every == 0 or epoch == epochs
            writer.append(records[0] if metric else records[-1], write=metric)
        writer.close()
        return clock() - t0


def measure_stack_at(group: Group, runs: int, *, repeats: int, target_steps: int) -> tuple[dict[str, float], list]:
    """Medians over ``repeats`` of one stack of the group's first ``runs`` configs, short (module docstring)."""
    full = group.config
    every = full.metrics_every
    periods = max(1, math.ceil(target_steps / (group.steps_per_epoch * every)))
    epochs = min(full.epochs, every * periods)
    configs = [c.replace(epochs=epochs) for c in group.configs[:runs]]
    timed_stack([c.replace(epochs=1) for c in configs])  # warm-up: caches of this R (the loss's tiles), allocator
    samples = []
    results: list = []
    for _ in range(repeats):
        acc, results = timed_stack(configs)
        run_steps = sum(len(r.history) for r in results) * group.steps_per_epoch
        other = sum(acc[p] for p in PHASES)
        train_s = acc["wall"] - other
        parts = {p: acc[p] / max(run_steps, 1) * 1e3 for p in TRAIN_PARTS}
        parts["other"] = (train_s - sum(acc[p] for p in TRAIN_PARTS)) / max(run_steps, 1) * 1e3
        samples.append({
            "step_ms": train_s / max(run_steps, 1) * 1e3,
            "setup_s": acc["setup"] / runs,
            "metric_s": acc["metrics"] / max(acc["calls_metrics_record"], 1),  # embed included (per evaluation)
            "io_fixed_s": acc["io_other"] / runs,
            "wall_s": acc["wall"],
            "epochs": epochs,
            **{f"part_{k}": v for k, v in parts.items()},
        })
    med = {k: statistics.median(s[k] for s in samples) for k in samples[0]}
    return med, results


def measure_stack(group: Group, *, repeats: int, target_steps: int, cap: int) -> Measure:
    """The group's per-run costs in a stack of min(runs, cap) (and cap // 2 when larger): module docstring."""
    full = group.config
    runs = min(len(group.configs), cap)
    med, results = measure_stack_at(group, runs, repeats=repeats, target_steps=target_steps)
    half = None
    if len(group.configs) > cap:
        half = measure_stack_at(group, max(1, cap // 2), repeats=repeats, target_steps=target_steps)[0]["step_ms"]
    history = results[0].history
    with_metrics = next((r for r in reversed(history) if r.metrics is not None), history[-1])
    without = next((r for r in reversed(history) if r.metrics is None), with_metrics)
    hist = statistics.median(stack_history_io_seconds([with_metrics, without], full.metrics_every, full.epochs)
                             for _ in range(max(1, repeats)))
    rows = 2 * full.batch_size if full.positives == "noise" else full.batch_size
    return Measure(int(med["epochs"]), med["step_ms"], med["setup_s"], med["metric_s"], med["io_fixed_s"], hist,
                   floor_ms(rows, full.embedding_dim), med["wall_s"], stack=runs, half_step_ms=half,
                   parts_ms={k[5:]: v for k, v in med.items() if k.startswith("part_")})


def estimate(group: Group, m: Measure) -> Estimate:
    runs = len(group.configs)
    steps = group.config.epochs * group.steps_per_epoch
    return Estimate(runs, runs * steps * m.step_ms / 1e3, runs * group.metric_evaluations * m.metric_s,
                    runs * (m.io_fixed_s + m.io_history_full_s), runs * m.setup_s)


def load() -> str:
    return "/".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--engine", choices=ENGINES, default="batched", help="the engine profiled [batched]")
    parser.add_argument("--repeats", type=int, default=3, help="short runs per shape (median) [3]")
    parser.add_argument("--target-steps", type=int, default=None,
                        help="training steps per run of a short run [sequential: 150 (>= 2 epochs); batched: 40 "
                             "(rounded up to whole metrics periods)]")
    parser.add_argument("--cap", type=int, default=16, help="batched: most runs of a measured stack [16]")
    parser.add_argument("--claims", nargs="*", default=list(CLAIMS), help="claim ids [all]")
    parser.add_argument("--workers", type=int, default=min(os.cpu_count() or 1, 4),
                        help="workers of `ncgeom reproduce` (its default: min(cpus, 4)) for the start cost of the total")
    parser.add_argument("--clock", choices=tuple(CLOCKS), default="cpu", help="process CPU time or wall time [cpu]")
    parser.add_argument("--check", action="store_true", help="run the cheapest claim's full sweep and compare")
    parser.add_argument("--check-limit", type=float, default=120.0, help="largest estimate (s) to check [120]")
    args = parser.parse_args()
    global clock
    clock = CLOCKS[args.clock]
    batched = args.engine == "batched"
    target_steps = args.target_steps or (40 if batched else 150)
    limit_cpu_threads(1)
    loads = [load()]
    print(f"# engine {args.engine}; clock: {args.clock} seconds; torch {torch.__version__}, threads "
          f"{torch.get_num_threads()}, cpus {os.cpu_count()}, load avg (1/5/15 min) {loads[0]}")
    command = STACKED_START_COMMAND if batched else START_COMMAND
    start = start_seconds(max(3, args.repeats + 2), command)
    print(f"# process start (python -c {command!r}): {start:.2f} s median")

    per_claim: dict[str, list[tuple[Group, Measure, Estimate]]] = {}
    for cid in args.claims:
        per_claim[cid] = []
        for g in groups_of(cid, args.engine):
            if batched:
                m = measure_stack(g, repeats=args.repeats, target_steps=target_steps, cap=args.cap)
            else:
                m = measure(g, repeats=args.repeats, target_steps=target_steps)
            e = estimate(g, m)
            per_claim[cid].append((g, m, e))
            stack = ""
            if batched:
                half = "" if m.half_step_ms is None else f" (R = {args.cap // 2}: {m.half_step_ms:.3f} ms)"
                parts = ", ".join(f"{k} {v:.3f}" for k, v in m.parts_ms.items())
                stack = f"stack R = {m.stack}, every {g.config.metrics_every}{half}; per run-step ms: {parts}; "
            print(f"# claim {cid} {g.shape()} x{len(g.configs)}: short run {m.epochs} ep {m.wall_s:.2f} s, "
                  f"step {m.step_ms:.3f} ms, floor {m.floor_ms:.4f} ms, metrics {m.metric_s * 1e3:.2f} ms/eval, "
                  f"setup {m.setup_s * 1e3:.1f} ms, io {m.io_fixed_s * 1e3:.1f} ms + history {m.io_history_full_s:.2f} s/run; "
                  f"{stack}load {load()}", flush=True)
        loads.append(load())

    grand = sum(e.total for rows in per_claim.values() for _, _, e in rows) + len(per_claim) * start
    print()
    extra_head = " R measured | per-run-step ms at R / 2 | metrics every |" if batched else ""
    print(f"| claim | runs | shape (C, N, B, d, model) | epochs |{extra_head} steps/run | per-step ms | floor ms | ratio | "
          "est. train s | est. metrics s | est. I/O s | est. setup s | est. start s | est. total s | share of total |")
    print("|" + "---|" * (18 if batched else 15))
    blank = " | | |" if batched else ""
    sums: dict[str, float] = collections.defaultdict(float)
    for cid, rows in per_claim.items():
        for i, (g, m, e) in enumerate(rows):
            label = cid if len(rows) == 1 else f"{cid}{'abcdefgh'[i]}"
            steps = g.config.epochs * g.steps_per_epoch
            own_start = start if len(rows) == 1 else 0.0  # a claim's start is on its "(all)" row when it has several
            tot = e.total + own_start
            extra = ""
            if batched:
                half = "" if m.half_step_ms is None else f"{m.half_step_ms:.2f}"
                extra = f" {m.stack} | {half} | {g.config.metrics_every} |"
            print(f"| {label} | {e.runs} | {g.shape()} | {g.config.epochs} |{extra} {steps} | {m.step_ms:.2f} | {m.floor_ms:.3f} | "
                  f"{m.step_ms / m.floor_ms:.1f} | {e.train_s:.0f} | {e.metrics_s:.0f} | {e.io_s:.1f} | {e.setup_s:.1f} | "
                  f"{own_start:.1f} | {tot:.0f} | {tot / grand:.1%} |")
            for name, value in (("runs", e.runs), ("train", e.train_s), ("metrics", e.metrics_s), ("io", e.io_s),
                                ("setup", e.setup_s), ("steps", e.runs * steps)):
                sums[name] += value
        if len(rows) > 1:
            claim_total = sum(e.total for _, _, e in rows) + start
            print(f"| {cid} (all) | {sum(e.runs for _, _, e in rows)} | | |{blank} | | | | "
                  f"{sum(e.train_s for _, _, e in rows):.0f} | {sum(e.metrics_s for _, _, e in rows):.0f} | "
                  f"{sum(e.io_s for _, _, e in rows):.1f} | {sum(e.setup_s for _, _, e in rows):.1f} | {start:.1f} | "
                  f"{claim_total:.0f} | {claim_total / grand:.1%} |")
    starts = len(per_claim) * start
    print(f"| total | {sums['runs']:.0f} | | |{blank} {sums['steps']:.0f} run-steps | | | | {sums['train']:.0f} | {sums['metrics']:.0f} | "
          f"{sums['io']:.1f} | {sums['setup']:.1f} | {starts:.1f} | {grand:.0f} | 100% |")
    print(f"| share | | | |{blank} | | | | {sums['train'] / grand:.1%} | {sums['metrics'] / grand:.1%} | {sums['io'] / grand:.1%} | "
          f"{sums['setup'] / grand:.1%} | {starts / grand:.1%} | | |")
    reproduce_start = (1 + args.workers) * start
    print(f"\n# total CPU estimate: {grand:.0f} s = {grand / 3600:.2f} CPU-h with one start per claim; `ncgeom reproduce "
          f"--full --workers {args.workers}` pays {1 + args.workers} starts ({reproduce_start:.1f} s) instead of "
          f"{len(per_claim)}: {grand - starts + reproduce_start:.0f} CPU-s, about "
          f"{(grand - starts) / args.workers + start * 2:.0f} s wall on {args.workers} workers if perfectly balanced")
    print(f"# load avg during the measurements: {', '.join(loads)}; at the end {load()}")

    if args.check:
        check(per_claim, start, args.check_limit, args.engine)


def check(per_claim, start: float, limit: float, engine: str) -> None:
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
                           "--engine", engine, "--quiet"])
    print(f"# check: claim {cid} ({spec}) full sweep, `ncgeom sweep --scale full --workers 1 --engine {engine}`: wall {wall:.1f} s, CPU "
          f"{cpu:.1f} s; estimated {totals[cid]:.1f} s (measured / estimated: wall {wall / totals[cid]:.2f}, CPU "
          f"{cpu / totals[cid]:.2f}); load before {before}, after {load()}")


if __name__ == "__main__":
    main()
