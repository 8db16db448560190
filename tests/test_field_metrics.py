"""Tests of the field's metrics (docs/theory.md section 8, "Field metrics"): CDNV, NC3, NC4, hyperspherical
uniformity, alignment and uniformity, and their record FieldMetrics. In order of trust:

1. hand-built configurations with values worked out on paper (C = 2 antipodal, exact noisy NC, the square)
   and a naive loop reference of every formula, written here from the definitions, not from the package;
2. the peers' conventions, re-implemented here from the formulas read in their source (peers.md section 6
   and the commits named there; none of their code is copied): rhubarbwu/neural-collapse (CDNV,
   self-duality error, NC4 agreement, log-kernel statistics), felixsh/nc-toolbox (CDNV with 1/(n_c - 1),
   nc3_self_duality, nc4_classifier_agreement, gnc2_hypershperical_uniformity), Papyan et al.'s Colab
   (squared NC3, NC4 mismatch), wang2020understanding's reference align_loss / uniform_loss (torch);
3. hypothesis properties: rotation invariance, label-permutation equivariance, scale behaviour, the sphere
   bound of uniformity; numpy vs torch inputs; the record equals the functions; degenerate inputs and
   ValueErrors naming the argument.
"""

from __future__ import annotations

import doctest
import json
import math

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from numpy.testing import assert_allclose

import ncgeom.metrics as M
from ncgeom.atomic_io import dumps_json
from ncgeom.geometry import random_orthogonal, simplex_etf
from ncgeom.metrics import classifier, field, hypersphere, variability

EPS = np.finfo(np.float64).eps
LOG2 = math.log(2.0)


# ------------------------------------------------------------------ data, tolerances, naive references
@st.composite
def labelled_embeddings(draw, max_classes=6, max_dim=6, min_per_class=1):
    """(z, labels, W, b): C in [2, max_classes] classes of 1..5 samples, Gaussian means, a random head."""
    seed = draw(st.integers(0, 2**32 - 1))
    c = draw(st.integers(2, max_classes))
    d = draw(st.integers(1, max_dim))
    counts = draw(st.lists(st.integers(min_per_class, 5), min_size=c, max_size=c))
    rng = np.random.default_rng(seed)
    y = np.repeat(np.arange(c), counts)
    z = 2.0 * rng.standard_normal((c, d))[y] + rng.standard_normal((y.size, d))
    return z, y, rng.standard_normal((c, d)), rng.standard_normal(c)


def route_rtol(z, y):
    """Relative tolerance between two float64 evaluations of one formula (a loop vs the vectorized code).

    Every metric here is a short sum (at most N^2 terms) of products of O(max ||z||) numbers: each route
    carries a relative error of order (N^2 + d) eps on those sums. The ratios then divide by the smallest
    of the quantities they normalize by (a squared distance of class means, a centred-mean norm, or the
    pairwise distance of two directions), so the error is amplified by kappa = (max ||z|| / that)^2.
    16 (N^2 + d) eps kappa: worst-case, yet orders of magnitude below any value a bug would produce.
    """
    z = np.asarray(z, dtype=float)
    mus = M.class_means(z, y)
    centred = mus - mus.mean(axis=0)
    i, j = np.triu_indices(len(mus), 1)
    unit = centred / np.linalg.norm(centred, axis=1, keepdims=True)
    unit_dist = np.linalg.norm(unit[i] - unit[j], axis=1)
    unit_dist = unit_dist[unit_dist > 0]  # two directions equal (d = 1): e = inf, compared as inf / NaN
    small = min(np.linalg.norm(mus[i] - mus[j], axis=1).min(), np.linalg.norm(centred, axis=1).min(),
                unit_dist.min(initial=2.0) * np.linalg.norm(centred, axis=1).min())
    kappa = max(1.0, float(np.max(np.abs(z)) * math.sqrt(z.shape[1]) / small) ** 2)
    return 16 * (len(y) ** 2 + z.shape[1]) * EPS * kappa


def naive_means(z, y):
    classes = sorted(set(np.asarray(y).tolist()))
    mus = [sum(z[i] for i in range(len(y)) if y[i] == k) / sum(1 for i in range(len(y)) if y[i] == k) for k in classes]
    return classes, np.array(mus)


def naive_cdnv_matrix(z, y, ddof=0):
    """V_cc' = (Var_c + Var_c') / (2 ||mu_c - mu_c'||^2), Var_c = sum ||z_i - mu_c||^2 / (n_c - ddof) (galanti2022role)."""
    z = np.asarray(z, float)
    classes, mus = naive_means(z, y)
    var = []
    for k, mu in zip(classes, mus):
        members = [i for i in range(len(y)) if y[i] == k]
        var.append(sum(float(np.sum((z[i] - mu) ** 2)) for i in members) / (len(members) - ddof))
    c = len(classes)
    out = np.full((c, c), np.nan)
    for a in range(c):
        for b in range(c):
            if a != b:
                out[a, b] = (var[a] + var[b]) / (2 * float(np.sum((mus[a] - mus[b]) ** 2)))
    return out


def naive_cdnv(z, y, ddof=0):
    grid = naive_cdnv_matrix(z, y, ddof)
    c = len(grid)
    return sum(grid[a, b] for a in range(c) for b in range(a + 1, c)) / (c * (c - 1) / 2)


def naive_self_duality(z, y, w):
    _, mus = naive_means(np.asarray(z, float), y)
    mu_g = sum(mus) / len(mus)
    centred = [m - mu_g for m in mus]
    nm = math.sqrt(sum(float(np.sum(m**2)) for m in centred))
    nw = math.sqrt(sum(float(np.sum(r**2)) for r in w))
    return math.sqrt(sum(float(np.sum((w[k] / nw - centred[k] / nm) ** 2)) for k in range(len(mus))))


