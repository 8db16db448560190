"""ImageFolder trees: ``root/train/<class>/<image>`` and ``root/test/<class>/<image>``, decoded with Pillow; or a single
ImageFolder (``root/<class>/<image>``, or ``root/train`` without ``root/test``) split into train and test per class
by :func:`split_image_folder`.

torchvision's ImageFolder semantics (docs/images.md): the classes are the sub-folders of ``train`` sorted by
name, the images the files with an extension of :data:`IMAGE_EXTENSIONS` (any case) found walking each class
folder in sorted order; a test class folder must also exist under ``train``. Images are decoded to RGB uint8
[H, W, 3] (torchvision's pil_loader), optionally resized and centre-cropped to ``size`` (``Resize(size)`` +
``CenterCrop(size)``). :func:`load_image_folder` decodes eagerly up to ``max_bytes`` (1 GiB by default) and
otherwise asks for ``lazy=True``, which returns an :class:`ImageFolderIndex` per split that decodes on
indexing.

The walk (:mod:`ncgeom.data.images.walk`) follows symbolic links only within the tree and resolves each
file by its real path once: a link loop, a link out of its class folder or out of the data root, or a
FIFO named like an image is refused, never followed. Each image is read with
:func:`ncgeom.files.read_bounded` (a regular file within the memory budget) and decoded by Pillow with
its warnings silenced (:func:`ncgeom.files.quiet_warnings`); an image whose header declares more pixels
than Pillow's decompression-bomb limit (``PIL.Image.MAX_IMAGE_PIXELS``) or than the memory budget allows
is refused before any pixel is decoded.

Errors (missing folder, no class folders, an empty train class, an undecodable image, images of several
sizes without ``size``, the refusals above) are ValueError with a one-line message that names the file or
folder.
"""

from __future__ import annotations

import io
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image, UnidentifiedImageError

from ncgeom import budget
from ncgeom.data.images.inert_pickle import one_line
from ncgeom.data.images.record import ImageData, existing_folder
from ncgeom.data.images.walk import IMAGE_EXTENSIONS, real_inside, refuse_nested, split_samples
from ncgeom.files import quiet_warnings, read_bounded
from ncgeom.validate import require_int

__all__ = ["IMAGE_EXTENSIONS", "DEFAULT_MAX_BYTES", "ImageFolderIndex", "load_image_folder", "image_folder_layout",
           "single_folder", "split_image_folder"]

DEFAULT_MAX_BYTES = 2**30  # largest eager decode (1 GiB of uint8 pixels)


@dataclass(frozen=True)
class ImageFolderIndex:
    """The image files of an ImageFolder split, decoded with Pillow when indexed.

    ``index[i]`` is image i as uint8 [H, W, 3]; ``index[indices]`` (a slice, a list or an integer array) is
    a batch [B, H, W, 3] (all images of the batch must have one size: pass ``size`` to the reader otherwise).
    """

    paths: tuple[Path, ...]
    size: int | None = None

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, index: Any) -> np.ndarray:
        if isinstance(index, (int, np.integer)):
            return _decode(self.paths[int(index)], self.size)
        chosen = np.arange(len(self.paths))[index]
        return self.load(chosen)

    def load(self, indices: Sequence[int] | np.ndarray) -> np.ndarray:
        """Images ``indices`` as one uint8 array [B, H, W, 3]."""
        images = [_decode(self.paths[int(i)], self.size) for i in np.asarray(indices).reshape(-1)]
        return _stack_same_shape(images, [self.paths[int(i)] for i in np.asarray(indices).reshape(-1)])


