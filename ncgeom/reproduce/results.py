"""Read saved results (run directories and theory JSON) for the figure scripts and the report.

A run directory (team contract, written by :mod:`ncgeom.experiments`) holds ``config.json``
(the run configuration plus ``"provenance"``), ``history.jsonl`` (one JSON object per epoch with
``"epoch"``, ``"loss"``, ``"nc_value"``, ``"gap"``, ``"test_ncc_accuracy"`` and ``"metrics"``, the
theory.md section 8 keys) and ``summary.json``. Figures never retrain: they only read these files
and the theory-data JSON files the pipeline writes under ``<results>/theory/``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "MissingResults",
    "Run",
    "load_run",
    "load_runs",
    "select_runs",
    "load_theory",
    "flatten",
]


class MissingResults(LookupError):
    """The results a figure needs are not (yet) in the results directory."""


def flatten(mapping: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Flatten nested dicts to dotted keys: ``{"a": {"b": 1}}`` -> ``{"a.b": 1}``."""
    out: dict[str, Any] = {}
    for key, value in mapping.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(flatten(value, f"{name}."))
        else:
            out[name] = value
    return out


@dataclass(frozen=True)
class Run:
    """One finished (or partial) training run read from disk.

    path : Path         the run directory
    config : dict       config.json without its "provenance"
    history : list      the rows of history.jsonl, in epoch order
    summary : dict      summary.json ({} if absent)
    """

    path: Path
    config: dict = field(repr=False)
    history: list = field(repr=False)
    summary: dict = field(repr=False)

    def get(self, key: str, default: Any = None) -> Any:
        """Config value by exact dotted key, else by its last component (``beta`` finds ``loss.beta``)."""
        flat = flatten(self.config)
        if key in flat:
            return flat[key]
        matches = [v for k, v in flat.items() if k.rsplit(".", 1)[-1] == key]
        return matches[0] if matches else default

    def rows(self) -> list[dict]:
        """The history rows, preceded by the state before training (summary ``"initial"``, epoch 0)
        when the history does not start at epoch 0."""
        initial = self.summary.get("initial")
        if isinstance(initial, Mapping) and initial and not (self.history and self.history[0].get("epoch", 1) == 0):
            metrics = initial.get("metrics") if isinstance(initial.get("metrics"), Mapping) else initial
            return [{**initial, "epoch": initial.get("epoch", 0) or 0, "metrics": dict(metrics)}, *self.history]
        return list(self.history)

    def series(self, key: str) -> tuple[list[float], list[float]]:
        """(epochs, values) of ``key`` from epoch 0 (:meth:`rows`), from the row or its ``"metrics"`` dict.

        Rows lacking the key (or holding null) are skipped.
        """
        epochs, values = [], []
        for i, row in enumerate(self.rows()):
            value = row.get(key, (row.get("metrics") or {}).get(key))
            if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
                epochs.append(float(row.get("epoch", i)))
                values.append(float(value))
        return epochs, values

    def last_with(self, key: str) -> dict | None:
        """The last history row that holds ``key`` (top level or in ``"metrics"``), or None."""
        for row in reversed(self.history):
            if row.get(key) is not None or (row.get("metrics") or {}).get(key) is not None:
                return row
        return None

    def final(self, key: str, default: float = math.nan) -> float | list | Any:
        """The final value of ``key``: summary ``"final"`` first, then the last history row holding it."""
        final = self.summary.get("final") or {}
        if key in final and final[key] is not None:
            return final[key]
        metrics = final.get("metrics") if isinstance(final.get("metrics"), Mapping) else {}
        if key in metrics and metrics[key] is not None:
            return metrics[key]
        row = self.last_with(key)
        if row is None:
            return default
        return row.get(key, (row.get("metrics") or {}).get(key))

    def at_epoch(self, key: str, epoch: float | None) -> Any:
        """Value of ``key`` at the history row nearest to ``epoch`` (None: the last row holding it)."""
        rows = [r for r in self.rows() if r.get(key) is not None or (r.get("metrics") or {}).get(key) is not None]
        if not rows:
            return None
        row = rows[-1] if epoch is None else min(rows, key=lambda r: abs(float(r.get("epoch", 0)) - epoch))
        return row.get(key, (row.get("metrics") or {}).get(key))


def load_run(path: str | Path) -> Run:
    """Read one run directory (config.json required; history.jsonl and summary.json optional)."""
    path = Path(path)
    config = json.loads((path / "config.json").read_text(encoding="utf-8"))
    config = {k: v for k, v in config.items() if k != "provenance"}
    history: list[dict] = []
    hist_file = path / "history.jsonl"
    if hist_file.exists():
        for line in hist_file.read_text(encoding="utf-8").splitlines():
            line = line.strip()
            if not line:
                continue
            try:
                history.append(json.loads(line))
            except json.JSONDecodeError:  # a torn last line of an interrupted run: ignore it
                break
    summary_file = path / "summary.json"
    summary = json.loads(summary_file.read_text(encoding="utf-8")) if summary_file.exists() else {}
    return Run(path=path, config=config, history=history, summary=summary)


def load_runs(root: str | Path, *, finished_only: bool = True) -> list[Run]:
    """All run directories under ``root`` (any depth), sorted by path.

    With ``finished_only`` (default) only runs with a summary.json whose status is not "failed" count.
    """
    root = Path(root)
    if not root.exists():
        return []
    runs = []
    for cfg in sorted(root.rglob("config.json")):
        if not (cfg.parent / "history.jsonl").exists():
            continue  # a sweep-level config, not a run
        run = load_run(cfg.parent)
        if finished_only and (not run.summary or run.summary.get("status") in ("failed", "error", "running")):
            continue
        runs.append(run)
    return runs


def select_runs(runs: Iterable[Run], **conditions: Any) -> list[Run]:
    """Runs whose config matches every condition; a tuple/list/set condition means 'one of'.

    ``select_runs(runs, setting=("scl", "hscl"), normalization="ball")``. A condition whose value is
    None matches runs lacking the key.
    """
    out = []
    for run in runs:
        ok = True
        for key, want in conditions.items():
            have = run.get(key)
            if isinstance(want, (tuple, list, set, frozenset)):
                ok = any(_equal(have, w) for w in want)
            else:
                ok = _equal(have, want)
            if not ok:
                break
        if ok:
            out.append(run)
    return out


def _equal(a: Any, b: Any) -> bool:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        return math.isclose(float(a), float(b), rel_tol=1e-12, abs_tol=1e-12)
    return a == b


def load_theory(results: str | Path, name: str) -> Any:
    """Read ``<results>/theory/<name>.json``; raise :class:`MissingResults` if absent."""
    path = Path(results) / "theory" / f"{name}.json"
    if not path.exists():
        raise MissingResults(f"{path} not found: run `ncgeom reproduce` (theory stage) first")
    return json.loads(path.read_text(encoding="utf-8"))
