"""Reusable panels of the run-based figures (the six-panel training-dynamics figure and friends).

The six panels follow the authors' figure: (a) sorted class-mean spectrum at one epoch, normalized
by its largest value, on a log axis; (b)-(e) the NC conditions ``unit_norm``, ``zero_sum``,
``equal_inner_product``, ``within_class`` vs epoch (theory.md section 8; 0 at neural collapse);
(f) nearest-class-mean test accuracy vs epoch. One colour per beta (:func:`plotting.beta_color`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ncgeom.reproduce.plotting import beta_color, new_figure, no_data
from ncgeom.reproduce.results import Run

__all__ = [
    "NC_CONDITIONS",
    "METRIC_LABELS",
    "plot_metric",
    "plot_spectrum",
    "plot_accuracy",
    "six_panels",
    "run_beta",
    "family_label",
    "accuracy_series",
    "accuracy_kind",
    "final_value",
    "spectrum_floor_series",
    "group_final",
    "set_auto_log",
    "runs_for",
    "sweep_folders",
    "first_claim_with_runs",
    "dominant_group",
    "COMPARABLE_KEYS",
    "beta_axis",
]

NC_CONDITIONS = ("unit_norm", "zero_sum", "equal_inner_product", "within_class")
METRIC_LABELS = {
    "unit_norm": r"unit norm: mean$_c\,|\,\|\mu_c\|-1|$",
    "zero_sum": r"zero sum: $\|\mathrm{mean}_c\,\mu_c\|$",
    "equal_inner_product": r"equal inner product: mean $|\cos+\frac{1}{C-1}|$",
    "within_class": r"within class: mean $\|z_i-\mu_c\|$",
    "etf_distance": "distance to the simplex ETF",
    "nc1": r"NC1: tr$(\Sigma_W\Sigma_B^+)/C$",
    "rankme": "RankMe (effective rank)",
    "ncc_accuracy": "NCC accuracy",
    "test_ncc_accuracy": "NCC test accuracy",
    "loss": "training loss",
    "gap": "loss - loss at NC",
}


def run_beta(run: Run) -> float:
    """The effective hardness of a run: its beta for hscl/hucl, 0 for scl/ucl (which ignore beta)."""
    if str(run.get("setting", "")).lower() in ("scl", "ucl"):
        return 0.0
    beta = run.get("beta", 0.0)
    return float(beta) if beta is not None else 0.0


def accuracy_series(run: Run) -> tuple[list[float], list[float]]:
    """NCC test accuracy vs epoch, or the training-set ``ncc_accuracy`` when the run has no test split."""
    epochs, values = run.series("test_ncc_accuracy")
    if not values:
        epochs, values = run.series("ncc_accuracy")
    return epochs, values


def accuracy_kind(runs: Sequence[Run]) -> str:
    """``test`` if every run with an accuracy has test accuracies, ``train`` if none, else ``test/train``."""
    kinds = {("test" if run.series("test_ncc_accuracy")[1] else "train") for run in runs if accuracy_series(run)[1]}
    return "/".join(sorted(kinds, reverse=True)) or "test"


def set_auto_log(ax, values: Sequence[float]) -> None:
    """Log y axis when all values are positive and span more than a factor 30."""
    vals = np.asarray([v for v in values if v is not None and math.isfinite(v)], dtype=float)
    if vals.size and vals.min() > 0 and vals.max() / vals.min() > 30:
        ax.set_yscale("log")


def _label_beta(label: str) -> float:
    """The beta written in a legend label by :func:`_beta_label` (for sorting the legend)."""
    try:
        return float(label.rsplit("=", 1)[1].strip(" )"))
    except (IndexError, ValueError):
        return math.inf


def _beta_label(beta: float, plain: str, hard: str) -> str:
    return f"{plain} (β = 0)" if beta == 0 else f"{hard} β = {beta:g}"


def plot_metric(ax, runs: Sequence[Run], key: str, *, plain: str = "SCL", hard: str = "HSCL", label_runs: bool = True) -> bool:
    """One NC metric vs epoch, one line per run coloured by beta; False if no run holds ``key``."""
    seen, everything = set(), []
    for run in sorted(runs, key=run_beta):
        epochs, values = run.series(key)
        if not values:
            continue
        beta = run_beta(run)
        label = _beta_label(beta, plain, hard) if label_runs and beta not in seen else None
        seen.add(beta)
        ax.plot(epochs, values, color=beta_color(beta), label=label)
        everything += values
    if not everything:
        no_data(ax, f"no '{key}' in the histories")
        return False
    ax.set_xlabel("epoch")
    ax.set_ylabel(METRIC_LABELS.get(key, key))
    set_auto_log(ax, everything)
    return True


def plot_accuracy(ax, runs: Sequence[Run], *, plain: str = "SCL", hard: str = "HSCL") -> bool:
    """NCC test accuracy vs epoch, one line per run coloured by beta."""
    seen, any_data = set(), False
    for run in sorted(runs, key=run_beta):
        epochs, values = accuracy_series(run)
        if not values:
            continue
        beta = run_beta(run)
        ax.plot(epochs, values, color=beta_color(beta), label=None if beta in seen else _beta_label(beta, plain, hard))
        seen.add(beta)
        any_data = True
    if not any_data:
        no_data(ax, "no NCC accuracy in the histories")
        return False
    ax.set_xlabel("epoch")
    ax.set_ylabel(f"NCC accuracy ({accuracy_kind(runs)} set)")
    ax.set_ylim(-0.02, 1.02)
    return True


def plot_spectrum(ax, runs: Sequence[Run], *, epoch: float | None = None, plain: str = "SCL", hard: str = "HSCL", color_of=None, label_of=None, linestyle_of=None) -> bool:
    """Sorted normalized class-mean spectrum (log axis) at ``epoch`` (None: last), one line per run."""
    seen, any_data = set(), False
    floor = 1e-12
    for run in sorted(runs, key=run_beta):
        spectrum = run.at_epoch("spectrum", epoch)
        if spectrum is None:
            spectrum = run.final("spectrum", None)
        if not spectrum:
            continue
        s = np.sort(np.abs(np.asarray(spectrum, dtype=float)))[::-1]
        s = s / s[0] if s[0] > 0 else s
        s = np.maximum(s, floor)
        beta = run_beta(run)
        color = color_of(run) if color_of else beta_color(beta)
        label = label_of(run) if label_of else _beta_label(beta, plain, hard)
        ax.plot(np.arange(1, len(s) + 1), s, color=color, marker="o", ms=2.5, ls=linestyle_of(run) if linestyle_of else "-", label=None if label in seen else label)
        seen.add(label)
        any_data = True
    if not any_data:
        no_data(ax, "no spectrum in the histories")
        return False
    from matplotlib.ticker import MaxNLocator

    ax.set_yscale("log")
    lows = [line.get_ydata().min() for line in ax.get_lines() if len(line.get_ydata())]
    if lows:  # at least one decade shown, so a flat (NC) spectrum looks flat and tick labels stay plain
        ax.set_ylim(min(10 ** math.floor(math.log10(max(min(lows), 1e-12))), 0.1), 1.6)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("index (sorted)")
    ax.set_ylabel("normalized eigenvalue")
    return True


def six_panels(runs: Sequence[Run], *, plain: str, hard: str, title: str, epoch: float | None = None):
    """The authors' six-panel figure for a family of runs (one curve per beta); returns the figure."""
    fig, axes = new_figure(2, 3, width=11.0, height=6.2)
    ax = axes[0][0]
    plot_spectrum(ax, runs, epoch=epoch, plain=plain, hard=hard)
    ax.set_title("(a) class-mean spectrum" + (f" at epoch {epoch:g}" if epoch is not None else " (last epoch)"))
    for ax, key, letter in zip((axes[0][1], axes[0][2], axes[1][0], axes[1][1]), NC_CONDITIONS, "bcde"):
        plot_metric(ax, runs, key, plain=plain, hard=hard)
        ax.set_title(f"({letter}) {key.replace('_', ' ')}")
    ax = axes[1][2]
    plot_accuracy(ax, runs, plain=plain, hard=hard)
    ax.set_title(f"(f) NCC accuracy ({accuracy_kind(runs)})")
    handles, labels = [], []
    for a in axes.ravel():
        for h, lab in zip(*a.get_legend_handles_labels()):
            if lab not in labels:
                handles.append(h)
                labels.append(lab)
    if handles:
        order = sorted(range(len(labels)), key=lambda i: _label_beta(labels[i]))
        fig.legend([handles[i] for i in order], [labels[i] for i in order], loc="outside right center", title="hardness")
    fig.suptitle(title, fontsize=10)
    return fig


