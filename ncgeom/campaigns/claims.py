"""The claims of docs/theory.md, section 9: each a shipped sweep spec plus an evaluation into verdict rows.

Each :class:`Claim` owns its id and its statement, names its spec (``ncgeom/campaigns/specs/<spec>.toml``, scales
tiny/quick/full) and its rule (:mod:`ncgeom.campaigns.evaluations`, decided with :mod:`ncgeom.campaigns.rules`),
which turns the finished runs' summaries into :class:`ClaimRecord` rows, and says whether its setup was chosen
after exploration. A claim may be tested on a second setup under its own id: ``5`` is claim 5 on scikit-learn's
digits (context: its baselines leave no room for the claimed gain), ``5cpu`` the same rule on a harder CPU-sized
Gaussian mixture (C = 100, d = 99). :func:`run_claims` runs the sweeps of several claims on one executor, on their
confirmatory seeds by default, and writes one :class:`ClaimResult` file per claim, ``OUT/claims/<id>.json``;
``ncgeom reproduce`` and ``ncgeom sweep`` use it.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Executor, ThreadPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from tqdm import tqdm

from ncgeom.atomic_io import atomic_write_json, read_json
from ncgeom.campaigns.evaluations import EVALUATIONS
from ncgeom.campaigns.executors import make_executor, pool_executor
from ncgeom.campaigns.plan import check_devices, plan_units, sweep_configs
from ncgeom.campaigns.rules import ClaimRecord, overall_row
from ncgeom.campaigns.spec import SweepSpec, load_spec, run_name
from ncgeom.campaigns.sweep import RunRecord, SweepResult, count_finished, run_sweep
from ncgeom.campaigns.units import executor_width, pool_died
from ncgeom.locking import folder_lock
from ncgeom.runs.integrity import is_finished
from ncgeom.runs.records import RunSummary, load_runs
from ncgeom.threads import require_workers
from ncgeom.validate import require_choice, require_int, require_keys
from ncgeom.vocabulary import DEFAULT_ENGINE, SCALES, SEED_SETS, Engine, SeedSet, Verdict

__all__ = [
    "Claim", "CLAIMS", "PRESETS", "ALL_CLAIMS", "claim_of_spec", "ClaimRecord", "ClaimResult", "claim_spec", "evaluate_claim", "load_summaries",
    "run_claims", "records_markdown", "records_text", "verdict_text", "claim_run_counts",
]


@dataclass(frozen=True)
class Claim:
    """A claim of docs/theory.md, section 9: its id, statement, the name of its shipped spec, and its rule.

    ``rule(claim_id, summaries)`` turns a sweep's run summaries into verdict rows labelled ``claim_id``
    (:mod:`ncgeom.campaigns.evaluations`); a claim tested on a second setup (claim 5 on digits and on a CPU-sized
    setup, the paper presets) has its own id and the same rule. ``explored``: how the setup was chosen after
    exploration (docs/results.md), None when it was fixed before any run.
    """

    id: str
    statement: str
    spec: str
    rule: Callable[[str, Sequence[RunSummary]], list[ClaimRecord]] = field(repr=False)
    explored: str | None = None

    def evaluate(self, summaries: Sequence[RunSummary]) -> list[ClaimRecord]:
        """The verdict rows of this claim on ``summaries``: :attr:`rule`'s rows, then the overall row, whose
        expected text is this claim's statement."""
        rows = self.rule(self.id, summaries)
        return [*rows, overall_row(self.id, self.statement, rows)]


#: The note of the claims whose settings were chosen after exploration on seeds 0-4 (docs/results.md, before the
#: exploratory / confirmatory split): their verdicts rest on the confirmatory seeds, disjoint from those.
_BEFORE = "settings chosen after exploration on seeds 0-4 (before 2026-12-01); decided on fresh seeds"

