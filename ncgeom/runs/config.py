"""The configuration of one training run: a frozen dataclass, validated at construction.

Every field has a default and a ``help`` (what it is and why that default) in its metadata; the CLI
(``ncgeom train``) builds one option per field from them. Invalid values raise ValueError naming the
field before any data is drawn or any training starts: first its type (:func:`field_type_error`: a
string for an integer, a list for a number, a bool for an integer), then its range, then the
combinations. Validation itself never allocates anything large: the structural limits
MAX_CLASSES and MAX_TRAIN_SAMPLES bound C and N whatever the machine. The memory a run would need is
checked against the budget in force ($NCGEOM_MAX_MEMORY or ``--max-memory``) where a run is about to
start (:func:`ncgeom.runs.run`, :func:`ncgeom.campaigns.sweep.run_sweep`: every config of
a sweep before its first run), not here: a saved config made under a larger budget must still load.
A field's own checks are cached by (name, type, value), so a sweep of 10^5 configs validates each
distinct value once.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from ncgeom.data import class_prior, digits_class_sizes, digits_train_size, split_counts
from ncgeom.ranges import require_beta, require_margin, require_tau
from ncgeom.validate import require_choice, require_int, require_real
from ncgeom.vocabulary import (
    BACKENDS,
    BATCHINGS,
    CONVENTIONS,
    DATASETS,
    DTYPES,
    ESTIMATORS,
    IMAGE_DATASETS,
    INITS,
    LAYERED_MODELS,
    MODEL_KINDS,
    NORMALIZATIONS,
    POSITIVES_KINDS,
    PRECISIONS,
    PSI_NAMES,
    RESNET_KINDS,
    SETTINGS,
    STOP_RULES,
    Backend,
    Batching,
    Convention,
    Dataset,
    DType,
    Estimator,
    ImageDataset,
    Init,
    ModelKind,
    Normalization,
    PositivesKind,
    Precision,
    PsiName,
    ResNetKind,
    Setting,
    StopRule,
    device_type,
    is_hard,
)

__all__ = ["Config", "config_fields", "config_from_dict", "field_type_error", "field_kind", "expected_type",
           "COUPLED_FIELDS", "LATE_FIELDS", "IMAGE_FIELDS", "IMAGE_CLASS_COUNTS", "MAX_CLASSES", "MAX_TRAIN_SAMPLES",
           "MAX_EPOCHS", "DATASET_FIELDS"]

#: Structural limits, the same on every machine (the memory budget is checked when a run starts): a
#: simplex ETF of C classes needs d >= C - 1, and C = 10^6 classes is far beyond any experiment of the
#: paper (C <= 200); 10^8 training samples bound the O(N) arrays that validation itself may build.
MAX_CLASSES = 1_000_000
MAX_TRAIN_SAMPLES = 100_000_000
#: The paper trains for hundreds of epochs; 10^6 bounds the history a run keeps in memory and on disk.
MAX_EPOCHS = 1_000_000

#: Fields added after runs had been saved: written by Config.to_dict only when they differ from their default.
LATE_FIELDS: frozenset[str] = frozenset({"convention", "device", "data_dir", "workers", "precision",
                                         "checkpoint_every", "eval_batch_size", "batches", "stop"})
#: The fields that only image runs read (docs/experiments.md, "Image data sets"): refused away from their
#: defaults for the synthetic data sets.
IMAGE_FIELDS: tuple[str, ...] = ("data_dir", "workers", "precision", "checkpoint_every", "eval_batch_size")
#: The class count of each image data set whose count is fixed (ImageFolder: the sub-folders of train/).
IMAGE_CLASS_COUNTS: dict[str, int] = {"cifar10": 10, "cifar100": 100, "stl10": 10}


def _f(default, help: str, **meta):
    return field(default=default, metadata={"help": help, **meta})


@dataclass(frozen=True)
class Config:
    """One training run (docs/theory.md, sections 1, 3, 7). See each field's ``help`` metadata."""

    # --- loss (docs/theory.md, sections 2, 3, 7)
    setting: Setting = _f(
        "hscl", "negative law: scl, hscl, ucl or hucl (docs/theory.md, section 3); hscl is the hard supervised case whose optimum is NC (Theorem 2)", choices=SETTINGS)
    beta: float = _f(5.0, "hardness beta in [0, 1e4] of the exponential tilt exp(beta s); 5 is the paper's moderate hardness (claim 5); ignored by scl/ucl")
    tau: float = _f(1.0, "temperature tau >= 1e-3; 1 as in the authors' code [code]")
    num_negatives: int | Literal["batch"] = _f(1, "k in the estimator: an integer >= 1 or 'batch' (k = |N(i)|); 1 is the authors' mean form (docs/theory.md, section 7)", kind="int_or_batch")
    estimator: Estimator = _f(
        "weighted", "batch estimator: 'weighted' (exact tilted average over the batch) or 'sampled' (draw k negatives, any psi)", choices=ESTIMATORS)
    psi: PsiName = _f("infonce", "psi for the sampled estimator: infonce, infonce-mean or triplet (the weighted estimator is InfoNCE)", choices=PSI_NAMES)
    margin: float = _f(1.0, "triplet margin in [-1e4, 1e4] (psi='triplet' only)")
    detach_weights: bool = _f(True, "no gradient through the tilt weights, as in the authors' code [code]")
    convention: Convention = _f(
        "theory", "which pairs the batch loss counts: theory (docs/theory.md, section 7) or authors (the paper's code: the anchor is its own positive, UCL/HUCL negatives include the anchor; docs/conventions.md, section 2.4)", choices=CONVENTIONS)
    # --- representation
    norm: Normalization = _f(
        "sphere", "feature normalization: none, ball (clip to the unit ball) or sphere; the theorems need ball or sphere", choices=NORMALIZATIONS)
    dim: int | None = _f(None, "embedding dimension d >= 1; default C - 1, the smallest d with a simplex ETF (the DC-prone setup)", kind="int_or_none")
    model: ModelKind | ResNetKind = _f(
        "unconstrained", "encoder: unconstrained (one free vector per sample, the NC-literature model), linear, mlp, or deep_linear (depth linear layers without activations); for image data sets resnet18, resnet34 or resnet50 (CIFAR stem, docs/images.md)", choices=MODEL_KINDS + RESNET_KINDS)
    hidden_dim: int = _f(128, "hidden width (model='mlp' or 'deep_linear')")
    depth: int = _f(2, "number of linear layers >= 1 (model='mlp' or 'deep_linear')")
    init: Init = _f(
        "random", "initialization: random, or near_nc (a random-orientation ETF plus noise; unconstrained only, claim 7)", choices=INITS)
    init_scale: float = _f(1.0, "typical norm of a random unconstrained feature (random init)")
    init_noise: float = _f(0.1, "norm of the noise added to the ETF (init='near_nc')")
    # --- data (docs/theory.md, section 1)
    dataset: Dataset | ImageDataset = _f(
        "gaussian", "gaussian (latent-class Gaussian mixture), digits (scikit-learn's bundled 8x8 digits, offline), or an image data set read from data_dir: cifar10, cifar100, stl10, imagefolder (docs/images.md)", choices=DATASETS + IMAGE_DATASETS)
    classes: int = _f(10, "number of latent classes C >= 2 (digits: <= 10; cifar10, stl10: 10; cifar100: 100; imagefolder: the class folders, which ncgeom train reads when --classes is not given)")
    samples_per_class: int = _f(50, "training samples per class on average (gaussian); 50 as in the speed target")
    test_per_class: int = _f(50, "test samples per class (gaussian); used for test NCC accuracy")
    input_dim: int = _f(32, "input dimension D of the Gaussian mixture (linear/mlp models)")
    separation: float = _f(3.0, "distance between Gaussian class means; with spread it sets the class overlap")
    spread: float = _f(1.0, "within-class standard deviation of the Gaussian inputs")
    imbalance: float = _f(1.0, "lambda_max / lambda_min of a geometric class prior; 1 = balanced (the theorems' assumption)")
    test_fraction: float = _f(0.3, "held-out fraction per class (digits; imagefolder when data_dir is a single ImageFolder, without test/)")
    positives: PositivesKind = _f(
        "label", "positives: label (same-class samples, conditionally independent), noise (x + noise_scale * eps, instance ids; synthetic inputs) or augment (two SimCLR views of each image, instance ids; image data sets)", choices=POSITIVES_KINDS)
    noise_scale: float = _f(0.1, "sigma_p of the additive Gaussian noise positives (positives='noise')")
    # --- optimization
    epochs: int = _f(100, "number of epochs (an epoch is ceil(N / batch_size) class-balanced batches, floor(N / batch_size) shuffled ones); 100 reach NC at the defaults")
    batch_size: int = _f(128, "batch size B (2 <= B <= number of training samples)")
    batches: Batching = _f(
        "balanced", "batch sampler (ncgeom.data.batches): balanced (class-balanced batches, every class present with >= 2 members when B >= 2C) or shuffle (a permutation per epoch cut into floor(N / B) batches, a DataLoader's shuffle=True, drop_last=True: batch class counts follow the data's class sizes, as in the authors' code)", choices=BATCHINGS)
    lr: float = _f(0.05, "Adam learning rate > 0; 0.05 reaches NC in 100 epochs on unconstrained features (use ~0.01 for mlp); ncgeom train defaults a ResNet to the authors' 1e-3 (ncgeom.runs.defaults)")
    weight_decay: float = _f(0.0, "Adam weight decay >= 0 (0: no implicit norm penalty)")
    dtype: DType = _f("float32", "training dtype; metrics are always computed in float64", choices=DTYPES)
    backend: Backend = _f("auto", "batch_loss backend: auto picks the fastest for the device (see ncgeom.losses.batch_loss)", choices=BACKENDS)
    device: str = _f(
        "cpu", "torch device of the training: cpu, cuda or cuda:N (docs/experiments.md, 'Devices'); metrics are computed on the CPU", kind="device")
    metrics_every: int = _f(1, "compute the metrics every this many epochs (and at the last epoch)")
    stop: StopRule = _f(
        "budget", "when to stop: budget (train all epochs) or converged (stop at the first metric epoch where the run has converged by the rule of docs/theory.md, section 9, 'Convergence'; epochs is then the budget)", choices=STOP_RULES)
    seed: int = _f(0, "seed of every random draw (data, initialization, batches, sampled negatives)")
    # --- image data sets (docs/images.md; docs/experiments.md, "Image data sets"); refused for gaussian/digits
    data_dir: str | None = _f(
        None, "folder holding the image data set (the layouts of docs/images.md); required for cifar10, cifar100, stl10 and imagefolder", kind="path_or_none")
    workers: int = _f(0, "image runs: processes decoding an ImageFolder too large to hold in memory (read lazily); 0 decodes in the training process")
    precision: Precision = _f(
        "float32", "image runs: float32, or bf16 (autocast of the ResNet's forward to bfloat16; CUDA only, the loss and the metrics stay in float32/float64)", choices=PRECISIONS)
    checkpoint_every: int = _f(0, "image runs: write checkpoint.pt every this many epochs and at the end, each replacing the last (0: none); --resume continues from it")
    eval_batch_size: int = _f(512, "image runs: images per forward pass of an evaluation (bounds its memory; the metrics do not depend on it beyond rounding)")

    def __post_init__(self):
        _validate(self)

    @property
    def embedding_dim(self) -> int:
        """d: ``dim`` or C - 1."""
        return self.dim if self.dim is not None else self.classes - 1

    @property
    def is_image(self) -> bool:
        """True for an image data set (``IMAGE_DATASETS``: files in ``data_dir``, a ResNet encoder)."""
        return self.dataset in IMAGE_DATASETS

    @property
    def num_train(self) -> int:
        """Number of training samples the data will have (ValueError for an image data set: known once read)."""
        if self.is_image:
            raise ValueError(f"dataset {self.dataset!r}: the number of training images is known once {self.data_dir} is read")
        if self.dataset == "digits":
            return digits_train_size(num_classes=self.classes, test_fraction=self.test_fraction)
        return self.classes * self.samples_per_class

    def to_dict(self) -> dict[str, Any]:
        """The fields as a dict; a field of :data:`LATE_FIELDS` only when it differs from its default.

        Leaving a late field out at its default keeps the files and the run names (a hash of
        :meth:`to_json`, ncgeom.campaigns.spec.run_name) of the runs made before it existed unchanged, so a
        sweep resumes them; :func:`config_from_dict` gives a missing field its default.
        """
        # every field is a scalar: no deep copy needed (dataclasses.asdict was 40% of a sweep's validation)
        return {f.name: value for f in _FIELDS
                if (value := getattr(self, f.name)) != f.default or f.name not in LATE_FIELDS}

    def applicable_dict(self) -> dict[str, Any]:
        """:meth:`to_dict` without the fields the run's data set does not read (:data:`DATASET_FIELDS`): what
        summary.json records (config.json and the run names keep :meth:`to_dict`, every field).

        An image run drops the Gaussian mixture's fields and those of the vector models (MLP widths, the
        unconstrained initialization, noise positives); a Gaussian run drops ``test_fraction``; digits drops the
        mixture's. Reading it back (:func:`config_from_dict`) gives a dropped field its default.
        """
        reads = DATASET_FIELDS[self.dataset]
        return {k: v for k, v in self.to_dict().items() if k not in _DATASET_ONLY or k in reads}

    def applies(self, name: str) -> bool:
        """Whether the run reads field ``name``: what a label of the run shows (``ncgeom compare``, ``ncgeom
        summarize``, summary.csv). Not read: a field of another data set (:data:`DATASET_FIELDS`); beta in scl/ucl
        (:func:`ncgeom.vocabulary.effective_beta`); psi and margin with the weighted estimator, margin unless psi is
        triplet; noise_scale without noise positives; hidden_dim and depth without an MLP or a deep linear network
        (:data:`~ncgeom.vocabulary.LAYERED_MODELS`); init_noise without a
        near-NC start; init_scale without a random unconstrained start; the input fields of the Gaussian mixture
        (input_dim, separation, spread, test_per_class) for unconstrained features, which have no inputs.
        """
        if name not in _BY_NAME:
            raise ValueError(f"name must be a Config field, got {name!r}")
        if name in _DATASET_ONLY and name not in DATASET_FIELDS[self.dataset]:
            return False
        return not {
            "beta": not is_hard(self.setting),
            "psi": self.estimator != "sampled",
            "margin": self.estimator != "sampled" or self.psi != "triplet",
            "noise_scale": self.positives != "noise",
            "hidden_dim": self.model not in LAYERED_MODELS,
            "depth": self.model not in LAYERED_MODELS,
            "init_noise": self.init != "near_nc",
            "init_scale": self.init != "random" or self.model != "unconstrained",
            **dict.fromkeys(("input_dim", "separation", "spread", "test_per_class"), self.model == "unconstrained"),
        }.get(name, False)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    def replace(self, **changes) -> Config:
        return dataclasses.replace(self, **changes)


