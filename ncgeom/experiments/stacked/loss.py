"""The weighted batch estimator on a stack of R independent batches (docs/theory.md, section 7).

For run r with embeddings z^r [B, d], labels y^r [B], S^r = z^r (z^r)^T, tilt b_r, temperature tau_r and
alpha_r = b_r + 1/tau_r, the loss of run r is the mean over its pairs (i, j), j in P(i), of

.. math::

    \\ell_{ij} = \\mathrm{softplus}\\big(A_i - S_{ij}/\\tau_r\\big),\\qquad
    A_i = \\log k + \\mathrm{LSE}_{m \\in N(i)}(\\alpha_r S_{im}) - \\mathrm{LSE}_{m \\in N(i)}(b_r S_{im}),

the formula of :func:`ncgeom.losses.batch_loss` (dense and blocked backends), where N(i) is the other
classes (SCL/HSCL, ``supervised[r]``) or every m != i (UCL/HUCL). The gradient is formed in the forward
pass (as in :mod:`ncgeom.losses.kernels.blocked`): with sigma_ij = sigmoid(A_i - S_ij / tau) / P_r
(P_r pairs), r_im = softmax over N(i) of alpha S_i and q_im = softmax over N(i) of b S_i,

.. math::

    G_{im} = \\Big(\\sum_j \\sigma_{ij}\\Big) c_{im} - \\frac{\\sigma_{im}}{\\tau}[m \\in P(i)],\\qquad
    dZ = G Z + G^T Z,

c = r / tau (detached weights, the authors' code) or c = alpha r - b q (gradient through the weights).

Numerics: masked log-sum-exp with the exact masked row maximum (no overflow for any b, tau; a row without
negatives gives no NaN); each run's batch is sorted by label so that its positives are one contiguous
band of width n_max (the largest class of the stack's batches): softplus and sigmoid run on [R, B, n_max]
only. Every reduction is along the axes of one run, so run r's values do not depend on the other runs.
Memory: about 4 dense [R, B, B] tensors (S, the tilted exponentials e1 and e0, G): :func:`loss_bytes`.
"""

from __future__ import annotations

import math

import torch

__all__ = ["stacked_weighted", "loss_bytes"]


def loss_bytes(runs: int, batch: int, *, itemsize: int) -> int:
    """Peak bytes of :func:`stacked_weighted` for R runs of B rows: 6 [R, B, B] tensors (4 live + 2 temporaries)."""
    return 6 * int(runs) * int(batch) ** 2 * int(itemsize)


def _masked_lse_terms(sim, coef, neg, finfo):
    """(e = exp(coef S - m) on N(i), 0 elsewhere [R, B, B]; s = row sums [R, B, 1]; lse [R, B, 1])."""
    x = (sim * coef).masked_fill_(~neg, -math.inf)
    m = x.amax(-1, keepdim=True).clamp_min_(finfo.min)  # a row without negatives: finfo.min, not -inf
    e = x.sub_(m).exp_()
    s = e.sum(-1, keepdim=True)
    return e, s, m + torch.log(s.clamp_min(finfo.tiny))


