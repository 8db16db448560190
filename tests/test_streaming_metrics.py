"""Tests of ncgeom.metrics.streaming: the metrics of docs/theory.md section 8 on batches, in bounded memory.

In order of trust:

1. closed values of section 8 at exact (and exactly noisy) NC configurations, and a naive reference for
   the moments (Sigma_W, Sigma_B, Z^T Z / N, mu_G, the mean norm) written from their definitions;
2. agreement with the in-memory metrics (an independent route: one SVD / matrix product of all of z)
   for several batch splittings, block sizes, a growing scale, torch inputs and an encoder over a
   DataLoader, within a tolerance derived below;
3. hypothesis properties: invariance under a permutation of the samples and of the batch order;
4. bounded state (the same bytes after 10 and after 1000 batches) and ValueErrors naming the argument.
"""

from __future__ import annotations

import doctest
import math
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from numpy.testing import assert_allclose

from ncgeom.geometry import simplex_etf
from ncgeom.metrics import (
    METRIC_NAMES,
    ONE_PASS_METRICS,
    RANKME_EPS,
    SECOND_PASS_METRICS,
    FeatureMoments,
    MomentAccumulator,
    NCCAccumulator,
    ResidualAccumulator,
    accumulate_moments,
    class_means,
    encoded_batches,
    nc_metrics,
    ncc_accuracy,
    streaming,
    streaming_nc_metrics,
    streaming_ncc_accuracy,
)
from ncgeom.testing import noisy_collapsed_embeddings

EPS = np.finfo(np.float64).eps


def split(z, y, size):
    """Consecutive batches of ``size`` rows (the last one shorter)."""
    return [(z[i : i + size], y[i : i + size]) for i in range(0, len(y), size)]


def tolerance(z, y, num_classes):
    """Relative tolerance between two float64 routes to the same metric, derived from the error bounds.

    Both routes compute the moments (class means, within-class scatter, Z^T Z) with a worst-case relative
    error of order N d eps: the in-memory matrix products of N rows carry gamma_N = N eps/2 per entry, the
    streaming QR updates c N d (1 + 2d/m) eps/2 (ncgeom.metrics.streaming, "Error bound"; c ~ 2 for
    Householder, and 1 + 2d/m <= 3 with m >= d). A metric's condition number with respect to the moments
    is at most kappa = (max_i ||z_i|| / s_min)^2, s_min the smallest kept singular value of the centred
    class means: nc1 divides by lambda_r = s_r^2 / C, and the spectrum, the cosines and etf_distance are
    ratios of the centred means, which a perturbation of size delta moves by delta / s_min relative;
    rankme multiplies by at most |log RANKME_EPS| + 1 < 17 (its derivative in p_k). Hence
    tol = 17 * 3 * N * d * eps * kappa: loose (worst case), yet far below any value a bug would produce.
    """
    n, d = z.shape
    means = class_means(z, y, num_classes=num_classes)
    s = np.linalg.svd(means - means.mean(axis=0), compute_uv=False)
    s_min = s[s > d * EPS * s[0]].min()
    kappa = max(1.0, float(np.max(np.linalg.norm(z, axis=1)) / s_min) ** 2)
    return (1 - math.log(RANKME_EPS)) * 3 * n * d * EPS * kappa


def assert_metrics_close(got, ref, rtol):
    """Every section-8 metric of two records: relative to max(1, |ref|); ncc_accuracy exactly (an argmax:
    two routes differ only on a tie within rounding, which random data never produce)."""
    got, ref = got.to_dict(), ref.to_dict()
    assert list(got) == list(METRIC_NAMES) == list(ref)
    for name in METRIC_NAMES:
        if name == "ncc_accuracy":
            assert got[name] == ref[name]
            continue
        r = np.asarray(ref[name], dtype=float)
        size = float(np.max(np.abs(r[np.isfinite(r)]), initial=1.0))  # NaN must match NaN (assert_allclose)
        assert_allclose(got[name], r, rtol=0, atol=rtol * size, err_msg=name)


def random_features(n, d, c, seed):
    rng = np.random.default_rng(seed)
    y = np.concatenate([np.arange(c), rng.integers(0, c, n - c)])  # every class present
    rng.shuffle(y)
    return rng.standard_normal((n, d)) + 0.7 * rng.standard_normal((c, d))[y], y


# ------------------------------------------------------------------ 1. closed values and the naive reference
def test_docstring_examples():
    result = doctest.testmod(streaming, raise_on_error=False)
    assert result.attempted >= 5 and result.failed == 0


