"""A user's embeddings files read back as ``(z, labels)``: .npz, .npy, .pt, .csv; nothing is ever unpickled.

The one reader of saved embeddings (``ncgeom metrics``, docs/theory.md, section 8). Formats, by the file's
extension:

``.npz``
    Arrays ``z`` [N, d] and ``labels`` [N]: ``np.savez("emb.npz", z=z, labels=labels)``.
``.npy``
    The array ``z`` [N, d] alone (``np.save``); the labels come from a separate labels file.
``.pt``
    ``torch.save`` of a dict ``{"z": tensor [N, d], "labels": tensor [N]}``, or of the tensor ``z``
    alone (labels from a labels file). Read with ``torch.load(weights_only=True)``.
``.csv``
    One row per sample, numeric columns. With a header, a column named ``label`` or ``labels`` holds the
    labels and every other column is a coordinate of z; without one (or without such a column), every
    column is a coordinate and the labels come from a labels file.

A labels file is a ``.npy`` array, a ``.pt`` tensor or a one-column ``.csv`` of N integers; it is required
for the tensor-only formats above and refused where the file has its own labels. ``.npy`` files are read
with ``allow_pickle=False``.

Limits: before anything is loaded, the arrays of a ``.npy``/``.npz`` are measured from their headers
(:func:`array_file_headers`: shape and dtype; object dtypes refused), a ``.pt`` from its file size, a
``.csv`` while it is read; with the metrics' own work (:func:`ncgeom.budget.metrics_bytes`) they must fit
the memory budget (:func:`ncgeom.budget.memory_budget`), so a small archive declaring 16 GB of arrays is
refused at once. Every file is opened with :func:`ncgeom.files.open_regular`: a FIFO, a device (a link to
``/dev/zero``), a socket or a link loop is refused, never read, and the descriptor checked is the one read.
A CSV line longer than a quarter of the budget (characters) is refused before it is held whole. torch's
warnings are silenced while a ``.pt`` file is parsed. Every bad file is a ValueError with one line naming
the file and what was expected.
"""

from __future__ import annotations

import array
import csv
import io
import pickle
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from ncgeom import budget
from ncgeom.files import load_torch, open_regular

__all__ = [
    "FORMATS",
    "LABEL_FORMATS",
    "LABEL_COLUMNS",
    "EXPECTED",
    "ObjectArrayError",
    "npy_header",
    "array_file_headers",
    "load_embeddings",
    "load_labels",
]

FORMATS: tuple[str, ...] = (".npz", ".npy", ".pt", ".csv")
LABEL_FORMATS: tuple[str, ...] = (".npy", ".pt", ".csv")
LABEL_COLUMNS: tuple[str, ...] = ("label", "labels")
#: What each format must hold, as the error messages and ``ncgeom metrics --help`` say it.
EXPECTED: dict[str, str] = {
    ".npz": "arrays 'z' [N, d] and 'labels' [N] (np.savez(path, z=..., labels=...))",
    ".npy": "one numeric array z [N, d] (np.save), labels via --labels",
    ".pt": "torch.save of {'z': tensor [N, d], 'labels': tensor [N]} or of the tensor z (labels via --labels)",
    ".csv": "numeric columns, labels in a column named 'label' or 'labels' or via --labels",
}
# what numpy raises on a file that is not the array/archive it claims to be
_NUMPY_ERRORS = (OSError, ValueError, EOFError, zipfile.BadZipFile, pickle.UnpicklingError, KeyError)


# --------------------------------------------------------------------------------------------------- headers
class ObjectArrayError(ValueError):
    """A .npy header declares an object dtype: reading it would unpickle, which ncgeom never does."""


def npy_header(fh: BinaryIO, *, where: str) -> tuple[tuple[int, ...], np.dtype]:
    """(shape, dtype) declared by the .npy header at the position of ``fh``, read without the data.

    ValueError naming ``where`` for a file that is not .npy (versions 1.0 and 2.0) or declares an object
    dtype (:class:`ObjectArrayError`: loading it would unpickle).
    """
    try:
        version = np.lib.format.read_magic(fh)
        if version == (1, 0):
            shape, _, dtype = np.lib.format.read_array_header_1_0(fh)
        elif version == (2, 0):
            shape, _, dtype = np.lib.format.read_array_header_2_0(fh)
        else:
            raise ValueError(f"unsupported .npy format version {version[0]}.{version[1]}")
    except (ValueError, EOFError, OSError) as exc:
        raise ValueError(f"{where}: not a .npy array ({' '.join(str(exc).split())})") from None
    if dtype.hasobject:
        raise ObjectArrayError(f"{where}: holds Python objects (dtype {dtype}); only numeric arrays are read "
                               "(never unpickled)")
    return tuple(int(s) for s in shape), dtype


