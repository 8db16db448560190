"""``ncgeom sweep NAME|SPEC.toml --out DIR``: run a grid of configs in parallel, resumably.

Runs every config of the spec (base <- [tiny]/[quick]/[full] overrides <- grid) into DIR/<run name>/,
skipping finished runs, then writes DIR/summary.csv. NAME is a spec shipped with ncgeom (``--list``
shows them: one per claim of docs/theory.md, section 9, and the paper presets ``paper_*``, the real-data
claims with the authors' settings on CIFAR-100: a GPU and ``--data-dir`` with the data set); a path to a
TOML file works too.
``--workers N`` processes (default 1: in this process; at most the CPU count, 4 always allowed; no more than the
units of work left are started); ``--scheduler ADDRESS`` sends the runs to a Dask
distributed cluster instead (optional extra ncgeom[distributed]). ``--engine stacked`` (the default)
trains runs of equal shapes as stacks, one stack per task (ncgeom.runs.stacked); ``--engine
sequential`` one run per task. ``--device cuda`` trains every run on the GPU whatever the spec says
(docs/experiments.md, "Devices"; refused at once, exit 2, where CUDA is not available). For a shipped
claim spec, the claim's verdicts are printed and written to DIR/claim.json. ``--data-dir DIR`` is the folder of
every image run's data set, in place of the spec's (``data``).

One writer per DIR: a second ``ncgeom sweep`` (or ``ncgeom reproduce``) into the same folder is refused
with the pid of the one writing it, or waits for it with ``--wait`` (ncgeom.locking). A finished run is
skipped only if its files are whole; a damaged one is rerun and named on stderr. SIGINT (Ctrl-C) and
SIGTERM stop cleanly: queued runs are cancelled, the workers stopped, finished runs kept, and one line
says how many runs finished. Exit codes: 0 all runs finished, 1 some run failed, 2 bad input or DIR
busy, 130 interrupted by SIGINT, 143 by SIGTERM.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import sys
from pathlib import Path

from ncgeom.atomic_io import dumps_json
from ncgeom.campaigns.claims import ClaimRecord, ClaimResult, claim_of_spec, evaluate_claim, records_text
from ncgeom.campaigns.executors import make_executor
from ncgeom.campaigns.plan import check_backends, check_data_dirs, check_devices, sweep_configs
from ncgeom.campaigns.spec import load_spec, spec_names
from ncgeom.campaigns.sweep import count_finished, run_sweep
from ncgeom.interrupts import Interrupted, raise_on_signals
from ncgeom.locking import FolderLock, folder_lock, prepare_folder
from ncgeom.threads import limit_cpu_threads, require_workers
from ncgeom.validate import require_choice, require_int
from ncgeom.vocabulary import (
    DEFAULT_ENGINE,
    ENGINE_ALIASES,
    ENGINES,
    SCALES,
    SEED_SETS,
    Engine,
    device_type,
    engine_name,
)

__all__ = ["register", "add_wait_options", "add_engine_option", "engine_option", "add_device_option", "check_device_option",
           "wait_seconds", "note_takeover"]


def register(subparsers) -> None:
    parser = subparsers.add_parser("sweep", help="run a grid of training configs from a shipped or TOML spec",
                                   description=__doc__.split("\n\n")[0])
    parser.add_argument("spec", metavar="SPEC", nargs="?", help="shipped spec name (see --list) or TOML file (docs/experiments.md)")
    parser.add_argument("--list", action="store_true", help="list the shipped specs and exit")
    parser.add_argument("--out", metavar="DIR", help="output folder (one directory per run)")
    parser.add_argument("--scale", default="quick", help=f"{', '.join(SCALES)} [quick]")
    parser.add_argument("--seeds", default="confirmatory", metavar="SET",
                        help=f"{' or '.join(SEED_SETS)}: the spec's seed set to train (docs/experiments.md, 'Specs'; "
                             "verdicts are reported on the confirmatory seeds) [confirmatory]")
    parser.add_argument("--workers", type=int, default=1, metavar="N",
                        help="worker processes, at most the CPU count (at least 4 allowed); one per unit of work "
                             "at most [1]")
    parser.add_argument("--scheduler", metavar="ADDRESS", default=None, help="Dask scheduler address (tcp://host:port)")
    add_engine_option(parser)
    add_device_option(parser)
    parser.add_argument("--data-dir", default=None, metavar="DIR",
                        help="the folder of the image data set of every image run (the paper_* presets), in place "
                             "of the spec's [the spec's: data]")
    parser.add_argument("--json", action="store_true", help="print the run list (and verdicts) as JSON")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    add_wait_options(parser)
    parser.set_defaults(func=_handler)


def add_wait_options(parser: argparse.ArgumentParser) -> None:
    """``--wait`` and ``--wait-timeout``: what to do when another process writes the output folder."""
    parser.add_argument("--wait", action="store_true",
                        help="if another ncgeom process is writing DIR, wait for it to finish (default: refuse, exit 2)")
    parser.add_argument("--wait-timeout", type=float, default=None, metavar="SECONDS",
                        help="wait at most SECONDS for DIR (implies --wait; then refuse, exit 2)")


def add_engine_option(parser: argparse.ArgumentParser) -> None:
    """``--engine stacked|sequential``: how the runs are trained (ncgeom.vocabulary.ENGINES)."""
    parser.add_argument("--engine", default=DEFAULT_ENGINE, metavar="NAME",
                        help=f"{' or '.join(ENGINES)}: runs of equal shapes trained as stacks, one stack per "
                             f"worker task, or one run per task [{DEFAULT_ENGINE}]")



def engine_option(value: str) -> Engine:
    """The engine ``--engine`` names (ncgeom.vocabulary.ENGINES); its earlier spelling "batched" is taken with a
    one-line note on stderr (the name goes in the next release, CHANGELOG.md); anything else is a ValueError."""
    if value in ENGINE_ALIASES:
        new = ENGINE_ALIASES[value]
        print(f"note: --engine {value} is now called {new}; the old name will be removed in the next release",
              file=sys.stderr)
        return new
    return engine_name(value, name="--engine")

def add_device_option(parser: argparse.ArgumentParser) -> None:
    """``--device cpu|cuda|cuda:N``: the device of every training run, in place of each config's own."""
    parser.add_argument("--device", default=None, metavar="DEVICE",
                        help="train every run on DEVICE: cpu, cuda or cuda:N, whatever the spec says "
                             "(docs/experiments.md, 'Devices') [each config's device: cpu]")


