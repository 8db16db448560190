"""Image readers (ncgeom.data.images) and the inert pickle reader (ncgeom.data.images.inert_pickle), on small generated data.

Nothing here touches the network or the official files: every data set is written by ncgeom.testing.images or
byte by byte in the test (the naive references of the pixel orders).
"""

import hashlib
import io
import os
import pickle
import re
from pathlib import Path

import numpy as np
import pytest
from numpy.testing import assert_array_equal
from PIL import Image

import ncgeom.data.images as images
from ncgeom.data.images import (
    GENERATED_MARKER,
    OFFICIAL_MD5,
    ImageFolderIndex,
    load_cifar,
    load_image_data,
    load_image_folder,
    load_stl10,
)
from ncgeom.data.images.inert_pickle import PickleCall, PickleGlobal, pickle_as_data, py2_pickle
from ncgeom.testing.images import write_cifar_like, write_image_folder, write_stl10_like
from ncgeom.vocabulary import IMAGE_DATASETS


def _rng(seed=0):
    return np.random.default_rng(seed)


def _assert_same(expected, got):
    assert got.name == expected.name and got.classes == expected.classes
    for attr in ("x_train", "y_train", "x_test", "y_test"):
        a, b = getattr(expected, attr), getattr(got, attr)
        assert b.dtype == a.dtype, attr
        assert_array_equal(b, a, err_msg=attr)


# --- round trips ------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["cifar10", "cifar100"])
@pytest.mark.parametrize("layout", ["python", "binary"])
def test_cifar_round_trip(tmp_path, name, layout):
    written = write_cifar_like(tmp_path, name=name, layout=layout, num_per_class=2, num_test_per_class=1, rng=_rng())
    got = load_cifar(tmp_path, name=name)
    _assert_same(written, got)
    num_classes = 10 if name == "cifar10" else 100
    assert got.x_train.shape == (2 * num_classes, 32, 32, 3) and got.x_train.dtype == np.uint8
    assert got.y_train.dtype == np.int64 and got.num_classes == num_classes
    assert_array_equal(np.bincount(got.y_train, minlength=num_classes), np.full(num_classes, 2))
    assert_array_equal(got.prior, np.full(num_classes, 1 / num_classes))
    assert not got.checksums_verified  # generated: the marker turns the md5 check off


def test_stl10_round_trip(tmp_path):
    written = write_stl10_like(tmp_path, num_per_class=1, num_test_per_class=2, rng=_rng())
    got = load_image_data("stl10", tmp_path)
    _assert_same(written, got)
    assert got.x_train.shape == (10, 96, 96, 3) and got.x_test.shape == (20, 96, 96, 3)


@pytest.mark.parametrize("lazy", [False, True])
def test_image_folder_round_trip(tmp_path, lazy):
    written = write_image_folder(tmp_path, classes=3, size=8, num_per_class=2, num_test_per_class=1, rng=_rng())
    got = load_image_folder(tmp_path, lazy=lazy)
    if lazy:
        assert isinstance(got.x_train, ImageFolderIndex) and len(got.x_train) == 6
        assert_array_equal(got.x_train[4], written.x_train[4])
        assert_array_equal(got.x_train[[5, 0]], written.x_train[[5, 0]])
        assert_array_equal(got.x_train[:], written.x_train)
        assert_array_equal(got.x_test[np.arange(3)], written.x_test)
        assert_array_equal(got.y_train, written.y_train)
    else:
        _assert_same(written, got)


# --- pixel order against hand-written bytes (naive references) -------------------------------------
def _pixel(n, y, x, c):
    return (7 * n + 3 * y + 5 * x + 11 * c) % 256


def test_cifar_binary_pixel_order(tmp_path):
    """Record = label byte, then R, G, B planes of 32 x 32 each, row-major (the official description)."""
    folder = tmp_path / "cifar-10-batches-bin"
    folder.mkdir()
    records = []
    for n in range(2):
        rec = bytearray([n % 10])
        for c in range(3):
            for y in range(32):
                for x in range(32):
                    rec.append(_pixel(n, y, x, c))
        records.append(bytes(rec))
    for i in range(1, 6):
        (folder / f"data_batch_{i}.bin").write_bytes(b"".join(records))
    (folder / "test_batch.bin").write_bytes(records[1])
    (folder / "batches.meta.txt").write_text("".join(f"c{k}\n" for k in range(10)) + "\n")
    got = load_cifar(tmp_path)
    assert got.x_train.shape == (10, 32, 32, 3) and got.classes == tuple(f"c{k}" for k in range(10))
    for n in range(2):
        for (y, x, c) in [(0, 0, 0), (0, 31, 1), (17, 3, 2), (31, 31, 2)]:
            assert got.x_train[n, y, x, c] == _pixel(n, y, x, c)
    assert_array_equal(got.y_train[:2], [0, 1])
    assert got.y_test.tolist() == [1]


