"""The documentation site (mkdocs.yml; issue 26, item 9). CI builds it with ``mkdocs build --strict`` (.ci/run);
these tests check what can be checked without building: every page is in the nav, the hooks map repository
links to site links, and the docstrings' reST maths becomes MathJax input."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
yaml = pytest.importorskip("yaml")


def _nav_entries(node) -> list[str]:
    if isinstance(node, str):
        return [node]
    if isinstance(node, list):
        return [entry for item in node for entry in _nav_entries(item)]
    if isinstance(node, dict):
        return [entry for value in node.values() for entry in _nav_entries(value)]
    return []


@pytest.fixture(scope="module")
def config():
    # the file has no python tags (the gallery plugin adds its own at build time)
    return yaml.safe_load((REPO / "mkdocs.yml").read_text())


def test_every_docs_page_and_api_package_is_in_the_nav(config):
    nav = set(_nav_entries(config["nav"]))
    pages = {p.relative_to(REPO / "docs").as_posix() for p in (REPO / "docs").rglob("*.md")
             if "generated" not in p.parts and "examples" not in p.parts}
    assert pages - nav == set(), f"docs pages missing from the nav of mkdocs.yml: {sorted(pages - nav)}"
    assert {"project/README.md", "BENCHMARKS.md", "CHANGELOG.md", "generated/gallery"} <= nav
    for entry in nav - {"generated/gallery", "project/README.md", "BENCHMARKS.md", "CHANGELOG.md"}:
        repo = REPO / "docs" / entry if not entry.startswith("figures/") else REPO / entry
        assert repo.is_file(), f"nav entry {entry} names no file"


def test_strict_mode_checks_links_and_anchors_and_the_gallery_aborts_on_error(config):
    assert config["strict"] is True
    assert {config["validation"][k] for k in ("not_found", "anchors", "unrecognized_links")} == {"warn"}
    gallery = next(p["gallery"] for p in config["plugins"] if isinstance(p, dict) and "gallery" in p)
    assert gallery["only_warn_on_example_error"] is False and gallery["abort_on_example_error"] is True
    assert gallery["filename_pattern"] == ".*"  # every example is executed, not only plot_*
    examples = sorted(p.stem for p in (REPO / "docs" / "examples").glob("*.py"))
    assert examples == ["plot_check_your_loss", "plot_read_a_phase_map", "plot_reproduce_one_claim",
                        "plot_train_and_diagnose"]
    assert "/site/" in (REPO / ".gitignore").read_text().splitlines()  # the built site is not committed


def test_hooks_map_repository_links_to_site_links():
    pytest.importorskip("mkdocs")
    sys.path.insert(0, str(REPO / "tools"))
    try:
        import mkdocs_hooks as hooks
    finally:
        sys.path.remove(str(REPO / "tools"))
    known = {"index.md", "verify.md", "BENCHMARKS.md", "project/README.md", "figures/full/index.md",
             "figures/full/fig_init.png", "results.md"}
    # a page of docs/ (site root) linking out of docs/, and the README (project/) linking into docs/
    assert hooks._rewrite("../BENCHMARKS.md", "docs/index.md", "index.md", known) == "BENCHMARKS.md"
    assert hooks._rewrite("../figures/full/fig_init.png", "docs/results.md", "results.md", known) == \
        "figures/full/fig_init.png"
    assert hooks._rewrite("docs/verify.md#ablations", "README.md", "project/README.md", known) == "../verify.md#ablations"
    assert hooks._rewrite("../../docs/results.md", "figures/full/index.md", "figures/full/index.md", known) == \
        "../../results.md"
    # external links, anchors and files the site does not have are left for mkdocs to judge
    for link in ("https://example.org/x.md", "#references", "nowhere.md"):
        assert hooks._rewrite(link, "docs/index.md", "index.md", known) == link


def test_rst_maths_and_roles_become_markdown():
    pytest.importorskip("griffe")
    sys.path.insert(0, str(REPO / "tools"))
    try:
        from griffe_math import rst_to_markdown
    finally:
        sys.path.remove(str(REPO / "tools"))
    text = rst_to_markdown("Sum.\n\n.. math:: L \\ge 0\n\nSee :func:`~ncgeom.theory.nc_value`, :math:`C \\ge 2`.\n\n"
                           ".. math::\n\n    a = b\n        + c\n\nwhere M = [mu_c] [C, d].")
    assert "$$\nL \\ge 0\n$$" in text and "$$\na = b\n+ c\n$$" in text
    assert "See `nc_value`, $C \\ge 2$." in text and ".. math" not in text
    assert "[mu_c] \\[C, d]" in text
