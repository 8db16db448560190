"""Thresholds of what training optimizes: the weighted batch estimator with detached weights, collapsed batches.

Claim-3 training (``ncgeom/campaigns/specs/claim3_hucl_beta.toml``) minimizes the weighted HUCL batch loss
(docs/theory.md, section 7; k = 1, tau = 1, ``detach_weights=True``) on class-balanced batches of size B with
Adam. On collapsed configurations (every sample of class c at v_c) the expected step follows the field

.. math::

    F(V) = \\mathbb E_n\\, \\nabla_V J_n(V;\\ \\bar q \\text{ frozen at } V)

(``proofs_check.hucl.loss``: J_n, the count vectors n and their uniform law). F is not a gradient (the
weights carry no gradient). By the symmetry argument of ``proofs_check.hucl.jets``, NC is a zero of F for
every beta, and the Jacobian of F at NC, modulo rotations, is a scalar mu on each symmetry block (real
eigenvalues). We define, for collapsed configurations in R^d:

- the **detached-flow threshold** beta_det(C, d, B): the smallest beta at which some mu <= 0 turns negative,
  i.e. NC stops being a linearly stable zero of the gradient flow dV/dt = -F(V);
- the **batch-loss local threshold** beta_batch(C, d, B): the same with the full gradient of E_n J_n (its
  Hessian at NC), i.e. where NC stops being a local minimizer of the expected batch loss;
- the **batch switch**: the smallest beta at which some collapsed configuration has a lower expected batch
  loss than NC (searched as in ``proofs_check.hucl.search``).

mu along a block direction delta (orthogonal to the rotations) is <delta, DF[delta]> / ||delta||^2, computed
with a forward-mode derivative (torch.autograd.functional.jvp) of the field. Everything here is numerical.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from ncgeom.theory import batch_nc_value
from ncgeom.threads import one_torch_thread
from ncgeom.validate import require_int, require_real
from proofs_check.hucl.jets import Block, block_gram_jet, blocks_for
from proofs_check.hucl.local import first_negative
from proofs_check.hucl.loss import batch_count_assignments, collapsed_batch_loss, unit_rows
from proofs_check.hucl.search import search_switch

__all__ = ["block_direction", "field_curvature", "batch_loss_pair", "stationarity", "BatchThresholds",
           "batch_thresholds"]


def block_direction(block: Block, num_classes: int) -> tuple[np.ndarray, np.ndarray]:
    """(V0, delta) [C, C] float64 in the coordinates of ``proofs_check.hucl.jets``: V0 = s (I - 11^T/C)."""
    c = num_classes
    s = math.sqrt(c / (c - 1))
    p = np.eye(c) - np.ones((c, c)) / c
    if block == "lift":
        return s * p, np.full((c, c), 1 / math.sqrt(c))
    _, dm, _, _ = block_gram_jet(block, c)
    dm = dm.astype(float)
    return s * p, (dm @ p - p @ dm @ p / 2) / s


def field_curvature(loss_pair, block: Block, *, num_classes: int) -> float:
    """mu = <delta, DF[delta]> / ||delta||^2 at NC for the field F(U) = grad_1 loss_pair(U, U).

    ``loss_pair(U, W)`` takes unnormalized class vectors [C, C]: U enters the loss, W the tilt weights only
    (pass a function ignoring W for the full gradient). DF[delta] is a forward-mode derivative of F
    (torch.autograd.functional.jvp, double backward), F itself the partial gradient in the first argument.
    """
    import torch

    v0, delta = (torch.as_tensor(a) for a in block_direction(block, num_classes))

    def field(u):
        first = u * 1.0  # the first argument as its own node: the gradient below is the partial through it
        (g,) = torch.autograd.grad(loss_pair(first, u), first, create_graph=True)
        return g

    with one_torch_thread():
        _, dfield = torch.autograd.functional.jvp(field, v0, delta)
    return float((delta * dfield).sum() / (delta * delta).sum())


@dataclass(frozen=True)
class BatchThresholds:
    """Thresholds of the expected weighted batch loss (module docstring), one (C, d, B).

    detached_flow / batch_local : LocalThreshold-like dicts {"beta", "bracket", "block"} (None: no sign change
    up to beta_max); switch : SwitchSearch dict; stationarity: tangential norm of F at NC (averaged) and the
    largest one of a single count vector (a single batch is not symmetric).
    """

    num_classes: int
    dim: int
    batch_size: int
    tau: float
    num_negatives: int
    num_count_vectors: int
    detached_flow: dict[str, Any]
    batch_local: dict[str, Any]
    switch: dict[str, Any] | None
    stationarity_mean: float
    stationarity_single_max: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def batch_loss_pair(counts, *, beta: float, tau: float, num_negatives: int, detach: bool):
    """loss_pair(U, W) for :func:`field_curvature`: the expected J_n of U with weights from W (or U)."""

    def loss_pair(u, w):
        v = unit_rows(u)
        gram = v @ v.transpose(-1, -2)
        if detach:
            vw = unit_rows(w)
            weights = vw @ vw.transpose(-1, -2)
        else:
            weights = None
        return collapsed_batch_loss(gram, counts, beta=beta, tau=tau, num_negatives=num_negatives,
                                    weights_gram=weights)

    return loss_pair


def stationarity(counts, *, num_classes: int, beta: float, tau: float, num_negatives: int) -> tuple[float, float]:
    """(|F(NC)| of the expected loss, max over count vectors of |F_n(NC)|), detached weights, tangential parts."""
    import torch

    v0 = torch.as_tensor(block_direction("standard", num_classes)[0])
    norms = []
    for rows in (counts, *[counts[i:i + 1] for i in range(len(counts))]):
        u = v0.clone().requires_grad_(True)
        gram = unit_rows(u) @ unit_rows(u).T
        value = collapsed_batch_loss(gram, rows, beta=beta, tau=tau, num_negatives=num_negatives,
                                     weights_gram=gram.detach())
        (g,) = torch.autograd.grad(value, u)  # the gradient through the normalization is tangential
        norms.append(float(g.norm()))
    return norms[0], max(norms[1:])



def batch_thresholds(*, num_classes: int, dim: int, batch_size: int, tau: float = 1.0, num_negatives: int = 1,
                     grid_step: float = 1 / 16, beta_max: float = 16.0, tol: float = 1e-8, switch_grid=None,
                     generator=None, num_random: int = 16) -> BatchThresholds:
    """The three thresholds of the module docstring for collapsed configurations in R^dim, batch size B.

    The two local thresholds scan beta on multiples of ``grid_step`` up to ``beta_max`` and bisect to ``tol``
    (:func:`proofs_check.hucl.local.first_negative`); the switch is searched on ``switch_grid`` (skipped when
    None) with ``num_random`` random starts per grid point drawn from ``generator``.
    """
    c = require_int("num_classes", num_classes, min_value=3)
    d = require_int("dim", dim, min_value=c - 1)
    b = require_int("batch_size", batch_size, min_value=2)
    tau = require_real("tau", tau, min_value=0.0, min_inclusive=False)
    k = require_int("num_negatives", num_negatives, min_value=1)
    counts = batch_count_assignments(c, b)
    block_names = blocks_for(c, d)

    def threshold(detach: bool) -> dict[str, Any]:
        def fn(beta: float) -> float:
            pair = batch_loss_pair(counts, beta=beta, tau=tau, num_negatives=k, detach=detach)
            return min(field_curvature(pair, blk, num_classes=c) for blk in block_names)

        bracket = first_negative(fn, grid_step=grid_step, beta_max=beta_max, tol=tol)
        if bracket is None:
            return {"beta": None, "bracket": None, "block": None, "beta_max": beta_max, "grid_step": grid_step}
        pair = batch_loss_pair(counts, beta=bracket[1], tau=tau, num_negatives=k, detach=detach)
        block = min(block_names, key=lambda blk: field_curvature(pair, blk, num_classes=c))
        return {"beta": (bracket[0] + bracket[1]) / 2, "bracket": list(bracket), "block": block, "beta_max": beta_max,
                "grid_step": grid_step}

    detached, full = threshold(True), threshold(False)
    switch = None
    if switch_grid is not None:
        padded = np.sort(counts[0])[::-1]

        def loss_at(beta: float):
            def loss(u):
                v = unit_rows(u)
                return collapsed_batch_loss(v @ v.transpose(-1, -2), counts, beta=beta, tau=tau, num_negatives=k)
            return loss

        def nc_at(beta: float) -> float:
            return batch_nc_value("hucl", class_counts=padded, num_negatives=k, beta=beta, tau=tau)

        switch = search_switch(num_classes=c, dim=d, grid=switch_grid, loss_at=loss_at, nc_value_at=nc_at,
                               generator=generator, num_random=num_random).to_dict()
    beta_ref = detached["beta"] if detached["beta"] is not None else 1.0
    mean_norm, single_max = stationarity(counts, num_classes=c, beta=beta_ref, tau=tau, num_negatives=k)
    return BatchThresholds(c, d, b, tau, k, len(counts), detached, full, switch, mean_norm, single_max)
