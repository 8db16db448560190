"""Testing helpers exported to users: hypothesis strategies and look-alike image data sets.

- :mod:`ncgeom.testing.strategies`: hypothesis strategies of the toolkit's concepts (simplex-ETF
  configurations, noisy collapsed embeddings, finite latent-class models, psi and eta parameters,
  hardening functions); re-exported here, so ``from ncgeom.testing import etf_configs`` works. They need
  the ``hypothesis`` package (a test dependency).
- :mod:`ncgeom.testing.images`: small CIFAR-, STL-10- and ImageFolder-like data sets written in the
  official layouts (``write_cifar_like``, ``write_stl10_like``, ``write_image_folder``); no hypothesis
  needed.

The strategies are imported on first use, so ``import ncgeom.testing.images`` works without hypothesis.
"""

import importlib

__all__ = [
    "EtfConfig",
    "NoisyCollapse",
    "PsiParams",
    "etf_configs",
    "noisy_collapsed_embeddings",
    "finite_latent_models",
    "psi_params",
    "betas",
    "exponential_etas",
    "monotone_etas",
    "decreasing_etas",
]


def __getattr__(name: str):
    if name in __all__:
        return getattr(importlib.import_module("ncgeom.testing.strategies"), name)
    raise AttributeError(f"module 'ncgeom.testing' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
