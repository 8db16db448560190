"""The immutable record every proofs_check checker returns."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any, ParamSpec

from ncgeom.validate import require_keys
from ncgeom.vocabulary import CHECK_STATUSES, EVIDENCE, CheckStatus, Evidence

__all__ = ["Status", "STATUSES", "CheckResult", "timed"]

_P = ParamSpec("_P")

#: The status of a check: the vocabulary's word (ncgeom.vocabulary.CheckStatus), kept here under its former name.
#: "info" is for exploration (e.g. the HUCL open problem): numbers reported, no verdict.
Status = CheckStatus
STATUSES: tuple[str, ...] = CHECK_STATUSES


@dataclass(frozen=True)
class CheckResult:
    """Outcome of one check.

    name : str          stable identifier, e.g. ``etf_gram_eigenvalues``
    statement : str     the statement checked, in LaTeX
    method : str        ``sympy``, ``exact-fraction``, ``cvxpy-clarabel``, ``mpmath``, ``numeric``...
    status : Status
    details : dict      key numbers (JSON-serializable), e.g. values compared, tolerances, gaps
    seconds : float     wall time of the check
    source : str        where the statement comes from (docs/theory.md section / paper statement)
    evidence : Evidence what a pass is worth (:data:`ncgeom.vocabulary.EVIDENCE`), keyword-only and
                        required: ``exact`` (exact arithmetic, a symbolic identity or an interval enclosure),
                        ``independent`` (a computation of ncgeom agrees with one sharing no code path with
                        it), ``numerical`` (a floating-point search or optimization: evidence, not proof),
                        ``self-test`` (the checker is fed a statement known to be false, or the runner reports
                        on a checker: evidence about the machinery, not about the paper)
    """

    name: str
    statement: str
    method: str
    status: Status
    details: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0
    source: str = ""
    evidence: Evidence = field(kw_only=True)

    def __post_init__(self):
        if self.status not in STATUSES:
            raise ValueError(f"status must be one of {STATUSES}, got {self.status!r}")
        if self.evidence not in EVIDENCE:
            raise ValueError(f"evidence must be one of {EVIDENCE}, got {self.evidence!r}")

    def to_dict(self) -> dict[str, Any]:
        """The JSON object of this check (the record of ``verify/results.json`` and ``verify --json``)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CheckResult:
        """The inverse of :meth:`to_dict`; a missing or unknown key raises ValueError naming it.

        ``evidence`` is required: a record written before the evidence labels is refused, not guessed
        (re-run ``ncgeom verify`` or the verify stage of ``ncgeom reproduce``).
        """
        require_keys("check record", data, accepted=(f.name for f in fields(cls)),
                     required=("name", "statement", "method", "status", "evidence"))
        return cls(**data)


def timed(fn: Callable[_P, CheckResult]) -> Callable[_P, CheckResult]:
    """Decorator: run a checker and fill in ``seconds``; the checker keeps its signature."""

    @functools.wraps(fn)
    def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> CheckResult:
        t0 = time.perf_counter()
        res = fn(*args, **kwargs)
        return replace(res, seconds=time.perf_counter() - t0)

    return wrapper
