"""Ablation of label-based positives (Theorem 3, hypothesis 5): positives that depend on the anchor.

Finite model (docs/theory.md, section 4, "Theorem 3 without conditional independence"): C balanced classes of m
instances each, instance i embedded at a unit vector z_i in R^d, d = C - 1; UCL, ``infonce``, k = 1, tau = 1,
one negative drawn uniformly over the Cm instances. The positive of an anchor is the anchor itself with
probability rho and otherwise an independent uniform draw from its class, so rho = 0 is the label-based law of
Theorem 3 and rho = 1 the instance positives of the counterexample. The loss is linear in the positive law:

.. math::

    L_\\rho(z) = (1 - \\rho)\\,L_{\\mathrm{label}}(z) + \\rho\\,L_{\\mathrm{inst}}(z), \\qquad
    L_{\\mathrm{label}} = \\frac{1}{n}\\sum_a \\frac1m \\sum_{p \\sim a} \\frac1n \\sum_j
        \\log\\big(1 + e^{\\langle z_a, z_j\\rangle - \\langle z_a, z_p\\rangle}\\big),

with n = Cm, p ranging over the m instances of a's class (a included) and L_inst the same with p = a.

Compared configurations:

- NC: every instance of class c at the ETF vertex v_c; L_rho(NC) = L_UCL(NC) for every rho (z^+ = z in both laws);
- the cross-polytope: the 2d vertices +-e_i, each carrying Cm/(2d) instances (m is chosen so that this is an
  integer: the marginal law of z is uniform on the vertices, as in the counterexample), the instances assigned
  to classes by a best-improvement swap search on L_label (:func:`cross_polytope_labelling`);
- a multi-start search over free instance-level configurations (batched L-BFGS, float64).

The labelling minimizes L_label over every assignment of the instances to the vertices: a swap search finds it and
:func:`labelling_optimum` proves it optimal by exhaustive search modulo symmetry (integers). :func:`local_threshold`
gives rho_loc, where the Hessian of L_rho at NC modulo rotations first loses positivity (a generalized eigenvalue
problem); a rho* below it makes the switch first order.

NC vs cross-polytope is decided exactly: both losses are sums of rational weights times log(1 + e^a) with
rational a (:func:`exact_terms`), and the crossing rho_CP = (A - N)/(A - B) (A, B: label and instance losses of
the cross-polytope, N: NC) is enclosed in interval arithmetic. The rho* at which NC stops being optimal among
all configurations compared is found by bisection on [0, rho_CP] with the search at each midpoint (numerical:
below rho* the search found nothing better than NC).

Sources: docs/theory.md, section 4 (Theorem 3, hypothesis 5; the cross-polytope counterexample); jiang2025hard,
Theorem 3.
"""

from __future__ import annotations

from collections import defaultdict
from fractions import Fraction
from typing import Any

import mpmath
import numpy as np

from ncgeom.geometry import simplex_etf
from ncgeom.population import FiniteLatentModel, population_loss
from ncgeom.theory import nc_value
from ncgeom.validate import require_int, require_real
from proofs_check.counterexample import cross_polytope_formula, nc_formula
from proofs_check.hucl.search import multistart

__all__ = [
    "SEED",
    "VALUE_TOL",
    "instances_per_class",
    "nc_configuration",
    "cross_polytope_configuration",
    "cross_polytope_labelling",
    "mixed_loss",
    "population_mixed_loss",
    "exact_terms",
    "exact_value",
    "cross_polytope_crossing",
    "search_below_nc",
    "dependent_positives",
]

SEED = 0
# A configuration "beats" NC when its loss is below L(NC) - VALUE_TOL: the losses are means of O(n^3) float64
# terms of size O(1), whose rounding is ~1e-14; 1e-9 leaves a wide margin and is far below every gap found.
VALUE_TOL = 1e-9
START_NOISE = 0.05


def instances_per_class(num_classes: int) -> int:
    """The smallest m such that Cm instances spread evenly on the 2d = 2(C - 1) cross-polytope vertices."""
    c = require_int("num_classes", num_classes, min_value=3)
    return 2 * (c - 1) // np.gcd(c, 2 * (c - 1))


def _labels(c: int, m: int) -> np.ndarray:
    return np.repeat(np.arange(c), m)


def nc_configuration(num_classes: int, m: int) -> np.ndarray:
    """NC: instance i of class c at the ETF vertex v_c of R^(C-1), [Cm, C - 1]."""
    return simplex_etf(num_classes, num_classes - 1)[_labels(num_classes, m)]


