"""``embeddings.npz`` of a run directory: the final training embeddings and their labels; written and checked here.

A run writes ``z`` [M, d] (float64) and ``labels`` [M] (int64) with :func:`save_embeddings` (np.savez, atomic
rename); :func:`check_embeddings` checks a finished run's file without unpickling anything and before reading
any array data; :func:`load_embeddings` reads it back.
"""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import numpy as np

from ncgeom.atomic_io import atomic_write_bytes
from ncgeom.data.embeddings import array_file_headers
from ncgeom.runs.config import Config
from ncgeom.validate import one_line_error

__all__ = ["EMBEDDINGS_FILE", "save_embeddings", "check_embeddings", "load_embeddings"]

EMBEDDINGS_FILE = "embeddings.npz"


def save_embeddings(run_dir: str | Path, z: np.ndarray, labels: np.ndarray) -> Path:
    """Write ``run_dir/embeddings.npz`` (``z``, ``labels``) by atomic rename."""
    buf = io.BytesIO()
    np.savez(buf, z=z, labels=labels)
    return atomic_write_bytes(Path(run_dir) / EMBEDDINGS_FILE, buf.getvalue())


def load_embeddings(run_dir: str | Path, config: Config) -> tuple[np.ndarray, np.ndarray]:
    """(z, labels) of ``run_dir/embeddings.npz``, checked first (:func:`check_embeddings`; ValueError naming the
    problem)."""
    problem = check_embeddings(run_dir, config)
    if problem is not None:
        raise ValueError(f"{run_dir}: {problem}")
    with np.load(Path(run_dir) / EMBEDDINGS_FILE, allow_pickle=False) as data:
        return data["z"], data["labels"]


def check_embeddings(run_dir: str | Path, config: Config) -> str | None:
    """None when ``run_dir/embeddings.npz`` holds what a run of ``config`` writes, else one line saying what is wrong.

    Exactly ``z`` [M, d] (float) and ``labels`` [M] (integer): M = N, the config's training set size (an image
    run: any M, its N features or its C class means, ncgeom.runs.images), d the embedding dimension. The array
    headers are checked before any data is read, and nothing is unpickled (``allow_pickle=False``).
    """
    path = Path(run_dir) / EMBEDDINGS_FILE
    n, d = (None if config.is_image else config.num_train), config.embedding_dim  # image runs: any M rows
    want: dict[str, tuple[tuple[int | None, ...], str]] = {"z": ((n, d), "f"), "labels": ((n,), "iu")}
    where = EMBEDDINGS_FILE
    if not path.is_file():
        return f"{where}: missing"
    try:
        headers = array_file_headers(path)  # a regular file; the headers only, nothing unpickled
        members = sorted(f"{k}.npy" for k in headers)
        if members != sorted(f"{k}.npy" for k in want):
            return f"{where}: members {members}, expected z.npy and labels.npy"
        rows = set()
        for key, (shape, kinds) in want.items():
            got, dtype = headers[key]
            if (dtype.kind not in kinds or len(got) != len(shape)
                    or any(want_k is not None and g != want_k for g, want_k in zip(got, shape))):
                return f"{where}: {key} is {dtype} {list(got)}, expected shape {list(shape)} of kind {kinds!r}"
            rows.add(got[0])
        if len(rows) != 1:
            return f"{where}: z and labels have different numbers of rows ({sorted(rows)})"
        with np.load(path, allow_pickle=False) as data:  # sizes checked above; CRC errors surface here
            for key in want:
                data[key]
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as exc:
        return f"{where}: {one_line_error(exc, path)}"
    return None
