"""Tests of ncgeom.population: exact population losses (docs/theory.md section 3) and the theorems on them."""

import itertools
import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from numpy.testing import assert_allclose

from ncgeom.losses import custom_eta, custom_psi, exponential_tilt, make_psi
from ncgeom.population import FiniteLatentModel, model_from_embeddings, nc_model, negative_law, population_loss
from ncgeom.testing import betas, decreasing_etas, finite_latent_models, monotone_etas, psi_params
from ncgeom.theory import SETTINGS, instance_positive_bound, nc_value, scl_lower_bound, ucl_lower_bound
from ncgeom.vocabulary import HARD_SETTINGS, PsiName, Setting, plain_setting

# Exact sums of <= 10^5 float64 terms of size O(1): relative error far below 1e-11.
RTOL = 1e-11


def _slack(v):
    """Allowed rounding slack of an inequality between two exact population values near v."""
    return RTOL * max(1.0, abs(v))


def _naive_population(model, setting, psi, k, eta, positives):
    """Brute force over anchors, positives and ORDERED k-tuples of points, straight from section 3."""
    z, y, p = model.embeddings, model.labels, model.probabilities
    n = len(y)
    total = 0.0
    for x in range(n):
        if positives == "instance":
            pos = {x: 1.0}
        else:
            mass = sum(p[m] for m in range(n) if y[m] == y[x])
            pos = {m: p[m] / mass for m in range(n) if y[m] == y[x]}
        cand = [m for m in range(n) if (y[m] != y[x] if setting in ("scl", "hscl") else True)]
        w = np.array([p[m] * (float(eta(np.array([z[x] @ z[m]]))[0]) if (eta is not None and setting in ("hscl", "hucl")) else 1.0) for m in cand])
        q = w / w.sum()
        for xp, pp in pos.items():
            for tup in itertools.product(range(len(cand)), repeat=k):
                t = np.array([[z[x] @ z[cand[i]] - z[x] @ z[xp] for i in tup]])
                total += p[x] * pp * math.prod(q[i] for i in tup) * float(psi(t)[0])
    return total


@given(finite_latent_models(max_classes=3, max_points=2, max_dim=2, balanced=False), st.sampled_from(SETTINGS), psi_params(max_negatives=2), betas(max_beta=5.0), st.sampled_from(["label", "instance"]))
def test_exact_matches_naive_brute_force(model, setting, params, beta, positives):
    psi = params.psi()
    eta = exponential_tilt(beta)
    got = population_loss(model, setting, psi, num_negatives=params.num_negatives, eta=eta, positives=positives, method="exact")
    ref = _naive_population(model, setting, psi, params.num_negatives, eta, positives)
    assert got.method == "exact" and got.stderr == 0.0
    assert_allclose(got.value, ref, rtol=RTOL, atol=RTOL)


def test_non_symmetric_psi_and_custom_eta_match_brute_force():
    rng = np.random.default_rng(5)
    model = FiniteLatentModel([rng.uniform(-0.6, 0.6, (2, 2)), rng.uniform(-0.6, 0.6, (3, 2))], prior=[0.3, 0.7])
    psi = custom_psi(lambda t: np.logaddexp(0.0, 2.0 * t[..., 0] + 0.5 * t[..., -1]), symmetric=False)
    eta = custom_eta(lambda s: 0.5 + np.maximum(np.asarray(s), 0.0))
    for setting in SETTINGS:
        got = population_loss(model, setting, psi, num_negatives=3, eta=eta, method="exact").value
        assert_allclose(got, _naive_population(model, setting, psi, 3, eta, "label"), rtol=RTOL)


@pytest.mark.parametrize("setting", SETTINGS)
@pytest.mark.parametrize("name", ["infonce", "infonce-mean", "triplet"])
@pytest.mark.parametrize("c,k,beta,tau", [(2, 3, 1.0, 1.0), (3, 2, 0.5, 0.5), (5, 3, 2.0, 1.0), (10, 2, 5.0, 0.2)])
def test_nc_value_equals_population_loss_at_nc(setting, name, c, k, beta, tau):
    model = nc_model(c, c + 1, rng=np.random.default_rng(c), points_per_class=2)
    got = population_loss(model, setting, name, num_negatives=k, eta=beta, tau=tau, margin=1.5, method="exact")
    # atol: triplet with margin 1.5 at C = 3 is exactly 0 in theory, O(eps) from the computed Gram.
    assert_allclose(got.value, nc_value(setting, name, num_classes=c, num_negatives=k, beta=beta, tau=tau, margin=1.5), rtol=RTOL, atol=RTOL)


