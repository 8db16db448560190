"""The HUCL records of ``ncgeom verify``: thresholds by dimension (reported) and the checks behind them.

Reported (status ``info``, evidence ``numerical``: explorations, not claims of the paper):

- ``hucl_local_threshold_C{C}_d{d}``: beta_loc(C, d) (``proofs_check.hucl.local``, reduced method);
- ``hucl_global_switch_C{C}_d{d}``: the searched switch, its bracket, the beating configuration and the
  coverage of the search (``proofs_check.hucl.search``);
- ``hucl_batch_thresholds_C{C}_d{d}_B{B}`` (full only): the thresholds of the detached-weight batch
  objective of the claim-3 runs (``proofs_check.hucl.batch``);
- ``hucl_exploration_C{C}_d{d}_k{k}``: the multi-start minimum vs beta (``proofs_check.hucl.exploration``);
- ``hucl_thresholds``: the table of all of the above, one row per (C, d).

Checked (pass/fail):

- ``hucl_local_certificate_C{C}_d{d}`` (exact): interval enclosures of the block eigenvalues change sign
  across the threshold;
- ``hucl_local_agreement_C{C}_d{d}`` (independent): the autograd Hessian in other coordinates has the
  block eigenvalues with their multiplicities and changes sign across the same threshold (full: its own
  bisection agrees);
- ``hucl_switch_witness_C{C}_d{d}`` (exact): the witness configuration beats NC at the upper end of the
  switch bracket, in interval arithmetic;
- ``hucl_switch_consistency_C{C}_d{d}`` (numerical): the search found a witness no later than the first
  grid point above beta_loc (it must: NC is a saddle there);
- ``hucl_harris_bound_*`` (numerical) and ``hucl_nc_closed_form_*`` (independent) for the exploration;
- ``hucl_batch_estimator_agreement_C{C}_d{d}_B{B}`` (independent, full): the collapsed batch loss and its
  detached gradient equal ``ncgeom.losses.batch_loss`` on the expanded batch;
- ``hucl_optimum_*``: the HUCL optimum along beta (certified minima for C = 3, d = 2, the local thresholds of NC
  among n points per class, the collision-aware bound, a self-test): :mod:`proofs_check.hucl.optimum.checkers`.

Quick verify: local thresholds of all six (C, d) of :data:`CASES`; certificates and agreement checks for
C in {3, 4}; the global search for (C, d) in {(3, 2), (4, 3)} (the first-order switches); the exploration at
C = 4, d = 3 (three starts, beta in {0, 1, 2, 5}). Full verify: everything, C = 10 included,
and the batch thresholds at the claim-3 spec's (C, d = C - 1 and C, B).
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from ncgeom.campaigns.spec import expand, load_spec
from ncgeom.geometry import simplex_etf
from ncgeom.losses import make_psi
from ncgeom.theory import nc_value
from ncgeom.vocabulary import Evidence
from proofs_check.hucl.batch import batch_thresholds
from proofs_check.hucl.exploration import DEFAULT_BETAS, explore_hucl
from proofs_check.hucl.jets import block_multiplicity, reduced_curvatures
from proofs_check.hucl.local import (
    DEFAULT_BETA_MAX,
    DEFAULT_GRID_STEP,
    DEFAULT_TOL,
    certify_local_threshold,
    hessian_at_nc,
    local_threshold,
    smallest_hessian_eigenvalue,
)
from proofs_check.hucl.loss import batch_count_assignments, collapsed_batch_loss, hucl_collapsed_loss
from proofs_check.hucl.optimum.checkers import checks as optimum_checks
from proofs_check.hucl.search import interval_loss_gap, search_switch
from proofs_check.records import CheckResult, Status

__all__ = ["CASES", "QUICK_CASES", "SEARCHED_QUICK", "CERTIFICATE_WIDTH", "claim3_geometry", "check_local_threshold", "check_local_certificate",
           "check_local_agreement", "check_global_switch", "check_switch_witness", "check_switch_consistency",
           "check_hucl", "check_harris_bound", "check_nc_closed_form", "check_batch_thresholds",
           "check_batch_estimator_agreement", "check_threshold_table", "checks"]

CASES: tuple[tuple[int, int], ...] = ((3, 2), (3, 3), (4, 3), (4, 4), (10, 9), (10, 10))
QUICK_CASES: tuple[tuple[int, int], ...] = ((3, 2), (3, 3), (4, 3), (4, 4))  # certificates, agreement (quick)
SEARCHED_QUICK: tuple[tuple[int, int], ...] = ((3, 2), (4, 3))  # global search in quick: the first-order cases
QUICK_BETAS: tuple[float, ...] = (0.0, 1.0, 2.0, 5.0)
CERTIFICATE_WIDTH = 1e-6  # beta_loc -/+ this: the certified bracket (the bisection tolerance is 1e-10)
SOURCE = "docs/theory.md section 4 (HUCL open problem), section 9 claim 3; docs/results.md (HUCL thresholds by dimension)"
TAU = 1.0  # the thresholds are for k = 1, infonce, tau = 1 (the claim-3 runs)


def _record(name: str, statement: str, method: str, status: Status, details: dict, t0: float,
            evidence: Evidence) -> CheckResult:
    return CheckResult(name, statement, method, status, details, time.perf_counter() - t0, SOURCE, evidence=evidence)


def _tag(c: int, d: int) -> str:
    return f"C{c}_d{d}"


@functools.cache
def _local(c: int, d: int):
    return local_threshold(num_classes=c, dim=d, tau=TAU)


def _grid(c: int, d: int, quick: bool) -> tuple[float, ...]:
    """The beta grid of the switch search: multiples of the step up to the first one above beta_loc
    (full: from the step on; quick: the last four)."""
    beta_loc = _local(c, d).beta
    step = 0.1 if quick else 0.05
    top = step * (math.floor(beta_loc / step) + 1)
    first = max(step, top - 3 * step) if quick else step
    return tuple(round(b, 10) for b in np.arange(first, top + step / 2, step))


@functools.cache
def _switch(c: int, d: int, quick: bool):
    import torch

    grid = _grid(c, d, quick)
    psi = make_psi("infonce", tau=TAU)

    def loss_at(beta: float) -> Callable:
        return lambda u: hucl_collapsed_loss(u, beta=beta, num_negatives=1, psi=psi)

    def nc_at(beta: float) -> float:
        return nc_value("hucl", "infonce", num_classes=c, num_negatives=1, beta=beta, tau=TAU)

    return search_switch(num_classes=c, dim=d, grid=grid, loss_at=loss_at, nc_value_at=nc_at,
                         generator=torch.Generator().manual_seed(1000 * c + d), num_random=6 if quick else 32,
                         max_iter=300 if quick else 1500, beta_tol=1e-4 if quick else 1e-6,
                         certify=lambda v, b: interval_loss_gap(v, beta=b, tau=TAU))


def _switch_summary(c: int, d: int, quick: bool) -> dict[str, Any]:
    """The global switch as reported: a local-kind witness means the switch is the local threshold."""
    loc, search = _local(c, d), _switch(c, d, quick)
    if search.bracket is None:
        return {"beta": None, "bracket": None, "kind": "none", "configuration": search.description}
    if search.kind == "local":
        return {"beta": loc.beta, "bracket": list(loc.bracket), "kind": "local",
                "configuration": "the bifurcating branch of NC (" + search.description + ")"}
    lo, hi = search.bracket
    return {"beta": hi if lo is None else (lo + hi) / 2, "bracket": [lo, hi], "kind": search.kind,
            "configuration": search.description}


def check_local_threshold(num_classes: int, dim: int) -> CheckResult:
    """Report beta_loc(C, d) (info): the reduced method, each block's own sign change, the coverage."""
    t0 = time.perf_counter()
    loc = _local(num_classes, dim)
    details = {**loc.to_dict(), "num_negatives": 1, "psi": "infonce",
               "coverage": f"beta = 0, {DEFAULT_GRID_STEP:g}, ... <= {DEFAULT_BETA_MAX:g}, then bisection to {DEFAULT_TOL:g}"}
    statement = (r"\beta_{loc}(C=" + str(num_classes) + r",\ d=" + str(dim) + r",\ k=1,\ \tau=1) = \min\{\beta: "
                 r"\lambda_{\min}\,\mathrm{Hess}\,L_{\mathrm{HUCL}}(\mathrm{NC})|_{T/\mathrm{rot}} < 0\}")
    return _record(f"hucl_local_threshold_{_tag(num_classes, dim)}", statement, "jets-float64-bisection", "info",
                   details, t0, "numerical")


