"""Blocked backend: a custom autograd Function over row blocks of anchors (docs/theory.md section 7).

Never forms the B x B similarity matrix: each block of rows I holds S_I = Z_I Z^T [block, B] and at most
two more tensors of that shape, so the extra memory is O(block_size * B + B d) (no per-pair index array
either, except for reduction "none" whose output is per pair). Value (section 7):

.. math:: \\ell_{ij} = \\mathrm{softplus}(A_i - S_{ij}/\\tau),\\quad
          A_i = \\log k + \\mathrm{LSE}_{N(i)}((b + 1/\\tau) S_{i\\cdot}) - \\mathrm{LSE}_{N(i)}(b S_{i\\cdot}).

Gradient (section 7), with g_ij the upstream gradient of pair (i, j), sigma_ij = sigmoid(A_i - S_ij/tau),
r_i = softmax over N(i) of (b + 1/tau) S_i, q_i = softmax over N(i) of b S_i:

.. math::

    G_{im} = \\Big(\\sum_{j \\in P(i)} g_{ij}\\sigma_{ij}\\Big) c_{im} - \\frac{g_{im}\\sigma_{im}}{\\tau}[m \\in P(i)],
    \\qquad dZ = (G + G^T) Z,

with c_im = r_im / tau (detached weights) or c_im = (b + 1/tau) r_im - b q_im (gradient through the
weights), both zero outside N(i). dZ is accumulated block by block: dZ_I += G_I Z and dZ += G_I^T Z_I.

Implementation notes. The batch is sorted by label once, so that the same-class columns of a row form one
contiguous range (positives and, for SCL/HSCL, the excluded columns are a [block, n_max] gather/scatter,
n_max the largest class). Log-sum-exp uses the shift M_i = (b + 1/tau) ||z_i|| max_m ||z_m|| >= max_m
(b + 1/tau) S_im, known before the matmul, so one exp pass gives both the LSE and the softmax r; rows whose
sum falls below tiny * B^2 / eps (the negatives are far below the shift: possible for large b + 1/tau)
are recomputed with the exact masked maximum, so the result keeps full relative precision.
Under the authors' convention (LossSpec.convention) the whole class range is positive (the pair (i, i)
included) and UCL/HUCL exclude no column from N(i); the formulas above hold as written (S_ii then enters
both sums of G_ii).
For reductions "mean" and "sum" the upstream gradient of every pair is the same scalar, so the forward
pass computes the loss and dZ together (three B x B x d matmuls in total: S_I, G_I Z, G_I^T Z_I) and
stores only dZ [B, d]; backward is a scaling. For "none" backward recomputes the blocks with the per-pair
upstream gradients. Double backward is not supported.
"""

from __future__ import annotations

import math

import torch

from ncgeom.losses.kernels.structure import LossSpec
from ncgeom.vocabulary import Convention

__all__ = ["blocked_weighted", "blocked_pass", "ClassLayout", "class_layout"]


class ClassLayout:
    """The batch sorted by label: perm, and per sorted row its class range [start, start + size), |P(i)|,
    |N(i)| and validity under ``convention`` (ncgeom.losses.kernels.structure)."""

    def __init__(self, labels: torch.Tensor, *, supervised: bool, convention: Convention = "theory"):
        spec = LossSpec(supervised=supervised, b=0.0, tau=1.0, k=None, convention=convention)
        size = labels.numel()
        self.perm = torch.sort(labels, stable=True).indices  # stable: original order inside a class
        _, counts = torch.unique_consecutive(labels[self.perm], return_counts=True)
        starts = torch.cumsum(counts, 0) - counts
        self.start = torch.repeat_interleave(starts, counts)  # [B], sorted rows
        self.count = torch.repeat_interleave(counts, counts)
        self.max_count = int(counts.max())
        self.num_pos = self.count if spec.self_positive else self.count - 1
        if supervised:
            self.num_neg = size - self.count
        else:
            self.num_neg = torch.full_like(self.count, size if spec.anchor_negative else size - 1)
        self.valid = (self.num_pos >= 1) & (self.num_neg >= 1)
        self.num_pairs = int(self.num_pos[self.valid].sum())


def class_layout(labels: torch.Tensor, *, supervised: bool, convention: Convention = "theory") -> ClassLayout:
    return ClassLayout(labels, supervised=supervised, convention=convention)


