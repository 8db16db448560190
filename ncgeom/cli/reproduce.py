"""``ncgeom reproduce``: verification, claim sweeps, theory data, figures and report.md in one command.

    ncgeom reproduce [--quick | --full] --out DIR [--workers N] [--engine stacked|sequential] [--device cuda]

Resumable: rerunning with the same ``--out`` skips what is finished (see
:mod:`ncgeom.reproduce.pipeline`); the claims stage shows a progress bar of training runs (stderr).
One writer per DIR: a second writer is refused with the pid of the first, or waits with ``--wait``
(ncgeom.locking). SIGINT (Ctrl-C) and SIGTERM stop cleanly (workers stopped, finished runs kept, one line
saying how many training runs finished). Exit code 0 when every stage succeeded, 1 when a stage failed
(the report says which), 2 on bad input or DIR busy, 130 interrupted by SIGINT, 143 by SIGTERM.
"""

from __future__ import annotations

import argparse
import sys

from ncgeom.campaigns.claims import claim_run_counts
from ncgeom.cli.measured import FULL_CPU_HOURS, FULL_WALL, MACHINE_CORES, QUICK_MINUTES
from ncgeom.cli.sweep import (
    add_device_option,
    add_engine_option,
    add_wait_options,
    check_device_option,
    engine_option,
    note_takeover,
    wait_seconds,
)
from ncgeom.interrupts import Interrupted, raise_on_signals
from ncgeom.locking import folder_lock, prepare_folder
from ncgeom.threads import available_cpus, limit_cpu_threads, require_workers
from ncgeom.vocabulary import SCALES

__all__ = ["register", "handler"]


def register(subparsers) -> None:
    """Add the ``reproduce`` parser to the ``ncgeom`` subcommands."""
    parser = subparsers.add_parser(
        "reproduce",
        help="run verify, the claim sweeps, theory data and figures; write DIR/report.md",
        description=(
            "Reproduce the paper's claims end to end: proofs_check verification, the claim sweeps and their "
            "verdicts, the theory-figure data, every figure (PNG and PDF) and DIR/report.md. Resumable: "
            "finished stages and runs in DIR are skipped."
        ),
    )
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--scale", choices=SCALES, help="tiny, quick or full, as in ncgeom sweep; --tiny, --quick and "
                      "--full below are its shorthands [quick]")
    size.add_argument("--quick", dest="scale", action="store_const", const="quick",
                      help=f"reduced sizes, about {QUICK_MINUTES} minutes on {MACHINE_CORES}, measured (default)")
    size.add_argument("--full", dest="scale", action="store_const", const="full",
                      help=f"paper-scale settings ({FULL_WALL} on {MACHINE_CORES}, {FULL_CPU_HOURS} CPU-hours, "
                           "measured; see docs/getting_started.md)")
    size.add_argument("--tiny", dest="scale", action="store_const", const="tiny", help="test scale: 2-epoch runs on shrunken grids, well under a minute; the verdicts carry no evidence")
    # None, not "quick": argparse tells two options of the group apart only from a value that is not the default
    parser.set_defaults(scale=None)
    parser.add_argument("--out", required=True, metavar="DIR", help="output directory (created; reused to resume)")
    parser.add_argument(
        "--workers", type=int, default=None, metavar="N",
        help="parallel training runs in the sweeps, one process each, at most the CPU count (at least 4 allowed); "
             "started as the work needs them (default: the CPU count, at most 4)",
    )
    add_engine_option(parser)
    add_device_option(parser)
    parser.add_argument(
        "--stages",
        default=None,
        metavar="LIST",
        help="comma-separated subset of verify,theory,claims,figures (default: all); the report is always rewritten",
    )
    parser.add_argument(
        "--redo",
        default="",
        metavar="LIST",
        help="comma-separated stages to recompute even if finished (finished training runs are still reused)",
    )
    parser.add_argument("--quiet", action="store_true", help="no progress bar over the training runs (stderr)")
    add_wait_options(parser)
    parser.set_defaults(func=handler)


def handler(args: argparse.Namespace) -> int:
    """Run the pipeline; print the report path and one line per stage."""
    # here, not at the top: ncgeom.reproduce imports the pipeline and through it proofs_check and sympy
    # (about 0.4 s), which every other command would pay at start (ncgeom.cli.main imports each subcommand)
    from ncgeom.reproduce.pipeline import reproduce
    from ncgeom.reproduce.stages import STAGES

    args.scale = args.scale or "quick"  # the default scale (None in the parser: see register)
    workers = min(available_cpus(), 4) if args.workers is None else require_workers("--workers", args.workers)
    stages = None if args.stages is None else _stage_list("--stages", args.stages, STAGES[:-1], empty=False)
    redo = _stage_list("--redo", args.redo, STAGES[:-1])
    engine = engine_option(args.engine)
    check_device_option(args.device)
    wait = wait_seconds(args)
    if workers == 1:
        limit_cpu_threads(1)  # the runs go in this process: one thread, as in a worker (ncgeom.threads)
    with raise_on_signals():
        try:
            with folder_lock(prepare_folder(args.out, what="--out"), wait=wait) as lock:
                note_takeover("ncgeom reproduce", lock)
                result = reproduce(args.out, scale=args.scale, workers=workers, engine=engine, stages=stages,
                                   redo=redo, progress=not args.quiet, wait=wait, device=args.device)
        except Interrupted as stop:
            done, total = claim_run_counts(args.out, scale=args.scale, device=args.device)
            print(f"ncgeom reproduce: interrupted by {stop.name}: {done} of {total} runs finished; "
                  "rerun the same command to resume", file=sys.stderr)
            return stop.exit_code
    for outcome in result.stages:
        extra = f": {outcome.error}" if outcome.error else ""
        print(f"{outcome.stage:8s} {outcome.status:8s} {outcome.seconds:7.1f} s{extra}")
    print(f"report: {result.report} ({result.seconds:.1f} s)")
    return 0 if result.ok else 1


def _stage_list(option: str, text: str, accepted, *, empty: bool = True) -> tuple[str, ...]:
    names = tuple(s.strip() for s in text.split(",") if s.strip())
    if not names and not empty:  # "--stages=" would run no stage and write a vacuous report
        raise ValueError(f"{option} must list at least one of {','.join(accepted)}, got {text!r}")
    for name in names:
        if name not in accepted:
            raise ValueError(f"{option} must be a comma-separated subset of {','.join(accepted)}, got {name!r}")
    return names
