"""HUCL over collapsed configurations (docs/theory.md section 4, open problem): the losses, the thresholds by
dimension (proofs_check.hucl), their independent cross-checks and the verify records."""

import importlib
import itertools
import json
import math
from dataclasses import FrozenInstanceError

import numpy as np
import pytest
import torch
from numpy.testing import assert_allclose
from scipy.optimize import brentq

import proofs_check.hucl as hucl
from ncgeom.geometry import simplex_etf
from ncgeom.losses import batch_loss, make_psi
from ncgeom.theory import batch_nc_value, nc_value
from ncgeom.vocabulary import EVIDENCE
from proofs_check.certificates import gram_program, program_objective
from proofs_check.hucl import checkers, jets, local, search
from proofs_check.hucl.batch import batch_loss_pair, block_direction, field_curvature, stationarity
from proofs_check.hucl.loss import batch_count_assignments, collapsed_batch_loss, hucl_collapsed_loss

EPS = float(np.finfo(np.float64).eps)
PSI = make_psi("infonce")


def _loop_hucl(v, beta, psi, k):
    # Reference: plain loops over anchor class and negative tuples with tilted weights.
    v = v / np.linalg.norm(v, axis=1, keepdims=True)
    m = v @ v.T
    c = len(m)
    total = 0.0
    for a in range(c):
        w = np.exp(beta * m[a]) / np.exp(beta * m[a]).sum()
        for tup in itertools.product(range(c), repeat=k):
            total += np.prod([w[b] for b in tup]) * float(psi(np.array([m[a, b] - 1.0 for b in tup])))
    return total / c


def _slope_k1(c, beta):
    # d/drho at rho = -1/(C-1) of q log 2 + (1 - q) g(rho), q = e^b / (e^b + (C-1) e^(b rho)), tau = 1.
    rho = -1.0 / (c - 1)
    q = math.exp(beta) / (math.exp(beta) + (c - 1) * math.exp(beta * rho))
    g = math.log1p(math.exp(rho - 1))
    return (1 - q) * (1 / (1 + math.exp(1 - rho)) - beta * q * (math.log(2) - g))


@pytest.mark.parametrize("name", ["proofs_check.hucl", "proofs_check.hucl.loss", "proofs_check.hucl.jets",
                                  "proofs_check.hucl.local", "proofs_check.hucl.search", "proofs_check.hucl.batch",
                                  "proofs_check.hucl.exploration", "proofs_check.hucl.checkers"])
def test_all_names_exist_once(name):
    module = importlib.import_module(name)
    assert len(set(module.__all__)) == len(module.__all__)
    for attr in module.__all__:
        assert hasattr(module, attr), attr


# --- the losses --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("k", [1, 2])
def test_loss_matches_loop_reference(k):
    rng = np.random.default_rng(k)
    psi = make_psi("infonce", tau=0.5)
    for beta in (0.0, 2.0, 10.0):
        v = rng.standard_normal((4, 3))
        value = float(hucl_collapsed_loss(torch.as_tensor(v), beta=beta, num_negatives=k, psi=psi))
        assert_allclose(value, _loop_hucl(v, beta, psi, k), rtol=1e-12)
    batch = torch.as_tensor(rng.standard_normal((5, 4, 3)))  # leading dimensions are independent configurations
    values = hucl_collapsed_loss(batch, beta=1.0, num_negatives=k, psi=psi)
    assert_allclose(values.numpy(), [_loop_hucl(b, 1.0, psi, k) for b in batch.numpy()], rtol=1e-12)


@pytest.mark.parametrize("k", [1, 2, 3])
def test_etf_value_is_nc_value(k):
    etf = torch.as_tensor(simplex_etf(4, 4, rng=np.random.default_rng(0)))
    for beta in (0.0, 1.0, 5.0, 30.0):
        value = float(hucl_collapsed_loss(etf, beta=beta, num_negatives=k, psi=PSI))
        assert_allclose(value, nc_value("hucl", "infonce", num_classes=4, num_negatives=k, beta=beta), rtol=1e-12)


