"""The loss at neural collapse a run is compared with: :func:`run_nc_value` (docs/theory.md, sections 5 and 7).

The gap ``loss - nc_value`` of every epoch record, and the NC rule of the claims (docs/theory.md, section 9), use it.
"""

from __future__ import annotations

import math

import numpy as np

from ncgeom.data import class_balanced_counts
from ncgeom.geometry import simplex_etf
from ncgeom.runs.config import Config
from ncgeom.theory import batch_nc_value, nc_value

__all__ = ["run_nc_value", "NC_SHUFFLE_BATCHES"]


#: Shuffled batches (``batches="shuffle"``): the NC value is the mean of the NC value of this many random
#: batches of the training labels (their class counts vary from batch to batch).
NC_SHUFFLE_BATCHES = 64


def run_nc_value(config: Config, *, labels=None) -> tuple[float, str]:
    """The closed-form loss at neural collapse for the estimator ``config`` optimizes, and its source.

    - weighted estimator, label positives: ``ncgeom.theory.batch_nc_value`` with the class counts of a
      class-balanced batch (docs/theory.md, section 7; padded with zeros to C classes); under
      ``convention="authors"`` the batch loss evaluated (float64) at that batch placed exactly at NC (the
      closed form counts the theory's pairs);
    - weighted estimator, noise (or augmentation) positives: the batch loss evaluated (float64) at an exact
      NC two-view batch (both views of a class-c sample at the ETF vertex v_c, instance ids as labels);
    - sampled estimator: ``ncgeom.theory.nc_value`` (section 5; the population collision probability
      1/C or pi_beta, which the in-batch fraction approximates for UCL/HUCL).

    With ``config.batches == "shuffle"`` a batch's class counts are random, and so is its NC value: the
    weighted estimator's value is then the mean of the above over :data:`NC_SHUFFLE_BATCHES` batches of B
    indices drawn without replacement from ``labels`` (the training labels, required) by a generator seeded
    with (config.seed, NC_SHUFFLE_BATCHES), apart from the run's own streams; the source states the
    standard error of that mean. (An epoch's mean loss at NC is the mean of its batches' NC values, whose
    expectation this estimates.)
    """
    c = config.classes
    if config.estimator == "sampled":
        from ncgeom.losses import make_psi  # imports torch (heavy): only when a run starts

        psi = make_psi(config.psi, tau=config.tau, margin=config.margin)
        assert config.num_negatives != "batch"  # Config rejects num_negatives='batch' with estimator='sampled'
        value = nc_value(config.setting, psi, num_classes=c, num_negatives=config.num_negatives,
                         beta=config.beta, tau=config.tau, margin=config.margin)
        return float(value), "nc_value (docs/theory.md, section 5, population collision probability)"
    if config.batches == "balanced":
        full = np.zeros(c, dtype=np.int64)
        counts = class_balanced_counts(c, config.batch_size)
        full[: counts.size] = counts
        value, source = _nc_at_counts(config, full)
        return value, source + ", class-balanced batch counts)"
    if labels is None:
        raise ValueError("run_nc_value needs labels= (the training labels) for batches='shuffle'")
    y = np.asarray(labels)
    if y.ndim != 1 or y.size < config.batch_size or y.min() < 0 or y.max() >= c:
        raise ValueError(f"labels must be [N] class ids in 0..{c - 1} with N >= batch_size = {config.batch_size}")
    rng = np.random.default_rng([config.seed, NC_SHUFFLE_BATCHES])
    values, source = [], ""
    for _ in range(NC_SHUFFLE_BATCHES):
        full = np.bincount(y[rng.choice(y.size, config.batch_size, replace=False)], minlength=c)
        value, source = _nc_at_counts(config, full)
        values.append(value)
    value = float(np.mean(values))
    stderr = float(np.std(values, ddof=1) / math.sqrt(len(values)))
    return value, source + f", mean over {NC_SHUFFLE_BATCHES} shuffled batches, s.e. {stderr:.2g})"


def _nc_at_counts(config: Config, counts: np.ndarray) -> tuple[float, str]:
    """(NC value, the start of its source) of the weighted estimator on a batch with ``counts`` [C] samples of
    each class (zeros allowed), by the rules of :func:`run_nc_value`; the source is closed by the caller."""
    import torch

    from ncgeom.losses import batch_loss  # imports torch (heavy): only when a run starts

    c = config.classes
    if config.positives == "label" and config.convention == "theory":
        value = batch_nc_value(config.setting, class_counts=counts, num_negatives=config.num_negatives,
                               beta=config.beta, tau=config.tau)
        return float(value), "batch_nc_value (docs/theory.md, section 7"
    y = np.repeat(np.arange(c), counts)
    z = torch.as_tensor(simplex_etf(c)[y], dtype=torch.float64)
    if config.positives == "label":
        loss = batch_loss(z, torch.as_tensor(y), config.setting, beta=config.beta, tau=config.tau,
                          num_negatives=config.num_negatives, estimator="weighted", backend="dense",
                          convention=config.convention)
        return float(loss), "batch_loss at an exact NC batch (docs/conventions.md, section 2.4"
    ids = torch.arange(y.size).repeat(2)
    loss = batch_loss(torch.cat([z, z]), ids, config.setting, beta=config.beta, tau=config.tau,
                      num_negatives=config.num_negatives, estimator="weighted", backend="dense",
                      convention=config.convention)
    return float(loss), "batch_loss at an exact NC two-view batch (docs/theory.md, section 7, instance ids"
