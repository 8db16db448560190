"""The stacked engine (ncgeom.runs.stacked) against the sequential one (ncgeom.runs.run).

Tolerance of the weighted estimator against the sequential engine: the stack uses its own tiled kernel
(ncgeom.losses.kernels.stacked), the sequential default the blocked kernel; both evaluate the same formula, so one
step's loss and gradient agree to a few B eps (sums of B terms), and over T steps of Adam the parameters
drift apart by at most about T B eps times the amplification of training, which we allow to be 100:
TOL = 100 T B eps (float64: 100 x 6 x 32 x 2.2e-16 = 4.3e-12 for the runs below). The linear and MLP
layers are one batched matmul (baddbmm) in the stack and addmm in the sequential model: a rounding-level
difference of the same order, covered by the same TOL. Everything else (data, batches, initialization,
noise positives, sampled negatives, the sampled kernel, Adam, the unconstrained gather and normalization)
is the sequential computation operation for operation, so unconstrained features with the sampled
estimator are bitwise equal.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
import torch

from ncgeom.optim import StackedAdam
from ncgeom.runs import Config, run
from ncgeom.runs.stacked import can_stack, group_stacks, run_stack, stack_key

EPS64 = float(np.finfo(np.float64).eps)
BASE: dict[str, Any] = dict(dtype="float64", epochs=3, classes=4, samples_per_class=16, batch_size=32, setting="hscl", beta=2.0,
            hidden_dim=16, test_per_class=8, lr=0.05)
STEPS = 3 * 2  # epochs x ceil(N / B)
TOL = 100 * STEPS * 32 * EPS64

CASES: dict[str, dict[str, Any]] = {
    "unconstrained-weighted": dict(),
    "linear-weighted": dict(model="linear"),
    "mlp-weighted": dict(model="mlp"),
    "linear-weighted-noise": dict(model="linear", positives="noise"),
    "unconstrained-sampled": dict(estimator="sampled", num_negatives=4),
    "mlp-sampled-noise": dict(model="mlp", estimator="sampled", num_negatives=2, positives="noise"),
}


def _config(**changes) -> Config:
    return Config(**{**BASE, **changes})


def _assert_same_run(a, b, *, tol: float) -> None:
    """Status, every epoch's loss, the final metrics and embeddings: equal within ``tol`` (0: bitwise)."""
    assert a.status == b.status
    assert len(a.history) == len(b.history)
    np.testing.assert_allclose([r.loss for r in b.history], [r.loss for r in a.history], rtol=tol, atol=tol)
    np.testing.assert_allclose(b.embeddings, a.embeddings, rtol=tol, atol=tol)
    for key, value in a.final.metrics.items():
        if isinstance(value, float):
            # the metrics are float64 functions of the embeddings with O(1) condition on these
            # well-separated runs: 10x the embeddings' tolerance
            np.testing.assert_allclose(b.final.metrics[key], value, rtol=10 * tol, atol=10 * tol, err_msg=key)


@pytest.mark.parametrize("case", sorted(CASES))
def test_stack_of_one_matches_sequential(case):
    config = _config(**CASES[case])
    sequential = run(config)
    [stacked] = run_stack([config])
    # same kernel, draws, forward and Adam: bitwise; another kernel or baddbmm: TOL (module docstring)
    exact = config.estimator == "sampled" and config.model == "unconstrained"
    _assert_same_run(sequential, stacked, tol=0.0 if exact else TOL)


@pytest.mark.parametrize("case", ["unconstrained-weighted", "linear-weighted-noise", "unconstrained-sampled"])
def test_run_does_not_depend_on_its_stack_mates(case):
    extra = CASES[case]
    mates = [
        _config(**extra, setting="hucl", beta=5.0, lr=0.01, seed=3),
        _config(**extra, setting="scl", lr=0.2, seed=7, weight_decay=1e-3),
        _config(**extra, setting="ucl", tau=0.5, seed=1),
    ]
    alone = _config(**extra, seed=11)
    [solo] = run_stack([alone])
    stacked = run_stack([mates[0], alone, *mates[1:]])
    _assert_same_run(solo, stacked[1], tol=0.0)  # every reduction is per run: bitwise
    for mate, result in zip(mates, [stacked[0], *stacked[2:]], strict=True):
        assert result.config == mate


