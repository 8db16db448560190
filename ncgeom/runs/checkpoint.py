"""``checkpoint.pt`` of an image run: everything needed to continue it bitwise, written and read back here.

The file (``torch.save`` of a dict, written by atomic rename) holds the format number, the config, the epoch,
the model's and the optimizer's state dicts, the history so far, the initial record, the elapsed seconds, and
every random state (numpy bit generators as JSON-able dicts, torch generators as uint8 tensors). It is read with
``torch.load(weights_only=True)`` only: plain tensors and containers, nothing unpickled as code.
``ncgeom train --resume`` (:func:`ncgeom.runs.run` with ``resume=True``) continues from it: on the CPU, a run of E
epochs equals a run of e epochs resumed to E, bitwise. A checkpoint made with another config is refused, naming
the differing fields; only :data:`RESUMABLE_FIELDS` may change.
"""

from __future__ import annotations

import dataclasses
import io
from pathlib import Path
from typing import Any

from ncgeom.atomic_io import atomic_write_bytes
from ncgeom.runs.config import Config, config_from_dict

__all__ = ["CHECKPOINT_FILE", "CHECKPOINT_FORMAT", "RESUMABLE_FIELDS", "save_checkpoint", "load_checkpoint",
           "rng_states", "restore_rng"]

CHECKPOINT_FILE = "checkpoint.pt"
CHECKPOINT_FORMAT = 1
#: Config fields a resumed run may change: the length of the run and how it is observed, not its training.
RESUMABLE_FIELDS: frozenset[str] = frozenset({"epochs", "checkpoint_every", "metrics_every", "workers", "eval_batch_size"})
_CHECKPOINT_KEYS = frozenset({"format", "config", "epoch", "model", "optimizer", "history", "initial", "elapsed_s", "rng"})


def save_checkpoint(path: str | Path, *, config: Config, epoch: int, model, optimizer, history, initial,
                    elapsed_s: float, rng: dict[str, Any]) -> Path:
    """Write ``path`` (checkpoint.pt) atomically: a BytesIO of ``torch.save`` renamed into place.

    ``rng``: ``{"data", "init", "batch"}`` numpy bit generator states (dicts of ints and strings),
    ``"torch"`` and ``"step"`` torch generator states (uint8 tensors; ``"step"`` None when the per-step
    generator is the torch stream itself, as on the CPU).
    """
    import torch

    payload = {
        "format": CHECKPOINT_FORMAT,
        "config": config.to_dict(),
        "epoch": int(epoch),
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict(),
        "history": [r.to_dict() for r in history],
        "initial": initial.to_dict(),
        "elapsed_s": float(elapsed_s),
        "rng": rng,
    }
    buffer = io.BytesIO()
    torch.save(payload, buffer)
    return atomic_write_bytes(Path(path), buffer.getvalue())


def load_checkpoint(path: str | Path, config: Config) -> dict[str, Any]:
    """The checkpoint at ``path`` for resuming ``config``, read with ``torch.load(weights_only=True)``.

    ValueError naming the file when it is missing, unreadable, of another structure, made with a config
    that differs outside :data:`RESUMABLE_FIELDS` (the differing fields are listed), or further than
    ``config.epochs``.
    """
    import pickle

    import torch

    path = Path(path)
    if not path.is_file():
        raise ValueError(f"{path}: no checkpoint to resume from (an image run writes one every checkpoint_every "
                         "epochs and at its end when checkpoint_every > 0; the default 0 writes none)")
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except (pickle.UnpicklingError, RuntimeError, EOFError, OSError, ValueError, KeyError) as exc:
        raise ValueError(f"{path}: not a readable checkpoint ({type(exc).__name__}: {' '.join(str(exc).split())[:200]})") from None
    if not isinstance(payload, dict) or set(payload) != _CHECKPOINT_KEYS or payload["format"] != CHECKPOINT_FORMAT:
        keys = sorted(map(str, payload)) if isinstance(payload, dict) else type(payload).__name__
        raise ValueError(f"{path}: not an ncgeom checkpoint of format {CHECKPOINT_FORMAT} (found {keys})")
    try:
        saved = config_from_dict(payload["config"])
    except (ValueError, TypeError) as exc:
        raise ValueError(f"{path}: its config is not valid ({' '.join(str(exc).split())})") from None
    ours, theirs = _all_fields(config), _all_fields(saved)
    differ = [f"{k} = {theirs[k]!r} in the checkpoint, {ours[k]!r} now" for k in ours
              if ours[k] != theirs[k] and k not in RESUMABLE_FIELDS]
    if differ:
        raise ValueError(f"{path}: the checkpoint was made with another config ({'; '.join(differ)}); only "
                         f"{', '.join(sorted(RESUMABLE_FIELDS))} may change on resume")
    if payload["epoch"] > config.epochs:
        raise ValueError(f"epochs: the checkpoint {path} is at epoch {payload['epoch']}, beyond epochs={config.epochs}")
    return payload


def _all_fields(config: Config) -> dict[str, Any]:
    return {f.name: getattr(config, f.name) for f in dataclasses.fields(config)}


def rng_states(data_rng, init_rng, batch_rng, torch_generator, step) -> dict[str, Any]:
    return {"data": data_rng.bit_generator.state, "init": init_rng.bit_generator.state,
            "batch": batch_rng.bit_generator.state, "torch": torch_generator.get_state(),
            "step": None if step is torch_generator else step.get_state()}


def restore_rng(states: dict[str, Any], data_rng, init_rng, batch_rng, torch_generator, step) -> None:
    data_rng.bit_generator.state = states["data"]
    init_rng.bit_generator.state = states["init"]
    batch_rng.bit_generator.state = states["batch"]
    torch_generator.set_state(states["torch"])
    if step is not torch_generator:
        step.set_state(states["step"])
