"""One writer per output folder: an advisory lock file ``OUT/.ncgeom.lock`` held for the writer's lifetime.

``ncgeom sweep`` (:func:`ncgeom.campaigns.sweep.run_sweep`), :func:`ncgeom.campaigns.claims.run_claims`
and ``ncgeom reproduce`` take the lock of the folder they write before touching anything in it. A second
writer is refused at once with :class:`LockedError` (one line naming the holder's pid, host and start
time; the CLI exits with code 2), or waits for the holder to finish (``wait`` seconds; ``math.inf``:
without limit; the CLI's ``--wait`` / ``--wait-timeout``).

How it works: the lock is ``fcntl.flock(LOCK_EX)`` on an open file descriptor of the lock file, kept open
while the folder is written. The kernel releases it when the descriptor is closed, hence when the holder
exits or is killed (even by SIGKILL): a stale lock cannot exist, and a lock file left behind by a killed
writer (it still names that writer) is simply taken over (:attr:`FolderLock.previous` then holds what it
said). The holder writes its pid, host, start time and command line into the file, for the refusal
message only; the file is emptied on a clean release and never deleted (deleting it would let two
writers lock two different files of the same name). The descriptor is not inherited by worker processes
(close-on-exec), so a killed writer's lock is free even while its workers are still being stopped.

Nesting: the lock is re-entrant within one process (a reproduction holds ``OUT`` and the
:func:`~ncgeom.campaigns.claims.run_claims` it calls takes ``OUT`` again); every sweep folder
``OUT/sweeps/<name>`` has its own lock, taken by its :func:`~ncgeom.campaigns.sweep.run_sweep`, so a
``ncgeom sweep --out OUT/sweeps/<name>`` beside a running reproduction is refused too. Locks are only
ever taken from a folder to its sub-folders, never upwards, so two writers cannot wait for each other.

Limits: an advisory lock protects against ncgeom writers only; ``flock`` is reliable on local
filesystems (on NFS, Linux emulates it with byte-range locks, which work only if the server supports
them). Without ``fcntl`` (Windows) the first byte of the file is locked with ``msvcrt.locking``, which
the system also releases when the process dies.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import socket
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

__all__ = ["LOCK_FILE", "LockedError", "FolderLock", "folder_lock", "prepare_folder", "check_folder", "read_holder"]

LOCK_FILE = ".ncgeom.lock"
_POLL_S = 0.1  # how often a waiting writer retries

# Locks held by this process: resolved folder -> [FolderLock, depth]. Re-entrant per process.
_HELD: dict[str, list[Any]] = {}
_HELD_GUARD = threading.Lock()


class LockedError(ValueError):
    """The output folder is being written by another process (a ValueError: the CLI reports it in one line, exit 2)."""


@dataclass(frozen=True)
class FolderLock:
    """A held folder lock: the folder, the open descriptor, and what a killed previous holder left in the file."""

    folder: Path
    fd: int
    previous: dict[str, Any] | None


def prepare_folder(folder: str | Path, *, what: str = "out_dir") -> Path:
    """Create ``folder`` (and its parents) or raise a one-line ValueError naming ``what`` and the cause.

    A path naming an existing file, a parent that is a file, or a folder that cannot be created or written
    is refused here, before any work starts.
    """
    path = Path(folder)
    if path.exists() and not path.is_dir():
        raise ValueError(f"{what} {str(path)!r} exists and is not a directory")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ValueError(f"{what} {str(path)!r} cannot be created: {exc.strerror or exc}") from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise ValueError(f"{what} {str(path)!r} is not writable")
    return path


def check_folder(folder: str | Path, *, what: str = "out_dir") -> Path:
    """The refusals of :func:`prepare_folder` without creating anything: ``folder`` is a writable directory, or
    its nearest existing ancestor is one (so that it can be created when there is something to write)."""
    path = Path(folder)
    if os.path.lexists(path) and not path.is_dir():
        raise ValueError(f"{what} {str(path)!r} exists and is not a directory")
    ancestor = path if path.is_dir() else path.absolute().parent
    while not os.path.lexists(ancestor):
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise ValueError(f"{what} {str(path)!r} cannot be created: {str(ancestor)!r} is not a directory")
    if not os.access(ancestor, os.W_OK | os.X_OK):
        raise ValueError(f"{what} {str(path)!r} " + ("is not writable" if ancestor == path else
                                                     f"cannot be created: {str(ancestor)!r} is not writable"))
    return path


def read_holder(folder: str | Path) -> dict[str, Any] | None:
    """What the lock file of ``folder`` says about its (last) holder: pid, host, started, command; None if empty."""
    try:
        text = (Path(folder) / LOCK_FILE).read_text(encoding="utf-8")
    except OSError:
        return None
    return _parse_holder(text)


def _parse_holder(text: str) -> dict[str, Any] | None:
    try:
        data = json.loads(text)
    except ValueError:
        return None
    return data if isinstance(data, dict) and isinstance(data.get("pid"), int) else None


def _describe(holder: dict[str, Any] | None) -> str:
    if holder is None:
        return "another process (it has not written its pid yet)"
    return f"pid {holder['pid']} on {holder.get('host', '?')} (started {holder.get('started', '?')})"


def _try_lock(fd: int) -> bool:
    if fcntl is not None:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True
    import msvcrt  # pragma: no cover - Windows

    try:  # pragma: no cover
        os.lseek(fd, 0, os.SEEK_SET)
        msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
    except OSError:  # pragma: no cover
        return False
    return True  # pragma: no cover


_WAIT_HINT = "pass --wait to wait for it"


def _acquire(folder: Path, wait: float, hint: str = _WAIT_HINT) -> FolderLock:
    path = folder / LOCK_FILE
    flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags, 0o644)
    except OSError as exc:
        raise ValueError(f"cannot create the lock file {str(path)!r}: {exc.strerror or exc}") from None
    try:
        deadline = time.monotonic() + wait
        while not _try_lock(fd):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                holder = read_holder(folder)
                if holder is None:  # the holder may be between taking the lock and writing its pid
                    time.sleep(_POLL_S)
                    holder = read_holder(folder)
                waited = f" after waiting {wait:g} s" if wait > 0 else ""
                advice = f"; {hint}" if wait == 0 and hint else ""
                raise LockedError(f"{folder} is being written by {_describe(holder)}{waited}{advice}")
            time.sleep(min(_POLL_S, remaining))
        previous = _parse_holder(os.pread(fd, 1 << 16, 0).decode("utf-8", "replace"))
        me = {"pid": os.getpid(), "host": socket.gethostname(),
              "started": datetime.now(UTC).isoformat(timespec="seconds"), "command": " ".join(sys.argv)}
        os.ftruncate(fd, 0)
        os.pwrite(fd, (json.dumps(me) + "\n").encode("utf-8"), 0)
        return FolderLock(folder, fd, previous)
    except BaseException:
        os.close(fd)
        raise


@contextlib.contextmanager
def folder_lock(folder: str | Path, *, wait: float = 0.0, hint: str = _WAIT_HINT) -> Iterator[FolderLock]:
    """Hold the lock of ``folder`` (created if missing, :func:`prepare_folder`) for the ``with`` block.

    Parameters
    ----------
    folder : path
        The output folder; its lock file is ``folder/.ncgeom.lock``.
    wait : float
        Seconds to wait for another holder to finish (0: refuse at once; ``math.inf``: no limit).
    hint : str
        What a refused writer can do, appended to the refusal when ``wait`` is 0 (the commands with ``--wait``
        say to pass it; ``ncgeom train``, which has none, says to wait or to write elsewhere).

    Raises
    ------
    LockedError
        Another process holds the lock (still, after ``wait`` seconds); the message names its pid.
    ValueError
        The folder cannot be created or written.
    """
    if not (isinstance(wait, (int, float)) and not isinstance(wait, bool) and wait >= 0 and not math.isnan(wait)):
        raise ValueError(f"wait must be a number of seconds >= 0 (math.inf: no limit), got {wait!r}")
    path = prepare_folder(folder)
    key = os.path.realpath(path)
    with _HELD_GUARD:
        held = _HELD.get(key)
        if held is not None:
            held[1] += 1
    if held is not None:  # re-entrant: this process already holds it
        try:
            yield held[0]
        finally:
            with _HELD_GUARD:
                held[1] -= 1
        return
    lock = _acquire(path, float(wait), hint)
    with _HELD_GUARD:
        _HELD[key] = [lock, 1]
    try:
        yield lock
    finally:
        with _HELD_GUARD:
            _HELD.pop(key, None)
        try:
            os.ftruncate(lock.fd, 0)  # a clean release leaves an empty file: nothing to take over
        finally:
            os.close(lock.fd)  # releases the lock
