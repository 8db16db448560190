"""The reproduction pipeline behind ``ncgeom reproduce``: verify -> theory -> claims -> figures -> report.

Stages, in order (each writes only under the output directory ``out``):

1. ``verify``: :func:`proofs_check.report.run_all` (symbolic checks, exact Harris checks, convex
   certificates, HUCL exploration) -> ``out/verify/results.json``.
2. ``theory``: the data of the theory figures (:mod:`ncgeom.reproduce.theory_data`) ->
   ``out/theory/<name>.json`` (nc values vs beta, Harris gaps, certificates, HUCL exploration, ablation tables)
   and the hypothesis-ablation records -> ``out/theory/ablations.json`` (a case that raises is recorded there).
3. ``claims``: :func:`ncgeom.campaigns.claims.run_claims`: each claim's sweep (run directories
   under ``out/sweeps/``, trained by ``engine``: stacks or one run at a time; a tqdm bar of runs
   done / total with an ETA) and its verdicts ->
   ``out/claims/<id>.json``.
4. ``phase``: the shipped phase maps of the scale (``ScaleParameters.phase_maps``) -> ``out/phase/<map>/``
   (cells.json, the text table, the theory lines, the heat map and the spectra). Quick and full read the records
   shipped with the package (:func:`ncgeom.phase.shipping.write_shipped`: computed by ``ncgeom phase NAME`` on the
   confirmatory seeds, about an hour each; a map without one is said in the report); tiny trains its 2 x 2 smoke map
   (:func:`ncgeom.phase.run_map`, the stacked engine).
5. ``figures``: :func:`ncgeom.figures.render_all`, every registered figure from the saved results
   -> ``out/figures/<name>.png|pdf``.
6. ``report``: ``out/report.md`` (:mod:`ncgeom.reproduce.report`).

With ``workers`` > 1 the verify and theory stages (which read nothing of the claims) run, in that order, in one
more process beside the claims stage, whose runs train in the worker processes; the figures wait for both
(:func:`_run_stages`). With one worker every stage runs after the one before.

Resumable: a finished stage leaves ``out/.stages/<stage>.json`` (:class:`~ncgeom.reproduce.stages.StageRecord`) and is skipped on the next call (the
theory files and the claims are skipped one by one, and sweeps skip finished runs); figures are
redrawn when an earlier stage ran again. All writes are atomic, so an interrupted or failed run never
damages what was already written. A stage that fails is recorded (status and one-line error) and the
later stages still run; the report says which stages failed.

One writer at a time: the call holds the lock of ``out`` (:mod:`ncgeom.locking`) from the first check to
the report; a second reproduction into the same folder is refused with the holder's pid, or waits
(``wait``). The claim sweeps lock their own folders ``out/sweeps/<spec>`` as well, and check every
finished run's files before reusing it (:mod:`ncgeom.runs.integrity`). A stop signal
(:class:`ncgeom.interrupts.Interrupted`, a KeyboardInterrupt) is never recorded as a failed stage: it
unwinds the call, stops the workers and releases the lock; the interrupted stage reruns next time.
"""

from __future__ import annotations

import multiprocessing
import os
import queue
import sys
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ncgeom.atomic_io import atomic_write_json
from ncgeom.campaigns.claims import run_claims
from ncgeom.campaigns.executors import init_child, make_executor, stop_processes
from ncgeom.campaigns.plan import check_devices
from ncgeom.figures.render import render_all
from ncgeom.locking import folder_lock, prepare_folder
from ncgeom.phase.run import run_map
from ncgeom.phase.shipping import write_shipped
from ncgeom.provenance import provenance
from ncgeom.reproduce.records import (
    ClaimsSummary,
    FiguresSummary,
    PhaseSummary,
    ReportSummary,
    ReproductionManifest,
    StageSummary,
    TheorySummary,
    VerifySummary,
)
from ncgeom.reproduce.report import write_report
from ncgeom.reproduce.scales import ScaleParameters, scale_parameters
from ncgeom.reproduce.stages import STAGES, StageOutcome, StageRecord, StageStatus
from ncgeom.reproduce.theory_data import compute_all
from ncgeom.validate import require_int
from ncgeom.vocabulary import DEFAULT_ENGINE, Engine, engine_name
from proofs_check.report import run_all

