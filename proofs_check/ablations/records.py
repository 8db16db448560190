"""The record of one hypothesis ablation (issue "hypothesis ablation"; docs/theory.md, section 4).

An ablation takes one hypothesis of one theorem, violates it along a family with a parameter measuring how
far from the hypothesis it is (class imbalance ratio, d below C - 1, a non-convex psi, ...), and checks the
theorem's conclusion there: the result is "holds" (the conclusion survives every violation tried) or
"fails" (a configuration where it does not, with the loss values on both sides and the configuration,
saved so that a reader can recompute it).
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from ncgeom.validate import require_keys
from ncgeom.vocabulary import ABLATION_OUTCOMES, EVIDENCE, AblationOutcome, Evidence

__all__ = ["AblationResult", "ABLATION_RESULTS", "THEOREMS"]

ABLATION_RESULTS: tuple[AblationOutcome, ...] = ABLATION_OUTCOMES  # ncgeom.vocabulary.AblationOutcome's words
#: The theorems of docs/theory.md, section 4, whose hypotheses are ablated.
THEOREMS: tuple[str, ...] = ("1", "2", "3")
_HYPOTHESIS_ID = re.compile(r"^(\d+)\.(\d+) \S")


@dataclass(frozen=True)
class AblationResult:
    """Outcome of one ablation (module docstring).

    theorem : str             "1", "2" or "3" (docs/theory.md, section 4)
    hypothesis : str          the hypothesis as docs/theory.md states it, with its number, e.g.
                              "2.1 balanced classes"
    violation : str           the family tried and its parameter range, e.g. "prior (r, 1, ..., 1)/(r + C - 1),
                              imbalance ratio r in [1, 20]"
    conclusion : str          what is checked there: "NC minimizes L_SCL", "L_HSCL >= L_SCL", ...
    result : str              "holds" or "fails"
    evidence : Evidence       exact, independent or numerical (ncgeom.vocabulary.EVIDENCE)
    gap : float or None       the loss of the best configuration found minus that of the theorem's
                              configuration (negative: the conclusion fails by that much), or the smallest
                              slack of the bound; None if not a loss comparison
    winner : str or None      where it fails: the configuration that beats the conclusion, in words
    configuration : dict      where it fails: {"gram": [[...]]} or {"means": [[...]]} (lists of floats or
                              exact strings), enough to recompute both losses; {} where it holds
    values : dict             the loss values on both sides and the parameter at which they were taken
    details : dict            anything else (coverage of a search: starts, optimizer, grid; tolerances)
    seconds : float           wall time
    """

    theorem: str
    hypothesis: str
    violation: str
    conclusion: str
    result: AblationOutcome
    evidence: Evidence
    gap: float | None = None
    winner: str | None = None
    configuration: dict[str, Any] = field(default_factory=dict)
    values: dict[str, Any] = field(default_factory=dict)
    details: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0

    def __post_init__(self):
        if self.theorem not in THEOREMS:
            raise ValueError(f"theorem must be one of {THEOREMS}, got {self.theorem!r}")
        if self.result not in ABLATION_RESULTS:
            raise ValueError(f"result must be one of {ABLATION_RESULTS}, got {self.result!r}")
        match = _HYPOTHESIS_ID.match(self.hypothesis)
        if match is None or match.group(1) != self.theorem:
            raise ValueError(f"hypothesis must start with '{self.theorem}.<number> ' (its number in docs/theory.md, "
                             f"section 4, e.g. '{self.theorem}.1 balanced classes'), got {self.hypothesis!r}")
        if self.evidence not in EVIDENCE or self.evidence == "self-test":
            raise ValueError(f"evidence must be exact, independent or numerical, got {self.evidence!r}")
        if self.result == "fails" and not self.configuration:
            raise ValueError("an ablation that fails must give the configuration that beats the conclusion")

    @property
    def hypothesis_id(self) -> str:
        """The hypothesis number "<theorem>.<n>" that starts :attr:`hypothesis` (the key of the registry's COVERAGE)."""
        return self.hypothesis.split(" ", 1)[0]

    def to_dict(self) -> dict[str, Any]:
        """The JSON object of this ablation (one record of ``ncgeom verify --ablations --json``)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> AblationResult:
        """The inverse of :meth:`to_dict`; a missing or unknown key raises ValueError naming it."""
        require_keys("ablation record", data, accepted=(f.name for f in fields(cls)),
                     required=("theorem", "hypothesis", "violation", "conclusion", "result", "evidence"))
        return cls(**data)
