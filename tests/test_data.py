"""ncgeom.data: the latent-class model, positives, class-balanced batches, digits."""

from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import ncgeom.data as data
from ncgeom.data import (
    class_balanced_batches,
    class_balanced_counts,
    class_prior,
    gaussian_mixture,
    label_positive_indices,
    label_positives,
    load_digits_data,
    noise_positives,
    split_counts,
    two_view_batch,
)
from ncgeom.labels import integer_labels
from ncgeom.validate import require_int


def test_all_exports_exist_once():
    assert len(data.__all__) == len(set(data.__all__))
    for name in data.__all__:
        assert hasattr(data, name), name


def test_class_prior_balanced_and_imbalanced():
    np.testing.assert_allclose(class_prior(4), np.full(4, 0.25), rtol=0, atol=1e-15)
    p = class_prior(2, imbalance=3.0)  # hand-checkable: [3/4, 1/4]
    np.testing.assert_allclose(p, [0.75, 0.25], rtol=1e-15)
    p = class_prior(10, imbalance=10.0)
    np.testing.assert_allclose(p.max() / p.min(), 10.0, rtol=1e-12)
    np.testing.assert_allclose(p.sum(), 1.0, rtol=1e-15)
    assert np.all(np.diff(p) < 0)


def test_split_counts_sum_and_min():
    counts = split_counts(100, class_prior(7, imbalance=20.0), min_count=2)
    assert counts.sum() == 100 and counts.min() >= 2
    assert split_counts(10, [0.5, 0.5]).tolist() == [5, 5]
    with pytest.raises(ValueError, match="total"):
        split_counts(3, [0.5, 0.5], min_count=2)


def test_gaussian_mixture_sample_moments():
    rng = np.random.default_rng(0)
    n, sep, spread, dim = 4000, 4.0, 0.5, 6
    d = gaussian_mixture(3, input_dim=dim, samples_per_class=n, test_per_class=10, separation=sep, spread=spread, rng=rng)
    assert d.x_train.shape == (3 * n, dim) and d.x_test.shape == (30, dim)
    assert np.bincount(d.y_train).tolist() == [n] * 3
    # population means at pairwise distance `separation` (exact, by construction)
    assert d.class_means is not None  # a synthetic mixture knows its population means
    dist = np.linalg.norm(d.class_means[:, None] - d.class_means[None], axis=-1)
    np.testing.assert_allclose(dist[~np.eye(3, dtype=bool)], sep, rtol=1e-12)
    # sample mean within 5 standard errors (spread / sqrt(n)); sample std within 5 s.e. of sqrt(2n)
    for c in range(3):
        xc = d.x_train[d.y_train == c]
        assert np.all(np.abs(xc.mean(0) - d.class_means[c]) < 5 * spread / np.sqrt(n))
        assert np.all(np.abs(xc.std(0) - spread) < 5 * spread / np.sqrt(2 * n))


def test_gaussian_mixture_low_dim_and_imbalanced():
    d = gaussian_mixture(5, input_dim=2, samples_per_class=20, imbalance=4.0, rng=np.random.default_rng(1))
    counts = np.bincount(d.y_train)
    assert counts.sum() == 100 and counts[0] > counts[-1] >= 2
    np.testing.assert_allclose(d.prior.max() / d.prior.min(), 4.0, rtol=1e-12)


def test_gaussian_mixture_reproducible_from_rng():
    a = gaussian_mixture(3, input_dim=4, samples_per_class=5, rng=np.random.default_rng(7))
    b = gaussian_mixture(3, input_dim=4, samples_per_class=5, rng=np.random.default_rng(7))
    c = gaussian_mixture(3, input_dim=4, samples_per_class=5, rng=np.random.default_rng(8))
    assert np.array_equal(a.x_train, b.x_train)
    assert not np.array_equal(a.x_train, c.x_train)


@pytest.mark.parametrize("kwargs, name", [
    (dict(num_classes=1), "num_classes"), (dict(input_dim=0), "input_dim"), (dict(samples_per_class=1), "samples_per_class"),
    (dict(spread=0.0), "spread"), (dict(separation=-1.0), "separation"), (dict(imbalance=0.5), "imbalance"),
])
def test_gaussian_mixture_rejects_bad_values(kwargs, name):
    args: dict[str, Any] = dict(num_classes=3, input_dim=4, samples_per_class=5, rng=np.random.default_rng(0))
    args.update(kwargs)
    with pytest.raises(ValueError, match=name):
        gaussian_mixture(args.pop("num_classes"), **args)


