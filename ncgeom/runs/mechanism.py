"""How a run reached its end state: the epoch its spectrum dropped, the epoch it entered NC, its effective rank.

Pure functions of a run's epoch records (history.jsonl, :class:`~ncgeom.runs.records.EpochRecord`; the initial
record of epoch 0 may come first), for the phase maps (:mod:`ncgeom.phase`, item "mechanism per run") and anyone who
reads a run (docs/theory.md, section 9, "Phase maps"):

- **rank-drop epoch**: the first metric epoch whose smallest normalized class-mean spectrum value is below the DC
  threshold :data:`~ncgeom.metrics.outcome.DC_SPECTRUM` (docs/theory.md, section 8), None when none is;
- **NC-entry epoch**: the first metric epoch with ``etf_distance < NC_ETF`` and ``within_class < NC_WITHIN``
  (:mod:`ncgeom.metrics.outcome`; the loss criterion of the claims aside), None when none is; ``ncgeom compare``
  reports it as ``first_nc_epoch``;
- **effective-rank trajectory**: at every metric epoch, the effective rank of the class-mean spectrum
  [roy2007effective]

  .. math::
      \\operatorname{erank} = \\exp\\Big(-\\sum_{k=1}^{K} p_k \\log p_k\\Big), \\qquad
      p_k = \\frac{s_k}{\\sum_{j=1}^{K} s_j},

  where :math:`s_k` are the ``spectrum`` values of the record (eigenvalues of the class-mean covariance over the
  largest, docs/theory.md, section 8; the normalization cancels in :math:`p_k`) and :math:`K = \\min(d, C - 1)`
  their number. It lies in [1, K]: K for a flat spectrum (NC in d >= C - 1), 1 when one direction carries all the
  spread. Zero values contribute 0 (:math:`0 \\log 0 = 0`). Unlike ``rankme`` (of the raw embeddings), it sees only the
  geometry of the class means, which is what DC is about.

Example: a flat spectrum [1, 1, 1] has effective rank 3; [1, 0, 0] has 1.

>>> round(effective_rank([1.0, 1.0, 1.0]), 12)
3.0
>>> effective_rank([1.0, 0.0, 0.0])
1.0
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ncgeom.metrics.outcome import DC_SPECTRUM, NC_ETF, NC_WITHIN, spectrum_min
from ncgeom.runs.records import EpochRecord

__all__ = ["Mechanism", "effective_rank", "rank_drop_epoch", "nc_entry_epoch", "mechanism"]


@dataclass(frozen=True)
class Mechanism:
    """The mechanism of one run (module docstring): the rank-drop and NC-entry epochs (None when never), and at each
    metric epoch (``epochs``) the effective rank of the class-mean spectrum and its smallest value (None where the
    record has no finite spectrum)."""

    rank_drop_epoch: int | None
    nc_entry_epoch: int | None
    epochs: tuple[int, ...]
    effective_rank: tuple[float | None, ...]
    spectrum_min: tuple[float | None, ...]


def effective_rank(spectrum: Iterable[Any] | None) -> float | None:
    """The effective rank exp(H(p)) of a normalized spectrum (module docstring), None without a finite positive value."""
    values = [float(v) for v in (spectrum or []) if v is not None and math.isfinite(float(v))]
    if any(v < 0 for v in values):
        raise ValueError(f"spectrum must hold values >= 0 (eigenvalue ratios), got {min(values)}")
    total = sum(values)
    if not values or total <= 0:
        return None
    entropy = -sum(p * math.log(p) for p in (v / total for v in values) if p > 0)
    return math.exp(entropy)


def _metric_records(records: Iterable[EpochRecord]) -> list[EpochRecord]:
    return [r for r in records if r.metrics is not None]


def rank_drop_epoch(records: Iterable[EpochRecord]) -> int | None:
    """The first metric epoch with the smallest spectrum value below DC_SPECTRUM (module docstring), or None."""
    for record in _metric_records(records):
        smallest = spectrum_min(record.value("spectrum"))
        if smallest is not None and smallest < DC_SPECTRUM:
            return record.epoch
    return None


def nc_entry_epoch(records: Iterable[EpochRecord]) -> int | None:
    """The first metric epoch with etf_distance < NC_ETF and within_class < NC_WITHIN (module docstring), or None."""
    for record in _metric_records(records):
        etf, within = record.value("etf_distance"), record.value("within_class")
        if isinstance(etf, (int, float)) and isinstance(within, (int, float)) and etf < NC_ETF and within < NC_WITHIN:
            return record.epoch
    return None


def mechanism(records: Sequence[EpochRecord]) -> Mechanism:
    """The :class:`Mechanism` of a run from its epoch records in epoch order (the initial record first, if given)."""
    metric = _metric_records(records)
    return Mechanism(rank_drop_epoch(metric), nc_entry_epoch(metric), tuple(r.epoch for r in metric),
                     tuple(effective_rank(r.value("spectrum")) for r in metric),
                     tuple(spectrum_min(r.value("spectrum")) for r in metric))
