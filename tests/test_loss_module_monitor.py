"""One's own training loop (issue 26 item 3): the loss as a torch.nn.Module (ncgeom.losses.HardContrastiveLoss) and
the monitor that writes a user's run as a run directory (ncgeom.runs.NCMonitor)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from numpy.testing import assert_allclose

from ncgeom.data import class_balanced_counts
from ncgeom.geometry import normalize, simplex_etf
from ncgeom.losses import HardContrastiveLoss, batch_loss, custom_psi
from ncgeom.metrics import class_means, classify_geometry, nc_metrics, ncc_accuracy
from ncgeom.runs import NCMonitor, load_run
from ncgeom.runs.records import HISTORY_FILE, SUMMARY_FILE
from ncgeom.theory import batch_nc_value

pml_losses = pytest.importorskip("pytorch_metric_learning.losses")

EPS64 = np.finfo(np.float64).eps


def _batch(seed: int, size: int = 24, dim: int = 5, classes: int = 4):
    gen = torch.Generator().manual_seed(seed)
    z = 2.0 * torch.randn(size, dim, generator=gen, dtype=torch.float64)  # not normalized: the module normalizes
    y = torch.arange(size) % classes
    return z, y


# ---------------------------------------------------------------- HardContrastiveLoss


@pytest.mark.parametrize("setting", ["scl", "hscl", "ucl", "hucl"])
@pytest.mark.parametrize("norm", ["sphere", "ball"])
def test_module_is_batch_loss_of_the_normalized_batch(setting, norm):
    z, y = _batch(0)
    module = HardContrastiveLoss(setting, beta=3.0, tau=0.5, num_negatives=2, normalize=norm)
    x1, x2 = z.clone().requires_grad_(), z.clone().requires_grad_()
    ours = module(x1, y)
    ref = batch_loss(normalize(x2, norm), y, setting, beta=3.0, tau=0.5, num_negatives=2)
    assert float(ours.detach()) == float(ref.detach())  # the same computation, bit for bit
    ours.backward()
    ref.backward()
    assert x1.grad is not None and x2.grad is not None
    torch.testing.assert_close(x1.grad, x2.grad, rtol=0, atol=0)
    assert list(module.parameters()) == []  # any optimizer: the loss has no parameters of its own


@pytest.mark.parametrize("tau", [0.1, 0.5])
def test_module_called_as_pytorch_metric_learning_ntxent(tau):
    z, y = _batch(1)
    ours_in, theirs_in = z.clone().requires_grad_(), z.clone().requires_grad_()
    ours = HardContrastiveLoss("scl", tau=tau, num_negatives="batch")(ours_in, y)
    theirs = pml_losses.NTXentLoss(temperature=tau)(theirs_in, y)  # normalizes inside too (cosine similarity)
    assert_allclose(float(ours.detach()), float(theirs.detach()), rtol=1e-10)
    torch.testing.assert_close(torch.autograd.grad(ours, ours_in)[0], torch.autograd.grad(theirs, theirs_in)[0],
                               rtol=1e-9, atol=1e-12)


def test_module_trains_free_features_to_nc_with_a_torch_optimizer():
    c, per, d = 4, 6, 3
    y = torch.arange(c).repeat_interleave(per)
    gen = torch.Generator().manual_seed(0)
    features = torch.nn.Parameter(torch.randn(c * per, d, generator=gen, dtype=torch.float64))
    loss_func = HardContrastiveLoss("hscl", beta=2.0, tau=0.5)
    optimizer = torch.optim.SGD([features], lr=2.0, momentum=0.9)
    for _ in range(600):  # the gap shrinks ~12x per 100 steps here (measured): 4.6e-9 after 600
        optimizer.zero_grad()
        loss = loss_func(features, y)
        loss.backward()
        optimizer.step()
    nc = batch_nc_value("hscl", class_counts=[per] * c, beta=2.0, tau=0.5)
    gap = float(loss.detach()) - nc
    # Theorem 2: NC is the minimum (no loss below it, up to rounding), and a torch optimizer reaches it
    assert -1e3 * EPS64 * nc <= gap < 1e-6 * nc
    metrics = nc_metrics(normalize(features.detach().numpy(), "sphere"), y.numpy())
    assert classify_geometry(metrics.to_dict()) == "NC"


def test_module_validates_at_construction_and_call():
    for kwargs, message in [(dict(beta=-1.0), "beta"), (dict(tau=0.0), "tau"), (dict(estimator="sampled"), "generator"),
                            (dict(psi="triplet"), "psi must be 'infonce'"), (dict(normalize="cube"), "normalize"),
                            (dict(num_negatives=0), "num_negatives")]:
        with pytest.raises(ValueError, match=message):
            HardContrastiveLoss("hscl", **kwargs)
    bad_setting: Any = "xcl"
    with pytest.raises(ValueError, match="setting"):
        HardContrastiveLoss(bad_setting)
    with pytest.raises(ValueError, match="must accept torch tensors"):
        HardContrastiveLoss("scl", estimator="sampled", generator=torch.Generator(),
                            psi=custom_psi(lambda t: np.log1p(np.exp(t).sum(axis=-1))))
    module = HardContrastiveLoss("scl")
    z, y = _batch(2)
    with pytest.raises(ValueError, match="labels must be given"):
        module(z)
    with pytest.raises(ValueError, match="indices_tuple"):
        module(z, y, indices_tuple=(y, y, y))
    with pytest.raises(ValueError, match="ref_emb"):
        module(z, y, ref_emb=z)
    with pytest.raises(ValueError, match="labels"):
        module(z, y[:-1])
    sampled = HardContrastiveLoss("hucl", beta=1.0, estimator="sampled", psi="triplet", num_negatives=3,
                                  generator=torch.Generator().manual_seed(0))
    assert torch.isfinite(sampled(z, y)) and "psi='triplet'" in repr(sampled)


# ---------------------------------------------------------------- NCMonitor


def _clustered(seed: int, c: int, per: int, d: int, spread: float):
    rng = np.random.default_rng(seed)
    y = np.repeat(np.arange(c), per)
    z = simplex_etf(c, d)[y] + spread * rng.standard_normal((c * per, d))
    return z, y


def test_monitor_writes_a_run_that_load_run_reads(tmp_path):
    c, per, d, batch = 4, 10, 3, 8
    loss_func = HardContrastiveLoss("hscl", beta=2.0, tau=0.5)
    out = tmp_path / "mine"
    steps = []
    z_test, y_test = _clustered(99, c, 5, d, 0.3)
    with NCMonitor(out, num_classes=c, batch_size=batch, loss=loss_func, every=3, lr=0.1, seed=7,
                   description={"model": "free features"}) as monitor:
        monitor.evaluate([_clustered(0, c, per, d, 1.0)], epoch=0)
        for step in range(1, 10):
            z, y = _clustered(step, c, per, d, 1.0 / step)
            due = monitor.step(float(loss_func(torch.as_tensor(z[:batch]), torch.as_tensor(y[:batch]))))
            steps.append(due)
            if due:
                batches = [(z[:20], y[:20]), (z[20:], y[20:])]  # a list: two passes
                record = monitor.evaluate(batches, test_batches=[(z_test, y_test)])
                # independent in-memory metrics of the same features agree
                ref = nc_metrics(z, y).to_dict()
                for key in ("etf_distance", "within_class", "nc1", "unit_norm", "rankme"):
                    assert_allclose(record.metrics[key], ref[key], rtol=1e-9)
                assert record.test_ncc_accuracy == ncc_accuracy(z_test, y_test, class_means=class_means(z, y))
    assert steps == [False, False, True] * 3
    run = load_run(out)
    assert run.summary is not None and run.summary.status == "completed"
    assert [r.epoch for r in run.records] == [0, 3, 6, 9] and run.summary.epochs_run == 3
    nc = batch_nc_value("hscl", class_counts=class_balanced_counts(c, batch), beta=2.0, tau=0.5)
    assert_allclose(run.summary.nc_value, nc, rtol=4 * EPS64)
    final = run.summary.final
    assert final.loss is not None and final.gap is not None
    assert_allclose(final.gap, final.loss - nc, rtol=4 * EPS64)
    config = run.config
    assert (config.setting, config.beta, config.tau, config.classes, config.embedding_dim, config.batch_size,
            config.lr, config.seed, config.epochs) == ("hscl", 2.0, 0.5, c, d, batch, 0.1, 7, 9)
    saved = json.loads((out / "config.json").read_text())
    assert saved["provenance"]["recorded_by"] == "ncgeom.runs.monitor.NCMonitor"
    assert saved["provenance"]["monitor"]["description"] == {"model": "free features"}
    assert "lr" in saved["provenance"]["monitor"]["fields"] and "dataset" not in saved["provenance"]["monitor"]["fields"]
    means = np.load(out / "embeddings.npz")["z"]
    assert means.shape == (c, d)


def test_monitor_shuffled_loader_nc_value_and_step_losses(tmp_path):
    c, d = 3, 2
    z, y = _clustered(0, c, 8, d, 0.1)
    with NCMonitor(tmp_path / "r", num_classes=c, batch_size=6, setting="scl", train_labels=y) as monitor:
        for value in (0.5, 0.25):
            monitor.step(value)
        record = monitor.evaluate([(z, y)])
    assert record.epoch == 2 and record.loss == 0.375  # the mean of the step losses since the last record
    assert "shuffled" in monitor.nc_source and monitor.config.batches == "shuffle"


def test_monitor_rejects_bad_input(tmp_path):
    z, y = _clustered(0, 3, 4, 2, 0.1)
    with pytest.raises(ValueError, match="not both"):
        NCMonitor(tmp_path / "a", num_classes=3, batch_size=4, loss=HardContrastiveLoss("scl"), setting="scl")
    with pytest.raises(ValueError, match="psi must be one of"):
        NCMonitor(tmp_path / "b", num_classes=3, batch_size=4, psi="mine")
    with pytest.raises(ValueError, match="num_classes"):
        NCMonitor(tmp_path / "c", num_classes=1, batch_size=4)
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(ValueError, match="out_dir|file"):
        NCMonitor(blocker, num_classes=3, batch_size=4)
    monitor = NCMonitor(tmp_path / "d", num_classes=3, batch_size=4, dim=5)
    with pytest.raises(ValueError, match="dim"):
        monitor.evaluate([(z, y)], epoch=1)
    monitor.close()
    monitor = NCMonitor(tmp_path / "e", num_classes=3, batch_size=4)
    monitor.evaluate([(z, y)], epoch=2)
    with pytest.raises(ValueError, match="increase"):
        monitor.evaluate([(z, y)], epoch=2)
    with pytest.raises(ValueError, match="labels must lie in"):
        monitor.evaluate([(z, y + 1)], epoch=3)
    with pytest.raises(ValueError, match="finite"):
        monitor.step(float("nan"))
    monitor.close()
    with pytest.raises(ValueError, match="closed"):
        monitor.evaluate([(z, y)], epoch=4)


def test_monitor_leaves_no_summary_when_the_loop_raises(tmp_path):
    z, y = _clustered(0, 3, 4, 2, 0.1)
    out = tmp_path / "crash"
    with pytest.raises(RuntimeError, match="boom"):
        with NCMonitor(out, num_classes=3, batch_size=4) as monitor:
            monitor.evaluate([(z, y)], epoch=1)
            raise RuntimeError("boom")
    assert (out / HISTORY_FILE).is_file() and not (out / SUMMARY_FILE).exists()
    assert load_run(out).summary is None and [r.epoch for r in load_run(out).history] == [1]
    with NCMonitor(out, num_classes=3, batch_size=4) as again:  # the folder was released
        again.evaluate([(z, y)], epoch=1)
    assert Path(out / SUMMARY_FILE).is_file()


def test_your_own_loop_page_runs(monkeypatch, tmp_path):
    """Every ```python block of docs/your_own_loop.md runs, in order, in one namespace (its runs in a temp folder)."""
    import re
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    page = Path(__file__).resolve().parents[1] / "docs" / "your_own_loop.md"
    blocks = re.findall(r"```python\n(.*?)```", page.read_text(), re.S)
    assert len(blocks) >= 2
    namespace: dict = {"__name__": "your_own_loop"}
    for block in blocks:
        exec(compile(block, str(page), "exec"), namespace)


def test_docstring_examples():
    import doctest

    import ncgeom.losses.module as module
    import ncgeom.runs.monitor as monitor

    for m in (module, monitor):
        result = doctest.testmod(m, raise_on_error=False)
        assert result.attempted > 0 and result.failed == 0, m.__name__
