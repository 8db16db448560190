"""The hypothesis-ablation registry (issue "hypothesis ablation"; docs/theory.md, section 4; docs/verify.md, "Ablations").

Each case module ``proofs_check.ablations.<name>`` (in the order of :data:`CASES`) exposes
``ablations(*, quick: bool) -> list[AblationResult]``: for one or more numbered hypotheses of Theorems 1-3, the
violation tried, the conclusion checked there, the result ("holds" or "fails": a result, not an error) and its
evidence label. :data:`COVERAGE` says which case studies each hypothesis; :data:`GAPS` lists the hypotheses
without a study yet (documented in docs/results.md, "Hypothesis ablations"); a test checks that together they
cover every hypothesis that docs/theory.md, section 4 numbers, and that each case reports what it claims.

Case modules are imported lazily (:func:`load_case`), so ``import proofs_check.ablations`` stays light.
:func:`run_ablations` raises on a missing or crashing case unless ``on_error`` is given; ``ncgeom verify
--ablations`` passes one, prints the error and exits 1.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from types import ModuleType

from proofs_check.ablations.records import ABLATION_RESULTS, THEOREMS, AblationResult

__all__ = ["CASES", "COVERAGE", "GAPS", "AblationResult", "ABLATION_RESULTS", "THEOREMS", "load_case",
           "run_ablations"]

#: Case modules of proofs_check.ablations, in run order.
CASES: tuple[str, ...] = ("losses", "imbalance", "dimension", "positives", "negatives")

#: Hypothesis id "<theorem>.<number>" (docs/theory.md, section 4) -> the cases that ablate it.
COVERAGE: dict[str, tuple[str, ...]] = {
    "1.1": ("losses",),  # psi argument-wise non-decreasing
    "1.2": ("losses",),  # eta non-decreasing
    "1.3": ("negatives",),  # i.i.d. negatives given the anchor
    "2.1": ("imbalance",),  # balanced classes
    "2.2": ("losses",),  # ball or sphere
    "2.3": ("dimension",),  # d >= C - 1
    "2.4": ("losses",),  # psi convex and non-decreasing
    "2.5": ("losses",),  # eta non-decreasing (HSCL)
    "2.6": ("negatives",),  # i.i.d. negatives given the anchor
    "3.1": ("imbalance",),
    "3.2": ("losses",),
    "3.3": ("dimension",),
    "3.4": ("losses",),
    "3.5": ("positives",),  # label-based positives
    "3.6": ("negatives",),  # i.i.d. negatives from the marginal
}

#: Hypotheses with no ablation yet, and why (each documented in docs/results.md, "Hypothesis ablations").
GAPS: dict[str, str] = {
    "2.7": "not a hypothesis (the statement says conditional independence of positives is not needed)",
}


def load_case(name: str) -> ModuleType:
    """Import ``proofs_check.ablations.<name>``; ValueError for a name not in CASES, ImportError if it is
    missing, TypeError if it has no ``ablations(*, quick)`` function."""
    if name not in CASES:
        raise ValueError(f"case must be one of {', '.join(CASES)}, got {name!r}")
    module = importlib.import_module(f"{__name__}.{name}")
    if not callable(getattr(module, "ablations", None)):
        raise TypeError(f"{module.__name__} has no ablations(*, quick) function")
    return module


def run_ablations(*, quick: bool = True, cases: Sequence[str] = CASES,
                  on_error: Callable[[str, BaseException], None] | None = None) -> list[AblationResult]:
    """Run the ablations of every case in ``cases`` (default :data:`CASES`, in order).

    Parameters
    ----------
    quick : bool
        Each case's quick variant (True, the default of ``ncgeom verify --ablations``) or the full one.
    cases : sequence of str
        A subset of CASES.
    on_error : callable, optional
        Called with (case, exception) when a case is missing, crashes or returns something other than a list of
        AblationResult; the run then goes on with the next case. None: the exception propagates.
    """
    for name in cases:
        if name not in CASES:
            raise ValueError(f"cases must be a subset of {', '.join(CASES)}, got {name!r}")
    results: list[AblationResult] = []
    for name in cases:
        try:
            found = list(load_case(name).ablations(quick=bool(quick)))
            bad = [type(r).__name__ for r in found if not isinstance(r, AblationResult)]
            if bad:
                raise TypeError(f"{name}.ablations() returned {', '.join(sorted(set(bad)))}, not AblationResult")
        except Exception as exc:  # noqa: BLE001 - reported through on_error when given
            if on_error is None:
                raise
            on_error(name, exc)
            continue
        results.extend(found)
    return results
