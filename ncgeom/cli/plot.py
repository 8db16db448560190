"""``ncgeom plot RUN|SWEEP... --out FILE.png``: a metric's history, mean and band over seeds (ncgeom.figures.history).

Each argument is a run directory or a sweep folder (all its runs), as for ``ncgeom compare``. The runs of one grid
point are one curve (the mean over seeds, a band from the smallest to the largest seed); ``--metric`` (default
etf_distance) is any history metric. Written atomically as .png, .pdf or .svg (from the extension). Bad input
(missing folder, unknown metric, another extension, runs without the metric) is one line, exit 2, and writes
nothing.
"""

from __future__ import annotations

import argparse

from ncgeom.campaigns.compare import METRICS, check_metrics, load_paths

__all__ = ["register"]

_PLOT_EXTENSIONS = (".png", ".pdf", ".svg")


def register(subparsers) -> None:
    parser = subparsers.add_parser("plot", help="history curves of runs or sweeps, mean and band over seeds",
                                   description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", metavar="RUN", help="run directories or sweep folders")
    parser.add_argument("--metric", default="etf_distance", metavar="M",
                        help=f"one of {', '.join(m for m in METRICS if m != 'first_nc_epoch')} [etf_distance]")
    parser.add_argument("--out", required=True, metavar="FILE", help="the image: " + ", ".join(_PLOT_EXTENSIONS))
    parser.set_defaults(func=_handler)


def _handler(args: argparse.Namespace) -> int:
    metric = check_metrics([args.metric], option="--metric")[0]
    if metric == "first_nc_epoch":
        raise ValueError("--metric first_nc_epoch is one number per run (ncgeom compare shows it), not a curve")
    if not args.out.lower().endswith(_PLOT_EXTENSIONS):
        raise ValueError(f"--out must end in {', '.join(_PLOT_EXTENSIONS)}, got {args.out!r}")
    runs = load_paths(args.runs)  # bad runs are refused before matplotlib is imported or anything is written

    from ncgeom.figures.history import caption, plot_history  # matplotlib: only when a figure is drawn

    path = plot_history(runs, args.out, metric=metric)
    print(f"written: {path} ({len(runs)} runs). {caption(metric)}")
    return 0
