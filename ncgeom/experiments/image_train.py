"""Training on image data sets: a ResNet encoder on CIFAR-10/100, STL-10 or an ImageFolder tree.

:func:`ncgeom.experiments.train.run` calls :func:`run_image` when ``config.dataset`` is one of
``IMAGE_DATASETS`` (docs/images.md; docs/experiments.md, "Image data sets"). The run is the synthetic one
with images in place of vectors, and writes the same files (config.json with provenance, history.jsonl,
summary.json, embeddings.npz) plus checkpoint.pt:

1. the data are read from ``config.data_dir`` (:func:`read_image_data`); the class count must equal
   ``config.classes`` (ncgeom train fills it in from the data when ``--classes`` is not given). An
   ImageFolder tree whose pixels exceed :data:`EAGER_MAX_BYTES` is decoded batch by batch, by ``workers``
   processes; everything else is held in memory as uint8;
2. the seed becomes the four streams of :func:`~ncgeom.experiments.train.seed_streams`: the torch stream
   draws the ResNet's weights (:class:`ncgeom.resnet.ResNetEncoder`, the authors' MLP head), then the
   augmentations; the batch stream draws each epoch's ceil(N / B) class-balanced batches (or floor(N / B) shuffled ones);
3. a step converts its batch to float (uint8 / 255, per batch: the data set is never held as float) and
   standardizes it (:func:`ncgeom.data.augment.standardize`). ``positives="label"``: the B images with their
   class labels (SCL/HSCL/UCL/HUCL as for the synthetic runs; docs/theory.md, section 3). ``positives=
   "augment"``: two SimCLR views of each image (:func:`ncgeom.data.augment.two_views`) labelled by instance
   ids, as noise positives are. Adam on :func:`ncgeom.losses.batch_loss` with the setting's negative law,
   estimator and convention; ``precision="bf16"`` autocasts the ResNet's forward to bfloat16 on CUDA (the
   loss takes the features in float32);
4. every ``metrics_every`` epochs and at the last, in eval mode (batch-norm running statistics) and
   without augmentation: the metrics of docs/theory.md, section 8 of the training features by
   :func:`ncgeom.metrics.streaming_nc_metrics` (``eval_batch_size`` images per forward pass), and the test
   NCC accuracy with the train class means by :func:`ncgeom.metrics.streaming_ncc_accuracy`.

Memory. The features of an evaluation are kept (and passed twice to the streaming metrics) when N x d x 8
bytes <= :data:`EMBEDDINGS_MAX_BYTES` (64 MiB); above that the training images are encoded twice per
evaluation and never stored. embeddings.npz follows the same rule: the final training features ``z`` [N, d]
with their labels when they fit, else the class means ``z`` [C, d] with ``labels`` = 0..C-1.

Checkpoints. ``checkpoint.pt`` in the run directory, every ``checkpoint_every`` epochs and at the end of a
completed run: the model's and the optimizer's state dicts, the epoch, the history so far, and every random
state (numpy bit generators as JSON-able dicts, torch generators as uint8 tensors). It is written by atomic
rename and read with ``torch.load(weights_only=True)`` only (plain tensors and containers; nothing is
unpickled as code). ``run(config, out_dir=DIR, resume=True)`` (``ncgeom train --resume``) continues from it:
on the CPU, a run of E epochs equals a run of e epochs resumed to E, bitwise. A checkpoint made with another
config is refused, naming the differing fields; only :data:`RESUMABLE_FIELDS` may change.
"""

from __future__ import annotations

import dataclasses
import io
import time
from collections.abc import Iterator
from contextlib import nullcontext
from pathlib import Path
from typing import Any, cast

import numpy as np

from ncgeom.atomic_io import atomic_write_bytes
from ncgeom.budget import format_bytes, memory_budget
from ncgeom.data import batches_per_epoch, check_batches, epoch_batches
from ncgeom.data.images import ImageData, ImageFolderIndex, load_image_data
from ncgeom.experiments.config import Config, config_from_dict
from ncgeom.experiments.records import SUMMARY_FILE, EpochRecord, HistoryWriter, RunStatus, save_config
from ncgeom.experiments.result import Result
from ncgeom.experiments.train import (
    check_device,
    optimizer_step,
    prepare_run_dir,
    run_nc_value,
    seed_streams,
    step_generator,
    write_run_outputs,
)
from ncgeom.metrics.streaming import accumulate_moments, streaming_nc_metrics, streaming_ncc_accuracy
from ncgeom.provenance import provenance
from ncgeom.vocabulary import IMAGE_DATASETS, ImageDataset, PsiName, device_type

