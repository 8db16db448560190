"""Process hygiene of ``ncgeom sweep`` and ``ncgeom reproduce`` (docs/reliability.md).

Workers die with their parent whatever the signal (SIGKILL included: PR_SET_PDEATHSIG plus a watchdog);
SIGTERM and SIGINT stop cleanly (exit 143 / 130, one line saying how many runs finished, finished runs
intact, lock released); a killed sweep piped into another program lets the pipe reach EOF; and a sweep
killed at a random moment resumes to exactly the results of an uninterrupted one. Real processes run
through ``sys.executable -m ncgeom.cli.main``; the process checks use psutil.
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from ncgeom.campaigns.spec import expand, load_spec, run_name
from ncgeom.campaigns.sweep import count_finished
from ncgeom.interrupts import Interrupted, raise_on_signals
from ncgeom.locking import read_holder
from ncgeom.runs.integrity import check_run
from ncgeom.runs.records import RunSummary, load_history

# 4 runs of ~1 s each (400 epochs of a 3-class, 18-sample problem): with 2 workers, runs are running
# and queued at once, so a signal finds both kinds.
SPEC = """
name = "four"
description = "four one-second runs"
[base]
classes = 3
samples_per_class = 6
batch_size = 18
epochs = 400
setting = "hscl"
beta = 1.0
[[grid]]
seed = [0, 1, 2, 3]
[tiny]
[quick]
[full]
"""
GONE_WITHIN_S = 8.0  # the requirement: no process of a killed sweep alive 8 s later
STARTUP_TIMEOUT_S = 300.0  # generous: the machine running the tests may be loaded


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "ncgeom.cli.main", *args]


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONUNBUFFERED": "1"}


@pytest.fixture
def spec_path(tmp_path) -> Path:
    path = tmp_path / "four.toml"
    path.write_text(SPEC)
    return path


def _run_dirs(spec: Path, out: Path) -> list[Path]:
    s = load_spec(spec)
    return [out / run_name(c, s.grid_keys("tiny")) for c in expand(s, scale="tiny")]


def _start(spec: Path, out: Path, *, workers: int = 2, stdout=subprocess.DEVNULL) -> subprocess.Popen:
    return subprocess.Popen(_cli("sweep", str(spec), "--out", str(out), "--scale", "tiny", "--quiet",
                                 "--workers", str(workers)),
                            stdout=stdout, stderr=subprocess.PIPE, text=True, env=_env())


def _wait_until_training(proc: subprocess.Popen, spec: Path, out: Path, workers: int) -> list[psutil.Process]:
    """Block until ``proc`` holds the lock, its workers exist and a run has started; return its descendants."""
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    parent = psutil.Process(proc.pid)
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"the sweep ended early: {proc.stderr.read() if proc.stderr else ''}"
        holder = read_holder(out)
        children = parent.children(recursive=True)
        started = any((d / "config.json").exists() for d in _run_dirs(spec, out))
        if holder is not None and holder["pid"] == proc.pid and len(children) >= workers and started:
            return children
        time.sleep(0.05)
    raise AssertionError("the sweep did not start training in time")


def _alive(procs: list[psutil.Process]) -> list[psutil.Process]:
    """Processes still running (a zombie, dead but not yet reaped by whoever adopted it, does not count)."""
    alive = []
    for p in procs:
        try:
            if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                alive.append(p)
        except psutil.NoSuchProcess:
            pass
    return alive


def _assert_all_gone(procs: list[psutil.Process], since: float) -> float:
    """Wait until every process in ``procs`` is gone; fail if one outlives GONE_WITHIN_S after ``since``."""
    while _alive(procs) and time.monotonic() - since < GONE_WITHIN_S:
        time.sleep(0.05)
    left = _alive(procs)
    assert not left, f"alive {GONE_WITHIN_S} s after the signal: {[(p.pid, p.cmdline()[-3:]) for p in left]}"
    return time.monotonic() - since


def _rerun_and_validate(spec: Path, out: Path) -> dict:
    """Resume the sweep (serially) to the end; every run directory must then pass check_run."""
    done = subprocess.run(_cli("sweep", str(spec), "--out", str(out), "--scale", "tiny", "--quiet", "--json"),
                          capture_output=True, text=True, timeout=600, env=_env())
    assert done.returncode == 0, done.stderr
    for run_dir in _run_dirs(spec, out):
        assert check_run(run_dir) is None, run_dir
    assert read_holder(out) is None  # released cleanly
    return {"result": json.loads(done.stdout), "stderr": done.stderr}


# --- in-process: the signal becomes an exception -----------------------------------------------------


def test_first_signal_raises_interrupted_later_ones_are_ignored_and_handlers_restored():
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(Interrupted) as info:
        with raise_on_signals():
            try:
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(5)  # the handler raises at once
            finally:
                os.kill(os.getpid(), signal.SIGINT)  # during cleanup: ignored
                os.kill(os.getpid(), signal.SIGTERM)
    assert info.value.signum == signal.SIGTERM and info.value.name == "SIGTERM" and info.value.exit_code == 143
    assert isinstance(info.value, KeyboardInterrupt) and not isinstance(info.value, Exception)
    assert signal.getsignal(signal.SIGTERM) is before
    assert Interrupted(signal.SIGINT).exit_code == 130


# --- real sweeps and signals -------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("sig, code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_sigterm_and_sigint_stop_cleanly(spec_path, tmp_path, sig, code):
    out = tmp_path / "out"
    proc = _start(spec_path, out)
    try:
        procs = _wait_until_training(proc, spec_path, out, workers=2)
        time.sleep(0.3)
        t0 = time.monotonic()
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == code, err
    last = err.strip().splitlines()[-1]
    match = re.fullmatch(rf"ncgeom sweep: interrupted by {sig.name}: (\d) of 4 runs finished; "
                         r"rerun the same command to resume", last)
    assert match, err
    assert "Traceback" not in err
    _assert_all_gone(procs, t0)
    finished = int(match.group(1))
    assert count_finished(spec_path, out, scale="tiny") == (finished, 4)
    rerun = _rerun_and_validate(spec_path, out)
    assert sum(r["skipped"] for r in rerun["result"]["runs"]) == finished  # every finished run intact, kept


@pytest.mark.slow
def test_kill_9_leaves_no_worker_and_the_rerun_takes_over_the_lock(spec_path, tmp_path):
    out = tmp_path / "out"
    proc = _start(spec_path, out)
    try:
        procs = _wait_until_training(proc, spec_path, out, workers=2)
        t0 = time.monotonic()
        proc.kill()
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    _assert_all_gone(procs, t0)
    rerun = _rerun_and_validate(spec_path, out)
    assert f"was left by pid {proc.pid}" in rerun["stderr"]  # the lock file named the killed sweep


@pytest.mark.slow
def test_kill_9_closes_the_pipe_of_a_piped_sweep(spec_path, tmp_path):
    """``ncgeom sweep ... | tee``: once the sweep is killed, no worker keeps its stdout open."""
    out = tmp_path / "out"
    proc = _start(spec_path, out, stdout=subprocess.PIPE)
    eof = threading.Event()

    def drain() -> None:
        assert proc.stdout is not None
        while proc.stdout.read(4096):
            pass
        eof.set()

    reader = threading.Thread(target=drain, daemon=True)
    try:
        procs = _wait_until_training(proc, spec_path, out, workers=2)
        reader.start()
        t0 = time.monotonic()
        proc.kill()
        assert eof.wait(GONE_WITHIN_S), "stdout of the killed sweep is still open (a worker holds it)"
        took = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=60)
    assert took < GONE_WITHIN_S
    _assert_all_gone(procs, t0)


def _terminate_reproduction(out: Path, *stages: str, children: int = 2) -> tuple[subprocess.Popen, str, list, float, bool]:
    """Start ``ncgeom reproduce --tiny --workers 2`` (``--stages`` when given), wait until at least ``children``
    processes exist and a training run has started, SIGTERM it; (process, stderr, its descendants then, time of
    the signal, whether theory was recorded before it)."""
    option = ("--stages", ",".join(stages)) if stages else ()
    proc = subprocess.Popen(_cli("reproduce", "--tiny", "--workers", "2", *option, "--quiet", "--out", str(out)),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=_env())
    try:
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while True:
            procs = psutil.Process(proc.pid).children(recursive=True)
            if len(procs) >= children and list(out.glob("sweeps/*/*/config.json")):
                break
            assert proc.poll() is None and time.monotonic() < deadline, "the reproduction did not start training"
            time.sleep(0.05)
        theory_done = (out / ".stages" / "theory.json").exists()
        t0 = time.monotonic()
        proc.terminate()
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 143, err
    assert re.search(r"ncgeom reproduce: interrupted by SIGTERM: \d+ of \d+ runs finished; rerun the same command "
                     r"to resume\n?$", err), err
    assert "Traceback" not in err and "terminate called" not in err  # no abort at exit either
    _assert_all_gone(procs, t0)
    assert read_holder(out) is None and all(read_holder(d) is None for d in out.glob("sweeps/*"))
    assert not (out / ".stages" / "claims.json").exists()  # an interrupted stage is not recorded as done
    return proc, err, procs, t0, theory_done


@pytest.mark.slow
def test_sigterm_stops_a_reproduction_cleanly(tmp_path):
    out = tmp_path / "out"
    _terminate_reproduction(out, "claims")
    for summary in out.glob("sweeps/*/*/summary.json"):
        assert check_run(summary.parent) is None


@pytest.mark.slow
def test_sigterm_stops_a_reproduction_with_its_side_process(tmp_path):
    """Every stage, 2 workers: verify and theory run in a process beside the claims. SIGTERM while both sides
    work stops the workers and that process too (exit 143, one line, no traceback, no abort at exit), and no
    stage of the cut-off side is recorded."""
    out = tmp_path / "out"
    *_, theory_done = _terminate_reproduction(out, children=3)  # two workers and the side process
    if not theory_done:  # theory was cut off (tiny theory takes ~15 s; training starts within a few)
        assert not (out / ".stages" / "theory.json").exists()


def _final_state(run_dir: Path) -> tuple:
    """What a run computed, without its wall-clock times: status, epochs, final record, every history line."""
    summary = RunSummary.load(run_dir)
    assert summary is not None
    untimed = [{**r.to_dict(), "time_s": None} for r in load_history(run_dir)]
    return summary.status, summary.epochs_run, {**summary.final.to_dict(), "time_s": None}, untimed


@pytest.mark.slow
def test_kill_at_random_moments_then_resume_matches_an_uninterrupted_sweep(spec_path, tmp_path):
    trials = 5
    seed = random.SystemRandom().randrange(2**32)
    rng = random.Random(seed)
    base = tmp_path / "base"
    done = subprocess.run(_cli("sweep", str(spec_path), "--out", str(base), "--scale", "tiny", "--quiet",
                               "--workers", "2"), capture_output=True, text=True, timeout=600, env=_env())
    assert done.returncode == 0, done.stderr
    expected = {d.name: _final_state(d) for d in _run_dirs(spec_path, base)}
    for trial in range(trials):
        out = tmp_path / f"trial{trial}"
        sig = rng.choice([signal.SIGKILL, signal.SIGTERM, signal.SIGINT])
        delay = rng.uniform(0.5, 12.0)  # from the start: import, lock, worker start, training, final writes
        proc = _start(spec_path, out)
        procs: list[psutil.Process] = []
        t_end = time.monotonic() + delay
        while time.monotonic() < t_end and proc.poll() is None:
            try:
                procs = psutil.Process(proc.pid).children(recursive=True) or procs
            except psutil.NoSuchProcess:
                break
            time.sleep(0.05)
        t0 = time.monotonic()
        if proc.poll() is None:
            proc.send_signal(sig)
        proc.communicate(timeout=120)
        why = f"trial {trial}: {sig.name} after {delay:.2f} s (seed {seed})"
        # 0: finished first; 128 + n: stopped by our handler; -n: the default action, before the handlers are
        # installed (while Python imports; nothing is written yet) or for SIGKILL (shells show both as 128 + n)
        allowed = {0, -sig} if sig == signal.SIGKILL else {0, -sig, 128 + sig}
        print(f"{why}: exit code {proc.returncode}")  # shown with -s: which phases the trials hit
        assert proc.returncode in allowed, why
        _assert_all_gone(procs, t0)
        _rerun_and_validate(spec_path, out)
        got = {d.name: _final_state(d) for d in _run_dirs(spec_path, out)}
        assert got == expected, why
