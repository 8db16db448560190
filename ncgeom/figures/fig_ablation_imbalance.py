"""Imbalanced classes: the gap of the best collapsed configuration to the ETF, and minority collapse, vs the ratio r.

Balanced classes are hypothesis 1 of Theorems 2 and 3 (docs/theory.md, section 4). With the prior
lambda(r) = (r, 1, ..., 1)/(r + C - 1) (one majority class), infonce, k = 1, tau = 1 and collapsed configurations
(proofs_check.ablations.imbalance), the left panel shows best - L(ETF) vs r, one line per hardness (SCL = beta 0,
HSCL beta 1 and 5) and UCL (dashed colour), one line style per C: the gap is < 0 for every r > 1 (the ETF is not
even a critical point there, exactly). The right panel shows the smallest minority-minority inner product of the
winner (ETF: -1/(C-1); 1: the minority classes merged into one point), with the bisected merge ratio r_mc (o) and,
for beta = 0, the closed-form ratio above which the merged configuration is a local minimizer (x). The numbers
are the table of docs/results.md, "Imbalanced classes". Reads ``<results>/theory/ablation_imbalance.json``.

Run: ``python -m ncgeom.figures.fig_ablation_imbalance --results DIR --out DIR``.
"""

from __future__ import annotations

from pathlib import Path

from ncgeom.figures.registry import Rendered
from ncgeom.figures.runs import load_theory, theory_description
from ncgeom.figures.style import color_cycle, figure_main, new_figure, save_figure

__all__ = ["NAME", "plot"]

NAME = "fig_ablation_imbalance"
_STYLES = ("-", "--", ":", "-.")


def _label(curve: dict) -> str:
    return "UCL" if curve["setting"] == "ucl" else f"beta = {curve['beta']:g}" + (" (SCL)" if curve["beta"] == 0 else "")


def plot(results: Path, out: Path) -> Rendered:
    data = load_theory(results, "ablation_imbalance")
    curves = data["curves"]
    keys = list(dict.fromkeys((cv["setting"], cv["beta"]) for cv in curves))
    colors = dict(zip(keys, color_cycle(len(keys))))
    shapes = list(dict.fromkeys((cv["num_classes"], cv["dim"]) for cv in curves))
    styles = {shape: _STYLES[i % len(_STYLES)] for i, shape in enumerate(shapes)}
    fig, axes = new_figure(1, 2, width=11.0, height=3.8)
    left, right = axes[0]
    for cv in curves:
        color, ls = colors[(cv["setting"], cv["beta"])], styles[(cv["num_classes"], cv["dim"])]
        label = f"{_label(cv)}, C = {cv['num_classes']}, d = {cv['dim']}"
        left.plot(cv["ratios"], cv["gap"], color=color, ls=ls, marker=".", lw=1.3, label=label)
        right.plot(cv["ratios"], [m[0] for m in cv["minority_inner"]], color=color, ls=ls, marker=".", lw=1.3)
        if cv["merge_bracket"]:
            right.plot([sum(cv["merge_bracket"]) / 2], [1.0], marker="o", mfc="none", color=color, ms=7, ls="none")
        if cv["merge_ratio_closed_form"] is not None and cv["merge_ratio_closed_form"] <= cv["ratios"][-1]:
            right.plot([cv["merge_ratio_closed_form"]], [1.0], marker="x", color=color, ms=7, ls="none")
    left.axhline(0.0, color="#555555", lw=0.8)
    left.set_xlabel("imbalance ratio r = lambda_max / lambda_min")
    left.set_ylabel("best loss - loss at the ETF")
    left.set_title("gap to the ETF (< 0: the ETF is not optimal)")
    left.legend(loc="lower left", fontsize=6.5)
    right.axhline(1.0, color="#555555", lw=0.8)
    right.plot([], [], marker="o", mfc="none", color="#333333", ls="none", label="merge ratio r_mc (bisected)")
    right.plot([], [], marker="x", color="#333333", ls="none", label="merged is a local min above (closed form, beta = 0)")
    right.set_xlabel("imbalance ratio r")
    right.set_ylabel("smallest minority-minority inner product")
    right.set_title("minority classes pulled together (1: merged)")
    right.legend(loc="lower right", fontsize=6.5)
    fig.suptitle("Balanced classes (Theorems 2-3, hypothesis 1): prior (r, 1, ..., 1)/(r + C - 1), infonce, k = 1, "
                 "tau = 1, collapsed configurations", fontsize=10)
    return save_figure(fig, out, NAME, details=theory_description(results))


if __name__ == "__main__":
    raise SystemExit(figure_main(plot, __doc__))
