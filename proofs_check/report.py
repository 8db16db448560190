"""Run every proofs_check checker and collect the results: ``run_all`` (used by ``ncgeom verify`` and by
the ``ncgeom reproduce`` pipeline).

Checker modules (each exposes ``checks(*, quick: bool) -> list[Callable[[], CheckResult]]``) are imported
lazily, in the order of :data:`CHECK_MODULES`. A module that is missing, a ``checks()`` that raises or a
checker that raises becomes a ``fail`` row saying so, labelled ``self-test`` (a statement about the
checking machinery, not about the paper); ``run_all`` never crashes on a checker. The report passes iff
no row is ``fail`` (``unresolved`` and ``info`` do not fail it).

Every row carries an evidence label (:data:`ncgeom.vocabulary.EVIDENCE`); :attr:`VerifyReport.evidence_counts`
counts the passes of each kind and :func:`evidence_summary` writes them in one line, the self-tests apart
from the evidence about the paper.
"""

from __future__ import annotations

import importlib
import time
import traceback
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ncgeom.atomic_io import jsonable
from ncgeom.provenance import provenance
from ncgeom.validate import require_keys
from ncgeom.vocabulary import EVIDENCE
from proofs_check.records import CheckResult

__all__ = ["CHECK_MODULES", "VerifyReport", "run_all", "key_numbers", "evidence_counts", "evidence_summary"]

CHECK_MODULES: tuple[str, ...] = ("symbolic", "harris", "jensen", "certificates", "counterexample", "hucl")

# Details shown in the table, in order of preference (the first few present are shown).
_KEY_PREFERENCE = (
    "primal_value", "closed_form", "gap", "distance_to_etf",
    "min_derivative_lower_bound", "min_difference_C3_up", "anchor_C10", "max_best_minus_nc",
    "min_best_minus_cross_polytope", "critical_beta", "max_nc_minus_min", "max_etf_distance", "harris_bound",
    "value", "expected", "max_abs_error", "max_violation", "margin", "residual",
)


