"""MkDocs hooks of the documentation site (mkdocs.yml, ``hooks:``): the site shows the repository's markdown as it is.

The pages live where they live in the repository (docs/*.md, README.md, BENCHMARKS.md, CHANGELOG.md and the figure
galleries figures/<scale>/index.md with their PNGs), and link to each other with the relative links that work on
GitHub (``../BENCHMARKS.md``, ``../figures/full/fig_init.png`` from a page of docs/). MkDocs only sees docs_dir
(docs/), so :func:`on_files` adds the files from outside it and :func:`on_page_markdown` rewrites each relative
link from its repository path to its path on the site, where docs/ is the root (``docs/verify.md`` ->
``verify.md``, ``README.md`` -> ``project/README.md``). A link to a file the site does not have is left alone, so
that ``mkdocs build --strict`` reports it.
"""

from __future__ import annotations

import posixpath
import re
from pathlib import Path

from mkdocs.structure.files import File, Files

__all__ = ["on_files", "on_page_markdown", "site_uri", "repo_path"]

#: Files outside docs/ that the site shows: repository path -> path on the site.
EXTRA = {"README.md": "project/README.md", "BENCHMARKS.md": "BENCHMARKS.md", "CHANGELOG.md": "CHANGELOG.md"}
#: Folders outside docs/ whose markdown and images the site shows under the same path.
EXTRA_DIRS = ("figures",)
_LINK = re.compile(r"(\]\()([^)\s]+)(\))")
_FENCE = re.compile(r"^(```|~~~)")
_site_to_repo: dict[str, str] = {}


def _root(config) -> Path:
    return Path(config["config_file_path"]).resolve().parent


def site_uri(repo: str) -> str:
    """Where a repository file is on the site (docs/ is the site's root)."""
    if repo.startswith("docs/"):
        return repo[len("docs/"):]
    return EXTRA.get(repo, repo)


def repo_path(site: str) -> str:
    """Where a page of the site is in the repository."""
    return _site_to_repo.get(site, "docs/" + site)


def on_files(files: Files, config) -> Files:
    root = _root(config)
    extra = [(name, root / name) for name in EXTRA]
    for folder in EXTRA_DIRS:
        extra += [(p.relative_to(root).as_posix(), p) for p in sorted((root / folder).rglob("*"))
                  if p.is_file() and p.suffix in (".md", ".png")]
    for repo, path in extra:
        if not path.is_file():
            continue
        uri = site_uri(repo)
        _site_to_repo[uri] = repo
        files.append(File.generated(config, uri, abs_src_path=str(path)))
    return files


def _rewrite(link: str, page_repo: str, page_site: str, known: set[str]) -> str:
    if re.match(r"^[a-z][a-z0-9+.-]*:", link) or link.startswith(("#", "/")):
        return link
    target, hash_, fragment = link.partition("#")
    repo_target = posixpath.normpath(posixpath.join(posixpath.dirname(page_repo), target))
    site_target = site_uri(repo_target)
    if site_target not in known:
        return link  # not on the site: left for mkdocs to report
    new = posixpath.relpath(site_target, posixpath.dirname(page_site) or ".")
    return new + hash_ + fragment


def on_page_markdown(markdown: str, page, config, files: Files) -> str:
    known = {f.src_uri for f in files}
    page_site = page.file.src_uri
    page_repo = repo_path(page_site)
    out, fenced = [], False
    for line in markdown.split("\n"):
        if _FENCE.match(line.lstrip()):
            fenced = not fenced
        if not fenced:
            line = _LINK.sub(lambda m: m.group(1) + _rewrite(m.group(2), page_repo, page_site, known) + m.group(3), line)
        out.append(line)
    return "\n".join(out)
