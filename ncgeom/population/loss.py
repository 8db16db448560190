"""Population losses L_SCL, L_HSCL, L_UCL, L_HUCL of a finite latent-class model (docs/theory.md section 3).

.. math::

    L_S(f) = \\mathbb{E}_{x}\\,\\mathbb{E}_{x^+ \\mid x}\\,\\mathbb{E}_{x_1^-,\\dots,x_k^- \\overset{iid}{\\sim} q_S(\\cdot\\mid x)}
        \\,\\psi_k\\big(\\langle z, z_1^-\\rangle - \\langle z, z^+\\rangle, \\dots\\big),

where the anchor x follows the marginal sum_c lambda_c p(x | c); the positive is an independent draw
from the anchor's class (``positives="label"``) or the anchor itself (``"instance"``); and the negative
law q_S is p(x- | c- != c) (SCL), the marginal p (UCL), or those reweighted by eta(<z, z->) (HSCL,
HUCL). Source: jiang2025hard, section "problem setup" (docs/theory.md section 3).

Exact evaluation groups negatives (and positives) by their similarity to the anchor and, for a
symmetric psi, enumerates multisets of k similarities with multinomial weights, so a term is one
(anchor, positive similarity, negative multiset); otherwise ordered k-tuples. Monte Carlo draws
(anchor, positive, k negatives) i.i.d. from an explicit Generator and reports the standard error.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
from scipy.special import gammaln

from ncgeom.losses.eta import Eta, exponential_tilt, tilt_weights
from ncgeom.losses.psi import Psi, make_psi
from ncgeom.population.model import FiniteLatentModel
from ncgeom.validate import require_choice, require_int, require_real
from ncgeom.vocabulary import SETTINGS, PositiveLaw, PsiName, Setting, is_hard, is_supervised

__all__ = ["PopulationLoss", "population_loss", "negative_law", "positive_law"]

#: The positive laws (ncgeom.vocabulary.POSITIVE_LAWS) a finite model expresses exactly: x+ from the anchor's class,
#: or x+ = x (noise positives need a density, not a finite set of points).
_POSITIVE_LAWS: tuple[PositiveLaw, ...] = ("label", "instance")
_Method = Literal["auto", "exact", "mc"]
_METHODS: tuple[_Method, ...] = ("auto", "exact", "mc")


@dataclass(frozen=True)
class PopulationLoss:
    """A population loss value.

    Attributes
    ----------
    value : float
        The exact expectation, or the Monte Carlo mean.
    stderr : float
        0.0 for exact; sample standard deviation / sqrt(num_samples) for Monte Carlo.
    method : {"exact", "mc"}
    num_terms : int or None
        Terms summed by the exact method (anchor x positive similarity x negative multiset/tuple).
    num_samples : int or None
        Draws of the Monte Carlo method.
    setting, psi, num_negatives, positives, eta, beta
        What was computed (eta: name of the hardening or None; beta: its tilt if exponential).
    """

    value: float
    stderr: float
    method: str
    num_terms: int | None
    num_samples: int | None
    setting: str
    psi: str
    num_negatives: int
    positives: str
    eta: str | None
    beta: float | None


def negative_law(model: FiniteLatentModel, setting: Setting, *, eta: Eta | float | None = None) -> np.ndarray:
    """Law of one negative given each anchor point, [N, N] (rows sum to 1; docs/theory.md section 3).

    Row x is p(m | y_m != y_x) (SCL/HSCL) or p(m) (UCL/HUCL), tilted by eta(<z_x, z_m>) for the hard
    settings (``eta`` an Eta, a beta >= 0 for exponential tilting, or None for no tilt; ignored by scl
    and ucl).
    """
    setting = require_choice("setting", setting, SETTINGS)
    p, y = model.probabilities, model.labels
    base = np.broadcast_to(p, (p.size, p.size)).copy()
    if is_supervised(setting):
        base[y[:, None] == y[None, :]] = 0.0
        base /= base.sum(axis=1, keepdims=True)
    eta = _as_eta(eta) if is_hard(setting) else None
    if eta is None:
        return base
    z = model.embeddings
    return tilt_weights(eta, z @ z.T, base)


def positive_law(model: FiniteLatentModel, positives: PositiveLaw = "label") -> np.ndarray:
    """Law of the positive given each anchor point, [N, N]: the anchor's class law, or the anchor itself."""
    positives = require_choice("positives", positives, _POSITIVE_LAWS)
    n = model.labels.size
    if positives == "instance":
        return np.eye(n)
    same = model.labels[:, None] == model.labels[None, :]
    w = np.where(same, model.probabilities[None, :], 0.0)
    return w / w.sum(axis=1, keepdims=True)


