"""``ncgeom verify``: run every proofs_check checker and print a table (or JSON).

Example::

    $ ncgeom verify --quick            # the quick subset, under a minute on 2 cores
    $ ncgeom verify --json > verify.json
    $ ncgeom verify --quick --only certificates,counterexample
    $ ncgeom verify --ablations --only dimension      # one case of the hypothesis ablations

Checkers: symbolic derivations and Harris checks (proofs_check.symbolic, proofs_check.harris), the
Jensen step of Theorems 2-3 (proofs_check.jensen), convex certificates (proofs_check.certificates), the
Theorem 3 counterexample (proofs_check.counterexample) and the HUCL exploration (proofs_check.hucl). The
exit code is 0 iff no check has status ``fail`` (``unresolved`` and ``info`` do not fail), 1 otherwise.

Every check says what its pass is worth (``evidence``, :data:`ncgeom.vocabulary.EVIDENCE`): ``exact``,
``independent``, ``numerical`` or ``self-test`` (a test of the checker itself, reported apart from the
evidence about the paper). The text table fits :data:`WIDTH` columns (long cells wrap, nothing is cut): status,
evidence, check, the statement in plain words (:func:`proofs_check.plain.plain_statement`) with the key numbers
and, for a pass that reads like a failure, a note saying why it is the expected result; then the verdict, the
passes per kind of evidence and a legend. The LaTeX statement and the method are in the JSON output.

The JSON output is one object: ``{"checks": [{"name", "statement", "method", "status", "details",
"seconds", "source", "evidence"}, ...], "passed": bool, "quick", "seconds", "counts", "evidence_counts",
"modules", "provenance"}`` (``evidence_counts``: passes per kind of evidence); non-finite numbers are
written as null.

``ncgeom verify --ablations`` runs the hypothesis-ablation registry instead (:mod:`proofs_check.ablations`,
docs/verify.md, "Ablations"): quick variants by default, the full ones with ``--full``; ``--only CASE[,CASE]``
runs some of the cases. Progress goes to stderr as each case runs (one line per case and per record); stdout
gets a legend (what "holds", "fails" and the sign of the gap mean), then one block per record: theorem,
hypothesis, result, gap, evidence, time, and the violation tried, the conclusion checked and, where it fails,
the winner (the configuration that beats the conclusion). With ``--json``: one object ``{"ablations": [record,
...], "errors": [...]}`` (records: :meth:`proofs_check.ablations.AblationResult.to_dict`) and no progress. An
ablation whose conclusion "fails" is a result; the exit code is 1 only if a case module is missing or raised
(listed in ``errors``).
"""

from __future__ import annotations

import argparse
import sys
import textwrap
import time
from collections.abc import Sequence

from ncgeom.atomic_io import dumps_json
from proofs_check.ablations import CASES, run_ablations
from proofs_check.plain import pass_note, plain_statement
from proofs_check.report import CHECK_MODULES, evidence_summary, key_numbers, run_all

__all__ = ["register", "run", "format_table", "format_ablations", "ABLATIONS_LEGEND", "WIDTH"]

#: Columns of the text output (a terminal's width, or a page's): cells wrap, nothing is cut.
WIDTH = 100

_CHECKS_LEGEND = (
    "status: pass; fail; unresolved (could not be decided: never counted as a pass); info (numbers reported, no "
    "verdict). evidence: exact (exact arithmetic, a symbolic identity or an interval enclosure: a proof for the "
    "instances checked); independent (agreement with a computation sharing no code); numerical (a floating-point "
    "search or optimization: evidence, not proof); self-test (the checker fed a false statement). The LaTeX "
    "statements, the methods and every number: --json (docs/verify.md)."
)

#: What the columns of ``verify --ablations`` mean (printed above its table).
ABLATIONS_LEGEND = (
    "Each row violates one hypothesis of a theorem (docs/theory.md, section 4) and checks the theorem's "
    "conclusion there. result: holds = the conclusion survives every violation tried (this study does not show "
    "the hypothesis is needed); fails = the hypothesis is needed: the conclusion fails without it, and the winner "
    "is the configuration that shows it. gap = the value of the best configuration found minus the theorem's: "
    "< 0, the winner beats the theorem's configuration by that much; > 0 where the conclusion is that a bound is "
    "attained (the d >= C - 1 rows, 2.3 and 3.3): the best configuration stays above the bound by that much; "
    "about 0 where it holds. evidence: exact, independent or numerical (docs/verify.md)."
)


