"""The authors' convention of the batch loss (docs/conventions.md, section 2.4; docs/theory.md, section 7).

convention="authors" reproduces rjiang03/HCL's ``nce_supervised_easy`` / ``nce_supervised_hard``
(main/SCL and main/UCL/train_mean_classifier.py): the anchor is its own positive, P(i) = {j : y_j = y_i},
and the UCL/HUCL negatives range over the whole batch, N(i) = {m}, the anchor included. Trust, in order:
(1) a naive float64 loop of that description against both backends (weighted estimator) and against the
sampled estimator on its own draws; (2) a re-implementation of the authors' function, fed the same draws;
(3) the law of the draws and the expectation over them; (4) gradcheck in float64; (5) properties.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from ncgeom.losses import batch_loss, batch_loss_pairs, select_backend
from ncgeom.runs.config import Config, config_from_dict
from ncgeom.vocabulary import CONVENTIONS, SETTINGS, effective_beta, is_supervised

EPS64 = torch.finfo(torch.float64).eps
BACKENDS = ("dense", "blocked")


def _batch(seed: int, size: int = 12, dim: int = 3, classes: int = 3):
    gen = torch.Generator().manual_seed(seed)
    z = torch.nn.functional.normalize(torch.randn(size, dim, generator=gen, dtype=torch.float64), dim=1)
    labels = torch.randint(0, classes, (size,), generator=gen)
    labels[-1] = 7  # a singleton class: a pair (i, i) under "authors", none under "theory"
    return z, labels


def _sets(labels: list[int], i: int, setting: str, convention: str) -> tuple[list[int], list[int]]:
    """P(i), N(i) of the description (docs/conventions.md, section 2.4), as index lists."""
    size = len(labels)
    authors = convention == "authors"
    pos = [j for j in range(size) if labels[j] == labels[i] and (authors or j != i)]
    if is_supervised(setting):
        neg = [m for m in range(size) if labels[m] != labels[i]]
    else:
        neg = [m for m in range(size) if authors or m != i]
    return pos, neg


def _tilt(sim, i: int, neg: list[int], b: float) -> list[float]:
    top = max(b * sim[i][m] for m in neg)
    w = [math.exp(b * sim[i][m] - top) for m in neg]
    total = math.fsum(w)
    return [x / total for x in w]


def _naive_weighted(z, labels, setting, *, beta, tau, k, convention):
    """Per-pair l_ij = log(1 + k sum_{m in N(i)} q_im e^{(S_im - S_ij)/tau}), canonical order, float64 loop."""
    sim = (z @ z.T).tolist()
    y = labels.tolist()
    b = effective_beta(setting, beta)
    out = []
    for i in range(len(y)):
        pos, neg = _sets(y, i, setting, convention)
        if not pos or not neg:
            continue
        q = _tilt(sim, i, neg, b)
        kk = len(neg) if k == "batch" else k
        for j in pos:
            inner = kk * math.fsum(qm * math.exp((sim[i][m] - sim[i][j]) / tau) for qm, m in zip(q, neg))
            out.append(math.log1p(inner))
    return out


def _rtol(size: int, beta: float, tau: float) -> float:
    # float64: each exponent (b + 1/tau) S_im (|S| <= 1) carries a relative rounding eps, so the log-sum-exp
    # over <= B terms is off by ~ B eps (b + 1/tau) absolute, relative to values of order 1; factor 8 for the
    # softplus and the sum over pairs
    return 8 * size * EPS64 * (1 + effective_beta("hscl", beta) + 1 / tau)


@pytest.mark.parametrize("setting", SETTINGS)
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("convention", CONVENTIONS)
def test_weighted_estimator_is_the_naive_loop(setting, backend, convention):
    """Both backends, both conventions, k in {1, 3, batch}, a block size that cuts classes apart."""
    z, labels = _batch(1)
    for beta, tau, k in ((0.0, 1.0, 1), (2.5, 0.5, 3), (5.0, 0.7, "batch")):
        want = _naive_weighted(z, labels, setting, beta=beta, tau=tau, k=k, convention=convention)
        pairs = batch_loss_pairs(z, labels, setting, beta=beta, tau=tau, num_negatives=k, backend=backend,
                                 block_size=5, convention=convention)
        rtol = _rtol(len(labels), beta, tau)
        np.testing.assert_allclose(pairs.values.numpy(), want, rtol=rtol, atol=0)
        mean = batch_loss(z, labels, setting, beta=beta, tau=tau, num_negatives=k, backend=backend, block_size=5,
                          convention=convention)
        np.testing.assert_allclose(float(mean), math.fsum(want) / len(want), rtol=rtol, atol=0)


@pytest.mark.parametrize("setting", SETTINGS)
def test_pairs_of_the_authors_convention(setting):
    """(i, i) is a pair, in canonical order (anchor ascending, then positive ascending), for every backend."""
    z, labels = _batch(2)
    y = labels.tolist()
    want = [(i, j) for i in range(len(y)) for j in _sets(y, i, setting, "authors")[0] if _sets(y, i, setting, "authors")[1]]
    for backend in BACKENDS:
        pairs = batch_loss_pairs(z, labels, setting, beta=1.0, backend=backend, convention="authors")
        assert list(zip(pairs.anchors.tolist(), pairs.positives.tolist())) == want
        assert pairs.backend == backend


def _authors_nce(sim, labels: list[int], draws: list[list[int]]) -> float:
    """rjiang03/HCL's nce_supervised_easy/hard (temperature 1, the mean of K draws), re-implemented from
    their code with the draws given instead of np.random.choice: for anchor i, every j with y_j = y_i (i
    included) gives -log(e^{S_ij} / (e^{S_ij} + mean_r e^{S_{i m_r}})); the loss is the sum over the pairs
    divided by their number (pos_num). ``draws`` lists the K negatives of each pair in that order."""
    total, pos_num, p = [], 0, 0
    for i in range(len(labels)):
        ind = [j for j in range(len(labels)) if labels[j] == labels[i]]
        for j in ind:
            neg_mean = math.fsum(math.exp(sim[i][m]) for m in draws[p]) / len(draws[p])
            total.append(-math.log(math.exp(sim[i][j]) / (math.exp(sim[i][j]) + neg_mean)))
            p += 1
        pos_num += len(ind)
    return math.fsum(total) / pos_num


@pytest.mark.parametrize("setting", SETTINGS)
@pytest.mark.parametrize("backend", BACKENDS)
def test_sampled_estimator_is_the_authors_function_on_its_draws(setting, backend):
    """psi = infonce-mean, tau = 1, K draws: batch_loss equals the authors' loss fed the same draws, and each
    per-pair value equals the naive psi_k on its drawn negatives; the draws lie in N(i) (anchor included for
    UCL/HUCL). The batch has no anchor without negatives (the authors' code would fail on one)."""
    z, labels = _batch(3, size=10)
    z = z * torch.linspace(0.5, 1.0, 10, dtype=torch.float64)[:, None]  # inside the ball, as their clipping
    sim = (z @ z.T).tolist()
    y = labels.tolist()
    k = 16
    pairs = batch_loss_pairs(z, labels, setting, beta=5.0, tau=1.0, num_negatives=k, estimator="sampled",
                             psi="infonce-mean", generator=torch.Generator().manual_seed(4), backend=backend,
                             block_size=3, convention="authors")
    loss = batch_loss(z, labels, setting, beta=5.0, tau=1.0, num_negatives=k, estimator="sampled",
                      psi="infonce-mean", generator=torch.Generator().manual_seed(4), backend=backend, block_size=3,
                      convention="authors")
    assert pairs.negatives is not None
    draws = pairs.negatives.tolist()
    for i, drawn in zip(pairs.anchors.tolist(), draws):
        assert set(drawn) <= set(_sets(y, i, setting, "authors")[1])
    rtol = 8 * k * EPS64 * 3  # a mean of K exponentials of |S| <= 1, inside log1p
    np.testing.assert_allclose(float(loss), _authors_nce(sim, y, draws), rtol=rtol, atol=0)
    for p, (i, j) in enumerate(zip(pairs.anchors.tolist(), pairs.positives.tolist())):
        want = math.log1p(math.fsum(math.exp(sim[i][m] - sim[i][j]) for m in draws[p]) / k)
        np.testing.assert_allclose(float(pairs.values[p]), want, rtol=rtol, atol=0)


def test_sampled_draws_do_not_depend_on_the_backend():
    """The same generator state gives the same draws on the dense and blocked paths (the stream is consumed
    pair after pair), so the values agree to the summation order."""
    z, labels = _batch(5)
    got = [batch_loss_pairs(z, labels, "hucl", beta=2.0, tau=0.5, num_negatives=6, estimator="sampled",
                            generator=torch.Generator().manual_seed(8), backend=b, block_size=4, convention="authors")
           for b in BACKENDS]
    assert got[0].negatives is not None and got[1].negatives is not None
    assert torch.equal(got[0].negatives, got[1].negatives)
    torch.testing.assert_close(got[0].values, got[1].values, rtol=4 * EPS64, atol=0)


@pytest.mark.parametrize("setting", SETTINGS)
def test_drawn_frequencies_match_the_authors_law(setting):
    """Per anchor, the count of each negative is Binomial(draws, q_im), q over N(i) of the authors' convention
    (the anchor itself has mass e^{b S_ii} / sum for UCL/HUCL)."""
    z, labels = _batch(6, size=10)
    beta, k = 2.0, 400
    y = labels.tolist()
    sim = (z @ z.T).tolist()
    pairs = batch_loss_pairs(z, labels, setting, beta=beta, tau=0.5, num_negatives=k, estimator="sampled",
                             generator=torch.Generator().manual_seed(3), convention="authors")
    assert pairs.negatives is not None
    for i in torch.unique(pairs.anchors).tolist():
        _, neg = _sets(y, i, setting, "authors")
        q = np.zeros(len(y))
        q[neg] = _tilt(sim, i, neg, effective_beta(setting, beta))
        drawn = pairs.negatives[pairs.anchors == i].reshape(-1)
        freq = torch.bincount(drawn, minlength=len(y)).double().numpy() / drawn.numel()
        se = np.sqrt(q * (1 - q) / drawn.numel())
        # 6 standard errors per cell (B cells, a false failure has p < 1e-7); zero-q cells must stay empty
        assert bool((freq[q == 0] == 0).all())
        np.testing.assert_array_less(np.abs(freq - q), 6 * se + 1e-12)
        if not is_supervised(setting):
            assert q[i] > 0 and freq[i] > 0  # the anchor is among its own negatives


def test_sampled_expectation_over_draws_is_the_exact_one():
    """HUCL, k = 1, psi = infonce: E[l_ij] = sum_{m in N(i)} q_im log(1 + e^{(S_im - S_ij)/tau}), N(i) the
    whole batch; the mean of `reps` independent evaluations is within 5 standard errors of it."""
    z, labels = _batch(7, size=6)
    tau, beta, reps = 0.8, 3.0, 400
    sim = (z @ z.T).tolist()
    y = labels.tolist()
    gen = torch.Generator().manual_seed(13)
    draws = torch.stack([batch_loss(z, labels, "hucl", beta=beta, tau=tau, estimator="sampled", generator=gen,
                                    reduction="none", convention="authors") for _ in range(reps)])
    pairs = batch_loss_pairs(z, labels, "hucl", beta=beta, tau=tau, convention="authors")
    for p, (i, j) in enumerate(zip(pairs.anchors.tolist(), pairs.positives.tolist())):
        _, neg = _sets(y, i, "hucl", "authors")
        q = np.array(_tilt(sim, i, neg, beta))
        vals = np.array([math.log1p(math.exp((sim[i][m] - sim[i][j]) / tau)) for m in neg])
        mean = float(q @ vals)
        std = math.sqrt(float(q @ (vals - mean) ** 2))
        # CLT: a false failure has p < 1e-6 per pair
        np.testing.assert_allclose(float(draws[:, p].mean()), mean, atol=5 * std / math.sqrt(reps) + 1e-12)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("estimator", ["weighted", "sampled"])
def test_all_labels_distinct_scl_is_positive_only_under_authors(backend, estimator):
    """SCL with all labels distinct: no pair under "theory" (a zero attached to the graph); under "authors"
    each anchor's pair (i, i) has S_ii = 1 and N(i) = all others: l_i = log(1 + k mean_{m != i} e^{(S_im - 1)/tau})
    (weighted, k = 1, b = 0), which is > 0."""
    z, labels = _batch(9, size=8)
    labels = torch.arange(8) * 3
    x = z.clone().requires_grad_()
    extra = {"generator": torch.Generator().manual_seed(1)} if estimator == "sampled" else {}
    theory = batch_loss(x, labels, "scl", tau=0.5, estimator=estimator, backend=backend, **extra)
    assert float(theory.detach()) == 0.0 and theory.requires_grad
    extra = {"generator": torch.Generator().manual_seed(1)} if estimator == "sampled" else {}
    authors = batch_loss(z, labels, "scl", tau=0.5, estimator=estimator, backend=backend, convention="authors",
                         **extra)
    assert float(authors) > 0.0
    if estimator == "weighted":
        sim = (z @ z.T).tolist()
        want = [math.log1p(math.fsum(math.exp((sim[i][m] - sim[i][i]) / 0.5) for m in range(8) if m != i) / 7)
                for i in range(8)]
        np.testing.assert_allclose(float(authors), math.fsum(want) / 8, rtol=_rtol(8, 0.0, 0.5), atol=0)


@pytest.mark.parametrize("setting", SETTINGS)
@pytest.mark.parametrize("backend", BACKENDS)
def test_gradcheck_weighted(setting, backend):
    """float64 gradcheck of the mean and of the per-pair values (the blocked backend's per-pair backward),
    gradient through the weights (detach_weights=False: the gradient of the value itself), inside the ball
    (||z|| < 1, so S_ii is not constant)."""
    z, labels = _batch(10, size=7, dim=3)
    x = (z * torch.linspace(0.6, 0.95, 7, dtype=torch.float64)[:, None]).requires_grad_()
    for reduction in ("mean", "none"):
        def f(v, reduction=reduction):  # bound now (ruff B023)
            return batch_loss(v, labels, setting, beta=1.5, tau=0.7, num_negatives=2, detach_weights=False,
                              backend=backend, block_size=3, reduction=reduction, convention="authors")
        assert torch.autograd.gradcheck(f, (x,), eps=1e-6, atol=1e-7)


def _naive_detached(z, labels, setting, *, beta, tau, k, convention):
    """Sum of l_ij by a per-pair torch loop with q detached (the authors' p_neg.detach())."""
    sim = z @ z.T
    y = labels.tolist()
    b = effective_beta(setting, beta)
    total = z.sum() * 0
    for i in range(len(y)):
        pos, neg = _sets(y, i, setting, convention)
        if not pos or not neg:
            continue
        q = torch.softmax(b * sim[i, neg].detach(), 0)
        for j in pos:
            total = total + torch.log1p(k * (q * torch.exp((sim[i, neg] - sim[i, j]) / tau)).sum())
    return total


@pytest.mark.parametrize("setting", SETTINGS)
def test_detached_gradient_is_the_naive_loops(setting):
    """detach_weights=True (the authors' code): the gradient is not that of the value, so it is compared with
    autograd through a naive loop that detaches q, for both backends and the per-pair backward."""
    z, labels = _batch(15, size=9, dim=3)
    x = (z * torch.linspace(0.6, 0.95, 9, dtype=torch.float64)[:, None]).requires_grad_()
    (want,) = torch.autograd.grad(_naive_detached(x, labels, setting, beta=2.0, tau=0.6, k=3,
                                                  convention="authors"), x)
    for backend in BACKENDS:
        for reduction in ("sum", "none"):
            loss = batch_loss(x, labels, setting, beta=2.0, tau=0.6, num_negatives=3, backend=backend, block_size=4,
                              reduction=reduction, convention="authors")
            (got,) = torch.autograd.grad(loss, x, torch.ones_like(loss))
            # float64: sums of P <= B^2 pair terms of size <= (b + 1/tau) |z|, each with relative rounding ~ B eps
            torch.testing.assert_close(got, want, rtol=0, atol=81 * 9 * EPS64 * (2.0 + 1 / 0.6))


@pytest.mark.parametrize("setting", SETTINGS)
def test_gradcheck_sampled(setting):
    """Each evaluation reseeds the generator (fixed draws): the loss is smooth in z."""
    z, labels = _batch(11, size=7, dim=3)
    x = (z * 0.9).requires_grad_()

    def f(v):
        return batch_loss(v, labels, setting, beta=1.1, tau=0.7, num_negatives=4, estimator="sampled",
                          psi="infonce-mean", generator=torch.Generator().manual_seed(21), reduction="sum",
                          convention="authors")
    assert torch.autograd.gradcheck(f, (x,), eps=1e-6, atol=1e-6)


@pytest.mark.parametrize("plain", ["scl", "ucl"])
def test_beta_zero_hard_equals_plain_under_authors(plain):
    """beta = 0 HSCL is SCL and beta = 0 HUCL is UCL, bit for bit (the same spec), both estimators, backends."""
    z, labels = _batch(12)
    hard = {"scl": "hscl", "ucl": "hucl"}[plain]
    for backend in BACKENDS:
        for estimator in ("weighted", "sampled"):
            def loss(setting, backend=backend, estimator=estimator):
                extra = {"generator": torch.Generator().manual_seed(2)} if estimator == "sampled" else {}
                return batch_loss(z, labels, setting, beta=0.0, tau=0.5, num_negatives=3, estimator=estimator,
                                  backend=backend, reduction="none", convention="authors", **extra)
            torch.testing.assert_close(loss(hard), loss(plain), rtol=0, atol=0)


def test_nc_batch_scl_is_the_same_under_both_conventions():
    """At an exact NC batch on the sphere every positive pair has S_ij = 1 = S_ii: adding (i, i) adds pairs of
    the same value, so the SCL/HSCL mean is unchanged; UCL/HUCL change (the anchor joins its negatives)."""
    etf = torch.eye(3, dtype=torch.float64) - 1 / 3
    etf = etf / etf.norm(dim=1, keepdim=True)
    labels = torch.tensor([0, 0, 0, 1, 1, 2, 2, 2, 2])
    z = etf[labels]
    for setting in SETTINGS:
        a, b = (float(batch_loss(z, labels, setting, beta=2.0, tau=0.5, convention=c)) for c in CONVENTIONS)
        if is_supervised(setting):
            np.testing.assert_allclose(a, b, rtol=8 * EPS64, atol=0)
        else:
            assert b > a  # one more negative at similarity 1 (the anchor) raises the negative mass


def test_bad_convention_is_rejected_naming_the_argument():
    z, labels = _batch(13)
    for bad in ("paper", "", None, 1):
        with pytest.raises(ValueError, match="convention"):
            batch_loss(z, labels, "scl", convention=bad)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="convention"):
            batch_loss_pairs(z, labels, "ucl", convention=bad)  # type: ignore[arg-type]


