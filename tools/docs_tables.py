"""The claim tables of the docs, generated from the claim results of the measured reproductions.

A generated table sits between two markers on lines of their own, in README.md and docs/*.md:

    <!-- table:claims.summary -->
    | claim | ... |
    <!-- /table -->

Keys (``--list`` of tools/docs_numbers.py prints them):

- ``claims.summary``: one row per claim of ``ncgeom.campaigns.claims.CLAIMS``: its statement, its overall verdict at
  the full and at the quick scale with the count of its rows by verdict, and how its setup was chosen
  (:attr:`~ncgeom.campaigns.claims.Claim.explored`, "fixed before any run" when it was not chosen after
  exploration), and the shipped phase maps that bear on it (each map spec's ``claims``, ``ncgeom.phase.spec``);
- ``claims.<scale>.<id>``: every row of claim ``<id>`` at that scale
  (:func:`ncgeom.campaigns.claims.records_markdown`: rule, observed means, 95 % intervals, seeds on the claimed
  side, convergence, verdict).

The source: ``figures/<scale>/claims/<id>.json``, the claim results (:class:`~ncgeom.campaigns.claims.ClaimResult`,
read through its type) of the reproduction that ``figures/<scale>/reproduction.json`` records, copied there by
``tools/docs_numbers.py record``. A result on other than the confirmatory seeds, or incomplete, is refused: the
docs report verdicts on the confirmatory seeds of complete runs only.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

__all__ = ["TABLE", "maps_by_claim", "claims_folder", "claim_results", "tables", "rewrite_tables", "copy_claims"]

REPO = Path(__file__).resolve().parent.parent
SCALES = ("quick", "full")
#: ``<!-- table:KEY -->`` newline, the table, ``<!-- /table -->``: a generated table in a markdown file.
TABLE = re.compile(r"<!-- table:(?P<key>[A-Za-z0-9_.-]+) -->\n(?P<body>.*?)<!-- /table -->", re.S)


def claims_folder(scale: str) -> Path:
    """``figures/<scale>/claims``: the claim results of the recorded reproduction at ``scale``."""
    return REPO / "figures" / scale / "claims"


def claim_results(scale: str) -> dict:
    """{claim id: ClaimResult} of the recorded reproduction at ``scale``, every claim of CLAIMS present, complete,
    on the confirmatory seeds (ValueError naming the file otherwise)."""
    from ncgeom.campaigns.claims import CLAIMS, ClaimResult

    out = {}
    for claim_id in CLAIMS:
        path = claims_folder(scale) / f"{claim_id}.json"
        if not path.is_file():
            raise ValueError(f"{_shown(path)}: missing (python tools/docs_numbers.py record ...)")
        result = ClaimResult.read(path)
        if result.claim != claim_id or result.scale != scale:
            raise ValueError(f"{_shown(path)}: claim {result.claim} at {result.scale}, expected "
                             f"{claim_id} at {scale}")
        if result.seeds != "confirmatory" or not result.complete:
            raise ValueError(f"{_shown(path)}: the docs quote complete results on the confirmatory seeds, "
                             f"this one is on the {result.seeds} seeds"
                             + ("" if result.complete else f", incomplete ({result.error or result.failed_runs})"))
        out[claim_id] = result
    return out


def _shown(path: Path) -> str:
    """``path`` relative to the repository when inside it."""
    return str(path.relative_to(REPO)) if path.is_relative_to(REPO) else str(path)


def _overall_cell(result) -> str:
    [overall] = [r for r in result.rows if r.setting == "overall"]
    counts = overall.observed
    seeds = f"; {result.n_seeds} seeds per point" if result.n_seeds else ""  # no deciding row: no seeds decided
    return f"**{overall.verdict.value}** ({counts}{seeds})"


def maps_by_claim() -> dict[str, tuple[str, ...]]:
    """{claim id: the shipped phase maps that bear on it} from each map spec's ``claims``
    (docs/results.md, "Where DC happens")."""
    from ncgeom.phase.spec import load_map_spec, map_names

    out: dict[str, tuple[str, ...]] = {}
    for name in map_names():
        for claim_id in load_map_spec(name).claims:
            out[claim_id] = (*out.get(claim_id, ()), name)
    return out


def tables() -> dict[str, str]:
    """Every table key -> its markdown (ending with a newline)."""
    from ncgeom.campaigns.claims import CLAIMS, records_markdown

    results = {scale: claim_results(scale) for scale in SCALES}
    maps = maps_by_claim()
    lines = ["| claim | statement | full scale | quick scale | setup | phase maps |", "|---|---|---|---|---|---|"]
    for claim_id, claim in CLAIMS.items():
        cells = [claim_id, claim.statement, _overall_cell(results["full"][claim_id]),
                 _overall_cell(results["quick"][claim_id]), claim.explored or "fixed before any run",
                 ", ".join(f"`{name}`" for name in maps.get(claim_id, ())) or "-"]
        lines.append("| " + " | ".join(c.replace("|", "/") for c in cells) + " |")
    out = {"claims.summary": "\n".join(lines) + "\n"}
    for scale, by_claim in results.items():
        for claim_id, result in by_claim.items():
            out[f"claims.{scale}.{claim_id}"] = records_markdown(result.rows)
    return out


def rewrite_tables(text: str, table: dict[str, str], where: str) -> tuple[str, list[str]]:
    """``text`` with every marked table set from ``table``; one line per table that changed."""
    changes: list[str] = []

    def sub(match: re.Match) -> str:
        key, old = match.group("key"), match.group("body")
        if key not in table:
            raise ValueError(f"{where}: unknown table key {key!r} (python tools/docs_numbers.py --list)")
        if old != table[key]:
            line = text.count("\n", 0, match.start()) + 1
            changes.append(f"{where}:{line}: table {key} is not what figures/*/claims give")
        return f"<!-- table:{key} -->\n{table[key]}<!-- /table -->"

    return TABLE.sub(sub, text), changes


def copy_claims(folder: Path, scale: str) -> list[Path]:
    """Copy ``folder/claims/<id>.json`` of a reproduction to ``figures/<scale>/claims`` (each read through its type
    first); returns the files written."""
    from ncgeom.campaigns.claims import CLAIMS, ClaimResult

    target = claims_folder(scale)
    target.mkdir(parents=True, exist_ok=True)
    written = []
    for claim_id in CLAIMS:
        source = ClaimResult.path(folder, claim_id)
        ClaimResult.read(source)  # a claim file, or a one-line error
        shutil.copyfile(source, target / source.name)
        written.append(target / source.name)
    return written
