"""Tests of ncgeom.metrics (docs/theory.md section 8), in order of trust:

1. exact configurations computed by hand (NC in d = C-1 and rotated in larger d; C = 2 antipodal; a
   3-class example worked out on paper below) and a naive loop reference of every formula;
2. agreement with independent statistics (noisy-ETF population NC1; np.cov spectrum; prescribed
   singular spectra for RankMe) and re-implemented peer formulas (Papyan's Colab, tding1,
   nc-toolbox), showing where and why they differ;
3. hypothesis properties: rotation, relabeling and row-permutation invariance; numpy vs torch.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import scipy.linalg
import torch
from hypothesis import given
from hypothesis import strategies as st
from numpy.testing import assert_allclose
from scipy.sparse.linalg import svds

import ncgeom.metrics as M
from ncgeom.atomic_io import dumps_json
from ncgeom.geometry import random_orthogonal, simplex_etf

EPS = np.finfo(np.float64).eps
# Exact configurations: every metric is a short sum of O(1) float64 terms over C <= 12 classes and a
# few samples; 1e4 eps leaves room for the SVDs' backward error (a few eps times the norm).
EXACT_ATOL = 1e4 * EPS
# Two float64 evaluations of the same formula by different routes (loop vs vectorised, SVD vs pinv).
ROUTE_RTOL = 1e-9

# every metric takes (z, labels) and returns a float or an array (the spectrum)
ALL: list[Callable[..., Any]] = [M.unit_norm, M.zero_sum, M.equal_inner_product, M.within_class, M.nc1, M.etf_distance,
       M.spectrum, M.rankme, M.ncc_accuracy]


# ------------------------------------------------------------------ helpers and the naive reference
def nc_data(counts, dim, *, rng, radius=1.0, noise=0.0):
    """Samples around a radius-r simplex ETF (rotated in R^dim), counts[c] samples of class c."""
    c = len(counts)
    v = radius * simplex_etf(c, dim, rng=rng)
    y = np.repeat(np.arange(c), counts)
    return v[y] + noise * rng.standard_normal((y.size, dim)), y


def naive(z, y):
    """Loop implementation of docs/theory.md section 8, written from the formulas, not from the package."""
    z, y = np.asarray(z, float), np.asarray(y)
    classes = sorted(set(y.tolist()))
    c, (n, d) = len(classes), z.shape
    mus = [sum(z[i] for i in range(n) if y[i] == k) / sum(1 for i in range(n) if y[i] == k) for k in classes]
    mu_g = sum(mus) / c
    cos = lambda a, b: a @ b / (np.linalg.norm(a) * np.linalg.norm(b))  # noqa: E731
    out = {
        "unit_norm": sum(abs(np.linalg.norm(m) - 1) for m in mus) / c,
        "zero_sum": np.linalg.norm(mu_g),
        "equal_inner_product": sum(abs(cos(mus[a], mus[b]) + 1 / (c - 1))
                                   for a in range(c) for b in range(c) if a != b) / (c * (c - 1)),
        "within_class": sum(np.mean([np.linalg.norm(z[i] - mus[j]) for i in range(n) if y[i] == k])
                            for j, k in enumerate(classes)) / c,
    }
    sw = sum(np.outer(z[i] - mus[classes.index(y[i])], z[i] - mus[classes.index(y[i])]) for i in range(n)) / n
    sb = sum(np.outer(m - mu_g, m - mu_g) for m in mus) / c
    out["nc1"] = np.trace(sw @ scipy.linalg.pinv(sb)) / c
    g = np.array([[(a - mu_g) @ (b - mu_g) for b in mus] for a in mus])
    out["etf_distance"] = np.linalg.norm(g / np.linalg.norm(g) - (np.eye(c) - 1 / c) / np.sqrt(c - 1))
    eig = np.sort(np.linalg.eigvalsh(np.atleast_2d(np.cov(np.array(mus).T))))[::-1][: min(d, c - 1)]
    out["spectrum"] = eig / eig[0]
    s = np.linalg.svd(z, compute_uv=False)
    p = s / s.sum() + 1e-7
    out["rankme"] = math.exp(-sum(p * np.log(p)))
    pred = [classes[int(np.argmax([z[i] @ m for m in mus]))] for i in range(n)]
    out["ncc_accuracy"] = float(np.mean([pred[i] == y[i] for i in range(n)]))
    return out


def assert_metrics_close(a: dict, b: dict, *, rtol=ROUTE_RTOL, atol=EXACT_ATOL):
    assert set(a) == set(b) == set(M.METRIC_NAMES)
    for key in M.METRIC_NAMES:
        assert_allclose(a[key], b[key], rtol=rtol, atol=atol, err_msg=key)


@st.composite
def labelled_embeddings(draw, max_classes=6, max_dim=6):
    """(z, labels): C in [2, max_classes] classes with 1..5 samples each, Gaussian class means."""
    seed = draw(st.integers(0, 2**32 - 1))
    c = draw(st.integers(2, max_classes))
    d = draw(st.integers(1, max_dim))
    counts = draw(st.lists(st.integers(1, 5), min_size=c, max_size=c))
    rng = np.random.default_rng(seed)
    y = np.repeat(np.arange(c), counts)
    z = 2.0 * rng.standard_normal((c, d))[y] + rng.standard_normal((y.size, d))
    return z, y


def test_docstring_examples():
    import doctest

    from ncgeom.metrics import collapse, groups, ncc, record, spectral

    for module in (collapse, groups, ncc, record, spectral):
        result = doctest.testmod(module, raise_on_error=False)
        assert result.failed == 0 and result.attempted > 0, module.__name__


def test_all_is_complete_and_unique():
    assert len(M.__all__) == len(set(M.__all__))
    for name in M.__all__:
        assert hasattr(M, name), name
    assert M.METRIC_NAMES == ("unit_norm", "zero_sum", "equal_inner_product", "within_class", "nc1",
                              "etf_distance", "spectrum", "rankme", "ncc_accuracy")


# ------------------------------------------------------------------ 1. exact configurations
@pytest.mark.parametrize("num_classes", [2, 3, 5, 10])
@pytest.mark.parametrize("extra_dim", [0, 4])
@pytest.mark.parametrize("counts_kind", ["balanced", "imbalanced"])
def test_exact_nc_all_conditions_zero_and_flat_spectrum(num_classes, extra_dim, counts_kind):
    rng = np.random.default_rng(num_classes * 10 + extra_dim)
    dim = num_classes - 1 + extra_dim
    counts = [3] * num_classes if counts_kind == "balanced" else list(rng.integers(1, 6, num_classes))
    y = np.repeat(np.arange(num_classes), counts)
    z = simplex_etf(num_classes, dim, rng=rng if extra_dim else None)[y]  # canonical in d = C-1, rotated above
    m = M.nc_metrics(z, y)
    for key in ("unit_norm", "zero_sum", "equal_inner_product", "within_class", "nc1", "etf_distance"):
        assert_allclose(getattr(m, key), 0.0, atol=EXACT_ATOL, err_msg=key)
    assert_allclose(m.spectrum, np.ones(num_classes - 1), atol=EXACT_ATOL)
    assert m.ncc_accuracy == 1.0
    if counts_kind == "balanced":  # Z^T Z = 3 V^T V: C-1 equal singular values, d-C+1 zeros
        p = np.r_[np.full(num_classes - 1, 1 / (num_classes - 1)), np.zeros(extra_dim)] + M.RANKME_EPS
        assert_allclose(m.rankme, math.exp(-np.sum(p * np.log(p))), rtol=1e-9)


def test_c2_antipodal_by_hand():
    z, y = [[1.0], [-1.0]], [0, 1]
    m = M.nc_metrics(z, y)
    assert (m.unit_norm, m.zero_sum, m.equal_inner_product, m.within_class) == (0.0, 0.0, 0.0, 0.0)
    assert_allclose([m.nc1, m.etf_distance], [0.0, 0.0], atol=EXACT_ATOL)
    assert m.spectrum == (1.0,) and m.ncc_accuracy == 1.0
    # one singular value sqrt(2): p = (1 + eps_rankme,) -> exp(-(1 + e) log(1 + e))
    e = M.RANKME_EPS
    assert_allclose(m.rankme, math.exp(-(1 + e) * math.log1p(e)), rtol=1e-12)


def test_three_class_example_by_hand():
    # class means mu_0 = (1, 0), mu_1 = (-1, 0), mu_2 = (0, 2); each class: mean +/- a deviation.
    z = [[1, 1], [1, -1], [-1, 1], [-1, -1], [2, 2], [-2, 2]]
    y = [0, 0, 1, 1, 2, 2]
    m = M.nc_metrics(np.array(z, float), y)
    assert_allclose(m.unit_norm, (0 + 0 + 1) / 3, rtol=1e-14)
    assert_allclose(m.zero_sum, 2 / 3, rtol=1e-14)  # mu_G = (0, 2/3)
    # cosines -1, 0, 0: |-1 + 1/2| = |0 + 1/2| = 1/2
    assert_allclose(m.equal_inner_product, 1 / 2, rtol=1e-14)
    assert_allclose(m.within_class, (1 + 1 + 2) / 3, rtol=1e-14)
    # Sigma_W = diag(8, 4)/6, Sigma_B = diag(2/3, 8/9) -> tr = 4/3 * 3/2 + 2/3 * 9/8 = 11/4; / C
    assert_allclose(m.nc1, 11 / 12, rtol=1e-13)
    # centred means (1, -2/3), (-1, -2/3), (0, 4/3): Gram / ||Gram||_F = [[13,-5,-8],[-5,13,-8],[-8,-8,16]]/30
    g = np.array([[13, -5, -8], [-5, 13, -8], [-8, -8, 16]]) / 30
    target = np.array([[2, -1, -1], [-1, 2, -1], [-1, -1, 2]]) / (3 * np.sqrt(2))
    assert_allclose(m.etf_distance, np.sqrt(np.sum((g - target) ** 2)), rtol=1e-13)
    # np.cov of the means = diag(1, 4/3) -> (1, 3/4)
    assert_allclose(m.spectrum, [1.0, 0.75], rtol=1e-13)
    # Z^T Z = 12 I: two equal singular values
    p = 0.5 + M.RANKME_EPS
    assert_allclose(m.rankme, math.exp(-2 * p * math.log(p)), rtol=1e-13)
    # <z, mu>: (1,1) -> 2 wins (wrong), (1,-1) -> 0, (-1,1) -> 2 (wrong), (-1,-1) -> 1, (+-2, 2) -> 2
    assert m.ncc_accuracy == pytest.approx(4 / 6, abs=0)


@given(labelled_embeddings())
def test_matches_naive_loop_reference(data):
    z, y = data
    got = M.nc_metrics(z, y).to_dict()
    ref = naive(z, y)
    # nc1 is a sum of ratios v^T Sigma_W v / lambda: cond(Sigma_B) amplifies the route difference
    nc1_ref = ref.pop("nc1")
    assert_allclose(got.pop("nc1"), nc1_ref, rtol=1e-7)
    for key, value in ref.items():
        assert_allclose(got[key], value, rtol=ROUTE_RTOL, atol=1e-12, err_msg=key)


# ------------------------------------------------------------------ 2. statistics and peers
def test_nc1_noisy_etf_matches_population_value():
    # peers.md section 6: K = 5, r = 2, sigma = 0.3 -> sigma^2 (K-1)^2 / (K r^2) = 0.0720.
    c, r, sigma, dim, per_class = 5, 2.0, 0.3, 8, 4000
    z, y = nc_data([per_class] * c, dim, rng=np.random.default_rng(7), radius=r, noise=sigma)
    expected = sigma**2 * (c - 1) ** 2 / (c * r**2)
    assert_allclose(expected, 0.072, rtol=1e-12)
    # nc1 is an average over N samples of the squared noise projected on the C-1 mean directions: a
    # scaled chi^2 with N (C-1) degrees of freedom, relative sd sqrt(2 / (N (C-1))) = 0.005 here
    # (the class-mean estimation error adds O(1/N)). 4 standard deviations:
    n = per_class * c
    assert_allclose(M.nc1(z, y), expected, rtol=4 * math.sqrt(2 / (n * (c - 1))))


@pytest.mark.parametrize("counts", [[20, 20, 20, 20], [40, 3, 9, 17]])
def test_papyan_colab_nc1_is_c_times_ours(counts):
    # Papyan/Han/Donoho Colab: Tr(Sw Sb^+) with Sb^+ from svds(Sb, k=C-1); mu_G = mean of class means.
    rng = np.random.default_rng(1)
    c, d = len(counts), 7  # svds needs k = C-1 < d
    z, y = nc_data(counts, d, rng=rng, radius=1.5, noise=0.4)
    mus = np.array([z[y == k].mean(0) for k in range(c)])
    sw = sum(np.outer(zi - mus[yi], zi - mus[yi]) for zi, yi in zip(z, y)) / len(y)
    centred = mus - mus.mean(0)
    sb = centred.T @ centred / c
    u, s, _ = svds(sb, k=c - 1)
    colab = np.trace(sw @ (u @ np.diag(1 / s) @ u.T))
    assert_allclose(colab, c * M.nc1(z, y), rtol=1e-8)  # ARPACK converges to ~machine precision


def tding1_nc1(z, y):
    """tding1/Neural-Collapse validate_NC.py: sample-weighted mu_G, scipy pinv, /K."""
    c = int(y.max()) + 1
    mus = np.array([z[y == k].mean(0) for k in range(c)])
    mu_g = z.mean(0)  # weighted by class sizes
    sw = (z - mus[y]).T @ (z - mus[y]) / len(y)
    sb = (mus - mu_g).T @ (mus - mu_g) / c
    return np.trace(sw @ scipy.linalg.pinv(sb)) / c


def test_tding1_sample_weighted_mean_differs_only_under_imbalance():
    rng = np.random.default_rng(2)
    balanced = nc_data([30, 30, 30], 4, rng=rng, radius=1.0, noise=0.5)
    assert_allclose(tding1_nc1(*balanced), M.nc1(*balanced), rtol=1e-9)
    z, y = nc_data([200, 5, 5], 4, rng=rng, radius=1.0, noise=0.5)
    ours, theirs = M.nc1(z, y), tding1_nc1(z, y)
    # The weighted mu_G sits near the big class: Sigma_B and hence NC1 change by far more than noise.
    assert abs(theirs - ours) / ours > 0.2, (ours, theirs)


def nc_toolbox_signed_equiangularity(mus):
    """felixsh/nc-toolbox nc2_equiangularity(reduction='mean'): signed mean over i<j of cos + 1/(C-1)."""
    c = len(mus)
    centred = mus - mus.mean(0)
    unit = centred / np.linalg.norm(centred, axis=1, keepdims=True)
    i, j = np.triu_indices(c, 1)
    return float(np.mean(np.sum(unit[i] * unit[j], axis=1) + 1 / (c - 1)))


def papyan_equiangularity(mus):
    """Papyan et al. (PNAS Fig. 4): mean over c != c' of |cos + 1/(C-1)| of the centred means."""
    c = len(mus)
    centred = mus - mus.mean(0)
    unit = centred / np.linalg.norm(centred, axis=1, keepdims=True)
    cos = unit @ unit.T
    return float(np.mean(np.abs(cos[~np.eye(c, dtype=bool)] + 1 / (c - 1))))


