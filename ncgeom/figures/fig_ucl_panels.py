"""UCL / HUCL training dynamics: the six panels of the authors' figure, one curve per beta.

Unsupervised contrastive learning (label-based positives) on the Gaussian data, one curve per beta of
the claim-6 sweep (fixed budget; the paper's {0, 2, 5, 10, 30} where swept; beta = 0 is UCL): (a) sorted class-mean spectrum normalized by its largest value,
log axis, at the last epoch; (b)-(e) the NC conditions unit_norm, zero_sum, equal_inner_product and
within_class (docs/theory.md, section 8; 0 at neural collapse) vs epoch; (f) NCC accuracy vs epoch
(test set when the encoder has one, else the training set). Each curve is the mean over the seeds of
one grid point with a min-max band; the caption states the scale, the seeds and what differs between curves.
Bears on claim 6 (unsupervised: an optimal beta near 5, then worse NC metrics and more DC) and
claim 3 (HUCL does not reach NC) of docs/theory.md, section 9, and on Theorem 3 and the HUCL open problem.
Reads the claim-6 sweep (else the claim-3 sweep) under ``<results>/sweeps/``.

Run: ``python -m ncgeom.figures.fig_ucl_panels --results DIR --out DIR``.
"""

from __future__ import annotations

from pathlib import Path

from ncgeom.figures.panels import training_panels
from ncgeom.figures.registry import Rendered
from ncgeom.figures.style import figure_main

__all__ = ["NAME", "plot"]

NAME = "fig_ucl_panels"
# Preferred sweeps: claim 6 (fixed short budget, the rate of approach to NC is visible), else claim 3.
CLAIM_PREFERENCE = (("6",), ("3",))


def plot(results: Path, out: Path) -> Rendered:
    return training_panels(results, out, NAME, settings=("ucl", "hucl"), preference=CLAIM_PREFERENCE, plain="UCL", hard="HUCL",
                           what=" (label positives)", prefer_sphere=False)


if __name__ == "__main__":
    raise SystemExit(figure_main(plot, __doc__))
