"""The words of the domain, defined once: settings, psi names, normalizations, backends, scales, verdicts.

Every module of ncgeom and proofs_check imports its vocabulary from here (this module imports nothing
heavy: no numpy, no torch), so a word has one spelling and one meaning. Predicates replace
hand-written membership tests: ``is_supervised(setting)`` instead of ``setting in ("scl", "hscl")``.

Sources: docs/theory.md, section 3 (the four settings), section 2 (the psi family), section 1
(normalizations), section 7 (batch estimators and backends), section 9 (claims and verdicts).
"""

from __future__ import annotations

import enum
from typing import Literal

__all__ = [
    "Setting",
    "SETTINGS",
    "SUPERVISED_SETTINGS",
    "UNSUPERVISED_SETTINGS",
    "HARD_SETTINGS",
    "is_supervised",
    "is_hard",
    "plain_setting",
    "hard_setting",
    "effective_beta",
    "PsiName",
    "PSI_NAMES",
    "STRICTLY_CONVEX_PSI",
    "Normalization",
    "NORMALIZATIONS",
    "Domain",
    "DOMAINS",
    "Estimator",
    "ESTIMATORS",
    "SampledDraws",
    "SAMPLED_DRAWS",
    "Backend",
    "BACKENDS",
    "Reduction",
    "REDUCTIONS",
    "Convention",
    "CONVENTIONS",
    "ModelKind",
    "MODEL_KINDS",
    "LAYERED_MODELS",
    "Dataset",
    "DATASETS",
    "ImageDataset",
    "IMAGE_DATASETS",
    "ResNetKind",
    "RESNET_KINDS",
    "PositivesKind",
    "POSITIVES_KINDS",
    "PositiveLaw",
    "POSITIVE_LAWS",
    "Init",
    "INITS",
    "DType",
    "DTYPES",
    "Precision",
    "PRECISIONS",
    "Batching",
    "BATCHINGS",
    "Scale",
    "SCALES",
    "SeedSet",
    "SEED_SETS",
    "Engine",
    "ENGINES",
    "DEFAULT_ENGINE",
    "ENGINE_ALIASES",
    "engine_name",
    "RunStatus",
    "RUN_STATUSES",
    "SweepStatus",
    "SWEEP_STATUSES",
    "StageStatus",
    "STAGE_STATUSES",
    "StageOutcomeStatus",
    "STAGE_OUTCOME_STATUSES",
    "FigureStatus",
    "FIGURE_STATUSES",
    "CheckStatus",
    "CHECK_STATUSES",
    "AblationOutcome",
    "ABLATION_OUTCOMES",
    "ConvergenceState",
    "CONVERGENCE_STATES",
    "StopRule",
    "STOP_RULES",
    "StopReason",
    "STOP_REASONS",
    "DeviceType",
    "DEVICE_TYPES",
    "device_type",
    "GeometryOutcome",
    "GEOMETRY_OUTCOMES",
    "RunClass",
    "RUN_CLASSES",
    "CellLabel",
    "CELL_LABELS",
    "MapDecision",
    "MAP_DECISIONS",
    "CellSource",
    "CELL_SOURCES",
    "MapStatus",
    "MAP_STATUSES",
    "PhaseSource",
    "PHASE_SOURCES",
    "LineAxis",
    "LINE_AXES",
    "Verdict",
    "VERDICTS",
    "Evidence",
    "EVIDENCE",
]

# --- settings (docs/theory.md, section 3) ---------------------------------------------------------
Setting = Literal["scl", "hscl", "ucl", "hucl"]
SETTINGS: tuple[Setting, ...] = ("scl", "hscl", "ucl", "hucl")
SUPERVISED_SETTINGS: tuple[Setting, ...] = ("scl", "hscl")
UNSUPERVISED_SETTINGS: tuple[Setting, ...] = ("ucl", "hucl")
HARD_SETTINGS: tuple[Setting, ...] = ("hscl", "hucl")


def is_supervised(setting: str) -> bool:
    """True for SCL and HSCL (negatives from other classes only), False for UCL and HUCL."""
    return _known(setting) in SUPERVISED_SETTINGS


