"""Theorem 3 without conditional independence: the cross-polytope beats NC (docs/theory.md section 4)."""

import math
from typing import Any

import numpy as np
import pytest
import sympy as sp
import torch
from numpy.testing import assert_allclose

import proofs_check.counterexample as cx
from ncgeom.geometry import simplex_etf
from proofs_check.counterexample import (
    check_all_classes,
    check_exact,
    check_search,
    cross_polytope_formula,
    cross_polytope_points_exact,
    etf_points_exact,
    instance_positive_loss_exact,
    nc_formula,
    search_configurations,
)


def _loop_loss(points):
    # Reference: instance positives (s+ = ||z||^2), one negative uniform over the points, infonce tau = 1.
    n = len(points)
    total = 0.0
    for i in range(n):
        for j in range(n):
            total += math.log1p(math.exp(float(points[i] @ points[j] - points[i] @ points[i])))
    return total / n**2


def test_all_names_exist_once():
    assert len(set(cx.__all__)) == len(cx.__all__)
    for name in cx.__all__:
        assert hasattr(cx, name), name


@pytest.mark.parametrize("c", [2, 3, 4, 7, 10])
def test_exact_values_match_loop_and_formulas(c):
    nc, _ = instance_positive_loss_exact(etf_points_exact(c))
    cp, counts = instance_positive_loss_exact(cross_polytope_points_exact(c - 1))
    d = c - 1
    eye = np.eye(d)
    assert_allclose(float(nc), _loop_loss(simplex_etf(c)), rtol=1e-13)
    assert_allclose(float(cp), _loop_loss(np.vstack([eye, -eye])), rtol=1e-13)
    assert_allclose(float(nc), float(nc_formula(c)), rtol=1e-15)
    assert_allclose(float(cp), float(cross_polytope_formula(d)), rtol=1e-15)
    # negatives of a cross-polytope vertex: itself (t = 0), its antipode (t = -2), 2d - 2 orthogonal (t = -1)
    expected = {0: 2 * d, -2: 2 * d, -1: 2 * d * (2 * d - 2)}
    assert counts == {t: m for t, m in expected.items() if m}


def test_quoted_values_at_c10():
    assert_allclose(float(nc_formula(10)), 0.32543, atol=5e-6)
    assert_allclose(float(cross_polytope_formula(9)), 0.32401, atol=5e-6)


def test_exact_check_passes():
    result = check_exact(max_classes=10)
    assert result.status == "pass", result.details
    assert result.evidence == "exact"  # sympy values of the point sets, order at 50 digits
    assert result.details["min_difference_C3_up"] > 0
    assert result.details["values"][2]["difference"] == "0"


def test_exact_check_fails_on_wrong_closed_form():
    wrong_nc = lambda c: nc_formula(c) + sp.Rational(1, 10**30)  # noqa: E731 - tiny but exact error
    assert check_exact(max_classes=4, nc_claim=wrong_nc).status == "fail"
    wrong_cp = lambda d: (sp.log(2) + sp.log(1 + sp.exp(-2))) / (2 * d) + (1 - sp.Rational(1, 2 * d)) * sp.log(1 + sp.exp(-1))  # noqa: E731,E501
    assert check_exact(max_classes=4, cross_polytope_claim=wrong_cp).status == "fail"


def test_all_classes_proof_and_false_statement():
    result = check_all_classes()
    assert result.status == "pass", result.details
    assert result.evidence == "exact"  # an interval-arithmetic proof
    assert result.details["min_derivative_lower_bound"] > 0
    assert result.details["value_at_eps_0"] == 0.0  # E(0) = 0, the proof's other premise (checked since review)
    assert_allclose(result.details["derivative_at_0"],
                    math.log(2) / 2 - 1 / (1 + math.e) - math.log1p(math.exp(-2)) / 2, rtol=1e-12)
    # "for every C >= 2" is false: the two configurations coincide at C = 2.
    false = check_all_classes(min_classes=2)
    assert false.status == "fail" and false.details["refuted_at_min_classes"]


def test_search_beats_nc_but_not_the_cross_polytope():
    result = check_search(dims=(2,), num_starts=2)
    assert result.status == "pass", result.details
    assert result.evidence == "numerical"  # a float64 L-BFGS search: evidence, not proof
    row = result.details["dims"][2]
    assert row["best_found"] < row["nc"] - 1e-3
    assert row["best_found"] >= row["cross_polytope"] - 1e-9
    assert check_search(dims=(2,), num_starts=2, baseline="cross_polytope").status == "fail"


def test_search_is_reproducible_and_validates():
    a = search_configurations(dim=2, num_points=5, num_starts=2, generator=torch.Generator().manual_seed(7))
    b = search_configurations(dim=2, num_points=5, num_starts=2, generator=torch.Generator().manual_seed(7))
    assert a == b
    with pytest.raises(ValueError, match="generator"):
        search_configurations(dim=2, num_points=5, num_starts=2, generator=0)
    not_a_baseline: Any = "uniform"  # outside the Literal on purpose: the runtime check is under test
    with pytest.raises(ValueError, match="baseline"):
        check_search(dims=(2,), baseline=not_a_baseline)
    with pytest.raises(ValueError, match="num_classes"):
        etf_points_exact(1)
