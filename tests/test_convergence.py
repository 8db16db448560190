"""ncgeom.runs.convergence: the stationarity measure that decides whether a run has converged (docs/theory.md,
section 9, "Convergence"), the stop rule, and the probe's promise to change nothing of the training.

In the order of trust: the state function on hand-built histories (each state, and each bound tested on both
sides), then real runs: a converged HUCL run against a frozen one (beta = 30) and one stopped early on purpose, a
stalled run (a learning rate too small to move), ``stop="converged"`` ending a run early, and probing that leaves a
trajectory bitwise unchanged in all three drivers.
"""

import numpy as np
import pytest
from numpy.testing import assert_array_equal

from ncgeom.runs import Config, run, run_stack
from ncgeom.runs.convergence import (
    GRAD_RATIO,
    LOSS_DRIFT,
    METRIC_DRIFT,
    SPECTRUM_DRIFT,
    WINDOW,
    convergence_state,
    read_convergence,
)
from ncgeom.runs.records import EpochRecord

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py: one torch and one BLAS thread


def _record(epoch, *, probe=1.0, grad=0.01, etf=0.01, within=0.01, smin=0.9):
    metrics = {"etf_distance": etf, "within_class": within, "spectrum": [1.0, smin]}
    return EpochRecord(epoch, 1.0, 0.5, 0.5, metrics=metrics, probe_loss=probe, grad_norm=grad)


def _history(n=12, every=5, **kw):
    """``n`` metric epochs, every ``every`` epochs, each record with the same values but for the keyword lists."""
    initial = EpochRecord(0, None, 0.5, None, metrics={"etf_distance": 0.7, "within_class": 0.9,
                                                         "spectrum": [1.0, 0.5]}, probe_loss=2.0, grad_norm=1.0)
    records = []
    for i in range(n):
        values = {k: (v[i] if isinstance(v, list) else v) for k, v in kw.items()}
        records.append(_record(every * (i + 1), **values))
    return initial, records


def test_a_still_history_with_a_fallen_gradient_is_converged():
    initial, history = _history()
    reading = read_convergence(initial, history)
    assert reading.state == "converged" and reading.grad_ratio == pytest.approx(0.01)
    assert reading.loss_drift == 0.0 and reading.metric_drift == 0.0 and reading.spectrum_drift == 0.0


def test_a_still_history_whose_gradient_did_not_fall_is_stalled():
    initial, history = _history(grad=1.0)
    assert convergence_state(initial, history) == "stalled"
    initial, history = _history(grad=GRAD_RATIO)  # the bound itself is converged
    assert convergence_state(initial, history) == "converged"
    initial, history = _history(grad=np.nextafter(GRAD_RATIO, 1.0))
    assert convergence_state(initial, history) == "stalled"


@pytest.mark.parametrize("key, bound, make", [
    ("probe", LOSS_DRIFT, lambda x: 1.0 + x),
    ("etf", METRIC_DRIFT, lambda x: 0.01 + x),
    ("within", METRIC_DRIFT, lambda x: 0.01 + x),
    ("smin", SPECTRUM_DRIFT, lambda x: 0.9 * 10 ** -x),
])
def test_each_drift_decides_at_its_bound(key, bound, make):
    """A trend of 0.9 x the bound over the window keeps the run converged; 1.1 x moves it. The window of 60 epochs
    with metrics every 5: the last quarter holds 4 metric epochs, so the window is the last 5 (40..60); its halves are
    40, 45 and 55, 60 (50 in neither): a step of x at epoch 55 is a trend of x."""
    for factor, state in ((0.9, "converged"), (1.1, "still moving")):
        values = [make(0.0)] * 10 + [make(factor * bound)] * 2
        initial, history = _history(**{key: values})
        assert convergence_state(initial, history) == state, (key, factor)


def test_the_window_is_a_quarter_of_the_run_and_needs_enough_metric_epochs():
    # a creep of 0.0002 per epoch in etf_distance over 300 epochs: the window is 225..300 (16 metric epochs), its
    # halves' means are 8 metric epochs (40 epochs) apart: a trend of 0.008, above the bound; the same creep over
    # 60 epochs (window 40..60, halves 15 epochs apart: 0.003) is below it
    etfs = [0.7 - 0.0002 * 5 * (i + 1) for i in range(60)]
    initial, history = _history(n=60, etf=etfs)
    reading = read_convergence(initial, history)
    assert reading.metric_drift == pytest.approx(0.0002 * 40, rel=1e-9) and reading.state == "still moving"
    initial, history = _history(n=12, etf=etfs[:12])
    assert read_convergence(initial, history).metric_drift == pytest.approx(0.0002 * 15, rel=1e-9)
    initial, history = _history(n=WINDOW - 1)
    assert convergence_state(initial, history) == "undetermined"
    initial, history = _history(n=12, grad=[0.01] * 11 + [None])  # a missing gradient
    assert convergence_state(initial, history) == "undetermined"


