"""Train an encoder with Adam on a batch contrastive loss and record the NC/DC geometry per epoch.

``run(config)`` is the single entry point (docs/theory.md, sections 7-9):

1. the seed becomes four independent streams at this boundary (numpy.random.SeedSequence.spawn):
   data, near-NC initialization, batches (numpy Generators) and one torch.Generator shared, in a fixed
   order, by the random model weights, the sampled estimator and the noise positives; nothing global is seeded, so a run is bitwise reproducible on CPU;
   on ``device="cuda"`` the data, the initialization and the batches are the CPU run's (drawn on the CPU, then
   moved), and the sampled negatives and noise positives come from a CUDA generator (:func:`step_generator`);
2. each epoch draws ceil(N / B) class-balanced batches (``batches="shuffle"``: floor(N / B) batches of one
   permutation, ncgeom.data.batches); label positives feed the batch loss with the
   class labels (P(i) = same class); noise positives feed a two-view batch [x; x + sigma_p eps] with
   instance ids as labels (SimCLR-style);
3. after each epoch (every ``metrics_every``): every metric of docs/theory.md, section 8 on the training
   embeddings with the true labels, test NCC accuracy with the train class means, the closed-form
   NC value of the estimator being optimized, and the gap loss - nc_value.

A non-finite loss (or non-finite embeddings) stops the run: status "diverged", the state of the last
complete epoch is restored, and the record says at which epoch and step it happened. Failure modes:
norm="none" lets the features grow without bound (the loss then tends to 0, below the NC value,
docs/theory.md, section 9, claim 4); a very large lr or tiny tau can overflow float32 (use dtype="float64").
"""

from __future__ import annotations

import dataclasses
import io
import math
import time
from pathlib import Path

import numpy as np

from ncgeom.atomic_io import atomic_write_bytes
from ncgeom.budget import check_run_memory
from ncgeom.data import (
    batches_per_epoch,
    class_balanced_counts,
    epoch_batches,
    gaussian_mixture,
    load_digits_data,
    two_view_batch,
)
from ncgeom.experiments.config import Config
from ncgeom.experiments.records import SUMMARY_FILE, EpochRecord, HistoryWriter, RunStatus, save_config
from ncgeom.experiments.result import Result
from ncgeom.geometry import simplex_etf
from ncgeom.metrics import class_means, nc_metrics, ncc_accuracy
from ncgeom.provenance import provenance
from ncgeom.theory import batch_nc_value, nc_value
from ncgeom.vocabulary import PsiName, device_type

__all__ = ["run", "make_data", "run_nc_value", "seed_streams", "step_generator", "check_device", "prepare_run_dir",
           "optimizer_step", "metrics_record", "write_run_outputs"]


def make_data(config: Config, *, rng: np.random.Generator):
    """The LabeledData of a config (Gaussian mixture or digits)."""
    if config.dataset == "digits":
        return load_digits_data(num_classes=config.classes, test_fraction=config.test_fraction, rng=rng)
    return gaussian_mixture(
        config.classes, input_dim=config.input_dim, samples_per_class=config.samples_per_class,
        test_per_class=config.test_per_class, separation=config.separation, spread=config.spread,
        imbalance=config.imbalance, rng=rng,
    )


