"""The memory budget: the most bytes a command may allocate for its arrays, and the sizes it bounds.

Every size a user gives (classes, dimensions, batch sizes, negatives, file contents) is checked at the
boundary against an *estimate* of the bytes it makes the command allocate, before anything is allocated.
A request above the budget is refused with one line naming the option, the estimated need and the
budget, and how to raise it; so ``ncgeom nc-value --num-negatives 1000000000`` is an error in microseconds,
never a numpy/torch allocation failure minutes later.

The budget, in order of precedence:

1. ``--max-memory SIZE`` on a command (``ncgeom train --max-memory 8G ...``);
2. the environment variable ``NCGEOM_MAX_MEMORY`` (same syntax; also reaches sweep workers);
3. the default :func:`default_budget`: min(4 GiB, half of the physical memory), the physical memory read
   with ``os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")`` (4 GiB where that is unknown).

SIZE is a number of bytes with an optional binary unit: ``512M``, ``8G``, ``1.5GiB``, ``2T``, ``1000000``
(K, M, G, T = 2^10, 2^20, 2^30, 2^40; a trailing ``B`` or ``iB`` is accepted). The estimates are upper
bounds of the arrays' sizes up to a small constant factor (each documented next to its formula); Python
objects and the interpreter itself are not counted.
"""

from __future__ import annotations

import contextlib
import functools
import math
import os
import re
from collections.abc import Iterator

__all__ = [
    "ENV_VAR",
    "DEFAULT_CAP_BYTES",
    "MAX_BUDGET_BYTES",
    "NC_VALUE_BYTES_PER_NEGATIVE",
    "parse_size",
    "format_bytes",
    "physical_memory_bytes",
    "default_budget",
    "memory_budget",
    "override",
    "require_within_budget",
    "nc_value_bytes",
    "require_parts_within_budget",
    "HOW_TO_RAISE",
    "bench_bytes",
    "metrics_bytes",
    "array_bytes",
    "require_file_within_budget",
]

ENV_VAR = "NCGEOM_MAX_MEMORY"
#: The default budget is min(DEFAULT_CAP_BYTES, half of the physical memory).
DEFAULT_CAP_BYTES = 4 * 2**30
#: Largest accepted budget (1 PiB): a larger SIZE is a typo, not a machine.
MAX_BUDGET_BYTES = 2**50
#: nc_value's closed form holds about 8 float64 arrays of k + 1 entries at its peak (binomial log-weights,
#: gammaln temporaries, the profile): 64 bytes per negative, whatever the number of classes (O(k), O(1) in C).
NC_VALUE_BYTES_PER_NEGATIVE = 64

