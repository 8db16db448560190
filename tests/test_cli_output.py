"""The readable output of the CLI (issue 26, item 7): ``verify``'s table within 100 columns with statements in
plain words, ``verify --ablations`` with progress, a legend, the winner per row and ``--only``; one spelling
per option with the former ones accepted for one release; a closed pipe ends quietly."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import run_main

from ncgeom.cli import verify as verify_cli
from ncgeom.cli.main import EXIT_BROKEN_PIPE, build_parser
from ncgeom.cli.options import FORMER_SPELLINGS, former_spellings
from proofs_check.ablations import CASES, AblationResult
from proofs_check.plain import PASS_NOTES, PLAIN_STATEMENTS, check_family, latex_to_text, pass_note, plain_statement
from proofs_check.records import CheckResult
from proofs_check.report import VerifyReport

REPO = Path(__file__).resolve().parent.parent
LONG = "a statement " * 30  # 360 characters: must wrap, not be cut


def _check(name, status="pass", statement=r"\text{x}", evidence="exact", **details):
    return CheckResult(name, statement, "m", status, details, 0.01, "src", evidence=evidence)


def _assert_fits(text: str, width: int = 100) -> None:
    too_long = [line for line in text.splitlines() if len(line) > width]
    assert not too_long, too_long


# ---------------------------------------------------------------- verify: the table


def test_verify_table_fits_100_columns_and_wraps_without_cutting():
    report = VerifyReport((
        _check("certificate_scl_infonce-mean_sphere_C4_k3_tau1_with_a_very_long_tail_beyond_any_column",
               statement=r"\text{" + LONG + "}", gap=1e-9, primal_value=0.25),
        _check("counterexample_exact", evidence="exact"),
        _check("hucl_thresholds", status="info", evidence="numerical", critical_beta=1.2850193347),
    ), True, 0.1, ())
    text = verify_cli.format_table(report)
    _assert_fits(text)
    header = text.splitlines()[0]
    table = text.split("\n\n")[0].splitlines()[2:]
    statements = " ".join(" ".join(line[header.index("statement"):header.index("time") - 3].split()) for line in table)
    flat = " ".join(text.split())
    # every word of the plain statement and the whole name survive the wrapping (nothing cut with "...")
    assert "..." not in text
    header = text.splitlines()[0]
    start, end = header.index("check"), header.index("statement")
    name_column = "".join(line[start:end].strip() for line in text.splitlines()[2:12])
    assert "certificate_scl_infonce-mean_sphere_C4_k3_tau1_with_a_very_long_tail_beyond_any_column" in name_column
    assert PLAIN_STATEMENTS["certificate"] in statements  # the family's words, not the LaTeX
    assert "\\text" not in text
    assert "numbers: primal_value=0.25, gap=1e-09" in statements
    assert "critical_beta=1.28502" in statements  # info rows show their numbers
    assert "note: " + PASS_NOTES["counterexample_exact"] in statements  # an alarming pass explains itself
    assert "info (numbers reported, no verdict)" in flat  # the legend


def test_every_pass_note_belongs_to_a_known_family_and_only_passes_get_notes():
    assert set(PASS_NOTES) <= set(PLAIN_STATEMENTS)
    assert pass_note(_check("counterexample_search")) == PASS_NOTES["counterexample_search"]
    assert pass_note(_check("counterexample_search", status="fail")) is None
    assert pass_note(_check("etf_existence")) is None


@pytest.mark.parametrize("name, family", [
    ("psi_convex[infonce,k=2]", "psi_convex"), ("closed_form_binomial[triplet,k=2]", "closed_form_binomial"),
    ("hucl_local_threshold_C10_d9", "hucl_local_threshold"), ("hucl_exploration_C4_d3_k1", "hucl_exploration"),
    ("hucl_batch_thresholds_C10_d9_B128", "hucl_batch_thresholds"), ("hucl_nc_closed_form_C4_k1", "hucl_nc_closed_form"),
    ("certificate_ucl_triplet_sphere_C3_k2_m1", "certificate"), ("jensen_step[k=2]", "jensen_step"),
    ("tilted_vs_plain_joint_eta", "tilted_vs_plain_joint_eta"), ("hucl_thresholds", "hucl_thresholds"),
])
def test_check_family_strips_the_parameters(name, family):
    assert check_family(name) == family
    assert family in PLAIN_STATEMENTS


def test_unknown_family_falls_back_to_the_latex_as_text():
    result = _check("brand_new_check", statement=r"\exists\ \text{unit simplex ETF in } \mathbb{R}^d \iff d\ge C-1")
    assert plain_statement(result) == "exists unit simplex ETF in R^d iff d>= C-1"


@pytest.mark.parametrize("latex", [
    r"G=\tfrac{C}{C-1}I-\tfrac{1}{C-1}\mathbf{1}\mathbf{1}^T,\ \mathrm{spec}\,G=\{\tfrac{C}{C-1}^{(C-1)},0\},\ \forall C\ge2",
    r"\mathbb E\langle z,z^-\rangle=\frac{\|\sum_c\mu_c\|^2-\sum_c\|\mu_c\|^2}{C(C-1)}",
    r"\psi\uparrow,\ \eta:\mathbb R^k\to[0,\infty)\ \uparrow\text{ in each }S_i:\ q\propto\eta(S)\textstyle\prod_i\nu(S_i)",
    r"L_S(\mathrm{NC})=\sum_{j=0}^k\binom kj p^j(1-p)^{k-j}\psi_k\big(0^{(j)},(-\tfrac C{C-1})^{(k-j)}\big)",
    r"\min_{M \succeq 0,\ \mathrm{diag}(M) \le 1} F_{\mathrm{SCL}}(M) = L_{\mathrm{SCL}}(\mathrm{NC})",
])
def test_latex_to_text_leaves_no_command_nor_brace(latex):
    text = latex_to_text(latex)
    assert not re.search(r"[\\{}]", text), text
    assert text and "  " not in text


# ---------------------------------------------------------------- verify --ablations


def _ablation(hypothesis="2.1 balanced classes", result="fails", gap=-0.1, winner="the 3 minority classes merged " * 6):
    return AblationResult(theorem=hypothesis[0], hypothesis=hypothesis, violation="prior (r, 1, ..., 1) " * 8,
                          conclusion="NC minimizes L_SCL", result=result, evidence="exact", gap=gap,
                          winner=winner if result == "fails" else None,
                          configuration={"gram": [[1.0]]} if result == "fails" else {}, seconds=1.5)


def test_ablations_text_has_the_legend_and_the_winner_per_row_within_100_columns():
    records = [_ablation(), _ablation("2.3 d >= C - 1", gap=0.0091), _ablation("1.3 i.i.d. negatives", "holds", 0.0)]
    text = verify_cli.format_ablations(records, [])
    _assert_fits(text)
    flat = " ".join(text.split())
    assert "fails = the hypothesis is needed: the conclusion fails without it" in flat
    assert "> 0 where the conclusion is that a bound is attained (the d >= C - 1 rows" in flat
    assert flat.count("winner: the 3 minority classes merged") == 2  # both rows that fail, none for the one that holds
    assert flat.count("conclusion: NC minimizes L_SCL") == 3
    assert "3 ablations: 2 fails (the hypothesis is needed), 1 holds" in flat


def test_ablations_only_runs_the_cases_named_with_progress_per_case(monkeypatch, capsys):
    calls = []

    def fake(*, quick, cases, on_error):
        calls.append((quick, cases))
        return [_ablation()]

    monkeypatch.setattr(verify_cli, "run_ablations", fake)
    code, out, err = run_main(["verify", "--ablations", "--only", "dimension, losses"], capsys)
    assert code == 0
    assert calls == [(True, ("dimension",)), (True, ("losses",))]
    assert "[1/2] dimension (quick) ..." in err and "[2/2] losses: 1 records (1 fails, 0 holds)" in err
    assert "  fails  2.1" in err  # one progress line per record as it arrives
    assert "winner: the 3 minority classes merged" in out
    code, out, err = run_main(["verify", "--ablations", "--full", "--only", "imbalance", "--json"], capsys)
    assert code == 0 and calls[-1] == (False, ("imbalance",)) and err == ""  # no progress with --json


@pytest.mark.parametrize("only, fragment", [
    ("bogus", "--only with --ablations must list cases among " + ", ".join(CASES) + ", got 'bogus'"),
    ("losses,symbolic", "got 'symbolic'"),
    ("", "--only must list at least one of the cases"),
    (" , ", "--only must list at least one of the cases"),
])
def test_ablations_only_refuses_unknown_or_empty_cases_in_one_line(only, fragment, capsys, monkeypatch):
    monkeypatch.setattr(verify_cli, "run_ablations", lambda **kw: pytest.fail("ran despite bad --only"))
    code, out, err = run_main(["verify", "--ablations", "--only", only], capsys)
    assert code == 2 and out == ""
    assert len(err.splitlines()) == 1 and err.startswith("ncgeom verify: error: ") and fragment in err


def test_checks_only_empty_is_refused(capsys, monkeypatch):
    monkeypatch.setattr(verify_cli, "run_all", lambda **kw: pytest.fail("ran despite an empty --only"))
    code, out, err = run_main(["verify", "--only", ""], capsys)
    assert code == 2 and len(err.splitlines()) == 1 and "--only must list at least one of symbolic" in err


# ---------------------------------------------------------------- option spellings


@pytest.mark.parametrize("former", FORMER_SPELLINGS, ids=lambda f: f"{f.command}{f.old}")
def test_a_former_spelling_still_works_with_a_note_and_is_hidden_from_help(former, capsys):
    base = {"--setting": "ucl", "--psi": "infonce", "--classes": "4", "--num-negatives": "2", "--tau": "0.5"}
    assert former.command == "nc-value" and former.new in base
    new_argv = ["nc-value", *[x for kv in base.items() for x in kv], "--json"]
    old_argv = [former.old if x == former.new else x for x in new_argv]
    code_new, out_new, err_new = run_main(new_argv, capsys)
    code_old, out_old, err_old = run_main(old_argv, capsys)
    assert code_new == code_old == 0 and out_old == out_new and err_new == ""
    assert err_old.splitlines() == [f"ncgeom nc-value: note: {former.old} is now spelled {former.new}; {former.old} "
                                    "is accepted until the next release"]
    parser = build_parser()
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction").choices[former.command]
    assert f"{former.old} " not in sub.format_help() and f"{former.new} " in sub.format_help()
    action = next(a for a in sub._actions if former.new in a.option_strings)
    assert former_spellings(action) == (former.old,)


def test_changelog_lists_every_former_spelling():
    text = (REPO / "CHANGELOG.md").read_text()
    section = text[text.index("### Option spellings"):]
    for former in FORMER_SPELLINGS:
        assert f"| `ncgeom {former.command}` | `{former.old}` | `{former.new}` |" in section


def test_every_subcommand_spells_a_concept_one_way():
    """No option string of one subcommand is a former spelling still live in another."""
    parser = build_parser()
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    old = {f.old for f in FORMER_SPELLINGS}
    for name, subparser in sub.choices.items():
        for action in subparser._actions:
            live = set(action.option_strings) - set(former_spellings(action))
            assert not live & old, f"ncgeom {name} still offers {live & old} as a current spelling"


@pytest.mark.parametrize("argv, fragment", [
    (["reproduce", "--scale", "huge", "--out", "x"], "argument --scale: invalid choice: 'huge'"),
    (["reproduce", "--scale", "quick", "--full", "--out", "x"], "not allowed with argument"),
    (["reproduce", "--scale", "full", "--quick", "--out", "x"], "not allowed with argument"),
    (["reproduce", "--quick", "--scale", "quick", "--out", "x"], "not allowed with argument"),
])
def test_reproduce_scale_bad_input_is_one_line_exit_2(argv, fragment, capsys, tmp_path, monkeypatch):
    from ncgeom.reproduce import pipeline

    monkeypatch.setattr(pipeline, "reproduce", lambda *a, **k: pytest.fail("ran despite bad input"))
    monkeypatch.chdir(tmp_path)
    code, out, err = run_main(argv, capsys)
    assert code == 2 and out == "" and len(err.splitlines()) == 1 and fragment in err
    assert not (tmp_path / "x").exists()  # refused before anything is written


def test_reproduce_scale_is_the_shorthands_spelled_out():
    parser = build_parser()
    for scale in ("tiny", "quick", "full"):
        long = parser.parse_args(["reproduce", "--scale", scale, "--out", "x"])
        short = parser.parse_args(["reproduce", f"--{scale}", "--out", "x"])
        assert long.scale == short.scale == scale
    assert parser.parse_args(["reproduce", "--out", "x"]).scale is None  # the handler's default: quick


# ---------------------------------------------------------------- a closed pipe


@pytest.mark.parametrize("argv", [
    ["nc-value", "--setting", "ucl", "--psi", "infonce", "--classes", "4", "--num-negatives", "2"],
    ["verify", "--quick", "--only", "harris"],
])
def test_a_closed_pipe_ends_quietly_with_141(argv):
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""),
           "PYTHONWARNINGS": "ignore"}
    proc = subprocess.Popen([sys.executable, "-m", "ncgeom.cli.main", *argv], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env, cwd=REPO)
    proc.stdout.close()  # the reader goes away before the command prints anything (`| head -0`)
    _, err = proc.communicate(timeout=120)
    progress = [line for line in err.decode().splitlines() if not line.startswith("  ")]  # verify's progress
    assert progress == [], progress  # no "error: Broken pipe", no "Exception ignored" at exit
    assert proc.returncode == EXIT_BROKEN_PIPE
