"""The immutable record every proofs_check checker returns."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

__all__ = ["Status", "STATUSES", "CheckResult", "timed"]

Status = Literal["pass", "fail", "unresolved", "info"]
# "info" is for exploration (e.g. the HUCL open problem): numbers reported, no verdict.
STATUSES: tuple[str, ...] = ("pass", "fail", "unresolved", "info")


@dataclass(frozen=True)
class CheckResult:
    """Outcome of one check.

    name : str          stable identifier, e.g. ``etf_gram_eigenvalues``
    statement : str     the statement checked, in LaTeX
    method : str        ``sympy``, ``exact-fraction``, ``cvxpy-clarabel``, ``mpmath``, ``numeric``...
    status : Status
    details : dict      key numbers (JSON-serializable), e.g. values compared, tolerances, gaps
    seconds : float     wall time of the check
    source : str        where the statement comes from (theory.md section / paper statement)
    """

    name: str
    statement: str
    method: str
    status: Status
    details: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0
    source: str = ""

    def __post_init__(self):
        if self.status not in STATUSES:
            raise ValueError(f"status must be one of {STATUSES}, got {self.status!r}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def timed(fn: Callable[[], CheckResult]) -> Callable[[], CheckResult]:
    """Decorator: run a zero-argument checker and fill in ``seconds``."""
    import functools
    from dataclasses import replace

    @functools.wraps(fn)
    def wrapper(*args, **kwargs) -> CheckResult:
        t0 = time.perf_counter()
        res = fn(*args, **kwargs)
        return replace(res, seconds=time.perf_counter() - t0)

    return wrapper
