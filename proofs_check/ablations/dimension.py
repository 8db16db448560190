"""Ablation of d >= C - 1 (Theorems 2 and 3, hypothesis 3): no simplex ETF fits, the bound is not attained.

With d < C - 1 the C unit class means cannot form a simplex ETF (its Gram has rank C - 1; docs/theory.md,
section 4, "Neural collapse and the simplex ETF"). The lower bounds of Theorems 2 and 3 (the NC values of
docs/theory.md, section 5: ``ncgeom.theory.nc_value``) still hold but are no longer attained: equality forces
the ETF (the uniqueness argument after Theorem 2). This module measures by how much, on collapsed
configurations (one unit vector v_c per class, label positives, balanced classes, ``infonce``, k = 1,
tau = 1), whose population loss is

.. math::

    L_S(V) = \\frac1C \\sum_c \\sum_{c'} q_c(c')\\,\\log\\big(1 + e^{(\\langle v_c, v_{c'}\\rangle - 1)/\\tau}\\big),
    \\qquad q_c(c') \\propto [c' \\ne c \\text{ or } S \\text{ unsupervised}]\\; e^{\\beta \\langle v_c, v_{c'}\\rangle},

with beta = 0 for SCL and UCL (:func:`collapsed_loss`; UCL reuses :func:`proofs_check.hucl.loss.hucl_gram_loss`).

Method (numerical): a batched multi-start L-BFGS in float64 (:func:`proofs_check.hucl.search.multistart`) on
the product of spheres from ``num_random`` Gaussian starts and every candidate of
:func:`candidate_configurations` perturbed by ``START_NOISE``. The winner's loss is recomputed by
:func:`ncgeom.population.population_loss` (the exact finite-model expectation, an independent code path),
and its Gram is compared, up to a permutation of the classes, with each candidate spherical code
(:func:`match_candidates`); a candidate's own loss is evaluated by the same population code at its exact
coordinates. Within-class spread is not searched (collapsed configurations only).

Sources: docs/theory.md, section 4 (Theorems 2 and 3, hypothesis 3) and section 5; jiang2025hard, Theorems 2-3.
"""

from __future__ import annotations

import itertools
import time
from typing import Any

import numpy as np

from ncgeom.geometry import gram_etf_residual, simplex_etf
from ncgeom.losses.psi import make_psi
from ncgeom.population import FiniteLatentModel, population_loss
from ncgeom.theory import nc_value
from ncgeom.validate import require_choice, require_int, require_real
from ncgeom.vocabulary import SETTINGS, Setting, effective_beta, is_supervised
from proofs_check.ablations.records import AblationResult
from proofs_check.hucl.loss import hucl_gram_loss, unit_rows
from proofs_check.hucl.search import describe_gram, multistart

__all__ = [
    "BETA",
    "TAU",
    "MATCH_TOL",
    "START_NOISE",
    "SEED",
    "collapsed_loss",
    "population_value",
    "candidate_configurations",
    "match_candidates",
    "best_configuration",
    "dimension_table",
    "ablations",
    "ablations_with_table",
]

BETA = 5.0  # hardness of the HSCL ablation
TAU = 1.0
SEED = 0
START_NOISE = 0.05  # perturbation of the structured starts (so that they are not exact saddle points)
# Gram distance (Frobenius, best permutation) under which the winner "is" a candidate. The searches end with
# gradient norms <= ~1e-7 (reported as max_final_grad) and matched Grams within ~5e-8 of the candidate, while
# distinct candidates differ by > 0.1: 1e-6 separates the two with margin on both sides.
MATCH_TOL = 1e-6
_SETTINGS_ABLATED: tuple[tuple[str, Setting], ...] = (("2", "scl"), ("2", "hscl"), ("3", "ucl"))


