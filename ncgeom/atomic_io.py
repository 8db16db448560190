"""Atomic file writes and the one JSON conversion of ncgeom.

A result on disk is either the old complete file or the new complete file.

Every result file ncgeom writes (run directories, sweeps, the reproduction pipeline) goes through
:func:`atomic_write_bytes`: the bytes are
written to a temporary file in the same directory, flushed and fsync'ed, then moved over the target
with :func:`os.replace` (atomic on POSIX and Windows). An interrupted run therefore never leaves a
truncated JSON, PNG or report behind, and nothing already written is lost. The target path itself is
never opened, so a symlink planted there is replaced, never written through.

Every JSON value ncgeom writes goes through :func:`jsonable` (strict JSON: NaN and infinities become
null, numpy scalars and arrays become Python numbers and lists, paths become strings), so no file or
``--json`` output ever contains ``NaN`` or ``Infinity``.
"""

from __future__ import annotations

import errno
import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any

__all__ = ["jsonable", "dumps_json", "atomic_write_bytes", "atomic_write_text", "atomic_write_json", "read_json"]


def atomic_write_bytes(path: str | Path, data: bytes, *, durable: bool = True) -> Path:
    """Write ``data`` to ``path`` atomically (temporary file + fsync + os.replace); return the path.

    The target is never opened: the bytes go to a new file created by :func:`tempfile.mkstemp`
    (O_CREAT | O_EXCL, so never an existing file or a planted symlink) in the same directory, which
    :func:`os.replace` then renames over ``path``. A symlink at ``path`` is therefore replaced by the new
    file, and its target is left untouched.

    Parameters
    ----------
    path : path
        The file to write; its parent directory is created if needed.
    data : bytes
    durable : bool
        True (default): fsync the file before the rename, so that after a power loss the path holds the
        old or the new content. False skips the fsync (for files rewritten often, such as the history of
        a running run): the rename is still atomic for every process, so a killed process never leaves a
        partial file.

    Raises
    ------
    IsADirectoryError
        ``path`` is a directory (a one-line message naming it; nothing is written).
    OSError
        From the filesystem (read-only, full, permissions); the temporary file is removed.
    """
    path = Path(path)
    if path.is_dir() and not path.is_symlink():
        raise IsADirectoryError(errno.EISDIR, "a directory is in the way: cannot write a file there", str(path))
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, 0o666 & ~_umask())  # mkstemp creates 0600; results get the usual permissions
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            if durable:
                os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    return path


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_write_text(path: str | Path, text: str, *, durable: bool = True) -> Path:
    """Write UTF-8 ``text`` to ``path`` atomically (:func:`atomic_write_bytes`)."""
    return atomic_write_bytes(path, text.encode("utf-8"), durable=durable)


def dumps_json(obj: Any, *, indent: int | None = 2) -> str:
    """``obj`` as strict JSON text (:func:`jsonable` first; ``allow_nan=False`` as a guard)."""
    return json.dumps(jsonable(obj), indent=indent, sort_keys=False, allow_nan=False)


def atomic_write_json(path: str | Path, obj: Any) -> Path:
    """Write ``obj`` as indented strict JSON (NaN/inf written as null) to ``path`` atomically."""
    return atomic_write_text(path, dumps_json(obj) + "\n")


def read_json(path: str | Path) -> Any:
    """Read a JSON file written by :func:`atomic_write_json` (or any valid JSON)."""
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)


def jsonable(obj: Any) -> Any:
    """A deep copy of ``obj`` that strict JSON accepts.

    Non-finite floats become None; numpy (or torch) scalars and arrays become Python numbers and
    lists (via ``tolist``); tuples become lists; mapping keys become strings; paths become strings.
    """
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    if hasattr(obj, "tolist") and not isinstance(obj, (str, bytes)):  # numpy array or scalar
        return jsonable(obj.tolist())
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, Path):
        return str(obj)
    return obj
