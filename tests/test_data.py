"""ncgeom.data: the latent-class model, positives, class-balanced batches, digits."""

from typing import Any

import numpy as np
import pytest
import torch

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