def collapsed_loss(vectors, setting: Setting, *, beta: float = 0.0, tau: float = TAU):
    """L_S(V) of the module docstring for class vectors [..., C, d] (torch, differentiable; rows normalized).

    Example: C = 2 antipodal vectors, SCL: log(1 + e^-2) = 0.126928.
    """
    setting = require_choice("setting", setting, SETTINGS)
    beta = effective_beta(setting, require_real("beta", beta, min_value=0.0))
    psi = make_psi("infonce", tau=tau)
    v = unit_rows(vectors)
    gram = v @ v.transpose(-1, -2)
    if not is_supervised(setting):
        return hucl_gram_loss(gram, beta=beta, num_negatives=1, psi=psi)
    import torch  # heavy optional import (the module's numpy parts work without it)

    own = torch.eye(gram.shape[-1], dtype=torch.bool)
    log_q = torch.log_softmax((beta * gram).masked_fill(own, -torch.inf), dim=-1)
    return (log_q.exp() * psi((gram - 1.0)[..., None])).sum(dim=-1).mean(dim=-1)


def population_value(vectors: np.ndarray, setting: Setting, *, beta: float = 0.0, tau: float = TAU) -> float:
    """L_S of one point per class at the unit rows of ``vectors`` [C, d], by :func:`ncgeom.population.population_loss`."""
    v = np.asarray(vectors, dtype=np.float64)
    v = v / np.linalg.norm(v, axis=1, keepdims=True)
    model = FiniteLatentModel([row[None, :] for row in v])
    return population_loss(model, setting, "infonce", num_negatives=1, eta=beta, tau=tau, method="exact").value


def _polygon(c: int, d: int) -> np.ndarray:
    angles = 2 * np.pi * np.arange(c) / c
    out = np.zeros((c, d))
    out[:, 0], out[:, 1] = np.cos(angles), np.sin(angles)
    return out


def _orthogonal_sum(parts: list[int], d: int) -> np.ndarray:
    """Simplex ETFs of ``parts`` (each >= 2) points in mutually orthogonal subspaces of dimensions p - 1 of R^d."""
    blocks, offset = [], 0
    for p in parts:
        block = np.zeros((p, d))
        block[:, offset:offset + p - 1] = simplex_etf(p, p - 1)
        offset += p - 1
        blocks.append(block)
    return np.vstack(blocks)


def candidate_configurations(num_classes: int, dim: int) -> dict[str, np.ndarray]:
    """Known spherical codes of C points in R^d, [C, d] each, that the winner is compared with.

    - ``regular C-gon`` (d >= 2): C equally spaced points on a great circle;
    - ``cross-polytope`` (C = 2d): the vertices +-e_i;
    - ``partial cross-polytope`` (d + 1 < C < 2d): C of the 2d vertices (+-e_1, +-e_2, ..., in that order);
    - ``repeated simplex`` (C > d + 1): the (d+1)-point simplex ETF of R^d, class c at vertex c mod (d + 1);
    - ``triangular bipyramid`` (C = 5, d = 3): an equilateral triangle on the equator and the two poles;
    - ``orthogonal sum of simplices (p_1, ..., p_r)`` (d + 1 < C <= 2d): r = C - d balanced parts, a simplex ETF of p_i
      points in each of r mutually orthogonal subspaces (the cross-polytope when every p_i = 2, the triangular
      bipyramid for (3, 2));
    - ``simplex ETF`` (d >= C - 1): the controls where hypothesis 3 holds.
    """
    c = require_int("num_classes", num_classes, min_value=3)
    d = require_int("dim", dim, min_value=2)
    out: dict[str, np.ndarray] = {"regular C-gon": _polygon(c, d)}
    axes = np.vstack([s * np.eye(d)[i] for i in range(d) for s in (1.0, -1.0)])
    if c == 2 * d:
        out["cross-polytope"] = axes
    elif d + 1 < c < 2 * d:
        out["partial cross-polytope"] = axes[:c]
    if c > d + 1:
        out["repeated simplex"] = simplex_etf(d + 1, d)[np.arange(c) % (d + 1)]
    if (c, d) == (5, 3):
        out["triangular bipyramid"] = np.vstack([np.hstack([_polygon(3, 2), np.zeros((3, 1))]), [[0, 0, 1], [0, 0, -1]]])
    if d + 1 < c <= 2 * d:  # every part has >= 2 points, so the parts use sum (p_i - 1) = d dimensions
        parts = [len(p) for p in np.array_split(np.arange(c), c - d)]
        out[f"orthogonal sum of simplices {tuple(parts)}"] = _orthogonal_sum(parts, d)
    if d >= c - 1:
        out["simplex ETF"] = simplex_etf(c, d)
    return out


