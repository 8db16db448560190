"""What a run sets up before its first step: seed streams, device, data, the encoder of a vector data set, the loss.

Every driver (:mod:`ncgeom.runs.single`, :mod:`ncgeom.runs.images`, :mod:`ncgeom.runs.stacked`) sets a run up
from these, so a run sees the same draws whichever driver trains it (docs/theory.md, sections 7-9):

- :func:`seed_streams`: the seed becomes four independent streams at this boundary (data, initialization,
  batches, and one torch.Generator for the model's weights, the sampled negatives and the noise positives);
  nothing global is seeded;
- :func:`check_device`, :func:`step_generator`: the torch device of a run and the generator of its per-step draws;
- :func:`check_backend`: the loss backend a config names is available for its device and dtype (checked with the
  device, before a run, a stack or a sweep writes anything);
- :func:`make_data`, :func:`vector_model`: the data and the encoder of a vector data set (gaussian, digits);
- :func:`prepared_loss`: the batch loss of a config, a function of (z, labels): :func:`ncgeom.losses.batch_loss`
  with the config's setting, hardness, temperature, estimator, psi, backend and convention.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from ncgeom.data import LabeledData, gaussian_mixture, load_digits_data
from ncgeom.runs.config import Config
from ncgeom.vocabulary import device_type

__all__ = ["Streams", "seed_streams", "step_generator", "check_device", "check_backend", "make_data", "vector_model",
           "prepared_loss", "torch_dtype", "probe_batches", "probe_generator", "probe_seed", "PROBE_STREAM",
           "random_reference_model"]

#: The key that separates a run's probe stream from its four training streams (numpy.random.default_rng([seed, key])).
PROBE_STREAM = 0x50524F42


class Streams(NamedTuple):
    """The four independent random streams of a run (:func:`seed_streams`)."""

    data: np.random.Generator
    init: np.random.Generator
    batch: np.random.Generator
    torch: Any  # torch.Generator (CPU)


def seed_streams(seed: int) -> Streams:
    """The four independent streams of a run: (data rng, init rng, batch rng, torch.Generator).

    ``numpy.random.SeedSequence(seed).spawn(4)``: three numpy Generators and one torch.Generator (CPU)
    seeded from the fourth child. Every driver (:mod:`ncgeom.runs.single`, :mod:`ncgeom.runs.stacked`,
    :mod:`ncgeom.runs.images`)
    draws a run's data, initialization, batch order, noise positives and sampled negatives from these
    streams only, so a run does not depend on which engine trains it or next to which other runs.
    The torch.Generator is on the CPU whatever the run's device: it draws the random model weights, so a
    run starts from the same parameters on every device; its per-step draws come from
    :func:`step_generator`.
    """
    import torch

    seq = np.random.SeedSequence(seed).spawn(4)
    data_rng, init_rng, batch_rng = (np.random.default_rng(s) for s in seq[:3])
    generator = torch.Generator().manual_seed(int(seq[3].generate_state(1, np.uint64)[0] >> np.uint64(1)))
    return Streams(data_rng, init_rng, batch_rng, generator)


def step_generator(generator, device):
    """The torch.Generator of a run's per-step draws (sampled negatives, noise positives) on ``device``.

    On the CPU, ``generator`` itself (the fourth stream of :func:`seed_streams`, continued after the model's
    initialization: the CPU draws are those of every earlier version). On CUDA, a generator on that device
    seeded with ``generator.initial_seed()``: CUDA's Philox generator, so the negatives and the noise of a
    CUDA run differ from the CPU run's (docs/experiments.md, "Devices"); bitwise reproducible on one device.
    """
    import torch

    device = torch.device(device)
    if device.type == "cpu":
        return generator
    return torch.Generator(device=device).manual_seed(generator.initial_seed())


def check_device(device: str):
    """The torch.device of a Config's ``device``, refused (ValueError naming --device) where it does not exist.

    "cpu" always exists; "cuda" needs ``torch.cuda.is_available()``; "cuda:N" needs N < the CUDA device count.
    Checked where a run, a stack or a sweep starts, before any data is drawn.
    """
    import torch

    kind = device_type(device, name="device")
    if kind == "cpu":
        return torch.device("cpu")
    if not torch.cuda.is_available():
        raise ValueError(f"--device {device}: CUDA is not available on this machine "
                         "(torch.cuda.is_available() is False); use --device cpu")
    dev = torch.device(device)
    count = torch.cuda.device_count()
    if dev.index is not None and dev.index >= count:
        raise ValueError(f"--device {device}: this machine has {count} CUDA device(s), cuda:0 to cuda:{count - 1}")
    return dev


def check_backend(config: Config, device) -> None:
    """``config.backend`` is available for a run of ``config`` on ``device`` (a torch.device), or ValueError naming
    --backend and why not (exit 2 from the CLI, before anything is written).

    "auto", "dense" and "blocked" run everywhere. "triton" needs CUDA (or Triton's interpreter,
    ``TRITON_INTERPRET=1``), the triton package, the weighted estimator, the theory's convention, float32 or float64
    and d <= 256: :func:`ncgeom.losses.batch.select_backend`'s own rule, asked with an empty batch of the run's
    device, dtype and d. A run used to find out at its first step, after config.json and history.jsonl were
    written; a stack used to train such a run with its own kernel, which ignores the backend.
    """
    if config.backend != "triton":
        return
    import torch

    from ncgeom.losses.batch import select_backend  # imports torch (heavy): only for a triton run

    probe = torch.empty((0, config.embedding_dim), dtype=torch_dtype(config), device=device)
    try:
        select_backend(probe, estimator=config.estimator, reduction="mean", detach_weights=config.detach_weights,
                       requested="triton", convention=config.convention)
    except ValueError as exc:
        reason = str(exc).split(": ", 1)[-1]
        raise ValueError(f"--backend triton: not available for this run on {device} ({config.dtype}): {reason}; "
                         "use --backend auto, blocked or dense") from None


def make_data(config: Config, *, rng: np.random.Generator) -> LabeledData:
    """The LabeledData of a config (Gaussian mixture or digits)."""
    if config.dataset == "digits":
        return load_digits_data(num_classes=config.classes, test_fraction=config.test_fraction, rng=rng)
    return gaussian_mixture(
        config.classes, input_dim=config.input_dim, samples_per_class=config.samples_per_class,
        test_per_class=config.test_per_class, separation=config.separation, spread=config.spread,
        imbalance=config.imbalance, rng=rng,
    )


def torch_dtype(config: Config):
    """The torch dtype of a config's training (``config.dtype``: float32 or float64)."""
    import torch

    return getattr(torch, config.dtype)


