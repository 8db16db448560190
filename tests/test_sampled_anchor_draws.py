"""Sampled estimator with draws="anchor" (docs/theory.md section 7): one k-tuple per anchor, shared by its pairs.

Trust, in order: (1) a naive per-pair loop of the definition psi_k(S_{i m_1} - S_ij, ...) on the returned
draws; (2) the O(1)-per-pair forms of the built-in psi against the generic path (the same Psi wrapped as a
custom one), values and gradients, to float64 rounding; (3) the law of the draws: per anchor the tuple is
q_i^{(x)k} (marginal and joint chi-square, binomial bounds on every anchor); (4) the expectation of the
triplet value over the draws against its closed form; (5) the stream: generator only, not the block size,
chunk size or backend; (6) gradcheck in float64; (7) validation.
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np
import pytest
import torch
from conftest import naive_psi, random_batch, tilt_matrix

from ncgeom.losses import batch_loss, batch_loss_pairs, custom_psi
from ncgeom.losses.kernels.sampled import sampled_values
from ncgeom.losses.kernels.structure import LossSpec, pair_structure
from ncgeom.losses.psi import make_psi
from ncgeom.vocabulary import (
    CONVENTIONS,
    PSI_NAMES,
    SAMPLED_DRAWS,
    SETTINGS,
    Reduction,
)

EPS64 = torch.finfo(torch.float64).eps


def _anchor(z, labels, setting, *, seed, **options):
    return batch_loss_pairs(z, labels, setting, estimator="sampled", draws="anchor",
                            generator=torch.Generator().manual_seed(seed), **options)


@pytest.mark.parametrize("setting", SETTINGS)
@pytest.mark.parametrize("convention", CONVENTIONS)
def test_values_are_the_definition_on_shared_draws(setting, convention):
    """Rows of one anchor carry the same negatives (-1 padded past |N(i)| for k = "batch"), and every value is
    the naive psi_k of the definition on them; tiny tau included (every term far below the largest)."""
    z, labels = random_batch(4)
    sim = (z @ z.T).tolist()
    cases: tuple[tuple[float, int | Literal["batch"]], ...] = ((0.5, 5), (1e-3, 3), (0.5, "batch"))
    for psi_name in PSI_NAMES:
        for tau, k in cases:
            pairs = _anchor(z, labels, setting, seed=5, beta=1.5, tau=tau, num_negatives=k, psi=psi_name,
                            convention=convention)
            assert pairs.negatives is not None
            for i in torch.unique(pairs.anchors).tolist():
                rows = pairs.negatives[pairs.anchors == i]
                assert bool((rows == rows[0]).all()), (i, psi_name, k)
                drawn = rows[0][rows[0] >= 0]
                assert drawn.numel() == (k if k != "batch" else int((rows[0] >= 0).sum()))
            for p, (i, j) in enumerate(zip(pairs.anchors.tolist(), pairs.positives.tolist())):
                drawn = [m for m in pairs.negatives[p].tolist() if m >= 0]
                want = naive_psi(psi_name, sim, i, j, drawn, tau)
                # float64: a log-sum-exp of k terms, relative rounding ~ k eps, times |t| / tau <= 2 / tau
                np.testing.assert_allclose(float(pairs.values[p]), want, rtol=1e-12 * max(1.0, 2 / tau),
                                           atol=8 * EPS64)


@pytest.mark.parametrize("setting", SETTINGS)
@pytest.mark.parametrize("k", [5, "batch"])
def test_fast_forms_equal_the_generic_path(setting, k):
    """The O(1)-per-pair forms (infonce, infonce-mean: one log-sum-exp per anchor; triplet: one sort per
    anchor) against the same Psi wrapped as a custom one (psi applied to t [pairs, k]), same draws."""
    z, labels = random_batch(6, size=16, dim=4)
    for psi_name in PSI_NAMES:
        for tau in (0.5, 0.02):
            builtin = make_psi(psi_name, tau=tau)
            generic = custom_psi(builtin.func, name="generic", symmetric=True, **builtin.params)
            results = []
            for psi in (builtin, generic):
                x = z.clone().requires_grad_()
                pairs = _anchor(x, labels, setting, seed=11, beta=2.0, tau=tau, num_negatives=k, psi=psi)
                (grad,) = torch.autograd.grad(pairs.values.sum(), x)
                results.append((pairs, grad))
            (fast, g_fast), (slow, g_slow) = results
            assert fast.negatives is not None and slow.negatives is not None
            assert torch.equal(fast.negatives, slow.negatives)
            k_max = fast.negatives.shape[1]
            s_max = float((z @ z.T).abs().max())
            # Same formula, other order of operations. infonce: S_im / tau - S_ij / tau vs (S_im - S_ij) / tau
            # moves each log-sum-exp argument by <= 3 eps s_max / tau, and the k-term sum adds <= k eps (LSE and
            # log(1 + e^x) are 1-Lipschitz). triplet: prefix sums of <= k terms of size <= s_max against a mean
            # of k terms of size <= 2 s_max + |margin|: <= k eps (2 s_max + |margin|) each. Factor 4 for slack.
            scale = 4 * s_max / tau if psi_name != "triplet" else 2 * s_max + 1.0
            tol = 4 * (k_max + scale) * EPS64
            torch.testing.assert_close(fast.values, slow.values, rtol=0, atol=tol)
            # dL/dZ = (G + G^T) Z sums B products of entries of G: the same bound relative to max |dL/dZ|, with
            # the B-term sums added (and 1/tau from the softmax derivative for the InfoNCE forms)
            g_tol = 4 * (k_max + len(labels) + scale) * EPS64 * max(1.0, 1 / tau) * float(g_slow.abs().max())
            torch.testing.assert_close(g_fast, g_slow, rtol=0, atol=g_tol)


@pytest.mark.parametrize("setting", SETTINGS)
def test_every_anchor_draws_from_q(setting):
    """Per anchor, the count of each negative in its k draws is Binomial(k, q_im); zero-q cells stay empty."""
    z, labels = random_batch(1, size=10)
    beta, k = 2.0, 4000
    pairs = _anchor(z, labels, setting, seed=3, beta=beta, tau=0.5, num_negatives=k)
    assert pairs.negatives is not None
    q = tilt_matrix(z, labels, setting, beta)
    for i in torch.unique(pairs.anchors).tolist():
        drawn = pairs.negatives[pairs.anchors == i][0]
        freq = torch.bincount(drawn, minlength=len(labels)).double() / k
        se = torch.sqrt(q[i] * (1 - q[i]) / k)
        # 6 standard errors per cell (B cells per anchor, a false failure has p < 1e-7)
        assert bool((freq[q[i] == 0] == 0).all())
        np.testing.assert_array_less((freq - q[i]).abs().numpy(), (6 * se + 1e-12).numpy())


def _wilson_hilferty(dof: int) -> float:
    """The 1 - 1e-6 quantile of chi2(dof): dof (1 - 2/(9 dof) + 4.75 sqrt(2/(9 dof)))^3."""
    return dof * (1 - 2 / (9 * dof) + 4.75 * math.sqrt(2 / (9 * dof))) ** 3


@pytest.mark.parametrize("setting", ["scl", "hscl"])
def test_the_tuple_of_one_anchor_is_iid_from_q(setting):
    """One anchor, k = 40000: Pearson's chi-square of the marginal counts against q_i, and of the joint counts
    of consecutive draws (m_{2l-1}, m_{2l}) against q_i (x) q_i (independence within the tuple). SCL draws
    uniformly from N(i) (b = 0: a direct pick), HSCL by the inverse-CDF search."""
    gen = torch.Generator().manual_seed(2)
    z = torch.nn.functional.normalize(torch.randn(8, 3, generator=gen, dtype=torch.float64), dim=1)
    labels = torch.tensor([0, 0, 1, 1, 2, 2, 3, 3])  # anchor 0: one positive (1), six negatives
    k = 40000
    pairs = _anchor(z, labels, setting, seed=9, beta=1.0, tau=1.0, num_negatives=k)
    assert pairs.negatives is not None
    q = tilt_matrix(z, labels, setting, 1.0)[0]
    support = torch.nonzero(q).reshape(-1)
    drawn = pairs.negatives[pairs.anchors == 0][0]
    counts = torch.bincount(drawn, minlength=8).double()
    assert float(counts[q == 0].sum()) == 0
    expected = k * q[support]
    chi2 = float(((counts[support] - expected) ** 2 / expected).sum())
    assert chi2 < _wilson_hilferty(support.numel() - 1), chi2
    position = torch.full((8,), -1, dtype=torch.long)
    position[support] = torch.arange(support.numel())
    first, second = position[drawn[0::2]], position[drawn[1::2]]
    n = support.numel()
    joint = torch.bincount(first * n + second, minlength=n * n).double()
    expected_joint = (k // 2) * torch.outer(q[support], q[support]).reshape(-1)
    chi2_joint = float(((joint - expected_joint) ** 2 / expected_joint).sum())
    assert chi2_joint < _wilson_hilferty(n * n - 1), chi2_joint


@pytest.mark.parametrize("setting", ["hscl", "hucl"])
def test_triplet_expectation_is_the_closed_form(setting):
    """E over the draws of l_ij is sum_m q_im max(0, S_im - S_ij + margin) for every k (docs/theory.md
    section 7), the same as with draws="pair": the average of `reps` independent evaluations is within 6
    standard errors, sd^2 = Var_q(h) / (k reps) from the exact law (a false failure over P pairs has p < 1e-7)."""
    z, labels = random_batch(7, size=9)
    beta, k, reps = 1.3, 4, 300
    q = tilt_matrix(z, labels, setting, beta)
    sim = z @ z.T
    gen = torch.Generator().manual_seed(17)
    values = torch.stack([
        batch_loss(z, labels, setting, beta=beta, tau=1.0, num_negatives=k, estimator="sampled", psi="triplet",
                   generator=gen, reduction="none", draws="anchor") for _ in range(reps)])
    pairs = batch_loss_pairs(z, labels, setting, beta=beta, num_negatives=k, estimator="sampled", psi="triplet",
                             generator=gen, draws="anchor")
    for p, (i, j) in enumerate(zip(pairs.anchors.tolist(), pairs.positives.tolist())):
        hinge = (sim[i] - sim[i, j] + 1.0).clamp_min(0.0)
        mean = float(q[i] @ hinge)
        sd = math.sqrt(float(q[i] @ (hinge - mean) ** 2) / (k * reps))
        np.testing.assert_allclose(float(values[:, p].mean()), mean, atol=6 * sd + 1e-12)


@pytest.mark.parametrize("k", [4, "batch"])
def test_draws_depend_on_the_generator_only(k):
    """Same generator state: same draws and values for every block and chunk size (the stream is consumed
    anchor after anchor, k_max uniforms each, canonical order); another state gives other draws."""
    z, labels = random_batch(10, size=13)
    spec = LossSpec(supervised=True, b=2.0, tau=0.5, k=None if k == "batch" else k)
    structure = pair_structure(labels, supervised=True)
    for psi_name in PSI_NAMES:
        psi = make_psi(psi_name, tau=0.5)

        def run(seed, block, chunk=1 << 18, negatives=True, psi=psi):
            return sampled_values(z, labels, spec, structure, psi, generator=torch.Generator().manual_seed(seed),
                                  block_size=block, max_draws=chunk, return_negatives=negatives, draws="anchor")

        ref = run(1, 13)
        for block, chunk in ((1, 1), (4, 7), (5, 1 << 18), (100, 3)):
            got = run(1, block, chunk)
            assert ref[1] is not None and got[1] is not None
            assert torch.equal(got[1], ref[1])
            # the similarities of other row blocks: a dot product of d = 3 terms, <= 4 eps each; the values
            # are 1-Lipschitz in S / tau (log-sum-exp, softplus) or 1-Lipschitz in S (triplet)
            torch.testing.assert_close(got[0], ref[0], rtol=0, atol=4 * 2 * 3 * EPS64 / 0.5)
        other = run(2, 13)
        assert other[1] is not None and not torch.equal(other[1], ref[1])
        quiet = run(1, 13, negatives=False)
        assert quiet[1] is None and torch.equal(quiet[0], ref[0])


def test_dense_and_blocked_backends_give_the_same_draws():
    z, labels = random_batch(12, size=11)
    out = {backend: _anchor(z, labels, "hucl", seed=4, beta=1.0, tau=0.5, num_negatives=6, psi="infonce",
                            backend=backend, block_size=3)
           for backend in ("dense", "blocked")}
    assert out["dense"].negatives is not None and out["blocked"].negatives is not None
    assert torch.equal(out["dense"].negatives, out["blocked"].negatives)
    torch.testing.assert_close(out["dense"].values, out["blocked"].values, rtol=0, atol=4 * 2 * 3 * EPS64 / 0.5)


def test_batch_loss_reduces_the_pair_values():
    z, labels = random_batch(13)
    pairs = _anchor(z, labels, "scl", seed=8, tau=0.5, num_negatives=7, psi="infonce-mean")
    cases: tuple[tuple[Reduction, torch.Tensor], ...] = (
        ("none", pairs.values), ("sum", pairs.values.sum()), ("mean", pairs.values.mean()))
    for reduction, want in cases:
        got = batch_loss(z, labels, "scl", tau=0.5, num_negatives=7, estimator="sampled", psi="infonce-mean",
                         generator=torch.Generator().manual_seed(8), reduction=reduction, draws="anchor")
        assert torch.equal(got, want), reduction


@pytest.mark.parametrize("setting", ["scl", "hucl"])
@pytest.mark.parametrize("psi_name", ["infonce", "infonce-mean", "triplet", "custom"])
def test_gradcheck_with_reseeded_generator(setting, psi_name):
    """The draws are fixed by reseeding, so the loss is smooth in z (the hinge away from its kinks here)."""
    z, labels = random_batch(8, size=7, dim=3)
    x = (z * 0.9).requires_grad_()
    psi = custom_psi(lambda t: (t.exp() + 1).log().sum(-1), name="softplus-sum") if psi_name == "custom" else psi_name
    for tau in (0.7, 0.05):
        def f(v, tau=tau):  # bound now (ruff B023); gradcheck calls f(x)
            return batch_loss(v, labels, setting, beta=1.1, tau=tau, num_negatives=4, estimator="sampled", psi=psi,
                              generator=torch.Generator().manual_seed(21), reduction="sum", draws="anchor")
        assert torch.autograd.gradcheck(f, (x,), eps=1e-6, atol=1e-6 * max(1.0, 1 / tau))


def test_float32_corner_is_finite():
    """float32, tau = 1e-3, beta = 1e4 (the corner of the validated range): finite loss and gradient."""
    z, labels = random_batch(11, size=32, dim=5)
    x = z.float().requires_grad_()
    for psi in PSI_NAMES:
        loss = batch_loss(x, labels, "hucl", beta=1e4, tau=1e-3, num_negatives=8, estimator="sampled", psi=psi,
                          generator=torch.Generator().manual_seed(0), draws="anchor")
        (grad,) = torch.autograd.grad(loss, x)
        assert torch.isfinite(loss) and bool(torch.isfinite(grad).all()), psi


def test_draws_is_validated():
    z, labels = random_batch(0)
    gen = torch.Generator().manual_seed(0)
    accepted = ", ".join(map(repr, SAMPLED_DRAWS))
    for call in (batch_loss, batch_loss_pairs):
        with pytest.raises(ValueError, match=rf"^draws must be one of {accepted}, got 'tuple'$"):
            call(z, labels, "scl", estimator="sampled", generator=gen, draws="tuple")  # type: ignore[arg-type]
        with pytest.raises(ValueError, match=r"^draws='anchor' applies to estimator='sampled' only"):
            call(z, labels, "scl", draws="anchor")


@pytest.mark.parametrize(("supervised", "convention"), [(True, "theory"), (False, "theory"), (False, "authors"),
                                                         (True, "authors")])
@pytest.mark.parametrize("udtype", [torch.float32, torch.float64])
def test_uniform_draws_by_layout_equal_the_table_of_allowed_columns(supervised, convention, udtype):
    """b = 0: the draws through the exclusion layout (one table per class; j + [j >= i] when only i is excluded;
    j when nothing is) equal those of the [A, B] table of allowed columns, from the same uniforms, bit for bit;
    a subset of rows (anchors with a pair) keeps its own layout."""
    from ncgeom.losses.kernels.draws import excluded_columns, exclusion_layout, uniform_draws

    _, labels = random_batch(5, size=17)
    spec = LossSpec(supervised=supervised, b=0.0, tau=0.5, k=6, convention=convention)
    rows = torch.tensor([0, 2, 3, 7, 11, 16])
    excluded = excluded_columns(labels, spec, 0, labels.numel())[rows]
    layout = exclusion_layout(labels, spec, rows)
    assert layout[0] == ("classes" if supervised else "none" if spec.anchor_negative else "self")
    for seed in range(3):
        table = uniform_draws(excluded, 40, udtype, torch.Generator().manual_seed(seed))
        fast = uniform_draws(excluded, 40, udtype, torch.Generator().manual_seed(seed), layout=layout)
        assert torch.equal(fast, table)
        assert not bool(excluded.gather(1, fast).any())


def test_sorted_search_gives_the_same_draws_in_ascending_order():
    """The inverse-CDF search in the order of the sorted uniforms (psi symmetric in the draws): per row the same
    multiset of columns, ascending, and with keep_order the draws as drawn, equal to the plain search."""
    from ncgeom.losses.kernels.draws import anchor_cdf, excluded_columns, inverse_cdf_draws

    z, labels = random_batch(6, size=19)
    spec = LossSpec(supervised=False, b=2.0, tau=0.5, k=6)
    cdf = anchor_cdf(z @ z.T, excluded_columns(labels, spec, 0, 19), 2.0)
    for udtype in (torch.float32, torch.float64):
        plain, _ = inverse_cdf_draws(cdf, 50, udtype, torch.Generator().manual_seed(1))
        ascending, kept = inverse_cdf_draws(cdf, 50, udtype, torch.Generator().manual_seed(1), sorted_search=True)
        assert kept is not None and torch.equal(kept, plain)
        assert torch.equal(ascending, plain.sort(dim=1).values)
        alone, none = inverse_cdf_draws(cdf, 50, udtype, torch.Generator().manual_seed(1), sorted_search=True,
                                        keep_order=False)
        assert none is None and torch.equal(alone, ascending)
