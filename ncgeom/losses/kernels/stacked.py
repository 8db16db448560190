"""The weighted batch estimator on a stack of R independent batches (docs/theory.md, section 7): the stacked kernel.

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

Numerics (those of the blocked kernel). Each run's batch is sorted by label, so that the same-class
columns of a row are one band of width n_max (the positives, and for SCL/HSCL the excluded columns): N(i)
is applied by one scatter of -inf into that band (the diagonal for UCL/HUCL), and softplus and sigmoid run
on [R, B, n_max] only (no [R, B, B] mask). Log-sum-exp uses the shift M_i = alpha ||z_i|| max_m ||z_m||
>= max_m alpha S_im, known before the matmul, so one matmul gives x = log2(e) (alpha S - M) <= 0, and one
exp2 pass each (exp2 costs about half of exp on the CPU) gives the sum and the softmax weights of alpha S
and of b S = (b / alpha) (alpha S); rows whose sum falls below tiny B^2 / eps (negatives far below the
shift: large alpha, or z off the sphere) are recomputed with the exact masked maximum, so the result keeps
full relative precision. dZ^T = Z^T G^T + Z^T G (d the rows of the products: the fast layout of a
batched matmul with small d).

Tiles: the work goes in [g, rows, B'] tiles of a few times :data:`TILE_ENTRIES` entries (a few in the CPU's
L2 cache): for B'^2 <= TILE_ENTRIES, groups of g = GROUP_TILES x TILE_ENTRIES // B'^2 whole runs; beyond, one
run at a time in blocks of rows, a multiple of :data:`LANES` (dZ accumulated block by block: memory
O(TILE_ENTRIES) for any B). The tile x and its tilted copy are written into per-thread buffers kept between
calls (:func:`_scratch`).

Independence. Every reduction is along the axes of one run and the row blocks depend on B only. The
elementwise transcendental functions (exp2, sigmoid, softplus, log) are the one trap: torch evaluates a
contiguous tensor in SIMD chunks of up to :data:`LANES` elements and its last n mod (chunk) elements with
the scalar function, whose last bit can differ (measured: exp2 and sigmoid of float32 on AVX2). So the
batch is padded to B' = a multiple of :data:`LANES` (zero rows that carry no pair, and columns outside
every N(i)), and every per-run slice of every tensor these functions see holds a multiple of LANES
elements: no element of a run ever falls in a scalar tail, whatever the stack. With a ``band_width`` that
does not depend on the stack-mates, run r's values and gradient then do not depend on them (nor on R), bit
for bit, in float32 and float64 (tests/test_stacked_loss.py, tests/test_stacked.py). Memory:
:func:`loss_bytes`.
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from typing import Any, NamedTuple

import torch

from ncgeom.ranges import require_beta, require_tau

__all__ = ["TILE_ENTRIES", "GROUP_TILES", "LANES", "stacked_weighted", "loss_bytes"]

#: Entries of the row blocks of one run when B'^2 exceeds it (1 MiB in float32; measured fastest on a 2-core
#: CPU with 1 MiB of L2 per core, benchmarks/bench_stacked.py). It sets where dZ is summed block by block, so
#: it fixes the rounding of every B' > 512: changing it changes stored results.
TILE_ENTRIES = 1 << 18
#: Tiles of whole runs hold GROUP_TILES x TILE_ENTRIES entries (g = that // B'^2 runs, at least one): pairs of
#: runs at B = 512 ran 6-10% faster than single runs once the tiles were reused (2026-12-01, C = 50 and 100);
#: the grouping never changes a run's numbers (module docstring, "Independence").
GROUP_TILES = 2
#: The batch is padded to a multiple of LANES rows (module docstring, "Independence"): twice the widest SIMD
#: vector torch's CPU kernels use (AVX-512: 16 float32), the chunk its vectorized loops step by.
LANES = 32

_LOG2E = 1.0 / math.log(2.0)
_LN2 = math.log(2.0)
_CACHE_SIZE = 8  # per-run coefficients kept (a stack reuses one set at every step)
_cache: OrderedDict[tuple[Any, ...], Any] = OrderedDict()


def padded_size(batch: int) -> int:
    """B' = B rounded up to a multiple of :data:`LANES` (module docstring, "Independence")."""
    return -(-int(batch) // LANES) * LANES


def _tiling(runs: int, padded: int) -> tuple[int, int]:
    """(rows per tile, runs per group) for a padded batch B': groups of whole runs (:data:`GROUP_TILES`) while
    B'^2 fits :data:`TILE_ENTRIES`, else blocks of rows (a multiple of :data:`LANES`, at least LANES) of one run."""
    rows = min(padded, max(LANES, TILE_ENTRIES // padded // LANES * LANES))
    group = max(1, min(runs, GROUP_TILES * TILE_ENTRIES // (padded * padded))) if rows == padded else 1
    return rows, group


def loss_bytes(runs: int, batch: int, *, itemsize: int) -> int:
    """Peak bytes of :func:`stacked_weighted` beyond its inputs and outputs: 3 tiles (:func:`_tiling`).

    (The tile's x, its tilted copy e0 and a temporary; the [R, B', n_max] band and [R, B', d] copies of z are
    of the order of the inputs.)
    """
    padded = padded_size(max(int(batch), 1))
    rows, group = _tiling(int(runs), padded)
    return 3 * group * rows * padded * int(itemsize)


def _cached(key: tuple[Any, ...], build):
    """``build()``, memoized under ``key`` (least recently used of :data:`_CACHE_SIZE` entries dropped)."""
    value = _cache.get(key)
    if value is None:
        value = build()
        _keep(key, value)
    else:
        _cache.move_to_end(key)
    return value


def _keep(key: tuple[Any, ...], value) -> None:
    """Store ``value`` under ``key`` as the most recently used entry (the least recently used dropped)."""
    _cache[key] = value
    _cache.move_to_end(key)
    if len(_cache) > _CACHE_SIZE:
        _cache.popitem(last=False)


_scratch_buffers = threading.local()  # per thread: two stacks may be trained by two threads at once


def _scratch(slot: int, shape: tuple[int, ...], dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """An uninitialized tensor of ``shape`` kept between calls (one buffer per slot, dtype and device, grown
    as needed): the [g, rows, B'] tiles. Allocating them anew at every tile made glibc return the memory to
    the system and fault it back in (about 1,200 page faults per step at R = 60, B = 128)."""
    buffers = getattr(_scratch_buffers, "buffers", None)
    if buffers is None:
        buffers = _scratch_buffers.buffers = {}
    key = (slot, dtype, str(device))
    numel = math.prod(shape)
    buffer = buffers.get(key)
    if buffer is None or buffer.numel() < numel:
        buffer = buffers[key] = torch.empty(numel, dtype=dtype, device=device)
    return buffer[:numel].view(shape)


class _Band(NamedTuple):
    """The pair structure of a stack of label-sorted batches, [R, B, n_max] per run."""

    cols: torch.Tensor  # the columns of row i's class band (row i itself past the class's end)
    excluded: torch.Tensor  # columns outside N(i): the class band (SCL/HSCL) or i (UCL/HUCL)
    blank: torch.Tensor  # -inf, the values scattered at ``excluded`` (a tensor: scatter_ of a scalar is 4x slower)
    weight: torch.Tensor  # 1 / P_r on the pairs (i, j), j in P(i), of valid rows; 0 elsewhere
    valid: torch.Tensor  # [R, B] bool: P(i) and N(i) non-empty
    log_nneg: torch.Tensor  # [R, B] log |N(i)|
    logk: torch.Tensor  # [R, B] log k (k = |N(i)| for "batch")
    ones: torch.Tensor  # [R, B, 1] the column of ones of the shifted matmul


def _band(ys: torch.Tensor, supervised: torch.Tensor, band_width: int | None, k: int | None,
          dtype: torch.dtype, padded: int) -> _Band:
    """The band of ``ys`` [R, B] (sorted labels), padded to ``padded`` rows that carry no pair."""
    runs, size = ys.shape
    device = ys.device
    if padded > size:  # padding rows: a class of their own that is never valid (weight 0)
        ys = torch.cat([ys, torch.full((runs, padded - size), int(ys.max()) + 1, device=device)], 1)
    real = torch.arange(padded, device=device) < size
    start = torch.searchsorted(ys, ys, right=False)  # each row's class: columns [start, start + count)
    count = torch.where(real, torch.searchsorted(ys, ys, right=True) - start, 1)  # a padding row: itself alone
    largest = int(count.max())
    if band_width is not None and band_width < largest:
        raise ValueError(f"band_width must be >= the largest class of a batch ({largest}), got {band_width}")
    band = torch.arange(largest if band_width is None else band_width, device=device)
    rows = torch.arange(padded, device=device)
    cols = torch.where(band < count[..., None], start[..., None] + band, rows[:, None])
    num_neg = torch.where(supervised[:, None], size - count, torch.full_like(count, size - 1))
    num_neg = torch.where(real, num_neg, 1)
    valid = (count >= 2) & (num_neg >= 1) & real
    # the pairs of a valid row i are its class band but i itself (band offset i - start): count - 1 of them
    pairs = ((count - 1) * valid).sum(1)
    scale = torch.where(pairs > 0, 1.0 / pairs.clamp_min(1).to(dtype), torch.zeros((), dtype=dtype, device=device))
    weight = (band < torch.where(valid, count, 0)[..., None]).to(dtype).mul_(scale[:, None, None])
    weight.scatter_(2, (rows - start).clamp_(0, band.numel() - 1)[..., None], 0.0)  # not (i, i); rows left invalid
    log_nneg = torch.log(num_neg.clamp_min(1).to(dtype))
    return _Band(
        cols=cols,
        excluded=cols if bool(supervised.all()) else torch.where(supervised[:, None, None], cols, rows[:, None]),
        blank=_cached(("blank", cols.shape, dtype, str(device)),
                      lambda: torch.full(cols.shape, -math.inf, dtype=dtype, device=device)),
        weight=weight,
        valid=valid,
        log_nneg=log_nneg,
        logk=log_nneg if k is None else torch.full_like(log_nneg, math.log(k)),
        ones=torch.ones(runs, padded, 1, dtype=dtype, device=device),
    )


class _Coefficients(NamedTuple):
    """Per-run scalars as [R, 1] (or [R, 1, 1]) tensors of the working dtype (cached)."""

    b: torch.Tensor
    inv_tau: torch.Tensor
    alpha: torch.Tensor
    tilted: torch.Tensor  # b > 0
    rows: torch.Tensor  # [R, 1, 1] log2(e) alpha: the scale of the matmul's rows
    ratio: torch.Tensor  # [R, 1, 1] b / alpha (1 for b = 0: that run's e0 is never used)
    to_sim: torch.Tensor  # [R, 1, 1] -ln(2) / (alpha tau): u = offset + x_ij to_sim
    neg_inv_tau: torch.Tensor  # [R, 1, 1] -1 / tau
    hard: tuple[bool, ...]  # b != 0, per run


def _coefficients(b: torch.Tensor, tau: torch.Tensor, dtype: torch.dtype, device: torch.device) -> _Coefficients:
    b2 = b.to(dtype=dtype, device=device)[:, None]
    inv_tau = (1.0 / tau).to(dtype=dtype, device=device)[:, None]
    alpha = b2 + inv_tau
    tilted = b2 > 0
    return _Coefficients(
        b=b2, inv_tau=inv_tau, alpha=alpha, tilted=tilted, rows=(alpha * _LOG2E)[..., None],
        ratio=torch.where(tilted, b2 / alpha, 1.0)[..., None], to_sim=(inv_tau / alpha * -_LN2)[..., None],
        neg_inv_tau=-inv_tau[..., None], hard=tuple(bool(v != 0) for v in b.tolist()),
    )


def _rows_of(t: NamedTuple, r0: int, r1: int):
    """The runs r0..r1-1 of a :class:`_Band` or :class:`_Coefficients`."""
    return type(t)(*(f[r0:r1] for f in t))


def _exact_rows(sim, idx, excluded, real, coefs, tiles, sums, shifts, finfo) -> None:
    """Recompute rows idx = (run, row of the tile) of S, ``sim`` [n, B'], with the exact masked maximum as shift
    (the first ``real`` columns are the batch, the rest padding)."""
    r, i = idx
    keep = torch.ones_like(sim, dtype=torch.bool).scatter_(1, excluded[r, i], False)
    keep[:, real:] = False
    for coef, tile, total, shift in zip(coefs, tiles, sums, shifts, strict=True):
        scaled = (sim * coef[r]).masked_fill_(~keep, finfo.min)
        m = scaled.amax(1)
        rows = (scaled - m[:, None]).exp_().masked_fill_(~keep, 0.0)
        tile[r, i] = rows
        total[r, i] = rows.sum(1)
        shift[r, i] = m


def _tile_pass(zs, bound, rows_aug, cols_aug, band: _Band, co: _Coefficients, i0: int, i1: int, detach: bool,
               dzt: torch.Tensor | None, real: int) -> torch.Tensor:
    """Loss sums [g] of the rows i0..i1-1 of a group of g runs; adds their part of dZ^T to ``dzt`` [g, d, B']
    (the first ``real`` rows and columns are the batch, the rest padding)."""
    finfo = torch.finfo(zs.dtype)
    hard = any(co.hard)
    cols, excluded, weight = band.cols[:, i0:i1], band.excluded[:, i0:i1], band.weight[:, i0:i1]
    bound = bound[:, i0:i1]
    shape = (cols_aug.shape[0], i1 - i0, cols_aug.shape[2])  # the tile [g, rows, B'] of x = log2(e) alpha (S - bound) <= 0
    x = torch.bmm(rows_aug[:, i0:i1], cols_aug, out=_scratch(0, shape, zs.dtype, zs.device))
    x_pos = torch.gather(x, 2, cols)
    x.scatter_(2, excluded, band.blank[:, i0:i1])  # exp2 gives 0 outside N(i)
    x[:, :, real:] = -math.inf  # and 0 at the padding columns
    # exp(b S_im - b bound_i)
    e0 = torch.mul(x, co.ratio, out=_scratch(1, shape, zs.dtype, zs.device)).exp2_() if hard else None
    e1 = x.exp2_()  # exp(alpha S_im - alpha bound_i)
    s1 = e1.sum(2)
    s0 = e0.sum(2) if e0 is not None else None
    threshold = finfo.tiny * float(real) ** 2 / finfo.eps
    low = (s1 if s0 is None else torch.minimum(s1, s0)) < threshold
    low &= band.valid[:, i0:i1]
    shift1 = co.alpha * bound
    shift0 = co.b * bound
    if bool(low.any()):  # exact masked maximum for the rows whose sum underflows
        r, i = torch.nonzero(low, as_tuple=True)
        idx = (r, i)
        sim = torch.bmm(zs[r, i + i0][:, None, :], zs[r].mT)[:, 0]  # [n, B']
        if e0 is not None and s0 is not None:
            _exact_rows(sim, idx, excluded, real, (co.alpha, co.b), (e1, e0), (s1, s0), (shift1, shift0), finfo)
        else:
            _exact_rows(sim, idx, excluded, real, (co.alpha,), (e1,), (s1,), (shift1,), finfo)
    s1c = s1.clamp_min(finfo.tiny)
    lse1 = shift1 + torch.log(s1c)
    s0c = None
    lse0 = band.log_nneg[:, i0:i1]
    if s0 is not None:
        s0c = s0.clamp_min(finfo.tiny)
        lse0 = torch.where(co.tilted, shift0 + torch.log(s0c), lse0)
    # u_ij = A_i - S_ij / tau with S_ij = bound_i + ln(2) x_ij / alpha (the matmul's shift, not a fallback's)
    offset = band.logk[:, i0:i1] + lse1 - lse0 - bound * co.inv_tau
    u = torch.addcmul(offset[..., None], x_pos, co.to_sim)
    softplus_threshold = -math.log(finfo.eps)  # softplus(u) = u beyond it, to working precision
    losses = torch.nn.functional.softplus(u, threshold=softplus_threshold).mul_(weight).sum((1, 2))
    if dzt is None:
        return losses
    sigma = torch.sigmoid(u).mul_(weight)  # sigma_ij / P_r on the pairs, 0 elsewhere
    sigsum = sigma.sum(2)
    if detach or e0 is None or s0c is None:
        grad = e1.mul_((sigsum * co.inv_tau / s1c)[..., None])  # sigsum * r / tau
    else:  # sigsum * (alpha r - b q)
        grad = e1.mul_((sigsum * co.alpha / s1c)[..., None]).addcmul_(e0, (sigsum * co.b / s0c)[..., None], value=-1.0)
    grad.scatter_add_(2, cols, sigma.mul_(co.neg_inv_tau))
    zt = cols_aug[:, :-1]  # Z^T [g, d, B]
    dzt[:, :, i0:i1] += torch.bmm(zt, grad.mT)  # (G_I Z)^T
    dzt.baddbmm_(zt[:, :, i0:i1], grad)  # (G_I^T Z_I)^T
    return losses


def _group_pass(zs: torch.Tensor, band: _Band, co: _Coefficients, rows_per_tile: int, detach: bool,
                need_grad: bool, real: int):
    """(losses [g], dZ^T [g, d, B'] of the sorted, padded rows, or None) of a group of g runs (module docstring)."""
    norms = torch.linalg.vector_norm(zs, dim=2)
    bound = norms * norms.amax(1, keepdim=True)  # [g, B] >= S_im: the shift is M_i = alpha bound_i
    # x = log2(e) alpha (S - bound) <= 0 from ONE matmul: rows log2(e) alpha [z_i, -bound_i], columns [z_m, 1]
    rows_aug = torch.cat([zs, -bound[..., None]], 2).mul_(co.rows)
    cols_aug = torch.cat([zs, band.ones], 2).mT.contiguous()  # [g, d + 1, B]
    size = zs.shape[1]
    dzt = torch.zeros_like(cols_aug[:, :-1]) if need_grad else None
    parts = [_tile_pass(zs, bound, rows_aug, cols_aug, band, co, i0, min(i0 + rows_per_tile, size), detach, dzt,
                        real) for i0 in range(0, size, rows_per_tile)]
    losses = parts[0]
    for p in parts[1:]:
        losses = losses + p
    return losses, dzt


def _pass(z, labels, supervised, b, tau, k, detach_weights, band_width, need_grad):
    """(losses [R], dZ [R, B, d] or None) of the stacked weighted estimator (module docstring)."""
    runs, size, _ = z.shape
    dtype, device = z.dtype, z.device
    # labels already in order (the engine's batches of table rows): the stable sort below is the identity
    in_order = size < 2 or bool((labels[:, 1:] >= labels[:, :-1]).all())
    if in_order:
        ys, index, zs = labels, None, z
    else:
        order = torch.sort(labels, dim=1, stable=True)
        ys = order.values
        index = order.indices[:, :, None].expand_as(z)
        zs = torch.gather(z, 1, index)
    padded = padded_size(size)
    band, band_views = _band_of(ys, supervised, band_width, k, dtype, padded)
    co, co_views = _cached(("coefficients", tuple(b.tolist()), tuple(tau.tolist()), dtype, str(device)),
                           lambda: (_coefficients(b, tau, dtype, device), {}))
    if padded > size:  # zero rows: no pair, and the padding columns are cut from every N(i)
        zs = torch.cat([zs, zs.new_zeros(runs, padded - size, zs.shape[2])], 1)
    rows, group = _tiling(runs, padded)
    parts = [_group_pass(zs[r0:r0 + group], _view(band_views, band, r0, r0 + group), _view(co_views, co, r0, r0 + group),
                         rows, detach_weights, need_grad, size) for r0 in range(0, runs, group)]
    losses = torch.cat([p[0] for p in parts]) if len(parts) > 1 else parts[0][0]
    if not need_grad:
        return losses, None
    dzt = torch.cat([p[1] for p in parts]) if len(parts) > 1 else parts[0][1]
    if index is None:
        return losses, dzt[:, :, :size].mT.contiguous()
    return losses, torch.empty_like(z).scatter_(1, index, dzt[:, :, :size].mT)


def _view(views: dict, whole, r0: int, r1: int):
    """The runs r0..r1-1 of ``whole`` (a :class:`_Band` or :class:`_Coefficients`), kept in ``views``."""
    view = views.get((r0, r1))
    if view is None:
        view = views[(r0, r1)] = _rows_of(whole, r0, r1)
    return view


def _band_of(ys: torch.Tensor, supervised: torch.Tensor, band_width: int | None, k: int | None,
             dtype: torch.dtype, padded: int) -> tuple[_Band, dict]:
    """(:func:`_band` of ``ys``, its dict of per-group views), the last one kept: class-balanced batches have
    the same sorted labels at every step, so a stack builds its band once (checked by value, every call)."""
    key = ("band", tuple(ys.shape), tuple(supervised.tolist()), band_width, k, dtype, str(ys.device), padded)
    kept = _cache.get(key)
    if kept is not None and torch.equal(kept[0], ys):
        _cache.move_to_end(key)
        return kept[1], kept[2]
    band = _band(ys, supervised, band_width, k, dtype, padded)
    views: dict = {}
    _keep(key, (ys.clone(), band, views))
    return band, views


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


def stacked_weighted(z: torch.Tensor, labels: torch.Tensor, *, supervised: torch.Tensor, beta: torch.Tensor,
                     tau: torch.Tensor, num_negatives: int | None, detach_weights: bool = True,
                     band_width: int | None = None) -> torch.Tensor:
    """Per-run mean weighted-estimator losses [R] of a stack of batches (module docstring).

    The stacked form of :func:`ncgeom.losses.batch_loss` (``estimator="weighted"``, ``convention="theory"``,
    ``reduction="mean"``): run r's value is ``batch_loss(z[r], labels[r], setting_r, beta=beta[r], tau=tau[r],
    num_negatives=num_negatives)`` with the setting's effective hardness, to a few B eps (another kernel:
    docs/theory.md, section 7, "Backends and numerics").

    Parameters
    ----------
    z : Tensor [R, B, d]
        Normalized embeddings of each run's batch (float32 or float64).
    labels : Tensor [R, B] (long)
        Each run's labels (class labels, or instance ids for noise positives).
    supervised : Tensor [R] (bool)
        N(i) = other classes (SCL, HSCL) or all m != i (UCL, HUCL).
    beta, tau : Tensor [R] (float64)
        Effective hardness b (:func:`ncgeom.vocabulary.effective_beta`: 0 for SCL, UCL) and temperature tau of
        each run, in the validated ranges of :mod:`ncgeom.ranges` (b in [0, 1e4], tau >= 1e-3; ValueError naming
        the range otherwise), as ``batch_loss`` takes them.
    num_negatives : int or None
        Number of negatives k (None: k = |N(i)|, batch_loss's "batch").
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
    if beta.numel():  # the extremes (NaN propagates to both) against the one table of ranges, as batch_loss does
        for value in (float(beta.min()), float(beta.max())):
            require_beta(value)
    if tau.numel():
        for value in (float(tau.min()), float(tau.max())):
            require_tau(value)
    return _StackedWeighted.apply(z, labels, supervised, beta, tau, num_negatives, detach_weights, band_width)
