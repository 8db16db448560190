"""Convex certificates that neural collapse minimizes the Jensen-reduced SCL and UCL programs.

A certificate (docs/theory.md section 6) for one program (setting, psi, C, k, ball or sphere) checks, each
separately (cvxpy's tests/solver_test_helpers.py style):

1. the solver reached ``optimal`` (Clarabel; SCS when Clarabel is missing or fails);
2. primal feasibility of the optimizer M: lambda_min(M) >= -feas_tol and the diagonal constraint;
3. the solver's objective equals F(M) evaluated independently with ncgeom's psi;
4. dual feasibility: the PSD multiplier Z has lambda_min(Z) >= -feas_tol, and nu >= 0 on the ball;
5. stationarity Y(M) + diag(nu) = Z (Y = symmetrized gradient of F; smooth psi only) and
   complementarity <Z, M> = 0, nu . (diag M - 1) = 0;
6. a certified lower bound (weak duality, independent of the solver's own gap):

   .. math:: F(M') \\ge F(M_0) + \\langle Y, M' - M_0 \\rangle \\ge F(M_0) - \\langle Y, M_0\\rangle
       - \\textstyle\\sum_c \\nu_c \\quad \\text{for every feasible } M',

   valid whenever Y + diag(nu) is PSD (and nu >= 0 on the ball), where M_0 is the solver's optimizer
   projected onto the feasible set, Y = dF(M_0) and nu = the solver's diagonal multiplier (or the best
   multiplier at M_0, a C-variable SDP; the larger bound is kept) shifted by
   max(0, -lambda_min(Y + diag nu)) so that the inequality holds exactly; the gap is F(M_0) - bound;
7. the claimed optimal value (default :func:`ncgeom.theory.nc_value`) lies in [lower - tol, upper + tol],
   lower = max(bound, KKT bound at the claimed Gram), upper = min(F(M_0), F(claimed Gram) if feasible):
   both are valid whatever the claim (weak duality holds at every linearization point);
8. the claimed optimal Gram (default the ETF Gram) is feasible, its value is <= lower + tol, its own
   KKT bound (the same inequality at M_0 = claim with the best nu, a C-variable SDP) is tight, and, for
   strictly convex psi (infonce, infonce-mean), the solver's optimizer is within gram_tol of it. For
   triplet (convex, not strictly) the optimizer set is not a singleton (e.g. SCL, margin 1: every
   feasible M with non-positive off-diagonal entries is optimal), so the optimizer's distance to the
   ETF is reported, not required.

Sources: docs/theory.md sections 4-6; jiang2025hard, Theorem 2 (SCL) and Theorem 3 (UCL).
"""

from __future__ import annotations

import time
import warnings
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

import numpy as np

from ncgeom.geometry import etf_gram, gram_etf_residual
from ncgeom.theory import nc_value
from ncgeom.validate import require_choice, require_real
from ncgeom.vocabulary import STRICTLY_CONVEX_PSI, Domain, PsiName, is_supervised
from proofs_check.certificates.program import (
    GramProgram,
    ProgramSetting,
    build_cvxpy_problem,
    gram_program,
    program_gradient,
    program_objective,
)
from proofs_check.records import CheckResult, Status

__all__ = ["SolverChoice", "Tolerances", "GramCertificate", "certify_gram_program", "certificate_check"]

SolverChoice = Literal["auto", "clarabel", "scs"]
SOLVER_CHOICES: tuple[SolverChoice, ...] = ("auto", "clarabel", "scs")


@dataclass(frozen=True)
class Tolerances:
    """Tolerances of a certificate, with the reason for each.

    feas : 1e-7, 10x the solver's feasibility tolerance (1e-8 for Clarabel/SCS as configured here).
    value : 1e-6, for comparing optimal values: solver gaps are ~1e-9 (Clarabel) to ~1e-7 (SCS);
        objectives are O(1).
    gap : 1e-5, for the certified bound at the solver's optimizer: a linearization bound is first order
        in the optimizer's error (~1e-5 in the entries of M), unlike the primal value (second order).
        The claim's own KKT bound is exact for a true claim and is held to ``value``.
    stationarity : 1e-5, multipliers are accurate to ~sqrt(solver tolerance) near degenerate vertices.
    gram : 1e-3, ||M - G||_F; for a strictly convex F with curvature mu the optimizer error is
        ~sqrt(2 gap / mu), i.e. 1e-4 for gap 1e-9 and mu ~ 0.1.
    """

    feas: float = 1e-7
    value: float = 1e-6
    gap: float = 1e-5
    stationarity: float = 1e-5
    gram: float = 1e-3


