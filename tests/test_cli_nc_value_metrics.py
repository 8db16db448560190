"""Tests of ``ncgeom nc-value`` and ``ncgeom metrics``: outputs parse and match independent values;
every invalid input exits with code 2 and exactly one line on stderr, never a traceback.

Most cases call :func:`ncgeom.cli.main.main` in-process (capsys); a few run the installed console script
in a subprocess, which also checks the entry point and that nothing else reaches stdout/stderr.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import run_main
from numpy.testing import assert_allclose
from scipy.stats import binom

from ncgeom.geometry import simplex_etf
from ncgeom.metrics import METRIC_NAMES, nc_metrics

SCRIPT = Path(sys.executable).with_name("ncgeom")
# closed forms in float64 vs the package's log-space evaluation: a few eps of relative error
RTOL = 1e-12


def run_script(*args: str) -> tuple[int, str, str]:
    proc = subprocess.run([str(SCRIPT), *args], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONWARNINGS": "ignore"})
    return proc.returncode, proc.stdout, proc.stderr


def assert_usage_error(code, out, err, command, fragment):
    assert code == 2
    assert out == ""
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"ncgeom {command}: error: "), lines[0]
    assert fragment in lines[0], lines[0]
    assert "Traceback" not in err


# ------------------------------------------------------------------ nc-value
def binomial_infonce(c, k, p, tau):
    """sum_j Binom(k, j; p) log(1 + j + (k - j) e^{-C/((C-1) tau)}), docs/theory.md section 5."""
    j = np.arange(k + 1)
    return float(np.sum(binom.pmf(j, k, p) * np.log1p(j + (k - j) * math.exp(-c / ((c - 1) * tau)))))


@pytest.mark.parametrize(
    "argv, expected, collision",
    [
        (["--setting", "scl", "--psi", "infonce", "--classes", "10", "--num-negatives", "5", "--tau", "0.5"],
         math.log1p(5 * math.exp(-10 / (9 * 0.5))), 0.0),
        (["--setting", "hscl", "--psi", "infonce", "--classes", "10", "--num-negatives", "5", "--tau", "0.5",
          "--beta", "7"], math.log1p(5 * math.exp(-10 / (9 * 0.5))), 0.0),  # tilting changes nothing at NC
        (["--setting", "scl", "--psi", "infonce-mean", "--classes", "10", "--num-negatives", "256"],
         math.log1p(math.exp(-10 / 9)), 0.0),  # 0.2846, the authors' baseline
        (["--setting", "ucl", "--psi", "infonce", "--classes", "4", "--num-negatives", "2", "--tau", "0.5"],
         0.4145938208, 0.25),  # docs/theory.md section 6 example, also binomial_infonce(4, 2, 1/4, 0.5)
        (["--setting", "scl", "--psi", "triplet", "--classes", "3", "--num-negatives", "4", "--margin", "2"],
         2 - 3 / 2, 0.0),
        (["--setting", "scl", "--psi", "triplet", "--classes", "3", "--num-negatives", "4"], 0.0, 0.0),
    ],
)
def test_nc_value_json_matches_closed_forms(argv, expected, collision, capsys):
    code, out, err = run_main(["nc-value", *argv, "--json"], capsys)
    assert code == 0 and err == ""
    result = json.loads(out)
    assert set(result) == {"value", "setting", "loss", "num_classes", "num_negatives", "beta", "tau", "margin",
                           "collision_probability"}
    assert_allclose(result["value"], expected, rtol=1e-9 if expected == 0.4145938208 else RTOL, atol=1e-15)
    assert_allclose(result["collision_probability"], collision, rtol=RTOL)
    assert result["setting"] == argv[1] and result["loss"] == argv[3]
    assert result["num_classes"] == int(argv[5]) and result["num_negatives"] == int(argv[7])


def test_nc_value_ucl_and_hucl_are_binomial_mixtures(capsys):
    c, k, tau, beta = 5, 6, 0.7, 2.0
    for setting, p in [("ucl", 1 / c),
                       ("hucl", math.exp(beta) / (math.exp(beta) + (c - 1) * math.exp(-beta / (c - 1))))]:
        argv = ["nc-value", "--setting", setting, "--psi", "infonce", "--classes", str(c), "--num-negatives", str(k),
                "--tau", str(tau), "--beta", str(beta), "--json"]
        code, out, _ = run_main(argv, capsys)
        result = json.loads(out)
        assert code == 0
        assert_allclose(result["collision_probability"], p, rtol=RTOL)
        assert_allclose(result["value"], binomial_infonce(c, k, p, tau), rtol=1e-10)
        assert result["beta"] == beta and result["tau"] == tau and result["margin"] == 1.0


def test_nc_value_human_table(capsys):
    code, out, err = run_main(["nc-value", "--setting", "ucl", "--psi", "infonce", "--classes", "4",
                               "--num-negatives", "2", "--tau", "0.5"], capsys)
    assert code == 0 and err == ""
    rows = {line.split("  ")[0]: line.split() for line in out.splitlines()}  # label, then 2+ spaces
    assert rows["NC value"][2] == "0.4145938208"
    assert rows["collision probability"][2] == "0.25"
    assert "unused by infonce" in " ".join(rows["margin"]) and "unused by ucl" in " ".join(rows["beta"])


@pytest.mark.parametrize(
    "change, fragment",
    [
        ({"--classes": "1"}, "--classes must be an integer >= 2, got 1"),
        ({"--classes": "-3"}, "--classes must be an integer >= 2"),
        ({"--num-negatives": "0"}, "--num-negatives must be an integer >= 1, got 0"),
        ({"--tau": "0"}, "--tau must be a finite real number > 0.0"),
        ({"--tau": "-1"}, "--tau must be a finite real number > 0.0"),
        ({"--tau": "nan"}, "--tau must be a finite real number"),
        ({"--beta": "-0.5"}, "--beta must be a finite real number >= 0.0"),
        ({"--beta": "inf"}, "--beta must be a finite real number"),
        ({"--setting": "scl2"}, "argument --setting: invalid choice: 'scl2'"),
        ({"--psi": "supcon"}, "argument --psi: invalid choice: 'supcon'"),
        ({"--classes": "2.5"}, "argument --classes: invalid int value: '2.5'"),
        ({"--num-negatives": None}, "the following arguments are required: --num-negatives"),
    ],
)
def test_nc_value_invalid_input_exits_2_with_one_line(change, fragment, capsys):
    opts = {"--setting": "hucl", "--psi": "infonce", "--classes": "5", "--num-negatives": "3", "--beta": "1",
            "--tau": "1"}
    opts.update(change)
    argv = ["nc-value"] + [x for key, value in opts.items() if value is not None for x in (key, value)]
    assert_usage_error(*run_main(argv, capsys), "nc-value", fragment)


def test_nc_value_console_script():
    code, out, err = run_script("nc-value", "--setting", "scl", "--psi", "infonce", "--classes", "3",
                                "--num-negatives", "1", "--json")
    assert code == 0 and err == ""
    assert_allclose(json.loads(out)["value"], math.log1p(math.exp(-1.5)), rtol=RTOL)
    assert_usage_error(*run_script("nc-value", "--setting", "scl", "--psi", "infonce", "--classes", "3",
                                   "--num-negatives", "1", "--tau", "0"), "nc-value", "--tau")


# ------------------------------------------------------------------ metrics
@pytest.fixture
def embeddings(tmp_path):
    rng = np.random.default_rng(0)
    c, d = 5, 6
    y = np.repeat(np.arange(c), [8, 9, 10, 11, 12])
    z = 1.5 * simplex_etf(c, d, rng=rng)[y] + 0.3 * rng.standard_normal((y.size, d))
    path = tmp_path / "emb.npz"
    np.savez(path, z=z, labels=y)
    return path, z, y


def test_metrics_json_equals_library(embeddings, capsys):
    path, z, y = embeddings
    code, out, err = run_main(["metrics", str(path), "--json"], capsys)
    assert code == 0 and err == ""
    result = json.loads(out)
    assert list(result)[: len(METRIC_NAMES)] == list(METRIC_NAMES)  # the metric names first, then the diagnosis
    assert _metric_part(result) == nc_metrics(z, y).to_dict()  # JSON floats round-trip exactly
    code, out2, _ = run_main(["metrics", str(path), "--json", "--classes", "5"], capsys)
    assert code == 0 and json.loads(out2) == result


def _metric_part(result: dict) -> dict:
    """The metric names of a ``metrics --json`` object (the rest is the diagnosis: verdict, warnings, ...)."""
    return {name: result[name] for name in METRIC_NAMES}


def test_metrics_json_writes_null_for_undefined(tmp_path, capsys):
    path = tmp_path / "same.npz"
    np.savez(path, z=np.ones((4, 3)), labels=np.array([0, 0, 1, 1]))
    code, out, _ = run_main(["metrics", str(path), "--json"], capsys)
    result = json.loads(out)
    assert code == 0 and result["nc1"] is None and result["etf_distance"] is None and result["spectrum"] == [None]
    assert "NaN" not in out and result["verdict"] == "undefined"


def test_metrics_human_table(embeddings, capsys):
    path, z, y = embeddings
    code, out, err = run_main(["metrics", str(path)], capsys)
    assert code == 0 and err == ""
    values = nc_metrics(z, y)
    lines = {line.split()[0]: line for line in out.splitlines()[2:] if line and not line.startswith(" ")}
    for name in METRIC_NAMES:
        assert name in lines, name
    assert lines["ncc_accuracy"].split()[1] == "(inner)" and lines["verdict:"].startswith("verdict: neither")
    assert float(lines["nc1"].split()[1]) == pytest.approx(values.nc1, rel=1e-5)  # printed with 6 digits
    assert "4 values" in lines["spectrum"]
    assert "N = 50 samples, d = 6, C = 5 classes" in out.splitlines()[0]


def _save(path, **arrays):
    np.savez(path, **arrays)
    return str(path)


def test_metrics_invalid_input_exits_2_with_one_line(tmp_path, capsys):
    z, y = np.random.default_rng(1).standard_normal((6, 3)), np.array([0, 0, 1, 1, 2, 2])
    text = tmp_path / "notes.txt"
    text.write_text("not an archive\n")
    np.save(tmp_path / "single.npy", z)
    nan_z = z.copy()
    nan_z[2, 1] = np.nan
    (tmp_path / "text.npz").write_text("not an archive\n")
    (tmp_path / "dir.npz").mkdir()
    cases = [
        ([str(tmp_path / "missing.npz")], "no such file"),
        ([str(tmp_path / "dir.npz")], "is a directory"),
        ([str(text)], "unsupported file type '.txt'; expected .npz: arrays 'z' [N, d] and 'labels' [N]"),
        ([str(tmp_path)], "unsupported file type '(none)'"),
        ([str(tmp_path / "text.npz")], "not a readable .npz archive"),
        ([str(tmp_path / "single.npy")], "holds z only; give the labels with --labels"),
        ([_save(tmp_path / "noz.npz", labels=y)], "no array 'z' in the archive (found 'labels')"),
        ([_save(tmp_path / "nolab.npz", z=z)], "no array 'labels'"),
        ([_save(tmp_path / "nan.npz", z=nan_z, labels=y)], "z must contain only finite values"),
        ([_save(tmp_path / "len.npz", z=z, labels=y[:5])], "labels has length 5 but z has 6 rows"),
        ([_save(tmp_path / "one.npz", z=z, labels=np.zeros(6, int))], "at least 2 classes"),
        ([_save(tmp_path / "flat.npz", z=z[:, 0], labels=y)], "z must be a 2-D array"),
        ([_save(tmp_path / "float.npz", z=z, labels=y + 0.5)], "labels must hold integers"),
        ([_save(tmp_path / "obj.npz", z=np.array([object()] * 6), labels=y)], "cannot read its arrays without unpickling"),
        ([_save(tmp_path / "gap.npz", z=z, labels=np.array([0, 0, 1, 1, 3, 3])), "--classes", "4"],
         "class 2 has no sample (num_classes=4)"),
        ([_save(tmp_path / "big.npz", z=z, labels=y), "--classes", "2"], "labels must lie in 0..1"),
        ([_save(tmp_path / "ok.npz", z=z, labels=y), "--classes", "1"], "--classes must be an integer >= 2"),
    ]
    for argv, fragment in cases:
        assert_usage_error(*run_main(["metrics", *argv], capsys), "metrics", fragment)


def test_metrics_without_classes_accepts_any_integer_labels(tmp_path, capsys):
    z = np.random.default_rng(2).standard_normal((6, 3))
    a = json.loads(run_main(["metrics", _save(tmp_path / "a.npz", z=z, labels=np.array([0, 0, 1, 1, 2, 2])),
                             "--json"], capsys)[1])
    b = json.loads(run_main(["metrics", _save(tmp_path / "b.npz", z=z, labels=np.array([-7, -7, 3, 3, 40, 40])),
                             "--json"], capsys)[1])
    assert a == b


def test_metrics_console_script(embeddings, tmp_path):
    path, z, y = embeddings
    code, out, err = run_script("metrics", str(path), "--json")
    assert code == 0 and err == ""
    assert _metric_part(json.loads(out)) == nc_metrics(z, y).to_dict()
    assert_usage_error(*run_script("metrics", str(tmp_path / "nope.npz")), "metrics", "no such file")


def test_nc_value_choices_match_the_library():
    # The subcommand offers exactly the library's vocabulary (ncgeom.vocabulary), in its order.
    import argparse

    from ncgeom.cli import nc_value
    from ncgeom.vocabulary import PSI_NAMES, SETTINGS

    subparsers = argparse.ArgumentParser().add_subparsers()
    nc_value.register(subparsers)
    sub = subparsers.choices["nc-value"]
    choices = {a.dest: tuple(a.choices) for a in sub._actions if a.choices}
    assert choices == {"setting": SETTINGS, "psi": PSI_NAMES}


# ------------------------------------------------------------------ metrics: input formats
def _metrics_json(argv, capsys):
    code, out, err = run_main(["metrics", *argv, "--json"], capsys)
    assert code == 0 and err == "", err
    return json.loads(out)


def _write_csv(path, rows, header=None):
    lines = [",".join(header)] if header else []
    lines += [",".join(repr(float(x)) if isinstance(x, (float, np.floating)) else str(x) for x in row) for row in rows]
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def test_metrics_every_format_gives_the_library_values(embeddings, tmp_path, capsys):
    import torch

    _, z, y = embeddings
    expected = nc_metrics(z, y).to_dict()
    np.save(tmp_path / "z.npy", z)
    np.save(tmp_path / "y.npy", y)
    torch.save({"z": torch.from_numpy(z), "labels": torch.from_numpy(y)}, tmp_path / "dict.pt")
    torch.save(torch.from_numpy(z), tmp_path / "z.pt")
    torch.save(torch.from_numpy(y), tmp_path / "y.pt")
    # repr(float) round-trips exactly, so the CSV inputs are bit-identical to z
    with_label = _write_csv(tmp_path / "with_label.csv", [[*row, int(lab)] for row, lab in zip(z, y)],
                            header=[f"z{i}" for i in range(z.shape[1])] + ["label"])
    labels_first = _write_csv(tmp_path / "labels_first.csv", [[int(lab), *row] for row, lab in zip(z, y)],
                              header=["labels"] + [f"z{i}" for i in range(z.shape[1])])
    bare = _write_csv(tmp_path / "bare.csv", z)
    y_csv = _write_csv(tmp_path / "y.csv", [[int(lab)] for lab in y], header=["label"])
    cases = [
        [str(tmp_path / "z.npy"), "--labels", str(tmp_path / "y.npy")],
        [str(tmp_path / "dict.pt")],
        [str(tmp_path / "z.pt"), "--labels", str(tmp_path / "y.pt")],
        [str(tmp_path / "z.pt"), "--labels", str(tmp_path / "y.npy")],
        [with_label],
        [labels_first],
        [bare, "--labels", y_csv],
        [str(tmp_path / "z.npy"), "--labels", y_csv],
    ]
    for argv in cases:
        assert _metric_part(_metrics_json(argv, capsys)) == expected, argv


def test_metrics_pt_float32_is_read_in_float64(tmp_path, capsys):
    import torch

    z32 = torch.randn(12, 3, generator=torch.Generator().manual_seed(0))
    y = torch.arange(12) % 3
    torch.save({"z": z32, "labels": y}, tmp_path / "f32.pt")
    assert _metric_part(_metrics_json([str(tmp_path / "f32.pt")], capsys)) == nc_metrics(z32.double().numpy(), y.numpy()).to_dict()


class _Evil:
    """Unpickling this would call print: a .pt file must never be unpickled beyond tensors."""

    def __reduce__(self):
        return (print, ("unpickled!",))


def test_metrics_format_errors_exit_2_with_one_line(tmp_path, capsys):
    import torch

    rng = np.random.default_rng(3)
    z, y = rng.standard_normal((6, 3)), np.array([0, 0, 1, 1, 2, 2])
    np.save(tmp_path / "z.npy", z)
    np.save(tmp_path / "y5.npy", y[:5])
    np.save(tmp_path / "obj.npy", np.array([object()] * 6))
    np.savez(tmp_path / "ok.npz", z=z, labels=y)
    torch.save({"z": torch.from_numpy(z), "targets": torch.from_numpy(y)}, tmp_path / "wrongkey.pt")
    torch.save({"z": torch.from_numpy(z), "labels": y.tolist()}, tmp_path / "list.pt")
    torch.save(torch.from_numpy(z), tmp_path / "z.pt")
    torch.save([1, 2], tmp_path / "a_list.pt")
    torch.save({"z": torch.from_numpy(z), "labels": _Evil()}, tmp_path / "evil.pt")
    (tmp_path / "garbage.pt").write_bytes(b"not a torch file")
    torch.save({"z": torch.from_numpy(z), "labels": torch.from_numpy(y)}, tmp_path / "labels_dict.pt")
    cases = [
        ([str(tmp_path / "z.npy"), "--labels", str(tmp_path / "y5.npy")], "labels has length 5 but z has 6 rows"),
        ([str(tmp_path / "obj.npy"), "--labels", str(tmp_path / "y5.npy")], "not a readable .npy array without unpickling"),
        ([str(tmp_path / "z.npy"), "--labels", str(tmp_path / "y.txt")], "--labels "),
        ([str(tmp_path / "z.npy"), "--labels", str(tmp_path / "nope.npy")], "no such file"),
        ([str(tmp_path / "ok.npz"), "--labels", str(tmp_path / "y5.npy")], "the file has its own labels"),
        ([str(tmp_path / "wrongkey.pt")], "no key 'labels' in the saved dict (found 'z', 'targets')"),
        ([str(tmp_path / "list.pt")], "'labels' is a list, not a tensor"),
        ([str(tmp_path / "z.pt")], "holds z only; give the labels with --labels"),
        ([str(tmp_path / "a_list.pt")], "holds a list; expected torch.save of {'z'"),
        ([str(tmp_path / "evil.pt")], "not readable with torch.load(weights_only=True)"),
        ([str(tmp_path / "garbage.pt")], "not readable with torch.load(weights_only=True)"),
        ([str(tmp_path / "z.pt"), "--labels", str(tmp_path / "labels_dict.pt")], "expected a tensor of labels"),
        ([_write_csv(tmp_path / "short.csv", [[1.0, 2.0, 0], [3.0, 4.0, 1], [5.0, 6.0, 1]],
                     header=["a", "b", "label"]), "--labels", str(tmp_path / "y5.npy")], "the file has its own labels"),
        ([_write_csv(tmp_path / "nolab.csv", z, header=["a", "b", "c"])], "holds z only"),
        ([_write_csv(tmp_path / "word.csv", [[1.0, "x", 0]] * 3, header=["a", "b", "label"])],
         "line 2: 'x' is not a number"),
        ([_write_csv(tmp_path / "ragged.csv", [[1.0, 2.0, 0], [1.0, 0]], header=["a", "b", "label"])],
         "line 3 has 2 columns, the first line 3"),
        ([_write_csv(tmp_path / "two.csv", [[1.0, 0, 0]], header=["a", "label", "labels"])],
         "more than one labels column"),
        ([_write_csv(tmp_path / "len.csv", z), "--labels", str(tmp_path / "y5.npy")], "labels has length 5 but z"),
        ([str(tmp_path / "z.npy"), "--labels", _write_csv(tmp_path / "wide.csv", z)], "3 columns; expected one column"),
        ([_write_csv(tmp_path / "empty.csv", [])], "empty"),
    ]
    for argv, fragment in cases:
        code, out, err = run_main(["metrics", *argv], capsys)
        assert "unpickled!" not in out + err
        assert_usage_error(code, out, err, "metrics", fragment)