def naive_agreement(z, w, b, mus):
    """Fraction of i with argmax_c (w_c . z_i + b_c) == argmin_c ||z_i - mu_c|| (Euclidean NCM)."""
    hits = 0
    for zi in z:
        clf = max(range(len(w)), key=lambda k: (float(w[k] @ zi + b[k]), -k))
        ncm = min(range(len(mus)), key=lambda k: (math.dist(zi, mus[k]), k))
        hits += clf == ncm
    return hits / len(z)


def naive_log_inverse_distances(z, y):
    _, mus = naive_means(np.asarray(z, float), y)
    mu_g = sum(mus) / len(mus)
    unit = [(m - mu_g) / np.linalg.norm(m - mu_g) for m in mus]
    dist = [math.dist(unit[a], unit[b]) for a in range(len(unit)) for b in range(a + 1, len(unit))]
    return [math.inf if r == 0 else -math.log(r) for r in dist]


def naive_hyperspherical(z, y, statistic):
    """Mean or population variance of the log inverse distances; a zero distance makes them inf and NaN."""
    e = naive_log_inverse_distances(z, y)
    mean = sum(e) / len(e)
    if statistic == "mean":
        return mean
    return math.nan if math.isinf(mean) else sum((v - mean) ** 2 for v in e) / len(e)


def naive_label_alignment(z, y, alpha):
    """Mean of ||z_i - z_j||^alpha over ordered pairs i != j with y_i = y_j (a double loop)."""
    vals = [math.dist(z[i], z[j]) ** alpha for i in range(len(y)) for j in range(len(y)) if i != j and y[i] == y[j]]
    return sum(vals) / len(vals)


def naive_uniformity(z, t):
    """log of the mean of exp(-t ||z_i - z_j||^2) over the pairs i < j (a double loop)."""
    vals = [math.exp(-t * math.dist(z[i], z[j]) ** 2) for i in range(len(z)) for j in range(i + 1, len(z))]
    return math.log(sum(vals) / len(vals))


def exact_noisy_nc(c, d, r=2.0, sigma=0.05, seed=0):
    """Each class at r v_c +- sigma sqrt(d) e_j (j = 1..d): class means exactly r v_c, Var_c = sigma^2 d exactly."""
    v = r * simplex_etf(c, d, rng=np.random.default_rng(seed))
    offsets = sigma * math.sqrt(d) * np.concatenate([np.eye(d), -np.eye(d)])
    return (v[:, None, :] + offsets[None]).reshape(-1, d), np.repeat(np.arange(c), 2 * d), v


def test_docstring_examples():
    for module in (variability, classifier, hypersphere, field):
        result = doctest.testmod(module, raise_on_error=False)
        assert result.failed == 0 and result.attempted > 0, module.__name__


# ------------------------------------------------------------------ 1. hand-built configurations
def test_c2_antipodal_by_hand():
    # classes at +-2 with spread 1: Var = 1 (1/n) or 2 (1/(n-1)), ||mu_0 - mu_1||^2 = 16
    z, y = np.array([[1.0], [3.0], [-1.0], [-3.0]]), np.array([0, 0, 1, 1])
    assert M.cdnv(z, y) == 2 / 32 and M.cdnv(z, y, ddof=1) == 4 / 32
    grid = M.cdnv_matrix(z, y)
    assert grid[0, 1] == grid[1, 0] == 1 / 16 and np.isnan(np.diag(grid)).all()
    # NC3 with W = a M~ (a > 0): 0; with W = -M~: 2; NC4: both rules pick the sign
    assert M.self_duality(z, y, classifier=[[4.0], [-4.0]]) == 0.0
    assert_allclose(M.self_duality(z, y, classifier=[[-1.0], [1.0]]), 2.0, rtol=4 * EPS)
    assert M.classifier_agreement(z, y, classifier=[[1.0], [-1.0]]) == 1.0
    assert M.classifier_agreement(z, y, classifier=[[-1.0], [1.0]]) == 0.0
    # C = 2: the centred means are antipodal whatever the data: variance 0, mean -log 2
    assert M.hyperspherical_uniformity(z, y) == 0.0
    assert M.hyperspherical_uniformity(z, y, statistic="mean") == -LOG2
    # same-class pairs: |1 - 3| = 2 twice each way -> mean 2^alpha
    assert M.alignment(z, y) == 4.0 and M.alignment(z, y, alpha=1.0) == 2.0
    # uniformity: pair distances^2 4, 16, 36, 4, 16, 4 (t = 1/4 keeps the terms O(1))
    d2 = [4, 16, 36, 4, 16, 4]
    assert_allclose(M.uniformity(z, t=0.25), math.log(sum(math.exp(-0.25 * v) for v in d2) / 6), rtol=8 * EPS)


@pytest.mark.parametrize("c, d", [(2, 1), (3, 2), (4, 4), (5, 7)])
def test_exact_noisy_nc_closed_values(c, d):
    # class means exactly r v_c (a radius-r ETF), each class 2d points at +-sigma sqrt(d) e_j: by hand,
    # Var_c = sigma^2 d, ||mu_c - mu_c'||^2 = 2 r^2 C/(C-1) -> cdnv = sigma^2 d (C-1) / (2 C r^2);
    # S_c = 2 d sigma^2 d, n_c = 2d -> label alignment 2 S_c / (n_c - 1) = 4 sigma^2 d^2 / (2d - 1);
    # the centred means are an ETF: variance 0 and mean -log(2C/(C-1))/2 of the log inverse distances.
    r, sigma = 2.0, 0.05
    z, y, v = exact_noisy_nc(c, d, r, sigma)
    rtol = 64 * (len(y) + d) * EPS  # sums of O(N) O(1) terms, no cancellation at this configuration
    assert_allclose(M.cdnv(z, y), sigma**2 * d * (c - 1) / (2 * c * r**2), rtol=rtol)
    assert_allclose(M.cdnv(z, y, ddof=1), sigma**2 * d * (c - 1) / (2 * c * r**2) * 2 * d / (2 * d - 1), rtol=rtol)
    assert_allclose(M.alignment(z, y), 4 * sigma**2 * d**2 / (2 * d - 1), rtol=rtol)
    assert_allclose(M.hyperspherical_uniformity(z, y), 0.0, atol=rtol)
    assert_allclose(M.hyperspherical_uniformity(z, y, statistic="mean"), -math.log(2 * c / (c - 1)) / 2, rtol=rtol)
    # a self-dual classifier (any positive multiple of the ETF means), no bias: NC3 = 0, NC4 = 1
    assert_allclose(M.self_duality(z, y, classifier=3.0 * v), 0.0, atol=rtol)
    assert M.classifier_agreement(z, y, classifier=3.0 * v) == 1.0
    # without noise every sample sits on its mean: CDNV and alignment are 0 up to the rounding of the mean of
    # n_c equal rows (a deviation of a few eps per entry, squared)
    assert_allclose([M.cdnv(v[y], y), M.alignment(v[y], y)], 0.0, atol=(16 * len(y) * EPS) ** 2)


