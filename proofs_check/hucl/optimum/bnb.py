"""Interval branch and bound for the global minimum of a function on a box, to a stated epsilon.

The function is given by an enclosure ``enclose(lo, hi, with_grad)`` -> :class:`~proofs_check.hucl.optimum.intervals.Dual`
over boxes [lo, hi] ([B, p] each): an interval containing f over each box and, with ``with_grad``, intervals containing
each partial derivative over it. The method (Moore, Kearfott, Cloud 2009, chapter 8):

1. start from a grid of ``per_side``^p boxes covering the domain; drop boxes that ``outside`` says lie outside the
   fundamental domain (they meet no point of it);
2. for every box: lower bound = the larger of the natural enclosure's lower end and the mean-value form's,
   f(c) - sum_i max|d_i f(X)| r_i (c the centre, r the half widths); the upper bound U is the smallest upper end of
   f at a point (the centres and the ``starts``);
3. drop a box whose lower bound exceeds U; drop it when a partial derivative keeps one sign on it and the box can
   be moved against that sign without leaving the domain where minimizers are sought (``free`` says per
   coordinate whether f extends beyond the domain, e.g. an angle: then every global minimizer is a critical
   point and any sign-definite partial derivative excludes it);
4. a box whose lower bound is >= U - eps is *settled* (kept, not split); the others are halved along their widest
   side (relative to the domain).

It ends when no box is left to split: the global minimum lies in [min over settled boxes of the lower bound, U], of
width <= eps, and every global minimizer lies in a settled box. More than ``max_boxes`` boxes in the queue stops it:
the result then says why and gives the lower bound reached (every queued box keeps its parent's lower bound).

Sources: R. E. Moore, R. B. Kearfott, M. J. Cloud, *Introduction to Interval Analysis*, SIAM 2009, chapter 8;
docs/theory.md, section 4 ("HUCL: an open problem": the functions minimized).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from ncgeom.validate import require_int, require_real
from proofs_check.hucl.optimum.intervals import Dual

__all__ = ["BnBResult", "branch_and_bound", "MAX_BOXES", "KEPT_BOXES"]

MAX_BOXES = 400_000
KEPT_BOXES = 64  # settled boxes kept in the result (the lowest lower bounds first)


@dataclass(frozen=True)
class BnBResult:
    """closed : upper - lower <= eps (and not stopped); lower / upper : the enclosure of the global minimum;
    best : the point giving ``upper``; settled : <= KEPT_BOXES boxes [(lo, hi) per coordinate] that may hold
    global minimizers (lowest lower bound first), num_settled of them in all; settled_hull : the smallest box
    [(lo, hi) per coordinate] containing every settled box (empty when none); evaluated, max_queue, iterations,
    seconds : the coverage; reason : why it stopped before closing ("" when it closed)."""

    eps: float
    closed: bool
    lower: float
    upper: float
    best: tuple[float, ...]
    settled: tuple[tuple[tuple[float, float], ...], ...]
    num_settled: int
    settled_hull: tuple[tuple[float, float], ...]
    evaluated: int
    max_queue: int
    iterations: int
    seconds: float
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def branch_and_bound(enclose: Callable[[np.ndarray, np.ndarray, bool], Dual], lo: ArrayLike, hi: ArrayLike,
                     *, eps: float, outside: Callable[[np.ndarray, np.ndarray], np.ndarray] | None = None,
                     free: Sequence[bool] | None = None, starts: Sequence[ArrayLike] = (), per_side: int = 4,
                     max_boxes: int = MAX_BOXES, chunk: int = 20_000,
                     progress: Callable[[str], None] | None = None) -> BnBResult:
    """Certified enclosure of min f over the box [lo, hi] (module docstring)."""
    eps = require_real("eps", eps, min_value=0.0, min_inclusive=False)
    per_side = require_int("per_side", per_side, min_value=1)
    dom_lo, dom_hi = np.asarray(lo, dtype=np.float64), np.asarray(hi, dtype=np.float64)
    p = dom_lo.size
    if dom_hi.shape != dom_lo.shape or np.any(dom_hi <= dom_lo):
        raise ValueError("hi must have the shape of lo and exceed it in every coordinate")
    free_arr = np.zeros(p, dtype=bool) if free is None else np.asarray(free, dtype=bool)
    t0 = time.perf_counter()
    scale = dom_hi - dom_lo
    upper, best = math.inf, dom_lo / 2 + dom_hi / 2
    for start in starts:
        s = np.asarray(start, dtype=np.float64)[None, :]
        value = enclose(s, s, False).value
        if value.hi[0] < upper:
            upper, best = float(value.hi[0]), s[0].copy()
    edges = [np.linspace(a, b, per_side + 1) for a, b in zip(dom_lo, dom_hi)]
    for e, a, b in zip(edges, dom_lo, dom_hi):
        e[0], e[-1] = a, b
    cells = np.array(np.meshgrid(*[np.arange(per_side)] * p, indexing="ij")).reshape(p, -1).T
    queue_lo = np.stack([edges[i][cells[:, i]] for i in range(p)], axis=1)
    queue_hi = np.stack([edges[i][cells[:, i] + 1] for i in range(p)], axis=1)
    queue_lb = np.full(len(queue_lo), -np.inf)
    settled: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    evaluated, max_queue, iterations, reason = 0, 0, 0, ""
    while len(queue_lo):
        iterations += 1
        if outside is not None:
            keep = ~outside(queue_lo, queue_hi)
            queue_lo, queue_hi, queue_lb = queue_lo[keep], queue_hi[keep], queue_lb[keep]
        max_queue = max(max_queue, len(queue_lo))
        if len(queue_lo) > max_boxes:
            reason = f"more than {max_boxes} boxes to refine at once (iteration {iterations})"
            break
        lbs = []
        for start in range(0, len(queue_lo), chunk):
            blo, bhi = queue_lo[start:start + chunk], queue_hi[start:start + chunk]
            mid = blo / 2 + bhi / 2
            centre = enclose(mid, mid, False).value
            box = enclose(blo, bhi, True)
            radius = np.maximum(bhi - mid, mid - blo)
            slope = np.stack([np.maximum(np.abs(g.lo), np.abs(g.hi)) for g in box.grad], axis=1)
            spread = np.nextafter(np.sum(slope * radius, axis=1) * (1 + 1e-12), np.inf)
            lb = np.maximum(box.value.lo, np.nextafter(centre.lo - spread, -np.inf))
            excluded = np.zeros(len(blo), dtype=bool)
            for j, g in enumerate(box.grad):
                # f increasing in x_j on the box and the box can move down (or f extends beyond the domain)
                excluded |= (g.lo > 0) & (free_arr[j] | (blo[:, j] > dom_lo[j]))
                excluded |= (g.hi < 0) & (free_arr[j] | (bhi[:, j] < dom_hi[j]))
            lb = np.where(excluded, np.inf, lb)
            i = int(np.argmin(centre.hi))
            if centre.hi[i] < upper:
                upper, best = float(centre.hi[i]), mid[i].copy()
            lbs.append(lb)
            evaluated += len(blo)
        lb = np.concatenate(lbs)
        alive = lb <= upper
        settle = alive & (lb >= upper - eps)
        split = alive & ~settle
        settled.append((queue_lo[settle], queue_hi[settle], lb[settle]))
        blo, bhi = queue_lo[split], queue_hi[split]
        widest = np.argmax((bhi - blo) / scale, axis=1)
        rows = np.arange(len(blo))
        cut = blo[rows, widest] / 2 + bhi[rows, widest] / 2
        left_hi, right_lo = bhi.copy(), blo.copy()
        left_hi[rows, widest] = cut
        right_lo[rows, widest] = cut
        queue_lo, queue_hi = np.concatenate([blo, right_lo]), np.concatenate([left_hi, bhi])
        queue_lb = np.concatenate([lb[split], lb[split]])
        if progress is not None:
            progress(f"iteration {iterations}: {len(queue_lo)} boxes, upper {upper:.12f}")
    s_lo = np.concatenate([s[0] for s in settled]) if settled else np.zeros((0, p))
    s_hi = np.concatenate([s[1] for s in settled]) if settled else np.zeros((0, p))
    s_lb = np.concatenate([s[2] for s in settled]) if settled else np.zeros(0)
    keep = s_lb <= upper  # the upper bound kept falling: boxes now above it hold no minimizer
    s_lo, s_hi, s_lb = s_lo[keep], s_hi[keep], s_lb[keep]
    lower = float(np.min(s_lb)) if s_lb.size else upper
    if reason:
        lower = min(lower, float(np.min(queue_lb)))
    order = np.argsort(s_lb)[:KEPT_BOXES]
    hull = tuple((float(a), float(b)) for a, b in zip(s_lo.min(axis=0), s_hi.max(axis=0))) if len(s_lb) else ()
    return BnBResult(eps, not reason and upper - lower <= eps, lower, upper, tuple(float(x) for x in best),
                     tuple(tuple((float(a), float(b)) for a, b in zip(s_lo[i], s_hi[i])) for i in order),
                     int(len(s_lb)), hull, evaluated, max_queue, iterations, time.perf_counter() - t0, reason)
