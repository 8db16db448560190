"""Side by side, forward + backward on the same batch: the weighted estimator, the sampled estimator with
``draws="pair"`` (k alias-table draws for every pair) and with ``draws="anchor"`` (one inverse-CDF k-tuple
per anchor, shared by its pairs; docs/theory.md section 7), and, with ``--old``, the implementation before
the alias tables (per-block torch.multinomial, autograd gather; about 2 s a call).

Run: ``python benchmarks/bench_sampled.py --repeats 7 --threads 2 1 --psi infonce triplet``. B = 512,
d = 128, K = 256, C = 10 label positives, z on the unit sphere (float32), tau = 0.5, beta = 1 (used by HUCL).
Every repetition runs every method once, interleaved; the table gives medians over repetitions and the
median of the per-repetition ratios. "tables / weighted" times the alias tables of the whole batch alone
(what draws="pair" builds and draws="anchor" does not). ``--variance-draws N`` adds a second table: over N
generator states at the same batch, the variance of the mean loss and the total variance of its gradient,
draws="anchor" over draws="pair" (pairs of one anchor share their draws: docs/theory.md section 7).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from functools import partial

import torch

from ncgeom.losses import batch_loss
from ncgeom.losses.kernels.draws import block_alias_tables, excluded_columns
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
    parser.add_argument("--repeats", type=int, default=7, help="timed repetitions (0: no timing table)")
    parser.add_argument("--threads", type=int, nargs="+", default=[2, 1])
    parser.add_argument("--settings", nargs="+", default=["scl", "hucl"])
    parser.add_argument("--psi", nargs="+", default=["infonce", "triplet"])
    parser.add_argument("--batch", type=int, default=512)
    parser.add_argument("--dim", type=int, default=128)
    parser.add_argument("--k", type=int, default=256)
    parser.add_argument("--classes", type=int, default=10)
    parser.add_argument("--old", action="store_true", help="also time the implementation before the alias tables")
    parser.add_argument("--variance-draws", type=int, default=0, help="generator states for the variance table")
    args = parser.parse_args()
    gen = torch.Generator().manual_seed(0)
    z0 = torch.nn.functional.normalize(torch.randn(args.batch, args.dim, generator=gen), dim=1)
    labels = torch.arange(args.batch) % args.classes
    tau, beta = 0.5, 1.0
    if args.repeats > 0:
        print_timings(z0, labels, gen, args, tau, beta)
    if args.variance_draws:
        print_variance(z0, labels, args, tau, beta)


def print_timings(z0: torch.Tensor, labels: torch.Tensor, gen: torch.Generator, args: argparse.Namespace, tau: float,
                  beta: float) -> None:
    """The timing table: every method once per repetition, interleaved; medians and paired ratios."""
    print("| threads | setting | psi | weighted ms | pair ms | anchor ms | tables / weighted | pair / weighted "
          "| anchor / weighted | target anchor / weighted <= 3 |" + (" old ms | old / pair |" if args.old else ""))
    print("|---" * (10 + 2 * args.old) + "|")
    for threads in args.threads:
        torch.set_num_threads(threads)
        for setting in args.settings:
            spec = LossSpec(supervised=is_supervised(setting), b=effective_beta(setting, beta), tau=tau, k=args.k)
            structure = pair_structure(labels, supervised=spec.supervised)
            excluded = excluded_columns(labels, spec, 0, args.batch)
            for psi_name in args.psi:
                psi = make_psi(psi_name, tau=tau)

                def weighted(z, setting=setting):
                    return batch_loss(z, labels, setting, beta=beta, tau=tau, num_negatives=args.k)

                def sampled(z, draws, psi_name=psi_name, setting=setting):
                    return batch_loss(z, labels, setting, beta=beta, tau=tau, num_negatives=args.k,
                                      estimator="sampled", psi=psi_name, generator=gen, draws=draws)

                def tables(z, spec=spec, excluded=excluded):
                    with torch.no_grad():
                        block_alias_tables(z @ z.T, excluded, spec.b)
                    return None

                def old(z, psi=psi, spec=spec, structure=structure):
                    return old_sampled_values(z, labels, spec, structure, psi, generator=gen,
                                              block_size=args.batch)[0].mean()

                methods: dict[str, Callable[[torch.Tensor], torch.Tensor | None]] = {
                    "weighted": weighted, "pair": partial(sampled, draws="pair"),
                    "anchor": partial(sampled, draws="anchor"), "tables": tables}
                if args.old:
                    methods["old"] = old
                times: dict[str, list[float]] = {name: [] for name in methods}
                for rep in range(args.repeats + 1):  # the first round warms up
                    for name, fn in methods.items():
                        z = z0.clone().requires_grad_()
                        start = time.perf_counter()
                        loss = fn(z)
                        if loss is not None:
                            loss.backward()
                        if rep:
                            times[name].append(time.perf_counter() - start)
                med = {name: statistics.median(ts) * 1e3 for name, ts in times.items()}

                def ratio(a, b, times=times):
                    return statistics.median(x / y for x, y in zip(times[a], times[b]))

                anchor_ratio = ratio("anchor", "weighted")
                line = (f"| {threads} | {setting} | {psi_name} | {med['weighted']:.1f} | {med['pair']:.1f} "
                        f"| {med['anchor']:.1f} | {ratio('tables', 'weighted'):.1f} | {ratio('pair', 'weighted'):.1f} "
                        f"| {anchor_ratio:.2f} | {'met' if anchor_ratio <= 3 else 'not met'} |")
                if args.old:
                    line += f" {med['old']:.0f} | {ratio('old', 'pair'):.0f} |"
                print(line, flush=True)


def print_variance(z0: torch.Tensor, labels: torch.Tensor, args: argparse.Namespace, tau: float, beta: float) -> None:
    """Var of the mean loss and total variance of its gradient over generator states, anchor / pair."""
    print("\n| setting | psi | draws | mean loss | sd of the mean loss | anchor / pair: var of loss "
          "| anchor / pair: total var of the gradient |")
    print("|---|---|---|---|---|---|---|")
    for setting in args.settings:
        for psi_name in args.psi:
            stats = {}
            for draws in ("pair", "anchor"):
                losses, grads = [], []
                for seed in range(args.variance_draws):
                    z = z0.clone().requires_grad_()
                    loss = batch_loss(z, labels, setting, beta=beta, tau=tau, num_negatives=args.k,
                                      estimator="sampled", psi=psi_name, draws=draws,
                                      generator=torch.Generator().manual_seed(seed))
                    (grad,) = torch.autograd.grad(loss, z)
                    losses.append(float(loss.detach()))
                    grads.append(grad.double())
                stacked = torch.stack(grads)
                stats[draws] = (statistics.fmean(losses), statistics.variance(losses),
                                float(stacked.var(dim=0).sum()))
            for draws, (mean, var, _) in stats.items():
                ratios = (f"| {stats['anchor'][1] / stats['pair'][1]:.1f} | {stats['anchor'][2] / stats['pair'][2]:.1f} |"
                          if draws == "anchor" else "| | |")
                print(f"| {setting} | {psi_name} | {draws} | {mean:.5f} | {var ** 0.5:.2e} {ratios}", flush=True)


if __name__ == "__main__":
    main()
