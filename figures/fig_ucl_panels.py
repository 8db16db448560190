"""UCL / HUCL training dynamics: the six panels of the authors' figure, one curve per beta.

Unsupervised contrastive learning (label-based positives) on the Gaussian data, one curve per beta of
the claim-6 sweep (fixed budget; the paper's {0, 2, 5, 10, 30} where swept; beta = 0 is UCL): (a) sorted class-mean spectrum normalized by its largest value,
log axis, at the last epoch; (b)-(e) the NC conditions unit_norm, zero_sum, equal_inner_product and
within_class (theory.md section 8; 0 at neural collapse) vs epoch; (f) NCC accuracy vs epoch
(test set when the encoder has one, else the training set).
Bears on claim 6 (unsupervised: an optimal beta near 5, then worse NC metrics and more DC) and
claim 3 (HUCL does not reach NC) of theory.md section 9, and on Theorem 3 and the HUCL open problem.
Reads the claim-6 sweep (else the claim-3 sweep) under ``<results>/sweeps/``.

Run: ``python figures/fig_ucl_panels.py --results DIR --out DIR``.
"""

from __future__ import annotations

from pathlib import Path

from ncgeom.reproduce.panels import dominant_group, first_claim_with_runs, six_panels
from ncgeom.reproduce.plotting import figure_main, save_figure
from ncgeom.reproduce.results import MissingResults

NAME = "fig_ucl_panels"
# Preferred sweeps: claim 6 (fixed short budget, the rate of approach to NC is visible), else claim 3.
CLAIM_PREFERENCE = (("6",), ("3",))


def plot(results: Path, out: Path) -> list[Path]:
    runs = first_claim_with_runs(results, CLAIM_PREFERENCE, setting=("ucl", "hucl"), dataset="gaussian", init="random", positives="label", norm=("ball", "sphere"))
    if not runs:
        raise MissingResults(f"no finished UCL/HUCL run under {results}/sweeps (claims {CLAIM_PREFERENCE})")
    runs = dominant_group(runs)
    norm = runs[0].get("norm")
    c = runs[0].get("classes")
    fig = six_panels(runs, plain="UCL", hard="HUCL", title=f"UCL / HUCL (label positives), Gaussian data, C = {c}, normalization = {norm} ({len(runs)} runs)")
    return save_figure(fig, out, NAME)


if __name__ == "__main__":
    raise SystemExit(figure_main(plot, __doc__))
