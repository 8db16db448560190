"""Closed-form loss values at neural collapse (docs/theory.md sections 5 and 7).

At NC (balanced classes, unit simplex ETF, every point of class c at v_c) a negative either shares the
anchor's class (a "collision", t = 0) or not (t = -C/(C-1)). Negatives are i.i.d. given the anchor, so
the number J of collisions among k negatives is Binomial(k, p) and

.. math::

    L_S(\\mathrm{NC}) = \\sum_{j=0}^{k} \\binom{k}{j} p^j (1-p)^{k-j}\\,
        \\psi_k(\\underbrace{0, \\dots, 0}_{j}, \\underbrace{-\\tfrac{C}{C-1}, \\dots, -\\tfrac{C}{C-1}}_{k-j}),

with p = 0 (SCL, HSCL), 1/C (UCL) and pi_beta (HUCL; :func:`collision_probability`). The binomial
weights are computed in log space (``gammaln``, log-sum-exp normalization) on a window of O(sqrt(k))
terms around the mode, so every value is finite for k up to MAX_NEGATIVES = 10^10, every finite beta >= 0
and every C >= 2; as beta grows the HUCL value tends to its limit pi_beta = 1, psi_k(0, ..., 0) (log(1 + k)
for infonce). Source: jiang2025hard, Theorems 2-3 and the HUCL discussion; docs/theory.md section 5.
"""

from __future__ import annotations

import itertools
import math
from typing import Literal

import numpy as np

from ncgeom.losses.psi import Psi, make_psi
from ncgeom.validate import require_choice, require_int, require_real
from ncgeom.vocabulary import PSI_NAMES, SETTINGS, PsiName, Setting, effective_beta, is_hard, is_supervised

__all__ = [
    "MAX_ENUMERATED_NEGATIVES",
    "MAX_NEGATIVES",
    "MAX_USER_NEGATIVES",
    "collision_probability",
    "nc_value",
    "batch_nc_value",
]

#: Largest k for which :func:`nc_value` enumerates the 2^k collision placements of a non-symmetric psi.
MAX_ENUMERATED_NEGATIVES = 16

#: Largest k of :func:`nc_value`: the binomial window has O(sqrt(k)) terms (about 1.3e6 here, ~10 MB), and
#: every count j stays an exact float64.
MAX_NEGATIVES = 10**10

#: Largest k of :func:`nc_value` for a user psi, evaluated on one k-vector per kept binomial term.
MAX_USER_NEGATIVES = 10**5

# Binomial terms whose log-weight is this far below the largest carry < e^-60 ~ 1e-26 of the mass each;
# even 10^4 of them stay far below float64 eps, so user psi are evaluated only on the others.
_NEGLIGIBLE_LOG_WEIGHT = 60.0
_ROWS_TIMES_K = 2_000_000  # chunk size (entries) for evaluating a user psi


def _log_collision_probabilities(setting: str, num_classes: int, beta: float) -> tuple[float, float]:
    """(log p, log(1 - p)) for the collision probability p; log 0 = -inf.

    Exact in log space for every C >= 2 (Python ints of any size) and every finite beta >= 0: for HUCL,
    log pi_beta = -log(1 + e^-x) and log(1 - pi_beta) = -log(1 + e^x) with x = beta C/(C-1) - log(C-1);
    x = inf (beta near the float64 maximum) gives (0, -inf), the limit pi_beta = 1.
    """
    c = num_classes
    if is_supervised(setting):
        return -math.inf, 0.0
    log_c = math.log(c)  # exact for Python ints beyond the float range too
    if not is_hard(setting):  # UCL: uniform negatives
        return -log_c, math.log1p(-1.0 / c if c < 2**1000 else -math.exp(-log_c))
    x = beta * (c / (c - 1)) - math.log(c - 1)  # c / (c - 1) is 1.0 for huge ints; beta * 2 may be inf
    log_p = -float(np.logaddexp(0.0, -x))
    log_q = -float(np.logaddexp(0.0, x))
    return log_p, log_q