def check_local_certificate(num_classes: int, dim: int, beta: float | None = None) -> CheckResult:
    """Exact: interval enclosures of the block eigenvalues are > 0 at beta - w and one is < 0 at beta + w.

    ``beta`` defaults to the computed beta_loc(C, d); a wrong value (e.g. the threshold of another d) fails.
    """
    t0 = time.perf_counter()
    beta = _local(num_classes, dim).beta if beta is None else beta
    cert = certify_local_threshold(num_classes=num_classes, dim=dim, beta=beta, tau=TAU, width=CERTIFICATE_WIDTH)
    statement = (r"\lambda_\rho(\beta - w) > 0\ \forall \rho,\ \exists \rho: \lambda_\rho(\beta + w) < 0,\ "
                 r"\beta = " + f"{beta:.10f}" + r",\ w = 10^{-6}\ (C=" + str(num_classes) + r",\ d=" + str(dim) + ")")
    return _record(f"hucl_local_certificate_{_tag(num_classes, dim)}", statement, "mpmath-interval-jets",
                   "pass" if cert["certified"] else "fail", {"beta": beta, **cert}, t0, "exact")


def check_local_agreement(num_classes: int, dim: int, beta: float | None = None, *, bisect: bool = False) -> CheckResult:
    """Independent: the autograd Hessian (simplex_etf coordinates, all of the tangent space) agrees with the
    reduced block eigenvalues (spectrum with multiplicities at beta) and changes sign across beta -/+ w;
    with ``bisect`` its own scan and bisection gives the same threshold."""
    t0 = time.perf_counter()
    c, d = num_classes, dim
    beta = _local(c, d).beta if beta is None else beta
    psi = make_psi("infonce", tau=TAU)
    h = hessian_at_nc(num_classes=c, dim=d, beta=beta, psi=psi)
    spectrum = np.linalg.eigvalsh((h + h.T) / 2)
    blocks = reduced_curvatures(num_classes=c, dim=d, beta=beta, tau=TAU)
    expected = np.sort(np.concatenate([[v] * block_multiplicity(b, c) for b, v in blocks.items()]))
    # both are O(1)-conditioned float64 evaluations of sums of C^2 terms: agreement to 1e3 * eps * C^2
    tol = 1e3 * np.finfo(np.float64).eps * c * c
    spectrum_error = float(np.abs(spectrum - expected).max()) if spectrum.size == expected.size else math.inf
    below = smallest_hessian_eigenvalue(num_classes=c, dim=d, beta=max(beta - CERTIFICATE_WIDTH, 0.0), psi=psi)
    above = smallest_hessian_eigenvalue(num_classes=c, dim=d, beta=beta + CERTIFICATE_WIDTH, psi=psi)
    ok = spectrum_error <= tol and below > 0 > above
    details: dict[str, Any] = {"beta": beta, "dimension_of_tangent_mod_rotations": int(spectrum.size),
                               "expected_dimension": int(expected.size), "spectrum_max_error": spectrum_error,
                               "tolerance": tol, "hessian_min_below": below, "hessian_min_above": above,
                               "width": CERTIFICATE_WIDTH}
    if bisect:
        own = local_threshold(num_classes=c, dim=d, tau=TAU, method="hessian", grid_step=1 / 8, tol=1e-9)
        details["hessian_threshold"] = own.beta
        details["threshold_difference"] = None if own.beta is None else abs(own.beta - beta)
        ok = ok and own.beta is not None and abs(own.beta - beta) <= 2e-9  # two bisections, each to 1e-9 or better
    statement = (r"\mathrm{spec}\,\mathrm{Hess}_{\mathrm{autograd}} = \{\lambda_\rho\}\ \text{with multiplicities, and its sign "
                 r"changes across } \beta_{loc}(C=" + str(c) + r",\ d=" + str(d) + ")")
    return _record(f"hucl_local_agreement_{_tag(c, d)}", statement, "torch-autograd-hessian vs jets",
                   "pass" if ok else "fail", details, t0, "independent")


