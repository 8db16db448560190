"""Stopping cleanly on SIGINT and SIGTERM: the signal becomes an exception that unwinds the writer.

``ncgeom sweep`` and ``ncgeom reproduce`` run inside :func:`raise_on_signals`: the first SIGINT (Ctrl-C)
or SIGTERM raises :class:`Interrupted` in the main thread. Unwinding it cancels the queued runs,
terminates the worker processes (:func:`ncgeom.campaigns.executors.make_executor`), leaves every
finished run as it is (summary.json is written last and atomically) and releases the folder lock
(:mod:`ncgeom.locking`). Further signals during that cleanup are ignored, so it cannot be cut short
half-way; it takes well under a second. The command then exits with ``128 + signal number``: 130 for
SIGINT, 143 for SIGTERM.

:class:`Interrupted` subclasses KeyboardInterrupt, so ``except Exception`` (which records a failed run or
stage and goes on) never swallows it.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator

__all__ = ["Interrupted", "raise_on_signals", "STOP_SIGNALS"]

STOP_SIGNALS: tuple[signal.Signals, ...] = (signal.SIGINT, signal.SIGTERM)


class Interrupted(KeyboardInterrupt):
    """A stop signal arrived: ``signum``, its ``name`` (SIGTERM) and the conventional ``exit_code`` 128 + signum."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = int(signum)

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


@contextlib.contextmanager
def raise_on_signals(signals: tuple[signal.Signals, ...] = STOP_SIGNALS) -> Iterator[None]:
    """Within the block, the first of ``signals`` raises :class:`Interrupted`; later ones are ignored.

    The previous handlers are restored on exit. Outside the main thread (where Python cannot install
    signal handlers) the block runs unchanged.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    fired = False

    def handler(signum, frame) -> None:
        nonlocal fired
        if fired:  # cleanup of the first signal is under way: let it finish
            return
        fired = True
        raise Interrupted(signum)

    previous = {s: signal.signal(s, handler) for s in signals}
    try:
        yield
    finally:
        for s, old in previous.items():
            signal.signal(s, old)
