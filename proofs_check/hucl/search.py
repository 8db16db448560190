"""Global switch of HUCL over collapsed configurations: the smallest beta at which some configuration beats NC.

beta_sw(C, d) = inf { beta : min_V L(V) < L(NC) } over unit class vectors V [C, d]. It is <= the local
threshold (above that, configurations next to NC beat it). It is searched for, not proven:

1. on an ascending beta grid, :func:`multistart` minimizes the loss from Gaussian random starts, from
   structured starts (p antipodal pairs on orthogonal axes plus C - 2p orthonormal vectors, for each p
   that fits in R^d, slightly perturbed) and from perturbed ETFs, all at once (one batched L-BFGS in float64
   on the sum of the independent losses); the first grid beta whose best value is below L(NC) - ``value_tol``
   gives the witness;
2. bisection between that beta and the previous grid point, re-minimizing from the current witness at each
   midpoint (continuation), to ``beta_tol``;
3. the witness at the upper end of the bracket is re-evaluated in interval arithmetic: L(witness) < L(NC)
   there is then exact (the upper end of the bracket is a proven upper bound on beta_sw). The lower end is
   only as good as the search (no start found a better configuration there).

When the witness at the switch is close to the ETF (its Gram within ``near_nc`` of the ETF Gram), the switch
is the local bifurcation and coincides with the local threshold; otherwise it is a first-order switch to a
distant configuration, which :func:`describe_gram` names.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from ncgeom.geometry import gram_etf_residual, simplex_etf
from ncgeom.threads import one_torch_thread
from ncgeom.validate import require_int, require_real

__all__ = ["MultiStart", "SwitchSearch", "structured_starts", "multistart", "describe_gram", "search_switch",
           "interval_loss_gap", "VALUE_TOL", "NEAR_NC"]

VALUE_TOL = 1e-10  # float64 losses are sums of C^2 terms of size O(1): rounding far below this
NEAR_NC = 0.05  # ||M - G_ETF||_F below which a witness counts as the bifurcating branch of NC


@dataclass(frozen=True)
class MultiStart:
    """Result of :func:`multistart` at one beta: values [S], unit vectors [S, C, d], Grams [S, C, C], the largest
    final gradient norm and the index of the best start."""

    values: np.ndarray
    vectors: np.ndarray
    grams: np.ndarray
    max_grad: float
    best: int


def structured_starts(num_classes: int, dim: int, *, noise: float, generator) -> list:
    """p antipodal pairs on axes 0..p-1 and C - 2p unit vectors on the next axes, for each p with C - p <= d."""
    import torch

    out = []
    for p in range(1, num_classes // 2 + 1):
        if num_classes - p > dim:
            continue
        v = torch.zeros(num_classes, dim, dtype=torch.float64)
        for i in range(p):
            v[2 * i, i], v[2 * i + 1, i] = 1.0, -1.0
        for j in range(num_classes - 2 * p):
            v[2 * p + j, p + j] = 1.0
        out.append(v + noise * torch.randn(num_classes, dim, generator=generator, dtype=torch.float64))
    return out


def multistart(loss: Callable, starts, *, max_iter: int = 3000) -> MultiStart:
    """Minimize ``loss`` (vectors [S, C, d] -> values [S], torch) from every start at once (batched L-BFGS)."""
    import torch

    u = starts.clone().requires_grad_(True)
    opt = torch.optim.LBFGS([u], max_iter=max_iter, tolerance_grad=1e-11, tolerance_change=1e-16, history_size=50,
                            line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad()
        value = loss(u).sum()
        value.backward()
        return value

    with one_torch_thread():
        opt.step(closure)
        u.grad = None
        values = loss(u)
        values.sum().backward()
    with torch.no_grad():
        v = u / u.norm(dim=-1, keepdim=True)
        grams = (v @ v.transpose(-1, -2)).numpy()
        vals = values.detach().numpy()
        max_grad = float(u.grad.norm(dim=(-1, -2)).max())
    return MultiStart(vals, v.numpy(), grams, max_grad, int(np.argmin(vals)))


def describe_gram(gram: np.ndarray, *, antipodal: float = -0.9, spread: float = 1e-3) -> str:
    """A pattern name for a class Gram: near-antipodal pairs, equiangular groups, the ETF.

    Pairs with inner product below ``antipodal`` are matched greedily; the other off-diagonal entries are
    summarized by their range (``spread``: equal within it counts as equiangular).
    """
    m = np.asarray(gram, dtype=float)
    c = m.shape[0]
    if gram_etf_residual(m) < NEAR_NC:
        return f"near the ETF (||M - G_ETF||_F = {gram_etf_residual(m):.2g})"
    off = m[~np.eye(c, dtype=bool)]
    if off.max() - off.min() < spread:
        return f"equiangular, all inner products {off.mean():.4f} (ETF: {-1 / (c - 1):.4f})"
    pairs, used = [], set()
    edges = [(i, j) for i in range(c) for j in range(i + 1, c)]
    for a, b in sorted(edges, key=lambda ab: m[ab]):
        if m[a, b] < antipodal and a not in used and b not in used:
            pairs.append((a, b))
            used |= {a, b}
    rest = [i for i in range(c) if i not in used]
    parts = [f"{len(pairs)} near-antipodal pair(s) (inner products {', '.join(f'{m[p]:.4f}' for p in pairs)})"]
    if len(rest) >= 2:
        among = np.array([m[a, b] for a in rest for b in rest if a < b])
        parts.append(f"the other {len(rest)} classes with mutual inner products in [{among.min():.4f}, {among.max():.4f}]")
    if pairs and rest:
        cross = np.array([m[a, r] for p in pairs for a in p for r in rest])
        parts.append(f"pair-to-rest inner products in [{cross.min():.4f}, {cross.max():.4f}]")
    rank = int((np.linalg.eigvalsh(m) > 1e-6).sum())
    return "; ".join(parts) + f"; rank {rank}"


def interval_loss_gap(vectors: np.ndarray, *, beta: float, tau: float = 1.0) -> list[float]:
    """Enclosure [lo, hi] of L(V) - L(NC) (k = 1, infonce) in mpmath interval arithmetic.

    ``vectors`` [C, d] are floats taken as exact; rows are normalized in intervals; the ETF Gram is the exact
    rational matrix. An enclosure below 0 proves that V beats NC at this beta.
    """
    from mpmath import iv  # heavy optional import (interval arithmetic), only for certificates

    v = [[iv.mpf(float(x)) for x in row] for row in np.asarray(vectors, dtype=float)]
    c = len(v)
    norms = [iv.sqrt(sum(x * x for x in row)) for row in v]
    gram = [[(1 if a == b else sum(x * y for x, y in zip(v[a], v[b])) / (norms[a] * norms[b])) for b in range(c)]
            for a in range(c)]
    etf = [[1 if a == b else iv.mpf(-1) / (c - 1) for b in range(c)] for a in range(c)]
    b, t = iv.mpf(beta), iv.mpf(tau)

    def loss(m) -> Any:
        total = 0
        for row in m:
            tilt = [iv.exp(b * x) for x in row]
            z = sum(tilt)
            total += sum(w * iv.log(1 + iv.exp((x - 1) / t)) for w, x in zip(tilt, row)) / z
        return total / c

    gap = loss(gram) - loss(etf)
    return [float(gap.a), float(gap.b)]


@dataclass(frozen=True)
class SwitchSearch:
    """Result of :func:`search_switch` (see the module docstring for the method and its coverage).

    grid / best_minus_nc : the scanned betas and min found - L(NC) at each (scan stops at the first witness);
    bracket : [lo, hi] after bisection (lo None when the first grid point already had a witness), or None;
    kind : "first-order" (distant witness), "local" (witness near the ETF: the local bifurcation) or "none";
    witness_gram / description : the witness at ``bracket[1]``; interval_gap : enclosure of its L - L(NC) there;
    num_random, num_structured, num_near_nc, max_iter, value_tol, beta_tol, max_grad : the coverage.
    """

    num_classes: int
    dim: int
    grid: tuple[float, ...]
    best_minus_nc: tuple[float, ...]
    bracket: tuple[float | None, float] | None
    kind: str
    witness_gram: tuple[tuple[float, ...], ...] | None
    description: str
    interval_gap: tuple[float, float] | None
    num_random: int
    num_structured: int
    num_near_nc: int
    max_iter: int
    value_tol: float
    beta_tol: float
    max_grad: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def search_switch(*, num_classes: int, dim: int, grid, loss_at: Callable[[float], Callable],
                  nc_value_at: Callable[[float], float], generator, num_random: int = 32, num_near_nc: int = 4,
                  max_iter: int = 3000, beta_tol: float = 1e-6, value_tol: float = VALUE_TOL,
                  certify: Callable[[np.ndarray, float], list[float]] | None = None) -> SwitchSearch:
    """Search the global switch on an ascending ``grid`` of betas (module docstring).

    ``loss_at(beta)`` returns the batched loss (vectors [S, C, d] -> [S], torch); ``nc_value_at(beta)`` the
    loss at NC; ``certify(vectors, beta)`` (optional) an exact enclosure of L(vectors) - L(NC).
    """
    import torch

    c = require_int("num_classes", num_classes, min_value=3)
    d = require_int("dim", dim, min_value=c - 1)
    grid = tuple(require_real("beta", float(b), min_value=0.0) for b in grid)
    if list(grid) != sorted(grid) or not grid:
        raise ValueError(f"grid must be a non-empty ascending sequence of betas, got {grid}")
    require_int("num_random", num_random, min_value=0)
    etf = torch.as_tensor(simplex_etf(c, d))
    scanned, gaps, max_grad = [], [], 0.0
    witness = None
    num_structured = len(structured_starts(c, d, noise=0.0, generator=generator))
    for i, beta in enumerate(grid):
        starts = ([torch.randn(c, d, generator=generator, dtype=torch.float64) for _ in range(num_random)]
                  + structured_starts(c, d, noise=0.05, generator=generator)
                  + [etf + 0.3 * torch.randn(c, d, generator=generator, dtype=torch.float64) for _ in range(num_near_nc)])
        result = multistart(loss_at(beta), torch.stack(starts), max_iter=max_iter)
        gap = float(result.values[result.best] - nc_value_at(beta))
        scanned.append(beta)
        gaps.append(gap)
        max_grad = max(max_grad, result.max_grad)
        if gap < -value_tol:
            witness = (i, torch.as_tensor(result.vectors[result.best]))
            break
    if witness is None:
        return SwitchSearch(c, d, tuple(scanned), tuple(gaps), None, "none", None, "no configuration below NC found",
                            None, num_random, num_structured, num_near_nc, max_iter, value_tol, beta_tol, max_grad)
    i, current = witness
    lo: float | None = grid[i - 1] if i > 0 else None
    hi = grid[i]
    if lo is not None:
        while hi - lo > beta_tol:
            mid = (lo + hi) / 2
            result = multistart(loss_at(mid), current[None], max_iter=max_iter)
            if result.values[0] - nc_value_at(mid) < -value_tol:
                hi, current = mid, torch.as_tensor(result.vectors[0])
            else:
                lo = mid
    with torch.no_grad():
        v = current / current.norm(dim=-1, keepdim=True)
        gram = (v @ v.T).numpy()
    kind = "local" if gram_etf_residual(gram) < NEAR_NC else "first-order"
    gap_enclosure = None
    if certify is not None:
        lo_gap, hi_gap = certify(current.numpy(), hi)
        gap_enclosure = (lo_gap, hi_gap)
    return SwitchSearch(c, d, tuple(scanned), tuple(gaps), (lo, hi), kind,
                        tuple(tuple(float(x) for x in row) for row in gram), describe_gram(gram), gap_enclosure,
                        num_random, num_structured, num_near_nc, max_iter, value_tol, beta_tol, max_grad)

