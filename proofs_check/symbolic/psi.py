"""Convexity and argument-wise monotonicity of psi_k, symbolically for small k.

docs/theory.md section 2: psi_k must be convex and non-decreasing in every argument. The built-ins are

.. math::

    \\log\\Big(1+\\sum_i e^{t_i/\\tau}\\Big),\\quad \\log\\Big(1+\\frac1k\\sum_i e^{t_i/\\tau}\\Big),\\quad
    \\frac1k\\sum_i\\max(0, t_i+m).

Methods. A smooth psi is rewritten in u_i = e^{t_i/s} > 0 (s = tau when psi depends on tau, else 1),
a diffeomorphism R -> (0, inf) under which d/dt_i = (u_i/s) d/du_i; then

- monotone: every gradient entry is >= 0 (sympy's positivity on the factored form);
- convex: every principal minor of the Hessian is >= 0 (Sylvester's criterion for PSD). For the
  InfoNCE family the Hessian is (diag(p) - pp^T)/tau^2 and its minors factor into manifestly positive
  monomials over powers of (1 + sum u).

A piecewise-linear psi (Max/Min of affine functions) is recognized as sum_j c_j max(affine) + affine:
convex if it can be written with c_j >= 0; monotone if additionally every affine piece has
non-negative slopes. What neither method proves is searched for a counterexample on a rational grid
(midpoint convexity, one-step monotonicity, negative minors) with 50-digit arithmetic: found -> fail,
not found -> unresolved.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence

import mpmath
import numpy as np
import sympy as sp

from ncgeom.losses import make_psi
from ncgeom.vocabulary import PsiName
from proofs_check.records import CheckResult, timed
from proofs_check.symbolic.decide import DIGITS, VERDICT_WORDS, WITNESS_THRESHOLD, decide_nonnegative, fmt, status_of

__all__ = [
    "TAU",
    "MARGIN",
    "PsiSpec",
    "psi_expression",
    "resolve_psi",
    "t_symbols",
    "max_affine_terms",
    "check_psi_convex",
    "check_psi_monotone",
    "check_psi_implementation",
]

TAU = sp.Symbol("tau", positive=True)
MARGIN = sp.Symbol("m", real=True)
PsiSpec = str | Callable[[tuple], sp.Expr]
"""A built-in name, or a function (t_1, ..., t_k) -> sympy expression (may use TAU, MARGIN)."""

_SOURCE = "docs/theory.md section 2 (loss family); jiang2025hard, general loss functions"
_GRID = tuple(sp.Rational(x) for x in (-2, -1, 0, 1, 2))
_DEFAULT_PARAMS = {TAU: sp.Integer(1), MARGIN: sp.Integer(1)}


def psi_expression(name: str, args: Sequence, *, tau=TAU, margin=MARGIN) -> sp.Expr:
    """The built-in psi_k(args) as a sympy expression (docs/theory.md section 2), k = len(args)."""
    k = len(args)
    if name == "infonce":
        return sp.log(1 + sum(sp.exp(a / tau) for a in args))
    if name == "infonce-mean":
        return sp.log(1 + sp.Rational(1, k) * sum(sp.exp(a / tau) for a in args))
    if name == "triplet":
        return sp.Rational(1, k) * sum(sp.Max(0, a + margin) for a in args)
    raise ValueError(f"psi must be one of 'infonce', 'infonce-mean', 'triplet' or a callable, got {name!r}")


def resolve_psi(psi: PsiSpec) -> tuple[str, Callable[[tuple], sp.Expr]]:
    """(label, function args -> sympy expression) for a built-in name or a user callable."""
    if callable(psi):
        return getattr(psi, "__name__", "custom"), psi
    psi_expression(psi, (sp.Integer(0),))  # validates the name
    return psi, lambda args: psi_expression(psi, args)


def t_symbols(k: int) -> tuple[sp.Symbol, ...]:
    """Real symbols t_1..t_k."""
    return tuple(sp.Symbol(f"t{i + 1}", real=True) for i in range(k))


def max_affine_terms(expr: sp.Expr, t: Sequence[sp.Symbol]):
    """Write expr = sum_j c_j max(pieces_j) + affine(t), or return None.

    Returns (terms, remainder) with terms a list of (c_j, pieces_j); ``c * Min(a, b)`` is read as
    ``(-c) * Max(-a, -b)``. Every piece and the remainder are affine (total degree <= 1) in ``t``.
    """

    def affine(e) -> bool:
        try:
            return sp.Poly(e, *t).total_degree() <= 1
        except sp.PolynomialError:
            return False

    terms, remainder = [], sp.Integer(0)
    for term in sp.Add.make_args(expr):
        coef, rest = term.as_independent(*t, as_Add=False)
        if isinstance(rest, sp.Max) and all(affine(a) for a in rest.args):
            terms.append((coef, rest.args))
        elif isinstance(rest, sp.Min) and all(affine(a) for a in rest.args):
            terms.append((-coef, tuple(-a for a in rest.args)))
        elif affine(term):
            remainder += term
        else:
            return None
    return terms, remainder


def _log_coordinates(expr: sp.Expr, t: Sequence[sp.Symbol]):
    """u_i = exp(t_i / s) > 0: returns (f(u), u, s, D) with D(e, i) = (u_i / s) de/du_i."""
    s = TAU if TAU in expr.free_symbols else sp.Integer(1)
    u = tuple(sp.Symbol(f"u{i + 1}", positive=True) for i in range(len(t)))
    f = expr.subs({ti: s * sp.log(ui) for ti, ui in zip(t, u)})
    return f, u, s, (lambda e, i: u[i] / s * sp.diff(e, u[i]))


def _u_probes(u, params: Mapping) -> list[dict]:
    values = (sp.Rational(1, 8), sp.Rational(1, 2), sp.Integer(1), sp.Integer(2), sp.Integer(8))
    return [{**params, **dict(zip(u, point))} for point in itertools.product(values, repeat=len(u))]


def _numeric(expr: sp.Expr, t: Sequence[sp.Symbol], params: Mapping):
    """50-digit evaluator at rational points; a point where evaluation fails gives NaN (never a witness)."""
    fn = sp.lambdify(t, expr.subs(params), "mpmath")

    def value(point):
        with mpmath.workdps(DIGITS):
            try:
                out = mpmath.mpf(fn(*[mpmath.mpf(int(x.p)) / int(x.q) for x in point]))
            except (TypeError, ValueError, NameError, ZeroDivisionError, AttributeError):
                return mpmath.nan
            return out

    return value


def _search_midpoint(expr, t, params) -> dict | None:
    """A pair a, b of grid points with psi((a+b)/2) > (psi(a) + psi(b))/2, or None."""
    value = _numeric(expr, t, params)
    pts = list(itertools.product(_GRID, repeat=len(t)))
    for a, b in itertools.combinations(pts, 2):
        mid = tuple((x + y) / 2 for x, y in zip(a, b))
        gap = value(mid) - (value(a) + value(b)) / 2
        if gap > WITNESS_THRESHOLD:
            return {"a": [str(x) for x in a], "b": [str(x) for x in b], "psi(mid) - chord": fmt(gap)}
    return None


def _search_decrease(expr, t, params) -> dict | None:
    """A grid point t and coordinate i with psi(t + e_i) < psi(t), or None."""
    value = _numeric(expr, t, params)
    for a in itertools.product(_GRID, repeat=len(t)):
        for i in range(len(t)):
            b = tuple(x + (1 if j == i else 0) for j, x in enumerate(a))
            drop = value(a) - value(b)
            if drop > WITNESS_THRESHOLD:
                return {"t": [str(x) for x in a], "coordinate": i, "psi(t) - psi(t + e_i)": fmt(drop)}
    return None


def _result(name, statement, method, decisions, details, psi_label, k):
    return CheckResult(
        name=f"{name}[{psi_label},k={k}]",
        statement=statement,
        method=method,
        status=status_of(decisions),
        details=details,
        source=_SOURCE,
        evidence="exact",  # a pass is a sympy proof; the witness searches can only refute
    )


def _prepare(psi: PsiSpec, k: int, params: Mapping | None):
    """(label, params, t, psi_k(t) with Abs written as Max, details) shared by the two checkers."""
    label, fn = resolve_psi(psi)
    params = dict(_DEFAULT_PARAMS if params is None else params)
    t = t_symbols(k)
    expr = sp.sympify(fn(t)).replace(sp.Abs, lambda a: sp.Max(a, -a))
    return label, params, t, expr, {"expression": str(expr)}


@timed
def check_psi_convex(psi: PsiSpec = "infonce", *, k: int = 2, params: Mapping | None = None) -> CheckResult:
    """psi_k is convex on R^k (symbolic tau > 0, margin real); ``params`` fix them for witness searches."""
    label, params, t, expr, details = _prepare(psi, k, params)
    statement = rf"\psi_{{{k}}}\ \text{{({label}) is convex on }}\mathbb R^{{{k}}}"
    if expr.has(sp.Max, sp.Min, sp.Abs, sp.Piecewise, sp.Heaviside):
        structure = max_affine_terms(expr, t)
        decisions = []
        if structure is not None:
            decisions = [decide_nonnegative(c)[0] for c, _ in structure[0]]
            details["structure"] = f"sum of {len(structure[0])} max-of-affine terms + affine"
            details["coefficients >= 0"] = [VERDICT_WORDS[d] for d in decisions]
        if structure is None or not all(decisions):
            witness = _search_midpoint(expr, t, params)
            decisions = [False] if witness else [None]
            details["midpoint_witness"] = witness
        return _result("psi_convex", statement, "sympy max-of-affine structure; midpoint search (50 digits)", decisions, details, label, k)
    f, u, s, d = _log_coordinates(expr, t)
    hess = sp.Matrix(k, k, lambda i, j: d(d(f, j), i))
    decisions = []
    for r in range(1, k + 1):
        for rows in itertools.combinations(range(k), r):
            ok, info = decide_nonnegative(hess.extract(list(rows), list(rows)).det(), probes=_u_probes(u, params))
            decisions.append(ok)
            details[f"minor{rows}"] = VERDICT_WORDS[ok] if ok else {"verdict": VERDICT_WORDS[ok], **info}
    if any(x is None for x in decisions) and not any(x is False for x in decisions):
        witness = _search_midpoint(expr, t, params)
        details["midpoint_witness"] = witness
        if witness:
            decisions.append(False)
    return _result("psi_convex", statement, "sympy: principal minors of the Hessian in u = exp(t/tau) (Sylvester)", decisions, details, label, k)


@timed
def check_psi_monotone(psi: PsiSpec = "infonce", *, k: int = 2, params: Mapping | None = None) -> CheckResult:
    """psi_k is non-decreasing in every argument (gradient >= 0, or non-negative slopes of every piece)."""
    label, params, t, expr, details = _prepare(psi, k, params)
    statement = rf"\partial\psi_{{{k}}}/\partial t_i\ge0\ \text{{({label})}},\ i=1..{k}"
    if expr.has(sp.Max, sp.Min, sp.Abs, sp.Piecewise, sp.Heaviside):
        structure = max_affine_terms(expr, t)
        decisions = []
        if structure is not None:
            terms, remainder = structure
            # c max(a_l) is non-decreasing if c >= 0 and every a_l is, or c <= 0 and every a_l is non-increasing
            decisions = [decide_nonnegative(sp.diff(remainder, ti))[0] for ti in t]
            for c, pieces in terms:
                sign = 1 if decide_nonnegative(c)[0] else -1 if decide_nonnegative(-c)[0] else None
                decisions.append(None if sign is None else all(decide_nonnegative(sign * sp.diff(p, ti))[0] for p in pieces for ti in t) or None)
            details["structure"] = f"sum of {len(terms)} max-of-affine terms + affine"
        if structure is None or not all(decisions):
            witness = _search_decrease(expr, t, params)
            decisions = [False] if witness else [None]
            details["decrease_witness"] = witness
        return _result("psi_monotone", statement, "sympy max-of-affine slopes; one-step search (50 digits)", decisions, details, label, k)
    f, u, s, d = _log_coordinates(expr, t)
    decisions = []
    for i in range(k):
        ok, info = decide_nonnegative(d(f, i), probes=_u_probes(u, params))
        decisions.append(ok)
        details[f"d/dt{i + 1}"] = info.get("form") if ok else {"verdict": VERDICT_WORDS[ok], **info}
    return _result("psi_monotone", statement, "sympy: gradient in u = exp(t/tau), positivity of the factored form", decisions, details, label, k)


@timed
def check_psi_implementation(name: PsiName = "infonce", *, k: int = 2, tau: float = 0.5, margin: float = 1.0, impl=None, rng: np.random.Generator | None = None, num_points: int = 32) -> CheckResult:
    """ncgeom.losses' psi (or ``impl``) agrees with the docs/theory.md formula evaluated in 50 digits.

    Tolerance 64 eps * max(1, |psi|): a handful of float64 roundings in log-sum-exp.
    """
    impl = make_psi(name, tau=tau, margin=margin) if impl is None else impl
    rng = np.random.default_rng(0) if rng is None else rng
    t = t_symbols(k)
    exact = sp.lambdify(t, psi_expression(name, t, tau=sp.nsimplify(tau), margin=sp.nsimplify(margin)), "mpmath")
    pts = rng.uniform(-3.0, 3.0, size=(num_points, k))
    got = np.asarray(impl(pts), dtype=np.float64)
    with mpmath.workdps(DIGITS):
        ref = np.array([float(exact(*[mpmath.mpf(float(x)) for x in p])) for p in pts])
    tol = 64 * np.finfo(np.float64).eps * np.maximum(1.0, np.abs(ref))
    err = np.abs(got - ref)
    worst = int(np.argmax(err / tol))
    return CheckResult(
        name=f"psi_implementation[{name},k={k}]",
        statement=rf"\texttt{{ncgeom.losses}}\ \psi_{{{k}}}\ (\text{{{name}}}) = \text{{docs/theory.md section 2 formula}}",
        method="float64 implementation vs 50-digit mpmath evaluation of the sympy formula",
        status="pass" if bool(np.all(err <= tol)) else "fail",
        details={"tau": tau, "margin": margin, "num_points": num_points, "max_abs_error": float(err.max()), "worst_point": pts[worst].tolist()},
        source=_SOURCE + "; ncgeom.losses.psi",
        evidence="independent",
    )
