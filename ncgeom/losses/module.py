"""The batch losses as a ``torch.nn.Module``, to drop into one's own training loop (docs/theory.md, section 7).

:class:`HardContrastiveLoss` holds the options of :func:`ncgeom.losses.batch_loss` and computes it on each call.
It is called as the losses of pytorch-metric-learning are (``loss_func(embeddings, labels)``), works with any
optimizer (it has no parameters), and validates its options when it is built, with the messages of
``batch_loss`` (the same validation: its options are checked by ``batch_loss``'s own validator on a probe batch).

It normalizes the embeddings first (``normalize="sphere"`` by default, as pytorch-metric-learning's cosine
similarity does): the theorems hold on the ball or the sphere (docs/theory.md, section 1); pass
``normalize="none"`` when the encoder's output is already normalized.

>>> import torch
>>> from ncgeom.losses import HardContrastiveLoss
>>> loss_func = HardContrastiveLoss("scl")
>>> z = torch.tensor([[2.0, 0.0], [1.0, 0.0], [-1.0, 0.0], [-3.0, 0.0]])  # the C = 2 ETF once normalized
>>> round(float(loss_func(z, torch.tensor([0, 0, 1, 1]))), 6)  # log(1 + e^-2)
0.126928
"""

from __future__ import annotations

from typing import Any, Literal

import torch

from ncgeom.geometry import normalize as normalize_rows
from ncgeom.losses.batch import _validate, batch_loss
from ncgeom.losses.psi import Psi
from ncgeom.validate import require_choice
from ncgeom.vocabulary import (
    NORMALIZATIONS,
    Backend,
    Convention,
    Estimator,
    Normalization,
    PsiName,
    Reduction,
    SampledDraws,
    Setting,
)

__all__ = ["HardContrastiveLoss"]


class HardContrastiveLoss(torch.nn.Module):
    """SCL / HSCL / UCL / HUCL of a batch, as a module: ``loss_func(embeddings, labels)`` (module docstring).

    .. math:: \\mathcal L = \\frac{1}{|\\mathcal P|}\\sum_{(i, j) \\in \\mathcal P} \\ell_{ij}(Z),\\qquad
        Z = \\mathrm{normalize}(\\texttt{embeddings})

    with l_ij the weighted or sampled estimator of :func:`ncgeom.losses.batch_loss` (docs/theory.md, section 7)
    and P the positive pairs of the batch.

    Parameters
    ----------
    setting : {"scl", "hscl", "ucl", "hucl"}
        The negative law (docs/theory.md, section 3). For SCL/HSCL ``labels`` are classes; for UCL/HUCL they
        are instance ids (the two views of an image share one), as for pytorch-metric-learning's NTXentLoss.
    beta, tau, num_negatives, estimator, psi, detach_weights, reduction, backend, block_size, convention, draws
        As :func:`ncgeom.losses.batch_loss` (beta in [0, 1e4], ignored by scl/ucl; tau >= 1e-3; ...).
    normalize : {"sphere", "ball", "none"}
        Applied to the embeddings before the loss (``ncgeom.geometry.normalize``); default "sphere".
    generator : torch.Generator, optional
        The draws of ``estimator="sampled"`` (required then, on the embeddings' device).

    Raises
    ------
    ValueError
        At construction, any option outside its range (the messages of ``batch_loss``); at a call, bad
        embeddings or labels, or pytorch-metric-learning arguments it does not implement (``indices_tuple``
        from a miner, ``ref_emb``).

    Examples
    --------
    In a training loop, with any optimizer::

        loss_func = HardContrastiveLoss("hscl", beta=5.0, tau=0.5)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for x, y in loader:
            optimizer.zero_grad()
            loss = loss_func(model(x), y)
            loss.backward()
            optimizer.step()
    """

    def __init__(
        self,
        setting: Setting,
        *,
        beta: float = 0.0,
        tau: float = 1.0,
        num_negatives: int | Literal["batch"] = 1,
        estimator: Estimator = "weighted",
        psi: PsiName | Psi = "infonce",
        detach_weights: bool = True,
        reduction: Reduction = "mean",
        backend: Backend = "auto",
        block_size: int | None = None,
        convention: Convention = "theory",
        draws: SampledDraws = "pair",
        normalize: Normalization = "sphere",
        generator: torch.Generator | None = None,
    ) -> None:
        super().__init__()
        self.normalize: Normalization = require_choice("normalize", normalize, NORMALIZATIONS)
        options: dict[str, Any] = dict(beta=beta, tau=tau, num_negatives=num_negatives, estimator=estimator,
                                       psi=psi, detach_weights=detach_weights, reduction=reduction,
                                       backend=backend, block_size=block_size, convention=convention, draws=draws)
        # batch_loss's own validation, on a probe batch on the generator's device (the options do not depend on it)
        device = generator.device if isinstance(generator, torch.Generator) else torch.device("cpu")
        probe = torch.zeros((2, 1), device=device)
        request = _validate(probe, torch.zeros(2, dtype=torch.long, device=device), setting=setting,
                            generator=generator, **options)
        self.setting: Setting = setting
        self.options = {**options, "beta": float(beta), "tau": float(tau), "psi": request.psi}
        self.generator = generator

    @property
    def beta(self) -> float:
        return float(self.options["beta"])

    @property
    def tau(self) -> float:
        return float(self.options["tau"])

    @property
    def num_negatives(self) -> int | Literal["batch"]:
        return self.options["num_negatives"]

    def forward(self, embeddings: torch.Tensor, labels: torch.Tensor | None = None, indices_tuple: Any = None,
                ref_emb: torch.Tensor | None = None, ref_labels: torch.Tensor | None = None) -> torch.Tensor:
        """The loss of the batch ``embeddings`` [B, d] with ``labels`` [B] (pytorch-metric-learning's call)."""
        if labels is None:
            raise ValueError("labels must be given: class labels [B] for scl/hscl, instance ids [B] (the views of one "
                             "sample share an id) for ucl/hucl")
        if indices_tuple is not None:
            raise ValueError("indices_tuple (a miner's pairs or triplets) is not supported: the estimator weighs every "
                             "negative of the batch itself (beta, docs/theory.md section 7); drop the miner")
        if ref_emb is not None or ref_labels is not None:
            raise ValueError("ref_emb and ref_labels are not supported: the anchors' negatives are the batch itself")
        if not isinstance(embeddings, torch.Tensor):
            raise ValueError(f"embeddings must be a torch.Tensor of shape [B, d], got {type(embeddings).__name__}")
        z = normalize_rows(embeddings, self.normalize)
        return batch_loss(z, labels, self.setting, generator=self.generator, **self.options)

    def extra_repr(self) -> str:
        shown = {k: v for k, v in self.options.items() if k in ("beta", "tau", "num_negatives", "estimator")}
        psi = self.options["psi"]
        return (f"{self.setting!r}, " + ", ".join(f"{k}={v!r}" for k, v in shown.items())
                + f", psi={psi.name!r}, normalize={self.normalize!r}")
