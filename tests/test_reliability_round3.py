"""Reliability round 3 (issue 27, items 1, 3, 5-9 and the reproduction's records of issue 22): fast cases.

Each surface gets its own hostile corpus (docs/reliability.md, "Round 3: runs, workers and records"):

- checkpoints: every tensor, step count, hyperparameter and random state of a real Adam state tampered with,
  through :func:`ncgeom.runs.checkpoint.restore` (a small model: the checks are the same for a ResNet); the fields
  and the digest through :func:`ncgeom.runs.checkpoint.load_checkpoint`;
- divergence: a non-finite loss, embedding, gradient or parameter in each of the three drivers;
- validation before writing: options of train, sweep, reproduce and verify that used to be refused late, or never;
- workers: --workers above the machine's bound, pools sized by the work;
- run folders: two writers, killed writers' temporary files, no folder left by a refused run;
- the reproduction's records: malformed manifests, figure statuses and stage records;
- warnings of dependencies around an error line.

Clean = the documented outcome: a ValueError (through the CLI: exit 2) of ONE line naming the file or the option
and the field, with nothing written or changed; a divergence recorded as "diverged" with a summary (exit 1). The
heavy cases (a real ResNet checkpoint tampered with through ``ncgeom train --resume``, SIGTERM during a checkpoint
write, claims with stalled and killed workers, many workers under a small budget) are in
``test_reliability_round3_slow.py``.
"""

from __future__ import annotations

import copy
import json
import os
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from conftest import run_main

from ncgeom.runs import Config
from ncgeom.runs.checkpoint import (
    CHECKPOINT_FILE,
    DIGEST_FILE,
    Checkpoint,
    CheckpointDigest,
    load_checkpoint,
    restore,
    rng_states,
    save_checkpoint,
)
from ncgeom.runs.records import EpochRecord
from ncgeom.runs.setup import seed_streams

MAX_MESSAGE = 600


