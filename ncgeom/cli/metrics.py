"""``ncgeom metrics``: the NC / DC metrics of theory.md section 8 for embeddings saved as .npz.

The file holds ``z`` [N, d] (embeddings) and ``labels`` [N] (integers), e.g.
``np.savez("emb.npz", z=z, labels=labels)``. By default the classes are the distinct labels (any
integers; a class absent from the file is simply not there). With ``--classes C`` the labels must be
exactly 0..C-1 and every class must have a sample; a missing class is an error naming it.

``--json`` prints one object with exactly the metric names as keys (``spectrum`` a list; an undefined
metric, e.g. nc1 when all class means coincide, is ``null``).
"""

from __future__ import annotations

import argparse
import json
import math

from ncgeom.cli.main import UsageError

__all__ = ["register", "run", "load_npz"]


def register(subparsers) -> None:
    """Add the ``metrics`` subcommand to ``subparsers``."""
    p = subparsers.add_parser(
        "metrics",
        help="NC / DC metrics of embeddings in an .npz file (theory.md section 8)",
        description="Neural-collapse and dimensional-collapse metrics of the arrays z [N, d] and labels [N] "
        "stored in an .npz file (np.savez(path, z=..., labels=...)).",
    )
    p.add_argument("file", metavar="FILE.npz", help="archive with arrays 'z' [N, d] and 'labels' [N]")
    p.add_argument(
        "--classes", type=int, default=None, metavar="C",
        help="require labels 0..C-1 with every class present (default: the distinct labels)",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object (keys: the metric names)")
    p.set_defaults(func=run)


def load_npz(path: str):
    """Return ``(z, labels)`` from an .npz archive, or raise UsageError saying what is wrong."""
    import pickle
    import zipfile
    from pathlib import Path

    import numpy as np

    p = Path(path)
    if not p.exists():
        raise UsageError(f"{path}: no such file")
    if p.is_dir():
        raise UsageError(f"{path}: is a directory, not an .npz file")
    bad = (OSError, ValueError, EOFError, zipfile.BadZipFile, pickle.UnpicklingError, KeyError)
    try:
        data = np.load(p, allow_pickle=False)
    except bad as exc:
        raise UsageError(f"{path}: not a readable .npz archive ({exc.__class__.__name__}: {exc})") from None
    if not isinstance(data, np.lib.npyio.NpzFile):
        raise UsageError(f"{path}: not an .npz archive (a single array); save with np.savez(path, z=..., labels=...)")
    with data:
        for key in ("z", "labels"):
            if key not in data.files:
                found = ", ".join(repr(f) for f in data.files) or "nothing"
                raise UsageError(f"{path}: no array {key!r} in the archive (found {found})")
        try:
            return data["z"], data["labels"]
        except bad as exc:
            raise UsageError(f"{path}: cannot read its arrays ({exc.__class__.__name__}: {exc})") from None


def run(args: argparse.Namespace) -> int:
    """Handler: load, compute :func:`ncgeom.metrics.nc_metrics`, print; returns the exit code 0."""
    import numpy as np

    from ncgeom.metrics import nc_metrics
    from ncgeom.validate import require_int

    classes = None if args.classes is None else require_int("--classes", args.classes, min_value=2)
    z, labels = load_npz(args.file)
    try:
        metrics = nc_metrics(z, labels, num_classes=classes)
    except ValueError as exc:
        raise UsageError(f"{args.file}: {exc}") from None
    values = metrics.to_dict()
    if args.json:
        print(json.dumps({k: _json_safe(v) for k, v in values.items()}, indent=2, allow_nan=False))
        return 0
    n, d = z.shape
    c = np.unique(labels).size
    print(_table(args.file, values, n=n, d=d, c=c))
    return 0


def _json_safe(v):
    if isinstance(v, list):
        return [_json_safe(x) for x in v]
    return None if isinstance(v, float) and math.isnan(v) else v


def _fmt(v: float) -> str:
    return "nan (undefined)" if math.isnan(v) else f"{v:.6g}"


def _spectrum_lines(spec: list[float]) -> list[str]:
    import numpy as np

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