def check_global_switch(num_classes: int, dim: int, *, quick: bool) -> CheckResult:
    """Report the global switch beta_sw(C, d) (info): bracket, kind, beating configuration, coverage."""
    t0 = time.perf_counter()
    search = _switch(num_classes, dim, quick)
    summary = _switch_summary(num_classes, dim, quick)
    details = {**summary, "local_threshold": _local(num_classes, dim).beta, "search": search.to_dict(),
               "coverage": (f"ascending grid {search.grid[0]:g}..{search.grid[-1]:g} (step "
                            f"{'0.1' if quick else '0.05'}); per grid point {search.num_random} Gaussian + "
                            f"{search.num_structured} structured + {search.num_near_nc} near-ETF starts, batched L-BFGS "
                            f"(strong Wolfe, <= {search.max_iter} iterations); continuation bisection to {search.beta_tol:g}; "
                            f"beats NC: below L(NC) - {search.value_tol:g}")}
    statement = (r"\beta_{sw}(C=" + str(num_classes) + r",\ d=" + str(dim) + r",\ k=1,\ \tau=1) = \inf\{\beta: "
                 r"\min_V L_{\mathrm{HUCL}}(V) < L_{\mathrm{HUCL}}(\mathrm{NC})\}")
    return _record(f"hucl_global_switch_{_tag(num_classes, dim)}", statement, "numeric-torch-lbfgs-multistart", "info",
                   details, t0, "numerical")


