"""Panels shared by the run-based figures: metric curves, spectra, the six-panel training figure.

The six panels follow the authors' figure: (a) sorted class-mean spectrum at one epoch, normalized
by its largest value, on a log axis; (b)-(e) the NC conditions ``unit_norm``, ``zero_sum``,
``equal_inner_product``, ``within_class`` vs epoch (docs/theory.md, section 8; 0 at neural collapse);
(f) nearest-class-mean accuracy vs epoch. One colour per beta (:func:`style.beta_color`).
Every trajectory (a metric vs epoch, a spectrum) is drawn by :func:`plot_bands`: one line per grid
point, the mean over its seeds, with a band from the smallest to the largest seed.
:func:`training_panels` is the whole SCL and UCL figure but for the runs it selects;
:func:`plot_final_groups` draws a final value vs x per group (mean line, runs as dots).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

import numpy as np
from matplotlib.ticker import MaxNLocator, NullFormatter, NullLocator, ScalarFormatter

from ncgeom.figures.registry import Rendered
from ncgeom.figures.runs import (
    BAND_TEXT,
    MissingResults,
    accuracy_kind,
    accuracy_series,
    describe_runs,
    dominant_group,
    first_claim_with_runs,
    group_by_point,
    run_beta,
    seed_band,
)
from ncgeom.figures.style import beta_color, new_figure, no_data, save_figure
from ncgeom.runs.records import SavedRun

__all__ = [
    "final_value_axis",
    "NC_CONDITIONS",
    "METRIC_LABELS",
    "set_auto_log",
    "beta_axis",
    "plot_bands",
    "normalized_spectrum",
    "plot_metric",
    "plot_accuracy",
    "plot_spectrum",
    "six_panels",
    "training_panels",
    "plot_final_groups",
    "legend_entries",
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


def set_auto_log(ax, values: Sequence[float]) -> None:
    """Log y axis when all values are positive and span more than a factor 30."""
    vals = np.asarray([v for v in values if v is not None and math.isfinite(v)], dtype=float)
    if vals.size and vals.min() > 0 and vals.max() / vals.min() > 30:
        ax.set_yscale("log")


def final_value_axis(ax, key: str, ylabel: str, values: Sequence[float], runs: Sequence[SavedRun]) -> None:
    """Label the y axis of a final-value panel: accuracies on [0, 1] (saying which set), others log if wide."""
    ax.set_ylabel(ylabel)
    if key == "test_ncc_accuracy":
        ax.set_ylim(-0.02, 1.02)
        ax.set_ylabel(f"final NCC accuracy ({accuracy_kind(runs)} set)")
    else:
        set_auto_log(ax, values)



def beta_axis(ax, betas: Sequence[float], *, label: str = r"hardness $\beta$") -> None:
    """Symmetric-log beta axis (linear below 1) with a tick at every beta, plain numbers."""
    ax.set_xscale("symlog", linthresh=1.0)
    ticks = sorted({float(b) for b in betas})
    if ticks:  # explicit limits: autoscaling a symlog axis leaves a wide empty band left of 0
        ax.set_xlim(ticks[0] - 0.25, ticks[-1] * 1.25 if ticks[-1] > 1 else ticks[-1] + 0.25)
    ax.set_xticks(ticks)
    ax.xaxis.set_major_formatter(ScalarFormatter())
    ax.xaxis.set_minor_locator(NullLocator())
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel(label)


def _label_beta(label: str) -> float:
    """The beta written in a legend label by :func:`_beta_label` (for sorting the legend)."""
    try:
        return float(label.rsplit("=", 1)[1].strip(" )"))
    except (IndexError, ValueError):
        return math.inf


def _beta_label(beta: float, plain: str, hard: str) -> str:
    return f"{plain} (β = 0)" if beta == 0 else f"{hard} β = {beta:g}"


def plot_bands(ax, runs: Sequence[SavedRun], series_of: Callable[[SavedRun], tuple[Sequence[float], Sequence[float]]], *,
               color_of: Callable[[SavedRun], str], label_of: Callable[[SavedRun], str | None],
               linestyle_of: Callable[[SavedRun], str] | None = None, marker: str | None = None) -> list[float]:
    """One line per grid point: the mean over its seeds of ``series_of(run)`` at each x, with a min-max band.

    The runs are grouped by :func:`~ncgeom.figures.runs.group_by_point` (config without the seed) and each
    group is summarized by :func:`~ncgeom.figures.runs.seed_band`; a group's colour, label and line style
    are those of its first run (a label already drawn on ``ax`` is not repeated). Returns every value drawn
    (means and band edges), for the choice of a log axis; empty when no run has a value.
    """
    seen = set(ax.get_legend_handles_labels()[1])
    drawn: list[float] = []
    for group in group_by_point(runs):
        band = seed_band([series_of(run) for run in group])
        if not band.x.size:
            continue
        first = group[0]
        color, label = color_of(first), label_of(first)
        ls = linestyle_of(first) if linestyle_of else "-"
        ax.plot(band.x, band.mean, color=color, ls=ls, marker=marker, ms=2.5, label=None if label in seen else label)
        seen.add(label)
        if (band.hi > band.lo).any():  # one seed, or seeds that agree: no band to draw
            ax.fill_between(band.x, band.lo, band.hi, color=color, alpha=0.18, lw=0)
        drawn += [*band.mean.tolist(), *band.lo.tolist(), *band.hi.tolist()]
    return drawn


def _by_beta(runs: Sequence[SavedRun]) -> list[SavedRun]:
    return sorted(runs, key=run_beta)


def plot_metric(ax, runs: Sequence[SavedRun], key: str, *, plain: str = "SCL", hard: str = "HSCL", label_runs: bool = True) -> bool:
    """One NC metric vs epoch, one line per grid point (mean over seeds, min-max band) coloured by beta;
    False if no run holds ``key``."""
    everything = plot_bands(ax, _by_beta(runs), lambda run: run.series(key), color_of=lambda run: beta_color(run_beta(run)),
                            label_of=lambda run: _beta_label(run_beta(run), plain, hard) if label_runs else None)
    if not everything:
        no_data(ax, f"no '{key}' in the histories")
        return False
    ax.set_xlabel("epoch")
    ax.set_ylabel(METRIC_LABELS.get(key, key))
    set_auto_log(ax, everything)
    return True


def plot_accuracy(ax, runs: Sequence[SavedRun], *, plain: str = "SCL", hard: str = "HSCL") -> bool:
    """NCC test accuracy vs epoch, one line per grid point (mean over seeds, min-max band) coloured by beta."""
    drawn = plot_bands(ax, _by_beta(runs), accuracy_series, color_of=lambda run: beta_color(run_beta(run)),
                       label_of=lambda run: _beta_label(run_beta(run), plain, hard))
    if not drawn:
        no_data(ax, "no NCC accuracy in the histories")
        return False
    ax.set_xlabel("epoch")
    ax.set_ylabel(f"NCC accuracy ({accuracy_kind(runs)} set)")
    ax.set_ylim(-0.02, 1.02)
    return True


_SPECTRUM_FLOOR = 1e-12  # the smallest normalized eigenvalue drawn on the log axis


def normalized_spectrum(run: SavedRun, epoch: float | None = None) -> tuple[list[float], list[float]]:
    """(index 1..n, sorted class-mean spectrum divided by its largest value, floored at 1e-12) at ``epoch``
    (None: the last evaluated epoch); empty lists when the run has no spectrum."""
    spectrum = run.at_epoch("spectrum", epoch)
    if not spectrum:
        return [], []
    s = np.sort(np.abs(np.asarray(spectrum, dtype=float)))[::-1]
    s = s / s[0] if s[0] > 0 else s
    return [float(i) for i in range(1, len(s) + 1)], np.maximum(s, _SPECTRUM_FLOOR).tolist()


def plot_spectrum(ax, runs: Sequence[SavedRun], *, epoch: float | None = None, plain: str = "SCL", hard: str = "HSCL", color_of=None, label_of=None, linestyle_of=None) -> bool:
    """Sorted normalized class-mean spectrum (log axis) at ``epoch`` (None: last), one line per grid point
    (mean over seeds of the sorted normalized spectra, min-max band)."""
    drawn = plot_bands(ax, _by_beta(runs), lambda run: normalized_spectrum(run, epoch),
                       color_of=color_of or (lambda run: beta_color(run_beta(run))),
                       label_of=label_of or (lambda run: _beta_label(run_beta(run), plain, hard)),
                       linestyle_of=linestyle_of, marker="o")
    if not drawn:
        no_data(ax, "no spectrum in the histories")
        return False
    ax.set_yscale("log")
    # at least one decade shown, so a flat (NC) spectrum looks flat and tick labels stay plain
    ax.set_ylim(min(10 ** math.floor(math.log10(max(min(drawn), _SPECTRUM_FLOOR))), 0.1), 1.6)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("index (sorted)")
    ax.set_ylabel("normalized eigenvalue")
    return True


def six_panels(runs: Sequence[SavedRun], *, plain: str, hard: str, title: str, epoch: float | None = None):
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
    handles, labels = legend_entries(axes.ravel())
    if handles:
        order = sorted(range(len(labels)), key=lambda i: _label_beta(labels[i]))
        fig.legend([handles[i] for i in order], [labels[i] for i in order], loc="outside right center", title="hardness")
    fig.suptitle(title, fontsize=10)
    return fig


def legend_entries(axes: Iterable) -> tuple[list, list[str]]:
    """(handles, labels) of every axis, each label once, in first-seen order (for one figure legend)."""
    handles, labels = [], []
    for ax in axes:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            if lab not in labels:
                handles.append(h)
                labels.append(lab)
    return handles, labels


def plot_final_groups(ax, groups: dict, colors: dict, *, linestyle=None) -> list[float]:
    """One mean line per group (markers) with the individual runs as dots; returns the means plotted.

    ``groups`` is the output of :func:`ncgeom.figures.runs.group_final`; ``colors`` and the optional
    ``linestyle`` (a function of the label) style each group.
    """
    means = []
    for label in sorted(groups):
        xs, ys, points = groups[label]
        ax.plot(xs, ys, marker="o", ms=4, color=colors.get(label), label=label, ls=linestyle(label) if linestyle else "-")
        ax.scatter([p[0] for p in points], [p[1] for p in points], s=8, color=colors.get(label), alpha=0.5)
        means += ys
    return means


def training_panels(results: Path, out: Path, name: str, *, settings: tuple[str, str], preference, plain: str,
                    hard: str, what: str, prefer_sphere: bool = False) -> Rendered:
    """The six-panel training-dynamics figure of the Gaussian-data runs of ``settings`` (plain, hard).

    Runs: the first claim sweep of ``preference`` (a sequence of claim groups) holding random-init,
    label-positive runs on the ball or sphere; with ``prefer_sphere`` only the sphere runs if any;
    then the largest group of comparable runs (:func:`~ncgeom.figures.runs.dominant_group`).
    """
    runs = first_claim_with_runs(results, preference, setting=settings, dataset="gaussian", init="random",
                                 positives="label", norm=("ball", "sphere"))
    if not runs:
        raise MissingResults(f"no finished {plain}/{hard} run under {results}/sweeps (claims {preference})")
    if prefer_sphere and any(r.config.norm == "sphere" for r in runs):  # one normalization per figure
        runs = [r for r in runs if r.config.norm == "sphere"]
    runs = dominant_group(runs)
    c = runs[0].config
    about = describe_runs(runs)
    fig = six_panels(runs, plain=plain, hard=hard,
                     title=f"{plain} / {hard}{what}, Gaussian data, C = {c.classes}, normalization = {c.norm} "
                           f"({about.scale or 'scale not recorded'}; {about.points} grid points, {len(runs)} runs)")
    return save_figure(fig, out, name, details=f"{BAND_TEXT} {about.text()}")
