"""``ncgeom sweep SPEC.toml --out DIR``: run a grid of configs in parallel, resumably.

Runs every config of the spec (base <- [quick]/[full] overrides <- grid) into DIR/<run name>/, skipping
finished runs, then writes DIR/summary.csv. ``--workers N`` processes (default 1: in this process);
``--scheduler ADDRESS`` sends the runs to a Dask distributed cluster instead (optional extra
ncgeom[distributed]). If the spec tests a claim of theory.md section 9, its verdicts are printed and
written to DIR/claim.json. Exit codes: 0 all runs finished, 1 some run failed, 2 bad input.
"""

from __future__ import annotations

import argparse
import json
import sys

__all__ = ["register"]


def register(subparsers) -> None:
    parser = subparsers.add_parser("sweep", help="run a grid of training configs from a TOML spec",
                                   description=__doc__.split("\n\n")[0])
    parser.add_argument("spec", metavar="SPEC.toml", help="sweep spec (see docs/experiments.md)")
    parser.add_argument("--out", metavar="DIR", required=True, help="output folder (one directory per run)")
    parser.add_argument("--scale", default="quick", help="quick, full or base (no overrides) [quick]")
    parser.add_argument("--workers", type=int, default=1, metavar="N", help="worker processes [1]")
    parser.add_argument("--scheduler", metavar="ADDRESS", default=None, help="Dask scheduler address (tcp://host:port)")
    parser.add_argument("--json", action="store_true", help="print the run list (and verdicts) as JSON")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.set_defaults(func=_handler)


def _handler(args: argparse.Namespace) -> int:
    from ncgeom.experiments.claims import CLAIMS, evaluate_claim, spec_path
    from ncgeom.experiments.result import write_json_atomic
    from ncgeom.experiments.sweep import SCALES, dask_executor, load_spec, run_sweep
    from ncgeom.threads import limit_cpu_threads
    from ncgeom.validate import require_choice, require_int

    require_choice("scale", args.scale, SCALES)
    require_int("workers", args.workers, min_value=1)
    spec = load_spec(args.spec)  # every config validated before anything runs
    progress = not args.quiet and sys.stderr.isatty()
    if args.scheduler:
        with dask_executor(args.scheduler) as executor:
            result = run_sweep(spec, args.out, scale=args.scale, executor=executor, progress=progress)
    else:
        if args.workers == 1:
            limit_cpu_threads(1)
        result = run_sweep(spec, args.out, scale=args.scale, workers=args.workers, progress=progress)

    records = ()
    from pathlib import Path

    if spec.claim in CLAIMS and Path(args.spec).resolve() == spec_path(spec.claim).resolve():
        records = evaluate_claim(spec.claim, result)
        write_json_atomic(Path(args.out) / "claim.json", [r.to_dict() for r in records])
    done = sum(r.status in ("completed", "diverged") for r in result.runs)
    if args.json:
        print(json.dumps({"runs": [{"name": r.name, "status": r.status, "skipped": r.skipped, "error": r.error}
                                   for r in result.runs], "table": result.table_path,
                          "verdicts": [r.to_dict() for r in records]}, indent=1))
    else:
        skipped = sum(r.skipped for r in result.runs)
        print(f"{spec.name}: {done}/{len(result.runs)} runs finished ({skipped} already done); table: {result.table_path}")
        for r in records:
            print(f"  claim {r.claim} | {r.setting} | {r.metric} | expected {r.expected} | {r.observed} | {r.verdict}")
    for r in result.failed:
        print(f"ncgeom sweep: error: run {r.name} failed: {r.error}", file=sys.stderr)
    return 1 if result.failed else 0
