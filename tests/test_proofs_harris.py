"""Tests of proofs_check.harris: exact Harris / Theorem 1 checks pass on true statements, fail on false ones."""

import itertools
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import proofs_check.harris as H
from proofs_check.records import CheckResult


def test_all_entries_exist_once():
    assert len(H.__all__) == len(set(H.__all__))
    for name in H.__all__:
        assert hasattr(H, name), name


def test_product_law_and_is_product():
    law = H.product_law([[Fraction(1, 3), Fraction(2, 3)], [Fraction(1, 4), Fraction(3, 4)]])
    assert sum(law.values()) == 1
    assert law[(1, 0)] == Fraction(2, 12)
    assert H.is_product(law)
    law[(0, 0)] += Fraction(1, 12)
    law[(0, 1)] -= Fraction(1, 12)
    assert not H.is_product(law)


@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 3), m=st.integers(1, 3))
def test_random_tables_are_monotone_and_harris_holds(seed, n, m):
    rng = np.random.default_rng(seed)
    g, h = H.random_monotone_table(n, m, rng=rng), H.random_monotone_table(n, m, rng=rng)
    assert H.is_monotone_table(g) and H.is_monotone_table(h)
    law = H.product_law(H.random_marginals(n, m, rng=rng))
    assert sum(law.values()) == 1
    assert H.covariance(law, g, h) >= 0


def test_covariance_naive_reference():
    law = H.product_law([[Fraction(1, 2), Fraction(1, 2)], [Fraction(1, 5), Fraction(4, 5)]])
    g = {pt: Fraction(pt[0] + pt[1]) for pt in law}
    h = {pt: Fraction(max(pt)) for pt in law}
    eg = sum(law[pt] * g[pt] for pt in law)
    eh = sum(law[pt] * h[pt] for pt in law)
    egh = sum(law[pt] * g[pt] * h[pt] for pt in law)
    assert H.covariance(law, g, h) == egh - eg * eh
    assert egh - eg * eh > 0


def test_check_harris_true():
    res = H.check_harris(rng=np.random.default_rng(1), num_trials=40, n=3, m=2)
    assert res.status == "pass"
    assert res.details["hypotheses_seen"] == ["monotone=True", "product=True"]
    assert Fraction(res.details["min_covariance"]) >= 0


def test_check_harris_fails_on_correlated_law():
    law = {(0, 0): Fraction(0), (0, 1): Fraction(1, 2), (1, 0): Fraction(1, 2), (1, 1): Fraction(0)}
    g = {pt: Fraction(pt[0]) for pt in law}
    h = {pt: Fraction(pt[1]) for pt in law}
    res = H.check_harris(rng=np.random.default_rng(0), num_trials=1, n=2, m=1, law=law, g=g, h=h)
    assert res.status == "fail"
    assert res.details["min_covariance"] == "-1/4"
    assert "product=False" in res.details["hypotheses_seen"]
    assert res.details["witness"] is not None


def test_check_harris_fails_on_decreasing_function():
    h_down = lambda rng: {pt: -v for pt, v in H.random_monotone_table(2, 2, rng=rng).items()}  # noqa: E731
    g_up = {pt: Fraction(pt[0] + pt[1]) for pt in itertools.product(range(3), repeat=2)}
    res = H.check_harris(rng=np.random.default_rng(5), num_trials=30, n=2, m=2, g=g_up, h=h_down)
    assert res.status == "fail"


def _naive_model_loss(model, setting, psi, k, eta):
    """Enumerate anchor, positive and the k negative *points* (not the pushed-forward similarities)."""
    n = len(model.labels)
    total = Fraction(0)
    for i in range(n):
        eligible = [j for j in range(n) if setting == "ucl" or model.labels[j] != model.labels[i]]
        w = {j: (eta(model.gram[i][j]) if eta else Fraction(1)) for j in eligible}
        z = sum(w.values())
        positives = [j for j in range(n) if model.labels[j] == model.labels[i]]
        for j in positives:
            for negs in itertools.product(eligible, repeat=k):
                prob = Fraction(1, n) / len(positives)
                for m in negs:
                    prob *= w[m] / z
                total += prob * psi(tuple(model.gram[i][m] - model.gram[i][j] for m in negs))
    return total


def test_model_loss_matches_naive_enumeration():
    rng = np.random.default_rng(7)
    for _ in range(3):
        model = H.random_model(rng=rng, num_points=5, num_classes=2)
        psi, eta = H.random_monotone_psi(rng=rng), H.random_monotone_eta(rng=rng)
        for setting in ("scl", "ucl"):
            for e in (None, eta):
                assert H.model_loss(model, setting, psi, num_negatives=2, eta=e) == _naive_model_loss(model, setting, psi, 2, e)


