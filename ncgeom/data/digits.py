"""scikit-learn's bundled digits (8x8 images, 10 classes, 1797 samples; no download).

Offline real data for docs/theory.md section 9, claim 5. Pixels are standardized with the train split's
per-pixel mean and standard deviation; the split is stratified and drawn from ``rng``.
"""

from __future__ import annotations

import functools

import numpy as np

from ncgeom.data.mixture import LabeledData
from ncgeom.validate import require_int, require_real

__all__ = ["DIGITS_SIZE", "load_digits_data", "digits_train_size", "digits_class_sizes"]

DIGITS_SIZE = 1797  # samples in sklearn.datasets.load_digits


def load_digits_data(*, num_classes: int = 10, test_fraction: float = 0.3, rng: np.random.Generator) -> LabeledData:
    """The digits classes 0..num_classes-1, a stratified train/test split, standardized pixels [N, 64].

    Parameters
    ----------
    num_classes : int
        2..10 (the first ``num_classes`` digits).
    test_fraction : float
        In (0, 1): fraction of each class held out for testing.
    rng : numpy.random.Generator
    """
    from sklearn.datasets import load_digits

    c = require_int("num_classes", num_classes, min_value=2, max_value=10)
    frac = require_real("test_fraction", test_fraction, min_value=0.0, max_value=1.0, min_inclusive=False, max_inclusive=False)
    if not isinstance(rng, np.random.Generator):
        raise ValueError("rng must be a numpy.random.Generator")
    bunch = load_digits()
    x_all = np.asarray(bunch.data, dtype=np.float64)
    y_all = np.asarray(bunch.target, dtype=np.int64)
    train_idx, test_idx = [], []
    for k in range(c):
        members = np.flatnonzero(y_all == k)
        members = members[rng.permutation(members.size)]
        n_test = int(round(frac * members.size))
        test_idx.append(members[:n_test])
        train_idx.append(members[n_test:])
    tr, te = np.concatenate(train_idx), np.concatenate(test_idx)
    mean = x_all[tr].mean(axis=0)
    std = x_all[tr].std(axis=0)
    std[std == 0] = 1.0  # constant border pixels
    x_tr, x_te = (x_all[tr] - mean) / std, (x_all[te] - mean) / std
    prior = np.bincount(y_all[tr], minlength=c) / tr.size
    return LabeledData("digits", x_tr, y_all[tr], x_te, y_all[te], c, class_means=None, prior=prior)


def digits_class_sizes(*, num_classes: int = 10, test_fraction: float = 0.3) -> list[int]:
    """Train samples per class that load_digits_data returns (to validate batch sizes before loading)."""
    y = _digits_targets()
    sizes = [int(np.sum(y == k)) for k in range(num_classes)]
    return [n - int(round(test_fraction * n)) for n in sizes]


def digits_train_size(*, num_classes: int = 10, test_fraction: float = 0.3) -> int:
    """Number of train samples load_digits_data returns."""
    return sum(digits_class_sizes(num_classes=num_classes, test_fraction=test_fraction))


@functools.lru_cache(maxsize=1)
def _digits_targets() -> np.ndarray:
    from sklearn.datasets import load_digits

    return np.asarray(load_digits().target)