def check_switch_witness(num_classes: int, dim: int, *, quick: bool) -> CheckResult:
    """Exact: the witness found at the upper end of the switch bracket beats NC in interval arithmetic."""
    t0 = time.perf_counter()
    search = _switch(num_classes, dim, quick)
    gap = search.interval_gap
    ok = gap is not None and gap[1] < 0
    details = {"beta": None if search.bracket is None else search.bracket[1], "interval_gap": gap,
               "witness_gram": search.witness_gram, "description": search.description}
    statement = (r"L_{\mathrm{HUCL}}(V_{\mathrm{witness}}) < L_{\mathrm{HUCL}}(\mathrm{NC}) \text{ at the upper end of the "
                 r"switch bracket } (C=" + str(num_classes) + r",\ d=" + str(dim) + ")")
    return _record(f"hucl_switch_witness_{_tag(num_classes, dim)}", statement, "mpmath-interval", "pass" if ok else "fail",
                   details, t0, "exact")


def check_switch_consistency(num_classes: int, dim: int, *, quick: bool) -> CheckResult:
    """Numerical: the search finds a configuration below NC no later than the first grid point above beta_loc
    (above beta_loc NC is a saddle, so a search that misses it there is broken), and the switch is <= beta_loc."""
    t0 = time.perf_counter()
    loc, search = _local(num_classes, dim), _switch(num_classes, dim, quick)
    top = _grid(num_classes, dim, quick)[-1]
    ok = (search.bracket is not None and search.bracket[1] <= top
          and (search.kind == "local" or search.bracket[1] <= loc.bracket[1]))
    details = {"local_threshold": loc.beta, "first_grid_point_above": top, "bracket": search.bracket,
               "kind": search.kind, "grid": search.grid, "best_minus_nc": search.best_minus_nc}
    statement = (r"\exists V: L(V) < L(\mathrm{NC}) \text{ at the first grid } \beta > \beta_{loc},\ "
                 r"\beta_{sw} \le \beta_{loc}\ (C=" + str(num_classes) + r",\ d=" + str(dim) + ")")
    return _record(f"hucl_switch_consistency_{_tag(num_classes, dim)}", statement, "numeric-torch-lbfgs-multistart",
                   "pass" if ok else "fail", details, t0, "numerical")


@functools.cache
def _exploration(c: int, d: int, k: int, num_starts: int, seed: int, betas: tuple[float, ...]):
    import torch

    return explore_hucl(num_classes=c, dim=d, num_negatives=k, betas=betas, num_starts=num_starts,
                        generator=torch.Generator().manual_seed(seed))


