"""A collision-aware lower bound for HUCL over collapsed configurations: the per-anchor Lagrangian bound.

For a collapsed configuration with class Gram M (unit diagonal, M >= 0), label positives and balanced classes, the
HUCL loss is the mean over anchors of a function of the anchor's Gram row (docs/theory.md, section 4):

.. math::

    L(M) = \\frac1C \\sum_c F_\\beta\\big((M_{cc'})_{c' \\ne c}\\big), \\qquad
    F_\\beta(m) = \\mathbb E_{c_1..c_k \\overset{iid}{\\sim} q}\\ \\psi_k\\big((m_{c_i} - 1)_i\\big), \\quad
    q_j \\propto e^{\\beta m_j},\\ m_0 = 1,

where class 0 of a row is the anchor's own: a negative of it is a collision (t = 0), drawn with the tilted probability
q_0 = 1/(1 + sum_j e^{beta (m_j - 1)}). M >= 0 gives 1^T M 1 = C + sum_{c != c'} M_cc' >= 0, so for every nu >= 0

.. math::

    L(M) \\ \\ge\\ \\frac1C \\sum_c \\Big[F_\\beta(\\text{row}_c) - \\nu\\, \\mathbf 1^\\top \\text{row}_c\\Big] - \\nu
    \\ \\ge\\ B_\\nu(\\beta) := \\min_{m \\in [-1, 1]^{C-1}} \\big[F_\\beta(m) - \\nu\\, \\mathbf 1^\\top m\\big] - \\nu,
    \\qquad B(\\beta) = \\max_{\\nu \\ge 0} B_\\nu(\\beta)

[derived]. It keeps the collisions (the own class at inner product 1, weighted by the tilt) and only the trace of the
coupling between rows. Properties [derived]:

- B is a lower bound for every collapsed configuration in every dimension; B_nu is concave in nu (a minimum of
  affine functions), so the maximum over nu is a one-dimensional concave problem.
- B(beta) >= L_UCL(NC), the Theorem 1 + 3 bound: F_beta >= F_0 pointwise (Theorem 1 for one anchor), and at beta = 0,
  F_0 is convex and nu = dF_0/dm_j at the ETF row makes the ETF row the minimizer, so B(0) = L_UCL(NC).
- B is attained when the minimizing row is equiangular, m = rho 1, and either nu = 0 with rho >= -1/(C-1) (the
  equiangular configuration (1 - rho) I + rho 11^T, of rank C: d >= C needed unless rho = -1/(C-1)) or rho =
  -1/(C-1) (NC). Then the bound is the global minimum over collapsed configurations.

:func:`lagrangian_bound` computes B numerically (the inner minimum by a multi-start L-BFGS over m = cos(theta), the
outer maximum by golden-section search on nu); :func:`certify_bound` encloses B_nu at the chosen nu from below by
interval branch and bound over the sorted rows m_1 <= ... <= m_{C-1} (F is symmetric in its C - 1 arguments), so the
certified value is a proven lower bound (evidence "exact" for the instances run).

Sources: docs/theory.md, section 4 (Theorems 1 and 3; "HUCL: an open problem"); jiang2025hard, Theorems 1 and 3.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from ncgeom.theory import nc_value
from ncgeom.threads import one_torch_thread
from ncgeom.validate import require_choice, require_int, require_real
from proofs_check.hucl.optimum import intervals as iv
from proofs_check.hucl.optimum.bnb import MAX_BOXES, BnBResult, branch_and_bound
from proofs_check.hucl.optimum.certify import interval_row_loss
from proofs_check.hucl.optimum.intervals import Dual, Interval
from proofs_check.hucl.optimum.loss import PSI_NAMES, PsiOption, multiset_table

__all__ = ["RowBound", "row_loss", "inner_minimum", "lagrangian_bound", "certify_bound", "equiangular_loss",
           "cluster_asymptotics", "NU_TOL", "ATTAINED_TOL"]

# B attained by NC: the minimizing row within 1e-4 of the ETF row and B within this of L(NC) (the inner minima are
# L-BFGS values, accurate to ~1e-12; the golden section on nu leaves B ~1e-12 below its maximum)
ATTAINED_TOL = 1e-9
NU_TOL = 1e-6  # golden-section tolerance on nu (B_nu is concave; its maximum is flat to second order there)


@dataclass(frozen=True)
class RowBound:
    """B(beta) and how it was found.

    value : B (numerical: the inner minima are searched); nu : the maximizing multiplier; row : the minimizing row
    (sorted); equiangular : the row is rho 1 to 1e-6 (rho = ``rho``, else None); attained_value : the loss of the
    configuration that attains B when the module docstring's condition holds (else None), and which one;
    theorem13 : L_UCL(NC), the bound of Theorems 1 + 3; certified : the interval branch and bound at ``nu``
    (lower end minus nu is a proven lower bound), or None.
    """

    num_classes: int
    beta: float
    tau: float
    num_negatives: int
    psi: str
    value: float
    nu: float
    row: tuple[float, ...]
    rho: float | None
    attained_by: str | None
    attained_value: float | None
    theorem13: float
    certified_lower: float | None
    certified: BnBResult | None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def row_loss(rows, *, beta: float, tau: float = 1.0, num_negatives: int = 1, psi: PsiOption = "infonce"):
    """F_beta(m) of the module docstring for rows [..., C - 1] (torch, differentiable).

    Example: C = 2, the row (-1,), beta = 0, k = 1, tau = 1: (log 2 + log(1 + e^-2)) / 2 = 0.4100.
    """
    import torch  # heavy optional import

    k = require_int("num_negatives", num_negatives, min_value=1)
    psi = require_choice("psi", psi, PSI_NAMES)
    full = torch.cat([torch.ones(*rows.shape[:-1], 1, dtype=rows.dtype), rows], dim=-1)  # [..., C]
    c = full.shape[-1]
    tuples, log_coef = (torch.from_numpy(a.copy()) for a in multiset_table(c, k))
    log_q = torch.log_softmax(beta * full, dim=-1)
    log_w = log_coef + log_q[..., tuples].sum(dim=-1)
    log_u = torch.logsumexp((full[..., tuples] - 1.0) / tau, dim=-1)
    if psi == "infonce-mean":
        log_u = log_u - math.log(k)
    return (log_w.exp() * torch.nn.functional.softplus(log_u)).sum(dim=-1)


def equiangular_loss(rho: float, *, num_classes: int, beta: float, tau: float = 1.0, num_negatives: int = 1,
                     psi: PsiOption = "infonce") -> float:
    """The loss of the equiangular configuration (1 - rho) I + rho 11^T: F_beta(rho 1) (every anchor alike)."""
    import torch

    rows = torch.full((num_classes - 1,), float(rho), dtype=torch.float64)
    return float(row_loss(rows, beta=beta, tau=tau, num_negatives=num_negatives, psi=psi))


def inner_minimum(nu: float, *, num_classes: int, beta: float, tau: float = 1.0, num_negatives: int = 1,
                  psi: PsiOption = "infonce", num_random: int = 16, seed: int = 0) -> tuple[float, np.ndarray]:
    """min over m in [-1, 1]^{C-1} of F_beta(m) - nu 1^T m (numerical: batched L-BFGS over m = cos(theta) from
    ``num_random`` uniform starts and every equiangular row rho 1, rho on a grid of 41 values); (value, sorted row)."""
    import torch

    c = require_int("num_classes", num_classes, min_value=2)
    generator = torch.Generator().manual_seed(int(seed))
    grid = torch.arccos(torch.linspace(-1, 1, 41, dtype=torch.float64)).reshape(-1, 1, 1).expand(-1, 1, c - 1)
    starts = torch.cat([grid, torch.rand(num_random, 1, c - 1, generator=generator, dtype=torch.float64) * math.pi])

    def objective(theta):  # [S, 1, C - 1]
        m = torch.cos(theta[:, 0, :])
        return row_loss(m, beta=beta, tau=tau, num_negatives=num_negatives, psi=psi) - nu * m.sum(dim=-1)

    theta = starts.clone().requires_grad_(True)
    opt = torch.optim.LBFGS([theta], max_iter=500, tolerance_grad=1e-12, tolerance_change=1e-16, history_size=30,
                            line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad()
        value = objective(theta).sum()
        value.backward()
        return value

    with one_torch_thread():
        opt.step(closure)
    with torch.no_grad():
        values = objective(theta)
        i = int(torch.argmin(values))
        row = np.sort(torch.cos(theta[i, 0]).numpy())
    return float(values[i]), row


def lagrangian_bound(*, num_classes: int, beta: float, tau: float = 1.0, num_negatives: int = 1,
                     psi: PsiOption = "infonce", nu_max: float = 2.0, certify: bool = False, eps: float = 1e-7,
                     max_boxes: int = MAX_BOXES) -> RowBound:
    """B(beta) of the module docstring; with ``certify``, also the interval lower bound at the chosen nu."""
    c = require_int("num_classes", num_classes, min_value=2)
    beta = require_real("beta", beta, min_value=0.0)
    tau = require_real("tau", tau, min_value=0.0, min_inclusive=False)
    opts: dict[str, Any] = {"num_classes": c, "beta": beta, "tau": tau, "num_negatives": num_negatives, "psi": psi}

    def b_nu(nu: float) -> float:
        return inner_minimum(nu, **opts)[0] - nu

    value0, row0 = inner_minimum(0.0, **opts)
    if np.ptp(row0) <= 1e-6 and row0.mean() >= -1 / (c - 1):
        # nu = 0 already gives an equiangular row that a configuration attains: B = B_0 (B <= min <= B_0 <= B)
        return _finish(value0, 0.0, opts, certify=certify, eps=eps, max_boxes=max_boxes)
    lo, hi = 0.0, float(nu_max)
    golden = (math.sqrt(5) - 1) / 2
    x1, x2 = hi - golden * (hi - lo), lo + golden * (hi - lo)
    f1, f2 = b_nu(x1), b_nu(x2)
    while hi - lo > NU_TOL:
        if f1 < f2:
            lo, x1, f1 = x1, x2, f2
            x2 = lo + golden * (hi - lo)
            f2 = b_nu(x2)
        else:
            hi, x2, f2 = x2, x1, f1
            x1 = hi - golden * (hi - lo)
            f1 = b_nu(x1)
    candidates = [(value0, 0.0), (max(f1, f2), x1 if f1 >= f2 else x2)]
    value, nu = max(candidates)
    return _finish(value, nu, opts, certify=certify, eps=eps, max_boxes=max_boxes)


def _finish(value: float, nu: float, opts: dict[str, Any], *, certify: bool, eps: float, max_boxes: int) -> RowBound:
    """The :class:`RowBound` at the chosen nu: the minimizing row, the configuration attaining B, the certificate."""
    c, beta, tau, num_negatives, psi = (opts[key] for key in ("num_classes", "beta", "tau", "num_negatives", "psi"))
    inner, row = inner_minimum(nu, **opts)
    rho = float(row.mean()) if np.ptp(row) <= 1e-6 else None
    attained_by, attained = None, None
    nc = nc_value("hucl", psi, num_classes=c, num_negatives=num_negatives, beta=beta, tau=tau)
    if rho is not None and abs(rho + 1 / (c - 1)) <= 1e-4 and abs(value - nc) <= ATTAINED_TOL:
        attained_by, attained = "NC", nc
    elif rho is not None and nu <= NU_TOL and rho >= -1 / (c - 1):
        attained_by = f"equiangular, rho = {rho:.6f} (rank C: needs d >= C)"
        attained = equiangular_loss(rho, **opts)
    theorem13 = nc_value("ucl", psi, num_classes=c, num_negatives=num_negatives, tau=tau)
    certified, lower = None, None
    if certify:
        certified = certify_bound(nu, eps=eps, max_boxes=max_boxes, starts=[row], **opts)
        lower = float(np.nextafter(certified.lower - nu, -np.inf))
    return RowBound(c, beta, tau, num_negatives, psi, value, nu, tuple(float(x) for x in row), rho, attained_by,
                    attained, theorem13, lower, certified)


def certify_bound(nu: float, *, num_classes: int, beta: float, tau: float = 1.0, num_negatives: int = 1,
                  psi: PsiOption = "infonce", eps: float = 1e-7, max_boxes: int = MAX_BOXES,
                  starts: Sequence[Any] = ()) -> BnBResult:
    """Interval branch and bound of min over sorted m in [-1, 1]^{C-1} of F_beta(m) - nu 1^T m (module docstring);
    its lower end minus nu is a proven lower bound of every collapsed configuration's loss."""
    c = require_int("num_classes", num_classes, min_value=2)
    nu = require_real("nu", nu, min_value=0.0)
    p = c - 1
    nu_i = iv.point(nu)

    def enclose(lo: np.ndarray, hi: np.ndarray, grad: bool) -> Dual:
        row = []
        for i in range(p):
            g = tuple(iv.point(np.full(lo.shape[0], 1.0 if j == i else 0.0)) for j in range(p)) if grad else ()
            row.append(Dual(Interval(lo[:, i], hi[:, i]), g))
        value = interval_row_loss(row, beta=beta, tau=tau, num_negatives=num_negatives, psi=psi)
        for m in row:
            value = value - m * nu_i
        return value

    def outside(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        if p < 2:
            return np.zeros(len(lo), dtype=bool)
        return np.any(lo[:, :-1] > hi[:, 1:] + 1e-12, axis=1)

    return branch_and_bound(enclose, np.full(p, -1.0), np.full(p, 1.0), eps=eps, outside=outside, free=[False] * p,
                            starts=[np.clip(np.sort(np.asarray(s, dtype=np.float64)), -1, 1) for s in starts],
                            per_side=4, max_boxes=max_boxes)


def cluster_asymptotics(*, num_classes: int, beta: float, tau: float = 1.0) -> dict[str, float]:
    """The large-beta equiangular optimum for k = 1, infonce [derived]: with u = beta (1 - rho),

    .. math::

        L(u) = \\log 2 - \\frac{(C - 1)\\, u e^{-u}}{2 \\tau \\beta\\, (1 + (C - 1) e^{-u})} + O(\\beta^{-2}),
        \\qquad u^* = 1 + (C - 1) e^{-u^*},

    so rho* = 1 - u*/beta and L* = log 2 - (C - 1) u* e^{-u*} / (2 tau beta (1 + (C - 1) e^{-u*})) to first order in
    1/beta. Returns ``{"u_star", "rho", "value"}``. Example: C = 3 gives u* = 1.4631 (u = 1 + 2 e^{-u}).
    """
    from scipy.optimize import brentq

    c = require_int("num_classes", num_classes, min_value=2)
    beta = require_real("beta", beta, min_value=0.0, min_inclusive=False)
    u = float(brentq(lambda x: 1 + (c - 1) * math.exp(-x) - x, 1.0, float(c) + 1.0, xtol=1e-15))
    gain = (c - 1) * u * math.exp(-u) / (2 * tau * beta * (1 + (c - 1) * math.exp(-u)))
    return {"u_star": u, "rho": 1 - u / beta, "value": math.log(2) - gain}