def _as_eta(eta) -> Eta | None:
    if eta is None or isinstance(eta, Eta):
        return eta
    return exponential_tilt(require_real("eta", eta, min_value=0.0))


def _grouped(values: np.ndarray, probs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct values with positive probability and their total probability."""
    keep = probs > 0
    uniq, inv = np.unique(values[keep], return_inverse=True)
    return uniq, np.bincount(inv, weights=probs[keep], minlength=uniq.size)


def _num_tuples(u: int, k: int, symmetric: bool) -> int:
    return math.comb(u + k - 1, k) if symmetric else u**k


def _tuples(r: np.ndarray, k: int, symmetric: bool) -> tuple[np.ndarray, np.ndarray]:
    """Index tuples [T, k] into the support and their probabilities [T] under k i.i.d. draws from r."""
    u = r.size
    with np.errstate(divide="ignore"):
        logr = np.log(r)
    if symmetric:
        idx = np.array(list(itertools.combinations_with_replacement(range(u), k)), dtype=np.int64).reshape(-1, k)
        counts = np.zeros((idx.shape[0], u))
        np.add.at(counts, (np.repeat(np.arange(idx.shape[0]), k), idx.ravel()), 1.0)
        logp = gammaln(k + 1) - gammaln(counts + 1).sum(axis=1) + (counts * logr).sum(axis=1)
    else:
        idx = np.array(list(itertools.product(range(u), repeat=k)), dtype=np.int64).reshape(-1, k)
        logp = logr[idx].sum(axis=1)
    return idx, np.exp(logp)


def population_loss(
    model: FiniteLatentModel,
    setting: Setting,
    psi: PsiName | Psi = "infonce",
    *,
    num_negatives: int,
    eta: Eta | float | None = None,
    positives: PositiveLaw = "label",
    method: _Method = "auto",
    rng: np.random.Generator | None = None,
    num_samples: int = 20_000,
    max_exact_terms: int = 1_000_000,
    tau: float = 1.0,
    margin: float = 1.0,
) -> PopulationLoss:
    """Population loss L_S(f) of a finite latent-class model (docs/theory.md section 3), exact or Monte Carlo.

    .. math::

        L_S = \\sum_x p(x) \\sum_{x^+} p^+(x^+\\mid x) \\sum_{(m_1..m_k)} \\prod_i q_S(m_i\\mid x)\\,
              \\psi_k\\big((s_{x m_i} - s_{x x^+})_{i}\\big),\\qquad s_{ab} = \\langle z_a, z_b\\rangle,

    where p = ``model.probabilities``, p^+ = :func:`positive_law` (``positives``), q_S =
    :func:`negative_law` (``setting``, ``eta``) and k = ``num_negatives``.

    Parameters
    ----------
    model : FiniteLatentModel
    setting : {"scl", "hscl", "ucl", "hucl"}
    psi : str or Psi
        Name (with ``tau``, ``margin``) or a Psi; any psi, symmetric or not.
    num_negatives : int
        k >= 1.
    eta : Eta, float or None
        Hardening for hscl/hucl: an Eta, a beta >= 0 (exponential tilt), or None (eta = 1). Ignored by
        scl/ucl, as the batch estimators ignore beta there.
    positives : {"label", "instance"}
        ``label``: conditionally independent draw from the anchor's class; ``instance``: x+ = x.
    method : {"auto", "exact", "mc"}
        ``auto`` is exact when the number of terms is <= ``max_exact_terms``, else Monte Carlo.
        ``exact`` always enumerates; memory grows as (distinct positive similarities) x (multisets,
        C(U+k-1, k), or tuples, U^k, of U distinct negative similarities) x k per anchor.
    rng : numpy.random.Generator
        Required for Monte Carlo.
    num_samples : int
        Monte Carlo draws (>= 2).

    Returns
    -------
    PopulationLoss

    Examples
    --------
    C = 2 antipodal points, SCL, infonce, k = 1: log(1 + e^-2).

    >>> m = FiniteLatentModel([[[1.0]], [[-1.0]]])
    >>> round(population_loss(m, "scl", num_negatives=1).value, 9)
    0.126928011
    """
    if not isinstance(model, FiniteLatentModel):
        raise ValueError("model must be a FiniteLatentModel")
    setting = require_choice("setting", setting, SETTINGS)
    k = require_int("num_negatives", num_negatives, min_value=1)
    positives = require_choice("positives", positives, _POSITIVE_LAWS)
    method = require_choice("method", method, _METHODS)
    num_samples = require_int("num_samples", num_samples, min_value=2)
    max_exact_terms = require_int("max_exact_terms", max_exact_terms, min_value=1)
    if not isinstance(psi, Psi):
        psi = make_psi(psi, tau=tau, margin=margin)
    eta_obj = _as_eta(eta) if is_hard(setting) else None
    z = model.embeddings
    sims = z @ z.T
    neg = negative_law(model, setting, eta=eta_obj)
    pos = positive_law(model, positives)
    anchors = np.flatnonzero(model.probabilities > 0)
    psi_name = psi.name

    def result(value: float, stderr: float, how: str, num_terms: int | None, draws: int | None) -> PopulationLoss:
        return PopulationLoss(value, stderr, how, num_terms, draws, setting=setting, psi=psi_name, num_negatives=k,
                              positives=positives, eta=None if eta_obj is None else eta_obj.name,
                              beta=None if eta_obj is None else eta_obj.beta)

    if method != "mc":
        groups = [(x, _grouped(sims[x], pos[x]), _grouped(sims[x], neg[x])) for x in anchors]
        num_terms = sum(gp[0].size * _num_tuples(gn[0].size, k, psi.symmetric) for _, gp, gn in groups)
        if method == "exact" or num_terms <= max_exact_terms:
            total = 0.0
            for x, (vp, rp), (vn, rn) in groups:
                idx, prob = _tuples(rn, k, psi.symmetric)
                t = vn[idx][None, :, :] - vp[:, None, None]  # [P, T, k]
                vals = np.asarray(psi(t), dtype=np.float64)
                total += model.probabilities[x] * float(rp @ vals @ prob)
            return result(float(total), 0.0, "exact", int(num_terms), None)

    if not isinstance(rng, np.random.Generator):
        raise ValueError("rng must be a numpy.random.Generator for the Monte Carlo method (method='mc', or 'auto' beyond max_exact_terms)")
    draws = rng.choice(z.shape[0], size=num_samples, p=model.probabilities)
    xs, counts = np.unique(draws, return_counts=True)
    values: list[np.ndarray] = []
    for x, m in zip(xs, counts):
        p_idx = rng.choice(z.shape[0], size=m, p=pos[x])
        n_idx = rng.choice(z.shape[0], size=(m, k), p=neg[x])
        values.append(np.asarray(psi(sims[x, n_idx] - sims[x, p_idx][:, None]), dtype=np.float64))
    samples = np.concatenate(values)
    return result(float(samples.mean()), float(samples.std(ddof=1) / math.sqrt(num_samples)), "mc", None, num_samples)
