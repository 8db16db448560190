"""NC / DC metrics of one's own training loop, written as a run directory: :class:`NCMonitor`.

A user who trains their own model with their own loop (and, say, :class:`ncgeom.losses.HardContrastiveLoss`) calls
the monitor every N steps or every epoch. It computes the metrics of docs/theory.md, section 8 on batches of
features in bounded memory (:func:`ncgeom.metrics.streaming_nc_metrics`: two passes over the training features,
O(C d + d^2) state; the test NCC accuracy with the train class means) and writes them as every ncgeom run does
(:mod:`ncgeom.runs.records`, through :class:`~ncgeom.runs.folder.RunFolder`): config.json, history.jsonl (one
:class:`~ncgeom.runs.records.EpochRecord` per evaluation), and at :meth:`NCMonitor.close` summary.json and
embeddings.npz (the final class means [C, d], labels 0..C-1). ``ncgeom compare``, ``ncgeom plot`` and
:func:`ncgeom.runs.load_run` then read the user's run like a run of ``ncgeom train``.

What config.json says. A run directory's config is a :class:`~ncgeom.runs.config.Config`. The monitor fills the
fields that describe the user's loss and geometry (setting, beta, tau, num_negatives, estimator, psi, norm,
classes, dim, batch_size, batches, epochs, and lr and seed when given); the data and model fields keep their
defaults and do NOT describe the user's run (``samples_per_class`` is raised to batch_size when the batch would
not fit the default). ``provenance.recorded_by`` is ``"ncgeom.runs.monitor.NCMonitor"`` and
``provenance.monitor`` lists the fields the monitor set and the user's own ``description``.

The loss at NC each record is compared with (``nc_value``, ``gap``) is :func:`ncgeom.runs.run_nc_value` of that
config: for the weighted estimator the value at an exact NC batch of ``batch_size`` class-balanced samples, or,
with ``train_labels``, the mean over random batches of those labels (a shuffled DataLoader).

>>> import numpy as np, tempfile
>>> from ncgeom.geometry import simplex_etf
>>> from ncgeom.runs import load_run
>>> z, y = simplex_etf(3)[[0, 0, 1, 1, 2, 2]], np.array([0, 0, 1, 1, 2, 2])
>>> with tempfile.TemporaryDirectory() as out:
...     with NCMonitor(out, num_classes=3, setting="scl", batch_size=6) as monitor:
...         record = monitor.evaluate([(z, y)], epoch=1, loss=0.2)
...     round(record.metrics["etf_distance"], 12), load_run(out).summary.status
(0.0, 'completed')
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import numpy as np

from ncgeom.metrics.streaming import Batches, accumulate_moments, streaming_nc_metrics, streaming_ncc_accuracy
from ncgeom.provenance import provenance
from ncgeom.runs.config import Config
from ncgeom.runs.folder import RunFolder
from ncgeom.runs.nc_reference import run_nc_value
from ncgeom.runs.records import EpochRecord, RunSummary, save_config
from ncgeom.validate import require_choice, require_int, require_real
from ncgeom.vocabulary import ESTIMATORS, NORMALIZATIONS, PSI_NAMES, SETTINGS, RunStatus

__all__ = ["NCMonitor", "MONITOR_FIELDS"]

#: The Config fields a monitored run's config.json describes (module docstring); the others are defaults.
MONITOR_FIELDS: tuple[str, ...] = ("setting", "beta", "tau", "num_negatives", "estimator", "psi", "norm", "classes",
                                   "dim", "batch_size", "batches", "epochs", "lr", "seed")
_RECORDED_BY = "ncgeom.runs.monitor.NCMonitor"
_LOSS_OPTIONS = ("setting", "beta", "tau", "num_negatives", "estimator", "psi")


class NCMonitor:
    """Streaming NC/DC metrics of a user's training loop, written as a run directory (module docstring).

    Parameters
    ----------
    out_dir : path
        The run directory (created and locked while the monitor is open, as ``ncgeom train --out`` does).
    num_classes : int
        C >= 2; the labels of the batches given to :meth:`evaluate` must be 0..C-1.
    batch_size : int
        B >= 2, the training batch size (the NC value of the batch estimator depends on it).
    loss : HardContrastiveLoss, optional
        The loss the loop minimizes: its setting, beta, tau, num_negatives, estimator and psi are recorded. Or
        give them as ``setting``, ``beta``, ... (not both).
    setting, beta, tau, num_negatives, estimator, psi
        As :func:`ncgeom.losses.batch_loss` (the built-in psi names only: a config names its psi).
    norm : {"sphere", "ball", "none"}
        The normalization of the features the loop trains (recorded; the metrics take the features as given).
    dim : int, optional
        d; default: read from the first evaluation (recorded as C - 1 when it is C - 1, as a Config says).
    epochs : int, optional
        The planned number of epochs (or steps) of the x axis; default the last one recorded.
    train_labels : array [N], optional
        The training labels, for a shuffled DataLoader: the NC value is then the mean over random batches of them
        (:func:`ncgeom.runs.run_nc_value`, ``batches="shuffle"``); default: class-balanced batches.
    lr, seed : optional
        Recorded in config.json when given.
    every : int, optional
        :meth:`step` returns True every ``every`` steps (when an evaluation is due).
    description : mapping, optional
        Anything JSON-able about the run (the model, the data set): written to config.json's provenance.

    Examples
    --------
    In one's own loop (``encoded_batches`` from :mod:`ncgeom.metrics` encodes a loader in eval mode, no grad)::

        loss_func = HardContrastiveLoss("hscl", beta=5.0)
        with NCMonitor("runs/mine", num_classes=10, batch_size=256, loss=loss_func, every=500) as monitor:
            monitor.evaluate(encoded_batches(model, train_eval_loader), epoch=0)  # the initial state
            for x, y in loader:
                loss = loss_func(model(x), y)
                ...
                if monitor.step(loss.item()):
                    monitor.evaluate(encoded_batches(model, train_eval_loader),
                                     test_batches=encoded_batches(model, test_loader))
    """

    def __init__(self, out_dir: str | Path, *, num_classes: int, batch_size: int, loss: Any = None,
                 setting: str | None = None, beta: float | None = None, tau: float | None = None,
                 num_negatives: int | Literal["batch"] | None = None, estimator: str | None = None,
                 psi: str | None = None, norm: str = "sphere", dim: int | None = None, epochs: int | None = None,
                 train_labels: Any = None, lr: float | None = None, seed: int | None = None,
                 every: int | None = None, description: Mapping[str, Any] | None = None) -> None:
        given = {k: v for k, v in dict(setting=setting, beta=beta, tau=tau, num_negatives=num_negatives,
                                       estimator=estimator, psi=psi).items() if v is not None}
        options = self._loss_options(loss, given)
        self.num_classes = require_int("num_classes", num_classes, min_value=2)
        self._fields: dict[str, Any] = {
            **options, "norm": require_choice("norm", norm, NORMALIZATIONS), "classes": self.num_classes,
            "batch_size": require_int("batch_size", batch_size, min_value=2),
            "samples_per_class": max(Config.samples_per_class, int(batch_size)),
            "batches": "balanced" if train_labels is None else "shuffle",
        }
        if dim is not None:
            self._fields["dim"] = require_int("dim", dim, min_value=1)
        if epochs is not None:
            self._fields["epochs"] = require_int("epochs", epochs, min_value=1)
        if lr is not None:
            self._fields["lr"] = require_real("lr", lr, min_value=0.0, min_inclusive=False)
        if seed is not None:
            self._fields["seed"] = require_int("seed", seed, min_value=0)
        self.every = None if every is None else require_int("every", every, min_value=1)
        self.description = dict(description or {})
        self._train_labels = None if train_labels is None else np.asarray(train_labels)
        self.config = self._config(dim=self._fields.get("dim"), epochs=self._fields.get("epochs", 1))
        self.nc_value, self.nc_source = run_nc_value(self.config, labels=self._train_labels)
        self.steps = 0
        self.history: list[EpochRecord] = []
        self.initial: EpochRecord | None = None
        self._losses: list[float] = []
        self._means: np.ndarray | None = None
        self._start = time.perf_counter()
        self._stack = contextlib.ExitStack()
        self._folder = self._stack.enter_context(RunFolder(out_dir))  # created and locked now: bad paths fail early
        self._opened = False
        self.closed = False

    # --- the options --------------------------------------------------------------------------------------
    @staticmethod
    def _loss_options(loss: Any, given: dict[str, Any]) -> dict[str, Any]:
        if loss is not None:
            if given:
                raise ValueError(f"give the loss either as loss= or as {', '.join(sorted(given))}, not both")
            if not all(hasattr(loss, name) for name in ("setting", "options")):
                raise ValueError(f"loss must be an ncgeom.losses.HardContrastiveLoss, got {type(loss).__name__}")
            psi = loss.options["psi"]
            given = {"setting": loss.setting, **{k: loss.options[k] for k in ("beta", "tau", "num_negatives", "estimator")},
                     "psi": psi.name if psi.builtin else psi}
        options = {"setting": "hscl", "beta": 0.0, "tau": 1.0, "num_negatives": 1, "estimator": "weighted",
                   "psi": "infonce", **given}
        require_choice("setting", options["setting"], SETTINGS)
        require_choice("estimator", options["estimator"], ESTIMATORS)
        if not isinstance(options["psi"], str) or options["psi"] not in PSI_NAMES:
            raise ValueError(f"psi must be one of {', '.join(PSI_NAMES)} (a run's config names its psi), got "
                             f"{getattr(options['psi'], 'name', options['psi'])!r}")
        return options

    def _config(self, *, dim: int | None, epochs: int) -> Config:
        fields = {**self._fields, "epochs": epochs}
        if dim is not None:
            fields["dim"] = None if dim == self.num_classes - 1 else dim
        try:
            return Config(**fields)
        except ValueError as exc:
            raise ValueError(f"NCMonitor: {exc}") from None

    # --- the loop's calls -----------------------------------------------------------------------------------
    def step(self, loss: float | None = None) -> bool:
        """Count one training step (and its loss value, averaged into the next record); True when an evaluation
        is due (every ``every`` steps)."""
        self._require_open()
        if loss is not None:
            value = float(loss)
            if not math.isfinite(value):
                raise ValueError(f"loss must be finite, got {value} at step {self.steps + 1} (the run diverged: close the "
                                 "monitor with status='diverged')")
            self._losses.append(value)
        self.steps += 1
        return self.every is not None and self.steps % self.every == 0

    def evaluate(self, train_batches: Batches, *, test_batches: Batches | None = None, epoch: int | None = None,
                 loss: float | None = None) -> EpochRecord:
        """Record the metrics of the features ``train_batches`` (and the test NCC accuracy of ``test_batches``).

        ``train_batches``: (z [b, d], labels [b]) pairs (numpy or torch), a list or a callable returning a fresh
        iterable (two passes are made: :func:`ncgeom.metrics.encoded_batches`); ``test_batches`` one pass.
        ``epoch``: the x of the record (default the step count); it must increase, and 0 is the initial state.
        ``loss``: the training loss of the record (default: the mean of the losses given to :meth:`step` since
        the last record, None when none was).
        """
        self._require_open()
        x = self.steps if epoch is None else require_int("epoch", epoch, min_value=0)
        last = self.history[-1].epoch if self.history else (None if self.initial is None else self.initial.epoch)
        if last is not None and x <= last:
            raise ValueError(f"epoch must increase from one record to the next, got {x} after {last}")
        moments = accumulate_moments(train_batches, num_classes=self.num_classes)
        metrics = streaming_nc_metrics(train_batches, num_classes=self.num_classes, moments=moments)
        means = moments.class_means()
        test = None if test_batches is None else float(streaming_ncc_accuracy(test_batches, means))
        if loss is None and self._losses:
            loss = float(np.mean(self._losses))
        elif loss is not None:
            loss = require_real("loss", loss)
        self._losses = []
        record = EpochRecord(x, loss, self.nc_value, None if loss is None else loss - self.nc_value,
                             test_ncc_accuracy=test, mean_norm=moments.mean_norm,
                             time_s=time.perf_counter() - self._start, metrics=metrics.to_dict())
        self._open(moments.dim)
        self._means = means
        if x == 0 and self.initial is None and not self.history:
            self.initial = record
        else:
            self.history.append(record)
            self._folder.append(record)
        return record

    def close(self, *, status: RunStatus = "completed", message: str = "") -> RunSummary | None:
        """Write summary.json (status "completed" or "diverged") and embeddings.npz, and release the folder.

        Returns the summary, or None when nothing was evaluated (no summary is written: an unfinished run).
        """
        if self.closed:
            raise ValueError("the monitor is closed already")
        status = require_choice("status", status, ("completed", "diverged"))
        try:
            if self._means is None:
                return None
            records = ([] if self.initial is None else [self.initial]) + self.history
            final = records[-1]
            epochs = self._fields.get("epochs", max(1, final.epoch))
            config = self._config(dim=int(self._means.shape[1]), epochs=epochs)
            if config != self.config:  # the planned epochs or d were not known when config.json was written
                self.config = config
                save_config(self._folder.path, config, self._provenance)
            self._folder.close()
            summary = RunSummary(
                status=status, message=message or f"recorded by NCMonitor: {len(records)} evaluations, {self.steps} steps",
                final=final, initial=records[0], nc_value=self.nc_value, nc_value_source=self.nc_source,
                epochs_run=len(self.history), wall_time_s=time.perf_counter() - self._start, config=config)
            self._folder.finish(summary, self._means, np.arange(self.num_classes, dtype=np.int64))
            return summary
        finally:
            self.closed = True
            self._stack.close()

    def __enter__(self) -> NCMonitor:
        return self

    def __exit__(self, kind: Any, *exc: Any) -> None:
        if self.closed:
            return
        if kind is None:
            self.close()
        else:  # an exception in the user's loop: no summary (an unfinished run), the folder released
            self.closed = True
            self._stack.close()

    # --- internals ------------------------------------------------------------------------------------------
    def _require_open(self) -> None:
        if self.closed:
            raise ValueError("the monitor is closed: make a new NCMonitor for a new run")

    def _open(self, dim: int) -> None:
        """config.json and history.jsonl, at the first evaluation (when d is known)."""
        if self._opened:
            return
        if "dim" in self._fields and self._fields["dim"] != dim:
            raise ValueError(f"dim: the monitor was told d = {self._fields['dim']}, the features have {dim} columns")
        self.config = self._config(dim=dim, epochs=self._fields.get("epochs", 1))
        self._provenance = {**provenance(), "recorded_by": _RECORDED_BY,
                            "monitor": {"fields": [f for f in MONITOR_FIELDS if f in self._fields or f == "dim"],
                                        "description": self.description}}
        self._folder.open(self.config, self._provenance)
        self._opened = True