def family_label(run: Run) -> str:
    """``SCL``, ``HSCL β=5`` ...: the setting with its effective beta (a hard setting at beta = 0 is
    the plain one: HSCL with beta = 0 is SCL)."""
    setting = str(run.get("setting", "?")).upper()
    beta = run_beta(run)
    if beta == 0:
        return {"HSCL": "SCL", "HUCL": "UCL"}.get(setting, setting)
    return f"{setting} β={beta:g}"


def first_claim_with_runs(results, claim_groups: Sequence[Sequence[str]], **conditions) -> list[Run]:
    """Runs of the first group of claims (in order of preference) that has runs matching ``conditions``."""
    for claims in claim_groups:
        runs = runs_for(results, claims, **conditions)
        if runs:
            return runs
    return []


def final_value(run: Run, key: str) -> float:
    """Final scalar ``key`` of a run (NCC accuracy falls back to the metrics' value); NaN if absent."""
    value = run.final(key, None)
    if value is None and key == "test_ncc_accuracy":
        value = run.final("ncc_accuracy", None)
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def spectrum_floor_series(run: Run) -> tuple[list[float], list[float]]:
    """(epochs, smallest normalized class-mean eigenvalue): the dimensional-collapse indicator vs epoch."""
    epochs, values = [], []
    for i, row in enumerate(run.rows()):
        spectrum = row.get("spectrum", (row.get("metrics") or {}).get("spectrum"))
        if not spectrum:
            continue
        s = np.abs(np.asarray(spectrum, dtype=float))
        if s.max() <= 0:
            continue
        epochs.append(float(row.get("epoch", i)))
        values.append(max(float(s.min() / s.max()), 1e-12))
    return epochs, values


