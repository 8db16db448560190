"""HUCL, the paper's open problem: is NC the minimizer of the hard unsupervised loss? Thresholds by dimension.

Over collapsed configurations (every sample of class c at a unit vector v_c in R^d), label positives and
balanced classes, NC (the simplex ETF) minimizes UCL (docs/theory.md, section 4, Theorem 3) but not HUCL for
every hardness beta. This package answers "from which beta on?" as a function of C, d, k = 1, tau = 1
[derived; not a statement of the paper]:

- :mod:`.loss`: the population loss and the weighted batch loss of collapsed configurations;
- :mod:`.jets`: the symmetry reduction of the Hessian at NC (one eigenvalue per block of the symmetric
  group) in float64 or interval arithmetic;
- :mod:`.local`: the local threshold beta_loc(C, d) (NC stops being a local minimizer), two independent
  computations and an interval certificate;
- :mod:`.search`: the global switch beta_sw(C, d) (some configuration beats NC), a multi-start search;
- :mod:`.batch`: the same questions for what training optimizes (detached weights, batch size B);
- :mod:`.exploration`: the multi-start minimum vs beta, and the equiangular slope;
- :mod:`.optimum`: past the switch, the optimal geometry along beta (n points per class, certified for C = 3,
  d = 2; the collision-aware bound);
- :mod:`.checkers`: the ``ncgeom verify`` records.

Results (k = 1, infonce, tau = 1): beta_loc(4, 4) = 0.877374 (lift block: the equiangular path, which needs
d >= C) but beta_loc(4, 3) = 1.285019; in d = C - 1 a first-order switch to a configuration with one
near-antipodal pair comes first (beta_sw(4, 3) = 1.19817). docs/results.md, "HUCL thresholds by
dimension", has the table for C in {3, 4, 10}.

Sources: docs/theory.md section 4 ("HUCL: an open problem") and section 9, claim 3; jiang2025hard.
"""

from proofs_check.hucl.checkers import (
    CASES,
    QUICK_CASES,
    check_batch_estimator_agreement,
    check_batch_thresholds,
    check_global_switch,
    check_harris_bound,
    check_hucl,
    check_local_agreement,
    check_local_certificate,
    check_local_threshold,
    check_nc_closed_form,
    check_switch_consistency,
    check_switch_witness,
    check_threshold_table,
    checks,
)
from proofs_check.hucl.exploration import DEFAULT_BETAS, HUCLExploration, equiangular_slope_at_nc, explore_hucl
from proofs_check.hucl.local import LocalThreshold, certify_local_threshold, local_threshold
from proofs_check.hucl.loss import (
    batch_count_assignments,
    collapsed_batch_loss,
    hucl_collapsed_loss,
    hucl_gram_loss,
)
from proofs_check.hucl.search import SwitchSearch, describe_gram, search_switch

__all__ = [
    "CASES",
    "QUICK_CASES",
    "DEFAULT_BETAS",
    "HUCLExploration",
    "LocalThreshold",
    "SwitchSearch",
    "batch_count_assignments",
    "certify_local_threshold",
    "check_batch_estimator_agreement",
    "check_batch_thresholds",
    "check_global_switch",
    "check_harris_bound",
    "check_hucl",
    "check_local_agreement",
    "check_local_certificate",
    "check_local_threshold",
    "check_nc_closed_form",
    "check_switch_consistency",
    "check_switch_witness",
    "check_threshold_table",
    "checks",
    "collapsed_batch_loss",
    "describe_gram",
    "equiangular_slope_at_nc",
    "explore_hucl",
    "hucl_collapsed_loss",
    "hucl_gram_loss",
    "local_threshold",
    "search_switch",
]
