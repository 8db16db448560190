"""Is a finished run directory whole? The check a sweep makes before it skips a run on resume.

A run directory (:mod:`ncgeom.experiments.records`) counts as finished when its summary.json exists. A
crash, a second writer or a full disk can still leave a "finished" run whose other files are damaged;
:func:`check_run` reads every file back with the record types that own it (read-only) and says what is
wrong, so that :func:`ncgeom.experiments.sweep.run_sweep` reruns the run instead of trusting it:

- ``summary.json`` parses as a :class:`~ncgeom.experiments.records.RunSummary` (strict keys);
- ``config.json`` parses (:func:`~ncgeom.experiments.records.load_config`) and equals the expected
  config, and so does the summary's config;
- every ``history.jsonl`` line (the last one included) parses as an :class:`~ncgeom.experiments.records.EpochRecord`, there are
  exactly ``epochs_run`` of them (the summary's count), numbered 1, 2, ..., ``epochs_run``;
- ``embeddings.npz`` holds exactly ``z`` [N, d] (float) and ``labels`` [N] (integer), N the config's
  training set size and d its embedding dimension (an image run: M rows, the N features or the C class
  means, ncgeom.experiments.image_train); the array headers are checked before any data is read, and
  nothing is unpickled (``allow_pickle=False``).
"""

from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np

from ncgeom.experiments.config import Config
from ncgeom.experiments.records import CONFIG_FILE, HISTORY_FILE, SUMMARY_FILE, RunSummary, load_config, load_history

__all__ = ["EMBEDDINGS_FILE", "check_run", "is_finished"]

EMBEDDINGS_FILE = "embeddings.npz"


def is_finished(run_dir: str | Path) -> bool:
    """True when ``run_dir`` has a summary.json (the last file a run writes), valid or not."""
    return (Path(run_dir) / SUMMARY_FILE).is_file()


def check_run(run_dir: str | Path, expected: Config | None = None) -> str | None:
    """None when the finished run in ``run_dir`` is whole, else one line saying what is wrong.

    Parameters
    ----------
    run_dir : path
        A run directory with a summary.json (a directory without one is reported as not finished).
    expected : Config, optional
        The config the run must have been made with (a sweep's grid point); None: the one in config.json.

    Returns
    -------
    str or None
        ``"<file>: <problem>"`` for the first problem found, None when every check passes.
    """
    path = Path(run_dir)
    if not is_finished(path):
        return f"{SUMMARY_FILE}: missing (the run did not finish)"
    try:
        summary = RunSummary.load(path)
    except (ValueError, TypeError, OSError) as exc:  # JSON errors are ValueErrors; a bad field type is a TypeError
        return f"{SUMMARY_FILE}: {_one_line(exc, path / SUMMARY_FILE)}"
    assert summary is not None  # is_finished above
    try:
        config, _ = load_config(path)
    except (ValueError, TypeError, OSError) as exc:
        return f"{CONFIG_FILE}: {_one_line(exc, path / CONFIG_FILE)}"
    expected = config if expected is None else expected
    if config != expected:
        return f"{CONFIG_FILE}: the config differs from the expected one ({_first_difference(config, expected)})"
    if summary.config != expected:
        return f"{SUMMARY_FILE}: its config differs from the expected one ({_first_difference(summary.config, expected)})"
    try:
        history = load_history(path)
        file = path / HISTORY_FILE
        lines = file.read_text(encoding="utf-8").splitlines() if file.is_file() else []
    except (ValueError, TypeError, OSError) as exc:
        return f"{HISTORY_FILE}: {_one_line(exc, path / HISTORY_FILE)}"
    if len(lines) != len(history):  # load_history drops a torn last line; a finished run has none
        return f"{HISTORY_FILE}: line {len(history) + 1} is not a complete epoch record"
    epochs = [r.epoch for r in history]
    if epochs != list(range(1, summary.epochs_run + 1)):
        return (f"{HISTORY_FILE}: {len(history)} complete epoch record(s) (epochs {_span(epochs)}), "
                f"the summary says {summary.epochs_run}")
    return _check_embeddings(path / EMBEDDINGS_FILE, expected)


def _check_embeddings(path: Path, config: Config) -> str | None:
    n, d = (None if config.is_image else config.num_train), config.embedding_dim  # image runs: any M rows
    want: dict[str, tuple[tuple[int | None, ...], str]] = {"z": ((n, d), "f"), "labels": ((n,), "iu")}
    rows = set()
    where = EMBEDDINGS_FILE
    if not path.is_file():
        return f"{where}: missing"
    try:
        with zipfile.ZipFile(path) as archive:
            members = sorted(archive.namelist())
            if members != sorted(f"{k}.npy" for k in want):
                return f"{where}: members {members}, expected z.npy and labels.npy"
            for key, (shape, kinds) in want.items():
                with archive.open(f"{key}.npy") as handle:  # header only: no data read yet
                    version = np.lib.format.read_magic(handle)
                    if version not in _HEADER_READERS:
                        return f"{where}: {key}.npy has format version {version}, expected 1.0 or 2.0 (np.savez)"
                    header_shape, _, dtype = _HEADER_READERS[version](handle)
                got = tuple(header_shape)
                if (dtype.hasobject or dtype.kind not in kinds or len(got) != len(shape)
                        or any(want_k is not None and g != want_k for g, want_k in zip(got, shape))):
                    return f"{where}: {key} is {dtype} {list(header_shape)}, expected shape {list(shape)} of kind {kinds!r}"
                rows.add(got[0])
            if len(rows) != 1:
                return f"{where}: z and labels have different numbers of rows ({sorted(rows)})"
        with np.load(path, allow_pickle=False) as data:  # sizes checked above; CRC errors surface here
            for key in want:
                data[key]
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as exc:
        return f"{where}: {_one_line(exc, path)}"
    return None


_HEADER_READERS = {(1, 0): np.lib.format.read_array_header_1_0, (2, 0): np.lib.format.read_array_header_2_0}


def _first_difference(a: Config, b: Config) -> str:
    da, db = a.to_dict(), b.to_dict()
    for key in da:
        if da[key] != db.get(key):
            return f"{key} = {da[key]!r}, expected {db.get(key)!r}"
    return "same fields"


def _span(epochs: list[int]) -> str:
    return "none" if not epochs else f"{epochs[0]}..{epochs[-1]}"


def _one_line(exc: BaseException, file: Path | None = None) -> str:
    """The exception on one line: its type unless a plain ValueError, without the file's path (said already)."""
    text = str(exc) if file is None else str(exc).replace(f"{file}: ", "").replace(str(file), file.name)
    kind = "" if type(exc) is ValueError else f"{type(exc).__name__}: "
    return " ".join(f"{kind}{text}".split())[:300]
