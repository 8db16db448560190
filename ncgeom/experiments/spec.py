"""Sweep specs: a grid of configs at three scales, read from TOML (tomllib; docs/experiments.md).

Format::

    name = "claim1_scl_hscl_nc"          # also the default output folder name
    claim = "1"                           # optional: the docs/theory.md, section 9 claim it tests
    description = "..."
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
    [full]
    epochs = 500

The claim specs ship inside the package (``ncgeom/experiments/specs/<name>.toml``, read with
importlib.resources): :func:`spec_names` lists them and :func:`load_spec` takes a shipped name or a path.
"""

from __future__ import annotations

import hashlib
import importlib.resources
import itertools
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ncgeom.experiments.config import Config, config_fields, config_from_dict
from ncgeom.validate import require_choice
from ncgeom.vocabulary import SCALES

__all__ = ["SweepSpec", "spec_names", "load_spec", "spec_from_dict", "expand", "run_name"]

_SPEC_PACKAGE, _SPEC_FOLDER = "ncgeom.experiments", "specs"


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

    def grids_at(self, scale: str) -> tuple[dict, ...]:
        """The grid tables in force at ``scale`` (the scale's own grid if it has one)."""
        over = self.scales[require_choice("scale", scale, SCALES)]
        return tuple(over["grid"]) if "grid" in over else self.grids

    def grid_keys(self, scale: str) -> tuple[str, ...]:
        """Fields that the grid of ``scale`` varies (in first-seen order)."""
        keys: dict[str, None] = {}
        for g in self.grids_at(scale):
            keys.update(dict.fromkeys(g))
        return tuple(keys)


def spec_names() -> tuple[str, ...]:
    """Names of the specs shipped with ncgeom (``ncgeom sweep --list``), sorted."""
    folder = importlib.resources.files(_SPEC_PACKAGE) / _SPEC_FOLDER
    return tuple(sorted(p.name[: -len(".toml")] for p in folder.iterdir() if p.name.endswith(".toml")))


def load_spec(spec: str | Path) -> SweepSpec:
    """Parse and validate a spec: a shipped name (:func:`spec_names`) or a TOML file path.

    Every config of every scale is validated here, before anything runs.
    """
    path = Path(spec)
    if path.suffix != ".toml" and not path.exists():
        name = str(spec)
        if name not in spec_names():
            raise ValueError(f"spec must be a TOML file or one of the shipped specs {', '.join(spec_names())}, got {name!r}")
        resource = importlib.resources.files(_SPEC_PACKAGE) / _SPEC_FOLDER / f"{name}.toml"
        return spec_from_dict(_parse(resource.read_text(encoding="utf-8"), name), path=f"{name} (shipped)", shipped=True)
    if not path.is_file():
        raise FileNotFoundError(f"spec {path} not found (shipped specs: {', '.join(spec_names())})")
    return spec_from_dict(_parse(path.read_text(encoding="utf-8"), str(path)), path=str(path))


def _parse(text: str, where: str) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"spec {where}: invalid TOML: {exc}") from None


def spec_from_dict(raw: dict[str, Any], *, path: str | None = None, shipped: bool = False) -> SweepSpec:
    """A SweepSpec from the parsed TOML mapping (see :func:`load_spec`)."""
    where = f"spec {path}" if path else "spec"
    known = {"name", "description", "claim", "base", "grid", *SCALES}
    unknown = sorted(set(raw) - known)
    if unknown:
        raise ValueError(f"{where}: unknown key(s) {', '.join(unknown)}; accepted: {', '.join(sorted(known))}")
    name = raw.get("name") or (Path(path).stem if path and not shipped else "sweep")
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", str(name)):
        raise ValueError(f"{where}: name must use letters, digits, '_', '.', '-' only, got {name!r}")
    scales = {}
    for s in SCALES:
        over = dict(raw.get(s, {}))
        if "grid" in over:
            over["grid"] = _parse_grids(over["grid"], f"{where} [{s}]")
        scales[s] = over
    claim = raw.get("claim")
    spec = SweepSpec(str(name), str(raw.get("description", "")), None if claim is None else str(claim),
                     dict(raw.get("base", {})), _parse_grids(raw.get("grid", {}), where), scales, path, shipped)
    for scale in SCALES:
        expand(spec, scale=scale)  # validates every config now, before anything runs
    return spec


def _parse_grids(raw, where: str) -> tuple[dict, ...]:
    tables = [raw] if isinstance(raw, dict) else list(raw)
    names = {f.name for f in config_fields()}
    out = []
    for t in tables:
        if not isinstance(t, dict):
            raise ValueError(f"{where}: grid must be a table or an array of tables")
        g = {}
        for k, v in t.items():
            if k not in names:
                raise ValueError(f"{where}: unknown config field {k!r} in grid")
            values = tuple(v) if isinstance(v, list) else (v,)
            if not values:
                raise ValueError(f"{where}: grid field {k!r} has no values")
            g[k] = values
        out.append(g)
    return tuple(out) if out else ({},)


def expand(spec: SweepSpec, *, scale: str = "quick") -> list[Config]:
    """The configs of a spec at a scale: base <- scale overrides <- each grid point (deduplicated)."""
    scale = require_choice("scale", scale, SCALES)
    base = {**spec.base, **{k: v for k, v in spec.scales[scale].items() if k != "grid"}}
    configs, seen = [], set()
    for g in spec.grids_at(scale):
        keys = list(g)
        for values in itertools.product(*(g[k] for k in keys)):
            point = dict(zip(keys, values))
            try:
                cfg = config_from_dict({**base, **point})
            except (ValueError, TypeError) as exc:
                raise ValueError(f"spec {spec.path or spec.name} (scale {scale}, {point}): {exc}") from None
            key = cfg.to_json()
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
