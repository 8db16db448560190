"""The outcome of a training run (a frozen record) and the run-directory files.

Run directory (docs/experiments.md):

- ``config.json``: the config fields plus ``"provenance"`` (git commit, package versions, time);
- ``history.jsonl``: one JSON object per epoch: ``epoch``, ``loss`` (mean over the epoch's steps),
  ``nc_value``, ``gap`` (= loss - nc_value), ``test_ncc_accuracy``, ``mean_norm``, ``time_s``,
  ``metrics`` (the theory.md section 8 keys, or null on epochs skipped by ``metrics_every``);
- ``summary.json``: ``final`` (metrics + ``loss``, ``test_ncc_accuracy``, ``mean_norm``, ``epoch``),
  ``initial`` (the same before training), ``nc_value``, ``nc_value_source``, ``gap``, ``config``,
  ``status`` (``completed`` or ``diverged``), ``message``; written last, so its presence marks a
  finished run;
- ``embeddings.npz``: the final training embeddings ``z`` [N, d] and class labels ``labels`` [N] (readable by ``ncgeom metrics``).

Non-finite floats are written as JSON null (strict JSON).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from ncgeom.atomic_io import atomic_write_bytes
from ncgeom.experiments.config import Config

__all__ = ["Result", "STATUSES", "jsonable", "write_json_atomic", "write_bytes_atomic", "read_summary"]

STATUSES: tuple[str, ...] = ("completed", "diverged")


@dataclass(frozen=True)
class Result:
    """A finished (or diverged) run.

    Attributes
    ----------
    config : Config
    status : {"completed", "diverged"}
        ``diverged``: the loss became non-finite; training stopped and the state of the last complete
        epoch was kept (``message`` says where).
    message : str
    history : tuple of dict
        One record per completed epoch (the history.jsonl lines).
    initial, final : dict
        Metrics (theory.md section 8) before training and at the last good epoch, with ``loss``,
        ``test_ncc_accuracy``, ``mean_norm``, ``epoch``.
    nc_value : float
        Closed-form loss at neural collapse for the estimator the run optimizes.
    nc_value_source : str
        Which closed form (``batch_nc_value`` for the weighted estimator, ...).
    embeddings : numpy.ndarray [N, d]
        Final training embeddings (float64); ``labels`` their true classes.
    wall_time_s : float
    """

    config: Config
    status: Literal["completed", "diverged"]
    message: str
    history: tuple[dict, ...] = field(repr=False)
    initial: dict = field(repr=False)
    final: dict
    nc_value: float
    nc_value_source: str
    embeddings: np.ndarray = field(repr=False, compare=False)
    labels: np.ndarray = field(repr=False, compare=False)
    wall_time_s: float = field(default=0.0, compare=False)

    @property
    def gap(self) -> float | None:
        """final loss - nc_value."""
        loss = self.final.get("loss")
        return None if loss is None else loss - self.nc_value

    def summary(self) -> dict[str, Any]:
        """The summary.json object (strict-JSON-ready)."""
        return jsonable({
            "status": self.status,
            "message": self.message,
            "final": self.final,
            "initial": self.initial,
            "nc_value": self.nc_value,
            "nc_value_source": self.nc_value_source,
            "gap": self.gap,
            "epochs_run": len(self.history),
            "wall_time_s": self.wall_time_s,
            "config": self.config.to_dict(),
        })


def jsonable(obj):
    """Deep copy with non-finite floats as None and numpy scalars/arrays as Python values."""
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return jsonable(obj.tolist())
    if isinstance(obj, np.generic):
        obj = obj.item()
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


write_bytes_atomic = atomic_write_bytes  # one implementation: ncgeom.atomic_io


def write_json_atomic(path: str | Path, obj) -> None:
    """json.dumps(jsonable(obj), indent=1) written atomically."""
    write_bytes_atomic(path, (json.dumps(jsonable(obj), indent=1, sort_keys=False) + "\n").encode())


def read_summary(run_dir: str | Path) -> dict | None:
    """summary.json of a run directory, or None if the run has not finished."""
    p = Path(run_dir) / "summary.json"
    if not p.is_file():
        return None
    return json.loads(p.read_text())
