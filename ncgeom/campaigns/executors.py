"""The one executor builder of ncgeom: where runs get their parallelism.

:func:`make_executor` (used by ``ncgeom sweep``, :func:`ncgeom.campaigns.claims.run_claims` and
``ncgeom reproduce``) gives none (runs in this process), a process pool (spawn start method, one CPU
thread per worker) or a Dask cluster. Pool workers die with the process that started them, whatever ends
it (even SIGKILL): on Linux the kernel sends them SIGKILL (``PR_SET_PDEATHSIG``), and everywhere a
watchdog thread in each worker exits it within a second of its parent's death. Workers ignore SIGINT (a
Ctrl-C reaches the whole process group; the parent decides), and an exception leaving
:func:`make_executor` (an :class:`ncgeom.interrupts.Interrupted` from SIGTERM or SIGINT included) cancels
the queued runs and terminates the workers instead of waiting for them (docs/reliability.md).
"""

from __future__ import annotations

import contextlib
import ctypes
import multiprocessing
import os
import signal
import sys
import threading
import time
import warnings
from collections.abc import Iterator
from concurrent.futures import Executor, ProcessPoolExecutor

from ncgeom.threads import limit_cpu_threads, require_workers
from ncgeom.validate import require_int

__all__ = ["make_executor", "pool_executor", "process_pool", "terminate_pool", "dask_executor", "init_child",
           "stop_processes"]

_WATCHDOG_S = 0.5  # how often a worker checks that its parent is alive
_PR_SET_PDEATHSIG = 1  # linux/prctl.h


def _die_with_parent(parent_pid: int) -> None:  # pragma: no cover - runs in child processes
    """Make this process exit when ``parent_pid`` dies: PR_SET_PDEATHSIG (Linux) and a watchdog thread."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)

    def watch() -> None:  # portable fallback: once orphaned, the parent pid changes (to init or a subreaper)
        while os.getppid() == parent_pid:
            time.sleep(_WATCHDOG_S)
        os._exit(1)

    threading.Thread(target=watch, name="ncgeom-parent-watchdog", daemon=True).start()


def init_child(parent_pid: int) -> None:  # pragma: no cover - runs in child processes
    """What every child process of ncgeom does first: die with ``parent_pid``, ignore SIGINT, and print a warning
    of the libraries it runs (torch, numpy) as one line (it shares the terminal of the command)."""
    _die_with_parent(parent_pid)  # also covers a parent that died before this line (the watchdog sees it)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C hits the whole process group: the parent stops us
    warnings.formatwarning = _one_line_warning


def _one_line_warning(message, category, filename, lineno, line=None) -> str:  # pragma: no cover - in children
    text = " ".join((str(message).strip().splitlines() or [""])[0].split())[:300]
    return f"ncgeom worker {os.getpid()}: warning: {category.__name__}: {text}\n"


def _init_worker(parent_pid: int) -> None:  # pragma: no cover - runs in child processes
    init_child(parent_pid)
    limit_cpu_threads(1)  # one core per worker: the workers are the parallelism


def _noop() -> None:  # pragma: no cover - runs in child processes
    return None


def process_pool(workers: int) -> ProcessPoolExecutor:
    """A pool of ``workers`` processes (spawn start method: no inherited torch state; one CPU thread each).

    The workers die with this process (module docstring). They are all started here, in the calling
    thread: the kernel's parent-death signal fires when the *thread* that started a worker ends, so
    workers started lazily from a short-lived feeder thread would be killed with it. ``workers`` is at most
    :func:`ncgeom.threads.max_workers` (ValueError naming it otherwise); callers size a pool by their work
    (:func:`ncgeom.campaigns.units.execute_units`, :func:`ncgeom.campaigns.claims.run_claims`).
    """
    workers = require_workers("workers", workers)
    pool = ProcessPoolExecutor(max_workers=workers, initializer=_init_worker, initargs=(os.getpid(),),
                               mp_context=multiprocessing.get_context("spawn"))
    launch = getattr(pool, "_launch_processes", None)  # CPython >= 3.11: starts every worker now
    if launch is not None:
        launch()
    else:  # pragma: no cover - each submit starts one worker while none is idle
        for _ in range(workers):
            pool.submit(_noop)
    return pool


def terminate_pool(pool: ProcessPoolExecutor, *, timeout: float = 5.0) -> None:
    """Stop the workers of ``pool`` now (SIGTERM, then SIGKILL after ``timeout``); fail its unfinished runs.

    Every run not finished, queued or running, ends with BrokenProcessPool (a running run's directory
    has no summary.json: the next call reruns it); finished runs are untouched. ProcessPoolExecutor has
    no public way to stop busy workers before Python 3.14 (``terminate_workers``), hence the use of its
    process table. The pool's own manager thread, seeing its workers gone, fails the pending futures
    and wakes every thread waiting on them (``shutdown(cancel_futures=True)`` would not: a future
    cancelled that way never notifies ``as_completed``, which then waits forever).
    """
    stop_processes(list((getattr(pool, "_processes", None) or {}).values()), timeout=timeout)
    pool.shutdown(wait=True)


def stop_processes(processes, *, timeout: float = 5.0) -> None:
    """SIGTERM every live process of ``processes`` (multiprocessing.Process), then SIGKILL those still alive
    after ``timeout`` seconds in all."""
    for p in processes:
        if p.is_alive():
            p.terminate()
    deadline = time.monotonic() + timeout
    for p in processes:
        p.join(max(deadline - time.monotonic(), 0.0))
        if p.is_alive():
            p.kill()
            p.join(1.0)


@contextlib.contextmanager
def dask_executor(address) -> Iterator[Executor]:
    """A Dask distributed executor, as a context manager.

    ``address`` is a scheduler address (``tcp://host:8786``) or a ``dask.distributed`` cluster object
    (e.g. a LocalCluster). The run directories must be on a filesystem the Dask workers share with this
    process. Needs the optional extra ``ncgeom[distributed]``; imported here, lazily.
    """
    try:
        from dask.distributed import Client
    except ImportError:
        raise ValueError(
            "scheduler: dask.distributed is not installed; install the extra: pip install 'ncgeom[distributed]'"
        ) from None
    try:
        client = Client(address, timeout=30)
    except (OSError, TimeoutError) as exc:
        raise ValueError(f"scheduler: cannot connect to the Dask scheduler at {address!r}: {exc}") from None
    try:
        yield client.get_executor()
    finally:
        client.close()


@contextlib.contextmanager
def make_executor(workers: int = 1, *, scheduler=None) -> Iterator[Executor | None]:
    """The executor of a batch of runs: a Dask cluster (``scheduler``), a :func:`process_pool` of
    ``workers`` (> 1), or None (``workers`` = 1: the runs go serially in this process, whose thread
    settings are left alone; the CLI limits them to one thread, as in a worker: ncgeom.threads)."""
    workers = require_int("workers", workers, min_value=1)
    if scheduler is not None:
        with dask_executor(scheduler) as ex:
            yield ex
    elif workers > 1:
        with pool_executor(workers) as pool:
            yield pool
    else:
        yield None


@contextlib.contextmanager
def pool_executor(workers: int) -> Iterator[ProcessPoolExecutor]:
    """A :func:`process_pool` of ``workers`` (1 included: one worker process) for the ``with`` block: shut down at
    its end, its workers terminated at once when an exception (a stop signal included) leaves it."""
    pool = process_pool(workers)
    try:
        yield pool
    except BaseException:  # an error or a stop signal: do not wait for the running runs
        terminate_pool(pool)
        raise
    pool.shutdown(wait=True, cancel_futures=True)
