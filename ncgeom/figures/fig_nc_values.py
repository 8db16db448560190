"""Loss at neural collapse vs hardness beta for SCL, HSCL, UCL and HUCL, with the collision probability.

Shows the closed-form population loss at NC (docs/theory.md, section 5) as a function of beta, one panel per
number of negatives k, and in the last panel the probability that a negative shares the anchor's class
at NC: 0 for SCL/HSCL, 1/C for UCL and pi_beta = e^beta / (e^beta + (C-1) e^(-beta/(C-1))) for HUCL.
SCL, HSCL and UCL are flat in beta (at NC the tilt does not change SCL negatives); HUCL rises with
pi_beta, which is why Theorem 1's bound L_HUCL >= L_UCL(NC) is not attained at NC (docs/theory.md, "HUCL
[open problem]"). Bears on: docs/theory.md, section 5, Theorems 2 and 3, HUCL open problem.
Reads ``<results>/theory/nc_values.json``.

Run: ``python -m ncgeom.figures.fig_nc_values --results DIR --out DIR``.
"""

from __future__ import annotations

from pathlib import Path

from ncgeom.figures.registry import Rendered
from ncgeom.figures.runs import load_theory, theory_description
from ncgeom.figures.style import figure_main, new_figure, save_figure, setting_color
from ncgeom.vocabulary import SETTINGS

__all__ = ["NAME", "plot"]

NAME = "fig_nc_values"
_STYLE = {"scl": ("-", "o"), "hscl": ("--", None), "ucl": ("-", "s"), "hucl": ("-", "^")}
_LABEL = {"scl": "SCL", "hscl": "HSCL", "ucl": "UCL", "hucl": "HUCL"}


def plot(results: Path, out: Path) -> Rendered:
    data = load_theory(results, "nc_values")
    betas = data["betas"]
    ks = [str(k) for k in data["num_negatives"]]
    ncols = len(ks) + 1
    fig, axes = new_figure(1, ncols, width=min(2.6 * ncols, 14.0), height=3.0)
    for ax, k in zip(axes[0], ks):
        for setting in SETTINGS:
            ls, marker = _STYLE[setting]
            ax.plot(betas, data["values"][k][setting], ls=ls, marker=marker, ms=3, color=setting_color(setting), label=_LABEL[setting])
        ax.set_title(f"k = {k} negatives")
        ax.set_xlabel(r"hardness $\beta$")
    axes[0][0].set_ylabel(f"loss at NC ({data['psi']}, tau = {data['tau']:g})")
    axes[0][0].legend(loc="best")
    ax = axes[0][-1]
    for setting in ("scl", "ucl", "hucl"):
        ls, marker = _STYLE[setting]
        label = {"scl": "SCL, HSCL", "ucl": "UCL (1/C)", "hucl": r"HUCL ($\pi_\beta$)"}[setting]
        ax.plot(betas, data["collision_probability"][setting], ls=ls, marker=marker, ms=3, color=setting_color(setting), label=label)
    ax.set_ylim(-0.03, 1.03)
    ax.set_xlabel(r"hardness $\beta$")
    ax.set_ylabel("collision probability at NC")
    ax.set_title(f"C = {data['num_classes']}")
    ax.legend(loc="center right")
    fig.suptitle("Population loss at neural collapse (docs/theory.md, section 5)", fontsize=10)
    return save_figure(fig, out, NAME, details=theory_description(results))


if __name__ == "__main__":
    raise SystemExit(figure_main(plot, __doc__))
