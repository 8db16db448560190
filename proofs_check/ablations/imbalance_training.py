"""Trained runs under class imbalance, next to the optima they can approach (docs/results.md, "Imbalanced classes").

The population optimum of :mod:`proofs_check.ablations.imbalance` is a minimizer of L_S with the data's prior:
anchors weighted by lambda_c, negatives drawn from lambda, the expectation of psi outside (k = 1 InfoNCE). A run
of ``ncgeom train`` minimizes something else, its **expected batch objective**: the mean over an epoch's steps of
the weighted batch estimator (docs/theory.md, section 7), whose expectation is over the class counts n of a
batch. For unconstrained features that collapse within each class (v_c the unit class means, M = V V^T,
S_ij = 1 for a pair of one class) the batch loss depends on V only through M and n:

.. math::

    \\ell(M; n) = \\frac{\\sum_c n_c (n_c - 1)\\, \\log\\Big(1 + k\\,\\frac{\\sum_{c'} m_{cc'} e^{b M_{cc'}} e^{(M_{cc'} - 1)/\\tau}}
    {\\sum_{c'} m_{cc'} e^{b M_{cc'}}}\\Big)}{\\sum_c n_c (n_c - 1)}, \\qquad
    m_{cc'} = \\begin{cases} n_{c'} [c' \\ne c] & \\text{SCL, HSCL} \\\\ n_{c'} - [c' = c] & \\text{UCL, HUCL,} \\end{cases}

(0 for a batch without a pair, as ``batch_loss`` returns), and the objective is E_n[l(M; n)]
(:func:`expected_batch_loss`), computed exactly: :func:`count_law` lists every count vector n of a batch with
its probability (multivariate hypergeometric for shuffled batches, in integers; one vector for class-balanced
ones). Three differences from the population loss, all [derived]:

- **balanced batches** (``batches="balanced"``): n is the same for every batch, so every class counts alike and
  the prior of the data does not enter at all: the run follows the balanced objective, whose minimizer is the
  ETF (the objective is symmetric under relabelling and, by Theorem 2, minimized at NC);
- **shuffled batches** (``batches="shuffle"``, multivariate hypergeometric n): the mean over pairs weights a class
  by E[n_c (n_c - 1)], about lambda_c^2 B (B - 1), not by lambda_c: a majority class counts quadratically;
- the weighted estimator puts the expectation over negatives inside the log (Jensen: at or above the
  expectation of psi, equal at NC).

:func:`compare` trains runs (``ncgeom.runs.run``), recomputes both optima by a multi-start L-BFGS over
collapsed configurations (:func:`best_configuration`, float64) and reports the distance of each run's final
class-mean Gram to each optimum. Evidence: numerical (the searches and the trainings are numerical; the
objective is checked against ``batch_loss`` on collapsed batches in tests/test_imbalance_training.py).

``python -m proofs_check.ablations.imbalance_training [--quick] [--out FILE]`` prints the table (and writes it as
strict JSON, atomically: :func:`ncgeom.atomic_io.atomic_write_json`).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from ncgeom.atomic_io import atomic_write_json
from ncgeom.geometry import simplex_etf
from ncgeom.validate import require_choice, require_int, require_real
from ncgeom.vocabulary import BATCHINGS, SETTINGS, Setting, effective_beta, is_supervised
from proofs_check.ablations.imbalance import collapsed_loss
from proofs_check.hucl.search import multistart

__all__ = ["MAX_COUNT_VECTORS", "count_law", "expected_batch_loss", "best_configuration", "class_mean_gram",
           "compare", "TRAINED_GRID"]

#: The most count vectors :func:`count_law` enumerates (C = 4, B = 32: 6,545).
MAX_COUNT_VECTORS = 200_000
#: The trained runs of :func:`compare`: (setting, beta) x imbalance ratio x batching, C = 4, d = 3.
TRAINED_GRID: dict[str, Any] = {
    "settings": (("scl", 0.0), ("hscl", 5.0)), "ratios": (1.0, 5.0), "batches": BATCHINGS,
    "classes": 4, "samples_per_class": 50, "batch_size": 32, "tau": 1.0,
}


def count_law(sizes, batch_size: int, batches: str) -> tuple[np.ndarray, np.ndarray]:
    """(counts [K, C], probabilities [K]) of the class counts n of one batch, exactly.

    Shuffled batches: a batch is B of the N samples without replacement (one slice of a uniform permutation), so
    P(n) = prod_c binom(N_c, n_c) / binom(N, B) over every n with sum B and n_c <= N_c (at most
    :data:`MAX_COUNT_VECTORS` of them). Class-balanced batches: ``ncgeom.data.class_balanced_counts``, the same
    in every batch when B >= 2C (every class present; required here).
    """
    import itertools
    import math

    from ncgeom.data import class_balanced_counts

    n = [int(v) for v in np.asarray(sizes, dtype=np.int64)]
    b = require_int("batch_size", batch_size, min_value=2, max_value=sum(n))
    batches = require_choice("batches", batches, BATCHINGS)
    c = len(n)
    if batches == "balanced":
        if b < 2 * c:
            raise ValueError(f"batch_size must be >= 2 C = {2 * c} here (every class in every balanced batch), got {b}")
        return class_balanced_counts(c, b)[None, :], np.ones(1)
    if math.comb(b + c - 1, c - 1) > MAX_COUNT_VECTORS:
        raise ValueError(f"more than {MAX_COUNT_VECTORS} count vectors for C = {c}, B = {b}")
    total = math.comb(sum(n), b)
    rows, probs = [], []
    for head in itertools.product(*(range(min(size, b) + 1) for size in n[:-1])):
        last = b - sum(head)
        if 0 <= last <= n[-1]:
            row = (*head, last)
            rows.append(row)
            probs.append(math.prod(math.comb(size, k) for size, k in zip(n, row)) / total)
    return np.array(rows, dtype=np.int64), np.array(probs)


def expected_batch_loss(vectors, setting: Setting, counts: np.ndarray, probs: np.ndarray | None = None, *,
                        beta: float = 0.0, tau: float = 1.0, num_negatives: int = 1):
    """E_n[l(M; n)] of the module docstring for class vectors [..., C, d] (torch, differentiable; rows normalized):
    the mean of l(M; n) over the rows n of ``counts`` [K, C] weighted by ``probs`` [K] (default: equal weights)."""
    import torch

    from proofs_check.hucl.loss import unit_rows

    setting = require_choice("setting", setting, SETTINGS)
    b = effective_beta(setting, require_real("beta", beta, min_value=0.0))
    tau = require_real("tau", tau, min_value=1e-3)
    k = require_int("num_negatives", num_negatives, min_value=1)
    v = unit_rows(vectors)
    gram = v @ v.transpose(-1, -2)  # [..., C, C]
    n = torch.as_tensor(np.asarray(counts), dtype=gram.dtype)  # [K, C]
    c = n.shape[1]
    eye = torch.eye(c, dtype=gram.dtype)
    # m[K, c, c'] candidates of class c' for an anchor of class c
    m = n[:, None, :].expand(-1, c, -1) * (1 - eye) if is_supervised(setting) else n[:, None, :] - eye
    m = m.clamp_min(0.0)
    valid = m.sum(-1) > 0  # N(i) not empty
    # log m, -inf where m = 0; a row without candidates gets zeros instead (its value is discarded below, and an
    # all -inf row would give NaN gradients through the discarded branch)
    log_m = torch.where(m > 0, m.log(), torch.full_like(m, -torch.inf))
    log_m = torch.where(valid[..., None], log_m, torch.zeros_like(log_m))  # [K, C, C]
    g = gram[..., None, :, :]  # [..., 1, C, C]
    top = torch.logsumexp(log_m + (b + 1.0 / tau) * g, dim=-1) - 1.0 / tau  # log sum m e^{bM} e^{(M - 1)/tau}
    bottom = torch.logsumexp(log_m + b * g, dim=-1)
    arg = np.log(k) + top - bottom
    per_class = torch.where(valid, torch.nn.functional.softplus(arg), torch.zeros_like(arg))  # [..., K, C]
    pairs = n * (n - 1)  # [K, C]
    total = pairs.sum(-1)
    per_batch = (per_class * pairs).sum(-1) / total.clamp_min(1.0)  # 0 for a batch without a pair
    if probs is None:
        return per_batch.mean(-1)
    return (per_batch * torch.as_tensor(np.asarray(probs), dtype=gram.dtype)).sum(-1)


def best_configuration(objective, num_classes: int, dim: int, *, num_random: int, rng: np.random.Generator,
                       starts: Sequence[np.ndarray] = (), max_iter: int = 2000) -> dict[str, Any]:
    """Multi-start L-BFGS (float64) of ``objective`` (vectors [S, C, d] -> [S]) over C unit vectors in R^d, from
    ``num_random`` Gaussian starts, the ETF and ``starts``, each structured start perturbed by 0.05."""
    import torch

    c = require_int("num_classes", num_classes, min_value=2)
    d = require_int("dim", dim, min_value=1)
    generator = torch.Generator().manual_seed(int(rng.integers(2**62)))
    base = torch.stack([torch.as_tensor(s, dtype=torch.float64) for s in [simplex_etf(c, d), *starts]])
    all_starts = torch.cat([torch.randn(num_random, c, d, generator=generator, dtype=torch.float64),
                            base + 0.05 * torch.randn(base.shape, generator=generator, dtype=torch.float64)])
    found = multistart(objective, all_starts, max_iter=max_iter)
    return {"value": float(found.values[found.best]), "gram": found.grams[found.best].tolist(),
            "vectors": found.vectors[found.best].tolist(), "max_final_grad": found.max_grad,
            "starts": num_random + len(base)}


def class_mean_gram(z: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Gram [C, C] of the unit-normalized class means of features z [N, d]."""
    y = np.asarray(labels)
    means = np.stack([np.asarray(z)[y == c].mean(axis=0) for c in np.unique(y)])
    means /= np.linalg.norm(means, axis=1, keepdims=True)
    return means @ means.T