def test_cifar_python_pixel_order_and_structure(tmp_path):
    """The python layout's rows are the same channel-major planes; the stream has the official structure."""
    written = write_cifar_like(tmp_path, num_per_class=1, rng=_rng(3))
    raw = (tmp_path / "cifar-10-batches-py" / "data_batch_1").read_bytes()
    entry = pickle_as_data(raw)
    data = entry["data"]
    assert data.func == PickleGlobal("numpy.core.multiarray", "_reconstruct")
    assert data.args == (PickleGlobal("numpy", "ndarray"), (0,), "b")
    version, shape, dtype, fortran, pixels = data.state
    assert (version, fortran, dtype.func, dtype.args[0]) == (1, False, PickleGlobal("numpy", "dtype"), "u1")
    n = shape[0]
    flat = np.frombuffer(pixels.encode("latin-1"), dtype=np.uint8).reshape(n, 3072)
    for k in range(n):
        for (y, x, c) in [(0, 0, 0), (5, 9, 1), (31, 30, 2)]:
            assert flat[k, c * 1024 + y * 32 + x] == written.x_train[k, y, x, c]
    assert entry["labels"] == written.y_train[:n].tolist()


def test_stl10_pixel_order(tmp_path):
    """Each 96 x 96 channel is stored column by column: byte c*9216 + x*96 + y is pixel (y, x, c)."""
    folder = tmp_path / "stl10_binary"
    folder.mkdir()
    image = bytearray()
    for c in range(3):
        for x in range(96):
            for y in range(96):
                image.append(_pixel(0, y, x, c))
    for split in ("train", "test"):
        (folder / f"{split}_X.bin").write_bytes(bytes(image))
        (folder / f"{split}_y.bin").write_bytes(bytes([10]))
    (folder / "class_names.txt").write_text("".join(f"n{k}\n" for k in range(10)))
    got = load_stl10(tmp_path, verify_checksums=False)
    assert got.y_train.tolist() == [9] and got.x_train.shape == (1, 96, 96, 3)
    for (y, x, c) in [(0, 1, 0), (1, 0, 0), (95, 2, 1), (40, 77, 2)]:
        assert got.x_train[0, y, x, c] == _pixel(0, y, x, c)


# --- inert pickle reading -------------------------------------------------------------------------
PLAIN = {"a": [1, 2, 3, -5, 2**40], "b": ("x", None, True, False, 1.5), "nested": {"k": [[], {}, ()]}, 7: "seven"}


@pytest.mark.parametrize("protocol", range(pickle.HIGHEST_PROTOCOL + 1))
def test_pickle_as_data_equals_plain_values(protocol):
    shared = [1, 2]
    obj = dict(PLAIN, shared1=shared, shared2=shared)  # the memo (PUT/GET or MEMOIZE) carries the second reference
    if protocol >= 3:
        obj["raw"] = b"\x00\xffbytes"
    assert pickle_as_data(pickle.dumps(obj, protocol=protocol)) == obj


class _Evil:
    def __init__(self, target):
        self.target = target

    def __reduce__(self):
        return (os.makedirs, (self.target,))


def test_reduce_is_recorded_not_called(tmp_path):
    target = str(tmp_path / "pwned")
    value = pickle_as_data(pickle.dumps({"data": _Evil(target)}, protocol=2))
    call = value["data"]
    assert isinstance(call, PickleCall) and call.args == (target,)
    assert call.func.name == "makedirs" and not Path(target).exists()


def test_cifar_reader_refuses_foreign_call(tmp_path):
    write_cifar_like(tmp_path, num_per_class=1, rng=_rng())
    target = tmp_path / "pwned"
    bad = tmp_path / "cifar-10-batches-py" / "data_batch_3"
    bad.write_bytes(pickle.dumps({"data": _Evil(str(target)), "labels": [0]}, protocol=2))
    with pytest.raises(ValueError, match=re.escape(str(bad))):
        load_cifar(tmp_path)
    assert not target.exists()


