"""The loss specification and the pair structure of a batch (docs/theory.md section 7).

For anchor i of a batch with labels y [B]:

.. math::

    P(i) = \\{j \\ne i : y_j = y_i\\},\\qquad
    N(i) = \\{m : y_m \\ne y_i\\}\\ \\text{(SCL, HSCL)},\\quad N(i) = \\{m \\ne i\\}\\ \\text{(UCL, HUCL)}.

That is the "theory" convention. The "authors" convention (the paper's code, rjiang03/HCL; docs/conventions.md,
section 2.4) counts the anchor as its own positive, P(i) = {j : y_j = y_i} (i included), and for UCL/HUCL
draws the negatives from the whole batch, N(i) = {m} (i included); SCL/HSCL keep N(i) = other classes.

An anchor with P(i) or N(i) empty contributes nothing. The pairs (i, j), j in P(i), of the valid anchors
are listed in the canonical (row-major) order: by anchor i ascending, then by positive j ascending. Every
backend returns per-pair values in this order.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from ncgeom.vocabulary import Convention

__all__ = ["LossSpec", "PairStructure", "pair_structure", "log_num_negatives"]


@dataclass(frozen=True)
class LossSpec:
    """Validated options of a batch loss (built by :func:`ncgeom.losses.batch_loss`).

    Attributes
    ----------
    supervised : bool
        True for SCL/HSCL (N(i) = other classes), False for UCL/HUCL (N(i) = all m != i).
    b : float
        Tilt of the weights q_im proportional to exp(b S_im) over N(i): beta for HSCL/HUCL, 0 otherwise.
    tau : float
        Temperature > 0.
    k : int or None
        Number of negatives; None means k = |N(i)| ("batch").
    detach_weights : bool
        True: the weights q carry no gradient (the authors' code).
    convention : {"theory", "authors"}
        Which pairs count (module docstring): see :attr:`self_positive` and :attr:`anchor_negative`.
    """

    supervised: bool
    b: float
    tau: float
    k: int | None
    detach_weights: bool = True
    convention: Convention = "theory"

    @property
    def self_positive(self) -> bool:
        """True when the anchor is its own positive, (i, i) in the pairs (the authors' convention)."""
        return self.convention == "authors"

    @property
    def anchor_negative(self) -> bool:
        """True when the anchor is one of its own candidate negatives (UCL/HUCL, the authors' convention)."""
        return self.convention == "authors" and not self.supervised


@dataclass(frozen=True)
class PairStructure:
    """P(i), N(i) of a batch, without any B x B matrix.

    Attributes
    ----------
    anchors, positives : Tensor [P] (long)
        The pairs (i, j), j in P(i), of the valid anchors, in canonical row-major order.
    num_negatives : Tensor [B] (long)
        |N(i)|.
    valid : Tensor [B] (bool)
        P(i) and N(i) both non-empty.
    pair_offsets : Tensor [B + 1] (long)
        Pairs of anchor i are ``anchors[pair_offsets[i]:pair_offsets[i + 1]]``.
    """

    anchors: torch.Tensor
    positives: torch.Tensor
    num_negatives: torch.Tensor
    valid: torch.Tensor
    pair_offsets: torch.Tensor

    @property
    def num_pairs(self) -> int:
        return int(self.anchors.numel())


def pair_structure(labels: torch.Tensor, *, supervised: bool, convention: Convention = "theory") -> PairStructure:
    """The pair structure of ``labels`` [B] (any integer values; docs/theory.md section 7) under ``convention``."""
    spec = LossSpec(supervised=supervised, b=0.0, tau=1.0, k=None, convention=convention)
    labels = labels.reshape(-1)
    size = labels.numel()
    device = labels.device
    _, inverse, counts = torch.unique(labels, return_inverse=True, return_counts=True)
    class_size = counts[inverse]
    num_pos = class_size if spec.self_positive else class_size - 1
    if supervised:
        num_neg = size - class_size
    else:
        num_neg = torch.full_like(class_size, size if spec.anchor_negative else size - 1)
    valid = (num_pos > 0) & (num_neg > 0)
    pairs_per_anchor = torch.where(valid, num_pos, torch.zeros_like(num_pos))
    offsets = torch.zeros(size + 1, dtype=torch.long, device=device)
    offsets[1:] = torch.cumsum(pairs_per_anchor, 0)

    # members of each class, ascending index (stable sort by class id)
    order = torch.sort(inverse, stable=True).indices
    class_start = torch.zeros_like(counts)
    class_start[1:] = torch.cumsum(counts, 0)[:-1]
    anchor_ids = torch.nonzero(valid).reshape(-1)
    sizes = class_size[anchor_ids]
    rep_anchor = torch.repeat_interleave(anchor_ids, sizes)
    first = torch.repeat_interleave(class_start[inverse[anchor_ids]], sizes)
    within = torch.arange(rep_anchor.numel(), device=device) - torch.repeat_interleave(
        torch.cumsum(sizes, 0) - sizes, sizes
    )
    member = order[first + within]
    keep = torch.ones_like(member, dtype=torch.bool) if spec.self_positive else member != rep_anchor
    return PairStructure(
        anchors=rep_anchor[keep],
        positives=member[keep],
        num_negatives=num_neg,
        valid=valid,
        pair_offsets=offsets,
    )


def log_num_negatives(spec: LossSpec, structure: PairStructure, dtype: torch.dtype) -> torch.Tensor:
    """log k per anchor [B]: log(num_negatives), or log |N(i)| for k = "batch" (0 where N(i) is empty)."""
    if spec.k is not None:
        return torch.full(structure.num_negatives.shape, math.log(spec.k), dtype=dtype, device=structure.valid.device)
    return torch.log(structure.num_negatives.clamp_min(1).to(dtype))