def test_nc_toolbox_signed_equiangularity_is_blind_on_a_square():
    # C = 4 vertices of a square: equal norms, sum 0, cosines 0 (4 pairs) and -1 (2 pairs); not an ETF.
    mus = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0], [0.0, -1.0]])
    assert_allclose(nc_toolbox_signed_equiangularity(mus), 0.0, atol=EXACT_ATOL)
    ours = M.equal_inner_product(mus, np.arange(4))
    assert_allclose(ours, (8 * (1 / 3) + 4 * (2 / 3)) / 12, rtol=1e-14)  # = 4/9 by hand
    assert_allclose(ours, papyan_equiangularity(mus), rtol=1e-14)


@given(st.integers(0, 2**32 - 1), st.integers(2, 5), st.integers(2, 6))
def test_nc_toolbox_signed_equiangularity_is_zero_for_any_equinorm_centred_set(seed, pairs, dim):
    # +-u_1, ..., +-u_m with unit u_j: equal norms and sum 0, never an ETF for C = 2m >= 4.
    u = np.random.default_rng(seed).standard_normal((pairs, dim))
    u /= np.linalg.norm(u, axis=1, keepdims=True)
    mus = np.concatenate([u, -u])
    labels = np.arange(2 * pairs)
    assert_allclose(nc_toolbox_signed_equiangularity(mus), 0.0, atol=EXACT_ATOL)
    ours = M.equal_inner_product(mus, labels)
    # each +-pair has cosine -1, i.e. |-1 + 1/(C-1)| = (C-2)/(C-1), on 2m = C of the C(C-1) ordered pairs
    c = 2 * pairs
    assert ours >= c * ((c - 2) / (c - 1)) / (c * (c - 1)) - EXACT_ATOL > 0
    assert_allclose(ours, papyan_equiangularity(mus), rtol=1e-12)