def test_beta_zero_is_the_ucl_gram_program():
    # Independent method: at beta = 0 HUCL is UCL, whose collapsed loss is the section 6 program on the sphere.
    v = np.random.default_rng(5).standard_normal((5, 5))
    vn = v / np.linalg.norm(v, axis=1, keepdims=True)
    program = gram_program("ucl", "infonce", num_classes=5, num_negatives=2)
    value = float(hucl_collapsed_loss(torch.as_tensor(v), beta=0.0, num_negatives=2, psi=PSI))
    assert_allclose(value, program_objective(program, vn @ vn.T), rtol=1e-12)


def test_two_class_example():
    value = hucl_collapsed_loss(torch.tensor([[1.0], [-1.0]], dtype=torch.float64), beta=0.0, num_negatives=1, psi=PSI)
    assert_allclose(float(value), 0.5 * math.log(2) + 0.5 * math.log1p(math.exp(-2)), rtol=1e-14)


def test_count_assignments_are_the_sampler_counts_on_every_class():
    rows = batch_count_assignments(3, 7)
    assert sorted(map(tuple, rows)) == [(2, 2, 3), (2, 3, 2), (3, 2, 2)]
    rows = batch_count_assignments(10, 128)  # the claim-3 batch: eight 13s and two 12s on any two classes
    assert rows.shape == (45, 10) and len({tuple(r) for r in rows}) == 45
    assert (rows.sum(axis=1) == 128).all() and ((rows == 12).sum(axis=1) == 2).all()
    assert sorted(map(tuple, batch_count_assignments(4, 6))) == sorted(set(itertools.permutations((2, 2, 2, 0))))


@pytest.mark.parametrize("beta", [0.0, 2.0, 30.0])
def test_collapsed_batch_loss_is_batch_loss_on_the_expanded_batch(beta):
    # Reference: ncgeom's weighted estimator on the batch with n_c copies of v_c (value and detached gradient).
    rng = np.random.default_rng(3)
    counts = np.array([3, 2, 4, 1])
    u = torch.as_tensor(rng.standard_normal((4, 3))).requires_grad_(True)
    v = u / u.norm(dim=1, keepdim=True)
    gram = v @ v.T
    mine = collapsed_batch_loss(gram, counts[None], beta=beta, tau=0.5, num_negatives=2, weights_gram=gram.detach())
    labels = torch.as_tensor(np.repeat(np.arange(4), counts))
    ref = batch_loss(v[labels], labels, "hucl", beta=beta, tau=0.5, num_negatives=2, estimator="weighted",
                     detach_weights=True, backend="dense")
    assert_allclose(float(mine.detach()), float(ref.detach()), rtol=1e-13)
    (g_mine,) = torch.autograd.grad(mine, u, retain_graph=True)
    (g_ref,) = torch.autograd.grad(ref, u)
    torch.testing.assert_close(g_mine, g_ref, rtol=1e-12, atol=1e-14)
    at_nc = collapsed_batch_loss(torch.as_tensor(simplex_etf(4) @ simplex_etf(4).T), counts[None], beta=beta, tau=0.5,
                                 num_negatives=2)
    assert_allclose(float(at_nc), batch_nc_value("hucl", class_counts=counts, num_negatives=2, beta=beta, tau=0.5),
                    rtol=1e-13)


# --- the local threshold -----------------------------------------------------------------------------------

@pytest.mark.parametrize(("c", "d"), [(3, 2), (4, 3), (4, 4), (10, 9)])
def test_autograd_hessian_spectrum_is_the_block_eigenvalues(c, d):
    # Independent: the full autograd Hessian (Helmert coordinates, every tangent direction) has exactly the jet
    # eigenvalues with the block multiplicities (C - 1, C(C - 3)/2, 1): the symmetry reduction is right.
    for beta in (0.0, 1.0, 3.0):
        h = local.hessian_at_nc(num_classes=c, dim=d, beta=beta, psi=PSI)
        blocks = jets.reduced_curvatures(num_classes=c, dim=d, beta=beta)
        expected = np.sort(np.concatenate([[v] * jets.block_multiplicity(b, c) for b, v in blocks.items()]))
        assert h.shape == (expected.size, expected.size)
        # float64 sums of C^2 terms of size O(1) on both sides
        assert_allclose(np.linalg.eigvalsh((h + h.T) / 2), expected, atol=1e3 * EPS * c * c)


