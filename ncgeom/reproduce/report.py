"""Write ``report.md`` of a reproduction: stages, verification table, claim table, hypothesis ablations, phase maps,
figures.

The report is rebuilt from the files on disk alone (``reproduce.json``, ``.stages/*.json``,
``verify/results.json``, ``claims/*.json``, ``theory/ablations.json``, ``phase/<map>/cells.json`` and
``overlays.json``, ``figures/status.json``), so it can be
regenerated at any time without recomputing anything: :func:`write_report`.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

from ncgeom.atomic_io import atomic_write_bytes, atomic_write_text, read_json
from ncgeom.campaigns.claims import CLAIMS, ClaimResult, verdict_text
from ncgeom.campaigns.rules import INTERVAL_METHOD
from ncgeom.figures.registry import FIGURES
from ncgeom.phase.records import CELLS_FILE, OVERLAYS_FILE, RUNS_FOLDER, Overlays, PhaseMap
from ncgeom.reproduce.records import FigureRecord, FigureStatuses, PhaseSummary, ReproductionManifest
from ncgeom.reproduce.stages import STAGES, StageRecord
from proofs_check.ablations import CASES, AblationResult
from proofs_check.records import CheckResult
from proofs_check.report import evidence_summary

__all__ = ["write_report", "render_report", "claim_figures", "ablation_section", "phase_section", "write_gallery"]

THEORY = "docs/theory.md"  # the theory every statement of the report refers to (in the repository)


def _cell(value: Any, width: int = 160) -> str:
    """One markdown table cell: numbers rounded, pipes escaped, newlines removed."""
    if value is None:
        return ""
    if isinstance(value, float):
        text = f"{value:.4g}"
    elif isinstance(value, (dict, list)):
        text = json.dumps(value, default=str)
    else:
        text = str(value)
    text = " ".join(text.split()).replace("|", "\\|")
    return text if len(text) <= width else text[: width - 3] + "..."


def _table(header: list[str], rows: list[list[Any]], width: int = 160) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(_cell(c, width) for c in row) + " |" for row in rows]
    return lines


def claim_figures(claim_id: str) -> str:
    """Comma-separated names of the registered figures that bear on a claim."""
    return ", ".join(spec.name for spec in FIGURES if str(claim_id) in spec.claims)


def _manifest(out: Path) -> tuple[str, dict]:
    """(scale, provenance) of the reproduction in ``out`` ("?" and {} without a manifest)."""
    manifest = ReproductionManifest.load(out)
    return ("?", {}) if manifest is None else (manifest.scale, dict(manifest.provenance))


def _figure_statuses(out: Path) -> FigureStatuses:
    """The figures' ``figures/status.json`` of ``out`` (none rendered when it is absent)."""
    return FigureStatuses.load(out / "figures") or FigureStatuses({})