class _Plain:
    pass


@pytest.mark.parametrize("blob,opcode", [
    (pickle.dumps(_Plain(), protocol=2), "NEWOBJ"),
    (b"(itest_images\n_Plain\n.", "INST"),
    (b"(ctest_images\n_Plain\no.", "OBJ"),
    (b"Pkey\n.", "PERSID"),
    (b"\x80\x02\x82\x01.", "EXT1"),
])
def test_pickle_as_data_refuses_object_opcodes(blob, opcode):
    with pytest.raises(ValueError, match=f"src: not a readable pickle.*refused pickle opcode {opcode}"):
        pickle_as_data(blob, source="src")


def test_protocol0_object_is_an_inert_call():
    value = pickle_as_data(pickle.dumps(_Plain(), protocol=0))
    assert isinstance(value, PickleCall) and value.func == PickleGlobal("copy_reg", "_reconstructor")


@pytest.mark.parametrize("cut", [1, 20, -1])
def test_pickle_as_data_truncated(cut):
    blob = pickle.dumps(PLAIN, protocol=2)
    with pytest.raises(ValueError, match="src: "):
        pickle_as_data(blob[:cut] if cut > 0 else blob[:cut], source="src")


def test_py2_pickle_refuses_unknown_types():
    with pytest.raises(TypeError):
        py2_pickle({"x": 1.5})


def test_no_unpickling_in_readers():
    """Project rule: no pickle.load(s), Unpickler, numpy/torch load of a pickle in the image readers."""
    forbidden = re.compile(r"pickle\.loads?\(|Unpickler|allow_pickle\s*=\s*True|np\.load\(|torch\.load\(")
    package = Path(images.__file__).parent
    files = [*sorted(package.glob("*.py")), package.parent / "augment.py"]
    assert {f.name for f in files} >= {"readers.py", "folder.py", "inert_pickle.py", "download.py", "augment.py"}
    for path in files:
        hits = forbidden.findall(path.read_text())
        assert not hits, f"{path.name}: {hits}"


# --- checksums --------------------------------------------------------------------------------------
def test_official_md5_table_is_torchvision_list():
    assert set(OFFICIAL_MD5) == {"cifar-10-batches-py", "cifar-100-python", "stl10_binary"}
    assert sorted(OFFICIAL_MD5["cifar-10-batches-py"]) == sorted([f"data_batch_{i}" for i in range(1, 6)]
                                                                 + ["test_batch", "batches.meta"])
    assert sorted(OFFICIAL_MD5["cifar-100-python"]) == ["meta", "test", "train"]
    assert sorted(OFFICIAL_MD5["stl10_binary"]) == ["test_X.bin", "test_y.bin", "train_X.bin", "train_y.bin"]
    for table in OFFICIAL_MD5.values():
        for digest in table.values():
            assert re.fullmatch(r"[0-9a-f]{32}", digest)


def test_md5_mismatch_without_marker(tmp_path):
    write_cifar_like(tmp_path, num_per_class=1, rng=_rng())
    folder = tmp_path / "cifar-10-batches-py"
    (folder / GENERATED_MARKER).unlink()
    with pytest.raises(ValueError, match=r"batches\.meta: md5 [0-9a-f]{32} differs from the official"):
        load_cifar(tmp_path)
    got = load_cifar(tmp_path, verify_checksums=False)
    assert not got.checksums_verified and got.x_train.shape[0] == 10


def test_md5_match_is_reported(tmp_path, monkeypatch):
    write_stl10_like(tmp_path, rng=_rng())
    folder = tmp_path / "stl10_binary"
    (folder / GENERATED_MARKER).unlink()
    table = {name: hashlib.md5((folder / name).read_bytes()).hexdigest() for name in OFFICIAL_MD5["stl10_binary"]}
    monkeypatch.setitem(OFFICIAL_MD5, "stl10_binary", table)
    assert load_stl10(tmp_path).checksums_verified
    with (folder / "test_y.bin").open("ab") as handle:  # one byte more: md5 and length both wrong
        handle.write(b"\x01")
    with pytest.raises(ValueError, match=re.escape(str(folder / "test_y.bin")) + ": md5"):
        load_stl10(tmp_path)