def test_spectrum_is_np_cov_convention_including_d_below_c_minus_1():
    rng = np.random.default_rng(3)
    for c, d in [(6, 3), (4, 9), (5, 4)]:
        z, y = rng.standard_normal((4 * c, d)), np.repeat(np.arange(c), 4)
        mus = M.class_means(z, y)
        eig = np.sort(np.linalg.eigvalsh(np.cov(mus.T)))[::-1]
        spec = M.spectrum(z, y)
        assert spec.shape == (min(d, c - 1),)
        assert_allclose(spec, (eig / eig[0])[: min(d, c - 1)], atol=1e-12)
        if d > c - 1:  # the omitted eigenvalues are zero by construction
            assert_allclose(eig[c - 1:] / eig[0], 0.0, atol=1e-12)


def test_spectrum_resolves_a_dimensional_collapse_tail():
    rng = np.random.default_rng(4)
    mus = np.diag([1.0, 1.0, 1e-5]) @ random_orthogonal(3, rng=rng)  # C = 4 with one means-direction ~1e-5
    mus = np.vstack([mus, -mus.sum(0)])
    spec = M.spectrum(mus, np.arange(4))
    assert spec[0] == 1.0 and spec[-1] < 1e-8  # (1e-5)^2 relative: ten orders of magnitude down
    eig = np.linalg.eigvalsh(np.cov(mus.T))  # ascending; absolute error ~ eps, so ~1e-6 relative here
    assert_allclose(spec[-1], eig[0] / eig[-1], rtol=1e-4)