def render_report(out: str | Path) -> str:
    """The markdown text of the report of the reproduction in ``out`` (from its files alone)."""
    out = Path(out)
    scale, prov = _manifest(out)
    lines = [
        "# ncgeom reproduction report",
        "",
        f"Scale: **{scale}**; git commit `{prov.get('git_commit')}`; started {prov.get('time_utc')}; "
        f"python {prov.get('python')}, torch {prov.get('versions', {}).get('torch')}.",
        f"Theory: {THEORY} (docs/theory_map.md maps its statements to code, tests and figures).",
        "",
    ]
    if scale == "tiny":
        lines += ["_Test scale (`--tiny`): runs of 2 epochs on shrunken grids; the verdicts below carry no evidence._", ""]
    lines += ["## Stages", ""]
    stage_rows, total = [], 0.0
    for stage in STAGES[:-1]:
        record = StageRecord.load(out, stage)
        if record is None:
            stage_rows.append([stage, "not run", "0.0", ""])
            continue
        total += record.seconds
        stage_rows.append([stage, record.status, f"{record.seconds:.1f}", record.error])
    stage_rows.append(["total", "", f"{total:.1f}", "sum of the stage times (each from the call that last ran the stage; "
                       "with more than one worker verify and theory run beside the claims, so the wall time is less)"])
    lines += _table(["stage", "status", "seconds", "error"], stage_rows)

    lines += ["", "## Verification (proofs_check)", ""]
    verify = out / "verify" / "results.json"
    checks = [CheckResult.from_dict(r) for r in read_json(verify)] if verify.is_file() else []
    if not checks:
        lines.append("_No verification results (stage not run or skipped)._")
    else:
        counts: dict[str, int] = {}
        for c in checks:
            counts[c.status] = counts.get(c.status, 0) + 1
        lines.append("Totals: " + ", ".join(f"{k}: {v}" for k, v in sorted(counts.items())) + ".")
        lines.append(f"Passes by kind of evidence: {evidence_summary(checks)}. (exact: exact arithmetic, symbolic or "
                     "interval proof; independent: two computations sharing no code agree; numerical: floating-point "
                     "search or optimization; self-test: the checker fed a false statement.)")
        lines.append("")
        rows = [[c.name, c.status, c.evidence, c.method, f"{c.seconds:.2f}", c.source, _short_details(c.details)] for c in checks]
        lines += _table(["check", "status", "evidence", "method", "seconds", "source", "key numbers"], rows)

    lines += ["", f"## Claims ({THEORY}, section 9)", ""]
    results = [r for r in (ClaimResult.load(out, cid) for cid in CLAIMS) if r is not None]
    if not results:
        lines.append("_No claim results (claims stage not run)._")
    else:
        lines.append("Summary, one row per claim (the verdict of its `overall` row; the detailed rows follow). "
                     "Each row decides on means over the seeds of a grid point and their intervals "
                     f"({INTERVAL_METHOD}; {THEORY}, section 9, verdict rules); seeds: the fewest per grid "
                     "point; a context row (baseline or control) decides nothing:")
        lines.append("")
        summary = []
        for r in results:
            verdict = str(r.overall or r.error or "no verdict")
            if r.failed_runs:
                verdict += f" ({len(r.failed_runs)} run(s) failed)"
            summary.append([r.claim, r.statement, f"**{verdict}**", r.runs, r.n_seeds, claim_figures(r.claim)])
        lines += _table(["claim", "statement", "verdict", "runs", "seeds", "figure"], summary)
        lines += ["", "Claim by claim:", ""]
        lines += _table(
            ["claim", "setting", "metric", "expected", "observed", "95% interval", "seeds", "verdict", "figure"],
            [[row.claim, row.setting, row.metric, row.expected, row.observed, row.interval_text(), row.n_seeds,
              f"**{verdict_text(row)}**", claim_figures(r.claim)] for r in results for row in r.rows],
        )

    status = _figure_statuses(out)
    lines += ["", *ablation_section(out, status)]
    lines += ["", *phase_section(out)]

    lines += ["", "## Figures", ""]
    for number, spec in enumerate(FIGURES, start=1):
        st = status.of(spec.name)
        lines.append(f"### Figure {number}: {spec.title} (`{spec.name}`)")
        lines.append("")
        if st is not None and st.status == "done" and (out / "figures" / f"{spec.name}.png").exists():
            lines.append(f"![{spec.title}](figures/{spec.name}.png)")
        elif st is None:
            lines.append("_Not drawn: not run._")
        else:
            lines.append(f"_Not drawn: {st.status}{': ' + st.error if st.error else ''}._")
        lines.append("")
        bears = []
        if spec.claims:
            bears.append(("claim " if len(spec.claims) == 1 else "claims ") + ", ".join(spec.claims))
        if spec.statements:
            bears.append(", ".join(spec.statements))
        pdf = f" PDF: `figures/{spec.name}.pdf`." if (out / "figures" / f"{spec.name}.pdf").exists() else ""
        caption = spec.caption if st is None or not st.caption else st.caption
        lines.append(f"{caption} *Bears on:* {'; '.join(bears)}.{pdf}")
        lines.append("")
    return "\n".join(lines) + "\n"


def _ablation_row(record: AblationResult) -> list[str]:
    if record.result == "holds":
        winner = "-"
    else:  # a "fails" record always carries its configuration (AblationResult); the winner is its name in words
        winner = record.winner or "configuration in theory/ablations.json"
    return [record.theorem, record.hypothesis, record.violation, f"**{record.result}**: {record.conclusion}", winner,
            "-" if record.gap is None else f"{record.gap:.4g}", record.evidence]


