"""Triton backend for CUDA (docs/theory.md section 7), flash-attention style: never forms B x B.

Forward: kernel 1 sweeps column tiles of S = Z Z^T for a block of anchor rows with an online masked
log-sum-exp of (b + 1/tau) S and b S over N(i) (one pass, O(B) output); kernel 2 sweeps them again for the
pairs: l_ij = softplus(A_i - S_ij/tau) and sigma_ij = sigmoid(A_i - S_ij/tau), summed per row. Backward
(section 7, dZ = (G + G^T) Z, G_im = g (sum_j sigma_ij) c_im - g sigma_im / tau [m in P(i)], c = r / tau
or (b + 1/tau) r - b q): kernel 3 accumulates G_I Z over column tiles for each row block, kernel 4
accumulates G_J^T Z over row tiles for each column block (recomputing the S tiles; no atomics, so the
result is deterministic). Extra memory O(B d). Implements the weighted estimator with reductions "mean"
and "sum", both settings families, detached or differentiable weights, float32 (IEEE dot products, no
TF32) and float64 (where the device supports float64 dot products), d <= 256.

This module imports triton at its top and is itself imported only when the triton backend runs
(ncgeom.losses.batch imports it inside the call): without triton the package still works and
``backend="auto"`` never selects this path. On the CPU, TRITON_INTERPRET=1 runs the kernels in Triton's
interpreter (slow: tests use tiny sizes).
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from ncgeom.losses.kernels.structure import LossSpec, PairStructure

__all__ = ["triton_weighted", "MAX_DIM"]

MAX_DIM = 256


@triton.jit
def _load_rows(Z, Y, rows, dcols, B, D, stride):
    rmask = rows < B
    z = tl.load(Z + rows[:, None] * stride + dcols[None, :], mask=rmask[:, None] & (dcols[None, :] < D),
                other=0.0)
    y = tl.load(Y + rows, mask=rmask, other=-1)
    return z, y, rmask

@triton.jit
def _masks(yi, yj, rows, cols, rmask, cmask, vi, SUPERVISED: tl.constexpr):
    both = rmask[:, None] & cmask[None, :]
    same = yi[:, None] == yj[None, :]
    diag = rows[:, None] == cols[None, :]
    if SUPERVISED:
        neg = (~same) & both
    else:
        neg = (~diag) & both
    pos = same & (~diag) & both & (vi[:, None] != 0)
    return neg, pos

@triton.jit
def _tile_grad(s, neg, pos, ai, lse1, lse0, w, g, alpha, b, inv_tau, DETACH: tl.constexpr,
               HAS_TILT: tl.constexpr):
    r = tl.where(neg, tl.exp(alpha * s - lse1[:, None]), 0.0)
    if DETACH or not HAS_TILT:
        c = r * inv_tau
    else:
        q = tl.where(neg, tl.exp(b * s - lse0[:, None]), 0.0)
        c = alpha * r - b * q
    u = ai[:, None] - s * inv_tau
    sig = tl.where(pos, tl.sigmoid(u), 0.0)
    return w[:, None] * c - (g * inv_tau) * sig

@triton.jit
def row_stats(Z, Y, LSE1, LSE0, B, D, stride, alpha, b, SUPERVISED: tl.constexpr, HAS_TILT: tl.constexpr,
              BM: tl.constexpr, BN: tl.constexpr, BD: tl.constexpr):
    rows = tl.program_id(0) * BM + tl.arange(0, BM)
    dcols = tl.arange(0, BD)
    zi, yi, rmask = _load_rows(Z, Y, rows, dcols, B, D, stride)
    vi = tl.full([BM], 1, tl.int32)
    m1 = tl.full([BM], float("-inf"), Z.dtype.element_ty)
    l1 = tl.zeros([BM], Z.dtype.element_ty)
    m0 = tl.full([BM], float("-inf"), Z.dtype.element_ty)
    l0 = tl.zeros([BM], Z.dtype.element_ty)
    start = 0
    while start < B:  # (a while loop: Triton 3.6's interpreter fails on range(0, B, ...) with NumPy 2)
        cols = start + tl.arange(0, BN)
        zj, yj, cmask = _load_rows(Z, Y, cols, dcols, B, D, stride)
        s = tl.dot(zi, tl.trans(zj), input_precision="ieee")
        neg, pos = _masks(yi, yj, rows, cols, rmask, cmask, vi, SUPERVISED)
        x1 = tl.where(neg, alpha * s, float("-inf"))
        m1n = tl.maximum(m1, tl.max(x1, 1))
        m1s = tl.where(m1n == float("-inf"), 0.0, m1n)
        l1 = l1 * tl.exp(m1 - m1s) + tl.sum(tl.exp(x1 - m1s[:, None]), 1)
        m1 = m1n
        if HAS_TILT:
            x0 = tl.where(neg, b * s, float("-inf"))
            m0n = tl.maximum(m0, tl.max(x0, 1))
            m0s = tl.where(m0n == float("-inf"), 0.0, m0n)
            l0 = l0 * tl.exp(m0 - m0s) + tl.sum(tl.exp(x0 - m0s[:, None]), 1)
            m0 = m0n
        start += BN
    tl.store(LSE1 + rows, tl.where(l1 > 0, m1 + tl.log(tl.where(l1 > 0, l1, 1.0)), 0.0), mask=rmask)
    if HAS_TILT:
        tl.store(LSE0 + rows, tl.where(l0 > 0, m0 + tl.log(tl.where(l0 > 0, l0, 1.0)), 0.0), mask=rmask)

@triton.jit
def pair_pass(Z, Y, A, VALID, LOSS, SIGSUM, B, D, stride, inv_tau, SUPERVISED: tl.constexpr,
              BM: tl.constexpr, BN: tl.constexpr, BD: tl.constexpr):
    rows = tl.program_id(0) * BM + tl.arange(0, BM)
    dcols = tl.arange(0, BD)
    zi, yi, rmask = _load_rows(Z, Y, rows, dcols, B, D, stride)
    ai = tl.load(A + rows, mask=rmask, other=0.0)
    vi = tl.load(VALID + rows, mask=rmask, other=0)
    acc_l = tl.zeros([BM], Z.dtype.element_ty)
    acc_s = tl.zeros([BM], Z.dtype.element_ty)
    start = 0
    while start < B:  # (a while loop: Triton 3.6's interpreter fails on range(0, B, ...) with NumPy 2)
        cols = start + tl.arange(0, BN)
        zj, yj, cmask = _load_rows(Z, Y, cols, dcols, B, D, stride)
        s = tl.dot(zi, tl.trans(zj), input_precision="ieee")
        neg, pos = _masks(yi, yj, rows, cols, rmask, cmask, vi, SUPERVISED)
        u = ai[:, None] - s * inv_tau
        softplus = tl.maximum(u, 0.0) + tl.log(1.0 + tl.exp(-tl.abs(u)))
        acc_l += tl.sum(tl.where(pos, softplus, 0.0), 1)
        acc_s += tl.sum(tl.where(pos, tl.sigmoid(u), 0.0), 1)
        start += BN
    tl.store(LOSS + rows, acc_l, mask=rmask)
    tl.store(SIGSUM + rows, acc_s, mask=rmask)

@triton.jit
def grad_rows(Z, Y, A, VALID, LSE1, LSE0, W, DZ, B, D, stride, g, alpha, b, inv_tau,
              SUPERVISED: tl.constexpr, DETACH: tl.constexpr, HAS_TILT: tl.constexpr,
              BM: tl.constexpr, BN: tl.constexpr, BD: tl.constexpr):
    rows = tl.program_id(0) * BM + tl.arange(0, BM)
    dcols = tl.arange(0, BD)
    zi, yi, rmask = _load_rows(Z, Y, rows, dcols, B, D, stride)
    ai = tl.load(A + rows, mask=rmask, other=0.0)
    vi = tl.load(VALID + rows, mask=rmask, other=0)
    lse1 = tl.load(LSE1 + rows, mask=rmask, other=0.0)
    lse0 = tl.load(LSE0 + rows, mask=rmask, other=0.0)
    w = tl.load(W + rows, mask=rmask, other=0.0)
    acc = tl.zeros([BM, BD], Z.dtype.element_ty)
    start = 0
    while start < B:  # (a while loop: Triton 3.6's interpreter fails on range(0, B, ...) with NumPy 2)
        cols = start + tl.arange(0, BN)
        zj, yj, cmask = _load_rows(Z, Y, cols, dcols, B, D, stride)
        s = tl.dot(zi, tl.trans(zj), input_precision="ieee")
        neg, pos = _masks(yi, yj, rows, cols, rmask, cmask, vi, SUPERVISED)
        grad = _tile_grad(s, neg, pos, ai, lse1, lse0, w, g, alpha, b, inv_tau, DETACH, HAS_TILT)
        acc += tl.dot(grad.to(zj.dtype), zj, input_precision="ieee")
        start += BN
    tl.store(DZ + rows[:, None] * stride + dcols[None, :], acc, mask=rmask[:, None] & (dcols[None, :] < D))

@triton.jit
def grad_cols(Z, Y, A, VALID, LSE1, LSE0, W, DZ, B, D, stride, g, alpha, b, inv_tau,
              SUPERVISED: tl.constexpr, DETACH: tl.constexpr, HAS_TILT: tl.constexpr,
              BM: tl.constexpr, BN: tl.constexpr, BD: tl.constexpr):
    cols = tl.program_id(0) * BN + tl.arange(0, BN)
    dcols = tl.arange(0, BD)
    zj, yj, cmask = _load_rows(Z, Y, cols, dcols, B, D, stride)
    acc = tl.zeros([BN, BD], Z.dtype.element_ty)
    start = 0
    while start < B:  # (a while loop: Triton 3.6's interpreter fails on range(0, B, ...) with NumPy 2)
        rows = start + tl.arange(0, BM)
        zi, yi, rmask = _load_rows(Z, Y, rows, dcols, B, D, stride)
        ai = tl.load(A + rows, mask=rmask, other=0.0)
        vi = tl.load(VALID + rows, mask=rmask, other=0)
        lse1 = tl.load(LSE1 + rows, mask=rmask, other=0.0)
        lse0 = tl.load(LSE0 + rows, mask=rmask, other=0.0)
        w = tl.load(W + rows, mask=rmask, other=0.0)
        s = tl.dot(zi, tl.trans(zj), input_precision="ieee")
        neg, pos = _masks(yi, yj, rows, cols, rmask, cmask, vi, SUPERVISED)
        grad = _tile_grad(s, neg, pos, ai, lse1, lse0, w, g, alpha, b, inv_tau, DETACH, HAS_TILT)
        acc += tl.dot(tl.trans(grad.to(zi.dtype)), zi, input_precision="ieee")
        start += BM
    tl.store(DZ + cols[:, None] * stride + dcols[None, :], acc, mask=cmask[:, None] & (dcols[None, :] < D))




def _row_terms(labels: torch.Tensor, spec: LossSpec, dtype: torch.dtype):
    """Per anchor: log k, log |N(i)|, valid (P(i), N(i) non-empty), and the number of pairs."""
    size = labels.numel()
    _, inverse, counts = torch.unique(labels, return_inverse=True, return_counts=True)
    n_c = counts[inverse]
    num_neg = (size - n_c) if spec.supervised else torch.full_like(n_c, size - 1)
    valid = (n_c >= 2) & (num_neg >= 1)
    log_nneg = torch.log(num_neg.clamp_min(1).to(dtype))
    logk = log_nneg if spec.k is None else torch.full_like(log_nneg, math.log(spec.k))
    num_pairs = int(torch.where(valid, n_c - 1, torch.zeros_like(n_c)).sum())
    return logk, log_nneg, valid.to(torch.int32), num_pairs


class _TritonLoss(torch.autograd.Function):
    @staticmethod
    def forward(ctx, z, labels, spec, block, reduction):
        z = z.contiguous()
        labels = labels.contiguous()
        size, dim = z.shape
        bd = max(16, triton.next_power_of_2(dim))
        logk, log_nneg, valid, num_pairs = _row_terms(labels, spec, z.dtype)
        alpha, has_tilt = spec.b + 1.0 / spec.tau, spec.b != 0.0
        lse1 = torch.empty(size, dtype=z.dtype, device=z.device)
        lse0 = torch.empty(size, dtype=z.dtype, device=z.device) if has_tilt else log_nneg
        grid = (triton.cdiv(size, block),)
        row_stats[grid](z, labels, lse1, lse0, size, dim, z.stride(0), alpha, spec.b, SUPERVISED=spec.supervised,
                        HAS_TILT=has_tilt, BM=block, BN=block, BD=bd)
        offset = (logk + lse1 - lse0).contiguous()
        loss_rows = torch.empty(size, dtype=z.dtype, device=z.device)
        sigsum = torch.empty(size, dtype=z.dtype, device=z.device)
        pair_pass[grid](z, labels, offset, valid, loss_rows, sigsum, size, dim, z.stride(0), 1.0 / spec.tau,
                        SUPERVISED=spec.supervised, BM=block, BN=block, BD=bd)
        scale = 1.0 / num_pairs if reduction == "mean" else 1.0
        ctx.save_for_backward(z, labels, offset, valid, lse1, lse0, sigsum)
        ctx.spec, ctx.block, ctx.scale, ctx.bd = spec, block, scale, bd
        return loss_rows.sum() * scale

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_output):
        z, labels, offset, valid, lse1, lse0, sigsum = ctx.saved_tensors
        spec, block = ctx.spec, ctx.block
        size, dim = z.shape
        g = float(grad_output) * ctx.scale
        weight = (sigsum * g).contiguous()
        alpha, has_tilt = spec.b + 1.0 / spec.tau, spec.b != 0.0
        args = (z, labels, offset, valid, lse1, lse0, weight)
        dz_rows, dz_cols = torch.empty_like(z), torch.empty_like(z)
        grid = (triton.cdiv(size, block),)
        consts = dict(SUPERVISED=spec.supervised, DETACH=spec.detach_weights, HAS_TILT=has_tilt, BM=block, BN=block,
                      BD=ctx.bd)
        grad_rows[grid](*args, dz_rows, size, dim, z.stride(0), g, alpha, spec.b, 1.0 / spec.tau, **consts)
        grad_cols[grid](*args, dz_cols, size, dim, z.stride(0), g, alpha, spec.b, 1.0 / spec.tau, **consts)
        return dz_rows + dz_cols, None, None, None, None


def triton_weighted(z: torch.Tensor, labels: torch.Tensor, spec: LossSpec, structure: PairStructure | None = None, *,
                    block_size: int | None, reduction: str) -> torch.Tensor:
    """Weighted estimator (mean or sum, 0-d) by the Triton kernels. Needs CUDA or TRITON_INTERPRET=1."""
    if reduction not in ("mean", "sum"):
        raise ValueError(f"reduction must be 'mean' or 'sum' for backend='triton', got {reduction!r}")
    if z.shape[1] > MAX_DIM:
        raise ValueError(f"z must have d <= {MAX_DIM} for backend='triton', got d = {z.shape[1]}")
    block = 64 if block_size is None else block_size
    if block < 16 or block & (block - 1):
        raise ValueError(f"block_size must be a power of two >= 16 for backend='triton', got {block}")
    _, _, _, num_pairs = _row_terms(labels, spec, z.dtype)
    if num_pairs == 0:
        return (z * 0).sum()
    return _TritonLoss.apply(z, labels, spec, block, reduction)
