"""Batch size 32..512: final NC metrics and NCC accuracy vs batch size.

Final distance to the simplex ETF, final within-class spread (log axes) and final NCC test accuracy
vs batch size (log2 axis) for each trained setting (colour; beta in the legend), mean over seeds with
the individual runs as dots. Bears on claim 8 of docs/theory.md, section 9 (NC is reached for batch sizes
64..512; batch 32 hinders it when C is large) and on the batch estimators of section 7. Reads the
claim-8 sweep under ``<results>/sweeps/``.

Run: ``python -m ncgeom.figures.fig_batch_size --results DIR --out DIR``.
"""

from __future__ import annotations

from pathlib import Path

from matplotlib.ticker import ScalarFormatter

from ncgeom.figures.panels import final_value_axis, plot_final_groups
from ncgeom.figures.registry import Rendered
from ncgeom.figures.runs import FINAL_TEXT, MissingResults, describe_runs, family_label, group_final, runs_for
from ncgeom.figures.style import color_cycle, figure_main, new_figure, save_figure

__all__ = ["NAME", "plot"]

NAME = "fig_batch_size"
CLAIMS = ("8",)
_PANELS = (("etf_distance", "final distance to the simplex ETF"), ("within_class", r"final within-class spread"), ("test_ncc_accuracy", "final NCC test accuracy"))


def plot(results: Path, out: Path) -> Rendered:
    runs = runs_for(results, CLAIMS, init="random")
    if len({r.config.batch_size for r in runs}) < 2:
        raise MissingResults(f"need runs with at least two batch sizes under {results}/sweeps (claims {', '.join(CLAIMS)})")
    fig, axes = new_figure(1, 3, width=11.5, height=3.4)
    for ax, (key, ylabel) in zip(axes[0], _PANELS):
        groups = group_final(runs, lambda r: r.config.batch_size, key, family_label)
        values = plot_final_groups(ax, groups, dict(zip(sorted(groups), color_cycle(len(groups)))))
        ax.set_xscale("log", base=2)
        ax.set_xticks(sorted({float(r.config.batch_size) for r in runs}))
        ax.get_xaxis().set_major_formatter(ScalarFormatter())
        ax.set_xlabel("batch size B")
        final_value_axis(ax, key, ylabel, values, runs)
    axes[0][0].legend(loc="best")
    fig.suptitle(f"Batch size (Gaussian data, C = {runs[0].config.classes}, {runs[0].config.epochs} epochs)", fontsize=10)
    return save_figure(fig, out, NAME, details=f"{FINAL_TEXT} {describe_runs(runs).text(cadence=False)}")


if __name__ == "__main__":
    raise SystemExit(figure_main(plot, __doc__))
