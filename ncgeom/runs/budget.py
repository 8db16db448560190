"""The memory a run needs, estimated before anything is allocated and checked against the budget (ncgeom.budget).

- :func:`run_memory_estimate` / :func:`check_run_memory`: a run of a vector data set (gaussian, digits);
- :func:`image_memory_estimate` / :func:`check_image_memory`: an image run, once its data are read;
- :func:`stack_memory_bytes`: what a stack of runs needs beyond its runs' own (the stacked kernel's tiles).

Each estimate is a list of (fields, what, bytes) parts; the check names the fields of the largest part.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ncgeom.budget import metrics_bytes, require_parts_within_budget
from ncgeom.runs.config import Config
from ncgeom.vocabulary import device_type

__all__ = [
    "run_memory_estimate",
    "check_run_memory",
    "image_memory_estimate",
    "check_image_memory",
    "stack_memory_bytes",
    "EMBEDDINGS_MAX_BYTES",
]

#: Features of an image run's evaluation (N x d float64) up to this size are kept: encoded once, stored in
#: embeddings.npz (above: encoded twice per evaluation, the class means stored; ncgeom.runs.images).
EMBEDDINGS_MAX_BYTES = 64 * 2**20

# Bytes per epoch record kept in memory (metrics dict, spectrum of <= C - 1 floats counted separately).
_RECORD_BYTES = 2048


def run_memory_estimate(config: Config) -> list[tuple[str, str, int]]:
    """(fields, what, bytes) of the largest arrays of a run of a vector data set (gaussian, digits) for ``config``.

    With N = classes x samples_per_class training samples
    (digits: at most 1797), Nt test samples, D = input_dim, d = embedding dim, C = classes, B = batch_size
    (2B views with noise positives), h = hidden_dim, s = 4 or 8 bytes (dtype):

    - data: (N + Nt) D (8 + s) (numpy float64 and the torch copy);
    - model: 6 s P (weights, gradient, two Adam moments, two snapshots), P = N d (unconstrained),
      D d (linear), D h + (depth - 2) h^2 + h d (mlp); plus 8 s N h for the MLP's activations on N;
    - metrics: :func:`metrics_bytes` (float64 copies, SVD work, N x C NCC scores);
    - loss: weighted: 10 s B^2 (the B x B similarity, weight and mask matrices with their gradients);
      sampled: (P_B k (24 + 4 s) + 10 s B^2) with P_B <= B^2 positive pairs and k negatives each;
    - history: 2 KiB x epochs + 8 (C - 1) x epochs / metrics_every (records and spectra).
    """
    c = int(config.classes)
    if config.dataset == "digits":
        n, nt, dim_in = 1797, 1797, 64  # scikit-learn's digits: 1797 images of 8 x 8 pixels in all
    else:
        n, nt, dim_in = c * int(config.samples_per_class), c * int(config.test_per_class), int(config.input_dim)
    d = int(config.dim) if config.dim is not None else c - 1
    s = 8 if config.dtype == "float64" else 4
    h, depth = int(config.hidden_dim), int(config.depth)
    b = int(config.batch_size) * (2 if config.positives == "noise" else 1)
    if config.model == "unconstrained":
        params, act, model_fields = n * d, 0, "classes, samples_per_class, dim"
    elif config.model == "linear":
        params, act, model_fields = dim_in * d + d, 0, "input_dim, dim"
    else:
        params = dim_in * h + max(depth - 2, 0) * h * h + h * d if depth >= 2 else dim_in * d
        act, model_fields = 8 * s * n * h, "input_dim, hidden_dim, depth, dim"
    data_fields = "classes, samples_per_class, test_per_class, input_dim"
    out = [
        (data_fields, "the data (x_train, x_test)", (n + nt) * dim_in * (8 + s)),
        (model_fields, "the model (weights, gradient, Adam state, snapshots, activations)", 6 * s * params + act),
        ("classes, samples_per_class, dim", "the NC metrics (float64, per evaluation)",
         metrics_bytes(n, d, c)),
    ]
    square = 10 * s * b * b
    if config.estimator == "sampled":
        k = int(config.num_negatives)
        out.append(("batch_size, num_negatives", "the sampled loss (B^2 pairs x k negatives)",
                    b * b * k * (24 + 4 * s) + square))
    else:
        out.append(("batch_size", "the weighted loss (B x B matrices)", square))
    epochs = int(config.epochs)
    out.append(("epochs", "the history kept in memory",
                epochs * _RECORD_BYTES + 8 * max(c - 1, 0) * (epochs // max(int(config.metrics_every), 1) + 1)))
    return out


def check_run_memory(config: Config, *, budget: int | None = None) -> None:
    """Raise ValueError naming the fields if the estimated bytes of a run of a vector data set exceed the budget.

    The message names the fields of the largest part (the one to lower) and the total.
    """
    require_parts_within_budget(run_memory_estimate(config), what="the run", budget=budget)


# Bytes per input pixel of one training image (float32): the activations autograd saves, measured with
# torch.autograd.graph.saved_tensors_hooks on ncgeom.models.resnet at 32 x 32 and 64 x 64 (4.6, 7.8 and 25 KB for
# resnet18/34/50, parameters excluded), times 1.5 for the gradients alive during the backward pass.
_TRAIN_BYTES_PER_PIXEL = {"resnet18": 7_000, "resnet34": 12_000, "resnet50": 38_000}
# Eval (no autograd): about three live activations of the widest full-resolution stage (64 / 256 channels).
_EVAL_BYTES_PER_PIXEL = {"resnet18": 768, "resnet34": 768, "resnet50": 3_072}
# (backbone parameters, feature width F) of ncgeom.models.resnet (docs/images.md, "ResNet encoders").
_BACKBONE_PARAMS = {"resnet18": (11_168_832, 512), "resnet34": (21_276_992, 512), "resnet50": (23_500_352, 2048)}


def image_memory_estimate(config: Config, data: Any) -> list[tuple[str, str, int]]:
    """(fields, what, bytes) of the largest host allocations of an image run on ``data`` (an ImageData).

    The images held (uint8), the model (weights, gradient, two Adam moments, a snapshot and a checkpoint
    buffer: 6 s P, with P the backbone's parameters of docs/images.md plus the head's), the kept features
    (at most :data:`EMBEDDINGS_MAX_BYTES`), and on the CPU the activations of a training step (B images, 2B
    views with augment positives) and of an evaluation batch (module constants, measured). On CUDA the
    activations live on the GPU and are not counted.
    """
    held = sum(x.nbytes for x in (data.x_train, data.x_test) if isinstance(x, np.ndarray))
    first = data.x_train[0]
    pixels = int(first.shape[0] * first.shape[1])
    s = 8 if config.dtype == "float64" else 4
    backbone, feat = _BACKBONE_PARAMS[config.model]
    params = backbone + feat * 512 + 2 * 512 + 512 * config.embedding_dim + config.embedding_dim
    out = [
        ("data_dir", "the images held in memory (uint8)", int(held)),
        ("model", "the model (weights, gradient, Adam state, snapshot, checkpoint buffer)", 6 * s * params),
        ("dim", "the features of an evaluation (float64)", min(EMBEDDINGS_MAX_BYTES, data.num_train * config.embedding_dim * 8)),
    ]
    if device_type(config.device) == "cpu":
        rows = config.batch_size * (2 if config.positives == "augment" else 1)
        out.append(("batch_size, model", "the activations of a training step",
                    rows * pixels * _TRAIN_BYTES_PER_PIXEL[config.model] * s // 4))
        out.append(("eval_batch_size, model", "the activations of an evaluation batch",
                    config.eval_batch_size * pixels * _EVAL_BYTES_PER_PIXEL[config.model] * s // 4))
    return out


def check_image_memory(config: Config, data: Any) -> None:
    """Raise ValueError naming the fields if the estimated bytes of an image run on ``data`` exceed the budget."""
    require_parts_within_budget(image_memory_estimate(config, data), what="the image run")


def stack_memory_bytes(configs: Sequence[Config]) -> int:
    """Bytes of a stack beyond its runs' own (:func:`run_memory_estimate` each): the stacked kernel's tiles of at
    most 3 x 2^18 entries (B' = 2B rows with noise positives), :func:`ncgeom.losses.kernels.stacked.loss_bytes`."""
    from ncgeom.losses.kernels.stacked import loss_bytes  # imports torch (heavy): only when sizing a stack

    if not configs:
        return 0
    c = configs[0]
    rows = c.batch_size * (2 if c.positives == "noise" else 1)
    return loss_bytes(len(configs), rows, itemsize=8 if c.dtype == "float64" else 4)
