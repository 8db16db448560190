"""The hypothesis-ablation registry (proofs_check.ablations), the loss/normalization cases and ``verify --ablations``.

Every "fails" of proofs_check.ablations.losses is recomputed here by a path that shares no code with it: a
naive loop over the class pairs in exact Fractions (collapsed configurations), or ncgeom.population in float64
(finite models, the scaled ETF).
"""

import importlib.util
import itertools
import json
import math
import re
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from numpy.testing import assert_allclose

import proofs_check.ablations as registry
from ncgeom.atomic_io import dumps_json
from ncgeom.cli.main import main
from ncgeom.losses import custom_eta, custom_psi
from ncgeom.population import FiniteLatentModel, population_loss
from proofs_check.ablations import CASES, COVERAGE, GAPS, AblationResult, run_ablations
from proofs_check.ablations.losses import ablations as loss_ablations

ROOT = Path(__file__).resolve().parents[1]
# float64 exact enumerations of a handful of O(1) terms: relative error a few hundred eps at most
RTOL = 256 * np.finfo(np.float64).eps


@pytest.fixture(scope="module")
def records() -> list[AblationResult]:
    return loss_ablations(quick=True)


def _by(records, hypothesis_id, violation_word):
    found = [r for r in records if r.hypothesis_id == hypothesis_id and violation_word in r.violation]
    assert len(found) == 1, (hypothesis_id, violation_word, [r.violation for r in records])
    return found[0]


# ---------------------------------------------------------------- record


def test_record_round_trip_through_json(records):
    for r in records:
        back = AblationResult.from_dict(json.loads(dumps_json(r.to_dict(), indent=None)))
        assert back == r


@pytest.mark.parametrize("change, message", [
    ({"theorem": "4"}, "theorem"),
    ({"result": "passes"}, "result"),
    ({"evidence": "self-test"}, "evidence"),
    ({"evidence": "guess"}, "evidence"),
    ({"hypothesis": "balanced classes"}, "hypothesis"),
    ({"hypothesis": "3.1 balanced classes"}, "hypothesis"),  # number of another theorem
    ({"configuration": {}}, "configuration"),  # a "fails" must say what beats the conclusion
])
def test_record_validation(change, message):
    base = dict(theorem="2", hypothesis="2.1 balanced classes", violation="v", conclusion="c", result="fails",
                evidence="exact", configuration={"gram": [[1.0]]})
    AblationResult(**base)
    with pytest.raises(ValueError, match=message):
        AblationResult(**{**base, **change})


def test_from_dict_rejects_unknown_and_missing_keys(records):
    data = records[0].to_dict()
    with pytest.raises(ValueError, match="bogus"):
        AblationResult.from_dict({**data, "bogus": 1})
    with pytest.raises(ValueError, match="evidence"):
        AblationResult.from_dict({k: v for k, v in data.items() if k != "evidence"})


# ---------------------------------------------------------------- registry and coverage


def _theory_hypotheses() -> set[str]:
    """Ids "<theorem>.<n>" of the numbered lists: Theorem 1's "Assume:", Theorems 2-3's "Hypotheses"."""
    text = (ROOT / "docs/theory.md").read_text()
    ids = set()
    for theorem, opener in (("1", "Assume:"), ("2", "**Hypotheses"), ("3", "**Hypotheses")):
        section = text.split(f"### Theorem {theorem} (", 1)[1]
        lines = section.split(opener, 1)[1].splitlines()[1:]
        numbers = []
        for line in itertools.dropwhile(lambda s: not s.strip(), lines):
            match = re.match(r"^(\d+)\. ", line)
            if match:
                numbers.append(int(match.group(1)))
            elif not line.startswith("   ") or not line.strip():  # neither an item nor its continuation
                break
        assert numbers == list(range(1, len(numbers) + 1)) and len(numbers) >= 3, (theorem, numbers)
        ids |= {f"{theorem}.{n}" for n in numbers}
    return ids


def test_coverage_table_matches_theory_md():
    documented = _theory_hypotheses()
    assert {"1.1", "1.3", "2.7", "3.6"} <= documented and "1.4" not in documented
    assert set(COVERAGE) | set(GAPS) == documented
    assert not set(COVERAGE) & set(GAPS)
    assert all(cases and set(cases) <= set(CASES) for cases in COVERAGE.values())


def test_gaps_are_documented_in_results_md():
    text = (ROOT / "docs/results.md").read_text()
    section = text.split("## Hypothesis ablations", 1)[1].split("\n## ", 1)[0]
    for hypothesis_id in GAPS:
        assert f"hypothesis {hypothesis_id}" in section, hypothesis_id


