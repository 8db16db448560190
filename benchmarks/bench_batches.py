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
import importlib.util
import math
import statistics
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from ncgeom.data import class_balanced_batches

SHAPES = [(10, 500, 128), (100, 2000, 512), (10, 1258, 128)]  # (C, N, B): claim 6 quick, bench (b), digits


def _load_reference():
    """The implementation before the vectorized one, verbatim: kept once, in tests/test_data.py (the
    equality test compares against it), and loaded from there by path."""
    path = Path(__file__).resolve().parent.parent / "tests" / "test_data.py"
    spec = importlib.util.spec_from_file_location("_ncgeom_test_data", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module._reference_class_balanced_batches


_reference_class_balanced_batches = _load_reference()


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
