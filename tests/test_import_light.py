"""`import ncgeom` (and its core modules) must not import cvxpy, matplotlib or triton (issue: foundation)."""

import subprocess
import sys

CODE = """
import sys
import ncgeom, ncgeom.geometry, ncgeom.losses, ncgeom.theory, ncgeom.population, ncgeom.metrics
import ncgeom.testing, ncgeom.cli.main
ncgeom.cli.main.build_parser()
heavy = [m for m in ("cvxpy", "matplotlib", "triton") if m in sys.modules]
print(",".join(heavy))
"""


def test_core_imports_are_light():
    out = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "", f"heavy modules imported by the core: {out}"
