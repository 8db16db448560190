"""Ablation of i.i.d. negatives (Theorem 1 hypothesis 3, Theorem 2 hypothesis 6, Theorem 3 hypothesis 6).

Negative laws. Given an anchor x, let q(. | x) be the plain law of one negative (SCL: the other classes' points;
UCL: the marginal, docs/theory.md, section 3). The k negatives are drawn from the mixture

.. math::

    P_\\rho(y_1, \\dots, y_k \\mid x) = (1 - \\rho) \\prod_i q(y_i \\mid x) + \\rho\\, P_F(y_1, \\dots, y_k \\mid x),
    \\qquad \\rho \\in [0, 1],

so rho = 0 is the i.i.d. law of the theorems and rho measures the distance from it. Every family F keeps each
negative's marginal law equal to q (so every other hypothesis stays true):

- ``same-class``: the class c' of the negatives is drawn once, pi(c' | x) = q(class c' | x), then the k negatives
  are i.i.d. from p(. | c'): P_F = sum_{c'} pi(c' | x) prod_i p(y_i | c');
- ``copies``: one negative y ~ q, repeated k times (comonotone: the most positively dependent law);
- ``without-replacement``: k distinct points, uniformly (the eligible points must have equal masses);
- ``antithetic`` (k = 2, Theorem 1 only): the eligible points, of equal masses, sorted by similarity to the anchor;
  rank r is paired with rank n - 1 - r (countermonotone: the most negatively dependent law).

The hard law is P_rho reweighted by prod_i eta(<z, z_i^->) (the density of docs/theory.md, section 4, Theorem 1,
proof step 2, on the correlated law): Q_rho(y | x) = P_rho(y | x) prod_i eta(s_{x y_i}) / Z_rho(x). At rho = 0
it is the i.i.d. tilted law of the paper.

Theorem 1 (exact). L_hard - L_plain = E_x Cov_{P_rho}(g, h) / Z_rho(x), g = psi(S - s^+), h = prod_i eta(S_i),
and Harris' inequality (the proof's step 3) is what fails without a product law. Symmetrizing g (every family is
exchangeable and h is symmetric), the bound holds for every psi (R1) and every non-decreasing eta as soon as the
sorted rank tuple's law satisfies Cov(1_U, 1_V) >= 0 for every pair of up-sets U, V of the lattice of sorted
tuples (association): every non-decreasing function is a constant plus a non-negative combination of up-set
indicators (:func:`association_defect`, exact integers). ``copies`` passes that check (and is comonotone at
rho = 1); ``without-replacement`` is associated at rho = 1 (the sorted sample is uniform on a sublattice: MTP2, so
FKG applies) and for k = 2, but its mixtures with k >= 3 are not; ``same-class`` and ``antithetic`` are not.
:func:`counterexamples` gives the smallest finite models with L_hard < L_plain for the last three (3 points for
UCL, 4 for SCL), in ``fractions.Fraction``, and where along rho they fail (:func:`failure_threshold`).

Theorems 2 and 3 (numerical, plus the proof remark of docs/theory.md, section 4). For SCL the proof needs only
each negative's marginal law; for UCL it needs, given the classes, within-class draws independent of (x, x^+) and
a class law invariant under relabelling: all three families qualify, so NC minimizes L_SCL and L_UCL for every
rho. HSCL also uses Theorem 1. :func:`search` checks all three settings by multi-start L-BFGS (float64) over
collapsed configurations (one unit vector per class) and over two points per class, d = C - 1, label positives,
balanced classes; :func:`correlated_population_loss` recomputes the winners from the definition (numpy loops).

Modules: :mod:`.laws` (the laws P_rho on ordered k-tuples), :mod:`.exact` (exact losses of finite models, the
counterexamples and their rho thresholds), :mod:`.association` (the up-set covariance check), :mod:`.population`
(population losses: the reference and the batched form), :mod:`.search` (the multi-start search), :mod:`.sequential`
(the other definition of hard negatives without replacement: tilt the marginal, then draw one after another) and
:mod:`.records` (the ``ncgeom verify --ablations`` records); this package re-exports their public names.

Sources: docs/theory.md, section 4 (Theorems 1-3 and their proofs); jiang2025hard, Theorems 1-3; harris1960.
"""

from proofs_check.ablations.negatives.association import (
    association_defect,
    association_table,
    sorted_rank_law,
    upsets,
)
from proofs_check.ablations.negatives.exact import (
    correlated_model_loss,
    counterexamples,
    failure_threshold,
    max_hinge_psi,
)
from proofs_check.ablations.negatives.laws import (
    FAMILIES,
    SEARCH_FAMILIES,
    SEED,
    START_NOISE,
    VALUE_TOL,
    require_rho,
    tuple_law,
)
from proofs_check.ablations.negatives.population import batched_loss, correlated_population_loss, law_tables
from proofs_check.ablations.negatives.records import ablations
from proofs_check.ablations.negatives.search import search
from proofs_check.ablations.negatives.sequential import sequential_check, sequential_model_loss, successive_law

__all__ = [
    "FAMILIES",
    "SEARCH_FAMILIES",
    "SEED",
    "VALUE_TOL",
    "START_NOISE",
    "require_rho",
    "tuple_law",
    "max_hinge_psi",
    "correlated_model_loss",
    "failure_threshold",
    "counterexamples",
    "sorted_rank_law",
    "upsets",
    "association_defect",
    "association_table",
    "correlated_population_loss",
    "law_tables",
    "batched_loss",
    "search",
    "successive_law",
    "sequential_model_loss",
    "sequential_check",
    "ablations",
]