__all__ = ["ReproduceResult", "Context", "reproduce"]


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
    scale: ScaleParameters
    workers: int
    log: Callable[[str], None]
    engine: Engine = DEFAULT_ENGINE
    progress: bool = True
    redo: frozenset = frozenset()
    wait: float = 0.0
    device: str | None = None
    ran: list[str] = field(default_factory=list)


def _check_manifest(out: Path, scale: ScaleParameters, device: str | None) -> None:
    """Refuse ``out`` if it holds a reproduction of another scale or device; else record this one's
    (:class:`~ncgeom.reproduce.records.ReproductionManifest`; a malformed manifest is one line naming it).

    The device is recorded only when it is not the CPU (the shipped specs' device, so the manifests written
    before devices existed stay valid): a sweep folder of runs from two devices would feed both to the figures.
    """
    device = None if device == "cpu" else device
    previous = ReproductionManifest.load(out)
    if previous is not None:
        if previous.scale != scale.name:
            raise ValueError(
                f"--out {out} already holds a {previous.scale!r} reproduction; use another directory for {scale.name!r}"
            )
        if previous.device != device:
            raise ValueError(f"--device {device or 'cpu'}: --out {out} already holds a reproduction on "
                             f"{previous.device or 'cpu'}; use another directory")
        return
    ReproductionManifest(scale=scale.name, device=device, provenance=provenance()).save(out)


def reproduce(
    out: str | Path,
    *,
    scale: str = "quick",
    workers: int = 1,
    engine: Engine = DEFAULT_ENGINE,
    stages: tuple[str, ...] | None = None,
    redo: tuple[str, ...] = (),
    progress: bool = True,
    log: Callable[[str], None] | None = None,
    wait: float = 0.0,
    device: str | None = None,
) -> ReproduceResult:
    """Run (or resume) the reproduction into ``out`` and write ``out/report.md``.

    Parameters
    ----------
    out : path
        Output directory (created); a directory of another scale is refused (ValueError).
    scale : {"tiny", "quick", "full"}
        Amount of computation (ncgeom.vocabulary.SCALES; :mod:`ncgeom.reproduce.scales`); ``tiny`` is for tests.
    workers : int
        Parallel training runs in the claim sweeps (>= 1; :func:`ncgeom.campaigns.executors.make_executor`).
    engine : {"stacked", "sequential"}
        How the claim sweeps train their runs (:func:`ncgeom.campaigns.sweep.run_sweep`): stacks of runs
        of equal shapes, one stack per task, or one run per task.
    stages : tuple of str, optional
        Run only these stages (default: all of STAGES); the report is always rewritten.
    redo : tuple of str
        Stages to recompute even if finished (their outputs are overwritten, atomically; finished
        training runs are still reused by the sweeps).
    progress : bool
        A tqdm bar (stderr) over the training runs of the claims stage.
    log : callable, optional
        Progress sink (default: print to stderr).
    wait : float
        Seconds to wait while another process writes ``out`` (0: refuse at once with
        :class:`~ncgeom.locking.LockedError`; ``math.inf``: no limit).
    device : str, optional
        Train every claim run on this device ("cpu", "cuda", "cuda:N"; :func:`ncgeom.campaigns.claims.run_claims`);
        refused before anything runs where it does not exist, or where ``out`` holds a reproduction on another.
    """
    params = scale_parameters(scale)
    workers = require_int("workers", workers, min_value=1)
    engine = engine_name(engine)
    if device is not None:
        check_devices([device])
    for arg, names in (("stages", stages or ()), ("redo", redo)):
        for name in names:
            if name not in STAGES:
                raise ValueError(f"{arg} must be a subset of {', '.join(STAGES)}, got {name!r}")
    out = prepare_folder(out, what="--out")
    with folder_lock(out, wait=wait):
        _check_manifest(out, params, device)
        ctx = Context(out=out, scale=params, workers=workers, engine=engine, progress=progress, redo=frozenset(redo),
                      wait=wait, device=device, log=log or (lambda msg: print(msg, file=sys.stderr, flush=True)))
        t_start = time.perf_counter()
        outcomes = _run_stages(ctx, [stage for stage in STAGES[:-1] if stages is None or stage in stages])
        outcomes.append(_run_stage(ctx, "report", force=True))
    return ReproduceResult(out=out, scale=params.name, stages=tuple(outcomes), report=out / "report.md",
                           seconds=time.perf_counter() - t_start)


