"""Sampled estimator (the authors' code; docs/theory.md section 7).

For each pair (i, j), j in P(i), draw k indices m_1..m_k i.i.d. with replacement from the tilted weights
q_i (q_im proportional to exp(b S_im) on N(i); P(i), N(i) of the spec's convention, ``pair_structure``), then
apply psi_k exactly:

.. math:: \\ell_{ij} = \\psi_k\\big(S_{i m_1} - S_{ij}, \\dots, S_{i m_k} - S_{ij}\\big).

Any :class:`ncgeom.losses.Psi` works (infonce, infonce-mean, triplet, custom). Gradients flow through
the similarities only (sampling is not differentiable). Its expectation over the draws, given the batch,
is E_q[psi_k]; for k = 1 that is sum_m q_im psi(S_im - S_ij), and for the triplet psi (linear in each
term) it is sum_m q_im max(0, S_im - S_ij + margin) for every k.

How the negatives are drawn (alias tables per anchor, O(1) per draw, no per-pair Python work; the random
stream) is :mod:`ncgeom.losses.kernels.draws`.

Shared draws (``draws="anchor"``). Each anchor with a pair draws one tuple m_1..m_k i.i.d. from q_i, and all
its pairs use it: every l_ij keeps the law of the definition (the expectation of every reduction is
unchanged), but the pairs of one anchor are no longer independent (non-negatively correlated for psi
non-decreasing, so the variance of the mean grows, by at most max_i |P(i)|; docs/theory.md section 7). The
similarities S_{i m_l} are gathered once per anchor and the built-in psi are evaluated in O(1) (infonce) or
O(log k) (triplet) per pair (:func:`_anchor_block`). The built-in psi with a fixed k are symmetric in an
anchor's draws, so for them the draws come in ascending column order (faster searches,
:func:`ncgeom.losses.kernels.draws.inverse_cdf_draws`) and the values are formed in that order; the returned
negatives stay in the order drawn.

Memory: the similarities of one anchor block, S_I = Z_I Z^T [block, B] (with autograd), its two alias
tables (``"anchor"``: its running sums), and the draws of at most ``max_draws`` (pairs x k) at a time; the
graph keeps the drawn indices (P k longs; ``"anchor"``: A k) for the backward pass, and the returned
negatives hold P k longs when requested.
"""

from __future__ import annotations

import math

import torch

from ncgeom.losses.kernels.draws import (
    anchor_draws,
    block_alias_tables,
    chunk_ranges,
    excluded_columns,
    exclusion_layout,
    pair_draws,
    sort_rows,
)
from ncgeom.losses.kernels.structure import LossSpec, PairStructure
from ncgeom.losses.psi import Psi
from ncgeom.vocabulary import SampledDraws

__all__ = ["sampled_values", "DEFAULT_MAX_DRAWS"]

