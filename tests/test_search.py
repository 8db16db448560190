"""A user's psi, all the way (issue 26 item 6): the reachable box of the property checks, the search for a
configuration that beats NC (ncgeom.theory.search_beats_nc), and a numpy-only psi given to batch_loss.

The search is tested against the known answers of docs/theory.md, section 4: NC wins for the built-in SCL
InfoNCE (Theorem 2), the cross-polytope beats NC with instance positives for C >= 3, and the cubic psi of
hypothesis 2.4 (tests/test_ablations.py) beats NC.
"""

import math
from typing import Any

import numpy as np
import pytest
import torch
from numpy.testing import assert_allclose

from ncgeom.losses import (
    REACHABLE_S,
    REACHABLE_T,
    batch_loss,
    check_convex,
    check_monotone,
    custom_eta,
    custom_psi,
    reachable_scale,
)
from ncgeom.population import FiniteLatentModel, population_loss
from ncgeom.theory import MAX_SEARCH_TERMS, check_conditions, instance_positive_bound, nc_value, search_beats_nc
from ncgeom.theory.search import _Objective

EPS = np.finfo(np.float64).eps
# exact float64 enumerations of at most a few thousand O(1) terms: relative error below 1e4 eps
RTOL = 1e4 * EPS


def _cubic():
    return custom_psi(lambda t: np.mean((t + 1.0) ** 3, axis=-1), name="cubic")


def _bent_square():
    """Non-decreasing and convex on t >= -2 only (it decreases below -2): fine on the reachable box |t| <= 2."""
    return custom_psi(lambda t: np.mean((t + 2.0) ** 2, axis=-1), name="square+2")


# ---------------------------------------------------------------- the reachable box


def test_reachable_box_is_two_r_squared():
    assert (REACHABLE_T, REACHABLE_S) == (2.0, 1.0)
    # |<z, z-> - <z, z+>| <= 2 r^2 on the ball of radius r, attained by z+ = z, z- = -z
    for r in (0.5, 1.0, 3.0):
        z = np.array([r, 0.0])
        assert_allclose(abs(z @ -z - z @ z), reachable_scale(r), rtol=EPS)
    with pytest.raises(ValueError, match="radius"):
        reachable_scale(0.0)


def test_monotone_on_the_reachable_box_passes_and_says_its_box():
    psi = _bent_square()
    rng = np.random.default_rng(0)
    inside = check_monotone(psi, k=2, rng=rng)
    assert inside.holds and inside.box == (-2.0, 2.0) and "[-2, 2]" in inside.describe()
    outside = check_monotone(psi, k=2, rng=rng, scale=3.0)  # the former default box [-3, 3] rejected it
    assert not outside.holds and outside.box == (-3.0, 3.0)
    assert outside.witness is not None and min(outside.witness["t"]) < -2.0  # the witness lies outside [-2, 2]
    convex = check_convex(psi, k=2, rng=rng)
    assert convex.holds and convex.box == (-2.0, 2.0)


def test_monotone_samples_stay_in_the_box():
    seen = []

    def record(t):
        seen.append(np.array(t, copy=True))
        return np.asarray(t).sum(axis=-1)

    check_monotone(custom_psi(record), k=3, rng=np.random.default_rng(1), num_samples=500, scale=0.7)
    everything = np.concatenate([s.ravel() for s in seen])
    assert everything.min() >= -0.7 and everything.max() <= 0.7
    seen_s = []

    def eta(s):
        seen_s.append(np.array(s, copy=True))
        return np.exp(np.asarray(s))

    verdict = check_monotone(custom_eta(eta), rng=np.random.default_rng(2), num_samples=500)
    values = np.concatenate(seen_s)
    assert verdict.holds and verdict.box == (-1.0, 1.0) and values.min() >= -1.0 and values.max() <= 1.0


