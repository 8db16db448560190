"""Runs: a config -> one training loop -> a run directory and a Result (docs/experiments.md).

- :mod:`.config`: :class:`Config` (frozen, validated; every field documented);
- :mod:`.setup`: seed streams, device, data, the encoder of vector data, the prepared batch loss;
  :mod:`.nc_reference`: :func:`run_nc_value`, the loss at NC a run is compared with;
- :mod:`.loop`: :func:`~ncgeom.runs.loop.train`, the one loop of every driver (step, epoch end, rollback,
  history, stopping, finish);
- drivers, each holding only what differs: :mod:`.single` (vector data), :mod:`.images` (a ResNet on image files,
  checkpoints), :mod:`.stacked` (R runs of equal shapes as one computation); :func:`run` picks the first two;
- the files of a run directory, each with one owner: :mod:`.records` (config.json, history.jsonl, summary.json,
  :func:`load_run` -> :class:`SavedRun`), :mod:`.embeddings` (embeddings.npz), :mod:`.checkpoint` (checkpoint.pt),
  :mod:`.folder` (:class:`~ncgeom.runs.folder.RunFolder`, the one writer), :mod:`.integrity` (is a finished run
  whole?); :mod:`.result`: :class:`Result`;
- :mod:`.budget`: the memory a run or a stack needs, checked before anything is allocated;
- :mod:`.monitor`: :class:`~ncgeom.runs.monitor.NCMonitor`, the metrics of a user's own training loop written as a
  run directory (the same files, read by :func:`load_run`, ``ncgeom compare`` and ``ncgeom plot``).

Importing this package does not import torch; training does.
"""

from ncgeom.runs.config import Config, config_fields, config_from_dict
from ncgeom.runs.dispatch import run
from ncgeom.runs.monitor import NCMonitor
from ncgeom.runs.nc_reference import run_nc_value
from ncgeom.runs.records import EpochRecord, RunSummary, SavedRun, load_run, load_runs
from ncgeom.runs.result import Result
from ncgeom.runs.setup import make_data, seed_streams
from ncgeom.runs.stacked import run_stack

__all__ = [
    "Config",
    "config_fields",
    "config_from_dict",
    "run",
    "run_stack",
    "NCMonitor",
    "make_data",
    "seed_streams",
    "run_nc_value",
    "Result",
    "EpochRecord",
    "RunSummary",
    "SavedRun",
    "load_run",
    "load_runs",
]
