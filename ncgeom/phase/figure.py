"""The figures of a phase map, drawn from its saved records (``cells.json``, ``overlays.json``, the run histories).

- :func:`plot_map` (``phase_map.png``): one heat map per panel, a cell per grid point coloured by its label (NC
  green, DC vermillion, neither blue, not converged grey, mixed yellow; an inferred cell pale, without a number), the
  seed counts written in each trained cell (``3``: all its seeds in its class; ``2N 1D``: the seeds per class; a "not
  converged" cell adds the geometry its runs had at their budget), the boundary between cells of different labels
  drawn as a black line, and the theory lines of ``overlays.json`` with their evidence kind in the legend;
- :func:`plot_spectra` (``phase_spectra.png``): for chosen cells (by default, per panel, one trained cell of each of
  NC, DC and neither, the first in grid order next to a boundary), the sorted class-mean spectrum of its first seed's
  run at each metric epoch on a log axis, coloured by epoch, as jing2022understanding plot the singular value spectrum
  of the embeddings over training; the DC threshold dashed.

Imports matplotlib (through :mod:`ncgeom.figures.style`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ncgeom.figures.style import new_figure, save_figure
from ncgeom.metrics.outcome import DC_SPECTRUM
from ncgeom.phase.records import RUNS_FOLDER, AxisRecord, CellRecord, Overlays, PhaseMap, TheoryLine
from ncgeom.runs.records import load_history

__all__ = ["LABEL_COLORS", "plot_map", "plot_spectra", "spectrum_cells", "axis_position", "boundary_segments"]

LABEL_COLORS: dict[str, str] = {"NC": "#009E73", "DC": "#D55E00", "neither": "#0072B2", "not converged": "#999999",
                                "undefined": "#000000", "mixed": "#F0E442"}
_SHORT = {"NC": "N", "DC": "D", "neither": "O", "undefined": "U", "not converged": "X"}
_LINE_STYLES = {"hucl_local_threshold": ("#000000", ":"), "hucl_global_switch": ("#000000", "-."),
                "batch_loss_threshold": ("#CC79A7", "--"), "detached_flow_threshold": ("#CC79A7", ":"),
                "etf_dimension": ("#56B4E9", "-"), "merge_ratio": ("#E69F00", "--"),
                "every_class_in_a_batch": ("#CC79A7", "-")}


def axis_position(axis: AxisRecord, value: float) -> float | None:
    """The fractional index of ``value`` on a numeric axis (linear between neighbouring values), None outside it or on
    a categorical axis. Example: values (0, 2, 4), value 3 -> 1.5."""
    if axis.numeric is None:
        return None
    xs = axis.numeric
    if value < xs[0] or value > xs[-1]:
        return None
    for k in range(len(xs) - 1):
        if xs[k] <= value <= xs[k + 1]:
            return k + (value - xs[k]) / (xs[k + 1] - xs[k])
    return float(len(xs) - 1)


def boundary_segments(labels: dict[tuple[int, int], str]) -> list[tuple[tuple[float, float], tuple[float, float]]]:
    """The cell edges between two neighbouring cells with different labels, in index coordinates (a cell (i, j) is
    the square [i - 1/2, i + 1/2] x [j - 1/2, j + 1/2])."""
    segments = []
    for (i, j), label in labels.items():
        right, up = labels.get((i + 1, j)), labels.get((i, j + 1))
        if right is not None and right != label:
            segments.append(((i + 0.5, j - 0.5), (i + 0.5, j + 0.5)))
        if up is not None and up != label:
            segments.append(((i - 0.5, j + 0.5), (i + 0.5, j + 0.5)))
    return segments


def _cell_text(cell: CellRecord) -> str:
    if cell.source == "inferred":
        return ""
    if cell.label != "mixed" and cell.label != "not converged":
        return str(cell.n_seeds)
    parts = [f"{n}{_SHORT[c]}" for c, n in cell.counts.items()]
    if "not converged" in cell.counts:
        geometry = " ".join(f"{n}{_SHORT[g]}" for g, n in cell.geometry_counts.items())
        return " ".join(parts) + f"\n({geometry})"
    return " ".join(parts)


def _line_path(line: TheoryLine, x: AxisRecord, y: AxisRecord) -> tuple[list[float], list[float]]:
    """The staircase of a theory line in index coordinates (NaN breaks where it has no value or leaves the axis)."""
    across = x if line.axis == "x" else y
    px: list[float] = []
    py: list[float] = []
    for k, value in enumerate(line.values):
        pos = None if value is None else axis_position(across, value)
        if pos is None:
            px.append(np.nan)
            py.append(np.nan)
            continue
        for a in (k - 0.5, k + 0.5):
            px.append(pos if line.axis == "x" else a)
            py.append(a if line.axis == "x" else pos)
    return px, py


def plot_map(record: PhaseMap, overlays: Overlays | None, out: str | Path, *,
             formats: Sequence[str] = ("png",)) -> tuple[Path, ...]:
    """Draw ``phase_map.<fmt>`` of ``record`` into ``out`` (module docstring); the files written."""
    from matplotlib.colors import to_rgba
    from matplotlib.patches import Patch

    n = len(record.panels)
    widths = [max(3.2, 0.55 * len(p.x.labels) + 1.6) for p in record.panels]
    height = max(3.4, 0.42 * max(len(p.y.labels) for p in record.panels) + 2.2)
    fig, axes = new_figure(1, n, width=max(7.5, sum(widths)), height=height)
    handles: dict[str, object] = {}
    for k, (ax, panel) in enumerate(zip(axes[0], record.panels)):
        nx, ny = len(panel.x.labels), len(panel.y.labels)
        image = np.ones((ny, nx, 4))
        labels: dict[tuple[int, int], str] = {}
        for ix in range(nx):
            for iy in range(ny):
                cell = record.cell(k, ix, iy)
                if cell is None:
                    continue
                labels[(ix, iy)] = cell.label
                image[iy, ix] = to_rgba(LABEL_COLORS[cell.label], alpha=1.0 if cell.source == "trained" else 0.35)
                text = _cell_text(cell)
                if text:
                    dark = cell.label in ("DC", "neither", "undefined")
                    ax.text(ix, iy, text, ha="center", va="center", fontsize=6 if "\n" in text or " " in text else 7,
                            color="white" if dark else "black")
                handles.setdefault(cell.label, Patch(color=LABEL_COLORS[cell.label], label=cell.label))
        ax.imshow(image, origin="lower", aspect="auto", interpolation="nearest",
                  extent=(-0.5, nx - 0.5, -0.5, ny - 0.5))
        for (x0, y0), (x1, y1) in boundary_segments(labels):
            ax.plot([x0, x1], [y0, y1], color="black", lw=1.6, solid_capstyle="butt")
        for line in (overlays.lines if overlays is not None else ()):
            if line.panel != k:
                continue
            px, py = _line_path(line, panel.x, panel.y)
            color, style = _LINE_STYLES.get(line.name, ("#000000", "--"))
            (h,) = ax.plot(px, py, color=color, ls=style, lw=2.0, label=line.label)
            handles.setdefault(line.label, h)
        ax.set_xticks(range(nx), panel.x.labels, rotation=45 if max(map(len, panel.x.labels)) > 3 else 0,
                      fontsize=7)
        ax.set_yticks(range(ny), panel.y.labels, fontsize=7)
        ax.set_xlim(-0.5, nx - 0.5)
        ax.set_ylim(-0.5, ny - 0.5)
        ax.set_xlabel(panel.x.title)
        ax.set_ylabel(panel.y.title)
        ax.grid(False)
        counts = record.label_counts(k)
        ax.set_title((panel.title + ": " if panel.title else "") + ", ".join(f"{v} {c}" for c, v in counts.items()),
                     fontsize=8)
    rule = "end state (converged runs)" if record.decide == "converged" else "at the epoch budget"
    fig.suptitle(f"{record.name} ({record.scale}, {record.seeds} seeds {list(record.seed_values)}; decided {rule}; "
                 f"{record.runs_trained} of {record.runs_uniform} uniform-grid runs trained)", fontsize=9)
    extra = Patch(facecolor=to_rgba("#999999", 0.35), label="pale: inferred (not trained)")
    fig.legend(handles=[*handles.values(), extra], loc="outside lower center", ncol=min(3, len(handles) + 1),
               fontsize=7, frameon=False)
    rendered = save_figure(fig, out, "phase_map", details="", formats=formats)
    return rendered.files


def _near_boundary(record: PhaseMap, cell: CellRecord) -> bool:
    for dx, dy in ((1, 0), (-1, 0), (0, 1), (0, -1)):
        other = record.cell(cell.panel, cell.ix + dx, cell.iy + dy)
        if other is not None and other.label != cell.label:
            return True
    return False


def spectrum_cells(record: PhaseMap, *, per_panel: int = 3) -> list[CellRecord]:
    """The cells :func:`plot_spectra` shows by default: per panel, for each of NC, DC and neither, the first trained
    cell with that label next to a boundary (else the first with that label), at most ``per_panel`` of them."""
    chosen = []
    for k in range(len(record.panels)):
        picked = 0
        for label in ("NC", "DC", "neither"):
            trained = [c for c in record.cells if c.panel == k and c.source == "trained" and c.label == label]
            if not trained or picked >= per_panel:
                continue
            near = [c for c in trained if _near_boundary(record, c)]
            chosen.append((near or trained)[0])
            picked += 1
    return chosen


def plot_spectra(record: PhaseMap, out: str | Path, *, cells: Sequence[CellRecord] | None = None,
                 formats: Sequence[str] = ("png",)) -> tuple[Path, ...]:
    """Draw ``phase_spectra.<fmt>`` (module docstring) from the histories of the runs under ``out/runs``; nothing when
    no cell qualifies."""
    import matplotlib

    cells = list(spectrum_cells(record) if cells is None else cells)
    if not cells:
        return ()
    cols = min(3, len(cells))
    rows = -(-len(cells) // cols)
    fig, axes = new_figure(rows, cols, width=3.4 * cols, height=2.8 * rows)
    cmap = matplotlib.colormaps["viridis"]
    for ax, cell in zip(axes.flat, cells):
        run = cell.runs[0]
        history = load_history(Path(out) / RUNS_FOLDER / run.name)
        spectra = [(r.epoch, sorted((v for v in (r.value("spectrum") or []) if v is not None), reverse=True))
                   for r in history if r.metrics is not None]
        last = max((e for e, _ in spectra), default=1) or 1
        for epoch, values in spectra:
            if values:
                ax.semilogy(range(1, len(values) + 1), np.maximum(values, 1e-16), color=cmap(epoch / last), lw=0.9)
        ax.axhline(DC_SPECTRUM, color="#555555", ls="--", lw=1)
        panel = record.panels[cell.panel]
        ax.set_title(f"{panel.title + ', ' if panel.title else ''}{panel.x.name}={panel.x.labels[cell.ix]}, "
                     f"{panel.y.name}={panel.y.labels[cell.iy]}: {cell.label}", fontsize=7)
        ax.set_xlabel("k (sorted)")
        ax.set_ylabel(r"$\lambda_k/\lambda_1$ of the class means")
        ax.text(0.02, 0.03, f"seed {run.seed}; epochs 0..{last} (dark to light)", transform=ax.transAxes, fontsize=6)
    for ax in list(axes.flat)[len(cells):]:
        ax.set_visible(False)
    fig.suptitle(f"{record.name}: class-mean spectrum over training (dashed: DC threshold {DC_SPECTRUM:g})", fontsize=9)
    return save_figure(fig, out, "phase_spectra", details="", formats=formats).files
