"""The in-memory outcome of a training run: a frozen :class:`Result`.

Its file form is the run directory (:mod:`ncgeom.runs.records`): :meth:`Result.summary_record`
is the :class:`~ncgeom.runs.records.RunSummary` written as summary.json, and ``history`` holds the
:class:`~ncgeom.runs.records.EpochRecord` lines of history.jsonl.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ncgeom.runs.config import Config
from ncgeom.runs.records import EpochRecord, RunSummary
from ncgeom.vocabulary import ConvergenceState, RunStatus, StopReason

__all__ = ["Result"]


@dataclass(frozen=True)
class Result:
    """A finished (or diverged) run.

    Attributes
    ----------
    config : Config
    status : {"completed", "diverged"}
        ``diverged``: the loss became non-finite; training stopped and the state of the last complete
        epoch was kept (``message`` says where).
    message : str
    history : tuple of EpochRecord
        One record per completed epoch (the history.jsonl lines).
    initial, final : EpochRecord
        The state before training (epoch 0) and at the last epoch with metrics.
    nc_value : float
        Closed-form loss at neural collapse for the estimator the run optimizes.
    nc_value_source : str
        Which closed form (``batch_nc_value`` for the weighted estimator, ...).
    embeddings : numpy.ndarray [N, d]
        Final training embeddings (float64); ``labels`` their true classes.
    wall_time_s : float
    stop_reason : {"budget", "converged", "diverged"}
        Why training stopped (``Config.stop``; docs/theory.md, section 9, "Convergence").
    convergence : {"converged", "still moving", "stalled", "undetermined"}
        Where the run stood at its final epoch (:func:`ncgeom.runs.convergence.convergence_state`).
    grad_reference : float or None
        The gradient norm of the run's gradient ratio (:mod:`ncgeom.runs.convergence`).
    """

    config: Config
    status: RunStatus
    message: str
    history: tuple[EpochRecord, ...] = field(repr=False)
    initial: EpochRecord = field(repr=False)
    final: EpochRecord
    nc_value: float
    nc_value_source: str
    embeddings: np.ndarray = field(repr=False, compare=False)
    labels: np.ndarray = field(repr=False, compare=False)
    wall_time_s: float = field(default=0.0, compare=False)
    stop_reason: StopReason = "budget"
    convergence: ConvergenceState = "undetermined"
    grad_reference: float | None = None

    @property
    def gap(self) -> float | None:
        """final loss - nc_value."""
        return self.final.gap

    def summary_record(self) -> RunSummary:
        """The summary.json record of this run."""
        return RunSummary(
            status=self.status, message=self.message, final=self.final, initial=self.initial,
            nc_value=self.nc_value, nc_value_source=self.nc_value_source, epochs_run=len(self.history),
            wall_time_s=self.wall_time_s, config=self.config, stop_reason=self.stop_reason,
            convergence=self.convergence, grad_reference=self.grad_reference,
        )

    def summary(self) -> dict[str, Any]:
        """The summary.json object (strict-JSON-ready): ``summary_record().to_dict()``."""
        return self.summary_record().to_dict()
