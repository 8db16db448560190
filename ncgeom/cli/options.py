"""One spelling per option across the ``ncgeom`` commands, and the former spellings kept for one release.

Every concept has one option name in every command that takes it, the name of the ``Config`` field that
``ncgeom train`` exposes where there is one (``--psi``, ``--num-negatives``, ``--classes``, ``--beta``,
``--tau``, ``--margin``, ``--dim``, ``--seed``, ``--device``, ``--threads``), and ``--scale`` for the
scale of a sweep or a reproduction. A former spelling (:data:`FORMER_SPELLINGS`) is still accepted for one
release: it does what the new one does, is left out of ``--help`` and docs/cli.md, and prints one note
line on stderr naming the new spelling (CHANGELOG.md, "Option spellings").

Use :class:`StoreWithFormerSpellings` as the ``action`` of an option that has former spellings::

    parser.add_argument("--psi", "--loss", action=StoreWithFormerSpellings, former=("--loss",), ...)

and :class:`HelpFormatter` (the formatter of every ``ncgeom`` parser, :mod:`ncgeom.cli.main`) leaves the
former spellings out of the help.
"""

from __future__ import annotations

import argparse
import copy
import sys
from typing import NamedTuple

__all__ = ["FormerSpelling", "FORMER_SPELLINGS", "StoreWithFormerSpellings", "HelpFormatter", "former_spellings"]


class FormerSpelling(NamedTuple):
    """An option renamed in ``command``: ``old`` still works for one release and means ``new``."""

    command: str
    old: str
    new: str


#: Every renamed option (the table of CHANGELOG.md, "Option spellings"; a test checks that both agree and
#: that each old spelling still parses to the new one).
FORMER_SPELLINGS: tuple[FormerSpelling, ...] = (
    FormerSpelling("nc-value", "--loss", "--psi"),
    FormerSpelling("nc-value", "--negatives", "--num-negatives"),
)


class StoreWithFormerSpellings(argparse._StoreAction):
    """``store`` action of an option whose first option string is its spelling and whose ``former`` ones are
    accepted for one release: using one prints ``<prog>: note: <old> is now spelled <new> ...`` on stderr."""

    def __init__(self, option_strings, dest, *, former: tuple[str, ...] = (), **kwargs):
        unknown = [f for f in former if f not in option_strings]
        if unknown or not former:
            raise ValueError(f"former must list some of the option strings {option_strings}, got {former!r}")
        super().__init__(option_strings, dest, **kwargs)
        self.former = tuple(former)

    def __call__(self, parser, namespace, values, option_string=None):
        if option_string in self.former:
            print(f"{parser.prog}: note: {option_string} is now spelled {self.option_strings[0]}; "
                  f"{option_string} is accepted until the next release", file=sys.stderr)
        super().__call__(parser, namespace, values, option_string)


def former_spellings(action: argparse.Action) -> tuple[str, ...]:
    """The former spellings an action accepts (none for an ordinary action)."""
    return tuple(getattr(action, "former", ()))


class HelpFormatter(argparse.HelpFormatter):
    """argparse's formatter without the former spellings of an option (usage lines show the first option
    string of an action already, which is the current spelling)."""

    def _format_action_invocation(self, action):
        hidden = former_spellings(action)
        if not hidden:
            return super()._format_action_invocation(action)
        shown = copy.copy(action)
        shown.option_strings = [s for s in action.option_strings if s not in hidden]
        return super()._format_action_invocation(shown)
