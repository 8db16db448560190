"""Ablation of i.i.d. negatives (proofs_check.ablations.negatives; docs/theory.md, section 4, hypotheses 1.3, 2.6, 3.6).

Every record's claim is recomputed here by a path that shares no code with the module: a naive exact loop over
the ordered k-tuples (Theorem 1 models, Fractions), ncgeom.population at rho = 0, a Monte Carlo estimate of the
same-class loss, and the closed forms at NC.
"""

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
import torch
from numpy.testing import assert_allclose

from ncgeom.geometry import simplex_etf
from ncgeom.losses.psi import make_psi
from ncgeom.population import FiniteLatentModel, population_loss
from ncgeom.vocabulary import PsiName, Setting
from proofs_check.ablations import COVERAGE, GAPS
from proofs_check.ablations import negatives as neg
from proofs_check.harris import FiniteModel, model_loss, step_eta

# float64 expectations over <= 8 x 2 x 512 terms of size O(1): rounding ~1e-15, a few hundred eps of agreement
AGREE = 256 * np.finfo(np.float64).eps
F = Fraction


@pytest.fixture(scope="module")
def records():
    return neg.ablations(quick=True)


def _records(records, hypothesis_id, family):
    return [r for r in records if r.hypothesis_id == hypothesis_id and f"rho {family}" in r.violation]


# ---------------------------------------------------------------- registry


def test_registry_moves_the_iid_hypotheses_to_coverage():
    assert "negatives" in neg.__name__ and all(COVERAGE[h] == ("negatives",) for h in ("1.3", "2.6", "3.6"))
    assert set(GAPS) == {"2.7"}


def test_rho_outside_the_unit_interval_raises_naming_rho():
    model = FiniteLatentModel([[[1.0, 0.0]], [[0.0, 1.0]]])
    for bad in (-0.1, 1.5, float("nan")):
        with pytest.raises(ValueError, match="rho"):
            neg.tuple_law({0: F(1, 2), 1: F(1, 2)}, num_negatives=2, family="copies", rho=bad)
        with pytest.raises(ValueError, match="rho"):
            neg.correlated_population_loss(model, "scl", num_negatives=2, family="same-class", rho=bad)
        with pytest.raises(ValueError, match="rho"):
            neg.law_tables(3, 1, 2, "scl", "copies", bad)
    with pytest.raises(ValueError, match="family"):
        neg.tuple_law({0: F(1)}, num_negatives=2, family="bogus", rho=0)
    with pytest.raises(ValueError, match="num_negatives = 2"):
        neg.tuple_law({0: F(1, 2), 1: F(1, 2)}, num_negatives=3, family="antithetic", rho=1, similarities={0: F(0), 1: F(1)})
    with pytest.raises(ValueError, match="equal masses"):
        neg.tuple_law({0: F(1, 3), 1: F(2, 3)}, num_negatives=2, family="without-replacement", rho=1)


# ---------------------------------------------------------------- Theorem 1: the exact models, recomputed naively

# psi and eta of each failing record, written out here (and their text checked against the record)
_PSI = {"max(0, max_i t_i - 1)": lambda t: max(F(0), max(t) - 1), "max(0, max_i t_i)": lambda t: max(F(0), max(t)),
        "max(0, max_i t_i + 1)": lambda t: max(F(0), max(t) + 1),
        "(1/2) sum_i max(0, t_i + 1)": lambda t: sum(max(F(0), x + 1) for x in t) / len(t),
        "(1/2) sum_i max(0, t_i + 3/2)": lambda t: sum(max(F(0), x + F(3, 2)) for x in t) / len(t)}


def _eta(text):
    height, knot = text.split(" [s >= ")
    height, knot = F(height.split("1 + ")[1]), F(knot.rstrip("]"))
    return lambda s: 1 + (height if s >= knot else 0)


