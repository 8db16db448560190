"""`ncgeom bench` rejects bad input with one line and exit 2, before running anything."""

import pytest

from ncgeom.cli.main import main


@pytest.mark.parametrize(
    "argv, word",
    [
        (["--batch-sizes", "1"], "--batch-sizes"),
        (["--skip-dense-at", "0"], "--skip-dense-at"),
        (["--device", "tpu"], "--device"),
        (["--device", "cuda:0"] if not __import__("torch").cuda.is_available() else ["--device", "nonsense"], "--device"),
        (["--methods", "fast"], "--methods"),
        (["--repeats", "0"], "--repeats"),
    ],
)
def test_bench_bad_input_is_one_line_exit_2(argv, word, capsys):
    rc = main(["bench", "--batch-sizes", "8", "--no-memory", "--repeats", "1", *argv])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2
    assert len(err) == 1 and word in err[0], err


def test_bench_tiny_run_writes_json(tmp_path, capsys):
    out = tmp_path / "bench.json"
    rc = main(["bench", "--batch-sizes", "16", "--dim", "4", "--methods", "floor", "blocked", "--repeats", "1",
               "--no-memory", "--out", str(out)])
    assert rc == 0
    import json

    data = json.loads(out.read_text())
    assert data  # a JSON object with the measured rows
    assert "blocked" in capsys.readouterr().out
