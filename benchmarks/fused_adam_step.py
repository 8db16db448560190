"""The stacked step with the engine's fused Adam against the for-loop update it replaced, side by side.

The engine's :class:`StackedAdam` hands each run's slices to ``torch._fused_adam_`` (one read and write per
element). The for-loop update it replaced (until commit 6d0fb1e: ``lerp_``, ``mul_``/``addcmul_``, ``sqrt``,
``div_``, ``add_``, ``addcdiv_`` over the whole stacked tensor, seven passes) is kept here, as the reference
of the comparison only. Prints ms per run-step and the ratio to the 3-GEMM floor at the claim-6 full shape
(C = 50, B = 512, d = 49) for R = 4 and 60, both updates, the steps and the floor interleaved (25 rounds,
medians).

Run: ``python benchmarks/fused_adam_step.py`` (one thread).
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
import bench_stacked  # noqa: E402

from ncgeom.optim import StackedAdam  # noqa: E402

FUSED = StackedAdam.step


@torch.no_grad()
def loop_step(self: StackedAdam) -> None:
    """The for-loop update of every run (one lr and weight decay for the stack, as in the bench)."""
    if len(set(self.lr)) > 1 or len(set(self.weight_decay)) > 1:
        raise ValueError("this reference takes one lr and one weight decay for the stack")
    beta1, beta2 = self.betas
    self.steps += 1
    bias_correction1 = 1 - beta1**self.steps
    bias_correction2_sqrt = (1 - beta2**self.steps) ** 0.5
    denoms = self.__dict__.setdefault("_denoms", [torch.empty_like(p) for p in self.params])
    for p, m, v, denom in zip(self.params, self.exp_avg, self.exp_avg_sq, denoms, strict=True):
        if p.grad is None:
            continue
        grad = p.grad if self.weight_decay[0] == 0 else p.grad.add(p, alpha=self.weight_decay[0])
        m.lerp_(grad, 1 - beta1)
        v.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
        torch.sqrt(v, out=denom).div_(bias_correction2_sqrt).add_(self.eps)
        p.addcdiv_(m, denom, value=-self.lr[0] / bias_correction1)


def main() -> None:
    torch.set_num_threads(1)
    z, g = torch.randn(512, 49), torch.randn(512, 512)

    def floor() -> None:
        z @ z.T
        g @ z
        g.T @ z

    cases = {}
    for runs in (4, 60):
        for name, update in (("for-loop", loop_step), ("fused", FUSED)):
            StackedAdam.step = update  # type: ignore[method-assign]
            cases[(runs, name)] = (bench_stacked._stack_step_setup(50, 40, 512, runs, 200), update, [])
    floors: list[float] = []
    for rep in range(25):
        for (runs, _), (step, update, times) in cases.items():
            StackedAdam.step = update  # type: ignore[method-assign]
            t0 = time.perf_counter()
            step(rep)
            if rep >= 3:
                times.append((time.perf_counter() - t0) / runs)
            t0 = time.perf_counter()
            floor()
            floors.append(time.perf_counter() - t0)
    StackedAdam.step = FUSED  # type: ignore[method-assign]
    f = statistics.median(floors)
    print(f"3-GEMM floor {1e3 * f:.3f} ms")
    print("| R | Adam | ms per run-step | x floor |")
    print("|---|---|---|---|")
    for (runs, name), (_, _, times) in cases.items():
        m = statistics.median(times)
        print(f"| {runs} | {name} | {1e3 * m:.3f} | {m / f:.2f} |")


if __name__ == "__main__":
    main()
