"""Sweep specs: a grid of configs at three scales, read from TOML (tomllib; docs/experiments.md).

Format::

    name = "claim1_scl_hscl_nc"          # also the default output folder name
    claim = "1"                           # optional: the docs/theory.md, section 9 claim it tests
    description = "..."
    seeds = [0, 1]                        # optional: every grid point once per seed, at every scale without
                                          # its own seeds (also accepted inside [base])
    [base]                                # Config fields shared by every scale
    model = "unconstrained"
    [[grid]]                              # one table: the product of its lists;
    setting = ["scl"]                     # several [[grid]] tables: the union of their products
    [[grid]]
    setting = ["hscl"]
    beta = [1.0, 5.0]
    [tiny]                                # one table per scale of ncgeom.vocabulary.SCALES:
    epochs = 2                            # tiny (tests), quick (default), full (paper scale);
    [[tiny.grid]]                         # its fields override [base], its [[<scale>.grid]]
    setting = ["scl"]                     # tables (if any) replace the grid
    [quick]
    seeds = [0, 1, 2]                     # every grid point of this scale once per seed
    [full]
    epochs = 500
    exploratory_seeds = [0, 1, 2, 3, 4]   # or two disjoint sets: the seeds a setup was explored on, and the
    confirmatory_seeds = [10, 11, 12, 13, 14]   # fresh ones its verdict is reported on (docs/theory.md, section 9)

``seeds``, ``exploratory_seeds`` and ``confirmatory_seeds`` are the keys of a scale besides the config fields and
``grid``; ``seeds`` alone is the confirmatory set of a spec that explores nothing. A sweep trains one set
(:meth:`SweepSpec.grids_at`, ``seeds="confirmatory"`` by default); a set a scale does not have is refused.

The claim specs ship inside the package (``ncgeom/campaigns/specs/<name>.toml``, read with
importlib.resources): :func:`spec_names` lists them and :func:`load_spec` takes a shipped name or a path.
"""

from __future__ import annotations

import hashlib
import importlib.resources
import itertools
import math
import os
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ncgeom.files import read_bounded
from ncgeom.runs.config import (
    COUPLED_FIELDS,
    Config,
    config_fields,
    config_from_dict,
    expected_type,
    field_type_error,
)
from ncgeom.validate import require_choice
from ncgeom.vocabulary import SCALES, SEED_SETS, SeedSet

__all__ = ["SweepSpec", "spec_names", "load_spec", "read_toml_spec", "show_value", "spec_from_dict", "expand",
           "run_name", "grid_size", "MAX_GRID_RUNS", "MAX_SPEC_BYTES"]

_SPEC_PACKAGE, _SPEC_FOLDER = "ncgeom.campaigns", "specs"
_FIELD_NAMES = frozenset(f.name for f in config_fields())

#: Most runs a spec may have at one scale (before deduplication): a larger grid is refused from the product
#: of its list lengths, before expansion. 10^5 runs are weeks of CPU at the quick scale; split bigger studies.
MAX_GRID_RUNS = 100_000
#: Largest spec file read (bytes): a spec is a few short lists; a bigger file is not a spec.
MAX_SPEC_BYTES = 4 * 2**20