# --- errors -------------------------------------------------------------------------------------------
def test_missing_folder_and_layout(tmp_path):
    with pytest.raises(ValueError, match="no such folder"):
        load_image_data("cifar10", tmp_path / "absent")
    with pytest.raises(ValueError, match="no cifar-100-python or cifar-100-binary folder"):
        load_image_data("cifar100", tmp_path)
    with pytest.raises(ValueError, match="stl10_binary: no such folder"):
        load_image_data("stl10", tmp_path)
    with pytest.raises(ValueError, match="train: no such folder"):
        load_image_data("imagefolder", tmp_path)


def test_missing_file(tmp_path):
    write_cifar_like(tmp_path, num_per_class=1, rng=_rng())
    (tmp_path / "cifar-10-batches-py" / "data_batch_4").unlink()
    with pytest.raises(ValueError, match=r"data_batch_4: no such file"):
        load_cifar(tmp_path)


@pytest.mark.parametrize("layout,file", [("python", "data_batch_2"), ("binary", "test_batch.bin")])
def test_truncated_cifar(tmp_path, layout, file):
    write_cifar_like(tmp_path, layout=layout, num_per_class=1, rng=_rng())
    path = tmp_path / ("cifar-10-batches-py" if layout == "python" else "cifar-10-batches-bin") / file
    path.write_bytes(path.read_bytes()[:-100])
    with pytest.raises(ValueError, match=re.escape(str(path))) as info:
        load_cifar(tmp_path)
    assert "\n" not in str(info.value)


def test_truncated_stl10(tmp_path):
    write_stl10_like(tmp_path, rng=_rng())
    path = tmp_path / "stl10_binary" / "train_X.bin"
    path.write_bytes(path.read_bytes()[:-1])
    with pytest.raises(ValueError, match=re.escape(str(path)) + ".*truncated"):
        load_stl10(tmp_path)


def test_label_out_of_range(tmp_path):
    write_cifar_like(tmp_path, layout="binary", num_per_class=1, rng=_rng())
    path = tmp_path / "cifar-10-batches-bin" / "test_batch.bin"
    raw = bytearray(path.read_bytes())
    raw[0] = 10
    path.write_bytes(bytes(raw))
    with pytest.raises(ValueError, match=re.escape(str(path)) + r": labels must lie in 0\.\.9"):
        load_cifar(tmp_path)


def test_wrong_python_structure(tmp_path):
    write_cifar_like(tmp_path, num_per_class=1, rng=_rng())
    path = tmp_path / "cifar-10-batches-py" / "test_batch"
    path.write_bytes(py2_pickle({"data": b"\x00" * 3072, "labels": [0]}))  # raw bytes, not an array
    with pytest.raises(ValueError, match=re.escape(str(path)) + ": 'data' is not a pickled uint8 array"):
        load_cifar(tmp_path)
    path.write_bytes(py2_pickle({"data": np.zeros((1, 3072), np.uint8), "fine_labels": [0]}))
    with pytest.raises(ValueError, match="expected the keys 'data' and 'labels'"):
        load_cifar(tmp_path)
    path.write_bytes(py2_pickle({"data": np.zeros((2, 3072), np.uint8), "labels": [0]}))
    with pytest.raises(ValueError, match="'labels' must be a list of 2 integers"):
        load_cifar(tmp_path)


@pytest.mark.parametrize("content", [b"not an image at all", "truncated-png"])
def test_corrupt_image(tmp_path, content):
    write_image_folder(tmp_path, classes=2, size=8, num_per_class=1, num_test_per_class=1, rng=_rng())
    path = tmp_path / "train" / "class01" / "00001.png"
    if content == "truncated-png":
        content = path.read_bytes()[:60]
    path.write_bytes(content)
    with pytest.raises(ValueError, match=re.escape(str(path)) + ": not a readable image") as info:
        load_image_folder(tmp_path)
    assert "\n" not in str(info.value)
    lazy = load_image_folder(tmp_path, lazy=True)  # lazily: the error comes at decoding
    with pytest.raises(ValueError, match=re.escape(str(path))):
        lazy.x_train[1]


