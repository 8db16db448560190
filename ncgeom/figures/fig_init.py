"""Near-NC vs random initialization.

Top row: distance to the simplex ETF vs epoch; bottom row: smallest normalized class-mean eigenvalue
(a dimensional-collapse indicator: near 1 at NC with d = C-1, orders of magnitude below 1 under DC),
log axis. Left column SCL/HSCL, right column UCL/HUCL; colour = beta, solid = near-NC initialization
(a random-orientation ETF plus noise; claim-7 sweep), dashed = random initialization (the runs of the
same setting and beta in the claim-6, else claim-1 or claim-3, sweeps). The two kinds of curve need not share
hyperparameters: the claim-7 runs use lr 0.05, the claim-6 runs lr 0.01 (and their own budget), so the
legend gives each curve's learning rate and the solid-vs-dashed comparison is not at equal lr (the caption
computes what differs). Each curve is the mean over the seeds of one grid point with a min-max band. Bears on
claim 7 of docs/theory.md,
section 9 (from near-NC, SCL/HSCL stay at NC; HUCL with beta in {10, 30} drifts away with dimensional
collapse), i.e. on NC as a minimizer (Theorem 2) and the HUCL open problem. Reads those sweeps under
``<results>/sweeps/``.

Run: ``python -m ncgeom.figures.fig_init --results DIR --out DIR``.
"""

from __future__ import annotations

from pathlib import Path

from ncgeom.figures.panels import legend_entries, plot_bands, set_auto_log
from ncgeom.figures.registry import Rendered
from ncgeom.figures.runs import (
    BAND_TEXT,
    MissingResults,
    describe_runs,
    family,
    family_label,
    run_beta,
    runs_for,
    spectrum_floor_series,
)
from ncgeom.figures.style import beta_color, figure_main, new_figure, no_data, save_figure

__all__ = ["NAME", "plot"]

NAME = "fig_init"
CLAIMS = ("7",)
RANDOM_INIT_CLAIMS = (("6",), ("1",), ("3",))
_LS = {"near_nc": "-", "random": "--"}


def _label(run) -> str:
    return f"{family_label(run)}, {'near-NC' if run.config.init == 'near_nc' else 'random'} init, lr {run.config.lr:g}"


def _color(run) -> str:
    return beta_color(run_beta(run))


def _linestyle(run) -> str:
    return _LS.get(run.config.init, ":")


def _key(run):
    return (family_label(run), run.config.norm, run.config.model)


def plot(results: Path, out: Path) -> Rendered:
    runs = runs_for(results, CLAIMS, init=("near_nc", "random"))
    if not any(r.config.init == "near_nc" for r in runs):
        raise MissingResults(f"no near-NC-initialized run under {results}/sweeps (claims {', '.join(CLAIMS)})")
    have = {_key(r) for r in runs if r.config.init == "random"}
    wanted = {_key(r) for r in runs if r.config.init == "near_nc"} - have
    for claims in RANDOM_INIT_CLAIMS:  # random-init runs of the same setting and beta from other sweeps
        extra = [r for r in runs_for(results, claims, init="random") if _key(r) in wanted]
        runs += extra
        wanted -= {_key(r) for r in extra}
    fig, axes = new_figure(2, 2, width=12.0, height=6.0)
    for col, title in enumerate(("SCL / HSCL", "UCL / HUCL")):
        group = sorted([r for r in runs if family(r) == title], key=lambda r: (run_beta(r), str(r.config.init)))
        if not group:
            no_data(axes[0][col], f"no {title} run")
            no_data(axes[1][col], f"no {title} run")
            continue
        values = plot_bands(axes[0][col], group, lambda run: run.series("etf_distance"), color_of=_color, label_of=_label,
                            linestyle_of=_linestyle)
        set_auto_log(axes[0][col], values)
        axes[0][col].set_ylabel("distance to the simplex ETF")
        axes[0][col].set_title(f"{title}: distance to ETF")
        plot_bands(axes[1][col], group, spectrum_floor_series, color_of=_color, label_of=_label, linestyle_of=_linestyle)
        axes[1][col].set_yscale("log")
        axes[1][col].set_ylabel("smallest / largest class-mean eigenvalue")
        axes[1][col].set_title(f"{title}: dimensional-collapse indicator")
        for row in (0, 1):
            axes[row][col].set_xlabel("epoch")
    handles, labels = legend_entries(axes[0])
    fig.legend(handles, labels, loc="outside right center", fontsize=7.5)
    lrs = {init: sorted({r.config.lr for r in runs if r.config.init == init}) for init in _LS}
    names = {"near_nc": "near-NC", "random": "random"}
    lr_text = "; ".join(f"{names[init]} lr {', '.join(f'{x:g}' for x in v)}" for init, v in lrs.items() if v)
    fig.suptitle(f"Near-NC (solid) vs random (dashed) initialization, Gaussian data, C = {runs[0].config.classes} "
                 f"({lr_text})", fontsize=10)
    return save_figure(fig, out, NAME, details=f"{BAND_TEXT} {describe_runs(runs).text()}")


if __name__ == "__main__":
    raise SystemExit(figure_main(plot, __doc__))
