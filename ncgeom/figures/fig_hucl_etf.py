"""HUCL: distance to the simplex ETF vs beta, in training and in the proofs_check exploration, at the runs' (C, d).

Left: final distance to the simplex ETF (docs/theory.md, section 8, etf_distance) of the trained UCL/HUCL runs
vs beta (beta = 0 is UCL; claim-3 sweep: C = 10 classes in d = C - 1 = 9 dimensions at the shipped spec), with
the SCL/HSCL runs of the claim-1 sweep (same encoder and normalization) for reference; mean per beta, runs as
dots. Middle: the proofs_check exploration of the HUCL population minimum over collapsed configurations in
R^d for the same C and d as the runs (multi-start L-BFGS): the minimum found, the loss at NC (closed form,
section 5) and the Harris bound L_UCL(NC) (Theorem 1) vs beta. Right: the Frobenius distance ||M* - G_ETF|| of
the minimizer's class Gram to the ETF Gram. On every panel the dotted line is the local threshold
beta_loc(C, d) (NC stops being a local minimizer over collapsed configurations) and the dash-dotted line the
global switch beta_sw(C, d) (a configuration below NC was found), both for k = 1, tau = 1 and the runs' C and d
(docs/results.md, "HUCL thresholds by dimension"; the 4-class or d >= C numbers do not apply to these runs).
An exploration or threshold at another (C, d) is not drawn. Bears on claim 3 of docs/theory.md, section 9
(HUCL does not reach NC; the deviation grows with beta) and the HUCL open problem of section 4. Reads the
claim-3 and claim-1 sweeps under ``<results>/sweeps/``, ``<results>/theory/hucl_exploration.json`` and
``<results>/theory/hucl_thresholds.json``.

Run: ``python -m ncgeom.figures.fig_hucl_etf --results DIR --out DIR``.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from ncgeom.figures.panels import beta_axis, plot_final_groups, set_auto_log
from ncgeom.figures.registry import Rendered
from ncgeom.figures.runs import (
    FINAL_TEXT,
    MissingResults,
    describe_runs,
    group_final,
    load_theory,
    run_beta,
    runs_for,
    theory_description,
)
from ncgeom.figures.style import figure_main, new_figure, no_data, save_figure, setting_color
from ncgeom.vocabulary import is_supervised

__all__ = ["NAME", "plot"]

NAME = "fig_hucl_etf"
CLAIMS = ("3",)
REFERENCE_CLAIMS = ("1",)


def _family(run) -> str:
    return "SCL / HSCL (reference)" if is_supervised(run.config.setting) else "UCL / HUCL"


def _optional_theory(results: Path, name: str, key: str) -> list:
    try:
        return load_theory(results, name)[key]
    except MissingResults:
        return []


def _thresholds(rows: list, c: int, d: int) -> tuple[float | None, float | None]:
    """(beta_loc, beta_sw) of the thresholds table for (C, d), None where absent."""
    for row in rows:
        if (row["num_classes"], row["dim"]) == (c, d):
            return row.get("local_threshold"), row.get("global_switch")
    return None, None


def plot(results: Path, out: Path) -> Rendered:
    runs = runs_for(results, CLAIMS, setting=("ucl", "hucl"), init="random", positives="label")
    geometry: tuple[int, int] | None = None
    if runs:  # the (C, d) of the runs: most runs share it; the exploration and thresholds drawn are for it
        geometry = Counter((r.config.classes, r.config.embedding_dim) for r in runs).most_common(1)[0][0]
        runs = [r for r in runs if (r.config.classes, r.config.embedding_dim) == geometry]
        norm, model = runs[0].config.norm, runs[0].config.model
        runs += runs_for(results, REFERENCE_CLAIMS, setting=("scl", "hscl"), init="random", norm=norm, model=model)
    exploration = _optional_theory(results, "hucl_exploration", "explorations")
    if geometry is not None:
        exploration = [e for e in exploration if (e.get("num_classes"), e.get("dim")) == geometry]
    threshold_rows = _optional_theory(results, "hucl_thresholds", "rows")
    if not runs and not exploration:
        raise MissingResults(f"neither HUCL runs under {results}/sweeps nor theory/hucl_exploration.json")
    fig, axes = new_figure(1, 3, width=12.5, height=3.6)
    ax = axes[0][0]
    lines: list[tuple[float, str, str]] = []  # (beta, linestyle, label) of the thresholds drawn on every panel
    geometries = [geometry] if geometry else sorted({(e["num_classes"], e["dim"]) for e in exploration})
    for c, d in geometries:
        local, switch = _thresholds(threshold_rows, c, d)
        if local is not None:
            lines.append((local, ":", rf"local threshold $\beta_{{loc}}$ = {local:.3g} (C={c}, d={d})"))
        if switch is not None and (local is None or abs(switch - local) > 1e-6):
            lines.append((switch, "-.", rf"global switch $\beta_{{sw}}$ = {switch:.3g} (C={c}, d={d})"))
    if runs and geometry is not None:
        c, d = geometry
        groups = group_final(runs, run_beta, "etf_distance", _family)
        colors = {"UCL / HUCL": setting_color("hucl"), "SCL / HSCL (reference)": setting_color("hscl")}
        values = plot_final_groups(ax, groups, colors, linestyle=lambda label: "-" if label.startswith("UCL") else "--")
        beta_axis(ax, [run_beta(r) for r in runs], label=r"hardness $\beta$ (0 = UCL / SCL)")
        set_auto_log(ax, values)
        ax.set_ylabel("final distance to the simplex ETF")
        ax.set_title(f"training: C = {c}, d = {d} (claim-3 runs)")
        for beta, ls, label in lines:
            ax.axvline(beta, color="#555555", ls=ls, lw=1.2, label=label)
        ax.legend(loc="best", fontsize=6.5)
    else:
        no_data(ax, "no UCL/HUCL training runs")
    ax_v, ax_d = axes[0][1], axes[0][2]
    if exploration:
        styles = ("-", "--", ":", "-.")
        for i, exp in enumerate(exploration):
            rows = exp["rows"]
            betas = [r["beta"] for r in rows]
            tag = f"C={exp['num_classes']}, d={exp['dim']}, k={exp['num_negatives']}"
            ls = styles[i % len(styles)]
            ax_v.plot(betas, [r["nc_value"] for r in rows], color=setting_color("hucl"), ls=ls, marker="^", ms=3, label=f"L_HUCL at NC ({tag})")
            ax_v.plot(betas, [r["min_found"] for r in rows], color="#0072B2", ls=ls, marker="o", ms=3, label=f"min found ({tag})")
            ax_v.plot(betas, [r["harris_bound"] for r in rows], color="#000000", ls=ls, lw=1, label=f"Harris bound L_UCL(NC) ({tag})")
            ax_d.plot(betas, [r["etf_distance"] for r in rows], color=setting_color("hucl"), ls=ls, marker="o", ms=3, label=tag)
        for ax in (ax_v, ax_d):
            for beta, ls, label in lines:
                ax.axvline(beta, color="#555555", ls=ls, lw=1.2, label=label)
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
        message = "no HUCL exploration" + ("" if geometry is None else f" at C = {geometry[0]}, d = {geometry[1]}")
        no_data(ax_v, message + " (theory stage)")
        no_data(ax_d, message + " (theory stage)")
    where = "" if geometry is None else f" at the runs' C = {geometry[0]}, d = {geometry[1]}"
    fig.suptitle(f"HUCL: deviation from the simplex ETF as beta grows{where} (claim 3; open problem of docs/theory.md, "
                 "section 4)", fontsize=10)
    details = f"{FINAL_TEXT} {describe_runs(runs).text(cadence=False)}" if runs else theory_description(results)
    return save_figure(fig, out, NAME, details=details)


if __name__ == "__main__":
    raise SystemExit(figure_main(plot, __doc__))
