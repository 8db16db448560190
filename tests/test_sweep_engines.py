"""The sweep's two engines (ncgeom.campaigns.sweep: ``engine="stacked"|"sequential"``).

The batched engine cuts the runs to do into stacks (:func:`plan_units`) and trains each with
:func:`ncgeom.runs.stacked.run_stack`; the sequential one trains run after run. Both must give the
same runs with the same final numbers within the stacked engine's tolerance against the sequential engine
(tests/test_stacked.py): the stack's weighted estimator is another kernel (dense) than the sequential
default (blocked), so a step's loss agrees to a few B eps and T steps of Adam to about T B eps times the
amplification of training, allowed to be 100: TOL = 100 T B eps in float64 (the specs below set
``dtype = "float64"``), the metrics (float64, O(1) condition on these runs) to 10 TOL. Between stacks of
different composition (resume, another worker count) a float64 run is bitwise equal: every reduction of
a stack is per run and the stacked loss pads batches so that no run's elementwise values fall in a SIMD
tail (tests/test_stacked.py; docs/experiments.md, "Engines"), and a float32 run is bitwise equal too.
"""

from __future__ import annotations

import dataclasses
import json
import multiprocessing
import os
import signal
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from ncgeom.campaigns.claims import claim_spec, evaluate_claim
from ncgeom.campaigns.plan import plan_units
from ncgeom.campaigns.spec import expand, load_spec, run_name
from ncgeom.campaigns.sweep import run_sweep
from ncgeom.cli.main import main
from ncgeom.runs import Config
from ncgeom.runs.budget import run_memory_estimate, stack_memory_bytes
from ncgeom.runs.integrity import check_run
from ncgeom.runs.stacked import stack_key
from ncgeom.vocabulary import ENGINES

EPS64 = float(np.finfo(np.float64).eps)

# 8 unconstrained runs (one stack) + 2 linear runs (another): 3 classes x 6 samples, one batch of 18 per epoch
SPEC = """
name = "engines"
description = "every setting, a few betas, two model kinds"
[base]
classes = 3
samples_per_class = 6
test_per_class = 4
batch_size = 18
epochs = 20
dtype = "float64"
lr = 0.05
[[grid]]
setting = ["scl", "ucl"]
beta = [0.0]
[[grid]]
setting = ["hscl", "hucl"]
beta = [1.0, 5.0, 30.0]
seed = [0]
[[grid]]
setting = ["hscl"]
beta = [2.0]
model = ["linear"]
seed = [0, 1]
[tiny]
[quick]
[full]
"""
STEPS = 20  # epochs x ceil(N / B) = 20 x 1
TOL = 100 * STEPS * 18 * EPS64  # module docstring: 8.0e-11


def _indices(units) -> list[list[int]]:
    """The config indices of each unit of a plan (ncgeom.campaigns.plan.Unit)."""
    return [list(u.indices) for u in units]


pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py: one torch and one BLAS thread


@pytest.fixture
def spec_path(tmp_path) -> Path:
    path = tmp_path / "engines.toml"
    path.write_text(SPEC)
    return path


def _assert_same_finals(a, b, *, tol: float) -> None:
    """Same run names, statuses and epochs; final loss and every float metric within ``tol`` (0: bitwise)."""
    assert [r.name for r in a.runs] == [r.name for r in b.runs]
    for ra, rb in zip(a.runs, b.runs, strict=True):
        sa, sb = ra.summary, rb.summary
        assert (sa.status, sa.epochs_run) == (sb.status, sb.epochs_run), ra.name
        np.testing.assert_allclose(sb.final.loss, sa.final.loss, rtol=tol, atol=tol, err_msg=ra.name)
        for key, value in sa.final.metrics.items():
            if isinstance(value, float):
                np.testing.assert_allclose(sb.final.metrics[key], value, rtol=10 * tol, atol=10 * tol,
                                           err_msg=f"{ra.name}: {key}")


# --- plan_units -----------------------------------------------------------------------------------------


def _configs(n: int, **changes) -> list[Config]:
    return [Config(classes=3, samples_per_class=6, batch_size=18, epochs=2, seed=s, **changes) for s in range(n)]


def _per_run(config: Config) -> int:
    return sum(part[2] for part in run_memory_estimate(config)) + stack_memory_bytes([config])


def test_plan_units_sequential_is_one_run_per_unit():
    assert _indices(plan_units(_configs(3), engine="sequential", workers=2)) == [[0], [1], [2]]


