"""Runs side by side: their final values, the first epoch inside the NC thresholds, and intervals over seeds.

``ncgeom compare RUN...`` and ``ncgeom summarize SWEEP`` (docs/experiments.md, "Compare, plot and summarize runs")
print a :class:`Comparison`: the runs grouped by grid point (their configs equal but for the seed,
:func:`group_by_point`), one row per point with, for each metric, the mean over its seeds and the 95 % Student
t-interval of that mean (:func:`ncgeom.campaigns.rules.mean_interval`, the intervals of the claims: of log10 for spectrum_min, shown back
on the linear scale, a geometric mean; none with one seed), the verdict NC / DC / neither of each run's final metrics (:func:`ncgeom.metrics.classify_geometry`, the
claims' thresholds) and the first epoch at which a run was inside the NC thresholds (etf_distance < NC_ETF and
within_class < NC_WITHIN; the loss criterion of the claims aside).

A row's label names the fields that differ between the compared points, each only where the run reads it
(:meth:`ncgeom.runs.Config.applies`: no beta for an SCL run, whatever the spec's base says).

Every run is read through :func:`ncgeom.runs.load_run` (the owner of the run-directory format; a run of
:class:`ncgeom.runs.NCMonitor` reads the same); an unfinished run is compared at its last record with metrics.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ncgeom.campaigns.records import SweepRecord
from ncgeom.campaigns.rules import INTERVAL_METHOD, Estimate, mean_interval
from ncgeom.metrics.outcome import NC_ETF, NC_WITHIN, classify_geometry, spectrum_min
from ncgeom.metrics.record import METRIC_NAMES
from ncgeom.runs.config import Config, config_fields
from ncgeom.runs.mechanism import nc_entry_epoch
from ncgeom.runs.records import CONFIG_FILE, EpochRecord, SavedRun, load_run

__all__ = ["COMPARE_METRICS", "METRICS", "Row", "Comparison", "run_value", "final_record", "first_nc_epoch",
           "group_by_point", "point_labels", "compare_runs", "load_paths", "check_metrics"]

#: The metrics a comparison shows by default.
COMPARE_METRICS: tuple[str, ...] = ("loss", "gap", "rel_gap", "etf_distance", "within_class", "spectrum_min",
                                    "ncc_accuracy", "test_ncc_accuracy", "first_nc_epoch")
#: Every metric a comparison (or a plot) can show: the scalar fields of a record, the metrics of docs/theory.md
#: section 8 but the spectrum (a list: its smallest value is ``spectrum_min``), and ``rel_gap``, ``first_nc_epoch``.
METRICS: tuple[str, ...] = ("loss", "gap", "rel_gap", "test_ncc_accuracy", "mean_norm",
                            *(m for m in METRIC_NAMES if m != "spectrum"), "spectrum_min", "first_nc_epoch")
#: Config fields that say where or how often a run was measured, not what was trained: never in a label.
_NOT_IN_LABELS = frozenset({"seed", "device", "backend", "metrics_every", "workers", "eval_batch_size",
                            "checkpoint_every", "data_dir"})


def check_metrics(metrics: Sequence[str], *, option: str = "metrics") -> tuple[str, ...]:
    """``metrics`` if each is one of :data:`METRICS`, else ValueError naming ``option`` and the accepted names."""
    unknown = [m for m in metrics if m not in METRICS]
    if unknown or not metrics:
        raise ValueError(f"{option} must be among {', '.join(METRICS)}, got {', '.join(map(repr, unknown)) or 'none'}")
    return tuple(dict.fromkeys(metrics))


def final_record(run: SavedRun) -> EpochRecord | None:
    """The summary's final record, or for an unfinished run its last record with metrics (None when it has none)."""
    if run.summary is not None:
        return run.summary.final
    return next((r for r in reversed(run.records) if r.metrics is not None), None)


def first_nc_epoch(run: SavedRun) -> int | None:
    """The first epoch whose record is inside the NC thresholds (etf_distance < NC_ETF, within_class < NC_WITHIN):
    :func:`ncgeom.runs.mechanism.nc_entry_epoch` of the run's records."""
    return nc_entry_epoch(run.records)