@dataclass(frozen=True)
class GramCertificate:
    """Result of :func:`certify_gram_program`; ``checks`` maps each criterion to True/False/None (skipped).

    value_lower_bound, value_upper_bound : the interval [lower, upper] of criterion 7 (module docstring).
    gap : certified gap F(M_0) - dual_bound of criterion 6 (independent of the solver's own accounting).
    solver_reported_gap : the solver's duality gap |pobj - dobj| at its own iterate (Clarabel and SCS);
        None when the solver does not report one.
    """

    program: dict[str, Any]
    solver: str
    solver_status: str
    primal_value: float
    solver_value: float
    dual_bound: float
    dual_bound_solver_multipliers: float
    gap: float
    solver_reported_gap: float | None
    primal_min_eigenvalue: float
    primal_diag_violation: float
    dual_min_eigenvalue: float
    dual_min_nu: float
    stationarity_residual: float
    complementarity: float
    claimed_value: float
    claimed_value_source: str
    claimed_gram_value: float
    claimed_gram_min_eigenvalue: float
    claimed_gram_kkt_bound: float
    distance_to_claimed_gram: float
    distance_to_etf: float
    minimizer_unique: bool
    checks: dict[str, bool | None]
    tolerances: Tolerances
    optimizer_gram: tuple[tuple[float, ...], ...] = field(repr=False)
    notes: str = ""
    value_lower_bound: float = float("nan")
    value_upper_bound: float = float("nan")

    @property
    def passed(self) -> bool:
        return all(v for v in self.checks.values() if v is not None)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _clarabel_reporting_gap():
    """cvxpy's Clarabel interface, keeping Clarabel's duality gap in ``solver_stats.extra_stats``.

    cvxpy (1.9) drops Clarabel's primal and dual objectives (``extra_stats`` is None), so without this the
    solver's own gap is unknown; the stats take SCS's shape, ``{"info": {"gap", "pobj", "dobj"}}``, with
    gap = |pobj - dobj| (absolute, as SCS reports it). A custom solver needs a name of its own in cvxpy.
    """
    import cvxpy.settings as cvxpy_settings
    from cvxpy.reductions.solvers.conic_solvers.clarabel_conif import CLARABEL

    class ClarabelReportingGap(CLARABEL):
        def name(self):
            return "CLARABEL_REPORTING_GAP"

        def invert(self, solution, inverse_data):
            out = super().invert(solution, inverse_data)
            pobj, dobj = getattr(solution, "obj_val", None), getattr(solution, "obj_val_dual", None)
            if pobj is not None and dobj is not None:
                info = {"gap": abs(float(pobj) - float(dobj)), "pobj": float(pobj), "dobj": float(dobj)}
                out.attr[cvxpy_settings.EXTRA_STATS] = {"info": info}
            return out

    return ClarabelReportingGap()


def _solve(program: GramProgram, solver: str):
    """Solve with Clarabel, falling back to SCS; returns (problem, M, psd, diag, name, note)."""
    import cvxpy as cp

    order = {"auto": ["CLARABEL", "SCS"], "clarabel": ["CLARABEL"], "scs": ["SCS"]}[solver]
    instances = {"CLARABEL": _clarabel_reporting_gap, "SCS": lambda: "SCS"}
    options = {
        "CLARABEL": {"tol_gap_abs": 1e-10, "tol_gap_rel": 1e-10, "tol_feas": 1e-10},
        "SCS": {"eps_abs": 1e-9, "eps_rel": 1e-9, "max_iters": 200_000},
    }
    notes = []
    last = None
    for name in order:
        if name not in cp.installed_solvers():
            notes.append(f"{name} not installed")
            continue
        problem, m, psd, diag = build_cvxpy_problem(program)
        try:
            with warnings.catch_warnings():  # "solution may be inaccurate": recorded via the status
                warnings.simplefilter("ignore", UserWarning)
                problem.solve(solver=instances[name](), **options[name])
        except cp.error.SolverError as exc:
            notes.append(f"{name} failed: {exc}")
            continue
        last = (problem, m, psd, diag, name)
        if problem.status == cp.OPTIMAL:
            return (*last, "; ".join(notes))
        notes.append(f"{name} status {problem.status}")
    if last is None:
        return None, None, None, None, "none", "; ".join(notes)
    return (*last, "; ".join(notes))