__all__ = [
    "run_image",
    "read_image_data",
    "image_class_count",
    "image_memory_estimate",
    "save_checkpoint",
    "load_checkpoint",
    "CHECKPOINT_FILE",
    "CHECKPOINT_FORMAT",
    "RESUMABLE_FIELDS",
    "EAGER_MAX_BYTES",
    "EMBEDDINGS_MAX_BYTES",
]

CHECKPOINT_FILE = "checkpoint.pt"
CHECKPOINT_FORMAT = 1
#: Config fields a resumed run may change: the length of the run and how it is observed, not its training.
RESUMABLE_FIELDS: frozenset[str] = frozenset({"epochs", "checkpoint_every", "metrics_every", "workers", "eval_batch_size"})
#: An ImageFolder split with more uint8 pixels than this is decoded batch by batch (ncgeom.data.images' default).
EAGER_MAX_BYTES = 2**30
#: Features of an evaluation (N x d float64) up to this size are kept: encoded once, stored in embeddings.npz.
EMBEDDINGS_MAX_BYTES = 64 * 2**20

# Bytes per input pixel of one training image (float32): the activations autograd saves, measured with
# torch.autograd.graph.saved_tensors_hooks on ncgeom.resnet at 32 x 32 and 64 x 64 (4.6, 7.8 and 25 KB for
# resnet18/34/50, parameters excluded), times 1.5 for the gradients alive during the backward pass.
_TRAIN_BYTES_PER_PIXEL = {"resnet18": 7_000, "resnet34": 12_000, "resnet50": 38_000}
# Eval (no autograd): about three live activations of the widest full-resolution stage (64 / 256 channels).
_EVAL_BYTES_PER_PIXEL = {"resnet18": 768, "resnet34": 768, "resnet50": 3_072}
# (backbone parameters, feature width F) of ncgeom.resnet (docs/images.md, "ResNet encoders").
_BACKBONE_PARAMS = {"resnet18": (11_168_832, 512), "resnet34": (21_276_992, 512), "resnet50": (23_500_352, 2048)}
_CHECKPOINT_KEYS = frozenset({"format", "config", "epoch", "model", "optimizer", "history", "initial", "elapsed_s", "rng"})


class _NonFinite(Exception):
    """An evaluation met non-finite features (the run then stops as diverged)."""


# --- data ---------------------------------------------------------------------------------------------
def image_class_count(dataset: str, data_dir: str | Path) -> int:
    """The number of classes of an image data set: 10 / 100 for CIFAR and STL-10, the class folders of an
    ImageFolder tree (its ``train/`` sub-folders, listed without decoding any image)."""
    if dataset == "imagefolder":
        return load_image_data("imagefolder", Path(data_dir).expanduser(), lazy=True).num_classes
    if dataset in IMAGE_DATASETS:
        return 100 if dataset == "cifar100" else 10
    raise ValueError(f"dataset must be one of {', '.join(IMAGE_DATASETS)}, got {dataset!r}")


def read_image_data(config: Config) -> ImageData:
    """The ImageData of ``config`` (uint8 in memory, or an ImageFolderIndex per split above EAGER_MAX_BYTES).

    ValueError (one line naming the file) for a missing folder, a wrong layout, a corrupt file, or a class
    count other than ``config.classes``.
    """
    if not config.is_image or config.data_dir is None:
        raise ValueError(f"config.dataset must be an image data set with a data_dir, got {config.dataset!r}")
    root = Path(config.data_dir).expanduser()
    if config.dataset == "imagefolder":
        data = load_image_data("imagefolder", root, lazy=True)
        data = dataclasses.replace(data, x_train=_eager_if_small(data.x_train), x_test=_eager_if_small(data.x_test))
    else:
        data = load_image_data(cast(ImageDataset, config.dataset), root)
    if data.num_classes != config.classes:
        raise ValueError(f"classes: {root} holds {data.num_classes} classes, the config says {config.classes} "
                         f"(pass --classes {data.num_classes}, or leave --classes out for ncgeom train to read it)")
    return data


