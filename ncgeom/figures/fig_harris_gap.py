"""Harris gap L_H - L over random representations (docs/theory.md, Theorem 1).

For random finite latent models (points uniform on the sphere, random within-class weights), the
exact population losses give L_HSCL(beta) - L_SCL (left) and L_HUCL(beta) - L_UCL (right) as functions
of beta: one thin line per model, the median in bold. Theorem 1 (Harris' inequality) says every gap is
>= 0 for any representation, and it is 0 at beta = 0; the dashed line marks 0. The text box gives the
smallest gap found and the rounding tolerance. Bears on: docs/theory.md, Theorem 1.
Reads ``<results>/theory/harris_gap.json``.

Run: ``python -m ncgeom.figures.fig_harris_gap --results DIR --out DIR``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ncgeom.figures.registry import Rendered
from ncgeom.figures.runs import load_theory, theory_description
from ncgeom.figures.style import figure_main, new_figure, save_figure, setting_color

__all__ = ["NAME", "plot"]

NAME = "fig_harris_gap"


def plot(results: Path, out: Path) -> Rendered:
    data = load_theory(results, "harris_gap")
    betas = np.asarray(data["betas"], dtype=float)
    fig, axes = new_figure(1, 2, width=8.0, height=3.1)
    for ax, key, hard, plain in ((axes[0][0], "scl_gap", "HSCL", "SCL"), (axes[0][1], "ucl_gap", "HUCL", "UCL")):
        color = setting_color(hard.lower())
        gaps = np.array([m[key] for m in data["models"]], dtype=float)
        for row in gaps:
            ax.plot(betas, row, color=color, lw=0.7, alpha=0.45)
        ax.plot(betas, np.median(gaps, axis=0), color=color, lw=2.4, marker="o", ms=3, label=f"median of {len(gaps)} random models")
        ax.axhline(0.0, color="#000000", lw=1.0, ls="--", label="0 (Theorem 1 bound)")
        ax.set_xlabel(r"hardness $\beta$")
        ax.set_ylabel(rf"$L_{{\mathrm{{{hard}}}}} - L_{{\mathrm{{{plain}}}}}$")
        ax.set_title(f"{hard} - {plain}: min gap {gaps.min():.2e}")
        ax.legend(loc="upper left")
    holds = "holds" if data.get("holds") else "VIOLATED"
    fig.suptitle(
        f"Harris gap over random representations (C = {data['num_classes']}, {data['points_per_class']} points/class, "
        f"d = {data['dim']}, k = {data['num_negatives']}, {data['psi']}): bound {holds} "
        f"(tolerance {data['tolerance']:.1e})",
        fontsize=9,
    )
    return save_figure(fig, out, NAME, details=theory_description(results))


if __name__ == "__main__":
    raise SystemExit(figure_main(plot, __doc__))
