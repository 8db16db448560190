"""Population losses of finite latent-class models with correlated negatives (Theorems 2 and 3), reference and batched.

:func:`correlated_population_loss` evaluates the definition with numpy loops over ordered k-tuples (the reference);
:func:`law_tables` and :func:`batched_loss` are the multiset form used by the searches (torch, differentiable).

Sources: docs/theory.md, section 4 (Theorems 1-3 and their proofs); jiang2025hard, Theorems 1-3; harris1960.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from ncgeom.losses.psi import Psi, make_psi
from ncgeom.population import FiniteLatentModel
from ncgeom.validate import require_choice, require_int, require_real
from ncgeom.vocabulary import SETTINGS, PsiName, Setting, effective_beta, is_supervised
from proofs_check.ablations.negatives.laws import SEARCH_FAMILIES, require_rho

__all__ = ["correlated_population_loss", "law_tables", "batched_loss"]


def correlated_population_loss(model: FiniteLatentModel, setting: Setting, psi: PsiName | Psi = "infonce", *,
                               num_negatives: int, family: str, rho: float, beta: float = 0.0,
                               tau: float = 1.0) -> float:
    """Population loss of a finite latent-class model with negatives from P_rho, from the definition (numpy loops).

    .. math::

        L_S = \\sum_x p(x) \\sum_{x^+} p(x^+ \\mid x) \\sum_{y_1..y_k} Q_\\rho(y \\mid x)\\,
              \\psi_k\\big((s_{x y_i} - s_{x x^+})_i\\big), \\qquad
        Q_\\rho(y \\mid x) = \\frac{P_\\rho(y \\mid x) \\prod_i e^{\\beta s_{x y_i}}}{\\sum_{y'} P_\\rho(y' \\mid x) \\prod_i e^{\\beta s_{x y'_i}}},

    where p = ``model.probabilities``, x^+ is drawn from the anchor's class, q(y | x) is p(y) restricted to the
    other classes and renormalized (scl, hscl) or p(y) (ucl, hucl), and P_rho is the module docstring's mixture.
    For ``same-class``, P_F(y | x) = sum_{c'} pi(c' | x) prod_i p(y_i | c') with pi(c' | x) = q(class c' | x):

    .. math::

        L^{\\text{same-class}}_{\\mathrm{SCL}} = \\sum_x p(x) \\sum_{x^+} p(x^+ \\mid x) \\sum_{c' \\ne c(x)}
        \\frac{\\lambda_{c'}}{1 - \\lambda_{c(x)}} \\sum_{y_1..y_k \\in c'} \\prod_i p(y_i \\mid c')\\,
        \\psi_k\\big((s_{x y_i} - s_{x x^+})_i\\big) \\qquad (\\rho = 1,\\ \\beta = 0).

    ``beta`` is the exponential tilt (used by hscl / hucl only; scl and ucl ignore it). Every ordered k-tuple is
    enumerated: N^k terms per anchor. At rho = 0 it equals :func:`ncgeom.population.population_loss`.

    Example: C = 2 antipodal points, scl, k = 2, any family: every negative has t = -2, so the value is
    log(1 + 2 e^-2) = 0.239... for infonce.
    """
    setting = require_choice("setting", setting, SETTINGS)
    family = require_choice("family", family, SEARCH_FAMILIES)
    k = require_int("num_negatives", num_negatives, min_value=1)
    r = float(require_rho(rho))
    b = effective_beta(setting, require_real("beta", beta, min_value=0.0))
    psi = make_psi(psi, tau=tau)
    z, y, p = model.embeddings, model.labels, model.probabilities
    n = y.size
    sims = z @ z.T
    tuples = np.array(list(itertools.product(range(n), repeat=k)), dtype=np.int64).reshape(-1, k)
    total = 0.0
    for x in range(n):
        if p[x] == 0:
            continue
        eligible = (y != y[x]) | (not is_supervised(setting))
        q = np.where(eligible, p, 0.0) / p[eligible].sum()
        law = np.prod(q[tuples], axis=1)
        if family == "same-class":
            within = np.where(eligible, p, 0.0)
            class_mass = {c: within[y == c].sum() for c in np.unique(y[eligible])}
            corr = np.zeros(len(tuples))
            for c, mass in class_mass.items():
                inside = np.all(y[tuples] == c, axis=1)
                corr += np.where(inside, mass / within.sum() * np.prod(p[tuples] / mass, axis=1), 0.0)
        elif family == "copies":
            corr = np.where(np.all(tuples == tuples[:, :1], axis=1), q[tuples[:, 0]], 0.0)
        else:  # without-replacement
            if np.ptp(q[eligible]) > 0:
                raise ValueError("family 'without-replacement' needs eligible points of equal probabilities")
            distinct = np.array([len(set(t)) == k for t in tuples.tolist()]) & np.all(eligible[tuples], axis=1)
            if not distinct.any():
                raise ValueError(f"family 'without-replacement' needs >= num_negatives = {k} eligible points")
            corr = distinct / distinct.sum()
        weight = ((1 - r) * law + r * corr) * np.exp(b * sims[x][tuples].sum(axis=1))
        weight /= weight.sum()
        same = y == y[x]
        for pos in np.flatnonzero(same):
            t = sims[x][tuples] - sims[x, pos]
            total += p[x] * p[pos] / p[same].sum() * float(weight @ np.asarray(psi(t), dtype=np.float64))
    return total


def _class_of(num_classes: int, per_class: int) -> np.ndarray:
    return np.repeat(np.arange(num_classes), per_class)


def law_tables(num_classes: int, per_class: int, num_negatives: int, setting: Setting, family: str,
               rho: float) -> tuple[np.ndarray, np.ndarray]:
    """(tuples [M, k], weights [C, M]): the law P_rho of the negatives' multiset of point ids, given the anchor's
    class, for C balanced classes of ``per_class`` equally likely points (point j in class j // per_class).

    Multisets (sorted tuples) with their multinomial weights suffice for a symmetric psi; tuples of zero weight for
    every class are dropped. Rows sum to 1.
    """
    c, m, k = num_classes, per_class, num_negatives
    r = float(require_rho(rho))
    family = require_choice("family", family, SEARCH_FAMILIES)
    cls = _class_of(c, m)
    tuples = np.array(list(itertools.combinations_with_replacement(range(c * m), k)), dtype=np.int64)
    counts = np.stack([np.bincount(t, minlength=c * m) for t in tuples])
    arrangements = math.factorial(k) / np.prod([[math.factorial(int(x)) for x in row] for row in counts], axis=1)
    weights = np.zeros((c, len(tuples)))
    for a in range(c):
        eligible = (cls != a) | (not is_supervised(setting))
        q = eligible / eligible.sum()
        iid = arrangements * np.prod(q[tuples], axis=1)
        if family == "same-class":
            one = np.all(cls[tuples] == cls[tuples[:, :1]], axis=1) & eligible[tuples[:, 0]]
            corr = np.where(one, arrangements * (1.0 / m) ** k / len(np.unique(cls[eligible])), 0.0)
        elif family == "copies":
            corr = np.where(counts.max(axis=1) == k, q[tuples[:, 0]], 0.0)
        else:
            distinct = (counts.max(axis=1) == 1) & np.all(eligible[tuples], axis=1)
            corr = distinct / distinct.sum()
        weights[a] = (1 - r) * iid + r * corr
    keep = weights.max(axis=0) > 0
    return tuples[keep], weights[:, keep]


def batched_loss(points, tables: tuple[np.ndarray, np.ndarray], *, per_class: int, psi: Psi, beta: float):
    """L of :func:`correlated_population_loss` for configurations ``points`` [S, C * per_class, d] (torch float64,
    rows normalized to the sphere, differentiable), balanced classes, uniform points, label positives.

    ``tables`` is :func:`law_tables`; ``beta`` the tilt (0 for the plain settings).
    """
    import torch  # heavy optional import

    tuples, weights = (torch.as_tensor(x) for x in tables)
    z = points / points.norm(dim=-1, keepdim=True)
    gram = z @ z.transpose(-1, -2)  # [S, N, N]
    n = gram.shape[-1]
    cls = torch.as_tensor(_class_of(n // per_class, per_class))
    s = gram[..., tuples]  # [S, N, M, k]
    log_w = torch.log(weights)[cls]  # [N, M]; -inf where a tuple is not drawn for that anchor class
    q = torch.softmax(log_w + beta * s.sum(dim=-1), dim=-1)  # [S, N, M]
    positives = cls[:, None] == cls[None, :]
    pos_gram = gram[..., positives].reshape(*gram.shape[:-2], n, per_class)  # [S, N, P]
    t = s[..., None, :, :] - pos_gram[..., :, None, None]  # [S, N, P, M, k]
    return (psi(t) * q[..., None, :]).sum(dim=-1).mean(dim=(-1, -2))
