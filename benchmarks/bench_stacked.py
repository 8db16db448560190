"""The stacked engine against the sequential one (issue "batched training engine": throughput and overhead).

(a) overhead-bound: the claim-6 grid (claim6_hardness_nc) at the quick scale with seeds 0..4 (60 runs,
    C = 10, B = 128, d = 9, 100 epochs, metrics every epoch) in this one process: the wall time of
    ``run`` over the 60 configs one after another vs ``run_stack`` over the stacks of ``group_stacks``,
    and the largest difference of the final loss and final metrics between the two;
(b) throughput: run-steps per second of the stacked training step (embed, loss, backward, Adam) vs the
    stack size R in {1, 4, 16, 64} for unconstrained features at C = 10 (N = 500, B = 128, d = 9) and
    C = 100 (N = 2000, B = 512, d = 99), float32, HSCL beta = 5; peak RSS of a fresh process doing it;
(c) compute-bound: the per-step time at the claim-6 full shape (C = 50, N = 2000, B = 512, d = 49) of the
    sequential step (batch_loss, backend auto = blocked, and the engine's fused torch Adam) and of the stacked step per
    run (R = 1, 4, 16 and 60, the stack the claim-6 full sweep forms on one worker; batches of table rows in
    label order, as the engine gives them) and of the stacked loss alone, against the 3-GEMM floor (S = Z Z^T, G Z, G^T Z at those sizes); one step of
    each in turn, 50 rounds, medians (the load of a shared machine hits every row alike).

Usage: python benchmarks/bench_stacked.py [--part a,b,c] [--threads 1]
"""

from __future__ import annotations

import argparse
import json
import math
import resource
import statistics
import subprocess
import sys
import time

import numpy as np
import torch

from ncgeom.campaigns.spec import expand, load_spec
from ncgeom.data import class_balanced_batches
from ncgeom.losses import batch_loss
from ncgeom.losses.kernels.stacked import stacked_weighted
from ncgeom.models import build_model
from ncgeom.models.stacked import StackedEncoder
from ncgeom.optim import StackedAdam, adam
from ncgeom.runs import run
from ncgeom.runs.stacked import group_stacks, run_stack
from ncgeom.threads import limit_cpu_threads


def part_a() -> None:
    spec = load_spec("claim6_hardness_nc")
    configs = [c.replace(seed=s) for c in expand(spec, scale="quick") for s in range(5)]
    t0 = time.perf_counter()
    sequential = [run(c) for c in configs]
    t_seq = time.perf_counter() - t0
    t0 = time.perf_counter()
    stacked: list = [None] * len(configs)
    groups = group_stacks(configs)
    for group in groups:
        for i, result in zip(group, run_stack([configs[i] for i in group]), strict=True):
            stacked[i] = result
    t_stk = time.perf_counter() - t0
    loss_diff = max(abs(a.final.loss - b.final.loss) for a, b in zip(sequential, stacked, strict=True))
    metric_diff = max(abs(v - (b.final.metrics or {})[k]) for a, b in zip(sequential, stacked, strict=True)
                      for k, v in (a.final.metrics or {}).items() if isinstance(v, float))
    steps = sum(c.epochs * math.ceil(c.num_train / c.batch_size) for c in configs)
    print(f"(a) claim-6 quick x 5 seeds: {len(configs)} runs, {steps} run-steps, stacks {[len(g) for g in groups]}")
    print("| engine | wall s | ms / run-step (incl. metrics) |")
    print("|---|---|---|")
    print(f"| sequential | {t_seq:.2f} | {1e3 * t_seq / steps:.3f} |")
    print(f"| stacked | {t_stk:.2f} | {1e3 * t_stk / steps:.3f} |")
    print(f"speed-up {t_seq / t_stk:.2f}x; max |final loss diff| {loss_diff:.2e}, max |final metric diff| {metric_diff:.2e} (float32)")
    statuses = {(a.status, b.status) for a, b in zip(sequential, stacked, strict=True)}
    print(f"statuses (sequential, stacked): {sorted(statuses)}")


def _stack_step_setup(classes: int, per_class: int, batch: int, runs: int, steps: int, *, presort: bool = True):
    dim = classes - 1
    y = np.repeat(np.arange(classes), per_class)
    models = [build_model("unconstrained", dim=dim, num_samples=y.size, generator=torch.Generator().manual_seed(r))
              for r in range(runs)]
    encoder = StackedEncoder.from_models("unconstrained", models, norm="sphere")
    adam = StackedAdam(encoder.params, lr=[0.01] * runs, weight_decay=[0.0] * runs)
    batches = torch.from_numpy(np.stack([class_balanced_batches(y, batch, num_batches=steps, rng=np.random.default_rng(r))
                                         for r in range(runs)]))
    if presort:  # as the engine gives batches of table rows: in label order (run_stack, "presort")
        batches = batches.gather(2, torch.sort(torch.from_numpy(y)[batches], dim=2, stable=True).indices)
    labels_all = torch.from_numpy(y).expand(runs, -1)
    supervised = torch.ones(runs, dtype=torch.bool)
    tilt = torch.full((runs,), 5.0, dtype=torch.float64)
    tau = torch.ones(runs, dtype=torch.float64)

    def step(s: int) -> None:
        idx = batches[:, s]
        losses = stacked_weighted(encoder(idx), labels_all.gather(1, idx), supervised=supervised, beta=tilt, tau=tau, num_negatives=1)
        losses.detach().tolist()
        adam.zero_grad()
        losses.sum().backward()
        adam.step()

    return step


