"""Running a sweep's units (:mod:`ncgeom.campaigns.plan`) on an executor, and what each run became.

:func:`execute_units` plans the runs to do, hands every unit to the executor (the caller's; a process pool of
``workers`` it makes itself; or none: one after another in this process) and yields, for every run, its summary or
the one-line reason it has none. A unit that raises fails all its runs with the exception's text. A unit whose
worker process died (the pool is then broken: :class:`~concurrent.futures.process.BrokenProcessPool`, e.g. the
kernel's out-of-memory killer), or that could not be submitted because the pool was already broken, is retried
once in a fresh pool when the pool is this module's own (sized by the work: at most one worker per unit); a run
still without a summary after that is reported with the reason (:func:`pool_died` recognizes it), never dropped.
On the caller's executor the reason is reported at once, for the caller to rebuild its pool
(:func:`ncgeom.campaigns.claims.run_claims` does).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator, Sequence
from concurrent.futures import Executor, Future, as_completed
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path

from ncgeom.campaigns.executors import process_pool, terminate_pool
from ncgeom.campaigns.plan import Unit, plan_units, train_unit
from ncgeom.runs.config import Config
from ncgeom.runs.records import RunSummary
from ncgeom.vocabulary import Engine

__all__ = ["execute_units", "executor_width", "Outcome", "pool_died"]

#: What became of one run: its summary, or the one-line reason it has none.
Outcome = RunSummary | str
_Named = Sequence[tuple[str, Config]]


def execute_units(todo: _Named, out: Path, *, engine: Engine, workers: int,
                  executor: Executor | None) -> Iterator[tuple[str, Outcome]]:
    """(run name, outcome) of every run of ``todo`` ((name, config) pairs), trained into ``out/<name>`` (module
    docstring), in the order the units finish."""
    width = workers if executor is None else max(workers, executor_width(executor))
    units = plan_units([c for _, c in todo], engine=engine, workers=width)
    if not units:
        return
    if executor is not None:
        yield from _submit_all(executor, units, todo, out)
    elif workers > 1:
        broken: list[Unit] = []
        yield from _own_pool(min(workers, len(units)), units, todo, out, broken)
        if broken:  # a worker died: once more, in a fresh pool
            yield from _own_pool(min(workers, len(broken)), broken, todo, out, None)
    else:
        for unit in units:
            yield from _collect(unit, todo, lambda unit=unit: train_unit(*_task(unit, todo, out)))


def pool_died(error: str) -> bool:
    """Whether a run's failure (an :data:`Outcome` string) is its worker pool's death (BrokenProcessPool), not its own:
    such a run may succeed in a fresh pool (:func:`ncgeom.campaigns.claims.run_claims` rebuilds a shared pool)."""
    return error.startswith(f"{BrokenProcessPool.__name__}:")


def executor_width(executor: Executor) -> int:
    """The number of tasks ``executor`` runs at once, where it says so (1 where it does not)."""
    width = getattr(executor, "_max_workers", None)  # ProcessPoolExecutor, ThreadPoolExecutor
    if isinstance(width, int):
        return width
    client = getattr(executor, "_client", None)  # dask.distributed's ClientExecutor
    if client is not None:
        with contextlib.suppress(Exception):  # a cluster that does not answer: size for one worker
            return max(1, sum(client.nthreads().values()))
    return 1


def _own_pool(size: int, units: list[Unit], todo: _Named, out: Path,
              broken: list[Unit] | None) -> Iterator[tuple[str, Outcome]]:
    pool = process_pool(size)
    try:
        yield from _submit_all(pool, units, todo, out, broken=broken)
    except BaseException:  # an error or a stop signal: stop the workers, do not wait for them
        terminate_pool(pool)
        raise
    pool.shutdown(wait=True)


def _task(unit: Unit, todo: _Named, out: Path) -> tuple:
    """The (picklable) arguments of :func:`~ncgeom.campaigns.plan.train_unit` for one unit."""
    runs = [todo[i] for i in unit.indices]
    return unit.kind, [cfg.to_dict() for _, cfg in runs], [str(out / name) for name, _ in runs]


def _submit_all(ex: Executor, units: list[Unit], todo: _Named, out: Path, *,
                broken: list[Unit] | None = None) -> Iterator[tuple[str, Outcome]]:
    futures: dict[Future, Unit] = {}
    for unit in units:
        try:
            futures[ex.submit(train_unit, *_task(unit, todo, out))] = unit
        except BrokenProcessPool as exc:  # a worker died before this unit was submitted: the pool takes no more
            if broken is not None:
                broken.append(unit)
            else:
                yield from _collect(unit, todo, functools.partial(_reraise, exc))
    for fut in as_completed(futures):
        unit = futures[fut]
        if broken is not None and isinstance(fut.exception(), BrokenProcessPool):
            broken.append(unit)  # retried by the caller in a fresh pool
            continue
        yield from _collect(unit, todo, fut.result)


def _reraise(exc: BaseException):
    raise exc


def _collect(unit: Unit, todo: _Named, get) -> list[tuple[str, Outcome]]:
    """(name, outcome) of every run of ``unit`` from its task's result (``get()``); all failed if it raised."""
    names = [todo[i][0] for i in unit.indices]
    try:
        summaries = [RunSummary.from_dict(d) for d in get()]
        if len(summaries) != len(names):
            raise RuntimeError(f"a unit of {len(names)} runs returned {len(summaries)} summaries")
    except Exception as exc:  # a failed run or stack must not stop the sweep; its runs are retried on resume
        error = f"{type(exc).__name__}: {exc}"
        if isinstance(exc, BrokenProcessPool):
            error += " (its worker process died, e.g. killed by the out-of-memory killer; rerun the sweep to retry)"
        return [(name, error) for name in names]
    return list(zip(names, summaries))