@pytest.mark.parametrize("n, d", [(40, 10), (5, 12)])
def test_rankme_on_prescribed_singular_spectra(n, d):
    rng = np.random.default_rng(5)
    k = min(n, d)
    u = np.linalg.qr(rng.standard_normal((n, k)))[0]
    v = np.linalg.qr(rng.standard_normal((d, k)))[0]
    labels = np.arange(n) % 2

    def expected(sigma):  # the formula with the exact spectrum (zeros included)
        p = np.asarray(sigma) / np.sum(sigma) + 1e-7
        return math.exp(-np.sum(p * np.log(p)))

    equal = np.full(k, 3.0)
    assert_allclose(M.rankme(u @ np.diag(equal) @ v.T, labels), expected(equal), rtol=1e-10)
    assert abs(expected(equal) - k) < 1e-4  # ~ min(N, d)
    one = np.r_[3.0, np.zeros(k - 1)]
    assert_allclose(M.rankme(u @ np.diag(one) @ v.T), expected(one), rtol=1e-10)
    assert abs(expected(one) - 1) < 1e-4  # ~ 1
    assert M.rankme(np.ones((3, 2))) == pytest.approx(expected([np.sqrt(6), 0.0]), rel=1e-10)


def test_rankme_does_not_centre():
    z = np.array([[1.0, 0.0], [-1.0, 0.0]])
    assert M.rankme(z) < 1.001  # rank one
    assert M.rankme(z + [0.0, 5.0]) > 1.5  # the offset is a second direction (centring would remove it)


