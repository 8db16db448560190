"""Evidence labels of the verify checks: required on every record, counted per kind, shown in report.md."""

import pytest

from ncgeom.atomic_io import atomic_write_json
from ncgeom.reproduce.report import render_report
from ncgeom.vocabulary import EVIDENCE
from proofs_check.records import CheckResult
from proofs_check.report import evidence_counts, evidence_summary, run_all


def _row(name, status, evidence):
    return CheckResult(name, "s", "m", status, {}, 0.0, "test", evidence=evidence)


def test_evidence_is_required_and_from_the_vocabulary():
    with pytest.raises(TypeError, match="evidence"):
        CheckResult("a", "s", "m", "pass")  # type: ignore[call-arg]
    with pytest.raises(ValueError, match="evidence must be one of"):
        _row("a", "pass", "proof")
    record = _row("a", "pass", "exact").to_dict()
    assert CheckResult.from_dict(record) == _row("a", "pass", "exact")
    old = {key: value for key, value in record.items() if key != "evidence"}  # written before the labels
    with pytest.raises(ValueError, match="missing key.*evidence"):
        CheckResult.from_dict(old)


def test_counts_are_passes_per_kind_and_self_tests_apart():
    rows = [_row("a", "pass", "exact"), _row("b", "fail", "exact"), _row("c", "pass", "numerical"),
            _row("d", "unresolved", "independent"), _row("e", "pass", "self-test"), _row("f", "fail", "self-test")]
    assert evidence_counts(rows) == {"exact": 1, "independent": 0, "numerical": 1, "self-test": 1}
    assert evidence_summary(rows) == ("evidence about the paper (passes): 1 exact, 0 independent, 1 numerical; "
                                      "self-tests of the checkers: 1 of 2 passed")


def test_report_md_verify_table_shows_evidence(tmp_path):
    rows = [_row("etf", "pass", "exact"), _row("search", "pass", "numerical"), _row("control", "pass", "self-test")]
    atomic_write_json(tmp_path / "verify" / "results.json", [r.to_dict() for r in rows])
    text = render_report(tmp_path)
    section = text.split("## Verification (proofs_check)", 1)[1].split("\n## ", 1)[0]
    assert ("Passes by kind of evidence: evidence about the paper (passes): 1 exact, 0 independent, 1 numerical; "
            "self-tests of the checkers: 1 of 1 passed.") in section
    assert "| check | status | evidence | method | seconds | source | key numbers |" in section
    assert "| etf | pass | exact | m |" in section and "| control | pass | self-test | m |" in section


# The label of every quick check of the modules owned here (hucl labels its own records).
_EXPECTED = {
    "etf_gram_symbolic": "exact", "etf_gram_exact": "exact", "etf_existence": "exact", "simplex_etf_gram": "independent",
    "negative_similarity_identity": "exact", "negative_similarity_bound": "exact", "psi_convex": "exact",
    "psi_monotone": "exact", "psi_implementation": "independent", "closed_form_binomial": "independent",
    "scl_closed_forms": "exact", "collision_probability_symbolic": "exact", "collision_probability": "independent",
    "nc_value": "independent", "instance_positive_example": "exact", "harris_inequality": "exact",
    "tilted_vs_plain": "exact", "tilted_gap_is_covariance": "exact", "tilted_equality_at_nc": "exact",
    "tilted_vs_plain_joint_eta": "exact", "harris_needs_product": "self-test", "tilted_needs_monotone_eta": "self-test",
    "jensen_step": "exact", "certificate": "numerical",
}


def test_every_quick_check_has_its_label():
    report = run_all(quick=True, modules=("symbolic", "harris", "jensen", "certificates"), with_provenance=False)
    assert report.passed, [r.name for r in report.checks if r.status != "pass"]
    got = {r.name: r.evidence for r in report.checks}
    for name, evidence in got.items():
        key = name.split("[")[0] if "[" in name else ("certificate" if name.startswith("certificate_") else name)
        assert _EXPECTED[key] == evidence, name
    assert set(report.evidence_counts) == set(EVIDENCE)
    assert report.evidence_counts["self-test"] == 2