@dataclass(frozen=True)
class SweepSpec:
    """A parsed sweep spec (module docstring). ``grids`` is a tuple of {field: tuple of values}.

    ``scales`` maps each scale name to its overrides (a ``"grid"`` entry replaces ``grids``);
    ``shipped`` is True for a spec loaded by name from the package.
    """

    name: str
    description: str
    claim: str | None
    base: dict = field(repr=False)
    grids: tuple[dict, ...] = field(repr=False)
    scales: dict = field(repr=False)
    path: str | None = None
    shipped: bool = False

    def grids_at(self, scale: str, *, seeds: SeedSet = "confirmatory") -> tuple[dict, ...]:
        """The grid tables in force at ``scale`` (the scale's own grid if it has one), each with ``seed`` = the
        scale's ``seeds`` set when it declares seed sets (ValueError naming the sets it has otherwise)."""
        over = self.scales[require_choice("scale", scale, SCALES)]
        grids = tuple(over["grid"]) if "grid" in over else self.grids
        sets = over.get("seed_sets")
        if not sets:
            return grids
        chosen = sets.get(require_choice("seeds", seeds, SEED_SETS))
        if chosen is None:
            raise ValueError(f"seeds: spec {self.name} has no {seeds} seeds at scale {scale} (it has "
                             f"{', '.join(sorted(sets))})")
        return tuple({**g, "seed": chosen} for g in grids)

    def seed_sets(self, scale: str) -> dict[str, tuple[int, ...]]:
        """The seed sets the scale declares ({} when its seeds, if any, are in the grid tables)."""
        return dict(self.scales[require_choice("scale", scale, SCALES)].get("seed_sets", {}))

    def grid_keys(self, scale: str) -> tuple[str, ...]:
        """Fields that the grid of ``scale`` varies (in first-seen order)."""
        keys: dict[str, None] = {}
        kinds: list[SeedSet] = [k for k in SEED_SETS if k in self.seed_sets(scale)] or ["confirmatory"]
        for g in self.grids_at(scale, seeds=kinds[0]):
            keys.update(dict.fromkeys(g))
        return tuple(keys)


def spec_names() -> tuple[str, ...]:
    """Names of the specs shipped with ncgeom (``ncgeom sweep --list``), sorted."""
    folder = importlib.resources.files(_SPEC_PACKAGE) / _SPEC_FOLDER
    return tuple(sorted(p.name[: -len(".toml")] for p in folder.iterdir() if p.name.endswith(".toml")))


def load_spec(spec: str | Path) -> SweepSpec:
    """Parse and validate a spec: a shipped name (:func:`spec_names`) or a TOML file path.

    Every config of every scale is validated here, before anything runs (:func:`spec_from_dict`).
    """
    raw, where, shipped = read_toml_spec(spec, package=_SPEC_PACKAGE, folder=_SPEC_FOLDER, names=spec_names(),
                                         kind="spec", plural="specs",
                                         what="a sweep spec (a grid is the product of short lists)")
    return spec_from_dict(raw, path=where, shipped=shipped)


def read_toml_spec(spec: str | Path, *, package: str, folder: str, names: tuple[str, ...], kind: str, plural: str,
                   what: str) -> tuple[dict[str, Any], str, bool]:
    """(the TOML table, where it came from, shipped) of a spec given as a shipped name (one of ``names``, read from
    ``package``/``folder``) or a TOML file: a regular file of at most :data:`MAX_SPEC_BYTES` (a FIFO, a device or a
    socket is refused, naming what it is), UTF-8, valid TOML; ValueError (FileNotFoundError) in one line starting
    with ``kind`` otherwise. The reader of sweep specs and of phase-map specs."""
    path = Path(spec)
    if path.suffix != ".toml" and not path.exists():
        name = str(spec)
        if name not in names:
            raise ValueError(f"{kind} must be a TOML file or one of the shipped {plural} {', '.join(names)}, "
                             f"got {name!r}")
        resource = importlib.resources.files(package) / folder / f"{name}.toml"
        return _parse(resource.read_text(encoding="utf-8"), name, kind), f"{name} (shipped)", True
    if not os.path.lexists(path):
        raise FileNotFoundError(f"{kind} {path} not found (shipped {plural}: {', '.join(names)})")
    try:
        data = read_bounded(path, what=what, max_bytes=MAX_SPEC_BYTES)
    except ValueError as exc:
        raise ValueError(f"{kind} {exc}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{kind} {path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    return _parse(text, str(path), kind), str(path), False


def _parse(text: str, where: str, kind: str = "spec") -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"{kind} {where}: invalid TOML: {exc}") from None