def check_hucl(*, num_classes: int, dim: int, num_negatives: int = 1, num_starts: int = 6, seed: int = 0,
               betas=DEFAULT_BETAS) -> CheckResult:
    """Report :func:`proofs_check.hucl.exploration.explore_hucl` (info; its comparisons are separate checks)."""
    t0 = time.perf_counter()
    res = _exploration(num_classes, dim, num_negatives, num_starts, seed, tuple(float(b) for b in betas))
    rows = [{"beta": b, "min_found": m, "nc_value": n, "nc_minus_min": n - m, "harris_bound": res.harris_bound,
             "etf_distance": dist, "nc_value_direct": nd, "slope_at_nc": sl}
            for b, m, n, dist, nd, sl in zip(res.betas, res.min_found, res.nc_value, res.etf_distance,
                                            res.nc_value_direct, res.slope_at_nc)]
    details = {"num_classes": num_classes, "dim": dim, "num_negatives": num_negatives, "psi": "infonce", "tau": TAU,
               "num_starts": num_starts, "seed": seed, "rows": rows, "harris_bound": res.harris_bound,
               "max_nc_minus_min": max(r["nc_minus_min"] for r in rows), "max_etf_distance": max(res.etf_distance)}
    statement = (r"\text{explore } \min_{V} L_{\mathrm{HUCL}}(V) \text{ vs } L_{\mathrm{HUCL}}(\mathrm{NC}) \text{ as } "
                 r"\beta \text{ grows}\ (C=" + str(num_classes) + r",\ d=" + str(dim) + r",\ k=" + str(num_negatives) + ")")
    return _record(f"hucl_exploration_{_tag(num_classes, dim)}_k{num_negatives}", statement, "numeric-torch-lbfgs",
                   "info", details, t0, "numerical")


def check_harris_bound(*, num_classes: int, dim: int, num_negatives: int = 1, num_starts: int = 6, seed: int = 0,
                       betas=DEFAULT_BETAS, bound: float | None = None) -> CheckResult:
    """Numerical: every minimum found is >= the Harris bound L_UCL(NC) (Theorem 1 and 3); ``bound`` overrides it."""
    t0 = time.perf_counter()
    res = _exploration(num_classes, dim, num_negatives, num_starts, seed, tuple(float(b) for b in betas))
    bound = res.harris_bound if bound is None else bound
    tol = 64 * np.finfo(np.float64).eps * num_classes**num_negatives  # rounding of a sum of C^k terms of size O(1)
    slack = min(m - bound for m in res.min_found)
    statement = (r"\min_{\text{found}} L_{\mathrm{HUCL}} \ge L_{\mathrm{UCL}}(\mathrm{NC})\ (C=" + str(num_classes)
                 + r",\ d=" + str(dim) + r",\ k=" + str(num_negatives) + ")")
    return _record(f"hucl_harris_bound_{_tag(num_classes, dim)}_k{num_negatives}", statement, "numeric-torch-lbfgs",
                   "pass" if slack >= -tol else "fail", {"bound": bound, "min_slack": slack, "tolerance": tol,
                                                        "betas": list(res.betas)}, t0, "numerical")


def check_nc_closed_form(*, num_classes: int, num_negatives: int = 1, betas=DEFAULT_BETAS) -> CheckResult:
    """Independent: ncgeom.theory.nc_value("hucl") (binomial closed form) equals the tuple enumeration of
    :func:`proofs_check.hucl.loss.hucl_collapsed_loss` at the ETF."""
    import torch

    t0 = time.perf_counter()
    psi = make_psi("infonce", tau=TAU)
    etf = torch.as_tensor(simplex_etf(num_classes))
    errors = []
    for beta in betas:
        closed = nc_value("hucl", "infonce", num_classes=num_classes, num_negatives=num_negatives, beta=beta, tau=TAU)
        with torch.no_grad():
            direct = float(hucl_collapsed_loss(etf, beta=beta, num_negatives=num_negatives, psi=psi))
        errors.append(abs(closed - direct) / max(abs(closed), 1.0))
    tol = 1e3 * np.finfo(np.float64).eps * num_classes**num_negatives
    statement = (r"L_{\mathrm{HUCL}}(\mathrm{NC})_{\text{closed form}} = L_{\mathrm{HUCL}}(\mathrm{ETF})_{\text{enumeration}}"
                 r"\ (C=" + str(num_classes) + r",\ k=" + str(num_negatives) + ")")
    return _record(f"hucl_nc_closed_form_C{num_classes}_k{num_negatives}", statement, "closed form vs enumeration",
                   "pass" if max(errors) <= tol else "fail", {"max_relative_error": max(errors), "tolerance": tol,
                                                              "betas": list(betas)}, t0, "independent")


