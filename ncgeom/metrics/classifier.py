"""The metrics of a linear classifier on the embeddings: self-duality (NC3) and classifier / NCM agreement (NC4).

docs/theory.md section 8 (papyan2020prevalence, NC3 and NC4). Both take ``(z, labels)`` with z [N, d]
(numpy or torch, computed in float64) and integer labels [N] (:mod:`ncgeom.metrics.groups`), and the
classifier's weights W [C, d] (row c scores class c, the c-th smallest label, or label c with
``num_classes=C``) and, for NC4, its bias b [C]. A torch ``nn.Linear(d, C)`` head gives them as
``layer.weight`` and ``layer.bias``. A classifier of another shape is a ValueError naming both shapes.

Conventions (docs/conventions.md, "Metrics"): NC3 is the Frobenius distance, NOT squared (nc-toolbox's
``nc3_self_duality``; Papyan et al.'s Colab and PNAS Fig. 5 plot its square), of the centred class means
with the UNWEIGHTED mu_G of every metric of ncgeom. NC4 compares the classifier with the EUCLIDEAN nearest
class mean, as Papyan et al., rhubarbwu/neural-collapse and nc-toolbox do (not the inner-product rule of
:func:`ncgeom.metrics.ncc_accuracy`), and reports the agreement rate (1 - Papyan's "mismatch").
"""

from __future__ import annotations

import numpy as np

from ncgeom.labels import integer_labels
from ncgeom.metrics.groups import _embeddings, _group, _power_of_two_scale, _to_numpy
from ncgeom.validate import require_finite_array

__all__ = ["self_duality", "classifier_agreement"]


def _exponent(scale: float) -> int:
    """e with scale = 2^e (scale is a power of two from :func:`ncgeom.metrics.groups._power_of_two_scale`)."""
    return int(np.frexp(scale)[1]) - 1


def _classifier_weights(classifier, num_classes: int, dim: int) -> np.ndarray:
    """``classifier`` as a finite float64 array [C, d], or ValueError naming both shapes."""
    w = _to_numpy(classifier)
    if w.dtype == object or not (np.issubdtype(w.dtype, np.number) or w.dtype == bool) or np.iscomplexobj(w):
        raise ValueError(f"classifier must be a real numeric array [C, d], got dtype {w.dtype}")
    if w.shape != (num_classes, dim):
        raise ValueError(f"classifier must have shape [C, d] = [{num_classes}, {dim}] ({num_classes} classes in the "
                         f"labels or class_means, {dim} columns of z), got shape {tuple(w.shape)}")
    w = w.astype(np.float64, copy=False)
    require_finite_array("classifier", w)
    return w


def _bias(bias, num_classes: int) -> np.ndarray:
    """``bias`` as a finite float64 array [C] (zeros for None), or ValueError naming its shape."""
    if bias is None:
        return np.zeros(num_classes)
    b = _to_numpy(bias)
    if b.dtype == object or not (np.issubdtype(b.dtype, np.number) or b.dtype == bool) or np.iscomplexobj(b):
        raise ValueError(f"bias must be a real numeric array [C], got dtype {b.dtype}")
    if b.shape != (num_classes,):
        raise ValueError(f"bias must have shape [C] = [{num_classes}] (one entry per row of classifier), "
                         f"got shape {tuple(b.shape)}")
    b = b.astype(np.float64, copy=False)
    require_finite_array("bias", b)
    return b


def _self_duality(means: np.ndarray, weights: np.ndarray) -> float:
    """||W / ||W||_F - M~ / ||M~||_F||_F with M~ = means - their unweighted mean; NaN if W = 0 or M~ = 0."""
    centered = means - means.mean(axis=0)
    w = weights / _power_of_two_scale(weights)  # exact; W / ||W|| is unchanged and nothing under/overflows
    norm_m, norm_w = np.linalg.norm(centered), np.linalg.norm(w)
    if norm_m == 0.0 or norm_w == 0.0:
        return float("nan")
    return float(np.linalg.norm(w / norm_w - centered / norm_m))


