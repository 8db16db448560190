"""Feature normalization as a layer: ``none``, ``ball`` or ``sphere`` (docs/theory.md, section 1).

``none``: z; ``ball``: z / max(1, ||z||) (the authors' clip); ``sphere``: z / ||z||, by
:func:`ncgeom.geometry.normalize`. Every encoder of :mod:`ncgeom.models` ends with one.
"""

from __future__ import annotations

import torch
from torch import nn

from ncgeom.geometry import normalize
from ncgeom.validate import require_choice
from ncgeom.vocabulary import NORMALIZATIONS, Normalization

__all__ = ["Normalize"]


class Normalize(nn.Module):
    """Feature normalization as a layer: ``none``, ``ball`` or ``sphere`` (docs/theory.md section 1)."""

    def __init__(self, mode: Normalization = "sphere"):
        super().__init__()
        self.mode = require_choice("norm", mode, NORMALIZATIONS)

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        return normalize(z, self.mode)

    def extra_repr(self) -> str:
        return f"mode={self.mode!r}"
