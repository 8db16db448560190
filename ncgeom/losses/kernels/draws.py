"""Draws of the sampled estimator: k negatives from the tilted law q_i of an anchor (docs/theory.md section 7).

q_im is proportional to exp(b S_im) on N(i) and 0 off it (:func:`excluded_columns`: the other classes for
SCL/HSCL, every m != i for UCL/HUCL, every m under the authors' convention). The values built on the draws are
in :mod:`ncgeom.losses.kernels.sampled`.

Fresh draws per pair (``draws="pair"``, the definition). All pairs of anchor i draw from the same law q_i, so
one table per anchor serves them all: Walker's alias table over the B columns, built for a block of anchors
at once by :func:`alias_tables` (the sweep construction, vectorized with prefix sums and a sorted search;
:func:`block_alias_tables`). A draw then costs O(1) (:func:`pair_draws`): one uniform u, column
c = floor(B u), and m = c if frac(B u) < threshold[i, c] else alias[i, c]. Each pair (i, j) gets its own k
draws, i.i.d. from q_i, with replacement; the draws of different pairs are independent.

Random stream: pair after pair in canonical order, each pair consumes k_max uniforms of the generator
(k_max = k, or max_i |N(i)| for k = "batch", of which anchor i uses the first |N(i)|), in the dtype of z
(float32: 24-bit uniforms, the resolution of ``torch.multinomial`` in float32; float64: 53-bit). The
draws are therefore reproducible from the generator state and the batch alone; the block size and the
chunking do not change them. (Before 2026-11 the draws came from one ``torch.multinomial`` call per
anchor block: same law, a different stream.)

One tuple per anchor (``draws="anchor"``, :func:`anchor_draws`): k_max uniforms per anchor with a pair,
anchor after anchor in canonical order; an inverse-CDF search in the running sums of q_i
(:func:`anchor_cdf`, :func:`inverse_cdf_draws`: cheaper than the alias tables when k is not much above B),
for b = 0 one pick among the allowed columns, from one table per class (SCL) or in closed form (UCL:
j + [j >= i]; :func:`uniform_draws`, :func:`exclusion_layout`). When the caller's use of a tuple is
symmetric in its draws, the searches of an anchor run over its sorted uniforms (the same draws,
reordered), and the order drawn is kept apart for the returned negatives.
"""

from __future__ import annotations

import numpy as np
import torch

from ncgeom.losses.kernels.structure import LossSpec

__all__ = ["alias_tables", "excluded_columns", "block_alias_tables", "pair_draws", "exclusion_layout", "anchor_draws",
           "uniform_draws", "anchor_cdf", "inverse_cdf_draws", "sort_rows", "chunk_ranges"]


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


def excluded_columns(labels: torch.Tensor, spec: LossSpec, start: int, stop: int) -> torch.Tensor:
    """[bs, B] bool: m not in N(i) for the anchors i of the block (none for UCL/HUCL, authors' convention)."""
    anchors = torch.arange(start, stop, device=labels.device)
    if spec.supervised:
        return labels[anchors][:, None] == labels[None, :]
    if spec.anchor_negative:
        return torch.zeros(stop - start, labels.numel(), dtype=torch.bool, device=labels.device)
    return anchors[:, None] == torch.arange(labels.numel(), device=labels.device)[None, :]


