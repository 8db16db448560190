"""The one training loop behind every driver: step -> epoch end -> rollback -> history -> stopping -> finish.

:func:`train` runs R >= 1 runs together (R = 1 for :mod:`ncgeom.runs.single` and :mod:`ncgeom.runs.images`, a
stack for :mod:`ncgeom.runs.stacked`); a :class:`Driver` holds what differs between the drivers (its inputs, its
tensors, its optimizer, its evaluation, its checkpoints) and the loop holds the rest, once:

1. **start**: each run's initial record (epoch 0; ValueError when its embeddings are not finite: bad input, e.g. a
   huge ``init_scale``), then its run folder opened (config.json with one provenance record, history.jsonl);
2. **steps**: for each batch of the epoch, the driver gives every stepping run's loss value, or says that the run's
   embeddings are not finite; a run whose embeddings or loss are not finite stops stepping for the rest of the
   epoch (its failure says where); the driver then updates the runs still stepping and says which of them now
   have a non-finite gradient or parameters (:mod:`ncgeom.runs.divergence`): those stop too;
3. **epoch end**, for each live run: the mean loss over the epoch's steps and, every ``metrics_every`` epochs and
   at the last, the metrics of docs/theory.md, section 8 (:meth:`Driver.evaluate`; non-finite embeddings are a
   failure too) with the norm of the gradient of the run's probe objective (:meth:`Driver.probe`,
   :mod:`ncgeom.runs.convergence`). A failed run is **rolled back** to the state of its last complete epoch and
   stops, status "diverged" (never an exception: divergence is an outcome, wherever it shows first); the others
   go on. The record goes to the run's **history** (and its folder); the driver keeps the new good state and
   may write a checkpoint (:meth:`Driver.end_epoch`);
4. **stopping**: a run with ``stop="converged"`` stops at the first metric epoch where it has converged
   (:func:`ncgeom.runs.convergence.convergence_state`); the others go on;
5. **finish**, for each run: history.jsonl written durably, the final record (the last with metrics; one more
   evaluation when the last epoch had none), the convergence state at the end, why it stopped, the final
   embeddings, a :class:`~ncgeom.runs.result.Result`, and embeddings.npz then summary.json in its folder.

The loop stops when no run is live or at the last epoch.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Iterable
from typing import Any, Protocol

import numpy as np

from ncgeom.provenance import provenance
from ncgeom.runs.config import Config
from ncgeom.runs.convergence import Probe, convergence_state
from ncgeom.runs.divergence import embeddings_message, update_failures
from ncgeom.runs.folder import RunFolder
from ncgeom.runs.records import EpochRecord
from ncgeom.runs.result import Result
from ncgeom.vocabulary import RunStatus, StopReason

__all__ = ["RunState", "Driver", "OneModelSteps", "train"]


@dataclasses.dataclass
class RunState:
    """What the loop knows of one run while it trains (not a tensor: those are the driver's)."""

    config: Config
    nc_value: float
    nc_source: str
    folder: RunFolder | None = None
    history: list[EpochRecord] = dataclasses.field(default_factory=list)
    initial: EpochRecord | None = None
    last_metrics: EpochRecord | None = None
    status: RunStatus = "completed"
    stop_reason: StopReason = "budget"
    message: str = ""
    resumed_at: int | None = None
    grad_reference: float | None = None
    live: bool = True
    total: float = 0.0
    failure: str | None = None

    @property
    def stepping(self) -> bool:
        """Live and not failed in this epoch: its parameters are updated at the next step."""
        return self.live and self.failure is None


class Driver(Protocol):
    """What differs between the drivers (module docstring); the loop calls these and nothing else."""

    states: list[RunState]
    steps_per_epoch: int
    #: The first epoch to train (1, or a checkpoint's epoch + 1) and the origin of the records' ``time_s``.
    first_epoch: int
    start: float
    #: Images per step for the progress bar (0: the bar counts epochs).
    images_per_step: int

    def initial_record(self, r: int) -> EpochRecord | None:
        """Run r's state before training (epoch 0, with metrics), None when its embeddings are not finite."""

    def epoch_steps(self, epoch: int) -> Iterable[Any]:
        """The epoch's batches, one item per step (drawn from each run's batch stream)."""

    def losses(self, batch: Any, stepping: list[bool], *, epoch: int, step: int) -> tuple[Any, list[float | str]]:
        """(an object for :meth:`update`, one entry per run): the loss value of each stepping run, or a failure
        message when its embeddings are not finite (entries of the other runs are ignored)."""

    def update(self, losses: Any, stepping: list[bool], *, epoch: int, step: int) -> list[str | None]:
        """One optimizer step of the runs still stepping; the others keep their parameters. One entry per run: the
        failure of a stepping run whose gradient or updated parameters are not finite, else None."""

    def evaluate(self, r: int, epoch: int, loss: float | None) -> EpochRecord | None:
        """Run r's epoch record with metrics, None when its embeddings are not finite."""

    def reference_probe(self, r: int) -> Probe | None:
        """Run r's probe at the random initialization it would otherwise have had, for a run started near NC
        (None for the others: their reference is their own initial probe; :mod:`ncgeom.runs.convergence`)."""

    def probe(self) -> list[Probe | None]:
        """Every run's probe objective and the norm of its gradient at its current parameters (None where not
        finite); changes no parameter, optimizer state or training stream (:mod:`ncgeom.runs.convergence`)."""

    def keep_good_state(self) -> None:
        """Remember every run's parameters: the state a failed run is rolled back to."""

    def rollback(self, r: int) -> None:
        """Set run r's parameters to the remembered good state."""

    def end_epoch(self, epoch: int) -> None:
        """After an epoch's records (checkpoints)."""

    def final_embeddings(self, r: int) -> tuple[np.ndarray, np.ndarray]:
        """(embeddings, labels) of run r at the end (float64), for its Result and embeddings.npz."""


class OneModelSteps:
    """:meth:`Driver.losses` and :meth:`Driver.update` of a driver that trains one model with one optimizer (R = 1:
    :mod:`ncgeom.runs.single`, :mod:`ncgeom.runs.images`), written once. The driver provides ``_forward(batch,
    generator) -> (z, labels)``, ``generator``, ``loss`` (embeddings, labels -> a scalar tensor), ``optimizer`` and
    ``tensors`` (what :func:`ncgeom.runs.divergence.update_failures` checks after a step)."""

    generator: Any
    loss: Any
    optimizer: Any
    tensors: list[Any]

    def _forward(self, batch: Any, generator: Any) -> tuple[Any, Any]:
        raise NotImplementedError

    def losses(self, batch: Any, stepping: list[bool], *, epoch: int, step: int) -> tuple[Any, list[float | str]]:
        import torch

        z, labels = self._forward(batch, self.generator)
        if not bool(torch.isfinite(z.detach()).all()):
            return None, [embeddings_message(epoch, step)]
        loss = self.loss(z, labels)
        return loss, [loss.item()]

    def update(self, loss: Any, stepping: list[bool], *, epoch: int, step: int) -> list[str | None]:
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        self.optimizer.step()
        return update_failures(self.tensors, runs=None, epoch=epoch, step=step)


def train(driver: Driver, *, progress: bool = False) -> list[Result]:
    """Run ``driver``'s runs to the end (module docstring); one Result per run, in order. Never raises on divergence."""
    states = list(driver.states)
    _start(driver, states)
    last = states[0].config.epochs
    driver.keep_good_state()
    with _Bar(driver, enabled=progress) as bar:
        for epoch in range(driver.first_epoch, last + 1):
            _run_steps(driver, states, epoch, bar)
            _end_epoch(driver, states, epoch)
            driver.keep_good_state()
            if any(s.live for s in states):
                driver.end_epoch(epoch)
            bar.epoch(states)
            if not any(s.live for s in states):
                break
    return [_finish(driver, r, state) for r, state in enumerate(states)]


def _start(driver: Driver, states: list[RunState]) -> None:
    for r, state in enumerate(states):
        if state.initial is None:
            initial = driver.initial_record(r)
            if initial is None:
                c = state.config
                where = f"run {r}: " if len(states) > 1 else ""
                raise ValueError(f"{where}the initial embeddings are not finite (init_scale={c.init_scale:g}, "
                                 f"dtype={c.dtype})")
            state.initial = initial
    fresh = [r for r, state in enumerate(states) if state.initial is not None and state.initial.grad_norm is None
             and not state.history]
    if fresh:  # the reference of every later gradient ratio (a resumed run keeps its checkpoint's)
        probes = driver.probe()
        for r in fresh:
            initial = states[r].initial
            assert initial is not None  # set above
            states[r].initial = _with_probe(initial, probes[r])
    for r, state in enumerate(states):
        reference = driver.reference_probe(r) if state.config.init == "near_nc" else None
        state.grad_reference = reference.grad_norm if reference is not None else (
            state.initial.grad_norm if state.initial is not None else None)
    for state in states:
        state.last_metrics = next((h for h in reversed(state.history) if h.metrics is not None), state.initial)
    record = provenance()  # one process, one moment: the same record for every run of a stack
    for state in states:
        if state.folder is not None:
            state.folder.open(state.config, record, earlier=state.history)


def _run_steps(driver: Driver, states: list[RunState], epoch: int, bar: _Bar) -> None:
    for state in states:
        state.total, state.failure = 0.0, None
    for s, batch in enumerate(driver.epoch_steps(epoch), start=1):
        stepping = [state.stepping for state in states]
        losses, values = driver.losses(batch, stepping, epoch=epoch, step=s)
        for r, state in enumerate(states):
            if not stepping[r]:
                continue
            value = values[r]
            if isinstance(value, str):
                state.failure = value
            elif not math.isfinite(value):
                state.failure = f"loss became non-finite ({value}) at epoch {epoch}, step {s}"
            else:
                state.total += value
                continue
            stepping[r] = False
        if any(stepping):
            for state, moving, failure in zip(states, stepping, driver.update(losses, stepping, epoch=epoch, step=s)):
                if moving and failure is not None:
                    state.failure = failure
        bar.step(epoch, values[0] if stepping[0] else None)
        if not any(state.stepping for state in states):
            break


def _end_epoch(driver: Driver, states: list[RunState], epoch: int) -> None:
    config = states[0].config  # metrics_every and epochs are shared by a stack (its key)
    probes = driver.probe() if epoch % config.metrics_every == 0 or epoch == config.epochs else None
    for r, state in enumerate(states):
        if not state.live:
            continue
        record = _epoch_record(driver, r, state, epoch)
        if record is None:
            driver.rollback(r)
            state.live = False
            state.status, state.stop_reason = "diverged", "diverged"
            state.message = f"{state.failure}; kept the state of the last complete epoch"
            continue
        if probes is not None and record.metrics is not None:
            record = _with_probe(record, probes[r])
        record = dataclasses.replace(record, time_s=time.perf_counter() - driver.start)
        state.history.append(record)
        if record.metrics is not None:
            state.last_metrics = record
        if state.folder is not None:
            state.folder.append(record)
        if (state.config.stop == "converged" and record.metrics is not None and state.initial is not None
                and convergence_state(state.initial, state.history, reference=state.grad_reference) == "converged"):
            state.live, state.stop_reason = False, "converged"  # stops here; the others go on


def _with_probe(record: EpochRecord, probe: Probe | None) -> EpochRecord:
    """``record`` with the probe's value and gradient norm (None when the probe had no finite value)."""
    if probe is None:
        return record
    return dataclasses.replace(record, probe_loss=probe.loss, grad_norm=probe.grad_norm)


def _epoch_record(driver: Driver, r: int, state: RunState, epoch: int) -> EpochRecord | None:
    """Run r's record of ``epoch``, None when it failed (its failure then says why)."""
    if state.failure is not None:
        return None
    config = state.config
    mean_loss = state.total / driver.steps_per_epoch
    if epoch % config.metrics_every != 0 and epoch != config.epochs:
        return EpochRecord(epoch, mean_loss, state.nc_value, mean_loss - state.nc_value)
    record = driver.evaluate(r, epoch, mean_loss)
    if record is None:
        state.failure = f"embeddings became non-finite at epoch {epoch}"
    return record


def _finish(driver: Driver, r: int, state: RunState) -> Result:
    if state.folder is not None:
        state.folder.close()  # durable; an exception before here leaves the last epoch's file (no summary: rerun)
    if state.status == "completed":
        resumed = f" (resumed at epoch {state.resumed_at})" if state.resumed_at is not None else ""
        trained = state.history[-1].epoch if state.history else 0
        state.message = (f"trained {state.config.epochs} epochs{resumed}" if state.stop_reason == "budget" else
                         f"converged at epoch {trained} of a budget of {state.config.epochs}{resumed}")
    if state.history and state.history[-1].metrics is None:  # diverged after an epoch skipped by metrics_every
        last = state.history[-1]
        state.last_metrics = driver.evaluate(r, last.epoch, last.loss) or state.last_metrics
    embeddings, labels = driver.final_embeddings(r)
    assert state.initial is not None and state.last_metrics is not None  # set by _start
    kept = [h for h in state.history if h.epoch <= state.last_metrics.epoch]  # a diverged run: up to its final record
    convergence = convergence_state(state.initial, kept, reference=state.grad_reference)
    result = Result(
        config=state.config, status=state.status, message=state.message, history=tuple(state.history),
        initial=state.initial, final=state.last_metrics, nc_value=state.nc_value, nc_value_source=state.nc_source,
        embeddings=embeddings, labels=labels, wall_time_s=time.perf_counter() - driver.start,
        stop_reason=state.stop_reason, convergence=convergence, grad_reference=state.grad_reference,
    )
    if state.folder is not None:
        state.folder.finish(result.summary_record(), embeddings, labels)
    return result


class _Bar:
    """The progress bar of :func:`train` (tqdm on stderr): images with their rate for an image run, else epochs."""

    def __init__(self, driver: Driver, *, enabled: bool):
        self.bar: Any = None
        self.images = driver.images_per_step
        if not enabled:
            return
        from tqdm import tqdm

        epochs = driver.states[0].config.epochs - driver.first_epoch + 1
        if self.images:
            self.bar = tqdm(total=epochs * driver.steps_per_epoch * self.images, unit="img", unit_scale=True,
                            leave=False)
        else:
            self.bar = tqdm(total=epochs, unit="epoch", leave=False)

    def __enter__(self) -> _Bar:
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.bar is not None:
            self.bar.close()

    def step(self, epoch: int, value: float | str | None) -> None:
        if self.bar is not None and self.images:
            self.bar.update(self.images)
            self.bar.set_postfix(epoch=epoch, loss="-" if not isinstance(value, float) else f"{value:.4f}")

    def epoch(self, states: list[RunState]) -> None:
        if self.bar is None or self.images:
            return
        self.bar.update(1)
        if len(states) > 1:
            self.bar.set_postfix(live=sum(s.live for s in states))
            return
        record = states[0].history[-1] if states[0].history else None
        if record is not None and record.loss is not None and record.gap is not None:
            etf = record.value("etf_distance")
            self.bar.set_postfix(loss=f"{record.loss:.4f}", gap=f"{record.gap:.2e}",
                                 etf="-" if etf is None else f"{etf:.3f}")

