"""SCL / HSCL training dynamics: the six panels of the authors' figure, one curve per beta.

Supervised contrastive learning on the Gaussian latent-class data, one curve per beta of the claim-1
sweep (the paper's {0, 2, 5, 10, 30} where swept; beta = 0 is SCL), sphere normalization: (a) sorted class-mean spectrum normalized by its largest value,
log axis, at the last epoch; (b)-(e) the NC conditions unit_norm, zero_sum, equal_inner_product and
within_class (docs/theory.md, section 8; 0 at neural collapse) vs epoch; (f) NCC accuracy vs epoch
(test set when the encoder has one, else the training set). Each curve is the mean over the seeds of
one grid point with a min-max band; the caption states the scale, the seeds and what differs between curves.
Bears on claim 1 of docs/theory.md, section 9 (SCL/HSCL reach NC whatever beta), i.e. on Theorem 2 in
training. Reads the claim-1 sweep (else the claim-6 sweep) under ``<results>/sweeps/``.

Run: ``python -m ncgeom.figures.fig_scl_panels --results DIR --out DIR``.
"""

from __future__ import annotations

from pathlib import Path

from ncgeom.figures.panels import training_panels
from ncgeom.figures.registry import Rendered
from ncgeom.figures.style import figure_main

__all__ = ["NAME", "plot"]

NAME = "fig_scl_panels"
# The runs claim 1 is judged on (its sweep); the claim-6 sweep (a shorter budget) if there is none.
CLAIM_PREFERENCE = (("1",), ("6",))


def plot(results: Path, out: Path) -> Rendered:
    return training_panels(results, out, NAME, settings=("scl", "hscl"), preference=CLAIM_PREFERENCE, plain="SCL", hard="HSCL",
                           what="", prefer_sphere=True)


if __name__ == "__main__":
    raise SystemExit(figure_main(plot, __doc__))
