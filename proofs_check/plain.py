"""The statement of each check in plain words, for the text table of ``ncgeom verify`` (the LaTeX stays in JSON).

A :class:`~proofs_check.records.CheckResult` states what it checked in LaTeX (``statement``), which the JSON
output and report.md keep. A terminal cannot render it, so the text table shows :func:`plain_statement`
instead: the words of the check's family (:data:`PLAIN_STATEMENTS`, keyed by the name's prefix: the name's
parameters, ``[infonce,k=2]`` or ``_C4_d3``, are in the check column beside it), or, for a check this
module does not know yet, :func:`latex_to_text` of its LaTeX. One owner: this module is the only place
that words a check for a reader.

Some passes read like failures ("NC is beaten", "a violation is detected"): :data:`PASS_NOTES` says why
such a pass is what the theory predicts, and the table shows the note under it (:func:`pass_note`).
"""

from __future__ import annotations

import re

from proofs_check.records import CheckResult

__all__ = ["PLAIN_STATEMENTS", "PASS_NOTES", "check_family", "plain_statement", "pass_note", "latex_to_text"]

#: Check family (the name up to its parameters) -> what the check states, in words (docs/theory.md sections).
PLAIN_STATEMENTS: dict[str, str] = {
    # symbolic (docs/theory.md, sections 1-5)
    "etf_gram_symbolic": "the simplex ETF's Gram matrix is C/(C-1) I - 11^T/(C-1): unit diagonal, off-diagonal "
                         "-1/(C-1), rows summing to 0, eigenvalues C/(C-1) (C-1 times) and 0, for every C >= 2",
    "etf_gram_exact": "the spectrum of C/(C-1) I - 11^T/(C-1) is C/(C-1) (C-1 times) and 0, in exact rationals",
    "etf_existence": "a unit simplex ETF of C vectors exists in R^d if and only if d >= C - 1",
    "simplex_etf_gram": "ncgeom.geometry.simplex_etf(C, d) has exactly the ETF's Gram matrix",
    "negative_similarity_identity": "the expected similarity of an anchor and a negative of another class is "
                                    "(||sum of the class means||^2 - sum of ||class mean||^2) / (C(C-1))",
    "negative_similarity_bound": "with class means of norm <= 1 that expected similarity is >= -1/(C-1), with "
                                 "equality at the ETF",
    "psi_convex": "psi_k is convex (hypothesis R2 of Theorems 2 and 3)",
    "psi_monotone": "psi_k is non-decreasing in each argument (hypothesis R1)",
    "psi_implementation": "ncgeom.losses' psi_k equals the formula of docs/theory.md, section 2",
    "closed_form_binomial": "the loss at NC from ncgeom.population equals the binomial closed form of "
                            "docs/theory.md, section 5 (collision probability 0, 1/C and pi_beta)",
    "scl_closed_forms": "the SCL loss at NC is log(1 + k e^(-C/((C-1) tau))) (infonce), "
                        "log(1 + e^(-C/((C-1) tau))) (mean form) and max(0, m - C/(C-1)) (triplet)",
    "collision_probability_symbolic": "at NC a hard negative shares the anchor's class with probability "
                                      "pi_beta = e^beta / (e^beta + (C-1) e^(-beta/(C-1))) for HUCL (1/C for UCL, "
                                      "0 for SCL and HSCL), which grows with beta",
    "collision_probability": "ncgeom.theory.collision_probability equals that of the exact tilted law",
    "nc_value": "ncgeom.theory.nc_value equals the expectation over the exact tilted class law",
    "instance_positive_example": "with instance positives (x+ = x) the cross-polytope has a lower loss than NC "
                                 "for C >= 3 (equal at C = 2)",
    # harris (docs/theory.md, section 4, Theorem 1)
    "harris_inequality": "Harris: under a product measure two non-decreasing functions are positively correlated",
    "tilted_vs_plain_joint_eta": "Theorem 1 also holds for a joint tilt eta(S_1, ..., S_k) that is non-decreasing "
                                 "in each similarity",
    "tilted_vs_plain": "Theorem 1: with psi and eta non-decreasing, hard negatives never lower the loss "
                       "(L_HSCL >= L_SCL, L_HUCL >= L_UCL)",
    "tilted_gap_is_covariance": "the hard-minus-plain loss gap is a covariance of non-decreasing functions, so >= 0",
    "tilted_equality_at_nc": "at NC, L_HSCL = L_SCL and L_HUCL > L_UCL (psi and eta strictly increasing)",
    "harris_needs_product": "self-test: a non-product measure under which Harris fails is detected",
    "tilted_needs_monotone_eta": "self-test: a non-monotone eta with L_HSCL < L_SCL is detected",
    # jensen (Theorems 2-3, steps 1-2)
    "jensen_step": "the Jensen step of Theorems 2 and 3: for a convex psi_k, E psi_k(t) >= psi_k(E t)",
    # certificates (docs/theory.md, section 6)
    "certificate": "convex certificate: over Gram matrices (PSD, unit or bounded diagonal) the population loss's "
                   "minimum equals its value at NC and is attained at the ETF's Gram matrix",
    # counterexample (Theorem 3 without hypothesis 3.5)
    "counterexample_exact": "with instance positives (x+ = x) the cross-polytope beats NC for 3 <= C <= 10, in "
                            "exact arithmetic",
    "counterexample_all_classes": "with instance positives the cross-polytope beats NC for every C >= 3 (interval "
                                  "proof)",
    "counterexample_search": "with instance positives a numerical search finds a configuration below NC",
    # hucl (docs/theory.md, section 4: NC-optimality of HUCL is open)
    "hucl_local_threshold": "HUCL: the beta above which NC stops being a local minimizer (the Hessian's smallest "
                            "eigenvalue turns negative), by bisection",
    "hucl_local_certificate": "HUCL: interval proof that NC's Hessian is positive just below that beta and has a "
                              "negative eigenvalue just above it",
    "hucl_local_agreement": "HUCL: autograd's Hessian at NC has the jets' eigenvalues, and they change sign at the "
                            "same beta",
    "hucl_global_switch": "HUCL: the beta above which some configuration has a lower loss than NC (multi-start "
                          "search)",
    "hucl_switch_witness": "HUCL: the configuration found has a lower loss than NC at the upper end of the switch "
                           "bracket (interval proof)",
    "hucl_switch_consistency": "HUCL: a configuration below NC exists at the first beta past the local threshold, so "
                               "the switch comes no later than it",
    "hucl_exploration": "HUCL: the lowest loss found vs the loss at NC, as beta grows",
    "hucl_harris_bound": "HUCL: every loss found is >= the UCL loss at NC (Theorem 1's bound)",
    "hucl_nc_closed_form": "HUCL: the closed-form loss at NC equals the enumeration at the ETF",
    "hucl_batch_thresholds": "HUCL, the batch objective with detached weights: its local threshold and switch",
    "hucl_batch_estimator_agreement": "HUCL: the collapsed batch loss and its gradient equal ncgeom.losses.batch_loss "
                                      "(weighted, detached weights)",
    "hucl_thresholds": "HUCL thresholds by dimension: the local threshold and the switch for each (C, d)",
}

