"""Tests of ncgeom.metrics.field_streaming: the field's metrics on batches, in bounded memory. In order of trust:

1. the per-class moments (n_c, mu_c, S_c) against a naive loop, and the closed values of an exact noisy NC
   configuration;
2. agreement with the in-memory functions (an independent route: one pass over all of z) for several batch
   splittings, a growing scale, extreme scales, torch inputs and an encoder over a DataLoader, within a
   tolerance derived below; the multi-pass uniformity against the in-memory log-sum-exp;
3. hypothesis properties: invariance under a permutation of the samples and of the batch order;
4. bounded state, and ValueErrors naming the argument (one-shot iterators, passes that differ).
"""

from __future__ import annotations

import doctest
import math

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from numpy.testing import assert_allclose

import ncgeom.metrics as M
from ncgeom.geometry import simplex_etf
from ncgeom.metrics import field_streaming
from ncgeom.testing import noisy_collapsed_embeddings

EPS = np.finfo(np.float64).eps
FIELD = M.FIELD_METRIC_NAMES


def split(z, y, size):
    """Consecutive batches of ``size`` rows (the last one shorter)."""
    return [(z[i : i + size], y[i : i + size]) for i in range(0, len(y), size)]


def random_features(n, d, c, seed):
    rng = np.random.default_rng(seed)
    y = np.concatenate([np.arange(c), rng.integers(0, c, n - c)])  # every class present
    rng.shuffle(y)
    return rng.standard_normal((n, d)) + 1.5 * rng.standard_normal((c, d))[y], y


def tolerance(z, y):
    """Relative tolerance between the streaming and the in-memory route.

    Both compute n_c exactly and mu_c, S_c with a relative error of order N eps: the in-memory route sums the
    N rows (gamma_N = N eps/2), the streaming one sums each batch and merges K <= N times (Chan's update adds
    a few eps per merge). The metrics divide by squared mean distances, centred-mean norms and direction
    distances (CDNV, NC3, hyperspherical uniformity), which amplifies by kappa = (max ||z|| / smallest of
    them)^2; alignment and uniformity are sums of O(N^2) nonnegative terms, at most N^2 eps relative. Hence
    16 (N^2 + d) eps kappa: worst-case, far below what a bug produces.
    """
    mus = M.class_means(z, y)
    centred = mus - mus.mean(axis=0)
    i, j = np.triu_indices(len(mus), 1)
    unit = centred / np.linalg.norm(centred, axis=1, keepdims=True)
    small = min(np.linalg.norm(mus[i] - mus[j], axis=1).min(), np.linalg.norm(centred, axis=1).min(),
                np.linalg.norm(unit[i] - unit[j], axis=1).min() * np.linalg.norm(centred, axis=1).min())
    kappa = max(1.0, float(np.max(np.linalg.norm(z, axis=1)) / small) ** 2)
    return 16 * (len(y) ** 2 + z.shape[1]) * EPS * kappa


def assert_field_close(got, ref, rtol):
    """Every field of two FieldMetrics, relative to max(1, |ref|); classifier_agreement exactly (an argmax)."""
    got, ref = got.to_dict(), ref.to_dict()
    assert list(got) == list(FIELD) == list(ref)
    for name in FIELD:
        if name == "classifier_agreement" or not math.isfinite(ref[name]):
            np.testing.assert_array_equal(got[name], ref[name], err_msg=name)
            continue
        assert_allclose(got[name], ref[name], rtol=0, atol=rtol * max(1.0, abs(ref[name])), err_msg=name)


def test_docstring_examples():
    result = doctest.testmod(field_streaming, raise_on_error=False)
    assert result.attempted >= 8 and result.failed == 0


# ------------------------------------------------------------------ 1. the moments and closed values
def test_class_moments_match_their_definitions():
    z, y = random_features(90, 4, 3, seed=1)
    m = M.accumulate_class_moments(split(z, y, 8), num_classes=3)
    mus = np.array([sum(z[i] for i in range(90) if y[i] == k) / np.sum(y == k) for k in range(3)])
    scatter = [sum(float(np.sum((z[i] - mus[k]) ** 2)) for i in range(90) if y[i] == k) for k in range(3)]
    atol = 90 * 4 * EPS * float(np.max(np.abs(z))) ** 2  # sums of N products of O(max|z|) numbers
    assert m.counts.tolist() == np.bincount(y).tolist() and (m.num_samples, m.num_classes, m.dim) == (90, 3, 4)
    assert_allclose(m.class_means(), mus, rtol=0, atol=atol)
    assert_allclose(m.class_variances(), np.array(scatter) / np.bincount(y), rtol=0, atol=atol)
    assert_allclose(m.class_variances(ddof=1), np.array(scatter) / (np.bincount(y) - 1), rtol=0, atol=atol)
    assert not m.means.flags.writeable and not m.scatter.flags.writeable


