"""Positive pairs (docs/theory.md section 3): label-based or additive Gaussian noise.

- **label-based**: x+ is an independent draw from the anchor's class (conditionally independent of x
  given the class), the assumption of jiang2025hard, Theorem 3 (UCL). In a batch this is what the
  label-based batch loss does already: P(i) = {j != i : y_j = y_i} (docs/theory.md section 7).
- **noise** (augmentation): x+ = x + sigma_p * eps, eps ~ N(0, I_D), NOT conditionally independent
  given the class. It enters the label-based batch loss as a two-view batch [x; x+] whose "labels" are
  instance ids (SimCLR-style): each sample's only positive is its noisy copy. The NC metrics must
  still use the true class labels.
"""

from __future__ import annotations

import numpy as np

from ncgeom.labels import integer_labels
from ncgeom.validate import require_real

__all__ = ["label_positive_indices", "label_positives", "noise_positives", "two_view_batch"]


def label_positive_indices(labels, *, rng: np.random.Generator) -> np.ndarray:
    """For each i, an index j != i drawn uniformly from i's class (a label-based positive).

    Parameters
    ----------
    labels : array [N] of int
        Every class present must have at least two members.
    rng : numpy.random.Generator

    Returns
    -------
    numpy.ndarray [N], int64
    """
    y = integer_labels(labels)  # integers (or strings mapped to ids); never lossy floats
    if not isinstance(rng, np.random.Generator):
        raise ValueError("rng must be a numpy.random.Generator")
    out = np.empty(y.size, dtype=np.int64)
    for c in np.unique(y):
        members = np.flatnonzero(y == c)
        m = members.size
        if m < 2:
            raise ValueError(f"labels: class {c} has {m} member, label-based positives need >= 2")
        # uniform over the other m - 1 members: draw an offset in 1..m-1 from each member's position
        offset = rng.integers(1, m, size=m)
        out[members] = members[(np.arange(m) + offset) % m]
    return out


def label_positives(x, labels, *, rng: np.random.Generator) -> np.ndarray:
    """x+ [N, D]: for each x_i an independent same-class sample x_j, j != i (see label_positive_indices)."""
    x = np.asarray(x)
    return x[label_positive_indices(labels, rng=rng)]


def noise_positives(x, *, scale: float, rng=None, generator=None):
    """x+ = x + sigma_p * eps, eps ~ N(0, I) (docs/theory.md section 3).

    Parameters
    ----------
    x : numpy array or torch tensor [N, D]
    scale : float
        sigma_p >= 0.
    rng : numpy.random.Generator
        For numpy input.
    generator : torch.Generator
        For torch input (the noise has x's dtype and device).
    """
    sigma = require_real("scale", scale, min_value=0.0)
    if hasattr(x, "detach"):
        import torch

        if not isinstance(generator, torch.Generator):
            raise ValueError("generator must be a torch.Generator for torch input")
        eps = torch.randn(x.shape, generator=generator, dtype=x.dtype, device=x.device)
        return x + sigma * eps
    if not isinstance(rng, np.random.Generator):
        raise ValueError("rng must be a numpy.random.Generator for numpy input")
    x = np.asarray(x, dtype=np.float64)
    return x + sigma * rng.standard_normal(x.shape)


def two_view_batch(x, *, scale: float, generator):
    """Two-view batch for noise positives: ([x; x + sigma_p eps] [2B, D], instance ids [2B]).

    The ids are [0..B-1, 0..B-1], so a label-based batch loss sees exactly one positive per anchor,
    its noisy copy (SimCLR-style). Example: B = 2 gives ids [0, 1, 0, 1].
    """
    import torch

    b = x.shape[0]
    views = torch.cat([x, noise_positives(x, scale=scale, generator=generator)], dim=0)
    ids = torch.arange(b, device=x.device).repeat(2)
    return views, ids