def _pass(z, labels, supervised, b, tau, k, detach_weights, band_width, need_grad):
    """(losses [R], dZ [R, B, d] or None) of the stacked weighted estimator (module docstring)."""
    runs, size, _ = z.shape
    dtype, device = z.dtype, z.device
    finfo = torch.finfo(dtype)
    order = torch.sort(labels, dim=1, stable=True)
    perm, ys = order.indices, order.values
    zs = torch.gather(z, 1, perm[:, :, None].expand_as(z))
    start = torch.searchsorted(ys, ys, right=False)  # each row's class: columns [start, stop) (sorted batch)
    stop = torch.searchsorted(ys, ys, right=True)
    count = stop - start
    cols_all = torch.arange(size, device=device)
    rows = cols_all[None, :, None]
    other = cols_all[None, None, :] != rows  # [1, B, B]
    if bool(supervised.all()):  # one mask for the whole stack when its runs agree (no [R, B, B] select)
        neg = ys[:, :, None] != ys[:, None, :]
    elif not bool(supervised.any()):
        neg = other.expand(runs, size, size)
    else:
        neg = torch.where(supervised[:, None, None], ys[:, :, None] != ys[:, None, :], other)
    num_neg = torch.where(supervised[:, None], size - count, torch.full_like(count, size - 1))
    valid = (count >= 2) & (num_neg >= 1)
    largest = int(count.max())
    if band_width is not None and band_width < largest:
        raise ValueError(f"band_width must be >= the largest class of a batch ({largest}), got {band_width}")
    width = largest if band_width is None else band_width
    band = torch.arange(width, device=device)
    inside = band[None, None, :] < count[..., None]
    cols = torch.where(inside, start[..., None] + band, rows)  # [R, B, n_max]
    pos = inside & (cols != rows) & valid[..., None]
    pairs = pos.sum((1, 2))
    scale = torch.where(pairs > 0, 1.0 / pairs.clamp_min(1).to(dtype), torch.zeros((), dtype=dtype, device=device))

    b_t = b.to(dtype)[:, None, None]
    inv_tau = (1.0 / tau).to(dtype)[:, None, None]
    alpha = b_t + inv_tau
    sim = torch.bmm(zs, zs.mT)
    e1, s1, lse1 = _masked_lse_terms(sim, alpha, neg, finfo)
    hard = bool((b != 0).any())
    e0 = s0 = None
    log_nneg = torch.log(num_neg.clamp_min(1).to(dtype))[..., None]
    if hard:
        e0, s0, lse0 = _masked_lse_terms(sim, b_t, neg, finfo)
    else:
        lse0 = log_nneg
    logk = log_nneg if k is None else math.log(k)
    offset = logk + lse1 - lse0  # A_i [R, B, 1]
    u = offset - torch.gather(sim, 2, cols) * inv_tau  # [R, B, n_max]
    softplus_threshold = -math.log(finfo.eps)  # softplus(u) = u beyond it, to working precision
    values = torch.nn.functional.softplus(u, threshold=softplus_threshold).masked_fill_(~pos, 0.0)
    losses = values.sum((1, 2)) * scale
    if not need_grad:
        return losses, None
    sigma = torch.sigmoid(u).masked_fill_(~pos, 0.0).mul_(scale[:, None, None])
    sigsum = sigma.sum(-1, keepdim=True)
    s1c = s1.clamp_min(finfo.tiny)
    if detach_weights or e0 is None or s0 is None:
        grad = e1.mul_(sigsum * inv_tau / s1c)  # sigsum * r / tau
    else:
        grad = e1.mul_(sigsum * alpha / s1c).sub_(e0.mul_(sigsum * b_t / s0.clamp_min(finfo.tiny)))
    grad.scatter_add_(2, cols, sigma.mul_(-inv_tau))
    dzs = torch.baddbmm(torch.bmm(grad, zs), grad.mT, zs)
    dz = torch.empty_like(dzs).scatter_(1, perm[:, :, None].expand_as(dzs), dzs)
    return losses, dz


class _StackedWeighted(torch.autograd.Function):
    @staticmethod
    def forward(ctx, z, labels, supervised, b, tau, k, detach_weights, band_width):
        losses, dz = _pass(z, labels, supervised, b, tau, k, detach_weights, band_width, ctx.needs_input_grad[0])
        ctx.save_for_backward(dz if dz is not None else torch.zeros_like(z))
        return losses

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_output):
        (dz,) = ctx.saved_tensors
        return dz * grad_output[:, None, None], None, None, None, None, None, None, None


def stacked_weighted(z: torch.Tensor, labels: torch.Tensor, *, supervised: torch.Tensor, b: torch.Tensor,
                     tau: torch.Tensor, k: int | None, detach_weights: bool = True,
                     band_width: int | None = None) -> torch.Tensor:
    """Per-run mean weighted-estimator losses [R] of a stack of batches (module docstring).

    Parameters
    ----------
    z : Tensor [R, B, d]
        Normalized embeddings of each run's batch (float32 or float64).
    labels : Tensor [R, B] (long)
        Each run's labels (class labels, or instance ids for noise positives).
    supervised : Tensor [R] (bool)
        N(i) = other classes (SCL, HSCL) or all m != i (UCL, HUCL).
    b, tau : Tensor [R] (float64)
        Effective tilt (:func:`ncgeom.vocabulary.effective_beta`) and temperature of each run.
    k : int or None
        Number of negatives (None: k = |N(i)|, "batch").
    detach_weights : bool
        No gradient through the tilt weights (the authors' code).
    band_width : int or None
        Width of the positive band, >= the largest class of any batch (None: that largest class). Give a
        bound that does not depend on the other runs (the engine passes the class-balanced count) and
        run r's values and gradient do not depend on its stack-mates, bit for bit.

    Returns
    -------
    Tensor [R]
        Run r's loss, 0 (attached to the graph) for a batch without pairs. The gradient of
        ``losses.sum()`` with respect to z[r] is the gradient of run r's loss alone.
    """
    if z.ndim != 3 or labels.shape != z.shape[:2]:
        raise ValueError(f"z must be [R, B, d] and labels [R, B], got {tuple(z.shape)} and {tuple(labels.shape)}")
    return _StackedWeighted.apply(z, labels, supervised, b, tau, k, detach_weights, band_width)