def _eager_if_small(index) -> np.ndarray | ImageFolderIndex:
    if not isinstance(index, ImageFolderIndex) or len(index) == 0:
        return index
    first = index[0]
    return index.load(np.arange(len(index))) if len(index) * first.nbytes <= EAGER_MAX_BYTES else index


def image_memory_estimate(config: Config, data: ImageData) -> list[tuple[str, str, int]]:
    """(fields, what, bytes) of the largest host allocations of an image run (the budget of ncgeom.budget).

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


def _check_memory(config: Config, data: ImageData) -> None:
    parts = image_memory_estimate(config, data)
    total = sum(p[2] for p in parts)
    limit = memory_budget()
    if total > limit:
        fields, what, nbytes = max(parts, key=lambda p: p[2])
        raise ValueError(f"{fields}: the image run needs about {format_bytes(total)} ({what}: {format_bytes(nbytes)}), "
                         f"above the memory budget of {format_bytes(limit)}; lower {fields} or raise the budget with "
                         "--max-memory SIZE or NCGEOM_MAX_MEMORY=SIZE")


# --- checkpoints ------------------------------------------------------------------------------------------
def save_checkpoint(path: str | Path, *, config: Config, epoch: int, model, optimizer, history, initial: EpochRecord,
                    elapsed_s: float, rng: dict[str, Any]) -> Path:
    """Write ``path`` (checkpoint.pt) atomically: a BytesIO of ``torch.save`` renamed into place.

    ``rng``: ``{"data", "init", "batch"}`` numpy bit generator states (dicts of ints and strings),
    ``"torch"`` and ``"step"`` torch generator states (uint8 tensors; ``"step"`` None when the per-step
    generator is the torch stream itself, as on the CPU).
    """
    import torch

    payload = {
        "format": CHECKPOINT_FORMAT,
        "config": config.to_dict(),
        "epoch": int(epoch),
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict(),
        "history": [r.to_dict() for r in history],
        "initial": initial.to_dict(),
        "elapsed_s": float(elapsed_s),
        "rng": rng,
    }
    buffer = io.BytesIO()
    torch.save(payload, buffer)
    return atomic_write_bytes(Path(path), buffer.getvalue())


def load_checkpoint(path: str | Path, config: Config) -> dict[str, Any]:
    """The checkpoint at ``path`` for resuming ``config``, read with ``torch.load(weights_only=True)``.

    ValueError naming the file when it is missing, unreadable, of another structure, made with a config
    that differs outside :data:`RESUMABLE_FIELDS` (the differing fields are listed), or further than
    ``config.epochs``.
    """
    import pickle

    import torch

    path = Path(path)
    if not path.is_file():
        raise ValueError(f"{path}: no checkpoint to resume from (an image run writes one at its end and every "
                         "checkpoint_every epochs)")
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except (pickle.UnpicklingError, RuntimeError, EOFError, OSError, ValueError, KeyError) as exc:
        raise ValueError(f"{path}: not a readable checkpoint ({type(exc).__name__}: {' '.join(str(exc).split())[:200]})") from None
    if not isinstance(payload, dict) or set(payload) != _CHECKPOINT_KEYS or payload["format"] != CHECKPOINT_FORMAT:
        keys = sorted(map(str, payload)) if isinstance(payload, dict) else type(payload).__name__
        raise ValueError(f"{path}: not an ncgeom checkpoint of format {CHECKPOINT_FORMAT} (found {keys})")
    try:
        saved = config_from_dict(payload["config"])
    except (ValueError, TypeError) as exc:
        raise ValueError(f"{path}: its config is not valid ({' '.join(str(exc).split())})") from None
    ours, theirs = _all_fields(config), _all_fields(saved)
    differ = [f"{k} = {theirs[k]!r} in the checkpoint, {ours[k]!r} now" for k in ours
              if ours[k] != theirs[k] and k not in RESUMABLE_FIELDS]
    if differ:
        raise ValueError(f"{path}: the checkpoint was made with another config ({'; '.join(differ)}); only "
                         f"{', '.join(sorted(RESUMABLE_FIELDS))} may change on resume")
    if payload["epoch"] > config.epochs:
        raise ValueError(f"epochs: the checkpoint {path} is at epoch {payload['epoch']}, beyond epochs={config.epochs}")
    return payload


def _all_fields(config: Config) -> dict[str, Any]:
    return {f.name: getattr(config, f.name) for f in dataclasses.fields(config)}


def _rng_states(data_rng, init_rng, batch_rng, torch_generator, step) -> dict[str, Any]:
    return {"data": data_rng.bit_generator.state, "init": init_rng.bit_generator.state,
            "batch": batch_rng.bit_generator.state, "torch": torch_generator.get_state(),
            "step": None if step is torch_generator else step.get_state()}


def _restore_rng(states: dict[str, Any], data_rng, init_rng, batch_rng, torch_generator, step) -> None:
    data_rng.bit_generator.state = states["data"]
    init_rng.bit_generator.state = states["init"]
    batch_rng.bit_generator.state = states["batch"]
    torch_generator.set_state(states["torch"])
    if step is not torch_generator:
        step.set_state(states["step"])


# --- batches -------------------------------------------------------------------------------------------------
class _BatchReader:
    """Map-style dataset for torch's DataLoader: item s = the uint8 images of row s of ``rows`` (a lazy split)."""

    def __init__(self, source: ImageFolderIndex, rows: list[np.ndarray]):
        self.source = source
        self.rows = rows

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, s: int) -> np.ndarray:
        return self.source.load(self.rows[s])


