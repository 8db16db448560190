"""The figure registry: every figure of the reproduction, its module, caption and what it bears on.

Each entry names a module ``ncgeom.figures.<name>`` exposing ``plot(results: Path, out: Path) ->
Rendered`` (and a ``__main__`` taking ``--results DIR --out DIR``); the pipeline renders them after
the data stages and the report shows each PNG with its caption: the static :attr:`FigureSpec.caption`
followed by the sentences computed from the data drawn (:attr:`Rendered.details`: the scale, the seeds
per grid point and every hyperparameter that differs between the curves). ``claims`` are the claim numbers of
docs/theory.md, section 9; ``statements`` the docs/theory.md statements the figure shows.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

__all__ = ["FigureSpec", "Rendered", "FIGURES", "figure_names", "get_figure"]


@dataclass(frozen=True)
class FigureSpec:
    """One registered figure.

    name : str               module name (``ncgeom.figures.<name>``) and file stem of the images
    title : str              short title used in the report
    caption : str            what the figure shows and how to read it
    claims : tuple[str, ...] claim numbers of docs/theory.md, section 9 ("1".."8")
    statements : tuple       docs/theory.md statements shown (e.g. "Theorem 1", "section 5")
    data : tuple             the pipeline stages whose outputs the figure reads
    """

    name: str
    title: str
    caption: str
    claims: tuple[str, ...] = ()
    statements: tuple[str, ...] = ()
    data: tuple[str, ...] = ("sweeps",)

    def full_caption(self, details: str = "") -> str:
        """The caption shown with a drawing: the static text, then the ``details`` computed from the data
        drawn (:attr:`Rendered.details`: scale, seeds, the hyperparameters that differ between curves)."""
        return f"{self.caption} {details}".strip()


@dataclass(frozen=True)
class Rendered:
    """What drawing one figure produced (the return value of every figure module's ``plot``).

    files : tuple[Path, ...]  the image files written (PNG, PDF ...)
    details : str             the computed part of the caption (:func:`ncgeom.figures.runs.describe_runs`
                              for the run-based figures, the reproduction's scale for the theory figures)
    """

    files: tuple[Path, ...]
    details: str


FIGURES: tuple[FigureSpec, ...] = (
    FigureSpec(
        "fig_scl_panels",
        "SCL / HSCL training dynamics",
        "Supervised contrastive learning on the Gaussian data (claim-1 sweep, sphere), one curve per beta "
        "(beta = 0 is SCL). (a) sorted class-mean covariance spectrum, normalized by its largest value, log "
        "axis, at the last epoch (flat = no dimensional collapse); (b)-(e) the NC conditions of docs/theory.md, "
        "section 8 (unit_norm, zero_sum, equal_inner_product, within_class; 0 at neural collapse, log axis) "
        "vs epoch; (f) nearest-class-mean accuracy vs epoch (test set when the encoder has one, else "
        "training set). Claim 1 expects every curve of (b)-(e) to fall towards 0 whatever beta.",
        claims=("1",),
        statements=("Theorem 2", "section 8"),
    ),
    FigureSpec(
        "fig_ucl_panels",
        "UCL / HUCL training dynamics",
        "Unsupervised contrastive learning (label-based positives) on the Gaussian data at a fixed budget "
        "(claim-6 sweep), one curve per beta (beta = 0 is UCL); same six panels as the SCL figure. Theorem 3 "
        "makes NC optimal for UCL; claim 6 expects an optimal beta near 5 and, above it, worse NC metrics "
        "and a collapsing spectrum; claim 3 expects HUCL not to reach NC.",
        claims=("6", "3"),
        statements=("Theorem 3", "HUCL open problem"),
    ),
    FigureSpec(
        "fig_hardness",
        "Hardness vs distance to NC at a fixed budget",
        "Claim-6 sweep (fixed, short training budget): final distance to the simplex ETF (left) and "
        "smallest normalized class-mean eigenvalue, the dimensional-collapse indicator (right, log axis), "
        "vs beta for supervised (HSCL; beta = 0 is SCL) and unsupervised (HUCL; beta = 0 is UCL) training. "
        "Claim 6 expects the supervised curve to decrease with beta and the unsupervised one to have an "
        "interior minimum near beta = 5, with more dimensional collapse above it.",
        claims=("6",),
        statements=("Theorem 2", "Theorem 3", "HUCL open problem"),
    ),
    FigureSpec(
        "fig_normalization",
        "Feature normalization and dimensional collapse",
        "Effect of the feature normalization (none / ball / sphere) on the final class-mean spectrum "
        "(top row, log axis: a tail orders of magnitude below 1 is dimensional collapse) and, vs epoch, on "
        "the ETF distance, NC1 and RankMe (rows 2-4), for each setting and encoder trained. Claim 4 "
        "expects dimensional collapse without normalization, with or without hard negatives.",
        claims=("4",),
        statements=("section 8 spectrum",),
    ),
    FigureSpec(
        "fig_ucl_positives",
        "UCL: label-based vs Gaussian-noise positives",
        "UCL with positives drawn from the anchor's class (conditionally independent) vs positives made "
        "by additive Gaussian noise x+ = x + sigma_p eps. Panels: ETF distance, within-class spread, NCC "
        "accuracy vs epoch and the final spectrum. Claim 2 expects NC only with label-based positives "
        "(Theorem 3 needs conditional independence).",
        claims=("2",),
        statements=("Theorem 3",),
    ),
    FigureSpec(
        "fig_hucl_optimum",
        "HUCL optimal geometry along beta",
        "Left: for C = 3, k = 1, infonce, tau = 1, the HUCL population loss vs beta: NC's value, the Theorem 1 + 3 "
        "bound L_UCL(NC), the collision-aware bound B(beta), the certified minimum over collapsed configurations "
        "in R^2 (interval branch and bound, to 1e-7; markers) and the best configuration found in d = 2 over n in "
        "{1, 2, 3} points per class and in d = 3. Middle: how far the optimum found lies below NC, L(NC) - L*, for "
        "every (C, d) computed (solid d = C - 1, dashed d = C), the changes of the optimal geometry marked (x: "
        "continuous, o: first order). Right: how far it lies above the bound, L* - B (0 where the bound is "
        "attained). Bears on the HUCL open problem and claim 3.",
        claims=("3",),
        statements=("HUCL open problem",),
        data=("theory",),
    ),
    FigureSpec(
        "fig_hucl_etf",
        "HUCL: distance to the simplex ETF vs beta",
        "Left: final ETF distance of the trained HUCL runs of the claim-3 sweep (beta = 0 is UCL) vs beta, "
        "with the SCL/HSCL runs of the claim-1 sweep for reference. Middle and right: the proofs_check "
        "exploration of the HUCL population minimum over collapsed configurations in R^d at the runs' C and d "
        "(C = 10, d = C - 1 = 9 in the shipped spec): minimum found vs the loss at NC, and the minimizer's "
        "distance to the ETF, vs beta. Every panel marks, for that (C, d), k = 1 and tau = 1, the local "
        "threshold above which NC is no longer a local minimizer (dotted) and the global switch above which a "
        "collapsed configuration beats NC (dash-dotted). Claim 3 expects the deviation from the ETF to grow with "
        "beta; docs/theory.md lists NC-optimality of HUCL as open.",
        claims=("3",),
        statements=("HUCL open problem", "Theorem 1"),
        data=("sweeps", "theory"),
    ),
    FigureSpec(
        "fig_hucl_thresholds",
        "HUCL thresholds by dimension",
        "Left: smallest eigenvalue of the Hessian of the HUCL population loss at NC over collapsed configurations "
        "in R^d, modulo rotations, vs beta (k = 1, infonce, tau = 1), for C in {3, 4, 10}; solid d = C - 1, dashed "
        "d = C. x: local threshold (NC stops being a local minimizer); o: global switch (the smallest beta at which "
        "a multi-start search found a configuration below NC). In d = C the threshold is the equiangular direction, "
        "which needs d >= C; in d = C - 1 (the claim-3 runs) it is later, and a configuration with a near-antipodal "
        "pair beats NC first. Right: the thresholds per (C, d), and those of the claim-3 batch objective (detached "
        "weights, the runs' batch size) when computed.",
        claims=("3",),
        statements=("HUCL open problem",),
        data=("theory",),
    ),
    FigureSpec(
        "fig_ablation_dimension",
        "Below C - 1 dimensions: gap to the ETF bound",
        "Best population loss over collapsed configurations of C unit class means in R^d minus the ETF bound of "
        "Theorems 2 (SCL, HSCL beta = 5) and 3 (UCL) (infonce, k = 1, tau = 1), vs d, one line per C; d < C - 1 "
        "violates hypothesis 3 and the gap is positive (the bound is not attained), d = C - 1 is the control (gap 0, "
        "the ETF). Markers: the spherical code the winner matched up to permutation (o regular C-gon, s "
        "cross-polytope, ^ triangular bipyramid, P orthogonal sum of lower simplices, D simplex ETF, x none).",
        statements=("Theorem 2", "Theorem 3"),
        data=("theory",),
    ),
    FigureSpec(
        "fig_ablation_imbalance",
        "Imbalanced classes: gap to the ETF and minority collapse",
        "Prior (r, 1, ..., 1)/(r + C - 1), infonce, k = 1, tau = 1, collapsed configurations (class means on the unit "
        "sphere). Left: best population loss minus the loss at the ETF vs the imbalance ratio r, one line per "
        "hardness (SCL = beta 0, HSCL beta 1 and 5) and UCL; < 0 for every r > 1 (balanced classes, hypothesis 1 of "
        "Theorems 2 and 3, is necessary: the ETF is not even a critical point there). Right: the smallest "
        "minority-minority inner product of the winner (1: the minority classes merged), with the bisected merge "
        "ratio (o) and the closed-form local one for beta = 0 (x).",
        statements=("Theorem 2", "Theorem 3"),
        data=("theory",),
    ),
    FigureSpec(
        "fig_nc_values",
        "Loss at neural collapse vs beta",
        "Closed-form population loss at NC (docs/theory.md, section 5) for SCL, HSCL, UCL and HUCL vs beta, "
        "for each number of negatives k, with the collision probability pi_beta of HUCL at NC (right). "
        "SCL, HSCL and UCL do not depend on beta; HUCL rises with pi_beta, so Theorem 1's bound "
        "L_HUCL >= L_UCL(NC) is not tight at NC.",
        statements=("section 5", "HUCL open problem", "Theorem 2", "Theorem 3"),
        data=("theory",),
    ),
    FigureSpec(
        "fig_harris_gap",
        "Harris gap over random representations",
        "Theorem 1: L_HSCL - L_SCL and L_HUCL - L_UCL (exact population losses of random finite latent "
        "models, ncgeom.population) vs beta; each thin line is one random model, the thick line the "
        "median. Every value must be >= 0 (up to rounding, dashed line), and 0 at beta = 0.",
        statements=("Theorem 1",),
        data=("theory",),
    ),
    FigureSpec(
        "fig_certificates",
        "Convex certificates vs closed form",
        "Optimum of the convex Gram-matrix relaxation (docs/theory.md, section 6, cvxpy) against the closed-form "
        "value at NC (section 5), one point per (setting, C, k) case; points must lie on the diagonal. "
        "Right: |optimum - closed form|, duality gap and distance of the optimizer to the ETF Gram (log "
        "axis; hollow: psi not strictly convex, e.g. triplet, so the minimizer need not be the ETF).",
        statements=("section 6", "Theorem 2", "Theorem 3"),
        data=("theory",),
    ),
    FigureSpec(
        "fig_init",
        "Near-NC vs random initialization",
        "ETF distance and smallest normalized spectrum value vs epoch starting from a near-NC "
        "initialization (solid) or a random one (dashed), for SCL/HSCL and UCL/HUCL at several beta. "
        "Not at equal learning rate: the near-NC runs (claim-7 sweep) use lr 0.05, the random-init runs "
        "(claim-6 sweep, else claim 1 or 3) their own sweep's lr (0.01 for claim 6); the legend and title give it. "
        "Claim 7 expects SCL/HSCL to stay at NC and HUCL with beta in {10, 30} to drift away with "
        "dimensional collapse.",
        claims=("7",),
        statements=("Theorem 2", "HUCL open problem"),
    ),
    FigureSpec(
        "fig_batch_size",
        "Batch size",
        "Final ETF distance, within-class spread and NCC accuracy vs batch size (32..512) for SCL/HSCL. "
        "Claim 8 expects NC for batch sizes 64..512 and batch 32 to hinder it when C is large.",
        claims=("8",),
        statements=("section 7",),
    ),
    FigureSpec(
        "fig_digits",
        "Real data (scikit-learn digits): NCC accuracy vs beta",
        "Nearest-class-mean test accuracy on the digits data (8x8 images, 10 classes; the only real data "
        "shipped offline) vs beta for SCL/HSCL and UCL/HUCL, in the paper's DC-prone setup where "
        "available (ball, tau = 1, d = C-1), and the final distance to the ETF. Claim 5 expects moderate "
        "beta (5, 10) to improve accuracy by over 40 points over beta = 0.",
        claims=("5",),
        statements=("section 8 ncc_accuracy",),
    ),
    FigureSpec(
        "fig_claim5_cpu",
        "Claim 5 on a CPU-sized setup: NCC accuracy vs beta and the class-mean spectrum",
        "The claim-5 setup where test accuracy is not saturated (spec claim5_cpu_mixture: Gaussian mixture with "
        "C = 100 classes, MLP, ball, tau = 1, d = C-1): final nearest-class-mean test accuracy vs beta for "
        "SCL/HSCL and UCL/HUCL, test accuracy vs epoch, and the final sorted class-mean spectrum (log axis; a tail "
        "far below 1 is dimensional collapse). Claim 5 expects beta = 5, 10 to improve accuracy by over 40 "
        "points over beta = 0.",
        claims=("5cpu",),
        statements=("section 8 ncc_accuracy", "section 8 spectrum"),
    ),
)


def figure_names() -> tuple[str, ...]:
    """Names of all registered figures, in report order."""
    return tuple(spec.name for spec in FIGURES)


def get_figure(name: str) -> FigureSpec:
    """The registered figure called ``name``; ValueError listing the names otherwise."""
    for spec in FIGURES:
        if spec.name == name:
            return spec
    raise ValueError(f"figure must be one of {', '.join(figure_names())}, got {name!r}")
