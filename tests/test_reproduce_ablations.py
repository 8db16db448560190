"""The hypothesis ablations in ``ncgeom reproduce``: ``theory/ablations.json`` (ncgeom.reproduce.theory_data) and the
"Hypothesis ablations" table of report.md (ncgeom.reproduce.report)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from ncgeom.atomic_io import atomic_write_bytes, atomic_write_json, read_json
from ncgeom.figures import FIGURES
from ncgeom.reproduce import pipeline
from ncgeom.reproduce.records import FigureRecord, FigureStatuses
from ncgeom.reproduce.report import render_report
from ncgeom.reproduce.stages import StageRecord
from ncgeom.reproduce.theory_data import NOT_AT_TINY, ablation_data
from proofs_check.ablations import CASES, COVERAGE, AblationResult, dimension, losses

HEADER = "| theorem | hypothesis | violation | conclusion | winner | gap | evidence |"


def _fixture_records() -> list[AblationResult]:
    return [
        AblationResult(theorem="2", hypothesis="2.1 balanced classes", violation="prior (r, 1, 1), r in [1, 20]",
                       conclusion="the ETF minimizes L_SCL", result="fails", evidence="exact", gap=-0.100312,
                       winner="C = 3: the minorities merged", configuration={"gram": [[1.0, -1.0], [-1.0, 1.0]]}),
        AblationResult(theorem="1", hypothesis="1.2 eta non-decreasing", violation="a | piecewise eta",
                       conclusion="L_HSCL >= L_SCL", result="holds", evidence="numerical", gap=1.23456e-05),
        AblationResult(theorem="3", hypothesis="3.3 d >= C - 1", violation="d = 2, C = 4",
                       conclusion="the bound is attained", result="fails", evidence="independent",
                       configuration={"means": [[1.0, 0.0]]}),
    ]


def _ablation_rows(report: str) -> list[str]:
    lines = report.splitlines()
    start = lines.index(HEADER) + 2  # header, then the |---| line
    rows = []
    for line in lines[start:]:
        if not line.startswith("| "):
            break
        rows.append(line)
    return rows


def test_report_has_one_row_per_ablation_record(tmp_path):
    records = _fixture_records()
    error = "proofs_check.ablations.positives: RuntimeError('boom')"
    atomic_write_json(tmp_path / "theory" / "ablations.json",
                      {"ablations": [r.to_dict() for r in records], "errors": [error], "quick": True,
                       "cases": [c for c in CASES if c != "imbalance"]})
    FigureStatuses({"fig_ablation_dimension": FigureRecord("done"),
                    "fig_ablation_imbalance": FigureRecord("no data")}).save(tmp_path / "figures")
    atomic_write_bytes(tmp_path / "figures" / "fig_ablation_dimension.png", b"\x89PNG\r\n\x1a\n")
    report = render_report(tmp_path)
    assert "## Hypothesis ablations" in report
    # gaps to 4 significant digits, "-" for the winner where the conclusion holds and for a missing gap
    assert _ablation_rows(report) == [
        "| 2 | 2.1 balanced classes | prior (r, 1, 1), r in [1, 20] | **fails**: the ETF minimizes L_SCL "
        "| C = 3: the minorities merged | -0.1003 | exact |",
        "| 1 | 1.2 eta non-decreasing | a \\| piecewise eta | **holds**: L_HSCL >= L_SCL | - | 1.235e-05 | numerical |",
        "| 3 | 3.3 d >= C - 1 | d = 2, C = 4 | **fails**: the bound is attained "
        "| configuration in theory/ablations.json | - | independent |",
    ]
    assert f"- ERROR: {error}" in report
    assert "- Cases not run in this reproduction: imbalance " in report
    number = [spec.name for spec in FIGURES].index("fig_ablation_dimension") + 1
    title = FIGURES[number - 1].title
    links = [line for line in report.splitlines() if line.startswith("- Figures: ")]
    assert links == [f"- Figures: [Figure {number}: {title}](figures/fig_ablation_dimension.png)."]


def test_report_without_ablation_records_says_so(tmp_path):
    assert "_No ablation records (theory stage not run)._" in render_report(tmp_path)


@pytest.fixture(scope="module")
def tiny_theory(tmp_path_factory):
    """The theory stage of a tiny reproduction with the ``losses`` case crashing; counts the dimension searches."""
    out = tmp_path_factory.mktemp("reproduce_ablations") / "tiny"
    searches: list[bool] = []
    search = dimension.dimension_table

    def counted(*, quick, **kwargs):
        searches.append(quick)
        return search(quick=quick, **kwargs)

    def boom(*, quick):
        raise RuntimeError("boom")

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(losses, "ablations", boom)
        mp.setattr(dimension, "dimension_table", counted)
        result = pipeline.reproduce(out, scale="tiny", stages=("theory",), log=lambda msg: None)
    return out, result, searches


def test_crashing_case_is_recorded_and_the_stage_completes(tiny_theory):
    out, result, _ = tiny_theory
    assert [(s.stage, s.status) for s in result.stages] == [("theory", "failed"), ("report", "done")]
    record = StageRecord.load(out, "theory")
    assert record is not None and "losses" in record.error and "boom" in record.error
    for name in ("nc_values", "harris_gap", "certificates", "hucl_exploration", "hucl_thresholds",
                 "ablation_dimension"):
        assert (out / "theory" / f"{name}.json").is_file(), name
    data = read_json(out / "theory" / "ablations.json")
    assert data["errors"] == ["proofs_check.ablations.losses: RuntimeError('boom')"]
    records = [AblationResult.from_dict(r) for r in data["ablations"]]
    assert {r.hypothesis_id for r in records} >= {"2.3", "3.3"}  # the dimension case still ran
    report = result.report.read_text()
    assert "- ERROR: proofs_check.ablations.losses: RuntimeError('boom')" in report
    assert len(_ablation_rows(report)) == len(records)


def test_tiny_scale_skips_the_cases_of_not_at_tiny(tiny_theory):
    out, _, _ = tiny_theory
    assert "ablation_imbalance" in NOT_AT_TINY  # the slow imbalance search is not part of the test scale
    data = read_json(out / "theory" / "ablations.json")
    skipped = {c for c in CASES if f"ablation_{c}" in NOT_AT_TINY}
    assert data["cases"] == [c for c in CASES if c not in skipped]
    assert not (out / "theory" / "ablation_imbalance.json").exists()
    only_skipped = {h for h, cases in COVERAGE.items() if set(cases) <= skipped}
    assert only_skipped >= {"2.1", "3.1"}
    assert not {AblationResult.from_dict(r).hypothesis_id for r in data["ablations"]} & only_skipped


def test_one_dimension_search_feeds_the_table_and_the_records(tiny_theory):
    out, _, searches = tiny_theory
    assert searches == [True]
    rows = read_json(out / "theory" / "ablation_dimension.json")["rows"]
    records = [AblationResult.from_dict(r) for r in read_json(out / "theory" / "ablations.json")["ablations"]]
    for record in (r for r in records if r.hypothesis_id in ("2.3", "3.3")):
        setting = record.values["setting"]
        below = [r["gap"] for r in rows if r["setting"] == setting and r["dim"] < r["num_classes"] - 1]
        assert record.gap == min(below), setting  # the same numbers: the record summarizes this table


def test_records_with_errors_are_recomputed_then_kept(tiny_theory, monkeypatch, tmp_path):
    out, _, _ = tiny_theory
    directory = Path(shutil.copytree(out / "theory", tmp_path / "theory"))  # the fixture's files stay as they are
    calls: list[str] = []

    def fake_losses(*, quick):
        calls.append("losses")
        return []

    def fake_dimension(*, quick):
        calls.append("dimension")
        return [], {"rows": []}

    monkeypatch.setattr(losses, "ablations", fake_losses)
    monkeypatch.setattr(dimension, "ablations_with_table", fake_dimension)
    first = ablation_data(directory, quick=True, cases=("losses", "dimension"), log=lambda msg: None)
    # ablations.json listed an error: records and the dimension table are recomputed, from one call each
    assert calls == ["losses", "dimension"] and first["failed"] == []
    assert sorted(first["computed"]) == ["ablation_dimension", "ablations"]
    assert read_json(directory / "ablations.json")["errors"] == []
    calls.clear()
    second = ablation_data(directory, quick=True, cases=("losses", "dimension"), log=lambda msg: None)
    assert calls == [] and second["computed"] == [] and sorted(second["skipped"]) == ["ablation_dimension", "ablations"]