def test_square_hyperspherical_uniformity_by_hand():
    # 4 unit vectors at 90 degrees: e = -log(2)/2 (4 adjacent pairs), -log 2 (2 diagonals);
    # mean -2 log(2)/3, variance (4 (log2/6)^2 + 2 (log2/3)^2) / 6 = (log 2)^2 / 18
    square = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0], [0.0, -1.0]])
    assert_allclose(M.hyperspherical_uniformity(square, np.arange(4)), LOG2**2 / 18, rtol=16 * EPS)
    assert_allclose(M.hyperspherical_uniformity(square, np.arange(4), statistic="mean"), -2 * LOG2 / 3, rtol=16 * EPS)


@pytest.mark.parametrize("n", [2, 3, 6])
def test_uniformity_of_the_simplex_attains_the_sphere_bound(n):
    # N unit vectors with sum 0 and equal distances ||z_i - z_j||^2 = 2N/(N-1): the bound -2tN/(N-1)
    for t in (0.5, 2.0):
        assert_allclose(M.uniformity(simplex_etf(n, n + 1, rng=np.random.default_rng(n)), t=t),
                        -2 * t * n / (n - 1), rtol=64 * EPS)


@given(st.integers(0, 2**32 - 1), st.integers(2, 12), st.integers(1, 6), st.floats(0.1, 4.0))
def test_uniformity_on_the_sphere_is_above_the_bound(seed, n, d, t):
    z = np.random.default_rng(seed).standard_normal((n, d))
    z /= np.linalg.norm(z, axis=1, keepdims=True)
    bound = -2 * t * n / (n - 1)
    assert M.uniformity(z, t=t) >= bound - 64 * EPS * abs(bound)


@given(labelled_embeddings())
def test_matches_naive_loop_reference(data):
    z, y, w, b = data
    rtol = route_rtol(z, y)
    for ddof in (0, 1):
        if ddof == 1 and np.bincount(y).min() < 2:
            assert math.isnan(M.cdnv(z, y, ddof=1))  # a one-sample class has no unbiased variance
            continue
        assert_allclose(M.cdnv(z, y, ddof=ddof), naive_cdnv(z, y, ddof), rtol=rtol, err_msg=f"ddof={ddof}")
        assert_allclose(M.cdnv_matrix(z, y, ddof=ddof), naive_cdnv_matrix(z, y, ddof), rtol=rtol)
    assert_allclose(M.self_duality(z, y, classifier=w), naive_self_duality(z, y, w), rtol=rtol, atol=rtol)
    assert M.classifier_agreement(z, y, classifier=w, bias=b) == naive_agreement(z, w, b, naive_means(z, y)[1])
    for statistic in ("variance", "mean"):
        assert_allclose(M.hyperspherical_uniformity(z, y, statistic=statistic), naive_hyperspherical(z, y, statistic),
                        rtol=rtol, atol=rtol, err_msg=statistic)
    if np.bincount(y).max() >= 2:
        for alpha in (2.0, 1.0, 0.5, 3.0):
            assert_allclose(M.alignment(z, y, alpha=alpha), naive_label_alignment(z, y, alpha), rtol=rtol,
                            err_msg=f"alpha={alpha}")
    else:
        assert math.isnan(M.alignment(z, y))
    for t in (0.1, 2.0):
        assert_allclose(M.uniformity(z, t=t), naive_uniformity(z, t), rtol=rtol, atol=rtol * t * np.max(z**2))


def test_label_alignment_is_the_class_moment_identity():
    # [derived] sum over ordered same-class pairs of ||z_i - z_j||^2 = 2 n_c S_c: per class the mean is
    # 2 n_c / (n_c - 1) (mean ||z||^2 - ||mu_c||^2); the alpha = 2 route uses it, alpha = 2 + 1e-9 the pairs
    rng = np.random.default_rng(11)
    z, y = rng.standard_normal((40, 3)) + 5.0, np.repeat([0, 1, 2], [5, 15, 20])
    per_class = []
    for k in range(3):
        zk = z[y == k]
        n = len(zk)
        identity = 2 * n / (n - 1) * (np.mean(np.sum(zk**2, axis=1)) - np.sum(zk.mean(axis=0) ** 2))
        assert_allclose(identity, naive_label_alignment(zk, np.zeros(n, int), 2.0), rtol=1e4 * EPS)
        per_class.append((n * (n - 1), identity))
    pooled = sum(p * v for p, v in per_class) / sum(p for p, _ in per_class)
    assert_allclose(M.alignment(z, y), pooled, rtol=1e3 * EPS)
    assert_allclose(M.alignment(z, y, alpha=2.0 + 1e-9), pooled, rtol=1e-7)  # the pair route


