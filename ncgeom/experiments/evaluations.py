"""Evaluation of the claim sweeps: finished runs' summaries -> verdict records.

Thresholds, stated once (docs/experiments.md):

- NC: ``etf_distance < NC_ETF`` and ``within_class < NC_WITHIN`` and, for the loss, ``|loss / nc_value - 1|
  < NC_REL_GAP`` (the closed-form NC value of the estimator the run optimizes);
- DC: the smallest value of the normalized class-mean spectrum < ``DC_SPECTRUM`` (one order of magnitude
  below the largest; docs/theory.md, section 8).

A run whose metrics are missing (None/NaN) is "inconclusive", never counted as "not NC" or "no DC";
several seeds of one grid point are averaged (claims 5, 6). Claim 5 compares HSCL with SCL and HUCL
with UCL.

Verdicts: :class:`ncgeom.vocabulary.Verdict`. Each ``_eval_claimN`` takes the
:class:`~ncgeom.experiments.records.RunSummary` list of a claim's sweep (each with its ``config``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Any

import numpy as np
from scipy.stats import spearmanr

from ncgeom.vocabulary import Verdict, effective_beta, is_hard, is_supervised, plain_setting

__all__ = [
    "NC_ETF", "NC_WITHIN", "NC_REL_GAP", "DC_SPECTRUM", "ClaimRecord", "EVALUATIONS",
]

NC_ETF = 0.05
NC_WITHIN = 0.05
NC_REL_GAP = 0.01
DC_SPECTRUM = 0.1


@dataclass(frozen=True)
class ClaimRecord:
    """One row of a claim's verdict table: claim, setting, metric, expected, observed, verdict.

    ``verdict`` is a :class:`~ncgeom.vocabulary.Verdict` (given as one or its JSON spelling), or None for
    a row that only reports an observation.
    """

    claim: str
    setting: str
    metric: str
    expected: str
    observed: str
    verdict: Verdict | None

    def __post_init__(self) -> None:
        if self.verdict is not None:
            object.__setattr__(self, "verdict", Verdict(self.verdict))

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) if f.name != "verdict" else _verdict_text(self.verdict) for f in fields(self)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ClaimRecord:
        names = [f.name for f in fields(cls)]
        if not isinstance(data, dict) or set(data) != set(names):
            raise ValueError(f"claim record: expected exactly the keys {', '.join(names)}, got {sorted(data) if isinstance(data, dict) else data!r}")
        return cls(**data)


def _verdict_text(verdict: Verdict | None) -> str | None:
    return None if verdict is None else verdict.value


def _cfg(s):
    return s.config


def _final(s, key):
    v = s.final.value(key)
    return float("nan") if v is None else float(v)


def _spec_min(s) -> float:
    vals = [v for v in (s.final.value("spectrum") or []) if v is not None]
    return min(vals) if vals else float("nan")


def _rel_gap(s) -> float:
    loss, ncv = s.final.loss, s.nc_value
    return float("nan") if loss is None or not ncv else (loss - ncv) / abs(ncv)


def _is_nc(s, *, gap: bool = True) -> bool:
    ok = _final(s, "etf_distance") < NC_ETF and _final(s, "within_class") < NC_WITHIN
    return ok and (not gap or abs(_rel_gap(s)) < NC_REL_GAP)


def _nc_known(s) -> bool:
    """Whether the NC test has its data (a missing metric must not count as "not NC")."""
    return bool(np.isfinite([_final(s, "etf_distance"), _final(s, "within_class"), _rel_gap(s)]).all())


def _judge(good, known: bool = True) -> Verdict:
    return Verdict.INCONCLUSIVE if not known else (Verdict.HOLDS if good else Verdict.DOES_NOT_HOLD)


def _name(s, *keys) -> str:
    c = _cfg(s)
    return ", ".join(f"{k}={getattr(c, k):g}" if isinstance(getattr(c, k), float) else f"{k}={getattr(c, k)}" for k in keys)


def _nc_obs(s) -> str:
    return (f"etf={_final(s, 'etf_distance'):.3g}, within={_final(s, 'within_class'):.3g}, "
            f"rel_gap={_rel_gap(s):+.2%}, spec_min={_spec_min(s):.2g}")


def _overall(claim: str, statement: str, parts: Sequence[bool | np.bool_ | Verdict], observed: str) -> ClaimRecord:
    """Overall verdict from per-part booleans or verdict strings: all hold -> holds, none -> does not hold.

    "inconclusive" parts (missing metrics) are left out; with no part left the claim is inconclusive.
    """
    if not parts:
        return ClaimRecord(claim, "overall", "-", statement, "no finished runs", Verdict.INCONCLUSIVE)
    verdicts = [(Verdict.HOLDS if p else Verdict.DOES_NOT_HOLD) if isinstance(p, (bool, np.bool_)) else p for p in parts]
    verdicts = [v for v in verdicts if v != Verdict.INCONCLUSIVE]  # missing data decides nothing
    if not verdicts:
        return ClaimRecord(claim, "overall", "-", statement, observed, Verdict.INCONCLUSIVE)
    if all(v == Verdict.HOLDS for v in verdicts):
        verdict = Verdict.HOLDS
    elif all(v == Verdict.DOES_NOT_HOLD for v in verdicts):
        verdict = Verdict.DOES_NOT_HOLD
    else:
        verdict = Verdict.PARTIALLY_HOLDS
    return ClaimRecord(claim, "overall", "-", statement, observed, verdict)


def _ok(summaries):
    return [s for s in summaries if s.status == "completed"]


def _eval_claim1(summaries):
    rows, parts = [], []
    for s in _ok(summaries):
        nc = _is_nc(s)
        parts.append(_judge(nc, _nc_known(s)))
        rows.append(ClaimRecord("1", _name(s, "setting", "beta", "norm"), "etf_distance, within_class, rel_gap",
                                f"NC: < {NC_ETF}, < {NC_WITHIN}, |.| < {NC_REL_GAP:.0%}", _nc_obs(s), parts[-1]))
    return rows + [_overall("1", "SCL/HSCL reach NC for every beta (sphere and ball)", parts,
                            f"{parts.count(Verdict.HOLDS)}/{len(parts)} runs at NC")]


def _eval_claim2(summaries):
    rows, parts = [], []
    for s in _ok(summaries):
        label = _cfg(s).positives == "label"
        nc = _is_nc(s)
        good = nc if label else not nc
        parts.append(_judge(good, _nc_known(s)))
        what = "label positives" if label else f"noise positives, sigma_p={_cfg(s).noise_scale:g}"
        rows.append(ClaimRecord("2", f"UCL, {what}", "etf_distance, within_class, rel_gap",
                                "NC" if label else "not NC", _nc_obs(s), parts[-1]))
    return rows + [_overall("2", "UCL: NC with label positives only", parts,
                            f"{parts.count(Verdict.HOLDS)}/{len(parts)} runs as expected")]


def _trend(summaries, key="etf_distance"):
    """(sorted distinct betas, mean over seeds of ``key`` (a final metric name or a function of a summary))."""
    get = key if callable(key) else (lambda s: _final(s, key))
    betas = np.array(sorted({float(_cfg(s).beta) for s in summaries}))
    vals = np.array([np.mean([get(s) for s in summaries if float(_cfg(s).beta) == b]) for b in betas])
    return betas, vals


def _spearman(x, y) -> float:
    if len(x) < 3:
        return float("nan")
    return float(spearmanr(x, y).statistic)


def _eval_claim3(summaries):
    ok = _ok(summaries)
    rows = []
    for s in sorted(ok, key=lambda s: _cfg(s).beta):
        nc = _is_nc(s)
        rows.append(ClaimRecord("3", _name(s, "setting", "beta"), "etf_distance, within_class, rel_gap",
                                "not NC (beta > 0)", _nc_obs(s),
                                _judge(not nc or _cfg(s).beta == 0, _nc_known(s))))
    betas, etf = _trend(ok)
    rho = _spearman(betas, etf)
    pos = betas > 0
    not_nc = [not _is_nc(s) for s in ok if _cfg(s).beta > 0 and _nc_known(s)]
    trend = (Verdict.INCONCLUSIVE if not np.isfinite(rho) and (len(betas) < 3 or not np.isfinite(etf).all())
             else Verdict.HOLDS if rho >= 0.8 else (Verdict.PARTIALLY_HOLDS if rho > 0 else Verdict.DOES_NOT_HOLD))
    rows.append(ClaimRecord("3", "HUCL, beta grid", "Spearman(beta, etf_distance)", ">= 0.8 (deviation grows)",
                            f"rho={rho:.2f}; etf by beta: " + ", ".join(f"{b:g}:{e:.3f}" for b, e in zip(betas, etf)),
                            trend))
    parts = [trend if trend == Verdict.INCONCLUSIVE else trend == Verdict.HOLDS,
             _judge(all(not_nc), bool(not_nc))]
    return rows + [_overall("3", "HUCL does not reach NC; deviation grows with beta", parts if pos.any() else [],
                            f"not NC for {sum(not_nc)}/{len(not_nc)} beta > 0; rho={rho:.2f}")]


def _eval_claim4(summaries):
    rows, parts = [], []
    for s in _ok(summaries):
        c = _cfg(s)
        growth = _final(s, "mean_norm") / max(float(s.initial.mean_norm or np.nan), 1e-12)
        dc = _spec_min(s) < DC_SPECTRUM
        obs = f"spec_min={_spec_min(s):.2g}, etf={_final(s, 'etf_distance'):.3g}, norm growth x{growth:.2f}"
        known = bool(np.isfinite(_spec_min(s)))
        if c.norm == "none":
            parts.append(_judge(dc, known))
            rows.append(ClaimRecord("4", _name(s, "model", "setting", "beta", "norm"), "spectrum min, mean norm",
                                    f"DC: spec_min < {DC_SPECTRUM}; norms grow", obs, parts[-1]))
        else:
            rows.append(ClaimRecord("4", _name(s, "model", "setting", "beta", "norm"), "spectrum min (reference)",
                                    f"no DC with normalization: spec_min >= {DC_SPECTRUM}", obs, _judge(not dc, known)))
    return rows + [_overall("4", "no normalization -> DC, with or without hard negatives", parts,
                            f"DC in {parts.count(Verdict.HOLDS)}/{len(parts)} unnormalized runs")]


def _eval_claim5(summaries):
    ok = _ok(summaries)
    groups: dict = {}  # (setting, beta) -> test accuracies of its seeds
    for s in ok:
        key = (_cfg(s).setting, effective_beta(_cfg(s).setting, _cfg(s).beta))
        groups.setdefault(key, []).append(_final(s, "test_ncc_accuracy"))
    acc = {k: float(np.mean(v)) for k, v in groups.items() if np.isfinite(v).all()}  # mean over seeds
    rows = [ClaimRecord("5", _name(s, "setting", "beta"), "test_ncc_accuracy, spectrum min", "-",
                        f"acc={_final(s, 'test_ncc_accuracy'):.3f}, spec_min={_spec_min(s):.2g}, etf={_final(s, 'etf_distance'):.3g}",
                        None) for s in ok]
    # each hard setting against its own beta = 0 baseline: HSCL vs SCL, HUCL vs UCL (the paper's comparison)
    hard = {k: v - acc[(plain_setting(k[0]), 0.0)] for k, v in acc.items()
            if is_hard(k[0]) and (plain_setting(k[0]), 0.0) in acc}
    if not hard:
        return rows + [_overall("5", "hardness +40 points NCC accuracy", [], "no hard run with its baseline")]
    parts = [d >= 0.40 for d in hard.values()]
    rows.append(ClaimRecord("5", "digits, MLP, ball, tau=1, d=C-1", "test_ncc_accuracy(hard) - (SCL or UCL)",
                            ">= +0.40", ", ".join(f"{k[0]} beta={k[1]:g}: {d:+.3f}" for k, d in sorted(hard.items())),
                            Verdict.HOLDS if all(parts) else (Verdict.DOES_NOT_HOLD if not any(parts) else Verdict.PARTIALLY_HOLDS)))
    base = ", ".join(f"{k[0]} {v:.3f}" for k, v in sorted(acc.items()) if not is_hard(k[0]))
    return rows + [_overall("5", "moderate hardness improves NCC accuracy by > 40 points", parts,
                            f"baseline accuracy {base}; best hard {max(acc[k] for k in hard):.3f}")]


def _eval_claim6(summaries):
    ok = _ok(summaries)
    sup = [s for s in ok if is_supervised(_cfg(s).setting)]
    uns = [s for s in ok if not is_supervised(_cfg(s).setting)]
    rows = []
    parts = []
    sup = [s for s in sup if np.isfinite(_final(s, "etf_distance"))]
    uns = [s for s in uns if np.isfinite(_final(s, "etf_distance"))]
    if sup:
        b, e = _trend(sup)
        rho = _spearman(b, e)
        best = b[int(np.nanargmin(e))]
        verdict = Verdict.HOLDS if rho <= -0.8 else (Verdict.PARTIALLY_HOLDS if best > b.min() else Verdict.DOES_NOT_HOLD)
        parts.append(verdict)
        rows.append(ClaimRecord("6", "supervised (HSCL), fixed budget", "Spearman(beta, etf_distance)",
                                "<= -0.8 (more hardness, closer to NC)",
                                f"rho={rho:.2f}, best beta={best:g}; etf by beta: " + ", ".join(f"{x:g}:{y:.3f}" for x, y in zip(b, e)),
                                verdict))
    if uns:
        b, e = _trend(uns)
        _, spec = _trend(uns, _spec_min)
        i = int(np.nanargmin(e))
        interior = 0 < i < len(b) - 1
        after = e[i:]
        worse_after = bool(np.all(np.diff(after) >= -1e-3)) and bool(spec[-1] < spec[i])
        verdict = Verdict.HOLDS if interior and 2.0 <= b[i] <= 10.0 and worse_after else (
            Verdict.PARTIALLY_HOLDS if interior or worse_after else Verdict.DOES_NOT_HOLD)
        parts.append(verdict)
        rows.append(ClaimRecord("6", "unsupervised (HUCL), fixed budget", "argmin_beta etf_distance; spec_min beyond it",
                                "interior optimum near beta=5; worse NC and more DC above it",
                                f"best beta={b[i]:g}; etf by beta: " + ", ".join(f"{x:g}:{y:.3f}" for x, y in zip(b, e))
                                + "; spec_min: " + ", ".join(f"{x:g}:{y:.2g}" for x, y in zip(b, spec)), verdict))
    return rows + [_overall("6", "supervised: hardness -> NC; unsupervised: optimal beta ~5", parts,
                            "see rows above")]


def _eval_claim7(summaries):
    rows, parts = [], []
    for s in sorted(_ok(summaries), key=lambda s: (_cfg(s).setting, _cfg(s).beta)):
        c = _cfg(s)
        e0 = float(s.initial.value("etf_distance") or np.nan)
        e1 = _final(s, "etf_distance")
        obs = f"etf {e0:.3f} -> {e1:.3f}, spec_min={_spec_min(s):.2g}"
        if is_supervised(c.setting):
            verdict = _judge(e1 < NC_ETF, bool(np.isfinite(e1)))
            expected = f"stays at NC (etf < {NC_ETF})"
        else:
            drift, dc = e1 - e0 > NC_ETF, _spec_min(s) < DC_SPECTRUM
            verdict = Verdict.HOLDS if drift and dc else (Verdict.PARTIALLY_HOLDS if drift or dc else Verdict.DOES_NOT_HOLD)
            if not np.isfinite([e0, e1, _spec_min(s)]).all():
                verdict = Verdict.INCONCLUSIVE
            expected = f"drifts (etf rises by > {NC_ETF}) with DC (spec_min < {DC_SPECTRUM})"
        parts.append(verdict)
        rows.append(ClaimRecord("7", _name(s, "setting", "beta"), "etf_distance initial -> final, spectrum min",
                                expected, obs, verdict))
    return rows + [_overall("7", "near-NC init: SCL/HSCL stay, HUCL beta 10/30 drifts with DC", parts,
                            f"{parts.count(Verdict.HOLDS)}/{len(parts)} runs as expected")]


def _eval_claim8(summaries):
    ok = sorted(_ok(summaries), key=lambda s: _cfg(s).batch_size)
    rows, parts = [], []
    for s in ok:
        nc = _is_nc(s)
        small = _cfg(s).batch_size < 64
        good = (not nc) if small else nc
        parts.append(_judge(good, _nc_known(s)))
        rows.append(ClaimRecord("8", f"C={_cfg(s).classes}, batch_size={_cfg(s).batch_size}",
                                "etf_distance, within_class, rel_gap", "not NC" if small else "NC", _nc_obs(s), parts[-1]))
    return rows + [_overall("8", "NC for batch 64..512; batch 32 hinders it for large C", parts,
                            f"{parts.count(Verdict.HOLDS)}/{len(parts)} runs as expected")]


EVALUATIONS = {
    "1": _eval_claim1, "2": _eval_claim2, "3": _eval_claim3, "4": _eval_claim4,
    "5": _eval_claim5, "6": _eval_claim6, "7": _eval_claim7, "8": _eval_claim8,
}
