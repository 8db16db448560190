"""Entry point of the ``ncgeom`` command.

Each subcommand lives in its own module ``ncgeom.cli.<name>`` exposing
``register(subparsers) -> None`` (adds its parser and sets ``func`` via ``set_defaults``); the
handler takes the parsed ``argparse.Namespace`` and returns an exit code.

No input produces a traceback. Whatever a handler raises is reported as ONE line on stderr,
``ncgeom <command>: error: <message>``, with the exit code:

- 2, bad input: a :class:`ValueError` or :class:`UsageError` (the library names the argument), a bad
  flag (argparse), a filesystem error (``<path>: <strerror>``: missing file, read-only folder, disk
  full, a file where a folder belongs), a refused size (:mod:`ncgeom.budget`) or a failed allocation
  (``not enough memory ...``);
- 1, internal error: any other exception, ``internal error: <type>: <message> (rerun with --debug for
  the traceback)``; commands also return 1 for their own failures (a run diverged, a check failed);
- 130, interrupted (Ctrl-C); 143, terminated (SIGTERM, where a command handles it: sweep, reproduce).

A reader that closes the pipe early (``ncgeom verify | head``) ends the command quietly: what it still had
to print is dropped, stdout is pointed at the null device so that the interpreter's flush at exit is
silent too, and the exit code is 141 (128 + SIGPIPE, what a shell reports for a command killed by a closed
pipe, so that ``set -o pipefail`` still sees that the output was cut); nothing is printed on stderr.

Warnings of the libraries below are held back while a command runs: after a command that succeeded (exit 0)
each distinct one is printed as ONE line, ``ncgeom <command>: warning: <Category>: <message>``; after any other
outcome none is printed, so an error is its one line alone. ``--debug`` (before or after the subcommand) shows the
traceback instead, and the warnings as Python prints them. ``--max-memory SIZE`` on the
commands that allocate (:data:`BUDGETED`) sets the memory budget of :mod:`ncgeom.budget` for the command
and its worker processes.
"""

from __future__ import annotations

import argparse
import errno
import importlib
import os
import sys
import warnings

from ncgeom import __version__, budget
from ncgeom.cli.options import FORMER_SPELLINGS, HelpFormatter

__all__ = ["main", "UsageError", "build_parser", "SUBCOMMAND_MODULES", "BUDGETED", "error_line", "EXIT_BROKEN_PIPE",
           "warning_line"]

# Order = order in --help. A module missing from an install is skipped (never breaks the CLI).
# ncgeom.cli.reference (the docs/cli.md generator) imports this module; nothing here imports it.
SUBCOMMAND_MODULES = ("nc_value", "metrics", "verify", "train", "sweep", "phase", "compare", "plot", "summarize",
                      "bench", "reproduce")
#: Subcommands that allocate arrays sized by their input: they take --max-memory.
BUDGETED = ("nc-value", "metrics", "train", "sweep", "phase", "bench", "reproduce")

#: Exit code when the reader of stdout went away (128 + SIGPIPE, the shell's code for a closed pipe).
EXIT_BROKEN_PIPE = 141

_DEBUG_HELP = "show the traceback of an error instead of one line"
_MEMORY_HELP = (f"memory budget for the arrays, e.g. 512M, 8G [${budget.ENV_VAR} or min(4G, half the physical "
                "memory)]; sizes that need more are refused (docs/reliability.md)")


class UsageError(Exception):
    """Bad user input detected by a CLI handler (file missing a key, etc.): exit code 2."""


