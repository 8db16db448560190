"""The loss family psi_k (docs/theory.md section 2).

A contrastive loss with k negatives is l_k = psi_k(t_1, ..., t_k), t_i = <z, z_i^-> - <z, z^+>, with
psi_k convex and non-decreasing in every argument (jiang2025hard, "general loss functions").

Built-ins (``t`` has shape [..., k]; the value has shape [...]):

.. math::

    \\psi^{\\mathrm{infonce}}_k(t) = \\log\\Big(1 + \\sum_{i=1}^k e^{t_i/\\tau}\\Big),\\qquad
    \\psi^{\\mathrm{infonce\\text{-}mean}}_k(t) = \\log\\Big(1 + \\frac1k \\sum_{i=1}^k e^{t_i/\\tau}\\Big),\\qquad
    \\psi^{\\mathrm{triplet}}_k(t) = \\frac1k \\sum_{i=1}^k \\max(0, t_i + m),

where tau = ``tau`` > 0 and m = ``margin``. All are computed in log space (log-sum-exp), so large
|t|/tau never overflows. Every psi accepts numpy arrays (float64 recommended) and torch tensors.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ncgeom.ranges import require_margin
from ncgeom.validate import require_choice, require_real
from ncgeom.vocabulary import PSI_NAMES, PsiName

__all__ = [
    "Psi",
    "infonce",
    "infonce_mean",
    "triplet",
    "make_psi",
    "custom_psi",
]


@dataclass(frozen=True)
class Psi:
    """A member psi_k of the loss family, for every k (the last axis of its argument).

    Attributes
    ----------
    name : str
        ``infonce``, ``infonce-mean``, ``triplet`` or a user name.
    func : callable
        t [..., k] -> value [...]; numpy or torch in, same type out.
    params : dict
        The parameters (``tau``, ``margin``) that ``func`` closes over, for records and reports.
    symmetric : bool
        True if psi_k is invariant under permutations of its arguments (all built-ins are). The
        closed forms of docs/theory.md section 5 use this.
    builtin : bool
        True for the three built-ins (whose convexity and monotonicity are proven); user psi must be
        checked with :func:`ncgeom.losses.check_convex` and :func:`ncgeom.losses.check_monotone`.
    """

    name: str
    func: Callable[[Any], Any] = field(repr=False, compare=False)
    params: dict = field(default_factory=dict, compare=True, hash=False)
    symmetric: bool = True
    builtin: bool = False

    def __call__(self, t):
        """Evaluate psi_k on ``t`` [..., k] (k = size of the last axis, >= 1)."""
        if getattr(t, "ndim", 0) < 1 or t.shape[-1] < 1:
            raise ValueError("t must have shape [..., k] with k >= 1")
        return self.func(t)

    @property
    def tau(self) -> float | None:
        return self.params.get("tau")

    @property
    def margin(self) -> float | None:
        return self.params.get("margin")


def _is_torch(x) -> bool:
    return hasattr(x, "detach")


def _logsumexp(x):
    if _is_torch(x):
        import torch

        return torch.logsumexp(x, dim=-1)
    from scipy.special import logsumexp

    return logsumexp(x, axis=-1)


def _logaddexp0(x):
    """log(1 + e^x), stable."""
    if _is_torch(x):
        import torch

        return torch.logaddexp(torch.zeros_like(x), x)
    return np.logaddexp(0.0, x)


def infonce(*, tau: float = 1.0) -> Psi:
    """InfoNCE with k negatives: psi_k(t) = log(1 + sum_i exp(t_i / tau)) (docs/theory.md section 2).

    Example: with k = 1, tau = 1, t = 0 the value is log 2.
    """
    tau = require_real("tau", tau, min_value=0.0, min_inclusive=False)

    def func(t):
        return _logaddexp0(_logsumexp(t / tau))

    return Psi("infonce", func, {"tau": tau}, symmetric=True, builtin=True)


def infonce_mean(*, tau: float = 1.0) -> Psi:
    """InfoNCE, mean form: psi_k(t) = log(1 + (1/k) sum_i exp(t_i / tau)) (the authors' code).

    docs/theory.md section 2 [code]: the authors train with tau = 1 and k = 256.
    """
    tau = require_real("tau", tau, min_value=0.0, min_inclusive=False)

    def func(t):
        k = t.shape[-1]
        return _logaddexp0(_logsumexp(t / tau) - math.log(k))

    return Psi("infonce-mean", func, {"tau": tau}, symmetric=True, builtin=True)


def triplet(*, margin: float = 1.0) -> Psi:
    """Triplet hinge, averaged over negatives: psi_k(t) = (1/k) sum_i max(0, t_i + margin).

    Convex and non-decreasing but not strictly convex (docs/theory.md section 2). At an SCL NC point its
    value is max(0, margin - C/(C-1)). ``margin`` must lie in [-1e4, 1e4] (``ncgeom.ranges.MARGIN_MAX``:
    the value then stays finite in every float type, and a margin of 1e308 would make it inf).
    """
    margin = require_margin(margin)

    def func(t):
        if _is_torch(t):
            return (t + margin).clamp_min(0.0).mean(dim=-1)
        return np.maximum(t + margin, 0.0).mean(axis=-1)

    return Psi("triplet", func, {"margin": margin}, symmetric=True, builtin=True)


def make_psi(name: PsiName | Psi, *, tau: float = 1.0, margin: float = 1.0) -> Psi:
    """Built-in psi by name (``infonce``, ``infonce-mean``, ``triplet``); a Psi passes through."""
    if isinstance(name, Psi):
        return name
    name = require_choice("psi", name, PSI_NAMES)
    if name == "infonce":
        return infonce(tau=tau)
    if name == "infonce-mean":
        return infonce_mean(tau=tau)
    return triplet(margin=margin)


def custom_psi(func: Callable[[Any], Any], *, name: str = "custom", symmetric: bool = False, **params) -> Psi:
    """Wrap a user function t [..., k] -> [...] as a Psi.

    The theorems need psi convex and argument-wise non-decreasing: check both with
    :func:`ncgeom.losses.check_convex` and :func:`ncgeom.losses.check_monotone` before trusting a bound.
    Set ``symmetric=True`` only if psi is permutation invariant (the closed forms rely on it).
    """
    if not callable(func):
        raise ValueError("func must be callable: t [..., k] -> value [...]")
    return Psi(name, func, dict(params), symmetric=bool(symmetric), builtin=False)
