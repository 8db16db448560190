"""Files (docs/reliability.md, "Numerics at the edges and files").

Run files are written by atomic rename only: a symlink planted at any run file is replaced and its
target stays untouched; a directory in the way is a clear error; the history of a killed run is complete
up to its last finished epoch; provenance makes only read-only git calls with optional locks off and
reports a commit only for a tracked package; config.json records the CPU thread settings.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

import ncgeom.provenance as provenance_module
from ncgeom.atomic_io import atomic_write_bytes, atomic_write_json, atomic_write_text
from ncgeom.locking import LOCK_FILE
from ncgeom.provenance import git_commit, provenance
from ncgeom.runs import Config, run
from ncgeom.runs.records import HistoryWriter, load_history, load_run
from ncgeom.threads import thread_settings

TINY = dict(classes=3, samples_per_class=6, batch_size=18, epochs=3, lr=0.05)
RUN_FILES = ("config.json", "history.jsonl", "summary.json", "embeddings.npz")
SECRET = b"the target of a planted symlink: must never change\n"


@pytest.mark.parametrize("name", RUN_FILES)
def test_a_symlink_planted_at_a_run_file_is_replaced_and_its_target_untouched(tmp_path, name):
    target = tmp_path / "elsewhere" / "precious.txt"
    target.parent.mkdir()
    target.write_bytes(SECRET)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / name).symlink_to(target)
    result = run(Config(**TINY), out_dir=run_dir)
    assert result.status == "completed"
    assert target.read_bytes() == SECRET
    for file in RUN_FILES:  # every run file is now a regular file of the run
        assert (run_dir / file).is_file() and not (run_dir / file).is_symlink(), file
    saved = load_run(run_dir)
    assert [r.epoch for r in saved.history] == [1, 2, 3]
    assert saved.summary is not None and saved.summary.epochs_run == 3
    # no temporary file left (the lock file of the folder stays, empty: ncgeom.locking)
    assert sorted(p.name for p in run_dir.iterdir() if p.name != LOCK_FILE) == sorted(RUN_FILES)


def test_all_run_files_planted_at_once(tmp_path):
    targets = {}
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    for name in RUN_FILES:
        targets[name] = tmp_path / f"target-{name}"
        targets[name].write_bytes(SECRET)
        (run_dir / name).symlink_to(targets[name])
    run(Config(**TINY), out_dir=run_dir)
    for name, target in targets.items():
        assert target.read_bytes() == SECRET, name


@pytest.mark.parametrize("writer", [
    lambda p: atomic_write_bytes(p, b"new"),
    lambda p: atomic_write_text(p, "new", durable=False),
    lambda p: atomic_write_json(p, {"a": float("nan")}),
])
def test_atomic_writers_replace_a_symlink_and_refuse_a_directory(tmp_path, writer):
    target = tmp_path / "target"
    target.write_bytes(SECRET)
    link = tmp_path / "link"
    link.symlink_to(target)
    writer(link)
    assert target.read_bytes() == SECRET
    assert not link.is_symlink() and link.is_file()
    folder = tmp_path / "folder"
    folder.mkdir()
    with pytest.raises(IsADirectoryError, match="a directory is in the way"):
        writer(folder)
    assert list(folder.iterdir()) == [] and sorted(p.name for p in tmp_path.iterdir()) == ["folder", "link", "target"]


def test_atomic_json_is_strict_json_with_null_for_non_finite_values(tmp_path):
    path = atomic_write_json(tmp_path / "x.json", {"nan": float("nan"), "inf": [float("inf")], "ok": 1.5})
    text = path.read_text()
    assert "NaN" not in text and "Infinity" not in text
    assert json.loads(text) == {"nan": None, "inf": [None], "ok": 1.5}


def test_history_writer_leaves_a_complete_file_after_every_epoch(tmp_path):
    # a run killed between two epochs leaves exactly the finished epochs, each line a complete record
    result = run(Config(**TINY))
    writer = HistoryWriter(tmp_path)
    assert (tmp_path / "history.jsonl").read_text() == ""
    for n, record in enumerate(result.history, start=1):
        writer.append(record)
        assert load_history(tmp_path) == tuple(result.history[:n])
        assert (tmp_path / "history.jsonl").read_text().count("\n") == n
    writer.close()
    assert load_history(tmp_path) == result.history


def test_a_rerun_replaces_a_stale_history_and_removes_the_stale_summary(tmp_path):
    run(Config(**TINY), out_dir=tmp_path)
    (tmp_path / "history.jsonl").write_text('{"epoch": 1}\n{"torn": ')
    run(Config(**{**TINY, "epochs": 2}), out_dir=tmp_path)
    assert [r.epoch for r in load_history(tmp_path)] == [1, 2]


# ---------------------------------------------------------------- provenance


def test_provenance_git_calls_are_read_only_without_optional_locks(monkeypatch):
    calls = []
    real_run = subprocess.run

    def spy(argv, *args, **kwargs):
        calls.append((list(argv), dict(kwargs.get("env") or {})))
        return real_run(argv, *args, **kwargs)

    monkeypatch.setattr(provenance_module.subprocess, "run", spy)
    provenance()
    assert calls, "provenance() made no git call"
    for argv, env in calls:
        assert argv[:2] == ["git", "--no-optional-locks"], argv
        assert env.get("GIT_OPTIONAL_LOCKS") == "0", argv
        assert argv[2] in ("rev-parse", "ls-files", "status"), argv  # read-only subcommands only


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=repo, check=True,
                          capture_output=True, text=True).stdout.strip()


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_git_commit_only_for_a_tracked_path_and_never_takes_the_index_lock(tmp_path):
    repo = tmp_path / "user_repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    (repo / "tracked").mkdir()
    (repo / "tracked" / "mod.py").write_text("x = 1\n")
    _git(repo, "add", "tracked")
    _git(repo, "commit", "-q", "-m", "init")
    sha = _git(repo, "rev-parse", "HEAD")
    installed = repo / ".venv" / "site-packages" / "ncgeom"  # an installed copy inside the user's repo
    installed.mkdir(parents=True)
    (installed / "provenance.py").write_text("")
    # make the index stat-dirty, the state in which a plain `git status` would rewrite it (taking the lock)
    os.utime(repo / "tracked" / "mod.py", (1, 1))
    index = repo / ".git" / "index"
    before = index.stat().st_mtime_ns
    assert git_commit(installed) is None
    assert git_commit(installed / "provenance.py") is None
    assert git_commit(repo / "tracked") == sha
    (repo / "tracked" / "mod.py").write_text("x = 2\n")
    assert git_commit(repo / "tracked" / "mod.py") == sha + "+dirty"
    assert index.stat().st_mtime_ns == before  # the index was never rewritten
    assert not (repo / ".git" / "index.lock").exists()
    assert git_commit(tmp_path) is None  # not a git work tree at all


# ---------------------------------------------------------------- thread settings


def test_config_json_records_the_thread_settings(tmp_path):
    run(Config(**TINY), out_dir=tmp_path)
    conf = json.loads((tmp_path / "config.json").read_text())
    threads = conf["provenance"]["threads"]
    import torch

    assert threads["torch"] == {"intra_op": torch.get_num_threads(), "inter_op": torch.get_num_interop_threads()}
    assert threads == json.loads(json.dumps(thread_settings()))
    assert set(threads) == {"torch", "blas", "env", "cpu_count"}


def test_thread_settings_report_the_environment_variables(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    monkeypatch.delenv("MKL_NUM_THREADS", raising=False)
    env = thread_settings()["env"]
    assert env["OMP_NUM_THREADS"] == "3" and "MKL_NUM_THREADS" not in env
