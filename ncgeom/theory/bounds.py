"""Lower bounds of jiang2025hard, Theorems 1-3, as functions of (psi, C, k) (docs/theory.md section 4).

Each bound holds for every representation f under the hypotheses of its theorem (see
:func:`ncgeom.theory.check_conditions`); the population losses of :mod:`ncgeom.population` let tests
check them on finite latent-class models.
"""

from __future__ import annotations

import numpy as np

from ncgeom.losses.psi import Psi, make_psi
from ncgeom.theory.closed_forms import nc_value
from ncgeom.validate import require_int
from ncgeom.vocabulary import PsiName

__all__ = [
    "scl_lower_bound",
    "hscl_lower_bound",
    "ucl_lower_bound",
    "hucl_lower_bound",
    "instance_positive_bound",
]


def scl_lower_bound(psi: PsiName | Psi = "infonce", *, num_classes: int, num_negatives: int, tau: float = 1.0, margin: float = 1.0) -> float:
    """Theorem 2 bound: L_SCL(f) >= psi_k(-C/(C-1), ..., -C/(C-1)), attained at NC.

    .. math:: L_{\\mathrm{SCL}}(f) \\ge \\psi_k\\big(-\\tfrac{C}{C-1}, \\dots, -\\tfrac{C}{C-1}\\big)

    where C = ``num_classes``, k = ``num_negatives``. Hypotheses: balanced classes, ball or sphere,
    d >= C-1, psi convex and argument-wise non-decreasing; positives need not be conditionally
    independent. Source: jiang2025hard, Theorem 2 (docs/theory.md section 4).

    Examples
    --------
    Triplet, margin 1, C = 2: max(0, 1 - 2) = 0.

    >>> scl_lower_bound("triplet", num_classes=2, num_negatives=3)
    0.0
    """
    return nc_value("scl", psi, num_classes=num_classes, num_negatives=num_negatives, tau=tau, margin=margin)


def hscl_lower_bound(psi: PsiName | Psi = "infonce", *, num_classes: int, num_negatives: int, tau: float = 1.0, margin: float = 1.0) -> float:
    """Theorems 1 + 2: L_HSCL(f) >= L_SCL(f) >= psi_k(-C/(C-1), ...), for every non-decreasing eta >= 0.

    The same number as :func:`scl_lower_bound`; attained at NC, where all eligible negatives have
    similarity -1/(C-1) and tilting changes nothing. Source: jiang2025hard, Theorems 1 and 2.
    """
    return scl_lower_bound(psi, num_classes=num_classes, num_negatives=num_negatives, tau=tau, margin=margin)


def ucl_lower_bound(psi: PsiName | Psi = "infonce", *, num_classes: int, num_negatives: int, tau: float = 1.0, margin: float = 1.0) -> float:
    """Theorem 3 bound: L_UCL(f) >= E psi_k(T_1, ..., T_k), T_i i.i.d. 0 w.p. 1/C, -C/(C-1) otherwise.

    .. math::

        L_{\\mathrm{UCL}}(f) \\ge \\sum_{j=0}^k \\binom{k}{j} C^{-j} (1 - \\tfrac1C)^{k-j}\\,
        \\psi_k(0^{(j)}, (-\\tfrac{C}{C-1})^{(k-j)})

    Attained at NC. Hypotheses: balanced classes, label-based (conditionally independent) positives,
    ball or sphere, d >= C-1 (the paper may state d >= C), psi convex and non-decreasing.
    Source: jiang2025hard, Theorem 3 (docs/theory.md section 4).
    """
    return nc_value("ucl", psi, num_classes=num_classes, num_negatives=num_negatives, tau=tau, margin=margin)


def hucl_lower_bound(psi: PsiName | Psi = "infonce", *, num_classes: int, num_negatives: int, tau: float = 1.0, margin: float = 1.0) -> float:
    """Theorems 1 + 3: L_HUCL(f) >= L_UCL(f) >= the UCL value at NC. NOT tight.

    At NC the tilt raises the collision probability to pi_beta, so L_HUCL(NC) = nc_value("hucl") is
    strictly larger than this bound for beta > 0 when psi_k(0, ..) > psi_k(-C/(C-1), ..) (e.g. InfoNCE;
    not for a triplet whose margin <= 0, where both are 0); whether NC minimizes HUCL is open
    (jiang2025hard, HUCL discussion; docs/theory.md section 4).
    """
    return ucl_lower_bound(psi, num_classes=num_classes, num_negatives=num_negatives, tau=tau, margin=margin)


def instance_positive_bound(psi: PsiName | Psi = "infonce", *, num_negatives: int, tau: float = 1.0, margin: float = 1.0) -> float:
    """Jensen bound of UCL without conditional independence: L_UCL(f) >= psi_k(-1, ..., -1).

    With x+ = x, E<z, z+> = E||z||^2 <= 1 on the ball and E<z, z-> = ||E z||^2 >= 0, so E t_i >= -1 and
    Jensen gives psi_k(-1, ..., -1) for convex non-decreasing psi. NC does not attain it, and other
    geometries beat NC (docs/theory.md section 4, the cross-polytope example) [derived].

    Examples
    --------
    >>> round(instance_positive_bound("infonce", num_negatives=1), 6)  # log(1 + e^-1)
    0.313262
    """
    k = require_int("num_negatives", num_negatives, min_value=1)
    if not isinstance(psi, Psi):
        psi = make_psi(psi, tau=tau, margin=margin)
    return float(np.asarray(psi(np.full((1, k), -1.0)), dtype=np.float64)[0])
