"""Image data sets read from files: CIFAR-10/100, STL-10 and ImageFolder trees, with writers of small look-alikes.

Layouts accepted (docs/images.md), under a folder ``root``:

- CIFAR-10: ``root/cifar-10-batches-py/{data_batch_1..5, test_batch, batches.meta}`` (torchvision's layout,
  the "python version" of the official archive) or ``root/cifar-10-batches-bin/{data_batch_1..5.bin,
  test_batch.bin, batches.meta.txt}`` (the official binary version: records of 1 label byte + 3072 pixels).
- CIFAR-100: ``root/cifar-100-python/{train, test, meta}`` or ``root/cifar-100-binary/{train.bin, test.bin,
  fine_label_names.txt}`` (records of a coarse and a fine label byte + 3072 pixels); the fine labels are used.
- STL-10: ``root/stl10_binary/{train_X.bin, train_y.bin, test_X.bin, test_y.bin, class_names.txt}``: images
  stored channel by channel, each 96 x 96 channel column-major; labels 1..10 (returned as 0..9). The
  unlabeled split and the fold indices are not read.
- ImageFolder: ``root/train/<class>/<image>`` and ``root/test/<class>/<image>`` (torchvision's ImageFolder:
  classes are the sub-folders of ``train`` sorted by name, images the files with an image extension found
  walking each class folder in sorted order), decoded with Pillow to RGB.

Every reader returns an :class:`ImageData`: uint8 images [N, H, W, 3] (or, for ImageFolder with ``lazy=True``,
an :class:`ImageFolderIndex` that decodes on indexing), int64 labels [N] in {0..C-1}, the class names.

The CIFAR "python" files are pickles. ncgeom never unpickles a file: :func:`ncgeom.data.inert_pickle.pickle_as_data`
walks the opcode stream with :func:`pickletools.genops` and builds plain containers (dict, list, tuple, str,
bytes, int), recording a reference to a global or a call as an inert record that is never imported or called;
the reader then accepts exactly the structure of the official files (a dict whose ``data`` is a
``numpy.core.multiarray._reconstruct`` of a uint8 [N, 3072] array and whose ``labels`` or ``fine_labels`` is a
list of ints) and refuses anything else with a ValueError naming the file.

Checksums: the md5 of each official file as torchvision lists it (:data:`OFFICIAL_MD5`) is checked when the
folder claims to be official, that is unless ``verify_checksums=False`` is passed or the layout folder holds
the marker file :data:`GENERATED_MARKER` (which the writers below create). torchvision lists no md5 for the
binary CIFAR layouts; those are checked for exact record sizes and label ranges only.

Errors (missing folder or file, wrong layout, truncated file, md5 mismatch, undecodable image) are
ValueError with a one-line message that names the file; the CLI maps them to exit code 2.

Memory: a reader holds the whole split in memory as uint8: CIFAR-10/100 train 50000 x 3072 B = 153.6 MB
(test 30.7 MB), STL-10 train 5000 x 27648 B = 138.2 MB (test 221.2 MB); while a CIFAR python file is parsed
its pixel block is held about three times (file bytes, decoded string, array), 92 MB for a CIFAR-10 batch,
460 MB for the CIFAR-100 train file. ImageFolder decodes eagerly up to ``max_bytes`` (1 GiB by default) and
otherwise asks for ``lazy=True``.

Why not torchvision: with the pinned CPU torch (2.13.0+cpu), PyPI's torchvision wheel is a CUDA build whose
``_C`` extension does not load, and ``import torchvision`` raises "operator torchvision::nms does not exist".
These readers follow torchvision's semantics (file lists, md5 lists, class order, pixel order) without it.
"""

from __future__ import annotations

import hashlib
import io
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
from PIL import Image

from ncgeom.atomic_io import atomic_write_bytes, atomic_write_text
from ncgeom.data.inert_pickle import PickleCall, PickleGlobal, one_line, pickle_as_data, py2_pickle
from ncgeom.validate import require_choice, require_int
from ncgeom.vocabulary import IMAGE_DATASETS, ImageDataset

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
    "write_cifar_like",
    "write_stl10_like",
    "write_image_folder",
]