#: The fields only some data sets read (the rest every run reads): for each data set, the ones it reads.
_MIXTURE_FIELDS = ("input_dim", "samples_per_class", "test_per_class", "separation", "spread", "imbalance")
_VECTOR_MODEL_FIELDS = ("hidden_dim", "depth", "init_scale", "init_noise", "noise_scale")
DATASET_FIELDS: dict[str, tuple[str, ...]] = {
    "gaussian": _MIXTURE_FIELDS + _VECTOR_MODEL_FIELDS,
    "digits": ("test_fraction",) + _VECTOR_MODEL_FIELDS,
    **{name: IMAGE_FIELDS for name in IMAGE_DATASETS},
    "imagefolder": IMAGE_FIELDS + ("test_fraction",),  # a single ImageFolder is split with it
}
_DATASET_ONLY = frozenset(name for fields in DATASET_FIELDS.values() for name in fields)


def config_fields() -> tuple[dataclasses.Field, ...]:
    """The fields of :class:`Config` (name, default, metadata['help'], metadata.get('choices'))."""
    return _FIELDS


def field_kind(f: dataclasses.Field) -> str:
    """The type of a field's values: "choice", "device", "bool", "int", "real", "int_or_none", "int_or_batch" or "path_or_none"."""
    if "kind" in f.metadata:
        return f.metadata["kind"]
    if "choices" in f.metadata:
        return "choice"
    return {bool: "bool", int: "int", float: "real"}[type(f.default)]


