"""Which certificates ``ncgeom verify`` runs: a quick subset and the full (C, k) grid."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

from ncgeom.vocabulary import DOMAINS, Domain, PsiName
from proofs_check.certificates.certify import certificate_check
from proofs_check.certificates.program import PROGRAM_SETTINGS, ProgramSetting
from proofs_check.records import CheckResult

__all__ = ["CertificateCase", "certificate_cases", "checks"]


@dataclass(frozen=True)
class CertificateCase:
    """One program to certify (arguments of :func:`certificate_check`)."""

    setting: ProgramSetting
    psi: PsiName
    num_classes: int
    num_negatives: int
    domain: Domain
    tau: float = 1.0
    margin: float = 1.0


# The quick subset: the anchor of docs/theory.md section 6 plus one case per psi, setting and domain.
_QUICK = (
    CertificateCase("ucl", "infonce", 4, 2, "sphere", tau=0.5),  # anchor: 0.4145938
    CertificateCase("scl", "infonce", 3, 1, "ball"),
    CertificateCase("ucl", "infonce-mean", 5, 1, "ball"),
    CertificateCase("scl", "infonce-mean", 4, 3, "sphere"),
    CertificateCase("scl", "triplet", 4, 2, "ball", margin=2.5),
    CertificateCase("ucl", "triplet", 3, 2, "sphere"),
)


def certificate_cases(*, quick: bool) -> tuple[CertificateCase, ...]:
    """The quick subset, or the full grid: C in 2..8, k in 1..3, every built-in psi (infonce at
    tau in {1, 0.5}; triplet at margin in {1, 2.5}), SCL and UCL, ball and sphere (k = 3 for C <= 6)."""
    if quick:
        return _QUICK
    cases = []
    for setting in PROGRAM_SETTINGS:
        for domain in DOMAINS:
            for c in range(2, 9):
                for k in (1, 2, 3):
                    if k == 3 and c > 6:
                        continue
                    cases.append(CertificateCase(setting, "infonce", c, k, domain, tau=1.0))
                    cases.append(CertificateCase(setting, "infonce", c, k, domain, tau=0.5))
                    cases.append(CertificateCase(setting, "infonce-mean", c, k, domain))
                    cases.append(CertificateCase(setting, "triplet", c, k, domain, margin=1.0))
                    cases.append(CertificateCase(setting, "triplet", c, k, domain, margin=2.5))
    return tuple(cases)


def checks(*, quick: bool) -> list[Callable[[], CheckResult]]:
    """Zero-argument checkers, one per certificate (``proofs_check`` checker protocol)."""
    out: list[Callable[[], CheckResult]] = []
    for case in certificate_cases(quick=quick):
        out.append(functools.partial(
            certificate_check, case.setting, case.psi, num_classes=case.num_classes,
            num_negatives=case.num_negatives, domain=case.domain, tau=case.tau, margin=case.margin))
    return out
