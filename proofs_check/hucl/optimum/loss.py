"""The population HUCL loss of n points per class, batched over configurations (torch, float64).

The latent-class model of docs/theory.md, sections 1 and 3: C balanced classes, class c holding n equally likely
points z_{c,1..n} on the unit sphere of R^d (n = 1: a collapsed configuration), label positives (x^+ an
independent uniform draw from the anchor's class, possibly x itself), k negatives i.i.d. from the marginal
(uniform over all N = C n points, the anchor included) tilted by e^{beta s}:

.. math::

    L_{\\mathrm{HUCL}}(Z) = \\frac1N \\sum_x \\frac1n \\sum_{p \\sim x}
        \\sum_{y_1..y_k} \\prod_i q_x(y_i)\\, \\psi_k\\big((s_{x y_i} - s_{x p})_i\\big), \\qquad
    q_x(y) = \\frac{e^{\\beta s_{xy}}}{\\sum_{y'} e^{\\beta s_{xy'}}},

where s_ab = <z_a, z_b>, p ranges over the n points of x's class and psi is ``infonce`` (or ``infonce-mean``) at
temperature tau. For these psi,

.. math::

    \\psi_k(t) = \\log\\Big(1 + e^{-s_{xp}/\\tau - \\sigma} \\sum_i e^{s_{x y_i}/\\tau}\\Big), \\qquad
    \\sigma = 0 \\ (\\texttt{infonce}),\\ \\log k\\ (\\texttt{infonce-mean}),

so the sum over the k negatives depends on the anchor only (not on the positive): :func:`point_loss` enumerates
the multisets of k point ids once (multinomial weights; psi is symmetric), forms log sum_i e^{s_{x y_i}/tau} per
anchor and multiset, and applies softplus for each positive. Cost: N n M terms with M = C(N + k - 1, k).

Sources: docs/theory.md, section 3 (population loss, the four settings) and section 4 ("HUCL: an open problem");
jiang2025hard. Cross-checked against :func:`ncgeom.population.population_loss` in tests/test_hucl_optimum.py.
"""

from __future__ import annotations

import functools
import itertools
import math
from typing import Literal

import numpy as np

from ncgeom.validate import require_choice, require_int, require_real

__all__ = ["PSI_NAMES", "MAX_MULTISETS", "multiset_table", "point_loss", "collapsed_gram_loss", "unit"]

PsiOption = Literal["infonce", "infonce-mean"]
PSI_NAMES: tuple[PsiOption, ...] = ("infonce", "infonce-mean")
MAX_MULTISETS = 200_000  # multisets of k of N point ids enumerated by point_loss (N = 18, k = 4: 5,985)


@functools.cache
def multiset_table(num_points: int, num_negatives: int) -> tuple[np.ndarray, np.ndarray]:
    """(tuples [M, k] int64, log multinomial coefficients [M]) of the multisets of k ids among ``num_points``.

    Example: 2 points, k = 2 gives (0, 0), (0, 1), (1, 1) with coefficients 1, 2, 1.
    """
    n = require_int("num_points", num_points, min_value=1)
    k = require_int("num_negatives", num_negatives, min_value=1)
    if math.comb(n + k - 1, k) > MAX_MULTISETS:
        raise ValueError(f"num_points {n} and num_negatives {k} give {math.comb(n + k - 1, k)} multisets, "
                         f"more than {MAX_MULTISETS}")
    tuples = np.array(list(itertools.combinations_with_replacement(range(n), k)), dtype=np.int64).reshape(-1, k)
    counts = np.stack([np.bincount(t, minlength=n) for t in tuples])
    log_coef = math.lgamma(k + 1) - np.array([sum(math.lgamma(int(c) + 1) for c in row) for row in counts])
    tuples.setflags(write=False)
    log_coef.setflags(write=False)
    return tuples, log_coef


def unit(points):
    """Rows of ``points`` [..., N, d] divided by their norms (torch): the sphere."""
    return points / points.norm(dim=-1, keepdim=True)


def point_loss(points, *, per_class: int, beta: float, tau: float = 1.0, num_negatives: int = 1,
               psi: PsiOption = "infonce"):
    """L_HUCL of the module docstring for configurations ``points`` [..., C n, d] (torch, differentiable).

    Rows are normalized to the unit sphere first; point j belongs to class j // n (``per_class`` = n). Returns a
    tensor [...]. Example: C = 2 antipodal collapsed classes, beta = 0, k = 1, tau = 1 give
    (1/2) log 2 + (1/2) log(1 + e^-2) = 0.4100.
    """

    n = require_int("per_class", per_class, min_value=1)
    beta = require_real("beta", beta, min_value=0.0)
    tau = require_real("tau", tau, min_value=0.0, min_inclusive=False)
    k = require_int("num_negatives", num_negatives, min_value=1)
    psi = require_choice("psi", psi, PSI_NAMES)
    num_points = points.shape[-2]
    if num_points % n:
        raise ValueError(f"per_class must divide the number of points {num_points}, got {n}")
    z = unit(points)
    gram = z @ z.transpose(-1, -2)  # [..., N, N]
    return _gram_point_loss(gram, per_class=n, beta=beta, tau=tau, num_negatives=k, psi=psi)


def _gram_point_loss(gram, *, per_class: int, beta: float, tau: float, num_negatives: int, psi: str):
    import torch

    n, k = per_class, num_negatives
    num_points = gram.shape[-1]
    tuples, log_coef = (torch.from_numpy(a.copy()) for a in multiset_table(num_points, k))
    log_q = torch.log_softmax(beta * gram, dim=-1)  # [..., N(anchor), N]
    log_w = log_coef + log_q[..., tuples].sum(dim=-1)  # [..., N, M]
    log_u = torch.logsumexp(gram[..., tuples] / tau, dim=-1)  # [..., N, M]
    if psi == "infonce-mean":
        log_u = log_u - math.log(k)
    idx = torch.arange(num_points)
    own = (idx // n)[:, None] * n + torch.arange(n)[None, :]  # [N, n] the points of each anchor's class
    s_pos = torch.gather(gram, -1, own.expand(*gram.shape[:-2], num_points, n))  # [..., N, n]
    terms = torch.nn.functional.softplus(log_u[..., None, :] - s_pos[..., :, None] / tau)  # [..., N, n, M]
    per_anchor = (terms * log_w.exp()[..., None, :]).sum(dim=-1).mean(dim=-1)  # [..., N]
    return per_anchor.mean(dim=-1)


def collapsed_gram_loss(gram, *, beta: float, tau: float = 1.0, num_negatives: int = 1,
                        psi: PsiOption = "infonce"):
    """L_HUCL of a collapsed configuration (n = 1) from its class Gram [..., C, C] (unit diagonal; torch).

    The same loss as :func:`point_loss` with ``per_class = 1``, written for a Gram given directly (the
    certificates and the bound evaluate Grams, not vectors).
    """
    beta = require_real("beta", beta, min_value=0.0)
    tau = require_real("tau", tau, min_value=0.0, min_inclusive=False)
    k = require_int("num_negatives", num_negatives, min_value=1)
    psi = require_choice("psi", psi, PSI_NAMES)
    return _gram_point_loss(gram, per_class=1, beta=beta, tau=tau, num_negatives=k, psi=psi)