def assert_one_line(call: Callable[[], object], *fragments: str) -> str:
    """``call`` raises a one-line ValueError containing every fragment, and prints no warning."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(ValueError) as info:
            call()
    message = str(info.value)
    assert "\n" not in message and len(message) <= MAX_MESSAGE, message[:2000]
    for fragment in fragments:
        assert fragment in message, (fragment, message)
    assert not caught, [str(w.message) for w in caught]
    return message


def assert_cli_one_line(argv: list[str], capsys, *fragments: str, code: int = 2) -> str:
    rc, out, err = run_main(argv, capsys)
    lines = err.splitlines()
    assert rc == code and len(lines) == 1 and "Traceback" not in err, (rc, err)
    assert lines[0].startswith(f"ncgeom {argv[0]}: error: "), lines[0]
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
    return lines[0]


def tree_state(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` (hidden ones included) with its bytes: "left exactly as it was" compares these."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


# ============================================================================ surface 1: checkpoint tensors
STEPS_PER_EPOCH = 2


def _model() -> torch.nn.Module:
    gen = torch.Generator().manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4), torch.nn.Linear(4, 2))
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=gen))
    return model


def _optimizer(model):
    from ncgeom.optim import adam

    return adam(model.parameters(), lr=0.05, weight_decay=1e-4)


@pytest.fixture(scope="module")
def trained() -> Checkpoint:
    """A checkpoint of a small model after one epoch of STEPS_PER_EPOCH Adam steps (the run's own state dicts)."""
    model = _model()
    optimizer = _optimizer(model)
    x = torch.randn(8, 3, generator=torch.Generator().manual_seed(1))
    for _ in range(STEPS_PER_EPOCH):
        optimizer.zero_grad()
        model(x).pow(2).sum().backward()
        optimizer.step()
    streams = seed_streams(0)
    for rng in streams[:3]:
        rng.random(3)  # states that differ from a fresh run's
    initial = EpochRecord(0, None, 0.5, None)
    return Checkpoint(path=Path("/ckpt/checkpoint.pt"), config=Config(), epoch=1, model=model.state_dict(),
                      optimizer=optimizer.state_dict(), history=(EpochRecord(1, 0.7, 0.5, 0.2),), initial=initial,
                      elapsed_s=1.0, rng=rng_states(*streams, streams.torch))


def _fresh():
    model = _model()
    with torch.no_grad():
        for p in model.parameters():
            p.zero_()
    streams = seed_streams(0)
    return model, _optimizer(model), streams


def _param(n: int) -> Callable[[dict], Any]:
    return lambda state: state["optimizer"]["state"][n]


def _set(path: tuple, value: Any) -> Callable[[dict], None]:
    def mutate(d: dict) -> None:
        target = d
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value(target[path[-1]]) if callable(value) else value
    return mutate


def _delete(path: tuple) -> Callable[[dict], None]:
    def mutate(d: dict) -> None:
        target = d
        for key in path[:-1]:
            target = target[key]
        del target[path[-1]]
    return mutate


def _nan_at(t: torch.Tensor) -> torch.Tensor:
    t = t.clone()
    t.view(-1)[0] = float("nan")
    return t


M, O, R = "model", "optimizer", "rng"
#: (name, mutation of the checkpoint's dicts, fragment of the field the message must name)
RESTORE_CASES: list[tuple[str, Callable[[dict], None], str]] = [
    # the model
    ("model: a key missing", _delete((M, "0.weight")), "model: expected the 9 entries"),
    ("model: an extra key", _set((M, "extra"), torch.zeros(1)), "model: expected the 9 entries"),
    ("model: weight of another shape", _set((M, "0.weight"), lambda t: torch.zeros(3, 4)), "model.0.weight: expected a tensor of shape [4, 3]"),
    ("model: weight with an extra row", _set((M, "0.weight"), lambda t: torch.zeros(5, 3)), "model.0.weight"),
    ("model: weight of float64", _set((M, "0.weight"), lambda t: t.double()), "dtype torch.float32"),
    ("model: weight of int64", _set((M, "0.weight"), lambda t: t.long()), "model.0.weight"),
    ("model: weight a list", _set((M, "0.weight"), lambda t: t.tolist()), "model.0.weight: expected a dense tensor"),
    ("model: weight None", _set((M, "2.bias"), None), "model.2.bias: expected a dense tensor"),
    ("model: weight with NaN", _set((M, "0.weight"), _nan_at), "model.0.weight: holds non-finite values"),
    ("model: weight with inf", _set((M, "2.weight"), lambda t: t.fill_(float("inf"))), "model.2.weight: holds non-finite"),
    ("model: weight a transposed view", _set((M, "2.weight"), lambda t: torch.zeros(2, 4).t().contiguous().t()), "model.2.weight: expected a contiguous tensor"),
    ("model: a sparse weight", _set((M, "0.weight"), lambda t: t.to_sparse()), "model.0.weight: expected a dense tensor"),
    ("model: batch-norm count negative", _set((M, "1.num_batches_tracked"), torch.tensor(-5)), "model.1.num_batches_tracked: holds negative"),
    ("model: batch-norm count a float", _set((M, "1.num_batches_tracked"), torch.tensor(2.0)), "model.1.num_batches_tracked"),
    ("model: running variance of another shape", _set((M, "1.running_var"), torch.ones(5)), "model.1.running_var"),
    ("model: running mean NaN", _set((M, "1.running_mean"), _nan_at), "model.1.running_mean: holds non-finite"),
    ("model: a dict", _set((M,), lambda m: {"a": m}), "model: expected the 9 entries"),
    # the optimizer's moments: the out-of-bounds read and write of the fused step (issue 27, item 1)
    ("exp_avg larger than its parameter", _set((O, "state", 0, "exp_avg"), torch.zeros(400, 300)), "optimizer.state[0].exp_avg: expected a tensor of shape [4, 3]"),
    ("exp_avg smaller than its parameter", _set((O, "state", 0, "exp_avg"), torch.zeros(1)), "optimizer.state[0].exp_avg"),
    ("exp_avg_sq of another shape", _set((O, "state", 2, "exp_avg_sq"), torch.zeros(2, 4)), "optimizer.state[2].exp_avg_sq"),
    ("exp_avg of float64", _set((O, "state", 1, "exp_avg"), lambda t: t.double()), "optimizer.state[1].exp_avg"),
    ("exp_avg_sq negative", _set((O, "state", 3, "exp_avg_sq"), lambda t: -t - 1), "optimizer.state[3].exp_avg_sq: holds negative"),
    ("exp_avg NaN", _set((O, "state", 0, "exp_avg"), _nan_at), "optimizer.state[0].exp_avg: holds non-finite"),
    ("exp_avg a zero-stride view", _set((O, "state", 0, "exp_avg"), lambda t: torch.zeros(1).expand(4, 3)), "optimizer.state[0].exp_avg: expected a contiguous tensor"),
    ("exp_avg missing", _delete((O, "state", 0, "exp_avg")), "optimizer.state[0]: expected exactly the keys"),
    ("an amsgrad moment added", _set((O, "state", 0, "max_exp_avg_sq"), torch.zeros(4, 3)), "optimizer.state[0]: expected exactly"),
    ("a parameter's state missing", _delete((O, "state", 5)), "optimizer.state: expected one state per parameter"),
    ("a state for no parameter", _set((O, "state", 9), {}), "optimizer.state: expected one state per parameter"),
    ("state a list", _set((O, "state"), lambda s: list(s.values())), "optimizer.state: expected one state per parameter"),
    # step counts
    ("step 123", _set((O, "state", 0, "step"), torch.tensor(123.0)), "optimizer.state[0].step: 123.0 steps in the checkpoint, 2 by its epoch"),
    ("step 0", _set((O, "state", 4, "step"), torch.tensor(0.0)), "optimizer.state[4].step"),
    ("step a vector", _set((O, "state", 0, "step"), torch.tensor([2.0, 2.0])), "optimizer.state[0].step: expected a tensor of shape []"),
    ("step of float64", _set((O, "state", 0, "step"), torch.tensor(2.0, dtype=torch.float64)), "optimizer.state[0].step"),
    ("step an int", _set((O, "state", 0, "step"), 2), "optimizer.state[0].step: expected a dense tensor"),
    ("step NaN", _set((O, "state", 1, "step"), torch.tensor(float("nan"))), "optimizer.state[1].step"),
    # hyperparameters against the config (issue 27: lr 123 resumed at lr 123)
    ("lr 123", _set((O, "param_groups", 0, "lr"), 123.0), "optimizer.param_groups[0].lr: 123.0 in the checkpoint, 0.05 by its config"),
    ("lr a tensor", _set((O, "param_groups", 0, "lr"), torch.tensor(0.05)), "optimizer.param_groups[0].lr: a Tensor"),
    ("lr an int", _set((O, "param_groups", 0, "lr"), 1), "optimizer.param_groups[0].lr"),
    ("weight decay changed", _set((O, "param_groups", 0, "weight_decay"), 0.5), "optimizer.param_groups[0].weight_decay"),
    ("betas changed", _set((O, "param_groups", 0, "betas"), (0.5, 0.999)), "optimizer.param_groups[0].betas"),
    ("betas a list", _set((O, "param_groups", 0, "betas"), [0.9, 0.999]), "optimizer.param_groups[0].betas"),
    ("eps changed", _set((O, "param_groups", 0, "eps"), 1e-3), "optimizer.param_groups[0].eps"),
    ("amsgrad on", _set((O, "param_groups", 0, "amsgrad"), True), "optimizer.param_groups[0].amsgrad"),
    ("maximize on", _set((O, "param_groups", 0, "maximize"), True), "optimizer.param_groups[0].maximize"),
    ("not fused", _set((O, "param_groups", 0, "fused"), None), "optimizer.param_groups[0].fused"),
    ("parameters reordered", _set((O, "param_groups", 0, "params"), lambda p: p[::-1]), "optimizer.param_groups[0].params"),
    ("a key added to a group", _set((O, "param_groups", 0, "momentum"), 0.9), "optimizer.param_groups[0]: expected exactly the keys"),
    ("two groups", _set((O, "param_groups"), lambda g: g + g), "optimizer.param_groups: expected 1 group"),
    ("groups a dict", _set((O, "param_groups"), lambda g: g[0]), "optimizer.param_groups: expected 1 group"),
    ("optimizer without its state", _delete((O, "state")), "optimizer: expected an Adam state dict"),
    # random states
    ("data rng not a dict", _set((R, "data"), 5), "rng.data: not a state of the run's bit generator"),
    ("data rng of MT19937", _set((R, "data"), np.random.MT19937(0).state), "rng.data"),
    ("init rng state beyond 128 bits", _set((R, "init", "state", "state"), 2**200), "rng.init"),
    ("batch rng without its inc", _delete((R, "batch", "state", "inc")), "rng.batch"),
    ("batch rng state a string", _set((R, "batch", "state", "state"), "x"), "rng.batch"),
    ("torch state too short", _set((R, "torch"), lambda t: t[:100]), "rng.torch: expected a tensor of shape [5056]"),
    ("torch state of float32", _set((R, "torch"), lambda t: t.float()), "rng.torch"),
    ("torch state None", _set((R, "torch"), None), "rng.torch: expected a dense tensor"),
    ("torch state a list", _set((R, "torch"), lambda t: t.tolist()), "rng.torch"),
    ("step generator given on the CPU", _set((R, "step"), lambda s: torch.zeros(5056, dtype=torch.uint8)), "rng.step: expected None"),
]


def _tampered(checkpoint: Checkpoint, mutate: Callable[[dict], None]) -> Checkpoint:
    parts = {M: copy.deepcopy(checkpoint.model), O: copy.deepcopy(checkpoint.optimizer), R: copy.deepcopy(checkpoint.rng)}
    mutate(parts)
    return Checkpoint(path=checkpoint.path, config=checkpoint.config, epoch=checkpoint.epoch, model=parts[M],
                      optimizer=parts[O], history=checkpoint.history, initial=checkpoint.initial,
                      elapsed_s=checkpoint.elapsed_s, rng=parts[R])


def _snapshot(model, optimizer, streams) -> tuple:
    return ({k: v.clone() for k, v in model.state_dict().items()}, copy.deepcopy(optimizer.state_dict()),
            [g.bit_generator.state for g in streams[:3]], streams.torch.get_state())


def _assert_untouched(before: tuple, after: tuple) -> None:
    for key, tensor in before[0].items():
        torch.testing.assert_close(after[0][key], tensor, rtol=0, atol=0, msg=key)
    assert after[1]["state"] == {} and after[1]["param_groups"] == before[1]["param_groups"]
    assert after[2] == before[2] and torch.equal(after[3], before[3])


@pytest.mark.parametrize("name, mutate, field", RESTORE_CASES, ids=[c[0] for c in RESTORE_CASES])
def test_restore_refuses_a_tampered_checkpoint_before_loading_anything(trained, name, mutate, field):
    model, optimizer, streams = _fresh()
    before = _snapshot(model, optimizer, streams)
    message = assert_one_line(lambda: restore(_tampered(trained, mutate), model=model, optimizer=optimizer,
                                              streams=streams, step=streams.torch, steps_per_epoch=STEPS_PER_EPOCH),
                              str(trained.path), field)
    assert message.startswith(f"{trained.path}: ")
    _assert_untouched(before, _snapshot(model, optimizer, streams))


def test_restore_loads_an_untampered_checkpoint_exactly(trained):
    """The control of the corpus: the same checks accept the run's own state, which is then loaded bit for bit,
    and the fused Adam step runs from it."""
    model, optimizer, streams = _fresh()
    restore(trained, model=model, optimizer=optimizer, streams=streams, step=streams.torch,
            steps_per_epoch=STEPS_PER_EPOCH)
    for key, tensor in trained.model.items():
        torch.testing.assert_close(model.state_dict()[key], tensor, rtol=0, atol=0, msg=key)
    for i, state in trained.optimizer["state"].items():
        for name in ("exp_avg", "exp_avg_sq", "step"):
            torch.testing.assert_close(optimizer.state_dict()["state"][i][name], state[name], rtol=0, atol=0)
    assert [g.bit_generator.state for g in streams[:3]] == [trained.rng[k] for k in ("data", "init", "batch")]
    assert torch.equal(streams.torch.get_state(), trained.rng["torch"])
    model(torch.ones(4, 3)).sum().backward()
    optimizer.step()
    assert all(bool(torch.isfinite(p).all()) for p in model.parameters())


# ============================================================================ surface 2: checkpoint files
def _image_config(data_dir: str, **changes) -> Config:
    return Config(**{**dict(dataset="imagefolder", data_dir=data_dir, model="resnet18", classes=4, epochs=2,
                            batch_size=8), **changes})


def _save(folder: Path, config: Config, *, epoch: int = 1, **overrides) -> Path:
    """A well-formed checkpoint file of a small model (load_checkpoint reads fields, not the model's shapes)."""
    model = torch.nn.Linear(2, 2)
    streams = seed_streams(0)
    history = overrides.pop("history", [EpochRecord(e, 0.5, 0.4, 0.1) for e in range(1, epoch + 1)])
    path = folder / CHECKPOINT_FILE
    save_checkpoint(path, config=config, epoch=epoch, model=model, optimizer=_optimizer(model), history=history,
                    initial=overrides.pop("initial", EpochRecord(0, None, 0.4, None)),
                    elapsed_s=overrides.pop("elapsed_s", 1.0), rng=rng_states(*streams, streams.torch))
    return path


def _rewrite(path: Path, change: Callable[[dict], None], *, digest: bool = True) -> None:
    """Change the payload of a checkpoint file; with ``digest``, record the new file's digest as a writer would."""
    payload = torch.load(path, weights_only=True)
    change(payload)
    torch.save(payload, path)
    if digest:
        from ncgeom.runs.checkpoint import file_sha256

        CheckpointDigest((file_sha256(path),)).save(path.parent)


LOAD_CASES: list[tuple[str, Callable[[dict], None], str]] = [
    ("epoch 0", _set(("epoch",), 0), "epoch: expected an integer >= 1, got 0"),
    ("epoch a bool", _set(("epoch",), True), "epoch: expected an integer >= 1"),
    ("epoch a float", _set(("epoch",), 1.0), "epoch: expected an integer >= 1"),
    ("elapsed NaN", _set(("elapsed_s",), float("nan")), "elapsed_s: expected a finite float >= 0"),
    ("elapsed negative", _set(("elapsed_s",), -1.0), "elapsed_s"),
    ("elapsed a string", _set(("elapsed_s",), "1"), "elapsed_s"),
    ("model a list", _set(("model",), [1]), "model: expected a dict"),
    ("optimizer None", _set(("optimizer",), None), "optimizer: expected a dict"),
    ("rng a list", _set(("rng",), []), "rng: expected a dict"),
    ("rng without step", _delete(("rng", "step")), "rng: expected exactly the keys"),
    ("history a dict", _set(("history",), {}), "history: expected a list of epoch records"),
    ("history short", _set(("history",), []), "history: expected the records of epochs 1 to 1"),
    ("history of epoch 5", _set(("history", 0, "epoch"), 5), "history: expected the records of epochs 1 to 1"),
    ("history loss a string", _set(("history", 0, "loss"), "0.5"), "history[0].loss: expected a number"),
    ("history epoch a string", _set(("history", 0, "epoch"), "1"), "history[0].epoch: expected an integer"),
    ("history with an unknown key", _set(("history", 0, "extra"), 1), "history[0]"),
    ("history record a list", _set(("history", 0), [1]), "history[0]"),
    ("history metric a string", _set(("history", 0, "metrics"), {"nc1": "x"}), "history[0].metrics.nc1"),
    ("initial of epoch 1", _set(("initial", "epoch"), 1), "history: expected the records of epochs 1 to 1 after an initial record of epoch 0"),
    ("initial nc_value None", _set(("initial", "nc_value"), None), "initial.nc_value: expected a number"),
    ("config of a beta of 1e30", _set(("config", "beta"), 1e30), "config: not a valid config"),
    ("config with an unknown field", _set(("config", "lr2"), 1.0), "config: not a valid config"),
    ("config of another lr", _set(("config", "lr"), 123.0), "lr = 123.0 in the checkpoint, 0.05 now"),
    ("format 2", _set(("format",), 2), "not an ncgeom checkpoint of format 1"),
    ("format a string", _set(("format",), "1"), "not an ncgeom checkpoint of format 1"),
]


@pytest.mark.parametrize("name, change, fragment", LOAD_CASES, ids=[c[0] for c in LOAD_CASES])
def test_load_checkpoint_refuses_each_malformed_field(tmp_path, name, change, fragment):
    config = _image_config(str(tmp_path))
    path = _save(tmp_path, config)
    _rewrite(path, change)
    assert_one_line(lambda: load_checkpoint(path, config), str(path), fragment)


DIGEST_CASES: list[tuple[str, Callable[[Path], None], str]] = [
    ("a byte of the checkpoint flipped", lambda f: _flip(f / CHECKPOINT_FILE), "is not the one recorded in checkpoint_digest.json"),
    ("the checkpoint rewritten, its digest not", lambda f: _rewrite(f / CHECKPOINT_FILE, _set(("elapsed_s",), 2.0), digest=False),
     "is not the one recorded"),
    ("digest record not JSON", lambda f: (f / DIGEST_FILE).write_text("{"), "checkpoint_digest.json: not a checkpoint digest record"),
    ("digest record a list", lambda f: (f / DIGEST_FILE).write_text("[]"), "not a checkpoint digest record of format 1"),
    ("digest record with an unknown key", lambda f: _digest_json(f, {"format": 1, "sha256": ["0" * 64], "x": 1}), "expected exactly the keys"),
    ("digest of 63 digits", lambda f: _digest_json(f, {"format": 1, "sha256": ["0" * 63]}), "64 lowercase hex digits"),
    ("digest uppercase", lambda f: _digest_json(f, {"format": 1, "sha256": ["A" * 64]}), "64 lowercase hex digits"),
    ("no digest listed", lambda f: _digest_json(f, {"format": 1, "sha256": []}), "non-empty list"),
    ("digest record a FIFO", lambda f: _fifo(f / DIGEST_FILE), "is a FIFO"),
    ("digest record a directory", lambda f: _dir(f / DIGEST_FILE), "is a directory"),
    ("digest record of 1 MiB", lambda f: (f / DIGEST_FILE).write_bytes(b" " * 2**20), "above the 4096 bytes accepted"),
    ("the checkpoint a FIFO", lambda f: _fifo(f / CHECKPOINT_FILE), "is a FIFO"),
    ("the checkpoint a link to /dev/zero", lambda f: _link(f / CHECKPOINT_FILE, "/dev/zero"), "a character device"),
]


def _flip(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


def _digest_json(folder: Path, obj) -> None:
    (folder / DIGEST_FILE).write_text(json.dumps(obj))


def _fifo(path: Path) -> None:
    path.unlink()
    os.mkfifo(path)


def _dir(path: Path) -> None:
    path.unlink()
    path.mkdir()


def _link(path: Path, target: str) -> None:
    path.unlink()
    os.symlink(target, path)


@pytest.mark.parametrize("name, damage, fragment", DIGEST_CASES, ids=[c[0] for c in DIGEST_CASES])
def test_load_checkpoint_checks_the_digest_recorded_when_it_was_written(tmp_path, name, damage, fragment):
    config = _image_config(str(tmp_path))
    path = _save(tmp_path, config)
    assert CheckpointDigest.load(tmp_path) is not None
    damage(tmp_path)
    assert_one_line(lambda: load_checkpoint(path, config), fragment)


def test_the_digest_covers_a_checkpoint_killed_at_any_moment_of_its_write(tmp_path, monkeypatch):
    """The record lists the new digest before the new file is renamed into place: a kill between the two leaves the
    old checkpoint with its digest listed, a kill after leaves the new one listed; both load."""
    import ncgeom.runs.checkpoint.file as file_module

    config = _image_config(str(tmp_path), epochs=3)
    _save(tmp_path, config, epoch=1)
    real = file_module.atomic_write_bytes

    def killed(path, data, **kwargs):
        raise KeyboardInterrupt  # as a SIGKILL before the rename: the old file stays

    monkeypatch.setattr(file_module, "atomic_write_bytes", killed)
    with pytest.raises(KeyboardInterrupt):
        _save(tmp_path, config, epoch=2)
    assert load_checkpoint(tmp_path / CHECKPOINT_FILE, config).epoch == 1
    assert len(CheckpointDigest.load(tmp_path).sha256) == 2

    def renamed_then_killed(path, data, **kwargs):
        real(path, data, **kwargs)
        raise KeyboardInterrupt  # the new file in place, its final record not written

    monkeypatch.setattr(file_module, "atomic_write_bytes", renamed_then_killed)
    with pytest.raises(KeyboardInterrupt):
        _save(tmp_path, config, epoch=2)
    assert load_checkpoint(tmp_path / CHECKPOINT_FILE, config).epoch == 2
    monkeypatch.setattr(file_module, "atomic_write_bytes", real)
    _save(tmp_path, config, epoch=3)
    assert len(CheckpointDigest.load(tmp_path).sha256) == 1  # settled: the current file's digest alone


def test_a_checkpoint_without_a_digest_record_is_checked_field_by_field(tmp_path):
    """A checkpoint written before the digest existed: read, its fields checked as every checkpoint's."""
    config = _image_config(str(tmp_path))
    path = _save(tmp_path, config)
    (tmp_path / DIGEST_FILE).unlink()
    assert load_checkpoint(path, config).epoch == 1


def test_the_data_folder_may_be_named_by_another_path_on_resume(tmp_path, monkeypatch):
    """``--resume`` with ``--data-dir ./data`` for a run trained with ``data`` (issue 27, item 9); another folder is
    still another config."""
    (tmp_path / "data").mkdir()
    (tmp_path / "other").mkdir()
    monkeypatch.chdir(tmp_path)
    path = _save(tmp_path, _image_config("data"))
    for same in ("./data", str(tmp_path / "data"), "data/"):
        assert load_checkpoint(path, _image_config(same)).epoch == 1
    assert_one_line(lambda: load_checkpoint(path, _image_config("other")), "data_dir = 'data' in the checkpoint")


# ============================================================================ surface 3: divergence
VECTOR = dict(classes=3, samples_per_class=8, dim=2, batch_size=12, epochs=3)


def _nan_gradient_at(loss_fn, *, step: int):
    """A loss whose value is the real one at every step and whose gradient is NaN from the ``step``-th call on
    (0 * sqrt(|z - z|): a finite 0 whose backward divides 0 by 0)."""
    calls = {"n": 0}

    def loss(z, *args, **kwargs):
        calls["n"] += 1
        value = loss_fn(z, *args, **kwargs)
        if calls["n"] >= step:
            value = value + 0.0 * torch.sqrt((z - z.detach()).abs().sum())
        return value

    return loss


def _nan_loss_at(loss_fn, *, step: int):
    calls = {"n": 0}

    def loss(z, *args, **kwargs):
        calls["n"] += 1
        value = loss_fn(z, *args, **kwargs)
        return value * float("nan") if calls["n"] >= step else value

    return loss


def _patch_prepared_loss(monkeypatch, module, wrap):
    real = module.prepared_loss
    monkeypatch.setattr(module, "prepared_loss", lambda config, generator: wrap(real(config, generator)))


def _patch_stacked_kernel(monkeypatch, wrap):
    import ncgeom.losses.kernels.stacked as kernel

    monkeypatch.setattr(kernel, "stacked_weighted", wrap(kernel.stacked_weighted))


def _assert_diverged(result, out: Path, fragment: str) -> None:
    assert result.status == "diverged" and fragment in result.message, result.message
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "diverged" and fragment in summary["message"]
    assert np.isfinite(np.load(out / "embeddings.npz")["z"]).all()  # the state of the last complete epoch


# where the divergence shows first -> (how it is made, the message)
WHERE = {
    "loss": "loss became non-finite (nan) at epoch 2, step 1",
    "gradient": "the gradient became non-finite at epoch 2, step 1",
    "parameters": "the parameters became non-finite in the update of epoch 1, step 1",
    "embeddings": "embeddings became non-finite at epoch 1, step 2",
}


@pytest.mark.parametrize("where", list(WHERE))
def test_the_single_driver_records_divergence_wherever_it_shows(tmp_path, monkeypatch, where):
    import ncgeom.runs.single as single
    from ncgeom.runs import run

    config = Config(**VECTOR)  # 2 steps per epoch
    if where == "loss":
        _patch_prepared_loss(monkeypatch, single, lambda f: _nan_loss_at(f, step=3))
    elif where == "gradient":
        _patch_prepared_loss(monkeypatch, single, lambda f: _nan_gradient_at(f, step=3))
    elif where == "parameters":
        config = config.replace(lr=1e38, model="mlp", norm="none")  # the first update overflows float32
    else:
        config = config.replace(lr=1e30, model="mlp", norm="none")  # finite parameters, overflowing embeddings
    _assert_diverged(run(config, out_dir=tmp_path), tmp_path, WHERE[where])


@pytest.mark.parametrize("where", list(WHERE))
def test_the_stacked_driver_stops_the_diverging_run_alone(tmp_path, monkeypatch, where):
    """Run 0 of a stack of two diverges where the single driver's does, with the same message; run 1 completes."""
    from ncgeom.runs import run_stack

    config = Config(**VECTOR)
    other = config.replace(seed=1)
    if where in ("loss", "gradient"):
        from ncgeom.runs.stacked import StackedDriver

        probing = {"on": False}
        real_probe = StackedDriver.probe

        def probe(self):  # the probes (ncgeom.runs.convergence) call the kernel too: not counted as steps
            probing["on"] = True
            try:
                return real_probe(self)
            finally:
                probing["on"] = False

        monkeypatch.setattr(StackedDriver, "probe", probe)

        def wrap(kernel):
            calls = {"n": 0}

            def counted(z, *args, **kwargs):  # the stacked kernel is called once per step for the whole stack
                if probing["on"]:
                    return kernel(z, *args, **kwargs)
                calls["n"] += 1
                losses = kernel(z, *args, **kwargs)
                if calls["n"] < 3 or z.shape[0] < 2:  # slot 0 is run 0 while both train; after it left, run 1's
                    return losses
                bad = losses[0] * float("nan") if where == "loss" else \
                    losses[0] + 0.0 * torch.sqrt((z[0] - z[0].detach()).abs().sum())
                return torch.cat([bad[None], losses[1:]])
            return counted

        _patch_stacked_kernel(monkeypatch, wrap)
    else:
        config = config.replace(lr=1e38 if where == "parameters" else 1e30, model="mlp", norm="none")
        other = config.replace(lr=0.01, seed=1)
    first, second = run_stack([config, other], out_dirs=[tmp_path / "a", tmp_path / "b"])
    _assert_diverged(first, tmp_path / "a", WHERE[where])
    assert second.status == "completed" and len(second.history) == VECTOR["epochs"]


def test_finite_parameters_whose_sum_overflows_are_not_a_divergence():
    """The check sums each run's parameters (one pass); a sum that overflows float32 with finite entries is decided
    entry by entry, so only a run holding a non-finite entry fails, and its gradient words the message."""
    from ncgeom.runs.divergence import update_failures

    big = torch.full((3, 1000), 3e38, requires_grad=True)  # every row's sum overflows to inf
    assert update_failures([big], runs=3, epoch=1, step=1) == [None, None, None]
    assert update_failures([big[0].detach()], runs=None, epoch=1, step=1) == [None]
    with torch.no_grad():
        big[1, 5] = float("nan")
    big.grad = torch.zeros(3, 1000)
    big.grad[2, 0] = float("inf")
    with torch.no_grad():
        big[2, 0] = float("-inf")
    assert update_failures([big], runs=3, epoch=4, step=7) == [
        None, "the parameters became non-finite in the update of epoch 4, step 7",
        "the gradient became non-finite at epoch 4, step 7"]


def test_the_engines_record_a_divergence_the_same_way(tmp_path):
    """Issue 27, item 5: the sequential engine recorded "failed" where the batched one recorded "diverged"."""
    from ncgeom.campaigns.records import SweepRecord
    from ncgeom.campaigns.sweep import run_sweep

    spec = tmp_path / "div.toml"
    spec.write_text("""name = "div"\ndescription = "divergence in both engines"\n[base]\nmodel = "mlp"\nnorm = "none"
classes = 3\nsamples_per_class = 8\ndim = 2\nbatch_size = 12\nepochs = 2\n[grid]\nlr = [1e30, 1e38]\n[quick]\nseeds = [0]\n""")
    for engine in ("stacked", "sequential"):
        result = run_sweep(spec, tmp_path / engine, engine=engine)
        assert [r.status for r in result.runs] == ["diverged", "diverged"], (engine, [r.error for r in result.runs])
        assert [r.status for r in SweepRecord.load(tmp_path / engine).runs] == ["diverged", "diverged"]


def test_train_exits_1_with_a_summary_when_the_embeddings_diverge_first(tmp_path, capsys):
    """Issue 27, item 5: a high learning rate that shows first as NaN embeddings exited 2 (bad input), no summary."""
    out = tmp_path / "run"
    line = assert_cli_one_line(["train", "--model", "mlp", "--norm", "none", "--lr", "1e30", "--classes", "3",
                                "--samples-per-class", "8", "--dim", "2", "--batch-size", "12", "--epochs", "3",
                                "--out", str(out), "--quiet"], capsys, WHERE["embeddings"], code=1)
    assert "kept the state of the last complete epoch" in line
    assert json.loads((out / "summary.json").read_text())["status"] == "diverged"


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    """4 classes of 16 x 16 PNGs, 4 train and 1 test image each: a ResNet-18 run of 2 steps per epoch."""
    from ncgeom.testing.images import write_image_folder

    root = tmp_path_factory.mktemp("tree")
    write_image_folder(root, classes=4, size=16, num_per_class=4, num_test_per_class=1, rng=np.random.default_rng(1))
    return root


@pytest.mark.parametrize("where", [pytest.param("loss", marks=pytest.mark.slow), "gradient",
                                   pytest.param("parameters", marks=pytest.mark.slow)])  # a ResNet: seconds each
def test_the_image_driver_records_divergence_wherever_it_shows(tree, tmp_path, monkeypatch, where):
    import ncgeom.runs.images as images
    from ncgeom.runs import run

    config = _image_config(str(tree), epochs=2)  # 16 images, batch 8: 2 steps per epoch
    if where == "parameters":
        config = config.replace(lr=1e38)
    else:
        wrap = _nan_loss_at if where == "loss" else _nan_gradient_at
        _patch_prepared_loss(monkeypatch, images, lambda f: wrap(f, step=3))
    _assert_diverged(run(config, out_dir=tmp_path), tmp_path, WHERE[where])
    if (tmp_path / CHECKPOINT_FILE).exists():  # only the state of a complete epoch is ever checkpointed
        assert where != "parameters" and torch.load(tmp_path / CHECKPOINT_FILE, weights_only=True)["epoch"] == 1


# ============================================================================ surface 4: validation before writing
def _socket(path: Path) -> None:
    import socket

    cwd = os.getcwd()
    os.chdir(path.parent)  # AF_UNIX paths are limited to 108 bytes
    try:
        sock = socket.socket(socket.AF_UNIX)
        sock.bind(path.name)
        sock.close()
    finally:
        os.chdir(cwd)


def _loop(path: Path) -> None:
    os.symlink(path.name + ".b", path)
    os.symlink(path.name, path.with_name(path.name + ".b"))


#: a user file replaced by something that is not a regular file, and the words of its refusal
FILE_KINDS: dict[str, tuple[Callable[[Path], None], str]] = {
    "FIFO": (os.mkfifo, "is a FIFO"),
    "link to /dev/zero": (lambda p: os.symlink("/dev/zero", p), "a character device"),
    "link to /dev/null": (lambda p: os.symlink("/dev/null", p), "a character device"),
    "socket": (_socket, "is a socket"),
    "directory": (lambda p: p.mkdir(), "is a directory"),
    "link loop": (_loop, "symbolic link loop"),
    "broken link": (lambda p: os.symlink("nowhere", p), "no such file"),
    "above the limit": (lambda p: p.write_bytes(b"#" * (4 * 2**20 + 1)), "above the"),
}


@pytest.mark.parametrize("kind", list(FILE_KINDS))
def test_train_config_file_of_every_kind_is_one_line(tmp_path, capsys, kind):
    """``ncgeom train --config FIFO`` hung in a read (issue 27, "What to build"); every kind is one line now."""
    make, words = FILE_KINDS[kind]
    path = tmp_path / "c.toml"
    make(path)
    assert_cli_one_line(["train", "--config", str(path), "--out", str(tmp_path / "out")], capsys,
                        f"--config {path}: ", words)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("kind", [k for k in FILE_KINDS if k != "broken link"])
def test_sweep_spec_file_of_every_kind_is_one_line(tmp_path, capsys, kind):
    """A FIFO or a device spec was reported as "not found"; a FIFO is now never opened for a blocking read."""
    make, words = FILE_KINDS[kind]
    path = tmp_path / "s.toml"
    make(path)
    assert_cli_one_line(["sweep", str(path), "--out", str(tmp_path / "out")], capsys, f"spec {path}: ", words)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("argv, fragment", [
    (["--backend", "triton"], "--backend triton: not available for this run on cpu"),
    (["--backend", "triton", "--estimator", "sampled"], "--backend triton: not available"),
    (["--backend", "triton", "--dtype", "float64"], "--backend triton: not available for this run on cpu (float64)"),
    (["--backend", "triton", "--convention", "authors"], "the triton kernel implements convention='theory' only"),
    (["--init-scale", "1e300"], "the initial embeddings are not finite"),
    (["--beta", "1e5"], "beta"),
    (["--tau", "1e-4"], "tau"),
    (["--margin", "1e5", "--estimator", "sampled", "--psi", "triplet"], "margin"),
    (["--resume"], "no checkpoint to resume from"),
])
def test_train_refuses_before_anything_is_written(tmp_path, capsys, argv, fragment):
    """Issue 27, item 6: refused after writing config.json (and history.jsonl) before; nothing is written now, not
    even the folder."""
    out = tmp_path / "out"
    if "--resume" in argv:
        argv = [*argv, "--dataset", "imagefolder", "--data-dir", str(tmp_path), "--model", "resnet18", "--classes", "4"]
    assert_cli_one_line(["train", *argv, "--out", str(out), "--epochs", "1", "--quiet"], capsys, fragment)
    assert not out.exists()


def test_a_refused_resume_leaves_the_folder_exactly_as_it_was(tmp_path, capsys):
    """A run folder whose checkpoint is refused: every file, the finished run's summary.json included, unchanged."""
    out = tmp_path / "out"
    out.mkdir()
    for name, text in (("summary.json", "{}"), ("config.json", "{}"), ("history.jsonl", ""), (".ncgeom.lock", "")):
        (out / name).write_text(text)
    before = tree_state(out)
    _save(out, _image_config(str(tmp_path), lr=123.0))
    before = tree_state(out)
    assert_cli_one_line(["train", "--dataset", "imagefolder", "--data-dir", str(tmp_path), "--model", "resnet18",
                         "--classes", "4", "--batch-size", "8", "--epochs", "2", "--out", str(out), "--resume",
                         "--quiet"], capsys, "lr = 123.0 in the checkpoint, 0.001 now")
    assert tree_state(out) == before


@pytest.mark.parametrize("beta, tau", [(1e5, 1.0), (float("nan"), 1.0), (-1.0, 1.0), (1.0, 1e-4), (1.0, float("inf")),
                                       (1.0, float("nan"))])
def test_both_engines_losses_refuse_the_same_ranges(beta, tau):
    """One table of ranges (ncgeom.ranges) for Config, the CLI and both engines: the stacked kernel refuses what
    batch_loss refuses, naming the same range."""
    from ncgeom.losses import batch_loss
    from ncgeom.losses.kernels.stacked import stacked_weighted

    z = torch.nn.functional.normalize(torch.randn(2, 8, 3, generator=torch.Generator().manual_seed(0)), dim=-1)
    labels = torch.tensor([[0, 0, 1, 1, 2, 2, 3, 3]] * 2)
    name = "beta" if not (0 <= beta <= 1e4) else "tau"
    single = assert_one_line(lambda: batch_loss(z[0], labels[0], "hscl", beta=beta, tau=tau), f"{name} must be")
    stacked = assert_one_line(lambda: stacked_weighted(
        z, labels, supervised=torch.tensor([True, True]), beta=torch.tensor([0.0, beta], dtype=torch.float64),
        tau=torch.tensor([1.0, tau], dtype=torch.float64), num_negatives=None), f"{name} must be")
    assert single.split(", got")[0] == stacked.split(", got")[0]


def test_sweep_refuses_a_backend_it_cannot_run_before_out(tmp_path, capsys):
    """The stacked engine trained a triton run with its own kernel, the sequential one failed it: both refuse now."""
    spec = tmp_path / "t.toml"
    spec.write_text('name = "t"\ndescription = "triton on the CPU"\n[base]\nbackend = "triton"\nepochs = 1\n'
                    '[quick]\nseeds = [0]\n')
    for engine in ("stacked", "sequential"):
        assert_cli_one_line(["sweep", str(spec), "--out", str(tmp_path / engine), "--engine", engine], capsys,
                            "--backend triton: not available")
        assert not (tmp_path / engine).exists()


@pytest.mark.parametrize("argv, fragment", [
    (["verify", "--only="], "--only must list at least one of"),
    (["verify", "--only", ", ,"], "--only must list at least one of"),
    (["verify", "--ablations", "--only="], "--only must list at least one of the cases"),
    (["reproduce", "--tiny", "--stages="], "--stages must list at least one of"),
])
def test_empty_lists_are_refused_not_read_as_everything(tmp_path, capsys, argv, fragment):
    """``verify --only=`` ran every check (231 s) as if --only were not given."""
    if argv[0] == "reproduce":
        argv = [*argv, "--out", str(tmp_path / "out")]
    assert_cli_one_line(argv, capsys, fragment)
    assert not (tmp_path / "out").exists()


# ============================================================================ surface 5: workers
def _cap() -> int:
    from ncgeom.threads import max_workers

    return max_workers()


@pytest.mark.parametrize("command", ["sweep", "reproduce"])
@pytest.mark.parametrize("workers", ["100000", str(10**30), "cap + 1"])
def test_workers_above_the_machine_are_one_line(tmp_path, capsys, command, workers):
    """``ncgeom sweep --workers 100000`` on a 2-run sweep started every worker at once (load average 386)."""
    workers = str(_cap() + 1) if workers == "cap + 1" else workers
    argv = [command, "claim8_batch_size", "--scale", "tiny"] if command == "sweep" else [command, "--tiny"]
    line = assert_cli_one_line([*argv, "--workers", workers, "--out", str(tmp_path / "out")], capsys,
                               f"--workers must be an integer between 1 and {_cap()}")
    assert "CPUs" in line and not (tmp_path / "out").exists()


def test_the_library_refuses_more_workers_than_the_machine_before_any_folder(tmp_path):
    from ncgeom.campaigns.claims import run_claims
    from ncgeom.campaigns.executors import make_executor, process_pool
    from ncgeom.campaigns.sweep import run_sweep

    too_many = _cap() + 1
    assert_one_line(lambda: process_pool(too_many), "workers must be an integer between 1 and")
    assert_one_line(lambda: make_executor(too_many).__enter__(), "workers must be an integer between 1 and")
    assert_one_line(lambda: run_sweep("claim8_batch_size", tmp_path / "s", scale="tiny", workers=10**6), "workers")
    assert_one_line(lambda: run_claims(tmp_path / "c", claim_ids=["8"], scale="tiny", workers=10**6), "workers")
    assert not (tmp_path / "s").exists() and not (tmp_path / "c").exists()


def test_a_sweeps_own_pool_is_sized_by_its_units(tmp_path, monkeypatch):
    """Workers start as the plan needs them: a 2-run sweep asked for every allowed worker starts 2 (the pool is
    recorded, then refused before any process starts)."""
    import ncgeom.campaigns.units as units
    from ncgeom.campaigns.sweep import run_sweep

    sizes = []

    def recorded(size):
        sizes.append(size)
        raise RuntimeError("no process started in this test")

    monkeypatch.setattr(units, "process_pool", recorded)
    spec = tmp_path / "two.toml"
    spec.write_text('name = "two"\ndescription = "two runs"\n[base]\nepochs = 1\n[quick]\nseeds = [0, 1]\n')
    with pytest.raises(RuntimeError, match="no process started"):
        run_sweep(spec, tmp_path / "out", workers=_cap(), engine="sequential")
    assert sizes == [2]


def test_the_shared_pool_of_run_claims_is_sized_by_the_work(tmp_path):
    from ncgeom.campaigns.claims import _pool_size, claim_spec

    specs = {"8": claim_spec("8")}  # 2 runs at the tiny scale
    assert _pool_size(tmp_path, specs, scale="tiny", device=None, engine="sequential", workers=_cap()) == 2
    assert _pool_size(tmp_path, specs, scale="tiny", device=None, engine="sequential", workers=1) == 1
    assert _pool_size(tmp_path, specs, scale="tiny", device=None, engine="stacked", workers=_cap()) >= 1


# ============================================================================ surface 6: run folders
_HOLD = ("import sys, time; from ncgeom.locking import folder_lock\n"
         "with folder_lock(sys.argv[1]):\n    print('held', flush=True); time.sleep(60)")


@pytest.fixture
def held_folder(tmp_path):
    """A folder locked by another process (as a running ``ncgeom train`` or ``ncgeom sweep`` holds it)."""
    import subprocess
    import sys

    out = tmp_path / "out"
    holder = subprocess.Popen([sys.executable, "-c", _HOLD, str(out)], stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert holder.stdout.readline().strip() == "held"
    yield out, holder.pid
    holder.kill()
    holder.wait()


def test_a_second_train_into_a_folder_being_written_is_refused(held_folder, capsys):
    out, pid = held_folder
    before = tree_state(out)
    assert_cli_one_line(["train", "--epochs", "1", "--out", str(out), "--quiet"], capsys, f"pid {pid}")
    assert tree_state(out) == before


def test_a_train_into_the_folder_of_a_running_sweep_is_refused(held_folder, capsys, tmp_path):
    """The sweep's lock is the folder's: ``train --out OUT`` beside ``sweep --out OUT`` is refused; a run folder of
    a sequential sweep is its run's own lock (the first test)."""
    out, pid = held_folder
    assert_cli_one_line(["train", "--epochs", "1", "--out", str(out), "--quiet"], capsys,
                        f"{out} is being written by pid {pid}")


def test_temporary_files_of_a_killed_write_are_removed_when_a_run_starts(tmp_path, capsys):
    """A SIGKILL during a write left ``.checkpoint.pt.<random>.tmp`` (44 MB in the issue); the next start removes it
    (a regular file; a link or a folder of that name is left alone)."""
    out = tmp_path / "out"
    out.mkdir()
    (out / ".history.jsonl.k2j3h4.tmp").write_bytes(b"x" * 1000)
    (out / ".checkpoint.pt.abc.tmp").write_bytes(b"y" * 1000)
    os.symlink(tmp_path / "target", out / ".link.tmp")
    (tmp_path / "target").write_text("keep")
    (out / ".folder.tmp").mkdir()
    rc, _, err = run_main(["train", "--epochs", "1", "--out", str(out), "--quiet"], capsys)
    assert rc == 0, err
    left = sorted(p.name for p in out.iterdir() if p.name.endswith(".tmp"))
    assert left == [".folder.tmp", ".link.tmp"] and (tmp_path / "target").read_text() == "keep"


# ============================================================================ surface 7: the reproduction's records
MANIFESTS: dict[str, tuple[str, str]] = {
    "a JSON list": ("[1, 2]", "expected a JSON object, got list"),
    "a JSON string": ('"quick"', "expected a JSON object, got str"),
    "not JSON": ("{scale: quick}", "not a reproduction manifest (JSONDecodeError"),
    "empty": ("", "not a reproduction manifest"),
    "not UTF-8": ("\udcff", "not a reproduction manifest"),
    "without scale": ('{"provenance": {}}', "missing key(s) scale"),
    "an unknown key": ('{"scale": "tiny", "provenance": {}, "seed": 1}', "unknown key(s) seed"),
    "an unknown scale": ('{"scale": "huge", "provenance": {}}', "scale must be one of tiny, quick, full"),
    "scale a list": ('{"scale": ["tiny"], "provenance": {}}', "scale must be one of"),
    "device a number": ('{"scale": "tiny", "device": 0, "provenance": {}}', "device must be a string"),
    "provenance a list": ('{"scale": "tiny", "provenance": []}', "provenance must be a JSON object"),
}


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode("utf-8", "surrogateescape"))


@pytest.mark.parametrize("name", list(MANIFESTS))
def test_a_malformed_manifest_is_one_line_and_nothing_changes(tmp_path, capsys, name):
    """``reproduce`` given a reproduce.json that is a JSON list ended in "internal error: TypeError"."""
    text, fragment = MANIFESTS[name]
    out = tmp_path / "out"
    _write(out / "reproduce.json", text)
    (out / ".ncgeom.lock").write_text("")
    before = tree_state(out)
    assert_cli_one_line(["reproduce", "--tiny", "--workers", "1", "--out", str(out)], capsys,
                        f"{out / 'reproduce.json'}: ", fragment)
    assert tree_state(out) == before


@pytest.mark.parametrize("kind", ["FIFO", "link to /dev/zero", "directory", "link loop"])
def test_a_manifest_that_is_not_a_regular_file_is_one_line(tmp_path, capsys, kind):
    make, words = FILE_KINDS[kind]
    out = tmp_path / "out"
    out.mkdir()
    make(out / "reproduce.json")
    assert_cli_one_line(["reproduce", "--tiny", "--workers", "1", "--out", str(out)], capsys, "reproduce.json", words)


STAGE_RECORDS: dict[str, tuple[str, str]] = {
    "a JSON list": ("[]", "expected a JSON object"),
    "another stage": ('{"stage": "theory", "status": "done", "seconds": 1, "error": "", "summary": {}, "traceback": ""}',
                      "expected stage 'verify'"),
    "an unknown status": ('{"stage": "verify", "status": "ok", "seconds": 1, "error": "", "summary": {}, "traceback": ""}',
                          "status one of"),
    "a summary of another shape": ('{"stage": "verify", "status": "done", "seconds": 1, "error": "", '
                                   '"summary": {"checks": "x"}, "traceback": ""}', "checks must be an integer"),
    "failed not a list": ('{"stage": "verify", "status": "done", "seconds": 1, "error": "", '
                          '"summary": {"checks": 0, "failed": "x"}, "traceback": ""}', "failed must be a list"),
    "seconds a string": ('{"stage": "verify", "status": "done", "seconds": "1", "error": "", "summary": {}, '
                         '"traceback": ""}', "seconds a number"),
}


@pytest.mark.parametrize("name", list(STAGE_RECORDS))
def test_a_malformed_stage_record_is_one_line(tmp_path, capsys, name):
    text, fragment = STAGE_RECORDS[name]
    out = tmp_path / "out"
    _write(out / ".stages" / "verify.json", text)
    _write(out / "reproduce.json", '{"scale": "tiny", "provenance": {}}')
    assert_cli_one_line(["reproduce", "--tiny", "--workers", "1", "--stages", "verify", "--out", str(out)], capsys,
                        str(out / ".stages" / "verify.json"), fragment)


FIGURE_STATUSES: dict[str, tuple[str, str]] = {
    "a JSON list": ("[]", "expected a JSON object of figures, got list"),
    "a figure a string": ('{"fig_hardness": "done"}', "figure fig_hardness: expected a JSON object"),
    "an unknown status": ('{"fig_hardness": {"status": "ok", "files": [], "error": "", "caption": ""}}',
                          "status must be one of done, no data, failed"),
    "files a string": ('{"fig_hardness": {"status": "done", "files": "a.png", "error": "", "caption": ""}}',
                       "files must be a list"),
    "without a caption": ('{"fig_hardness": {"status": "done", "files": [], "error": ""}}', "missing key(s) caption"),
}


@pytest.mark.parametrize("name", list(FIGURE_STATUSES))
def test_a_malformed_figure_status_is_one_line_for_the_report_and_the_gallery(tmp_path, name):
    from ncgeom.reproduce.report import render_report, write_gallery

    text, fragment = FIGURE_STATUSES[name]
    _write(tmp_path / "figures" / "status.json", text)
    path = str(tmp_path / "figures" / "status.json")
    assert_one_line(lambda: render_report(tmp_path), path, fragment)
    assert_one_line(lambda: write_gallery(tmp_path, tmp_path / "gallery"), path, fragment)


def test_the_records_read_back_what_they_write(tmp_path):
    from ncgeom.reproduce.records import (
        STAGE_SUMMARIES,
        FigureRecord,
        FiguresSummary,
        FigureStatuses,
        ReproductionManifest,
        summary_from_dict,
    )

    manifest = ReproductionManifest("quick", "cuda:1", {"git_commit": "abc"})
    manifest.save(tmp_path)
    assert ReproductionManifest.load(tmp_path) == manifest
    ReproductionManifest("tiny", None, {}).save(tmp_path)  # the CPU: no device key, as before devices existed
    assert json.loads((tmp_path / "reproduce.json").read_text()) == {"scale": "tiny", "provenance": {}}
    statuses = FigureStatuses({"a": FigureRecord("done", ("a.png",), "", "c"), "b": FigureRecord("failed", (), "E", "d", "tb")})
    statuses.save(tmp_path)
    assert FigureStatuses.load(tmp_path) == statuses
    summary = FiguresSummary.of(statuses)
    assert summary.to_dict() == {"rendered": 1, "no_data": [], "failed": ["b: E"]}
    for stage, kind in STAGE_SUMMARIES.items():  # the shapes the stages wrote before the types existed
        example = {"verify": {"checks": 3, "counts": {"pass": 3}, "modules": ["symbolic"], "passed": True},
                   "theory": {"computed": ["a"], "skipped": []}, "claims": {"claims": {"1": "supported"}},
                   "phase": {"maps": {"phase_classes_batch": "read from its shipped record"}},
                   "figures": {"rendered": 2, "no_data": ["x"], "failed": ["y: z"]}, "report": {"report": "report.md"}}[stage]
        assert summary_from_dict(stage, example).to_dict() == example and isinstance(summary_from_dict(stage, example), kind)


# ============================================================================ surface 8: warnings around errors
@pytest.mark.parametrize("fails", [True, False])
def test_a_dependency_warning_is_never_printed_around_an_error_line(tmp_path, capsys, monkeypatch, fails):
    """Pillow's and torch's warnings were printed around the one-line error (issue 27, item 9): held back now;
    after a success each is one line."""
    import ncgeom.cli.nc_value as nc_value

    real = nc_value.run

    def warns(args):
        warnings.warn("a multi-line\nwarning of a library", UserWarning, stacklevel=1)
        np.float32(1e38) * np.float32(1e38)  # numpy's RuntimeWarning: overflow
        if fails:
            raise ValueError("--classes: refused")
        return real(args)

    monkeypatch.setattr(nc_value, "run", warns)
    rc, out, err = run_main(["nc-value", "--setting", "scl", "--psi", "infonce", "--classes", "10", "--num-negatives", "1"],
                            capsys)
    lines = err.splitlines()
    if fails:
        assert rc == 2 and lines == ["ncgeom nc-value: error: --classes: refused"], err
    else:
        assert rc == 0 and lines == ["ncgeom nc-value: warning: UserWarning: a multi-line",
                                     "ncgeom nc-value: warning: RuntimeWarning: overflow encountered in scalar multiply"], err


# ============================================================================ surface 9: claims when a worker dies
class _DyingPool:
    """An executor whose worker "dies" at its ``k``-th task: that task and every later submission fail with
    BrokenProcessPool, as a process pool does once the out-of-memory killer took one of its workers (in threads,
    in this process: the runs themselves are real)."""

    def __init__(self, k: int):
        from concurrent.futures import ThreadPoolExecutor

        self._pool = ThreadPoolExecutor(max_workers=2)
        self._max_workers = 2
        self.k, self.n, self.broken = k, 0, False

    def submit(self, fn, *args, **kwargs):
        from concurrent.futures import Future
        from concurrent.futures.process import BrokenProcessPool

        self.n += 1
        if self.broken:
            raise BrokenProcessPool("A child process terminated abruptly, the process pool is not usable anymore")
        if self.n >= self.k:
            self.broken = True
            future: Future = Future()
            future.set_exception(BrokenProcessPool("A process in the process pool was terminated abruptly"))
            return future
        return self._pool.submit(fn, *args, **kwargs)

    def shutdown(self, wait: bool = True, **kwargs) -> None:
        self._pool.shutdown(wait=wait)


def _thread_pools(monkeypatch) -> list[int]:
    """run_claims' fresh pools as thread pools (the runs in this process); returns the sizes asked for."""
    import contextlib
    from concurrent.futures import ThreadPoolExecutor

    import ncgeom.campaigns.claims as claims

    sizes: list[int] = []

    @contextlib.contextmanager
    def pool(size):
        sizes.append(size)
        with ThreadPoolExecutor(max_workers=size) as ex:
            yield ex

    monkeypatch.setattr(claims, "pool_executor", pool)
    return sizes


@pytest.mark.parametrize("rebuilds", [0, 2])
def test_claims_that_lose_runs_to_a_dead_worker_are_rerun_in_a_fresh_pool(tmp_path, monkeypatch, rebuilds):
    """Issue 27, item 8: a worker's death broke the shared pool for every later run of every claim, which were then
    decided on fewer seeds (or none: a sweep whose submission raised had no rows at all). Now the claims that lost runs
    are rerun in a fresh pool; without rebuilds (the former behaviour) each result says which runs are missing and why.
    """
    import ncgeom.campaigns.claims as claims
    from ncgeom.campaigns.spec import expand

    monkeypatch.setattr(claims, "POOL_REBUILDS", rebuilds)
    sizes = _thread_pools(monkeypatch)
    logs: list[str] = []
    ids = ["8", "2"]
    results = claims.run_claims(tmp_path, claim_ids=ids, scale="tiny", executor=_DyingPool(2), engine="sequential",
                                progress=False, log=logs.append)
    print([(r.claim, r.runs, r.failed_runs, r.error) for r in results if not r.complete])
    if rebuilds:
        assert all(r.complete for r in results), [(r.claim, r.failed_runs, r.error) for r in results]
        assert [r.runs for r in results] == [len(expand(claims.claim_spec(c), scale="tiny")) for c in ids]
        assert sizes == [2] and any("a worker process died" in line for line in logs)
        assert all(claims.ClaimResult.load(tmp_path, c).complete for c in ids)  # the saved files too
    else:
        incomplete = [r for r in results if not r.complete]
        assert incomplete and sizes == []
        for r in incomplete:  # which runs are missing, and why
            assert all("BrokenProcessPool" in f and "worker process died" in f for f in r.failed_runs), r.failed_runs
            assert r.failed_runs or r.error


def test_corpus_size():
    """The counts docs/reliability.md ("Runs, workers and records (round 3)") reports."""
    sizes = {"restore": len(RESTORE_CASES), "load": len(LOAD_CASES), "digest": len(DIGEST_CASES),
             "file kinds": len(FILE_KINDS), "manifests": len(MANIFESTS), "stage records": len(STAGE_RECORDS),
             "figure statuses": len(FIGURE_STATUSES), "where": len(WHERE)}
    assert sizes == {"restore": 60, "load": 25, "digest": 13, "file kinds": 8, "manifests": 11, "stage records": 6,
                     "figure statuses": 5, "where": 4}