def ablation_section(out: str | Path, status: FigureStatuses | None = None) -> list[str]:
    """The lines of the report's "Hypothesis ablations" section, from ``out/theory/ablations.json`` alone.

    One table row per :class:`proofs_check.ablations.AblationResult` (theorem, hypothesis, violation, result and
    conclusion, winner, gap to 4 significant digits, evidence), one line per case that raised, the cases of
    :data:`proofs_check.ablations.CASES` not run at this scale, and links to the drawn figures
    ``fig_ablation_<case>`` (``status``: the figures stage's ``figures/status.json``).
    """
    out = Path(out)
    path = out / "theory" / "ablations.json"
    lines = ["## Hypothesis ablations", ""]
    if not path.is_file():
        return lines + ["_No ablation records (theory stage not run)._"]
    data = read_json(path)
    records = [AblationResult.from_dict(r) for r in data["ablations"]]
    lines.append(f"Each hypothesis of Theorems 1-3 ({THEORY}, section 4) violated along a family, and the "
                 "theorem's conclusion checked there (`proofs_check.ablations`, docs/verify.md, \"Ablations\"; "
                 f"{'quick' if data['quick'] else 'full'} variants). *fails* is a result: the winner is the "
                 "configuration that beats the conclusion (saved in `theory/ablations.json` with the loss values). "
                 "Gap: the loss of the best configuration found minus that of the theorem's configuration, or the "
                 "smallest slack of the bound (negative: the conclusion fails by that much).")
    lines.append("")
    if records:
        lines += _table(["theorem", "hypothesis", "violation", "conclusion", "winner", "gap", "evidence"],
                        [_ablation_row(r) for r in records], width=240)
    else:
        lines.append("_No ablation record._")
    notes = [f"- ERROR: {_cell(e, 300)}" for e in data["errors"]]
    not_run = [c for c in CASES if c not in data["cases"]]
    if not_run:
        notes.append(f"- Cases not run in this reproduction: {', '.join(not_run)} (the tiny scale skips the slow "
                     "ones: ncgeom.reproduce.theory_data.NOT_AT_TINY).")
    status = status or FigureStatuses({})
    drawn = [(number, spec) for number, spec in enumerate(FIGURES, start=1)
             if spec.name in {f"fig_ablation_{c}" for c in CASES} and _drawn(status.of(spec.name))
             and (out / "figures" / f"{spec.name}.png").exists()]
    if drawn:
        notes.append("- Figures: " + "; ".join(f"[Figure {number}: {spec.title}](figures/{spec.name}.png)"
                                               for number, spec in drawn) + ".")
    return lines + ([""] + notes if notes else [])


def phase_section(out: str | Path) -> list[str]:
    """The lines of the report's "Phase maps" section, from ``out/phase/<map>/`` alone (cells.json, overlays.json, the
    figures): per map its status, runs trained against a uniform grid's, the text table, the theory lines and their
    evidence, the cells with a full spectrum that did not reach NC (the paper's open problem), and the figures."""
    out = Path(out)
    folders = sorted(p for p in (out / "phase").glob("*") if (p / CELLS_FILE).is_file()) if (out / "phase").is_dir() else []
    lines = ["## Phase maps", ""]
    stage = StageRecord.load(out, "phase")
    summary = stage.summary if stage is not None and isinstance(stage.summary, PhaseSummary) else None
    if summary is not None and summary.maps:
        lines += [f"- `{name}`: {text}" for name, text in summary.maps.items()] + [""]
    if not folders:
        return lines + ["_No phase map (phase stage not run, or no shipped record)._"]
    lines.append(f"Where training ends in NC, in DC or neither over two axes of the config ({THEORY}, section 9, "
                 "\"Phase maps\": a run that has not converged is \"not converged\" when the map decides end states; a "
                 "cell is labelled by the class all its seeds share, \"mixed\" otherwise; lower-case cells of the table "
                 "were inferred by the refinement, not trained).")
    for folder in folders:
        record = PhaseMap.load(folder)
        lines += ["", f"### {record.name}", "", " ".join(record.description.split()), ""]
        if (folder / RUNS_FOLDER).is_dir():
            lines.append(f"Trained by this reproduction: `ncgeom phase {record.name} --scale {record.scale} --seeds "
                         f"{record.seeds}` (seeds {', '.join(map(str, record.seed_values))}).")
        else:
            lines.append(f"Not trained by this reproduction: the record shipped with ncgeom (`ncgeom/phase/shipped/"
                         f"{record.name}/`), computed by `ncgeom phase {record.name} --scale {record.scale} --seeds "
                         f"{record.seeds}` (seeds {', '.join(map(str, record.seed_values))}); `ncgeom phase "
                         f"{record.name} --out DIR` recomputes it.")
        lines.append(f"Status: **{record.status}**; {record.runs_trained} runs trained of the {record.runs_uniform} a "
                     f"uniform grid needs; {record.steps} optimizer steps.")
        lines += ["", "```", record.table_text().rstrip(), "```", ""]
        open_cells = [c for c in record.cells if c.label == "neither" and c.source == "trained"]
        if open_cells:
            where = "; ".join(f"{record.panels[c.panel].title or 'map'}: {record.panels[c.panel].x.name}="
                              f"{record.panels[c.panel].x.labels[c.ix]}, {record.panels[c.panel].y.name}="
                              f"{record.panels[c.panel].y.labels[c.iy]}" for c in open_cells)
            lines.append(f"Full spectrum without NC (no DC, NC not reached; the open problem): {len(open_cells)} trained "
                         f"cell(s): {_cell(where, 600)}.")
        else:
            lines.append("Full spectrum without NC (the open problem): no trained cell of this map.")
        if (folder / OVERLAYS_FILE).is_file():
            overlays = Overlays.load(folder)
            for line in overlays.lines:
                lines.append(f"- theory line ({record.panels[line.panel].title or 'map'}): {line.label}; source: "
                             f"{line.source}")
            lines += [f"- {note}" for note in overlays.notes]
        for image in ("phase_map", "phase_spectra"):
            if (folder / f"{image}.png").is_file():
                lines += ["", f"![{record.name} {image}](phase/{folder.name}/{image}.png)"]
    return lines


