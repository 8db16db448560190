"""batch_loss (docs/theory.md section 7): dense and blocked backends against a naive float64 loop reference.

Order of trust: (1) a python loop over i, j, m of the section 7 formula; (2) agreement of backends and of
the NC closed form (ncgeom.theory.batch_nc_value); (3) properties (beta = 0, sampled expectation);
(4) gradcheck in float64.
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np
import pytest
import torch

from ncgeom.geometry import simplex_etf
from ncgeom.losses import batch_loss, batch_loss_pairs, infonce, infonce_mean, select_backend, triplet
from ncgeom.vocabulary import SETTINGS, Reduction, Setting

BACKENDS = ("dense", "blocked")
RTOL = 1e-10  # float64: the loop and the kernels differ only by summation order (~B * eps)
EPS64 = torch.finfo(torch.float64).eps


def _batch(seed: int, size: int = 11, dim: int = 4, mode: str = "sphere", dtype=torch.float64):
    """Random batch; labels from {0, 2, 5, 7, 9} (classes 1, 3, 4, 6, 8 absent) with a singleton class."""
    gen = torch.Generator().manual_seed(seed)
    z = torch.randn(size, dim, generator=gen, dtype=torch.float64)
    norms = z.norm(dim=1, keepdim=True)
    z = z / norms if mode == "sphere" else z / norms.clamp_min(1.0) * 0.9 if mode == "ball" else z
    labels = torch.tensor([0, 2, 5, 7, 9], dtype=torch.long)[torch.randint(0, 4, (size,), generator=gen)]
    labels[-1] = 9  # class 9 is a singleton: its anchor has no positive
    labels[labels == 9] = 7
    labels[-1] = 9
    return z.to(dtype), labels


def naive_pairs(z, labels, setting, *, beta, tau, k):
    """Loop reference of section 7 (weighted estimator): dict (i, j) -> l_ij, math.fsum in float64."""
    zz = z.detach().double().tolist()
    y = labels.tolist()
    size = len(y)
    sim = [[math.fsum(a * b for a, b in zip(zz[i], zz[m])) for m in range(size)] for i in range(size)]
    b = beta if setting in ("hscl", "hucl") else 0.0
    out = {}
    for i in range(size):
        pos = [j for j in range(size) if j != i and y[j] == y[i]]
        neg = [m for m in range(size) if (y[m] != y[i] if setting in ("scl", "hscl") else m != i)]
        if not pos or not neg:
            continue
        w = [math.exp(b * sim[i][m]) for m in neg]
        q = [x / math.fsum(w) for x in w]
        kk = len(neg) if k == "batch" else k
        for j in pos:
            mass = math.fsum(q[t] * math.exp((sim[i][m] - sim[i][j]) / tau) for t, m in enumerate(neg))
            out[(i, j)] = math.log1p(kk * mass)
    return out


def naive_psi(name, t, *, tau, margin=1.0):
    if name == "infonce":
        return math.log1p(math.fsum(math.exp(x / tau) for x in t))
    if name == "infonce-mean":
        return math.log1p(math.fsum(math.exp(x / tau) for x in t) / len(t))
    return math.fsum(max(0.0, x + margin) for x in t) / len(t)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("setting", SETTINGS)
@pytest.mark.parametrize("k", [1, 3, "batch"])
def test_weighted_matches_naive_loop(backend, setting, k):
    for seed, (beta, tau, mode) in enumerate([(2.0, 0.5, "sphere"), (0.7, 1.3, "ball"), (5.0, 0.2, "none")]):
        z, labels = _batch(seed, mode=mode)
        ref = naive_pairs(z, labels, setting, beta=beta, tau=tau, k=k)
        pairs = batch_loss_pairs(z, labels, setting, beta=beta, tau=tau, num_negatives=k, backend=backend,
                                 block_size=4)
        assert pairs.backend == backend and pairs.negatives is None
        keys = list(zip(pairs.anchors.tolist(), pairs.positives.tolist()))
        assert keys == sorted(ref), "pairs must be all (i, j), j in P(i), in row-major order"
        np.testing.assert_allclose(pairs.values.detach().numpy(), [ref[key] for key in keys], rtol=RTOL)
        none = batch_loss(z, labels, setting, beta=beta, tau=tau, num_negatives=k, backend=backend,
                          reduction="none", block_size=4)
        torch.testing.assert_close(none, pairs.values, rtol=RTOL, atol=0)
        mean = batch_loss(z, labels, setting, beta=beta, tau=tau, num_negatives=k, backend=backend, block_size=4)
        np.testing.assert_allclose(float(mean), math.fsum(ref.values()) / len(ref), rtol=RTOL)
        total = batch_loss(z, labels, setting, beta=beta, tau=tau, num_negatives=k, backend=backend, reduction="sum")
        np.testing.assert_allclose(float(total), math.fsum(ref.values()), rtol=RTOL)


@pytest.mark.parametrize("setting", SETTINGS)
@pytest.mark.parametrize("psi_name", ["infonce", "infonce-mean", "triplet"])
@pytest.mark.parametrize("backend", BACKENDS)
def test_sampled_is_psi_of_the_drawn_set(setting, psi_name, backend):
    z, labels = _batch(3)
    tau, beta = 0.5, 2.0
    for k in (2, "batch"):
        pairs = batch_loss_pairs(z, labels, setting, beta=beta, tau=tau, num_negatives=k, estimator="sampled",
                                 psi=psi_name, generator=torch.Generator().manual_seed(5), backend=backend,
                                 block_size=3)
        y = labels.tolist()
        sim = (z @ z.T).tolist()
        ref = naive_pairs(z, labels, setting, beta=beta, tau=tau, k=1)
        assert list(zip(pairs.anchors.tolist(), pairs.positives.tolist())) == sorted(ref)
        assert pairs.negatives is not None  # the sampled estimator records its draws
        for p, (i, j) in enumerate(zip(pairs.anchors.tolist(), pairs.positives.tolist())):
            drawn = [m for m in pairs.negatives[p].tolist() if m >= 0]
            size_n = sum(1 for m in range(len(y)) if (y[m] != y[i] if setting in ("scl", "hscl") else m != i))
            assert len(drawn) == (size_n if k == "batch" else k)
            assert all((y[m] != y[i]) if setting in ("scl", "hscl") else m != i for m in drawn)
            expected = naive_psi(psi_name, [sim[i][m] - sim[i][j] for m in drawn], tau=tau)
            np.testing.assert_allclose(float(pairs.values[p]), expected, rtol=RTOL, atol=4 * EPS64)
        again = batch_loss_pairs(z, labels, setting, beta=beta, tau=tau, num_negatives=k, estimator="sampled",
                                 psi=psi_name, generator=torch.Generator().manual_seed(5), backend=backend,
                                 block_size=3)
        assert again.negatives is not None
        assert torch.equal(again.negatives, pairs.negatives) and torch.equal(again.values, pairs.values)


@pytest.mark.parametrize("setting", SETTINGS)
def test_sampled_mean_matches_its_expectation(setting):
    """k = 1: E[l_ij] = sum_m q_im psi(S_im - S_ij); triplet, k = 4: the same (psi linear in each term)."""
    z, labels = _batch(4, size=8)
    beta, tau, reps = 1.5, 0.7, 100
    gen = torch.Generator().manual_seed(11)
    y = labels.tolist()
    sim = (z @ z.T).tolist()
    b = beta if setting in ("hscl", "hucl") else 0.0
    for psi, k in ((infonce(tau=tau), 1), (triplet(margin=1.0), 4)):
        draws = torch.stack([
            batch_loss(z, labels, setting, beta=beta, tau=tau, num_negatives=k, estimator="sampled", psi=psi,
                       generator=gen, reduction="none", backend="dense") for _ in range(reps)])
        pairs = batch_loss_pairs(z, labels, setting, beta=beta, tau=tau, num_negatives=k, estimator="sampled",
                                 psi=psi, generator=gen)
        for p, (i, j) in enumerate(zip(pairs.anchors.tolist(), pairs.positives.tolist())):
            neg = [m for m in range(len(y)) if (y[m] != y[i] if setting in ("scl", "hscl") else m != i)]
            w = np.array([math.exp(b * sim[i][m]) for m in neg])
            q = w / w.sum()
            single = np.array([naive_psi(psi.name, [sim[i][m] - sim[i][j]], tau=tau) for m in neg])
            mean, var = float(q @ single), float(q @ (single - q @ single) ** 2) / k
            # CLT: the average of `reps` draws is within 5 standard errors (a false failure has p < 1e-6)
            np.testing.assert_allclose(float(draws[:, p].mean()), mean, atol=5 * math.sqrt(var / reps) + 1e-12)


def _grad_cases(setting):
    """detach_weights=False always; True only for b = 0 (SCL, UCL), where the detached gradient is the
    true gradient. For HSCL/HUCL the detached gradient is checked against frozen weights below."""
    return (False,) if setting in ("hscl", "hucl") else (True, False)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("setting", SETTINGS)
def test_gradcheck(backend, setting):
    z, labels = _batch(6, size=6, dim=2, mode="none")
    labels = torch.tensor([0, 0, 1, 1, 1, 4])
    z = (z * 0.8).requires_grad_()
    cases: tuple[tuple[Reduction, int | Literal["batch"]], ...] = (("mean", 2), ("none", "batch"))
    for detach in _grad_cases(setting):
        for reduction, k in cases:
            def f(x, k=k, detach=detach, reduction=reduction):  # bound now (ruff B023); gradcheck calls f(z)
                return batch_loss(x, labels, setting, beta=1.3, tau=0.6, num_negatives=k, detach_weights=detach,
                                  reduction=reduction, backend=backend, block_size=4)
            assert torch.autograd.gradcheck(f, (z,), eps=1e-6, atol=1e-7, fast_mode=True)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("setting", ["hscl", "hucl"])
def test_detached_gradient_is_gradient_with_frozen_weights(backend, setting):
    """detach_weights=True: the gradient of l_ij = log(1 + k sum_m q_im e^{(S_im - S_ij)/tau}) with q frozen."""
    z, labels = _batch(12, size=9, dim=3)
    beta, tau, k = 2.5, 0.4, 3
    frozen = z.clone()
    x = z.clone().requires_grad_()
    sim, sim0 = x @ x.T, frozen @ frozen.T
    y = labels.tolist()
    terms = []
    for i in range(len(y)):
        pos = [j for j in range(len(y)) if j != i and y[j] == y[i]]
        neg = [m for m in range(len(y)) if (y[m] != y[i] if setting == "hscl" else m != i)]
        if not pos or not neg:
            continue
        q = torch.softmax(beta * sim0[i, neg], 0)
        for j in pos:
            terms.append(torch.log1p(k * (q * torch.exp((sim[i, neg] - sim[i, j]) / tau)).sum()))
    (want,) = torch.autograd.grad(torch.stack(terms).mean(), x)
    x2 = z.clone().requires_grad_()
    loss = batch_loss(x2, labels, setting, beta=beta, tau=tau, num_negatives=k, backend=backend, block_size=4)
    (got,) = torch.autograd.grad(loss, x2)
    torch.testing.assert_close(got, want, rtol=RTOL, atol=10 * EPS64)


@pytest.mark.parametrize("backend", BACKENDS)
def test_gradient_through_weights_differs_only_in_gradient(backend):
    z, labels = _batch(7)
    z = z.requires_grad_()
    grads, vals = [], []
    for detach in (True, False):
        loss = batch_loss(z, labels, "hscl", beta=3.0, tau=0.5, detach_weights=detach, backend=backend)
        grads.append(torch.autograd.grad(loss, z)[0])
        vals.append(loss.detach())
    torch.testing.assert_close(vals[0], vals[1], rtol=RTOL, atol=0)
    assert float((grads[0] - grads[1]).abs().max()) > 1e-3


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("hard,plain", [("hscl", "scl"), ("hucl", "ucl")])
def test_beta_zero_reduces_hard_to_plain_exactly(backend, hard, plain):
    z, labels = _batch(8)
    for k in (1, "batch"):
        a = batch_loss_pairs(z, labels, hard, beta=0.0, tau=0.3, num_negatives=k, backend=backend).values
        b = batch_loss_pairs(z, labels, plain, beta=0.0, tau=0.3, num_negatives=k, backend=backend).values
        assert torch.equal(a, b)
    # and beta is ignored by the plain settings
    a = batch_loss(z, labels, plain, beta=7.0, tau=0.3, backend=backend)
    assert torch.equal(a, batch_loss(z, labels, plain, beta=0.0, tau=0.3, backend=backend))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("setting", SETTINGS)
@pytest.mark.parametrize("k", [1, 5, "batch"])
def test_nc_batch_equals_closed_form(backend, setting, k):
    from ncgeom.theory import batch_nc_value

    num_classes, counts, tau, beta = 5, [3, 1, 4, 2, 0], 0.4, 2.0
    etf = torch.from_numpy(simplex_etf(num_classes, 6, rng=np.random.default_rng(0)))
    labels = torch.repeat_interleave(torch.arange(num_classes), torch.tensor(counts))
    z = etf[labels]
    got = batch_loss(z, labels, setting, beta=beta, tau=tau, num_negatives=k, backend=backend)
    want = batch_nc_value(setting, class_counts=counts, num_negatives=k, beta=beta, tau=tau)
    np.testing.assert_allclose(float(got), want, rtol=1e-12)
    if setting in ("scl", "hscl") and k != "batch":  # section 7: l = log(1 + k e^{-C/((C-1) tau)})
        np.testing.assert_allclose(float(got), math.log1p(k * math.exp(-num_classes / ((num_classes - 1) * tau))),
                                   rtol=1e-12)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("setting", SETTINGS)
@pytest.mark.parametrize("mode", ["sphere", "ball", "nc"])
def test_float32_extremes_are_finite(backend, setting, mode):
    """beta = 100, tau = 0.01 and the opposite corner, float32: finite loss and gradient."""
    if mode == "nc":
        labels = torch.arange(64) % 8
        z = torch.from_numpy(simplex_etf(8, 16, rng=np.random.default_rng(1)))[labels].float()
    else:
        z, labels = _batch(9, size=64, dim=16, mode=mode, dtype=torch.float32)
    for beta, tau in ((100.0, 0.01), (0.0, 0.01), (100.0, 10.0), (0.0, 10.0)):
        for detach in (True, False):
            x = z.clone().requires_grad_()
            loss = batch_loss(x, labels, setting, beta=beta, tau=tau, num_negatives="batch", detach_weights=detach,
                              backend=backend, block_size=16)
            (grad,) = torch.autograd.grad(loss, x)
            assert torch.isfinite(loss) and bool(torch.isfinite(grad).all()), (beta, tau, detach)
            ref = batch_loss(z.double(), labels, setting, beta=beta, tau=tau, num_negatives="batch",
                             backend="dense")
            # float32 similarities carry ~eps32 error, amplified by (b + 1/tau) <= 200 inside the exponent
            np.testing.assert_allclose(float(loss.detach()), float(ref), rtol=1e-3, atol=1e-4)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("estimator", ["weighted", "sampled"])
def test_no_pair_gives_attached_zero(backend, estimator):
    z = torch.randn(4, 3, dtype=torch.float64, requires_grad=True)
    cases: tuple[tuple[torch.Tensor, Setting], ...] = (
        (torch.arange(4), "scl"), (torch.zeros(4, dtype=torch.long), "hscl"), (torch.arange(4), "ucl"))
    for labels, setting in cases:
        loss = batch_loss(z, labels, setting, estimator=estimator, generator=torch.Generator(), backend=backend)
        assert loss.requires_grad and float(loss.detach()) == 0.0
        (grad,) = torch.autograd.grad(loss, z)
        assert torch.equal(grad, torch.zeros_like(z))
        assert batch_loss_pairs(z, labels, setting, backend=backend).num_pairs == 0
    one = torch.randn(1, 3, dtype=torch.float64, requires_grad=True)
    assert float(batch_loss(one, torch.tensor([0]), "ucl", backend=backend).detach()) == 0.0


def test_block_size_does_not_change_the_value():
    z, labels = _batch(10, size=13)
    ref = batch_loss(z, labels, "hucl", beta=2.0, tau=0.5, reduction="none", backend="dense")
    for block in (1, 2, 5, 13, 100):
        got = batch_loss(z, labels, "hucl", beta=2.0, tau=0.5, reduction="none", backend="blocked", block_size=block)
        torch.testing.assert_close(got, ref, rtol=RTOL, atol=0)


def test_auto_rule():
    z = torch.zeros(8, 2)
    assert select_backend(z, estimator="weighted", reduction="mean", detach_weights=True) == "blocked"
    assert select_backend(z, estimator="weighted", reduction="mean", detach_weights=False) == "dense"
    assert select_backend(torch.zeros(5000, 2), estimator="weighted", reduction="mean", detach_weights=False) == "blocked"
    assert select_backend(z, estimator="sampled", reduction="mean", detach_weights=True) == "dense"
    with pytest.raises(ValueError, match="backend='triton'"):
        select_backend(z, estimator="sampled", reduction="mean", detach_weights=True, requested="triton")


@pytest.mark.parametrize("kwargs,name", [
    ({"setting": "scl2"}, "setting"), ({"beta": -1.0}, "beta"), ({"beta": float("nan")}, "beta"),
    ({"tau": 0.0}, "tau"), ({"num_negatives": 0}, "num_negatives"), ({"num_negatives": "all"}, "num_negatives"),
    ({"num_negatives": 1.5}, "num_negatives"), ({"estimator": "exact"}, "estimator"), ({"psi": "hinge"}, "psi"),
    ({"psi": "triplet"}, "psi"), ({"psi": infonce_mean(tau=1.0)}, "psi"), ({"psi": infonce(tau=2.0)}, "psi"),
    ({"detach_weights": 1}, "detach_weights"), ({"reduction": "max"}, "reduction"),
    ({"backend": "cuda"}, "backend"), ({"block_size": 0}, "block_size"), ({"generator": 3}, "generator"),
    ({"estimator": "sampled"}, "generator"), ({"estimator": "sampled", "generator": torch.Generator(),
                                              "detach_weights": False}, "detach_weights"),
])
def test_invalid_arguments_name_themselves(kwargs, name):
    z, labels = torch.randn(4, 3), torch.tensor([0, 0, 1, 1])
    args = {"setting": "scl", **kwargs}
    setting = args.pop("setting")
    with pytest.raises(ValueError, match=name):
        batch_loss(z, labels, setting, **args)


@pytest.mark.parametrize("z,labels,name", [
    (np.zeros((4, 3)), torch.tensor([0, 0, 1, 1]), "z"), (torch.zeros(4), torch.tensor([0, 0, 1, 1]), "z"),
    (torch.zeros(4, 3, dtype=torch.long), torch.tensor([0, 0, 1, 1]), "z"),
    (torch.full((4, 3), float("nan")), torch.tensor([0, 0, 1, 1]), "z"),
    (torch.zeros(4, 3), torch.tensor([0, 0, 1]), "labels"), (torch.zeros(4, 3), torch.zeros(4), "labels"),
    (torch.zeros(4, 3), [0, 0, 1, 1], "labels"),
])
def test_invalid_inputs_name_themselves(z, labels, name):
    with pytest.raises(ValueError, match=name):
        batch_loss(z, labels, "scl")


# --- properties (hypothesis) -------------------------------------------------------------------------

from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@st.composite
def batches(draw):
    size = draw(st.integers(2, 10))
    seed = draw(st.integers(0, 2**16))
    labels = torch.tensor(draw(st.lists(st.integers(0, 4), min_size=size, max_size=size)))
    gen = torch.Generator().manual_seed(seed)
    z = torch.nn.functional.normalize(torch.randn(size, 3, generator=gen, dtype=torch.float64), dim=1)
    return z, labels, seed


@given(batches(), st.sampled_from(SETTINGS), st.floats(0.0, 5.0), st.sampled_from([1, 4, "batch"]))
def test_invariances(batch, setting, beta, k):
    """Rotating z, permuting the batch, relabeling the classes: same pair values (permuted)."""
    z, labels, seed = batch
    kwargs = dict(beta=beta, tau=0.5, num_negatives=k, backend="blocked", block_size=3)
    base = batch_loss_pairs(z, labels, setting, **kwargs)
    table = {(i, j): v for i, j, v in zip(base.anchors.tolist(), base.positives.tolist(), base.values.tolist())}
    rot = torch.linalg.qr(torch.randn(3, 3, generator=torch.Generator().manual_seed(seed), dtype=torch.float64))[0]
    perm = torch.randperm(z.shape[0], generator=torch.Generator().manual_seed(seed + 1))
    relabel = torch.tensor([7, -2, 30, 4, 11])[labels[perm]]
    moved = batch_loss_pairs(z[perm] @ rot, relabel, setting, **kwargs)
    got = {(int(perm[i]), int(perm[j])): v for i, j, v in
           zip(moved.anchors.tolist(), moved.positives.tolist(), moved.values.tolist())}
    assert got.keys() == table.keys()
    np.testing.assert_allclose([got[key] for key in table], list(table.values()), rtol=1e-12, atol=1e-15)


@given(batches(), st.sampled_from([("hscl", "scl"), ("hucl", "ucl")]), st.floats(0.0, 10.0))
def test_hard_is_at_least_plain_per_pair(batch, settings, beta):
    """Batch form of the Harris bound (docs/theory.md section 4, Theorem 1): tilting q_i towards larger S_im
    raises E_q[e^{(S_im - S_ij)/tau}] (Chebyshev's sum inequality), so l_ij(hard) >= l_ij(plain)."""
    z, labels, _ = batch
    hard, plain = settings
    a = batch_loss(z, labels, hard, beta=beta, tau=0.5, reduction="none", backend="dense")
    b = batch_loss(z, labels, plain, tau=0.5, reduction="none", backend="dense")
    assert bool((a >= b - 8 * EPS64 * b.abs().clamp_min(1.0)).all())
