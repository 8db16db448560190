"""The HUCL minimum over collapsed configurations vs beta (multi-start exploration), and the equiangular slope.

:func:`explore_hucl` minimizes L_HUCL (``proofs_check.hucl.loss``) over unit class vectors in R^d for each
beta (batched L-BFGS, ``proofs_check.hucl.search.multistart``; one start at the ETF, the others Gaussian) and
reports the minimum found, the NC value (closed form, ``ncgeom.theory.nc_value``), the same computed
directly, the Harris bound L_UCL(NC) (docs/theory.md, Theorem 1: every value found must be >= it) and the
minimizer's distance to the ETF Gram. A local optimizer cannot certify a global minimum: the numbers are
an exploration.

:func:`equiangular_slope_at_nc` is the slope of L_HUCL along M(rho) = (1 - rho) I + rho 11^T at the ETF,
the direction that exists only for d >= C (the lift block of ``proofs_check.hucl.jets``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from ncgeom.geometry import gram_etf_residual, simplex_etf
from ncgeom.losses import make_psi
from ncgeom.theory import nc_value
from ncgeom.validate import require_int, require_real
from ncgeom.vocabulary import PsiName
from proofs_check.hucl.loss import hucl_collapsed_loss, hucl_gram_loss
from proofs_check.hucl.search import multistart

__all__ = ["HUCLExploration", "explore_hucl", "equiangular_slope_at_nc", "DEFAULT_BETAS"]

DEFAULT_BETAS: tuple[float, ...] = (0.0, 1.0, 2.0, 5.0, 10.0, 30.0)


@dataclass(frozen=True)
class HUCLExploration:
    """Numbers of the HUCL exploration, one entry per beta.

    min_found : smallest L_HUCL found (over starts); nc_value : L_HUCL at the ETF (closed form);
    nc_value_direct : the same by :func:`proofs_check.hucl.loss.hucl_collapsed_loss` at the ETF;
    harris_bound : L_UCL(NC), the same for every beta; etf_distance : ||M* - G_ETF||_F of the minimizer;
    min_off_diagonal / max_off_diagonal : extreme off-diagonal entries of M* (ETF: -1/(C-1));
    minimizer_rank : numerical rank of M* (eigenvalues > 1e-6); minimizer_grams : M* per beta;
    slope_at_nc : :func:`equiangular_slope_at_nc` (meaningful as a direction of R^d only for d >= C).
    """

    psi: str
    tau: float
    num_classes: int
    num_negatives: int
    dim: int
    num_starts: int
    betas: tuple[float, ...]
    min_found: tuple[float, ...]
    nc_value: tuple[float, ...]
    nc_value_direct: tuple[float, ...]
    harris_bound: float
    etf_distance: tuple[float, ...]
    min_off_diagonal: tuple[float, ...]
    max_off_diagonal: tuple[float, ...]
    minimizer_rank: tuple[int, ...]
    slope_at_nc: tuple[float, ...]
    minimizer_grams: tuple[tuple[tuple[float, ...], ...], ...]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def equiangular_slope_at_nc(*, num_classes: int, num_negatives: int, beta: float, psi) -> float:
    """d/drho L_HUCL(M(rho)) at rho = -1/(C-1), along M(rho) = (1 - rho) I + rho 11^T.

    M(rho) is the Gram of C unit vectors with equal pairwise inner products rho; for rho > -1/(C-1) it has
    rank C, so the path needs d >= C. For k = 1, infonce tau = 1 the slope is
    (1 - q)[g'(rho) - beta q (log 2 - g(rho))], q = pi_beta, g(rho) = log(1 + e^(rho - 1)); it turns negative
    at the local threshold of d >= C when the lift block is the first to turn (C = 4: beta = 0.877374).
    """
    import torch

    c = require_int("num_classes", num_classes, min_value=2)
    beta = require_real("beta", beta, min_value=0.0)
    rho = torch.tensor(-1.0 / (c - 1), dtype=torch.float64, requires_grad=True)
    eye = torch.eye(c, dtype=torch.float64)
    gram = (1 - rho) * eye + rho * torch.ones(c, c, dtype=torch.float64)
    (slope,) = torch.autograd.grad(hucl_gram_loss(gram, beta=beta, num_negatives=num_negatives, psi=psi), rho)
    return float(slope)


def explore_hucl(*, num_classes: int, dim: int, num_negatives: int = 1, betas=DEFAULT_BETAS,
                 psi: PsiName = "infonce", tau: float = 1.0, margin: float = 1.0, num_starts: int = 6,
                 max_iter: int = 300, generator) -> HUCLExploration:
    """Minimize L_HUCL over collapsed configurations in R^dim for each beta (module docstring).

    Parameters
    ----------
    num_classes : int
        C >= 2.
    dim : int
        d >= C - 1, the embedding dimension (the claim-3 runs use d = C - 1).
    num_negatives : int
        k in 1..3 (the expectation enumerates C^k tuples).
    betas : sequence of float
        Hardness values >= 0.
    psi, tau, margin :
        The loss (a built-in name) and its parameters.
    num_starts : int
        Starts per beta: the ETF plus ``num_starts - 1`` Gaussian random starts.
    generator : torch.Generator
        Source of the random starts.
    """
    import torch

    c = require_int("num_classes", num_classes, min_value=2)
    d = require_int("dim", dim, min_value=c - 1)
    k = require_int("num_negatives", num_negatives, min_value=1, max_value=3)
    starts = require_int("num_starts", num_starts, min_value=1)
    betas = tuple(require_real("beta", float(b), min_value=0.0) for b in betas)
    if not isinstance(generator, torch.Generator):
        raise ValueError("generator must be a torch.Generator")
    loss_psi = make_psi(psi, tau=tau, margin=margin)
    etf = torch.as_tensor(simplex_etf(c, d), dtype=torch.float64)
    out: dict[str, list] = {key: [] for key in ("min", "nc", "direct", "dist", "lo", "hi", "rank", "gram", "slope")}
    for beta in betas:
        init = torch.stack([etf] + [torch.randn(c, d, generator=generator, dtype=torch.float64)
                                    for _ in range(starts - 1)])
        result = multistart(lambda u, beta=beta: hucl_collapsed_loss(u, beta=beta, num_negatives=k, psi=loss_psi),
                            init, max_iter=max_iter)
        if not np.isfinite(result.values[result.best]):
            raise RuntimeError(f"no start gave a finite HUCL loss at beta = {beta}")
        best_m = result.grams[result.best]
        with torch.no_grad():
            direct = float(hucl_collapsed_loss(etf, beta=beta, num_negatives=k, psi=loss_psi))
        off = best_m[~np.eye(c, dtype=bool)]
        out["min"].append(float(result.values[result.best]))
        out["nc"].append(nc_value("hucl", psi, num_classes=c, num_negatives=k, beta=beta, tau=tau, margin=margin))
        out["direct"].append(direct)
        out["dist"].append(gram_etf_residual(best_m))
        out["lo"].append(float(off.min()))
        out["hi"].append(float(off.max()))
        out["rank"].append(int((np.linalg.eigvalsh(best_m) > 1e-6).sum()))
        out["gram"].append(tuple(tuple(float(x) for x in row) for row in best_m))
        out["slope"].append(equiangular_slope_at_nc(num_classes=c, num_negatives=k, beta=beta, psi=loss_psi))
    harris = nc_value("ucl", psi, num_classes=c, num_negatives=k, tau=tau, margin=margin)
    return HUCLExploration(
        psi=str(psi), tau=tau, num_classes=c, num_negatives=k, dim=d, num_starts=starts, betas=betas,
        min_found=tuple(out["min"]), nc_value=tuple(out["nc"]), nc_value_direct=tuple(out["direct"]),
        harris_bound=harris, etf_distance=tuple(out["dist"]), min_off_diagonal=tuple(out["lo"]),
        max_off_diagonal=tuple(out["hi"]), minimizer_rank=tuple(out["rank"]), slope_at_nc=tuple(out["slope"]),
        minimizer_grams=tuple(out["gram"]),
    )
