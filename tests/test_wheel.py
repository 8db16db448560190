"""The wheel alone runs the main job: build it, install it in a fresh venv, reproduce from outside the repo.

Slow (minutes: the fresh venv installs torch, cvxpy, scipy, matplotlib ... under constraints.txt), so it
is marked ``slow`` and run by ``.venv/bin/python -m pytest -m slow tests/test_wheel.py``. The source is
copied to a temporary folder first, so building leaves nothing in the checkout. Timings are printed
(``-s`` shows them).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import venv
from pathlib import Path

import pytest

from ncgeom.figures import FIGURES
from ncgeom.reproduce.theory_data import NOT_AT_TINY

ROOT = Path(__file__).resolve().parents[1]
_SKIP_ANYWHERE = shutil.ignore_patterns(".venv", ".git", "build", "dist", "*.egg-info", "__pycache__", ".*_cache",
                                        ".hypothesis")


def _SKIP(folder: str, names: list[str]) -> set[str]:
    """What the copy leaves out: build and cache folders anywhere, output folders (results/, runs/) at the top only
    (ncgeom/runs is the run layer)."""
    skipped = set(_SKIP_ANYWHERE(folder, names))
    if Path(folder) == ROOT:
        skipped |= {"results", "runs"} & set(names)
    return skipped


def _run(command: list[str], *, cwd: Path, timeout: float) -> float:
    """Run ``command`` (failing the test with its output if it fails); return its wall time."""
    start = time.perf_counter()
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
    seconds = time.perf_counter() - start
    assert done.returncode == 0, f"{' '.join(command)} exited {done.returncode}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return seconds


@pytest.mark.slow
def test_wheel_in_fresh_venv_reproduces_from_outside_the_repository(tmp_path):
    timings = {}
    source = tmp_path / "source"
    shutil.copytree(ROOT, source, ignore=_SKIP)
    wheels = tmp_path / "wheels"
    timings["build wheel"] = _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                                   "-w", str(wheels), str(source)], cwd=tmp_path, timeout=600)
    (wheel,) = wheels.glob("ncgeom-*.whl")

    env_dir = tmp_path / "venv"
    start = time.perf_counter()
    venv.EnvBuilder(with_pip=True, clear=True).create(env_dir)
    timings["create venv"] = time.perf_counter() - start
    python, ncgeom = env_dir / "bin" / "python", env_dir / "bin" / "ncgeom"
    # torch comes from pip's configured find-links (/opt/wheels here); every version from constraints.txt
    timings["install wheel"] = _run([str(python), "-m", "pip", "install", "-c", str(ROOT / "constraints.txt"), str(wheel)],
                                    cwd=tmp_path, timeout=1800)

    work = tmp_path / "elsewhere"  # a working directory with no specs, figure modules or sources in it
    work.mkdir()
    timings["reproduce --tiny"] = _run([str(ncgeom), "reproduce", "--tiny", "--quiet", "--out", "out"], cwd=work, timeout=900)
    report = (work / "out" / "report.md").read_text()
    for spec in FIGURES:
        if spec.name in {f"fig_{name}" for name in NOT_AT_TINY}:  # no data at the tiny scale (theory_data)
            assert not (work / "out" / "figures" / f"{spec.name}.png").exists(), spec.name
            continue
        assert (work / "out" / "figures" / f"{spec.name}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", spec.name
        assert f"![{spec.title}](figures/{spec.name}.png)" in report
    assert str(tmp_path) not in report  # no path of this machine in the report

    timings["sweep by name"] = _run([str(ncgeom), "sweep", "claim1_scl_hscl_nc", "--scale", "tiny", "--quiet", "--out", "x"],
                                    cwd=work, timeout=600)
    assert (work / "x" / "summary.csv").read_text().count("\n") == 1 + 6  # header + the 6 runs of the tiny grid
    assert (work / "x" / "claim.json").is_file()
    print("\nwheel test timings: " + ", ".join(f"{k} {v:.1f} s" for k, v in timings.items())
          + f"; total {sum(timings.values()):.1f} s")
