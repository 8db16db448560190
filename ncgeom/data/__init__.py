"""Data for the experiments: the latent-class model, positives, class-balanced batches, digits.

- :mod:`ncgeom.data.mixture`: C latent classes with a prior, inputs from a Gaussian mixture in R^D
  (docs/theory.md section 1), train/test splits as a frozen :class:`LabeledData`.
- :mod:`ncgeom.data.positives`: label-based positives (an independent draw from the same class) and
  additive-Gaussian-noise positives x+ = x + sigma_p * eps (docs/theory.md section 3), and the two-view
  (SimCLR-style) batch that feeds noise positives to the label-based batch loss.
- :mod:`ncgeom.data.batches`: class-balanced batch sampling.
- :mod:`ncgeom.data.digits`: scikit-learn's bundled digits (offline real data, docs/theory.md section 9 claim 5).

All randomness comes from an explicit ``numpy.random.Generator`` (``rng=``) or ``torch.Generator``
(``generator=``).
"""

from ncgeom.data.batches import class_balanced_batches, class_balanced_counts
from ncgeom.data.digits import digits_class_sizes, digits_train_size, load_digits_data
from ncgeom.data.mixture import LabeledData, class_prior, gaussian_mixture, split_counts
from ncgeom.data.positives import label_positive_indices, label_positives, noise_positives, two_view_batch
from ncgeom.vocabulary import POSITIVES  # re-exported: the positive kinds of the experiments

__all__ = [
    "LabeledData",
    "class_prior",
    "split_counts",
    "gaussian_mixture",
    "load_digits_data",
    "digits_train_size",
    "digits_class_sizes",
    "POSITIVES",
    "label_positive_indices",
    "label_positives",
    "noise_positives",
    "two_view_batch",
    "class_balanced_counts",
    "class_balanced_batches",
]
