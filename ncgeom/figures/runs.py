"""The saved results a figure reads: the runs of the claim sweeps and the theory-data files.

Figures never retrain. They read ``<results>/sweeps/<spec>/<run>/`` with
:func:`ncgeom.runs.load_run` (one typed reader of the run-directory format) and
``<results>/theory/<name>.json`` (written by :mod:`ncgeom.reproduce.theory_data`). When the results a
figure needs are absent it raises :class:`MissingResults` (the pipeline reports "no data").

Seeds: the runs of one grid point differ only by their seed (:func:`grid_point`); a trajectory is drawn
as the mean over them with a min-max band (:func:`seed_band`), and every caption states the scale, the
seeds per grid point and the hyperparameters that differ between the curves (:func:`describe_runs`).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ncgeom.atomic_io import read_json
from ncgeom.figures.records import ReproductionManifest
from ncgeom.runs.config import Config, config_fields
from ncgeom.runs.records import SavedRun, load_runs
from ncgeom.vocabulary import LAYERED_MODELS, SCALES, effective_beta, is_supervised, plain_setting

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
    "grid_point",
    "group_by_point",
    "SeedBand",
    "seed_band",
    "hyperparameters",
    "RunsDescription",
    "describe_runs",
    "reproduction_scale",
    "BAND_TEXT",
    "FINAL_TEXT",
    "theory_description",
]


class MissingResults(LookupError):
    """The results a figure needs are not (yet) in the results directory."""


def load_theory(results: str | Path, name: str) -> Any:
    """Read ``<results>/theory/<name>.json``; raise :class:`MissingResults` if absent."""
    path = Path(results) / "theory" / f"{name}.json"
    if not path.exists():
        raise MissingResults(f"theory/{name}.json not found in the results folder: run `ncgeom reproduce` (theory stage) first")
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


# --- seeds, grid points and the computed part of the captions ------------------------------------

#: How the trajectory figures draw the seeds of one grid point (their captions say it).
BAND_TEXT = ("Each line is the mean over the seeds of one grid point at each evaluated epoch; the shaded band spans "
             "the smallest to the largest seed (no band with one seed).")


def grid_point(run: SavedRun) -> Config:
    """The grid point of a run: its config with the seed set to 0 (the runs of a point differ only by seed)."""
    return run.config.replace(seed=0)


def group_by_point(runs: Sequence[SavedRun]) -> list[tuple[SavedRun, ...]]:
    """The runs grouped by grid point (:func:`grid_point`), in order of first appearance, each sorted by seed."""
    groups: dict[Config, list[SavedRun]] = {}
    for run in runs:
        groups.setdefault(grid_point(run), []).append(run)
    return [tuple(sorted(group, key=lambda r: r.config.seed)) for group in groups.values()]


@dataclass(frozen=True)
class SeedBand:
    """The seeds of one grid point summarized at each x (an epoch, or the index of a sorted spectrum).

    x : [m]       every x at which at least one seed has a finite value, increasing
    mean : [m]    the mean over the seeds with a value at x (the line drawn)
    lo, hi : [m]  their smallest and largest value (the band drawn)
    count : [m]   how many seeds have a value at x
    """

    x: np.ndarray
    mean: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    count: np.ndarray


def seed_band(series: Sequence[tuple[Sequence[float], Sequence[float]]]) -> SeedBand:
    r"""Mean, minimum and maximum over seeds at each x of the ``(xs, ys)`` series of one grid point's runs.

    .. math::

        \bar y(x) = \frac{1}{|S_x|} \sum_{s \in S_x} y_s(x), \qquad
        \mathrm{lo}(x) = \min_{s \in S_x} y_s(x), \qquad \mathrm{hi}(x) = \max_{s \in S_x} y_s(x)

    where ``S_x`` is the set of series (seeds) holding a finite value at x. The runs of a grid point share their
    metrics cadence, so ``S_x`` holds every seed unless a run's metric was not finite there.

    Example: ``seed_band([([0, 1], [1, 3]), ([0, 1], [3, 5])])`` has x = [0, 1], mean = [2, 4], lo = [1, 3],
    hi = [3, 5], count = [2, 2].
    """
    values: dict[float, list[float]] = {}
    for i, (xs, ys) in enumerate(series):
        if len(xs) != len(ys):
            raise ValueError(f"series[{i}] must have as many x as y values, got {len(xs)} and {len(ys)}")
        for x, y in zip(xs, ys):
            if y is not None and math.isfinite(y):
                values.setdefault(float(x), []).append(float(y))
    xs = sorted(values)
    columns = [np.asarray(values[x]) for x in xs]
    return SeedBand(np.asarray(xs, dtype=float), np.array([c.mean() for c in columns], dtype=float),
                    np.array([c.min() for c in columns], dtype=float), np.array([c.max() for c in columns], dtype=float),
                    np.array([c.size for c in columns], dtype=int))


#: Config fields that say where a run was computed or how often it was measured, not what was trained.
_NOT_HYPERPARAMETERS = frozenset({"seed", "device", "backend", "metrics_every"})
_MODEL_INPUT_FIELDS = ("input_dim", "separation", "spread", "test_per_class")  # read only by an encoder of inputs


def hyperparameters(config: Config) -> dict[str, Any]:
    """The fields of ``config`` that shape what is trained, each with the value the run applies.

    Left out: the seed (a grid point is averaged over it), device and backend (where and how the loss was
    computed) and metrics_every (the cadence, stated on its own). ``beta`` is the applied hardness (0 for
    scl/ucl, :func:`ncgeom.vocabulary.effective_beta`), ``dim`` is d (C - 1 when unset), and a field the run
    ignores is None: init_noise without a near-NC start, init_scale without a random unconstrained start,
    noise_scale with label positives, hidden_dim and depth without an MLP, margin unless psi is triplet, the
    Gaussian-mixture fields for digits, test_fraction for Gaussian data, and the input fields (input_dim,
    separation, spread, test_per_class) for unconstrained features, which have no input.
    """
    values = {f.name: getattr(config, f.name) for f in config_fields() if f.name not in _NOT_HYPERPARAMETERS}
    values["beta"] = effective_beta(config.setting, config.beta)
    values["dim"] = config.embedding_dim
    ignored = set()
    if config.init != "near_nc":
        ignored.add("init_noise")
    if config.init != "random" or config.model != "unconstrained":
        ignored.add("init_scale")
    if config.positives != "noise":
        ignored.add("noise_scale")
    if config.model not in LAYERED_MODELS:
        ignored |= {"hidden_dim", "depth"}
    if config.psi != "triplet":
        ignored.add("margin")
    if config.dataset == "digits":
        ignored |= {"samples_per_class", *_MODEL_INPUT_FIELDS}
    else:
        ignored.add("test_fraction")
    if config.model == "unconstrained":
        ignored |= set(_MODEL_INPUT_FIELDS)
    return {name: (None if name in ignored else value) for name, value in values.items()}


def _value_text(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def _sort_key(value: Any) -> tuple:
    return (0, value, "") if isinstance(value, (int, float)) and not isinstance(value, bool) else (1, 0, str(value))


def _sweep_scale(folder: Path) -> str | None:
    """The scale recorded in a sweep folder's ``sweep.json`` (ncgeom.campaigns.sweep writes it), None if absent."""
    path = folder / "sweep.json"
    return str(read_json(path)["scale"]) if path.is_file() else None


