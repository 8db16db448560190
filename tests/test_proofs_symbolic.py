"""Tests of proofs_check.symbolic: every checker passes on the true statement and fails on a false one.

A checker that cannot fail is a defect (style.md), so each test below feeds it a false statement (wrong
coefficients, an off-ETF Gram, a frame in d < C - 1, a non-convex or decreasing psi, a wrong closed
form, a wrong nc_value / collision probability) and asserts ``fail``; undecidable input must give
``unresolved``, never ``pass``.
"""

import numpy as np
import pytest
import sympy as sp

import proofs_check.symbolic as S
from ncgeom.geometry import simplex_etf
from ncgeom.losses import custom_psi
from ncgeom.vocabulary import SETTINGS
from proofs_check.records import CheckResult
from proofs_check.symbolic import closed_forms, collision, decide, etf, inner_product, psi
from proofs_check.symbolic.etf import C_SYMBOL
from proofs_check.symbolic.psi import MARGIN, TAU

MODULES = [S, closed_forms, collision, decide, etf, inner_product, psi]


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.__name__)
def test_all_entries_exist_once(module):
    assert len(module.__all__) == len(set(module.__all__))
    for name in module.__all__:
        assert hasattr(module, name), name


# --- decide -------------------------------------------------------------------------------------


def test_decide_zero_proves_refutes_and_abstains():
    x = sp.Symbol("x", positive=True)
    assert decide.decide_zero(sp.log(x**2) - 2 * sp.log(x))[0] is True
    verdict, info = decide.decide_zero(sp.exp(x) - 1 - x)
    assert verdict is False and "witness" in info
    assert decide.decide_nonnegative(x / (1 + x))[0] is True
    assert decide.decide_nonnegative(x - 2)[0] is False


def test_decide_never_passes_on_floats():
    with pytest.raises(ValueError, match="exact value expected"):
        decide.to_sympy(0.1)


# --- ETF ----------------------------------------------------------------------------------------


def test_etf_gram_symbolic_true_and_false():
    res = S.check_etf_gram_symbolic()
    assert res.status == "pass" and res.evidence == "exact"
    assert S.check_etf_gram_symbolic(coefficients=lambda c: (1, -1 / c)).status == "fail"
    # right eigen-structure on 1, wrong scale: G = I - 11^T / C is a projector, not the unit ETF
    assert S.check_etf_gram_symbolic(coefficients=lambda c: (sp.Integer(1), -1 / c)).status == "fail"


def test_etf_gram_symbolic_fails_on_a_wrong_spectrum_or_construction():
    # the claimed eigenvalue is compared with power sums of the entries, not with the coefficient a
    res = S.check_etf_gram_symbolic(eigenvalue=lambda c: c / (c - 2))
    assert res.status == "fail" and res.details["tr G = (C-1) lambda"] == "refuted"
    assert S.check_etf_gram_symbolic(eigenvalue=lambda c: sp.Integer(1)).status == "fail"
    # a construction without the sqrt(C/(C-1)) normalization: its Gram is not the claimed matrix
    unnormalized = lambda c: tuple(x * (c - 1) / c for x in etf.construction_inner_products(c))  # noqa: E731
    res = S.check_etf_gram_symbolic(construction=unnormalized)
    assert res.status == "fail" and res.details["unit: <v_c, v_c> = 1"] == "refuted"


def test_construction_inner_products_match_the_coordinates():
    # naive reference: the vectors sqrt(C/(C-1)) (e_c - 1/C) with exact rationals, for C = 2..7
    for n in range(2, 8):
        v = sp.sqrt(sp.Rational(n, n - 1)) * (sp.eye(n) - sp.ones(n, n) / n)
        diag, off = etf.construction_inner_products(sp.Integer(n))
        assert sp.simplify((v[0, :] * v[0, :].T)[0, 0] - diag) == 0
        assert sp.simplify((v[0, :] * v[1, :].T)[0, 0] - off) == 0


def test_etf_gram_exact_true_and_off_etf():
    assert S.check_etf_gram_exact(sizes=range(2, 9)).status == "pass"

    def perturbed(c):
        g = etf.exact_etf_gram(c)
        g[0, 1] = g[1, 0] = g[0, 1] + sp.Rational(1, 10**12)
        return g

    res = S.check_etf_gram_exact(sizes=(3, 5), gram=perturbed)
    assert res.status == "fail"
    assert [f["C"] for f in res.details["failures"]] == [3, 5]
    assert S.check_etf_gram_exact(sizes=(4,), gram=lambda c: sp.eye(c)).status == "fail"


