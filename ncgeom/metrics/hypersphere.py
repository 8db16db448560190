"""How the embeddings spread on the sphere: hyperspherical uniformity of the class means, alignment and uniformity.

docs/theory.md section 8. ``hyperspherical_uniformity`` is the generalized NC2 of liu2023generalizing and
wu2024linguistic (pairwise log inverse distances of the normalized centred class means); ``alignment`` and
``uniformity`` are the two properties of wang2020understanding (Section 4.1), on the embeddings as given:
wang2020understanding evaluate them on L2-normalised features, so pass ``normalize(z)``
(:func:`ncgeom.geometry.normalize`) to reproduce their numbers.

Every function takes ``(z, labels)`` with z [N, d] (numpy or torch, computed in float64) and integer labels
[N] (:mod:`ncgeom.metrics.groups`). Memory: the pairwise terms are summed in blocks of rows, never as an
N x N matrix; ``uniformity`` is a log-sum-exp accumulated over the blocks.
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np

from ncgeom.labels import integer_labels
from ncgeom.metrics.groups import _embeddings, _group, _to_numpy, _unit_scaled
from ncgeom.metrics.variability import _class_scatter
from ncgeom.validate import require_choice, require_int, require_real

__all__ = ["hyperspherical_uniformity", "alignment", "uniformity", "HYPERSPHERICAL_STATISTICS"]

HyperSphericalStatistic = Literal["variance", "mean"]
HYPERSPHERICAL_STATISTICS: tuple[HyperSphericalStatistic, ...] = ("variance", "mean")
"""The statistics of the pairwise log inverse distances that :func:`hyperspherical_uniformity` reports."""

_BLOCK_ELEMENTS = 1 << 22  # float64 entries of one block of pairwise terms (32 MiB)


# ------------------------------------------------------------------ shared pieces (also used by the streaming module)
def _times_power_of_scale(value: float, scale: float, power: float) -> float:
    """value * scale**power for a power-of-two scale, without overflowing an intermediate scale**power.

    inf (or 0) only when the product itself lies beyond the float64 range.
    """
    x = (int(np.frexp(scale)[1]) - 1) * power  # log2(scale^power)
    k = math.floor(x)
    with np.errstate(over="ignore", under="ignore"):
        return float(np.ldexp(value * 2.0 ** (x - k), k))


def _hyperspherical(means: np.ndarray, statistic: HyperSphericalStatistic) -> float:
    """The statistic of -log ||u_c - u_c'|| over c < c', u_c = (mu_c - mu_G) / ||mu_c - mu_G||; NaN if some mu_c = mu_G."""
    centered = means - means.mean(axis=0)
    norms = np.linalg.norm(centered, axis=1)
    if np.any(norms == 0.0):
        return float("nan")
    unit = centered / norms[:, None]
    c = unit.shape[0]
    values = np.empty(c * (c - 1) // 2)
    pos = 0
    for a in range(c - 1):  # row by row: O(C d) temporaries besides the C (C-1)/2 values
        diff = unit[a + 1 :] - unit[a]
        values[pos : pos + c - 1 - a] = np.sqrt(np.einsum("kd,kd->k", diff, diff))
        pos += c - 1 - a
    with np.errstate(divide="ignore", invalid="ignore"):
        values = -np.log(values)  # +inf for two centred means pointing the same way
        mean = float(np.mean(values))
        if statistic == "mean":
            return mean
        return float(np.mean((values - mean) ** 2))  # inf - inf: NaN when a distance is 0


class _RunningLogSumExp:
    """log((1/P) sum_p exp(v_p)) of values v_p added in blocks (max-shifted, as a streaming log-sum-exp)."""

    def __init__(self) -> None:
        self.top = -math.inf
        self.total = 0.0  # sum_p exp(v_p - top)
        self.count = 0

    def add(self, values: np.ndarray) -> None:
        self.count += int(values.size)
        if values.size == 0:
            return
        top = float(np.max(values))
        if top == -math.inf:  # every term is exp(-inf) = 0
            return
        if top > self.top:
            self.total = self.total * math.exp(self.top - top) if self.top > -math.inf else 0.0
            self.top = top
        self.total += float(np.sum(np.exp(values - self.top)))

    def log_mean(self) -> float:
        if self.count == 0:
            return float("nan")
        if self.top == -math.inf:
            return -math.inf
        return self.top + math.log(self.total) - math.log(self.count)


def _neg_scaled_sq_distances(a: np.ndarray, b: np.ndarray, t: float, scale: float) -> np.ndarray:
    """-t ||a_i - b_j||^2 scale^2 [rows of a, rows of b] for rows given in units of the power of two ``scale``.

    ||a||^2 + ||b||^2 - 2 a.b (clamped at 0): its absolute error, a few eps max ||z||^2, shifts exp(-t D^2)
    by a relative t * (a few eps max ||z||^2), negligible where the terms matter.
    """
    d2 = np.einsum("id,id->i", a, a)[:, None] + np.einsum("jd,jd->j", b, b)[None, :] - 2.0 * (a @ b.T)
    np.maximum(d2, 0.0, out=d2)
    with np.errstate(over="ignore"):  # D^2 beyond the float range: the term is exp(-inf) = 0
        return -t * np.ldexp(d2, 2 * (int(np.frexp(scale)[1]) - 1))


def _within_block_pairs(zs: np.ndarray, acc: _RunningLogSumExp, t: float, scale: float, block_rows: int) -> None:
    """Add the terms of all pairs i < j of the rows of zs to ``acc``, ``block_rows`` rows at a time."""
    n = zs.shape[0]
    for start in range(0, n, block_rows):
        stop = min(n, start + block_rows)
        values = _neg_scaled_sq_distances(zs[start:stop], zs[start:], t, scale)
        acc.add(values[np.triu(np.ones(values.shape, dtype=bool), k=1)])  # column k > row r: j > i


def _default_block_rows(n: int, per_row: int) -> int:
    return max(1, _BLOCK_ELEMENTS // max(1, n * per_row))


# ------------------------------------------------------------------ public metrics
def hyperspherical_uniformity(z, labels, *, statistic: HyperSphericalStatistic = "variance",
                              num_classes: int | None = None) -> float:
    """Spread of the log inverse distances between the normalized centred class means (generalized NC2).

    .. math:: u_c = \\frac{\\mu_c - \\mu_G}{\\lVert\\mu_c - \\mu_G\\rVert},\\qquad
        e_{cc'} = \\log\\frac{1}{\\lVert u_c - u_{c'}\\rVert},\\qquad
        \\bar e = \\frac{2}{C(C-1)}\\sum_{c < c'} e_{cc'},\\qquad
        \\mathrm{variance} = \\frac{2}{C(C-1)}\\sum_{c < c'} (e_{cc'} - \\bar e)^2

    where mu_c are the class means of ``z`` [N, d] grouped by ``labels`` [N], mu_G = (1/C) sum_c mu_c their
    UNWEIGHTED mean and C the number of classes. ``statistic="variance"`` (default) returns the variance
    (a population variance, over the C (C-1)/2 pairs), ``"mean"`` returns e-bar.

    e-bar is the logarithmic hyperspherical energy of the directions u_c per pair (liu2023generalizing, the
    s = 0 Riesz kernel; their "hyperspherical uniformity" is its minimization), and the variance is the
    "GNC2" of wu2024linguistic: 0 iff all directions are equidistant, i.e. the u_c form a simplex ETF (which
    needs d >= C - 1; in smaller d it stays > 0). Peers (docs/conventions.md): the variance is
    rhubarbwu/neural-collapse's ``kernel_stats(M, m_G, kernel=log_kernel)[1]`` (its README's ``nc2g_log``;
    it adds float eps to the norms before dividing); the mean is felixsh/nc-toolbox's
    ``gnc2_hypershperical_uniformity`` with its default ``reduction='mean'`` (with ``mu_g`` = our unweighted
    mean). Scale, rotation and label-permutation invariant.

    Hand values: a simplex ETF has ||u_c - u_c'||^2 = 2C / (C-1) for every pair, so variance 0 and
    e-bar = -log(2C/(C-1)) / 2; C = 2 (centred means are always antipodal): variance 0, e-bar = -log 2
    whatever the data; the 4 vertices of a square: e = -log(2)/2 (4 pairs) and -log 2 (2 pairs), variance
    (log 2)^2 / 18.

    Degenerate input: a class mean equal to mu_G has no direction (NaN). Two centred means pointing the
    same way have e = +inf: the mean is +inf and the variance NaN. A class with one sample is fine.

    Examples
    --------
    >>> hyperspherical_uniformity([[1.0], [-3.0]], [0, 1]), hyperspherical_uniformity([[1.0], [-3.0]], [0, 1], statistic="mean")
    (0.0, -0.6931471805599453)
    """
    statistic = require_choice("statistic", statistic, HYPERSPHERICAL_STATISTICS)
    g = _group(z, labels, num_classes=num_classes)
    return _hyperspherical(g.means, statistic)


def _label_alignment_squared(counts: np.ndarray, scatter: np.ndarray) -> float:
    """Mean of ||z_i - z_j||^2 over the ordered same-class pairs i != j, from n_c and S_c = sum ||z_i - mu_c||^2.

    sum_{i, j in c} ||z_i - z_j||^2 = 2 n_c S_c over n_c (n_c - 1) ordered pairs (docs/theory.md section 8).
    """
    pairs = float(np.sum(counts.astype(np.float64) * (counts - 1)))
    if pairs == 0.0:
        return float("nan")
    return float(np.sum(2.0 * counts * scatter) / pairs)


def _pair_power_sum(a: np.ndarray, b: np.ndarray, alpha: float) -> float:
    """sum of ||a - b||^alpha over the rows of a - b (broadcast; the differences themselves, not a Gram expansion)."""
    diff = a - b
    return float(np.sum(np.sum(diff * diff, axis=-1) ** (alpha / 2.0)))


def _positives(positives, n: int) -> tuple[np.ndarray, np.ndarray]:
    """``positives`` as two int64 index arrays [P] (P >= 1) into 0..n-1, or ValueError naming it."""
    if not isinstance(positives, tuple | list) or len(positives) != 2:
        raise ValueError("positives must be a pair (i, j) of index arrays [P]")
    out = []
    for part in positives:
        arr = _to_numpy(part)
        if arr.ndim != 1 or (arr.dtype.kind not in "iu" and arr.size):  # an empty list has dtype float
            raise ValueError(f"positives must hold two 1-D integer index arrays [P], got dtype {arr.dtype} and shape {arr.shape}")
        out.append(arr.astype(np.int64))
    i, j = out
    if i.shape != j.shape or i.size == 0:
        raise ValueError(f"positives must hold two index arrays of the same length P >= 1, got {i.size} and {j.size}")
    bad = np.concatenate([i, j])
    bad = bad[(bad < 0) | (bad >= n)]
    if bad.size:
        raise ValueError(f"positives must index rows 0..{n - 1} of z, got {bad[0]}")
    return i, j


def alignment(z, labels=None, *, positives=None, alpha: float = 2.0, num_classes: int | None = None) -> float:
    """Mean distance^alpha between positive pairs (wang2020understanding, Section 4.1, L_align).

    .. math:: \\mathrm{alignment} = \\frac{1}{|P|} \\sum_{(i, j) \\in P} \\lVert z_i - z_j\\rVert_2^{\\alpha}

    where z_i = ``z[i]`` [N, d], alpha = ``alpha`` > 0 (default 2, as wang2020understanding) and the
    positive pairs P are either

    - with ``labels`` [N]: every ordered pair of distinct samples of the same class, P = {(i, j) : i != j,
      y_i = y_j} (label positives: the supervised settings of docs/theory.md section 3; each pair weighs
      the same, so a class of n_c samples weighs n_c (n_c - 1)); or
    - with ``positives=(i, j)``: the pairs (i[p], j[p]) as given, index arrays [P] (e.g. two views:
      ``z = concat(z1, z2)``, ``positives=(arange(B), arange(B) + B)``, which is wang2020understanding's
      reference ``align_loss(z1, z2, alpha)``).

    For alpha = 2 and label positives it is computed from class moments, exactly in exact arithmetic
    ([derived]; also the streaming form):

    .. math:: \\sum_{i \\ne j,\\ y_i = y_j = c} \\lVert z_i - z_j\\rVert^2 = 2 n_c S_c,\\qquad
        S_c = \\sum_{y_i = c} \\lVert z_i - \\mu_c\\rVert^2,\\qquad
        \\mathrm{alignment} = \\frac{\\sum_c 2 n_c S_c}{\\sum_c n_c (n_c - 1)} ,

    i.e. per class 2 n_c / (n_c - 1) (mean ||z||^2 - ||mu_c||^2). Other alpha: the pairs themselves, in
    blocks. Homogeneous of degree alpha, rotation and translation invariant; 0 iff positives coincide.

    Degenerate input: no positive pair (every class a single sample) gives NaN. Labels of one class are
    fine here (all pairs are positives). Exactly one of ``labels`` and ``positives`` must be given.

    Examples
    --------
    >>> alignment([[1.0], [3.0], [-1.0], [-3.0]], [0, 0, 1, 1]), alignment([[0.0, 0.0], [3.0, 4.0]], positives=([0], [1]), alpha=1)
    (4.0, 5.0)
    """
    alpha = require_real("alpha", alpha, min_value=0.0, min_inclusive=False)
    if (labels is None) == (positives is None):
        raise ValueError("labels and positives: give exactly one of them (label positives or explicit pairs)")
    if positives is not None:
        if num_classes is not None:
            raise ValueError("num_classes is only meaningful with labels, not with positives")
        zs, scale = _unit_scaled(_embeddings(z))
        i, j = _positives(positives, zs.shape[0])
        step = _default_block_rows(1, zs.shape[1])
        total = sum(_pair_power_sum(zs[i[k : k + step]], zs[j[k : k + step]], alpha) for k in range(0, i.size, step))
        return _times_power_of_scale(total / i.size, scale, alpha)
    g = _group(z, labels, num_classes=num_classes, min_classes=1)
    if alpha == 2.0:
        return _times_power_of_scale(_label_alignment_squared(g.counts, _class_scatter(g)), g.scale, 2.0)
    total, pairs = 0.0, 0
    for c in range(g.num_classes):
        rows = g.z[g.index == c]
        n = rows.shape[0]
        pairs += n * (n - 1)
        step = _default_block_rows(n, rows.shape[1])
        for start in range(0, n, step):
            block = rows[start : start + step]
            total += _pair_power_sum(block[:, None, :], rows[None, :, :], alpha)  # i = j terms are 0
    if pairs == 0:
        return float("nan")
    return _times_power_of_scale(total / pairs, g.scale, alpha)


def uniformity(z, labels=None, *, t: float = 2.0, block_rows: int | None = None) -> float:
    """Log of the mean Gaussian potential over all pairs of embeddings (wang2020understanding, Section 4.1, L_uniform).

    .. math:: \\mathrm{uniformity} = \\log \\frac{2}{N(N-1)} \\sum_{i < j} e^{-t \\lVert z_i - z_j\\rVert_2^2}

    where z_i = ``z[i]`` [N, d] and t = ``t`` > 0 (default 2, as wang2020understanding). The pairs are the
    N (N - 1)/2 pairs of distinct samples, as in wang2020understanding's reference ``uniform_loss``
    (``torch.pdist``): the N self pairs, each exp(0) = 1, are not included. ``labels`` are not used (the
    signature matches the other metrics); when given they are checked for their length.

    At most 0 (all points equal); lower is more uniform. On the unit sphere it is bounded below [derived]:
    sum_{i<j} ||z_i - z_j||^2 = N^2 - ||sum_i z_i||^2 <= N^2, so by Jensen (exp is convex)

    .. math:: \\mathrm{uniformity} \\ge -t \\cdot \\frac{2}{N(N-1)} \\sum_{i<j} \\lVert z_i - z_j\\rVert^2
        \\ge -\\frac{2tN}{N-1},

    with equality iff all pairwise distances are equal and sum_i z_i = 0: the N points form a simplex ETF
    (possible iff d >= N - 1). E.g. two antipodal unit vectors (N = 2, t = 2): -8.

    Computed as a log-sum-exp (no underflow of the terms) over blocks of ``block_rows`` rows (default:
    about 2^22 / N rows per block): O(block_rows N) memory, O(N^2 d) time. The squared distances are
    ||z_i||^2 + ||z_j||^2 - 2 <z_i, z_j> clamped at 0.

    Degenerate input: N = 1 has no pair (NaN). Points so far apart that every term underflows give -inf
    (log 0).

    Examples
    --------
    >>> uniformity([[1.0, 0.0], [-1.0, 0.0]]), uniformity([[0.0], [1.0]], t=1.0)
    (-8.0, -1.0)
    """
    t = require_real("t", t, min_value=0.0, min_inclusive=False)
    zs, scale = _unit_scaled(_embeddings(z))
    n = zs.shape[0]
    if labels is not None:
        integer_labels(labels, n=n)
    rows = _default_block_rows(n, 1) if block_rows is None else require_int("block_rows", block_rows, min_value=1)
    acc = _RunningLogSumExp()
    _within_block_pairs(zs, acc, t, scale, rows)
    return acc.log_mean()
