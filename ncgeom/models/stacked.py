"""Encoders of R runs as one set of stacked parameters [R, ...] (the models of :mod:`ncgeom.models`).

:meth:`StackedEncoder.from_models` stacks the parameters of R encoders built by
:func:`ncgeom.models.build_model` (each from its own run's generators, so each slice is exactly that
run's initialization), in the order of ``model.parameters()``:

- unconstrained: W [R, N, d]; a batch of indices idx [R, B] gives z = normalize(W[r, idx[r]]) (rows taken by
  one ``index_select`` of the flattened table; the gradient of W, zero off the batch, is summed by
  ``index_add_`` into a buffer the encoder keeps between steps: :class:`_TableRows`);
- linear: W [R, d, D], b [R, d]; z = normalize(x W^T + b) with one ``torch.baddbmm``;
- mlp: (W_l [R, out, in], b_l [R, out]) per layer, ReLU between, one ``baddbmm`` per layer;
- deep_linear: the same layers without the ReLU.

:meth:`StackedEncoder.embed` evaluates one run on all its samples with the sequential model's own
operations (``torch.nn.functional.linear`` on run r's slices), so the metrics of a run see exactly the
embeddings its parameters give under the sequential engine.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch.nn import functional

from ncgeom.geometry import normalize
from ncgeom.vocabulary import ModelKind, Normalization

__all__ = ["StackedEncoder"]


class _TableRows(torch.autograd.Function):
    """W[r, idx[r]] of a stacked table W [R, N, d], rows ``flat`` = r N + idx[r, i] of W viewed as [R N, d].

    Backward: the gradient of W (zero but at the batch rows, summed there as torch's index backward sums them)
    goes straight to ``W.grad``: into the encoder's kept buffer when ``W.grad`` is None (zeroed first), else
    added in place to ``W.grad``. A fresh [R, N, d] tensor of zeros at every step, which autograd would
    allocate, cost about 1 ms per step at R = 4, N = 2000, d = 49 (its first touch: BENCHMARKS.md, "Speed
    round 3"), next to 0.04 ms for zeroing a kept one. The values equal those of ``W[runs, idx]``: every
    batch row of W receives the same sum of the same terms.
    """

    @staticmethod
    def forward(ctx, weight, flat, shape, keeper):
        ctx.save_for_backward(flat)
        ctx.weight, ctx.keeper = weight, keeper
        width = weight.shape[-1]
        return weight.detach().view(-1, width).index_select(0, flat).view(*shape, width)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad):
        (flat,) = ctx.saved_tensors
        weight, keeper = ctx.weight, ctx.keeper
        width = weight.shape[-1]
        rows = grad.reshape(-1, width)
        if weight.grad is None:
            buffer = keeper.get("grad")
            if buffer is None or buffer.shape != weight.shape or buffer.dtype != rows.dtype:
                buffer = keeper["grad"] = torch.zeros_like(weight, dtype=rows.dtype)
            else:
                buffer.zero_()
            buffer.view(-1, width).index_add_(0, flat, rows)
            weight.grad = buffer
        else:
            weight.grad.view(-1, width).index_add_(0, flat, rows)
        return None, None, None, None


class StackedEncoder:
    """R encoders of one kind and shape, parameters stacked along a leading run axis (module docstring)."""

    def __init__(self, kind: ModelKind, params: Sequence[torch.Tensor], *, norm: Normalization):
        self.kind = kind
        self.norm = norm
        self.params = [p.detach().clone().requires_grad_(True) for p in params]
        self._keeper: dict[str, torch.Tensor] = {}  # the kept gradient buffer of the unconstrained table

    @classmethod
    def from_models(cls, kind: ModelKind, models: Sequence[torch.nn.Module], *, norm: Normalization,
                    device: torch.device | str | None = None) -> StackedEncoder:
        """Stack the parameters of R models of the same kind and shapes (slice r = model r's parameters).

        ``device``: where the stacked parameters live (None: the models' device); the values are copied exactly.
        """
        per_model = [list(m.parameters()) for m in models]
        stacked = [torch.stack([p.detach() for p in group]).to(device) for group in zip(*per_model, strict=True)]
        return cls(kind, stacked, norm=norm)

    @property
    def takes_indices(self) -> bool:
        return self.kind == "unconstrained"

    @property
    def num_runs(self) -> int:
        return int(self.params[0].shape[0])

    def __call__(self, inputs: torch.Tensor) -> torch.Tensor:
        """z [R, B, d] of a stacked batch: indices [R, B] (unconstrained) or inputs [R, B, D]."""
        if self.kind == "unconstrained":
            table = self.params[0]
            flat = (inputs + torch.arange(0, table.shape[0] * table.shape[1], table.shape[1],
                                          device=inputs.device)[:, None]).reshape(-1)
            return normalize(_TableRows.apply(table, flat, tuple(inputs.shape), self._keeper), self.norm)
        h = inputs
        layers = list(zip(self.params[0::2], self.params[1::2], strict=True))
        for i, (weight, bias) in enumerate(layers):
            h = torch.baddbmm(bias[:, None, :], h, weight.mT)
            if i < len(layers) - 1 and self.kind == "mlp":
                h = torch.relu(h)
        return normalize(h, self.norm)

    def embed(self, r: int, x: torch.Tensor | None = None) -> torch.Tensor:
        """Run r's embeddings of all its samples (unconstrained, ``x`` None) or of inputs ``x`` [N, D]."""
        with torch.no_grad():
            if self.kind == "unconstrained":
                return normalize(self.params[0][r], self.norm)
            assert x is not None  # input models embed inputs (the engine passes them)
            h = x
            layers = list(zip(self.params[0::2], self.params[1::2], strict=True))
            for i, (weight, bias) in enumerate(layers):
                h = functional.linear(h, weight[r], bias[r])
                if i < len(layers) - 1 and self.kind == "mlp":
                    h = torch.relu(h)
            return normalize(h, self.norm)

    def snapshot(self) -> list[torch.Tensor]:
        """A copy of every stacked parameter."""
        return [p.detach().clone() for p in self.params]

    @torch.no_grad()
    def restore(self, r: int, state: Sequence[torch.Tensor]) -> None:
        """Set run r's slices to those of ``state`` (a :meth:`snapshot`)."""
        for p, saved in zip(self.params, state, strict=True):
            p[r] = saved[r]
