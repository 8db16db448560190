"""Below C - 1 dimensions: the gap of the best collapsed configuration to the ETF bound, vs d, one line per C.

For C unit class means in R^d with d < C - 1 no simplex ETF fits (docs/theory.md, section 4, hypothesis 3 of
Theorems 2 and 3), so the bound of Theorem 2 (SCL, HSCL) and Theorem 3 (UCL), the NC value of docs/theory.md,
section 5, is no longer attained. Each panel (one setting: SCL, HSCL with beta = 5, UCL; infonce, k = 1,
tau = 1) shows best - bound over collapsed configurations found by a multi-start L-BFGS search
(proofs_check.ablations.dimension), vs d, one line per C; the last point of each line, d = C - 1, is the control
where the search finds the ETF (gap 0). Markers name the spherical code the winner matched (o: regular C-gon,
s: cross-polytope, ^: triangular bipyramid, P: orthogonal sum of
lower simplices, D: simplex ETF, x: none). The numbers are the table of docs/results.md, "Below C - 1
dimensions and dependent positives". Reads ``<results>/theory/ablation_dimension.json``.

Run: ``python -m ncgeom.figures.fig_ablation_dimension --results DIR --out DIR``.
"""

from __future__ import annotations

from pathlib import Path

from ncgeom.figures.registry import Rendered
from ncgeom.figures.runs import load_theory, theory_description
from ncgeom.figures.style import color_cycle, figure_main, new_figure, save_figure

__all__ = ["NAME", "plot"]

NAME = "fig_ablation_dimension"
_MARKERS = {"simplex ETF": "D", "regular C-gon": "o", "cross-polytope": "s", "triangular bipyramid": "^",
            "orthogonal sum of simplices": "P"}


def _marker(match: str | None) -> str:
    for name, marker in _MARKERS.items():
        if match and any(part.startswith(name) for part in match.split(" = ")):
            return marker
    return "x"


def plot(results: Path, out: Path) -> Rendered:
    data = load_theory(results, "ablation_dimension")
    rows = data["rows"]
    settings = list(dict.fromkeys(row["setting"] for row in rows))
    classes = sorted({row["num_classes"] for row in rows})
    colors = dict(zip(classes, color_cycle(len(classes))))
    fig, axes = new_figure(1, len(settings), width=4.0 * len(settings), height=3.6)
    for ax, setting in zip(axes[0], settings):
        for c in classes:
            line = sorted((r for r in rows if r["setting"] == setting and r["num_classes"] == c), key=lambda r: r["dim"])
            if not line:
                continue
            ax.plot([r["dim"] for r in line], [r["gap"] for r in line], color=colors[c], lw=1.3, label=f"C = {c}")
            for r in line:
                ax.plot([r["dim"]], [r["gap"]], marker=_marker(r["match"]), color=colors[c], ms=6, ls="none")
        ax.axhline(0.0, color="#555555", lw=0.8)
        beta = f", beta = {data['beta']:g}" if setting == "hscl" else ""
        ax.set_title(f"{setting.upper()}{beta}")
        ax.set_xlabel("dimension d (d = C - 1: the ETF exists)")
        ax.set_ylabel("best loss - ETF bound")
        ax.set_xticks(sorted({r["dim"] for r in rows}))
        ax.legend(loc="upper right", fontsize=7)
    fig.suptitle("d < C - 1: the Theorem 2-3 bound is not attained (infonce, k = 1, tau = 1; markers: matched code)",
                 fontsize=10)
    return save_figure(fig, out, NAME, details=theory_description(results))


if __name__ == "__main__":
    raise SystemExit(figure_main(plot, __doc__))
