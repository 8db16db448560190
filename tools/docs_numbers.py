#!/usr/bin/env python3
"""Generate every number the docs quote about runs, checks and timings from the artifacts that hold it.

A quoted number sits between two markers that name its source, in README.md, BENCHMARKS.md, docs/*.md and figures/*/index.md:

    the quick reproduction trains <!-- num:spec.runs.quick -->186<!-- /num --> runs

(the markers are HTML comments: invisible on GitHub and on the documentation site). The sources, all committed:

- ``spec.*``: the claim specs that ship in the package (``ncgeom.campaigns.claims.CLAIMS``): how many training
  runs each scale trains (``spec.runs.<scale>``, ``spec.runs.<scale>.claim<id>``) and how many seeds each grid
  point has (``spec.seeds.<scale>``);
- ``phase.bench.*``: the measured cost of the first shipped phase map, ``figures/phase/phase_benchmark.json``
  (``benchmarks/bench_phase.py``, ``PhaseBenchmark``): the adaptive map and the uniform grid side by side, their
  agreement (``trained_agree``, ``wrong``), the shipped (confirmatory) map's time, and the refinement replayed on the
  uniform grid at other levels and labels (``replay.l<levels>.<every_seed|majority>.{cells_trained,cells_wrong,percent}``);
- ``phase.<map>.*``: the shipped phase maps, ``ncgeom/phase/shipped/<map>/cells.json`` (package data,
  ``ncgeom.phase.records.PhaseMap``, read by ``ncgeom.phase.shipping``):
  runs trained against the uniform grid's, the cells of each label per panel (``phase.<map>.p<k>.<label>``), and for
  the first map the test of the prediction fixed on its exploratory map (docs/theory.md, section 9, "Rule changes":
  a converged cell is "neither" exactly where B < 2C), ``phase.<map>.p<k>.{below,above}.{neither,other,undecided}``;
- ``repro.<scale>.*``: the record of the last measured reproduction at that scale,
  ``figures/<scale>/reproduction.json`` (:class:`ReproductionRecord`): its wall and CPU time, the seconds of each
  stage, the install time, the checks that passed by kind of evidence, the hypothesis-ablation records, the
  runs and seeds it trained, its commit. ``--list`` prints every key.

The claim tables (``<!-- table:KEY -->`` ... ``<!-- /table -->``) are generated the same way, from the claim results
of those reproductions (``figures/<scale>/claims/<id>.json``; tools/docs_tables.py), and checked by ``--check``.

``ncgeom/cli/measured.py`` (the times that ``ncgeom reproduce --help`` quotes) is generated whole from the same
records, and docs/cli.md from the parsers (``python -m ncgeom.cli.reference``).

Usage::

    python tools/docs_numbers.py            # rewrite every marked number (and ncgeom/cli/measured.py)
    python tools/docs_numbers.py --check    # exit 1 listing every stale number (CI: tests/test_docs_numbers.py)
    python tools/docs_numbers.py --list     # every key and its value
    python tools/docs_numbers.py record DIR --wall-seconds S --cpu-seconds S [--install-seconds S] \\
        --machine TEXT --out figures/quick/reproduction.json
                                            # the record of a new reproduction in DIR (the folder of
                                            # `ncgeom reproduce --out DIR`), its times measured by the caller
                                            # (e.g. /usr/bin/time); then rerun without --check

A record whose runs or seeds differ from the shipped specs is refused in every mode (the specs changed since
it was measured: measure again and write a new record), so the docs never quote a time for runs that the
specs no longer train.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import re
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:  # run as a script from anywhere: the ncgeom of this repository
    sys.path.insert(0, str(REPO))
if str(REPO / "tools") not in sys.path:  # its sibling, the claim tables
    sys.path.insert(0, str(REPO / "tools"))

import docs_tables  # noqa: E402  (after the path above)

__all__ = ["ReproductionRecord", "MARKER", "values", "rewrite", "stale", "measured_module", "main"]

#: ``<!-- num:KEY -->VALUE<!-- /num -->``: a generated number in a markdown file.
MARKER = re.compile(r"<!-- num:(?P<key>[A-Za-z0-9_.-]+) -->(?P<value>.*?)<!-- /num -->", re.S)
SCALES = ("quick", "full")
STAGES = ("verify", "theory", "claims", "figures")
EVIDENCE = ("exact", "independent", "numerical", "self-test")
MEASURED = REPO / "ncgeom" / "cli" / "measured.py"
#: The wall-time targets of ``ncgeom reproduce`` on the 2-core machine (issue 23: quick under 4 min, full under
#: 30 min); ``repro.<scale>.target`` says whether the record meets its scale's.
TARGET_SECONDS = {"quick": 240.0, "full": 1800.0}


@dataclass(frozen=True)
class ReproductionRecord:
    """``figures/<scale>/reproduction.json``: what one ``ncgeom reproduce`` run took and produced.

    scale, command, workers, engine : how it was run; commit, date : the code and the day;
    machine : where, in words (cores, load); install : how ncgeom was installed;
    wall_seconds, cpu_seconds : of the whole command (measured by the caller: /usr/bin/time or the shell);
    install_seconds : of the install before it, or None; stages : {stage: seconds} from DIR/.stages;
    runs, seeds : training runs of the claims and seeds per grid point; checks : {status: count} of the verify
    stage; evidence : {kind: passes} of the verify stage; ablations : hypothesis-ablation records of the theory
    stage; sequential : {"wall_seconds", "cpu_percent"} of the same work with one stage after another, or None;
    origin : how this record was made (by ``record`` from DIR, or transcribed, and from what);
    epochs : {"trained", "budget"}: the epochs the claims' runs trained, summed, and their budgets (``epochs`` of
    each config) summed: what stopping at convergence saved; None in a record from before ``stop``.
    """

    scale: str
    command: str
    workers: int
    engine: str
    commit: str
    date: str
    machine: str
    install: str
    wall_seconds: float
    cpu_seconds: float
    install_seconds: float | None
    stages: dict[str, float]
    runs: int
    seeds: int
    checks: dict[str, int]
    evidence: dict[str, int]
    ablations: int
    sequential: dict[str, float] | None
    origin: str
    epochs: dict[str, int] | None = None

    def __post_init__(self):
        if self.scale not in SCALES:
            raise ValueError(f"scale must be one of {SCALES}, got {self.scale!r}")
        if sorted(self.stages) != sorted(STAGES):
            raise ValueError(f"stages must give the seconds of {', '.join(STAGES)}, got {sorted(self.stages)}")
        if sorted(self.evidence) != sorted(EVIDENCE):
            raise ValueError(f"evidence must count {', '.join(EVIDENCE)}, got {sorted(self.evidence)}")
        if self.checks.get("pass") != sum(self.evidence.values()):
            raise ValueError(f"checks['pass'] ({self.checks.get('pass')}) must equal the passes by evidence "
                             f"({sum(self.evidence.values())})")
        if not (self.wall_seconds > 0 and self.cpu_seconds > 0):
            raise ValueError("wall_seconds and cpu_seconds must be > 0")

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        if data["epochs"] is None:  # a record from before ``stop`` has no key epochs: read back as written
            del data["epochs"]
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ReproductionRecord:
        """The inverse of :meth:`to_dict`; an unknown or a missing key raises ValueError naming it."""
        names = [f.name for f in fields(cls)]
        unknown = sorted(set(data) - set(names))
        missing = [n for n in names if n not in data and n != "epochs"]
        if unknown or missing:
            raise ValueError(f"reproduction record: unknown keys {unknown}, missing keys {missing}")
        return cls(**data)

    @classmethod
    def load(cls, path: Path) -> ReproductionRecord:
        return cls.from_dict(json.loads(path.read_text()))


def record_path(scale: str) -> Path:
    return REPO / "figures" / scale / "reproduction.json"


# ------------------------------------------------------------------------------------------------ the sources


def _spec_counts() -> dict[str, Any]:
    """{scale: (runs, {claim: runs}, seeds per grid point)} of the shipped claim specs."""
    from ncgeom.campaigns.claims import CLAIMS, claim_spec
    from ncgeom.campaigns.spec import expand

    counts: dict[str, Any] = {}
    for scale in ("tiny", *SCALES):
        per_claim, seeds = {}, set()
        for claim_id in CLAIMS:
            configs = expand(claim_spec(claim_id), scale=scale)
            per_claim[claim_id] = len(configs)
            points = Counter(tuple(sorted((k, repr(v)) for k, v in dataclasses.asdict(c).items() if k != "seed"))
                             for c in configs)
            seeds |= set(points.values())
        if len(seeds) != 1:
            raise ValueError(f"the claim specs give {sorted(seeds)} seeds per grid point at scale {scale}: one "
                             "number cannot be quoted")
        counts[scale] = (sum(per_claim.values()), per_claim, seeds.pop())
    return counts


def minutes_seconds(seconds: float) -> str:
    """``168 s`` below ten minutes, else ``22 min 52 s``."""
    s = round(seconds)
    return f"{s} s" if s < 600 else f"{s // 60} min {s % 60} s"


def _record_keys(scale: str, r: ReproductionRecord) -> dict[str, str]:
    p = f"repro.{scale}."
    keys = {
        p + "wall": minutes_seconds(r.wall_seconds),
        p + "wall_seconds": f"{r.wall_seconds:.0f}",
        p + "wall_minutes": f"{r.wall_seconds / 60:.0f}",
        p + "cpu_seconds": f"{r.cpu_seconds:.0f}",
        p + "cpu_percent": f"{100 * r.cpu_seconds / r.wall_seconds:.0f}",
        p + "cpu_hours": f"{r.cpu_seconds / 3600:.1f}",
        p + "runs": str(r.runs),
        p + "seeds": str(r.seeds),
        p + "ablations": str(r.ablations),
        p + "commit": r.commit,
        p + "date": r.date,
        p + "workers": str(r.workers),
        p + "machine": r.machine,
        p + "install": r.install,
        p + "engine": r.engine,
        p + "origin": r.origin,
        p + "target": minutes_seconds(TARGET_SECONDS[scale]),
        p + "target_met": "met" if r.wall_seconds <= TARGET_SECONDS[scale] else "not met",
        p + "checks.pass": str(r.checks.get("pass", 0)),
        p + "checks.info": str(r.checks.get("info", 0)),
        p + "verify_theory_minutes": f"{(r.stages['verify'] + r.stages['theory']) / 60:.0f}",
    }
    if r.install_seconds is not None:
        keys[p + "install_seconds"] = f"{r.install_seconds:.0f}"
        keys[p + "install_minutes"] = f"{r.install_seconds / 60:.1f}"
    for stage, seconds in r.stages.items():
        keys[p + f"stage.{stage}"] = f"{seconds:.0f}"
        keys[p + f"stage.{stage}.minutes"] = f"{seconds / 60:.0f}"
    for kind, n in r.evidence.items():
        keys[p + f"evidence.{kind}"] = str(n)
    if r.epochs is not None:
        keys[p + "epochs.trained"] = str(r.epochs["trained"])
        keys[p + "epochs.budget"] = str(r.epochs["budget"])
        keys[p + "epochs.saved_percent"] = f"{100 * (1 - r.epochs['trained'] / r.epochs['budget']):.0f}"
    if r.sequential is not None:
        keys[p + "sequential.wall"] = minutes_seconds(r.sequential["wall_seconds"])
        keys[p + "sequential.cpu_percent"] = f"{r.sequential['cpu_percent']:.0f}"
    return keys


PHASE = REPO / "figures" / "phase"
SHIPPED_MAPS = REPO / "ncgeom" / "phase" / "shipped"
#: The shipped phase maps whose records the docs quote (ncgeom/phase/shipped/<map>/cells.json).
PHASE_MAPS = ("phase_classes_batch", "phase_norm_encoder", "phase_hucl_beta_dim")


def _phase_benchmark() -> Any:
    """The ``PhaseBenchmark`` type of benchmarks/bench_phase.py, the owner of figures/phase/phase_benchmark.json."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_phase", REPO / "benchmarks" / "bench_phase.py")
    assert spec is not None and spec.loader is not None
    module = sys.modules.setdefault("bench_phase", importlib.util.module_from_spec(spec))  # for its dataclasses
    spec.loader.exec_module(module)
    return module.PhaseBenchmark