def load_image_folder(root: str | os.PathLike, *, size: int | None = None, lazy: bool = False,
                      max_bytes: int = DEFAULT_MAX_BYTES) -> ImageData:
    """An ImageFolder tree ``root/{train,test}/<class>/<image>`` (module docstring), decoded to RGB with Pillow.

    Parameters
    ----------
    root : path
    size : int or None
        None: images as stored (all of one size, for eager decoding). An int S: resize the shorter side to S
        (bilinear) and take the central S x S crop, as torchvision's ``Resize(S)`` + ``CenterCrop(S)``.
    lazy : bool
        False: decode everything now into uint8 arrays. True: return :class:`ImageFolderIndex` splits that
        decode when indexed (each access re-reads the files).
    max_bytes : int
        Eager decoding refuses a split whose N x H x W x 3 (estimated from its first image) exceeds this.
    """
    base = existing_folder(root)
    if size is not None:
        size = require_int("size", size, min_value=1)
    max_bytes = require_int("max_bytes", max_bytes, min_value=1)
    train_dir, test_dir = base / "train", base / "test"
    for folder in (train_dir, test_dir):
        if not folder.is_dir():
            raise ValueError(f"{folder}: no such folder (ImageFolder layout: root/train/<class>/..., "
                             "root/test/<class>/...)")
    real_root = os.path.realpath(base)
    refuse_nested({folder: real_inside(folder, real_root, "the data root") for folder in (train_dir, test_dir)},
                  "split folder")
    classes = tuple(sorted(entry.name for entry in os.scandir(train_dir) if entry.is_dir()))
    if not classes:
        raise ValueError(f"{train_dir}: no class folders")
    test_classes = sorted(entry.name for entry in os.scandir(test_dir) if entry.is_dir())
    unknown = [c for c in test_classes if c not in classes]
    if unknown:
        raise ValueError(f"{test_dir}: class folder(s) {', '.join(unknown)} not among the train classes")
    splits: list[tuple[np.ndarray | ImageFolderIndex, np.ndarray]] = []
    for folder, need_all in ((train_dir, True), (test_dir, False)):
        paths, labels = split_samples(base, folder, classes, need_all=need_all)
        index = ImageFolderIndex(tuple(paths), size)
        if lazy:
            splits.append((index, labels))
            continue
        if paths:
            first = _decode(paths[0], size)
            need = len(paths) * first.size
            if need > max_bytes:
                raise ValueError(f"{folder}: {len(paths)} images of {first.shape} need {need} bytes > max_bytes = "
                                 f"{max_bytes}; pass lazy=True or a larger max_bytes")
            splits.append((index.load(np.arange(len(paths))), labels))
        else:
            shape = (0, size, size, 3) if size is not None else (0, 0, 0, 3)
            splits.append((np.zeros(shape, dtype=np.uint8), labels))
    (x_train, y_train), (x_test, y_test) = splits
    return ImageData("imagefolder", x_train, y_train, x_test, y_test, classes, "imagefolder", False)


def image_folder_layout(root: str | os.PathLike) -> str:
    """``"split"`` for a tree with ``train/`` and ``test/`` (:func:`load_image_folder`), ``"single"`` for a single
    ImageFolder (:func:`single_folder`: ``root/train`` alone, or class folders directly under ``root``)."""
    base = existing_folder(root)
    if (base / "train").is_dir() and (base / "test").is_dir():
        return "split"
    return "single"


def single_folder(root: str | os.PathLike) -> Path:
    """The class folders' parent of a single ImageFolder: ``root/train`` when it exists (and ``root/test`` does not),
    else ``root`` itself (torchvision's ImageFolder root); ValueError when ``root`` has ``test/`` without ``train/``."""
    base = existing_folder(root)
    if (base / "test").is_dir() and not (base / "train").is_dir():
        raise ValueError(f"{base / 'train'}: no such folder (ImageFolder layout: root/train/<class>/..., "
                         "root/test/<class>/..., or a single folder root/<class>/... split with --test-fraction)")
    return base / "train" if (base / "train").is_dir() else base


def split_image_folder(root: str | os.PathLike, *, test_fraction: float, rng: np.random.Generator,
                       size: int | None = None, lazy: bool = False, max_bytes: int = DEFAULT_MAX_BYTES) -> ImageData:
    """A single ImageFolder (:func:`single_folder`) split into train and test, stratified and drawn from ``rng``.

    Class c's images (torchvision's order) are permuted by ``rng`` and the first round(f n_c) go to the test split,
    the rest to train (the rule of the digits split, :func:`ncgeom.data.load_digits_data`); a class keeps at least
    one training image. ``size``, ``lazy`` and ``max_bytes`` as :func:`load_image_folder`.
    """
    folder = single_folder(root)
    base = existing_folder(root)
    frac = float(test_fraction)
    if not 0.0 < frac < 1.0:
        raise ValueError(f"test_fraction must lie in (0, 1) to split the single ImageFolder {folder}, got {test_fraction!r}")
    if not isinstance(rng, np.random.Generator):
        raise ValueError("rng must be a numpy.random.Generator (the split is a random draw)")
    if size is not None:
        size = require_int("size", size, min_value=1)
    max_bytes = require_int("max_bytes", max_bytes, min_value=1)
    real_inside(folder, os.path.realpath(base), "the data root")
    classes = tuple(sorted(entry.name for entry in os.scandir(folder) if entry.is_dir()))
    if not classes:
        raise ValueError(f"{folder}: no class folders (a single ImageFolder is <root>/<class>/<image>)")
    paths, labels = split_samples(base, folder, classes, need_all=True)
    train_idx, test_idx = [], []
    for c in range(len(classes)):
        members = np.flatnonzero(labels == c)
        members = members[rng.permutation(members.size)]
        n_test = min(int(round(frac * members.size)), members.size - 1)
        test_idx.append(np.sort(members[:n_test]))
        train_idx.append(np.sort(members[n_test:]))
    splits: list[tuple[np.ndarray | ImageFolderIndex, np.ndarray]] = []
    for idx in (np.concatenate(train_idx), np.concatenate(test_idx)):
        chosen = [paths[i] for i in idx]
        index = ImageFolderIndex(tuple(chosen), size)
        if lazy:
            splits.append((index, labels[idx]))
            continue
        if not chosen:  # every class of one image: no test image
            shape = (0, size, size, 3) if size is not None else (0, 0, 0, 3)
            splits.append((np.zeros(shape, dtype=np.uint8), labels[idx]))
            continue
        first = _decode(chosen[0], size)
        need = len(chosen) * first.size
        if need > max_bytes:
            raise ValueError(f"{folder}: {len(chosen)} images of {first.shape} need {need} bytes > max_bytes = "
                             f"{max_bytes}; pass lazy=True or a larger max_bytes")
        splits.append((index.load(np.arange(len(chosen))), labels[idx]))
    (x_train, y_train), (x_test, y_test) = splits
    return ImageData("imagefolder", x_train, y_train, x_test, y_test, classes, f"imagefolder (single, test_fraction {frac:g})",
                     False)


