"""Claim 5 on a CPU-sized setup: NCC test accuracy vs beta, vs epoch, and the final class-mean spectrum.

The claim-5 CPU sweep (spec ``claim5_cpu_mixture``: a Gaussian mixture with C = 100 classes, an MLP encoder,
ball, tau = 1, d = C - 1, label positives), SCL/HSCL and UCL/HUCL at beta in {0, 5, 10} (beta = 0 is SCL /
UCL). Left: final nearest-class-mean test accuracy vs beta, mean over seeds with individual runs as dots.
Middle: test accuracy vs epoch, one line per grid point (mean over seeds, min-max band). Right: final
sorted class-mean spectrum normalized by its largest value (log axis): a tail orders of magnitude below 1
is dimensional collapse (DC). Bears on claim 5 of docs/theory.md, section 9 (moderate hardness improves
NCC accuracy by over 40 points over SCL/UCL in the DC-prone setup); the digits version is ``fig_digits``.
Reads the sweep of claim ``5cpu`` under ``<results>/sweeps/``.

Run: ``python -m ncgeom.figures.fig_claim5_cpu --results DIR --out DIR``.
"""

from __future__ import annotations

from pathlib import Path

from ncgeom.figures.panels import (
    beta_axis,
    final_value_axis,
    legend_entries,
    plot_bands,
    plot_final_groups,
    plot_spectrum,
)
from ncgeom.figures.registry import Rendered
from ncgeom.figures.runs import (
    BAND_TEXT,
    FINAL_TEXT,
    MissingResults,
    accuracy_kind,
    accuracy_series,
    describe_runs,
    family,
    family_label,
    group_final,
    run_beta,
    runs_for,
)
from ncgeom.figures.style import beta_color, figure_main, new_figure, save_figure, setting_color
from ncgeom.vocabulary import is_supervised

__all__ = ["NAME", "plot"]

NAME = "fig_claim5_cpu"
CLAIMS = ("5cpu",)


def _style(run) -> str:
    return "-" if is_supervised(run.config.setting) else "--"


def _color(run) -> str:
    return beta_color(run_beta(run))


def plot(results: Path, out: Path) -> Rendered:
    runs = runs_for(results, CLAIMS, dataset="gaussian")
    if not runs:
        raise MissingResults(f"no claim-5 CPU-setup run under {results}/sweeps (claims {', '.join(CLAIMS)})")
    fig, axes = new_figure(1, 3, width=13.0, height=3.6)
    ax = axes[0][0]
    colors = {"SCL / HSCL": setting_color("hscl"), "UCL / HUCL": setting_color("hucl")}
    values = plot_final_groups(ax, group_final(runs, run_beta, "test_ncc_accuracy", family), colors)
    beta_axis(ax, [run_beta(r) for r in runs], label=r"hardness $\beta$ (0 = SCL / UCL)")
    final_value_axis(ax, "test_ncc_accuracy", "final NCC test accuracy", values, runs)
    ax.legend(loc="best")
    ax.set_title("final accuracy vs beta")
    ax = axes[0][1]
    plot_bands(ax, sorted(runs, key=run_beta), accuracy_series, color_of=_color, label_of=family_label, linestyle_of=_style)
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlabel("epoch")
    ax.set_ylabel(f"NCC accuracy ({accuracy_kind(runs)} set)")
    ax.set_title("accuracy vs epoch")
    plot_spectrum(axes[0][2], runs, color_of=_color, label_of=family_label, linestyle_of=_style)
    axes[0][2].set_title("final class-mean spectrum")
    handles, labels = legend_entries([axes[0][1]])
    fig.legend(handles, labels, loc="outside right center", title="setting")
    r0 = runs[0].config
    fig.suptitle(f"Claim 5, CPU setup: Gaussian mixture, C = {r0.classes}, D = {r0.input_dim}, norm = {r0.norm}, "
                 f"tau = {r0.tau:g}, d = {r0.dim or 'C-1'}, model = {r0.model}", fontsize=10)
    return save_figure(fig, out, NAME, details=f"{FINAL_TEXT} {BAND_TEXT} {describe_runs(runs).text()}")


if __name__ == "__main__":
    raise SystemExit(figure_main(plot, __doc__))
