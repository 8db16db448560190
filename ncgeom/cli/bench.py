"""``ncgeom bench``: time and peak memory of the batch-loss backends vs the matmul floor and PML.

The implementation is :mod:`ncgeom.losses.kernels.bench` (also used by benchmarks/bench_loss.py).
Example: ``ncgeom bench --batch-sizes 1024 4096 --repeats 5 --threads 1 --out bench.json``.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from ncgeom import budget
from ncgeom.atomic_io import atomic_write_json
from ncgeom.validate import require_int, require_real

__all__ = ["register", "handler", "MAX_REPEATS", "MAX_CLASSES"]

#: Most timed repetitions per (method, batch size): the median of 1000 is as good as it gets.
MAX_REPEATS = 1000
#: Most classes of the random labels (torch.randint's int64 range is larger; above B classes the labels are
#: all distinct anyway).
MAX_CLASSES = 2**31 - 1


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "bench", help="benchmark the batch-loss kernels (time, peak memory, ratio to the matmul floor)",
        description="Forward + backward of SCL (beta = 0, num_negatives='batch') on z [B, d] float32: the "
                    "matmul floor, the dense/blocked(/triton) backends and PML's NTXentLoss with labels.")
    add_arguments(parser)
    parser.set_defaults(func=handler)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    # the defaults (ncgeom.losses.kernels.bench.DEFAULT_*) fit in 2 GiB of memory and about a minute;
    # they are restated here as literals so that `ncgeom --help` does not import torch
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[1024, 4096, 8192], metavar="B",
                        help="batch sizes [1024 4096 8192]; BENCHMARKS.md also uses 16384 (dense needs ~6 GiB there)")
    parser.add_argument("--dim", type=int, default=128, help="embedding dimension [128]")
    parser.add_argument("--classes", type=int, default=10, help="labels uniform over this many classes [10]")
    parser.add_argument("--tau", type=float, default=0.5, help="temperature [0.5]")
    parser.add_argument("--methods", nargs="+", default=["floor", "dense", "blocked", "triton", "pml"],
                        help="subset of floor dense blocked triton pml pml_supcon (triton only on CUDA; "
                             "pml_supcon is a different loss, an O(B^2) speed yardstick)")
    parser.add_argument("--repeats", type=int, default=3, help="timed repetitions (median reported) [3]")
    parser.add_argument("--threads", type=int, default=None, help="torch intra-op threads (default: torch's)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--block-size", type=int, default=None)
    parser.add_argument("--skip-dense-at", type=int, default=8192, metavar="B",
                        help="do not run the dense backend at batch sizes >= B [8192: its B x B matrices need "
                             "~1.7 GiB there]; give a size above the largest batch to run it everywhere")
    parser.add_argument("--no-memory", action="store_true", help="skip the peak-memory subprocesses")
    parser.add_argument("--quiet", action="store_true", help="no progress bar (none either when stderr is not a terminal)")
    parser.add_argument("--out", default=None, help="write the result as JSON to this file")


def handler(args) -> int:
    # torch is heavy: the benchmark module (which imports it) is loaded only when the command runs
    from ncgeom.losses.kernels.bench import METHODS, format_table, run_benchmark

    for b in args.batch_sizes:
        require_int("--batch-sizes", b, min_value=2)
    require_int("--dim", args.dim, min_value=1)
    require_int("--classes", args.classes, min_value=2, max_value=MAX_CLASSES)
    require_real("--tau", args.tau, min_value=0.0, min_inclusive=False)
    require_int("--repeats", args.repeats, min_value=1, max_value=MAX_REPEATS)
    for m in args.methods:
        if m not in METHODS:
            raise ValueError(f"--methods must be among {', '.join(METHODS)}, got {m!r}")
    if "floor" not in args.methods:
        args.methods = ["floor", *args.methods]
    if args.threads is not None:
        require_int("--threads", args.threads, min_value=1, max_value=os.cpu_count() or 1)
    if args.block_size is not None:
        require_int("--block-size", args.block_size, min_value=1, max_value=max(args.batch_sizes))
    require_int("--skip-dense-at", args.skip_dense_at, min_value=2)
    for b in args.batch_sizes:  # sizes run one after another: each must fit the budget on its own
        need = budget.bench_bytes(b, dim=args.dim, num_classes=args.classes, methods=args.methods,
                                  skip_dense_at=args.skip_dense_at, block_size=args.block_size)
        budget.require_within_budget("--batch-sizes, --dim", need, what=f"batch size {b} at dim {args.dim}")
    if args.out is not None:
        _check_out_file(args.out)
    _check_device(args.device)
    result = run_benchmark(batch_sizes=tuple(args.batch_sizes), dim=args.dim, num_classes=args.classes, tau=args.tau,
                           methods=tuple(args.methods), repeats=args.repeats, device=args.device,
                           block_size=args.block_size, memory=not args.no_memory,
                           skip={"dense": args.skip_dense_at}, threads=args.threads,
                           progress=not args.quiet and sys.stderr.isatty())
    print(format_table(result))
    if args.out:
        atomic_write_json(args.out, result.to_dict())
    return 0


def _check_device(device: str) -> None:
    """--device must name a torch device that exists here (cpu, or cuda[:i] with CUDA available)."""
    import torch

    try:
        dev = torch.device(device)
    except (RuntimeError, ValueError):
        raise ValueError(f"--device must be 'cpu' or 'cuda[:index]', got {device!r}") from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"--device {device!r}: CUDA is not available on this machine (use --device cpu)")
    if dev.type not in ("cpu", "cuda"):
        raise ValueError(f"--device must be 'cpu' or 'cuda[:index]', got {device!r}")


def _check_out_file(path: str) -> None:
    """--out must be a file path in an existing, writable folder (checked before a minute of benchmarking)."""
    p = Path(path)
    if p.is_dir():
        raise ValueError(f"--out {path}: is a directory; give a file name such as bench.json")
    parent = p.parent
    if parent.exists() and not parent.is_dir():
        raise ValueError(f"--out {path}: {str(parent)!r} is a file, not a folder")
    if not parent.is_dir():
        raise ValueError(f"--out {path}: the folder {str(parent)!r} does not exist")
    if not os.access(parent, os.W_OK):
        raise ValueError(f"--out {path}: the folder {str(parent)!r} is not writable")
