"""Benchmark of the batch-loss kernels (the same implementation as ``ncgeom bench``).

Run: ``python benchmarks/bench_loss.py --batch-sizes 1024 4096 16384 --repeats 5 --out bench.json``.
What is measured and how: see :mod:`ncgeom.losses.kernels.bench` and BENCHMARKS.md.
"""

import argparse
import sys

from ncgeom.cli.bench import add_arguments, handler

if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="bench_loss.py", description=__doc__.splitlines()[0])
    add_arguments(parser)
    sys.exit(handler(parser.parse_args()))
