"""The embeddings-file reader (ncgeom.data.embeddings): each format read back exactly, the formats agree, bad files refused.

Naive references first (arrays written with numpy/torch/csv by hand, read back equal), then agreement of the
four formats on one set of embeddings, then the refusals (one-line ValueError naming the file).
"""

from __future__ import annotations

import csv
import io
import re
import zipfile

import numpy as np
import pytest
import torch
from numpy.testing import assert_array_equal

from ncgeom.data.embeddings import (
    EXPECTED,
    FORMATS,
    ObjectArrayError,
    array_file_headers,
    load_embeddings,
    load_labels,
    npy_header,
)

Z = np.random.default_rng(0).standard_normal((6, 3))
Y = np.array([0, 0, 1, 1, 2, 2])


def _csv(path, rows, header=None):
    with open(path, "w", newline="") as fh:
        writer = csv.writer(fh)
        if header:
            writer.writerow(header)
        writer.writerows(rows)
    return str(path)


def _write_all(tmp_path) -> dict[str, tuple[str, str | None]]:
    """The same (Z, Y) in every format: {name: (file, labels file or None)}."""
    np.savez(tmp_path / "e.npz", z=Z, labels=Y)
    np.save(tmp_path / "z.npy", Z)
    np.save(tmp_path / "y.npy", Y)
    torch.save({"z": torch.from_numpy(Z), "labels": torch.from_numpy(Y)}, tmp_path / "d.pt")
    torch.save(torch.from_numpy(Z), tmp_path / "t.pt")
    torch.save(torch.from_numpy(Y), tmp_path / "y.pt")
    with_header = _csv(tmp_path / "h.csv", [[*(repr(float(v)) for v in z), int(y)] for z, y in zip(Z, Y)], ["a", "b", "c", "label"])
    plain = _csv(tmp_path / "p.csv", [[repr(float(v)) for v in z] for z in Z])
    labels_csv = _csv(tmp_path / "y.csv", [[int(y)] for y in Y])
    return {
        "npz": (str(tmp_path / "e.npz"), None),
        "npy + npy labels": (str(tmp_path / "z.npy"), str(tmp_path / "y.npy")),
        "pt dict": (str(tmp_path / "d.pt"), None),
        "pt tensor + pt labels": (str(tmp_path / "t.pt"), str(tmp_path / "y.pt")),
        "csv with a label column": (with_header, None),
        "csv + csv labels": (plain, labels_csv),
    }


def test_every_format_reads_back_what_was_written(tmp_path):
    files = _write_all(tmp_path)
    assert len(files) == 6 and {f.rsplit(".", 1)[1] for f, _ in files.values()} == {e[1:] for e in FORMATS}
    for name, (path, labels_path) in files.items():
        z, labels = load_embeddings(path, labels_path)
        assert_array_equal(z, Z, err_msg=name)  # repr() of a float64 round-trips exactly through CSV
        assert_array_equal(labels, Y, err_msg=name)
        assert z.shape == (6, 3) and labels.shape == (6,), name


def test_labels_files(tmp_path):
    files = _write_all(tmp_path)
    for labels_path in (files["npy + npy labels"][1], files["pt tensor + pt labels"][1], files["csv + csv labels"][1]):
        assert_array_equal(load_labels(labels_path), Y)
    with pytest.raises(ValueError, match=r"d\.pt: a dict of z and labels"):
        load_labels(files["pt dict"][0])
    with pytest.raises(ValueError, match=r"p\.csv: 3 columns; expected one column"):
        load_labels(files["csv + csv labels"][0])
    with pytest.raises(ValueError, match=r"unsupported file type '\.npz'"):
        load_labels(files["npz"][0])


def test_headers_agree_with_numpy(tmp_path):
    """The headers read without the data give the shape and dtype numpy loads (npy v1, v2 and npz members)."""
    arrays = {"a": np.zeros((3, 4), "<f4"), "b": np.arange(5, dtype=">i2"), "c": np.ones((2, 1, 2), bool)}
    np.savez_compressed(tmp_path / "m.npz", **arrays)
    headers = array_file_headers(tmp_path / "m.npz")
    assert {k: (s, d) for k, (s, d) in headers.items()} == {k: (v.shape, v.dtype) for k, v in arrays.items()}
    for version in ((1, 0), (2, 0)):
        buf = io.BytesIO()
        np.lib.format.write_array(buf, arrays["a"], version=version)
        buf.seek(0)
        assert npy_header(buf, where="w") == ((3, 4), np.dtype("<f4"))


def test_header_of_an_object_array_is_refused_without_unpickling(tmp_path, monkeypatch):
    import pickle

    monkeypatch.setattr(pickle, "load", lambda *a, **k: pytest.fail("unpickled"))
    monkeypatch.setattr(pickle, "loads", lambda *a, **k: pytest.fail("unpickled"))
    np.save(tmp_path / "o.npy", np.array([object()] * 3), allow_pickle=True)
    with pytest.raises(ObjectArrayError, match=r"o\.npy: holds Python objects"):
        array_file_headers(tmp_path / "o.npy")
    with pytest.raises(ValueError, match=r"o\.npy: not a readable \.npy array without unpickling \(it holds Python"):
        load_embeddings(str(tmp_path / "o.npy"), str(tmp_path / "o.npy"))


def test_headers_of_a_bomb_are_measured_not_loaded(tmp_path):
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": "<f8", "fortran_order": False, "shape": (2**33, 8)})
    with zipfile.ZipFile(tmp_path / "b.npz", "w") as zf:
        zf.writestr("z.npy", header.getvalue())  # a header only: the 512 GiB it declares are not there
        zf.writestr("labels.npy", header.getvalue())
    assert array_file_headers(tmp_path / "b.npz")["z"] == ((2**33, 8), np.dtype("<f8"))
    with pytest.raises(ValueError, match=r"b\.npz: loading its arrays .* needs about .*above the memory budget"):
        load_embeddings(str(tmp_path / "b.npz"))


@pytest.mark.parametrize("make, fragment", [
    (lambda t: str(t / "absent.npz"), "absent.npz: no such file"),
    (lambda t: (t / "d.npz").mkdir() or str(t / "d.npz"), "d.npz: is a directory, not a file"),
    (lambda t: (t / "a.txt").write_text("1\n") and str(t / "a.txt"), "a.txt: unsupported file type '.txt'"),
    (lambda t: (t / "e.csv").write_text("") or str(t / "e.csv"), "e.csv: empty"),
    (lambda t: (t / "r.csv").write_text("1,2\n3\n") and str(t / "r.csv"), "r.csv: line 2 has 1 columns"),
    (lambda t: (t / "c.pt").write_bytes(b"garbage") and str(t / "c.pt"), "c.pt: not readable with torch.load"),
    (lambda t: np.save(t / "z.npy", Z) or str(t / "z.npy"), "z.npy: holds z only; give the labels with --labels"),
])
def test_bad_files_are_one_line_errors_naming_the_file(tmp_path, make, fragment):
    path = make(tmp_path)
    with pytest.raises(ValueError, match=re.escape(fragment)) as info:
        load_embeddings(path)
    assert "\n" not in str(info.value)


def test_expected_describes_every_format():
    assert set(EXPECTED) == set(FORMATS)
