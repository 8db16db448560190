"""Map specs: two axes of config values, fixed values for the rest, panels and seeds, at three scales (TOML).

Format (docs/experiments.md, "Phase maps"; the shipped maps are ``ncgeom/phase/maps/<name>.toml``)::

    name = "phase_classes_batch"          # letters, digits, _ . -
    description = "..."
    claims = ["4"]                         # optional: the claims of docs/theory.md, section 9 the map bears on
    decide = "converged"                   # "converged" (end states; the default) or "budget" (at the epoch budget)
    levels = 2                             # refinement levels: the first grid takes every 2^levels-th value of
                                           # each refined axis (0: the uniform grid)
    seeds = [0, 1, 2]                      # optional (here or in [base]): every scale without its own seeds
    [x]                                    # an axis of one config field ...
    field = "classes"
    values = [4, 6, 8, 10, 12]
    refine = true                          # default: true for a numeric field, false otherwise
    label = "number of classes C"          # optional axis title
    [y]                                    # ... or of named points, each setting some config fields
    name = "encoder"
    [[y.points]]
    label = "unconstrained"
    model = "unconstrained"
    lr = 0.05
    [base]                                 # the config fields every run shares
    norm = "ball"
    [[panel]]                              # optional: one map per panel (fields over [base]; "x" or "y": that
    title = "SCL"                          # panel's own values of a field axis)
    setting = "scl"
    [tiny]                                 # a scale: config overrides, levels, seeds, x / y values, panels
    epochs = 2
    levels = 0
    x = [4, 8]
    seeds = [0]
    [quick]
    exploratory_seeds = [0, 1, 2]
    confirmatory_seeds = [10, 11, 12]
    [full]
    ...

A run's config is ``[base]`` <- the scale's overrides <- its panel's fields <- the x value <- the y value <- its seed.
Everything is checked when the spec is loaded, before anything runs or is written, each error one line naming the
key (``map f.toml: quick.x: ...``): the keys, every config field, an axis with fewer than two values or repeated
ones, a field given by two axes or by a panel and an axis, a refined axis that is not numeric (one numeric field,
strictly increasing values) or whose length does not fit the levels (2^levels k + 1 values), the seed sets (each a
non-empty list of distinct integers >= 0, the exploratory and confirmatory sets disjoint), the number of runs of the
full-resolution grid (at most :data:`MAX_MAP_RUNS`), and the config of every cell.
"""

from __future__ import annotations

import importlib.resources
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ncgeom.campaigns.spec import MAX_GRID_RUNS, read_toml_spec, show_value
from ncgeom.runs.config import Config, config_fields, config_from_dict, field_kind, field_type_error
from ncgeom.validate import require_choice
from ncgeom.vocabulary import MAP_DECISIONS, SCALES, SEED_SETS, MapDecision, Scale, SeedSet

__all__ = ["Axis", "Panel", "MapPlan", "MapSpec", "map_names", "load_map_spec", "map_spec_from_dict", "MAX_MAP_RUNS",
           "MAX_LEVELS"]

#: Most runs of a map at one scale, counted on its full-resolution grid with every seed set (the limit of the sweep
#: specs, :data:`ncgeom.campaigns.spec.MAX_GRID_RUNS`): a larger map is refused when it is loaded.
MAX_MAP_RUNS = MAX_GRID_RUNS
#: Most refinement levels (a first grid of every 2^10-th value is far coarser than any map needs).
MAX_LEVELS = 10

_PACKAGE, _FOLDER = "ncgeom.phase", "maps"
_FIELDS = frozenset(f.name for f in config_fields())
_NUMERIC_KINDS = frozenset({"int", "real", "int_or_none"})
_SEED_KEYS = {"seeds": "confirmatory", "exploratory_seeds": "exploratory", "confirmatory_seeds": "confirmatory"}
_TOP_KEYS = frozenset({"name", "description", "claims", "decide", "levels", "seeds", "x", "y", "base", "panel", *SCALES})


@dataclass(frozen=True)
class Axis:
    """One axis of a map: ``name`` (the field, or the axis's own name for named points), one label per value, the
    config fields each value sets (``points``), the numeric values of a numeric field axis (None for a categorical
    axis), whether the refinement halves it, its title, and its one config field (None for named points)."""

    name: str
    labels: tuple[str, ...]
    points: tuple[Mapping[str, Any], ...] = field(repr=False)
    numeric: tuple[float, ...] | None
    refine: bool
    title: str
    config_field: str | None

    def __len__(self) -> int:
        return len(self.labels)

    @property
    def fields(self) -> tuple[str, ...]:
        """The config fields the axis sets (first-seen order)."""
        return tuple(dict.fromkeys(k for p in self.points for k in p))