def test_explicit_positives_are_wang_isola_two_views():
    # two views z1, z2 of B instances: positives (i, i + B); alignment = mean ||z1_i - z2_i||^alpha
    rng = np.random.default_rng(12)
    z1, z2 = rng.standard_normal((7, 4)), rng.standard_normal((7, 4))
    z = np.concatenate([z1, z2])
    pos = (np.arange(7), np.arange(7) + 7)
    for alpha in (2.0, 1.0):
        loop = sum(math.dist(a, b) ** alpha for a, b in zip(z1, z2)) / 7
        assert_allclose(M.alignment(z, positives=pos, alpha=alpha), loop, rtol=64 * EPS)
    assert M.alignment(z, positives=(torch.arange(7), torch.arange(7) + 7)) == M.alignment(z, positives=pos)


# ------------------------------------------------------------------ 2. the peers' conventions
def rhubarbwu_cdnv(z, y, dist_exp=1.0):
    """rhubarbwu/neural-collapse: MeanAccumulator / VarNormAccumulator (totals / (n_c + eps)), then
    kernels.class_dist_norm_vars ((v_i + v_j) / 2 / ||mu_i - mu_j||^(2 dist_exp)) averaged by util.symm_reduce
    over the upper triangle (measure.variability_cdnv)."""
    k = int(y.max()) + 1
    ns = np.bincount(y, minlength=k).astype(float)
    means = np.stack([z[y == c].sum(axis=0) for c in range(k)]) / (ns + EPS)[:, None]
    v_norms = np.array([np.sum((z[y == c] - means[c]) ** 2) for c in range(k)]) / (ns + EPS)
    with np.errstate(divide="ignore", invalid="ignore"):  # the diagonal (0 / 0) is not reduced
        grid = ((v_norms[:, None] + v_norms[None, :]) / 2) / (np.sum((means[:, None] - means[None]) ** 2, axis=-1) ** dist_exp)
    i, j = np.triu_indices(k, 1)
    return float(np.sum(grid[i, j]) / (k * (k - 1) / 2))


def nc_toolbox_cdnv(z, y):
    """felixsh/nc-toolbox: statistic.class_embedding_variances (/ (Nc - 1)), metrics.nc1_cdnv(reduction='mean')."""
    k = int(y.max()) + 1
    mu_c = np.stack([z[y == c].mean(axis=0) for c in range(k)])
    var_c = np.array([np.square(z[y == c] - mu_c[c]).sum() / (np.sum(y == c) - 1) for c in range(k)])
    i, j = np.triu_indices(k, 1)
    return float(np.mean((var_c[i] + var_c[j]) / (2 * np.square(mu_c[i] - mu_c[j]).sum(axis=1))))


@given(labelled_embeddings(min_per_class=2))
def test_cdnv_is_rhubarbwu_with_ddof_0_and_nc_toolbox_with_ddof_1(data):
    z, y, _, _ = data
    rtol = route_rtol(z, y)
    assert_allclose(M.cdnv(z, y), rhubarbwu_cdnv(z, y), rtol=rtol)
    assert_allclose(M.cdnv(z, y, ddof=1), nc_toolbox_cdnv(z, y), rtol=rtol)


def test_cdnv_variance_conventions_differ_by_n_over_n_minus_1():
    # balanced classes of n samples: nc-toolbox's value is n/(n-1) times rhubarbwu's (and ours at ddof=0);
    # rhubarbwu's quartic variant (dist_exp = 2, linguistic-collapse issue #3) is another quantity
    rng = np.random.default_rng(13)
    n = 4
    y = np.repeat(np.arange(5), n)
    z = 3.0 * rng.standard_normal((5, 3))[y] + rng.standard_normal((20, 3))
    assert_allclose(nc_toolbox_cdnv(z, y), n / (n - 1) * rhubarbwu_cdnv(z, y), rtol=1e3 * EPS)
    assert abs(rhubarbwu_cdnv(z, y, dist_exp=2.0) - M.cdnv(z, y)) > 0.1 * M.cdnv(z, y)


def papyan_colab_nc3(mus, w):
    """Papyan/Han/Donoho Colab: ||W^T/||W||_F - M~/||M~||_F||_F^2, M~ [d, C] centred at the mean of the means."""
    centred = (mus - mus.mean(axis=0)).T
    return float(np.linalg.norm(w.T / np.linalg.norm(w) - centred / np.linalg.norm(centred)) ** 2)


def nc_toolbox_nc3(w, mu_c, mu_g):
    """felixsh/nc-toolbox metrics.nc3_self_duality(W, mu_c, mu_g): the same form, not squared, mu_g as passed."""
    centred = mu_c - mu_g
    return float(np.linalg.norm(w / np.linalg.norm(w) - centred / np.linalg.norm(centred)))


def rhubarbwu_self_duality_error(w, mus, m_g):
    """rhubarbwu/neural-collapse measure.self_duality_error -> structure_error(M - m_G, W): the ETF form of W M~^T."""
    k = len(mus)
    struct = w @ (mus - m_g).T
    struct = struct / np.linalg.norm(struct)
    return float(np.linalg.norm(struct - (np.eye(k) - np.ones((k, k)) / k) / math.sqrt(k - 1)))


@given(labelled_embeddings())
def test_self_duality_is_papyan_not_squared_and_nc_toolbox_with_our_mean(data):
    z, y, w, _ = data
    ours, mus = M.self_duality(z, y, classifier=w), M.class_means(z, y)
    rtol = route_rtol(z, y)
    assert_allclose(ours**2, papyan_colab_nc3(mus, w), rtol=rtol, atol=rtol)
    assert_allclose(ours, nc_toolbox_nc3(w, mus, mus.mean(axis=0)), rtol=rtol, atol=rtol)


