"""tools/docs_numbers.py: every number the docs quote about runs, checks and timings is generated from the shipped
specs and the committed reproduction records (issue 26, item 8); ``--check`` lists every stale one."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
TOOL = REPO / "tools" / "docs_numbers.py"


@pytest.fixture(scope="module")
def tool():
    spec = importlib.util.spec_from_file_location("docs_numbers", TOOL)
    module = importlib.util.module_from_spec(spec)
    sys.modules["docs_numbers"] = module  # dataclasses resolve the module of their class
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def table(tool):
    return tool.values()


def test_the_docs_quote_no_stale_number():
    """What CI runs: the check mode of the tool, exit 0 with nothing listed."""
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.run([sys.executable, str(TOOL), "--check"], capture_output=True, text=True, env=env,
                          timeout=300)
    assert (proc.returncode, proc.stdout) == (0, ""), proc.stdout + proc.stderr


def test_the_numbers_the_issue_found_stale_are_generated_and_right(table):
    # issue 26, item 8: "about 3.7 CPU-hours" for --full, 56 quick runs, 3 full seeds and 17/18 ablation records were
    # stale hand-typed numbers; each is now the value the records and specs give, wherever the docs quote it
    from ncgeom.campaigns.claims import CLAIMS, claim_spec
    from ncgeom.campaigns.spec import expand

    full = json.loads((REPO / "figures" / "full" / "reproduction.json").read_text())
    quick = json.loads((REPO / "figures" / "quick" / "reproduction.json").read_text())
    cpu_hours = f"{full['cpu_seconds'] / 3600:.1f}"
    quick_runs = str(sum(len(expand(claim_spec(cid), scale="quick")) for cid in CLAIMS))
    assert table["repro.full.cpu_hours"] == cpu_hours
    assert (table["spec.runs.quick"], table["spec.seeds.full"]) == (quick_runs, str(full["seeds"]))
    assert (table["repro.quick.ablations"], table["repro.full.ablations"]) == (str(quick["ablations"]),
                                                                              str(full["ablations"]))
    experiments = (REPO / "docs" / "experiments.md").read_text()
    assert f"<!-- num:spec.runs.quick -->{quick_runs}<!-- /num -->" in experiments
    assert f"<!-- num:spec.seeds.full -->{full['seeds']}<!-- /num -->" in experiments
    verify = (REPO / "docs" / "verify.md").read_text()
    assert f"<!-- num:repro.quick.ablations -->{quick['ablations']}<!-- /num -->" in verify
    assert f"<!-- num:repro.full.ablations -->{full['ablations']}<!-- /num -->" in verify
    from ncgeom.cli.measured import FULL_CPU_HOURS

    assert FULL_CPU_HOURS == cpu_hours
    assert "3.7 CPU-hours" not in (REPO / "docs" / "cli.md").read_text()


def test_spec_counts_agree_with_an_independent_count(table):
    """spec.runs.<scale> is the number of configs the claims' sweeps expand to, counted here without the tool."""
    from ncgeom.campaigns.claims import CLAIMS, claim_spec
    from ncgeom.campaigns.spec import expand

    for scale in ("tiny", "quick", "full"):
        per_claim = {cid: len(expand(claim_spec(cid), scale=scale)) for cid in CLAIMS}
        assert table[f"spec.runs.{scale}"] == str(sum(per_claim.values()))
        assert all(table[f"spec.runs.{scale}.claim{cid}"] == str(n) for cid, n in per_claim.items())
    seeds = {(c.seed) for c in expand(claim_spec("1"), scale="full")}
    assert len(seeds) == int(table["spec.seeds.full"])  # claim 1's grid points each run every seed of the scale


def test_a_stale_number_is_listed_with_its_file_line_and_value(tool, table, tmp_path, monkeypatch):
    page = tmp_path / "page.md"
    hours = table["repro.full.cpu_hours"]
    page.write_text("intro\nwe ran <!-- num:spec.runs.quick -->56<!-- /num --> runs and "
                    f"<!-- num:repro.full.cpu_hours -->{hours}<!-- /num --> CPU-hours\n")
    monkeypatch.setattr(tool, "marked_files", lambda: [page])
    monkeypatch.setattr(tool, "REPO", tmp_path)
    monkeypatch.setattr(tool, "MEASURED", tmp_path / "measured.py")
    (tmp_path / "measured.py").write_text(tool.measured_module(table).replace(f'"{hours}"', '"99.9"'))
    problems = tool.stale(table)
    runs = table["spec.runs.quick"]
    assert runs != "56"
    assert problems == [f"page.md:2: spec.runs.quick is '{runs}', the file says '56'",
                        "measured.py is not what the records give"]
    text, changes = tool.rewrite(page.read_text(), table, "page.md")
    assert f"<!-- num:spec.runs.quick -->{runs}<!-- /num -->" in text and len(changes) == 1
    assert tool.rewrite(text, table, "page.md")[1] == []  # a rewritten file is current


def test_an_unknown_key_is_an_error_not_a_silent_pass(tool, table):
    with pytest.raises(ValueError, match="unknown number key 'spec.runs.huge'"):
        tool.rewrite("<!-- num:spec.runs.huge -->1<!-- /num -->", table, "x.md")