@pytest.mark.parametrize(("c", "block"), [(4, "standard"), (4, "two-row"), (4, "lift"), (10, "standard")])
def test_block_eigenvalue_matches_finite_differences_of_the_loss(c, block):
    # Independent: f(t) = L(normalize(V + t delta)) by central second differences, f''(0) / ||delta||^2.
    v0, delta = (torch.as_tensor(a) for a in block_direction(block, c))
    h = 1e-4
    for beta in (0.5, 1.5):
        def f(t, beta=beta):
            return float(hucl_collapsed_loss(v0 + t * delta, beta=beta, num_negatives=1, psi=PSI))
        second = (f(h) - 2 * f(0.0) + f(-h)) / h**2 / float((delta * delta).sum())
        # rounding 4 eps |f| / h^2 ~ 1e-7 plus truncation h^2 |f''''| / 12 with |f''''| = O(1)
        assert_allclose(second, jets.reduced_curvature(block, num_classes=c, beta=beta), atol=4 * EPS / h**2 + h**2)


@pytest.mark.parametrize("c", [4, 10])
def test_field_jacobian_of_the_full_gradient_is_the_hessian(c):
    # Third computation: forward-mode derivative of the autograd gradient field (the batch module's machinery).
    for block in jets.blocks_for(c, c):
        mu = field_curvature(lambda u, w: hucl_collapsed_loss(u, beta=1.3, num_negatives=1, psi=PSI), block,
                             num_classes=c)
        assert_allclose(mu, jets.reduced_curvature(block, num_classes=c, beta=1.3), atol=1e3 * EPS * c * c)


@pytest.mark.parametrize("d", [3, 4])
def test_local_threshold_agrees_between_reduced_and_autograd_hessian(d):
    reduced = local.local_threshold(num_classes=4, dim=d)
    hessian = local.local_threshold(num_classes=4, dim=d, method="hessian", grid_step=1 / 8, tol=1e-9)
    assert reduced.bracket is not None and hessian.bracket is not None
    assert reduced.bracket[1] - reduced.bracket[0] <= reduced.tol
    assert abs(reduced.beta - hessian.beta) <= reduced.tol + hessian.tol  # both brackets hold the sign change
    assert reduced.block == ("lift" if d == 4 else "standard")


@pytest.mark.parametrize("c", [3, 4, 10])
def test_d_equal_c_threshold_is_the_equiangular_root(c):
    # d = C: the lift block (the equiangular path) turns first; its root from the closed-form k = 1 slope
    # (brentq, xtol 1e-14) must lie in the certified bracket of the bisection.
    expected = brentq(lambda b: _slope_k1(c, b), 1e-3, 10.0, xtol=1e-14)
    res = local.local_threshold(num_classes=c, dim=c)
    assert res.block == "lift"
    assert res.bracket[0] - 1e-14 <= expected <= res.bracket[1] + 1e-14
    if c == 4:
        assert_allclose(res.beta, 0.87737, atol=5e-6)  # the value docs/theory.md and README quote (5 digits)
    for beta in (0.0, 0.5, 1.0, 3.0):
        assert_allclose(hucl.equiangular_slope_at_nc(num_classes=c, num_negatives=1, beta=beta, psi=PSI),
                        _slope_k1(c, beta), rtol=1e-12, atol=1e-15)


def test_d_equal_c_minus_one_has_no_lift_and_a_later_threshold():
    assert jets.blocks_for(4, 3) == ("standard", "two-row") and jets.blocks_for(3, 2) == ("standard",)
    for c in (3, 4, 10):
        low, high = local.local_threshold(num_classes=c, dim=c - 1), local.local_threshold(num_classes=c, dim=c)
        assert low.beta > high.beta
        assert high.per_block["standard"] == low.per_block["standard"]  # the in-span blocks do not see d


def test_interval_enclosure_contains_the_float_value():
    for block in ("standard", "two-row", "lift"):
        x = jets.reduced_curvature(block, num_classes=4, beta=1.1, arithmetic="interval")
        y = jets.reduced_curvature(block, num_classes=4, beta=1.1)
        assert x.a <= y + 1e-15 and y - 1e-15 <= x.b and float(x.delta) < 1e-12


