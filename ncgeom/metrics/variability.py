"""Class-distance normalized variance (CDNV): within-class spread measured against the distance of class means.

docs/theory.md section 8 (galanti2022role, the CDNV V_f(Q_i, Q_j)). Every function takes ``(z, labels)`` with z [N, d]
(numpy or torch, computed in float64) and integer labels [N] (:mod:`ncgeom.metrics.groups`). CDNV is
scale invariant: it is computed on z divided by a power of two near max |z| and gives bitwise the same
value for z and 2^m z.

Conventions (docs/conventions.md, "Metrics"): the class variance is the mean squared distance to the class
mean, divided by n_c (``ddof=0``, rhubarbwu/neural-collapse's ``VarNormAccumulator``); ``ddof=1`` divides by
n_c - 1 (felixsh/nc-toolbox's ``class_embedding_variances``). The reported number is the mean over the
C (C - 1) / 2 unordered pairs of classes, as both peers report it (rhubarbwu's ``variability_cdnv`` with its
default ``dist_exp=1``; nc-toolbox's ``nc1_cdnv(reduction='mean')``).
"""

from __future__ import annotations

import numpy as np

from ncgeom.metrics.groups import _group, _Groups
from ncgeom.validate import require_int

__all__ = ["cdnv", "cdnv_matrix"]

_BLOCK_ELEMENTS = 1 << 22  # float64 entries of one [rows, C, d] block of mean differences (32 MiB)


def _class_scatter(g: _Groups) -> np.ndarray:
    """sum_{i : y_i = c} ||z_i - mu_c||^2 per class [C], in units of ``g.scale``^2 (residuals, no cancellation)."""
    residual = g.z - g.means[g.index]
    return np.bincount(g.index, weights=np.einsum("ij,ij->i", residual, residual), minlength=g.num_classes)


def _require_ddof(ddof: int) -> int:
    value = require_int("ddof", ddof, min_value=0, max_value=1)
    return value


def _class_variances(counts: np.ndarray, scatter: np.ndarray, ddof: int) -> np.ndarray:
    """scatter_c / (n_c - ddof) [C]; NaN for a class of one sample when ddof = 1 (0 / 0: undefined)."""
    denom = (counts - ddof).astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(denom > 0, scatter / np.where(denom > 0, denom, 1.0), np.nan)