@pytest.mark.parametrize("num_classes, dim", [(2, 1), (3, 2), (5, 7)])
@pytest.mark.parametrize("batch", [1, 5, 10_000])
def test_exact_noisy_nc_closed_values(num_classes, dim, batch):
    # class means exactly r v_c, each class 2d points at +-sigma sqrt(d) e_j (tests/test_field_metrics.py):
    # cdnv = sigma^2 d (C-1) / (2 C r^2), alignment = 4 sigma^2 d^2 / (2d - 1), hyperspherical variance 0,
    # NC3 = 0 and NC4 = 1 for W = 3 v (self-dual, no bias)
    c, d, r, sigma = num_classes, dim, 2.0, 0.05
    v = r * simplex_etf(c, d, rng=np.random.default_rng(c + d))
    z = (v[:, None, :] + sigma * math.sqrt(d) * np.concatenate([np.eye(d), -np.eye(d)])[None]).reshape(-1, d)
    y = np.repeat(np.arange(c), 2 * d)
    got = M.streaming_field_metrics(split(z, y, batch), num_classes=c, classifier=3.0 * v, uniformity_block_rows=batch)
    rtol = tolerance(z, y)
    assert_allclose(got.cdnv, sigma**2 * d * (c - 1) / (2 * c * r**2), rtol=rtol)
    assert_allclose(got.alignment, 4 * sigma**2 * d**2 / (2 * d - 1), rtol=rtol)
    assert_allclose([got.hyperspherical_uniformity, got.self_duality], 0.0, atol=rtol)
    assert got.classifier_agreement == 1.0
    assert_allclose(got.uniformity, M.uniformity(z), rtol=rtol)


# ------------------------------------------------------------------ 2. agreement with the in-memory route
@pytest.mark.parametrize("n, d, c", [(120, 6, 5), (90, 2, 7), (40, 30, 4)])  # d > C-1, d < C-1, N < d
@pytest.mark.parametrize("batch, block", [(1, 1), (7, 5), (64, None), (10_000, None)])
def test_agrees_with_in_memory_field_metrics(n, d, c, batch, block):
    z, y = random_features(n, d, c, seed=n + d + c)
    rng = np.random.default_rng(n)
    w, b = rng.standard_normal((c, d)), rng.standard_normal(c)
    got = M.streaming_field_metrics(split(z, y, batch), num_classes=c, classifier=w, bias=b, uniformity_block_rows=block)
    ref = M.field_metrics(z, y, classifier=w, bias=b, num_classes=c)
    assert 0.0 < ref.classifier_agreement < 1.0  # disagreements to count: the comparison is not vacuous
    assert_field_close(got, ref, tolerance(z, y))
    moments = M.accumulate_class_moments(split(z, y, batch), num_classes=c)
    assert_allclose(moments.cdnv_matrix(ddof=1), M.cdnv_matrix(z, y, ddof=1), rtol=tolerance(z, y))
    for statistic in ("variance", "mean"):
        assert_allclose(moments.hyperspherical_uniformity(statistic=statistic),
                        M.hyperspherical_uniformity(z, y, statistic=statistic), rtol=tolerance(z, y))


def test_scale_growing_along_the_stream_and_extreme_scales():
    # the running power-of-two scale is raised four times (the state rescaled exactly); the values must be
    # the in-memory ones, which use the global scale at once
    z, y = random_features(100, 5, 4, seed=3)
    grow = np.repeat(2.0 ** np.arange(0, 40, 8), 20)[:, None]
    w = np.random.default_rng(3).standard_normal((4, 5))
    for factor in (1e-150, 1.0, 1e150):
        zz = z * grow * factor
        got = M.streaming_field_metrics(split(zz, y, 16), num_classes=4, classifier=w, uniformity_block_rows=30)
        ref = M.field_metrics(zz, y, classifier=w)
        assert_field_close(got, ref, tolerance(z * grow, y))


