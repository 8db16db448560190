"""Convex certificates for the Jensen-reduced Gram programs (docs/theory.md section 6).

``program`` builds the SCL/UCL programs (multiset enumeration, numpy objective and gradient, cvxpy
problem); ``certify`` solves them (Clarabel, SCS fallback) and checks primal feasibility, dual
feasibility, a certified duality gap, the closed form and the ETF optimizer; ``grid`` lists the
certificates that ``ncgeom verify`` runs. cvxpy is imported only when a program is solved.
"""

from ncgeom.vocabulary import DOMAINS, Domain  # re-exported: the domains a program accepts
from proofs_check.certificates.certify import (
    GramCertificate,
    SolverChoice,
    Tolerances,
    certificate_check,
    certify_gram_program,
)
from proofs_check.certificates.grid import CertificateCase, certificate_cases, checks
from proofs_check.certificates.program import (
    PROGRAM_SETTINGS,
    GramProgram,
    ProgramSetting,
    build_cvxpy_problem,
    gram_program,
    naive_program_objective,
    program_gradient,
    program_objective,
)

__all__ = [
    "GramCertificate",
    "SolverChoice",
    "Tolerances",
    "certificate_check",
    "certify_gram_program",
    "CertificateCase",
    "certificate_cases",
    "checks",
    "DOMAINS",
    "PROGRAM_SETTINGS",
    "Domain",
    "GramProgram",
    "ProgramSetting",
    "build_cvxpy_problem",
    "gram_program",
    "naive_program_objective",
    "program_gradient",
    "program_objective",
]