def collision_probability(setting: Setting, *, num_classes: int, beta: float = 0.0) -> float:
    """Probability that a negative shares the anchor's class, at NC (docs/theory.md sections 4-5).

    .. math::

        p_{\\mathrm{SCL}} = p_{\\mathrm{HSCL}} = 0,\\qquad p_{\\mathrm{UCL}} = \\frac1C,\\qquad
        p_{\\mathrm{HUCL}} = \\pi_\\beta = \\frac{e^{\\beta}}{e^{\\beta} + (C-1)e^{-\\beta/(C-1)}}
        = \\operatorname{expit}\\Big(\\frac{\\beta C}{C-1} - \\log(C-1)\\Big),

    where C = ``num_classes`` >= 2 and beta = ``beta`` >= 0 (the exponential tilt; ignored by the
    non-hard settings, as in the batch estimators). Computed as a logistic function in log space, so
    every finite beta (1e308 gives 1.0, the limit) and every C (a Python int beyond the float range gives
    1/C = 0.0 for UCL) is handled without overflow.

    Examples
    --------
    >>> collision_probability("hucl", num_classes=2, beta=0.0)
    0.5
    """
    setting = require_choice("setting", setting, SETTINGS)
    c = require_int("num_classes", num_classes, min_value=2)
    beta = require_real("beta", beta, min_value=0.0)
    if is_supervised(setting):
        return 0.0
    if not is_hard(setting):  # UCL: uniform negatives
        return 1.0 / c if c < 2**1000 else math.exp(-math.log(c))
    from scipy.special import expit  # 0.2-0.5 s to import, which batch_nc_value (the sweeps' usual path) never needs

    return float(expit(beta * (c / (c - 1)) - math.log(c - 1)))


def _binomial_window(k: int, log_p: float, log_q: float) -> tuple[np.ndarray, np.ndarray]:
    """(j, log w_j): the numbers of collisions j whose binomial log-weight is within 60 of the largest.

    The count of the rarer event (collision or not) is drawn with the smaller of p, 1 - p (so p close to
    1 keeps its precision through 1 - p), around its mode with a window of 12 standard deviations + 64,
    doubled until both edges are negligible. The binomial log-pmf is concave in j, so nothing beyond the
    edges can matter. The window has O(sqrt(k)) entries, so k up to MAX_NEGATIVES costs little memory.
    """
    from scipy.special import gammaln  # imported when used (collision_probability says why)

    flip = log_p > log_q  # count the rarer event i; j = k - i when it is the non-collision
    log_r, log_s = (log_q, log_p) if flip else (log_p, log_q)
    if math.isinf(log_r):  # r = 0: all k of the common event
        i = np.zeros(1)
        logw = np.zeros(1)
    else:
        r = math.exp(log_r)
        mode = min(k, math.floor((k + 1) * r))
        width = math.ceil(12.0 * math.sqrt(k * r * (1.0 - r))) + 64
        while True:
            lo, hi = max(0, mode - width), min(k, mode + width)
            i = np.arange(lo, hi + 1, dtype=np.float64)
            with np.errstate(over="ignore"):  # (k - i) log(1 - r) = -inf for r ~ 1 - 1e-308: weight 0
                logw = gammaln(k + 1.0) - gammaln(i + 1.0) - gammaln(k - i + 1.0) + i * log_r + (k - i) * log_s
            top = logw.max()
            if (lo == 0 or logw[0] < top - _NEGLIGIBLE_LOG_WEIGHT) and (
                hi == k or logw[-1] < top - _NEGLIGIBLE_LOG_WEIGHT
            ):
                break
            width *= 2
        keep = logw >= top - _NEGLIGIBLE_LOG_WEIGHT
        i, logw = i[keep], logw[keep]
    j = k - i if flip else i
    return j, logw


def _builtin_profile(psi: Psi, k: int, j: np.ndarray, neg: float) -> np.ndarray:
    """psi_k(j zeros, k - j entries ``neg``) for a built-in psi, analytically (log space)."""
    # the built-ins always carry their parameters: tau (infonce, infonce-mean), margin (triplet)
    if psi.name == "infonce":
        # log(1 + j + (k - j) e^(neg / tau))
        tau = float(psi.params["tau"])
        with np.errstate(divide="ignore"):
            return np.logaddexp(np.log1p(j), np.log(k - j) + neg / tau)
    if psi.name == "infonce-mean":
        # log(1 + (j + (k - j) e^(neg / tau)) / k)
        tau = float(psi.params["tau"])
        with np.errstate(divide="ignore"):
            return np.logaddexp(0.0, np.logaddexp(np.log(j), np.log(k - j) + neg / tau) - math.log(k))
    # triplet: (j/k) max(0, m) + ((k - j)/k) max(0, neg + m): fractions first, so nothing overflows
    m = float(psi.params["margin"])
    return (j / k) * max(0.0, m) + ((k - j) / k) * max(0.0, neg + m)


