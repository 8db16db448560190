"""``ncgeom verify`` and ``proofs_check.report.run_all``: collection, robustness, table, JSON, exit codes."""

import json
import math
import subprocess
import sys
import types
from typing import Any

import numpy as np
import pytest

import ncgeom.cli.verify as verify_cli
import proofs_check.report as report
from ncgeom.atomic_io import dumps_json
from ncgeom.cli.main import main
from ncgeom.vocabulary import EVIDENCE
from proofs_check.records import CheckResult
from proofs_check.report import VerifyReport, key_numbers, run_all


def _result(name, status, evidence="exact", **details):
    return CheckResult(name, "s", "m", status, details, 0.01, "test", evidence=evidence)


def test_all_names_exist_once():
    assert len(set(report.__all__)) == len(report.__all__)
    for name in report.__all__:
        assert hasattr(report, name), name


def test_missing_module_is_a_fail_row(monkeypatch):
    monkeypatch.setattr(report, "CHECK_MODULES", (*report.CHECK_MODULES, "nonexistent"))
    rep = run_all(quick=True, modules=("nonexistent",), with_provenance=False)
    assert [r.name for r in rep.checks] == ["nonexistent_missing"]
    assert rep.checks[0].status == "fail" and "missing" in rep.checks[0].details["error"]
    assert rep.checks[0].evidence == "self-test"  # about the checking machinery, not the paper
    assert not rep.passed


def test_crashing_checker_and_checks_are_fail_rows(monkeypatch):
    def boom():
        raise ZeroDivisionError("division by zero")

    good = types.ModuleType("proofs_check.fakegood")
    monkeypatch.setattr(good, "checks", lambda *, quick: [boom, lambda: _result("ok", "pass"), lambda: _result("explore", "info")],
                        raising=False)
    bad = types.ModuleType("proofs_check.fakebad")

    def bad_checks(*, quick):
        raise RuntimeError("cannot list")

    monkeypatch.setattr(bad, "checks", bad_checks, raising=False)
    monkeypatch.setitem(sys.modules, "proofs_check.fakegood", good)
    monkeypatch.setitem(sys.modules, "proofs_check.fakebad", bad)
    monkeypatch.setattr(report, "CHECK_MODULES", ("fakegood", "fakebad"))
    seen: list[CheckResult] = []
    rep = run_all(quick=True, with_provenance=False, on_result=seen.append)
    statuses = [(r.name, r.status) for r in rep.checks]
    assert statuses == [("fakegood.boom", "fail"), ("ok", "pass"), ("explore", "info"), ("fakebad_checks_error", "fail")]
    assert "ZeroDivisionError" in rep.checks[0].details["error"]
    assert seen == list(rep.checks)
    assert rep.counts == {"fail": 2, "pass": 1, "info": 1}
    assert not rep.passed


def test_info_and_unresolved_do_not_fail():
    rep = VerifyReport((_result("a", "pass"), _result("b", "info"), _result("c", "unresolved")), True, 0.1, ())
    assert rep.passed
    assert not VerifyReport((_result("a", "fail"),), True, 0.1, ()).passed


def test_unknown_module_raises():
    with pytest.raises(ValueError, match="modules"):
        run_all(quick=True, modules=("nope",))


