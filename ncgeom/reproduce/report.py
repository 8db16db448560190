"""Write ``report.md`` of a reproduction: stages, verification table, claim table, figures.

The report is rebuilt from the files on disk alone (``reproduce.json``, ``.stages/*.json``,
``verify/results.json``, ``claims/*.json``, ``figures/status.json``), so it can be regenerated at
any time without recomputing anything: :func:`write_report`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ncgeom.atomic_io import atomic_write_text, read_json
from ncgeom.reproduce.registry import FIGURES

__all__ = ["write_report", "render_report", "claim_rows", "claim_overview", "write_gallery"]


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


def _table(header: list[str], rows: list[list[Any]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return lines


def _load(path: Path, default: Any) -> Any:
    try:
        return read_json(path)
    except (FileNotFoundError, json.JSONDecodeError):
        return default


def claim_rows(out: Path) -> list[dict]:
    """The claim-by-claim rows of ``out/claims/*.json`` (each file: one record or a list of records).

    Every row has the keys claim, setting, expected, observed, verdict, figures.
    """
    rows = []
    claims_dir = Path(out) / "claims"
    index = _load(claims_dir / "index.json", None)
    files = [claims_dir / f"{cid}.json" for cid in index] if isinstance(index, list) else sorted(claims_dir.glob("*.json"))
    for path in files:
        if path.name == "index.json":
            continue
        data = _load(path, None)
        if data is None:
            rows.append({"claim": path.stem, "setting": "", "metric": "", "expected": "", "observed": "no result file", "verdict": "not run", "figures": ""})
            continue
        records = data if isinstance(data, list) else data.get("rows", [data]) if isinstance(data, dict) else []
        for rec in records:
            rows.append(
                {
                    "claim": rec.get("claim", rec.get("claim_id", rec.get("id", path.stem))),
                    "setting": rec.get("setting", ""),
                    "expected": rec.get("expected", ""),
                    "observed": rec.get("observed", ""),
                    "metric": rec.get("metric", ""),
                    "verdict": rec.get("verdict", "inconclusive"),
                    "figures": rec.get("figures", rec.get("figure", "")),
                }
            )
    return rows


def claim_overview(out: Path) -> list[dict]:
    """One row per claim of ``out/claims``: claim, statement, overall verdict, number of runs, figures."""
    claims_dir = Path(out) / "claims"
    index = _load(claims_dir / "index.json", None)
    ids = index if isinstance(index, list) else sorted(p.stem for p in claims_dir.glob("*.json") if p.stem != "index")
    overview = []
    for cid in ids:
        data = _load(claims_dir / f"{cid}.json", None)
        if not isinstance(data, dict):
            overview.append({"claim": cid, "statement": "", "verdict": "not run", "runs": 0, "figures": ""})
            continue
        rows = data.get("rows", [])
        final = next((r for r in rows if r.get("setting") == "overall"), rows[-1] if rows else {})
        verdict = final.get("verdict", "inconclusive")
        if data.get("failed_runs"):
            verdict += f" ({len(data['failed_runs'])} run(s) failed)"
        overview.append({"claim": cid, "statement": data.get("statement", ""), "verdict": verdict, "runs": data.get("runs", ""),
                         "figures": final.get("figures", "")})
    return overview


def render_report(out: str | Path) -> str:
    """The markdown text of the report of the reproduction in ``out``."""
    out = Path(out)
    manifest = _load(out / "reproduce.json", {})
    prov = manifest.get("provenance", {})
    lines = [
        "# ncgeom reproduction report",
        "",
        f"Scale: **{manifest.get('scale', '?')}**; git commit `{prov.get('git_commit')}`; started {prov.get('time_utc')}; "
        f"python {prov.get('python')}, torch {prov.get('versions', {}).get('torch')}.",
        "Theory: /work/shared/theory.md of the project (docs/theory_map.md maps statements to code, tests, figures).",
        "",
    ]
    if manifest.get("scale") == "tiny":
        lines += ["_Test scale (`--tiny`): runs of 2 epochs on shrunken grids; the verdicts below carry no evidence._", ""]
    lines += [
        "## Stages",
        "",
    ]
    from ncgeom.reproduce.pipeline import STAGES, stage_status

    stage_rows, total = [], 0.0
    for stage in STAGES[:-1]:
        st = stage_status(out, stage) or {"status": "not run"}
        total += float(st.get("seconds", 0.0))
        stage_rows.append([stage, st.get("status"), f"{float(st.get('seconds', 0.0)):.1f}", st.get("error", "")])
    stage_rows.append(["total", "", f"{total:.1f}", "sum of the stage times (each from the call that last ran the stage)"])
    lines += _table(["stage", "status", "seconds", "error"], stage_rows)

    lines += ["", "## Verification (proofs_check)", ""]
    checks = _load(out / "verify" / "results.json", None)
    if not checks:
        lines.append("_No verification results (stage not run or skipped)._")
    else:
        counts: dict[str, int] = {}
        for c in checks:
            counts[c.get("status")] = counts.get(c.get("status"), 0) + 1
        lines.append("Totals: " + ", ".join(f"{k}: {v}" for k, v in sorted(counts.items())) + ".")
        lines.append("")
        rows = [
            [c.get("name"), c.get("status"), c.get("method"), f"{float(c.get('seconds') or 0):.2f}", c.get("source"), _short_details(c.get("details"))]
            for c in checks
        ]
        lines += _table(["check", "status", "method", "seconds", "source", "key numbers"], rows)

    lines += ["", "## Claims (theory.md section 9)", ""]
    rows = claim_rows(out)
    if not rows:
        lines.append("_No claim results (claims stage not run)._")
    else:
        overall = claim_overview(out)
        lines.append("Summary, one row per claim (the verdict of its `overall` row; the detailed rows follow):")
        lines.append("")
        lines += _table(["claim", "statement", "verdict", "runs", "figure"], [[o["claim"], o["statement"], f"**{o['verdict']}**", o["runs"], o["figures"]] for o in overall])
        lines += ["", "Claim by claim:", ""]
        lines += _table(
            ["claim", "setting", "metric", "expected", "observed", "verdict", "figure"],
            [[r["claim"], r["setting"], r["metric"], r["expected"], r["observed"], f"**{r['verdict']}**", r["figures"]] for r in rows],
        )

    lines += ["", "## Figures", ""]
    status = _load(out / "figures" / "status.json", {})
    for number, spec in enumerate(FIGURES, start=1):
        st = status.get(spec.name, {"status": "not run", "error": ""})
        lines.append(f"### Figure {number}: {spec.title} (`{spec.name}`)")
        lines.append("")
        if (out / "figures" / f"{spec.name}.png").exists() and st.get("status") == "done":
            lines.append(f"![{spec.title}](figures/{spec.name}.png)")
            lines.append("")
        else:
            lines.append(f"_Not drawn: {st.get('status')}{': ' + st['error'] if st.get('error') else ''}._")
            lines.append("")
        bears = []
        if spec.claims:
            bears.append(("claim " if len(spec.claims) == 1 else "claims ") + ", ".join(spec.claims))
        if spec.statements:
            bears.append(", ".join(spec.statements))
        pdf = f" PDF: `figures/{spec.name}.pdf`." if (out / "figures" / f"{spec.name}.pdf").exists() else ""
        lines.append(f"{spec.caption} *Bears on:* {'; '.join(bears)}.{pdf}")
        lines.append("")
    return "\n".join(lines) + "\n"


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


def write_gallery(results: str | Path, dest: str | Path) -> Path:
    """Copy the PNG figures of a reproduction into ``dest`` with an ``index.md`` of captions.

    Used to refresh ``figures/quick/`` (the figures the README shows) from a ``--quick`` run:
    ``write_gallery("results/quick", "figures/quick")``. The copies are re-encoded with a 64-colour
    palette (a quarter of the size, visually identical for these line plots). Returns the index path.
    """
    from ncgeom.atomic_io import atomic_write_bytes

    results, dest = Path(results), Path(dest)
    manifest = _load(results / "reproduce.json", {})
    prov = manifest.get("provenance", {})
    lines = [
        f"# Figures of a `--{manifest.get('scale', '?')}` reproduction",
        "",
        f"Made by `ncgeom reproduce --{manifest.get('scale', 'quick')}` (commit `{prov.get('git_commit')}`, "
        f"{prov.get('time_utc')}); the full report with the verdict tables is the run's report.md.",
        "",
    ]
    for spec in FIGURES:
        png = results / "figures" / f"{spec.name}.png"
        if not png.exists():
            continue
        atomic_write_bytes(dest / png.name, _small_png(png.read_bytes()))
        lines += [f"## {spec.title}", "", f"![{spec.title}]({png.name})", "", spec.caption, ""]
    return atomic_write_text(dest / "index.md", "\n".join(lines))


def _small_png(data: bytes, colors: int = 64) -> bytes:
    """PNG bytes re-encoded with an adaptive palette of ``colors`` colours (no dithering)."""
    import io

    from PIL import Image

    image = Image.open(io.BytesIO(data)).convert("RGB")
    quantized = image.quantize(colors=colors, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE)
    buf = io.BytesIO()
    quantized.save(buf, format="PNG", optimize=True)
    return buf.getvalue()