def _gram(vectors: np.ndarray) -> np.ndarray:
    v = np.asarray(vectors, dtype=np.float64)
    v = v / np.linalg.norm(v, axis=1, keepdims=True)
    return v @ v.T


def match_candidates(gram: np.ndarray, candidates: dict[str, np.ndarray]) -> dict[str, float]:
    """min over class permutations P of ||gram - P G P^T||_F for each candidate's Gram G (C! permutations)."""
    g = np.asarray(gram, dtype=np.float64)
    perms = np.array(list(itertools.permutations(range(g.shape[0]))))
    out = {}
    for name, vectors in candidates.items():
        h = _gram(vectors)
        permuted = h[perms[:, :, None], perms[:, None, :]]  # [P!, C, C]
        out[name] = float(np.sqrt(((permuted - g) ** 2).sum(axis=(1, 2))).min())
    return out


def best_configuration(num_classes: int, dim: int, setting: Setting, *, beta: float = 0.0, num_random: int,
                       rng: np.random.Generator, max_iter: int = 2000) -> dict[str, Any]:
    """Multi-start search of min L_S over C unit vectors in R^d (module docstring) and its comparison.

    Returns a JSON-ready dict: the best value (optimizer and population code), the ETF bound (``nc_value``),
    the gap best - bound, the winner's vectors and Gram, the candidate codes (their loss and Gram distance to
    the winner), the name of the matching candidate (or None) and the coverage (starts, optimizer, gradient).
    """
    import torch  # heavy optional import

    c = require_int("num_classes", num_classes, min_value=3)
    d = require_int("dim", dim, min_value=2)
    num_random = require_int("num_random", num_random, min_value=1)
    beta = effective_beta(setting, beta)
    candidates = candidate_configurations(c, d)
    generator = torch.Generator().manual_seed(int(rng.integers(2**62)))
    structured = torch.stack([torch.as_tensor(v, dtype=torch.float64) for v in candidates.values()])
    starts = torch.cat([torch.randn(num_random, c, d, generator=generator, dtype=torch.float64),
                        structured + START_NOISE * torch.randn(structured.shape, generator=generator, dtype=torch.float64)])
    found = multistart(lambda u: collapsed_loss(u, setting, beta=beta), starts, max_iter=max_iter)
    best = found.vectors[found.best]
    bound = nc_value(setting, "infonce", num_classes=c, num_negatives=1, beta=beta, tau=TAU)
    value = population_value(best, setting, beta=beta)
    distances = match_candidates(found.grams[found.best], candidates)
    matches = [name for name in candidates if distances[name] <= MATCH_TOL]
    return {
        "num_classes": c, "dim": d, "setting": setting, "beta": beta,
        "best_value": value, "optimizer_value": float(found.values[found.best]), "etf_bound": bound,
        "gap": value - bound, "means": best.tolist(), "gram": found.grams[found.best].tolist(),
        "etf_residual": gram_etf_residual(found.grams[found.best]),
        "candidates": {name: {"value": population_value(v, setting, beta=beta), "gram_distance": distances[name]}
                       for name, v in candidates.items()},
        "match": " = ".join(matches) or None, "description": describe_gram(found.grams[found.best]),
        "coverage": {"random_starts": num_random, "structured_starts": list(candidates), "start_noise": START_NOISE,
                     "optimizer": "batched L-BFGS float64, strong Wolfe", "max_iter": max_iter,
                     "max_final_grad": found.max_grad, "spread_of_values": float(np.ptp(found.values))},
    }


def _grid(quick: bool) -> list[tuple[int, int]]:
    """(C, d) pairs: d < C - 1 (the ablation) and d = C - 1 (the control where the ETF exists)."""
    classes = (4, 5) if quick else (3, 4, 5, 6)
    return [(c, d) for c in classes for d in range(2, c)]


def dimension_table(*, quick: bool, seed: int = SEED) -> dict[str, Any]:
    """The search for every (C, d) of the grid and each ablated setting; the data of fig_ablation_dimension.

    Returns ``{"rows": [best_configuration(...) for each setting, C, d], "beta", "tau", "quick", "seed"}``
    (written by the reproduction as ``<results>/theory/ablation_dimension.json``).
    """
    rng = np.random.default_rng(seed)
    num_random = 8 if quick else 32
    rows = [best_configuration(c, d, setting, beta=BETA, num_random=num_random, rng=rng)
            for _, setting in _SETTINGS_ABLATED for c, d in _grid(quick)]
    return {"rows": rows, "beta": BETA, "tau": TAU, "quick": quick, "seed": seed, "psi": "infonce", "num_negatives": 1,
            "source": "docs/results.md, Below C - 1 dimensions and dependent positives (proofs_check.ablations.dimension)"}


