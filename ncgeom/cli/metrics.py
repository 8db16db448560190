"""``ncgeom metrics``: the NC / DC metrics of docs/theory.md, section 8 for saved embeddings.

Input formats (by the file's extension; nothing is ever unpickled):

``.npz``
    Arrays ``z`` [N, d] and ``labels`` [N]: ``np.savez("emb.npz", z=z, labels=labels)``.
``.npy``
    The array ``z`` [N, d] alone (``np.save``); the labels come from ``--labels FILE``.
``.pt``
    ``torch.save`` of a dict ``{"z": tensor [N, d], "labels": tensor [N]}``, or of the tensor ``z``
    alone (labels from ``--labels``). Read with ``torch.load(weights_only=True)``.
``.csv``
    One row per sample, numeric columns. With a header, a column named ``label`` or ``labels`` holds the
    labels and every other column is a coordinate of z; without one (or without such a column), every
    column is a coordinate and the labels come from ``--labels``.

``--labels FILE`` is a ``.npy`` array, a ``.pt`` tensor or a one-column ``.csv`` of N integers; it is
required for the tensor-only formats above and refused where the file has its own labels. ``.npy``
files are read with ``allow_pickle=False``.

By default the classes are the distinct labels (any integers). With ``--classes C`` the labels must be
exactly 0..C-1 and every class must have a sample; a missing class is an error naming it.

Limits: before anything is loaded, the arrays of a ``.npy``/``.npz`` are measured from their headers
(shape and dtype; object dtypes refused), a ``.pt`` from its file size, a ``.csv`` while it is read; with
the metrics' own work (:func:`ncgeom.budget.metrics_bytes`) they must fit the memory budget
(``--max-memory``, docs/reliability.md), so a small archive declaring 16 GB of arrays is refused at once.

``--json`` prints one object with exactly the metric names as keys (``spectrum`` a list; an undefined
metric, e.g. nc1 when all class means coincide, is ``null``). Every bad input is one line naming the file
and what was expected, with exit code 2.
"""

from __future__ import annotations

import argparse
import csv
import math
import pickle
import zipfile
from pathlib import Path

import numpy as np

from ncgeom import budget
from ncgeom.atomic_io import dumps_json
from ncgeom.cli.main import UsageError
from ncgeom.metrics import nc_metrics
from ncgeom.validate import require_int

__all__ = ["register", "run", "load_embeddings", "FORMATS"]

FORMATS: tuple[str, ...] = (".npz", ".npy", ".pt", ".csv")
LABEL_COLUMNS: tuple[str, ...] = ("label", "labels")
_EXPECTED = {
    ".npz": "arrays 'z' [N, d] and 'labels' [N] (np.savez(path, z=..., labels=...))",
    ".npy": "one numeric array z [N, d] (np.save), labels via --labels",
    ".pt": "torch.save of {'z': tensor [N, d], 'labels': tensor [N]} or of the tensor z (labels via --labels)",
    ".csv": "numeric columns, labels in a column named 'label' or 'labels' or via --labels",
}
# what numpy raises on a file that is not the array/archive it claims to be
_NUMPY_ERRORS = (OSError, ValueError, EOFError, zipfile.BadZipFile, pickle.UnpicklingError, KeyError)