def _phase_keys() -> dict[str, str]:
    """The keys ``phase.*`` (module docstring) from the shipped phase records; none for a record not yet shipped."""
    from ncgeom.phase.records import CELLS_FILE, OVERLAYS_FILE, Overlays, PhaseMap
    from ncgeom.vocabulary import CELL_LABELS

    keys: dict[str, str] = {}
    bench = PHASE / "phase_benchmark.json"
    if bench.is_file():
        b = _phase_benchmark().load(bench)
        p = "phase.bench."
        keys.update({p + "map": b.map, p + "scale": b.scale, p + "seeds": ", ".join(map(str, b.seed_values)),
                     p + "workers": str(b.workers), p + "date": b.date, p + "load": b.load_average,
                     p + "run_percent": f"{100 * b.run_ratio:.0f}", p + "wall_percent": f"{100 * b.wall_ratio:.0f}",
                     p + "cells": str(b.cells), p + "cells_agree": str(b.cells_agree), p + "inferred": str(b.inferred),
                     p + "inferred_agree": str(b.inferred_agree)})
        for name, cost in (("adaptive", b.adaptive), ("uniform", b.uniform), ("shipped", b.shipped)):
            if cost is None:
                continue
            keys.update({p + f"{name}.wall": minutes_seconds(cost.wall_seconds),
                         p + f"{name}.wall_seconds": f"{cost.wall_seconds:.0f}", p + f"{name}.runs": str(cost.runs),
                         p + f"{name}.steps": str(cost.steps),
                         p + f"{name}.steps_per_second": f"{cost.steps_per_second:.0f}",
                         p + f"{name}.cells_trained": str(cost.cells_trained)})
        if b.shipped_load is not None:
            keys[p + "shipped.load"] = b.shipped_load
        keys[p + "trained_agree"] = str(b.cells_agree - b.inferred_agree)
        keys[p + "wrong"] = str(b.cells - b.cells_agree)
        for name, replay in (b.replays or {}).items():  # "levels 2, every seed" -> replay.l2.every_seed.*
            levels, rule = name.split(", ")
            stem = p + f"replay.l{levels.split()[1]}.{rule.replace(' ', '_')}."
            keys.update({stem + k: str(v) for k, v in replay.items()})
            keys[stem + "percent"] = f"{100 * replay['cells_trained'] / replay['cells']:.0f}"
    for name in PHASE_MAPS:
        if not (SHIPPED_MAPS / name / CELLS_FILE).is_file():
            continue
        m = PhaseMap.load(SHIPPED_MAPS / name)
        p = f"phase.{name}."
        keys.update({p + "runs": str(m.runs_trained), p + "uniform_runs": str(m.runs_uniform),
                     p + "run_percent": f"{100 * m.runs_trained / m.runs_uniform:.0f}", p + "cells": str(len(m.cells)),
                     p + "seeds": ", ".join(map(str, m.seed_values)), p + "scale": m.scale})
        runs = [r for c in m.cells for r in c.runs]
        keys[p + "rank_drop_at_start"] = str(sum(r.rank_drop_epoch == 0 for r in runs))
        keys[p + "runs_converged"] = str(sum(r.convergence == "converged" for r in runs))
        overlays = Overlays.load(SHIPPED_MAPS / name) if (SHIPPED_MAPS / name / OVERLAYS_FILE).is_file() else None
        for line in overlays.lines if overlays is not None else ():
            finite = [v for v in line.values if v is not None and math.isfinite(v)]
            if finite:
                keys[p + f"p{line.panel}.line.{line.name}"] = _range(finite, 2)
        for k in range(len(m.panels)):
            keys.update(_cell_ranges(m, k, p + f"p{k}."))
            counts = m.label_counts(k)
            for label in CELL_LABELS:
                keys[p + f"p{k}.{label.replace(' ', '_')}"] = str(counts.get(label, 0))
            panel = m.panels[k]
            if {panel.x.config_field, panel.y.config_field} == {"classes", "batch_size"}:
                keys.update(_below_2c(m, k, p + f"p{k}."))
    return keys


