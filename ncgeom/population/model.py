"""Finite latent-class models: the data law of the population losses (docs/theory.md sections 1 and 3).

A model has C latent classes with prior lambda [C]; class c is a finite set of embedded points
z = f(x) in R^d, [n_c, d], with weights [n_c] summing to 1 (the law of x given c, pushed through f).
Points of a class may coincide (several instances, one embedding) and points of different classes may
coincide too. The model stores embeddings, not inputs: normalize them first (``ncgeom.geometry.normalize``)
to be in the setting of the theorems.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import ArrayLike

from ncgeom.geometry import simplex_etf
from ncgeom.labels import integer_labels
from ncgeom.validate import require_finite_array, require_int

__all__ = ["FiniteLatentModel", "model_from_embeddings", "nc_model"]

# Probability vectors must sum to 1 up to a few hundred float64 ulps (sums of user floats).
_SUM_TOL = 512 * np.finfo(np.float64).eps


def _readonly(a: np.ndarray) -> np.ndarray:
    a = np.array(a, dtype=np.float64, copy=True)
    a.setflags(write=False)
    return a


@dataclass(frozen=True, eq=False, init=False)
class FiniteLatentModel:
    """A balanced or unbalanced latent-class model with finitely many embedded points per class.

    Parameters
    ----------
    points : sequence of arrays [n_c, d]
        Embeddings of the instances of each class (C >= 2 classes, n_c >= 1, same d).
    weights : sequence of arrays [n_c], optional
        Law of the instance within its class (non-negative, sum 1 per class); uniform if None.
    prior : array [C], optional
        Class prior lambda (every entry > 0, sum 1); uniform (balanced) if None.

    Attributes
    ----------
    embeddings : ndarray [N, d]
        All points, class by class (N = sum n_c).
    labels : ndarray [N]
        Class of each row of ``embeddings``.
    probabilities : ndarray [N]
        Marginal law of a draw: lambda_{y_m} w_m (sums to 1).

    Examples
    --------
    >>> m = FiniteLatentModel([[[1.0]], [[-1.0]]])
    >>> m.num_classes, m.dim, m.probabilities.tolist()
    (2, 1, [0.5, 0.5])
    """

    points: tuple[np.ndarray, ...]
    weights: tuple[np.ndarray, ...]
    prior: np.ndarray
    _flat: tuple[np.ndarray, np.ndarray, np.ndarray] = field(init=False, repr=False)

    def __init__(
        self,
        points: Sequence[ArrayLike],
        weights: Sequence[ArrayLike] | None = None,
        prior: ArrayLike | None = None,
    ) -> None:
        # frozen dataclass with a hand-written __init__: inputs are validated and stored read-only,
        # so the attributes have one type (arrays) whatever sequences were passed.
        pts = tuple(np.asarray(p, dtype=np.float64) for p in points)
        if len(pts) < 2:
            raise ValueError(f"points must hold >= 2 classes, got {len(pts)}")
        d = pts[0].shape[-1] if pts[0].ndim == 2 else None
        for c, p in enumerate(pts):
            if p.ndim != 2 or p.shape[0] < 1 or p.shape[1] < 1 or p.shape[1] != d:
                raise ValueError(f"points[{c}] must have shape [n_c >= 1, d] with the same d >= 1 for all classes, got {p.shape}")
            require_finite_array(f"points[{c}]", p)
        if weights is None:
            ws = tuple(np.full(p.shape[0], 1.0 / p.shape[0]) for p in pts)
        else:
            if len(weights) != len(pts):
                raise ValueError(f"weights must hold one array per class ({len(pts)}), got {len(weights)}")
            ws = tuple(np.asarray(w, dtype=np.float64) for w in weights)
            for c, (w, p) in enumerate(zip(ws, pts)):
                if w.shape != (p.shape[0],) or not np.all(np.isfinite(w)) or np.any(w < 0) or abs(w.sum() - 1.0) > _SUM_TOL:
                    raise ValueError(f"weights[{c}] must be a probability vector of shape [{p.shape[0]}] (>= 0, sum 1)")
        c = len(pts)
        lam = np.full(c, 1.0 / c) if prior is None else np.asarray(prior, dtype=np.float64)
        if lam.shape != (c,) or not np.all(np.isfinite(lam)) or np.any(lam <= 0) or abs(lam.sum() - 1.0) > _SUM_TOL:
            raise ValueError(f"prior must have shape [{c}], entries > 0 and sum 1, got {prior!r}")
        object.__setattr__(self, "points", tuple(_readonly(p) for p in pts))
        object.__setattr__(self, "weights", tuple(_readonly(w) for w in ws))
        object.__setattr__(self, "prior", _readonly(lam))
        object.__setattr__(self, "_flat", (
            _readonly(np.concatenate(pts, axis=0)),
            np.concatenate([np.full(p.shape[0], i) for i, p in enumerate(pts)]),
            _readonly(np.concatenate([lam[i] * w for i, w in enumerate(ws)])),
        ))

    @property
    def num_classes(self) -> int:
        return len(self.points)

    @property
    def dim(self) -> int:
        return int(self.points[0].shape[1])

    @property
    def embeddings(self) -> np.ndarray:
        return self._flat[0]

    @property
    def labels(self) -> np.ndarray:
        return self._flat[1]

    @property
    def probabilities(self) -> np.ndarray:
        return self._flat[2]

    @property
    def max_norm(self) -> float:
        """max ||z|| over the points (<= 1 on the ball, = 1 on the sphere)."""
        return float(np.max(np.linalg.norm(self.embeddings, axis=1)))

    def is_balanced(self, *, atol: float = 64 * np.finfo(np.float64).eps) -> bool:
        """True iff every lambda_c is within ``atol`` of 1/C."""
        return bool(np.max(np.abs(self.prior - 1.0 / self.num_classes)) <= atol)


def model_from_embeddings(z, labels, *, weights=None, prior=None) -> FiniteLatentModel:
    """Build a model from embeddings z [N, d] and integer labels [N] in {0..C-1} (every class present).

    ``weights`` [N] (non-negative) are normalized within each class (uniform if None); ``prior`` [C]
    defaults to balanced (1/C), as the theorems assume, not to the label frequencies.
    """
    z = np.asarray(z, dtype=np.float64)
    if z.ndim != 2:
        raise ValueError(f"z must be [N, d], got shape {z.shape}")
    y = integer_labels(labels, n=z.shape[0])  # integers or strings mapped to ids, never lossy floats
    if y.size == 0 or y.min() < 0:
        raise ValueError("labels must be non-negative integers")
    c = int(y.max()) + 1
    if c < 2 or np.any(np.bincount(y, minlength=c) == 0):
        raise ValueError(f"labels must use every class 0..C-1 with C >= 2, got classes {sorted(set(y.tolist()))}")
    w = np.ones(z.shape[0]) if weights is None else np.asarray(weights, dtype=np.float64)
    if w.shape != (z.shape[0],) or np.any(w < 0) or not np.all(np.isfinite(w)):
        raise ValueError(f"weights must be [N] = [{z.shape[0]}], finite and >= 0")
    pts, ws = [], []
    for cls in range(c):
        mask = y == cls
        total = w[mask].sum()
        if total <= 0:
            raise ValueError(f"weights of class {cls} must not all be zero")
        pts.append(z[mask])
        ws.append(w[mask] / total)
    return FiniteLatentModel(pts, ws, prior)


def nc_model(num_classes: int, dim: int | None = None, *, rng: np.random.Generator | None = None, points_per_class: int = 1) -> FiniteLatentModel:
    """The neural-collapse model: every point of class c sits at the ETF vertex v_c (balanced prior).

    ``dim`` >= C-1 (default C-1); ``rng`` rotates the ETF (:func:`ncgeom.geometry.simplex_etf`);
    ``points_per_class`` identical copies per class (uniform weights), to exercise enumeration.
    """
    c = require_int("num_classes", num_classes, min_value=2)
    n = require_int("points_per_class", points_per_class, min_value=1)
    v = simplex_etf(c, dim, rng=rng)
    return FiniteLatentModel([np.repeat(v[i : i + 1], n, axis=0) for i in range(c)])