def test_self_duality_nc_toolbox_sample_mean_and_rhubarbwu_etf_form():
    rng = np.random.default_rng(14)
    # nc-toolbox's README passes the sample mean as mu_g: equal to ours for balanced classes only
    y = np.repeat(np.arange(3), [30, 30, 30])
    z = 2.0 * rng.standard_normal((3, 4))[y] + rng.standard_normal((90, 4))
    w = rng.standard_normal((3, 4))
    assert_allclose(M.self_duality(z, y, classifier=w), nc_toolbox_nc3(w, M.class_means(z, y), z.mean(axis=0)),
                    rtol=1e3 * EPS)
    y = np.repeat(np.arange(3), [80, 5, 5])
    z = 2.0 * rng.standard_normal((3, 4))[y] + rng.standard_normal((90, 4))
    mus = M.class_means(z, y)
    assert abs(M.self_duality(z, y, classifier=w) - nc_toolbox_nc3(w, mus, z.mean(axis=0))) > 1e-3
    # rhubarbwu's self_duality_error compares W M~^T with the ETF: it is our etf_distance when W = a M~
    # (ours is then 0), and it is not ours in general
    centred = mus - mus.mean(axis=0)
    assert_allclose(rhubarbwu_self_duality_error(2.5 * centred, mus, mus.mean(axis=0)), M.etf_distance(z, y),
                    rtol=1e3 * EPS)
    assert_allclose(M.self_duality(z, y, classifier=2.5 * centred), 0.0, atol=1e3 * EPS)
    assert M.etf_distance(z, y) > 0.01


def rhubarbwu_agreement(z, w, means):
    """rhubarbwu/neural-collapse DecAccumulator.accumulate (manual NCC path: ||x||^2 + ||m||^2 - 2 x.m, argmin;
    linear argmax(X W^T), no bias), then compute(weighted=True): the sample-weighted rate of hits."""
    dots = z @ means.T
    dists = np.sum(z**2, axis=1)[:, None] + np.sum(means**2, axis=1)[None, :] - 2 * dots
    matches = (np.argmax(z @ w.T, axis=1) == np.argmin(dists, axis=1)).astype(int)
    return float(matches.sum() / (len(z) + EPS))


def nc_toolbox_agreement(h, w, b, mu_c):
    """felixsh/nc-toolbox metrics.nc4_classifier_agreement: util.lin_classify argmax(H W^T + b) vs util.ncc_classify
    argmin_c ||mu_c - h||, mean of the agreement."""
    lin = np.argmax(h @ w.T + b, axis=1)
    ncc = np.array([np.argmin(np.linalg.norm(mu_c - row, axis=1)) for row in h])
    return float(np.mean(lin == ncc))


@given(labelled_embeddings())
def test_classifier_agreement_is_rhubarbwu_without_bias_and_nc_toolbox_with_bias(data):
    z, y, w, b = data
    mus = M.class_means(z, y)
    assert_allclose(M.classifier_agreement(z, y, classifier=w), rhubarbwu_agreement(z, w, mus), rtol=4 * EPS)
    assert M.classifier_agreement(z, y, classifier=w, bias=b) == nc_toolbox_agreement(z, w, b, mus)
    # Papyan et al.'s NC4 plots the mismatch: 1 - agreement, counted the same way
    mismatch = np.mean(np.argmax(z @ w.T + b, axis=1) != np.argmin(
        np.linalg.norm(z[:, None] - mus[None], axis=-1), axis=1))
    assert_allclose(1.0 - M.classifier_agreement(z, y, classifier=w, bias=b), mismatch, atol=4 * EPS)


def test_classifier_agreement_with_train_means_on_test_data():
    rng = np.random.default_rng(15)
    centres = 2.0 * rng.standard_normal((4, 5))
    y_tr, y_te = np.repeat(np.arange(4), 20), rng.integers(0, 4, 30)
    z_tr = centres[y_tr] + rng.standard_normal((80, 5))
    z_te = centres[y_te] + 1.5 * rng.standard_normal((30, 5))
    w, b = centres + 0.5 * rng.standard_normal((4, 5)), rng.standard_normal(4)
    mus = M.class_means(z_tr, y_tr)
    got = M.classifier_agreement(z_te, classifier=w, bias=b, class_means=mus)
    assert got == naive_agreement(z_te, w, b, mus) == M.classifier_agreement(z_te, y_te, classifier=w, bias=b,
                                                                               class_means=mus)
    assert 0.0 < got < 1.0  # the test data have disagreements to count: the comparison is not vacuous
    # a torch nn.Linear head gives (weight, bias) directly
    head = torch.nn.Linear(5, 4, dtype=torch.float64)
    with torch.no_grad():
        ref = naive_agreement(z_te, head.weight.numpy(), head.bias.numpy(), mus)
    assert M.classifier_agreement(torch.from_numpy(z_te), classifier=head.weight, bias=head.bias,
                                  class_means=torch.from_numpy(mus)) == ref


def rhubarbwu_log_kernel_stats(mus, m_g):
    """rhubarbwu/neural-collapse kernels.kernel_stats(M, m_G, kernel=log_kernel): util.normalize (x / (||x|| + eps)),
    grid log(||u_i - u_j||^-1), mean and variance of the upper triangle by util.symm_reduce."""
    centred = mus - m_g
    unit = centred / (np.linalg.norm(centred, axis=-1, keepdims=True) + EPS)
    with np.errstate(divide="ignore"):
        grid = np.log(np.linalg.norm(unit[:, None] - unit[None], axis=-1) ** -1.0)
    i, j = np.triu_indices(len(mus), 1)
    avg = np.sum(grid[i, j]) / len(i)
    with np.errstate(invalid="ignore"):  # inf - inf when two directions coincide exactly
        return float(avg), float(np.sum((grid[i, j] - avg) ** 2) / len(i))


def nc_toolbox_hyperspherical(mu_c, mu_g):
    """felixsh/nc-toolbox metrics.gnc2_hypershperical_uniformity(reduction='mean'): mean of log(1/||u_i - u_j||)."""
    centred = mu_c - mu_g
    unit = centred / np.linalg.norm(centred, axis=1)[:, None]
    i, j = np.triu_indices(len(mu_c), 1)
    return float(np.mean(np.log(np.reciprocal(np.linalg.norm(unit[i] - unit[j], axis=1)))))