def _canonical_offsets(layout: ClassLayout) -> torch.Tensor:
    """offset[s] = index in canonical (original row-major) order of the first pair of sorted row s."""
    size = layout.perm.numel()
    per_orig = torch.zeros(size, dtype=torch.long, device=layout.perm.device)
    per_orig[layout.perm] = torch.where(layout.valid, layout.num_pos, torch.zeros_like(layout.num_pos))
    first = torch.cumsum(per_orig, 0) - per_orig
    return first[layout.perm]


def blocked_pass(z, labels, spec: LossSpec, layout: ClassLayout, *, block_size: int, pair_grad, keep_values: bool):
    """One sweep over row blocks: (per-pair values [P] canonical order or None, sum of values, dZ or None).

    ``pair_grad``: None (no gradient), a float (the same upstream gradient for every pair) or a [P]
    tensor (per-pair upstream gradients, canonical order).
    """
    size, dtype, device = z.shape[0], z.dtype, z.device
    finfo = torch.finfo(dtype)
    alpha, b, inv_tau = spec.b + 1.0 / spec.tau, spec.b, 1.0 / spec.tau
    threshold = finfo.tiny * float(size) ** 2 / finfo.eps
    zs = z[layout.perm]
    norms = zs.norm(dim=1)
    max_norm = norms.max()
    # x_im = alpha S_im - shift_i from ONE matmul: rows [alpha z_i, -shift_i], columns [z_m, 1]
    cols_aug = torch.cat([zs, torch.ones(size, 1, dtype=dtype, device=device)], 1).T.contiguous()
    shift_all = alpha * norms * max_norm  # >= max_m alpha S_im
    rows_aug = torch.cat([zs * alpha, -shift_all[:, None]], 1)
    logk = (torch.log(layout.num_neg.clamp_min(1).to(dtype)) if spec.k is None
            else torch.full((size,), math.log(spec.k), dtype=dtype, device=device))
    log_nneg = torch.log(layout.num_neg.clamp_min(1).to(dtype))
    canon = _canonical_offsets(layout) if (keep_values or isinstance(pair_grad, torch.Tensor)) else None
    dzs = torch.zeros_like(zs) if pair_grad is not None else None
    values = torch.empty(layout.num_pairs, dtype=dtype, device=device) if keep_values else None
    total = torch.zeros((), dtype=dtype, device=device)
    width = torch.arange(layout.max_count, device=device)
    softplus_threshold = -math.log(finfo.eps)  # softplus(u) = u beyond it, to working precision
    for r0 in range(0, size, block_size):
        r1 = min(r0 + block_size, size)
        valid = layout.valid[r0:r1]
        if not bool(valid.any()):
            continue
        rows = torch.arange(r0, r1, device=device)
        zi = zs[r0:r1]
        shift = shift_all[r0:r1].clone()
        x = rows_aug[r0:r1] @ cols_aug  # alpha S - shift <= 0
        # same-class columns of each row: one contiguous range (sorted batch)
        in_class = width[None, :] < layout.count[r0:r1, None]
        cols = torch.where(in_class, layout.start[r0:r1, None] + width[None, :], rows[:, None])
        pos = in_class & valid[:, None]
        if not spec.self_positive:
            pos &= cols != rows[:, None]
        x_pos = torch.gather(x, 1, cols)  # alpha S_ij - shift_i on the positive band
        # columns outside N(i): the class range (SCL/HSCL), the anchor (UCL/HUCL), none (UCL/HUCL, authors)
        excluded = cols if spec.supervised else (None if spec.anchor_negative else rows[:, None])
        e0 = None
        if b != 0.0:
            e0 = _zero_columns(torch.mul(x, b / alpha).exp_(), excluded)
        e1 = _zero_columns(x.exp_(), excluded)  # exp(alpha S - shift) on N(i), 0 elsewhere
        s1 = e1.sum(1)
        s0 = e0.sum(1) if e0 is not None else None
        low = (s1 < threshold) if s0 is None else ((s1 < threshold) | (s0 < threshold))
        low &= valid
        shift0 = shift * (b / alpha)
        if bool(low.any()):  # exact masked maximum for the rows whose sum underflows
            idx = torch.nonzero(low).reshape(-1)
            sim_rows = zi[idx] @ zs.T
            keep = torch.ones_like(sim_rows, dtype=torch.bool)
            if excluded is not None:
                keep.scatter_(1, excluded[idx], False)
            fallbacks = [(alpha, e1, s1, shift)]
            if e0 is not None and s0 is not None:
                fallbacks.append((b, e0, s0, shift0))
            for coef, tile, sums, sh in fallbacks:
                scaled = (sim_rows * coef).masked_fill_(~keep, finfo.min)
                m = scaled.amax(1)
                tile[idx] = (scaled - m[:, None]).exp_().masked_fill_(~keep, 0.0)
                sums[idx] = tile[idx].sum(1)
                sh[idx] = m
        s1c = s1.clamp_min(finfo.tiny)
        lse1 = shift + torch.log(s1c)
        if s0 is not None:  # the hard (beta != 0) part: s0 is None exactly when e0 is
            s0c = s0.clamp_min(finfo.tiny)
            lse0 = shift0 + torch.log(s0c)
        else:
            lse0 = log_nneg[r0:r1]
        # u_ij = A_i - S_ij / tau with S_ij = (x_ij + shift_i) / alpha (shift_i of the matmul, not of a fallback)
        offset = logk[r0:r1] + lse1 - lse0 - shift_all[r0:r1] / (alpha * spec.tau)
        u = offset[:, None] - x_pos * (inv_tau / alpha)
        vals = torch.nn.functional.softplus(u, threshold=softplus_threshold).masked_fill_(~pos, 0.0)
        total = total + vals.sum()
        index = None
        if canon is not None:
            rank = cols - layout.start[r0:r1, None]
            if not spec.self_positive:  # the anchor's own column is not a pair
                rank = rank - (cols > rows[:, None]).long()
            index = (canon[r0:r1, None] + rank)[pos]
            if values is not None:  # keep_values
                values[index] = vals[pos]
        if dzs is None:  # no gradient requested (pair_grad is None)
            continue
        sigma = torch.sigmoid(u).masked_fill_(~pos, 0.0)
        if isinstance(pair_grad, float):
            sigma.mul_(pair_grad)
        else:
            sigma[pos] *= pair_grad[index]
        sigsum = sigma.sum(1)
        if spec.detach_weights or e0 is None:
            grad = e1.mul_((sigsum * inv_tau / s1c)[:, None])  # sigsum * r / tau
        else:
            grad = e1.mul_((sigsum * alpha / s1c)[:, None]).sub_(e0.mul_((sigsum * b / s0c)[:, None]))
        grad.scatter_add_(1, cols, sigma.mul_(-inv_tau))
        dzs[r0:r1] += grad @ zs
        dzs.addmm_(grad.T, zi)
    dz = None
    if dzs is not None:
        dz = torch.empty_like(dzs)
        dz[layout.perm] = dzs
    return values, total, dz


