"""Convex certificates (docs/theory.md section 6): program reduction, true claims pass, false claims fail."""

import itertools
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.testing import assert_allclose

import proofs_check.certificates as certificates
from ncgeom.geometry import etf_gram, simplex_etf
from ncgeom.losses import make_psi
from ncgeom.theory import nc_value
from ncgeom.vocabulary import PSI_NAMES, PsiName
from proofs_check.certificates import (
    PROGRAM_SETTINGS,
    GramCertificate,
    ProgramSetting,
    certificate_cases,
    certificate_check,
    certify_gram_program,
    checks,
    gram_program,
    naive_program_objective,
    program_gradient,
    program_objective,
)

EPS = np.finfo(np.float64).eps
PSI = PSI_NAMES


def _random_gram(c, rng, *, sphere=True):
    v = rng.standard_normal((c, c))
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    if not sphere:
        v *= rng.uniform(0.3, 1.0, size=(c, 1))
    return v @ v.T


def _certify(setting: ProgramSetting, psi: PsiName = "infonce", **kwargs: Any) -> GramCertificate:
    """certify_gram_program, which returns None only when no solver succeeded: a failure here."""
    cert = certify_gram_program(setting, psi, **kwargs)
    assert cert is not None, "no solver succeeded"
    return cert


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
    for setting, psi, c, k in itertools.product(PROGRAM_SETTINGS, PSI, (2, 3, 5), (1, 2)):
        program = gram_program(setting, psi, num_classes=c, num_negatives=k, tau=0.5, margin=2.5)
        expected = nc_value(setting, psi, num_classes=c, num_negatives=k, tau=0.5, margin=2.5)
        assert_allclose(program_objective(program, etf_gram(c)), expected, rtol=1e-13, atol=1e-14)


def _rounding(program) -> float:
    # F is a weighted mean (weights sum to 1) of num_terms O(1) psi values: evaluating it rounds by at most
    # ~num_terms * eps; two evaluations (solver point, ETF) are compared, hence the factor 2.
    return 2 * program.num_terms * EPS


def _solver_slack(details, program) -> float:
    # F(M0) - F* at the projected solver point M0 is at most the solver's own duality gap at its iterate
    # plus the change of F made by projecting that iterate onto the feasible set (primal - solver_value),
    # plus rounding. ``details``: GramCertificate.to_dict() or CheckResult.details (same keys).
    assert details["solver_reported_gap"] is not None, "the solver must report its duality gap"
    return (abs(details["solver_reported_gap"]) + abs(details["primal_value"] - details["solver_value"])
            + _rounding(program))


def _sphere_curvature(program, gram) -> float:
    """Smallest eigenvalue of the Hessian of F at ``gram`` on the sphere's tangent space (symmetric, zero diagonal).

    Central differences of the analytic gradient, h = 1e-5: truncation O(h^2) ~ 1e-10, rounding
    O(eps / h) ~ 1e-11, against curvatures ~1e-2.
    """
    c = program.num_classes
    basis = []
    for i, j in itertools.combinations(range(c), 2):
        e = np.zeros((c, c))
        e[i, j] = e[j, i] = 1 / np.sqrt(2)  # orthonormal in the Frobenius inner product
        basis.append(e)
    h = 1e-5
    hess = np.array([[np.sum((program_gradient(program, gram + h * eb) - program_gradient(program, gram - h * eb)) * ea)
                      / (2 * h) for eb in basis] for ea in basis])
    return float(np.linalg.eigvalsh((hess + hess.T) / 2).min())


