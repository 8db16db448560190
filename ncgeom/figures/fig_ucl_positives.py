"""UCL with label-based positives vs additive-Gaussian-noise positives.

Panels: distance to the simplex ETF, within-class spread and NCC accuracy (test set when the
model has one) vs epoch, and the final
sorted class-mean spectrum (log axis), for UCL (and HUCL if swept) trained with positives drawn from
the anchor's class (conditionally independent given the class, blue) or made as x+ = x + sigma_p eps
(orange shades, one per sigma_p); line style distinguishes UCL from HUCL runs; each curve is the mean
over the seeds of one grid point with a min-max band. Bears on claim 2 of docs/theory.md, section 9 (UCL reaches NC only with label-based positives) and
on the conditional-independence hypothesis of Theorem 3 (docs/theory.md, section 4). Reads the claim-2 sweep
under ``<results>/sweeps/``.

Run: ``python -m ncgeom.figures.fig_ucl_positives --results DIR --out DIR``.
"""

from __future__ import annotations

from operator import methodcaller
from pathlib import Path

from ncgeom.figures.panels import legend_entries, plot_bands, plot_spectrum, set_auto_log
from ncgeom.figures.registry import Rendered
from ncgeom.figures.runs import (
    BAND_TEXT,
    MissingResults,
    accuracy_kind,
    accuracy_series,
    describe_runs,
    family_label,
    runs_for,
)
from ncgeom.figures.style import figure_main, new_figure, save_figure

__all__ = ["NAME", "plot"]

NAME = "fig_ucl_positives"
CLAIMS = ("2",)


def plot(results: Path, out: Path) -> Rendered:
    runs = runs_for(results, CLAIMS, setting=("ucl", "hucl"), positives=("label", "noise"))
    if not {r.config.positives for r in runs} >= {"label", "noise"}:
        raise MissingResults(f"need UCL runs with both label and noise positives under {results}/sweeps (claims {', '.join(CLAIMS)})")
    families = sorted({family_label(r) for r in runs})
    styles = dict(zip(families, ("-", "--", ":", "-.") * 4))
    noise_levels = sorted({float(r.config.noise_scale or 0.0) for r in runs if r.config.positives == "noise"})
    noise_colors = dict(zip(noise_levels, ("#D55E00", "#E69F00", "#CC79A7", "#F0E442", "#56B4E9")))

    def color(run):
        return "#0072B2" if run.config.positives == "label" else noise_colors.get(float(run.config.noise_scale or 0.0), "#000000")

    def style(run):
        return styles[family_label(run)]

    def label(run):
        if run.config.positives == "label":
            return f"{family_label(run)}, label positives"
        return f"{family_label(run)}, noise positives σ_p={float(run.config.noise_scale or 0.0):g}"

    fig, axes = new_figure(1, 4, width=13.0, height=3.3)
    for ax, key, ylabel in ((axes[0][0], "etf_distance", "distance to the simplex ETF"), (axes[0][1], "within_class", r"within class: mean $\|z_i-\mu_c\|$")):
        values = plot_bands(ax, runs, methodcaller("series", key), color_of=color, label_of=label, linestyle_of=style)
        set_auto_log(ax, values)
        ax.set_xlabel("epoch")
        ax.set_ylabel(ylabel)
        ax.set_title({"etf_distance": "distance to the simplex ETF", "within_class": "within-class spread"}[key])
    ax = axes[0][2]
    plot_bands(ax, runs, accuracy_series, color_of=color, label_of=label, linestyle_of=style)
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlabel("epoch")
    ax.set_ylabel(f"NCC accuracy ({accuracy_kind(runs)} set)")
    ax.set_title("NCC accuracy")
    plot_spectrum(axes[0][3], runs, color_of=color, label_of=label, linestyle_of=style)
    axes[0][3].set_title("final class-mean spectrum")
    handles, labels = legend_entries(axes[0][:1])
    fig.legend(handles, labels, loc="outside lower center", ncols=min(4, len(labels)))
    fig.suptitle(f"UCL: label-based vs Gaussian-noise positives (C = {runs[0].config.classes}, model = {runs[0].config.model})", fontsize=10)
    return save_figure(fig, out, NAME, details=f"{BAND_TEXT} {describe_runs(runs).text()}")


if __name__ == "__main__":
    raise SystemExit(figure_main(plot, __doc__))