def _decode(path: Path, size: int | None) -> np.ndarray:
    """Pillow decode to RGB uint8 [H, W, 3] (torchvision's pil_loader), optionally resized and centre-cropped.

    The file is read whole within the memory budget; its header's size is checked before the pixels are
    decoded (Pillow's decompression-bomb limit and the budget); every failure of Pillow on the bytes is a
    one-line ValueError naming the file, and Pillow's warnings are dropped.
    """
    data = read_bounded(path, what="an image")
    with quiet_warnings(Image.DecompressionBombWarning, loggers=("PIL",)):
        try:
            with Image.open(io.BytesIO(data)) as img:
                _check_pixels(path, img.size)
                rgb = img.convert("RGB")
            if size is not None:
                rgb = _resize_center_crop(rgb, size)
            return np.asarray(rgb, dtype=np.uint8)
        except _Refused:
            raise
        except (Image.DecompressionBombWarning, Image.DecompressionBombError) as exc:
            raise ValueError(f"{path}: refused as a decompression bomb ({one_line(exc)})") from None
        except UnidentifiedImageError:
            raise ValueError(f"{path}: not a readable image (Pillow recognises no image format in it)") from None
        except Exception as exc:  # noqa: BLE001 - untrusted bytes: any failure of Pillow's decoders is a bad file
            raise ValueError(f"{path}: not a readable image ({type(exc).__name__}: {one_line(exc)})") from None


class _Refused(ValueError):
    """An image refused from its header (too many pixels), before decoding."""


def _check_pixels(path: Path, shape: tuple[int, int]) -> None:
    """Refuse an image of ``shape`` (width, height) above Pillow's bomb limit or the memory budget."""
    width, height = shape
    pixels = width * height
    limit = Image.MAX_IMAGE_PIXELS
    if limit is not None and pixels > limit:
        raise _Refused(f"{path}: an image of {width} x {height} = {pixels} pixels, above the {int(limit)} pixels of "
                       "Pillow's decompression-bomb limit (PIL.Image.MAX_IMAGE_PIXELS); refused as a decompression "
                       "bomb")
    try:
        # 10 bytes a pixel: the decoder's image in the file's mode (up to 4), its RGB copy (3), the array (3)
        budget.require_file_within_budget(path, 10 * pixels, what=f"decoding an image of {width} x {height} pixels")
    except ValueError as exc:
        raise _Refused(str(exc)) from None


def _resize_center_crop(img: Image.Image, size: int) -> Image.Image:
    """torchvision's Resize(size) (shorter side to size, bilinear) then CenterCrop(size), on a PIL image."""
    w, h = img.size
    if w <= h:
        new_w, new_h = size, int(size * h / w)
    else:
        new_w, new_h = int(size * w / h), size
    if (new_w, new_h) != (w, h):
        img = img.resize((new_w, new_h), Image.Resampling.BILINEAR)
    top = int(round((new_h - size) / 2.0))
    left = int(round((new_w - size) / 2.0))
    return img.crop((left, top, left + size, top + size))


def _stack_same_shape(images: list[np.ndarray], paths: list[Path]) -> np.ndarray:
    if not images:
        return np.zeros((0, 0, 0, 3), dtype=np.uint8)
    for img, path in zip(images, paths):
        if img.shape != images[0].shape:
            raise ValueError(f"{path}: image of shape {img.shape} differs from {images[0].shape} of {paths[0]}; "
                             f"pass size= to resize")
    return np.stack(images)
