"""The stacked weighted kernel (ncgeom.losses.kernels.stacked) against batch_loss's dense backend, run by run.

Tolerance: both evaluate the formula of docs/theory.md, section 7 in float64; the kernel shifts the
log-sum-exp by alpha ||z_i|| max ||z_m|| (not the exact maximum) and forms S through exp2 of
log2(e) alpha (S - bound), so each term carries a relative error of a few eps times |alpha S| <= 2 alpha,
and a loss or gradient entry sums B such terms: TOL = 10 B alpha_max eps.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from ncgeom.losses import batch_loss
from ncgeom.losses.kernels import stacked as stacked_loss
from ncgeom.losses.kernels.stacked import stacked_weighted

# one thread, as the sweep runs a stack: with more, torch splits an elementwise op's range between threads,
# and the split points (where a thread's scalar tail lies) depend on the whole stack's size
pytestmark = pytest.mark.usefixtures("one_thread")

EPS64 = float(np.finfo(np.float64).eps)
# (setting, b, tau) per run: every setting, b = 0 runs next to tilted ones, several temperatures
RUNS = [("hscl", 2.0, 1.0), ("ucl", 0.0, 0.5), ("hucl", 5.0, 0.2), ("scl", 0.0, 1.0), ("hscl", 30.0, 0.1)]
SUPERVISED = {"scl": True, "hscl": True, "ucl": False, "hucl": False}


def _stack(runs, size=24, dim=5, classes=4, seed=0):
    generator = torch.Generator().manual_seed(seed)
    z = torch.nn.functional.normalize(torch.randn(len(runs), size, dim, generator=generator, dtype=torch.float64), dim=2)
    labels = torch.randint(0, classes, (len(runs), size), generator=generator)
    supervised = torch.tensor([SUPERVISED[s] for s, _, _ in runs])
    b = torch.tensor([bb for _, bb, _ in runs], dtype=torch.float64)
    tau = torch.tensor([t for _, _, t in runs], dtype=torch.float64)
    return z, labels, supervised, b, tau


def _stacked(z, labels, supervised, b, tau, *, k, detach, band_width=None):
    z = z.clone().requires_grad_()
    losses = stacked_weighted(z, labels, supervised=supervised, beta=b, tau=tau, num_negatives=k, detach_weights=detach,
                              band_width=band_width)
    losses.sum().backward()
    return losses.detach(), z.grad


def _dense(z, labels, runs, *, k, detach):
    values, grads = [], []
    for r, (setting, beta, tau) in enumerate(runs):
        zr = z[r].clone().requires_grad_()
        loss = batch_loss(zr, labels[r], setting, beta=beta, tau=tau, num_negatives="batch" if k is None else k,
                          detach_weights=detach, backend="dense")
        loss.backward()
        values.append(loss.detach())
        grads.append(zr.grad)
    return torch.stack(values), torch.stack(grads)


def _tol(runs, size):
    alpha_max = max(b + 1.0 / t for _, b, t in runs)
    return 10 * size * alpha_max * EPS64


# (batch size, tile entries): whole stack; groups of GROUP_TILES = 2 runs (B = 24 pads to B' = 32); blocks of
# 32 rows of one run (B = 72 pads to 96: three blocks, the padding rows in the last)
TILINGS = [(24, 1 << 18), (24, 32 * 32), (72, 96 * 40)]


@pytest.mark.parametrize(("size", "tile"), TILINGS)
@pytest.mark.parametrize("detach", [True, False])
@pytest.mark.parametrize("k", [1, None])
def test_matches_dense_batch_loss_per_run(monkeypatch, size, tile, detach, k):
    monkeypatch.setattr(stacked_loss, "TILE_ENTRIES", tile)
    z, labels, supervised, b, tau = _stack(RUNS, size=size)
    values, grads = _stacked(z, labels, supervised, b, tau, k=k, detach=detach)
    ref_values, ref_grads = _dense(z, labels, RUNS, k=k, detach=detach)
    tol = _tol(RUNS, z.shape[1])
    torch.testing.assert_close(values, ref_values, rtol=tol, atol=tol)
    torch.testing.assert_close(grads, ref_grads, rtol=tol, atol=tol)


def test_underflowing_rows_take_the_exact_maximum(monkeypatch):
    """Collapsed, antipodal classes with alpha = 500: exp(alpha (S_im - 1)) = exp(-1000) underflows float64."""
    runs = [("hscl", 400.0, 0.01), ("hucl", 0.0, 0.002)]
    generator = torch.Generator().manual_seed(1)
    labels = torch.tensor([0, 1] * 6).repeat(2, 1)
    centers = torch.tensor([[1.0, 0.0, 0.0], [-1.0, 0.0, 0.0]], dtype=torch.float64)
    z = centers[labels] + 1e-3 * torch.randn(2, 12, 3, generator=generator, dtype=torch.float64)
    z = torch.nn.functional.normalize(z, dim=2)
    calls = []
    exact = stacked_loss._exact_rows

    def counted(*args):
        calls.append(args[1])
        exact(*args)

    monkeypatch.setattr(stacked_loss, "_exact_rows", counted)
    values, grads = _stacked(z, labels, torch.tensor([True, False]), torch.tensor([400.0, 0.0], dtype=torch.float64),
                             torch.tensor([0.01, 0.002], dtype=torch.float64), k=1, detach=True)
    assert calls  # the fallback ran
    ref_values, ref_grads = _dense(z, labels, runs, k=1, detach=True)
    assert torch.isfinite(values).all() and torch.isfinite(grads).all()
    tol = _tol(runs, 12)
    torch.testing.assert_close(values, ref_values, rtol=tol, atol=tol)
    # dZ = (G + G^T) Z sums terms |G_im| <= sigma / (tau P) over ~2 n_max pairs per row, which cancel here
    # (collapsed classes): absolute error tol times that scale, 4 n_max / (tau_min P) (n_max = 6, P = 60)
    torch.testing.assert_close(grads, ref_grads, rtol=tol, atol=tol * 4 * 6 / (0.002 * 60))


def test_gradcheck_through_the_weights():
    z, labels, supervised, b, tau = _stack(RUNS[:3], size=8, dim=3, classes=2, seed=2)
    z.requires_grad_()

    def f(zz):
        return stacked_weighted(zz, labels, supervised=supervised, beta=b, tau=tau, num_negatives=2, detach_weights=False)

    assert torch.autograd.gradcheck(f, (z,))


def _assert_each_run_as_alone(z, labels, supervised, b, tau, *, width):
    """Values and gradients of every run of the stack equal those of the run alone, bit for bit (``width``: a
    band width that does not depend on the stack-mates, e.g. the batch size), with and without detached weights."""
    for detach in (True, False):
        values, grads = _stacked(z, labels, supervised, b, tau, k=1, detach=detach, band_width=width)
        for r in range(z.shape[0]):
            s = slice(r, r + 1)
            alone_v, alone_g = _stacked(z[s], labels[s], supervised[s], b[s], tau[s], k=1, detach=detach,
                                        band_width=width)
            torch.testing.assert_close(values[s], alone_v, rtol=0, atol=0)
            torch.testing.assert_close(grads[s], alone_g, rtol=0, atol=0)


@pytest.mark.parametrize(("size", "tile"), TILINGS)
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_run_is_bitwise_independent_of_its_stack(monkeypatch, size, tile, dtype):
    """float32 too: B = 24 and 72 are not multiples of the SIMD chunk, so without the padding to B' some
    exp2/sigmoid/softplus values of a run would fall in a scalar tail in one stack and not in another."""
    monkeypatch.setattr(stacked_loss, "TILE_ENTRIES", tile)
    z, labels, supervised, b, tau = _stack(RUNS, size=size)
    z = z.to(dtype)
    _assert_each_run_as_alone(z, labels, supervised, b, tau, width=z.shape[1])


def test_batch_without_pairs_gives_an_attached_zero():
    z, _, supervised, b, tau = _stack(RUNS[:2], size=6)
    labels = torch.arange(6).repeat(2, 1)  # every class a singleton: no positive pair
    zz = z.clone().requires_grad_()
    losses = stacked_weighted(zz, labels, supervised=supervised, beta=b, tau=tau, num_negatives=1)
    assert losses.requires_grad
    losses.sum().backward()
    torch.testing.assert_close(losses.detach(), torch.zeros(2, dtype=torch.float64), rtol=0, atol=0)
    torch.testing.assert_close(zz.grad, torch.zeros_like(z), rtol=0, atol=0)


def test_band_width_below_the_largest_class_raises():
    z, labels, supervised, b, tau = _stack(RUNS[:1], size=8, classes=1)
    with pytest.raises(ValueError, match="band_width"):
        stacked_weighted(z, labels, supervised=supervised, beta=b, tau=tau, num_negatives=1, band_width=3)


def test_loss_bytes_is_bounded_by_the_tile():
    itemsize = 4
    assert stacked_loss.loss_bytes(1, 512, itemsize=itemsize) == 3 * 512 * 512 * itemsize
    assert stacked_loss.loss_bytes(4, 512, itemsize=itemsize) == 3 * 2 * 512 * 512 * itemsize  # pairs of runs
    assert stacked_loss.loss_bytes(64, 128, itemsize=itemsize) == 3 * 32 * 128 * 128 * itemsize  # groups of 32
    big = stacked_loss.loss_bytes(64, 4096, itemsize=itemsize)  # row blocks of 64: independent of R
    assert big == 3 * 64 * 4096 * itemsize == 3 * stacked_loss.TILE_ENTRIES * itemsize
    assert math.isclose(big, stacked_loss.loss_bytes(1, 4096, itemsize=itemsize))


@pytest.mark.parametrize("size", [18, 30])
def test_float32_runs_with_odd_batches_are_bitwise_independent(size):
    """15 runs of float32, B not a multiple of the SIMD chunk. Without the padding to B' (LANES = 1) this case
    fails on an AVX2 CPU (measured: 4 of 30 run-slices differ at B = 18, 1 at B = 30): a run's exp2 or
    sigmoid values fall in the scalar tail when it is alone and not inside the stack."""
    runs = RUNS * 3
    z, labels, supervised, b, tau = _stack(runs, size=size, seed=2, classes=3)
    _assert_each_run_as_alone(z.to(torch.float32), labels, supervised, b, tau, width=size)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_batch_in_label_order_gives_the_same_bits(dtype):
    """The engine hands batches of table rows over in label order (stable), and the kernel then skips its own
    sort, gather and scatter: values and gradients equal those of the same batch in drawn order, permuted, bit
    for bit (a stable sort of sorted labels is the identity, so the kernel sees the same rows)."""
    z, labels, supervised, b, tau = _stack(RUNS, size=24)
    z = z.to(dtype)
    order = torch.sort(labels, dim=1, stable=True).indices
    rows = order[..., None].expand_as(z)
    in_order = torch.gather(z, 1, rows), torch.gather(labels, 1, order)
    assert bool((in_order[1][:, 1:] >= in_order[1][:, :-1]).all())
    for detach in (True, False):
        values, grads = _stacked(z, labels, supervised, b, tau, k=1, detach=detach, band_width=24)
        values_o, grads_o = _stacked(*in_order, supervised, b, tau, k=1, detach=detach, band_width=24)
        torch.testing.assert_close(values_o, values, rtol=0, atol=0)
        torch.testing.assert_close(grads_o, torch.gather(grads, 1, rows), rtol=0, atol=0)


def test_kept_band_follows_the_labels():
    """The band of the last sorted labels is kept between calls (checked by value): a call with other labels of
    the same shape gets their own band, the result of a cold cache."""
    z, labels, supervised, b, tau = _stack(RUNS, size=24)
    other = _stack(RUNS, size=24, seed=1)[1]
    assert not torch.equal(torch.sort(labels, 1).values, torch.sort(other, 1).values)
    stacked_loss._cache.clear()
    cold = _stacked(z, other, supervised, b, tau, k=1, detach=True)
    stacked_loss._cache.clear()
    _stacked(z, labels, supervised, b, tau, k=1, detach=True)  # keeps the band of ``labels``
    warm = _stacked(z, other, supervised, b, tau, k=1, detach=True)
    again = _stacked(z, other, supervised, b, tau, k=1, detach=True)  # the kept band of ``other``
    for got in (warm, again):
        torch.testing.assert_close(got[0], cold[0], rtol=0, atol=0)
        torch.testing.assert_close(got[1], cold[1], rtol=0, atol=0)
