"""The configuration of one training run: a frozen dataclass, validated at construction.

Every field has a default and a ``help`` (what it is and why that default) in its metadata; the CLI
(``ncgeom train``) builds one option per field from them. Invalid values raise ValueError naming the
field before any data is drawn or any training starts.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any, Literal

from ncgeom.data import class_prior, digits_class_sizes, digits_train_size, split_counts
from ncgeom.validate import require_choice, require_int, require_real
from ncgeom.vocabulary import (
    BACKENDS,
    DATASETS,
    ESTIMATORS,
    MODEL_KINDS,
    NORMALIZATIONS,
    POSITIVES,
    PSI_NAMES,
    SETTINGS,
    Backend,
    Dataset,
    Estimator,
    ModelKind,
    Normalization,
    PositivesKind,
    PsiName,
    Setting,
)

__all__ = ["Config", "config_fields", "config_from_dict"]

INITS: tuple[str, ...] = ("random", "near_nc")
DTYPES: tuple[str, ...] = ("float32", "float64")


def _f(default, help: str, **meta):
    return field(default=default, metadata={"help": help, **meta})


@dataclass(frozen=True)
class Config:
    """One training run (docs/theory.md, sections 1, 3, 7). See each field's ``help`` metadata."""

    # --- loss (docs/theory.md, sections 2, 3, 7)
    setting: Setting = _f(
        "hscl", "negative law: scl, hscl, ucl or hucl (docs/theory.md, section 3); hscl is the hard supervised case whose optimum is NC (Theorem 2)", choices=SETTINGS)
    beta: float = _f(5.0, "hardness beta >= 0 of the exponential tilt exp(beta s); 5 is the paper's moderate hardness (claim 5); ignored by scl/ucl")
    tau: float = _f(1.0, "temperature tau > 0; 1 as in the authors' code [code]")
    num_negatives: int | Literal["batch"] = _f(1, "k in the estimator: an integer >= 1 or 'batch' (k = |N(i)|); 1 is the authors' mean form (docs/theory.md, section 7)")
    estimator: Estimator = _f(
        "weighted", "batch estimator: 'weighted' (exact tilted average over the batch) or 'sampled' (draw k negatives, any psi)", choices=ESTIMATORS)
    psi: PsiName = _f("infonce", "psi for the sampled estimator: infonce, infonce-mean or triplet (the weighted estimator is InfoNCE)", choices=PSI_NAMES)
    margin: float = _f(1.0, "triplet margin (psi='triplet' only)")
    detach_weights: bool = _f(True, "no gradient through the tilt weights, as in the authors' code [code]")
    # --- representation
    norm: Normalization = _f(
        "sphere", "feature normalization: none, ball (clip to the unit ball) or sphere; the theorems need ball or sphere", choices=NORMALIZATIONS)
    dim: int | None = _f(None, "embedding dimension d >= 1; default C - 1, the smallest d with a simplex ETF (the DC-prone setup)")
    model: ModelKind = _f(
        "unconstrained", "encoder: unconstrained (one free vector per sample, the NC-literature model), linear or mlp", choices=MODEL_KINDS)
    hidden_dim: int = _f(128, "MLP hidden width (model='mlp')")
    depth: int = _f(2, "MLP number of linear layers >= 1 (model='mlp')")
    init: Literal["random", "near_nc"] = _f(
        "random", "initialization: random, or near_nc (a random-orientation ETF plus noise; unconstrained only, claim 7)", choices=INITS)
    init_scale: float = _f(1.0, "typical norm of a random unconstrained feature (random init)")
    init_noise: float = _f(0.1, "norm of the noise added to the ETF (init='near_nc')")
    # --- data (docs/theory.md, section 1)
    dataset: Dataset = _f(
        "gaussian", "gaussian (latent-class Gaussian mixture) or digits (scikit-learn's bundled 8x8 digits, offline)", choices=DATASETS)
    classes: int = _f(10, "number of latent classes C >= 2 (digits: <= 10)")
    samples_per_class: int = _f(50, "training samples per class on average (gaussian); 50 as in the speed target")
    test_per_class: int = _f(50, "test samples per class (gaussian); used for test NCC accuracy")
    input_dim: int = _f(32, "input dimension D of the Gaussian mixture (linear/mlp models)")
    separation: float = _f(3.0, "distance between Gaussian class means; with spread it sets the class overlap")
    spread: float = _f(1.0, "within-class standard deviation of the Gaussian inputs")
    imbalance: float = _f(1.0, "lambda_max / lambda_min of a geometric class prior; 1 = balanced (the theorems' assumption)")
    test_fraction: float = _f(0.3, "held-out fraction per class (digits)")
    positives: PositivesKind = _f(
        "label", "positives: label (same-class samples, conditionally independent) or noise (x + noise_scale * eps, instance ids)", choices=POSITIVES)
    noise_scale: float = _f(0.1, "sigma_p of the additive Gaussian noise positives (positives='noise')")
    # --- optimization
    epochs: int = _f(100, "number of epochs (an epoch is ceil(N / batch_size) class-balanced batches); 100 reach NC at the defaults")
    batch_size: int = _f(128, "batch size B (2 <= B <= number of training samples)")
    lr: float = _f(0.05, "Adam learning rate > 0; 0.05 reaches NC in 100 epochs on unconstrained features (use ~0.01 for mlp)")
    weight_decay: float = _f(0.0, "Adam weight decay >= 0 (0: no implicit norm penalty)")
    dtype: Literal["float32", "float64"] = _f("float32", "training dtype; metrics are always computed in float64", choices=DTYPES)
    backend: Backend = _f("auto", "batch_loss backend: auto picks the fastest for the device (see ncgeom.losses.batch_loss)", choices=BACKENDS)
    metrics_every: int = _f(1, "compute the metrics every this many epochs (and at the last epoch)")
    seed: int = _f(0, "seed of every random draw (data, initialization, batches, sampled negatives)")

    def __post_init__(self):
        _validate(self)

    @property
    def embedding_dim(self) -> int:
        """d: ``dim`` or C - 1."""
        return self.dim if self.dim is not None else self.classes - 1

    @property
    def num_train(self) -> int:
        """Number of training samples the data will have."""
        if self.dataset == "digits":
            return digits_train_size(num_classes=self.classes, test_fraction=self.test_fraction)
        return self.classes * self.samples_per_class

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    def replace(self, **changes) -> Config:
        return dataclasses.replace(self, **changes)


