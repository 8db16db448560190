"""Reliability round 3, heavy cases: the issue's own reproductions through the CLI, in a subprocess.

Issue 27 reported: a CIFAR batch linked to /dev/zero grew the process to 23 GB; a FIFO hung (``ncgeom
metrics`` on a FIFO too); a sparse 3 GiB batch peaked at 6.5 GB under ``--max-memory 200M``; two
ImageFolder symlink loops hung. Each case here runs ``python -m ncgeom.cli.main`` in a child process
watched by a thread that kills it after 60 s or above 2 GiB of resident memory (so a regression fails
instead of hanging or exhausting the machine), and must exit 2 with ONE line on stderr naming the file,
with a peak resident memory under :data:`PEAK_CAP` (the interpreter and torch take about 230 MB): the
child's own high-water mark (``VmHWM`` of ``/proc/self/status``, read at its exit), not ``ru_maxrss`` from
``os.wait4``, which also counts the memory of the pytest process the child was forked from (2.6 GB after the
in-process ResNet tests of a full slow run, whatever the child then did).

Slow (about a minute: each child imports torch): ``python -m pytest -m slow tests/test_reliability_files_round3_slow.py``.
"""

from __future__ import annotations

import os
import struct
import subprocess
import sys
import threading
import time
import zlib
from collections.abc import Callable
from pathlib import Path

import numpy as np
import psutil
import pytest

from ncgeom import budget
from ncgeom.testing.images import write_cifar_like, write_image_folder, write_stl10_like

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
GIB = 2**30
PEAK_CAP = 600 * 2**20  # bytes of resident memory a refused input may cost at most (the reports: 6.5 GB, 23 GB)
KILL_RSS = 2 * GIB
TIMEOUT_S = 60.0


#: ``ncgeom ARGV`` that writes its own peak resident memory (kB, ``VmHWM``: since its exec) to a file at exit.
_REPORT_PEAK = """import atexit, sys
path = sys.argv.pop(1)
def report():
    with open("/proc/self/status") as status:
        kb = next(line.split()[1] for line in status if line.startswith("VmHWM:"))
    with open(path, "w") as out:
        out.write(kb)
atexit.register(report)
from ncgeom.cli.main import main
sys.exit(main(sys.argv[1:]))
"""