def _squared_mean_distances(means: np.ndarray) -> np.ndarray:
    """||mu_c - mu_c'||^2 [C, C] from the differences themselves (no ||a||^2 + ||b||^2 - 2ab cancellation)."""
    c, d = means.shape
    out = np.empty((c, c))
    rows = max(1, _BLOCK_ELEMENTS // max(1, c * d))
    for start in range(0, c, rows):
        diff = means[start : start + rows, None, :] - means[None, :, :]  # [rows, C, d]
        out[start : start + rows] = np.einsum("rcd,rcd->rc", diff, diff)
    return out


def _cdnv_matrix(counts: np.ndarray, means: np.ndarray, scatter: np.ndarray, ddof: int) -> np.ndarray:
    """The CDNV of every pair [C, C] (NaN diagonal) from class sizes, means and scatters (any common unit)."""
    var = _class_variances(counts, scatter, ddof)
    num = var[:, None] + var[None, :]
    den = 2.0 * _squared_mean_distances(means)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = num / den  # v / 0 = inf (coincident means, spread > 0), 0 / 0 = NaN
    np.fill_diagonal(out, np.nan)
    return out


def _cdnv(counts: np.ndarray, means: np.ndarray, scatter: np.ndarray, ddof: int) -> float:
    grid = _cdnv_matrix(counts, means, scatter, ddof)
    i, j = np.triu_indices(grid.shape[0], k=1)
    return float(np.mean(grid[i, j]))


def cdnv_matrix(z, labels, *, ddof: int = 0, num_classes: int | None = None) -> np.ndarray:
    """The class-distance normalized variance of every pair of classes, [C, C] float64 (NaN diagonal).

    .. math:: V_{cc'} = \\frac{\\operatorname{Var}_c + \\operatorname{Var}_{c'}}{2\\,\\lVert\\mu_c - \\mu_{c'}\\rVert^2},
        \\qquad \\operatorname{Var}_c = \\frac{1}{n_c - \\mathrm{ddof}} \\sum_{i : y_i = c} \\lVert z_i - \\mu_c\\rVert^2

    where z_i = ``z[i]`` [N, d], y_i = ``labels[i]`` [N], mu_c the class means, n_c the class sizes, and
    rows and columns in sorted label order (as :func:`ncgeom.metrics.class_means`). galanti2022role's
    CDNV of each pair; see :func:`cdnv` for the conventions, the degenerate cases and an example. Symmetric.
    The diagonal (c = c') is not a pair and is NaN.

    Examples
    --------
    >>> cdnv_matrix([[1.0], [3.0], [-1.0], [-3.0]], [0, 0, 1, 1]).tolist()
    [[nan, 0.0625], [0.0625, nan]]
    """
    ddof = _require_ddof(ddof)
    g = _group(z, labels, num_classes=num_classes)
    return _cdnv_matrix(g.counts, g.means, _class_scatter(g), ddof)


def cdnv(z, labels, *, ddof: int = 0, num_classes: int | None = None) -> float:
    """Mean class-distance normalized variance over the pairs of classes (galanti2022role, CDNV).

    .. math:: \\mathrm{cdnv} = \\frac{2}{C(C-1)} \\sum_{c < c'}
        \\frac{\\operatorname{Var}_c + \\operatorname{Var}_{c'}}{2\\,\\lVert\\mu_c - \\mu_{c'}\\rVert^2},
        \\qquad \\operatorname{Var}_c = \\frac{1}{n_c - \\mathrm{ddof}} \\sum_{i : y_i = c} \\lVert z_i - \\mu_c\\rVert^2

    where

    - z_i = ``z[i]``, embeddings [N, d]; y_i = ``labels[i]`` [N]; C the number of classes;
    - mu_c = (1/n_c) sum_{y_i = c} z_i, the class means, n_c the class sizes;
    - Var_c, the class variance (the trace of the class covariance); ``ddof`` in {0, 1}.

    galanti2022role define Var_c as the expected squared distance to the class mean and call neural
    collapse the limit cdnv -> 0. Zero iff every sample sits on its class mean (and the means differ);
    scale and rotation invariant; it does not use mu_G, so no centring convention enters.

    Conventions: ``ddof=0`` (default) divides by n_c, as rhubarbwu/neural-collapse (the peer that defines
    CDNV for NC; its ``variability_cdnv`` averages ((v_c + v_c') / 2) / ||mu_c - mu_c'||^2 over c < c'
    with v_c from ``VarNormAccumulator``, a sum over n_c) and as Sigma_W of :func:`ncgeom.metrics.nc1`;
    ``ddof=1`` divides by n_c - 1 as felixsh/nc-toolbox's ``class_embedding_variances``. Their values
    differ by the factors n_c / (n_c - 1); equal class sizes n give a ratio n / (n - 1). nc-toolbox's
    ``nc1_cdnv(reduction='cov')`` reports the coefficient of variation of the pair values instead of
    their mean (take ``cdnv_matrix`` for any other statistic).

    Degenerate input: a class with one sample has Var_c = 0 with ``ddof=0`` and an undefined (NaN)
    variance with ``ddof=1``, which makes its pairs and the mean NaN. Two classes with the same mean
    give an infinite pair value (+inf: spread with no distance) or NaN when neither class has spread
    (0 / 0); the mean is then inf or NaN, never a number that would read as collapse. Nothing depends on
    d, so d < C - 1 is fine.

    Examples
    --------
    Two antipodal classes at +-2 with spread 1 (C = 2: Var = 1 each, ||mu_0 - mu_1||^2 = 16):

    >>> cdnv([[1.0], [3.0], [-1.0], [-3.0]], [0, 0, 1, 1])
    0.0625
    >>> cdnv([[1.0], [3.0], [-1.0], [-3.0]], [0, 0, 1, 1], ddof=1)  # Var = 2 each
    0.125
    """
    ddof = _require_ddof(ddof)
    g = _group(z, labels, num_classes=num_classes)
    return _cdnv(g.counts, g.means, _class_scatter(g), ddof)
