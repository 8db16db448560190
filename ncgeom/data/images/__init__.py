"""Image data sets read from files: CIFAR-10/100, STL-10 and ImageFolder trees (docs/images.md).

- :mod:`~ncgeom.data.images.record`: :class:`ImageData`, the labelled train/test split every reader returns;
- :mod:`~ncgeom.data.images.readers`: CIFAR-10/100 (python pickles or binary records) and STL-10, with the
  official md5 list :data:`OFFICIAL_MD5`;
- :mod:`~ncgeom.data.images.folder`: ImageFolder trees, decoded with Pillow eagerly or lazily
  (:class:`ImageFolderIndex`), and a single ImageFolder split into train and test (:func:`split_image_folder`); :mod:`~ncgeom.data.images.walk`: which files are the images of which class
  (links followed only within the tree, each file once, loops refused);
- :mod:`~ncgeom.data.images.dispatch`: :func:`load_image_data`, one entry point by data set name;
- :mod:`~ncgeom.data.images.inert_pickle`: pickles read as plain data, never unpickled (the CIFAR files);
- :mod:`~ncgeom.data.images.download`: the official archives, fetched and md5-checked (``ncgeom train
  --download``; imported on first use).

Every file is read through :mod:`ncgeom.files` (regular files only, sized against the memory budget
before it is read). Small look-alike data sets for tests and docs are written by :mod:`ncgeom.testing.images`
(``write_cifar_like``, ``write_stl10_like``, ``write_image_folder``).
"""

from ncgeom.data.images.dispatch import load_image_data
from ncgeom.data.images.folder import (
    DEFAULT_MAX_BYTES,
    IMAGE_EXTENSIONS,
    ImageFolderIndex,
    image_folder_layout,
    load_image_folder,
    single_folder,
    split_image_folder,
)
from ncgeom.data.images.readers import GENERATED_MARKER, OFFICIAL_MD5, load_cifar, load_stl10
from ncgeom.data.images.record import ImageData

__all__ = [
    "ImageData",
    "ImageFolderIndex",
    "OFFICIAL_MD5",
    "GENERATED_MARKER",
    "IMAGE_EXTENSIONS",
    "DEFAULT_MAX_BYTES",
    "load_image_data",
    "load_cifar",
    "load_stl10",
    "load_image_folder",
    "image_folder_layout",
    "single_folder",
    "split_image_folder",
]