#: The stages that need neither the claims nor each other's order with them: with ``workers`` > 1 they run in
#: a process of their own while the claims stage trains in the worker processes (:func:`_run_stages`).
BESIDE_CLAIMS: tuple[str, ...] = ("verify", "theory")
_SIDE_STOP_S = 5.0  # how long a stopped side process gets to end on SIGTERM before SIGKILL


def _run_stages(ctx: Context, todo: list[str]) -> list[StageOutcome]:
    """Run the stages ``todo`` (in STAGES order); the outcomes in the same order.

    With ``workers`` > 1 the claims train in worker processes and this process only feeds them, so the verify
    and theory stages (one core's work: symbolic checks, searches, certificates; they read nothing of the
    claims) run meanwhile, in order, in one more process (:func:`_side_process`, spawned, dying with this one,
    deaf to Ctrl-C like the workers); its log lines come back through a queue to ``ctx.log``. The figures start
    when both sides are done. The stages' results do not depend on it: each writes its own files (atomically)
    and seeds its own generators. A stop signal reaches this process (the claims): the side process is then
    stopped (SIGTERM, SIGKILL after ``_SIDE_STOP_S``) before the signal goes on, so nothing writes to ``out``
    once the call has returned; its unfinished stage has no record and reruns next time, as an interrupted
    stage always does. A side process that dies without reporting leaves its unfinished stages recorded as
    failed. With one worker the stages go one after another, in this process.
    """
    beside = [stage for stage in todo if stage in BESIDE_CLAIMS]
    if ctx.workers == 1 or "claims" not in todo or not beside:
        return [_run_stage(ctx, stage) for stage in todo]
    mp = multiprocessing.get_context("spawn")
    messages = mp.Queue()
    proc = mp.Process(target=_side_process, name="ncgeom-reproduce-theory", daemon=True,
                      args=(str(ctx.out), ctx.scale.name, tuple(beside), tuple(sorted(ctx.redo)), ctx.wait,
                            ctx.device, ctx.workers, ctx.engine, os.getpid(), messages))
    ctx.log(f"[{'+'.join(beside)}] running beside the claims (one more process; {ctx.workers} workers train)")
    proc.start()
    side: dict[str, StageOutcome] = {}
    pump = threading.Thread(target=_pump, args=(proc, messages, ctx, side), name="ncgeom-reproduce-log", daemon=True)
    pump.start()
    try:
        claims = _run_stage(ctx, "claims")
        pump.join()
    except BaseException:  # a stop signal (or an error) in the claims: stop the side process before going on
        stop_processes([proc], timeout=_SIDE_STOP_S)
        pump.join(_SIDE_STOP_S)
        raise
    proc.join()
    done = {**side, "claims": claims}
    for stage in beside:
        if stage not in done:  # the side process died before reporting it
            error = f"the side process ended (exit code {proc.exitcode}) before finishing {stage}"
            StageRecord(stage, "failed", 0.0, error).save(ctx.out)
            ctx.log(f"[{stage}] FAILED: {error}")
            done[stage] = StageOutcome(stage, "failed", 0.0, error)
            ctx.ran.append(stage)
    for stage in todo:
        if stage not in done:
            done[stage] = _run_stage(ctx, stage)
    return [done[stage] for stage in todo]


