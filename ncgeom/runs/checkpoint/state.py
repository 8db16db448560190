"""Restoring a checkpoint into a run: every tensor and every random state checked before anything is loaded.

:func:`restore` is how an image run resumes (:mod:`ncgeom.runs.images`). The model and the optimizer it is given
are the run's own, freshly built from its config, so they are the templates of what a checkpoint of that config
holds (docs/reliability.md, "Checkpoints"):

- ``model``: exactly the keys of ``model.state_dict()``, each a dense, contiguous tensor of the template's shape
  and dtype; floating values finite (a run checkpoints only a state whose embeddings were finite);
- ``optimizer``: exactly ``{"state", "param_groups"}``; the param groups equal the fresh optimizer's (the learning
  rate, weight decay, betas, eps and flags the config implies: a checkpoint carrying lr 123 is refused, naming
  ``optimizer.param_groups[0].lr`` and the config's value); one state per parameter with exactly ``step`` (a
  float32 scalar equal to epoch x steps per epoch, the optimizer steps the run had taken), ``exp_avg`` and
  ``exp_avg_sq`` (the parameter's shape and dtype, finite, ``exp_avg_sq`` >= 0);
- ``rng``: the three numpy bit generator states set on fresh generators of the run's kind (PCG64), the torch
  states of the template's size (``step`` None exactly when the per-step generator is the torch stream, as on the
  CPU), each tried on a fresh generator first.

A mismatch is a ValueError, one line naming the file and the field. Only when everything passed are the states
loaded (``load_state_dict``, the generators' states): the fused Adam step never sees a moment of another shape,
which made it read and write out of bounds (issue 27).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ncgeom.runs.checkpoint.file import Checkpoint

__all__ = ["restore", "rng_states", "restore_rng"]

_MOMENTS = ("exp_avg", "exp_avg_sq")


def restore(checkpoint: Checkpoint, *, model, optimizer, streams, step, steps_per_epoch: int) -> None:
    """Check ``checkpoint`` against the run's fresh ``model`` and ``optimizer`` and its random ``streams``
    (:class:`ncgeom.runs.setup.Streams`) and per-step generator ``step``, then load it into them (module docstring).

    Raises ValueError (one line naming the file and the field) before anything is loaded.
    """
    where = str(checkpoint.path)
    expected_model = model.state_dict()
    _check_tensors(where, "model", checkpoint.model, {k: (v.shape, v.dtype) for k, v in expected_model.items()})
    params = [p for group in optimizer.param_groups for p in group["params"]]
    _check_optimizer(where, checkpoint.optimizer, optimizer.state_dict(), params,
                     steps=checkpoint.epoch * steps_per_epoch)
    _check_rng(where, checkpoint.rng, streams, step)
    model.load_state_dict(checkpoint.model)
    optimizer.load_state_dict(checkpoint.optimizer)
    restore_rng(checkpoint.rng, streams.data, streams.init, streams.batch, streams.torch, step)


def _check_tensors(where: str, field: str, found: Any, expected: dict[str, tuple[Any, Any]]) -> None:
    if not isinstance(found, dict) or set(found) != set(expected):
        keys = sorted(map(str, found))[:4] if isinstance(found, dict) else type(found).__name__
        raise ValueError(f"{where}: {field}: expected the {len(expected)} entries of the run's model "
                         f"(first {', '.join(list(expected)[:3])}), found {keys}")
    for key, (shape, dtype) in expected.items():
        _check_tensor(where, f"{field}.{key}", found[key], shape, dtype)


def _check_tensor(where: str, field: str, tensor: Any, shape, dtype, *, nonnegative: bool = False) -> None:
    import torch

    if not isinstance(tensor, torch.Tensor) or tensor.layout != torch.strided or tensor.is_quantized:
        raise ValueError(f"{where}: {field}: expected a dense tensor, got {type(tensor).__name__}")
    if tuple(tensor.shape) != tuple(shape) or tensor.dtype != dtype:
        raise ValueError(f"{where}: {field}: expected a tensor of shape {list(shape)} and dtype {dtype}, got "
                         f"shape {list(tensor.shape)} and dtype {tensor.dtype}")
    if not tensor.is_contiguous():
        raise ValueError(f"{where}: {field}: expected a contiguous tensor (strides {tensor.stride()})")
    if tensor.is_floating_point():
        if not bool(torch.isfinite(tensor).all()):
            raise ValueError(f"{where}: {field}: holds non-finite values (a checkpoint holds a state whose "
                             "embeddings were finite)")
        if nonnegative and bool((tensor < 0).any()):
            raise ValueError(f"{where}: {field}: holds negative values (a second moment is >= 0)")
    elif tensor.numel() and bool((tensor < 0).any()):  # integer buffers count (num_batches_tracked)
        raise ValueError(f"{where}: {field}: holds negative values")


def _check_optimizer(where: str, found: Any, fresh: dict[str, Any], params: list[Any], *, steps: int) -> None:
    import torch

    if not isinstance(found, dict) or set(found) != {"state", "param_groups"}:
        raise ValueError(f"{where}: optimizer: expected an Adam state dict (keys state, param_groups)")
    groups, expected_groups = found["param_groups"], fresh["param_groups"]
    if not isinstance(groups, list) or len(groups) != len(expected_groups):
        raise ValueError(f"{where}: optimizer.param_groups: expected {len(expected_groups)} group(s)")
    for g, (group, expected) in enumerate(zip(groups, expected_groups)):
        if not isinstance(group, dict) or set(group) != set(expected):
            raise ValueError(f"{where}: optimizer.param_groups[{g}]: expected exactly the keys "
                             f"{', '.join(sorted(expected))}")
        for key, value in expected.items():
            if not _same(group[key], value):
                raise ValueError(f"{where}: optimizer.param_groups[{g}].{key}: {_text(group[key])} in the checkpoint, "
                                 f"{_text(value)} by its config; a checkpoint's optimizer must be the one its config "
                                 "makes")
    state = found["state"]
    if not isinstance(state, dict) or set(state) != set(range(len(params))):
        raise ValueError(f"{where}: optimizer.state: expected one state per parameter (0 to {len(params) - 1})")
    for i, param in enumerate(params):
        entry = state[i]
        if not isinstance(entry, dict) or set(entry) != {"step", *_MOMENTS}:
            raise ValueError(f"{where}: optimizer.state[{i}]: expected exactly the keys step, exp_avg, exp_avg_sq")
        _check_tensor(where, f"optimizer.state[{i}].step", entry["step"], (), torch.float32)
        if float(entry["step"]) != float(torch.tensor(steps, dtype=torch.float32)):  # torch counts in float32
            raise ValueError(f"{where}: optimizer.state[{i}].step: {_text(float(entry['step']))} steps in the "
                             f"checkpoint, {steps} by its epoch (epoch x steps per epoch)")
        for name in _MOMENTS:
            _check_tensor(where, f"optimizer.state[{i}].{name}", entry[name], param.shape, param.dtype,
                          nonnegative=name == "exp_avg_sq")


def _check_rng(where: str, states: dict[str, Any], streams, step) -> None:
    import torch

    for name in ("data", "init", "batch"):
        template = getattr(streams, name).bit_generator
        trial = type(template)()
        try:
            if not isinstance(states[name], dict):
                raise ValueError(f"expected a dict, got {type(states[name]).__name__}")
            trial.state = states[name]  # numpy checks the generator's name and every field
        except Exception as exc:  # noqa: BLE001 - an untrusted value: any refusal of numpy is a bad state
            raise ValueError(f"{where}: rng.{name}: not a state of the run's bit generator "
                             f"({type(exc).__name__}: {' '.join(str(exc).split())[:120]})") from None
    pairs = [("torch", streams.torch)] + ([] if step is streams.torch else [("step", step)])
    if step is streams.torch and states["step"] is not None:
        raise ValueError(f"{where}: rng.step: expected None (the per-step draws come from the torch stream on this "
                         "device)")
    for name, generator in pairs:
        template = generator.get_state()
        _check_tensor(where, f"rng.{name}", states[name], template.shape, template.dtype)
        try:
            torch.Generator(device=generator.device).set_state(states[name])
        except Exception as exc:  # noqa: BLE001 - an untrusted value: any refusal of torch is a bad state
            raise ValueError(f"{where}: rng.{name}: not a state of a torch generator on {generator.device} "
                             f"({' '.join(str(exc).split())[:120]})") from None


def _same(a: Any, b: Any) -> bool:
    """Equal values of equal types (tuples elementwise); never raises on a tensor or another odd value."""
    if type(a) is not type(b):
        return False
    if isinstance(a, (tuple, list)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    return isinstance(a, (int, bool, str, type(None))) and a == b


def _text(value: Any) -> str:
    text = " ".join(repr(value).split()) if isinstance(value, (int, float, str, bool, tuple, list, type(None))) \
        else f"a {type(value).__name__}"
    return text if len(text) <= 60 else text[:57] + "..."


def rng_states(data_rng, init_rng, batch_rng, torch_generator, step) -> dict[str, Any]:
    """Every random state of a run (``step`` None when the per-step generator is ``torch_generator`` itself)."""
    return {"data": data_rng.bit_generator.state, "init": init_rng.bit_generator.state,
            "batch": batch_rng.bit_generator.state, "torch": torch_generator.get_state(),
            "step": None if step is torch_generator else step.get_state()}


def restore_rng(states: dict[str, Any], data_rng: np.random.Generator, init_rng: np.random.Generator,
                batch_rng: np.random.Generator, torch_generator, step) -> None:
    """Set every random state of a run from :func:`rng_states`' dict (checked first by :func:`restore`)."""
    data_rng.bit_generator.state = states["data"]
    init_rng.bit_generator.state = states["init"]
    batch_rng.bit_generator.state = states["batch"]
    torch_generator.set_state(states["torch"])
    if step is not torch_generator:
        step.set_state(states["step"])
