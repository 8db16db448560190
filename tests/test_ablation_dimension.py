"""Ablations of d >= C - 1 and of label-based positives (proofs_check.ablations.dimension / .positives).

docs/theory.md, section 4: Theorems 2 and 3 (hypothesis 3, d >= C - 1; Theorem 3 hypothesis 5, label-based
positives) and the cross-polytope counterexample.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from numpy.testing import assert_allclose

from ncgeom.geometry import simplex_etf
from ncgeom.theory import nc_value
from ncgeom.vocabulary import Setting
from proofs_check.ablations import dimension, positives
from proofs_check.counterexample import cross_polytope_formula, nc_formula

# float64 population losses are means of at most C^2 (dimension) or n^3 (positives) terms of size O(1): rounding
# ~1e-15; two code paths evaluated at the same floats agree to a few hundred eps.
AGREE = 256 * np.finfo(np.float64).eps
# a search ends at gradient norm g <= ~1e-7 (reported), so its value is within ~g^2 / curvature of the minimum
SEARCH = 1e-10


def _naive_collapsed(means, setting: str, beta: float) -> float:
    """Loop over anchor class c and negative class c' (k = 1, infonce, tau = 1, label positives: <z, z+> = 1)."""
    v = [np.asarray(m) / np.linalg.norm(m) for m in means]
    c = len(v)
    total = 0.0
    for a in range(c):
        eligible = [b for b in range(c) if b != a or setting == "ucl"]
        tilt = [math.exp((beta if setting == "hscl" else 0.0) * float(v[a] @ v[b])) for b in eligible]
        for b, w in zip(eligible, tilt):
            total += w / sum(tilt) * math.log1p(math.exp(float(v[a] @ v[b]) - 1.0)) / c
    return total


@pytest.fixture(scope="module")
def dimension_records():
    return {r.values["setting"]: r for r in dimension.ablations(quick=True)}


@pytest.fixture(scope="module")
def positive_records():
    return positives.ablations(quick=True)


@pytest.mark.parametrize("setting", ["scl", "hscl", "ucl"])
def test_search_finds_the_etf_at_d_equal_c_minus_1(setting):
    found = dimension.best_configuration(4, 3, setting, beta=dimension.BETA, num_random=4, rng=np.random.default_rng(1))
    assert abs(found["gap"]) <= SEARCH, found["gap"]
    assert found["etf_residual"] <= 1e-4  # sqrt of the value tolerance: a flat-bottomed minimum moves ~sqrt(SEARCH)
    assert found["match"] is not None and "simplex ETF" in found["match"]


def test_collapsed_loss_agrees_with_the_population_code():
    rng = np.random.default_rng(3)
    cases: tuple[tuple[Setting, float], ...] = (("scl", 0.0), ("hscl", 5.0), ("ucl", 0.0))
    for setting, beta in cases:
        for v in (simplex_etf(5, 4), rng.standard_normal((5, 3))):
            torch_value = float(dimension.collapsed_loss(torch.as_tensor(v), setting, beta=beta))
            assert_allclose(torch_value, dimension.population_value(v, setting, beta=beta), rtol=AGREE)
            assert_allclose(torch_value, _naive_collapsed(v, setting, beta), rtol=AGREE)
        assert_allclose(dimension.population_value(simplex_etf(5, 4), setting, beta=beta),
                        nc_value(setting, num_classes=5, num_negatives=1, beta=beta), rtol=AGREE)


@pytest.mark.parametrize("setting", ["scl", "hscl", "ucl"])
def test_c4_d2_record_recomputed_independently(dimension_records, setting):
    r = dimension_records[setting]
    assert r.result == "fails" and r.hypothesis_id == ("3.3" if setting == "ucl" else "2.3")
    means = np.asarray(r.configuration["means"])
    assert means.shape == (4, 2)
    best = _naive_collapsed(means, setting, r.values["beta"])
    assert_allclose(best, r.values["best"], rtol=AGREE)
    bound = nc_value(setting, num_classes=4, num_negatives=1, beta=r.values["beta"])
    assert_allclose(r.values["gap"], best - bound, rtol=1e-12)
    assert r.values["gap"] > 0 and r.gap > 0
    # the winner is the square: value recomputed at its exact coordinates and its Gram matched up to permutation
    assert "regular C-gon" in r.winner
    square = [[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0], [0.0, -1.0]]
    assert_allclose(best, _naive_collapsed(square, setting, r.values["beta"]), atol=SEARCH)
    if setting == "scl":  # closed form: two orthogonal negatives and one antipodal one
        assert_allclose(best, (2 * math.log1p(math.exp(-1)) + math.log1p(math.exp(-2))) / 3, atol=SEARCH)


def test_match_candidates_rejects_a_non_matching_gram():
    distances = dimension.match_candidates(np.eye(4), dimension.candidate_configurations(4, 2))
    assert min(distances.values()) > 1.0  # orthonormal classes are none of the codes in R^2


