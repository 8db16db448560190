"""``ncgeom summarize SWEEP``: the mean and interval of each metric per grid point of a sweep (any spec's).

Reads SWEEP's sweep.json and its finished runs (ncgeom.campaigns.summarize): one row per grid point, the mean over
its seeds and the 95 % Student t-interval of each metric, the verdicts, the first epoch inside the NC thresholds;
labelled by the spec's grid keys, each where the run reads it. ``--format markdown`` (default), ``csv`` or ``json``
on stdout. A folder without sweep.json, or without a finished run, is one line, exit 2.
"""

from __future__ import annotations

import argparse

from ncgeom.campaigns.compare import COMPARE_METRICS, check_metrics
from ncgeom.campaigns.summarize import summarize_sweep
from ncgeom.cli.compare import FORMATS, add_table_options, print_table
from ncgeom.validate import require_choice

__all__ = ["register"]


def register(subparsers) -> None:
    parser = subparsers.add_parser("summarize", help="per grid point mean and interval of a sweep's runs",
                                   description=__doc__.split("\n\n")[0])
    parser.add_argument("sweep", metavar="SWEEP", help="a sweep folder (ncgeom sweep --out)")
    add_table_options(parser)
    parser.set_defaults(func=_handler)


def _handler(args: argparse.Namespace) -> int:
    fmt = require_choice("--format", args.format, FORMATS)
    metrics = check_metrics(args.metric or COMPARE_METRICS, option="--metric")
    print_table(summarize_sweep(args.sweep, metrics=metrics), fmt)
    return 0
