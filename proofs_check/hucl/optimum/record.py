"""The HUCL-optimum record: one owner type for ``hucl_optimum.json`` (the data of fig_hucl_optimum and docs).

:func:`compute_optimum` runs, for each case (C, d, k, tau) of :func:`cases`:

- the local thresholds of NC among n points per class (``proofs_check.hucl.optimum.split``) and their interval
  certificate;
- the path of the best configuration along beta over n points per class and over collapsed classes alone
  (``proofs_check.hucl.optimum.path``, numerical), with every change refined and classified;
- for C = 3, d = 2: the certified global minimum over collapsed configurations at every grid beta and a certified
  bracket of every first-order change of the collapsed path (``proofs_check.hucl.optimum.certify``, interval branch
  and bound: evidence "exact"); for C = 4, d = 3 (k = 1, tau = 1) the same attempted at beta in {1, 2, 5, 10, 30} with
  a box budget, the lower bound reached recorded when it does not close;
- per (C, k, tau), the collision-aware bound B(beta) on the grid and, certified, at :data:`BOUND_CERTIFIED_BETAS`
  (``proofs_check.hucl.optimum.bound``).

:class:`HUCLOptimumRecord` holds it; ``to_dict`` / ``from_dict`` (unknown keys rejected) and :func:`write_optimum` /
:func:`read_optimum` (strict JSON, atomic) are the only way the file is written and read. :func:`doc_numbers` prints
the numbers docs/results.md quotes. ``python -m proofs_check.hucl.optimum.record --out FILE [--quick]`` computes
and writes it (``--only i,j`` a partial record, ``--bounds-only`` the bound rows, ``--assemble`` joins them: the
full record in parallel processes). The full record is shipped in the package (:data:`STORED_RECORD`, read by
:func:`stored_record`): it takes hours on a 2-core machine (its ``seconds`` say how long each part took), so a
reproduction, quick or full, reads it rather than recomputing it.

Source: docs/theory.md, section 4 ("HUCL: an open problem" and "The HUCL optimum along beta").
"""

from __future__ import annotations

import argparse
import importlib.resources
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import numpy as np

from ncgeom.atomic_io import atomic_write_json, jsonable, read_json
from ncgeom.provenance import provenance
from ncgeom.theory import nc_value
from ncgeom.validate import require_keys
from proofs_check.hucl.optimum.bound import lagrangian_bound
from proofs_check.hucl.optimum.certify import certify_minimum, certify_switch, parameters_of
from proofs_check.hucl.optimum.path import BETA_GRID, OptimumPath, optimum_path, point_summary
from proofs_check.hucl.optimum.split import certify_threshold, local_thresholds

__all__ = ["SCHEMA", "CASE_KEYS", "BOUND_CERTIFIED_BETAS", "C4_CERTIFIED_BETAS", "QUICK_BETAS", "HUCLOptimumRecord",
           "cases", "compute_case", "compute_bounds", "compute_optimum", "assemble", "theory_data", "write_optimum",
           "read_optimum", "doc_numbers", "STORED_RECORD", "stored_record"]

SCHEMA = "hucl_optimum/1"
BOUND_CERTIFIED_BETAS: tuple[float, ...] = (0.0, 1.0, 2.0, 5.0, 10.0, 30.0)
C4_CERTIFIED_BETAS: tuple[float, ...] = (1.0, 2.0, 5.0, 10.0, 30.0)
QUICK_BETAS: tuple[float, ...] = (0.0, 1.0, 2.0, 5.0)
REFINE_TOL = 1e-2  # bisection width of the changes along beta (the certified switch brackets are much tighter)
CERTIFY_EPS = 1e-7  # the stated epsilon of the certified minima (upper - lower <= CERTIFY_EPS)
C4_MAX_BOXES = 60_000
CASE_KEYS: tuple[str, ...] = ("num_classes", "dim", "num_negatives", "tau", "psi", "per_class", "local", "path",
                              "collapsed_path", "certified", "switches", "seconds")


@dataclass(frozen=True)
class HUCLOptimumRecord:
    """The record (module docstring): ``cases`` one dict per (C, d, k, tau) with the keys of :data:`CASE_KEYS`,
    ``bounds`` one dict per (C, k, tau) and beta; ``settings`` the grids and tolerances; ``seconds`` the wall time."""

    schema: str
    quick: bool
    settings: dict[str, Any]
    cases: tuple[dict[str, Any], ...]
    bounds: tuple[dict[str, Any], ...]
    seconds: float
    provenance: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> HUCLOptimumRecord:
        """The inverse of :meth:`to_dict`; an unknown or missing key (top level or a case) raises ValueError."""
        names = [f.name for f in fields(cls)]
        require_keys("hucl optimum record", data, accepted=names, required=names)
        if data["schema"] != SCHEMA:
            raise ValueError(f"hucl optimum record: schema must be {SCHEMA!r}, got {data['schema']!r}")
        for case in data["cases"]:
            require_keys("hucl optimum case", case, accepted=CASE_KEYS, required=CASE_KEYS)
        return cls(data["schema"], bool(data["quick"]), dict(data["settings"]), tuple(data["cases"]),
                   tuple(data["bounds"]), float(data["seconds"]), dict(data["provenance"]))