def test_check_conditions_takes_the_reachable_box():
    rng = np.random.default_rng(0)
    psi = _bent_square()
    default = check_conditions("scl", num_classes=3, dim=2, psi=psi, normalization="sphere", rng=rng)
    assert default.theorem(2).applies and "[-2, 2]" in default.condition("psi_monotone").reason
    wide = check_conditions("scl", num_classes=3, dim=2, psi=psi, normalization="sphere", rng=rng, scale=3.0)
    assert not wide.theorem(2).applies and "[-3, 3]" in wide.condition("psi_monotone").reason
    # an eta non-decreasing on |s| <= 1 only: its box is half of psi's
    eta = custom_eta(lambda s: np.exp(-(np.asarray(s) - 1.0) ** 2), name="bump")  # increasing up to s = 1
    hard = check_conditions("hscl", num_classes=3, dim=2, psi="infonce", eta=eta, normalization="ball", rng=rng)
    assert hard.condition("eta_monotone_nonnegative").holds and "[-1, 1]" in hard.condition("eta_monotone_nonnegative").reason
    none = check_conditions("scl", num_classes=3, dim=2, psi=psi, normalization="none", rng=rng)
    assert "normalization 'none'" in none.condition("psi_monotone").reason
    with pytest.raises(ValueError, match="scale"):
        check_conditions("scl", num_classes=3, dim=2, psi=psi, normalization="sphere", rng=rng, scale=0.0)


# ---------------------------------------------------------------- a numpy-only psi in batch_loss


def test_numpy_only_psi_in_batch_loss_is_one_clear_error():
    z = torch.nn.functional.normalize(torch.randn(8, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(0)), dim=1)
    y = torch.tensor([0, 0, 1, 1, 2, 2, 3, 3])
    gen = torch.Generator().manual_seed(0)
    cases = [
        (lambda t: np.log1p(np.exp(t).sum(axis=-1)), "must accept torch tensors"),
        (lambda t: torch.exp(t), "reduce the last axis"),
        (lambda t: torch.zeros(t.shape[:-1], dtype=t.dtype), "detached"),
    ]
    for func, message in cases:
        with pytest.raises(ValueError, match=message) as info:
            batch_loss(z, y, "scl", estimator="sampled", psi=custom_psi(func, name="mine"), generator=gen)
        assert "psi 'mine'" in str(info.value) and "\n" not in str(info.value)
    good = custom_psi(lambda t: torch.log1p(torch.exp(t).sum(dim=-1)), name="torch")
    value = batch_loss(z, y, "scl", estimator="sampled", psi=good, generator=gen)
    assert value.requires_grad is False and math.isfinite(float(value))


# ---------------------------------------------------------------- the objective: agreement with ncgeom.population


@pytest.mark.parametrize("setting, positives, k, eta", [
    ("scl", "label", 1, None), ("hscl", "label", 2, 2.0), ("ucl", "instance", 1, None), ("hucl", "label", 2, 1.5),
])
def test_search_objective_agrees_with_population_loss(setting, positives, k, eta):
    rng = np.random.default_rng(3)
    c, n, d = 3, 2, 3
    # a non-symmetric psi: the objective enumerates ordered tuples, population_loss too (psi.symmetric False)
    psi = custom_psi(lambda t: np.log1p(np.exp(t[..., 0] + 0.5 * t[..., -1])), name="lopsided")
    from ncgeom.losses import exponential_tilt

    eta_obj = None if eta is None else exponential_tilt(eta)
    objective = _Objective(np.repeat(np.arange(c), n), setting, psi, eta_obj, k, positives, d)
    for _ in range(3):
        u = rng.standard_normal(c * n * d)
        points = objective.points(u).reshape(c, n, d)
        reference = population_loss(FiniteLatentModel(list(points)), setting, psi, num_negatives=k, eta=eta_obj,
                                    positives=positives, method="exact").value
        assert_allclose(objective(u), reference, rtol=RTOL)


# ---------------------------------------------------------------- the known answers


