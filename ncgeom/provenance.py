"""Provenance of a run: git commit, package versions, platform, time (style.md, "Runs leave provenance")."""

from __future__ import annotations

import datetime as _dt
import importlib.metadata
import platform
import subprocess
import sys
from pathlib import Path

__all__ = ["git_commit", "package_versions", "provenance"]

_PACKAGES = ("ncgeom", "numpy", "scipy", "sympy", "cvxpy", "torch", "matplotlib", "triton")


def git_commit(path: str | Path | None = None) -> str | None:
    """The commit hash of the repository holding ``path`` (default: this package), '+dirty' if modified."""
    cwd = Path(path) if path is not None else Path(__file__).resolve().parent
    try:
        sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True, timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=cwd, capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return sha + ("+dirty" if dirty else "")


def package_versions(packages=_PACKAGES) -> dict[str, str | None]:
    """Installed versions of the given distributions (None when absent)."""
    out: dict[str, str | None] = {}
    for name in packages:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = None
    return out


def provenance() -> dict:
    """A JSON-serializable record: git commit, versions, python, platform, UTC time, argv."""
    return {
        "git_commit": git_commit(),
        "versions": package_versions(),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "time_utc": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "argv": list(sys.argv),
    }
