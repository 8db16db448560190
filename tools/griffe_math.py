"""A griffe extension for the API reference of the documentation site (mkdocs.yml, mkdocstrings' python handler).

ncgeom's docstrings are NumPy style with reStructuredText maths, as the house style asks (``.. math::`` blocks
and ``:math:`...``` roles) and Sphinx cross-reference roles (``:func:`name```). mkdocstrings renders Markdown,
so this extension rewrites each docstring before it is parsed: a ``.. math::`` block becomes a ``$$ ... $$``
block and ``:math:`x``` becomes ``$x$`` (pymdownx.arithmatex hands both to MathJax), a shape written after a bracket
(``[mu_c] [C, d]``) keeps its bracket (Markdown would read a reference link), and a role
``:func:`a.b.c``` becomes the code span ``a.b.c`` (``~a.b.c``: ``c``). The sources keep their docstrings.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

__all__ = ["RstMath", "rst_to_markdown"]

_ROLE = re.compile(r":(?:py:)?(?:func|meth|class|mod|data|attr|obj|exc|const|ref|doc|term|envvar):`~?([^`]+)`")
_MATH_ROLE = re.compile(r":math:`([^`]+)`")
_DIRECTIVE = re.compile(r"^(?P<indent>\s*)\.\. math::\s*(?P<inline>.*)$")


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def rst_to_markdown(text: str) -> str:
    """``text`` with its reST maths as arithmatex blocks and inline maths, its roles as code spans."""
    lines, out, i = text.split("\n"), [], 0
    while i < len(lines):
        match = _DIRECTIVE.match(lines[i])
        if match is None:
            out.append(lines[i])
            i += 1
            continue
        indent = match.group("indent")
        body = [match.group("inline")] if match.group("inline") else []
        i += 1
        while i < len(lines) and (not lines[i].strip() or _indent(lines[i]) > len(indent)):
            body.append(lines[i].strip())
            i += 1
        while body and not body[-1]:
            body.pop()
        formula = [b for b in body if b]
        out += ["", indent + "$$", *(indent + b for b in formula), indent + "$$", ""]
    text = "\n".join(out)
    text = _MATH_ROLE.sub(lambda m: f"${m.group(1)}$", text)
    text = text.replace("] [", "] \\[")  # shapes after a bracket ("[x] [N, d]") are not a Markdown reference link
    return _ROLE.sub(lambda m: f"`{m.group(1).split('.')[-1] if m.group(0).count('~') else m.group(1)}`", text)


class RstMath(griffe.Extension):
    """Rewrite every docstring with :func:`rst_to_markdown` as griffe loads it."""

    def on_instance(self, *, node: Any, obj: griffe.Object, agent: Any, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = rst_to_markdown(obj.docstring.value)