def array_file_headers(path: str | Path) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
    """{name: (shape, dtype)} of the arrays of a .npy (name "") or .npz file, from their headers only.

    Nothing is decompressed beyond each member's header, so a small .npz declaring 16 GB of arrays is
    measured in microseconds (:func:`ncgeom.budget.array_bytes` of each entry) before any allocation.
    """
    path = Path(path)
    with open_regular(path) as fh:
        magic = fh.read(6)
        fh.seek(0)
        if magic == b"\x93NUMPY":
            return {"": npy_header(fh, where=str(path))}
        try:
            archive = zipfile.ZipFile(fh)
        except (zipfile.BadZipFile, OSError, EOFError) as exc:
            raise ValueError(f"{path}: neither a .npy array nor a .npz archive ({' '.join(str(exc).split())})") from None
        return _member_headers(path, archive)


def _member_headers(path: Path, archive: zipfile.ZipFile) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
    out = {}
    with archive:
        for info in archive.infolist():
            name = info.filename[: -len(".npy")] if info.filename.endswith(".npy") else info.filename
            try:
                with archive.open(info) as member:
                    out[name] = npy_header(member, where=f"{path}: member {info.filename!r}")  # type: ignore[arg-type]
            except (zipfile.BadZipFile, NotImplementedError, RuntimeError, EOFError) as exc:
                raise ValueError(f"{path}: member {info.filename!r} unreadable ({' '.join(str(exc).split())})") from None
    return out


