"""HUCL thresholds by dimension: where NC stops being the minimizer, for C in {3, 4, 10} and d in {C - 1, C}.

Left: the smallest eigenvalue of the Hessian of the HUCL population loss at NC (simplex ETF) over collapsed
configurations in R^d, modulo rotations, vs beta (k = 1, infonce, tau = 1; proofs_check.hucl.jets), one
curve per (C, d): solid d = C - 1, dashed d = C. It crosses 0 at the local threshold beta_loc(C, d) (x);
the circle marks the global switch beta_sw(C, d), the smallest beta at which a multi-start search found a
collapsed configuration below NC. In d = C the crossing is the equiangular (lift) direction that only
exists when d >= C; in d = C - 1 it comes later, and a configuration with a near-antipodal pair beats NC
first (a first-order switch). Right: the thresholds per (C, d), with those of the claim-3 batch objective
(weighted estimator, detached weights, the runs' batch size) when computed. Bears on the HUCL open problem
of docs/theory.md, section 4, and claim 3 of section 9; the numbers are the table of docs/results.md,
"HUCL thresholds by dimension". Reads ``<results>/theory/hucl_thresholds.json``.

Run: ``python -m ncgeom.figures.fig_hucl_thresholds --results DIR --out DIR``.
"""

from __future__ import annotations

from pathlib import Path

from ncgeom.figures.registry import Rendered
from ncgeom.figures.runs import load_theory, theory_description
from ncgeom.figures.style import color_cycle, figure_main, new_figure, save_figure

__all__ = ["NAME", "plot"]

NAME = "fig_hucl_thresholds"


def plot(results: Path, out: Path) -> Rendered:
    data = load_theory(results, "hucl_thresholds")
    rows = data["rows"]
    classes = sorted({row["num_classes"] for row in rows})
    colors = dict(zip(classes, color_cycle(len(classes))))
    fig, axes = new_figure(1, 2, width=12.0, height=3.8)
    ax = axes[0][0]
    for row in rows:
        c, d = row["num_classes"], row["dim"]
        curve = data["curves"].get(f"C{c}_d{d}")
        ls = "-" if d == c - 1 else "--"
        if curve:
            ax.plot(curve["betas"], curve["min_eigenvalue"], color=colors[c], ls=ls, lw=1.3, label=f"C = {c}, d = {d}")
        if row.get("local_threshold") is not None:
            ax.plot([row["local_threshold"]], [0.0], marker="x", color=colors[c], ms=7, ls="none")
        if row.get("global_switch") is not None:
            ax.plot([row["global_switch"]], [0.0], marker="o", mfc="none", color=colors[c], ms=7, ls="none")
    ax.axhline(0.0, color="#555555", lw=0.8)
    ax.plot([], [], marker="x", color="#333333", ls="none", label=r"local threshold $\beta_{loc}$")
    ax.plot([], [], marker="o", mfc="none", color="#333333", ls="none", label=r"global switch $\beta_{sw}$ (searched)")
    ax.set_xlabel(r"hardness $\beta$ (k = 1, infonce, $\tau$ = 1)")
    ax.set_ylabel("smallest Hessian eigenvalue at NC (mod rotations)")
    ax.set_title("NC over collapsed configurations in R^d")
    ax.legend(loc="upper right", fontsize=7)
    ax = axes[0][1]
    labels, y = [], 0
    for row in rows:
        c, d = row["num_classes"], row["dim"]
        if row.get("local_threshold") is not None:
            ax.plot([row["local_threshold"]], [y], marker="x", color=colors[c], ms=7, ls="none")
        if row.get("switch_bracket") and row.get("global_switch") is not None:
            ax.plot([row["global_switch"]], [y], marker="o", mfc="none", color=colors[c], ms=7, ls="none")
        labels.append(f"population, C = {c}, d = {d}" + ("" if row.get("global_switch") is not None else " (no search)"))
        y += 1
    for entry in data.get("batch") or []:
        c, d, b = entry["num_classes"], entry["dim"], entry["batch_size"]
        local = entry["batch_local"]["beta"]
        if local is not None:
            ax.plot([local], [y], marker="x", color=colors.get(c, "#000000"), ms=7, ls="none")
        switch = (entry.get("switch") or {}).get("bracket")
        if switch:
            ax.plot([switch[1]], [y], marker="o", mfc="none", color=colors.get(c, "#000000"), ms=7, ls="none")
        detached = entry["detached_flow"]["beta"]
        if detached is None:
            reach = entry["detached_flow"].get("beta_max")
            text = "detached-weight flow: NC stable" + ("" if reach is None else rf" for every $\beta \leq$ {reach:g}")
        else:
            text = f"detached-weight flow: NC unstable above {detached:.3g}"
        ax.annotate(text, (0.02, y), xycoords=("axes fraction", "data"), fontsize=6.5, va="center", color="#555555")
        labels.append(f"batch loss, C = {c}, d = {d}, B = {b}")
        y += 1
    ax.set_yticks(range(len(labels)))
    ax.set_yticklabels(labels, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel(r"hardness $\beta$")
    ax.set_title("thresholds (x local, o global switch)")
    ax.grid(axis="x", alpha=0.3)
    fig.suptitle("HUCL: where NC stops being the minimizer, by dimension (open problem of docs/theory.md, section 4)",
                 fontsize=10)
    return save_figure(fig, out, NAME, details=theory_description(results))


if __name__ == "__main__":
    raise SystemExit(figure_main(plot, __doc__))
