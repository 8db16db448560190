"""Theory: closed-form values at neural collapse, the theorems' lower bounds, and their hypotheses.

Submodules: ``closed_forms`` (docs/theory.md sections 5 and 7), ``bounds`` (section 4, Theorems 1-3),
``conditions`` (which theorem applies to a given setup, and why not), ``search`` (when no theorem applies: a
multi-start search, on the population losses of :mod:`ncgeom.population`, for a configuration that beats NC).
"""

from ncgeom.theory.bounds import (
    hscl_lower_bound,
    hucl_lower_bound,
    instance_positive_bound,
    scl_lower_bound,
    ucl_lower_bound,
)
from ncgeom.theory.closed_forms import MAX_ENUMERATED_NEGATIVES, batch_nc_value, collision_probability, nc_value
from ncgeom.theory.conditions import Condition, ConditionReport, TheoremApplicability, check_conditions
from ncgeom.theory.search import MAX_SEARCH_TERMS, NCSearchResult, search_beats_nc
from ncgeom.vocabulary import SETTINGS, Setting  # re-exported: the settings the closed forms accept

__all__ = [
    "Setting",
    "SETTINGS",
    "MAX_ENUMERATED_NEGATIVES",
    "collision_probability",
    "nc_value",
    "batch_nc_value",
    "scl_lower_bound",
    "hscl_lower_bound",
    "ucl_lower_bound",
    "hucl_lower_bound",
    "instance_positive_bound",
    "Condition",
    "TheoremApplicability",
    "ConditionReport",
    "check_conditions",
    "search_beats_nc",
    "NCSearchResult",
    "MAX_SEARCH_TERMS",
]
