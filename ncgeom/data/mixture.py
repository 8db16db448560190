"""The latent-class model with Gaussian-mixture inputs (docs/theory.md section 1).

Class c in {0..C-1} has prior lambda_c; an input of class c is

.. math:: x = \\mu_c + s\\,\\varepsilon,\\qquad \\varepsilon \\sim N(0, I_D),

where s = ``spread`` (within-class standard deviation per coordinate) and the class means mu_c are at
pairwise distance ``separation``: mu_c = (separation / sqrt 2) u_c with u_c orthonormal (a random
rotation of the first C basis vectors) when D >= C; for D < C they are Gaussian with
E||mu_c - mu_c'||^2 = separation^2. The ratio separation / spread sets the class overlap.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ncgeom.geometry import random_orthogonal
from ncgeom.validate import require_int, require_real

__all__ = ["LabeledData", "class_prior", "split_counts", "gaussian_mixture"]


@dataclass(frozen=True)
class LabeledData:
    """A labelled train/test split.

    Attributes
    ----------
    name : str
        ``gaussian`` or ``digits``.
    x_train, x_test : numpy.ndarray
        Inputs [N, D] and [N_test, D], float64.
    y_train, y_test : numpy.ndarray
        Class labels in {0..C-1}, int64.
    num_classes : int
        C.
    class_means : numpy.ndarray or None
        Population class means [C, D] (None for real data).
    prior : numpy.ndarray
        Class prior lambda [C] the data was drawn with (empirical frequencies for real data).
    """

    name: str
    x_train: np.ndarray = field(repr=False)
    y_train: np.ndarray = field(repr=False)
    x_test: np.ndarray = field(repr=False)
    y_test: np.ndarray = field(repr=False)
    num_classes: int
    class_means: np.ndarray | None = field(default=None, repr=False, kw_only=True)
    prior: np.ndarray = field(repr=False, kw_only=True)

    @property
    def input_dim(self) -> int:
        return int(self.x_train.shape[1])

    @property
    def num_train(self) -> int:
        return int(self.x_train.shape[0])


def class_prior(num_classes: int, *, imbalance: float = 1.0) -> np.ndarray:
    """Class prior lambda [C]: balanced (imbalance = 1) or geometric with ratio ``imbalance``.

    .. math:: \\lambda_c \\propto \\rho^{-c/(C-1)},\\qquad c = 0..C-1,

    where rho = ``imbalance`` >= 1 is lambda_max / lambda_min. Example: C = 2, rho = 3 gives [0.75, 0.25].
    """
    c = require_int("num_classes", num_classes, min_value=2)
    rho = require_real("imbalance", imbalance, min_value=1.0)
    w = rho ** (-np.arange(c) / (c - 1))
    return w / w.sum()


def split_counts(total: int, prior, *, min_count: int = 0) -> np.ndarray:
    """Integer class counts summing to ``total`` proportional to ``prior`` (largest remainder).

    Every class gets at least ``min_count`` (then the remainder is shared by the prior).
    """
    total = require_int("total", total, min_value=0)
    p = np.asarray(prior, dtype=np.float64)
    c = p.size
    min_count = require_int("min_count", min_count, min_value=0)
    if min_count * c > total:
        raise ValueError(f"total must be >= min_count * num_classes = {min_count * c}, got {total}")
    free = total - min_count * c
    raw = free * p
    counts = np.floor(raw).astype(np.int64)
    order = np.argsort(-(raw - counts), kind="stable")
    counts[order[: free - counts.sum()]] += 1
    return counts + min_count


def gaussian_mixture(
    num_classes: int,
    *,
    input_dim: int,
    samples_per_class: int,
    test_per_class: int = 0,
    separation: float = 3.0,
    spread: float = 1.0,
    imbalance: float = 1.0,
    rng: np.random.Generator,
) -> LabeledData:
    """Draw train and test sets from the latent-class Gaussian mixture (module docstring).

    Parameters
    ----------
    num_classes : int
        C >= 2.
    input_dim : int
        D >= 1.
    samples_per_class : int
        Train size is C * samples_per_class, split among classes by the prior (each class >= 2, so
        that every class has a label-based positive).
    test_per_class : int
        Test size is C * test_per_class, split the same way (0: no test set).
    separation, spread : float
        Distance between class means (>= 0) and within-class standard deviation (> 0).
    imbalance : float
        lambda_max / lambda_min of the geometric prior (1 = balanced).
    rng : numpy.random.Generator

    Returns
    -------
    LabeledData
        Samples sorted by class within each split.
    """
    c = require_int("num_classes", num_classes, min_value=2)
    dim = require_int("input_dim", input_dim, min_value=1)
    n = require_int("samples_per_class", samples_per_class, min_value=2)
    n_test = require_int("test_per_class", test_per_class, min_value=0)
    sep = require_real("separation", separation, min_value=0.0)
    s = require_real("spread", spread, min_value=0.0, min_inclusive=False)
    if not isinstance(rng, np.random.Generator):
        raise ValueError("rng must be a numpy.random.Generator")
    prior = class_prior(c, imbalance=imbalance)
    if dim >= c:
        means = (sep / np.sqrt(2.0)) * random_orthogonal(dim, rng=rng)[:c]
    else:
        means = rng.standard_normal((c, dim)) * (sep / np.sqrt(2.0 * dim))
    train_counts = split_counts(c * n, prior, min_count=2)
    test_counts = split_counts(c * n_test, prior, min_count=0)

    def draw(counts):
        y = np.repeat(np.arange(c, dtype=np.int64), counts)
        x = means[y] + s * rng.standard_normal((y.size, dim))
        return x, y

    x_train, y_train = draw(train_counts)
    x_test, y_test = draw(test_counts)
    return LabeledData("gaussian", x_train, y_train, x_test, y_test, c, class_means=means, prior=prior)
