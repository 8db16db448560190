"""The figures of the reproduction: one module per figure, the registry, the shared panels and style.

- :mod:`.registry`: :data:`FIGURES` (a :class:`FigureSpec` per figure: title, caption, claims);
- ``fig_*``: one module per figure, ``plot(results, out) -> Rendered`` (the files and the computed part
  of the caption: scale, seeds per grid point, the hyperparameters that differ between curves) and
  ``python -m ncgeom.figures.<name> --results DIR --out DIR``;
- :mod:`.runs`: the saved results a figure reads (runs of the claim sweeps, theory data);
- :mod:`.panels` and :mod:`.style`: shared panels, colours, saving;
- :mod:`.render`: :func:`render_figure`, :func:`render_all` (used by ``ncgeom reproduce``).

Importing this package does not import matplotlib; rendering a figure does.
"""

from ncgeom.figures.registry import FIGURES, FigureSpec, Rendered, figure_names, get_figure
from ncgeom.figures.render import figure_module, render_all, render_figure
from ncgeom.figures.runs import MissingResults

__all__ = ["FIGURES", "FigureSpec", "Rendered", "figure_names", "get_figure", "figure_module", "render_figure", "render_all", "MissingResults"]