def _pump(proc, messages, ctx: Context, side: dict[str, StageOutcome]) -> None:
    """Hand the side process's messages to ``ctx`` until it has reported every stage or ended."""
    while True:
        try:
            kind, payload = messages.get(timeout=0.2)
        except queue.Empty:
            if proc.is_alive():
                continue
            try:  # it ended: what it put last may still be in the pipe
                kind, payload = messages.get(timeout=0.5)
            except (queue.Empty, EOFError, OSError):
                return
        except (EOFError, OSError):  # the pipe broke (the process was killed while writing)
            return
        if kind == "log":
            ctx.log(payload)
        elif kind == "stage":
            side[payload.stage] = payload
            if payload.status != "skipped":
                ctx.ran.append(payload.stage)
        elif kind == "end":
            return


def _side_process(out: str, scale: str, stages: tuple[str, ...], redo: tuple[str, ...], wait: float,
                  device: str | None, workers: int, engine: Engine, parent_pid: int,
                  messages) -> None:  # pragma: no cover - runs in a child process (tests/test_reproduce.py)
    """Run ``stages`` (verify, theory) into ``out`` and report each outcome and log line on ``messages``."""
    init_child(parent_pid)  # as the workers: dies with this process, leaves Ctrl-C to it
    ctx = Context(out=Path(out), scale=scale_parameters(scale), workers=workers, engine=engine, progress=False,
                  redo=frozenset(redo), wait=wait, device=device, log=lambda msg: messages.put(("log", msg)))
    for stage in stages:
        messages.put(("stage", _run_stage(ctx, stage)))
    messages.put(("end", None))
    messages.close()
    messages.join_thread()


def _run_stage(ctx: Context, stage: str, *, force: bool = False) -> StageOutcome:
    previous = StageRecord.load(ctx.out, stage)
    redo = force or stage in ctx.redo or (stage == "figures" and bool(ctx.ran))
    if previous is not None and previous.status == "done" and not redo:
        ctx.log(f"[{stage}] already done ({previous.seconds:.1f} s earlier): skipped")
        return StageOutcome(stage, "skipped", previous.seconds)
    ctx.log(f"[{stage}] running")
    t0 = time.perf_counter()
    try:
        summary = _STAGE_FUNCS[stage](ctx)
    except Exception as exc:  # a failed stage is recorded, the pipeline goes on
        seconds = time.perf_counter() - t0
        error = f"{exc.__class__.__name__}: {' '.join(str(exc).split())}"[:500]
        StageRecord(stage, "failed", seconds, error, traceback=traceback.format_exc()[-4000:]).save(ctx.out)
        ctx.log(f"[{stage}] FAILED after {seconds:.1f} s: {error}")
        ctx.ran.append(stage)
        return StageOutcome(stage, "failed", seconds, error)
    seconds = time.perf_counter() - t0
    status: StageStatus = "failed" if summary.failed else "done"
    error = "; ".join(summary.failed)[:500]
    StageRecord(stage, status, seconds, error, summary).save(ctx.out)
    ctx.log(f"[{stage}] {status} in {seconds:.1f} s" + (f": {error}" if error else ""))
    ctx.ran.append(stage)
    return StageOutcome(stage, status, seconds, error)


# --- stages -----------------------------------------------------------------------------------


def _stage_verify(ctx: Context) -> VerifySummary:
    """Run proofs_check.report.run_all and save every CheckResult as JSON (``verify/results.json``)."""
    if ctx.scale.verify == "skip":
        atomic_write_json(ctx.out / "verify" / "results.json", [])
        return VerifySummary(checks=0, skipped=True)
    def progress(result) -> None:
        ctx.log(f"  {result.status:10s} {result.name} ({result.seconds:.1f} s)")

    report = run_all(quick=ctx.scale.verify == "quick", modules=ctx.scale.verify_modules, on_result=progress)
    atomic_write_json(ctx.out / "verify" / "results.json", [r.to_dict() for r in report.checks])
    return VerifySummary(checks=len(report.checks), counts=report.counts, modules=tuple(report.modules),
                         passed=report.passed,
                         failed=tuple(f"check {r.name} failed" for r in report.checks if r.status == "fail"))


