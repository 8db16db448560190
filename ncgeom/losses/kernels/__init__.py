"""Backends of :func:`ncgeom.losses.batch_loss` (docs/theory.md section 7).

- :mod:`.structure`: the loss specification and the pair structure (P(i), N(i)) shared by all;
- :mod:`.dense`: the reference, plain autograd on the B x B similarity matrix;
- :mod:`.blocked`: a custom autograd Function over row blocks, never materializing B x B;
- :mod:`.sampled`: the sampled estimator (the authors' code), any psi;
- :mod:`.draws`: its draws of negatives from q_i (alias tables per pair, inverse-CDF tuples per anchor);
- :mod:`.triton_kernel`: a Triton kernel for CUDA (imported lazily; triton is optional);
- :mod:`.stacked`: the weighted estimator on a stack of R runs' batches [R, B, d] (the stacked driver of
  :mod:`ncgeom.runs.stacked`; :func:`~ncgeom.losses.kernels.stacked.stacked_weighted`).

Users call :func:`ncgeom.losses.batch_loss`; these modules take already validated arguments.
"""

from ncgeom.losses.kernels.structure import LossSpec, PairStructure, pair_structure

__all__ = ["LossSpec", "PairStructure", "pair_structure"]
