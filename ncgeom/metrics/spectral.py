"""Dimensional-collapse diagnostics: the class-mean covariance spectrum and RankMe.

docs/theory.md section 8. ``spectrum`` follows the authors' code (np.cov of the class means: centred,
divided by C-1); ``rankme`` follows garrido2023rankme (singular values sigma, not sigma^2, of the RAW,
uncentred and not re-normalised embedding matrix, eps = 1e-7). Peers differ on all four choices
(docs/conventions.md, "Metrics"). Both are scale invariant by definition and are computed on z divided
by a power of two near max |z| (:mod:`ncgeom.metrics.groups`), so z and 2^m z give bitwise the same value.
"""

from __future__ import annotations

import numpy as np

from ncgeom.metrics.groups import _embeddings, _group, _Groups, _unit_scaled

__all__ = ["spectrum", "rankme", "RANKME_EPS"]

RANKME_EPS: float = 1e-7
"""The epsilon added to the normalised singular values in RankMe (garrido2023rankme, Eq. 1)."""


def _spectrum(g: _Groups) -> np.ndarray:
    c, d = g.means.shape
    centered = g.means - g.means.mean(axis=0)
    # Eigenvalues of np.cov(M^T) = centered^T centered / (C-1) are s^2 / (C-1), s the singular values
    # of the centred means; the ratio to the largest drops the 1/(C-1). SVD keeps small tail values
    # accurate (eigvalsh of the covariance would bury those below eps * largest in rounding noise).
    s = np.linalg.svd(centered, compute_uv=False)[: min(d, c - 1)]
    if s[0] == 0.0:
        return np.full(s.shape, np.nan)
    return (s / s[0]) ** 2


def _rankme(z: np.ndarray) -> float:
    s = np.linalg.svd(z, compute_uv=False)
    total = s.sum()
    if total == 0.0:
        return float("nan")
    p = s / total + RANKME_EPS
    return float(np.exp(-np.sum(p * np.log(p))))


def spectrum(z, labels, *, num_classes: int | None = None) -> np.ndarray:
    """Eigenvalues of the class-mean covariance, descending, divided by the largest, [min(d, C-1)].

    .. math:: \\mathrm{spectrum}_k = \\lambda_k / \\lambda_1,\\qquad
        \\lambda_1 \\ge \\lambda_2 \\ge \\dots \\text{ eigenvalues of }
        \\frac{1}{C-1} \\sum_c (\\mu_c - \\mu_G)(\\mu_c - \\mu_G)^T = \\texttt{np.cov}(M^T)

    where M = [mu_c] [C, d] are the class means of ``z`` [N, d] grouped by ``labels`` and mu_G their
    unweighted mean (docs/theory.md section 8 [code]; jing2022understanding plots the log of such a
    spectrum). Flat (all 1) at NC, in any d >= C-1; dimensional collapse (DC) shows as a tail of values
    orders of magnitude below 1.

    Only the first min(d, C-1) eigenvalues are returned: C centred points span at most C-1 dimensions,
    so when d > C-1 the remaining d - C + 1 eigenvalues of the d x d covariance are zero by
    construction and would read as collapse (docs/conventions.md). The normalisation constant 1/(C-1)
    cancels in the ratio. Computed from the singular values s_k of the centred means as (s_k / s_1)^2.

    Failure mode: all class means equal gives an all-NaN spectrum.

    Examples
    --------
    >>> spectrum([[1.0, 0.0], [-1.0, 0.0], [0.0, 2.0]], [0, 1, 2]).round(12)
    array([1.  , 0.75])
    """
    return _spectrum(_group(z, labels, num_classes=num_classes))


def rankme(z, labels=None, *, num_classes: int | None = None) -> float:
    """RankMe effective rank of the raw embedding matrix (garrido2023rankme, Eq. 1).

    .. math:: \\mathrm{rankme} = \\exp\\Big(-\\sum_{k=1}^{\\min(N, d)} p_k \\log p_k\\Big),\\qquad
        p_k = \\frac{\\sigma_k(Z)}{\\sum_j \\sigma_j(Z)} + \\varepsilon

    where sigma_k(Z) are the singular values of ``z`` [N, d] as given (NOT centred, rows NOT
    re-normalised, sigma not sigma^2) and eps = ``RANKME_EPS`` = 1e-7 as in garrido2023rankme.
    Between about 1 (rank one) and min(N, d) (equal singular values); the eps makes it slightly
    larger than exp(entropy). ``labels`` are not used (the signature matches the other metrics); when
    given they are validated like the others'.

    Failure mode: z = 0 has no spectrum; the value is NaN. The value depends on N when N < d.
    Cost: one SVD, O(N d min(N, d)); garrido2023rankme evaluate on N = 25,600 embeddings.

    Examples
    --------
    >>> round(rankme([[1.0, 0.0], [0.0, 1.0]]), 4)
    2.0
    """
    if labels is not None:
        return _rankme(_group(z, labels, num_classes=num_classes).z)
    return _rankme(_unit_scaled(_embeddings(z))[0])