@pytest.mark.usefixtures("one_thread")  # as the sweep trains a stack (tests/test_stacked_loss.py says why)
@pytest.mark.parametrize("model", ["unconstrained", "linear", "mlp"])
def test_float32_run_does_not_depend_on_its_stack_mates(model):
    """B = 18 is not a multiple of the SIMD chunk: before the stacked loss padded its batch, the linear and MLP
    runs of this case left the solo trajectory at epoch 5 (unconstrained at epoch 57 of 400)."""
    base = dict(BASE, dtype="float32", classes=3, samples_per_class=6, batch_size=18, epochs=25, model=model)
    alone = Config(**{**base, "seed": 11})
    mates = [Config(**{**base, "setting": setting, "seed": 100 + i})
             for i, setting in enumerate(["hucl", "scl", "ucl", "hscl", "hucl"])]
    [solo] = run_stack([alone])
    stacked = run_stack([*mates[:3], alone, *mates[3:]])
    _assert_same_run(solo, stacked[3], tol=0.0)


def _files(run_dir):
    """The run files with the wall-clock fields removed (time_s, wall_time_s, provenance)."""
    history = [json.loads(line) for line in (run_dir / "history.jsonl").read_text().splitlines()]
    for h in history:
        h.pop("time_s")
    summary = json.loads((run_dir / "summary.json").read_text())
    summary.pop("wall_time_s")
    for part in ("final", "initial"):
        summary[part].pop("time_s")
    config = json.loads((run_dir / "config.json").read_text())
    config.pop("provenance")
    return history, summary, config, (run_dir / "embeddings.npz").read_bytes()


def test_same_seed_gives_identical_files(tmp_path):
    configs = [_config(seed=s, setting=st) for s, st in [(0, "hscl"), (1, "hucl")]]
    for attempt in ("a", "b"):
        run_stack(configs, out_dirs=[tmp_path / attempt / str(i) for i in range(2)])
    for i in range(2):
        assert _files(tmp_path / "a" / str(i)) == _files(tmp_path / "b" / str(i))
    assert _files(tmp_path / "a" / "0")[3] != _files(tmp_path / "a" / "1")[3]  # different seeds differ


def test_stack_writes_the_sequential_files(tmp_path):
    config = _config(estimator="sampled", num_negatives=2)
    run(config, out_dir=tmp_path / "seq")
    run_stack([config], out_dirs=[tmp_path / "stk"])
    assert _files(tmp_path / "seq") == _files(tmp_path / "stk")  # sampled: bitwise, files included