def _range(values: list[float], digits: int) -> str:
    lo, hi = min(values), max(values)
    return f"{lo:.{digits}g}" if f"{lo:.{digits}g}" == f"{hi:.{digits}g}" else f"{lo:.{digits}g}-{hi:.{digits}g}"


def _cell_ranges(m: Any, panel: int, prefix: str) -> dict[str, str]:
    """Per label of a panel's cells, trained or inferred: the x and y values where it lies (``<label>.x_range``,
    ``.y_range``, first-last); per label of its trained cells: the range of the cell means of etf_distance, within_class and the
    smallest spectrum value (``<label>.etf``, ``.within``, ``.spectrum_min``), of the last effective rank over its
    maximum min(d, C - 1) (``.erank_share``); ``dc_seed_cells``, the trained cells with a DC run, and
    ``dc_geometry_cells``, those with a run whose final metrics are DC, converged or not; per trained cell
    (``cell.<x label>.<y label>.*``): its label, runs converged (k/n), the means of etf_distance and within_class and
    the geometric mean of the smallest spectrum value."""
    keys: dict[str, str] = {}
    trained = [c for c in m.cells if c.panel == panel and c.source == "trained"]
    keys[prefix + "dc_seed_cells"] = str(sum(c.counts.get("DC", 0) > 0 for c in trained))
    keys[prefix + "dc_geometry_cells"] = str(sum(c.geometry_counts.get("DC", 0) > 0 for c in trained))
    p = m.panels[panel]
    for c in trained:  # cell.<x>.<y>.*: one trained cell (labels with their spaces and commas as _)
        stem = prefix + "cell." + ".".join(re.sub(r"[^0-9A-Za-z.]+", "_", getattr(p, a).labels[i]).strip("_")
                                           for a, i in (("x", c.ix), ("y", c.iy))) + "."
        e = c.estimates
        keys.update({stem + "label": c.label, stem + "converged": f"{c.converged}/{c.n_seeds}",
                     stem + "etf": f"{e['etf_distance'].mean:.2g}", stem + "within": f"{e['within_class'].mean:.2g}",
                     stem + "spectrum_min": f"{10 ** e['spectrum_min'].mean:.2g}"})
    for label in {c.label for c in m.cells if c.panel == panel}:  # where each label lies, trained or inferred
        cells = [c for c in m.cells if c.panel == panel and c.label == label]
        for axis, index in (("x", "ix"), ("y", "iy")):
            values = sorted({getattr(c, index) for c in cells})
            names = getattr(p, axis).labels
            keys[prefix + label.replace(" ", "_") + f".{axis}_range"] = (
                names[values[0]] if len(values) == 1 else f"{names[values[0]]}-{names[values[-1]]}")
    for label in {c.label for c in trained}:
        cells = [c for c in trained if c.label == label]
        stem = prefix + label.replace(" ", "_") + "."
        for name in ("etf_distance", "within_class", "spectrum_min"):
            means = [c.estimates[name].mean for c in cells if c.estimates[name].n]
            means = [10 ** x if name == "spectrum_min" else x for x in means if x == x]  # log10 means; no NaN
            if means:
                keys[stem + {"etf_distance": "etf", "within_class": "within"}.get(name, name)] = _range(means, 2)
        shares = []
        for c in cells:
            fields = {**m.base, **p.fields, **p.x.points[c.ix], **p.y.points[c.iy]}
            top = min(int(fields["dim"]) if fields.get("dim") else int(fields["classes"]) - 1, int(fields["classes"]) - 1)
            shares += [r.effective_rank[-1][1] / top for r in c.runs if r.effective_rank and r.effective_rank[-1][1]]
        if shares:
            keys[stem + "erank_share"] = _range(shares, 2)
    return keys