class _AgreementRule:
    """The two predictions of NC4 for rows of z, in one common power-of-two unit (argmax/argmin unchanged).

    Classifier: argmax_c (<w_c, z> + b_c), computed as <w_c / s_w, z / s> + b_c / (s_w s); NCM:
    argmin_c ||z - mu_c||^2 = argmin_c (||mu_c||^2 - 2 <z, mu_c>), computed on z / s and mu_c / s (the
    ||z||^2 term is common to all classes). Ties go to the first class.
    """

    def __init__(self, weights: np.ndarray, bias: np.ndarray, means: np.ndarray) -> None:
        self.w_exp = _exponent(_power_of_two_scale(weights))
        self.w = np.ldexp(weights, -self.w_exp)
        self.bias = bias
        self.means = means
        self.means_peak = float(np.max(np.abs(means)))

    def agreements(self, z: np.ndarray) -> int:
        """Number of rows of z [b, d] (float64, any scale) on which both rules predict the same class."""
        e = _exponent(_power_of_two_scale(np.array([float(np.max(np.abs(z))), self.means_peak])))
        zs, ms = np.ldexp(z, -e), np.ldexp(self.means, -e)
        logits = zs @ self.w.T + np.ldexp(self.bias, -(e + self.w_exp))
        dist = np.einsum("cd,cd->c", ms, ms)[None, :] - 2.0 * (zs @ ms.T)
        return int(np.count_nonzero(np.argmax(logits, axis=1) == np.argmin(dist, axis=1)))


def self_duality(z, labels, *, classifier, num_classes: int | None = None) -> float:
    """Distance between the normalized classifier and the normalized centred class means (NC3).

    .. math:: \\mathrm{self\\_duality} = \\Big\\lVert \\frac{W}{\\lVert W\\rVert_F}
        - \\frac{\\tilde M}{\\lVert \\tilde M\\rVert_F} \\Big\\rVert_F,
        \\qquad \\tilde M_c = \\mu_c - \\mu_G,\\quad \\mu_G = \\frac1C \\sum_c \\mu_c

    where

    - W = ``classifier`` [C, d], row c the weight vector w_c of class c (sorted label order);
    - mu_c the class means of ``z`` [N, d] grouped by ``labels`` [N], M~ [C, d] the centred means;
    - mu_G the UNWEIGHTED mean of the class means (docs/theory.md section 8).

    papyan2020prevalence, NC3 ("convergence to self-duality", Fig. 5: there W^T and M~ [d, C], the same
    number). Zero iff W is a positive multiple of M~ (whatever M~ looks like: combine it with
    ``etf_distance`` for "W and M~ are the same ETF"); at most 2 (W = -a M~); scale invariant in z and in W
    separately, and rotation invariant when z and W rotate together. Not squared: Papyan et al.'s Colab
    (and Fig. 5) give ``self_duality ** 2``; nc-toolbox's ``nc3_self_duality`` is this value when its mu_g
    is ours (the unweighted mean; its README passes the sample mean, equal to ours for balanced classes).
    rhubarbwu's ``self_duality_error`` is another quantity: the distance of W M~^T / ||W M~^T||_F to the
    normalized ETF Gram, which is ``etf_distance`` when W = a M~.
    The bias is not part of NC3.

    Degenerate input: NaN when W = 0 or when all class means coincide (M~ = 0): no direction to compare.
    A class with one sample and d < C - 1 are fine (W and M~ are compared entry by entry).

    Raises
    ------
    ValueError
        ``classifier`` not of shape [C, d] (C the number of classes, d the columns of z), or non-finite,
        besides the checks of every metric (:func:`ncgeom.metrics.class_means`).

    Examples
    --------
    C = 2: the centred means of two classes are antipodal, +-1 here; the classifier that points the same
    way is self-dual (0), the reversed one is as far as possible (2):

    >>> z, y = [[1.0, 0.0], [-1.0, 0.0]], [0, 1]
    >>> round(self_duality(z, y, classifier=[[3.0, 0.0], [-3.0, 0.0]]), 12)
    0.0
    >>> round(self_duality(z, y, classifier=[[-1.0, 0.0], [1.0, 0.0]]), 12)
    2.0
    """
    g = _group(z, labels, num_classes=num_classes)
    weights = _classifier_weights(classifier, g.num_classes, g.z.shape[1])
    return _self_duality(g.means, weights)