# md5 of the official files, as torchvision lists them: pytorch/vision, torchvision/datasets/cifar.py
# (CIFAR10 and CIFAR100: train_list, test_list, meta) and torchvision/datasets/stl10.py (STL10: train_list,
# test_list; unlabeled_X.bin is not read here).
OFFICIAL_MD5: dict[str, dict[str, str]] = {
    "cifar-10-batches-py": {
        "data_batch_1": "c99cafc152244af753f735de768cd75f",
        "data_batch_2": "d4bba439e000b95fd0a9bffe97cbabec",
        "data_batch_3": "54ebc095f3ab1f0389bbae665268c751",
        "data_batch_4": "634d18415352ddfa80567beed471001a",
        "data_batch_5": "482c414d41f54cd18b22e5b47cb7c3cb",
        "test_batch": "40351d587109b95175f43aff81a1287e",
        "batches.meta": "5ff9c542aee3614f3951f8cda6e48888",
    },
    "cifar-100-python": {
        "train": "16019d7e3df5f24257cddd939b257f8d",
        "test": "f0ef6b0ae62326f3e7ffdfab6717acfc",
        "meta": "7973b15100ade9c7d40fb424638fde48",
    },
    "stl10_binary": {
        "train_X.bin": "918c2871b30a85fa023e0c44e0bee87f",
        "train_y.bin": "5a34089d4802c674881badbb80307741",
        "test_X.bin": "7f263ba9f9e0b06b93213547f721ac82",
        "test_y.bin": "36f9794fa4beb8a2c72628de14fa638e",
    },
}
GENERATED_MARKER = "NCGEOM_GENERATED"  # in a layout folder: "not the official files", md5 not checked
# torchvision's IMG_EXTENSIONS (torchvision/datasets/folder.py), compared with the lower-cased file name.
IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp")
DEFAULT_MAX_BYTES = 2**30  # ImageFolder: largest eager decode (1 GiB of uint8 pixels)

_CIFAR_SIDE = 32
_CIFAR_PIXELS = 3 * _CIFAR_SIDE * _CIFAR_SIDE  # 3072, channel-major rows (R plane, G plane, B plane)
_STL_SIDE = 96
_STL_PIXELS = 3 * _STL_SIDE * _STL_SIDE  # 27648
_Layout = Literal["python", "binary"]


# --- records --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ImageData:
    """A labelled train/test split of images (the image counterpart of :class:`ncgeom.data.LabeledData`).

    Attributes
    ----------
    name : str
        One of ``IMAGE_DATASETS``.
    x_train, x_test : numpy.ndarray or ImageFolderIndex
        uint8 images [N, H, W, 3] (RGB, channels last), or a lazily decoding :class:`ImageFolderIndex`.
    y_train, y_test : numpy.ndarray
        int64 labels [N] in {0..C-1}.
    classes : tuple of str
        The class names, index c = label c.
    layout : str
        The folder read (``cifar-10-batches-py``, ``stl10_binary``, ``imagefolder``...).
    checksums_verified : bool
        Whether the files matched :data:`OFFICIAL_MD5`.
    """

    name: str
    x_train: np.ndarray | ImageFolderIndex = field(repr=False)
    y_train: np.ndarray = field(repr=False)
    x_test: np.ndarray | ImageFolderIndex = field(repr=False)
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


# --- CIFAR ------------------------------------------------------------------------------------------
_CIFAR = {
    # name: (python folder, train files, test file, meta file, meta key, labels key,
    #        binary folder, binary train files, binary test file, names file, label bytes, classes)
    "cifar10": ("cifar-10-batches-py", tuple(f"data_batch_{i}" for i in range(1, 6)), "test_batch", "batches.meta",
                "label_names", "labels", "cifar-10-batches-bin", tuple(f"data_batch_{i}.bin" for i in range(1, 6)),
                "test_batch.bin", "batches.meta.txt", 1, 10),
    "cifar100": ("cifar-100-python", ("train",), "test", "meta", "fine_label_names", "fine_labels",
                 "cifar-100-binary", ("train.bin",), "test.bin", "fine_label_names.txt", 2, 100),
}
_RECONSTRUCT = {PickleGlobal(module, "_reconstruct") for module in ("numpy.core.multiarray", "numpy._core.multiarray")}
_NDARRAY = PickleGlobal("numpy", "ndarray")
_DTYPE = PickleGlobal("numpy", "dtype")