@pytest.mark.parametrize("num_classes, dim", [(2, 1), (3, 2), (4, 4), (5, 7)])
@pytest.mark.parametrize("batch", [1, 5, 10_000])
def test_exact_nc_closed_values(num_classes, dim, batch):
    # samples on a radius-r ETF, each class at v_c +- sigma sqrt(d) e_j (j = 1..d, 2d samples): the class
    # means are exactly r v_c and Sigma_W = sigma^2 I exactly, so section 8 gives closed values:
    # unit_norm |r - 1|, zero_sum 0, equal_inner_product 0, within_class sigma sqrt(d),
    # nc1 sigma^2 (C-1)^2 / (C r^2) (when d >= C; for d = C-1 too, as Sigma_W is isotropic), etf_distance 0,
    # spectrum all 1 [C-1], ncc_accuracy 1 (margin r^2 C/(C-1) > 2 sigma sqrt(d) r); and rankme from
    # Z^T Z = 2d (r^2 C/(C-1) P + C sigma^2 I), P the projector on the ETF's span (rank C-1).
    c, d, r, sigma = num_classes, dim, 2.0, 0.05
    v = r * simplex_etf(c, d, rng=np.random.default_rng(c + d))
    offsets = sigma * math.sqrt(d) * np.concatenate([np.eye(d), -np.eye(d)])
    z = (v[:, None, :] + offsets[None]).reshape(-1, d)
    y = np.repeat(np.arange(c), 2 * d)
    got = streaming_nc_metrics(split(z, y, batch), num_classes=c).to_dict()
    sv2 = np.array([2 * d * (r**2 * c / (c - 1) + c * sigma**2)] * (c - 1) + [2 * d * c * sigma**2] * (d - c + 1))
    p = np.sqrt(sv2) / np.sqrt(sv2).sum() + RANKME_EPS
    closed = {
        "unit_norm": abs(r - 1), "zero_sum": 0.0, "equal_inner_product": 0.0, "within_class": sigma * math.sqrt(d),
        "nc1": sigma**2 * (c - 1) ** 2 / (c * r**2), "etf_distance": 0.0, "spectrum": [1.0] * (c - 1),
        "rankme": float(np.exp(-np.sum(p * np.log(p)))), "ncc_accuracy": 1.0,
    }
    # O(1) configuration: tolerance() with kappa = (max||z|| / s_min)^2 ~ 1 and N = 2 d C samples
    rtol = tolerance(z, y, c)
    for name, value in closed.items():
        assert_allclose(got[name], value, rtol=0, atol=rtol, err_msg=name)
    test_z = v + 0.3 * sigma  # each vertex shifted by the same small vector: still nearest its own mean
    assert streaming_ncc_accuracy(split(test_z, np.arange(c), 1), v) == 1.0


def test_moments_match_their_definitions():
    # the naive reference: loops over classes and samples written from docs/theory.md section 8
    z, y = random_features(90, 4, 3, seed=1)
    m = accumulate_moments(split(z, y, 8), num_classes=3, block_rows=5)
    mus = np.array([z[y == k].mean(axis=0) for k in range(3)])
    mu_g = mus.mean(axis=0)
    sw = sum(np.outer(z[i] - mus[y[i]], z[i] - mus[y[i]]) for i in range(len(y))) / len(y)
    sb = sum(np.outer(mu - mu_g, mu - mu_g) for mu in mus) / 3
    # O(1) data, N = 90: each entry is a sum of N products of O(1) numbers (N eps of the largest term)
    atol = 90 * 4 * EPS * float(np.max(np.abs(z))) ** 2
    assert_allclose(m.class_means(), mus, rtol=0, atol=atol)
    assert_allclose(m.global_mean(), mu_g, rtol=0, atol=atol)
    assert_allclose(m.within_covariance(), sw, rtol=0, atol=atol)
    assert_allclose(m.between_covariance(), sb, rtol=0, atol=atol)
    assert_allclose(m.second_moment(), z.T @ z / len(y), rtol=0, atol=atol)
    assert_allclose(m.mean_norm, np.linalg.norm(z, axis=1).mean(), rtol=0, atol=atol)
    assert m.counts.tolist() == np.bincount(y).tolist() and (m.num_samples, m.num_classes, m.dim) == (90, 3, 4)
    assert set(ONE_PASS_METRICS) | set(SECOND_PASS_METRICS) == set(METRIC_NAMES)
    assert not set(ONE_PASS_METRICS) & set(SECOND_PASS_METRICS)


# ------------------------------------------------------------------ 2. agreement with the in-memory metrics
@pytest.mark.parametrize("n, d, c", [(240, 6, 5), (150, 3, 7), (40, 60, 4)])  # d > C-1, d < C-1, N < d
@pytest.mark.parametrize("batch, block_rows", [(1, 1), (1, None), (7, 1), (7, None), (64, 3), (10_000, None)])
def test_agrees_with_in_memory_metrics(n, d, c, batch, block_rows):
    z, y = random_features(n, d, c, seed=n + d + c)
    got = streaming_nc_metrics(split(z, y, batch), num_classes=c, block_rows=block_rows)
    assert_metrics_close(got, nc_metrics(z, y, num_classes=c), tolerance(z, y, c))