def test_anchor_ucl_infonce_c4_k2():
    # docs/theory.md section 6 anchor: UCL, infonce, C = 4, k = 2, tau = 0.5 on the sphere. Every tolerance below
    # is what the certificate and the solver themselves certify (no digits copied from a run).
    kw: dict[str, Any] = {"num_classes": 4, "num_negatives": 2, "tau": 0.5}
    cert = _certify("ucl", "infonce", domain="sphere", **kw)
    program = gram_program("ucl", "infonce", domain="sphere", **kw)
    closed = nc_value("ucl", "infonce", **kw)
    assert cert.passed, cert.checks
    assert cert.solver == "CLARABEL" and cert.checks["solver_gap_small"] is True  # Clarabel's gap is reported
    tol = cert.tolerances

    # 1. The closed form lies between the certified (weak-duality) lower bound and the value at a feasible
    #    point. The lower bound holds for exactly feasible Grams; the float ETF Gram is feasible to
    #    tol.feas (lambda_min ~ -1e-16), which is the certificate's own feasibility tolerance.
    assert cert.gap == cert.primal_value - cert.dual_bound and 0 <= cert.gap <= tol.gap
    assert cert.dual_bound - tol.feas <= closed <= cert.primal_value + _rounding(program)

    # 2. The primal value is within the solver's reported gap of the closed form (F* = closed by 1).
    slack = _solver_slack(cert.to_dict(), program)
    assert slack <= tol.value  # the solver's gap is far below the certificate's value tolerance
    assert 0 <= cert.primal_value - closed + _rounding(program) and cert.primal_value - closed <= slack

    # 3. The optimizer is as close to the ETF Gram G as the gap allows. F is strongly convex on the sphere's
    #    tangent space with modulus mu (the smaller Hessian minimum of G and the solver's optimizer, the ends
    #    of a segment ~1e-5 long) and G is optimal,
    #    so mu / 2 ||M0 - G||^2 <= F(M0) - F(G) <= slack. The reported distance is that of the solver's
    #    iterate M, which the projection onto the feasible set moves by at most
    #    2 C (|lambda_min(M)^-| + max |diag(M) - 1|) (first order in both violations).
    gram = np.asarray(cert.optimizer_gram)
    mu = min(_sphere_curvature(program, etf_gram(4)), _sphere_curvature(program, gram))
    assert mu > 0
    projection = 2 * 4 * (max(0.0, -cert.primal_min_eigenvalue) + cert.primal_diag_violation)
    assert cert.distance_to_etf <= np.sqrt(2 * slack / mu) + projection
    assert cert.distance_to_etf <= tol.gram


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
    assert result.evidence == "numerical"  # a solver's optimizer and a floating-point weak-duality bound
    d = result.details
    assert d["primal_min_eigenvalue"] >= -d["tolerances"]["feas"]
    assert 0 <= d["gap"] + d["tolerances"]["value"] and d["gap"] <= d["tolerances"]["gap"]
    # the closed form is within the certified interval, and the solver's value within the solver's own
    # reported duality gap (plus the projection's change of F and rounding) of it
    assert d["dual_bound"] - d["tolerances"]["feas"] <= d["closed_form"]
    program = gram_program(setting, psi, num_classes=c, num_negatives=k, domain=domain)
    assert -_rounding(program) <= d["primal_value"] - d["closed_form"] <= _solver_slack(d, program)


def test_scs_fallback_solver_also_certifies():
    result = certificate_check("scl", "infonce", num_classes=3, num_negatives=1, domain="sphere", solver="scs")
    assert result.method == "cvxpy-scs"
    assert result.status == "pass", result.details["checks"]
    d = result.details
    program = gram_program("scl", "infonce", num_classes=3, num_negatives=1, domain="sphere")
    assert -_rounding(program) <= d["primal_value"] - d["closed_form"] <= _solver_slack(d, program)


@pytest.mark.parametrize("offset", [1e-3, -1e-3])
def test_wrong_closed_form_fails(offset):
    true = nc_value("ucl", "infonce", num_classes=4, num_negatives=2, tau=0.5)
    cert = _certify("ucl", "infonce", num_classes=4, num_negatives=2, tau=0.5,
                                claimed_value=true + offset)
    assert not cert.passed
    assert cert.checks["claimed_value_is_optimum"] is False
    result = certificate_check("ucl", "infonce", num_classes=4, num_negatives=2, tau=0.5, claimed_value=true + offset)
    assert result.status == "fail" and result.details["closed_form_source"] == "caller"


def test_claimed_optimum_too_low_fails_even_with_the_solver_point():
    # A value below the certified dual bound cannot be the minimum, whatever Gram is claimed.
    cert = _certify("scl", "infonce-mean", num_classes=5, num_negatives=1, domain="ball",
                                claimed_value=0.0, claimed_gram=np.eye(5))
    assert not cert.passed
    assert cert.checks["claimed_value_is_optimum"] is False


def test_off_etf_gram_claimed_optimal_fails():
    # Two antipodal pairs in orthogonal planes: feasible (PSD, unit diagonal), sum zero, not an ETF.
    v = np.array([[1, 0], [-1, 0], [0, 1], [0, -1]], dtype=float)
    g = v @ v.T
    cert = _certify("ucl", "infonce", num_classes=4, num_negatives=1, claimed_gram=g)
    assert not cert.passed
    assert cert.checks["claimed_gram_feasible"] is True
    assert cert.checks["claimed_gram_attains_bound"] is False
    assert cert.checks["claimed_gram_kkt"] is False
    assert cert.checks["optimizer_is_claimed_gram"] is False