def reproduction_scale(results: str | Path) -> str | None:
    """The scale of the reproduction in ``results`` (its ``reproduce.json``:
    :class:`~ncgeom.figures.records.ReproductionManifest`), None for another folder."""
    manifest = ReproductionManifest.load(results)
    return None if manifest is None else manifest.scale


@dataclass(frozen=True)
class RunsDescription:
    """What a caption says about the runs a figure plots (:func:`describe_runs`).

    scale : the sweep scales the runs come from (tiny, quick, full), "+"-joined when mixed; None when no
        sweep.json records it
    seeds_per_point : (fewest, most) runs per grid point (equal when every point has the same seeds)
    seeds : the seeds when every grid point has the same set, else ()
    varying : (field, values) of each hyperparameter (:func:`hyperparameters`) that differs between the
        runs, with its values in order; fields that change together (one determines the other both ways)
        are one entry with a tuple of values per combination, e.g. ``("init, lr", (("near_nc", 0.05),
        ("random", 0.01)))``
    metrics_every : the metrics cadences of the runs, in epochs (each run also measures its last epoch)
    points, runs : number of grid points and of runs
    """

    scale: str | None
    seeds_per_point: tuple[int, int]
    seeds: tuple[int, ...]
    varying: tuple[tuple[str, tuple], ...]
    metrics_every: tuple[int, ...]
    points: int
    runs: int

    def text(self, *, cadence: bool = True) -> str:
        """The computed sentences of a caption (with ``cadence``: the metrics cadence, for trajectories)."""
        lo, hi = self.seeds_per_point
        count = f"{lo}" if lo == hi else f"{lo} to {hi}"
        seeds = f" ({', '.join(map(str, self.seeds))})" if self.seeds else ""
        parts = [f"Scale: {self.scale or 'not recorded'}; {self.runs} runs, {self.points} grid points, "
                 f"{count} seed{'s' if hi != 1 else ''}{seeds} per grid point."]
        if cadence and self.metrics_every:
            every = " or ".join(map(str, self.metrics_every))
            parts.append(f"Metrics every {every} epoch{'s' if self.metrics_every != (1,) else ''} and at the last.")
        if self.varying:
            clauses = []
            for name, values in self.varying:
                if "," in name:  # fields that change together: one combination per curve family
                    combos = [", ".join(f"{n} = {_value_text(v)}" for n, v in zip(name.split(", "), combo) if v is not None)
                              for combo in values]
                    clauses.append(" vs ".join(f"({c})" for c in combos))
                else:
                    unused = " (unused by the other runs)" if None in values else ""
                    clauses.append(f"{name}: " + ", ".join(_value_text(v) for v in values if v is not None) + unused)
            parts.append("Differ between curves: " + "; ".join(clauses) + ".")
        else:
            parts.append("No hyperparameter differs between the runs.")
        return " ".join(parts)


