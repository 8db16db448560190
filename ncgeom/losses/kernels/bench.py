"""Benchmark of the batch-loss backends (shared by ``ncgeom bench`` and benchmarks/bench_loss.py).

Workload: z [B, d] float32 on the unit sphere, labels uniform over ``num_classes`` classes, the SCL loss
with beta = 0 and num_negatives = "batch" (the semantics of pytorch-metric-learning's NTXentLoss with
labels), forward + backward. Methods:

- ``floor``: the three B x B x d matmuls the loss needs (S = Z Z^T, G Z, G^T Z), nothing else;
- ``dense``, ``blocked``, ``triton`` (CUDA only): :func:`ncgeom.losses.batch_loss` with that backend;
- ``pml``: ``pytorch_metric_learning.losses.NTXentLoss(temperature=tau, distance=CosineSimilarity())``
  (same semantics; PML 2.9 builds a [positive pairs x negative pairs] matrix, O(B^4 / C) memory, so it is
  skipped where that matrix would exceed 2 GiB);
- ``pml_supcon``: PML's ``SupConLoss(temperature=tau)``, an O(B^2) PML yardstick with a DIFFERENT loss
  (positives in the denominator), for speed context only.

Time: in one process, every repetition runs every method once, in turn (interleaved), after one warm-up
each; the table gives the median over repetitions of the wall time, of the process CPU time (all threads),
and of their per-repetition ratios to the floor (pairing keeps a ratio meaningful on a machine shared with
other jobs; on an oversubscribed CPU, OpenMP threads that spin while waiting inflate CPU time, so compare
runs with ``threads=1`` too).
Peak extra memory (CPU): each (method, B) runs in a fresh subprocess; with the inputs allocated and the
modules imported, the peak resident set (VmHWM) is reset through /proc/self/clear_refs, one forward +
backward runs, and the figure is VmHWM minus the resident set (VmRSS) just before the call: the operating
system's own peak of the call (torch's CPU allocations included; elsewhere than Linux it falls back to
ru_maxrss differences, which can under-read). On CUDA it is
``torch.cuda.max_memory_allocated`` minus the allocation before the call.
"""

from __future__ import annotations

import json
import platform
import resource
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from typing import Literal, cast

import torch
from tqdm import tqdm

from ncgeom.losses import batch_loss

__all__ = ["BenchRow", "BenchResult", "run_benchmark", "measure_peak_memory", "format_table", "METHODS",
           "DEFAULT_BATCH_SIZES", "DEFAULT_METHODS", "DEFAULT_SKIP", "DEFAULT_REPEATS", "pml_pair_matrix_bytes"]

METHODS: tuple[str, ...] = ("floor", "dense", "blocked", "triton", "pml", "pml_supcon")
_Backend = Literal["dense", "blocked", "triton"]  # the METHODS that are ncgeom backends


@dataclass(frozen=True)
class BenchRow:
    """One (method, B) cell: median wall and CPU seconds, their median ratios to the floor, peak extra MiB
    (None: not run)."""

    method: str
    batch_size: int
    seconds: float | None
    ratio_to_floor: float | None
    cpu_seconds: float | None
    cpu_ratio_to_floor: float | None
    peak_extra_mib: float | None
    note: str = ""


@dataclass(frozen=True)
class BenchResult:
    rows: tuple[BenchRow, ...]
    config: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {"config": self.config, "rows": [asdict(r) for r in self.rows]}