def load_cifar(root: str | os.PathLike, *, name: Literal["cifar10", "cifar100"] = "cifar10",
               verify_checksums: bool = True) -> ImageData:
    """CIFAR-10 or CIFAR-100 from ``root`` (the folder holding ``cifar-10-batches-py`` or its siblings).

    The python layout is read when present, else the binary one (module docstring). Images [N, 32, 32, 3]
    uint8, labels int64 (the fine labels for CIFAR-100); train = the batches concatenated in file order.

    Parameters
    ----------
    root : path
    name : {"cifar10", "cifar100"}
    verify_checksums : bool
        Check the md5 of the python-layout files against :data:`OFFICIAL_MD5` (skipped anyway where the
        layout folder holds :data:`GENERATED_MARKER`).
    """
    name = require_choice("name", name, ("cifar10", "cifar100"))
    py_dir, train_files, test_file, meta_file, meta_key, labels_key, bin_dir, bin_train, bin_test, names_file, \
        label_bytes, num_classes = _CIFAR[name]
    base = _existing_folder(root)
    if (base / py_dir).is_dir():
        folder = base / py_dir
        verify = _should_verify(folder, verify_checksums)
        meta = _expect_dict(pickle_as_data(_read(folder / meta_file, verify), source=str(folder / meta_file)),
                            folder / meta_file)
        classes = _class_names(meta.get(meta_key), num_classes, folder / meta_file, meta_key)
        train = [_cifar_python_batch(folder / f, labels_key, num_classes, verify) for f in train_files]
        x_train = np.concatenate([x for x, _ in train])
        y_train = np.concatenate([y for _, y in train])
        x_test, y_test = _cifar_python_batch(folder / test_file, labels_key, num_classes, verify)
        return ImageData(name, x_train, y_train, x_test, y_test, classes, py_dir, verify)
    if (base / bin_dir).is_dir():
        folder = base / bin_dir
        classes = _text_names(folder / names_file, num_classes)
        train = [_cifar_binary_file(folder / f, label_bytes, num_classes) for f in bin_train]
        x_train = np.concatenate([x for x, _ in train])
        y_train = np.concatenate([y for _, y in train])
        x_test, y_test = _cifar_binary_file(folder / bin_test, label_bytes, num_classes)
        return ImageData(name, x_train, y_train, x_test, y_test, classes, bin_dir, False)
    raise ValueError(f"{base}: no {py_dir} or {bin_dir} folder (the CIFAR layouts of docs/images.md)")


def _cifar_python_batch(path: Path, labels_key: str, num_classes: int, verify: bool) -> tuple[np.ndarray, np.ndarray]:
    entry = _expect_dict(pickle_as_data(_read(path, verify), source=str(path)), path)
    if "data" not in entry or labels_key not in entry:
        raise ValueError(f"{path}: expected the keys 'data' and {labels_key!r}, found {sorted(map(str, entry))}")
    rows = _uint8_rows(entry["data"], path)
    labels = _int_labels(entry[labels_key], rows.shape[0], num_classes, path, labels_key)
    images = rows.reshape(-1, 3, _CIFAR_SIDE, _CIFAR_SIDE).transpose(0, 2, 3, 1)
    return np.ascontiguousarray(images), labels


def _uint8_rows(value: Any, path: Path) -> np.ndarray:
    """The [N, 3072] uint8 array of a pickled ``numpy.core.multiarray._reconstruct`` (the official structure)."""
    bad = f"{path}: 'data' is not a pickled uint8 array [N, {_CIFAR_PIXELS}]"
    if not (isinstance(value, PickleCall) and value.func in _RECONSTRUCT and isinstance(value.args, tuple)
            and len(value.args) == 3 and value.args[0] == _NDARRAY and isinstance(value.state, tuple)
            and len(value.state) == 5):
        raise ValueError(bad)
    version, shape, dtype, fortran, raw = value.state
    if not (version == 1 and isinstance(shape, tuple) and len(shape) == 2 and shape[1] == _CIFAR_PIXELS
            and isinstance(shape[0], int) and shape[0] >= 0 and fortran is False):
        raise ValueError(f"{bad} (array header {version!r}, {shape!r}, fortran={fortran!r})")
    if not (isinstance(dtype, PickleCall) and dtype.func == _DTYPE and isinstance(dtype.args, tuple)
            and dtype.args[:1] == ("u1",)):
        raise ValueError(f"{bad} (dtype is not u1)")
    try:
        raw_bytes = raw.encode("latin-1") if isinstance(raw, str) else raw
    except UnicodeEncodeError:
        raise ValueError(f"{bad} (pixel block is not a byte string)") from None
    if not isinstance(raw_bytes, bytes) or len(raw_bytes) != shape[0] * _CIFAR_PIXELS:
        raise ValueError(f"{bad} (pixel block of {len(raw_bytes) if isinstance(raw_bytes, bytes) else '?'} bytes "
                         f"for shape {shape})")
    return np.frombuffer(raw_bytes, dtype=np.uint8).reshape(shape)


