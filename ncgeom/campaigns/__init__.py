"""Campaigns: many runs planned, trained and judged together (docs/experiments.md; docs/theory.md, section 9).

- :mod:`.spec`: sweep specs (TOML; the claim specs ship in ``specs/``), :func:`load_spec`, :func:`expand`;
- :mod:`.plan`: the configs of a sweep, the checks before its first run, its units (:func:`plan_units`: the
  engine's word, ``stacked`` or ``sequential``, decides which driver of :mod:`ncgeom.runs` trains each run);
- :mod:`.executors`: where units run (none, a process pool whose workers die with their parent, a Dask cluster);
  :mod:`.units`: running the units on one and collecting every run's outcome;
- :mod:`.sweep`: :func:`run_sweep` (resumable, locked folder), summary.csv; :mod:`.records`: sweep.json;
- :mod:`.claims`: each claim of docs/theory.md, section 9 with its id, statement, spec and evaluation;
  :func:`run_claims` writes ``claims/<id>.json``; :mod:`.evaluations`: the verdict rules;
- :mod:`.compare`: runs side by side, grouped by grid point with intervals over seeds (``ncgeom compare``);
  :mod:`.summarize`: the same per grid point of any sweep folder (``ncgeom summarize``).

Importing this package does not import torch; training does.
"""

from ncgeom.campaigns.claims import CLAIMS, Claim, ClaimRecord, ClaimResult, evaluate_claim, run_claims
from ncgeom.campaigns.compare import Comparison, compare_runs, load_paths
from ncgeom.campaigns.executors import dask_executor, make_executor
from ncgeom.campaigns.plan import plan_units, sweep_configs
from ncgeom.campaigns.records import SweepRecord
from ncgeom.campaigns.spec import SweepSpec, expand, load_spec, spec_names
from ncgeom.campaigns.summarize import summarize_sweep
from ncgeom.campaigns.sweep import RunRecord, SweepResult, run_sweep

__all__ = [
    "SweepSpec",
    "spec_names",
    "load_spec",
    "expand",
    "plan_units",
    "sweep_configs",
    "make_executor",
    "dask_executor",
    "RunRecord",
    "SweepResult",
    "SweepRecord",
    "run_sweep",
    "Claim",
    "ClaimRecord",
    "ClaimResult",
    "CLAIMS",
    "evaluate_claim",
    "run_claims",
    "Comparison",
    "compare_runs",
    "load_paths",
    "summarize_sweep",
]
