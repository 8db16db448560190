"""Exact parts of the dependent-positives ablation (Theorem 3, hypothesis 5): the local threshold of NC and the
optimal cross-polytope labelling.

:func:`local_threshold` gives rho_loc, where the Hessian of L_rho = (1 - rho) L_label + rho L_inst at NC modulo
rotations first loses positivity (a generalized eigenvalue problem); :func:`labelling_optimum` proves the swap
search's cross-polytope labelling optimal by exhaustive search modulo symmetry. The model and the losses are those of
:mod:`proofs_check.ablations.positives`, which re-exports both.

Sources: docs/theory.md, section 4 (Theorem 3, hypothesis 5; the cross-polytope counterexample); jiang2025hard,
Theorem 3.
"""

from __future__ import annotations

import functools
import itertools
from typing import Any

import numpy as np
import scipy.linalg

from ncgeom.validate import require_int
from proofs_check.ablations.positives_model import (
    _labels,
    cross_polytope_labelling,
    instances_per_class,
    mixed_loss,
    nc_configuration,
)
from proofs_check.hucl.local import tangent_complement

__all__ = ["local_threshold", "labelling_optimum"]


def local_threshold(num_classes: int) -> dict[str, Any]:
    """rho_loc: the smallest rho at which NC stops being a strict local minimizer of L_rho modulo rotations.

    L_rho is affine in rho, so its Hessian at NC (a critical point for every rho, by symmetry) is
    H(rho) = (1 - rho) H_label + rho H_inst, both in an orthonormal basis of the tangent space orthogonal to the
    rotations (:func:`proofs_check.hucl.local.tangent_complement`; autograd, float64). With H_label positive definite
    (Theorem 3: NC is a strict local minimizer at rho = 0), H(rho) is singular exactly when
    (H_label - H_inst) v = (1/rho) H_label v: rho_loc = 1 / mu_max, mu_max the largest generalized eigenvalue
    (scipy.linalg.eigh), when mu_max > 1 (else NC stays a local minimizer up to rho = 1). Cross-check: the smallest
    eigenvalue of H(rho) at rho_loc -/+ 1e-6 (> 0, < 0).
    """
    import torch  # heavy optional import

    c = require_int("num_classes", num_classes, min_value=3)
    m = instances_per_class(c)
    labels = _labels(c, m)
    nc = nc_configuration(c, m)
    basis = torch.as_tensor(tangent_complement(nc))
    z0 = torch.as_tensor(nc)
    hessians = []
    for rho in (0.0, 1.0):
        h = torch.autograd.functional.hessian(
            lambda x, rho=rho: mixed_loss(z0 + (basis @ x).reshape(z0.shape), labels, rho),
            torch.zeros(basis.shape[1], dtype=torch.float64)).numpy()
        hessians.append((h + h.T) / 2)
    h_label, h_inst = hessians
    mu = scipy.linalg.eigh(h_label - h_inst, h_label, eigvals_only=True)
    rho_loc = float(1.0 / mu.max()) if mu.max() > 1 else None

    def smallest(rho: float) -> float:
        return float(np.linalg.eigvalsh((1 - rho) * h_label + rho * h_inst)[0])

    return {"rho_loc": rho_loc, "mu_max": float(mu.max()), "h_label_min": smallest(0.0), "h_instance_min": smallest(1.0),
            "below": None if rho_loc is None else smallest(rho_loc - 1e-6),
            "above": None if rho_loc is None else smallest(rho_loc + 1e-6), "dimension": int(basis.shape[1]),
            "method": "generalized eigenvalues of (H_label - H_inst, H_label), autograd Hessians at NC modulo rotations"}


def labelling_optimum(num_classes: int, m: int, *, vertex: np.ndarray | None = None) -> dict[str, Any]:
    """Exhaustive search of the cross-polytope labelling modulo symmetry (exact, integers).

    With n/(2d) instances at each vertex, an anchor's negatives have the same similarity law at every vertex (1/(2d)
    at +1 and at -1, the rest at 0), so L_label = const + (h(1) - h(0)) S + (h(-1) - h(0)) A [derived], h decreasing,
    where S = sum_c sum_v N_cv^2 (ordered same-vertex pairs of a class) and A = 2 sum_c sum_i N_c,+i N_c,-i (antipodal
    pairs) for the count matrix N [C, 2d] (row sums m, column sums n/(2d)). Any labelling with A = 0 and S = S_max
    (the largest S of all labellings) minimizes L_label. S_max is found by dynamic programming over the classes, the
    state being the remaining vertex capacities modulo the hyperoctahedral group (antipodal pairs sorted, pairs
    permuted): every count matrix is covered. Returns S_max, the smallest A among labellings with S_max, the
    statistics of ``vertex`` (the vertex [Cm] of each instance; default :func:`cross_polytope_labelling`) and whether
    it is optimal.
    """
    c = require_int("num_classes", num_classes, min_value=3)
    d, m = c - 1, require_int("m", m, min_value=1)
    vertices, per = 2 * d, c * m // (2 * (c - 1))
    vecs = np.array([v for v in itertools.product(range(min(m, per) + 1), repeat=vertices) if sum(v) == m],
                    dtype=np.int64)
    same = (vecs**2).sum(axis=1)
    anti = 2 * (vecs[:, 0::2] * vecs[:, 1::2]).sum(axis=1)

    def canon(caps: np.ndarray) -> list[tuple[tuple[int, int], ...]]:
        pairs = np.sort(caps.reshape(len(caps), d, 2), axis=2)
        return [tuple(sorted((int(a), int(b)) for a, b in row)) for row in pairs]

    @functools.cache
    def best(key: tuple[tuple[int, int], ...], left: int) -> tuple[int, int]:
        """(max S, then min A) over the remaining ``left`` classes with capacities ``key``."""
        if left == 0:
            return (0, 0)
        caps = np.array(key, dtype=np.int64).ravel()
        idx = np.flatnonzero(np.all(vecs <= caps, axis=1))
        out: tuple[int, int] | None = None
        for i, nxt in zip(idx, canon(caps[None, :] - vecs[idx])):
            s, a = best(nxt, left - 1)
            cand = (int(same[i]) + s, int(anti[i]) + a)
            if s >= 0 and (out is None or (cand[0], -cand[1]) > (out[0], -out[1])):
                out = cand
        return out if out is not None else (-(10**9), 0)

    s_max, a_min = best(tuple([(per, per)] * d), c)
    vertex = cross_polytope_labelling(c, m) if vertex is None else np.asarray(vertex)
    counts = np.zeros((c, vertices), dtype=np.int64)
    for v, label in zip(vertex, _labels(c, m)):
        counts[label, v] += 1
    s_h, a_h = int((counts**2).sum()), int(2 * (counts[:, 0::2] * counts[:, 1::2]).sum())
    return {"s_max": s_max, "a_at_s_max": a_min, "heuristic_s": s_h, "heuristic_a": a_h,
            "heuristic_optimal": s_h == s_max and a_h == 0, "states": best.cache_info().currsize,
            "count_matrix": counts.tolist()}
