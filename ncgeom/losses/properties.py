"""Numerical checkers for the hypotheses of the theorems: psi convex, psi and eta non-decreasing.

docs/theory.md sections 2-4: Theorem 1 needs psi argument-wise non-decreasing and eta non-decreasing and
non-negative; Theorems 2-3 also need psi convex. These checkers sample random points (from an explicit
Generator) and test the defining inequalities; on failure they return the witness, the point where the
inequality is violated, so that the user sees *why*. A numerical pass is evidence, not proof; the
symbolic checks of ``proofs_check`` prove the built-ins for small k.

The box sampled is the domain the theorems evaluate psi and eta on, no larger (docs/theory.md, section 2): with
features of norm at most r, a similarity s = <z, z'> lies in [-r^2, r^2] and an argument
t = <z, z^-> - <z, z^+> of psi in [-2 r^2, 2 r^2]. Normalized features (ball or sphere, r = 1) reach exactly
t in [-2, 2] and s in [-1, 1], the default boxes (:data:`REACHABLE_T`, :data:`REACHABLE_S`): a psi that is
monotone and convex there satisfies the hypotheses whatever it does outside. Every verdict says which box it
sampled (:attr:`PropertyVerdict.box`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ncgeom.losses.eta import Eta
from ncgeom.losses.psi import Psi
from ncgeom.validate import require_int, require_real

__all__ = ["PropertyVerdict", "check_convex", "check_monotone", "REACHABLE_T", "REACHABLE_S", "reachable_scale"]

#: Half-width of the box of psi's arguments t = <z, z^-> - <z, z^+> that normalized features reach (|t| <= 2).
REACHABLE_T = 2.0
#: Half-width of the box of eta's argument s = <z, z'> that normalized features reach (|s| <= 1).
REACHABLE_S = 1.0


def reachable_scale(radius: float = 1.0) -> float:
    """Half-width 2 r^2 of the arguments t of psi reached by features of norm <= ``radius`` (module docstring).

    >>> reachable_scale(), reachable_scale(2.0)
    (2.0, 8.0)
    """
    r = require_real("radius", radius, min_value=0.0, min_inclusive=False)
    return 2.0 * r * r


@dataclass(frozen=True)
class PropertyVerdict:
    """Outcome of a numerical property check.

    Attributes
    ----------
    property : str
        ``convex`` or ``monotone``.
    subject : str
        Name of the checked Psi or Eta.
    holds : bool
        False iff a violation larger than ``tol`` was found (or a value was NaN).
    num_checks : int
        Number of random inequalities tested.
    max_violation : float
        Largest violation seen (<= 0 means none; NaN if psi/eta returned NaN).
    tol : float
        Allowed violation.
    witness : dict or None
        For a failure, the points and values that violate the inequality.
    box : (float, float) or None
        The interval [lo, hi] every sampled argument lay in (each of the k coordinates of psi's, or eta's s).
    """

    property: str
    subject: str
    holds: bool
    num_checks: int
    max_violation: float
    tol: float
    witness: dict | None = field(default=None)
    box: tuple[float, float] | None = None

    def describe(self) -> str:
        """One line: what was checked, on how many samples, in which box, and the outcome."""
        where = "" if self.box is None else f" in [{self.box[0]:g}, {self.box[1]:g}]"
        if self.holds:
            return f"numerical check passed on {self.num_checks} random samples{where} (evidence, not proof)"
        return (f"numerical check failed on samples{where} (violation {self.max_violation:.3g} > tol {self.tol:.3g}); "
                f"witness {self.witness}")

    def __bool__(self) -> bool:
        return self.holds


def _check_rng(rng):
    if not isinstance(rng, np.random.Generator):
        raise ValueError("rng must be a numpy.random.Generator (randomness is an explicit argument)")


def _tol(values: np.ndarray, tol: float | None) -> float:
    if tol is not None:
        return require_real("tol", tol, min_value=0.0)
    # A few hundred ulps of the magnitudes involved, in float64.
    return 256 * np.finfo(np.float64).eps * max(1.0, float(np.max(np.abs(values))))


def check_convex(psi: Psi, *, k: int, rng: np.random.Generator, num_samples: int = 2000, scale: float = REACHABLE_T,
                 tol: float | None = None) -> PropertyVerdict:
    """Check psi(l a + (1-l) b) <= l psi(a) + (1-l) psi(b) on random a, b in [-scale, scale]^k.

    Parameters
    ----------
    psi : Psi
    k : int
        Number of arguments (negatives), >= 1.
    rng : numpy.random.Generator
    num_samples : int
        Number of random chords (>= 1).
    scale : float
        Half-width of the sampling box (> 0). Default 2: the arguments t in [-2, 2] that normalized features
        reach (module docstring; :func:`reachable_scale` for features of another radius). The chords stay in
        the box (it is convex), so a psi convex on the reachable box passes.
    tol : float, optional
        Allowed violation; default a few hundred float64 ulps of the values.
    """
    if not isinstance(psi, Psi):
        raise ValueError(f"psi must be a Psi (make_psi or custom_psi), got {type(psi).__name__}")
    k = require_int("k", k, min_value=1)
    n = require_int("num_samples", num_samples, min_value=1)
    scale = require_real("scale", scale, min_value=0.0, min_inclusive=False)
    _check_rng(rng)
    a = rng.uniform(-scale, scale, size=(n, k))
    b = rng.uniform(-scale, scale, size=(n, k))
    lam = rng.uniform(0.0, 1.0, size=(n, 1))
    mid = lam * a + (1 - lam) * b
    lhs = np.asarray(psi(mid), dtype=np.float64)
    rhs = lam[:, 0] * np.asarray(psi(a), dtype=np.float64) + (1 - lam[:, 0]) * np.asarray(psi(b), dtype=np.float64)
    t = _tol(np.concatenate([lhs, rhs]), tol)
    viol = lhs - rhs
    worst = int(np.argmax(viol))
    holds = bool(viol[worst] <= t)
    witness = None if holds else {"a": a[worst].tolist(), "b": b[worst].tolist(), "lambda": float(lam[worst, 0]), "psi(mix)": float(lhs[worst]), "chord": float(rhs[worst])}
    return PropertyVerdict("convex", psi.name, holds, n, float(viol[worst]), t, witness, (-scale, scale))


def check_monotone(fn: Psi | Eta, *, k: int = 1, rng: np.random.Generator, num_samples: int = 2000,
                   scale: float | None = None, tol: float | None = None) -> PropertyVerdict:
    """Check that psi is non-decreasing in every argument, or that eta is non-decreasing and >= 0.

    For a Psi: psi(t + delta e_i) >= psi(t) for random t in [-scale, scale]^k, coordinate i and
    delta > 0 with t + delta e_i in the box too. For an Eta: eta(s + delta) >= eta(s) and eta(s) >= 0 for
    random s <= s + delta in [-scale, scale] (``k`` is ignored). ``scale`` defaults to the box normalized
    features reach (module docstring): 2 for a Psi (t in [-2, 2]), 1 for an Eta (s in [-1, 1]).
    """
    if not isinstance(fn, (Psi, Eta)):
        raise ValueError(f"fn must be a Psi or an Eta, got {type(fn).__name__}")
    n = require_int("num_samples", num_samples, min_value=1)
    if scale is None:
        scale = REACHABLE_S if isinstance(fn, Eta) else REACHABLE_T
    scale = require_real("scale", scale, min_value=0.0, min_inclusive=False)
    _check_rng(rng)
    if isinstance(fn, Eta):
        s = rng.uniform(-scale, scale, size=n)
        delta = rng.uniform(0.0, 1.0, size=n) * (scale - s)  # s + delta stays in the box
        lo = np.asarray(fn(s), dtype=np.float64)
        hi = np.asarray(fn(s + delta), dtype=np.float64)
        t = _tol(np.concatenate([lo, hi]), tol)
        viol = np.maximum(lo - hi, -np.minimum(lo, 0.0))
        worst = int(np.argmax(viol))
        holds = bool(viol[worst] <= t)
        witness = None if holds else {"s": float(s[worst]), "s + delta": float(s[worst] + delta[worst]), "eta(s)": float(lo[worst]), "eta(s + delta)": float(hi[worst])}
        return PropertyVerdict("monotone", fn.name, holds, n, float(viol[worst]), t, witness, (-scale, scale))
    k = require_int("k", k, min_value=1)
    tpts = rng.uniform(-scale, scale, size=(n, k))
    coord = rng.integers(0, k, size=n)
    delta = rng.uniform(0.0, 1.0, size=n) * (scale - tpts[np.arange(n), coord])  # t + delta e_i stays in the box
    up = tpts.copy()
    up[np.arange(n), coord] += delta
    lo = np.asarray(fn(tpts), dtype=np.float64)
    hi = np.asarray(fn(up), dtype=np.float64)
    t = _tol(np.concatenate([lo, hi]), tol)
    viol = lo - hi
    worst = int(np.argmax(viol))
    holds = bool(viol[worst] <= t)
    witness = None if holds else {"t": tpts[worst].tolist(), "coordinate": int(coord[worst]), "delta": float(delta[worst]), "psi(t)": float(lo[worst]), "psi(t + delta e_i)": float(hi[worst])}
    return PropertyVerdict("monotone", fn.name, holds, n, float(viol[worst]), t, witness, (-scale, scale))