def test_diverging_run_stops_alone(monkeypatch):
    configs = [_config(seed=0), _config(seed=1, setting="hucl"), _config(seed=2, lr=0.1)]
    solos = [run_stack([c])[0] for c in configs]
    step = StackedAdam.step
    calls = {"n": 0}

    def planted(self):  # a NaN in run 1's parameters after the 5th update (epoch 3, step 1)
        step(self)
        calls["n"] += 1
        if calls["n"] == 5 and self.params[0].shape[0] == 3:
            self.params[0].data[1] = float("nan")

    monkeypatch.setattr(StackedAdam, "step", planted)
    results = run_stack(configs)
    assert [r.status for r in results] == ["completed", "diverged", "completed"]
    assert "epoch 3" in results[1].message and "non-finite" in results[1].message
    for i in (0, 2):
        _assert_same_run(solos[i], results[i], tol=0.0)
    # the diverged run kept its state after epoch 2: that of the same run trained 2 epochs
    [two] = run_stack([configs[1].replace(epochs=2)])
    assert len(results[1].history) == 2
    np.testing.assert_array_equal(results[1].embeddings, two.embeddings)
    assert results[1].final.metrics == two.final.metrics


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("hyper", ["per-run", "shared"])
def test_stacked_adam_equals_torch_adam(dtype, hyper):
    # one fused call per distinct (lr, weight decay) over the runs' slices; 5 runs of 7 x 5 = 35 elements, so
    # each slice has SIMD chunks and a scalar tail of its own, as the single run's parameter has
    generator = torch.Generator().manual_seed(0)
    runs = 5
    lrs, decays = ([0.1, 0.01, 0.05, 0.01, 0.1], [0.0, 0.1, 0.003, 0.1, 0.0]) if hyper == "per-run" else ([0.05] * runs, [0.0] * runs)
    start = torch.randn(runs, 7, 5, generator=generator, dtype=dtype)
    target = torch.randn(runs, 7, 5, generator=generator, dtype=dtype)
    singles = [start[r].clone().requires_grad_() for r in range(runs)]
    optimizers = [torch.optim.Adam([singles[r]], lr=lrs[r], weight_decay=decays[r], fused=True) for r in range(runs)]
    stacked = start.clone().requires_grad_()
    adam = StackedAdam([stacked], lr=lrs, weight_decay=decays)
    for _ in range(40):
        for r in range(runs):
            optimizers[r].zero_grad()
            (singles[r] - target[r]).pow(3).abs().sum().backward()
            optimizers[r].step()
        adam.zero_grad()
        (stacked - target).pow(3).abs().sum().backward()
        adam.step()
    for r in range(runs):  # the same kernel on a tensor of the same size: bitwise
        torch.testing.assert_close(stacked.detach()[r], singles[r].detach(), rtol=0, atol=0)
    # and the update moved every run (a no-op optimizer would fail the comparison above only by luck)
    assert all(not torch.equal(stacked.detach()[r], start[r]) for r in range(runs))


def test_stacked_adam_matches_the_for_loop_update_to_rounding():
    """The fused kernel against the textbook update written out in float64 (an independent computation):
    after 20 steps on float32 parameters they agree to a few float32 ulps of the step sizes."""
    generator = torch.Generator().manual_seed(1)
    lr, wd, (b1, b2), eps = 0.05, 0.01, (0.9, 0.999), 1e-8
    start = torch.randn(3, 40, 9, generator=generator)
    grads = [torch.randn(3, 40, 9, generator=generator) for _ in range(20)]
    stacked = start.clone().requires_grad_()
    opt = StackedAdam([stacked], lr=[lr] * 3, weight_decay=[wd] * 3)
    theta, m, v = start.double(), torch.zeros(3, 40, 9, dtype=torch.float64), torch.zeros(3, 40, 9, dtype=torch.float64)
    top = float(theta.abs().max())
    for t, g in enumerate(grads, start=1):
        stacked.grad = g.clone()
        opt.step()
        g64 = g.double() + wd * theta
        m = b1 * m + (1 - b1) * g64
        v = b2 * v + (1 - b2) * g64 * g64
        theta = theta - lr / (1 - b1**t) * m / (v.sqrt() / (1 - b2**t) ** 0.5 + eps)
        top = max(top, float(theta.abs().max()))
    # per step: theta + delta rounded to float32 (<= |theta| 2^-24) and delta itself computed in float32 from
    # float32 moments (|delta| <= lr (1 - b1) / sqrt(1 - b2) < 3.2 lr here, relative error a few 2^-23: 10 allowed)
    bound = len(grads) * (top * 2.0**-24 + 10 * 3.2 * lr * 2.0**-23)
    error = float((stacked.detach().double() - theta).abs().max())
    assert 0 < error <= bound, (error, bound)  # not bitwise (another rounding), within the rounding bound