# --------------------------------------------------------------------------------------------------- loading
def load_embeddings(path: str, labels_path: str | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``(z, labels)`` from the embeddings file ``path`` (and the labels file ``labels_path``).

    Parameters
    ----------
    path : str
        A .npz, .npy, .pt or .csv file (module docstring); the extension decides the format.
    labels_path : str or None
        The labels [N] (:func:`load_labels`) for a file that holds z alone; refused where the file has its
        own labels.

    Returns
    -------
    z : numpy.ndarray
        [N, d] as stored (a .pt float tensor as float64).
    labels : numpy.ndarray
        [N] as stored: labels stored as floats (CSV) are returned as they are, since
        :func:`ncgeom.metrics.nc_metrics` accepts integral values and rejects others.

    Raises
    ------
    ValueError
        One line naming the file: missing, a directory, an unsupported extension, unreadable, not the
        structure of its format, holding Python objects, or needing more than the memory budget.
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
        raise ValueError(f"{path}: the file has its own labels; --labels is only for files holding z alone")
    if labels is None:
        if labels_path is None:
            raise ValueError(f"{path}: holds z only; give the labels with --labels FILE (.npy, .pt or .csv)")
        labels = load_labels(labels_path)
    return z, labels


def load_labels(path: str) -> np.ndarray:
    """The labels [N] of a labels file: a .npy array, a .pt tensor or a one-column .csv (ValueError otherwise)."""
    suffix = Path(path).suffix.lower()
    if suffix == ".npy":
        return _load_npy(path)
    if suffix == ".pt":
        tensor, extra = _load_pt(path)
        if extra is not None:
            raise ValueError(f"--labels {path}: a dict of z and labels; expected a tensor of labels [N]")
        return tensor
    if suffix == ".csv":
        values, labels = _load_csv(path)
        if labels is not None:
            return labels
        if values.shape[1] != 1:
            raise ValueError(f"--labels {path}: {values.shape[1]} columns; expected one column of labels [N]")
        return values[:, 0]
    raise ValueError(f"--labels {path}: unsupported file type {suffix or '(none)'!r}; expected .npy, .pt or .csv")


def _one_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return f"{exc.__class__.__name__}: {lines[0] if lines else ''}"


def _open(path: str) -> io.BufferedReader:
    """``path`` opened if it is a regular file (:func:`ncgeom.files.open_regular`), else a one-line ValueError."""
    return open_regular(path)


def _suffix(path: str) -> str:
    suffix = Path(path).suffix.lower()
    if suffix not in FORMATS:
        expected = "; ".join(f"{ext}: {text}" for ext, text in EXPECTED.items())
        raise ValueError(f"{path}: unsupported file type {suffix or '(none)'!r}; expected {expected}")
    return suffix


def _headers(path: str) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
    """The declared (shape, dtype) of every array of a .npy/.npz file; refuses object dtypes and oversized arrays."""
    suffix = Path(path).suffix.lower()
    _open(path).close()  # a missing file, a directory, a FIFO ...: the refusal of open_regular, unchanged
    try:
        headers = array_file_headers(path)
    except ValueError as exc:
        detail = str(exc).removeprefix(f"{path}: ")
        if isinstance(exc, ObjectArrayError):
            detail = "it holds Python objects"
        what = ("cannot read its arrays without unpickling" if suffix == ".npz" and isinstance(exc, ObjectArrayError)
                else "not a readable .npz archive" if suffix == ".npz" else "not a readable .npy array without unpickling")
        raise ValueError(f"{path}: {what} ({detail}); expected {EXPECTED.get(suffix, EXPECTED['.npy'])}") from None
    total = 0
    for name, (shape, dtype) in headers.items():
        if dtype.kind not in "biuf":
            label = f"array {name!r}" if name else "the array"
            raise ValueError(f"{path}: {label} has dtype {dtype}; expected numbers (bool, integer or float)")
        n = shape[0] if shape else 1
        rest = budget.array_bytes(shape[1:], 1)
        total += budget.array_bytes(shape, dtype.itemsize) + budget.metrics_bytes(n, rest, 1)
    shapes = ", ".join(f"{name or 'array'} {list(shape)} {dtype}" for name, (shape, dtype) in headers.items())
    budget.require_file_within_budget(path, total, what=f"loading its arrays ({shapes[:200]}) and computing the metrics")
    return headers


def _load_npy(path: str) -> np.ndarray:
    headers = _headers(path)
    if "" not in headers:
        raise ValueError(f"{path}: an .npz archive saved as .npy; expected {EXPECTED['.npy']}")
    with _open(path) as fh:
        try:
            loaded = np.load(fh, allow_pickle=False)
        except _NUMPY_ERRORS as exc:
            raise ValueError(f"{path}: not a readable .npy array without unpickling ({_one_line(exc)}); "
                             f"expected {EXPECTED['.npy']}") from None
    if not isinstance(loaded, np.ndarray):
        raise ValueError(f"{path}: an .npz archive saved as .npy; expected {EXPECTED['.npy']}")
    return loaded


def _load_npz(path: str) -> tuple[np.ndarray, np.ndarray]:
    headers = _headers(path)
    if "" in headers:
        raise ValueError(f"{path}: a single array, not an .npz archive; expected {EXPECTED['.npz']}")
    for key in ("z", "labels"):
        if key not in headers:
            found = ", ".join(repr(f) for f in headers) or "nothing"
            raise ValueError(f"{path}: no array {key!r} in the archive (found {found}); expected {EXPECTED['.npz']}")
    with _open(path) as fh:
        try:
            data = np.load(fh, allow_pickle=False)
        except _NUMPY_ERRORS as exc:
            raise ValueError(f"{path}: not a readable .npz archive ({_one_line(exc)}); "
                             f"expected {EXPECTED['.npz']}") from None
        if not isinstance(data, np.lib.npyio.NpzFile):
            raise ValueError(f"{path}: a single array, not an .npz archive; expected {EXPECTED['.npz']}")
        with data:
            try:
                return data["z"], data["labels"]
            except _NUMPY_ERRORS as exc:
                raise ValueError(f"{path}: cannot read its arrays without unpickling ({_one_line(exc)}); "
                                 f"expected numeric {EXPECTED['.npz']}") from None


def _load_pt(path: str) -> tuple[np.ndarray, np.ndarray | None]:
    """The object of a torch.save file: a tensor or a dict {"z", "labels"} of tensors (numpy arrays out)."""
    import torch  # heavy: only for .pt files

    # a torch.save archive stores its tensors uncompressed: loading takes about its size, and the float64
    # copy for the metrics twice that for float32 (4 x the file in all, a bound before any byte is read)
    obj = load_torch(path, what="it for the metrics", expected=EXPECTED[".pt"], copies=4)

    def as_array(value: Any, what: str) -> np.ndarray:
        if not isinstance(value, torch.Tensor):
            raise ValueError(f"{path}: {what} is a {type(value).__name__}, not a tensor; expected {EXPECTED['.pt']}")
        value = value.detach().cpu()
        return (value.to(torch.float64) if value.is_floating_point() else value).numpy()

    if isinstance(obj, torch.Tensor):
        return as_array(obj, "the saved object"), None
    if isinstance(obj, dict):
        missing = [k for k in ("z", "labels") if k not in obj]
        if missing:
            found = ", ".join(repr(k) for k in obj) or "nothing"
            raise ValueError(f"{path}: no key {missing[0]!r} in the saved dict (found {found}); "
                             f"expected {EXPECTED['.pt']}")
        return as_array(obj["z"], "'z'"), as_array(obj["labels"], "'labels'")
    raise ValueError(f"{path}: holds a {type(obj).__name__}; expected {EXPECTED['.pt']}")


def _load_csv(path: str) -> tuple[np.ndarray, np.ndarray | None]:
    """(z, labels or None) from a CSV file; the header row is optional (see the module docstring).

    Read row by row into a compact float64 buffer: the memory is bounded by the budget as it grows
    (8 bytes a cell, plus the metrics' work), never by the file's size in Python objects.
    """
    limit = budget.memory_budget()
    values = array.array("d")
    header: list[str] | None = None
    width = rows = 0
    try:
        with io.TextIOWrapper(_open(path), newline="") as fh:
            for number, row in enumerate(csv.reader(_bounded_lines(fh, path, max(limit // 4, 1))), start=1):
                if not any(cell.strip() for cell in row):
                    continue
                if not width:
                    width = len(row)
                    if not all(_is_number(cell) for cell in row):
                        header = [cell.strip() for cell in row]
                        continue
                if len(row) != width:
                    raise ValueError(f"{path}: line {number} has {len(row)} columns, the first line {width}")
                try:
                    values.extend(float(cell) for cell in row)
                except ValueError:
                    bad = next(cell for cell in row if not _is_number(cell))
                    raise ValueError(f"{path}: line {number}: {bad.strip()!r} is not a number; "
                                     f"expected {EXPECTED['.csv']}") from None
                rows += 1
                if rows % 1024 == 0 and 2 * 8 * len(values) + budget.metrics_bytes(rows, width, 1) > limit:
                    budget.require_file_within_budget(
                        path, 2 * 8 * len(values) + budget.metrics_bytes(rows, width, 1),
                        what=f"reading its first {rows} rows of {width} columns and computing the metrics")
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise ValueError(f"{path}: not a readable CSV file ({_one_line(exc)}); expected {EXPECTED['.csv']}") from None
    if not width:
        raise ValueError(f"{path}: empty; expected {EXPECTED['.csv']}")
    table = np.frombuffer(values, dtype=np.float64).reshape(rows, width)
    names = header or []
    label_columns = [i for i, name in enumerate(names) if name.lower() in LABEL_COLUMNS]
    if len(label_columns) > 1:
        raise ValueError(f"{path}: more than one labels column ({', '.join(names[i] for i in label_columns)})")
    if not label_columns:
        return table, None
    i = label_columns[0]
    return np.delete(table, i, axis=1), table[:, i]


def _bounded_lines(fh: io.TextIOWrapper, path: str, max_chars: int) -> Iterator[str]:
    """The lines of ``fh``, each read with at most ``max_chars`` characters (a file of one endless line, a
    sparse file of NUL bytes, is refused before it is held whole)."""
    number = 0
    while True:
        line = fh.readline(max_chars + 1)
        if not line:
            return
        number += 1
        if len(line) > max_chars:
            raise ValueError(f"{path}: line {number} is longer than {max_chars} characters (a quarter of the memory "
                             f"budget of {budget.format_bytes(budget.memory_budget())}); expected {EXPECTED['.csv']}")
        yield line


def _is_number(cell: str) -> bool:
    try:
        float(cell)
    except ValueError:
        return False
    return True
