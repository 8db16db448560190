"""The geometry of a set of embeddings in one word: NC, DC or neither (docs/theory.md, sections 8 and 9).

The thresholds are stated here once and imported by every rule that uses them: the claim rules
(:mod:`ncgeom.campaigns.evaluations`), the run-level classification of a trained run, and ``ncgeom metrics``'s
verdict line on a user's embeddings.

- **NC** (neural collapse): ``etf_distance < NC_ETF`` and ``within_class < NC_WITHIN``: the class means form a
  simplex ETF up to scale and the samples sit on their class means (the loss criterion of the claims, the gap
  to the NC value, is a property of a run, not of its embeddings: :mod:`ncgeom.campaigns.evaluations`);
- **DC** (dimensional collapse): the smallest value of the normalized class-mean spectrum (``spectrum``, each
  eigenvalue over the largest) is below ``DC_SPECTRUM`` = 1e-2, two orders of magnitude below the largest
  (docs/theory.md, section 8);
- **neither**: finite metrics that are not NC and not DC;
- **undefined**: a metric the rule needs is missing or not finite (an all-NaN spectrum when all class means are
  equal, say).

An ETF has C - 1 equal spectrum values, so NC and DC exclude each other when d >= C - 1. When d < C - 1 no ETF
exists (docs/theory.md, section 4): :func:`classify_geometry` then never says NC.

>>> classify_geometry({"etf_distance": 0.01, "within_class": 0.0, "spectrum": [1.0, 0.99]})
'NC'
>>> classify_geometry({"etf_distance": 0.4, "within_class": 0.2, "spectrum": [1.0, 0.003]})
'DC'
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from ncgeom.vocabulary import GeometryOutcome

__all__ = ["NC_ETF", "NC_WITHIN", "DC_SPECTRUM", "spectrum_min", "classify_geometry"]

#: Largest etf_distance of NC (docs/theory.md, section 9, "Verdict rules").
NC_ETF = 0.05
#: Largest within_class of NC.
NC_WITHIN = 0.05
#: DC: the smallest normalized class-mean spectrum value below this (docs/theory.md, section 8).
DC_SPECTRUM = 1e-2


def spectrum_min(spectrum: Any) -> float | None:
    """The smallest finite value of a normalized class-mean spectrum, None when it has none."""
    values = [float(v) for v in (spectrum or []) if v is not None and math.isfinite(float(v))]
    return min(values) if values else None


def classify_geometry(metrics: Mapping[str, Any], *, dim: int | None = None,
                      num_classes: int | None = None) -> GeometryOutcome:
    """NC, DC, neither or undefined for a dict of the metrics of docs/theory.md, section 8 (module docstring).

    ``metrics`` needs ``etf_distance``, ``within_class`` and ``spectrum`` (the keys of
    :func:`ncgeom.metrics.nc_metrics`). With ``dim`` and ``num_classes`` given and d < C - 1, NC is not
    reachable and never reported.
    """
    etf, within = _finite(metrics.get("etf_distance")), _finite(metrics.get("within_class"))
    smallest = spectrum_min(metrics.get("spectrum"))
    if smallest is None or etf is None or within is None:
        return "undefined"
    if smallest < DC_SPECTRUM:
        return "DC"
    reachable = dim is None or num_classes is None or dim >= num_classes - 1
    if reachable and etf < NC_ETF and within < NC_WITHIN:
        return "NC"
    return "neither"


def _finite(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else None