_KIND_TEXT = {"choice": ("a string", "strings"), "device": ("a string", "strings"),
              "bool": ("true or false", "true/false values"),
              "int": ("an integer", "integers"), "real": ("a number", "numbers"),
              "int_or_none": ("an integer", "integers"), "int_or_batch": ("an integer or 'batch'", "integers or 'batch'"),
              "path_or_none": ("a folder path (a string)", "folder paths (strings)")}


def expected_type(name: str, *, many: bool = False) -> str:
    """What a value of field ``name`` must be: "an integer", or with ``many`` "a list of integers"."""
    one, plural = _KIND_TEXT[field_kind(_BY_NAME[name])]
    return f"a list of {plural}" if many else one


def field_type_error(name: str, value: Any, *, many: bool = False) -> str | None:
    """``"expected <type>, got <value>"`` if ``value`` has the wrong type for the Config field ``name``, else None.

    With ``many`` the text is plural ("expected a list of numbers"), for a grid's list of values. Ranges
    and combinations are checked by :class:`Config` itself; unknown names by :func:`config_from_dict`.
    """
    kind = field_kind(_BY_NAME[name])
    integral = isinstance(value, int) and not isinstance(value, bool)
    ok = {
        "choice": isinstance(value, str),
        "device": isinstance(value, str),
        "bool": isinstance(value, bool),
        "int": integral,
        "real": integral or isinstance(value, float),
        "int_or_none": integral or value is None,
        "int_or_batch": integral or value == "batch",
        "path_or_none": isinstance(value, str) or value is None,
    }[kind]
    if ok:
        return None
    shown = repr(value) if len(repr(value)) <= 60 else repr(value)[:57] + "..."
    return f"expected {expected_type(name, many=many)}, got {shown} ({type(value).__name__})"


