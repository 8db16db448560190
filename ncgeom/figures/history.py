"""History curves of saved runs: one metric against the epoch, the mean over seeds with a band (``ncgeom plot``).

:func:`plot_history` draws runs read from their directories (:func:`ncgeom.runs.load_run`: ``ncgeom train``,
``ncgeom sweep`` and :class:`ncgeom.runs.NCMonitor` runs alike), never retraining: the runs of one grid point (equal
configs but for the seed, :func:`ncgeom.campaigns.compare.group_by_point`) are one curve, the mean over the seeds at
each evaluated epoch, with a band from the smallest to the largest seed (:func:`ncgeom.figures.runs.seed_band`,
:data:`~ncgeom.figures.runs.BAND_TEXT`). The legend names the fields that differ between the curves, each where the
run reads it (:func:`ncgeom.campaigns.compare.point_labels`). The NC thresholds of the claims are drawn for
etf_distance and within_class, the DC threshold for spectrum_min. Importing this module imports matplotlib.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ncgeom.atomic_io import atomic_write_bytes
from ncgeom.campaigns.compare import METRICS, check_metrics, first_nc_epoch, group_by_point, point_labels
from ncgeom.figures.runs import BAND_TEXT, seed_band, spectrum_floor_series
from ncgeom.figures.style import DPI, color_cycle, new_figure
from ncgeom.metrics.outcome import DC_SPECTRUM, NC_ETF, NC_WITHIN
from ncgeom.runs.records import SavedRun

__all__ = ["plot_history", "PLOT_FORMATS", "run_series", "caption"]

#: The image formats :func:`plot_history` writes, by the output file's extension.
PLOT_FORMATS: tuple[str, ...] = ("png", "pdf", "svg")
_THRESHOLDS = {"etf_distance": (NC_ETF, "NC_ETF"), "within_class": (NC_WITHIN, "NC_WITHIN"),
               "spectrum_min": (DC_SPECTRUM, "DC_SPECTRUM")}
_LOG_SCALE = frozenset({"etf_distance", "within_class", "nc1", "spectrum_min", "unit_norm", "zero_sum",
                        "equal_inner_product"})


def run_series(run: SavedRun, metric: str) -> tuple[list[float], list[float]]:
    """(epochs, values) of ``metric`` (:data:`ncgeom.campaigns.compare.METRICS` but first_nc_epoch) over a run's
    records, from epoch 0; missing values skipped."""
    if metric == "spectrum_min":
        return spectrum_floor_series(run)
    if metric == "rel_gap":
        epochs, values = [], []
        for r in run.records:
            if r.loss is not None and r.nc_value:
                epochs.append(float(r.epoch))
                values.append((r.loss - r.nc_value) / abs(r.nc_value))
        return epochs, values
    return run.series(metric)


def caption(metric: str) -> str:
    """What a :func:`plot_history` figure shows, in words (``ncgeom plot`` prints it)."""
    dotted = " Dotted: the mean first epoch inside the NC thresholds." if metric in ("etf_distance", "within_class") else ""
    dashed = f" Dashed: the threshold {_THRESHOLDS[metric][1]} of the claims' rule." if metric in _THRESHOLDS else ""
    return BAND_TEXT + dashed + dotted


def plot_history(runs: Sequence[SavedRun], out: str | Path, *, metric: str = "etf_distance",
                 title: str | None = None, keys: Sequence[str] | None = None) -> Path:
    """Draw ``metric`` against the epoch for ``runs`` into the image file ``out`` (module docstring); return it.

    ValueError for no runs, a metric outside :data:`~ncgeom.campaigns.compare.METRICS` (first_nc_epoch is a
    number, not a curve), an extension other than .png, .pdf or .svg, or runs without a value of the metric.
    """
    if not runs:
        raise ValueError("runs must hold at least one run")
    metric = check_metrics([metric], option="metric")[0]
    if metric == "first_nc_epoch":
        raise ValueError("metric first_nc_epoch is one number per run (ncgeom compare shows it), not a curve; pick "
                         f"one of {', '.join(m for m in METRICS if m != 'first_nc_epoch')}")
    path = Path(out)
    fmt = path.suffix.lower().lstrip(".")
    if fmt not in PLOT_FORMATS:
        raise ValueError(f"out must end in {', '.join('.' + f for f in PLOT_FORMATS)}, got {path.name!r}")
    groups = group_by_point(runs)
    labels = point_labels([g[0].config for g in groups], keys=keys)
    fig, ax = new_figure(width=7.0, height=4.2, squeeze=True)
    drawn = 0
    positive = True
    for color, label, group in zip(color_cycle(len(groups)), labels, groups):
        band = seed_band([run_series(r, metric) for r in group])
        if band.x.size == 0:
            continue
        drawn += 1
        seeds = f" ({len(group)} seeds)" if len(group) > 1 else ""
        nc = [first_nc_epoch(r) for r in group]
        ax.plot(band.x, band.mean, color=color, lw=1.6, label=f"{label}{seeds}")
        if len(group) > 1:
            ax.fill_between(band.x, band.lo, band.hi, color=color, alpha=0.2, lw=0)
        if metric in ("etf_distance", "within_class") and all(e is not None for e in nc):
            ax.axvline(float(np.mean([e for e in nc if e is not None])), color=color, ls=":", lw=0.8)
        positive = positive and bool(np.all(band.lo > 0))
    if not drawn:
        raise ValueError(f"no run has a value of {metric} in its history ({len(runs)} runs)")
    if metric in _THRESHOLDS:
        value, name = _THRESHOLDS[metric]
        ax.axhline(value, color="#555555", ls="--", lw=0.9, label=f"{name} = {value:g}")
    if metric in _LOG_SCALE and positive:
        ax.set_yscale("log")
    ax.set_xlabel("epoch")
    ax.set_ylabel(metric)
    ax.set_title(title or f"{metric} over training ({len(runs)} runs, {len(groups)} grid points)", fontsize=10)
    ax.legend(fontsize=7, loc="best")
    buf = io.BytesIO()
    fig.savefig(buf, format=fmt, dpi=DPI)
    import matplotlib.pyplot as plt

    plt.close(fig)
    return atomic_write_bytes(path, buf.getvalue())
