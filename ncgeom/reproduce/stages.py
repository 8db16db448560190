"""The stages of a reproduction and the record of each stage's last run (``OUT/.stages/<stage>.json``).

Imported by the pipeline (which writes the records) and the report (which reads them). The status words are the
vocabulary's (:data:`ncgeom.vocabulary.StageStatus`: how a stage ended when it ran;
:data:`ncgeom.vocabulary.StageOutcomeStatus`: what happened to it in a call, ``skipped`` included); a record's
summary is its stage's typed summary (:mod:`ncgeom.reproduce.records`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from ncgeom.atomic_io import atomic_write_json
from ncgeom.figures.records import read_record_file
from ncgeom.reproduce.records import StageSummary, summary_from_dict
from ncgeom.validate import require_keys
from ncgeom.vocabulary import STAGE_OUTCOME_STATUSES, STAGE_STATUSES, StageOutcomeStatus, StageStatus

__all__ = ["STAGES", "StageStatus", "STAGE_STATUSES", "StageOutcomeStatus", "StageRecord", "StageOutcome"]

STAGES: tuple[str, ...] = ("verify", "theory", "claims", "phase", "figures", "report")
_RECORD_KEYS = ("stage", "status", "seconds", "error", "summary", "traceback")


@dataclass(frozen=True)
class StageRecord:
    """How a stage ended the last time it ran: status, seconds, one-line error, its summary (None when the stage
    raised), the end of a traceback."""

    stage: str
    status: StageStatus
    seconds: float
    error: str = ""
    summary: StageSummary | None = None
    traceback: str = ""

    def __post_init__(self) -> None:
        if self.stage not in STAGES or self.status not in STAGE_STATUSES:
            raise ValueError(f"stage record: stage must be one of {STAGES} and status one of {STAGE_STATUSES}, "
                             f"got {self.stage!r}, {self.status!r}")

    def to_dict(self) -> dict:
        return {"stage": self.stage, "status": self.status, "seconds": self.seconds, "error": self.error,
                "summary": {} if self.summary is None else self.summary.to_dict(), "traceback": self.traceback}

    def save(self, out: str | Path) -> Path:
        return atomic_write_json(self.path(out, self.stage), self.to_dict())

    @classmethod
    def load(cls, out: str | Path, stage: str) -> StageRecord | None:
        """The record of ``stage`` in the reproduction ``out``, or None if the stage never ran there."""
        path = cls.path(out, stage)
        if not os.path.lexists(path):  # a FIFO, a device or a loop in its place is refused when read
            return None
        data = read_record_file(path, "a stage record")
        try:
            require_keys("stage record", data, accepted=_RECORD_KEYS, required=_RECORD_KEYS)
            if data["stage"] != stage or not isinstance(data["seconds"], (int, float)) \
                    or not isinstance(data["error"], str) or not isinstance(data["traceback"], str):
                raise ValueError(f"stage record: expected stage {stage!r}, seconds a number, error and traceback text")
            summary = None if data["summary"] == {} else summary_from_dict(stage, data["summary"])
            return cls(stage, data["status"], float(data["seconds"]), data["error"], summary, data["traceback"])
        except ValueError as exc:
            raise ValueError(f"{path}: {' '.join(str(exc).split())}") from None

    @staticmethod
    def path(out: str | Path, stage: str) -> Path:
        return Path(out) / ".stages" / f"{stage}.json"


@dataclass(frozen=True)
class StageOutcome:
    """What happened to one stage in this call: ``done``, ``skipped`` (finished earlier) or ``failed``."""

    stage: str
    status: StageOutcomeStatus
    seconds: float = 0.0
    error: str = ""

    def __post_init__(self) -> None:
        if self.status not in STAGE_OUTCOME_STATUSES:
            raise ValueError(f"stage outcome: status must be one of {STAGE_OUTCOME_STATUSES}, got {self.status!r}")