def _naive_loss(points, labels, setting, psi, eta, k, family, rho):
    """Uniform masses; label positives; the k-tuple law written from the module docstring's definitions."""
    n = len(points)
    total = F(0)
    for x in range(n):
        eligible = [j for j in range(n) if setting == "ucl" or labels[j] != labels[x]]
        size = len(eligible)
        ranked = sorted(eligible, key=lambda j: (points[x] * points[j], j))
        weights = {}
        for t in itertools.product(eligible, repeat=k):
            if family == "same-class":
                cls = {labels[j] for j in t}
                members = sum(labels[j] == labels[t[0]] for j in eligible)
                corr = F(members, size) * F(1, members) ** k if len(cls) == 1 else F(0)
            elif family == "without-replacement":
                corr = F(1, math.perm(size, k)) if len(set(t)) == k else F(0)
            else:  # antithetic: rank i with rank size - 1 - i
                corr = F(1, size) if ranked.index(t[0]) + ranked.index(t[1]) == size - 1 else F(0)
            law = (1 - rho) * F(1, size) ** k + rho * corr
            h = F(1)
            for j in t:
                h *= eta(points[x] * points[j]) if eta else 1
            weights[t] = law * h
        z = sum(weights.values())
        own = [j for j in range(n) if labels[j] == labels[x]]
        for t, w in weights.items():
            for p in own:
                total += F(1, n) * F(1, len(own)) * w / z * psi(tuple(points[x] * points[j] - points[x] * points[p]
                                                                      for j in t))
    return total


@pytest.mark.parametrize("family", ["same-class", "without-replacement", "antithetic"])
def test_theorem1_counterexamples_recomputed_exactly(records, family):
    (r,) = _records(records, "1.3", family)
    assert r.result == "fails" and r.evidence == "exact"
    for m in r.details["models"]:
        points, labels, k, rho = [F(p) for p in m["points"]], m["labels"], m["k"], F(m["rho"])
        psi, eta = _PSI[m["psi"]], _eta(m["eta"])
        plain = _naive_loss(points, labels, m["setting"], psi, None, k, family, rho)
        hard = _naive_loss(points, labels, m["setting"], psi, eta, k, family, rho)
        assert (str(plain), str(hard)) == (m["plain"], m["hard"]) and hard < plain
        assert all(abs(p) <= 1 for p in points)  # the unit ball of R^1
        # the rho = 0 control is Theorem 1 itself: the i.i.d. law, where harris.model_loss agrees and the gap is >= 0
        model = FiniteModel(tuple(tuple(a * b for b in points) for a in points), tuple(labels))
        iid = [_naive_loss(points, labels, m["setting"], psi, e, k, family, F(0)) for e in (None, eta)]
        assert iid == [model_loss(model, m["setting"], psi, num_negatives=k, eta=e) for e in (None, eta)]
        assert iid[1] - iid[0] == F(m["gap_at_rho_0"]) >= 0
        # the gap is negative right of the last root (up to rho = 1) and not below it
        (left, right), = m["negative_on"]
        lo, hi = (F(x) for x in left)
        assert hi - lo <= F(1, 10**12) and right == "1"
        for inside, sign in (((hi + 1) / 2, -1), (lo / 2, 1)):
            gap = (_naive_loss(points, labels, m["setting"], psi, eta, k, family, inside)
                   - _naive_loss(points, labels, m["setting"], psi, None, k, family, inside))
            assert gap * sign > 0, (inside, gap)
    first = r.details["models"][0]
    assert r.values["gap_exact"] == str(F(first["hard"]) - F(first["plain"]))
    assert r.configuration["points"] == [[p] for p in first["points"]]


def test_the_counterexamples_are_minimal_in_points():
    """An exchangeable law cannot fail with <= 2 similarity values per anchor: every UCL model of 2 points and SCL
    model of 3 points on a grid of R^1 has L_hard >= L_plain for each family (k = 2, the psi and eta above)."""
    grid = [F(-1), F(-1, 2), F(0), F(1)]
    etas = [_eta("1 + 3 [s >= 0]"), _eta("1 + 3 [s >= -1/2]")]
    psis = [_PSI[name] for name in ("max(0, max_i t_i - 1)", "max(0, max_i t_i)", "(1/2) sum_i max(0, t_i + 1)")]
    for setting, n, labels in (("ucl", 2, (0, 1)), ("ucl", 2, (0, 0)), ("scl", 3, (0, 0, 1)), ("scl", 3, (0, 1, 2))):
        for points in itertools.product(grid, repeat=n):
            for family, psi, eta in itertools.product(("same-class", "antithetic"), psis, etas):
                if len(set(labels)) < 2 and setting == "ucl" and family == "same-class":
                    continue
                gap = (_naive_loss(list(points), labels, setting, psi, eta, 2, family, F(1))
                       - _naive_loss(list(points), labels, setting, psi, None, 2, family, F(1)))
                assert gap >= 0, (setting, points, labels, family)


