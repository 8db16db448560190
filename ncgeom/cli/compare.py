"""``ncgeom compare RUN...``: runs side by side (ncgeom.campaigns.compare; docs/experiments.md, "Compare, plot and
summarize runs").

Each RUN is a run directory (``ncgeom train --out``, a sweep's run, an ``NCMonitor`` run) or a sweep folder (all its
runs). Runs that share a config but for the seed are one row: the mean over the seeds of each metric with its 95 %
Student t-interval, the verdict NC / DC / neither of each run's final metrics, and the first epoch inside the NC
thresholds. ``--format markdown`` (default), ``csv`` or ``json`` on stdout. A missing folder, a folder that is
neither, or a run of another format is one line, exit 2.
"""

from __future__ import annotations

import argparse
import json

from ncgeom.campaigns.compare import COMPARE_METRICS, METRICS, Comparison, check_metrics, compare_runs, load_paths
from ncgeom.validate import require_choice

__all__ = ["register", "FORMATS", "add_table_options", "print_table"]

FORMATS = ("markdown", "csv", "json")


def add_table_options(parser: argparse.ArgumentParser) -> None:
    """``--metric M...`` and ``--format``: what a table shows and how (compare, summarize)."""
    parser.add_argument("--metric", nargs="+", default=None, metavar="M",
                        help=f"the columns: any of {', '.join(METRICS)} [{' '.join(COMPARE_METRICS)}]")
    parser.add_argument("--format", default="markdown", metavar="FMT", help=f"{', '.join(FORMATS)} [markdown]")


def print_table(comparison: Comparison, fmt: str) -> None:
    """Print ``comparison`` as ``fmt`` on stdout."""
    if fmt == "json":
        print(json.dumps(comparison.to_dict(), indent=1))
    elif fmt == "csv":
        print(comparison.to_csv(), end="")
    else:
        print(comparison.to_markdown())


def register(subparsers) -> None:
    parser = subparsers.add_parser("compare", help="runs side by side: finals, intervals over seeds, first epoch at NC",
                                   description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", metavar="RUN", help="run directories or sweep folders")
    add_table_options(parser)
    parser.set_defaults(func=_handler)


def _handler(args: argparse.Namespace) -> int:
    fmt = require_choice("--format", args.format, FORMATS)
    metrics = check_metrics(args.metric or COMPARE_METRICS, option="--metric")
    runs = load_paths(args.runs)
    print_table(compare_runs(runs, metrics=metrics, title=f"{len(runs)} runs"), fmt)
    return 0