def config_from_dict(values: dict[str, Any], *, source: str | None = None) -> Config:
    """A Config from a dict; unknown keys and wrong types raise ValueError naming them (after ``source: ``)."""
    where = f"{source}: " if source else ""
    if not isinstance(values, dict):
        raise ValueError(f"{where}expected a table of config fields, got {type(values).__name__}")
    unknown = sorted(set(values) - _BY_NAME.keys())
    if unknown:
        raise ValueError(f"{where}unknown config field(s): {', '.join(map(str, unknown))}; "
                         f"accepted: {', '.join(sorted(_BY_NAME))}")
    for name, value in values.items():
        problem = field_type_error(name, value)
        if problem:
            raise ValueError(f"{where}{name}: {problem}")
    if not source:
        return Config(**values)
    try:
        return Config(**values)
    except ValueError as exc:
        raise ValueError(f"{where}{exc}") from None


#: Fields that _validate's cross-field rules or the memory estimate (ncgeom.runs.budget.run_memory_estimate) read:
#: any other field is valid or not on its own, so a sweep checks each of its values once
#: (ncgeom.campaigns.spec). Add a field here when a rule of _validate starts reading it.
COUPLED_FIELDS: frozenset[str] = frozenset({
    "estimator", "psi", "num_negatives", "dataset", "classes", "init", "model", "dim", "positives",
    "samples_per_class", "test_per_class", "input_dim", "batch_size", "imbalance", "test_fraction", "dtype",
    "hidden_dim", "depth", "epochs", "metrics_every", "convention", "backend", "batches",
    "device", "data_dir", "workers", "precision", "checkpoint_every", "eval_batch_size",
})


