"""The vectorized sampled estimator (docs/theory.md section 7): law of the draws, values, gradient, stream.

The draws are checked against the definition, never against pinned indices: (1) the alias tables imply
q_i exactly (a deterministic identity); (2) the empirical frequency of drawn negatives per anchor matches
q_i (binomial standard errors, fixed generator); (3) a naive per-pair loop of the definition evaluated
on the drawn negatives gives the returned values; (4) gradcheck in float64 with the generator reseeded per
evaluation; (5) the same generator state gives the same draws whatever the block and chunk sizes.
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np
import pytest
import torch
from conftest import naive_psi, random_batch, tilt_matrix

from ncgeom.losses import batch_loss, batch_loss_pairs, custom_psi
from ncgeom.losses.kernels.draws import alias_tables
from ncgeom.losses.kernels.sampled import sampled_values
from ncgeom.losses.kernels.structure import LossSpec, pair_structure
from ncgeom.losses.psi import make_psi
from ncgeom.vocabulary import SETTINGS

EPS64 = torch.finfo(torch.float64).eps


def test_alias_tables_imply_the_weights():
    """P(m) = (theta_m + sum_{c: alias_c = m} (1 - theta_c)) / n equals w_m / sum w, to rounding."""
    gen = torch.Generator().manual_seed(0)
    for n in (1, 2, 7, 64, 513):
        for spread in (0.0, 1.0, 10.0, 60.0):
            w = torch.exp(spread * torch.randn(5, n, generator=gen, dtype=torch.float64))
            w[torch.rand(5, n, generator=gen) < 0.3] = 0.0
            w[:, 0] += 1e-3  # every row has mass
            threshold, alias = alias_tables(w)
            assert bool(((threshold >= 0) & (threshold <= 1)).all())
            implied = threshold.clone().scatter_add_(1, alias, 1 - threshold) / n
            # prefix sums over n terms of size <= n: rounding ~ n * eps relative to the mean weight 1
            torch.testing.assert_close(implied, w / w.sum(1, keepdim=True), rtol=0, atol=4 * n * EPS64)


@pytest.mark.parametrize("setting", SETTINGS)
def test_drawn_frequencies_match_q(setting):
    """Per anchor, the count of each negative over all its pairs' draws is Binomial(n_draws, q_im)."""
    z, labels = random_batch(1, size=10)
    beta, k = 2.0, 400
    pairs = batch_loss_pairs(z, labels, setting, beta=beta, tau=0.5, num_negatives=k, estimator="sampled",
                             generator=torch.Generator().manual_seed(3))
    assert pairs.negatives is not None
    q = tilt_matrix(z, labels, setting, beta)
    for i in torch.unique(pairs.anchors).tolist():
        drawn = pairs.negatives[pairs.anchors == i].reshape(-1)
        total = drawn.numel()
        freq = torch.bincount(drawn, minlength=len(labels)).double() / total
        se = torch.sqrt(q[i] * (1 - q[i]) / total)
        # 6 standard errors per cell (B cells, a false failure has p < 1e-7); zero-q cells must stay empty
        assert bool((freq[q[i] == 0] == 0).all())
        np.testing.assert_array_less((freq - q[i]).abs().numpy(), (6 * se + 1e-12).numpy())


def test_chi_square_of_one_anchor():
    """A single anchor with many draws: Pearson's chi-square below its 1 - 1e-6 quantile."""
    z, labels = random_batch(2, size=40, dim=4)
    labels = torch.zeros(40, dtype=torch.long)
    labels[1:] = torch.arange(1, 40) % 2 + 1
    labels[1] = 0  # anchor 0 has one positive (1) and 38 negatives
    k = 20000
    pairs = batch_loss_pairs(z, labels, "hscl", beta=3.0, tau=1.0, num_negatives=k, estimator="sampled",
                             generator=torch.Generator().manual_seed(9))
    assert pairs.negatives is not None
    q = tilt_matrix(z, labels, "hscl", 3.0)[0]
    drawn = pairs.negatives[(pairs.anchors == 0)].reshape(-1)
    counts = torch.bincount(drawn, minlength=40).double()
    support = q > 0
    expected = k * q[support]
    chi2 = float(((counts[support] - expected) ** 2 / expected).sum())
    dof = int(support.sum()) - 1
    # Wilson-Hilferty: the 1 - 1e-6 quantile of chi2(dof) is dof (1 - 2/(9 dof) + 4.75 sqrt(2/(9 dof)))^3
    bound = dof * (1 - 2 / (9 * dof) + 4.75 * math.sqrt(2 / (9 * dof))) ** 3
    assert chi2 < bound, (chi2, bound)


@pytest.mark.parametrize("setting", SETTINGS)
@pytest.mark.parametrize("psi_name", ["infonce", "infonce-mean", "triplet"])
def test_values_are_the_definition_on_the_drawn_negatives(setting, psi_name):
    """Naive per-pair loop: l_ij = psi_k(S_{i m_1} - S_ij, ...) on the returned draws; tiny tau included
    (every drawn term underflows next to the anchor's largest: the per-pair log-sum-exp branch)."""
    z, labels = random_batch(4)
    sim = (z @ z.T).tolist()
    cases: tuple[tuple[float, int | Literal["batch"]], ...] = ((0.5, 5), (1e-3, 3), (0.5, "batch"))
    for tau, k in cases:
        pairs = batch_loss_pairs(z, labels, setting, beta=1.5, tau=tau, num_negatives=k, estimator="sampled",
                                 psi=psi_name, generator=torch.Generator().manual_seed(5))
        assert pairs.negatives is not None
        for p, (i, j) in enumerate(zip(pairs.anchors.tolist(), pairs.positives.tolist())):
            drawn = [m for m in pairs.negatives[p].tolist() if m >= 0]
            want = naive_psi(psi_name, sim, i, j, drawn, tau)
            # float64: log1p of a sum of k exponentials, relative rounding ~ k eps, times |t|/tau <= 2/tau
            np.testing.assert_allclose(float(pairs.values[p]), want, rtol=1e-12 * max(1.0, 2 / tau),
                                       atol=8 * EPS64)


