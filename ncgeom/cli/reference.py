"""Generate docs/cli.md, the command-line reference, from the argparse parsers themselves.

``python -m ncgeom.cli.reference > docs/cli.md`` rewrites the reference; a test checks that
every subcommand and option of the installed parsers appears in it, so the page cannot drift from
the code unnoticed. Each section is the parser's own ``--help`` text plus a few worked examples.
"""

from __future__ import annotations

import argparse
import os

from ncgeom.cli.main import EXIT_BROKEN_PIPE, build_parser
from ncgeom.cli.measured import FULL_CPU_HOURS, FULL_WALL, MACHINE_CORES, QUICK_MINUTES

__all__ = ["cli_reference", "EXAMPLES"]

EXAMPLES: dict[str, list[tuple[str, str]]] = {
    "nc-value": [
        ("ncgeom nc-value --setting ucl --psi infonce --classes 4 --num-negatives 2 --tau 0.5",
         "UCL minimum at C = 4, k = 2, tau = 0.5 (docs/theory.md, section 6)"),
        ("ncgeom nc-value --setting hucl --psi infonce --classes 10 --num-negatives 16 --beta 5 --json",
         "HUCL loss at NC with the tilted collision probability pi_beta, as JSON"),
    ],
    "metrics": [
        ("ncgeom metrics embeddings.npz --json", "NC/DC metrics of arrays z [N, d] and labels [N] saved with np.savez"),
        ("ncgeom metrics test.npz --train train.npz --normalize sphere --setting hscl --beta 5",
         "the verdict, test NCC accuracy with the train class means, and the HSCL loss against NC and its bound"),
    ],
    "verify": [
        ("ncgeom verify --quick", "symbolic checks, exact Harris checks, convex certificates, counterexample, HUCL exploration"),
        ("ncgeom verify --only certificates --json", "only the convex certificates, as JSON"),
        ("ncgeom verify --ablations --only dimension", "one case of the hypothesis ablations, with the legend and the winner per row"),
    ],
    "train": [
        ("ncgeom train --setting hscl --beta 5 --norm sphere --epochs 100 --out runs/hscl5", "one training run into a run directory"),
        ("ncgeom train --config my_run.toml --seed 3 --out runs/mine", "config from a file, a flag overriding it"),
    ],
    "sweep": [
        ("ncgeom sweep --list", "the specs shipped with ncgeom, one per claim of docs/theory.md, section 9"),
        ("ncgeom sweep claim1_scl_hscl_nc --scale quick --out runs/claim1 --workers 2",
         "a claim's shipped sweep and its verdicts; rerun the same command to resume"),
        ("ncgeom sweep my_grid.toml --out runs/mine --scheduler tcp://host:8786", "your own spec (docs/experiments.md) on a Dask cluster"),
    ],
    "compare": [
        ("ncgeom compare runs/a runs/b --metric etf_distance gap first_nc_epoch",
         "two runs side by side (runs of one config but the seed: one row, mean and 95 % interval)"),
    ],
    "plot": [
        ("ncgeom plot runs/mine --metric within_class --out within.png", "a sweep's histories, mean and band over seeds"),
    ],
    "summarize": [
        ("ncgeom summarize runs/mine --format csv", "per grid point mean and interval of every run of a sweep, as CSV"),
    ],
    "bench": [
        ("ncgeom bench --batch-sizes 256 1024 --methods floor dense blocked pml --out bench.json",
         "speed and peak memory of the SCL batch loss backends vs pytorch-metric-learning"),
    ],
    "reproduce": [
        ("ncgeom reproduce --quick --out results/quick",
         f"everything at reduced size (about {QUICK_MINUTES} minutes on {MACHINE_CORES}, measured)"),
        ("ncgeom reproduce --full --out results/full --workers 2",
         f"paper-scale settings ({FULL_WALL} on {MACHINE_CORES}, {FULL_CPU_HOURS} CPU-hours, measured; see docs/getting_started.md)"),
        ("ncgeom reproduce --quick --out results/quick --redo figures", "redraw the figures from the saved results"),
    ],
}

_INTRO = """# Command-line reference

Generated from the argparse parsers by `python -m ncgeom.cli.reference > docs/cli.md`; a test
checks that every subcommand and option appears here. Conventions shared by every subcommand:

- exit code 0 on success; 1 when the command ran but something it checks failed (a failed check of
  `ncgeom verify`, a failed stage of `ncgeom reproduce`); 2 on bad input, reported as ONE line
  `ncgeom <command>: error: <message>` on stderr (no traceback); {broken_pipe} when the reader of stdout
  closed the pipe early (`ncgeom verify | head`): the command stops quietly, nothing on stderr;
- one spelling per option across commands (the `Config` field's name where there is one: `--psi`,
  `--num-negatives`, `--classes`; `--scale` for a scale); a former spelling still works for one release,
  with a note on stderr, and is not listed here (CHANGELOG.md, "Option spellings");
- randomness comes from an explicit `--seed` where a command draws anything;
- results are written atomically (a temporary file renamed over the target), so an interrupted
  command never leaves a truncated file, and commands that produce many results (`sweep`,
  `reproduce`) resume where they stopped when rerun with the same output directory.

"""


def cli_reference() -> str:
    """Markdown reference of ``ncgeom`` and every registered subcommand."""
    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "100"  # stable wrapping of the help texts
    try:
        parser = build_parser()
        parts = [_INTRO.replace("{broken_pipe}", str(EXIT_BROKEN_PIPE)), "## ncgeom\n", "```text", parser.format_help().rstrip(), "```", ""]
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        for name, subparser in sub.choices.items():
            parts += [f"## ncgeom {name}\n", "```text", subparser.format_help().rstrip(), "```", ""]
            examples = EXAMPLES.get(name, [])
            if examples:
                parts.append("Examples:\n")
                parts += [f"- `{cmd}`: {what}" for cmd, what in examples]
                parts.append("")
    finally:
        if old is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = old
    return "\n".join(parts).rstrip() + "\n"


if __name__ == "__main__":  # pragma: no cover
    print(cli_reference(), end="")
