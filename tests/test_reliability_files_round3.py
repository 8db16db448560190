"""Reliability round 3 (issue 27, items 2, 4 and the file parts of 9): hostile files, fast cases.

Every surface that reads a user's file gets its own corpus (docs/reliability.md, "Round 3: hostile files"):

- data set files (CIFAR python and binary, CIFAR-100, STL-10): each file of each layout replaced by a FIFO,
  a character device, a directory, a socket, a symbolic link loop, a self link, a broken link, a file that
  grows while read, a sparse file above the budget (:data:`FILE_KINDS`);
- malformed CIFAR pickles: truncations, byte flips, random opcode streams, hand-made structures (huge
  ints, unhashable calls, deep nesting, many keys, more opcodes than allowed);
- ImageFolder trees: symbolic link loops, links into another class, out of the tree, into the other split,
  shared class folders, FIFOs and devices named like images, broken links, duplicates;
- image decoding: decompression bombs, images above the budget, corrupt and mutated files of every
  format, warnings on success;
- embeddings and labels files of ``ncgeom metrics``: the file kinds above for each format, endless CSV
  lines, malformed ``.pt`` files (no torch warning may be printed);
- checkpoints (``ncgeom train --resume``): malformed ``.pt`` files through ``load_checkpoint``.

A case is clean when the outcome is a ValueError (or, through the CLI, exit code 2) with ONE line that
names the file, no traceback, no warning printed, within seconds. Waits are bounded by SIGALRM, so a
regression fails instead of hanging. The heavy cases (sparse multi-GiB files, /dev/zero, FIFOs through the
CLI in a subprocess under ``--max-memory``) are in ``test_reliability_files_round3_slow.py``.
"""

from __future__ import annotations

import io
import logging
import os
import pickle
import re
import signal
import socket
import struct
import warnings
import zipfile
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import run_main
from PIL import Image

from ncgeom import budget
from ncgeom.data.images import load_image_data, load_image_folder
from ncgeom.data.images.inert_pickle import MAX_PICKLE_OPS, pickle_as_data, py2_pickle
from ncgeom.files import load_torch, open_regular, read_bounded, regular_file_size
from ncgeom.testing.images import write_cifar_like, write_stl10_like

MAX_MESSAGE = 600  # characters: one line, readable


@contextmanager
def deadline(seconds: int = 20) -> Iterator[None]:
    """Fail with TimeoutError instead of hanging (a blocking open or read is interrupted by the signal)."""
    def expired(signum, frame):
        raise TimeoutError(f"no outcome within {seconds} s: the read hangs")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def assert_clean(call: Callable[[], object], *names: str | os.PathLike) -> str:
    """``call`` raises a one-line ValueError naming each of ``names``, emits no warning, within the deadline."""
    with deadline(), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(ValueError) as info:
            call()
    message = str(info.value)
    assert "\n" not in message and len(message) <= MAX_MESSAGE, message[:2000]
    for name in names:
        assert str(name) in message, (name, message)
    assert not caught, [str(w.message) for w in caught]
    return message


# ----------------------------------------------------------------------------------------------- file kinds
def _fifo(path: Path) -> None:
    os.mkfifo(path)


def _socket(path: Path) -> None:
    cwd = os.getcwd()
    os.chdir(path.parent)  # AF_UNIX paths are limited to 108 bytes: bind the short relative name
    try:
        sock = socket.socket(socket.AF_UNIX)
        sock.bind(path.name)
        sock.close()
    finally:
        os.chdir(cwd)


def _loop(path: Path) -> None:
    other = path.with_name(path.name + ".other")
    os.symlink(other.name, path)
    os.symlink(path.name, other)


def _sparse(path: Path) -> None:
    with open(path, "wb") as fh:
        fh.truncate(64 * 2**20)  # 64 MiB of holes, against a budget of 8 MiB


#: what replaces a user's file, and what the message must say
FILE_KINDS: dict[str, tuple[Callable[[Path], None], str]] = {
    "FIFO": (_fifo, "is a FIFO"),
    "character device (link to /dev/null)": (lambda p: os.symlink("/dev/null", p), "a character device"),
    "directory": (lambda p: p.mkdir(), "is a directory"),
    "socket": (_socket, "is a socket"),
    "symbolic link loop": (_loop, "symbolic link loop"),
    "self link": (lambda p: os.symlink(p.name, p), "symbolic link loop"),
    "broken link": (lambda p: os.symlink("nowhere", p), "no such file"),
    "grows while read (link to /proc/self/status)": (lambda p: os.symlink("/proc/self/status", p), "grew"),
    "sparse 64 MiB above an 8 MiB budget": (_sparse, "memory budget of 8 MiB"),
}


def _replace(path: Path, kind: str) -> str:
    path.unlink()
    make, fragment = FILE_KINDS[kind]
    make(path)
    return fragment


