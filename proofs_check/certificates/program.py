"""The Jensen-reduced Gram programs of docs/theory.md section 6, as data, numpy functions and cvxpy problems.

After Jensen's inequality over the within-class randomness, the population loss of a setting is bounded
below by a convex function of the class-mean Gram matrix M [C, C] (PSD, diag <= 1 on the ball, = 1 on
the sphere):

.. math::

    F_{\\mathrm{SCL}}(M) = \\frac1C \\sum_{c} \\mathbb{E}_{c_1..c_k \\sim U(\\{c' \\ne c\\})}
        \\psi_k\\big((M_{c c_i} - 1)_{i}\\big), \\qquad
    F_{\\mathrm{UCL}}(M) = \\frac1C \\sum_{c} \\mathbb{E}_{c_1..c_k \\sim U(\\{1..C\\})}
        \\psi_k\\big((M_{c c_i} - M_{cc})_{i}\\big)

where C = ``num_classes``, k = ``num_negatives`` and psi is a built-in (docs/theory.md section 2). The
expectation over the C^k (or (C-1)^k) negative tuples is written as a sum over multisets of negative
classes with multinomial weights (psi is symmetric), so a program has C * binom(C'+k-1, k) terms
(C' = C or C-1) instead of C^(k+1).

Sources: docs/theory.md section 6 (programs), section 4 (Theorems 2 and 3: outline of the Jensen step).
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from ncgeom.losses import make_psi
from ncgeom.validate import require_choice, require_int, require_real
from ncgeom.vocabulary import DOMAINS, PSI_NAMES, SETTINGS, Domain, PsiName, Setting, is_hard, is_supervised

__all__ = [
    "ProgramSetting",
    "PROGRAM_SETTINGS",
    "GramProgram",
    "gram_program",
    "program_objective",
    "program_gradient",
    "naive_program_objective",
    "build_cvxpy_problem",
]

ProgramSetting = Setting
"""A setting with a Gram program: only the plain ones, :data:`PROGRAM_SETTINGS` (scl and ucl)."""
PROGRAM_SETTINGS: tuple[Setting, ...] = tuple(s for s in SETTINGS if not is_hard(s))


@dataclass(frozen=True)
class GramProgram:
    """One program of docs/theory.md section 6, as index arrays.

    Term j has weight ``weights[j]`` (the weights sum to 1), anchor class ``anchors[j]`` and negative
    classes ``negatives[j, :]`` [k]; its argument is t_i = M[anchor, negative_i] - base, with base = 1
    (SCL) or M[anchor, anchor] (UCL).
    """

    setting: ProgramSetting
    psi: PsiName
    num_classes: int
    num_negatives: int
    domain: Domain
    tau: float
    margin: float
    anchors: np.ndarray = field(repr=False)
    negatives: np.ndarray = field(repr=False)
    weights: np.ndarray = field(repr=False)

    @property
    def num_terms(self) -> int:
        return int(self.weights.shape[0])


def gram_program(
    setting: ProgramSetting,
    psi: PsiName = "infonce",
    *,
    num_classes: int,
    num_negatives: int,
    domain: Domain = "sphere",
    tau: float = 1.0,
    margin: float = 1.0,
) -> GramProgram:
    """Enumerate the terms of the SCL or UCL Gram program (multisets of negative classes).

    The weight of anchor c and multiset m of negative classes is (1/C) * multinomial(k; m) / n^k with
    n = C - 1 (SCL) or C (UCL). Example: SCL, C = 2, k = 1 has two terms (anchor 0 with negative 1,
    anchor 1 with negative 0), each of weight 1/2.
    """
    setting = require_choice("setting", setting, PROGRAM_SETTINGS)
    psi = require_choice("psi", psi, PSI_NAMES)
    domain = require_choice("domain", domain, DOMAINS)
    c = require_int("num_classes", num_classes, min_value=2)
    k = require_int("num_negatives", num_negatives, min_value=1, max_value=8)
    tau = require_real("tau", tau, min_value=0.0, min_inclusive=False)
    margin = require_real("margin", margin)
    anchors, negatives, weights = [], [], []
    for a in range(c):
        pool = [b for b in range(c) if not is_supervised(setting) or b != a]
        for multiset in itertools.combinations_with_replacement(pool, k):
            counts = Counter(multiset).values()
            multinomial = math.factorial(k) / math.prod(math.factorial(m) for m in counts)
            anchors.append(a)
            negatives.append(multiset)
            weights.append(multinomial / (c * len(pool) ** k))
    return GramProgram(
        setting, psi, c, k, domain, tau, margin,
        anchors=np.asarray(anchors, dtype=np.int64),
        negatives=np.asarray(negatives, dtype=np.int64).reshape(len(anchors), k),
        weights=np.asarray(weights, dtype=np.float64),
    )


def _arguments(program: GramProgram, gram: np.ndarray) -> np.ndarray:
    """t [terms, k] = M[anchor, negatives] - base."""
    g = np.asarray(gram, dtype=np.float64)
    if g.shape != (program.num_classes, program.num_classes):
        raise ValueError(f"gram must have shape [{program.num_classes}, {program.num_classes}], got {g.shape}")
    a = program.anchors[:, None]
    base = 1.0 if is_supervised(program.setting) else g[program.anchors, program.anchors][:, None]
    return g[a, program.negatives] - base


def _psi_object(program: GramProgram):
    return make_psi(program.psi, tau=program.tau, margin=program.margin)


def program_objective(program: GramProgram, gram) -> float:
    """F(M) of the program (see module docstring), evaluated with ncgeom's own psi in float64."""
    t = _arguments(program, gram)
    return float(program.weights @ np.asarray(_psi_object(program)(t), dtype=np.float64))