def _project_feasible(m: np.ndarray, domain: str) -> np.ndarray:
    """Nearest-ish feasible Gram: clip negative eigenvalues, then rescale rows/columns to diag <= 1 (=1)."""
    w, v = np.linalg.eigh((m + m.T) / 2)
    psd = (v * np.clip(w, 0.0, None)) @ v.T
    d = np.diag(psd).copy()
    scale = 1.0 / np.sqrt(np.maximum(d, 1e-300)) if domain == "sphere" else 1.0 / np.sqrt(np.maximum(d, 1.0))
    out = psd * scale[:, None] * scale[None, :]
    return (out + out.T) / 2


def _lagrangian_bound(program: GramProgram, m0: np.ndarray, nu: np.ndarray) -> tuple[float, np.ndarray]:
    """Certified lower bound F(M0) - <Y, M0> - sum(nu'), nu' = nu shifted so Y + diag(nu') is PSD."""
    y = program_gradient(program, m0)
    y = (y + y.T) / 2
    nu = np.maximum(nu, 0.0) if program.domain == "ball" else np.asarray(nu, dtype=np.float64)
    shift = max(0.0, -float(np.linalg.eigvalsh(y + np.diag(nu)).min()))
    nu = nu + shift
    return program_objective(program, m0) - float(np.sum(y * m0)) - float(nu.sum()), nu


def _best_multiplier(program: GramProgram, m0: np.ndarray) -> np.ndarray:
    """min sum(nu) s.t. Y(M0) + diag(nu) PSD (nu >= 0 on the ball): the best bound at M0 (tiny SDP)."""
    import cvxpy as cp

    y = program_gradient(program, m0)
    y = (y + y.T) / 2
    nu = cp.Variable(program.num_classes)
    cons = [y + cp.diag(nu) >> 0] + ([nu >= 0] if program.domain == "ball" else [])
    prob = cp.Problem(cp.Minimize(cp.sum(nu)), cons)
    try:
        prob.solve(solver="CLARABEL" if "CLARABEL" in cp.installed_solvers() else "SCS")
    except cp.error.SolverError:
        return np.full(program.num_classes, np.abs(y).sum())
    if nu.value is None:
        return np.full(program.num_classes, np.abs(y).sum())
    return np.asarray(nu.value, dtype=np.float64)


