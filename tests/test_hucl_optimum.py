"""The HUCL optimum along beta (proofs_check.hucl.optimum; docs/theory.md, section 4, "The HUCL optimum along beta").

Order of trust (the house style): a naive loop of the loss first, then agreement of independent methods
(ncgeom.population, the collapsed Gram loss of proofs_check.hucl, the autograd Hessian, 50-digit mpmath), then
properties; every certifier is fed a false statement and must fail.
"""

import itertools
import json
import math
from fractions import Fraction

import mpmath
import numpy as np
import pytest
import torch
from numpy.testing import assert_allclose

from ncgeom.atomic_io import jsonable
from ncgeom.geometry import etf_gram, simplex_etf
from ncgeom.losses import make_psi
from ncgeom.population import FiniteLatentModel, population_loss
from ncgeom.theory import nc_value
from proofs_check.hucl.jets import reduced_curvature
from proofs_check.hucl.loss import hucl_gram_loss
from proofs_check.hucl.optimum import bnb, bound, certify, checkers, intervals, patterns, split, training
from proofs_check.hucl.optimum.loss import collapsed_gram_loss, multiset_table, point_loss
from proofs_check.hucl.optimum.path import optimum_at, optimum_path, point_summary
from proofs_check.hucl.optimum.record import HUCLOptimumRecord, compute_case, read_optimum, write_optimum
from proofs_check.hucl.optimum.search import nc_points, search_optimum

EPS = float(np.finfo(np.float64).eps)
AGREE = 1e3 * EPS  # two float64 evaluations of sums of <= 10^4 O(1) terms


def _unit(rng, n, d):
    z = rng.standard_normal((n, d))
    return z / np.linalg.norm(z, axis=1, keepdims=True)