def register(subparsers) -> None:
    """Add the ``metrics`` subcommand to ``subparsers``."""
    p = subparsers.add_parser(
        "metrics",
        help="NC / DC metrics of saved embeddings (.npz, .npy, .pt, .csv; docs/theory.md, section 8)",
        description="Neural-collapse and dimensional-collapse metrics of embeddings z [N, d] with labels [N]. "
        + " ".join(f"{ext}: {text}." for ext, text in _EXPECTED.items()),
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


def _one_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return f"{exc.__class__.__name__}: {lines[0] if lines else ''}"


def _check_file(path: str) -> Path:
    p = Path(path)
    if not p.exists():
        raise UsageError(f"{path}: no such file")
    if p.is_dir():
        raise UsageError(f"{path}: is a directory, not a file")
    return p


def _suffix(path: str) -> str:
    suffix = Path(path).suffix.lower()
    if suffix not in FORMATS:
        expected = "; ".join(f"{ext}: {text}" for ext, text in _EXPECTED.items())
        raise UsageError(f"{path}: unsupported file type {suffix or '(none)'!r}; expected {expected}")
    return suffix


def _require_fits(path: str, need: int, what: str) -> None:
    limit = budget.memory_budget()
    if need > limit:
        raise UsageError(f"{path}: {what} needs about {budget.format_bytes(need)}, above the memory budget of "
                         f"{budget.format_bytes(limit)}; use a smaller file or raise the budget with --max-memory SIZE "
                         f"or {budget.ENV_VAR}=SIZE")


def _headers(path: str) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
    """The declared (shape, dtype) of every array of a .npy/.npz file; refuses object dtypes and oversized arrays."""
    suffix = Path(path).suffix.lower()
    try:
        headers = budget.array_file_headers(_check_file(path))
    except ValueError as exc:
        detail = str(exc).removeprefix(f"{path}: ")
        if isinstance(exc, budget.ObjectArrayError):
            detail = "it holds Python objects"
        what = ("cannot read its arrays without unpickling" if suffix == ".npz" and isinstance(exc, budget.ObjectArrayError)
                else "not a readable .npz archive" if suffix == ".npz" else "not a readable .npy array without unpickling")
        raise UsageError(f"{path}: {what} ({detail}); expected {_EXPECTED.get(suffix, _EXPECTED['.npy'])}") from None
    total = 0
    for name, (shape, dtype) in headers.items():
        if dtype.kind not in "biuf":
            label = f"array {name!r}" if name else "the array"
            raise UsageError(f"{path}: {label} has dtype {dtype}; expected numbers (bool, integer or float)")
        n = shape[0] if shape else 1
        rest = budget.array_bytes(shape[1:], 1)
        total += budget.array_bytes(shape, dtype.itemsize) + budget.metrics_bytes(n, rest, 1)
    shapes = ", ".join(f"{name or 'array'} {list(shape)} {dtype}" for name, (shape, dtype) in headers.items())
    _require_fits(path, total, f"loading its arrays ({shapes[:200]}) and computing the metrics")
    return headers


def _load_npy(path: str) -> np.ndarray:
    headers = _headers(path)
    if "" not in headers:
        raise UsageError(f"{path}: an .npz archive saved as .npy; expected {_EXPECTED['.npy']}")
    try:
        array = np.load(_check_file(path), allow_pickle=False)
    except _NUMPY_ERRORS as exc:
        raise UsageError(f"{path}: not a readable .npy array without unpickling ({_one_line(exc)}); "
                         f"expected {_EXPECTED['.npy']}") from None
    if not isinstance(array, np.ndarray):
        raise UsageError(f"{path}: an .npz archive saved as .npy; expected {_EXPECTED['.npy']}")
    return array


def _load_npz(path: str) -> tuple[np.ndarray, np.ndarray]:
    headers = _headers(path)
    if "" in headers:
        raise UsageError(f"{path}: a single array, not an .npz archive; expected {_EXPECTED['.npz']}")
    for key in ("z", "labels"):
        if key not in headers:
            found = ", ".join(repr(f) for f in headers) or "nothing"
            raise UsageError(f"{path}: no array {key!r} in the archive (found {found}); expected {_EXPECTED['.npz']}")
    try:
        data = np.load(_check_file(path), allow_pickle=False)
    except _NUMPY_ERRORS as exc:
        raise UsageError(f"{path}: not a readable .npz archive ({_one_line(exc)}); expected {_EXPECTED['.npz']}") from None
    if not isinstance(data, np.lib.npyio.NpzFile):
        raise UsageError(f"{path}: a single array, not an .npz archive; expected {_EXPECTED['.npz']}")
    with data:
        try:
            return data["z"], data["labels"]
        except _NUMPY_ERRORS as exc:
            raise UsageError(f"{path}: cannot read its arrays without unpickling ({_one_line(exc)}); "
                             f"expected numeric {_EXPECTED['.npz']}") from None


def _load_pt(path: str):
    """The object of a torch.save file: a tensor or a dict {"z", "labels"} of tensors (numpy arrays out)."""
    import torch  # heavy: only for .pt files

    # a torch.save archive stores its tensors uncompressed: loading takes about its size, and the float64
    # copy for the metrics twice that for float32 (4 x the file in all, a bound before any byte is read)
    _require_fits(path, 4 * _check_file(path).stat().st_size, "loading it (4 x its size) for the metrics")
    try:
        obj = torch.load(_check_file(path), map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001 - untrusted bytes: any failure of torch's parser is a bad file
        raise UsageError(f"{path}: not readable with torch.load(weights_only=True) ({_one_line(exc)}); "
                         f"expected {_EXPECTED['.pt']}") from None

    def array(value, what: str) -> np.ndarray:
        if not isinstance(value, torch.Tensor):
            raise UsageError(f"{path}: {what} is a {type(value).__name__}, not a tensor; expected {_EXPECTED['.pt']}")
        value = value.detach().cpu()
        return (value.to(torch.float64) if value.is_floating_point() else value).numpy()

    if isinstance(obj, torch.Tensor):
        return array(obj, "the saved object"), None
    if isinstance(obj, dict):
        missing = [k for k in ("z", "labels") if k not in obj]
        if missing:
            found = ", ".join(repr(k) for k in obj) or "nothing"
            raise UsageError(f"{path}: no key {missing[0]!r} in the saved dict (found {found}); "
                             f"expected {_EXPECTED['.pt']}")
        return array(obj["z"], "'z'"), array(obj["labels"], "'labels'")
    raise UsageError(f"{path}: holds a {type(obj).__name__}; expected {_EXPECTED['.pt']}")


def _load_csv(path: str) -> tuple[np.ndarray, np.ndarray | None]:
    """(z, labels or None) from a CSV file; the header row is optional (see the module docstring).

    Read row by row into a compact float64 buffer: the memory is bounded by the budget as it grows
    (8 bytes a cell, plus the metrics' work), never by the file's size in Python objects.
    """
    import array

    limit = budget.memory_budget()
    values = array.array("d")
    header: list[str] | None = None
    width = rows = 0
    try:
        with open(_check_file(path), newline="") as fh:
            for number, row in enumerate(csv.reader(fh), start=1):
                if not any(cell.strip() for cell in row):
                    continue
                if not width:
                    width = len(row)
                    if not all(_is_number(cell) for cell in row):
                        header = [cell.strip() for cell in row]
                        continue
                if len(row) != width:
                    raise UsageError(f"{path}: line {number} has {len(row)} columns, the first line {width}")
                try:
                    values.extend(float(cell) for cell in row)
                except ValueError:
                    bad = next(cell for cell in row if not _is_number(cell))
                    raise UsageError(f"{path}: line {number}: {bad.strip()!r} is not a number; "
                                     f"expected {_EXPECTED['.csv']}") from None
                rows += 1
                if rows % 1024 == 0 and 2 * 8 * len(values) + budget.metrics_bytes(rows, width, 1) > limit:
                    _require_fits(path, 2 * 8 * len(values) + budget.metrics_bytes(rows, width, 1),
                                  f"reading its first {rows} rows of {width} columns and computing the metrics")
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise UsageError(f"{path}: not a readable CSV file ({_one_line(exc)}); expected {_EXPECTED['.csv']}") from None
    if not width:
        raise UsageError(f"{path}: empty; expected {_EXPECTED['.csv']}")
    table = np.frombuffer(values, dtype=np.float64).reshape(rows, width)
    names = header or []
    label_columns = [i for i, name in enumerate(names) if name.lower() in LABEL_COLUMNS]
    if len(label_columns) > 1:
        raise UsageError(f"{path}: more than one labels column ({', '.join(names[i] for i in label_columns)})")
    if not label_columns:
        return table, None
    i = label_columns[0]
    return np.delete(table, i, axis=1), table[:, i]


def _is_number(cell: str) -> bool:
    try:
        float(cell)
    except ValueError:
        return False
    return True


def _load_labels(path: str) -> np.ndarray:
    suffix = Path(path).suffix.lower()
    if suffix == ".npy":
        return _load_npy(path)
    if suffix == ".pt":
        labels, extra = _load_pt(path)
        if extra is not None:
            raise UsageError(f"--labels {path}: a dict of z and labels; expected a tensor of labels [N]")
        return labels
    if suffix == ".csv":
        values, labels = _load_csv(path)
        if labels is not None:
            return labels
        if values.shape[1] != 1:
            raise UsageError(f"--labels {path}: {values.shape[1]} columns; expected one column of labels [N]")
        return values[:, 0]
    raise UsageError(f"--labels {path}: unsupported file type {suffix or '(none)'!r}; expected .npy, .pt or .csv")


def load_embeddings(path: str, labels_path: str | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``(z, labels)`` from ``path`` (and ``labels_path``), or raise UsageError saying what is wrong.

    See the module docstring for the formats. Labels stored as floats (CSV) are returned as they are:
    :func:`ncgeom.metrics.nc_metrics` accepts integral values and rejects others.
    """
    suffix = _suffix(path)
    if suffix == ".npz":
        z, labels = _load_npz(path)
    elif suffix == ".npy":
        z, labels = _load_npy(path), None
    elif suffix == ".pt":
        z, labels = _load_pt(path)
    else:
        z, labels = _load_csv(path)
    if labels is not None and labels_path is not None:
        raise UsageError(f"{path}: the file has its own labels; --labels is only for files holding z alone")
    if labels is None:
        if labels_path is None:
            raise UsageError(f"{path}: holds z only; give the labels with --labels FILE (.npy, .pt or .csv)")
        labels = _load_labels(labels_path)
    return z, labels


def run(args: argparse.Namespace) -> int:
    """Handler: load, compute :func:`ncgeom.metrics.nc_metrics`, print; returns the exit code 0."""
    classes = None if args.classes is None else require_int("--classes", args.classes, min_value=2)
    z, labels = load_embeddings(args.file, args.labels)
    if classes is not None and classes > labels.size:  # every class needs a sample: C <= N (and no C-sized array)
        raise UsageError(f"--classes {classes}: every class needs a sample, but {args.file} has {labels.size}")
    if z.ndim == 2 and labels.ndim == 1 and labels.size == z.shape[0]:  # nc_metrics explains other shapes
        classes_found = np.unique(labels).size
        _require_fits(args.file, budget.metrics_bytes(z.shape[0], z.shape[1], classes_found),
                      f"the metrics of N = {z.shape[0]} samples, d = {z.shape[1]}, C = {classes_found} classes")
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
