"""Training devices: ``Config.device``, ``--device`` on train/sweep/reproduce, and the CUDA path of both engines.

The first tests run everywhere (the field, its validation and run-name stability, the refusal of a device
that does not exist here, the stack key). The tests marked ``gpu`` need CUDA and are skipped without it
(``pytest -m gpu tests/test_device.py`` on a GPU machine runs them); none has run in CI.

Tolerances of the GPU tests (float64, eps = 2.2e-16):

- batch_loss on CUDA vs the CPU: the same formula summed in another order. Each log-sum-exp over at most B
  terms carries an absolute error of about (B + alpha) eps (a sum of B positive terms: B eps relative; the
  shift alpha max S: alpha eps), two of them per anchor, in both implementations: TOL_LOSS = 8 (B + alpha) eps.
  The gradient dZ = G Z + G^T Z sums B terms of G, each known to that error: the same bound relative to
  max |dZ|.
- stacked vs sequential on CUDA: tests/test_stacked.py's TOL = 100 T B eps (another kernel for the weighted
  estimator; both engines' Adam is torch's fused kernel, given each run's own slice by StackedAdam, bitwise
  on the CPU; on CUDA not checked, so at most one rounding per update is allowed, within the same T B eps
  budget).
- a weighted float64 run on CUDA vs the same run on the CPU: the same data, initialization and batches
  (drawn on the CPU), no per-step draws, another kernel (triton or blocked on CUDA, blocked on the CPU):
  the same TOL.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from typing import Any

import numpy as np
import pytest
import torch

from ncgeom.campaigns.plan import sweep_configs
from ncgeom.campaigns.spec import load_spec, run_name
from ncgeom.campaigns.sweep import run_sweep
from ncgeom.cli.main import main
from ncgeom.geometry import simplex_etf
from ncgeom.losses import batch_loss, select_backend
from ncgeom.reproduce.pipeline import _check_manifest
from ncgeom.reproduce.scales import scale_parameters
from ncgeom.runs import Config, run
from ncgeom.runs.config import LATE_FIELDS, config_from_dict
from ncgeom.runs.setup import check_device, seed_streams, step_generator
from ncgeom.runs.stacked import group_stacks, run_stack, stack_key

EPS64 = float(np.finfo(np.float64).eps)
BASE: dict[str, Any] = dict(dtype="float64", epochs=3, classes=4, samples_per_class=16, batch_size=32, setting="hscl",
                            beta=2.0, hidden_dim=16, test_per_class=8, lr=0.05)
STEPS = 3 * 2  # epochs x ceil(N / B)
TOL = 100 * STEPS * 32 * EPS64  # tests/test_stacked.py, module docstring

cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


@pytest.fixture
def no_cuda(monkeypatch):
    """CUDA absent, whatever this machine has."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)


# --- everywhere --------------------------------------------------------------------------------------


def test_device_field_defaults_to_cpu_and_keeps_cpu_run_names():
    cfg = Config(**BASE)
    assert cfg.device == "cpu" and "device" not in cfg.to_dict()
    # a saved config without the key (every run made before the field existed) loads with the default
    assert config_from_dict({k: v for k, v in cfg.to_dict().items()}) == cfg
    # the run name hashes to_json: for a CPU run, the fields that existed before the late ones, as before
    assert json.loads(cfg.to_json()) == {f: v for f, v in vars(cfg).items() if f not in LATE_FIELDS}
    gpu = cfg.replace(device="cuda:1")
    assert gpu.to_dict()["device"] == "cuda:1" and config_from_dict(gpu.to_dict()) == gpu
    assert run_name(gpu, ("beta",)) != run_name(cfg, ("beta",))


@pytest.mark.parametrize("bad", ["gpu", "CUDA", "cuda:", "cuda:-1", "cuda:01", "cpu:0", "cuda:1x"])
def test_device_field_rejects_other_names(bad):
    with pytest.raises(ValueError, match=r"^device must be 'cpu', 'cuda' or 'cuda:N'"):
        Config(device=bad)


def test_device_field_rejects_a_non_string():
    with pytest.raises(ValueError, match=r"^device: expected a string, got 0 \(int\)"):
        config_from_dict({"device": 0})


def test_device_is_part_of_the_stack_key():
    a = Config(**BASE)
    b = a.replace(device="cuda")
    assert stack_key(a) != stack_key(b)
    assert group_stacks([a, b, a.replace(seed=1)]) == [[0, 2], [1]]


def test_cpu_step_generator_is_the_init_generator_continued():
    *_, generator = seed_streams(3)
    assert step_generator(generator, "cpu") is generator
    assert check_device("cpu") == torch.device("cpu")


