"""proofs_check: symbolic derivations, exact Harris checks and convex certificates for ncgeom's theory.

Every check returns a :class:`proofs_check.records.CheckResult` whose status is ``pass``, ``fail`` or
``unresolved`` (never ``pass`` for what could not be decided). ``ncgeom verify`` runs them all.
Importing this package does not import cvxpy; the certificate module does, on first use.
"""

from proofs_check.records import CheckResult, Status

__all__ = ["CheckResult", "Status"]