def config_fields() -> tuple[dataclasses.Field, ...]:
    """The fields of :class:`Config` (name, default, metadata['help'], metadata.get('choices'))."""
    return dataclasses.fields(Config)


def config_from_dict(values: dict[str, Any]) -> Config:
    """A Config from a dict; unknown keys raise ValueError naming them."""
    names = {f.name for f in config_fields()}
    unknown = sorted(set(values) - names)
    if unknown:
        raise ValueError(f"unknown config field(s): {', '.join(unknown)}; accepted: {', '.join(sorted(names))}")
    return Config(**values)


def _validate(c: Config) -> None:
    for f in config_fields():
        if "choices" in f.metadata:
            require_choice(f.name, getattr(c, f.name), f.metadata["choices"])
    require_real("beta", c.beta, min_value=0.0)
    require_real("tau", c.tau, min_value=0.0, min_inclusive=False)
    if c.num_negatives != "batch":
        require_int("num_negatives", c.num_negatives, min_value=1)
    require_real("margin", c.margin)
    if not isinstance(c.detach_weights, bool):
        raise ValueError(f"detach_weights must be true or false, got {c.detach_weights!r}")
    if c.estimator == "weighted" and c.psi != "infonce":
        raise ValueError(f"psi must be 'infonce' with estimator='weighted' (the weighted estimator is InfoNCE), got {c.psi!r}")
    if c.estimator == "sampled" and c.num_negatives == "batch":
        raise ValueError("num_negatives must be an integer with estimator='sampled', got 'batch'")
    classes = require_int("classes", c.classes, min_value=2, max_value=10 if c.dataset == "digits" else None)
    if c.dim is not None:
        require_int("dim", c.dim, min_value=1)
    require_int("hidden_dim", c.hidden_dim, min_value=1)
    require_int("depth", c.depth, min_value=1)
    require_real("init_scale", c.init_scale, min_value=0.0, min_inclusive=False)
    require_real("init_noise", c.init_noise, min_value=0.0)
    if c.init == "near_nc":
        if c.model != "unconstrained":
            raise ValueError(f"init='near_nc' needs model='unconstrained', got model={c.model!r}")
        if c.embedding_dim < classes - 1:
            raise ValueError(f"dim must be >= classes - 1 = {classes - 1} for init='near_nc' (an ETF), got {c.embedding_dim}")
    require_int("samples_per_class", c.samples_per_class, min_value=2)
    require_int("test_per_class", c.test_per_class, min_value=0)
    require_int("input_dim", c.input_dim, min_value=1)
    require_real("separation", c.separation, min_value=0.0)
    require_real("spread", c.spread, min_value=0.0, min_inclusive=False)
    require_real("imbalance", c.imbalance, min_value=1.0)
    require_real("test_fraction", c.test_fraction, min_value=0.0, max_value=1.0, min_inclusive=False, max_inclusive=False)
    require_real("noise_scale", c.noise_scale, min_value=0.0)
    if c.positives == "noise" and c.model == "unconstrained":
        raise ValueError("positives='noise' needs an input-based model (model='linear' or 'mlp'): unconstrained features have no input to perturb")
    require_int("epochs", c.epochs, min_value=1)
    require_real("lr", c.lr, min_value=0.0, min_inclusive=False)
    require_real("weight_decay", c.weight_decay, min_value=0.0)
    require_int("metrics_every", c.metrics_every, min_value=1)
    require_int("seed", c.seed, min_value=0)
    n = c.num_train
    require_int("batch_size", c.batch_size, min_value=2, max_value=n)
    per_class = max(c.batch_size // min(classes, c.batch_size // 2) + (c.batch_size % min(classes, c.batch_size // 2) > 0), 2)
    smallest = _smallest_class(c)
    if per_class > smallest:
        raise ValueError(
            f"batch_size {c.batch_size} needs {per_class} samples of a class per class-balanced batch, "
            f"but the smallest class has {smallest} training samples"
        )


def _smallest_class(c: Config) -> int:
    if c.dataset == "digits":
        return int(min(digits_class_sizes(num_classes=c.classes, test_fraction=c.test_fraction)))
    return int(split_counts(c.classes * c.samples_per_class, class_prior(c.classes, imbalance=c.imbalance), min_count=2).min())