#: the kinds every reader refuses when it opens the file (the others depend on what the format reads first)
OPEN_KINDS = ("FIFO", "character device (link to /dev/null)", "directory", "socket", "symbolic link loop", "self link",
              "broken link")


@pytest.fixture
def small_budget(monkeypatch):
    """8 MiB: the generated data sets fit (CIFAR-100 python needs 2.4 MB), a 64 MiB sparse file does not."""
    monkeypatch.setenv(budget.ENV_VAR, "8M")


# ---------------------------------------------------------------------------------- surface 1: data set files
def _layouts() -> dict[str, tuple[Callable[[Path], None], str, str, tuple[str, ...]]]:
    rng = np.random.default_rng
    return {
        "cifar10 python": (lambda r: write_cifar_like(r, rng=rng(0), num_per_class=1), "cifar10", "cifar-10-batches-py",
                           ("batches.meta", *(f"data_batch_{i}" for i in range(1, 6)), "test_batch")),
        "cifar10 binary": (lambda r: write_cifar_like(r, layout="binary", rng=rng(0), num_per_class=1), "cifar10",
                           "cifar-10-batches-bin",
                           ("batches.meta.txt", *(f"data_batch_{i}.bin" for i in range(1, 6)), "test_batch.bin")),
        "cifar100 python": (lambda r: write_cifar_like(r, name="cifar100", rng=rng(0), num_per_class=1), "cifar100",
                            "cifar-100-python", ("meta", "train", "test")),
        "cifar100 binary": (lambda r: write_cifar_like(r, name="cifar100", layout="binary", rng=rng(0), num_per_class=1),
                            "cifar100", "cifar-100-binary", ("fine_label_names.txt", "train.bin", "test.bin")),
        "stl10": (lambda r: write_stl10_like(r, rng=rng(0)), "stl10", "stl10_binary",
                  ("class_names.txt", "train_X.bin", "train_y.bin", "test_X.bin", "test_y.bin")),
    }


DATASET_CASES = [(layout, file, kind) for layout, (_, _, _, files) in _layouts().items() for file in files
                 for kind in FILE_KINDS]


@pytest.mark.parametrize("layout, file, kind", DATASET_CASES)
def test_dataset_file_kinds(tmp_path, small_budget, layout, file, kind):
    write, name, folder, _ = _layouts()[layout]
    write(tmp_path)
    path = tmp_path / folder / file
    fragment = _replace(path, kind)
    message = assert_clean(lambda: load_image_data(name, tmp_path), path)
    assert fragment in message, message


def test_dataset_budget_counts_every_file_and_the_parse(tmp_path, monkeypatch):
    """The layout's files are measured before any is read: 2 x their bytes + 4 x the largest (a pickle)."""
    write_cifar_like(tmp_path, rng=np.random.default_rng(0), num_per_class=4)
    folder = tmp_path / "cifar-10-batches-py"
    sizes = {p.name: p.stat().st_size for p in folder.iterdir() if p.name != "NCGEOM_GENERATED"}
    need = 2 * sum(sizes.values()) + 4 * max(sizes.values())
    monkeypatch.setenv(budget.ENV_VAR, str(need))
    assert load_image_data("cifar10", tmp_path).num_train == 40
    monkeypatch.setenv(budget.ENV_VAR, str(need - 1))
    largest = max(sizes, key=lambda n: sizes[n])
    message = assert_clean(lambda: load_image_data("cifar10", tmp_path), folder / largest)
    assert "reading the 7 files of cifar-10-batches-py" in message and "above the memory budget" in message


# ------------------------------------------------------------------------------ surface 2: malformed pickles
_G = b"cnumpy.core.multiarray\n_reconstruct\n"
_ARRAY_HEAD = b"\x80\x02}(U\x04data" + _G + b"cnumpy\nndarray\nK\x00\x85U\x01b\x87R("


