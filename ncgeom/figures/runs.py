"""The saved results a figure reads: the runs of the claim sweeps and the theory-data files.

Figures never retrain. They read ``<results>/sweeps/<spec>/<run>/`` with
:func:`ncgeom.experiments.load_run` (one typed reader of the run-directory format) and
``<results>/theory/<name>.json`` (written by :mod:`ncgeom.reproduce.theory_data`). When the results a
figure needs are absent it raises :class:`MissingResults` (the pipeline reports "no data").
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ncgeom.atomic_io import read_json
from ncgeom.experiments.records import SavedRun, load_runs
from ncgeom.vocabulary import effective_beta, is_supervised, plain_setting

__all__ = [
    "MissingResults",
    "load_theory",
    "sweep_folders",
    "runs_for",
    "select_runs",
    "first_claim_with_runs",
    "dominant_group",
    "COMPARABLE_KEYS",
    "run_beta",
    "family_label",
    "family",
    "final_value",
    "accuracy_series",
    "accuracy_kind",
    "spectrum_floor_series",
    "group_final",
]


class MissingResults(LookupError):
    """The results a figure needs are not (yet) in the results directory."""


def load_theory(results: str | Path, name: str) -> Any:
    """Read ``<results>/theory/<name>.json``; raise :class:`MissingResults` if absent."""
    path = Path(results) / "theory" / f"{name}.json"
    if not path.exists():
        raise MissingResults(f"theory/{name}.json not found under {results}: run `ncgeom reproduce` (theory stage) first")
    return read_json(path)


def sweep_folders(results: str | Path, claims: Sequence[str]) -> list[Path]:
    """The sweep folders whose ``sweep.json`` tests one of ``claims`` (docs/theory.md, section 9 numbers).

    ``results`` is the output of ``ncgeom reproduce`` (its ``sweeps/`` folder is searched), a folder
    holding ``ncgeom sweep`` outputs, or one ``ncgeom sweep`` output (with its ``sweep.json``).
    """
    results = Path(results)
    if (results / "sweep.json").exists():
        candidates = [results]
    else:
        root = results / "sweeps" if (results / "sweeps").is_dir() else results
        candidates = sorted(p for p in root.iterdir() if p.is_dir()) if root.is_dir() else []
    wanted = {str(c) for c in claims}
    return [f for f in candidates if (f / "sweep.json").is_file() and str(read_json(f / "sweep.json")["claim"]) in wanted]


def select_runs(runs: Sequence[SavedRun], **conditions: Any) -> list[SavedRun]:
    """Runs whose config matches every condition (a Config field); a tuple/list/set means 'one of'.

    ``select_runs(runs, setting=("scl", "hscl"), norm="ball")``.
    """
    def ok(run: SavedRun) -> bool:
        for key, want in conditions.items():
            have = getattr(run.config, key)
            if not any(have == w for w in (want if isinstance(want, (tuple, list, set, frozenset)) else (want,))):
                return False
        return True

    return [run for run in runs if ok(run)]


def runs_for(results: str | Path, claims: Sequence[str], **conditions: Any) -> list[SavedRun]:
    """Finished runs of the sweeps testing ``claims`` matching ``conditions`` (one run per config)."""
    runs, seen = [], set()
    for folder in sweep_folders(results, claims):
        for run in load_runs(folder):
            key = run.config.to_json()
            if key not in seen:  # the same config in two sweeps: keep one
                seen.add(key)
                runs.append(run)
    return select_runs(runs, **conditions)


def first_claim_with_runs(results, claim_groups: Sequence[Sequence[str]], **conditions: Any) -> list[SavedRun]:
    """Runs of the first group of claims (in order of preference) that has runs matching ``conditions``."""
    for claims in claim_groups:
        runs = runs_for(results, claims, **conditions)
        if runs:
            return runs
    return []


COMPARABLE_KEYS = ("dataset", "norm", "model", "classes", "dim", "batch_size", "tau", "num_negatives", "estimator", "epochs", "lr")


def dominant_group(runs: Sequence[SavedRun], keys: Sequence[str] = COMPARABLE_KEYS) -> list[SavedRun]:
    """The runs sharing the most common values of ``keys`` (so one figure compares like with like)."""
    if not runs:
        return []

    def sig(run: SavedRun) -> tuple:
        return tuple(getattr(run.config, k) for k in keys)

    common, _ = Counter(sig(r) for r in runs).most_common(1)[0]
    return [r for r in runs if sig(r) == common]


def run_beta(run: SavedRun) -> float:
    """The hardness a run applied: its beta for hscl/hucl, 0 for scl/ucl (which ignore beta)."""
    return effective_beta(run.config.setting, run.config.beta)


def family_label(run: SavedRun) -> str:
    """``SCL``, ``HSCL β=5`` ...: the setting with its applied beta (HSCL at beta = 0 is SCL)."""
    beta = run_beta(run)
    if beta == 0:
        return plain_setting(run.config.setting).upper()
    return f"{run.config.setting.upper()} β={beta:g}"


def family(run: SavedRun) -> str:
    """``"SCL / HSCL"`` for the supervised settings, ``"UCL / HUCL"`` for the unsupervised ones."""
    return "SCL / HSCL" if is_supervised(run.config.setting) else "UCL / HUCL"


def final_value(run: SavedRun, key: str) -> float:
    """Final scalar ``key`` of a run, NaN if absent; ``test_ncc_accuracy`` is the training-set
    ``ncc_accuracy`` for runs without a test split (unconstrained features)."""
    value = run.final(key)
    if value is None and key == "test_ncc_accuracy":
        value = run.final("ncc_accuracy")
    return math.nan if value is None else float(value)


def accuracy_series(run: SavedRun) -> tuple[list[float], list[float]]:
    """NCC test accuracy vs epoch, or the training-set ``ncc_accuracy`` when the run has no test split."""
    epochs, values = run.series("test_ncc_accuracy")
    return (epochs, values) if values else run.series("ncc_accuracy")


def accuracy_kind(runs: Sequence[SavedRun]) -> str:
    """``test`` if every run with an accuracy has test accuracies, ``train`` if none, else ``test/train``."""
    kinds = {("test" if run.series("test_ncc_accuracy")[1] else "train") for run in runs if accuracy_series(run)[1]}
    return "/".join(sorted(kinds, reverse=True)) or "test"


def spectrum_floor_series(run: SavedRun) -> tuple[list[float], list[float]]:
    """(epochs, smallest normalized class-mean eigenvalue): the dimensional-collapse indicator vs epoch."""
    epochs, values = [], []
    for record in run.records:
        spectrum = record.value("spectrum")
        if not spectrum:
            continue
        s = np.abs(np.asarray(spectrum, dtype=float))
        if s.max() > 0:
            epochs.append(float(record.epoch))
            values.append(max(float(s.min() / s.max()), 1e-12))
    return epochs, values


def group_final(runs: Sequence[SavedRun], x: Callable[[SavedRun], float], y: Callable[[SavedRun], float] | str,
                group: Callable[[SavedRun], str]) -> dict[str, tuple[list[float], list[float], list[tuple[float, float]]]]:
    """{group label: (xs, mean ys, all (x, y) points)} of a final value ``y`` (a key or a function) vs ``x``."""
    get_y = y if callable(y) else (lambda run: final_value(run, y))
    buckets: dict = {}
    for run in runs:
        value = get_y(run)
        if math.isfinite(value):
            buckets.setdefault(group(run), {}).setdefault(float(x(run)), []).append(value)
    return {label: (sorted(by_x), [float(np.mean(by_x[v])) for v in sorted(by_x)], [(v, w) for v in sorted(by_x) for w in by_x[v]])
            for label, by_x in buckets.items()}