def register(subparsers) -> None:
    """Add the ``verify`` subcommand to ``subparsers``."""
    p = subparsers.add_parser(
        "verify",
        help="run the symbolic, Harris, Jensen, convex-certificate, counterexample and HUCL checks",
        description="Run every proofs_check checker; exit 0 iff no check failed.",
    )
    p.add_argument("--quick", action="store_true", help="quick subset (under a minute on 2 cores)")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    p.add_argument("--only", default=None, metavar="LIST",
                   help=f"comma-separated subset of the checker modules ({', '.join(CHECK_MODULES)}) or, with "
                        f"--ablations, of the cases ({', '.join(CASES)})")
    p.add_argument("--ablations", action="store_true",
                   help=f"run the hypothesis ablations ({', '.join(CASES)}) instead of the checks")
    p.add_argument("--full", action="store_true", help="with --ablations: the full variants (default: quick)")
    p.set_defaults(func=run)


def _wrap(text: str, width: int) -> list[str]:
    """Lines of at most ``width`` characters; a word longer than that is broken, never dropped."""
    text = " ".join(str(text).split())
    return textwrap.wrap(text, width, break_on_hyphens=False) or [""]


def _wrap_name(name: str, width: int) -> list[str]:
    """A check name over lines of at most ``width``, broken after '_', ',' or ']' where possible."""
    pieces, piece = [], ""
    for char in name:
        piece += char
        if char in "_,]":
            pieces.append(piece)
            piece = ""
    if piece:
        pieces.append(piece)
    lines = [""]
    for piece in pieces:
        while len(piece) > width:  # a piece longer than the column: cut it hard
            if lines[-1]:
                lines.append("")
            lines[-1], piece = piece[:width], piece[width:]
            lines.append("")
        if len(lines[-1]) + len(piece) > width:
            lines.append("")
        lines[-1] += piece
    return [line for line in lines if line] or [""]


def _grid(header: Sequence[str], rows: Sequence[Sequence[list[str]]], widths: Sequence[int]) -> list[str]:
    """A table whose cells are lists of lines, each at most its column's width; rows grow downwards."""
    def line(cells: Sequence[str]) -> str:
        return "  ".join(cell.ljust(w) for cell, w in zip(cells, widths)).rstrip()

    out = [line(header), line(["-" * w for w in widths])]
    for row in rows:
        height = max(len(cell) for cell in row)
        for i in range(height):
            out.append(line([cell[i] if i < len(cell) else "" for cell in row]))
    return out


def format_table(report, *, width: int = WIDTH) -> str:
    """The report as text within ``width`` columns: status, evidence, check, the statement in plain words (then
    its key numbers and, for a pass that reads like a failure, why it is expected), time; then the verdict, the
    counts per status, the passes per kind of evidence (self-tests apart) and the legend."""
    status_width = max([len("status")] + [len(r.status) for r in report.checks])
    evidence_width = max([len("evidence")] + [len(r.evidence) for r in report.checks])
    fixed = [status_width, evidence_width, 24, 0, 7]  # status, evidence, check, statement, time
    fixed[3] = max(20, width - sum(fixed) - 2 * (len(fixed) - 1))
    rows = []
    for r in report.checks:
        statement = _wrap(plain_statement(r), fixed[3])
        numbers = key_numbers(r)
        if numbers:
            statement += _wrap(f"numbers: {numbers}", fixed[3])
        note = pass_note(r)
        if note:
            statement += _wrap(f"note: {note}", fixed[3])
        rows.append([[r.status], [r.evidence], _wrap_name(r.name, fixed[2]), statement, [f"{r.seconds:.2f}s".rjust(7)]])
    lines = _grid(["status", "evidence", "check", "statement in words (LaTeX: --json)", "time".rjust(7)],
                  rows, fixed)
    counts = ", ".join(f"{n} {s}" for s, n in sorted(report.counts.items()))
    verdict = "PASSED" if report.passed else "FAILED"
    lines.append("")
    lines += _wrap(f"{verdict}: {len(report.checks)} checks ({counts}) in {report.seconds:.1f}s"
                   f"{' [quick]' if report.quick else ''}", width)
    lines += _wrap(evidence_summary(report.checks), width)
    lines.append("")
    lines += _wrap(_CHECKS_LEGEND, width)
    return "\n".join(lines)


