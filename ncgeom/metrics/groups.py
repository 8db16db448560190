"""Validated embeddings grouped by class, and the class means every NC metric starts from.

All metrics of :mod:`ncgeom.metrics` take ``(z, labels)``: ``z`` [N, d] (numpy array or torch tensor,
any float dtype; converted to float64 on the CPU) and ``labels`` [N] (integers, any values). The
classes are the sorted distinct labels; class c is the c-th of them. With ``num_classes=C`` the labels
must instead be exactly 0..C-1, every one present (a class with no sample is an error naming it).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ncgeom.validate import require_finite_array, require_int

__all__ = ["class_means"]


@dataclass(frozen=True)
class _Groups:
    """Internal: validated float64 embeddings with class indices 0..C-1 and class means."""

    z: np.ndarray  # [N, d] float64
    index: np.ndarray  # [N] int, position of each label in ``classes``
    classes: np.ndarray  # [C] the distinct labels, sorted
    counts: np.ndarray  # [C] samples per class
    means: np.ndarray  # [C, d] float64

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
    """``labels`` as an int64 array [n]; integral floats are accepted, anything else is an error."""
    arr = _to_numpy(labels)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be a 1-D array [N], got shape {arr.shape}")
    if arr.shape[0] != n:
        raise ValueError(f"{name} has length {arr.shape[0]} but {rows_of} has {n} rows (they must match)")
    if np.issubdtype(arr.dtype, np.integer) or arr.dtype == bool:
        return arr.astype(np.int64)
    if np.issubdtype(arr.dtype, np.floating):
        if not np.isfinite(arr).all() or not (arr == np.round(arr)).all():
            raise ValueError(f"{name} must hold integers, got non-integral values")
        return arr.astype(np.int64)
    raise ValueError(f"{name} must hold integers, got dtype {arr.dtype}")


def _group(z, labels, *, num_classes: int | None = None, min_classes: int = 2) -> _Groups:
    """Validate ``(z, labels)`` and group by class (see the module docstring for the rules)."""
    zz = _embeddings(z)
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
    return _Groups(z=zz, index=index, classes=classes, counts=counts, means=means)


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
    return _group(z, labels, num_classes=num_classes).means.copy()
