"""Evaluation of the claim sweeps: finished runs' summaries -> verdict records.

Thresholds, stated once (docs/experiments.md):

- NC: ``etf_distance < NC_ETF`` and ``within_class < NC_WITHIN`` and, for the loss, ``|loss / nc_value - 1|
  < NC_REL_GAP`` (the closed-form NC value of the estimator the run optimizes);
- DC: the smallest value of the normalized class-mean spectrum < ``DC_SPECTRUM`` (one order of magnitude
  below the largest; theory.md section 8).

Verdicts: ``holds``, ``partially holds``, ``does not hold``, ``inconclusive``. Each ``evaluate_claimN``
takes the list of summary.json objects of a claim's sweep (each with its ``config``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = [
    "NC_ETF", "NC_WITHIN", "NC_REL_GAP", "DC_SPECTRUM", "VERDICTS", "ClaimRecord", "EVALUATIONS",
]

NC_ETF = 0.05
NC_WITHIN = 0.05
NC_REL_GAP = 0.01
DC_SPECTRUM = 0.1
VERDICTS: tuple[str, ...] = ("holds", "partially holds", "does not hold", "inconclusive")


@dataclass(frozen=True)
class ClaimRecord:
    """One row of docs/results.md: claim, setting, metric, expected, observed, verdict."""

    claim: str
    setting: str
    metric: str
    expected: str
    observed: str
    verdict: str

    def to_dict(self) -> dict:
        return dict(self.__dict__)



def _cfg(s):
    return s["config"]


def _final(s, key):
    v = s["final"].get(key)
    return float("nan") if v is None else float(v)


def _spec_min(s) -> float:
    vals = [v for v in (s["final"].get("spectrum") or []) if v is not None]
    return min(vals) if vals else float("nan")


def _rel_gap(s) -> float:
    loss, ncv = s["final"].get("loss"), s.get("nc_value")
    return float("nan") if loss is None or not ncv else (loss - ncv) / abs(ncv)


def _is_nc(s, *, gap: bool = True) -> bool:
    ok = _final(s, "etf_distance") < NC_ETF and _final(s, "within_class") < NC_WITHIN
    return ok and (not gap or abs(_rel_gap(s)) < NC_REL_GAP)


def _name(s, *keys) -> str:
    c = _cfg(s)
    return ", ".join(f"{k}={c[k]:g}" if isinstance(c[k], float) else f"{k}={c[k]}" for k in keys)


def _nc_obs(s) -> str:
    return (f"etf={_final(s, 'etf_distance'):.3g}, within={_final(s, 'within_class'):.3g}, "
            f"rel_gap={_rel_gap(s):+.2%}, spec_min={_spec_min(s):.2g}")


def _overall(claim, statement, parts: list, observed: str) -> ClaimRecord:
    """Overall verdict from per-part booleans or verdict strings: all hold -> holds, none -> does not hold."""
    if not parts:
        return ClaimRecord(claim, "overall", "-", statement, "no finished runs", "inconclusive")
    parts = [("holds" if p else "does not hold") if isinstance(p, (bool, np.bool_)) else p for p in parts]
    if all(p == "holds" for p in parts):
        verdict = "holds"
    elif all(p == "does not hold" for p in parts):
        verdict = "does not hold"
    else:
        verdict = "partially holds"
    return ClaimRecord(claim, "overall", "-", statement, observed, verdict)


def _ok(summaries):
    return [s for s in summaries if s.get("status") == "completed"]


def _eval_claim1(summaries):
    rows, parts = [], []
    for s in _ok(summaries):
        nc = _is_nc(s)
        parts.append(nc)
        rows.append(ClaimRecord("1", _name(s, "setting", "beta", "norm"), "etf_distance, within_class, rel_gap",
                                f"NC: < {NC_ETF}, < {NC_WITHIN}, |.| < {NC_REL_GAP:.0%}", _nc_obs(s),
                                "holds" if nc else "does not hold"))
    return rows + [_overall("1", "SCL/HSCL reach NC for every beta (sphere and ball)", parts,
                            f"{sum(parts)}/{len(parts)} runs at NC")]


def _eval_claim2(summaries):
    rows, parts = [], []
    for s in _ok(summaries):
        label = _cfg(s)["positives"] == "label"
        nc = _is_nc(s)
        good = nc if label else not nc
        parts.append(good)
        what = "label positives" if label else f"noise positives, sigma_p={_cfg(s)['noise_scale']:g}"
        rows.append(ClaimRecord("2", f"UCL, {what}", "etf_distance, within_class, rel_gap",
                                "NC" if label else "not NC", _nc_obs(s), "holds" if good else "does not hold"))
    return rows + [_overall("2", "UCL: NC with label positives only", parts, f"{sum(parts)}/{len(parts)} runs as expected")]


def _trend(summaries, key="etf_distance"):
    pts = sorted((_cfg(s)["beta"], _final(s, key)) for s in summaries)
    betas = np.array([p[0] for p in pts])
    vals = np.array([p[1] for p in pts])
    return betas, vals


def _spearman(x, y) -> float:
    from scipy.stats import spearmanr

    if len(x) < 3:
        return float("nan")
    return float(spearmanr(x, y).statistic)


def _eval_claim3(summaries):
    ok = _ok(summaries)
    rows = []
    for s in sorted(ok, key=lambda s: _cfg(s)["beta"]):
        nc = _is_nc(s)
        rows.append(ClaimRecord("3", _name(s, "setting", "beta"), "etf_distance, within_class, rel_gap",
                                "not NC (beta > 0)", _nc_obs(s),
                                "holds" if (not nc or _cfg(s)["beta"] == 0) else "does not hold"))
    betas, etf = _trend(ok)
    rho = _spearman(betas, etf)
    pos = betas > 0
    not_nc = [not _is_nc(s) for s in ok if _cfg(s)["beta"] > 0]
    rows.append(ClaimRecord("3", "HUCL, beta grid", "Spearman(beta, etf_distance)", ">= 0.8 (deviation grows)",
                            f"rho={rho:.2f}; etf by beta: " + ", ".join(f"{b:g}:{e:.3f}" for b, e in zip(betas, etf)),
                            "holds" if rho >= 0.8 else ("partially holds" if rho > 0 else "does not hold")))
    parts = [rho >= 0.8, bool(not_nc) and all(not_nc)]
    return rows + [_overall("3", "HUCL does not reach NC; deviation grows with beta", parts if pos.any() else [],
                            f"not NC for {sum(not_nc)}/{len(not_nc)} beta > 0; rho={rho:.2f}")]


def _eval_claim4(summaries):
    rows, parts = [], []
    for s in _ok(summaries):
        c = _cfg(s)
        growth = _final(s, "mean_norm") / max(float(s["initial"].get("mean_norm") or np.nan), 1e-12)
        dc = _spec_min(s) < DC_SPECTRUM
        obs = f"spec_min={_spec_min(s):.2g}, etf={_final(s, 'etf_distance'):.3g}, norm growth x{growth:.2f}"
        if c["norm"] == "none":
            parts.append(dc)
            rows.append(ClaimRecord("4", _name(s, "model", "setting", "beta", "norm"), "spectrum min, mean norm",
                                    f"DC: spec_min < {DC_SPECTRUM}; norms grow", obs, "holds" if dc else "does not hold"))
        else:
            rows.append(ClaimRecord("4", _name(s, "model", "setting", "beta", "norm"), "spectrum min (reference)",
                                    f"no DC with normalization: spec_min >= {DC_SPECTRUM}", obs,
                                    "holds" if not dc else "does not hold"))
    return rows + [_overall("4", "no normalization -> DC, with or without hard negatives", parts,
                            f"DC in {sum(parts)}/{len(parts)} unnormalized runs")]


def _eval_claim5(summaries):
    ok = _ok(summaries)
    acc = {(_cfg(s)["setting"], _cfg(s)["beta"] if _cfg(s)["setting"] in ("hscl", "hucl") else 0.0): s for s in ok}
    rows = [ClaimRecord("5", _name(s, "setting", "beta"), "test_ncc_accuracy, spectrum min", "-",
                        f"acc={_final(s, 'test_ncc_accuracy'):.3f}, spec_min={_spec_min(s):.2g}, etf={_final(s, 'etf_distance'):.3g}",
                        "-") for s in ok]
    base = [_final(s, "test_ncc_accuracy") for (st, _), s in acc.items() if st in ("scl", "ucl")]
    hard = {k: _final(s, "test_ncc_accuracy") for k, s in acc.items() if k[0] in ("hscl", "hucl")}
    if not base or not hard:
        return rows + [_overall("5", "hardness +40 points NCC accuracy", [], "")]
    ref = max(base)
    parts = [v - ref >= 0.40 for v in hard.values()]
    rows.append(ClaimRecord("5", "digits, MLP, ball, tau=1, d=C-1", "test_ncc_accuracy(hard) - max(SCL, UCL)",
                            ">= +0.40", ", ".join(f"{k[0]} beta={k[1]:g}: {v - ref:+.3f}" for k, v in sorted(hard.items())),
                            "holds" if all(parts) else ("does not hold" if not any(parts) else "partially holds")))
    return rows + [_overall("5", "moderate hardness improves NCC accuracy by > 40 points", parts,
                            f"best SCL/UCL accuracy {ref:.3f}; best hard {max(hard.values()):.3f}")]


def _eval_claim6(summaries):
    ok = _ok(summaries)
    sup = [s for s in ok if _cfg(s)["setting"] in ("scl", "hscl")]
    uns = [s for s in ok if _cfg(s)["setting"] in ("ucl", "hucl")]
    rows = []
    parts = []
    if sup:
        b, e = _trend(sup)
        rho = _spearman(b, e)
        best = b[int(np.nanargmin(e))]
        verdict = "holds" if rho <= -0.8 else ("partially holds" if best > b.min() else "does not hold")
        parts.append(verdict)
        rows.append(ClaimRecord("6", "supervised (HSCL), fixed budget", "Spearman(beta, etf_distance)",
                                "<= -0.8 (more hardness, closer to NC)",
                                f"rho={rho:.2f}, best beta={best:g}; etf by beta: " + ", ".join(f"{x:g}:{y:.3f}" for x, y in zip(b, e)),
                                verdict))
    if uns:
        b, e = _trend(uns)
        _, sm = _trend(uns, "rankme")
        spec = np.array([_spec_min(s) for s in sorted(uns, key=lambda s: _cfg(s)["beta"])])
        i = int(np.nanargmin(e))
        interior = 0 < i < len(b) - 1
        after = e[i:]
        worse_after = bool(np.all(np.diff(after) >= -1e-3)) and bool(spec[-1] < spec[i])
        verdict = "holds" if interior and 2.0 <= b[i] <= 10.0 and worse_after else (
            "partially holds" if interior or worse_after else "does not hold")
        parts.append(verdict)
        rows.append(ClaimRecord("6", "unsupervised (HUCL), fixed budget", "argmin_beta etf_distance; spec_min beyond it",
                                "interior optimum near beta=5; worse NC and more DC above it",
                                f"best beta={b[i]:g}; etf by beta: " + ", ".join(f"{x:g}:{y:.3f}" for x, y in zip(b, e))
                                + "; spec_min: " + ", ".join(f"{x:g}:{y:.2g}" for x, y in zip(b, spec)), verdict))
    return rows + [_overall("6", "supervised: hardness -> NC; unsupervised: optimal beta ~5", parts,
                            "see rows above")]


def _eval_claim7(summaries):
    rows, parts = [], []
    for s in sorted(_ok(summaries), key=lambda s: (_cfg(s)["setting"], _cfg(s)["beta"])):
        c = _cfg(s)
        e0, e1 = float(s["initial"]["etf_distance"]), _final(s, "etf_distance")
        obs = f"etf {e0:.3f} -> {e1:.3f}, spec_min={_spec_min(s):.2g}"
        if c["setting"] in ("scl", "hscl"):
            verdict = "holds" if e1 < NC_ETF else "does not hold"
            expected = f"stays at NC (etf < {NC_ETF})"
        else:
            drift, dc = e1 - e0 > NC_ETF, _spec_min(s) < DC_SPECTRUM
            verdict = "holds" if drift and dc else ("partially holds" if drift or dc else "does not hold")
            expected = f"drifts (etf rises by > {NC_ETF}) with DC (spec_min < {DC_SPECTRUM})"
        parts.append(verdict)
        rows.append(ClaimRecord("7", _name(s, "setting", "beta"), "etf_distance initial -> final, spectrum min",
                                expected, obs, verdict))
    return rows + [_overall("7", "near-NC init: SCL/HSCL stay, HUCL beta 10/30 drifts with DC", parts,
                            f"{parts.count('holds')}/{len(parts)} runs as expected")]


def _eval_claim8(summaries):
    ok = sorted(_ok(summaries), key=lambda s: _cfg(s)["batch_size"])
    rows, parts = [], []
    for s in ok:
        nc = _is_nc(s)
        small = _cfg(s)["batch_size"] < 64
        good = (not nc) if small else nc
        parts.append(good)
        rows.append(ClaimRecord("8", f"C={_cfg(s)['classes']}, batch_size={_cfg(s)['batch_size']}",
                                "etf_distance, within_class, rel_gap", "not NC" if small else "NC", _nc_obs(s),
                                "holds" if good else "does not hold"))
    return rows + [_overall("8", "NC for batch 64..512; batch 32 hinders it for large C", parts,
                            f"{sum(parts)}/{len(parts)} runs as expected")]


EVALUATIONS = {
    "1": _eval_claim1, "2": _eval_claim2, "3": _eval_claim3, "4": _eval_claim4,
    "5": _eval_claim5, "6": _eval_claim6, "7": _eval_claim7, "8": _eval_claim8,
}