def test_etf_existence_true_and_wrong_threshold():
    assert S.check_etf_existence(sizes=range(2, 9)).status == "pass"
    assert S.check_etf_existence(sizes=range(2, 6), min_dim=lambda c: c).status == "fail"  # "d >= C" is not the threshold
    assert S.check_etf_existence(sizes=range(3, 6), min_dim=lambda c: c - 2).status == "fail"


def test_simplex_etf_gram_true_rotated_and_padded():
    assert S.check_simplex_etf_gram(sizes=range(2, 9)).status == "pass"
    res = S.check_simplex_etf_gram(sizes=range(2, 9), rng=np.random.default_rng(3))
    assert res.status == "pass" and res.details["rotated"]


def test_simplex_etf_gram_fails_in_dimension_below_c_minus_1():
    def squeezed(c, d, *, rng=None):  # the ETF truncated to C - 2 coordinates, zero-padded to d
        v = np.zeros((c, d))
        v[:, : c - 2] = simplex_etf(c)[:, : c - 2]
        return v

    assert S.check_simplex_etf_gram(sizes=range(3, 7), etf=squeezed).status == "fail"


def test_simplex_etf_gram_detects_tiny_scale_error():
    scaled = lambda c, d, *, rng=None: (1 + 1e-12) * simplex_etf(c, d, rng=rng)  # noqa: E731
    assert S.check_simplex_etf_gram(sizes=(3, 4), etf=scaled).status == "fail"


# --- E<z, z-> -----------------------------------------------------------------------------------


def test_negative_similarity_identity_true_and_false():
    assert S.check_negative_similarity_identity(sizes=(2, 3, 4)).status == "pass"
    wrong = lambda m: inner_product.negative_similarity_identity_rhs(m) * (len(m) - 1) / len(m)  # /C^2  # noqa: E731
    assert S.check_negative_similarity_identity(sizes=(2, 3), rhs=wrong).status == "fail"


def test_negative_similarity_identity_naive_numeric_reference():
    rng = np.random.default_rng(0)
    mu = rng.standard_normal((4, 3))
    naive = np.mean([mu[c] @ mu[o] for c in range(4) for o in range(4) if o != c])
    closed = (np.sum(mu.sum(0) ** 2) - np.sum(mu**2)) / (4 * 3)
    np.testing.assert_allclose(naive, closed, rtol=1e-13)


@pytest.mark.parametrize("bound", [lambda c: -1 / c, lambda c: -2 / (c - 1), lambda c: sp.Integer(0)], ids=["too-high", "not-tight", "zero"])
def test_negative_similarity_bound_false(bound):
    assert S.check_negative_similarity_bound(sizes=(2, 3, 4), bound=bound).status == "fail"


def test_negative_similarity_bound_true():
    res = S.check_negative_similarity_bound(sizes=(2, 3, 4, 5))
    assert res.status == "pass"
    assert res.details["C=5"]["etf_value"] == "-1/4"


# --- psi ----------------------------------------------------------------------------------------


def _named(fn, name):
    fn.__name__ = name
    return fn


SIGMOID = _named(lambda t: sum(1 / (1 + sp.exp(-x / TAU)) for x in t), "sigmoid")  # monotone, not convex
NEG_SQUARE = _named(lambda t: -sum(x**2 for x in t), "neg_square")
DECREASING = _named(lambda t: sp.log(1 + sum(sp.exp(-x / TAU) for x in t)), "decreasing")  # convex, decreasing
MIN_HINGE = _named(lambda t: sum(sp.Min(0, x + MARGIN) for x in t), "min_hinge")  # concave, monotone
ABS = _named(lambda t: sum(sp.Abs(x) for x in t), "abs")  # convex, not monotone
PIECEWISE = _named(lambda t: sum(sp.Piecewise((x, x > 0), (0, True)) for x in t), "piecewise_relu")


@pytest.mark.parametrize("name", ["infonce", "infonce-mean", "triplet"])
@pytest.mark.parametrize("k", [1, 2])
def test_builtin_psi_convex_and_monotone(name, k):
    assert S.check_psi_convex(name, k=k).status == "pass"
    assert S.check_psi_monotone(name, k=k).status == "pass"


