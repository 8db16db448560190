"""The psi/eta loss family, its property checkers, and (see ``batch``) the batch estimators."""

from ncgeom.losses.batch import BACKENDS, SETTINGS, PairLosses, batch_loss, batch_loss_pairs, select_backend
from ncgeom.losses.eta import Eta, custom_eta, exponential_tilt, tilt_weights
from ncgeom.losses.properties import PropertyVerdict, check_convex, check_monotone
from ncgeom.losses.psi import PSI_NAMES, Psi, custom_psi, infonce, infonce_mean, make_psi, triplet

__all__ = [
    "Psi",
    "PSI_NAMES",
    "infonce",
    "infonce_mean",
    "triplet",
    "make_psi",
    "custom_psi",
    "Eta",
    "exponential_tilt",
    "custom_eta",
    "tilt_weights",
    "PropertyVerdict",
    "check_convex",
    "check_monotone",
    "batch_loss",
    "batch_loss_pairs",
    "PairLosses",
    "select_backend",
    "SETTINGS",
    "BACKENDS",
]
