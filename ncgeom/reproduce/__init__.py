"""Reproduction of the paper's claims: pipeline, theory-figure data, figure registry and report.

``ncgeom reproduce`` (:mod:`ncgeom.cli.reproduce`) calls :func:`reproduce`. Importing this package
does not import matplotlib, cvxpy or torch; the stages import them when they run.
"""

from ncgeom.reproduce.pipeline import STAGES, ReproduceResult, StageOutcome, reproduce
from ncgeom.reproduce.registry import FIGURES, FigureSpec, figure_names
from ncgeom.reproduce.report import write_report
from ncgeom.reproduce.scales import SCALE_NAMES, Scale, get_scale

__all__ = [
    "reproduce",
    "ReproduceResult",
    "StageOutcome",
    "STAGES",
    "FIGURES",
    "FigureSpec",
    "figure_names",
    "write_report",
    "Scale",
    "SCALE_NAMES",
    "get_scale",
]
