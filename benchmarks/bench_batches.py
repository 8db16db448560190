"""class_balanced_batches against the implementations it replaced, at the experiments' shapes.

Each shape is one training run's calls: ``epochs`` calls of ``ceil(N / B)`` batches with one Generator,
as the engines draw them (one call per epoch). Three implementations run the same calls in alternating
rounds (the load of a shared machine hits them alike): the first loop ("loop", kept in tests/test_data.py),
the first vectorized one ("previous", kept in tests/test_batches_identity.py) and the current one. Each
prints the median CPU time of this process per call over the rounds (time.process_time: other processes'
load counts less than in wall time), the ratios to the current one, and whether all returned identical
batches and left the Generator in the same state.

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

# (C, N, B): claim 6 at the quick and the full scale, claim 1, claim 8's smallest batch, digits
SHAPES = [(10, 500, 128), (50, 2000, 512), (100, 2000, 512), (100, 2000, 32), (10, 1258, 128)]


def _load(test_file: str, name: str):
    """A reference implementation kept once, in a test file (whose equality test compares against it),
    loaded from there by path."""
    path = Path(__file__).resolve().parent.parent / "tests" / test_file
    spec = importlib.util.spec_from_file_location(f"_ncgeom_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, name)


SAMPLERS = {
    "loop": _load("test_data.py", "_reference_class_balanced_batches"),
    "previous": _load("test_batches_identity.py", "_previous_class_balanced_batches"),
    "current": class_balanced_batches,
}


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
    print(f"{'C':>4} {'N':>5} {'B':>4} {'steps':>5}" + "".join(f" {k + ' us':>12}" for k in SAMPLERS)
          + f" {'loop/cur':>8} {'prev/cur':>8}  identical")
    for c, n, batch in SHAPES:
        y = np.random.default_rng(1).permutation(np.arange(n) % c)  # balanced up to N mod C
        times: dict[str, list[float]] = {k: [] for k in SAMPLERS}
        same = True
        for _ in range(args.rounds):
            outs = {}
            for name, sampler in SAMPLERS.items():
                t, batches, state = _one_run(sampler, y, batch, args.epochs)
                times[name].append(t)
                outs[name] = (batches, state)
            ref_batches, ref_state = outs["current"]
            same = same and all(state == ref_state and all(np.array_equal(a, b) for a, b in zip(got, ref_batches, strict=True))
                                for got, state in outs.values())
        us = {k: statistics.median(v) / args.epochs * 1e6 for k, v in times.items()}
        print(f"{c:>4} {n:>5} {batch:>4} {math.ceil(n / batch):>5}" + "".join(f" {v:>12.1f}" for v in us.values())
              + f" {us['loop'] / us['current']:>8.2f} {us['previous'] / us['current']:>8.2f}  {same}")


if __name__ == "__main__":
    main()
