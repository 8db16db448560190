"""Tests of ncgeom.geometry: ETF identities (docs/theory.md section 4), residuals, normalization."""

from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from numpy.testing import assert_allclose

from ncgeom.geometry import etf_gram, etf_residual, gram_etf_residual, is_etf, normalize, random_orthogonal, simplex_etf
from ncgeom.testing import etf_configs

EPS = np.finfo(np.float64).eps
# ETF rows are built from O(C) float64 operations and one rotation: allow ~100 C ulps.
def _tol(c):
    return 100 * c * EPS


def test_etf_gram_naive_reference():
    for c in range(2, 7):
        ref = np.array([[1.0 if i == j else -1.0 / (c - 1) for j in range(c)] for i in range(c)])
        assert_allclose(etf_gram(c), ref, rtol=0, atol=4 * EPS)


def test_c2_is_antipodal():
    assert_allclose(simplex_etf(2), [[1.0], [-1.0]], rtol=0, atol=4 * EPS)


@given(etf_configs(max_classes=12, max_extra_dim=4))
def test_etf_identities(cfg):
    c, v = cfg.num_classes, cfg.vectors()
    assert v.shape == (c, cfg.dim)
    tol = _tol(c)
    assert_allclose(np.linalg.norm(v, axis=1), np.ones(c), rtol=0, atol=tol)
    assert_allclose(v.sum(axis=0), np.zeros(cfg.dim), rtol=0, atol=tol)
    g = v @ v.T
    off = g[~np.eye(c, dtype=bool)]
    assert_allclose(off, np.full(off.shape, -1.0 / (c - 1)), rtol=0, atol=tol)
    assert_allclose(g, etf_gram(c), rtol=0, atol=tol)
    eig = np.sort(np.linalg.eigvalsh(g))
    assert_allclose(eig, [0.0] + [c / (c - 1)] * (c - 1), rtol=0, atol=tol)
    assert etf_residual(v) <= tol * c
    assert is_etf(v, atol=tol * c)


@given(etf_configs(max_classes=8), st.integers(0, 2**32 - 1))
def test_rotation_invariance(cfg, seed):
    rng = np.random.default_rng(seed)
    v = cfg.vectors() + 0.1 * rng.standard_normal((cfg.num_classes, cfg.dim))
    q = random_orthogonal(cfg.dim, rng=rng)
    assert_allclose(q @ q.T, np.eye(cfg.dim), rtol=0, atol=50 * cfg.dim * EPS)
    assert_allclose(etf_residual(v @ q), etf_residual(v), rtol=1e-10, atol=1e-12)


def test_residual_detects_non_etf():
    v = simplex_etf(4)
    v2 = v.copy()
    v2[0] *= 0.9
    assert etf_residual(v2) > 0.1
    assert not is_etf(v2, atol=1e-8)
    g = etf_gram(4)
    assert gram_etf_residual(g) == 0.0
    assert_allclose(gram_etf_residual(g + 0.5 * np.eye(4)), 1.0, rtol=1e-14)


def test_residual_accepts_torch():
    v = torch.tensor(simplex_etf(3), dtype=torch.float32)
    assert etf_residual(v) < 1e-6


def test_invalid_arguments():
    with pytest.raises(ValueError, match="dim"):
        simplex_etf(5, 3)
    with pytest.raises(ValueError, match="num_classes"):
        simplex_etf(1)
    with pytest.raises(ValueError, match="gram"):
        gram_etf_residual(np.ones((2, 3)))
    # arguments outside their declared types on purpose: the runtime checks are under test
    not_a_mode: Any = "cube"
    not_a_generator: Any = 0
    with pytest.raises(ValueError, match="mode"):
        normalize(np.ones((2, 2)), not_a_mode)
    with pytest.raises(ValueError, match="rng"):
        random_orthogonal(3, rng=not_a_generator)
    # NaN input and eps <= 0 used to give a NaN residual / NaN rows silently.
    with pytest.raises(ValueError, match="vectors"):
        etf_residual(np.array([[np.nan], [1.0]]))
    with pytest.raises(ValueError, match="gram"):
        gram_etf_residual(np.full((2, 2), np.inf))
    with pytest.raises(ValueError, match="eps"):
        normalize(np.zeros((1, 2)), "sphere", eps=0.0)


def test_normalize_numpy_and_torch_agree():
    z = np.array([[3.0, 4.0], [0.3, 0.4], [0.0, 0.0]])
    assert_allclose(normalize(z, "ball"), [[0.6, 0.8], [0.3, 0.4], [0.0, 0.0]], rtol=0, atol=4 * EPS)
    assert_allclose(normalize(z, "sphere")[:2], [[0.6, 0.8], [0.6, 0.8]], rtol=0, atol=4 * EPS)
    assert np.all(np.isfinite(normalize(z, "sphere")))
    assert normalize(z, "none") is z
    for mode in ("ball", "sphere"):
        zt = torch.tensor(z, requires_grad=True)
        out = normalize(zt, mode)
        assert out.requires_grad and out.dtype == torch.float64
        torch.testing.assert_close(out.detach(), torch.tensor(normalize(z, mode)))