@pytest.mark.usefixtures("no_cuda")
def test_cuda_without_cuda_is_refused_before_anything_is_written(tmp_path):
    config = Config(**BASE, device="cuda")
    for start in (lambda: run(config, out_dir=tmp_path / "seq"),
                  lambda: run_stack([config], out_dirs=[tmp_path / "stk"])):
        with pytest.raises(ValueError, match=r"^--device cuda: CUDA is not available"):
            start()
    with pytest.raises(ValueError, match=r"^--device cuda:0: CUDA is not available"):
        run_sweep("claim6_hardness_nc", tmp_path / "sweep", scale="tiny", device="cuda:0")
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_cuda_index_beyond_the_device_count_is_refused(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    with pytest.raises(ValueError, match=r"^--device cuda:1: this machine has 1 CUDA device\(s\), cuda:0 to cuda:0$"):
        check_device("cuda:1")


@pytest.mark.usefixtures("no_cuda")
@pytest.mark.parametrize("command", [
    ["train", "--epochs", "1", "--quiet"],
    ["sweep", "claim6_hardness_nc", "--scale", "tiny"],
    ["reproduce", "--tiny"],
])
def test_cli_device_cuda_without_cuda_exits_2_with_one_line(command, tmp_path, capsys):
    out = tmp_path / "out"
    code = main([*command, "--out", str(out), "--device", "cuda"])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and err.startswith(f"ncgeom {command[0]}: error: --device cuda: CUDA is not available")
    assert not out.exists()


def test_sweep_device_override_replaces_every_config_and_keeps_cpu_names():
    spec = load_spec("claim6_hardness_nc")
    keys = spec.grid_keys("tiny")
    plain = sweep_configs(spec, scale="tiny")
    cpu = sweep_configs(spec, scale="tiny", device="cpu")
    gpu = sweep_configs(spec, scale="tiny", device="cuda")
    assert [run_name(c, keys) for c in cpu] == [run_name(c, keys) for c in plain]
    assert [c.replace(device="cpu") for c in gpu] == plain and {c.device for c in gpu} == {"cuda"}
    with pytest.raises(ValueError, match=r"^device must be"):
        sweep_configs(spec, scale="tiny", device="tpu")


def test_reproduction_folder_keeps_one_device(tmp_path):
    tiny = scale_parameters("tiny")
    _check_manifest(tmp_path, tiny, None)
    _check_manifest(tmp_path, tiny, "cpu")  # the CPU is the specs' device: the same reproduction
    with pytest.raises(ValueError, match=r"^--device cuda: --out .* already holds a reproduction on cpu"):
        _check_manifest(tmp_path, tiny, "cuda")
    other = tmp_path / "gpu"
    other.mkdir()
    _check_manifest(other, tiny, "cuda")
    with pytest.raises(ValueError, match=r"^--device cpu: --out .* already holds a reproduction on cuda"):
        _check_manifest(other, tiny, None)


# --- CUDA ------------------------------------------------------------------------------------------


def _assert_same_run(a, b, *, tol: float) -> None:
    assert a.status == b.status == "completed"
    assert len(a.history) == len(b.history)
    np.testing.assert_allclose([r.loss for r in b.history], [r.loss for r in a.history], rtol=tol, atol=tol)
    np.testing.assert_allclose(b.embeddings, a.embeddings, rtol=tol, atol=tol)
    for key, value in a.final.metrics.items():
        if isinstance(value, float):  # O(1)-conditioned float64 functions of the embeddings (tests/test_stacked.py)
            np.testing.assert_allclose(b.final.metrics[key], value, rtol=10 * tol, atol=10 * tol, err_msg=key)


def _batch(size: int, dim: int, classes: int, seed: int):
    rng = np.random.default_rng(seed)
    z = rng.standard_normal((size, dim))
    z /= np.linalg.norm(z, axis=1, keepdims=True)
    return torch.as_tensor(z), torch.as_tensor(np.arange(size) % classes)


@pytest.mark.gpu
@cuda
def test_auto_backend_on_cuda_is_triton_where_it_applies():
    z = torch.zeros(8, 3, device="cuda")
    try:
        import triton  # noqa: F401

        expected = "triton"
    except ImportError:
        expected = "blocked"
    assert select_backend(z, estimator="weighted", reduction="mean", detach_weights=True) == expected
    assert select_backend(z, estimator="weighted", reduction="mean", detach_weights=True,
                          convention="authors") == "blocked"
    assert select_backend(z, estimator="sampled", reduction="mean", detach_weights=True) == "dense"


@pytest.mark.gpu
@cuda
@pytest.mark.parametrize("backend", ["auto", "blocked", "dense"])
@pytest.mark.parametrize("setting", ["scl", "hscl", "ucl", "hucl"])
def test_weighted_batch_loss_on_cuda_matches_cpu_float64(backend, setting):
    size, beta, tau = 64, 5.0, 0.5
    z, y = _batch(size, 8, 4, seed=1)
    values, grads = [], []
    for device in ("cpu", "cuda"):
        zd = z.to(device).requires_grad_(True)
        loss = batch_loss(zd, y.to(device), setting, beta=beta, tau=tau, num_negatives="batch", backend=backend)
        loss.backward()
        values.append(loss.detach().cpu())
        grads.append(zd.grad.cpu())
    tol = 8 * (size + beta + 1 / tau) * EPS64  # module docstring
    torch.testing.assert_close(values[1], values[0], rtol=tol, atol=tol)
    torch.testing.assert_close(grads[1], grads[0], rtol=tol, atol=tol * float(grads[0].abs().max()))


@pytest.mark.gpu
@cuda
@pytest.mark.parametrize("setting", ["scl", "hscl"])
def test_sampled_batch_loss_on_cuda_matches_cpu_at_an_exact_nc_batch(setting):
    """At an exact NC batch every negative of a supervised anchor has S = -1/(C-1): the value does not depend
    on which negatives are drawn, so CUDA's draws (another generator) give the CPU value."""
    classes = 4
    y = torch.as_tensor(np.arange(32) % classes)
    z = torch.as_tensor(simplex_etf(classes)[y.numpy()])
    values = []
    for device in ("cpu", "cuda"):
        generator = torch.Generator(device=device).manual_seed(0)
        values.append(batch_loss(z.to(device), y.to(device), setting, beta=5.0, num_negatives=4, estimator="sampled",
                                 psi="infonce", generator=generator).cpu())
    tol = 8 * (32 + 5.0 + 1.0) * EPS64
    torch.testing.assert_close(values[1], values[0], rtol=tol, atol=tol)


CUDA_CASES: dict[str, dict[str, Any]] = {
    "unconstrained-weighted": dict(),
    "linear-weighted": dict(model="linear"),
    "mlp-weighted": dict(model="mlp"),
    "linear-weighted-noise": dict(model="linear", positives="noise"),
    "unconstrained-sampled": dict(estimator="sampled", num_negatives=4),
    "unconstrained-authors": dict(convention="authors", setting="hucl"),
}


@pytest.mark.gpu
@cuda
@pytest.mark.parametrize("case", sorted(CUDA_CASES))
def test_stacked_matches_sequential_on_cuda(case):
    config = Config(**{**BASE, **CUDA_CASES[case]}, device="cuda")
    _assert_same_run(run(config), run_stack([config])[0], tol=TOL)


@pytest.mark.gpu
@cuda
@pytest.mark.parametrize("model", ["unconstrained", "mlp"])
def test_weighted_run_on_cuda_matches_the_cpu_run(model):
    config = Config(**BASE, model=model)
    _assert_same_run(run(config), run(config.replace(device="cuda")), tol=TOL)


DETERMINISM_CHILD = textwrap.dedent('''
    import sys
    import numpy as np
    import torch
    from ncgeom.runs import Config, run
    from ncgeom.runs.stacked import run_stack

    torch.use_deterministic_algorithms(True)  # CUBLAS_WORKSPACE_CONFIG is set by the parent, before CUDA starts
    base = dict(device="cuda", dtype=sys.argv[2], epochs=3, classes=4, samples_per_class=16, batch_size=32,
                setting="hscl", beta=2.0, hidden_dim=16, test_per_class=8)
    configs = [Config(**base), Config(**{**base, "model": "linear", "positives": "noise", "seed": 1}),
               Config(**{**base, "model": "mlp", "setting": "hucl", "seed": 2})]
    mates = [Config(**{**base, "setting": s, "seed": 10 + i}) for i, s in enumerate(["hscl", "hucl", "scl"])]
    arrays = {}
    for attempt in range(2):
        for i, c in enumerate(configs):
            for engine, result in (("seq", run(c)), ("stk", run_stack([c])[0])):
                arrays[f"{engine}{i}_{attempt}_z"] = result.embeddings
                arrays[f"{engine}{i}_{attempt}_loss"] = np.array([h.loss for h in result.history])
        for i, result in enumerate(run_stack(mates)):
            arrays[f"stack{i}_{attempt}_z"] = result.embeddings
    np.savez(sys.argv[1], **arrays)
''')


@pytest.mark.gpu
@cuda
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_weighted_runs_on_cuda_are_bitwise_reproducible(dtype, tmp_path):
    """With torch.use_deterministic_algorithms(True) and CUBLAS_WORKSPACE_CONFIG=:4096:8 (set before CUDA starts:
    in a child process), the weighted estimator's runs repeat bitwise on one GPU, in both engines."""
    out = tmp_path / "runs.npz"
    env = {**os.environ, "CUBLAS_WORKSPACE_CONFIG": ":4096:8"}
    child = subprocess.run([sys.executable, "-c", DETERMINISM_CHILD, str(out), dtype], env=env, capture_output=True,
                           text=True, timeout=600)
    assert child.returncode == 0, child.stderr[-4000:]
    arrays = np.load(out)
    names = sorted({k.replace("_0_", "_?_") for k in arrays.files if "_0_" in k})
    assert len(names) == 3 * 2 * 2 + 3
    for name in names:
        np.testing.assert_array_equal(arrays[name.replace("_?_", "_1_")], arrays[name.replace("_?_", "_0_")],
                                      err_msg=name)
