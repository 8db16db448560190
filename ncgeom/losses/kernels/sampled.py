"""Sampled estimator (the authors' code; docs/theory.md section 7).

For each pair (i, j), j in P(i), draw k indices m_1..m_k i.i.d. with replacement from the tilted weights
q_i (q_im proportional to exp(b S_im) on N(i)), then apply psi_k exactly:

.. math:: \\ell_{ij} = \\psi_k\\big(S_{i m_1} - S_{ij}, \\dots, S_{i m_k} - S_{ij}\\big).

Any :class:`ncgeom.losses.Psi` works (infonce, infonce-mean, triplet, custom). Gradients flow through
the similarities only (sampling is not differentiable). Its expectation over the draws, given the batch,
is E_q[psi_k]; for k = 1 that is sum_m q_im psi(S_im - S_ij), and for the triplet psi (linear in each
term) it is sum_m q_im max(0, S_im - S_ij + margin) for every k.

Anchors are processed in row blocks: S_I = Z_I Z^T (with autograd) is formed for one block at a time and
only the sampled entries are kept, so memory is O(block_size * B + P k). The draws consume ``generator``
block by block, one ``torch.multinomial`` call per block: the result is reproducible from the generator
state for the same batch and block size (a different block size gives different, equally valid draws).
With k = "batch" each anchor draws k_i = |N(i)| negatives; the returned index matrix is padded with -1.
"""

from __future__ import annotations

import torch

from ncgeom.losses.kernels.structure import LossSpec, PairStructure
from ncgeom.losses.psi import Psi

__all__ = ["sampled_values"]


def sampled_values(
    z: torch.Tensor,
    labels: torch.Tensor,
    spec: LossSpec,
    structure: PairStructure,
    psi: Psi,
    *,
    generator: torch.Generator,
    block_size: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(values [P], negatives [P, k_max] long, -1 padded) of the sampled estimator, canonical pair order."""
    size = z.shape[0]
    num_pos = structure.pair_offsets[1:] - structure.pair_offsets[:-1]
    k_all = structure.num_negatives if spec.k is None else torch.full_like(structure.num_negatives, spec.k)
    k_max = int(k_all[structure.valid].max()) if structure.num_pairs else (spec.k or 1)
    values, negatives = [], []
    for start in range(0, size, block_size):
        stop = min(start + block_size, size)
        rows = torch.nonzero(structure.valid[start:stop]).reshape(-1)  # local valid rows
        if rows.numel() == 0:
            continue
        anchors = rows + start
        sim = z[start:stop] @ z.T  # [bs, B], with autograd
        with torch.no_grad():
            logits = spec.b * sim.detach()[rows]
            if spec.supervised:
                logits = logits.masked_fill(labels[anchors][:, None] == labels[None, :], float("-inf"))
            else:
                logits[torch.arange(rows.numel(), device=z.device), anchors] = float("-inf")
            # unnormalized weights exp(b S - max) suffice: multinomial normalizes each row itself
            probs = (logits - logits.amax(dim=-1, keepdim=True)).exp_()
            draws_per_row = num_pos[anchors] * k_all[anchors]
            draws = torch.multinomial(probs, int(draws_per_row.max()), replacement=True, generator=generator)
            # pairs of this block: row-local index, position t among the anchor's positives
            lo, hi = int(structure.pair_offsets[start]), int(structure.pair_offsets[stop])
            pair_anchor = structure.anchors[lo:hi]
            pair_row = torch.searchsorted(anchors, pair_anchor)
            position = torch.arange(lo, hi, device=z.device) - structure.pair_offsets[pair_anchor]
            k_pair = k_all[pair_anchor]
            cols = position[:, None] * k_pair[:, None] + torch.arange(k_max, device=z.device)[None, :]
            present = torch.arange(k_max, device=z.device)[None, :] < k_pair[:, None]
            idx = torch.gather(draws[pair_row], 1, torch.where(present, cols, torch.zeros_like(cols)))
        local = pair_anchor - start
        t = sim[local[:, None], idx] - sim[local, structure.positives[lo:hi]][:, None]
        pieces = []
        for k in torch.unique(k_pair).tolist():
            sel = torch.nonzero(k_pair == k).reshape(-1)
            pieces.append((sel, psi(t[sel, :k])))
        block_values = torch.zeros(hi - lo, dtype=z.dtype, device=z.device)
        for sel, val in pieces:
            block_values = block_values.index_put((sel,), val)
        values.append(block_values)
        negatives.append(torch.where(present, idx, torch.full_like(idx, -1)))
    if not values:
        empty = torch.zeros(0, dtype=z.dtype, device=z.device)
        return empty, torch.zeros((0, k_max), dtype=torch.long, device=z.device)
    return torch.cat(values), torch.cat(negatives)
