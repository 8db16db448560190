"""What torch's fused CPU Adam would do to the stacked step (an experiment; the engine keeps its for-loop update).

StackedAdam.step is replaced, in this process only, by ``torch._fused_adam_`` over the per-run slices of each
stacked parameter (one contiguous view per run, so every run is updated as ``torch.optim.Adam(fused=True)``
would update it alone). The fused update is not bitwise the for-loop one (float32: 2.4e-7 apart after 20 steps
of a [2000, 49] table), which is why the engine does not use it: it would move every stored result at the
rounding level. Prints ms per run-step and the ratio to the 3-GEMM floor at the claim-6 full shape (C = 50,
B = 512, d = 49) for R = 4 and 60, both updates, the steps and the floor interleaved (25 rounds, medians).

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

from ncgeom.experiments.stacked.adam import StackedAdam  # noqa: E402

LOOP = StackedAdam.step


def fused_step(self: StackedAdam) -> None:
    """One Adam update of every run through torch._fused_adam_ (same lr and weight decay for all runs)."""
    if len(set(self.lr)) > 1 or len(set(self.weight_decay)) > 1:
        raise ValueError("this experiment takes one lr and one weight decay for the stack")
    beta1, beta2 = self.betas
    steps = self.__dict__.setdefault("_fused_steps", [torch.zeros((), dtype=torch.float32) for _ in self.params])
    with torch.no_grad():
        for i, (p, m, v) in enumerate(zip(self.params, self.exp_avg, self.exp_avg_sq, strict=True)):
            if p.grad is None:
                continue
            steps[i] += 1
            runs = range(p.shape[0])
            torch._fused_adam_([p[r] for r in runs], [p.grad[r] for r in runs], [m[r] for r in runs],
                               [v[r] for r in runs], [], [steps[i]] * len(runs), lr=self.lr[0], beta1=beta1,
                               beta2=beta2, weight_decay=self.weight_decay[0], eps=self.eps, amsgrad=False,
                               maximize=False)


def main() -> None:
    torch.set_num_threads(1)
    z, g = torch.randn(512, 49), torch.randn(512, 512)

    def floor() -> None:
        z @ z.T
        g @ z
        g.T @ z

    cases = {}
    for runs in (4, 60):
        for name, update in (("for-loop", LOOP), ("fused", fused_step)):
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
    StackedAdam.step = LOOP  # type: ignore[method-assign]
    f = statistics.median(floors)
    print(f"3-GEMM floor {1e3 * f:.3f} ms")
    print("| R | Adam | ms per run-step | x floor |")
    print("|---|---|---|---|")
    for (runs, name), (_, _, times) in cases.items():
        m = statistics.median(times)
        print(f"| {runs} | {name} | {1e3 * m:.3f} | {m / f:.2f} |")


if __name__ == "__main__":
    main()
