"""Render the registered figures from saved results: each figure module's ``plot(results, out)``.

Each figure's entry of ``<out>/status.json`` (:class:`ncgeom.figures.records.FigureStatuses`) holds its caption: the registered one followed by what the
module computed from the data it drew (scale, seeds per grid point, the hyperparameters that differ
between curves); report.md and the gallery show that text.

A figure module reads only saved results; when the results it needs are absent it raises
:class:`ncgeom.figures.runs.MissingResults` and the figure is reported as ``"no data"`` (not as a failure
of the pipeline). Any other exception marks that figure ``"failed"``; the others still render.
"""

from __future__ import annotations

import importlib
import traceback
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

from ncgeom.figures.records import FigureRecord, FigureStatuses
from ncgeom.figures.registry import FIGURES, Rendered, get_figure
from ncgeom.figures.runs import MissingResults

__all__ = ["figure_module", "render_figure", "render_all"]


def figure_module(name: str) -> ModuleType:
    """The module ``ncgeom.figures.<name>`` of a registered figure (imports matplotlib)."""
    return importlib.import_module(f"ncgeom.figures.{get_figure(name).name}")


def render_figure(name: str, results: Path, out: Path, *, formats: tuple[str, ...] = ("png", "pdf")) -> FigureRecord:
    """Render one figure; its :class:`~ncgeom.figures.records.FigureRecord` (status "done", "no data" or "failed",
    the files drawn, the one-line error, the caption).

    ``caption`` is the text shown with the figure (report.md, the gallery): the registered caption followed,
    when the figure was drawn, by the sentences computed from the data drawn (:attr:`Rendered.details`).
    """
    spec = get_figure(name)
    module = figure_module(name)
    from ncgeom.figures.style import image_formats  # matplotlib: imported with the first figure

    try:
        with image_formats(formats):
            rendered: Rendered = module.plot(Path(results), Path(out))
    except MissingResults as exc:
        return FigureRecord("no data", error=" ".join(str(exc).split()), caption=spec.full_caption())
    except Exception as exc:
        return FigureRecord("failed", error=f"{exc.__class__.__name__}: {' '.join(str(exc).split())}"[:400],
                            traceback=traceback.format_exc()[-3000:], caption=spec.full_caption())
    return FigureRecord("done", files=tuple(Path(f).name for f in rendered.files),
                        caption=spec.full_caption(rendered.details))


def render_all(results: Path, out: Path, *, formats: tuple[str, ...] = ("png", "pdf"),
               log: Callable[[str], None] = print) -> FigureStatuses:
    """Render every registered figure; write and return ``<out>/status.json`` (:class:`FigureStatuses`)."""
    status = {}
    for spec in FIGURES:
        record = status[spec.name] = render_figure(spec.name, results, out, formats=formats)
        log(f"  {spec.name}: {record.status}" + (f" ({record.error})" if record.error else ""))
    statuses = FigureStatuses(status)
    statuses.save(out)
    return statuses