def show_value(value: Any) -> str:
    """A value as error messages show it: its repr cut at 60 characters, and its type."""
    return _show(value)


def _show(value: Any) -> str:
    text = repr(value)
    return (text if len(text) <= 60 else text[:57] + "...") + f" ({type(value).__name__})"


def spec_from_dict(raw: dict[str, Any], *, path: str | None = None, shipped: bool = False) -> SweepSpec:
    """A SweepSpec from the parsed TOML mapping (see :func:`load_spec`).

    Checked in this order, each error one line naming the key path (``spec f.toml: grid[0].beta[1]: ...``):
    the keys and their types, every field value (each distinct value once), the number of runs of each
    scale (at most :data:`MAX_GRID_RUNS`, from the product of the list lengths, before any expansion),
    then every combination of the fields that constrain one another (:data:`COUPLED_FIELDS`).
    """
    where = f"spec {path}" if path else "spec"
    if not isinstance(raw, dict):
        raise ValueError(f"{where}: expected a table of keys, got {_show(raw)}")
    known = {"name", "description", "claim", "seeds", "base", "grid", *SCALES}
    unknown = sorted(map(str, set(raw) - known))
    if unknown:
        raise ValueError(f"{where}: unknown key(s) {', '.join(unknown)}; accepted: {', '.join(sorted(known))}")
    for key in ("name", "description", "claim"):
        if key in raw and not isinstance(raw[key], str):
            raise ValueError(f"{where}: {key}: expected a string, got {_show(raw[key])}")
    name = raw.get("name") or (Path(path).stem if path and not shipped else "sweep")
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", str(name)):
        raise ValueError(f"{where}: name must use letters, digits, '_', '.', '-' only, got {name!r}")
    raw_base = raw.get("base", {})
    seeds, seeds_where = raw.get("seeds"), f"{where}: top level"
    if isinstance(raw_base, dict) and "seeds" in raw_base:  # the spec's seeds, written inside [base]
        if seeds is not None:
            raise ValueError(f"{where}: give seeds once, at the top of the spec or in [base], not both")
        raw_base = {k: v for k, v in raw_base.items() if k != "seeds"}
        seeds, seeds_where = raw["base"]["seeds"], f"{where}: base"
    base = _fields_table(raw_base, f"{where}: base")
    if seeds is not None and "seed" in base:
        raise ValueError(f"{where}: give either seed (in [base]) or seeds, not both")
    scales = {}
    top_grids = _parse_grids(raw.get("grid", {}), f"{where}: grid")
    for s in SCALES:
        over = _fields_table(raw.get(s, {}), f"{where}: {s}", allow_grid=True)
        if "grid" in over:
            over["grid"] = _parse_grids(over["grid"], f"{where}: {s}.grid")
        if seeds is not None and "seed" not in over and not any(k in over for k in _SEED_KEYS):
            over["seeds"] = seeds  # the spec's seeds, at a scale without its own
            sets = _seed_sets(over, top_grids, seeds_where)
        else:
            sets = _seed_sets(over, top_grids, f"{where}: {s}")
        if sets:
            over["seed_sets"] = sets
        scales[s] = over
    claim = raw.get("claim")
    spec = SweepSpec(str(name), str(raw.get("description", "")), claim, base, top_grids, scales, path, shipped)
    for scale in SCALES:
        count = grid_size(spec, scale)  # every seed set counted
        if count > MAX_GRID_RUNS:
            sizes = " + ".join(" x ".join(str(len(v)) for v in g.values()) or "1" for g in spec.grids_at(scale))
            raise ValueError(f"{where}: scale {scale}: the grid has {count} runs ({sizes}), above the limit of "
                             f"{MAX_GRID_RUNS} (ncgeom.campaigns.spec.MAX_GRID_RUNS); split it into several specs")
    for scale in SCALES:
        _validate_scale(spec, scale)  # every config is valid, before anything runs
    return spec