def mixed_loss(points, labels, rho: float):
    """L_rho of the module docstring for instance points [..., n, d] (torch, differentiable; rows normalized).

    ``labels`` [n] are the classes (each class with the same number m of instances).
    """
    import torch  # heavy optional import

    z = points / points.norm(dim=-1, keepdim=True)
    gram = z @ z.transpose(-1, -2)
    softplus = torch.nn.functional.softplus
    diag = torch.diagonal(gram, dim1=-2, dim2=-1)
    instance = softplus(gram - diag[..., :, None]).mean(dim=(-1, -2))
    labels = np.asarray(labels)
    same = torch.as_tensor(labels[:, None] == labels[None, :], dtype=gram.dtype)
    terms = softplus(gram[..., :, None, :] - gram[..., :, :, None]).mean(dim=-1)  # [..., anchor, positive]
    label = (terms * same / same.sum(dim=1, keepdim=True)).sum(dim=-1).mean(dim=-1)
    return (1 - rho) * label + rho * instance


def population_mixed_loss(points: np.ndarray, labels, rho: float) -> float:
    """L_rho by :func:`ncgeom.population.population_loss` (label and instance positives, exact enumeration)."""
    labels = np.asarray(labels)
    model = FiniteLatentModel([np.asarray(points, dtype=np.float64)[labels == c] for c in np.unique(labels)])
    values = [population_loss(model, "ucl", "infonce", num_negatives=1, positives=law, method="exact").value
              for law in ("label", "instance")]
    return (1 - rho) * values[0] + rho * values[1]


def cross_polytope_labelling(num_classes: int, m: int) -> np.ndarray:
    """Cross-polytope vertex [Cm] of each instance (class by class), chosen to minimize L_label.

    Every vertex carries Cm/(2d) instances. Start: instance i at vertex i mod 2d; then best-improvement swaps of
    the vertices of two instances of different classes until none lowers L_label (:func:`mixed_loss`, rho = 0).
    """
    import torch  # heavy optional import

    c, d = num_classes, num_classes - 1
    labels = _labels(c, m)
    if (c * m) % (2 * d):
        raise ValueError(f"m = {m} does not spread {c} classes evenly on the {2 * d} cross-polytope vertices")
    axes = torch.as_tensor(np.vstack([s * np.eye(d)[i] for i in range(d) for s in (1.0, -1.0)]))
    vertex = np.arange(c * m) % (2 * d)
    pairs = [(i, j) for i in range(c * m) for j in range(i + 1, c * m) if labels[i] != labels[j]]
    current = float(mixed_loss(axes[vertex], labels, 0.0))
    while True:
        swapped = np.repeat(vertex[None, :], len(pairs), axis=0)
        rows = np.arange(len(pairs))
        first, second = np.array(pairs).T
        swapped[rows, first], swapped[rows, second] = vertex[second], vertex[first]
        values = mixed_loss(axes[torch.as_tensor(swapped)], labels, 0.0).numpy()
        best = int(np.argmin(values))
        if values[best] >= current - VALUE_TOL:
            return vertex
        vertex, current = swapped[best], float(values[best])


def cross_polytope_configuration(num_classes: int, m: int) -> np.ndarray:
    """The cross-polytope instance configuration [Cm, C - 1] with the labelling of :func:`cross_polytope_labelling`."""
    d = num_classes - 1
    axes = np.vstack([s * np.eye(d)[i] for i in range(d) for s in (1.0, -1.0)])
    return axes[cross_polytope_labelling(num_classes, m)]


def exact_terms(gram, labels, positives: str) -> dict[Fraction, Fraction]:
    """{a: w}: L = sum_a w log(1 + e^a) for an exact (Fraction) Gram [n][n], uniform instances, k = 1, tau = 1.

    ``positives`` is "label" (uniform over the anchor's class) or "instance" (the anchor itself).
    """
    labels = list(labels)
    n = len(labels)
    out: dict[Fraction, Fraction] = defaultdict(Fraction)
    for a in range(n):
        positives_of_a = [a] if positives == "instance" else [p for p in range(n) if labels[p] == labels[a]]
        weight = Fraction(1, n * len(positives_of_a) * n)
        for p in positives_of_a:
            for j in range(n):
                out[gram[a][j] - gram[a][p]] += weight
    return dict(out)


def exact_value(terms: dict[Fraction, Fraction], *, interval: bool = False):
    """sum_a w log(1 + e^a) in mpmath (50 digits), or as an mpmath interval enclosure with ``interval``."""
    ctx = mpmath.iv if interval else mpmath.mp
    total = ctx.mpf(0)
    for a, w in terms.items():
        total += ctx.mpf(w.numerator) / w.denominator * ctx.log(1 + ctx.exp(ctx.mpf(a.numerator) / a.denominator))
    return total


def _exact_gram_nc(c: int, m: int) -> list[list[Fraction]]:
    labels = _labels(c, m)
    return [[Fraction(1) if labels[i] == labels[j] else Fraction(-1, c - 1) for j in range(c * m)] for i in range(c * m)]


