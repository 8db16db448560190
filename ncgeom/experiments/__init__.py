"""Deprecated: the names of ``ncgeom.experiments`` now live in :mod:`ncgeom.runs` and :mod:`ncgeom.campaigns`.

``from ncgeom.experiments import Config, run`` keeps working for one release, with a DeprecationWarning naming the
new home (CHANGELOG.md lists every moved name); the submodules (``ncgeom.experiments.train``, ...) are gone.
"""

from __future__ import annotations

import importlib
import warnings

#: Each public name of the former package and its new module.
MOVED: dict[str, str] = {
    **dict.fromkeys(("Config", "config_fields", "config_from_dict", "run", "make_data", "run_nc_value", "Result",
                     "EpochRecord", "RunSummary", "SavedRun", "load_run", "load_runs"), "ncgeom.runs"),
    **dict.fromkeys(("SweepSpec", "spec_names", "load_spec", "expand"), "ncgeom.campaigns.spec"),
    **dict.fromkeys(("RunRecord", "SweepResult", "run_sweep"), "ncgeom.campaigns.sweep"),
    **dict.fromkeys(("make_executor", "dask_executor"), "ncgeom.campaigns.executors"),
    **dict.fromkeys(("Claim", "ClaimRecord", "ClaimResult", "CLAIMS", "evaluate_claim", "run_claims"),
                    "ncgeom.campaigns.claims"),
}

__all__: list[str] = []  # nothing is defined here; every name is forwarded (module docstring)


def __getattr__(name: str):
    home = MOVED.get(name)
    if home is None:
        raise AttributeError(f"module 'ncgeom.experiments' has no attribute {name!r} (the package moved to "
                             "ncgeom.runs and ncgeom.campaigns; see CHANGELOG.md)")
    warnings.warn(f"ncgeom.experiments.{name} moved to {home}.{name}; ncgeom.experiments will be removed in the next "
                  "release", DeprecationWarning, stacklevel=2)
    return getattr(importlib.import_module(home), name)
