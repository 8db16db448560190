"""Side by side: the sampled estimator before (per-block torch.multinomial, autograd gather) and after
(alias tables, fused infonce) against the weighted estimator on the same batch, forward + backward.

Run: ``python benchmarks/bench_sampled.py --repeats 5 --threads 2 1``. B = 512, d = 128, K = 256, C = 10
label positives, z on the unit sphere (float32), tau = 0.5, beta = 1 (HUCL). Every repetition runs every
method once, interleaved; the table gives medians over repetitions (ratios paired per repetition).
"new (loss only)" calls ``sampled_values(..., return_negatives=False)`` directly: what ``batch_loss`` costs
once ncgeom/losses/batch.py passes ``return_negatives=want_indices``.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch

from ncgeom.losses import batch_loss
from ncgeom.losses.kernels.sampled import sampled_values
from ncgeom.losses.kernels.structure import LossSpec, PairStructure, pair_structure
from ncgeom.losses.psi import Psi, make_psi
from ncgeom.vocabulary import effective_beta, is_supervised


def old_sampled_values(z, labels, spec: LossSpec, structure: PairStructure, psi: Psi, *, generator, block_size):
    """The implementation before the alias tables (git 8b26dd5, ncgeom/losses/kernels/sampled.py), verbatim."""
    size = z.shape[0]
    num_pos = structure.pair_offsets[1:] - structure.pair_offsets[:-1]
    k_all = structure.num_negatives if spec.k is None else torch.full_like(structure.num_negatives, spec.k)
    k_max = int(k_all[structure.valid].max()) if structure.num_pairs else (spec.k or 1)
    values, negatives = [], []
    for start in range(0, size, block_size):
        stop = min(start + block_size, size)
        rows = torch.nonzero(structure.valid[start:stop]).reshape(-1)
        if rows.numel() == 0:
            continue
        anchors = rows + start
        sim = z[start:stop] @ z.T
        with torch.no_grad():
            logits = spec.b * sim.detach()[rows]
            if spec.supervised:
                logits = logits.masked_fill(labels[anchors][:, None] == labels[None, :], float("-inf"))
            else:
                logits[torch.arange(rows.numel(), device=z.device), anchors] = float("-inf")
            probs = (logits - logits.amax(dim=-1, keepdim=True)).exp_()
            draws_per_row = num_pos[anchors] * k_all[anchors]
            draws = torch.multinomial(probs, int(draws_per_row.max()), replacement=True, generator=generator)
            lo, hi = int(structure.pair_offsets[start]), int(structure.pair_offsets[stop])
            pair_anchor = structure.anchors[lo:hi]
            pair_row = torch.searchsorted(anchors, pair_anchor)
            position = torch.arange(lo, hi, device=z.device) - structure.pair_offsets[pair_anchor]
            k_pair = k_all[pair_anchor]
            cols = position[:, None] * k_pair[:, None] + torch.arange(k_max, device=z.device)[None, :]
            present = torch.arange(k_max, device=z.device)[None, :] < k_pair[:, None]
            idx = torch.gather(draws[pair_row], 1, torch.where(present, cols, torch.zeros_like(cols)))
        local = pair_anchor - start
        t = sim[local[:, None], idx] - sim[local, structure.positives[lo:hi]][:, None]
        pieces = []
        for k in torch.unique(k_pair).tolist():
            sel = torch.nonzero(k_pair == k).reshape(-1)
            pieces.append((sel, psi(t[sel, :k])))
        block_values = torch.zeros(hi - lo, dtype=z.dtype, device=z.device)
        for sel, val in pieces:
            block_values = block_values.index_put((sel,), val)
        values.append(block_values)
        negatives.append(torch.where(present, idx, torch.full_like(idx, -1)))
    return torch.cat(values), torch.cat(negatives)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, nargs="+", default=[2, 1])
    parser.add_argument("--settings", nargs="+", default=["scl", "hucl"])
    parser.add_argument("--psi", nargs="+", default=["infonce", "infonce-mean", "triplet"])
    parser.add_argument("--batch", type=int, default=512)
    parser.add_argument("--dim", type=int, default=128)
    parser.add_argument("--k", type=int, default=256)
    parser.add_argument("--classes", type=int, default=10)
    args = parser.parse_args()
    gen = torch.Generator().manual_seed(0)
    z0 = torch.nn.functional.normalize(torch.randn(args.batch, args.dim, generator=gen), dim=1)
    labels = torch.arange(args.batch) % args.classes
    tau, beta = 0.5, 1.0
    print("| threads | setting | psi | weighted (ms) | old (ms) | new batch_loss (ms) | new loss only (ms) "
          "| old / weighted | new / weighted | new loss only / weighted | old / new loss only |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for threads in args.threads:
        torch.set_num_threads(threads)
        for setting in args.settings:
            spec = LossSpec(supervised=is_supervised(setting), b=effective_beta(setting, beta), tau=tau, k=args.k)
            structure = pair_structure(labels, supervised=spec.supervised)
            for psi_name in args.psi:
                psi = make_psi(psi_name, tau=tau)

                def weighted(z, setting=setting):
                    return batch_loss(z, labels, setting, beta=beta, tau=tau, num_negatives=args.k)

                def old(z, psi=psi, spec=spec, structure=structure):
                    return old_sampled_values(z, labels, spec, structure, psi, generator=gen,
                                              block_size=args.batch)[0].mean()

                def new(z, psi_name=psi_name, setting=setting):
                    return batch_loss(z, labels, setting, beta=beta, tau=tau, num_negatives=args.k,
                                      estimator="sampled", psi=psi_name, generator=gen)

                def quiet(z, psi=psi, spec=spec, structure=structure):
                    return sampled_values(z, labels, spec, structure, psi, generator=gen, block_size=args.batch,
                                          return_negatives=False)[0].mean()

                methods: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
                    "weighted": weighted, "old": old, "new": new, "quiet": quiet}
                times: dict[str, list[float]] = {name: [] for name in methods}
                for rep in range(args.repeats + 1):  # the first round warms up
                    for name, fn in methods.items():
                        z = z0.clone().requires_grad_()
                        start = time.perf_counter()
                        fn(z).backward()
                        if rep:
                            times[name].append(time.perf_counter() - start)
                med = {name: statistics.median(ts) * 1e3 for name, ts in times.items()}

                def ratio(a, b, times=times):
                    return statistics.median(x / y for x, y in zip(times[a], times[b]))

                print(f"| {threads} | {setting} | {psi_name} | {med['weighted']:.1f} | {med['old']:.0f} "
                      f"| {med['new']:.1f} | {med['quiet']:.1f} | {ratio('old', 'weighted'):.0f} "
                      f"| {ratio('new', 'weighted'):.1f} | {ratio('quiet', 'weighted'):.1f} "
                      f"| {ratio('old', 'quiet'):.0f} |", flush=True)


if __name__ == "__main__":
    main()