def certify_gram_program(
    setting: ProgramSetting,
    psi: PsiName = "infonce",
    *,
    num_classes: int,
    num_negatives: int,
    domain: Domain = "sphere",
    tau: float = 1.0,
    margin: float = 1.0,
    claimed_value: float | None = None,
    claimed_gram=None,
    solver: SolverChoice = "auto",
    tolerances: Tolerances = Tolerances(),
) -> GramCertificate | None:
    """Solve one Gram program and certify (or refute) the claimed optimum; None if no solver succeeded.

    Parameters
    ----------
    setting : {"scl", "ucl"}
    psi : {"infonce", "infonce-mean", "triplet"}
    num_classes, num_negatives : int
        C >= 2 and 1 <= k <= 8.
    domain : {"ball", "sphere"}
        diag(M) <= 1 or diag(M) = 1.
    tau, margin : float
        Parameters of psi.
    claimed_value : float, optional
        Claimed minimum; default ``nc_value(setting, psi, ...)`` (docs/theory.md section 5).
    claimed_gram : array [C, C], optional
        Claimed minimizer; default the ETF Gram.
    solver : {"auto", "clarabel", "scs"}
    tolerances : Tolerances

    Examples
    --------
    C = 4, k = 2, tau = 0.5, UCL, infonce: the optimum is 0.4145938 (docs/theory.md section 6).
    """
    solver = require_choice("solver", solver, SOLVER_CHOICES)
    program = gram_program(setting, psi, num_classes=num_classes, num_negatives=num_negatives,
                           domain=domain, tau=tau, margin=margin)
    c = program.num_classes
    if claimed_value is None:
        claimed_value = nc_value(setting, psi, num_classes=c, num_negatives=num_negatives, tau=tau, margin=margin)
        source = "ncgeom.theory.nc_value"
    else:
        claimed_value = require_real("claimed_value", claimed_value)
        source = "caller"
    claim_gram = etf_gram(c) if claimed_gram is None else np.asarray(claimed_gram, dtype=np.float64)
    if claim_gram.shape != (c, c):
        raise ValueError(f"claimed_gram must have shape [{c}, {c}], got {claim_gram.shape}")

    problem, m_var, psd, diag, name, notes = _solve(program, solver)
    if problem is None or m_var.value is None:
        return None
    tol = tolerances
    m_hat = (m_var.value + m_var.value.T) / 2
    m0 = _project_feasible(m_hat, domain)
    primal = program_objective(program, m0)
    z = np.asarray(psd.dual_value, dtype=np.float64)
    z = (z + z.T) / 2
    nu = np.asarray(diag.dual_value, dtype=np.float64).reshape(c)
    bound_solver, _ = _lagrangian_bound(program, m0, nu)
    bound_best, _ = _lagrangian_bound(program, m0, _best_multiplier(program, m0))
    y_hat = program_gradient(program, m_hat)
    y_hat = (y_hat + y_hat.T) / 2
    diag_m = np.diag(m_hat)
    diag_violation = float(np.max(diag_m - 1.0) if domain == "ball" else np.max(np.abs(diag_m - 1.0)))
    stationarity = float(np.linalg.norm(y_hat + np.diag(nu) - z))
    complementarity = abs(float(np.sum(z * m_hat))) + abs(float(nu @ (diag_m - 1.0)))
    claim_min_eig = float(np.linalg.eigvalsh((claim_gram + claim_gram.T) / 2).min())
    claim_diag = np.diag(claim_gram)
    claim_diag_ok = bool(np.all(claim_diag <= 1 + tol.feas)) if domain == "ball" else bool(
        np.all(np.abs(claim_diag - 1) <= tol.feas))
    claim_value_at_gram = program_objective(program, claim_gram)
    # feasible up to rounding (the float ETF Gram has lambda_min ~ -1e-16): F there is an upper bound to
    # within ~feas * ||Y||, far below tol.value (an exact ">= 0" test silently dropped the ETF's own value)
    claim_feasible = bool(claim_min_eig >= -tol.feas and claim_diag_ok)
    kkt_nu = _best_multiplier(program, claim_gram)
    claim_kkt, _ = _lagrangian_bound(program, claim_gram, kkt_nu)
    bound = max(bound_solver, bound_best)
    # Weak duality holds at every linearization point, so the claim's KKT bound is a valid lower bound
    # whether or not the claim is right (a wrong claim only gives a weaker bound); likewise a feasible
    # claimed Gram is a valid upper bound. The claimed value is compared with the best of both.
    best_lower = max(bound, claim_kkt)
    best_upper = min(primal, claim_value_at_gram) if claim_feasible else primal
    unique = program.psi in STRICTLY_CONVEX_PSI
    distance = float(np.linalg.norm(m_hat - claim_gram))
    reported_gap = None
    stats = getattr(problem.solver_stats, "extra_stats", None)
    if isinstance(stats, dict) and "info" in stats and "gap" in stats["info"]:
        reported_gap = float(stats["info"]["gap"])
    checks: dict[str, bool | None] = {
        "solver_optimal": problem.status == "optimal",
        "primal_feasible": bool(np.linalg.eigvalsh(m_hat).min() >= -tol.feas and diag_violation <= tol.feas),
        "objective_agrees": bool(abs(float(problem.value) - program_objective(program, m_hat)) <= tol.value),
        "dual_feasible": bool(np.linalg.eigvalsh(z).min() >= -tol.feas
                              and (domain == "sphere" or nu.min() >= -tol.feas)),
        "stationary": bool(stationarity <= tol.stationarity) if unique else None,
        "complementary": bool(complementarity <= tol.stationarity) if unique else None,
        "gap_small": bool(0.0 <= primal - bound + tol.value and primal - bound <= tol.gap),
        "solver_gap_small": None if reported_gap is None else bool(abs(reported_gap) <= tol.gap),
        "claimed_value_is_optimum": bool(best_lower - tol.value <= claimed_value <= best_upper + tol.value),
        "claimed_gram_feasible": bool(claim_min_eig >= -tol.feas and claim_diag_ok),
        "claimed_gram_attains_bound": bool(claim_value_at_gram <= best_lower + tol.value),
        "claimed_gram_kkt": bool(claim_value_at_gram - claim_kkt <= tol.value),
        "optimizer_is_claimed_gram": bool(distance <= tol.gram) if unique else None,
    }
    if not unique:
        notes = "; ".join(filter(None, [notes, "psi not strictly convex: optimizer Gram reported, not required"]))
    return GramCertificate(
        program={"setting": setting, "psi": psi, "num_classes": c, "num_negatives": program.num_negatives,
                 "domain": domain, "tau": tau, "margin": margin, "num_terms": program.num_terms},
        solver=name,
        solver_status=str(problem.status),
        primal_value=primal,
        solver_value=float(problem.value),
        dual_bound=bound,
        dual_bound_solver_multipliers=bound_solver,
        gap=primal - bound,
        solver_reported_gap=reported_gap,
        primal_min_eigenvalue=float(np.linalg.eigvalsh(m_hat).min()),
        primal_diag_violation=diag_violation,
        dual_min_eigenvalue=float(np.linalg.eigvalsh(z).min()),
        dual_min_nu=float(nu.min()),
        stationarity_residual=stationarity,
        complementarity=complementarity,
        claimed_value=float(claimed_value),
        claimed_value_source=source,
        claimed_gram_value=claim_value_at_gram,
        claimed_gram_min_eigenvalue=claim_min_eig,
        claimed_gram_kkt_bound=claim_kkt,
        distance_to_claimed_gram=distance,
        distance_to_etf=gram_etf_residual(m_hat),
        minimizer_unique=unique,
        checks=checks,
        tolerances=tol,
        optimizer_gram=tuple(tuple(float(x) for x in row) for row in m_hat),
        notes=notes,
        value_lower_bound=float(best_lower),
        value_upper_bound=float(best_upper),
    )


