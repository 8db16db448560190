"""Reproduction of the paper's claims: a thin pipeline over :mod:`ncgeom.campaigns` and :mod:`ncgeom.figures`.

``ncgeom reproduce`` (:mod:`ncgeom.cli.reproduce`) calls :func:`reproduce`: verify (proofs_check) ->
theory data (:mod:`.theory_data`) -> claims (:func:`ncgeom.campaigns.run_claims`) -> figures
(:func:`ncgeom.figures.render_all`) -> report.md (:mod:`.report`). :mod:`.scales` holds the reproduction's
own parameters at each scale of ncgeom.vocabulary.SCALES; :mod:`.stages` the per-stage records.
Importing this package does not import matplotlib, cvxpy or torch; the stages import them when they run.
"""

from ncgeom.reproduce.pipeline import ReproduceResult, reproduce
from ncgeom.reproduce.report import write_gallery, write_report
from ncgeom.reproduce.scales import ScaleParameters, scale_parameters
from ncgeom.reproduce.stages import STAGES, StageOutcome, StageRecord

__all__ = [
    "reproduce",
    "ReproduceResult",
    "StageOutcome",
    "StageRecord",
    "STAGES",
    "write_report",
    "write_gallery",
    "ScaleParameters",
    "scale_parameters",
]