def test_plan_units_groups_by_stack_key_and_spreads_over_workers():
    configs = _configs(5) + _configs(2, model="linear") + _configs(2)[:1]  # keys: A A A A A B B A
    assert len({stack_key(c) for c in configs}) == 2
    big = 2**40  # memory is no limit here
    assert _indices(plan_units(configs, engine="stacked", workers=1, budget=big)) == [[0, 1, 2, 3, 4, 7], [5, 6]]
    # 8 runs, 2 workers: at most ceil(8 / 2) = 4 runs a stack; 6 -> 3 + 3 (near-equal parts), 2 -> 2
    assert _indices(plan_units(configs, engine="stacked", workers=2, budget=big)) == [[0, 1, 2], [3, 4, 7], [5, 6]]
    assert _indices(plan_units(configs, engine="stacked", workers=8, budget=big)) == [[i] for i in (0, 1, 2, 3, 4, 7, 5, 6)]


def test_plan_units_cuts_stacks_to_the_memory_budget_of_a_worker():
    configs = _configs(7)
    per_run = _per_run(configs[0])
    # a worker's share holds exactly 3 runs: 7 -> ceil(7 / 3) = 3 parts of 2, 2, 3
    assert _indices(plan_units(configs, engine="stacked", workers=1, budget=3 * per_run)) == [[0, 1], [2, 3], [4, 5, 6]]
    assert _indices(plan_units(configs, engine="stacked", workers=2, budget=2 * 3 * per_run + 1)) == [[0, 1], [2, 3], [4, 5, 6]]
    assert _indices(plan_units(configs, engine="stacked", workers=1, budget=3 * per_run - 1)) == [[0], [1, 2], [3, 4], [5, 6]]  # 2 a stack
    # a budget below one run still gives every run a unit (run_stack then refuses it, as run() would)
    assert _indices(plan_units(configs, engine="stacked", workers=1, budget=1)) == [[i] for i in range(7)]
    assert _indices(plan_units([], workers=3)) == []