def certificate_check(setting: ProgramSetting, psi: PsiName = "infonce", **kwargs: Any) -> CheckResult:
    """Run :func:`certify_gram_program` and wrap it as a CheckResult (pass / fail / unresolved)."""
    t0 = time.perf_counter()
    cert = certify_gram_program(setting, psi, **kwargs)
    c, k = kwargs["num_classes"], kwargs["num_negatives"]
    domain = kwargs.get("domain", "sphere")
    par = f"tau{kwargs.get('tau', 1.0):g}" if psi != "triplet" else f"m{kwargs.get('margin', 1.0):g}"
    name = f"certificate_{setting}_{psi}_{domain}_C{c}_k{k}_{par}"
    constraint = r"\mathrm{diag}(M) \le 1" if domain == "ball" else r"\mathrm{diag}(M) = 1"
    statement = (rf"\min_{{M \succeq 0,\ {constraint}}} F_{{\mathrm{{{setting.upper()}}}}}(M)"
                 rf" = L_{{\mathrm{{{setting.upper()}}}}}(\mathrm{{NC}})\ (C={c}, k={k},\ \psi=\mathrm{{{psi}}})"
                 r",\ \text{attained at the ETF Gram}")
    source = "docs/theory.md section 6; jiang2025hard, " + ("Theorem 2" if is_supervised(setting) else "Theorem 3")
    if cert is None:
        return CheckResult(name, statement, "cvxpy", "unresolved", {"reason": "no solver reached a solution"},
                           time.perf_counter() - t0, source, evidence="numerical")
    details = {
        "primal_value": cert.primal_value, "dual_bound": cert.dual_bound, "gap": cert.gap,
        "dual_bound_solver_multipliers": cert.dual_bound_solver_multipliers,
        "closed_form": cert.claimed_value, "closed_form_source": cert.claimed_value_source,
        "solver_value": cert.solver_value, "solver_reported_gap": cert.solver_reported_gap,
        "primal_min_eigenvalue": cert.primal_min_eigenvalue, "primal_diag_violation": cert.primal_diag_violation,
        "dual_min_eigenvalue": cert.dual_min_eigenvalue, "dual_min_nu": cert.dual_min_nu,
        "stationarity_residual": cert.stationarity_residual, "complementarity": cert.complementarity,
        "claimed_gram_value": cert.claimed_gram_value, "claimed_gram_kkt_bound": cert.claimed_gram_kkt_bound,
        "distance_to_claimed_gram": cert.distance_to_claimed_gram, "distance_to_etf": cert.distance_to_etf,
        "minimizer_unique": cert.minimizer_unique, "checks": cert.checks,
        "value_lower_bound": cert.value_lower_bound, "value_upper_bound": cert.value_upper_bound, "solver": cert.solver,
        "solver_status": cert.solver_status, "tolerances": asdict(cert.tolerances), "notes": cert.notes,
        **cert.program,
    }
    status: Status = "pass" if cert.passed else "fail"
    # numerical: the solver's optimizer and the weak-duality bound are floating-point (tolerances above)
    return CheckResult(name, statement, f"cvxpy-{cert.solver.lower()}", status, details,
                       time.perf_counter() - t0, source, evidence="numerical")
