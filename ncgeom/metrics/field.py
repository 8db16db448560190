"""The collapse metrics the literature reports, at once, as one frozen record (docs/theory.md section 8, "Field metrics").

A separate record from :class:`ncgeom.metrics.NCMetrics` (whose keys the training histories record and which
does not change): CDNV, NC3 and NC4 given a classifier, hyperspherical uniformity, alignment and uniformity.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Any

from ncgeom.metrics.classifier import _AgreementRule, _bias, _classifier_weights, _self_duality
from ncgeom.metrics.groups import _group
from ncgeom.metrics.hypersphere import (
    _default_block_rows,
    _hyperspherical,
    _label_alignment_squared,
    _RunningLogSumExp,
    _times_power_of_scale,
    _within_block_pairs,
)
from ncgeom.metrics.variability import _cdnv, _class_scatter
from ncgeom.validate import require_keys

__all__ = ["FieldMetrics", "FIELD_METRIC_NAMES", "field_metrics"]

FIELD_METRIC_NAMES: tuple[str, ...] = (
    "cdnv",
    "self_duality",
    "classifier_agreement",
    "hyperspherical_uniformity",
    "alignment",
    "uniformity",
)
"""The JSON keys of :meth:`FieldMetrics.to_dict`, in order (docs/theory.md section 8, "Field metrics")."""


@dataclass(frozen=True)
class FieldMetrics:
    """The field's collapse metrics of one set of embeddings, each with the default options of its function.

    - ``cdnv``: :func:`ncgeom.metrics.cdnv` (``ddof=0``);
    - ``self_duality`` (NC3) and ``classifier_agreement`` (NC4): :func:`ncgeom.metrics.self_duality`,
      :func:`ncgeom.metrics.classifier_agreement` with the classifier given (training data: the class means
      of the same embeddings); NaN when no classifier was given;
    - ``hyperspherical_uniformity``: :func:`ncgeom.metrics.hyperspherical_uniformity` (``statistic="variance"``);
    - ``alignment``: :func:`ncgeom.metrics.alignment` over label positives, alpha = 2;
    - ``uniformity``: :func:`ncgeom.metrics.uniformity`, t = 2.

    A metric that is undefined for the input (see the functions' degenerate cases) is NaN.
    """

    cdnv: float
    self_duality: float
    classifier_agreement: float
    hyperspherical_uniformity: float
    alignment: float
    uniformity: float

    def to_dict(self) -> dict[str, float]:
        """``{name: value}`` with exactly the keys :data:`FIELD_METRIC_NAMES`; NaN stays NaN (writers turn it into null)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> FieldMetrics:
        """The inverse of :meth:`to_dict` (null -> NaN); a missing or unknown key raises ValueError naming it."""
        require_keys("field metrics", data, accepted=FIELD_METRIC_NAMES, required=FIELD_METRIC_NAMES)
        return cls(**{name: math.nan if data[name] is None else float(data[name]) for name in FIELD_METRIC_NAMES})


def field_metrics(z, labels, *, classifier=None, bias=None, num_classes: int | None = None) -> FieldMetrics:
    """Every metric of :class:`FieldMetrics` on ``z`` [N, d] with ``labels`` [N], validating once.

    ``classifier`` [C, d] and ``bias`` [C] are the weights and bias of a linear head (row c for class c in
    sorted label order); without them NC3 and NC4 are NaN. Each field equals its function's value exactly
    (``field_metrics(z, y).cdnv == cdnv(z, y)``, etc.). Cost: O(N d) for all but ``uniformity``, which sums
    over the N (N-1)/2 pairs in blocks (O(N^2 d) time, bounded memory).

    Examples
    --------
    >>> m = field_metrics([[1.0], [3.0], [-1.0], [-3.0]], [0, 0, 1, 1], classifier=[[1.0], [-1.0]])
    >>> m.cdnv, m.self_duality, m.classifier_agreement, m.hyperspherical_uniformity, m.alignment
    (0.0625, 0.0, 1.0, 0.0, 4.0)
    """
    g = _group(z, labels, num_classes=num_classes)
    c, (n, d) = g.num_classes, g.z.shape
    scatter = _class_scatter(g)
    if classifier is None:
        if bias is not None:
            raise ValueError("bias is only meaningful together with classifier")
        nc3 = nc4 = math.nan
    else:
        weights = _classifier_weights(classifier, c, d)
        nc3 = _self_duality(g.means, weights)
        nc4 = _AgreementRule(weights, _bias(bias, c), g.means * g.scale).agreements(g.z * g.scale) / n
    pairs = _RunningLogSumExp()
    _within_block_pairs(g.z, pairs, 2.0, g.scale, _default_block_rows(n, 1))
    return FieldMetrics(
        cdnv=_cdnv(g.counts, g.means, scatter, 0),
        self_duality=nc3,
        classifier_agreement=nc4,
        hyperspherical_uniformity=_hyperspherical(g.means, "variance"),
        alignment=_times_power_of_scale(_label_alignment_squared(g.counts, scatter), g.scale, 2.0),
        uniformity=pairs.log_mean(),
    )
