"""HUCL optimal geometry along beta: the certified minimum, the best geometry found, NC and the two lower bounds.

Left: for C = 3, k = 1, infonce, tau = 1, the HUCL population loss vs beta: NC's value, the Theorem 1 + 3 bound
L_UCL(NC), the collision-aware bound B(beta) (proofs_check.hucl.optimum.bound), the certified minimum over collapsed
configurations in R^2 (interval branch and bound, to 1e-7; markers) and the best configuration found in d = 2 over
n in {1, 2, 3} points per class and in d = 3. Middle: how far the optimum found lies below NC, L(NC) - L*, for every
(C, d) computed (k = 1, tau = 1; solid d = C - 1, dashed d = C). Right: how far it lies above the bound, L* - B
(0 where the bound is attained: d >= C past the lift threshold, and NC below it). The changes of the optimal geometry
along beta are marked in the middle panel (x: continuous, o: first order). Bears on the HUCL open problem of docs/theory.md,
section 4, and claim 3 of section 9; the numbers are docs/results.md, "HUCL optimal geometry along beta". Reads
``<results>/theory/hucl_optimum.json`` (written by proofs_check.hucl.optimum.record).

Run: ``python -m ncgeom.figures.fig_hucl_optimum --results DIR --out DIR``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ncgeom.figures.registry import Rendered
from ncgeom.figures.runs import load_theory, theory_description
from ncgeom.figures.style import color_cycle, figure_main, new_figure, no_data, save_figure

__all__ = ["NAME", "plot"]

NAME = "fig_hucl_optimum"


def _case(data: dict[str, Any], c: int, d: int, k: int = 1, tau: float = 1.0) -> dict[str, Any] | None:
    for case in data["cases"]:
        if (case["num_classes"], case["dim"], case["num_negatives"], case["tau"]) == (c, d, k, tau):
            return case
    return None


def _bounds(data: dict[str, Any], c: int, k: int = 1, tau: float = 1.0) -> list[dict[str, Any]]:
    return sorted((b for b in data["bounds"] if (b["num_classes"], b["num_negatives"], b["tau"]) == (c, k, tau)),
                  key=lambda b: b["beta"])


def _symlog(ax) -> None:
    ax.set_xscale("symlog", linthresh=1.0)
    ax.set_xlabel(r"hardness $\beta$ (k = 1, infonce, $\tau$ = 1)")


def plot(results: Path, out: Path) -> Rendered:
    data = load_theory(results, "hucl_optimum")
    fig, axes = new_figure(1, 3, width=15.0, height=4.2)
    left, middle, right = axes[0]
    bounds3 = _bounds(data, 3)
    c32, c33 = _case(data, 3, 2), _case(data, 3, 3)
    if not bounds3 or c32 is None:
        no_data(left, "no C = 3, k = 1, tau = 1 case in hucl_optimum.json")
    else:
        betas = [b["beta"] for b in bounds3]
        left.plot(betas, [b["nc_value"] for b in bounds3], color="#333333", lw=1.3, label="NC (closed form)")
        left.plot(betas, [b["theorem13"] for b in bounds3], color="#999999", ls=":", lw=1.3,
                  label=r"Theorem 1 + 3 bound $L_{UCL}(NC)$")
        left.plot(betas, [b["value"] for b in bounds3], color="#d62728", ls="--", lw=1.5, zorder=5,
                  label=r"collision-aware bound $B(\beta)$ (= best found, d = 3)")
        points = c32["path"]["points"]
        left.plot([p["beta"] for p in points], [p["value"] for p in points], color="#1f77b4", lw=1.3,
                  label="best found, d = 2 (n = 1, 2, 3)")
        if c33 is not None:
            p3 = c33["path"]["points"]
            left.plot([p["beta"] for p in p3], [p["value"] for p in p3], color="#2ca02c", lw=1.0,
                      label="best found, d = 3")
        cert = [x for x in c32["certified"] if x["closed"]]
        left.plot([x["beta"] for x in cert], [x["upper"] for x in cert], marker="s", mfc="none", ls="none",
                  color="#1f77b4", ms=5, label="certified minimum, collapsed, d = 2 (to 1e-7)")
        _symlog(left)
        left.set_ylabel("HUCL population loss")
        left.set_title("C = 3: minimum, NC and the bounds")
        left.legend(loc="lower right", fontsize=6.5)
    shapes = sorted({(case["num_classes"], case["dim"]) for case in data["cases"]
                     if (case["num_negatives"], case["tau"]) == (1, 1.0)})
    colors = dict(zip(sorted({c for c, _ in shapes}), color_cycle(len({c for c, _ in shapes}) or 1)))
    for c, d in shapes:
        case = _case(data, c, d)
        assert case is not None
        points = case["path"]["points"]
        ls = "-" if d == c - 1 else "--"
        middle.plot([p["beta"] for p in points], [p["nc_value"] - p["value"] for p in points], color=colors[c], ls=ls,
                    lw=1.2, label=f"C = {c}, d = {d}")
        bound = {b["beta"]: b["value"] for b in _bounds(data, c)}
        xs = [p["beta"] for p in points if p["beta"] in bound]
        right.plot(xs, [max(p["value"] - bound[p["beta"]], 1e-12) for p in points if p["beta"] in bound],
                   color=colors[c], ls=ls, lw=1.2, label=f"C = {c}, d = {d}")
        for ch in case["path"]["changes"]:
            after = ch["after_point"]
            middle.plot([after["beta"]], [after["nc_value"] - after["value"]], ls="none", color=colors[c], ms=6,
                        marker="o" if ch["kind"] == "first-order" else "x", mfc="none")
    for ax in (middle, right):
        _symlog(ax)
        ax.legend(loc="upper right", fontsize=6.5)
    middle.set_ylabel(r"$L(\mathrm{NC}) - L^*$ (best found)")
    middle.set_title("below NC (x continuous, o first-order change)")
    right.set_yscale("log")
    right.set_ylabel(r"$L^* - B(\beta)$ (floor 1e-12)")
    right.set_title("gap to the collision-aware bound")
    fig.suptitle("HUCL optimal geometry along beta (open problem of docs/theory.md, section 4)", fontsize=10)
    return save_figure(fig, out, NAME, details=theory_description(results))


if __name__ == "__main__":
    raise SystemExit(figure_main(plot, __doc__))