def vector_model(config: Config, data: LabeledData, streams: Streams):
    """The encoder of a vector-data config, on the CPU, drawn from the run's streams (:func:`ncgeom.models.build_model`:
    random weights from the torch stream, the near-NC ETF from the init stream); the same whichever driver trains it."""
    from ncgeom.models import build_model  # imports torch (heavy): only when a run starts

    return build_model(
        config.model, dim=config.embedding_dim, norm=config.norm, num_samples=data.num_train,
        input_dim=data.input_dim, labels=data.y_train, hidden_dim=config.hidden_dim, depth=config.depth,
        init=config.init, init_scale=config.init_scale, init_noise=config.init_noise,
        generator=streams.torch, rng=streams.init, dtype=torch_dtype(config),
    )


def prepared_loss(config: Config, generator) -> Callable[[Any, Any], Any]:
    """The batch loss a run of ``config`` minimizes, as a function (z [B, d], labels [B]) -> its mean (a 0-d tensor).

    :func:`ncgeom.losses.batch_loss` with the config's setting, beta, tau, k, estimator, detach_weights, backend and
    convention; the sampled estimator draws its negatives from ``generator`` with the config's psi (the weighted
    estimator is InfoNCE). The drivers check the backend first (:func:`check_backend`), before a run writes anything.
    """
    from ncgeom.losses import Psi, batch_loss, make_psi  # imports torch (heavy): only when a run starts
    from ncgeom.vocabulary import PsiName

    sampled = config.estimator == "sampled"
    psi: PsiName | Psi = make_psi(config.psi, tau=config.tau, margin=config.margin) if sampled else "infonce"
    draws = generator if sampled else None

    def loss(z, labels):
        return batch_loss(
            z, labels, config.setting, beta=config.beta, tau=config.tau, num_negatives=config.num_negatives,
            estimator=config.estimator, psi=psi, detach_weights=config.detach_weights, reduction="mean",
            generator=draws, backend=config.backend, convention=config.convention,
        )

    return loss


def probe_batches(config: Config, labels: np.ndarray, *, limit: int) -> np.ndarray:
    """The probe batches of a run [K, B] (K = min(limit, batches per epoch)): drawn once by the run's own batch
    sampler (:func:`ncgeom.data.epoch_batches`) from ``numpy.random.default_rng([seed, PROBE_STREAM])``, a stream
    apart from the four training streams, so probing draws nothing from them (ncgeom.runs.convergence)."""
    from ncgeom.data import epoch_batches

    rng = np.random.default_rng([config.seed, PROBE_STREAM])
    return epoch_batches(config.batches, labels, config.batch_size, rng=rng)[:limit]


def probe_generator(config: Config, device):
    """A torch.Generator on ``device`` for the probe's draws (sampled negatives, noise positives, augmentations),
    apart from the run's step generator; the drivers reseed it with :func:`probe_seed` before every probe, so the
    probe objective is one fixed function of the parameters."""
    import torch

    return torch.Generator(device=torch.device(device)).manual_seed(probe_seed(config))


def probe_seed(config: Config) -> int:
    """The seed of a run's probe generator (from ``config.seed`` and :data:`PROBE_STREAM`)."""
    seq = np.random.SeedSequence([config.seed, PROBE_STREAM])
    return int(seq.generate_state(1, np.uint64)[0] >> np.uint64(1))


def random_reference_model(config: Config, data: LabeledData):
    """The encoder a run of ``config`` would start from with a random initialization (``init="random"``, drawn from
    fresh streams of the same seed, so the run's own streams are untouched): the scale of the gradient far from any
    fixed point, against which a run started near NC (``init="near_nc"``) measures its gradient ratio
    (:mod:`ncgeom.runs.convergence`)."""
    return vector_model(config.replace(init="random"), data, seed_streams(config.seed))
