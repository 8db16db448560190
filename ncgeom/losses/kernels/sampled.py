"""Sampled estimator (the authors' code; docs/theory.md section 7).

For each pair (i, j), j in P(i), draw k indices m_1..m_k i.i.d. with replacement from the tilted weights
q_i (q_im proportional to exp(b S_im) on N(i); P(i), N(i) of the spec's convention, ``pair_structure``), then
apply psi_k exactly:

.. math:: \\ell_{ij} = \\psi_k\\big(S_{i m_1} - S_{ij}, \\dots, S_{i m_k} - S_{ij}\\big).

Any :class:`ncgeom.losses.Psi` works (infonce, infonce-mean, triplet, custom). Gradients flow through
the similarities only (sampling is not differentiable). Its expectation over the draws, given the batch,
is E_q[psi_k]; for k = 1 that is sum_m q_im psi(S_im - S_ij), and for the triplet psi (linear in each
term) it is sum_m q_im max(0, S_im - S_ij + margin) for every k.

How the draws are made (no per-pair Python work). All pairs of anchor i draw from the same law q_i, so
one table per anchor serves them all: Walker's alias table over the B columns (q_im = 0 off N(i)), built
for a block of anchors at once by :func:`alias_tables` (the sweep construction, vectorized with prefix
sums and a sorted search). A draw then costs O(1): one uniform u, column c = floor(B u), and
m = c if frac(B u) < threshold[i, c] else alias[i, c]. Each pair (i, j) gets its own k draws, i.i.d.
from q_i, with replacement; the draws of different pairs are independent.

Random stream: pair after pair in canonical order, each pair consumes k_max uniforms of ``generator``
(k_max = k, or max_i |N(i)| for k = "batch", of which anchor i uses the first |N(i)|), in the dtype of z
(float32: 24-bit uniforms, the resolution of ``torch.multinomial`` in float32; float64: 53-bit). The
draws are therefore reproducible from the generator state and the batch alone; the block size and the
chunking do not change them. (Before 2026-11 the draws came from one ``torch.multinomial`` call per
anchor block: same law, a different stream.)

Memory: the similarities of one anchor block, S_I = Z_I Z^T [block, B] (with autograd), its two alias
tables, and the draws of at most ``max_draws`` (pairs x k) at a time; the graph keeps the drawn indices
(P k longs) for the backward pass, and the returned negatives hold P k longs when requested.
"""

from __future__ import annotations

import math

import torch

from ncgeom.losses.kernels.structure import LossSpec, PairStructure
from ncgeom.losses.psi import Psi

__all__ = ["sampled_values", "alias_tables", "DEFAULT_MAX_DRAWS"]

# draws (pairs x k) handled at once: the [pairs, k] temporaries of a chunk (a few MiB) stay near the cache
DEFAULT_MAX_DRAWS = 1 << 18


