"""Provenance of a run: git commit, package versions, platform, time (style.md, "Runs leave provenance")."""

from __future__ import annotations

import datetime as _dt
import functools
import importlib.metadata
import os
import platform
import subprocess
import sys
from pathlib import Path

from ncgeom.threads import thread_settings

__all__ = ["git_commit", "package_versions", "provenance"]

_PACKAGES = ("ncgeom", "numpy", "scipy", "sympy", "cvxpy", "torch", "matplotlib", "triton")


# Read-only git calls: --no-optional-locks (and GIT_OPTIONAL_LOCKS=0 for older gits) keeps `git status`
# from refreshing the index, which would take .git/index.lock and could break a user's concurrent git command.
_GIT = ("git", "--no-optional-locks")


def _git(args: list[str], cwd: Path) -> str | None:
    """stdout of a read-only ``git`` call in ``cwd``, or None if git is missing or the call fails."""
    env = {**os.environ, "GIT_OPTIONAL_LOCKS": "0"}
    try:
        done = subprocess.run([*_GIT, *args], cwd=cwd, capture_output=True, text=True, timeout=10, env=env)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def git_commit(path: str | Path | None = None) -> str | None:
    """The commit of the git work tree that tracks ``path`` (default: this package), '+dirty' if modified.

    None unless ``path`` itself is tracked by the work tree it lies in: a copy of ncgeom installed inside
    some other repository (a virtualenv in a user's project) does not report that repository's commit.
    Only read-only git calls with optional locks off are made, so no ``.git/index.lock`` is ever created.
    """
    target = Path(path).resolve() if path is not None else Path(__file__).resolve().parent
    cwd = target if target.is_dir() else target.parent
    if not cwd.is_dir() or _git(["rev-parse", "--show-toplevel"], cwd) is None:
        return None
    if _git(["ls-files", "--error-unmatch", "--", str(target)], cwd) is None:  # not tracked there
        return None
    sha = _git(["rev-parse", "HEAD"], cwd)
    if not sha:
        return None
    dirty = _git(["status", "--porcelain", "--untracked-files=no"], cwd)
    return sha + ("+dirty" if dirty else "")


def package_versions(packages=_PACKAGES) -> dict[str, str | None]:
    """Installed versions of the given distributions (None when absent); read once per process (reading a
    distribution's metadata costs milliseconds, and a sweep asks for every run)."""
    return dict(_package_versions(tuple(packages)))


@functools.cache
def _package_versions(packages: tuple[str, ...]) -> tuple[tuple[str, str | None], ...]:
    out: dict[str, str | None] = {}
    for name in packages:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = None
    return tuple(out.items())


def provenance() -> dict:
    """A JSON-serializable record: git commit, versions, python, platform, UTC time, argv, CPU threads.

    ``threads`` (:func:`ncgeom.threads.thread_settings`) is recorded because float32 results depend on it:
    the MLP's float32 history changed by 3e-7 (2e-2 with the sampled estimator) between thread counts.
    """
    return {
        "git_commit": git_commit(),
        "threads": thread_settings(),
        "versions": package_versions(),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "time_utc": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "argv": list(sys.argv),
    }