@pytest.mark.parametrize("case", CASES)
def test_every_case_module_exists(case):
    # a missing case module is a defect of the registry (at run time `verify --ablations` reports it, exit 1)
    assert callable(registry.load_case(case).ablations)


def test_load_case_rejects_unknown_names():
    with pytest.raises(ValueError, match="case must be one of"):
        registry.load_case("bogus")
    with pytest.raises(ValueError, match="subset"):
        run_ablations(cases=("bogus",))


def test_registry_runs_quick_and_each_case_covers_what_it_claims():
    present = tuple(c for c in CASES if importlib.util.find_spec(f"proofs_check.ablations.{c}") is not None)
    assert "losses" in present
    errors: list = []
    for case in present:
        found = run_ablations(quick=True, cases=(case,), on_error=lambda c, e: errors.append((c, e)))
        claimed = {h for h, cases in COVERAGE.items() if case in cases}
        assert {r.hypothesis_id for r in found} >= claimed, case
        assert {r.hypothesis_id for r in found} <= set(COVERAGE), case
    assert errors == []


def test_run_ablations_raises_or_reports_a_missing_case(monkeypatch):
    def load(name):
        raise ModuleNotFoundError(f"No module named 'proofs_check.ablations.{name}'")

    monkeypatch.setattr(registry, "load_case", load)
    with pytest.raises(ModuleNotFoundError):
        run_ablations(cases=("imbalance",))
    errors: list = []
    assert run_ablations(cases=("imbalance",), on_error=lambda c, e: errors.append(c)) == []
    assert errors == ["imbalance"]


# ---------------------------------------------------------------- the loss / normalization cases, recomputed


def _fractions(matrix):
    return [[Fraction(x) for x in row] for row in matrix]


def _square(t):
    return sum((x + 1) ** 2 for x in t) / len(t)


def _cubic(t):
    return sum((x + 1) ** 3 for x in t) / len(t)


def _collapsed(means, setting, psi, eta=None):
    """Naive loop: one point per class at ``means`` (exact), label positives, k = 1, balanced classes."""
    c = len(means)
    gram = [[sum(a * b for a, b in zip(u, v)) for v in means] for u in means]
    total = Fraction(0)
    for a in range(c):
        negatives = [b for b in range(c) if setting == "ucl" or b != a]
        weight = {b: (eta(gram[a][b]) if eta else Fraction(1)) for b in negatives}
        z = sum(weight.values())
        total += sum(weight[b] / z * psi((gram[a][b] - gram[a][a],)) for b in negatives) / c
    return total


@pytest.mark.parametrize("hypothesis_id, word, psi", [("2.4", "^3", _cubic), ("3.4", "^3", _cubic),
                                                      ("2.4", "^2", _square), ("3.4", "^2", _square)])
def test_collapsed_psi_counterexamples_recomputed(records, hypothesis_id, word, psi):
    r = _by(records, hypothesis_id, word)
    assert r.result == "fails" and r.evidence == "exact"
    setting = r.values["setting"]
    means = _fractions(r.configuration["means"])
    ours = _collapsed(means, setting, psi)
    c = len(means)
    nc = psi((Fraction(-c, c - 1),)) if setting == "scl" else (psi((Fraction(0),)) + (c - 1) * psi((Fraction(-c, c - 1),))) / c
    assert Fraction(r.values["winner_exact"]) == ours and Fraction(r.values["nc_exact"]) == nc
    assert ours < nc and Fraction(r.values["gap_exact"]) == ours - nc
    assert_allclose(r.gap, float(ours - nc), rtol=RTOL)
    # the Gram saved is the Gram of the means; hypothesis 3 (d >= C - 1) holds there
    assert _fractions(r.configuration["gram"]) == [[sum(a * b for a, b in zip(u, v)) for v in means] for u in means]
    assert r.values["d"] >= c - 1


def test_nonconvex_search_finds_no_worse_than_the_certificate(records):
    r = _by(records, "2.4", "^3")
    for row in r.details["search"]:
        assert row["best"] <= row["nc"]
        gram = np.asarray(row["best_gram"])
        off = gram[~np.eye(row["C"], dtype=bool)]
        assert_allclose(np.mean(off**3), row["best"], atol=1e-9)  # the Gram is rounded to 12 digits
    c3 = next(row for row in r.details["search"] if row["C"] == 3)
    assert c3["best"] <= r.values["winner"] + 1e-9


