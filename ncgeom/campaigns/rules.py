"""The verdict rules of the claims, stated once (docs/theory.md, section 9, "Verdict rules"; pre-registered there).

A claim's evaluation (:mod:`ncgeom.campaigns.evaluations`) cuts the finished runs of its sweep into rows (a grid
point, or a comparison of points) and decides each row with these rules:

- **Estimate**: for every quantity a row decides on, the mean over the row's seeds with a two-sided 95 % Student
  t-interval of that mean (:func:`mean_interval`); a quantity that lives on a log scale (the smallest normalized
  spectrum value) is averaged on the log10 scale (``log=True``).
- **Seeds on the claimed side**: every seed is also decided alone (its own value on the claimed side or not); the
  row counts them (``seeds_on_side`` of ``n_seeds``).
- **Decision** (:func:`decide`): a row *holds* when the interval lies on the claimed side **and** every seed is on
  it (:data:`SEED_FRACTION` = 1, fixed before any confirmatory run); it *does not hold* when the interval lies on
  the other side and more than half of the seeds (:data:`MAJORITY`) are on the other side; otherwise, and with
  fewer than :data:`MIN_SEEDS` seeds with a value, it is *inconclusive*.
- **Convergence** (:func:`convergence_gate`): a row about where training *ends* (NC reached or not, DC or not)
  decides only when every seed's run converged (:mod:`ncgeom.runs.convergence`; the summary's ``convergence``);
  otherwise it is inconclusive and says how many seeds did not converge and how they stand. A row about a *fixed
  budget* (claims 5 and 6: where the runs are after the paper's number of epochs) is decided at the budget, and
  says so.
- **Overall** (:func:`overall_row`): :func:`combine_verdicts` of the deciding rows; context rows (baselines,
  controls) decide nothing.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, NamedTuple

import numpy as np

from ncgeom.runs.records import RunSummary
from ncgeom.validate import require_keys
from ncgeom.vocabulary import Verdict

__all__ = [
    "CONFIDENCE", "MIN_SEEDS", "SEED_FRACTION", "MAJORITY", "INTERVAL_METHOD", "Estimate", "mean_interval",
    "Side", "BELOW", "ABOVE", "Tally", "decide", "all_of", "combine_verdicts", "ConvergenceGate", "convergence_gate",
    "ClaimRecord", "row", "overall_row",
]

CONFIDENCE = 0.95
MIN_SEEDS = 2  # the fewest seeds with a t-interval (n - 1 >= 1 degree of freedom)
#: "holds" needs this fraction of the row's seeds on the claimed side (1: every seed).
SEED_FRACTION = 1.0
#: "does not hold" needs more than this fraction of the row's seeds on the other side.
MAJORITY = 0.5
INTERVAL_METHOD = "student-t 95% of the mean over seeds (n-1 dof); log10 scale for spectrum minima"

Interval = tuple[float | None, float | None]


class Estimate(NamedTuple):
    """Mean over seeds of one quantity, with its 95 % t-interval [lo, hi] (NaN with fewer than two values); ``log``:
    the values were averaged as log10 (mean, lo, hi are then log10 values)."""

    mean: float
    lo: float
    hi: float
    n: int
    log: bool = False

    def pair(self) -> Interval:
        """[lo, hi] as JSON writes it: None for an undefined bound."""
        return (_none_if_nan(self.lo), _none_if_nan(self.hi))


def _none_if_nan(x: float) -> float | None:
    return float(x) if np.isfinite(x) else None


def mean_interval(values: Iterable[float | None], *, log: bool = False) -> Estimate:
    r"""Mean of the finite values and its two-sided 95 % Student t-interval (of log10 of the values with ``log``).

    .. math::
        \bar x \pm t_{0.975,\,n-1}\, \frac{s}{\sqrt n}, \qquad s^2 = \frac{1}{n-1}\sum_i (x_i - \bar x)^2

    where ``values`` are the :math:`x_i` (one per seed; None, NaN and, with ``log``, values <= 0 left out, so
    :math:`n` counts the defined ones). With :math:`n < 2` the interval is undefined (NaN bounds). Example: values
    1, 2, 3 give mean 2, s = 1, half-width :math:`t_{0.975,2}/\sqrt3 = 4.303/1.732 = 2.484`.
    """
    xs = [float(x) for x in values if x is not None and np.isfinite(x) and (not log or x > 0)]
    v = np.log10(np.array(xs)) if log else np.array(xs, dtype=float)
    if v.size == 0:
        return Estimate(float("nan"), float("nan"), float("nan"), 0, log)
    mean = float(v.mean())
    if v.size < MIN_SEEDS:
        return Estimate(mean, float("nan"), float("nan"), int(v.size), log)
    from scipy.stats import t as student_t  # scipy.stats takes 0.6 s to import: only when a claim is evaluated

    half = float(student_t.ppf(0.5 + CONFIDENCE / 2, v.size - 1) * v.std(ddof=1) / np.sqrt(v.size))
    return Estimate(mean, mean - half, mean + half, int(v.size), log)


@dataclass(frozen=True)
class Side:
    """A claimed side of a threshold: "below" (x < threshold) or "above" (x > threshold); on the log scale of an
    :class:`Estimate` with ``log`` the threshold is compared as log10(threshold)."""

    kind: str
    threshold: float

    def on_side(self, x: float | None) -> bool | None:
        """Whether one value is on the claimed side (None when undefined)."""
        if x is None or not math.isfinite(x):
            return None
        return x < self.threshold if self.kind == "below" else x > self.threshold

    def interval_verdict(self, est: Estimate) -> Verdict:
        """HOLDS when the whole interval is on the claimed side, DOES_NOT_HOLD when it is wholly on the other side
        (the threshold itself counts as the other side), INCONCLUSIVE when it contains the threshold or is undefined."""
        t = math.log10(self.threshold) if est.log else self.threshold
        if not (np.isfinite(est.lo) and np.isfinite(est.hi)):
            return Verdict.INCONCLUSIVE
        if self.kind == "below":
            return Verdict.HOLDS if est.hi < t else Verdict.DOES_NOT_HOLD if est.lo >= t else Verdict.INCONCLUSIVE
        return Verdict.HOLDS if est.lo > t else Verdict.DOES_NOT_HOLD if est.hi <= t else Verdict.INCONCLUSIVE


def BELOW(threshold: float) -> Side:  # noqa: N802 - reads as a word of the rules: BELOW(0.05)
    return Side("below", float(threshold))


def ABOVE(threshold: float) -> Side:  # noqa: N802
    return Side("above", float(threshold))


class Tally(NamedTuple):
    """Seeds of a row on the claimed side, on the other side, and undefined."""

    on_side: int
    other_side: int
    undefined: int

    @property
    def n(self) -> int:
        return self.on_side + self.other_side + self.undefined

    @classmethod
    def of(cls, flags: Iterable[bool | None]) -> Tally:
        flags = list(flags)
        return cls(sum(f is True for f in flags), sum(f is False for f in flags), sum(f is None for f in flags))

    def text(self) -> str:
        extra = f", {self.undefined} undefined" if self.undefined else ""
        return f"{self.on_side}/{self.n} seeds on the claimed side{extra}"


def decide(interval: Verdict, tally: Tally) -> Verdict:
    """The row's verdict from its interval's verdict and its seeds (module docstring, "Decision")."""
    if tally.n == 0 or tally.on_side + tally.other_side < MIN_SEEDS:
        return Verdict.INCONCLUSIVE
    if interval == Verdict.HOLDS and tally.on_side >= math.ceil(SEED_FRACTION * tally.n):
        return Verdict.HOLDS
    if interval == Verdict.DOES_NOT_HOLD and tally.other_side > MAJORITY * tally.n:
        return Verdict.DOES_NOT_HOLD
    return Verdict.INCONCLUSIVE


def all_of(parts: Iterable[Verdict]) -> Verdict:
    """The interval verdict of a conjunction of sides (NC: etf and within and gap; a drift with DC): holds when
    every part holds, does not hold when one part does not, inconclusive otherwise."""
    parts = list(parts)
    if Verdict.DOES_NOT_HOLD in parts:
        return Verdict.DOES_NOT_HOLD
    return Verdict.HOLDS if parts and all(p == Verdict.HOLDS for p in parts) else Verdict.INCONCLUSIVE


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


class ConvergenceGate(NamedTuple):
    """Whether every run of a row converged, with the counts of the other states (module docstring)."""

    converged: int
    n: int
    note: str

    @property
    def passed(self) -> bool:
        return self.n > 0 and self.converged == self.n


def convergence_gate(runs: Sequence[RunSummary]) -> ConvergenceGate:
    """Every run converged (summary.convergence == "converged"), or a note counting the others by state."""
    states: dict[str, int] = {}
    for s in runs:
        state = "diverged" if s.status == "diverged" else s.convergence or "unrecorded"
        states[state] = states.get(state, 0) + 1
    converged = states.pop("converged", 0)
    if not states:
        return ConvergenceGate(converged, len(runs), f"{converged}/{len(runs)} converged")
    others = ", ".join(f"{n} {state}" for state, n in sorted(states.items()))
    return ConvergenceGate(converged, len(runs),
                           f"{converged}/{len(runs)} converged ({others}): a run that has not converged decides nothing")


@dataclass(frozen=True)
class ClaimRecord:
    """One row of a claim's verdict table (a line of ``claims/<id>.json``).

    ``verdict`` is a :class:`~ncgeom.vocabulary.Verdict` (given as one or its JSON spelling), or None for a
    context row (a baseline or control: shown, never part of the overall verdict). ``rule``: the rule in words.
    ``n_seeds``: seeds of the row (overall row: the fewest over the rows it decides on); ``seeds_on_side``: how many
    of them are on the claimed side (None where the row has no per-seed reading); ``converged``: how many converged
    (None for a row decided at a fixed budget). ``interval``: for each quantity the row decides on, the 95 %
    interval [lo, hi] of its mean over seeds (``interval_method``; None bounds with one seed; log10 values for a
    quantity named ``log10 ...``).
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
    rule: str = ""
    seeds_on_side: int | None = None
    converged: int | None = None
    runs: int | None = None

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
    def from_dict(cls, data: Mapping[str, Any]) -> ClaimRecord:
        names = {f.name for f in fields(cls)}
        require_keys("claim record", data, accepted=names, required=names - {"rule", "seeds_on_side", "converged", "runs"})
        return cls(**data)

    def seeds_text(self) -> str:
        """``k/n`` seeds on the claimed side (``-`` without a per-seed reading)."""
        if self.seeds_on_side is None or self.n_seeds is None:
            return "-"
        return f"{self.seeds_on_side}/{self.n_seeds}"

    def convergence_text(self) -> str:
        """``k/n converged`` (n: the runs the row rests on, one per seed or, for a trend over beta, several), or
        ``at the budget`` for a fixed-budget row (``-`` for the overall and context rows)."""
        total = self.runs if self.runs is not None else self.n_seeds
        if self.converged is not None and total is not None:
            return f"{self.converged}/{total} {'runs ' if total != self.n_seeds else ''}converged"
        return "at the budget" if self.rule.startswith("at the budget") else "-"

    def interval_text(self) -> str:
        """``name [lo, hi]; ...`` (rel_gap in percent), or ``-`` without intervals."""
        if not self.interval:
            return "-"
        return "; ".join(f"{k} undefined" if lo is None or hi is None else f"{k} [{fmt(k, lo)}, {fmt(k, hi)}]"
                         for k, (lo, hi) in self.interval.items())


