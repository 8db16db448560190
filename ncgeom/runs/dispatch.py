"""One run of any config: :func:`run` hands it to the driver of its data (vector data or images)."""

from __future__ import annotations

import warnings
from pathlib import Path

from ncgeom.runs.config import Config
from ncgeom.runs.defaults import LearningRateWarning, lr_warning
from ncgeom.runs.images import run_images
from ncgeom.runs.result import Result
from ncgeom.runs.single import run_single

__all__ = ["run"]


def run(config: Config, *, out_dir: str | Path | None = None, progress: bool = False, resume: bool = False) -> Result:
    """Train as ``config`` says; write the run directory if ``out_dir`` is given (docs/experiments.md).

    A vector data set (gaussian, digits) is trained by :func:`ncgeom.runs.single.run_single`, an image data set
    (``config.is_image``: CIFAR-10/100, STL-10, ImageFolder) by :func:`ncgeom.runs.images.run_images` (a ResNet;
    checkpoints, ``resume``); both with the one loop of :mod:`ncgeom.runs.loop`.

    Parameters
    ----------
    config : Config
        Validated at construction (bad values never reach training).
    out_dir : path, optional
        Run directory (created; locked while the run writes it): config.json, history.jsonl, summary.json,
        embeddings.npz (and checkpoint.pt for an image run).
    progress : bool
        Show a tqdm bar over epochs (image runs: over images, with images/s).
    resume : bool
        Image runs only: continue from ``out_dir/checkpoint.pt`` (ValueError if it is missing or was made
        with another config); the vector-data runs have no checkpoints (ValueError).

    Returns
    -------
    Result
        status "completed" or "diverged" (never raises on divergence).

    Warns
    -----
    LearningRateWarning
        An image run whose lr is far above its ResNet's default (:func:`ncgeom.runs.defaults.lr_warning`).
    """
    if not isinstance(config, Config):
        raise ValueError(f"config must be an ncgeom.runs.Config, got {type(config).__name__}")
    if config.is_image:
        problem = lr_warning(config)
        if problem is not None:
            warnings.warn(problem, LearningRateWarning, stacklevel=2)
        return run_images(config, out_dir=out_dir, progress=progress, resume=resume)
    if resume is not False:
        raise ValueError(f"resume applies to image data sets (checkpoints), got dataset={config.dataset!r}")
    return run_single(config, out_dir=out_dir, progress=progress)
