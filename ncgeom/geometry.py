"""Simplex equiangular tight frames (ETF), their Gram matrix, residuals, and feature normalization.

Source: docs/theory.md section 4 ("Neural collapse"): a unit-norm simplex ETF {v_c} has ||v_c|| = 1,
<v_c, v_c'> = -1/(C-1) for c != c', sum_c v_c = 0; it exists iff d >= C-1. Its Gram matrix is

.. math:: G = \\frac{C}{C-1} I - \\frac{1}{C-1} \\mathbf{1}\\mathbf{1}^T,

with eigenvalues C/(C-1) (multiplicity C-1) and 0.
"""

from __future__ import annotations

import numpy as np

from ncgeom.validate import require_choice, require_finite_array, require_int, require_real
from ncgeom.vocabulary import NORMALIZATIONS, Normalization

__all__ = [
    "simplex_etf",
    "etf_gram",
    "etf_residual",
    "gram_etf_residual",
    "is_etf",
    "random_orthogonal",
    "normalize",
]


def etf_gram(num_classes: int) -> np.ndarray:
    """Gram matrix of the unit simplex ETF, [C, C], float64.

    .. math:: G = \\frac{C}{C-1} I - \\frac{1}{C-1} \\mathbf{1}\\mathbf{1}^T

    where C = ``num_classes`` >= 2. Example: C = 2 gives [[1, -1], [-1, 1]] (antipodal points).
    Source: docs/theory.md section 4.
    """
    c = require_int("num_classes", num_classes, min_value=2)
    return (c / (c - 1)) * np.eye(c) - np.ones((c, c)) / (c - 1)


def random_orthogonal(dim: int, *, rng: np.random.Generator) -> np.ndarray:
    """Haar-distributed orthogonal matrix [dim, dim] (QR of a Gaussian with sign correction)."""
    d = require_int("dim", dim, min_value=1)
    if not isinstance(rng, np.random.Generator):
        raise ValueError("rng must be a numpy.random.Generator")
    q, r = np.linalg.qr(rng.standard_normal((d, d)))
    return q * np.sign(np.diag(r))


def simplex_etf(num_classes: int, dim: int | None = None, *, rng: np.random.Generator | None = None) -> np.ndarray:
    """Rows of a unit-norm simplex ETF, [C, d], float64.

    The C vectors v_c = sqrt(C/(C-1)) (e_c - 1/C) written in an orthonormal basis of the
    (C-1)-dimensional subspace orthogonal to the all-ones vector, zero-padded to ``dim`` coordinates,
    then rotated by a Haar-random orthogonal matrix when ``rng`` is given.

    Parameters
    ----------
    num_classes : int
        C >= 2.
    dim : int, optional
        d >= C-1 (default C-1).
    rng : numpy.random.Generator, optional
        Source of the random rotation; None gives the canonical (unrotated) ETF.

    Examples
    --------
    >>> simplex_etf(2).round(12)
    array([[ 1.],
           [-1.]])
    """
    c = require_int("num_classes", num_classes, min_value=2)
    d = c - 1 if dim is None else require_int("dim", dim, min_value=c - 1)
    centered = np.sqrt(c / (c - 1)) * (np.eye(c) - np.ones((c, c)) / c)
    # Orthonormal basis of 1^perp (Helmert; deterministic, unlike an SVD's signs).
    basis = _ones_complement_basis(c)  # [C, C-1]
    v = centered @ basis  # [C, C-1]
    out = np.zeros((c, d))
    out[:, : c - 1] = v
    if rng is not None:
        out = out @ random_orthogonal(d, rng=rng)
    return out


def _ones_complement_basis(c: int) -> np.ndarray:
    """Orthonormal basis [C, C-1] of the subspace orthogonal to the all-ones vector (Helmert)."""
    basis = np.zeros((c, c - 1))
    for j in range(1, c):
        basis[:j, j - 1] = 1.0
        basis[j, j - 1] = -float(j)
        basis[:, j - 1] /= np.sqrt(j * (j + 1))
    # Deterministic sign so that the C = 2 ETF is [[1], [-1]].
    return basis


def gram_etf_residual(gram) -> float:
    """Frobenius distance ||G - G_ETF||_F of a Gram matrix [C, C] to the unit ETF Gram."""
    g = np.asarray(gram, dtype=np.float64)
    if g.ndim != 2 or g.shape[0] != g.shape[1] or g.shape[0] < 2:
        raise ValueError(f"gram must be a square matrix [C, C] with C >= 2, got shape {g.shape}")
    require_finite_array("gram", g)
    return float(np.linalg.norm(g - etf_gram(g.shape[0])))


def etf_residual(vectors) -> float:
    """Frobenius distance ||V V^T - G_ETF||_F of C vectors [C, d] to a unit simplex ETF.

    Zero iff the rows form a unit-norm simplex ETF (docs/theory.md section 4); rotation invariant.
    Accepts numpy arrays or torch tensors (computed in float64).
    """
    v = _as_float64_numpy(vectors, "vectors")
    if v.ndim != 2 or v.shape[0] < 2:
        raise ValueError(f"vectors must have shape [C, d] with C >= 2, got {v.shape}")
    require_finite_array("vectors", v)
    return gram_etf_residual(v @ v.T)


def is_etf(vectors, *, atol: float = 1e-8) -> bool:
    """True iff ``etf_residual(vectors) <= atol``."""
    atol = require_real("atol", atol, min_value=0.0)
    return etf_residual(vectors) <= atol


def normalize(z, mode: Normalization = "sphere", *, eps: float = 1e-12):
    """Feature normalization of rows of ``z`` [N, d] (numpy array or torch tensor).

    - ``none``: z unchanged;
    - ``ball``: z / max(1, ||z||) (the authors' clipping; docs/theory.md section 1);
    - ``sphere``: z / max(||z||, eps), eps > 0 (a zero row stays zero).

    The output has the type, dtype and device of the input; torch inputs keep their graph. Values are
    not checked for NaN (this runs inside training loops).
    """
    mode = require_choice("mode", mode, NORMALIZATIONS)
    eps = require_real("eps", eps, min_value=0.0, min_inclusive=False)
    if mode == "none":
        return z
    if hasattr(z, "detach"):  # torch tensor
        norms = z.norm(dim=-1, keepdim=True)
        if mode == "ball":
            return z / norms.clamp_min(1.0)
        return z / norms.clamp_min(eps)
    z = np.asarray(z)
    norms = np.linalg.norm(z, axis=-1, keepdims=True)
    if mode == "ball":
        return z / np.maximum(norms, 1.0)
    return z / np.maximum(norms, eps)


def _as_float64_numpy(x, name: str) -> np.ndarray:
    if hasattr(x, "detach"):
        x = x.detach().cpu().double().numpy()
    return np.asarray(x, dtype=np.float64)
