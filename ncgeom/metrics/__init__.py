"""Neural-collapse (NC) and dimensional-collapse (DC) metrics (docs/theory.md section 8).

Every metric is a pure function ``metric(z, labels)`` of embeddings z [N, d] (numpy array or torch
tensor; computed in float64) and integer labels [N] (any values; the classes are the sorted distinct
labels, or exactly 0..C-1 with ``num_classes=C``). The names are the JSON keys used by the CLI and the
experiment histories:

- ``groups``: input validation and :func:`class_means`;
- ``collapse``: unit_norm, zero_sum, equal_inner_product, within_class, nc1, etf_distance;
- ``spectral``: spectrum (class-mean covariance), rankme (garrido2023rankme);
- ``ncc``: ncc_accuracy (nearest class mean by inner product, the default, or Euclidean: ``rule``; train means on
  test data);
- ``record``: :func:`nc_metrics` -> :class:`NCMetrics` (all of them, ``.to_dict()``);
- ``outcome``: :func:`classify_geometry`, NC / DC / neither with the thresholds of every rule (NC_ETF, NC_WITHIN,
  DC_SPECTRUM);
- ``diagnosis``: :func:`diagnose` -> :class:`Diagnosis`, what ``ncgeom metrics`` prints: the metrics, the verdict,
  warnings, and with a :class:`LossSpec` the loss of the embeddings against NC and the theorems' bound;
- ``streaming``: the same metrics on batches in O(C d + d^2) memory (:func:`streaming_nc_metrics`,
  :func:`accumulate_moments`, :func:`streaming_ncc_accuracy`, :func:`encoded_batches`).

The metrics the literature reports besides (docs/theory.md section 8, "Field metrics"), in a record of their
own (:class:`FieldMetrics`; ``nc_metrics`` and its keys are unchanged):

- ``variability``: cdnv, cdnv_matrix (class-distance normalized variance, galanti2022role);
- ``classifier``: self_duality (NC3), classifier_agreement (NC4), given a classifier's weights;
- ``hypersphere``: hyperspherical_uniformity (liu2023generalizing, wu2024linguistic), alignment and
  uniformity (wang2020understanding);
- ``field``: :func:`field_metrics` -> :class:`FieldMetrics` (``.to_dict()``, ``from_dict``);
- ``field_streaming``: the same on batches (:func:`streaming_field_metrics`, :func:`accumulate_class_moments`,
  :func:`streaming_classifier_agreement`, :func:`streaming_uniformity`).

Conventions and how they differ from the peers (Papyan's Colab, tding1, rhubarbwu, nc-toolbox,
RankMe implementations): docs/conventions.md, "Metrics".
"""

from ncgeom.metrics.classifier import classifier_agreement, self_duality
from ncgeom.metrics.collapse import equal_inner_product, etf_distance, nc1, unit_norm, within_class, zero_sum
from ncgeom.metrics.diagnosis import Diagnosis, LossReport, LossSpec, diagnose
from ncgeom.metrics.field import FIELD_METRIC_NAMES, FieldMetrics, field_metrics
from ncgeom.metrics.field_streaming import (
    UNIFORMITY_BLOCK_ROWS,
    AgreementAccumulator,
    ClassMomentAccumulator,
    ClassMoments,
    accumulate_class_moments,
    streaming_classifier_agreement,
    streaming_field_metrics,
    streaming_uniformity,
)
from ncgeom.metrics.groups import class_means
from ncgeom.metrics.hypersphere import HYPERSPHERICAL_STATISTICS, alignment, hyperspherical_uniformity, uniformity
from ncgeom.metrics.ncc import NCC_RULES, NCCRule, ncc_accuracy
from ncgeom.metrics.outcome import DC_SPECTRUM, NC_ETF, NC_WITHIN, classify_geometry
from ncgeom.metrics.record import METRIC_NAMES, NCMetrics, nc_metrics
from ncgeom.metrics.spectral import RANKME_EPS, rankme, spectrum
from ncgeom.metrics.streaming import (
    ONE_PASS_METRICS,
    SECOND_PASS_METRICS,
    FeatureMoments,
    MomentAccumulator,
    NCCAccumulator,
    ResidualAccumulator,
    accumulate_moments,
    encoded_batches,
    streaming_nc_metrics,
    streaming_ncc_accuracy,
)
from ncgeom.metrics.variability import cdnv, cdnv_matrix

__all__ = [
    "classify_geometry",
    "NC_ETF",
    "NC_WITHIN",
    "DC_SPECTRUM",
    "unit_norm",
    "zero_sum",
    "equal_inner_product",
    "within_class",
    "nc1",
    "etf_distance",
    "spectrum",
    "rankme",
    "ncc_accuracy",
    "NCC_RULES",
    "NCCRule",
    "diagnose",
    "Diagnosis",
    "LossSpec",
    "LossReport",
    "class_means",
    "nc_metrics",
    "NCMetrics",
    "METRIC_NAMES",
    "RANKME_EPS",
    "FeatureMoments",
    "MomentAccumulator",
    "ResidualAccumulator",
    "NCCAccumulator",
    "accumulate_moments",
    "streaming_nc_metrics",
    "streaming_ncc_accuracy",
    "encoded_batches",
    "ONE_PASS_METRICS",
    "SECOND_PASS_METRICS",
    "cdnv",
    "cdnv_matrix",
    "self_duality",
    "classifier_agreement",
    "hyperspherical_uniformity",
    "HYPERSPHERICAL_STATISTICS",
    "alignment",
    "uniformity",
    "field_metrics",
    "FieldMetrics",
    "FIELD_METRIC_NAMES",
    "ClassMoments",
    "ClassMomentAccumulator",
    "AgreementAccumulator",
    "accumulate_class_moments",
    "streaming_classifier_agreement",
    "streaming_uniformity",
    "streaming_field_metrics",
    "UNIFORMITY_BLOCK_ROWS",
]
