"""Entry point of the ``ncgeom`` command.

Each subcommand lives in its own module ``ncgeom.cli.<name>`` exposing
``register(subparsers) -> None`` (adds its parser and sets ``func`` via ``set_defaults``); the
handler takes the parsed ``argparse.Namespace`` and returns an exit code. Invalid input (a
:class:`ValueError` or :class:`UsageError` from the library, or a bad flag) is reported as ONE line
on stderr, ``ncgeom <command>: error: <message>``, with exit code 2 and no traceback.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from ncgeom import __version__

__all__ = ["main", "UsageError", "build_parser", "SUBCOMMAND_MODULES"]

# Order = order in --help. A module missing from an install is skipped (never breaks the CLI).
# ncgeom.cli.reference (the docs/cli.md generator) imports this module; nothing here imports it.
SUBCOMMAND_MODULES = ("nc_value", "metrics", "verify", "train", "sweep", "bench", "reproduce")


class UsageError(Exception):
    """Bad user input detected by a CLI handler (file missing a key, etc.): exit code 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit 2 (argparse prints usage + message by default)
        self.exit(2, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="ncgeom", description="Verify the geometry of hard-negative contrastive learning.")
    parser.add_argument("--version", action="version", version=f"ncgeom {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name in SUBCOMMAND_MODULES:
        try:
            module = importlib.import_module(f"ncgeom.cli.{name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"ncgeom.cli.{name}":
                continue
            raise
        module.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "func", None) is None:
        parser.print_help()
        return 2
    prog = f"ncgeom {args.command}"
    try:
        return int(args.func(args) or 0)
    except (ValueError, UsageError, FileNotFoundError, IsADirectoryError, PermissionError) as exc:
        msg = " ".join(str(exc).split()) or exc.__class__.__name__
        print(f"{prog}: error: {msg}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
