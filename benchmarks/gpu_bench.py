"""The GPU benchmarks in one script, for a session that is lent a GPU: three short tables, side by side in one run.

(1) ``batch_loss`` forward + backward (HSCL beta 5, weighted, detached weights, float32, d = 128) by backend,
    dense, blocked and triton, at B in {512, 2048, 8192}: ms per call and each backend's ratio to the fastest;
(2) the stacked engine's training step (unconstrained features, HSCL beta 5, float32) at C = 100, B = 512,
    d = 99 for stack sizes R in {1, 4, 16, 64}: run-steps per second and the 3-GEMM floor of one run-step;
(3) ResNet training throughput (``ncgeom.models.resnet.ResNetEncoder``, CIFAR stem, d = 99, ball, HSCL beta 5, Adam)
    at 32 x 32, B = 512, float32 and bf16 autocast: images per second of a whole step (standardize, forward,
    loss, backward, Adam), the number the paper presets' GPU time rests on (docs/experiments.md, "Paper
    presets").

Every timing synchronizes the device; each row is the median of ``--repeats`` timed calls after ``--warmup``
untimed ones, rows interleaved round by round. ``--device cpu --smoke`` runs tiny sizes on the CPU, to check the
script itself (tests/test_gpu_bench.py); its numbers mean nothing.

Usage: python benchmarks/gpu_bench.py [--device cuda] [--repeats 20] [--warmup 5] [--parts 1,2,3] [--smoke]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import numpy as np
import torch

from ncgeom.data import class_balanced_batches
from ncgeom.data.augment import standardize
from ncgeom.losses import batch_loss
from ncgeom.losses.kernels.stacked import stacked_weighted
from ncgeom.models import build_model
from ncgeom.models.resnet import ResNetEncoder
from ncgeom.models.stacked import StackedEncoder
from ncgeom.optim import StackedAdam, adam


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _interleaved(cases: dict[str, Callable[[int], None]], device: torch.device, *, repeats: int, warmup: int
                 ) -> dict[str, float]:
    """Median seconds per call of each case, the cases called in turn round after round."""
    times: dict[str, list[float]] = {name: [] for name in cases}
    for r in range(warmup + repeats):
        for name, call in cases.items():
            _sync(device)
            t0 = time.perf_counter()
            call(r)
            _sync(device)
            if r >= warmup:
                times[name].append(time.perf_counter() - t0)
    return {name: statistics.median(t) for name, t in times.items()}


def part_losses(device: torch.device, sizes: tuple[int, ...], *, repeats: int, warmup: int) -> None:
    from ncgeom.losses.batch import _triton_unsupported

    print("(1) batch_loss forward + backward, HSCL beta 5, weighted, detached weights, float32, d = 128")
    print("| B | backend | ms | x fastest |")
    print("|---|---|---|---|")
    for size in sizes:
        gen = torch.Generator().manual_seed(size)
        z0 = torch.nn.functional.normalize(torch.randn(size, 128, generator=gen), dim=1).to(device)
        labels = (torch.arange(size) % 10).to(device)
        backends = ["dense", "blocked"] + ([] if _triton_unsupported(z0, "weighted", "mean", "theory") else ["triton"])

        def call(backend: str, z0: torch.Tensor = z0, labels: torch.Tensor = labels) -> Callable[[int], None]:
            def run(_: int) -> None:
                z = z0.clone().requires_grad_()
                batch_loss(z, labels, "hscl", beta=5.0, backend=backend).backward()
            return run

        medians = _interleaved({b: call(b) for b in backends}, device, repeats=repeats, warmup=warmup)
        best = min(medians.values())
        for backend, t in medians.items():
            print(f"| {size} | {backend} | {1e3 * t:.3f} | {t / best:.2f} |")
        if "triton" not in backends:
            print(f"| {size} | triton | - | not available here |")


def _stack_step(device: torch.device, classes: int, per_class: int, batch: int, runs: int, steps: int):
    dim = classes - 1
    y = np.repeat(np.arange(classes), per_class)
    models = [build_model("unconstrained", dim=dim, num_samples=y.size, generator=torch.Generator().manual_seed(r))
              for r in range(runs)]
    encoder = StackedEncoder.from_models("unconstrained", models, norm="sphere", device=device)
    adam = StackedAdam(encoder.params, lr=[0.01] * runs, weight_decay=[0.0] * runs)
    batches = torch.from_numpy(np.stack([class_balanced_batches(y, batch, num_batches=steps, rng=np.random.default_rng(r))
                                         for r in range(runs)])).to(device)
    labels_all = torch.from_numpy(y).to(device).expand(runs, -1)
    supervised = torch.ones(runs, dtype=torch.bool, device=device)
    tilt = torch.full((runs,), 5.0, dtype=torch.float64, device=device)
    tau = torch.ones(runs, dtype=torch.float64, device=device)

    def step(s: int) -> None:
        idx = batches[:, s % steps]
        losses = stacked_weighted(encoder(idx), labels_all.gather(1, idx), supervised=supervised, beta=tilt, tau=tau, num_negatives=1)
        adam.zero_grad()
        losses.sum().backward()
        adam.step()

    return step


def part_stacked(device: torch.device, classes: int, per_class: int, batch: int, stacks: tuple[int, ...], *,
                 repeats: int, warmup: int) -> None:
    dim = classes - 1
    print(f"(2) stacked training step, unconstrained, HSCL beta 5, float32, C = {classes}, B = {batch}, d = {dim}")
    cases = {f"R = {r}": _stack_step(device, classes, per_class, batch, r, warmup + repeats) for r in stacks}
    z, g = torch.randn(batch, dim, device=device), torch.randn(batch, batch, device=device)

    def floor(_: int) -> None:
        z @ z.T
        g @ z
        g.T @ z

    medians = _interleaved({**cases, "floor": floor}, device, repeats=repeats, warmup=warmup)
    gemm = medians.pop("floor")
    print(f"| R | ms per step | run-steps / s | ms per run-step | x 3-GEMM floor ({1e3 * gemm:.3f} ms) |")
    print("|---|---|---|---|---|")
    for t, r in zip(medians.values(), stacks, strict=True):
        print(f"| {r} | {1e3 * t:.3f} | {r / t:.0f} | {1e3 * t / r:.3f} | {t / r / gemm:.2f} |")


def part_resnet(device: torch.device, kinds: tuple[str, ...], batch: int, side: int, *, repeats: int,
                warmup: int) -> None:
    print(f"(3) ResNet training step (CIFAR stem, d = 99, ball, HSCL beta 5, Adam 1e-3), {side} x {side}, B = {batch}")
    print("| model | precision | ms per step | images / s |")
    print("|---|---|---|---|")
    gen = torch.Generator().manual_seed(0)
    images = torch.randint(0, 256, (batch, 3, side, side), generator=gen, dtype=torch.uint8).to(device)
    labels = (torch.arange(batch) % 100).to(device)
    precisions = ("float32", "bf16") if device.type == "cuda" else ("float32",)
    cases = {}
    for kind in kinds:
        for precision in precisions:
            model = ResNetEncoder(kind=kind, dim=99, norm="ball", generator=torch.Generator().manual_seed(1)).to(device)
            optimizer = adam(model.parameters(), lr=1e-3, weight_decay=0.0)  # image_train's Adam

            def step(_: int, model=model, optimizer=optimizer, precision=precision) -> None:
                x = standardize(images.float() / 255.0)
                if precision == "bf16":
                    with torch.autocast(device_type="cuda", dtype=torch.bfloat16):
                        z = model(x)
                    z = z.float()
                else:
                    z = model(x)
                loss = batch_loss(z, labels, "hscl", beta=5.0)
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                optimizer.step()

            cases[(kind, precision)] = step
    medians = _interleaved(cases, device, repeats=repeats, warmup=warmup)  # type: ignore[arg-type]
    for (kind, precision), t in medians.items():
        print(f"| {kind} | {precision} | {1e3 * t:.1f} | {batch / t:.0f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--parts", default="1,2,3")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes (a check of the script, e.g. on the CPU)")
    args = parser.parse_args()
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise SystemExit("gpu_bench: CUDA is not available here; use --device cpu --smoke to check the script")
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    print(f"torch {torch.__version__}, device {name}")
    parts = set(args.parts.split(","))
    timing = dict(repeats=args.repeats, warmup=args.warmup)
    if "1" in parts:
        part_losses(device, (64, 128) if args.smoke else (512, 2048, 8192), **timing)
    if "2" in parts:
        if args.smoke:
            part_stacked(device, 10, 8, 32, (1, 2), **timing)
        else:
            part_stacked(device, 100, 20, 512, (1, 4, 16, 64), **timing)
    if "3" in parts:
        if args.smoke:
            part_resnet(device, ("resnet18",), 8, 16, **timing)
        else:
            part_resnet(device, ("resnet18", "resnet50"), 512, 32, **timing)


if __name__ == "__main__":
    main()
