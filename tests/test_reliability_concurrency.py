"""One writer per output folder, and resume that checks every finished run (docs/reliability.md).

ncgeom.locking (the folder lock: refusal naming the holder, --wait, stale locks, re-entrance),
ncgeom.runs.integrity (a "finished" run with damaged files is detected) and the sweep's use of
both: a damaged run is rerun, and two sweeps on one folder leave every run valid. Real processes run
through ``sys.executable -m ncgeom.cli.main``; tests over 5 s are marked slow.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import numpy as np
import pytest

from ncgeom.campaigns.spec import expand, load_spec, run_name
from ncgeom.campaigns.sweep import count_finished, run_sweep
from ncgeom.cli.main import main
from ncgeom.locking import LOCK_FILE, folder_lock, read_holder
from ncgeom.runs.integrity import check_run
from ncgeom.runs.records import RunSummary, load_history

# 3 runs of ~0.1 s each (classes 3, 6 samples per class, 4 epochs)
QUICK_SPEC = """
name = "quick3"
description = "three tiny runs"
[base]
classes = 3
samples_per_class = 6
batch_size = 18
epochs = 4
setting = "hscl"
beta = 1.0
[[grid]]
seed = [0, 1, 2]
[tiny]
[quick]
[full]
"""
# 8 runs of ~1 s each: a sweep that is still running when a second one starts
LONG_SPEC = QUICK_SPEC.replace("epochs = 4", "epochs = 400").replace("seed = [0, 1, 2]", "seed = [0, 1, 2, 3, 4, 5, 6, 7]")


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "ncgeom.cli.main", *args]


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONUNBUFFERED": "1"}


def _write_spec(tmp_path: Path, text: str, name: str) -> Path:
    path = tmp_path / f"{name}.toml"
    path.write_text(text)
    return path


def _run_dirs(spec_path: Path, out: Path) -> list[Path]:
    spec = load_spec(spec_path)
    return [out / run_name(c, spec.grid_keys("tiny")) for c in expand(spec, scale="tiny")]


def _wait_for_holder(out: Path, pid: int, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        holder = read_holder(out)
        if holder is not None and holder["pid"] == pid:
            return
        time.sleep(0.05)
    raise AssertionError(f"pid {pid} never took the lock of {out}")


# --- the lock itself (fast: the second process imports ncgeom.locking only) ---------------------------

_TRY_LOCK = "import sys; from ncgeom.locking import folder_lock\nwith folder_lock(sys.argv[1], wait=float(sys.argv[2])): print('got it')"


def test_second_writer_is_refused_naming_the_holder(tmp_path):
    with folder_lock(tmp_path / "out") as lock:
        assert read_holder(lock.folder)["pid"] == os.getpid()
        proc = subprocess.run([sys.executable, "-c", _TRY_LOCK, str(tmp_path / "out"), "0"],
                              capture_output=True, text=True, timeout=60)
        assert proc.returncode == 1 and "got it" not in proc.stdout
        assert f"LockedError: {tmp_path / 'out'} is being written by pid {os.getpid()}" in proc.stderr
        assert "pass --wait" in proc.stderr
        # a bounded wait gives up too, saying how long it waited
        t0 = time.monotonic()
        proc = subprocess.run([sys.executable, "-c", _TRY_LOCK, str(tmp_path / "out"), "0.5"],
                              capture_output=True, text=True, timeout=60)
        assert proc.returncode == 1 and "after waiting 0.5 s" in proc.stderr
        assert time.monotonic() - t0 >= 0.5
    # released: the file stays (deleting it would let two writers lock two files) but is empty
    assert (tmp_path / "out" / LOCK_FILE).read_text() == "" and read_holder(tmp_path / "out") is None
    proc = subprocess.run([sys.executable, "-c", _TRY_LOCK, str(tmp_path / "out"), "0"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout.strip() == "got it"


def test_waiting_writer_gets_the_lock_when_the_holder_exits(tmp_path):
    out = tmp_path / "out"
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time; from ncgeom.locking import folder_lock\n"
                               "with folder_lock(sys.argv[1]): time.sleep(1.5)", str(out)])
    try:
        _wait_for_holder(out, holder.pid)
        t0 = time.monotonic()
        with folder_lock(out, wait=60) as lock:
            waited = time.monotonic() - t0
            assert lock.previous is None  # released cleanly: nothing was taken over
            assert read_holder(out)["pid"] == os.getpid()
        assert 0.0 < waited < 60
    finally:
        holder.wait(timeout=60)
    assert holder.returncode == 0


def test_stale_lock_of_a_dead_process_is_taken_over(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait(timeout=60)
    stale = {"pid": dead.pid, "host": "elsewhere", "started": "2020-01-01T00:00:00+00:00", "command": "ncgeom sweep"}
    (out / LOCK_FILE).write_text(json.dumps(stale))
    with folder_lock(out) as lock:  # no wait needed: a lock file is not a lock; the flock died with its holder
        assert lock.previous == stale
        assert read_holder(out)["pid"] == os.getpid()


def test_lock_file_left_by_a_killed_holder_is_taken_over(tmp_path):
    out = tmp_path / "out"
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time; from ncgeom.locking import folder_lock\n"
                               "with folder_lock(sys.argv[1]): time.sleep(600)", str(out)])
    _wait_for_holder(out, holder.pid)
    holder.kill()
    holder.wait(timeout=60)
    assert read_holder(out)["pid"] == holder.pid  # the file still names the killed holder
    with folder_lock(out) as lock:
        assert lock.previous is not None and lock.previous["pid"] == holder.pid


def test_lock_is_reentrant_within_a_process_and_bad_waits_are_refused(tmp_path):
    with folder_lock(tmp_path / "a") as outer, folder_lock(tmp_path / "a") as inner:
        assert inner is outer
        with folder_lock(tmp_path / "a" / "sub") as sub:  # a sub-folder has its own lock
            assert sub.fd != outer.fd
    assert read_holder(tmp_path / "a") is None and read_holder(tmp_path / "a" / "sub") is None
    with pytest.raises(ValueError, match="wait must be a number of seconds >= 0"):
        with folder_lock(tmp_path / "a", wait=-1):
            pass


# --- integrity of a finished run ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def baseline(tmp_path_factory):
    """One uninterrupted in-process sweep of QUICK_SPEC (the reference every damaged copy is compared to)."""
    root = tmp_path_factory.mktemp("baseline")
    spec_path = _write_spec(root, QUICK_SPEC, "quick3")
    result = run_sweep(spec_path, root / "out", scale="tiny")
    assert [r.status for r in result.runs] == ["completed"] * 3
    return spec_path, root / "out", result


def _npz_bytes(**arrays) -> bytes:
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getvalue()


def _damage(run_dir: Path, kind: str) -> None:
    history = run_dir / "history.jsonl"
    lines = history.read_text().splitlines()
    if kind == "history_bad_line":
        lines[1] = '{"epoch": 2, "loss": '
        history.write_text("\n".join(lines) + "\n")
    elif kind == "history_short":
        history.write_text("\n".join(lines[:-1]) + "\n")
    elif kind == "history_torn_tail":
        history.write_text("\n".join(lines) + '\n{"epoch": 5, "lo')
    elif kind == "history_unknown_key":
        record = json.loads(lines[0])
        record["colour"] = "red"
        lines[0] = json.dumps(record)
        history.write_text("\n".join(lines) + "\n")
    elif kind == "summary_truncated":
        text = (run_dir / "summary.json").read_text()
        (run_dir / "summary.json").write_text(text[: len(text) // 2])
    elif kind == "config_other":
        data = json.loads((run_dir / "config.json").read_text())
        data["lr"] = data["lr"] * 2
        (run_dir / "config.json").write_text(json.dumps(data))
    elif kind == "embeddings_missing":
        (run_dir / "embeddings.npz").unlink()
    elif kind == "embeddings_truncated":
        data = (run_dir / "embeddings.npz").read_bytes()
        (run_dir / "embeddings.npz").write_bytes(data[: len(data) // 2])
    elif kind == "embeddings_wrong_shape":
        with np.load(run_dir / "embeddings.npz") as old:
            z, labels = old["z"], old["labels"]
        (run_dir / "embeddings.npz").write_bytes(_npz_bytes(z=z[:-1], labels=labels[:-1]))
    elif kind == "embeddings_pickled":
        objects = np.empty(2, dtype=object)
        objects[:] = [{"evil": 1}, None]
        (run_dir / "embeddings.npz").write_bytes(_npz_bytes(z=objects, labels=np.zeros(2, dtype=np.int64)))
    else:  # pragma: no cover
        raise AssertionError(kind)


# damage -> (the file the check must name, a fragment of its reason)
DAMAGE = {
    "history_bad_line": ("history.jsonl", "line 2 is not JSON"),
    "history_short": ("history.jsonl", "3 complete epoch record(s) (epochs 1..3), the summary says 4"),
    "history_torn_tail": ("history.jsonl", "line 5 is not a complete epoch record"),
    "history_unknown_key": ("history.jsonl", "epoch record: unknown key(s) colour"),
    "summary_truncated": ("summary.json", "JSONDecodeError"),
    "config_other": ("config.json", "the config differs from the expected one (lr = "),
    "embeddings_missing": ("embeddings.npz", "missing"),
    "embeddings_truncated": ("embeddings.npz", "File is not a zip file"),
    "embeddings_wrong_shape": ("embeddings.npz", "z is float64 [17, 2], expected shape [18, 2]"),
    "embeddings_pickled": ("embeddings.npz", "holds Python objects (dtype object)"),
}


def _names(problem: str | None, kind: str) -> bool:
    file, fragment = DAMAGE[kind]
    return problem is not None and problem.startswith(f"{file}: ") and fragment in problem


def test_whole_runs_pass_the_check(baseline):
    spec_path, out, _ = baseline
    for run_dir in _run_dirs(spec_path, out):
        assert check_run(run_dir) is None
        assert len(load_history(run_dir)) == RunSummary.load(run_dir).epochs_run == 4


@pytest.mark.parametrize("kind", sorted(DAMAGE))
def test_damaged_finished_run_is_detected_and_rerun(baseline, tmp_path, kind):
    spec_path, base_out, base = baseline
    out = tmp_path / "out"
    shutil.copytree(base_out, out)
    runs = _run_dirs(spec_path, out)
    damaged = runs[1]
    _damage(damaged, kind)
    problem = check_run(damaged, base.runs[1].config)
    assert _names(problem, kind), problem
    result = run_sweep(spec_path, out, scale="tiny")
    assert [r.skipped for r in result.runs] == [True, False, True]
    assert [r.invalid is not None for r in result.runs] == [False, True, False]
    assert _names(result.runs[1].invalid, kind), result.runs[1].invalid
    assert [r.status for r in result.runs] == ["completed"] * 3
    for run_dir in runs:
        assert check_run(run_dir) is None
    # the rerun reproduces the uninterrupted run (bitwise on CPU), except the wall-clock times
    again, first = result.runs[1].summary, base.runs[1].summary
    assert again.final.to_dict() | {"time_s": None} == first.final.to_dict() | {"time_s": None}
    assert again.epochs_run == first.epochs_run and again.status == first.status
    assert not list(out.rglob("*.tmp"))
    assert json.loads((out / "sweep.json").read_text())["runs"][1]["invalid"] == result.runs[1].invalid


def test_pickled_embeddings_are_never_unpickled(baseline, tmp_path, monkeypatch):
    spec_path, base_out, _ = baseline
    out = tmp_path / "out"
    shutil.copytree(base_out, out)
    run_dir = _run_dirs(spec_path, out)[0]
    _damage(run_dir, "embeddings_pickled")
    import pickle

    def refuse(*args, **kwargs):
        raise AssertionError("pickle.load called")

    monkeypatch.setattr(pickle, "load", refuse)
    monkeypatch.setattr(pickle, "loads", refuse)
    assert _names(check_run(run_dir), "embeddings_pickled")


def test_huge_declared_embeddings_are_refused_from_the_header(baseline, tmp_path):
    spec_path, base_out, _ = baseline
    out = tmp_path / "out"
    shutil.copytree(base_out, out)
    run_dir = _run_dirs(spec_path, out)[0]
    header = {"descr": "<f8", "fortran_order": False, "shape": (10**6, 10**6)}  # 8 TB if ever allocated
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, header)
    with zipfile.ZipFile(run_dir / "embeddings.npz", "w") as archive:
        archive.writestr("z.npy", buf.getvalue())
        archive.writestr("labels.npy", _npz_member(np.zeros(18, dtype=np.int64)))
    assert check_run(run_dir) == "embeddings.npz: z is float64 [1000000, 1000000], expected shape [18, 2] of kind 'f'"


def _npz_member(array: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, array)
    return buf.getvalue()


def test_cli_names_damaged_runs(baseline, tmp_path, capsys):
    spec_path, base_out, _ = baseline
    out = tmp_path / "out"
    shutil.copytree(base_out, out)
    _damage(_run_dirs(spec_path, out)[2], "history_bad_line")
    assert main(["sweep", str(spec_path), "--out", str(out), "--scale", "tiny", "--quiet"]) == 0
    captured = capsys.readouterr()
    assert "3/3 runs finished (2 already done, 1 damaged and rerun)" in captured.out
    notes = [line for line in captured.err.splitlines() if "note: run" in line]
    assert len(notes) == 1 and "had a summary.json but history.jsonl: line 2 is not JSON; rerun" in notes[0]


# --- the output folder at the CLI boundary ------------------------------------------------------------


@pytest.mark.parametrize("command", ["sweep", "reproduce"])
def test_out_naming_a_file_or_below_a_file_is_one_line_exit_2(baseline, tmp_path, capsys, command):
    spec_path = baseline[0]
    target = tmp_path / "a_file"
    target.write_text("keep me")
    args = [str(spec_path), "--scale", "tiny"] if command == "sweep" else ["--tiny"]
    for out, fragment in ((target, "exists and is not a directory"), (target / "sub", "cannot be created: Not a directory")):
        assert main([command, *args, "--out", str(out)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith(f"ncgeom {command}: error: --out") and fragment in err[0], err
    assert target.read_text() == "keep me"


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write into any folder")
@pytest.mark.parametrize("command", ["sweep", "reproduce"])
def test_unwritable_out_is_one_line_exit_2(baseline, tmp_path, capsys, command):  # pragma: no cover - not as root
    spec_path = baseline[0]
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    args = [str(spec_path), "--scale", "tiny"] if command == "sweep" else ["--tiny"]
    try:
        for out, fragment in ((locked, "is not writable"), (locked / "sub", "cannot be created: Permission denied")):
            assert main([command, *args, "--out", str(out)]) == 2
            err = capsys.readouterr().err.strip().splitlines()
            assert len(err) == 1 and fragment in err[0], err
    finally:
        locked.chmod(0o700)


def test_bad_wait_timeout_is_one_line_exit_2(baseline, tmp_path, capsys):
    assert main(["sweep", str(baseline[0]), "--out", str(tmp_path / "o"), "--wait-timeout", "-1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--wait-timeout must be a finite number of seconds >= 0, got -1.0" in err[0]
    assert not (tmp_path / "o").exists()


def test_cli_sweep_refuses_a_busy_folder_with_the_holders_pid(baseline, tmp_path, capsys):
    out = tmp_path / "out"
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time; from ncgeom.locking import folder_lock\n"
                               "with folder_lock(sys.argv[1]): time.sleep(600)", str(out)])
    try:
        _wait_for_holder(out, holder.pid)
        for command in (["sweep", str(baseline[0]), "--scale", "tiny"], ["reproduce", "--tiny"]):
            assert main([*command, "--out", str(out)]) == 2
            err = capsys.readouterr().err.strip().splitlines()
            assert len(err) == 1 and f"is being written by pid {holder.pid}" in err[0], err
            assert main([*command, "--out", str(out), "--wait-timeout", "0.3"]) == 2
            assert "after waiting 0.3 s" in capsys.readouterr().err
    finally:
        holder.kill()
        holder.wait(timeout=60)
    assert sorted(p.name for p in out.iterdir()) == [LOCK_FILE]  # nothing written by the refused writers


# --- two real sweeps on one folder ----------------------------------------------------------------------


@pytest.mark.slow
def test_two_concurrent_sweeps_on_one_folder(tmp_path):
    spec_path = _write_spec(tmp_path, LONG_SPEC, "long8")
    out = tmp_path / "out"
    first = subprocess.Popen(_cli("sweep", str(spec_path), "--out", str(out), "--scale", "tiny", "--quiet"),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env())
    try:
        _wait_for_holder(out, first.pid)
        second = subprocess.run(_cli("sweep", str(spec_path), "--out", str(out), "--scale", "tiny", "--quiet"),
                                capture_output=True, text=True, timeout=300, env=_env())
        assert first.poll() is None, "the first sweep ended before the second started: make LONG_SPEC longer"
        err = second.stderr.strip().splitlines()
        assert second.returncode == 2 and len(err) == 1 and f"being written by pid {first.pid}" in err[0], second.stderr
        waiter = subprocess.run(_cli("sweep", str(spec_path), "--out", str(out), "--scale", "tiny", "--quiet",
                                     "--wait", "--json"), capture_output=True, text=True, timeout=600, env=_env())
        assert first.wait(timeout=600) == 0, first.stderr.read()
    finally:
        if first.poll() is None:
            first.kill()
    assert waiter.returncode == 0, waiter.stderr
    runs = json.loads(waiter.stdout)["runs"]
    assert len(runs) == 8 and all(r["skipped"] and r["status"] == "completed" and r["invalid"] is None for r in runs)
    for run_dir in _run_dirs(spec_path, out):
        assert check_run(run_dir) is None
    assert count_finished(spec_path, out, scale="tiny") == (8, 8)
    assert read_holder(out) is None  # released cleanly