_UNITS = {"": 1, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40, "p": 2**50}
_SIZE = re.compile(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*([kmgtp]?)(?:i?b)?\s*", re.IGNORECASE)
HOW_TO_RAISE = f"raise the budget with --max-memory SIZE or {ENV_VAR}=SIZE (e.g. 8G)"


def parse_size(text: str, *, name: str = "--max-memory") -> int:
    """Bytes of a SIZE string (``8G``, ``512M``, ``1.5GiB``, ``1000000``); ValueError naming ``name`` otherwise."""
    match = _SIZE.fullmatch(str(text))
    if match is None:
        raise ValueError(f"{name} must be a size such as 512M, 8G or 1.5GiB (units K, M, G, T, P = 2^10..2^50 bytes), "
                         f"got {text!r}")
    value = float(match.group(1)) * _UNITS[match.group(2).lower()]
    if not 1 <= value <= MAX_BUDGET_BYTES:
        raise ValueError(f"{name} must be between 1 byte and {format_bytes(MAX_BUDGET_BYTES)}, got {text!r}")
    return int(value)


def format_bytes(n: float) -> str:
    """``n`` bytes in binary units with 3 significant digits: ``4 GiB``, ``1.5 MiB``, ``12 B``."""
    n = float(n)
    for unit, scale in (("EiB", 2**60), ("PiB", 2**50), ("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n:.0f} B"


@functools.lru_cache(maxsize=1)
def physical_memory_bytes() -> int | None:
    """The machine's physical memory (os.sysconf), or None where the platform does not say."""
    try:
        pages, size = os.sysconf("SC_PHYS_PAGES"), os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):  # pragma: no cover - non-POSIX platforms
        return None
    return pages * size if pages > 0 and size > 0 else None


def default_budget() -> int:
    """min(4 GiB, half of the physical memory); 4 GiB where the physical memory is unknown."""
    physical = physical_memory_bytes()
    return DEFAULT_CAP_BYTES if physical is None else min(DEFAULT_CAP_BYTES, physical // 2)


def memory_budget(size: str | int | None = None) -> int:
    """The budget in bytes: ``size`` (a SIZE string or bytes) if given, else $NCGEOM_MAX_MEMORY, else the default."""
    if isinstance(size, int) and not isinstance(size, bool):
        if not 1 <= size <= MAX_BUDGET_BYTES:
            raise ValueError(f"max_memory must be between 1 byte and {format_bytes(MAX_BUDGET_BYTES)}, got {size}")
        return size
    if size is not None:
        return parse_size(str(size))
    env = os.environ.get(ENV_VAR)
    if env:
        return _parse_env(env)
    return default_budget()


@functools.lru_cache(maxsize=8)
def _parse_env(text: str) -> int:
    return parse_size(text, name=f"the environment variable {ENV_VAR}")


@contextlib.contextmanager
def override(size: str | None) -> Iterator[int]:
    """Within the block, the budget is ``size`` (also for child processes, through $NCGEOM_MAX_MEMORY).

    ``None`` keeps the budget in force. Yields the budget in bytes; the environment is restored afterwards.
    """
    if size is None:
        yield memory_budget()
        return
    nbytes = parse_size(size)
    previous = os.environ.get(ENV_VAR)
    os.environ[ENV_VAR] = str(nbytes)
    try:
        yield nbytes
    finally:
        if previous is None:
            os.environ.pop(ENV_VAR, None)
        else:
            os.environ[ENV_VAR] = previous


def require_within_budget(options: str, need: float, *, what: str, budget: int | None = None) -> None:
    """Raise ValueError if ``need`` bytes exceed the budget; the message names ``options`` and ``what`` needs it."""
    limit = memory_budget() if budget is None else budget
    if need > limit:
        raise ValueError(f"{options}: {what} needs about {format_bytes(need)}, above the memory budget of "
                         f"{format_bytes(limit)}; lower {options} or {HOW_TO_RAISE}")


def require_parts_within_budget(parts: list[tuple[str, str, int]], *, what: str, budget: int | None = None) -> None:
    """Raise ValueError if the parts' bytes together exceed the budget, naming the fields of the largest part.

    ``parts``: (fields, what the part is, bytes) of an estimate (e.g. :func:`ncgeom.runs.budget.run_memory_estimate`);
    the message says the total, the largest part (the one to lower) and how to raise the budget.
    """
    total = sum(p[2] for p in parts)
    limit = memory_budget() if budget is None else budget
    if total > limit:
        fields, part, nbytes = max(parts, key=lambda p: p[2])
        raise ValueError(f"{fields}: {what} needs about {format_bytes(total)} ({part}: {format_bytes(nbytes)}), "
                         f"above the memory budget of {format_bytes(limit)}; lower {fields} or {HOW_TO_RAISE}")


def require_file_within_budget(path: str | os.PathLike, need: float, *, what: str, budget: int | None = None) -> None:
    """Raise ValueError if reading the file ``path`` needs more than the budget (``need`` bytes for ``what``).

    The message names the file, the estimate and the budget, and says how to raise it:
    ``<path>: <what> needs about 3 GiB, above the memory budget of 200 MiB; use a smaller file or raise the
    budget with --max-memory SIZE or NCGEOM_MAX_MEMORY=SIZE``.
    """
    limit = memory_budget() if budget is None else budget
    if need > limit:
        raise ValueError(f"{path}: {what} needs about {format_bytes(need)}, above the memory budget of "
                         f"{format_bytes(limit)}; use a smaller file or raise the budget with --max-memory SIZE "
                         f"or {ENV_VAR}=SIZE")


# --------------------------------------------------------------------------------------------------- nc-value
def nc_value_bytes(num_negatives: int) -> int:
    """Peak bytes of :func:`ncgeom.theory.nc_value` for a built-in psi: 64 (k + 1) (O(k); no term in C)."""
    return NC_VALUE_BYTES_PER_NEGATIVE * (int(num_negatives) + 1)


# --------------------------------------------------------------------------------------------------- bench
def bench_bytes(batch_size: int, *, dim: int, num_classes: int, methods, skip_dense_at: int,
                block_size: int | None = None) -> int:
    """Peak bytes of one batch size of ``ncgeom bench`` (its methods run one after another).

    Inputs 16 B d (z, its copy and gradient, float32); floor 8 B^2 (S and its gradient); dense 28 B^2
    (~1.7 GiB at B = 8192, as measured in BENCHMARKS.md) when B < skip_dense_at; blocked 24 bs B + 8 B^2 / C
    (tiles and the per-pair values); pml at most 2 GiB (larger cases are skipped by the benchmark).
    """
    b, d = int(batch_size), int(dim)
    c = max(min(int(num_classes), b), 1)
    inputs = 16 * b * d
    per_method = {"floor": 8 * b * b, "blocked": 24 * min(block_size or 128, b) * b + 8 * b * b // c,
                  "pml": min(4 * b**4 // c, 2 * 2**30), "pml_supcon": 28 * b * b, "triton": 8 * b * b}
    if b < int(skip_dense_at):
        per_method["dense"] = 28 * b * b
    return inputs + max(per_method.get(m, 0) for m in (*methods, "floor"))


# --------------------------------------------------------------------------------------------------- metrics
def metrics_bytes(num_samples: int, dim: int, num_classes: int) -> int:
    """Peak bytes of :func:`ncgeom.metrics.nc_metrics` on z [N, d] with C classes (float64).

    8 (8 N d + 2 N C + 4 C d + 2 C^2 + min(N, d)^2): copies of z, centred residuals and the SVD's work, the N x C
    scores of the NCC rule, the class means, their Gram matrix.
    """
    n, d, c = int(num_samples), int(dim), int(num_classes)
    return 8 * (8 * n * d + 2 * n * c + 4 * c * d + 2 * c * c + min(n, d) ** 2)


def array_bytes(shape, itemsize: int) -> int:
    """Bytes of an array of ``shape`` (Python ints: no overflow) and ``itemsize``."""
    return math.prod(int(s) for s in shape) * int(itemsize)