def _loop_loss(z, per_class, beta, tau, k, psi="infonce"):
    """Naive reference: every anchor, every positive of its class, every ordered k-tuple of negatives."""
    n_points = len(z)
    s = z @ z.T
    total = 0.0
    for x in range(n_points):
        q = np.exp(beta * s[x]) / np.exp(beta * s[x]).sum()
        own = [p for p in range(n_points) if p // per_class == x // per_class]
        for p in own:
            for tup in itertools.product(range(n_points), repeat=k):
                t = np.array([s[x, y] - s[x, p] for y in tup]) / tau
                inner = np.exp(t).sum() / (k if psi == "infonce-mean" else 1)
                total += np.prod(q[list(tup)]) * math.log1p(inner) / len(own)
    return total / n_points


# ---------------------------------------------------------------- the loss


@pytest.mark.parametrize("c,n,k,tau,beta,psi", [(2, 1, 1, 1.0, 0.0, "infonce"), (3, 2, 1, 1.0, 2.0, "infonce"),
                                                 (3, 2, 3, 0.5, 5.0, "infonce"), (2, 3, 2, 1.0, 1.0, "infonce-mean")])
def test_point_loss_is_the_naive_loop(c, n, k, tau, beta, psi):
    z = _unit(np.random.default_rng(c + n + k), c * n, 3)
    mine = float(point_loss(torch.as_tensor(z), per_class=n, beta=beta, tau=tau, num_negatives=k, psi=psi))
    assert_allclose(mine, _loop_loss(z, n, beta, tau, k, psi), rtol=AGREE)


def test_point_loss_hand_value_two_antipodal_classes():
    z = torch.tensor([[1.0, 0.0], [-1.0, 0.0]], dtype=torch.float64)
    assert_allclose(float(point_loss(z, per_class=1, beta=0.0)), (math.log(2) + math.log1p(math.exp(-2))) / 2, rtol=EPS * 8)


@pytest.mark.parametrize("c,n,k,tau,beta,psi", [(3, 2, 1, 1.0, 2.0, "infonce"), (3, 3, 4, 0.5, 5.0, "infonce"),
                                                 (4, 2, 4, 1.0, 10.0, "infonce-mean")])
def test_point_loss_agrees_with_ncgeom_population(c, n, k, tau, beta, psi):
    z = _unit(np.random.default_rng(7 * c + n), c * n, 3)
    mine = float(point_loss(torch.as_tensor(z), per_class=n, beta=beta, tau=tau, num_negatives=k, psi=psi))
    ref = population_loss(FiniteLatentModel(np.split(z, c)), "hucl", psi, num_negatives=k, eta=beta, tau=tau,
                          method="exact").value
    assert_allclose(mine, ref, rtol=AGREE)


@pytest.mark.parametrize("k", [1, 2, 4])
def test_collapsed_gram_loss_is_point_loss_and_proofs_check_hucl(k):
    v = _unit(np.random.default_rng(k), 4, 3)
    gram = torch.as_tensor(v @ v.T)
    a = float(collapsed_gram_loss(gram, beta=3.0, num_negatives=k))
    b = float(point_loss(torch.as_tensor(v), per_class=1, beta=3.0, num_negatives=k))
    c = float(hucl_gram_loss(gram, beta=3.0, num_negatives=k, psi=make_psi("infonce")))
    assert_allclose([a, b], [c, c], rtol=AGREE)


def test_nc_value_is_the_closed_form_for_every_n():
    for n in (1, 2, 3):
        for k in (1, 4):
            value = float(point_loss(torch.as_tensor(nc_points(3, 2, n)), per_class=n, beta=2.0, num_negatives=k))
            assert_allclose(value, nc_value("hucl", "infonce", num_classes=3, num_negatives=k, beta=2.0), rtol=AGREE)


def test_multiset_table_and_bad_inputs():
    tuples, log_coef = multiset_table(2, 2)
    assert tuples.tolist() == [[0, 0], [0, 1], [1, 1]]
    assert_allclose(np.exp(log_coef), [1, 2, 1], rtol=EPS * 4)
    z = torch.as_tensor(nc_points(3, 2, 2))
    for kwargs, word in (({"per_class": 4}, "per_class"), ({"per_class": 2, "beta": -1.0}, "beta"),
                         ({"per_class": 2, "tau": 0.0}, "tau"), ({"per_class": 2, "psi": "triplet"}, "psi")):
        kwargs.setdefault("beta", 1.0)
        with pytest.raises(ValueError, match=word):
            point_loss(z, **kwargs)


def test_label_permutation_and_rotation_invariance():
    rng = np.random.default_rng(3)
    z = _unit(rng, 6, 3)
    base = float(point_loss(torch.as_tensor(z), per_class=2, beta=4.0, num_negatives=2))
    q, _ = np.linalg.qr(rng.standard_normal((3, 3)))
    perm = np.concatenate([np.arange(4, 6), np.arange(0, 2)[::-1], np.arange(2, 4)])  # classes and points permuted
    for w in (z @ q.T, z[perm]):
        assert_allclose(float(point_loss(torch.as_tensor(w), per_class=2, beta=4.0, num_negatives=2)), base, rtol=AGREE)


# ---------------------------------------------------------------- interval arithmetic


@pytest.mark.parametrize("name,lo,hi", [("exp", -120, 5), ("log", 1e-30, 1e30), ("cos", -20, 20), ("sin", -20, 20)])
def test_point_enclosures_contain_the_50_digit_values(name, lo, hi):
    rng = np.random.default_rng(0)
    x = np.exp(rng.uniform(np.log(lo), np.log(hi), 300)) if name == "log" else rng.uniform(lo, hi, 300)
    enc = getattr(intervals, name)(intervals.point(x))
    with mpmath.workdps(50):
        exact = [getattr(mpmath, name)(mpmath.mpf(float(v))) for v in x]
        inside = [mpmath.mpf(float(a)) <= e <= mpmath.mpf(float(b)) for a, b, e in zip(enc.lo, enc.hi, exact)]
    assert all(inside)
    assert np.max(enc.hi - enc.lo) <= 1e-12 * max(1.0, float(np.max(np.abs(enc.hi))))


def test_box_enclosures_contain_sampled_values_and_derivatives():
    rng = np.random.default_rng(1)
    a = rng.uniform(-4, 4, 200)
    w = rng.uniform(0, 2, 200)
    x = intervals.Dual(intervals.interval(a, a + w), (intervals.point(np.ones(200)),))
    f = (x.cos() * x.exp() + (x * x + 1.0).log()).sin()
    grid = a[:, None] + w[:, None] * np.linspace(0, 1, 50)[None, :]
    values = np.sin(np.cos(grid) * np.exp(grid) + np.log(grid**2 + 1))
    slope = np.cos(np.cos(grid) * np.exp(grid) + np.log(grid**2 + 1)) * (
        (np.cos(grid) - np.sin(grid)) * np.exp(grid) + 2 * grid / (grid**2 + 1))
    assert np.all((f.value.lo[:, None] <= values) & (values <= f.value.hi[:, None]))
    assert np.all((f.grad[0].lo[:, None] <= slope) & (slope <= f.grad[0].hi[:, None]))


def test_interval_sum_and_division_guard():
    x = intervals.interval(np.full(1000, 0.1), np.full(1000, 0.1))
    s = x.sum(0)
    exact = 1000 * Fraction(0.1)  # the exact sum of the floats
    assert Fraction(float(s.lo)) <= exact <= Fraction(float(s.hi))
    with pytest.raises(ValueError, match="divisor"):
        intervals.point(1.0) / intervals.interval(-1.0, 1.0)


# ---------------------------------------------------------------- branch and bound


def _quadratic(lo, hi, grad):
    x = [intervals.Dual(intervals.Interval(lo[:, i], hi[:, i]),
                        tuple(intervals.point(np.full(len(lo), float(i == j))) for j in range(2)) if grad else ())
         for i in range(2)]
    return (x[0] - 0.3) * (x[0] - 0.3) + (x[1] + 0.2) * (x[1] + 0.2) * 2.0 + 1.0


def test_branch_and_bound_encloses_a_known_minimum():
    res = bnb.branch_and_bound(_quadratic, [-1, -1], [1, 1], eps=1e-9)
    assert res.closed and res.lower <= 1.0 <= res.upper and res.upper - res.lower <= 1e-9
    hull = np.array(res.settled_hull)
    assert hull[0, 0] <= 0.3 <= hull[0, 1] and hull[1, 0] <= -0.2 <= hull[1, 1]


def test_branch_and_bound_that_runs_out_of_boxes_says_so():
    res = bnb.branch_and_bound(_quadratic, [-1, -1], [1, 1], eps=1e-14, max_boxes=8, per_side=4)
    assert not res.closed and "boxes" in res.reason and res.lower <= 1.0 <= res.upper


def test_boundary_minimum_of_a_box_is_not_pruned():
    # f = x on [0, 1]: increasing, minimum on the boundary x = 0 (not a critical point): free=False keeps it
    def f(lo, hi, grad):
        return intervals.Dual(intervals.Interval(lo[:, 0], hi[:, 0]),
                              (intervals.point(np.ones(len(lo))),) if grad else ())
    res = bnb.branch_and_bound(f, [0.0], [1.0], eps=1e-9, free=[False])
    assert res.closed and res.lower <= 0.0 <= res.upper


# ---------------------------------------------------------------- certified minima (C = 3, d = 2)


def test_certificate_encloses_the_searched_optimum_and_parameters_roundtrip():
    found = search_optimum(num_classes=3, dim=2, per_class=1, beta=5.0, num_random=4,
                           generator=torch.Generator().manual_seed(0))
    start = certify.parameters_of("C3_d2", np.asarray(found.pattern.class_gram))
    assert_allclose(certify._float_gram("C3_d2", start), np.asarray(found.pattern.class_gram), atol=1e-12)
    cert = certify.certify_minimum("C3_d2", beta=5.0, eps=1e-8, starts=[start])
    assert cert.closed and cert.bnb.lower <= found.value <= cert.bnb.upper + 256 * EPS
    assert cert.bnb.upper < nc_value("hucl", "infonce", num_classes=3, num_negatives=1, beta=5.0)


def test_c4_parameters_roundtrip():
    v = _unit(np.random.default_rng(2), 4, 3)
    gram = v @ v.T
    x = certify.parameters_of("C4_d3", gram)
    # the parameters relabel the classes (the most distant pair first): compare modulo permutations
    assert patterns.gram_distance(certify._float_gram("C4_d3", x), gram) <= 1e-10


def test_certified_minimum_check_passes_and_rejects_a_false_minimum():
    assert checkers.check_certified_minimum(5.0).status == "pass"
    wrong = checkers.check_certified_minimum(5.0, claimed=nc_value("hucl", "infonce", num_classes=3, num_negatives=1,
                                                                   beta=5.0))
    assert wrong.status == "fail" and wrong.evidence == "exact"
    selftest = checkers.check_rejects_false_minimum()
    assert selftest.status == "pass" and selftest.evidence == "self-test"


@pytest.mark.slow
def test_switch_bracket_contains_the_searched_switch():
    row = checkers.check_switch()
    lo, hi = row.details["bracket"]
    assert row.status == "pass" and lo <= 1.041742 <= hi + 1e-5 and hi - lo <= 1e-4  # proofs_check.hucl search_switch


# ---------------------------------------------------------------- local thresholds: split and collapsed blocks


@pytest.mark.parametrize("block", ["standard", "two-row", "lift"])
def test_collapsed_blocks_agree_with_proofs_check_hucl_jets(block):
    for beta in (0.0, 1.3, 4.0):
        assert_allclose(split.curvature(block, num_classes=4, beta=beta), reduced_curvature(block, num_classes=4,
                        beta=beta), rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("c,d", [(3, 2), (4, 3), (3, 3)])
def test_split_block_agrees_with_the_autograd_hessian(c, d):
    row = checkers.check_split_agreement(c, d, beta=1.0)
    assert row.status == "pass" and row.evidence == "independent"


def test_split_agreement_fails_when_the_jets_are_off(monkeypatch):
    real = split.curvature
    monkeypatch.setattr(checkers, "curvature", lambda *a, **kw: real(*a, **kw) + 1e-6)
    assert checkers.check_split_agreement(3, 2, beta=1.0).status == "fail"


def test_split_threshold_does_not_depend_on_n():
    # autograd Hessian of the n-point loss at NC on the whole split subspace, n = 2 and 3, at beta_split -/+ 1e-4
    beta = split.local_thresholds(num_classes=3, dim=2).per_block["split-in-span"]

    def smallest(n, b):
        base = torch.as_tensor(nc_points(3, 2, n))
        dirs = []
        for c in range(3):
            t = np.array([-simplex_etf(3, 2)[c][1], simplex_etf(3, 2)[c][0]])
            for j in range(1, n):
                e = np.zeros((3 * n, 2))
                e[c * n], e[c * n + j] = t, -t
                dirs.append(e.ravel())
        q, _ = np.linalg.qr(np.array(dirs).T)
        bt = torch.as_tensor(q)
        h = torch.autograd.functional.hessian(lambda x: point_loss(base + (bt @ x).reshape(base.shape), per_class=n,
                                                                    beta=b), torch.zeros(q.shape[1], dtype=torch.float64))
        return np.linalg.eigvalsh(h.numpy())[0]

    for n in (2, 3):
        assert smallest(n, beta - 1e-4) > 0 > smallest(n, beta + 1e-4)


def test_local_certificate_passes_at_the_threshold_and_fails_at_the_collapsed_one():
    good = checkers.check_local(3, 2)
    assert good.status == "pass" and good.details["first_block"] == "split-in-span"
    assert_allclose(good.details["beta"], 0.8978096, atol=1e-6)  # also the bisection of the autograd test above
    wrong = checkers.check_local(3, 2, beta=good.details["collapsed_threshold"])  # the split block is negative below
    assert wrong.status == "fail"


# ---------------------------------------------------------------- the collision-aware bound


def test_bound_at_beta_zero_is_theorem_3_and_grows():
    b0 = bound.lagrangian_bound(num_classes=3, beta=0.0)
    assert_allclose(b0.value, b0.theorem13, atol=1e-9)
    b2 = bound.lagrangian_bound(num_classes=3, beta=2.0)
    assert b2.value > b2.theorem13


@pytest.mark.parametrize("beta", [0.5, 2.0, 10.0])
def test_bound_is_below_every_searched_optimum_and_attained_in_d_equal_c(beta):
    b = bound.lagrangian_bound(num_classes=3, beta=beta)
    for d in (2, 3):
        found = search_optimum(num_classes=3, dim=d, per_class=1, beta=beta, num_random=6,
                               generator=torch.Generator().manual_seed(1))
        assert b.value <= found.value + 1e-9
    if b.attained_value is not None:  # d = C reaches the bound
        assert_allclose(found.value, b.attained_value, atol=1e-8)


def test_row_loss_matches_the_collapsed_loss_of_an_equiangular_gram():
    rho = 0.3
    gram = (1 - rho) * np.eye(4) + rho
    assert_allclose(bound.equiangular_loss(rho, num_classes=4, beta=2.0, num_negatives=2),
                    float(collapsed_gram_loss(torch.as_tensor(gram), beta=2.0, num_negatives=2)), rtol=AGREE)


def test_bound_check_passes_and_fails_on_a_bound_above_the_minimum(monkeypatch):
    assert checkers.check_bound(3, 2.0).status == "pass"
    real = bound.lagrangian_bound

    def too_high(**kw):
        b = real(**kw)
        return type(b)(**{**b.to_dict(), "certified": b.certified, "certified_lower": b.certified_lower + 0.1})

    monkeypatch.setattr(checkers, "lagrangian_bound", too_high)
    assert checkers.check_bound(3, 2.0).status == "fail"


# ---------------------------------------------------------------- patterns, path, training comparison


def test_patterns_name_nc_and_the_pair_and_ignore_relabelling():
    assert patterns.describe(simplex_etf(3, 2), 1).name == "NC"
    a = np.radians([0.0, 95.0, -95.0])
    arc = np.stack([np.cos(a), np.sin(a)], axis=1)
    pat = patterns.describe(arc, 1)
    assert "near-antipodal" in pat.name and pat.symmetry_order == 2
    assert patterns.signature(pat) == patterns.signature(patterns.describe(arc[[2, 0, 1]], 1))
    m = arc @ arc.T
    assert patterns.gram_distance(m, m[np.ix_([1, 2, 0], [1, 2, 0])]) <= 1e-15
    assert patterns.gram_distance(m, etf_gram(3)) > 0.5


def test_path_finds_the_continuous_split_of_nc():
    path = optimum_path(num_classes=3, dim=2, per_class=(1, 2), betas=(0.85, 0.95), num_random=2, refine_tol=0.02)
    assert len(path.changes) == 1
    change = path.changes[0]
    assert change.kind == "continuous" and change.before == "NC" and change.after.startswith("split NC")
    assert change.bracket[0] - 0.02 <= 0.8978 <= change.bracket[1] + 0.02


def test_training_comparison_on_synthetic_runs():
    point = optimum_at(5.0, num_classes=3, dim=2, per_class=(1,), tau=1.0, num_negatives=1, psi="infonce",
                       num_random=2, generator=torch.Generator().manual_seed(0))
    opt = point_summary(point)
    rng = np.random.default_rng(0)
    labels = np.repeat(np.arange(3), 20)
    at_optimum = np.asarray(point.best.points)[labels] + 1e-3 * rng.standard_normal((60, 2))
    at_nc = simplex_etf(3, 2)[labels] + 1e-3 * rng.standard_normal((60, 2))
    near = training.compare_to_optimum(at_optimum, labels, beta=5.0, optimum=opt)
    far = training.compare_to_optimum(at_nc, labels, beta=5.0, optimum=opt)
    assert near["same_pattern"] and near["distance_to_optimum"] < 0.01 and abs(near["gap_to_optimum"]) < 1e-4
    assert not far["same_pattern"] and far["distance_to_optimum"] > 0.5 and far["gap_to_optimum"] > 1e-2
    with pytest.raises(ValueError, match="balanced"):
        training.compare_to_optimum(at_nc[:-1], labels[:-1], beta=5.0, optimum=opt)


# ---------------------------------------------------------------- the record


def test_record_roundtrip_strict_json_and_unknown_keys(tmp_path):
    case = compute_case(3, 2, 1, 1.0, (1,), betas=(0.0, 2.0), num_random=2, certify=True, log=lambda m: None)
    rec = HUCLOptimumRecord("hucl_optimum/1", True, {"betas": [0.0, 2.0]}, (case,), (), 1.0, {})
    path = write_optimum(tmp_path / "hucl_optimum.json", rec)
    json.loads(path.read_text())  # strict JSON
    back = read_optimum(path)
    assert jsonable(back.to_dict()) == json.loads(path.read_text())
    assert all(x["closed"] for x in case["certified"]) and case["switches"] and case["switches"][0]["certified"]
    data = json.loads(path.read_text())
    data["extra"] = 1
    with pytest.raises(ValueError, match="extra"):
        HUCLOptimumRecord.from_dict(data)
    data.pop("extra")
    data["cases"][0]["bogus"] = 1
    with pytest.raises(ValueError, match="bogus"):
        HUCLOptimumRecord.from_dict(data)


@pytest.mark.parametrize("c,tau", [(3, 1.0), (4, 0.5)])
def test_large_beta_cluster_asymptotics(c, tau):
    """The per-anchor minimum (nu = 0, the bound at large beta) at beta = 200 vs the first-order expansion: an
    equiangular row at rho* = 1 - u*/beta (errors O(1/beta^2) = 2.5e-5, times a constant of order 1)."""
    beta = 200.0
    asym = bound.cluster_asymptotics(num_classes=c, beta=beta, tau=tau)
    assert_allclose(asym["u_star"], 1 + (c - 1) * math.exp(-asym["u_star"]), rtol=1e-14)
    value, row = bound.inner_minimum(0.0, num_classes=c, beta=beta, tau=tau)  # nu = 0: B at large beta
    assert np.ptp(row) <= 1e-6 and abs(row.mean() - asym["rho"]) <= 10 / beta**2
    assert abs(value - asym["value"]) <= 10 / beta**2


def test_bound_check_passes_at_beta_zero_where_it_is_theorem_3():
    row = checkers.check_bound(3, 0.0)  # B = L_UCL(NC) exactly: certified to the branch and bound's eps
    assert row.status == "pass" and row.details["theorem13"] - row.details["certified_lower"] <= row.details["eps"]


def test_the_shipped_full_record_reads_back_through_its_type():
    """The full record the full reproduction reads (proofs_check/hucl/optimum/stored.json, package data): strict
    from_dict (unknown keys rejected) and the full variant, not a quick one."""
    from proofs_check.hucl.optimum.record import stored_record, theory_data

    record = stored_record()
    assert not record.quick
    assert theory_data()["quick"] is False
