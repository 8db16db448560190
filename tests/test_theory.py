"""Tests of ncgeom.theory: NC closed forms (docs/theory.md sections 5, 7), bounds, theorem conditions."""

import math
from typing import Any

import mpmath
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from numpy.testing import assert_allclose

from ncgeom.geometry import simplex_etf
from ncgeom.losses import custom_eta, custom_psi, infonce, make_psi
from ncgeom.testing import betas, psi_params
from ncgeom.theory import (
    MAX_ENUMERATED_NEGATIVES,
    SETTINGS,
    batch_nc_value,
    check_conditions,
    collision_probability,
    hscl_lower_bound,
    hucl_lower_bound,
    instance_positive_bound,
    nc_value,
    scl_lower_bound,
    ucl_lower_bound,
)

EPS = np.finfo(np.float64).eps
# A binomial sum of k + 1 terms, each with O(1) rounding: relative error O(k eps); 1e-12 covers k <= 1000.
RTOL = 1e-12


def _naive_nc(setting, name, c, k, beta, tau, margin):
    """Direct float64 loop over j of docs/theory.md section 5, from the collision probability by its definition."""
    if setting in ("scl", "hscl"):
        p = 0.0
    elif setting == "ucl":
        p = 1.0 / c
    else:
        p = math.exp(beta) / (math.exp(beta) + (c - 1) * math.exp(-beta / (c - 1)))
    psi = make_psi(name, tau=tau, margin=margin)
    total = 0.0
    for j in range(k + 1):
        t = np.array([[0.0] * j + [-c / (c - 1)] * (k - j)])
        total += math.comb(k, j) * p**j * (1 - p) ** (k - j) * float(psi(t)[0])
    return total


@given(st.sampled_from(SETTINGS), psi_params(max_negatives=8), st.integers(2, 12), st.floats(0.0, 8.0))
def test_nc_value_matches_naive_sum(setting, params, c, beta):
    got = nc_value(setting, params.name, num_classes=c, num_negatives=params.num_negatives, beta=beta, tau=params.tau, margin=params.margin)
    ref = _naive_nc(setting, params.name, c, params.num_negatives, beta, params.tau, params.margin)
    assert_allclose(got, ref, rtol=RTOL, atol=RTOL)


def test_section5_and_section6_examples():
    # docs/theory.md section 5: infonce-mean, tau = 1, SCL, C = 10 -> log(1 + e^(-10/9)) = 0.2846 (any k).
    for k in (1, 256):
        v = nc_value("scl", "infonce-mean", num_classes=10, num_negatives=k)
        assert_allclose(v, math.log1p(math.exp(-10 / 9)), rtol=4 * EPS)
        assert round(v, 4) == 0.2846
    # section 5: infonce SCL = log(1 + k e^(-C/((C-1) tau))); triplet SCL = max(0, m - C/(C-1)).
    assert_allclose(nc_value("scl", num_classes=5, num_negatives=7, tau=0.3), math.log1p(7 * math.exp(-5 / 4 / 0.3)), rtol=4 * EPS)
    assert nc_value("scl", "triplet", num_classes=3, num_negatives=4, margin=2.0) == pytest.approx(0.5, rel=4 * EPS)
    # section 6 example, UCL infonce C = 4, k = 2, tau = 0.5: 0.4145938 (the convex optimum must match).
    assert_allclose(nc_value("ucl", "infonce", num_classes=4, num_negatives=2, tau=0.5), 0.4145938, atol=5e-8)


@pytest.mark.parametrize("c", [2, 10, 1000])
@pytest.mark.parametrize("beta", [0.0, 1.0, 10.0, 100.0])
def test_collision_probability_matches_mpmath(c, beta):
    with mpmath.workdps(40):
        b = mpmath.mpf(beta)
        ref = mpmath.e**b / (mpmath.e**b + (c - 1) * mpmath.e ** (-b / (c - 1)))
        assert_allclose(collision_probability("hucl", num_classes=c, beta=beta), float(ref), rtol=8 * EPS)
    assert collision_probability("ucl", num_classes=c, beta=beta) == 1 / c
    assert collision_probability("scl", num_classes=c) == 0.0 == collision_probability("hscl", num_classes=c, beta=beta)


