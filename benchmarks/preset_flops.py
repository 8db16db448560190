"""FLOPs of the paper presets (docs/experiments.md, "Paper presets") and the GPU time they imply at a stated
sustained throughput: an estimate for planning, not a measurement.

Counts the forward and the forward + backward FLOPs of one 32 x 32 image through ``ncgeom.models.resnet.ResNetEncoder``
(the CIFAR stem, the authors' head, d = 99) with ``torch.utils.flop_counter.FlopCounterMode`` (a multiply-add is 2
FLOP), then, per preset and scale, the FLOPs of all its runs: epochs x floor(50,000 / B) x B training images and
(1 + epochs / metrics_every) evaluations of the 50,000 training and 10,000 test images, forward only. The hours
are FLOPs / throughput for each ``--tflops`` value.

Usage: python benchmarks/preset_flops.py [--tflops 50 100]
"""

from __future__ import annotations

import argparse
import math

import torch
from torch.utils.flop_counter import FlopCounterMode

from ncgeom.campaigns.claims import PRESETS, claim_spec
from ncgeom.campaigns.spec import expand
from ncgeom.models.resnet import ResNetEncoder

TRAIN, TEST = 50_000, 10_000  # CIFAR-100's splits


def per_image(kind: str) -> tuple[float, float]:
    """(forward, forward + backward) FLOPs of one image (a batch of 2, since batch norm needs > 1 in train mode)."""
    model = ResNetEncoder(kind=kind, dim=99, norm="ball", generator=torch.Generator().manual_seed(0))
    x = torch.randn(2, 3, 32, 32)
    with FlopCounterMode(display=False) as train:
        model(x).sum().backward()
    model.eval()
    with FlopCounterMode(display=False) as forward, torch.no_grad():
        model(x)
    return forward.get_total_flops() / 2, train.get_total_flops() / 2


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tflops", type=float, nargs="+", default=[50.0, 100.0])
    args = parser.parse_args()
    costs = {kind: per_image(kind) for kind in ("resnet18", "resnet50")}
    for kind, (fwd, both) in costs.items():
        print(f"{kind}: {fwd / 1e9:.2f} GFLOP forward, {both / 1e9:.2f} GFLOP forward + backward per 32 x 32 image")
    print("| spec | scale | runs | FLOP per run (largest) | " + " | ".join(f"GPU-h at {t:g} TFLOP/s" for t in args.tflops) + " |")
    print("|---|---|---|---|" + "---|" * len(args.tflops))
    for claim_id in PRESETS:
        spec = claim_spec(claim_id)
        for scale in ("full", "quick"):
            configs = expand(spec, scale=scale)
            flops = []
            for c in configs:
                fwd, both = costs[c.model]
                trained = c.epochs * (TRAIN // c.batch_size) * c.batch_size
                evaluations = 1 + math.ceil(c.epochs / c.metrics_every)
                flops.append(trained * both + evaluations * (TRAIN + TEST) * fwd)
            hours = [sum(flops) / (t * 1e12) / 3600 for t in args.tflops]
            print(f"| {spec.name} | {scale} | {len(configs)} | {max(flops):.3g} | " + " | ".join(f"{h:.1f}" for h in hours) + " |")


if __name__ == "__main__":
    main()
