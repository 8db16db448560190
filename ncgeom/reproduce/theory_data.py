"""Data of the theory figures, computed once by the pipeline and saved as JSON under ``<out>/theory/``.

- ``nc_values.json``: closed-form population loss at NC vs beta for SCL, HSCL, UCL, HUCL and the
  collision probability pi_beta (docs/theory.md, sections 4-5; :func:`ncgeom.theory.nc_value`).
- ``harris_gap.json``: L_HSCL - L_SCL and L_HUCL - L_UCL for random finite latent models vs beta
  (docs/theory.md, Theorem 1; :func:`ncgeom.population.population_loss`, exact method).
- ``certificates.json``: convex-certificate optimum vs closed form (docs/theory.md, section 6;
  proofs_check.certificates).
- ``hucl_exploration.json``: the numerical exploration of the HUCL minimum vs beta at the (C, d) of the
  claim-3 runs (docs/theory.md, section 4, "HUCL: an open problem"; proofs_check.hucl).
- ``hucl_thresholds.json``: the HUCL thresholds by dimension, beta_loc(C, d) and beta_sw(C, d), with the
  smallest Hessian eigenvalue at NC vs beta, and the thresholds of the claim-3 batch objective
  (docs/results.md, "HUCL thresholds by dimension"; proofs_check.hucl).
- ``hucl_optimum.json``: the HUCL optimal geometry along beta (certified minima for C = 3, d = 2, the optimum's
  path, the collision-aware bound; docs/results.md, "HUCL optimal geometry along beta"): the full record shipped
  with proofs_check (:func:`proofs_check.hucl.optimum.record.theory_data`; hours of CPU to recompute), at the
  quick and full scales; not at the test scale.
- ``ablations.json``: ``{"ablations": [record, ...], "errors": [...], "quick", "cases"}``, the records of the
  hypothesis-ablation registry (:func:`proofs_check.ablations.run_ablations`; records:
  :meth:`proofs_check.ablations.AblationResult.to_dict`; docs/verify.md, "Ablations"), one error line per case
  that raised (the same text as ``ncgeom verify --ablations``; the other cases still run). Computed by
  :func:`ablation_data`.
- ``ablation_<case>.json``: the table behind the records of each case module that exposes
  ``ablations_with_table(*, quick) -> (records, table)``, from the same search as its records (the data of
  ``fig_ablation_<case>``): ``ablation_dimension.json``, the best configuration of C class means in d < C - 1
  dimensions and its gap to the ETF bound, per setting, C and d (docs/results.md, "Below C - 1 dimensions and
  dependent positives"; proofs_check.ablations.dimension); ``ablation_imbalance.json``, the best collapsed
  configuration under the prior (r, 1, ..., 1)/(r + C - 1) vs r, its gap to the ETF and the minority-merge ratio
  (docs/results.md, "Imbalanced classes"; proofs_check.ablations.imbalance).

Each file is computed only if absent (resumable; ``ablations.json`` also when it lists errors) and written
atomically. Figure scripts read these files and never recompute them.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from ncgeom.atomic_io import atomic_write_json, read_json
from ncgeom.population import FiniteLatentModel, population_loss
from ncgeom.reproduce.scales import ScaleParameters
from ncgeom.theory import collision_probability, nc_value
from ncgeom.vocabulary import SETTINGS, PsiName, hard_setting
from proofs_check.ablations import CASES, AblationResult, load_case, run_ablations
from proofs_check.hucl import check_hucl, check_threshold_table
from proofs_check.hucl.batch import batch_thresholds
from proofs_check.hucl.checkers import TAU, claim3_geometry
from proofs_check.hucl.jets import blocks_for, reduced_curvature
from proofs_check.hucl.optimum import record as optimum_record
from proofs_check.records import CheckResult

__all__ = [
    "nc_value_curves",
    "harris_gaps",
    "certificate_table",
    "hucl_exploration",
    "hucl_thresholds",
    "ablation_data",
    "compute_all",
    "THEORY_FILES",
    "NOT_AT_TINY",
    "ABLATIONS",
]

HUCL_CURVE_BETAS: tuple[float, ...] = tuple(round(0.05 * i, 10) for i in range(61))  # 0..3: every threshold is below 2.4
#: Theory files, and ablation cases ``ablation_<case>`` (:data:`proofs_check.ablations.CASES`), not computed at the
#: test scale (7-40 s of CPU each even in their quick form); their figures then report "no data" (fig_<name>).
NOT_AT_TINY: tuple[str, ...] = ("ablation_imbalance", "ablation_positives", "ablation_negatives", "hucl_optimum")
#: The file of the ablation records (``theory/ablations.json``).
ABLATIONS = "ablations"
THEORY_FILES: tuple[str, ...] = (
    "nc_values", "harris_gap", "certificates", "hucl_exploration", "hucl_thresholds", "ablation_dimension",
    "ablation_imbalance", ABLATIONS, "hucl_optimum",
)


def nc_value_curves(*, num_classes: int, num_negatives: tuple[int, ...], betas: tuple[float, ...], tau: float = 1.0, psi: PsiName = "infonce") -> dict:
    """Loss at NC vs beta for the four settings and each k, with pi_beta (docs/theory.md, section 5).

    Returns ``{"psi", "tau", "num_classes", "betas", "num_negatives", "values": {k: {setting: [..]}},
    "collision_probability": {setting: [..]}, "scl_bound": {k: float}, "ucl_bound": {k: float}}``.
    """
    values = {
        str(k): {s: [nc_value(s, psi, num_classes=num_classes, num_negatives=k, beta=b, tau=tau) for b in betas] for s in SETTINGS}
        for k in num_negatives
    }
    collision = {s: [collision_probability(s, num_classes=num_classes, beta=b) for b in betas] for s in SETTINGS}
    return {
        "psi": psi,
        "tau": tau,
        "num_classes": num_classes,
        "betas": list(betas),
        "num_negatives": list(num_negatives),
        "values": values,
        "collision_probability": collision,
        "source": "docs/theory.md, section 5 (ncgeom.theory.nc_value, collision_probability)",
    }


def harris_gaps(
    *,
    num_models: int,
    betas: tuple[float, ...],
    num_negatives: int,
    num_classes: int = 3,
    points_per_class: int = 3,
    dim: int = 3,
    seed: int = 0,
) -> dict:
    """Harris gaps L_HSCL - L_SCL and L_HUCL - L_UCL of random finite latent models (docs/theory.md, Theorem 1).

    Each model has ``num_classes`` balanced classes of ``points_per_class`` points drawn uniformly on
    the unit sphere of R^dim (i.i.d. Gaussian, normalized), with Dirichlet(1) weights within a class.
    Losses are exact (:func:`ncgeom.population.population_loss`, infonce, tau = 1, label positives).
    Theorem 1 says every gap is >= 0, and the gap is 0 at beta = 0 (eta = 1).

    Returns ``{"betas", "num_negatives", "models": [{"scl_gap": [..], "ucl_gap": [..], ...}], "min_gap",
    "tolerance"}`` where ``scl_gap[i]`` = L_HSCL(beta_i) - L_SCL and ``ucl_gap[i]`` = L_HUCL - L_UCL.
    """
    rng = np.random.default_rng(seed)
    models = []
    for _ in range(num_models):
        points, weights = [], []
        for _c in range(num_classes):
            z = rng.standard_normal((points_per_class, dim))
            points.append(z / np.linalg.norm(z, axis=1, keepdims=True))
            weights.append(rng.dirichlet(np.ones(points_per_class)))
        model = FiniteLatentModel(points, weights)
        record: dict = {}
        for plain in ("scl", "ucl"):
            hard = hard_setting(plain)
            base = population_loss(model, plain, num_negatives=num_negatives, method="exact").value
            hard_values = [population_loss(model, hard, num_negatives=num_negatives, eta=float(b), method="exact").value for b in betas]
            record[f"{plain}_loss"] = base
            record[f"{hard}_loss"] = hard_values
            record[f"{plain}_gap"] = [h - base for h in hard_values]
        models.append(record)
    gaps = [g for m in models for key in ("scl_gap", "ucl_gap") for g in m[key]]
    # Sums of O(N^2 k) float64 terms of size O(1): rounding error below 1e3 * eps.
    tolerance = 1e3 * float(np.finfo(np.float64).eps)
    return {
        "betas": list(betas),
        "num_negatives": num_negatives,
        "num_classes": num_classes,
        "points_per_class": points_per_class,
        "dim": dim,
        "psi": "infonce",
        "tau": 1.0,
        "seed": seed,
        "models": models,
        "min_gap": min(gaps),
        "tolerance": tolerance,
        "holds": bool(min(gaps) >= -tolerance),
        "source": "docs/theory.md, Theorem 1 (ncgeom.population.population_loss, exact)",
    }


_CERT_KEYS = ("setting", "psi", "num_classes", "num_negatives", "domain", "tau", "margin", "primal_value", "dual_bound", "gap", "closed_form", "distance_to_etf", "minimizer_unique")


def _certificate_row(check: CheckResult, origin: str) -> dict:
    row = {key: check.details.get(key) for key in _CERT_KEYS}
    row.update(name=check.name, status=check.status, method=check.method, origin=origin)
    return row


def _verify_checks(verify_results: Path | None, prefix: str) -> list[CheckResult]:
    """The checks of the verify stage (``verify/results.json``) whose name starts with ``prefix``."""
    if verify_results is None or not Path(verify_results).exists():
        return []
    checks = (CheckResult.from_dict(r) for r in read_json(verify_results))
    return [c for c in checks if c.name.startswith(prefix) and c.details]


def certificate_table(*, cases, verify_results: Path | None = None) -> dict:
    """Convex-certificate optimum vs the closed form at NC (docs/theory.md, section 6).

    Collects the certificates already run by the verify stage (``verify/results.json``, names
    ``certificate_*``) and certifies each extra ``(setting, C, k, tau, domain)`` case of ``cases``
    (infonce) with :func:`proofs_check.certificates.certificate_check` (cvxpy, Clarabel or SCS).

    Returns ``{"cases": [{"setting", "psi", "num_classes", "num_negatives", "domain", "tau",
    "primal_value", "dual_bound", "gap", "closed_form", "distance_to_etf", "status", "origin"}, ...]}``.
    """
    rows = [_certificate_row(check, "verify") for check in _verify_checks(verify_results, "certificate_")]
    seen = {r["name"] for r in rows}
    if cases:
        from proofs_check.certificates import certificate_check  # imports cvxpy (heavy, optional at import)

        for setting, c, k, tau, domain in cases:
            check = certificate_check(setting, "infonce", num_classes=c, num_negatives=k, tau=tau, domain=domain)
            if check.name not in seen:
                rows.append(_certificate_row(check, "theory"))
                seen.add(check.name)
    return {"cases": rows, "source": "docs/theory.md, section 6 (proofs_check.certificates)"}


def hucl_exploration(*, betas, num_classes: int, dim: int, verify_results: Path | None = None, num_negatives: int = 1,
                     num_starts: int = 4) -> dict:
    """The numerical exploration of the HUCL minimum over collapsed configurations in R^dim vs beta.

    docs/theory.md, section 4 ("HUCL: an open problem"): Theorem 1 gives L_HUCL >= L_UCL(NC), not tight at NC.
    :func:`proofs_check.hucl.check_hucl` minimizes L_HUCL over unit class vectors in R^dim (multi-start
    L-BFGS) and reports, per beta, the minimum found, the value at NC, the Harris bound and the distance of
    the minimizer's Gram to the ETF Gram. The records of the verify stage (names ``hucl_exploration_*``) with
    this (C, d, k) are reused; without one the exploration is run here on ``betas``. The pipeline passes the
    (C, d) of the claim-3 runs, so that the figure puts the runs next to the exploration of their geometry.

    Returns ``{"explorations": [{"name", "num_classes", "dim", "num_negatives", "num_starts", "rows":
    [{"beta", "min_found", "nc_value", "harris_bound", "etf_distance", ...}]}]}``.
    """
    checks = [c for c in _verify_checks(verify_results, "hucl_exploration")
              if (c.details.get("num_classes"), c.details.get("dim"), c.details.get("num_negatives"))
              == (num_classes, dim, num_negatives) and "rows" in c.details]
    if not checks:
        checks = [check_hucl(num_classes=num_classes, dim=dim, num_negatives=num_negatives, num_starts=num_starts,
                             betas=tuple(betas))]
    explorations = []
    for check in checks:
        details = check.details
        explorations.append({key: details.get(key) for key in ("num_classes", "dim", "num_negatives", "num_starts",
                                                               "psi", "tau", "rows")} | {"name": check.name})
    return {"explorations": explorations, "source": "docs/theory.md, section 4, HUCL open problem (proofs_check.hucl)"}


def hucl_thresholds(*, verify_results: Path | None = None, quick: bool = True, claim3: tuple[int, int, int] | None = None,
                    batch: bool = False, betas=HUCL_CURVE_BETAS) -> dict:
    """The HUCL thresholds by dimension (docs/results.md, "HUCL thresholds by dimension"; proofs_check.hucl).

    Takes the table of the verify stage's ``hucl_thresholds`` record, or computes it
    (:func:`proofs_check.hucl.check_threshold_table`, quick subset unless ``quick`` is False), and adds, per
    (C, d), the smallest Hessian eigenvalue of L_HUCL at NC modulo rotations on ``betas`` (the jets of
    proofs_check.hucl.jets). With ``batch`` and no batch thresholds in the record, the two local thresholds of
    the claim-3 batch objective ``claim3`` = (C, d, B) are computed (for d and C; no switch search).

    Returns ``{"rows": [...], "curves": {"C{C}_d{d}": {"betas", "min_eigenvalue"}}, "batch": [...],
    "claim3": [C, d, B], "subset", "quick"}``.
    """
    records = _verify_checks(verify_results, "hucl_thresholds")
    details = records[0].details if records else check_threshold_table(quick=quick).details
    curves = {}
    for row in details["rows"]:
        c, d = row["num_classes"], row["dim"]
        curves[f"C{c}_d{d}"] = {"betas": list(betas), "min_eigenvalue": [
            min(reduced_curvature(b, num_classes=c, beta=beta, tau=TAU) for b in blocks_for(c, d)) for beta in betas]}
    rows_batch = details.get("batch", [])
    if batch and not rows_batch and claim3 is not None:
        c, d, b = claim3
        rows_batch = [batch_thresholds(num_classes=c, dim=dd, batch_size=b, tau=TAU, grid_step=1 / 8,
                                       beta_max=32.0).to_dict() for dd in sorted({d, c})]
    return {"rows": details["rows"], "curves": curves, "batch": rows_batch,
            "claim3": None if claim3 is None else list(claim3), "subset": details.get("subset"),
            "quick": details.get("quick"), "source": "docs/results.md, HUCL thresholds by dimension (proofs_check.hucl)"}


def compute_all(directory: Path, *, scale: ScaleParameters, verify_results: Path | None = None, force: bool = False, log: Callable[[str], None] = print) -> dict:
    """Compute every missing theory file under ``directory`` (every file with ``force``); return the stage summary.

    A part that raises is recorded in ``summary["failed"]`` and the other parts still run.
    """
    directory = Path(directory)
    # the HUCL data is computed at the (C, d, B) of the claim-3 runs; read lazily, a bad spec fails those parts only
    claim3 = functools.cache(lambda: claim3_geometry(scale.name))
    jobs = {
        "nc_values": lambda: nc_value_curves(num_classes=scale.num_classes, num_negatives=scale.num_negatives, betas=scale.theory_betas),
        "harris_gap": lambda: harris_gaps(num_models=scale.harris_models, betas=scale.harris_betas, num_negatives=scale.harris_k),
        "certificates": lambda: certificate_table(cases=scale.certificate_cases, verify_results=verify_results),
        "hucl_exploration": lambda: hucl_exploration(
            betas=scale.hucl_betas, verify_results=verify_results, num_classes=claim3()[0], dim=claim3()[1],
            num_starts=scale.hucl_starts
        ),
        "hucl_thresholds": lambda: hucl_thresholds(
            verify_results=verify_results, quick=scale.verify != "full", claim3=claim3(), batch=scale.name != "tiny"
        ),
        # the full record shipped with proofs_check (hours of CPU to recompute; verify rechecks its certificates)
        "hucl_optimum": optimum_record.theory_data,
    }
    if scale.name == "tiny":
        del jobs["hucl_optimum"]
    summary: dict = {"computed": [], "skipped": []}
    failed = []
    for name, job in jobs.items():
        path = directory / f"{name}.json"
        if _kept(path, force):
            summary["skipped"].append(name)
            continue
        try:
            atomic_write_json(path, job())
            summary["computed"].append(name)
            log(f"  theory/{name}.json written")
        except Exception as exc:
            failed.append(f"{name}: {exc.__class__.__name__}: {' '.join(str(exc).split())}"[:300])
            log(f"  theory/{name} FAILED: {failed[-1]}")
    cases = tuple(c for c in CASES if scale.name != "tiny" or f"ablation_{c}" not in NOT_AT_TINY)
    ablated = ablation_data(directory, quick=scale.verify != "full", cases=cases, force=force, log=log)
    for key in ("computed", "skipped"):
        summary[key] += ablated[key]
    failed += ablated["failed"]
    if failed:
        summary["failed"] = failed
    return summary


def _kept(path: Path, force: bool) -> bool:
    """True when ``path`` holds readable JSON and ``force`` is off: the file is kept, not recomputed."""
    if force or not path.exists():
        return False
    try:
        read_json(path)
    except ValueError:
        return False  # unreadable: recompute
    return True


def ablation_data(directory: Path, *, quick: bool, cases: Sequence[str] = CASES, force: bool = False,
                  log: Callable[[str], None] = print) -> dict:
    """Write ``ablations.json`` (the records of ``cases``) and ``ablation_<case>.json`` (the tables) under ``directory``.

    A case module that exposes ``ablations_with_table(*, quick) -> (records, table)`` gives its records and its
    table from one search (both files are written from it); the others run through
    :func:`proofs_check.ablations.run_ablations`. A case that raises (or returns something other than
    AblationResult records) is recorded in ``errors`` of ``ablations.json`` and in the returned ``failed``; the
    other cases still run. ``ablations.json`` is kept when readable and free of errors (unless ``force``); a
    table is kept when present, unless the records are recomputed (then both come from the same search).

    Returns ``{"computed": [file stems], "skipped": [file stems], "failed": [one line per error]}``.
    """
    directory = Path(directory)
    records_path = directory / f"{ABLATIONS}.json"
    redo_records = not _kept(records_path, force) or bool(read_json(records_path).get("errors"))
    summary: dict = {"computed": [], "skipped": [], "failed": []}
    records: list[AblationResult] = []
    errors: list[str] = []

    def on_error(case: str, exc: BaseException) -> None:
        errors.append(f"proofs_check.ablations.{case}: {exc!r}")  # the line of ncgeom verify --ablations
        log(f"  theory/{ABLATIONS}: case {case} FAILED: {errors[-1]}")

    for case in cases:
        try:
            with_table = getattr(load_case(case), "ablations_with_table", None)
        except Exception as exc:  # noqa: BLE001 - a missing case is recorded, the others still run
            on_error(case, exc)
            continue
        if with_table is None:
            if redo_records:
                records += run_ablations(quick=quick, cases=(case,), on_error=on_error)
            continue
        name = f"ablation_{case}"
        if not redo_records and _kept(directory / f"{name}.json", force):
            summary["skipped"].append(name)
            continue
        try:
            found, table = with_table(quick=quick)
            bad = sorted({type(r).__name__ for r in found if not isinstance(r, AblationResult)})
            if bad:
                raise TypeError(f"{case}.ablations_with_table() returned {', '.join(bad)}, not AblationResult")
        except Exception as exc:  # noqa: BLE001 - recorded, the other cases still run
            on_error(case, exc)
            continue
        atomic_write_json(directory / f"{name}.json", table)
        summary["computed"].append(name)
        log(f"  theory/{name}.json written")
        records += found
    if redo_records:
        atomic_write_json(records_path, {"ablations": [r.to_dict() for r in records], "errors": errors,
                                         "quick": bool(quick), "cases": list(cases)})
        summary["computed"].append(ABLATIONS)
        log(f"  theory/{ABLATIONS}.json written ({len(records)} records, {len(errors)} errors)")
    else:
        summary["skipped"].append(ABLATIONS)
    summary["failed"] = [f"{ABLATIONS}: {e}"[:300] for e in errors]
    return summary