def program_gradient(program: GramProgram, gram) -> np.ndarray:
    """A (sub)gradient dF/dM [C, C] of the program objective, treating every entry of M as free.

    infonce: dpsi/dt_i = exp(t_i/tau - psi)/tau; infonce-mean: exp(t_i/tau - log k - psi)/tau;
    triplet: 1[t_i + margin > 0]/k (a subgradient at the kink). For UCL, dt_i/dM[c, c] = -1.
    """
    t = _arguments(program, gram)
    k = program.num_negatives
    if program.psi == "triplet":
        dpsi = (t + program.margin > 0).astype(np.float64) / k
    else:
        shift = 0.0 if program.psi == "infonce" else math.log(k)
        value = np.asarray(_psi_object(program)(t), dtype=np.float64)[:, None]
        dpsi = np.exp(t / program.tau - shift - value) / program.tau
    coef = program.weights[:, None] * dpsi  # [terms, k]
    c = program.num_classes
    grad = np.zeros((c, c))
    np.add.at(grad, (np.repeat(program.anchors, k), program.negatives.ravel()), coef.ravel())
    if not is_supervised(program.setting):
        np.add.at(grad, (program.anchors, program.anchors), -coef.sum(axis=1))
    return grad


def naive_program_objective(
    setting: ProgramSetting, psi, gram, *, num_negatives: int
) -> float:
    """Reference: the program objective by a plain loop over all C * n^k ordered negative tuples.

    ``psi`` is a :class:`ncgeom.losses.Psi`. Used by the tests to check the multiset reduction.
    """
    g = np.asarray(gram, dtype=np.float64)
    c = g.shape[0]
    total, count = 0.0, 0
    for a in range(c):
        pool = [b for b in range(c) if not is_supervised(setting) or b != a]
        base = 1.0 if is_supervised(setting) else g[a, a]
        for tup in itertools.product(pool, repeat=num_negatives):
            t = np.array([g[a, b] - base for b in tup])
            total += float(psi(t))
            count += 1
    return total / count


def build_cvxpy_problem(program: GramProgram, *, tie_breaker: float = 0.0):
    """The program as a cvxpy problem; returns (problem, M, psd_constraint, diag_constraint).

    M is a symmetric variable with the explicit constraint M >> 0 (so its dual, a PSD matrix Z, is
    available) and diag(M) <= 1 (ball) or diag(M) == 1 (sphere). ``tie_breaker`` > 0 adds
    tie_breaker * ||M||_F^2 (strictly convex; used only when asked, and reported).
    """
    import cvxpy as cp

    c, k = program.num_classes, program.num_negatives
    m = cp.Variable((c, c), symmetric=True, name="M")
    vec = cp.vec(m, order="C")
    rows = np.arange(program.num_terms)
    columns = []
    for i in range(k):
        select = np.zeros((program.num_terms, c * c))
        select[rows, program.anchors * c + program.negatives[:, i]] = 1.0
        if not is_supervised(program.setting):
            select[rows, program.anchors * c + program.anchors] -= 1.0
        offset = -1.0 if is_supervised(program.setting) else 0.0
        columns.append(select @ vec + offset)  # t_i for every term, [terms]
    t = cp.vstack(columns).T if k > 1 else cp.reshape(columns[0], (program.num_terms, 1), order="C")
    if program.psi == "triplet":
        per_term = cp.sum(cp.pos(t + program.margin), axis=1) / k
    else:
        shift = 0.0 if program.psi == "infonce" else math.log(k)
        zeros = np.zeros((program.num_terms, 1))
        per_term = cp.log_sum_exp(cp.hstack([zeros, t / program.tau - shift]), axis=1)
    objective = program.weights @ per_term
    if tie_breaker > 0:
        objective = objective + tie_breaker * cp.sum_squares(m)
    psd = m >> 0
    diag = cp.diag(m) <= 1 if program.domain == "ball" else cp.diag(m) == 1
    return cp.Problem(cp.Minimize(objective), [psd, diag]), m, psd, diag