def _stage_theory(ctx: Context) -> TheorySummary:
    summary = compute_all(ctx.out / "theory", scale=ctx.scale, verify_results=ctx.out / "verify" / "results.json",
                          force="theory" in ctx.redo, log=ctx.log)
    return TheorySummary.from_dict(summary, where="theory summary")


def _stage_claims(ctx: Context) -> ClaimsSummary:
    results = run_claims(ctx.out, scale=ctx.scale.name, workers=ctx.workers, engine=ctx.engine,
                         force="claims" in ctx.redo, progress=ctx.progress, log=ctx.log, wait=ctx.wait,
                         device=ctx.device)
    failed = [f"claim {r.claim}: {r.error}" for r in results if r.error]
    failed += [f"claim {r.claim}: {len(r.failed_runs)} run(s) failed, first: {r.failed_runs[0]}" for r in results if r.failed_runs]
    return ClaimsSummary(claims={r.claim: str(r.overall) for r in results}, failed=tuple(failed))


def _stage_phase(ctx: Context) -> PhaseSummary:
    """The phase maps of the scale into ``out/phase/<map>``: read from their shipped records (quick, full: a map
    without one is a status line, not a failure), or trained (tiny: one pool for all of them; a map with a failed run
    is a failure line, the next call resumes it)."""
    if ctx.scale.phase_source == "shipped":
        return PhaseSummary(maps={name: _shipped_phase(ctx, name) for name in ctx.scale.phase_maps})
    maps: dict[str, str] = {}
    failed: list[str] = []
    with make_executor(ctx.workers) as ex:
        for name in ctx.scale.phase_maps:

            def log(line: str, name: str = name) -> None:
                ctx.log(f"  {name}: {line}")

            record = run_map(name, ctx.out / "phase" / name, scale=ctx.scale.name, workers=ctx.workers, executor=ex,
                             progress=ctx.progress, wait=ctx.wait, device=ctx.device,
                             formats=ctx.scale.figure_formats, log=log)
            counts = ", ".join(f"{n} {label}" for label, n in record.label_counts().items())
            maps[name] = (f"trained: {record.status}: {record.runs_trained} of {record.runs_uniform} uniform-grid runs "
                          f"trained; cells {counts}")
            failed += [f"phase map {name}: run {line}" for line in record.failed]
    return PhaseSummary(maps=maps, failed=tuple(failed))


def _shipped_phase(ctx: Context, name: str) -> str:
    """Write the shipped record of map ``name`` into ``out/phase/<name>``; its status line."""
    record = write_shipped(name, ctx.out / "phase" / name, formats=ctx.scale.figure_formats)
    if record is None:
        ctx.log(f"  {name}: no shipped record (`ncgeom phase {name} --out DIR` computes it)")
        return f"no shipped record yet: `ncgeom phase {name} --out DIR` computes it (not trained by the reproduction)"
    counts = ", ".join(f"{n} {label}" for label, n in record.label_counts().items())
    ctx.log(f"  {name}: read the shipped record ({record.scale} scale, {record.seeds} seeds)")
    return (f"shipped record: computed by `ncgeom phase {name}` at the {record.scale} scale on the {record.seeds} seeds "
            f"{list(record.seed_values)}; {record.status}: {record.runs_trained} of {record.runs_uniform} uniform-grid "
            f"runs trained; cells {counts}")


def _stage_figures(ctx: Context) -> FiguresSummary:
    return FiguresSummary.of(render_all(ctx.out, ctx.out / "figures", formats=ctx.scale.figure_formats, log=ctx.log))


def _stage_report(ctx: Context) -> ReportSummary:
    return ReportSummary(report=write_report(ctx.out).name)


#: Each stage's function: it runs the stage into ``ctx.out`` and returns its typed summary (``failed``: the stage
#: ends "failed" with those lines; :mod:`ncgeom.reproduce.records`).
_STAGE_FUNCS: dict[str, Callable[[Context], StageSummary]] = {
    "verify": _stage_verify,
    "theory": _stage_theory,
    "claims": _stage_claims,
    "phase": _stage_phase,
    "figures": _stage_figures,
    "report": _stage_report,
}
