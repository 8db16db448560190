"""The minority-merge criterion of the imbalance ablation (Theorems 2 and 3, hypothesis 1), with the tilt term.

Under the prior (r, 1, ..., 1)/(r + C - 1) (:mod:`proofs_check.ablations.imbalance`), the minority classes merge into
one point antipodal to the majority beyond a ratio r_mc. :func:`merge_criterion` is the second variation of the loss
along minority spreads at the merged configuration (derived, with the tilt's term for HSCL), :func:`merge_ratio` its
root in r (closed forms at beta = 0), :func:`merge_ratio_table` the roots for the ablated settings and C in
{3, 4, 6, 10}. :mod:`proofs_check.ablations.imbalance` re-exports them.

Sources: docs/theory.md, section 4 (Theorems 2 and 3, hypothesis 1); jiang2025hard, Theorems 2-3; the
minority-collapse picture of fang2021exploring.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ncgeom.validate import require_choice, require_int, require_real
from ncgeom.vocabulary import SETTINGS, Setting, effective_beta, is_supervised

__all__ = ["MERGE_TABLE_CLASSES", "MERGE_SETTINGS", "merge_criterion", "merge_ratio", "merge_ratio_table"]

TAU = 1.0  # the ablation's temperature (proofs_check.ablations.imbalance.TAU, which imports this module)
#: The (setting, beta) pairs of the imbalance ablation (its records), in order.
MERGE_SETTINGS: tuple[tuple[Setting, float], ...] = (("scl", 0.0), ("hscl", 1.0), ("hscl", 5.0), ("ucl", 0.0))


def merge_criterion(num_classes: int, setting: Setting, ratio: float, *, beta: float = 0.0, tau: float = TAU) -> float:
    """Delta(r, beta) = a - (C - 1) b: > 0 iff the merged configuration is a strict local minimizer along every minority
    spread (module docstring, with the tilt). Derivation [derived]: a spread x_m (x_m orthogonal to u, sum_m x_m = 0)
    of size eps changes M_0m = -1 + eps^2 |x_m|^2 / 2 and M_mm' = 1 - eps^2 |x_m - x_m'|^2 / 2, so to second order

    .. math::

        \\delta L = \\frac{\\varepsilon^2}{2}\\Big[\\sum_m A_{0m} |x_m|^2 - \\sum_{m < m'} A_{mm'} |x_m - x_{m'}|^2\\Big]
                  = \\frac{\\varepsilon^2}{2} \\big(a - (C - 1) b\\big) \\sum_m |x_m|^2,

    with A_cc' = lambda_c dL_c/dM_cc' + lambda_c' dL_c'/dM_c'c the derivative of L in the inner product of the pair,
    dL_c/dM_cc' = q_c(c') [g'(M_cc') + beta (g(M_cc') - L_c)] (the tilt's term: q_c moves with M), a = A_0m and b = A_mm'
    at the merged configuration (equal by symmetry). At beta = 0 its root is :func:`merge_ratio`'s closed form.
    """
    c = require_int("num_classes", num_classes, min_value=3)
    setting = require_choice("setting", setting, SETTINGS)
    beta = effective_beta(setting, require_real("beta", beta, min_value=0.0))
    r = require_real("ratio", ratio, min_value=1.0)
    lam_major, lam_minor = r / (r + c - 1), 1.0 / (r + c - 1)

    def g(m: float) -> float:
        return math.log1p(math.exp((m - 1.0) / tau))

    def g1(m: float) -> float:
        return 1.0 / (1.0 + math.exp(-(m - 1.0) / tau)) / tau

    own = 0.0 if is_supervised(setting) else 1.0  # the anchor's own class among the negatives (UCL, HUCL)
    # majority anchor: minorities at -1 (each lam_minor e^{-beta}); own class at +1 when unsupervised
    w_minor, w_own0 = lam_minor * math.exp(-beta), own * lam_major * math.exp(beta)
    z0 = (c - 1) * w_minor + w_own0
    loss0 = ((c - 1) * w_minor * g(-1.0) + w_own0 * g(1.0)) / z0
    d0 = w_minor / z0 * (g1(-1.0) + beta * (g(-1.0) - loss0))
    # minority anchor: majority at -1, the other C - 2 minorities at +1, and itself at +1 when unsupervised
    w_major, w_other = lam_major * math.exp(-beta), lam_minor * math.exp(beta)
    zm = w_major + (c - 2 + own) * w_other
    lossm = (w_major * g(-1.0) + (c - 2 + own) * w_other * g(1.0)) / zm
    dm_major = w_major / zm * (g1(-1.0) + beta * (g(-1.0) - lossm))
    dm_other = w_other / zm * (g1(1.0) + beta * (g(1.0) - lossm))
    a = lam_major * d0 + lam_minor * dm_major
    b = 2 * lam_minor * dm_other
    return a - (c - 1) * b


def merge_ratio(num_classes: int, setting: Setting, *, beta: float = 0.0, tau: float = TAU,
                r_max: float = 1e6) -> float | None:
    """r_mc: above it the merged configuration (majority at -u, minorities at u) is a local minimizer (module
    docstring); the root of :func:`merge_criterion` in r (brentq to 1e-12 relative), None when it has none in
    [1, r_max]. At beta = 0 the closed forms: SCL the root of r(r + 2C - 3) = 2 (C - 1)^2 kappa; UCL (C - 1) kappa.
    Example: C = 3, SCL, tau = 1: r(r + 3) = 8 (1 + e^2)/2, r = 4.4838."""
    c = require_int("num_classes", num_classes, min_value=3)
    setting = require_choice("setting", setting, SETTINGS)
    beta = effective_beta(setting, require_real("beta", beta, min_value=0.0))
    if beta == 0.0:
        kappa = (1.0 + math.exp(2.0 / tau)) / 2.0  # g'(1) / g'(-1), g'(m) = expit((m - 1) / tau) / tau
        if not is_supervised(setting):
            return (c - 1) * kappa
        b = 2 * c - 3
        return (-b + math.sqrt(b * b + 8 * (c - 1) ** 2 * kappa)) / 2
    from scipy.optimize import brentq

    f = lambda r: merge_criterion(c, setting, r, beta=beta, tau=tau)  # noqa: E731
    grid = np.geomspace(1.0, r_max, 241)
    values = [f(r) for r in grid]
    for lo, hi, flo, fhi in zip(grid, grid[1:], values, values[1:]):
        if flo <= 0 < fhi:
            return float(brentq(f, lo, hi, xtol=1e-13, rtol=1e-12))
    return None


#: The (C, setting, beta) of :func:`merge_ratio_table`: every ablated setting at the C of docs/results.md's table.
MERGE_TABLE_CLASSES: tuple[int, ...] = (3, 4, 6, 10)


def merge_ratio_table() -> list[dict[str, Any]]:
    """r_mc (:func:`merge_ratio`) for every ablated (setting, beta) and C in :data:`MERGE_TABLE_CLASSES`, with the sign
    of :func:`merge_criterion` at r_mc (1 -/+ 1e-6) as a check of the root (closed-form evaluations: milliseconds)."""
    rows = []
    for setting, beta in MERGE_SETTINGS:
        for c in MERGE_TABLE_CLASSES:
            r = merge_ratio(c, setting, beta=beta)
            signs = None if r is None else [merge_criterion(c, setting, r * (1 - 1e-6), beta=beta) < 0,
                                            merge_criterion(c, setting, r * (1 + 1e-6), beta=beta) > 0]
            rows.append({"num_classes": c, "setting": setting, "beta": beta, "merge_ratio": r,
                         "criterion_changes_sign": None if signs is None else all(signs)})
    return rows