@dataclass(frozen=True)
class Panel:
    """One map of a spec: its title, the config fields it fixes over the base, and its two axes."""

    title: str
    fields: Mapping[str, Any] = field(repr=False)
    x: Axis
    y: Axis


@dataclass(frozen=True)
class MapPlan:
    """A spec at one scale: the base config fields, the panels, the refinement levels, the decision rule and the
    seed sets; :meth:`config` gives the config of a cell and seed."""

    spec: str
    scale: Scale
    base: Mapping[str, Any] = field(repr=False)
    panels: tuple[Panel, ...]
    levels: int
    decide: MapDecision
    seed_sets: Mapping[str, tuple[int, ...]]

    def seeds(self, kind: SeedSet = "confirmatory") -> tuple[int, ...]:
        """The seeds of set ``kind`` (ValueError naming the sets the scale has otherwise)."""
        chosen = self.seed_sets.get(require_choice("seeds", kind, SEED_SETS))
        if chosen is None:
            raise ValueError(f"seeds: map {self.spec} has no {kind} seeds at scale {self.scale} (it has "
                             f"{', '.join(sorted(self.seed_sets))})")
        return chosen

    def fields_at(self, panel: int, ix: int, iy: int) -> dict[str, Any]:
        """The config fields of cell (ix, iy) of ``panel``, without its seed."""
        p = self.panels[panel]
        return {**self.base, **p.fields, **p.x.points[ix], **p.y.points[iy]}

    def config(self, panel: int, ix: int, iy: int, seed: int) -> Config:
        """The config of cell (ix, iy) of ``panel`` with ``seed`` (module docstring)."""
        return config_from_dict({**self.fields_at(panel, ix, iy), "seed": seed})

    def cells(self) -> int:
        """Cells of the full-resolution grid, all panels."""
        return sum(len(p.x) * len(p.y) for p in self.panels)


@dataclass(frozen=True)
class MapSpec:
    """A parsed, validated map spec (module docstring): each scale resolved to a :class:`MapPlan`."""

    name: str
    description: str
    claims: tuple[str, ...]
    plans: Mapping[str, MapPlan] = field(repr=False)
    path: str | None = None
    shipped: bool = False

    def at(self, scale: str) -> MapPlan:
        """The :class:`MapPlan` of ``scale`` (tiny, quick or full)."""
        return self.plans[require_choice("scale", scale, SCALES)]


def map_names() -> tuple[str, ...]:
    """Names of the maps shipped with ncgeom (``ncgeom phase --list``), sorted."""
    folder = importlib.resources.files(_PACKAGE) / _FOLDER
    return tuple(sorted(p.name[: -len(".toml")] for p in folder.iterdir() if p.name.endswith(".toml")))


def load_map_spec(spec: str | Path) -> MapSpec:
    """Parse and validate a map spec: a shipped name (:func:`map_names`) or a TOML file path (a regular file of at most
    :data:`~ncgeom.campaigns.spec.MAX_SPEC_BYTES`, UTF-8; a FIFO, a device or a socket is refused)."""
    raw, where, shipped = read_toml_spec(spec, package=_PACKAGE, folder=_FOLDER, names=map_names(), kind="map",
                                         plural="maps", what="a map spec (two axes, a few short lists)")
    return map_spec_from_dict(raw, path=where, shipped=shipped)


_show = show_value


