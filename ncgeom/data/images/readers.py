"""CIFAR-10/100 and STL-10 read from their official file layouts (docs/images.md).

Layouts accepted, under a folder ``root``:

- CIFAR-10: ``root/cifar-10-batches-py/{data_batch_1..5, test_batch, batches.meta}`` (torchvision's layout,
  the "python version" of the official archive) or ``root/cifar-10-batches-bin/{data_batch_1..5.bin,
  test_batch.bin, batches.meta.txt}`` (the official binary version: records of 1 label byte + 3072 pixels).
- CIFAR-100: ``root/cifar-100-python/{train, test, meta}`` or ``root/cifar-100-binary/{train.bin, test.bin,
  fine_label_names.txt}`` (records of a coarse and a fine label byte + 3072 pixels); the fine labels are used.
- STL-10: ``root/stl10_binary/{train_X.bin, train_y.bin, test_X.bin, test_y.bin, class_names.txt}``: images
  stored channel by channel, each 96 x 96 channel column-major; labels 1..10 (returned as 0..9). The
  unlabeled split and the fold indices are not read.

Every reader returns an :class:`~ncgeom.data.images.record.ImageData`: uint8 images [N, H, W, 3], int64
labels [N] in {0..C-1}, the class names.

The CIFAR "python" files are pickles. ncgeom never unpickles a file:
:func:`ncgeom.data.images.inert_pickle.pickle_as_data` walks the opcode stream with :func:`pickletools.genops`
and builds plain containers (dict, list, tuple, str, bytes, int), recording a reference to a global or a
call as an inert record that is never imported or called; the reader then accepts exactly the structure of
the official files (a dict whose ``data`` is a ``numpy.core.multiarray._reconstruct`` of a uint8 [N, 3072]
array and whose ``labels`` or ``fine_labels`` is a list of ints) and refuses anything else with a ValueError
naming the file.

Checksums: the md5 of each official file as torchvision lists it (:data:`OFFICIAL_MD5`) is checked when the
folder claims to be official, that is unless ``verify_checksums=False`` is passed or the layout folder holds
the marker file :data:`GENERATED_MARKER` (which the look-alike writers of :mod:`ncgeom.testing.images`
create). torchvision lists no md5 for the binary CIFAR layouts; those are checked for exact record sizes and
label ranges only.

Errors (missing folder or file, wrong layout, truncated file, md5 mismatch, a file that is not a regular
file, a layout above the memory budget) are ValueError with a one-line message that names the file; the
CLI maps them to exit code 2.

Memory: a reader holds the whole split in memory as uint8: CIFAR-10/100 train 50000 x 3072 B = 153.6 MB
(test 30.7 MB), STL-10 train 5000 x 27648 B = 138.2 MB (test 221.2 MB); while a CIFAR python file is parsed
its pixel block is held about four times (file bytes, genops' string, the encoded bytes, the array), 124 MB
for a CIFAR-10 batch, 620 MB for the CIFAR-100 train file. Before any file is read, every file of the
layout is checked to be a regular file (:func:`ncgeom.files.regular_file_size`: no FIFO, device or link to
one) and 2 x their bytes + 4 x the largest (2 x for binary records) is checked against the memory budget;
each file is then read at exactly its checked size (:func:`ncgeom.files.read_bounded`).

Why not torchvision: with the pinned CPU torch (2.13.0+cpu), PyPI's torchvision wheel is a CUDA build whose
``_C`` extension does not load, and ``import torchvision`` raises "operator torchvision::nms does not exist".
These readers follow torchvision's semantics (file lists, md5 lists, class order, pixel order) without it.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any, Literal, NamedTuple

import numpy as np

from ncgeom import budget
from ncgeom.data.images.inert_pickle import PickleCall, PickleGlobal, pickle_as_data, short_repr
from ncgeom.data.images.record import ImageData, existing_folder
from ncgeom.files import read_bounded, regular_file_size
from ncgeom.validate import require_choice

__all__ = [
    "OFFICIAL_MD5",
    "GENERATED_MARKER",
    "CIFAR_SIDE",
    "STL_SIDE",
    "CifarLayout",
    "CIFAR_LAYOUTS",
    "MAX_NAMES_BYTES",
    "load_cifar",
    "load_stl10",
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

CIFAR_SIDE = 32
_CIFAR_PIXELS = 3 * CIFAR_SIDE * CIFAR_SIDE  # 3072, channel-major rows (R plane, G plane, B plane)
STL_SIDE = 96
_STL_PIXELS = 3 * STL_SIDE * STL_SIDE  # 27648


class CifarLayout(NamedTuple):
    """The files of one CIFAR data set in its two official layouts (python pickles and binary records)."""

    python_folder: str
    train_files: tuple[str, ...]
    test_file: str
    meta_file: str
    meta_key: str  # the class names in the meta pickle
    labels_key: str  # the labels in each batch pickle
    binary_folder: str
    binary_train_files: tuple[str, ...]
    binary_test_file: str
    names_file: str  # the class names, one per line
    label_bytes: int  # label bytes before the pixels of a binary record (the last one is read)
    num_classes: int


CIFAR_LAYOUTS: dict[str, CifarLayout] = {
    "cifar10": CifarLayout("cifar-10-batches-py", tuple(f"data_batch_{i}" for i in range(1, 6)), "test_batch",
                           "batches.meta", "label_names", "labels", "cifar-10-batches-bin",
                           tuple(f"data_batch_{i}.bin" for i in range(1, 6)), "test_batch.bin", "batches.meta.txt",
                           1, 10),
    "cifar100": CifarLayout("cifar-100-python", ("train",), "test", "meta", "fine_label_names", "fine_labels",
                            "cifar-100-binary", ("train.bin",), "test.bin", "fine_label_names.txt", 2, 100),
}
#: Largest class names file read (batches.meta.txt, fine_label_names.txt, class_names.txt: about 1 KB).
MAX_NAMES_BYTES = 2**20
# The peak memory of reading a layout, in multiples of its files' bytes: the arrays of every file and the
# train split concatenated (2 x all files), plus the file being parsed: a pickle holds its pixel block about
# four times (file bytes, genops' string, the encoded bytes, the image array), a binary file twice.
_PARSE_COPIES = {"pickle": 4, "binary": 2}
_RECONSTRUCT = {PickleGlobal(module, "_reconstruct") for module in ("numpy.core.multiarray", "numpy._core.multiarray")}
_NDARRAY = PickleGlobal("numpy", "ndarray")
_DTYPE = PickleGlobal("numpy", "dtype")


# --- CIFAR ------------------------------------------------------------------------------------------
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
    layout = CIFAR_LAYOUTS[name]
    base = existing_folder(root)
    if (base / layout.python_folder).is_dir():
        folder = base / layout.python_folder
        verify = _should_verify(folder, verify_checksums)
        sizes = _layout_sizes(folder, (layout.meta_file, *layout.train_files, layout.test_file), "pickle")
        meta_path = folder / layout.meta_file
        meta = _expect_dict(pickle_as_data(_read(meta_path, sizes, verify), source=str(meta_path)), meta_path)
        classes = _class_names(meta.get(layout.meta_key), layout.num_classes, meta_path, layout.meta_key)
        train = [_cifar_python_batch(folder / f, sizes, layout.labels_key, layout.num_classes, verify)
                 for f in layout.train_files]
        x_train = np.concatenate([x for x, _ in train])
        y_train = np.concatenate([y for _, y in train])
        x_test, y_test = _cifar_python_batch(folder / layout.test_file, sizes, layout.labels_key, layout.num_classes,
                                             verify)
        return ImageData(name, x_train, y_train, x_test, y_test, classes, layout.python_folder, verify)
    if (base / layout.binary_folder).is_dir():
        folder = base / layout.binary_folder
        sizes = _layout_sizes(folder, (layout.names_file, *layout.binary_train_files, layout.binary_test_file),
                              "binary")
        classes = _text_names(folder / layout.names_file, sizes, layout.num_classes)
        train = [_cifar_binary_file(folder / f, sizes, layout.label_bytes, layout.num_classes)
                 for f in layout.binary_train_files]
        x_train = np.concatenate([x for x, _ in train])
        y_train = np.concatenate([y for _, y in train])
        x_test, y_test = _cifar_binary_file(folder / layout.binary_test_file, sizes, layout.label_bytes,
                                            layout.num_classes)
        return ImageData(name, x_train, y_train, x_test, y_test, classes, layout.binary_folder, False)
    raise ValueError(f"{base}: no {layout.python_folder} or {layout.binary_folder} folder (the CIFAR layouts of "
                     "docs/images.md)")


def _cifar_python_batch(path: Path, sizes: dict[Path, int], labels_key: str, num_classes: int,
                        verify: bool) -> tuple[np.ndarray, np.ndarray]:
    entry = _expect_dict(pickle_as_data(_read(path, sizes, verify), source=str(path)), path)
    if "data" not in entry or labels_key not in entry:
        raise ValueError(f"{path}: expected the keys 'data' and {labels_key!r}, found "
                         f"{short_repr(sorted(entry, key=short_repr))}")
    rows = _uint8_rows(entry["data"], path)
    labels = _int_labels(entry[labels_key], rows.shape[0], num_classes, path, labels_key)
    images = rows.reshape(-1, 3, CIFAR_SIDE, CIFAR_SIDE).transpose(0, 2, 3, 1)
    return np.ascontiguousarray(images), labels


def _uint8_rows(value: Any, path: Path) -> np.ndarray:
    """The [N, 3072] uint8 array of a pickled ``numpy.core.multiarray._reconstruct`` (the official structure)."""
    bad = f"{path}: 'data' is not a pickled uint8 array [N, {_CIFAR_PIXELS}]"
    if not (isinstance(value, PickleCall) and isinstance(value.func, PickleGlobal) and value.func in _RECONSTRUCT
            and isinstance(value.args, tuple)
            and len(value.args) == 3 and value.args[0] == _NDARRAY and isinstance(value.state, tuple)
            and len(value.state) == 5):
        raise ValueError(bad)
    version, shape, dtype, fortran, raw = value.state
    if not (version == 1 and isinstance(shape, tuple) and len(shape) == 2 and shape[1] == _CIFAR_PIXELS
            and isinstance(shape[0], int) and shape[0] >= 0 and fortran is False):
        raise ValueError(f"{bad} (array header {short_repr(version)}, {short_repr(shape)}, "
                         f"fortran={short_repr(fortran)})")
    if not (isinstance(dtype, PickleCall) and dtype.func == _DTYPE and isinstance(dtype.args, tuple)
            and dtype.args[:1] == ("u1",)):
        raise ValueError(f"{bad} (dtype is not u1)")
    try:
        raw_bytes = raw.encode("latin-1") if isinstance(raw, str) else raw
    except UnicodeEncodeError:
        raise ValueError(f"{bad} (pixel block is not a byte string)") from None
    if not isinstance(raw_bytes, bytes) or len(raw_bytes) != shape[0] * _CIFAR_PIXELS:
        raise ValueError(f"{bad} (pixel block of {len(raw_bytes) if isinstance(raw_bytes, bytes) else '?'} bytes "
                         f"for shape {short_repr(shape)})")
    return np.frombuffer(raw_bytes, dtype=np.uint8).reshape(shape)


def _int_labels(value: Any, count: int, num_classes: int, path: Path, key: str) -> np.ndarray:
    if not isinstance(value, list) or len(value) != count or not all(type(v) is int for v in value):
        raise ValueError(f"{path}: {key!r} must be a list of {count} integers")
    if value and (min(value) < 0 or max(value) >= num_classes):  # before numpy: a Python int may pass int64
        raise ValueError(f"{path}: labels must lie in 0..{num_classes - 1}, found {short_repr(min(value))}.."
                         f"{short_repr(max(value))}")
    return np.asarray(value, dtype=np.int64)


def _cifar_binary_file(path: Path, sizes: dict[Path, int], label_bytes: int,
                       num_classes: int) -> tuple[np.ndarray, np.ndarray]:
    raw = np.frombuffer(_read(path, sizes, False), dtype=np.uint8)
    record = label_bytes + _CIFAR_PIXELS
    if raw.size == 0 or raw.size % record:
        raise ValueError(f"{path}: {raw.size} bytes is not a whole number of {record}-byte records (truncated?)")
    table = raw.reshape(-1, record)
    labels = table[:, label_bytes - 1].astype(np.int64)  # the fine label is the last label byte
    _check_label_range(labels, num_classes, path)
    images = table[:, label_bytes:].reshape(-1, 3, CIFAR_SIDE, CIFAR_SIDE).transpose(0, 2, 3, 1)
    return np.ascontiguousarray(images), labels


# --- STL-10 -----------------------------------------------------------------------------------------
def load_stl10(root: str | os.PathLike, *, verify_checksums: bool = True) -> ImageData:
    """STL-10's labelled splits from ``root/stl10_binary``: images [N, 96, 96, 3] uint8, labels 0..9.

    Pixel order as torchvision's ``STL10``: the file holds, per image, 3 channels of 96 x 96 stored column
    by column, so image[n, y, x, c] = file[n, c, x, y].
    """
    folder = existing_folder(root) / "stl10_binary"
    if not folder.is_dir():
        raise ValueError(f"{folder}: no such folder (the STL-10 layout of docs/images.md)")
    verify = _should_verify(folder, verify_checksums)
    files = ("class_names.txt", *(f"{split}_{part}.bin" for split in ("train", "test") for part in ("X", "y")))
    sizes = _layout_sizes(folder, files, "binary")
    classes = _text_names(folder / "class_names.txt", sizes, 10)
    splits = [_stl_split(folder / f"{split}_X.bin", folder / f"{split}_y.bin", sizes, verify)
              for split in ("train", "test")]
    (x_train, y_train), (x_test, y_test) = splits
    return ImageData("stl10", x_train, y_train, x_test, y_test, classes, "stl10_binary", verify)


def _stl_split(x_path: Path, y_path: Path, sizes: dict[Path, int], verify: bool) -> tuple[np.ndarray, np.ndarray]:
    raw = np.frombuffer(_read(x_path, sizes, verify), dtype=np.uint8)
    if raw.size == 0 or raw.size % _STL_PIXELS:
        raise ValueError(f"{x_path}: {raw.size} bytes is not a whole number of {_STL_PIXELS}-byte images (truncated?)")
    images = raw.reshape(-1, 3, STL_SIDE, STL_SIDE).transpose(0, 3, 2, 1)
    labels = np.frombuffer(_read(y_path, sizes, verify), dtype=np.uint8).astype(np.int64)
    if labels.size != images.shape[0]:
        raise ValueError(f"{y_path}: {labels.size} labels for {images.shape[0]} images in {x_path.name}")
    if labels.size and (labels.min() < 1 or labels.max() > 10):
        raise ValueError(f"{y_path}: labels must lie in 1..10, found {labels.min()}..{labels.max()}")
    return np.ascontiguousarray(images), labels - 1


# --- shared helpers -------------------------------------------------------------------------------
def _should_verify(folder: Path, verify_checksums: bool) -> bool:
    if not isinstance(verify_checksums, bool):
        raise ValueError(f"verify_checksums must be True or False, got {verify_checksums!r}")
    return verify_checksums and not (folder / GENERATED_MARKER).exists()


def _layout_sizes(folder: Path, files: tuple[str, ...], kind: str) -> dict[Path, int]:
    """{path: size} of the files of a layout, checked before any is read: each a regular file (no FIFO,
    device or link to one: :func:`ncgeom.files.regular_file_size`), and together within the memory budget
    (2 x their bytes + :data:`_PARSE_COPIES` x the largest; ValueError naming the largest file)."""
    sizes = {folder / f: regular_file_size(folder / f) for f in files}
    largest = max(sizes, key=lambda path: sizes[path])
    total = sum(sizes.values())
    copies = _PARSE_COPIES[kind]
    budget.require_file_within_budget(
        largest, 2 * total + copies * sizes[largest],
        what=f"reading the {len(sizes)} files of {folder.name} ({budget.format_bytes(total)} in all, this one "
             f"{budget.format_bytes(sizes[largest])}; 2 x the files + {copies} x the largest while it is parsed)")
    return sizes


def _read(path: Path, sizes: dict[Path, int], verify: bool) -> bytes:
    """The bytes of ``path`` (no more than its size in ``sizes``); with ``verify``, checked against the md5 of
    :data:`OFFICIAL_MD5`."""
    data = read_bounded(path, what=f"a file of {path.parent.name}", max_bytes=sizes[path])
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


def _text_names(path: Path, sizes: dict[Path, int], count: int) -> tuple[str, ...]:
    if sizes[path] > MAX_NAMES_BYTES:
        raise ValueError(f"{path}: {budget.format_bytes(sizes[path])}, above the {budget.format_bytes(MAX_NAMES_BYTES)} "
                         f"accepted for a class names file ({count} names, one per line)")
    try:
        text = _read(path, sizes, False).decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"{path}: not UTF-8 text") from None
    names = tuple(line.strip() for line in text.splitlines() if line.strip())
    if len(names) != count:
        raise ValueError(f"{path}: expected {count} class names (one per line), found {len(names)}")
    return names


def _check_label_range(labels: np.ndarray, num_classes: int, path: Path) -> None:
    if labels.size and (labels.min() < 0 or labels.max() >= num_classes):
        raise ValueError(f"{path}: labels must lie in 0..{num_classes - 1}, found {labels.min()}..{labels.max()}")