def alias_tables(weights: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Walker's alias tables of the rows of ``weights`` (each row a law over its n columns, up to scale).

    A draw from row r: c uniform in {0..n-1}, then c with probability ``threshold[r, c]``, else
    ``alias[r, c]``. The law of the draw is exactly the row's normalized weights:

    .. math:: P(m) = \\frac1n\\Big(\\theta_{rm} + \\sum_{c:\\ a_{rc} = m} (1 - \\theta_{rc})\\Big) = \\frac{w_{rm}}{\\sum_{m'} w_{rm'}},

    where theta = ``threshold`` and a = ``alias``. Construction (the sweep of Huebschle-Schneider and
    Sanders, "Parallel weighted random sampling", 2019, vectorized): scale each row to mean 1; the light
    columns (w <= 1) each lack 1 - w, the heavy ones (w > 1) have w - 1 to spare. Heavy columns, in order,
    fill the light ones in order; with D the prefix sums of the deficits and E those of the excesses, the
    light column with preceding deficit sum D' is filled by the first heavy column with E > D', and heavy
    column h, once its excess is spent, keeps 1 - (D_k - E_h) of its own bucket (k the light column where
    E_h was reached) and takes the next heavy column as its alias.

    Parameters
    ----------
    weights : Tensor [R, n]
        Non-negative, finite, each row with a positive sum (float64 recommended: the thresholds carry
        the rounding of the prefix sums, about n eps).

    Returns
    -------
    threshold : Tensor [R, n]
        In [0, 1], dtype of ``weights``.
    alias : Tensor [R, n] (long)
        Column indices.

    Examples
    --------
    Weights (1, 3): mean 2, scaled (0.5, 1.5); column 0 keeps 1/2 of its bucket and lends the rest to
    column 1: P(0) = 0.5 / 2 = 1/4.

    >>> alias_tables(torch.tensor([[1.0, 3.0]], dtype=torch.float64))
    (tensor([[0.5000, 1.0000]], dtype=torch.float64), tensor([[1, 1]]))
    """
    rows, n = weights.shape
    scaled = weights * (n / weights.sum(dim=1, keepdim=True))
    heavy = scaled > 1
    # stable partition, light columns first: position[r, c] of column c in the sorted row, and its inverse
    light_rank = torch.cumsum(~heavy, dim=1)
    position = torch.where(heavy, light_rank[:, -1:] + torch.cumsum(heavy, dim=1), light_rank) - 1
    columns = torch.arange(n, device=weights.device).expand(rows, n)
    order = torch.empty_like(position).scatter_(1, position, columns)
    w = scaled.gather(1, order)
    is_heavy = heavy.gather(1, order)
    deficit = torch.where(is_heavy, torch.zeros_like(w), 1 - w)
    excess = torch.where(is_heavy, w - 1, torch.zeros_like(w))
    dsum = torch.cumsum(deficit, dim=1)  # nondecreasing, constant on the heavy columns
    esum = torch.cumsum(excess, dim=1)  # zero on the light columns, then nondecreasing
    last = n - 1
    # light column: filled by the first heavy column with E > (deficits before it)
    light_alias = torch.searchsorted(esum, (dsum - deficit).contiguous(), right=True).clamp_(max=last)
    # heavy column h: spent at the first light column k with D_k >= E_h; it keeps 1 - (D_k - E_h)
    spent = torch.searchsorted(dsum, esum, right=False)
    residual = 1 - (dsum.gather(1, spent.clamp(max=last)) - esum)
    final = (spent > last) | (columns == last)  # the last heavy column (rounding: E_h above every D)
    heavy_threshold = torch.where(final, torch.ones_like(w), residual)
    heavy_alias = (columns + 1).clamp(max=last)
    threshold_sorted = torch.where(is_heavy, heavy_threshold, w).clamp_(0.0, 1.0)
    alias_sorted = torch.where(is_heavy, heavy_alias, light_alias)
    threshold = threshold_sorted.gather(1, position)
    alias = order.gather(1, alias_sorted).gather(1, position)
    return threshold, alias


def sampled_values(
    z: torch.Tensor,
    labels: torch.Tensor,
    spec: LossSpec,
    structure: PairStructure,
    psi: Psi,
    *,
    generator: torch.Generator,
    block_size: int,
    max_draws: int = DEFAULT_MAX_DRAWS,
    return_negatives: bool = True,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(values [P], negatives [P, k_max] long, -1 padded) of the sampled estimator, canonical pair order.

    ``block_size`` anchors share one similarity block and one pair of alias tables; ``max_draws`` bounds
    the draws (pairs x k_max) made at once. With ``return_negatives=False`` the drawn indices are not
    returned (None): a caller that needs only the loss saves P k_max longs (at B = 512, k = 256, C = 10:
    50 MiB, whose first touch alone costs about as much as the whole estimator).

    The built-in ``infonce`` and ``infonce-mean`` (a fixed k) go through a custom autograd Function:
    with c_i = max_{m in N(i)} S_im / tau and the table E_im = exp(S_im / tau - c_i) of the block, a
    pair's value is softplus(log sum_r E_{i m_r} + c_i - S_ij / tau [- log k]), and its gradient scatters
    sigma / (tau X) back onto the drawn entries (X the sum; sigma the sigmoid of the softplus argument);
    pairs whose sum X falls below finfo.tiny / finfo.eps (every drawn term far below the anchor's largest)
    are recomputed with a per-pair log-sum-exp. Other psi (triplet, custom) are applied by autograd to
    t [pairs, k] = S_{i m_r} - S_ij, one chunk of pairs at a time.
    """
    size = z.shape[0]
    device = z.device
    udtype = torch.float64 if z.dtype == torch.float64 else torch.float32
    k_all = structure.num_negatives if spec.k is None else torch.full_like(structure.num_negatives, spec.k)
    k_max = int(k_all[structure.valid].max()) if structure.num_pairs else (spec.k or 1)
    pairs_per_chunk = max(1, max_draws // k_max)
    fused = psi.builtin and psi.name in ("infonce", "infonce-mean") and spec.k is not None
    values: list[torch.Tensor] = []
    negatives: list[torch.Tensor] = []
    for start in range(0, size, block_size):
        stop = min(start + block_size, size)
        lo, hi = int(structure.pair_offsets[start]), int(structure.pair_offsets[stop])
        if hi == lo:
            continue
        sim = z[start:stop] @ z.T  # [bs, B], with autograd
        with torch.no_grad():
            excluded = _excluded(labels, spec, start, stop)
            threshold, alias = _block_tables(sim.detach(), excluded, spec.b)
            # per flat entry r * B + c: the threshold, and the step to the alias entry r * B + alias[r, c]
            table = (threshold.to(udtype).reshape(-1), (alias - torch.arange(size, device=device)).reshape(-1))
            anchors = structure.anchors[lo:hi]
            base = (anchors - start) * size
            chunks = [
                _draw(table, base[p0 - lo:p1 - lo], k_max, size, udtype, generator)
                for p0, p1 in _ranges(lo, hi, pairs_per_chunk)
            ]
        positive_flat = base + structure.positives[lo:hi]
        if fused:
            assert psi.tau is not None  # built-in infonce carries its tau
            log_k = math.log(k_max) if psi.name == "infonce-mean" else 0.0
            values.append(_SampledInfoNCE.apply(sim, excluded, positive_flat, chunks, psi.tau, log_k))
        else:
            flat_sim = sim.reshape(-1)
            positive = flat_sim[positive_flat]
            k_pair = k_all[anchors]
            for (p0, p1), drawn in zip(_ranges(lo, hi, pairs_per_chunk), chunks):
                t = flat_sim[drawn] - positive[p0 - lo:p1 - lo, None]
                values.append(_apply_psi(psi, t, k_pair[p0 - lo:p1 - lo], k_max))
        if return_negatives:
            k_pair = k_all[anchors]
            for (p0, p1), drawn in zip(_ranges(lo, hi, pairs_per_chunk), chunks):
                m = drawn - base[p0 - lo:p1 - lo, None]
                pad = torch.arange(k_max, device=device)[None, :] >= k_pair[p0 - lo:p1 - lo, None]
                negatives.append(m.masked_fill_(pad, -1))
    if not values:
        empty = torch.zeros(0, dtype=z.dtype, device=device)
        return empty, (torch.zeros((0, k_max), dtype=torch.long, device=device) if return_negatives else None)
    return torch.cat(values), (torch.cat(negatives) if return_negatives else None)


def _ranges(lo: int, hi: int, step: int) -> list[tuple[int, int]]:
    return [(p0, min(p0 + step, hi)) for p0 in range(lo, hi, step)]


def _excluded(labels: torch.Tensor, spec: LossSpec, start: int, stop: int) -> torch.Tensor:
    """[bs, B] bool: m not in N(i) for the anchors i of the block (none for UCL/HUCL, authors' convention)."""
    anchors = torch.arange(start, stop, device=labels.device)
    if spec.supervised:
        return labels[anchors][:, None] == labels[None, :]
    if spec.anchor_negative:
        return torch.zeros(stop - start, labels.numel(), dtype=torch.bool, device=labels.device)
    return anchors[:, None] == torch.arange(labels.numel(), device=labels.device)[None, :]


def _block_tables(sim: torch.Tensor, excluded: torch.Tensor, b: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Alias tables of q_i for the anchors of one block (rows of ``sim`` [bs, B]); q = 0 off N(i)."""
    logits = (b * sim.to(torch.float64)).masked_fill(excluded, float("-inf"))
    # rows with an empty N(i) have no pair; give them a harmless uniform law
    logits = logits.masked_fill(excluded.all(dim=1, keepdim=True), 0.0)
    weights = (logits - logits.amax(dim=1, keepdim=True)).exp_()
    return alias_tables(weights)


def _draw(table, base, k_max, size, udtype, generator):
    """Flat block indices base_p + m of k_max draws per pair from the alias table [p, k_max] (fresh)."""
    threshold, step = table
    count = base.numel()
    x = torch.rand(count * k_max, generator=generator, dtype=udtype, device=base.device).mul_(size)
    flat = x.to(torch.long).clamp_(max=size - 1)
    frac = x.frac_()
    flat2 = flat.view(count, k_max).add_(base[:, None])
    to_alias = frac >= threshold.index_select(0, flat)
    flat.add_(step.index_select(0, flat).mul_(to_alias))  # (mul by a bool: cheaper than masked_fill_ on CPU)
    return flat2


class _SampledInfoNCE(torch.autograd.Function):
    """Values [P_block] of psi = infonce (log_k = 0) or infonce-mean (log_k = log k) on given draws."""

    @staticmethod
    def forward(ctx, sim, excluded, positive_flat, chunks, tau, log_k):
        scaled = sim / tau
        shift = scaled.masked_fill(excluded, float("-inf")).amax(dim=1, keepdim=True)
        table = (scaled - shift).exp_().masked_fill_(excluded, 0.0).reshape(-1)  # E, zero off N(i)
        tiny = torch.finfo(sim.dtype).tiny / torch.finfo(sim.dtype).eps
        rows = shift.reshape(-1)
        size = sim.shape[1]
        flat_scaled = scaled.reshape(-1)
        sums, exact, parts = [], [], []
        for drawn in chunks:
            total = table.index_select(0, drawn.reshape(-1)).view(drawn.shape).sum(dim=1)
            low = torch.nonzero(total < tiny).reshape(-1)
            part = total.log()
            if low.numel():  # every drawn term tiny next to the anchor's largest: a per-pair log-sum-exp
                part[low] = torch.logsumexp(flat_scaled[drawn[low]], dim=1) - rows[drawn[low, 0] // size]
                total[low] = 0.0  # marks the pairs whose gradient goes through the softmax below
            parts.append(part)
            sums.append(total)
            exact.append(low)
        anchor_rows = positive_flat // size
        arg = torch.cat(parts) + rows[anchor_rows] - flat_scaled[positive_flat] - log_k
        ctx.save_for_backward(table, flat_scaled, positive_flat, torch.sigmoid(arg), *sums)
        ctx.chunks, ctx.exact, ctx.tau, ctx.shape = chunks, exact, tau, sim.shape
        return torch.nn.functional.softplus(arg)

    @staticmethod
    def backward(ctx, grad):
        table, flat_scaled, positive_flat, sigma, *sums = ctx.saved_tensors
        weight = grad * sigma / ctx.tau  # d value / d S_ij = -weight; the drawn entries share +weight
        hits = torch.zeros_like(table)  # sum over draws of weight / X at each drawn entry
        exact_grad = torch.zeros_like(table)
        offset = 0
        for drawn, total, low in zip(ctx.chunks, sums, ctx.exact):
            n, k = drawn.shape
            w = weight[offset:offset + n]
            per_pair = (w / torch.where(total > 0, total, torch.ones_like(total))).masked_fill_(total == 0, 0.0)
            per_draw = per_pair[:, None].expand(n, k).reshape(-1)
            hits.index_add_(0, drawn.reshape(-1), per_draw)
            if low.numel():
                soft = torch.softmax(flat_scaled[drawn[low]], dim=1) * w[low, None]
                exact_grad.index_add_(0, drawn[low].reshape(-1), soft.reshape(-1))
            offset += n
        grad_sim = hits.mul_(table).add_(exact_grad)
        grad_sim.index_add_(0, positive_flat, -weight)
        return grad_sim.view(ctx.shape), None, None, None, None, None


def _apply_psi(psi: Psi, t: torch.Tensor, k_pair: torch.Tensor, k_max: int) -> torch.Tensor:
    """psi_{k_p}(t[p, :k_p]) for every row p of t [p, k_max]."""
    if bool((k_pair == k_max).all()):
        return psi(t)
    out = torch.zeros(t.shape[0], dtype=t.dtype, device=t.device)
    for k in torch.unique(k_pair).tolist():
        sel = torch.nonzero(k_pair == k).reshape(-1)
        out = out.index_put((sel,), psi(t[sel, :k]))
    return out
