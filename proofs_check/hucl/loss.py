"""The HUCL loss of collapsed configurations: the population loss and the batch loss training optimizes.

A collapsed configuration puts every sample of class c at one unit vector v_c in R^d; only the class Gram
M = V V^T [C, C] (unit diagonal) matters. With label positives (<z, z^+> = 1) and balanced classes the
population HUCL loss is (docs/theory.md, section 4, "HUCL: an open problem")

.. math::

    L_{\\mathrm{HUCL}}(M) = \\frac1C \\sum_c \\sum_{c_1..c_k} \\prod_i q_c(c_i)\\,\\psi_k\\big((M_{c c_i} - 1)_i\\big),
    \\qquad q_c(c') = \\frac{e^{\\beta M_{cc'}}}{\\sum_{c''} e^{\\beta M_{cc''}}},

and the weighted batch estimator (docs/theory.md, section 7, ``ncgeom.losses.batch_loss(..., "hucl",
estimator="weighted")``) on a batch holding n_c samples of class c, all at v_c, is

.. math::

    J_n(M) = \\frac{\\sum_c n_c (n_c - 1)\\, \\ell_c}{\\sum_c n_c (n_c - 1)}, \\qquad
    \\ell_c = \\log\\Big(1 + k \\sum_{c'} \\bar q_{cc'}\\, e^{(M_{cc'} - 1)/\\tau}\\Big), \\qquad
    \\bar q_{cc'} = \\frac{w_{cc'} e^{\\beta M_{cc'}}}{\\sum_{c''} w_{cc''} e^{\\beta M_{cc''}}},

where w_cc' = n_c' - [c' = c] counts the anchor's in-batch negatives of class c' (its own class included:
UCL/HUCL negatives are every other batch member). Training draws class-balanced batches whose counts
(:func:`ncgeom.data.class_balanced_counts`) go to uniformly random classes, so the objective it follows in
expectation is the mean of J_n over the distinct count vectors n (:func:`batch_count_assignments`).
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np
from sympy.utilities.iterables import multiset_permutations

from ncgeom.data import class_balanced_counts
from ncgeom.validate import require_int, require_real

__all__ = [
    "hucl_gram_loss",
    "hucl_collapsed_loss",
    "unit_rows",
    "batch_count_assignments",
    "collapsed_batch_loss",
    "MAX_ASSIGNMENTS",
]

MAX_ASSIGNMENTS = 20_000  # distinct count vectors averaged by collapsed_batch_loss (C choose r for C = 10 is <= 252)


def unit_rows(u):
    """Rows of ``u`` [..., C, d] divided by their norms (torch): the sphere normalization of the runs."""
    return u / u.norm(dim=-1, keepdim=True)


def hucl_gram_loss(gram, *, beta: float, num_negatives: int, psi):
    """L_HUCL of the module docstring as a function of the class Gram [..., C, C] (torch, differentiable).

    Leading dimensions are independent configurations. ``psi`` is a :class:`ncgeom.losses.Psi`; k =
    ``num_negatives`` enumerates C^k negative tuples.
    """
    import torch

    beta = require_real("beta", beta, min_value=0.0)
    k = require_int("num_negatives", num_negatives, min_value=1)
    c = gram.shape[-1]
    log_q = torch.log_softmax(beta * gram, dim=-1)  # [..., C, C]
    tuples = torch.tensor(list(itertools.product(range(c), repeat=k)), dtype=torch.long)  # [C^k, k]
    t = gram[..., tuples] - 1.0  # [..., C, C^k, k]
    log_w = log_q[..., tuples].sum(dim=-1)  # [..., C, C^k]
    return (log_w.exp() * psi(t)).sum(dim=-1).mean(dim=-1)


def hucl_collapsed_loss(vectors, *, beta: float, num_negatives: int, psi):
    """L_HUCL for class vectors [..., C, d] (torch), rows normalized to the unit sphere first.

    Example: C = 2 antipodal vectors, beta = 0, k = 1, infonce tau = 1 give (1/2) log 2 + (1/2) log(1 + e^-2).
    """
    v = unit_rows(vectors)
    return hucl_gram_loss(v @ v.transpose(-1, -2), beta=beta, num_negatives=num_negatives, psi=psi)


def batch_count_assignments(num_classes: int, batch_size: int) -> np.ndarray:
    """The distinct class-count vectors n [A, C] of a class-balanced batch, each equally likely.

    The sampler (:mod:`ncgeom.data.batches`) gives the counts of :func:`ncgeom.data.class_balanced_counts`
    (zeros for absent classes) to a uniformly random ordering of the classes. Example: C = 3, B = 7 gives
    the three vectors with one 3 and two 2s.
    """
    c = require_int("num_classes", num_classes, min_value=2)
    counts = np.zeros(c, dtype=np.int64)
    present = class_balanced_counts(c, batch_size)
    counts[: present.size] = present
    _, multiplicity = np.unique(counts, return_counts=True)
    number = math.factorial(c) // math.prod(math.factorial(int(m)) for m in multiplicity)
    if number > MAX_ASSIGNMENTS:
        raise ValueError(f"batch_size {batch_size} with num_classes {c} gives {number} distinct class-count vectors, "
                         f"more than {MAX_ASSIGNMENTS}")
    rows = list(multiset_permutations(counts.tolist()))
    return np.array(rows, dtype=np.int64)


def collapsed_batch_loss(gram, counts, *, beta: float, tau: float, num_negatives: int, weights_gram: Any = None):
    """Mean over count vectors of the weighted-estimator batch loss J_n(M) of the module docstring (torch).

    Parameters
    ----------
    gram : tensor [..., C, C]
        Class Gram matrices (unit diagonal: the sphere).
    counts : array [A, C] of int
        Count vectors n (:func:`batch_count_assignments`), averaged with equal weights.
    beta, tau, num_negatives :
        Hardness, temperature and the integer k of the weighted estimator.
    weights_gram : tensor [..., C, C], optional
        The Gram the tilt weights q-bar are computed from (default ``gram``). Passing ``gram.detach()``
        gives the loss whose gradient is the detached-weight gradient of training (``detach_weights=True``);
        its value is unchanged.

    Returns a tensor [...]. Anchors of a class with n_c < 2 have no positive and contribute nothing.
    """
    import torch

    beta = require_real("beta", beta, min_value=0.0)
    tau = require_real("tau", tau, min_value=0.0, min_inclusive=False)
    k = require_int("num_negatives", num_negatives, min_value=1)
    n = torch.as_tensor(np.asarray(counts), dtype=gram.dtype)  # [A, C]
    c = gram.shape[-1]
    w = n[:, None, :] - torch.eye(c, dtype=gram.dtype)  # [A, C(anchor), C(negative)]
    log_w = torch.where(w > 0, w.clamp(min=1).log(), torch.full_like(w, -torch.inf))
    wg = gram if weights_gram is None else weights_gram
    log_q = torch.log_softmax(beta * wg[..., None, :, :] + log_w, dim=-1)  # [..., A, C, C]
    log_sum = torch.logsumexp(log_q + (gram[..., None, :, :] - 1.0) / tau, dim=-1)  # [..., A, C]
    ell = torch.nn.functional.softplus(np.log(k) + log_sum)
    pairs = n * (n - 1)  # [A, C]
    return ((pairs * ell).sum(dim=-1) / pairs.sum(dim=-1)).mean(dim=-1)
