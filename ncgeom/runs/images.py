"""The image driver: a ResNet encoder on CIFAR-10/100, STL-10 or an ImageFolder tree, with checkpoints.

:func:`run_images` (called by :func:`ncgeom.runs.run` when ``config.dataset`` is one of ``IMAGE_DATASETS``;
docs/images.md; docs/experiments.md, "Image data sets") trains with the one loop (:func:`ncgeom.runs.loop.train`),
writes the same files as every run (config.json with provenance, history.jsonl, summary.json, embeddings.npz) plus
checkpoint.pt. :class:`ImageDriver` holds what is particular to it:

1. the data are read from ``config.data_dir`` (:func:`ncgeom.runs.image_data.read_image_data`); the class count
   must equal ``config.classes`` (ncgeom train fills it in from the data when ``--classes`` is not given). An
   ImageFolder tree whose pixels exceed ``EAGER_MAX_BYTES`` is decoded batch by batch, by ``workers``
   processes; everything else is held in memory as uint8;
2. the seed becomes the four streams of :func:`~ncgeom.runs.setup.seed_streams`: the torch stream draws the
   ResNet's weights (:class:`ncgeom.models.ResNetEncoder`, the authors' MLP head), then the augmentations; the
   batch stream draws each epoch's ceil(N / B) class-balanced batches (or floor(N / B) shuffled ones);
3. a step converts its batch to float (uint8 / 255, per batch: the data set is never held as float) and
   standardizes it (:func:`ncgeom.data.augment.standardize`). ``positives="label"``: the B images with their
   class labels (SCL/HSCL/UCL/HUCL as for vector data; docs/theory.md, section 3). ``positives="augment"``: two
   SimCLR views of each image (:func:`ncgeom.data.augment.two_views`) labelled by instance ids, as noise
   positives are. Adam on the config's batch loss (:func:`ncgeom.runs.setup.prepared_loss`);
   ``precision="bf16"`` autocasts the ResNet's forward to bfloat16 on CUDA (the loss takes the features in
   float32);
4. every ``metrics_every`` epochs and at the last, in eval mode (batch-norm running statistics) and without
   augmentation: the metrics of docs/theory.md, section 8 of the training features by
   :func:`ncgeom.metrics.streaming_nc_metrics` (``eval_batch_size`` images per forward pass), and the test NCC
   accuracy with the train class means by :func:`ncgeom.metrics.streaming_ncc_accuracy`.

Memory. The features of an evaluation are kept (and passed twice to the streaming metrics) when N x d x 8
bytes <= :data:`ncgeom.runs.budget.EMBEDDINGS_MAX_BYTES` (64 MiB); above that the training images are encoded
twice per evaluation and never stored. embeddings.npz follows the same rule: the final training features ``z``
[N, d] with their labels when they fit, else the class means ``z`` [C, d] with ``labels`` = 0..C-1.

Checkpoints (:mod:`ncgeom.runs.checkpoint`), opt-in: with ``checkpoint_every`` = n > 0, every n epochs and at the end
of a completed run, each replacing the last (one file: the model and Adam's state, 137 MB for a ResNet-50); with 0
(the default) none is written; ``resume=True`` (``ncgeom train --resume``) continues from the run directory's checkpoint.pt: on the CPU, a
run of E epochs equals a run of e epochs resumed to E, bitwise.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import numpy as np

from ncgeom.data import batches_per_epoch, check_batches, epoch_batches
from ncgeom.data.images import ImageData
from ncgeom.metrics.streaming import accumulate_moments, streaming_nc_metrics, streaming_ncc_accuracy
from ncgeom.runs import budget
from ncgeom.runs.checkpoint import CHECKPOINT_FILE, Checkpoint, load_checkpoint, restore, rng_states, save_checkpoint
from ncgeom.runs.config import Config
from ncgeom.runs.convergence import PROBE_BATCHES, Probe, probe_model
from ncgeom.runs.folder import RunFolder
from ncgeom.runs.image_data import chunks, image_batches, read_image_data
from ncgeom.runs.loop import OneModelSteps, RunState, train
from ncgeom.runs.nc_reference import run_nc_value
from ncgeom.runs.records import EpochRecord
from ncgeom.runs.result import Result
from ncgeom.runs.setup import (
    check_backend,
    check_device,
    prepared_loss,
    probe_batches,
    probe_generator,
    probe_seed,
    seed_streams,
    step_generator,
    torch_dtype,
)

__all__ = ["ImageDriver", "run_images"]


class _NonFinite(Exception):
    """An evaluation met non-finite features (the run then stops as diverged)."""


class ImageDriver(OneModelSteps):
    """One image run (module docstring); the :class:`ncgeom.runs.loop.Driver` of :func:`run_images`."""

    def __init__(self, config: Config, data: ImageData, *, device: Any, folder: RunFolder | None,
                 checkpoint: Checkpoint | None):
        import torch

        from ncgeom.models import build_model  # imports torch (heavy): only when a run starts
        from ncgeom.optim import adam

        self.start = time.perf_counter() - (checkpoint.elapsed_s if checkpoint is not None else 0.0)
        self.config, self.data, self.device, self.folder = config, data, device, folder
        self.streams = seed_streams(config.seed)
        self.dtype = torch_dtype(config)
        self.model = build_model(config.model, dim=config.embedding_dim, norm=config.norm,
                                 generator=self.streams.torch, dtype=self.dtype).to(device)  # drawn on the CPU
        self.generator = step_generator(self.streams.torch, device)
        self.optimizer = adam(self.model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
        # what diverges shows in these after an update (ncgeom.runs.divergence): the parameters and, for batch
        # norm, the running statistics that every evaluation uses
        self.tensors = [*self.model.parameters(), *(b for b in self.model.buffers() if b.is_floating_point())]
        self.loss = prepared_loss(config, self.generator)
        self.probe_rows = list(probe_batches(config, data.y_train, limit=PROBE_BATCHES))
        self.probe_generator = probe_generator(config, device)
        self.probe_loss = prepared_loss(config, self.probe_generator)
        self.autocast = (lambda: torch.autocast(device_type="cuda", dtype=torch.bfloat16)) \
            if config.precision == "bf16" else nullcontext
        self.y_train = torch.as_tensor(data.y_train, device=device)
        self.steps_per_epoch = batches_per_epoch(config.batches, data.num_train, config.batch_size)
        self.images_per_step = config.batch_size
        nc_value, nc_source = run_nc_value(config, labels=data.y_train)
        state = RunState(config, nc_value, nc_source, folder=folder)
        self.first_epoch = 1
        if checkpoint is not None:  # every tensor and random state checked before any is loaded
            restore(checkpoint, model=self.model, optimizer=self.optimizer, streams=self.streams, step=self.generator,
                    steps_per_epoch=self.steps_per_epoch)
            state.history = list(checkpoint.history)
            state.initial = checkpoint.initial
            state.resumed_at = checkpoint.epoch
            self.first_epoch = state.resumed_at + 1
        self.states = [state]
        self._last: tuple[int, np.ndarray, np.ndarray] | None = None  # (epoch, embeddings, labels) of the last evaluation
        self._good: dict[str, Any] = {}
        self.model.train()

    # --- the forward pass ----------------------------------------------------------------------------------
    def _inputs(self, images: np.ndarray):
        """uint8 [b, H, W, 3] -> the device's uint8 [b, 3, H, W]."""
        import torch

        return torch.from_numpy(np.ascontiguousarray(images)).to(self.device).permute(0, 3, 1, 2).contiguous()

    def _encode(self, x):
        """Features of float images in [0, 1]: standardized, through the ResNet, in float32/64 for the loss."""
        from ncgeom.data.augment import standardize

        with self.autocast():
            z = self.model(standardize(x.to(self.dtype)))
        return z.to(self.dtype)

    def _features(self, source, rows: list[np.ndarray]) -> Iterator[np.ndarray]:
        """float64 features of ``rows`` of a split (eval mode, no autograd); _NonFinite if any is not finite."""
        import torch

        from ncgeom.data.augment import to_float_images

        with torch.no_grad():
            for images in image_batches(source, rows, self.config.workers):
                z = self._encode(to_float_images(self._inputs(images))).to("cpu", torch.float64).numpy()
                if not np.isfinite(z).all():
                    raise _NonFinite
                yield z

    # --- the loop's calls ------------------------------------------------------------------------------------
    def epoch_steps(self, epoch: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        rows = list(epoch_batches(self.config.batches, self.data.y_train, self.config.batch_size,
                                  rng=self.streams.batch))
        for s, images in enumerate(image_batches(self.data.x_train, rows, self.config.workers)):
            yield rows[s], images

    def _forward(self, batch: tuple[np.ndarray, np.ndarray], generator: Any) -> tuple[Any, Any]:
        """(z, labels) of a batch (its rows and uint8 images): two SimCLR views drawn from ``generator`` with
        instance ids (augment positives), else the images with their class labels."""
        import torch

        from ncgeom.data.augment import to_float_images, two_views

        row, images = batch
        x = self._inputs(images)
        if self.config.positives == "augment":
            first, second = two_views(x, generator=generator)
            return self._encode(torch.cat([first, second])), torch.arange(x.shape[0], device=self.device).repeat(2)
        return self._encode(to_float_images(x)), self.y_train[torch.from_numpy(row).to(self.device)]

    def reference_probe(self, r: int) -> Probe | None:
        return None  # an image run starts from a random ResNet: its own initial probe is the reference

    def probe(self) -> list[Probe | None]:
        """The probe gradient (ncgeom.runs.convergence) in train mode, the batch-norm running statistics restored
        afterwards (a forward in train mode updates them)."""
        buffers = [b.detach().clone() for b in self.model.buffers()]
        batches = list(zip(self.probe_rows, image_batches(self.data.x_train, self.probe_rows, self.config.workers)))
        self.probe_generator.manual_seed(probe_seed(self.config))
        self.optimizer.zero_grad(set_to_none=True)
        try:
            probe = probe_model(self.model, batches, self._forward, self.probe_loss, self.probe_generator,
                                       weight_decay=self.config.weight_decay)
        finally:
            self.optimizer.zero_grad(set_to_none=True)
            for b, saved in zip(self.model.buffers(), buffers, strict=True):
                b.data.copy_(saved)
        return [probe]

    def evaluate(self, r: int, epoch: int, loss: float | None) -> EpochRecord | None:
        """The record of the current model (and its final embeddings kept for :meth:`final_embeddings`)."""
        c, data, n = self.config, self.data, self.data.num_train
        rows = chunks(n, c.eval_batch_size)
        self.model.eval()
        try:
            if n * c.embedding_dim * 8 <= budget.EMBEDDINGS_MAX_BYTES:
                z = np.concatenate(list(self._features(data.x_train, rows)))
                train_split: Any = [(z[ix], data.y_train[ix]) for ix in rows]
            else:
                z = None
                train_split = lambda: zip(self._features(data.x_train, rows), (data.y_train[ix] for ix in rows))  # noqa: E731
            moments = accumulate_moments(train_split, num_classes=c.classes)
            metrics = streaming_nc_metrics(train_split, num_classes=c.classes, moments=moments)
            test_acc = None
            if data.y_test.size:
                test_rows = chunks(data.y_test.size, c.eval_batch_size)
                test = zip(self._features(data.x_test, test_rows), (data.y_test[ix] for ix in test_rows))
                test_acc = float(streaming_ncc_accuracy(test, moments.class_means()))
        except _NonFinite:
            self._last = None
            return None
        finally:
            self.model.train()
        nc_value = self.states[0].nc_value
        record = EpochRecord(epoch, loss, nc_value, None if loss is None else loss - nc_value,
                             test_ncc_accuracy=test_acc, mean_norm=moments.mean_norm, metrics=metrics.to_dict())
        if z is None:
            self._last = (epoch, moments.class_means(), np.arange(c.classes, dtype=np.int64))
        else:
            self._last = (epoch, z, data.y_train.copy())
        return record

    def initial_record(self, r: int) -> EpochRecord | None:
        return self.evaluate(r, 0, None)

    def keep_good_state(self) -> None:
        self._good = {k: v.detach().clone() for k, v in self.model.state_dict().items()}

    def rollback(self, r: int) -> None:
        self.model.load_state_dict(self._good)
        self._last = None  # the kept embeddings are no longer the model's

    def _checkpoint(self, epoch: int) -> None:
        state = self.states[0]
        if self.folder is not None:
            save_checkpoint(self.folder.path / CHECKPOINT_FILE, config=self.config, epoch=epoch, model=self.model,
                            optimizer=self.optimizer, history=state.history, initial=state.initial,
                            elapsed_s=time.perf_counter() - self.start, rng=rng_states(*self.streams, self.generator))

    def end_epoch(self, epoch: int) -> None:
        every = self.config.checkpoint_every
        if every and epoch % every == 0 and epoch < self.config.epochs:
            self._checkpoint(epoch)

    def final_embeddings(self, r: int) -> tuple[np.ndarray, np.ndarray]:
        """The features of the final state (re-encoded unless the last evaluation was of that state); a completed
        run also writes its final checkpoint here, before its summary."""
        state = self.states[0]
        final_epoch = state.history[-1].epoch if state.history else 0
        if self._last is None or self._last[0] != final_epoch:
            loss = state.history[-1].loss if state.history else None
            if self.evaluate(r, final_epoch, loss) is None or self._last is None:
                raise ValueError(f"the features of epoch {final_epoch} are not finite")
        if state.status == "completed" and self.config.checkpoint_every:  # checkpoints are opt-in
            self._checkpoint(final_epoch)
        return self._last[1], self._last[2]


def run_images(config: Config, *, out_dir: str | Path | None = None, progress: bool = False,
               resume: bool = False) -> Result:
    """Train a ResNet on ``config``'s image data set (module docstring); the run directory as every run writes it.

    Parameters
    ----------
    config : Config
        ``config.is_image``.
    out_dir : path, optional
        Run directory (created, locked while the run writes it): config.json, history.jsonl, summary.json,
        embeddings.npz, checkpoint.pt.
    progress : bool
        A tqdm bar of the images trained (images/s).
    resume : bool
        Continue from ``out_dir/checkpoint.pt`` (ValueError if it is missing or from another config).

    Returns
    -------
    Result
        status "completed" or "diverged"; ``embeddings`` are the final training features [N, d] or, above
        :data:`ncgeom.runs.budget.EMBEDDINGS_MAX_BYTES`, the class means [C, d] (``labels`` then 0..C-1).
    """
    if not isinstance(config, Config) or not config.is_image:
        raise ValueError("config must be an ncgeom.runs.Config of an image data set")
    device = check_device(config.device)
    check_backend(config, device)
    if resume and out_dir is None:
        raise ValueError("resume needs out_dir, the run directory that holds checkpoint.pt")
    with contextlib.ExitStack() as stack:
        folder = checkpoint = None
        if resume and out_dir is not None:
            if not os.path.lexists(Path(out_dir) / CHECKPOINT_FILE):  # nothing to lock, nothing made
                load_checkpoint(Path(out_dir) / CHECKPOINT_FILE, config)
            # the run folder exists: locked before its checkpoint is read, its files untouched until every check
            # (the checkpoint's file, digest and fields here, its tensors in ImageDriver) has passed
            folder = stack.enter_context(RunFolder(out_dir))
            checkpoint = load_checkpoint(folder.path / CHECKPOINT_FILE, config)
        data = read_image_data(config)  # bad data is reported before the run directory is made
        check_batches(config.batches, data.y_train, config.batch_size)
        budget.check_image_memory(config, data)
        if folder is None and out_dir is not None:
            folder = stack.enter_context(RunFolder(out_dir))
        driver = ImageDriver(config, data, device=device, folder=folder, checkpoint=checkpoint)
        return train(driver, progress=progress)[0]