def is_hard(setting: str) -> bool:
    """True for the hard-negative settings HSCL and HUCL (tilted negative law)."""
    return _known(setting) in HARD_SETTINGS


def plain_setting(setting: str) -> Setting:
    """The setting without hardening: hscl -> scl, hucl -> ucl (scl, ucl unchanged)."""
    return "scl" if is_supervised(setting) else "ucl"


def hard_setting(setting: str) -> Setting:
    """The hard counterpart: scl -> hscl, ucl -> hucl (hscl, hucl unchanged)."""
    return "hscl" if is_supervised(setting) else "hucl"


def effective_beta(setting: str, beta: float) -> float:
    """The hardness actually applied: ``beta`` for HSCL/HUCL, 0 for SCL/UCL (which ignore beta)."""
    return float(beta) if is_hard(setting) else 0.0


def _known(setting: str) -> Setting:
    for known in SETTINGS:
        if setting == known:
            return known
    raise ValueError(f"setting must be one of {', '.join(SETTINGS)}, got {setting!r}")


# --- losses (docs/theory.md, sections 2 and 7) ----------------------------------------------------
PsiName = Literal["infonce", "infonce-mean", "triplet"]
PSI_NAMES: tuple[PsiName, ...] = ("infonce", "infonce-mean", "triplet")
STRICTLY_CONVEX_PSI: tuple[PsiName, ...] = ("infonce", "infonce-mean")

Estimator = Literal["weighted", "sampled"]
ESTIMATORS: tuple[Estimator, ...] = ("weighted", "sampled")
# How the sampled estimator draws its negatives (docs/theory.md, section 7): "pair" (k fresh draws for every
# pair) or "anchor" (one k-tuple per anchor, shared by all its pairs; same per-pair law, correlated pairs).
SampledDraws = Literal["pair", "anchor"]
SAMPLED_DRAWS: tuple[SampledDraws, ...] = ("pair", "anchor")

Backend = Literal["auto", "dense", "blocked", "triton"]
BACKENDS: tuple[Backend, ...] = ("auto", "dense", "blocked", "triton")

Reduction = Literal["mean", "sum", "none"]  # of the per-pair values l_ij of a batch loss
REDUCTIONS: tuple[Reduction, ...] = ("mean", "sum", "none")

# Which pairs a batch loss counts (docs/conventions.md, section 2.4): "theory" (docs/theory.md, section 7:
# j != i positives; UCL/HUCL negatives m != i) or "authors" (the paper's code, rjiang03/HCL: the anchor is
# also its own positive, and UCL/HUCL negatives range over the whole batch, the anchor included).
Convention = Literal["theory", "authors"]
CONVENTIONS: tuple[Convention, ...] = ("theory", "authors")

# --- representations (docs/theory.md, section 1) --------------------------------------------------
Normalization = Literal["none", "ball", "sphere"]
NORMALIZATIONS: tuple[Normalization, ...] = ("none", "ball", "sphere")
Domain = Literal["ball", "sphere"]
DOMAINS: tuple[Domain, ...] = ("ball", "sphere")  # the normalizations the theorems allow