def test_triton_refuses_the_authors_convention():
    """backend='triton' raises naming the convention (before any device check); auto never picks triton for it."""
    z, labels = _batch(14)
    with pytest.raises(ValueError, match="convention='theory' only"):
        batch_loss(z, labels, "scl", backend="triton", convention="authors")
    with pytest.raises(ValueError, match="convention"):
        select_backend(z, estimator="weighted", reduction="mean", detach_weights=True, requested="triton",
                       convention="authors")
    assert select_backend(z, estimator="weighted", reduction="mean", detach_weights=True,
                          convention="authors") == "blocked"


def test_config_convention_field():
    """Default "theory", validated; written only when not the default (run names of earlier runs unchanged);
    a saved config without the key loads with the default; triton is rejected with "authors"."""
    assert Config().convention == "theory" and "convention" not in Config().to_dict()
    cfg = Config(convention="authors")
    assert cfg.to_dict()["convention"] == "authors" and config_from_dict(cfg.to_dict()) == cfg
    assert config_from_dict({k: v for k, v in Config().to_dict().items()}).convention == "theory"
    with pytest.raises(ValueError, match="convention"):
        Config(convention="paper")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="convention"):
        Config(convention="authors", backend="triton")


def test_train_cli_passes_the_convention(tmp_path):
    """`ncgeom train --convention authors` trains with the authors' loss: the run's NC value is the authors'
    batch loss at an exact NC batch (UCL: above the theory one), and config.json records the convention."""
    from ncgeom.cli.main import main
    from ncgeom.runs.nc_reference import run_nc_value
    from ncgeom.runs.records import load_config

    args = ["train", "--setting", "hucl", "--beta", "2", "--classes", "3", "--samples-per-class", "6",
            "--batch-size", "18", "--epochs", "1", "--quiet"]
    assert main([*args, "--convention", "authors", "--out", str(tmp_path / "a")]) == 0
    cfg, _ = load_config(tmp_path / "a" / "config.json")
    assert cfg.convention == "authors"
    theory_value, _ = run_nc_value(cfg.replace(convention="theory"))
    authors_value, source = run_nc_value(cfg)
    assert authors_value > theory_value and "batch_loss" in source
    assert main([*args, "--convention", "paper"]) == 2