def _mpmath_nc(p, c, k, tau, name="infonce", *, window=True):
    """High-precision binomial sum for infonce / infonce-mean.

    With ``window`` only j within 15 standard deviations (+ 30) of the mean kp are summed: the binomial
    tail beyond is below e^-100 of the mass (Chernoff), far below float64 eps.
    """
    with mpmath.workdps(40):
        p = mpmath.mpf(p)
        e = mpmath.e ** (mpmath.mpf(-c) / (c - 1) / tau)
        total = mpmath.mpf(0)
        mean, sd = float(k * p), float(mpmath.sqrt(k * p * (1 - p)))
        lo, hi = (max(0, int(mean - 15 * sd) - 30), min(k, int(mean + 15 * sd) + 30)) if window else (0, k)
        for j in range(lo, hi + 1):
            mass = j + (k - j) * e
            val = mpmath.log(1 + mass) if name == "infonce" else mpmath.log(1 + mass / k)
            total += mpmath.binomial(k, j) * p**j * (1 - p) ** (k - j) * val
        return float(total)


@pytest.mark.parametrize("beta", [0.0, 2.0, 100.0])
def test_nc_value_large_k_and_beta_is_finite_and_matches_mpmath(beta):
    k, c = 10_000, 10
    with mpmath.workdps(40):
        b = mpmath.mpf(beta)
        p = mpmath.e**b / (mpmath.e**b + (c - 1) * mpmath.e ** (-b / (c - 1)))
        got = nc_value("hucl", num_classes=c, num_negatives=k, beta=beta)
        assert math.isfinite(got)
        # k = 10^4 terms: relative error ~ 1e-12 at most (log-space weights, fsum of products).
        assert_allclose(got, _mpmath_nc(p, c, k, 1.0), rtol=1e-11)
    assert_allclose(nc_value("ucl", "infonce-mean", num_classes=c, num_negatives=k, tau=0.1), _mpmath_nc(mpmath.mpf(1) / c, c, k, 0.1, "infonce-mean"), rtol=1e-11)


@pytest.mark.slow
def test_nc_value_large_k_full_mpmath_sum():
    k, c = 10_000, 10
    assert_allclose(nc_value("ucl", num_classes=c, num_negatives=k), _mpmath_nc(mpmath.mpf(1) / c, c, k, 1.0, window=False), rtol=1e-11)


@given(st.integers(2, 20), st.integers(1, 50), betas(max_beta=20.0))
def test_hucl_reduces_and_exceeds(c, k, beta):
    ucl = nc_value("ucl", num_classes=c, num_negatives=k)
    assert_allclose(nc_value("hucl", num_classes=c, num_negatives=k, beta=0.0), ucl, rtol=RTOL)
    assert nc_value("hucl", num_classes=c, num_negatives=k, beta=beta) >= ucl * (1 - RTOL)
    assert hucl_lower_bound(num_classes=c, num_negatives=k) == ucl
    # beta is ignored by the non-hard settings; HSCL equals SCL at NC.
    assert nc_value("ucl", num_classes=c, num_negatives=k, beta=beta) == ucl
    assert nc_value("hscl", num_classes=c, num_negatives=k, beta=beta) == nc_value("scl", num_classes=c, num_negatives=k)


def test_user_psi_paths_agree_with_builtin():
    builtin = infonce(tau=0.7)
    sym = custom_psi(builtin.func, name="sym", symmetric=True)
    nonsym = custom_psi(builtin.func, name="nonsym", symmetric=False)
    for setting in SETTINGS:
        ref = nc_value(setting, builtin, num_classes=5, num_negatives=6, beta=1.5)
        assert_allclose(nc_value(setting, sym, num_classes=5, num_negatives=6, beta=1.5), ref, rtol=RTOL)
        assert_allclose(nc_value(setting, nonsym, num_classes=5, num_negatives=6, beta=1.5), ref, rtol=RTOL)
    big = MAX_ENUMERATED_NEGATIVES + 1
    assert_allclose(nc_value("ucl", sym, num_classes=5, num_negatives=2000), nc_value("ucl", builtin, num_classes=5, num_negatives=2000), rtol=1e-11)
    assert_allclose(nc_value("scl", nonsym, num_classes=5, num_negatives=big), nc_value("scl", builtin, num_classes=5, num_negatives=big), rtol=RTOL)
    with pytest.raises(ValueError, match="num_negatives"):
        nc_value("ucl", nonsym, num_classes=5, num_negatives=big)


