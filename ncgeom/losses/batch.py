"""Batch contrastive losses SCL / HSCL / UCL / HUCL on a mini-batch (docs/theory.md section 7).

Public entry points: :func:`batch_loss` (a scalar, or per-pair values) and :func:`batch_loss_pairs`
(per-pair values with their (i, j) indices, a :class:`PairLosses` record). The computation is done by
one of the backends of :mod:`ncgeom.losses.kernels`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Literal, NamedTuple

import torch

from ncgeom.labels import check_label_tensor
from ncgeom.losses.kernels.blocked import blocked_weighted
from ncgeom.losses.kernels.dense import dense_weighted_values
from ncgeom.losses.kernels.sampled import sampled_values
from ncgeom.losses.kernels.structure import LossSpec, pair_structure
from ncgeom.losses.psi import Psi, make_psi
from ncgeom.ranges import require_beta, require_tau
from ncgeom.validate import require_choice, require_finite_array, require_int
from ncgeom.vocabulary import (
    BACKENDS,
    CONVENTIONS,
    ESTIMATORS,
    PSI_NAMES,
    REDUCTIONS,
    SAMPLED_DRAWS,
    SETTINGS,
    Backend,
    Convention,
    Estimator,
    PsiName,
    Reduction,
    SampledDraws,
    Setting,
    effective_beta,
    is_supervised,
)

__all__ = [
    "PairLosses",
    "batch_loss",
    "batch_loss_pairs",
    "select_backend",
    "default_block_size",
]

_FLOAT_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
# auto: above this batch size the dense B x B path is never chosen
DENSE_MAX_BATCH = 4096


@dataclass(frozen=True)
class PairLosses:
    """Per-pair values of a batch loss, with their indices (docs/theory.md section 7, reduction "none").

    Attributes
    ----------
    values : Tensor [P]
        l_ij for every pair, in canonical order (anchor i ascending, then positive j ascending); attached
        to the autograd graph of ``z``.
    anchors, positives : Tensor [P] (long)
        i and j of each pair; j in P(i) = {j != i : y_j = y_i} (convention "theory"; j = i included under
        "authors").
    negatives : Tensor [P, k] (long) or None
        For the sampled estimator, the drawn negatives m_1..m_k of each pair (padded with -1 when
        k = "batch" makes k vary by anchor; with draws="anchor" the rows of one anchor are equal); None for
        the weighted estimator.
    backend : str
        The backend that computed the values ("dense", "blocked", "triton").
    """

    values: torch.Tensor
    anchors: torch.Tensor
    positives: torch.Tensor
    negatives: torch.Tensor | None
    backend: str

    @property
    def num_pairs(self) -> int:
        return int(self.values.numel())

    def mean(self) -> torch.Tensor:
        """Mean over pairs; a zero attached to the graph when there is no pair."""
        return self.values.mean() if self.num_pairs else self.values.sum()


def default_block_size(batch_size: int) -> int:
    """Rows per block of the blocked backend: max(128, 2^19 // B), at most B.

    A [rows, B] tile of 2^19 entries or so (2 MiB in float32) stays in the CPU's L2 cache, so the few
    elementwise passes per tile cost little next to the matmuls, and the number of torch calls stays small
    (BENCHMARKS.md: 128 rows were the fastest at B = 4096 with 1 and 2 threads on a 2-core CPU).
    """
    return max(1, min(batch_size, max(128, (1 << 19) // max(batch_size, 1))))


def batch_loss(
    z: torch.Tensor,
    labels: torch.Tensor,
    setting: Setting,
    *,
    beta: float = 0.0,
    tau: float = 1.0,
    num_negatives: int | Literal["batch"] = 1,
    estimator: Estimator = "weighted",
    psi: PsiName | Psi = "infonce",
    detach_weights: bool = True,
    reduction: Reduction = "mean",
    generator: torch.Generator | None = None,
    backend: Backend = "auto",
    block_size: int | None = None,
    convention: Convention = "theory",
    draws: SampledDraws = "pair",
) -> torch.Tensor:
    """Batch estimator of the SCL / HSCL / UCL / HUCL loss (docs/theory.md section 7; jiang2025hard).

    With S = Z Z^T, for anchor i, positive j in P(i) = {j != i : y_j = y_i} and candidate negatives
    N(i) = {m : y_m != y_i} (SCL, HSCL) or {m != i} (UCL, HUCL), tilt weights
    q_im = exp(b S_im) / sum_{m' in N(i)} exp(b S_im') with b = ``beta`` for HSCL/HUCL and b = 0 for
    SCL/UCL, the **weighted** estimator (Robinson et al. style, exact over the batch) is

    .. math::

        \\ell_{ij} = \\log\\Big(1 + k \\sum_{m \\in N(i)} q_{im}\\, e^{(S_{im} - S_{ij})/\\tau}\\Big)
                   = \\mathrm{softplus}\\big(A_i - S_{ij}/\\tau\\big),\\quad
        A_i = \\log k + \\mathrm{LSE}_{N(i)}((b + 1/\\tau) S_{i\\cdot}) - \\mathrm{LSE}_{N(i)}(b S_{i\\cdot}),

    and the **sampled** estimator (the authors' code) draws m_1..m_k ~ q_i i.i.d. for each pair and returns
    psi_k(S_{i m_1} - S_ij, ..., S_{i m_k} - S_ij). With ``draws="anchor"`` each anchor draws one such tuple,
    shared by all its pairs: each l_ij has the same law, so the expectation is the same, but the pairs of one
    anchor are correlated and the variance grows (see ``draws``).

    These are the pairs of the "theory" convention (docs/theory.md section 7). ``convention="authors"``
    reproduces the paper's code (rjiang03/HCL, ``nce_supervised_easy`` / ``nce_supervised_hard``;
    docs/conventions.md, section 2.4): P(i) = {j : y_j = y_i}, the anchor counted as its own positive (the pair
    (i, i), so a singleton class contributes a term), and for UCL/HUCL N(i) = {m}, the whole batch including
    the anchor; SCL/HSCL keep N(i) = {m : y_m != y_i}. The formulas are otherwise unchanged. The authors'
    own setting is this convention with estimator="sampled", psi="infonce-mean", num_negatives=256, tau=1
    and embeddings clipped to the unit ball.

    Parameters
    ----------
    z : Tensor [B, d]
        Embeddings, already normalized (sphere, ball or none); float32 or float64 (float16/bfloat16 are
        accepted by the dense and blocked backends but without numerical guarantees).
    labels : Tensor [B] (integer)
        Class labels; any integer values (classes absent from the batch play no role).
    setting : {"scl", "hscl", "ucl", "hucl"}
    beta : float in [0, 1e4]
        Hardness b of the tilt for HSCL/HUCL. **Ignored for SCL and UCL** (b = 0 there), so that
        beta = 0 HSCL is exactly SCL and HUCL at beta = 0 exactly UCL. The range is validated
        (``ncgeom.ranges.BETA_MAX``; see Notes).
    tau : float >= 1e-3
        Temperature (``ncgeom.ranges.TAU_MIN``; no upper bound).
    num_negatives : int >= 1 or "batch"
        k. "batch" means k = |N(i)| per anchor (then SCL at beta = 0 is pytorch-metric-learning's
        NTXentLoss with labels). k = 1 with the weighted estimator is the authors' mean form
        log(1 + E_q exp(t / tau)).
    estimator : {"weighted", "sampled"}
    psi : "infonce", "infonce-mean", "triplet" or a :class:`ncgeom.losses.Psi`
        The weighted estimator implements psi = "infonce" only (the formula above; any other psi raises
        ValueError: use estimator="sampled", which applies any psi exactly; a name is built with
        ``tau``, and the triplet margin is 1.0 unless a Psi is passed).
    detach_weights : bool
        True (default, the authors' code): q carries no gradient. False: the gradient also flows through
        q (Robinson et al.'s code). Only meaningful for the weighted estimator (False with "sampled"
        raises ValueError).
    reduction : {"mean", "sum", "none"}
        "mean": average of l_ij over all pairs (a zero attached to the graph if there is none); "sum";
        "none": the per-pair values [P] in canonical order (anchor ascending, then positive ascending);
        use :func:`batch_loss_pairs` to get their (i, j) indices.
    generator : torch.Generator or None
        Required by the sampled estimator (on z's device); unused by the weighted one.
    backend : {"auto", "dense", "blocked", "triton"}
        See :func:`select_backend` for the rule of "auto".
    block_size : int >= 1 or None
        Rows per block (blocked, sampled) or tile size (triton); None: :func:`default_block_size`.
    convention : {"theory", "authors"}
        Which pairs count (above). "authors" runs on the dense and blocked backends; ``backend="auto"``
        never picks triton for it, and ``backend="triton"`` with it raises ValueError.
    draws : {"pair", "anchor"}
        How the sampled estimator draws (``ncgeom.vocabulary.SAMPLED_DRAWS``; any value but "pair" with
        estimator="weighted" raises ValueError). "pair" (default): k fresh draws for every pair (i, j), the
        pairs independent given the batch. "anchor": one tuple m_1..m_k ~ q_i i.i.d. per anchor, shared by
        all the pairs (i, j), j in P(i). Each pair's tuple still has the law q_i^{(x)k}, so E[l_ij] and the
        expectation of every reduction are unchanged; the pairs of one anchor are non-negatively correlated
        (Harris' inequality, for psi non-decreasing), so the variance of "mean"/"sum" is at least the "pair"
        one and at most max_i |P(i)| times it (docs/theory.md section 7; BENCHMARKS.md measures it). In
        exchange it costs a few weighted passes: S_{i m_l} gathered once per anchor, and for the built-in psi
        an O(1) (infonce, infonce-mean) or O(log k) (triplet) evaluation per pair. The draws are a different
        stream from "pair", reproducible from ``generator`` whatever the block size.

    Returns
    -------
    Tensor
        A 0-d tensor ("mean", "sum") or [P] ("none").

    Notes
    -----
    Anchors with no positive or no negative contribute nothing. Everything is computed in log space
    (masked log-sum-exp with finfo sentinels). Validated range (docs/theory.md section 7, "Backends and
    numerics"): beta in [0, 1e4] and tau >= 1e-3; outside it batch_loss raises ValueError naming the
    range. Inside it, for float32 inputs of norm <= 1 (sphere, ball), the loss and the gradient are
    finite with every backend and estimator, and the float32 value is within about (beta + 1/tau) * 2^-23
    of the float64 value (the log-sum-exp of (beta + 1/tau) S is differenced in working precision).
    Unnormalized embeddings stay finite while (beta + 1/tau) max ||z||^2 is far below the dtype's largest
    value; beyond it the loss is inf (a training run then stops as diverged). At an exact NC batch the
    SCL/HSCL value is log(1 + k e^{-C/((C-1) tau)}) (docs/theory.md section 7).

    Examples
    --------
    C = 2 antipodal classes (the C = 2 ETF), tau = 1, k = 1: every pair has S_ij = 1, S_im = -1, so
    l = log(1 + e^{-2}) = 0.126928.

    >>> z = torch.tensor([[1.0, 0.0], [1.0, 0.0], [-1.0, 0.0], [-1.0, 0.0]], dtype=torch.float64)
    >>> round(float(batch_loss(z, torch.tensor([0, 0, 1, 1]), "scl")), 6)
    0.126928
    """
    request = _validate(z, labels, setting=setting, beta=beta, tau=tau, num_negatives=num_negatives,
                        estimator=estimator, psi=psi, detach_weights=detach_weights, reduction=reduction,
                        generator=generator, backend=backend, block_size=block_size, convention=convention,
                        draws=draws)
    return _compute(z, labels, request, want_indices=False)


def batch_loss_pairs(
    z: torch.Tensor,
    labels: torch.Tensor,
    setting: Setting,
    *,
    beta: float = 0.0,
    tau: float = 1.0,
    num_negatives: int | Literal["batch"] = 1,
    estimator: Estimator = "weighted",
    psi: PsiName | Psi = "infonce",
    detach_weights: bool = True,
    generator: torch.Generator | None = None,
    backend: Backend = "auto",
    block_size: int | None = None,
    convention: Convention = "theory",
    draws: SampledDraws = "pair",
) -> PairLosses:
    """Per-pair values l_ij with their indices (i, j) (and drawn negatives), as a :class:`PairLosses`.

    Same arguments and formula as :func:`batch_loss` (docs/theory.md section 7), without ``reduction``.
    ``PairLosses.values`` equals ``batch_loss(..., reduction="none")``. With ``draws="anchor"`` the rows of
    ``PairLosses.negatives`` of one anchor are identical (its shared tuple).
    """
    request = _validate(z, labels, setting=setting, beta=beta, tau=tau, num_negatives=num_negatives,
                        estimator=estimator, psi=psi, detach_weights=detach_weights, reduction="none",
                        generator=generator, backend=backend, block_size=block_size, convention=convention,
                        draws=draws)
    return _compute(z, labels, request, want_indices=True)


def select_backend(
    z: torch.Tensor, *, estimator: str, reduction: str, detach_weights: bool, requested: str = "auto",
    convention: str = "theory",
) -> str:
    """The backend that :func:`batch_loss` uses.

    Rule of ``auto``: "triton" when z is on CUDA, triton is importable, and the options are the ones the
    kernel implements (weighted estimator, reduction mean or sum, float32/float64, d <= 256, convention
    "theory"); otherwise
    "blocked" for the weighted estimator when the weights are detached (it computes loss and gradient in
    one pass, at about the cost of the three matmuls), and for either estimator when B > 4096 (the dense
    path would hold several B x B tensors); "dense" otherwise (B <= 4096 with gradient through the
    weights, or the sampled estimator). An explicit ``requested`` backend is checked and
    returned; "triton" with unsupported options raises ValueError (on the CPU it runs only under
    TRITON_INTERPRET=1, Triton's interpreter, for tests).
    """
    if requested == "triton":
        reason = _triton_unsupported(z, estimator, reduction, convention, interpreter_ok=True)
        if reason:
            raise ValueError(f"backend='triton' is not available here: {reason}")
        return "triton"
    if requested != "auto":
        return requested
    if not _triton_unsupported(z, estimator, reduction, convention):
        return "triton"
    if estimator == "weighted" and (detach_weights or z.shape[0] > DENSE_MAX_BATCH):
        return "blocked"
    if estimator == "sampled" and z.shape[0] > DENSE_MAX_BATCH:
        return "blocked"
    return "dense"


def _triton_unsupported(z: torch.Tensor, estimator: str, reduction: str, convention: str, *,
                        interpreter_ok: bool = False) -> str:
    if convention != "theory":
        return f"it implements convention='theory' only (got {convention!r}: use backend='blocked' or 'dense')"
    if estimator != "weighted":
        return "it implements the weighted estimator only"
    if reduction == "none":
        return "it implements reduction 'mean' and 'sum' only"
    if z.device.type != "cuda" and not (interpreter_ok and os.environ.get("TRITON_INTERPRET") == "1"):
        return "z is not on a CUDA device (set TRITON_INTERPRET=1 to run the interpreter on the CPU)"
    if z.dtype not in (torch.float32, torch.float64):
        return "it implements float32 and float64 only"
    if z.shape[1] > 256:
        return "it implements d <= 256 only"
    try:
        import triton  # noqa: F401
    except ImportError:
        return "triton is not installed"
    return ""


class _Request(NamedTuple):
    """A validated call of :func:`batch_loss`: the loss specification and how to evaluate it."""

    spec: LossSpec
    estimator: Estimator
    psi: Psi
    reduction: Reduction
    generator: torch.Generator | None
    backend: Backend
    block_size: int | None
    draws: SampledDraws


def _validate(z, labels, *, setting, beta, tau, num_negatives, estimator, psi, detach_weights, reduction,
              generator, backend, block_size, convention, draws) -> _Request:
    """Every argument of :func:`batch_loss` checked (ValueError naming it and its range), as a :class:`_Request`."""
    if not isinstance(z, torch.Tensor):
        raise ValueError(f"z must be a torch.Tensor of shape [B, d], got {type(z).__name__}")
    if z.ndim != 2 or z.shape[0] < 1 or z.shape[1] < 1:
        raise ValueError(f"z must have shape [B, d] with B >= 1 and d >= 1, got {tuple(z.shape)}")
    if z.dtype not in _FLOAT_DTYPES:
        raise ValueError(f"z must be float32 or float64 (or float16, bfloat16), got {z.dtype}")
    require_finite_array("z", z)
    if not isinstance(labels, torch.Tensor):
        raise ValueError(f"labels must be an integer torch.Tensor of shape [B], got {type(labels).__name__}")
    check_label_tensor(labels, z.shape[0])
    if labels.device != z.device:
        raise ValueError(f"labels must be on z's device {z.device}, got {labels.device}")
    setting = require_choice("setting", setting, SETTINGS)
    beta = require_beta(beta)  # [0, BETA_MAX]: the validated range of docs/theory.md section 7
    tau = require_tau(tau)  # >= TAU_MIN
    if num_negatives != "batch":
        if isinstance(num_negatives, str):
            raise ValueError(f"num_negatives must be an integer >= 1 or 'batch', got {num_negatives!r}")
        try:
            num_negatives = require_int("num_negatives", num_negatives, min_value=1)
        except ValueError:
            raise ValueError(f"num_negatives must be an integer >= 1 or 'batch', got {num_negatives!r}") from None
    estimator = require_choice("estimator", estimator, ESTIMATORS)
    if not isinstance(psi, Psi):
        psi = make_psi(require_choice("psi", psi, PSI_NAMES), tau=tau)
    if psi.tau is not None:
        require_tau(psi.tau, name="psi's tau")
    if estimator == "weighted" and not (psi.builtin and psi.name == "infonce" and psi.tau == tau):
        raise ValueError(
            "psi must be 'infonce' (with the same tau) for estimator='weighted' (docs/theory.md section 7); "
            f"got {psi.name!r} with params {psi.params} and tau={tau}: use estimator='sampled' for other psi"
        )
    if not psi.builtin:
        _require_torch_psi(psi, z)
    if not isinstance(detach_weights, bool):
        raise ValueError(f"detach_weights must be True or False, got {detach_weights!r}")
    if estimator == "sampled" and not detach_weights:
        raise ValueError("detach_weights must be True for estimator='sampled' (sampling is not differentiable)")
    reduction = require_choice("reduction", reduction, REDUCTIONS)
    if generator is not None and not isinstance(generator, torch.Generator):
        raise ValueError(f"generator must be a torch.Generator or None, got {type(generator).__name__}")
    if estimator == "sampled":
        if generator is None:
            raise ValueError("generator must be a torch.Generator for estimator='sampled' (randomness is explicit)")
        if generator.device.type != z.device.type:
            raise ValueError(f"generator must be on z's device type {z.device.type!r}, got {generator.device.type!r}")
    backend = require_choice("backend", backend, BACKENDS)
    if block_size is not None:
        block_size = require_int("block_size", block_size, min_value=1)
    convention = require_choice("convention", convention, CONVENTIONS)
    draws = require_choice("draws", draws, SAMPLED_DRAWS)
    if draws != "pair" and estimator != "sampled":
        raise ValueError(f"draws={draws!r} applies to estimator='sampled' only (the weighted estimator draws "
                         "nothing); use draws='pair' (the default) with estimator='weighted'")
    spec = LossSpec(
        supervised=is_supervised(setting),
        b=effective_beta(setting, beta),
        tau=tau,
        k=None if num_negatives == "batch" else num_negatives,
        detach_weights=detach_weights,
        convention=convention,
    )
    return _Request(spec, estimator, psi, reduction, generator, backend, block_size, draws)


def _require_torch_psi(psi: Psi, z: torch.Tensor) -> None:
    """A user psi must map a torch tensor t [..., k] to a torch tensor [...] on the autograd graph: it is called on the
    batch's differences S_im - S_ij. A numpy-only function (np.exp, scipy's logsumexp) fails there, or silently
    returns an array without a gradient; both are reported here, naming psi, on a probe t = 0 [2, 2]."""
    probe = torch.zeros((2, 2), dtype=z.dtype if z.dtype in (torch.float32, torch.float64) else torch.float32,
                        device=z.device, requires_grad=True)
    how = "write it with torch operations (torch.logsumexp, torch.clamp, ...), e.g. as the built-ins of ncgeom.losses.psi do"
    try:
        value = psi(probe)
    except Exception as exc:  # noqa: BLE001 - any failure of the user's function on a tensor is the same bad input
        raise ValueError(f"psi {psi.name!r} must accept torch tensors t [..., k] (batch_loss calls it on the batch's "
                         f"differences): on a tensor it raised {type(exc).__name__}: {' '.join(str(exc).split())[:160]}; "
                         f"{how}") from None
    if not isinstance(value, torch.Tensor):
        raise ValueError(f"psi {psi.name!r} must return a torch tensor for a torch input (batch_loss differentiates it), "
                         f"got {type(value).__name__}; {how}")
    if tuple(value.shape) != (2,):
        raise ValueError(f"psi {psi.name!r} must map t [..., k] to [...] (reduce the last axis), got shape "
                         f"{tuple(value.shape)} for t of shape (2, 2)")
    if not value.requires_grad:
        raise ValueError(f"psi {psi.name!r} returned a tensor detached from its input (no gradient would reach z); {how}")


def _compute(z, labels, request: _Request, *, want_indices: bool):
    spec, estimator, psi, reduction, generator, _, block_size, draws = request
    backend = select_backend(z, estimator=estimator, reduction=reduction, detach_weights=spec.detach_weights,
                             requested=request.backend, convention=spec.convention)
    size = z.shape[0]
    if backend == "blocked" and estimator == "weighted" and not want_indices:
        # no O(P) index arrays on this path (reduction "none" returns the values in canonical order)
        result = blocked_weighted(z, labels, spec, block_size=block_size or default_block_size(size),
                                  reduction=reduction)
        return result
    if backend == "triton":
        from ncgeom.losses.kernels.triton_kernel import triton_weighted  # imports triton (heavy, optional)

        return triton_weighted(z, labels, spec, block_size=block_size, reduction=reduction)
    structure = pair_structure(labels, supervised=spec.supervised, convention=spec.convention)
    negatives = None
    if estimator == "sampled":
        rows = size if backend == "dense" else (block_size or default_block_size(size))
        assert generator is not None  # _validate requires one for the sampled estimator
        values, negatives = sampled_values(z, labels, spec, structure, psi, generator=generator, block_size=rows,
                                           return_negatives=want_indices,  # no O(P k) index tensor unless asked
                                           draws=draws)
    elif backend == "dense":
        values = dense_weighted_values(z, labels, spec, structure)
    else:  # blocked, per-pair values for batch_loss_pairs
        values = blocked_weighted(z, labels, spec, block_size=block_size or default_block_size(size),
                                  reduction="none")
    if want_indices:
        return PairLosses(values, structure.anchors, structure.positives, negatives, backend)
    return _reduce(values, z, reduction)


def _reduce(values: torch.Tensor, z: torch.Tensor, reduction: str) -> torch.Tensor:
    if reduction == "none":
        return values
    if values.numel() == 0:
        return (z * 0).sum()  # zero, attached to the graph of z
    return values.mean() if reduction == "mean" else values.sum()

