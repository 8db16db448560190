"""Phase maps: where Adam ends in NC, in dimensional collapse, or neither, over two axes of the config, with the
theory's lines drawn over them (docs/theory.md, section 9, "Phase maps"; docs/results.md, "Where DC happens").

- :mod:`.spec`: map specs (TOML; the shipped maps in ``maps/``), :func:`load_map_spec`, :func:`map_names`;
- :mod:`.lattice`: the adaptive refinement (a quadtree along the boundary);
- :mod:`.cells`: the class of a run and the label of a cell;
- :mod:`.records`: ``cells.json`` (:class:`PhaseMap`), ``overlays.json`` (:class:`Overlays`), the CSV and text table;
- :mod:`.overlays`: the theory lines, computed by proofs_check;
- :mod:`.run`: :func:`run_map`, level by level through the campaigns' sweeps;
- :mod:`.figure`: the heat map and the spectra over epochs (matplotlib, imported when drawing);
- :mod:`.shipping`: the shipped maps' confirmatory records (package data ``shipped/<map>/``), read by the
  reproduction at quick and full.

This package sits between the reproduction and proofs_check / the figures (docs/architecture.md): it trains through
:mod:`ncgeom.campaigns`, draws the theory's lines with proofs_check's code and the maps with the figures' style.
Importing it imports neither torch nor matplotlib.
"""

from ncgeom.phase.cells import cell_label, run_class
from ncgeom.phase.lattice import Lattice
from ncgeom.phase.overlays import theory_lines
from ncgeom.phase.records import Overlays, PhaseMap, TheoryLine
from ncgeom.phase.run import run_map
from ncgeom.phase.spec import MapSpec, load_map_spec, map_names

__all__ = ["MapSpec", "load_map_spec", "map_names", "Lattice", "run_class", "cell_label", "PhaseMap", "Overlays",
           "TheoryLine", "theory_lines", "run_map"]
