"""Train R runs of equal shapes as one computation: :func:`run_stack` (docs/theory.md, sections 7-9).

Runs share a stack when their :func:`stack_key` is equal (model kind and sizes, number of samples, d,
batch size, epochs, normalization, dtype, estimator, k, positives kind, metrics cadence, convention, device).
Everything else is per run: setting (SCL, HSCL, UCL and HUCL share a stack), beta, tau, lr, weight decay, seed, init
and its scale/noise, the data's separation/spread/imbalance, the noise scale, psi and margin, backend.

What a run sees is what :func:`ncgeom.experiments.run` gives it, drawn from the same streams
(:func:`ncgeom.experiments.train.seed_streams`): its data, its initialization (each run's model is built
by :func:`ncgeom.models.build_model` from its own generators, then stacked), its class-balanced batches,
its noise positives and its sampled negatives (:func:`ncgeom.experiments.train.step_generator`: on CUDA a
generator of that device). Per step the stack computes z [R, B, d] with batched
matmuls, the weighted estimator with :func:`ncgeom.experiments.stacked.loss.stacked_weighted` (the
sampled estimator, and either estimator under the authors' convention (docs/conventions.md), with
:func:`ncgeom.losses.batch_loss` per run, the sequential call on the run's own
generator) and one Adam update per run (:class:`~ncgeom.experiments.stacked.adam.StackedAdam`). The
metrics are the sequential engine's (:func:`ncgeom.experiments.train.metrics_record`) on each run's
embeddings, at the same cadence; each run writes the same files through the same writers.

A run stops alone: a non-finite loss (or non-finite batch embeddings) at a step, or non-finite
embeddings at an epoch's end, marks it "diverged" with the reason; its parameters return to the last
complete epoch and stay frozen while the other runs go on. (The sequential engine stops the same way on
a non-finite loss; non-finite embeddings at a step make its batch_loss raise, here they stop the run.)

Tolerances against the sequential engine (tests/test_stacked.py): the sampled estimator, the Adam
update and the data/batch/negative draws are the sequential ones operation for operation; the weighted
estimator is a different kernel (the stacked tiles of ncgeom.experiments.stacked.loss, with the blocked
kernel's shift bound) from the sequential default (blocked), so the
loss of a step agrees to a few B eps and the trajectories to T B eps times the conditioning of training.

Devices: a stack trains on its runs' ``device`` (part of the stack key): data, parameters, Adam state, batch
indices and the per-step draws live there; the initialization is drawn on the CPU and moved, the metrics
are computed on the CPU in float64. The bitwise independence of a run from its stack-mates is a property of
the CPU kernels (:mod:`ncgeom.experiments.stacked.loss`, "Independence"); on CUDA it is not promised
(cuBLAS may pick another kernel for another number of runs): docs/experiments.md, "Devices".
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ncgeom.budget import check_run_memory, require_within_budget
from ncgeom.data import class_balanced_batches, class_balanced_counts, two_view_batch
from ncgeom.experiments.config import Config
from ncgeom.experiments.records import SUMMARY_FILE, EpochRecord, HistoryWriter, RunStatus, save_config
from ncgeom.experiments.result import Result
from ncgeom.experiments.train import (
    check_device,
    make_data,
    metrics_record,
    prepare_run_dir,
    run_nc_value,
    seed_streams,
    step_generator,
    write_run_outputs,
)
from ncgeom.provenance import provenance
from ncgeom.vocabulary import effective_beta, is_supervised

__all__ = ["STACK_FIELDS", "stack_key", "stackable", "can_stack", "group_stacks", "stack_memory_bytes", "run_stack"]

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
        config.hidden_dim if config.model == "mlp" else None,
        config.depth if config.model == "mlp" else None,
    )


def stackable(config: Config) -> bool:
    """False for the runs the stacked engine does not train (``ncgeom.experiments.run`` does, one at a time):
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


def stack_memory_bytes(configs: Sequence[Config]) -> int:
    """Bytes of a stack beyond its runs' own (:func:`ncgeom.budget.run_memory_estimate` each): the loss's
    tiles of at most 3 x 2^18 entries (B' = 2B rows with noise positives), :func:`~ncgeom.experiments.stacked.loss.loss_bytes`."""
    from ncgeom.experiments.stacked.loss import loss_bytes  # imports torch (heavy): only when sizing a stack

    if not configs:
        return 0
    c = configs[0]
    rows = c.batch_size * (2 if c.positives == "noise" else 1)
    return loss_bytes(len(configs), rows, itemsize=8 if c.dtype == "float64" else 4)


