"""The psi/eta loss family, its property checkers, and (see ``batch``) the batch estimators.

``psi``, ``eta`` and ``properties`` are numpy code; ``batch`` and ``kernels`` are torch code. The batch
names (``batch_loss``, ``batch_loss_pairs``, ``PairLosses``, ``select_backend``) are loaded from
:mod:`ncgeom.losses.batch`, and the module :class:`HardContrastiveLoss` (``batch_loss`` as a ``torch.nn.Module``)
from :mod:`ncgeom.losses.module`, on first access, so that the numpy side, and :mod:`ncgeom.theory` and
:mod:`ncgeom.population` which build on it, do not import torch (about 2 s) until a batch loss is used.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from ncgeom.losses.eta import Eta, custom_eta, exponential_tilt, tilt_weights
from ncgeom.losses.properties import (
    REACHABLE_S,
    REACHABLE_T,
    PropertyVerdict,
    check_convex,
    check_monotone,
    reachable_scale,
)
from ncgeom.losses.psi import Psi, custom_psi, infonce, infonce_mean, make_psi, triplet
from ncgeom.vocabulary import BACKENDS, PSI_NAMES, SETTINGS  # re-exported: the names users of ncgeom.losses know

if TYPE_CHECKING:
    from ncgeom.losses.batch import PairLosses, batch_loss, batch_loss_pairs, select_backend
    from ncgeom.losses.module import HardContrastiveLoss

__all__ = [
    "Psi",
    "PSI_NAMES",
    "infonce",
    "infonce_mean",
    "triplet",
    "make_psi",
    "custom_psi",
    "Eta",
    "exponential_tilt",
    "custom_eta",
    "tilt_weights",
    "PropertyVerdict",
    "check_convex",
    "check_monotone",
    "REACHABLE_T",
    "REACHABLE_S",
    "reachable_scale",
    "batch_loss",
    "batch_loss_pairs",
    "PairLosses",
    "select_backend",
    "HardContrastiveLoss",
    "SETTINGS",
    "BACKENDS",
]

_TORCH_NAMES = frozenset({"batch_loss", "batch_loss_pairs", "PairLosses", "select_backend", "HardContrastiveLoss"})


def __getattr__(name: str):
    # torch is heavy: the batch estimators are imported on first use (see the module docstring)
    if name in _TORCH_NAMES:
        module = "ncgeom.losses.module" if name == "HardContrastiveLoss" else "ncgeom.losses.batch"
        return getattr(importlib.import_module(module), name)
    raise AttributeError(f"module 'ncgeom.losses' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | _TORCH_NAMES)