def map_spec_from_dict(raw: Any, *, path: str | None = None, shipped: bool = False) -> MapSpec:
    """A :class:`MapSpec` from the parsed TOML mapping, every scale resolved and checked (module docstring)."""
    where = f"map {path}" if path else "map"
    if not isinstance(raw, dict):
        raise ValueError(f"{where}: expected a table of keys, got {_show(raw)}")
    unknown = sorted(map(str, set(raw) - _TOP_KEYS))
    if unknown:
        raise ValueError(f"{where}: unknown key(s) {', '.join(unknown)}; accepted: {', '.join(sorted(_TOP_KEYS))}")
    for key in ("name", "description"):
        if key in raw and not isinstance(raw[key], str):
            raise ValueError(f"{where}: {key}: expected a string, got {_show(raw[key])}")
    name = raw.get("name") or (Path(path).stem if path and not shipped else "map")
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", str(name)):
        raise ValueError(f"{where}: name must use letters, digits, '_', '.', '-' only, got {name!r}")
    claims = raw.get("claims", [])
    if not isinstance(claims, list) or not all(isinstance(c, str) for c in claims):
        raise ValueError(f"{where}: claims: expected a list of claim ids (strings), got {_show(claims)}")
    decide = raw.get("decide", "converged")
    if decide not in MAP_DECISIONS:
        raise ValueError(f"{where}: decide must be one of {', '.join(MAP_DECISIONS)}, got {_show(decide)}")
    levels = _levels(raw.get("levels", 0), f"{where}: levels")
    raw_base = raw.get("base", {})
    if isinstance(raw_base, dict) and "seeds" in raw_base:  # the map's seeds, written inside [base] (as in a sweep)
        if "seeds" in raw:
            raise ValueError(f"{where}: give seeds once, at the top of the map or in [base], not both")
        raw = {**raw, "seeds": raw_base["seeds"]}
        raw_base = {k: v for k, v in raw_base.items() if k != "seeds"}
    base = _fields(raw_base, f"{where}: base")
    if "x" not in raw or "y" not in raw:
        raise ValueError(f"{where}: a map needs two axes, [x] and [y] (each a field and its values, or named points)")
    axes = {k: raw[k] for k in ("x", "y")}
    panels = raw.get("panel", [{}])
    plans: dict[str, MapPlan] = {}
    for scale in SCALES:
        plans[scale] = _plan(str(name), scale, raw, base, axes, panels, levels, decide, where)
    return MapSpec(str(name), str(raw.get("description", "")), tuple(claims), plans, path, shipped)