@given(labelled_embeddings())
def test_hyperspherical_uniformity_is_rhubarbwu_variance_and_nc_toolbox_mean(data):
    z, y, _, _ = data
    mus = M.class_means(z, y)
    mean, var = rhubarbwu_log_kernel_stats(mus, mus.mean(axis=0))  # README: kernel_stats(means, mG, log_kernel)[1]
    if M.hyperspherical_uniformity(z, y, statistic="mean") == math.inf:
        # two centred means point the same way (always for C >= 3 in d = 1): ours is inf / NaN; rhubarbwu's
        # eps in the normalization often leaves a distance of ~eps instead of 0: a finite log inverse distance
        # near 36, read as a finite (huge) statistic; ours says the statistic is undefined
        assert math.isnan(M.hyperspherical_uniformity(z, y))
        assert not math.isfinite(mean) or mean > 5
        return
    rtol = route_rtol(z, y)
    assert_allclose(M.hyperspherical_uniformity(z, y), var, rtol=rtol, atol=rtol)
    assert_allclose(M.hyperspherical_uniformity(z, y, statistic="mean"), mean, rtol=rtol, atol=rtol)
    assert_allclose(M.hyperspherical_uniformity(z, y, statistic="mean"), nc_toolbox_hyperspherical(mus, mus.mean(axis=0)),
                    rtol=rtol, atol=rtol)


def wang_align_loss(x, y, alpha=2):
    """wang2020understanding's reference code (align_uniform/__init__.py), in torch float64."""
    return (x - y).norm(p=2, dim=1).pow(alpha).mean()


def wang_uniform_loss(x, t=2):
    return torch.pdist(x, p=2).pow(2).mul(-t).exp().mean().log()


@given(st.integers(0, 2**32 - 1), st.integers(2, 30), st.integers(1, 8), st.floats(0.1, 4.0), st.floats(0.5, 3.0))
def test_alignment_and_uniformity_are_wang_isolas_reference_code(seed, b, d, t, alpha):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((b, d))
    x /= np.linalg.norm(x, axis=1, keepdims=True)  # their features are normalized (any z works here)
    x2 = x + 0.3 * rng.standard_normal((b, d))
    tx, tx2 = torch.from_numpy(x), torch.from_numpy(x2)
    rtol = 16 * (b**2 + d) * EPS * (1 + t * 4)  # sums of <= B^2 terms, exponents up to 4 t
    assert_allclose(M.uniformity(x, t=t), wang_uniform_loss(tx, t).item(), rtol=rtol, atol=rtol)
    pos = (np.arange(b), np.arange(b, 2 * b))
    assert_allclose(M.alignment(np.concatenate([x, x2]), positives=pos, alpha=alpha), wang_align_loss(tx, tx2, alpha).item(),
                    rtol=rtol)


# ------------------------------------------------------------------ 3. properties
SCALARS = {
    "cdnv": lambda z, y, w, b: M.cdnv(z, y),
    "self_duality": lambda z, y, w, b: M.self_duality(z, y, classifier=w),
    "classifier_agreement": lambda z, y, w, b: M.classifier_agreement(z, y, classifier=w, bias=b),
    "hyperspherical_uniformity": lambda z, y, w, b: M.hyperspherical_uniformity(z, y),
    "hyperspherical_mean": lambda z, y, w, b: M.hyperspherical_uniformity(z, y, statistic="mean"),
    "alignment": lambda z, y, w, b: M.alignment(z, y),
    "alignment_1": lambda z, y, w, b: M.alignment(z, y, alpha=1.0),
    "uniformity": lambda z, y, w, b: M.uniformity(z),
}


def _assert_same(a: dict, b: dict, rtol: float):
    for key in a:
        if key == "classifier_agreement":  # an argmax: equal unless a tie within rounding (never in random data)
            assert a[key] == b[key], key
        else:
            assert_allclose(a[key], b[key], rtol=rtol, atol=rtol, err_msg=key)


def _values(z, y, w, b):
    return {name: f(z, y, w, b) for name, f in SCALARS.items()}


@given(labelled_embeddings(), st.integers(0, 2**32 - 1))
def test_rotation_invariance(data, seed):
    z, y, w, b = data
    q = random_orthogonal(z.shape[1], rng=np.random.default_rng(seed))
    _assert_same(_values(z @ q, y, w @ q, b), _values(z, y, w, b), route_rtol(z, y))


@given(labelled_embeddings(), st.integers(0, 2**32 - 1))
def test_label_permutation_equivariance(data, seed):
    z, y, w, b = data
    perm = np.random.default_rng(seed).permutation(y.max() + 1)  # class c becomes class perm[c]
    w2, b2 = np.empty_like(w), np.empty_like(b)
    w2[perm], b2[perm] = w, b  # the classifier's rows follow their classes
    _assert_same(_values(z, perm[y], w2, b2), _values(z, y, w, b), route_rtol(z, y))
    grid = M.cdnv_matrix(z, y)
    assert_allclose(M.cdnv_matrix(z, perm[y])[np.ix_(perm, perm)], grid, rtol=route_rtol(z, y))


