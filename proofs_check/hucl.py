"""HUCL, the paper's open problem: is NC the minimizer of the hard unsupervised loss? (exploration)

Over collapsed configurations (f(x) = v_c for x in class c, unit class vectors v_c in R^d with any Gram
M = V V^T), label-based positives (<z, z+> = 1) and balanced classes, the HUCL population loss is

.. math::

    L_{\\mathrm{HUCL}}(V) = \\frac1C \\sum_c \\sum_{c_1..c_k} \\prod_i q_c(c_i)\\,
        \\psi_k\\big((M_{c c_i} - 1)_i\\big), \\qquad
    q_c(c') = \\frac{e^{\\beta M_{cc'}}}{\\sum_{c''} e^{\\beta M_{cc''}}}

where C = ``num_classes``, k = ``num_negatives``, beta = hardness (exponential tilt, docs/theory.md section 3;
negatives from the marginal, so c' = c is a collision with M_cc = 1). At the ETF this is
``nc_value("hucl", ...)`` (collision probability pi_beta); Theorem 1 (Harris) gives
L_HUCL >= L_UCL >= L_UCL(NC) (``nc_value("ucl", ...)``), not tight for beta > 0.

:func:`explore_hucl` minimizes L_HUCL numerically (multi-start L-BFGS in torch float64, explicit
generator; one start at the ETF, the others random) for each beta, and reports the minimum found, the
NC value, the Harris bound and the distance of the minimizer's Gram to the ETF Gram. It is an
exploration: the check it feeds has status ``info`` (a local optimizer cannot certify a global minimum).

It also reports the slope of L_HUCL at NC along the equiangular path M(rho) = (1 - rho) I + rho 11^T
(:func:`equiangular_slope_at_nc`) and the hardness :func:`critical_beta` above which that slope is
negative: there NC is not even a local minimizer over collapsed configurations (e.g. C = 4, k = 1,
infonce tau = 1: beta_c = 0.87737). [derived; not a statement of the paper]

Sources: docs/theory.md section 4 ("HUCL [claim: open problem]") and section 9, claim 3; jiang2025hard.
"""

from __future__ import annotations

import functools
import itertools
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from ncgeom.geometry import gram_etf_residual, simplex_etf
from ncgeom.losses import make_psi
from ncgeom.theory import nc_value
from ncgeom.threads import one_torch_thread
from ncgeom.validate import require_int, require_real
from ncgeom.vocabulary import PsiName
from proofs_check.records import CheckResult

__all__ = [
    "HUCLExploration",
    "hucl_collapsed_loss",
    "hucl_gram_loss",
    "equiangular_slope_at_nc",
    "critical_beta",
    "explore_hucl",
    "check_hucl",
    "checks",
    "DEFAULT_BETAS",
]

DEFAULT_BETAS: tuple[float, ...] = (0.0, 1.0, 2.0, 5.0, 10.0, 30.0)