CLAIMS: dict[str, Claim] = {c.id: c for c in (
    Claim("1", "SCL/HSCL reach NC whatever the hardness beta (with normalization).", "claim1_scl_hscl_nc", EVALUATIONS["1"]),
    Claim("2", "UCL reaches NC only with label-based positives, not with additive Gaussian noise positives.",
          "claim2_ucl_positives", EVALUATIONS["2"], _BEFORE),
    Claim("3", "HUCL does not reach NC; the deviation from the ETF grows with beta.", "claim3_hucl_beta", EVALUATIONS["3"],
          "budget raised to 600 epochs (quick) / 1000 (full) after the exploratory seeds (2026-12-02)"),
    Claim("4", "Without feature normalization Adam ends in dimensional collapse, with or without hard negatives.",
          "claim4_no_normalization_dc", EVALUATIONS["4"],
          "grid over C, encoder and normalization fixed before any run; input_dim raised to 64 at quick after the "
          "exploratory seeds, full budget 200 epochs for cost before any full run (2026-12-02)"),
    Claim("5", "Moderate hardness (beta 5, 10) improves NCC accuracy by > 40 points vs SCL/UCL (ball, tau=1, d=C-1).",
          "claim5_digits_hardness", EVALUATIONS["5"]),
    Claim("5cpu", "Claim 5 on a CPU-sized setup where accuracy is not saturated: beta 5, 10 improve NCC accuracy by "
          "> 40 points vs SCL/UCL (Gaussian mixture, C = 100, d = 99, MLP, ball, tau=1).",
          "claim5_cpu_mixture", EVALUATIONS["5"],
          "the C = 100 mixture chosen after six explorations on seeds 0-4 (before 2026-12-01); decided on fresh seeds"),
    Claim("6", "Supervised: more hardness, closer to NC. Unsupervised: an optimal beta (~5); higher beta, worse NC and more DC.",
          "claim6_hardness_nc", EVALUATIONS["6"], _BEFORE),
    Claim("7", "From a near-NC init SCL/HSCL stay at NC; HUCL with beta in {10, 30} drifts away with DC.",
          "claim7_near_nc_init", EVALUATIONS["7"], _BEFORE),
    Claim("8", "NC is reached for batch sizes 64..512; batch 32 hinders it when C is large.", "claim8_batch_size", EVALUATIONS["8"],
          _BEFORE),
)}


#: The paper's real-data claims with the authors' settings (CIFAR-100, ResNet-50; specs ``paper_*``,
#: docs/experiments.md, "Paper presets"): decided by the rules of the claims they repeat, on a GPU with the
#: data set. ``ncgeom sweep`` evaluates them; ``ncgeom reproduce``, which runs on any machine with only
#: what ships, runs :data:`CLAIMS` alone.
PRESETS: dict[str, Claim] = {c.id: c for c in (
    Claim("5-cifar100", "Claim 5 with the authors' settings on CIFAR-100 (ResNet-50, d = 99, ball, tau = 1, no augmentation, "
          "401 epochs): beta 5, 10 improve NCC accuracy by > 40 points vs SCL/UCL.",
          "paper_cifar100_claim5", EVALUATIONS["5"]),
    Claim("6-cifar100", "Claim 6 with the authors' settings on CIFAR-100: supervised, more hardness closer to NC; "
          "unsupervised, an optimal beta (~5).", "paper_cifar100_claim6", EVALUATIONS["6"]),
    Claim("8-cifar100", "Claim 8 with the authors' settings on CIFAR-100: NC for batch sizes 64..512; batch 32 hinders it.",
          "paper_cifar100_claim8", EVALUATIONS["8"]),
)}

#: Every claim with a shipped spec: the reproduction's and the presets'.
ALL_CLAIMS: dict[str, Claim] = {**CLAIMS, **PRESETS}


def claim_of_spec(spec: SweepSpec) -> Claim | None:
    """The claim a shipped spec decides (its ``claim`` key names one of :data:`ALL_CLAIMS` whose spec it is)."""
    claim = ALL_CLAIMS.get(spec.claim) if spec.shipped and spec.claim is not None else None
    return claim if claim is not None and claim.spec == spec.name else None


def _claim(claim_id) -> Claim:
    return ALL_CLAIMS[require_choice("claim_id", str(claim_id), ALL_CLAIMS)]


def claim_spec(claim_id: str) -> SweepSpec:
    """The shipped sweep spec of a claim."""
    return load_spec(_claim(claim_id).spec)


