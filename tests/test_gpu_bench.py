"""benchmarks/gpu_bench.py, the script a session with a GPU runs: checked on the CPU at its smoke sizes (the
numbers it prints there mean nothing; the point is that the script a GPU session gets runs and prints its tables)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "gpu_bench.py"


def test_smoke_run_prints_the_three_tables():
    out = subprocess.run([sys.executable, str(SCRIPT), "--device", "cpu", "--smoke", "--repeats", "1", "--warmup", "0"],
                         capture_output=True, text=True, timeout=300, check=True).stdout
    assert "(1) batch_loss" in out and "| 64 | dense |" in out and "| 128 | blocked |" in out
    assert "(2) stacked training step" in out and "x 3-GEMM floor" in out
    assert "(3) ResNet training step" in out and "| resnet18 | float32 |" in out


def test_refuses_cuda_without_a_gpu():
    import torch

    if torch.cuda.is_available():
        return
    done = subprocess.run([sys.executable, str(SCRIPT), "--device", "cuda"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and "CUDA is not available" in done.stderr