def _image_batches(source, rows: list[np.ndarray], workers: int) -> Iterator[np.ndarray]:
    """uint8 [b, H, W, 3] images of each index array of ``rows``, in order; a lazy split decoded by ``workers``."""
    if isinstance(source, np.ndarray):
        for r in rows:
            yield source[r]
        return
    if workers == 0:
        for r in rows:
            yield source.load(r)
        return
    from torch.utils.data import DataLoader

    reader: Any = _BatchReader(source, rows)  # a map-style dataset (__len__, __getitem__)
    collate: Any = _as_is
    loader: Any = DataLoader(reader, batch_size=None, shuffle=False, num_workers=workers,
                             multiprocessing_context="spawn", collate_fn=collate)
    yield from loader


def _as_is(images: np.ndarray) -> np.ndarray:
    """The DataLoader's collate function: the decoded batch unchanged (module level: spawn pickles it)."""
    return images


def _chunks(n: int, size: int) -> list[np.ndarray]:
    return [np.arange(a, min(a + size, n)) for a in range(0, n, size)]


# --- the run -----------------------------------------------------------------------------------------------
def run_image(config: Config, *, out_dir: str | Path | None = None, progress: bool = False,
              resume: bool = False) -> Result:
    """Train a ResNet on ``config``'s image data set (module docstring); the run directory as the synthetic runs.

    Parameters
    ----------
    config : Config
        ``config.is_image``.
    out_dir : path, optional
        Run directory: config.json, history.jsonl, summary.json, embeddings.npz, checkpoint.pt.
    progress : bool
        A tqdm bar of the images trained (images/s).
    resume : bool
        Continue from ``out_dir/checkpoint.pt`` (ValueError if it is missing or from another config).

    Returns
    -------
    Result
        status "completed" or "diverged"; ``embeddings`` are the final training features [N, d] or, above
        :data:`EMBEDDINGS_MAX_BYTES`, the class means [C, d] (``labels`` then 0..C-1).
    """
    import torch

    from ncgeom.data.augment import standardize, to_float_images, two_views  # torch: only when a run starts
    from ncgeom.experiments.stacked.adam import adam
    from ncgeom.losses import Psi, batch_loss, make_psi
    from ncgeom.models import build_model

    if not isinstance(config, Config) or not config.is_image:
        raise ValueError("config must be an ncgeom.experiments.Config of an image data set")
    device = check_device(config.device)
    if resume and out_dir is None:
        raise ValueError("resume needs out_dir, the run directory that holds checkpoint.pt")
    checkpoint = load_checkpoint(Path(out_dir) / CHECKPOINT_FILE, config) if resume and out_dir is not None else None
    start = time.perf_counter() - (checkpoint["elapsed_s"] if checkpoint is not None else 0.0)

    data = read_image_data(config)  # bad data is reported before the run directory is made
    check_batches(config.batches, data.y_train, config.batch_size)  # before the run directory is made
    _check_memory(config, data)
    run_dir = prepare_run_dir(out_dir)
    data_rng, init_rng, batch_rng, init_generator = seed_streams(config.seed)
    dtype = getattr(torch, config.dtype)
    model = build_model(config.model, dim=config.embedding_dim, norm=config.norm, generator=init_generator,
                        dtype=dtype).to(device)  # drawn on the CPU (seed_streams): the same weights on every device
    generator = step_generator(init_generator, device)
    optimizer = adam(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    nc_val, nc_source = run_nc_value(config, labels=data.y_train)
    sampled = config.estimator == "sampled"
    psi: PsiName | Psi = make_psi(config.psi, tau=config.tau, margin=config.margin) if sampled else "infonce"
    augment = config.positives == "augment"
    autocast = (lambda: torch.autocast(device_type="cuda", dtype=torch.bfloat16)) if config.precision == "bf16" \
        else nullcontext
    y_train = torch.as_tensor(data.y_train, device=device)
    n, b, c = data.num_train, config.batch_size, config.classes
    steps = batches_per_epoch(config.batches, n, b)

    def inputs(images: np.ndarray) -> torch.Tensor:
        """uint8 [b, H, W, 3] -> the device's uint8 [b, 3, H, W]."""
        return torch.from_numpy(np.ascontiguousarray(images)).to(device).permute(0, 3, 1, 2).contiguous()

    def encode(x: torch.Tensor) -> torch.Tensor:
        """Features of float images in [0, 1]: standardized, through the ResNet, in float32/64 for the loss."""
        with autocast():
            z = model(standardize(x.to(dtype)))
        return z.to(dtype)

    def features(source, rows: list[np.ndarray]) -> Iterator[np.ndarray]:
        """float64 features of ``rows`` of a split (eval mode, no autograd); _NonFinite if any is not finite."""
        with torch.no_grad():
            for images in _image_batches(source, rows, config.workers):
                z = encode(to_float_images(inputs(images))).to("cpu", torch.float64).numpy()
                if not np.isfinite(z).all():
                    raise _NonFinite
                yield z

    def evaluate(epoch: int, loss: float | None) -> tuple[EpochRecord, np.ndarray, np.ndarray] | None:
        """(record, final embeddings, their labels) of the current model, or None if a feature is not finite."""
        rows = _chunks(n, config.eval_batch_size)
        model.eval()
        try:
            if n * config.embedding_dim * 8 <= EMBEDDINGS_MAX_BYTES:
                z = np.concatenate(list(features(data.x_train, rows)))
                train: Any = [(z[r], data.y_train[r]) for r in rows]
            else:
                z = None
                train = lambda: zip(features(data.x_train, rows), (data.y_train[r] for r in rows))  # noqa: E731
            moments = accumulate_moments(train, num_classes=c)
            metrics = streaming_nc_metrics(train, num_classes=c, moments=moments)
            test_acc = None
            if data.y_test.size:
                test_rows = _chunks(data.y_test.size, config.eval_batch_size)
                test = zip(features(data.x_test, test_rows), (data.y_test[r] for r in test_rows))
                test_acc = float(streaming_ncc_accuracy(test, moments.class_means()))
        except _NonFinite:
            return None
        finally:
            model.train()
        record = EpochRecord(epoch, loss, nc_val, None if loss is None else loss - nc_val, test_ncc_accuracy=test_acc,
                             mean_norm=moments.mean_norm, metrics=metrics.to_dict())
        if z is None:
            return record, moments.class_means(), np.arange(c, dtype=np.int64)
        return record, z, data.y_train.copy()

    def step_loss(z: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return batch_loss(
            z, labels, config.setting, beta=config.beta, tau=config.tau, num_negatives=config.num_negatives,
            estimator=config.estimator, psi=psi, detach_weights=config.detach_weights, reduction="mean",
            generator=generator if sampled else None, backend=config.backend, convention=config.convention,
        )

    history: list[EpochRecord] = []
    last_eval: tuple[EpochRecord, np.ndarray, np.ndarray] | None = None
    if checkpoint is not None:
        model.load_state_dict(checkpoint["model"])
        optimizer.load_state_dict(checkpoint["optimizer"])
        _restore_rng(checkpoint["rng"], data_rng, init_rng, batch_rng, init_generator, generator)
        history = [EpochRecord.from_dict(r) for r in checkpoint["history"]]
        initial = EpochRecord.from_dict(checkpoint["initial"])
    else:
        last_eval = evaluate(0, None)
        if last_eval is None:
            raise ValueError(f"the initial features are not finite (dtype={config.dtype}, precision={config.precision})")
        initial = last_eval[0]
    done = history[-1].epoch if history else 0

    history_file: HistoryWriter | None = None
    if run_dir is not None:
        (run_dir / SUMMARY_FILE).unlink(missing_ok=True)  # unlinks a planted symlink itself, not its target
        save_config(run_dir, config, provenance())
        history_file = HistoryWriter(run_dir)
        for earlier in history:
            history_file.append(earlier, write=False)

    def checkpoint_now(epoch: int) -> None:
        if run_dir is not None:
            save_checkpoint(run_dir / CHECKPOINT_FILE, config=config, epoch=epoch, model=model, optimizer=optimizer,
                            history=history, initial=initial, elapsed_s=time.perf_counter() - start,
                            rng=_rng_states(data_rng, init_rng, batch_rng, init_generator, generator))

    status: RunStatus = "completed"
    message = f"trained {config.epochs} epochs" + (f" (resumed at epoch {done})" if checkpoint is not None else "")
    good_state = {k: v.detach().clone() for k, v in model.state_dict().items()}
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=(config.epochs - done) * steps * b, unit="img", unit_scale=True, leave=False)
    model.train()
    try:
        for epoch in range(done + 1, config.epochs + 1):
            batches = epoch_batches(config.batches, data.y_train, b, rng=batch_rng)
            rows = list(batches)
            total, failure = 0.0, None
            for s, images in enumerate(_image_batches(data.x_train, rows, config.workers)):
                x = inputs(images)
                if augment:
                    first, second = two_views(x, generator=generator)
                    z = encode(torch.cat([first, second]))
                    labels = torch.arange(x.shape[0], device=device).repeat(2)
                else:
                    z = encode(to_float_images(x))
                    labels = y_train[torch.from_numpy(rows[s]).to(device)]
                value, failure = optimizer_step(step_loss(z, labels), optimizer, epoch=epoch, step=s + 1)
                if failure is not None:
                    break
                total += value
                if bar is not None:
                    bar.update(x.shape[0])
                    bar.set_postfix(epoch=epoch, loss=f"{value:.4f}")
            record: EpochRecord | None = None
            if failure is None:
                mean_loss = total / steps
                if epoch % config.metrics_every == 0 or epoch == config.epochs:
                    last_eval = evaluate(epoch, mean_loss)
                    if last_eval is None:
                        failure = f"features became non-finite at epoch {epoch}"
                    else:
                        record = last_eval[0]
                else:
                    record = EpochRecord(epoch, mean_loss, nc_val, mean_loss - nc_val)
            if record is None:  # exactly when a failure was found
                model.load_state_dict(good_state)
                status, message = "diverged", f"{failure}; kept the state of the last complete epoch"
                last_eval = None
                break
            record = dataclasses.replace(record, time_s=time.perf_counter() - start)
            history.append(record)
            good_state = {k: v.detach().clone() for k, v in model.state_dict().items()}
            if history_file is not None:
                history_file.append(record)
            if config.checkpoint_every and epoch % config.checkpoint_every == 0 and epoch < config.epochs:
                checkpoint_now(epoch)
    finally:
        if bar is not None:
            bar.close()
    if history_file is not None:
        history_file.close()

    final_epoch = history[-1].epoch if history else 0
    if last_eval is None or last_eval[0].epoch != final_epoch:  # diverged, or resumed with nothing left to train
        last_eval = evaluate(final_epoch, history[-1].loss if history else None)
        if last_eval is None:
            raise ValueError(f"the features of epoch {final_epoch} are not finite")
    with_metrics = [r for r in history if r.metrics is not None]
    final = with_metrics[-1] if with_metrics and with_metrics[-1].epoch == final_epoch else last_eval[0]
    if not history:
        final = initial
    if status == "completed":
        checkpoint_now(final_epoch)
    result = Result(
        config=config, status=status, message=message, history=tuple(history), initial=initial, final=final,
        nc_value=nc_val, nc_value_source=nc_source, embeddings=last_eval[1], labels=last_eval[2],
        wall_time_s=time.perf_counter() - start,
    )
    if run_dir is not None:
        write_run_outputs(run_dir, result)
    return result
