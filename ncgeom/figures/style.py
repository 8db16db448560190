"""Shared look of the ncgeom figures and the command-line wrapper of every figure script.

Palette: Okabe-Ito (colour-blind safe; Okabe & Ito 2008). One fixed colour per hardness beta so that
every figure reads the same way. PNG (dpi 110) and PDF are written atomically. Importing this module
imports matplotlib with the non-interactive Agg backend; :mod:`ncgeom` itself never imports it.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.rcsetup import cycler  # noqa: E402  (the object matplotlib.cycler re-exports; typed here)

from ncgeom.atomic_io import atomic_write_bytes  # noqa: E402
from ncgeom.figures.registry import Rendered  # noqa: E402
from ncgeom.figures.runs import MissingResults  # noqa: E402
from ncgeom.validate import require_choice  # noqa: E402
from ncgeom.vocabulary import SETTINGS  # noqa: E402

__all__ = [
    "OKABE_ITO",
    "BETAS",
    "beta_color",
    "setting_color",
    "color_cycle",
    "apply_style",
    "new_figure",
    "save_figure",
    "image_formats",
    "no_data",
    "figure_main",
    "DPI",
]

DPI = 110

OKABE_ITO = {
    "black": "#000000",
    "orange": "#E69F00",
    "sky_blue": "#56B4E9",
    "green": "#009E73",
    "yellow": "#F0E442",
    "blue": "#0072B2",
    "vermillion": "#D55E00",
    "purple": "#CC79A7",
}
_CYCLE = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#000000", "#F0E442")

BETAS = (0.0, 2.0, 5.0, 10.0, 30.0)
_BETA_COLORS = {0.0: "#000000", 2.0: "#0072B2", 5.0: "#009E73", 10.0: "#E69F00", 30.0: "#D55E00"}
_SETTING_COLORS: dict[str, str] = dict(zip(SETTINGS, ("#0072B2", "#009E73", "#E69F00", "#D55E00")))


def beta_color(beta: float) -> str:
    """The fixed colour of a hardness value (Okabe-Ito); other betas get the remaining colours."""
    beta = float(beta)
    if beta in _BETA_COLORS:
        return _BETA_COLORS[beta]
    extra = ("#CC79A7", "#56B4E9", "#F0E442")
    return extra[int(abs(hash(beta))) % len(extra)]


def setting_color(setting: str) -> str:
    """The fixed colour of a setting (scl, hscl, ucl, hucl)."""
    return _SETTING_COLORS.get(str(setting).lower(), "#CC79A7")


def color_cycle(n: int) -> list[str]:
    """``n`` Okabe-Ito colours (cycled)."""
    return [_CYCLE[i % len(_CYCLE)] for i in range(n)]


def apply_style() -> None:
    """rcParams for small, readable figures: 9-10 pt text, light grid, Okabe-Ito cycle."""
    plt.rcParams.update(
        {
            "figure.dpi": DPI,
            "savefig.dpi": DPI,
            "font.size": 9,
            "axes.titlesize": 10,
            "axes.labelsize": 9,
            "legend.fontsize": 8,
            "xtick.labelsize": 8,
            "ytick.labelsize": 8,
            "axes.grid": True,
            "grid.alpha": 0.3,
            "axes.prop_cycle": cycler(color=list(_CYCLE)),
            "lines.linewidth": 1.6,
            "legend.frameon": False,
            "pdf.fonttype": 42,
        }
    )


def new_figure(nrows: int = 1, ncols: int = 1, *, width: float = 9.0, height: float | None = None, **kwargs):
    """A styled ``(figure, axes)`` pair (axes always a 2-D array unless squeeze=True is passed)."""
    apply_style()
    height = height if height is not None else 2.9 * nrows
    kwargs.setdefault("squeeze", False)
    kwargs.setdefault("constrained_layout", True)
    return plt.subplots(nrows, ncols, figsize=(width, height), **kwargs)


_FORMATS: list[tuple[str, ...]] = [("png", "pdf")]


@contextlib.contextmanager
def image_formats(formats: Sequence[str]):
    """Within the block, :func:`save_figure` writes these formats by default (e.g. ``("png",)``)."""
    for fmt in formats:
        require_choice("formats", fmt, ("png", "pdf", "svg"))
    _FORMATS.append(tuple(formats))
    try:
        yield
    finally:
        _FORMATS.pop()


def save_figure(fig, out_dir: str | Path, name: str, *, details: str, formats: Sequence[str] | None = None) -> Rendered:
    """Write ``<out_dir>/<name>.<fmt>`` for each format (default PNG and PDF, or those of
    :func:`image_formats`) atomically, close the figure; return the paths with ``details``, the computed
    part of the caption (:class:`~ncgeom.figures.registry.Rendered`)."""
    out_dir = Path(out_dir)
    formats = _FORMATS[-1] if formats is None else tuple(formats)
    paths = []
    for fmt in formats:
        buf = io.BytesIO()
        fig.savefig(buf, format=fmt, dpi=DPI)
        paths.append(atomic_write_bytes(out_dir / f"{name}.{fmt}", buf.getvalue()))
    plt.close(fig)
    return Rendered(tuple(paths), details)


def no_data(ax, message: str) -> None:
    """Mark an axis that has nothing to show (keeps the figure's layout stable)."""
    ax.text(0.5, 0.5, message, ha="center", va="center", transform=ax.transAxes, fontsize=8, color="#555555", wrap=True)
    ax.set_xticks([])
    ax.set_yticks([])
    ax.grid(False)


def figure_main(plot: Callable[[Path, Path], Rendered], doc: str | None, argv: Sequence[str] | None = None) -> int:
    """Command line of a figure module: ``python -m ncgeom.figures.fig_x --results DIR --out DIR``.

    Prints the files written, then the computed part of the caption. Returns 0 on success, 2 on bad input
    or missing results (one-line message on stderr).
    """
    summary = (doc or "").strip().splitlines()[0] if doc else None
    parser = argparse.ArgumentParser(description=summary)
    parser.add_argument(
        "--results", required=True, type=Path,
        help="output of `ncgeom reproduce --out`, or a folder of `ncgeom sweep --out` outputs",
    )
    parser.add_argument("--out", required=True, type=Path, help="directory for the PNG and PDF files")
    args = parser.parse_args(argv)
    if not args.results.is_dir():
        print(f"{parser.prog}: error: --results {args.results} is not a directory", file=sys.stderr)
        return 2
    try:
        rendered = plot(args.results, args.out)
    except MissingResults as exc:
        print(f"{parser.prog}: error: {exc}", file=sys.stderr)
        return 2
    for path in rendered.files:
        print(path)
    print(rendered.details)
    return 0
