"""Ablations of the loss hypotheses and of normalization (docs/theory.md, section 4; issue "hypothesis ablation").

Each function violates one hypothesis of Theorem 1, 2 or 3 and checks the conclusion there:

- Theorem 1, hypothesis 1 (psi argument-wise non-decreasing): psi(t) = (1/k) sum_i (t_i + 1)^2, convex but
  decreasing for t_i < -1, with the non-decreasing step eta = 1 + [s >= 0]. Exhaustive search over the
  3-point models with coordinates on a grid (3 points is the smallest size where a tilt can act: with 2
  points each anchor has a single eligible negative). Exact (``fractions.Fraction``, :func:`proofs_check.harris.model_loss`).
- Theorem 1, hypothesis 2 (eta non-decreasing): eta = 1 - [s >= 0]/2 with the non-decreasing hinge
  psi = max(0, t + 3); same search. Exact.
- Theorems 2 and 3, hypothesis 4, convexity: the concave-then-convex, non-decreasing
  psi(t) = (1/k) sum_i (t_i + 1)^3. On collapsed configurations (one unit vector per class, label positives,
  balanced classes, k = 1) L_SCL(M) is the mean of M_cc'^3 over c != c', and the rational configuration
  e_1, -e_1, e_2 (C = 3, d = 2) beats NC exactly; a multi-start L-BFGS search on the product of spheres
  reports the best collapsed configuration found for each C (numerical, coverage in ``details``).
- Theorems 2 and 3, hypothesis 4, monotonicity: psi(t) = (1/k) sum_i (t_i + 1)^2 (convex, minimal at t = -1):
  C = 2 orthonormal class vectors in d = 2 (allowed: d >= C - 1) have t = -1 and beat NC (t = -2). Exact.
- Theorem 2, hypothesis 5 (eta non-decreasing, HSCL): a decreasing step eta tilts towards easy negatives; the
  collapsed configuration e_1, -e_1, e_2 (C = 3) has L_HSCL below the NC value psi(-3/2) for the
  hinge psi = max(0, t + 3). Exact.
- Theorems 2 and 3, hypothesis 2 (normalization): the scaled ETF r v_c, r = 2, with `infonce`, k = 1,
  tau = 1 has t = -r^2 C/(C-1) (SCL) and L decreasing in r towards the infimum 0 (SCL) or log(2)/C (UCL),
  which no configuration attains: NC on the sphere is not optimal. The gap is enclosed by interval
  arithmetic (mpmath ``iv``): exact.

UCL values on collapsed configurations with label positives come from the same exact model (every anchor's
positive is itself, the marginal negatives include its own class: a collision has t = 0).
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterable, Sequence
from fractions import Fraction
from typing import Any

import mpmath
import numpy as np
from scipy.optimize import minimize

from ncgeom.validate import require_int
from proofs_check.ablations.records import AblationResult
from proofs_check.harris import FiniteModel, hinge_psi, model_loss, step_eta

__all__ = [
    "SEED",
    "square_psi",
    "cubic_psi",
    "gram_of",
    "collapsed_loss",
    "smallest_tilt_counterexample",
    "collapsed_search",
    "theorem1_nonmonotone_psi",
    "theorem1_decreasing_eta",
    "nonconvex_psi",
    "nonmonotone_psi",
    "theorem2_decreasing_eta",
    "unnormalized",
    "ablations",
]

SEED = 20251214
"""Seed of the multi-start search of :func:`collapsed_search` (via :func:`ablations`)."""

_F = Fraction


def square_psi(t: tuple) -> Fraction:
    """psi(t) = (1/k) sum_i (t_i + 1)^2: convex, decreasing in t_i for t_i < -1 (violates R1)."""
    return sum(((x + 1) ** 2 for x in t), _F(0)) / len(t)


def cubic_psi(t: tuple) -> Fraction:
    """psi(t) = (1/k) sum_i (t_i + 1)^3: non-decreasing, concave for t_i < -1 and convex above (violates R2)."""
    return sum(((x + 1) ** 3 for x in t), _F(0)) / len(t)


def gram_of(points: Sequence[Sequence[Fraction]]) -> tuple:
    """The exact Gram matrix of ``points`` [N, d] (tuples of tuples of Fraction)."""
    return tuple(tuple(sum((a * b for a, b in zip(u, v)), _F(0)) for v in points) for u in points)


def _strings(matrix: Iterable[Iterable[Fraction]]) -> list[list[str]]:
    return [[str(x) for x in row] for row in matrix]


def _values(**named: Fraction) -> dict[str, Any]:
    """{name: float, name_exact: "p/q"} for every loss value."""
    out: dict[str, Any] = {}
    for key, value in named.items():
        out[key], out[f"{key}_exact"] = float(value), str(value)
    return out


def collapsed_loss(gram: Sequence[Sequence[Fraction]], setting: str, psi: Callable, *, num_negatives: int = 1,
                   eta: Callable | None = None) -> Fraction:
    """Exact L_S of a collapsed configuration: one point per class at the rows of ``gram`` [C, C], balanced,
    label positives (the positive of class c is v_c); ``setting`` scl or ucl, ``eta`` the per-negative tilt."""
    model = FiniteModel(tuple(tuple(row) for row in gram), tuple(range(len(gram))))
    return model_loss(model, setting, psi, num_negatives=num_negatives, eta=eta)


def _etf_gram(num_classes: int, scale: int = 1) -> tuple:
    c = num_classes
    return tuple(tuple(scale * (_F(1) if a == b else _F(-1, c - 1)) for b in range(c)) for a in range(c))


def smallest_tilt_counterexample(psi: Callable, eta: Callable, grid: Sequence[Fraction], *, dim: int = 2,
                                 num_negatives: int = 1) -> dict[str, Any]:
    """Exhaustive search of the 3-point models (labels 0, 1, 1, mass 1/3 each) with coordinates in ``grid``^dim for the most
    negative L_HSCL - L_SCL (exact). Returns the best points, the two losses, the number of models searched and
    the number with a negative gap."""
    best: dict[str, Any] | None = None
    searched = negative = 0
    cube = list(itertools.product(grid, repeat=dim))
    for points in itertools.product(cube, repeat=3):
        if points[1] > points[2]:  # the two class-1 points are exchangeable
            continue
        model = FiniteModel(gram_of(points), (0, 1, 1))
        plain = model_loss(model, "scl", psi, num_negatives=num_negatives)
        hard = model_loss(model, "scl", psi, num_negatives=num_negatives, eta=eta)
        searched += 1
        negative += hard < plain
        if best is None or hard - plain < best["hard"] - best["plain"]:
            best = {"points": points, "gram": model.gram, "plain": plain, "hard": hard}
    assert best is not None
    return {**best, "searched": searched, "negative": negative}


def _theorem1(hypothesis: str, violation: str, winner: str, psi: Callable, eta: Callable, *, quick: bool,
              psi_text: str, eta_text: str) -> AblationResult:
    start = time.perf_counter()
    grid = [_F(x) for x in (-1, 0, 1)] if quick else [_F(x, 2) for x in range(-2, 3)]
    k = 1 if quick else 2
    found = smallest_tilt_counterexample(psi, eta, grid, num_negatives=k)
    gap = found["hard"] - found["plain"]
    return AblationResult(
        theorem="1", hypothesis=hypothesis, violation=violation,
        conclusion="L_HSCL(f) >= L_SCL(f) for every f", result="fails" if gap < 0 else "holds", evidence="exact",
        gap=float(gap), winner=winner if gap < 0 else None,
        configuration={"points": _strings(found["points"]), "labels": [0, 1, 1], "masses": ["1/3"] * 3,
                       "gram": _strings(found["gram"])}
        if gap < 0 else {},
        values={**_values(scl=found["plain"], hscl=found["hard"], gap=gap), "num_negatives": k, "psi": psi_text,
                "eta": eta_text},
        details={"search": f"every 3-point model, labels (0, 1, 1), coordinates in {{{', '.join(map(str, grid))}}}^2",
                 "models_searched": found["searched"], "models_with_negative_gap": found["negative"],
                 "method": "exact-fraction (proofs_check.harris.model_loss)"},
        seconds=time.perf_counter() - start)


def theorem1_nonmonotone_psi(*, quick: bool) -> AblationResult:
    """Theorem 1 with psi = (1/k) sum (t_i + 1)^2 (not R1) and the non-decreasing eta = 1 + [s >= 0]."""
    return _theorem1("1.1 psi_k is argument-wise non-decreasing (R1)",
                     "psi(t) = (1/k) sum_i (t_i + 1)^2 (convex, decreasing for t_i < -1); eta = 1 + [s >= 0]",
                     "3 points, labels (0, 1, 1): the tilt favours the anchor's more similar negative, whose t is "
                     "closer to -1 where psi is smaller", square_psi, step_eta([_F(0)], [_F(1)]), quick=quick,
                     psi_text="(1/k) sum_i (t_i + 1)^2", eta_text="1 + [s >= 0]")


def theorem1_decreasing_eta(*, quick: bool) -> AblationResult:
    """Theorem 1 with the decreasing eta = 1 - [s >= 0]/2 and the hinge psi = max(0, t + 3)."""
    return _theorem1("1.2 eta >= 0 is non-decreasing",
                     "eta(s) = 1 - [s >= 0]/2 (decreasing step); psi = (1/k) sum_i max(0, t_i + 3)",
                     "3 points, labels (0, 1, 1): the tilt favours the anchor's less similar (easier) negative",
                     hinge_psi(_F(3)), step_eta([_F(0)], [_F(-1, 2)]), quick=quick,
                     psi_text="(1/k) sum_i max(0, t_i + 3)", eta_text="1 - [s >= 0]/2")


def _sphere_loss(x: np.ndarray, num_classes: int, dim: int) -> float:
    """Collapsed L_SCL of the cubic psi (k = 1) for unnormalized class vectors x [C * d] (rows normalized)."""
    v = x.reshape(num_classes, dim)
    v = v / np.linalg.norm(v, axis=1, keepdims=True)
    m = v @ v.T
    return float(np.mean(m[~np.eye(num_classes, dtype=bool)] ** 3))


def collapsed_search(num_classes: int, *, num_starts: int, rng: np.random.Generator) -> dict[str, Any]:
    """Multi-start L-BFGS over unit class vectors in d = C - 1 for the collapsed L_SCL of :func:`cubic_psi`
    (k = 1, balanced, label positives): the best value and Gram found, the NC value and their difference."""
    c = require_int("num_classes", num_classes, min_value=2)
    d = c - 1
    best = None
    for _ in range(require_int("num_starts", num_starts, min_value=1)):
        res = minimize(_sphere_loss, rng.standard_normal(c * d), args=(c, d), method="L-BFGS-B")
        if best is None or res.fun < best.fun:
            best = res
    assert best is not None
    v = best.x.reshape(c, d)
    v = v / np.linalg.norm(v, axis=1, keepdims=True)
    nc = float(cubic_psi((_F(-c, c - 1),)))
    return {"C": c, "d": d, "starts": num_starts, "best": float(best.fun), "nc": nc, "best_minus_nc": float(best.fun) - nc,
            "best_gram": (v @ v.T).round(12).tolist(), "optimizer": "scipy L-BFGS-B, Gaussian starts, rows normalized"}


def _collapsed_pair(theorem: str, hypothesis: str, violation: str, winner: str, psi: Callable, gram: tuple,
                    means: list, *, psi_text: str, details: dict[str, Any], start: float) -> AblationResult:
    """Compare a collapsed configuration with NC (same C) for SCL (theorem 2) or UCL (theorem 3), exactly."""
    setting = "scl" if theorem == "2" else "ucl"
    c = len(gram)
    ours, nc = collapsed_loss(gram, setting, psi), collapsed_loss(_etf_gram(c), setting, psi)
    gap = ours - nc
    name = setting.upper()
    return AblationResult(
        theorem=theorem, hypothesis=hypothesis, violation=violation,
        conclusion=f"NC minimizes L_{name} (collapsed configurations, label positives, balanced, k = 1)",
        result="fails" if gap < 0 else "holds", evidence="exact", gap=float(gap), winner=winner if gap < 0 else None,
        configuration={"means": _strings(means), "gram": _strings(gram)} if gap < 0 else {},
        values={**_values(nc=nc, winner=ours, gap=gap), "C": c, "d": len(means[0]), "num_negatives": 1,
                "setting": setting, "psi": psi_text},
        details=details, seconds=time.perf_counter() - start)


def nonconvex_psi(*, quick: bool) -> list[AblationResult]:
    """Theorems 2 and 3 with the concave-then-convex psi = (t + 1)^3: exact certificate at C = 3, plus the search."""
    start = time.perf_counter()
    rng = np.random.default_rng(SEED)
    sizes, starts = ((3, 4), 10) if quick else ((3, 4, 5, 6), 100)
    search = [collapsed_search(c, num_starts=starts, rng=rng) for c in sizes]
    means = [[_F(1), _F(0)], [_F(-1), _F(0)], [_F(0), _F(1)]]
    details = {"search": search, "method": "exact-fraction certificate; scipy search for the best collapsed "
               "configuration (numerical, SCL; for k = 1 the UCL loss is psi(0)/C + (C-1)/C L_SCL, same minimizer)"}
    return [_collapsed_pair(theorem, f"{theorem}.4 psi_k is convex (R2) and argument-wise non-decreasing (R1)",
                            "psi(t) = (1/k) sum_i (t_i + 1)^3: non-decreasing, concave for t_i < -1 (not R2)",
                            "C = 3, d = 2: e_1, -e_1, e_2 (one antipodal pair, one orthogonal class)", cubic_psi,
                            gram_of(means), means, psi_text="(1/k) sum_i (t_i + 1)^3", details=details,
                            start=start) for theorem in ("2", "3")]


def nonmonotone_psi(*, quick: bool) -> list[AblationResult]:
    """Theorems 2 and 3 with the convex, non-monotone psi = (t + 1)^2: C = 2 orthonormal classes beat NC."""
    start = time.perf_counter()
    means = [[_F(1), _F(0)], [_F(0), _F(1)]]
    return [_collapsed_pair(theorem, f"{theorem}.4 psi_k is convex (R2) and argument-wise non-decreasing (R1)",
                            "psi(t) = (1/k) sum_i (t_i + 1)^2: convex, decreasing for t_i < -1 (not R1)",
                            "C = 2, d = 2: orthonormal class vectors (t = -1, the minimum of psi)", square_psi,
                            gram_of(means), means, psi_text="(1/k) sum_i (t_i + 1)^2",
                            details={"method": "exact-fraction", "note": "d = 2 >= C - 1 satisfies hypothesis 3"},
                            start=start) for theorem in ("2", "3")]


def theorem2_decreasing_eta(*, quick: bool) -> AblationResult:
    """Theorem 2 for HSCL with a decreasing eta: a collapsed configuration has L_HSCL below the NC value."""
    start = time.perf_counter()
    means = [[_F(1), _F(0)], [_F(-1), _F(0)], [_F(0), _F(1)]]
    gram, psi = gram_of(means), hinge_psi(_F(3))
    eta = step_eta([_F(-1, 2)], [_F(-9, 10)])  # 1 below s = -1/2, 1/10 from there: decreasing
    ours = collapsed_loss(gram, "scl", psi, eta=eta)
    nc = collapsed_loss(_etf_gram(3), "scl", psi, eta=eta)
    gap = ours - nc
    return AblationResult(
        theorem="2", hypothesis="2.5 for HSCL, eta >= 0 is non-decreasing",
        violation="eta(s) = 1 - (9/10)[s >= -1/2] (decreasing step); psi = max(0, t + 3), k = 1",
        conclusion="NC minimizes L_HSCL (min value psi(-C/(C-1)))", result="fails" if gap < 0 else "holds",
        evidence="exact", gap=float(gap),
        winner="C = 3, d = 2: e_1, -e_1, e_2; the tilt sends the antipodal classes' anchors to each other (t = -2)",
        configuration={"means": _strings(means), "gram": _strings(gram)},
        values={**_values(nc=nc, winner=ours, gap=gap), "C": 3, "d": 2, "num_negatives": 1, "setting": "hscl",
                "psi": "max(0, t + 3)", "eta": "1 - (9/10)[s >= -1/2]"},
        details={"method": "exact-fraction (proofs_check.harris.model_loss with a per-negative tilt)"},
        seconds=time.perf_counter() - start)


def _scaled_etf_values(num_classes: int, norm: int) -> dict[str, Any]:
    """Interval enclosures of L_SCL, L_UCL (infonce, k = 1, tau = 1) at the ETF scaled by ``norm`` and at NC."""
    c, iv = num_classes, mpmath.iv
    iv.dps = 30

    def scl(r2):
        return iv.log(1 + iv.exp(-iv.mpf(r2) * c / (c - 1)))

    def ucl(r2):
        return iv.log(2) / c + iv.mpf(c - 1) / c * scl(r2)

    out: dict[str, Any] = {"C": c}
    for name, f in (("scl", scl), ("ucl", ucl)):
        ours, nc = f(norm * norm), f(1)
        gap = ours - nc
        out[name] = {"nc": float(nc.mid), "winner": float(ours.mid), "gap": float(gap.mid),
                     "gap_negative": bool(gap.b < 0),  # the whole enclosure lies below 0
                     "gap_enclosure": [mpmath.nstr(mpmath.mpf(x.a), 25) for x in (gap.a, gap.b)]}
    return out


def unnormalized(*, quick: bool) -> list[AblationResult]:
    """Theorems 2 and 3 without the ball constraint: the ETF scaled to norm 2 beats NC on the sphere."""
    start = time.perf_counter()
    norm, c = 2, 3
    table = [_scaled_etf_values(size, norm) for size in (range(2, 7) if quick else range(2, 11))]
    here = next(row for row in table if row["C"] == c)
    means = (norm * np.array([[1.0, 0.0], [-0.5, np.sqrt(3) / 2], [-0.5, -np.sqrt(3) / 2]])).tolist()
    records = []
    for theorem, setting in (("2", "scl"), ("3", "ucl")):
        v = here[setting]
        holds = not v["gap_negative"]
        records.append(AblationResult(
            theorem=theorem, hypothesis=f"{theorem}.2 normalization ball or sphere (||f(x)|| <= 1)",
            violation=f"norms above 1: the ETF scaled to norm r (r = {norm} reported); infonce, k = 1, tau = 1",
            conclusion=f"NC on the sphere minimizes L_{setting.upper()}", result="holds" if holds else "fails",
            evidence="exact", gap=v["gap"],
            winner=None if holds else f"the ETF scaled to norm {norm}: t = -r^2 C/(C-1) for non-collisions; L decreases "
            "in r to an infimum (0 for SCL, log(2)/C for UCL) that no configuration attains",
            configuration={} if holds else {"means": means, "gram": _strings(_etf_gram(c, norm * norm)),
                                            "norm": norm},
            values={"nc": v["nc"], "winner": v["winner"], "gap": v["gap"], "C": c, "norm": norm, "setting": setting,
                    "psi": "infonce", "tau": 1.0, "num_negatives": 1},
            details={"gap_enclosure": v["gap_enclosure"], "by_C": [{"C": row["C"], **row[setting]} for row in table],
                     "method": "mpmath interval arithmetic on the closed form (docs/theory.md, section 5)"},
            seconds=time.perf_counter() - start))
    return records


def ablations(*, quick: bool) -> list[AblationResult]:
    """Every ablation of this module, in the order of the module docstring."""
    return [theorem1_nonmonotone_psi(quick=quick), theorem1_decreasing_eta(quick=quick), *nonconvex_psi(quick=quick),
            *nonmonotone_psi(quick=quick), theorem2_decreasing_eta(quick=quick), *unnormalized(quick=quick)]