def test_etf_model_loss_is_section5_closed_form():
    # triplet, margin 3, SCL at NC: psi(-C/(C-1)) = 3 - C/(C-1); UCL k = 1: (1/C) 3 + (1 - 1/C)(3 - C/(C-1)) = 2
    for c in (2, 3, 5):
        model = H.etf_model(c)
        assert H.model_loss(model, "scl", H.hinge_psi(Fraction(3)), num_negatives=2) == 3 - Fraction(c, c - 1)
        assert H.model_loss(model, "ucl", H.hinge_psi(Fraction(3)), num_negatives=1) == 2


def test_model_loss_rejects_bad_input():
    model = H.etf_model(3)
    with pytest.raises(ValueError, match="setting"):
        H.model_loss(model, "hscl", H.hinge_psi(), num_negatives=1)
    with pytest.raises(ValueError, match="eta vanishes"):
        H.model_loss(model, "scl", H.hinge_psi(), num_negatives=1, eta=lambda s: Fraction(0))


def test_check_tilted_bound_true():
    res = H.check_tilted_bound(rng=np.random.default_rng(2), num_trials=4, num_negatives=2)
    assert res.status == "pass"
    assert Fraction(res.details["min_gap"]) >= 0


def test_check_tilted_bound_fails_on_non_monotone_eta():
    res = H.check_tilted_needs_monotone_eta()
    assert res.status == "pass" and res.details["inner_status"] == "fail"
    assert Fraction(res.details["min_gap"]) == Fraction(-1, 9)


def test_check_tilted_bound_fails_on_bump_eta():
    # a bump (increasing then decreasing) eta on a model whose anchor sees similarities 0, 1/2, 1
    z = [(Fraction(1), Fraction(0)), (Fraction(0), Fraction(1)), (Fraction(1), Fraction(1)), (Fraction(1, 2), Fraction(0))]
    model = H.FiniteModel(tuple(tuple(u[0] * v[0] + u[1] * v[1] for v in z) for u in z), (0, 1, 1, 1))
    bump = lambda s: Fraction(4) if Fraction(1, 4) <= s <= Fraction(3, 4) else Fraction(1)  # noqa: E731
    res = H.check_tilted_bound(rng=np.random.default_rng(0), num_trials=1, num_negatives=1, model=model, psi=H.hinge_psi(Fraction(3)), eta=bump)
    assert res.status == "fail"


def test_check_tilted_equality_at_nc_true_and_off_nc():
    assert H.check_tilted_equality_at_nc(rng=np.random.default_rng(0)).status == "pass"

    def off_nc(c):  # class 0 holds two distinct points: negatives of other anchors are not constant
        z = [(Fraction(1), Fraction(0)), (Fraction(0), Fraction(1)), (Fraction(-1), Fraction(0))]
        return H.FiniteModel(tuple(tuple(u[0] * v[0] + u[1] * v[1] for v in z) for u in z), (0, 0, 1))

    res = H.check_tilted_equality_at_nc(sizes=(2,), rng=np.random.default_rng(0), model=off_nc)
    assert res.status == "fail"


def test_necessity_checks_pass_and_are_self_tests():
    for check in (H.check_harris_needs_product, H.check_tilted_needs_monotone_eta):
        res = check()
        assert res.status == "pass" and res.evidence == "self-test"  # evidence about the checker, not the paper


def test_every_other_harris_check_is_exact():
    assert {r.name: r.evidence for r in (c() for c in H.checks(quick=True))} == {
        "harris_inequality": "exact", "tilted_vs_plain": "exact", "tilted_gap_is_covariance": "exact",
        "tilted_equality_at_nc": "exact", "tilted_vs_plain_joint_eta": "exact",
        "harris_needs_product": "self-test", "tilted_needs_monotone_eta": "self-test"}


# --- Theorem 1 for a joint eta: R^k -> R ------------------------------------------------------------


def _naive_joint_loss(model, setting, psi, k, joint_eta):
    """Loop over anchors, positives and ordered k-tuples of negative points, straight from the definition."""
    n, total = len(model.labels), Fraction(0)
    for i in range(n):
        eligible = [m for m in range(n) if setting == "ucl" or model.labels[m] != model.labels[i]]
        same = [j for j in range(n) if model.labels[j] == model.labels[i]]
        weights = {}
        for negs in itertools.product(eligible, repeat=k):
            w = Fraction(1)
            for m in negs:
                w *= model.mass(m)
            weights[negs] = w * (joint_eta(tuple(model.gram[i][m] for m in negs)) if joint_eta else 1)
        z = sum(weights.values())
        for j in same:
            p_pos = model.mass(j) / sum(model.mass(x) for x in same)
            for negs, w in weights.items():
                total += model.mass(i) * p_pos * w / z * psi(tuple(model.gram[i][m] - model.gram[i][j] for m in negs))
    return total


