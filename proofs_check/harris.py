"""Harris' inequality and Theorem 1 (tilted >= plain), checked exactly in rational arithmetic.

docs/theory.md section 4, Theorem 1 [claim; proof derived]: given (x, x+), the negatives' similarities
S_i = <z, z_i-> are i.i.d.; the tilted law has density prod_i eta(S_i) / Z^k with respect to the plain
one, and psi_k(S - s+ 1) and prod_i eta(S_i) are coordinate-wise non-decreasing, so Harris' inequality

.. math:: \\mathbb E_\\mu[gh] \\ge \\mathbb E_\\mu[g]\\,\\mathbb E_\\mu[h]\\qquad(\\mu\\ \\text{a product measure},\\ g, h\\ \\text{non-decreasing})

gives L_HSCL(f) >= L_SCL(f) and L_HUCL(f) >= L_UCL(f), for every f, monotone psi (convexity not
needed) and monotone eta >= 0. The same argument covers a joint tilt: the k negatives' law reweighted
by eta(S_1, ..., S_k) with eta: R^k -> [0, inf) non-decreasing in every coordinate (the product
prod_i eta(S_i) is one case); :func:`check_joint_tilted_bound` checks it on weighted finite models.

Everything here is exact (``fractions.Fraction``): random product measures on {0..m}^n, random monotone
tables, finite contrastive models with rational Gram matrices and masses, piecewise-linear / step psi,
step and joint eta. Two self-tests (evidence about the checkers, not about the
paper) feed them hand-picked counterexamples, a correlated (non-product) law and a non-monotone eta, and
pass only if the checkers report ``fail`` on them.
Randomness comes only from the ``rng`` argument; :func:`checks` seeds it.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from ncgeom.validate import require_int
from ncgeom.vocabulary import SETTINGS, is_hard, is_supervised
from proofs_check.records import CheckResult, timed

__all__ = [
    "SEED",
    "Law",
    "FiniteModel",
    "product_law",
    "is_product",
    "random_marginals",
    "random_monotone_table",
    "is_monotone_table",
    "covariance",
    "hinge_psi",
    "random_monotone_psi",
    "step_eta",
    "random_monotone_eta",
    "random_monotone_joint_eta",
    "random_model",
    "etf_model",
    "model_loss",
    "check_harris",
    "check_tilted_bound",
    "check_tilted_gap_is_covariance",
    "check_tilted_equality_at_nc",
    "check_joint_tilted_bound",
    "check_harris_needs_product",
    "check_tilted_needs_monotone_eta",
    "checks",
]

SEED = 20251129
"""Seed of the Generators that :func:`checks` passes to the randomized checkers."""

Law = dict  # {point (tuple of ints): Fraction probability}
_SOURCE = "docs/theory.md section 4, Theorem 1 (Harris lower bounds); jiang2025hard, Theorem 1"


def product_law(marginals: Sequence[Sequence[Fraction]]) -> Law:
    """The product measure on prod_i {0..len(marginals[i])-1}."""
    law = {}
    for point in itertools.product(*[range(len(p)) for p in marginals]):
        law[point] = functools.reduce(lambda a, b: a * b, (marginals[i][x] for i, x in enumerate(point)), Fraction(1))
    return law


def is_product(law: Law) -> bool:
    """True iff the joint law equals the product of its marginals (exactly)."""
    n = len(next(iter(law)))
    margins: list[dict[int, Fraction]] = [{} for _ in range(n)]
    for point, p in law.items():
        for i, x in enumerate(point):
            margins[i][x] = margins[i].get(x, Fraction(0)) + p
    return all(law.get(pt, Fraction(0)) == functools.reduce(lambda a, b: a * b, (margins[i][x] for i, x in enumerate(pt)), Fraction(1)) for pt in itertools.product(*[sorted(m) for m in margins]))


def random_marginals(n: int, m: int, *, rng: np.random.Generator, denominator: int = 12) -> list[list[Fraction]]:
    """n random laws on {0..m} with positive rational probabilities (integer weights in 1..denominator)."""
    out = []
    for _ in range(n):
        w = rng.integers(1, denominator + 1, size=m + 1)
        out.append([Fraction(int(x), int(w.sum())) for x in w])
    return out


def random_monotone_table(n: int, m: int, *, rng: np.random.Generator, high: int = 4) -> dict:
    """A random coordinate-wise non-decreasing function on {0..m}^n with integer values (may be negative).

    Cumulative sums along every axis of non-negative integer increments are non-decreasing in each
    coordinate. The increments are dense, sparse (mostly zero: near-indicators of up-sets) or confined to
    one random coordinate (then two such tables on different coordinates have covariance exactly 0, the
    equality case of Harris' inequality under a product measure).
    """
    kind = int(rng.integers(0, 3))
    a = rng.integers(0, high + 1, size=(m + 1,) * n)
    if kind == 1:
        a = a * (rng.random(a.shape) < 0.2)
    elif kind == 2:
        axis = int(rng.integers(0, n))
        a = np.zeros_like(a)
        a[(0,) * axis + (slice(None),) + (0,) * (n - axis - 1)] = rng.integers(0, high + 1, size=m + 1)
    for ax in range(n):
        a = np.cumsum(a, axis=ax)
    shift = int(rng.integers(0, int(a.max()) + 1))
    return {pt: Fraction(int(a[pt]) - shift) for pt in itertools.product(range(m + 1), repeat=n)}


def is_monotone_table(table: dict) -> bool:
    """True iff table[x + e_i] >= table[x] wherever both are defined."""
    return all(table[(*pt[:i], pt[i] + 1, *pt[i + 1 :])] >= v for pt, v in table.items() for i in range(len(pt)) if (*pt[:i], pt[i] + 1, *pt[i + 1 :]) in table)


def covariance(law: Law, g: dict, h: dict) -> Fraction:
    """E[gh] - E[g] E[h] under ``law``, exactly."""
    eg = sum((p * g[x] for x, p in law.items()), Fraction(0))
    eh = sum((p * h[x] for x, p in law.items()), Fraction(0))
    return sum((p * g[x] * h[x] for x, p in law.items()), Fraction(0)) - eg * eh


def hinge_psi(margin: Fraction = Fraction(1)) -> Callable[[tuple], Fraction]:
    """The triplet psi (1/k) sum_i max(0, t_i + margin) in exact arithmetic (docs/theory.md section 2)."""
    return lambda t: sum((max(Fraction(0), x + margin) for x in t), Fraction(0)) / len(t)


def random_monotone_psi(*, rng: np.random.Generator, num_knots: int = 3) -> Callable[[tuple], Fraction]:
    """psi(t) = sum_i sum_j (a_j max(0, t_i - b_j) + w_j [t_i >= b_j]) + c max_i t_i, a, w, c >= 0.

    Non-decreasing in every argument; not convex in general (the steps), which Theorem 1 does not need.
    """
    knots = [Fraction(int(x), 4) for x in rng.integers(-12, 5, size=num_knots)]
    slopes = [Fraction(int(x), 2) for x in rng.integers(0, 4, size=num_knots)]
    jumps = [Fraction(int(x), 3) for x in rng.integers(0, 3, size=num_knots)]
    top = Fraction(int(rng.integers(0, 3)))
    return lambda t: sum((a * max(Fraction(0), x - b) + (w if x >= b else 0) for x in t for a, w, b in zip(slopes, jumps, knots)), Fraction(0)) + top * max(t)


def step_eta(knots: Sequence[Fraction], heights: Sequence[Fraction], base: Fraction = Fraction(1)) -> Callable[[Fraction], Fraction]:
    """eta(s) = base + sum_j heights_j [s >= knots_j]; non-decreasing iff every height is >= 0."""
    return lambda s: base + sum((h for b, h in zip(knots, heights) if s >= b), Fraction(0))


def random_monotone_eta(*, rng: np.random.Generator, num_knots: int = 3) -> Callable[[Fraction], Fraction]:
    """A random non-decreasing step eta > 0 plus a non-negative linear part above its lowest knot."""
    knots = sorted(Fraction(int(x), 4) for x in rng.integers(-8, 9, size=num_knots))
    heights = [Fraction(int(x), 2) for x in rng.integers(0, 5, size=num_knots)]
    slope = Fraction(int(rng.integers(0, 3)))
    steps = step_eta(knots, heights, base=Fraction(int(rng.integers(1, 4)), 2))
    return lambda s: steps(s) + slope * max(Fraction(0), s - knots[0])


def random_monotone_joint_eta(num_negatives: int, *, rng: np.random.Generator, num_terms: int = 3) -> Callable[[tuple], Fraction]:
    """A random joint eta: R^k -> (0, inf), non-decreasing in every coordinate and not a product.

    eta(s) = base + sum_j w_j [a_j . s >= b_j] + c max(0, max_i s_i - b_0), with a_j in {0, 1, 2}^k,
    w_j, c >= 0 and base > 0: half-spaces with non-negative normals are up-sets, max is non-decreasing.
    """
    k = require_int("num_negatives", num_negatives, min_value=1)
    normals = [tuple(int(x) for x in rng.integers(0, 3, size=k)) for _ in range(num_terms)]
    offsets = [Fraction(int(x), 4) for x in rng.integers(-8, 9, size=num_terms + 1)]
    heights = [Fraction(int(x), 2) for x in rng.integers(0, 5, size=num_terms)]
    slope, base = Fraction(int(rng.integers(0, 3))), Fraction(int(rng.integers(1, 4)), 2)

    def eta(s: tuple) -> Fraction:
        steps = sum((w for a, b, w in zip(normals, offsets[1:], heights) if sum((x * y for x, y in zip(a, s)), Fraction(0)) >= b), Fraction(0))
        return base + steps + slope * max(Fraction(0), max(s) - offsets[0])

    return eta


@dataclass(frozen=True)
class FiniteModel:
    """A finite contrastive model: points with labels, rational masses and their exact similarity (Gram) matrix.

    A point is drawn with probability ``masses[i]`` (uniform when None); a label-based positive is drawn
    from the anchor's class (masses renormalized within the class, independently of the anchor);
    negatives are i.i.d. from the other classes' points (SCL) or from all points (UCL), masses
    renormalized, tilted by eta(<z, z->) (or jointly, eta(S_1..S_k)) in the hard settings. No
    normalization is assumed: Theorem 1 holds for every f.
    """

    gram: tuple  # tuple of tuples of Fraction, [N, N]
    labels: tuple  # [N] ints
    masses: tuple | None = None  # [N] positive Fractions summing to 1, or None (uniform)

    def mass(self, i: int) -> Fraction:
        """The probability of point i."""
        return Fraction(1, len(self.labels)) if self.masses is None else self.masses[i]


def random_model(*, rng: np.random.Generator, num_points: int = 6, num_classes: int = 3, dim: int = 2, weighted: bool = False) -> FiniteModel:
    """Points with coordinates in {-1, -1/2, 0, 1/2, 1}^dim, labels round-robin over the classes.

    ``weighted``: random rational masses (integer weights 1..6 over their sum) instead of uniform ones.
    """
    z = [[Fraction(int(x), 2) for x in rng.integers(-2, 3, size=dim)] for _ in range(num_points)]
    gram = tuple(tuple(sum((a * b for a, b in zip(u, v)), Fraction(0)) for v in z) for u in z)
    masses = None
    if weighted:
        w = [int(x) for x in rng.integers(1, 7, size=num_points)]
        masses = tuple(Fraction(x, sum(w)) for x in w)
    return FiniteModel(gram, tuple(i % num_classes for i in range(num_points)), masses)


def etf_model(num_classes: int, copies: int = 2) -> FiniteModel:
    """NC: ``copies`` points per class at the vertex v_c of the unit simplex ETF (exact Gram)."""
    labels = tuple(c for c in range(num_classes) for _ in range(copies))
    gram = tuple(tuple(Fraction(1) if a == b else Fraction(-1, num_classes - 1) for b in labels) for a in labels)
    return FiniteModel(gram, labels)


def _normalized(weights: dict, what: str, anchor: int) -> dict:
    """{key: weight / total}; ValueError if a weight is negative or all vanish."""
    if any(w < 0 for w in weights.values()):
        raise ValueError(f"{what} must be >= 0")
    z = sum(weights.values(), Fraction(0))
    if z == 0:
        raise ValueError(f"{what} vanishes on every eligible negative of anchor {anchor}: the tilted law is undefined")
    return {key: w / z for key, w in weights.items()}


def model_loss(model: FiniteModel, setting: str, psi: Callable, *, num_negatives: int, eta: Callable | None = None, joint_eta: Callable | None = None) -> Fraction:
    """Exact population loss E psi(S_1 - s+, ..., S_k - s+) of a finite model (docs/theory.md section 3).

    ``setting`` is ``scl`` or ``ucl`` (which negatives are eligible). With ``eta`` = ``joint_eta`` = None
    the negatives are i.i.d. from the plain law nu of the anchor's similarities; ``eta`` tilts each
    negative, q(s) = eta(s) nu(s) / Z (HSCL / HUCL); ``joint_eta`` tilts the k-tuple,
    q(s_1..s_k) = eta(s_1..s_k) prod_i nu(s_i) / Z_k (the product tilt is joint_eta = prod_i eta(s_i)).
    """
    if is_hard(setting):
        raise ValueError(f"setting must be 'scl' or 'ucl' (the tilt is given by eta), got {setting!r}")
    if eta is not None and joint_eta is not None:
        raise ValueError("give eta (a per-negative tilt) or joint_eta (a tilt of the k-tuple), not both")
    n, k, total = len(model.labels), num_negatives, Fraction(0)
    for i in range(n):
        eligible = [j for j in range(n) if not is_supervised(setting) or model.labels[j] != model.labels[i]]
        base: dict = {}
        for j in eligible:  # the plain law of one negative's similarity
            base[model.gram[i][j]] = base.get(model.gram[i][j], Fraction(0)) + model.mass(j)
        nu = _normalized(base, "masses", i)
        if eta is not None:
            nu = _normalized({s: eta(s) * q for s, q in nu.items()}, "eta", i)
        tuples = {combo: functools.reduce(lambda a, b: a * b, (nu[s] for s in combo), Fraction(1))
                  for combo in itertools.product(nu, repeat=k)}
        if joint_eta is not None:
            tuples = _normalized({combo: joint_eta(combo) * q for combo, q in tuples.items()}, "joint_eta", i)
        positives = _normalized({j: model.mass(j) for j in range(n) if model.labels[j] == model.labels[i]}, "masses", i)
        for j, p_pos in positives.items():
            s_pos = model.gram[i][j]
            total += model.mass(i) * p_pos * sum((q * psi(tuple(s - s_pos for s in combo)) for combo, q in tuples.items()), Fraction(0))
    return total


@timed
def check_harris(*, rng: np.random.Generator, num_trials: int = 50, n: int = 3, m: int = 2, law: Law | Callable | None = None, g: dict | Callable | None = None, h: dict | Callable | None = None) -> CheckResult:
    """E[gh] >= E[g]E[h] exactly, for random (or given) product measures and monotone g, h on {0..m}^n.

    ``law``, ``g``, ``h`` may be fixed objects or functions of ``rng``; defaults are random product
    measures and random monotone tables. A violation is reported with its witness (status ``fail``).
    """
    pick = lambda obj, default: obj(rng) if callable(obj) else (default() if obj is None else obj)  # noqa: E731
    num_trials = require_int("num_trials", num_trials, min_value=1)
    worst: Fraction | None = None  # set by the first trial
    witness, flags, zeros = None, set(), 0
    for _ in range(num_trials):
        mu = pick(law, lambda: product_law(random_marginals(n, m, rng=rng)))
        gg = pick(g, lambda: random_monotone_table(n, m, rng=rng))
        hh = pick(h, lambda: random_monotone_table(n, m, rng=rng))
        flags |= {f"product={is_product(mu)}", f"monotone={is_monotone_table(gg) and is_monotone_table(hh)}"}
        cov = covariance(mu, gg, hh)
        zeros += cov == 0
        if worst is None or cov < worst:
            worst = cov
            if cov < 0:
                witness = {"law": {str(k): str(v) for k, v in mu.items() if v}, "g": {str(k): str(v) for k, v in gg.items()}, "h": {str(k): str(v) for k, v in hh.items()}}
    return CheckResult(
        name="harris_inequality",
        statement=(r"\mu=\otimes_i\mu_i,\ g,h\uparrow\ \Rightarrow\ \mathbb E_\mu[gh]\ge\mathbb E_\mu[g]\,\mathbb E_\mu[h]"
                   + _count_text(num_trials, "random product measures and monotone pairs")),
        method="exact-fraction",
        status="fail" if worst is not None and worst < 0 else "pass",
        details={"trials": num_trials, "grid": f"{{0..{m}}}^{n}", "min_covariance": str(worst), "num_zero_covariance": zeros, "hypotheses_seen": sorted(flags), "witness": witness},
        source=_SOURCE + "; Harris (1960) / FKG for product measures",
        evidence="exact",
    )


def _count_text(count: int, what: str) -> str:
    """The instance count of an exact check of a universal statement, for its LaTeX statement."""
    return r"\ (\text{exact on " + f"{count} {what}" + r"})"


def _tilt_details(gaps, witness, num_trials: int, num_negatives: int) -> dict:
    """The details of a tilted-bound check: trials, k, the smallest gap (exact, as a string), ties, witness."""
    return {"trials": num_trials, "num_negatives": num_negatives, "min_gap": str(min(gaps)),
            "num_equal": sum(g == 0 for g in gaps), "witness": witness}


def _tilt_gaps(num_trials, num_negatives, rng, *, make_model, psi, make_tilt):
    """(gaps, first witness) of L_tilted - L_plain for the plain settings over ``num_trials`` draws of a model,
    a psi (``psi`` or a random non-decreasing one) and a tilt (``make_tilt()``: the ``eta`` or ``joint_eta``
    keyword of :func:`model_loss`); the witness is the first negative gap, None if there is none."""
    gaps, witness = [], None
    for trial in range(num_trials):
        mdl = make_model()
        ps = functools.cache(psi or random_monotone_psi(rng=rng))  # plain and tilted losses share the t-tuples
        tilt = make_tilt()
        for setting in (s for s in SETTINGS if not is_hard(s)):  # the tilt is passed separately
            gap = model_loss(mdl, setting, ps, num_negatives=num_negatives, **tilt) - model_loss(mdl, setting, ps, num_negatives=num_negatives)
            gaps.append(gap)
            if gap < 0 and witness is None:
                witness = {"trial": trial, "setting": setting, "gap": str(gap), "labels": list(mdl.labels), "gram": [[str(x) for x in row] for row in mdl.gram]}
    return gaps, witness


@timed
def check_tilted_bound(*, rng: np.random.Generator, num_trials: int = 10, num_negatives: int = 2, model: FiniteModel | Callable | None = None, psi: Callable | None = None, eta: Callable | None = None) -> CheckResult:
    """L_HSCL >= L_SCL and L_HUCL >= L_UCL exactly on random (or given) finite models, psi and eta.

    Defaults: :func:`random_model`, :func:`random_monotone_psi`, :func:`random_monotone_eta`, each drawn
    per trial from ``rng``. Pass fixed ``psi``/``eta`` (rational-valued) to test other hypotheses.
    """
    gaps, witness = _tilt_gaps(
        num_trials, num_negatives, rng,
        make_model=lambda: model(rng) if callable(model) else (model or random_model(rng=rng)),
        psi=psi, make_tilt=lambda: {"eta": eta or random_monotone_eta(rng=rng)})
    return CheckResult(
        name="tilted_vs_plain",
        statement=(r"\psi\uparrow,\ \eta\uparrow\ge0:\ L_{\mathrm{HSCL}}(f)\ge L_{\mathrm{SCL}}(f),\ L_{\mathrm{HUCL}}(f)\ge L_{\mathrm{UCL}}(f)"
                   + _count_text(num_trials, f"random models, k = {num_negatives}")),
        method="exact-fraction (enumeration of k i.i.d. negatives on finite models)",
        status="fail" if min(gaps) < 0 else "pass",
        details=_tilt_details(gaps, witness, num_trials, num_negatives),
        source=_SOURCE,
        evidence="exact",
    )


@timed
def check_tilted_gap_is_covariance(*, rng: np.random.Generator, num_trials: int = 10, num_negatives: int = 2, support_size: int = 4, eta: Callable | None = None, normalizer: Callable = lambda z, k: z**k) -> CheckResult:
    """The proof's reduction: E_q[psi] - E_p[psi] = Cov_{p^k}(psi, prod_i eta(S_i)) / normalizer(Z, k) >= 0.

    S_i i.i.d. from a random finite law p on rationals in [-1, 1], q = eta p / Z with Z = E_p eta; the true
    normalizer is Z^k (the density of q^k w.r.t. p^k is prod_i eta(S_i) / Z^k). Both sides are exact.
    """
    k, bad = num_negatives, []
    gaps = []
    for trial in range(num_trials):
        values = sorted({Fraction(int(x), 4) for x in rng.integers(-4, 5, size=support_size)})
        p = random_marginals(1, len(values) - 1, rng=rng)[0]
        ps, et = random_monotone_psi(rng=rng), eta or random_monotone_eta(rng=rng)
        s_pos = values[int(rng.integers(0, len(values)))]
        law = product_law([p] * k)
        g = {idx: ps(tuple(values[i] - s_pos for i in idx)) for idx in law}
        h = {idx: functools.reduce(lambda a, b: a * b, (et(values[i]) for i in idx), Fraction(1)) for idx in law}
        z = sum((pi * et(v) for pi, v in zip(p, values)), Fraction(0))
        q = [pi * et(v) / z for pi, v in zip(p, values)]
        gap = sum((pr * g[idx] for idx, pr in product_law([q] * k).items()), Fraction(0)) - sum((pr * g[idx] for idx, pr in law.items()), Fraction(0))
        gaps.append(gap)
        if gap != covariance(law, g, h) / normalizer(z, k) or gap < 0:
            bad.append({"trial": trial, "gap": str(gap), "covariance / normalizer": str(covariance(law, g, h) / normalizer(z, k))})
    return CheckResult(
        name="tilted_gap_is_covariance",
        statement=(r"\mathbb E_{q^{\otimes k}}\psi-\mathbb E_{p^{\otimes k}}\psi=\mathrm{Cov}_{p^{\otimes k}}\big(\psi,\textstyle\prod_i\eta(S_i)\big)/Z^k\ge0"
                   + _count_text(num_trials, f"random laws, k = {k}")),
        method="exact-fraction",
        status="fail" if bad else "pass",
        details={"trials": num_trials, "num_negatives": k, "min_gap": str(min(gaps)), "failures": bad[:3]},
        source=_SOURCE + " (proof step: density ratio + Harris)",
        evidence="exact",
    )


@timed
def check_tilted_equality_at_nc(*, sizes: Sequence[int] = (2, 3, 4), num_negatives: int = 2, rng: np.random.Generator, model: Callable[[int], FiniteModel] = etf_model) -> CheckResult:
    """At NC, L_HSCL = L_SCL exactly for any monotone eta (negatives' similarity is constant given the
    anchor), while L_HUCL > L_UCL for a strictly increasing eta and psi (the tilt raises collisions).

    ``model(C)`` builds the configuration (default :func:`etf_model`, the NC point); its similarities
    must lie in (-2, 2] so that the strictly increasing eta(s) = 2 + s is positive.
    """
    details, ok = {}, True
    for c in sizes:
        mdl, ps, et = model(c), hinge_psi(Fraction(3)), random_monotone_eta(rng=rng)
        strict = lambda s: Fraction(2) + s  # noqa: E731  (strictly increasing, > 0 on [-1, 1])
        scl = [model_loss(mdl, "scl", ps, num_negatives=num_negatives, eta=e) for e in (None, et, strict)]
        ucl = [model_loss(mdl, "ucl", ps, num_negatives=num_negatives, eta=e) for e in (None, strict)]
        ok &= scl[0] == scl[1] == scl[2] and ucl[1] > ucl[0]  # exact Fractions
        details[f"C={c}"] = {"scl": str(scl[0]), "hscl(random eta)": str(scl[1]), "hscl(eta=2+s)": str(scl[2]), "ucl": str(ucl[0]), "hucl(eta=2+s)": str(ucl[1])}
    return CheckResult(
        name="tilted_equality_at_nc",
        statement=(r"\text{At NC: } L_{\mathrm{HSCL}}=L_{\mathrm{SCL}},\ L_{\mathrm{HUCL}}>L_{\mathrm{UCL}}\ (\eta,\psi\ \text{strictly}\uparrow)"
                   + _count_text(len(sizes), "ETF models, C in {" + ", ".join(map(str, sizes)) + "}, one random eta each")),
        method="exact-fraction",
        status="pass" if ok else "fail",
        details=details,
        source=_SOURCE + "; docs/theory.md section 4 (HUCL)",
        evidence="exact",
    )


@timed
def check_joint_tilted_bound(*, rng: np.random.Generator, num_trials: int = 10, num_negatives: int = 2, model: FiniteModel | Callable | None = None, psi: Callable | None = None, joint_eta: Callable | None = None) -> CheckResult:
    """Theorem 1 for a joint eta: R^k -> [0, inf): L_hard >= L_plain exactly, SCL and UCL negatives.

    The k-tuple of negatives is tilted by joint_eta(S_1..S_k) (docs/theory.md section 4, Theorem 1: the
    proof's density ratio eta / Z_k is non-decreasing for any coordinate-wise non-decreasing eta, so
    Harris applies unchanged). Defaults per trial: :func:`random_model` with random rational masses,
    :func:`random_monotone_psi` and :func:`random_monotone_joint_eta` (a non-product eta). A decreasing
    ``joint_eta`` breaks the hypothesis, and the check must then report ``fail``.
    """
    gaps, witness = _tilt_gaps(
        num_trials, num_negatives, rng,
        make_model=lambda: model(rng) if callable(model) else (model or random_model(rng=rng, weighted=True)),
        psi=psi, make_tilt=lambda: {"joint_eta": joint_eta or random_monotone_joint_eta(num_negatives, rng=rng)})
    return CheckResult(
        name="tilted_vs_plain_joint_eta",
        statement=(r"\psi\uparrow,\ \eta:\mathbb R^k\to[0,\infty)\ \uparrow\text{ in each }S_i:\ q(S_1..S_k)\propto\eta(S)\textstyle\prod_i\nu(S_i)\ \Rightarrow\ L_{\mathrm{HSCL}}\ge L_{\mathrm{SCL}},\ L_{\mathrm{HUCL}}\ge L_{\mathrm{UCL}}"
                   + _count_text(num_trials, f"random weighted models, k = {num_negatives}")),
        method="exact-fraction (enumeration of k-tuples of negatives on weighted finite models)",
        status="fail" if min(gaps) < 0 else "pass",
        details=_tilt_details(gaps, witness, num_trials, num_negatives),
        source=_SOURCE + " (joint eta)",
        evidence="exact",
    )


def _anticorrelated() -> tuple[Law, dict, dict]:
    law = {(0, 0): Fraction(0), (0, 1): Fraction(1, 2), (1, 0): Fraction(1, 2), (1, 1): Fraction(0)}
    return law, {pt: Fraction(pt[0]) for pt in law}, {pt: Fraction(pt[1]) for pt in law}


@timed
def check_harris_needs_product() -> CheckResult:
    """Necessity: for the anti-correlated law P(0,1) = P(1,0) = 1/2, g = x_1, h = x_2, the checker fails."""
    law, g, h = _anticorrelated()
    res = check_harris(rng=np.random.default_rng(0), num_trials=1, n=2, m=1, law=law, g=g, h=h)
    return CheckResult(
        name="harris_needs_product",
        statement=r"\exists\ \text{non-product }\mu,\ g,h\uparrow:\ \mathbb E[gh]<\mathbb E[g]\mathbb E[h]\ \text{(detected)}",
        method="exact-fraction",
        status="pass" if res.status == "fail" else "fail",
        details={"inner_status": res.status, "covariance": res.details["min_covariance"]},
        source=_SOURCE,
        evidence="self-test",  # the checker fed a known-false statement, not evidence about the paper
    )


@timed
def check_tilted_needs_monotone_eta() -> CheckResult:
    """Necessity: a decreasing eta (tilting towards easy negatives) makes L_HSCL < L_SCL; the checker fails."""
    z = [(Fraction(1), Fraction(0)), (Fraction(0), Fraction(1)), (Fraction(1), Fraction(1))]  # classes 0 | 1, 1
    mdl = FiniteModel(tuple(tuple(u[0] * v[0] + u[1] * v[1] for v in z) for u in z), (0, 1, 1))
    # eta = 1 - [s >= 1/2] / 2 > 0 is decreasing: anchor 0 sees its hard negative (s = 1) down-weighted
    res = check_tilted_bound(rng=np.random.default_rng(0), num_trials=1, num_negatives=1, model=mdl, psi=hinge_psi(Fraction(3)), eta=step_eta([Fraction(1, 2)], [Fraction(-1, 2)], base=Fraction(1)))
    return CheckResult(
        name="tilted_needs_monotone_eta",
        statement=r"\exists\ \eta\ \text{non-monotone}:\ L_{\mathrm{HSCL}}<L_{\mathrm{SCL}}\ \text{(detected)}",
        method="exact-fraction",
        status="pass" if res.status == "fail" else "fail",
        details={"inner_status": res.status, "min_gap": res.details["min_gap"]},
        source=_SOURCE,
        evidence="self-test",  # the checker fed a known-false statement, not evidence about the paper
    )


def checks(*, quick: bool) -> list[Callable[[], CheckResult]]:
    """The Harris / Theorem 1 checks; each randomized one gets its own Generator seeded from SEED."""
    gen = lambda i: np.random.default_rng([SEED, i])  # noqa: E731
    trials, models, k = (100, 12, 2) if quick else (400, 40, 3)  # exact: each instance costs ~ms (quick)
    return [
        functools.partial(check_harris, rng=gen(0), num_trials=trials, n=2 if quick else 3, m=2),
        functools.partial(check_tilted_bound, rng=gen(1), num_trials=models, num_negatives=k),
        functools.partial(check_tilted_gap_is_covariance, rng=gen(3), num_trials=models * 3, num_negatives=k),
        functools.partial(check_tilted_equality_at_nc, rng=gen(2), sizes=(2, 3) if quick else (2, 3, 4, 5), num_negatives=2),
        functools.partial(check_joint_tilted_bound, rng=gen(4), num_trials=models, num_negatives=k),
        check_harris_needs_product,
        check_tilted_needs_monotone_eta,
    ]
