"""Where trained HUCL runs end, against the optimal geometry at their beta (issue 25, part 1, item 4).

Input: the embeddings z [N, d] (unit rows) and labels [N] of a trained run, its beta (and k, tau), and the
optimum at that beta (a path point of ``proofs_check.hucl.optimum.path``: value, class Gram, pattern). Output
(:func:`compare_to_optimum`), all from numpy arrays:

- the trained geometry: the Gram M_run of the normalized class means, its :class:`~.patterns.Pattern` (collisions,
  near-antipodal pairs, rank), the smallest within-class inner product;
- distances: ||M_run - M_opt|| and ||M_run - G_ETF|| modulo class permutations (:func:`~.patterns.gram_distance`;
  for C > 7 a lower bound from sorted spectra and entries);
- losses: the population HUCL loss of the run's own points as a finite model (every training point a point of its
  class, equally likely: :func:`~.loss.point_loss` with n = N / C), the same for the collapsed class means, the
  optimum's value and NC's; the gap run - optimum;
- ``same_pattern``: the run and the optimum agree on within-class collapse (smallest within-class inner product
  >= 1 - ``collapse_tol``), on the number of near-antipodal pairs and of colliding pairs, on the rank, and on being a
  cluster (every class-mean inner product > 0) or not.

:func:`compare_runs` applies it to the run folders of ``ncgeom sweep`` (``embeddings.npz`` with arrays ``z`` and
``labels``, ``config.json`` with ``beta``, ``num_negatives``, ``tau``), reading only numpy and JSON. Evidence:
numerical (the optimum is searched, the runs are trained).

Source: docs/theory.md, section 4 ("The HUCL optimum along beta") and section 9, claim 3.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np

from ncgeom.atomic_io import atomic_write_json
from ncgeom.geometry import etf_gram
from ncgeom.validate import require_int, require_keys, require_real
from proofs_check.hucl.optimum.loss import point_loss
from proofs_check.hucl.optimum.path import optimum_at, point_summary
from proofs_check.hucl.optimum.patterns import class_gram, describe, gram_distance

__all__ = ["COLLAPSE_TOL", "COMPARISON_SCHEMA", "TrainingComparison", "trained_geometry", "compare_to_optimum",
           "compare_runs", "claim3_comparison"]

COMPARISON_SCHEMA = "hucl_training_comparison/1"
COLLAPSE_TOL = 0.05  # a class whose smallest within-class inner product is >= 0.95 counts as collapsed (claim rules: 0.05)


def _sorted_by_class(z: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, int, int]:
    z = np.asarray(z, dtype=np.float64)
    labels = np.asarray(labels)
    if z.ndim != 2 or labels.shape != (z.shape[0],):
        raise ValueError(f"z must be [N, d] and labels [N], got {z.shape} and {labels.shape}")
    classes, counts = np.unique(labels, return_counts=True)
    if np.ptp(counts) != 0:
        raise ValueError(f"labels must give balanced classes (the model's), got class sizes {counts.tolist()}")
    order = np.argsort(labels, kind="stable")
    z = z[order] / np.linalg.norm(z[order], axis=1, keepdims=True)
    return z, classes.size, int(counts[0])


def trained_geometry(z: np.ndarray, labels: np.ndarray) -> dict[str, Any]:
    """The class-mean Gram, its pattern and the within-class spread of trained embeddings (module docstring)."""
    points, c, n = _sorted_by_class(z, labels)
    gram = class_gram(points, n)
    means = points.reshape(c, n, -1).mean(axis=1)
    within = min(float((points[i * n:(i + 1) * n] @ points[i * n:(i + 1) * n].T).min()) for i in range(c))
    return {"num_classes": c, "per_class": n, "class_gram": gram, "pattern": describe(means, 1), "min_within": within}


def compare_to_optimum(z: np.ndarray, labels: np.ndarray, *, beta: float, optimum: Mapping[str, Any], tau: float = 1.0,
                       num_negatives: int = 1, collapse_tol: float = COLLAPSE_TOL) -> dict[str, Any]:
    """Compare a trained run with the optimum at its beta (module docstring).

    ``optimum`` holds ``value``, ``class_gram`` [C][C], ``min_within`` and the pattern fields ``pairs``,
    ``collisions``, ``rank`` (a path point of :mod:`proofs_check.hucl.optimum.record`).
    """
    import torch  # heavy optional import

    beta = require_real("beta", beta, min_value=0.0)
    require_int("num_negatives", num_negatives, min_value=1)
    geo = trained_geometry(z, labels)
    points, c, n = _sorted_by_class(z, labels)
    opt_gram = np.asarray(optimum["class_gram"], dtype=np.float64)
    if opt_gram.shape != (c, c):
        raise ValueError(f"optimum class_gram must be [{c}, {c}], got {opt_gram.shape}")
    with torch.no_grad():
        run_value = float(point_loss(torch.as_tensor(points), per_class=n, beta=beta, tau=tau, num_negatives=num_negatives))
        means = points.reshape(c, n, -1).mean(axis=1)
        means_value = float(point_loss(torch.as_tensor(means), per_class=1, beta=beta, tau=tau,
                                       num_negatives=num_negatives))
    pattern = geo["pattern"]
    run_collapsed = geo["min_within"] >= 1 - collapse_tol
    opt_collapsed = float(optimum["min_within"]) >= 1 - collapse_tol
    run_cluster = bool(np.all(geo["class_gram"][~np.eye(c, dtype=bool)] > 0))
    opt_cluster = bool(np.all(opt_gram[~np.eye(c, dtype=bool)] > 0))
    same = (run_collapsed == opt_collapsed and len(pattern.pairs) == len(optimum["pairs"])
            and len(pattern.collisions) == len(optimum["collisions"]) and pattern.rank == int(optimum["rank"])
            and run_cluster == opt_cluster)
    return {
        "beta": beta, "num_classes": c, "per_class": n,
        "run_gram": geo["class_gram"].tolist(), "run_pattern": pattern.name, "run_min_within": geo["min_within"],
        "run_pairs": len(pattern.pairs), "run_collisions": len(pattern.collisions), "run_rank": pattern.rank,
        "optimum_pattern": optimum.get("pattern"), "optimum_pairs": len(optimum["pairs"]),
        "optimum_collisions": len(optimum["collisions"]), "optimum_rank": int(optimum["rank"]),
        "run_cluster": run_cluster, "optimum_cluster": opt_cluster, "run_collapsed": bool(run_collapsed),
        "optimum_collapsed": bool(opt_collapsed),
        "same_pattern": bool(same),
        "distance_to_optimum": gram_distance(geo["class_gram"], opt_gram),
        "distance_to_etf": gram_distance(geo["class_gram"], etf_gram(c)),
        "distance_is_lower_bound": c > 7,
        "run_value": run_value, "run_means_value": means_value, "optimum_value": float(optimum["value"]),
        "nc_value": float(optimum["nc_value"]), "gap_to_optimum": run_value - float(optimum["value"]),
    }


def compare_runs(run_dirs: Sequence[str | Path], optima: Mapping[float, Mapping[str, Any]]) -> list[dict[str, Any]]:
    """:func:`compare_to_optimum` for every run folder (``embeddings.npz``, ``config.json``); ``optima`` maps each
    beta to its optimum. A run whose beta has no optimum raises ValueError naming it."""
    out = []
    for folder in run_dirs:
        folder = Path(folder)
        config = json.loads((folder / "config.json").read_text())
        beta = float(config["beta"])
        if beta not in optima:
            raise ValueError(f"no optimum for beta = {beta} (run {folder.name}); optima for {sorted(optima)}")
        data = np.load(folder / "embeddings.npz")
        row = compare_to_optimum(data["z"], data["labels"], beta=beta, optimum=optima[beta], tau=float(config["tau"]),
                                 num_negatives=int(config["num_negatives"]))
        out.append({"run": folder.name, "seed": config.get("seed"), **row})
    return out


@dataclass(frozen=True)
class TrainingComparison:
    """The record of :func:`claim3_comparison` (``hucl_training_comparison.json``): the optima searched at the runs'
    betas (path points), one row per run (:func:`compare_to_optimum`), the search settings and the wall time."""

    schema: str
    runs_folder: str
    optima: dict[str, Any]
    rows: tuple[dict[str, Any], ...]
    settings: dict[str, Any]
    seconds: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrainingComparison:
        names = [f.name for f in fields(cls)]
        require_keys("hucl training comparison", data, accepted=names, required=names)
        if data["schema"] != COMPARISON_SCHEMA:
            raise ValueError(f"hucl training comparison: schema must be {COMPARISON_SCHEMA!r}, got {data['schema']!r}")
        return cls(data["schema"], str(data["runs_folder"]), dict(data["optima"]), tuple(data["rows"]),
                   dict(data["settings"]), float(data["seconds"]))


def claim3_comparison(runs_folder: str | Path, *, per_class: Sequence[int] = (1, 2), num_random: int = 8,
                      seed: int = 0) -> TrainingComparison:
    """Search the optimum at every beta of the runs in ``runs_folder`` (an ``ncgeom sweep`` output: one folder per
    run) for their (C, d, k, tau), and compare every run with it (:func:`compare_runs`)."""
    import torch  # heavy optional import

    t0 = time.perf_counter()
    folders = sorted(p for p in Path(runs_folder).iterdir() if (p / "embeddings.npz").is_file())
    if not folders:
        raise ValueError(f"runs_folder {runs_folder} holds no run folder with embeddings.npz")
    configs = [json.loads((p / "config.json").read_text()) for p in folders]
    shapes = {(c["classes"], int(np.load(p / "embeddings.npz")["z"].shape[1]), c["num_negatives"], c["tau"])
              for p, c in zip(folders, configs)}
    if len(shapes) != 1:
        raise ValueError(f"the runs mix (C, d, k, tau): {sorted(shapes)}")
    (c, d, k, tau), = shapes
    generator = torch.Generator().manual_seed(seed)
    optima: dict[float, dict[str, Any]] = {}
    for beta in sorted({float(cfg["beta"]) for cfg in configs}):
        point = optimum_at(beta, num_classes=c, dim=d, per_class=tuple(per_class), tau=tau, num_negatives=k,
                           psi="infonce", num_random=num_random, generator=generator)
        optima[beta] = point_summary(point)
    rows = compare_runs(folders, optima)
    settings = {"num_classes": c, "dim": d, "num_negatives": k, "tau": tau, "per_class": list(per_class),
                "num_random": num_random, "seed": seed, "collapse_tol": COLLAPSE_TOL}
    return TrainingComparison(COMPARISON_SCHEMA, str(runs_folder), {str(b): v for b, v in optima.items()}, tuple(rows),
                              settings, time.perf_counter() - t0)


def _cli() -> None:  # pragma: no cover - manual: python -m proofs_check.hucl.optimum.training RUNS --out FILE
    import argparse

    parser = argparse.ArgumentParser(description="trained HUCL runs against the optimum at their beta")
    parser.add_argument("runs", help="an ncgeom sweep output folder (one folder per run)")
    parser.add_argument("--out", required=True, help="write the comparison here (JSON)")
    args = parser.parse_args()
    record = claim3_comparison(args.runs)
    atomic_write_json(args.out, record.to_dict())
    for row in record.rows:
        print(f"beta={row['beta']:g} seed={row['seed']}: same pattern {row['same_pattern']}; run {row['run_pattern']} "
              f"vs optimum {row['optimum_pattern']}; |M - M_opt| {row['distance_to_optimum']:.3f}, |M - ETF| "
              f"{row['distance_to_etf']:.3f}; loss gap {row['gap_to_optimum']:+.2e}")


if __name__ == "__main__":  # pragma: no cover
    _cli()