def claim3_geometry(scale: str = "quick") -> tuple[int, int, int]:
    """(C, d, B) of the claim-3 spec at ``scale`` (every grid point shares them; checked), and that it trains
    k = 1, tau = 1, the weighted estimator with detached weights, on the sphere (what the thresholds assume)."""
    configs = expand(load_spec("claim3_hucl_beta"), scale=scale)
    shapes = {(cfg.classes, cfg.embedding_dim, cfg.batch_size, cfg.tau, cfg.num_negatives, cfg.estimator,
               cfg.detach_weights, cfg.norm) for cfg in configs}
    if len(shapes) != 1:
        raise ValueError(f"the claim-3 quick spec mixes geometries {sorted(shapes)}: one threshold per geometry needed")
    (c, d, b, tau, k, estimator, detach, norm), = shapes
    if (tau, k, estimator, detach, norm) != (TAU, 1, "weighted", True, "sphere"):
        raise ValueError(f"the claim-3 spec no longer trains tau = 1, k = 1, weighted, detached, sphere: {shapes}")
    return c, d, b


@functools.cache
def _batch(c: int, d: int, b: int):
    import torch

    loc = _local(c, d).beta
    grid = tuple(round(x, 10) for x in np.arange(0.05, 0.05 * (math.floor(loc / 0.05) + 1) + 0.025, 0.05))
    return batch_thresholds(num_classes=c, dim=d, batch_size=b, tau=TAU, grid_step=1 / 8, beta_max=32.0, switch_grid=grid,
                            generator=torch.Generator().manual_seed(7 * c + d), num_random=16)


def check_batch_thresholds(num_classes: int, dim: int, batch_size: int) -> CheckResult:
    """Report the thresholds of the expected detached-weight batch objective (info; proofs_check.hucl.batch)."""
    t0 = time.perf_counter()
    res = _batch(num_classes, dim, batch_size)
    statement = (r"\beta_{det},\ \beta_{batch},\ \beta_{sw}^{batch}\ (C=" + str(num_classes) + r",\ d=" + str(dim)
                 + r",\ B=" + str(batch_size) + r",\ k=1,\ \tau=1,\ \text{weighted, detached})")
    return _record(f"hucl_batch_thresholds_{_tag(num_classes, dim)}_B{batch_size}", statement,
                   "torch-func-jvp-bisection + multistart", "info", res.to_dict(), t0, "numerical")


def check_batch_estimator_agreement(num_classes: int, dim: int, batch_size: int, *, seed: int = 0) -> CheckResult:
    """Independent: the collapsed batch loss (one count vector, weights detached) and its gradient equal
    ncgeom.losses.batch_loss (weighted, detach_weights=True, the training backend) on the expanded batch."""
    import torch

    from ncgeom.losses import batch_loss  # ncgeom.losses loads it lazily: it imports torch (heavy)

    t0 = time.perf_counter()
    rng = np.random.default_rng(seed)
    counts = batch_count_assignments(num_classes, batch_size)
    errors = []
    for beta in (0.0, 1.0, 5.0, 30.0):
        row = counts[rng.integers(len(counts))]
        u = torch.as_tensor(rng.standard_normal((num_classes, dim)), dtype=torch.float64).requires_grad_(True)
        v = u / u.norm(dim=1, keepdim=True)
        gram = v @ v.T
        mine = collapsed_batch_loss(gram, row[None], beta=beta, tau=TAU, num_negatives=1, weights_gram=gram.detach())
        (g_mine,) = torch.autograd.grad(mine, u, retain_graph=True)  # v's graph is shared with ref
        labels = torch.as_tensor(np.repeat(np.arange(num_classes), row))
        ref = batch_loss(v[labels], labels, "hucl", beta=beta, tau=TAU, num_negatives=1, estimator="weighted",
                         detach_weights=True)
        (g_ref,) = torch.autograd.grad(ref, u)
        errors.append(max(abs(float(mine.detach()) - float(ref.detach())), float((g_mine - g_ref).abs().max())))
    tol = 1e3 * np.finfo(np.float64).eps * batch_size  # two float64 evaluations of sums over B^2 pairs
    statement = (r"J_n(V)_{\text{collapsed}} = \texttt{batch\_loss}(V[y])\ \text{and gradients, detached weights}\ (C="
                 + str(num_classes) + r",\ d=" + str(dim) + r",\ B=" + str(batch_size) + ")")
    return _record(f"hucl_batch_estimator_agreement_{_tag(num_classes, dim)}_B{batch_size}", statement,
                   "closed form vs ncgeom.losses.batch_loss", "pass" if max(errors) <= tol else "fail",
                   {"max_error": max(errors), "tolerance": tol}, t0, "independent")