def test_certificate_passes_at_the_threshold_and_fails_on_a_wrong_input():
    good = checkers.check_local_certificate(4, 3)
    assert good.status == "pass" and good.evidence == "exact"
    assert all(lo > 0 for lo, _ in good.details["below"].values())
    assert good.details["above"]["standard"][1] < 0
    # the d = C threshold is not the d = C - 1 one: both sides are stable there
    wrong = checkers.check_local_certificate(4, 3, beta=local.local_threshold(num_classes=4, dim=4).beta)
    assert wrong.status == "fail"
    assert checkers.check_local_certificate(4, 3, beta=1.4).status == "fail"  # both sides unstable
    agree = checkers.check_local_agreement(4, 3)
    assert agree.status == "pass" and agree.evidence == "independent"
    assert checkers.check_local_agreement(4, 3, beta=1.2).status == "fail"


def test_validation():
    with pytest.raises(ValueError, match="dim"):
        local.local_threshold(num_classes=4, dim=2)
    with pytest.raises(ValueError, match="block"):
        jets.reduced_curvature("three-row", num_classes=4, beta=1.0)
    with pytest.raises(ValueError, match="num_classes >= 4"):
        jets.reduced_curvature("two-row", num_classes=3, beta=1.0)
    with pytest.raises(ValueError, match="beta"):
        hucl.hucl_gram_loss(torch.eye(3, dtype=torch.float64), beta=-0.5, num_negatives=1, psi=PSI)
    with pytest.raises(ValueError, match="num_negatives"):
        hucl.hucl_gram_loss(torch.eye(3, dtype=torch.float64), beta=0.5, num_negatives=0, psi=PSI)
    with pytest.raises(ValueError, match="beta"):
        hucl.equiangular_slope_at_nc(num_classes=3, num_negatives=1, beta=float("nan"), psi=PSI)
    with pytest.raises(ValueError, match="grid"):
        search.search_switch(num_classes=3, dim=2, grid=(1.0, 0.5), loss_at=None, nc_value_at=None, generator=None)


def test_first_negative_brackets_the_first_sign_change():
    assert local.first_negative(lambda b: 1.0 - b, grid_step=0.25, beta_max=4.0, tol=1e-9) is not None
    lo, hi = local.first_negative(lambda b: (b - 1.3) * (b - 3.0), grid_step=0.25, beta_max=4.0, tol=1e-9)
    assert lo <= 1.3 <= hi and hi - lo <= 1e-9
    assert local.first_negative(lambda b: -1.0, grid_step=0.25, beta_max=4.0, tol=1e-9) == (0.0, 0.0)
    assert local.first_negative(lambda b: 1.0, grid_step=0.25, beta_max=4.0, tol=1e-9) is None


# --- the global switch -------------------------------------------------------------------------------------

def test_describe_gram_names_the_patterns():
    assert search.describe_gram(simplex_etf(4) @ simplex_etf(4).T).startswith("near the ETF")
    rho = 0.1
    assert search.describe_gram((1 - rho) * np.eye(4) + rho).startswith("equiangular, all inner products 0.1000")
    v = np.array([[1.0, 0, 0], [-1.0, 0, 0], [0, 1.0, 0], [0, 0, 1.0]])
    text = search.describe_gram(v @ v.T)
    assert text.startswith("1 near-antipodal pair(s) (inner products -1.0000)") and text.endswith("rank 3")


def test_switch_in_d_equal_c_minus_one_is_first_order_and_certified():
    # C = 3, d = 2: a configuration with a near-antipodal pair beats NC before NC stops being a local minimizer.
    loc = checkers._local(3, 2)
    res = checkers._switch(3, 2, True)
    assert res.kind == "first-order" and res.bracket[0] is not None
    assert res.bracket[1] - res.bracket[0] <= res.beta_tol
    assert res.bracket[1] < loc.bracket[0]  # before the local threshold
    assert res.interval_gap[1] < 0  # the witness beats NC in interval arithmetic
    assert "near-antipodal pair" in res.description
    # below the bracket the search did not find anything better than NC (up to its value tolerance)
    assert all(g >= -res.value_tol for g in res.best_minus_nc[:-1])
    for name in ("check_global_switch", "check_switch_witness", "check_switch_consistency"):
        record = getattr(checkers, name)(3, 2, quick=True)
        assert record.evidence in EVIDENCE and record.status in ("info", "pass")