def test_label_positive_indices_same_class_other_sample_uniform():
    y = np.repeat(np.arange(3), [2, 3, 4])
    rng = np.random.default_rng(0)
    draws = np.stack([label_positive_indices(y, rng=rng) for _ in range(3000)])
    assert np.all(y[draws] == y[None, :]) and np.all(draws != np.arange(y.size)[None, :])
    # uniform over the other m - 1 members: anchor 5 (class of 4 members) sees each of 3 others ~1/3
    freq = np.bincount(draws[:, 5], minlength=9)[[i for i in range(5, 9) if i != 5]] / 3000
    np.testing.assert_allclose(freq, 1 / 3, atol=5 * np.sqrt(2 / 9 / 3000))
    x = np.arange(9.0)[:, None]
    assert np.all(y[label_positives(x, y, rng=rng)[:, 0].astype(int)] == y)
    with pytest.raises(ValueError, match="labels"):
        label_positive_indices(np.array([0, 1, 1]), rng=rng)


def test_noise_positives_moments_numpy_and_torch():
    x = np.zeros((20000, 3))
    eps = noise_positives(x, scale=0.5, rng=np.random.default_rng(0)) / 0.5
    np.testing.assert_allclose(eps.mean(0), 0.0, atol=5 / np.sqrt(eps.shape[0]))
    np.testing.assert_allclose(eps.var(0), 1.0, atol=5 * np.sqrt(2 / eps.shape[0]))
    xt = torch.zeros(4, 2, dtype=torch.float64)
    a = noise_positives(xt, scale=1.0, generator=torch.Generator().manual_seed(3))
    b = noise_positives(xt, scale=1.0, generator=torch.Generator().manual_seed(3))
    torch.testing.assert_close(a, b, rtol=0, atol=0)
    assert a.dtype == torch.float64
    with pytest.raises(ValueError, match="scale"):
        noise_positives(x, scale=-1.0, rng=np.random.default_rng(0))
    with pytest.raises(ValueError, match="generator"):
        noise_positives(xt, scale=1.0)


def test_two_view_batch_instance_ids():
    x = torch.arange(6.0).reshape(3, 2)
    views, ids = two_view_batch(x, scale=0.0, generator=torch.Generator().manual_seed(0))
    assert ids.tolist() == [0, 1, 2, 0, 1, 2]
    torch.testing.assert_close(views[:3], x)
    torch.testing.assert_close(views[3:], x)  # sigma_p = 0: the copy is the sample


def test_class_balanced_counts():
    assert class_balanced_counts(10, 128).tolist() == [13] * 8 + [12] * 2
    assert class_balanced_counts(100, 32).tolist() == [2] * 16
    assert class_balanced_counts(3, 6).tolist() == [2, 2, 2]


@pytest.mark.parametrize("classes, per_class, batch", [(10, 50, 128), (20, 5, 32), (3, 4, 12)])
def test_class_balanced_batches(classes, per_class, batch):
    y = np.repeat(np.arange(classes), per_class)
    rng = np.random.default_rng(0)
    steps = int(np.ceil(y.size / batch))
    b = class_balanced_batches(y, batch, num_batches=steps * 3, rng=rng)
    assert b.shape == (steps * 3, batch)
    want = sorted(class_balanced_counts(classes, batch).tolist())
    for row in b:
        assert len(set(row.tolist())) == batch  # no duplicate sample within a batch
        counts = np.bincount(y[row], minlength=classes)
        assert sorted(counts[counts > 0].tolist()) == want
    # samples are used evenly: over 3 "epochs" every sample appears, none more than needed + 2
    use = np.bincount(b.ravel(), minlength=y.size)
    assert use.min() >= 1 if batch >= 2 * classes else use.sum() == b.size


def test_class_balanced_batches_rejects_bad_values():
    y = np.repeat(np.arange(2), 3)
    with pytest.raises(ValueError, match="batch_size"):
        class_balanced_batches(y, 7, num_batches=1, rng=np.random.default_rng(0))
    with pytest.raises(ValueError, match="batch_size"):
        class_balanced_batches(np.repeat(np.arange(2), [2, 6]), 8, num_batches=1, rng=np.random.default_rng(0))