def check_threshold_table(*, quick: bool) -> CheckResult:
    """Report the table of thresholds (info): one row per (C, d) computed in this run."""
    t0 = time.perf_counter()
    rows = []
    searched = SEARCHED_QUICK if quick else CASES
    certified = QUICK_CASES if quick else CASES
    for c, d in CASES:
        loc = _local(c, d)
        row: dict[str, Any] = {"num_classes": c, "dim": d, "num_negatives": 1, "tau": TAU, "psi": "infonce",
                               "local_threshold": loc.beta, "local_bracket": loc.bracket, "local_block": loc.block,
                               "per_block": loc.per_block, "local_evidence": "numerical"}
        if (c, d) in certified:
            cert = certify_local_threshold(num_classes=c, dim=d, beta=loc.beta, tau=TAU, width=CERTIFICATE_WIDTH)
            if cert["certified"]:
                row["local_evidence"] = "exact"
                row["local_certified_bracket"] = [cert["beta_below"], cert["beta_above"]]
        if (c, d) in searched:
            summary = _switch_summary(c, d, quick)
            search = _switch(c, d, quick)
            row.update(global_switch=summary["beta"], switch_bracket=summary["bracket"], switch_kind=summary["kind"],
                       beating_configuration=summary["configuration"], witness_gram=search.witness_gram,
                       switch_evidence=("upper end exact (interval witness), lower end numerical"
                                        if search.interval_gap and search.interval_gap[1] < 0 else "numerical"))
        rows.append(row)
    details: dict[str, Any] = {"rows": rows, "quick": quick,
                               "subset": ("local thresholds: all (C, d); certificates and agreement: C in {3, 4}; global "
                                           "search: (3, 2), (4, 3)"
                                          if quick else "all (C, d), and the batch thresholds of the claim-3 runs")}
    if not quick:
        c, d, b = claim3_geometry()
        details["batch"] = [_batch(c, dd, b).to_dict() for dd in sorted({d, c})]
    statement = r"\text{HUCL thresholds by dimension: } \beta_{loc}(C, d),\ \beta_{sw}(C, d),\ k=1,\ \tau=1"
    return _record("hucl_thresholds", statement, "summary of the hucl_* records", "info", details, t0, "numerical")


def checks(*, quick: bool) -> list[Callable[[], CheckResult]]:
    """The HUCL records of ``ncgeom verify`` (module docstring lists the quick subset)."""
    p = functools.partial
    out: list[Callable[[], CheckResult]] = [p(check_local_threshold, c, d) for c, d in CASES]
    for c, d in QUICK_CASES if quick else CASES:
        out += [p(check_local_certificate, c, d), p(check_local_agreement, c, d, bisect=not quick)]
    for c, d in SEARCHED_QUICK if quick else CASES:
        out += [p(check_global_switch, c, d, quick=quick), p(check_switch_witness, c, d, quick=quick),
                p(check_switch_consistency, c, d, quick=quick)]
    explorations = [(4, 3, 1, 3, QUICK_BETAS)] if quick else [
        (4, 3, 1, 8, DEFAULT_BETAS), (4, 4, 1, 8, DEFAULT_BETAS), (4, 3, 2, 8, DEFAULT_BETAS), (10, 9, 1, 8, DEFAULT_BETAS)]
    for c, d, k, starts, betas in explorations:
        out += [p(check_hucl, num_classes=c, dim=d, num_negatives=k, num_starts=starts, betas=betas),
                p(check_harris_bound, num_classes=c, dim=d, num_negatives=k, num_starts=starts, betas=betas)]
    out += [p(check_nc_closed_form, num_classes=c, num_negatives=k) for c, k in sorted({(c, k) for c, _, k, _, _ in explorations})]
    if not quick:
        c, d, b = claim3_geometry()
        for dd in sorted({d, c}):
            out += [p(check_batch_thresholds, c, dd, b), p(check_batch_estimator_agreement, c, dd, b)]
    out += optimum_checks(quick=quick)  # the HUCL optimum along beta (issue 25): proofs_check.hucl.optimum.checkers
    out.append(p(check_threshold_table, quick=quick))
    return out
