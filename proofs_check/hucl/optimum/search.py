"""Multi-start search of the HUCL minimum over n points per class at one beta (numerical).

:func:`search_optimum` minimizes :func:`proofs_check.hucl.optimum.loss.point_loss` over configurations of C classes of
n points on the unit sphere of R^d with one batched L-BFGS in float64 (:func:`proofs_check.hucl.search.multistart`)
from

- ``num_random`` Gaussian starts (each point i.i.d. N(0, I_d), then normalized);
- structured starts, each perturbed by ``START_NOISE`` (points of a class spread by it too, so that a split can
  develop): NC (the simplex ETF, every point of class c at v_c); p antipodal pairs of classes plus orthonormal
  classes, for each p that fits in R^d (:func:`proofs_check.hucl.search.structured_starts`); a cluster in a cap of
  angular radius ~ 1/sqrt(1 + beta) (the large-beta regime where every class sees the others as hard negatives);
- ``extra`` configurations (the winners at neighbouring betas: continuation along the path);

then re-minimizes the ``POLISHED`` lowest starts one at a time (the batched run shares one line search between starts,
and at large beta a start on a flat, ill-conditioned minimum can stop short of it).

A local optimizer does not certify a global minimum: the result is the best configuration found (evidence
"numerical"); ``proofs_check.hucl.optimum.certify`` certifies C = 3, d = 2 (collapsed) in interval arithmetic.

Source: docs/theory.md, section 4 ("HUCL: an open problem").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from ncgeom.geometry import simplex_etf
from ncgeom.validate import require_int, require_real
from proofs_check.hucl.optimum.loss import PsiOption, point_loss
from proofs_check.hucl.optimum.patterns import Pattern, describe
from proofs_check.hucl.search import multistart, structured_starts

__all__ = ["START_NOISE", "MAX_ITER", "POLISHED", "OptimumSearch", "nc_points", "search_optimum"]

START_NOISE = 0.05
MAX_ITER = 2000
POLISHED = 3  # the lowest starts re-minimized alone after the batched run


@dataclass(frozen=True)
class OptimumSearch:
    """The best configuration found at one beta (module docstring).

    value : loss of the best configuration; nc_value : loss at NC (every point of class c at v_c), same model;
    points : the best configuration [C n][d] (unit rows); pattern : its :class:`Pattern`; values : every start's
    final value (sorted); max_grad : the largest final gradient norm of the POLISHED starts re-minimized alone (the
    best among them); starts : {kind: count}.
    """

    num_classes: int
    dim: int
    per_class: int
    beta: float
    tau: float
    num_negatives: int
    psi: str
    value: float
    nc_value: float
    points: tuple[tuple[float, ...], ...]
    pattern: Pattern
    values: tuple[float, ...]
    max_grad: float
    starts: dict[str, int]
    max_iter: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def nc_points(num_classes: int, dim: int, per_class: int) -> np.ndarray:
    """NC with n points per class: every point of class c at the ETF vertex v_c, [C n, d]."""
    return np.repeat(simplex_etf(num_classes, dim), per_class, axis=0)


def search_optimum(*, num_classes: int, dim: int, per_class: int, beta: float, tau: float = 1.0,
                   num_negatives: int = 1, psi: PsiOption = "infonce", num_random: int, generator,
                   extra: Sequence[np.ndarray] = (), max_iter: int = MAX_ITER) -> OptimumSearch:
    """Minimize the HUCL population loss of C classes of n points in R^d at ``beta`` (module docstring).

    Parameters
    ----------
    num_classes, dim, per_class : int
        C >= 2, d >= 2, n >= 1.
    beta, tau, num_negatives, psi :
        The loss (:func:`proofs_check.hucl.optimum.loss.point_loss`).
    num_random : int
        Gaussian starts.
    generator : torch.Generator
        Source of every random start and perturbation.
    extra : sequence of arrays [C n, d]
        Further starts (not perturbed): continuation from neighbouring betas.
    """
    import torch  # heavy optional import

    c = require_int("num_classes", num_classes, min_value=2)
    d = require_int("dim", dim, min_value=2)
    n = require_int("per_class", per_class, min_value=1)
    beta = require_real("beta", beta, min_value=0.0)
    require_int("num_random", num_random, min_value=0)
    if not isinstance(generator, torch.Generator):
        raise ValueError("generator must be a torch.Generator")

    def noisy(v: np.ndarray) -> Any:
        base = torch.as_tensor(np.repeat(v, n, axis=0) if v.shape[0] == c else v, dtype=torch.float64)
        return base + START_NOISE * torch.randn(base.shape, generator=generator, dtype=torch.float64)

    structured = [simplex_etf(c, d)] + [s.numpy() for s in structured_starts(c, d, noise=0.0, generator=generator)]
    radius = 1.0 / np.sqrt(1.0 + beta)
    cap = np.zeros((c, d))
    cap[:, 0] = 1.0
    cap[:, 1:] = radius * torch.randn(c, d - 1, generator=generator, dtype=torch.float64).numpy()
    starts = ([torch.randn(c * n, d, generator=generator, dtype=torch.float64) for _ in range(num_random)]
              + [noisy(v) for v in structured] + [noisy(cap)]
              + [torch.as_tensor(np.asarray(v, dtype=np.float64)) for v in extra])
    for s in starts:
        if tuple(s.shape) != (c * n, d):
            raise ValueError(f"every start must have shape [C n, d] = [{c * n}, {d}], got {tuple(s.shape)}")

    def loss(u):
        return point_loss(u, per_class=n, beta=beta, tau=tau, num_negatives=num_negatives, psi=psi)

    found = multistart(loss, torch.stack(starts), max_iter=max_iter)
    # polish: the batched L-BFGS shares one line search between all starts, so a start on a flat, ill-conditioned
    # minimum (large beta: every scale is 1/beta) can stop short; the POLISHED lowest starts are re-run alone
    values = found.values.copy()
    vectors = found.vectors.copy()
    polished_grad = 0.0
    for i in np.argsort(values)[:POLISHED]:
        alone = multistart(loss, torch.as_tensor(vectors[i])[None], max_iter=max_iter)
        if alone.values[0] <= values[i]:
            values[i], vectors[i] = alone.values[0], alone.vectors[0]
        polished_grad = max(polished_grad, alone.max_grad)
    best_index = int(np.argmin(values))
    with torch.no_grad():
        nc = float(loss(torch.as_tensor(nc_points(c, d, n))))
    best = vectors[best_index]
    return OptimumSearch(
        num_classes=c, dim=d, per_class=n, beta=beta, tau=tau, num_negatives=num_negatives, psi=psi,
        value=float(values[best_index]), nc_value=nc, points=tuple(tuple(float(x) for x in row) for row in best),
        pattern=describe(best, n), values=tuple(float(x) for x in np.sort(values)), max_grad=polished_grad,
        starts={"random": num_random, "structured": len(structured) + 1, "extra": len(extra)}, max_iter=max_iter)
