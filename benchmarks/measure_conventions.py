"""How far the authors' convention is from the theory's on realistic batches (docs/conventions.md, section 2.4).

Run: ``python benchmarks/measure_conventions.py --seeds 20``. For each seed, a class-balanced batch of
B = 128 embeddings of C = 10 classes in d = 9 (the experiments' d = C - 1) on the unit sphere, in three
geometries: "random" (uniform on the sphere: the start of training), "clustered" (each point at its class's
ETF vertex plus Gaussian noise of norm ~0.5, renormalized: mid-training) and "nc" (exactly at the ETF). The
weighted estimator (k = 1, the authors' mean form, tau = 0.5) is evaluated under both conventions for the
four settings and beta in {0, 1, 5}; the table gives the mean over seeds of the relative difference
authors / theory - 1 (and its range), and for UCL/HUCL the anchor's own share of the negative law,
q_ii = e^{b S_ii} / sum_m e^{b S_im} (mean over anchors; its range over anchors and seeds). A last table
repeats the relative difference with the sampled estimator in the authors' own setting (psi = infonce-mean,
K = 256 draws, tau = 1), averaged over 4 generators per batch.

Everything runs in float64 on the CPU, in seconds. The measured numbers are recorded in
docs/conventions.md with the command that produced them.
"""

from __future__ import annotations

import argparse
import statistics

import torch

from ncgeom.geometry import simplex_etf
from ncgeom.losses import batch_loss
from ncgeom.vocabulary import SETTINGS, effective_beta, is_hard

BATCH, CLASSES, DIM, TAU = 128, 10, 9, 0.5
BETAS = (0.0, 1.0, 5.0)
GEOMETRIES = ("random", "clustered", "nc")


def make_batch(geometry: str, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(z [B, d] on the sphere, labels [B]) of a class-balanced batch (classes of 12 or 13 points)."""
    gen = torch.Generator().manual_seed(seed)
    labels = torch.arange(BATCH) % CLASSES
    if geometry == "random":
        z = torch.randn(BATCH, DIM, generator=gen, dtype=torch.float64)
    else:
        z = torch.as_tensor(simplex_etf(CLASSES), dtype=torch.float64)[labels]
        if geometry == "clustered":
            z = z + 0.5 / DIM**0.5 * torch.randn(BATCH, DIM, generator=gen, dtype=torch.float64)
    return torch.nn.functional.normalize(z, dim=1), labels


def anchor_share(z: torch.Tensor, beta: float) -> torch.Tensor:
    """q_ii of the authors' UCL/HUCL law over the whole batch: softmax_m(beta S_im) at m = i, [B]."""
    return torch.softmax(beta * (z @ z.T), dim=1).diagonal()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=20, help="batches per geometry [20]")
    args = parser.parse_args()
    seeds = range(args.seeds)
    print(f"B = {BATCH}, C = {CLASSES}, d = {DIM}, tau = {TAU}, weighted estimator, k = 1, {args.seeds} seeds")
    print("\n| geometry | setting | beta | theory | authors | authors / theory - 1 (mean, [min, max]) |")
    print("|---|---|---|---|---|---|")
    for geometry in GEOMETRIES:
        batches = [make_batch(geometry, s) for s in seeds]
        for setting in SETTINGS:
            for beta in BETAS if is_hard(setting) else (0.0,):
                theory = [float(batch_loss(z, y, setting, beta=beta, tau=TAU)) for z, y in batches]
                authors = [float(batch_loss(z, y, setting, beta=beta, tau=TAU, convention="authors"))
                           for z, y in batches]
                rel = [a / t - 1 for a, t in zip(authors, theory)]
                print(f"| {geometry} | {setting} | {beta:g} | {statistics.fmean(theory):.4f} | "
                      f"{statistics.fmean(authors):.4f} | {100 * statistics.fmean(rel):+.1f} % "
                      f"[{100 * min(rel):+.1f}, {100 * max(rel):+.1f}] |")
    print("\nAnchor's share q_ii of the authors' UCL/HUCL negative law (mean over anchors; [min, max] over anchors, seeds)")
    print("\n| geometry | beta | mean q_ii | [min, max] | 1/B |")
    print("|---|---|---|---|---|")
    for geometry in GEOMETRIES:
        for beta in BETAS:
            shares = torch.cat([anchor_share(z, effective_beta("hucl", beta)) for z, _ in
                                (make_batch(geometry, s) for s in seeds)])
            print(f"| {geometry} | {beta:g} | {float(shares.mean()):.4f} | [{float(shares.min()):.4f}, "
                  f"{float(shares.max()):.4f}] | {1 / BATCH:.4f} |")
    print("\nSampled estimator, the authors' setting: psi = infonce-mean, K = 256, tau = 1 (4 generators per batch)")
    print("\n| geometry | setting | beta | theory | authors | authors / theory - 1 (mean) |")
    print("|---|---|---|---|---|---|")
    for geometry in ("random", "clustered"):
        batches = [make_batch(geometry, s) for s in seeds]
        for setting in SETTINGS:
            for beta in (0.0, 5.0) if is_hard(setting) else (0.0,):
                values = {}
                for convention in ("theory", "authors"):
                    values[convention] = [
                        statistics.fmean(float(batch_loss(z, y, setting, beta=beta, tau=1.0, num_negatives=256,
                                                          estimator="sampled", psi="infonce-mean",
                                                          generator=torch.Generator().manual_seed(100 + g),
                                                          convention=convention)) for g in range(4))
                        for z, y in batches]
                rel = [a / t - 1 for a, t in zip(values["authors"], values["theory"])]
                print(f"| {geometry} | {setting} | {beta:g} | {statistics.fmean(values['theory']):.4f} | "
                      f"{statistics.fmean(values['authors']):.4f} | {100 * statistics.fmean(rel):+.1f} % |")


if __name__ == "__main__":
    main()