def test_non_symmetric_psi_enumerates_placements():
    # psi(t) = t_1 (only the first negative counts): E = (1 - p)(-C/(C-1)).
    first = custom_psi(lambda t: t[..., 0], symmetric=False)
    assert_allclose(nc_value("ucl", first, num_classes=4, num_negatives=3), (3 / 4) * (-4 / 3), rtol=RTOL)


def test_invalid_arguments():
    # arguments outside their declared types on purpose: the runtime checks are under test
    not_a_setting: Any = "simclr"
    not_a_count: Any = "all"
    an_array: Any = np.array(["batch"])
    with pytest.raises(ValueError, match="setting"):
        nc_value(not_a_setting, num_classes=3, num_negatives=1)
    with pytest.raises(ValueError, match="num_classes"):
        nc_value("scl", num_classes=1, num_negatives=1)
    with pytest.raises(ValueError, match="num_negatives"):
        nc_value("scl", num_classes=3, num_negatives=0)
    with pytest.raises(ValueError, match="beta"):
        collision_probability("hucl", num_classes=3, beta=-1.0)
    with pytest.raises(ValueError, match="class_counts"):
        batch_nc_value("scl", class_counts=[3])
    with pytest.raises(ValueError, match="num_negatives"):
        batch_nc_value("scl", class_counts=[3, 2], num_negatives=not_a_count)
    with pytest.raises(ValueError, match="num_negatives"):  # an array used to pass as "batch" elementwise
        batch_nc_value("scl", class_counts=[3, 2], num_negatives=an_array)


def _naive_batch(setting, counts, k, beta, tau, dim_extra=1):
    """Loop implementation of the weighted estimator (docs/theory.md section 7) on an exact NC batch."""
    c = len(counts)
    v = simplex_etf(c, c - 1 + dim_extra, rng=np.random.default_rng(0))
    y = np.repeat(np.arange(c), counts)
    z = v[y]
    s = z @ z.T
    b = beta if setting in ("hscl", "hucl") else 0.0
    losses = []
    for i in range(len(y)):
        negs = [m for m in range(len(y)) if (y[m] != y[i] if setting in ("scl", "hscl") else m != i)]
        pos = [j for j in range(len(y)) if j != i and y[j] == y[i]]
        if not negs:
            continue
        w = np.array([math.exp(b * s[i, m]) for m in negs])
        q = w / w.sum()
        kk = len(negs) if k == "batch" else k
        for j in pos:
            losses.append(math.log(1 + kk * sum(q[a] * math.exp((s[i, m] - s[i, j]) / tau) for a, m in enumerate(negs))))
    return float(np.mean(losses)) if losses else 0.0


@given(st.sampled_from(SETTINGS), st.lists(st.integers(0, 4), min_size=2, max_size=5), st.sampled_from([1, 3, "batch"]), betas(max_beta=5.0), st.floats(0.2, 2.0))
def test_batch_nc_value_matches_loop_estimator(setting, counts, k, beta, tau):
    got = batch_nc_value(setting, class_counts=counts, num_negatives=k, beta=beta, tau=tau)
    # The loop uses computed ETF similarities (rounding ~ 1e-15), then exp / log: 1e-12 is ample.
    assert_allclose(got, _naive_batch(setting, counts, k, beta, tau), rtol=1e-12, atol=1e-12)


def test_batch_nc_value_scl_equals_section5():
    for k in (1, 5):
        assert_allclose(batch_nc_value("hscl", class_counts=[4, 4, 4], num_negatives=k, beta=3.0), nc_value("scl", num_classes=3, num_negatives=k), rtol=RTOL)
    assert batch_nc_value("ucl", class_counts=[1, 1, 1]) == 0.0