def test_scale_growing_along_the_stream_and_extreme_scales():
    # the running power-of-two scale is raised four times (rescaling the state exactly); the values
    # must be those of the in-memory route on the same data, which uses the global scale at once
    z, y = random_features(200, 5, 4, seed=3)
    grow = np.repeat(2.0 ** np.arange(0, 40, 8), 40)[:, None]
    for factor in (1e-150, 1.0, 1e150):
        zz = z * grow * factor
        got = streaming_nc_metrics(split(zz, y, 16), num_classes=4)
        assert_metrics_close(got, nc_metrics(zz, y, num_classes=4), tolerance(z * grow, y, 4))


def test_undefined_cases_are_nan_as_in_memory():
    # all class means equal: nc1, etf_distance and the spectrum are undefined (NaN), not a verdict
    z, y = np.ones((12, 3)), np.arange(12) % 3
    got, ref = streaming_nc_metrics(split(z, y, 5), num_classes=3), nc_metrics(z, y, num_classes=3)
    assert math.isnan(got.nc1) and math.isnan(got.etf_distance) and all(math.isnan(v) for v in got.spectrum)
    assert_metrics_close(got, ref, 64 * EPS)


def test_torch_inputs_and_an_encoder_over_a_dataloader():
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(300, 8, generator=gen, dtype=torch.float64)
    y = torch.randint(0, 4, (300,), generator=gen)
    x_test, y_test = torch.randn(100, 8, generator=gen, dtype=torch.float64), torch.randint(0, 4, (100,), generator=gen)
    encoder = torch.nn.Linear(8, 5, dtype=torch.float64)
    grad_seen = []

    def encode(batch):
        grad_seen.append(torch.is_grad_enabled())
        return encoder(batch)

    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=32)
    test_loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x_test, y_test), batch_size=32)
    got = streaming_nc_metrics(encoded_batches(encode, loader), num_classes=4)
    assert grad_seen and not any(grad_seen)  # no autograd graph is kept
    with torch.no_grad():
        z, z_test = encoder(x).numpy(), encoder(x_test).numpy()
    yy = y.numpy()
    assert_metrics_close(got, nc_metrics(z, yy, num_classes=4), tolerance(z, yy, 4))
    moments = accumulate_moments(encoded_batches(encode, loader), num_classes=4)
    assert streaming_nc_metrics(encoded_batches(encode, loader), num_classes=4, moments=moments) == got
    test_acc = streaming_ncc_accuracy(encoded_batches(encode, test_loader), moments.class_means())
    assert test_acc == ncc_accuracy(z_test, y_test.numpy(), class_means=class_means(z, yy, num_classes=4))
    # float32 tensors fed directly: converted to float64 as the in-memory metrics do
    z32 = torch.from_numpy(z).float()
    got32 = streaming_nc_metrics(split(z32, y, 50), num_classes=4)
    assert_metrics_close(got32, nc_metrics(z32, yy, num_classes=4), tolerance(z, yy, 4))


def test_test_set_ncc_accuracy_equals_the_in_memory_one():
    z, y = random_features(500, 6, 5, seed=7)
    z_test, y_test = random_features(300, 6, 5, seed=8)
    moments = accumulate_moments(split(z, y, 32), num_classes=5)
    for batch in (1, 17, 300):
        got = streaming_ncc_accuracy(split(z_test, y_test, batch), moments.class_means())
        ref = ncc_accuracy(z_test, y_test, class_means=class_means(z, y, num_classes=5))
        assert got == ref
    assert 0.0 < ref < 1.0  # the data have errors to count: the comparison is not vacuous


# ------------------------------------------------------------------ 3. hypothesis properties
@given(noisy_collapsed_embeddings(max_classes=5, max_per_class=8, max_sigma=1.0), st.integers(0, 2**32 - 1),
       st.integers(1, 9), st.integers(1, 9))
def test_sample_permutation_and_batch_order_invariance(data, seed, batch_a, batch_b):
    z, y, c = data.z, data.labels, data.num_classes
    ref = streaming_nc_metrics(split(z, y, batch_a), num_classes=c, block_rows=batch_a)
    perm = np.random.default_rng(seed).permutation(len(y))
    permuted = split(z[perm], y[perm], batch_b)[::-1]  # another sample order, another split, batches reversed
    got = streaming_nc_metrics(permuted, num_classes=c, block_rows=batch_b)
    assert_metrics_close(got, ref, tolerance(z, y, c))


