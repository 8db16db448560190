"""The files of a run directory, each owned by one record type that writes it and reads it back.

A run directory (docs/experiments.md) holds:

- ``config.json``: the :class:`~ncgeom.runs.config.Config` fields plus ``"provenance"`` (git commit,
  package versions, time): :func:`save_config` / :func:`load_config`;
- ``history.jsonl``: one :class:`EpochRecord` per line, the theory metrics nested under ``"metrics"``
  (null on epochs skipped by ``metrics_every``): :class:`HistoryWriter` (the whole file rewritten by
  atomic rename after each epoch) or :func:`save_history` / :func:`load_history`;
- ``summary.json``: one :class:`RunSummary`, written last (atomically), so its presence marks a
  finished run. Its ``final`` and ``initial`` are :class:`EpochRecord` objects too (the same shape as a
  history line: metrics nested under ``"metrics"``); its ``config`` holds the fields the run's data set reads
  (:meth:`~ncgeom.runs.config.Config.applicable_dict`);
- ``embeddings.npz``: the final training embeddings ``z`` [N, d] and labels ``labels`` [N]
  (:mod:`ncgeom.runs.embeddings`);
- ``checkpoint.pt`` (image runs): :mod:`ncgeom.runs.checkpoint`.

A running run writes them through :class:`ncgeom.runs.folder.RunFolder`, the one writer of a run directory.

:func:`load_run` reads the whole directory into a frozen :class:`SavedRun` (figures and the report use
it). Every ``from_dict`` rejects a missing or unknown key, naming it: a file of another shape is an
error, never guessed at. Non-finite floats are written as JSON null (strict JSON, ncgeom.atomic_io).

Every file is written by :mod:`ncgeom.atomic_io` (temporary file + rename): a path is never opened for
writing, so a symlink planted in a run directory is replaced, never written through, and a killed run
leaves every file either absent or complete (it has no summary.json, so a resumed sweep reruns it).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from ncgeom.atomic_io import atomic_write_json, atomic_write_text, dumps_json, jsonable, read_json
from ncgeom.metrics.record import METRIC_NAMES
from ncgeom.runs.config import Config, config_from_dict
from ncgeom.validate import require_keys
from ncgeom.vocabulary import (
    CONVERGENCE_STATES,
    RUN_STATUSES,
    STOP_REASONS,
    ConvergenceState,
    RunStatus,
    StopReason,
)

__all__ = [
    "EpochRecord",
    "RunSummary",
    "SavedRun",
    "save_config",
    "load_config",
    "HistoryWriter",
    "save_history",
    "load_history",
    "load_run",
    "load_runs",
    "CONFIG_FILE",
    "HISTORY_FILE",
    "SUMMARY_FILE",
]

CONFIG_FILE, HISTORY_FILE, SUMMARY_FILE = "config.json", "history.jsonl", "summary.json"


@dataclass(frozen=True)
class EpochRecord:
    """The state after one epoch (one history.jsonl line); epoch 0 is the state before training.

    Attributes
    ----------
    epoch : int
    loss : float or None
        Mean batch loss over the epoch's steps (None at epoch 0).
    nc_value : float
        Closed-form loss at neural collapse of the estimator the run optimizes.
    gap : float or None
        ``loss - nc_value``.
    test_ncc_accuracy, mean_norm : float or None
        Test nearest-class-mean accuracy (None without a test split) and mean embedding norm (None on
        epochs without metrics).
    time_s : float or None
        Seconds since the run started (None for the initial state).
    metrics : mapping or None
        The docs/theory.md section 8 metrics (keys of ``ncgeom.metrics.METRIC_NAMES``), None on epochs
        skipped by ``metrics_every``.
    probe_loss, grad_norm : float or None
        At the epochs with metrics: the value of the run's training objective on its fixed probe batches, and the
        norm of its gradient with respect to the parameters (:mod:`ncgeom.runs.convergence`); None elsewhere and
        in records written before they existed.
    """

    epoch: int
    loss: float | None
    nc_value: float
    gap: float | None
    test_ncc_accuracy: float | None = None
    mean_norm: float | None = None
    time_s: float | None = None
    metrics: Mapping[str, Any] | None = field(default=None, repr=False)
    probe_loss: float | None = None
    grad_norm: float | None = None

    def value(self, key: str) -> Any:
        """A field of the record or, for a metric name, the metric (None when not computed)."""
        if key in _EPOCH_FIELDS:
            return getattr(self, key)
        if key in METRIC_NAMES:
            return None if self.metrics is None else self.metrics.get(key)
        raise ValueError(f"key must be an epoch field ({', '.join(_EPOCH_FIELDS)}) or a metric "
                         f"({', '.join(METRIC_NAMES)}), got {key!r}")

    def to_dict(self) -> dict[str, Any]:
        return jsonable({f: getattr(self, f) for f in _EPOCH_FIELDS})

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> EpochRecord:
        require_keys("epoch record", data, accepted=_EPOCH_FIELDS, required={"epoch", "loss", "nc_value", "gap", "metrics"})
        metrics = data["metrics"]
        if metrics is not None:
            require_keys("epoch record metrics", metrics, accepted=METRIC_NAMES)
        return cls(**data)


_EPOCH_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(EpochRecord))


@dataclass(frozen=True)
class RunSummary:
    """summary.json: how a run ended, its initial and final state, the NC value it is compared with.

    ``status`` is ``"completed"`` or ``"diverged"`` (the loss became non-finite; ``message`` says where,
    and ``final`` is the last complete epoch). ``final`` is the last epoch with metrics. ``stop_reason``: why the
    run stopped (its budget, convergence under ``stop="converged"``, divergence); ``convergence``: the state of
    :func:`ncgeom.runs.convergence.convergence_state` at the final epoch (docs/theory.md, section 9,
    "Convergence"); ``grad_reference``: the gradient norm its gradient ratio is taken against (the initial one, or
    at a random initialization for a run started near NC); None in summaries written before they existed.
    """

    status: RunStatus
    message: str
    final: EpochRecord
    initial: EpochRecord
    nc_value: float
    nc_value_source: str
    epochs_run: int
    wall_time_s: float
    config: Config = field(repr=False)
    stop_reason: StopReason | None = None
    convergence: ConvergenceState | None = None
    grad_reference: float | None = None

    def __post_init__(self) -> None:
        if self.status not in RUN_STATUSES:
            raise ValueError(f"status must be one of {', '.join(RUN_STATUSES)}, got {self.status!r}")
        if self.stop_reason is not None and self.stop_reason not in STOP_REASONS:
            raise ValueError(f"stop_reason must be one of {', '.join(STOP_REASONS)}, got {self.stop_reason!r}")
        if self.convergence is not None and self.convergence not in CONVERGENCE_STATES:
            raise ValueError(f"convergence must be one of {', '.join(CONVERGENCE_STATES)}, got {self.convergence!r}")

    @property
    def converged(self) -> bool:
        """True when the run converged by the rule of docs/theory.md, section 9 (False for older summaries)."""
        return self.status == "completed" and self.convergence == "converged"

    @property
    def gap(self) -> float | None:
        """final loss - nc_value."""
        return self.final.gap

    @property
    def rel_gap(self) -> float | None:
        """(final loss - nc_value) / |nc_value| (docs/theory.md, section 9: the NC rule's gap), None without a loss
        or with nc_value 0."""
        loss = self.final.loss
        return None if loss is None or not self.nc_value else (loss - self.nc_value) / abs(self.nc_value)

    @property
    def spectrum_min(self) -> float | None:
        """The smallest value of the final normalized class-mean spectrum (the DC rule's quantity, docs/theory.md,
        section 8), None when it was not computed."""
        values = [v for v in (self.final.value("spectrum") or []) if v is not None]
        return min(values) if values else None

    def to_dict(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out.update(final=self.final.to_dict(), initial=self.initial.to_dict(), config=self.config.applicable_dict())
        return jsonable(out)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RunSummary:
        names = {f.name for f in fields(cls)}
        require_keys("run summary", data, accepted=names,
                     required=names - {"stop_reason", "convergence", "grad_reference"})
        return cls(**{**data, "final": EpochRecord.from_dict(data["final"]),
                      "initial": EpochRecord.from_dict(data["initial"]), "config": config_from_dict(data["config"])})

    def save(self, run_dir: str | Path) -> Path:
        """Write ``run_dir/summary.json`` atomically."""
        return atomic_write_json(Path(run_dir) / SUMMARY_FILE, self.to_dict())

    @classmethod
    def load(cls, run_dir: str | Path) -> RunSummary | None:
        """``run_dir/summary.json``, or None if the run has not finished."""
        path = Path(run_dir) / SUMMARY_FILE
        return cls.from_dict(read_json(path)) if path.is_file() else None


def save_config(run_dir: str | Path, config: Config, provenance: Mapping[str, Any]) -> Path:
    """Write ``run_dir/config.json``: the config fields plus ``"provenance"``."""
    return atomic_write_json(Path(run_dir) / CONFIG_FILE, {**config.to_dict(), "provenance": dict(provenance)})


def load_config(path: str | Path) -> tuple[Config, dict[str, Any]]:
    """(config, provenance) of a run directory's config.json (or of a config.json path)."""
    path = Path(path)
    data = dict(read_json(path / CONFIG_FILE if path.is_dir() else path))
    provenance = data.pop("provenance", {})
    return config_from_dict(data), provenance


def _history_line(record: EpochRecord) -> str:
    return dumps_json(record.to_dict(), indent=None) + "\n"


def save_history(run_dir: str | Path, records, *, durable: bool = True) -> Path:
    """Write ``run_dir/history.jsonl`` (one line per :class:`EpochRecord`) atomically."""
    return atomic_write_text(Path(run_dir) / HISTORY_FILE, "".join(_history_line(r) for r in records), durable=durable)


class HistoryWriter:
    """The history.jsonl of a running run, rewritten whole by atomic rename after each epoch.

    The file is never opened for appending: each :meth:`append` writes all lines so far to a temporary
    file and renames it over history.jsonl (without fsync; :meth:`close` writes once more with fsync).
    A killed run thus leaves a complete history of its finished epochs, and a symlink planted at
    history.jsonl is replaced, not followed. Cost: O(E^2) bytes over E epochs, the lines being encoded
    once each: 300 epochs of 660-byte lines (C = 10) rewrite 30 MB in total, 150 ms (measured).
    Creating the writer replaces any previous history with an empty file.
    """

    def __init__(self, run_dir: str | Path):
        self.path = Path(run_dir) / HISTORY_FILE
        self._lines: list[str] = []
        atomic_write_text(self.path, "", durable=False)

    def append(self, record: EpochRecord, *, write: bool = True) -> None:
        """Add one epoch record and rewrite the file (atomic rename, no fsync); ``write=False`` only keeps
        the record for the next write (or :meth:`close`)."""
        self._lines.append(_history_line(record))
        if write:
            atomic_write_text(self.path, "".join(self._lines), durable=False)

    def close(self) -> None:
        """Write the final file durably (fsync before the rename)."""
        atomic_write_text(self.path, "".join(self._lines), durable=True)


def load_history(run_dir: str | Path) -> tuple[EpochRecord, ...]:
    """The epoch records of ``run_dir/history.jsonl``.

    ncgeom writes the file by atomic rename (:class:`HistoryWriter`), so it never ends in a torn line; a
    torn last line in a file written otherwise (appended by another tool and interrupted) is dropped.
    """
    path = Path(run_dir) / HISTORY_FILE
    if not path.is_file():
        return ()
    lines = path.read_text(encoding="utf-8").splitlines()
    records = []
    for i, line in enumerate(lines):
        try:
            data = json.loads(line)
        except json.JSONDecodeError:
            if i == len(lines) - 1:  # the line being written when the run was killed
                break
            raise ValueError(f"{path}: line {i + 1} is not JSON") from None
        records.append(EpochRecord.from_dict(data))
    return tuple(records)


@dataclass(frozen=True)
class SavedRun:
    """A run directory read back: its config, provenance, history and summary (None if unfinished)."""

    path: Path
    config: Config
    provenance: Mapping[str, Any] = field(repr=False)
    history: tuple[EpochRecord, ...] = field(repr=False)
    summary: RunSummary | None = field(repr=False)

    @property
    def records(self) -> tuple[EpochRecord, ...]:
        """The state before training (epoch 0, from the summary) followed by the history."""
        return ((self.summary.initial,) if self.summary is not None else ()) + self.history

    def series(self, key: str) -> tuple[list[float], list[float]]:
        """(epochs, values) of ``key`` (:meth:`EpochRecord.value`) from epoch 0; missing values skipped."""
        epochs, values = [], []
        for record in self.records:
            value = record.value(key)
            if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
                epochs.append(float(record.epoch))
                values.append(float(value))
        return epochs, values

    def at_epoch(self, key: str, epoch: float | None = None) -> Any:
        """``key`` at the record nearest to ``epoch`` that holds it (None: the last one); None if none does."""
        held = [r for r in self.records if r.value(key) is not None]
        if not held:
            return None
        record = held[-1] if epoch is None else min(held, key=lambda r: abs(r.epoch - epoch))
        return record.value(key)

    def final(self, key: str) -> Any:
        """``key`` in the summary's final state (None if unfinished or not computed)."""
        return None if self.summary is None else self.summary.final.value(key)


def load_run(run_dir: str | Path) -> SavedRun:
    """Read a run directory (config.json required; history.jsonl and summary.json if present)."""
    path = Path(run_dir)
    config, provenance = load_config(path)
    return SavedRun(path, config, provenance, load_history(path), RunSummary.load(path))


def load_runs(root: str | Path) -> list[SavedRun]:
    """The finished runs (with a summary.json) in the direct subdirectories of ``root``, sorted by name."""
    root = Path(root)
    if not root.is_dir():
        return []
    return [load_run(d) for d in sorted(root.iterdir()) if (d / SUMMARY_FILE).is_file() and (d / CONFIG_FILE).is_file()]
