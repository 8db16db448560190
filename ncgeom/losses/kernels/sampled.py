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

Shared draws (``draws="anchor"``). Each anchor with a pair draws one tuple m_1..m_k i.i.d. from q_i, and all
its pairs use it: every l_ij keeps the law of the definition (the expectation of every reduction is
unchanged), but the pairs of one anchor are no longer independent (non-negatively correlated for psi
non-decreasing, so the variance of the mean grows, by at most max_i |P(i)|; docs/theory.md section 7). The
tuple comes from an inverse-CDF search (running sums of the weights, k binary searches per anchor: cheaper
than the alias tables when k is not much above B), the stream anchor after anchor in canonical order, k_max
uniforms each; for b = 0 one pick among the allowed columns, from one table per class (SCL) or in closed
form (UCL: j + [j >= i]). The similarities S_{i m_l} are gathered once per anchor and the built-in psi are
evaluated in O(1) (infonce) or O(log k) (triplet) per pair (:func:`_anchor_block`). The built-in psi with a
fixed k are symmetric in an anchor's draws, so for them the search runs over each anchor's uniforms in
ascending order (the same draws, reordered: faster binary searches) and the values are formed from the
draws in that order; the returned negatives stay in the order drawn.

Memory: the similarities of one anchor block, S_I = Z_I Z^T [block, B] (with autograd), its two alias
tables (``"anchor"``: its running sums), and the draws of at most ``max_draws`` (pairs x k) at a time; the
graph keeps the drawn indices (P k longs; ``"anchor"``: A k) for the backward pass, and the returned
negatives hold P k longs when requested.
"""

from __future__ import annotations

import math

import torch

from ncgeom.losses.kernels.structure import LossSpec, PairStructure
from ncgeom.losses.psi import Psi
from ncgeom.vocabulary import SampledDraws

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
    (:func:`_anchor_cdf`, :func:`_draw_inverse_cdf`; its uniforms consumed in canonical anchor order, k_max
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
    # in the order of their sorted uniforms (:func:`_draw_inverse_cdf`)
    symmetric = psi.builtin and psi.name in ("infonce", "infonce-mean", "triplet") and spec.k is not None
    values: list[torch.Tensor] = []
    negatives: list[torch.Tensor] = []
    for start in range(0, size, block_size):
        stop = min(start + block_size, size)
        lo, hi = int(structure.pair_offsets[start]), int(structure.pair_offsets[stop])
        if hi == lo:
            continue
        sim = z[start:stop] @ z.T  # [bs, B], with autograd
        excluded = _excluded(labels, spec, start, stop)
        if draws == "anchor":
            counts = structure.pair_offsets[start + 1:stop + 1] - structure.pair_offsets[start:stop]
            rows = torch.nonzero(counts).reshape(-1)  # block rows of the anchors with a pair, ascending
            with torch.no_grad():
                every = rows.numel() == stop - start  # usually: skip the copies of the rows
                drawn, in_order = _anchor_draws(sim.detach() if every else sim.detach()[rows],
                                                excluded if every else excluded[rows], spec.b, k_max, udtype,
                                                generator, rows_per_chunk=pairs_per_chunk,
                                                any_order=symmetric, keep_order=return_negatives,
                                                layout=_layout(labels, spec, rows + start) if spec.b == 0 else None)
                drawn += (rows * size)[:, None]  # flat block indices r * B + m
                if in_order is not None and in_order is not drawn:
                    in_order += (rows * size)[:, None]
            block_values, block_negatives = _anchor_block(
                sim, drawn, rows, counts[rows], k_all[rows + start], structure.positives[lo:hi], psi,
                pairs_per_chunk, return_negatives, in_order=in_order)
            values.append(block_values)
            if block_negatives is not None:
                negatives.append(block_negatives)
            continue
        with torch.no_grad():
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
    when ``drawn`` holds them in another order (:func:`_anchor_draws`).

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
        for p0, p1 in _ranges(0, pair_row.numel(), pairs_per_chunk):
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
    where it came from).

    On the CPU the order comes from numpy's ``argsort`` (a SIMD quicksort; torch's CPU sort of [512, 256] took 6.2
    ms against 2.9 ms, BENCHMARKS.md, "Speed round 3"), then one gather; elsewhere, or with a NaN, from
    ``torch.sort`` (which puts NaN first, numpy last). The two may order ties differently, which changes no value and no gradient here: tied entries
    are equal, so the sorted rows and their prefix sums are the same, and every count n_ij = #{l : a_il >= c_ij}
    takes a tie group whole, so all its entries get the same gradient.
    """
    if values.device.type == "cpu" and values.numel() and not bool(torch.isnan(values).any()):
        import numpy as np

        order = torch.from_numpy(np.argsort(np.negative(values.detach().numpy()), axis=1))
        return values.gather(1, order)
    return values.sort(dim=1, descending=True).values


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


