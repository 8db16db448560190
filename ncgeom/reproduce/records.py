"""The record types of a reproduction folder: the manifest, the figures' status, and each stage's summary.

One owner type per file (docs/architecture.md, "One owner per file format"); every reader goes through them, so a
file of the wrong shape (``reproduce.json`` holding a JSON list, say) is one line naming the file, never an internal
error:

- ``OUT/reproduce.json``: :class:`~ncgeom.figures.records.ReproductionManifest` (the scale, the device, the
  provenance);
- ``OUT/figures/status.json``: :class:`~ncgeom.figures.records.FigureStatuses` of
  :class:`~ncgeom.figures.records.FigureRecord`;

both defined with the figures, which read them and sit below the reproduction (docs/architecture.md), and
re-exported here;

- the summary of each stage (what a stage function of :mod:`ncgeom.reproduce.pipeline` returns, kept in
  ``OUT/.stages/<stage>.json``, :class:`~ncgeom.reproduce.stages.StageRecord`): :class:`VerifySummary`,
  :class:`TheorySummary`, :class:`ClaimsSummary`, :class:`PhaseSummary`, :class:`FiguresSummary`,
  :class:`ReportSummary`. Each has
  ``failed`` (one line per failure: the stage then ends "failed") and writes exactly the JSON object the stage
  wrote before these types existed (a key appears only where it did), so earlier reproduction folders read back.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any, ClassVar, Self

from ncgeom.figures.records import FigureRecord, FigureStatuses, ReproductionManifest
from ncgeom.validate import require_keys

__all__ = ["ReproductionManifest", "FigureRecord", "FigureStatuses", "StageSummary", "VerifySummary",
           "TheorySummary", "ClaimsSummary", "PhaseSummary", "FiguresSummary", "ReportSummary", "STAGE_SUMMARIES",
           "summary_from_dict"]


def _strings(value: Any) -> bool:
    return isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value)


@dataclass(frozen=True)
class StageSummary:
    """What every stage's summary has: ``failed``, one line per failure (empty: the stage is done)."""

    failed: tuple[str, ...] = ()
    #: The keys a summary writes only when they hold something (besides ``failed``).
    OPTIONAL: ClassVar[tuple[str, ...]] = ()

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "failed" or (f.name in self.OPTIONAL and value is None):
                continue
            out[f.name] = list(value) if isinstance(value, tuple) else value
        if self.failed:
            out["failed"] = list(self.failed)
        return out

    @classmethod
    def from_dict(cls, data: Any, *, where: str = "stage summary") -> Self:
        names = [f.name for f in fields(cls)]
        required = [n for n in names if n != "failed" and n not in cls.OPTIONAL]
        require_keys(where, data, accepted=names, required=required)
        values = dict(data)
        if "failed" in values and not _strings(values["failed"]):
            raise ValueError(f"{where}: failed must be a list of strings")
        values = {k: tuple(v) if isinstance(v, list) else v for k, v in values.items()}
        try:
            return cls(**values)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{where}: {' '.join(str(exc).split())}") from None

    def _check(self, condition: bool, message: str) -> None:
        if not condition:
            raise ValueError(f"{type(self).__name__}: {message}")


@dataclass(frozen=True)
class VerifySummary(StageSummary):
    """The verify stage: the number of checks; ``skipped`` at a scale without verification, else the counts by
    status, the modules run and whether every check passed."""

    checks: int = 0
    skipped: bool | None = None
    counts: Mapping[str, int] | None = None
    modules: tuple[str, ...] | None = None
    passed: bool | None = None
    OPTIONAL: ClassVar[tuple[str, ...]] = ("skipped", "counts", "modules", "passed")

    def __post_init__(self) -> None:
        self._check(isinstance(self.checks, int) and not isinstance(self.checks, bool) and self.checks >= 0,
                    "checks must be an integer >= 0")
        self._check(self.counts is None or (isinstance(self.counts, Mapping) and all(
            isinstance(v, int) for v in self.counts.values())), "counts must map statuses to integers")
        self._check(self.modules is None or _strings(self.modules), "modules must be a list of names")
        self._check(all(v is None or isinstance(v, bool) for v in (self.skipped, self.passed)),
                    "skipped and passed must be true or false")


@dataclass(frozen=True)
class TheorySummary(StageSummary):
    """The theory stage: the theory files computed and those skipped (already there)."""

    computed: tuple[str, ...] = ()
    skipped: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        self._check(_strings(self.computed) and _strings(self.skipped), "computed and skipped must be lists of names")


@dataclass(frozen=True)
class ClaimsSummary(StageSummary):
    """The claims stage: each claim's overall verdict (as text)."""

    claims: Mapping[str, str] | None = None

    def __post_init__(self) -> None:
        self._check(isinstance(self.claims, Mapping) and all(isinstance(v, str) for v in self.claims.values()),
                    "claims must map claim ids to verdicts")


@dataclass(frozen=True)
class PhaseSummary(StageSummary):
    """The phase stage: each map's status in words (its runs trained against a uniform grid's, its cells by label)."""

    maps: Mapping[str, str] | None = None

    def __post_init__(self) -> None:
        self._check(isinstance(self.maps, Mapping) and all(isinstance(v, str) for v in self.maps.values()),
                    "maps must map map names to their status")


@dataclass(frozen=True)
class FiguresSummary(StageSummary):
    """The figures stage: the number of figures drawn and the names of those without their data."""

    rendered: int = 0
    no_data: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        self._check(isinstance(self.rendered, int) and not isinstance(self.rendered, bool) and _strings(self.no_data),
                    "rendered must be an integer and no_data a list of names")

    @classmethod
    def of(cls, statuses: FigureStatuses) -> FiguresSummary:
        """The summary of a rendering: done, no data, and one line per failed figure."""
        records = statuses.figures
        return cls(rendered=sum(r.status == "done" for r in records.values()),
                   no_data=tuple(n for n, r in records.items() if r.status == "no data"),
                   failed=tuple(f"{n}: {r.error}" for n, r in records.items() if r.status == "failed"))


@dataclass(frozen=True)
class ReportSummary(StageSummary):
    """The report stage: the report's file name."""

    report: str = "report.md"


#: The summary type of each stage, by name (:data:`ncgeom.reproduce.stages.STAGES`).
STAGE_SUMMARIES: dict[str, type[StageSummary]] = {
    "verify": VerifySummary, "theory": TheorySummary, "claims": ClaimsSummary, "phase": PhaseSummary,
    "figures": FiguresSummary, "report": ReportSummary,
}


def summary_from_dict(stage: str, data: Any) -> StageSummary:
    """The summary of ``stage`` from its JSON object (ValueError naming the stage otherwise)."""
    if stage not in STAGE_SUMMARIES:
        raise ValueError(f"stage must be one of {', '.join(STAGE_SUMMARIES)}, got {stage!r}")
    return STAGE_SUMMARIES[stage].from_dict(data, where=f"{stage} summary")
