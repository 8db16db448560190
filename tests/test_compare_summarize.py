"""Runs and sweeps to look at (issue 26 item 5): ncgeom summarize / compare / plot, the spec's seeds key, labels that
show only the fields a run reads; and the one-line errors of the new commands."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import numpy as np
import pytest
from conftest import run_main
from numpy.testing import assert_allclose
from scipy import stats

from ncgeom.atomic_io import atomic_write_json
from ncgeom.campaigns.compare import first_nc_epoch, load_paths, point_labels, run_value
from ncgeom.campaigns.records import SweepRecord, SweepRunEntry
from ncgeom.campaigns.spec import expand, load_spec, spec_from_dict
from ncgeom.campaigns.summarize import summarize_sweep
from ncgeom.campaigns.sweep import run_sweep
from ncgeom.geometry import simplex_etf
from ncgeom.metrics.outcome import NC_ETF, NC_WITHIN
from ncgeom.runs import Config, NCMonitor, load_run

SPEC = """
name = "mine"
[base]
seeds = [0, 1, 2]
beta = 5.0
epochs = 6
classes = 3
samples_per_class = 8
batch_size = 12
metrics_every = 2
[[grid]]
setting = ["scl"]
[[grid]]
setting = ["hscl"]
beta = [2.0, 5.0]
"""


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    """A user's first spec, seeds in [base] (the key the issue met as "unknown config field 'seeds'")."""
    root = tmp_path_factory.mktemp("sweep")
    (root / "mine.toml").write_text(SPEC)
    result = run_sweep(root / "mine.toml", root / "out", scale="quick")
    assert len(result.runs) == 9 and not result.failed
    return root / "out"


def _t_interval(values):
    """The 95 % Student t-interval of the mean, by scipy.stats directly (independent of mean_interval)."""
    v = np.asarray(values, dtype=float)
    lo, hi = stats.t.interval(0.95, v.size - 1, loc=v.mean(), scale=stats.sem(v))
    return v.mean(), lo, hi


# ---------------------------------------------------------------- spec seeds


def test_seeds_at_the_top_or_in_base_mean_every_scale(tmp_path):
    top = spec_from_dict({"seeds": [3, 4], "grid": [{"setting": ["scl", "hscl"]}]}, path="a.toml")
    in_base = spec_from_dict({"base": {"seeds": [3, 4]}, "grid": [{"setting": ["scl", "hscl"]}]}, path="b.toml")
    own = spec_from_dict({"seeds": [3, 4], "tiny": {"seeds": [9]}, "grid": [{"setting": ["scl"]}]}, path="c.toml")
    for spec in (top, in_base):
        for scale in ("tiny", "quick", "full"):
            assert sorted({c.seed for c in expand(spec, scale=scale)}) == [3, 4] and len(expand(spec, scale=scale)) == 4
    assert {c.seed for c in expand(own, scale="tiny")} == {9} and {c.seed for c in expand(own, scale="full")} == {3, 4}
    for raw, fragment in [({"seeds": [0], "base": {"seeds": [1]}}, "give seeds once"),
                          ({"seeds": [0, 0]}, "distinct"), ({"seeds": 3}, "non-empty list"),
                          ({"seeds": [0], "base": {"seed": 1}}, "either seed"),
                          ({"seeds": ["a"]}, "expected a list of integers")]:
        with pytest.raises(ValueError, match=fragment):
            spec_from_dict(raw, path="x.toml")


def test_the_spec_doc_documents_every_key():
    text = (Path(__file__).resolve().parents[1] / "docs" / "experiments.md").read_text()
    table = text[text.index("Every key of a spec:"):]
    for key in ("`name`", "`claim`", "`description`", "`seeds`", "`[base]`", "`[[grid]]`", "`[tiny]`"):
        assert key in table.split("\n\n")[1], key


# ---------------------------------------------------------------- summarize


