"""The encoders of vector data: unconstrained features, linear and MLP, each ending in a normalization layer.

- :class:`UnconstrainedFeatures`: one free vector per training sample (the "unconstrained features" /
  layer-peeled model of the neural-collapse literature, e.g. mixon2022neural, fang2021exploring); its
  forward takes sample indices, not inputs.
- :class:`LinearEncoder`, :class:`MLPEncoder`: maps inputs [N, D] to [N, d].

Every encoder ends with :class:`ncgeom.models.normalize.Normalize` (docs/theory.md, section 1).

Initialization never touches torch's global RNG: weights are created uninitialized and filled from an
explicit ``torch.Generator`` (random) or ``numpy.random.Generator`` (near-NC ETF).
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn

from ncgeom.geometry import simplex_etf
from ncgeom.models.normalize import Normalize
from ncgeom.validate import require_int, require_real
from ncgeom.vocabulary import Normalization

__all__ = ["UnconstrainedFeatures", "LinearEncoder", "MLPEncoder", "check_generator"]


def check_generator(generator) -> torch.Generator:
    """``generator`` if it is a torch.Generator, else ValueError (weights are drawn from an explicit generator)."""
    if not isinstance(generator, torch.Generator):
        raise ValueError("generator must be a torch.Generator")
    return generator


def _linear(in_dim: int, out_dim: int, *, generator: torch.Generator, dtype) -> nn.Linear:
    """nn.Linear with PyTorch's default law U(-1/sqrt(in), 1/sqrt(in)), drawn from ``generator``."""
    layer = nn.utils.skip_init(nn.Linear, in_dim, out_dim, dtype=dtype)
    bound = 1.0 / math.sqrt(in_dim)
    with torch.no_grad():
        layer.weight.uniform_(-bound, bound, generator=generator)
        layer.bias.uniform_(-bound, bound, generator=generator)
    return layer


class UnconstrainedFeatures(nn.Module):
    """One free feature vector per training sample: z_i = normalize(W_i), W [N, d].

    Random initialization: W_i ~ N(0, (scale^2 / d) I_d), so ||W_i|| is about ``scale``.
    Near-NC initialization (:meth:`near_nc`): W_i = v_{y_i} + noise * eps_i, eps_i ~ N(0, I_d / d), with
    {v_c} a unit simplex ETF in a random orientation (needs d >= C - 1).
    """

    takes_indices = True

    def __init__(self, weight: torch.Tensor, *, norm: Normalization = "sphere"):
        super().__init__()
        if not isinstance(weight, torch.Tensor) or weight.ndim != 2:
            raise ValueError("weight must be a torch.Tensor [N, d]")
        self.weight = nn.Parameter(weight.detach().clone())
        self.norm = Normalize(norm)

    @classmethod
    def random(cls, num_samples: int, dim: int, *, scale: float = 1.0, norm: Normalization = "sphere",
               generator: torch.Generator, dtype=torch.float32) -> UnconstrainedFeatures:
        """Features W_i ~ N(0, (scale^2 / d) I_d) drawn from ``generator``."""
        n = require_int("num_samples", num_samples, min_value=1)
        d = require_int("dim", dim, min_value=1)
        scale = require_real("init_scale", scale, min_value=0.0, min_inclusive=False)
        w = torch.randn((n, d), generator=check_generator(generator), dtype=dtype) * (scale / math.sqrt(d))
        return cls(w, norm=norm)

    @classmethod
    def near_nc(cls, labels, dim: int, *, noise: float, norm: Normalization = "sphere", rng: np.random.Generator,
                dtype=torch.float32) -> UnconstrainedFeatures:
        """Features at a randomly rotated unit ETF of the classes plus Gaussian noise of size ``noise``."""
        y = np.asarray(labels)
        num_classes = int(y.max()) + 1
        d = require_int("dim", dim, min_value=max(1, num_classes - 1))
        noise = require_real("init_noise", noise, min_value=0.0)
        etf = simplex_etf(num_classes, d, rng=rng)
        w = etf[y] + noise * rng.standard_normal((y.size, d)) / math.sqrt(d)
        return cls(torch.as_tensor(w, dtype=dtype), norm=norm)

    def forward(self, index: torch.Tensor | None = None) -> torch.Tensor:
        """Normalized features of the samples ``index`` [B] (all samples if None) -> [B, d]."""
        w = self.weight if index is None else self.weight[index]
        return self.norm(w)


class LinearEncoder(nn.Module):
    """z = normalize(W x + b), W [d, D]."""

    takes_indices = False

    def __init__(self, input_dim: int, dim: int, *, norm: Normalization = "sphere", generator: torch.Generator,
                 dtype=torch.float32):
        super().__init__()
        self.linear = _linear(require_int("input_dim", input_dim, min_value=1), require_int("dim", dim, min_value=1),
                              generator=check_generator(generator), dtype=dtype)
        self.norm = Normalize(norm)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(self.linear(x))


class MLPEncoder(nn.Module):
    """z = normalize(L_depth(relu(... relu(L_1 x)))): ``depth`` linear layers, ``hidden_dim`` wide.

    ``activation=False``: the deep linear network z = normalize(L_depth(... L_1 x)), a linear map factored into
    ``depth`` layers (model kind ``deep_linear``; jing2022understanding's setting for dimensional collapse).
    """

    takes_indices = False

    def __init__(self, input_dim: int, dim: int, *, hidden_dim: int = 128, depth: int = 2, norm: Normalization = "sphere",
                 generator: torch.Generator, dtype=torch.float32, activation: bool = True):
        super().__init__()
        din = require_int("input_dim", input_dim, min_value=1)
        d = require_int("dim", dim, min_value=1)
        h = require_int("hidden_dim", hidden_dim, min_value=1)
        depth = require_int("depth", depth, min_value=1)
        check_generator(generator)
        widths = [din] + [h] * (depth - 1) + [d]
        layers: list[nn.Module] = []
        for i in range(depth):
            layers.append(_linear(widths[i], widths[i + 1], generator=generator, dtype=dtype))
            if i < depth - 1 and activation:
                layers.append(nn.ReLU())
        self.net = nn.Sequential(*layers)
        self.norm = Normalize(norm)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(self.net(x))
