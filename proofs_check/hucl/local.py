"""Local threshold of HUCL at NC over collapsed configurations in R^d: where NC stops being a local minimizer.

The local threshold beta_loc(C, d) is the smallest beta at which the Riemannian Hessian of L_HUCL at the
simplex ETF, restricted to the tangent space modulo rotations, has a negative eigenvalue (NC is a critical
point for every beta: ``proofs_check.hucl.jets``). Two computations that share no code:

- :func:`local_threshold` (``method="reduced"``): the eigenvalue of each symmetry block from jets of the
  Gram matrix (``proofs_check.hucl.jets``, numpy), k = 1, infonce;
- ``method="hessian"``: the full Hessian by torch autograd of :func:`proofs_check.hucl.loss.hucl_gram_loss`
  in the coordinates of :func:`ncgeom.geometry.simplex_etf` (any psi, any k), restricted to an orthonormal
  basis of the complement of the rotations (:func:`tangent_complement`), smallest eigenvalue.

Both scan beta on a grid (step ``grid_step`` from 0 to ``beta_max``) for the first negative value and bisect
to ``tol``: a dip below 0 between two grid points would be missed (the coverage of the scan).
:func:`certify_local_threshold` then encloses the block eigenvalues at beta_loc -/+ ``width`` in interval
arithmetic (mpmath.iv): positive on every block below, negative on one block above, an exact statement.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any, Literal

import numpy as np

from ncgeom.geometry import simplex_etf
from ncgeom.losses import make_psi
from ncgeom.threads import one_torch_thread
from ncgeom.validate import require_choice, require_int, require_real
from proofs_check.hucl.jets import Block, blocks_for, reduced_curvature
from proofs_check.hucl.loss import hucl_gram_loss, unit_rows

__all__ = ["LocalThreshold", "first_negative", "tangent_complement", "hessian_at_nc", "smallest_hessian_eigenvalue",
           "local_threshold", "certify_local_threshold", "DEFAULT_GRID_STEP", "DEFAULT_BETA_MAX", "DEFAULT_TOL"]

DEFAULT_GRID_STEP = 1 / 32
DEFAULT_BETA_MAX = 16.0
DEFAULT_TOL = 1e-10


@dataclass(frozen=True)
class LocalThreshold:
    """beta_loc(C, d) and how it was found.

    beta : the threshold (midpoint of ``bracket``), None if no negative eigenvalue up to ``beta_max``;
    bracket : [lo, hi] with a value >= 0 at lo and < 0 at hi (bisection, width <= tol);
    block : the block whose eigenvalue turns negative first (reduced method) or "hessian";
    method, grid_step, beta_max, tol : the computation and its coverage;
    per_block : {block: its own first sign change or None} (reduced method; empty for "hessian").
    """

    num_classes: int
    dim: int
    tau: float
    beta: float | None
    bracket: tuple[float, float] | None
    block: str
    method: str
    grid_step: float
    beta_max: float
    tol: float
    per_block: dict[str, float | None]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def first_negative(fn: Callable[[float], float], *, grid_step: float, beta_max: float,
                   tol: float) -> tuple[float, float] | None:
    """Bracket [lo, hi] (hi - lo <= tol) of the first sign change of ``fn`` from >= 0 to < 0, or None.

    Scans beta = 0, grid_step, 2 grid_step, ... <= beta_max; (0.0, 0.0) if fn(0) < 0 already.
    """
    grid = np.arange(0.0, beta_max + grid_step / 2, grid_step)
    previous = None
    for beta in grid:
        if fn(float(beta)) < 0:
            if previous is None:
                return (0.0, 0.0)
            lo, hi = previous, float(beta)
            while hi - lo > tol:
                mid = (lo + hi) / 2
                lo, hi = (lo, mid) if fn(mid) < 0 else (mid, hi)
            return (lo, hi)
        previous = float(beta)
    return None


def tangent_complement(etf: np.ndarray) -> np.ndarray:
    """Orthonormal basis [C d, m] of the tangent space of (S^{d-1})^C at ``etf`` [C, d] orthogonal to rotations.

    Tangent vectors delta [C, d] have <delta_c, v_c> = 0; rotation directions are V A with A skew (d x d).
    m = C (d - 1) - (dimension of the rotation directions).
    """
    c, d = etf.shape
    constraints = np.zeros((c, c * d))
    for i in range(c):
        constraints[i, i * d:(i + 1) * d] = etf[i]
    _, s, vt = np.linalg.svd(constraints)
    tangent = vt[int((s > 1e-10).sum()):].T  # [C d, C(d-1)]
    rotations = []
    for a in range(d):
        for b in range(a + 1, d):
            skew = np.zeros((d, d))
            skew[a, b], skew[b, a] = 1.0, -1.0
            rotations.append((etf @ skew).ravel())
    rot = np.array(rotations).T  # [C d, d(d-1)/2]
    u, s, _ = np.linalg.svd(rot, full_matrices=False)
    rot_basis = u[:, s > 1e-10 * max(s.max(), 1.0)]
    projected = tangent - rot_basis @ (rot_basis.T @ tangent)
    u, s, _ = np.linalg.svd(projected, full_matrices=False)
    return u[:, s > 1e-8]


def hessian_at_nc(*, num_classes: int, dim: int, beta: float, psi, num_negatives: int = 1) -> np.ndarray:
    """Riemannian Hessian [m, m] of L_HUCL at the ETF in the basis of :func:`tangent_complement` (autograd)."""
    import torch

    etf = simplex_etf(num_classes, dim)
    basis = tangent_complement(etf)
    v0 = torch.as_tensor(etf)
    b = torch.as_tensor(basis)

    def f(x):
        v = unit_rows(v0 + (b @ x).reshape(v0.shape))
        return hucl_gram_loss(v @ v.T, beta=beta, num_negatives=num_negatives, psi=psi)

    with one_torch_thread():
        h = torch.autograd.functional.hessian(f, torch.zeros(b.shape[1], dtype=torch.float64))
    return h.numpy()


def smallest_hessian_eigenvalue(*, num_classes: int, dim: int, beta: float, psi, num_negatives: int = 1) -> float:
    """Smallest eigenvalue of :func:`hessian_at_nc` (symmetrized)."""
    h = hessian_at_nc(num_classes=num_classes, dim=dim, beta=beta, psi=psi, num_negatives=num_negatives)
    return float(np.linalg.eigvalsh((h + h.T) / 2)[0])


def local_threshold(*, num_classes: int, dim: int, tau: float = 1.0, method: Literal["reduced", "hessian"] = "reduced",
                    grid_step: float = DEFAULT_GRID_STEP, beta_max: float = DEFAULT_BETA_MAX,
                    tol: float = DEFAULT_TOL) -> LocalThreshold:
    """beta_loc(C, d) for k = 1, infonce at temperature tau (module docstring).

    Example: C = 4, d = 4 gives 0.877374... (the lift block, i.e. the equiangular path); C = 4, d = 3 gives
    1.285019... (the standard block): in d = C - 1 the ETF spans the space and the lift does not exist.
    """
    c = require_int("num_classes", num_classes, min_value=3)
    d = require_int("dim", dim, min_value=c - 1)
    tau = require_real("tau", tau, min_value=0.0, min_inclusive=False)
    method = require_choice("method", method, ("reduced", "hessian"))
    grid_step = require_real("grid_step", grid_step, min_value=0.0, min_inclusive=False)
    beta_max = require_real("beta_max", beta_max, min_value=0.0)
    tol = require_real("tol", tol, min_value=0.0, min_inclusive=False)
    blocks = blocks_for(c, d)
    per_block: dict[str, float | None] = {}
    bracket: tuple[float, float] | None
    if method == "reduced":
        brackets: dict[str, tuple[float, float]] = {}
        for b in blocks:
            found = first_negative(functools.partial(_block_value, b, c, tau), grid_step=grid_step, beta_max=beta_max,
                                   tol=tol)
            per_block[b] = None if found is None else (found[0] + found[1]) / 2
            if found is not None:
                brackets[b] = found
        block = min(brackets, key=lambda b: brackets[b][1]) if brackets else "none"
        bracket = brackets.get(block)
    else:
        psi = make_psi("infonce", tau=tau)
        bracket = first_negative(
            lambda beta: smallest_hessian_eigenvalue(num_classes=c, dim=d, beta=beta, psi=psi),
            grid_step=grid_step, beta_max=beta_max, tol=tol)
        block = "hessian"
    return LocalThreshold(c, d, tau, None if bracket is None else (bracket[0] + bracket[1]) / 2, bracket, block,
                          method, grid_step, beta_max, tol, per_block)


def _block_value(block: Block, num_classes: int, tau: float, beta: float) -> float:
    return float(reduced_curvature(block, num_classes=num_classes, beta=beta, tau=tau))


def certify_local_threshold(*, num_classes: int, dim: int, beta: float, tau: float = 1.0,
                            width: float = 1e-6) -> dict[str, Any]:
    """Interval enclosures of every block eigenvalue at beta - width and beta + width (k = 1, infonce).

    Returns ``{"beta_below", "beta_above", "below": {block: [lo, hi]}, "above": {...}, "certified": bool}``;
    certified means every enclosure below lies in (0, inf) and one enclosure above lies in (-inf, 0): NC is a
    strict local minimizer modulo rotations at beta_below and a saddle at beta_above, so a threshold (a
    sign change) lies in between. A ``beta`` that is not near the threshold is not certified.
    """
    c = require_int("num_classes", num_classes, min_value=3)
    d = require_int("dim", dim, min_value=c - 1)
    beta = require_real("beta", beta, min_value=0.0)
    width = require_real("width", width, min_value=0.0, min_inclusive=False)
    below, above = max(beta - width, 0.0), beta + width
    enclosures: dict[str, dict[str, list[float]]] = {"below": {}, "above": {}}
    signs: dict[str, list[tuple[bool, bool]]] = {"below": [], "above": []}
    for side, b in (("below", below), ("above", above)):
        for block in blocks_for(c, d):
            x = reduced_curvature(block, num_classes=c, beta=b, tau=tau, arithmetic="interval")
            enclosures[side][block] = [float(x.a), float(x.b)]  # endpoints rounded to floats for the record
            signs[side].append((bool(x.a > 0), bool(x.b < 0)))
    certified = all(pos for pos, _ in signs["below"]) and any(neg for _, neg in signs["above"])
    return {"beta_below": below, "beta_above": above, "below": enclosures["below"], "above": enclosures["above"],
            "certified": certified, "arithmetic": "mpmath.iv, outward rounding, 53-bit"}
