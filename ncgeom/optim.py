"""Adam of both engines: torch's fused Adam, for one run (``adam``) or per run of a stack (``StackedAdam``).

The update is torch.optim.Adam's (``amsgrad=False``, ``maximize=False``, L2 weight decay added to the
gradient), evaluated by torch's fused kernel (``torch._fused_adam_``, what ``torch.optim.Adam(fused=True)``
calls):

.. math::

    g \\leftarrow g + \\lambda_r \\theta,\\quad m \\leftarrow \\beta_1 m + (1 - \\beta_1) g,\\quad
    v \\leftarrow \\beta_2 v + (1 - \\beta_2) g^2,\\quad
    \\theta \\leftarrow \\theta - \\frac{\\eta_r}{1 - \\beta_1^t}\\, \\frac{m}{\\sqrt{v} / \\sqrt{1 - \\beta_2^t} + \\epsilon},

where eta_r = ``lr[r]``, lambda_r = ``weight_decay[r]`` and t the step count (the same for every run of a
stack). The sequential engine takes it from :func:`adam`; :class:`StackedAdam` hands the kernel run r's own
slice of every stacked parameter [R, ...] (a contiguous tensor of the shape of the run's own parameter), one
call per distinct (lr, weight decay). The kernel is elementwise and walks a tensor in SIMD chunks from its
first element, with a scalar loop for the last few (their last bit can differ from the SIMD one); how it
splits the tensor among threads, and where the tensor lies in memory, do not change a result (checked for
1 and 2 threads and shifted storage). A run's update therefore depends only on its own slice: a run of a
stack follows ``torch.optim.Adam(fused=True)`` on the same parameter bitwise, whatever its stack mates
(tests/test_stacked.py).

Why fused: it reads and writes each element once, where the for-loop update (``lerp_``, ``mul_``,
``addcmul_``, ``sqrt``, ``div_``, ``add_``, ``addcdiv_``) passes over the whole parameter seven times; for the
unconstrained model that parameter is every run's whole [N, d] table at every step (BENCHMARKS.md, "Speed
round 4"). It rounds differently from the for-loop update (float32: a few 1e-7 after 20 steps), so results
computed before the switch agree with those after to rounding, not bitwise.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import torch

__all__ = ["adam", "StackedAdam"]

BETAS = (0.9, 0.999)
EPS = 1e-8


def adam(params: Iterable[torch.Tensor], *, lr: float, weight_decay: float) -> torch.optim.Adam:
    """The optimizer of one run: ``torch.optim.Adam(params, lr=lr, weight_decay=weight_decay, fused=True)``
    (module docstring; betas (0.9, 0.999), eps 1e-8)."""
    return torch.optim.Adam(params, lr=lr, weight_decay=weight_decay, betas=BETAS, eps=EPS, fused=True)


class StackedAdam:
    """Adam over parameters [R, ...] with ``lr`` [R] and ``weight_decay`` [R] (module docstring).

    Parameters
    ----------
    params : sequence of Tensor [R, ...]
        Leaf tensors with ``requires_grad``, contiguous; ``step`` reads their ``.grad`` and updates them in place.
    lr, weight_decay : sequence of float, length R
    betas, eps : as torch.optim.Adam (0.9, 0.999), 1e-8.
    """

    def __init__(self, params: Sequence[torch.Tensor], *, lr: Sequence[float], weight_decay: Sequence[float],
                 betas: tuple[float, float] = BETAS, eps: float = EPS):
        self.params = list(params)
        runs = self.params[0].shape[0] if self.params else 0
        if len(lr) != runs or len(weight_decay) != runs:
            raise ValueError(f"lr and weight_decay must have one value per run ({runs}), got {len(lr)} and {len(weight_decay)}")
        for i, p in enumerate(self.params):
            if not p.is_contiguous():
                raise ValueError(f"params[{i}] must be contiguous (each run's slice goes to the fused kernel as is)")
        self.lr = [float(v) for v in lr]
        self.weight_decay = [float(v) for v in weight_decay]
        self.betas = (float(betas[0]), float(betas[1]))
        self.eps = float(eps)
        self.steps = 0
        self.exp_avg = [torch.zeros_like(p) for p in self.params]
        self.exp_avg_sq = [torch.zeros_like(p) for p in self.params]
        # torch.optim.Adam(fused=True) keeps its step count as a float32 tensor on the parameter's device
        self._step = [torch.zeros((), dtype=torch.float32, device=p.device) for p in self.params]
        groups: dict[tuple[float, float], list[int]] = {}
        for r, key in enumerate(zip(self.lr, self.weight_decay)):
            groups.setdefault(key, []).append(r)
        self._groups = list(groups.items())
        # the per-run slices of the parameters and the moments, taken once (every update is in place)
        self._slices = [(p.detach().unbind(0), m.unbind(0), v.unbind(0))
                        for p, m, v in zip(self.params, self.exp_avg, self.exp_avg_sq, strict=True)]

    def select(self, runs: Sequence[int], params: Sequence[torch.Tensor]) -> StackedAdam:
        """A StackedAdam over ``params`` (the stacked parameters cut to ``runs``, in that order) that continues
        this one's state for those runs: their moments, step counts, lr and weight decay. A run's updates depend
        only on its own slices (module docstring), so the runs kept go on exactly as they would have."""
        index = list(runs)
        kept = StackedAdam(params, lr=[self.lr[r] for r in index], weight_decay=[self.weight_decay[r] for r in index],
                           betas=self.betas, eps=self.eps)
        with torch.no_grad():
            for i in range(len(self.params)):
                kept.exp_avg[i].copy_(self.exp_avg[i][index])
                kept.exp_avg_sq[i].copy_(self.exp_avg_sq[i][index])
                kept._step[i].copy_(self._step[i])
        kept.steps = self.steps
        return kept

    def zero_grad(self) -> None:
        for p in self.params:
            p.grad = None

    @torch.no_grad()
    def step(self) -> None:
        """One Adam update of every run (parameters without a gradient are skipped, as torch does)."""
        beta1, beta2 = self.betas
        self.steps += 1
        for i, p in enumerate(self.params):
            if p.grad is None:
                continue
            self._step[i] += 1
            grads = p.grad.contiguous().unbind(0)
            params, exp_avg, exp_avg_sq = self._slices[i]
            for (lr, weight_decay), runs in self._groups:
                torch._fused_adam_(
                    [params[r] for r in runs], [grads[r] for r in runs], [exp_avg[r] for r in runs],
                    [exp_avg_sq[r] for r in runs], [], [self._step[i]] * len(runs), lr=lr, beta1=beta1, beta2=beta2,
                    weight_decay=weight_decay, eps=self.eps, amsgrad=False, maximize=False)
