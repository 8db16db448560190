"""The hypothesis strategies of ncgeom.testing draw what their docstrings promise."""

from typing import Any

import numpy as np
import pytest
from hypothesis import find, given
from hypothesis import strategies as st
from numpy.testing import assert_allclose

from ncgeom import testing
from ncgeom.geometry import etf_residual
from ncgeom.losses import Eta, Psi, check_monotone
from ncgeom.population import FiniteLatentModel
from ncgeom.testing import (
    betas,
    decreasing_etas,
    etf_configs,
    exponential_etas,
    finite_latent_models,
    monotone_etas,
    noisy_collapsed_embeddings,
    psi_params,
)

EPS = np.finfo(np.float64).eps


@given(etf_configs(min_classes=3, max_classes=6, max_extra_dim=2))
def test_etf_configs(cfg):
    assert 3 <= cfg.num_classes <= 6 and cfg.num_classes - 1 <= cfg.dim <= cfg.num_classes + 1
    v = cfg.vectors()
    assert v.shape == (cfg.num_classes, cfg.dim) and etf_residual(v) < 1e-12
    assert_allclose(cfg.vectors(), v, rtol=0, atol=0)  # reproducible from the seed


@given(noisy_collapsed_embeddings(max_sigma=0.3))
def test_noisy_collapsed_embeddings(sample):
    assert sample.z.shape[0] == sample.labels.size and 0.0 <= sample.sigma <= 0.3
    counts = np.bincount(sample.labels, minlength=sample.num_classes)
    assert counts.size == sample.num_classes and counts.min() >= 2
    if sample.sigma == 0.0:
        means = np.stack([sample.z[sample.labels == c].mean(0) for c in range(sample.num_classes)])
        assert etf_residual(means) < 1e-12


def test_noise_is_independent_of_the_rotation(monkeypatch):
    # The noise used to come from default_rng(seed), the stream whose first d^2 normals had just built
    # the rotation: noise and geometry were the same numbers.
    cfg = testing.EtfConfig(num_classes=3, dim=2, seed=123)
    monkeypatch.setattr(testing, "etf_configs", lambda **kw: st.just(cfg))
    sample = find(noisy_collapsed_embeddings(max_sigma=0.5), lambda s: s.sigma > 0.1)
    noise = (sample.z - cfg.vectors()[sample.labels]) / sample.sigma
    rotation_normals = np.random.default_rng(cfg.seed).standard_normal(noise.size)
    assert np.max(np.abs(noise.ravel() - rotation_normals)) > 0.1


@pytest.mark.parametrize("normalization", ["ball", "sphere"])
def test_finite_latent_models(normalization):
    @given(finite_latent_models(normalization=normalization, balanced=False))
    def check(model):
        assert isinstance(model, FiniteLatentModel) and 2 <= model.num_classes <= 3
        norms = np.linalg.norm(model.embeddings, axis=1)
        if normalization == "sphere":
            assert_allclose(norms, 1.0, rtol=0, atol=8 * EPS)
        else:
            assert norms.max() <= 1.0 + 8 * EPS
        assert_allclose(model.probabilities.sum(), 1.0, rtol=0, atol=16 * EPS)

    check()
    not_a_domain: Any = "none"  # a normalization, not a Domain, on purpose: the runtime check is under test
    with pytest.raises(ValueError, match="normalization"):
        finite_latent_models(normalization=not_a_domain)


@given(psi_params(max_negatives=3), betas(max_beta=4.0))
def test_psi_params_and_betas(params, beta):
    assert isinstance(params.psi(), Psi) and params.tau > 0 and 1 <= params.num_negatives <= 3
    assert 0.0 <= beta <= 4.0


@given(monotone_etas(), exponential_etas(), decreasing_etas())
def test_eta_strategies(mono, expo, dec):
    rng = np.random.default_rng(0)
    s = np.linspace(-1, 1, 11)
    assert all(isinstance(e, Eta) for e in (mono, expo, dec))
    assert np.all(np.diff(mono(s)) >= 0) and np.all(mono(s) > 0)
    assert check_monotone(expo, rng=rng, num_samples=100).holds
    assert not check_monotone(dec, rng=rng, num_samples=100).holds