def _levels(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_LEVELS:
        raise ValueError(f"{where}: expected an integer in [0, {MAX_LEVELS}] (0: the uniform grid), got {_show(value)}")
    return value


def _fields(raw: Any, where: str) -> dict[str, Any]:
    """A table of config fields with the right types."""
    if not isinstance(raw, dict):
        raise ValueError(f"{where}: expected a table of config fields, got {_show(raw)}")
    for key, value in raw.items():
        if key not in _FIELDS:
            raise ValueError(f"{where}: unknown config field {key!r}")
        if key == "seed":
            raise ValueError(f"{where}: seed is not a map field: give seeds, or exploratory_seeds and "
                             "confirmatory_seeds")
        problem = field_type_error(key, value)
        if problem:
            raise ValueError(f"{where}.{key}: {problem}")
    return dict(raw)


def _plan(name: str, scale: Scale, raw: dict, base: dict, axes: dict, panels: Any, levels: int, decide: MapDecision,
          where: str) -> MapPlan:
    over = raw.get(scale, {})
    at = f"{where}: {scale}"
    if not isinstance(over, dict):
        raise ValueError(f"{at}: expected a table (config fields, levels, seeds, x, y, panel), got {_show(over)}")
    own = {k: v for k, v in over.items() if k not in {"levels", "x", "y", "panel", *_SEED_KEYS}}
    fields_ = {**base, **_fields(own, at)}
    if "levels" in over:
        levels = _levels(over["levels"], f"{at}.levels")
    seed_sets = _seed_sets(over, raw.get("seeds"), at, f"{where}: seeds")
    scale_axes = {}
    for key in ("x", "y"):
        given = over.get(key)
        if isinstance(given, dict):  # a whole axis in place of the spec's
            scale_axes[key] = given
        elif given is not None:  # new values of the spec's field axis
            if not isinstance(axes[key], dict) or "field" not in axes[key]:
                raise ValueError(f"{at}.{key}: a list of values replaces the values of a field axis; [{key}] has "
                                 f"named points: give a whole [{scale}.{key}] table")
            scale_axes[key] = {**axes[key], "values": given}
        else:
            scale_axes[key] = axes[key]
    raw_panels = over.get("panel", panels)
    panel_where = f"{at}.panel" if "panel" in over else f"{where}: panel"
    if not isinstance(raw_panels, list) or not raw_panels or not all(isinstance(p, dict) for p in raw_panels):
        raise ValueError(f"{panel_where}: expected a non-empty array of tables ([[panel]]), got {_show(raw_panels)}")
    built = []
    for k, table in enumerate(raw_panels):
        pw = f"{panel_where}[{k}]"
        title = table.get("title", "" if len(raw_panels) == 1 else f"panel {k + 1}")
        if not isinstance(title, str):
            raise ValueError(f"{pw}.title: expected a string, got {_show(title)}")
        fields_of = _fields({f: v for f, v in table.items() if f not in ("title", "x", "y")}, pw)
        pair = []
        for key in ("x", "y"):
            spec_axis = scale_axes[key]
            if key in table:
                if not isinstance(spec_axis, dict) or "field" not in spec_axis:
                    raise ValueError(f"{pw}.{key}: a panel gives values of a field axis only; [{key}] has named points")
                spec_axis = {**spec_axis, "values": table[key]}
            pair.append(_axis(spec_axis, levels, f"{pw}.{key}" if key in table else f"{at}.{key}"
                              if key in over else f"{where}: {key}"))
        x, y = pair
        shared = set(x.fields) & set(y.fields)
        if shared:
            raise ValueError(f"{pw}: the x and y axes both set {', '.join(sorted(shared))}; an axis owns its fields")
        clash = set(fields_of) & (set(x.fields) | set(y.fields))
        if clash:
            raise ValueError(f"{pw}: the panel sets {', '.join(sorted(clash))}, which an axis of the map varies")
        built.append(Panel(title, fields_of, x, y))
    if levels > 0 and not any(p.x.refine or p.y.refine for p in built):
        raise ValueError(f"{at}: levels = {levels} needs an axis to refine (a numeric field axis with refine = true)")
    plan = MapPlan(name, scale, fields_, tuple(built), levels, decide, seed_sets)
    runs = plan.cells() * sum(len(s) for s in seed_sets.values())
    if runs > MAX_MAP_RUNS:
        sizes = " + ".join(f"{len(p.x)} x {len(p.y)}" for p in built)
        raise ValueError(f"{at}: the map has {runs} runs on its full-resolution grid (({sizes}) cells x "
                         f"{sum(len(s) for s in seed_sets.values())} seeds), above the limit of {MAX_MAP_RUNS} "
                         "(ncgeom.phase.spec.MAX_MAP_RUNS); use fewer values or seeds")
    first = min(min(s) for s in seed_sets.values())
    for k, panel in enumerate(built):  # every cell's config is valid, before anything runs
        for ix in range(len(panel.x)):
            for iy in range(len(panel.y)):
                try:
                    plan.config(k, ix, iy, first)
                except (ValueError, TypeError) as exc:
                    raise ValueError(f"{at}: panel {k} ({panel.title or 'the map'}), {panel.x.name}={panel.x.labels[ix]}, "
                                     f"{panel.y.name}={panel.y.labels[iy]}: {exc}") from None
    return plan


def _seed_sets(over: dict, top: Any, where: str, top_where: str) -> dict[str, tuple[int, ...]]:
    given = {k: over[k] for k in _SEED_KEYS if k in over}
    if not given:
        if top is None:
            raise ValueError(f"{where}: no seeds: give seeds, or exploratory_seeds and confirmatory_seeds (here or at "
                             "the top of the map)")
        given, where = {"seeds": top}, top_where.rsplit(": seeds", 1)[0]
    if "seeds" in given and "confirmatory_seeds" in given:
        raise ValueError(f"{where}: give seeds or confirmatory_seeds, not both (seeds is the confirmatory set of a map "
                         "without exploratory seeds)")
    sets: dict[str, tuple[int, ...]] = {}
    for key, seeds in given.items():
        if not isinstance(seeds, list) or not seeds:
            raise ValueError(f"{where}.{key}: expected a non-empty list of seeds (integers >= 0), got {_show(seeds)}")
        for j, value in enumerate(seeds):
            problem = field_type_error("seed", value, many=True)
            if problem or value < 0:
                raise ValueError(f"{where}.{key}[{j}]: {problem or f'a seed is an integer >= 0, got {value}'}")
        if len(set(seeds)) != len(seeds):
            raise ValueError(f"{where}.{key}: the seeds must be distinct, got {seeds}")
        sets[_SEED_KEYS[key]] = tuple(seeds)
    shared = set(sets.get("exploratory", ())) & set(sets.get("confirmatory", ()))
    if shared:
        raise ValueError(f"{where}: exploratory and confirmatory seeds must be disjoint, both have {sorted(shared)}")
    return sets


def _label(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def _axis(raw: Any, levels: int, where: str) -> Axis:
    """An :class:`Axis` from its table (module docstring)."""
    if not isinstance(raw, dict):
        raise ValueError(f"{where}: expected a table (field and values, or name and points), got {_show(raw)}")
    accepted = {"field", "values", "refine", "label", "name", "points"}
    unknown = sorted(map(str, set(raw) - accepted))
    if unknown:
        raise ValueError(f"{where}: unknown key(s) {', '.join(unknown)}; accepted: {', '.join(sorted(accepted))}")
    if ("field" in raw) == ("points" in raw):
        raise ValueError(f"{where}: give either field and values (one config field) or name and points (named "
                         "points, each a table of config fields)")
    if "field" in raw:
        name = raw["field"]
        if not isinstance(name, str) or name not in _FIELDS:
            raise ValueError(f"{where}.field: unknown config field {name!r}")
        if name == "seed":
            raise ValueError(f"{where}.field: seed is not an axis: the seeds of a cell are the map's seed sets")
        values = raw.get("values")
        if not isinstance(values, list):
            raise ValueError(f"{where}.values: expected a list of values of {name}, got {_show(values)}")
        for j, value in enumerate(values):
            problem = field_type_error(name, value, many=True)
            if problem:
                raise ValueError(f"{where}.values[{j}]: {problem}")
        points: list[dict[str, Any]] = [{name: v} for v in values]
        labels = [_label(v) for v in values]
        kind = field_kind(next(f for f in config_fields() if f.name == name))
        numeric = (tuple(float(v) for v in values) if kind in _NUMERIC_KINDS and all(
            isinstance(v, (int, float)) and not isinstance(v, bool) for v in values) else None)
        title = raw.get("label", name)
    else:
        name = raw.get("name")
        if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9_.-]+", name):
            raise ValueError(f"{where}.name: a points axis needs a name (letters, digits, _ . -), got {name!r}")
        if not isinstance(raw["points"], list):
            raise ValueError(f"{where}.points: expected an array of tables ([[{where.rsplit(': ', 1)[-1]}.points]])")
        points, labels = [], []
        for j, point in enumerate(raw["points"]):
            if not isinstance(point, dict):
                raise ValueError(f"{where}.points[{j}]: expected a table of config fields and a label, got {_show(point)}")
            label = point.get("label")
            if not isinstance(label, str) or not label:
                raise ValueError(f"{where}.points[{j}].label: every point needs a label (a non-empty string)")
            fields_ = _fields({k: v for k, v in point.items() if k != "label"}, f"{where}.points[{j}]")
            if not fields_:
                raise ValueError(f"{where}.points[{j}]: a point must set at least one config field")
            points.append(fields_)
            labels.append(label)
        numeric = None
        title = raw.get("label", name)
    if not isinstance(title, str):
        raise ValueError(f"{where}.label: expected a string, got {_show(title)}")
    if len(points) < 2:
        raise ValueError(f"{where}: an axis needs at least two values, got {len(points)}")
    if len(set(labels)) != len(labels) or len({repr(sorted(p.items())) for p in points}) != len(points):
        raise ValueError(f"{where}: the values of an axis must be distinct, got {', '.join(labels)}")
    refine = raw.get("refine", numeric is not None and levels > 0)
    if not isinstance(refine, bool):
        raise ValueError(f"{where}.refine: expected true or false, got {_show(refine)}")
    if refine:
        if numeric is None:
            raise ValueError(f"{where}: refine = true needs a numeric axis (one numeric config field), but {name!r} "
                             f"has {'named points' if 'points' in raw else 'non-numeric values'}: set refine = false")
        if any(b <= a for a, b in zip(numeric, numeric[1:])):
            raise ValueError(f"{where}.values: a refined axis needs strictly increasing values, got {', '.join(labels)}")
        step = 2 ** levels
        if (len(points) - 1) % step:
            fits = ", ".join(str(step * k + 1) for k in range(1, 4))
            raise ValueError(f"{where}: {len(points)} values cannot be refined over {levels} level(s): a refined axis "
                             f"needs 2^levels k + 1 values ({fits}, ...), or refine = false")
    return Axis(str(name), tuple(labels), tuple(points), numeric, bool(refine), title, raw.get("field"))