def compare(*, epochs: int = 300, seeds: tuple[int, ...] = (0, 1, 2), lr: float = 0.01, num_random: int = 8,
            grid: dict[str, Any] | None = None, seed: int = 0) -> dict[str, Any]:
    """Train the runs of ``grid`` (default :data:`TRAINED_GRID`) and compare each with the population optimum under
    the data's prior and with the minimizer of its expected batch objective (module docstring); JSON-ready."""
    from ncgeom.runs import Config, make_data, run
    from ncgeom.runs.setup import seed_streams
    from proofs_check.ablations.imbalance import population_value

    grid = dict(TRAINED_GRID, **(grid or {}))
    c = grid["classes"]
    rng = np.random.default_rng(seed)
    rows = []
    for setting, beta in grid["settings"]:
        for ratio in grid["ratios"]:
            base = Config(setting=setting, beta=beta, classes=c, samples_per_class=grid["samples_per_class"],
                          imbalance=ratio, batch_size=grid["batch_size"], tau=grid["tau"], epochs=epochs, lr=lr,
                          model="unconstrained", norm="sphere", dtype="float64", metrics_every=epochs)
            sizes = np.bincount(make_data(base, rng=seed_streams(base.seed)[0]).y_train, minlength=c)
            prior = sizes / sizes.sum()
            t0 = time.perf_counter()
            population = best_configuration(lambda u, s=setting, b=beta, p=prior: collapsed_loss(u, s, p, beta=b),
                                            c, c - 1, num_random=num_random, rng=rng)
            population["value_recomputed"] = population_value(np.asarray(population["vectors"]), setting, prior,
                                                              beta=effective_beta(setting, beta))
            for batching in grid["batches"]:
                counts, probs = count_law(sizes, grid["batch_size"], batching)
                target = best_configuration(
                    lambda u, s=setting, b=beta, n=counts, p=probs: expected_batch_loss(u, s, n, p, beta=b, tau=grid["tau"]),
                    c, c - 1, num_random=num_random, rng=rng, starts=[np.asarray(population["vectors"])])
                trained = []
                for run_seed in seeds:
                    result = run(base.replace(batches=batching, seed=run_seed))
                    gram = class_mean_gram(result.embeddings, result.labels)
                    trained.append({"seed": run_seed, "status": result.status, "gram": gram.tolist(),
                                    "to_batch_optimum": float(np.linalg.norm(gram - np.asarray(target["gram"]))),
                                    "to_population_optimum": float(np.linalg.norm(gram - np.asarray(population["gram"]))),
                                    "to_etf": float(np.linalg.norm(gram - (simplex_etf(c) @ simplex_etf(c).T)))})
                rows.append({"setting": setting, "beta": beta, "ratio": ratio, "batches": batching,
                             "class_sizes": sizes.tolist(), "batch_optimum": target, "population_optimum": population,
                             "optima_distance": float(np.linalg.norm(np.asarray(target["gram"])
                                                                     - np.asarray(population["gram"]))),
                             "trained": trained, "seconds": time.perf_counter() - t0})
    return {"grid": {k: list(v) if isinstance(v, tuple) else v for k, v in grid.items()}, "epochs": epochs, "lr": lr,
            "seeds": list(seeds), "num_random": num_random, "rows": rows}