def test_unknown_engine_is_refused(spec_path, tmp_path, capsys):
    with pytest.raises(ValueError, match="engine must be one of"):
        plan_units(_configs(1), engine="stack")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="engine must be one of"):
        run_sweep(spec_path, tmp_path / "x", engine="fast")  # type: ignore[arg-type]
    assert main(["sweep", str(spec_path), "--out", str(tmp_path / "y"), "--engine", "fast"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("ncgeom sweep: error: --engine") and not (tmp_path / "y").exists()


# --- the engines agree ------------------------------------------------------------------------------------


def test_batched_and_sequential_give_the_same_runs(spec_path, tmp_path):
    sequential = run_sweep(spec_path, tmp_path / "seq", scale="quick", engine="sequential")
    batched = run_sweep(spec_path, tmp_path / "bat", scale="quick", engine="stacked")
    assert len(batched.runs) == 10 and all(r.status == "completed" for r in batched.runs)
    _assert_same_finals(sequential, batched, tol=TOL)
    assert (tmp_path / "bat" / "summary.csv").read_text().splitlines()[0] == \
        (tmp_path / "seq" / "summary.csv").read_text().splitlines()[0]
    for r in batched.runs:
        assert check_run(tmp_path / "bat" / r.name, r.config) is None


def test_claim_verdicts_are_the_same_with_both_engines(tmp_path):
    spec = claim_spec("6")
    spec = dataclasses.replace(spec, base={**spec.base, "dtype": "float64"})  # module docstring: float64
    sequential = run_sweep(spec, tmp_path / "seq", scale="tiny", engine="sequential")
    batched = run_sweep(spec, tmp_path / "bat", scale="tiny", engine="stacked")
    # tiny claim 6: N = 10 x 16, B = 64: T = 2 epochs x 3 steps
    _assert_same_finals(sequential, batched, tol=100 * 2 * 3 * 64 * EPS64)
    rows_s, rows_b = evaluate_claim("6", sequential), evaluate_claim("6", batched)
    assert [(r.setting, r.metric, r.verdict) for r in rows_s] == [(r.setting, r.metric, r.verdict) for r in rows_b]


def _spec_of(dtype: str, tmp_path: Path) -> Path:
    path = tmp_path / f"engines-{dtype}.toml"
    path.write_text(SPEC.replace('dtype = "float64"', f'dtype = "{dtype}"'))
    return path


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_two_workers_with_stacks_equal_one_worker_bitwise(dtype, tmp_path):
    spec_path = _spec_of(dtype, tmp_path)
    serial = run_sweep(spec_path, tmp_path / "one", scale="quick")  # 2 stacks: 8 unconstrained, 2 linear
    # fork start method: the workers inherit the imports, so the test stays fast; 2 workers: stacks of <= 5
    with ProcessPoolExecutor(max_workers=2, mp_context=multiprocessing.get_context("fork")) as ex:
        pooled = run_sweep(spec_path, tmp_path / "two", scale="quick", workers=2, executor=ex)
    _assert_same_finals(serial, pooled, tol=0.0)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_resume_reruns_only_the_run_without_summary(dtype, tmp_path):
    spec_path = _spec_of(dtype, tmp_path)
    out = tmp_path / "out"
    first = run_sweep(spec_path, out, scale="quick")
    stamps = {r.name: (out / r.name / "summary.json").stat().st_mtime_ns for r in first.runs}
    killed = first.runs[4].name
    (out / killed / "summary.json").unlink()
    second = run_sweep(spec_path, out, scale="quick")
    assert [r.name for r in second.runs if not r.skipped] == [killed]
    for r in second.runs:
        if r.name != killed:
            assert (out / r.name / "summary.json").stat().st_mtime_ns == stamps[r.name]
    _assert_same_finals(first, second, tol=0.0)  # alone in its stack now: bitwise the same run


# --- a stack killed by SIGKILL --------------------------------------------------------------------------

LONG_SPEC = """
name = "long"
description = "one stack of four runs of a few seconds"
[base]
classes = 3
samples_per_class = 6
batch_size = 18
epochs = 1500
metrics_every = 100
setting = "hscl"
beta = 1.0
[[grid]]
seed = [0, 1, 2, 3]
[tiny]
[quick]
[full]
"""


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "ncgeom.cli.main", *args]


@pytest.mark.slow
def test_kill_9_mid_stack_then_rerun_gives_all_runs_valid(tmp_path):
    spec_path = tmp_path / "long.toml"
    spec_path.write_text(LONG_SPEC)
    spec = load_spec(spec_path)
    dirs = [tmp_path / "out" / run_name(c, spec.grid_keys("tiny")) for c in expand(spec, scale="tiny")]
    args = ("sweep", str(spec_path), "--out", str(tmp_path / "out"), "--scale", "tiny", "--quiet")
    proc = subprocess.Popen(_cli(*args), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    deadline = time.monotonic() + 300
    while not all((d / "history.jsonl").exists() for d in dirs):  # the stack has started its epochs
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        assert time.monotonic() < deadline, "the stack did not start in time"
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=60)
    unfinished = [d.name for d in dirs if not (d / "summary.json").exists()]
    assert unfinished, "the stack finished before the kill: make LONG_SPEC longer"
    done = subprocess.run(_cli(*args, "--json"), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    rerun = [r["name"] for r in json.loads(done.stdout)["runs"] if not r["skipped"]]
    assert rerun == unfinished  # the finished runs of the killed stack (if any) are kept
    for d, c in zip(dirs, expand(spec, scale="tiny"), strict=True):
        assert check_run(d, c) is None, d


def test_sweep_json_names_the_engine(spec_path, tmp_path):
    run_sweep(spec_path, tmp_path / "s", scale="quick", engine="sequential")
    assert json.loads((tmp_path / "s" / "sweep.json").read_text())["engine"] == "sequential"
    assert ENGINES == ("stacked", "sequential")


def test_the_engine_s_earlier_name_is_accepted_for_one_release(spec_path, tmp_path, capsys):
    """"batched" (the stacked engine's name before the run layer, CHANGELOG.md) still works: a DeprecationWarning
    from the library, one note line on stderr from the CLI, and the runs of the stacked engine."""
    with pytest.warns(DeprecationWarning, match="now called 'stacked'"):
        units = plan_units(_configs(2), engine="batched")  # type: ignore[arg-type]
    assert [u.kind for u in units] == ["stack"]
    assert main(["sweep", str(spec_path), "--out", str(tmp_path / "b"), "--engine", "batched", "--scale", "quick"]) == 0
    notes = [line for line in capsys.readouterr().err.splitlines() if line.startswith("note:")]
    assert notes == ["note: --engine batched is now called stacked; the old name will be removed in the next release"]
    assert json.loads((tmp_path / "b" / "sweep.json").read_text())["engine"] == "stacked"



def test_unnormalized_runs_stack(spec_path, tmp_path):
    """norm = "none": the unconstrained embeddings are the parameters themselves (a regression: they were
    handed to numpy still requiring grad, and every stack of claim 4 failed)."""
    spec = dataclasses.replace(load_spec(spec_path), base={**load_spec(spec_path).base, "norm": "none", "epochs": 3})
    sequential = run_sweep(spec, tmp_path / "seq", scale="quick", engine="sequential")
    batched = run_sweep(spec, tmp_path / "bat", scale="quick", engine="stacked")
    assert not batched.failed
    _assert_same_finals(sequential, batched, tol=100 * 3 * 18 * EPS64)  # T = 3 steps