def _below_2c(m: Any, panel: int, prefix: str) -> dict[str, str]:
    """The prediction "a converged cell is 'neither' exactly where B < 2C" counted on the trained cells of a panel:
    ``below|above`` (B < 2C or not) x ``neither|other|undecided`` (neither; NC or DC; mixed or not converged)."""
    counts = {f"{side}.{kind}": 0 for side in ("below", "above") for kind in ("neither", "other", "undecided")}
    p = m.panels[panel]
    for cell in m.cells:
        if cell.panel != panel or cell.source != "trained":
            continue
        fields = {**p.x.points[cell.ix], **p.y.points[cell.iy]}
        side = "below" if fields["batch_size"] < 2 * fields["classes"] else "above"
        kind = ("neither" if cell.label == "neither" else "other" if cell.label in ("NC", "DC", "undefined")
                else "undecided")
        counts[f"{side}.{kind}"] += 1
    return {prefix + k: str(v) for k, v in counts.items()}


def values() -> dict[str, str]:
    """Every key a marker may name -> its value, from the specs and the committed records.

    Raises ValueError when a record disagrees with the specs (its runs or seeds) or is malformed."""
    out: dict[str, str] = {}
    specs = _spec_counts()
    for scale, (runs, per_claim, seeds) in specs.items():
        out[f"spec.runs.{scale}"] = str(runs)
        out[f"spec.seeds.{scale}"] = str(seeds)
        for claim_id, n in per_claim.items():
            out[f"spec.runs.{scale}.claim{claim_id}"] = str(n)
    for scale in SCALES:
        record = ReproductionRecord.load(record_path(scale))
        if record.scale != scale:
            raise ValueError(f"{record_path(scale)}: scale {record.scale!r}, expected {scale!r}")
        runs, _, seeds = specs[scale]
        if (record.runs, record.seeds) != (runs, seeds):
            raise ValueError(f"{record_path(scale).relative_to(REPO)}: {record.runs} runs with {record.seeds} seeds, but "
                             f"the shipped specs now train {runs} runs with {seeds} seeds at scale {scale}: measure "
                             f"the reproduction again and write its record (python tools/docs_numbers.py record ...)")
        out.update(_record_keys(scale, record))
    out.update(_phase_keys())
    return out


