"""``sweep.json`` of a sweep folder: :class:`SweepRecord`, written by :func:`ncgeom.campaigns.sweep.run_sweep` and
read back through this type (strict keys) by every reader (the figures, the report, ``ncgeom summarize``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from ncgeom.atomic_io import atomic_write_json, read_json
from ncgeom.validate import require_keys
from ncgeom.vocabulary import SCALES, SEED_SETS, SWEEP_STATUSES, SeedSet, SweepStatus

__all__ = ["SWEEP_FILE", "SweepRunEntry", "SweepRecord"]

SWEEP_FILE = "sweep.json"


@dataclass(frozen=True)
class SweepRunEntry:
    """One run of a sweep as sweep.json lists it: its name, status, the error of a failed run, and why a run found
    damaged was rerun (None when it was not)."""

    name: str
    status: SweepStatus
    error: str | None = None
    invalid: str | None = None

    def __post_init__(self) -> None:
        if self.status not in SWEEP_STATUSES:
            raise ValueError(f"sweep run status must be one of {', '.join(SWEEP_STATUSES)}, got {self.status!r}")

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SweepRunEntry:
        names = {f.name for f in fields(cls)}
        require_keys("sweep.json run", data, accepted=names, required=names)
        return cls(**data)


@dataclass(frozen=True)
class SweepRecord:
    """sweep.json: what was swept (spec name, the claim it tests, description, scale, spec path, grid keys), by which
    engine, every run's status in grid order, and which seed set was trained (``confirmatory`` in a sweep.json
    written before seed sets existed)."""

    name: str
    claim: str | None
    description: str
    scale: str
    spec_path: str | None
    grid_keys: tuple[str, ...]
    engine: str
    runs: tuple[SweepRunEntry, ...]
    seeds: SeedSet = "confirmatory"

    def __post_init__(self) -> None:
        if self.scale not in SCALES:
            raise ValueError(f"sweep scale must be one of {', '.join(SCALES)}, got {self.scale!r}")
        if self.seeds not in SEED_SETS:
            raise ValueError(f"sweep seeds must be one of {', '.join(SEED_SETS)}, got {self.seeds!r}")

    def to_dict(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out.update(grid_keys=list(self.grid_keys), runs=[{f.name: getattr(r, f.name) for f in fields(r)}
                                                            for r in self.runs])
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SweepRecord:
        names = {f.name for f in fields(cls)}
        require_keys("sweep.json", data, accepted=names, required=names - {"seeds"})  # seeds: since seed sets
        return cls(**{**data, "grid_keys": tuple(data["grid_keys"]),
                      "runs": tuple(SweepRunEntry.from_dict(r) for r in data["runs"])})

    def save(self, folder: str | Path) -> Path:
        """Write ``folder/sweep.json`` atomically."""
        return atomic_write_json(Path(folder) / SWEEP_FILE, self.to_dict())

    @classmethod
    def load(cls, folder: str | Path) -> SweepRecord | None:
        """``folder/sweep.json``, or None when the folder has none (ValueError naming the file when it is not a
        sweep record)."""
        path = Path(folder) / SWEEP_FILE
        if not path.is_file():
            return None
        try:
            return cls.from_dict(read_json(path))
        except (TypeError, ValueError, AttributeError) as exc:
            raise ValueError(f"{path}: not an ncgeom sweep record ({' '.join(str(exc).split())[:200]})") from None