@pytest.mark.slow
@pytest.mark.parametrize("name", ["infonce", "infonce-mean", "triplet"])
def test_builtin_psi_convex_k3(name):
    assert S.check_psi_convex(name, k=3).status == "pass"
    assert S.check_psi_monotone(name, k=3).status == "pass"


def test_infonce_hessian_is_diag_p_minus_ppT():
    t = psi.t_symbols(2)
    f = psi.psi_expression("infonce", t)
    p = [sp.exp(x / TAU) / (1 + sum(sp.exp(y / TAU) for y in t)) for x in t]
    target = (sp.diag(*p) - sp.Matrix(p) * sp.Matrix(p).T) / TAU**2
    assert decide.decide_zero(sp.hessian(f, t)[0, 1] - target[0, 1])[0] is True
    assert decide.decide_zero(sp.hessian(f, t)[0, 0] - target[0, 0])[0] is True


@pytest.mark.parametrize("fn,k", [(SIGMOID, 1), (NEG_SQUARE, 2), (MIN_HINGE, 1), (MIN_HINGE, 2)])
def test_non_convex_psi_fails(fn, k):
    res = S.check_psi_convex(fn, k=k)
    assert res.status == "fail", res.details


@pytest.mark.parametrize("fn,k", [(DECREASING, 1), (DECREASING, 2), (NEG_SQUARE, 1), (ABS, 2)])
def test_non_monotone_psi_fails(fn, k):
    assert S.check_psi_monotone(fn, k=k).status == "fail"


def test_psi_properties_that_hold_for_counterexample_functions():
    assert S.check_psi_convex(ABS, k=2).status == "pass"  # |t| is a max of affine functions
    assert S.check_psi_monotone(MIN_HINGE, k=2).status == "pass"  # min(0, t + m) increases
    assert S.check_psi_monotone(SIGMOID, k=1).status == "pass"
    assert S.check_psi_convex(DECREASING, k=1).status == "pass"


def test_undecidable_structure_is_unresolved_not_pass():
    assert S.check_psi_convex(PIECEWISE, k=1).status == "unresolved"


def test_psi_implementation_true_and_wrong():
    for name in ("infonce", "infonce-mean", "triplet"):
        assert S.check_psi_implementation(name, k=3).status == "pass"
    wrong = custom_psi(lambda t: np.log1p(np.exp(t).sum(-1)), name="infonce-tau1")  # ignores tau = 0.5
    assert S.check_psi_implementation("infonce", k=2, tau=0.5, impl=wrong).status == "fail"


# --- closed forms -------------------------------------------------------------------------------


def _swapped(psi_fn, *, k, p=closed_forms.P_SYMBOL, c=C_SYMBOL):
    return closed_forms.binomial_closed_form(psi_fn, k=k, p=1 - p, c=c)


@pytest.mark.parametrize("name", ["infonce", "infonce-mean", "triplet"])
def test_closed_form_binomial_true(name):
    res = S.check_closed_form_binomial(name, k=3)
    assert res.status == "pass" and res.evidence == "independent"
    assert res.details["num_points"] == 2 * len(SETTINGS)


def test_closed_form_binomial_fails_on_a_wrong_formula():
    # p and 1 - p swapped: wrong wherever p is not 1/2 (every setting of the quick points)
    res = S.check_closed_form_binomial("infonce", k=2, closed_form=_swapped)
    assert res.status == "fail" and len(res.details["failures"]) == 5  # the report keeps the first five


def test_closed_form_binomial_fails_on_a_wrong_population_loss():
    # the ncgeom side is what is checked: a population loss that ignores the tilt (HSCL is unchanged at
    # NC, HUCL is not), or is off by a relative 1e-11, must fail
    def untilted(setting, psi, **kw):
        return closed_forms._population_at_nc(setting, psi, **{**kw, "beta": 0.0})

    res = S.check_closed_form_binomial("infonce-mean", k=2, population=untilted)
    assert res.status == "fail" and {f["setting"] for f in res.details["failures"]} == {"hucl"}

    def off(setting, psi, **kw):
        return closed_forms._population_at_nc(setting, psi, **kw) * (1 + 1e-11)

    assert S.check_closed_form_binomial("triplet", k=1, population=off).status == "fail"


