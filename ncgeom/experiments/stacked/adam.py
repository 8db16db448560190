"""Adam on stacked parameters: one state per run, per-run learning rate and weight decay.

Each parameter is a tensor [R, ...] whose slice r belongs to run r. The update is torch.optim.Adam's
(single-tensor CPU path, ``amsgrad=False``, ``maximize=False``), written elementwise so that slice r
follows exactly the operations torch.optim.Adam applies to run r's own parameter:

.. math::

    g \\leftarrow g + \\lambda_r \\theta,\\quad m \\leftarrow m + (1 - \\beta_1)(g - m),\\quad
    v \\leftarrow \\beta_2 v + (1 - \\beta_2) g^2,\\quad
    \\theta \\leftarrow \\theta + \\frac{(-\\eta_r / (1 - \\beta_1^t))\\, m}{\\sqrt{v} / \\sqrt{1 - \\beta_2^t} + \\epsilon},

where eta_r = ``lr[r]``, lambda_r = ``weight_decay[r]`` (L2 added to the gradient, as torch does) and t
the step count (the same for every run of a stack). The per-run step size is rounded to the parameter's
dtype as torch rounds its scalar, and the last line is evaluated as torch's CPU ``addcdiv`` does
((value * m) / denom, then added); when every run has the same lr it is torch's ``addcdiv_`` itself. So a
stack of one run follows torch.optim.Adam bitwise, and so does each run of a stack (tests/test_stacked.py).
The state and the per-run step sizes live on the parameters' device. On CUDA torch.optim.Adam takes its
multi-tensor (foreach) path and its ``addcdiv`` kernel rounds value * (m / denom): a stack of one run
follows it to rounding, not bitwise (tests/test_device.py bounds the difference).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

__all__ = ["StackedAdam"]


class StackedAdam:
    """Adam over parameters [R, ...] with ``lr`` [R] and ``weight_decay`` [R] (module docstring).

    Parameters
    ----------
    params : sequence of Tensor [R, ...]
        Leaf tensors with ``requires_grad``; ``step`` reads their ``.grad``.
    lr, weight_decay : sequence of float, length R
    betas, eps : as torch.optim.Adam (0.9, 0.999), 1e-8.
    """

    def __init__(self, params: Sequence[torch.Tensor], *, lr: Sequence[float], weight_decay: Sequence[float],
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8):
        self.params = list(params)
        runs = self.params[0].shape[0] if self.params else 0
        if len(lr) != runs or len(weight_decay) != runs:
            raise ValueError(f"lr and weight_decay must have one value per run ({runs}), got {len(lr)} and {len(weight_decay)}")
        self.lr = [float(v) for v in lr]
        self.weight_decay = [float(v) for v in weight_decay]
        self.betas = (float(betas[0]), float(betas[1]))
        self.eps = float(eps)
        self.steps = 0
        self.exp_avg = [torch.zeros_like(p) for p in self.params]
        self.exp_avg_sq = [torch.zeros_like(p) for p in self.params]
        # the denominator and the per-run update of each parameter, reused at every step: allocating them
        # anew (a few MiB per step for a large stack) made glibc return the memory and fault it back in
        self._denom = [torch.empty_like(p) for p in self.params]
        self._update: list[torch.Tensor | None] = [None] * len(self.params)

    def zero_grad(self) -> None:
        for p in self.params:
            p.grad = None

    @torch.no_grad()
    def step(self) -> None:
        """One Adam update of every run (parameters without a gradient are skipped, as torch does)."""
        beta1, beta2 = self.betas
        self.steps += 1
        step = float(self.steps)  # torch keeps the count as a float tensor and reads it with .item()
        bias_correction1 = 1 - beta1**step
        bias_correction2_sqrt = (1 - beta2**step) ** 0.5
        same_decay = len(set(self.weight_decay)) <= 1
        same_lr = len(set(self.lr)) <= 1
        for i, (p, m, v) in enumerate(zip(self.params, self.exp_avg, self.exp_avg_sq, strict=True)):
            if p.grad is None:
                continue
            grad = p.grad
            shape = (p.shape[0],) + (1,) * (p.ndim - 1)
            if same_decay and self.weight_decay and self.weight_decay[0] != 0:
                grad = grad.add(p, alpha=self.weight_decay[0])
            elif not same_decay:  # slice by slice: torch's add(alpha=) rounding, not a broadcast product
                grad = grad.clone()
                for r, wd in enumerate(self.weight_decay):
                    if wd != 0:
                        grad[r] = grad[r].add(p[r], alpha=wd)
            m.lerp_(grad, 1 - beta1)
            v.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
            denom = torch.sqrt(v, out=self._denom[i]).div_(bias_correction2_sqrt).add_(self.eps)
            if same_lr:  # one step size: torch's own addcdiv_
                p.addcdiv_(m, denom, value=-self.lr[0] / bias_correction1)
                continue
            # -lr / bc1 computed in float64 (Python) and rounded to p's dtype, as torch's Scalar value is
            step_size = torch.tensor([-lr / bias_correction1 for lr in self.lr], dtype=torch.float64, device=p.device)
            update = self._update[i]
            if update is None:
                update = self._update[i] = torch.empty_like(p)
            torch.mul(m, step_size.to(p.dtype).reshape(shape), out=update)
            p.add_(update.div_(denom))