def block_alias_tables(sim: torch.Tensor, excluded: torch.Tensor, b: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Alias tables of q_i for the anchors of one block (rows of ``sim`` [bs, B]); q = 0 off N(i)."""
    logits = (b * sim.to(torch.float64)).masked_fill(excluded, float("-inf"))
    # rows with an empty N(i) have no pair; give them a harmless uniform law
    logits = logits.masked_fill(excluded.all(dim=1, keepdim=True), 0.0)
    weights = (logits - logits.amax(dim=1, keepdim=True)).exp_()
    return alias_tables(weights)


def exclusion_layout(labels: torch.Tensor, spec: LossSpec, anchors: torch.Tensor) -> tuple:
    """How N(i) is excluded for the rows ``anchors`` (:func:`excluded_columns`), for :func:`uniform_draws`:
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


def anchor_draws(sim: torch.Tensor, excluded: torch.Tensor, b: float, k_max: int, udtype: torch.dtype,
                 generator: torch.Generator, *, rows_per_chunk: int, any_order: bool = False,
                 keep_order: bool = True, layout: tuple | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(draws, in_order): columns [A, k_max] (long), k_max i.i.d. draws from q_i for each row i (N(i) not empty),
    rows in order.

    Every row consumes k_max uniforms of ``generator``, row after row, whatever ``rows_per_chunk``. For b = 0,
    q_i is uniform on N(i): the draw is the floor(u |N(i)|)-th column of N(i) (:func:`uniform_draws`, one
    gather; ``layout``, :func:`exclusion_layout`, says how ``excluded`` was formed, so that it is not
    scanned). Otherwise an inverse-CDF search in the running sums of q_i (:func:`anchor_cdf`,
    :func:`inverse_cdf_draws`). ``draws`` are in the order drawn, unless ``any_order`` (the caller's use of a
    row is symmetric in its draws) lets the search go in the order of the sorted uniforms: then ``draws`` is a
    row's same draws in another order and, with ``keep_order``, ``in_order`` the order drawn. ``in_order`` is
    None when ``draws`` is already in the order drawn or that order is not kept.
    """
    ranges = chunk_ranges(0, sim.shape[0], rows_per_chunk)
    if b == 0:
        return torch.cat([uniform_draws(excluded[r0:r1], k_max, udtype, generator, layout=_layout_rows(layout, r0, r1))
                          for r0, r1 in ranges]), None
    cdf = anchor_cdf(sim, excluded, b)
    parts = [inverse_cdf_draws(cdf[r0:r1], k_max, udtype, generator, sorted_search=any_order, keep_order=keep_order)
             for r0, r1 in ranges]
    kept = [p[1] for p in parts if p[1] is not None]
    return torch.cat([p[0] for p in parts]), (torch.cat(kept) if kept else None)


def uniform_draws(excluded: torch.Tensor, k_max: int, udtype: torch.dtype, generator: torch.Generator, *,
                  layout: tuple | None = None) -> torch.Tensor:
    """Columns [A, k_max] (long): k_max draws per row, uniform on the columns not ``excluded`` (at least one).

    The j-th allowed column (ascending, j = floor(u |N(i)|), u uniform in [0, 1) in ``udtype``), so every
    allowed column has probability 1 / |N(i)| (up to the resolution of u) and an excluded one 0.

    ``layout`` (:func:`exclusion_layout`) gives the same draws from the same uniforms without the [A, B] table of
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


def anchor_cdf(sim: torch.Tensor, excluded: torch.Tensor, b: float) -> torch.Tensor:
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


def inverse_cdf_draws(cdf: torch.Tensor, k_max: int, udtype: torch.dtype, generator: torch.Generator, *,
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
    (BENCHMARKS.md, "Speed round 3"). With ``keep_order`` the draws are then also returned in the order drawn
    (``in_order``); otherwise ``in_order`` is None.
    """
    rows = cdf.shape[0]
    u = torch.rand(rows * k_max, generator=generator, dtype=udtype, device=cdf.device).view(rows, k_max)
    if not sorted_search:
        return torch.searchsorted(cdf, u.to(torch.float64), right=True), None
    ascending, order = sort_rows(u, keep_order=keep_order)
    drawn = torch.searchsorted(cdf, ascending.to(torch.float64), right=True)
    if order is None:
        return drawn, None
    return drawn, torch.empty_like(drawn).scatter_(1, order, drawn)


def sort_rows(values: torch.Tensor, *, keep_order: bool) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(each row of ``values`` [A, k] in ascending order, the positions it came from or None), no autograd.

    On the CPU by numpy (a SIMD sort: [512, 256] float32 in 0.3 ms, its argsort 2.7 ms, against 6.3 ms for
    torch's CPU sort; BENCHMARKS.md, "Speed round 3"), elsewhere by ``torch.sort``. The two may order equal
    entries differently; the sorted values are the same.
    """
    if values.device.type != "cpu":
        result = values.sort(dim=1)
        return result.values, (result.indices if keep_order else None)
    array = values.detach().numpy()
    if not keep_order:
        return torch.from_numpy(np.sort(array, axis=1)), None
    positions = np.argsort(array, axis=1)
    return torch.from_numpy(np.take_along_axis(array, positions, axis=1)), torch.from_numpy(positions)


def chunk_ranges(lo: int, hi: int, step: int) -> list[tuple[int, int]]:
    """[(lo, lo + step), ..., (., hi)]: the chunks of ``step`` items of the range lo..hi."""
    return [(p0, min(p0 + step, hi)) for p0 in range(lo, hi, step)]


def pair_draws(table, base, k_max, size, udtype, generator):
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
