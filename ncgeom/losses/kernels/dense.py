"""Dense reference backend: plain torch autograd on the B x B similarity matrix (docs/theory.md section 7).

For anchor i and positive j in P(i), with S = Z Z^T, b the tilt, tau the temperature, k the number of
negatives:

.. math::

    \\ell_{ij} = \\log\\Big(1 + k \\sum_{m \\in N(i)} q_{im} e^{(S_{im} - S_{ij})/\\tau}\\Big)
               = \\mathrm{softplus}(A_i - S_{ij}/\\tau),\\qquad
    A_i = \\log k + \\mathrm{LSE}_{m \\in N(i)}\\big((b + 1/\\tau) S_{im}\\big)
                  - \\mathrm{LSE}_{m \\in N(i)}(b S_{im}),

with q_im = softmax over N(i) of b S_i; P(i) and N(i) follow the spec's convention (pair_structure: "authors"
adds the pair (i, i) and, for UCL/HUCL, the anchor to N(i)). Masked log-sum-exp uses the sentinel ``torch.finfo(dtype).min``
(never -inf, so rows without negatives give no NaN gradient). With detached weights the b S term is
detached inside both LSE, so that d l_ij / d S_im = sigma_ij r_im / tau exactly as in section 7.
Memory: O(B^2) (several B x B tensors): this is the ground truth for the other backends, not the fast path.
"""

from __future__ import annotations

import torch

from ncgeom.losses.kernels.structure import LossSpec, PairStructure, log_num_negatives

__all__ = ["masked_logsumexp", "negative_mask", "dense_similarity_terms", "dense_weighted_values"]


def masked_logsumexp(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """log sum_{m: mask} exp(x_m) along the last axis; rows with an empty mask give finfo.min + log(n)."""
    sentinel = torch.finfo(x.dtype).min
    return x.masked_fill(~mask, sentinel).logsumexp(dim=-1)


def negative_mask(labels: torch.Tensor, *, supervised: bool, anchor_negative: bool = False) -> torch.Tensor:
    """N(i) as a [B, B] bool mask: y_m != y_i (supervised), m != i (unsupervised) or every m (unsupervised
    with ``anchor_negative``, the authors' convention)."""
    if supervised:
        return labels[:, None] != labels[None, :]
    size = labels.numel()
    if anchor_negative:
        return torch.ones(size, size, dtype=torch.bool, device=labels.device)
    return ~torch.eye(size, dtype=torch.bool, device=labels.device)


def dense_similarity_terms(z: torch.Tensor, labels: torch.Tensor, spec: LossSpec, structure: PairStructure):
    """(S [B, B], A [B]) of the weighted estimator, with autograd."""
    sim = z @ z.T
    neg = negative_mask(labels, supervised=spec.supervised, anchor_negative=spec.anchor_negative)
    tilt = sim * spec.b
    tilt_inner = tilt.detach() if spec.detach_weights else tilt
    lse_tilt = masked_logsumexp(tilt, neg)
    if spec.detach_weights:
        lse_tilt = lse_tilt.detach()
    lse_scaled = masked_logsumexp(tilt_inner + sim / spec.tau, neg)
    offset = log_num_negatives(spec, structure, z.dtype) + lse_scaled - lse_tilt
    return sim, offset


def dense_weighted_values(z: torch.Tensor, labels: torch.Tensor, spec: LossSpec, structure: PairStructure) -> torch.Tensor:
    """Per-pair values l_ij [P] of the weighted estimator, canonical pair order, with autograd."""
    sim, offset = dense_similarity_terms(z, labels, spec, structure)
    a, j = structure.anchors, structure.positives
    u = offset[a] - sim[a, j] / spec.tau
    return torch.logaddexp(u, torch.zeros_like(u))
