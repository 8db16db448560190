"""``ncgeom verify``: run every proofs_check checker and print a table (or JSON).

Example::

    $ ncgeom verify --quick            # the quick subset, under a minute on 2 cores
    $ ncgeom verify --json > verify.json
    $ ncgeom verify --quick --only certificates,counterexample

Checkers: symbolic derivations and Harris checks (proofs_check.symbolic, proofs_check.harris), the
Jensen step of Theorems 2-3 (proofs_check.jensen), convex certificates (proofs_check.certificates), the
Theorem 3 counterexample (proofs_check.counterexample) and the HUCL exploration (proofs_check.hucl). The
exit code is 0 iff no check has status ``fail`` (``unresolved`` and ``info`` do not fail), 1 otherwise.

Every check says what its pass is worth (``evidence``, :data:`ncgeom.vocabulary.EVIDENCE`): ``exact``,
``independent``, ``numerical`` or ``self-test`` (a test of the checker itself, reported apart from the
evidence about the paper). The table has an evidence column and ends with the passes per kind.

The JSON output is one object: ``{"checks": [{"name", "statement", "method", "status", "details",
"seconds", "source", "evidence"}, ...], "passed": bool, "quick", "seconds", "counts", "evidence_counts",
"modules", "provenance"}`` (``evidence_counts``: passes per kind of evidence); non-finite numbers are
written as null.

``ncgeom verify --ablations`` runs the hypothesis-ablation registry instead (:mod:`proofs_check.ablations`,
docs/verify.md, "Ablations"): quick variants by default, the full ones with ``--full``; a table, or with
``--json`` one object ``{"ablations": [record, ...], "errors": [...]}`` (records:
:meth:`proofs_check.ablations.AblationResult.to_dict`). An ablation whose conclusion "fails" is a result;
the exit code is 1 only if a case module is missing or raised (listed in ``errors``).
"""

from __future__ import annotations

import argparse
import sys

from ncgeom.atomic_io import dumps_json
from proofs_check.ablations import CASES, run_ablations
from proofs_check.report import CHECK_MODULES, evidence_summary, key_numbers, run_all

__all__ = ["register", "run", "format_table", "format_ablations"]


def register(subparsers) -> None:
    """Add the ``verify`` subcommand to ``subparsers``."""
    p = subparsers.add_parser(
        "verify",
        help="run the symbolic, Harris, Jensen, convex-certificate, counterexample and HUCL checks",
        description="Run every proofs_check checker; exit 0 iff no check failed.",
    )
    p.add_argument("--quick", action="store_true", help="quick subset (under a minute on 2 cores)")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    p.add_argument("--only", default=None, metavar="MODULES",
                   help=f"comma-separated subset of: {', '.join(CHECK_MODULES)}")
    p.add_argument("--ablations", action="store_true",
                   help=f"run the hypothesis ablations ({', '.join(CASES)}) instead of the checks")
    p.add_argument("--full", action="store_true", help="with --ablations: the full variants (default: quick)")
    p.set_defaults(func=run)


def _shorten(text: str, width: int) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= width else text[: width - 3] + "..."


def format_table(report) -> str:
    """The report as a fixed-width table: check, statement, method, status, evidence, key numbers, time;
    then the verdict, the counts per status and the passes per kind of evidence (self-tests apart)."""
    rows = [("check", "statement", "method", "status", "evidence", "key numbers", "time")]
    for r in report.checks:
        rows.append((_shorten(r.name, 48), _shorten(r.statement, 40), _shorten(r.method, 20), r.status,
                     r.evidence, _shorten(key_numbers(r), 90), f"{r.seconds:.2f}s"))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    counts = ", ".join(f"{n} {s}" for s, n in sorted(report.counts.items()))
    verdict = "PASSED" if report.passed else "FAILED"
    lines.append(f"\n{verdict}: {len(report.checks)} checks ({counts}) in {report.seconds:.1f}s"
                 f"{' [quick]' if report.quick else ''}")
    lines.append(evidence_summary(report.checks))
    return "\n".join(lines)


def format_ablations(records, errors: list[str]) -> str:
    """The ablations as a fixed-width table (theorem, hypothesis, violation, result, gap, evidence, time), then
    one line counting the results and one line per case that could not run."""
    rows = [("theorem", "hypothesis", "violation", "result", "gap", "evidence", "time")]
    for r in records:
        rows.append((r.theorem, _shorten(r.hypothesis, 56), _shorten(r.violation, 56), r.result,
                     "-" if r.gap is None else f"{r.gap:.6g}", r.evidence, f"{r.seconds:.2f}s"))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    fails = sum(r.result == "fails" for r in records)
    lines.append(f"\n{len(records)} ablations: {fails} fails, {len(records) - fails} holds")
    lines += [f"ERROR: {e}" for e in errors]
    return "\n".join(lines)


def _run_ablations(args: argparse.Namespace) -> int:
    errors: list[str] = []

    def on_error(case: str, exc: BaseException) -> None:
        errors.append(f"proofs_check.ablations.{case}: {exc!r}")

    records = run_ablations(quick=not args.full, on_error=on_error)
    if args.json:
        print(dumps_json({"ablations": [r.to_dict() for r in records], "errors": errors}, indent=None))
    else:
        print(format_ablations(records, errors))
    return 1 if errors else 0


def run(args: argparse.Namespace) -> int:
    """Handler: run the checks (or, with --ablations, the ablations), print the table or JSON; 0 iff no check
    failed (no ablation case raised)."""
    if args.full and not args.ablations:
        raise ValueError("--full applies to --ablations only (the checks take --quick)")
    if args.ablations:
        if args.only is not None or args.quick:
            raise ValueError("--ablations takes neither --only nor --quick (quick is its default; --full for the full one)")
        return _run_ablations(args)
    modules = None
    if args.only is not None:  # "--only=" (empty) is refused below, never "everything"
        modules = tuple(m.strip() for m in args.only.split(",") if m.strip())
        for m in modules:
            if m not in CHECK_MODULES:
                raise ValueError(f"--only must list modules among {', '.join(CHECK_MODULES)}, got {m!r}")
        if not modules:  # "--only ," would otherwise run nothing and report a vacuous PASSED
            raise ValueError(f"--only must list at least one of {', '.join(CHECK_MODULES)}, got {args.only!r}")

    def progress(result) -> None:
        if not args.json:
            print(f"  {result.status:10s} {result.name} ({result.seconds:.2f}s)", file=sys.stderr, flush=True)

    report = run_all(quick=bool(args.quick), modules=modules, on_result=progress)
    if args.json:
        print(dumps_json(report.to_dict(), indent=None))
    else:
        print(format_table(report))
    return 0 if report.passed else 1
