"""Convex certificates (theory.md section 6): program reduction, true claims pass, false claims fail."""

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.testing import assert_allclose

import proofs_check.certificates as certificates
from ncgeom.geometry import etf_gram, simplex_etf
from ncgeom.losses import make_psi
from ncgeom.theory import nc_value
from proofs_check.certificates import (
    certificate_check,
    certificate_cases,
    certify_gram_program,
    checks,
    gram_program,
    naive_program_objective,
    program_gradient,
    program_objective,
)

EPS = np.finfo(np.float64).eps
PSI = ("infonce", "infonce-mean", "triplet")


def _random_gram(c, rng, *, sphere=True):
    v = rng.standard_normal((c, c))
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    if not sphere:
        v *= rng.uniform(0.3, 1.0, size=(c, 1))
    return v @ v.T


def test_all_names_exist_once():
    assert len(set(certificates.__all__)) == len(certificates.__all__)
    for name in certificates.__all__:
        assert hasattr(certificates, name), name


@pytest.mark.parametrize("setting,psi,c,k", [
    (s, p, c, k) for s in ("scl", "ucl") for p in PSI for c, k in ((2, 1), (3, 2), (4, 3))
])
def test_multiset_program_equals_naive_loop(setting, psi, c, k):
    # Reference: a loop over all C * n^k ordered negative tuples (no multiset reduction).
    rng = np.random.default_rng(c * 10 + k)
    psi_obj = make_psi(psi, tau=0.7, margin=1.3)
    program = gram_program(setting, psi, num_classes=c, num_negatives=k, tau=0.7, margin=1.3)
    assert_allclose(program.weights.sum(), 1.0, rtol=0, atol=100 * EPS)
    for sphere in (True, False):
        g = _random_gram(c, rng, sphere=sphere)
        expected = naive_program_objective(setting, psi_obj, g, num_negatives=k)
        assert_allclose(program_objective(program, g), expected, rtol=1e-13, atol=1e-14)


@pytest.mark.parametrize("setting,psi", [(s, p) for s in ("scl", "ucl") for p in ("infonce", "infonce-mean")])
def test_gradient_matches_central_differences(setting, psi):
    rng = np.random.default_rng(1)
    program = gram_program(setting, psi, num_classes=3, num_negatives=2, tau=0.5)
    g = _random_gram(3, rng)
    grad = program_gradient(program, g)
    h = 1e-6  # central differences: error O(h^2) ~ 1e-12, rounding O(eps/h) ~ 1e-10
    numeric = np.zeros_like(g)
    for i, j in itertools.product(range(3), repeat=2):
        e = np.zeros_like(g)
        e[i, j] = h
        numeric[i, j] = (program_objective(program, g + e) - program_objective(program, g - e)) / (2 * h)
    assert_allclose(grad, numeric, atol=1e-8)


def test_etf_value_is_the_closed_form():
    for setting, psi, c, k in itertools.product(("scl", "ucl"), PSI, (2, 3, 5), (1, 2)):
        program = gram_program(setting, psi, num_classes=c, num_negatives=k, tau=0.5, margin=2.5)
        expected = nc_value(setting, psi, num_classes=c, num_negatives=k, tau=0.5, margin=2.5)
        assert_allclose(program_objective(program, etf_gram(c)), expected, rtol=1e-13, atol=1e-14)


def test_anchor_ucl_infonce_c4_k2():
    cert = certify_gram_program("ucl", "infonce", num_classes=4, num_negatives=2, tau=0.5, domain="sphere")
    assert cert.passed, cert.checks
    assert_allclose(cert.primal_value, 0.4145938, atol=5e-8)  # theory.md section 6 quotes 7 digits
    assert_allclose(cert.dual_bound, 0.4145938, atol=5e-8)
    assert cert.distance_to_etf <= cert.tolerances.gram


@pytest.mark.parametrize("setting,psi,domain,c,k", [
    ("scl", "infonce", "ball", 4, 2),
    ("ucl", "infonce", "ball", 3, 1),
    ("ucl", "infonce-mean", "sphere", 5, 2),
    ("scl", "triplet", "sphere", 5, 1),
    ("ucl", "triplet", "ball", 4, 2),
])
def test_true_certificates_pass(setting, psi, domain, c, k):
    result = certificate_check(setting, psi, num_classes=c, num_negatives=k, domain=domain)
    assert result.status == "pass", result.details["checks"]
    d = result.details
    assert d["primal_min_eigenvalue"] >= -d["tolerances"]["feas"]
    assert 0 <= d["gap"] + d["tolerances"]["value"] and d["gap"] <= d["tolerances"]["gap"]
    assert_allclose(d["primal_value"], d["closed_form"], atol=1e-6)


def test_scs_fallback_solver_also_certifies():
    result = certificate_check("scl", "infonce", num_classes=3, num_negatives=1, domain="sphere", solver="scs")
    assert result.method == "cvxpy-scs"
    assert result.status == "pass", result.details["checks"]
    assert result.details["solver_reported_gap"] is not None


@pytest.mark.parametrize("offset", [1e-3, -1e-3])
def test_wrong_closed_form_fails(offset):
    true = nc_value("ucl", "infonce", num_classes=4, num_negatives=2, tau=0.5)
    cert = certify_gram_program("ucl", "infonce", num_classes=4, num_negatives=2, tau=0.5,
                                claimed_value=true + offset)
    assert not cert.passed
    assert cert.checks["claimed_value_is_optimum"] is False
    result = certificate_check("ucl", "infonce", num_classes=4, num_negatives=2, tau=0.5, claimed_value=true + offset)
    assert result.status == "fail" and result.details["closed_form_source"] == "caller"