@pytest.mark.parametrize("c", [3, 4])
def test_nc_wins_for_builtin_scl_infonce(c):
    r = search_beats_nc("infonce", setting="scl", num_classes=c, dim=c - 1, num_starts=3, rng=np.random.default_rng(0))
    assert not r.beats_nc and r.gap is not None and r.gap >= -r.tol
    assert_allclose(r.nc_value, nc_value("scl", "infonce", num_classes=c, num_negatives=1), rtol=RTOL)  # section 5
    # the best configuration found is NC itself, to the accuracy of finite-difference L-BFGS
    assert r.gap < 1e-6
    assert "not a proof" in r.statement()


@pytest.mark.parametrize("c", [3, 4])
def test_cross_polytope_territory_beats_nc_with_instance_positives(c):
    r = search_beats_nc("infonce", setting="ucl", num_classes=c, dim=c - 1, positives="instance", points_per_class=2,
                        num_starts=3, rng=np.random.default_rng(0))
    # docs/theory.md, section 4: L_NC = log(2)/C + (1 - 1/C) log(1 + e^{-C/(C-1)})
    expected_nc = math.log(2) / c + (1 - 1 / c) * math.log1p(math.exp(-c / (c - 1)))
    assert_allclose(r.nc_value, expected_nc, rtol=RTOL)
    assert r.beats_nc and r.gap is not None and r.gap < -1e-3
    # and no configuration goes below the Jensen bound psi(-1) of instance positives
    assert r.best_loss >= instance_positive_bound("infonce", num_negatives=1)
    assert_allclose(np.linalg.norm(r.points, axis=-1), 1.0, rtol=16 * EPS)
    assert "beats NC" in r.statement()


def test_cubic_psi_of_the_ablations_beats_nc():
    r = search_beats_nc(_cubic(), setting="scl", num_classes=3, dim=2, num_starts=3, rng=np.random.default_rng(0))
    assert_allclose(r.nc_value, -0.125, rtol=RTOL)  # psi(-C/(C-1)) = (-1/2)^3
    # the certificate of hypothesis 2.4 (e1, -e1, e2) reaches -1/3; the search at least as low
    assert r.beats_nc and r.best_loss <= -1.0 / 3.0 + 1e-9
    gram = np.einsum("ad,bd->ab", r.points[:, 0], r.points[:, 0])
    off = gram[~np.eye(3, dtype=bool)]
    assert_allclose(np.mean(off**3), r.best_loss, rtol=1e-12, atol=1e-12)  # collapsed L_SCL = mean of M_cc'^3


def test_no_nc_below_c_minus_one_dimensions():
    r = search_beats_nc("infonce", setting="scl", num_classes=4, dim=2, num_starts=2, rng=np.random.default_rng(0))
    assert r.nc_value is None and r.gap is None and not r.beats_nc
    assert "no simplex ETF" in r.statement() and r.points.shape == (4, 1, 2)


def test_search_rejects_bad_input():
    rng = np.random.default_rng(0)
    no_rng: Any = None
    with pytest.raises(ValueError, match="rng"):
        search_beats_nc("infonce", setting="scl", num_classes=3, dim=2, rng=no_rng)
    with pytest.raises(ValueError, match="num_classes"):
        search_beats_nc("infonce", setting="scl", num_classes=1, dim=2, rng=rng)
    with pytest.raises(ValueError, match="setting"):
        search_beats_nc("infonce", setting="xcl", num_classes=3, dim=2, rng=rng)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=str(MAX_SEARCH_TERMS)):
        search_beats_nc("infonce", setting="scl", num_classes=10, dim=9, num_negatives=4, points_per_class=3, rng=rng)
    torch_only = custom_psi(lambda t: torch.logsumexp(t, dim=-1), name="torch-only")
    with pytest.raises(ValueError, match="numpy arrays"):
        search_beats_nc(torch_only, setting="scl", num_classes=3, dim=2, rng=rng)


def test_docstring_examples():
    import doctest

    import ncgeom.losses.properties as properties
    import ncgeom.theory.conditions as conditions
    import ncgeom.theory.search as search

    for module in (properties, conditions, search):
        result = doctest.testmod(module, raise_on_error=False)
        assert result.attempted > 0 and result.failed == 0, module.__name__
