"""The reproduction pipeline behind ``ncgeom reproduce``: verify -> theory -> claims -> figures -> report.

Stages, in order (each writes only under the output directory ``out``):

1. ``verify``: :func:`proofs_check.report.run_all` (symbolic checks, exact Harris checks, convex
   certificates, HUCL exploration) -> ``out/verify/results.json``.
2. ``theory``: the data of the theory figures (:mod:`ncgeom.reproduce.theory_data`) ->
   ``out/theory/<name>.json`` (nc values vs beta, Harris gaps, certificates, HUCL exploration).
3. ``claims``: for each claim of theory.md section 9, its sweep (:mod:`ncgeom.experiments`, run
   directories under ``out/sweeps/``) and its evaluation -> ``out/claims/<id>.json``.
4. ``figures``: every registered figure script (:mod:`ncgeom.reproduce.registry`), reading only the
   saved results -> ``out/figures/<name>.png|pdf``.
5. ``report``: ``out/report.md`` (:mod:`ncgeom.reproduce.report`).

Resumable: a finished stage leaves ``out/.stages/<stage>.json`` and is skipped on the next call (the
theory files and the claims are skipped one by one, and sweeps skip finished runs); figures are
redrawn when an earlier stage ran again. All writes are atomic, so an interrupted or failed run never
damages what was already written. A stage that fails is recorded (status and one-line error) and the
later stages still run; the report says which stages failed.
"""

from __future__ import annotations

import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ncgeom.atomic_io import atomic_write_json, read_json
from ncgeom.reproduce.scales import Scale, get_scale
from ncgeom.validate import require_int

__all__ = ["STAGES", "StageOutcome", "ReproduceResult", "Context", "reproduce", "stage_status"]

STAGES: tuple[str, ...] = ("verify", "theory", "claims", "figures", "report")


@dataclass(frozen=True)
class StageOutcome:
    """What happened to one stage in this call: ``done``, ``skipped`` (finished earlier) or ``failed``."""

    stage: str
    status: str
    seconds: float = 0.0
    error: str = ""


@dataclass(frozen=True)
class ReproduceResult:
    """Outcome of :func:`reproduce`: the output directory, the scale, one outcome per stage, the report."""

    out: Path
    scale: str
    stages: tuple[StageOutcome, ...]
    report: Path
    seconds: float

    @property
    def ok(self) -> bool:
        """True when no stage failed."""
        return all(s.status != "failed" for s in self.stages)


@dataclass
class Context:
    """Shared state of the stages of one call (not a result; mutable by design)."""

    out: Path
    scale: Scale
    workers: int
    log: Callable[[str], None]
    redo: frozenset = frozenset()
    ran: list[str] = field(default_factory=list)


def _marker(out: Path, stage: str) -> Path:
    return out / ".stages" / f"{stage}.json"


def stage_status(out: str | Path, stage: str) -> dict | None:
    """The recorded status of ``stage`` in ``out`` (``{"status": ..., "seconds": ..., ...}``) or None."""
    path = _marker(Path(out), stage)
    return read_json(path) if path.exists() else None


def _check_manifest(out: Path, scale: Scale) -> None:
    manifest = out / "reproduce.json"
    if manifest.exists():
        previous = read_json(manifest).get("scale")
        if previous != scale.name:
            raise ValueError(
                f"--out {out} already holds a {previous!r} reproduction; use another directory for {scale.name!r}"
            )
        return
    from ncgeom.provenance import provenance

    atomic_write_json(manifest, {"scale": scale.name, "provenance": provenance()})


def reproduce(
    out: str | Path,
    *,
    scale: str = "quick",
    workers: int = 1,
    stages: tuple[str, ...] | None = None,
    redo: tuple[str, ...] = (),
    log: Callable[[str], None] | None = None,
) -> ReproduceResult:
    """Run (or resume) the reproduction into ``out`` and write ``out/report.md``.

    Parameters
    ----------
    out : path
        Output directory (created); a directory of another scale is refused (ValueError).
    scale : {"quick", "full", "tiny"}
        Amount of computation (:mod:`ncgeom.reproduce.scales`); ``tiny`` is for tests.
    workers : int
        Parallel training runs in the claim sweeps (>= 1).
    stages : tuple of str, optional
        Run only these stages (default: all of :data:`STAGES`); the report is always rewritten.
    redo : tuple of str
        Stages to recompute even if finished (their outputs are overwritten, atomically; finished
        training runs are still reused by the sweeps).
    log : callable, optional
        Progress sink (default: print to stderr).
    """
    scale_obj = get_scale(scale)
    workers = require_int("workers", workers, min_value=1)
    for arg, names in (("stages", stages or ()), ("redo", redo)):
        for name in names:
            if name not in STAGES:
                raise ValueError(f"{arg} must be a subset of {', '.join(STAGES)}, got {name!r}")
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out {out} exists and is not a directory")
    out.mkdir(parents=True, exist_ok=True)
    _check_manifest(out, scale_obj)
    ctx = Context(out=out, scale=scale_obj, workers=workers, redo=frozenset(redo), log=log or (lambda msg: print(msg, file=sys.stderr, flush=True)))
    t_start = time.perf_counter()
    outcomes = []
    for stage in STAGES:
        if stage == "report":
            break
        if stages is not None and stage not in stages:
            continue
        outcomes.append(_run_stage(ctx, stage))
    report_outcome = _run_stage(ctx, "report", force=True)
    outcomes.append(report_outcome)
    total = time.perf_counter() - t_start
    return ReproduceResult(out=out, scale=scale_obj.name, stages=tuple(outcomes), report=out / "report.md", seconds=total)