def test_claimed_optimum_too_low_fails_even_with_the_solver_point():
    # A value below the certified dual bound cannot be the minimum, whatever Gram is claimed.
    cert = certify_gram_program("scl", "infonce-mean", num_classes=5, num_negatives=1, domain="ball",
                                claimed_value=0.0, claimed_gram=np.eye(5))
    assert not cert.passed
    assert cert.checks["claimed_value_is_optimum"] is False


def test_off_etf_gram_claimed_optimal_fails():
    # Two antipodal pairs in orthogonal planes: feasible (PSD, unit diagonal), sum zero, not an ETF.
    v = np.array([[1, 0], [-1, 0], [0, 1], [0, -1]], dtype=float)
    g = v @ v.T
    cert = certify_gram_program("ucl", "infonce", num_classes=4, num_negatives=1, claimed_gram=g)
    assert not cert.passed
    assert cert.checks["claimed_gram_feasible"] is True
    assert cert.checks["claimed_gram_attains_bound"] is False
    assert cert.checks["claimed_gram_kkt"] is False
    assert cert.checks["optimizer_is_claimed_gram"] is False


def test_infeasible_gram_claim_fails():
    g = 2.0 * etf_gram(3)  # diagonal 2 > 1
    cert = certify_gram_program("scl", "infonce", num_classes=3, num_negatives=1, domain="ball", claimed_gram=g)
    assert cert.checks["claimed_gram_feasible"] is False
    assert not cert.passed


def test_triplet_non_unique_minimizer_is_reported_not_required():
    # SCL, margin 1: every feasible M with non-positive off-diagonal is optimal (value 0), e.g. M = I.
    cert = certify_gram_program("scl", "triplet", num_classes=4, num_negatives=1, claimed_gram=np.eye(4))
    assert cert.passed, cert.checks
    assert cert.minimizer_unique is False
    assert cert.checks["optimizer_is_claimed_gram"] is None
    # ... but a non-optimal Gram (all points equal) is refuted by its value.
    bad = certify_gram_program("scl", "triplet", num_classes=4, num_negatives=1, claimed_gram=np.ones((4, 4)))
    assert bad.checks["claimed_gram_attains_bound"] is False and not bad.passed


def test_rotated_etf_gram_claim_passes():
    v = simplex_etf(4, 5, rng=np.random.default_rng(3))
    cert = certify_gram_program("scl", "infonce", num_classes=4, num_negatives=2, claimed_gram=v @ v.T)
    assert cert.passed, cert.checks


def test_invalid_arguments_raise():
    with pytest.raises(ValueError, match="setting"):
        gram_program("hscl", "infonce", num_classes=3, num_negatives=1)
    with pytest.raises(ValueError, match="psi"):
        gram_program("scl", "hinge", num_classes=3, num_negatives=1)
    with pytest.raises(ValueError, match="num_classes"):
        gram_program("scl", "infonce", num_classes=1, num_negatives=1)
    with pytest.raises(ValueError, match="claimed_gram"):
        certify_gram_program("scl", num_classes=3, num_negatives=1, claimed_gram=np.eye(2))
    with pytest.raises(ValueError, match="solver"):
        certify_gram_program("scl", num_classes=3, num_negatives=1, solver="mosek")


def test_grids():
    quick, full = certificate_cases(quick=True), certificate_cases(quick=False)
    assert len(quick) < 10 < len(full)
    assert len(checks(quick=True)) == len(quick)
    assert any(c.setting == "ucl" and c.num_classes == 4 and c.num_negatives == 2 and c.tau == 0.5 for c in quick)


_CERT_CACHE = {}


def _cached_certificate(domain):
    if domain not in _CERT_CACHE:
        _CERT_CACHE[domain] = certify_gram_program("ucl", "infonce", num_classes=4, num_negatives=2, tau=0.5,
                                                   domain=domain)
    return _CERT_CACHE[domain]


@settings(max_examples=25)
@given(seed=st.integers(0, 2**32 - 1), domain=st.sampled_from(["ball", "sphere"]))
def test_weak_duality_every_feasible_gram_is_above_the_certified_bound(seed, domain):
    # Property: the certified bound is a lower bound on F over the whole feasible set (not just at M*).
    cert = _cached_certificate(domain)
    program = gram_program("ucl", "infonce", num_classes=4, num_negatives=2, tau=0.5, domain=domain)
    g = _random_gram(4, np.random.default_rng(seed), sphere=domain == "sphere")
    assert program_objective(program, g) >= cert.dual_bound - 1e-12
    assert program_objective(program, g) >= cert.claimed_gram_kkt_bound - 1e-12


def test_float_etf_claim_counts_as_feasible_upper_bound():
    # the float ETF Gram at C = 3 has lambda_min ~ -5.6e-17; before the fix the exact ">= 0" test dropped
    # F(ETF) from the upper bound of criterion 7, leaving only the solver's value
    assert np.linalg.eigvalsh(etf_gram(3)).min() < 0
    cert = certify_gram_program("scl", "infonce", num_classes=3, num_negatives=1, tau=0.5)
    assert cert.passed, cert.checks
    assert cert.value_upper_bound == min(cert.primal_value, cert.claimed_gram_value)
    assert cert.value_lower_bound <= cert.claimed_value <= cert.value_upper_bound + cert.tolerances.value