def test_decreasing_eta_theorem2_recomputed(records):
    r = _by(records, "2.5", "decreasing")
    means = _fractions(r.configuration["means"])
    eta = lambda s: Fraction(1) if s < Fraction(-1, 2) else Fraction(1, 10)  # noqa: E731
    hinge = lambda t: sum(max(Fraction(0), x + 3) for x in t) / len(t)  # noqa: E731
    ours = _collapsed(means, "scl", hinge, eta)
    assert Fraction(r.values["winner_exact"]) == ours == Fraction(46, 33)  # hand: 3 - 53/33 (module docstring)
    assert Fraction(r.values["nc_exact"]) == hinge((Fraction(-3, 2),)) and ours < Fraction(3, 2)


@pytest.mark.parametrize("hypothesis_id", ["1.1", "1.2"])
def test_theorem1_counterexamples_recomputed_with_population(records, hypothesis_id):
    r = _by(records, hypothesis_id, "")
    assert r.result == "fails" and r.evidence == "exact" and r.values["num_negatives"] == 1
    points = np.array([[float(Fraction(x)) for x in p] for p in r.configuration["points"]])
    labels = r.configuration["labels"]
    mass = [Fraction(m) for m in r.configuration["masses"]]  # the prior is the mass of each class's points
    prior = [float(sum(m for m, y in zip(mass, labels) if y == c)) for c in (0, 1)]
    model = FiniteLatentModel([points[[i for i, y in enumerate(labels) if y == c]] for c in (0, 1)], prior=prior)
    if hypothesis_id == "1.1":
        psi = custom_psi(lambda t: np.mean((t + 1) ** 2, axis=-1), name="square")
        eta = custom_eta(lambda s: 1.0 + (np.asarray(s) >= 0))
    else:
        psi = custom_psi(lambda t: np.mean(np.maximum(0.0, t + 3), axis=-1), name="hinge3")
        eta = custom_eta(lambda s: 1.0 - 0.5 * (np.asarray(s) >= 0))
    scl = population_loss(model, "scl", psi, num_negatives=1, method="exact").value
    hscl = population_loss(model, "hscl", psi, num_negatives=1, eta=eta, method="exact").value
    assert_allclose([scl, hscl], [r.values["scl"], r.values["hscl"]], rtol=RTOL)
    assert hscl < scl


@pytest.mark.parametrize("hypothesis_id", ["2.2", "3.2"])
def test_scaled_etf_recomputed_with_population(records, hypothesis_id):
    r = _by(records, hypothesis_id, "norm")
    setting, c, norm = r.values["setting"], r.values["C"], r.configuration["norm"]
    means = np.asarray(r.configuration["means"])
    assert_allclose(np.linalg.norm(means, axis=1), norm, rtol=RTOL)
    assert_allclose(means @ means.T, np.asarray(_fractions(r.configuration["gram"]), dtype=float), atol=8 * RTOL)
    values = [population_loss(FiniteLatentModel([m[None, :] for m in z]), setting, "infonce", num_negatives=1,
                              method="exact").value for z in (means, means / norm)]
    assert_allclose(values, [r.values["winner"], r.values["nc"]], rtol=RTOL)
    closed = math.log1p(math.exp(-norm**2 * c / (c - 1)))  # section 5 closed form, SCL
    if setting == "ucl":
        closed = math.log(2) / c + (c - 1) / c * closed
    assert_allclose(values[0], closed, rtol=RTOL)
    assert r.result == "fails" and r.gap < 0 and float(r.details["gap_enclosure"][1]) < 0 and r.details["by_C"][0]["gap_negative"]


# ---------------------------------------------------------------- CLI


def test_cli_ablations_json_shape(monkeypatch, capsys):
    assert main(["verify", "--ablations", "--json", "--only", "losses"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert set(data) == {"ablations", "errors"} and data["errors"] == []
    for record in data["ablations"]:
        assert {"theorem", "hypothesis", "violation", "result", "evidence", "gap", "configuration"} <= set(record)
        AblationResult.from_dict(record)
    assert all(record["result"] == "fails" for record in data["ablations"])


def test_cli_ablations_error_exits_1(monkeypatch, capsys):
    def load(name):
        if name != "losses":
            raise ModuleNotFoundError(f"No module named 'proofs_check.ablations.{name}'")
        return importlib.import_module("proofs_check.ablations.losses")

    monkeypatch.setattr(registry, "load_case", load)
    assert main(["verify", "--ablations"]) == 1
    out = capsys.readouterr().out
    assert "fails" in out and "ERROR: proofs_check.ablations.imbalance" in out


def test_cli_full_needs_ablations(capsys):
    assert main(["verify", "--full"]) == 2
    assert main(["verify", "--ablations", "--only", "harris"]) == 2  # a checker module, not a case
    assert main(["verify", "--ablations", "--quick"]) == 2