@given(finite_latent_models(max_classes=3, max_points=2, max_dim=3), psi_params(max_negatives=2), st.one_of(monotone_etas(), betas().map(exponential_tilt)))
def test_theorem1_harris_bound(model, params, eta):
    psi = params.psi()
    k = params.num_negatives
    for hard in HARD_SETTINGS:
        plain = plain_setting(hard)
        lo = population_loss(model, plain, psi, num_negatives=k, method="exact").value
        hi = population_loss(model, hard, psi, num_negatives=k, eta=eta, method="exact").value
        assert hi >= lo - _slack(lo), (plain, lo, hi)


def test_theorem1_fails_for_decreasing_eta():
    # Anchor class at e1; the other class has a hard point (s = 0.9) and an easy one (s = -1).
    model = FiniteLatentModel([[[1.0, 0.0]], [[0.9, math.sqrt(1 - 0.81)], [-1.0, 0.0]]])
    eta = custom_eta(lambda s: np.exp(-5.0 * np.asarray(s)), name="decreasing")
    scl = population_loss(model, "scl", num_negatives=2).value
    hscl = population_loss(model, "hscl", num_negatives=2, eta=eta).value
    assert hscl < scl - 0.05, (hscl, scl)
    ucl = population_loss(model, "ucl", num_negatives=2).value
    assert population_loss(model, "hucl", num_negatives=2, eta=eta).value < ucl - 0.05


@given(finite_latent_models(max_classes=3, max_points=2, max_dim=2), decreasing_etas())
def test_decreasing_eta_never_raises_scl(model, eta):
    # The reverse Harris inequality (eta non-increasing): L_HSCL <= L_SCL, so a strict drop is the
    # typical witness that Theorem 1 needs eta non-decreasing.
    lo = population_loss(model, "hscl", num_negatives=1, eta=eta).value
    assert lo <= population_loss(model, "scl", num_negatives=1).value + _slack(lo)


@pytest.mark.parametrize("normalization", ["ball", "sphere"])
def test_theorems_2_3_no_random_representation_beats_nc(normalization):
    rng = np.random.default_rng(2025)
    psi_cases: list[tuple[PsiName, float]] = [("infonce", 0.5), ("infonce-mean", 1.0), ("triplet", 1.0)]
    bounds: list[tuple[Setting, Callable[..., float]]] = [("scl", scl_lower_bound), ("ucl", ucl_lower_bound)]
    for trial in range(150):
        c = int(rng.integers(2, 5))
        d = int(rng.integers(1, 5))
        pts = [rng.standard_normal((int(rng.integers(1, 3)), d)) for _ in range(c)]
        pts = [p / np.maximum(np.linalg.norm(p, axis=1, keepdims=True), 1.0 if normalization == "ball" else 0.0) for p in pts]
        if normalization == "ball":
            pts = [p * rng.uniform(0.3, 1.0) for p in pts]
        model = FiniteLatentModel(pts, [rng.dirichlet(np.ones(len(p))) for p in pts])
        params = psi_cases[trial % 3]
        k = 1 + trial % 2
        psi = make_psi(params[0], tau=params[1], margin=1.0)
        for setting, bound in bounds:
            value = population_loss(model, setting, psi, num_negatives=k, method="exact").value
            nc = bound(psi, num_classes=c, num_negatives=k)
            assert value >= nc - _slack(nc), (setting, trial, value, nc)


@given(finite_latent_models(max_classes=3, max_points=2, max_dim=3, normalization="sphere"), psi_params(max_negatives=2), betas())
def test_theorem2_hscl_at_least_nc(model, params, beta):
    psi = params.psi()
    v = population_loss(model, "hscl", psi, num_negatives=params.num_negatives, eta=beta).value
    nc = nc_value("scl", psi, num_classes=model.num_classes, num_negatives=params.num_negatives)
    assert v >= nc - _slack(nc)


def _interval_model(points, num_classes):
    """A balanced C-class model whose marginal is uniform over ``points``: the unit interval split into
    len(points) cells (one per point) and into C classes; class c holds the overlaps."""
    n = len(points)
    cells, classes = np.linspace(0, 1, n + 1), np.linspace(0, 1, num_classes + 1)
    pts, ws = [], []
    for c in range(num_classes):
        overlap = np.clip(np.minimum(cells[1:], classes[c + 1]) - np.maximum(cells[:-1], classes[c]), 0, None)
        keep = overlap > 1e-15
        pts.append(points[keep])
        ws.append(overlap[keep] / overlap[keep].sum())
    return FiniteLatentModel(pts, ws)