def seed_streams(seed: int):
    """The four independent streams of a run: (data rng, init rng, batch rng, torch.Generator).

    ``numpy.random.SeedSequence(seed).spawn(4)``: three numpy Generators and one torch.Generator (CPU)
    seeded from the fourth child. Every engine (:func:`run`, :func:`ncgeom.experiments.stacked.run_stack`)
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
    return data_rng, init_rng, batch_rng, generator


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


def prepare_run_dir(out_dir: str | Path | None) -> Path | None:
    """``out_dir`` as a created directory (None stays None); ValueError if a file is in the way."""
    run_dir = None if out_dir is None else Path(out_dir)
    if run_dir is not None:
        try:  # before any work: a file in the way is bad input (ValueError), not a traceback after training
            run_dir.mkdir(parents=True, exist_ok=True)
        except (FileExistsError, NotADirectoryError):
            raise ValueError(f"out_dir must be a directory (or a path to create), got {str(run_dir)!r}: a file is in the way") from None
    return run_dir


def metrics_record(z: np.ndarray, z_test: np.ndarray | None, data, epoch: int, loss: float | None,
                   nc_val: float) -> EpochRecord | None:
    """The epoch record with metrics of training embeddings ``z`` [N, d] (float64), or None if not finite.

    ``z_test`` [Nt, d] (float64) are the test embeddings (None for a model without inputs or without a
    test split); the test NCC accuracy is None when they are not finite.
    """
    if not np.isfinite(z).all():
        return None
    metrics = nc_metrics(z, data.y_train).to_dict()
    test_acc = None
    if z_test is not None and np.isfinite(z_test).all():
        test_acc = float(ncc_accuracy(z_test, data.y_test, class_means=class_means(z, data.y_train)))
    mean_norm = float(np.linalg.norm(z, axis=1).mean())
    gap = None if loss is None else loss - nc_val
    return EpochRecord(epoch, loss, nc_val, gap, test_ncc_accuracy=test_acc, mean_norm=mean_norm, metrics=metrics)


def write_run_outputs(run_dir: Path, result: Result) -> None:
    """embeddings.npz then summary.json (last: its presence marks a finished run), by atomic rename."""
    buf = io.BytesIO()
    np.savez(buf, z=result.embeddings, labels=result.labels)
    atomic_write_bytes(run_dir / "embeddings.npz", buf.getvalue())
    result.summary_record().save(run_dir)


#: Shuffled batches (``batches="shuffle"``): the NC value is the mean of the NC value of this many random
#: batches of the training labels (their class counts vary from batch to batch).
NC_SHUFFLE_BATCHES = 64


def run_nc_value(config: Config, *, labels=None) -> tuple[float, str]:
    """The closed-form loss at neural collapse for the estimator ``config`` optimizes, and its source.

    - weighted estimator, label positives: ``ncgeom.theory.batch_nc_value`` with the class counts of a
      class-balanced batch (docs/theory.md, section 7; padded with zeros to C classes); under
      ``convention="authors"`` the batch loss evaluated (float64) at that batch placed exactly at NC (the
      closed form counts the theory's pairs);
    - weighted estimator, noise (or augmentation) positives: the batch loss evaluated (float64) at an exact
      NC two-view batch (both views of a class-c sample at the ETF vertex v_c, instance ids as labels);
    - sampled estimator: ``ncgeom.theory.nc_value`` (section 5; the population collision probability
      1/C or pi_beta, which the in-batch fraction approximates for UCL/HUCL).

    With ``config.batches == "shuffle"`` a batch's class counts are random, and so is its NC value: the
    weighted estimator's value is then the mean of the above over :data:`NC_SHUFFLE_BATCHES` batches of B
    indices drawn without replacement from ``labels`` (the training labels, required) by a generator seeded
    with (config.seed, NC_SHUFFLE_BATCHES), apart from the run's own streams; the source states the
    standard error of that mean. (An epoch's mean loss at NC is the mean of its batches' NC values, whose
    expectation this estimates.)
    """
    c = config.classes
    if config.estimator == "sampled":
        from ncgeom.losses import make_psi  # imports torch (heavy): only when a run starts

        psi = make_psi(config.psi, tau=config.tau, margin=config.margin)
        assert config.num_negatives != "batch"  # Config rejects num_negatives='batch' with estimator='sampled'
        value = nc_value(config.setting, psi, num_classes=c, num_negatives=config.num_negatives,
                         beta=config.beta, tau=config.tau, margin=config.margin)
        return float(value), "nc_value (docs/theory.md, section 5, population collision probability)"
    if config.batches == "balanced":
        full = np.zeros(c, dtype=np.int64)
        counts = class_balanced_counts(c, config.batch_size)
        full[: counts.size] = counts
        value, source = _nc_at_counts(config, full)
        return value, source + ", class-balanced batch counts)"
    if labels is None:
        raise ValueError("run_nc_value needs labels= (the training labels) for batches='shuffle'")
    y = np.asarray(labels)
    if y.ndim != 1 or y.size < config.batch_size or y.min() < 0 or y.max() >= c:
        raise ValueError(f"labels must be [N] class ids in 0..{c - 1} with N >= batch_size = {config.batch_size}")
    rng = np.random.default_rng([config.seed, NC_SHUFFLE_BATCHES])
    values, source = [], ""
    for _ in range(NC_SHUFFLE_BATCHES):
        full = np.bincount(y[rng.choice(y.size, config.batch_size, replace=False)], minlength=c)
        value, source = _nc_at_counts(config, full)
        values.append(value)
    value = float(np.mean(values))
    stderr = float(np.std(values, ddof=1) / math.sqrt(len(values)))
    return value, source + f", mean over {NC_SHUFFLE_BATCHES} shuffled batches, s.e. {stderr:.2g})"


def _nc_at_counts(config: Config, counts: np.ndarray) -> tuple[float, str]:
    """(NC value, the start of its source) of the weighted estimator on a batch with ``counts`` [C] samples of
    each class (zeros allowed), by the rules of :func:`run_nc_value`; the source is closed by the caller."""
    import torch

    from ncgeom.losses import batch_loss  # imports torch (heavy): only when a run starts

    c = config.classes
    if config.positives == "label" and config.convention == "theory":
        value = batch_nc_value(config.setting, class_counts=counts, num_negatives=config.num_negatives,
                               beta=config.beta, tau=config.tau)
        return float(value), "batch_nc_value (docs/theory.md, section 7"
    y = np.repeat(np.arange(c), counts)
    z = torch.as_tensor(simplex_etf(c)[y], dtype=torch.float64)
    if config.positives == "label":
        loss = batch_loss(z, torch.as_tensor(y), config.setting, beta=config.beta, tau=config.tau,
                          num_negatives=config.num_negatives, estimator="weighted", backend="dense",
                          convention=config.convention)
        return float(loss), "batch_loss at an exact NC batch (docs/conventions.md, section 2.4"
    ids = torch.arange(y.size).repeat(2)
    loss = batch_loss(torch.cat([z, z]), ids, config.setting, beta=config.beta, tau=config.tau,
                      num_negatives=config.num_negatives, estimator="weighted", backend="dense",
                      convention=config.convention)
    return float(loss), "batch_loss at an exact NC two-view batch (docs/theory.md, section 7, instance ids"


def optimizer_step(loss, optimizer, *, epoch: int, step: int) -> tuple[float, str | None]:
    """One optimizer step on ``loss`` (zero_grad, backward, step) unless its value is not finite: (the value,
    None), or (the value, the failure message naming the epoch and step) with nothing changed."""
    value = loss.item()
    if not math.isfinite(value):
        return value, f"loss became non-finite ({value}) at epoch {epoch}, step {step}"
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()
    return value, None


def run(config: Config, *, out_dir: str | Path | None = None, progress: bool = False, resume: bool = False) -> Result:
    """Train as ``config`` says; write the run directory if ``out_dir`` is given (module docstring).

    An image data set (``config.is_image``: CIFAR-10/100, STL-10, ImageFolder) is trained by
    :func:`ncgeom.experiments.image_train.run_image` (a ResNet; checkpoints, ``resume``).

    Parameters
    ----------
    config : Config
        Validated at construction (bad values never reach training).
    out_dir : path, optional
        Run directory (created): config.json, history.jsonl, summary.json, embeddings.npz.
    progress : bool
        Show a tqdm bar over epochs (image runs: over images, with images/s).
    resume : bool
        Image runs only: continue from ``out_dir/checkpoint.pt`` (ValueError if it is missing or was made
        with another config); the synthetic runs have no checkpoints (ValueError).

    Returns
    -------
    Result
        status "completed" or "diverged" (never raises on divergence).
    """
    import torch

    from ncgeom.experiments.stacked.adam import adam  # the Adam of both engines (fused kernel)
    from ncgeom.losses import Psi, batch_loss, make_psi  # ncgeom.losses and ncgeom.models import torch
    from ncgeom.models import build_model

    if not isinstance(config, Config):
        raise ValueError(f"config must be an ncgeom.experiments.Config, got {type(config).__name__}")
    if config.is_image:
        # image_train imports this module's helpers (seed_streams, check_device, ...): a top-level import is a cycle
        from ncgeom.experiments.image_train import run_image

        return run_image(config, out_dir=out_dir, progress=progress, resume=resume)
    if resume is not False:
        raise ValueError(f"resume applies to image data sets (checkpoints), got dataset={config.dataset!r}")
    check_run_memory(config)  # before any data or model is allocated (the budget in force: ncgeom.budget)
    device = check_device(config.device)
    run_dir = prepare_run_dir(out_dir)
    start = time.perf_counter()
    data_rng, init_rng, batch_rng, init_generator = seed_streams(config.seed)
    dtype = getattr(torch, config.dtype)

    data = make_data(config, rng=data_rng)
    model = build_model(
        config.model, dim=config.embedding_dim, norm=config.norm, num_samples=data.num_train,
        input_dim=data.input_dim, labels=data.y_train, hidden_dim=config.hidden_dim, depth=config.depth,
        init=config.init, init_scale=config.init_scale, init_noise=config.init_noise,
        generator=init_generator, rng=init_rng, dtype=dtype,
    ).to(device)  # drawn on the CPU (seed_streams): the same initialization on every device
    generator = step_generator(init_generator, device)  # the CPU: init_generator itself, continued
    x_train = torch.as_tensor(data.x_train, dtype=dtype, device=device)
    x_test = torch.as_tensor(data.x_test, dtype=dtype, device=device)
    y_train = torch.as_tensor(data.y_train, device=device)
    optimizer = adam(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    nc_val, nc_source = run_nc_value(config, labels=data.y_train)
    sampled = config.estimator == "sampled"
    psi: PsiName | Psi = make_psi(config.psi, tau=config.tau, margin=config.margin) if sampled else "infonce"

    def step_loss(z: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return batch_loss(
            z, labels, config.setting, beta=config.beta, tau=config.tau, num_negatives=config.num_negatives,
            estimator=config.estimator, psi=psi, detach_weights=config.detach_weights, reduction="mean",
            generator=generator if sampled else None, backend=config.backend, convention=config.convention,
        )

    steps = batches_per_epoch(config.batches, data.num_train, config.batch_size)
    indexed = getattr(model, "takes_indices", False)
    noise = config.positives == "noise"

    def evaluate(epoch: int, loss: float | None) -> EpochRecord | None:
        return _evaluate(model, data, x_train, x_test, indexed, epoch, loss, nc_val)

    initial = evaluate(0, None)
    if initial is None:  # before any step (batch_loss would reject these embeddings at the first one)
        raise ValueError(f"the initial embeddings are not finite (init_scale={config.init_scale:g}, dtype={config.dtype})")

    history_file: HistoryWriter | None = None
    if run_dir is not None:
        (run_dir / SUMMARY_FILE).unlink(missing_ok=True)  # unlinks a planted symlink itself, not its target
        save_config(run_dir, config, provenance())
        history_file = HistoryWriter(run_dir)  # every run file is written by atomic rename

    history: list[EpochRecord] = []
    status: RunStatus = "completed"
    message = f"trained {config.epochs} epochs"
    good_state = _snapshot(model)
    last_metrics = initial
    bar = _progress(config.epochs, progress)
    try:
        for epoch in range(1, config.epochs + 1):
            batches = torch.from_numpy(epoch_batches(config.batches, data.y_train, config.batch_size,
                                                     rng=batch_rng)).to(device)
            total, failure = 0.0, None
            for s in range(steps):
                idx = batches[s]
                if noise:
                    views, labels = two_view_batch(x_train[idx], scale=config.noise_scale, generator=generator)
                    z = model(views)
                else:
                    z = model(idx) if indexed else model(x_train[idx])
                    labels = y_train[idx]
                value, failure = optimizer_step(step_loss(z, labels), optimizer, epoch=epoch, step=s + 1)
                if failure is not None:
                    break
                total += value
            record: EpochRecord | None = None
            if failure is None:
                mean_loss = total / steps
                if epoch % config.metrics_every == 0 or epoch == config.epochs:
                    record = evaluate(epoch, mean_loss)
                    if record is None:
                        failure = f"embeddings became non-finite at epoch {epoch}"
                else:
                    record = EpochRecord(epoch, mean_loss, nc_val, mean_loss - nc_val)
            if record is None:  # exactly when a failure was found (a record is made otherwise)
                model.load_state_dict(good_state)
                status, message = "diverged", f"{failure}; kept the state of the last complete epoch"
                break
            record = dataclasses.replace(record, time_s=time.perf_counter() - start)
            history.append(record)
            if record.metrics is not None:
                last_metrics = record
            good_state = _snapshot(model)
            if history_file is not None:
                history_file.append(record)
            if bar is not None:
                etf = record.value("etf_distance")
                bar.update(1)
                bar.set_postfix(loss=f"{record.loss:.4f}", gap=f"{record.gap:.2e}", etf="-" if etf is None else f"{etf:.3f}")
    finally:
        if bar is not None:
            bar.close()
    if history_file is not None:
        history_file.close()  # durable; an exception above leaves the last epoch's file (no summary: rerun)

    if history and history[-1].metrics is None:  # diverged after an epoch skipped by metrics_every
        last_metrics = evaluate(history[-1].epoch, history[-1].loss) or last_metrics
    z_final = _embed(model, x_train, indexed)
    result = Result(
        config=config, status=status, message=message, history=tuple(history), initial=initial,
        final=last_metrics, nc_value=nc_val, nc_value_source=nc_source, embeddings=z_final, labels=data.y_train.copy(),
        wall_time_s=time.perf_counter() - start,
    )
    if run_dir is not None:
        write_run_outputs(run_dir, result)
    return result


def _embed(model, x, indexed) -> np.ndarray:
    import torch

    with torch.no_grad():
        z = model() if indexed else model(x)
    return z.detach().to("cpu", torch.float64).numpy()


def _evaluate(model, data, x_train, x_test, indexed, epoch, loss, nc_val) -> EpochRecord | None:
    """The epoch record with metrics, or None if the embeddings are not finite."""
    import torch

    z = _embed(model, x_train, indexed)
    if not np.isfinite(z).all():
        return None
    z_test = None
    if not indexed and data.y_test.size:
        with torch.no_grad():
            z_test = model(x_test).to("cpu", torch.float64).numpy()
    return metrics_record(z, z_test, data, epoch, loss, nc_val)


def _snapshot(model) -> dict:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def _progress(total: int, enabled: bool):
    if not enabled:
        return None
    from tqdm import tqdm

    return tqdm(total=total, unit="epoch", leave=False)