def _user_profile(psi: Psi, k: int, j: np.ndarray, neg: float) -> np.ndarray:
    """psi_k(j zeros, k - j entries ``neg``) for a symmetric user psi, evaluated in chunks."""
    out = np.empty(j.shape, dtype=np.float64)
    rows = max(1, _ROWS_TIMES_K // k)
    cols = np.arange(k)
    for start in range(0, j.size, rows):
        jj = j[start : start + rows]
        t = np.where(cols[None, :] < jj[:, None], 0.0, neg)
        out[start : start + rows] = np.asarray(psi(t), dtype=np.float64)
    return out


def _is_builtin(psi: Psi) -> bool:
    return psi.builtin and psi.name in PSI_NAMES


def nc_value(
    setting: Setting,
    psi: PsiName | Psi = "infonce",
    *,
    num_classes: int,
    num_negatives: int,
    beta: float = 0.0,
    tau: float = 1.0,
    margin: float = 1.0,
) -> float:
    """Population loss at neural collapse, exactly (docs/theory.md section 5).

    .. math::

        L_S(\\mathrm{NC}) = \\sum_{j=0}^{k} \\binom{k}{j} p^j (1-p)^{k-j}\\,
        \\psi_k(0^{(j)}, (-\\tfrac{C}{C-1})^{(k-j)})

    where C = ``num_classes``, k = ``num_negatives``, p = :func:`collision_probability` (``setting``,
    ``beta``) and psi = ``psi``. For SCL/HSCL (p = 0) this is psi_k(-C/(C-1), ..., -C/(C-1)), the lower
    bound of jiang2025hard, Theorem 2; for UCL it is the minimum of jiang2025hard, Theorem 3; for HUCL
    it is the (not necessarily minimal) value at NC with the tilted collision probability pi_beta.

    Parameters
    ----------
    setting : {"scl", "hscl", "ucl", "hucl"}
    psi : {"infonce", "infonce-mean", "triplet"} or Psi
        A name (built with ``tau`` / ``margin``) or a Psi (its own parameters are used). Built-ins use
        their analytic profile; a symmetric user psi is evaluated on the k-vectors; a non-symmetric user
        psi is averaged over all 2^k placements of the collisions (only for k <= 16 when p > 0).
    num_classes : int
        C >= 2.
    num_negatives : int
        k >= 1.
    beta : float
        Exponential tilt >= 0; used by HUCL only (at NC the tilt does not change SCL negatives).
    tau, margin : float
        Parameters of a psi given by name.

    Returns
    -------
    float

    Raises
    ------
    ValueError
        For invalid arguments, or a non-symmetric user psi with p > 0 and k > 16.

    Examples
    --------
    C = 2, k = 1, infonce, tau = 1, SCL: log(1 + e^-2).

    >>> round(nc_value("scl", num_classes=2, num_negatives=1), 10)
    0.126928011
    """
    setting = require_choice("setting", setting, SETTINGS)
    c = require_int("num_classes", num_classes, min_value=2)
    k = require_int("num_negatives", num_negatives, min_value=1, max_value=MAX_NEGATIVES)
    beta = require_real("beta", beta, min_value=0.0)
    if not isinstance(psi, Psi):
        psi = make_psi(psi, tau=tau, margin=margin)
    neg = -c / (c - 1)
    log_p, log_q = _log_collision_probabilities(setting, c, beta)

    if _is_builtin(psi) or psi.symmetric:
        from scipy.special import logsumexp  # imported when used (collision_probability says why)

        if not _is_builtin(psi) and k > MAX_USER_NEGATIVES:
            raise ValueError(
                f"num_negatives must be <= {MAX_USER_NEGATIVES} for a user psi (it is evaluated on k-vectors), got {k}"
            )
        j, logw = _binomial_window(k, log_p, log_q)
        logw = logw - logsumexp(logw)  # exact normalization of the kept mass
        values = _builtin_profile(psi, k, j, neg) if _is_builtin(psi) else _user_profile(psi, k, j, neg)
        return float(math.fsum(np.exp(logw) * values))

    # Non-symmetric user psi: enumerate which positions collide.
    if math.isinf(log_p):
        return float(np.asarray(psi(np.full((1, k), neg)), dtype=np.float64)[0])
    if k > MAX_ENUMERATED_NEGATIVES:
        raise ValueError(
            f"num_negatives must be <= {MAX_ENUMERATED_NEGATIVES} for a non-symmetric psi with collisions "
            f"(2^k placements are enumerated), got {k}; declare psi symmetric=True if it is permutation invariant"
        )
    mask = np.array(list(itertools.product((0, 1), repeat=k)), dtype=bool)  # True = collision
    t = np.where(mask, 0.0, neg)
    ncoll = mask.sum(axis=1)
    with np.errstate(over="ignore", invalid="ignore"):  # 0 * log 0 is 0 here (no such position), not NaN
        logw = np.where(ncoll > 0, ncoll * log_p, 0.0) + np.where(ncoll < k, (k - ncoll) * log_q, 0.0)
    w = np.exp(logw - logw.max())
    values = np.asarray(psi(t), dtype=np.float64)
    return float(math.fsum(w * values) / math.fsum(w))


def batch_nc_value(
    setting: Setting,
    *,
    class_counts,
    num_negatives: int | Literal["batch"] = 1,
    beta: float = 0.0,
    tau: float = 1.0,
) -> float:
    """Value of the weighted batch estimator at an exact NC batch, mean over positive pairs.

    docs/theory.md section 7: every positive has S_ij = 1, a candidate negative has S = 1 (collision) or
    -1/(C-1), so for an anchor of class c

    .. math::

        l_c = \\log\\Big(1 + k\\big(p_c + (1-p_c) e^{-C/((C-1)\\tau)}\\big)\\Big),\\qquad
        p_c = \\frac{(n_c-1)e^{b}}{(n_c-1)e^{b} + (B-n_c)e^{-b/(C-1)}},

    where n = ``class_counts`` [C] (samples of each class in the batch; zeros allowed, C = len(n) >= 2
    is the number of ETF classes), B = sum(n), b = ``beta`` for HUCL/HSCL and 0 otherwise, tau = ``tau``;
    p_c = 0 for SCL/HSCL (N(i) = other classes) and the in-batch collision fraction for UCL/HUCL
    (N(i) = all m != i). k = ``num_negatives`` (an int >= 1) or ``"batch"`` (k = |N(i)|: B - n_c for
    SCL/HSCL, B - 1 for UCL/HUCL). The result is sum_c n_c (n_c - 1) l_c / sum_c n_c (n_c - 1) over the
    anchors that have a positive and a negative; 0.0 if there is no such pair (as the estimator).

    Examples
    --------
    Two classes of two samples, SCL, k = 1, tau = 1: log(1 + e^-2).

    >>> round(batch_nc_value("scl", class_counts=[2, 2]), 10)
    0.126928011
    """
    setting = require_choice("setting", setting, SETTINGS)
    counts = np.asarray(class_counts)
    if counts.ndim != 1 or counts.size < 2 or not np.issubdtype(counts.dtype, np.integer) or np.any(counts < 0):
        raise ValueError(f"class_counts must be a 1-d sequence of >= 2 non-negative integers, got {class_counts!r}")
    whole_batch = isinstance(num_negatives, str) and num_negatives == "batch"
    fixed_k = None if whole_batch else require_int("num_negatives", num_negatives, min_value=1)
    beta = require_real("beta", beta, min_value=0.0)
    tau = require_real("tau", tau, min_value=0.0, min_inclusive=False)
    c = counts.size
    n = counts.astype(np.float64)
    total = n.sum()
    b = effective_beta(setting, beta)
    supervised = is_supervised(setting)
    num_cand = total - n if supervised else np.full(c, total - 1.0)
    pairs = n * (n - 1)
    valid = (n >= 2) & (num_cand >= 1)
    if not np.any(valid):
        return 0.0
    n, num_cand, pairs = n[valid], num_cand[valid], pairs[valid]
    log_other = -c / ((c - 1) * tau)  # log e^(-C/((C-1) tau))
    if supervised:
        log_mass = np.full(n.shape, log_other)
    else:
        with np.errstate(divide="ignore"):
            log_coll = np.log(n - 1) + b
            log_rest = np.log(total - n) - b / (c - 1)
        log_norm = np.logaddexp(log_coll, log_rest)
        log_mass = np.logaddexp(log_coll - log_norm, log_rest - log_norm + log_other)
    log_k = np.log(num_cand) if fixed_k is None else math.log(fixed_k)
    losses = np.logaddexp(0.0, log_k + log_mass)
    return float(math.fsum(pairs * losses) / math.fsum(pairs))
