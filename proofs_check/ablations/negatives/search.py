"""The multi-start search of Theorems 2 and 3 under correlated negatives: is NC still the minimizer? (numerical).

Sources: docs/theory.md, section 4 (Theorems 1-3 and their proofs); jiang2025hard, Theorems 1-3; harris1960.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ncgeom.geometry import simplex_etf
from ncgeom.losses.psi import make_psi
from ncgeom.population import FiniteLatentModel
from ncgeom.validate import require_int
from ncgeom.vocabulary import PsiName, Setting, effective_beta
from proofs_check.ablations.negatives.laws import START_NOISE
from proofs_check.ablations.negatives.population import batched_loss, law_tables
from proofs_check.hucl.search import multistart

__all__ = ["search"]


def search(num_classes: int, per_class: int, num_negatives: int, setting: Setting, psi_name: PsiName, *,
           family: str, rho: float, beta: float = 0.0, num_random: int, generator, max_iter: int = 300) -> dict[str, Any]:
    """Multi-start L-BFGS (float64) of :func:`batched_loss` in d = C - 1 from ``num_random`` Gaussian starts and
    two perturbed NCs; returns the best value, the NC value, their difference and the best points [N, d]."""
    import torch  # heavy optional import

    c, m = require_int("num_classes", num_classes, min_value=2), require_int("per_class", per_class, min_value=1)
    d = c - 1
    b = effective_beta(setting, beta)
    psi = make_psi(psi_name, tau=1.0)
    tables = law_tables(c, m, num_negatives, setting, family, rho)
    nc = torch.as_tensor(np.repeat(simplex_etf(c, d), m, axis=0))
    noise = START_NOISE * torch.randn(2, c * m, d, generator=generator, dtype=torch.float64)
    starts = torch.cat([torch.randn(num_random, c * m, d, generator=generator, dtype=torch.float64), nc + noise])
    found = multistart(lambda u: batched_loss(u, tables, per_class=m, psi=psi, beta=b), starts, max_iter=max_iter)
    nc_value = float(batched_loss(nc[None], tables, per_class=m, psi=psi, beta=b)[0])
    best = float(found.values[found.best])
    return {"C": c, "per_class": m, "k": num_negatives, "setting": setting, "psi": psi_name, "beta": b, "rho": rho,
            "family": family, "best": best, "nc": nc_value, "best_minus_nc": best - nc_value,
            "points": found.vectors[found.best], "starts": num_random + 2, "max_grad": found.max_grad}


def _model_of(points: np.ndarray, num_classes: int) -> FiniteLatentModel:
    return FiniteLatentModel(np.split(np.asarray(points, dtype=np.float64), num_classes))
