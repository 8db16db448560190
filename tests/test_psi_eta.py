"""Tests of the psi family, eta hardening and the property checkers (docs/theory.md sections 2-3)."""

import math
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from numpy.testing import assert_allclose

from ncgeom.losses import (
    Eta,
    check_convex,
    check_monotone,
    custom_eta,
    custom_psi,
    exponential_tilt,
    infonce,
    infonce_mean,
    make_psi,
    tilt_weights,
    triplet,
)
from ncgeom.testing import betas, monotone_etas, psi_params

EPS = np.finfo(np.float64).eps
RTOL = 64 * EPS  # a handful of elementary operations in float64


def _naive(name, t, tau, margin):
    """Loop reference of docs/theory.md section 2, one row of t at a time."""
    k = len(t)
    if name == "infonce":
        return math.log(1 + sum(math.exp(ti / tau) for ti in t))
    if name == "infonce-mean":
        return math.log(1 + sum(math.exp(ti / tau) for ti in t) / k)
    return sum(max(0.0, ti + margin) for ti in t) / k


@given(psi_params(max_negatives=6), st.integers(0, 2**32 - 1))
def test_psi_matches_naive_loop(params, seed):
    rng = np.random.default_rng(seed)
    t = rng.uniform(-2.0, 2.0, size=(5, params.num_negatives))
    psi = params.psi()
    got = psi(t)
    ref = [_naive(params.name, row, params.tau, params.margin) for row in t]
    assert got.shape == (5,)
    assert_allclose(got, ref, rtol=RTOL * params.num_negatives, atol=RTOL)
    got_t = psi(torch.tensor(t))
    torch.testing.assert_close(got_t, torch.tensor(got), rtol=RTOL * 10, atol=RTOL)


def test_psi_hand_values_and_stability():
    assert_allclose(infonce()(np.zeros((1, 1))), [math.log(2)], rtol=RTOL)
    assert_allclose(infonce_mean()(np.zeros((1, 256))), [math.log(2)], rtol=RTOL)
    assert_allclose(triplet(margin=1.0)(np.array([[-2.0, 0.5]])), [0.75], rtol=RTOL)
    big = infonce(tau=0.01)(np.array([[10.0, 10.0]]))  # exp(1000) would overflow
    assert_allclose(big, [1000.0 + math.log(2)], rtol=RTOL)
    assert make_psi("infonce-mean", tau=0.5).tau == 0.5
    p = infonce()
    assert make_psi(p) is p


def test_psi_gradients_torch():
    t = torch.randn(3, 4, dtype=torch.float64, requires_grad=True, generator=torch.Generator().manual_seed(0))
    for psi in (infonce(tau=0.7), infonce_mean(tau=1.3)):
        assert torch.autograd.gradcheck(psi, (t,))


def test_invalid_psi_and_eta_arguments():
    # arguments outside their declared types on purpose: the runtime checks are under test
    not_a_psi: Any = "hinge"
    not_a_function: Any = 3
    with pytest.raises(ValueError, match="tau"):
        infonce(tau=0.0)
    with pytest.raises(ValueError, match="psi"):
        make_psi(not_a_psi)
    with pytest.raises(ValueError, match="beta"):
        exponential_tilt(-1.0)
    with pytest.raises(ValueError, match="t must"):
        infonce()(np.float64(1.0))
    with pytest.raises(ValueError, match="func"):
        custom_psi(not_a_function)


@pytest.mark.parametrize("name", ["infonce", "infonce-mean", "triplet"])
@pytest.mark.parametrize("k", [1, 3])
def test_builtins_pass_checkers(name, k):
    psi = make_psi(name, tau=0.5, margin=1.0)
    rng = np.random.default_rng(0)
    assert check_convex(psi, k=k, rng=rng).holds
    assert check_monotone(psi, k=k, rng=rng).holds