# ------------------------------------------------------------------ 3. properties
def _all_metrics(z, y):
    return M.nc_metrics(z, y).to_dict()


# Different summation order only: rounding at a few eps; nc1 amplified by cond(Sigma_B).
def _assert_same(a, b):
    for key in M.METRIC_NAMES:
        rtol = 1e-7 if key == "nc1" else ROUTE_RTOL
        assert_allclose(a[key], b[key], rtol=rtol, atol=1e-12, err_msg=key)


@given(labelled_embeddings(), st.integers(0, 2**32 - 1))
def test_rotation_invariance(data, seed):
    z, y = data
    q = random_orthogonal(z.shape[1], rng=np.random.default_rng(seed))
    _assert_same(_all_metrics(z @ q, y), _all_metrics(z, y))


@given(labelled_embeddings(), st.integers(0, 2**32 - 1))
def test_relabeling_invariance(data, seed):
    z, y = data
    rng = np.random.default_rng(seed)
    new = rng.choice(np.arange(-50, 50), size=y.max() + 1, replace=False)  # injective, any integers
    _assert_same(_all_metrics(z, new[y]), _all_metrics(z, y))


@given(labelled_embeddings(), st.integers(0, 2**32 - 1))
def test_row_permutation_invariance(data, seed):
    z, y = data
    perm = np.random.default_rng(seed).permutation(len(y))
    _assert_same(_all_metrics(z[perm], y[perm]), _all_metrics(z, y))


