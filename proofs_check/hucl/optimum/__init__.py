"""The HUCL optimum along beta: which geometry minimizes HUCL past the switch, certified for small C (issue 25).

The population HUCL loss of the latent-class model (docs/theory.md, sections 3-4): C balanced classes of n points on
the unit sphere of R^d, label positives, k negatives from the marginal tilted by e^{beta s}, psi = infonce (tau):

- :mod:`.loss`: the loss of n points per class, batched (torch), and of a collapsed Gram;
- :mod:`.patterns`: names of a configuration (within-class collapse, collisions, pairs, symmetry group);
- :mod:`.search`: multi-start search at one beta (numerical);
- :mod:`.path`: the best geometry along a beta grid, every change refined and classified (continuous / first order);
- :mod:`.split`: the local thresholds of NC among n points per class (split and collapsed blocks), certified;
- :mod:`.intervals`, :mod:`.bnb`, :mod:`.certify`: outward-rounded interval arithmetic, branch and bound, and the
  certified global minimum over collapsed configurations (C = 3, d = 2; attempted for C = 4, d = 3);
- :mod:`.bound`: the collision-aware lower bound (per-anchor Lagrangian bound), numerical and certified;
- :mod:`.training`: trained class means against the optimum at their beta;
- :mod:`.record`: the record ``hucl_optimum.json`` (one owner type, :class:`~.record.HUCLOptimumRecord`) and the
  numbers the docs quote (imported from there, not re-exported: ``python -m proofs_check.hucl.optimum.record``);
- :mod:`.checkers`: the ``ncgeom verify`` rows.

Source: docs/theory.md, section 4 ("HUCL: an open problem", "The HUCL optimum along beta"); jiang2025hard.
"""

from proofs_check.hucl.optimum.bound import RowBound, certify_bound, equiangular_loss, lagrangian_bound, row_loss
from proofs_check.hucl.optimum.certify import (
    Certificate,
    certify_minimum,
    certify_switch,
    parameters_of,
)
from proofs_check.hucl.optimum.loss import collapsed_gram_loss, point_loss
from proofs_check.hucl.optimum.path import BETA_GRID, PAPER_BETAS, OptimumPath, optimum_path
from proofs_check.hucl.optimum.patterns import Pattern, describe, gram_distance, signature
from proofs_check.hucl.optimum.search import OptimumSearch, search_optimum
from proofs_check.hucl.optimum.split import LocalThresholds, certify_threshold, curvature, local_thresholds

__all__ = [
    "BETA_GRID",
    "PAPER_BETAS",
    "Certificate",
    "LocalThresholds",
    "OptimumPath",
    "OptimumSearch",
    "Pattern",
    "RowBound",
    "certify_bound",
    "certify_minimum",
    "certify_switch",
    "certify_threshold",
    "collapsed_gram_loss",
    "curvature",
    "describe",
    "equiangular_loss",
    "gram_distance",
    "lagrangian_bound",
    "local_thresholds",
    "optimum_path",
    "parameters_of",
    "point_loss",
    "row_loss",
    "search_optimum",
    "signature",
]
