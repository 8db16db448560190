"""Neural-collapse metrics on class means: the NC conditions, NC1 and the distance to a simplex ETF.

docs/theory.md section 8. Every function takes ``(z, labels)`` with z [N, d] (numpy or torch, computed in
float64) and integer labels [N]; see :mod:`ncgeom.metrics.groups` for the validation rules.
Conventions (docs/conventions.md, "Metrics"): mu_G is the UNWEIGHTED mean of the class means; NC1 is
divided by C and uses the pseudo-inverse; ``within_class`` is a mean of norms, not of squared norms.
The first three conditions use the raw class means (the NC definition of docs/theory.md section 4: unit
norm, centred at the origin), not means re-centred at mu_G as Papyan et al.'s equinorm does.

Undefined cases return NaN rather than a number that would read as a verdict: a class mean equal to 0
(``equal_inner_product``), all class means equal (``nc1``, ``etf_distance``).

Scale (:mod:`ncgeom.metrics.groups`): every metric works on z divided by a power of two near max |z|.
``equal_inner_product``, ``nc1`` and ``etf_distance`` are scale invariant by definition (docs/theory.md
section 8) and give bitwise the same value for z and 2^m z; ``zero_sum`` and ``within_class`` are
homogeneous of degree 1 and ``unit_norm`` is not homogeneous: they are computed on the scaled z and the
scale is applied to the final norms, so nothing under- or overflows where the result is representable.
"""

from __future__ import annotations

import numpy as np

from ncgeom.metrics.groups import _group, _Groups

__all__ = [
    "unit_norm",
    "zero_sum",
    "equal_inner_product",
    "within_class",
    "nc1",
    "etf_distance",
]


def _unit_norm(g: _Groups) -> float:
    # ||mu_c|| = scale * ||mu_c / scale||: the norm is taken on the scaled means (no under/overflow)
    return float(np.mean(np.abs(np.linalg.norm(g.means, axis=1) * g.scale - 1.0)))


def _zero_sum(g: _Groups) -> float:
    return float(np.linalg.norm(g.means.mean(axis=0)) * g.scale)


def _equal_inner_product(g: _Groups) -> float:
    c = g.num_classes
    norms = np.linalg.norm(g.means, axis=1)
    if np.any(norms == 0.0):
        return float("nan")
    unit = g.means / norms[:, None]
    cos = unit @ unit.T
    off = ~np.eye(c, dtype=bool)
    return float(np.mean(np.abs(cos[off] + 1.0 / (c - 1))))


def _within_class(g: _Groups) -> float:
    dist = np.linalg.norm(g.z - g.means[g.index], axis=1)
    per_class = np.bincount(g.index, weights=dist, minlength=g.num_classes) / g.counts
    return float(per_class.mean() * g.scale)


def _centered_means(g: _Groups) -> np.ndarray:
    return g.means - g.means.mean(axis=0)  # mu_G = unweighted mean of class means


def _nc1(g: _Groups) -> float:
    c, (n, d) = g.num_classes, g.z.shape
    centered = _centered_means(g)  # [C, d]; Sigma_B = centered^T centered / C
    _, s, vt = np.linalg.svd(centered, full_matrices=False)
    if s[0] == 0.0:
        return float("nan")
    eig_b = s**2 / c  # eigenvalues of Sigma_B
    keep = eig_b > d * np.finfo(np.float64).eps * eig_b[0]  # scipy.linalg.pinv(Sigma_B) default cutoff
    residual = g.z - g.means[g.index]  # [N, d]; Sigma_W = residual^T residual / N
    proj = residual @ vt[keep].T  # [N, r]
    # tr(Sigma_W pinv(Sigma_B)) / C = sum_r (v_r^T Sigma_W v_r) / lambda_r / C
    return float(np.sum(np.sum(proj**2, axis=0) / n / eig_b[keep]) / c)


def _etf_distance(g: _Groups) -> float:
    c = g.num_classes
    centered = _centered_means(g)
    gram = centered @ centered.T
    norm = np.linalg.norm(gram)
    if norm == 0.0:
        return float("nan")
    # The unit-Frobenius ETF Gram, = geometry.etf_gram(c) / ||geometry.etf_gram(c)||_F in exact arithmetic. Kept
    # here as written: every rewriting through etf_gram rounds differently in the last bits (for most C >= 3),
    # which changes recorded etf_distance values; the histories are compared bit for bit.
    target = (np.eye(c) - np.ones((c, c)) / c) / np.sqrt(c - 1)
    return float(np.linalg.norm(gram / norm - target))


def unit_norm(z, labels, *, num_classes: int | None = None) -> float:
    """Mean distance of the class-mean norms to 1 (docs/theory.md section 8 [code]).

    .. math:: \\mathrm{unit\\_norm} = \\frac{1}{C} \\sum_{c=1}^C \\big|\\, \\|\\mu_c\\| - 1 \\big|

    where mu_c are the class means of ``z`` [N, d] grouped by ``labels`` [N] and C the number of
    classes. Zero at NC with a unit ETF (docs/theory.md section 4). Not scale invariant by design: it
    checks the unit radius that ball/sphere normalisation makes optimal.

    Examples
    --------
    >>> unit_norm([[2.0, 0.0], [-1.0, 0.0]], [0, 1])
    0.5
    """
    return _unit_norm(_group(z, labels, num_classes=num_classes))


