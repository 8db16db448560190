"""Feature normalization (none / ball / sphere) and dimensional collapse.

Top row: final sorted class-mean spectrum, normalized by its largest value, on one shared log scale,
one panel per normalization, one curve per trained setting and encoder (colour; solid beta = 0, dashed
hard negatives); a tail orders of magnitude below 1 is dimensional collapse (docs/theory.md, section 8,
spectrum). Rows 2-4, vs epoch: distance to the simplex ETF, NC1 = tr(Sigma_W pinv(Sigma_B))/C (log
axis) and RankMe (effective rank; at most C-1 = d here, low under dimensional collapse); each curve is the
mean over the seeds of one grid point with a min-max band. The claim-4
sweep compares none with sphere; when it has no ball run, the ball runs of the claim-1 sweep with the
same encoder fill the middle column. Bears on claim 4 of docs/theory.md, section 9 (without normalization
Adam ends in dimensional collapse, with or without hard negatives) and on the ball/sphere hypothesis
of Theorems 2 and 3. Reads the claim-4 (and claim-1) sweeps under ``<results>/sweeps/``.

Run: ``python -m ncgeom.figures.fig_normalization --results DIR --out DIR``.
"""

from __future__ import annotations

import math
from operator import methodcaller
from pathlib import Path

from ncgeom.figures.panels import legend_entries, plot_bands, plot_spectrum, set_auto_log
from ncgeom.figures.registry import Rendered
from ncgeom.figures.runs import BAND_TEXT, MissingResults, describe_runs, family_label, run_beta, runs_for
from ncgeom.figures.style import figure_main, new_figure, no_data, save_figure

__all__ = ["NAME", "plot"]

NAME = "fig_normalization"
CLAIMS = ("4",)
NORMS = ("none", "ball", "sphere")


def _style(run):
    return "-" if run_beta(run) == 0 else "--"


def _color(run):
    palette = {("unconstrained", 0): "#0072B2", ("unconstrained", 1): "#009E73", ("mlp", 0): "#E69F00", ("mlp", 1): "#D55E00"}
    return palette.get((str(run.config.model), int(run_beta(run) > 0)), "#CC79A7")


def _label(run):
    return f"{family_label(run)}, {run.config.model}"


def plot(results: Path, out: Path) -> Rendered:
    runs = runs_for(results, CLAIMS, init="random", positives="label")
    if not {r.config.norm for r in runs} & {"none"}:
        raise MissingResults(f"no run without normalization under {results}/sweeps (claims {', '.join(CLAIMS)})")
    if not any(r.config.norm == "ball" for r in runs):
        # the claim-4 sweep compares none with sphere; the ball runs of claim 1 (same model) fill the middle column
        models = {r.config.model for r in runs}
        runs += [r for r in runs_for(results, ("1",), norm="ball", init="random") if r.config.model in models and run_beta(r) in {run_beta(x) for x in runs}]
    rows = (("etf_distance", "distance to the simplex ETF", False), ("nc1", r"NC1: tr$(\Sigma_W\Sigma_B^+)/C$", True), ("rankme", "RankMe (effective rank)", False))
    fig, axes = new_figure(1 + len(rows), 3, width=11.0, height=10.5)
    for col, norm in enumerate(NORMS):
        group = sorted([r for r in runs if r.config.norm == norm], key=lambda r: (str(r.config.model), run_beta(r)))
        ax_s = axes[0][col]
        if not group:
            for row in range(1 + len(rows)):
                no_data(axes[row][col], f"no run with norm = {norm}")
            continue
        plot_spectrum(ax_s, group, color_of=_color, label_of=_label, linestyle_of=_style)
        ax_s.set_title(f"norm = {norm}: final spectrum")
        for row, (key, ylabel, log) in enumerate(rows, start=1):
            ax = axes[row][col]
            values = plot_bands(ax, group, methodcaller("series", key), color_of=_color, label_of=_label, linestyle_of=_style)
            if log:
                set_auto_log(ax, values)
            ax.set_xlabel("epoch")
            ax.set_ylabel(ylabel)
            ax.set_title(f"norm = {norm}: {key.replace('_', ' ')}")
    lows = [line.get_ydata().min() for ax in axes[0] for line in ax.get_lines() if len(line.get_ydata())]
    if lows:  # one scale for the three spectra, so that collapse is compared at a glance
        bottom = 10 ** math.floor(math.log10(max(min(lows), 1e-12)) - 0.2)
        for ax in axes[0]:
            if ax.get_lines():
                ax.set_ylim(bottom, 1.6)
    handles, labels = legend_entries(axes.ravel())
    fig.legend(handles, labels, loc="outside right center", title="setting, encoder")
    c = runs[0].config.classes
    fig.suptitle(f"Feature normalization vs dimensional collapse (Gaussian data, C = {c}, d = {runs[0].config.dim or 'C-1'})", fontsize=10)
    return save_figure(fig, out, NAME, details=f"{BAND_TEXT} {describe_runs(runs).text()}")


if __name__ == "__main__":
    raise SystemExit(figure_main(plot, __doc__))