# draws (pairs x k) handled at once: the [pairs, k] temporaries of a chunk (a few MiB) stay near the cache
DEFAULT_MAX_DRAWS = 1 << 18


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
    draws: SampledDraws = "pair",
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

    ``draws="anchor"``: each anchor with a pair draws one k_max-tuple from q_i by an inverse-CDF search
    (:func:`anchor_cdf`, :func:`inverse_cdf_draws`; its uniforms consumed in canonical anchor order, k_max
    per anchor), shared by all its pairs; see :func:`_anchor_block` for how psi is then evaluated. ``"pair"``
    (the default) is described above.
    """
    size = z.shape[0]
    device = z.device
    udtype = torch.float64 if z.dtype == torch.float64 else torch.float32
    k_all = structure.num_negatives if spec.k is None else torch.full_like(structure.num_negatives, spec.k)
    k_max = int(k_all[structure.valid].max()) if structure.num_pairs else (spec.k or 1)
    pairs_per_chunk = max(1, max_draws // k_max)
    fused = psi.builtin and psi.name in ("infonce", "infonce-mean") and spec.k is not None
    # draws="anchor": a built-in psi of a fixed k is symmetric in an anchor's k draws, which may then be searched
    # in the order of their sorted uniforms (:func:`inverse_cdf_draws`)
    symmetric = psi.builtin and psi.name in ("infonce", "infonce-mean", "triplet") and spec.k is not None
    values: list[torch.Tensor] = []
    negatives: list[torch.Tensor] = []
    for start in range(0, size, block_size):
        stop = min(start + block_size, size)
        lo, hi = int(structure.pair_offsets[start]), int(structure.pair_offsets[stop])
        if hi == lo:
            continue
        sim = z[start:stop] @ z.T  # [bs, B], with autograd
        excluded = excluded_columns(labels, spec, start, stop)
        if draws == "anchor":
            counts = structure.pair_offsets[start + 1:stop + 1] - structure.pair_offsets[start:stop]
            rows = torch.nonzero(counts).reshape(-1)  # block rows of the anchors with a pair, ascending
            with torch.no_grad():
                every = rows.numel() == stop - start  # usually: skip the copies of the rows
                drawn, in_order = anchor_draws(sim.detach() if every else sim.detach()[rows],
                                                excluded if every else excluded[rows], spec.b, k_max, udtype,
                                                generator, rows_per_chunk=pairs_per_chunk,
                                                any_order=symmetric, keep_order=return_negatives,
                                                layout=exclusion_layout(labels, spec, rows + start) if spec.b == 0 else None)
                drawn += (rows * size)[:, None]  # flat block indices r * B + m
                if in_order is not None:
                    in_order += (rows * size)[:, None]
            block_values, block_negatives = _anchor_block(
                sim, drawn, rows, counts[rows], k_all[rows + start], structure.positives[lo:hi], psi,
                pairs_per_chunk, return_negatives, in_order=in_order)
            values.append(block_values)
            if block_negatives is not None:
                negatives.append(block_negatives)
            continue
        with torch.no_grad():
            threshold, alias = block_alias_tables(sim.detach(), excluded, spec.b)
            # per flat entry r * B + c: the threshold, and the step to the alias entry r * B + alias[r, c]
            table = (threshold.to(udtype).reshape(-1), (alias - torch.arange(size, device=device)).reshape(-1))
            anchors = structure.anchors[lo:hi]
            base = (anchors - start) * size
            chunks = [
                pair_draws(table, base[p0 - lo:p1 - lo], k_max, size, udtype, generator)
                for p0, p1 in chunk_ranges(lo, hi, pairs_per_chunk)
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
            for (p0, p1), drawn in zip(chunk_ranges(lo, hi, pairs_per_chunk), chunks):
                t = flat_sim[drawn] - positive[p0 - lo:p1 - lo, None]
                values.append(_apply_psi(psi, t, k_pair[p0 - lo:p1 - lo], k_max))
        if return_negatives:
            k_pair = k_all[anchors]
            for (p0, p1), drawn in zip(chunk_ranges(lo, hi, pairs_per_chunk), chunks):
                m = drawn - base[p0 - lo:p1 - lo, None]
                pad = torch.arange(k_max, device=device)[None, :] >= k_pair[p0 - lo:p1 - lo, None]
                negatives.append(m.masked_fill_(pad, -1))
    if not values:
        empty = torch.zeros(0, dtype=z.dtype, device=device)
        return empty, (torch.zeros((0, k_max), dtype=torch.long, device=device) if return_negatives else None)
    return torch.cat(values), (torch.cat(negatives) if return_negatives else None)


def _anchor_block(
    sim: torch.Tensor,
    drawn: torch.Tensor,
    rows: torch.Tensor,
    pairs_per_row: torch.Tensor,
    k_row: torch.Tensor,
    positives: torch.Tensor,
    psi: Psi,
    pairs_per_chunk: int,
    return_negatives: bool,
    *,
    in_order: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(values, negatives) of one block's pairs when anchor i's pairs share its draws m_1..m_{k_i}.

    ``in_order``: the same draws in the order they were drawn, for the returned negatives (None: ``drawn``),
    when ``drawn`` holds them in another order (:func:`anchor_draws`).

    ``drawn`` [A, k_max] holds the flat block indices r * B + m of the draws of the A anchors of the block
    that have a pair (block rows ``rows``, ascending; their pairs are contiguous in canonical order,
    ``pairs_per_row`` of each). The similarities a_il = S_{i m_l} are gathered once per anchor, [A, k_max],
    with autograd (no gradient through the draws). Then, with t_l = a_il - S_ij:

    - ``infonce``: psi_k(t) = log(1 + e^{L_i - S_ij / tau}), L_i = LSE_l(a_il / tau) (minus log k_i for
      ``infonce-mean``), so the log-sum-exp is computed once per anchor and each pair costs O(1);
    - ``triplet``: with a_i sorted descending and its prefix sums C_n, the n_ij = #{l : a_il >= c_ij} terms
      of c_ij = S_ij - margin are the positive ones, and psi_k(t) = (C_{n_ij} - n_ij c_ij) / k_i: one sort
      per anchor and a binary search per pair (ties a_il = c_ij add 0 and get the subgradient 1/k_i, as
      ``clamp_min`` gives them);
    - any other psi (custom): psi applied by autograd to t [pairs, k_max], built by broadcasting a_i, one
      chunk of ``pairs_per_chunk`` pairs at a time.

    The three built-in forms are the generic one rearranged (equal up to rounding; tests/test_sampled_anchor_draws.py).
    """
    size = sim.shape[1]
    count, k_max = drawn.shape
    flat_sim = sim.reshape(-1)
    pair_row = torch.repeat_interleave(torch.arange(count, device=sim.device), pairs_per_row)  # [P_block]
    base = rows * size
    # a_il [A, k_max] and S_ij [P_block] in one gather (one scatter in the backward pass)
    picked = flat_sim.index_select(0, torch.cat([drawn.reshape(-1), base.index_select(0, pair_row) + positives]))
    gathered, positive = picked[:drawn.numel()].view(count, k_max), picked[drawn.numel():]
    pad = torch.arange(k_max, device=sim.device)[None, :] >= k_row[:, None]  # draws past k_i (k = "batch")
    padded = bool(pad.any())
    if psi.builtin and psi.name in ("infonce", "infonce-mean"):
        assert psi.tau is not None  # built-in infonce carries its tau
        scaled = gathered / psi.tau
        lse = torch.logsumexp(scaled.masked_fill(pad, float("-inf")) if padded else scaled, dim=1)
        if psi.name == "infonce-mean":
            lse = lse - k_row.to(sim.dtype).log()
        arg = lse.index_select(0, pair_row) - positive / psi.tau
        values = torch.logaddexp(torch.zeros_like(arg), arg)  # exact log(1 + e^x), as psi's own func
    elif psi.builtin and psi.name == "triplet":
        assert psi.margin is not None
        descending = _sorted_descending(gathered.masked_fill(pad, float("-inf")) if padded else gathered)
        prefix = torch.nn.functional.pad(descending.cumsum(dim=1), (1, 0))  # C_0 = 0, ..., C_k [A, k_max + 1]
        cut = positive - psi.margin  # c_ij
        with torch.no_grad():  # n_ij = #{l : a_il >= c_ij}: searchsorted of -c_ij in -a_i (ascending), per anchor
            start = torch.repeat_interleave(torch.cumsum(pairs_per_row, 0) - pairs_per_row, pairs_per_row)
            slot = torch.arange(pair_row.numel(), device=sim.device) - start
            queries = torch.full((count, int(pairs_per_row.max())), float("inf"), dtype=sim.dtype,
                                 device=sim.device)
            queries[pair_row, slot] = -cut.detach()
            above = torch.searchsorted(-descending.detach(), queries, right=True)[pair_row, slot]
        values = (prefix.reshape(-1).index_select(0, pair_row * (k_max + 1) + above)
                  - above.to(sim.dtype) * cut) / k_row.index_select(0, pair_row).to(sim.dtype)
    else:
        pieces = []
        k_pair = k_row.index_select(0, pair_row)
        for p0, p1 in chunk_ranges(0, pair_row.numel(), pairs_per_chunk):
            t = gathered.index_select(0, pair_row[p0:p1]) - positive[p0:p1, None]
            pieces.append(_apply_psi(psi, t, k_pair[p0:p1], k_max))
        values = torch.cat(pieces)
    if not return_negatives:
        return values, None
    with torch.no_grad():
        negatives = ((drawn if in_order is None else in_order) - base[:, None]).masked_fill_(pad, -1).index_select(0, pair_row)
    return values, negatives


def _sorted_descending(values: torch.Tensor) -> torch.Tensor:
    """Each row of ``values`` [A, k] sorted in descending order, with autograd (the gradient of an entry goes back to
    where it came from): the order of :func:`~ncgeom.losses.kernels.draws.sort_rows` of -values (numpy on the
    CPU), then one gather; with a NaN, ``torch.sort`` (which puts NaN first, numpy last).

    Another sort may order ties differently, which changes no value and no gradient here: tied entries are
    equal, so the sorted rows and their prefix sums are the same, and every count n_ij = #{l : a_il >= c_ij}
    takes a tie group whole, so all its entries get the same gradient.
    """
    if values.numel() and not bool(torch.isnan(values).any()):
        order = sort_rows(-values.detach(), keep_order=True)[1]
        assert order is not None  # keep_order
        return values.gather(1, order)
    return values.sort(dim=1, descending=True).values


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