def test_association_check_fails_for_antithetic_and_passes_for_iid_and_copies():
    # the checker can fail: the countermonotone pair on 3 ranks; its witness's covariance recomputed directly
    law = neg.sorted_rank_law([F(1, 3)] * 3, num_negatives=2, family="antithetic", rho=1)
    low, (u, v) = neg.association_defect(law, 3, 2)
    p = {tuple(e): law.get(tuple(e), F(0)) for e in itertools.combinations_with_replacement(range(3), 2)}
    pu, pv = (sum(p[tuple(e)] for e in s) for s in (u, v))
    assert low < 0 and sum(p[tuple(e)] for e in u if e in v) - pu * pv == low
    # i.i.d. (rho = 0, Harris) and copies pass
    for family, rho in (("same-class", 0), ("copies", F(1, 2)), ("copies", 1), ("without-replacement", 1)):
        law = neg.sorted_rank_law([F(1, 4)] * 4, num_negatives=3, family=family, rho=rho, classes=[0, 1, 0, 1])
        assert neg.association_defect(law, 4, 3)[0] >= 0
    # 2^n up-sets of sorted pairs of {0..n-1} (lattice paths), a known count
    assert [len(neg.upsets(n, 2)[1]) for n in (2, 3, 4, 5)] == [4, 8, 16, 32]


def test_theorem1_copies_record_holds_on_every_instance(records):
    (r,) = _records(records, "1.3", "copies")
    assert r.result == "holds" and r.evidence == "exact" and r.configuration == {}
    assert all(F(row["min_cov"]) >= 0 for row in r.details["rows"]) and len(r.details["rows"]) >= 12


# ---------------------------------------------------------------- population losses with correlated negatives


def _random_model(rng, num_classes=3, per_class=2):
    z = rng.standard_normal((num_classes * per_class, num_classes - 1))
    z /= np.linalg.norm(z, axis=1, keepdims=True)
    return FiniteLatentModel(np.split(z, num_classes)), z


@pytest.mark.parametrize("setting, beta", [("scl", 0.0), ("hscl", 1.0), ("ucl", 0.0), ("hucl", 2.0)])
@pytest.mark.parametrize("psi", ["infonce", "triplet"])
def test_rho_0_is_the_population_loss(setting, beta, psi):
    model, _ = _random_model(np.random.default_rng(0))
    expected = population_loss(model, setting, psi, num_negatives=2, eta=beta, method="exact").value
    for family in neg.SEARCH_FAMILIES:
        value = neg.correlated_population_loss(model, setting, psi, num_negatives=2, family=family, rho=0.0, beta=beta)
        assert_allclose(value, expected, rtol=AGREE)


