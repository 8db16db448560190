"""Time one training step of ``ncgeom.runs.run`` on the unconstrained-features model.

Setup (the speed target of docs/experiments.md): C = 10 classes, 50 samples per class, d = 9, batch
128 (class-balanced), HSCL beta = 5, weighted estimator, sphere, float32, Adam, one torch thread.
A step = embed the batch (index + normalize), batch_loss, backward, Adam update, loss.item() (the
divergence check): exactly the inner loop of ``run``. Also reports the end-to-end per-step cost of
``run`` itself (batch sampling and per-epoch metrics included) with metrics every epoch.

Usage: python benchmarks/bench_train_step.py [--steps 2000] [--threads 1] [--setting hscl]
Prints "step_ms <median>" (the number for BENCHMARKS.md) and a few percentiles.
"""

from __future__ import annotations

import argparse
import math
import statistics
import time

import numpy as np
import torch

from ncgeom.data import class_balanced_batches
from ncgeom.losses import batch_loss
from ncgeom.models import build_model
from ncgeom.optim import adam
from ncgeom.runs import Config, run
from ncgeom.threads import limit_cpu_threads


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--setting", default="hscl")
    parser.add_argument("--backend", default="auto")
    args = parser.parse_args()
    limit_cpu_threads(args.threads)

    classes, per_class, batch = 10, 50, 128
    y = np.repeat(np.arange(classes), per_class)
    labels = torch.from_numpy(y)
    model = build_model("unconstrained", dim=classes - 1, num_samples=y.size, generator=torch.Generator().manual_seed(0))
    opt = adam(model.parameters(), lr=0.05, weight_decay=0.0)  # the engines' Adam
    batches = torch.from_numpy(class_balanced_batches(y, batch, num_batches=args.steps + 100, rng=np.random.default_rng(0)))

    def step(i: int) -> float:
        idx = batches[i]
        loss = batch_loss(model(idx), labels[idx], args.setting, beta=5.0, tau=1.0, backend=args.backend)
        value = loss.item()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return value

    for i in range(100):  # warm-up
        step(i)
    times = []
    for i in range(100, 100 + args.steps):
        t0 = time.perf_counter()
        step(i)
        times.append((time.perf_counter() - t0) * 1e3)
    q = np.percentile(times, [10, 50, 90])
    print(f"step_ms {statistics.median(times):.3f}")
    print(f"percentiles_ms p10 {q[0]:.3f} p50 {q[1]:.3f} p90 {q[2]:.3f} (threads={args.threads}, setting={args.setting})")

    epochs = 50
    cfg = Config(setting=args.setting, epochs=epochs)
    t0 = time.perf_counter()
    run(cfg)
    total = time.perf_counter() - t0
    steps = epochs * math.ceil(classes * per_class / batch)
    print(f"run_ms_per_step {total / steps * 1e3:.3f} (run() end to end incl. data, per-epoch metrics; {steps} steps)")


if __name__ == "__main__":
    main()
