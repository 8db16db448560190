"""SCL / HSCL training dynamics: the six panels of the authors' figure, one curve per beta.

Supervised contrastive learning on the Gaussian latent-class data, one curve per beta of the claim-1
sweep (the paper's {0, 2, 5, 10, 30} where swept; beta = 0 is SCL), sphere normalization: (a) sorted class-mean spectrum normalized by its largest value,
log axis, at the last epoch; (b)-(e) the NC conditions unit_norm, zero_sum, equal_inner_product and
within_class (theory.md section 8; 0 at neural collapse) vs epoch; (f) NCC accuracy vs epoch
(test set when the encoder has one, else the training set).
Bears on claim 1 of theory.md section 9 (SCL/HSCL reach NC whatever beta), i.e. on Theorem 2 in
training. Reads the claim-1 sweep (else the claim-6 sweep) under ``<results>/sweeps/``.

Run: ``python figures/fig_scl_panels.py --results DIR --out DIR``.
"""

from __future__ import annotations

from pathlib import Path

from ncgeom.reproduce.panels import dominant_group, first_claim_with_runs, six_panels
from ncgeom.reproduce.plotting import figure_main, save_figure
from ncgeom.reproduce.results import MissingResults

NAME = "fig_scl_panels"
# The runs claim 1 is judged on (its sweep); the claim-6 sweep (a shorter budget) if there is none.
CLAIM_PREFERENCE = (("1",), ("6",))


def plot(results: Path, out: Path) -> list[Path]:
    runs = first_claim_with_runs(results, CLAIM_PREFERENCE, setting=("scl", "hscl"), dataset="gaussian", init="random", positives="label", norm=("ball", "sphere"))
    if not runs:
        raise MissingResults(f"no finished SCL/HSCL run under {results}/sweeps (claims {CLAIM_PREFERENCE})")
    if any(r.get("norm") == "sphere" for r in runs):  # one normalization per figure (sphere if swept)
        runs = [r for r in runs if r.get("norm") == "sphere"]
    runs = dominant_group(runs)
    norm = runs[0].get("norm")
    c = runs[0].get("classes")
    fig = six_panels(runs, plain="SCL", hard="HSCL", title=f"SCL / HSCL, Gaussian data, C = {c}, normalization = {norm} ({len(runs)} runs)")
    return save_figure(fig, out, NAME)


if __name__ == "__main__":
    raise SystemExit(figure_main(plot, __doc__))
