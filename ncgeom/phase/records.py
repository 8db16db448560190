"""The files of a phase map, each written and read back by its record type (strict keys).

A map's folder (``ncgeom phase ... --out DIR``) holds:

- ``cells.json``: :class:`PhaseMap`: what was mapped (the spec, scale, seeds, rule, panels and their axes) and one
  :class:`CellRecord` per cell of the full-resolution grid, trained or inferred, with its runs (:class:`RunEntry`);
- ``cells.csv``: the same cells, one row each (:meth:`PhaseMap.to_csv`; written, not read back);
- ``table.txt``: the short text table of the labels (:meth:`PhaseMap.table_text`; written, not read back);
- ``overlays.json``: :class:`Overlays`, the theory lines drawn over the map (:mod:`ncgeom.phase.overlays`);
- ``runs/``: the sweep folder of its runs (``sweep.json``: :class:`ncgeom.campaigns.records.SweepRecord`);
- the figures (:mod:`ncgeom.phase.figure`).

Every reader goes through these types; a file of another shape is one line naming it.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from ncgeom.atomic_io import atomic_write_json
from ncgeom.campaigns.rules import Estimate
from ncgeom.files import read_bounded
from ncgeom.validate import require_keys
from ncgeom.vocabulary import (
    CELL_LABELS,
    CELL_SOURCES,
    EVIDENCE,
    GEOMETRY_OUTCOMES,
    LINE_AXES,
    MAP_DECISIONS,
    MAP_STATUSES,
    RUN_CLASSES,
    SCALES,
    SEED_SETS,
    CellLabel,
    CellSource,
    Evidence,
    GeometryOutcome,
    LineAxis,
    MapDecision,
    MapStatus,
    RunClass,
    SeedSet,
)

__all__ = ["CELLS_FILE", "CELLS_CSV", "TABLE_FILE", "OVERLAYS_FILE", "RUNS_FOLDER", "ESTIMATED", "LABEL_CODES",
           "RunEntry", "CellRecord", "AxisRecord", "PanelRecord", "PhaseMap", "TheoryLine", "Overlays",
           "estimate_to_dict", "estimate_from_dict"]

CELLS_FILE, CELLS_CSV, TABLE_FILE, OVERLAYS_FILE, RUNS_FOLDER = (
    "cells.json", "cells.csv", "table.txt", "overlays.json", "runs")
#: The quantities a trained cell reports as a mean over its seeds with its 95 % t-interval
#: (:func:`ncgeom.campaigns.rules.mean_interval`; spectrum_min on the log10 scale).
ESTIMATED: tuple[str, ...] = ("etf_distance", "within_class", "spectrum_min", "rank_drop_epoch", "nc_entry_epoch")
#: One character per label in the text table (a trained cell in capitals, an inferred one in lower case).
LABEL_CODES: dict[str, str] = {"NC": "N", "DC": "D", "neither": "O", "undefined": "U", "not converged": "X",
                               "mixed": "~"}
_MAX_BYTES = 256 * 2**20  # a map of 10^5 runs with their trajectories stays far below


def _check(condition: bool, kind: str, message: str) -> None:
    if not condition:
        raise ValueError(f"{kind}: {message}")


def _keys(kind: str, data: Any, cls: type) -> None:
    names = {f.name for f in fields(cls)}
    require_keys(kind, data, accepted=names, required=names)


def estimate_to_dict(e: Estimate) -> dict[str, Any]:
    """An :class:`~ncgeom.campaigns.rules.Estimate` as JSON: mean, lo, hi (None when undefined), n, log."""
    return {"mean": _none(e.mean), "lo": _none(e.lo), "hi": _none(e.hi), "n": e.n, "log": e.log}


def estimate_from_dict(data: Any, kind: str = "estimate") -> Estimate:
    """The inverse of :func:`estimate_to_dict`."""
    require_keys(kind, data, accepted=("mean", "lo", "hi", "n", "log"), required=("mean", "lo", "hi", "n", "log"))
    mean, lo, hi = (math.nan if data[k] is None else float(data[k]) for k in ("mean", "lo", "hi"))
    return Estimate(mean, lo, hi, int(data["n"]), bool(data["log"]))


def _none(x: float) -> float | None:
    return float(x) if math.isfinite(x) else None


@dataclass(frozen=True)
class RunEntry:
    """One run of a trained cell: its name (folder under ``runs/``), seed, status, class (:func:`ncgeom.phase.cells.
    run_class`), the geometry of its final metrics whether or not it converged (what a "not converged" run looked like
    at its budget), its convergence, the epochs and optimizer steps it trained, its final deciding metrics, and its
    mechanism (:mod:`ncgeom.runs.mechanism`: the rank-drop and NC-entry epochs, the effective rank of the class-mean
    spectrum at each metric epoch)."""

    name: str
    seed: int
    status: str
    run_class: RunClass
    geometry: GeometryOutcome
    convergence: str | None
    epochs_run: int
    steps: int
    etf_distance: float | None
    within_class: float | None
    spectrum_min: float | None
    rank_drop_epoch: int | None
    nc_entry_epoch: int | None
    effective_rank: tuple[tuple[int, float | None], ...] = field(repr=False)

    def __post_init__(self) -> None:
        _check(self.run_class in RUN_CLASSES, "run entry", f"run_class must be one of {RUN_CLASSES}, got "
                                                           f"{self.run_class!r}")
        _check(self.geometry in GEOMETRY_OUTCOMES, "run entry", f"geometry must be one of {GEOMETRY_OUTCOMES}, got "
                                                                f"{self.geometry!r}")

    def to_dict(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["effective_rank"] = [list(p) for p in self.effective_rank]
        return out

    @classmethod
    def from_dict(cls, data: Any) -> RunEntry:
        _keys("run entry", data, cls)
        return cls(**{**data, "effective_rank": tuple((int(e), v) for e, v in data["effective_rank"])})


@dataclass(frozen=True)
class CellRecord:
    """One cell of the full-resolution grid: its panel and indices, where its label comes from (trained, or inferred by
    the refinement, :mod:`ncgeom.phase.lattice`) and at which level (the stride 2^level), the label, the number of
    its seeds in each class and in each geometry of their final metrics (converged or not), how many converged, the mean and interval of each of :data:`ESTIMATED` over its
    seeds, and its runs (none for an inferred cell)."""

    panel: int
    ix: int
    iy: int
    source: CellSource
    level: int
    label: CellLabel
    counts: Mapping[str, int]
    geometry_counts: Mapping[str, int]
    converged: int | None
    estimates: Mapping[str, Estimate] = field(repr=False)
    runs: tuple[RunEntry, ...] = field(repr=False)

    def __post_init__(self) -> None:
        _check(self.source in CELL_SOURCES, "cell", f"source must be one of {CELL_SOURCES}, got {self.source!r}")
        _check(self.label in CELL_LABELS, "cell", f"label must be one of {CELL_LABELS}, got {self.label!r}")
        _check(all(k in RUN_CLASSES for k in self.counts), "cell", f"counts must count run classes {RUN_CLASSES}")
        _check((self.source == "trained") == bool(self.runs), "cell", "a trained cell has runs, an inferred one none")

    @property
    def n_seeds(self) -> int:
        return len(self.runs)

    def counts_text(self) -> str:
        """The seeds per class, e.g. ``2 NC, 1 DC`` (``inferred`` for an inferred cell)."""
        if self.source == "inferred":
            return "inferred"
        return ", ".join(f"{n} {c}" for c, n in self.counts.items())

    def to_dict(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out.update(counts=dict(self.counts), geometry_counts=dict(self.geometry_counts), estimates={k: estimate_to_dict(e) for k, e in self.estimates.items()},
                   runs=[r.to_dict() for r in self.runs])
        return out

    @classmethod
    def from_dict(cls, data: Any) -> CellRecord:
        _keys("cell", data, cls)
        _check(isinstance(data["counts"], Mapping) and isinstance(data["estimates"], Mapping)
               and isinstance(data["runs"], list), "cell", "counts and estimates must be objects, runs a list")
        return cls(**{**data, "counts": dict(data["counts"]), "geometry_counts": dict(data["geometry_counts"]),
                      "estimates": {k: estimate_from_dict(v, f"cell estimate {k}") for k, v in data["estimates"].items()},
                      "runs": tuple(RunEntry.from_dict(r) for r in data["runs"])})


@dataclass(frozen=True)
class AxisRecord:
    """An axis as the map recorded it: name, title, the field (None for named points), the label of each value,
    the numeric values (None for a categorical axis), whether it was refined, and the config fields of each value."""

    name: str
    title: str
    config_field: str | None
    labels: tuple[str, ...]
    numeric: tuple[float, ...] | None
    refine: bool
    points: tuple[Mapping[str, Any], ...] = field(repr=False)

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_dict(cls, data: Any) -> AxisRecord:
        _keys("axis", data, cls)
        return cls(**{**data, "labels": tuple(data["labels"]),
                      "numeric": None if data["numeric"] is None else tuple(float(v) for v in data["numeric"]),
                      "points": tuple(dict(p) for p in data["points"])})


@dataclass(frozen=True)
class PanelRecord:
    """A panel as the map recorded it: its title, the config fields it fixes (over the base) and its axes."""

    title: str
    fields: Mapping[str, Any]
    x: AxisRecord
    y: AxisRecord

    def to_dict(self) -> dict[str, Any]:
        return {"title": self.title, "fields": dict(self.fields), "x": self.x.to_dict(), "y": self.y.to_dict()}

    @classmethod
    def from_dict(cls, data: Any) -> PanelRecord:
        _keys("panel", data, cls)
        return cls(data["title"], dict(data["fields"]), AxisRecord.from_dict(data["x"]), AxisRecord.from_dict(data["y"]))


@dataclass(frozen=True)
class PhaseMap:
    """``cells.json``: a map and its cells (module docstring).

    name, description, claims, spec_path : the spec; scale, seeds, seed_values : which runs; decide : the rule that
    reads a run (:mod:`ncgeom.phase.cells`); levels : the refinement (0: uniform); base : the config fields every run
    shares; panels; cells : every cell of every panel's full-resolution grid; status : complete, or incomplete with
    ``failed`` (one line per failed run); runs_trained : the runs the map trained (all levels); runs_uniform : the
    runs a uniform grid at the same resolution would train; steps : the optimizer steps of its runs; thresholds :
    the constants of the rule (NC_ETF, NC_WITHIN, DC_SPECTRUM).
    """

    name: str
    description: str
    claims: tuple[str, ...]
    spec_path: str | None
    scale: str
    seeds: SeedSet
    seed_values: tuple[int, ...]
    decide: MapDecision
    levels: int
    base: Mapping[str, Any] = field(repr=False)
    panels: tuple[PanelRecord, ...] = field(repr=False)
    cells: tuple[CellRecord, ...] = field(repr=False)
    status: MapStatus = "complete"
    failed: tuple[str, ...] = ()
    runs_trained: int = 0
    runs_uniform: int = 0
    steps: int = 0
    thresholds: Mapping[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        _check(self.scale in SCALES, "phase map", f"scale must be one of {SCALES}, got {self.scale!r}")
        _check(self.seeds in SEED_SETS, "phase map", f"seeds must be one of {SEED_SETS}, got {self.seeds!r}")
        _check(self.decide in MAP_DECISIONS, "phase map", f"decide must be one of {MAP_DECISIONS}, got {self.decide!r}")
        _check(self.status in MAP_STATUSES, "phase map", f"status must be one of {MAP_STATUSES}, got {self.status!r}")

    def cell(self, panel: int, ix: int, iy: int) -> CellRecord | None:
        """The cell at (ix, iy) of ``panel`` (None when the map has no label for it: an incomplete map)."""
        return self._index().get((panel, ix, iy))

    def _index(self) -> dict[tuple[int, int, int], CellRecord]:
        cached = self.__dict__.get("_cells_by_index")
        if cached is None:
            cached = {(c.panel, c.ix, c.iy): c for c in self.cells}
            object.__setattr__(self, "_cells_by_index", cached)
        return cached

    def label_counts(self, panel: int | None = None) -> dict[str, int]:
        """How many cells have each label (of one panel, or all)."""
        cells = [c for c in self.cells if panel is None or c.panel == panel]
        return {label: n for label in CELL_LABELS if (n := sum(c.label == label for c in cells))}

    def to_dict(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out.update(claims=list(self.claims), seed_values=list(self.seed_values), base=dict(self.base),
                   panels=[p.to_dict() for p in self.panels], cells=[c.to_dict() for c in self.cells],
                   failed=list(self.failed), thresholds=dict(self.thresholds))
        return out

    @classmethod
    def from_dict(cls, data: Any) -> PhaseMap:
        _keys("phase map", data, cls)
        return cls(**{**data, "claims": tuple(data["claims"]), "seed_values": tuple(data["seed_values"]),
                      "base": dict(data["base"]), "panels": tuple(PanelRecord.from_dict(p) for p in data["panels"]),
                      "cells": tuple(CellRecord.from_dict(c) for c in data["cells"]), "failed": tuple(data["failed"]),
                      "thresholds": dict(data["thresholds"])})

    def save(self, folder: str | Path) -> Path:
        """Write ``folder/cells.json`` atomically."""
        return atomic_write_json(Path(folder) / CELLS_FILE, self.to_dict())

    @classmethod
    def load(cls, folder: str | Path) -> PhaseMap:
        """``folder/cells.json`` (ValueError naming the file when it is missing or not a phase map)."""
        path = Path(folder) / CELLS_FILE
        return _typed(path, lambda: cls.from_dict(_read(path, "a phase map's cells.json")))

    # --- the written forms -------------------------------------------------------------------------------------
    def to_csv(self) -> str:
        """One row per cell: panel, the x and y values, source, label, seeds per class, converged, the mean and
        interval of each of :data:`ESTIMATED` (spectrum_min: the geometric mean and its interval)."""
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        writer.writerow(["panel", "x", "x_value", "y", "y_value", "source", "level", "label", "seeds",
                         *(f"n_{c.replace(' ', '_')}" for c in RUN_CLASSES), "converged",
                         *(f"{k}{s}" for k in ESTIMATED for s in ("", "_lo", "_hi"))])
        for c in self.cells:
            p = self.panels[c.panel]
            values = []
            for k in ESTIMATED:
                e = c.estimates.get(k)
                if e is None:
                    values += ["", "", ""]
                    continue
                xs = [e.mean, e.lo, e.hi]
                if e.log:
                    xs = [10.0 ** x if math.isfinite(x) else x for x in xs]
                values += ["" if not math.isfinite(x) else f"{x:.6g}" for x in xs]
            writer.writerow([p.title or c.panel, p.x.name, p.x.labels[c.ix], p.y.name, p.y.labels[c.iy], c.source,
                             c.level, c.label, c.n_seeds, *(c.counts.get(k, 0) for k in RUN_CLASSES),
                             "" if c.converged is None else c.converged, *values])
        return buf.getvalue()

    def table_text(self) -> str:
        """The labels as a text table per panel (rows: y from the largest down; columns: x), a legend, the counts."""
        lines = [f"phase map {self.name} ({self.scale} scale, {self.seeds} seeds {list(self.seed_values)}, decided "
                 f"{'at the end state' if self.decide == 'converged' else 'at the epoch budget'}; "
                 f"{self.runs_trained} runs trained of the {self.runs_uniform} of a uniform grid"
                 + ("" if self.status == "complete" else f"; INCOMPLETE: {len(self.failed)} run(s) failed") + ")"]
        for k, p in enumerate(self.panels):
            lines += ["", f"{p.title or 'map'}: {p.y.title} (rows) x {p.x.title} (columns)"]
            width = max(len(label) for label in p.y.labels)
            col = max(3, *(len(label) for label in p.x.labels))
            for iy in reversed(range(len(p.y.labels))):
                cells = []
                for ix in range(len(p.x.labels)):
                    c = self.cell(k, ix, iy)
                    code = "." if c is None else LABEL_CODES[c.label]
                    cells.append((code if c is None or c.source == "trained" else code.lower()).rjust(col))
                lines.append(f"{p.y.labels[iy].rjust(width)} |{' '.join(cells)}")
            lines.append(" " * width + " +" + "-" * ((col + 1) * len(p.x.labels)))
            lines.append(" " * (width + 2) + " ".join(label.rjust(col) for label in p.x.labels))
            counts = self.label_counts(k)
            lines.append("cells: " + ", ".join(f"{n} {label}" for label, n in counts.items()))
        legend = ", ".join(f"{code} {label}" for label, code in LABEL_CODES.items())
        lines += ["", f"legend: {legend}; lower case: inferred by the refinement (not trained); . : no label"]
        return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class TheoryLine:
    """A line of the theory over one panel of a map (:mod:`ncgeom.phase.overlays`).

    panel : the panel; name : what it is (``hucl_local_threshold``, ...); label : its legend text; evidence : the kind
    of evidence behind its values (:data:`ncgeom.vocabulary.EVIDENCE`); axis : "x" (an x value for each y value of the
    panel) or "y"; values : one per value of the other axis (None where the theory gives nothing there); source : the
    function that computed it, and how (``proofs_check.hucl.local.local_threshold``, ...).
    """

    panel: int
    name: str
    label: str
    evidence: Evidence
    axis: LineAxis
    values: tuple[float | None, ...]
    source: str

    def __post_init__(self) -> None:
        _check(self.evidence in EVIDENCE, "theory line", f"evidence must be one of {EVIDENCE}, got {self.evidence!r}")
        _check(self.axis in LINE_AXES, "theory line", f"axis must be one of {LINE_AXES}, got {self.axis!r}")

    def to_dict(self) -> dict[str, Any]:
        return {**{f.name: getattr(self, f.name) for f in fields(self)}, "values": list(self.values)}

    @classmethod
    def from_dict(cls, data: Any) -> TheoryLine:
        _keys("theory line", data, cls)
        return cls(**{**data, "values": tuple(None if v is None else float(v) for v in data["values"])})


@dataclass(frozen=True)
class Overlays:
    """``overlays.json``: the theory lines of a map and, for each line the theory has but that was not drawn, why."""

    map: str
    lines: tuple[TheoryLine, ...]
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"map": self.map, "lines": [line.to_dict() for line in self.lines], "notes": list(self.notes)}

    @classmethod
    def from_dict(cls, data: Any) -> Overlays:
        _keys("overlays", data, cls)
        return cls(data["map"], tuple(TheoryLine.from_dict(x) for x in data["lines"]), tuple(data["notes"]))

    def save(self, folder: str | Path) -> Path:
        return atomic_write_json(Path(folder) / OVERLAYS_FILE, self.to_dict())

    @classmethod
    def load(cls, folder: str | Path) -> Overlays:
        path = Path(folder) / OVERLAYS_FILE
        return _typed(path, lambda: cls.from_dict(_read(path, "a phase map's overlays.json")))


def _read(path: Path, what: str) -> Any:
    try:
        return json.loads(read_bounded(path, what=what, max_bytes=_MAX_BYTES))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path}: not {what} ({type(exc).__name__}: {' '.join(str(exc).split())[:120]})") from None


def _typed(path: Path, build: Any) -> Any:
    """``build()`` with its errors as one ValueError naming ``path``."""
    try:
        return build()
    except (TypeError, ValueError, KeyError, AttributeError) as exc:
        text = " ".join(str(exc).split())[:200]
        raise ValueError(f"{path}: not a phase map record this version of ncgeom reads ({text})") from None
