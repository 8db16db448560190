"""docs/theory.md is the project's contract: it exists, its sections are the ones cited, its vocabulary
is the code's, and nothing in the repository points outside it."""

import re
import subprocess
from pathlib import Path

import numpy as np

from ncgeom import vocabulary
from ncgeom.geometry import simplex_etf
from ncgeom.metrics import nc_metrics

ROOT = Path(__file__).resolve().parent.parent
THEORY = ROOT / "docs" / "theory.md"
SECTIONS = {
    1: "Notation",
    2: "The loss family psi",
    3: "Hardening and the four settings",
    4: "Theorems",
    5: "Closed forms at neural collapse",
    6: "Convex programs and certificates",
    7: "Batch estimators",
    8: "Metrics",
    9: "Claims",
}


def _tracked_text_files():
    out = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, capture_output=True, text=True)
    if out.returncode != 0:  # not a git checkout (e.g. an sdist): walk the tree instead
        paths = [p.relative_to(ROOT).as_posix() for p in ROOT.rglob("*") if p.is_file() and ".venv" not in p.parts]
    else:
        paths = out.stdout.split()
    for rel in paths:
        path = ROOT / rel
        if path.suffix in {".py", ".md", ".toml", ".txt", ".cfg"} or rel in {".ci/run"}:
            if path.is_file():
                yield rel, path.read_text(encoding="utf-8", errors="replace")


def _section_text(number: int) -> str:
    text = THEORY.read_text()
    start = text.index(f"## {number}. {SECTIONS[number]}")
    end = text.find(f"\n## {number + 1}. ", start) if number < 9 else -1
    return text[start:] if end < 0 else text[start:end]


def _slug(heading: str) -> str:
    """GitHub's anchor of a markdown heading (lower case, punctuation dropped, spaces to hyphens)."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_the_nine_sections_exist_in_order():
    text = THEORY.read_text()
    positions = [text.index(f"\n## {n}. {title}\n") for n, title in SECTIONS.items()]
    assert positions == sorted(positions)


def test_every_section_citation_names_an_existing_section():
    bad = []
    pattern = re.compile(r"theory\.md`?,? §?sections? (\d+)(?:\s*(?:-|–|and|,)\s*(\d+))?")
    count = 0
    for rel, text in _tracked_text_files():
        for m in pattern.finditer(text):
            count += 1
            for g in m.groups():
                if g is not None and int(g) not in SECTIONS:
                    bad.append(f"{rel}: {m.group(0)}")
    assert count > 100  # the pattern really finds the citations
    assert not bad, bad


def test_every_theory_anchor_link_exists():
    headings = re.findall(r"^#{2,4} (.+)$", THEORY.read_text(), flags=re.M)
    anchors = {_slug(h) for h in headings}
    links = []
    for rel, text in _tracked_text_files():
        links += [(rel, a) for a in re.findall(r"theory\.md#([\w-]+)", text)]
    missing = [f"{rel}: #{a}" for rel, a in links if a not in anchors]
    assert not missing, missing


def test_nothing_points_outside_the_repository():
    bad = []
    pattern = re.compile(r"/work/|\.\./shared|shared/theory|shared/peers|shared/seeds|/root/")
    for rel, text in _tracked_text_files():
        if rel == "tests/test_theory_doc.py":
            continue
        bad += [f"{rel}: {m.group(0)}" for m in pattern.finditer(text)]
    assert not bad, bad


def test_bare_citations_point_into_docs():
    # "theory.md" alone (not docs/theory.md, not a relative link from docs/) would name no file a user has
    bad = []
    for rel, text in _tracked_text_files():
        if rel.startswith("docs/") or rel == "tests/test_theory_doc.py":
            continue
        bad += [f"{rel}: ...{text[max(0, m.start() - 20):m.end()]}" for m in re.finditer(r"(?<![/\w.])theory\.md", text)]
    assert not bad, bad


def test_metric_json_names_are_the_code_keys():
    # the section-8 names and the keys that nc_metrics writes must be the same set
    documented = set(re.findall(r"`([a-z_0-9]+)`", _section_text(8)))
    z = simplex_etf(4, 5, rng=np.random.default_rng(0))
    keys = set(nc_metrics(z, np.arange(4)).to_dict())
    missing = sorted(keys - documented)
    assert not missing, f"metric keys not documented in docs/theory.md section 8: {missing}"


def test_settings_and_psi_names_are_the_vocabulary():
    s2, s3 = _section_text(2), _section_text(3)
    for name in vocabulary.PSI_NAMES:
        assert f"`{name}`" in s2, name
    for setting in vocabulary.SETTINGS:
        assert setting.upper() in s3, setting


def test_docs_hold_no_control_characters():
    """A LaTeX backslash eaten by a Python string ("\\beta" -> backspace + "eta", "\\frac" -> form feed) leaves
    a control character in the Markdown; none is allowed (tabs included)."""
    bad = re.compile(r"[\x00-\x09\x0b-\x1f\x7f]")
    files = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    found = [f"{p.relative_to(ROOT)}:{n}" for p in files
             for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if bad.search(line)]
    assert not found, found
