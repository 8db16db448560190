"""The claims stage of ``ncgeom reproduce``: each claim's sweep, then its evaluation into verdict rows.

For every claim of :data:`ncgeom.experiments.claims.CLAIMS` (theory.md section 9) the sweep of its
spec (``experiments/<spec>.toml``) runs into ``out/sweeps/<spec name>/`` at the reproduction scale
(:func:`ncgeom.experiments.sweep.run_sweep`: finished runs are skipped, so an interrupted stage
resumes), and :func:`ncgeom.experiments.claims.evaluate_claim` turns the finished runs into rows
(claim, setting, metric, expected, observed, verdict) written to ``out/claims/<id>.json``. A claim
whose file says ``"complete": true`` (no failed run) is skipped on the next call.

With several workers one process pool serves every claim (each claim's sweep is fed from its own
thread, as :func:`ncgeom.experiments.claims.run_claims` does), so the pool stays busy.

The internal ``tiny`` scale (tests only) shrinks each spec: at most two values per grid field (the first
and the last), 2 epochs, 16 samples per class, batch 64 (digits: 512) unless the batch size is swept, MLP width 32.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

from ncgeom.atomic_io import atomic_write_json, read_json
from ncgeom.reproduce.registry import FIGURES

__all__ = ["tiny_spec", "claim_figures", "run_claims"]

_TINY_BASE = {"epochs": 2, "samples_per_class": 16, "batch_size": 64, "hidden_dim": 32, "test_per_class": 10}


def tiny_spec(spec):
    """A copy of a SweepSpec whose ``quick`` scale is the tiny test scale (see module docstring)."""
    grids = tuple({k: (v if len(v) <= 2 else (v[0], v[-1])) for k, v in g.items()} for g in spec.grids_at("quick"))
    swept = {k for g in grids for k in g}
    over = {k: v for k, v in spec.scales.get("quick", {}).items() if k != "grid"}
    for key, value in _TINY_BASE.items():
        if key in swept:
            continue
        current = over.get(key, spec.base.get(key))
        if key == "epochs" or current is None or value < current:
            over[key] = value
    if "batch_size" in swept:  # keep the swept batch sizes feasible: enough samples for the largest
        over.pop("samples_per_class", None)
    elif spec.base.get("dataset") == "digits":  # about 1250 training images: few, large batches
        over["batch_size"] = 512
    over["grid"] = grids
    return dataclasses.replace(spec, scales={**spec.scales, "quick": over})


def claim_figures(claim_id: str) -> str:
    """Comma-separated names of the registered figures that bear on a claim."""
    return ", ".join(spec.name for spec in FIGURES if str(claim_id) in spec.claims)


def _claim_file(out: Path, claim_id: str) -> Path:
    return out / "claims" / f"{claim_id}.json"


def run_claims(out: Path, *, scale: str, workers: int, force: bool = False, log: Callable[[str], None] = print, claim_ids=None) -> dict:
    """Run and evaluate every pending claim into ``out`` (every claim with ``force``; finished runs are
    still skipped by the sweeps); return the stage summary."""
    from ncgeom.experiments.claims import CLAIMS, evaluate_claim, spec_path
    from ncgeom.experiments.sweep import load_spec

    out = Path(out)
    ids = list(CLAIMS) if claim_ids is None else [str(c) for c in claim_ids]
    atomic_write_json(out / "claims" / "index.json", ids)
    pending = []
    for cid in ids:
        path = _claim_file(out, cid)
        if path.exists() and not force:
            try:
                if read_json(path).get("complete"):
                    log(f"  claim {cid}: already evaluated, skipped")
                    continue
            except ValueError:
                pass
        pending.append(cid)
    specs = {}
    for cid in pending:
        spec = load_spec(spec_path(cid))
        specs[cid] = tiny_spec(spec) if scale == "tiny" else spec
    sweep_scale = "quick" if scale == "tiny" else scale
    results, errors = _run_sweeps(specs, out / "sweeps", sweep_scale, workers, log)
    failed = []
    for cid in pending:
        if cid not in results:
            failed.append(f"claim {cid}: {errors.get(cid, 'sweep did not run')}")
            continue
        result = results[cid]
        rows = [dict(r.to_dict(), figures=claim_figures(cid)) for r in evaluate_claim(cid, result)]
        bad = [f"{r.name}: {r.error}" for r in result.failed]
        record = {
            "claim": cid,
            "statement": CLAIMS[cid].statement,
            "spec": result.spec.name,
            "scale": scale,
            "sweep_dir": str(Path(result.out_dir).relative_to(out)) if Path(result.out_dir).is_relative_to(out) else result.out_dir,
            "runs": len(result.runs),
            "failed_runs": bad,
            "complete": not bad,
            "rows": rows,
        }
        atomic_write_json(_claim_file(out, cid), record)
        overall = next((r["verdict"] for r in rows if r.get("setting") == "overall"), rows[-1]["verdict"] if rows else "?")
        log(f"  claim {cid}: {overall} ({len(result.runs)} runs{', %d failed' % len(bad) if bad else ''})")
        if bad:
            failed.append(f"claim {cid}: {len(bad)} run(s) failed, first: {bad[0]}")
    summary: dict = {"evaluated": pending, "skipped": [c for c in ids if c not in pending]}
    if failed:
        summary["failed"] = failed
    return summary


def _run_sweeps(specs: dict, root: Path, scale: str, workers: int, log) -> tuple[dict, dict]:
    """Run each spec into ``root/<spec name>``: serially in this process (workers = 1) or on one shared pool."""
    from ncgeom.experiments.sweep import run_sweep

    results, errors = {}, {}
    if not specs:
        return results, errors
    if workers == 1:
        for cid, spec in specs.items():
            log(f"  claim {cid}: sweep {spec.name} ...")
            try:
                results[cid] = run_sweep(spec, root / spec.name, scale=scale, workers=1)
            except Exception as exc:  # recorded; the other claims still run
                errors[cid] = f"{exc.__class__.__name__}: {exc}"
        return results, errors
    import functools
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor

    from ncgeom.threads import limit_cpu_threads

    # one CPU thread per worker process: the workers are the parallelism (ncgeom.threads)
    pool = ProcessPoolExecutor(max_workers=workers, initializer=functools.partial(limit_cpu_threads, 1),
                               mp_context=multiprocessing.get_context("spawn"))
    try:
        with ThreadPoolExecutor(max_workers=len(specs)) as feeder:
            futures = {cid: feeder.submit(run_sweep, spec, root / spec.name, scale=scale, executor=pool) for cid, spec in specs.items()}
            for cid, fut in futures.items():
                try:
                    results[cid] = fut.result()
                except Exception as exc:
                    errors[cid] = f"{exc.__class__.__name__}: {exc}"
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    return results, errors