# The implementation before the vectorized one (ncgeom/data/batches.py), copied verbatim: the batches of
# every training run depend on it, so the new one must return the same indices from the same draws.
def _reference_class_balanced_batches(
    labels, batch_size: int, *, num_batches: int, rng: np.random.Generator
) -> np.ndarray:
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


@st.composite
def _balanced_batch_problems(draw):
    """(labels [N], batch_size, num_batches, seed): C in 1..12 classes of 2..30 members (all equal or not),
    distinct arbitrary int64 label values in shuffled order, and a batch size the smallest class allows."""
    c = draw(st.integers(1, 12))
    if draw(st.booleans()):
        sizes = [draw(st.integers(2, 30))] * c
    else:
        sizes = draw(st.lists(st.integers(2, 30), min_size=c, max_size=c))
    values = draw(st.lists(st.integers(-(2**62), 2**62), min_size=c, max_size=c, unique=True))
    labels = np.asarray(draw(st.permutations(np.repeat(values, sizes).tolist())), dtype=np.int64)
    valid = [b for b in range(2, labels.size + 1) if class_balanced_counts(c, b)[0] <= min(sizes)]  # b = 2 always
    return labels, draw(st.sampled_from(valid)), draw(st.integers(0, 30)), draw(st.integers(0, 2**64 - 1))


@settings(max_examples=200)  # each example takes milliseconds; 30 would leave most (C, balance, B) cells unseen
@given(_balanced_batch_problems())
def test_class_balanced_batches_equals_reference(problem):
    labels, batch, steps, seed = problem
    rng_new, rng_ref = np.random.default_rng(seed), np.random.default_rng(seed)
    for _ in range(2):  # a second call (an epoch) continues from the generator state and hits the cache
        got = class_balanced_batches(labels, batch, num_batches=steps, rng=rng_new)
        want = _reference_class_balanced_batches(labels, batch, num_batches=steps, rng=rng_ref)
        assert got.dtype == want.dtype and got.shape == want.shape
        assert np.array_equal(got, want)
        assert rng_new.bit_generator.state == rng_ref.bit_generator.state


def test_class_balanced_batches_cache_follows_contents():
    y = np.repeat(np.arange(3), [4, 5, 6])
    first = class_balanced_batches(y, 6, num_batches=5, rng=np.random.default_rng(0))
    assert np.array_equal(first, _reference_class_balanced_batches(y, 6, num_batches=5, rng=np.random.default_rng(0)))
    y[:2] = 2  # same bytes length, new contents: the cached class layout must not be reused
    got = class_balanced_batches(y, 6, num_batches=5, rng=np.random.default_rng(0))
    assert np.array_equal(got, _reference_class_balanced_batches(y, 6, num_batches=5, rng=np.random.default_rng(0)))
    assert not np.array_equal(got, first)
    # above the cached length (2^16 labels) the layout is computed afresh each call
    big = np.random.default_rng(2).integers(0, 3, size=(1 << 16) + 5)
    assert np.array_equal(class_balanced_batches(big, 600, num_batches=3, rng=np.random.default_rng(3)),
                          _reference_class_balanced_batches(big, 600, num_batches=3, rng=np.random.default_rng(3)))
    # strings map to the same ids as the reference's conversion
    names = np.array(["b", "a", "c", "a", "b", "c", "c"])
    assert np.array_equal(class_balanced_batches(names, 4, num_batches=3, rng=np.random.default_rng(1)),
                          _reference_class_balanced_batches(names, 4, num_batches=3, rng=np.random.default_rng(1)))


def test_digits_split_and_standardization():
    d = load_digits_data(rng=np.random.default_rng(0))
    assert d.x_train.shape[1] == 64 and d.num_classes == 10
    assert d.num_train + d.y_test.size == 1797
    assert d.num_train == data.digits_train_size()
    frac = np.bincount(d.y_test) / (np.bincount(d.y_test) + np.bincount(d.y_train))
    np.testing.assert_allclose(frac, 0.3, atol=0.01)  # stratified: rounding only
    np.testing.assert_allclose(d.x_train.mean(0), 0.0, atol=1e-12)
    d3 = load_digits_data(num_classes=3, rng=np.random.default_rng(0))
    assert set(d3.y_train.tolist()) == {0, 1, 2}
    with pytest.raises(ValueError, match="num_classes"):
        load_digits_data(num_classes=11, rng=np.random.default_rng(0))