def _table(data: dict[str, Any]) -> str:
    lines = ["| setting | r | class sizes | batches | optima apart | run -> batch optimum | run -> population optimum | run -> ETF |",
             "|---|---|---|---|---|---|---|---|"]
    def span(trained: list[dict[str, Any]], key: str) -> str:
        return f"{min(x[key] for x in trained):.3g}-{max(x[key] for x in trained):.3g}"

    for row in data["rows"]:
        t = row["trained"]
        name = row["setting"] + (f" beta {row['beta']:g}" if row["beta"] else "")
        lines.append(f"| {name} | {row['ratio']:g} | {row['class_sizes']} | {row['batches']} | "
                     f"{row['optima_distance']:.3g} | {span(t, 'to_batch_optimum')} | {span(t, 'to_population_optimum')} | "
                     f"{span(t, 'to_etf')} |")
    return "\n".join(lines)


def _cli() -> None:  # pragma: no cover - manual: python -m proofs_check.ablations.imbalance_training
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="100 epochs, one seed")
    parser.add_argument("--out", default=None, help="write the JSON here")
    args = parser.parse_args()
    data = compare(epochs=100, seeds=(0,)) if args.quick else compare()
    print(_table(data))
    if args.out:
        atomic_write_json(args.out, data)  # strict JSON (NaN -> null), written atomically


if __name__ == "__main__":  # pragma: no cover
    _cli()