def test_test_set_agreement_with_train_means_equals_the_in_memory_one():
    z, y = random_features(300, 6, 5, seed=7)
    z_test, y_test = random_features(200, 6, 5, seed=8)
    rng = np.random.default_rng(9)
    w, b = rng.standard_normal((5, 6)), rng.standard_normal(5)
    means = M.accumulate_class_moments(split(z, y, 32), num_classes=5).class_means()
    ref = M.classifier_agreement(z_test, y_test, classifier=w, bias=b, class_means=M.class_means(z, y))
    assert 0.0 < ref < 1.0
    for batch in (1, 17, 200):
        got = M.streaming_classifier_agreement(split(z_test, y_test, batch), classifier=w, class_means=means, bias=b)
        assert got == ref


def test_streaming_uniformity_matches_the_in_memory_log_sum_exp():
    z, y = random_features(53, 3, 3, seed=10)
    ref = M.uniformity(z, t=0.7)
    for batch, rows in [(1, 1), (4, 10), (53, None), (10, 53), (7, 1000)]:
        assert_allclose(M.streaming_uniformity(split(z, y, batch), t=0.7, block_rows=rows), ref, rtol=tolerance(z, y))
    assert math.isnan(M.streaming_uniformity([(z[:1], y[:1])]))  # one row: no pair


def test_torch_inputs_and_an_encoder_over_a_dataloader():
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(120, 8, generator=gen, dtype=torch.float64)
    y = torch.randint(0, 4, (120,), generator=gen)
    encoder = torch.nn.Linear(8, 5, dtype=torch.float64)
    head = torch.nn.Linear(5, 4, dtype=torch.float64)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=32)
    batches = M.encoded_batches(encoder, loader)
    got = M.streaming_field_metrics(batches, num_classes=4, classifier=head.weight, bias=head.bias,
                                    uniformity_block_rows=50)
    with torch.no_grad():
        z = encoder(x).numpy()
    yy = y.numpy()
    ref = M.field_metrics(z, yy, classifier=head.weight, bias=head.bias, num_classes=4)
    assert_field_close(got, ref, tolerance(z, yy))
    moments = M.accumulate_class_moments(batches, num_classes=4)
    again = M.streaming_field_metrics(batches, num_classes=4, classifier=head.weight, bias=head.bias, moments=moments,
                                      uniformity_block_rows=50)
    assert again == got  # the same passes in the same order: the same numbers


# ------------------------------------------------------------------ 3. hypothesis properties
@given(noisy_collapsed_embeddings(max_classes=5, max_per_class=8, max_sigma=1.0), st.integers(0, 2**32 - 1),
       st.integers(1, 9), st.integers(1, 9))
def test_sample_permutation_and_batch_order_invariance(data, seed, batch_a, batch_b):
    z, y, c = data.z, data.labels, data.num_classes
    w = np.random.default_rng(seed).standard_normal((c, z.shape[1]))
    ref = M.streaming_field_metrics(split(z, y, batch_a), num_classes=c, classifier=w, uniformity_block_rows=batch_a)
    perm = np.random.default_rng(seed).permutation(len(y))
    permuted = split(z[perm], y[perm], batch_b)[::-1]  # another sample order, another split, batches reversed
    got = M.streaming_field_metrics(permuted, num_classes=c, classifier=w, uniformity_block_rows=batch_b)
    assert_field_close(got, ref, tolerance(z, y))


# ------------------------------------------------------------------ 4. bounded state and bad input
def test_state_size_does_not_grow_with_the_number_of_batches():
    c, d, b = 10, 7, 64
    rng = np.random.default_rng(0)
    sizes = []
    for batches in (10, 500):
        acc = M.ClassMomentAccumulator(c)
        for _ in range(batches):
            acc.update(rng.standard_normal((b, d)), rng.integers(0, c, b))
        sizes.append(acc.nbytes)
        assert acc.moments().num_samples == batches * b
    assert sizes == [8 * (c + c * d + c)] * 2  # counts [C] int64, means [C, d], scatter [C]


def _one_shot():
    yield np.eye(2), [0, 1]
    yield -np.eye(2), [0, 1]


class _Shuffling:
    """A re-iterable source that yields its rows in another order on every pass (a shuffling loader)."""

    def __init__(self, z, y):
        self.z, self.y, self.rng = z, y, np.random.default_rng(0)

    def __call__(self):
        perm = self.rng.permutation(len(self.y))
        return split(self.z[perm], self.y[perm], 5)


