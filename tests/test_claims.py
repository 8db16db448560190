"""ncgeom.experiments.claims: every claim has a spec; evaluations turn summaries into honest verdicts.

The evaluations are tested on hand-built summaries, including false statements that must fail
(a check that cannot fail is a defect); the real sweeps run in the slow test and in docs/results.md.
"""

import time

import pytest

import ncgeom.experiments.claims as claims
import ncgeom.experiments.evaluations as evaluations
from ncgeom.atomic_io import read_json
from ncgeom.experiments import Config, EpochRecord, RunSummary, evaluate_claim, expand
from ncgeom.experiments.claims import CLAIMS, ClaimRecord, ClaimResult, claim_spec, run_claims
from ncgeom.vocabulary import Verdict

ETF_NC, ETF_FAR = 0.01, 0.5


def fake(*, etf=ETF_NC, within=0.01, rel_gap=0.0, spectrum=(1.0, 0.9), status="completed", initial_etf=0.7,
         acc=None, norm0=1.0, norm1=1.0, nc_value=0.3, **config):
    """A RunSummary as run() writes it, with the final metrics given (the others absent)."""
    loss = nc_value * (1 + rel_gap)
    final = EpochRecord(10, loss, nc_value, loss - nc_value, test_ncc_accuracy=acc, mean_norm=norm1,
                        metrics={"etf_distance": etf, "within_class": within, "spectrum": list(spectrum), "rankme": 5.0})
    initial = EpochRecord(0, None, nc_value, None, mean_norm=norm0, metrics={"etf_distance": initial_etf})
    return RunSummary(status=status, message="", final=final, initial=initial, nc_value=nc_value,
                      nc_value_source="test", epochs_run=10, wall_time_s=0.0, config=Config(**config))


def overall(records):
    return [r for r in records if r.setting == "overall"][0].verdict


@pytest.mark.parametrize("module", [claims, evaluations])
def test_all_exports_exist_once(module):
    assert len(module.__all__) == len(set(module.__all__))
    for name in module.__all__:
        assert hasattr(module, name), name


def test_records_markdown_table():
    text = claims.records_markdown(evaluate_claim("1", [fake(setting="scl")]))
    lines = text.strip().splitlines()
    assert lines[0].startswith("| claim | setting |") and len(lines) == 4 and "**holds**" in lines[-1]


@pytest.mark.parametrize("claim_id", sorted(CLAIMS))
def test_every_claim_has_a_spec_with_quick_and_full_scales(claim_id):
    spec = claim_spec(claim_id)
    assert spec.shipped and spec.name == CLAIMS[claim_id].spec
    assert spec.claim == claim_id
    quick, full = expand(spec, scale="quick"), expand(spec, scale="full")
    assert 1 <= len(quick) <= 12 and len(full) >= len(quick)


def test_claim1_verdicts():
    runs = [fake(setting="scl"), fake(setting="hscl", beta=5.0)]
    assert overall(evaluate_claim("1", runs)) == "holds"
    assert overall(evaluate_claim("1", runs + [fake(setting="hscl", beta=30.0, etf=ETF_FAR)])) == "partially holds"
    assert overall(evaluate_claim("1", [fake(etf=ETF_FAR), fake(rel_gap=0.05)])) == "does not hold"


def test_claim2_verdicts():
    good = [fake(setting="ucl", positives="label", model="mlp"),
            fake(setting="ucl", positives="noise", model="mlp", within=0.6, etf=0.3)]
    assert overall(evaluate_claim("2", good)) == "holds"
    bad = [fake(setting="ucl", positives="label", model="mlp", etf=ETF_FAR),
           fake(setting="ucl", positives="noise", model="mlp")]
    assert overall(evaluate_claim("2", bad)) == "does not hold"


def test_claim3_trend_must_grow():
    grows = [fake(setting="hucl", beta=b, etf=e) for b, e in [(0.0, 0.01), (1.0, 0.2), (5.0, 0.5), (10.0, 0.7)]]
    assert overall(evaluate_claim("3", grows)) == "holds"
    shrinks = [fake(setting="hucl", beta=b, etf=e) for b, e in [(0.0, 0.7), (1.0, 0.5), (5.0, 0.2), (10.0, 0.01)]]
    assert overall(evaluate_claim("3", shrinks)) != "holds"


