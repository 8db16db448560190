"""Has a run converged? A stationarity measure that does not refer to the NC value (docs/theory.md, section 9).

At every epoch with metrics a run records ``grad_norm`` = ||G(theta_t)||, the norm of the gradient of its training
objective with respect to its parameters (weight decay included), where the objective is the mean batch loss over
the run's **probe batches**: at most :data:`PROBE_BATCHES` batches drawn once, when the run starts, by the run's own
batch sampler from a stream apart from its training streams (:func:`ncgeom.runs.setup.probe_batches`), with the
sampled negatives and noise positives drawn from a probe generator reseeded before every probe. The probe objective
is therefore one fixed function of the parameters for the whole run, an unbiased estimate of the expected batch
loss that training descends, and its gradient is zero exactly at its stationary points. Probing changes nothing of
the training: no parameter, optimizer state or training random stream is touched (tests/test_convergence.py).
For unconstrained features on the sphere, each row's gradient is tangent to the row's sphere (the Riemannian
gradient on the sphere, scaled by 1 / ||W_i||).

At a metric epoch t, over the **window** of the metric epochs in the last quarter of the epochs trained
(t/4 epochs back, t included; at least :data:`WINDOW` + 1 metric epochs, else the state is undetermined):

- gradient ratio  rho_t = ||G(theta_t)|| / ||G_ref||, with G_ref the gradient at the run's initialization, or, for
  a run started near NC (``init="near_nc"``, already close to a fixed point), at the random initialization it would
  otherwise have started from (:func:`ncgeom.runs.setup.random_reference_model`): the scale of the gradient far
  from any fixed point;
- loss drift      dL = |mean of the probe objective over the window's second half - over its first half| /
  |its value at t| (the probe objective is one fixed function: its changes are the parameters', not the batches');
- metric drift    dM = max over etf_distance and within_class of |mean over the second half - over the first|;
- spectrum drift  dS = the same of log10(smallest normalized class-mean spectrum value), each value clipped at
  :data:`SPECTRUM_FLOOR` (two decades under the DC threshold: below it a run is deep in DC, where the exact value
  of a nearly singular spectrum is noise and decides nothing).

Each drift is a trend, the difference of the two halves' means, not a range: an optimizer that jitters around a
fixed point (Adam at a constant learning rate, an MLP's noisy features) has no trend, a run that creeps has one.
A window that grows with the run (a quarter of it) asks a longer run to have been still for longer: a run that
creeps slowly (a metric moving by a fixed small amount per epoch) is still moving at any budget.

The state at t:

- **converged**: rho_t <= :data:`GRAD_RATIO` and dL <= :data:`LOSS_DRIFT` and dM <= :data:`METRIC_DRIFT` and
  dS <= :data:`SPECTRUM_DRIFT`: the gradient has fallen and nothing a rule decides on is still moving;
- **stalled**: every drift within its bound but rho_t > :data:`GRAD_RATIO`: the loss and the metrics stopped moving
  while the gradient did not fall (a plateau, a tiny effective step, a slow valley: the end point is not
  a stationary point of the objective);
- **still moving**: a drift above its bound;
- **undetermined**: fewer than :data:`WINDOW` earlier metric epochs, or a needed value missing (the first probe
  of a run, a diverged run's non-finite value).

A run that has not converged decides nothing (docs/theory.md, section 9, "Verdict rules"). What this does not
detect: a stationary point that is a saddle (the Hessian is not examined), and a fall of the gradient that a
longer window would show to be transient. The thresholds were fixed on exploratory seeds before any confirmatory
run (docs/theory.md, section 9, "Rule changes").
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from ncgeom.metrics.outcome import spectrum_min
from ncgeom.runs.records import EpochRecord
from ncgeom.vocabulary import ConvergenceState

__all__ = ["PROBE_BATCHES", "WINDOW", "GRAD_RATIO", "LOSS_DRIFT", "METRIC_DRIFT", "SPECTRUM_DRIFT",
           "SPECTRUM_FLOOR", "ConvergenceReading", "read_convergence", "convergence_state", "Probe", "probe_model"]

#: Most probe batches of a run (all of one epoch's batches when it has fewer).
PROBE_BATCHES = 8
#: The fewest metric epochs of a window besides its last one.
WINDOW = 4
#: Converged: the probe gradient at most this fraction of its value at epoch 0. Adam at a constant learning rate
#: keeps its iterate jittering around a minimum, and the gradient there stays at a floor of about 1-2 % of its
#: initial value (lr 0.05, unconstrained features at NC, exploratory seed 100: docs/theory.md, section 9).
GRAD_RATIO = 5e-2
#: Converged: the epoch loss moves by at most this fraction of itself over the window.
LOSS_DRIFT = 1e-3
#: Converged: etf_distance and within_class move by at most this over the window (a tenth of NC's 0.05).
METRIC_DRIFT = 5e-3
#: Converged: log10 of the smallest normalized spectrum value moves by at most this over the window.
SPECTRUM_DRIFT = 0.1
#: Spectrum values below this count as this in the spectrum drift (module docstring).
SPECTRUM_FLOOR = 1e-4


@dataclass(frozen=True)
class ConvergenceReading:
    """The measures of :func:`read_convergence` at one metric epoch (None where undefined) and the state."""

    epoch: int
    grad_ratio: float | None
    loss_drift: float | None
    metric_drift: float | None
    spectrum_drift: float | None
    state: ConvergenceState


def _finite(x: float | None) -> float | None:
    return None if x is None or not math.isfinite(x) else float(x)


def _trend(values: Sequence[float | None]) -> float | None:
    """|mean of the second half - mean of the first half| of ``values`` (the middle one, if odd, in neither)."""
    if not values or any(v is None or not math.isfinite(v) for v in values):
        return None
    half = len(values) // 2
    first, second = values[:half], values[len(values) - half:]
    return abs(sum(second) / half - sum(first) / half)  # type: ignore[arg-type]


def _log_spectrum_min(record: EpochRecord) -> float | None:
    smallest = spectrum_min(record.value("spectrum"))
    return math.log10(max(smallest, SPECTRUM_FLOOR)) if smallest is not None and smallest >= 0 else None


def read_convergence(initial: EpochRecord, history: Sequence[EpochRecord], *,
                     reference: float | None = None) -> ConvergenceReading:
    """The convergence measures and state at the last metric epoch of ``history`` (module docstring).

    ``initial`` is the record of epoch 0, ``history`` the epoch records so far; ``reference`` the gradient norm of
    the ratio (None: the initial record's ``grad_norm``).
    """
    metric = [initial, *(r for r in history if r.metrics is not None)]
    last = metric[-1]
    g0, gt = _finite(initial.grad_norm if reference is None else reference), _finite(last.grad_norm)
    ratio = gt / g0 if g0 is not None and gt is not None and g0 > 0 else None
    window = [r for r in metric if r.epoch >= last.epoch - last.epoch / 4]
    if len(window) < WINDOW + 1:
        window = metric[-(WINDOW + 1):]
    if len(window) < WINDOW + 1 or window[0] is initial:  # the window needs WINDOW metric epochs after epoch 0
        return ConvergenceReading(last.epoch, ratio, None, None, None, "undetermined")
    probes = [_finite(r.probe_loss) for r in window]
    loss_trend = _trend(probes)
    loss_t = probes[-1]
    loss_drift = None if loss_trend is None or not loss_t else loss_trend / abs(loss_t)
    drifts = [_trend([_finite(r.value(k)) for r in window]) for k in ("etf_distance", "within_class")]
    metric_drift = None if any(d is None for d in drifts) else max(d for d in drifts if d is not None)
    spectrum_drift = _trend([_log_spectrum_min(r) for r in window])
    if ratio is None or loss_drift is None or metric_drift is None or spectrum_drift is None:
        state: ConvergenceState = "undetermined"
    elif loss_drift > LOSS_DRIFT or metric_drift > METRIC_DRIFT or spectrum_drift > SPECTRUM_DRIFT:
        state = "still moving"
    else:
        state = "converged" if ratio <= GRAD_RATIO else "stalled"
    return ConvergenceReading(last.epoch, ratio, loss_drift, metric_drift, spectrum_drift, state)


def convergence_state(initial: EpochRecord, history: Sequence[EpochRecord], *,
                      reference: float | None = None) -> ConvergenceState:
    """The state of :func:`read_convergence` (module docstring)."""
    return read_convergence(initial, history, reference=reference).state


class Probe(NamedTuple):
    """A run's probe at one epoch: the value of its probe objective and the norm of its gradient (module docstring)."""

    loss: float
    grad_norm: float


def probe_model(model: Any, batches: Any, forward: Callable[[Any, Any], tuple[Any, Any]],
                loss: Callable[[Any, Any], Any], generator: Any, *, weight_decay: float) -> Probe | None:
    """The :class:`Probe` of one model (module docstring): the mean of ``loss(*forward(batch, generator))`` over
    ``batches`` plus (``weight_decay`` / 2) ||theta||^2, and the norm of its gradient, accumulated into the parameters'
    ``.grad`` (the caller clears them before and after); None when an embedding or a value is not finite."""
    import torch

    k = len(batches)
    value = 0.0
    for batch in batches:
        z, labels = forward(batch, generator)
        if not bool(torch.isfinite(z.detach()).all()):
            return None
        part = loss(z, labels) / k
        part.backward()
        value += float(part.detach())
    total = torch.zeros((), dtype=torch.float64)
    for p in model.parameters():
        g = torch.zeros_like(p) if p.grad is None else p.grad
        if weight_decay:
            g = g + weight_decay * p.detach()
            value += 0.5 * weight_decay * float(p.detach().to(torch.float64).pow(2).sum())
        total = total + g.detach().to(torch.float64).pow(2).sum().cpu()
    norm = float(total.sqrt())
    return Probe(value, norm) if math.isfinite(norm) and math.isfinite(value) else None