def cases(*, quick: bool) -> list[tuple[int, int, int, float, tuple[int, ...]]]:
    """(C, d, k, tau, n values) of every case.

    quick: C = 3, d = 2, k = 1, tau = 1, n in {1, 2}. full (what the shared 2-core machine affords): C = 3, d = 2 with
    (k, tau) in {1, 4} x {1, 0.5} (n in {1, 2, 3} for k = 1, tau = 1, else {1, 2}; all certified); C = 3, d = 3 and
    C = 4, d in {3, 4} with k = 1, tau = 1, n in {1, 2}; C in {5, 6}, d = C - 1, collapsed only (n = 1).
    """
    if quick:
        return [(3, 2, 1, 1.0, (1, 2))]
    out: list[tuple[int, int, int, float, tuple[int, ...]]] = [
        (3, 2, k, tau, (1, 2, 3) if (k, tau) == (1, 1.0) else (1, 2)) for k, tau in ((1, 1.0), (1, 0.5), (4, 1.0), (4, 0.5))]
    out += [(3, 3, 1, 1.0, (1, 2)), (4, 3, 1, 1.0, (1, 2)), (4, 4, 1, 1.0, (1, 2)), (5, 4, 1, 1.0, (1,)),
            (6, 5, 1, 1.0, (1,))]
    return out


def _path_summary(path: OptimumPath) -> dict[str, Any]:
    return {"per_class": list(path.per_class), "num_random": path.num_random, "refine_tol": path.refine_tol,
            "seed": path.seed, "points": [point_summary(p) for p in path.points],
            "changes": [{"bracket": list(ch.bracket), "before": ch.before, "after": ch.after, "kind": ch.kind,
                         "jump": ch.jump, "before_point": point_summary(ch.before_point),
                         "after_point": point_summary(ch.after_point)} for ch in path.changes]}


def _certificate_summary(cert) -> dict[str, Any]:
    b = cert.bnb
    return {"beta": cert.beta, "closed": b.closed, "lower": b.lower, "upper": b.upper, "eps": b.eps,
            "best_parameters": list(b.best), "best_gram": [list(r) for r in cert.best_gram], "num_settled": b.num_settled,
            "settled_hull": [list(x) for x in b.settled_hull], "evaluated": b.evaluated, "max_queue": b.max_queue,
            "iterations": b.iterations, "seconds": b.seconds, "reason": b.reason}


