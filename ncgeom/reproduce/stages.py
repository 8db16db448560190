"""The stages of a reproduction and the record of each stage's last run (``OUT/.stages/<stage>.json``).

Imported by the pipeline (which writes the records) and the report (which reads them).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Literal, get_args

from ncgeom.atomic_io import atomic_write_json, read_json

__all__ = ["STAGES", "StageStatus", "STAGE_STATUSES", "StageRecord", "StageOutcome"]

STAGES: tuple[str, ...] = ("verify", "theory", "claims", "figures", "report")
StageStatus = Literal["done", "failed"]
STAGE_STATUSES: tuple[str, ...] = get_args(StageStatus)


@dataclass(frozen=True)
class StageRecord:
    """How a stage ended the last time it ran: status, seconds, one-line error, its summary, a traceback."""

    stage: str
    status: StageStatus
    seconds: float
    error: str = ""
    summary: dict[str, Any] = field(default_factory=dict)
    traceback: str = ""

    def __post_init__(self) -> None:
        if self.stage not in STAGES or self.status not in STAGE_STATUSES:
            raise ValueError(f"stage record: stage must be one of {STAGES} and status one of {STAGE_STATUSES}, "
                             f"got {self.stage!r}, {self.status!r}")

    def save(self, out: str | Path) -> Path:
        return atomic_write_json(self.path(out, self.stage), {f.name: getattr(self, f.name) for f in fields(self)})

    @classmethod
    def load(cls, out: str | Path, stage: str) -> StageRecord | None:
        """The record of ``stage`` in the reproduction ``out``, or None if the stage never ran there."""
        path = cls.path(out, stage)
        if not path.is_file():
            return None
        data = read_json(path)
        names = {f.name for f in fields(cls)}
        if not isinstance(data, dict) or set(data) != names:
            raise ValueError(f"{path}: expected exactly the keys {', '.join(sorted(names))}")
        return cls(**data)

    @staticmethod
    def path(out: str | Path, stage: str) -> Path:
        return Path(out) / ".stages" / f"{stage}.json"


@dataclass(frozen=True)
class StageOutcome:
    """What happened to one stage in this call: ``done``, ``skipped`` (finished earlier) or ``failed``."""

    stage: str
    status: Literal["done", "skipped", "failed"]
    seconds: float = 0.0
    error: str = ""
