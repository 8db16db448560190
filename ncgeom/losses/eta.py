"""Hardening functions eta (docs/theory.md section 3).

Hard negatives are drawn from q(x^-) proportional to eta(<f(x), f(x^-)>) p(x^-), with eta: R -> [0, inf)
non-decreasing. The built-in is exponential tilting

.. math:: \\eta_\\beta(s) = e^{\\beta s},\\qquad \\beta \\ge 0,

beta = 0 being no hardening. Robinson et al.'s code tilts s/tau, so beta_theirs = beta_ours * tau
(docs/conventions.md). An Eta is represented by its logarithm, so that weights are normalized in
log space (softmax), never by exp then sum.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ncgeom.validate import require_finite_array, require_real

__all__ = ["Eta", "exponential_tilt", "custom_eta", "tilt_weights"]


@dataclass(frozen=True)
class Eta:
    """A hardening function, stored as log eta (``-inf`` where eta = 0).

    Attributes
    ----------
    name : str
    log_func : callable
        s (numpy array or torch tensor) -> log eta(s), same shape.
    beta : float or None
        The tilt for the built-in exponential eta; None for user functions.
    builtin : bool
        True for exponential tilting (non-decreasing by construction for beta >= 0).
    """

    name: str
    log_func: Callable[[Any], Any] = field(repr=False, compare=False)
    beta: float | None = None
    builtin: bool = False

    def __call__(self, s):
        """eta(s) = exp(log_func(s))."""
        ls = self.log_func(s)
        return ls.exp() if hasattr(ls, "detach") else np.exp(ls)

    def log(self, s):
        """log eta(s)."""
        return self.log_func(s)


def exponential_tilt(beta: float = 0.0) -> Eta:
    """eta(s) = exp(beta * s), beta >= 0 (docs/theory.md section 3). beta = 0 is no hardening."""
    beta = require_real("beta", beta, min_value=0.0)
    return Eta("exponential", lambda s: beta * s, beta=beta, builtin=True)


def custom_eta(func: Callable[[Any], Any], *, name: str = "custom") -> Eta:
    """Wrap a user eta(s) >= 0 (numpy in, numpy out). Check monotonicity with check_monotone."""
    if not callable(func):
        raise ValueError("func must be callable: s -> eta(s) >= 0")

    def log_func(s):
        v = np.asarray(func(s), dtype=np.float64)
        if np.any(v < 0) or not np.all(np.isfinite(v)):
            raise ValueError(f"eta {name!r} must return finite values >= 0")
        with np.errstate(divide="ignore"):
            return np.log(v)

    return Eta(name, log_func, beta=None, builtin=False)


def tilt_weights(eta: Eta, similarities, base_weights=None) -> np.ndarray:
    """Normalized tilted law over a finite set of candidates (numpy, float64).

    .. math:: q_m = \\frac{\\eta(s_m) p_m}{\\sum_{m'} \\eta(s_{m'}) p_{m'}}

    where s = ``similarities`` [..., n] (finite) and p = ``base_weights`` [..., n] (finite, >= 0,
    broadcastable against s; uniform if None). Computed as a softmax in log space along the last axis.
    """
    if not isinstance(eta, Eta):
        raise ValueError(f"eta must be an Eta (exponential_tilt or custom_eta), got {type(eta).__name__}")
    s = np.asarray(similarities, dtype=np.float64)
    require_finite_array("similarities", s)
    logw = np.asarray(eta.log(s), dtype=np.float64)
    if base_weights is not None:
        p = np.asarray(base_weights, dtype=np.float64)
        require_finite_array("base_weights", p)
        if np.any(p < 0):
            raise ValueError("base_weights must be >= 0 (a probability law up to normalization)")
        if not _broadcasts_to(p.shape, s.shape):
            raise ValueError(f"base_weights must have a shape broadcastable to similarities {s.shape}, got {p.shape}")
        with np.errstate(divide="ignore"):
            logw = logw + np.log(p)
    m = np.max(logw, axis=-1, keepdims=True)
    if not np.all(np.isfinite(m)):
        raise ValueError("tilted weights are all zero for some anchor: eta * p must be positive somewhere")
    w = np.exp(logw - m)
    return w / w.sum(axis=-1, keepdims=True)


def _broadcasts_to(shape: tuple, target: tuple) -> bool:
    try:
        return np.broadcast_shapes(shape, target) == target
    except ValueError:
        return False