@dataclasses.dataclass
class _Run:
    """The per-run state of a stack that is not a tensor of the stack."""

    config: Config
    data: Any
    batch_rng: np.random.Generator
    generator: Any
    nc_value: float
    nc_source: str
    psi: Any
    run_dir: Path | None
    initial: EpochRecord
    history: list[EpochRecord] = dataclasses.field(default_factory=list)
    history_file: HistoryWriter | None = None
    last_metrics: EpochRecord | None = None
    status: RunStatus = "completed"
    message: str = ""
    live: bool = True
    total: float = 0.0
    failure: str | None = None


def run_stack(configs: Sequence[Config], *, out_dirs: Sequence[str | Path | None] | None = None,
              progress: bool = False) -> list[Result]:
    """Train ``configs`` (one :func:`stack_key`) as one stack; write each run directory given (module docstring).

    Parameters
    ----------
    configs : sequence of Config
        R >= 1 validated configs with equal :func:`stack_key` (ValueError otherwise).
    out_dirs : sequence of path or None, optional
        One run directory per config (None: not written): config.json, history.jsonl, summary.json,
        embeddings.npz, as :func:`ncgeom.experiments.run` writes them.
    progress : bool
        A tqdm bar over epochs.

    Returns
    -------
    list of Result
        One per config, in order; status "completed" or "diverged" (never raises on divergence).
    """
    import torch

    from ncgeom.experiments.stacked.adam import StackedAdam  # these modules import torch (heavy)
    from ncgeom.experiments.stacked.loss import stacked_weighted
    from ncgeom.experiments.stacked.models import StackedEncoder
    from ncgeom.losses import batch_loss, make_psi
    from ncgeom.models import build_model

    configs = list(configs)
    if not configs or not all(isinstance(c, Config) for c in configs):
        raise ValueError("configs must be a non-empty sequence of ncgeom.experiments.Config")
    if not all(stackable(c) for c in configs):  # one run at a time (sweep.plan_units)
        raise ValueError("image data sets and batches='shuffle' are not stacked: train each with ncgeom.experiments.run")
    if not can_stack(configs):
        keys = sorted({repr(stack_key(c)) for c in configs})
        raise ValueError(f"configs must share one stack_key (model sizes, N, d, batch, epochs, ...), got {len(keys)}: {keys[:2]}")
    dirs = list(out_dirs) if out_dirs is not None else [None] * len(configs)
    if len(dirs) != len(configs):
        raise ValueError(f"out_dirs must have one entry per config ({len(configs)}), got {len(dirs)}")
    for c in configs:
        check_run_memory(c)
    require_within_budget("stack size", stack_memory_bytes(configs), what=f"a stack of {len(configs)} runs")
    head = configs[0]
    device = check_device(head.device)  # one device per stack (STACK_FIELDS)
    start = time.perf_counter()
    dtype = getattr(torch, head.dtype)
    sampled = head.estimator == "sampled"
    per_run = sampled or head.convention != "theory"  # the stacked kernel computes the theory's pairs only
    noise = head.positives == "noise"

    runs: list[_Run] = []
    models = []
    for config, out_dir in zip(configs, dirs, strict=True):
        run_dir = prepare_run_dir(out_dir)
        data_rng, init_rng, batch_rng, init_generator = seed_streams(config.seed)
        data = make_data(config, rng=data_rng)
        models.append(build_model(  # on the CPU, from the run's own streams; the stack is moved to the device
            config.model, dim=config.embedding_dim, norm=config.norm, num_samples=data.num_train,
            input_dim=data.input_dim, labels=data.y_train, hidden_dim=config.hidden_dim, depth=config.depth,
            init=config.init, init_scale=config.init_scale, init_noise=config.init_noise,
            generator=init_generator, rng=init_rng, dtype=dtype,
        ))
        generator = step_generator(init_generator, device)
        nc_val, nc_source = run_nc_value(config)
        psi = make_psi(config.psi, tau=config.tau, margin=config.margin) if sampled else "infonce"
        runs.append(_Run(config, data, batch_rng, generator, nc_val, nc_source, psi, run_dir,
                         initial=EpochRecord(0, None, nc_val, None)))
    encoder = StackedEncoder.from_models(head.model, models, norm=head.norm, device=device)  # type: ignore[arg-type]  # no ResNet (above)
    del models
    indexed = encoder.takes_indices
    x_train = [torch.as_tensor(r.data.x_train, dtype=dtype, device=device) for r in runs]
    x_test = [torch.as_tensor(r.data.x_test, dtype=dtype, device=device) for r in runs]
    x_stack = None if indexed else torch.stack(x_train)
    y_stack = torch.stack([torch.as_tensor(r.data.y_train, device=device) for r in runs])
    supervised = torch.tensor([is_supervised(r.config.setting) for r in runs], device=device)
    # per-run scalars stay float64 on the CPU: stacked_weighted converts them to z's dtype and device
    tilt = torch.tensor([effective_beta(r.config.setting, r.config.beta) for r in runs], dtype=torch.float64)
    tau = torch.tensor([r.config.tau for r in runs], dtype=torch.float64)
    k = None if head.num_negatives == "batch" else int(head.num_negatives)
    band = 2 if noise else int(class_balanced_counts(len(np.unique(runs[0].data.y_train)), head.batch_size).max())
    optimizer = StackedAdam(encoder.params, lr=[c.lr for c in configs], weight_decay=[c.weight_decay for c in configs])
    row_ids = torch.arange(len(runs), device=device)[:, None]
    # The stacked kernel sorts each batch by label (stable) and scatters dZ back; a batch of table rows
    # (unconstrained) given in that order already gives the same z, loss and table gradient bit for bit (each
    # table row gets the same terms), without the kernel's gather and scatter. Not for input models: the
    # order of a batch's rows enters the sums of their weight gradients.
    presort = indexed and not noise and not per_run

    def evaluate(r: int, epoch: int, loss: float | None) -> EpochRecord | None:
        run = runs[r]
        z = encoder.embed(r, None if indexed else x_train[r]).detach().to("cpu", torch.float64).numpy()
        z_test = None
        if not indexed and run.data.y_test.size:
            z_test = encoder.embed(r, x_test[r]).detach().to("cpu", torch.float64).numpy()
        return metrics_record(z, z_test, run.data, epoch, loss, run.nc_value)

    for r, run in enumerate(runs):
        initial = evaluate(r, 0, None)
        if initial is None:
            raise ValueError(f"run {r}: the initial embeddings are not finite "
                             f"(init_scale={run.config.init_scale:g}, dtype={run.config.dtype})")
        run.initial = run.last_metrics = initial
    stack_provenance = provenance()  # one process, one moment: the same record for every run of the stack
    for run in runs:
        if run.run_dir is not None:
            (run.run_dir / SUMMARY_FILE).unlink(missing_ok=True)  # unlinks a planted symlink itself, not its target
            save_config(run.run_dir, run.config, stack_provenance)
            run.history_file = HistoryWriter(run.run_dir)

    steps = math.ceil(runs[0].data.num_train / head.batch_size)
    good_state = encoder.snapshot()
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=head.epochs, unit="epoch", leave=False)
    try:
        for epoch in range(1, head.epochs + 1):
            batches = torch.from_numpy(np.stack([
                class_balanced_batches(run.data.y_train, head.batch_size, num_batches=steps, rng=run.batch_rng)
                for run in runs])).to(device)  # [R, steps, B]
            if presort:  # each batch in label order (stable): the kernel's own sort is then the identity
                batches = batches.gather(2, torch.sort(y_stack.gather(1, batches.flatten(1)).view_as(batches), dim=2,
                                                       stable=True).indices)
            for run in runs:
                run.total, run.failure = 0.0, None
            for s in range(steps):
                idx = batches[:, s]
                if noise:
                    assert x_stack is not None  # noise positives need an input model (Config checks it)
                    pairs = [two_view_batch(x_stack[r, idx[r]], scale=run.config.noise_scale, generator=run.generator)
                             for r, run in enumerate(runs)]
                    z = encoder(torch.stack([p[0] for p in pairs]))
                    labels = torch.stack([p[1] for p in pairs])
                else:
                    z = encoder(idx if indexed else x_stack[row_ids, idx])  # type: ignore[index]
                    labels = y_stack.gather(1, idx)
                stepping = [run.live and run.failure is None for run in runs]
                if per_run:
                    finite = torch.isfinite(z.detach()).flatten(1).all(1).tolist()
                    parts = []
                    for r, run in enumerate(runs):
                        if stepping[r] and not finite[r]:
                            run.failure = f"embeddings became non-finite at epoch {epoch}, step {s + 1}"
                            stepping[r] = False
                        if not stepping[r]:
                            parts.append(z[r].sum() * 0.0)
                            continue
                        c = run.config
                        parts.append(batch_loss(
                            z[r], labels[r], c.setting, beta=c.beta, tau=c.tau, num_negatives=c.num_negatives,
                            estimator=c.estimator, psi=run.psi, detach_weights=c.detach_weights, reduction="mean",
                            generator=run.generator if sampled else None, backend=c.backend,
                            convention=c.convention))
                    losses = torch.stack(parts)
                else:
                    losses = stacked_weighted(z, labels, supervised=supervised, b=tilt, tau=tau, k=k,
                                              detach_weights=head.detach_weights, band_width=band)
                values = losses.detach().tolist()
                for r, run in enumerate(runs):
                    if not stepping[r]:
                        continue
                    if not math.isfinite(values[r]):
                        run.failure = f"loss became non-finite ({values[r]}) at epoch {epoch}, step {s + 1}"
                        stepping[r] = False
                        continue
                    run.total += values[r]
                if not any(stepping):
                    continue
                optimizer.zero_grad()
                losses.sum().backward()
                optimizer.step()
                for r in range(len(runs)):
                    if not stepping[r]:  # frozen (diverged before) or failing now: no update
                        encoder.restore(r, good_state)
            for r, run in enumerate(runs):
                if not run.live:
                    continue
                record: EpochRecord | None = None
                if run.failure is None:
                    mean_loss = run.total / steps
                    if epoch % head.metrics_every == 0 or epoch == head.epochs:
                        record = evaluate(r, epoch, mean_loss)
                        if record is None:
                            run.failure = f"embeddings became non-finite at epoch {epoch}"
                    else:
                        record = EpochRecord(epoch, mean_loss, run.nc_value, mean_loss - run.nc_value)
                if record is None:
                    encoder.restore(r, good_state)
                    run.live = False
                    run.status, run.message = "diverged", f"{run.failure}; kept the state of the last complete epoch"
                    continue
                record = dataclasses.replace(record, time_s=time.perf_counter() - start)
                run.history.append(record)
                if record.metrics is not None:
                    run.last_metrics = record
                if run.history_file is not None:
                    # rewritten at the metric epochs and at the end (close), not every epoch: a stack killed
                    # before its end reruns whole, so the file only shows progress (HistoryWriter)
                    run.history_file.append(record, write=record.metrics is not None)
            good_state = encoder.snapshot()
            if bar is not None:
                bar.update(1)
                bar.set_postfix(live=sum(run.live for run in runs))
            if not any(run.live for run in runs):
                break
    finally:
        if bar is not None:
            bar.close()
    results = []
    for r, run in enumerate(runs):
        if run.history_file is not None:
            run.history_file.close()
        if run.status == "completed":
            run.message = f"trained {run.config.epochs} epochs"
        if run.history and run.history[-1].metrics is None:  # diverged after an epoch skipped by metrics_every
            run.last_metrics = evaluate(r, run.history[-1].epoch, run.history[-1].loss) or run.last_metrics
        z_final = encoder.embed(r, None if indexed else x_train[r]).detach().to("cpu", torch.float64).numpy()
        assert run.last_metrics is not None  # set from the initial state above
        result = Result(
            config=run.config, status=run.status, message=run.message, history=tuple(run.history),
            initial=run.initial, final=run.last_metrics, nc_value=run.nc_value, nc_value_source=run.nc_source,
            embeddings=z_final, labels=run.data.y_train.copy(), wall_time_s=time.perf_counter() - start,
        )
        if run.run_dir is not None:
            write_run_outputs(run.run_dir, result)
        results.append(result)
    return results