def zero_sum(z, labels, *, num_classes: int | None = None) -> float:
    """Norm of the unweighted mean of the class means (docs/theory.md section 8 [code]).

    .. math:: \\mathrm{zero\\_sum} = \\Big\\| \\frac{1}{C} \\sum_{c=1}^C \\mu_c \\Big\\| = \\|\\mu_G\\|

    Zero at NC (an ETF sums to 0). Unweighted: class imbalance does not move it.

    Examples
    --------
    >>> zero_sum([[1.0, 0.0], [-1.0, 0.0], [-1.0, 0.0]], [0, 1, 1])
    0.0
    """
    return _zero_sum(_group(z, labels, num_classes=num_classes))


def equal_inner_product(z, labels, *, num_classes: int | None = None) -> float:
    """Mean absolute deviation of the class-mean cosines from the ETF value -1/(C-1).

    .. math:: \\mathrm{equal\\_inner\\_product} = \\frac{1}{C(C-1)} \\sum_{c \\ne c'}
        \\Big| \\cos(\\mu_c, \\mu_{c'}) + \\frac{1}{C-1} \\Big|

    (docs/theory.md section 8 [code]; the absolute form of papyan2020prevalence, Fig. 4). Zero iff the
    class means are equiangular at the ETF angle. The absolute value matters: the signed mean used by
    nc-toolbox is identically 0 for every equal-norm configuration that sums to 0, ETF or not
    (docs/conventions.md). Cosines of the raw (not re-centred) means.

    Failure mode: a class mean equal to 0 has no direction; the value is then NaN.

    Examples
    --------
    >>> equal_inner_product([[1.0, 0.0], [-1.0, 0.0]], [0, 1])
    0.0
    """
    return _equal_inner_product(_group(z, labels, num_classes=num_classes))


def within_class(z, labels, *, num_classes: int | None = None) -> float:
    """Mean distance of samples to their class mean, averaged per class then over classes.

    .. math:: \\mathrm{within\\_class} = \\frac{1}{C} \\sum_{c=1}^C \\frac{1}{n_c}
        \\sum_{i : y_i = c} \\| z_i - \\mu_c \\|

    (docs/theory.md section 8 [code]). A norm, NOT squared; each class weighs 1/C whatever its size.
    Zero iff every sample sits on its class mean (NC1 in its strict form).

    Examples
    --------
    >>> within_class([[0.0, 1.0], [0.0, -1.0], [3.0, 0.0]], [0, 0, 1])
    0.5
    """
    return _within_class(_group(z, labels, num_classes=num_classes))


def nc1(z, labels, *, num_classes: int | None = None) -> float:
    """Within-class variability relative to between-class variability (papyan2020prevalence, NC1).

    .. math:: \\mathrm{nc1} = \\frac{1}{C} \\operatorname{tr}\\big(\\Sigma_W \\Sigma_B^{+}\\big),\\quad
        \\Sigma_W = \\frac1N \\sum_i (z_i - \\mu_{y_i})(z_i - \\mu_{y_i})^T,\\quad
        \\Sigma_B = \\frac1C \\sum_c (\\mu_c - \\mu_G)(\\mu_c - \\mu_G)^T

    where mu_G = (1/C) sum_c mu_c (UNWEIGHTED) and + is the Moore-Penrose pseudo-inverse
    (docs/theory.md section 8). For noisy ETF data (class means on an ETF of radius r, isotropic noise of
    standard deviation sigma, d >= C) the population value is sigma^2 (C-1)^2 / (C r^2).
    Papyan et al.'s Colab omits the 1/C (its value is C times this one); tding1/Neural-Collapse uses
    the sample-weighted mu_G (docs/conventions.md).

    Computed from the SVD of the centred class means (no d x d inverse): with Sigma_B = V diag(lambda) V^T,
    nc1 = (1/C) sum_r v_r^T Sigma_W v_r / lambda_r over the kept eigenvalues lambda_r > d eps lambda_max,
    the default cut-off of ``scipy.linalg.pinv(Sigma_B)``.

    Failure modes: Sigma_B has rank at most min(C-1, d). When it is rank deficient (d < C-1, or class
    means squeezed into a subspace: dimensional collapse), the pseudo-inverse ignores within-class
    spread orthogonal to the span of the means, and a tiny but kept eigenvalue lambda_r makes the value
    explode as 1/lambda_r, so NC1 then measures the means' conditioning as much as within-class
    collapse. When all class means coincide (Sigma_B = 0) the value is NaN (a pinv would give 0, which
    would read as perfect collapse).

    Examples
    --------
    >>> round(nc1([[2.0, 0.0], [0.0, 0.0], [-1.0, 1.0], [-1.0, -1.0]], [0, 0, 1, 1]), 12)
    0.25
    """
    return _nc1(_group(z, labels, num_classes=num_classes))


def etf_distance(z, labels, *, num_classes: int | None = None) -> float:
    """Frobenius distance of the normalised centred class-mean Gram to the normalised ETF Gram.

    .. math:: \\mathrm{etf\\_distance} = \\Big\\| \\frac{G}{\\|G\\|_F}
        - \\frac{I - \\mathbf{1}\\mathbf{1}^T / C}{\\sqrt{C-1}} \\Big\\|_F,\\qquad
        G_{cc'} = \\langle \\mu_c - \\mu_G, \\mu_{c'} - \\mu_G \\rangle

    (docs/theory.md section 8; the form of tding1/Neural-Collapse and rhubarbwu's ``simplex_etf_error``,
    not squared). Scale invariant and zero iff the centred means form a simplex ETF of any radius;
    at most 2.

    Failure mode: all class means equal (G = 0) gives NaN.

    Examples
    --------
    >>> etf_distance([[3.0, 1.0], [-1.0, 1.0]], [0, 1])
    0.0
    """
    return _etf_distance(_group(z, labels, num_classes=num_classes))