def _zero_columns(tile: torch.Tensor, columns: torch.Tensor | None) -> torch.Tensor:
    """``tile`` with the entries (r, columns[r, :]) set to 0, in place (unchanged when ``columns`` is None)."""
    return tile if columns is None else tile.scatter_(1, columns, 0.0)


class _BlockedLoss(torch.autograd.Function):
    @staticmethod
    def forward(ctx, z, labels, spec, layout, block_size, reduction):
        needs_grad = ctx.needs_input_grad[0]
        ctx.spec, ctx.layout, ctx.block_size, ctx.reduction = spec, layout, block_size, reduction
        if reduction == "none":
            values, _, _ = blocked_pass(z, labels, spec, layout, block_size=block_size, pair_grad=None,
                                        keep_values=True)
            ctx.save_for_backward(z, labels)
            return values
        scale = 1.0 / layout.num_pairs if reduction == "mean" else 1.0
        _, total, dz = blocked_pass(z, labels, spec, layout, block_size=block_size,
                                    pair_grad=scale if needs_grad else None, keep_values=False)
        ctx.save_for_backward(dz if dz is not None else torch.zeros_like(z))
        return total * scale

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_output):
        if ctx.reduction == "none":
            z, labels = ctx.saved_tensors
            _, _, dz = blocked_pass(z, labels, ctx.spec, ctx.layout, block_size=ctx.block_size,
                                    pair_grad=grad_output.contiguous(), keep_values=False)
            return dz, None, None, None, None, None
        (dz,) = ctx.saved_tensors
        return dz * grad_output, None, None, None, None, None


def blocked_weighted(z: torch.Tensor, labels: torch.Tensor, spec: LossSpec, *, block_size: int,
                     reduction: str) -> torch.Tensor:
    """Weighted estimator by row blocks: the mean or sum (0-d) or the per-pair values [P] (reduction "none").

    A batch without pairs gives a zero attached to the graph of z (an empty [0] tensor for "none").
    """
    layout = class_layout(labels, supervised=spec.supervised, convention=spec.convention)
    if layout.num_pairs == 0:
        return (z * 0).sum() if reduction != "none" else (z.reshape(-1)[:0] * 0)
    return _BlockedLoss.apply(z, labels, spec, layout, block_size, reduction)
