"""The class of a run and the label of a cell (docs/theory.md, section 9, "Phase maps").

A **run** is classified by the run-level rule: its final metrics by :func:`ncgeom.metrics.outcome.classify_geometry`
(NC, DC, neither, undefined; the claims' thresholds NC_ETF, NC_WITHIN, DC_SPECTRUM), and its convergence by
:mod:`ncgeom.runs.convergence` (the summary's ``convergence``):

- a map that decides **end states** (``decide = "converged"``, the default) calls a run that has not converged
  "not converged": it decides nothing, and is never coerced into NC or DC;
- a map that decides **at the budget** (``decide = "budget"``: unnormalized features, whose loss has no minimizer,
  never converge; claim 4's rule) reads every run at its final epoch, and reports how many converged;
- a diverged run is "not converged" under both rules.

A **cell** (a grid point and its seeds) reports the share of its seeds in each class; its **label** is the class all
its seeds have, or ``"mixed"`` when they differ (the claims' "every seed" rule: a cell whose seeds disagree is on a
boundary).

>>> cell_label(["NC", "NC", "NC"]), cell_label(["NC", "DC", "NC"])
('NC', 'mixed')
"""

from __future__ import annotations

from collections.abc import Sequence

from ncgeom.metrics.outcome import classify_geometry
from ncgeom.runs.records import RunSummary
from ncgeom.validate import require_choice
from ncgeom.vocabulary import MAP_DECISIONS, RUN_CLASSES, CellLabel, MapDecision, RunClass

__all__ = ["run_class", "cell_label", "class_counts"]


def run_class(summary: RunSummary, *, decide: MapDecision) -> RunClass:
    """The class of a finished run under the map's rule ``decide`` (module docstring)."""
    decide = require_choice("decide", decide, MAP_DECISIONS)
    if summary.status == "diverged":
        return "not converged"
    if decide == "converged" and summary.convergence != "converged":
        return "not converged"
    metrics = summary.final.metrics
    if metrics is None:
        return "undefined"
    return classify_geometry(metrics, dim=summary.config.embedding_dim, num_classes=summary.config.classes)


def cell_label(classes: Sequence[RunClass]) -> CellLabel:
    """The class every run of a cell has, or "mixed" (module docstring); ValueError for an empty cell."""
    if not classes:
        raise ValueError("classes must hold the class of at least one run")
    for c in classes:
        require_choice("run class", c, RUN_CLASSES)
    first = classes[0]
    return first if all(c == first for c in classes) else "mixed"


def class_counts(classes: Sequence[RunClass]) -> dict[str, int]:
    """How many runs of a cell are in each class (the classes with none left out), in :data:`RUN_CLASSES` order."""
    return {c: n for c in RUN_CLASSES if (n := sum(x == c for x in classes))}