def classifier_agreement(z, labels=None, *, classifier, bias=None, class_means=None,
                         num_classes: int | None = None) -> float:
    """Fraction of samples on which the classifier and the nearest class mean agree (NC4).

    .. math:: \\mathrm{classifier\\_agreement} = \\frac1N \\sum_{i=1}^N \\Big[
        \\operatorname*{arg\\,max}_c \\big(\\langle w_c, z_i\\rangle + b_c\\big)
        = \\operatorname*{arg\\,min}_c \\lVert z_i - \\mu_c\\rVert_2 \\Big]

    where

    - z_i = ``z[i]``, embeddings [N, d];
    - w_c = ``classifier[c]`` [C, d] and b_c = ``bias[c]`` [C] (default 0);
    - mu_c the class means of ``(z, labels)``, or ``class_means[c]`` [C, d] when given (e.g. the train
      means ``class_means(z_train, y_train)``, to score test data; then ``labels`` is only checked for its
      length and may be omitted).

    papyan2020prevalence, NC4 ("simplification to nearest class center", Fig. 7 plots the mismatch
    1 - agreement). The nearest class mean is EUCLIDEAN, as in Papyan et al., rhubarbwu/neural-collapse
    (``DecAccumulator``, without a bias; its ``clf_ncc_agreement(weighted=True)`` is this rate) and
    nc-toolbox (``nc4_classifier_agreement``, with the bias); :func:`ncgeom.metrics.ncc_accuracy` uses the
    inner product instead, and scores against the labels, not against a classifier. The labels play no
    part in the rate. Ties go to the first class in both rules. In [0, 1]; 1 at NC with a self-dual
    classifier and b = 0 (then both rules are argmax_c <mu_c, z>, the means having equal norms).

    Degenerate input: a class with one sample, d < C - 1 and coincident means are all fine (the rules
    still pick a class, the first of a tie).

    Raises
    ------
    ValueError
        ``classifier`` not [C, d], ``bias`` not [C], ``class_means`` not [C, d] (C >= 2), non-finite values,
        besides the checks of every metric.

    Examples
    --------
    C = 2, means +-1 on the line; the classifier w = (1, -1), b = (-1, 1) moves the boundary to z = 1:

    >>> classifier_agreement([[0.5], [1.5], [-1.0], [-1.0]], [0, 0, 1, 1], classifier=[[1.0], [-1.0]])
    1.0
    >>> classifier_agreement([[0.5], [1.5], [-1.0], [-1.0]], [0, 0, 1, 1], classifier=[[1.0], [-1.0]],
    ...                      bias=[-1.0, 1.0])
    0.75
    """
    if class_means is None:
        if labels is None:
            raise ValueError("labels are required unless class_means is given")
        g = _group(z, labels, num_classes=num_classes)
        zz, means = g.z * g.scale, g.means * g.scale  # exact (a power of two): the rule scales z, means and b together
    else:
        if num_classes is not None:
            raise ValueError("num_classes is only meaningful without class_means (the rows of class_means are the classes)")
        zz = _embeddings(z)
        if labels is not None:
            integer_labels(labels, n=zz.shape[0])
        means = _embeddings(class_means, "class_means")
        if means.shape[0] < 2:
            raise ValueError(f"class_means must have at least 2 rows (classes), got {means.shape[0]}")
        if means.shape[1] != zz.shape[1]:
            raise ValueError(f"class_means has dimension {means.shape[1]} but z has {zz.shape[1]} columns (they must match)")
    c, d = means.shape
    rule = _AgreementRule(_classifier_weights(classifier, c, d), _bias(bias, c), means)
    return rule.agreements(zz) / zz.shape[0]
