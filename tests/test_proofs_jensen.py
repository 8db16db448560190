"""Tests of proofs_check.jensen: the Jensen step passes for convex psi and fails for a non-convex one."""

import itertools
from fractions import Fraction

import mpmath
import numpy as np
import pytest

import proofs_check.jensen as J
from proofs_check.harris import FiniteModel, hinge_psi, random_model


def test_all_entries_exist_once():
    assert len(J.__all__) == len(set(J.__all__))
    for name in J.__all__:
        assert hasattr(J, name), name


def _model(points, labels):
    gram = tuple(tuple(sum((a * b for a, b in zip(u, v)), Fraction(0)) for v in points) for u in points)
    return FiniteModel(gram, tuple(labels))


def test_class_mean_gram_is_the_gram_of_the_means():
    pts = [(Fraction(1), Fraction(0)), (Fraction(0), Fraction(1)), (Fraction(-1), Fraction(1, 2)), (Fraction(1, 2), Fraction(-1))]
    model = _model(pts, (0, 0, 1, 1))
    means = [tuple((pts[i][d] + pts[j][d]) / 2 for d in range(2)) for i, j in ((0, 1), (2, 3))]
    m = J.class_mean_gram(model)
    for a, b in itertools.product(range(2), repeat=2):
        assert m[a, b] == sum(x * y for x, y in zip(means[a], means[b]))


def test_jensen_sides_match_a_naive_loop():
    # SCL, k = 2, triplet: E psi(t) from a loop over (anchor, positive, negatives) with uniform masses
    rng = np.random.default_rng(2)
    model = random_model(rng=rng, num_points=4, num_classes=2)
    psi = hinge_psi(Fraction(3, 2))
    n, total, mean = 4, Fraction(0), [Fraction(0), Fraction(0)]
    for a in range(n):
        pos = [p for p in range(n) if model.labels[p] == model.labels[a]]
        neg = [m for m in range(n) if model.labels[m] != model.labels[a]]
        for p in pos:
            for negs in itertools.product(neg, repeat=2):
                q = Fraction(1, n) / len(pos) / len(neg) ** 2
                t = tuple(model.gram[a][m] - model.gram[a][p] for m in negs)
                total += q * psi(t)
                mean = [x + q * y for x, y in zip(mean, t)]
    sides = J.jensen_sides(model, psi, num_negatives=2)
    assert sides["scl"][0] == total and sides["scl"][2] == tuple(mean)
    assert sides["scl"][1] == psi(tuple(mean))
    assert sum(sides["class_weight"].values()) == 1


def test_infonce_interval_encloses_the_value():
    psi = J.infonce_interval_psi(Fraction(1, 2))
    with mpmath.workdps(40):
        exact = mpmath.log(1 + mpmath.exp(mpmath.mpf(-1) / 3 * 2) + mpmath.exp(mpmath.mpf(1) / 4 * 2))
    enclosure = psi((Fraction(-1, 3), Fraction(1, 4)))
    assert enclosure.a <= exact <= enclosure.b
    assert float(enclosure.delta) < 1e-12


@pytest.mark.parametrize("k", [1, 2, 3])
def test_check_jensen_step_passes_for_convex_psi(k):
    res = J.check_jensen_step(rng=np.random.default_rng(k), num_trials=3, num_negatives=k)
    assert res.status == "pass" and res.evidence == "exact"
    assert res.details["undecided"] == 0 and res.details["witness"] is None
    assert res.details["conditional_inequalities"] == 3 * 3 ** (k + 1)


def test_random_convex_psi_is_midpoint_convex():
    rng = np.random.default_rng(0)
    grid = [Fraction(x, 2) for x in range(-3, 4)]
    for _ in range(5):
        psi = J.random_convex_psi(2, rng=rng)
        for a, b in itertools.combinations(itertools.product(grid, repeat=2), 2):
            mid = tuple((x + y) / 2 for x, y in zip(a, b))
            assert psi(mid) <= (psi(a) + psi(b)) / 2


def test_check_jensen_step_fails_for_non_convex_psi():
    # the failing controls: a strictly concave psi, and a monotone but concave one (the hinge flipped)
    concave = lambda t: -sum((x * x for x in t), Fraction(0))  # noqa: E731
    res = J.check_jensen_step(rng=np.random.default_rng(0), num_trials=2, num_negatives=2, psi=concave)
    assert res.status == "fail" and res.details["witness"]["statement"] == "scl: E psi(t) >= psi(E t)"
    capped = lambda t: sum((min(Fraction(0), x + 1) for x in t), Fraction(0))  # noqa: E731
    assert J.check_jensen_step(rng=np.random.default_rng(0), num_trials=3, num_negatives=2, psi=capped).status == "fail"


def test_check_jensen_step_fails_for_a_concave_interval_psi():
    # -infonce is concave: the interval branch must refute it too
    neg = lambda t: -J.infonce_interval_psi()(t)  # noqa: E731
    res = J.check_jensen_step(rng=np.random.default_rng(1), num_trials=1, num_negatives=2, psi=neg)
    assert res.status == "fail"


def test_constant_negatives_are_exact_equalities_not_undecided():
    # NC (two points per class at the ETF vertices of C = 3, in coordinates of R^3): every t is constant
    v = [(Fraction(2), Fraction(-1), Fraction(-1)), (Fraction(-1), Fraction(2), Fraction(-1)), (Fraction(-1), Fraction(-1), Fraction(2))]
    model = _model([v[c] for c in (0, 0, 1, 1, 2, 2)], (0, 0, 1, 1, 2, 2))
    res = J.check_jensen_step(rng=np.random.default_rng(0), num_trials=1, num_negatives=2, model=model, psi=J.infonce_interval_psi())
    assert res.status == "pass" and res.details["exact_equalities"] == 27 and res.details["undecided"] == 0


def test_checks_quick_pass_and_reproducible():
    first = [c() for c in J.checks(quick=True)]
    second = [c() for c in J.checks(quick=True)]
    assert [r.status for r in first] == ["pass"]
    assert [r.details for r in first] == [r.details for r in second]
    assert all(r.statement.isprintable() for r in first)
