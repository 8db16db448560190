"""CPU thread limits for processes ncgeom owns (CLI, sweep workers, small float64 optimizations).

On a shared 2-core machine, oversubscribed thread pools thrash: an OpenBLAS pool of 2 threads competing
with other processes made a 2000 x 99 SVD (the rankme metric) ~80x slower than with 1 thread (2.3 s vs
0.03 s, measured on the development machine), and tiny torch float64 optimizations ran up to 10x slower.
Library functions never change thread settings globally on their own; these helpers are called at a
process boundary, or scoped with a context manager that restores the previous setting.
"""

from __future__ import annotations

import contextlib
import os
import sys

from ncgeom.validate import require_int

__all__ = ["limit_cpu_threads", "one_torch_thread", "thread_settings", "THREAD_ENV_VARS", "available_cpus",
           "max_workers", "WORKERS_FLOOR", "require_workers"]

THREAD_ENV_VARS: tuple[str, ...] = (
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "BLIS_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
    "NUMEXPR_NUM_THREADS",
)
"""The environment variables that set the size of the OpenMP / BLAS thread pools."""


#: The fewest worker processes :func:`max_workers` allows on any machine: the documented ``--workers 2`` and
#: ``reproduce``'s default (the CPU count, at most 4) run on a 1-core machine too, a little oversubscribed.
WORKERS_FLOOR = 4


def available_cpus() -> int:
    """The CPUs this process may run on (its affinity mask where the system has one, else os.cpu_count())."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # pragma: no cover - no affinity on macOS and Windows
        return os.cpu_count() or 1


def max_workers() -> int:
    """The most worker processes a sweep or a reproduction starts here: max(:func:`available_cpus`,
    :data:`WORKERS_FLOOR`). Training is CPU-bound, one thread per worker: more workers than CPUs only share them
    (``ncgeom sweep --workers 100000`` once started every worker at once, load average 386, no progress in 400 s)."""
    return max(available_cpus(), WORKERS_FLOOR)


def require_workers(name: str, workers: object) -> int:
    """``workers`` as an int in 1 .. :func:`max_workers`, or ValueError naming ``name``, the range and why."""
    limit = max_workers()
    if isinstance(workers, int) and not isinstance(workers, bool) and workers > limit:
        raise ValueError(f"{name} must be an integer between 1 and {limit} (this machine's {available_cpus()} CPUs, "
                         f"at least {WORKERS_FLOOR}: each worker trains on one CPU), got {workers}")
    return require_int(name, workers, min_value=1)


def thread_settings() -> dict:
    """The CPU thread settings of this process, for run provenance (float32 results depend on them).

    ``torch``: torch's intra-op and inter-op thread counts (None when torch is not imported in this
    process: then nothing here ran in torch); ``blas``: the thread count of each BLAS / OpenMP pool loaded
    (threadpoolctl; what :func:`limit_cpu_threads` sets); ``env``: the variables of
    :data:`THREAD_ENV_VARS` that are set; ``cpu_count``: os.cpu_count().
    """
    torch = sys.modules.get("torch")  # never imported here: a process without torch has no torch pool
    torch_threads = None
    if torch is not None:
        torch_threads = {"intra_op": torch.get_num_threads(), "inter_op": torch.get_num_interop_threads()}
    try:
        from threadpoolctl import threadpool_info
    except ImportError:  # pragma: no cover - threadpoolctl comes with scikit-learn
        blas = None
    else:
        blas = sorted({f"{info.get('internal_api')}={info.get('num_threads')}" for info in threadpool_info()})
    return {
        "torch": torch_threads,
        "blas": blas,
        "env": {name: os.environ[name] for name in THREAD_ENV_VARS if name in os.environ},
        "cpu_count": os.cpu_count(),
    }


def limit_cpu_threads(n: int) -> None:
    """Use ``n`` CPU threads in this process: torch's intra-op pool and the BLAS/OpenMP pools (threadpoolctl)."""
    n = require_int("threads", n, min_value=1)
    import torch

    torch.set_num_threads(n)
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - threadpoolctl comes with scikit-learn
        return
    threadpool_limits(limits=n)


@contextlib.contextmanager
def one_torch_thread():
    """Run the block on one torch intra-op thread; the previous setting is restored afterwards."""
    import torch

    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(previous)