# ------------------------------------------------------------------------------------------------ the files


def marked_files() -> list[Path]:
    """README.md, BENCHMARKS.md, docs/*.md and figures/*/index.md."""
    return [REPO / "README.md", REPO / "BENCHMARKS.md", *sorted((REPO / "docs").glob("*.md")),
            *sorted((REPO / "figures").glob("*/index.md"))]


def rewrite(text: str, table: dict[str, str], where: str) -> tuple[str, list[str]]:
    """``text`` with every marked number set from ``table``; and one line per number that changed."""
    changes: list[str] = []

    def sub(match: re.Match) -> str:
        key, old = match.group("key"), match.group("value")
        if key not in table:
            raise ValueError(f"{where}: unknown number key {key!r} (python tools/docs_numbers.py --list)")
        new = table[key]
        if old != new:
            line = text.count("\n", 0, match.start()) + 1
            changes.append(f"{where}:{line}: {key} is {new!r}, the file says {old!r}")
        return f"<!-- num:{key} -->{new}<!-- /num -->"

    return MARKER.sub(sub, text), changes


def measured_module(table: dict[str, str]) -> str:
    """The source of ncgeom/cli/measured.py from the records' values."""
    return f'''"""Measured times that the help of ``ncgeom reproduce`` quotes (docs/getting_started.md, "Time").

Generated by tools/docs_numbers.py from figures/quick/reproduction.json and figures/full/reproduction.json:
do not edit (``python tools/docs_numbers.py`` rewrites it; ``--check`` fails when it is stale).
"""

__all__ = ["QUICK_MINUTES", "FULL_WALL", "FULL_CPU_HOURS", "MACHINE_CORES"]

#: Wall time of ``ncgeom reproduce --quick``, in minutes, on the machine of the record.
QUICK_MINUTES = "{table['repro.quick.wall_minutes']}"
#: Wall time of ``ncgeom reproduce --full`` on the machine of the record.
FULL_WALL = "{table['repro.full.wall']}"
#: CPU time of ``ncgeom reproduce --full``, in hours.
FULL_CPU_HOURS = "{table['repro.full.cpu_hours']}"
#: The machine of the records, in words.
MACHINE_CORES = "2 CPU cores"
'''