def test_summarize_gives_mean_and_interval_per_grid_point(sweep, capsys):
    summary = summarize_sweep(sweep, metrics=["etf_distance", "loss", "first_nc_epoch"])
    assert [r.label for r in summary.rows] == ["setting=scl", "setting=hscl, beta=2", "setting=hscl, beta=5"]
    for row in summary.rows:
        assert row.seeds == (0, 1, 2)
        finals = [json.loads((sweep / name / "summary.json").read_text())["final"]["metrics"]["etf_distance"]
                  for name in row.names]
        mean, lo, hi = _t_interval(finals)
        e = row.values["etf_distance"]
        assert_allclose([e.mean, e.lo, e.hi], [mean, lo, hi], rtol=1e-12)
    code, out, err = run_main(["summarize", str(sweep), "--format", "csv", "--metric", "etf_distance"], capsys)
    assert code == 0 and err == ""
    rows = list(csv.DictReader(io.StringIO(out)))
    assert [r["point"] for r in rows] == ["setting=scl", "setting=hscl, beta=2", "setting=hscl, beta=5"]
    assert set(rows[0]) == {"point", "runs", "seeds", "n", "verdicts", "etf_distance", "etf_distance_lo", "etf_distance_hi"}
    code, out, _ = run_main(["summarize", str(sweep)], capsys)
    assert code == 0 and out.startswith("### sweep mine (scale quick, 9 of 9 runs finished)") and "| setting=scl |" in out


