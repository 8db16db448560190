"""``ncgeom nc-value``: the exact population loss at neural collapse (docs/theory.md section 5).

Example::

    $ ncgeom nc-value --setting ucl --psi infonce --classes 4 --num-negatives 2 --tau 0.5
    $ ncgeom nc-value --setting hucl --psi infonce-mean --classes 10 --num-negatives 256 --beta 5 --json

The options are spelled as the ``Config`` fields of ``ncgeom train`` (``--psi``, ``--num-negatives``);
``--loss`` and ``--negatives`` are accepted for one release (:mod:`ncgeom.cli.options`).

The JSON output is one object: ``value`` plus every input (``setting``, ``loss`` (the psi), ``num_classes``,
``num_negatives``, ``beta``, ``tau``, ``margin``) and the ``collision_probability`` at NC.
"""

from __future__ import annotations

import argparse

from ncgeom import budget
from ncgeom.atomic_io import dumps_json
from ncgeom.cli.options import StoreWithFormerSpellings
from ncgeom.theory import collision_probability, nc_value
from ncgeom.validate import require_int, require_real
from ncgeom.vocabulary import PSI_NAMES, SETTINGS, is_hard

__all__ = ["register", "run"]


def register(subparsers) -> None:
    """Add the ``nc-value`` subcommand to ``subparsers``."""
    p = subparsers.add_parser(
        "nc-value",
        help="population loss at neural collapse (closed form, docs/theory.md section 5)",
        description="Exact population loss at neural collapse (unit simplex ETF, balanced classes): "
        "sum_j Binom(k, j; p) psi(j zeros, k-j entries -C/(C-1)), p the collision probability.",
    )
    p.add_argument("--setting", required=True, choices=SETTINGS, help="negative law (docs/theory.md section 3)")
    p.add_argument("--psi", "--loss", dest="psi", required=True, choices=PSI_NAMES, action=StoreWithFormerSpellings,
                   former=("--loss",), help="psi_k (docs/theory.md section 2)")
    p.add_argument("--classes", required=True, type=int, metavar="C", help="number of classes C >= 2")
    p.add_argument("--num-negatives", "--negatives", dest="num_negatives", required=True, type=int, metavar="K",
                   action=StoreWithFormerSpellings, former=("--negatives",),
                   help="negatives per anchor k >= 1 (64 bytes each, within --max-memory: k <= 67 million at 4 GiB)")
    p.add_argument("--beta", type=float, default=0.0, metavar="B", help="hardness beta >= 0 (default 0)")
    p.add_argument("--tau", type=float, default=1.0, metavar="T", help="temperature tau > 0 (default 1)")
    p.add_argument("--margin", type=float, default=1.0, metavar="M", help="triplet margin (default 1)")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    p.set_defaults(func=run)


def _validated(args: argparse.Namespace) -> dict:
    """The inputs under their JSON names, or ValueError naming the offending flag."""
    num_negatives = require_int("--num-negatives", args.num_negatives, min_value=1)
    # the closed form holds O(k) float64 arrays (ncgeom.budget.nc_value_bytes); its cost does not grow with C
    budget.require_within_budget("--num-negatives", budget.nc_value_bytes(num_negatives),
                                 what=f"the closed form over k = {num_negatives} negatives")
    return {
        "setting": args.setting,
        "loss": args.psi,
        "num_classes": require_int("--classes", args.classes, min_value=2),
        "num_negatives": num_negatives,
        "beta": require_real("--beta", args.beta, min_value=0.0),
        "tau": require_real("--tau", args.tau, min_value=0.0, min_inclusive=False),
        "margin": require_real("--margin", args.margin),
    }


def run(args: argparse.Namespace) -> int:
    """Handler: validate, compute with :mod:`ncgeom.theory`, print; returns the exit code 0."""
    inputs = _validated(args)
    p = collision_probability(inputs["setting"], num_classes=inputs["num_classes"], beta=inputs["beta"])
    value = nc_value(
        inputs["setting"],
        inputs["loss"],
        num_classes=inputs["num_classes"],
        num_negatives=inputs["num_negatives"],
        beta=inputs["beta"],
        tau=inputs["tau"],
        margin=inputs["margin"],
    )
    result = {"value": value, **inputs, "collision_probability": p}
    if args.json:
        print(dumps_json(result))
    else:
        print(_table(result))
    return 0


def _table(r: dict) -> str:
    unused = {
        "beta": not is_hard(r["setting"]),
        "tau": r["loss"] == "triplet",
        "margin": r["loss"] != "triplet",
    }
    rows = [
        ("setting", r["setting"], ""),
        ("psi", r["loss"], ""),
        ("classes C", r["num_classes"], ""),
        ("negatives k", r["num_negatives"], ""),
        ("beta", f"{r['beta']:g}", f"(unused by {r['setting']})" if unused["beta"] else ""),
        ("tau", f"{r['tau']:g}", f"(unused by {r['loss']})" if unused["tau"] else ""),
        ("margin", f"{r['margin']:g}", f"(unused by {r['loss']})" if unused["margin"] else ""),
        ("collision probability", f"{r['collision_probability']:.10g}", "(a negative shares the anchor's class)"),
        ("NC value", f"{r['value']:.10g}", "(population loss at neural collapse)"),
    ]
    width = max(len(name) for name, _, _ in rows)
    return "\n".join(f"{name:<{width}}  {str(val):<14} {note}".rstrip() for name, val, note in rows)
