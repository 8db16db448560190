"""The ``ncgeom verify`` rows of the HUCL optimum (issue 25): certified minima, split thresholds, the bound.

Checked (pass / fail):

- ``hucl_optimum_certified_C3_d2_k{k}_tau{tau}_beta{beta}`` (exact): the interval branch and bound
  (``proofs_check.hucl.optimum.certify``) closes: the global minimum of L_HUCL over collapsed configurations of 3
  classes in R^2 lies in [lower, upper] with upper - lower <= eps, and the value a multi-start search found lies in
  [lower, upper + tol] (the search is only an upper bound; tol = 256 eps_float64 for its float rounding);
- ``hucl_optimum_switch_C3_d2_k1_tau1`` (exact, full): the first-order switch of the collapsed optimum from NC to the
  near-antipodal pair is bracketed by two closed branch and bounds (every global minimizer near NC below, near the
  pair above);
- ``hucl_optimum_local_C{C}_d{d}_k{k}_tau{tau}`` (exact): the block eigenvalues of the n-point loss at NC
  (``proofs_check.hucl.optimum.split``) are > 0 at beta_loc - 1e-6 and one is < 0 at beta_loc + 1e-6 in interval
  arithmetic; the split block (within-class collapse breaking) first in d = C - 1;
- ``hucl_optimum_split_agreement_C{C}_d{d}`` (independent): the split eigenvalue of the jets equals the smallest
  eigenvalue of the autograd Hessian of :func:`~.loss.point_loss` (n = 2) on the split subspace;
- ``hucl_optimum_bound_C{C}_k{k}_tau{tau}_beta{beta}`` (exact): the certified lower end of the collision-aware bound
  B(beta) (``proofs_check.hucl.optimum.bound``) is >= L_UCL(NC) - eps (Theorems 1 + 3; eps = 1e-7 the certificate's
  width: at beta = 0 the two are equal) and <= every configuration's loss checked (the certified minimum's upper end where there is one, NC's value, the attaining configuration's);
- ``hucl_optimum_rejects_a_false_minimum`` (self-test): the certified-minimum check, told that NC is optimal at
  beta = 5 (it is not: the pair configuration is lower), fails.

Reported (info, numerical): ``hucl_optimum_C4_d3_beta1`` (full): the branch and bound for C = 4, d = 3 with a box
budget; it does not close there, and the record says the lower bound reached and why.

Quick: C = 3, d = 2, k = 1, tau = 1 only (certified minima at beta in {1, 5}, the local certificate, the bound at
beta = 2, the self-test): a few seconds. Source: docs/theory.md, section 4 ("The HUCL optimum along beta").
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from ncgeom.theory import nc_value
from ncgeom.vocabulary import Evidence
from proofs_check.hucl.optimum.bound import lagrangian_bound
from proofs_check.hucl.optimum.certify import certify_minimum, certify_switch, parameters_of
from proofs_check.hucl.optimum.path import PAPER_BETAS, optimum_path
from proofs_check.hucl.optimum.search import search_optimum
from proofs_check.hucl.optimum.split import certify_threshold, curvature, local_thresholds
from proofs_check.records import CheckResult, Status

__all__ = ["CERT_EPS", "check_certified_minimum", "check_switch", "check_local", "check_split_agreement",
           "check_bound", "check_rejects_false_minimum", "check_c4_attempt", "checks"]

SOURCE = "docs/theory.md section 4 (HUCL: an open problem; the HUCL optimum along beta); docs/results.md"
CERT_EPS = 1e-7
SEARCH_TOL = 256 * np.finfo(np.float64).eps  # a float64 loss of O(1) terms, recomputed: rounding far below this
MODELS: tuple[tuple[int, float], ...] = ((1, 1.0), (1, 0.5), (4, 1.0), (4, 0.5))


def _tag(k: int, tau: float) -> str:
    return f"k{k}_tau{tau:g}"


def _record(name: str, statement: str, method: str, status: Status, details: dict, t0: float,
            evidence: Evidence) -> CheckResult:
    return CheckResult(name, statement, method, status, details, time.perf_counter() - t0, SOURCE, evidence=evidence)


@functools.cache
def _searched(c: int, d: int, beta: float, k: int, tau: float):
    import torch  # heavy optional import

    return search_optimum(num_classes=c, dim=d, per_class=1, beta=beta, tau=tau, num_negatives=k, num_random=6,
                          generator=torch.Generator().manual_seed(1000 * c + d))


def check_certified_minimum(beta: float, *, num_negatives: int = 1, tau: float = 1.0,
                            claimed: float | None = None) -> CheckResult:
    """Exact: the branch and bound for C = 3, d = 2 closes, and ``claimed`` (default: the searched optimum's value)
    lies in [lower, upper + SEARCH_TOL]."""
    t0 = time.perf_counter()
    found = _searched(3, 2, float(beta), num_negatives, tau)
    start = parameters_of("C3_d2", np.asarray(found.pattern.class_gram))
    cert = certify_minimum("C3_d2", beta=beta, tau=tau, num_negatives=num_negatives, eps=CERT_EPS, starts=[start])
    value = found.value if claimed is None else float(claimed)
    ok = cert.closed and cert.bnb.lower <= value <= cert.bnb.upper + SEARCH_TOL
    details: dict[str, Any] = {"beta": beta, "claimed": value, "claimed_is_search": claimed is None,
                               "lower": cert.bnb.lower, "upper": cert.bnb.upper, "eps": CERT_EPS,
                               "closed": cert.closed, "best_gram": [list(r) for r in cert.best_gram],
                               "search_pattern": found.pattern.name, "boxes_evaluated": cert.bnb.evaluated,
                               "settled_boxes": cert.bnb.num_settled, "reason": cert.bnb.reason}
    statement = (r"\min_{\text{collapsed}, d=2} L_{\mathrm{HUCL}} \in [\ell, u],\ u - \ell \le 10^{-7},\ "
                 r"\text{claimed value in it}\ (C=3,\ k=" + str(num_negatives) + r",\ \tau=" + f"{tau:g}" + r",\ \beta="
                 + f"{beta:g})")
    return _record(f"hucl_optimum_certified_C3_d2_{_tag(num_negatives, tau)}_beta{beta:g}", statement,
                   "interval-branch-and-bound", "pass" if ok else "fail", details, t0, "exact")


def check_rejects_false_minimum() -> CheckResult:
    """Self-test: :func:`check_certified_minimum` told that NC is optimal at beta = 5 (false) must fail."""
    t0 = time.perf_counter()
    wrong = nc_value("hucl", "infonce", num_classes=3, num_negatives=1, beta=5.0)
    inner = check_certified_minimum(5.0, claimed=wrong)
    details = {"claimed": wrong, "inner_status": inner.status, "lower": inner.details["lower"],
               "upper": inner.details["upper"]}
    return _record("hucl_optimum_rejects_a_false_minimum", r"\text{the certified-minimum check rejects } "
                   r"L(\mathrm{NC}) \text{ as the minimum at } \beta = 5\ (C=3,\ d=2)", "self-test",
                   "pass" if inner.status == "fail" else "fail", details, t0, "self-test")


def check_switch(*, num_negatives: int = 1, tau: float = 1.0) -> CheckResult:
    """Exact: the collapsed NC -> pair switch of C = 3, d = 2 is bracketed by closed branch and bounds."""
    t0 = time.perf_counter()
    path = optimum_path(num_classes=3, dim=2, tau=tau, num_negatives=num_negatives, per_class=(1,),
                        betas=tuple(np.round(np.arange(0.5, 1.8, 0.1), 10)), num_random=6, refine_tol=1e-3)
    first = [ch for ch in path.changes if ch.kind == "first-order"]
    if not first:
        return _record(f"hucl_optimum_switch_C3_d2_{_tag(num_negatives, tau)}", r"\text{switch found}", "search",
                       "fail", {"changes": [ch.before + " -> " + ch.after for ch in path.changes]}, t0, "exact")
    ch = first[0]
    sw = certify_switch("C3_d2", before_gram=np.asarray(ch.before_point.best.pattern.class_gram),
                        after_gram=np.asarray(ch.after_point.best.pattern.class_gram), bracket=ch.bracket, tau=tau,
                        num_negatives=num_negatives)
    details = {"search_bracket": list(ch.bracket), "before": ch.before, "after": ch.after, **sw}
    statement = (r"\text{every global minimizer is near NC at } \beta_- \text{ and near the pair at } \beta_+,\ [\beta_-, "
                 r"\beta_+] = [" + f"{sw['bracket'][0]:.6f}, {sw['bracket'][1]:.6f}" + r"]\ (C=3,\ d=2)")
    return _record(f"hucl_optimum_switch_C3_d2_{_tag(num_negatives, tau)}", statement, "interval-branch-and-bound",
                   "pass" if sw["certified"] else "fail", details, t0, "exact")


def check_local(num_classes: int, dim: int, *, num_negatives: int = 1, tau: float = 1.0,
                beta: float | None = None) -> CheckResult:
    """Exact: every block eigenvalue of the n-point loss at NC is > 0 at beta - 1e-6 and one is < 0 at beta + 1e-6
    (``beta`` defaults to the computed threshold; a wrong one fails)."""
    t0 = time.perf_counter()
    loc = local_thresholds(num_classes=num_classes, dim=dim, tau=tau, num_negatives=num_negatives)
    b = loc.beta if beta is None else beta
    if b is None:
        raise ValueError(f"no local threshold up to beta = {loc.beta_max} for C = {num_classes}, d = {dim}")
    cert = certify_threshold(num_classes=num_classes, dim=dim, beta=b, tau=tau, num_negatives=num_negatives)
    details = {"beta": b, "per_block": loc.per_block, "first_block": loc.block,
               "collapsed_threshold": loc.collapsed_beta, **cert}
    statement = (r"\beta_{loc}^{n\text{-point}}(C=" + str(num_classes) + r",\ d=" + str(dim) + r",\ k=" + str(num_negatives)
                 + r",\ \tau=" + f"{tau:g}" + r") \in [\beta \mp 10^{-6}],\ \beta = " + f"{b:.7f}" + r",\ \text{block "
                 + str(loc.block) + "}")
    return _record(f"hucl_optimum_local_C{num_classes}_d{dim}_{_tag(num_negatives, tau)}", statement,
                   "interval-jets", "pass" if cert["certified"] else "fail", details, t0, "exact")


def _split_hessian_min(num_classes: int, dim: int, beta: float) -> float:
    """Smallest eigenvalue of the autograd Hessian of the n = 2 point loss at NC on the split subspace (class 0's
    two points move oppositely along tangent directions), normalized like :func:`~.split.curvature`."""
    import torch

    from ncgeom.geometry import simplex_etf
    from proofs_check.hucl.optimum.loss import point_loss

    etf = simplex_etf(num_classes, dim)
    base = np.repeat(etf, 2, axis=0)
    tangent = np.linalg.svd(etf[0][None, :])[2][1:]  # [d - 1, d], orthonormal, orthogonal to v_0
    if dim == num_classes - 1:  # in-span only: the span of the other ETF vectors projected (all of T_{v_0} here)
        basis = tangent
    else:  # both blocks: the smallest eigenvalue over T_{v_0}
        basis = tangent
    directions = []
    for w in basis:
        delta = np.zeros_like(base)
        delta[0], delta[1] = w, -w
        directions.append(delta.ravel() / np.sqrt(2.0))
    b = torch.as_tensor(np.array(directions).T)
    z0 = torch.as_tensor(base)

    def f(x):
        return point_loss(z0 + (b @ x).reshape(z0.shape), per_class=2, beta=beta)

    h = torch.autograd.functional.hessian(f, torch.zeros(b.shape[1], dtype=torch.float64)).numpy()
    return float(np.linalg.eigvalsh((h + h.T) / 2)[0])


def check_split_agreement(num_classes: int, dim: int, *, beta: float = 1.0) -> CheckResult:
    """Independent: the jets' split eigenvalue (:func:`~.split.curvature`) equals the autograd Hessian's smallest
    eigenvalue on class 0's split subspace (n = 2, k = 1, tau = 1), to 1e3 eps_float64 C^2."""
    t0 = time.perf_counter()
    blocks = ["split-in-span"] + (["split-out-of-span"] if dim >= num_classes else [])
    jets = min(curvature(b, num_classes=num_classes, beta=beta) for b in blocks)
    # the autograd Hessian is in unit-norm coordinates of the 2 moving points: its eigenvalue is f''/|delta|^2 too
    hess = _split_hessian_min(num_classes, dim, beta)
    tol = 1e3 * np.finfo(np.float64).eps * num_classes**2
    ok = abs(jets - hess) <= tol
    details = {"beta": beta, "jets": jets, "autograd": hess, "difference": abs(jets - hess), "tolerance": tol}
    statement = (r"\lambda_{\mathrm{split}}^{\mathrm{jets}} = \lambda_{\min}(\mathrm{Hess}_{\mathrm{autograd}}|_{\mathrm{split}})"
                 r"\ (C=" + str(num_classes) + r",\ d=" + str(dim) + r",\ \beta=" + f"{beta:g})")
    return _record(f"hucl_optimum_split_agreement_C{num_classes}_d{dim}", statement, "jets vs torch-autograd-hessian",
                   "pass" if ok else "fail", details, t0, "independent")


def check_bound(num_classes: int, beta: float, *, num_negatives: int = 1, tau: float = 1.0) -> CheckResult:
    """Exact: the certified lower end of B(beta) is >= L_UCL(NC) and <= the loss of every configuration checked
    (NC, the configuration that attains B when there is one, the C = 3, d = 2 certified minimum's upper end)."""
    t0 = time.perf_counter()
    b = lagrangian_bound(num_classes=num_classes, beta=beta, tau=tau, num_negatives=num_negatives, certify=True)
    nc = nc_value("hucl", "infonce", num_classes=num_classes, num_negatives=num_negatives, beta=beta, tau=tau)
    uppers = {"NC": nc}
    if b.attained_value is not None:
        uppers["attaining configuration"] = b.attained_value
    if num_classes == 3:
        found = _searched(3, 2, float(beta), num_negatives, tau)
        cert = certify_minimum("C3_d2", beta=beta, tau=tau, num_negatives=num_negatives, eps=CERT_EPS,
                               starts=[parameters_of("C3_d2", np.asarray(found.pattern.class_gram))])
        uppers["certified minimum, d = 2 (upper end)"] = cert.bnb.upper
    lower = b.certified_lower
    closed = b.certified is not None and b.certified.closed
    # the certified lower end is B up to the branch and bound's width eps: at beta = 0, where B = L_UCL(NC) exactly
    # (Theorem 3), only B >= L_UCL(NC) - eps is certified
    eps = b.certified.eps if b.certified is not None else 0.0
    ok = closed and lower is not None and lower >= b.theorem13 - eps and all(lower <= u for u in uppers.values())
    details = {"beta": beta, "bound_numerical": b.value, "certified_lower": lower, "closed": closed, "eps": eps, "nu": b.nu,
               "row": list(b.row), "attained_by": b.attained_by, "theorem13": b.theorem13, "uppers": uppers,
               "gap_to_nc": nc - b.value}
    statement = (r"L_{\mathrm{UCL}}(\mathrm{NC}) - \varepsilon \le B(\beta) \le L_{\mathrm{HUCL}}(M)\ \text{for the configurations "
                 r"checked},\ \varepsilon = 10^{-7}"
                 r"\ (C=" + str(num_classes) + r",\ k=" + str(num_negatives) + r",\ \tau=" + f"{tau:g}" + r",\ \beta="
                 + f"{beta:g})")
    return _record(f"hucl_optimum_bound_C{num_classes}_{_tag(num_negatives, tau)}_beta{beta:g}", statement,
                   "interval-branch-and-bound (rows)", "pass" if ok else "fail", details, t0, "exact")


def check_c4_attempt(beta: float = 1.0, *, max_boxes: int = 60_000) -> CheckResult:
    """Info: the branch and bound for C = 4, d = 3 (k = 1, tau = 1) within a box budget; the lower bound reached."""
    t0 = time.perf_counter()
    found = _searched(4, 3, float(beta), 1, 1.0)
    cert = certify_minimum("C4_d3", beta=beta, eps=1e-6, max_boxes=max_boxes,
                           starts=[parameters_of("C4_d3", np.asarray(found.pattern.class_gram))])
    details = {"beta": beta, "closed": cert.closed, "lower": cert.bnb.lower, "upper": cert.bnb.upper,
               "reason": cert.bnb.reason, "max_boxes": max_boxes, "evaluated": cert.bnb.evaluated,
               "search_value": found.value}
    return _record(f"hucl_optimum_C4_d3_beta{beta:g}", r"\text{branch and bound, } C=4,\ d=3,\ \beta=" + f"{beta:g}",
                   "interval-branch-and-bound", "info", details, t0, "numerical")


def checks(*, quick: bool) -> list[Callable[[], CheckResult]]:
    """The rows of the module docstring (quick: C = 3, d = 2, k = 1, tau = 1)."""
    p = functools.partial
    if quick:
        return [p(check_certified_minimum, 1.0), p(check_certified_minimum, 5.0), p(check_local, 3, 2),
                p(check_bound, 3, 2.0), p(check_rejects_false_minimum)]
    out: list[Callable[[], CheckResult]] = []
    for k, tau in MODELS:
        out += [p(check_certified_minimum, b, num_negatives=k, tau=tau) for b in (1.0, *PAPER_BETAS)]
    out.append(p(check_switch))
    for c in (3, 4):
        for d in (c - 1, c):
            out += [p(check_local, c, d, num_negatives=k, tau=tau) for k, tau in MODELS]
            out.append(p(check_split_agreement, c, d))
        out += [p(check_bound, c, b) for b in (0.0, 1.0, *PAPER_BETAS)]
    out += [p(check_rejects_false_minimum), p(check_c4_attempt, 1.0)]
    return out
