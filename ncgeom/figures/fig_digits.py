"""Real data (scikit-learn digits): NCC test accuracy and distance to the ETF vs beta.

The digits data (8x8 images, 10 classes; the only real data set shipped offline) trained with SCL/HSCL
and UCL/HUCL (label positives) for beta in {0, 2, 5, 10, 30}: final nearest-class-mean test accuracy
(left) and final distance to the simplex ETF (right) vs beta, mean over seeds with individual runs as
dots (beta = 0 is SCL / UCL). Bears on claim 5 of docs/theory.md, section 9 (moderate hardness, beta = 5 or
10, improves NCC accuracy by over 40 points in the DC-prone setup: ball, tau = 1, d = C-1). Reads
the claim-5 sweep under ``<results>/sweeps/``.

Run: ``python -m ncgeom.figures.fig_digits --results DIR --out DIR``.
"""

from __future__ import annotations

from pathlib import Path

from ncgeom.figures.panels import beta_axis, final_value_axis, plot_final_groups
from ncgeom.figures.registry import Rendered
from ncgeom.figures.runs import FINAL_TEXT, MissingResults, describe_runs, family, group_final, run_beta, runs_for
from ncgeom.figures.style import figure_main, new_figure, save_figure, setting_color

__all__ = ["NAME", "plot"]

NAME = "fig_digits"
CLAIMS = ("5",)


def plot(results: Path, out: Path) -> Rendered:
    runs = runs_for(results, CLAIMS, dataset="digits")
    if not runs:
        raise MissingResults(f"no digits run under {results}/sweeps (claims {', '.join(CLAIMS)})")
    fig, axes = new_figure(1, 2, width=9.0, height=3.4)
    colors = {"SCL / HSCL": setting_color("hscl"), "UCL / HUCL": setting_color("hucl")}
    for ax, key, ylabel in ((axes[0][0], "test_ncc_accuracy", "final NCC test accuracy"), (axes[0][1], "etf_distance", "final distance to the simplex ETF")):
        values = plot_final_groups(ax, group_final(runs, run_beta, key, family), colors)
        beta_axis(ax, [run_beta(r) for r in runs], label=r"hardness $\beta$ (0 = SCL / UCL)")
        final_value_axis(ax, key, ylabel, values, runs)
        ax.legend(loc="best")
    r0 = runs[0]
    fig.suptitle(f"Digits (real data): norm = {r0.config.norm}, tau = {r0.config.tau}, d = {r0.config.dim or 'C-1'}, model = {r0.config.model}", fontsize=10)
    return save_figure(fig, out, NAME, details=f"{FINAL_TEXT} {describe_runs(runs).text(cadence=False)}")


if __name__ == "__main__":
    raise SystemExit(figure_main(plot, __doc__))