@pytest.mark.parametrize("setting, beta", [("scl", 0.0), ("hscl", 1.0), ("ucl", 0.0)])
def test_same_class_loss_matches_monte_carlo(setting, beta):
    """Draw (positive, class once, k i.i.d. negatives in it) per anchor; the hard law by self-normalized weights."""
    rng = np.random.default_rng(1)
    model, z = _random_model(rng)
    y, k, rho, draws = model.labels, 2, 0.8, 200_000
    psi = make_psi("infonce")
    exact = neg.correlated_population_loss(model, setting, psi, num_negatives=k, family="same-class", rho=rho,
                                           beta=beta)
    estimates, variances = [], []
    for x in range(len(y)):
        eligible = np.flatnonzero((y != y[x]) | (setting == "ucl"))
        pos = rng.choice(np.flatnonzero(y == y[x]), size=draws)
        iid_draws = rng.choice(eligible, size=(draws, k))
        cls = rng.choice(np.unique(y[eligible]), size=draws)  # balanced classes: pi(c' | x) uniform
        within = cls[:, None] * 2 + rng.integers(0, 2, size=(draws, k))  # 2 points per class, point c * 2 + j
        neg_idx = np.where((rng.random(draws) < rho)[:, None], within, iid_draws)
        s = np.einsum("d,nkd->nk", z[x], z[neg_idx])  # [draws, k] similarities to the anchor
        values = np.asarray(psi(s - (z[pos] @ z[x])[:, None]))
        w = np.exp(beta * s.sum(axis=1)) if setting == "hscl" else np.ones(draws)
        mean = (w * values).sum() / w.sum()
        estimates.append(mean)
        variances.append(np.sum((w / w.sum()) ** 2 * (values - mean) ** 2))  # delta-method variance of the ratio
    stderr = math.sqrt(sum(variances)) / len(y)
    assert abs(np.mean(estimates) - exact) <= 5 * stderr, (np.mean(estimates), exact, stderr)  # 5 sigma: p < 1e-6
    # the estimate separates the same-class law from the i.i.d. one (the test can fail)
    iid = neg.correlated_population_loss(model, setting, psi, num_negatives=k, family="same-class", rho=0.0, beta=beta)
    assert abs(np.mean(estimates) - iid) > 5 * stderr, (np.mean(estimates), iid, stderr)


@pytest.mark.parametrize("family", neg.SEARCH_FAMILIES)
@pytest.mark.parametrize("setting, beta", [("scl", 0.0), ("hscl", 3.0), ("ucl", 0.0)])
def test_batched_loss_matches_the_reference(family, setting, beta):
    rng = np.random.default_rng(2)
    for c, m, k in ((3, 1, 2), (3, 2, 3), (4, 2, 2)):
        model, z = _random_model(rng, c, m)
        cases: tuple[tuple[PsiName, float], ...] = (("infonce", 0.7), ("triplet", 1.0))
        for psi_name, rho in cases:
            tables = neg.law_tables(c, m, k, setting, family, rho)
            assert_allclose(tables[1].sum(axis=1), 1.0, rtol=AGREE)
            value = float(neg.batched_loss(torch.as_tensor(z)[None], tables, per_class=m, psi=make_psi(psi_name),
                                           beta=beta if setting == "hscl" else 0.0)[0])
            expected = neg.correlated_population_loss(model, setting, psi_name, num_negatives=k, family=family,
                                                      rho=rho, beta=beta)
            assert_allclose(value, expected, rtol=AGREE)


def _nc_closed_form(setting, family, c, m, k, psi):
    """L(NC): t = -C/(C-1) for every other-class negative, 0 for a collision (UCL)."""
    a = -c / (c - 1)
    if setting != "ucl":
        return psi(np.full(k, a))
    if family in ("same-class", "copies"):  # all k negatives collide or none does
        return psi(np.zeros(k)) / c + (1 - 1 / c) * psi(np.full(k, a))
    # without replacement from the C m points: j of the k negatives in the anchor's class (hypergeometric)
    n = c * m
    return sum(math.comb(m, j) * math.comb(n - m, k - j) / math.comb(n, k)
               * psi(np.array([0.0] * j + [a] * (k - j))) for j in range(min(m, k) + 1))


@pytest.mark.parametrize("family", neg.SEARCH_FAMILIES)
def test_nc_values_match_the_closed_form(family):
    cases: tuple[tuple[Setting, int, int, int], ...] = (("scl", 3, 1, 2), ("hscl", 4, 2, 3), ("ucl", 3, 2, 3),
                                                        ("ucl", 4, 1, 2))
    for setting, c, m, k in cases:
        psi = make_psi("infonce")
        etf = np.repeat(simplex_etf(c, c - 1), m, axis=0)
        value = neg.correlated_population_loss(FiniteLatentModel(np.split(etf, c)), setting, psi, num_negatives=k,
                                               family=family, rho=1.0, beta=5.0)
        assert_allclose(value, float(_nc_closed_form(setting, family, c, m, k, psi)), rtol=AGREE)


# ---------------------------------------------------------------- Theorems 2 and 3: the search records, recomputed


