"""The validated ranges of the loss parameters beta, tau and the triplet margin (docs/theory.md section 7).

No heavy import: configuration and command-line validation import these too.

- ``beta`` in [0, BETA_MAX] = [0, 1e4] and ``tau`` >= TAU_MIN = 1e-3. For embeddings of norm <= 1 (sphere,
  ball) the batch losses (dense, blocked, sampled backends) and their gradients are finite in float32
  there, and the float32 value differs from the float64 value by at most about (beta + 1/tau) * 2^-23
  (the log-sum-exp of (beta + 1/tau) S is formed in the working precision and differenced): 1e-3 at the
  corner beta = 1e4, tau = 1e-3. Beyond, the loss stays finite up to (beta + 1/tau) ~ 3e38 (where
  beta * S overflows float32: beta = 3e38 gave inf and NaN) but the float32 error grows with beta + 1/tau,
  so the range is an accuracy limit, not only an overflow limit. Large tau is harmless (tested up to
  1e39, beyond the float32 range): tau has no upper bound.
- ``margin`` of the triplet psi: |margin| <= MARGIN_MAX = 1e4. psi = mean(max(0, t + margin)) then stays
  below 1e4 + |t| in every float type (float16 included), and in float32 the similarities t keep a
  resolution of 1e4 * 2^-24 ~ 6e-4 next to the margin; a margin of 1e308 made the value inf.
"""

from __future__ import annotations

from ncgeom.validate import require_real

__all__ = ["BETA_MAX", "TAU_MIN", "MARGIN_MAX", "require_beta", "require_tau", "require_margin"]

BETA_MAX: float = 1e4
"""Largest accepted hardness beta of the exponential tilt (module docstring)."""

TAU_MIN: float = 1e-3
"""Smallest accepted temperature tau (module docstring)."""

MARGIN_MAX: float = 1e4
"""Largest accepted |margin| of the triplet psi (module docstring)."""


def require_beta(beta: object, *, name: str = "beta") -> float:
    """``beta`` as a float in [0, BETA_MAX], or ValueError naming the range."""
    return require_real(name, beta, min_value=0.0, max_value=BETA_MAX)


def require_tau(tau: object, *, name: str = "tau") -> float:
    """``tau`` as a finite float >= TAU_MIN, or ValueError naming the range."""
    return require_real(name, tau, min_value=TAU_MIN)


def require_margin(margin: object, *, name: str = "margin") -> float:
    """``margin`` as a float in [-MARGIN_MAX, MARGIN_MAX], or ValueError naming the range."""
    return require_real(name, margin, min_value=-MARGIN_MAX, max_value=MARGIN_MAX)