def _handmade() -> dict[str, bytes]:
    zeros = np.zeros((1, 3072), np.uint8)
    deep = b"]" * 100_000 + b"a" * 99_999
    return {
        "label beyond int64": pickle.dumps({"data": zeros, "labels": [2**70]}, protocol=4),
        "label below int64": pickle.dumps({"data": zeros, "labels": [-(2**70)]}, protocol=4),
        "label of 100000 digits": pickle.dumps({"data": zeros, "labels": [10**100_000]}, protocol=4),
        "call of a list (unhashable)": b"\x80\x02}(U\x04data]" + b")R" + b"U\x06labels]K\x00au.",
        "call of a call (unhashable)": b"\x80\x02}(U\x04data" + _G + b")R)RU\x06labels]K\x00au.",
        "array header nested 100000 deep": _ARRAY_HEAD + deep + b"K\x01M\x00\x0c\x86N\x89U\x00tbU\x06labels]u.",
        "array header of 10^6 items": _ARRAY_HEAD + b"](" + b"K\x01" * 10**6
        + b"eK\x01M\x00\x0c\x86N\x89U\x00tbU\x06labels]u.",
        "rows of 157827 digits": _ARRAY_HEAD + b"K\x01\x8b" + (65536).to_bytes(4, "little") + b"\x01" * 65536
        + b"M\x00\x0c\x86cnumpy\ndtype\nU\x02u1K\x00K\x01\x87R\x89U\x00tbU\x06labels]u.",
        "10^4 keys": b"\x80\x02}(" + b"".join(b"X\x05\x00\x00\x00k%04d" % i + b"N" for i in range(10_000)) + b"u.",
        "more opcodes than allowed": b"\x80\x02]" + b"N" * (MAX_PICKLE_OPS + 1) + b".",
        "BINSTRING of 2^31 bytes declared": b"\x80\x02T\xff\xff\xff\x7f" + b"a" * 10,
        "LONG4 of 2^31 bytes declared": b"\x80\x02\x8b\xff\xff\xff\x7f" + b"a" * 10,
        "BINUNICODE8 of 2^62 bytes declared": b"\x80\x04\x8d" + (2**62).to_bytes(8, "little") + b"x.",
        "FRAME of 2^62 bytes declared": b"\x80\x04\x95" + (2**62).to_bytes(8, "little") + b"N.",
        "dict key a tuple": b"\x80\x02}(K\x01K\x02\x86K\x03u.",
        "SETITEM on a list": b"\x80\x02]K\x01K\x02s.",
        "BUILD on a global": b"\x80\x02cos\nsystem\nK\x01b.",
        "STACK_GLOBAL of ints": b"\x80\x04K\x01K\x02\x93.",
        "memo key 2^32 - 1": b"\x80\x02Nr\xff\xff\xff\xff.",
        "GET before PUT": b"\x80\x02h\x05.",
        "POP_MARK without MARK": b"\x80\x021.",
        "empty": b"",
        "text": b"hello world",
        "2 rows of pixels, 1 label": py2_pickle({"data": np.zeros((2, 3072), np.uint8), "labels": [0]}),
        "object opcodes (NEWOBJ)": pickle.dumps(np.random.default_rng(0), protocol=2),
    }


def _soup(count: int, seed: int) -> list[bytes]:
    """Random opcode streams built from the opcodes the reader evaluates (and a few it refuses)."""
    ops = [b"N", b"\x88", b"\x89", b"}", b"]", b")", b"(", b"t", b"l", b"d", b"a", b"e", b"s", b"u", b"\x85", b"\x86",
           b"\x87", b"K\x01", b"M\x01\x00", b"J\xff\xff\xff\xff", b"U\x01a", b"X\x01\x00\x00\x00a", b"C\x01a", b"q\x00",
           b"h\x00", b"R", b"b", b"cnumpy\nndarray\n", _G, b"cnumpy\ndtype\n", b"\x8a\x09" + b"\xff" * 9,
           b"G\x7f\xf0\x00\x00\x00\x00\x00\x00", b"0", b"2", b"\x94", b"U\x04data", b"U\x06labels", b"\x81", b"o"]
    rng = np.random.default_rng(seed)
    return [b"\x80\x02" + b"".join(ops[i] for i in rng.integers(0, len(ops), int(rng.integers(1, 40)))) + b"."
            for _ in range(count)]