def _inputs(batch_size: int, dim: int, num_classes: int, device: str, seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    z = torch.nn.functional.normalize(torch.randn(batch_size, dim, generator=gen), dim=1).to(device)
    labels = torch.randint(0, num_classes, (batch_size,), generator=gen).to(device)
    return z, labels


def _step(method: str, z: torch.Tensor, labels: torch.Tensor, tau: float, block_size: int | None):
    """One forward + backward of ``method``; returns nothing (results are discarded)."""
    if method == "floor":
        sim = z @ z.T
        sim @ z
        sim.T @ z
        return
    x = z.detach().clone().requires_grad_()
    if method == "pml":
        from pytorch_metric_learning import distances, losses

        loss = losses.NTXentLoss(temperature=tau, distance=distances.CosineSimilarity())(x, labels)
    elif method == "pml_supcon":
        from pytorch_metric_learning import distances, losses

        loss = losses.SupConLoss(temperature=tau, distance=distances.CosineSimilarity())(x, labels)
    else:
        loss = batch_loss(x, labels, "scl", tau=tau, num_negatives="batch", backend=cast(_Backend, method),
                          block_size=block_size)
    loss.backward()


def pml_pair_matrix_bytes(labels: torch.Tensor) -> int:
    """Bytes of the [positive pairs x negative pairs] float32 matrix that PML 2.9's NTXentLoss builds
    (``n_per_p = a2.unsqueeze(0) == a1.unsqueeze(1)`` in ntxent_loss.py): O(B^4 / C) with labels."""
    counts = torch.unique(labels, return_counts=True)[1].double()
    size = float(labels.numel())
    pos = float((counts * (counts - 1)).sum())
    neg = size * size - float((counts * counts).sum())
    return int(pos * neg * 4)


PML_LIMIT_BYTES = 2 * 2**30


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


# The probe's program is fixed text; its parameters travel as JSON on stdin (data, never pasted into code).
_PROBE_CODE = "from ncgeom.losses.kernels.bench import _memory_probe_main; _memory_probe_main()"
_PROBE_KEYS = ("method", "batch_size", "dim", "num_classes", "tau", "device", "block_size")


def measure_peak_memory(method: str, batch_size: int, *, dim: int = 128, num_classes: int = 10, tau: float = 0.5,
                        device: str = "cpu", block_size: int | None = None) -> float:
    """Peak extra memory (MiB) of one forward + backward, measured in a fresh subprocess (see module doc)."""
    params = {"method": method, "batch_size": batch_size, "dim": dim, "num_classes": num_classes, "tau": tau,
              "device": device, "block_size": block_size}
    out = subprocess.run([sys.executable, "-c", _PROBE_CODE], input=json.dumps(params), capture_output=True,
                         text=True, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"memory probe for {method} B={batch_size} failed: {out.stderr.strip()[-500:]}")
    return float(json.loads(out.stdout.strip().splitlines()[-1]))


def _memory_probe_main() -> None:
    """Entry point of the probe subprocess: parameters as a JSON object on stdin, the MiB as JSON on stdout."""
    params = json.loads(sys.stdin.read())
    if not isinstance(params, dict) or set(params) != set(_PROBE_KEYS):
        raise ValueError(f"memory probe: stdin must be a JSON object with keys {', '.join(_PROBE_KEYS)}")
    if params["method"] not in METHODS:
        raise ValueError(f"memory probe: method must be among {', '.join(METHODS)}, got {params['method']!r}")
    print(json.dumps(_memory_child(**params)))


def _memory_child(method, batch_size, dim, num_classes, tau, device, block_size) -> float:
    z, labels = _inputs(batch_size, dim, num_classes, device)
    if method.startswith("pml"):
        import pytorch_metric_learning.losses  # noqa: F401  (import cost is not the call's memory)
    import ncgeom.losses.kernels.blocked  # noqa: F401
    import ncgeom.losses.kernels.dense  # noqa: F401
    if device.startswith("cuda"):
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
        _step(method, z, labels, tau, block_size)
        torch.cuda.synchronize()
        return (torch.cuda.max_memory_allocated() - before) / 2**20
    import gc

    gc.collect()
    if _reset_peak_rss():  # Linux: VmHWM reset, then peak - current
        before = _status_kib("VmRSS")
        _step(method, z, labels, tau, block_size)
        return (_status_kib("VmHWM") - before) / 1024.0
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # fallback: may under-read (import peaks)
    _step(method, z, labels, tau, block_size)
    return (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024.0  # ru_maxrss is in KiB


def _reset_peak_rss() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")  # resets the peak resident set size (VmHWM) to the current RSS
        return True
    except OSError:
        return False


def _status_kib(key: str) -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    raise OSError(f"{key} not in /proc/self/status")


# Defaults sized for a laptop or a 2-core CI machine: peak resident memory under 2 GiB (the dense backend's
# B x B matrices are ~1.7 GiB at B = 8192 and ~6 GiB at B = 16384, hence the skip) and about a minute of
# wall time. BENCHMARKS.md records larger runs (--batch-sizes ... 16384).
DEFAULT_BATCH_SIZES: tuple[int, ...] = (1024, 4096, 8192)
DEFAULT_METHODS: tuple[str, ...] = ("floor", "dense", "blocked", "triton", "pml")
DEFAULT_SKIP: dict[str, int] = {"dense": 8192}
DEFAULT_REPEATS = 3


def run_benchmark(
    *,
    batch_sizes=DEFAULT_BATCH_SIZES,
    dim: int = 128,
    num_classes: int = 10,
    tau: float = 0.5,
    methods=DEFAULT_METHODS,
    repeats: int = DEFAULT_REPEATS,
    device: str = "cpu",
    block_size: int | None = None,
    memory: bool = True,
    skip: dict | None = None,
    threads: int | None = None,
    progress: bool = False,
) -> BenchResult:
    """Time (and measure the memory of) every method at every batch size (see the module docstring).

    ``skip`` maps a method to the smallest batch size at which it is not run (default
    ``DEFAULT_SKIP``; ``{}`` runs everything), with the reason recorded in the row's note. "triton" is
    dropped unless ``device`` is CUDA. ``progress``: a tqdm bar on stderr, one tick per timed step and
    per memory probe.
    """
    skip = dict(DEFAULT_SKIP if skip is None else skip)
    if threads is not None:
        torch.set_num_threads(threads)
    if not device.startswith("cuda"):
        methods = tuple(m for m in methods if m != "triton")
    plan = []  # (size, notes): which methods are not run at each size, and why
    for size in batch_sizes:
        labels = _inputs(size, dim, num_classes, "cpu")[1]
        notes = {m: f"skipped at B >= {skip[m]} (memory/time)" for m in methods if m in skip and size >= skip[m]}
        if "pml" in methods and pml_pair_matrix_bytes(labels) > PML_LIMIT_BYTES:
            notes["pml"] = (f"not run: NTXentLoss with labels allocates a [pos pairs x neg pairs] matrix, "
                            f"{pml_pair_matrix_bytes(labels) / 2**30:.0f} GiB here")
        plan.append((size, notes))
    total = sum((len(methods) - len(notes)) * (1 + repeats + int(memory)) for _, notes in plan)
    bar = tqdm(total=total, desc="ncgeom bench", unit="step", file=sys.stderr, disable=not progress, leave=False)
    rows = []
    for size, notes in plan:
        z, labels = _inputs(size, dim, num_classes, device)
        active = [m for m in methods if m not in notes]
        times: dict[str, list[float]] = {m: [] for m in active}
        cpu: dict[str, list[float]] = {m: [] for m in active}
        bar.set_postfix_str(f"B={size} warm-up")
        for m in active:  # warm-up
            _step(m, z, labels, tau, block_size)
            bar.update()
        _sync(device)
        for rep in range(repeats):
            bar.set_postfix_str(f"B={size} repetition {rep + 1}/{repeats}")
            for m in active:
                _sync(device)
                t0, c0 = time.perf_counter(), time.process_time()
                _step(m, z, labels, tau, block_size)
                _sync(device)
                times[m].append(time.perf_counter() - t0)
                cpu[m].append(time.process_time() - c0)
                bar.update()
        del z, labels  # the memory probes run in subprocesses; free this size's inputs first
        for m in methods:
            if m not in active:
                rows.append(BenchRow(m, size, None, None, None, None, None, note=notes[m]))
                continue
            ratios = [t / f for t, f in zip(times[m], times["floor"])] if "floor" in times else []
            cpu_ratios = [t / f for t, f in zip(cpu[m], cpu["floor"])] if "floor" in cpu else []
            mem = None
            if memory:
                bar.set_postfix_str(f"B={size} memory probe {m}")
                mem = measure_peak_memory(m, size, dim=dim, num_classes=num_classes, tau=tau, device=device,
                                          block_size=block_size)
                bar.update()
            rows.append(BenchRow(m, size, statistics.median(times[m]), statistics.median(ratios) if ratios else None,
                                 statistics.median(cpu[m]), statistics.median(cpu_ratios) if cpu_ratios else None,
                                 mem))
    bar.close()
    config = {
        "dim": dim, "num_classes": num_classes, "tau": tau, "repeats": repeats, "device": device,
        "block_size": block_size, "skip": skip, "dtype": "float32", "torch": torch.__version__, "batch_sizes": list(batch_sizes),
        "threads": torch.get_num_threads(), "machine": platform.processor() or platform.machine(),
        "platform": platform.platform(), "date_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
    }
    return BenchResult(tuple(rows), config)


def format_table(result: BenchResult) -> str:
    """Markdown table: per B, each method's median time, ratio to the floor, peak extra memory, and the
    blocked-vs-PML speed-up and blocked/dense memory ratio."""
    lines = ["| B | method | wall (s) | wall / floor | CPU (s) | CPU / floor | peak extra memory (MiB) | note |",
             "|---|---|---|---|---|---|---|---|"]
    by = {(r.method, r.batch_size): r for r in result.rows}
    sizes = sorted({r.batch_size for r in result.rows})
    for size in sizes:
        for r in (r for r in result.rows if r.batch_size == size):
            sec = "-" if r.seconds is None else f"{r.seconds:.4f}"
            rat = "-" if r.ratio_to_floor is None else f"{r.ratio_to_floor:.2f}"
            mem = "-" if r.peak_extra_mib is None else f"{r.peak_extra_mib:.1f}"
            csec = "-" if r.cpu_seconds is None else f"{r.cpu_seconds:.4f}"
            crat = "-" if r.cpu_ratio_to_floor is None else f"{r.cpu_ratio_to_floor:.2f}"
            lines.append(f"| {size} | {r.method} | {sec} | {rat} | {csec} | {crat} | {mem} | {r.note} |")
    lines.append("")
    for size in sizes:
        blk, pml, dense = by.get(("blocked", size)), by.get(("pml", size)), by.get(("dense", size))
        parts = []
        if blk and pml and blk.seconds and pml.seconds:
            parts.append(f"PML / blocked wall time = {pml.seconds / blk.seconds:.1f}")
        sup = by.get(("pml_supcon", size))
        if blk and sup and blk.seconds and sup.seconds:
            parts.append(f"PML SupConLoss / blocked wall time = {sup.seconds / blk.seconds:.2f}")
        if blk and dense and blk.peak_extra_mib and dense.peak_extra_mib:
            parts.append(f"blocked / dense peak memory = {blk.peak_extra_mib / dense.peak_extra_mib:.3f}")
        if parts:
            lines.append(f"- B = {size}: " + "; ".join(parts))
    return "\n".join(lines)
