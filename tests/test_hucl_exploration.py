"""HUCL exploration (docs/theory.md section 4, open problem): the loss, its cross-checks, the record."""

import itertools
import json
import math
from dataclasses import FrozenInstanceError

import numpy as np
import pytest
import torch
from numpy.testing import assert_allclose

import proofs_check.hucl as hucl
from ncgeom.geometry import simplex_etf
from ncgeom.losses import make_psi
from ncgeom.theory import nc_value
from proofs_check.certificates import gram_program, program_objective
from proofs_check.hucl import HUCLExploration, check_hucl, explore_hucl, hucl_collapsed_loss


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


def test_all_names_exist_once():
    assert len(set(hucl.__all__)) == len(hucl.__all__)
    for name in hucl.__all__:
        assert hasattr(hucl, name), name


@pytest.mark.parametrize("k", [1, 2])
def test_loss_matches_loop_reference(k):
    rng = np.random.default_rng(k)
    psi = make_psi("infonce", tau=0.5)
    for beta in (0.0, 2.0, 10.0):
        v = rng.standard_normal((4, 4))
        value = float(hucl_collapsed_loss(torch.as_tensor(v), beta=beta, num_negatives=k, psi=psi))
        assert_allclose(value, _loop_hucl(v, beta, psi, k), rtol=1e-12)


@pytest.mark.parametrize("k", [1, 2, 3])
def test_etf_value_is_nc_value(k):
    psi = make_psi("infonce")
    etf = torch.as_tensor(simplex_etf(4, 4, rng=np.random.default_rng(0)))
    for beta in (0.0, 1.0, 5.0, 30.0):
        value = float(hucl_collapsed_loss(etf, beta=beta, num_negatives=k, psi=psi))
        assert_allclose(value, nc_value("hucl", "infonce", num_classes=4, num_negatives=k, beta=beta), rtol=1e-12)


def test_beta_zero_is_the_ucl_gram_program():
    # Independent method: at beta = 0 HUCL is UCL, whose collapsed loss is the section 6 program on the sphere.
    rng = np.random.default_rng(5)
    v = rng.standard_normal((5, 5))
    vn = v / np.linalg.norm(v, axis=1, keepdims=True)
    program = gram_program("ucl", "infonce", num_classes=5, num_negatives=2)
    value = float(hucl_collapsed_loss(torch.as_tensor(v), beta=0.0, num_negatives=2, psi=make_psi("infonce")))
    assert_allclose(value, program_objective(program, vn @ vn.T), rtol=1e-12)


def test_two_class_example():
    value = hucl_collapsed_loss(torch.tensor([[1.0], [-1.0]], dtype=torch.float64), beta=0.0, num_negatives=1,
                                psi=make_psi("infonce"))
    assert_allclose(float(value), 0.5 * math.log(2) + 0.5 * math.log1p(math.exp(-2)), rtol=1e-14)


def test_exploration_record():
    res = explore_hucl(num_classes=3, betas=(0.0, 5.0), num_starts=2, generator=torch.Generator().manual_seed(0))
    assert isinstance(res, HUCLExploration)
    with pytest.raises(FrozenInstanceError):
        res.betas = ()  # type: ignore[misc]  # assigning a frozen field on purpose: the error is under test
    assert_allclose(res.min_found[0], res.harris_bound, rtol=1e-10)  # beta = 0: UCL minimum is NC
    assert res.etf_distance[0] < 1e-4
    for found, nc in zip(res.min_found, res.nc_value):
        assert res.harris_bound - 1e-10 <= found <= nc + 1e-12  # Harris bound below; the ETF start above
    json.dumps(res.to_dict())
    again = explore_hucl(num_classes=3, betas=(0.0, 5.0), num_starts=2, generator=torch.Generator().manual_seed(0))
    assert again == res


def test_check_is_info_and_validates():
    result = check_hucl(num_classes=3, num_starts=2, betas=(0.0, 2.0))
    assert result.status == "info"
    assert result.details["harris_bound_respected"]
    with pytest.raises(ValueError, match="beta"):
        explore_hucl(betas=(-1.0,), generator=torch.Generator())
    with pytest.raises(ValueError, match="generator"):
        explore_hucl(generator=np.random.default_rng(0))
    with pytest.raises(ValueError, match="num_negatives"):
        explore_hucl(num_negatives=4, generator=torch.Generator())
    # the public loss and slope functions validate too (before the review they accepted beta < 0)
    psi = make_psi("infonce", tau=1.0)
    with pytest.raises(ValueError, match="beta"):
        hucl.hucl_gram_loss(torch.eye(3, dtype=torch.float64), beta=-0.5, num_negatives=1, psi=psi)
    with pytest.raises(ValueError, match="num_negatives"):
        hucl.hucl_gram_loss(torch.eye(3, dtype=torch.float64), beta=0.5, num_negatives=0, psi=psi)
    with pytest.raises(ValueError, match="beta"):
        hucl.equiangular_slope_at_nc(num_classes=3, num_negatives=1, beta=float("nan"), psi=psi)


def _slope_k1(c, beta):
    # d/drho at rho = -1/(C-1) of q log 2 + (1 - q) g(rho), q = e^b / (e^b + (C-1) e^(b rho)), tau = 1.
    rho = -1.0 / (c - 1)
    q = math.exp(beta) / (math.exp(beta) + (c - 1) * math.exp(beta * rho))
    g = math.log1p(math.exp(rho - 1))
    return (1 - q) * (1 / (1 + math.exp(1 - rho)) - beta * q * (math.log(2) - g))


@pytest.mark.parametrize("c", [3, 4, 10])
def test_equiangular_slope_and_critical_beta_match_the_k1_formula(c):
    from scipy.optimize import brentq

    from proofs_check.hucl import critical_beta, equiangular_slope_at_nc

    psi = make_psi("infonce")
    for beta in (0.0, 0.5, 1.0, 3.0):
        assert_allclose(equiangular_slope_at_nc(num_classes=c, num_negatives=1, beta=beta, psi=psi),
                        _slope_k1(c, beta), rtol=1e-12, atol=1e-15)
    expected = brentq(lambda b: _slope_k1(c, b), 1e-3, 10.0, xtol=1e-14)
    beta_c = critical_beta(num_classes=c, num_negatives=1, psi=psi)
    assert beta_c is not None  # the slope turns negative below beta = 64
    assert_allclose(beta_c, expected, atol=1e-8)


def test_minimum_below_nc_beyond_the_critical_beta():
    res = explore_hucl(num_classes=4, betas=(0.5, 1.0), num_starts=3, generator=torch.Generator().manual_seed(0))
    assert res.critical_beta is not None
    assert_allclose(res.critical_beta, 0.87737, atol=1e-5)
    assert res.slope_at_nc[0] > 0 and res.slope_at_nc[1] < 0
    assert res.min_found[1] < res.nc_value[1] - 1e-4  # beta = 1 > beta_c: NC is not the minimizer


def test_critical_beta_is_zero_not_none_when_the_slope_is_negative_at_zero(monkeypatch):
    # before the fix a slope negative already at beta = 0 returned None ("never negative")
    monkeypatch.setattr(hucl, "equiangular_slope_at_nc", lambda **kw: -1.0 - kw["beta"])
    assert hucl.critical_beta(num_classes=4, num_negatives=1, psi=None) == 0.0
    monkeypatch.setattr(hucl, "equiangular_slope_at_nc", lambda **kw: 1.0)
    assert hucl.critical_beta(num_classes=4, num_negatives=1, psi=None) is None