def fmt(key: str, x: float | None) -> str:
    """A value as the tables print it: a percentage for a relative gap, 3 significant digits otherwise."""
    if x is None or not np.isfinite(x):
        return "nan"
    return f"{x:+.2%}" if "rel_gap" in key else f"{x:.3g}"


def row(claim: str, setting: str, metric: str, expected: str, *, rule: str, verdict: Verdict | None,
        est: Mapping[str, Estimate], n: int, tally: Tally | None = None, gate: ConvergenceGate | None = None,
        notes: Sequence[str] = (), shown: Mapping[str, float] | None = None,
        thresholds: Mapping[str, Sequence[float]] | None = None) -> ClaimRecord:
    """A row (a context row when ``verdict`` is None): the convergence gate applied (a row that did not pass it is
    inconclusive), the observed text (means of ``est`` and ``shown``, the seeds on the claimed side, the gate's
    note, ``notes``, a "marginal" note for each interval containing one of its ``thresholds``)."""
    notes = list(notes)
    if verdict is not None and gate is not None and not gate.passed:
        verdict = Verdict.INCONCLUSIVE
        notes.insert(0, gate.note)
    elif gate is not None:
        notes.insert(0, gate.note)
    if verdict is not None and n < MIN_SEEDS:
        verdict = Verdict.INCONCLUSIVE
        notes.append("no interval with one seed: undecided" if n == 1 else "no seed with a value: undecided")
    marginal = [f"{k} interval contains {fmt(k, x)}" for k, e in est.items() for x in (thresholds or {}).get(k, ())
                if e.lo <= x <= e.hi]
    means = {**{k: e.mean for k, e in est.items()}, **(shown or {})}
    text = f"mean over {n} seed(s): " + ", ".join(f"{k}={fmt(k, v)}" for k, v in means.items())
    if tally is not None:
        text += f"; {tally.text()}"
    text += "".join(f"; {note}" for note in notes) + ("; marginal: " + ", ".join(marginal) if marginal else "")
    return ClaimRecord(claim, setting, metric, expected, text, verdict, n, {k: e.pair() for k, e in est.items()},
                       INTERVAL_METHOD, rule, None if tally is None else tally.on_side,
                       None if gate is None else gate.converged, None if gate is None else gate.n)


def overall_row(claim: str, statement: str, rows: Sequence[ClaimRecord]) -> ClaimRecord:
    """The overall row: :func:`combine_verdicts` of the rows that decide (context rows left out)."""
    decided = [r for r in rows if r.verdict is not None]
    verdicts = [r.verdict for r in decided if r.verdict is not None]
    if not verdicts:
        observed = (f"no deciding row: all {len(rows)} rows are context (their notes say why)" if rows else
                    "no finished runs")
        return ClaimRecord(claim, "overall", "-", statement, observed, Verdict.INCONCLUSIVE, 0,
                           rule="combine the deciding rows")
    counts = {v: verdicts.count(v) for v in Verdict}
    observed = ", ".join(f"{n} {v.value}" for v, n in counts.items() if n) + f" (of {len(verdicts)} rows)"
    return ClaimRecord(claim, "overall", "-", statement, observed, combine_verdicts(verdicts),
                       min(r.n_seeds or 0 for r in decided),
                       rule="all rows hold: holds; some hold, some not: partially; none holds, one fails: does not hold")


def per_seed(runs: Sequence[RunSummary], get: Callable[[RunSummary], float | None]) -> list[float | None]:
    """``get`` of every run (the value of each seed)."""
    return [get(s) for s in runs]