@pytest.mark.parametrize("hypothesis_id", ["2.6", "3.6"])
def test_search_records_hold_and_are_recomputed(records, hypothesis_id):
    found = [r for r in records if r.hypothesis_id == hypothesis_id]
    assert len(found) == (6 if hypothesis_id == "2.6" else 3)
    for r in found:
        assert r.result == "holds" and r.evidence == "numerical" and r.gap >= -neg.VALUE_TOL
        setting: Setting = "ucl" if hypothesis_id == "3.6" else ("hscl" if "tilted" in r.violation else "scl")
        family = r.violation.split("rho ")[1].split(",")[0].split(";")[0]
        v = r.values
        # the configuration closest to beating NC, recomputed from the definition, is not below NC
        points = np.asarray(r.details["closest_points"])
        model = FiniteLatentModel(np.split(points, v["C"]))
        best = neg.correlated_population_loss(model, setting, v["psi"], num_negatives=v["k"], family=family,
                                              rho=v["rho"], beta=v["beta"])
        assert_allclose([best, r.details["recomputed"]["best"]], v["best"], rtol=AGREE)
        nc = float(_nc_closed_form(setting, family, v["C"], v["per_class"], v["k"], make_psi(v["psi"])))
        assert_allclose(v["nc"], nc, rtol=AGREE)
        assert best >= nc - neg.VALUE_TOL
        for row in r.details["rows"]:
            assert row["best_minus_nc"] >= -neg.VALUE_TOL and row["starts"] == r.details["coverage"]["starts_per_run"]
        # rho = 0 control: the i.i.d. law, where Theorems 2-3 hold; NC's value is the population code's
        control = r.details["control_rho_0"]
        etf = simplex_etf(3, 2)
        expected = population_loss(FiniteLatentModel([[row] for row in etf]), setting, "infonce", num_negatives=2,
                                   eta=control["beta"], method="exact").value
        assert_allclose(control["nc"], expected, rtol=AGREE)
        assert control["best_minus_nc"] >= -neg.VALUE_TOL and control["rho"] == 0.0


# ---------------------------------------------------------------- without replacement, definition 2 (successive sampling)


def test_successive_law_is_torch_multinomial_without_replacement():
    weights = {0: F(1), 1: F(2), 2: F(3), 3: F(4)}
    law = neg.successive_law(weights, num_negatives=2)
    assert sum(law.values()) == 1
    generator = torch.Generator().manual_seed(0)
    draws = torch.multinomial(torch.tensor([1.0, 2.0, 3.0, 4.0]).expand(200_000, 4), 2, replacement=False,
                              generator=generator)
    pairs, counts = np.unique(draws.numpy(), axis=0, return_counts=True)
    freq = {tuple(p): c / 200_000 for p, c in zip(pairs.tolist(), counts)}
    for t, p in law.items():  # Monte Carlo: standard error <= sqrt(1/4 / 2e5) ~ 1.1e-3; 5 sigma
        assert abs(freq.get(t, 0.0) - float(p)) <= 5.6e-3


def test_definition_2_holds_on_the_counterexample_of_definition_1_and_fails_for_a_decreasing_eta():
    main = next(x for x in neg.counterexamples() if x["family"] == "without-replacement")
    args = (main["model"], main["setting"], main["psi"])
    plain = neg.sequential_model_loss(*args, num_negatives=main["k"], rho=main["rho"])
    hard = neg.sequential_model_loss(*args, num_negatives=main["k"], rho=main["rho"], eta=main["eta"])
    assert hard >= plain and main["hard"] < main["plain"]  # definition 2 holds where definition 1 fails
    # a decreasing eta breaks hypothesis 1.2: the same check must then see a negative gap somewhere
    decreasing = step_eta([F(0)], [F(-1, 2)])
    gaps = [neg.sequential_model_loss(*args, num_negatives=2, rho=rho, eta=decreasing)
            - neg.sequential_model_loss(*args, num_negatives=2, rho=rho) for rho in (F(0), F(1, 2), F(1))]
    assert min(gaps) < 0


def test_definition_2_record_holds_on_every_instance(records):
    (r,) = [x for x in records if "definition 2" in x.violation]
    assert r.result == "holds" and r.evidence == "exact" and r.gap >= 0 and "exact on" in r.details["instances_text"]
    assert F(r.values["gap_definition_1"]) < 0 <= F(r.values["gap_definition_2"])
