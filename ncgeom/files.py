"""Bounded reads of a user's files: regular files only, sized against the memory budget before any byte is read.

Every reader of a file a user gives ncgeom (data set files, images, embeddings, labels; specs and configs
may use it too) opens it through :func:`open_regular` or reads it with :func:`read_bounded`, so that no
input can hang a command or grow it without bound (docs/reliability.md, "Bounded reads"):

1. The file is opened with ``O_NONBLOCK``, so opening a FIFO never waits for a writer, and
   ``O_NOCTTY``. A symbolic link is followed (the kernel refuses a link loop with ELOOP).
2. What was opened is checked with ``fstat`` on the open descriptor (not on the path, so a file swapped
   between the check and the read is still the one checked): only a regular file is accepted. A FIFO, a
   character device (``/dev/zero``, a terminal), a block device, a socket or a directory is refused with a
   ValueError naming the path, what it is (and the link's target when the path is a symbolic link), and
   what is accepted.
3. :func:`read_bounded` compares the size ``fstat`` gives with a limit before reading: the memory budget of
   :func:`ncgeom.budget.memory_budget` by default, or the caller's ``max_bytes`` (the size a format
   allows). A sparse file of 3 GiB is refused in microseconds under ``--max-memory 200M``.
4. It then reads exactly that many bytes (the buffered reader loops until it has them, one allocation of
   the checked size) and one more: a file that shrinks or grows while it is read (a log being appended
   to, a ``/proc`` file whose size says 0) is refused instead of being read past its checked size.

Every refusal is a ValueError with one line, ``<path>: <what was found>; <what is accepted>``, which the
CLI reports with exit code 2 (:mod:`ncgeom.cli.main`).

:func:`quiet_warnings` is the companion for the parsers of untrusted bytes (Pillow, torch): inside it,
their warnings are dropped, so an error path prints one line and nothing around it. :func:`load_torch` puts
the three together for ``torch.save`` files (embeddings, checkpoints): a regular file, its size times the
copies loading makes within the budget, ``torch.load(weights_only=True)`` with its warnings silenced, and
any failure of torch's parser a one-line ValueError.
"""

from __future__ import annotations

import contextlib
import errno
import io
import logging
import os
import stat
import warnings
from collections.abc import Iterator
from typing import Any

from ncgeom import budget

__all__ = ["open_regular", "regular_file_size", "read_bounded", "load_torch", "quiet_warnings", "describe_kind"]

_ACCEPTED = "expected a regular file (FIFOs, devices and sockets are never read: they can block or never end)"
_KINDS = (
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISDIR, "a directory"),
)


def describe_kind(mode: int) -> str:
    """What a file of ``st_mode`` ``mode`` is, in words: ``a FIFO (named pipe)``, ``a character device``, ..."""
    for test, words in _KINDS:
        if test(mode):
            return words
    return "a regular file" if stat.S_ISREG(mode) else "not a regular file"


def open_regular(path: str | os.PathLike) -> io.BufferedReader:
    """Open ``path`` for binary reading if it is a regular file (a link to one included); refuse anything else.

    Parameters
    ----------
    path : path
        The user's file. A symbolic link is followed; a link loop, a broken link, a FIFO, a device, a
        socket or a directory is refused.

    Returns
    -------
    io.BufferedReader
        Positioned at the start; the caller closes it (``with open_regular(...) as fh:``).

    Raises
    ------
    ValueError
        ``<path>: no such file``, ``<path>: is a directory, not a file``, ``<path>: is a FIFO (named pipe);
        expected a regular file ...``, ``<path>: is a symbolic link to /dev/zero, a character device; ...``,
        ``<path>: is a symbolic link loop ...``, ``<path>: cannot be read (Permission denied)``: one line
        naming the path.
    """
    name = os.fspath(path)
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(name, flags)
    except OSError as exc:
        raise ValueError(_open_error(name, exc)) from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise ValueError(_not_regular(name, mode))
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def regular_file_size(path: str | os.PathLike) -> int:
    """The size in bytes of the regular file ``path`` (refusals as :func:`open_regular`); nothing is read."""
    with open_regular(path) as fh:
        return os.fstat(fh.fileno()).st_size


def read_bounded(path: str | os.PathLike, *, what: str = "a file", max_bytes: int | None = None) -> bytes:
    """The bytes of the regular file ``path``, its size checked against a limit before any byte is read.

    Parameters
    ----------
    path : path
    what : str
        What the file should hold, with its article, for the messages.
    max_bytes : int or None
        The largest size accepted. None: the memory budget (:func:`ncgeom.budget.memory_budget`), and a
        larger file is refused with the budget's message (how to raise it); an int: the size the caller's
        format allows (a file read after its size was checked passes that size, so a file that grew in
        between is refused).

    Raises
    ------
    ValueError
        The refusals of :func:`open_regular`; a file above the limit; a file whose size changed while it
        was read.
    """
    name = os.fspath(path)
    with open_regular(name) as fh:
        size = os.fstat(fh.fileno()).st_size
        if max_bytes is None:
            budget.require_file_within_budget(name, size, what=f"reading {what} of {budget.format_bytes(size)}")
        elif size > max_bytes:
            raise ValueError(f"{name}: {budget.format_bytes(size)} ({size} bytes), above the {max_bytes} bytes "
                             f"accepted for {what}")
        try:
            data = fh.read(size)
            extra = fh.read(1)
        except OSError as exc:
            raise ValueError(f"{name}: cannot be read ({_reason(exc)})") from None
    if len(data) != size or extra:
        change = "shrank" if len(data) < size else "grew"
        raise ValueError(f"{name}: the file {change} while it was read (its size was {size} bytes); "
                         f"expected {what} that does not change")
    return data