def test_claim4_dc_threshold():
    dc = [fake(norm="none", spectrum=(1.0, 1e-3), norm1=3.0), fake(norm="sphere", spectrum=(1.0, 0.95))]
    assert overall(evaluate_claim("4", dc)) == "holds"
    assert overall(evaluate_claim("4", [fake(norm="none", spectrum=(1.0, 0.5))])) == "does not hold"


def test_claim5_needs_forty_points():
    base = [fake(setting="scl", acc=0.10), fake(setting="ucl", acc=0.12)]
    assert overall(evaluate_claim("5", base + [fake(setting="hscl", beta=5.0, acc=0.60)])) == "holds"
    assert overall(evaluate_claim("5", base + [fake(setting="hscl", beta=5.0, acc=0.20)])) == "does not hold"


def test_claim6_supervised_and_unsupervised():
    sup = [fake(setting="hscl", beta=b, etf=e) for b, e in [(0.0, 0.4), (1.0, 0.2), (5.0, 0.05), (10.0, 0.02)]]
    uns = [fake(setting="hucl", beta=b, etf=e, spectrum=(1.0, s))
           for b, e, s in [(0.0, 0.4, 0.5), (1.0, 0.3, 0.5), (5.0, 0.1, 0.5), (10.0, 0.3, 0.1), (30.0, 0.6, 0.01)]]
    assert overall(evaluate_claim("6", sup + uns)) == "holds"
    flat = [fake(setting="hscl", beta=b, etf=e) for b, e in [(0.0, 0.02), (1.0, 0.2), (5.0, 0.4)]]
    assert overall(evaluate_claim("6", flat)) == "does not hold"


def test_claim7_drift_needs_dc():
    stay = fake(setting="scl", initial_etf=0.01, etf=0.01)
    drift = fake(setting="hucl", beta=10.0, initial_etf=0.01, etf=0.4, spectrum=(1.0, 1e-3))
    assert overall(evaluate_claim("7", [stay, drift])) == "holds"
    no_drift = fake(setting="hucl", beta=10.0, initial_etf=0.01, etf=0.01)
    assert overall(evaluate_claim("7", [stay, no_drift])) == "partially holds"


def test_claim8_batch_32_must_hinder():
    runs = [fake(batch_size=b, classes=20) for b in (64, 128)]
    assert overall(evaluate_claim("8", runs + [fake(batch_size=32, classes=20, etf=ETF_FAR)])) == "holds"
    assert overall(evaluate_claim("8", runs + [fake(batch_size=32, classes=20)])) == "partially holds"


def test_diverged_or_missing_runs_are_inconclusive():
    recs = evaluate_claim("1", [fake(), fake(status="diverged")])
    assert recs[-1].verdict == "inconclusive"
    assert evaluate_claim("1", [])[0].verdict == "inconclusive"
    for r in recs:
        assert r.verdict is None or isinstance(r.verdict, Verdict)
    with pytest.raises(ValueError, match="claim_id"):
        evaluate_claim("9", [])


@pytest.mark.slow
def test_quick_scale_claim_sweeps_under_five_minutes(tmp_path):
    start = time.perf_counter()
    results = run_claims(tmp_path, scale="quick", workers=2)
    elapsed = time.perf_counter() - start
    assert elapsed < 300, elapsed
    assert [r.claim for r in results] == list(CLAIMS)
    assert not [r for r in results if r.overall == Verdict.INCONCLUSIVE]


def test_missing_metrics_are_inconclusive_not_expected_failures_to_reach_nc():
    # a run whose metrics are missing must not count as "not NC" (that would make claims 2, 3, 8 hold)
    noise = fake(setting="ucl", positives="noise", model="mlp", etf=None, within=None)
    recs = evaluate_claim("2", [noise])
    assert recs[0].verdict == "inconclusive" and overall(recs) == "inconclusive"
    assert overall(evaluate_claim("8", [fake(batch_size=32, classes=20, etf=None)])) == "inconclusive"
    assert overall(evaluate_claim("4", [fake(norm="none", spectrum=())])) == "inconclusive"
    assert overall(evaluate_claim("1", [fake(setting="scl"), fake(setting="scl", etf=None)])) == "holds"