def test_a_record_that_disagrees_with_the_specs_is_refused(tool, tmp_path, monkeypatch):
    data = json.loads((REPO / "figures" / "quick" / "reproduction.json").read_text())
    (tmp_path / "quick").mkdir()
    (tmp_path / "quick" / "reproduction.json").write_text(json.dumps({**data, "runs": data["runs"] - 1}))
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "reproduction.json").write_text((REPO / "figures" / "full" / "reproduction.json").read_text())
    monkeypatch.setattr(tool, "record_path", lambda scale: tmp_path / scale / "reproduction.json")
    monkeypatch.setattr(tool, "REPO", tmp_path)
    with pytest.raises(ValueError, match="measure the reproduction again"):
        tool.values()


@pytest.mark.parametrize("change, message", [
    ({"speed": 1}, "unknown keys \\['speed'\\]"),
    ({"stages": {"verify": 1}}, "stages must give the seconds of verify, theory, claims, figures"),
    ({"checks": {"pass": 1, "info": 0}}, "checks\\['pass'\\] \\(1\\) must equal the passes by evidence"),
    ({"scale": "tiny"}, "scale must be one of"),
])
def test_the_record_type_is_strict(tool, change, message):
    data = json.loads((REPO / "figures" / "quick" / "reproduction.json").read_text())
    assert tool.ReproductionRecord.from_dict(data).to_dict() == data  # round trip
    with pytest.raises(ValueError, match=message):
        tool.ReproductionRecord.from_dict({**data, **change})
    missing = dict(data)
    del missing["origin"]
    with pytest.raises(ValueError, match="missing keys \\['origin'\\]"):
        tool.ReproductionRecord.from_dict(missing)


def test_times_are_written_as_people_read_them(tool):
    assert [tool.minutes_seconds(s) for s in (168, 599.4, 1372, 1744)] == ["168 s", "599 s", "22 min 52 s",
                                                                           "29 min 4 s"]


# ---------------------------------------------------------------------------------------- the claim tables


@pytest.fixture(scope="module")
def tables_tool(tool):
    import docs_tables  # tools/ is on sys.path once tools/docs_numbers.py is loaded

    return docs_tables


def _claim_file(folder: Path, claim_id: str, *, seeds="confirmatory", failed=(), scale="quick"):
    from ncgeom.campaigns.claims import CLAIMS, ClaimRecord, ClaimResult
    from ncgeom.vocabulary import Verdict

    rows = (ClaimRecord(claim_id, "overall", "-", CLAIMS[claim_id].statement, "1 holds (of 1 rows)", Verdict.HOLDS, 3),)
    result = ClaimResult(claim_id, CLAIMS[claim_id].statement, CLAIMS[claim_id].spec, scale, 3, tuple(failed), None,
                         rows, seeds)
    return result.write(folder / f"{claim_id}.json")


def test_the_claim_tables_refuse_exploratory_or_incomplete_results(tables_tool, tmp_path, monkeypatch):
    """The docs report verdicts on the confirmatory seeds of complete runs only: anything else is an error naming
    the file, never a table."""
    from ncgeom.campaigns.claims import CLAIMS

    monkeypatch.setattr(tables_tool, "claims_folder", lambda scale: tmp_path / scale)
    (tmp_path / "quick").mkdir()
    for claim_id in CLAIMS:
        _claim_file(tmp_path / "quick", claim_id)
    assert set(tables_tool.claim_results("quick")) == set(CLAIMS)
    _claim_file(tmp_path / "quick", "3", seeds="exploratory")
    with pytest.raises(ValueError, match="3.json: the docs quote complete results on the confirmatory seeds"):
        tables_tool.claim_results("quick")
    _claim_file(tmp_path / "quick", "3", failed=("run-a: killed",))
    with pytest.raises(ValueError, match="incomplete"):
        tables_tool.claim_results("quick")
    _claim_file(tmp_path / "quick", "3", scale="full")
    with pytest.raises(ValueError, match="expected 3 at quick"):
        tables_tool.claim_results("quick")
    (tmp_path / "quick" / "3.json").unlink()
    with pytest.raises(ValueError, match="missing"):
        tables_tool.claim_results("quick")


def test_a_stale_or_unknown_table_is_listed_not_kept(tables_tool):
    text = "before\n<!-- table:claims.summary -->\n| old |\n<!-- /table -->\nafter\n"
    new, changes = tables_tool.rewrite_tables(text, {"claims.summary": "| new |\n"}, "README.md")
    assert new == "before\n<!-- table:claims.summary -->\n| new |\n<!-- /table -->\nafter\n"
    assert changes == ["README.md:2: table claims.summary is not what figures/*/claims give"]
    assert tables_tool.rewrite_tables(new, {"claims.summary": "| new |\n"}, "README.md") == (new, [])
    with pytest.raises(ValueError, match="unknown table key 'claims.nine'"):
        tables_tool.rewrite_tables(text.replace("summary", "nine"), {}, "README.md")


def test_the_summary_points_claims_at_the_maps_that_bear_on_them(tables_tool):
    """Each shipped map names claims that exist; claims 4 and 7 (issue 24) have a map in the summary's last column."""
    from ncgeom.campaigns.claims import CLAIMS

    maps = tables_tool.maps_by_claim()
    assert set(maps) <= set(CLAIMS), sorted(set(maps) - set(CLAIMS))
    assert "phase_norm_encoder" in maps["4"] and "phase_hucl_beta_dim" in maps["7"]
