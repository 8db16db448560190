"""All metrics of docs/theory.md section 8 at once, as one frozen record whose fields are the JSON keys."""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Any

from ncgeom.metrics.collapse import _equal_inner_product, _etf_distance, _nc1, _unit_norm, _within_class, _zero_sum
from ncgeom.metrics.groups import _group
from ncgeom.metrics.ncc import _ncc_accuracy
from ncgeom.metrics.spectral import _rankme, _spectrum
from ncgeom.validate import require_keys

__all__ = ["NCMetrics", "METRIC_NAMES", "nc_metrics"]

METRIC_NAMES: tuple[str, ...] = (
    "unit_norm",
    "zero_sum",
    "equal_inner_product",
    "within_class",
    "nc1",
    "etf_distance",
    "spectrum",
    "rankme",
    "ncc_accuracy",
)
"""The metric names of docs/theory.md section 8, in order: the JSON keys of :meth:`NCMetrics.to_dict`."""


@dataclass(frozen=True)
class NCMetrics:
    """The NC / DC metrics of one set of embeddings (docs/theory.md section 8).

    Each field is documented by the function of the same name in :mod:`ncgeom.metrics`;
    ``spectrum`` is a tuple of floats (descending, ``spectrum[0] == 1``). A metric that is undefined
    for the input (see the functions' failure modes) is NaN.
    """

    unit_norm: float
    zero_sum: float
    equal_inner_product: float
    within_class: float
    nc1: float
    etf_distance: float
    spectrum: tuple[float, ...]
    rankme: float
    ncc_accuracy: float

    def to_dict(self) -> dict:
        """``{name: value}`` with exactly the keys of docs/theory.md section 8, ``spectrum`` as a list.

        Values are Python floats; NaN stays NaN here. :func:`ncgeom.atomic_io.dumps_json` (and every
        writer of ncgeom) turns it into null, which :meth:`from_dict` reads back as NaN.
        """
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["spectrum"] = list(self.spectrum)
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> NCMetrics:
        """The inverse of :meth:`to_dict` (null -> NaN); a missing or unknown key raises ValueError naming it."""
        require_keys("NC metrics", data, accepted=METRIC_NAMES, required=METRIC_NAMES)

        def number(value) -> float:
            return math.nan if value is None else float(value)

        values = {name: number(data[name]) for name in METRIC_NAMES if name != "spectrum"}
        return cls(spectrum=tuple(number(v) for v in data["spectrum"]), **values)


def nc_metrics(z, labels, *, num_classes: int | None = None) -> NCMetrics:
    """Compute every metric of docs/theory.md section 8 on ``z`` [N, d] with ``labels`` [N].

    Validates once (rules of :func:`ncgeom.metrics.class_means`), then evaluates each metric exactly
    as its function does; ``nc_metrics(z, y).nc1 == nc1(z, y)`` etc.

    Examples
    --------
    >>> from ncgeom.geometry import simplex_etf
    >>> m = nc_metrics(simplex_etf(3), [0, 1, 2])
    >>> round(m.etf_distance, 12), round(m.unit_norm, 12), m.ncc_accuracy
    (0.0, 0.0, 1.0)
    """
    g = _group(z, labels, num_classes=num_classes)
    return NCMetrics(
        unit_norm=_unit_norm(g),
        zero_sum=_zero_sum(g),
        equal_inner_product=_equal_inner_product(g),
        within_class=_within_class(g),
        nc1=_nc1(g),
        etf_distance=_etf_distance(g),
        spectrum=tuple(float(v) for v in _spectrum(g)),
        rankme=_rankme(g.z),
        ncc_accuracy=_ncc_accuracy(g),
    )