def _time_steps(step, warmup: int, steps: int) -> float:
    for s in range(warmup):
        step(s)
    times = []
    for s in range(warmup, warmup + steps):
        t0 = time.perf_counter()
        step(s)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def one_throughput(classes: int, runs: int) -> dict:
    per_class, batch = (50, 128) if classes == 10 else (20, 512)
    steps = max(5, min(200, 4000 // (runs * (batch // 128) ** 2)))
    step = _stack_step_setup(classes, per_class, batch, runs, steps + 3)
    median = _time_steps(step, 3, steps)
    return {"classes": classes, "runs": runs, "batch": batch, "step_ms": 1e3 * median, "run_steps_per_s": runs / median,
            "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def part_b(threads: int) -> None:
    print("(b) run-steps per second vs stack size (unconstrained, HSCL beta 5, float32, fresh process each)")
    print("| C | B | d | R | stacked step ms | run-steps / s | peak RSS MiB |")
    print("|---|---|---|---|---|---|---|")
    for classes in (10, 100):
        for runs in (1, 4, 16, 64):
            out = subprocess.run([sys.executable, __file__, "--one", f"{classes},{runs}", "--threads", str(threads)],
                                 check=True, capture_output=True, text=True).stdout
            r = json.loads(out.strip().splitlines()[-1])
            print(f"| {classes} | {r['batch']} | {classes - 1} | {runs} | {r['step_ms']:.2f} | {r['run_steps_per_s']:.0f} "
                  f"| {r['peak_rss_mib']:.0f} |")


def part_c() -> None:
    classes, per_class, batch, dim = 50, 40, 512, 49
    y = np.repeat(np.arange(classes), per_class)
    labels = torch.from_numpy(y)
    model = build_model("unconstrained", dim=dim, num_samples=y.size, generator=torch.Generator().manual_seed(0))
    opt = adam(model.parameters(), lr=0.01, weight_decay=0.0)  # the sequential engine's Adam
    batches = torch.from_numpy(class_balanced_batches(y, batch, num_batches=60, rng=np.random.default_rng(0)))

    def sequential_step(s: int) -> None:
        idx = batches[s]
        loss = batch_loss(model(idx), labels[idx], "hscl", beta=5.0, tau=1.0)
        loss.item()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    z = torch.randn(batch, dim)
    g = torch.randn(batch, batch)

    def floor(_: int) -> None:
        z @ z.T
        g @ z
        g.T @ z

    stack_z = torch.nn.functional.normalize(torch.randn(4, batch, dim), dim=2).requires_grad_()
    stack_labels = torch.from_numpy(np.stack([y[batches[s]] for s in range(4)]))

    def loss_only(_: int) -> None:  # the stacked kernel alone (forward + backward), R = 4
        losses = stacked_weighted(stack_z, stack_labels, supervised=torch.ones(4, dtype=torch.bool),
                                  beta=torch.full((4,), 5.0, dtype=torch.float64), tau=torch.ones(4, dtype=torch.float64),
                                  num_negatives=1, band_width=11)
        losses.sum().backward()
        stack_z.grad = None

    # interleaved rounds (one step of each, in turn): a shared machine's load hits every column alike
    cases = {"sequential (blocked + fused torch Adam)": (sequential_step, 1),
             "stacked R = 1": (_stack_step_setup(classes, per_class, batch, 1, 60), 1),
             "stacked R = 4": (_stack_step_setup(classes, per_class, batch, 4, 60), 4),
             "stacked R = 16": (_stack_step_setup(classes, per_class, batch, 16, 60), 16),
             # the claim-6 full sweep on one worker trains its 60 runs as one stack (plan_units)
             "stacked R = 60": (_stack_step_setup(classes, per_class, batch, 60, 60), 60),
             "stacked loss alone (forward + backward), R = 4": (loss_only, 4),
             "3-GEMM floor": (floor, 1)}
    times: dict[str, list[float]] = {name: [] for name in cases}
    for s in range(55):
        for name, (step, runs) in cases.items():
            t0 = time.perf_counter()
            step(s)
            if s >= 5:
                times[name].append((time.perf_counter() - t0) / runs)
    medians = {name: statistics.median(t) for name, t in times.items()}
    gemm = medians["3-GEMM floor"]
    print(f"(c) per-step time at the claim-6 full shape (C = {classes}, B = {batch}, d = {dim}, HSCL beta 5, float32)")
    print("| step | ms per run-step | x 3-GEMM floor |")
    print("|---|---|---|")
    for name, t in medians.items():
        print(f"| {name} | {1e3 * t:.3f} | {t / gemm:.2f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--part", default="a,b,c")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--one", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    limit_cpu_threads(args.threads)
    torch.set_num_threads(args.threads)
    if args.one:
        classes, runs = map(int, args.one.split(","))
        print(json.dumps(one_throughput(classes, runs)))
        return
    print(f"torch {torch.__version__}, {torch.get_num_threads()} thread(s)")
    parts = args.part.split(",")
    if "a" in parts:
        part_a()
    if "b" in parts:
        part_b(args.threads)
    if "c" in parts:
        part_c()


if __name__ == "__main__":
    main()
