"""The shipped records of the phase maps: what ``ncgeom phase NAME`` computed on the confirmatory seeds, as package data.

The shipped maps cost about an hour each on a 2-core machine (BENCHMARKS.md, "Phase maps"), far beyond the quick (4
minutes) and full (30 minutes) reproductions. As the HUCL optimum does (``proofs_check/hucl/optimum/stored.json``),
their records ship inside the package, ``ncgeom/phase/shipped/<map>/``:

- ``cells.json`` (:class:`~ncgeom.phase.records.PhaseMap`: the spec, scale, seed set and seeds, runs trained and
  optimizer steps: its provenance) and ``overlays.json`` (:class:`~ncgeom.phase.records.Overlays`), read through their
  types;
- ``phase_spectra.png``, the spectra over epochs, which need the runs' histories (not shipped) to be redrawn.

The reproduction's phase stage at the quick and full scales reads them (:func:`write_shipped`: the records, the CSV,
the text table and the heat map redrawn from the records into its own folder); the tiny scale trains its 2 x 2 smoke
map. ``ncgeom phase NAME --out DIR`` recomputes a map; :func:`ship` copies a finished confirmatory map into the
package folder.
"""

from __future__ import annotations

import importlib.resources
import shutil
from pathlib import Path

from ncgeom.atomic_io import atomic_write_text
from ncgeom.phase.records import CELLS_CSV, CELLS_FILE, TABLE_FILE, Overlays, PhaseMap

__all__ = ["SHIPPED_FOLDER", "SPECTRA_FILE", "shipped_folder", "load_shipped", "write_shipped", "ship"]

#: The package folder of the shipped records (``ncgeom/phase/shipped/<map>/``).
SHIPPED_FOLDER = "shipped"
#: The spectra figure that ships beside a record (drawn by ``ncgeom phase`` from the runs' histories).
SPECTRA_FILE = "phase_spectra.png"


def shipped_folder(name: str) -> Path:
    """The folder of the shipped record of the map ``name`` in the installed package (it may not exist)."""
    return Path(str(importlib.resources.files("ncgeom.phase") / SHIPPED_FOLDER / name))


def load_shipped(name: str) -> tuple[PhaseMap, Overlays] | None:
    """The shipped record of the map ``name`` and its theory lines, read through their types; None when the package
    holds no record of it (a map not yet computed on its confirmatory seeds). A record that does not read raises
    ValueError naming the file."""
    folder = shipped_folder(name)
    if not (folder / CELLS_FILE).is_file():
        return None
    record = PhaseMap.load(folder)
    if record.name != name:
        raise ValueError(f"{folder / CELLS_FILE}: the record of map {record.name!r}, not of {name!r}")
    return record, Overlays.load(folder)


def write_shipped(name: str, out_dir: str | Path, *, formats: tuple[str, ...] = ("png",),
                  figures: bool = True) -> PhaseMap | None:
    """Write the shipped record of ``name`` into ``out_dir`` as ``ncgeom phase`` would have (cells.json, cells.csv,
    table.txt, overlays.json; with ``figures``, the heat map redrawn from the records and the shipped spectra copied);
    the record, or None when none ships (nothing written)."""
    shipped = load_shipped(name)
    if shipped is None:
        return None
    record, overlays = shipped
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    record.save(out)
    overlays.save(out)
    atomic_write_text(out / CELLS_CSV, record.to_csv())
    atomic_write_text(out / TABLE_FILE, record.table_text())
    if figures:
        from ncgeom.phase.figure import plot_map  # matplotlib: only when drawing

        plot_map(record, overlays, out, formats=formats)
        spectra = shipped_folder(name) / SPECTRA_FILE
        if spectra.is_file():
            shutil.copyfile(spectra, out / SPECTRA_FILE)
    return record


def ship(map_dir: str | Path, dest: str | Path) -> PhaseMap:
    """Copy the finished map in ``map_dir`` (``ncgeom phase NAME --out DIR``) into ``dest`` (in the source tree:
    ``ncgeom/phase/shipped/<map>``): its records, read and written back through their types, and its spectra figure.
    Refuses (ValueError) a map that is incomplete or not on its confirmatory seeds: only those are shipped."""
    src = Path(map_dir)
    record, overlays = PhaseMap.load(src), Overlays.load(src)
    if record.status != "complete" or record.seeds != "confirmatory":
        raise ValueError(f"{src}: only a complete map on its confirmatory seeds ships, got status {record.status!r} on "
                         f"the {record.seeds} seeds")
    out = Path(dest)
    out.mkdir(parents=True, exist_ok=True)
    record.save(out)
    overlays.save(out)
    if (src / SPECTRA_FILE).is_file():
        shutil.copyfile(src / SPECTRA_FILE, out / SPECTRA_FILE)
    return record