# --- experiments (docs/experiments.md) ------------------------------------------------------------
# deep_linear: ``depth`` linear layers without activations (a linear map factored into layers: the setting in which
# jing2022understanding explain dimensional collapse by the interplay of the layers' weight matrices).
ModelKind = Literal["unconstrained", "linear", "mlp", "deep_linear"]
MODEL_KINDS: tuple[ModelKind, ...] = ("unconstrained", "linear", "mlp", "deep_linear")
LAYERED_MODELS: tuple[ModelKind, ...] = ("mlp", "deep_linear")  # the kinds with hidden_dim and depth
Dataset = Literal["gaussian", "digits"]
DATASETS: tuple[Dataset, ...] = ("gaussian", "digits")
# Image data sets (docs/images.md): read from files by ncgeom.data.images, encoded by ncgeom.models.resnet.
ImageDataset = Literal["cifar10", "cifar100", "stl10", "imagefolder"]
IMAGE_DATASETS: tuple[ImageDataset, ...] = ("cifar10", "cifar100", "stl10", "imagefolder")
ResNetKind = Literal["resnet18", "resnet34", "resnet50"]
RESNET_KINDS: tuple[ResNetKind, ...] = ("resnet18", "resnet34", "resnet50")
# How a training batch gets its positives (a Config's ``positives``): label (same-class samples), noise
# (x + sigma_p eps, synthetic inputs) or augment (two SimCLR views of an image, image data sets, docs/images.md).
# noise and augment batches are labelled by instance ids.
PositivesKind = Literal["label", "noise", "augment"]
POSITIVES_KINDS: tuple[PositivesKind, ...] = ("label", "noise", "augment")
# The law of a positive pair (x, x+) in the theory (docs/theory.md, section 3; ncgeom.population,
# ncgeom.theory.check_conditions): label (x+ drawn from the anchor's class, independently of x given the class:
# Theorem 3's conditional independence), instance (x+ = x) or noise (x+ = x + noise, dependent on x). Not the
# same word as PositivesKind: a training batch's noise positives follow the "noise" law, its label positives
# the "label" law, and no batch draws "instance" positives.
PositiveLaw = Literal["label", "instance", "noise"]
POSITIVE_LAWS: tuple[PositiveLaw, ...] = ("label", "instance", "noise")
# How a run's encoder starts (a Config's ``init``): random weights, or near_nc (a random-orientation simplex ETF
# plus noise; unconstrained features only, docs/theory.md section 9, claim 7).
Init = Literal["random", "near_nc"]
INITS: tuple[Init, ...] = ("random", "near_nc")
# The training dtype (metrics are always float64) and the image runs' forward precision (bf16: CUDA autocast).
DType = Literal["float32", "float64"]
DTYPES: tuple[DType, ...] = ("float32", "float64")
Precision = Literal["float32", "bf16"]
PRECISIONS: tuple[Precision, ...] = ("float32", "bf16")
# How a run draws its batches (ncgeom.data.batches): "balanced" (class-balanced batches, ceil(N / B) per
# epoch) or "shuffle" (a permutation of the training set per epoch cut into floor(N / B) batches, as a
# DataLoader with shuffle=True, drop_last=True: the class counts of a batch follow the data's class sizes).
Batching = Literal["balanced", "shuffle"]
BATCHINGS: tuple[Batching, ...] = ("balanced", "shuffle")

# How much computation a sweep or a reproduction spends: ``tiny`` (tests, seconds), ``quick`` (the
# default, minutes on two cores), ``full`` (the paper-scale settings, CPU-hours).
Scale = Literal["tiny", "quick", "full"]
SCALES: tuple[Scale, ...] = ("tiny", "quick", "full")
# The seeds a sweep trains (docs/theory.md, section 9, "Confirmatory seeds"): those its setup and rules were explored
# on, or the fresh ones its verdicts are reported on (the default; a spec's plain ``seeds`` are these).
SeedSet = Literal["confirmatory", "exploratory"]
SEED_SETS: tuple[SeedSet, ...] = ("confirmatory", "exploratory")


# How a sweep trains its runs (docs/experiments.md, "Engines"): "stacked" (runs of equal shapes as one
# computation, ncgeom.runs.stacked) or "sequential" (one run after another, ncgeom.runs.run). The default is
# "stacked": a run of a stack is bitwise the run trained alone by the stacked driver (float32 and float64, one
# thread per worker), so resume and re-splitting give an uninterrupted sweep's numbers. "batched" is the
# engine's earlier name, accepted for one release (engine_name; CHANGELOG.md).
Engine = Literal["stacked", "sequential"]
ENGINES: tuple[Engine, ...] = ("stacked", "sequential")
DEFAULT_ENGINE: Engine = "stacked"
ENGINE_ALIASES: dict[str, Engine] = {"batched": "stacked"}


def engine_name(engine: object, *, name: str = "engine") -> Engine:
    """The engine ``engine`` names: one of :data:`ENGINES`, or its earlier spelling (:data:`ENGINE_ALIASES`,
    with a DeprecationWarning); ValueError naming ``name`` otherwise.

    >>> engine_name("sequential")
    'sequential'
    """
    for known in ENGINES:
        if engine == known:
            return known
    if isinstance(engine, str) and engine in ENGINE_ALIASES:
        import warnings

        new = ENGINE_ALIASES[engine]
        warnings.warn(f"{name} {engine!r} is now called {new!r}; the old name will be removed in the next release",
                      DeprecationWarning, stacklevel=2)
        return new
    raise ValueError(f"{name} must be one of {', '.join(ENGINES)}, got {engine!r}")


