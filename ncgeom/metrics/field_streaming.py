"""The field's metrics (:mod:`ncgeom.metrics.field`) on batches of features, in bounded memory.

As :mod:`ncgeom.metrics.streaming` does for the section-8 metrics, the features arrive as batches
``(z_b [b, d], labels_b [b])`` (a list, or a callable returning a fresh iterable, e.g.
:func:`ncgeom.metrics.encoded_batches`), labels 0..C-1 with ``num_classes=C``, and are never stored.
Which metric allows which form (docs/theory.md section 8, "Field metrics", [derived]):

- one pass, O(C d) state (:class:`ClassMomentAccumulator` -> :class:`ClassMoments`: n_c, mu_c and the
  per-class scatter S_c = sum_{y_i = c} ||z_i - mu_c||^2) determines exactly (in exact arithmetic) ``cdnv``
  (Var_c = S_c / (n_c - ddof)), ``self_duality`` (class means and W), ``hyperspherical_uniformity``
  (class means) and ``alignment`` over label positives with alpha = 2 (sum_c 2 n_c S_c / sum_c n_c (n_c - 1)).
  The scatters merge over two disjoint parts a, b of a class as S_c = S_c^a + S_c^b + (n_a n_b / n)
  ||mu_c^b - mu_c^a||^2 (Chan, Golub and LeVeque), each block's S_c^b from its own residuals, so nothing
  cancels. Alignment with alpha != 2 is not a function of finitely many moments and has no streaming form
  here;
- ``classifier_agreement`` (NC4) is an argmin against the final class means: a second pass
  (:class:`AgreementAccumulator`), or one pass on test data with given (train) means;
- ``uniformity`` sums over all N (N - 1)/2 pairs and has no finite-state one-pass form: it takes at most
  ceil(N / block_rows) passes over a re-iterable source (:func:`streaming_uniformity`), holding one block of
  rows and one batch.

Scale: as :mod:`ncgeom.metrics.streaming`, the state is kept in units of a power of two near the running
max |z| (raising it rescales the state exactly).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ncgeom.labels import integer_labels
from ncgeom.metrics.classifier import _AgreementRule, _bias, _classifier_weights, _self_duality
from ncgeom.metrics.field import FieldMetrics
from ncgeom.metrics.groups import _embeddings, _power_of_two_scale, _unit_scaled
from ncgeom.metrics.hypersphere import (
    HYPERSPHERICAL_STATISTICS,
    HyperSphericalStatistic,
    _default_block_rows,
    _hyperspherical,
    _label_alignment_squared,
    _neg_scaled_sq_distances,
    _RunningLogSumExp,
    _times_power_of_scale,
    _within_block_pairs,
)
from ncgeom.metrics.streaming import Batches, _batch, _ClassSizes, _pairs
from ncgeom.metrics.variability import _cdnv, _cdnv_matrix, _class_variances, _require_ddof
from ncgeom.validate import require_choice, require_int, require_real

__all__ = [
    "ClassMoments",
    "ClassMomentAccumulator",
    "AgreementAccumulator",
    "accumulate_class_moments",
    "streaming_classifier_agreement",
    "streaming_uniformity",
    "streaming_field_metrics",
    "UNIFORMITY_BLOCK_ROWS",
]

UNIFORMITY_BLOCK_ROWS: int = 4096
"""Default rows per block of :func:`streaming_uniformity`: each block after the first costs one more pass."""


@dataclass(frozen=True)
class ClassMoments(_ClassSizes):
    """Per-class moments of features z [N, d] with labels 0..C-1, in units of ``scale`` (a power of two).

    Attributes
    ----------
    counts : int array [C]
        Class sizes n_c (all >= 1).
    means : float64 [C, d]
        Class means mu_c / scale.
    scatter : float64 [C]
        S_c / scale^2 with S_c = sum_{y_i = c} ||z_i - mu_c||^2.
    scale : float
        The power of two of :mod:`ncgeom.metrics.groups` (1.0 for an all-zero z).

    Examples
    --------
    >>> m = accumulate_class_moments([([[1.0], [3.0]], [0, 0]), ([[-1.0], [-3.0]], [1, 1])], num_classes=2)
    >>> m.class_variances().tolist(), m.cdnv(), m.alignment()
    ([1.0, 1.0], 0.0625, 4.0)
    """

    counts: np.ndarray
    means: np.ndarray
    scatter: np.ndarray
    scale: float

    def class_variances(self, *, ddof: int = 0) -> np.ndarray:
        """Var_c = S_c / (n_c - ddof) [C] (NaN for a one-sample class when ddof = 1), as :func:`ncgeom.metrics.cdnv`."""
        var = _class_variances(self.counts, self.scatter, _require_ddof(ddof))
        return np.array([_times_power_of_scale(v, self.scale, 2.0) for v in var])

    def cdnv(self, *, ddof: int = 0) -> float:
        """:func:`ncgeom.metrics.cdnv` of the data (scale invariant: computed in the stored units)."""
        return _cdnv(self.counts, self.means, self.scatter, _require_ddof(ddof))

    def cdnv_matrix(self, *, ddof: int = 0) -> np.ndarray:
        """:func:`ncgeom.metrics.cdnv_matrix` of the data [C, C]."""
        return _cdnv_matrix(self.counts, self.means, self.scatter, _require_ddof(ddof))

    def self_duality(self, classifier) -> float:
        """:func:`ncgeom.metrics.self_duality` with ``classifier`` [C, d]."""
        return _self_duality(self.means, _classifier_weights(classifier, self.num_classes, self.dim))

    def hyperspherical_uniformity(self, *, statistic: HyperSphericalStatistic = "variance") -> float:
        """:func:`ncgeom.metrics.hyperspherical_uniformity` of the data."""
        return _hyperspherical(self.means, require_choice("statistic", statistic, HYPERSPHERICAL_STATISTICS))

    def alignment(self) -> float:
        """:func:`ncgeom.metrics.alignment` over label positives with alpha = 2: sum_c 2 n_c S_c / sum_c n_c (n_c - 1)."""
        return _times_power_of_scale(_label_alignment_squared(self.counts, self.scatter), self.scale, 2.0)


class ClassMomentAccumulator:
    """One pass: feed ``update(z, labels)`` batch by batch, then read :meth:`moments`. O(C d) state.

    Examples
    --------
    >>> acc = ClassMomentAccumulator(2)
    >>> acc.update([[1.0], [3.0]], [0, 0]); acc.update([[-1.0], [-3.0]], [1, 1])
    >>> acc.moments().cdnv()
    0.0625
    """

    def __init__(self, num_classes: int) -> None:
        self.num_classes = require_int("num_classes", num_classes, min_value=2)
        self._dim: int | None = None
        self._counts = np.zeros(self.num_classes, np.int64)
        self._means = np.zeros((self.num_classes, 0))
        self._scatter = np.zeros(self.num_classes)
        self._peak = 0.0
        self._scale = 1.0

    @property
    def nbytes(self) -> int:
        """Bytes held by the state arrays: independent of the number of samples."""
        return self._counts.nbytes + self._means.nbytes + self._scatter.nbytes

    def update(self, z, labels) -> None:
        """Add a batch z [b, d] (numpy or torch, b >= 1) with labels [b] in 0..C-1; ValueError names a bad argument."""
        zz, y = _batch(z, labels, self.num_classes, self._dim)
        if self._dim is None:
            self._dim = zz.shape[1]
            self._means = np.zeros((self.num_classes, self._dim))
        self._peak = max(self._peak, float(np.max(np.abs(zz))))
        scale = _power_of_two_scale(np.array([self._peak]))
        if scale != self._scale:  # exact: powers of two (the state is all zero if the scale shrinks)
            ratio = self._scale / scale
            self._means *= ratio
            self._scatter *= ratio * ratio
            self._scale = scale
        zs = zz / scale
        order = np.argsort(y, kind="stable")
        ys, zs = y[order], zs[order]
        classes, starts, nb = np.unique(ys, return_index=True, return_counts=True)
        mb = np.add.reduceat(zs, starts, axis=0) / nb[:, None]  # batch class means [k, d]
        resid = zs - np.repeat(mb, nb, axis=0)
        sb = np.add.reduceat(np.einsum("id,id->i", resid, resid), starts)  # batch class scatters [k]
        na = self._counts[classes]
        n = na + nb
        delta = mb - self._means[classes]
        self._scatter[classes] += sb + (na * nb / n) * np.einsum("kd,kd->k", delta, delta)
        self._means[classes] += (nb / n)[:, None] * delta
        self._counts[classes] = n

    def moments(self) -> ClassMoments:
        """The moments of everything fed so far (the accumulator stays usable); ValueError if a class is missing."""
        if self._dim is None:
            raise ValueError("batches: no (z, labels) batch was given")
        empty = np.flatnonzero(self._counts == 0)
        if empty.size:
            missing = ", ".join(map(str, empty[:5])) + (", ..." if empty.size > 5 else "")
            raise ValueError(f"labels: class {missing} has no sample (num_classes={self.num_classes})")
        frozen = [a.copy() for a in (self._counts, self._means, self._scatter)]
        for a in frozen:
            a.flags.writeable = False
        return ClassMoments(counts=frozen[0], means=frozen[1], scatter=frozen[2], scale=self._scale)


class AgreementAccumulator:
    """NC4 on batches: agreement of a linear classifier with the Euclidean nearest of fixed class means, O(C d) state.

    Scores as :func:`ncgeom.metrics.classifier_agreement` with ``class_means=``: argmax_c (<w_c, z> + b_c)
    against argmin_c ||z - mu_c||, ties to the first class.

    Parameters
    ----------
    classifier : array or tensor [C, d]
    class_means : array or tensor [C, d]
        Row c for label c, e.g. ``moments.class_means()`` of the same data (training NC4, second pass) or of
        the training data (test NC4, one pass).
    bias : array or tensor [C], optional
    """

    def __init__(self, classifier, class_means, *, bias=None) -> None:
        means = _embeddings(class_means, "class_means")
        if means.shape[0] < 2:
            raise ValueError(f"class_means must have at least 2 rows (classes), got {means.shape[0]}")
        c, d = means.shape
        self._rule = _AgreementRule(_classifier_weights(classifier, c, d), _bias(bias, c), means)
        self._shape = (c, d)
        self._agree = 0
        self._total = 0

    def update(self, z, labels) -> None:
        """Add a batch z [b, d] with labels [b] in 0..C-1 (checked; they play no part in the rate)."""
        zz, _ = _batch(z, labels, *self._shape)
        self._agree += self._rule.agreements(zz)
        self._total += zz.shape[0]

    @property
    def num_samples(self) -> int:
        """The number of samples scored so far."""
        return self._total

    def agreement(self) -> float:
        """The fraction of samples on which both rules agree; ValueError when no batch was given."""
        if self._total == 0:
            raise ValueError("batches: no (z, labels) batch was given")
        return self._agree / self._total


def accumulate_class_moments(batches: Batches, *, num_classes: int) -> ClassMoments:
    """One pass over ``batches``: the :class:`ClassMoments` of all of them.

    Examples
    --------
    >>> m = accumulate_class_moments([([[1.0, 0.0]], [0]), ([[-1.0, 0.0]], [1])], num_classes=2)
    >>> m.self_duality([[1.0, 0.0], [-1.0, 0.0]]), m.num_samples
    (0.0, 2)
    """
    acc = ClassMomentAccumulator(num_classes)
    for z, labels in _pairs(batches):
        acc.update(z, labels)
    return acc.moments()


def streaming_classifier_agreement(batches: Batches, *, classifier, class_means, bias=None) -> float:
    """NC4 of ``batches`` against given ``class_means`` [C, d] (e.g. the train means on test data), one pass.

    Examples
    --------
    >>> streaming_classifier_agreement([([[0.5], [1.5]], [0, 0]), ([[-1.0]], [1])], classifier=[[1.0], [-1.0]],
    ...                                class_means=[[1.0], [-1.0]], bias=[-1.0, 1.0])
    0.6666666666666666
    """
    acc = AgreementAccumulator(classifier, class_means, bias=bias)
    for z, labels in _pairs(batches):
        acc.update(z, labels)
    return acc.agreement()


def _features(z, labels, dim: int | None) -> np.ndarray:
    """A validated batch for uniformity: float64 z [b, d]; labels checked for their length only."""
    zz = _embeddings(z)
    if dim is not None and zz.shape[1] != dim:
        raise ValueError(f"z has {zz.shape[1]} columns but the earlier batches have {dim} (they must match)")
    integer_labels(labels, n=zz.shape[0])
    return zz


def _cross_pairs(a: np.ndarray, b: np.ndarray, acc: _RunningLogSumExp, t: float) -> None:
    """Add the terms of all pairs (row of a, row of b) to ``acc``, in a power-of-two unit common to both."""
    scale = _power_of_two_scale(np.array([np.max(np.abs(a)), np.max(np.abs(b))]))
    acc.add(_neg_scaled_sq_distances(a / scale, b / scale, t, scale).ravel())


def streaming_uniformity(batches: Batches, *, t: float = 2.0, block_rows: int | None = None) -> float:
    """:func:`ncgeom.metrics.uniformity` of the concatenated batches, in several passes and bounded memory.

    The rows are read in blocks of at least ``block_rows`` (default :data:`UNIFORMITY_BLOCK_ROWS`) rows. For
    each block, the pairs inside it are summed from the block, and the pairs (row of the block, later row)
    in one more pass over ``batches``, which must therefore yield the same rows in the same order on every
    pass (a list, or a callable returning a fresh iterable: a DataLoader without shuffling, an encoder in
    eval mode). Passes: ceil(N / block_rows) at most, each of O(block_rows b d) work per batch of b rows;
    memory: one block, one batch and a block x batch matrix. The log-sum-exp over all pairs is accumulated
    as in the in-memory function; the result agrees with it up to rounding (another summation order).

    A ValueError names ``batches`` when a later pass does not reproduce the rows of the first (beyond a
    relative 1e-6 of the largest entry: e.g. a shuffling loader) or yields another number of rows.

    Examples
    --------
    >>> streaming_uniformity([([[1.0, 0.0]], [0]), ([[-1.0, 0.0]], [1])], block_rows=1)
    -8.0
    """
    t = require_real("t", t, min_value=0.0, min_inclusive=False)
    rows = UNIFORMITY_BLOCK_ROWS if block_rows is None else require_int("block_rows", block_rows, min_value=1)
    acc = _RunningLogSumExp()
    outer = iter(_pairs(batches, passes=2))
    dim: int | None = None
    seen = 0  # rows of the blocks already processed
    inner_totals: set[int] = set()
    block: list[np.ndarray] = []
    item = next(outer, None)
    while item is not None:
        zz = _features(*item, dim)
        dim = zz.shape[1]
        block.append(zz)
        item = next(outer, None)
        if sum(b.shape[0] for b in block) < rows and item is not None:
            continue
        current = np.concatenate(block)
        block = []
        start, stop = seen, seen + current.shape[0]
        zs, scale = _unit_scaled(current)
        _within_block_pairs(zs, acc, t, scale, _default_block_rows(current.shape[0], 1))
        if item is not None:  # later rows exist: one more pass for the pairs (block row, later row)
            inner_totals.add(_pass_after_block(batches, current, start, stop, dim, acc, t))
        seen = stop
    if seen == 0:
        raise ValueError("batches: no (z, labels) batch was given")
    if inner_totals - {seen}:
        raise ValueError(f"batches: the passes yielded {sorted(inner_totals)} rows but the first one {seen}: "
                         f"every pass must yield the same rows")
    return acc.log_mean()


def _pass_after_block(batches: Batches, block: np.ndarray, start: int, stop: int, dim: int,
                      acc: _RunningLogSumExp, t: float) -> int:
    """One pass over ``batches``: check rows start..stop-1 against ``block``, add the pairs with rows >= stop; the rows seen."""
    offset = 0
    tol = 2.0**-20 * float(np.max(np.abs(block)))
    for z, labels in _pairs(batches):
        zz = _features(z, labels, dim)
        lo, hi = offset, offset + zz.shape[0]
        offset = hi
        overlap = slice(max(lo, start), min(hi, stop))
        if overlap.start < overlap.stop:
            mine = block[overlap.start - start : overlap.stop - start]
            theirs = zz[overlap.start - lo : overlap.stop - lo]
            if float(np.max(np.abs(mine - theirs))) > tol:
                raise ValueError(f"batches: rows {overlap.start}..{overlap.stop - 1} differ between passes: every pass "
                                 f"must yield the same rows in the same order (no shuffling)")
        if hi > stop:
            _cross_pairs(block, zz[max(0, stop - lo):], acc, t)
    return offset


def streaming_field_metrics(batches: Batches, *, num_classes: int, classifier=None, bias=None,
                            moments: ClassMoments | None = None, uniformity_block_rows: int | None = None) -> FieldMetrics:
    """Every metric of :class:`ncgeom.metrics.FieldMetrics` on ``batches``, equal to :func:`ncgeom.metrics.field_metrics`
    of the concatenated batches up to rounding.

    Passes over ``batches`` (which must be re-iterable and yield the same rows each time): one for the
    :class:`ClassMoments` (skipped when ``moments`` of the same batches is given), one for NC4 when a
    ``classifier`` [C, d] is given (with ``bias`` [C]), and those of :func:`streaming_uniformity`
    (``uniformity_block_rows`` rows per block). Without a classifier, NC3 and NC4 are NaN.

    Examples
    --------
    >>> m = streaming_field_metrics([([[1.0], [3.0]], [0, 0]), ([[-1.0], [-3.0]], [1, 1])], num_classes=2,
    ...                             classifier=[[1.0], [-1.0]])
    >>> m.cdnv, m.self_duality, m.classifier_agreement, m.alignment
    (0.0625, 0.0, 1.0, 4.0)
    """
    if classifier is None and bias is not None:
        raise ValueError("bias is only meaningful together with classifier")
    if moments is None:
        moments = accumulate_class_moments(_pairs(batches, passes=2), num_classes=num_classes)
    elif not isinstance(moments, ClassMoments) or moments.num_classes != num_classes:
        raise ValueError(f"moments must be the ClassMoments of the same batches with num_classes={num_classes}")
    nc3 = nc4 = float("nan")
    if classifier is not None:
        nc3 = moments.self_duality(classifier)
        agreement = AgreementAccumulator(classifier, moments.class_means(), bias=bias)
        for z, labels in _pairs(batches):
            agreement.update(z, labels)
        if agreement.num_samples != moments.num_samples:
            raise ValueError(f"batches: the second pass saw {agreement.num_samples} samples but the first "
                             f"{moments.num_samples}: both passes must read the same data")
        nc4 = agreement.agreement()
    return FieldMetrics(
        cdnv=moments.cdnv(),
        self_duality=nc3,
        classifier_agreement=nc4,
        hyperspherical_uniformity=moments.hyperspherical_uniformity(),
        alignment=moments.alignment(),
        uniformity=streaming_uniformity(batches, block_rows=uniformity_block_rows),
    )