def grid_size(spec: SweepSpec, scale: str) -> int:
    """Number of grid points at ``scale`` before deduplication, every seed set counted: the sum over grid tables
    of the product of their list lengths (computed from the lengths, in microseconds, whatever the size)."""
    kinds: list[SeedSet] = [k for k in SEED_SETS if k in spec.seed_sets(scale)] or ["confirmatory"]
    return sum(math.prod(len(v) for v in g.values()) for kind in kinds for g in spec.grids_at(scale, seeds=kind))


_SEED_KEYS = {"seeds": "confirmatory", "exploratory_seeds": "exploratory", "confirmatory_seeds": "confirmatory"}


def _seed_sets(over: dict, top_grids: tuple[dict, ...], where: str) -> dict[str, tuple[int, ...]]:
    """The seed sets of a scale, taken out of ``over`` (module docstring): each a non-empty list of distinct
    seeds; ``seeds`` and ``confirmatory_seeds`` not both; the exploratory and confirmatory sets disjoint; no
    ``seed`` in the scale or its grid tables beside them."""
    given = [k for k in _SEED_KEYS if k in over]
    if not given:
        return {}
    if "seeds" in given and "confirmatory_seeds" in given:
        raise ValueError(f"{where}: give seeds or confirmatory_seeds, not both (seeds is the confirmatory set of a "
                         "spec without exploratory seeds)")
    sets: dict[str, tuple[int, ...]] = {}
    for key in given:
        seeds = over.pop(key)
        if not isinstance(seeds, list) or not seeds:
            raise ValueError(f"{where}.{key}: expected a non-empty list of seeds (integers >= 0), got {_show(seeds)}")
        for j, value in enumerate(seeds):
            problem = field_type_error("seed", value, many=True)
            if problem:
                raise ValueError(f"{where}.{key}[{j}]: {problem}")
        if len(set(seeds)) != len(seeds):
            raise ValueError(f"{where}.{key}: the seeds must be distinct, got {seeds}")
        sets[_SEED_KEYS[key]] = tuple(seeds)
    shared = set(sets.get("exploratory", ())) & set(sets.get("confirmatory", ()))
    if shared:
        raise ValueError(f"{where}: exploratory and confirmatory seeds must be disjoint, both have {sorted(shared)}")
    if "seed" in over:
        raise ValueError(f"{where}: give either seed or {given[0]}, not both")
    for i, g in enumerate(over.get("grid", top_grids)):
        if "seed" in g:
            raise ValueError(f"{where}: {given[0]} is given, so grid table {i} must not list seed too")
    return sets


def _fields_table(raw: Any, where: str, *, allow_grid: bool = False) -> dict:
    """A table of config fields with the right types (a grid key kept as it is when ``allow_grid``)."""
    if not isinstance(raw, dict):
        raise ValueError(f"{where}: expected a table of config fields, got {_show(raw)}")
    out = {}
    for key, value in raw.items():
        if allow_grid and (key == "grid" or key in _SEED_KEYS):
            out[key] = value
            continue
        if key not in _FIELD_NAMES:
            raise ValueError(f"{where}: unknown config field {key!r}")
        problem = field_type_error(key, value)
        if problem:
            raise ValueError(f"{where}.{key}: {problem}")
        out[key] = value
    return out


