"""Data for the experiments: the latent-class model, positives, class-balanced batches, digits.

- :mod:`ncgeom.data.mixture`: C latent classes with a prior, inputs from a Gaussian mixture in R^D
  (docs/theory.md section 1), train/test splits as a frozen :class:`LabeledData`.
- :mod:`ncgeom.data.positives`: label-based positives (an independent draw from the same class) and
  additive-Gaussian-noise positives x+ = x + sigma_p * eps (docs/theory.md section 3), and the two-view
  (SimCLR-style) batch that feeds noise positives to the label-based batch loss.
- :mod:`ncgeom.data.batches`: class-balanced batch sampling, and shuffled batches (a DataLoader's).
- :mod:`ncgeom.data.digits`: scikit-learn's bundled digits (offline real data, docs/theory.md section 9 claim 5).
- :mod:`ncgeom.data.images`: CIFAR-10/100, STL-10 and ImageFolder readers (docs/images.md), and
  :mod:`ncgeom.data.images.download`: the official archives, fetched and checked (``ncgeom train
  --download``); :mod:`ncgeom.data.augment`: the SimCLR augmentations on batches of images. Their names are
  imported on first use (Pillow, torch), so ``import ncgeom.data`` stays light. The look-alike data sets
  of the tests are written by :mod:`ncgeom.testing.images`.

All randomness comes from an explicit ``numpy.random.Generator`` (``rng=``) or ``torch.Generator``
(``generator=``).
"""

import importlib

from ncgeom.data.batches import (
    batches_per_epoch,
    check_batches,
    class_balanced_batches,
    class_balanced_counts,
    epoch_batches,
    shuffled_batches,
)
from ncgeom.data.digits import digits_class_sizes, digits_train_size, load_digits_data
from ncgeom.data.mixture import LabeledData, class_prior, gaussian_mixture, split_counts
from ncgeom.data.positives import label_positive_indices, label_positives, noise_positives, two_view_batch

__all__ = [
    "LabeledData",
    "class_prior",
    "split_counts",
    "gaussian_mixture",
    "load_digits_data",
    "digits_train_size",
    "digits_class_sizes",
    "label_positive_indices",
    "label_positives",
    "noise_positives",
    "two_view_batch",
    "class_balanced_counts",
    "class_balanced_batches",
    "shuffled_batches",
    "batches_per_epoch",
    "check_batches",
    "epoch_batches",
    "ImageData",
    "load_image_data",
    "simclr_augment",
    "two_views",
    "standardize",
    "download_image_data",
]

# name -> module: imported on first use (Pillow for the readers, torch for the augmentations)
_LAZY = {
    **dict.fromkeys(("ImageData", "load_image_data"), "ncgeom.data.images"),
    **dict.fromkeys(("simclr_augment", "two_views", "standardize"), "ncgeom.data.augment"),
    "download_image_data": "ncgeom.data.images.download",
}


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'ncgeom.data' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | _LAZY.keys())
