"""Hardness beta vs distance to neural collapse at a fixed training budget (supervised vs unsupervised).

From the claim-6 sweep (unconstrained features on the sphere, a fixed short budget so that the rate of
approach to NC is visible): final distance to the simplex ETF (left) and smallest normalized
class-mean eigenvalue, the dimensional-collapse indicator (right, log axis), vs beta, for HSCL
(beta = 0 is SCL) and HUCL (beta = 0 is UCL); mean over seeds, runs as dots. Bears on claim 6 of
docs/theory.md, section 9 (supervised: more hardness, closer to NC; unsupervised: an optimal beta near 5,
above it worse NC metrics and more DC), i.e. on Theorems 2 and 3 and the HUCL open problem in
training. Reads the claim-6 sweep under ``<results>/sweeps/``.

Run: ``python -m ncgeom.figures.fig_hardness --results DIR --out DIR``.
"""

from __future__ import annotations

import math
from pathlib import Path

from ncgeom.figures.panels import beta_axis, plot_final_groups, set_auto_log
from ncgeom.figures.registry import Rendered
from ncgeom.figures.runs import (
    FINAL_TEXT,
    MissingResults,
    describe_runs,
    dominant_group,
    family,
    group_final,
    run_beta,
    runs_for,
    spectrum_floor_series,
)
from ncgeom.figures.style import figure_main, new_figure, save_figure, setting_color
from ncgeom.vocabulary import is_supervised

__all__ = ["NAME", "plot"]

NAME = "fig_hardness"
CLAIMS = ("6",)
_KEYS = ("dataset", "norm", "model", "classes", "dim", "batch_size", "tau", "epochs", "lr")


def _family(run) -> str:
    return ("supervised: " if is_supervised(run.config.setting) else "unsupervised: ") + family(run)


def _spec_floor(run) -> float:
    _, values = spectrum_floor_series(run)
    return values[-1] if values else math.nan


def plot(results: Path, out: Path) -> Rendered:
    runs = runs_for(results, CLAIMS, init="random")
    if not runs:
        raise MissingResults(f"no claim-6 run under {results}/sweeps")
    runs = dominant_group(runs, _KEYS)
    colors = {"supervised: SCL / HSCL": setting_color("hscl"), "unsupervised: UCL / HUCL": setting_color("hucl")}
    fig, axes = new_figure(1, 2, width=9.5, height=3.5)
    panels = ((axes[0][0], "etf_distance", "final distance to the simplex ETF"), (axes[0][1], None, "final smallest / largest eigenvalue"))
    for ax, key, ylabel in panels:
        values = plot_final_groups(ax, group_final(runs, run_beta, key or _spec_floor, _family), colors)
        beta_axis(ax, [run_beta(r) for r in runs])
        ax.set_ylabel(ylabel)
        if key is None:
            ax.set_yscale("log")
        else:
            set_auto_log(ax, values)
        ax.legend(loc="best")
    r0 = runs[0]
    fig.suptitle(f"Hardness at a fixed budget ({r0.config.epochs} epochs, lr {r0.config.lr}, C = {r0.config.classes}, "
                 f"norm = {r0.config.norm}, model = {r0.config.model})", fontsize=10)
    return save_figure(fig, out, NAME, details=f"{FINAL_TEXT} {describe_runs(runs).text(cadence=False)}")


if __name__ == "__main__":
    raise SystemExit(figure_main(plot, __doc__))