@pytest.mark.parametrize("c", [2, 3, 10])
def test_instance_positive_counterexample(c):
    """docs/theory.md section 4: with x+ = x, the cross-polytope beats NC for C >= 3 (equal at C = 2)."""
    d = c - 1
    cross = _interval_model(np.concatenate([np.eye(d), -np.eye(d)]), c)
    assert_allclose(cross.probabilities.sum(), 1.0, rtol=1e-15)
    v_cross = population_loss(cross, "ucl", num_negatives=1, positives="instance").value
    v_nc = population_loss(nc_model(c), "ucl", num_negatives=1, positives="instance").value
    ref_nc = math.log(2) / c + (1 - 1 / c) * math.log1p(math.exp(-c / (c - 1)))
    ref_cross = (math.log(2) + math.log1p(math.exp(-2))) / (2 * d) + (1 - 1 / d) * math.log1p(math.exp(-1))
    assert_allclose([v_nc, v_cross], [ref_nc, ref_cross], rtol=RTOL)
    assert v_cross >= instance_positive_bound(num_negatives=1) - RTOL
    if c == 2:
        assert_allclose(v_cross, v_nc, rtol=RTOL)
    else:
        assert v_cross < v_nc
    if c == 10:
        assert (round(v_nc, 5), round(v_cross, 5)) == (0.32543, 0.32401)
        # With label positives Theorem 3 holds again: NC wins.
        assert population_loss(cross, "ucl", num_negatives=1).value > population_loss(nc_model(c), "ucl", num_negatives=1).value


def test_monte_carlo_agrees_and_is_reproducible():
    model = FiniteLatentModel([np.array([[1.0, 0.0], [0.6, 0.8]]), np.array([[-0.6, 0.8], [0.0, -1.0]]), np.array([[-0.5, -0.5]])])
    exact = population_loss(model, "hucl", "infonce", num_negatives=3, eta=2.0)
    mc = population_loss(model, "hucl", "infonce", num_negatives=3, eta=2.0, method="mc", rng=np.random.default_rng(0), num_samples=40_000)
    assert mc.method == "mc" and mc.num_samples == 40_000 and mc.stderr > 0
    # A 5-sigma band: fails by chance with probability ~ 6e-7 (and the seed is fixed).
    assert abs(mc.value - exact.value) < 5 * mc.stderr
    again = population_loss(model, "hucl", "infonce", num_negatives=3, eta=2.0, method="mc", rng=np.random.default_rng(0), num_samples=40_000)
    assert again == mc
    auto = population_loss(model, "scl", num_negatives=3, method="auto", max_exact_terms=2, rng=np.random.default_rng(1))
    assert auto.method == "mc"
    with pytest.raises(ValueError, match="rng"):
        population_loss(model, "scl", num_negatives=3, method="mc")


def test_negative_law_rows():
    model = nc_model(3)
    law = negative_law(model, "scl")
    assert_allclose(law, (1 - np.eye(3)) / 2, rtol=1e-15)
    assert_allclose(negative_law(model, "ucl"), np.full((3, 3), 1 / 3), rtol=1e-15)
    tilted = negative_law(model, "hucl", eta=2.0)
    pi = math.exp(2) / (math.exp(2) + 2 * math.exp(-1))
    assert_allclose(np.diag(tilted), np.full(3, pi), rtol=1e-14)


def test_model_constructors_and_validation():
    z = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0]])
    m = model_from_embeddings(z, np.array([0, 0, 1]), weights=np.array([1.0, 3.0, 2.0]))
    assert_allclose(m.weights[0], [0.25, 0.75], rtol=1e-15)
    assert_allclose(m.probabilities, [0.125, 0.375, 0.5], rtol=1e-15)
    assert m.is_balanced() and m.max_norm == 1.0
    assert not m.embeddings.flags.writeable
    with pytest.raises(ValueError, match="prior"):
        FiniteLatentModel([z[:1], z[1:]], prior=[0.5, 0.6])
    with pytest.raises(ValueError, match="prior"):
        FiniteLatentModel([z[:1], z[1:]], prior=[1.0, 0.0])
    with pytest.raises(ValueError, match="points"):
        FiniteLatentModel([z[:1]])
    with pytest.raises(ValueError, match="points"):
        FiniteLatentModel([z[:1], np.ones((1, 3))])
    with pytest.raises(ValueError, match="weights"):
        FiniteLatentModel([z[:2], z[2:]], [np.array([0.5, 0.6]), np.array([1.0])])
    with pytest.raises(ValueError, match="labels"):
        model_from_embeddings(z, np.array([0, 2, 2]))
    with pytest.raises(ValueError, match="num_negatives"):
        population_loss(m, "scl", num_negatives=0)
    # arguments outside their declared types on purpose: the runtime checks are under test
    not_a_positive_law: Any = "noise"
    not_a_model: Any = z
    with pytest.raises(ValueError, match="positives"):
        population_loss(m, "scl", num_negatives=1, positives=not_a_positive_law)
    with pytest.raises(ValueError, match="model"):
        population_loss(not_a_model, "scl", num_negatives=1)
    with pytest.raises(ValueError, match="eta"):
        population_loss(m, "hscl", num_negatives=1, eta=-1.0)