def _int_labels(value: Any, count: int, num_classes: int, path: Path, key: str) -> np.ndarray:
    if not isinstance(value, list) or len(value) != count or not all(type(v) is int for v in value):
        raise ValueError(f"{path}: {key!r} must be a list of {count} integers")
    labels = np.asarray(value, dtype=np.int64)
    _check_label_range(labels, num_classes, path)
    return labels


def _cifar_binary_file(path: Path, label_bytes: int, num_classes: int) -> tuple[np.ndarray, np.ndarray]:
    raw = np.frombuffer(_read(path, False), dtype=np.uint8)
    record = label_bytes + _CIFAR_PIXELS
    if raw.size == 0 or raw.size % record:
        raise ValueError(f"{path}: {raw.size} bytes is not a whole number of {record}-byte records (truncated?)")
    table = raw.reshape(-1, record)
    labels = table[:, label_bytes - 1].astype(np.int64)  # the fine label is the last label byte
    _check_label_range(labels, num_classes, path)
    images = table[:, label_bytes:].reshape(-1, 3, _CIFAR_SIDE, _CIFAR_SIDE).transpose(0, 2, 3, 1)
    return np.ascontiguousarray(images), labels


# --- STL-10 -----------------------------------------------------------------------------------------
def load_stl10(root: str | os.PathLike, *, verify_checksums: bool = True) -> ImageData:
    """STL-10's labelled splits from ``root/stl10_binary``: images [N, 96, 96, 3] uint8, labels 0..9.

    Pixel order as torchvision's ``STL10``: the file holds, per image, 3 channels of 96 x 96 stored column
    by column, so image[n, y, x, c] = file[n, c, x, y].
    """
    folder = _existing_folder(root) / "stl10_binary"
    if not folder.is_dir():
        raise ValueError(f"{folder}: no such folder (the STL-10 layout of docs/images.md)")
    verify = _should_verify(folder, verify_checksums)
    classes = _text_names(folder / "class_names.txt", 10)
    splits = [_stl_split(folder / f"{split}_X.bin", folder / f"{split}_y.bin", verify) for split in ("train", "test")]
    (x_train, y_train), (x_test, y_test) = splits
    return ImageData("stl10", x_train, y_train, x_test, y_test, classes, "stl10_binary", verify)


def _stl_split(x_path: Path, y_path: Path, verify: bool) -> tuple[np.ndarray, np.ndarray]:
    raw = np.frombuffer(_read(x_path, verify), dtype=np.uint8)
    if raw.size == 0 or raw.size % _STL_PIXELS:
        raise ValueError(f"{x_path}: {raw.size} bytes is not a whole number of {_STL_PIXELS}-byte images (truncated?)")
    images = raw.reshape(-1, 3, _STL_SIDE, _STL_SIDE).transpose(0, 3, 2, 1)
    labels = np.frombuffer(_read(y_path, verify), dtype=np.uint8).astype(np.int64)
    if labels.size != images.shape[0]:
        raise ValueError(f"{y_path}: {labels.size} labels for {images.shape[0]} images in {x_path.name}")
    if labels.size and (labels.min() < 1 or labels.max() > 10):
        raise ValueError(f"{y_path}: labels must lie in 1..10, found {labels.min()}..{labels.max()}")
    return np.ascontiguousarray(images), labels - 1


