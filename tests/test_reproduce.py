"""``ncgeom reproduce``: the pipeline end to end on the tiny scale, resumability, atomic writes,
bad input, and the documentation that ships with it (check_your_loss.md runs, cli.md is complete)."""

from __future__ import annotations

import json
import multiprocessing
import os
import re
import time
from pathlib import Path

import pytest

from ncgeom.atomic_io import atomic_write_bytes, atomic_write_json, read_json
from ncgeom.campaigns.claims import CLAIMS
from ncgeom.cli.main import build_parser, main
from ncgeom.cli.options import former_spellings
from ncgeom.cli.reference import cli_reference
from ncgeom.figures import FIGURES
from ncgeom.phase.records import PhaseMap
from ncgeom.reproduce import pipeline
from ncgeom.reproduce.records import FigureStatuses, PhaseSummary, StageSummary
from ncgeom.reproduce.report import write_gallery
from ncgeom.reproduce.theory_data import NOT_AT_TINY
from ncgeom.vocabulary import VERDICTS

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
DOCS = Path(__file__).resolve().parents[1] / "docs"


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    """One real `ncgeom reproduce --tiny` (verify, theory data, every claim sweep, figures, report)."""
    out = tmp_path_factory.mktemp("reproduce") / "tiny"
    t0 = time.perf_counter()
    code = main(["reproduce", "--tiny", "--workers", "1", "--out", str(out)])
    return out, code, time.perf_counter() - t0


#: Figures whose data the tiny scale does not compute (ncgeom.reproduce.theory_data.NOT_AT_TINY: too slow for it)
TINY_WITHOUT_DATA = frozenset(f"fig_{name}" for name in NOT_AT_TINY)


def test_tiny_reproduction_end_to_end(tiny_run):
    import matplotlib.image

    out, code, seconds = tiny_run
    assert code == 0, (out / "report.md").read_text() if (out / "report.md").exists() else "no report"
    # Budget of the test scale: under a minute on 2 idle cores; a loaded shared machine gets slack.
    assert seconds < 180, f"tiny reproduction took {seconds:.0f} s"
    report = (out / "report.md").read_text()
    # every claim listed with a verdict, in the summary table and the claim-by-claim table
    for cid in CLAIMS:
        rows = [line for line in report.splitlines() if line.startswith(f"| {cid} |")]
        assert rows, f"claim {cid} missing from report.md"
        verdicts = {m for line in rows for m in re.findall(r"\*\*(.+?)\*\*", line)}
        assert verdicts & set(VERDICTS), f"claim {cid} has no verdict in {verdicts}"
    # every figure exists, is a valid PNG loadable by matplotlib, and is shown with its caption
    status = FigureStatuses.load(out / "figures")
    assert status is not None
    for spec in FIGURES:
        png = out / "figures" / f"{spec.name}.png"
        if spec.name in TINY_WITHOUT_DATA:  # its theory data is not computed at the test scale (theory_data)
            assert status.figures[spec.name].status == "no data" and not png.exists(), spec.name
            continue
        assert png.read_bytes()[:8] == PNG_SIGNATURE, spec.name
        image = matplotlib.image.imread(png)
        assert image.ndim == 3 and min(image.shape[:2]) > 100
        assert f"![{spec.title}](figures/{spec.name}.png)" in report
        assert spec.caption[:60] in report
    assert "## Verification (proofs_check)" in report and "| pass |" in report
    for name in ("nc_values", "harris_gap", "certificates", "hucl_exploration", "hucl_thresholds", "ablation_dimension"):
        assert (out / "theory" / f"{name}.json").exists()
    assert read_json(out / "theory" / "harris_gap.json")["holds"] is True
    # the phase stage ran the 2 x 2 smoke map (issue 24, item 6), whose figure the report shows
    smoke = PhaseMap.load(out / "phase" / "phase_classes_batch")
    assert smoke.scale == "tiny" and smoke.runs_trained == smoke.runs_uniform == 8 and smoke.status == "complete"
    assert "## Phase maps" in report and "](phase/phase_classes_batch/phase_map.png)" in report
    # tiny trains its smoke map (quick and full read the shipped records: tests/test_phase.py)
    assert "Trained by this reproduction: `ncgeom phase phase_classes_batch --scale tiny --seeds confirmatory`" in report
    assert (out / "phase" / "phase_classes_batch" / "phase_map.png").read_bytes()[:8] == PNG_SIGNATURE
    # the report cites the theory in the repository and prints no path of this machine
    assert "Theory: docs/theory.md" in report
    for machine_path in (out, Path.home(), Path(__file__).resolve().parents[1]):  # output, home, checkout
        assert str(machine_path) not in report