# Where a run trains (docs/experiments.md, "Devices"): a torch device type; a device is "cpu", "cuda" (the
# current CUDA device) or "cuda:N" (the N-th).
DeviceType = Literal["cpu", "cuda"]
DEVICE_TYPES: tuple[DeviceType, ...] = ("cpu", "cuda")


def device_type(device: object, *, name: str = "device") -> DeviceType:
    """The type of a device name "cpu", "cuda" or "cuda:N" (N >= 0, no leading zero); else ValueError naming ``name``.

    >>> device_type("cuda:1")
    'cuda'
    """
    if isinstance(device, str):
        kind, sep, index = device.partition(":")
        if device == "cpu" or (kind == "cuda" and (not sep or (index.isascii() and index.isdigit()
                                                               and index == str(int(index))))):
            return "cpu" if kind == "cpu" else "cuda"
    shown = repr(device) if len(repr(device)) <= 60 else repr(device)[:57] + "..."
    raise ValueError(f"{name} must be 'cpu', 'cuda' or 'cuda:N' (N >= 0 an integer), got {shown}")


# --- statuses: how a run, a sweep's run, a reproduction stage, a figure, a check, an ablation ended ---------
# A run (summary.json, ncgeom.runs.records): completed, or diverged (a non-finite loss, embedding, gradient or
# parameter stopped it; the state of the last complete epoch is kept).
RunStatus = Literal["completed", "diverged"]
RUN_STATUSES: tuple[RunStatus, ...] = ("completed", "diverged")
# A run of a sweep (ncgeom.campaigns.sweep): the run's own status, or failed (an exception; retried on resume).
SweepStatus = Literal["completed", "diverged", "failed"]
SWEEP_STATUSES: tuple[SweepStatus, ...] = ("completed", "diverged", "failed")
# A reproduction stage's record (OUT/.stages/<stage>.json), and what happened to it in one call.
StageStatus = Literal["done", "failed"]
STAGE_STATUSES: tuple[StageStatus, ...] = ("done", "failed")
StageOutcomeStatus = Literal["done", "skipped", "failed"]
STAGE_OUTCOME_STATUSES: tuple[StageOutcomeStatus, ...] = ("done", "skipped", "failed")
# A figure of a reproduction (OUT/figures/status.json): drawn, no data (its inputs are absent), or failed.
FigureStatus = Literal["done", "no data", "failed"]
FIGURE_STATUSES: tuple[FigureStatus, ...] = ("done", "no data", "failed")
# A check of ncgeom verify (proofs_check.records.CheckResult); "info" reports numbers without a verdict.
CheckStatus = Literal["pass", "fail", "unresolved", "info"]
CHECK_STATUSES: tuple[CheckStatus, ...] = ("pass", "fail", "unresolved", "info")
# A hypothesis ablation (proofs_check.ablations): the theorem's conclusion holds on every violation tried, or
# fails on one (the hypothesis is needed).
AblationOutcome = Literal["holds", "fails"]
ABLATION_OUTCOMES: tuple[AblationOutcome, ...] = ("holds", "fails")


# --- convergence (docs/theory.md, section 9, "Convergence"; ncgeom.runs.convergence) -----------------------
# Where a run stands at a metric epoch, by a measure that does not refer to the NC value: converged (the gradient
# of its training objective has fallen and its loss and deciding metrics stopped moving), still moving, stalled
# (the metrics stopped moving while the gradient did not fall), undetermined (too few metric epochs to judge).
ConvergenceState = Literal["converged", "still moving", "stalled", "undetermined"]
CONVERGENCE_STATES: tuple[ConvergenceState, ...] = ("converged", "still moving", "stalled", "undetermined")
# When a run stops (a Config's ``stop``): at its epoch budget, or as soon as it has converged (the budget a cap).
StopRule = Literal["budget", "converged"]
STOP_RULES: tuple[StopRule, ...] = ("budget", "converged")
# Why a run stopped (summary.json): its budget was spent, it converged (stop="converged"), or it diverged.
StopReason = Literal["budget", "converged", "diverged"]
STOP_REASONS: tuple[StopReason, ...] = ("budget", "converged", "diverged")


