"""Validated embeddings grouped by class, and the class means every NC metric starts from.

All metrics of :mod:`ncgeom.metrics` take ``(z, labels)``: ``z`` [N, d] (numpy array or torch tensor,
any float dtype; converted to float64 on the CPU) and ``labels`` [N] (integers, any values, or strings;
:func:`ncgeom.labels.integer_labels`). The classes are the sorted distinct labels; class c is the c-th of
them. With ``num_classes=C`` the labels must instead be exactly 0..C-1, every one present (a class with no
sample is an error naming it).

Scale. z is divided by a power of two s = 2^e close to max |z_ij| before anything is squared or summed
(exact: only the exponent changes), so no intermediate under- or overflows whatever the scale of z
(1e-170 or 1e150 alike). The scale-invariant metrics (equal_inner_product, nc1, etf_distance, spectrum,
rankme, ncc_accuracy) are computed on z / s alone and give bitwise the same value for z and 2^m z; the
homogeneous ones (zero_sum, within_class) are multiplied back by s, and unit_norm compares s ||mu_c|| with
1. An all-zero z keeps s = 1 (the metrics then follow their documented failure modes: NaN where undefined).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ncgeom.labels import integer_labels
from ncgeom.validate import require_finite_array, require_int

__all__ = ["class_means"]


@dataclass(frozen=True)
class _Groups:
    """Internal: validated float64 embeddings divided by their scale, class indices 0..C-1 and class means.

    The embeddings are ``scale * z`` and the class means ``scale * means`` (module docstring, "Scale").
    """

    z: np.ndarray  # [N, d] float64, divided by ``scale`` (max |z| in [1, 2), or all zero)
    index: np.ndarray  # [N] int, position of each label in ``classes``
    classes: np.ndarray  # [C] the distinct labels, sorted
    counts: np.ndarray  # [C] samples per class
    means: np.ndarray  # [C, d] float64, class means of the scaled ``z``
    scale: float  # a power of two (1.0 for an all-zero z)

    @property
    def num_classes(self) -> int:
        return int(self.classes.shape[0])


def _to_numpy(x) -> np.ndarray:
    if hasattr(x, "detach"):  # torch tensor, without importing torch
        return x.detach().cpu().numpy()
    return np.asarray(x)


def _embeddings(z, name: str = "z") -> np.ndarray:
    """``z`` as a finite float64 array [N, d] with N, d >= 1, or ValueError naming ``name``."""
    arr = _to_numpy(z)
    if arr.dtype == object or not (np.issubdtype(arr.dtype, np.number) or arr.dtype == bool):
        raise ValueError(f"{name} must be a numeric array [N, d], got dtype {arr.dtype}")
    if arr.ndim != 2 or arr.shape[0] < 1 or arr.shape[1] < 1:
        raise ValueError(f"{name} must be a 2-D array [N, d] with N >= 1 and d >= 1, got shape {arr.shape}")
    if np.iscomplexobj(arr):
        raise ValueError(f"{name} must be real, got dtype {arr.dtype}")
    arr = arr.astype(np.float64, copy=False)
    require_finite_array(name, arr)
    return arr


def _integer_labels(labels, n: int, name: str = "labels", rows_of: str = "z") -> np.ndarray:
    """``labels`` as an int64 array [n] (:func:`ncgeom.labels.integer_labels`)."""
    return integer_labels(labels, n=n, name=name, rows_of=rows_of)


def _power_of_two_scale(z: np.ndarray) -> float:
    """2^e with max |z| in [2^e, 2^(e+1)): dividing by it is exact; 1.0 for an all-zero z.

    2^e itself is always finite (e <= 1023), even for max |z| near the largest float64.
    """
    peak = float(np.max(np.abs(z))) if z.size else 0.0
    if peak == 0.0:
        return 1.0
    return float(np.ldexp(1.0, int(np.frexp(peak)[1]) - 1))


def _unit_scaled(z: np.ndarray) -> tuple[np.ndarray, float]:
    """(z / s, s) with s = :func:`_power_of_two_scale` (z / s has max |.| in [1, 2))."""
    s = _power_of_two_scale(z)
    return (z / s if s != 1.0 else z), s


def _group(z, labels, *, num_classes: int | None = None, min_classes: int = 2) -> _Groups:
    """Validate ``(z, labels)`` and group by class (see the module docstring for the rules)."""
    zz, scale = _unit_scaled(_embeddings(z))
    y = _integer_labels(labels, zz.shape[0])
    if num_classes is not None:
        c = require_int("num_classes", num_classes, min_value=2)
        outside = y[(y < 0) | (y >= c)]
        if outside.size:
            raise ValueError(f"labels must lie in 0..{c - 1} when num_classes={c} is given, got label {outside[0]}")
        counts = np.bincount(y, minlength=c)
        empty = np.flatnonzero(counts == 0)
        if empty.size:
            missing = ", ".join(map(str, empty[:5])) + (", ..." if empty.size > 5 else "")
            raise ValueError(f"labels: class {missing} has no sample (num_classes={c})")
        classes, index = np.arange(c), y
    else:
        classes, index, counts = np.unique(y, return_inverse=True, return_counts=True)
        index = index.reshape(-1)
        if classes.size < min_classes:
            found = classes.tolist()
            raise ValueError(f"labels must contain at least {min_classes} classes, got {classes.size}: {found}")
    sums = np.zeros((classes.size, zz.shape[1]))
    np.add.at(sums, index, zz)
    means = sums / counts[:, None]
    return _Groups(z=zz, index=index, classes=classes, counts=counts, means=means, scale=scale)


def class_means(z, labels, *, num_classes: int | None = None) -> np.ndarray:
    """Class means mu_c, one row per class in sorted label order, [C, d] float64.

    .. math:: \\mu_c = \\frac{1}{n_c} \\sum_{i : y_i = c} z_i

    where z_i = ``z[i]`` [N, d], y_i = ``labels[i]`` [N] and n_c the number of samples of class c
    (docs/theory.md section 8). Row c belongs to the c-th smallest distinct label (``np.unique(labels)``),
    or to label c when ``num_classes`` is given (then the labels must be 0..C-1, all present).

    Examples
    --------
    >>> class_means([[1.0, 0.0], [3.0, 0.0], [0.0, 2.0]], [7, 7, 4])
    array([[0., 2.],
           [2., 0.]])
    """
    g = _group(z, labels, num_classes=num_classes)
    return g.means * g.scale
