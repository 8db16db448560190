"""Where a run's divergence shows first: its loss, its embeddings, its gradient or its parameters; the one wording.

The loop (:mod:`ncgeom.runs.loop`) ends a run as "diverged" at the first of these that is not finite, whichever
driver trains it, and records the message below in its summary:

- the loss of a step (the loop): ``loss became non-finite (nan) at epoch 3, step 2``;
- the embeddings of a step's batch (each driver, before the loss): :func:`embeddings_message`;
- the gradient or the parameters after an update (each driver, :func:`update_failures`): a large learning rate
  can send the parameters to inf in one Adam step with a finite loss and finite embeddings, and a non-finite
  gradient turns the parameters into NaN; parameters that no batch uses at the next step (the rows of an
  unconstrained model outside that batch) would otherwise stay NaN unseen until the next evaluation, and a
  state kept at an epoch's end without metrics could be one of them;
- the embeddings of an evaluation (the loop, when a driver's evaluation finds them not finite).

The check after an update sums every parameter once per run (a sum of finite numbers is finite unless it
overflows; a run whose sum is not finite is then decided entry by entry): one pass, against the seven of the fused
Adam step it follows (BENCHMARKS.md, "Reliability round 3"). The gradient is read only to word the message of a run
that failed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["embeddings_message", "update_failures"]


def embeddings_message(epoch: int, step: int) -> str:
    """The failure of a step whose batch embeddings are not finite."""
    return f"embeddings became non-finite at epoch {epoch}, step {step}"


def update_failures(tensors: Sequence[Any], *, runs: int | None, epoch: int, step: int) -> list[str | None]:
    """After an optimizer step: for each run, None when all its ``tensors`` are finite, else why not.

    Parameters
    ----------
    tensors : sequence of Tensor
        The parameters (and floating buffers) just updated; with ``runs`` = R, each has a leading run axis [R, ...]
        (:mod:`ncgeom.runs.stacked`), else they are one run's.
    runs : int or None
        R, or None for one run (the result then has one entry).
    epoch, step : int
        Where, for the message.

    Returns
    -------
    list of (str or None)
        ``the gradient became non-finite at epoch e, step s`` when a gradient of that run is not finite (Adam then
        made its parameters NaN), else ``the parameters became non-finite in the update of epoch e, step s``.
    """
    import torch

    tensors = [t for t in tensors if t.is_floating_point()]
    count = 1 if runs is None else runs
    if not tensors:
        return [None] * count
    with torch.no_grad():
        rows = [t.reshape(count, -1) for t in tensors]
        # a sum of finite entries is finite unless it overflows: one pass, one synchronization with the device, and
        # the runs whose sum is not finite decided exactly (isfinite of every entry is ten times slower on the CPU)
        if runs is None and tensors[0].device.type == "cpu":  # fewest operations: a small run's step is ~1 ms
            ok = [all(bool(torch.isfinite(t.sum())) for t in tensors)]
        else:
            ok = torch.stack([torch.isfinite(r.sum(1)) for r in rows]).all(0).tolist()
        if all(ok):
            return [None] * count
        out: list[str | None] = []
        for r, good in enumerate(ok):
            if good or all(bool(torch.isfinite(row[r]).all()) for row in rows):
                out.append(None)
                continue
            grads = [t.grad if runs is None else t.grad[r] for t in tensors if t.grad is not None]
            bad_grad = any(not bool(torch.isfinite(g).all()) for g in grads)
            out.append(f"the gradient became non-finite at epoch {epoch}, step {step}" if bad_grad else
                       f"the parameters became non-finite in the update of epoch {epoch}, step {step}")
        return out