@dataclass(frozen=True)
class HUCLExploration:
    """Numbers of the HUCL exploration, one entry per beta (plotted by the figures helper).

    min_found : smallest L_HUCL found (over starts); nc_value : L_HUCL at the ETF (closed form);
    nc_value_direct : the same computed by :func:`hucl_collapsed_loss` at the ETF (cross-check);
    harris_bound : L_UCL(NC), the same for every beta; etf_distance : ||M* - G_ETF||_F of the minimizer;
    min_off_diagonal / max_off_diagonal : extreme off-diagonal entries of M* (ETF: -1/(C-1));
    minimizer_rank : numerical rank of M* (eigenvalues > 1e-6);
    slope_at_nc : :func:`equiangular_slope_at_nc` (negative: NC is not a local minimizer);
    critical_beta : :func:`critical_beta` (None if the slope never turns negative for beta <= 64).
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
    critical_beta: float | None
    minimizer_grams: tuple[tuple[tuple[float, ...], ...], ...]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def hucl_collapsed_loss(vectors, *, beta: float, num_negatives: int, psi):
    """L_HUCL of the module docstring for class vectors [C, d] (torch float64, differentiable).

    Rows are normalized to the unit sphere first. ``psi`` is a :class:`ncgeom.losses.Psi`.
    Example: C = 2 antipodal vectors, beta = 0, k = 1, infonce tau = 1 give
    (1/2) log 2 + (1/2) log(1 + e^-2).
    """
    v = vectors / vectors.norm(dim=1, keepdim=True)
    return hucl_gram_loss(v @ v.T, beta=beta, num_negatives=num_negatives, psi=psi)


def hucl_gram_loss(gram, *, beta: float, num_negatives: int, psi):
    """L_HUCL as a function of the class Gram matrix M [C, C] (unit diagonal), torch, differentiable."""
    import torch

    beta = require_real("beta", beta, min_value=0.0)
    require_int("num_negatives", num_negatives, min_value=1)
    m = gram
    c = m.shape[0]
    log_q = torch.log_softmax(beta * m, dim=1)  # [C, C]
    k = num_negatives
    tuples = torch.tensor(list(itertools.product(range(c), repeat=k)), dtype=torch.long)  # [C^k, k]
    t = m[:, tuples] - 1.0  # [C, C^k, k]
    log_w = log_q[:, tuples].sum(dim=-1)  # [C, C^k]
    return (log_w.exp() * psi(t)).sum(dim=1).mean()


def equiangular_slope_at_nc(*, num_classes: int, num_negatives: int, beta: float, psi) -> float:
    """d/drho L_HUCL(M(rho)) at rho = -1/(C-1), along M(rho) = (1 - rho) I + rho 11^T.

    M(rho) is the Gram of C unit vectors with equal pairwise inner products rho, feasible for
    rho in [-1/(C-1), 1]; rho = -1/(C-1) is the ETF. A negative slope proves that NC is not a local
    minimizer of L_HUCL over collapsed configurations (moving along the path lowers the loss); a
    positive one proves nothing beyond this path. For k = 1, tau = 1 (infonce) it equals
    (1 - q)[g'(rho) - beta q (log 2 - g(rho))], q = pi_beta, g(rho) = log(1 + e^(rho - 1)).
    """
    import torch

    c = require_int("num_classes", num_classes, min_value=2)
    beta = require_real("beta", beta, min_value=0.0)
    rho = torch.tensor(-1.0 / (c - 1), dtype=torch.float64, requires_grad=True)
    eye = torch.eye(c, dtype=torch.float64)
    gram = (1 - rho) * eye + rho * torch.ones(c, c, dtype=torch.float64)
    (slope,) = torch.autograd.grad(hucl_gram_loss(gram, beta=beta, num_negatives=num_negatives, psi=psi), rho)
    return float(slope)


def critical_beta(*, num_classes: int, num_negatives: int, psi, beta_max: float = 64.0,
                  tol: float = 1e-9) -> float | None:
    """Smallest beta at which :func:`equiangular_slope_at_nc` turns negative (bisection), or None.

    None means the slope is >= 0 at every grid point up to ``beta_max``; 0.0 means it is already negative
    at beta = 0 (not expected for convex psi, where NC minimizes UCL: docs/theory.md section 4, Theorem 3).

    Scans beta = 0, 1/16, 1/8, 1/4, ..., up to ``beta_max`` (doubling) for the first negative slope, then
    bisects to ``tol``; assumes one sign change in that bracket. Above it (up to the next sign change,
    if any) NC is not a local minimizer.
    """
    grid = [0.0] + [2.0**e for e in range(-4, 7) if 2.0**e <= beta_max]

    def slope(beta: float) -> float:
        return equiangular_slope_at_nc(num_classes=num_classes, num_negatives=num_negatives, beta=beta, psi=psi)

    with one_torch_thread():
        negative = [i for i, b in enumerate(grid) if slope(b) < 0]
        if not negative:
            return None
        if negative[0] == 0:  # negative already at beta = 0: the smallest such beta is 0, not "never"
            return 0.0
        lo, hi = grid[negative[0] - 1], grid[negative[0]]
        while hi - lo > tol:
            mid = (lo + hi) / 2
            lo, hi = (lo, mid) if slope(mid) < 0 else (mid, hi)
    return (lo + hi) / 2


def explore_hucl(
    *,
    num_classes: int = 4,
    num_negatives: int = 1,
    betas=DEFAULT_BETAS,
    psi: PsiName = "infonce",
    tau: float = 1.0,
    margin: float = 1.0,
    num_starts: int = 6,
    max_iter: int = 300,
    generator,
) -> HUCLExploration:
    """Minimize L_HUCL over collapsed configurations for each beta (see module docstring).

    Parameters
    ----------
    num_classes : int
        C >= 2; vectors live in d = C dimensions (any Gram matrix is reachable).
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
    k = require_int("num_negatives", num_negatives, min_value=1, max_value=3)
    starts = require_int("num_starts", num_starts, min_value=1)
    betas = tuple(require_real("beta", float(b), min_value=0.0) for b in betas)
    if not isinstance(generator, torch.Generator):
        raise ValueError("generator must be a torch.Generator")
    loss_psi = make_psi(psi, tau=tau, margin=margin)
    etf = torch.as_tensor(simplex_etf(c, c), dtype=torch.float64)
    with one_torch_thread():
        out: dict[str, list] = {key: [] for key in ("min", "nc", "direct", "dist", "lo", "hi", "rank", "gram",
                                                    "slope")}
        for beta in betas:
            best, best_m = float("inf"), None
            for s in range(starts):
                init = etf.clone() if s == 0 else torch.randn(c, c, generator=generator, dtype=torch.float64)
                u = init.requires_grad_(True)
                opt = torch.optim.LBFGS([u], max_iter=max_iter, tolerance_grad=1e-12, tolerance_change=1e-15,
                                        line_search_fn="strong_wolfe")

                def closure(opt=opt, u=u, beta=beta):  # bound now: ruff B023 (called within this iteration)
                    opt.zero_grad()
                    value = hucl_collapsed_loss(u, beta=beta, num_negatives=k, psi=loss_psi)
                    value.backward()
                    return value

                opt.step(closure)
                with torch.no_grad():
                    value = float(hucl_collapsed_loss(u, beta=beta, num_negatives=k, psi=loss_psi))
                    if value < best:
                        v = u / u.norm(dim=1, keepdim=True)
                        best, best_m = value, (v @ v.T).numpy()
            with torch.no_grad():
                direct = float(hucl_collapsed_loss(etf, beta=beta, num_negatives=k, psi=loss_psi))
            if best_m is None:  # every start ended at NaN (best stays inf)
                raise RuntimeError(f"no start gave a finite HUCL loss at beta = {beta}")
            off = best_m[~np.eye(c, dtype=bool)]
            out["min"].append(best)
            out["nc"].append(nc_value("hucl", psi, num_classes=c, num_negatives=k, beta=beta, tau=tau, margin=margin))
            out["direct"].append(direct)
            out["dist"].append(gram_etf_residual(best_m))
            out["lo"].append(float(off.min()))
            out["hi"].append(float(off.max()))
            out["rank"].append(int((np.linalg.eigvalsh(best_m) > 1e-6).sum()))
            out["gram"].append(tuple(tuple(float(x) for x in row) for row in best_m))
            out["slope"].append(equiangular_slope_at_nc(num_classes=c, num_negatives=k, beta=beta, psi=loss_psi))
        beta_c = critical_beta(num_classes=c, num_negatives=k, psi=loss_psi)
    harris = nc_value("ucl", psi, num_classes=c, num_negatives=k, tau=tau, margin=margin)
    return HUCLExploration(
        psi=str(psi), tau=tau, num_classes=c, num_negatives=k, dim=c, num_starts=starts, betas=betas,
        min_found=tuple(out["min"]), nc_value=tuple(out["nc"]), nc_value_direct=tuple(out["direct"]),
        harris_bound=harris, etf_distance=tuple(out["dist"]), min_off_diagonal=tuple(out["lo"]),
        max_off_diagonal=tuple(out["hi"]), minimizer_rank=tuple(out["rank"]), slope_at_nc=tuple(out["slope"]),
        critical_beta=beta_c, minimizer_grams=tuple(out["gram"]),
    )


def check_hucl(*, num_classes: int = 4, num_negatives: int = 1, num_starts: int = 6, seed: int = 0,
               betas=DEFAULT_BETAS) -> CheckResult:
    """Run :func:`explore_hucl` and report it as an ``info`` CheckResult (no verdict)."""
    import torch

    t0 = time.perf_counter()
    result = explore_hucl(num_classes=num_classes, num_negatives=num_negatives, betas=betas,
                          num_starts=num_starts, generator=torch.Generator().manual_seed(seed))
    rows = [{"beta": b, "min_found": m, "nc_value": n, "nc_minus_min": n - m, "harris_bound": result.harris_bound,
             "etf_distance": d, "nc_value_direct": nd, "slope_at_nc": sl}
            for b, m, n, d, nd, sl in zip(result.betas, result.min_found, result.nc_value, result.etf_distance,
                                          result.nc_value_direct, result.slope_at_nc)]
    details = {"critical_beta": result.critical_beta, "max_nc_minus_min": max(r["nc_minus_min"] for r in rows),
               "max_etf_distance": max(result.etf_distance), "harris_bound": result.harris_bound,
               "num_classes": num_classes, "num_negatives": num_negatives, "psi": "infonce", "tau": 1.0,
               "num_starts": num_starts, "seed": seed, "rows": rows,
               "harris_bound_respected": all(m >= result.harris_bound - 1e-9 for m in result.min_found),
               "nc_closed_form_matches_direct": max(abs(a - b) for a, b in zip(result.nc_value, result.nc_value_direct))}
    statement = (r"\text{explore } \min_{V} L_{\mathrm{HUCL}}(V) \text{ vs } L_{\mathrm{HUCL}}(\mathrm{NC}) "
                 r"\text{ and } L_{\mathrm{UCL}}(\mathrm{NC}) \text{ as } \beta \text{ grows}\ (C=" + str(num_classes)
                 + ",\\ k=" + str(num_negatives) + ")")
    return CheckResult(f"hucl_exploration_C{num_classes}_k{num_negatives}", statement, "numeric-torch-lbfgs", "info",
                       details, time.perf_counter() - t0,
                       "docs/theory.md section 4 (HUCL open problem), section 9 claim 3; jiang2025hard")


def checks(*, quick: bool) -> list[Callable[[], CheckResult]]:
    """Quick: C = 4, k = 1, 4 starts; full: also k = 2, and 8 starts."""
    if quick:
        return [functools.partial(check_hucl, num_classes=4, num_negatives=1, num_starts=4)]
    return [functools.partial(check_hucl, num_classes=4, num_negatives=1, num_starts=8),
            functools.partial(check_hucl, num_classes=4, num_negatives=2, num_starts=8)]
