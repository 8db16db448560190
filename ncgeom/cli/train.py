"""``ncgeom train``: one training run; one option per Config field (ncgeom.runs.config).

Writes DIR/config.json (config + provenance), DIR/history.jsonl (one line per epoch) and
DIR/summary.json (final metrics under "final", plus "nc_value") with ``--out DIR``. A tqdm bar is shown
on a terminal unless ``--quiet``. Exit codes: 0 completed, 1 diverged (a non-finite loss, embedding, gradient or
parameter: the summary says where), 2 bad input (refused before anything is written), 130 interrupted by SIGINT,
143 by SIGTERM (the write in progress is abandoned whole).

Image data sets (``--dataset cifar10|cifar100|stl10|imagefolder --data-dir DIR --model resnet18``,
docs/experiments.md "Image data sets"): ``--classes`` defaults to the data set's class count (an ImageFolder
tree's class folders); ``--lr`` to the model's default (1e-3, the authors' Adam rate, for a ResNet; a warning when a
larger free-feature rate is given; ncgeom.runs.defaults); ``--download`` first fetches the official archive of cifar10, cifar100 or stl10
into --data-dir (md5-checked; never without the flag); ``--resume`` continues from --out's checkpoint.pt.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tomllib
import warnings
from pathlib import Path
from typing import Any

from ncgeom.atomic_io import dumps_json
from ncgeom.files import read_bounded
from ncgeom.interrupts import Interrupted, raise_on_signals
from ncgeom.runs.config import config_fields, config_from_dict, field_type_error
from ncgeom.runs.defaults import LearningRateWarning, default_lr, lr_warning
from ncgeom.validate import require_int
from ncgeom.vocabulary import IMAGE_DATASETS

__all__ = ["register", "add_config_options", "config_values", "MAX_CONFIG_BYTES"]

#: Largest --config file read (bytes): a config is a few dozen short fields.
MAX_CONFIG_BYTES = 2**20

_SPECIAL_TYPES = {"num_negatives": "int_or_batch", "dim": int, "data_dir": str}


def _int_or_batch(text: str):
    if text == "batch":
        return "batch"
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer or 'batch', got {text!r}") from None


def add_config_options(parser: argparse.ArgumentParser) -> None:
    """Add ``--<field>`` for every Config field (default None: the Config default applies)."""
    group = parser.add_argument_group("run configuration (defaults in brackets)")
    for f in config_fields():
        flag = "--" + f.name.replace("_", "-")
        choices = f.metadata.get("choices")
        help_text = f.metadata["help"] + (f" {{{', '.join(choices)}}}" if choices else "") + f" [{f.default}]"
        help_text = help_text.replace("%", "%%")
        if isinstance(f.default, bool):
            group.add_argument(flag, dest=f.name, action=argparse.BooleanOptionalAction, default=None, help=help_text)
            continue
        kind: Any = _SPECIAL_TYPES.get(f.name, type(f.default))
        if kind == "int_or_batch":
            kind = _int_or_batch
        group.add_argument(flag, dest=f.name, type=kind, default=None, metavar=f.name.upper(), help=help_text)


def config_values(args: argparse.Namespace) -> dict:
    """The Config fields given on the command line (others keep their defaults)."""
    return {f.name: getattr(args, f.name) for f in config_fields() if getattr(args, f.name, None) is not None}


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "train", help="train one model and record the NC/DC geometry per epoch",
        description=__doc__.split("\n\n")[0] + " Example: ncgeom train --setting hscl --beta 5 --norm sphere --out runs/a",
    )
    parser.add_argument("--out", metavar="DIR", default=None, help="run directory (config.json, history.jsonl, summary.json)")
    parser.add_argument("--config", metavar="FILE", default=None, help="TOML or JSON file of config fields (flags override it)")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON on stdout")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.add_argument("--threads", type=int, default=1, metavar="N",
                        help="CPU threads for torch and BLAS, at most the CPU count [1]")
    parser.add_argument("--resume", action="store_true",
                        help="image data sets: continue the run in --out from its checkpoint.pt (same config; "
                             "--epochs may grow)")
    parser.add_argument("--download", action="store_true",
                        help="cifar10, cifar100, stl10: first fetch the official archive into --data-dir "
                             "(torchvision's URL and md5; skipped when the files are there)")
    add_config_options(parser)
    parser.set_defaults(func=_handler)


def _load_file(path: str) -> dict:
    """The config fields of a .toml or .json file (a run's config.json works), type-checked, or ValueError.

    Read by :func:`ncgeom.files.read_bounded`: a regular file of at most :data:`MAX_CONFIG_BYTES` (a FIFO, a device
    or a socket is refused, naming what it is, instead of blocking or reading without end)."""
    p = Path(path)
    where = f"--config {path}"
    if p.suffix not in (".toml", ".json"):
        raise ValueError(f"{where}: expected a .toml or .json file of config fields, got {p.suffix or 'no extension'!r}")
    try:
        raw = read_bounded(p, what="a config file", max_bytes=MAX_CONFIG_BYTES)
    except ValueError as exc:
        raise ValueError(f"--config {exc}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{where}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    try:
        data = tomllib.loads(text) if p.suffix == ".toml" else json.loads(text)
    except (tomllib.TOMLDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{where}: invalid {p.suffix[1:].upper()}: {exc}") from None
    if not isinstance(data, dict):
        raise ValueError(f"{where}: expected a table (JSON object) of config fields, got a {type(data).__name__}")
    data.pop("provenance", None)  # a run's config.json can be passed back
    names = {f.name for f in config_fields()}
    unknown = sorted(map(str, set(data) - names))
    if unknown:
        raise ValueError(f"{where}: unknown config field(s): {', '.join(unknown)}; accepted: {', '.join(sorted(names))}")
    for name, value in data.items():
        problem = field_type_error(name, value)
        if problem:
            raise ValueError(f"{where}: {name}: {problem}")
    return data


def _download(values: dict, *, progress: bool) -> None:
    """--download: the official archive of values' dataset into its data_dir (ValueError otherwise)."""
    from ncgeom.data.images.download import ARCHIVES, download_image_data

    dataset, data_dir = values.get("dataset"), values.get("data_dir")
    if dataset not in ARCHIVES:
        raise ValueError(f"--download fetches {', '.join(ARCHIVES)} (official archives), got --dataset {dataset}")
    if not isinstance(data_dir, str):
        raise ValueError("--download needs --data-dir DIR, the folder to fetch the archive into")
    download_image_data(dataset, data_dir, progress=progress)


def _fill_image_classes(values: dict) -> None:
    """An image data set without --classes: the data set's class count (read from an ImageFolder tree)."""
    dataset, data_dir = values.get("dataset"), values.get("data_dir")
    if "classes" in values or dataset not in IMAGE_DATASETS or not isinstance(data_dir, str):
        return  # a missing data_dir is reported by the Config, naming the field
    from ncgeom.runs.image_data import image_class_count

    values["classes"] = image_class_count(dataset, data_dir)


def _number(value, digits: int) -> str:
    """``value`` with ``digits`` significant digits (%g: never drops an exponent), or "n/a" when missing."""
    return "n/a" if value is None else f"{value:.{digits}g}"


def _handler(args: argparse.Namespace) -> int:
    require_int("--threads", args.threads, min_value=1, max_value=os.cpu_count() or 1)
    values = _load_file(args.config) if args.config else {}
    values.update(config_values(args))
    if args.resume and not args.out:
        raise ValueError("--resume needs --out DIR, the run directory that holds checkpoint.pt")
    if args.download:
        _download(values, progress=not args.quiet and sys.stderr.isatty())
    _fill_image_classes(values)
    if "lr" not in values and isinstance(values.get("model"), str):  # the model's default: 1e-3 for a ResNet
        values["lr"] = default_lr(values["model"])
    # ValueError (naming the field; sizes bounded by the memory budget, ncgeom.budget) -> exit 2, before
    # any allocation and before --out is created
    config = config_from_dict(values)
    problem = lr_warning(config)
    if problem is not None:
        print(f"ncgeom train: warning: {problem}", file=sys.stderr)

    from ncgeom.runs import run
    from ncgeom.threads import limit_cpu_threads

    limit_cpu_threads(args.threads)
    with raise_on_signals(), warnings.catch_warnings():  # SIGTERM/SIGINT unwind the run: a write in progress
        warnings.simplefilter("ignore", LearningRateWarning)  # removes its temporary file; the lr said once above
        try:
            result = run(config, out_dir=args.out, progress=not args.quiet and sys.stderr.isatty(), resume=args.resume)
        except Interrupted as stop:
            where = f"; {args.out} keeps the epochs written so far, without a summary.json" if args.out else ""
            resume = " (resume an image run with --resume)" if args.out and config.is_image else ""
            print(f"ncgeom train: interrupted by {stop.name}{where}{resume}", file=sys.stderr)
            return stop.exit_code
    if args.json:
        print(dumps_json(result.summary(), indent=1))
    else:
        f = result.final
        print(f"status: {result.status} ({result.message})")
        # %g keeps the exponent (a string cut to 10 characters printed 2.43e-05 as "2.42749254")
        print(f"loss {_number(f.loss, 10)} | nc_value {result.nc_value:.6g} [{result.nc_value_source}]"
              f" | gap {_number(result.gap, 6)}")
        print(" | ".join(f"{k} {f.value(k):.4g}" for k in ("etf_distance", "within_class", "nc1", "unit_norm", "rankme")
                         if isinstance(f.value(k), float)))
        if args.out:
            extra = ", checkpoint.pt" if config.is_image and config.checkpoint_every else ""
            print(f"written: {args.out}/config.json, history.jsonl, summary.json{extra}")
    if result.status != "completed":
        print(f"ncgeom train: error: {result.message}", file=sys.stderr)
        return 1
    return 0
