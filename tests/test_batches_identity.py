"""class_balanced_batches returns the same indices from the same draws as the implementation it replaced.

Every stored run and figure depends on the order of the batches, so a faster sampler must give, for each
Generator state, bitwise the same indices and leave the Generator in the same state. The implementation
before the second speed round (ncgeom/data/batches.py at commit 623ba53) is copied below (the code verbatim,
names prefixed with ``_previous``, docstrings left out, one long line split) and both are run on the same problems: random label sets (balanced and not,
arbitrary label values, class sizes down to the count one batch takes), every regime of the batch size
(all classes or a random subset per batch, B = 2, B = N), 0 to 70 batches, consecutive calls on one
Generator, labels beyond the cached length, strings and tensors, and the errors.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest
import torch

from ncgeom.data import class_balanced_batches, class_balanced_counts
from ncgeom.labels import integer_labels
from ncgeom.validate import require_int

# ---- ncgeom/data/batches.py at 623ba53 (module docstring) ------------------------------------------------

_PREVIOUS_CACHED_LABELS = 1 << 16


def _previous_class_layout(y: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    order = np.argsort(y, kind="stable").astype(np.int64, copy=False)
    ys = y[order]
    starts = np.concatenate(([0], np.flatnonzero(ys[1:] != ys[:-1]) + 1)).astype(np.int64)
    sizes = np.diff(np.append(starts, y.size))
    return order, starts, sizes


@functools.lru_cache(maxsize=32)
def _previous_cached_class_layout(key: bytes) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    layout = _previous_class_layout(np.frombuffer(key, dtype=np.int64))
    for a in layout:
        a.setflags(write=False)
    return layout


@functools.lru_cache(maxsize=64)
def _previous_batch_columns(num_classes: int, batch_size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    counts = class_balanced_counts(num_classes, batch_size)
    slot = np.repeat(np.arange(counts.size), counts)
    within = np.arange(batch_size) - np.repeat(np.cumsum(counts) - counts, counts)
    for a in (counts, slot, within):
        a.setflags(write=False)
    return counts, slot, within


def _previous_class_balanced_batches(labels, batch_size: int, *, num_batches: int,
                                     rng: np.random.Generator) -> np.ndarray:
    y = integer_labels(labels)  # integers (or strings mapped to ids); never lossy floats
    if y.size == 0:
        raise ValueError(f"labels must have shape [N] with N >= 1, got {y.shape}")
    b = require_int("batch_size", batch_size, min_value=2, max_value=y.size)
    steps = require_int("num_batches", num_batches, min_value=0)
    if not isinstance(rng, np.random.Generator):
        raise ValueError("rng must be a numpy.random.Generator")
    y = y.astype(np.int64, copy=False)
    if y.size <= _PREVIOUS_CACHED_LABELS:
        order, starts, sizes = _previous_cached_class_layout(y.tobytes())
    else:
        order, starts, sizes = _previous_class_layout(y)
    num_classes = sizes.size
    counts, slot, within = _previous_batch_columns(num_classes, b)
    smallest = int(sizes.min())
    if counts[0] > smallest:
        raise ValueError(
            f"batch_size {b} needs {counts[0]} samples of each class but the smallest class has {smallest}"
        )
    if steps == 0:
        return np.empty((0, b), dtype=np.int64)
    n = counts.size
    size_of = sizes.tolist()
    need_of = counts.tolist()
    left = [0] * num_classes  # samples still in each class's stream
    filled = [0] * num_classes  # samples ever put in each class's stream
    refills: list[list[np.ndarray]] = [[] for _ in range(num_classes)]  # each stream = its refills end to end
    chosen = np.empty((steps, n), dtype=np.int64)
    first: list[int] = []  # where each slot of each batch starts in its class's stream, batch after batch
    for s in range(steps):
        chosen[s] = rng.permutation(num_classes)[:n]
        for c, need in zip(chosen[s].tolist(), need_of):  # in batch order: that is the order of the draws
            rest = left[c]
            if rest < need:  # refill
                fresh = rng.permutation(size_of[c])
                if rest:  # leftovers first, never a duplicate within a batch
                    new = np.ones(size_of[c], dtype=bool)  # not among the leftovers
                    new[refills[c][-1][-rest:]] = False
                    fresh = fresh[new[fresh]]
                refills[c].append(fresh)
                filled[c] += fresh.size
                rest = size_of[c]
            first.append(filled[c] - rest)
            left[c] = rest - need
    positions = np.concatenate([r for rs in refills for r in rs])  # class by class, within-class positions
    stream = order[positions + np.repeat(starts, filled)]  # sample indices, class streams end to end
    base = np.cumsum(filled) - filled
    return stream[(base[chosen] + np.reshape(first, (steps, n)))[:, slot] + within]


# ---- the comparison ----------------------------------------------------------------------------------------


def _assert_same_draws(labels, batch_size: int, num_batches: int, seed: int, *, calls: int = 2) -> None:
    """``calls`` consecutive calls on one Generator (epochs): equal indices, dtype, shape and Generator state."""
    rng_new, rng_old = np.random.default_rng(seed), np.random.default_rng(seed)
    for _ in range(calls):
        got = class_balanced_batches(labels, batch_size, num_batches=num_batches, rng=rng_new)
        want = _previous_class_balanced_batches(labels, batch_size, num_batches=num_batches, rng=rng_old)
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got, want)
        assert rng_new.bit_generator.state == rng_old.bit_generator.state


def _random_problem(rng: np.random.Generator) -> tuple[np.ndarray, int, int]:
    """(labels, batch size, batches): 1 to 120 classes of sizes from the count a batch takes up to 80, equal
    or not, arbitrary distinct int64 values in shuffled order; B drawn from the whole range the smallest
    class allows (so both B >= 2C and B < 2C), sometimes the largest such B."""
    c = int(rng.integers(1, 121))
    sizes = np.full(c, rng.integers(2, 81)) if rng.random() < 0.5 else rng.integers(2, 81, size=c)
    values = rng.choice(np.arange(-(2**40), 2**40, 2**20), size=c, replace=False)
    labels = rng.permutation(np.repeat(values, sizes))
    smallest = int(sizes.min())
    valid = [b for b in range(2, labels.size + 1) if class_balanced_counts(c, b)[0] <= smallest]
    batch = valid[-1] if rng.random() < 0.2 else int(rng.choice(valid))
    steps = int(rng.choice([0, 1, 2, 3, int(rng.integers(4, 71))]))
    return labels, batch, steps


@pytest.mark.parametrize("block", range(8))
def test_random_problems_draw_the_same_batches(block):
    rng = np.random.default_rng(1000 + block)
    for _ in range(40):  # 8 x 40 = 320 problems
        labels, batch, steps = _random_problem(rng)
        _assert_same_draws(labels, batch, steps, seed=int(rng.integers(2**63)))


@pytest.mark.parametrize(("sizes", "batch"), [
    ([5], 2),  # one class: every batch is that class, B = 2
    ([7], 7),  # one class, B = N: each batch is the whole class in a fresh order
    ([2, 2, 2], 6),  # every class exactly the 2 a batch takes: a refill at every batch, no leftovers
    ([3, 3, 3, 3], 8),  # 2 of each class per batch from 3: leftovers of 1 at every other batch
    ([13, 13, 13, 40], 50),  # the smallest classes just hold the largest count (50 = 13 + 13 + 12 + 12)
    ([1000, 2, 2, 2, 2], 4),  # B < 2C: two classes per batch; one huge class, four minimal ones
    ([50] * 10, 128),  # the quick scale of claim 6 (C = 10, B = 128)
    ([40] * 50, 512),  # the full scale of claim 6 (C = 50, B = 512)
    ([20] * 100, 32),  # claim 8's smallest batch: 16 of 100 classes per batch
])
def test_edge_cases_draw_the_same_batches(sizes, batch):
    labels = np.repeat(np.arange(len(sizes)), sizes)
    for steps in (0, 1, 3, 40):
        for seed in range(3):
            _assert_same_draws(np.random.default_rng(seed).permutation(labels), batch, steps, seed, calls=3)


def test_uncached_labels_strings_and_tensors_draw_the_same_batches():
    big = np.random.default_rng(2).integers(0, 7, size=(1 << 16) + 3)  # beyond the cached length
    _assert_same_draws(big, 1000, 5, seed=4)
    _assert_same_draws(np.array(["b", "a", "c", "a", "b", "c", "c", "a"]), 4, 9, seed=5)
    _assert_same_draws(torch.tensor([3, 1, 3, 1, 2, 2, 1, 3]), 6, 7, seed=6)
    _assert_same_draws(np.array([2.0, 5.0, 2.0, 5.0, 2.0, 5.0]), 4, 4, seed=7)  # integral floats


@pytest.mark.parametrize(("labels", "batch", "steps"), [
    (np.repeat(np.arange(2), 3), 7, 1),  # B > N
    (np.repeat(np.arange(2), [2, 6]), 8, 1),  # the smallest class cannot supply its count
    (np.repeat(np.arange(2), 3), 1, 1),  # B < 2
    (np.repeat(np.arange(2), 3), 4, -1),  # negative number of batches
    (np.array([], dtype=np.int64), 2, 1),  # no labels
])
def test_bad_input_raises_the_same_error(labels, batch, steps):
    with pytest.raises(ValueError) as previous:
        _previous_class_balanced_batches(labels, batch, num_batches=steps, rng=np.random.default_rng(0))
    with pytest.raises(ValueError) as current:
        class_balanced_batches(labels, batch, num_batches=steps, rng=np.random.default_rng(0))
    assert str(current.value) == str(previous.value)
