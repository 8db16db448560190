"""Class-balanced batch sampling.

A batch of size B draws from n = min(C, floor(B / 2)) classes (all classes when B >= 2C, otherwise a
uniformly random subset, so that each present class has >= 2 members and thus a label-based positive),
floor(B / n) samples per class plus one more for B mod n of them. Within a class, samples are taken
without replacement from a per-class stream of random permutations, so an epoch covers every sample.
With an imbalanced prior this oversamples small classes (that is what class-balanced means).
"""

from __future__ import annotations

import numpy as np

from ncgeom.labels import integer_labels
from ncgeom.validate import require_int

__all__ = ["class_balanced_counts", "class_balanced_batches"]


def class_balanced_counts(num_classes: int, batch_size: int) -> np.ndarray:
    """Per-class counts of one class-balanced batch, sorted descending (length = classes present).

    Example: C = 10, B = 128 gives eight 13s and two 12s... i.e. [13]*8 + [12]*2.
    """
    c = require_int("num_classes", num_classes, min_value=1)
    b = require_int("batch_size", batch_size, min_value=2)
    n = min(c, b // 2)
    counts = np.full(n, b // n, dtype=np.int64)
    counts[: b % n] += 1
    return counts


def class_balanced_batches(labels, batch_size: int, *, num_batches: int, rng: np.random.Generator) -> np.ndarray:
    """Indices [num_batches, batch_size] of class-balanced batches (module docstring).

    Parameters
    ----------
    labels : array [N] of int (any values; :func:`ncgeom.labels.integer_labels`)
    batch_size : int
        2 <= B; a class may appear at most as many times as it has members.
    num_batches : int
    rng : numpy.random.Generator
    """
    y = integer_labels(labels)  # integers (or strings mapped to ids); never lossy floats
    if y.size == 0:
        raise ValueError(f"labels must have shape [N] with N >= 1, got {y.shape}")
    b = require_int("batch_size", batch_size, min_value=2, max_value=y.size)
    steps = require_int("num_batches", num_batches, min_value=0)
    if not isinstance(rng, np.random.Generator):
        raise ValueError("rng must be a numpy.random.Generator")
    classes = np.unique(y)
    members = [np.flatnonzero(y == c) for c in classes]
    counts = class_balanced_counts(classes.size, b)
    smallest = min(m.size for m in members)
    if counts[0] > smallest:
        raise ValueError(
            f"batch_size {b} needs {counts[0]} samples of each class but the smallest class has {smallest}"
        )
    streams = [np.empty(0, dtype=np.int64) for _ in members]
    out = np.empty((steps, b), dtype=np.int64)
    for s in range(steps):
        chosen = rng.permutation(classes.size)[: counts.size]
        pos = 0
        for k, ci in enumerate(chosen):
            need = counts[k]
            if streams[ci].size < need:  # refill; leftovers first, never a duplicate within a batch
                fresh = members[ci][rng.permutation(members[ci].size)]
                streams[ci] = np.concatenate([streams[ci], fresh[~np.isin(fresh, streams[ci])]])
            out[s, pos : pos + need] = streams[ci][:need]
            streams[ci] = streams[ci][need:]
            pos += need
    return out
