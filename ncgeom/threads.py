"""CPU thread limits for processes ncgeom owns (CLI, sweep workers, small float64 optimizations).

On a shared 2-core machine, oversubscribed thread pools thrash: an OpenBLAS pool of 2 threads competing
with other processes made a 2000 x 99 SVD (the rankme metric) ~80x slower than with 1 thread (2.3 s vs
0.03 s, measured on the development machine), and tiny torch float64 optimizations ran up to 10x slower.
Library functions never change thread settings globally on their own; these helpers are called at a
process boundary, or scoped with a context manager that restores the previous setting.
"""

from __future__ import annotations

import contextlib

from ncgeom.validate import require_int

__all__ = ["limit_cpu_threads", "one_torch_thread"]


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
