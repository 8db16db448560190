"""The metrics of docs/theory.md section 8 on batches of features, in bounded memory.

The in-memory metrics (:func:`ncgeom.metrics.nc_metrics`) take the whole feature matrix z [N, d]. Here
the features arrive as batches ``(z_b [b, d], labels_b [b])``, e.g. an encoder's outputs over a
DataLoader (:func:`encoded_batches`), and are never stored. The state is O(C d + d^2), whatever N:

- first pass (:class:`MomentAccumulator` -> :class:`FeatureMoments`): the class sizes n_c [C], the class
  means mu_c [C, d], an upper-triangular factor R [d, d] of the within-class scatter
  S_W = N Sigma_W = R^T R, and the sum of the norms ||z_i||. These moments determine exactly (in exact
  arithmetic) unit_norm, zero_sum, equal_inner_product, nc1, etf_distance, spectrum and rankme, through
  the formulas of section 8, and the mean norm of the training record;
- second pass over the same data (:class:`ResidualAccumulator`, O(C d) state: the final means):
  within_class, a mean of norms ||z_i - mu_c|| (not of squares), and the training ncc_accuracy, an argmax
  against the final means. Both depend nonlinearly on the final means, so no finite set of first-pass
  moments determines them; a second pass computes them exactly instead of skipping them;
- test set (:class:`NCCAccumulator`, O(C d) state): ncc_accuracy of test batches with the train means.

One-pass formulas (docs/theory.md section 8, "One pass", [derived]). For two disjoint parts a, b of the
data and a class c with n = n_a + n_b (Chan, Golub and LeVeque's pairwise update):

.. math:: \\mu_c = \\mu_c^a + \\frac{n_b}{n}(\\mu_c^b - \\mu_c^a),\\qquad
    S_W = S_W^a + S_W^b + \\sum_c \\frac{n_a n_b}{n} (\\mu_c^b - \\mu_c^a)(\\mu_c^b - \\mu_c^a)^T,\\qquad
    Z^T Z = S_W + \\sum_c n_c \\mu_c \\mu_c^T .

S_W is kept as its factor R, updated by a Householder QR of the stacked rows
[R; z_i - mu_c^b (rows of the block); sqrt(n_a n_b / n) (mu_c^b - mu_c^a)]. Why not the textbook
Sigma_W = (1/N) sum_i z_i z_i^T - sum_c (n_c/N) mu_c mu_c^T: near collapse it subtracts two matrices of
size ||mu||^2 to get one of size sigma_W^2 and loses a relative u ||mu||^2 / sigma_W^2 (u = 2^-53): all of
it at sigma_W = 1e-8 on unit means. Why a factor and not the d x d Gram matrix: eigenvalues of a Gram
matrix are accurate to u lambda_max, so singular values below sqrt(u) s_1 ~ 1e-8 s_1 are noise; from the
factor they are accurate to u s_1, as from the SVD of z itself (rankme, nc1's projections).

Error bound (first order, worst case; u = 2^-53 = float64 eps / 2; blocks of at most m rows, K blocks).
The class means carry |delta mu_c| <= (m + 4 K) u max_i ||z_i|| (a block mean, then K merges). The
computed factor is the exact factor of the stacked rows plus a perturbation Delta A with column norms
||Delta a_j|| <= K gamma ||a_j||, gamma ~ c (m + 2 d) d u (Householder QR, Higham, Accuracy and Stability of
Numerical Algorithms, Thm 19.4, once per block), where ||a_j||^2 = N (Sigma_W)_jj. Hence, entry-wise,

.. math:: |\\hat S_W - S_W|_{jk} \\le 2 K\\gamma \\sqrt{(S_W)_{jj} (S_W)_{kk}}
    + 2 (m + 4K)\\, u \\max_i\\lVert z_i\\rVert \\sqrt{N}\\,(\\sqrt{(S_W)_{jj}} + \\sqrt{(S_W)_{kk}}) ,

of order u N d (1 + 2d/m) relative to the within-class scatter itself (K = N/m), at most
c u N d (1 + 2d/m) N max ||z||^2, the order of the in-memory route's own bound (a matrix product of N
rows carries gamma_N = N u). Rounding errors are random in practice and the observed error is near
sqrt of these bounds. The metrics then inherit the error times their condition number, e.g. nc1 and the
spectrum that of Sigma_B (ratio of its largest to its smallest kept eigenvalue).

Scale. As the in-memory metrics (:mod:`ncgeom.metrics.groups`), the state is kept in units of a power of
two s near the running max |z| (rescaling the state when s grows is exact), so nothing under- or
overflows and the final s is the in-memory one.

Labels must be integers 0..C-1 (``num_classes=C`` is required): the class set of a stream must be known
before it ends, and string labels would be renumbered per batch. Every class must be present by the end.
``class_labels`` of :func:`ncgeom.metrics.ncc_accuracy` has no streaming counterpart: relabel to 0..C-1.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from ncgeom.labels import integer_labels
from ncgeom.metrics.collapse import _equal_inner_product, _etf_distance, _unit_norm, _zero_sum
from ncgeom.metrics.groups import _embeddings, _Groups, _power_of_two_scale, _to_numpy, _unit_scaled
from ncgeom.metrics.record import NCMetrics
from ncgeom.metrics.spectral import RANKME_EPS, _spectrum
from ncgeom.validate import require_int

__all__ = [
    "ONE_PASS_METRICS",
    "SECOND_PASS_METRICS",
    "Batches",
    "FeatureMoments",
    "MomentAccumulator",
    "ResidualAccumulator",
    "NCCAccumulator",
    "accumulate_moments",
    "streaming_nc_metrics",
    "streaming_ncc_accuracy",
    "encoded_batches",
]

ONE_PASS_METRICS: tuple[str, ...] = (
    "unit_norm",
    "zero_sum",
    "equal_inner_product",
    "nc1",
    "etf_distance",
    "spectrum",
    "rankme",
)
"""The metrics of docs/theory.md section 8 that the first-pass moments determine (:class:`FeatureMoments`)."""

SECOND_PASS_METRICS: tuple[str, ...] = ("within_class", "ncc_accuracy")
"""The metrics that need the final class means, hence a second pass (:class:`ResidualAccumulator`)."""

Batches = Iterable[tuple[Any, Any]] | Callable[[], Iterable[tuple[Any, Any]]]
"""``(z [b, d], labels [b])`` pairs (numpy arrays or torch tensors), or a callable returning a fresh iterable of them."""

_EPS = np.finfo(np.float64).eps


def _batch(z, labels, num_classes: int, dim: int | None) -> tuple[np.ndarray, np.ndarray]:
    """One validated batch: float64 z [b, d] (b >= 1) and int64 labels [b] in 0..C-1, or ValueError naming the argument."""
    zz = _embeddings(z)
    if dim is not None and zz.shape[1] != dim:
        raise ValueError(f"z has {zz.shape[1]} columns but the earlier batches (or class_means) have {dim} (they must match)")
    if _to_numpy(labels).dtype.kind in "USO":
        raise ValueError("labels must be integers 0..C-1 in a stream (string labels would be renumbered per batch)")
    y = integer_labels(labels, n=zz.shape[0])
    outside = y[(y < 0) | (y >= num_classes)]
    if outside.size:
        raise ValueError(f"labels must lie in 0..{num_classes - 1} (num_classes={num_classes}), got label {outside[0]}")
    return zz, y


def _pairs(batches: Batches, *, passes: int = 1) -> Iterator[tuple[Any, Any]]:
    """Iterate ``batches`` once (calling it first if it is a callable), checking each item is a pair."""
    source = batches() if callable(batches) else batches
    try:
        iterator = iter(source)
    except TypeError:
        raise ValueError(f"batches must be an iterable of (z, labels) pairs or a callable returning one, "
                         f"got {type(source).__name__}") from None
    if passes > 1 and not callable(batches) and iterator is source:
        raise ValueError("batches is a one-shot iterator but two passes are needed: pass a callable returning a "
                         "fresh iterator (e.g. encoded_batches(encode, loader)) or a list")
    for item in iterator:
        if not isinstance(item, tuple | list) or len(item) != 2:
            raise ValueError(f"batches must yield (z, labels) pairs, got {type(item).__name__}")
        yield item[0], item[1]


class _ClassSizes:
    """The sizes and class means of a moments record (:class:`FeatureMoments`,
    :class:`ncgeom.metrics.field_streaming.ClassMoments`): counts n_c [C], means [C, d] in units of ``scale``."""

    counts: np.ndarray
    means: np.ndarray
    scale: float

    @property
    def num_samples(self) -> int:
        """N = sum_c n_c."""
        return int(self.counts.sum())

    @property
    def num_classes(self) -> int:
        """C."""
        return int(self.counts.shape[0])

    @property
    def dim(self) -> int:
        """d."""
        return int(self.means.shape[1])

    def class_means(self) -> np.ndarray:
        """mu_c [C, d], row c for label c (as :func:`ncgeom.metrics.class_means`)."""
        return self.means * self.scale


@dataclass(frozen=True)
class FeatureMoments(_ClassSizes):
    """The first-pass moments of features z [N, d] with labels 0..C-1 (module docstring).

    Stored in units of ``scale`` (a power of two near max |z|), as the in-memory metrics compute.

    Attributes
    ----------
    counts : int array [C]
        Class sizes n_c (all >= 1).
    means : float64 [C, d]
        Class means mu_c / scale.
    within_factor : float64 [d, d]
        Upper-triangular R with R^T R = N Sigma_W / scale^2 (the within-class scatter).
    scale : float
        The power of two s of :mod:`ncgeom.metrics.groups` (1.0 for an all-zero z).
    norm_sum : float
        sum_i ||z_i|| / scale.

    Examples
    --------
    >>> m = accumulate_moments([([[1.0, 0.0], [3.0, 0.0]], [0, 0]), ([[0.0, 2.0]], [1])], num_classes=2)
    >>> m.class_means().tolist(), m.within_covariance().round(12).tolist()
    ([[2.0, 0.0], [0.0, 2.0]], [[0.666666666667, 0.0], [0.0, 0.0]])
    """

    counts: np.ndarray
    means: np.ndarray
    within_factor: np.ndarray
    scale: float
    norm_sum: float

    def global_mean(self) -> np.ndarray:
        """mu_G = (1/C) sum_c mu_c [d], the UNWEIGHTED mean of the class means (docs/theory.md section 8)."""
        return self.means.mean(axis=0) * self.scale

    def within_covariance(self) -> np.ndarray:
        """Sigma_W = (1/N) sum_i (z_i - mu_{y_i})(z_i - mu_{y_i})^T [d, d] = R^T R s^2 / N."""
        return (self.within_factor.T @ self.within_factor) * (self.scale**2 / self.num_samples)

    def between_covariance(self) -> np.ndarray:
        """Sigma_B = (1/C) sum_c (mu_c - mu_G)(mu_c - mu_G)^T [d, d]."""
        centered = self.means - self.means.mean(axis=0)
        return (centered.T @ centered) * (self.scale**2 / self.num_classes)

    def second_moment(self) -> np.ndarray:
        """(1/N) Z^T Z = (S_W + sum_c n_c mu_c mu_c^T) / N [d, d], the uncentred second moment (rankme's Gram)."""
        a = self._raw_factor_rows()
        return (a.T @ a) * (self.scale**2 / self.num_samples)

    @property
    def mean_norm(self) -> float:
        """(1/N) sum_i ||z_i|| (the ``mean_norm`` of the training record)."""
        return self.norm_sum * self.scale / self.num_samples

    def _raw_factor_rows(self) -> np.ndarray:
        """[R; sqrt(n_c) mu_c] [d + C, d]: its Gram is Z^T Z / s^2, so its singular values are those of Z / s."""
        return np.concatenate([self.within_factor, np.sqrt(self.counts)[:, None] * self.means])

    def _groups(self) -> _Groups:
        # The metrics of collapse/spectral that read only means, counts, classes and scale, evaluated by the
        # in-memory code itself; z is empty because the samples are not kept (never pass this to _within_class).
        return _Groups(z=np.empty((0, self.dim)), index=np.empty(0, np.int64), classes=np.arange(self.num_classes),
                       counts=self.counts, means=self.means, scale=self.scale)

    def nc1(self) -> float:
        """nc1 = (1/C) sum_r v_r^T Sigma_W v_r / lambda_r, as :func:`ncgeom.metrics.nc1` with ||R v_r||^2 = N v_r^T Sigma_W v_r."""
        c, d = self.means.shape
        centered = self.means - self.means.mean(axis=0)
        _, s, vt = np.linalg.svd(centered, full_matrices=False)
        if s[0] == 0.0:
            return float("nan")
        eig_b = s**2 / c
        keep = eig_b > d * _EPS * eig_b[0]  # the cutoff of the in-memory nc1 (scipy.linalg.pinv's default)
        proj = self.within_factor @ vt[keep].T  # [d, r]
        return float(np.sum(np.sum(proj**2, axis=0) / self.num_samples / eig_b[keep]) / c)

    def rankme(self) -> float:
        """rankme of Z (garrido2023rankme), from the singular values of [R; sqrt(n_c) mu_c], the first min(N, d)."""
        s = np.linalg.svd(self._raw_factor_rows(), compute_uv=False)[: min(self.num_samples, self.dim)]
        total = s.sum()
        if total == 0.0:
            return float("nan")
        p = s / total + RANKME_EPS
        return float(np.exp(-np.sum(p * np.log(p))))

    def one_pass_metrics(self) -> dict[str, Any]:
        """``{name: value}`` for :data:`ONE_PASS_METRICS`, the JSON names of docs/theory.md section 8."""
        g = self._groups()
        return {
            "unit_norm": _unit_norm(g),
            "zero_sum": _zero_sum(g),
            "equal_inner_product": _equal_inner_product(g),
            "nc1": self.nc1(),
            "etf_distance": _etf_distance(g),
            "spectrum": [float(v) for v in _spectrum(g)],
            "rankme": self.rankme(),
        }


class MomentAccumulator:
    """First pass: feed ``update(z, labels)`` batch by batch, then read :meth:`moments`.

    Parameters
    ----------
    num_classes : int
        C >= 2; the labels must lie in 0..C-1 and all be present by the end.
    block_rows : int, optional
        Batches are gathered into blocks of at least this many rows before a QR update (default
        max(2 d, 256)); a batch at least this large goes straight in. The cost per block of m rows is
        O((m + 2d) d^2), so small batches do not pay O(d^3) each. The pending rows, fewer than
        ``block_rows`` plus one batch, are part of the bounded state.

    Examples
    --------
    >>> acc = MomentAccumulator(2)
    >>> acc.update([[1.0, 0.0]], [0]); acc.update([[-1.0, 0.0]], [1])
    >>> acc.moments().one_pass_metrics()["etf_distance"]
    0.0
    """

    def __init__(self, num_classes: int, *, block_rows: int | None = None) -> None:
        self.num_classes = require_int("num_classes", num_classes, min_value=2)
        self._block_rows = None if block_rows is None else require_int("block_rows", block_rows, min_value=1)
        self._dim: int | None = None
        self._counts = np.zeros(self.num_classes, np.int64)
        self._means = np.zeros((self.num_classes, 0))
        self._factor = np.zeros((0, 0))
        self._peak = 0.0
        self._scale = 1.0
        self._norm_sum = 0.0
        self._pending: list[tuple[np.ndarray, np.ndarray]] = []
        self._pending_rows = 0

    @property
    def nbytes(self) -> int:
        """Bytes held by the state arrays, pending rows included: bounded independently of N."""
        pending = sum(z.nbytes + y.nbytes for z, y in self._pending)
        return self._counts.nbytes + self._means.nbytes + self._factor.nbytes + pending

    def update(self, z, labels) -> None:
        """Add a batch z [b, d] (numpy or torch, b >= 1) with labels [b] in 0..C-1; ValueError names a bad argument."""
        zz, y = _batch(z, labels, self.num_classes, self._dim)
        if self._dim is None:
            d = self._dim = zz.shape[1]
            self._means = np.zeros((self.num_classes, d))
            self._factor = np.zeros((d, d))
            if self._block_rows is None:
                self._block_rows = max(2 * d, 256)
        assert self._block_rows is not None
        if not self._pending and y.size >= self._block_rows:
            self._absorb(zz, y)
            return
        self._pending.append((np.array(zz), y))  # a copy: the caller may reuse its buffer
        self._pending_rows += y.size
        if self._pending_rows >= self._block_rows:
            self._flush()

    def moments(self) -> FeatureMoments:
        """The moments of everything fed so far (the accumulator stays usable); ValueError if a class is missing."""
        self._flush()
        if self._dim is None:
            raise ValueError("batches: no (z, labels) batch was given")
        empty = np.flatnonzero(self._counts == 0)
        if empty.size:
            missing = ", ".join(map(str, empty[:5])) + (", ..." if empty.size > 5 else "")
            raise ValueError(f"labels: class {missing} has no sample (num_classes={self.num_classes})")
        frozen = [a.copy() for a in (self._counts, self._means, self._factor)]
        for a in frozen:
            a.flags.writeable = False
        return FeatureMoments(counts=frozen[0], means=frozen[1], within_factor=frozen[2], scale=self._scale,
                              norm_sum=self._norm_sum)

    def _flush(self) -> None:
        if self._pending:
            z = np.concatenate([p[0] for p in self._pending])
            y = np.concatenate([p[1] for p in self._pending])
            self._pending, self._pending_rows = [], 0
            self._absorb(z, y)

    def _absorb(self, z: np.ndarray, y: np.ndarray) -> None:
        """Merge one block (Chan-Golub-LeVeque update of n_c, mu_c; QR update of R)."""
        self._peak = max(self._peak, float(np.max(np.abs(z))))
        scale = _power_of_two_scale(np.array([self._peak]))
        if scale != self._scale:  # exact: a power of two (the old state is all zero if the scale shrinks)
            ratio = self._scale / scale
            self._means *= ratio
            self._factor *= ratio
            self._norm_sum *= ratio
            self._scale = scale
        zs = z / scale
        order = np.argsort(y, kind="stable")
        ys, zs = y[order], zs[order]
        classes, starts, nb = np.unique(ys, return_index=True, return_counts=True)
        mb = np.add.reduceat(zs, starts, axis=0) / nb[:, None]  # block class means [k, d]
        na = self._counts[classes]
        delta = mb - self._means[classes]
        old = na > 0
        weight = np.sqrt(na[old] * nb[old] / (na[old] + nb[old]))
        rows = np.concatenate([self._factor, zs - np.repeat(mb, nb, axis=0), weight[:, None] * delta[old]])
        r = np.asarray(np.linalg.qr(rows, mode="r"))  # [min(rows, d), d]
        d = self._factor.shape[0]
        self._factor = np.zeros((d, d))
        self._factor[: r.shape[0]] = r  # fewer than d rows so far: the rest of R is zero
        self._means[classes] += (nb / (na + nb))[:, None] * delta
        self._counts[classes] += nb
        self._norm_sum += float(np.linalg.norm(zs, axis=1).sum())


class ResidualAccumulator:
    """Second pass over the SAME data: within_class and the training ncc_accuracy, O(C d) state.

    .. math:: \\mathrm{within\\_class} = \\frac1C \\sum_c \\frac1{n_c} \\sum_{y_i = c} \\lVert z_i - \\mu_c\\rVert,
        \\qquad \\mathrm{ncc\\_accuracy} = \\frac1N \\sum_i [\\arg\\max_c \\langle z_i, \\mu_c\\rangle = y_i]

    with mu_c the final class means of ``moments`` (docs/theory.md section 8). The class sizes seen are
    checked against the first pass: a ValueError says when the two passes did not read the same data.
    """

    def __init__(self, moments: FeatureMoments) -> None:
        if not isinstance(moments, FeatureMoments):
            raise ValueError(f"moments must be a FeatureMoments (from accumulate_moments), got {type(moments).__name__}")
        self._moments = moments
        c = moments.num_classes
        self._dist = np.zeros(c)
        self._counts = np.zeros(c, np.int64)
        self._correct = 0

    def update(self, z, labels) -> None:
        """Add a batch z [b, d] with labels [b] in 0..C-1."""
        m = self._moments
        zz, y = _batch(z, labels, m.num_classes, m.dim)
        zs = zz / m.scale  # the in-memory route divides by the same power of two
        self._dist += np.bincount(y, weights=np.linalg.norm(zs - m.means[y], axis=1), minlength=m.num_classes)
        self._correct += int(np.count_nonzero(np.argmax(zs @ m.means.T, axis=1) == y))
        self._counts += np.bincount(y, minlength=m.num_classes)

    def _check(self) -> None:
        if not np.array_equal(self._counts, self._moments.counts):
            raise ValueError(f"batches: the second pass saw {int(self._counts.sum())} samples with class sizes different from "
                             f"the first pass's {self._moments.num_samples}: both passes must read the same data")

    def within_class(self) -> float:
        """The mean distance to the class mean, per class then over classes."""
        self._check()
        return float((self._dist / self._counts).mean() * self._moments.scale)

    def ncc_accuracy(self) -> float:
        """The training accuracy of the inner-product nearest class mean (ties to the first class)."""
        self._check()
        return self._correct / self._moments.num_samples


class NCCAccumulator:
    """Test-set ncc_accuracy with fixed class means [C, d] (row c for label c), O(C d) state.

    Scores as :func:`ncgeom.metrics.ncc_accuracy` with ``class_means=``: argmax_c <z_i, mu_c>, ties to the
    first class. Each batch is divided by its own power of two near max |z| (the argmax does not change).
    """

    def __init__(self, class_means) -> None:
        means = _unit_scaled(_embeddings(class_means, "class_means"))[0]
        if means.shape[0] < 2:
            raise ValueError(f"class_means must have at least 2 rows (classes), got {means.shape[0]}")
        self._means = means
        self._correct = 0
        self._total = 0

    def update(self, z, labels) -> None:
        """Add a batch z [b, d] with labels [b] in 0..C-1."""
        zz, y = _batch(z, labels, self._means.shape[0], self._means.shape[1])
        zs = _unit_scaled(zz)[0]
        self._correct += int(np.count_nonzero(np.argmax(zs @ self._means.T, axis=1) == y))
        self._total += y.size

    def accuracy(self) -> float:
        """The fraction of correctly classified samples; ValueError when no batch was given."""
        if self._total == 0:
            raise ValueError("batches: no (z, labels) batch was given")
        return self._correct / self._total


def accumulate_moments(batches: Batches, *, num_classes: int, block_rows: int | None = None) -> FeatureMoments:
    """One pass over ``batches`` (:data:`Batches`): the :class:`FeatureMoments` of all of them.

    Examples
    --------
    >>> from ncgeom.geometry import simplex_etf
    >>> m = accumulate_moments([(simplex_etf(3), [0, 1, 2])], num_classes=3)
    >>> round(m.one_pass_metrics()["etf_distance"], 12), m.num_samples
    (0.0, 3)
    """
    acc = MomentAccumulator(num_classes, block_rows=block_rows)
    for z, labels in _pairs(batches):
        acc.update(z, labels)
    return acc.moments()


def streaming_nc_metrics(batches: Batches, *, num_classes: int, block_rows: int | None = None,
                         moments: FeatureMoments | None = None) -> NCMetrics:
    """Every metric of docs/theory.md section 8 in two passes over ``batches``, O(C d + d^2) memory.

    Equals :func:`ncgeom.metrics.nc_metrics` of the concatenated batches (with ``num_classes``) up to
    rounding (module docstring, "Error bound"). Pass 1 gives :data:`ONE_PASS_METRICS`; pass 2
    (:class:`ResidualAccumulator`) gives within_class and ncc_accuracy (training accuracy). ``batches``
    must therefore be readable twice: a list, or a callable returning a fresh iterable (a one-shot
    iterator raises ValueError; use :func:`accumulate_moments` alone for a single pass).

    With ``moments`` (from :func:`accumulate_moments` on the same batches) pass 1 is skipped: a training
    evaluation then reads the train data twice and the test data once, and takes the test means and the
    mean norm from the same moments::

        moments = accumulate_moments(train, num_classes=C)
        metrics = streaming_nc_metrics(train, num_classes=C, moments=moments)
        test_acc = streaming_ncc_accuracy(test, moments.class_means())

    Examples
    --------
    >>> from ncgeom.geometry import simplex_etf
    >>> v = simplex_etf(3)
    >>> m = streaming_nc_metrics([(v[:2], [0, 1]), (v[2:], [2])], num_classes=3)
    >>> round(m.unit_norm, 12), round(m.within_class, 12), m.ncc_accuracy
    (0.0, 0.0, 1.0)
    """
    if moments is None:
        moments = accumulate_moments(_pairs(batches, passes=2), num_classes=num_classes, block_rows=block_rows)
    elif not isinstance(moments, FeatureMoments) or moments.num_classes != num_classes:
        raise ValueError(f"moments must be the FeatureMoments of the same batches with num_classes={num_classes}")
    second = ResidualAccumulator(moments)
    for z, labels in _pairs(batches):
        second.update(z, labels)
    return NCMetrics(**moments.one_pass_metrics(), within_class=second.within_class(),
                     ncc_accuracy=second.ncc_accuracy())


def streaming_ncc_accuracy(batches: Batches, class_means) -> float:
    """ncc_accuracy of test ``batches`` with train ``class_means`` [C, d] (e.g. ``moments.class_means()``), one pass.

    Examples
    --------
    >>> streaming_ncc_accuracy([([[0.9, 0.1]], [0]), ([[0.2, -1.0]], [0])], [[1.0, 0.0], [0.0, -1.0]])
    0.5
    """
    acc = NCCAccumulator(class_means)
    for z, labels in _pairs(batches):
        acc.update(z, labels)
    return acc.accuracy()


def encoded_batches(encode: Callable[[Any], Any], loader: Iterable[tuple[Any, Any]]) -> Callable[[], Iterator[tuple[Any, Any]]]:
    """A callable yielding ``(encode(x), y)`` for each ``(x, y)`` of ``loader``, without autograd, one batch at a time.

    ``loader`` must be re-iterable (a torch DataLoader, a list), so that each call starts a fresh pass;
    the features are never stored. Pass the result to :func:`streaming_nc_metrics` (two passes) or
    :func:`streaming_ncc_accuracy`.
    """
    if not callable(encode):
        raise ValueError(f"encode must be a callable x -> features [b, d], got {type(encode).__name__}")
    if iter(loader) is loader:
        raise ValueError("loader must be re-iterable (a DataLoader or a list), got a one-shot iterator")

    def batches() -> Iterator[tuple[Any, Any]]:
        import torch  # heavy optional import: only when a pass runs

        for x, y in loader:
            with torch.no_grad():
                z = encode(x)
            yield z, y

    return batches