#: Check family -> why its pass, which reads like a failure, is what the theory predicts.
PASS_NOTES: dict[str, str] = {
    "harris_needs_product": "a self-test: the checker is fed a statement known to be false, and a pass means that it "
                            "caught it.",
    "tilted_needs_monotone_eta": "a self-test: the checker is fed a statement known to be false, and a pass means "
                                 "that it caught it.",
    "instance_positive_example": "NC being beaten is the expected result: instance positives violate hypothesis 3.5 "
                                 "(label-based positives), so Theorem 3 does not apply (docs/theory.md, section 4).",
    "counterexample_exact": "NC being beaten is the expected result: instance positives violate hypothesis 3.5, so "
                            "Theorem 3 does not apply (docs/theory.md, section 4).",
    "counterexample_all_classes": "NC being beaten is the expected result: instance positives violate hypothesis 3.5, "
                                  "so Theorem 3 does not apply (docs/theory.md, section 4).",
    "counterexample_search": "NC being beaten is the expected result: instance positives violate hypothesis 3.5, so "
                             "Theorem 3 does not apply (docs/theory.md, section 4).",
    "hucl_local_certificate": "NC losing local optimality for HUCL at large beta is what claim 3 predicts; no theorem "
                              "says HUCL's optimum is NC (docs/theory.md, section 4).",
    "hucl_switch_witness": "a configuration beating NC for HUCL at large beta is what claim 3 predicts; no theorem "
                           "says HUCL's optimum is NC (docs/theory.md, section 4).",
    "hucl_switch_consistency": "a configuration beating NC for HUCL at large beta is what claim 3 predicts; no theorem "
                               "says HUCL's optimum is NC (docs/theory.md, section 4).",
}

_PARAMETERS = re.compile(r"(\[.*\]|(_(C|d|k|B|m|tau)[0-9.]+)+)$")