@dataclass(frozen=True)
class VerifyReport:
    """All check results of one ``run_all`` call.

    checks : tuple of CheckResult, in run order; quick : the mode; seconds : total wall time;
    modules : the checker modules requested; provenance : :func:`ncgeom.provenance.provenance` output.
    """

    checks: tuple[CheckResult, ...]
    quick: bool
    seconds: float
    modules: tuple[str, ...]
    provenance: dict[str, Any] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        """True iff no check has status ``fail``."""
        return all(r.status != "fail" for r in self.checks)

    @property
    def counts(self) -> dict[str, int]:
        """Checks per status."""
        return dict(Counter(r.status for r in self.checks))

    @property
    def evidence_counts(self) -> dict[str, int]:
        """Passed checks per kind of evidence (every kind of EVIDENCE, 0 when none): :func:`evidence_counts`."""
        return evidence_counts(self.checks)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict: {"checks": [...], "passed", "quick", "seconds", "counts", "evidence_counts",
        "modules", "provenance"}."""
        return jsonable({
            "checks": [r.to_dict() for r in self.checks],
            "passed": self.passed,
            "quick": self.quick,
            "seconds": self.seconds,
            "counts": self.counts,
            "evidence_counts": self.evidence_counts,
            "modules": list(self.modules),
            "provenance": self.provenance,
        })

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> VerifyReport:
        """The inverse of :meth:`to_dict`; an unknown or missing key (a check without ``evidence`` included),
        or inconsistent ``passed`` / ``counts`` / ``evidence_counts``, raises ValueError naming it."""
        known = {"checks", "passed", "quick", "seconds", "counts", "evidence_counts", "modules", "provenance"}
        require_keys("verify report", data, accepted=known, required=known)
        report = cls(tuple(CheckResult.from_dict(r) for r in data["checks"]), bool(data["quick"]),
                     float(data["seconds"]), tuple(data["modules"]), dict(data["provenance"]))
        if data["passed"] != report.passed or data["counts"] != report.counts:
            raise ValueError("verify report: 'passed' or 'counts' disagrees with the checks")
        if data["evidence_counts"] != report.evidence_counts:
            raise ValueError("verify report: 'evidence_counts' disagrees with the checks")
        return report


def evidence_counts(checks: Sequence[CheckResult]) -> dict[str, int]:
    """{kind: number of checks with status ``pass`` and that evidence}, for every kind of EVIDENCE."""
    counts: dict[str, int] = dict.fromkeys(EVIDENCE, 0)
    for r in checks:
        if r.status == "pass":
            counts[r.evidence] += 1
    return counts


def evidence_summary(checks: Sequence[CheckResult]) -> str:
    """One line: the passes per kind of evidence about the paper, then the self-tests apart.

    >>> rows = [CheckResult("a", "s", "m", "pass", evidence="exact"), CheckResult("b", "s", "m", "pass", evidence="self-test")]
    >>> evidence_summary(rows)
    'evidence about the paper (passes): 1 exact, 0 independent, 0 numerical; self-tests of the checkers: 1 of 1 passed'
    """
    counts = evidence_counts(checks)
    paper = ", ".join(f"{counts[kind]} {kind}" for kind in EVIDENCE if kind != "self-test")
    selftests = sum(r.evidence == "self-test" for r in checks)
    return f"evidence about the paper (passes): {paper}; self-tests of the checkers: {counts['self-test']} of {selftests} passed"


def _fail_row(name: str, statement: str, error: str, seconds: float = 0.0) -> CheckResult:
    # a statement about the checking machinery (a module is missing, a checker crashed): self-test, not the paper
    return CheckResult(name, statement, "runner", "fail", {"error": error}, seconds, "proofs_check.report", evidence="self-test")


def _checker_name(fn) -> str:
    inner = getattr(fn, "func", fn)
    return getattr(inner, "__name__", repr(inner))


def _collect(module_name: str, quick: bool) -> list[Callable[[], CheckResult]] | CheckResult:
    full = f"proofs_check.{module_name}"
    try:
        module = importlib.import_module(full)
    except ModuleNotFoundError as exc:
        if exc.name == full:
            return _fail_row(f"{module_name}_missing", f"\\text{{checker module {full} exists}}",
                             f"module {full} is missing")
        return _fail_row(f"{module_name}_import_error", f"\\text{{{full} imports}}", repr(exc))
    except Exception as exc:  # noqa: BLE001 - any import failure becomes a fail row
        return _fail_row(f"{module_name}_import_error", f"\\text{{{full} imports}}", repr(exc))
    if not hasattr(module, "checks"):
        return _fail_row(f"{module_name}_no_checks", f"\\text{{{full} exposes checks()}}",
                         f"{full} has no checks(*, quick) function")
    try:
        return list(module.checks(quick=quick))
    except Exception as exc:  # noqa: BLE001
        return _fail_row(f"{module_name}_checks_error", f"\\text{{{full}.checks() runs}}", repr(exc))


def run_all(
    *,
    quick: bool,
    modules: Sequence[str] | None = None,
    on_result: Callable[[CheckResult], None] | None = None,
    with_provenance: bool = True,
) -> VerifyReport:
    """Run the checks of every module in ``modules`` (default :data:`CHECK_MODULES`).

    Parameters
    ----------
    quick : bool
        Each module's quick subset (``ncgeom verify --quick``: under a minute on 2 cores).
    modules : sequence of str, optional
        Non-empty subset of CHECK_MODULES (None: all); an empty one raises ValueError.
    on_result : callable, optional
        Called with each CheckResult as soon as it is available (progress output).
    with_provenance : bool
        Attach :func:`ncgeom.provenance.provenance` (git commit, versions, time).
    """
    modules = tuple(CHECK_MODULES if modules is None else modules)
    if not modules:  # an empty selection would pass vacuously with zero checks
        raise ValueError(f"modules must name at least one of {', '.join(CHECK_MODULES)} (or be None), got ()")
    for m in modules:
        if m not in CHECK_MODULES:
            raise ValueError(f"modules must be a subset of {', '.join(CHECK_MODULES)}, got {m!r}")
    t0 = time.perf_counter()
    results: list[CheckResult] = []

    def emit(result: CheckResult) -> None:
        results.append(result)
        if on_result is not None:
            on_result(result)

    for module_name in modules:
        collected = _collect(module_name, bool(quick))
        if isinstance(collected, CheckResult):
            emit(collected)
            continue
        for fn in collected:
            start = time.perf_counter()
            try:
                result = fn()
                if not isinstance(result, CheckResult):
                    raise TypeError(f"checker returned {type(result).__name__}, not CheckResult")
            except Exception as exc:  # noqa: BLE001 - a crashing checker is a failed check
                tb = traceback.format_exc(limit=3)
                result = _fail_row(f"{module_name}.{_checker_name(fn)}", "\\text{checker runs}",
                                   f"{exc!r}\n{tb}", time.perf_counter() - start)
            emit(result)
    prov: dict[str, Any] = {}
    if with_provenance:
        try:
            prov = provenance()
        except Exception as exc:  # noqa: BLE001
            prov = {"error": repr(exc)}
    return VerifyReport(tuple(results), bool(quick), time.perf_counter() - t0, modules, prov)


def key_numbers(result: CheckResult, *, limit: int = 4) -> str:
    """A short 'key=value' summary of a result's details for the table (preferred keys first)."""

    def fmt(v) -> str | None:
        if isinstance(v, bool):
            return str(v)
        if isinstance(v, (int, float)) or hasattr(v, "dtype"):
            try:
                return f"{float(v):.6g}"
            except (TypeError, ValueError):
                return None
        if isinstance(v, str) and len(v) <= 24 and "\n" not in v:
            return v
        if isinstance(v, dict) and v and all(isinstance(x, (int, float)) for x in v.values()) and len(v) <= 3:
            return "{" + ", ".join(f"{k}: {float(x):.6g}" for k, x in v.items()) + "}"
        return None

    details = result.details or {}
    if "error" in details:
        return str(details["error"]).splitlines()[0][:80]
    keys = [k for k in _KEY_PREFERENCE if k in details] + [k for k in details if k not in _KEY_PREFERENCE]
    parts = []
    for k in keys:
        text = fmt(details[k])
        if text is not None:
            parts.append(f"{k}={text}")
        if len(parts) >= limit:
            break
    return ", ".join(parts)
