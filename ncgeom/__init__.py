"""ncgeom: verify the geometry of (hard-negative) contrastive learning.

Subpackages (imported on first use, so ``import ncgeom`` stays light and never imports cvxpy,
matplotlib or triton): geometry, losses, population, theory, metrics, testing, data, models, optim,
runs, campaigns, provenance, cli (and experiments, the former home of runs and campaigns, deprecated).
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0"

_SUBMODULES = (
    "geometry",
    "losses",
    "population",
    "theory",
    "metrics",
    "testing",
    "data",
    "models",
    "optim",
    "runs",
    "campaigns",
    "experiments",
    "provenance",
    "validate",
    "cli",
)

__all__ = ["__version__", *_SUBMODULES]


def __getattr__(name: str):
    if name in _SUBMODULES:
        return importlib.import_module(f"ncgeom.{name}")
    raise AttributeError(f"module 'ncgeom' has no attribute {name!r}")