# ------------------------------------------------------------------ 4. bounded state and bad input
def test_state_size_does_not_grow_with_the_number_of_batches():
    c, d, b = 10, 7, 256
    rng = np.random.default_rng(0)
    sizes = []
    for batches in (10, 1000):
        acc = MomentAccumulator(c, block_rows=b)
        for _ in range(batches):
            acc.update(rng.standard_normal((b, d)), rng.integers(0, c, b))
        sizes.append(acc.nbytes)
        moments = acc.moments()
        assert moments.num_samples == batches * b
    # counts [C] int64, means [C, d], factor [d, d] float64, nothing pending
    assert sizes == [8 * (c + c * d + d * d)] * 2
    acc = MomentAccumulator(c, block_rows=b)
    for _ in range(300):  # small batches: the pending rows stay below block_rows + one batch
        acc.update(rng.standard_normal((3, d)), rng.integers(0, c, 3))
        assert acc.nbytes < 8 * (c + c * d + d * d) + 16 * (b + 3) * (d + 1)


def _bad(value) -> Any:
    """A deliberately ill-typed argument (typed Any for the type checker)."""
    return value


def _one_shot():
    yield np.eye(2), [0, 1]


@pytest.mark.parametrize("call, name", [
    (lambda: accumulate_moments([(np.ones((5, 3)), np.zeros(4, int))], num_classes=2), "labels"),
    (lambda: accumulate_moments([(np.ones((2, 3)), [0, 1]), (np.ones((2, 4)), [0, 1])], num_classes=2), "z"),
    (lambda: accumulate_moments([(np.ones((2, 3)), [0, 2])], num_classes=2), "labels"),
    (lambda: accumulate_moments([(np.ones((2, 3)), [0, -1])], num_classes=2), "labels"),
    (lambda: accumulate_moments([(np.ones((2, 3)), ["a", "b"])], num_classes=2), "labels"),
    (lambda: accumulate_moments([(np.zeros((0, 3)), np.zeros(0, int))], num_classes=2), "z"),
    (lambda: accumulate_moments([(np.ones(3), [0])], num_classes=2), "z"),
    (lambda: accumulate_moments([(np.array([[np.nan, 1.0]]), [0])], num_classes=2), "z"),
    (lambda: accumulate_moments([], num_classes=2), "batches"),
    (lambda: accumulate_moments([(np.ones((2, 3)), [0, 0])], num_classes=2), "labels"),
    (lambda: accumulate_moments(_bad([np.ones((2, 3))]), num_classes=2), "batches"),
    (lambda: accumulate_moments(_bad(5), num_classes=2), "batches"),
    (lambda: accumulate_moments([(np.eye(2), [0, 1])], num_classes=1), "num_classes"),
    (lambda: accumulate_moments([(np.eye(2), [0, 1])], num_classes=2, block_rows=0), "block_rows"),
    (lambda: streaming_nc_metrics(_one_shot(), num_classes=2), "batches"),
    (lambda: streaming_ncc_accuracy([(np.eye(2), [0, 1])], np.ones((1, 2))), "class_means"),
    (lambda: streaming_ncc_accuracy([(np.eye(3), [0, 1, 1])], np.eye(2)), "z"),
    (lambda: streaming_ncc_accuracy([(np.eye(2), [0, 2])], np.eye(2)), "labels"),
    (lambda: streaming_ncc_accuracy([], np.eye(2)), "batches"),
    (lambda: ResidualAccumulator(_bad("not moments")), "moments"),
    (lambda: streaming_nc_metrics([(np.eye(2), [0, 1])], num_classes=3,
                                  moments=accumulate_moments([(np.eye(2), [0, 1])], num_classes=2)), "moments"),
    (lambda: encoded_batches(lambda x: x, iter([(np.eye(2), [0, 1])])), "loader"),
    (lambda: encoded_batches(_bad(None), []), "encode"),
])
def test_bad_input_raises_value_error_naming_the_argument(call, name):
    with pytest.raises(ValueError, match=rf"^{name}\b"):
        call()


def test_second_pass_over_different_data_is_refused():
    z, y = random_features(30, 3, 3, seed=2)
    moments = accumulate_moments(split(z, y, 10), num_classes=3)
    second = ResidualAccumulator(moments)
    second.update(z[:20], y[:20])  # a truncated second pass
    with pytest.raises(ValueError, match=r"^batches: the second pass"):
        second.within_class()
    assert isinstance(moments, FeatureMoments) and not moments.means.flags.writeable
    acc = NCCAccumulator(moments.class_means())
    acc.update(z, y)
    assert acc.accuracy() == ncc_accuracy(z, y, num_classes=3)
