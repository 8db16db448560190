"""The stacked driver: R runs of equal shapes trained as one computation (a leading run axis [R, ...]).

Runs share a stack when their :func:`stack_key` is equal (model kind and sizes, number of samples, d,
batch size, epochs, normalization, dtype, estimator, k, positives kind, metrics cadence, convention, device).
Everything else is per run: setting (SCL, HSCL, UCL and HUCL share a stack), beta, tau, lr, weight decay, seed,
init and its scale/noise, the data's separation/spread/imbalance, the noise scale, psi and margin, backend.
:func:`run_stack` trains a stack with the one loop (:func:`ncgeom.runs.loop.train`); :class:`StackedDriver` holds
what is particular to it.

What a run sees is what the single driver (:mod:`ncgeom.runs.single`) gives it, drawn from the same streams
(:func:`ncgeom.runs.setup.seed_streams`): its data, its initialization (each run's model is built by
:func:`ncgeom.runs.setup.vector_model` from its own generators, then stacked: :class:`ncgeom.models.StackedEncoder`),
its class-balanced batches, its noise positives and its sampled negatives (:func:`ncgeom.runs.setup.step_generator`:
on CUDA a generator of that device). Per step the stack computes z [R, B, d] with batched matmuls and one Adam
update per run (:class:`ncgeom.optim.StackedAdam`). The loss of a stack is one of two (:func:`stack_loss`, fixed by
the stack key):

- ``"stacked"``: the weighted estimator under the theory's convention, by the stacked kernel
  :func:`ncgeom.losses.kernels.stacked.stacked_weighted` on [R, B, d];
- ``"per run"``: the sampled estimator, and either estimator under the authors' convention (docs/conventions.md),
  which the stacked kernel does not compute: each run's prepared batch loss
  (:func:`ncgeom.runs.setup.prepared_loss`, the single driver's call on the run's own generator).

The metrics are the single driver's (:func:`ncgeom.runs.evaluate.vector_record`) on each run's embeddings, at the
same cadence; each run writes the same files through the same writer (:class:`ncgeom.runs.folder.RunFolder`).

A run stops alone (ncgeom.runs.loop): a non-finite batch embedding, loss, gradient or updated parameter at a step
(:mod:`ncgeom.runs.divergence`: the parameters are checked run by run after each update), or non-finite embeddings
at an epoch's end, marks it "diverged" with the reason; its parameters return to the last complete epoch and stay
frozen while the other runs go on.

Tolerances against the single driver (tests/test_stacked.py): the sampled estimator, the Adam update and the
data/batch/negative draws are the single driver's operation for operation; the stacked kernel is a different
kernel (with the blocked kernel's shift bound) from the single driver's default (blocked), so the loss of a step
agrees to a few B eps and the trajectories to T B eps times the conditioning of training.

Devices: a stack trains on its runs' ``device`` (part of the stack key): data, parameters, Adam state, batch
indices and the per-step draws live there; the initialization is drawn on the CPU and moved, the metrics are
computed on the CPU in float64. The bitwise independence of a run from its stack-mates is a property of the CPU
kernels (:mod:`ncgeom.losses.kernels.stacked`, "Independence"); on CUDA it is not promised (cuBLAS may pick
another kernel for another number of runs): docs/experiments.md, "Devices".
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np

from ncgeom.budget import require_within_budget
from ncgeom.data import LabeledData, class_balanced_batches, class_balanced_counts, two_view_batch
from ncgeom.runs.budget import check_run_memory, stack_memory_bytes
from ncgeom.runs.config import Config
from ncgeom.runs.convergence import PROBE_BATCHES, Probe, probe_model
from ncgeom.runs.divergence import embeddings_message, update_failures
from ncgeom.runs.evaluate import vector_record
from ncgeom.runs.folder import RunFolder
from ncgeom.runs.loop import RunState, train
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
from ncgeom.vocabulary import LAYERED_MODELS, effective_beta, is_supervised

__all__ = ["STACK_FIELDS", "StackLoss", "stack_key", "stackable", "can_stack", "group_stacks", "stack_loss",
           "StackedDriver", "run_stack"]

StackLoss = Literal["stacked", "per run"]

#: Config fields that must be equal for runs to share a stack (shapes, schedule, estimator, dtype).
STACK_FIELDS: tuple[str, ...] = (
    "model", "dataset", "norm", "batch_size", "epochs", "dtype", "estimator", "num_negatives", "positives",
    "detach_weights", "metrics_every", "convention", "device",
)


def stack_key(config: Config) -> tuple[Any, ...]:
    """The values that must be equal for runs to share a stack.

    :data:`STACK_FIELDS`, the number of training samples N, d, and the sizes of the model's weights
    (input_dim for linear/mlp, hidden_dim and depth for mlp; None where the model has no such weight).
    """
    inputs = config.model != "unconstrained"
    return (
        *(getattr(config, f) for f in STACK_FIELDS), config.num_train, config.classes, config.embedding_dim,
        config.input_dim if inputs else None,
        config.hidden_dim if config.model in LAYERED_MODELS else None,
        config.depth if config.model in LAYERED_MODELS else None,
    )


def stackable(config: Config) -> bool:
    """False for the runs the stacked driver does not train (:func:`ncgeom.runs.run` does, one at a time):
    an image data set (a ResNet on image files) and shuffled batches (``batches="shuffle"``: a batch's class
    counts vary, and the stacked loss's label band is sized from class-balanced counts)."""
    return not config.is_image and config.batches == "balanced"


def can_stack(configs: Sequence[Config]) -> bool:
    """True when every config has the same :func:`stack_key` (an empty sequence stacks trivially)."""
    return len({stack_key(c) for c in configs}) <= 1


def group_stacks(configs: Sequence[Config], *, max_runs: int | None = None) -> list[list[int]]:
    """Indices of ``configs`` grouped by :func:`stack_key` (first-seen order), each group cut to ``max_runs``."""
    groups: dict[tuple[Any, ...], list[int]] = {}
    for i, c in enumerate(configs):
        groups.setdefault(stack_key(c), []).append(i)
    size = max_runs or max(len(configs), 1)
    return [g[i : i + size] for g in groups.values() for i in range(0, len(g), size)]


def stack_loss(config: Config) -> StackLoss:
    """How a stack of ``config``'s key computes its loss (module docstring): "stacked" (the stacked kernel: the
    weighted estimator, the theory's convention) or "per run" (each run's prepared batch loss)."""
    return "stacked" if config.estimator == "weighted" and config.convention == "theory" else "per run"


class StackedDriver:
    """A stack of runs (module docstring); the :class:`ncgeom.runs.loop.Driver` of :func:`run_stack`.

    The runs still training occupy the **slots** of the stacked tensors (parameters, Adam state, data); a run that
    stops (converged or diverged) leaves them at the start of the next epoch, its final parameters parked, so the
    stack's cost follows the runs still training. A run's numbers do not depend on its stack-mates (module
    docstring), so leaving changes nothing for the others.
    """

    images_per_step = 0
    first_epoch = 1

    def __init__(self, configs: list[Config], *, device: Any, folders: list[RunFolder | None]):
        import torch

        from ncgeom.models import StackedEncoder  # imports torch (heavy): only when a stack starts
        from ncgeom.optim import StackedAdam

        self.start = time.perf_counter()
        head = self.head = configs[0]
        self.configs = list(configs)
        self.device = device
        self.loss_kind = stack_loss(head)
        self.noise = head.positives == "noise"
        self.states: list[RunState] = []
        self.data: list[LabeledData] = []
        self.batch_rngs: list[np.random.Generator] = []
        self.generators: list[Any] = []
        models = []
        for config, folder in zip(configs, folders, strict=True):
            streams = seed_streams(config.seed)
            data = make_data(config, rng=streams.data)
            models.append(vector_model(config, data, streams))  # on the CPU; the stack is moved to the device
            nc_value, nc_source = run_nc_value(config)
            self.states.append(RunState(config, nc_value, nc_source, folder=folder))
            self.data.append(data)
            self.batch_rngs.append(streams.batch)
            self.generators.append(step_generator(streams.torch, device))
        per_run = self.loss_kind == "per run"
        self.losses_of = [prepared_loss(c, g) for c, g in zip(configs, self.generators)] if per_run else []
        self.probe_generators = [probe_generator(c, device) for c in configs]
        self.probe_losses = [prepared_loss(c, g) for c, g in zip(configs, self.probe_generators)] if per_run else []
        self.encoder = StackedEncoder.from_models(head.model, models, norm=head.norm, device=device)  # type: ignore[arg-type]
        del models
        self.indexed = self.encoder.takes_indices
        dtype = torch_dtype(head)
        self.x_train = [torch.as_tensor(d.x_train, dtype=dtype, device=device) for d in self.data]
        self.x_test = [torch.as_tensor(d.x_test, dtype=dtype, device=device) for d in self.data]
        self.num_negatives = None if head.num_negatives == "batch" else int(head.num_negatives)
        self.band = 2 if self.noise else int(class_balanced_counts(len(np.unique(self.data[0].y_train)),
                                                                  head.batch_size).max())
        self.optimizer = StackedAdam(self.encoder.params, lr=[c.lr for c in configs],
                                     weight_decay=[c.weight_decay for c in configs])
        self.steps_per_epoch = math.ceil(self.data[0].num_train / head.batch_size)
        # The stacked kernel sorts each batch by label (stable) and scatters dZ back; a batch of table rows
        # (unconstrained) given in that order already gives the same z, loss and table gradient bit for bit (each
        # table row gets the same terms), without the kernel's gather and scatter. Not for input models: the
        # order of a batch's rows enters the sums of their weight gradients.
        self.presort = self.indexed and not self.noise and self.loss_kind == "stacked"
        self.parked: dict[int, Any] = {}  # run -> a one-run StackedEncoder of its final parameters
        self._good: list[Any] = []
        self._set_slots(list(range(len(configs))))

    # --- the slots -----------------------------------------------------------------------------------------
    def _set_slots(self, runs: list[int]) -> None:
        """The per-slot tensors for the runs ``runs`` (slot i = run runs[i])."""
        import torch

        self.slots = runs
        self.x_stack = None if self.indexed else torch.stack([self.x_train[r] for r in runs])
        self.y_stack = torch.stack([torch.as_tensor(self.data[r].y_train, device=self.device) for r in runs])
        chosen = [self.configs[r] for r in runs]
        self.supervised = torch.tensor([is_supervised(c.setting) for c in chosen], device=self.device)
        # per-run scalars stay float64 on the CPU: stacked_weighted converts them to z's dtype and device
        self.beta = torch.tensor([effective_beta(c.setting, c.beta) for c in chosen], dtype=torch.float64)
        self.tau = torch.tensor([c.tau for c in chosen], dtype=torch.float64)
        self.weight_decay = torch.tensor([c.weight_decay for c in chosen], dtype=torch.float64)
        self.row_ids = torch.arange(len(runs), device=self.device)[:, None]
        self.probe_rows = torch.from_numpy(np.stack([probe_batches(self.configs[r], self.data[r].y_train,
                                                                   limit=PROBE_BATCHES) for r in runs])).to(self.device)

    def _leave(self) -> None:
        """Runs that stopped leave the stack: parameters, Adam state and per-slot tensors cut to the live runs."""
        from ncgeom.models import StackedEncoder

        keep = [i for i, r in enumerate(self.slots) if self.states[r].live]
        if len(keep) == len(self.slots) or not keep:
            return
        for i, r in enumerate(self.slots):
            if i not in keep:
                self.parked[r] = StackedEncoder(self.encoder.kind, [p.detach()[i:i + 1] for p in self.encoder.params],
                                                norm=self.encoder.norm)
        params = [p.detach()[keep].contiguous() for p in self.encoder.params]
        self.encoder = StackedEncoder(self.encoder.kind, params, norm=self.encoder.norm)
        self.optimizer = self.optimizer.select(keep, self.encoder.params)
        self._good = [g[keep] for g in self._good]
        self._set_slots([self.slots[i] for i in keep])

    def _slot(self, r: int) -> int:
        return self.slots.index(r)

    # --- the loop's calls ------------------------------------------------------------------------------------
    def epoch_steps(self, epoch: int) -> Iterator[Any]:
        import torch

        self._leave()
        b, steps = self.head.batch_size, self.steps_per_epoch
        batches = torch.from_numpy(np.stack([
            class_balanced_batches(self.data[r].y_train, b, num_batches=steps, rng=self.batch_rngs[r])
            for r in self.slots])).to(self.device)  # [S, steps, B]
        if self.presort:  # each batch in label order (stable): the kernel's own sort is then the identity
            order = torch.sort(self.y_stack.gather(1, batches.flatten(1)).view_as(batches), dim=2, stable=True).indices
            batches = batches.gather(2, order)
        for s in range(steps):
            yield batches[:, s]

    def _forward(self, idx, generators: list[Any]):
        """(z [S, B', d], labels [S, B']) of one step's batch indices [S, B]; noise positives drawn from each slot's
        run's generator of ``generators`` (indexed by run)."""
        import torch

        if self.noise:
            assert self.x_stack is not None  # noise positives need an input model (Config checks it)
            pairs = [two_view_batch(self.x_stack[i, idx[i]], scale=self.configs[r].noise_scale, generator=generators[r])
                     for i, r in enumerate(self.slots)]
            return self.encoder(torch.stack([p[0] for p in pairs])), torch.stack([p[1] for p in pairs])
        inputs = idx if self.indexed else self.x_stack[self.row_ids, idx]  # type: ignore[index]
        return self.encoder(inputs), self.y_stack.gather(1, idx)

    def _stack_losses(self, z, labels, active: list[bool], per_run: list[Callable[[Any, Any], Any]]):
        """Per-slot losses [S] of a stacked batch: the stacked kernel, or each slot's run's own loss of ``per_run``
        (indexed by run; a zero attached to the graph where ``active`` is False)."""
        import torch

        from ncgeom.losses.kernels.stacked import stacked_weighted

        if self.loss_kind == "stacked":
            return stacked_weighted(z, labels, supervised=self.supervised, beta=self.beta, tau=self.tau,
                                    num_negatives=self.num_negatives, detach_weights=self.head.detach_weights,
                                    band_width=self.band)
        return torch.stack([per_run[r](z[i], labels[i]) if active[i] else z[i].sum() * 0.0
                            for i, r in enumerate(self.slots)])

    def losses(self, idx: Any, stepping: list[bool], *, epoch: int, step: int) -> tuple[Any, list[float | str]]:
        import torch

        z, labels = self._forward(idx, self.generators)
        finite = torch.isfinite(z.detach()).flatten(1).all(1).tolist()
        moving = [stepping[r] for r in self.slots]
        active = [m and f for m, f in zip(moving, finite)]
        losses = self._stack_losses(z, labels, active, self.losses_of)
        values: list[float | str] = [0.0] * len(self.states)
        for i, (r, v) in enumerate(zip(self.slots, losses.detach().tolist())):
            values[r] = v if finite[i] else embeddings_message(epoch, step)
        return losses, values

    def update(self, losses: Any, stepping: list[bool], *, epoch: int, step: int) -> list[str | None]:
        self.optimizer.zero_grad()
        losses.sum().backward()
        self.optimizer.step()
        failures: list[str | None] = [None] * len(self.states)
        found = update_failures(self.encoder.params, runs=len(self.slots), epoch=epoch, step=step)
        for i, r in enumerate(self.slots):
            failures[r] = found[i]
            if not stepping[r] or found[i] is not None:  # frozen (failing or stopped, until it leaves): no update
                self.encoder.restore(i, self._good)
        return failures

    def probe(self) -> list[Probe | None]:
        """Every live run's probe (ncgeom.runs.convergence) from one stacked backward per probe batch: a run's loss
        depends on its own slice of the parameters only, so the slice of the gradient is its own."""
        import torch

        for r in self.slots:
            self.probe_generators[r].manual_seed(probe_seed(self.configs[r]))
        slots, k = len(self.slots), self.probe_rows.shape[1]
        ok = [True] * slots
        values = torch.zeros(slots, dtype=torch.float64)
        total = torch.zeros(slots, dtype=torch.float64)
        self.optimizer.zero_grad()
        try:
            for j in range(k):
                z, labels = self._forward(self.probe_rows[:, j], self.probe_generators)
                ok = [a and b for a, b in zip(ok, torch.isfinite(z.detach()).flatten(1).all(1).tolist())]
                parts = self._stack_losses(z, labels, ok, self.probe_losses) / k
                parts.sum().backward()
                values += parts.detach().to("cpu", torch.float64)
            for p in self.encoder.params:
                g = torch.zeros_like(p) if p.grad is None else p.grad
                wd = self.weight_decay.to(p.device, p.dtype).view(-1, *([1] * (p.ndim - 1)))
                total += (g + wd * p.detach()).detach().to(torch.float64).flatten(1).pow(2).sum(1).cpu()
                values += 0.5 * self.weight_decay * p.detach().to("cpu", torch.float64).flatten(1).pow(2).sum(1)
        finally:
            self.optimizer.zero_grad()
        out: list[Probe | None] = [None] * len(self.states)
        for i, (r, v, n) in enumerate(zip(self.slots, values.tolist(), total.sqrt().tolist())):
            out[r] = Probe(v, n) if ok[i] and np.isfinite(v) and np.isfinite(n) else None
        return out

    def reference_probe(self, r: int) -> Probe | None:
        """The single driver's reference probe of run r (a model of its own: the reference is one number per run)."""
        import torch

        config, loss = self.configs[r], (self.probe_losses[r] if self.probe_losses else prepared_loss(
            self.configs[r], self.probe_generators[r]))
        model = random_reference_model(config, self.data[r]).to(self.device)
        y = torch.as_tensor(self.data[r].y_train, device=self.device)
        self.probe_generators[r].manual_seed(probe_seed(config))
        probe = probe_model(model, self.probe_rows[self._slot(r)], lambda idx, gen: (model(idx), y[idx]), loss,
                            self.probe_generators[r], weight_decay=config.weight_decay)
        model.zero_grad(set_to_none=True)
        return probe

    def _embeddings(self, r: int, x) -> np.ndarray:
        import torch

        encoder, index = (self.parked[r], 0) if r in self.parked else (self.encoder, self._slot(r))
        return encoder.embed(index, x).detach().to("cpu", torch.float64).numpy()

    def evaluate(self, r: int, epoch: int, loss: float | None) -> EpochRecord | None:
        z = self._embeddings(r, None if self.indexed else self.x_train[r])
        z_test = None
        if not self.indexed and self.data[r].y_test.size:
            z_test = self._embeddings(r, self.x_test[r])
        return vector_record(z, z_test, self.data[r], epoch, loss, self.states[r].nc_value)

    def initial_record(self, r: int) -> EpochRecord | None:
        return self.evaluate(r, 0, None)

    def keep_good_state(self) -> None:
        self._good = self.encoder.snapshot()

    def rollback(self, r: int) -> None:
        self.encoder.restore(self._slot(r), self._good)

    def end_epoch(self, epoch: int) -> None:
        return None

    def final_embeddings(self, r: int) -> tuple[np.ndarray, np.ndarray]:
        return self._embeddings(r, None if self.indexed else self.x_train[r]), self.data[r].y_train.copy()


def run_stack(configs: Sequence[Config], *, out_dirs: Sequence[str | Path | None] | None = None,
              progress: bool = False) -> list[Result]:
    """Train ``configs`` (one :func:`stack_key`) as one stack; write each run directory given (module docstring).

    Parameters
    ----------
    configs : sequence of Config
        R >= 1 validated configs with equal :func:`stack_key` (ValueError otherwise), each :func:`stackable`.
    out_dirs : sequence of path or None, optional
        One run directory per config (None: not written): config.json, history.jsonl, summary.json,
        embeddings.npz, as every run writes them. They are not locked one by one: a sweep holds the lock of
        the folder that holds them (:class:`ncgeom.runs.folder.RunFolder`).
    progress : bool
        A tqdm bar over epochs.

    Returns
    -------
    list of Result
        One per config, in order; status "completed" or "diverged" (never raises on divergence).
    """
    configs = list(configs)
    if not configs or not all(isinstance(c, Config) for c in configs):
        raise ValueError("configs must be a non-empty sequence of ncgeom.runs.Config")
    if not all(stackable(c) for c in configs):  # one run at a time (ncgeom.campaigns.plan)
        raise ValueError("image data sets and batches='shuffle' are not stacked: train each with ncgeom.runs.run")
    if not can_stack(configs):
        keys = sorted({repr(stack_key(c)) for c in configs})
        raise ValueError(f"configs must share one stack_key (model sizes, N, d, batch, epochs, ...), got {len(keys)}: {keys[:2]}")
    dirs = list(out_dirs) if out_dirs is not None else [None] * len(configs)
    if len(dirs) != len(configs):
        raise ValueError(f"out_dirs must have one entry per config ({len(configs)}), got {len(dirs)}")
    for c in configs:
        check_run_memory(c)
    require_within_budget("stack size", stack_memory_bytes(configs), what=f"a stack of {len(configs)} runs")
    device = check_device(configs[0].device)  # one device per stack (STACK_FIELDS)
    for c in configs:  # the stacked kernel would ignore a backend: refused as the single driver refuses it
        check_backend(c, device)
    with contextlib.ExitStack() as stack:
        folders = [None if d is None else stack.enter_context(RunFolder(d, lock=False)) for d in dirs]
        return train(StackedDriver(configs, device=device, folders=folders), progress=progress)