@given(labelled_embeddings())
def test_numpy_and_torch_inputs_agree(data):
    z, y = data
    ref = _all_metrics(z, y)
    t = torch.tensor(z, dtype=torch.float64, requires_grad=True)
    assert _all_metrics(t, torch.tensor(y)) == ref  # same float64 numbers -> identical results
    z32 = z.astype(np.float32)
    assert _all_metrics(torch.from_numpy(z32), torch.tensor(y)) == _all_metrics(z32, y)


def test_each_function_equals_the_record_and_to_dict_is_json():
    rng = np.random.default_rng(6)
    z, y = nc_data([5, 7, 4], 5, rng=rng, noise=0.3)
    record = M.nc_metrics(z, y)
    d = record.to_dict()
    assert list(d) == list(M.METRIC_NAMES) and isinstance(d["spectrum"], list)
    for f in ALL:
        assert_allclose(f(z, y), getattr(record, f.__name__), rtol=0, atol=0, err_msg=f.__name__)
    assert json.loads(json.dumps(d)) == d
    with pytest.raises(AttributeError):
        record.nc1 = 0.0  # type: ignore[misc]  # assigning a frozen field on purpose: the error is under test


def test_record_round_trips_through_strict_json():
    # both class means are 0: nc1, etf_distance and the spectrum are NaN, written as null
    z, y = np.array([[1.0, 0.0], [-1.0, 0.0], [0.0, 1.0], [0.0, -1.0]]), np.array([0, 0, 1, 1])
    record = M.nc_metrics(z, y)
    assert math.isnan(record.nc1) and math.isnan(record.spectrum[0])
    text = dumps_json(record.to_dict())
    assert "NaN" not in text and "null" in text
    back = M.NCMetrics.from_dict(json.loads(text))
    for key in M.METRIC_NAMES:  # NaN == NaN under assert_array_equal
        np.testing.assert_array_equal(getattr(back, key), getattr(record, key), err_msg=key)
    with pytest.raises(ValueError, match="unknown key"):
        M.NCMetrics.from_dict({**record.to_dict(), "nc_1": 0.0})
    with pytest.raises(ValueError, match="missing key"):
        M.NCMetrics.from_dict({k: v for k, v in record.to_dict().items() if k != "rankme"})


def test_ncc_with_train_means_on_test_data():
    rng = np.random.default_rng(8)
    z_tr, y_tr = nc_data([30, 30, 30], 4, rng=rng, noise=0.6)
    z_te, y_te = nc_data([10, 10, 10], 4, rng=np.random.default_rng(9), noise=0.6)
    mus = M.class_means(z_tr, y_tr)
    loop = np.mean([int(np.argmax([z_te[i] @ m for m in mus])) == y_te[i] for i in range(len(y_te))])
    assert M.ncc_accuracy(z_te, y_te, class_means=mus) == loop
    # non-contiguous train labels: pass their sorted unique values as class_labels
    ids = np.array([10, 20, 30])
    got = M.ncc_accuracy(z_te, ids[y_te], class_means=M.class_means(z_tr, ids[y_tr]), class_labels=np.unique(ids))
    assert got == loop
    # a test batch with a single class is fine with given means; a torch input too
    one = y_te == 1
    assert M.ncc_accuracy(torch.from_numpy(z_te[one]), y_te[one], class_means=torch.from_numpy(mus)) == \
        np.mean([int(np.argmax(z_te[i] @ mus.T)) == 1 for i in np.flatnonzero(one)])