# --- ImageFolder ------------------------------------------------------------------------------------
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
    base = _existing_folder(root)
    if size is not None:
        size = require_int("size", size, min_value=1)
    max_bytes = require_int("max_bytes", max_bytes, min_value=1)
    train_dir, test_dir = base / "train", base / "test"
    for folder in (train_dir, test_dir):
        if not folder.is_dir():
            raise ValueError(f"{folder}: no such folder (ImageFolder layout: root/train/<class>/..., "
                             "root/test/<class>/...)")
    classes = tuple(sorted(entry.name for entry in os.scandir(train_dir) if entry.is_dir()))
    if not classes:
        raise ValueError(f"{train_dir}: no class folders")
    test_classes = sorted(entry.name for entry in os.scandir(test_dir) if entry.is_dir())
    unknown = [c for c in test_classes if c not in classes]
    if unknown:
        raise ValueError(f"{test_dir}: class folder(s) {', '.join(unknown)} not among the train classes")
    splits: list[tuple[np.ndarray | ImageFolderIndex, np.ndarray]] = []
    for folder, need_all in ((train_dir, True), (test_dir, False)):
        paths, labels = _folder_samples(folder, classes, need_all)
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


def _folder_samples(folder: Path, classes: tuple[str, ...], need_all: bool) -> tuple[list[Path], np.ndarray]:
    """torchvision's make_dataset: per class in sorted order, os.walk in sorted order, files by extension."""
    paths: list[Path] = []
    labels: list[int] = []
    for label, cls in enumerate(classes):
        class_dir = folder / cls
        found = 0
        if class_dir.is_dir():
            for walk_root, _, files in sorted(os.walk(class_dir, followlinks=True)):
                for fname in sorted(files):
                    if fname.lower().endswith(IMAGE_EXTENSIONS):
                        paths.append(Path(walk_root) / fname)
                        labels.append(label)
                        found += 1
        if need_all and not found:
            raise ValueError(f"{class_dir}: no image file ({', '.join(IMAGE_EXTENSIONS)})")
    return paths, np.asarray(labels, dtype=np.int64)


def _decode(path: Path, size: int | None) -> np.ndarray:
    """Pillow decode to RGB uint8 [H, W, 3] (torchvision's pil_loader), optionally resized and centre-cropped."""
    try:
        with open(path, "rb") as handle, Image.open(handle) as img:
            rgb = img.convert("RGB")
        if size is not None:
            rgb = _resize_center_crop(rgb, size)
        return np.asarray(rgb, dtype=np.uint8)
    except (OSError, ValueError, SyntaxError, Image.DecompressionBombError) as exc:
        raise ValueError(f"{path}: not a readable image ({type(exc).__name__}: {one_line(exc)})") from None


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


# --- dispatch -------------------------------------------------------------------------------------
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


# --- shared helpers -------------------------------------------------------------------------------
def _existing_folder(root: str | os.PathLike) -> Path:
    base = Path(root)
    if not base.is_dir():
        raise ValueError(f"{base}: no such folder")
    return base


def _should_verify(folder: Path, verify_checksums: bool) -> bool:
    if not isinstance(verify_checksums, bool):
        raise ValueError(f"verify_checksums must be True or False, got {verify_checksums!r}")
    return verify_checksums and not (folder / GENERATED_MARKER).exists()