def test_joint_model_loss_matches_naive_loop_and_the_product_tilt():
    rng = np.random.default_rng(11)
    for _ in range(3):
        model = H.random_model(rng=rng, num_points=5, num_classes=2, weighted=True)
        assert sum(model.mass(i) for i in range(5)) == 1
        psi, eta = H.random_monotone_psi(rng=rng), H.random_monotone_eta(rng=rng)
        joint = H.random_monotone_joint_eta(2, rng=rng)
        for setting in ("scl", "ucl"):
            got = H.model_loss(model, setting, psi, num_negatives=2, joint_eta=joint)
            assert got == _naive_joint_loss(model, setting, psi, 2, joint)
            assert H.model_loss(model, setting, psi, num_negatives=2) == _naive_joint_loss(model, setting, psi, 2, None)
            # the product tilt is the joint eta prod_i eta(S_i): two code paths, one value
            product = lambda s, eta=eta: eta(s[0]) * eta(s[1])  # noqa: E731
            assert H.model_loss(model, setting, psi, num_negatives=2, joint_eta=product) == H.model_loss(model, setting, psi, num_negatives=2, eta=eta)
    with pytest.raises(ValueError, match="not both"):
        H.model_loss(model, "scl", psi, num_negatives=2, eta=eta, joint_eta=joint)


def test_random_joint_eta_is_monotone_positive_and_not_a_product():
    rng = np.random.default_rng(5)
    grid = [Fraction(x, 2) for x in range(-4, 5)]
    not_product = 0
    for _ in range(20):
        eta = H.random_monotone_joint_eta(2, rng=rng)
        table = {(a, b): eta((grid[a], grid[b])) for a in range(len(grid)) for b in range(len(grid))}
        assert H.is_monotone_table(table) and min(table.values()) > 0
        # a product f(a) g(b) has rank one: table[a, b] table[0, 0] = table[a, 0] table[0, b]
        not_product += any(table[a, b] * table[0, 0] != table[a, 0] * table[0, b] for a, b in table)
    assert not_product > 10


def test_check_joint_tilted_bound_true():
    res = H.check_joint_tilted_bound(rng=np.random.default_rng(3), num_trials=4, num_negatives=3)
    assert res.status == "pass" and res.evidence == "exact"
    assert Fraction(res.details["min_gap"]) >= 0


def test_check_joint_tilted_bound_fails_on_a_decreasing_joint_eta():
    # eta(s) = 9 - s_1 - s_2 > 0 (|s| <= 2) is decreasing; with psi(t) = t_1 + t_2 the gap is
    # -Var(S_1 + S_2) / Z < 0 wherever an anchor's negatives are not all equally similar
    decreasing = lambda s: Fraction(9) - sum(s, Fraction(0))  # noqa: E731
    res = H.check_joint_tilted_bound(rng=np.random.default_rng(0), num_trials=3, num_negatives=2, psi=lambda t: sum(t, Fraction(0)), joint_eta=decreasing)
    assert res.status == "fail" and Fraction(res.details["min_gap"]) < 0 and res.details["witness"] is not None
    # a decreasing joint eta with the random monotone psi of the default trials fails as well
    res = H.check_joint_tilted_bound(rng=np.random.default_rng(0), num_trials=6, num_negatives=2, joint_eta=lambda s: Fraction(1, 4) + (Fraction(1) if max(s) <= 0 else 0))
    assert res.status == "fail"


def test_checks_quick_all_pass_and_reproducible():
    first = [c() for c in H.checks(quick=True)]
    second = [c() for c in H.checks(quick=True)]
    assert all(isinstance(r, CheckResult) for r in first)
    assert all(r.status == "pass" for r in first), {r.name: r.details for r in first if r.status != "pass"}
    assert [r.details for r in first] == [r.details for r in second]
    # Statements are LaTeX for reports: no control characters (\big and \textstyle typed outside a raw
    # string once left a backspace and a tab in tilted_gap_is_covariance's statement).
    for r in first:
        assert r.statement.isprintable(), (r.name, r.statement)


def test_results_are_json_serializable():
    import json

    law = {(0, 1): Fraction(1, 2), (1, 0): Fraction(1, 2), (0, 0): Fraction(0), (1, 1): Fraction(0)}
    failing = H.check_harris(rng=np.random.default_rng(0), num_trials=1, n=2, m=1, law=law, g={p: Fraction(p[0]) for p in law}, h={p: Fraction(p[1]) for p in law})
    for r in [failing] + [c() for c in H.checks(quick=True)]:
        json.dumps(r.to_dict())


def test_tilted_gap_is_covariance_true_and_false():
    assert H.check_tilted_gap_is_covariance(rng=np.random.default_rng(4), num_trials=10, num_negatives=2).status == "pass"
    # a wrong density ratio (Z^(k-1) instead of Z^k) breaks the identity
    wrong = H.check_tilted_gap_is_covariance(rng=np.random.default_rng(4), num_trials=10, num_negatives=2, normalizer=lambda z, k: z ** (k - 1))
    assert wrong.status == "fail"
    # a decreasing eta keeps the identity but makes the gap negative
    decreasing = lambda s: Fraction(2) - s  # noqa: E731  (> 0 on [-1, 1])
    res = H.check_tilted_gap_is_covariance(rng=np.random.default_rng(4), num_trials=10, num_negatives=2, eta=decreasing)
    assert res.status == "fail" and Fraction(res.details["min_gap"]) < 0
