"""The images of an image run: read from ``config.data_dir``, and served batch by batch (decoded by workers if lazy).

- :func:`image_class_count`: the class count of a data set folder (``ncgeom train`` fills ``--classes`` from it);
- :func:`read_image_data`: the :class:`~ncgeom.data.images.ImageData` of a config, held in memory as uint8 unless
  an ImageFolder split exceeds :data:`EAGER_MAX_BYTES` of pixels (then an
  :class:`~ncgeom.data.images.ImageFolderIndex`, decoded batch by batch). A single ImageFolder (no ``test/`` beside
  ``train/``, or class folders directly under ``data_dir``) is split per class into train and test, a fraction
  ``test_fraction`` held out, drawn from the run's data stream (:func:`~ncgeom.runs.setup.seed_streams`: the
  same split for the same seed, and no draw of the training streams changes);
- :func:`image_batches`: the uint8 images of each index array, in order (a lazy split decoded by ``workers``
  processes of a DataLoader).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import numpy as np

from ncgeom.data.images import ImageData, ImageFolderIndex, image_folder_layout, load_image_data, split_image_folder
from ncgeom.runs.config import Config
from ncgeom.vocabulary import IMAGE_DATASETS, ImageDataset

__all__ = ["EAGER_MAX_BYTES", "image_class_count", "read_image_data", "image_batches", "chunks"]

_TEST_FRACTION_DEFAULT: float = Config.test_fraction
#: An ImageFolder split with more uint8 pixels than this is decoded batch by batch (ncgeom.data.images' default).
EAGER_MAX_BYTES = 2**30


def image_class_count(dataset: str, data_dir: str | Path) -> int:
    """The number of classes of an image data set: 10 / 100 for CIFAR and STL-10, the class folders of an
    ImageFolder tree (its ``train/`` sub-folders, listed without decoding any image)."""
    if dataset == "imagefolder":
        root = Path(data_dir).expanduser()
        if image_folder_layout(root) == "single":  # the split's draws do not change the class count
            return split_image_folder(root, test_fraction=0.5, rng=np.random.default_rng(0), lazy=True).num_classes
        return load_image_data("imagefolder", root, lazy=True).num_classes
    if dataset in IMAGE_DATASETS:
        return 100 if dataset == "cifar100" else 10
    raise ValueError(f"dataset must be one of {', '.join(IMAGE_DATASETS)}, got {dataset!r}")


def read_image_data(config: Config) -> ImageData:
    """The ImageData of ``config`` (uint8 in memory, or an ImageFolderIndex per split above EAGER_MAX_BYTES).

    ValueError (one line naming the file) for a missing folder, a wrong layout, a corrupt file, or a class
    count other than ``config.classes``.
    """
    if not config.is_image or config.data_dir is None:
        raise ValueError(f"config.dataset must be an image data set with a data_dir, got {config.dataset!r}")
    root = Path(config.data_dir).expanduser()
    if config.dataset == "imagefolder":
        if image_folder_layout(root) == "single":
            data = split_image_folder(root, test_fraction=config.test_fraction, rng=_split_rng(config.seed), lazy=True)
        else:
            if config.test_fraction != _TEST_FRACTION_DEFAULT:
                raise ValueError(f"test_fraction: {root} has train/ and test/ already; test_fraction={config.test_fraction:g} "
                                 "splits a single ImageFolder (class folders without a test/ split)")
            data = load_image_data("imagefolder", root, lazy=True)
        data = dataclasses.replace(data, x_train=_eager_if_small(data.x_train), x_test=_eager_if_small(data.x_test))
    else:
        data = load_image_data(cast(ImageDataset, config.dataset), root)
    if data.num_classes != config.classes:
        raise ValueError(f"classes: {root} holds {data.num_classes} classes, the config says {config.classes} "
                         f"(pass --classes {data.num_classes}, or leave --classes out for ncgeom train to read it)")
    return data


def _split_rng(seed: int) -> np.random.Generator:
    """The data stream of :func:`ncgeom.runs.setup.seed_streams` (its first child), as a fresh generator: an image
    run reads its data, so this stream draws nothing else (the driver's own copy stays untouched)."""
    return np.random.default_rng(np.random.SeedSequence(seed).spawn(4)[0])


def _eager_if_small(index) -> np.ndarray | ImageFolderIndex:
    if not isinstance(index, ImageFolderIndex) or len(index) == 0:
        return index
    first = index[0]
    return index.load(np.arange(len(index))) if len(index) * first.nbytes <= EAGER_MAX_BYTES else index


class _BatchReader:
    """Map-style dataset for torch's DataLoader: item s = the uint8 images of row s of ``rows`` (a lazy split)."""

    def __init__(self, source: ImageFolderIndex, rows: list[np.ndarray]):
        self.source = source
        self.rows = rows

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, s: int) -> np.ndarray:
        return self.source.load(self.rows[s])


def image_batches(source, rows: list[np.ndarray], workers: int) -> Iterator[np.ndarray]:
    """uint8 [b, H, W, 3] images of each index array of ``rows``, in order; a lazy split decoded by ``workers``."""
    if isinstance(source, np.ndarray):
        for r in rows:
            yield source[r]
        return
    if workers == 0:
        for r in rows:
            yield source.load(r)
        return
    from torch.utils.data import DataLoader

    reader: Any = _BatchReader(source, rows)  # a map-style dataset (__len__, __getitem__)
    collate: Any = _as_is
    loader: Any = DataLoader(reader, batch_size=None, shuffle=False, num_workers=workers,
                             multiprocessing_context="spawn", collate_fn=collate)
    yield from loader


def _as_is(images: np.ndarray) -> np.ndarray:
    """The DataLoader's collate function: the decoded batch unchanged (module level: spawn pickles it)."""
    return images


def chunks(n: int, size: int) -> list[np.ndarray]:
    """Index arrays 0..n-1 cut into consecutive pieces of ``size`` (the last one shorter)."""
    return [np.arange(a, min(a + size, n)) for a in range(0, n, size)]
