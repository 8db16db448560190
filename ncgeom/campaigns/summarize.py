"""A sweep at a glance: ``ncgeom summarize SWEEP``, the mean and interval of each metric per grid point.

:func:`summarize_sweep` reads a sweep folder (any spec's, a claim's or a user's) through its sweep.json
(:class:`ncgeom.campaigns.records.SweepRecord`) and its run directories (:func:`ncgeom.runs.load_run`), and gives the
:class:`~ncgeom.campaigns.compare.Comparison` of its finished runs grouped by grid point: per point, the mean over
the seeds of each metric with its 95 % Student t-interval, the verdicts, the first epoch inside the NC thresholds.
The labels are the spec's grid keys (the seed aside), each shown where the run reads it.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ncgeom.campaigns.compare import COMPARE_METRICS, Comparison, compare_runs, load_paths
from ncgeom.campaigns.records import SWEEP_FILE, SweepRecord
from ncgeom.runs.records import SUMMARY_FILE

__all__ = ["summarize_sweep"]


def summarize_sweep(folder: str | Path, *, metrics: Sequence[str] = COMPARE_METRICS) -> Comparison:
    """The per-point :class:`Comparison` of the finished runs of the sweep in ``folder`` (module docstring).

    Raises
    ------
    ValueError
        ``folder`` is missing, has no sweep.json (not a sweep folder: ``ncgeom sweep --out`` writes one), its
        sweep.json is not one, or no run of it has finished; each a line naming the folder.
    """
    path = Path(folder)
    if not path.is_dir():
        raise ValueError(f"{path}: no such folder (a sweep folder: what ncgeom sweep --out wrote)")
    record = SweepRecord.load(path)
    if record is None:
        raise ValueError(f"{path}: no {SWEEP_FILE}: not a sweep folder (ncgeom sweep --out DIR writes one; "
                         "ncgeom compare takes run directories)")
    done = [e for e in record.runs if (path / e.name / SUMMARY_FILE).is_file()]
    if not done:
        statuses = ", ".join(sorted({e.status for e in record.runs})) or "none"
        raise ValueError(f"{path}: no finished run to summarize ({len(record.runs)} runs in {SWEEP_FILE}, statuses: "
                         f"{statuses})")
    runs = load_paths([path / e.name for e in done])
    keys = [k for k in record.grid_keys if k != "seed"]
    title = f"sweep {record.name} (scale {record.scale}, {len(runs)} of {len(record.runs)} runs finished)"
    return compare_runs(runs, metrics=metrics, keys=keys, title=title)