def _drawn(record: FigureRecord | None) -> bool:
    return record is not None and record.status == "done"


def _short_details(details: Any, limit: int = 4) -> str:
    if not isinstance(details, dict):
        return ""
    parts = []
    for key, value in details.items():
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            parts.append(f"{key}={value:.6g}" if isinstance(value, float) else f"{key}={value}")
        if len(parts) >= limit:
            break
    return ", ".join(parts)


def write_report(out: str | Path) -> Path:
    """Write ``out/report.md`` atomically and return its path."""
    out = Path(out)
    return atomic_write_text(out / "report.md", render_report(out))


def write_gallery(results: str | Path, dest: str | Path, *, commit: str | None = None) -> Path:
    """Copy the PNG figures of a reproduction into ``dest`` with an ``index.md`` of captions.

    ``commit``: the code's commit when the run's provenance names none (a non-editable install has no git checkout).

    Used to refresh ``figures/quick/`` (the figures the README shows) from a ``--quick`` run:
    ``write_gallery("results/quick", "figures/quick")``. The copies are re-encoded with a 64-colour
    palette (a quarter of the size, visually identical for these line plots). Returns the index path.
    """
    results, dest = Path(results), Path(dest)
    scale, prov = _manifest(results)
    lines = [
        f"# Figures of a `--{scale}` reproduction",
        "",
        f"Made by `ncgeom reproduce --{scale}` (commit `{prov.get('git_commit') or commit}`, "
        f"{prov.get('time_utc')}); the full report with the verdict tables is the run's report.md.",
        "",
    ]
    status = _figure_statuses(results)
    for spec in FIGURES:
        png = results / "figures" / f"{spec.name}.png"
        if not png.exists():
            continue
        atomic_write_bytes(dest / png.name, _small_png(png.read_bytes()))
        record = status.of(spec.name)  # status.json: figures.render writes it
        caption = spec.caption if record is None or not record.caption else record.caption
        lines += [f"## {spec.title}", "", f"![{spec.title}]({png.name})", "", caption, ""]
    return atomic_write_text(dest / "index.md", "\n".join(lines))


def _small_png(data: bytes, colors: int = 64) -> bytes:
    """PNG bytes re-encoded with an adaptive palette of ``colors`` colours (no dithering)."""
    from PIL import Image  # Pillow comes with matplotlib (heavy optional)

    image = Image.open(io.BytesIO(data)).convert("RGB")
    quantized = image.quantize(colors=colors, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE)
    buf = io.BytesIO()
    quantized.save(buf, format="PNG", optimize=True)
    return buf.getvalue()