def test_interval_gap_of_nc_itself_contains_zero():
    lo, hi = search.interval_loss_gap(simplex_etf(4, 3), beta=1.0)
    assert lo <= 0 <= hi and hi - lo < 1e-12


# --- the detached-weight batch objective -------------------------------------------------------------------

def test_detached_field_is_stationary_at_nc_only_on_average():
    counts = batch_count_assignments(10, 128)
    mean_norm, single = stationarity(counts, num_classes=10, beta=2.0, tau=1.0, num_negatives=1)
    assert mean_norm < 1e3 * EPS  # the expected field vanishes at NC (symmetry)
    assert single > 1e-6  # a single batch (unequal counts) pushes NC


def test_detached_and_full_batch_fields_differ_and_agree_at_beta_zero():
    counts = batch_count_assignments(10, 128)
    for beta, same in ((0.0, True), (2.0, False)):
        det = field_curvature(batch_loss_pair(counts, beta=beta, tau=1.0, num_negatives=1, detach=True), "standard",
                              num_classes=10)
        full = field_curvature(batch_loss_pair(counts, beta=beta, tau=1.0, num_negatives=1, detach=False), "standard",
                               num_classes=10)
        assert (abs(det - full) <= 1e3 * EPS) == same
    assert det > 0 > full  # beta = 2, d = 9: NC is a saddle of the batch loss, a stable zero of the detached flow


# --- records -------------------------------------------------------------------------------------------------

def test_exploration_record():
    res = hucl.explore_hucl(num_classes=3, dim=2, betas=(0.0, 5.0), num_starts=2,
                            generator=torch.Generator().manual_seed(0))
    assert isinstance(res, hucl.HUCLExploration) and res.dim == 2
    with pytest.raises(FrozenInstanceError):
        res.betas = ()  # type: ignore[misc]  # assigning a frozen field on purpose: the error is under test
    assert_allclose(res.min_found[0], res.harris_bound, rtol=1e-10)  # beta = 0: UCL minimum is NC
    for found, nc in zip(res.min_found, res.nc_value):
        assert res.harris_bound - 1e-10 <= found <= nc + 1e-12  # Harris bound below; the ETF start above
    json.dumps(res.to_dict())
    again = hucl.explore_hucl(num_classes=3, dim=2, betas=(0.0, 5.0), num_starts=2,
                              generator=torch.Generator().manual_seed(0))
    assert again == res
    with pytest.raises(ValueError, match="generator"):
        hucl.explore_hucl(num_classes=3, dim=2, generator=np.random.default_rng(0))
    with pytest.raises(ValueError, match="dim"):
        hucl.explore_hucl(num_classes=3, dim=1, generator=torch.Generator())


def test_harris_check_fails_on_a_false_bound_and_records_carry_evidence():
    kw = {"num_classes": 3, "dim": 2, "num_starts": 2, "betas": (0.0, 2.0)}
    assert checkers.check_harris_bound(**kw).status == "pass"
    res = checkers._exploration(3, 2, 1, 2, 0, (0.0, 2.0))
    assert checkers.check_harris_bound(**kw, bound=max(res.min_found) + 1e-3).status == "fail"
    info = checkers.check_hucl(**kw)
    assert info.status == "info" and info.evidence == "numerical" and "harris_bound_respected" not in info.details
    closed = checkers.check_nc_closed_form(num_classes=3)
    assert closed.status == "pass" and closed.evidence == "independent"


def test_quick_checks_are_labelled():
    names = [fn.func.__name__ for fn in hucl.checks(quick=True)]
    assert names.count("check_local_threshold") == len(checkers.CASES)
    assert names.count("check_local_certificate") == len(checkers.QUICK_CASES)
    assert names.count("check_global_switch") == len(checkers.SEARCHED_QUICK)
    assert names[-1] == "check_threshold_table"
