"""Experiments: config -> run -> run directory, sweeps over grids of configs, and the claims of docs/theory.md, section 9.

- :mod:`.config`: :class:`Config` (frozen, validated; every field documented);
- :mod:`.train`: :func:`run` (Adam on :func:`ncgeom.losses.batch_loss`, metrics per epoch) -> :class:`Result`;
- :mod:`.records`: the run-directory files, each owned by its record (:class:`EpochRecord`,
  :class:`RunSummary`, config.json) and :func:`load_run` -> :class:`SavedRun`;
- :mod:`.spec`: sweep specs (TOML; the claim specs ship in ``specs/``), :func:`load_spec`, :func:`expand`;
- :mod:`.sweep`: :func:`run_sweep` (resumable) and :func:`make_executor` (process pool or Dask), CSV table;
- :mod:`.claims`: per claim, its spec and evaluation; :func:`run_claims` writes ``claims/<id>.json``.

Importing this package does not import torch; :func:`run` does.
"""

from ncgeom.experiments.claims import CLAIMS, Claim, ClaimRecord, ClaimResult, evaluate_claim, run_claims
from ncgeom.experiments.config import Config, config_fields, config_from_dict
from ncgeom.experiments.records import EpochRecord, RunSummary, SavedRun, load_run, load_runs
from ncgeom.experiments.result import Result
from ncgeom.experiments.spec import SweepSpec, expand, load_spec, spec_names
from ncgeom.experiments.sweep import RunRecord, SweepResult, dask_executor, make_executor, run_sweep
from ncgeom.experiments.train import make_data, run, run_nc_value

__all__ = [
    "Config",
    "config_fields",
    "config_from_dict",
    "run",
    "make_data",
    "run_nc_value",
    "Result",
    "EpochRecord",
    "RunSummary",
    "SavedRun",
    "load_run",
    "load_runs",
    "SweepSpec",
    "spec_names",
    "load_spec",
    "expand",
    "RunRecord",
    "SweepResult",
    "run_sweep",
    "make_executor",
    "dask_executor",
    "Claim",
    "ClaimRecord",
    "ClaimResult",
    "CLAIMS",
    "evaluate_claim",
    "run_claims",
]