# --- real runs ------------------------------------------------------------------------------------------------
BASE = dict(classes=10, samples_per_class=50, batch_size=128, lr=0.05, tau=1.0, metrics_every=5,
            model="unconstrained", norm="sphere", seed=100)  # seed 100: an exploratory seed of no claim


def test_the_measure_separates_converged_creeping_and_early_stopped_hucl_runs():
    """HUCL beta = 1 reaches NC and stops moving: converged. HUCL beta = 30, the run docs/results.md used to call
    nearly frozen, is not frozen: its etf_distance stays far from NC (~0.74) while its within-class variance still
    creeps down at 200 epochs (still moving), and its gradient has fallen far below the bound (it approaches a fixed
    point of training). The beta = 1 run cut at 25 epochs is still moving. (A frozen run, one whose metrics stop
    while its gradient does not fall, is the stalled one of the next test.)"""
    converged, creeping = run_stack([Config(**BASE, setting="hucl", beta=1.0, epochs=200),
                                     Config(**BASE, setting="hucl", beta=30.0, epochs=200)])
    early = run(Config(**BASE, setting="hucl", beta=1.0, epochs=25))
    assert converged.convergence == "converged" and converged.final.value("etf_distance") < 0.05
    assert creeping.convergence == "still moving" and creeping.final.value("etf_distance") > 0.5
    assert read_convergence(creeping.initial, creeping.history).grad_ratio < GRAD_RATIO / 10
    assert early.convergence == "still moving"
    assert {converged.stop_reason, creeping.stop_reason, early.stop_reason} == {"budget"}


def test_a_learning_rate_too_small_to_move_is_stalled():
    result = run(Config(**{**BASE, "lr": 1e-5}, setting="hscl", beta=5.0, epochs=60))
    reading = read_convergence(result.initial, result.history)
    assert reading.state == "stalled" and reading.grad_ratio > 0.5


def test_stop_converged_ends_a_run_at_its_first_converged_epoch_and_leaves_its_stack_mates_alone():
    fast = Config(**BASE, setting="hscl", beta=5.0, epochs=150, stop="converged")
    slow = Config(**BASE, setting="hucl", beta=30.0, epochs=150, stop="converged")
    stopped, going = run_stack([fast, slow])
    assert stopped.stop_reason == "converged" and stopped.convergence == "converged"
    assert len(stopped.history) < 150 and "converged at epoch" in stopped.message
    assert going.stop_reason == "budget" and len(going.history) == 150
    alone = run_stack([slow])[0]  # the mate that left the stack early changed nothing of this run
    assert_array_equal(going.embeddings, alone.embeddings)
    assert [r.to_dict() | {"time_s": None} for r in going.history] == [r.to_dict() | {"time_s": None}
                                                                      for r in alone.history]


@pytest.mark.parametrize("extra", [dict(model="unconstrained"),
                                   dict(model="mlp", positives="noise", noise_scale=0.3, setting="hucl", beta=2.0,
                                        estimator="sampled", num_negatives=3)])
def test_probing_leaves_the_trajectory_bitwise_unchanged(extra):
    """Metrics (and so probes) every epoch or every 5th: the same trajectory, bit for bit, in the single and the
    stacked driver (the probe draws from its own generator and touches no parameter or optimizer state)."""
    base = {**BASE, "classes": 4, "samples_per_class": 12, "batch_size": 16, "epochs": 10, "input_dim": 8,
            "hidden_dim": 16, "lr": 0.01, **extra}
    a, b = run(Config(**{**base, "metrics_every": 1})), run(Config(**{**base, "metrics_every": 5}))
    assert_array_equal(a.embeddings, b.embeddings)
    sa, sb = run_stack([Config(**{**base, "metrics_every": 1})]), run_stack([Config(**{**base, "metrics_every": 5})])
    assert_array_equal(sa[0].embeddings, sb[0].embeddings)
    assert all(r.grad_norm is not None and r.probe_loss is not None for r in a.history)


def test_a_run_started_near_nc_measures_its_gradient_against_a_random_initialization():
    """SCL from a near-NC start (claim 7) stays at NC: its own initial gradient is already at the optimizer's floor,
    so the ratio against it would never fall ("stalled"); against the gradient at the random initialization it would
    otherwise have had, it has converged."""
    result = run(Config(**BASE, setting="scl", beta=0.0, init="near_nc", init_noise=0.05, epochs=60))
    assert result.grad_reference is not None and result.grad_reference > 10 * result.initial.grad_norm
    assert result.convergence == "converged"
    assert read_convergence(result.initial, result.history).state == "stalled"  # the ratio against its own start
