"""The epoch record of a run of vector data: the metrics of docs/theory.md, section 8 on its embeddings.

:func:`vector_record` is the evaluation of :mod:`ncgeom.runs.single` and :mod:`ncgeom.runs.stacked` (the image
driver streams its features through :mod:`ncgeom.metrics.streaming` instead): every metric of the training
embeddings with the true labels, the test nearest-class-mean accuracy with the train class means, the mean norm,
and the gap to the run's NC value.
"""

from __future__ import annotations

import numpy as np

from ncgeom.data import LabeledData
from ncgeom.metrics import class_means, nc_metrics, ncc_accuracy
from ncgeom.runs.records import EpochRecord

__all__ = ["vector_record"]


def vector_record(z: np.ndarray, z_test: np.ndarray | None, data: LabeledData, epoch: int, loss: float | None,
                  nc_value: float) -> EpochRecord | None:
    """The epoch record with metrics of training embeddings ``z`` [N, d] (float64), or None if not finite.

    ``z_test`` [Nt, d] (float64) are the test embeddings (None for a model without inputs or without a
    test split); the test NCC accuracy is None when they are not finite.
    """
    if not np.isfinite(z).all():
        return None
    metrics = nc_metrics(z, data.y_train).to_dict()
    test_acc = None
    if z_test is not None and np.isfinite(z_test).all():
        test_acc = float(ncc_accuracy(z_test, data.y_test, class_means=class_means(z, data.y_train)))
    mean_norm = float(np.linalg.norm(z, axis=1).mean())
    gap = None if loss is None else loss - nc_value
    return EpochRecord(epoch, loss, nc_value, gap, test_ncc_accuracy=test_acc, mean_norm=mean_norm, metrics=metrics)
