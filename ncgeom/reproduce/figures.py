"""Render the registered figures in process by loading each ``figures/<name>.py`` script.

A figure script exposes ``plot(results: Path, out: Path) -> list[Path]``. It reads only saved
results; when the results it needs are absent it raises
:class:`ncgeom.reproduce.results.MissingResults` and the figure is reported as *no data* (not as a
failure of the pipeline). Any other exception marks that figure failed; the others still render.
"""

from __future__ import annotations

import importlib.util
import traceback
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

from ncgeom.atomic_io import atomic_write_json
from ncgeom.reproduce.registry import FIGURES, figures_dir
from ncgeom.reproduce.results import MissingResults

__all__ = ["load_figure_module", "render_figure", "render_all"]


def load_figure_module(name: str, *, directory: Path | None = None) -> ModuleType:
    """Import ``<directory>/<name>.py`` (default: the repository's figures/) as a module."""
    directory = Path(directory) if directory is not None else figures_dir()
    path = directory / f"{name}.py"
    if not path.exists():
        raise FileNotFoundError(f"figure script {path} not found (figures/ ships with the source checkout)")
    spec = importlib.util.spec_from_file_location(f"ncgeom_figures_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def render_figure(name: str, results: Path, out: Path, *, formats: tuple[str, ...] = ("png", "pdf")) -> dict:
    """Render one figure; return ``{"status": "done"|"no data"|"failed", "files": [...], "error": ...}``."""
    from ncgeom.reproduce.plotting import image_formats

    try:
        module = load_figure_module(name)
        with image_formats(formats):
            files = module.plot(Path(results), Path(out))
    except MissingResults as exc:
        return {"status": "no data", "files": [], "error": " ".join(str(exc).split())}
    except Exception as exc:
        return {
            "status": "failed",
            "files": [],
            "error": f"{exc.__class__.__name__}: {' '.join(str(exc).split())}"[:400],
            "traceback": traceback.format_exc()[-3000:],
        }
    return {"status": "done", "files": [str(Path(f)) for f in files], "error": ""}


def render_all(results: Path, out: Path, *, formats: tuple[str, ...] = ("png", "pdf"), log: Callable[[str], None] = print) -> dict:
    """Render every registered figure; write ``<out>/status.json``; return the stage summary."""
    status = {}
    for spec in FIGURES:
        status[spec.name] = render_figure(spec.name, results, out, formats=formats)
        log(f"  {spec.name}: {status[spec.name]['status']}" + (f" ({status[spec.name]['error']})" if status[spec.name]["error"] else ""))
    atomic_write_json(Path(out) / "status.json", status)
    failed = [f"{name}: {s['error']}" for name, s in status.items() if s["status"] == "failed"]
    summary = {"rendered": sum(s["status"] == "done" for s in status.values()), "no_data": [n for n, s in status.items() if s["status"] == "no data"]}
    if failed:
        summary["failed"] = failed
    return summary
