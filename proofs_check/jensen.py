"""The Jensen step of Theorems 2 and 3, checked exactly on random finite models.

docs/theory.md section 4, Theorem 2, proof steps 1-2 (Jensen, exchangeability), and Theorem 3, proof
step 1 (conditional Jensen). For a finite model (:class:`proofs_check.harris.FiniteModel`: rational Gram
matrix, labels, rational masses), with t_i = S_i - s^+ the anchor's similarity to its i-th negative
minus its similarity to its positive (drawn from the anchor's class, independently of the anchor):

.. math::

    \\text{SCL: } (\\mathbb E\\,t)_i = \\bar m\\ \\forall i, \\qquad
    L_{\\mathrm{SCL}} = \\mathbb E\\,\\psi_k(t) \\ge \\psi_k(\\mathbb E\\,t);

    \\text{UCL: } \\mathbb E[t_i \\mid c, c_1..c_k] = M_{cc_i} - M_{cc}, \\qquad
    \\mathbb E[\\psi_k(t) \\mid c, c_1..c_k] \\ge \\psi_k\\big((M_{cc_i} - M_{cc})_i\\big),

where M is the Gram matrix of the class means and (c, c_1..c_k) are the classes of the anchor and of
the k i.i.d. marginal negatives; averaged over the classes, L_UCL >= G(M) (docs/theory.md section 6,
F_UCL). Everything is exact: psi is piecewise-linear and convex in ``fractions.Fraction`` (the triplet
hinge, a random sum of maxima of affine functions), or infonce in mpmath interval arithmetic (an
inequality is proven when the two enclosures are ordered, refuted when they are ordered the other way,
undecided otherwise). Where the conditional law of t is a point mass, equality is exact and no
comparison is needed. A non-convex psi breaks the step, and the check must then report ``fail``.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Sequence
from fractions import Fraction
from typing import Any

import mpmath
import numpy as np

from ncgeom.validate import require_int
from proofs_check.harris import FiniteModel, hinge_psi, random_model
from proofs_check.records import CheckResult, Status, timed

__all__ = [
    "SEED",
    "random_convex_psi",
    "infonce_interval_psi",
    "class_mean_gram",
    "jensen_sides",
    "check_jensen_step",
    "checks",
]

SEED = 20251129
"""Seed of the Generators that :func:`checks` passes to the randomized checker."""

_SOURCE = "docs/theory.md section 4, Theorem 2 (proof steps 1-2) and Theorem 3 (proof step 1); jiang2025hard, Theorems 2-3"
_INTERVAL_PRECISION = 96  # bits of the mpmath interval enclosures (gaps are >> 2^-60 on these models)

Value = Any  # a Fraction, or an mpmath interval (mpmath.iv.mpf)


def random_convex_psi(num_negatives: int, *, rng: np.random.Generator, num_terms: int = 2, num_pieces: int = 3) -> Callable[[tuple], Fraction]:
    """psi(t) = sum_j c_j max_l (a_jl . t + b_jl) with c_j >= 0: convex, not monotone in general, exact.

    Slopes a_jl in {-2..2}^k / 2, offsets b_jl in {-4..4} / 4, weights c_j in {1, 2, 3} / 2.
    """
    k = require_int("num_negatives", num_negatives, min_value=1)
    slopes = [[[Fraction(int(x), 2) for x in rng.integers(-2, 3, size=k)] for _ in range(num_pieces)] for _ in range(num_terms)]
    offsets = [[Fraction(int(x), 4) for x in rng.integers(-4, 5, size=num_pieces)] for _ in range(num_terms)]
    weights = [Fraction(int(x), 2) for x in rng.integers(1, 4, size=num_terms)]

    def psi(t: tuple) -> Fraction:
        return sum((c * max(sum((a * x for a, x in zip(row, t)), b) for row, b in zip(rows, bs))
                    for c, rows, bs in zip(weights, slopes, offsets)), Fraction(0))

    return psi


def _interval(x: Value):
    """An mpmath interval enclosing x (a Fraction or already an interval)."""
    if isinstance(x, Fraction):
        return mpmath.iv.mpf(x.numerator) / mpmath.iv.mpf(x.denominator)
    return x


def infonce_interval_psi(tau: Fraction = Fraction(1)) -> Callable[[tuple], Any]:
    """infonce log(1 + sum_i e^(t_i / tau)) (docs/theory.md section 2) as an mpmath interval enclosure."""
    inv_tau = _interval(1 / Fraction(tau))

    def psi(t: tuple):
        return mpmath.iv.log(1 + sum((mpmath.iv.exp(_interval(x) * inv_tau) for x in t), mpmath.iv.mpf(0)))

    return psi


def _expect(law: dict, psi: Callable) -> Value:
    """sum_t law[t] psi(t): exact if every value is a Fraction, else an interval enclosure."""
    values = [(q, psi(t)) for t, q in law.items()]
    if all(isinstance(v, Fraction) for _, v in values):
        return sum((q * v for q, v in values), Fraction(0))
    return sum((_interval(q) * _interval(v) for q, v in values), mpmath.iv.mpf(0))


def _mean(law: dict, k: int) -> tuple[Fraction, ...]:
    return tuple(sum((q * t[i] for t, q in law.items()), Fraction(0)) for i in range(k))


def _at_least(lhs: Value, rhs: Value) -> bool | None:
    """lhs >= rhs: decided exactly for Fractions, by ordered enclosures for intervals (None: undecided)."""
    if isinstance(lhs, Fraction) and isinstance(rhs, Fraction):
        return lhs >= rhs
    gap = _interval(lhs) - _interval(rhs)
    if gap.a >= 0:
        return True
    if gap.b < 0:
        return False
    return None


def _status(decisions: Sequence[bool | None]) -> Status:
    """fail if a statement is refuted, unresolved if one is undecided, else pass."""
    return "fail" if any(d is False for d in decisions) else "unresolved" if any(d is None for d in decisions) else "pass"


def _masses(model: FiniteModel) -> tuple[list[Fraction], dict[int, Fraction]]:
    n = len(model.labels)
    point = [model.mass(i) for i in range(n)]
    cls: dict[int, Fraction] = {}
    for i, c in enumerate(model.labels):
        cls[c] = cls.get(c, Fraction(0)) + point[i]
    return point, cls


def class_mean_gram(model: FiniteModel) -> dict[tuple[int, int], Fraction]:
    """M[a, b] = <mu_a, mu_b> = sum_{i in a, j in b} m_i m_j G_ij / (lambda_a lambda_b), exactly."""
    point, cls = _masses(model)
    n = len(model.labels)
    out: dict[tuple[int, int], Fraction] = {}
    for a in cls:
        for b in cls:
            total = sum((point[i] * point[j] * model.gram[i][j] for i in range(n) for j in range(n)
                         if model.labels[i] == a and model.labels[j] == b), Fraction(0))
            out[a, b] = total / (cls[a] * cls[b])
    return out


def _add(law: dict, key: tuple, q: Fraction) -> None:
    law[key] = law.get(key, Fraction(0)) + q


def _scl_law(model: FiniteModel, k: int) -> dict:
    """The law of t = (S_i - s^+)_i under the SCL sampling (anchor, label positive, k i.i.d. negatives)."""
    point, cls = _masses(model)
    n = len(model.labels)
    law: dict = {}
    for a in range(n):
        own = model.labels[a]
        positives = [(p, point[p] / cls[own]) for p in range(n) if model.labels[p] == own]
        other = 1 - cls[own]
        negatives = [(m, point[m] / other) for m in range(n) if model.labels[m] != own]
        for p, qp in positives:
            for combo in itertools.product(negatives, repeat=k):
                q = point[a] * qp * functools.reduce(lambda x, y: x * y, (qm for _, qm in combo), Fraction(1))
                _add(law, tuple(model.gram[a][m] - model.gram[a][p] for m, _ in combo), q)
    return law


def _ucl_conditional_law(model: FiniteModel, classes: tuple[int, ...]) -> dict:
    """The law of t given the classes (c, c_1..c_k): anchor and positive independent in c, negative i in c_i."""
    point, cls = _masses(model)
    n = len(model.labels)
    members = {c: [(i, point[i] / cls[c]) for i in range(n) if model.labels[i] == c] for c in cls}
    c, negs = classes[0], classes[1:]
    law: dict = {}
    for (a, qa), (p, qp) in itertools.product(members[c], repeat=2):
        for combo in itertools.product(*(members[ci] for ci in negs)):
            q = qa * qp * functools.reduce(lambda x, y: x * y, (qm for _, qm in combo), Fraction(1))
            _add(law, tuple(model.gram[a][m] - model.gram[a][p] for m, _ in combo), q)
    return law


def jensen_sides(model: FiniteModel, psi: Callable, *, num_negatives: int) -> dict[str, Any]:
    """Both sides of each Jensen inequality of the module docstring, and the mean identities.

    Returns {"scl": (E psi(t), psi(E t), E t), "ucl": {classes: (E[psi | classes], psi(M_cc_i - M_cc),
    E[t | classes], M_cc_i - M_cc, t constant given the classes)}, "class_weight": {classes: lambda_c
    prod_i lambda_c_i}}.
    """
    k = require_int("num_negatives", num_negatives, min_value=1)
    _, cls = _masses(model)
    law = _scl_law(model, k)
    mean = _mean(law, k)
    out: dict[str, Any] = {"scl": (_expect(law, psi), psi(mean), mean, len(law) == 1), "ucl": {}, "class_weight": {}}
    m = class_mean_gram(model)
    for classes in itertools.product(sorted(cls), repeat=k + 1):
        cond = _ucl_conditional_law(model, classes)
        c = classes[0]
        target = tuple(m[c, ci] - m[c, c] for ci in classes[1:])
        out["ucl"][classes] = (_expect(cond, psi), psi(target), _mean(cond, k), target, len(cond) == 1)
        out["class_weight"][classes] = functools.reduce(lambda x, y: x * y, (cls[ci] for ci in classes), Fraction(1))
    return out


def _class_averages(sides: dict[str, Any], weights: dict) -> tuple[Value, Value]:
    """(sum_w w E[psi | classes], sum_w w psi(M_cc_i - M_cc)) over the class tuples of ``weights``."""
    ucl = sides["ucl"]
    return _expect(weights, lambda c: ucl[c][0]), _expect(weights, lambda c: ucl[c][1])


def _trial_psi(trial: int, k: int, rng: np.random.Generator) -> tuple[str, Callable]:
    """The default psi of a trial, cycling: triplet hinge, random max-of-affine, infonce (interval)."""
    kind = trial % 3
    if kind == 0:
        return "triplet", hinge_psi(Fraction(int(rng.integers(1, 9)), 4))
    if kind == 1:
        return "max-of-affine", random_convex_psi(k, rng=rng)
    tau = Fraction(1, int(rng.integers(1, 3)))
    return f"infonce(tau={tau})", infonce_interval_psi(tau)


@timed
def check_jensen_step(
    *,
    rng: np.random.Generator,
    num_trials: int = 6,
    num_negatives: int = 2,
    model: FiniteModel | Callable | None = None,
    psi: Callable | None = None,
) -> CheckResult:
    """The Jensen step of Theorems 2 and 3, exactly, on random (or given) finite models and convex psi.

    Per trial: :func:`random_model` (6 points, 3 balanced classes) unless ``model`` is given (an object or
    a function of ``rng``); psi cycles through the triplet hinge, :func:`random_convex_psi` and
    :func:`infonce_interval_psi` unless ``psi`` is given (Fraction- or interval-valued, t -> psi_k(t)).
    Decides (module docstring): the SCL inequality and exchangeability; for every class tuple, the
    conditional mean identity and the conditional inequality; and L_UCL >= G(M).
    """
    num_trials = require_int("num_trials", num_trials, min_value=1)
    k = require_int("num_negatives", num_negatives, min_value=1)
    decisions: list[bool | None] = []
    counts = {"scl_inequalities": 0, "conditional_inequalities": 0, "exact_equalities": 0, "undecided": 0}
    kinds: set[str] = set()
    witness = None
    previous, mpmath.iv.prec = mpmath.iv.prec, _INTERVAL_PRECISION  # restored below: the interval context is global
    try:
        for trial in range(num_trials):
            mdl = model(rng) if callable(model) else (model or random_model(rng=rng))
            label, ps = ("given", psi) if psi is not None else _trial_psi(trial, k, rng)
            kinds.add(label)
            ps = functools.cache(ps)  # the SCL and conditional laws share many t-tuples
            sides = jensen_sides(mdl, ps, num_negatives=k)
            lhs, rhs, mean, constant = sides["scl"]
            found: list[tuple[str, bool | None]] = [("scl: (E t)_i all equal", len(set(mean)) == 1),
                                                    ("scl: E psi(t) >= psi(E t)", True if constant else _at_least(lhs, rhs))]
            counts["scl_inequalities"] += 1
            for classes, (c_lhs, c_rhs, c_mean, target, c_constant) in sides["ucl"].items():
                found.append((f"ucl {classes}: E[t | classes] = M_cc_i - M_cc", c_mean == target))
                found.append((f"ucl {classes}: E[psi | classes] >= psi(M_cc_i - M_cc)", True if c_constant else _at_least(c_lhs, c_rhs)))
                counts["conditional_inequalities"] += 1
                counts["exact_equalities"] += c_constant
            # L_UCL >= G(M): class-weighted averages; a class tuple with constant t has lhs = rhs exactly and
            # cancels, so only the others are compared (all constant: equality, exactly)
            varying = {c: w for c, w in sides["class_weight"].items() if not sides["ucl"][c][4]}
            found.append(("ucl: L_UCL >= G(M)", _at_least(*_class_averages(sides, varying)) if varying else True))
            for what, ok in found:
                decisions.append(ok)
                counts["undecided"] += ok is None
                if ok is False and witness is None:
                    witness = {"trial": trial, "psi": label, "statement": what, "labels": list(mdl.labels),
                               "gram": [[str(x) for x in row] for row in mdl.gram]}
    finally:
        mpmath.iv.prec = previous
    return CheckResult(
        name=f"jensen_step[k={k}]",
        statement=(r"\psi_k\ \text{convex}:\ \mathbb E\,\psi_k(t)\ge\psi_k(\mathbb E\,t),\ (\mathbb E\,t)_i=\bar m"
                   r"\ (\text{Thm 2, steps 1-2});\ \mathbb E[t_i\mid c,c_{1..k}]=M_{cc_i}-M_{cc},\ "
                   r"\mathbb E[\psi_k(t)\mid c,c_{1..k}]\ge\psi_k\big((M_{cc_i}-M_{cc})_i\big)\ (\text{Thm 3, step 1})"
                   r"\ (\text{exact on " + f"{num_trials} random finite models, k = {k}" + r"})"),
        method="exact-fraction (piecewise-linear psi) + mpmath interval enclosures (infonce)",
        status=_status(decisions),
        details={"trials": num_trials, "num_negatives": k, "psi": sorted(kinds), **counts, "witness": witness},
        source=_SOURCE,
        evidence="exact",
    )


def checks(*, quick: bool) -> list[Callable[[], CheckResult]]:
    """The Jensen-step checks; each gets its own Generator seeded from SEED."""
    gen = lambda i: np.random.default_rng([SEED, i])  # noqa: E731
    cases: Sequence[tuple[int, int]] = ((2, 12),) if quick else ((2, 48), (3, 24))
    return [functools.partial(check_jensen_step, rng=gen(k), num_trials=trials, num_negatives=k) for k, trials in cases]