@given(labelled_embeddings(), st.integers(-60, 60), st.floats(0.1, 4.0))
def test_scale_behaviour(data, m, t):
    z, y, w, b = data
    s = 2.0**m
    same = np.testing.assert_array_equal  # bitwise equal, NaN == NaN (d = 1 has NaN hyperspherical variances)
    # scale invariant (bitwise: the power of two is divided out exactly); NC4 with the bias scaled along
    same(M.cdnv(s * z, y), M.cdnv(z, y))
    same(M.cdnv_matrix(s * z, y), M.cdnv_matrix(z, y))
    same(M.self_duality(s * z, y, classifier=w / s), M.self_duality(z, y, classifier=w))
    same(M.hyperspherical_uniformity(s * z, y), M.hyperspherical_uniformity(z, y))
    same(M.classifier_agreement(s * z, y, classifier=w, bias=s * b), M.classifier_agreement(z, y, classifier=w, bias=b))
    # homogeneous of degree alpha; uniformity(s z, t) = uniformity(z, s^2 t)
    if np.bincount(y).max() >= 2:
        same(M.alignment(s * z, y), s**2 * M.alignment(z, y))
        assert_allclose(M.alignment(s * z, y, alpha=1.5), s**1.5 * M.alignment(z, y, alpha=1.5), rtol=8 * EPS)
    if abs(m) <= 3:
        same(M.uniformity(s * z, t=t), M.uniformity(z, t=s * s * t))


@given(labelled_embeddings())
def test_numpy_and_torch_inputs_agree(data):
    z, y, w, b = data
    ref = _values(z, y, w, b)
    got = _values(torch.tensor(z, requires_grad=True), torch.tensor(y), torch.tensor(w, requires_grad=True),
                  torch.tensor(b))
    np.testing.assert_array_equal(list(got.values()), list(ref.values()))  # the same float64 numbers


def test_uniformity_blocks_do_not_change_the_value():
    z = np.random.default_rng(16).standard_normal((37, 3))
    ref = naive_uniformity(z, 2.0)
    for rows in (1, 2, 5, 36, 37, 1000):
        assert_allclose(M.uniformity(z, block_rows=rows), ref, rtol=16 * 37**2 * EPS)


# ------------------------------------------------------------------ the record
def test_record_fields_are_the_functions_and_round_trip_through_strict_json():
    rng = np.random.default_rng(17)
    y = np.repeat(np.arange(4), [6, 3, 5, 4])
    z = 2.0 * rng.standard_normal((4, 5))[y] + rng.standard_normal((18, 5))
    w, b = rng.standard_normal((4, 5)), rng.standard_normal(4)
    record = M.field_metrics(z, y, classifier=w, bias=b)
    d = record.to_dict()
    assert tuple(d) == M.FIELD_METRIC_NAMES
    assert d == {name: f(z, y, w, b) for name, f in SCALARS.items() if name in M.FIELD_METRIC_NAMES}  # exactly
    assert M.FieldMetrics.from_dict(json.loads(dumps_json(d))) == record
    bare = M.field_metrics(z, y)  # no classifier: NC3 and NC4 are NaN, written as null
    assert math.isnan(bare.self_duality) and math.isnan(bare.classifier_agreement)
    assert bare.cdnv == record.cdnv and bare.uniformity == record.uniformity
    text = dumps_json(bare.to_dict())
    assert "NaN" not in text and "null" in text
    back = M.FieldMetrics.from_dict(json.loads(text))
    np.testing.assert_array_equal(list(back.to_dict().values()), list(bare.to_dict().values()))  # NaN == NaN here
    with pytest.raises(ValueError, match="unknown key"):
        M.FieldMetrics.from_dict({**d, "nc3": 0.0})
    with pytest.raises(ValueError, match="missing key"):
        M.FieldMetrics.from_dict({k: v for k, v in d.items() if k != "uniformity"})
    with pytest.raises(AttributeError):
        record.cdnv = 0.0  # type: ignore[misc]  # assigning a frozen field on purpose: the error is under test
    assert not set(M.FIELD_METRIC_NAMES) & set(M.METRIC_NAMES)  # new keys, none of nc_metrics'


# ------------------------------------------------------------------ degenerate inputs
def test_degenerate_inputs_give_documented_values():
    # a one-sample class: Var = 0 at ddof = 0; undefined at ddof = 1 (NaN pairs, NaN mean)
    z, y = np.array([[0.0], [2.0], [5.0]]), np.array([0, 0, 1])
    assert M.cdnv(z, y) == 1 / (2 * 16) and math.isnan(M.cdnv(z, y, ddof=1))
    # coincident means: spread -> +inf, no spread -> NaN (never a value that reads as collapse)
    assert M.cdnv([[1.0], [-1.0], [0.5], [-0.5]], [0, 0, 1, 1]) == math.inf
    assert math.isnan(M.cdnv([[1.0], [1.0]], [0, 1]))
    # NC3: W = 0 or all means equal have no direction
    assert math.isnan(M.self_duality(z, y, classifier=np.zeros((2, 1))))
    assert math.isnan(M.self_duality([[1.0], [1.0]], [0, 1], classifier=[[1.0], [-1.0]]))
    # hyperspherical: a centred mean of 0 (NaN); two centred means pointing the same way (mean inf, variance NaN)
    assert math.isnan(M.hyperspherical_uniformity([[1.0], [-1.0], [0.0]], [0, 1, 2]))
    same_way = np.array([[1.0, 0.0], [2.0, 0.0], [-3.0, 0.0]])
    assert M.hyperspherical_uniformity(same_way, [0, 1, 2], statistic="mean") == math.inf
    assert math.isnan(M.hyperspherical_uniformity(same_way, [0, 1, 2]))
    # alignment: no same-class pair; uniformity: no pair; far apart: log 0
    assert math.isnan(M.alignment([[0.0], [1.0]], [0, 1])) and M.alignment([[0.0], [1.0]], [3, 3]) == 1.0
    assert math.isnan(M.uniformity([[1.0, 2.0]]))
    assert M.uniformity([[0.0], [1e200]]) == -math.inf
    # d < C - 1 (C = 4 in the plane): every metric is defined; the hyperspherical variance stays > 0 (no ETF)
    rng = np.random.default_rng(18)
    y = np.repeat(np.arange(4), 4)
    z = 2.0 * rng.standard_normal((4, 2))[y] + 0.1 * rng.standard_normal((16, 2))
    values = _values(z, y, rng.standard_normal((4, 2)), rng.standard_normal(4))
    assert all(math.isfinite(v) for v in values.values()), values
    assert values["hyperspherical_uniformity"] > 0.0