def test_convexity_checker_fails_with_witness_on_nonconvex_psi():
    psi = custom_psi(lambda t: np.sin(t).sum(axis=-1), name="sine")
    v = check_convex(psi, k=2, rng=np.random.default_rng(1))
    assert not v.holds and not bool(v)
    assert v.max_violation > v.tol
    w = v.witness
    assert w is not None  # a failed check carries its witness
    mix = w["lambda"] * np.array(w["a"]) + (1 - w["lambda"]) * np.array(w["b"])
    # The witness reproduces the violated inequality psi(mix) > chord.
    assert_allclose(psi(mix[None])[0], w["psi(mix)"], rtol=RTOL)
    assert w["psi(mix)"] > w["chord"]


def test_monotonicity_checker_fails_with_witness():
    psi = custom_psi(lambda t: -t.sum(axis=-1), name="decreasing")
    v = check_monotone(psi, k=3, rng=np.random.default_rng(2))
    assert v.witness is not None  # a failed check carries its witness
    assert not v.holds and v.witness["psi(t)"] > v.witness["psi(t + delta e_i)"]
    eta = custom_eta(lambda s: np.exp(-2.0 * np.asarray(s)), name="decreasing")
    ve = check_monotone(eta, rng=np.random.default_rng(3))
    assert not ve.holds and ve.witness is not None
    assert ve.witness["eta(s)"] > ve.witness["eta(s + delta)"]
    assert ve.witness["s"] < ve.witness["s + delta"]


def test_checkers_need_rng():
    no_rng: Any = None  # outside the declared type on purpose: the runtime check is under test
    with pytest.raises(ValueError, match="rng"):
        check_convex(infonce(), k=1, rng=no_rng)


def test_checkers_and_tilt_weights_reject_bad_input():
    # A bare function used to raise AttributeError deep inside; bad weights gave a misleading
    # "all zero" message or numpy's broadcasting error.
    rng = np.random.default_rng(0)
    # arguments outside their declared types on purpose: the runtime checks are under test
    bare_function: Any = lambda t: t.sum(-1)  # noqa: E731
    not_an_eta: Any = 1.0
    with pytest.raises(ValueError, match="psi must be a Psi"):
        check_convex(bare_function, k=1, rng=rng)
    with pytest.raises(ValueError, match="fn must be a Psi or an Eta"):
        check_monotone(bare_function, k=1, rng=rng)
    eta = exponential_tilt(1.0)
    with pytest.raises(ValueError, match="similarities"):
        tilt_weights(eta, np.array([np.nan, 0.0]))
    with pytest.raises(ValueError, match="base_weights must be >= 0"):
        tilt_weights(eta, np.zeros(3), np.array([1.0, -1.0, 1.0]))
    with pytest.raises(ValueError, match="base_weights must have a shape"):
        tilt_weights(eta, np.zeros(3), np.ones(4))
    with pytest.raises(ValueError, match="eta must be an Eta"):
        tilt_weights(not_an_eta, np.zeros(3))


@given(monotone_etas())
def test_random_monotone_etas_pass_checker(eta):
    assert check_monotone(eta, rng=np.random.default_rng(0), num_samples=200).holds


@given(betas(), st.integers(0, 2**32 - 1))
def test_tilt_weights_naive_reference(beta, seed):
    rng = np.random.default_rng(seed)
    s = rng.uniform(-1, 1, size=6)
    p = rng.uniform(0.1, 1.0, size=6)
    ref = np.array([math.exp(beta * si) * pi for si, pi in zip(s, p)])
    ref /= ref.sum()
    assert_allclose(tilt_weights(exponential_tilt(beta), s, p), ref, rtol=1e-12)
    assert_allclose(tilt_weights(exponential_tilt(0.0), s), np.full(6, 1 / 6), rtol=RTOL)


def test_tilt_weights_extreme_beta_and_zero_eta():
    w = tilt_weights(exponential_tilt(1000.0), np.array([0.5, 1.0, -1.0]))
    assert_allclose(w, [0.0, 1.0, 0.0], atol=EPS)
    zero = custom_eta(lambda s: np.zeros_like(np.asarray(s, dtype=float)), name="zero")
    with pytest.raises(ValueError, match="all zero"):
        tilt_weights(zero, np.array([0.1, 0.2]))
    assert isinstance(exponential_tilt(1.0), Eta)
    assert_allclose(exponential_tilt(2.0)(np.array([0.5])), [math.e], rtol=RTOL)
