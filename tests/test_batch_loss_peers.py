"""Cross-checks of batch_loss against peer conventions (docs/conventions.md, section 2).

- pytorch-metric-learning 2.9 NTXentLoss with labels == SCL, num_negatives="batch", beta = 0 (exact).
- SupConLoss (PML; HobbitLong with base_temperature = temperature): positives ARE in its denominator.
  Our UCL with k = "batch", beta = 0 has l_ij = log(e^{S_ij/tau} + D_i) - S_ij/tau with
  D_i = sum_{m != i} e^{S_im/tau} (the positive counted in "1 +" and again in N(i)), so SupCon's per-pair
  term log D_i - S_ij/tau = log(expm1(l_ij)); SupCon averages it over P(i), then over anchors with a positive.
- Robinson et al.'s HCL estimator (image/main.py::criterion), re-implemented here (tau_plus = 0,
  beta_theirs = beta * tau): on a two-view batch with instance labels it equals our HSCL (N(i) excludes
  self AND partner) with num_negatives = "batch" (k = 2B - 2), values and gradients with
  detach_weights=False; our HUCL keeps the partner in N(i) (k = 2B - 1), which the variant below reproduces.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from ncgeom.losses import batch_loss, batch_loss_pairs
from ncgeom.vocabulary import Setting

pml_losses = pytest.importorskip("pytorch_metric_learning.losses")
pml_distances = pytest.importorskip("pytorch_metric_learning.distances")

RTOL = 1e-10  # float64, different summation orders


def _sphere(size, dim, seed):
    gen = torch.Generator().manual_seed(seed)
    z = torch.randn(size, dim, generator=gen, dtype=torch.float64)
    return torch.nn.functional.normalize(z, dim=1)


def _labels(size, seed):
    gen = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, 5, (size,), generator=gen) * 3  # values 0, 3, ..., 12: classes absent in between
    labels[-1] = 100  # singleton: no positive, contributes to neither
    return labels


@pytest.mark.parametrize("backend", ["dense", "blocked"])
@pytest.mark.parametrize("tau", [0.07, 0.5, 2.0])
def test_pml_ntxent_with_labels_equals_scl_batch(backend, tau):
    z, labels = _sphere(24, 5, 0), _labels(24, 1)
    x = z.clone().requires_grad_()
    # PML normalizes inside the loss, so its gradient is tangent to the sphere: normalize here too
    ours = batch_loss(torch.nn.functional.normalize(x, dim=1), labels, "scl", tau=tau, num_negatives="batch",
                      backend=backend)
    y = z.clone().requires_grad_()
    theirs = pml_losses.NTXentLoss(temperature=tau, distance=pml_distances.CosineSimilarity())(y, labels)
    np.testing.assert_allclose(float(ours.detach()), float(theirs.detach()), rtol=RTOL)
    torch.testing.assert_close(torch.autograd.grad(ours, x)[0], torch.autograd.grad(theirs, y)[0],
                               rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("tau", [0.1, 0.5])
def test_supcon_convention_reproduced_from_ucl_pairs(tau):
    z, labels = _sphere(20, 4, 2), _labels(20, 3)
    pairs = batch_loss_pairs(z, labels, "ucl", tau=tau, num_negatives="batch", backend="dense")
    supcon_pair = torch.log(torch.expm1(pairs.values))  # log D_i - S_ij / tau
    per_anchor = torch.zeros(z.shape[0], dtype=z.dtype).index_add_(0, pairs.anchors, supcon_pair)
    count = torch.zeros(z.shape[0], dtype=z.dtype).index_add_(0, pairs.anchors, torch.ones_like(supcon_pair))
    has_pos = count > 0
    ours = (per_anchor[has_pos] / count[has_pos]).mean()
    theirs = pml_losses.SupConLoss(temperature=tau, distance=pml_distances.CosineSimilarity())(z, labels)
    np.testing.assert_allclose(float(ours), float(theirs), rtol=1e-9)


def hcl_reference(out_1, out_2, *, beta_theirs, tau, include_partner=False):
    """Robinson et al.'s criterion (tau_plus = 0) in float64; include_partner=True puts the positive partner
    among the negatives (our UCL/HUCL convention)."""
    batch = out_1.shape[0]
    z = torch.cat([out_1, out_2], 0)
    sim = z @ z.T
    e = torch.exp(sim / tau)
    mask = ~torch.eye(2 * batch, dtype=torch.bool)
    if not include_partner:
        idx = torch.arange(batch)
        mask[idx, idx + batch] = False
        mask[idx + batch, idx] = False
    neg = e.masked_select(mask).view(2 * batch, -1)
    num = neg.shape[1]
    pos = torch.exp((out_1 * out_2).sum(-1) / tau)
    pos = torch.cat([pos, pos], 0)
    imp = (beta_theirs * neg.log()).exp()  # = exp(beta_theirs * s / tau); not detached (their code)
    reweight_neg = (imp * neg).sum(dim=-1) / imp.mean(dim=-1)
    ng = torch.clamp(reweight_neg, min=num * np.e ** (-1 / tau))  # never binds with tau_plus = 0
    return (-torch.log(pos / (pos + ng))).mean()


@pytest.mark.parametrize("beta_theirs", [0.0, 0.5, 1.0, 2.0])
@pytest.mark.parametrize("tau", [0.5, 1.0])
@pytest.mark.parametrize("backend", ["dense", "blocked"])
def test_hcl_two_view_batch(beta_theirs, tau, backend):
    batch, dim = 8, 16
    v1, v2 = _sphere(batch, dim, 4), _sphere(batch, dim, 5)
    v2 = torch.nn.functional.normalize(v1 + 0.5 * v2, dim=1)  # correlated views
    labels = torch.cat([torch.arange(batch), torch.arange(batch)])
    beta = beta_theirs / tau  # beta_theirs = beta_ours * tau (docs/theory.md section 3)
    cases: tuple[tuple[Setting, bool], ...] = (("hscl", False), ("hucl", True))
    for setting, include_partner in cases:
        a1, a2 = v1.clone().requires_grad_(), v2.clone().requires_grad_()
        theirs = hcl_reference(a1, a2, beta_theirs=beta_theirs, tau=tau, include_partner=include_partner)
        x = torch.cat([v1, v2], 0).requires_grad_()
        ours = batch_loss(x, labels, setting, beta=beta, tau=tau, num_negatives="batch", detach_weights=False,
                          backend=backend)
        np.testing.assert_allclose(float(ours.detach()), float(theirs.detach()), rtol=RTOL)
        g_theirs = torch.cat(torch.autograd.grad(theirs, (a1, a2)), 0)
        torch.testing.assert_close(torch.autograd.grad(ours, x)[0], g_theirs, rtol=1e-9, atol=1e-12)
