"""The plan of a sweep: its configs (:func:`sweep_configs`), what is checked before the first run, and its units.

A unit is the work of one task handed to an executor (:mod:`ncgeom.campaigns.executors`), trained by one driver of
:mod:`ncgeom.runs`, said by its ``kind``:

- ``"run"``: one config, trained by :func:`ncgeom.runs.run` (the single or the image driver);
- ``"stack"``: configs of one :func:`~ncgeom.runs.stacked.stack_key`, trained together by
  :func:`ncgeom.runs.stacked.run_stack`.

The engine (``ncgeom.vocabulary.ENGINES``: ``stacked``, the default, or ``sequential``) decides the plan
(:func:`plan_units`), and the plan alone decides which driver trains a run: :func:`train_unit` is the one place
that dispatches on it. A run is always trained by the same driver whatever unit it falls in, so a run of a stack is
bitwise the same in any stack (float64; float32 too on one thread per worker) and a resumed sweep gives an
uninterrupted one's numbers.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from ncgeom.budget import memory_budget
from ncgeom.campaigns.spec import SweepSpec, expand
from ncgeom.runs import run, run_stack
from ncgeom.runs.budget import run_memory_estimate, stack_memory_bytes
from ncgeom.runs.config import Config
from ncgeom.runs.setup import check_backend, check_device
from ncgeom.runs.stacked import group_stacks, stackable
from ncgeom.validate import require_int
from ncgeom.vocabulary import DEFAULT_ENGINE, Engine, SeedSet, device_type, engine_name

__all__ = ["UnitKind", "Unit", "plan_units", "train_unit", "sweep_configs", "check_devices", "check_backends",
           "check_data_dirs"]

UnitKind = Literal["run", "stack"]


@dataclass(frozen=True)
class Unit:
    """One task of a sweep: its kind (module docstring) and the indices of its configs."""

    kind: UnitKind
    indices: tuple[int, ...]


def train_unit(kind: UnitKind, config_dicts: list[dict[str, Any]], run_dirs: list[str]) -> list[dict[str, Any]]:
    """Worker: train one unit into its run directories; return their summary.json objects in order (picklable).

    ``"run"``: the one config by :func:`ncgeom.runs.run`; ``"stack"``: the configs by
    :func:`ncgeom.runs.stacked.run_stack`.
    """
    configs = [Config(**c) for c in config_dicts]
    if kind == "run":
        [config], [run_dir] = configs, run_dirs
        return [run(config, out_dir=run_dir).summary()]
    return [r.summary() for r in run_stack(configs, out_dirs=run_dirs)]


def plan_units(configs: Sequence[Config], *, engine: Engine = DEFAULT_ENGINE, workers: int = 1,
               budget: int | None = None) -> list[Unit]:
    """The units of work of a sweep, each trained as one task (module docstring).

    ``sequential``: one "run" unit per config. ``stacked``: the stackable runs are grouped by
    :func:`~ncgeom.runs.stacked.stack_key` (first-seen order) and each group is cut into ceil(n / m) "stack" units of
    nearly equal size (they differ by at most one run), where m is the smaller of

    - ``budget / workers // per_run`` (at least 1): what one worker's share of the memory budget holds,
      with per_run = the largest :func:`~ncgeom.runs.budget.run_memory_estimate` of the group plus its share
      :func:`~ncgeom.runs.budget.stack_memory_bytes` of one run (linear in the stack size);
    - ceil(len(configs) / workers): so that every worker gets work.

    An image config (``Config.is_image``, a ResNet) or one with ``batches="shuffle"`` is not stackable
    (:func:`~ncgeom.runs.stacked.stackable`): a "run" unit of its own in both engines, listed first. ``budget``:
    bytes (default :func:`ncgeom.budget.memory_budget`). Sizing a stack imports torch.
    """
    engine = engine_name(engine)
    workers = require_int("workers", workers, min_value=1)
    if engine == "sequential":
        return [Unit("run", (i,)) for i in range(len(configs))]
    share = (memory_budget() if budget is None else budget) // workers
    spread = -(-len(configs) // workers)
    units = [Unit("run", (i,)) for i, c in enumerate(configs) if not stackable(c)]  # images, shuffled batches
    together = [i for i, c in enumerate(configs) if stackable(c)]
    for local in group_stacks([configs[i] for i in together]):
        group = [together[i] for i in local]
        per_run = max(sum(part[2] for part in run_memory_estimate(configs[i])) for i in group)
        per_run += stack_memory_bytes([configs[group[0]]])
        size = max(1, min(share // max(per_run, 1), spread))
        count = -(-len(group) // size)
        bounds = [len(group) * k // count for k in range(count + 1)]
        units += [Unit("stack", tuple(group[a:b])) for a, b in zip(bounds, bounds[1:]) if b > a]
    return units


def sweep_configs(spec: SweepSpec, *, scale: str = "quick", seeds: SeedSet = "confirmatory", device: str | None = None,
                  data_dir: str | Path | None = None) -> list[Config]:
    """The configs of ``spec`` at ``scale`` and seed set ``seeds`` (:func:`~ncgeom.campaigns.spec.expand`), each with
    ``device`` in
    place of its own when given ("cpu", "cuda" or "cuda:N"; ValueError naming ``device`` otherwise), and each
    image config (``Config.is_image``) with ``data_dir`` in place of its own when given (made absolute; the
    synthetic configs have no data folder and keep theirs).

    The device and the data folder are config fields: a CPU config keeps its run name, a CUDA one gets its own
    (docs/experiments.md, "Devices"), and an image run's name depends on its data folder (resume with the same
    ``--data-dir``).
    """
    configs = expand(spec, scale=scale, seeds=seeds)
    if data_dir is not None:
        if not isinstance(data_dir, (str, Path)) or not str(data_dir):
            raise ValueError(f"data_dir must be a folder path, got {data_dir!r}")
        folder = str(Path(data_dir).expanduser().absolute())
        configs = list(dict.fromkeys(c.replace(data_dir=folder) if c.is_image else c for c in configs))
    if device is None:
        return configs
    device_type(device, name="device")
    return list(dict.fromkeys(c.replace(device=device) for c in configs))


def check_data_dirs(folders: Iterable[str | None]) -> None:
    """Every image run's data folder exists (ValueError naming it and --data-dir otherwise): checked before the
    first run, so that a wrong ``--data-dir`` is one line, not one failed run per config. The layout and the
    files are checked by each run when it reads them (docs/images.md, "Errors")."""
    for folder in dict.fromkeys(folders):
        if folder is None or not Path(folder).expanduser().is_dir():
            raise ValueError(f"data_dir {folder}: no such folder (give the data set's folder with --data-dir; "
                             "docs/images.md, 'Layouts accepted')")


def check_devices(devices: Iterable[str]) -> None:
    """:func:`~ncgeom.runs.setup.check_device` of each distinct device name (ValueError naming --device
    for one that does not exist here); "cpu" always exists and imports no torch."""
    for dev in dict.fromkeys(devices):
        if device_type(dev) != "cpu":
            check_device(dev)


def check_backends(configs: Iterable[Config]) -> None:
    """:func:`~ncgeom.runs.setup.check_backend` of every config that names the triton backend (ValueError naming
    --backend where it is not available for its device and dtype): refused before the first run, in both engines
    (the stacked kernel would ignore the backend, the sequential engine would fail each run)."""
    for config in dict.fromkeys(c for c in configs if c.backend == "triton"):
        check_backend(config, check_device(config.device))