def test_expectation_over_draws_equals_the_exact_one():
    """k = 3, infonce-mean: E[l_ij] over the draws, by enumerating all N(i)^3 triples weighted by q."""
    z, labels = random_batch(6, size=7)
    tau, beta, reps = 0.8, 1.2, 400
    q = tilt_matrix(z, labels, "hucl", beta)
    sim = (z @ z.T).tolist()
    gen = torch.Generator().manual_seed(13)
    draws = torch.stack([batch_loss(z, labels, "hucl", beta=beta, tau=tau, num_negatives=3, estimator="sampled",
                                    psi="infonce-mean", generator=gen, reduction="none") for _ in range(reps)])
    pairs = batch_loss_pairs(z, labels, "hucl", beta=beta, tau=tau, num_negatives=3, estimator="sampled",
                             psi="infonce-mean", generator=gen)
    for p, (i, j) in enumerate(zip(pairs.anchors.tolist(), pairs.positives.tolist())):
        neg = torch.nonzero(q[i]).reshape(-1).tolist()
        vals, probs = [], []
        for a in neg:
            for b in neg:
                for c in neg:
                    vals.append(naive_psi("infonce-mean", sim, i, j, [a, b, c], tau))
                    probs.append(float(q[i, a] * q[i, b] * q[i, c]))
        vals_np, probs_np = np.array(vals), np.array(probs)
        mean = float(probs_np @ vals_np)
        std = math.sqrt(float(probs_np @ (vals_np - mean) ** 2))
        # CLT: the average of `reps` draws is within 5 standard errors (a false failure has p < 1e-6)
        np.testing.assert_allclose(float(draws[:, p].mean()), mean, atol=5 * std / math.sqrt(reps) + 1e-12)


@pytest.mark.parametrize("setting", SETTINGS)
@pytest.mark.parametrize("psi_name", ["infonce", "infonce-mean", "triplet", "custom"])
def test_gradcheck_with_reseeded_generator(setting, psi_name):
    """Each evaluation reseeds the generator, so the draws are fixed and the loss is smooth in z (the
    triplet hinge away from its kink at this seed). The per-pair log-sum-exp branch (every drawn term
    below finfo.tiny / eps of the anchor's largest) is too stiff for finite differences: its values are
    checked above and its gradient's finiteness in test_float32_tiny_tau_is_finite."""
    z, labels = random_batch(8, size=7, dim=3)
    x = (z * 0.9).requires_grad_()
    psi = custom_psi(lambda t: (t.exp() + 1).log().sum(-1), name="softplus-sum") if psi_name == "custom" else psi_name
    for tau in (0.7, 0.01):
        def f(v, tau=tau):  # bound now (ruff B023); gradcheck calls f(x)
            return batch_loss(v, labels, setting, beta=1.1, tau=tau, num_negatives=4, estimator="sampled", psi=psi,
                              generator=torch.Generator().manual_seed(21), reduction="sum")
        assert torch.autograd.gradcheck(f, (x,), eps=1e-6, atol=1e-6 * max(1.0, 1 / tau))


@pytest.mark.parametrize("k", [4, "batch"])
def test_draws_depend_on_the_generator_only(k):
    """Same generator state: same draws and values for every block size and chunk size (the stream is
    consumed pair after pair, k_max uniforms each); another state gives other draws."""
    z, labels = random_batch(10, size=13)
    spec = LossSpec(supervised=True, b=2.0, tau=0.5, k=None if k == "batch" else k)
    structure = pair_structure(labels, supervised=True)
    psi = make_psi("infonce", tau=0.5)
    ref = sampled_values(z, labels, spec, structure, psi, generator=torch.Generator().manual_seed(1), block_size=13)
    for block, chunk in ((1, 1), (4, 7), (5, 1 << 18), (100, 3)):
        got = sampled_values(z, labels, spec, structure, psi, generator=torch.Generator().manual_seed(1),
                             block_size=block, max_draws=chunk)
        assert ref[1] is not None and got[1] is not None
        assert torch.equal(got[1], ref[1])
        torch.testing.assert_close(got[0], ref[0], rtol=4 * EPS64, atol=0)  # summation order only
    other = sampled_values(z, labels, spec, structure, psi, generator=torch.Generator().manual_seed(2), block_size=13)
    assert other[1] is not None and ref[1] is not None and not torch.equal(other[1], ref[1])
    quiet = sampled_values(z, labels, spec, structure, psi, generator=torch.Generator().manual_seed(1),
                           block_size=13, return_negatives=False)
    assert quiet[1] is None and torch.equal(quiet[0], ref[0])


def test_float32_tiny_tau_is_finite():
    """float32, tau = 1e-3, beta = 1e4 (the corner of the validated range): finite loss and gradient."""
    z, labels = random_batch(11, size=32, dim=5)
    x = z.float().requires_grad_()
    for psi in ("infonce", "infonce-mean", "triplet"):
        loss = batch_loss(x, labels, "hucl", beta=1e4, tau=1e-3, num_negatives=8, estimator="sampled", psi=psi,
                          generator=torch.Generator().manual_seed(0))
        (grad,) = torch.autograd.grad(loss, x)
        assert torch.isfinite(loss) and bool(torch.isfinite(grad).all()), psi
