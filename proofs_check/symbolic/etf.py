"""The simplex ETF and its Gram matrix: symbolic in C, exact for each C, and ncgeom's float64 frame.

docs/theory.md section 4 ("Neural collapse"): a unit simplex ETF {v_c} has ||v_c|| = 1,
<v_c, v_c'> = -1/(C-1) (c != c'), sum_c v_c = 0; it exists iff d >= C - 1; its Gram matrix is

.. math:: G = \\frac{C}{C-1} I - \\frac{1}{C-1} \\mathbf{1}\\mathbf{1}^T,

with eigenvalues C/(C-1) (multiplicity C-1) and 0. Every checker takes the object it checks as an
argument (the coefficients, the Gram builder, the frame builder, the claimed dimension threshold), so
that a test can feed it a false statement and see ``fail``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from fractions import Fraction
from typing import Any

import numpy as np
import sympy as sp

from ncgeom.geometry import simplex_etf
from proofs_check.records import CheckResult, Status, timed
from proofs_check.symbolic.decide import VERDICT_WORDS, decide_zero

__all__ = [
    "C_SYMBOL",
    "etf_gram_coefficients",
    "construction_inner_products",
    "exact_etf_gram",
    "check_etf_gram_symbolic",
    "check_etf_gram_exact",
    "check_etf_existence",
    "check_simplex_etf_gram",
]

C_SYMBOL = sp.Symbol("C", integer=True, positive=True)
"""The number of classes as a sympy symbol (C >= 2 where it matters)."""

_SOURCE = "docs/theory.md section 4 (Neural collapse); jiang2025hard, NC definition"


def etf_gram_coefficients(c) -> tuple[sp.Expr, sp.Expr]:
    """(a, b) with G = a I + b 11^T: a = C/(C-1), b = -1/(C-1) (docs/theory.md section 4)."""
    return c / (c - 1), -1 / (c - 1)


def exact_etf_gram(num_classes: int) -> sp.Matrix:
    """The ETF Gram C/(C-1) I - 1/(C-1) 11^T as an exact rational sympy matrix [C, C]."""
    a, b = etf_gram_coefficients(sp.Integer(num_classes))
    return a * sp.eye(num_classes) + b * sp.ones(num_classes, num_classes)


def construction_inner_products(c) -> tuple[sp.Expr, sp.Expr]:
    """(<v_c, v_c>, <v_c, v_c'>) of v_c = sqrt(C/(C-1)) (e_c - 1/C) in R^C, by counting coordinates.

    This is the construction of :func:`ncgeom.geometry.simplex_etf` (docs/theory.md section 4). The
    inner product sum_j (e_c - 1/C)_j (e_c' - 1/C)_j splits into the coordinates j = c, j = c' and the
    others: (1 - 1/C)^2 + (C - 1)/C^2 when c = c'; 2 (1 - 1/C)(-1/C) + (C - 2)/C^2 when c != c'.
    """
    scale = c / (c - 1)  # the square of the normalization sqrt(C/(C-1))
    same = (1 - 1 / c) ** 2 + (c - 1) / c**2
    other = 2 * (1 - 1 / c) * (-1 / c) + (c - 2) / c**2
    return scale * same, scale * other


@timed
def check_etf_gram_symbolic(
    *,
    coefficients: Callable = etf_gram_coefficients,
    construction: Callable = construction_inner_products,
    eigenvalue: Callable = lambda c: c / (c - 1),
) -> CheckResult:
    """For symbolic C: G = aI + b11^T is the Gram of the construction, unit and equiangular, with G1 = 0 and
    spectrum {eigenvalue(C) (C-1 times), 0}.

    ``coefficients(C) -> (a, b)`` is the claimed Gram; ``construction(C)`` the diagonal and off-diagonal
    inner products of the explicit vectors (default :func:`construction_inner_products`, computed from
    the coordinates, not from a and b); ``eigenvalue(C)`` the claimed non-zero eigenvalue. Identities:

    - a + b = <v_c, v_c> and b = <v_c, v_c'>: the claimed matrix is the construction's Gram;
    - a + b = 1 and b = -1/(C-1): the construction is a unit simplex ETF (the definition);
    - a + bC = 0: G1 = 0 (11^T x = (1^T x) 1 and 1^T 1 = C, so G acts as a + bC on span(1));
    - power sums: tr G = C(a + b) and tr G^2 = C(a + b)^2 + C(C-1)b^2 (from the entries) equal
      (C-1) lambda and (C-1) lambda^2 for the claimed spectrum {lambda^(C-1), 0}. G acts as a on the
      (C-1)-dimensional 1^perp and as a + bC = 0 on span(1), so these two sums pin lambda = a and the
      multiplicities: a wrong claimed eigenvalue, or a wrong matrix, breaks them.
    """
    c = C_SYMBOL
    a, b = (sp.sympify(x) for x in coefficients(c))
    diag, off = (sp.sympify(x) for x in construction(c))
    lam = sp.sympify(eigenvalue(c))
    identities = {
        "a + b = <v_c, v_c> (construction)": a + b - diag,
        "b = <v_c, v_c'> (construction)": b - off,
        "unit: <v_c, v_c> = 1": diag - 1,
        "equiangular: <v_c, v_c'> = -1/(C-1)": off + 1 / (c - 1),
        "G 1 = (a + b C) 1 = 0": a + b * c,
        "tr G = (C-1) lambda": c * (a + b) - (c - 1) * lam,
        "tr G^2 = (C-1) lambda^2": c * (a + b) ** 2 + c * (c - 1) * b**2 - (c - 1) * lam**2,
    }
    details: dict[str, Any] = {"a": str(a), "b": str(b), "lambda": str(lam)}
    status: Status = "pass"
    for label, residual in identities.items():
        ok, info = decide_zero(residual)
        details[label] = VERDICT_WORDS[ok]
        if ok is False:
            status = "fail"
            details[label + " witness"] = info
        elif ok is None and status == "pass":
            status = "unresolved"
    details["spectrum"] = "a on 1^perp (multiplicity C-1), a + bC on span(1)"
    return CheckResult(
        name="etf_gram_symbolic",
        statement=r"G=\tfrac{C}{C-1}I-\tfrac{1}{C-1}\mathbf{1}\mathbf{1}^T=(\langle v_c,v_{c'}\rangle),\ v_c=\sqrt{\tfrac C{C-1}}(e_c-\tfrac1C\mathbf 1):\ G_{cc}=1,\ G_{cc'}=-\tfrac1{C-1},\ G\mathbf 1=0,\ \mathrm{spec}\,G=\{\tfrac{C}{C-1}^{(C-1)},0\},\ \forall C\ge2",
        method="sympy (symbolic C; construction's inner products by coordinate counting; power sums of the spectrum)",
        status=status,
        details=details,
        source=_SOURCE + "; ncgeom.geometry.simplex_etf (construction)",
        evidence="exact",
    )


@timed
def check_etf_gram_exact(*, sizes: Sequence[int] = range(2, 17), gram: Callable[[int], sp.Matrix] = exact_etf_gram, charpoly_max: int = 8) -> CheckResult:
    """Exactly (rationals) for each C in ``sizes``: ``gram(C)`` is the unit ETF Gram with the stated spectrum.

    Checks G_cc = 1, G_cc' = -1/(C-1), G1 = 0 and G(e_i - e_{i+1}) = C/(C-1)(e_i - e_{i+1}) for the
    C-1 independent vectors e_i - e_{i+1} spanning 1^perp (a complete eigenbasis); for C <= charpoly_max
    also the characteristic polynomial x (x - C/(C-1))^(C-1), an independent method.
    """
    x = sp.Symbol("x")
    failures, checked = [], []
    for n in sizes:
        g = sp.Matrix(gram(n))
        lam = sp.Rational(n, n - 1)
        problems = []
        if g.shape != (n, n):
            problems.append(f"shape {g.shape}")
        else:
            if any(g[i, i] != 1 for i in range(n)):  # exact Rationals: structural equality is equality
                problems.append("diagonal not 1")
            if any(g[i, j] != sp.Rational(-1, n - 1) for i in range(n) for j in range(n) if i != j):
                problems.append("off-diagonal not -1/(C-1)")
            if not (g * sp.ones(n, 1)).is_zero_matrix:
                problems.append("G 1 != 0")
            for i in range(n - 1):
                v = sp.zeros(n, 1)
                v[i], v[i + 1] = 1, -1
                if not (g * v - lam * v).is_zero_matrix:
                    problems.append(f"G v != C/(C-1) v for v = e_{i} - e_{i + 1}")
                    break
            if n <= charpoly_max:
                cp = g.charpoly(x).as_expr()
                if sp.expand(cp - x * (x - lam) ** (n - 1)) != 0:
                    problems.append(f"charpoly {sp.factor(cp)}")
        checked.append(n)
        if problems:
            failures.append({"C": n, "problems": problems})
    return CheckResult(
        name="etf_gram_exact",
        statement=r"\mathrm{spec}\big(\tfrac{C}{C-1}I-\tfrac{1}{C-1}\mathbf{1}\mathbf{1}^T\big)=\{\tfrac{C}{C-1}^{(C-1)},0^{(1)}\},\ \text{rows sum to }0",
        method="exact rationals (sympy): eigenbasis {1, e_i - e_{i+1}}; characteristic polynomial for small C",
        status="fail" if failures else "pass",
        details={"sizes": checked, "charpoly_max": charpoly_max, "failures": failures},
        source=_SOURCE,
        evidence="exact",
    )


@timed
def check_etf_existence(*, sizes: Sequence[int] = range(2, 17), min_dim: Callable[[int], int] = lambda c: c - 1, gram: Callable[[int], sp.Matrix] = exact_etf_gram) -> CheckResult:
    """A unit simplex ETF of C vectors exists in R^d iff d >= ``min_dim(C)`` (claimed C - 1).

    A Gram matrix is realized by vectors in R^d iff it is PSD with rank <= d; so the claim holds iff
    the exact ETF Gram is PSD with rank exactly min_dim(C).
    """
    failures, ranks = [], {}
    for n in sizes:
        g = sp.Matrix(gram(n))
        psd = g.is_positive_semidefinite
        rank = ranks[str(n)] = g.rank()
        claimed = min_dim(n)
        if psd is not True or rank != claimed:
            failures.append({"C": n, "psd": psd, "rank": rank, "claimed_min_dim": claimed})
    return CheckResult(
        name="etf_existence",
        statement=r"\exists\ \text{unit simplex ETF of } C \text{ vectors in } \mathbb{R}^d \iff d\ge C-1",
        method="exact rationals (sympy): Gram PSD and rank(G) = C - 1",
        status="fail" if failures else "pass",
        details={"ranks": ranks, "failures": failures},
        source=_SOURCE,
        evidence="exact",
    )


def _exact_gram_of_floats(v: np.ndarray) -> list[list[Fraction]]:
    """V V^T computed exactly from the binary values of the float64 entries of V."""
    rows = [[Fraction(float(x)) for x in row] for row in v]
    return [[sum((a * b for a, b in zip(r, s)), Fraction(0)) for s in rows] for r in rows]


@timed
def check_simplex_etf_gram(
    *,
    sizes: Sequence[int] = range(2, 17),
    extra_dims: Sequence[int] = (0, 2),
    etf: Callable = simplex_etf,
    rng: np.random.Generator | None = None,
) -> CheckResult:
    """The Gram of ``etf(C, d, rng=rng)`` (default ncgeom.geometry.simplex_etf) equals the exact ETF Gram.

    For d = C - 1 + extra, the Gram V V^T is computed exactly from the float64 entries (Fractions), so
    the only error measured is the representation error of the frame. Tolerance: 8 (d + 1) eps, the
    rounding of d-term dot products of unit vectors built from a QR factorization in float64.
    """
    eps = np.finfo(np.float64).eps
    worst, failures = 0.0, []
    for n in sizes:
        for extra in extra_dims:
            d = n - 1 + extra
            v = np.asarray(etf(n, d, rng=rng), dtype=np.float64)
            if v.shape != (n, d):
                failures.append({"C": n, "d": d, "problem": f"shape {v.shape}, expected {(n, d)}"})
                continue
            g = _exact_gram_of_floats(v)
            target = [[Fraction(1) if i == j else Fraction(-1, n - 1) for j in range(n)] for i in range(n)]
            err = float(max(abs(g[i][j] - target[i][j]) for i in range(n) for j in range(n)))
            worst = max(worst, err)
            if err > 8 * (d + 1) * eps:
                failures.append({"C": n, "d": d, "max_abs_error": err, "tolerance": 8 * (d + 1) * eps})
    return CheckResult(
        name="simplex_etf_gram",
        statement=r"V=\texttt{simplex\_etf}(C,d):\ VV^T=\tfrac{C}{C-1}I-\tfrac1{C-1}\mathbf 1\mathbf 1^T",
        method="exact Fraction Gram of the float64 frame vs the exact ETF Gram",
        status="fail" if failures else "pass",
        details={"sizes": list(sizes), "extra_dims": list(extra_dims), "rotated": rng is not None, "max_abs_error": worst, "failures": failures},
        source=_SOURCE + "; ncgeom.geometry.simplex_etf",
        evidence="independent",
    )
