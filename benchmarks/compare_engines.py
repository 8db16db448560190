"""Two sweep folders of the same spec (e.g. ``--engine batched`` and ``--engine sequential``): same runs, how far
apart their final numbers are, and whether a claim's verdicts agree.

Prints the run names found in only one folder (none expected), the largest relative difference of the final loss
and of every final metric over the runs both hold (|a - b| / max(|b|, 1e-12), metrics that are null in both
skipped), and with ``--claim ID`` the verdict rows of ``evaluate_claim`` on each folder side by side.

Usage: python benchmarks/compare_engines.py DIR_A DIR_B [--claim 6]
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

from ncgeom.campaigns.claims import evaluate_claim, load_summaries
from ncgeom.runs.records import RunSummary


def _by_name(folder: Path) -> dict[str, RunSummary]:
    out = {}
    for path in sorted(folder.glob("*/summary.json")):
        summary = RunSummary.load(path.parent)
        if summary is not None:
            out[path.parent.name] = summary
    return out


def _numbers(summary: RunSummary) -> dict[str, float]:
    final = summary.final
    out = {"loss": final.loss} if final.loss is not None else {}
    for key, value in (final.metrics or {}).items():
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            out[key] = float(value)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("a", type=Path)
    parser.add_argument("b", type=Path)
    parser.add_argument("--claim", default=None)
    args = parser.parse_args()
    a, b = _by_name(args.a), _by_name(args.b)
    only = sorted(set(a) ^ set(b))
    print(f"runs: {len(a)} in A, {len(b)} in B, {len(only)} in only one" + (f": {only[:5]}" if only else ""))

    worst: dict[str, tuple[float, str]] = {}
    for name in sorted(set(a) & set(b)):
        na, nb = _numbers(a[name]), _numbers(b[name])
        for key in sorted(set(na) & set(nb)):
            x, y = na[key], nb[key]
            if math.isnan(x) and math.isnan(y):
                continue
            rel = abs(x - y) / max(abs(y), 1e-12)
            if key not in worst or rel > worst[key][0]:
                worst[key] = (rel, name)
    print(f"{'number':<28} {'max rel diff':>12}  run")
    for key, (rel, name) in sorted(worst.items(), key=lambda kv: -kv[1][0]):
        print(f"{key:<28} {rel:>12.3g}  {name}")
    if args.claim is not None:
        rows_a = evaluate_claim(args.claim, load_summaries(args.a))
        rows_b = evaluate_claim(args.claim, load_summaries(args.b))
        same = [ra.verdict == rb.verdict for ra, rb in zip(rows_a, rows_b, strict=True)]
        for ra, rb in zip(rows_a, rows_b, strict=True):
            print(f"claim {args.claim} | {ra.setting:<24} {ra.metric:<22} | A {ra.verdict!s:<16} | B {rb.verdict!s}")
        print(f"verdicts equal: {all(same)} ({sum(same)} of {len(same)} rows)")


if __name__ == "__main__":
    main()