# ------------------------------------------------------------------ validation
Z, Y = np.arange(8.0).reshape(4, 2), np.array([0, 0, 1, 1])


@pytest.mark.parametrize("call, message", [
    (lambda: M.self_duality(Z, Y, classifier=np.ones((3, 2))), r"classifier must have shape \[C, d\] = \[2, 2\].*got shape \(3, 2\)"),
    (lambda: M.self_duality(Z, Y, classifier=np.ones((2, 3))), r"classifier must have shape \[C, d\] = \[2, 2\].*got shape \(2, 3\)"),
    (lambda: M.self_duality(Z, Y, classifier=np.ones(2)), r"classifier must have shape .*got shape \(2,\)"),
    (lambda: M.self_duality(Z, Y, classifier=[["a", "b"], ["c", "d"]]), "classifier must be a real numeric array"),
    (lambda: M.self_duality(Z, Y, classifier=np.full((2, 2), np.nan)), "classifier must contain only finite values"),
    (lambda: M.classifier_agreement(Z, Y, classifier=np.ones((2, 2)), bias=np.ones(3)), r"bias must have shape \[C\] = \[2\]"),
    (lambda: M.classifier_agreement(Z, Y, classifier=np.ones((2, 2)), bias=[np.inf, 0.0]), "bias must contain only finite"),
    (lambda: M.classifier_agreement(Z, classifier=np.ones((2, 2))), "labels are required unless class_means"),
    (lambda: M.classifier_agreement(Z, classifier=np.ones((3, 2)), class_means=np.ones((2, 2))), r"classifier must have shape \[C, d\] = \[2, 2\]"),
    (lambda: M.classifier_agreement(Z, classifier=np.ones((2, 3)), class_means=np.ones((2, 3))), "class_means has dimension 3 but z has 2"),
    (lambda: M.classifier_agreement(Z, classifier=np.ones((1, 2)), class_means=np.ones((1, 2))), "class_means must have at least 2 rows"),
    (lambda: M.classifier_agreement(Z, Y[:3], classifier=np.ones((2, 2)), class_means=np.ones((2, 2))), "labels has length 3"),
    (lambda: M.classifier_agreement(Z, classifier=np.ones((2, 2)), class_means=np.ones((2, 2)), num_classes=2), "num_classes is only"),
    (lambda: M.cdnv(Z, Y, ddof=2), r"ddof must be an integer in \[0, 1\]"),
    (lambda: M.cdnv_matrix(Z, Y, ddof=-1), r"ddof must be an integer in \[0, 1\]"),
    (lambda: M.hyperspherical_uniformity(Z, Y, statistic="cov"), "statistic must be one of 'variance', 'mean'"),
    (lambda: M.alignment(Z, Y, alpha=0.0), "alpha must be a finite real number > 0"),
    (lambda: M.alignment(Z), "labels and positives: give exactly one"),
    (lambda: M.alignment(Z, Y, positives=([0], [1])), "labels and positives: give exactly one"),
    (lambda: M.alignment(Z, positives=[0, 1, 2]), r"positives must be a pair \(i, j\)"),
    (lambda: M.alignment(Z, positives=([0.0], [1.0])), "positives must hold two 1-D integer index arrays"),
    (lambda: M.alignment(Z, positives=([0, 1], [1])), "positives must hold two index arrays of the same length"),
    (lambda: M.alignment(Z, positives=([], [])), "positives must hold two index arrays of the same length P >= 1"),
    (lambda: M.alignment(Z, positives=([0], [4])), r"positives must index rows 0\.\.3 of z, got 4"),
    (lambda: M.alignment(Z, positives=([0], [1]), num_classes=2), "num_classes is only meaningful with labels"),
    (lambda: M.uniformity(Z, t=-1.0), "t must be a finite real number > 0"),
    (lambda: M.uniformity(Z, block_rows=0), "block_rows must be an integer >= 1"),
    (lambda: M.uniformity(Z, Y[:3]), "labels has length 3 but z has 4 rows"),
    (lambda: M.field_metrics(Z, Y, bias=[0.0, 0.0]), "bias is only meaningful together with classifier"),
    (lambda: M.field_metrics(Z, Y, num_classes=3), "class 2 has no sample"),
    (lambda: M.cdnv(Z, [0, 0, 1, 3], num_classes=3), r"labels must lie in 0\.\.2"),
    (lambda: M.field_metrics(Z, Y, classifier=np.ones((3, 2))), r"classifier must have shape \[C, d\] = \[2, 2\]"),
])
def test_invalid_input_raises_value_error_naming_the_argument(call, message):
    with pytest.raises(ValueError, match=message):
        call()


W2 = np.ones((2, 2))


@pytest.mark.parametrize("func", [
    M.cdnv, M.cdnv_matrix, M.hyperspherical_uniformity, M.alignment,
    lambda z, y: M.self_duality(z, y, classifier=W2), lambda z, y: M.classifier_agreement(z, y, classifier=W2),
    lambda z, y: M.field_metrics(z, y),
], ids=["cdnv", "cdnv_matrix", "hyperspherical_uniformity", "alignment", "self_duality", "classifier_agreement",
        "field_metrics"])
def test_every_function_validates_as_the_other_metrics(func):
    with pytest.raises(ValueError, match="labels has length 3 but z has 4 rows"):
        func(Z, [0, 0, 1])
    with pytest.raises(ValueError, match="z must contain only finite values"):
        func(np.full((4, 2), np.nan), [0, 0, 1, 1])
    with pytest.raises(ValueError, match="labels must contain at least 2 classes"):
        func(Z, [1, 1, 1, 1]) if func is not M.alignment else M.cdnv(Z, [1, 1, 1, 1])  # alignment: one class is fine