def stale(table: dict[str, str] | None = None, claim_tables: dict[str, str] | None = None) -> list[str]:
    """One line per number, table (or generated file) that differs from what its source gives."""
    table = values() if table is None else table
    claim_tables = docs_tables.tables() if claim_tables is None else claim_tables
    problems: list[str] = []
    for path in marked_files():
        text, changes = rewrite(path.read_text(), table, str(path.relative_to(REPO)))
        _, table_changes = docs_tables.rewrite_tables(text, claim_tables, str(path.relative_to(REPO)))
        problems += changes + table_changes
    if not MEASURED.is_file() or MEASURED.read_text() != measured_module(table):
        problems.append(f"{MEASURED.relative_to(REPO)} is not what the records give")
    return problems


# ------------------------------------------------------------------------------------------------ record


def build_record(folder: Path, *, wall_seconds: float, cpu_seconds: float, install_seconds: float | None,
                 machine: str, install: str, workers: int, engine: str, commit: str | None = None,
                 origin: str | None = None) -> ReproductionRecord:
    """The record of the reproduction in ``folder`` (the ``--out`` of ``ncgeom reproduce``), read through the
    owners of its files; the times of the whole command are the caller's measurements.

    ``commit``: the code's commit, needed when the run's provenance has none (a non-editable install carries no
    git checkout); a commit given beside one in the provenance must agree with it. ``origin``: a sentence added to
    the record's origin (e.g. that the wall time adds up segments of a resumed run)."""
    from ncgeom.atomic_io import read_json
    from ncgeom.campaigns.claims import CLAIMS, ClaimResult, claim_spec, load_summaries
    from ncgeom.reproduce.stages import StageRecord
    from proofs_check.ablations import AblationResult
    from proofs_check.records import CheckResult

    manifest = read_json(folder / "reproduce.json")
    scale = manifest["scale"]
    stages = {}
    for stage in STAGES:
        record = StageRecord.load(folder, stage)
        if record is None or record.status != "done":
            raise ValueError(f"{folder}: stage {stage} is not done: no record of a partial run")
        stages[stage] = round(record.seconds, 1)
    checks = [CheckResult.from_dict(c) for c in read_json(folder / "verify" / "results.json")]
    ablations = [AblationResult.from_dict(a) for a in read_json(folder / "theory" / "ablations.json")["ablations"]]
    claims = [ClaimResult.load(folder, claim_id) for claim_id in CLAIMS]
    if any(c is None for c in claims):
        raise ValueError(f"{folder}: a claim has no result: no record of a partial run")
    specs = _spec_counts()
    summaries = [s for claim_id in CLAIMS for s in load_summaries(folder / "sweeps" / claim_spec(claim_id).name)]
    epochs = {"trained": sum(s.epochs_run for s in summaries), "budget": sum(s.config.epochs for s in summaries)}
    provenance = manifest["provenance"]
    recorded = provenance["git_commit"]
    if recorded is None and commit is None:
        raise ValueError(f"{folder}: its provenance names no git commit (a non-editable install): give --commit")
    if recorded is not None and commit is not None and not str(recorded).startswith(commit):
        raise ValueError(f"--commit {commit} disagrees with the commit {recorded} of the run's provenance")
    commit = str(recorded if recorded is not None else commit)[:7]
    return ReproductionRecord(
        scale=scale, command=f"ncgeom reproduce --{scale} --out DIR --workers {workers}", workers=workers,
        engine=engine, commit=commit, date=str(provenance["time_utc"])[:10],
        machine=machine, install=install, wall_seconds=wall_seconds, cpu_seconds=cpu_seconds,
        install_seconds=install_seconds, stages=stages, runs=sum(c.runs for c in claims if c is not None),
        seeds=specs[scale][2], checks=dict(Counter(c.status for c in checks)),
        evidence={kind: sum(c.status == "pass" and c.evidence == kind for c in checks) for kind in EVIDENCE},
        ablations=len(ablations), sequential=None, epochs=epochs,
        origin=f"written by tools/docs_numbers.py record from the reproduction folder {folder.name}/"
        + (f"; {origin}" if origin else ""),
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tools/docs_numbers.py", description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 listing every stale number; change nothing")
    parser.add_argument("--list", action="store_true", help="print every key and its value")
    sub = parser.add_subparsers(dest="command")
    rec = sub.add_parser("record", help="write the record of a reproduction folder")
    rec.add_argument("folder", type=Path)
    rec.add_argument("--wall-seconds", type=float, required=True)
    rec.add_argument("--cpu-seconds", type=float, required=True)
    rec.add_argument("--install-seconds", type=float, default=None)
    rec.add_argument("--machine", required=True, help="where it ran, in words (cores, load)")
    rec.add_argument("--install", default="editable install", help="how ncgeom was installed")
    rec.add_argument("--workers", type=int, default=2)
    rec.add_argument("--engine", default="stacked")
    rec.add_argument("--commit", default=None, help="the code's commit when the run's provenance has none")
    rec.add_argument("--origin", default=None, help="a sentence added to the record's origin")
    rec.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    try:
        if args.command == "record":
            record = build_record(args.folder, wall_seconds=args.wall_seconds, cpu_seconds=args.cpu_seconds,
                                  install_seconds=args.install_seconds, machine=args.machine, install=args.install,
                                  workers=args.workers, engine=args.engine, commit=args.commit,
                                  origin=args.origin)
            args.out.write_text(json.dumps(record.to_dict(), indent=2) + "\n")
            copied = docs_tables.copy_claims(args.folder, record.scale)
            print(f"wrote {args.out} and {len(copied)} claim results under "
                  f"{docs_tables.claims_folder(record.scale).relative_to(REPO)}; now run python tools/docs_numbers.py")
            return 0
        table = values()
        claim_tables = docs_tables.tables()
        if args.list:
            width = max(map(len, table))
            print("\n".join(f"{k:<{width}}  {v}" for k, v in sorted(table.items())))
            print("\n".join(f"{k:<{width}}  (table)" for k in sorted(claim_tables)))
            return 0
        if args.check:
            problems = stale(table, claim_tables)
            for line in problems:
                print(line)
            if problems:
                print(f"{len(problems)} stale numbers: run python tools/docs_numbers.py", file=sys.stderr)
            return 1 if problems else 0
        changed = 0
        for path in marked_files():
            text, changes = rewrite(path.read_text(), table, str(path.relative_to(REPO)))
            text, table_changes = docs_tables.rewrite_tables(text, claim_tables, str(path.relative_to(REPO)))
            changes += table_changes
            if changes:
                path.write_text(text)
                changed += len(changes)
                print("\n".join(changes))
        module = measured_module(table)
        if not MEASURED.is_file() or MEASURED.read_text() != module:
            MEASURED.write_text(module)
            print(f"rewrote {MEASURED.relative_to(REPO)}")
        cli = REPO / "docs" / "cli.md"  # quotes the measured numbers through the parsers' help
        reference = subprocess.run([sys.executable, "-m", "ncgeom.cli.reference"], capture_output=True, text=True,
                                   check=True, cwd=REPO).stdout
        if cli.read_text() != reference:
            cli.write_text(reference)
            print(f"rewrote {cli.relative_to(REPO)}")
        print(f"{changed} numbers updated")
        return 0
    except (ValueError, OSError) as exc:
        print(f"tools/docs_numbers.py: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