@pytest.mark.parametrize("setting", SETTINGS)
def test_float32_corner_of_the_validated_range_is_finite(setting):
    """float32, beta = 1e4, tau = 1e-3 (the corner of docs/theory.md section 7's validated range): finite loss
    and gradient under "authors" for both backends and both estimators (the blocked backend's exact-maximum
    fallback runs there with no excluded column for UCL/HUCL); the blocked value equals the dense one to the
    float32 bound (beta + 1/tau) * 2^-23 of batch_loss's Notes, times the value's scale."""
    z, labels = _batch(16, size=32, dim=5)
    x = z.float().requires_grad_()
    values = {}
    for backend in BACKENDS:
        for estimator in ("weighted", "sampled"):
            extra = {"generator": torch.Generator().manual_seed(0)} if estimator == "sampled" else {}
            loss = batch_loss(x, labels, setting, beta=1e4, tau=1e-3, num_negatives=8, estimator=estimator,
                              backend=backend, convention="authors", **extra)
            (grad,) = torch.autograd.grad(loss, x)
            assert torch.isfinite(loss) and bool(torch.isfinite(grad).all()), (backend, estimator)
            values[backend, estimator] = float(loss.detach())
    bound = (1e4 + 1e3) * 2.0**-23 * 4
    np.testing.assert_allclose(values["blocked", "weighted"], values["dense", "weighted"], rtol=bound, atol=bound)