def ablations(*, quick: bool) -> list[AblationResult]:
    """One record per ablated setting (SCL and HSCL for Theorem 2, UCL for Theorem 3), every (C, d) in details.

    The record's configuration and values are those of C = 4, d = 2 (the smallest violation); ``gap`` is the
    smallest best - bound over d < C - 1 (> 0: the bound is not attained anywhere tried).
    """
    return ablations_with_table(quick=quick)[0]


def ablations_with_table(*, quick: bool) -> tuple[list[AblationResult], dict[str, Any]]:
    """The records of :func:`ablations` and the :func:`dimension_table` they summarize, from one search (the
    reproduction saves both: ``theory/ablations.json`` and ``theory/ablation_dimension.json``)."""
    t0 = time.perf_counter()
    table = dimension_table(quick=quick)
    seconds = (time.perf_counter() - t0) / len(_SETTINGS_ABLATED)
    out = []
    for theorem, setting in _SETTINGS_ABLATED:
        rows = [r for r in table["rows"] if r["setting"] == setting]
        below = [r for r in rows if r["dim"] < r["num_classes"] - 1]
        controls = [r for r in rows if r["dim"] == r["num_classes"] - 1]
        head = next(r for r in below if (r["num_classes"], r["dim"]) == (4, 2))
        gaps = [r["gap"] for r in below]
        name = f"{setting.upper()}" + (f" (beta = {BETA:g})" if setting == "hscl" else "")
        pairs = ", ".join(f"({r['num_classes']}, {r['dim']})" for r in below)
        winner = head["match"] or f"no candidate code matched: {head['description']}"
        out.append(AblationResult(
            theorem=theorem,
            hypothesis=f"{theorem}.3 d >= C - 1",
            violation=f"d < C - 1: (C, d) in {{{pairs}}}; {name}, infonce, k = 1, tau = 1, collapsed configurations",
            conclusion=f"the Theorem {theorem} bound (the NC value of docs/theory.md, section 5) is attained",
            result="fails" if min(gaps) > 0 else "holds",
            evidence="numerical",
            gap=min(gaps),
            winner=f"C = 4, d = 2: {winner}",
            configuration={"num_classes": 4, "dim": 2, "means": head["means"], "gram": head["gram"]},
            values={"num_classes": 4, "dim": 2, "best": head["best_value"], "etf_bound": head["etf_bound"],
                    "gap": head["gap"], "setting": setting, "beta": head["beta"]},
            details={"table": [{k: r[k] for k in ("num_classes", "dim", "best_value", "etf_bound", "gap", "match",
                                                 "description", "gram", "candidates", "coverage")} for r in below],
                     "controls_d_eq_C_minus_1": [{"num_classes": r["num_classes"], "dim": r["dim"], "gap": r["gap"],
                                                  "etf_residual": r["etf_residual"]} for r in controls],
                     "strictness": "gap > 0 is also implied by the equality case of the bound (docs/theory.md, "
                                   "section 4: equality forces the ETF, which needs d >= C - 1); its size is numerical",
                     "population_check": max(abs(r["best_value"] - r["optimizer_value"]) for r in rows),
                     "seed": table["seed"], "quick": quick},
            seconds=seconds,
        ))
    return out, table


def _cli() -> None:  # pragma: no cover - manual inspection: python -m proofs_check.ablations.dimension
    for record in ablations(quick=True):
        print(record.theorem, record.hypothesis, record.result, f"{record.gap:.6g}", record.winner)
        for row in record.details["table"]:
            print(f"  C={row['num_classes']} d={row['dim']} best={row['best_value']:.8f} bound={row['etf_bound']:.8f} "
                  f"gap={row['gap']:.3g} match={row['match']} "
                  + ", ".join(f"{n}: {x['gram_distance']:.2g}" for n, x in row["candidates"].items()))


if __name__ == "__main__":  # pragma: no cover
    _cli()
