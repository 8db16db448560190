"""Convex certificates: optimum of the Gram-matrix program vs the closed form at neural collapse.

Left: for every certified case (setting, C, k, psi, domain), the optimum of the convex program of
docs/theory.md, section 6 (cvxpy with Clarabel or SCS) against the closed-form value at NC of section 5;
points must lie on the diagonal. Right: per case, on a log axis, |optimum - closed form|, the certified
duality gap and the distance of the optimizer to the ETF Gram (0 when the ETF is the minimizer, as
Theorems 2 and 3 state for strictly convex psi; hollow triangles: psi not strictly convex, e.g. triplet,
whose minimizer need not be unique). Bears on docs/theory.md, section 6 and Theorems 2 and 3.
Reads ``<results>/theory/certificates.json`` (certificates of the verify stage plus extra cases).

Run: ``python -m ncgeom.figures.fig_certificates --results DIR --out DIR``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ncgeom.figures.registry import Rendered
from ncgeom.figures.runs import MissingResults, load_theory, theory_description
from ncgeom.figures.style import figure_main, new_figure, save_figure, setting_color

__all__ = ["NAME", "plot"]

NAME = "fig_certificates"
_MARKER = {"sphere": "o", "ball": "s"}
_FLOOR = 1e-16


def _short(row: dict) -> str:
    par = f"τ{row.get('tau'):g}" if row.get("psi") != "triplet" else f"m{row.get('margin'):g}"
    return f"{str(row['setting']).upper()} {row.get('psi')} C{row['num_classes']} k{row['num_negatives']} {par} {row.get('domain')}"


def plot(results: Path, out: Path) -> Rendered:
    rows = [r for r in load_theory(results, "certificates")["cases"] if r.get("primal_value") is not None and r.get("closed_form") is not None]
    if not rows:
        raise MissingResults("no solved certificate in theory/certificates.json")
    rows.sort(key=lambda r: (r["setting"], r.get("psi") or "", r["num_classes"], r["num_negatives"], r.get("domain") or ""))
    fig, axes = new_figure(1, 2, width=12.0, height=4.6, gridspec_kw={"width_ratios": [1, 1.8]})
    ax = axes[0][0]
    seen = set()
    for r in rows:
        key = (r["setting"], r.get("domain"))
        ax.scatter(r["closed_form"], r["primal_value"], color=setting_color(r["setting"]), marker=_MARKER.get(r.get("domain"), "^"),
                   s=28, label=None if key in seen else f"{r['setting'].upper()}, {r.get('domain')}", zorder=3)
        seen.add(key)
    lo = min(min(r["closed_form"], r["primal_value"]) for r in rows)
    hi = max(max(r["closed_form"], r["primal_value"]) for r in rows)
    pad = 0.05 * (hi - lo + 1e-9)
    ax.plot([lo - pad, hi + pad], [lo - pad, hi + pad], color="#000000", lw=1, ls="--", label="optimum = closed form")
    ax.set_xlabel("closed form at NC (docs/theory.md, section 5)")
    ax.set_ylabel("convex program optimum (section 6)")
    ax.set_title(f"{len(rows)} certificates, {sum(r.get('status') == 'pass' for r in rows)} pass")
    ax.legend(loc="upper left")
    ax = axes[0][1]
    x = np.arange(len(rows))
    series = (
        ("|optimum - closed form|", [abs(r["primal_value"] - r["closed_form"]) for r in rows], "o", "#0072B2"),
        ("duality gap", [abs(r.get("gap") or 0.0) for r in rows], "s", "#E69F00"),
        ("distance of optimizer to ETF Gram", [r.get("distance_to_etf") or 0.0 for r in rows], "^", "#009E73"),
    )
    unique = np.array([r.get("minimizer_unique") is not False for r in rows])
    for label, raw, marker, color in series:
        values = np.maximum(raw, _FLOOR)
        if marker == "^":  # hollow where psi is not strictly convex: the minimizer need not be the ETF
            ax.scatter(x[unique], values[unique], marker=marker, color=color, label=label, s=22, zorder=3)
            if (~unique).any():
                ax.scatter(x[~unique], values[~unique], marker=marker, facecolors="none", edgecolors=color, s=22, zorder=3,
                           label="distance to ETF, minimizer not unique")
        else:
            ax.scatter(x, values, marker=marker, color=color, label=label, s=22, zorder=3)
    ax.set_yscale("log")
    ax.set_xticks(x)
    ax.set_xticklabels([_short(r) for r in rows], rotation=60, ha="right", fontsize=6.5)
    ax.set_ylabel(f"error / gap / distance (floor {_FLOOR:g})")
    ax.legend(loc="lower left", bbox_to_anchor=(0.0, 1.0), ncols=2, fontsize=7.5)
    fig.suptitle("Convex Gram-matrix certificates vs closed forms (docs/theory.md, section 6)", fontsize=10)
    return save_figure(fig, out, NAME, details=theory_description(results))


if __name__ == "__main__":
    raise SystemExit(figure_main(plot, __doc__))
