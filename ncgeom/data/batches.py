"""Batch sampling: class-balanced batches (the default of every run) and shuffled batches.

:func:`batches_per_epoch` and :func:`epoch_batches` pick between them by the run's ``batches``
(``ncgeom.vocabulary.BATCHINGS``). :func:`shuffled_batches` is one epoch of a DataLoader with
``shuffle=True, drop_last=True`` (the authors' loader): ``rng.permutation(N)`` cut into floor(N / B)
consecutive batches, the last N mod B samples of the permutation left out; the class counts of a batch are
then multivariate hypergeometric, so they follow the data's class sizes (an imbalanced prior stays
imbalanced in the batches), and a class may have fewer than two members in a batch (its anchors then have
no label positive). The rest of this docstring is the class-balanced sampler.

Class-balanced batches.

A batch of size B draws from n = min(C, floor(B / 2)) classes (all classes when B >= 2C, otherwise a
uniformly random subset, so that each present class has >= 2 members and thus a label-based positive),
floor(B / n) samples per class plus one more for B mod n of them. Within a class, samples are taken
without replacement from a per-class stream of random permutations, so an epoch covers every sample.
With an imbalanced prior this oversamples small classes (that is what class-balanced means).

The random draws, in order, are: per batch one ``rng.permutation(C)`` (its first n entries are the chosen
classes and their order in the batch), then, for each chosen class in that order whose stream holds fewer
samples than the class needs, one ``rng.permutation(n_c)`` of its n_c members; the members left in the
stream come first and the new permutation follows without them (never a duplicate within a batch). The
result is a function of the labels and of this stream of draws alone.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import numpy as np

from ncgeom.labels import integer_labels
from ncgeom.validate import require_choice, require_int
from ncgeom.vocabulary import BATCHINGS

__all__ = ["class_balanced_counts", "class_balanced_batches", "shuffled_batches", "batches_per_epoch", "check_batches",
           "epoch_batches"]


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


_CACHED_LABELS = 1 << 16  # label arrays up to this length (512 KiB) have their layout cached: <= 32 MiB in all


class _Layout(NamedTuple):
    """Where the members of each class are: ``order[starts[c] : starts[c] + sizes[c]]`` are the members of
    class c (classes in ascending label order) in increasing index, i.e. ``np.flatnonzero(y == np.unique(y)[c])``."""

    order: np.ndarray  # [N] int64
    starts: np.ndarray  # [C] int64
    sizes: np.ndarray  # [C] int64
    size_of: tuple[int, ...]  # sizes as Python ints (the sampler's loop reads them one by one)


def _class_layout(y: np.ndarray) -> _Layout:
    """The :class:`_Layout` of int64 labels y [N] (N >= 1): a stable sort keeps equal labels in index order."""
    order = np.argsort(y, kind="stable").astype(np.int64, copy=False)
    ys = y[order]
    starts = np.concatenate(([0], np.flatnonzero(ys[1:] != ys[:-1]) + 1)).astype(np.int64)
    sizes = np.diff(np.append(starts, y.size))
    return _Layout(order, starts, sizes, tuple(sizes.tolist()))


@functools.lru_cache(maxsize=32)
def _cached_class_layout(key: bytes) -> _Layout:
    """:func:`_class_layout` of the int64 labels whose bytes are ``key`` (a training run asks once per epoch
    with the same labels). Keyed on the exact bytes, so equal keys mean equal labels; the arrays are
    read-only, so no caller can change what the next one gets."""
    layout = _class_layout(np.frombuffer(key, dtype=np.int64))
    for a in layout[:3]:
        a.setflags(write=False)
    return layout


@functools.lru_cache(maxsize=64)
def _batch_columns(num_classes: int, batch_size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, tuple[int, ...]]:
    """(counts [n], slot [B], within [B], counts as Python ints): :func:`class_balanced_counts`, and for each
    column of a batch the slot (the k-th chosen class) it belongs to and its offset inside that slot.
    Read-only (cached)."""
    counts = class_balanced_counts(num_classes, batch_size)
    slot = np.repeat(np.arange(counts.size), counts)
    within = np.arange(batch_size) - np.repeat(np.cumsum(counts) - counts, counts)
    for a in (counts, slot, within):
        a.setflags(write=False)
    return counts, slot, within, tuple(counts.tolist())


def class_balanced_batches(labels, batch_size: int, *, num_batches: int, rng: np.random.Generator) -> np.ndarray:
    """Indices [num_batches, batch_size] of class-balanced batches (module docstring).

    Parameters
    ----------
    labels : array [N] of int (any values; :func:`ncgeom.labels.integer_labels`)
    batch_size : int
        2 <= B; a class may appear at most as many times as it has members.
    num_batches : int
    rng : numpy.random.Generator
        Advanced by exactly the draws listed in the module docstring.

    Notes
    -----
    Streams are kept as positions 0..n_c-1 within each class. A stream grows only by a refill and shrinks
    only from its front, and a class is refilled when its stream is shorter than the count the batch takes
    from it, so at the next refill every member left comes from the last refill: they mark a boolean mask
    (one per call, unmarked after each refill), and the new permutation keeps the positions outside it (the
    same result as ``np.isin`` on the member indices, since members and positions correspond one to one).
    The class streams are then laid end to end and each slot of a batch is one contiguous range of its
    class's stream: the batches are one gather. The members of each class come from one stable argsort,
    cached on the labels' bytes (up to 2^16 labels).
    """
    y = integer_labels(labels)  # integers (or strings mapped to ids); never lossy floats
    if y.size == 0:
        raise ValueError(f"labels must have shape [N] with N >= 1, got {y.shape}")
    b = require_int("batch_size", batch_size, min_value=2, max_value=y.size)
    steps = require_int("num_batches", num_batches, min_value=0)
    if not isinstance(rng, np.random.Generator):
        raise ValueError("rng must be a numpy.random.Generator")
    y = y.astype(np.int64, copy=False)
    order, starts, sizes, size_of = _cached_class_layout(y.tobytes()) if y.size <= _CACHED_LABELS else _class_layout(y)
    num_classes = sizes.size
    counts, slot, within, need_of = _batch_columns(num_classes, b)
    smallest = min(size_of)
    if need_of[0] > smallest:
        raise ValueError(
            f"batch_size {b} needs {need_of[0]} samples of each class but the smallest class has {smallest}"
        )
    if steps == 0:
        return np.empty((0, b), dtype=np.int64)
    n = counts.size
    permutation = rng.permutation
    left = [0] * num_classes  # samples still in each class's stream
    filled = [0] * num_classes  # samples ever put in each class's stream
    refills: list[list[np.ndarray]] = [[] for _ in range(num_classes)]  # each stream = its refills end to end
    newest = [np.empty(0, dtype=np.int64)] * num_classes  # each class's last refill (the leftovers are its end)
    fresh_mask = np.ones(max(size_of), dtype=bool)  # True, but False at the leftovers during one refill
    chosen = np.empty((steps, n), dtype=np.int64)
    first: list[int] = []  # where each slot of each batch starts in its class's stream, batch after batch
    for s in range(steps):
        row = permutation(num_classes)[:n]
        chosen[s] = row
        for c, need in zip(row.tolist(), need_of):  # in batch order: that is the order of the draws
            rest = left[c]
            if rest < need:  # refill
                size = size_of[c]
                fresh = permutation(size)
                if rest:  # leftovers first, never a duplicate within a batch
                    leftovers = newest[c][-rest:]
                    fresh_mask[leftovers] = False
                    fresh = fresh[fresh_mask[fresh]]
                    fresh_mask[leftovers] = True
                refills[c].append(fresh)
                newest[c] = fresh
                filled[c] += size - rest
                rest = size
            first.append(filled[c] - rest)
            left[c] = rest - need
    positions = np.concatenate([r for rs in refills for r in rs])  # class by class, within-class positions
    stream = order[positions + np.repeat(starts, filled)]  # sample indices, class streams end to end
    base = np.cumsum(filled) - filled
    return stream[(base[chosen] + np.reshape(first, (steps, n)))[:, slot] + within]


def shuffled_batches(num_samples: int, batch_size: int, *, rng: np.random.Generator) -> np.ndarray:
    """Indices [floor(N / B), B] of one epoch of shuffled batches (module docstring): one
    ``rng.permutation(num_samples)``, cut into consecutive batches; the last N mod B indices are dropped.

    Example: N = 10, B = 4 gives 2 batches of 4 distinct indices; 2 samples sit the epoch out.
    """
    n = require_int("num_samples", num_samples, min_value=1)
    b = require_int("batch_size", batch_size, min_value=2, max_value=n)
    if not isinstance(rng, np.random.Generator):
        raise ValueError("rng must be a numpy.random.Generator")
    steps = n // b
    return rng.permutation(n)[: steps * b].reshape(steps, b)


def batches_per_epoch(batches: str, num_samples: int, batch_size: int) -> int:
    """Steps of an epoch: ceil(N / B) class-balanced batches, floor(N / B) shuffled ones."""
    batches = require_choice("batches", batches, BATCHINGS)
    n = require_int("num_samples", num_samples, min_value=1)
    b = require_int("batch_size", batch_size, min_value=2, max_value=n)
    return -(-n // b) if batches == "balanced" else n // b


def check_batches(batches: str, labels, batch_size: int) -> None:
    """ValueError (naming the argument) unless ``batches`` can draw batches of ``batch_size`` from ``labels``:
    B <= N, and for class-balanced batches enough members of every class; draws nothing."""
    batches = require_choice("batches", batches, BATCHINGS)
    y = np.asarray(labels)
    batches_per_epoch(batches, y.shape[0], batch_size)
    if batches == "balanced":
        class_balanced_batches(y, batch_size, num_batches=0, rng=np.random.default_rng(0))  # sizes only


def epoch_batches(batches: str, labels, batch_size: int, *, rng: np.random.Generator) -> np.ndarray:
    """One epoch's batch indices [batches_per_epoch, B] drawn from ``rng`` as ``batches`` says: class-balanced
    (:func:`class_balanced_batches`) or shuffled (:func:`shuffled_batches`, which reads only len(labels))."""
    batches = require_choice("batches", batches, BATCHINGS)
    y = np.asarray(labels)
    steps = batches_per_epoch(batches, y.shape[0], batch_size)
    if batches == "shuffle":
        return shuffled_batches(y.shape[0], batch_size, rng=rng)
    return class_balanced_batches(y, batch_size, num_batches=steps, rng=rng)
