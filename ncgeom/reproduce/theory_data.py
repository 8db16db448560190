"""Data of the theory figures, computed once by the pipeline and saved as JSON under ``<out>/theory/``.

- ``nc_values.json``: closed-form population loss at NC vs beta for SCL, HSCL, UCL, HUCL and the
  collision probability pi_beta (theory.md sections 4-5; :func:`ncgeom.theory.nc_value`).
- ``harris_gap.json``: L_HSCL - L_SCL and L_HUCL - L_UCL for random finite latent models vs beta
  (theory.md Theorem 1; :func:`ncgeom.population.population_loss`, exact method).
- ``certificates.json``: convex-certificate optimum vs closed form (theory.md section 6;
  proofs_check.certificates).
- ``hucl_exploration.json``: the numerical exploration of the HUCL minimum vs beta (theory.md,
  "HUCL [open problem]"; proofs_check).

Each file is computed only if absent (resumable) and written atomically. Figure scripts read these
files and never recompute them.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ncgeom.atomic_io import atomic_write_json, read_json
from ncgeom.reproduce.scales import Scale

__all__ = [
    "nc_value_curves",
    "harris_gaps",
    "certificate_table",
    "hucl_exploration",
    "compute_all",
    "THEORY_FILES",
]

THEORY_FILES: tuple[str, ...] = ("nc_values", "harris_gap", "certificates", "hucl_exploration")
_SETTINGS = ("scl", "hscl", "ucl", "hucl")


def nc_value_curves(*, num_classes: int, num_negatives: tuple[int, ...], betas: tuple[float, ...], tau: float = 1.0, psi: str = "infonce") -> dict:
    """Loss at NC vs beta for the four settings and each k, with pi_beta (theory.md section 5).

    Returns ``{"psi", "tau", "num_classes", "betas", "num_negatives", "values": {k: {setting: [..]}},
    "collision_probability": {setting: [..]}, "scl_bound": {k: float}, "ucl_bound": {k: float}}``.
    """
    from ncgeom.theory import collision_probability, nc_value

    values = {
        str(k): {s: [nc_value(s, psi, num_classes=num_classes, num_negatives=k, beta=b, tau=tau) for b in betas] for s in _SETTINGS}
        for k in num_negatives
    }
    collision = {s: [collision_probability(s, num_classes=num_classes, beta=b) for b in betas] for s in _SETTINGS}
    return {
        "psi": psi,
        "tau": tau,
        "num_classes": num_classes,
        "betas": list(betas),
        "num_negatives": list(num_negatives),
        "values": values,
        "collision_probability": collision,
        "source": "theory.md section 5 (ncgeom.theory.nc_value, collision_probability)",
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
    """Harris gaps L_HSCL - L_SCL and L_HUCL - L_UCL of random finite latent models (theory.md Theorem 1).

    Each model has ``num_classes`` balanced classes of ``points_per_class`` points drawn uniformly on
    the unit sphere of R^dim (i.i.d. Gaussian, normalized), with Dirichlet(1) weights within a class.
    Losses are exact (:func:`ncgeom.population.population_loss`, infonce, tau = 1, label positives).
    Theorem 1 says every gap is >= 0, and the gap is 0 at beta = 0 (eta = 1).

    Returns ``{"betas", "num_negatives", "models": [{"scl_gap": [..], "ucl_gap": [..], ...}], "min_gap",
    "tolerance"}`` where ``scl_gap[i]`` = L_HSCL(beta_i) - L_SCL and ``ucl_gap[i]`` = L_HUCL - L_UCL.
    """
    import numpy as np

    from ncgeom.population import FiniteLatentModel, population_loss

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
        for plain, hard in (("scl", "hscl"), ("ucl", "hucl")):
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
        "source": "theory.md Theorem 1 (ncgeom.population.population_loss, exact)",
    }


_CERT_KEYS = ("setting", "psi", "num_classes", "num_negatives", "domain", "tau", "margin", "primal_value", "dual_bound", "gap", "closed_form", "distance_to_etf", "minimizer_unique")


def _certificate_row(record: dict, origin: str) -> dict:
    details = record.get("details") or {}
    row = {key: details.get(key) for key in _CERT_KEYS}
    row.update(name=record.get("name"), status=record.get("status"), method=record.get("method"), origin=origin)
    return row


def certificate_table(*, cases, verify_results: Path | None = None) -> dict:
    """Convex-certificate optimum vs the closed form at NC (theory.md section 6).

    Collects the certificates already run by the verify stage (``verify/results.json``, names
    ``certificate_*``) and certifies each extra ``(setting, C, k, tau, domain)`` case of ``cases``
    (infonce) with :func:`proofs_check.certificates.certificate_check` (cvxpy, Clarabel or SCS).

    Returns ``{"cases": [{"setting", "psi", "num_classes", "num_negatives", "domain", "tau",
    "primal_value", "dual_bound", "gap", "closed_form", "distance_to_etf", "status", "origin"}, ...]}``.
    """
    rows = []
    if verify_results is not None and Path(verify_results).exists():
        for record in read_json(verify_results):
            if str(record.get("name", "")).startswith("certificate_") and record.get("details"):
                rows.append(_certificate_row(record, "verify"))
    seen = {r["name"] for r in rows}
    if cases:
        from proofs_check.certificates import certificate_check

        for setting, c, k, tau, domain in cases:
            record = certificate_check(setting, "infonce", num_classes=c, num_negatives=k, tau=tau, domain=domain).to_dict()
            if record["name"] not in seen:
                rows.append(_certificate_row(record, "theory"))
                seen.add(record["name"])
    return {"cases": rows, "source": "theory.md section 6 (proofs_check.certificates)"}


def hucl_exploration(*, betas, verify_results: Path | None = None, num_classes: int = 4, num_negatives: int = 1, num_starts: int = 4) -> dict:
    """The numerical exploration of the HUCL minimum over collapsed configurations vs beta.

    Theory.md section 4 ("HUCL [claim: open problem]"): Theorem 1 gives L_HUCL >= L_UCL(NC), not tight
    at NC. :func:`proofs_check.hucl.check_hucl` minimizes L_HUCL over unit class vectors (multi-start
    L-BFGS) and reports, per beta, the minimum found, the value at NC, the Harris bound and the distance
    of the minimizer's Gram to the ETF Gram, and the critical beta above which NC stops being a local
    minimizer (``critical_beta``, None if not found). The records of the verify stage (names
    ``hucl_exploration_*``) are reused; without them one exploration is run here on ``betas``.

    Returns ``{"explorations": [{"name", "num_classes", "num_negatives", "num_starts", "rows":
    [{"beta", "min_found", "nc_value", "harris_bound", "etf_distance", ...}]}]}``.
    """
    records = []
    if verify_results is not None and Path(verify_results).exists():
        records = [r for r in read_json(verify_results) if str(r.get("name", "")).startswith("hucl_exploration") and (r.get("details") or {}).get("rows")]
    if not records:
        from proofs_check.hucl import check_hucl

        records = [check_hucl(num_classes=num_classes, num_negatives=num_negatives, num_starts=num_starts, betas=tuple(betas)).to_dict()]
    explorations = []
    for record in records:
        details = record["details"]
        explorations.append(
            {
                "name": record.get("name"),
                "num_classes": details.get("num_classes"),
                "num_negatives": details.get("num_negatives"),
                "num_starts": details.get("num_starts"),
                "psi": details.get("psi", "infonce"),
                "tau": details.get("tau", 1.0),
                "rows": details["rows"],
                "critical_beta": details.get("critical_beta"),
                "harris_bound_respected": details.get("harris_bound_respected"),
            }
        )
    return {"explorations": explorations, "source": "theory.md section 4, HUCL open problem (proofs_check.hucl)"}


def compute_all(directory: Path, *, scale: Scale, verify_results: Path | None = None, force: bool = False, log: Callable[[str], None] = print) -> dict:
    """Compute every missing theory file under ``directory`` (every file with ``force``); return the stage summary.

    A part that raises is recorded in ``summary["failed"]`` and the other parts still run.
    """
    directory = Path(directory)
    jobs = {
        "nc_values": lambda: nc_value_curves(num_classes=scale.num_classes, num_negatives=scale.num_negatives, betas=scale.theory_betas),
        "harris_gap": lambda: harris_gaps(num_models=scale.harris_models, betas=scale.harris_betas, num_negatives=scale.harris_k),
        "certificates": lambda: certificate_table(cases=scale.certificate_cases, verify_results=verify_results),
        "hucl_exploration": lambda: hucl_exploration(
            betas=scale.hucl_betas, verify_results=verify_results, num_classes=scale.hucl_classes, num_starts=scale.hucl_starts
        ),
    }
    summary: dict = {"computed": [], "skipped": []}
    failed = []
    for name, job in jobs.items():
        path = directory / f"{name}.json"
        if path.exists() and not force:
            try:
                read_json(path)
                summary["skipped"].append(name)
                continue
            except ValueError:
                pass  # unreadable: recompute
        try:
            atomic_write_json(path, job())
            summary["computed"].append(name)
            log(f"  theory/{name}.json written")
        except Exception as exc:
            failed.append(f"{name}: {exc.__class__.__name__}: {' '.join(str(exc).split())}"[:300])
            log(f"  theory/{name} FAILED: {failed[-1]}")
    if failed:
        summary["failed"] = failed
    return summary
