"""Experiments: config -> run -> result, sweeps over grids of configs, and the claims of theory.md section 9.

- :mod:`.config`: :class:`Config` (frozen, validated; every field documented);
- :mod:`.train`: :func:`run` (Adam on :func:`ncgeom.losses.batch_loss`, metrics per epoch);
- :mod:`.result`: :class:`Result` and the run-directory files (config.json, history.jsonl, summary.json);
- :mod:`.sweep`: TOML sweep specs, :func:`run_sweep` (process pool or any executor, e.g. Dask), CSV table;
- :mod:`.claims`: per claim, its spec and evaluation into verdict records.

Importing this package does not import torch; :func:`run` does.
"""

from ncgeom.experiments.claims import CLAIMS, Claim, ClaimRecord, evaluate_claim, run_claim, run_claims
from ncgeom.experiments.config import Config, config_fields, config_from_dict
from ncgeom.experiments.result import Result, read_summary
from ncgeom.experiments.sweep import (
    RunRecord,
    SweepResult,
    SweepSpec,
    dask_executor,
    expand,
    load_spec,
    run_sweep,
)
from ncgeom.experiments.train import make_data, run, run_nc_value

__all__ = [
    "Config",
    "config_fields",
    "config_from_dict",
    "run",
    "make_data",
    "run_nc_value",
    "Result",
    "read_summary",
    "SweepSpec",
    "RunRecord",
    "SweepResult",
    "load_spec",
    "expand",
    "run_sweep",
    "dask_executor",
    "Claim",
    "ClaimRecord",
    "CLAIMS",
    "run_claim",
    "evaluate_claim",
    "run_claims",
]
