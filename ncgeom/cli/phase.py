"""``ncgeom phase NAME|SPEC --out DIR``: a phase map, where training ends in NC, in DC or neither over two axes.

A map spec names two axes (any config field, or named points of several fields), fixed values for the rest, panels
and seeds per scale (docs/experiments.md, "Phase maps"; ``--list`` shows the shipped maps). Every run is classified
by the run-level rule (NC / DC / neither of its final metrics, and whether it converged; docs/theory.md, section 9,
"Phase maps"); a cell reports the share of its seeds in each class and the mean and interval of the deciding metrics.
The map starts on a coarse grid and refines only where neighbouring cells disagree (``--uniform``: every cell). DIR
receives cells.json, cells.csv, table.txt, overlays.json (the theory's lines), phase_map.png, phase_spectra.png and
runs/ (a sweep folder: resumable at run granularity, read by ``ncgeom summarize``); the text table is printed.
``--workers N`` processes, or ``--scheduler ADDRESS`` for a Dask cluster; the runs of one shape are one unit, trained
by the stacked engine. A bad spec (an unknown field, an axis with one value, a non-numeric axis asked to refine, a
grid over the run limit, an empty seed list) is one line, exit 2, before anything is written. Exit codes: 0 the map
is complete, 1 a run failed (rerun the same command to resume), 2 bad input or DIR busy, 130/143 interrupted.
"""

from __future__ import annotations

import argparse
import contextlib
import sys

from ncgeom.atomic_io import dumps_json
from ncgeom.campaigns.executors import make_executor
from ncgeom.cli.sweep import add_wait_options, wait_seconds
from ncgeom.interrupts import Interrupted, raise_on_signals
from ncgeom.phase.spec import load_map_spec, map_names
from ncgeom.threads import limit_cpu_threads, require_workers
from ncgeom.validate import require_choice, require_int
from ncgeom.vocabulary import SCALES, SEED_SETS

__all__ = ["register"]


def register(subparsers) -> None:
    parser = subparsers.add_parser("phase", help="a phase map: NC, DC or neither over two config axes",
                                   description=__doc__.split("\n\n")[0])
    parser.add_argument("spec", metavar="SPEC", nargs="?", help="shipped map name (see --list) or TOML map spec")
    parser.add_argument("--list", action="store_true", help="list the shipped maps and exit")
    parser.add_argument("--out", metavar="DIR", help="output folder")
    parser.add_argument("--scale", default="quick", help=f"{', '.join(SCALES)} [quick]")
    parser.add_argument("--seeds", default="confirmatory", metavar="SET",
                        help=f"{' or '.join(SEED_SETS)}: the map's seed set to train [confirmatory]")
    parser.add_argument("--workers", type=int, default=1, metavar="N",
                        help="worker processes, at most the CPU count (at least 4 allowed) [1]")
    parser.add_argument("--scheduler", metavar="ADDRESS", default=None, help="Dask scheduler address (tcp://host:port)")
    parser.add_argument("--uniform", action="store_true",
                        help="train every cell of the full-resolution grid (no refinement): the reference of a map")
    parser.add_argument("--json", action="store_true", help="print the cells as JSON (cells.json) instead of the table")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    add_wait_options(parser)
    parser.set_defaults(func=_handler)


def _handler(args: argparse.Namespace) -> int:
    from ncgeom.phase.run import run_map  # imports the campaigns (and torch when training)

    if args.list:
        for name in map_names():
            spec = load_map_spec(name)
            print(f"{name}: " + " ".join(spec.description.split())[:110])
        return 0
    if args.spec is None or args.out is None:
        raise ValueError("give a map (a shipped name or a TOML file) and --out DIR, or --list")
    scale = require_choice("--scale", args.scale, SCALES)
    seeds = require_choice("--seeds", args.seeds, SEED_SETS)
    if args.scheduler is None:
        require_workers("--workers", args.workers)
    else:
        require_int("--workers", args.workers, min_value=1)
    wait = wait_seconds(args)
    spec = load_map_spec(args.spec)  # every cell's config validated before anything is written
    spec.at(scale).seeds(seeds)
    progress = not args.quiet and sys.stderr.isatty()
    if args.workers == 1 and args.scheduler is None:
        limit_cpu_threads(1)
    with raise_on_signals():
        try:
            cluster = make_executor(scheduler=args.scheduler) if args.scheduler else contextlib.nullcontext(None)
            with cluster as ex:
                result = run_map(spec, args.out, scale=scale, seeds=seeds, workers=args.workers, executor=ex,
                                 uniform=args.uniform, progress=progress, wait=wait,
                                 log=(lambda line: print(f"ncgeom phase: {line}", file=sys.stderr))
                                 if not args.quiet else None)
        except Interrupted as stop:
            print(f"ncgeom phase: interrupted by {stop.name}: finished runs are kept in {args.out}/runs; rerun the "
                  "same command to resume", file=sys.stderr)
            return stop.exit_code
    if args.json:
        print(dumps_json(result.to_dict(), indent=1))
    else:
        print(result.table_text(), end="")
    for line in result.failed:
        print(f"ncgeom phase: error: run {line}", file=sys.stderr)
    return 0 if result.status == "complete" else 1