def _gap(value) -> str:
    return "-" if value is None else f"{value:.4g}"


def format_ablations(records, errors: list[str], *, width: int = WIDTH) -> str:
    """The ablations as text within ``width`` columns: the legend, then per record a line (theorem, hypothesis,
    result, gap, evidence, time) and under it the violation tried, the conclusion checked and the winner where the
    conclusion fails; then one line counting the results and one line per case that could not run."""
    lines = _wrap(ABLATIONS_LEGEND, width) + [""]
    fixed = [3, 0, 6, 10, 10, 7]  # theorem, hypothesis, result, gap, evidence, time
    fixed[1] = max(20, width - sum(fixed) - 2 * (len(fixed) - 1))
    detail = width - fixed[0] - 2
    rows = []
    for r in records:
        cell = _wrap(r.hypothesis, fixed[1])
        block = [f"violation: {r.violation}", f"conclusion: {r.conclusion}"]
        if r.winner:
            block.append(f"winner: {r.winner}")
        extra = [text for item in block for text in _wrap(item, detail)]
        rows.append(([r.theorem], cell, [r.result], [_gap(r.gap)], [r.evidence], [f"{r.seconds:.2f}s".rjust(7)], extra))
    header = ["thm", "hypothesis", "result", "gap", "evidence", "time".rjust(7)]
    table = _grid(header, [row[:6] for row in rows], fixed)
    lines += table[:2]
    start = 2
    for row in rows:
        height = max(len(cell) for cell in row[:6])
        lines += table[start:start + height]
        start += height
        lines += [" " * (fixed[0] + 2) + text for text in row[6]]
    fails = sum(r.result == "fails" for r in records)
    lines.append("")
    lines += _wrap(f"{len(records)} ablations: {fails} fails (the hypothesis is needed), {len(records) - fails} holds",
                   width)
    lines += [f"ERROR: {e}" for e in errors]
    return "\n".join(lines)


def _ablation_cases(text: str | None) -> tuple[str, ...]:
    if text is None:
        return CASES
    cases = tuple(c.strip() for c in text.split(",") if c.strip())
    for case in cases:
        if case not in CASES:
            raise ValueError(f"--only with --ablations must list cases among {', '.join(CASES)}, got {case!r}")
    if not cases:
        raise ValueError(f"--only must list at least one of the cases {', '.join(CASES)}, got {text!r}")
    return cases


def _run_ablations(args: argparse.Namespace) -> int:
    cases = _ablation_cases(args.only)
    errors: list[str] = []
    records = []

    def say(text: str) -> None:
        if not args.json:
            print(text, file=sys.stderr, flush=True)

    def on_error(case: str, exc: BaseException) -> None:
        errors.append(f"proofs_check.ablations.{case}: {exc!r}")

    variant = "full" if args.full else "quick"
    for number, case in enumerate(cases, start=1):
        say(f"[{number}/{len(cases)}] {case} ({variant}) ...")
        t0 = time.perf_counter()
        before = len(errors)
        found = run_ablations(quick=not args.full, cases=(case,), on_error=on_error)
        for r in found:
            say(f"  {r.result:6s} {r.hypothesis_id:4s} {_gap(r.gap):>10s}  {r.violation[:60]}")
        fails = sum(r.result == "fails" for r in found)
        status = "ERROR, see the end of the output" if len(errors) > before else f"{fails} fails, {len(found) - fails} holds"
        say(f"[{number}/{len(cases)}] {case}: {len(found)} records ({status}) in {time.perf_counter() - t0:.1f} s")
        records += found
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
        if args.quick:
            raise ValueError("--ablations does not take --quick (quick is its default; --full for the full one)")
        return _run_ablations(args)
    modules = None
    if args.only is not None:
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
