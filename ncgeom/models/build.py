"""Build an encoder by name: :func:`build_model` (the one constructor a run calls, ncgeom.runs.setup)."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from ncgeom.models.encoders import LinearEncoder, MLPEncoder, UnconstrainedFeatures
from ncgeom.models.resnet import ResNetEncoder
from ncgeom.validate import require_choice, require_int
from ncgeom.vocabulary import INITS, MODEL_KINDS, RESNET_KINDS, Init, ModelKind, Normalization, ResNetKind

__all__ = ["build_model"]


def build_model(kind: ModelKind | ResNetKind, *, dim: int, norm: Normalization = "sphere", num_samples: int | None = None,
                input_dim: int | None = None, labels=None, hidden_dim: int = 128, depth: int = 2,
                init: Init = "random", init_scale: float = 1.0, init_noise: float = 0.1,
                generator: torch.Generator, rng: np.random.Generator | None = None,
                dtype=torch.float32) -> nn.Module:
    """Build an encoder by name. ``init='near_nc'`` (unconstrained only) needs ``labels`` and ``rng``.

    ``kind`` in ``RESNET_KINDS``: :class:`ncgeom.models.resnet.ResNetEncoder` (the authors' MLP head) of ``dim``
    outputs, drawn from ``generator``; ``num_samples``, ``input_dim``, ``hidden_dim``, ``depth`` and the
    init options do not apply to it.
    """
    kind = require_choice("model", kind, MODEL_KINDS + RESNET_KINDS)
    init = require_choice("init", init, INITS)
    if init == "near_nc" and kind != "unconstrained":
        raise ValueError("init='near_nc' is defined for model='unconstrained' only")
    if kind in RESNET_KINDS:
        return ResNetEncoder(kind=kind, dim=dim, norm=norm, generator=generator, dtype=dtype)
    if kind == "unconstrained":
        if init == "near_nc":
            if labels is None or not isinstance(rng, np.random.Generator):
                raise ValueError("init='near_nc' needs labels and rng (numpy.random.Generator)")
            return UnconstrainedFeatures.near_nc(labels, dim, noise=init_noise, norm=norm, rng=rng, dtype=dtype)
        n = require_int("num_samples", num_samples, min_value=1)  # None (the default) is rejected here
        return UnconstrainedFeatures.random(n, dim, scale=init_scale, norm=norm, generator=generator, dtype=dtype)
    din = require_int("input_dim", input_dim, min_value=1)  # None (the default) is rejected here
    if kind == "linear":
        return LinearEncoder(din, dim, norm=norm, generator=generator, dtype=dtype)
    return MLPEncoder(din, dim, hidden_dim=hidden_dim, depth=depth, norm=norm, generator=generator, dtype=dtype,
                      activation=kind == "mlp")