def _parse_grids(raw: Any, where: str) -> tuple[dict, ...]:
    if isinstance(raw, dict):
        tables, paths = [raw], [where]
    elif isinstance(raw, list):
        tables, paths = raw, [f"{where}[{i}]" for i in range(len(raw))]
    else:
        raise ValueError(f"{where}: expected a table or an array of tables ([[grid]]), got {_show(raw)}")
    out = []
    for t, at in zip(tables, paths):
        if not isinstance(t, dict):
            raise ValueError(f"{at}: expected a table of config fields and their lists of values, got {_show(t)}")
        g = {}
        for k, v in t.items():
            if k not in _FIELD_NAMES:
                raise ValueError(f"{at}: unknown config field {k!r} in grid")
            if not isinstance(v, list):
                raise ValueError(f"{at}.{k}: expected {expected_type(k, many=True)}, got {_show(v)}")
            if not v:
                raise ValueError(f"{at}.{k}: grid field {k!r} has no values")
            for j, value in enumerate(v):
                problem = field_type_error(k, value, many=True)
                if problem:
                    raise ValueError(f"{at}.{k}[{j}]: {problem}")
            g[k] = tuple(v)
        out.append(g)
    return tuple(out) if out else ({},)


def _validate_scale(spec: SweepSpec, scale: str) -> None:
    """Every config of ``scale`` is valid; each value of an uncoupled field is checked once.

    A field outside :data:`COUPLED_FIELDS` is valid or not on its own, so a grid table is checked as the
    product of its coupled fields (the uncoupled ones at each of their values, one at a time).
    """
    base = {**spec.base, **{k: v for k, v in spec.scales[scale].items() if k not in ("grid", "seed_sets")}}
    kinds: list[SeedSet] = [k for k in SEED_SETS if k in spec.seed_sets(scale)] or ["confirmatory"]
    for g in (g for kind in kinds for g in spec.grids_at(scale, seeds=kind)):
        coupled = [k for k in g if k in COUPLED_FIELDS]
        first = {k: v[0] for k, v in g.items()}
        for k, values in g.items():
            if k in COUPLED_FIELDS:
                continue
            for value in dict.fromkeys(values, None) if _hashable(values) else values:
                _config(spec, scale, base, {**first, k: value})
        for combo in itertools.product(*(g[k] for k in coupled)):
            _config(spec, scale, base, {**first, **dict(zip(coupled, combo))})


def _hashable(values) -> bool:
    try:
        hash(values)
    except TypeError:
        return False
    return True


def _config(spec: SweepSpec, scale: str, base: dict, point: dict) -> Config:
    try:
        return config_from_dict({**base, **point})
    except (ValueError, TypeError) as exc:
        raise ValueError(f"spec {spec.path or spec.name} (scale {scale}, {point}): {exc}") from None


def expand(spec: SweepSpec, *, scale: str = "quick", seeds: SeedSet = "confirmatory") -> list[Config]:
    """The configs of a spec at a scale and seed set: base <- scale overrides <- each grid point (deduplicated)."""
    scale = require_choice("scale", scale, SCALES)
    count = grid_size(spec, scale)
    if count > MAX_GRID_RUNS:  # a SweepSpec built by hand, not through spec_from_dict
        raise ValueError(f"spec {spec.path or spec.name}: scale {scale}: the grid has {count} runs, above the "
                         f"limit of {MAX_GRID_RUNS}")
    base = {**spec.base, **{k: v for k, v in spec.scales[scale].items() if k not in ("grid", "seed_sets")}}
    configs, seen = [], set()
    for g in spec.grids_at(scale, seeds=seeds):
        keys = list(g)
        for values in itertools.product(*(g[k] for k in keys)):
            cfg = _config(spec, scale, base, dict(zip(keys, values)))
            key = tuple((type(v), v) for v in vars(cfg).values())  # as to_json() would tell, 5x faster
            if key not in seen:
                seen.add(key)
                configs.append(cfg)
    return configs


def run_name(config: Config, keys) -> str:
    """Directory name of a run: the grid fields' values, then a hash of the whole config."""
    parts = [f"{k}={_short(getattr(config, k))}" for k in keys]
    digest = hashlib.sha1(config.to_json().encode()).hexdigest()[:8]
    return re.sub(r"[^A-Za-z0-9_.=,-]", "_", ",".join(parts + [digest]))


def _short(v) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)