def test_undefined_cases_give_nan_not_a_verdict():
    same_means = np.array([[1.0, 0.0], [1.0, 0.0], [1.0, 0.0], [1.0, 0.0]])
    m = M.nc_metrics(same_means, [0, 0, 1, 1])
    assert math.isnan(m.nc1) and math.isnan(m.etf_distance) and all(map(math.isnan, m.spectrum))
    assert m.unit_norm == 0.0 and m.zero_sum == 1.0 and m.equal_inner_product == 2.0  # |cos + 1/(C-1)| = |1 + 1|
    zero_mean = np.array([[1.0, 0.0], [-1.0, 0.0], [0.0, 1.0]])
    assert math.isnan(M.equal_inner_product(zero_mean, [0, 0, 1]))
    assert math.isnan(M.rankme(np.zeros((3, 2))))


# ------------------------------------------------------------------ validation
Z = np.arange(8.0).reshape(4, 2)


@pytest.mark.parametrize(
    "z, labels, kwargs, message",
    [
        (np.arange(4.0), [0, 0, 1, 1], {}, "z must be a 2-D array"),
        (np.zeros((4, 2, 1)), [0, 0, 1, 1], {}, "z must be a 2-D array"),
        (np.zeros((0, 2)), [], {}, "z must be a 2-D array"),
        (Z, [[0, 0, 1, 1]], {}, "labels must be a 1-D array"),
        (Z, [0, 0, 1], {}, "labels has length 3 but z has 4 rows"),
        (np.where(Z == 3, np.nan, Z), [0, 0, 1, 1], {}, "z must contain only finite values"),
        (np.where(Z == 3, np.inf, Z), [0, 0, 1, 1], {}, "z must contain only finite values"),
        (Z, [2, 2, 2, 2], {}, "labels must contain at least 2 classes, got 1"),
        (Z, [0.0, 0.5, 1.0, 1.0], {}, "labels must hold integers"),
        (Z, [1e30, 2e30, 1e30, 2e30], {}, "labels must hold integers"),  # beyond 2^53: may have merged
        (np.array([["a", "b"]] * 4), [0, 0, 1, 1], {}, "z must be a numeric array"),
        (Z, [0, 0, 1, 1], {"num_classes": 3}, "class 2 has no sample"),
        (Z, [0, 0, 1, 3], {"num_classes": 3}, r"labels must lie in 0\.\.2"),
        (Z, [0, 0, 1, 1], {"num_classes": 1}, "num_classes must be an integer >= 2"),
    ],
)
def test_invalid_input_raises_value_error_naming_the_argument(z, labels, kwargs, message):
    with pytest.raises(ValueError, match=message):
        M.nc_metrics(z, labels, **kwargs)


@pytest.mark.parametrize("func", ALL + [M.nc_metrics, M.class_means], ids=lambda f: f.__name__)
def test_every_function_validates(func):
    with pytest.raises(ValueError, match="labels has length 3 but z has 4 rows"):
        func(Z, [0, 0, 1])
    with pytest.raises(ValueError, match="z must contain only finite values"):
        func(np.full((4, 2), np.nan), [0, 0, 1, 1])


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"class_means": np.zeros((2, 3))}, "class_means has dimension 3 but z has 2 columns"),
        ({"class_means": np.zeros((1, 2))}, "class_means must have at least 2 rows"),
        ({"class_means": np.full((2, 2), np.nan)}, "class_means must contain only finite values"),
        ({"class_labels": [0, 1]}, "class_labels is only meaningful together with class_means"),
        ({"class_means": np.eye(2), "class_labels": [0, 0]}, "class_labels must be distinct"),
        ({"class_means": np.eye(2), "class_labels": [0, 1, 2]}, "class_labels has length 3 but class_means has 2"),
        ({"class_means": np.eye(2), "class_labels": [5, 1]}, "label 0 is not among class_labels"),
    ],
)
def test_ncc_accuracy_validation(kwargs, message):
    with pytest.raises(ValueError, match=message):
        M.ncc_accuracy(Z, [0, 0, 1, 1], **kwargs)
