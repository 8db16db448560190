"""Symbolic (sympy) and exact checks of docs/theory.md sections 2-5, one module per concept.

- ``decide``: how a statement is decided (proven / refuted by a 50-digit witness / undecided);
- ``etf``: the simplex ETF Gram (symbolic C, exact for C = 2..16, ncgeom's float64 frame, existence);
- ``inner_product``: E<z, z-> identity and its bound -1/(C-1) on the ball (Theorem 2);
- ``psi``: convexity and monotonicity of psi_k for small k, and ncgeom.losses against the formulas;
- ``collision``: the collision probability at NC from the tilted ETF law;
- ``closed_forms``: the section 5 closed forms against ncgeom.population and ncgeom.theory.nc_value.

:func:`checks` lists the zero-argument checkers that ``ncgeom verify`` runs.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np

from ncgeom.vocabulary import PSI_NAMES
from proofs_check.records import CheckResult
from proofs_check.symbolic.closed_forms import (
    binomial_check_points,
    binomial_closed_form,
    check_closed_form_binomial,
    check_instance_positive_example,
    check_nc_value,
    check_scl_closed_forms,
    nc_check_points,
    nc_reference_value,
    pattern_value,
)
from proofs_check.symbolic.collision import (
    check_collision_probability,
    check_collision_probability_symbolic,
    negative_class_law,
    theory_collision_probability,
)
from proofs_check.symbolic.etf import (
    check_etf_existence,
    check_etf_gram_exact,
    check_etf_gram_symbolic,
    check_simplex_etf_gram,
    exact_etf_gram,
)
from proofs_check.symbolic.inner_product import check_negative_similarity_bound, check_negative_similarity_identity
from proofs_check.symbolic.psi import check_psi_convex, check_psi_implementation, check_psi_monotone, psi_expression

__all__ = [
    "SEED",
    "checks",
    "exact_etf_gram",
    "psi_expression",
    "pattern_value",
    "binomial_closed_form",
    "binomial_check_points",
    "nc_reference_value",
    "nc_check_points",
    "negative_class_law",
    "theory_collision_probability",
    "check_etf_gram_symbolic",
    "check_etf_gram_exact",
    "check_etf_existence",
    "check_simplex_etf_gram",
    "check_negative_similarity_identity",
    "check_negative_similarity_bound",
    "check_psi_convex",
    "check_psi_monotone",
    "check_psi_implementation",
    "check_closed_form_binomial",
    "check_scl_closed_forms",
    "check_nc_value",
    "check_instance_positive_example",
    "check_collision_probability_symbolic",
    "check_collision_probability",
]

SEED = 20251129
"""Seed of the Generators passed to the checkers that draw random points (rotations, test points)."""

def checks(*, quick: bool) -> list[Callable[[], CheckResult]]:
    """Zero-argument checkers for ``ncgeom verify``; ``quick`` keeps the total to a few seconds.

    quick: psi properties and closed forms for k <= 2, a few nc_value / population points; full: k <= 3
    (closed forms k <= 4), the full nc_value and population grids, C up to 5 for the symbolic class-mean
    identities.
    """
    p = functools.partial
    gen = lambda i: np.random.default_rng([SEED, i])  # noqa: E731
    ks = (1, 2) if quick else (1, 2, 3)
    sizes = (2, 3, 4) if quick else (2, 3, 4, 5)
    out: list[Callable[[], CheckResult]] = [
        check_etf_gram_symbolic,
        p(check_etf_gram_exact, sizes=range(2, 17), charpoly_max=5 if quick else 16),
        p(check_etf_existence, sizes=range(2, 11) if quick else range(2, 17)),
        p(check_simplex_etf_gram, sizes=range(2, 11) if quick else range(2, 17), rng=gen(0)),
        p(check_negative_similarity_identity, sizes=sizes, dim=2 if quick else 3),
        p(check_negative_similarity_bound, sizes=sizes, dim=2 if quick else 3),
    ]
    for name in PSI_NAMES:
        for k in ks:
            out += [p(check_psi_convex, name, k=k), p(check_psi_monotone, name, k=k)]
        out.append(p(check_psi_implementation, name, k=2 if quick else 4, rng=gen(1)))
        out += [p(check_closed_form_binomial, name, k=k, points=binomial_check_points(quick=quick)) for k in ((2,) if quick else (1, 2, 3, 4))]
    out += [
        p(check_scl_closed_forms, ks=(1, 2, 3)),
        p(check_collision_probability_symbolic, sizes=(2, 3) if quick else (2, 3, 4, 5, 6)),
        check_collision_probability,
        p(check_nc_value, points=None if quick else nc_check_points(quick=False)),
        p(check_instance_positive_example, sizes=(2, 3, 10) if quick else range(2, 13)),
    ]
    return out