def test_stacked_adam_refuses_mismatched_or_strided_parameters():
    with pytest.raises(ValueError, match="one value per run"):
        StackedAdam([torch.zeros(2, 3, requires_grad=True)], lr=[0.1], weight_decay=[0.0, 0.0])
    with pytest.raises(ValueError, match=r"params\[0\] must be contiguous"):
        StackedAdam([torch.zeros(3, 2).T.requires_grad_()], lr=[0.1, 0.1], weight_decay=[0.0, 0.0])


def test_stack_key_groups_shapes_not_losses():
    a = _config(setting="hscl", beta=0.0, lr=0.01, seed=0)
    b = _config(setting="hucl", beta=30.0, lr=0.1, seed=5, tau=0.5)
    c = _config(batch_size=16)
    assert stack_key(a) == stack_key(b) and can_stack([a, b])
    assert not can_stack([a, c])
    assert group_stacks([a, c, b], max_runs=1) == [[0], [2], [1]]
    assert group_stacks([a, c, b]) == [[0, 2], [1]]
    with pytest.raises(ValueError, match="stack_key"):
        run_stack([a, c])


@pytest.mark.parametrize("case", ["unconstrained-weighted", "unconstrained-sampled", "linear-weighted-noise"])
def test_authors_convention_stack_matches_sequential(case):
    """convention="authors" goes through batch_loss per run (the stacked kernel has the theory's pairs only):
    the sequential computation operation for operation, except the linear model's baddbmm (TOL)."""
    config = _config(**CASES[case], convention="authors", setting="hucl", beta=5.0)
    sequential = run(config)
    [stacked] = run_stack([config])
    _assert_same_run(sequential, stacked, tol=0.0 if config.model == "unconstrained" else TOL)
    theory = run(config.replace(convention="theory"))
    assert [r.loss for r in theory.history] != [r.loss for r in stacked.history]  # the convention took effect
    assert stack_key(config) != stack_key(config.replace(convention="theory"))


@pytest.mark.parametrize("norm", ["sphere", "ball"])
def test_unconstrained_rows_equal_indexing_and_accumulate(norm):
    """The stacked table's rows (one index_select) and its gradient (index_add_ into a kept buffer) equal
    W[runs, idx] under autograd bit for bit, for batches of distinct rows as the engine draws them; a second
    backward adds to W.grad, and after zero_grad the kept buffer starts from zero again."""
    from ncgeom.geometry import normalize
    from ncgeom.models.stacked import StackedEncoder

    generator = torch.Generator().manual_seed(0)
    table = torch.randn(3, 10, 4, generator=generator, dtype=torch.float64)
    idx = torch.stack([torch.randperm(10, generator=generator)[:6] for _ in range(3)])
    upstream = torch.randn(3, 6, 4, generator=generator, dtype=torch.float64)
    encoder = StackedEncoder("unconstrained", [table], norm=norm)
    reference = table.clone().requires_grad_()

    def indexed():
        return normalize(reference[torch.arange(3)[:, None], idx], norm)

    z, z_ref = encoder(idx), indexed()
    torch.testing.assert_close(z, z_ref, rtol=0, atol=0)
    z.backward(upstream)
    z_ref.backward(upstream)
    torch.testing.assert_close(encoder.params[0].grad, reference.grad, rtol=0, atol=0)
    once = reference.grad.clone()
    encoder(idx).backward(upstream)  # accumulates, as autograd does
    indexed().backward(upstream)
    torch.testing.assert_close(encoder.params[0].grad, reference.grad, rtol=0, atol=0)
    encoder.params[0].grad = None  # StackedAdam.zero_grad
    encoder(idx).backward(upstream)
    torch.testing.assert_close(encoder.params[0].grad, once, rtol=0, atol=0)
    with torch.no_grad():
        torch.testing.assert_close(encoder(idx), z_ref.detach(), rtol=0, atol=0)