def test_claim5_pairs_each_hard_setting_with_its_baseline_and_averages_seeds():
    runs = [fake(setting="scl", acc=0.10), fake(setting="ucl", acc=0.55, seed=0), fake(setting="ucl", acc=0.05, seed=1),
            fake(setting="hscl", beta=5.0, acc=0.60),
            fake(setting="hucl", beta=5.0, acc=0.74, seed=0), fake(setting="hucl", beta=5.0, acc=0.70, seed=1)]
    # HSCL +0.50 over SCL; HUCL mean 0.72 vs UCL mean 0.30: +0.42 (a max over both baselines: +0.17)
    assert overall(evaluate_claim("5", runs)) == "holds"
    assert overall(evaluate_claim("5", runs[:3] + runs[4:])) == "holds"  # HUCL alone
    assert overall(evaluate_claim("5", [fake(setting="scl", acc=0.10), fake(setting="hucl", beta=5.0, acc=0.9)])) == "inconclusive"


def test_claim6_unsupervised_averages_seeds_per_beta():
    rows = [(0.0, 0.4, 0.5), (1.0, 0.3, 0.5), (5.0, 0.1, 0.5), (10.0, 0.3, 0.1), (30.0, 0.6, 0.01)]
    # seed spread 0.2 above beta 5: single runs are not monotone in beta (0.5 at beta 10 > 0.4 at beta 30)
    uns = [fake(setting="hucl", beta=b, etf=e + d * (10 if b >= 10 else 1), spectrum=(1.0, s), seed=k)
           for b, e, s in rows for k, d in enumerate((-0.02, 0.02))]
    recs = evaluate_claim("6", uns)
    assert [r.verdict for r in recs if r.setting.startswith("unsupervised")] == ["holds"]


def test_claim_record_round_trip_and_strict_keys():
    row = ClaimRecord("1", "overall", "-", "NC", "2/2 at NC", "holds")
    assert row.verdict is Verdict.HOLDS and ClaimRecord.from_dict(row.to_dict()) == row
    with pytest.raises(ValueError):
        ClaimRecord("1", "overall", "-", "NC", "x", "holds mostly")  # not a verdict
    with pytest.raises(ValueError, match="expected exactly the keys"):
        ClaimRecord.from_dict({**row.to_dict(), "claim_id": "1"})
    with pytest.raises(ValueError, match="expected exactly the keys"):
        ClaimResult.from_dict({"claim": "1", "rows": []})


def test_run_claims_writes_claim_files_and_resumes(tmp_path, capsys):
    first = run_claims(tmp_path, claim_ids=["8"], scale="tiny", progress=True)
    assert [r.claim for r in first] == ["8"] and first[0].complete and first[0].runs == 2
    err = capsys.readouterr().err  # the progress bar: runs done / total, on stderr
    assert "claims (tiny)" in err and "2/2" in err
    saved = ClaimResult.load(tmp_path, "8")
    assert saved == first[0] and saved.overall in set(Verdict)
    stamp = ClaimResult.path(tmp_path, "8").stat().st_mtime_ns
    assert run_claims(tmp_path, claim_ids=["8"], scale="tiny", progress=False) == first  # complete: skipped
    assert ClaimResult.path(tmp_path, "8").stat().st_mtime_ns == stamp
    with pytest.raises(ValueError, match="claim_id"):
        run_claims(tmp_path, claim_ids=["9"])


@pytest.mark.parametrize("engine", ["batched", "sequential"])
def test_run_claims_passes_the_engine_to_each_sweep(tmp_path, engine):
    [result] = run_claims(tmp_path, claim_ids=["8"], scale="tiny", engine=engine, progress=False)
    assert result.complete and result.runs == 2
    sweep_json = read_json(tmp_path / "sweeps" / claim_spec("8").name / "sweep.json")
    assert sweep_json["engine"] == engine