def test_mixed_loss_agrees_with_the_population_code():
    rng = np.random.default_rng(5)
    points = rng.standard_normal((12, 3))
    points /= np.linalg.norm(points, axis=1, keepdims=True)
    labels = np.repeat(np.arange(4), 3)
    for rho in (0.0, 0.3, 1.0):
        assert_allclose(float(positives.mixed_loss(torch.as_tensor(points), labels, rho)),
                        positives.population_mixed_loss(points, labels, rho), rtol=AGREE)


def test_rho_0_nc_is_optimal_and_rho_1_the_cross_polytope_wins(positive_records):
    (r,) = positive_records
    assert r.result == "fails" and r.evidence == "exact" and r.hypothesis_id == "3.5"
    # rho = 0: Theorem 3; NC's value is the closed form and the search found nothing below it
    labels = np.asarray(r.configuration["labels"])
    nc_points = positives.nc_configuration(4, 3)
    assert_allclose(positives.population_mixed_loss(nc_points, labels, 0.0),
                    nc_value("ucl", num_classes=4, num_negatives=1), rtol=AGREE)
    assert r.details["search_at_rho_0_minus_nc"] >= -positives.VALUE_TOL
    # rho = 1: the values of proofs_check.counterexample (docs/theory.md, section 4), recomputed from the points
    cp = np.asarray(r.configuration["means"])
    assert_allclose(r.values["nc"], float(nc_formula(4)), rtol=1e-15)
    assert_allclose(r.values["cross_polytope"], float(cross_polytope_formula(3)), rtol=1e-15)
    assert_allclose(positives.population_mixed_loss(cp, labels, 1.0), float(cross_polytope_formula(3)), rtol=AGREE)
    assert_allclose(r.gap, float(cross_polytope_formula(3) - nc_formula(4)), rtol=1e-12)
    # the exact crossing: at rho_CP the cross-polytope's loss equals NC's
    lo, hi = r.values["rho_cp"]
    assert 0 < lo <= hi < 1 and hi - lo < 1e-12
    assert_allclose(positives.population_mixed_loss(cp, labels, lo), r.values["nc"], rtol=AGREE * 100)
    # the search's threshold is at most the cross-polytope's, and the witness above it beats NC
    star_lo, star_hi = r.values["rho_star"]
    assert star_lo <= star_hi <= hi
    witness = np.asarray(r.details["witness_at_rho_star_top"])
    assert positives.population_mixed_loss(witness, labels, star_hi) < r.values["nc"] - positives.VALUE_TOL


def test_positives_local_threshold_is_where_the_hessian_loses_positivity():
    """rho_loc (generalized eigenvalues) vs an independent Hessian: central finite differences of the autograd gradient
    of L_rho at NC in the same basis (step 1e-5: error ~1e-10, far below the eigenvalues' 1e-5 at rho_loc -/+ 5e-3)."""
    from proofs_check.ablations import positives
    from proofs_check.hucl.local import tangent_complement

    loc = positives.local_threshold(4)
    assert loc["below"] > 0 > loc["above"] and 0.9 < loc["rho_loc"] < 1.0
    m = positives.instances_per_class(4)
    labels = np.repeat(np.arange(4), m)
    nc = positives.nc_configuration(4, m)
    basis = torch.as_tensor(tangent_complement(nc))
    z0 = torch.as_tensor(nc)

    def grad(x, rho):
        x = torch.as_tensor(x).requires_grad_(True)
        (g,) = torch.autograd.grad(positives.mixed_loss(z0 + (basis @ x).reshape(z0.shape), labels, rho), x)
        return g.numpy()

    def smallest(rho, h=1e-5):
        p = basis.shape[1]
        cols = [(grad(h * np.eye(p)[i], rho) - grad(-h * np.eye(p)[i], rho)) / (2 * h) for i in range(p)]
        hess = np.array(cols)
        return np.linalg.eigvalsh((hess + hess.T) / 2)[0]

    assert smallest(loc["rho_loc"] - 5e-3) > 0 > smallest(loc["rho_loc"] + 5e-3)


def test_labelling_search_is_exhaustive_and_rejects_a_worse_labelling():
    from proofs_check.ablations import positives

    m = positives.instances_per_class(4)
    best = positives.labelling_optimum(4, m)
    assert best["heuristic_optimal"] and best["s_max"] == best["heuristic_s"] and best["heuristic_a"] == 0
    # brute force for C = 4: every count matrix [4, 6] with row sums 3 and column sums 2
    import itertools

    rows = [r for r in itertools.product(range(3), repeat=6) if sum(r) == 3]
    s_max = 0
    for a, b, c in itertools.product(rows, repeat=3):
        last = 2 - np.array(a) - np.array(b) - np.array(c)
        if np.all(last >= 0) and last.sum() == 3:
            s_max = max(s_max, sum(int((np.array(r) ** 2).sum()) for r in (a, b, c, last)))
    assert s_max == best["s_max"]
    start = np.arange(4 * m) % 6  # the swap search's starting labelling: not optimal
    assert not positives.labelling_optimum(4, m, vertex=start)["heuristic_optimal"]