def check_family(name: str) -> str:
    """The family of a check: its name without its parameters (``psi_convex[infonce,k=2]`` -> ``psi_convex``,
    ``hucl_local_threshold_C4_d3`` -> ``hucl_local_threshold``); a certificate is ``certificate``.

    >>> check_family("certificate_ucl_infonce_sphere_C4_k2_tau0.5"), check_family("jensen_step[k=2]")
    ('certificate', 'jensen_step')
    """
    if name.startswith("certificate_"):
        return "certificate"
    family = _PARAMETERS.sub("", name)
    return family


def plain_statement(result: CheckResult) -> str:
    """What ``result`` checked, in words: its family's entry of :data:`PLAIN_STATEMENTS`, else
    :func:`latex_to_text` of its LaTeX statement."""
    words = PLAIN_STATEMENTS.get(check_family(result.name))
    return words if words is not None else latex_to_text(result.statement)


def pass_note(result: CheckResult) -> str | None:
    """Why this pass is what the theory predicts, for a pass that reads like a failure (:data:`PASS_NOTES`)."""
    return PASS_NOTES.get(check_family(result.name)) if result.status == "pass" else None


_WRAPPERS = re.compile(r"\\(?:text|mathrm|texttt|mathbf|mathbb|operatorname|textstyle|boldsymbol|mathcal)\s*"
                       r"\{([^{}]*)\}")
_FRACTION = re.compile(r"\\[td]?frac\s*(\{[^{}]*\}|\\?[A-Za-z0-9])\s*(\{[^{}]*\}|\\?[A-Za-z0-9])")
_SYMBOLS = {
    r"\le": "<=", r"\leq": "<=", r"\ge": ">=", r"\geq": ">=", r"\ne": "!=", r"\neq": "!=", r"\langle": "<",
    r"\rangle": ">", r"\forall": "for all ", r"\exists": "exists ", r"\Rightarrow": "=>", r"\iff": "iff",
    r"\infty": "inf", r"\sum": "sum", r"\prod": "prod", r"\otimes": "(x)", r"\uparrow": " non-decreasing",
    r"\mid": "|", r"\cdot": ".", r"\dots": "...", r"\ldots": "...", r"\cdots": "...", r"\in": " in ",
    r"\succeq": ">=", r"\preceq": "<=", r"\approx": "~", r"\to": "->", r"\times": "x", r"\pm": "+-",
    r"\setminus": " minus ", r"\sim": "~", r"\min": "min", r"\max": "max", r"\inf": "inf", r"\sup": "sup",
    r"\log": "log", r"\exp": "exp", r"\partial": "d", r"\propto": " proportional to ", r"\sqrt": "sqrt",
}


def _unbrace(text: str) -> str:
    return text[1:-1] if text.startswith("{") and text.endswith("}") else text


def latex_to_text(latex: str) -> str:
    """A LaTeX statement as plain text: commands to words or ASCII (``\\le`` -> ``<=``, ``\\tfrac ab`` ->
    ``(a)/(b)``, Greek letters by name), braces and spacing commands dropped, whitespace squashed.

    >>> latex_to_text(r"\\exists\\ \\text{unit simplex ETF in } \\mathbb{R}^d \\iff d\\ge C-1")
    'exists unit simplex ETF in R^d iff d>= C-1'
    """
    text = str(latex)
    for _ in range(8):  # nested wrappers, innermost first
        text, n = _WRAPPERS.subn(r"\1", text)
        if not n:
            break
    text = re.sub(r"\\(?:mathbf|mathbb|mathrm|mathcal)\s+(\w)", r"\1", text)  # \mathbb R: one token, no braces
    for _ in range(4):
        text = _FRACTION.sub(lambda m: f"({_unbrace(m.group(1))})/({_unbrace(m.group(2))})", text)
    text = re.sub(r"\\binom\s*(\{[^{}]*\}|\w)\s*(\{[^{}]*\}|\w)",
                  lambda m: f"binom({_unbrace(m.group(1))}, {_unbrace(m.group(2))})", text)
    text = re.sub(r"\\(?:big|Big|bigg|Bigg|left|right)(?![A-Za-z])", "", text)
    text = text.replace(r"\|", "||").replace(r"\_", "_").replace(r"\{", "{").replace(r"\}", "}")
    text = re.sub(r"\\[ ,;:!]", " ", text)
    text = re.sub(r"\\([A-Za-z]+)", lambda m: _SYMBOLS.get("\\" + m.group(1), m.group(1)), text)
    text = text.replace("{", "").replace("}", "").replace("\\", "")
    return " ".join(text.split())
