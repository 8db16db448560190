"""Nearest-class-mean accuracy, with the inner product (the default: docs/theory.md section 8 [code]) or Euclidean."""

from __future__ import annotations

from typing import Literal

import numpy as np

from ncgeom.labels import integer_labels
from ncgeom.metrics.groups import _embeddings, _group, _Groups, _unit_scaled

__all__ = ["ncc_accuracy", "NCC_RULES", "NCCRule"]

NCCRule = Literal["inner", "euclidean"]
#: How the nearest class mean is chosen: argmax <z, mu_c> (the authors' code) or argmin ||z - mu_c|| (Papyan et al.).
NCC_RULES: tuple[NCCRule, ...] = ("inner", "euclidean")


def _accuracy(z: np.ndarray, index: np.ndarray, means: np.ndarray, rule: NCCRule = "inner") -> float:
    """Fraction of rows whose nearest class mean is their class index (first on ties).

    ``inner``: argmax_c <z_i, mu_c>, invariant under positive scalings of z and of the means, which are passed
    divided by a power of two near their largest entry (no under- or overflow). ``euclidean``: argmin_c
    ||z_i - mu_c||^2 = argmin_c (||mu_c||^2 - 2 <z_i, mu_c>); z and the means must then share one unit (the
    caller divides both by the same power of two).
    """
    if rule == "euclidean":
        predicted = np.argmin(np.einsum("cd,cd->c", means, means)[None, :] - 2.0 * (z @ means.T), axis=1)
    else:
        predicted = np.argmax(z @ means.T, axis=1)
    return float(np.mean(predicted == index))


def _to_array(x) -> np.ndarray:
    return x.detach().cpu().numpy() if hasattr(x, "detach") else np.asarray(x)


def _ncc_accuracy(g: _Groups, rule: NCCRule = "inner") -> float:
    return _accuracy(g.z, g.index, g.means, rule)  # z and means share g's unit


def ncc_accuracy(
    z,
    labels,
    *,
    class_means=None,
    class_labels=None,
    num_classes: int | None = None,
    rule: NCCRule = "inner",
) -> float:
    """Accuracy of the nearest-class-mean classifier (inner product by default, or Euclidean).

    .. math:: \\hat y_i = \\operatorname*{arg\\,max}_c \\langle z_i, \\mu_c \\rangle \\ (\\text{inner}),\\quad
        \\hat y_i = \\operatorname*{arg\\,min}_c \\lVert z_i - \\mu_c \\rVert \\ (\\text{euclidean}),\\qquad
        \\mathrm{ncc\\_accuracy} = \\frac1N \\sum_i [\\hat y_i = y_i]

    (docs/theory.md section 8 [code]: the inner product is the authors' downstream metric, and the one every
    run history records; the Euclidean rule is Papyan et al.'s NCC, as rhubarbwu/neural-collapse and
    nc-toolbox compute it). The two agree when the class means have equal norms; on unnormalized features
    they can differ a lot (a class mean of large norm attracts the inner-product rule).
    Ties go to the first class (sorted label order, or the first row of ``class_means``).

    Parameters
    ----------
    z : array or tensor [N, d]
        Embeddings to classify.
    labels : integer array [N]
        Their true labels.
    class_means : array or tensor [C, d], optional
        Means to classify with, e.g. ``class_means(z_train, y_train)`` to score test data with train
        means. Default: the class means of ``(z, labels)`` themselves (training accuracy).
    class_labels : integer array [C], optional
        The label of each row of ``class_means`` (distinct). Default ``0..C-1``; pass
        ``np.unique(y_train)`` when the train labels are not 0..C-1. Only with ``class_means``.
    num_classes : int, optional
        Without ``class_means``: require labels 0..C-1, all present (see :func:`class_means`).
    rule : {"inner", "euclidean"}
        The nearest class mean by inner product (default) or by Euclidean distance.

    Raises
    ------
    ValueError
        Bad shapes, NaN/inf, fewer than 2 classes, or (with ``class_means``) a label of ``labels``
        that is not among ``class_labels`` (it could never be predicted).

    Examples
    --------
    >>> ncc_accuracy([[1.0, 0.2], [-1.0, 0.0], [0.5, 0.0]], [0, 1, 1])
    0.6666666666666666

    A long class mean attracts the inner-product rule, not the Euclidean one:

    >>> z, y = [[3.0, 0.0], [0.0, 1.0], [1.0, 1.2]], [0, 1, 1]
    >>> ncc_accuracy(z, y, class_means=[[3.0, 0.0], [0.5, 1.1]]), ncc_accuracy(z, y, class_means=[[3.0, 0.0], [0.5, 1.1]], rule="euclidean")
    (0.6666666666666666, 1.0)
    """
    if rule not in NCC_RULES:
        raise ValueError(f"rule must be one of {', '.join(repr(r) for r in NCC_RULES)}, got {rule!r}")
    if class_means is None:
        if class_labels is not None:
            raise ValueError("class_labels is only meaningful together with class_means")
        return _ncc_accuracy(_group(z, labels, num_classes=num_classes), rule)
    zz_raw, means_raw = _embeddings(z), _embeddings(class_means, "class_means")
    if rule == "euclidean":  # one common unit for z and the means (distances compare them)
        common = _unit_scaled(np.concatenate([zz_raw.reshape(-1), means_raw.reshape(-1)])[:, None])[1]
        zz, means = zz_raw / common, means_raw / common
    else:
        zz = _unit_scaled(zz_raw)[0]
        means = _unit_scaled(means_raw)[0]
    c = means.shape[0]
    if c < 2:
        raise ValueError(f"class_means must have at least 2 rows (classes), got {c}")
    if means.shape[1] != zz.shape[1]:
        raise ValueError(
            f"class_means has dimension {means.shape[1]} but z has {zz.shape[1]} columns (they must match)"
        )
    if class_labels is None:
        y = integer_labels(labels, n=zz.shape[0])
        known = np.arange(c)
    else:
        known = integer_labels(class_labels, n=c, name="class_labels", rows_of="class_means")
        y = integer_labels(labels, n=zz.shape[0])
        raw_known, raw_y = _to_array(class_labels), _to_array(labels)
        if raw_known.dtype.kind in "USO" or raw_y.dtype.kind in "USO":
            # string labels: one mapping for both, so that equal strings get equal ids
            both = integer_labels(np.concatenate([raw_known.astype(object), raw_y.astype(object)]))
            known, y = both[:c], both[c:]
        if np.unique(known).size != c:
            raise ValueError("class_labels must be distinct")
    order = np.argsort(known)
    pos = np.searchsorted(known[order], y).clip(0, c - 1)
    unknown = known[order][pos] != y
    if unknown.any():
        raise ValueError(f"labels: label {y[unknown][0]} is not among class_labels {known.tolist()[:10]}")
    return _accuracy(zz, order[pos], means, rule)