def test_report_round_trips_through_strict_json_and_key_numbers():
    # a non-str key on purpose: the JSON record writes it as "3"
    details: dict[Any, Any] = {"a": np.float64(1.5), "b": np.arange(2), "c": (math.nan, math.inf), 3: np.bool_(True)}
    rep = VerifyReport((CheckResult("x", "s", "m", "pass", details, 0.01, "test", evidence="independent"), _result("y", "info")), True, 0.5, ("symbolic",), {"git": "abc"})
    data = json.loads(dumps_json(rep.to_dict()))
    assert data["checks"][0]["details"] == {"a": 1.5, "b": [0, 1], "c": [None, None], "3": True}
    assert data["checks"][0]["evidence"] == "independent"
    assert data["evidence_counts"] == {"exact": 0, "independent": 1, "numerical": 0, "self-test": 0}  # passes only
    back = VerifyReport.from_dict(data)
    assert back.to_dict() == data and back.passed and back.counts == {"pass": 1, "info": 1}
    with pytest.raises(ValueError, match="evidence_counts"):
        VerifyReport.from_dict({**data, "evidence_counts": {**data["evidence_counts"], "exact": 1}})
    with pytest.raises(ValueError, match="unknown key"):
        VerifyReport.from_dict({**data, "passes": True})
    with pytest.raises(ValueError, match="disagrees"):
        VerifyReport.from_dict({**data, "passed": False})
    with pytest.raises(ValueError, match="unknown key"):
        CheckResult.from_dict({**data["checks"][1], "verdict": "pass"})
    text = key_numbers(_result("x", "pass", gap=1e-9, primal_value=0.5, closed_form=0.5, other=[1, 2]))
    assert text.startswith("primal_value=0.5, closed_form=0.5, gap=1e-09")


def test_cli_exit_code_and_table_on_failure(monkeypatch, capsys):
    fake = VerifyReport((_result("good", "pass", gap=1e-9), _result("bad", "fail", error="wrong"),
                         _result("control", "pass", evidence="self-test")), True, 0.2, ())
    monkeypatch.setattr(verify_cli, "run_all", lambda **kwargs: fake)
    assert main(["verify", "--quick"]) == 1
    out = capsys.readouterr().out
    assert "FAILED" in out and "bad" in out and "wrong" in out
    lines = out.splitlines()
    assert lines[0].split()[:4] == ["status", "evidence", "check", "statement"]
    assert lines[2].split()[:4] == ["pass", "exact", "good", "s"]  # an unknown family: its LaTeX as text
    assert ("evidence about the paper (passes): 1 exact, 0 independent, 0 numerical; self-tests of the checkers: "
            "1 of 1 passed") in " ".join(out.split())
    assert main(["verify", "--quick", "--json"]) == 1
    assert json.loads(capsys.readouterr().out)["passed"] is False


def test_cli_rejects_unknown_only(capsys):
    assert main(["verify", "--only", "certificates,bogus"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("ncgeom verify: error: --only")


def test_empty_module_selection_is_refused_not_a_vacuous_pass(capsys):
    # before the fix: run_all(modules=()) and "--only ," reported PASSED with 0 checks (exit 0)
    with pytest.raises(ValueError, match="modules"):
        run_all(quick=True, modules=(), with_provenance=False)
    assert main(["verify", "--only", ","]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("ncgeom verify: error: --only")


def test_cli_only_smoke(capsys):
    assert main(["verify", "--quick", "--json", "--only", "certificates"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["passed"] is True
    assert {r["status"] for r in data["checks"]} == {"pass"}
    assert {"name", "statement", "method", "status", "details", "seconds", "evidence"} <= set(data["checks"][0])
    assert {r["evidence"] for r in data["checks"]} == {"numerical"}  # solver optima and float bounds
    assert data["evidence_counts"]["numerical"] == len(data["checks"])


def test_verify_quick_json_passes_end_to_end():
    # The whole quick suite, through the real entry point (about 30 s on 2 shared cores).
    proc = subprocess.run([sys.executable, "-m", "ncgeom.cli.main", "verify", "--quick", "--json"],
                          capture_output=True, text=True, timeout=300)
    data = json.loads(proc.stdout)
    failed = [c["name"] for c in data["checks"] if c["status"] == "fail"]
    assert data["passed"] is True, failed
    assert proc.returncode == 0
    names = {c["name"] for c in data["checks"]}
    assert "certificate_ucl_infonce_sphere_C4_k2_tau0.5" in names and "counterexample_all_classes" in names
    assert "jensen_step[k=2]" in names and "tilted_vs_plain_joint_eta" in names
    assert all(c["evidence"] in EVIDENCE for c in data["checks"])
    assert sum(data["evidence_counts"].values()) == data["counts"]["pass"]
    assert data["seconds"] < 120  # measured ~17-30 s; the budget is 60 s, 2x slack for shared cores
