"""The record every image reader returns (:class:`ImageData`), and the data folder check they share."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np

__all__ = ["ImageData", "LazyImages", "existing_folder"]


class LazyImages(Protocol):
    """Images decoded on demand (:class:`ncgeom.data.images.folder.ImageFolderIndex` is one): ``len``, one image
    by index, and a batch of indices as uint8 [b, H, W, 3]."""

    def __len__(self) -> int: ...

    def __getitem__(self, index: Any) -> np.ndarray: ...

    def load(self, indices: Any) -> np.ndarray: ...


@dataclass(frozen=True)
class ImageData:
    """A labelled train/test split of images (the image counterpart of :class:`ncgeom.data.LabeledData`).

    Attributes
    ----------
    name : str
        One of ``IMAGE_DATASETS``.
    x_train, x_test : numpy.ndarray or ImageFolderIndex
        uint8 images [N, H, W, 3] (RGB, channels last), or a lazily decoding :class:`LazyImages` (an :class:`~ncgeom.data.images.folder.ImageFolderIndex`).
    y_train, y_test : numpy.ndarray
        int64 labels [N] in {0..C-1}.
    classes : tuple of str
        The class names, index c = label c.
    layout : str
        The folder read (``cifar-10-batches-py``, ``stl10_binary``, ``imagefolder``...).
    checksums_verified : bool
        Whether the files matched :data:`ncgeom.data.images.OFFICIAL_MD5`.
    """

    name: str
    x_train: np.ndarray | LazyImages = field(repr=False)
    y_train: np.ndarray = field(repr=False)
    x_test: np.ndarray | LazyImages = field(repr=False)
    y_test: np.ndarray = field(repr=False)
    classes: tuple[str, ...]
    layout: str
    checksums_verified: bool = False

    @property
    def num_classes(self) -> int:
        return len(self.classes)

    @property
    def num_train(self) -> int:
        return int(self.y_train.shape[0])

    @property
    def prior(self) -> np.ndarray:
        """Empirical class frequencies of the train split [C]."""
        return np.bincount(self.y_train, minlength=self.num_classes) / max(1, self.num_train)


def existing_folder(root: str | os.PathLike) -> Path:
    """``root`` as a Path if it is a folder; ValueError ``"<root>: no such folder"`` otherwise."""
    base = Path(root)
    if not base.is_dir():
        raise ValueError(f"{base}: no such folder")
    return base