def compute_case(num_classes: int, dim: int, num_negatives: int, tau: float, per_class: Sequence[int], *,
                 betas: Sequence[float], num_random: int, seed: int = 0, certify: bool = True,
                 refine_tol: float = REFINE_TOL, log: Callable[[str], None] = print) -> dict[str, Any]:
    """One case of the record (module docstring)."""
    t0 = time.perf_counter()
    c, d, k = num_classes, dim, num_negatives
    loc = local_thresholds(num_classes=c, dim=d, tau=tau, num_negatives=k)
    local = loc.to_dict()
    local["certificate"] = (certify_threshold(num_classes=c, dim=d, beta=loc.beta, tau=tau, num_negatives=k)
                            if loc.beta is not None else None)
    log(f"  C={c} d={d} k={k} tau={tau:g}: local thresholds {loc.per_block} ({time.perf_counter() - t0:.0f} s)")
    collapsed = optimum_path(num_classes=c, dim=d, tau=tau, num_negatives=k, per_class=(1,), betas=betas,
                             num_random=num_random, seed=seed, refine_tol=refine_tol)
    log(f"  collapsed path: {len(collapsed.changes)} change(s) ({time.perf_counter() - t0:.0f} s)")
    full = (collapsed if tuple(per_class) == (1,) else
            optimum_path(num_classes=c, dim=d, tau=tau, num_negatives=k, per_class=tuple(per_class), betas=betas,
                         num_random=num_random, seed=seed + 1, refine_tol=refine_tol))
    log(f"  path over n in {tuple(per_class)}: {len(full.changes)} change(s) ({time.perf_counter() - t0:.0f} s)")
    certified: list[dict[str, Any]] = []
    switches: list[dict[str, Any]] = []
    if certify and (c, d) == (3, 2):
        for point in collapsed.points:
            start = parameters_of("C3_d2", np.asarray(point.best.pattern.class_gram))
            cert = certify_minimum("C3_d2", beta=point.beta, tau=tau, num_negatives=k, eps=CERTIFY_EPS, starts=[start])
            certified.append(_certificate_summary(cert))
        for ch in collapsed.changes:
            if ch.kind != "first-order":
                continue
            sw = certify_switch("C3_d2", before_gram=np.asarray(ch.before_point.best.pattern.class_gram),
                                after_gram=np.asarray(ch.after_point.best.pattern.class_gram), bracket=ch.bracket,
                                tau=tau, num_negatives=k)
            switches.append({"search_bracket": list(ch.bracket), "before": ch.before, "after": ch.after, **sw})
        log(f"  certified {sum(x['closed'] for x in certified)}/{len(certified)} minima, "
            f"{sum(s['certified'] for s in switches)}/{len(switches)} switches ({time.perf_counter() - t0:.0f} s)")
    elif certify and (c, d, k, tau) == (4, 3, 1, 1.0):
        by_beta = {p.beta: p for p in collapsed.points}
        for beta in C4_CERTIFIED_BETAS:
            found_point = by_beta.get(beta)
            starts = [] if found_point is None else [parameters_of("C4_d3", np.asarray(found_point.best.pattern.class_gram))]
            cert = certify_minimum("C4_d3", beta=beta, tau=tau, num_negatives=k, eps=1e-6, starts=starts,
                                   max_boxes=C4_MAX_BOXES)
            certified.append(_certificate_summary(cert))
            log(f"  C4_d3 beta={beta:g}: closed={cert.closed} lower={cert.bnb.lower:.6f} upper={cert.bnb.upper:.6f} "
                f"({cert.bnb.seconds:.0f} s)")
    return {"num_classes": c, "dim": d, "num_negatives": k, "tau": tau, "psi": "infonce", "per_class": list(per_class),
            "local": local, "path": _path_summary(full), "collapsed_path": _path_summary(collapsed),
            "certified": certified, "switches": switches, "seconds": time.perf_counter() - t0}


def _bounds(num_classes: int, num_negatives: int, tau: float, *, betas: Sequence[float], certified_betas: Sequence[float],
            log: Callable[[str], None]) -> list[dict[str, Any]]:
    out = []
    for beta in betas:
        certify = beta in certified_betas
        b = lagrangian_bound(num_classes=num_classes, beta=beta, tau=tau, num_negatives=num_negatives, certify=certify)
        out.append({"num_classes": num_classes, "num_negatives": num_negatives, "tau": tau, "psi": "infonce",
                    "beta": beta, "value": b.value, "nu": b.nu, "row": list(b.row), "rho": b.rho,
                    "attained_by": b.attained_by, "attained_value": b.attained_value, "theorem13": b.theorem13,
                    "nc_value": nc_value("hucl", "infonce", num_classes=num_classes, num_negatives=num_negatives,
                                         beta=beta, tau=tau),
                    "certified_lower": b.certified_lower,
                    "certified_closed": None if b.certified is None else b.certified.closed,
                    "certified_seconds": None if b.certified is None else b.certified.seconds})
    log(f"  bound C={num_classes} k={num_negatives} tau={tau:g}: {len(out)} betas")
    return out


def _settings(*, quick: bool, seed: int) -> dict[str, Any]:
    betas = QUICK_BETAS if quick else BETA_GRID
    return {"betas": list(betas), "num_random": 4, "refine_tol": REFINE_TOL, "seed": seed, "certify_eps": CERTIFY_EPS,
            "bound_certified_betas": list(BOUND_CERTIFIED_BETAS), "c4_certified_betas": list(C4_CERTIFIED_BETAS),
            "c4_max_boxes": C4_MAX_BOXES, "psi": "infonce"}


def compute_bounds(*, quick: bool, log: Callable[[str], None] = print) -> list[dict[str, Any]]:
    """The bound rows of the record: every (C, k, tau) of :func:`cases` on the record's beta grid."""
    betas = QUICK_BETAS if quick else BETA_GRID
    bounds: list[dict[str, Any]] = []
    for c, k, tau in sorted({(c, k, tau) for c, _, k, tau, _ in cases(quick=quick)}):
        certified = [b for b in BOUND_CERTIFIED_BETAS if b in betas] if c <= 4 else []
        bounds += _bounds(c, k, tau, betas=betas, certified_betas=certified, log=log)
    return bounds


