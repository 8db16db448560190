"""``checkpoint.pt`` of an image run and its digest: written, read back and checked here.

The file (``torch.save`` of a dict, written by atomic rename) holds the format number, the config, the epoch,
the model's and the optimizer's state dicts, the history so far, the initial record, the elapsed seconds, and
every random state (numpy bit generators as JSON-able dicts, torch generators as uint8 tensors). It is read with
``torch.load(weights_only=True)`` only (:func:`ncgeom.files.load_torch`: a regular file, its size checked against
the memory budget, nothing unpickled as code, torch's warnings silenced).

A checkpoint is untrusted input (docs/reliability.md, "Checkpoints"): ``weights_only`` checks neither the shapes of
the tensors nor the optimizer's hyperparameters, and a moment of the wrong shape made the fused Adam step read and
write out of bounds. So :func:`load_checkpoint` checks the file and each field's type and value here, and
:func:`ncgeom.runs.checkpoint.state.restore` checks every tensor against the model and the optimizer that the
config builds before any of them is loaded; both before the run folder is touched (a refusal is one line naming
the file and the field).

The digest: :func:`save_checkpoint` records the SHA-256 of each checkpoint it writes in
``checkpoint_digest.json`` beside it (:class:`CheckpointDigest`), and :func:`load_checkpoint` refuses a
checkpoint whose bytes have another digest (changed or damaged since it was written). The record lists the
digest of the new file before that file is renamed into place and keeps the previous one until it is, so a run
killed at any moment leaves a checkpoint whose digest is listed. A checkpoint without a digest record (written
before the record existed) is checked field by field only.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import math
import os
from pathlib import Path
from typing import Any

from ncgeom.atomic_io import atomic_write_bytes, atomic_write_json
from ncgeom.files import load_torch, open_regular, read_bounded
from ncgeom.runs.config import Config, config_from_dict
from ncgeom.runs.records import EpochRecord

__all__ = ["CHECKPOINT_FILE", "CHECKPOINT_FORMAT", "DIGEST_FILE", "RESUMABLE_FIELDS", "Checkpoint",
           "CheckpointDigest", "save_checkpoint", "load_checkpoint", "file_sha256"]

CHECKPOINT_FILE = "checkpoint.pt"
CHECKPOINT_FORMAT = 1
DIGEST_FILE = "checkpoint_digest.json"
#: Config fields a resumed run may change: the length of the run and how it is observed, not its training.
RESUMABLE_FIELDS: frozenset[str] = frozenset({"epochs", "checkpoint_every", "metrics_every", "workers", "eval_batch_size"})
_CHECKPOINT_KEYS = ("format", "config", "epoch", "model", "optimizer", "history", "initial", "elapsed_s", "rng")
_RNG_KEYS = ("data", "init", "batch", "torch", "step")
_DIGEST_MAX_BYTES = 4096  # a few hex digests


@dataclasses.dataclass(frozen=True)
class Checkpoint:
    """A checkpoint read back and checked by :func:`load_checkpoint` (its tensors are checked by
    :func:`ncgeom.runs.checkpoint.state.restore`, against the model and optimizer they are loaded into)."""

    path: Path
    config: Config
    epoch: int
    model: dict[str, Any]
    optimizer: dict[str, Any]
    history: tuple[EpochRecord, ...]
    initial: EpochRecord
    elapsed_s: float
    rng: dict[str, Any]


@dataclasses.dataclass(frozen=True)
class CheckpointDigest:
    """``checkpoint_digest.json``: the SHA-256 digests (hex) a checkpoint.pt of the folder may have (module docstring)."""

    sha256: tuple[str, ...]

    def __post_init__(self) -> None:
        if not self.sha256 or not all(isinstance(d, str) and len(d) == 64 and set(d) <= set("0123456789abcdef")
                                      for d in self.sha256):
            raise ValueError("sha256: expected a non-empty list of SHA-256 digests (64 lowercase hex digits)")

    def save(self, folder: str | Path) -> Path:
        return atomic_write_json(Path(folder) / DIGEST_FILE, {"format": CHECKPOINT_FORMAT, "sha256": list(self.sha256)})

    @classmethod
    def load(cls, folder: str | Path) -> CheckpointDigest | None:
        """The record of ``folder``, None where there is none; ValueError naming the file when it is malformed."""
        path = Path(folder) / DIGEST_FILE
        if not os.path.lexists(path):
            return None
        try:
            data = json.loads(read_bounded(path, what="a checkpoint digest record", max_bytes=_DIGEST_MAX_BYTES))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ValueError(f"{path}: not a checkpoint digest record ({type(exc).__name__})") from None
        if not isinstance(data, dict) or set(data) != {"format", "sha256"} or data["format"] != CHECKPOINT_FORMAT \
                or not isinstance(data["sha256"], list):
            raise ValueError(f"{path}: not a checkpoint digest record of format {CHECKPOINT_FORMAT} "
                             "(expected exactly the keys format, sha256)")
        try:
            return cls(tuple(data["sha256"]))
        except ValueError as exc:
            raise ValueError(f"{path}: {exc}") from None


def file_sha256(path: str | Path) -> str:
    """The SHA-256 (hex) of the regular file ``path``, read in blocks (:func:`ncgeom.files.open_regular`)."""
    digest = hashlib.sha256()
    with open_regular(path) as fh:
        for block in iter(lambda: fh.read(2**20), b""):
            digest.update(block)
    return digest.hexdigest()


def save_checkpoint(path: str | Path, *, config: Config, epoch: int, model, optimizer, history, initial,
                    elapsed_s: float, rng: dict[str, Any]) -> Path:
    """Write ``path`` (checkpoint.pt) atomically, and its digest beside it (module docstring).

    ``rng``: ``{"data", "init", "batch"}`` numpy bit generator states (dicts of ints and strings),
    ``"torch"`` and ``"step"`` torch generator states (uint8 tensors; ``"step"`` None when the per-step
    generator is the torch stream itself, as on the CPU).
    """
    import torch

    path = Path(path)
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
    data = buffer.getvalue()
    new = hashlib.sha256(data).hexdigest()
    try:
        previous = CheckpointDigest.load(path.parent)
    except ValueError:  # a damaged record: replaced below (the checkpoint it described is replaced too)
        (path.parent / DIGEST_FILE).unlink()
        previous = None
    if previous is not None:  # the new digest listed before the new file exists: any moment of a kill is covered
        CheckpointDigest(tuple(dict.fromkeys((*previous.sha256, new)))[-3:]).save(path.parent)
    atomic_write_bytes(path, data)
    CheckpointDigest((new,)).save(path.parent)
    return path


def load_checkpoint(path: str | Path, config: Config) -> Checkpoint:
    """The checkpoint at ``path`` for resuming ``config``, checked (module docstring).

    ValueError, one line naming the file (and the field), when it is missing or not a regular file, its digest
    differs from the one recorded, torch cannot read it (``weights_only=True``), a field is missing or of the
    wrong type, it was made with a config that differs outside :data:`RESUMABLE_FIELDS` (the differing fields are
    listed; the data folder may be named by another path to the same folder), or it is further than
    ``config.epochs``. Its tensors are checked when they are restored (:func:`ncgeom.runs.checkpoint.state.restore`).
    """
    path = Path(path)
    if not os.path.lexists(path):
        raise ValueError(f"{path}: no checkpoint to resume from (an image run writes one every checkpoint_every "
                         "epochs and at its end when checkpoint_every > 0; the default 0 writes none)")
    recorded = CheckpointDigest.load(path.parent)
    if recorded is not None:
        actual = file_sha256(path)
        if actual not in recorded.sha256:
            raise ValueError(f"{path}: its SHA-256 ({actual[:16]}...) is not the one recorded in {DIGEST_FILE} when "
                             "it was written: the file was changed or damaged since; refusing to resume from it")
    payload = load_torch(path, what="a checkpoint", expected=f"an ncgeom checkpoint of format {CHECKPOINT_FORMAT}",
                         copies=2)
    if not isinstance(payload, dict) or set(payload) != set(_CHECKPOINT_KEYS) \
            or not (type(payload["format"]) is int and payload["format"] == CHECKPOINT_FORMAT):
        found = sorted(map(_short, payload)) if isinstance(payload, dict) else type(payload).__name__
        raise ValueError(f"{path}: not an ncgeom checkpoint of format {CHECKPOINT_FORMAT} (expected the keys "
                         f"{', '.join(_CHECKPOINT_KEYS)} and format {CHECKPOINT_FORMAT}; found {_short(found)})")
    try:
        saved = config_from_dict(payload["config"])
    except (ValueError, TypeError) as exc:
        raise ValueError(f"{path}: config: not a valid config ({_short(' '.join(str(exc).split()))})") from None
    _check_same_config(path, config, saved)
    epoch = payload["epoch"]
    if type(epoch) is not int or epoch < 1:
        raise ValueError(f"{path}: epoch: expected an integer >= 1, got {_short(epoch)}")
    if epoch > config.epochs:
        raise ValueError(f"epochs: the checkpoint {path} is at epoch {epoch}, beyond epochs={config.epochs}")
    elapsed = payload["elapsed_s"]
    if type(elapsed) is not float or not (math.isfinite(elapsed) and elapsed >= 0):
        raise ValueError(f"{path}: elapsed_s: expected a finite float >= 0, got {_short(elapsed)}")
    for key in ("model", "optimizer", "rng"):
        if not isinstance(payload[key], dict):
            raise ValueError(f"{path}: {key}: expected a dict, got {type(payload[key]).__name__}")
    if set(payload["rng"]) != set(_RNG_KEYS):
        raise ValueError(f"{path}: rng: expected exactly the keys {', '.join(_RNG_KEYS)}, "
                         f"got {_short(sorted(map(_short, payload['rng'])))}")
    initial = _record(path, "initial", payload["initial"])
    history = payload["history"]
    if not isinstance(history, list):
        raise ValueError(f"{path}: history: expected a list of epoch records, got {type(history).__name__}")
    records = tuple(_record(path, f"history[{i}]", r) for i, r in enumerate(history))
    if initial.epoch != 0 or [r.epoch for r in records] != list(range(1, epoch + 1)):
        raise ValueError(f"{path}: history: expected the records of epochs 1 to {epoch} after an initial record of "
                         f"epoch 0, got epochs {_short([r.epoch for r in records])} after {initial.epoch}")
    return Checkpoint(path=path, config=saved, epoch=epoch, model=payload["model"], optimizer=payload["optimizer"],
                      history=records, initial=initial, elapsed_s=elapsed, rng=payload["rng"])


def _check_same_config(path: Path, config: Config, saved: Config) -> None:
    ours, theirs = _all_fields(config), _all_fields(saved)
    differ = [f"{k} = {theirs[k]!r} in the checkpoint, {ours[k]!r} now" for k in ours
              if ours[k] != theirs[k] and k not in RESUMABLE_FIELDS
              and not (k == "data_dir" and _same_folder(ours[k], theirs[k]))]
    if differ:
        raise ValueError(f"{path}: the checkpoint was made with another config ({'; '.join(differ)}); only "
                         f"{', '.join(sorted(RESUMABLE_FIELDS))} may change on resume")


def _same_folder(a: Any, b: Any) -> bool:
    """Two data folder paths naming the same existing folder (``./data`` and ``data``, or an absolute path)."""
    try:
        return isinstance(a, str) and isinstance(b, str) and os.path.samefile(a, b) and os.path.isdir(a)
    except OSError:
        return False


def _all_fields(config: Config) -> dict[str, Any]:
    return {f.name: getattr(config, f.name) for f in dataclasses.fields(config)}


_NUMBER_FIELDS = ("loss", "nc_value", "gap", "test_ncc_accuracy", "mean_norm", "time_s")


def _record(path: Path, where: str, data: Any) -> EpochRecord:
    """An epoch record of the checkpoint, its fields' types checked (a string where a number belongs is refused)."""
    try:
        record = EpochRecord.from_dict(data)
    except (ValueError, TypeError) as exc:
        raise ValueError(f"{path}: {where}: {_short(' '.join(str(exc).split()))}") from None
    if type(record.epoch) is not int:
        raise ValueError(f"{path}: {where}.epoch: expected an integer, got {_short(record.epoch)}")
    for name in _NUMBER_FIELDS:
        value = getattr(record, name)
        if not (value is None or type(value) in (int, float)) or (name == "nc_value" and value is None):
            raise ValueError(f"{path}: {where}.{name}: expected a number, got {_short(value)}")
    for name, value in (record.metrics or {}).items():
        values = value if isinstance(value, list) else [value]
        if not all(v is None or type(v) in (int, float) for v in values):
            raise ValueError(f"{path}: {where}.metrics.{name}: expected a number or a list of numbers, got {_short(value)}")
    return record


def _short(value: Any) -> str:
    """A repr of a value from an untrusted file for a message: at most about 80 characters, never raising."""
    try:
        text = repr(value)
    except Exception:  # noqa: BLE001 - a value of an untrusted file: its repr may fail
        text = f"a {type(value).__name__}"
    text = " ".join(text.split())
    return text if len(text) <= 80 else text[:77] + "..."