def _choice_check(name: str, choices) -> Callable[[Any], object]:
    return lambda v: require_choice(name, v, choices)


# One check per field that depends on that field alone (ranges); cross-field rules are in _validate.
_FIELD_CHECKS: dict[str, Callable[[Any], object]] = {
    "beta": require_beta,  # the ranges of ncgeom.ranges, the same for batch_loss, the CLI and both engines
    "tau": require_tau,
    "num_negatives": lambda v: v == "batch" or require_int("num_negatives", v, min_value=1),
    "margin": require_margin,
    "dim": lambda v: v is None or require_int("dim", v, min_value=1),
    "hidden_dim": lambda v: require_int("hidden_dim", v, min_value=1),
    "depth": lambda v: require_int("depth", v, min_value=1),
    "init_scale": lambda v: require_real("init_scale", v, min_value=0.0, min_inclusive=False),
    "init_noise": lambda v: require_real("init_noise", v, min_value=0.0),
    "classes": lambda v: require_int("classes", v, min_value=2),
    "samples_per_class": lambda v: require_int("samples_per_class", v, min_value=2),
    "test_per_class": lambda v: require_int("test_per_class", v, min_value=0),
    "input_dim": lambda v: require_int("input_dim", v, min_value=1),
    "separation": lambda v: require_real("separation", v, min_value=0.0),
    "spread": lambda v: require_real("spread", v, min_value=0.0, min_inclusive=False),
    "imbalance": lambda v: require_real("imbalance", v, min_value=1.0),
    "test_fraction": lambda v: require_real("test_fraction", v, min_value=0.0, max_value=1.0,
                                            min_inclusive=False, max_inclusive=False),
    "noise_scale": lambda v: require_real("noise_scale", v, min_value=0.0),
    "epochs": lambda v: require_int("epochs", v, min_value=1, max_value=MAX_EPOCHS),
    "batch_size": lambda v: require_int("batch_size", v, min_value=2),
    "lr": lambda v: require_real("lr", v, min_value=0.0, min_inclusive=False),
    "weight_decay": lambda v: require_real("weight_decay", v, min_value=0.0),
    "metrics_every": lambda v: require_int("metrics_every", v, min_value=1),
    "seed": lambda v: require_int("seed", v, min_value=0),
    "device": lambda v: device_type(v, name="device"),
    "data_dir": lambda v: v is None or _require_path("data_dir", v),
    "workers": lambda v: require_int("workers", v, min_value=0, max_value=1024),
    "checkpoint_every": lambda v: require_int("checkpoint_every", v, min_value=0, max_value=MAX_EPOCHS),
    "eval_batch_size": lambda v: require_int("eval_batch_size", v, min_value=1, max_value=2**20),
}