def _layout(labels: torch.Tensor, spec: LossSpec, anchors: torch.Tensor) -> tuple:
    """How N(i) is excluded for the rows ``anchors`` (:func:`_excluded`), for :func:`_draw_uniform`:
    ``("classes", inverse, mask)`` (SCL/HSCL: row r excludes ``mask[inverse[r]]``, its class's columns),
    ``("self", anchors)`` (UCL/HUCL: column i) or ``("none",)`` (the authors' convention: nothing)."""
    if spec.supervised:
        classes, inverse = torch.unique(labels[anchors], return_inverse=True)
        return ("classes", inverse, classes[:, None] == labels[None, :])
    if spec.anchor_negative:
        return ("none",)
    return ("self", anchors)


def _layout_rows(layout: tuple | None, r0: int, r1: int) -> tuple | None:
    if layout is None or layout[0] == "none":
        return layout
    if layout[0] == "classes":
        return ("classes", layout[1][r0:r1], layout[2])
    return ("self", layout[1][r0:r1])


def _anchor_draws(sim: torch.Tensor, excluded: torch.Tensor, b: float, k_max: int, udtype: torch.dtype,
                  generator: torch.Generator, *, rows_per_chunk: int, any_order: bool = False,
                  keep_order: bool = True, layout: tuple | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(draws, in_order): columns [A, k_max] (long), k_max i.i.d. draws from q_i for each row i (N(i) not empty),
    rows in order.

    Every row consumes k_max uniforms of ``generator``, row after row, whatever ``rows_per_chunk``. For b = 0,
    q_i is uniform on N(i): the draw is the floor(u |N(i)|)-th column of N(i) (:func:`_draw_uniform`, one
    gather). Otherwise an inverse-CDF search in the running sums of q_i (:func:`_anchor_cdf`,
    :func:`_draw_inverse_cdf`); ``layout`` (:func:`_layout`, b = 0) says how ``excluded`` was formed, which
    :func:`_draw_uniform` then does not scan. ``draws`` are in the order drawn, unless ``any_order`` (the caller's use of a
    row is symmetric in its draws) lets the search go in the order of the sorted uniforms: then ``draws`` is a
    row's same draws in another order and ``in_order`` (with ``keep_order``) the order drawn; else
    ``in_order`` is ``draws`` (None when it is not kept).
    """
    ranges = _ranges(0, sim.shape[0], rows_per_chunk)
    if b == 0:
        drawn = torch.cat([_draw_uniform(excluded[r0:r1], k_max, udtype, generator, layout=_layout_rows(layout, r0, r1))
                           for r0, r1 in ranges])
        return drawn, drawn
    cdf = _anchor_cdf(sim, excluded, b)
    parts = [_draw_inverse_cdf(cdf[r0:r1], k_max, udtype, generator, sorted_search=any_order, keep_order=keep_order)
             for r0, r1 in ranges]
    drawn = torch.cat([p[0] for p in parts])
    if not any_order:
        return drawn, drawn
    return drawn, (torch.cat([p[1] for p in parts]) if keep_order else None)  # type: ignore[misc]


def _draw_uniform(excluded: torch.Tensor, k_max: int, udtype: torch.dtype, generator: torch.Generator, *,
                  layout: tuple | None = None) -> torch.Tensor:
    """Columns [A, k_max] (long): k_max draws per row, uniform on the columns not ``excluded`` (at least one).

    The j-th allowed column (ascending, j = floor(u |N(i)|), u uniform in [0, 1) in ``udtype``), so every
    allowed column has probability 1 / |N(i)| (up to the resolution of u) and an excluded one 0.

    ``layout`` (:func:`_layout`) gives the same draws from the same uniforms without the [A, B] table of
    allowed columns: for ``"classes"`` the table of each class (C rows, not A), for ``"self"`` (N(i) = every
    column but c_i) the j-th allowed column is j + [j >= c_i], for ``"none"`` it is j.
    """
    rows, n = excluded.shape
    if layout is not None and layout[0] in ("self", "none"):
        size = n - 1 if layout[0] == "self" else n
        u = torch.rand(rows * k_max, generator=generator, dtype=udtype, device=excluded.device).view(rows, k_max)
        pick = (u.to(torch.float64) * size).long().clamp_(max=size - 1)
        if layout[0] == "self":
            pick += pick >= layout[1][:, None]
        return pick
    inverse = None
    if layout is not None:  # "classes": one table per class of the rows
        inverse, excluded = layout[1], layout[2]
    groups = excluded.shape[0]
    allowed = ~excluded
    rank = allowed.cumsum(dim=1)  # allowed columns in 0..m
    count = rank[:, -1:]
    # table[i, j] = the j-th allowed column of row i; the excluded columns all land in the spare last slot
    slot = torch.where(allowed, rank - 1, torch.full_like(rank, n))
    columns = torch.arange(n, device=excluded.device).expand(groups, n)
    table = torch.empty(groups, n + 1, dtype=torch.long, device=excluded.device).scatter_(1, slot, columns)
    u = torch.rand(rows * k_max, generator=generator, dtype=udtype, device=excluded.device).view(rows, k_max)
    if inverse is not None:
        count = count.index_select(0, inverse)
    pick = torch.minimum((u.to(torch.float64) * count).long(), count - 1)  # a 53-bit u can round u N up to N
    if inverse is None:
        return table.gather(1, pick)
    return table.view(-1).index_select(0, (pick + (inverse * (n + 1))[:, None]).view(-1)).view(rows, k_max)


def _anchor_cdf(sim: torch.Tensor, excluded: torch.Tensor, b: float) -> torch.Tensor:
    """float64 [A, B]: the running sums of q_i over the columns, divided by their total (the last is exactly 1).

    For anchors whose N(i) is not empty (rows of ``sim``, ``excluded``): q_im proportional to
    exp(b (S_im - max_{N(i)} S_i)), 0 off N(i), the weights in the dtype of ``sim`` and their running sums in
    float64. Six passes over the block (b = 0: three).
    """
    if b == 0:
        weights = (~excluded).to(torch.float64)
    else:
        # in sim's dtype (float32: each weight within an ulp, 6e-8 relative, the resolution of the float32
        # uniforms that draw from it); off N(i) -inf, whose exponential is 0
        weights = sim.masked_fill(excluded, float("-inf"))
        weights = weights.sub_(weights.amax(dim=1, keepdim=True)).mul_(b).exp_()
    cdf = weights.cumsum(dim=1, dtype=torch.float64)
    return cdf.div_(cdf[:, -1:].clone())


def _draw_inverse_cdf(cdf: torch.Tensor, k_max: int, udtype: torch.dtype, generator: torch.Generator, *,
                      sorted_search: bool = False, keep_order: bool = True) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(draws, in_order): columns [A, k_max] (long) of k_max draws per row from the law whose normalized running
    sums are ``cdf``.

    m = #{c : cdf_c <= u} (the first column with cdf_m > u), u uniform in [0, 1) (k_max per row, row after
    row, in ``udtype``), so P(m) = cdf_m - cdf_{m-1} = q_m up to the rounding of the float64 running sums
    (about B eps). A column of weight 0 has cdf_m = cdf_{m-1} exactly and is never drawn; u < 1 = cdf_{B-1}
    keeps m <= B - 1.

    ``sorted_search``: each row's uniforms are sorted first and searched in that order, so ``draws`` holds a
    row's draws in ascending column order: the same draws (the same uniforms, each searched alike), in another
    order. The binary searches of ascending queries follow nearly the same path one after the other, which
    the CPU's branch predictor rewards: 4.9 ms against 8.6 ms for [512, 256] queries into [512, 512]
    (BENCHMARKS.md, "Speed round 3"). With ``keep_order`` the draws are also returned in the order drawn
    (``in_order``; else None); without ``sorted_search``, ``in_order`` is ``draws``.
    """
    rows = cdf.shape[0]
    u = torch.rand(rows * k_max, generator=generator, dtype=udtype, device=cdf.device).view(rows, k_max)
    if not sorted_search:
        drawn = torch.searchsorted(cdf, u.to(torch.float64), right=True)
        return drawn, drawn
    order = None
    if u.device.type == "cpu":  # numpy's SIMD sort: torch's CPU sort of [512, 256] costs about 6 ms
        import numpy as np

        values = u.numpy()
        if keep_order:
            positions = np.argsort(values, axis=1)
            ascending = torch.from_numpy(np.take_along_axis(values, positions, axis=1))
            order = torch.from_numpy(positions)
        else:
            ascending = torch.from_numpy(np.sort(values, axis=1))
    else:
        result = u.sort(dim=1)
        ascending, order = result.values, (result.indices if keep_order else None)
    drawn = torch.searchsorted(cdf, ascending.to(torch.float64), right=True)
    if order is None:
        return drawn, None
    return drawn, torch.empty_like(drawn).scatter_(1, order, drawn)


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