def check_device_option(device: str | None) -> None:
    """``--device``, when given, names a device that exists here: ValueError naming --device (exit 2) otherwise."""
    if device is not None:
        device_type(device, name="--device")
        check_devices([device])


def wait_seconds(args: argparse.Namespace) -> float:
    """The lock wait of ``--wait`` / ``--wait-timeout``: 0 (refuse at once), SECONDS, or math.inf."""
    if args.wait_timeout is not None:
        if not (math.isfinite(args.wait_timeout) and args.wait_timeout >= 0):
            raise ValueError(f"--wait-timeout must be a finite number of seconds >= 0, got {args.wait_timeout!r}")
        return float(args.wait_timeout)
    return math.inf if args.wait else 0.0


def note_takeover(prog: str, lock: FolderLock) -> None:
    """One stderr line when the lock file still named a writer that was killed (its lock died with it)."""
    if lock.previous is not None:
        print(f"{prog}: note: {lock.folder} was left by pid {lock.previous['pid']} "
              f"(started {lock.previous.get('started', '?')}), which stopped without finishing; resuming",
              file=sys.stderr)


def _handler(args: argparse.Namespace) -> int:
    if args.list:
        for name in spec_names():
            spec = load_spec(name)
            print(f"{name}: claim {spec.claim}; " + " ".join(spec.description.split())[:100])
        return 0
    if args.spec is None or args.out is None:
        raise ValueError("give a spec (a shipped name or a TOML file) and --out DIR, or --list")
    require_choice("scale", args.scale, SCALES)
    seeds = require_choice("--seeds", args.seeds, SEED_SETS)
    if args.scheduler is None:  # worker processes of this machine: at most its CPUs (ncgeom.threads.max_workers)
        require_workers("--workers", args.workers)
    else:  # a Dask cluster's workers are its own; --workers only sizes the stacks
        require_int("--workers", args.workers, min_value=1)
    engine = engine_option(args.engine)
    check_device_option(args.device)
    wait = wait_seconds(args)
    spec = load_spec(args.spec)  # every config validated before anything runs
    configs = sweep_configs(spec, scale=args.scale, seeds=seeds, device=args.device, data_dir=args.data_dir)
    check_devices(c.device for c in configs)  # the spec's own devices and data folders too, before --out is made
    check_backends(configs)
    check_data_dirs(c.data_dir for c in configs if c.is_image)
    progress = not args.quiet and sys.stderr.isatty()
    if args.workers == 1 and args.scheduler is None:
        limit_cpu_threads(1)  # the runs go in this process: one thread, as in a worker (ncgeom.threads)
    with raise_on_signals():
        try:
            # the lock outside the executor: released only after the workers are stopped
            with folder_lock(prepare_folder(args.out, what="--out"), wait=wait) as lock:
                note_takeover("ncgeom sweep", lock)
                # a Dask cluster, or none: run_sweep then starts its own pool, one worker per unit of work at most
                # (up to --workers), and retries once in a fresh pool the units of a worker that died
                cluster = make_executor(scheduler=args.scheduler) if args.scheduler else contextlib.nullcontext(None)
                with cluster as ex:
                    result = run_sweep(spec, args.out, scale=args.scale, workers=args.workers, executor=ex,
                                       engine=engine, progress=progress, device=args.device,
                                       data_dir=args.data_dir, seeds=seeds)
                return _report(args, spec, result)
        except Interrupted as stop:
            done, total = count_finished(spec, args.out, scale=args.scale, device=args.device,
                                         data_dir=args.data_dir, seeds=seeds)
            print(f"ncgeom sweep: interrupted by {stop.name}: {done} of {total} runs finished; "
                  "rerun the same command to resume", file=sys.stderr)
            return stop.exit_code