def run_value(run: SavedRun, metric: str) -> float | None:
    """The value of ``metric`` (:data:`METRICS`) at the run's final record (:func:`final_record`), None if absent."""
    if metric == "first_nc_epoch":
        epoch = first_nc_epoch(run)
        return None if epoch is None else float(epoch)
    record = final_record(run)
    if record is None:
        return None
    if metric == "spectrum_min":
        return spectrum_min(record.value("spectrum"))
    if metric == "rel_gap":
        if record.loss is None or not record.nc_value:
            return None
        return (record.loss - record.nc_value) / abs(record.nc_value)
    value = record.value(metric)
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else None


def group_by_point(runs: Sequence[SavedRun]) -> list[tuple[SavedRun, ...]]:
    """The runs grouped by grid point (the config with seed 0), in order of first appearance, each sorted by seed."""
    groups: dict[str, list[SavedRun]] = {}
    for run in runs:
        groups.setdefault(run.config.replace(seed=0).to_json(), []).append(run)
    return [tuple(sorted(group, key=lambda r: r.config.seed)) for group in groups.values()]


def _short(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def point_labels(configs: Sequence[Config], *, keys: Sequence[str] | None = None) -> list[str]:
    """A label per config: ``field=value`` for each field that differs between them (or of ``keys``), shown only
    where the config reads it (:meth:`Config.applies`); "-" when nothing differs.

    >>> point_labels([Config(setting="scl", beta=5.0), Config(setting="hscl", beta=2.0)])
    ['setting=scl', 'setting=hscl, beta=2']
    """
    if keys is None:
        names = [f.name for f in config_fields() if f.name not in _NOT_IN_LABELS]
        # a field differs when the configs that read it disagree, or only some of them read it (beta of HSCL vs SCL)
        keys = [n for n in names if len({repr(getattr(c, n)) if c.applies(n) else None for c in configs}) > 1]
    keys = [k for k in keys if k not in _NOT_IN_LABELS]
    return [", ".join(f"{k}={_short(getattr(c, k))}" for k in keys if c.applies(k)) or "-" for c in configs]


@dataclass(frozen=True)
class Row:
    """One grid point: its label, its runs (names and seeds), their statuses and verdicts, and each metric's mean
    over the seeds with its interval (:class:`~ncgeom.campaigns.rules.Estimate`)."""

    label: str
    names: tuple[str, ...]
    seeds: tuple[int, ...]
    statuses: tuple[str, ...]
    verdicts: tuple[str, ...]
    values: dict[str, Estimate] = field(repr=False)

    def verdict_text(self) -> str:
        counts = {v: self.verdicts.count(v) for v in dict.fromkeys(self.verdicts)}
        return ", ".join(f"{v} {n}/{len(self.verdicts)}" if len(self.verdicts) > 1 else v for v, n in counts.items())


@dataclass(frozen=True)
class Comparison:
    """Rows of grid points and the metrics they show (module docstring); :meth:`to_markdown`, :meth:`to_csv`,
    :meth:`to_dict` (JSON)."""

    title: str
    metrics: tuple[str, ...]
    rows: tuple[Row, ...]

    @staticmethod
    def _cell(e: Estimate, runs: int) -> str:
        if e.n == 0:
            return "n/a"
        text = f"{e.mean:.4g}" if math.isnan(e.lo) else f"{e.mean:.4g} [{e.lo:.4g}, {e.hi:.4g}]"
        return text if e.n == runs else f"{text} ({e.n} of {runs} runs)"

    def to_markdown(self) -> str:
        head = ["point", "runs", "seeds", "verdict", *self.metrics]
        lines = [f"### {self.title}", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        for r in self.rows:
            runs = r.names[0] if len(r.names) == 1 else f"{len(r.names)} runs"
            cells = [r.label, runs, ",".join(map(str, r.seeds)), r.verdict_text(),
                     *(self._cell(r.values[m], len(r.names)) for m in self.metrics)]
            lines.append("| " + " | ".join(c.replace("|", "/") for c in cells) + " |")
        lines += ["", f"Values: the final record of each run; with several seeds, the mean [and its 95 % interval: "
                      f"{INTERVAL_METHOD}], over the runs that have the value (\"k of n runs\" when not all do). "
                      f"verdict: NC / DC / neither of the final metrics (the claims' rule); first_nc_epoch: the first "
                      f"epoch with etf_distance < {NC_ETF:g} and within_class < {NC_WITHIN:g}."]
        return "\n".join(lines)

    def to_csv(self) -> str:
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        writer.writerow(["point", "runs", "seeds", "n", "verdicts",
                         *(f"{m}{suffix}" for m in self.metrics for suffix in ("", "_lo", "_hi"))])
        for r in self.rows:
            values = []
            for m in self.metrics:
                e = r.values[m]
                values += ["" if math.isnan(x) else f"{x:.6g}" for x in (e.mean, e.lo, e.hi)]
            writer.writerow([r.label, " ".join(r.names), " ".join(map(str, r.seeds)), len(r.names), " ".join(r.verdicts),
                             *values])
        return buf.getvalue()

    def to_dict(self) -> dict[str, Any]:
        return {"title": self.title, "metrics": list(self.metrics), "interval_method": INTERVAL_METHOD,
                "rows": [{"point": r.label, "runs": list(r.names), "seeds": list(r.seeds), "statuses": list(r.statuses),
                          "verdicts": list(r.verdicts),
                          "values": {m: {"mean": _none(r.values[m].mean), "lo": _none(r.values[m].lo),
                                         "hi": _none(r.values[m].hi), "n": r.values[m].n} for m in self.metrics}}
                         for r in self.rows]}


def _none(x: float) -> float | None:
    return None if math.isnan(x) else float(x)


def _verdict(run: SavedRun) -> str:
    record = final_record(run)
    if record is None or record.metrics is None:
        return "undefined"
    return classify_geometry(record.metrics, dim=run.config.embedding_dim, num_classes=run.config.classes)


def compare_runs(runs: Sequence[SavedRun], *, metrics: Sequence[str] = COMPARE_METRICS,
                 keys: Sequence[str] | None = None, title: str = "runs") -> Comparison:
    """The :class:`Comparison` of ``runs`` (module docstring); ``keys`` fix the label fields (a sweep's grid keys)."""
    if not runs:
        raise ValueError("runs must hold at least one run")
    metrics = check_metrics(metrics)
    groups = group_by_point(runs)
    labels = point_labels([g[0].config for g in groups], keys=keys)
    rows = []
    for label, group in zip(labels, groups):
        rows.append(Row(label, tuple(r.path.name for r in group), tuple(r.config.seed for r in group),
                        tuple("unfinished" if r.summary is None else r.summary.status for r in group),
                        tuple(_verdict(r) for r in group),
                        {m: _estimate([run_value(r, m) for r in group], log=m == "spectrum_min") for m in metrics}))
    return Comparison(title, metrics, tuple(rows))


def load_paths(paths: Sequence[str | Path]) -> list[SavedRun]:
    """The runs of ``paths``: a run directory (its config.json), or a sweep folder (sweep.json: its runs with a
    config.json). ValueError, one line naming the path, for anything else or a run of another format."""
    runs: list[SavedRun] = []
    for given in paths:
        path = Path(given)
        if not path.is_dir():
            raise ValueError(f"{path}: no such folder (a run directory or a sweep folder)")
        if (path / CONFIG_FILE).is_file():
            runs.append(_load(path))
            continue
        record = SweepRecord.load(path)
        if record is None:
            raise ValueError(f"{path}: not a run directory (no {CONFIG_FILE}) nor a sweep folder (no sweep.json)")
        found = [path / e.name for e in record.runs if (path / e.name / CONFIG_FILE).is_file()]
        if not found:
            raise ValueError(f"{path}: the sweep has no run directory yet ({len(record.runs)} runs listed in sweep.json)")
        runs += [_load(run_dir) for run_dir in found]
    return runs


def _load(run_dir: Path) -> SavedRun:
    try:
        return load_run(run_dir)
    except (ValueError, TypeError, KeyError) as exc:
        text = " ".join(str(exc).split())[:300]
        raise ValueError(f"{run_dir}: not a run directory this version of ncgeom reads ({text})") from None


def _estimate(values: list, *, log: bool) -> Estimate:
    """:func:`mean_interval` of ``values``; with ``log`` (spectrum minima, which span decades), of their log10,
    returned on the linear scale (10 ** mean: the geometric mean, and 10 ** the bounds)."""
    e = mean_interval(values, log=log)
    if not log:
        return e
    mean, lo, hi = (10.0 ** x if math.isfinite(x) else x for x in (e.mean, e.lo, e.hi))
    return Estimate(mean, lo, hi, e.n, log=True)