def _read(path: Path, verify: bool) -> bytes:
    """The bytes of ``path``; with ``verify``, checked against the md5 of :data:`OFFICIAL_MD5`."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise ValueError(f"{path}: missing file") from None
    except OSError as exc:
        raise ValueError(f"{path}: cannot be read ({one_line(exc)})") from None
    if verify:
        expected = OFFICIAL_MD5.get(path.parent.name, {}).get(path.name)
        if expected is not None:
            got = hashlib.md5(data, usedforsecurity=False).hexdigest()
            if got != expected:
                raise ValueError(f"{path}: md5 {got} differs from the official {expected} (torchvision's list); "
                                 f"pass verify_checksums=False to read a modified copy")
    return data


def _expect_dict(value: Any, path: Path) -> dict[Any, Any]:
    if not isinstance(value, dict):
        raise ValueError(f"{path}: expected a pickled dict, found {type(value).__name__}")
    return value


def _class_names(value: Any, count: int, path: Path, key: str) -> tuple[str, ...]:
    if not isinstance(value, list) or len(value) != count or not all(isinstance(v, (str, bytes)) for v in value):
        raise ValueError(f"{path}: {key!r} must be a list of {count} class names")
    return tuple(v.decode("latin-1") if isinstance(v, bytes) else v for v in value)


def _text_names(path: Path, count: int) -> tuple[str, ...]:
    try:
        text = _read(path, False).decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"{path}: not UTF-8 text") from None
    names = tuple(line.strip() for line in text.splitlines() if line.strip())
    if len(names) != count:
        raise ValueError(f"{path}: expected {count} class names (one per line), found {len(names)}")
    return names


def _check_label_range(labels: np.ndarray, num_classes: int, path: Path) -> None:
    if labels.size and (labels.min() < 0 or labels.max() >= num_classes):
        raise ValueError(f"{path}: labels must lie in 0..{num_classes - 1}, found {labels.min()}..{labels.max()}")


# --- writers (small look-alike data sets for tests and docs) ---------------------------------------
def _synthetic_images(labels: np.ndarray, side: int, num_classes: int, rng: np.random.Generator) -> np.ndarray:
    """uint8 [N, side, side, 3]: a random class template (3/4 of the range) plus uniform noise (1/4)."""
    templates = rng.integers(0, 192, size=(num_classes, side, side, 3), dtype=np.int64)
    noise = rng.integers(0, 64, size=(labels.size, side, side, 3), dtype=np.int64)
    return (templates[labels] + noise).astype(np.uint8)


def _synthetic_labels(num_classes: int, per_class: int, rng: np.random.Generator) -> np.ndarray:
    labels = np.repeat(np.arange(num_classes, dtype=np.int64), per_class)
    return labels[rng.permutation(labels.size)]


def _check_rng(rng: Any) -> np.random.Generator:
    if not isinstance(rng, np.random.Generator):
        raise ValueError("rng must be a numpy.random.Generator")
    return rng


def _write_marker(folder: Path) -> None:
    text = "Generated by ncgeom.data.images: not the official files; md5 not checked.\n"
    atomic_write_text(folder / GENERATED_MARKER, text, durable=False)


def write_cifar_like(root: str | os.PathLike, *, name: Literal["cifar10", "cifar100"] = "cifar10",
                     layout: _Layout = "python", num_per_class: int = 2, num_test_per_class: int = 1,
                     rng: np.random.Generator) -> ImageData:
    """Write a small CIFAR-like data set in the official file structure under ``root``; return what was written.

    ``layout="python"``: the pickles of torchvision's layout, written as Python 2's cPickle wrote the
    official ones (protocol 2; the pixels a ``numpy.core.multiarray._reconstruct`` of a uint8 [N, 3072] array);
    ``layout="binary"``: the binary records. Class names ``class00``...; CIFAR-100 coarse labels = fine // 5.
    The layout folder gets :data:`GENERATED_MARKER`, so readers skip the md5 check. Images are random class
    templates plus noise (learnable, not natural images).
    """
    name = require_choice("name", name, ("cifar10", "cifar100"))
    layout = require_choice("layout", layout, ("python", "binary"))
    per = require_int("num_per_class", num_per_class, min_value=1)
    per_test = require_int("num_test_per_class", num_test_per_class, min_value=1)
    rng = _check_rng(rng)
    py_dir, train_files, test_file, meta_file, meta_key, labels_key, bin_dir, bin_train, bin_test, names_file, \
        label_bytes, num_classes = _CIFAR[name]
    classes = tuple(f"class{c:02d}" for c in range(num_classes))
    y_train = _synthetic_labels(num_classes, per, rng)
    y_test = _synthetic_labels(num_classes, per_test, rng)
    x_train = _synthetic_images(y_train, _CIFAR_SIDE, num_classes, rng)
    x_test = _synthetic_images(y_test, _CIFAR_SIDE, num_classes, rng)
    files = train_files if layout == "python" else bin_train
    parts = np.array_split(np.arange(y_train.size), len(files))
    folder = Path(root) / (py_dir if layout == "python" else bin_dir)
    for fname, (x, y) in zip((*files, test_file if layout == "python" else bin_test),
                             [(x_train[p], y_train[p]) for p in parts] + [(x_test, y_test)]):
        rows = np.ascontiguousarray(x.transpose(0, 3, 1, 2).reshape(len(y), _CIFAR_PIXELS))
        if layout == "python":
            entry: dict[str, Any] = {"batch_label": f"generated {fname}", labels_key: [int(v) for v in y], "data": rows,
                                     "filenames": [f"{fname}_{i:05d}.png" for i in range(len(y))]}
            if name == "cifar100":
                entry["coarse_labels"] = [int(v) // 5 for v in y]
            atomic_write_bytes(folder / fname, py2_pickle(entry), durable=False)
        else:
            head = y[:, None] if label_bytes == 1 else np.stack((y // 5, y), axis=1)
            atomic_write_bytes(folder / fname, np.concatenate((head.astype(np.uint8), rows), axis=1).tobytes(),
                               durable=False)
    if layout == "python":
        meta: dict[str, Any] = {meta_key: list(classes)}
        if name == "cifar10":
            meta.update(num_cases_per_batch=int(parts[0].size), num_vis=_CIFAR_PIXELS)
        else:
            meta["coarse_label_names"] = [f"superclass{c:02d}" for c in range(num_classes // 5)]
        atomic_write_bytes(folder / meta_file, py2_pickle(meta), durable=False)
    else:
        atomic_write_text(folder / names_file, "".join(f"{c}\n" for c in classes), durable=False)
        if name == "cifar100":
            atomic_write_text(folder / "coarse_label_names.txt",
                              "".join(f"superclass{c:02d}\n" for c in range(num_classes // 5)), durable=False)
    _write_marker(folder)
    return ImageData(name, x_train, y_train, x_test, y_test, classes, folder.name, False)


def write_stl10_like(root: str | os.PathLike, *, num_per_class: int = 1, num_test_per_class: int = 1,
                     rng: np.random.Generator) -> ImageData:
    """Write a small STL-10-like data set (10 classes, 96 x 96, the binary layout) under ``root``; return it."""
    per = require_int("num_per_class", num_per_class, min_value=1)
    per_test = require_int("num_test_per_class", num_test_per_class, min_value=1)
    rng = _check_rng(rng)
    folder = Path(root) / "stl10_binary"
    classes = tuple(f"class{c:02d}" for c in range(10))
    out = []
    for split, n in (("train", per), ("test", per_test)):
        y = _synthetic_labels(10, n, rng)
        x = _synthetic_images(y, _STL_SIDE, 10, rng)
        pixels = np.ascontiguousarray(x.transpose(0, 3, 2, 1)).tobytes()  # [N, C, x, y]: channels column-major
        atomic_write_bytes(folder / f"{split}_X.bin", pixels, durable=False)
        atomic_write_bytes(folder / f"{split}_y.bin", (y + 1).astype(np.uint8).tobytes(), durable=False)
        out.append((x, y))
    atomic_write_text(folder / "class_names.txt", "".join(f"{c}\n" for c in classes), durable=False)
    _write_marker(folder)
    (x_train, y_train), (x_test, y_test) = out
    return ImageData("stl10", x_train, y_train, x_test, y_test, classes, "stl10_binary", False)


def write_image_folder(root: str | os.PathLike, *, classes: int = 4, size: int = 32, num_per_class: int = 3,
                       num_test_per_class: int = 2, fmt: Literal["png", "jpg"] = "png",
                       rng: np.random.Generator) -> ImageData:
    """Write ``root/{train,test}/classNN/NNNNN.<fmt>`` images of ``size`` x ``size``; return them in reader order.

    PNG is lossless, so the returned arrays equal what :func:`load_image_folder` decodes; JPEG is lossy
    (the returned arrays are the images before compression).
    """
    c = require_int("classes", classes, min_value=1, max_value=100)
    side = require_int("size", size, min_value=1)
    per = require_int("num_per_class", num_per_class, min_value=1)
    per_test = require_int("num_test_per_class", num_test_per_class, min_value=0)
    fmt = require_choice("fmt", fmt, ("png", "jpg"))
    rng = _check_rng(rng)
    names = tuple(f"class{k:02d}" for k in range(c))
    out = []
    for split, n in (("train", per), ("test", per_test)):
        y = np.repeat(np.arange(c, dtype=np.int64), n)  # class-major, the reader's order
        x = _synthetic_images(y, side, c, rng)
        for i, (img, label) in enumerate(zip(x, y)):
            buffer = io.BytesIO()
            Image.fromarray(img, mode="RGB").save(buffer, format="PNG" if fmt == "png" else "JPEG")
            atomic_write_bytes(Path(root) / split / names[label] / f"{i:05d}.{fmt}", buffer.getvalue(), durable=False)
        (Path(root) / split).mkdir(parents=True, exist_ok=True)
        out.append((x, y))
    (x_train, y_train), (x_test, y_test) = out
    return ImageData("imagefolder", x_train, y_train, x_test, y_test, names, "imagefolder", False)