def describe_runs(runs: Sequence[SavedRun]) -> RunsDescription:
    """The scale, the seeds per grid point and the hyperparameters that differ among ``runs`` (for a caption).

    The scale is the one each run's sweep recorded (``sweep.json`` of its folder); grid points are
    :func:`grid_point`; the compared fields are :func:`hyperparameters` (the seed excluded). Two varying fields
    that determine each other (the same partition of the runs, e.g. init and lr when near-NC runs use one lr
    and random ones another) are reported as one entry, so the caption says which value goes with which. A
    field that only some runs use (None in :func:`hyperparameters` for the others) varies when the runs that
    use it take two or more values.
    """
    if not runs:
        raise ValueError("runs must hold at least one run")
    found = {_sweep_scale(folder) for folder in {r.path.parent for r in runs}} - {None}
    scales = [s for s in SCALES if s in found] + sorted(str(s) for s in found - set(SCALES))
    groups = group_by_point(runs)
    sizes = [len(g) for g in groups]
    seed_sets = {tuple(r.config.seed for r in g) for g in groups}
    table = [hyperparameters(r.config) for r in runs]
    # a field varies when the runs that use it differ in it (init_noise, used by near-NC starts alone, does not)
    names = [n for n in table[0] if len({repr(row[n]) for row in table if row[n] is not None}) > 1]
    partition = {n: tuple(repr(row[n]) for row in table) for n in names}

    def classes(n: str) -> int:
        return len(set(partition[n]))

    varying: list[tuple[str, tuple]] = []
    used: set[str] = set()
    for n in names:
        if n in used:
            continue
        together = [m for m in names if m not in used and classes(m) == classes(n)
                    and len(set(zip(partition[n], partition[m]))) == classes(n)]
        used |= set(together)
        if len(together) == 1:
            values = sorted({row[n] for row in table if row[n] is not None}, key=_sort_key)
            if any(row[n] is None for row in table):
                values.append(None)
            varying.append((n, tuple(values)))
        else:
            combos = sorted({tuple(row[m] for m in together) for row in table}, key=lambda c: [_sort_key(v) for v in c])
            varying.append((", ".join(together), tuple(combos)))
    return RunsDescription(
        scale="+".join(scales) or None,
        seeds_per_point=(min(sizes), max(sizes)),
        seeds=next(iter(seed_sets)) if len(seed_sets) == 1 else (),
        varying=tuple(varying),
        metrics_every=tuple(sorted({r.config.metrics_every for r in runs})),
        points=len(groups),
        runs=len(runs),
    )


#: How the final-value figures draw the seeds (their captions say it).
FINAL_TEXT = "Lines: the mean over the seeds of each grid point; dots: the individual runs."


def theory_description(results: str | Path) -> str:
    """The computed sentence of a theory figure's caption: the reproduction's scale; no runs, so no seeds."""
    scale = reproduction_scale(results)
    return f"Scale: {scale or 'not recorded'} (theory data computed by the reproduction; no training runs, no seeds)."
