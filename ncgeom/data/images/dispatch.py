"""One entry point for the image data sets by name: :func:`load_image_data` (docs/images.md)."""

from __future__ import annotations

import os

from ncgeom.data.images.folder import DEFAULT_MAX_BYTES, load_image_folder
from ncgeom.data.images.readers import load_cifar, load_stl10
from ncgeom.data.images.record import ImageData
from ncgeom.validate import require_choice
from ncgeom.vocabulary import IMAGE_DATASETS, ImageDataset

__all__ = ["load_image_data"]


def load_image_data(name: ImageDataset, root: str | os.PathLike, *, verify_checksums: bool = True,
                    size: int | None = None, lazy: bool = False, max_bytes: int = DEFAULT_MAX_BYTES) -> ImageData:
    """Read the image data set ``name`` (one of ``IMAGE_DATASETS``) from ``root``.

    ``verify_checksums`` applies to cifar10, cifar100 and stl10; ``size``, ``lazy`` and ``max_bytes`` to
    imagefolder only (ValueError if set for another data set).
    """
    name = require_choice("dataset", name, IMAGE_DATASETS)
    if name != "imagefolder" and (size is not None or lazy or max_bytes != DEFAULT_MAX_BYTES):
        raise ValueError(f"size, lazy and max_bytes apply to dataset 'imagefolder' only, not {name!r}")
    if name == "imagefolder":
        return load_image_folder(root, size=size, lazy=lazy, max_bytes=max_bytes)
    if name == "stl10":
        return load_stl10(root, verify_checksums=verify_checksums)
    return load_cifar(root, name=name, verify_checksums=verify_checksums)