def compute_optimum(*, quick: bool, seed: int = 0, log: Callable[[str], None] = print,
                    only: Sequence[int] | None = None) -> HUCLOptimumRecord:
    """Compute the record (module docstring); quick: one case on :data:`QUICK_BETAS` (tens of seconds).

    ``only``: indices into :func:`cases` to compute (the others are left out; :func:`assemble` joins partial records
    computed in separate processes), and then no bounds (``compute_bounds`` gives them).
    """
    t0 = time.perf_counter()
    settings = _settings(quick=quick, seed=seed)
    chosen = list(enumerate(cases(quick=quick)))
    if only is not None:
        chosen = [(i, x) for i, x in chosen if i in set(only)]
    out_cases = [compute_case(c, d, k, tau, ns, betas=settings["betas"], num_random=settings["num_random"], seed=seed,
                              log=log) for _, (c, d, k, tau, ns) in chosen]
    bounds = compute_bounds(quick=quick, log=log) if only is None else []
    return HUCLOptimumRecord(SCHEMA, quick, settings, tuple(out_cases), tuple(bounds), time.perf_counter() - t0,
                             _portable(provenance()))


def assemble(parts: Sequence[HUCLOptimumRecord], bounds: Sequence[dict[str, Any]]) -> HUCLOptimumRecord:
    """One record from partial ones (the same settings; cases in the order of :func:`cases`) and the bound rows;
    ``seconds`` is the sum of the parts' (CPU-bound processes: the compute time, not the wall time)."""
    if not parts:
        raise ValueError("parts must hold at least one partial record")
    if any(p.settings != parts[0].settings or p.quick != parts[0].quick for p in parts):
        raise ValueError("parts must share quick and settings")
    order = {(c, d, k, tau): i for i, (c, d, k, tau, _) in enumerate(cases(quick=parts[0].quick))}
    all_cases = sorted((x for p in parts for x in p.cases),
                       key=lambda x: order[(x["num_classes"], x["dim"], x["num_negatives"], x["tau"])])
    return HUCLOptimumRecord(SCHEMA, parts[0].quick, parts[0].settings, tuple(all_cases), tuple(bounds),
                             sum(p.seconds for p in parts), {**_portable(parts[0].provenance), "assembled_from": len(parts)})


#: The full record shipped with the package (computed with the parallel CLI of the module docstring; its provenance
#: names the commit and the machine).
STORED_RECORD = "stored.json"


def stored_record() -> HUCLOptimumRecord:
    """The full record shipped in this package (:data:`STORED_RECORD`), read through :func:`read_optimum`'s type."""
    text = (importlib.resources.files("proofs_check.hucl.optimum") / STORED_RECORD).read_text(encoding="utf-8")
    return HUCLOptimumRecord.from_dict(json.loads(text))


def theory_data() -> dict[str, Any]:
    """The theory JSON ``hucl_optimum.json`` of the reproduction's theory stage (the data of fig_hucl_optimum): the
    full record shipped with the package (:func:`stored_record`), checked by its type and its ``quick`` flag, at
    every scale of a reproduction. Recomputing it takes hours of wall time on a 2-core machine (the module
    docstring's CLI; ``--quick`` a reduced record in about a minute); ``ncgeom verify`` rechecks its certificates."""
    record = stored_record()
    if record.quick:
        raise ValueError(f"proofs_check/hucl/optimum/{STORED_RECORD}: a quick record where the full one belongs")
    return jsonable(record.to_dict())


def _portable(prov: dict[str, Any]) -> dict[str, Any]:
    """Provenance with the script's absolute path reduced to its module (the record is kept in the repository)."""
    argv = [Path(a).stem if a.endswith(".py") and Path(a).is_absolute() else a for a in prov.get("argv", [])]
    return {**prov, "argv": argv}


def write_optimum(path: str | Path, record: HUCLOptimumRecord) -> Path:
    """Write the record as strict JSON, atomically."""
    return atomic_write_json(path, record.to_dict())


def read_optimum(path: str | Path) -> HUCLOptimumRecord:
    """Read a record written by :func:`write_optimum` (unknown keys rejected)."""
    return HUCLOptimumRecord.from_dict(read_json(path))