def test_rerun_skips_finished_stages_and_keeps_results(tiny_run):
    out, _, _ = tiny_run
    before = {p: p.stat().st_mtime_ns for p in (out / "sweeps").rglob("summary.json")}
    figure = out / "figures" / "fig_nc_values.png"
    figure_time = figure.stat().st_mtime_ns
    t0 = time.perf_counter()
    result = pipeline.reproduce(out, scale="tiny", log=lambda msg: None)
    assert time.perf_counter() - t0 < 10
    assert [s.status for s in result.stages] == ["skipped", "skipped", "skipped", "skipped", "skipped", "done"]
    assert {p: p.stat().st_mtime_ns for p in (out / "sweeps").rglob("summary.json")} == before
    assert figure.stat().st_mtime_ns == figure_time


def test_gallery_copies_every_figure_with_its_caption(tiny_run, tmp_path):
    out, _, _ = tiny_run
    index = write_gallery(out, tmp_path / "gallery").read_text()
    import matplotlib.image

    for spec in FIGURES:
        if spec.name in TINY_WITHOUT_DATA:
            continue
        copy = tmp_path / "gallery" / f"{spec.name}.png"
        assert copy.read_bytes()[:8] == PNG_SIGNATURE
        assert matplotlib.image.imread(copy).shape[:2] == matplotlib.image.imread(out / "figures" / f"{spec.name}.png").shape[:2]
        assert f"![{spec.title}]({spec.name}.png)" in index