@pytest.mark.parametrize("call, name", [
    (lambda: M.accumulate_class_moments([(np.ones((5, 3)), np.zeros(4, int))], num_classes=2), "labels"),
    (lambda: M.accumulate_class_moments([(np.ones((2, 3)), [0, 1]), (np.ones((2, 4)), [0, 1])], num_classes=2), "z"),
    (lambda: M.accumulate_class_moments([(np.ones((2, 3)), [0, 2])], num_classes=2), "labels"),
    (lambda: M.accumulate_class_moments([(np.ones((2, 3)), [0, 0])], num_classes=2), "labels"),
    (lambda: M.accumulate_class_moments([], num_classes=2), "batches"),
    (lambda: M.accumulate_class_moments([(np.eye(2), [0, 1])], num_classes=1), "num_classes"),
    (lambda: M.accumulate_class_moments([(np.eye(2), [0, 1])], num_classes=2).cdnv(ddof=3), "ddof"),
    (lambda: M.accumulate_class_moments([(np.eye(2), [0, 1])], num_classes=2).self_duality(np.eye(3)), "classifier"),
    (lambda: M.accumulate_class_moments([(np.eye(2), [0, 1])], num_classes=2).hyperspherical_uniformity(statistic="x"),
     "statistic"),
    (lambda: M.streaming_field_metrics(_one_shot(), num_classes=2), "batches"),
    (lambda: M.streaming_field_metrics([(np.eye(2), [0, 1])], num_classes=2, bias=[0.0, 0.0]), "bias"),
    (lambda: M.streaming_field_metrics([(np.eye(2), [0, 1])], num_classes=2, classifier=np.ones((3, 2))), "classifier"),
    (lambda: M.streaming_field_metrics([(np.eye(2), [0, 1])], num_classes=3,
                                       moments=M.accumulate_class_moments([(np.eye(2), [0, 1])], num_classes=2)), "moments"),
    (lambda: M.streaming_classifier_agreement([(np.eye(2), [0, 1])], classifier=np.eye(2), class_means=np.ones((1, 2))),
     "class_means"),
    (lambda: M.streaming_classifier_agreement([(np.eye(2), [0, 1])], classifier=np.eye(2), class_means=np.eye(2),
                                              bias=[1.0]), "bias"),
    (lambda: M.streaming_classifier_agreement([(np.eye(3), [0, 1, 1])], classifier=np.eye(2), class_means=np.eye(2)), "z"),
    (lambda: M.streaming_classifier_agreement([], classifier=np.eye(2), class_means=np.eye(2)), "batches"),
    (lambda: M.streaming_uniformity(_one_shot()), "batches"),
    (lambda: M.streaming_uniformity([]), "batches"),
    (lambda: M.streaming_uniformity([(np.eye(2), [0, 1])], t=0.0), "t"),
    (lambda: M.streaming_uniformity([(np.eye(2), [0, 1])], block_rows=0), "block_rows"),
    (lambda: M.streaming_uniformity([(np.eye(2), [0, 1]), (np.ones((1, 3)), [0])]), "z"),
    (lambda: M.streaming_uniformity(_Shuffling(*random_features(30, 2, 2, seed=4)), block_rows=5), "batches"),
])
def test_bad_input_raises_value_error_naming_the_argument(call, name):
    with pytest.raises(ValueError, match=rf"^{name}\b"):
        call()


def test_passes_of_different_lengths_are_refused():
    z, y = random_features(20, 2, 2, seed=5)
    calls = []

    def growing():  # the second and later passes yield one row more than the first
        calls.append(1)
        extra = [(z[:1], y[:1])] if len(calls) > 1 else []
        return split(z, y, 5) + extra

    with pytest.raises(ValueError, match="^batches: the passes yielded"):
        M.streaming_uniformity(growing, block_rows=5)
    truncated = iter([split(z[:15], y[:15], 5)])  # the NC4 pass reads 15 of the 20 rows
    moments = M.accumulate_class_moments(split(z, y, 5), num_classes=2)
    with pytest.raises(ValueError, match="^batches: the second pass saw 15 samples"):
        M.streaming_field_metrics(lambda: next(truncated), num_classes=2, classifier=np.eye(2), moments=moments)
