"""Time the check after each update (``ncgeom.runs.divergence.update_failures``) against the step it follows.

Two setups, one thread, float32, HSCL beta 5, the weighted estimator, sphere, unconstrained features:

- single: C = 10, 50 samples per class, d = 9, batch 128 (the single driver's step: embed, batch_loss, backward,
  fused Adam);
- stacked: R = 60 runs of C = 50, 20 samples per class, d = 49, batch 512 (the stacked driver's step: the stacked
  kernel, backward, StackedAdam), the stack a claim-6 sweep trains on one worker.

Each round times the step without the check and with it, alternately (so that a change of the machine's load hits
both), and prints the medians side by side with their ratio, and the check alone.

Usage: python benchmarks/bench_divergence_check.py [--rounds 300]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np
import torch

from ncgeom.data import class_balanced_batches, class_balanced_counts
from ncgeom.losses import batch_loss
from ncgeom.losses.kernels.stacked import stacked_weighted
from ncgeom.models import StackedEncoder, build_model
from ncgeom.optim import StackedAdam, adam
from ncgeom.runs.divergence import update_failures
from ncgeom.threads import limit_cpu_threads


def _single(rounds: int):
    classes, per_class, batch = 10, 50, 128
    y = np.repeat(np.arange(classes), per_class)
    labels = torch.from_numpy(y)
    model = build_model("unconstrained", dim=classes - 1, num_samples=y.size, generator=torch.Generator().manual_seed(0))
    params = list(model.parameters())
    opt = adam(params, lr=0.05, weight_decay=0.0)
    batches = torch.from_numpy(class_balanced_batches(y, batch, num_batches=2 * rounds + 50, rng=np.random.default_rng(0)))

    def step(i: int, check: bool) -> None:
        idx = batches[i]
        loss = batch_loss(model(idx), labels[idx], "hscl", beta=5.0, tau=1.0)
        loss.item()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if check:
            update_failures(params, runs=None, epoch=1, step=i)

    return step, lambda: update_failures(params, runs=None, epoch=1, step=0)


def _stacked(rounds: int):
    runs, classes, per_class, batch, dim = 60, 50, 20, 512, 49
    y = np.repeat(np.arange(classes), per_class)
    gen = torch.Generator().manual_seed(0)
    models = [build_model("unconstrained", dim=dim, num_samples=y.size, generator=gen) for _ in range(runs)]
    encoder = StackedEncoder.from_models("unconstrained", models, norm="sphere", device="cpu")
    opt = StackedAdam(encoder.params, lr=[0.05] * runs, weight_decay=[0.0] * runs)
    y_stack = torch.from_numpy(np.stack([y] * runs))
    band = int(class_balanced_counts(classes, batch).max())
    supervised = torch.ones(runs, dtype=torch.bool)
    beta, tau = torch.full((runs,), 5.0, dtype=torch.float64), torch.ones(runs, dtype=torch.float64)
    rng = np.random.default_rng(0)
    batches = torch.from_numpy(np.stack([class_balanced_batches(y, batch, num_batches=2 * rounds + 50, rng=rng)
                                         for _ in range(runs)]))

    def step(i: int, check: bool) -> None:
        idx = batches[:, i]
        losses = stacked_weighted(encoder(idx), y_stack.gather(1, idx), supervised=supervised, beta=beta, tau=tau,
                                  num_negatives=None, detach_weights=False, band_width=band)
        losses.detach().tolist()
        opt.zero_grad()
        losses.sum().backward()
        opt.step()
        if check:
            update_failures(encoder.params, runs=runs, epoch=1, step=i)

    return step, lambda: update_failures(encoder.params, runs=runs, epoch=1, step=0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=300)
    args = parser.parse_args()
    limit_cpu_threads(1)
    print(f"load average before: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    print("| setup | step without the check (ms) | with it (ms) | ratio | the check alone (ms) |")
    print("|---|---|---|---|---|")
    for name, make in (("single", _single), ("stacked R = 60", _stacked)):
        rounds = args.rounds if name == "single" else max(args.rounds // 10, 20)
        step, check = make(rounds)
        for i in range(20):  # warm-up
            step(i, i % 2 == 0)
        times: dict[bool, list[float]] = {False: [], True: []}
        alone = []
        for r in range(rounds):
            for checked in ((False, True) if r % 2 == 0 else (True, False)):
                t0 = time.perf_counter()
                step(20 + 2 * r + checked, checked)
                times[checked].append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            check()
            alone.append(time.perf_counter() - t0)
        without, with_check = (statistics.median(times[k]) * 1e3 for k in (False, True))
        print(f"| {name} | {without:.3f} | {with_check:.3f} | {with_check / without:.3f} | "
              f"{statistics.median(alone) * 1e3:.3f} |")
    print(f"load average after: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")


if __name__ == "__main__":
    main()
