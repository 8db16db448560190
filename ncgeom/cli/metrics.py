"""``ncgeom metrics``: the NC / DC metrics of docs/theory.md, section 8 for saved embeddings.

The file is read by :func:`ncgeom.data.embeddings.load_embeddings` (formats .npz, .npy, .pt, .csv; nothing
is ever unpickled; arrays measured against the memory budget before they are loaded): ``--labels FILE``
gives the labels of a file that holds z alone.

By default the classes are the distinct labels (any integers). With ``--classes C`` the labels must be
exactly 0..C-1 and every class must have a sample; a missing class is an error naming it.

``--json`` prints one object with exactly the metric names as keys (``spectrum`` a list; an undefined
metric, e.g. nc1 when all class means coincide, is ``null``). Every bad input is one line naming the file
and what was expected, with exit code 2.
"""

from __future__ import annotations

import argparse
import math

import numpy as np

from ncgeom import budget
from ncgeom.atomic_io import dumps_json
from ncgeom.cli.main import UsageError
from ncgeom.data.embeddings import EXPECTED, FORMATS, load_embeddings
from ncgeom.metrics import nc_metrics
from ncgeom.validate import require_int

__all__ = ["register", "run"]


def register(subparsers) -> None:
    """Add the ``metrics`` subcommand to ``subparsers``."""
    p = subparsers.add_parser(
        "metrics",
        help="NC / DC metrics of saved embeddings (.npz, .npy, .pt, .csv; docs/theory.md, section 8)",
        description="Neural-collapse and dimensional-collapse metrics of embeddings z [N, d] with labels [N]. "
        + " ".join(f"{ext}: {text}." for ext, text in EXPECTED.items()),
    )
    p.add_argument("file", metavar="FILE", help="embeddings: " + ", ".join(FORMATS))
    p.add_argument("--labels", metavar="LABELS", default=None,
                   help="labels [N] (.npy, .pt or one-column .csv) for a file holding z only (.npy, .pt tensor, .csv)")
    p.add_argument(
        "--classes", type=int, default=None, metavar="C",
        help="require labels 0..C-1 with every class present (default: the distinct labels)",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object (keys: the metric names)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Handler: load, compute :func:`ncgeom.metrics.nc_metrics`, print; returns the exit code 0."""
    classes = None if args.classes is None else require_int("--classes", args.classes, min_value=2)
    z, labels = load_embeddings(args.file, args.labels)
    if classes is not None and classes > labels.size:  # every class needs a sample: C <= N (and no C-sized array)
        raise UsageError(f"--classes {classes}: every class needs a sample, but {args.file} has {labels.size}")
    if z.ndim == 2 and labels.ndim == 1 and labels.size == z.shape[0]:  # nc_metrics explains other shapes
        classes_found = np.unique(labels).size
        budget.require_file_within_budget(
            args.file, budget.metrics_bytes(z.shape[0], z.shape[1], classes_found),
            what=f"the metrics of N = {z.shape[0]} samples, d = {z.shape[1]}, C = {classes_found} classes")
    try:
        metrics = nc_metrics(z, labels, num_classes=classes)
    except ValueError as exc:
        raise UsageError(f"{args.file}: {exc}") from None
    values = metrics.to_dict()
    if args.json:
        print(dumps_json(values))
        return 0
    n, d = z.shape
    c = np.unique(labels).size
    print(_table(args.file, values, n=n, d=d, c=c))
    return 0


def _fmt(v: float) -> str:
    return "nan (undefined)" if math.isnan(v) else f"{v:.6g}"


def _spectrum_lines(spec: list[float]) -> list[str]:
    s = np.asarray(spec)
    if s.size == 0 or np.isnan(s).any():
        return ["nan (undefined: all class means coincide)"]

    def join(values) -> str:
        return " ".join(f"{x:.3g}" for x in values)

    text = join(s) if s.size <= 8 else f"{join(s[:5])} ... {join(s[-2:])}"
    low = int(np.sum(s < 1e-3))
    tail = f"min {s.min():.3g} (log10 {np.log10(max(s.min(), 1e-300)):.2f}); {low} below 1e-3"
    return [f"{s.size} values (descending, / largest): {tail}", text]


def _table(path: str, v: dict, *, n: int, d: int, c: int) -> str:
    rows = [
        ("unit_norm", _fmt(v["unit_norm"]), "0"),
        ("zero_sum", _fmt(v["zero_sum"]), "0"),
        ("equal_inner_product", _fmt(v["equal_inner_product"]), "0"),
        ("within_class", _fmt(v["within_class"]), "0"),
        ("nc1", _fmt(v["nc1"]), "0"),
        ("etf_distance", _fmt(v["etf_distance"]), "0"),
        ("rankme", _fmt(v["rankme"]), f"C-1 = {c - 1} (balanced, d >= C-1); at most min(N, d) = {min(n, d)}"),
        ("ncc_accuracy", _fmt(v["ncc_accuracy"]), "1"),
    ]
    width = max(len(r[0]) for r in rows)
    lines = [f"{path}: N = {n} samples, d = {d}, C = {c} classes", f"{'metric':<{width}}  {'value':<16} at NC"]
    lines += [f"{name:<{width}}  {val:<16} {ideal}" for name, val, ideal in rows]
    spec = _spectrum_lines(v["spectrum"])
    lines.append(f"{'spectrum':<{width}}  {spec[0]}")
    lines += [f"{'':<{width}}  {line}" for line in spec[1:]]
    lines.append(f"{'':<{width}}  (all 1 at NC; a tail far below 1 = dimensional collapse)")
    return "\n".join(lines)