def _require_path(name: str, value: Any) -> str:
    if not isinstance(value, str) or not value or "\0" in value:
        raise ValueError(f"{name} must be a folder path (a non-empty string), got {value!r}")
    return value


_VALID: set[tuple[str, type, Any]] = set()  # (field, type, value) already checked; bounded below
_VALID_MAX = 100_000


def _check_field(name: str, value: Any) -> None:
    key = (name, type(value), value)
    try:
        if key in _VALID:
            return
    except TypeError:  # unhashable (a list): check it, never cache it
        _FIELD_CHECKS[name](value)
        return
    _FIELD_CHECKS[name](value)
    if len(_VALID) >= _VALID_MAX:
        _VALID.clear()
    _VALID.add(key)


def _validate(c: Config) -> None:
    valid = _VALID
    for name, value in vars(c).items():  # the fields, in order (the instance holds nothing else)
        try:
            if (name, type(value), value) in valid:
                continue
        except TypeError:  # unhashable: _check_field checks it without caching
            pass
        _check_field(name, value)
    if not isinstance(c.detach_weights, bool):
        raise ValueError(f"detach_weights must be true or false, got {c.detach_weights!r}")
    if c.estimator == "weighted" and c.psi != "infonce":
        raise ValueError(f"psi must be 'infonce' with estimator='weighted' (the weighted estimator is InfoNCE), got {c.psi!r}")
    if c.convention != "theory" and c.backend == "triton":
        raise ValueError(f"convention={c.convention!r} needs backend 'auto', 'dense' or 'blocked': the triton kernel "
                         "implements convention='theory' only")
    if c.estimator == "sampled" and c.num_negatives == "batch":
        raise ValueError("num_negatives must be an integer with estimator='sampled', got 'batch'")
    if c.is_image:
        _validate_image(c)
        return
    _refuse_image_fields(c)
    classes = require_int("classes", c.classes, min_value=2, max_value=10 if c.dataset == "digits" else MAX_CLASSES)
    if c.init == "near_nc":
        if c.model != "unconstrained":
            raise ValueError(f"init='near_nc' needs model='unconstrained', got model={c.model!r}")
        if c.embedding_dim < classes - 1:
            raise ValueError(f"dim must be >= classes - 1 = {classes - 1} for init='near_nc' (an ETF), got {c.embedding_dim}")
    if c.positives == "noise" and c.model == "unconstrained":
        raise ValueError("positives='noise' needs an input-based model (model='linear' or 'mlp'): unconstrained features have no input to perturb")
    # sizes: before anything of size C or N is allocated (the class prior below is an array of C floats)
    n = c.num_train
    require_int("batch_size", c.batch_size, min_value=2, max_value=n)
    if n > MAX_TRAIN_SAMPLES:
        raise ValueError(f"classes x samples_per_class: at most {MAX_TRAIN_SAMPLES} training samples, got {n}")
    if c.batches == "shuffle":  # any B <= N: a class may miss a batch or have one member in it
        return
    per_class = max(c.batch_size // min(classes, c.batch_size // 2) + (c.batch_size % min(classes, c.batch_size // 2) > 0), 2)
    smallest = _smallest_class(c.dataset, classes, c.samples_per_class, c.imbalance, c.test_fraction)
    if per_class > smallest:
        raise ValueError(
            f"batch_size {c.batch_size} needs {per_class} samples of a class per class-balanced batch, "
            f"but the smallest class has {smallest} training samples"
        )


def _validate_image(c: Config) -> None:
    """The rules of an image run (docs/experiments.md, "Image data sets"); sizes are checked against the data
    when the run reads it (:mod:`ncgeom.runs.images`)."""
    if c.model not in RESNET_KINDS:
        raise ValueError(f"model must be one of {', '.join(RESNET_KINDS)} for the image data set {c.dataset!r}, "
                         f"got {c.model!r}")
    if c.data_dir is None:
        raise ValueError(f"data_dir is required for the image data set {c.dataset!r} (the folder of docs/images.md's "
                         "layouts; ncgeom train --download fetches cifar10, cifar100 and stl10 into it)")
    expected = IMAGE_CLASS_COUNTS.get(c.dataset)
    if expected is not None and c.classes != expected:
        raise ValueError(f"classes must be {expected} for dataset {c.dataset!r} (its class count), got {c.classes}")
    require_int("classes", c.classes, min_value=2, max_value=MAX_CLASSES)
    if c.init != "random":
        raise ValueError(f"init={c.init!r} needs model='unconstrained'; a ResNet starts from its random initialization")
    if c.workers and c.dataset != "imagefolder":
        raise ValueError(f"workers applies to dataset 'imagefolder' (decoding image files), got workers={c.workers} "
                         f"with dataset={c.dataset!r}, which is read into memory")
    if c.positives == "noise":
        raise ValueError("positives='noise' perturbs the vector inputs of gaussian/digits; image data sets take "
                         "positives 'label' or 'augment' (two SimCLR views)")
    if c.precision == "bf16":
        if device_type(c.device) != "cuda":
            raise ValueError(f"precision='bf16' needs a CUDA device (ncgeom autocasts to bfloat16 on CUDA only; a CPU "
                             f"run trains in dtype), got device={c.device!r}")
        if c.dtype != "float32":
            raise ValueError(f"precision='bf16' autocasts float32 weights; it needs dtype='float32', got {c.dtype!r}")


def _refuse_image_fields(c: Config) -> None:
    """The synthetic data sets: no ResNet, no augmentation, no image-only field away from its default."""
    if c.model in RESNET_KINDS:
        raise ValueError(f"model={c.model!r} encodes images: it needs an image data set "
                         f"({', '.join(IMAGE_DATASETS)}), got dataset={c.dataset!r}")
    if c.positives == "augment":
        raise ValueError(f"positives='augment' draws SimCLR views of images: it needs an image data set "
                         f"({', '.join(IMAGE_DATASETS)}), got dataset={c.dataset!r}")
    for name in IMAGE_FIELDS:
        value = getattr(c, name)
        if value != _BY_NAME[name].default:
            raise ValueError(f"{name} applies to image data sets ({', '.join(IMAGE_DATASETS)}) only, got "
                             f"{name}={value!r} with dataset={c.dataset!r}")


@functools.lru_cache(maxsize=1024)
def _smallest_class(dataset: str, classes: int, samples_per_class: int, imbalance: float, test_fraction: float) -> int:
    if dataset == "digits":
        return int(min(digits_class_sizes(num_classes=classes, test_fraction=test_fraction)))
    return int(split_counts(classes * samples_per_class, class_prior(classes, imbalance=imbalance), min_count=2).min())


_FIELDS: tuple[dataclasses.Field, ...] = dataclasses.fields(Config)
_BY_NAME: dict[str, dataclasses.Field] = {f.name: f for f in _FIELDS}
for _f_ in _FIELDS:
    if "choices" in _f_.metadata:
        _FIELD_CHECKS[_f_.name] = _choice_check(_f_.name, _f_.metadata["choices"])
    _FIELD_CHECKS.setdefault(_f_.name, lambda v: None)
del _f_
