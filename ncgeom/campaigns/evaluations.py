"""Evaluation of the claim sweeps: finished runs' summaries -> verdict records (docs/theory.md, section 9).

Thresholds, stated once (docs/theory.md, section 9, "Verdict rules"):

- NC: ``etf_distance < NC_ETF`` and ``within_class < NC_WITHIN`` and ``|rel_gap| < NC_REL_GAP``, where
  ``rel_gap = (loss - nc_value) / |nc_value|`` and ``nc_value`` is the closed-form NC value of the estimator
  the run optimizes;
- DC: the smallest value of the normalized class-mean spectrum < ``DC_SPECTRUM`` = 1e-2 (two orders of
  magnitude below the largest; docs/theory.md, section 8).

A grid point is a config without its seed. Every metric a rule decides on is averaged over the seeds of
the point and given a 95 % Student t-interval of that mean (:func:`mean_interval`). A rule decides
"holds" only when the interval lies on the claimed side of its threshold, "does not hold" when it lies
on the other side, "inconclusive" when it contains the threshold; with fewer than two seeds (no interval)
every rule is inconclusive. "Not NC" counts only for a converged run: a point whose loss ends above its
own NC value (``rel_gap`` interval above ``NC_REL_GAP``) "did not converge" (inconclusive). Baseline and
control rows are context (verdict None) and do not enter the overall verdict.

Verdicts: :class:`ncgeom.vocabulary.Verdict`. Each ``_eval_claimN`` takes the
:class:`~ncgeom.runs.records.RunSummary` list of a claim's sweep (each with its ``config``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, NamedTuple

import numpy as np

from ncgeom.metrics.outcome import DC_SPECTRUM, NC_ETF, NC_WITHIN
from ncgeom.vocabulary import Verdict, effective_beta, is_hard, is_supervised, plain_setting

__all__ = [
    "NC_ETF", "NC_WITHIN", "NC_REL_GAP", "DC_SPECTRUM", "CONFIDENCE", "INTERVAL_METHOD", "MIN_SEEDS",
    "Estimate", "mean_interval", "combine_verdicts", "ClaimRecord", "EVALUATIONS",
]

NC_REL_GAP = 0.01
CONFIDENCE = 0.95
MIN_SEEDS = 2  # the fewest seeds with a t-interval (n - 1 >= 1 degree of freedom)
INTERVAL_METHOD = "student-t 95% of the mean over seeds (n-1 dof)"

Interval = tuple[float | None, float | None]


class Estimate(NamedTuple):
    """Mean over seeds of one quantity, with its 95 % t-interval [lo, hi] (NaN with fewer than two values)."""

    mean: float
    lo: float
    hi: float
    n: int

    def pair(self) -> Interval:
        """[lo, hi] as JSON writes it: None for an undefined bound."""
        return (_none_if_nan(self.lo), _none_if_nan(self.hi))


def _none_if_nan(x: float) -> float | None:
    return float(x) if np.isfinite(x) else None


def mean_interval(values: Iterable[float | None]) -> Estimate:
    r"""Mean of the finite values and its two-sided 95 % Student t-interval.

    .. math::
        \bar x \pm t_{0.975,\,n-1}\, \frac{s}{\sqrt n}, \qquad s^2 = \frac{1}{n-1}\sum_i (x_i - \bar x)^2

    where ``values`` are the :math:`x_i` (one per seed; None/NaN left out, so :math:`n` counts the finite
    ones). With :math:`n < 2` the interval is undefined (NaN bounds). Example: values 1, 2, 3 give mean 2,
    s = 1, half-width :math:`t_{0.975,2}/\sqrt3 = 4.303/1.732 = 2.484`.
    """
    v = np.array([x for x in values if x is not None and np.isfinite(x)], dtype=float)
    if v.size == 0:
        return Estimate(float("nan"), float("nan"), float("nan"), 0)
    mean = float(v.mean())
    if v.size < MIN_SEEDS:
        return Estimate(mean, float("nan"), float("nan"), int(v.size))
    from scipy.stats import t as student_t  # scipy.stats takes 0.6 s to import: only when a claim is evaluated

    half = float(student_t.ppf(0.5 + CONFIDENCE / 2, v.size - 1) * v.std(ddof=1) / np.sqrt(v.size))
    return Estimate(mean, mean - half, mean + half, int(v.size))


def _below(e: Estimate, threshold: float) -> Verdict:
    """Claimed: the mean is below ``threshold``. Holds if hi < threshold, not if lo >= threshold."""
    return Verdict.HOLDS if e.hi < threshold else Verdict.DOES_NOT_HOLD if e.lo >= threshold else Verdict.INCONCLUSIVE


def _above(e: Estimate, threshold: float) -> Verdict:
    """Claimed: the mean is above ``threshold``. Holds if lo > threshold, not if hi <= threshold."""
    return Verdict.HOLDS if e.lo > threshold else Verdict.DOES_NOT_HOLD if e.hi <= threshold else Verdict.INCONCLUSIVE


def combine_verdicts(parts: Iterable[Verdict]) -> Verdict:
    """Verdict of a conjunction: all hold -> holds; some hold, some not -> partially holds; none holds and
    one fails -> does not hold; holds mixed only with inconclusive (or nothing) -> inconclusive."""
    parts = list(parts)
    fails = Verdict.DOES_NOT_HOLD in parts
    some = Verdict.HOLDS in parts or Verdict.PARTIALLY_HOLDS in parts
    if parts and all(p == Verdict.HOLDS for p in parts):
        return Verdict.HOLDS
    if fails:
        return Verdict.PARTIALLY_HOLDS if some else Verdict.DOES_NOT_HOLD
    return Verdict.PARTIALLY_HOLDS if Verdict.PARTIALLY_HOLDS in parts else Verdict.INCONCLUSIVE


@dataclass(frozen=True)
class ClaimRecord:
    """One row of a claim's verdict table.

    ``verdict`` is a :class:`~ncgeom.vocabulary.Verdict` (given as one or its JSON spelling), or None for a
    context row (a baseline or control: shown, never part of the overall verdict). ``n_seeds``: seeds of
    the row's grid point (overall row: the fewest over the rows it decides on). ``interval``: for each
    quantity the row decides on, the 95 % interval [lo, hi] of its mean over seeds (``interval_method``;
    None bounds with one seed).
    """

    claim: str
    setting: str
    metric: str
    expected: str
    observed: str
    verdict: Verdict | None
    n_seeds: int | None = None
    interval: Mapping[str, Interval] = field(default_factory=dict)
    interval_method: str | None = None

    def __post_init__(self) -> None:
        if self.verdict is not None:
            object.__setattr__(self, "verdict", Verdict(self.verdict))
        object.__setattr__(self, "interval", {str(k): (v[0], v[1]) for k, v in self.interval.items()})

    def to_dict(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out.update(verdict=None if self.verdict is None else self.verdict.value,
                   interval={k: list(v) for k, v in self.interval.items()})
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ClaimRecord:
        names = [f.name for f in fields(cls)]
        if not isinstance(data, dict) or set(data) != set(names):
            raise ValueError(f"claim record: expected exactly the keys {', '.join(names)}, got {sorted(data) if isinstance(data, dict) else data!r}")
        return cls(**data)

    def interval_text(self) -> str:
        """``name [lo, hi]; ...`` (rel_gap in percent), or ``-`` without intervals."""
        if not self.interval:
            return "-"
        return "; ".join(f"{k} undefined" if lo is None or hi is None else f"{k} [{_fmt(k, lo)}, {_fmt(k, hi)}]"
                         for k, (lo, hi) in self.interval.items())


def _fmt(key: str, x: float | None) -> str:
    if x is None or not np.isfinite(x):
        return "nan"
    return f"{x:+.2%}" if "rel_gap" in key else f"{x:.3g}"


# --- reading one run -------------------------------------------------------------------------------

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


def _etf_rise(s) -> float:
    e0 = s.initial.value("etf_distance")
    return float("nan") if e0 is None else _final(s, "etf_distance") - float(e0)


def _ok(summaries):
    return [s for s in summaries if s.status == "completed"]


def _points(summaries) -> list[list]:
    """The completed runs grouped by grid point (config without its seed), in first-seen order."""
    groups: dict = {}
    for s in _ok(summaries):
        groups.setdefault(dataclasses.replace(_cfg(s), seed=0), []).append(s)
    return list(groups.values())


def _est(runs, get: str | Callable) -> Estimate:
    fn = get if callable(get) else (lambda s: _final(s, get))
    return mean_interval(fn(s) for s in runs)


def _name(s, *keys) -> str:
    c = _cfg(s)
    return ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k in keys for v in [getattr(c, k)])


# --- rows ------------------------------------------------------------------------------------------

# the thresholds an interval is compared with, for the "marginal" note of a row
_THRESHOLDS = {"etf_distance": (NC_ETF,), "within_class": (NC_WITHIN,), "rel_gap": (-NC_REL_GAP, NC_REL_GAP),
               "spec_min": (DC_SPECTRUM,), "etf_rise": (NC_ETF,), "spearman_rho": (0.0,), "accuracy_gain": (0.40,)}


def _row(claim, setting, metric, expected, verdict, est: Mapping[str, Estimate], n: int, notes=(),
         shown: Mapping[str, float] | None = None) -> ClaimRecord:
    """A row deciding on ``est`` (or context if ``verdict`` is None); one seed -> inconclusive.

    ``observed``: the means over seeds (of ``est`` and ``shown``), then ``notes`` and a "marginal" note for
    each interval that contains its threshold.
    """
    if verdict is not None and n < MIN_SEEDS:
        verdict = Verdict.INCONCLUSIVE
        notes = (*notes, "no interval with one seed: undecided" if n == 1 else "no seed with a value: undecided")
    marginal = [f"{k} interval contains {_fmt(k, x)}" for k, e in est.items() for x in _THRESHOLDS.get(k, ())
                if e.lo <= x <= e.hi]
    means = {**{k: e.mean for k, e in est.items()}, **(shown or {})}
    text = f"mean over {n} seed(s): " + ", ".join(f"{k}={_fmt(k, v)}" for k, v in means.items())
    text += "".join(f"; {note}" for note in notes) + ("; marginal: " + ", ".join(marginal) if marginal else "")
    return ClaimRecord(claim, setting, metric, expected, text, verdict, n,
                       {k: e.pair() for k, e in est.items()}, INTERVAL_METHOD)


def _overall(claim: str, statement: str, rows: Sequence[ClaimRecord]) -> ClaimRecord:
    """The overall row: :func:`combine_verdicts` of the rows that decide (context rows left out)."""
    decided = [r for r in rows if r.verdict is not None]
    verdicts = [r.verdict for r in decided if r.verdict is not None]
    if not verdicts:
        return ClaimRecord(claim, "overall", "-", statement, "no finished runs", Verdict.INCONCLUSIVE, 0)
    counts = {v: verdicts.count(v) for v in Verdict}
    observed = ", ".join(f"{n} {v.value}" for v, n in counts.items() if n) + f" (of {len(verdicts)} rows)"
    return ClaimRecord(claim, "overall", "-", statement, observed, combine_verdicts(verdicts),
                       min(r.n_seeds or 0 for r in decided))


_NC_METRIC = "etf_distance, within_class, rel_gap"
_NC = f"NC: etf < {NC_ETF}, within < {NC_WITHIN}, |rel_gap| < {NC_REL_GAP:.0%}"
_NOT_NC = (f"not NC (etf >= {NC_ETF} or within >= {NC_WITHIN} or rel_gap <= -{NC_REL_GAP:.0%}), "
           f"converged (rel_gap <= +{NC_REL_GAP:.0%})")


def _nc_est(runs) -> dict[str, Estimate]:
    return {"etf_distance": _est(runs, "etf_distance"), "within_class": _est(runs, "within_class"),
            "rel_gap": _est(runs, _rel_gap)}


def _nc_verdict(est: Mapping[str, Estimate]) -> Verdict:
    """Claimed NC: every interval inside its bound -> holds; one wholly outside -> does not hold."""
    gap = est["rel_gap"]
    parts = [_below(est["etf_distance"], NC_ETF), _below(est["within_class"], NC_WITHIN),
             _below(gap, NC_REL_GAP), _above(gap, -NC_REL_GAP)]
    return Verdict.DOES_NOT_HOLD if Verdict.DOES_NOT_HOLD in parts else combine_verdicts(parts)


def _not_nc_verdict(est: Mapping[str, Estimate]) -> tuple[Verdict, tuple[str, ...]]:
    """Claimed not NC, at convergence: NC wholly ruled out and the loss not above its own NC value."""
    gap = est["rel_gap"]
    if gap.lo > NC_REL_GAP:
        return Verdict.INCONCLUSIVE, (f"did not converge: loss {gap.mean:+.2%} above its own NC value",)
    nc = _nc_verdict(est)
    if nc == Verdict.HOLDS:
        return Verdict.DOES_NOT_HOLD, ()
    if nc == Verdict.DOES_NOT_HOLD and gap.hi <= NC_REL_GAP:
        return Verdict.HOLDS, ()
    return Verdict.INCONCLUSIVE, (("convergence undecided",) if nc == Verdict.DOES_NOT_HOLD else ())


def _nc_row(claim, setting, runs, *, expect_nc: bool) -> ClaimRecord:
    est = _nc_est(runs)
    verdict, notes = (_nc_verdict(est), ()) if expect_nc else _not_nc_verdict(est)
    return _row(claim, setting, _NC_METRIC, _NC if expect_nc else _NOT_NC, verdict, est, len(runs), notes,
                {"spec_min": _est(runs, _spec_min).mean})


def _per_seed_spearman(runs, get: Callable = lambda s: _final(s, "etf_distance")) -> Estimate:
    """Spearman rho between the applied beta and ``get`` over the grid points, one rho per seed."""
    by_seed: dict[int, dict[float, list[float]]] = {}
    for s in runs:
        beta = effective_beta(_cfg(s).setting, _cfg(s).beta)
        by_seed.setdefault(_cfg(s).seed, {}).setdefault(beta, []).append(get(s))
    from scipy.stats import spearmanr  # imported when used, as in mean_interval

    rhos = []
    for curve in by_seed.values():
        b = np.array(sorted(curve))
        y = np.array([np.mean(curve[x]) for x in b])
        ok = len(b) >= 3 and np.isfinite(y).all() and np.ptp(y) > 0  # a constant curve has no rank order
        rhos.append(float(spearmanr(b, y).statistic) if ok else float("nan"))
    return mean_interval(rhos)


def _trend_row(claim, setting, runs, expected, verdict_of: Callable[[Estimate], Verdict]) -> ClaimRecord:
    """A row on the per-seed Spearman rho of ``runs`` (n_seeds: the fewest seeds of its grid points)."""
    rho = _per_seed_spearman(runs)
    n = min(len(p) for p in _points(runs))
    notes = ["etf by beta: " + _curve(_by_beta(runs), lambda s: _final(s, "etf_distance"))]
    if rho.n < n:
        notes.append(f"rho defined for {rho.n} of {n} seeds (it needs >= 3 betas and a non-constant curve)")
    return _row(claim, setting, "Spearman(beta, etf_distance), one rho per seed", expected, verdict_of(rho),
                {"spearman_rho": rho}, n, notes)


def _by_beta(runs) -> dict[float, list]:
    out: dict[float, list] = {}
    for s in sorted(runs, key=lambda s: effective_beta(_cfg(s).setting, _cfg(s).beta)):
        out.setdefault(effective_beta(_cfg(s).setting, _cfg(s).beta), []).append(s)
    return out


def _paired(runs_a, runs_b, get: Callable) -> Estimate:
    """Mean over the seeds common to both of ``get(a) - get(b)`` (same seed: same data and initialization)."""
    a = {_cfg(s).seed: get(s) for s in runs_a}
    b = {_cfg(s).seed: get(s) for s in runs_b}
    return mean_interval(a[k] - b[k] for k in sorted(a.keys() & b.keys()))


def _curve(runs_by_beta: Mapping[float, list], get: Callable) -> str:
    return ", ".join(f"{b:g}:{_est(r, get).mean:.3g}" for b, r in runs_by_beta.items())


# --- the claims ------------------------------------------------------------------------------------

def _eval_claim1(claim: str, summaries):
    rows = [_nc_row(claim, _name(p[0], "setting", "beta", "norm"), p, expect_nc=True) for p in _points(summaries)]
    return rows + [_overall(claim, "SCL/HSCL reach NC for every beta (sphere and ball)", rows)]


def _eval_claim2(claim: str, summaries):
    rows = []
    for p in _points(summaries):
        label = _cfg(p[0]).positives == "label"
        what = "label positives" if label else f"noise positives, sigma_p={_cfg(p[0]).noise_scale:g}"
        rows.append(_nc_row(claim, f"UCL, {what}", p, expect_nc=label))
    return rows + [_overall(claim, "UCL: NC with label positives only", rows)]


def _eval_claim3(claim: str, summaries):
    points = sorted(_points(summaries), key=lambda p: effective_beta(_cfg(p[0]).setting, _cfg(p[0]).beta))
    rows = []
    for p in points:
        if effective_beta(_cfg(p[0]).setting, _cfg(p[0]).beta) == 0:  # UCL: NC is its optimum (Theorem 3)
            rows.append(_row(claim, _name(p[0], "setting", "beta") + " (baseline)", _NC_METRIC,
                             "context: beta = 0 is UCL, at NC", None, _nc_est(p), len(p),
                             shown={"spec_min": _est(p, _spec_min).mean}))
        else:
            rows.append(_nc_row(claim, _name(p[0], "setting", "beta"), p, expect_nc=False))
    ok = [s for p in points for s in p]
    if ok:
        rows.append(_trend_row(claim, "HUCL, beta grid", ok, "> 0 (deviation grows)", lambda rho: _above(rho, 0.0)))
    return rows + [_overall(claim, "HUCL does not reach NC; deviation grows with beta", rows)]


def _eval_claim4(claim: str, summaries):
    rows = []
    for p in _points(summaries):
        c = _cfg(p[0])
        est = {"spec_min": _est(p, _spec_min)}
        growth = _est(p, lambda s: _final(s, "mean_norm") / max(float(s.initial.mean_norm or np.nan), 1e-12)).mean
        shown = {"etf_distance": _est(p, "etf_distance").mean, "norm_growth": growth}
        setting = _name(p[0], "model", "setting", "beta", "norm")
        if c.norm == "none":
            rows.append(_row(claim, setting, "spectrum min (mean norm shown)", f"DC: spec_min < {DC_SPECTRUM:g}",
                             _below(est["spec_min"], DC_SPECTRUM), est, len(p), shown=shown))
        else:
            rows.append(_row(claim, setting + " (control)", "spectrum min", "context: normalized, no DC expected",
                             None, est, len(p), shown=shown))
    return rows + [_overall(claim, "no normalization -> DC, with or without hard negatives", rows)]


def _eval_claim5(claim: str, summaries):
    groups: dict[tuple[str, float], list] = {}  # (setting, applied beta) -> runs over seeds
    for s in _ok(summaries):
        groups.setdefault((_cfg(s).setting, effective_beta(_cfg(s).setting, _cfg(s).beta)), []).append(s)
    acc = lambda s: _final(s, "test_ncc_accuracy")  # noqa: E731
    rows = []
    for (setting, beta), runs in sorted(groups.items()):
        if not is_hard(setting):
            rows.append(_row(claim, f"{setting} (baseline)", "test_ncc_accuracy", "context", None,
                             {"test_ncc_accuracy": _est(runs, acc)}, len(runs)))
            continue
        base = groups.get((plain_setting(setting), 0.0), [])
        gain = _paired(runs, base, acc)  # HSCL vs SCL, HUCL vs UCL (the paper's comparison), seed by seed
        rows.append(_row(claim, f"{setting}, beta={beta:g}", f"test_ncc_accuracy - {plain_setting(setting)}'s",
                         ">= +0.40", _above(gain, 0.40), {"accuracy_gain": gain}, gain.n,
                         () if base else (f"no {plain_setting(setting)} baseline",),
                         {"test_ncc_accuracy": _est(runs, acc).mean}))
    return rows + [_overall(claim, "moderate hardness improves NCC accuracy by > 40 points", rows)]


def _eval_claim6(claim: str, summaries):
    ok = [s for s in _ok(summaries) if np.isfinite(_final(s, "etf_distance"))]
    etf = lambda s: _final(s, "etf_distance")  # noqa: E731
    rows = []
    sup = [s for s in ok if is_supervised(_cfg(s).setting)]
    if sup:
        rows.append(_trend_row(claim, "supervised (HSCL), fixed budget", sup, "< 0 (more hardness, closer to NC)",
                               lambda rho: _below(rho, 0.0)))
    uns = _by_beta([s for s in ok if not is_supervised(_cfg(s).setting)])
    if uns:
        betas = list(uns)
        best = min(betas, key=lambda b: _est(uns[b], etf).mean)
        lo, hi = betas[0], betas[-1]
        est = {f"etf(beta={lo:g}) - etf(beta*)": _paired(uns[lo], uns[best], etf),
               f"etf(beta={hi:g}) - etf(beta*)": _paired(uns[hi], uns[best], etf),
               f"spec_min(beta*) - spec_min(beta={hi:g})": _paired(uns[best], uns[hi], _spec_min)}
        parts = [_above(e, 0.0) for e in est.values()]  # interior optimum; worse NC and more DC above it
        parts.append(Verdict.HOLDS if 2.0 <= best <= 10.0 else Verdict.DOES_NOT_HOLD)
        rows.append(_row(claim, "unsupervised (HUCL), fixed budget", "etf and spec_min against the best beta*",
                         "interior optimum beta* in [2, 10]; worse NC and more DC above it",
                         combine_verdicts(parts), est, min(e.n for e in est.values()),
                         (f"beta*={best:g} (argmin of the mean etf)", "etf by beta: " + _curve(uns, etf),
                          "spec_min by beta: " + _curve(uns, _spec_min))))
    return rows + [_overall(claim, "supervised: hardness -> NC; unsupervised: optimal beta ~5", rows)]


def _eval_claim7(claim: str, summaries):
    rows = []
    for p in sorted(_points(summaries), key=lambda p: (_cfg(p[0]).setting, _cfg(p[0]).beta)):
        shown = {"initial_etf": _est(p, lambda s: float(s.initial.value("etf_distance") or np.nan)).mean}
        if is_supervised(_cfg(p[0]).setting):
            est = {"etf_distance": _est(p, "etf_distance")}
            rows.append(_row(claim, _name(p[0], "setting", "beta"), "final etf_distance", f"stays at NC: < {NC_ETF}",
                             _below(est["etf_distance"], NC_ETF), est, len(p), shown=shown))
        else:
            est = {"etf_rise": _est(p, _etf_rise), "spec_min": _est(p, _spec_min)}
            verdict = combine_verdicts([_above(est["etf_rise"], NC_ETF), _below(est["spec_min"], DC_SPECTRUM)])
            rows.append(_row(claim, _name(p[0], "setting", "beta"), "etf_distance final - initial, spectrum min",
                             f"drifts (rise > {NC_ETF}) with DC (spec_min < {DC_SPECTRUM:g})", verdict, est, len(p),
                             shown=shown))
    return rows + [_overall(claim, "near-NC init: SCL/HSCL stay, HUCL beta 10/30 drifts with DC", rows)]


def _eval_claim8(claim: str, summaries):
    rows = [_nc_row(claim, f"C={_cfg(p[0]).classes}, batch_size={_cfg(p[0]).batch_size}", p,
                    expect_nc=_cfg(p[0]).batch_size >= 64)
            for p in sorted(_points(summaries), key=lambda p: (_cfg(p[0]).classes, _cfg(p[0]).batch_size))]
    return rows + [_overall(claim, "NC for batch 64..512; batch 32 hinders it for large C", rows)]


EVALUATIONS = {
    "1": _eval_claim1, "2": _eval_claim2, "3": _eval_claim3, "4": _eval_claim4,
    "5": _eval_claim5, "6": _eval_claim6, "7": _eval_claim7, "8": _eval_claim8,
}
