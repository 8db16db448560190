"""ncgeom.models: encoders, normalization layer, initialization from explicit generators."""

import math
from typing import Any

import numpy as np
import pytest
import torch

import ncgeom.models as models
from ncgeom.geometry import etf_residual
from ncgeom.models import LinearEncoder, MLPEncoder, Normalize, UnconstrainedFeatures, build_model

EPS32 = torch.finfo(torch.float32).eps


def test_all_exports_exist_once():
    assert len(models.__all__) == len(set(models.__all__))
    for name in models.__all__:
        assert hasattr(models, name), name


def test_normalize_layer_modes():
    z = torch.tensor([[3.0, 4.0], [0.3, 0.4]], dtype=torch.float64)
    torch.testing.assert_close(Normalize("none")(z), z)
    torch.testing.assert_close(Normalize("sphere")(z), torch.tensor([[0.6, 0.8], [0.6, 0.8]], dtype=torch.float64))
    torch.testing.assert_close(Normalize("ball")(z), torch.tensor([[0.6, 0.8], [0.3, 0.4]], dtype=torch.float64))
    not_a_mode: Any = "cube"  # outside the Literal on purpose: the runtime check is under test
    with pytest.raises(ValueError, match="norm"):
        Normalize(not_a_mode)


def test_models_do_not_touch_global_rng_and_are_reproducible():
    state = torch.random.get_rng_state()
    a = build_model("mlp", dim=3, input_dim=5, generator=torch.Generator().manual_seed(1))
    b = build_model("mlp", dim=3, input_dim=5, generator=torch.Generator().manual_seed(1))
    c = build_model("mlp", dim=3, input_dim=5, generator=torch.Generator().manual_seed(2))
    u = build_model("unconstrained", dim=3, num_samples=4, generator=torch.Generator().manual_seed(1))
    assert torch.equal(state, torch.random.get_rng_state())
    for pa, pb in zip(a.parameters(), b.parameters()):
        torch.testing.assert_close(pa, pb, rtol=0, atol=0)
    assert not torch.equal(next(a.parameters()), next(c.parameters()))
    assert u.weight.shape == (4, 3)


def test_linear_init_law_bound():
    enc = LinearEncoder(100, 50, generator=torch.Generator().manual_seed(0))
    w = enc.linear.weight.detach()
    assert w.abs().max() <= 1 / math.sqrt(100)
    # uniform(-a, a) has variance a^2 / 3: 5000 draws, 5 standard errors
    np.testing.assert_allclose(w.var().item(), 1 / 300, rtol=5 * math.sqrt(2 / 5000) * 1.5)


def test_encoders_shapes_and_normalization():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(7, 5, generator=g)
    for norm in ("sphere", "ball", "none"):
        mlp = MLPEncoder(5, 3, hidden_dim=8, depth=3, norm=norm, generator=g)
        z = mlp(x)
        assert z.shape == (7, 3)
        if norm == "sphere":
            torch.testing.assert_close(z.norm(dim=1), torch.ones(7), rtol=0, atol=4 * EPS32)
        if norm == "ball":
            assert bool((z.norm(dim=1) <= 1 + 4 * EPS32).all())
    assert len([m for m in MLPEncoder(5, 3, depth=3, generator=g).net if isinstance(m, torch.nn.Linear)]) == 3


def test_unconstrained_forward_by_index_and_random_norms():
    u = UnconstrainedFeatures.random(2000, 16, scale=2.0, norm="none", generator=torch.Generator().manual_seed(0))
    idx = torch.tensor([3, 1])
    torch.testing.assert_close(u(idx), u.weight[idx])
    # ||W_i||^2 = (scale^2 / d) chi2_d: mean scale^2 = 4, variance (4 / 16)^2 * 2 * 16 = 2; 5 standard errors
    sq = u.weight.detach().double().pow(2).sum(1)
    np.testing.assert_allclose(sq.mean().item(), 4.0, atol=5 * math.sqrt(2 / 2000))
    assert u().shape == (2000, 16)


def test_near_nc_init_is_an_etf_plus_noise():
    y = np.repeat(np.arange(4), 3)
    u = build_model("unconstrained", dim=5, labels=y, init="near_nc", init_noise=0.0, rng=np.random.default_rng(0),
                    generator=torch.Generator(), dtype=torch.float64)
    assert isinstance(u, UnconstrainedFeatures)
    z = u().detach()
    assert etf_residual(z[::3]) < 1e-12  # one row per class: the ETF
    torch.testing.assert_close(z[0], z[1])  # a class sits at its vertex
    noisy = UnconstrainedFeatures.near_nc(y, 5, noise=0.1, rng=np.random.default_rng(0), norm="none", dtype=torch.float64)
    dev = (noisy.weight.detach() - u.weight.detach()).norm(dim=1)
    assert 0 < dev.mean().item() < 0.3  # noise of typical size 0.1
    with pytest.raises(ValueError, match="dim"):
        UnconstrainedFeatures.near_nc(y, 2, noise=0.1, rng=np.random.default_rng(0))


@pytest.mark.parametrize("kwargs, name", [
    (dict(kind="mlp", init="near_nc"), "near_nc"),
    (dict(kind="transformer"), "model"),
    (dict(kind="unconstrained", num_samples=0), "num_samples"),
    (dict(kind="mlp", input_dim=5, hidden_dim=0), "hidden_dim"),
])
def test_build_model_rejects_bad_values(kwargs, name):
    args: dict[str, Any] = dict(dim=3, input_dim=5, num_samples=4, generator=torch.Generator())
    args.update(kwargs)
    with pytest.raises(ValueError, match=name):
        build_model(args.pop("kind"), **args)
