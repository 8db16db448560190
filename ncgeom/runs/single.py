"""The single-run driver: one encoder of vector data (gaussian, digits) trained with Adam on a batch loss.

:func:`run_single` (called by :func:`ncgeom.runs.run` for a vector data set) sets one run up
(:mod:`ncgeom.runs.setup`; docs/theory.md, sections 7-9) and trains it with :func:`ncgeom.runs.loop.train`;
:class:`SingleDriver` holds what is particular to it:

- the model: :func:`ncgeom.runs.setup.vector_model` on the run's device (drawn on the CPU from the run's streams,
  so a run starts from the same parameters on every device), :func:`ncgeom.optim.adam` (torch's fused Adam);
- the batches: each epoch draws ceil(N / B) class-balanced batches (``batches="shuffle"``: floor(N / B) batches of
  one permutation, ncgeom.data.batches) from the batch stream. Label positives feed the batch loss with the class
  labels (P(i) = same class); noise positives feed a two-view batch [x; x + sigma_p eps] with instance ids as
  labels (SimCLR-style), the noise drawn from the run's step generator;
- the evaluation: :func:`ncgeom.runs.evaluate.vector_record` of every training embedding (and of the test split
  for models with inputs), on the CPU in float64.

Failure modes: norm="none" lets the features grow without bound (the loss then tends to 0, below the NC value,
docs/theory.md, section 9, claim 4); a very large lr or tiny tau can overflow float32 (use dtype="float64"):
either ends the run as "diverged" at the first non-finite loss, embedding, gradient or parameter
(ncgeom.runs.loop, ncgeom.runs.divergence).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from ncgeom.data import batches_per_epoch, epoch_batches, two_view_batch
from ncgeom.runs.budget import check_run_memory
from ncgeom.runs.config import Config
from ncgeom.runs.convergence import PROBE_BATCHES, Probe, probe_model
from ncgeom.runs.evaluate import vector_record
from ncgeom.runs.folder import RunFolder
from ncgeom.runs.loop import OneModelSteps, RunState, train
from ncgeom.runs.nc_reference import run_nc_value
from ncgeom.runs.records import EpochRecord
from ncgeom.runs.result import Result
from ncgeom.runs.setup import (
    check_backend,
    check_device,
    make_data,
    prepared_loss,
    probe_batches,
    probe_generator,
    probe_seed,
    random_reference_model,
    seed_streams,
    step_generator,
    torch_dtype,
    vector_model,
)

__all__ = ["SingleDriver", "run_single"]


class SingleDriver(OneModelSteps):
    """One run of vector data (module docstring); the :class:`ncgeom.runs.loop.Driver` of :func:`run_single`."""

    images_per_step = 0
    first_epoch = 1

    def __init__(self, config: Config, *, device: Any, folder: RunFolder | None):
        import torch

        from ncgeom.optim import adam  # imports torch (heavy): only when a run starts

        self.start = time.perf_counter()
        self.config = config
        streams = seed_streams(config.seed)
        self.batch_rng = streams.batch
        self.device = device
        self.data = make_data(config, rng=streams.data)
        self.model = vector_model(config, self.data, streams).to(device)
        self.generator = step_generator(streams.torch, device)  # on the CPU: the torch stream itself, continued
        dtype = torch_dtype(config)
        self.x_train = torch.as_tensor(self.data.x_train, dtype=dtype, device=device)
        self.x_test = torch.as_tensor(self.data.x_test, dtype=dtype, device=device)
        self.y_train = torch.as_tensor(self.data.y_train, device=device)
        self.params = list(self.model.parameters())
        self.tensors = self.params  # what OneModelSteps.update checks
        self.optimizer = adam(self.params, lr=config.lr, weight_decay=config.weight_decay)
        self.loss = prepared_loss(config, self.generator)
        self.indexed = bool(getattr(self.model, "takes_indices", False))
        self.steps_per_epoch = batches_per_epoch(config.batches, self.data.num_train, config.batch_size)
        self.probe_rows = torch.from_numpy(probe_batches(config, self.data.y_train, limit=PROBE_BATCHES)).to(device)
        self.probe_generator = probe_generator(config, device)
        self.probe_loss = prepared_loss(config, self.probe_generator)
        nc_value, nc_source = run_nc_value(config, labels=self.data.y_train)
        self.states = [RunState(config, nc_value, nc_source, folder=folder)]
        self._good: dict[str, Any] = {}

    def epoch_steps(self, epoch: int) -> Iterator[Any]:
        import torch

        c = self.config
        batches = torch.from_numpy(epoch_batches(c.batches, self.data.y_train, c.batch_size, rng=self.batch_rng))
        yield from batches.to(self.device)[: self.steps_per_epoch]

    def _forward(self, idx: Any, generator: Any) -> tuple[Any, Any]:
        """(z, labels) of a batch of sample indices: a two-view batch with noise positives (drawn from
        ``generator``), else the samples with their class labels."""
        if self.config.positives == "noise":
            views, labels = two_view_batch(self.x_train[idx], scale=self.config.noise_scale, generator=generator)
            return self.model(views), labels
        z = self.model(idx) if self.indexed else self.model(self.x_train[idx])
        return z, self.y_train[idx]

    def probe(self) -> list[Probe | None]:
        self.probe_generator.manual_seed(probe_seed(self.config))
        self.optimizer.zero_grad(set_to_none=True)
        try:
            probe = probe_model(self.model, self.probe_rows, self._forward, self.probe_loss, self.probe_generator,
                                       weight_decay=self.config.weight_decay)
        finally:
            self.optimizer.zero_grad(set_to_none=True)
        return [probe]

    def reference_probe(self, r: int) -> Probe | None:
        model = random_reference_model(self.config, self.data).to(self.device)
        self.probe_generator.manual_seed(probe_seed(self.config))
        probe = probe_model(model, self.probe_rows, lambda idx, gen: (model(idx), self.y_train[idx]), self.probe_loss,
                            self.probe_generator, weight_decay=self.config.weight_decay)
        model.zero_grad(set_to_none=True)
        return probe

    def embeddings(self) -> np.ndarray:
        """Every training embedding [N, d] (float64, on the CPU)."""
        import torch

        with torch.no_grad():
            z = self.model() if self.indexed else self.model(self.x_train)
        return z.detach().to("cpu", torch.float64).numpy()

    def evaluate(self, r: int, epoch: int, loss: float | None) -> EpochRecord | None:
        import torch

        z = self.embeddings()
        if not np.isfinite(z).all():
            return None
        z_test = None
        if not self.indexed and self.data.y_test.size:
            with torch.no_grad():
                z_test = self.model(self.x_test).to("cpu", torch.float64).numpy()
        return vector_record(z, z_test, self.data, epoch, loss, self.states[0].nc_value)

    def initial_record(self, r: int) -> EpochRecord | None:
        return self.evaluate(r, 0, None)

    def keep_good_state(self) -> None:
        self._good = {k: v.detach().clone() for k, v in self.model.state_dict().items()}

    def rollback(self, r: int) -> None:
        self.model.load_state_dict(self._good)

    def end_epoch(self, epoch: int) -> None:
        return None

    def final_embeddings(self, r: int) -> tuple[np.ndarray, np.ndarray]:
        return self.embeddings(), self.data.y_train.copy()


def run_single(config: Config, *, out_dir: str | Path | None = None, progress: bool = False) -> Result:
    """Train one run of a vector data set as ``config`` says; write its run directory if ``out_dir`` is given.

    Parameters
    ----------
    config : Config
        A vector data set (gaussian, digits); validated at construction (bad values never reach training).
    out_dir : path, optional
        Run directory (created, locked while the run writes it): config.json, history.jsonl, summary.json,
        embeddings.npz (:mod:`ncgeom.runs.folder`).
    progress : bool
        A tqdm bar over epochs.

    Returns
    -------
    Result
        status "completed" or "diverged" (never raises on divergence).
    """
    if not isinstance(config, Config) or config.is_image:
        raise ValueError("config must be an ncgeom.runs.Config of a vector data set (gaussian, digits)")
    check_run_memory(config)  # before any data or model is allocated (the budget in force: ncgeom.budget)
    device = check_device(config.device)
    check_backend(config, device)  # before the run folder is made
    with contextlib.ExitStack() as stack:
        folder = None if out_dir is None else stack.enter_context(RunFolder(out_dir))
        return train(SingleDriver(config, device=device, folder=folder), progress=progress)[0]
