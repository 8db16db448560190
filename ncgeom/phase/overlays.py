"""The theory's lines in a map's coordinates, computed by the code of ``proofs_check`` that computes them for
``ncgeom verify`` (docs/theory.md, section 9, "Phase maps"; docs/results.md, "HUCL thresholds by dimension" and
"Imbalanced classes").

Each line gives, for every value of one axis of a panel, the value of the other axis where the theory draws a
boundary (:class:`~ncgeom.phase.records.TheoryLine`), with the kind of evidence behind it:

- **HUCL local threshold** beta_loc(C, d) (:func:`proofs_check.hucl.checkers.check_local_threshold`; evidence "exact"
  where :func:`~proofs_check.hucl.checkers.check_local_certificate` encloses the sign change in interval arithmetic,
  else "numerical") and **global switch** beta_sw(C, d) (:func:`~proofs_check.hucl.checkers.check_global_switch`, the
  quick search; "numerical"): on a map with a ``beta`` axis whose runs are HUCL with k = 1, tau = 1, label positives,
  balanced classes, on the sphere (what they are computed for: collapsed configurations, infonce);
- **training's batch-loss threshold** (:func:`proofs_check.hucl.batch.batch_thresholds` at the runs' batch size,
  weighted estimator, detached weights: the local threshold of the expected batch loss, and the detached-flow
  threshold where one exists below beta = 32; "numerical"): same conditions, the weighted estimator;
- **d = C - 1** (the smallest dimension with a simplex ETF, docs/theory.md, section 4; "exact"): on a map with a
  ``dim`` axis;
- **B = 2C** (the class-balanced sampler: a batch of B holds min(C, B // 2) classes, so below B = 2C not every class
  is in a batch and each present class has 2 members; "exact"): on a map with a ``batch_size`` axis;
- **the minority merge ratio** r_mc(C) (:func:`proofs_check.ablations.imbalance.merge_ratio`, the closed form of SCL
  and UCL at beta = 0: above it the merged configuration is a local minimizer; "exact"): on a map with an
  ``imbalance`` axis whose runs are SCL or UCL.

Collapsed configurations of C classes span at most C dimensions, so every loss over them, hence every threshold,
is the same for all d >= C as for d = C (exact: an isometry of R^d maps any C vectors into R^C); the lines are
computed at d in {C - 1, C} and carried to larger d. A line the map's coordinates admit but whose conditions fail
(another setting, tau, estimator, normalization) is not drawn, and :attr:`Overlays.notes` says why.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from ncgeom.phase.records import Overlays, TheoryLine
from ncgeom.phase.spec import MapPlan
from ncgeom.runs.config import Config
from ncgeom.vocabulary import Evidence, LineAxis, effective_beta, plain_setting

__all__ = ["theory_lines", "hucl_thresholds", "batch_loss_threshold", "BETA_MAX"]

#: The largest beta the batch-loss thresholds are scanned to (as ncgeom verify's full run does).
BETA_MAX = 32.0


@functools.cache
def hucl_thresholds(num_classes: int, dim: int) -> dict[str, Any]:
    """beta_loc and beta_sw of HUCL at (C, d) (k = 1, infonce, tau = 1) from proofs_check's records, with the
    evidence of each: ``{"local", "local_evidence", "switch", "switch_kind"}`` (None where none was found). A
    d > C is computed at d = C (module docstring); d < C - 1 has no ETF and gives None."""
    from proofs_check.hucl.checkers import check_global_switch, check_local_certificate, check_local_threshold

    c, d = num_classes, min(dim, num_classes)
    if c < 3 or d < c - 1:
        return {"local": None, "local_evidence": "numerical", "switch": None, "switch_kind": "none"}
    local = check_local_threshold(c, d).details["beta"]
    evidence = "exact" if local is not None and check_local_certificate(c, d).status == "pass" else "numerical"
    switch = check_global_switch(c, d, quick=True).details
    return {"local": local, "local_evidence": evidence, "switch": switch["beta"], "switch_kind": switch["kind"]}


@functools.cache
def batch_loss_threshold(num_classes: int, dim: int, batch_size: int) -> dict[str, Any]:
    """The thresholds of the expected weighted batch loss with detached weights at (C, d, B) (k = 1, tau = 1):
    ``{"batch_local", "detached_flow"}`` (None where no sign change up to :data:`BETA_MAX`)."""
    from proofs_check.hucl.batch import batch_thresholds

    c, d = num_classes, min(dim, num_classes)
    if c < 3 or d < c - 1:
        return {"batch_local": None, "detached_flow": None}
    res = batch_thresholds(num_classes=c, dim=d, batch_size=batch_size, grid_step=1 / 8, beta_max=BETA_MAX)
    return {"batch_local": res.batch_local["beta"], "detached_flow": res.detached_flow["beta"]}


def _configs_along(plan: MapPlan, panel: int, axis: LineAxis) -> list[list[Config]]:
    """For each value of the axis other than ``axis``, the configs of the cells along ``axis`` (seed 0)."""
    p = plan.panels[panel]
    seed = min(min(s) for s in plan.seed_sets.values())
    if axis == "x":
        return [[plan.config(panel, ix, iy, seed) for ix in range(len(p.x))] for iy in range(len(p.y))]
    return [[plan.config(panel, ix, iy, seed) for iy in range(len(p.y))] for ix in range(len(p.x))]


def _hucl_conditions(configs: list[Config]) -> str | None:
    """Why the HUCL thresholds do not apply to these runs (None when they do)."""
    for c in configs:
        wrong = {"setting": (c.setting, "hucl"), "tau": (c.tau, 1.0), "num_negatives": (c.num_negatives, 1),
                 "positives": (c.positives, "label"), "imbalance": (c.imbalance, 1.0), "norm": (c.norm, "sphere")}
        bad = [f"{k} = {v!r} (needs {want!r})" for k, (v, want) in wrong.items() if v != want]
        if bad:
            return ", ".join(bad)
    return None


def _line(panel: int, name: str, label: str, evidence: Evidence, axis: LineAxis, values: list[float | None],
          source: str) -> TheoryLine | None:
    return TheoryLine(panel, name, label, evidence, axis, tuple(values), source) if any(
        v is not None for v in values) else None


def _beta_lines(plan: MapPlan, panel: int, axis: LineAxis, notes: list[str]) -> list[TheoryLine]:
    rows = _configs_along(plan, panel, axis)
    why = next((w for w in (_hucl_conditions(r) for r in rows) if w), None)
    if why:
        notes.append(f"panel {panel}: the HUCL thresholds are not drawn: they are computed for HUCL, k = 1, tau = 1, "
                     f"label positives, balanced classes, the sphere; the runs have {why}")
        return []
    geometry = [(r[0].classes, r[0].embedding_dim, r[0].batch_size, r[0].estimator) for r in rows]
    thresholds = [hucl_thresholds(c, d) for c, d, _, _ in geometry]
    evidence: Evidence = "exact" if all(t["local_evidence"] == "exact" for t in thresholds if t["local"]) else "numerical"
    lines = [
        _line(panel, "hucl_local_threshold", r"HUCL local threshold $\beta_{loc}(C, d)$" + f" ({evidence})", evidence,
              axis, [t["local"] for t in thresholds],
              "proofs_check.hucl.checkers.check_local_threshold (jets, bisection to 1e-10); check_local_certificate "
              "(interval enclosure at +-1e-6); d > C taken at d = C"),
        _line(panel, "hucl_global_switch", r"HUCL global switch $\beta_{sw}(C, d)$ (numerical)", "numerical", axis,
              [t["switch"] for t in thresholds],
              "proofs_check.hucl.checkers.check_global_switch(quick=True) (multi-start L-BFGS, grid 0.1, bisection "
              "to 1e-4); d > C taken at d = C"),
    ]
    if all(e == "weighted" for _, _, _, e in geometry):
        batch = [batch_loss_threshold(c, d, b) for c, d, b, _ in geometry]
        lines.append(_line(panel, "batch_loss_threshold",
                           r"training's batch-loss threshold (detached weights, batch $B$; numerical)", "numerical",
                           axis, [t["batch_local"] for t in batch],
                           "proofs_check.hucl.batch.batch_thresholds (local threshold of the expected batch loss at "
                           "the runs' B; scan 1/8 to 32, bisection to 1e-8); d > C taken at d = C"))
        flow = [t["detached_flow"] for t in batch]
        if all(v is None for v in flow):
            notes.append(f"panel {panel}: the detached-flow threshold (NC stops being a stable zero of the field "
                         f"training follows) is not drawn: none up to beta = {BETA_MAX:g} at these (C, d, B)")
        else:
            lines.append(_line(panel, "detached_flow_threshold", "detached-flow threshold (numerical)", "numerical",
                               axis, flow, "proofs_check.hucl.batch.batch_thresholds (detached_flow)"))
    else:
        notes.append(f"panel {panel}: training's batch-loss threshold is computed for the weighted estimator only")
    return [line for line in lines if line is not None]


def _dim_line(plan: MapPlan, panel: int, axis: LineAxis, notes: list[str]) -> list[TheoryLine]:
    rows = _configs_along(plan, panel, axis)
    line = _line(panel, "etf_dimension", "d = C - 1, the smallest d with a simplex ETF (exact)", "exact", axis,
                 [float(r[0].classes - 1) for r in rows], "docs/theory.md, section 4 (a simplex ETF of C points needs "
                 "d >= C - 1)")
    return [line] if line is not None else []


def _merge_line(plan: MapPlan, panel: int, axis: LineAxis, notes: list[str]) -> list[TheoryLine]:
    from proofs_check.ablations.imbalance import merge_ratio

    rows = _configs_along(plan, panel, axis)
    settings = {plain_setting(c.setting) if effective_beta(c.setting, c.beta) == 0 else c.setting for r in rows
                for c in r}
    if len(settings) != 1 or next(iter(settings)) not in ("scl", "ucl"):
        notes.append(f"panel {panel}: the minority merge ratio is not drawn: its closed form is for SCL or UCL at "
                     f"beta = 0, the runs are {', '.join(sorted(settings))}")
        return []
    (setting,) = settings
    values = [merge_ratio(r[0].classes, setting, tau=r[0].tau) if r[0].classes >= 3 else None for r in rows]
    batches = {c.batches for r in rows for c in r}
    extra = "; class-balanced batches do not see the prior" if batches == {"balanced"} else ""
    line = _line(panel, "merge_ratio", f"minority merge ratio $r_{{mc}}(C)$, {setting.upper()} (exact){extra}", "exact",
                 axis, values, "proofs_check.ablations.imbalance.merge_ratio (closed form, beta = 0)")
    return [line] if line is not None else []


def _sampler_line(plan: MapPlan, panel: int, axis: LineAxis, notes: list[str]) -> list[TheoryLine]:
    rows = _configs_along(plan, panel, axis)
    if any(c.batches != "balanced" for r in rows for c in r):
        notes.append(f"panel {panel}: the line B = 2C belongs to class-balanced batches; the runs shuffle")
        return []
    line = _line(panel, "every_class_in_a_batch", "B = 2C: below it a class-balanced batch holds B/2 classes of 2 "
                 "(exact, the sampler)", "exact", axis, [float(2 * r[0].classes) for r in rows],
                 "ncgeom.data.class_balanced_batches (a batch of B holds min(C, B // 2) classes; docs/experiments.md, "
                 "'Data')")
    return [line] if line is not None else []


#: Which line each axis field carries: the lines are drawn along an axis of this field.
_PROVIDERS: dict[str, Callable[[MapPlan, int, LineAxis, list[str]], list[TheoryLine]]] = {
    "beta": _beta_lines,
    "dim": _dim_line,
    "imbalance": _merge_line,
    "batch_size": _sampler_line,
}


def theory_lines(plan: MapPlan) -> Overlays:
    """Every theory line the map's coordinates admit (module docstring), panel by panel, with notes on the lines not
    drawn. Computing the HUCL thresholds takes seconds per (C, d) (cached within the process)."""
    lines: list[TheoryLine] = []
    notes: list[str] = []
    for k, p in enumerate(plan.panels):
        for axis, ax in (("x", p.x), ("y", p.y)):
            provider = _PROVIDERS.get(ax.config_field or "")
            if provider is not None:
                lines += provider(plan, k, axis, notes)  # type: ignore[arg-type]
    if not lines and not notes:
        notes.append("no theory line lives in these coordinates (the lines need a beta, dim, imbalance or batch_size "
                     "axis)")
    return Overlays(plan.spec, tuple(lines), tuple(notes))