def load_torch(path: str | os.PathLike, *, what: str, expected: str, copies: int = 1) -> Any:
    """The object of the ``torch.save`` file ``path``, read with ``torch.load(weights_only=True)`` on the CPU.

    Parameters
    ----------
    path : path
        A regular file (:func:`open_regular`); nothing is unpickled as code (``weights_only``).
    what : str
        The file in the budget's message: ``<path>: loading <what> (<copies> x its size) needs about ...``.
    expected : str
        What the file should hold, for the message when torch cannot read it.
    copies : int
        The bytes loading holds, in multiples of the file's size (tensors are stored uncompressed: 1 for
        the load, more for the caller's copies), checked against the memory budget before any byte is read.

    Raises
    ------
    ValueError
        The refusals of :func:`open_regular`; above the budget; ``<path>: not readable with
        torch.load(weights_only=True) (<type>: <first line>); expected <expected>`` for any failure of
        torch's parser (truncated or corrupt archives, refused globals, malformed pickles).
    """
    import torch  # heavy: only for .pt files

    name = os.fspath(path)
    with open_regular(name) as fh:
        size = os.fstat(fh.fileno()).st_size
        budget.require_file_within_budget(name, copies * size, what=f"loading {what} ({copies} x its size)")
        try:
            with quiet_warnings():
                return torch.load(fh, map_location="cpu", weights_only=True)
        except Exception as exc:  # noqa: BLE001 - untrusted bytes: any failure of torch's parser is a bad file
            raise ValueError(f"{name}: not readable with torch.load(weights_only=True) ({_torch_reason(exc)}); "
                             f"expected {expected}") from None


def _torch_reason(exc: Exception) -> str:
    """The reason of a torch.load failure in one short line.

    The weights-only unpickler's message opens with advice that does not apply to an untrusted file
    (rerun with ``weights_only=False``, which can execute code), then gives its reason (``Unsupported
    operand 149``, ``Trying to load unsupported GLOBAL os.system ...``), then a link: only the reason is kept.
    """
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    if lines and lines[0].startswith("Weights only load failed"):
        reasons = []
        for line in lines[1:]:
            line = line.split("WeightsUnpickler error:", 1)[1].strip() if "WeightsUnpickler error:" in line else line
            if line and not line.startswith(("Please file an issue", "Check the documentation")):
                reasons.append(line)
        reason = reasons[0].split(". ")[0] if reasons else "refused"
        return f"{type(exc).__name__}: the weights-only unpickler refused it: {reason}"[:300]
    return f"{type(exc).__name__}: {lines[0] if lines else ''}"[:300]


@contextlib.contextmanager
def quiet_warnings(*errors: type[Warning], loggers: tuple[str, ...] = ()) -> Iterator[None]:
    """Within the block, drop every warning, except the categories ``errors``, which are raised.

    For the parsers of untrusted bytes (Pillow, torch): a warning about a malformed input (Pillow's
    "image file is truncated", torch's notes on legacy formats) would otherwise print several lines around
    the one-line error, or around a successful read. ``errors`` turns the warnings that mean "refuse this
    input" into exceptions the caller catches (Pillow's DecompressionBombWarning). ``loggers`` are
    silenced too (their level raised above CRITICAL): Pillow reports some malformed files with
    ``logging.error`` (a TIFF with 2048 samples per pixel), which Python prints to stderr when the
    application configured no logging. Not thread-safe (:class:`warnings.catch_warnings`, logger levels);
    ncgeom decodes in the main thread or in worker processes.
    """
    silenced = [logging.getLogger(name) for name in loggers]
    before = [logger.level for logger in silenced]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for category in errors:
            warnings.simplefilter("error", category)
        for logger in silenced:  # a level above CRITICAL: its child loggers (PIL.TiffImagePlugin) inherit it
            logger.setLevel(logging.CRITICAL + 1)
        try:
            yield
        finally:
            for logger, level in zip(silenced, before):
                logger.setLevel(level)


def _reason(exc: OSError) -> str:
    return exc.strerror or " ".join(str(exc).split()) or type(exc).__name__


def _link_note(name: str) -> str:
    """``"a symbolic link to TARGET, "`` when ``name`` is a link, else ``""``."""
    try:
        if os.path.islink(name):
            return f"a symbolic link to {os.readlink(name)}, "
    except OSError:
        pass
    return ""


def _not_regular(name: str, mode: int) -> str:
    if stat.S_ISDIR(mode):
        return f"{name}: is a directory, not a file"
    return f"{name}: is {_link_note(name)}{describe_kind(mode)}; {_ACCEPTED}"


def _open_error(name: str, exc: OSError) -> str:
    if exc.errno == errno.ENOENT:
        note = _link_note(name)
        return f"{name}: no such file" + (f" ({note.removesuffix(', ')}, which does not exist)" if note else "")
    if exc.errno == errno.ELOOP:
        return f"{name}: is a symbolic link loop (following its links never reaches a file); expected a regular file"
    if exc.errno == errno.EISDIR:
        return f"{name}: is a directory, not a file"
    if exc.errno == errno.ENXIO:  # opening a socket (or a FIFO with no reader for writing)
        try:
            mode = os.stat(name).st_mode
        except OSError:
            mode = 0
        if mode:
            return _not_regular(name, mode)
    if exc.errno == errno.ENOTDIR:
        return f"{name}: no such file (a part of the path is not a folder)"
    return f"{name}: cannot be read ({_reason(exc)})"