def test_infeasible_gram_claim_fails():
    g = 2.0 * etf_gram(3)  # diagonal 2 > 1
    cert = _certify("scl", "infonce", num_classes=3, num_negatives=1, domain="ball", claimed_gram=g)
    assert cert.checks["claimed_gram_feasible"] is False
    assert not cert.passed


def test_triplet_non_unique_minimizer_is_reported_not_required():
    # SCL, margin 1: every feasible M with non-positive off-diagonal is optimal (value 0), e.g. M = I.
    cert = _certify("scl", "triplet", num_classes=4, num_negatives=1, claimed_gram=np.eye(4))
    assert cert.passed, cert.checks
    assert cert.minimizer_unique is False
    assert cert.checks["optimizer_is_claimed_gram"] is None
    # ... but a non-optimal Gram (all points equal) is refuted by its value.
    bad = _certify("scl", "triplet", num_classes=4, num_negatives=1, claimed_gram=np.ones((4, 4)))
    assert bad.checks["claimed_gram_attains_bound"] is False and not bad.passed


def test_rotated_etf_gram_claim_passes():
    v = simplex_etf(4, 5, rng=np.random.default_rng(3))
    cert = _certify("scl", "infonce", num_classes=4, num_negatives=2, claimed_gram=v @ v.T)
    assert cert.passed, cert.checks


def test_invalid_arguments_raise():
    not_a_psi: Any = "hinge"  # outside the Literal on purpose: the runtime check is under test
    not_a_solver: Any = "mosek"
    with pytest.raises(ValueError, match="setting"):
        gram_program("hscl", "infonce", num_classes=3, num_negatives=1)
    with pytest.raises(ValueError, match="psi"):
        gram_program("scl", not_a_psi, num_classes=3, num_negatives=1)
    with pytest.raises(ValueError, match="num_classes"):
        gram_program("scl", "infonce", num_classes=1, num_negatives=1)
    with pytest.raises(ValueError, match="claimed_gram"):
        certify_gram_program("scl", num_classes=3, num_negatives=1, claimed_gram=np.eye(2))
    with pytest.raises(ValueError, match="solver"):
        certify_gram_program("scl", num_classes=3, num_negatives=1, solver=not_a_solver)


def test_grids():
    quick, full = certificate_cases(quick=True), certificate_cases(quick=False)
    assert len(quick) < 10 < len(full)
    assert len(checks(quick=True)) == len(quick)
    assert any(c.setting == "ucl" and c.num_classes == 4 and c.num_negatives == 2 and c.tau == 0.5 for c in quick)


_CERT_CACHE: dict[str, GramCertificate] = {}


def _cached_certificate(domain):
    if domain not in _CERT_CACHE:
        _CERT_CACHE[domain] = _certify("ucl", "infonce", num_classes=4, num_negatives=2, tau=0.5,
                                                   domain=domain)
    return _CERT_CACHE[domain]


@settings(max_examples=25)
@given(seed=st.integers(0, 2**32 - 1), domain=st.sampled_from(["ball", "sphere"]))
def test_weak_duality_every_feasible_gram_is_above_the_certified_bound(seed, domain):
    # Property: the certified bound is a lower bound on F over the whole feasible set (not just at M*).
    cert = _cached_certificate(domain)
    program = gram_program("ucl", "infonce", num_classes=4, num_negatives=2, tau=0.5, domain=domain)
    g = _random_gram(4, np.random.default_rng(seed), sphere=domain == "sphere")
    # g = V V^T with unit rows is feasible up to rounding of its entries (~eps), which moves F by ~eps;
    # the bounds themselves are evaluated with rounding _rounding(program)
    assert program_objective(program, g) >= cert.dual_bound - _rounding(program)
    assert program_objective(program, g) >= cert.claimed_gram_kkt_bound - _rounding(program)


def test_float_etf_claim_counts_as_feasible_upper_bound():
    # the float ETF Gram at C = 3 has lambda_min ~ -5.6e-17; before the fix the exact ">= 0" test dropped
    # F(ETF) from the upper bound of criterion 7, leaving only the solver's value
    assert np.linalg.eigvalsh(etf_gram(3)).min() < 0
    cert = _certify("scl", "infonce", num_classes=3, num_negatives=1, tau=0.5)
    assert cert.passed, cert.checks
    assert cert.value_upper_bound == min(cert.primal_value, cert.claimed_gram_value)
    assert cert.value_lower_bound <= cert.claimed_value <= cert.value_upper_bound + cert.tolerances.value
