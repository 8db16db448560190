"""The files of a reproduction folder that the figures read: ``reproduce.json`` and ``figures/status.json``.

Each file has one owner type, which writes it and reads it back strictly (unknown or missing keys, a value of the
wrong type, a JSON list where an object belongs: one line naming the file; docs/architecture.md, "One owner per
file format"):

- :class:`ReproductionManifest`, ``OUT/reproduce.json``: the scale of the reproduction, its device (None: the CPU,
  and then not written, as before devices existed) and the provenance of the call that started it. Written by the
  pipeline (:mod:`ncgeom.reproduce.pipeline`), read by the pipeline, the report and the captions of the theory
  figures (:func:`ncgeom.figures.runs.reproduction_scale`);
- :class:`FigureRecord` and :class:`FigureStatuses`, ``OUT/figures/status.json``: how each figure's last rendering
  ended. Written by :func:`ncgeom.figures.render.render_all`, read by the report and the gallery.

They live with the figures, below the reproduction (import layers: docs/architecture.md), because the figures read
both; :mod:`ncgeom.reproduce.records` re-exports them with the reproduction's own records.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from ncgeom.atomic_io import atomic_write_json
from ncgeom.files import read_bounded
from ncgeom.validate import require_keys
from ncgeom.vocabulary import FIGURE_STATUSES, SCALES, FigureStatus, Scale

__all__ = ["MANIFEST_FILE", "STATUS_FILE", "ReproductionManifest", "FigureRecord", "FigureStatuses", "read_record_file"]

MANIFEST_FILE = "reproduce.json"
STATUS_FILE = "status.json"
_MAX_RECORD_BYTES = 16 * 2**20  # a record file of a reproduction: kilobytes (tracebacks included)


def read_record_file(path: Path, what: str) -> Any:
    """The JSON value of one of the reproduction's record files (a regular file of at most 16 MiB), or ValueError
    naming the file (not JSON, not UTF-8, a FIFO, too large)."""
    try:
        return json.loads(read_bounded(path, what=what, max_bytes=_MAX_RECORD_BYTES))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path}: not {what} ({type(exc).__name__}: {' '.join(str(exc).split())[:120]})") from None


def _require(condition: bool, path: Path, message: str) -> None:
    if not condition:
        raise ValueError(f"{path}: {message}")


@dataclass(frozen=True)
class ReproductionManifest:
    """``OUT/reproduce.json`` (module docstring)."""

    scale: Scale
    device: str | None
    provenance: Mapping[str, Any] = field(repr=False)

    def to_dict(self) -> dict[str, Any]:
        return {"scale": self.scale, **({"device": self.device} if self.device is not None else {}),
                "provenance": dict(self.provenance)}

    @classmethod
    def from_dict(cls, data: Any, *, path: Path = Path(MANIFEST_FILE)) -> ReproductionManifest:
        try:
            require_keys("reproduction manifest", data, accepted=("scale", "device", "provenance"),
                         required=("scale", "provenance"))
        except ValueError as exc:
            raise ValueError(f"{path}: {exc}") from None
        _require(data["scale"] in SCALES, path, f"scale must be one of {', '.join(SCALES)}, got {data['scale']!r}")
        device = data["device"] if "device" in data else None
        _require(device is None or isinstance(device, str), path, f"device must be a string, got {device!r}")
        _require(isinstance(data["provenance"], dict), path, "provenance must be a JSON object")
        return cls(scale=data["scale"], device=device, provenance=data["provenance"])

    def save(self, out: str | Path) -> Path:
        return atomic_write_json(Path(out) / MANIFEST_FILE, self.to_dict())

    @classmethod
    def load(cls, out: str | Path) -> ReproductionManifest | None:
        """The manifest of the reproduction folder ``out``, None for a folder without one."""
        path = Path(out) / MANIFEST_FILE
        if not os.path.lexists(path):  # a FIFO, a device or a loop in its place is refused when read
            return None
        return cls.from_dict(read_record_file(path, "a reproduction manifest"), path=path)


_FIGURE_KEYS = ("status", "files", "error", "caption")


@dataclass(frozen=True)
class FigureRecord:
    """One figure's entry of ``figures/status.json``: ``status`` (done, no data, failed), the files drawn, the
    one-line error, the caption shown with it, and the end of the traceback of a failure."""

    status: FigureStatus
    files: tuple[str, ...] = ()
    error: str = ""
    caption: str = ""
    traceback: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"status": self.status, "files": list(self.files), "error": self.error}
        if self.traceback is not None:
            out["traceback"] = self.traceback
        out["caption"] = self.caption
        return out

    @classmethod
    def from_dict(cls, data: Any, *, where: str) -> FigureRecord:
        require_keys(where, data, accepted=(*_FIGURE_KEYS, "traceback"), required=_FIGURE_KEYS)
        if data["status"] not in FIGURE_STATUSES:
            raise ValueError(f"{where}: status must be one of {', '.join(FIGURE_STATUSES)}, got {data['status']!r}")
        files, trace = data["files"], data["traceback"] if "traceback" in data else None
        if not (isinstance(files, list) and all(isinstance(f, str) for f in files)
                and isinstance(data["error"], str) and isinstance(data["caption"], str)
                and (trace is None or isinstance(trace, str))):
            raise ValueError(f"{where}: files must be a list of names; error, caption and traceback strings")
        return cls(status=cast(FigureStatus, data["status"]), files=tuple(files), error=data["error"],
                   caption=data["caption"], traceback=trace)


@dataclass(frozen=True)
class FigureStatuses:
    """``figures/status.json``: the :class:`FigureRecord` of each figure rendered, by name, in rendering order."""

    figures: Mapping[str, FigureRecord]

    def __iter__(self) -> Iterator[str]:
        return iter(self.figures)

    def of(self, name: str) -> FigureRecord | None:
        """The record of figure ``name``, None when it was not rendered."""
        return self.figures[name] if name in self.figures else None

    def to_dict(self) -> dict[str, Any]:
        return {name: record.to_dict() for name, record in self.figures.items()}

    @classmethod
    def from_dict(cls, data: Any, *, path: Path = Path(STATUS_FILE)) -> FigureStatuses:
        _require(isinstance(data, dict), path, f"expected a JSON object of figures, got {type(data).__name__}")
        try:
            return cls({name: FigureRecord.from_dict(entry, where=f"figure {name}") for name, entry in data.items()})
        except ValueError as exc:
            raise ValueError(f"{path}: {' '.join(str(exc).split())}") from None

    def save(self, folder: str | Path) -> Path:
        """Write ``folder/status.json`` atomically (``folder``: the figures' folder, ``OUT/figures``)."""
        return atomic_write_json(Path(folder) / STATUS_FILE, self.to_dict())

    @classmethod
    def load(cls, folder: str | Path) -> FigureStatuses | None:
        """``folder/status.json``, None where the figures were never rendered."""
        path = Path(folder) / STATUS_FILE
        if not os.path.lexists(path):  # a FIFO, a device or a loop in its place is refused when read
            return None
        return cls.from_dict(read_record_file(path, "a figures status record"), path=path)
