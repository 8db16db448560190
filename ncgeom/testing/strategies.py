"""Hypothesis strategies for users' and our own property tests (style.md "Tests, in order of trust").

Each strategy draws small, valid inputs of one concept of the toolkit: simplex-ETF configurations,
noisy collapsed embeddings, finite latent-class models, psi and eta parameters, random non-decreasing
(and, for counterexamples, decreasing) hardening functions. Randomness that hypothesis does not draw
directly comes from a ``numpy.random.Generator`` seeded by a drawn integer, so every example is
reproducible and shrinks. Needs the ``hypothesis`` package (a test dependency); ``import ncgeom``
does not import this module.

Examples
--------
>>> from hypothesis import given
>>> @given(etf_configs())
... def test_unit_norm(cfg):
...     assert abs((cfg.vectors() ** 2).sum(axis=1) - 1).max() < 1e-12
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from hypothesis import strategies as st

from ncgeom.geometry import simplex_etf
from ncgeom.losses.eta import Eta, custom_eta, exponential_tilt
from ncgeom.losses.psi import Psi, make_psi
from ncgeom.population.model import FiniteLatentModel
from ncgeom.validate import require_choice
from ncgeom.vocabulary import DOMAINS, PSI_NAMES, Domain, PsiName

__all__ = [
    "EtfConfig",
    "NoisyCollapse",
    "PsiParams",
    "etf_configs",
    "noisy_collapsed_embeddings",
    "finite_latent_models",
    "psi_params",
    "betas",
    "exponential_etas",
    "monotone_etas",
    "decreasing_etas",
]

_SEEDS = st.integers(min_value=0, max_value=2**32 - 1)


class EtfConfig(NamedTuple):
    """A simplex ETF: C classes in dimension d >= C-1, rotated by a Haar matrix from ``seed``."""

    num_classes: int
    dim: int
    seed: int

    def vectors(self) -> np.ndarray:
        """The ETF rows [C, d] (``simplex_etf`` with ``rng=default_rng(seed)``)."""
        return simplex_etf(self.num_classes, self.dim, rng=np.random.default_rng(self.seed))


class NoisyCollapse(NamedTuple):
    """Embeddings z [N, d] = v_{labels} + sigma * standard normal noise, every class present."""

    z: np.ndarray
    labels: np.ndarray
    sigma: float
    num_classes: int


class PsiParams(NamedTuple):
    """A built-in psi name with admissible parameters (tau > 0, margin, k >= 1)."""

    name: PsiName
    tau: float
    margin: float
    num_negatives: int

    def psi(self) -> Psi:
        """The Psi (``make_psi(name, tau=tau, margin=margin)``)."""
        return make_psi(self.name, tau=self.tau, margin=self.margin)


def etf_configs(*, min_classes: int = 2, max_classes: int = 8, max_extra_dim: int = 3) -> st.SearchStrategy[EtfConfig]:
    """ETF configurations: C in [min_classes, max_classes], d in [C-1, C-1+max_extra_dim], a rotation seed."""
    return st.integers(min_classes, max_classes).flatmap(
        lambda c: st.builds(EtfConfig, st.just(c), st.integers(c - 1, c - 1 + max_extra_dim), _SEEDS)
    )


@st.composite
def noisy_collapsed_embeddings(draw, *, max_classes: int = 5, max_per_class: int = 6, max_sigma: float = 0.5, max_extra_dim: int = 2) -> NoisyCollapse:
    """Noisy neural collapse: rotated ETF vertices plus isotropic Gaussian noise of scale sigma in [0, max_sigma].

    Every class has between 2 and ``max_per_class`` samples (so within-class statistics exist). The
    noise comes from a stream independent of the rotation's (``default_rng([seed, 1])``).
    """
    cfg = draw(etf_configs(max_classes=max_classes, max_extra_dim=max_extra_dim))
    sigma = draw(st.floats(0.0, max_sigma))
    counts = draw(st.lists(st.integers(2, max_per_class), min_size=cfg.num_classes, max_size=cfg.num_classes))
    # Not default_rng(seed): that is the rotation's stream, whose first d^2 normals built the rotation.
    rng = np.random.default_rng([cfg.seed, 1])
    labels = np.repeat(np.arange(cfg.num_classes), counts)
    z = cfg.vectors()[labels] + sigma * rng.standard_normal((labels.size, cfg.dim))
    return NoisyCollapse(z, labels, float(sigma), cfg.num_classes)


def finite_latent_models(*, max_classes: int = 3, max_points: int = 3, max_dim: int = 3, normalization: Domain = "ball", balanced: bool = True) -> st.SearchStrategy[FiniteLatentModel]:
    """Small finite latent-class models with points in the unit ball (``normalization="ball"``) or on
    the sphere (``"sphere"``): C in [2, max_classes], 1..max_points points per class, d in [1, max_dim],
    random within-class weights in [0.05, 1] (normalized), and a uniform prior (``balanced=True``) or a
    random positive one. On the sphere a drawn zero vector is replaced by e_1.
    """
    normalization = require_choice("normalization", normalization, DOMAINS)
    return _finite_latent_models(max_classes=max_classes, max_points=max_points, max_dim=max_dim, normalization=normalization, balanced=balanced)


@st.composite
def _finite_latent_models(draw, *, max_classes, max_points, max_dim, normalization, balanced) -> FiniteLatentModel:
    c = draw(st.integers(2, max_classes))
    d = draw(st.integers(1, max_dim))
    coord = st.floats(-1.0, 1.0, allow_nan=False, allow_subnormal=False)
    pts, ws = [], []
    for _ in range(c):
        n = draw(st.integers(1, max_points))
        p = np.array(draw(st.lists(st.lists(coord, min_size=d, max_size=d), min_size=n, max_size=n)), dtype=np.float64)
        norms = np.linalg.norm(p, axis=1, keepdims=True)
        if normalization == "sphere":
            p = np.where(norms > 1e-6, p / np.maximum(norms, 1e-6), np.eye(1, d))
        else:
            p = p / np.maximum(norms, 1.0)
        w = np.array(draw(st.lists(st.floats(0.05, 1.0), min_size=n, max_size=n)))
        pts.append(p)
        ws.append(w / w.sum())
    prior = None
    if not balanced:
        lam = np.array(draw(st.lists(st.floats(0.05, 1.0), min_size=c, max_size=c)))
        prior = lam / lam.sum()
    return FiniteLatentModel(pts, ws, prior)


def psi_params(*, names: tuple[PsiName, ...] = PSI_NAMES, max_negatives: int = 4, min_tau: float = 0.1, max_tau: float = 2.0) -> st.SearchStrategy[PsiParams]:
    """Built-in psi with tau in [min_tau, max_tau], margin in [0, 2], k in [1, max_negatives]."""
    return st.builds(
        PsiParams,
        st.sampled_from(names),
        st.floats(min_tau, max_tau),
        st.floats(0.0, 2.0),
        st.integers(1, max_negatives),
    )


def betas(*, max_beta: float = 10.0) -> st.SearchStrategy[float]:
    """Exponential-tilt strengths beta in [0, max_beta] (0 included: no hardening)."""
    return st.floats(0.0, max_beta, allow_nan=False)


def exponential_etas(*, max_beta: float = 10.0) -> st.SearchStrategy[Eta]:
    """Built-in exponential tilts exp(beta s), beta in [0, max_beta]."""
    return betas(max_beta=max_beta).map(exponential_tilt)


@st.composite
def monotone_etas(draw, *, max_terms: int = 3, max_rate: float = 10.0) -> Eta:
    """Random non-decreasing eta >= 0 (custom, so treated as a user function):

    .. math:: \\eta(s) = c_0 + \\sum_i a_i e^{b_i s} + \\sum_j r_j \\max(0, s - s_j)

    with c_0 >= 0, at least one exponential term (a_i > 0, so eta > 0 everywhere), b_i in [0, max_rate],
    r_j >= 0 and kinks s_j in [-1, 1].
    """
    c0 = draw(st.floats(0.0, 1.0))
    exps = draw(st.lists(st.tuples(st.floats(0.01, 1.0), st.floats(0.0, max_rate)), min_size=1, max_size=max_terms))
    relus = draw(st.lists(st.tuples(st.floats(0.0, 2.0), st.floats(-1.0, 1.0)), max_size=max_terms))
    a = np.array([e[0] for e in exps])
    b = np.array([e[1] for e in exps])
    r = np.array([q[0] for q in relus])
    knots = np.array([q[1] for q in relus])

    def eta(s):
        s = np.asarray(s, dtype=np.float64)[..., None]
        return c0 + (a * np.exp(b * s)).sum(-1) + (r * np.maximum(s - knots, 0.0)).sum(-1)

    return custom_eta(eta, name="monotone-mix")


def decreasing_etas(*, min_rate: float = 1.0, max_rate: float = 10.0) -> st.SearchStrategy[Eta]:
    """Strictly decreasing eta(s) = exp(-b s), b in [min_rate, max_rate]: violates Theorem 1's hypothesis.

    For counterexamples: with it, L_HSCL < L_SCL on suitable models (easy negatives are favoured).
    """
    return st.floats(min_rate, max_rate).map(lambda b: custom_eta(lambda s: np.exp(-b * np.asarray(s, dtype=np.float64)), name=f"decreasing({b:g})"))
