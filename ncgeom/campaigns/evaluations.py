"""The claims' evaluations: finished runs' summaries -> verdict rows (docs/theory.md, section 9).

Each ``evaluate_claimN(claim_id, summaries)`` cuts a claim's runs into rows (the overall row is the claim's own,
:meth:`ncgeom.campaigns.claims.Claim.evaluate`) and decides each with the rules of
:mod:`ncgeom.campaigns.rules` (interval of the mean and every seed on the claimed side; a row about where training
ends decides only on converged runs). The criteria, each stated once:

- **NC** of a run: ``etf_distance < NC_ETF``, ``within_class < NC_WITHIN`` (:mod:`ncgeom.metrics.outcome`) and
  ``|rel_gap| < NC_REL_GAP``, with ``rel_gap = (loss - nc_value) / |nc_value|`` and ``nc_value`` the closed-form
  NC value of the estimator the run optimizes; **not NC**: the negation, seed by seed and interval by interval;
- **DC** of a run: the smallest normalized class-mean spectrum value below ``DC_SPECTRUM`` = 1e-2; its mean over
  seeds is taken on the log10 scale;
- claim-specific constants, fixed before the confirmatory runs: :data:`ACCURACY_GAIN` (claim 5),
  :data:`BETA_STAR_RANGE` (claim 6's "optimal beta about 5"), :data:`DRIFT_RISE` (claim 7's drift).

A grid point is a config without its seed. Baselines and controls are context rows (verdict None).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from ncgeom.campaigns.rules import (
    ABOVE,
    BELOW,
    ClaimRecord,
    Estimate,
    Side,
    Tally,
    all_of,
    convergence_gate,
    decide,
    mean_interval,
    row,
)
from ncgeom.metrics.outcome import DC_SPECTRUM, NC_ETF, NC_WITHIN
from ncgeom.runs.records import RunSummary
from ncgeom.vocabulary import Verdict, effective_beta, is_hard, is_supervised, plain_setting

__all__ = ["NC_ETF", "NC_WITHIN", "NC_REL_GAP", "DC_SPECTRUM", "ACCURACY_GAIN", "BETA_STAR_RANGE", "DRIFT_RISE",
           "EVALUATIONS", "run_is_nc", "run_is_dc"]

#: Largest |loss - nc_value| / |nc_value| of NC.
NC_REL_GAP = 0.01
#: Claim 5: the gain in test NCC accuracy over the plain setting that "more than 40 points" means.
ACCURACY_GAIN = 0.40
#: Claim 6: "an optimal beta (about 5)": each seed's beta* (the beta of its smallest final etf_distance) in this range.
BETA_STAR_RANGE = (3.0, 7.0)
#: Claim 7: a run "drifts away" from its near-NC start when its etf_distance rises by more than this (NC's bound).
DRIFT_RISE = NC_ETF

_NC_RULE = (f"end state, every seed converged; NC: etf < {NC_ETF}, within < {NC_WITHIN}, |rel_gap| < {NC_REL_GAP:.0%}: "
            "the three intervals inside and every seed at NC")
_NOT_NC_RULE = (f"end state, every seed converged; not NC: an interval of etf (< {NC_ETF}), within (< {NC_WITHIN}) "
                f"or |rel_gap| (< {NC_REL_GAP:.0%}) wholly outside its bound and every seed not at NC")
_DC_RULE = (f"at the budget (an unnormalized loss has no minimizer: its runs never stop moving); DC: the interval "
            f"of the mean log10 spectrum minimum below log10({DC_SPECTRUM:g}) and every seed DC")
_NC_METRIC = "etf_distance, within_class, rel_gap"
_NC = f"NC: etf < {NC_ETF}, within < {NC_WITHIN}, |rel_gap| < {NC_REL_GAP:.0%}"
_THRESHOLDS = {"etf_distance": (NC_ETF,), "within_class": (NC_WITHIN,), "rel_gap": (-NC_REL_GAP, NC_REL_GAP),
               "log10 spectrum_min": (math.log10(DC_SPECTRUM),), "etf_rise": (DRIFT_RISE,), "spearman_rho": (0.0,),
               "accuracy_gain": (ACCURACY_GAIN,)}


# --- reading one run -------------------------------------------------------------------------------

def _final(s: RunSummary, key: str) -> float:
    v = s.final.value(key)
    return float("nan") if v is None else float(v)


def _rel_gap(s: RunSummary) -> float:
    return float("nan") if s.rel_gap is None else float(s.rel_gap)


def _spec_min(s: RunSummary) -> float:
    return float("nan") if s.spectrum_min is None else float(s.spectrum_min)


def _etf_rise(s: RunSummary) -> float:
    e0 = s.initial.value("etf_distance")
    return float("nan") if e0 is None else _final(s, "etf_distance") - float(e0)


def run_is_nc(s: RunSummary) -> bool | None:
    """NC of one run (module docstring); None when a value is missing."""
    values = (_final(s, "etf_distance"), _final(s, "within_class"), _rel_gap(s))
    if not all(np.isfinite(values)):
        return None
    return values[0] < NC_ETF and values[1] < NC_WITHIN and abs(values[2]) < NC_REL_GAP


def run_is_dc(s: RunSummary) -> bool | None:
    """DC of one run (module docstring); None when its spectrum is missing."""
    v = _spec_min(s)
    return None if not np.isfinite(v) else v < DC_SPECTRUM


def _not(flag: bool | None) -> bool | None:
    return None if flag is None else not flag


def _ok(summaries: Sequence[RunSummary]) -> list[RunSummary]:
    return [s for s in summaries if s.status == "completed"]


def _points(summaries: Sequence[RunSummary]) -> list[list[RunSummary]]:
    """The runs grouped by grid point (config without its seed), in first-seen order; a diverged run stays in its
    point, where the convergence gate counts it (the row then decides nothing)."""
    groups: dict = {}
    for s in summaries:
        groups.setdefault(dataclasses.replace(s.config, seed=0), []).append(s)
    return list(groups.values())


def _est(runs: Sequence[RunSummary], get: str | Callable[[RunSummary], float], *, log: bool = False) -> Estimate:
    fn = get if callable(get) else (lambda s: _final(s, get))
    return mean_interval((fn(s) for s in runs), log=log)


def _name(s: RunSummary, *keys: str) -> str:
    """The row label: ``key=value`` of each key the run reads (:meth:`~ncgeom.runs.Config.applies`: no beta for SCL)."""
    c = s.config
    return ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k in keys if c.applies(k)
                     for v in [getattr(c, k)])


def _beta(s: RunSummary) -> float:
    return effective_beta(s.config.setting, s.config.beta)


# --- the shared rows -----------------------------------------------------------------------------------

def _nc_est(runs: Sequence[RunSummary]) -> dict[str, Estimate]:
    return {"etf_distance": _est(runs, "etf_distance"), "within_class": _est(runs, "within_class"),
            "rel_gap": _est(runs, _rel_gap)}


def _nc_interval(est: Mapping[str, Estimate]) -> Verdict:
    """NC from the intervals: every interval inside its bound -> holds; one wholly outside -> does not hold."""
    gap = est["rel_gap"]
    return all_of([BELOW(NC_ETF).interval_verdict(est["etf_distance"]),
                   BELOW(NC_WITHIN).interval_verdict(est["within_class"]),
                   BELOW(NC_REL_GAP).interval_verdict(gap), ABOVE(-NC_REL_GAP).interval_verdict(gap)])


_FLIP = {Verdict.HOLDS: Verdict.DOES_NOT_HOLD, Verdict.DOES_NOT_HOLD: Verdict.HOLDS}


def _nc_row(claim: str, setting: str, runs: Sequence[RunSummary], *, expect_nc: bool) -> ClaimRecord:
    """A row claiming NC (``expect_nc``) or not NC at the end of training (module docstring)."""
    est = _nc_est(runs)
    interval = _nc_interval(est)
    flags = [run_is_nc(s) for s in runs]
    if not expect_nc:
        interval = _FLIP.get(interval, Verdict.INCONCLUSIVE)
        flags = [_not(f) for f in flags]
    tally = Tally.of(flags)
    return row(claim, setting, _NC_METRIC, _NC if expect_nc else f"not {_NC}", rule=_NC_RULE if expect_nc else _NOT_NC_RULE,
               verdict=decide(interval, tally), est=est, n=len(runs), tally=tally, gate=convergence_gate(runs),
               shown={"spectrum_min": _est(runs, _spec_min, log=True).mean}, thresholds=_THRESHOLDS)


def _dc_row(claim: str, setting: str, runs: Sequence[RunSummary], *, shown: Mapping[str, float]) -> ClaimRecord:
    """A row claiming DC at the budget (claim 4 without normalization): the convergence counts are shown, not
    required (docs/theory.md, section 9, "Fixed budget")."""
    est = {"log10 spectrum_min": _est(runs, _spec_min, log=True)}
    tally = Tally.of(run_is_dc(s) for s in runs)
    return row(claim, setting, "spectrum min (log10 mean)", f"DC: spec_min < {DC_SPECTRUM:g}", rule=_DC_RULE,
               verdict=decide(BELOW(DC_SPECTRUM).interval_verdict(est["log10 spectrum_min"]), tally),
               est=est, n=len(runs), tally=tally, notes=[convergence_gate(runs).note.split(":")[0]], shown=shown,
               thresholds=_THRESHOLDS)


def _spearman_by_seed(runs: Sequence[RunSummary], get: Callable[[RunSummary], float]) -> list[float | None]:
    """One Spearman rho per seed between the applied beta and ``get`` over that seed's grid points (None when the
    seed has fewer than 3 betas or a constant curve)."""
    from scipy.stats import spearmanr  # imported when used, as in mean_interval

    by_seed: dict[int, dict[float, list[float]]] = {}
    for s in runs:
        by_seed.setdefault(s.config.seed, {}).setdefault(_beta(s), []).append(get(s))
    rhos: list[float | None] = []
    for curve in by_seed.values():
        b = np.array(sorted(curve))
        y = np.array([np.mean(curve[x]) for x in b])
        ok = len(b) >= 3 and np.isfinite(y).all() and np.ptp(y) > 0  # a constant curve has no rank order
        rhos.append(float(spearmanr(b, y).statistic) if ok else None)
    return rhos


def _trend_row(claim: str, setting: str, runs: Sequence[RunSummary], expected: str, side: Side, *,
               end_state: bool) -> ClaimRecord:
    """A row on the per-seed Spearman rho between beta and the final etf_distance (module docstring)."""
    rhos = _spearman_by_seed(runs, lambda s: _final(s, "etf_distance"))
    est = {"spearman_rho": mean_interval(rhos)}
    tally = Tally.of(side.on_side(r) for r in rhos)
    notes = ["etf by beta: " + _curve(_by_beta(runs), lambda s: _final(s, "etf_distance"))]
    rule = ("end state, every run converged; " if end_state else "at the budget (a fixed number of epochs); ") + \
        f"one Spearman rho per seed: the interval of the mean {side.kind} {side.threshold:g} and every seed's rho too"
    return row(claim, setting, "Spearman(beta, etf_distance), one rho per seed", expected, rule=rule,
               verdict=decide(side.interval_verdict(est["spearman_rho"]), tally), est=est, n=len(rhos), tally=tally,
               gate=convergence_gate(runs) if end_state else None, notes=notes, thresholds=_THRESHOLDS)


def _by_beta(runs: Sequence[RunSummary]) -> dict[float, list[RunSummary]]:
    out: dict[float, list[RunSummary]] = {}
    for s in sorted(runs, key=_beta):
        out.setdefault(_beta(s), []).append(s)
    return out


def _paired(runs_a: Sequence[RunSummary], runs_b: Sequence[RunSummary],
            get: Callable[[RunSummary], float]) -> dict[int, float]:
    """Seed -> ``get(a) - get(b)`` over the seeds common to both (same seed: same data and initialization)."""
    a = {s.config.seed: get(s) for s in runs_a}
    b = {s.config.seed: get(s) for s in runs_b}
    return {k: a[k] - b[k] for k in sorted(a.keys() & b.keys())}


def _curve(runs_by_beta: Mapping[float, Sequence[RunSummary]], get: Callable[[RunSummary], float]) -> str:
    return ", ".join(f"{b:g}:{_est(r, get).mean:.3g}" for b, r in runs_by_beta.items())


# --- the claims ------------------------------------------------------------------------------------

def evaluate_claim1(claim: str, summaries: Sequence[RunSummary]) -> list[ClaimRecord]:
    rows = [_nc_row(claim, _name(p[0], "setting", "beta", "norm"), p, expect_nc=True) for p in _points(summaries)]
    return rows


def evaluate_claim2(claim: str, summaries: Sequence[RunSummary]) -> list[ClaimRecord]:
    rows = []
    for p in _points(summaries):
        label = p[0].config.positives == "label"
        what = "label positives" if label else f"noise positives, sigma_p={p[0].config.noise_scale:g}"
        rows.append(_nc_row(claim, f"UCL, {what}", p, expect_nc=label))
    return rows


def evaluate_claim3(claim: str, summaries: Sequence[RunSummary]) -> list[ClaimRecord]:
    points = sorted(_points(summaries), key=lambda p: _beta(p[0]))
    rows = []
    for p in points:
        if _beta(p[0]) == 0:  # UCL: NC is its optimum (Theorem 3)
            rows.append(row(claim, _name(p[0], "setting", "beta") + " (baseline)", _NC_METRIC,
                            "context: beta = 0 is UCL, at NC", rule="context", verdict=None, est=_nc_est(p), n=len(p),
                            gate=convergence_gate(p), shown={"spectrum_min": _est(p, _spec_min, log=True).mean}))
        else:
            rows.append(_nc_row(claim, _name(p[0], "setting", "beta"), p, expect_nc=False))
    hard = [s for p in points if _beta(p[0]) > 0 for s in p]  # the trend of the HUCL points only, context left out
    if hard:
        rows.append(_trend_row(claim, "HUCL, beta > 0", hard, "> 0 (deviation grows)", ABOVE(0.0), end_state=True))
    return rows


def evaluate_claim4(claim: str, summaries: Sequence[RunSummary]) -> list[ClaimRecord]:
    rows = []
    for p in _points(summaries):
        c = p[0].config
        growth = _est(p, lambda s: _final(s, "mean_norm") / max(float(s.initial.mean_norm or np.nan), 1e-12)).mean
        shown = {"etf_distance": _est(p, "etf_distance").mean, "norm_growth": growth}
        keys = ["classes", "model"] + (["depth"] if c.model in ("mlp", "deep_linear") else []) + \
            ["setting", "beta", "norm"]
        setting = _name(p[0], *keys)
        if c.norm == "none":
            rows.append(_dc_row(claim, setting, p, shown=shown))
        else:
            est = {"log10 spectrum_min": _est(p, _spec_min, log=True)}
            tally = Tally.of(run_is_dc(s) for s in p)
            rows.append(row(claim, setting + " (control)", "spectrum min (log10 mean)",
                            "context: normalized features", rule="context", verdict=None, est=est, n=len(p),
                            tally=tally, gate=convergence_gate(p), shown=shown))
    return rows


def evaluate_claim5(claim: str, summaries: Sequence[RunSummary]) -> list[ClaimRecord]:
    groups: dict[tuple[str, float], list[RunSummary]] = {}  # (setting, applied beta) -> runs over seeds
    for s in _ok(summaries):
        groups.setdefault((s.config.setting, _beta(s)), []).append(s)
    acc = lambda s: _final(s, "test_ncc_accuracy")  # noqa: E731
    rule = (f"at the budget (the paper's number of epochs); paired gain over the plain setting, seed by seed: the "
            f"interval above +{ACCURACY_GAIN:.2f} and every seed's gain too; a baseline above {1 - ACCURACY_GAIN:.2f} "
            "leaves no room for the gain: context, no verdict")
    rows = []
    for (setting, beta), runs in sorted(groups.items()):
        if not is_hard(setting):
            rows.append(row(claim, f"{setting} (baseline)", "test_ncc_accuracy", "context", rule="context",
                            verdict=None, est={"test_ncc_accuracy": _est(runs, acc)}, n=len(runs)))
            continue
        base = groups.get((plain_setting(setting), 0.0), [])
        gains = _paired(runs, base, acc)  # HSCL vs SCL, HUCL vs UCL (the paper's comparison), seed by seed
        est = {"accuracy_gain": mean_interval(gains.values())}
        tally = Tally.of(ABOVE(ACCURACY_GAIN).on_side(g) for g in gains.values())
        base_acc = _est(base, acc).mean if base else float("nan")
        room = not base or (np.isfinite(base_acc) and base_acc + ACCURACY_GAIN <= 1.0)
        verdict = decide(ABOVE(ACCURACY_GAIN).interval_verdict(est["accuracy_gain"]), tally) if room else None
        notes = [] if base else [f"no {plain_setting(setting)} baseline"]
        if base and not room:
            notes.append(f"no room: the baseline's accuracy {base_acc:.3f} + {ACCURACY_GAIN:.2f} exceeds 1, so the "
                         "gain cannot be reached on this setup: context")
        rows.append(row(claim, f"{setting}, beta={beta:g}", f"test_ncc_accuracy - {plain_setting(setting)}'s",
                        f">= +{ACCURACY_GAIN:.2f}", rule=rule, verdict=verdict, est=est, n=len(gains), tally=tally,
                        notes=notes, shown={"test_ncc_accuracy": _est(runs, acc).mean}, thresholds=_THRESHOLDS))
    return rows


def evaluate_claim6(claim: str, summaries: Sequence[RunSummary]) -> list[ClaimRecord]:
    ok = [s for s in _ok(summaries) if np.isfinite(_final(s, "etf_distance"))]
    rows = []
    sup = [s for s in ok if is_supervised(s.config.setting)]
    if sup:
        rows.append(_trend_row(claim, "supervised (HSCL), fixed budget", sup, "< 0 (more hardness, closer to NC)",
                               BELOW(0.0), end_state=False))
    uns = [s for s in ok if not is_supervised(s.config.setting)]
    if uns:
        rows += _claim6_unsupervised(claim, uns)
    return rows


def _claim6_unsupervised(claim: str, runs: Sequence[RunSummary]) -> list[ClaimRecord]:
    """Per seed: beta* (its beta of the smallest final etf), then three rows: beta* in BETA_STAR_RANGE; etf at the
    largest beta above etf at beta*; DC at the largest beta and not at beta*."""
    by_seed: dict[int, dict[float, RunSummary]] = {}
    for s in runs:
        by_seed.setdefault(s.config.seed, {})[_beta(s)] = s
    lo, hi = BETA_STAR_RANGE
    stars = {seed: min(curve, key=lambda b: _final(curve[b], "etf_distance")) for seed, curve in by_seed.items()}
    top = max(_beta(s) for s in runs)
    at_budget = "at the budget (a fixed number of epochs); "
    star_tally = Tally.of(lo <= b <= hi for b in stars.values())
    star_verdict = (Verdict.HOLDS if star_tally.on_side == star_tally.n and star_tally.n >= 2 else
                    Verdict.DOES_NOT_HOLD if star_tally.other_side > star_tally.n / 2 else Verdict.INCONCLUSIVE)
    rows = [row(claim, "unsupervised (HUCL): optimal beta", "beta* = argmin over beta of etf_distance, per seed",
                f"beta* in [{lo:g}, {hi:g}] (about 5)", rule=at_budget + "every seed's beta* in the range (no interval: "
                "beta* lives on the grid)", verdict=star_verdict, est={}, n=star_tally.n, tally=star_tally,
                notes=["beta* by seed: " + ", ".join(f"{seed}:{b:g}" for seed, b in sorted(stars.items())),
                       "etf by beta: " + _curve(_by_beta(runs), lambda s: _final(s, "etf_distance"))])]
    rises = {seed: _final(curve[top], "etf_distance") - _final(curve[stars[seed]], "etf_distance")
             for seed, curve in by_seed.items() if top in curve}
    rise_est = {"etf(beta_max) - etf(beta*)": mean_interval(rises.values())}
    rise_tally = Tally.of(ABOVE(0.0).on_side(v) for v in rises.values())
    rows.append(row(claim, "unsupervised (HUCL): worse NC above beta*", f"etf at beta={top:g} minus at beta*",
                    "> 0", rule=at_budget + "paired per seed: the interval above 0 and every seed's difference too",
                    verdict=decide(ABOVE(0.0).interval_verdict(rise_est["etf(beta_max) - etf(beta*)"]), rise_tally),
                    est=rise_est, n=len(rises), tally=rise_tally))
    transition = [None if run_is_dc(curve[top]) is None or run_is_dc(curve[stars[seed]]) is None else
                  bool(run_is_dc(curve[top])) and not run_is_dc(curve[stars[seed]])
                  for seed, curve in by_seed.items() if top in curve]
    dc_tally = Tally.of(transition)
    dc_verdict = (Verdict.HOLDS if dc_tally.on_side == dc_tally.n and dc_tally.n >= 2 else
                  Verdict.DOES_NOT_HOLD if dc_tally.other_side > dc_tally.n / 2 else Verdict.INCONCLUSIVE)
    rows.append(row(claim, "unsupervised (HUCL): more DC above beta*", f"DC at beta={top:g} and not at beta*",
                    "DC appears above beta*", rule=at_budget + "per seed, DC (spec_min < 1e-2) at the largest beta "
                    "and not at beta*; every seed", verdict=dc_verdict, est={}, n=dc_tally.n, tally=dc_tally,
                    notes=["spec_min by beta: " + _curve(_by_beta(runs), _spec_min)]))
    return rows


def evaluate_claim7(claim: str, summaries: Sequence[RunSummary]) -> list[ClaimRecord]:
    rows = []
    for p in sorted(_points(summaries), key=lambda p: (p[0].config.setting, p[0].config.beta)):
        shown = {"initial_etf": _est(p, lambda s: float(s.initial.value("etf_distance") or np.nan)).mean}
        if is_supervised(p[0].config.setting):
            est = {"etf_distance": _est(p, "etf_distance")}
            tally = Tally.of(BELOW(NC_ETF).on_side(_final(s, "etf_distance")) for s in p)
            rows.append(row(claim, _name(p[0], "setting", "beta"), "final etf_distance", f"stays at NC: < {NC_ETF}",
                            rule=f"end state, every seed converged; the interval below {NC_ETF} and every seed",
                            verdict=decide(BELOW(NC_ETF).interval_verdict(est["etf_distance"]), tally), est=est,
                            n=len(p), tally=tally, gate=convergence_gate(p), shown=shown, thresholds=_THRESHOLDS))
            continue
        est = {"etf_rise": _est(p, _etf_rise), "log10 spectrum_min": _est(p, _spec_min, log=True)}
        flags = [None if run_is_dc(s) is None or not np.isfinite(_etf_rise(s)) else
                 _etf_rise(s) > DRIFT_RISE and bool(run_is_dc(s)) for s in p]
        tally = Tally.of(flags)
        interval = all_of([ABOVE(DRIFT_RISE).interval_verdict(est["etf_rise"]),
                           BELOW(DC_SPECTRUM).interval_verdict(est["log10 spectrum_min"])])
        rows.append(row(claim, _name(p[0], "setting", "beta"), "etf_distance final - initial, spectrum min",
                        f"drifts (rise > {DRIFT_RISE}) with DC (spec_min < {DC_SPECTRUM:g})",
                        rule=f"end state, every seed converged; the rise interval above {DRIFT_RISE}, the log10 spectrum "
                        f"minimum interval below log10({DC_SPECTRUM:g}), and every seed drifting with DC",
                        verdict=decide(interval, tally), est=est, n=len(p), tally=tally, gate=convergence_gate(p),
                        shown=shown, thresholds=_THRESHOLDS))
    return rows


def evaluate_claim8(claim: str, summaries: Sequence[RunSummary]) -> list[ClaimRecord]:
    rows = [_nc_row(claim, f"C={p[0].config.classes}, batch_size={p[0].config.batch_size}", p,
                    expect_nc=p[0].config.batch_size >= 64)
            for p in sorted(_points(summaries), key=lambda p: (p[0].config.classes, p[0].config.batch_size))]
    return rows


EVALUATIONS: dict[str, Callable[[str, Sequence[RunSummary]], list[ClaimRecord]]] = {
    "1": evaluate_claim1, "2": evaluate_claim2, "3": evaluate_claim3, "4": evaluate_claim4,
    "5": evaluate_claim5, "6": evaluate_claim6, "7": evaluate_claim7, "8": evaluate_claim8,
}
