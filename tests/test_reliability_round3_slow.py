"""Reliability round 3 (issue 27): the heavy cases, through the CLI in subprocesses or with real worker pools.

- a real ResNet-18 checkpoint tampered with as an attacker who rewrites the digest too, resumed with
  ``ncgeom train --resume`` (the wrong-shaped Adam moment that made the fused step read and write out of bounds:
  a segmentation fault after summary.json was deleted; a learning rate of 123);
- SIGTERM while a checkpoint is being written (a 44 MB temporary file was left);
- two ``ncgeom train`` into one folder at once;
- the claims with stalled (SIGSTOP) and killed (SIGKILL) workers: complete results;
- many workers asked for under a small memory budget.

Run with ``python -m pytest -q -m slow tests/test_reliability_round3_slow.py`` (about 2 minutes on 2 cores).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from ncgeom.runs.checkpoint import CHECKPOINT_FILE, CheckpointDigest, file_sha256
from ncgeom.threads import max_workers

pytestmark = pytest.mark.slow


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "ncgeom.cli.main", *args]


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": os.pathsep.join(sys.path)}


def tree_state(folder: Path) -> dict[str, tuple[bytes, int | None]]:
    """Every file under ``folder`` with its bytes and modification time: "left exactly as it was" (the lock file's
    time aside: the refused writer held the lock, wrote its pid there and emptied it again on release)."""
    return {str(p.relative_to(folder)): (p.read_bytes(), None if p.name == ".ncgeom.lock" else p.stat().st_mtime_ns)
            for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    from ncgeom.testing.images import write_image_folder

    root = tmp_path_factory.mktemp("tree")
    write_image_folder(root, classes=4, size=16, num_per_class=4, num_test_per_class=1, rng=np.random.default_rng(1))
    return root


def _train(tree: Path, out: Path, *extra: str, cwd: Path | None = None, data_dir: str | None = None):
    return subprocess.run(_cli("train", "--dataset", "imagefolder", "--data-dir", data_dir or str(tree), "--model",
                               "resnet18", "--batch-size", "8", "--out", str(out), "--quiet", *extra),
                          capture_output=True, text=True, env=_env(), cwd=cwd, timeout=600)


@pytest.fixture(scope="module")
def finished_run(tree, tmp_path_factory) -> Path:
    """A finished 1-epoch ResNet-18 run with its checkpoint.pt (137 MB) and digest."""
    out = tmp_path_factory.mktemp("run") / "run"
    proc = _train(tree, out, "--epochs", "1", "--checkpoint-every", "1")  # checkpoints are opt-in
    assert proc.returncode == 0, proc.stderr
    assert (out / "summary.json").is_file() and CheckpointDigest.load(out) is not None
    return out


def _copy(run: Path, dest: Path) -> Path:
    import shutil

    shutil.copytree(run, dest)
    return dest


def _tamper(path: Path, change, *, digest: bool) -> None:
    payload = torch.load(path, weights_only=True)
    change(payload)
    torch.save(payload, path)
    if digest:  # an attacker who knows the format rewrites the digest record too
        CheckpointDigest((file_sha256(path),)).save(path.parent)


def _set_moment(payload) -> None:
    state = payload["optimizer"]["state"][0]
    state["exp_avg"] = torch.zeros(4096, 4096)  # the first conv's moment, far larger than its parameter


def _set_lr(payload) -> None:
    payload["optimizer"]["param_groups"][0]["lr"] = 123.0


@pytest.mark.parametrize("name, change, digest, fragment", [
    ("a moment of another shape (the segmentation fault)", _set_moment, True,
     "optimizer.state[0].exp_avg: expected a tensor of shape [64, 3, 3, 3]"),
    ("lr 123 while config.json says 0.001 (the ResNet default, runs.defaults)", _set_lr, True,
     "optimizer.param_groups[0].lr: 123.0 in the checkpoint, 0.001 by its config"),
    ("a moment of another shape, the digest left", _set_moment, False, "is not the one recorded in checkpoint_digest"),
])
def test_a_tampered_resnet_checkpoint_is_refused_and_the_folder_kept(finished_run, tree, tmp_path, name, change,
                                                                     digest, fragment):
    out = _copy(finished_run, tmp_path / "run")
    _tamper(out / CHECKPOINT_FILE, change, digest=digest)
    before = tree_state(out)
    proc = _train(tree, out, "--epochs", "2", "--resume", "--checkpoint-every", "1")
    lines = proc.stderr.splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and lines[0].startswith("ncgeom train: error: "), proc.stderr
    assert fragment in lines[0] and str(out / CHECKPOINT_FILE) in lines[0]
    assert tree_state(out) == before  # summary.json of the finished run included: nothing deleted, nothing written


def test_a_resume_by_another_path_to_the_data_removes_a_killed_writes_leftover(finished_run, tree, tmp_path):
    """``--data-dir ./tree`` resumes a run trained with the absolute path; a temporary file of a write killed by
    SIGKILL is removed when the resumed run starts."""
    out = _copy(finished_run, tmp_path / "run")
    leftover = out / ".checkpoint.pt.x8k2.tmp"
    leftover.write_bytes(b"\0" * 2**20)
    proc = _train(tree, out, "--epochs", "2", "--resume", "--checkpoint-every", "1", cwd=tree.parent, data_dir=f"./{tree.name}")
    assert proc.returncode == 0, proc.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "completed" and "resumed at epoch 1" in summary["message"]
    assert not leftover.exists()
    assert CheckpointDigest.load(out).sha256 == (file_sha256(out / CHECKPOINT_FILE),)


def test_sigterm_during_a_checkpoint_write_leaves_no_temporary_file(tree, tmp_path):
    """SIGTERM sent the moment a checkpoint's temporary file appears: exit 143, one line, no temporary file left,
    and the checkpoint in place (if any) resumes."""
    from ncgeom.runs.checkpoint import load_checkpoint
    from ncgeom.runs.config import Config

    out = tmp_path / "run"
    proc = subprocess.Popen(_cli("train", "--dataset", "imagefolder", "--data-dir", str(tree), "--model", "resnet18",
                                 "--batch-size", "8", "--epochs", "4", "--checkpoint-every", "1", "--out", str(out),
                                 "--quiet"), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env())
    seen = None
    deadline = time.monotonic() + 300
    while seen is None and proc.poll() is None and time.monotonic() < deadline:
        seen = next(iter(out.glob(".checkpoint.pt.*.tmp")), None) if out.is_dir() else None
        time.sleep(0.002)
    assert seen is not None, "no checkpoint write was seen"
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 143 and err.splitlines() == [
        f"ncgeom train: interrupted by SIGTERM; {out} keeps the epochs written so far, without a summary.json "
        "(resume an image run with --resume)"], err
    assert not list(out.glob(".*.tmp")) and not (out / "summary.json").exists()
    if (out / CHECKPOINT_FILE).exists():
        config = Config(dataset="imagefolder", data_dir=str(tree), model="resnet18", classes=4, batch_size=8, epochs=4,
                        checkpoint_every=1)
        assert load_checkpoint(out / CHECKPOINT_FILE, config).epoch >= 1


def test_two_trains_into_one_folder_at_once(tmp_path):
    out = tmp_path / "run"
    argv = _cli("train", "--epochs", "300", "--out", str(out), "--quiet")
    first = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env())
    try:
        deadline = time.monotonic() + 120
        while not (out / "config.json").exists():
            assert first.poll() is None and time.monotonic() < deadline, first.stderr.read() if first.stderr else ""
            time.sleep(0.05)
        second = subprocess.run(argv, capture_output=True, text=True, env=_env(), timeout=120)
        [line] = second.stderr.splitlines()
        assert second.returncode == 2 and line.startswith(f"ncgeom train: error: {out} is being written by pid "
                                                          f"{first.pid} on {os.uname().nodename} (started "), line
        assert line.endswith("; one writer per run folder: wait for it to end, or give another --out"), line
    finally:
        _, err = first.communicate(timeout=600)
    assert first.returncode == 0, err
    assert json.loads((out / "summary.json").read_text())["status"] == "completed"


# ----------------------------------------------------------------------------------- claims and workers
def _pool_workers() -> list:
    import multiprocessing

    return [p for p in multiprocessing.active_children() if p.name.startswith(("SpawnProcess", "ForkProcess"))]


def test_claims_with_stalled_and_killed_workers_end_complete(tmp_path, capsys):
    """Issue 27, item 8: the claims path under a machine's worst moments. Both workers are stopped (SIGSTOP) for
    3 s, then one is killed (SIGKILL) once a run has finished: nothing waits with a timeout, so the stall only
    delays; the death breaks the pool, whose lost claims are rerun in a fresh one. Every claim ends complete, on all
    of its seeds."""
    from ncgeom.campaigns.claims import claim_spec, run_claims
    from ncgeom.campaigns.spec import expand

    ids = ["8", "2", "3", "7"]
    logs: list[str] = []
    events: list[str] = []

    def chaos() -> None:
        deadline = time.monotonic() + 300
        while len(_pool_workers()) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        workers = _pool_workers()
        for p in workers:
            os.kill(p.pid, signal.SIGSTOP)
        events.append(f"stopped {len(workers)}")
        time.sleep(3)
        for p in workers:
            os.kill(p.pid, signal.SIGCONT)
        while not list(tmp_path.glob("sweeps/*/*/summary.json")) and time.monotonic() < deadline:
            time.sleep(0.05)
        victim = _pool_workers()[0]
        os.kill(victim.pid, signal.SIGKILL)
        events.append(f"killed {victim.pid}")

    thread = threading.Thread(target=chaos, daemon=True)
    thread.start()
    results = run_claims(tmp_path, claim_ids=ids, scale="tiny", workers=2, engine="sequential", progress=False,
                         log=logs.append)
    thread.join(10)
    incomplete = [(r.claim, r.runs, r.failed_runs, r.error) for r in results if not r.complete]
    print("events:", events, "| incomplete:", incomplete, "| rebuilds:", [m for m in logs if "worker process died" in m])
    assert events[0] == "stopped 2" and events[1].startswith("killed")
    assert not incomplete
    assert [r.runs for r in results] == [len(expand(claim_spec(c), scale="tiny")) for c in ids]
    assert any("a worker process died" in m for m in logs)  # the kill cost runs, which were rerun


def test_many_workers_under_a_small_budget(tmp_path):
    """``--workers 100000`` is refused at once; the most workers allowed on a 2-run sweep start 2 processes, under a
    small memory budget (the pool of the sweep is sized by its units)."""
    spec = tmp_path / "two.toml"
    spec.write_text('name = "two"\ndescription = "two runs"\n[base]\nepochs = 30\n[quick]\nseeds = [0, 1]\n')
    t0 = time.monotonic()
    refused = subprocess.run(_cli("sweep", str(spec), "--workers", "100000", "--out", str(tmp_path / "a")),
                             capture_output=True, text=True, env=_env(), timeout=120)
    assert refused.returncode == 2 and len(refused.stderr.splitlines()) == 1 and time.monotonic() - t0 < 60
    assert "--workers must be an integer between 1 and" in refused.stderr and not (tmp_path / "a").exists()
    proc = subprocess.Popen(_cli("--max-memory", "256M", "sweep", str(spec), "--workers", str(max_workers()),
                                 "--engine", "sequential", "--out", str(tmp_path / "b"), "--quiet"),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env())
    most = 0
    while proc.poll() is None:
        most = max(most, _spawned_children(proc.pid))
        time.sleep(0.05)
    out, err = proc.communicate()
    assert proc.returncode == 0, err
    assert 1 <= most <= 2, most


def _spawned_children(pid: int) -> int:
    """The worker processes (multiprocessing's spawn children, not its resource tracker) of ``pid``, from /proc."""
    count = 0
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            children = (task / "children").read_text().split()
        except OSError:
            continue
        for child in children:
            try:
                cmdline = Path(f"/proc/{child}/cmdline").read_bytes().replace(b"\0", b" ")
            except OSError:
                continue
            if b"spawn_main" in cmdline and b"resource_tracker" not in cmdline:
                count += 1
    return count
