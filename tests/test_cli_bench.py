"""`ncgeom bench`: bad input is one line and exit 2; defaults; progress bar; the memory probe takes data."""

import json

import pytest
import torch

from ncgeom.cli.main import build_parser, main
from ncgeom.losses.kernels import bench


@pytest.mark.parametrize(
    "argv, word",
    [
        (["--batch-sizes", "1"], "--batch-sizes"),
        (["--skip-dense-at", "0"], "--skip-dense-at"),
        (["--device", "tpu"], "--device"),
        (["--device", "cuda:0"] if not torch.cuda.is_available() else ["--device", "nonsense"], "--device"),
        (["--methods", "fast"], "--methods"),
        (["--repeats", "0"], "--repeats"),
    ],
)
def test_bench_bad_input_is_one_line_exit_2(argv, word, capsys):
    rc = main(["bench", "--batch-sizes", "8", "--no-memory", "--repeats", "1", *argv])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2
    assert len(err) == 1 and word in err[0], err


def test_bench_tiny_run_writes_json_and_no_bar_off_a_terminal(tmp_path, capsys):
    out = tmp_path / "bench.json"
    rc = main(["bench", "--batch-sizes", "16", "--dim", "4", "--methods", "floor", "blocked", "--repeats", "1",
               "--no-memory", "--out", str(out)])
    assert rc == 0
    captured = capsys.readouterr()
    assert captured.err == ""  # stderr is not a terminal under pytest: no progress bar
    data = json.loads(out.read_text())
    assert [(r["method"], r["batch_size"]) for r in data["rows"]] == [("floor", 16), ("blocked", 16)]
    assert all(r["seconds"] > 0 and r["peak_extra_mib"] is None for r in data["rows"])
    assert "blocked" in captured.out


def test_cli_defaults_are_the_library_defaults():
    # the CLI restates the defaults as literals (so that --help does not import torch): they must agree
    args = build_parser().parse_args(["bench"])
    assert tuple(args.batch_sizes) == bench.DEFAULT_BATCH_SIZES
    assert tuple(args.methods) == bench.DEFAULT_METHODS
    assert args.repeats == bench.DEFAULT_REPEATS
    assert {"dense": args.skip_dense_at} == bench.DEFAULT_SKIP


def test_progress_bar_counts_every_step(capsys):
    # 2 active methods x (1 warm-up + 2 repetitions) at one size, no memory probes: 6 steps
    result = bench.run_benchmark(batch_sizes=(16,), dim=4, methods=("floor", "blocked"), repeats=2, memory=False,
                                 progress=True)
    err = capsys.readouterr().err
    assert "ncgeom bench" in err and "/6 [" in err  # tqdm shows done/total; redraws are rate-limited
    assert len(result.rows) == 2


def test_skip_is_recorded_in_the_row():
    result = bench.run_benchmark(batch_sizes=(16, 32), dim=4, methods=("floor", "dense"), repeats=1, memory=False,
                                 skip={"dense": 32})
    rows = {(r.method, r.batch_size): r for r in result.rows}
    assert rows["dense", 16].seconds is not None
    assert rows["dense", 32].seconds is None and "B >= 32" in rows["dense", 32].note


def test_memory_probe_runs_and_takes_its_parameters_as_data():
    assert bench.measure_peak_memory("floor", 64, dim=4) >= 0.0
    # a method name that would be code if pasted into the probe's program is refused as data
    with pytest.raises(RuntimeError, match="method must be among"):
        bench.measure_peak_memory("floor'); import os; os._exit(0); ('", 64, dim=4)