def test_bounds():
    # Each bound against its formula written out here (the bounds delegate to nc_value, so comparing
    # them with nc_value alone would test nothing). C = 6, k = 3, tau = 0.5: t_neg / tau = -12/5.
    kw: dict[str, Any] = dict(num_classes=6, num_negatives=3, tau=0.5)
    scl = math.log1p(3 * math.exp(-12 / 5))  # docs/theory.md section 5, infonce SCL
    assert_allclose([scl_lower_bound(**kw), hscl_lower_bound(**kw)], [scl, scl], rtol=4 * EPS)
    # Theorem 3: sum_j Binom(3, j) (1/6)^j (5/6)^(3-j) log(1 + j + (3 - j) e^(-12/5)).
    ucl = sum(math.comb(3, j) * (1 / 6) ** j * (5 / 6) ** (3 - j) * math.log(1 + j + (3 - j) * math.exp(-12 / 5)) for j in range(4))
    assert_allclose([ucl_lower_bound(**kw), hucl_lower_bound(**kw)], [ucl, ucl], rtol=16 * EPS)
    assert hucl_lower_bound(**kw) < nc_value("hucl", beta=2.0, **kw)
    # Instance positives: the Jensen bound psi(-1, ..., -1) = log(1 + 3 e^-2) lies below the UCL value.
    assert_allclose(instance_positive_bound(num_negatives=3, tau=0.5), math.log1p(3 * math.exp(-2.0)), rtol=4 * EPS)
    assert instance_positive_bound(num_negatives=3, tau=0.5) < ucl
    # Not strict for a psi that is flat on the NC arguments: triplet, margin 0 gives 0 at every beta.
    assert nc_value("hucl", "triplet", num_classes=6, num_negatives=3, beta=2.0, margin=0.0) == hucl_lower_bound("triplet", num_classes=6, num_negatives=3, margin=0.0) == 0.0


def test_check_conditions_builtin_setups():
    r = check_conditions("scl", num_classes=10, dim=9, psi="infonce", eta=5.0, normalization="ball")
    assert all(t.applies for t in r.theorems[:2]) and not r.theorem(3).applies
    assert "built-in" in r.condition("psi_convex").reason
    assert not r.condition("dim_ge_c").holds and r.condition("dim_ge_c_minus_1").holds
    u = check_conditions("ucl", num_classes=10, dim=9, psi="triplet", normalization="sphere")
    assert u.theorem(3).applies and "d >= C" in u.theorem(3).reason
    u2 = check_conditions("ucl", num_classes=10, dim=10, psi="triplet", normalization="sphere")
    assert u2.theorem(3).applies and "note" not in u2.theorem(3).reason
    inst = check_conditions("ucl", num_classes=10, dim=9, psi="infonce", normalization="ball", positives="instance")
    assert not inst.theorem(3).applies and "conditionally_independent_positives" in inst.theorem(3).reason
    hu = check_conditions("hucl", num_classes=3, dim=2, psi="infonce", eta=1.0, normalization="ball")
    assert hu.theorem(1).applies and not hu.theorem(3).applies and "open" in hu.theorem(3).reason
    bad = check_conditions("hscl", num_classes=4, dim=2, psi="infonce", normalization="none", prior=[0.4, 0.2, 0.2, 0.2])
    reason = bad.theorem(2).reason
    assert not bad.theorem(2).applies and all(n in reason for n in ("balanced", "normalized", "dim_ge_c_minus_1"))


def test_check_conditions_user_functions():
    nonconvex = custom_psi(lambda t: np.sin(t).sum(-1))
    with pytest.raises(ValueError, match="rng"):
        check_conditions("scl", num_classes=3, dim=2, psi=nonconvex, normalization="ball")
    r = check_conditions("hscl", num_classes=3, dim=2, psi=nonconvex, normalization="ball", eta=custom_eta(lambda s: np.exp(-np.asarray(s))), num_negatives=2, rng=np.random.default_rng(0))
    assert not r.condition("psi_convex").holds and "witness" in r.condition("psi_convex").reason
    assert not r.condition("eta_monotone_nonnegative").holds
    assert not r.theorem(1).applies and not r.theorem(2).applies
    good = custom_psi(infonce().func, symmetric=True)
    g = check_conditions("scl", num_classes=3, dim=2, psi=good, normalization="ball", rng=np.random.default_rng(0))
    assert g.theorem(2).applies and "numerical" in g.condition("psi_convex").reason
    with pytest.raises(ValueError, match="prior"):
        check_conditions("scl", num_classes=3, dim=2, psi="infonce", normalization="ball", prior=[0.5, 0.5])
    not_a_normalization: Any = "cube"  # outside the Literal on purpose: the runtime check is under test
    with pytest.raises(ValueError, match="normalization"):
        check_conditions("scl", num_classes=3, dim=2, psi="infonce", normalization=not_a_normalization)