def _run_stage(ctx: Context, stage: str, *, force: bool = False) -> StageOutcome:
    previous = stage_status(ctx.out, stage)
    upstream_ran = bool(ctx.ran)
    redo = force or stage in ctx.redo or previous is None or previous.get("status") != "done" or (stage == "figures" and upstream_ran)
    if not redo:
        ctx.log(f"[{stage}] already done ({previous.get('seconds', 0):.1f} s earlier): skipped")
        return StageOutcome(stage, "skipped", float(previous.get("seconds", 0.0)))
    ctx.log(f"[{stage}] running")
    t0 = time.perf_counter()
    func = _STAGE_FUNCS[stage]
    try:
        summary = func(ctx) or {}
    except Exception as exc:  # a failed stage is recorded, the pipeline goes on
        seconds = time.perf_counter() - t0
        error = f"{exc.__class__.__name__}: {' '.join(str(exc).split())}"[:500]
        atomic_write_json(
            _marker(ctx.out, stage),
            {"status": "failed", "seconds": seconds, "error": error, "traceback": traceback.format_exc()[-4000:]},
        )
        ctx.log(f"[{stage}] FAILED after {seconds:.1f} s: {error}")
        ctx.ran.append(stage)
        return StageOutcome(stage, "failed", seconds, error)
    seconds = time.perf_counter() - t0
    status = "failed" if summary.get("failed") else "done"
    error = "; ".join(summary.get("failed", []))[:500] if status == "failed" else ""
    atomic_write_json(_marker(ctx.out, stage), {"status": status, "seconds": seconds, "error": error, "summary": summary})
    ctx.log(f"[{stage}] {status} in {seconds:.1f} s" + (f": {error}" if error else ""))
    ctx.ran.append(stage)
    return StageOutcome(stage, status, seconds, error)


# --- stages -----------------------------------------------------------------------------------


def _stage_verify(ctx: Context) -> dict:
    """Run proofs_check.report.run_all and save every CheckResult as JSON (``verify/results.json``)."""
    if ctx.scale.verify == "skip":
        atomic_write_json(ctx.out / "verify" / "results.json", [])
        return {"checks": 0, "skipped": True}
    from proofs_check.report import run_all

    def progress(result) -> None:
        ctx.log(f"  {result.status:10s} {result.name} ({result.seconds:.1f} s)")

    report = run_all(quick=ctx.scale.verify == "quick", modules=ctx.scale.verify_modules, on_result=progress)
    records = [r.to_dict() for r in report.checks]
    atomic_write_json(ctx.out / "verify" / "results.json", records)
    summary = {"checks": len(records), "counts": report.counts, "modules": list(report.modules), "passed": report.passed}
    if not report.passed:
        summary["failed"] = [f"check {r.name} failed" for r in report.checks if r.status == "fail"]
    return summary


def _stage_theory(ctx: Context) -> dict:
    from ncgeom.reproduce import theory_data

    return theory_data.compute_all(
        ctx.out / "theory", scale=ctx.scale, verify_results=ctx.out / "verify" / "results.json", force="theory" in ctx.redo, log=ctx.log
    )


def _stage_claims(ctx: Context) -> dict:
    from ncgeom.reproduce import claims_stage

    return claims_stage.run_claims(ctx.out, scale=ctx.scale.name, workers=ctx.workers, force="claims" in ctx.redo, log=ctx.log)


def _stage_figures(ctx: Context) -> dict:
    from ncgeom.reproduce.figures import render_all

    return render_all(ctx.out, ctx.out / "figures", formats=ctx.scale.figure_formats, log=ctx.log)


def _stage_report(ctx: Context) -> dict:
    from ncgeom.reproduce.report import write_report

    path = write_report(ctx.out)
    return {"report": str(path)}


_STAGE_FUNCS = {
    "verify": _stage_verify,
    "theory": _stage_theory,
    "claims": _stage_claims,
    "figures": _stage_figures,
    "report": _stage_report,
}
