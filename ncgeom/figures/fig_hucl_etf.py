"""HUCL: distance to the simplex ETF vs beta, in training and in the proofs_check exploration.

Left: final distance to the simplex ETF (docs/theory.md, section 8, etf_distance) of the trained UCL/HUCL runs
vs beta (beta = 0 is UCL; claim-3 sweep), with the SCL/HSCL runs of the claim-1 sweep (same encoder and
normalization) for reference; mean per beta, runs as dots. Middle: the
proofs_check exploration of the HUCL population minimum over collapsed configurations (multi-start
L-BFGS): the minimum found, the loss at NC (closed form, section 5) and the Harris bound L_UCL(NC)
(Theorem 1) vs beta. Right: the Frobenius distance ||M* - G_ETF|| of the minimizer's class Gram to the
ETF Gram; the dotted line is the critical beta above which NC is no longer a local minimizer of the
HUCL loss (proofs_check.hucl.critical_beta). Bears on claim 3 of docs/theory.md, section 9 (HUCL does not reach NC; the deviation grows with
beta) and the HUCL open problem of section 4. Reads the claim-3 and claim-1 sweeps under
``<results>/sweeps/`` and
``<results>/theory/hucl_exploration.json``.

Run: ``python -m ncgeom.figures.fig_hucl_etf --results DIR --out DIR``.
"""

from __future__ import annotations

from pathlib import Path

from ncgeom.figures.panels import beta_axis, plot_final_groups, set_auto_log
from ncgeom.figures.runs import MissingResults, group_final, load_theory, run_beta, runs_for
from ncgeom.figures.style import figure_main, new_figure, no_data, save_figure, setting_color
from ncgeom.vocabulary import is_supervised

__all__ = ["NAME", "plot"]

NAME = "fig_hucl_etf"
CLAIMS = ("3",)
REFERENCE_CLAIMS = ("1",)


def _family(run) -> str:
    return "SCL / HSCL (reference)" if is_supervised(run.config.setting) else "UCL / HUCL"


def plot(results: Path, out: Path) -> list[Path]:
    runs = runs_for(results, CLAIMS, setting=("ucl", "hucl"), init="random", positives="label")
    if runs:  # supervised reference: same encoder and normalization, from the claim-1 sweep
        norm, model = runs[0].config.norm, runs[0].config.model
        runs += runs_for(results, REFERENCE_CLAIMS, setting=("scl", "hscl"), init="random", norm=norm, model=model)
    try:
        exploration = load_theory(results, "hucl_exploration")["explorations"]
    except MissingResults:
        exploration = []
    if not runs and not exploration:
        raise MissingResults(f"neither HUCL runs under {results}/sweeps nor theory/hucl_exploration.json")
    fig, axes = new_figure(1, 3, width=12.5, height=3.6)
    ax = axes[0][0]
    if runs:
        groups = group_final(runs, run_beta, "etf_distance", _family)
        colors = {"UCL / HUCL": setting_color("hucl"), "SCL / HSCL (reference)": setting_color("hscl")}
        values = plot_final_groups(ax, groups, colors, linestyle=lambda label: "-" if label.startswith("UCL") else "--")
        beta_axis(ax, [run_beta(r) for r in runs], label=r"hardness $\beta$ (0 = UCL / SCL)")
        set_auto_log(ax, values)
        ax.set_ylabel("final distance to the simplex ETF")
        ax.set_title("training (Gaussian data)")
        ax.legend(loc="best")
    else:
        no_data(ax, "no UCL/HUCL training runs")
    ax_v, ax_d = axes[0][1], axes[0][2]
    if exploration:
        styles = ("-", "--", ":", "-.")
        for i, exp in enumerate(exploration):
            rows = exp["rows"]
            betas = [r["beta"] for r in rows]
            tag = f"C={exp['num_classes']}, k={exp['num_negatives']}"
            ls = styles[i % len(styles)]
            ax_v.plot(betas, [r["nc_value"] for r in rows], color=setting_color("hucl"), ls=ls, marker="^", ms=3, label=f"L_HUCL at NC ({tag})")
            ax_v.plot(betas, [r["min_found"] for r in rows], color="#0072B2", ls=ls, marker="o", ms=3, label=f"min found ({tag})")
            ax_v.plot(betas, [r["harris_bound"] for r in rows], color="#000000", ls=ls, lw=1, label=f"Harris bound L_UCL(NC) ({tag})")
            ax_d.plot(betas, [r["etf_distance"] for r in rows], color=setting_color("hucl"), ls=ls, marker="o", ms=3, label=tag)
            beta_c = exp.get("critical_beta")
            if beta_c is not None:  # above it NC is no longer a local minimizer of L_HUCL (proofs_check.hucl)
                for ax in (ax_v, ax_d):
                    ax.axvline(beta_c, color="#555555", ls=":", lw=1.2, label=rf"critical $\beta_c$ = {beta_c:.3g} ({tag})")
        all_betas = [r["beta"] for exp in exploration for r in exp["rows"]]
        beta_axis(ax_v, all_betas)
        ax_v.set_ylabel("population loss (collapsed configurations)")
        ax_v.set_title("exploration: HUCL minimum vs NC")
        ax_v.legend(loc="lower right", fontsize=6.5, frameon=True, framealpha=0.95, edgecolor="#cccccc")
        beta_axis(ax_d, all_betas)
        ax_d.set_ylabel(r"$\|M^* - G_{\mathrm{ETF}}\|_F$ of the minimizer")
        ax_d.set_title("exploration: minimizer's distance to ETF")
        ax_d.legend(loc="best", fontsize=7)
    else:
        no_data(ax_v, "no HUCL exploration (theory stage)")
        no_data(ax_d, "no HUCL exploration (theory stage)")
    fig.suptitle("HUCL: deviation from the simplex ETF as beta grows (claim 3; open problem of docs/theory.md, section 4)", fontsize=10)
    return save_figure(fig, out, NAME)


if __name__ == "__main__":
    raise SystemExit(figure_main(plot, __doc__))