def test_labels_and_summary_csv_show_only_what_a_run_reads(sweep):
    with open(sweep / "summary.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert {r["beta"] for r in rows if r["setting"] == "scl"} == {""}  # inherited from [base], not applied
    assert {r["beta"] for r in rows if r["setting"] == "hscl"} == {"2", "5"}
    assert point_labels([Config(setting="scl", beta=5.0), Config(setting="hscl", beta=2.0)]) == \
        ["setting=scl", "setting=hscl, beta=2"]
    assert point_labels([Config(), Config()]) == ["-", "-"]


# ---------------------------------------------------------------- compare


def test_compare_runs_and_first_nc_epoch_against_a_naive_loop(sweep, capsys):
    runs = load_paths([sweep])
    for run in runs:
        naive = None
        for record in run.records:
            m = record.metrics
            if m is not None and m["etf_distance"] < NC_ETF and m["within_class"] < NC_WITHIN:
                naive = record.epoch
                break
        assert first_nc_epoch(run) == naive
        final = run.summary.final  # type: ignore[union-attr]
        assert run_value(run, "gap") == final.gap and run_value(run, "spectrum_min") == min(final.metrics["spectrum"])
    names = sorted(p.name for p in sweep.iterdir() if p.name.startswith("setting=scl"))
    code, out, err = run_main(["compare", *(str(sweep / n) for n in names[:2]), str(sweep / names[2]), "--format",
                               "json", "--metric", "gap", "etf_distance"], capsys)
    assert code == 0 and err == ""
    result = json.loads(out)
    assert len(result["rows"]) == 1 and result["rows"][0]["seeds"] == [0, 1, 2]  # one config but the seed: one row
    gaps = [load_run(sweep / n).summary.final.gap for n in names]  # type: ignore[union-attr]
    mean, lo, hi = _t_interval(gaps)
    got = result["rows"][0]["values"]["gap"]
    assert_allclose([got["mean"], got["lo"], got["hi"]], [mean, lo, hi], rtol=1e-12)
    code, out, _ = run_main(["compare", str(sweep / names[0]), str(sweep / names[1])], capsys)
    assert code == 0 and "| - | 2 runs | 0,1 |" in out


def test_a_monitored_run_is_compared_and_plotted_like_the_others(sweep, tmp_path, capsys):
    y = np.repeat(np.arange(3), 4)
    with NCMonitor(tmp_path / "mine", num_classes=3, batch_size=12, setting="hscl", beta=5.0) as monitor:
        for epoch, noise in enumerate((0.5, 0.1, 0.001)):
            z = simplex_etf(3)[y] + noise * np.random.default_rng(epoch).standard_normal((12, 2))
            monitor.evaluate([(z, y)], epoch=epoch, loss=1.0 - epoch / 10)
    code, out, _ = run_main(["compare", str(tmp_path / "mine"), str(sweep), "--metric", "first_nc_epoch"], capsys)
    assert code == 0 and "| mine |" in out and "| 2 |" in out  # its first epoch inside the NC thresholds
    code, out, _ = run_main(["plot", str(tmp_path / "mine"), str(sweep), "--out", str(tmp_path / "h.png")], capsys)
    assert code == 0 and (tmp_path / "h.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# ---------------------------------------------------------------- plot


@pytest.mark.parametrize("metric, suffix", [("etf_distance", ".png"), ("spectrum_min", ".pdf"), ("rel_gap", ".svg")])
def test_plot_writes_the_history_figure(sweep, tmp_path, capsys, metric, suffix):
    out = tmp_path / f"fig{suffix}"
    code, stdout, err = run_main(["plot", str(sweep), "--metric", metric, "--out", str(out)], capsys)
    assert code == 0 and err == "" and out.stat().st_size > 1000
    assert stdout.startswith(f"written: {out} (9 runs).") and "mean over the seeds" in stdout


# ---------------------------------------------------------------- bad input: one line, exit 2, nothing written


def _error(argv, capsys, command: str, fragment: str) -> None:
    code, out, err = run_main(argv, capsys)
    lines = err.strip().splitlines()
    assert code == 2 and out == "", (argv, out)
    assert len(lines) == 1 and lines[0].startswith(f"ncgeom {command}: error: ") and fragment in lines[0], (argv, err)


def test_new_commands_reject_bad_input_in_one_line(sweep, tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    (tmp_path / "file.txt").write_text("x")
    failed = tmp_path / "failed"
    SweepRecord("mine", None, "", "quick", None, ("setting",), "stacked",
                (SweepRunEntry("setting=scl,abc", "failed", "boom"),)).save(failed)
    other = tmp_path / "other_version"
    other.mkdir()
    atomic_write_json(other / "config.json", {"setting": "scl", "temperature": 0.5, "provenance": {}})
    garbage = tmp_path / "garbage_sweep"
    garbage.mkdir()
    (garbage / "sweep.json").write_text('{"name": 3}')
    run_dir = next(p for p in sweep.iterdir() if p.is_dir())
    cases = [
        (["summarize", str(tmp_path / "empty")], "summarize", "no sweep.json: not a sweep folder"),
        (["summarize", str(tmp_path / "missing")], "summarize", "no such folder"),
        (["summarize", str(failed)], "summarize", "no finished run to summarize (1 runs in sweep.json, statuses: failed)"),
        (["summarize", str(garbage)], "summarize", "not an ncgeom sweep record"),
        (["summarize", str(sweep), "--format", "xml"], "summarize", "--format must be one of"),
        (["summarize", str(sweep), "--metric", "accuracy"], "summarize", "--metric must be among"),
        (["compare", str(tmp_path / "empty")], "compare", "not a run directory (no config.json) nor a sweep folder"),
        (["compare", str(tmp_path / "file.txt")], "compare", "no such folder"),
        (["compare", str(other)], "compare", "not a run directory this version of ncgeom reads"),
        (["compare", str(failed)], "compare", "the sweep has no run directory yet"),
        (["compare", str(run_dir), "--metric", "spectrum"], "compare", "--metric must be among"),
        (["plot", str(run_dir), "--out", str(tmp_path / "a.jpg")], "plot", "--out must end in .png, .pdf, .svg"),
        (["plot", str(run_dir), "--metric", "first_nc_epoch", "--out", str(tmp_path / "a.png")], "plot", "not a curve"),
        (["plot", str(run_dir), "--metric", "nope", "--out", str(tmp_path / "a.png")], "plot", "--metric must be among"),
        (["plot", str(other), "--out", str(tmp_path / "a.png")], "plot", "not a run directory this version"),
        (["plot", str(run_dir), "--metric", "test_ncc_accuracy", "--out", str(tmp_path / "a.png")], "plot",
         "no run has a value of test_ncc_accuracy"),
    ]
    for argv, command, fragment in cases:
        _error(argv, capsys, command, fragment)
    assert not any(p.suffix in (".png", ".jpg") for p in tmp_path.iterdir())  # nothing written


def test_load_spec_of_a_first_users_file(tmp_path):
    path = tmp_path / "first.toml"
    path.write_text(SPEC)
    spec = load_spec(path)
    assert spec.grid_keys("quick") == ("setting", "seed", "beta") and len(expand(spec, scale="quick")) == 9


def test_docstring_examples():
    import doctest

    import ncgeom.campaigns.compare as compare

    result = doctest.testmod(compare, raise_on_error=False)
    assert result.attempted > 0 and result.failed == 0