def run_cli(argv: list[str], *, cwd: Path) -> tuple[int, str, str, int, list[str]]:
    """(exit code, stdout, stderr, peak RSS in bytes, reasons it was killed) of ``ncgeom argv`` in a child."""
    env = {k: v for k, v in os.environ.items() if k != budget.ENV_VAR}
    env.update(PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1", PYTHONWARNINGS="default")  # warnings shown if any
    out_path, err_path, peak_path = cwd / ".stdout", cwd / ".stderr", cwd / ".peak"
    peak_path.unlink(missing_ok=True)
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        proc = subprocess.Popen([sys.executable, "-c", _REPORT_PEAK, str(peak_path), *argv], stdout=out, stderr=err,
                                cwd=cwd, env=env)
    killed: list[str] = []
    done = threading.Event()

    def watch() -> None:
        start = time.monotonic()
        while not done.is_set():
            try:
                rss = psutil.Process(proc.pid).memory_info().rss
            except psutil.Error:
                return
            if rss > KILL_RSS or time.monotonic() - start > TIMEOUT_S:
                killed.append(f"rss {rss} bytes" if rss > KILL_RSS else f"no exit within {TIMEOUT_S} s")
                proc.kill()
                return
            done.wait(0.05)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here: Popen must not wait for it again
    done.set()
    watcher.join()
    # the child's own peak; ru_maxrss (also the parent's memory at the fork) only when it could not report
    peak = int(peak_path.read_text()) * 1024 if peak_path.exists() else usage.ru_maxrss * 1024
    return proc.returncode, out_path.read_text(), err_path.read_text(), peak, killed


def assert_refused(argv: list[str], cwd: Path, named: Path | str, fragment: str) -> str:
    code, out, err, peak, killed = run_cli(argv, cwd=cwd)
    assert not killed, (killed, err[-2000:])
    lines = err.splitlines()
    assert code == 2 and len(lines) == 1 and "Traceback" not in err and "Warning" not in err, (code, err[-3000:])
    shown = os.path.relpath(named, cwd) if Path(named).is_absolute() else str(named)  # the CLI gets relative paths
    assert shown in lines[0] and fragment in lines[0], lines[0]
    assert peak < PEAK_CAP, f"peak resident memory {peak / 2**20:.0f} MiB"
    return lines[0]


def _sparse(path: Path, size: int = 3 * GIB, head: bytes = b"") -> Path:
    if path.exists() or path.is_symlink():
        path.unlink()
    with open(path, "wb") as fh:
        fh.write(head)
        fh.truncate(size)
    return path


def _replace(path: Path, make: Callable[[Path], None]) -> Path:
    path.unlink()
    make(path)
    return path


def _zero(path: Path) -> None:
    os.symlink("/dev/zero", path)


TRAIN_CIFAR = ["train", "--dataset", "cifar10", "--data-dir", "data", "--model", "resnet18"]


@pytest.fixture
def cifar(tmp_path) -> Path:
    write_cifar_like(tmp_path / "data", rng=np.random.default_rng(0), num_per_class=1)
    return tmp_path / "data" / "cifar-10-batches-py"


@pytest.mark.parametrize("budget_flag", [[], ["--max-memory", "200M"]], ids=["default budget", "200M"])
def test_cifar_batch_linked_to_dev_zero(tmp_path, cifar, budget_flag):
    path = _replace(cifar / "data_batch_1", _zero)
    assert_refused([*TRAIN_CIFAR, *budget_flag], tmp_path, path, "a symbolic link to /dev/zero, a character device")


def test_cifar_batch_is_a_fifo(tmp_path, cifar):
    path = _replace(cifar / "data_batch_1", os.mkfifo)
    assert_refused([*TRAIN_CIFAR, "--max-memory", "200M"], tmp_path, path, "is a FIFO")


@pytest.mark.parametrize("budget_flag, shown", [(["--max-memory", "200M"], "200 MiB"), ([], "GiB")],
                         ids=["200M", "default budget"])
def test_sparse_3gib_cifar_batch(tmp_path, cifar, budget_flag, shown):
    path = _sparse(cifar / "data_batch_1")
    line = assert_refused([*TRAIN_CIFAR, *budget_flag], tmp_path, path, "above the memory budget of")
    assert shown in line.split("above the memory budget of", 1)[1]


def test_sparse_3gib_cifar_binary_and_stl10_files(tmp_path):
    write_cifar_like(tmp_path / "bin", layout="binary", rng=np.random.default_rng(0), num_per_class=1)
    path = _sparse(tmp_path / "bin" / "cifar-10-batches-bin" / "test_batch.bin")
    assert_refused(["train", "--dataset", "cifar10", "--data-dir", "bin", "--model", "resnet18", "--max-memory", "200M"],
                   tmp_path, path, "above the memory budget of 200 MiB")
    write_stl10_like(tmp_path / "stl", rng=np.random.default_rng(0))
    path = _sparse(tmp_path / "stl" / "stl10_binary" / "train_X.bin")
    assert_refused(["train", "--dataset", "stl10", "--data-dir", "stl", "--model", "resnet18", "--max-memory", "200M"],
                   tmp_path, path, "above the memory budget of 200 MiB")


# ------------------------------------------------------------------------------------------------ metrics
def _npy_header(shape: tuple[int, ...]) -> bytes:
    import io

    buffer = io.BytesIO()
    np.lib.format.write_array_header_1_0(buffer, {"descr": "<f8", "fortran_order": False, "shape": shape})
    return buffer.getvalue()


@pytest.mark.parametrize("name, make, fragment", [
    ("e.npz", os.mkfifo, "is a FIFO"),
    ("e.csv", os.mkfifo, "is a FIFO"),
    ("e.npy", _zero, "a character device"),
    ("e.csv", _zero, "a character device"),
    ("e.pt", _zero, "a character device"),
    ("e.csv", lambda p: _sparse(p), "line 1 is longer than"),  # 3 GiB of NUL bytes, no newline
    ("e.pt", lambda p: _sparse(p), "above the memory budget of 200 MiB"),
    ("e.npy", lambda p: _sparse(p, head=_npy_header((3 * GIB // 8 // 4, 4))), "above the memory budget of 200 MiB"),
], ids=["fifo npz", "fifo csv", "dev-zero npy", "dev-zero csv", "dev-zero pt", "sparse csv", "sparse pt", "sparse npy"])
def test_metrics_hostile_files(tmp_path, name, make, fragment):
    path = tmp_path / name
    make(path)
    assert_refused(["metrics", name, "--max-memory", "200M"], tmp_path, name, fragment)


def test_metrics_labels_fifo(tmp_path):
    np.save(tmp_path / "z.npy", np.ones((6, 3)))
    os.mkfifo(tmp_path / "y.npy")
    assert_refused(["metrics", "z.npy", "--labels", "y.npy"], tmp_path, "y.npy", "is a FIFO")


# --------------------------------------------------------------------------------------------- ImageFolder
TRAIN_FOLDER = ["train", "--dataset", "imagefolder", "--data-dir", "tree", "--model", "resnet18", "--max-memory", "200M"]


@pytest.fixture
def tree(tmp_path) -> Path:
    write_image_folder(tmp_path / "tree", classes=2, size=8, num_per_class=4, num_test_per_class=1,
                       rng=np.random.default_rng(0))
    return tmp_path / "tree"


def test_two_symlink_loops(tmp_path, tree):
    os.symlink(".", tree / "train" / "class00" / "loop")
    os.symlink("..", tree / "train" / "class01" / "loop")
    assert_refused(TRAIN_FOLDER, tmp_path, tree / "train" / "class00" / "loop", "a loop")


@pytest.mark.parametrize("make, fragment", [(_zero, "a character device"), (os.mkfifo, "is a FIFO")],
                         ids=["dev-zero", "fifo"])
def test_image_file_kinds(tmp_path, tree, make, fragment):
    path = _replace(tree / "train" / "class00" / "00000.png", make)
    assert_refused(TRAIN_FOLDER, tmp_path, path, fragment)


def test_decompression_bomb(tmp_path, tree):
    """A 70-byte PNG declaring 10^5 x 10^5 pixels: refused from its header, no Pillow warning printed."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    ihdr = struct.pack(">IIBBBBB", 100_000, 100_000, 1, 0, 0, 0, 0)
    path = tree / "train" / "class00" / "00000.png"
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"")) + chunk(b"IEND", b""))
    assert_refused(TRAIN_FOLDER, tmp_path, path, "decompression bomb")
