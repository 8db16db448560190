"""proofs_check.ablations.imbalance_training: the expected batch objective of a run and the optima it is compared with.

Order of trust: the collapsed-batch formula against ``batch_loss`` itself on collapsed batches (every setting,
count vectors with empty classes and without pairs); the exact count law against its moments (derived in closed
form) and against sampling; the ETF as a critical point of the shuffled objective at balanced classes (exact
symmetry of the law) and as the searched optimum of the balanced one; the comparison end to end at a tiny size.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from ncgeom.geometry import simplex_etf
from ncgeom.losses import batch_loss
from proofs_check.ablations.imbalance_training import (
    best_configuration,
    class_mean_gram,
    compare,
    count_law,
    expected_batch_loss,
)

COUNTS = ([5, 3, 1, 0], [4, 4, 4, 4], [1, 1, 1, 1], [7, 0, 0, 1], [2, 0, 0, 0])


@pytest.mark.parametrize(("setting", "beta"), [("scl", 0.0), ("hscl", 5.0), ("ucl", 0.0), ("hucl", 2.0)])
@pytest.mark.parametrize("counts", COUNTS)
def test_formula_is_batch_loss_on_a_collapsed_batch(setting, beta, counts):
    rng = np.random.default_rng(sum(counts))
    v = torch.as_tensor(rng.standard_normal((4, 3)))
    v = v / v.norm(dim=1, keepdim=True)
    y = torch.as_tensor(np.repeat(np.arange(4), counts))
    expected = batch_loss(v[y], y, setting, beta=beta, tau=0.7).item()
    got = expected_batch_loss(v, setting, np.array([counts]), beta=beta, tau=0.7).item()
    assert got == pytest.approx(expected, rel=64 * np.finfo(float).eps, abs=1e-300)


def test_weighted_mean_over_count_vectors():
    v = torch.as_tensor(simplex_etf(4, 3)) + 0.1
    counts = np.array(COUNTS[:3])
    probs = np.array([0.5, 0.3, 0.2])
    each = [expected_batch_loss(v, "hscl", counts[i:i + 1], beta=1.0).item() for i in range(3)]
    assert expected_batch_loss(v, "hscl", counts, probs, beta=1.0).item() == pytest.approx(float(np.dot(probs, each)), rel=1e-15)


def test_count_law_is_the_multivariate_hypergeometric():
    sizes, b = np.array([12, 7, 3, 2]), 6
    counts, probs = count_law(sizes, b, "shuffle")
    n = sizes.sum()
    assert (counts.sum(1) == b).all() and (counts <= sizes).all() and len({tuple(r) for r in counts}) == len(counts)
    assert math.isclose(probs.sum(), 1.0, rel_tol=len(probs) * np.finfo(float).eps)
    assert np.allclose(probs @ counts, b * sizes / n, rtol=1e-13)  # E n_c = B N_c / N
    pairs = b * (b - 1) * sizes * (sizes - 1) / (n * (n - 1))  # E n_c (n_c - 1), the class weight of a run
    assert np.allclose(probs @ (counts * (counts - 1)), pairs, rtol=1e-13)
    draws = np.random.default_rng(0).multivariate_hypergeometric(sizes, b, size=200_000)
    index = {tuple(r): i for i, r in enumerate(counts)}
    freq = np.bincount([index[tuple(r)] for r in draws], minlength=len(counts)) / len(draws)
    assert np.abs(freq - probs).max() < 5 * np.sqrt(probs.max() / len(draws))  # 5 standard errors
    balanced, one = count_law(sizes, 8, "balanced")
    assert balanced.tolist() == [[2, 2, 2, 2]] and one.tolist() == [1.0]
    with pytest.raises(ValueError, match="batch_size must be >= 2 C"):
        count_law(sizes, 6, "balanced")


@pytest.mark.parametrize("setting", ["scl", "hscl", "ucl"])
def test_etf_is_critical_for_shuffled_batches_of_balanced_classes(setting):
    """The exact law of n is exchangeable for equal class sizes: the objective is symmetric, the ETF critical."""
    counts, probs = count_law([6, 6, 6, 6], 8, "shuffle")
    u = torch.as_tensor(simplex_etf(4, 3)).requires_grad_()
    expected_batch_loss(u, setting, counts, probs, beta=3.0).backward()
    v = u.detach()
    tangent = u.grad - (u.grad * v).sum(1, keepdim=True) * v
    assert tangent.norm() < 1e-14
    uneven = torch.as_tensor(simplex_etf(4, 3)).requires_grad_()
    expected_batch_loss(uneven, setting, *count_law([12, 6, 4, 2], 8, "shuffle"), beta=3.0).backward()
    w = uneven.detach()
    assert (uneven.grad - (uneven.grad * w).sum(1, keepdim=True) * w).norm() > 1e-3  # imbalance moves it


def test_search_finds_the_etf_for_class_balanced_batches():
    counts, probs = count_law([30, 10, 5, 5], 16, "balanced")
    found = best_configuration(lambda u: expected_batch_loss(u, "scl", counts, probs), 4, 3, num_random=4,
                               rng=np.random.default_rng(0))
    etf = simplex_etf(4) @ simplex_etf(4).T
    assert np.linalg.norm(np.asarray(found["gram"]) - etf) < 1e-6 and found["max_final_grad"] < 1e-6


def test_class_mean_gram():
    z = np.array([[2.0, 0.0], [4.0, 0.0], [0.0, -1.0]])
    assert np.allclose(class_mean_gram(z, np.array([0, 0, 1])), [[1.0, 0.0], [0.0, 1.0]])


def test_compare_end_to_end_at_a_tiny_size():
    grid = {"settings": (("scl", 0.0),), "ratios": (4.0,), "samples_per_class": 10, "batch_size": 8}
    data = compare(epochs=5, seeds=(0,), num_random=2, grid=grid)
    assert [(r["batches"], r["ratio"]) for r in data["rows"]] == [("balanced", 4.0), ("shuffle", 4.0)]
    for row in data["rows"]:
        assert row["trained"][0]["status"] == "completed" and len(row["trained"][0]["gram"]) == 4
        assert row["population_optimum"]["value"] == pytest.approx(row["population_optimum"]["value_recomputed"], rel=1e-12)
    balanced = data["rows"][0]
    assert balanced["batch_optimum"]["max_final_grad"] < 1e-6
    etf = simplex_etf(4) @ simplex_etf(4).T
    assert np.linalg.norm(np.asarray(balanced["batch_optimum"]["gram"]) - etf) < 1e-6  # balanced batches: the ETF