def _pickle_corpus(good: bytes) -> dict[str, bytes]:
    corpus = {f"truncated at {cut}": good[:cut] for cut in range(0, len(good), max(1, len(good) // 40))}
    rng = np.random.default_rng(1)
    for k in range(100):  # flips in the structure (the first 400 bytes), where they change the meaning
        blob = bytearray(good)
        for i in rng.integers(0, 400, 3):
            blob[int(i)] = int(rng.integers(0, 256))
        corpus[f"3 bytes flipped ({k})"] = bytes(blob)
    corpus.update({f"opcode soup ({k})": blob for k, blob in enumerate(_soup(300, 5))})
    corpus.update(_handmade())
    return corpus


def test_malformed_cifar_pickles(tmp_path):
    write_cifar_like(tmp_path, rng=np.random.default_rng(0), num_per_class=1)
    path = tmp_path / "cifar-10-batches-py" / "test_batch"
    corpus = _pickle_corpus(path.read_bytes())
    assert len(corpus) >= 400
    outcomes = {"refused": 0, "read": 0}
    for name, blob in corpus.items():
        path.write_bytes(blob)
        with deadline(60), warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                data = load_image_data("cifar10", tmp_path)
            except ValueError as exc:
                message = str(exc)
                assert "\n" not in message and len(message) <= MAX_MESSAGE and str(path) in message, (name, message)
                outcomes["refused"] += 1
            except BaseException as exc:  # anything else escapes as an internal error: the defect this test finds
                pytest.fail(f"{name}: {type(exc).__name__}: {str(exc)[:200]}")
            else:  # a flip inside a pixel or label byte of a valid stream: still the official structure
                assert data.x_test.dtype == np.uint8 and data.y_test.max() < 10, name
                outcomes["read"] += 1
        assert not caught, name
    assert outcomes["refused"] >= 300, outcomes


def test_short_repr_never_raises_and_stays_short():
    from ncgeom.data.images.inert_pickle import PickleCall, PickleGlobal, short_repr

    deep: list = []
    for _ in range(100_000):
        deep = [deep]
    call = PickleCall(PickleGlobal("a", "b"), ())
    for _ in range(10_000):
        call = PickleCall(call, (call,))
    for value in (deep, call, 10**100_000, -(2**70), b"x" * 10**7, "y" * 10**7, list(range(10**6)), {i: i for i in range(10**4)}):
        text = short_repr(value)
        assert len(text) <= 120 and "\n" not in text
    assert short_repr(PickleGlobal("numpy", "dtype")) == "numpy.dtype"
    assert short_repr([1, 2]) == "[1, 2]"


def test_pickle_op_limit_is_exact():
    blob = b"\x80\x02](" + b"N" * (MAX_PICKLE_OPS - 5) + b"e."  # PROTO, EMPTY_LIST, MARK, ..., APPENDS, STOP
    assert len(pickle_as_data(blob)) == MAX_PICKLE_OPS - 5
    with pytest.raises(ValueError, match=f"more than {MAX_PICKLE_OPS - 1} opcodes"):
        pickle_as_data(blob, max_ops=MAX_PICKLE_OPS - 1)


# -------------------------------------------------------------------------------- surface 3: ImageFolder walk
def _png(path: Path, value: int = 0, size: tuple[int, int] = (4, 4)) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", size, (value, 0, 0)).save(path, format="PNG")
    return path


def _tree(root: Path) -> Path:
    """root/train/{a,b}/ with 4 images each, root/test/{a,b}/ with 1 each."""
    for split, count in (("train", 4), ("test", 1)):
        for c, cls in enumerate("ab"):
            for i in range(count):
                _png(root / split / cls / f"{i}.png", 10 * c + i)
    return root


WALK_REFUSALS: dict[str, tuple[Callable[[Path], Path], str]] = {
    # name: (make the hostile entry under a _tree, return the path the message must name; fragment)
    "loop to the class folder": (lambda r: _link(r / "train/a/loop", "."), "a loop"),
    "loop to the split folder": (lambda r: _link(r / "train/a/sub/up", "../.."), "outside its class folder"),
    "two loops": (lambda r: (_link(r / "train/a/x", "."), _link(r / "train/a/y", "."))[0], "a loop"),
    "nested loop": (lambda r: _link(r / "train/a/s1/s2/back", "../.."), "a loop"),
    "link chain loop": (lambda r: (_link(r / "train/a/p", "q"), _link(r / "train/a/q", "p"))[0],
                        "symbolic link loop"),
    "self link named like an image": (lambda r: _link(r / "train/a/me.png", "me.png"), "symbolic link loop"),
    "link into another class": (lambda r: _link(r / "train/a/other", "../b"), "outside its class folder"),
    "image link into another class": (lambda r: _link(r / "train/a/b0.png", "../b/0.png"),
                                      "outside its class folder"),
    "link out of the tree": (lambda r: _link(r / "train/a/out", str(_png(r.parent / "outside" / "x.png").parent)),
                             "outside its class folder"),
    "class folder out of the tree": (lambda r: _link(r / "train/c", str(_png(r.parent / "elsewhere" / "c" / "x.png")
                                                                          .parent)), "outside its split folder"),
    "test class linked to the train class": (lambda r: _relink(r / "test/a", "../train/a"), "outside its split folder"),
    "split folder out of the tree": (lambda r: _relink(r / "test", str(_tree(r.parent / "other")) + "/test"),
                                     "outside the data root"),
    "test split linked to train": (lambda r: _relink(r / "test", "train"), "the same folder as the split folder"),
    "two classes, one folder": (lambda r: _link(r / "train/c", "a"), "the same folder as the class folder"),
    "class folder inside another": (lambda r: _link(r / "train/c", str(_mkdir(r / "train/a/sub"))),
                                    "inside the class folder"),
    "FIFO named like an image": (lambda r: _mkfifo(r / "train/a/pipe.png"), "is a FIFO"),
    "device named like an image": (lambda r: _link(r / "train/a/zero.png", "/dev/null"), "a character device"),
    "broken link named like an image": (lambda r: _link(r / "train/a/gone.png", "nowhere.png"), "No such file"),
    "hard link across classes": (lambda r: _hardlink(r / "train/b/0.png", r / "train/a/z.png"),
                                 "the same file as"),
}


def _link(path: Path, target: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    os.symlink(target, path)
    return path


def _relink(path: Path, target: str) -> Path:
    for child in sorted(path.rglob("*"), reverse=True):
        child.unlink() if not child.is_dir() or child.is_symlink() else child.rmdir()
    path.rmdir()
    return _link(path, target)


def _mkdir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path


def _mkfifo(path: Path) -> Path:
    os.mkfifo(path)
    return path


def _hardlink(source: Path, path: Path) -> Path:
    os.link(source, path)
    return path


@pytest.mark.parametrize("case", list(WALK_REFUSALS))
@pytest.mark.parametrize("lazy", [True, False])
def test_image_folder_walk_refusals(tmp_path, case, lazy):
    root = _tree(tmp_path / "root")
    make, fragment = WALK_REFUSALS[case]
    named = make(root)
    message = assert_clean(lambda: load_image_folder(root, lazy=lazy), named)
    assert fragment in message, message


def test_image_folder_duplicates_are_counted_once(tmp_path):
    """Links that stay in their class folder (not loops) and hard links: each image once, in walk order."""
    root = _tree(tmp_path / "root")
    plain = load_image_folder(root)
    _link(root / "train/a/again.png", "0.png")
    _mkdir(root / "train/a/sub")
    _png(root / "train/a/sub/5.png", 5)
    _link(root / "train/a/zz", "sub")  # the folder sub reached twice
    os.link(root / "train/a/1.png", root / "train/a/hard.png")
    got = load_image_folder(root)
    assert got.y_train.tolist() == [0] * 5 + [1] * 4  # 4 images of a, sub/5.png once; b unchanged
    assert got.x_train[:, 0, 0, 0].tolist() == [0, 1, 2, 3, 5, 10, 11, 12, 13]
    assert plain.y_test.tolist() == got.y_test.tolist()


def test_image_folder_order_with_names_below_the_separator(tmp_path):
    """torchvision sorts os.walk's folders by path: 'sub-1' ('-' < '/') comes before 'sub/x'."""
    root = tmp_path / "root"
    _png(root / "train/a/sub/x/1.png", 1)
    _png(root / "train/a/sub-1/2.png", 2)
    _png(root / "train/a/sub/3.png", 3)
    _mkdir(root / "test")
    got = load_image_folder(root)
    folders = sorted({str(Path(dirpath)) for dirpath, _, files in os.walk(root / "train/a") if files})
    expected = [v for folder in folders for v in sorted(int(f[0]) for f in os.listdir(folder) if f.endswith(".png"))]
    assert got.x_train[:, 0, 0, 0].tolist() == expected == [3, 2, 1]


def test_issue_27_loops_no_longer_multiply_images(tmp_path):
    """The issue's tree: 4 + 4 images and a loop in each class gave 484 images; now the loop is refused."""
    root = _tree(tmp_path / "root")
    _link(root / "train/a/loop", ".")
    _link(root / "train/b/loop", "..")
    with deadline():
        with pytest.raises(ValueError, match="loop"):
            load_image_folder(root, lazy=True)


# --------------------------------------------------------------------------------- surface 4: image decoding
def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def _png_header_only(width: int, height: int, mode_bits: tuple[int, int] = (1, 0)) -> bytes:
    """A PNG declaring width x height with an empty IDAT (no pixels): Image.open reads only the header."""
    ihdr = struct.pack(">IIBBBBB", width, height, mode_bits[0], mode_bits[1], 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", ihdr) + _chunk(b"IDAT", zlib.compress(b"")) + _chunk(b"IEND", b"")


def _formats_of(image: Image.Image) -> dict[str, bytes]:
    out = {}
    for fmt in ("PNG", "JPEG", "BMP", "TIFF", "WEBP", "PPM"):
        buffer = io.BytesIO()
        image.save(buffer, format=fmt)
        out[fmt] = buffer.getvalue()
    return out


def _decode_corpus() -> dict[str, bytes]:
    limit = Image.MAX_IMAGE_PIXELS
    corpus = {
        "bomb: 3 x Pillow's limit (error range)": _png_header_only(30_000, (3 * limit) // 30_000),
        "bomb: 1.5 x Pillow's limit (warning range)": _png_header_only(10_000, (3 * limit) // 20_000),
        "garbage": b"not an image at all",
        "empty": b"",
        "PNG signature only": b"\x89PNG\r\n\x1a\n",
        "PNG header, no pixels": _png_header_only(4, 4, (8, 2)),
    }
    base = Image.fromarray(np.random.default_rng(0).integers(0, 256, (16, 16, 3), dtype=np.uint8))
    rng = np.random.default_rng(2)
    for fmt, blob in _formats_of(base).items():
        corpus[f"{fmt} truncated to half"] = blob[: len(blob) // 2]
        for k in range(10):
            mutated = bytearray(blob)
            for i in rng.integers(0, min(len(blob), 200), 4):
                mutated[int(i)] = int(rng.integers(0, 256))
            corpus[f"{fmt} 4 bytes flipped ({k})"] = bytes(mutated)
    return corpus


def test_decoding_hostile_images(tmp_path, caplog):
    caplog.set_level(logging.DEBUG)
    root = _tree(tmp_path / "root")
    path = root / "train/a/0.png"
    corpus = _decode_corpus()
    refused = 0
    for name, blob in corpus.items():
        path.write_bytes(blob)
        index = load_image_folder(root, lazy=True).x_train
        with deadline(), warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                image = index[0]
            except ValueError as exc:
                message = str(exc)
                assert "\n" not in message and len(message) <= MAX_MESSAGE and str(path) in message, (name, message)
                if name.startswith("bomb"):
                    assert "decompression bomb" in message, message
                refused += 1
            except BaseException as exc:
                pytest.fail(f"{name}: {type(exc).__name__}: {str(exc)[:200]}")
            else:  # a flip Pillow tolerates (a pixel byte): still an RGB uint8 image
                assert image.dtype == np.uint8 and image.ndim == 3 and image.shape[2] == 3, name
        assert not caught, (name, [str(w.message) for w in caught])
        # Pillow logs some malformed files (logging.error: printed to stderr where no logging is configured)
        assert not [r for r in caplog.records if r.levelno >= logging.WARNING], (name, caplog.text)
    assert refused >= 40


def test_image_above_the_budget_is_refused_before_decoding(tmp_path, monkeypatch):
    root = _tree(tmp_path / "root")
    path = root / "train/a/0.png"
    path.write_bytes(_png_header_only(5000, 5000))  # 25 Mpx, under Pillow's limit: 250 MB to decode
    monkeypatch.setenv(budget.ENV_VAR, "100M")
    message = assert_clean(lambda: load_image_folder(root, lazy=True).x_train[0], path)
    assert "decoding an image of 5000 x 5000 pixels needs about" in message


def test_pillow_warnings_on_a_good_image_are_silent(tmp_path):
    """A palette PNG with byte transparency makes Pillow warn on convert("RGB"); nothing reaches the user."""
    root = _tree(tmp_path / "root")
    path = root / "train/a/0.png"
    palette = Image.new("P", (4, 4), 0)
    palette.putpalette([0, 0, 0, 255, 255, 255] + [0] * 762)
    palette.save(path, format="PNG", transparency=b"\x80\xff")  # half-transparent: kept as bytes when read
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with Image.open(path) as img:
            img.convert("RGB")
        direct = len(caught)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        image = load_image_folder(root, lazy=True).x_train[0]
    assert image.shape == (4, 4, 3) and not caught
    assert direct >= 1  # the case does make Pillow warn: otherwise this test would prove nothing


# ------------------------------------------------------------------ surface 5: embeddings and labels files
def _embeddings(tmp: Path) -> dict[str, Path]:
    z, y = np.ones((6, 3)), np.array([0, 0, 1, 1, 2, 2])
    np.savez(tmp / "e.npz", z=z, labels=y)
    np.save(tmp / "z.npy", z)
    np.save(tmp / "y.npy", y)
    torch.save({"z": torch.ones(6, 3), "labels": torch.tensor(y)}, tmp / "e.pt")
    (tmp / "e.csv").write_text("a,b,label\n" + "".join(f"1,2,{v}\n" for v in y))
    (tmp / "y.csv").write_text("".join(f"{v}\n" for v in y))
    torch.save(torch.tensor(y), tmp / "y.pt")
    return {"npz": tmp / "e.npz", "npy": tmp / "z.npy", "pt": tmp / "e.pt", "csv": tmp / "e.csv",
            "labels npy": tmp / "y.npy", "labels csv": tmp / "y.csv", "labels pt": tmp / "y.pt"}


METRICS_CASES = [(role, kind) for role in ("npz", "npy", "pt", "csv", "labels npy", "labels csv", "labels pt")
                 for kind in FILE_KINDS]


def assert_cli_clean(argv: list[str], capsys, *names) -> str:
    with deadline():
        code, out, err = run_main(argv, capsys)
    lines = err.splitlines()
    assert code == 2 and out == "" and len(lines) == 1 and "Traceback" not in err, (code, err)
    assert lines[0].startswith(f"ncgeom {argv[0]}: error: ") and len(lines[0]) <= MAX_MESSAGE + 40, lines[0]
    for name in names:
        assert str(name) in lines[0], (name, lines[0])
    return lines[0]


@pytest.mark.parametrize("role, kind", METRICS_CASES)
def test_metrics_file_kinds(tmp_path, small_budget, capsys, role, kind):
    files = _embeddings(tmp_path)
    path = files[role]
    fragment = _replace(path, kind)
    argv = ["metrics", str(files["npy"]), "--labels", str(path)] if role.startswith("labels") else ["metrics", str(path)]
    line = assert_cli_clean(argv, capsys, path)
    if kind in OPEN_KINDS or (kind.startswith("sparse") and role in ("pt", "labels pt", "csv", "labels csv")):
        assert fragment in line, line  # (a sparse .npy/.npz is refused as not an array; /proc: not numbers)


@pytest.mark.parametrize("content, fragment", [
    (b"1," * (2**20), "line 1 is longer than 262144 characters"),  # one line of 2 MiB, budget 1 MiB
    (b"\x00" * (2**20), "line 1 is longer than"),  # a file of NUL bytes and no newline
    (b"1,2\n" * 3 + b"9" * (2**19) + b"\n", "line 4 is longer than"),
])
def test_metrics_csv_lines_are_bounded(tmp_path, monkeypatch, capsys, content, fragment):
    monkeypatch.setenv(budget.ENV_VAR, "1M")
    path = tmp_path / "long.csv"
    path.write_bytes(content)
    assert fragment in assert_cli_clean(["metrics", str(path), "--labels", str(path)], capsys, path)


def _torch_corpus(good: bytes) -> dict[str, bytes]:
    def rezip(mutate: Callable[[bytes], bytes]) -> bytes:
        source, out = zipfile.ZipFile(io.BytesIO(good)), io.BytesIO()
        with zipfile.ZipFile(out, "w") as target:
            for info in source.infolist():
                data = source.read(info)
                target.writestr(info.filename, mutate(data) if info.filename.endswith("data.pkl") else data)
        return out.getvalue()

    corpus = {f"truncated at {cut}": good[:cut] for cut in (0, 10, 100, len(good) // 2, len(good) - 10)}
    corpus.update({
        "random bytes": np.random.default_rng(0).bytes(300),
        "zip of garbage": b"PK\x03\x04" + np.random.default_rng(1).bytes(300),
        "plain pickle of a dict (legacy format)": pickle.dumps({"z": 1}),
        "pickle of an object": pickle.dumps(Path("x")),
        "pickle of protocol 4 (torch warns)": pickle.dumps([1, 2], protocol=4),
        "data.pkl truncated": rezip(lambda d: d[: len(d) // 2]),
        "data.pkl cut inside an int": rezip(lambda d: b"\x80\x02J\x01\x00"),
        "data.pkl garbage": rezip(lambda d: b"\x80\x02garbage"),
        "data.pkl nested 100000 deep": rezip(lambda d: b"\x80\x02" + b"]" * 100_000 + b"a" * 99_999 + b"."),
        "data.pkl huge int": rezip(lambda d: b"\x80\x02\x8a\x10" + b"\xff" * 16 + b"."),
        "data.pkl a global": rezip(lambda d: b"\x80\x02cos\nsystem\n."),
    })
    return corpus


def test_metrics_malformed_pt_files(tmp_path, capsys):
    good = io.BytesIO()
    torch.save({"z": torch.ones(6, 3), "labels": torch.tensor([0, 0, 1, 1, 2, 2])}, good)
    for name, blob in _torch_corpus(good.getvalue()).items():
        path = tmp_path / "e.pt"
        path.write_bytes(blob)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            line = assert_cli_clean(["metrics", str(path)], capsys, path)
        assert not caught, (name, [str(w.message)[:100] for w in caught])
        assert "weights_only` set to `False`" not in line  # torch's advice to run code is not passed on


# ------------------------------------------------------------------------------------ surface 6: checkpoints
def _checkpoint_corpus(tmp: Path):
    from ncgeom.runs.checkpoint import CHECKPOINT_FORMAT
    from ncgeom.runs.config import Config

    # a fixed data_dir (load_checkpoint reads no data): the same bytes, so the same truncations, on every run
    config = Config(dataset="cifar10", data_dir="/nonexistent/ncgeom-data", classes=10, model="resnet18", dim=9,
                    batch_size=10, epochs=2)
    good = {"format": CHECKPOINT_FORMAT, "config": config.to_dict(), "epoch": 1, "model": {}, "optimizer": {},
            "history": [], "initial": {}, "elapsed_s": 0.0, "rng": {}}

    def saved(obj) -> bytes:
        buffer = io.BytesIO()
        torch.save(obj, buffer)
        return buffer.getvalue()

    corpus = _torch_corpus(saved(good))
    corpus.update({
        "a list": saved([1, 2]), "a tensor": saved(torch.zeros(3)), "config a list": saved({**good, "config": [1]}),
        "config a string": saved({**good, "config": "x"}), "epoch a string": saved({**good, "epoch": "x"}),
        "epoch None": saved({**good, "epoch": None}), "epoch a tensor of 2": saved({**good, "epoch": torch.tensor([1, 2])}),
        "format a tensor of 2": saved({**good, "format": torch.tensor([1, 1])}),
    })
    return config, corpus


#: The cases that escaped load_checkpoint before round 3's checkpoint checks (issue 27, item 9): an exception
#: other than ValueError (an internal error, exit 1), or torch's warning printed. All are one line now.
CHECKPOINT_ESCAPED_BEFORE = {
    "data.pkl cut inside an int": "struct.error from torch.load",
    "epoch a string": "TypeError comparing the epoch",
    "epoch None": "TypeError comparing the epoch",
    "epoch a tensor of 2": "RuntimeError comparing the epoch",
    "format a tensor of 2": "RuntimeError comparing the format",
    "plain pickle of a dict (legacy format)": "torch's UserWarning printed",
    "pickle of an object": "torch's UserWarning printed",
    "pickle of protocol 4 (torch warns)": "torch's UserWarning printed",
}


def test_malformed_checkpoints(tmp_path):
    from ncgeom.runs.checkpoint import load_checkpoint

    config, corpus = _checkpoint_corpus(tmp_path)
    assert set(CHECKPOINT_ESCAPED_BEFORE) <= set(corpus)
    path = tmp_path / "checkpoint.pt"
    for blob in corpus.values():
        path.write_bytes(blob)
        assert_clean(lambda: load_checkpoint(path, config), path)


def test_load_torch_reads_every_checkpoint_case_cleanly(tmp_path):
    """The helper the checkpoint reader can adopt: each malformed file is one line (or, well-formed but of
    the wrong field types, an object for the caller to check), and no warning."""
    _, corpus = _checkpoint_corpus(tmp_path)
    path = tmp_path / "checkpoint.pt"
    outcomes = {"refused": 0, "read": 0}
    for name, blob in corpus.items():
        path.write_bytes(blob)
        with deadline(), warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                load_torch(path, what="a checkpoint", expected="an ncgeom checkpoint", copies=2)
            except ValueError as exc:
                assert "\n" not in str(exc) and str(path) in str(exc) and len(str(exc)) <= MAX_MESSAGE, name
                outcomes["refused"] += 1
            except BaseException as exc:
                pytest.fail(f"{name}: {type(exc).__name__}: {str(exc)[:200]}")
            else:
                outcomes["read"] += 1
        assert not caught, name
    # read: the 8 dicts and lists of the wrong structure, the huge int and the nested list of data.pkl
    assert outcomes == {"refused": 14, "read": 10}, outcomes


# --------------------------------------------------------------------------------- the helpers themselves
def test_read_bounded_reads_regular_files_exactly(tmp_path):
    data = np.random.default_rng(0).bytes(100_000)
    (tmp_path / "f").write_bytes(data)
    os.symlink("f", tmp_path / "link")
    assert read_bounded(tmp_path / "f") == data and read_bounded(tmp_path / "link") == data
    assert regular_file_size(tmp_path / "link") == 100_000
    assert read_bounded(tmp_path / "f", max_bytes=100_000) == data
    with pytest.raises(ValueError, match=re.escape("97.7 KiB (100000 bytes), above the 99999 bytes accepted for")):
        read_bounded(tmp_path / "f", max_bytes=99_999)
    with open_regular(tmp_path / "link") as fh:
        assert fh.read() == data


def test_open_regular_checks_the_descriptor_it_reads(tmp_path, monkeypatch):
    """The kind is taken from fstat of the open descriptor: a path swapped after os.open is not what is read."""
    (tmp_path / "f").write_bytes(b"abc")
    seen = []
    real_fstat = os.fstat
    monkeypatch.setattr(os, "fstat", lambda fd: seen.append(fd) or real_fstat(fd))
    with open_regular(tmp_path / "f") as fh:
        assert seen and seen[0] == fh.fileno()


def test_corpus_size(tmp_path):
    """The counts docs/reliability.md ("Hostile files (round 3)") reports."""
    write_cifar_like(tmp_path, rng=np.random.default_rng(0), num_per_class=1)
    pickles = _pickle_corpus((tmp_path / "cifar-10-batches-py" / "test_batch").read_bytes())
    good = io.BytesIO()
    torch.save({"z": torch.ones(6, 3)}, good)
    _, checkpoints = _checkpoint_corpus(tmp_path)
    sizes = {"data set files": len(DATASET_CASES), "pickles": len(pickles), "handmade pickles": len(_handmade()),
             "walk": len(WALK_REFUSALS), "decode": len(_decode_corpus()), "metrics kinds": len(METRICS_CASES),
             "pt": len(_torch_corpus(good.getvalue())), "checkpoints": len(checkpoints),
             "checkpoints that escaped before": len(set(CHECKPOINT_ESCAPED_BEFORE) & set(checkpoints))}
    assert sizes == {"data set files": 225, "pickles": 466, "handmade pickles": 25, "walk": 19, "decode": 72,
                     "metrics kinds": 63, "pt": 16, "checkpoints": 24, "checkpoints that escaped before": 8}