def group_final(runs: Sequence[Run], x_key, y_key: str, group) -> dict:
    """{group label: (xs, mean ys, all (x, y) points)} of the final ``y_key`` vs ``x_key`` (a key or callable)."""
    buckets: dict = {}
    for run in runs:
        x = x_key(run) if callable(x_key) else run.get(x_key)
        y = final_value(run, y_key)
        if x is None or not math.isfinite(y):
            continue
        buckets.setdefault(group(run), {}).setdefault(float(x), []).append(y)
    out = {}
    for label, by_x in buckets.items():
        xs = sorted(by_x)
        out[label] = (xs, [float(np.mean(by_x[x])) for x in xs], [(x, y) for x in xs for y in by_x[x]])
    return out


def sweep_folders(results, claims: Sequence[str]) -> list:
    """Sweep folders testing one of ``claims`` (theory.md section 9 numbers).

    ``results`` is the output of ``ncgeom reproduce`` (its ``sweeps/`` folder is searched), a folder
    holding ``ncgeom sweep`` outputs, or one ``ncgeom sweep`` output (with its ``sweep.json``).

    A folder belongs to claim n when its ``sweep.json`` says ``"claim": "n"`` (a spec may list several,
    e.g. "1,6"), or, without a sweep.json, when its name starts with ``claim<n>``.
    """
    import json
    from pathlib import Path

    results = Path(results)
    if (results / "sweep.json").exists():  # a single `ncgeom sweep --out` folder
        candidates = [results]
    else:  # `ncgeom reproduce --out` (sweeps/ inside) or a folder of `ncgeom sweep` outputs
        root = results / "sweeps" if (results / "sweeps").is_dir() else results
        if not root.is_dir():
            return []
        candidates = sorted(p for p in root.iterdir() if p.is_dir())
    wanted = {str(c) for c in claims}
    folders = []
    for folder in candidates:
        meta = folder / "sweep.json"
        tags: set[str] = set()
        if meta.exists():
            try:
                claim = json.loads(meta.read_text(encoding="utf-8")).get("claim")
            except (OSError, ValueError):
                claim = None
            if claim is not None:
                tags = {t.strip() for t in str(claim).replace(";", ",").split(",") if t.strip()}
        if not tags:
            name = folder.name.lower()
            tags = {c for c in wanted if name.startswith(f"claim{c}") and not name[len(f"claim{c}"):][:1].isdigit()}
        if tags & wanted:
            folders.append(folder)
    return folders


def runs_for(results, claims: Sequence[str], **conditions) -> list[Run]:
    """Finished runs of the sweeps testing ``claims`` (:func:`sweep_folders`) matching ``conditions``."""
    from ncgeom.reproduce.results import load_runs, select_runs

    import json

    runs, seen = [], set()
    for folder in sweep_folders(results, claims):
        for run in load_runs(folder):
            key = json.dumps(run.config, sort_keys=True, default=str)
            if key not in seen:  # the same config in two sweeps: keep one
                seen.add(key)
                runs.append(run)
    return select_runs(runs, **conditions)


COMPARABLE_KEYS = ("dataset", "norm", "model", "classes", "dim", "batch_size", "tau", "num_negatives", "estimator", "epochs", "lr")


def dominant_group(runs: Sequence[Run], keys: Sequence[str] = COMPARABLE_KEYS) -> list[Run]:
    """The runs sharing the most common values of ``keys`` (so one figure compares like with like)."""
    from collections import Counter

    def sig(run):
        return tuple(str(run.get(k)) for k in keys)

    if not runs:
        return []
    common, _ = Counter(sig(r) for r in runs).most_common(1)[0]
    return [r for r in runs if sig(r) == common]


def beta_axis(ax, betas: Sequence[float], *, label: str = r"hardness $\beta$") -> None:
    """Symmetric-log beta axis (linear below 1) with a tick at every beta, plain numbers."""
    from matplotlib.ticker import NullFormatter, NullLocator, ScalarFormatter

    ax.set_xscale("symlog", linthresh=1.0)
    ticks = sorted({float(b) for b in betas})
    if ticks:  # explicit limits: autoscaling a symlog axis leaves a wide empty band left of 0
        ax.set_xlim(ticks[0] - 0.25, ticks[-1] * 1.25 if ticks[-1] > 1 else ticks[-1] + 0.25)
    ax.set_xticks(ticks)
    ax.xaxis.set_major_formatter(ScalarFormatter())
    ax.xaxis.set_minor_locator(NullLocator())
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel(label)