def test_other_scale_in_same_directory_is_refused(tiny_run, capsys):
    out, _, _ = tiny_run
    assert main(["reproduce", "--quick", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("ncgeom reproduce: error:") and "tiny" in err[0]


@pytest.mark.parametrize(
    "argv, fragment",
    [
        (["--workers", "0"], "--workers must be an integer >= 1"),
        (["--workers", "-3"], "--workers must be an integer >= 1"),
        (["--stages", "verify,paint"], "--stages must be a comma-separated subset"),
        (["--redo", "nope"], "--redo must be a comma-separated subset"),
        (["--engine", "stack"], "--engine must be one of"),
    ],
)
def test_bad_input_is_one_line_exit_2(argv, fragment, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["reproduce", "--out", str(out), *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("ncgeom reproduce: error:") and fragment in err[0]
    assert not out.exists()  # nothing written for rejected input


@pytest.mark.parametrize(
    "argv",
    [["--workers", "two"], ["--quick", "--full"], ["--no-such-flag"]],
)
def test_argparse_errors_exit_2(argv, tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["reproduce", "--out", str(tmp_path / "out"), *argv])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "error" in err[0]
    with pytest.raises(SystemExit) as exc:
        main(["reproduce"])  # --out is required
    assert exc.value.code == 2


def test_out_that_is_a_file_is_refused(tmp_path, capsys):
    target = tmp_path / "a_file"
    target.write_text("keep me")
    assert main(["reproduce", "--tiny", "--out", str(target)]) == 2
    assert "not a directory" in capsys.readouterr().err
    assert target.read_text() == "keep me"


def _fake_stages(monkeypatch, *, fail: str | None = None, calls: list | None = None):
    def make(name):
        def stage(ctx):
            if calls is not None:
                calls.append(name)
            if name == fail:
                raise RuntimeError(f"{name} exploded")
            atomic_write_json(ctx.out / name / "data.json", {"stage": name})
            return StageSummary()

        return stage

    fakes = {name: make(name) for name in pipeline.STAGES[:-1]}
    monkeypatch.setattr(pipeline, "_STAGE_FUNCS", {**pipeline._STAGE_FUNCS, **fakes})


def test_failed_stage_is_recorded_others_run_and_resume_retries_it(tmp_path, monkeypatch, capsys):
    calls: list = []
    _fake_stages(monkeypatch, fail="claims", calls=calls)
    assert main(["reproduce", "--tiny", "--out", str(tmp_path), "--workers", "1"]) == 1
    assert calls == ["verify", "theory", "claims", "phase", "figures"]
    marker = read_json(tmp_path / ".stages" / "claims.json")
    assert marker["status"] == "failed" and "claims exploded" in marker["error"]
    report = (tmp_path / "report.md").read_text()
    assert "| claims | failed |" in report and "claims exploded" in report
    assert "claims" in capsys.readouterr().out
    # resume: finished stages are skipped, the failed one is retried, figures are redrawn after it
    calls.clear()
    _fake_stages(monkeypatch, calls=calls)
    assert main(["reproduce", "--tiny", "--out", str(tmp_path), "--workers", "1"]) == 0
    assert calls == ["claims", "figures"]
    assert read_json(tmp_path / "verify" / "data.json") == {"stage": "verify"}
    # --redo recomputes a finished stage
    calls.clear()
    assert main(["reproduce", "--tiny", "--out", str(tmp_path), "--redo", "theory", "--workers", "1"]) == 0
    assert calls == ["theory", "figures"]


def _meeting_stages(monkeypatch, *, timeout: float, raise_in: str | None = None):
    """Fake stages where theory waits for the claims to start (``timeout`` s) and claims wait for theory to end:
    they both finish only when they run at the same time. Returns the list of (stage, thread name) calls."""
    import threading

    started, finished = threading.Event(), threading.Event()
    calls: list = []

    def make(name):
        def stage(ctx):
            calls.append((name, threading.current_thread().name))
            if name == raise_in:
                raise KeyboardInterrupt  # as a stop signal would (not an Exception: never recorded as failed)
            if name == "theory":
                if not started.wait(timeout):
                    raise RuntimeError("the claims did not start while theory ran")
                finished.set()
            if name == "claims":
                started.set()
                if not finished.wait(timeout):
                    raise RuntimeError("theory did not end while the claims ran")
            atomic_write_json(ctx.out / name / "data.json", {"stage": name})
            return StageSummary()

        return stage

    fakes = {name: make(name) for name in pipeline.STAGES[:-1]}
    monkeypatch.setattr(pipeline, "_STAGE_FUNCS", {**pipeline._STAGE_FUNCS, **fakes})
    return calls


def _claims_that_watch_the_side(monkeypatch, *, stop: bool = False):
    """A fake claims stage (verify and theory stay real): it notes whether theory was already done when it
    started, then waits (<= 120 s) for the theory record, or raises KeyboardInterrupt at once (``stop``)."""
    seen: dict = {}

    def claims(ctx):
        seen["theory_done_at_start"] = (ctx.out / ".stages" / "theory.json").exists()
        seen["children"] = [p.name for p in multiprocessing.active_children()]
        if stop:
            raise KeyboardInterrupt  # as a stop signal would
        deadline = time.monotonic() + 120
        while not (ctx.out / ".stages" / "theory.json").exists():
            assert time.monotonic() < deadline, "theory did not finish while the claims ran"
            time.sleep(0.05)
        atomic_write_json(ctx.out / "claims" / "data.json", {"stage": "claims"})
        return StageSummary()

    def figures(ctx):
        FigureStatuses({}).save(ctx.out / "figures")
        return StageSummary()

    def phase(ctx):  # the maps train in worker processes too: left out here, tested in tests/test_phase.py
        return PhaseSummary(maps={})

    monkeypatch.setattr(pipeline, "_STAGE_FUNCS", {**pipeline._STAGE_FUNCS, "claims": claims, "phase": phase,
                                                   "figures": figures})
    return seen


def test_verify_and_theory_run_beside_the_claims_with_workers(tmp_path, monkeypatch):
    """With 2 workers the claims start before theory is done and end after it: the two ran at the same time,
    theory in its own process, whose log lines reach the caller's log."""
    seen = _claims_that_watch_the_side(monkeypatch)
    lines: list[str] = []
    result = pipeline.reproduce(tmp_path, scale="tiny", workers=2, log=lines.append)
    assert seen["theory_done_at_start"] is False and "ncgeom-reproduce-theory" in seen["children"]
    status = {o.stage: o.status for o in result.stages}
    assert status == {"verify": "done", "theory": "done", "claims": "done", "phase": "done", "figures": "done",
                      "report": "done"}
    assert "[theory] done" in " ".join(lines) and any(line.startswith("  theory/") for line in lines)
    assert (tmp_path / "verify" / "results.json").exists() and (tmp_path / "theory" / "nc_values.json").exists()
    assert not multiprocessing.active_children()


def test_one_worker_runs_the_stages_one_after_another(tmp_path, monkeypatch):
    calls = _meeting_stages(monkeypatch, timeout=0.2)
    result = pipeline.reproduce(tmp_path, scale="tiny", workers=1, log=lambda msg: None)
    assert [stage for stage, _ in calls] == ["verify", "theory", "claims", "phase", "figures"]
    assert len({thread for _, thread in calls}) == 1
    status = {o.stage: o.status for o in result.stages}  # theory waited for claims in vain, then claims for theory
    assert status["theory"] == "failed" and status["claims"] == "failed"


def test_a_stop_during_the_claims_stops_the_side_process_and_its_stage_reruns(tmp_path, monkeypatch):
    seen = _claims_that_watch_the_side(monkeypatch, stop=True)
    t0 = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        pipeline.reproduce(tmp_path, scale="tiny", workers=2, log=lambda msg: None)
    assert "ncgeom-reproduce-theory" in seen["children"]
    assert not multiprocessing.active_children()  # stopped before the call returned
    assert time.monotonic() - t0 < 60
    assert not (tmp_path / ".stages" / "theory.json").exists()  # cut off: not recorded, so it reruns
    before = sorted(p.name for p in (tmp_path / "theory").glob("*")) if (tmp_path / "theory").exists() else []
    time.sleep(1.0)  # nothing writes to the folder once the call has returned
    after = sorted(p.name for p in (tmp_path / "theory").glob("*")) if (tmp_path / "theory").exists() else []
    assert before == after
    monkeypatch.undo()
    calls = _meeting_stages(monkeypatch, timeout=0.2)
    pipeline.reproduce(tmp_path, scale="tiny", workers=1, log=lambda msg: None)
    assert "theory" in [stage for stage, _ in calls]



def test_interrupted_write_keeps_the_previous_file(tmp_path, monkeypatch):
    target = tmp_path / "results.json"
    atomic_write_json(target, {"version": 1})

    def boom(src, dst):
        raise KeyboardInterrupt  # killed between writing the temporary file and renaming it

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(KeyboardInterrupt):
        atomic_write_bytes(target, b'{"version": 2, "trunc')
    monkeypatch.undo()
    assert read_json(target) == {"version": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["results.json"]  # no temporary file left behind


def test_atomic_json_is_strict(tmp_path):
    import numpy as np

    path = atomic_write_json(tmp_path / "x.json", {"a": float("nan"), "b": np.arange(3), "c": np.float64(1.5)})
    assert json.loads(path.read_text()) == {"a": None, "b": [0, 1, 2], "c": 1.5}


def test_check_your_loss_examples_run():
    """Every ```python block of docs/check_your_loss.md runs, in order, in one namespace."""
    text = (DOCS / "check_your_loss.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert len(blocks) >= 5
    namespace: dict = {"__name__": "check_your_loss"}
    for block in blocks:
        exec(compile(block, str(DOCS / "check_your_loss.md"), "exec"), namespace)


def test_cli_reference_covers_every_subcommand_and_option():
    """docs/cli.md documents every subcommand and every option of the installed parsers."""
    text = (DOCS / "cli.md").read_text()
    parser = build_parser()
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    assert sub.choices, "no subcommands registered"
    for name, subparser in sub.choices.items():
        assert f"## ncgeom {name}" in text, f"subcommand {name} missing from docs/cli.md"
        for action in subparser._actions:
            if action.help == "==SUPPRESS==":
                continue
            for opt in action.option_strings:
                if opt in former_spellings(action):  # accepted for one release, left out of the help and the page
                    assert f"{opt} " not in text, f"former spelling {opt} of ncgeom {name} listed in docs/cli.md"
                    continue
                assert opt in text, f"option {opt} of ncgeom {name} missing from docs/cli.md"


def test_cli_reference_is_current():
    """docs/cli.md is the output of `python -m ncgeom.cli.reference` (regenerate it when a parser changes)."""
    assert (DOCS / "cli.md").read_text() == cli_reference()


def test_a_side_process_that_dies_leaves_its_stages_recorded_as_failed(tmp_path, monkeypatch):
    """The side process gets a scale it cannot resolve, so it dies before reporting any stage: both of its
    stages are recorded as failed with its exit code, the claims and the figures still run."""
    import dataclasses

    from ncgeom.reproduce.scales import scale_parameters

    calls = _meeting_stages(monkeypatch, timeout=0.0)  # the fake stages of this process (claims, figures)
    lines: list[str] = []
    ctx = pipeline.Context(out=tmp_path, scale=dataclasses.replace(scale_parameters("tiny"), name="bogus"),  # type: ignore[arg-type]
                           workers=2, log=lines.append)
    outcomes = pipeline._run_stages(ctx, ["verify", "theory", "claims", "figures"])
    status = {o.stage: (o.status, o.error) for o in outcomes}
    for stage in ("verify", "theory"):
        assert status[stage][0] == "failed" and "side process ended (exit code 1)" in status[stage][1]
        assert read_json(tmp_path / ".stages" / f"{stage}.json")["status"] == "failed"
    assert [stage for stage, _ in calls] == ["claims", "figures"]  # the fakes ran here; the side never started one
    assert not multiprocessing.active_children()