class _Parser(argparse.ArgumentParser):
    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", HelpFormatter)  # leaves the former spellings out (ncgeom.cli.options)
        super().__init__(*args, **kwargs)

    def error(self, message):  # one line, exit 2 (argparse prints usage + message by default)
        for former in FORMER_SPELLINGS:  # argparse names an option by all its spellings: name the current one
            message = message.replace(f"{former.new}/{former.old}", former.new)
        self.exit(2, f"{self.prog}: error: {' '.join(message.split())}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="ncgeom", description="Verify the geometry of hard-negative contrastive learning.")
    parser.add_argument("--version", action="version", version=f"ncgeom {__version__}")
    parser.add_argument("--debug", action="store_true", help=_DEBUG_HELP)
    parser.add_argument("--max-memory", metavar="SIZE", default=None, help=_MEMORY_HELP)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name in SUBCOMMAND_MODULES:
        try:
            module = importlib.import_module(f"ncgeom.cli.{name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"ncgeom.cli.{name}":
                continue
            raise
        module.register(sub)
    for command, subparser in sub.choices.items():
        # SUPPRESS: given after the subcommand they set the namespace, otherwise the global value stays
        subparser.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=_DEBUG_HELP)
        if command in BUDGETED:
            subparser.add_argument("--max-memory", metavar="SIZE", default=argparse.SUPPRESS, help=_MEMORY_HELP)
    return parser


def error_line(exc: BaseException) -> tuple[str, int]:
    """(one-line message, exit code) for an exception raised by a handler (module docstring)."""
    if isinstance(exc, (ValueError, UsageError)):
        return _squash(str(exc)) or type(exc).__name__, 2
    if isinstance(exc, OSError):
        return _os_error(exc), 2
    if isinstance(exc, MemoryError) or (isinstance(exc, RuntimeError) and _is_allocation_failure(exc)):
        detail = _squash(str(exc))[:200]
        return (f"not enough memory: an allocation failed{f' ({detail})' if detail else ''}; lower the sizes, "
                f"or set the memory budget (now {budget.format_bytes(budget.memory_budget())}) to what this "
                f"machine has with --max-memory SIZE so that they are refused up front"), 2
    return f"internal error: {type(exc).__name__}: {_squash(str(exc))} (rerun with --debug for the traceback)", 1


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra:  # argparse reports these under the top-level prog; name the subcommand instead
        command = f" {args.command}" if getattr(args, "command", None) else ""
        parser.exit(2, f"ncgeom{command}: error: unrecognized arguments: {' '.join(extra)}\n")
    if getattr(args, "func", None) is None:
        parser.print_help()
        return 2
    prog = f"ncgeom {args.command}"
    if args.debug:
        return _run(args, prog)
    # warnings of the libraries below (torch, numpy, Pillow) are held back: one line each after a command that
    # succeeded, none around the one-line error of one that did not (docs/reliability.md)
    with warnings.catch_warnings(record=True) as caught:
        code = _run(args, prog)
    if code == 0:
        for line in dict.fromkeys(warning_line(prog, w.message, w.category) for w in caught):
            print(line, file=sys.stderr)
    return code


def warning_line(prog: str, message: Warning | str, category: type[Warning]) -> str:
    """A warning as one line: ``ncgeom <command>: warning: <Category>: <first line of the message>``."""
    text = _squash(str(message).strip().splitlines()[0] if str(message).strip() else "")[:300]
    return f"{prog}: warning: {category.__name__}: {text}"


def _run(args: argparse.Namespace, prog: str) -> int:
    """The handler's exit code; whatever it raises as one line (module docstring)."""
    try:
        with budget.override(args.max_memory):
            code = int(args.func(args) or 0)
        sys.stdout.flush()  # here, so that a closed pipe is reported below and not by the interpreter at exit
        return code
    except BrokenPipeError:
        if args.debug:
            raise
        return _reader_gone()
    except KeyboardInterrupt:
        if args.debug:
            raise
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:
        if args.debug:
            raise
        message, code = error_line(exc)
        print(f"{prog}: error: {message}", file=sys.stderr)
        return code


def _reader_gone() -> int:
    """stdout's reader closed the pipe (``ncgeom ... | head``): nothing more to print, quietly (module docstring)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # the interpreter flushes stdout at exit: into the null device
        os.close(devnull)
    except (OSError, ValueError):  # stdout without a file descriptor (replaced by a test): nothing to redirect
        pass
    return EXIT_BROKEN_PIPE


def _squash(text: str) -> str:
    return " ".join(text.split())


def _os_error(exc: OSError) -> str:
    reason = exc.strerror or _squash(str(exc)) or type(exc).__name__
    if exc.errno == errno.ENOSPC:
        reason += " (the disk is full)"
    if exc.filename is None:
        return _squash(reason if exc.strerror else str(exc) or reason)
    where = str(exc.filename) + ("" if exc.filename2 is None else f" -> {exc.filename2}")
    return _squash(f"{where}: {reason}")


def _is_allocation_failure(exc: RuntimeError) -> bool:
    text = str(exc).lower()
    return "can't allocate memory" in text or "out of memory" in text or "not enough memory" in text


if __name__ == "__main__":  # pragma: no cover
    # `python -m ncgeom.cli.main`: run the imported module's main, so that its UsageError is the one the
    # subcommand modules raise (this file as __main__ is a second copy of the module)
    from ncgeom.cli.main import main as _main

    sys.exit(_main())