def cross_polytope_crossing(num_classes: int, m: int) -> dict[str, Any]:
    """Exact NC vs cross-polytope along rho: the three losses and the enclosure of the crossing rho_CP.

    Checks that the instance-positive values equal the closed forms of docs/theory.md, section 4
    (:func:`proofs_check.counterexample.nc_formula`, :func:`~proofs_check.counterexample.cross_polytope_formula`).
    """
    c, d = num_classes, num_classes - 1
    labels = _labels(c, m)
    points = cross_polytope_configuration(c, m)
    cp_gram = [[Fraction(int(round(x))) for x in row] for row in points @ points.T]
    nc_gram = _exact_gram_nc(c, m)
    with mpmath.workdps(50):
        a, b = (exact_value(exact_terms(cp_gram, labels, law)) for law in ("label", "instance"))
        nc_label, nc_inst = (exact_value(exact_terms(nc_gram, labels, law)) for law in ("label", "instance"))
        formula_gap = max(abs(nc_inst - mpmath.mpf(str(nc_formula(c).evalf(60)))),
                          abs(b - mpmath.mpf(str(cross_polytope_formula(d).evalf(60)))))
    previous, mpmath.iv.prec = mpmath.iv.prec, 120  # restored below: mpmath's interval context is global
    try:
        ia, ib, inc = (exact_value(exact_terms(g, labels, law), interval=True)
                       for g, law in ((cp_gram, "label"), (cp_gram, "instance"), (nc_gram, "label")))
        rho = (ia - inc) / (ia - ib)
        enclosure = [float(rho.a), float(rho.b)]
    finally:
        mpmath.iv.prec = previous
    return {"nc": float(nc_label), "nc_instance": float(nc_inst), "cp_label": float(a), "cp_instance": float(b),
            "rho_cp": enclosure, "formula_mismatch": float(formula_gap), "points": points, "labels": labels}


def search_below_nc(num_classes: int, m: int, rho: float, *, num_random: int, generator, extra=(),
                    max_iter: int = 1000) -> tuple[float, np.ndarray]:
    """Best L_rho over instance configurations found by multi-start L-BFGS: (value, points [Cm, C - 1]).

    Starts: ``num_random`` Gaussian, NC and the cross-polytope perturbed by START_NOISE, and ``extra`` ([Cm, d]).
    """
    import torch  # heavy optional import

    c, d = num_classes, num_classes - 1
    labels = _labels(c, m)
    base = [nc_configuration(c, m), cross_polytope_configuration(c, m), *extra]
    structured = torch.stack([torch.as_tensor(np.asarray(v), dtype=torch.float64) for v in base])
    starts = torch.cat([torch.randn(num_random, c * m, d, generator=generator, dtype=torch.float64),
                        structured + START_NOISE * torch.randn(structured.shape, generator=generator, dtype=torch.float64)])
    found = multistart(lambda u: mixed_loss(u, labels, rho), starts, max_iter=max_iter)
    return float(found.values[found.best]), found.vectors[found.best]


def dependent_positives(num_classes: int, *, num_random: int, rho_tol: float, seed: int = SEED) -> dict[str, Any]:
    """rho_CP (exact) and rho* (bisection with the search, numerical) for C classes; see the module docstring."""
    import torch  # heavy optional import

    c = require_int("num_classes", num_classes, min_value=3)
    rho_tol = require_real("rho_tol", rho_tol, min_value=0.0, min_inclusive=False)
    m = instances_per_class(c)
    labels = _labels(c, m)
    crossing = cross_polytope_crossing(c, m)
    nc = crossing["nc"]
    generator = torch.Generator().manual_seed(seed)
    at_zero, _ = search_below_nc(c, m, 0.0, num_random=num_random, generator=generator)
    at_one, witness = search_below_nc(c, m, 1.0, num_random=num_random, generator=generator)
    lo, hi, steps = 0.0, crossing["rho_cp"][1], 0
    best_hi = witness
    while hi - lo > rho_tol:
        mid = (lo + hi) / 2
        value, points = search_below_nc(c, m, mid, num_random=num_random, generator=generator, extra=(best_hi,))
        if value < nc - VALUE_TOL:
            hi, best_hi = mid, points
        else:
            lo = mid
        steps += 1
    return {
        "num_classes": c, "dim": c - 1, "instances_per_class": m, "nc": nc, "nc_value_closed_form":
        nc_value("ucl", "infonce", num_classes=c, num_negatives=1), "cross_polytope": crossing,
        "search_at_rho_0_minus_nc": at_zero - nc, "search_at_rho_1": at_one, "search_at_rho_1_population":
        population_mixed_loss(witness, labels, 1.0), "witness_rho_1": witness, "rho_star_bracket": [lo, hi],
        "witness_at_bracket_top": best_hi, "bisection_steps": steps, "num_random": num_random, "rho_tol": rho_tol,
        "seed": seed,
    }