def doc_numbers(record: HUCLOptimumRecord) -> list[str]:
    """The lines of numbers docs/results.md quotes, each from ``record`` (run ``python -m
    proofs_check.hucl.optimum.record --print FILE``)."""
    lines = [f"record: {'quick' if record.quick else 'full'}, {record.seconds:.0f} s, commit "
             f"{record.provenance.get('git_commit')}"]
    for case in record.cases:
        head = f"C={case['num_classes']} d={case['dim']} k={case['num_negatives']} tau={case['tau']:g}"
        loc = case["local"]
        cert = loc.get("certificate") or {}
        lines.append(f"{head}: local thresholds " + ", ".join(
            f"{b} {v:.6f}" for b, v in loc["per_block"].items() if v is not None)
            + f"; first {loc['block']} (certified: {cert.get('certified')})")
        for name in ("collapsed_path", "path"):
            for ch in case[name]["changes"]:
                lines.append(f"{head} {name}: [{ch['bracket'][0]:.4f}, {ch['bracket'][1]:.4f}] {ch['kind']} "
                             f"(jump {ch['jump']:.3g}): {ch['before']} -> {ch['after']}")
        bound = {b["beta"]: b for b in record.bounds if (b["num_classes"], b["num_negatives"], b["tau"])
                 == (case["num_classes"], case["num_negatives"], case["tau"])}
        certified = {x["beta"]: x for x in case["certified"] if x["closed"]}
        for p in case["path"]["points"]:
            if p["beta"] in (1.0, 2.0, 5.0, 10.0, 30.0, 50.0):
                b = bound.get(p["beta"])
                cert = certified.get(p["beta"])
                lines.append(
                    f"{head} beta={p['beta']:g}: best {p['value']:.6f} (n={p['per_class']}, {p['pattern']}), "
                    f"NC {p['nc_value']:.6f}, NC - best {p['nc_value'] - p['value']:.6f}"
                    + ("" if b is None else f", B {b['value']:.6f}, best - B {p['value'] - b['value']:.6f}, "
                       f"best - Thm1+3 {p['value'] - b['theorem13']:.6f}")
                    + ("" if cert is None else f", certified [{cert['lower']:.8f}, {cert['upper']:.8f}]"))
        if case["certified"]:
            closed = [x for x in case["certified"] if x["closed"]]
            lines.append(f"{head} certified: {len(closed)}/{len(case['certified'])} closed, eps "
                         f"{max(x['eps'] for x in case['certified']):g}, "
                         f"{sum(x['seconds'] for x in case['certified']):.0f} s")
            for x in case["certified"]:
                if not x["closed"]:
                    lines.append(f"  beta={x['beta']:g}: not closed, lower {x['lower']:.6f}, upper {x['upper']:.6f}: "
                                 f"{x['reason']}")
        for sw in case["switches"]:
            lines.append(f"{head} switch certified={sw['certified']}: [{sw['bracket'][0]:.6f}, {sw['bracket'][1]:.6f}] "
                         f"{sw['before']} -> {sw['after']}")
    for b in record.bounds:
        if b["beta"] in (0.0, 1.0, 2.0, 5.0, 10.0, 30.0):
            lines.append(f"bound C={b['num_classes']} k={b['num_negatives']} tau={b['tau']:g} beta={b['beta']:g}: "
                         f"B={b['value']:.6f} (certified >= {b['certified_lower']}), Thm1+3 {b['theorem13']:.6f}, "
                         f"NC {b['nc_value']:.6f}, attained by {b['attained_by']}")
    return lines


def _cli() -> None:  # pragma: no cover - manual: python -m proofs_check.hucl.optimum.record
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", help="write the record here (JSON)")
    parser.add_argument("--quick", action="store_true", help="one case, four betas")
    parser.add_argument("--only", help="comma-separated indices into cases(): a partial record, no bounds")
    parser.add_argument("--bounds-only", action="store_true", help="write only the bound rows (a JSON list)")
    parser.add_argument("--assemble", nargs="+", help="partial records to join; with --bounds FILE")
    parser.add_argument("--bounds", help="the bound rows (from --bounds-only) for --assemble")
    parser.add_argument("--print", dest="show", help="print the doc numbers of an existing record and exit")
    args = parser.parse_args()
    if args.show:
        print("\n".join(doc_numbers(read_optimum(args.show))))
        return
    log = lambda m: print(f"[{time.strftime('%H:%M:%S')}] {m}", flush=True)  # noqa: E731
    if args.bounds_only:
        atomic_write_json(args.out, compute_bounds(quick=args.quick, log=log))
        return
    if args.assemble:
        record = assemble([read_optimum(p) for p in args.assemble], read_json(args.bounds) if args.bounds else [])
    else:
        only = None if args.only is None else [int(x) for x in args.only.split(",")]
        record = compute_optimum(quick=args.quick, log=log, only=only)
    if args.out:
        write_optimum(args.out, record)
    print("\n".join(doc_numbers(record)))


if __name__ == "__main__":  # pragma: no cover
    _cli()
