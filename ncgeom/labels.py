"""Class labels: the one conversion every metric, loss, population and data function uses.

A label array [N] is accepted when it is one of:

- **integers**: any integer dtype (or Python ints, or booleans), within the int64 range; the values are
  kept;
- **strings** (or other orderable objects that are not numbers): mapped to ids, the sorted distinct
  values becoming 0..C-1;
- **floats holding exact integers** of magnitude at most 2^p, where p is the precision of the float type
  (2^53 for float64, 2^24 for float32, 2^11 for float16). In that range the float type represents every
  integer, so two distinct integer labels can never have been rounded onto one float. Labels saved in a
  CSV file or a float array therefore still work.

Everything else is refused with a ValueError naming the argument: a fractional or non-finite float, and
a float beyond 2^p, however integral: 1e30 and 2e30 are both integers in float64, but so is every float
beyond 2^53, and labels rounded there may already have merged (docs/reliability.md, "Numerics at the
edges and files"). Torch tensors of labels are accepted by :func:`check_label_tensor` only with an
integer dtype: the batch losses do not convert.
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np

__all__ = ["integer_labels", "as_class_ids", "check_label_tensor", "exact_integer_limit"]

_INT64 = np.iinfo(np.int64)


def exact_integer_limit(dtype: Any) -> int:
    """2^p for a float dtype of p significand bits: every integer of magnitude <= 2^p is exact in it.

    Examples
    --------
    >>> exact_integer_limit(np.float64), exact_integer_limit(np.float32)
    (9007199254740992, 16777216)
    """
    return 2 ** (np.finfo(dtype).nmant + 1)


def _to_numpy(x: Any) -> np.ndarray:
    if hasattr(x, "detach"):  # torch tensor, without importing torch
        return x.detach().cpu().numpy()
    return np.asarray(x)


def _from_floats(arr: np.ndarray, name: str) -> np.ndarray:
    limit = exact_integer_limit(arr.dtype)
    if not np.isfinite(arr).all():
        raise ValueError(f"{name} must hold integers, got a non-finite float label")
    if not (arr == np.round(arr)).all():
        bad = arr[arr != np.round(arr)][0]
        raise ValueError(f"{name} must hold integers, got non-integral values (e.g. {bad!r})")
    if arr.size and float(np.max(np.abs(arr))) > limit:
        raise ValueError(
            f"{name} must hold integers; float labels are accepted only up to magnitude 2^{limit.bit_length() - 1}"
            f" = {limit} for {arr.dtype} (every integer is exact there), got {float(np.max(np.abs(arr))):g}:"
            " pass integer labels"
        )
    return arr.astype(np.int64)


def _from_objects(arr: np.ndarray, name: str) -> np.ndarray:
    items = arr.tolist()
    if all(isinstance(v, numbers.Integral) for v in items):  # Python ints (bool included), numpy ints
        if items and not all(_INT64.min <= int(v) <= _INT64.max for v in items):
            raise ValueError(f"{name} must hold integers within the int64 range [{_INT64.min}, {_INT64.max}]")
        return np.asarray([int(v) for v in items], dtype=np.int64)
    if any(isinstance(v, numbers.Number) for v in items):
        if all(isinstance(v, numbers.Real) for v in items):
            return _from_floats(np.asarray(items, dtype=np.float64), name)
        raise ValueError(f"{name} must hold integers or strings, got a mix of numbers and other objects")
    try:
        _, ids = np.unique(np.asarray(items, dtype=object), return_inverse=True)
    except TypeError:
        raise ValueError(f"{name} must hold integers or mutually comparable values (strings), got unorderable objects") from None
    return ids.reshape(-1).astype(np.int64)


def integer_labels(labels: Any, *, n: int | None = None, name: str = "labels", rows_of: str = "z") -> np.ndarray:
    """``labels`` as an int64 array [N] (module docstring for the accepted kinds).

    Integer labels keep their values; string labels become the ids 0..C-1 of their sorted distinct values.

    Parameters
    ----------
    labels : array-like or tensor [N]
    n : int, optional
        Required length (the number of rows of ``rows_of``).
    name, rows_of : str
        Names used in error messages.

    Raises
    ------
    ValueError
        Naming ``name``: not 1-D, wrong length, float labels that are fractional, non-finite or beyond the
        exact-integer range of their type, integers beyond int64, complex or unorderable values.

    Examples
    --------
    >>> integer_labels([3, 1, 3]).tolist(), integer_labels(["b", "a", "b"]).tolist()
    ([3, 1, 3], [1, 0, 1])
    """
    arr = _to_numpy(labels)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be a 1-D array [N], got shape {arr.shape}")
    if n is not None and arr.shape[0] != n:
        raise ValueError(f"{name} has length {arr.shape[0]} but {rows_of} has {n} rows (they must match)")
    kind = arr.dtype.kind
    if kind in "iub":
        if kind == "u" and arr.size and int(arr.max()) > _INT64.max:
            raise ValueError(f"{name} must hold integers within the int64 range, got {int(arr.max())}")
        return arr.astype(np.int64)
    if kind == "f":
        return _from_floats(arr, name)
    if kind in "US":
        _, ids = np.unique(arr, return_inverse=True)
        return ids.reshape(-1).astype(np.int64)
    if kind == "O":
        return _from_objects(arr, name)
    raise ValueError(f"{name} must hold integers (or strings), got dtype {arr.dtype}")


def as_class_ids(labels: Any, *, n: int | None = None, name: str = "labels") -> tuple[np.ndarray, np.ndarray]:
    """(ids [N] in 0..C-1, classes [C]): the sorted distinct labels of :func:`integer_labels` and each row's index.

    Examples
    --------
    >>> ids, classes = as_class_ids([7, 4, 7])
    >>> ids.tolist(), classes.tolist()
    ([1, 0, 1], [4, 7])
    """
    y = integer_labels(labels, n=n, name=name)
    classes, ids = np.unique(y, return_inverse=True)
    return ids.reshape(-1).astype(np.int64), classes


def check_label_tensor(labels: Any, size: int, *, name: str = "labels") -> None:
    """Raise ValueError unless ``labels`` is a 1-D torch tensor [size] of an integer dtype (not bool)."""
    if not hasattr(labels, "detach") or not hasattr(labels, "dtype"):
        raise ValueError(f"{name} must be an integer torch.Tensor of shape [B], got {type(labels).__name__}")
    if labels.ndim != 1 or labels.shape[0] != size:
        raise ValueError(f"{name} must have shape [B] = [{size}], got {tuple(labels.shape)}")
    dtype = labels.dtype
    if dtype.is_floating_point or dtype.is_complex or str(dtype) == "torch.bool":
        raise ValueError(f"{name} must have an integer dtype, got {dtype} (float labels are never converted)")
