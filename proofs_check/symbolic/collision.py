"""The collision probability at NC, derived from the tilted law over the ETF vertices.

docs/theory.md sections 3-5: at NC every point of class c sits at the ETF vertex v_c, so a negative's law
is a law over classes. Given the anchor class c, the base law is uniform over the other classes (SCL,
HSCL) or over all classes (UCL, HUCL); hardening tilts it by eta(<v_c, v_c'>) = exp(beta G[c, c']):

.. math:: q(c') \\propto e^{\\beta G_{cc'}}\\, p(c'),\\qquad
          \\pi_\\beta = q(c) = \\frac{e^\\beta}{e^\\beta + (C-1)e^{-\\beta/(C-1)}}\\ \\text{(HUCL)},

and 0 (SCL, HSCL: the own class is not eligible), 1/C (UCL). pi_0 = 1/C and pi_beta increases with beta:
d pi/d beta = pi (1 - pi) C/(C-1) > 0, which is why L_HUCL(NC) > L_UCL(NC) for beta > 0.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import mpmath
import numpy as np
import sympy as sp

from ncgeom.theory import collision_probability as ncgeom_collision_probability
from ncgeom.vocabulary import SETTINGS, is_hard, is_supervised
from proofs_check.records import CheckResult, timed
from proofs_check.symbolic.decide import DIGITS, VERDICT_WORDS, decide_nonnegative, decide_zero, status_of, to_sympy
from proofs_check.symbolic.etf import C_SYMBOL, exact_etf_gram

__all__ = [
    "BETA",
    "negative_class_law",
    "theory_collision_probability",
    "check_collision_probability_symbolic",
    "check_collision_probability",
]

BETA = sp.Symbol("beta", nonnegative=True)
_SOURCE = "docs/theory.md sections 3-5 (HUCL at NC); jiang2025hard, HUCL discussion"


def negative_class_law(setting: str, *, num_classes: int, anchor: int = 0, beta=BETA) -> list[sp.Expr]:
    """Exact law [C] of a negative's class at NC for an anchor of class ``anchor`` (sympy expressions).

    q(c') = exp(b G[anchor, c']) p(c') / Z with G the exact ETF Gram, p uniform over c' != anchor
    (scl, hscl) or over all classes (ucl, hucl), b = ``beta`` for hard settings and 0 otherwise.
    """
    if setting not in SETTINGS:
        raise ValueError(f"setting must be one of {SETTINGS}, got {setting!r}")
    g = exact_etf_gram(num_classes)
    b = to_sympy(beta) if is_hard(setting) else sp.Integer(0)
    base = [0 if (is_supervised(setting) and c == anchor) else 1 for c in range(num_classes)]
    w = [base[c] * sp.exp(b * g[anchor, c]) for c in range(num_classes)]
    z = sum(w)
    return [x / z for x in w]


def theory_collision_probability(setting: str, c, beta) -> sp.Expr:
    """docs/theory.md section 5: 0 (SCL, HSCL), 1/C (UCL), pi_beta (HUCL), as a sympy expression."""
    if is_supervised(setting):
        return sp.Integer(0)
    if not is_hard(setting):  # UCL: uniform negatives
        return 1 / sp.sympify(c)
    return sp.exp(beta) / (sp.exp(beta) + (c - 1) * sp.exp(-beta / (c - 1)))


@timed
def check_collision_probability_symbolic(*, sizes: Sequence[int] = (2, 3, 4, 5), expected: Callable = theory_collision_probability) -> CheckResult:
    """For symbolic beta and each C in ``sizes``: q(anchor class) from the tilted ETF law = ``expected``.

    Also, for symbolic C and beta: expected(hucl) at beta = 0 is 1/C (= UCL) and
    d/dbeta expected = expected (1 - expected) C/(C-1) >= 0.
    """
    details, decisions = {}, []
    for n in sizes:
        for setting in SETTINGS:
            derived = negative_class_law(setting, num_classes=n, beta=BETA)[0]
            ok, info = decide_zero(derived - expected(setting, sp.Integer(n), BETA))
            decisions.append(ok)
            details[f"{setting},C={n}"] = VERDICT_WORDS[ok] if ok else {"verdict": VERDICT_WORDS[ok], "derived": str(derived), **info}
    c = C_SYMBOL
    pi = expected("hucl", c, BETA)
    at_zero, _ = decide_zero(pi.subs(BETA, 0) - 1 / c)
    slope = sp.diff(pi, BETA)
    logistic, _ = decide_zero(slope - pi * (1 - pi) * c / (c - 1))
    increasing, _ = decide_nonnegative(slope.subs(c, sp.Symbol("C1", positive=True) + 1))  # C >= 2 <=> C - 1 > 0
    details.update({"pi_0 = 1/C": VERDICT_WORDS[at_zero], "dpi/dbeta = pi(1-pi)C/(C-1)": VERDICT_WORDS[logistic], "dpi/dbeta >= 0": VERDICT_WORDS[increasing]})
    decisions += [at_zero, logistic, increasing]
    return CheckResult(
        name="collision_probability_symbolic",
        statement=r"q_\beta(c\mid c)=\pi_\beta=\frac{e^\beta}{e^\beta+(C-1)e^{-\beta/(C-1)}}\ (\mathrm{HUCL}),\ \tfrac1C\ (\mathrm{UCL}),\ 0\ (\mathrm{SCL,HSCL});\ \pi_0=\tfrac1C,\ \partial_\beta\pi_\beta\ge0",
        method="sympy (symbolic beta; exact ETF Gram for each C; symbolic C for pi_0 and the slope)",
        status=status_of(decisions),
        details=details,
        source=_SOURCE,
        evidence="exact",
    )


_DEFAULT_POINTS = tuple((n, b) for n in (2, 3, 5, 10) for b in (0, sp.Rational(1, 2), 2, 10))


@timed
def check_collision_probability(*, points: Sequence[tuple] = _DEFAULT_POINTS, collision_probability: Callable | None = None) -> CheckResult:
    """ncgeom.theory.collision_probability (or the given function) = the derived law, 50-digit reference.

    ``points`` are (C, beta) with beta exact (int or sympy Rational with a float64-exact value).
    Tolerance 64 eps relative: a logistic function evaluated in float64.
    """
    if collision_probability is None:
        collision_probability = ncgeom_collision_probability
    eps = np.finfo(np.float64).eps
    worst, failures = 0.0, []
    laws = {}
    for n, b in points:
        for setting in SETTINGS:
            if (setting, n) not in laws:  # the exact law with symbolic beta, evaluated by mpmath
                laws[setting, n] = sp.lambdify(BETA, negative_class_law(setting, num_classes=n)[0], "mpmath")
            with mpmath.workdps(DIGITS):
                ref = mpmath.mpf(laws[setting, n](mpmath.mpf(to_sympy(b).p) / to_sympy(b).q))
            got = collision_probability(setting, num_classes=n, beta=float(b))
            err = float(abs(mpmath.mpf(got) - ref))
            rel = err / max(float(ref), np.finfo(np.float64).tiny)
            worst = max(worst, rel)
            if rel > 64 * eps:
                failures.append({"setting": setting, "C": n, "beta": str(b), "got": got, "reference": mpmath.nstr(ref, 20)})
    return CheckResult(
        name="collision_probability",
        statement=r"\texttt{collision\_probability}(S, C, \beta) = q_\beta(c\mid c)\ \text{of the tilted ETF law}",
        method="float64 implementation vs 50-digit evaluation of the exact tilted law (sympy/mpmath)",
        status="fail" if failures else "pass",
        details={"num_points": len(points) * len(SETTINGS), "max_rel_error": worst, "tolerance": 64 * eps, "failures": failures[:5]},
        source=_SOURCE + "; ncgeom.theory.collision_probability",
        evidence="independent",
    )
