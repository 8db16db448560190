"""``ncgeom metrics``: a diagnosis of saved embeddings (docs/theory.md, section 8; :mod:`ncgeom.metrics.diagnosis`).

The file is read by :func:`ncgeom.data.embeddings.load_embeddings` (formats .npz, .npy, .pt, .csv; nothing
is ever unpickled; arrays measured against the memory budget before they are loaded): ``--labels FILE``
gives the labels of a file that holds z alone.

By default the classes are the distinct labels (any integers). With ``--classes C`` the labels must be
exactly 0..C-1 and every class must have a sample; a missing class is an error naming it.

It prints the metrics, the verdict NC / DC / neither with the rule and thresholds of the claims
(:mod:`ncgeom.metrics.outcome`), warnings (unnormalized features, d < C - 1), and on request: ``--normalize`` the
features first; ``--ncc inner|euclidean`` the nearest-class-mean rule (inner by default: the authors' rule and the
one every run history records, so the numbers compare; euclidean is Papyan et al.'s); ``--train FILE`` scores the
embeddings with the class means of train embeddings; ``--classifier W.npy`` adds the field metrics with NC3/NC4
of a linear head; ``--setting`` (with ``--beta``, ``--tau``, ``--psi``, ``--num-negatives``) the batch and
population loss of the embeddings against their value at NC and the theorems' bound, saying when it is not a
bound.

``--json`` prints one object: the metric names as keys (``spectrum`` a list; an undefined metric, e.g. nc1 when
all class means coincide, is ``null``), plus the diagnosis (``verdict``, ``verdict_reason``, ``rule``,
``ncc_rule``, ``test_ncc_accuracy``, ``loss``, ``field``, ``warnings``, ...). Every bad input is one line naming
the file or option and what was expected, with exit code 2, before anything is printed.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import numpy as np

from ncgeom import budget
from ncgeom.atomic_io import dumps_json
from ncgeom.cli.main import UsageError
from ncgeom.data.embeddings import EXPECTED, FORMATS, load_embeddings, load_labels
from ncgeom.metrics import DC_SPECTRUM, NC_ETF, NC_WITHIN, field_metrics
from ncgeom.metrics.diagnosis import Diagnosis, LossSpec, diagnose
from ncgeom.metrics.ncc import NCC_RULES
from ncgeom.ranges import require_beta, require_tau
from ncgeom.validate import require_choice, require_int
from ncgeom.vocabulary import NORMALIZATIONS, PSI_NAMES, SETTINGS, is_hard

__all__ = ["register", "run"]

_NCC_HELP = ("nearest-class-mean rule: inner (argmax <z, mu_c>: the authors' rule and the one every run history "
             "records, so the numbers compare) or euclidean (argmin ||z - mu_c||, Papyan et al.'s; the two differ "
             "on unnormalized features) [inner]")


def register(subparsers) -> None:
    """Add the ``metrics`` subcommand to ``subparsers``."""
    p = subparsers.add_parser(
        "metrics",
        help="NC / DC diagnosis of saved embeddings (.npz, .npy, .pt, .csv; docs/theory.md, section 8)",
        description="Neural-collapse and dimensional-collapse metrics of embeddings z [N, d] with labels [N], the "
        "verdict NC / DC / neither and, with --setting, their loss against NC. "
        + " ".join(f"{ext}: {text}." for ext, text in EXPECTED.items()),
    )
    p.add_argument("file", metavar="FILE", help="embeddings: " + ", ".join(FORMATS))
    p.add_argument("--labels", metavar="LABELS", default=None,
                   help="labels [N] (.npy, .pt or one-column .csv) for a file holding z only (.npy, .pt tensor, .csv)")
    p.add_argument(
        "--classes", type=int, default=None, metavar="C",
        help="require labels 0..C-1 with every class present (default: the distinct labels)",
    )
    p.add_argument("--normalize", default="none", metavar="MODE",
                   help=f"normalize the features first: {', '.join(NORMALIZATIONS)} (the theorems hold on the ball or "
                        "sphere, docs/theory.md section 1) [none: as given]")
    p.add_argument("--ncc", default="inner", metavar="RULE", help=_NCC_HELP)
    p.add_argument("--train", metavar="FILE", default=None,
                   help="train embeddings (same formats): test_ncc_accuracy scores FILE with their class means")
    p.add_argument("--train-labels", metavar="LABELS", default=None, help="labels of --train when it holds z only")
    p.add_argument("--classifier", metavar="W.npy", default=None,
                   help="weights [C, d] of a linear head (.npy, row c for the c-th sorted label): adds the field "
                        "metrics, NC3 self_duality and NC4 classifier_agreement (docs/theory.md, section 8)")
    loss = p.add_argument_group("loss against NC (docs/theory.md, sections 4, 5, 7)")
    loss.add_argument("--setting", default=None, metavar="NAME",
                      help=f"compare the loss of the embeddings with NC: {', '.join(SETTINGS)}")
    loss.add_argument("--beta", type=float, default=None, metavar="B",
                      help="hardness beta in [0, 1e4] of hscl/hucl (required with them) [ignored by scl/ucl]")
    loss.add_argument("--tau", type=float, default=1.0, metavar="T", help="temperature tau >= 1e-3 [1]")
    loss.add_argument("--psi", default="infonce", metavar="NAME",
                      help=f"{', '.join(PSI_NAMES)}; infonce uses the weighted batch estimator, the others the "
                           "sampled one [infonce]")
    loss.add_argument("--num-negatives", type=int, default=1, metavar="K", help="negatives k >= 1 [1]")
    loss.add_argument("--seed", type=int, default=0, metavar="S",
                      help="seed of the sampled estimator's draws and of a Monte Carlo population loss [0]")
    p.add_argument("--json", action="store_true", help="print one JSON object (the metric names and the diagnosis)")
    p.set_defaults(func=run)


def _loss_spec(args: argparse.Namespace) -> LossSpec | None:
    """--setting and its options as a LossSpec (ValueError naming the option), or None without --setting."""
    given = [name for name in ("beta",) if getattr(args, name) is not None]
    if args.setting is None:
        extras = given + [f for f, default in (("tau", 1.0), ("psi", "infonce"), ("num_negatives", 1))
                          if getattr(args, f) != default]
        if extras:
            raise UsageError(f"--{extras[0].replace('_', '-')} describes the loss of --setting; give --setting too")
        return None
    setting = require_choice("--setting", args.setting, SETTINGS)
    if is_hard(setting) and args.beta is None:
        raise UsageError(f"--beta B is required with --setting {setting} (its hardness; beta = 0 would be "
                         f"{setting[1:]})")
    beta = 0.0 if args.beta is None else require_beta(args.beta, name="--beta")
    return LossSpec(setting, beta, require_tau(args.tau, name="--tau"), require_choice("--psi", args.psi, PSI_NAMES),
                    require_int("--num-negatives", args.num_negatives, min_value=1))


def _load(path: str, labels: str | None, classes: int | None, option: str = "") -> tuple[np.ndarray, np.ndarray]:
    where = f"{option} " if option else ""
    try:
        z, y = load_embeddings(path, labels)
    except ValueError as exc:
        raise UsageError(f"{where}{exc}".replace("--labels", "--train-labels") if option else str(exc)) from None
    if classes is not None and classes > y.size:  # every class needs a sample: C <= N (and no C-sized array)
        raise UsageError(f"--classes {classes}: every class needs a sample, but {path} has {y.size}")
    if z.ndim == 2 and y.ndim == 1 and y.size == z.shape[0]:  # nc_metrics explains other shapes
        found = np.unique(y).size
        budget.require_file_within_budget(
            path, budget.metrics_bytes(z.shape[0], z.shape[1], found),
            what=f"the metrics of N = {z.shape[0]} samples, d = {z.shape[1]}, C = {found} classes")
    return z, y


def run(args: argparse.Namespace) -> int:
    """Handler: load, diagnose (:func:`ncgeom.metrics.diagnosis.diagnose`), print; returns the exit code 0."""
    classes = None if args.classes is None else require_int("--classes", args.classes, min_value=2)
    normalize = require_choice("--normalize", args.normalize, NORMALIZATIONS)
    ncc = require_choice("--ncc", args.ncc, NCC_RULES)
    seed = require_int("--seed", args.seed, min_value=0)
    spec = _loss_spec(args)
    if args.train_labels is not None and args.train is None:
        raise UsageError("--train-labels gives the labels of --train FILE; give --train too")
    if args.classifier is not None and Path(args.classifier).suffix.lower() != ".npy":
        raise UsageError(f"--classifier {args.classifier}: expected a .npy file of weights [C, d] "
                         "(np.save(path, head.weight.detach().numpy()))")
    z, labels = _load(args.file, args.labels, classes)
    train = None if args.train is None else _load(args.train, args.train_labels, None, "--train")
    weights = None if args.classifier is None else load_labels(args.classifier)
    try:
        result = diagnose(z, labels, normalize=normalize, ncc=ncc, train=train, loss=spec, seed=seed,
                          num_classes=classes)
    except ValueError as exc:
        where = f"{args.file}" + ("" if args.train is None else f" with --train {args.train}")
        raise UsageError(f"{where}: {exc}") from None
    field = None
    if weights is not None:
        if weights.ndim != 2 or weights.shape != (result.num_classes, result.dim):
            raise UsageError(f"--classifier {args.classifier}: expected weights [C, d] = [{result.num_classes}, "
                             f"{result.dim}] ({result.num_classes} classes in the labels, d = {result.dim}), got "
                             f"shape {tuple(weights.shape)}")
        try:
            from ncgeom.geometry import normalize as normalize_rows

            field = field_metrics(normalize_rows(np.asarray(z, dtype=np.float64), normalize), labels,
                                  classifier=weights, num_classes=classes).to_dict()
        except ValueError as exc:
            raise UsageError(f"--classifier {args.classifier}: {exc}") from None
    if args.json:
        out = result.to_dict()
        out["field"] = field
        print(dumps_json(out))
        return 0
    print(_report(args, result, field))
    return 0


def _fmt(v: float | None) -> str:
    return "n/a" if v is None else ("nan (undefined)" if math.isnan(v) else f"{v:.6g}")


def _spectrum_lines(spec: tuple[float, ...]) -> list[str]:
    s = np.asarray(spec)
    if s.size == 0 or np.isnan(s).any():
        return ["nan (undefined: all class means coincide)"]

    def join(values) -> str:
        return " ".join(f"{x:.3g}" for x in values)

    text = join(s) if s.size <= 8 else f"{join(s[:5])} ... {join(s[-2:])}"
    low = int(np.sum(s < DC_SPECTRUM))
    tail = (f"min {s.min():.3g} (log10 {np.log10(max(s.min(), 1e-300)):.2f}); {low} below {DC_SPECTRUM:g}, the DC "
            f"threshold of the verdict (DC_SPECTRUM)")
    return [f"{s.size} values (descending, / largest): {tail}", text]


def _report(args: argparse.Namespace, r: Diagnosis, field: dict | None) -> str:
    v = r.metrics.to_dict()
    c, n, d = r.num_classes, r.num_samples, r.dim
    unreachable = "unreachable (d < C - 1)"
    rows = [
        ("unit_norm", _fmt(v["unit_norm"]), "0"),
        ("zero_sum", _fmt(v["zero_sum"]), "0"),
        ("equal_inner_product", _fmt(v["equal_inner_product"]), "0" if r.etf_reachable else unreachable),
        ("within_class", _fmt(v["within_class"]), f"0 (NC: < {NC_WITHIN:g})"),
        ("nc1", _fmt(v["nc1"]), "0"),
        ("etf_distance", _fmt(v["etf_distance"]), f"0 (NC: < {NC_ETF:g})" if r.etf_reachable else unreachable),
        ("rankme", _fmt(v["rankme"]), f"C-1 = {c - 1} (balanced, d >= C-1); at most min(N, d) = {min(n, d)}"),
        (f"ncc_accuracy ({r.ncc_rule})", _fmt(v["ncc_accuracy"]), "1"),
    ]
    if r.test_ncc_accuracy is not None:
        rows.append((f"test_ncc_accuracy ({r.ncc_rule})", _fmt(r.test_ncc_accuracy), f"1 (class means of {args.train})"))
    if field is not None:
        rows += [(name, _fmt(field[name]), ideal) for name, ideal in (
            ("cdnv", "0"), ("self_duality", "0 (NC3)"), ("classifier_agreement", "1 (NC4)"),
            ("hyperspherical_uniformity", "0"), ("alignment", "0"), ("uniformity", "-"))]
    width = max(len(row[0]) for row in rows)
    how = "as given" if r.normalize == "none" else f"normalized ({r.normalize})"
    lines = [f"{args.file}: N = {n} samples, d = {d}, C = {c} classes; features {how}, norms {r.norm_range[0]:.4g} to "
             f"{r.norm_range[1]:.4g} ({r.detected})",
             f"{'metric':<{width}}  {'value':<16} at NC"]
    lines += [f"{name:<{width}}  {val:<16} {ideal}" for name, val, ideal in rows]
    spec = _spectrum_lines(r.metrics.spectrum)
    lines.append(f"{'spectrum':<{width}}  {spec[0]}")
    lines += [f"{'':<{width}}  {line}" for line in spec[1:]]
    lines.append(f"verdict: {r.verdict}: {r.verdict_reason()} (the rule of the claims: docs/theory.md, sections 8-9)")
    if r.loss is not None:
        lines += _loss_lines(r)
    lines += [f"warning: {w}" for w in r.warnings]
    return "\n".join(lines)


def _loss_lines(r: Diagnosis) -> list[str]:
    report = r.loss
    assert report is not None
    s = report.spec
    beta = f", beta {s.beta:g}" if is_hard(s.setting) else ""
    lines = [f"loss: {s.setting}{beta}, tau {s.tau:g}, psi {s.psi}, k = {s.num_negatives} ({report.estimator} estimator)",
             f"  batch       {report.batch_loss:.6g} | at NC {report.batch_nc_value:.6g} | gap {report.batch_gap:.3g} "
             f"[{report.batch_nc_source}]"]
    if report.population_loss is None:
        lines.append(f"  population  {report.population_note}")
    else:
        err = "" if report.population_method == "exact" else f" +- {report.population_stderr:.2g}"
        lines.append(f"  population  {report.population_loss:.6g}{err} ({report.population_method}) | NC value "
                     f"{report.nc_value:.6g} | gap {report.population_gap:.3g}")
    kind = "lower bound" if report.is_bound else "NOT a lower bound here"
    lines.append(f"  bound       {report.bound:.6g}, {kind}: {report.bound_reason}")
    return lines
