"""The claims of theory.md section 9 as sweeps plus evaluations into verdict records.

Each :class:`Claim` names its sweep spec (``experiments/<name>.toml``, with ``[quick]`` and ``[full]``
scales) and an ``evaluate`` function (:mod:`ncgeom.experiments.evaluations`, where the NC and DC
thresholds are stated) that turns the finished runs' summaries into :class:`ClaimRecord` rows
(claim, setting, metric, expected, observed, verdict). Used by ``ncgeom reproduce`` via
:func:`run_claim` / :func:`evaluate_claim`; :func:`records_markdown` formats rows for docs/results.md.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass, field
from pathlib import Path

from ncgeom.experiments.evaluations import (
    DC_SPECTRUM,
    EVALUATIONS,
    NC_ETF,
    NC_REL_GAP,
    NC_WITHIN,
    VERDICTS,
    ClaimRecord,
)
from ncgeom.experiments.result import read_summary
from ncgeom.experiments.sweep import SweepResult, load_spec, run_sweep
from ncgeom.validate import require_choice

__all__ = [
    "NC_ETF", "NC_WITHIN", "NC_REL_GAP", "DC_SPECTRUM", "VERDICTS",
    "ClaimRecord", "Claim", "CLAIMS", "SPEC_DIR", "spec_path", "run_claim", "evaluate_claim",
    "load_summaries", "run_claims", "records_markdown",
]

SPEC_DIR = Path(__file__).resolve().parents[2] / "experiments"


@dataclass(frozen=True)
class Claim:
    """A claim of theory.md section 9: statement, sweep spec file name, evaluation."""

    id: str
    statement: str
    spec: str
    evaluate: Callable[[list[dict]], list[ClaimRecord]] = field(repr=False)


CLAIMS: dict[str, Claim] = {c.id: c for c in (
    Claim("1", "SCL/HSCL reach NC whatever the hardness beta (with normalization).", "claim1_scl_hscl_nc", EVALUATIONS["1"]),
    Claim("2", "UCL reaches NC only with label-based positives, not with additive Gaussian noise positives.",
          "claim2_ucl_positives", EVALUATIONS["2"]),
    Claim("3", "HUCL does not reach NC; the deviation from the ETF grows with beta.", "claim3_hucl_beta", EVALUATIONS["3"]),
    Claim("4", "Without feature normalization Adam ends in dimensional collapse, with or without hard negatives.",
          "claim4_no_normalization_dc", EVALUATIONS["4"]),
    Claim("5", "Moderate hardness (beta 5, 10) improves NCC accuracy by > 40 points vs SCL/UCL (ball, tau=1, d=C-1).",
          "claim5_digits_hardness", EVALUATIONS["5"]),
    Claim("6", "Supervised: more hardness, closer to NC. Unsupervised: an optimal beta (~5); higher beta, worse NC and more DC.",
          "claim6_hardness_nc", EVALUATIONS["6"]),
    Claim("7", "From a near-NC init SCL/HSCL stay at NC; HUCL with beta in {10, 30} drifts away with DC.",
          "claim7_near_nc_init", EVALUATIONS["7"]),
    Claim("8", "NC is reached for batch sizes 64..512; batch 32 hinders it when C is large.", "claim8_batch_size", EVALUATIONS["8"]),
)}


def spec_path(claim_id: str) -> Path:
    """experiments/<spec>.toml of a claim."""
    claim = CLAIMS[require_choice("claim_id", str(claim_id), CLAIMS)]
    return SPEC_DIR / f"{claim.spec}.toml"


def run_claim(claim_id: str, out_dir: str | Path, *, scale: str = "quick", workers: int = 1,
              executor: Executor | None = None, progress: bool = False) -> SweepResult:
    """Run (or resume) the sweep of a claim into ``out_dir`` (one run directory per config)."""
    return run_sweep(load_spec(spec_path(claim_id)), out_dir, scale=scale, workers=workers, executor=executor,
                     progress=progress)


def load_summaries(sweep_dir: str | Path) -> list[dict]:
    """summary.json of every finished run under ``sweep_dir`` (sorted by run name)."""
    out = []
    for d in sorted(Path(sweep_dir).iterdir()) if Path(sweep_dir).is_dir() else []:
        s = read_summary(d) if d.is_dir() else None
        if s is not None:
            out.append(s)
    return out


def evaluate_claim(claim_id: str, results: SweepResult | str | Path | list[dict]) -> tuple[ClaimRecord, ...]:
    """Verdict records of a claim from a SweepResult, a sweep directory, or a list of summaries."""
    claim = CLAIMS[require_choice("claim_id", str(claim_id), CLAIMS)]
    if isinstance(results, SweepResult):
        summaries = results.summaries()
    elif isinstance(results, (str, Path)):
        summaries = load_summaries(results)
    else:
        summaries = list(results)
    if not any(s.get("status") == "completed" for s in summaries):
        return (ClaimRecord(claim.id, "overall", "-", claim.statement, "no finished runs", "inconclusive"),)
    rows = claim.evaluate(summaries)
    bad = [s for s in summaries if s.get("status") != "completed"]
    if bad:
        rows.append(ClaimRecord(claim.id, "diverged runs", "status", "completed", f"{len(bad)} diverged", "inconclusive"))
    return tuple(rows)


def run_claims(claim_ids=None, *, out_dir: str | Path, scale: str = "quick", workers: int = 1,
               executor: Executor | None = None, progress: bool = False) -> tuple[ClaimRecord, ...]:
    """Run and evaluate several claims (default all), each into ``out_dir/<spec name>``.

    All runs of all claims are submitted to one executor (a process pool of ``workers`` by default),
    so the pool stays busy across claims.
    """
    ids = list(CLAIMS) if claim_ids is None else [str(c) for c in claim_ids]
    for c in ids:
        require_choice("claim_id", c, CLAIMS)
    own = executor is None and workers > 1
    if own:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        from ncgeom.experiments.sweep import _init_worker

        executor = ProcessPoolExecutor(max_workers=workers, initializer=_init_worker,
                                       mp_context=multiprocessing.get_context("spawn"))
    try:
        results = _run_all(ids, Path(out_dir), scale, workers, executor, progress)
    finally:
        if own:
            executor.shutdown(wait=True, cancel_futures=True)
    return tuple(r for c in ids for r in evaluate_claim(c, results[c]))


def _run_all(ids, out, scale, workers, executor, progress):
    if executor is None:
        return {c: run_claim(c, out / CLAIMS[c].spec, scale=scale, workers=workers, progress=progress) for c in ids}
    from concurrent.futures import ThreadPoolExecutor

    # one thread per claim feeds the shared executor, so all claims' runs are queued at once
    with ThreadPoolExecutor(max_workers=len(ids)) as feeder:
        futs = {c: feeder.submit(run_claim, c, out / CLAIMS[c].spec, scale=scale, executor=executor, progress=False)
                for c in ids}
        return {c: f.result() for c, f in futs.items()}


def records_markdown(records) -> str:
    """A markdown table (claim | setting | metric | expected | observed | verdict) of ClaimRecords."""
    lines = ["| claim | setting | metric | expected | observed | verdict |", "|---|---|---|---|---|---|"]
    for r in records:
        cells = [r.claim, r.setting, r.metric, r.expected, r.observed, f"**{r.verdict}**" if r.setting == "overall" else r.verdict]
        lines.append("| " + " | ".join(c.replace("|", "/") for c in cells) + " |")
    return "\n".join(lines) + "\n"
