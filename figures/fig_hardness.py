"""Hardness beta vs distance to neural collapse at a fixed training budget (supervised vs unsupervised).

From the claim-6 sweep (unconstrained features on the sphere, a fixed short budget so that the rate of
approach to NC is visible): final distance to the simplex ETF (left) and smallest normalized
class-mean eigenvalue, the dimensional-collapse indicator (right, log axis), vs beta, for HSCL
(beta = 0 is SCL) and HUCL (beta = 0 is UCL); mean over seeds, runs as dots. Bears on claim 6 of
theory.md section 9 (supervised: more hardness, closer to NC; unsupervised: an optimal beta near 5,
above it worse NC metrics and more DC), i.e. on Theorems 2 and 3 and the HUCL open problem in
training. Reads the claim-6 sweep under ``<results>/sweeps/``.

Run: ``python figures/fig_hardness.py --results DIR --out DIR``.
"""

from __future__ import annotations

import math
from pathlib import Path

from ncgeom.reproduce.panels import beta_axis, dominant_group, group_final, run_beta, runs_for, set_auto_log, spectrum_floor_series
from ncgeom.reproduce.plotting import figure_main, new_figure, save_figure, setting_color
from ncgeom.reproduce.results import MissingResults

NAME = "fig_hardness"
CLAIMS = ("6",)
_KEYS = ("dataset", "norm", "model", "classes", "dim", "batch_size", "tau", "epochs", "lr")


def _family(run) -> str:
    return "supervised: SCL / HSCL" if run.get("setting") in ("scl", "hscl") else "unsupervised: UCL / HUCL"


def _spec_floor(run) -> float:
    _, values = spectrum_floor_series(run)
    return values[-1] if values else math.nan


def plot(results: Path, out: Path) -> list[Path]:
    runs = runs_for(results, CLAIMS, init="random")
    if not runs:
        raise MissingResults(f"no claim-6 run under {results}/sweeps")
    runs = dominant_group(runs, _KEYS)
    colors = {"supervised: SCL / HSCL": setting_color("hscl"), "unsupervised: UCL / HUCL": setting_color("hucl")}
    fig, axes = new_figure(1, 2, width=9.5, height=3.5)
    panels = ((axes[0][0], "etf_distance", "final distance to the simplex ETF"), (axes[0][1], None, "final smallest / largest eigenvalue"))
    for ax, key, ylabel in panels:
        if key is None:
            groups: dict = {}
            for run in runs:
                value = _spec_floor(run)
                if math.isfinite(value):
                    groups.setdefault(_family(run), {}).setdefault(run_beta(run), []).append(value)
            series = {g: (sorted(v), [sum(v[b]) / len(v[b]) for b in sorted(v)], [(b, y) for b in sorted(v) for y in v[b]]) for g, v in groups.items()}
        else:
            series = group_final(runs, run_beta, key, _family)
        values = []
        for label in sorted(series):
            xs, ys, points = series[label]
            ax.plot(xs, ys, marker="o", ms=4, color=colors[label], label=label)
            ax.scatter([p[0] for p in points], [p[1] for p in points], s=8, color=colors[label], alpha=0.5)
            values += ys
        beta_axis(ax, [run_beta(r) for r in runs])
        ax.set_ylabel(ylabel)
        if key is None:
            ax.set_yscale("log")
        else:
            set_auto_log(ax, values)
        ax.legend(loc="best")
    r0 = runs[0]
    fig.suptitle(f"Hardness at a fixed budget ({r0.get('epochs')} epochs, lr {r0.get('lr')}, C = {r0.get('classes')}, "
                 f"norm = {r0.get('norm')}, model = {r0.get('model')})", fontsize=10)
    return save_figure(fig, out, NAME)


if __name__ == "__main__":
    raise SystemExit(figure_main(plot, __doc__))