# --- the geometry of embeddings in one word (ncgeom.metrics.outcome; docs/theory.md, sections 8-9) ---------
GeometryOutcome = Literal["NC", "DC", "neither", "undefined"]
GEOMETRY_OUTCOMES: tuple[GeometryOutcome, ...] = ("NC", "DC", "neither", "undefined")


# --- phase maps (ncgeom.phase; docs/theory.md, section 9, "Phase maps") ---------------------------------------
# The class of one run of a map: the geometry of its final metrics (a GeometryOutcome), or "not converged" when the
# map decides end states and the run did not converge (a diverged run included: it decides nothing).
RunClass = Literal["NC", "DC", "neither", "undefined", "not converged"]
RUN_CLASSES: tuple[RunClass, ...] = ("NC", "DC", "neither", "undefined", "not converged")
# The label of a cell (a grid point and its seeds): the class every seed of it has, or "mixed" when they differ.
CellLabel = Literal["NC", "DC", "neither", "undefined", "not converged", "mixed"]
CELL_LABELS: tuple[CellLabel, ...] = ("NC", "DC", "neither", "undefined", "not converged", "mixed")
# When a map reads a run: at its end state (a run that has not converged is "not converged": the end-state claims'
# rule), or at its epoch budget (the fixed-budget claims' rule: unnormalized features never converge).
MapDecision = Literal["converged", "budget"]
MAP_DECISIONS: tuple[MapDecision, ...] = ("converged", "budget")
# Where a cell's label comes from: its own runs (trained), or the agreeing corners of the box or edge it lies in
# (inferred by the refinement of ncgeom.phase.lattice).
CellSource = Literal["trained", "inferred"]
CELL_SOURCES: tuple[CellSource, ...] = ("trained", "inferred")
# A map's record: every level evaluated (complete), or stopped after a level with failed runs (incomplete: rerun it).
MapStatus = Literal["complete", "incomplete"]
MAP_STATUSES: tuple[MapStatus, ...] = ("complete", "incomplete")
# Where a reproduction's phase stage takes its maps: it trains them ("train", the tiny scale's smoke map) or reads
# the records shipped with the package ("shipped", :mod:`ncgeom.phase.shipping`; quick and full).
PhaseSource = Literal["train", "shipped"]
PHASE_SOURCES: tuple[PhaseSource, ...] = ("train", "shipped")
# Which coordinate a theory line of a map gives (ncgeom.phase.overlays): "x" (an x value for each y value of the
# panel: drawn as steps through the rows) or "y" (a y value for each x value).
LineAxis = Literal["x", "y"]
LINE_AXES: tuple[LineAxis, ...] = ("x", "y")


# --- claims (docs/theory.md, section 9) -----------------------------------------------------------
class Verdict(enum.StrEnum):
    """The verdict of a claim evaluation. ``str(Verdict.HOLDS) == "holds"`` (the JSON spelling)."""

    HOLDS = "holds"
    PARTIALLY_HOLDS = "partially holds"
    DOES_NOT_HOLD = "does not hold"
    INCONCLUSIVE = "inconclusive"


VERDICTS: tuple[str, ...] = tuple(v.value for v in Verdict)


# --- kinds of evidence (docs/theory.md, section 9; `ncgeom verify`) ---------------------------------
# What a check's pass is worth: "exact" (exact arithmetic, a symbolic identity or an interval enclosure:
# a proof for the instance checked), "independent" (two computations that share no code path agree),
# "numerical" (a floating-point search or optimization: evidence, not proof), "self-test" (the checker
# is fed a statement known to be false and must reject it: evidence about the checker, not the paper).
Evidence = Literal["exact", "independent", "numerical", "self-test"]
EVIDENCE: tuple[Evidence, ...] = ("exact", "independent", "numerical", "self-test")
