"""Defaults that depend on the model: the learning rate of a ResNet, and the warning when a run's lr does not fit it.

The Config default ``lr = 0.05`` (Adam) is the free-feature one: unconstrained features reach NC in 100 epochs with
it (docs/theory.md, section 9). A ResNet trained at that rate collapses in its first epoch (test NCC accuracy 0.75
-> 0.42 on a small CIFAR-like run, issue 26); the authors train their ResNets with Adam at 1e-3 (docs/images.md).
``ncgeom train`` takes :func:`default_lr` of the model when ``--lr`` is not given, and :func:`lr_warning` says when a
run uses a learning rate more than :data:`LR_WARNING_FACTOR` times its model's default (:func:`ncgeom.runs.run`
warns, with a :class:`LearningRateWarning`; ``ncgeom train`` prints one line).
"""

from __future__ import annotations

from ncgeom.runs.config import Config
from ncgeom.vocabulary import RESNET_KINDS

__all__ = ["RESNET_LR", "FREE_FEATURE_LR", "LR_WARNING_FACTOR", "LearningRateWarning", "default_lr", "lr_warning"]

#: The authors' Adam learning rate for their ResNets (docs/images.md; the paper_* specs).
RESNET_LR = 1e-3
#: The Config default: the learning rate of unconstrained (free) features.
FREE_FEATURE_LR: float = Config.lr
#: A run's lr above this multiple of its model's default gets a warning.
LR_WARNING_FACTOR = 10.0


class LearningRateWarning(UserWarning):
    """A run's learning rate is far above the default of its model (:func:`lr_warning`)."""


def default_lr(model: str) -> float:
    """The default Adam learning rate of ``model``: 1e-3 for a ResNet, the Config default (0.05) otherwise.

    >>> default_lr("resnet18"), default_lr("unconstrained")
    (0.001, 0.05)
    """
    return RESNET_LR if model in RESNET_KINDS else FREE_FEATURE_LR


def lr_warning(config: Config) -> str | None:
    """One line when ``config.lr`` exceeds LR_WARNING_FACTOR x the default of its model (a ResNet), else None."""
    default = default_lr(config.model)
    if config.model not in RESNET_KINDS or config.lr <= LR_WARNING_FACTOR * default:
        return None
    return (f"lr = {config.lr:g} with the ResNet {config.model}: {config.lr / default:g} times the authors' Adam rate "
            f"{default:g} for ResNets (lr {FREE_FEATURE_LR:g} is the free-feature default, which collapses a ResNet in "
            f"its first epoch); pass --lr {default:g} (docs/images.md)")
