"""class_balanced_batches: the vectorized sampler against the loop it replaced, at the experiments' shapes.

Each shape is one training run's calls: ``epochs`` calls of ``ceil(N / B)`` batches with one Generator,
as the engines draw them (one call per epoch). Both implementations run the same calls in alternating
rounds (the load of a shared machine hits both alike); each prints the median CPU time of this process
per call over the rounds (time.process_time: other processes' load counts less than in wall time), their
ratio, and whether both returned identical batches and left the Generator in the same state.

Usage: python benchmarks/bench_batches.py [--rounds 7] [--epochs 100]
"""

from __future__ import annotations

import argparse
import math
import statistics
import time
from collections.abc import Mapping
from typing import Any

import numpy as np

from ncgeom.data import class_balanced_batches, class_balanced_counts
from ncgeom.labels import integer_labels
from ncgeom.validate import require_int

SHAPES = [(10, 500, 128), (100, 2000, 512), (10, 1258, 128)]  # (C, N, B): claim 6 quick, bench (b), digits


def _reference_class_balanced_batches(
    labels, batch_size: int, *, num_batches: int, rng: np.random.Generator
) -> np.ndarray:
    """The implementation before the vectorized one, verbatim (a loop with np.isin on every refill)."""
    y = integer_labels(labels)  # integers (or strings mapped to ids); never lossy floats
    if y.size == 0:
        raise ValueError(f"labels must have shape [N] with N >= 1, got {y.shape}")
    b = require_int("batch_size", batch_size, min_value=2, max_value=y.size)
    steps = require_int("num_batches", num_batches, min_value=0)
    if not isinstance(rng, np.random.Generator):
        raise ValueError("rng must be a numpy.random.Generator")
    classes = np.unique(y)
    members = [np.flatnonzero(y == c) for c in classes]
    counts = class_balanced_counts(classes.size, b)
    smallest = min(m.size for m in members)
    if counts[0] > smallest:
        raise ValueError(
            f"batch_size {b} needs {counts[0]} samples of each class but the smallest class has {smallest}"
        )
    streams = [np.empty(0, dtype=np.int64) for _ in members]
    out = np.empty((steps, b), dtype=np.int64)
    for s in range(steps):
        chosen = rng.permutation(classes.size)[: counts.size]
        pos = 0
        for k, ci in enumerate(chosen):
            need = counts[k]
            if streams[ci].size < need:  # refill; leftovers first, never a duplicate within a batch
                fresh = members[ci][rng.permutation(members[ci].size)]
                streams[ci] = np.concatenate([streams[ci], fresh[~np.isin(fresh, streams[ci])]])
            out[s, pos : pos + need] = streams[ci][:need]
            streams[ci] = streams[ci][need:]
            pos += need
    return out


def _one_run(sampler, y: np.ndarray, batch: int, epochs: int) -> tuple[float, list[np.ndarray], Mapping[str, Any]]:
    rng = np.random.default_rng(0)
    steps = math.ceil(y.size / batch)
    start = time.process_time()
    out = [sampler(y, batch, num_batches=steps, rng=rng) for _ in range(epochs)]
    return time.process_time() - start, out, rng.bit_generator.state


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--epochs", type=int, default=100)
    args = parser.parse_args()
    print(f"{'C':>4} {'N':>5} {'B':>4} {'steps':>5} {'old us/call':>12} {'new us/call':>12} {'ratio':>6}  identical")
    for c, n, batch in SHAPES:
        y = np.random.default_rng(1).permutation(np.arange(n) % c)  # balanced up to N mod C
        times: dict[str, list[float]] = {"old": [], "new": []}
        same = True
        for _ in range(args.rounds):
            t_old, b_old, s_old = _one_run(_reference_class_balanced_batches, y, batch, args.epochs)
            t_new, b_new, s_new = _one_run(class_balanced_batches, y, batch, args.epochs)
            times["old"].append(t_old)
            times["new"].append(t_new)
            same = same and s_old == s_new and all(np.array_equal(a, b) for a, b in zip(b_old, b_new, strict=True))
        old, new = (statistics.median(times[k]) / args.epochs * 1e6 for k in ("old", "new"))
        print(f"{c:>4} {n:>5} {batch:>4} {math.ceil(n / batch):>5} {old:>12.1f} {new:>12.1f} {old / new:>6.1f}  {same}")


if __name__ == "__main__":
    main()
