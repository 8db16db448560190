"""The run directory of a running run: :class:`RunFolder`, the one writer of its files.

A driver holds one RunFolder per run it trains (a ``with`` block), in this order:

1. entering it checks the folder (ValueError naming ``out_dir`` when a file is in the way or it cannot be
   created or written: :func:`ncgeom.locking.check_folder`). A folder that exists is taken now; a new one is
   made when there is something to write (:meth:`RunFolder.open`), so a run refused before its first write (bad
   data, a checkpoint that fails its checks, non-finite initial embeddings) leaves no folder behind. Taking the
   folder creates it and, with ``lock=True`` (a run trained alone: :func:`ncgeom.runs.run`), takes its lock
   (:func:`ncgeom.locking.folder_lock`: a second writer of the same folder, another ``ncgeom train --out`` or a
   sweep of that folder, is refused with the holder's pid). The runs of a stack are written under the lock of
   their sweep's folder (:func:`ncgeom.campaigns.sweep.run_sweep`), not one lock each (a stack of thousands of
   runs would hold thousands of descriptors). It then removes the temporary files of atomic writes that a killed
   writer left (``.<name>.<random>.tmp``, :func:`remove_temporary_files`: a checkpoint cut short by SIGKILL left
   one of 44 MB). Nothing else is written yet: a run validates its data, its checkpoint and its initial state
   first;
2. :meth:`RunFolder.open` removes a previous summary.json (the run is no longer finished), writes config.json with
   the provenance, and starts history.jsonl (:class:`~ncgeom.runs.records.HistoryWriter`; a resumed run's earlier
   records first);
3. :meth:`RunFolder.append` adds an epoch record; the file is rewritten (atomic rename) at the epochs with metrics
   and at :meth:`RunFolder.close` (durably);
4. :meth:`RunFolder.finish` writes embeddings.npz, then summary.json last: its presence marks a finished run.

Every file is written by atomic rename (:mod:`ncgeom.atomic_io`), so a killed run leaves each file absent or whole.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from ncgeom.locking import check_folder, folder_lock, prepare_folder
from ncgeom.runs.config import Config
from ncgeom.runs.embeddings import save_embeddings
from ncgeom.runs.records import SUMMARY_FILE, EpochRecord, HistoryWriter, RunSummary, save_config

__all__ = ["RunFolder", "remove_temporary_files"]


class RunFolder:
    """The writer of one run directory (module docstring). Use as a context manager: ``with RunFolder(d) as f``."""

    def __init__(self, path: str | Path, *, lock: bool = True):
        self.path = Path(path)
        self.lock = lock
        self._history: HistoryWriter | None = None
        self._lock: contextlib.ExitStack | None = None
        self._taken = False

    def __enter__(self) -> RunFolder:
        check_folder(self.path, what="out_dir")
        if self.path.is_dir():
            self._take()
        return self

    def _take(self) -> None:
        """Create the folder, take its lock (``lock=True``) and remove the temporary files of killed writers."""
        if self._taken:
            return
        if self.lock:
            stack = contextlib.ExitStack()
            stack.enter_context(folder_lock(self.path, hint="one writer per run folder: wait for it to end, or give "
                                                           "another --out"))  # creates the folder (ValueError if not)
            self._lock = stack
        else:
            prepare_folder(self.path, what="out_dir")
        self._taken = True
        remove_temporary_files(self.path)  # under the lock (a stack's: under its sweep's)

    def __exit__(self, *exc: Any) -> None:
        if self._lock is not None:
            self._lock.close()
            self._lock = None

    def open(self, config: Config, provenance: Mapping[str, Any], *, earlier: Iterable[EpochRecord] = ()) -> None:
        """Start writing: drop a previous summary.json, write config.json, start history.jsonl with ``earlier``."""
        self._take()
        (self.path / SUMMARY_FILE).unlink(missing_ok=True)  # unlinks a planted symlink itself, not its target
        save_config(self.path, config, provenance)
        self._history = HistoryWriter(self.path)
        for record in earlier:
            self._history.append(record, write=False)

    def append(self, record: EpochRecord) -> None:
        """Add an epoch record; history.jsonl is rewritten when the record has metrics (else at :meth:`close`)."""
        assert self._history is not None, "RunFolder.open first"
        self._history.append(record, write=record.metrics is not None)

    def close(self) -> None:
        """Write history.jsonl durably (fsync before the rename)."""
        if self._history is not None:
            self._history.close()

    def finish(self, summary: RunSummary, embeddings: np.ndarray, labels: np.ndarray) -> None:
        """embeddings.npz, then summary.json (last: its presence marks a finished run)."""
        save_embeddings(self.path, embeddings, labels)
        summary.save(self.path)


def remove_temporary_files(folder: str | Path) -> list[Path]:
    """Remove the temporary files of atomic writes cut short in ``folder`` (:func:`ncgeom.atomic_io.atomic_write_bytes`
    names them ``.<target>.<random>.tmp``); regular files only, never through a symbolic link. Returns those removed.

    Call it only while holding the folder's lock: another writer's temporary file is its write in progress.
    """
    removed = []
    for tmp in Path(folder).glob(".*.tmp"):
        if tmp.is_file() and not tmp.is_symlink():
            tmp.unlink(missing_ok=True)
            removed.append(tmp)
    return removed