@dataclass(frozen=True)
class ClaimResult:
    """``claims/<id>.json``: a claim's verdict rows and how they were obtained.

    ``runs`` counts the sweep's runs; ``failed_runs`` names each run without a summary and why
    (``<run name>: <reason>``: it raised, or its worker died and no fresh pool brought it back; retried on the
    next call); ``error`` is set when the sweep itself could not run. ``complete``: neither, so the rows decide on
    every run of the grid; an incomplete result says what it lacks instead of deciding on fewer seeds silently.
    ``seeds``: the seed set the verdicts rest on (confirmatory, the default, or exploratory); ``explored``: the
    claim's note on a setup chosen after exploration (None: fixed before any run).
    """

    claim: str
    statement: str
    spec: str
    scale: str
    runs: int
    failed_runs: tuple[str, ...]
    error: str | None
    rows: tuple[ClaimRecord, ...]
    seeds: SeedSet = "confirmatory"
    explored: str | None = None

    @property
    def complete(self) -> bool:
        return not self.failed_runs and self.error is None

    @property
    def overall(self) -> Verdict | None:
        """The verdict of the claim's ``overall`` row (None without one)."""
        return next((r.verdict for r in self.rows if r.setting == "overall"), None)

    @property
    def n_seeds(self) -> int | None:
        """Seeds per grid point of the claim's ``overall`` row (the fewest over the rows it decides on)."""
        return next((r.n_seeds for r in self.rows if r.setting == "overall"), None)

    def to_dict(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out.update(failed_runs=list(self.failed_runs), rows=[r.to_dict() for r in self.rows])
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ClaimResult:
        names = {f.name for f in fields(cls)}
        require_keys("claim file", data, accepted=names, required=names - {"seeds", "explored"})
        return cls(**{**data, "failed_runs": tuple(data["failed_runs"]),
                      "rows": tuple(ClaimRecord.from_dict(r) for r in data["rows"])})

    def save(self, out_dir: str | Path) -> Path:
        """Write ``out_dir/claims/<id>.json`` atomically."""
        return self.write(self.path(out_dir, self.claim))

    def write(self, path: str | Path) -> Path:
        """Write this record to ``path`` atomically (a sweep's ``claim.json``, the same format)."""
        return atomic_write_json(Path(path), self.to_dict())

    @classmethod
    def read(cls, path: str | Path) -> ClaimResult:
        """The record at ``path`` (ValueError naming the file when it is not a claim file)."""
        try:
            return cls.from_dict(read_json(path))
        except (TypeError, ValueError, AttributeError) as exc:
            raise ValueError(f"{path}: not an ncgeom claim file ({' '.join(str(exc).split())[:200]})") from None

    @classmethod
    def load(cls, out_dir: str | Path, claim_id: str) -> ClaimResult | None:
        """``out_dir/claims/<id>.json``, or None if that claim was not evaluated there."""
        path = cls.path(out_dir, claim_id)
        return cls.from_dict(read_json(path)) if path.is_file() else None

    @staticmethod
    def path(out_dir: str | Path, claim_id: str) -> Path:
        return Path(out_dir) / "claims" / f"{claim_id}.json"


def load_summaries(sweep_dir: str | Path) -> list[RunSummary]:
    """The summaries of the finished runs under ``sweep_dir`` (sorted by run name)."""
    return [run.summary for run in load_runs(sweep_dir) if run.summary is not None]


def evaluate_claim(claim_id: str, results: SweepResult | Sequence[RunSummary]) -> tuple[ClaimRecord, ...]:
    """Verdict rows of a claim from a SweepResult or a list of run summaries."""
    claim = _claim(claim_id)
    summaries = results.summaries() if isinstance(results, SweepResult) else list(results)
    if not any(s.status == "completed" for s in summaries):
        return (ClaimRecord(claim.id, "overall", "-", claim.statement, "no finished runs", Verdict.INCONCLUSIVE, 0),)
    return tuple(claim.evaluate(summaries))


def run_claims(
    out_dir: str | Path,
    *,
    claim_ids: Iterable[str] | None = None,
    scale: str = "quick",
    workers: int = 1,
    scheduler=None,
    executor: Executor | None = None,
    engine: Engine = DEFAULT_ENGINE,
    force: bool = False,
    progress: bool = True,
    log: Callable[[str], None] | None = None,
    wait: float = 0.0,
    device: str | None = None,
    seeds: SeedSet = "confirmatory",
) -> tuple[ClaimResult, ...]:
    """Run the sweeps of several claims (default all) and write their verdicts.

    ``seeds``: the seed set every sweep trains (its spec's ``confirmatory_seeds``, the default and the verdicts of
    record, or its ``exploratory_seeds``; docs/theory.md, section 9, "Confirmatory seeds").

    Each claim's sweep goes into ``out_dir/sweeps/<spec>/`` (finished runs are skipped, so an
    interrupted call resumes) and its :class:`ClaimResult` into ``out_dir/claims/<id>.json``. A claim
    whose file is complete is skipped unless ``force``. All runs of all claims share one executor
    (``executor``; a Dask cluster of ``scheduler``; or a process pool of its own, sized by the work: ``workers``
    processes, fewer when the claims have fewer units of work left, at most :func:`ncgeom.threads.max_workers`),
    each claim's sweep fed from its own thread, so the workers stay busy across claims.

    A worker that dies (killed by the out-of-memory killer under memory pressure, say) breaks a process pool for
    every later run of every claim: those runs used to end as failed, and their claims were decided on fewer seeds
    (issue 27, item 8). Now the claims that lost runs to a dead worker are rerun in a fresh pool of ours, up to
    :data:`POOL_REBUILDS` times (their finished runs are kept); a claim still short of runs after that says which
    and why (:attr:`ClaimResult.failed_runs`, and :attr:`ClaimResult.complete` is False). Nothing here waits with
    a timeout: a worker starved of CPU or paused is waited for. ``engine``
    (stacked or sequential) is each sweep's (:func:`~ncgeom.campaigns.sweep.run_sweep`): stacked, a
    claim's runs go to the workers as stacks. ``progress`` shows one tqdm bar on stderr over all runs
    (runs done / total, with an ETA; a stack of R runs advances it by R when it ends).

    ``out_dir`` is locked for the whole call (:mod:`ncgeom.locking`; re-entrant, so a reproduction that
    holds it can call this), and each sweep folder by its own sweep; ``wait`` seconds are spent waiting
    for another writer of either before :class:`~ncgeom.locking.LockedError` (0: refuse at once).
    Finished runs whose files are damaged are rerun (:func:`~ncgeom.campaigns.sweep.run_sweep`), each
    logged with the reason. ``device`` ("cpu", "cuda", "cuda:N"), when given, replaces every run's device
    (:func:`~ncgeom.campaigns.plan.sweep_configs`); one that does not exist here is refused before any run.

    Returns the ClaimResult of every requested claim, in claim order.
    """
    ids = list(CLAIMS) if claim_ids is None else [_claim(c).id for c in claim_ids]
    scale = require_choice("scale", scale, SCALES)
    seeds = require_choice("seeds", seeds, SEED_SETS)
    own_pool = executor is None and scheduler is None
    workers = require_workers("workers", workers) if own_pool else require_int("workers", workers, min_value=1)
    if device is not None:
        check_devices([device])  # before the lock and any run (a spec's own device: its sweep checks it)
    log = log or (lambda msg: None)
    with folder_lock(out_dir, wait=wait) as lock:
        return _run_claims_locked(lock.folder, ids, scale, workers, scheduler, executor, engine, force, progress,
                                  log, wait, device, seeds)


#: How many times :func:`run_claims` starts a fresh worker pool after a worker died (the pool is then broken for
#: every later run), each time rerunning the sweeps of the claims that lost runs to it (finished runs are skipped).
POOL_REBUILDS = 2


def _run_claims_locked(out: Path, ids: list[str], scale: str, workers: int, scheduler, executor: Executor | None,
                       engine: Engine, force: bool, progress: bool, log: Callable[[str], None],
                       wait: float, device: str | None, seeds: SeedSet) -> tuple[ClaimResult, ...]:
    done: dict[str, ClaimResult] = {}
    for cid in ids:
        previous = None if force else ClaimResult.load(out, cid)
        if previous is not None and previous.complete and previous.scale == scale and previous.seeds == seeds:
            done[cid] = previous
            log(f"  claim {cid}: already evaluated ({previous.overall}), skipped")
    specs = {cid: claim_spec(cid) for cid in ids if cid not in done}
    if not specs:  # nothing to run: start no worker
        return tuple(done[cid] for cid in ids)
    runs_of = {cid: len(sweep_configs(spec, scale=scale, seeds=seeds, device=device)) for cid, spec in specs.items()}
    width = workers if executor is None else max(workers, executor_width(executor))
    size = _pool_size(out, specs, scale=scale, device=device, engine=engine, workers=width, seeds=seeds)
    bar = tqdm(total=sum(runs_of.values()), unit="run", desc=f"claims ({scale})", file=sys.stderr,
               disable=not progress or not runs_of)

    def on_run(record: RunRecord) -> None:
        bar.update(1)

    def sweep(cid: str, ex: Executor | None) -> tuple[ClaimResult, bool]:
        """The claim's result, and whether a worker's death (a broken pool) cost it runs."""
        spec = specs[cid]
        try:
            result = run_sweep(spec, out / "sweeps" / spec.name, scale=scale, workers=workers, executor=ex,
                               engine=engine, on_run=on_run, wait=wait, device=device, seeds=seeds)
        except Exception as exc:  # recorded in the claim file; the other claims still run
            lost = isinstance(exc, BrokenProcessPool)
            return ClaimResult(cid, CLAIMS[cid].statement, spec.name, scale, 0, (), f"{type(exc).__name__}: {exc}",
                               (), seeds, CLAIMS[cid].explored), lost
        for r in result.invalid:
            log(f"  claim {cid}: run {r.name} was damaged ({r.invalid}): rerun")
        failed = tuple(f"{r.name}: {r.error}" for r in result.failed)
        rows = evaluate_claim(cid, result)
        lost = any(r.error is not None and pool_died(r.error) for r in result.failed)
        return ClaimResult(cid, CLAIMS[cid].statement, spec.name, scale, len(result.runs), failed, None, rows, seeds,
                           CLAIMS[cid].explored), lost

    pending = list(specs)
    try:
        for attempt in range(POOL_REBUILDS + 1):
            # the first round on the caller's executor or our own; after a worker died, on a fresh pool of our own
            pool = _shared(executor, size, scheduler) if attempt == 0 else pool_executor(size)
            lost: list[str] = []
            with pool as ex:
                for cid, (claim_result, hit) in _feed(sweep, ex, pending):
                    claim_result.save(out)  # complete or not: an incomplete result is rerun by the next call
                    done[cid] = claim_result
                    if hit and attempt < POOL_REBUILDS:
                        lost.append(cid)
                        continue
                    extra = f", {len(claim_result.failed_runs)} failed" if claim_result.failed_runs else ""
                    log(f"  claim {cid}: {claim_result.overall or claim_result.error} ({claim_result.runs} runs{extra})")
            if not lost:
                break
            size = _pool_size(out, {cid: specs[cid] for cid in lost}, scale=scale, device=device, engine=engine,
                              workers=width, seeds=seeds)
            log(f"  a worker process died (the pool is broken, e.g. by the out-of-memory killer): claim(s) "
                f"{', '.join(lost)} lost runs to it; rerunning them in a fresh pool of {size} worker(s) "
                f"(finished runs are kept)")
            bar.n = max(0, bar.n - sum(runs_of[cid] for cid in lost))  # each rerun sweep reports all its runs again
            bar.refresh()
            pending = lost
    finally:
        bar.close()
    return tuple(done[cid] for cid in ids)


def _feed(sweep: Callable[[str, Executor | None], Any], ex: Executor | None, cids: list[str]) -> Iterator[tuple[str, Any]]:
    """(claim id, ``sweep(cid, ex)``) of each claim, in order; with an executor, each sweep fed from its own thread so
    that the workers stay busy across claims."""
    if ex is None:
        for cid in cids:
            yield cid, sweep(cid, None)
        return
    feeder = ThreadPoolExecutor(max_workers=max(len(cids), 1))
    try:
        futures = {cid: feeder.submit(sweep, cid, ex) for cid in cids}
        for cid, fut in futures.items():
            yield cid, fut.result()
    except BaseException:  # a stop signal or an error: the caller stops the workers, which ends the feeders
        feeder.shutdown(wait=False)
        raise
    feeder.shutdown(wait=True)


def _pool_size(out: Path, specs: dict[str, SweepSpec], *, scale: str, device: str | None, engine: Engine,
               workers: int, seeds: SeedSet = "confirmatory") -> int:
    """The worker processes the claims' work needs: ``workers``, or fewer when their sweeps have fewer units left to
    train (:func:`~ncgeom.campaigns.plan.plan_units` of the runs without a summary)."""
    if workers == 1:
        return 1
    units = 0
    for spec in specs.values():
        keys = spec.grid_keys(scale)
        folder = out / "sweeps" / spec.name
        todo = [c for c in sweep_configs(spec, scale=scale, seeds=seeds, device=device)
                if not is_finished(folder / run_name(c, keys))]
        units += len(plan_units(todo, engine=engine, workers=workers))
        if units >= workers:
            return workers
    return max(1, units)


def claim_run_counts(out_dir: str | Path, *, scale: str, claim_ids: Iterable[str] | None = None,
                     device: str | None = None, seeds: SeedSet = "confirmatory") -> tuple[int, int]:
    """(finished training runs, all training runs) of the claims' sweeps under ``out_dir/sweeps``, from disk
    (the runs on ``device`` when given, as :func:`run_claims` trains them)."""
    ids = list(CLAIMS) if claim_ids is None else [_claim(c).id for c in claim_ids]
    done = total = 0
    for cid in ids:
        spec = claim_spec(cid)
        d, t = count_finished(spec, Path(out_dir) / "sweeps" / spec.name, scale=scale, device=device, seeds=seeds)
        done, total = done + d, total + t
    return done, total


def _shared(executor: Executor | None, size: int, scheduler):
    """The caller's executor (left running), a Dask cluster, a pool of ``size`` workers of our own, or none (size 1
    without a pool: the runs go in this process)."""
    if executor is not None:
        return contextlib.nullcontext(executor)
    if scheduler is not None:
        return make_executor(scheduler=scheduler)
    return make_executor(size)


def records_markdown(records: Iterable[ClaimRecord]) -> str:
    """A markdown table of ClaimRecords: claim | setting | expected | rule | observed | 95% interval | seeds on the
    claimed side | convergence | verdict ("context" for a row that decides nothing; the overall verdict in bold)."""
    lines = ["| claim | setting | expected | rule | observed | 95% interval | seeds on side | convergence | verdict |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in records:
        verdict = verdict_text(r)
        seeds = r.seeds_text() if r.seeds_on_side is not None else ("-" if r.n_seeds is None else f"n = {r.n_seeds}")
        cells = [r.claim, r.setting, r.expected, r.rule or "-", r.observed, r.interval_text(), seeds,
                 r.convergence_text(), f"**{verdict}**" if r.setting == "overall" else verdict]
        lines.append("| " + " | ".join(c.replace("|", "/") for c in cells) + " |")
    return "\n".join(lines) + "\n"


def records_text(records: Iterable[ClaimRecord], *, width: int = 100) -> str:
    """The rows as a terminal shows them: per row a heading (claim, setting, verdict), then its expected outcome,
    rule, observed values, intervals, seeds on the claimed side and convergence, each wrapped to ``width``."""
    import textwrap

    out: list[str] = []
    for r in records:
        head = f"claim {r.claim} | {r.setting}"
        verdict = f"[{verdict_text(r)}]"
        out.append(head + " " * max(1, width - len(head) - len(verdict)) + verdict if len(head) + len(verdict) < width
                   else head + "\n  " + verdict)
        seeds = "; ".join(p for p in (r.seeds_text() + " seeds on the claimed side" if r.seeds_on_side is not None
                                      else "", r.convergence_text() if r.convergence_text() != "-" else "") if p)
        for label, text in (("expected", r.expected), ("rule", r.rule), ("observed", r.observed),
                            ("interval", r.interval_text() if r.interval else ""), ("seeds", seeds)):
            if text and text != "-":
                out.append(textwrap.fill(text, width=width, initial_indent=f"  {label + ':':<10}",
                                         subsequent_indent=" " * 12, break_on_hyphens=False))
    return "\n".join(out) + "\n"


def verdict_text(record: ClaimRecord) -> str:
    """The verdict of a row as tables show it: its Verdict's value, or "context" for a context row."""
    return "context" if record.verdict is None else record.verdict.value