def _report(args: argparse.Namespace, spec, result) -> int:
    records: tuple[ClaimRecord, ...] = ()
    claim = claim_of_spec(spec)
    if claim is not None:
        records = evaluate_claim(claim.id, result)
        failed = tuple(f"{r.name}: {r.error}" for r in result.failed)
        ClaimResult(claim.id, claim.statement, spec.name, result.scale, len(result.runs), failed, None, records,
                    result.seeds, claim.explored).write(Path(args.out) / "claim.json")
    done = sum(r.status != "failed" for r in result.runs)
    for r in result.invalid:
        print(f"ncgeom sweep: note: run {r.name} had a summary.json but {r.invalid}; rerun", file=sys.stderr)
    if args.json:
        print(dumps_json({"runs": [{"name": r.name, "status": r.status, "skipped": r.skipped, "error": r.error,
                                    "invalid": r.invalid} for r in result.runs], "table": result.table_path,
                          "verdicts": [r.to_dict() for r in records]}, indent=1))
    else:
        skipped = sum(r.skipped for r in result.runs)
        damaged = f", {len(result.invalid)} damaged and rerun" if result.invalid else ""
        print(f"{spec.name}: {done}/{len(result.runs)} runs finished ({skipped} already done{damaged}); "
              f"table: {result.table_path}")
        if records:
            print(f"claim {claim.id if claim else '?'} on the {result.seeds} seeds:\n" + records_text(records), end="")
    for r in result.failed:
        print(f"ncgeom sweep: error: run {r.name} failed: {r.error}", file=sys.stderr)
    return 1 if result.failed else 0
