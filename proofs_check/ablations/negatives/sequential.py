"""Without replacement, the other common hard law: tilt the marginal, then draw without replacement (exact).

Two definitions of "hard negatives without replacement" differ. The records of :mod:`.records` use the density of
Theorem 1's proof: the joint plain law P_rho (:mod:`.laws`) reweighted by prod_i eta(s_i) and renormalized jointly
(definition 1; the ``without-replacement`` counterexample holds for it). Samplers do something else (definition 2):
they tilt the marginal, q_eta(y) proportional to q(y) eta(s_y), and draw the k negatives from it one after another
without replacement, each draw renormalized over the points left (successive sampling, as
``torch.multinomial(weights, k, replacement=False)`` does with tilted weights):

.. math::

    S_{\\eta}(y_1, \\dots, y_k) = \\prod_{t=1}^{k} \\frac{w_{y_t}}{W - \\sum_{u < t} w_{y_u}}, \\qquad
    w_y = q(y)\\, \\eta(s_{x y}), \\quad W = \\sum_y w_y,

and the hard mixture is (1 - rho) q_eta^{(x)k} + rho S_eta; the plain one is (1 - rho) q^{(x)k} + rho S_1 (equal plain
masses: S_1 is uniform on ordered k-tuples of distinct points).

**Theorem 1 holds for definition 2, every rho [derived].** The i.i.d. part is Theorem 1 (Harris). For the successive
part, rank the eligible points by similarity; the weights w are non-decreasing in rank (equal plain masses,
eta non-decreasing). The law of the sampled k-set is increasing on the lattice of k-subsets ordered element-wise
(a distributive lattice): replacing a point i of the set by j outside it with w_j >= w_i raises every numerator and
lowers every later denominator of every ordering. So P_eta / P_1 is increasing, and FKG for the uniform measure on a
distributive lattice gives P_eta(U) >= P_1(U) for every up-set U: the sorted sample under definition 2 dominates
the plain one, and E[g] is larger for every symmetric non-decreasing g = psi(S - s^+) (R1). Hence
L_hard >= L_plain for every psi (R1) and every non-decreasing eta. :func:`sequential_model_loss` checks it exactly
(Fractions) on the counterexample model of definition 1 and on random small models.

Sources: docs/theory.md, section 4 (Theorem 1 and its proof); jiang2025hard, Theorem 1; harris1960; the FKG
inequality (Fortuin, Kasteleyn, Ginibre 1971) on distributive lattices.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Mapping
from fractions import Fraction
from typing import Any

import numpy as np

from ncgeom.validate import require_choice, require_int
from ncgeom.vocabulary import SETTINGS, is_hard, is_supervised
from proofs_check.ablations.negatives.laws import require_rho
from proofs_check.harris import FiniteModel, random_model, random_monotone_eta, random_monotone_psi

__all__ = ["successive_law", "sequential_model_loss", "sequential_check"]

_F = Fraction


def successive_law(weights: Mapping[int, Fraction], *, num_negatives: int) -> dict[tuple[int, ...], Fraction]:
    """S_eta of the module docstring on ordered k-tuples of distinct points, from positive weights {point: w} (exact).

    Example: weights {0: 1, 1: 1, 2: 2}, k = 1 gives {(0,): 1/4, (1,): 1/4, (2,): 1/2}.
    """
    k = require_int("num_negatives", num_negatives, min_value=1)
    points = sorted(weights)
    if len(points) < k:
        raise ValueError(f"successive sampling needs >= num_negatives = {k} points, got {len(points)}")
    if any(w <= 0 for w in weights.values()):
        raise ValueError("successive sampling needs positive weights")
    total = sum(weights.values(), _F(0))
    out = {}
    for order in itertools.permutations(points, k):
        p, left = _F(1), total
        for y in order:
            p *= weights[y] / left
            left -= weights[y]
        out[order] = p
    return out


def _anchor_value(model: FiniteModel, i: int, setting: str, psi: Callable, eta: Callable | None, k: int,
                  rho: Fraction) -> Fraction:
    n = len(model.labels)
    eligible = [j for j in range(n) if not is_supervised(setting) or model.labels[j] != model.labels[i]]
    masses = {j: model.mass(j) for j in eligible}
    if len(set(masses.values())) != 1:
        raise ValueError("without replacement needs eligible points of equal masses")
    total = sum(masses.values(), _F(0))
    q = {j: masses[j] / total for j in eligible}
    tilt = {j: q[j] * (eta(model.gram[i][j]) if eta is not None else 1) for j in eligible}
    z = sum(tilt.values(), _F(0))
    q_eta = {j: w / z for j, w in tilt.items()}
    law: dict[tuple[int, ...], Fraction] = {}
    if rho != 1:
        for t in itertools.product(eligible, repeat=k):
            law[t] = (1 - rho) * functools.reduce(lambda a, b: a * b, (q_eta[j] for j in t), _F(1))
    if rho != 0:
        for t, p in successive_law(tilt, num_negatives=k).items():
            law[t] = law.get(t, _F(0)) + rho * p
    own = [j for j in range(n) if model.labels[j] == model.labels[i]]
    own_mass = sum((model.mass(j) for j in own), _F(0))
    value = _F(0)
    for t, p in law.items():
        s = [model.gram[i][j] for j in t]
        value += p * sum((model.mass(j) / own_mass * psi(tuple(x - model.gram[i][j] for x in s)) for j in own), _F(0))
    return value


def sequential_model_loss(model: FiniteModel, setting: str, psi: Callable, *, num_negatives: int, rho: Any,
                          eta: Callable | None = None) -> Fraction:
    """Exact loss of a finite model under the mixture of the module docstring (eta = None: the plain law).

    .. math::

        L = \\sum_x m_x\\, \\mathbb E_{y \\sim (1-\\rho) q_\\eta^{\\otimes k} + \\rho S_\\eta}\\
            \\sum_{x^+} p(x^+ \\mid x)\\, \\psi\\big((s_{x y_i} - s_{x x^+})_i\\big),

    with label positives (the anchor's class, masses renormalized) and ``setting`` (scl or ucl) choosing the eligible
    negatives; every eligible point must have the same mass (the plain law without replacement is uniform).
    """
    if is_hard(require_choice("setting", setting, SETTINGS)):
        raise ValueError(f"setting must be 'scl' or 'ucl' (the tilt is given by eta), got {setting!r}")
    k = require_int("num_negatives", num_negatives, min_value=1)
    r = require_rho(rho)
    return sum((model.mass(i) * _anchor_value(model, i, setting, psi, eta, k, r) for i in range(len(model.labels))),
               _F(0))


def sequential_check(*, rng: np.random.Generator, num_models: int, rhos: tuple[Fraction, ...],
                     sizes: tuple[tuple[int, int], ...] = ((3, 2), (4, 2), (4, 3))) -> dict[str, Any]:
    """L_hard - L_plain under definition 2 (module docstring) on ``num_models`` random models per (points, k) of
    ``sizes`` (uniform masses, UCL, points in {-1, -1/2, 0, 1/2, 1}^2, 2 classes; random non-decreasing psi and
    eta from :mod:`proofs_check.harris`) at every rho of ``rhos``; exact. Returns the smallest gap and its instance."""
    worst: dict[str, Any] | None = None
    count = 0
    for n, k in sizes:
        for _ in range(num_models):
            model = random_model(rng=rng, num_points=n, num_classes=2, dim=2)
            psi, eta = random_monotone_psi(rng=rng), random_monotone_eta(rng=rng)
            for rho in rhos:
                plain = sequential_model_loss(model, "ucl", psi, num_negatives=k, rho=rho)
                hard = sequential_model_loss(model, "ucl", psi, num_negatives=k, rho=rho, eta=eta)
                count += 1
                if worst is None or hard - plain < worst["gap"]:
                    worst = {"gap": hard - plain, "points": n, "k": k, "rho": rho,
                             "gram": [[str(x) for x in row] for row in model.gram]}
    assert worst is not None
    return {"instances": count, "min_gap": str(worst["gap"]), "worst": {**worst, "gap": str(worst["gap"]),
                                                                         "rho": str(worst["rho"])},
            "sizes": [list(s) for s in sizes], "rhos": [str(r) for r in rhos]}