def test_scl_closed_forms_true_and_wrong():
    assert S.check_scl_closed_forms(ks=(1, 2, 3)).status == "pass"
    wrong = dict(closed_forms.SCL_EXAMPLES)
    wrong["infonce"] = closed_forms.SCL_EXAMPLES["infonce-mean"]  # forgets the factor k
    res = S.check_scl_closed_forms(ks=(1, 2), examples=wrong)
    assert res.status == "fail"
    assert res.details["infonce,k=1"] == "proven"  # k = 1 is where the two agree


def test_nc_reference_value_hand_checked():
    # C = 2, k = 1, infonce, tau = 1, SCL: log(1 + e^-2)
    val = closed_forms.nc_reference_value("scl", "infonce", num_classes=2, num_negatives=1)
    np.testing.assert_allclose(float(val), np.log1p(np.exp(-2.0)), rtol=1e-15)
    # UCL, C = 2, k = 1: half collisions -> (log 2 + log(1 + e^-2)) / 2
    val = closed_forms.nc_reference_value("ucl", "infonce", num_classes=2, num_negatives=1)
    np.testing.assert_allclose(float(val), (np.log(2) + np.log1p(np.exp(-2.0))) / 2, rtol=1e-15)


def test_nc_value_true_and_wrong():
    res = S.check_nc_value()
    assert res.status == "pass", res.details
    from ncgeom.theory import nc_value

    def ignores_beta(setting, psi_name, **kw):  # uses p = 1/C for HUCL: the beta = 0 value
        return nc_value("ucl" if setting == "hucl" else setting, psi_name, **kw)

    res = S.check_nc_value(nc_value=ignores_beta)
    assert res.status == "fail"
    assert {f["setting"] for f in res.details["failures"]} == {"hucl"}


def test_instance_positive_example_true_and_wrong():
    assert S.check_instance_positive_example(sizes=(2, 3, 4, 10)).status == "pass"
    wrong = lambda n: sp.log(2) / n + (1 - sp.Integer(1) / n) * sp.log(1 + sp.exp(-1))  # t = -1 instead of -C/(C-1)  # noqa: E731
    assert S.check_instance_positive_example(sizes=(3,), nc_formula=wrong).status == "fail"


# --- collision probability ----------------------------------------------------------------------


def test_collision_probability_symbolic_true_and_wrong():
    assert S.check_collision_probability_symbolic(sizes=(2, 3, 4)).status == "pass"

    def untilted_others(setting, c, beta):  # forgets the e^(-beta/(C-1)) tilt of the other classes
        if setting == "hucl":
            return sp.exp(beta) / (sp.exp(beta) + c - 1)
        return collision.theory_collision_probability(setting, c, beta)

    assert S.check_collision_probability_symbolic(sizes=(3,), expected=untilted_others).status == "fail"


def test_collision_probability_true_and_wrong():
    assert S.check_collision_probability().status == "pass"
    uniform = lambda setting, *, num_classes, beta: 0.0 if setting in ("scl", "hscl") else 1 / num_classes  # noqa: E731
    res = S.check_collision_probability(collision_probability=uniform)
    assert res.status == "fail"
    assert all(f["setting"] == "hucl" for f in res.details["failures"])


def test_negative_class_law_sums_to_one_and_rejects_bad_setting():
    for setting in SETTINGS:
        law = collision.negative_class_law(setting, num_classes=4, anchor=2, beta=sp.Rational(3, 2))
        assert decide.decide_zero(sum(law) - 1)[0] is True
    with pytest.raises(ValueError, match="setting"):
        collision.negative_class_law("hard", num_classes=3)


# --- the registry -------------------------------------------------------------------------------


def test_quick_checks_all_pass():
    results = [check() for check in S.checks(quick=True)]
    assert all(isinstance(r, CheckResult) for r in results)
    names = [r.name for r in results]
    assert len(names) == len(set(names))
    failed = {r.name: r.details for r in results if r.status != "pass"}
    assert not failed
    assert all(r.statement.isprintable() for r in results), [r.name for r in results if not r.statement.isprintable()]
    assert sum(r.seconds for r in results) < 30  # quick mode budget, generous for a shared 2-core machine


def test_results_are_json_serializable_including_failures():
    import json

    results = [S.check_etf_existence(sizes=(3,), min_dim=lambda c: c), S.check_psi_convex(SIGMOID, k=1), S.check_negative_similarity_bound(sizes=(3,), bound=lambda c: -1 / c)]
    results += [check() for check in S.checks(quick=True)[:6]]
    for r in results:
        json.dumps(r.to_dict())