# --- ImageFolder semantics ----------------------------------------------------------------------------
def _png(path, color, size=(4, 4)):
    path.parent.mkdir(parents=True, exist_ok=True)
    buffer = io.BytesIO()
    Image.new("RGB", size, color).save(buffer, format="PNG")
    path.write_bytes(buffer.getvalue())


def test_image_folder_order_like_torchvision(tmp_path):
    """Classes sorted by name; files by sorted os.walk; extensions case-insensitive; other files ignored."""
    _png(tmp_path / "train" / "b" / "z.png", (1, 0, 0))
    _png(tmp_path / "train" / "b" / "a.PNG", (2, 0, 0))
    _png(tmp_path / "train" / "b" / "sub" / "m.png", (3, 0, 0))
    _png(tmp_path / "train" / "a" / "k.png", (4, 0, 0))
    (tmp_path / "train" / "a" / "notes.txt").write_text("ignored")
    _png(tmp_path / "test" / "b" / "t.png", (5, 0, 0))
    got = load_image_folder(tmp_path)
    assert got.classes == ("a", "b")
    assert got.x_train[:, 0, 0, 0].tolist() == [4, 2, 1, 3]
    assert got.y_train.tolist() == [0, 1, 1, 1] and got.y_test.tolist() == [1]


def test_image_folder_rejections(tmp_path):
    _png(tmp_path / "train" / "a" / "1.png", (0, 0, 0))
    _png(tmp_path / "train" / "a" / "2.png", (0, 0, 0), size=(5, 4))
    _png(tmp_path / "test" / "a" / "1.png", (0, 0, 0))
    with pytest.raises(ValueError, match=re.escape(str(tmp_path / "train" / "a" / "2.png")) + ".*differs"):
        load_image_folder(tmp_path)
    resized = load_image_folder(tmp_path, size=3)
    assert resized.x_train.shape == (2, 3, 3, 3)
    with pytest.raises(ValueError, match="need 96 bytes > max_bytes = 95"):
        load_image_folder(tmp_path, size=4, max_bytes=95)  # 2 images x 4 x 4 x 3 = 96 bytes
    (tmp_path / "train" / "empty").mkdir()
    with pytest.raises(ValueError, match="empty: no image file"):
        load_image_folder(tmp_path, size=3)
    (tmp_path / "train" / "empty").rmdir()
    _png(tmp_path / "test" / "extra" / "1.png", (0, 0, 0))
    with pytest.raises(ValueError, match="extra not among the train classes"):
        load_image_folder(tmp_path, size=3)


def test_resize_center_crop_like_torchvision(tmp_path):
    """Shorter side to S, then the central S x S crop: a 2:1 image whose halves differ keeps its middle."""
    img = np.zeros((4, 8, 3), dtype=np.uint8)
    img[:, 2:6] = 200  # the central square of width 4
    path = tmp_path / "train" / "a" / "x.png"
    path.parent.mkdir(parents=True)
    Image.fromarray(img).save(path)
    (tmp_path / "test").mkdir()
    got = load_image_folder(tmp_path, size=4)
    assert_array_equal(got.x_train[0], img[:, 2:6])  # no resampling needed: the crop is exact


def test_dispatch_validation(tmp_path):
    assert set(IMAGE_DATASETS) == {"cifar10", "cifar100", "stl10", "imagefolder"}
    with pytest.raises(ValueError, match="dataset must be one of"):
        load_image_data("mnist", tmp_path)
    with pytest.raises(ValueError, match="apply to dataset 'imagefolder' only"):
        load_image_data("cifar10", tmp_path, size=32)
    with pytest.raises(ValueError, match="rng must be a numpy.random.Generator"):
        write_cifar_like(tmp_path, rng=0)


# --- package layout -------------------------------------------------------------------------------------
def test_fixture_writers_live_in_testing_not_in_the_readers():
    import ncgeom.data
    import ncgeom.testing
    import ncgeom.testing.images
    import ncgeom.testing.strategies

    for name in ("write_cifar_like", "write_stl10_like", "write_image_folder"):
        assert not hasattr(images, name) and name not in images.__all__
        assert not hasattr(ncgeom.data, name) and name not in ncgeom.data.__all__
        assert callable(getattr(ncgeom.testing.images, name))
    assert ncgeom.testing.__all__ == ncgeom.testing.strategies.__all__
    for name in ncgeom.testing.__all__:
        assert getattr(ncgeom.testing, name) is getattr(ncgeom.testing.strategies, name)
