"""Numerics at the edges (docs/reliability.md, "Numerics at the edges and files").

Labels are integers or strings, never lossy floats; the scale-invariant metrics do not move when z is
scaled by 1e-150..1e150 and the others do not under- or overflow; the closed forms reach their limits
(the HUCL value tends to psi_k(0, ..., 0) as beta grows); the batch loss is finite in float32 over its
validated range of beta and tau and refuses values outside it.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from numpy.testing import assert_allclose, assert_array_equal

from ncgeom.data import class_balanced_batches, label_positive_indices
from ncgeom.geometry import simplex_etf
from ncgeom.labels import as_class_ids, exact_integer_limit, integer_labels
from ncgeom.losses import batch_loss, make_psi
from ncgeom.metrics import class_means, nc_metrics, ncc_accuracy, rankme
from ncgeom.population import model_from_embeddings
from ncgeom.ranges import BETA_MAX, MARGIN_MAX, TAU_MIN
from ncgeom.theory import collision_probability, nc_value
from ncgeom.theory.closed_forms import MAX_NEGATIVES

EPS64 = np.finfo(np.float64).eps
EPS32 = float(torch.finfo(torch.float32).eps)

# ---------------------------------------------------------------- labels


@pytest.mark.parametrize("labels", [
    [1e30, 2e30, 1e30, 2e30],  # both exact floats, beyond 2^53: could have merged, refused
    [0.0, 0.5, 1.0, 1.0],
    [0.0, np.nan, 1.0, 1.0],
    [0.0, np.inf, 1.0, 1.0],
    np.array([0, 2**24 + 2, 1, 1], dtype=np.float32),  # beyond float32's exact range
    np.array([0, 1, 1, 0], dtype=np.complex128),
])
def test_lossy_or_fractional_float_labels_are_refused_naming_the_argument(labels):
    with pytest.raises(ValueError, match="labels must hold integers"):
        integer_labels(labels)
    z = np.eye(4)
    with pytest.raises(ValueError, match="labels must hold integers"):
        nc_metrics(z, labels)


def test_float_labels_1e30_and_2e30_never_merge_anywhere():
    z = np.eye(4)
    y = np.array([1e30, 2e30, 1e30, 2e30])
    for call in (lambda: class_means(z, y), lambda: ncc_accuracy(z, y), lambda: model_from_embeddings(z, y),
                 lambda: class_balanced_batches(y, 2, num_batches=1, rng=np.random.default_rng(0)),
                 lambda: label_positive_indices(y, rng=np.random.default_rng(0))):
        with pytest.raises(ValueError, match="labels must hold integers"):
            call()


def test_exact_integer_floats_within_the_exact_range_are_accepted():
    limit = exact_integer_limit(np.float64)
    assert limit == 2**53
    y = np.array([-limit, 0.0, float(limit), 0.0])
    assert_array_equal(integer_labels(y), [-(2**53), 0, 2**53, 0])
    assert_array_equal(integer_labels(np.array([3.0, 1.0], dtype=np.float32)), [3, 1])


def test_integer_labels_keep_values_and_strings_become_sorted_ids():
    assert_array_equal(integer_labels(np.array([7, -3, 7], dtype=np.int8)), [7, -3, 7])
    assert_array_equal(integer_labels(np.array([2**63 - 1, 0], dtype=np.uint64)), [2**63 - 1, 0])
    with pytest.raises(ValueError, match="int64 range"):
        integer_labels(np.array([2**64 - 1, 0], dtype=np.uint64))
    with pytest.raises(ValueError, match="int64 range"):
        integer_labels([2**70, 0])
    assert_array_equal(integer_labels(["cat", "ant", "cat", "bee"]), [2, 0, 2, 1])
    ids, classes = as_class_ids(["b", "a", "b"])
    assert_array_equal(ids, [1, 0, 1])
    assert_array_equal(classes, [0, 1])
    with pytest.raises(ValueError, match="labels must hold integers or strings"):
        integer_labels(np.array([1, "a"], dtype=object))


def test_string_labels_give_the_metrics_of_their_ids():
    rng = np.random.default_rng(0)
    z = rng.normal(size=(12, 3))
    names = np.array(["b", "a", "c"])[np.arange(12) % 3]
    ids = np.array([1, 0, 2])[np.arange(12) % 3]
    assert nc_metrics(z, names) == nc_metrics(z, ids)
    means = class_means(z, names)
    assert ncc_accuracy(z, names, class_means=means, class_labels=["a", "b", "c"]) == ncc_accuracy(
        z, ids, class_means=means, class_labels=[0, 1, 2])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bool, torch.complex64])
def test_batch_loss_refuses_non_integer_label_tensors(dtype):
    z = torch.eye(4)
    labels = torch.tensor([0, 0, 1, 1]).to(dtype)
    with pytest.raises(ValueError, match="labels must have an integer dtype"):
        batch_loss(z, labels, "scl")


# ---------------------------------------------------------------- scale of z

INVARIANT = ("equal_inner_product", "nc1", "etf_distance", "spectrum", "rankme", "ncc_accuracy")
HOMOGENEOUS = ("zero_sum", "within_class")  # f(a z) = a f(z) for a > 0


def _noisy_etf(seed: int, classes: int = 4, per_class: int = 5, dim: int = 6) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    y = np.repeat(np.arange(classes), per_class)
    z = simplex_etf(classes, dim, rng=rng)[y] * 1.5 + 0.3 * rng.normal(size=(y.size, dim))
    return z, y


def _as_array(m) -> dict[str, np.ndarray]:
    return {k: np.asarray(v, dtype=np.float64) for k, v in m.to_dict().items()}


@given(exponent=st.integers(-498, 498), seed=st.integers(0, 2**16))
def test_power_of_two_scalings_leave_invariant_metrics_bitwise_equal(exponent, seed):
    # 2^e with |e| <= 498 spans 1e-150..1e150: z * 2^e is exact, and the metrics divide by a power of two
    # first, so the invariant metrics see the same bits and the homogeneous ones scale exactly.
    z, y = _noisy_etf(seed)
    a = math.ldexp(1.0, exponent)
    base, scaled = _as_array(nc_metrics(z, y)), _as_array(nc_metrics(z * a, y))
    for name in INVARIANT:
        assert_array_equal(scaled[name], base[name], err_msg=name)
    for name in HOMOGENEOUS:
        assert_array_equal(scaled[name], base[name] * a, err_msg=name)


@given(log10_scale=st.floats(-150.0, 150.0), seed=st.integers(0, 2**16))
def test_decimal_scalings_move_invariant_metrics_only_by_rounding(log10_scale, seed):
    z, y = _noisy_etf(seed)
    a = 10.0**log10_scale
    base, scaled = _as_array(nc_metrics(z, y)), _as_array(nc_metrics(z * a, y))
    # z * a rounds each entry (relative error eps); the metrics are smooth functions of z with a
    # condition number of a few hundred at most on these well-separated classes.
    rtol = 1e3 * EPS64
    for name in INVARIANT:
        assert_allclose(scaled[name], base[name], rtol=rtol, atol=rtol, err_msg=name)
    for name in HOMOGENEOUS:
        assert_allclose(scaled[name], base[name] * a, rtol=rtol, err_msg=name)
    # unit_norm = mean | a ||mu_c|| - 1 |: computed from the scaled norms, finite and exact to rounding
    norms = np.linalg.norm(class_means(z, y), axis=1)
    assert_allclose(scaled["unit_norm"], np.mean(np.abs(a * norms - 1.0)), rtol=rtol)


@pytest.mark.parametrize("scale", [1e-170, 1e-300, 1e150, 1e300])
def test_extreme_scales_read_the_same_nc1_never_a_false_perfect_collapse(scale):
    z, y = _noisy_etf(3)
    base = nc_metrics(z, y)
    assert base.nc1 > 0.01  # a visibly uncollapsed configuration
    m = nc_metrics(z * scale, y)
    assert_allclose(m.nc1, base.nc1, rtol=1e3 * EPS64)
    assert_allclose(m.etf_distance, base.etf_distance, rtol=1e3 * EPS64)
    assert_allclose(rankme(z * scale), rankme(z), rtol=1e3 * EPS64)
    assert_allclose(m.within_class, base.within_class * scale, rtol=1e3 * EPS64)


def test_all_zero_embeddings_give_the_documented_nans_and_exact_norms():
    m = nc_metrics(np.zeros((4, 3)), [0, 0, 1, 1])
    for name in ("equal_inner_product", "nc1", "etf_distance", "rankme"):
        assert math.isnan(getattr(m, name)), name
    assert all(math.isnan(v) for v in m.spectrum)
    assert (m.unit_norm, m.zero_sum, m.within_class) == (1.0, 0.0, 0.0)


def test_largest_floats_do_not_overflow_the_class_means():
    big = np.finfo(np.float64).max / 2
    z = np.array([[big, 0.0], [big, 0.0], [-big, 0.0], [-big, 0.0]])
    assert_array_equal(class_means(z, [0, 0, 1, 1]), [[big, 0.0], [-big, 0.0]])
    m = nc_metrics(z, [0, 0, 1, 1])
    assert (m.zero_sum, m.within_class, m.etf_distance) == (0.0, 0.0, 0.0)


# ---------------------------------------------------------------- closed forms at their limits


@pytest.mark.parametrize("c, k", [(2, 1), (10, 9), (10, 100), (1000, 7)])
@pytest.mark.parametrize("beta", [1e3, 1e100, 1e308, np.finfo(np.float64).max])
def test_hucl_value_tends_to_the_all_collision_value_as_beta_grows(c, k, beta):
    # pi_beta -> 1: every negative collides (t = 0), so the value is psi_k(0, ..., 0): log(1 + k) for
    # infonce (log C when k = C - 1), log 2 for infonce-mean, max(0, m) for triplet (docs/theory.md sec. 5).
    assert collision_probability("hucl", num_classes=c, beta=beta) == 1.0
    assert_allclose(nc_value("hucl", num_classes=c, num_negatives=k, beta=beta), math.log1p(k), rtol=4 * EPS64)
    assert_allclose(nc_value("hucl", "infonce-mean", num_classes=c, num_negatives=k, beta=beta), math.log(2.0),
                    rtol=4 * EPS64)
    assert nc_value("hucl", "triplet", num_classes=c, num_negatives=k, beta=beta, margin=1.5) == 1.5
    # a non-symmetric user psi takes the enumeration path: 0 * log 0 must read 0, not NaN
    user = make_psi("infonce")
    asym = type(user)("asym", user.func, {}, symmetric=False)
    if k <= 9:
        assert_allclose(nc_value("hucl", asym, num_classes=c, num_negatives=k, beta=beta), math.log1p(k),
                        rtol=4 * EPS64)


def test_issue_case_hucl_at_beta_1e308_is_log_c_for_c_minus_1_negatives():
    for c in (2, 5, 10):
        assert_allclose(nc_value("hucl", num_classes=c, num_negatives=c - 1, beta=1e308), math.log(c), rtol=4 * EPS64)


@pytest.mark.parametrize("setting", ["scl", "ucl", "hucl"])
@pytest.mark.parametrize("k", [10**6, 10**8, MAX_NEGATIVES])
def test_nc_value_is_finite_up_to_the_largest_k_and_matches_the_large_k_limit(setting, k):
    c, tau, beta = 10, 1.0, 2.0
    p = collision_probability(setting, num_classes=c, beta=beta)
    value = nc_value(setting, num_classes=c, num_negatives=k, beta=beta, tau=tau)
    # J / k concentrates at p: log(1 + k (p + (1 - p) e^(-C/((C-1) tau)))) up to the Jensen gap O(1/k)
    limit = math.log1p(k * (p + (1 - p) * math.exp(-c / ((c - 1) * tau))))
    assert_allclose(value, limit, rtol=0, atol=10.0 / k + 1e3 * EPS64 * limit)
    with pytest.raises(ValueError, match="num_negatives must be an integer in"):
        nc_value(setting, num_classes=c, num_negatives=MAX_NEGATIVES + 1)


def test_collision_probability_for_huge_numbers_of_classes():
    huge = 10**400  # beyond the float range: handled in log space
    assert collision_probability("ucl", num_classes=huge) == 0.0
    assert collision_probability("hucl", num_classes=huge, beta=0.0) == 0.0
    assert_allclose(nc_value("ucl", num_classes=huge, num_negatives=5), math.log1p(5 * math.exp(-1.0)),
                    rtol=4 * EPS64)


@pytest.mark.parametrize("tau", [1e-300, 1e-3, 1e300])
def test_closed_forms_are_finite_over_the_whole_tau_range(tau):
    for setting, psi in itertools.product(("scl", "ucl", "hucl"), ("infonce", "infonce-mean", "triplet")):
        value = nc_value(setting, psi, num_classes=5, num_negatives=7, beta=3.0, tau=tau)
        assert math.isfinite(value), (setting, psi, tau)


def test_triplet_margin_is_validated_and_never_overflows():
    with pytest.raises(ValueError, match=r"margin must be a finite real number >= -10000.0, <= 10000.0"):
        make_psi("triplet", margin=1e308)
    with pytest.raises(ValueError, match="margin"):
        nc_value("scl", "triplet", num_classes=3, num_negatives=2, margin=1e308)
    psi = make_psi("triplet", margin=MARGIN_MAX)
    t = np.zeros((1, 4))
    assert psi(t)[0] == MARGIN_MAX
    assert float(psi(torch.zeros(1, 4, dtype=torch.float16))[0]) == MARGIN_MAX  # 1e4 < float16 max 65504


# ---------------------------------------------------------------- the batch loss over its validated range


def _loss_batches():
    g = torch.Generator().manual_seed(0)
    y = torch.arange(24) % 4
    z = torch.randn(24, 6, generator=g, dtype=torch.float64)
    yield "random sphere", z / z.norm(dim=1, keepdim=True), y
    yield "NC batch", torch.from_numpy(simplex_etf(4, 6))[y], y
    yield "identical", torch.full((24, 6), 1 / math.sqrt(6), dtype=torch.float64), y
    yield "ball, tiny norms", 1e-3 * z / z.norm(dim=1, keepdim=True), y


CORNERS = list(itertools.product([0.0, 1.0, BETA_MAX], [TAU_MIN, 1.0, 1e39]))


@pytest.mark.parametrize("beta, tau", CORNERS)
@pytest.mark.parametrize("setting", ["hscl", "hucl"])
def test_batch_loss_is_finite_and_accurate_in_float32_at_the_corners_of_its_range(beta, tau, setting):
    for name, z, y in _loss_batches():
        ref = float(batch_loss(z, y, setting, beta=beta, tau=tau, backend="dense"))
        # float32 error: the log-sum-exps of (beta + 1/tau) S (|S| <= 1) are differenced in working precision
        tol = 8 * (beta + 1 / tau + 1) * EPS32 + 8 * EPS32 * abs(ref)
        for backend in ("dense", "blocked"):
            z32 = z.float().requires_grad_()
            loss = batch_loss(z32, y, setting, beta=beta, tau=tau, backend=backend)
            loss.backward()
            assert torch.isfinite(loss) and torch.isfinite(z32.grad).all(), (name, backend)
            assert_allclose(float(loss.detach()), ref, rtol=0, atol=tol, err_msg=f"{name} {backend}")
        for psi in ("infonce", "infonce-mean", "triplet"):
            z32 = z.float().requires_grad_()
            loss = batch_loss(z32, y, setting, beta=beta, tau=tau, estimator="sampled", psi=make_psi(psi, tau=tau),
                              generator=torch.Generator().manual_seed(1))
            loss.backward()
            assert torch.isfinite(loss) and torch.isfinite(z32.grad).all(), (name, psi)


@pytest.mark.parametrize("beta", [-1.0, BETA_MAX * 1.0001, 3e38, 1e308, math.inf, math.nan])
def test_batch_loss_refuses_beta_outside_the_validated_range(beta):
    z = torch.eye(4)
    with pytest.raises(ValueError, match=r"beta must be a finite real number >= 0.0, <= 10000.0"):
        batch_loss(z, torch.tensor([0, 0, 1, 1]), "hucl", beta=beta)


@pytest.mark.parametrize("tau", [0.0, -1.0, TAU_MIN / 2, 1e-39, math.inf])
def test_batch_loss_refuses_tau_outside_the_validated_range(tau):
    z = torch.eye(4)
    with pytest.raises(ValueError, match=r"tau must be a finite real number >= 0.001"):
        batch_loss(z, torch.tensor([0, 0, 1, 1]), "scl", tau=tau)


def test_a_psi_with_a_tau_below_the_range_is_refused_by_the_sampled_estimator():
    z = torch.eye(4)
    with pytest.raises(ValueError, match="psi's tau must be"):
        batch_loss(z, torch.tensor([0, 0, 1, 1]), "scl", estimator="sampled", psi=make_psi("infonce", tau=1e-6),
                   generator=torch.Generator())
