"""Bad input to the CLI and the library: one line, exit 2, no traceback, nothing written (docs/reliability.md).

The corpus is generated: for every subcommand and every numeric option, each bad value of
:data:`BAD_VALUES` that the option's range excludes (negative, zero, huge like 1e9 and 10^30, nan, inf,
an overflowing float, a word, an empty string); for every path option, a missing file, a directory, a
file where a folder belongs, an empty / corrupt / oversized file and a wrong extension; malformed specs
and configs (wrong types, unknown keys, a scalar where a table belongs); huge grids. Each case runs
``ncgeom.cli.main.main(argv)`` in-process and must exit 2 with exactly one line on stderr,
``ncgeom <command>: error: ...``, no "Traceback", and leave its output path absent. A few cases also run
in a subprocess. ``python -m pytest -q tests/test_reliability_inputs.py`` reruns them all;
``test_corpus_size`` states how many there are.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from conftest import run_main

from ncgeom import budget
from ncgeom.campaigns.spec import MAX_GRID_RUNS, MAX_SPEC_BYTES, spec_from_dict
from ncgeom.cli.main import main
from ncgeom.data.embeddings import array_file_headers
from ncgeom.runs import budget as run_budget
from ncgeom.runs.config import Config, config_from_dict
from ncgeom.theory import nc_value

HUGE_INT = "1" + "0" * 30  # 10^30: a valid int for argparse, bounded by the memory budget or a range
BAD_VALUES = {"negative": "-1", "zero": "0", "huge_1e9": "1e9", "huge_1e30": HUGE_INT, "nan": "nan",
              "inf": "inf", "overflow": "1e400", "word": "ten", "empty": ""}
ALWAYS_BAD = ("nan", "inf", "overflow", "word", "empty")  # for every numeric option (1e9 too for an int)


@dataclass(frozen=True)
class Case:
    family: str
    name: str
    command: str
    argv: Callable[[Path], list[str]]
    out: str | None = None  # output path (relative to tmp_path) that must not exist afterwards


def _numeric(family, command, base, option, *, integer, bad, extra=()):
    """Cases for one numeric option: ALWAYS_BAD values plus the range-specific ``bad`` keys."""
    keys = [*ALWAYS_BAD, *(("huge_1e9",) if integer else ()), *bad]
    for key in dict.fromkeys(keys):
        value = BAD_VALUES[key]
        yield Case(family, f"{command} {option}={key}", command,
                   lambda tmp, o=option, v=value: [*base(tmp), *extra, f"{o}={v}"])


def _cases() -> list[Case]:
    cases: list[Case] = []
    # ------------------------------------------------------------------ nc-value numeric options
    def nc_base(tmp):
        return ["nc-value", "--setting", "ucl", "--psi", "infonce"]

    nc_options = {"--classes": (True, ("negative", "zero")), "--num-negatives": (True, ("negative", "zero", "huge_1e30")),
                  "--beta": (False, ("negative",)), "--tau": (False, ("negative", "zero")), "--margin": (False, ())}
    for option, (integer, bad) in nc_options.items():
        others = [x for o in nc_options if o != option and o in ("--classes", "--num-negatives") for x in (o, "3")]
        cases += _numeric("numeric options", "nc-value", nc_base, option, integer=integer, bad=bad, extra=others)

    # ------------------------------------------------------------------ train numeric options (one per Config field)
    def train_base(tmp):
        return ["train", "--quiet", "--out", str(tmp / "run")]

    ints = {"classes": ("negative", "zero", "huge_1e30"), "samples_per_class": ("negative", "zero", "huge_1e30"),
            "test_per_class": ("negative", "huge_1e30"), "input_dim": ("negative", "zero"),
            "dim": ("negative", "zero", "huge_1e30"), "hidden_dim": ("negative", "zero"), "depth": ("negative", "zero"),
            "epochs": ("negative", "zero", "huge_1e30"), "batch_size": ("negative", "zero", "huge_1e30"),
            "metrics_every": ("negative", "zero"), "seed": ("negative",), "num_negatives": ("negative", "zero")}
    reals = {"beta": ("negative",), "tau": ("negative", "zero"), "margin": (), "init_scale": ("negative", "zero"),
             "init_noise": ("negative",), "separation": ("negative",), "spread": ("negative", "zero"),
             "imbalance": ("negative", "zero"), "test_fraction": ("negative", "zero", "huge_1e9"),
             "noise_scale": ("negative",), "lr": ("negative", "zero"), "weight_decay": ("negative",)}
    for field, bad in ints.items():
        cases += _numeric("numeric options", "train", train_base, "--" + field.replace("_", "-"), integer=True,
                          bad=bad)
    for field, bad in reals.items():
        cases += _numeric("numeric options", "train", train_base, "--" + field.replace("_", "-"), integer=False,
                          bad=bad)
    # sizes that only allocate in some models / estimators: huge there
    for option, extra in [("--hidden-dim", ["--model", "mlp"]), ("--depth", ["--model", "mlp"]),
                          ("--input-dim", ["--model", "linear"]),
                          ("--num-negatives", ["--estimator", "sampled", "--psi", "infonce"])]:
        cases.append(Case("memory budget", f"train {option}=1e30 {' '.join(extra)}", "train",
                          lambda tmp, o=option, e=extra: [*train_base(tmp), *e, o, HUGE_INT], out="run"))
    cases += _numeric("numeric options", "train", train_base, "--threads", integer=True,
                      bad=("negative", "zero", "huge_1e30"))

    # ------------------------------------------------------------------ bench numeric options
    def bench_base(tmp):
        return ["bench", "--no-memory", "--quiet", "--repeats", "1", "--batch-sizes", "8", "--dim", "4"]

    bench_ints = {"--batch-sizes": ("negative", "zero", "huge_1e30"), "--dim": ("negative", "zero", "huge_1e30"),
                  "--classes": ("negative", "zero", "huge_1e30"), "--repeats": ("negative", "zero", "huge_1e30"),
                  "--threads": ("negative", "zero", "huge_1e30"), "--block-size": ("negative", "zero", "huge_1e30"),
                  "--skip-dense-at": ("negative", "zero")}
    for option, bad in bench_ints.items():
        cases += _numeric("numeric options", "bench", bench_base, option, integer=True, bad=bad)
    cases += _numeric("numeric options", "bench", bench_base, "--tau", integer=False, bad=("negative", "zero"))

    # ------------------------------------------------------------------ sweep / reproduce / metrics numeric options
    def sweep_base(tmp):
        return ["sweep", "claim1_scl_hscl_nc", "--scale", "tiny", "--out", str(tmp / "sw")]

    cases += _numeric("numeric options", "sweep", sweep_base, "--workers", integer=True, bad=("negative", "zero"))

    def repro_base(tmp):
        return ["reproduce", "--tiny", "--out", str(tmp / "rp")]

    cases += _numeric("numeric options", "reproduce", repro_base, "--workers", integer=True, bad=("negative", "zero"))

    def metrics_base(tmp):
        return ["metrics", _good_npz(tmp)]

    cases += _numeric("numeric options", "metrics", metrics_base, "--classes", integer=True,
                      bad=("negative", "zero", "huge_1e30"))

    # ------------------------------------------------------------------ --max-memory on every budgeted command
    bases = {"nc-value": lambda tmp: [*nc_base(tmp), "--classes", "3", "--num-negatives", "2"], "train": train_base,
             "bench": bench_base, "sweep": sweep_base, "reproduce": repro_base, "metrics": metrics_base}
    for command, base in bases.items():
        for value in ("-1", "0", "ten", "1e9", "nan", "8Q", "", "2000P"):
            cases.append(Case("memory budget", f"{command} --max-memory={value!r}", command,
                              lambda tmp, b=base, v=value: [*b(tmp), f"--max-memory={v}"]))
    # sizes above a small budget
    cases += [
        Case("memory budget", "nc-value k=1e9", "nc-value",
             lambda tmp: [*nc_base(tmp), "--classes", "3", "--num-negatives", "1000000000"]),
        Case("memory budget", "nc-value k=1e6 at 1M", "nc-value",
             lambda tmp: [*nc_base(tmp), "--classes", "3", "--num-negatives", "1000000", "--max-memory", "1M"]),
        Case("memory budget", "train classes=1e9", "train", lambda tmp: [*train_base(tmp), "--classes", "1000000000"],
             out="run"),
        Case("memory budget", "train default at 1K", "train", lambda tmp: [*train_base(tmp), "--max-memory", "1K"],
             out="run"),
        Case("memory budget", "train dim=1e7", "train", lambda tmp: [*train_base(tmp), "--dim", "10000000"], out="run"),
        Case("memory budget", "bench B=1e5", "bench", lambda tmp: [*bench_base(tmp), "--batch-sizes", "100000"]),
        Case("memory budget", "bench d=1e9", "bench", lambda tmp: [*bench_base(tmp), "--dim", "1000000000"]),
        Case("memory budget", "metrics default at 1K", "metrics", lambda tmp: [*metrics_base(tmp), "--max-memory", "1K"]),
    ]

    # ------------------------------------------------------------------ metrics files
    for kind, make in _metrics_files().items():
        cases.append(Case("files", f"metrics {kind}", "metrics", lambda tmp, m=make: ["metrics", *m(tmp)]))

    # ------------------------------------------------------------------ train --config / --out
    for kind, text_or_bytes in _config_files().items():
        name, content = text_or_bytes
        cases.append(Case("specs and configs", f"train --config {kind}", "train",
                          lambda tmp, n=name, c=content: [*train_base(tmp), "--config", _write(tmp / n, c)], out="run"))
    cases += [
        Case("files", "train --config missing", "train",
             lambda tmp: [*train_base(tmp), "--config", str(tmp / "none.toml")], out="run"),
        Case("files", "train --config directory", "train",
             lambda tmp: [*train_base(tmp), "--config", _mkdir(tmp / "d.toml")], out="run"),
        Case("files", "train --out is a file", "train",
             lambda tmp: ["train", "--quiet", "--epochs", "1", "--out", _write(tmp / "f", "x")]),
        Case("files", "train --out under a file", "train",
             lambda tmp: ["train", "--quiet", "--epochs", "1", "--out", str(Path(_write(tmp / "g", "x")) / "run")]),
        Case("files", "bench --out directory", "bench", lambda tmp: [*bench_base(tmp), "--out", _mkdir(tmp / "o")]),
        Case("files", "bench --out missing folder", "bench",
             lambda tmp: [*bench_base(tmp), "--out", str(tmp / "no" / "b.json")]),
        Case("files", "bench --out under a file", "bench",
             lambda tmp: [*bench_base(tmp), "--out", str(Path(_write(tmp / "h", "x")) / "b.json")]),
    ]

    # ------------------------------------------------------------------ sweep specs
    for kind, content in _spec_files().items():
        cases.append(Case("specs and configs", f"sweep spec {kind}", "sweep",
                          lambda tmp, c=content: ["sweep", _write(tmp / "claim1.toml", c), "--out", str(tmp / "sw")],
                          out="sw"))
    for kind, content in _huge_grids().items():
        cases.append(Case("huge grids", f"sweep {kind}", "sweep",
                          lambda tmp, c=content: ["sweep", _write(tmp / "big.toml", c), "--out", str(tmp / "sw")],
                          out="sw"))
    cases += [
        Case("files", "sweep spec missing", "sweep", lambda tmp: ["sweep", str(tmp / "no.toml"), "--out", str(tmp / "sw")],
             out="sw"),
        Case("files", "sweep spec directory", "sweep",
             lambda tmp: ["sweep", _mkdir(tmp / "d.toml"), "--out", str(tmp / "sw")], out="sw"),
        Case("files", "sweep spec wrong extension", "sweep",
             lambda tmp: ["sweep", str(tmp / "spec.txt"), "--out", str(tmp / "sw")], out="sw"),
        Case("files", "sweep spec not UTF-8", "sweep",
             lambda tmp: ["sweep", _write(tmp / "b.toml", b"\xff\xfe\x00name"), "--out", str(tmp / "sw")], out="sw"),
        Case("files", "sweep spec oversized", "sweep",
             lambda tmp: ["sweep", _write(tmp / "o.toml", "# " + "x" * MAX_SPEC_BYTES + "\n"), "--out", str(tmp / "sw")],
             out="sw"),
        Case("files", "sweep --out is a file", "sweep",
             lambda tmp: ["sweep", _write(tmp / "ok.toml", _SMALL_SPEC), "--out", _write(tmp / "f", "x")]),
        Case("files", "sweep --out under a file", "sweep",
             lambda tmp: ["sweep", _write(tmp / "ok.toml", _SMALL_SPEC), "--out", str(Path(_write(tmp / "g", "x")) / "o")]),
        Case("files", "reproduce --out is a file", "reproduce",
             lambda tmp: ["reproduce", "--tiny", "--stages", "theory", "--out", _write(tmp / "f", "x")]),
    ]

    # ------------------------------------------------------------------ choices and lists
    cases += [
        Case("choices", "verify --only unknown", "verify", lambda tmp: ["verify", "--only", "nope"]),
        Case("choices", "verify --only empty list", "verify", lambda tmp: ["verify", "--only", ","]),
        Case("choices", "nc-value --setting", "nc-value",
             lambda tmp: ["nc-value", "--setting", "xcl", "--psi", "infonce", "--classes", "3", "--num-negatives", "2"]),
        Case("choices", "train --setting", "train", lambda tmp: [*train_base(tmp), "--setting", "xcl"], out="run"),
        Case("choices", "bench --methods", "bench", lambda tmp: [*bench_base(tmp), "--methods", "fast"]),
        Case("choices", "bench --device", "bench", lambda tmp: [*bench_base(tmp), "--device", "tpu"]),
        Case("choices", "sweep --scale", "sweep", lambda tmp: [*sweep_base(tmp), "--scale", "huge"], out="sw"),
        Case("choices", "sweep unknown shipped spec", "sweep", lambda tmp: ["sweep", "claim99", "--out", str(tmp / "sw")],
             out="sw"),
        Case("choices", "reproduce --stages", "reproduce", lambda tmp: [*repro_base(tmp), "--stages", "nope"], out="rp"),
        Case("choices", "unknown option", "train", lambda tmp: [*train_base(tmp), "--learning-rate", "1"], out="run"),
    ]
    return cases


# ---------------------------------------------------------------------------------------------------- files
_SMALL_SPEC = '[base]\nclasses = 3\nsamples_per_class = 4\nbatch_size = 12\nepochs = 1\n[grid]\nseed = [0]\n'


def _write(path: Path, content: str | bytes) -> str:
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    return str(path)


def _mkdir(path: Path) -> str:
    path.mkdir(exist_ok=True)
    return str(path)


def _good_npz(tmp: Path) -> str:
    path = tmp / "good.npz"
    if not path.exists():
        rng = np.random.default_rng(0)
        np.savez(path, z=rng.standard_normal((6, 3)), labels=np.array([0, 0, 1, 1, 2, 2]))
    return str(path)


def _npy_header_bytes(shape, dtype="<f8") -> bytes:
    """A .npy file of a header only: it declares ``shape`` but holds no data."""
    import io

    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {"descr": dtype, "fortran_order": False, "shape": tuple(shape)})
    return buf.getvalue() if buf.getvalue().startswith(_magic()) else _magic() + buf.getvalue()


def _magic() -> bytes:
    return np.lib.format.magic(1, 0)


def _bomb_npz(path: Path, shape=(2**31, 2), dtype="<f4") -> str:
    """An .npz whose member header declares 16 GiB (the data is not there: it is never read)."""
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("z.npy", _npy_header_bytes(shape, dtype) + b"\x00" * 1024)
        zf.writestr("labels.npy", _npy_header_bytes((shape[0],), "<i8"))
    return str(path)


def _metrics_files() -> dict[str, Callable[[Path], list[str]]]:
    def npz_members(tmp, name, **arrays):
        np.savez(tmp / name, **arrays)
        return [str(tmp / name)]

    z, y = np.ones((6, 3)), np.array([0, 0, 1, 1, 2, 2])
    return {
        "missing .npz": lambda tmp: [str(tmp / "none.npz")],
        "missing .npy": lambda tmp: [str(tmp / "none.npy")],
        "missing .csv": lambda tmp: [str(tmp / "none.csv")],
        "missing .pt": lambda tmp: [str(tmp / "none.pt")],
        "directory .npz": lambda tmp: [_mkdir(tmp / "d.npz")],
        "directory .csv": lambda tmp: [_mkdir(tmp / "d.csv")],
        "wrong extension .txt": lambda tmp: [_write(tmp / "a.txt", "1,2\n")],
        "no extension": lambda tmp: [_write(tmp / "a", "1,2\n")],
        "empty .npz": lambda tmp: [_write(tmp / "e.npz", b"")],
        "empty .npy": lambda tmp: [_write(tmp / "e.npy", b"")],
        "empty .csv": lambda tmp: [_write(tmp / "e.csv", "")],
        "empty .pt": lambda tmp: [_write(tmp / "e.pt", b"")],
        **{f"corrupt {ext} (seed {seed})": (lambda tmp, e=ext, k=seed: [_write(tmp / f"c{e}", _noise(k, 512))])
           for ext in (".npz", ".npy", ".pt", ".csv") for seed in range(3)},
        "corrupt .pt zip (seed 0)": lambda tmp: [_write(tmp / "cz.pt", b"PK\x03\x04" + _noise(0, 508))],
        "truncated .npy header": lambda tmp: [_write(tmp / "t.npy", _magic() + b"\x10")],
        "text .csv": lambda tmp: [_write(tmp / "t.csv", "a,b\nx,y\n")],
        "ragged .csv": lambda tmp: [_write(tmp / "r.csv", "1,2\n3\n")],
        "binary .csv": lambda tmp: [_write(tmp / "b.csv", _noise(7, 256) + b"\xff")],
        "npz saved as .npy": lambda tmp: [_write(tmp / "n.npy", _npz_bytes(tmp))],
        "npy saved as .npz": lambda tmp: [_npy_as_npz(tmp)],
        "object dtype .npz": lambda tmp: npz_members(tmp, "o.npz", z=np.array([object()] * 6), labels=y),
        "object dtype .npy": lambda tmp: [_write(tmp / "o.npy", _npy_header_bytes((6,), "|O") + b"\x80\x04N.")],
        "string labels .npz": lambda tmp: npz_members(tmp, "s.npz", z=z, labels=np.array(list("aabbcc"))),
        "complex z .npz": lambda tmp: npz_members(tmp, "x.npz", z=z.astype(complex), labels=y),
        "no z in .npz": lambda tmp: npz_members(tmp, "nz.npz", labels=y),
        "16 GiB declared in .npz": lambda tmp: [_bomb_npz(tmp / "bomb.npz")],
        "16 GiB declared in .npy": lambda tmp: [_write(tmp / "bomb.npy", _npy_header_bytes((2**31, 2), "<f4"))],
        "1e30 rows declared in .npy": lambda tmp: [_write(tmp / "b30.npy", _npy_header_bytes((10**30, 2)))],
        "oversized .csv at 1K": lambda tmp: [_write(tmp / "big.csv", "1,2,0\n" * 5000), "--max-memory", "1K"],
        "oversized .pt at 1K": lambda tmp: [_write(tmp / "big.pt", b"\x00" * 4096), "--max-memory", "1K"],
        "--labels missing": lambda tmp: [_npy_z(tmp), "--labels", str(tmp / "none.npy")],
        "--labels directory": lambda tmp: [_npy_z(tmp), "--labels", _mkdir(tmp / "l.npy")],
        "--labels wrong extension": lambda tmp: [_npy_z(tmp), "--labels", _write(tmp / "l.txt", "0\n")],
        "--labels corrupt": lambda tmp: [_npy_z(tmp), "--labels", _write(tmp / "l.npy", _noise(1, 64))],
        "--labels 16 GiB declared": lambda tmp: [_npy_z(tmp), "--labels",
                                                 _write(tmp / "lb.npy", _npy_header_bytes((2**31,), "<i8"))],
        "--labels where the file has labels": lambda tmp: [_good_npz(tmp), "--labels", _npy_z(tmp)],
    }


def _noise(seed: int, size: int) -> bytes:
    """``size`` random bytes, the same on every run (a failing case is reproducible)."""
    return np.random.default_rng(seed).bytes(size)


def _npz_bytes(tmp: Path) -> bytes:
    return Path(_good_npz(tmp)).read_bytes()


def _npy_as_npz(tmp: Path) -> str:
    np.save(tmp / "single.npy", np.ones((6, 3)))
    (tmp / "single.npz").write_bytes((tmp / "single.npy").read_bytes())
    return str(tmp / "single.npz")


def _npy_z(tmp: Path) -> str:
    np.save(tmp / "z.npy", np.ones((6, 3)))
    return str(tmp / "z.npy")


def _config_files() -> dict[str, tuple[str, str | bytes]]:
    return {
        "JSON list": ("c.json", "[1, 2, 3]"),
        "JSON string": ("c.json", '"classes"'),
        "JSON null": ("c.json", "null"),
        "invalid JSON": ("c.json", "{classes: 3"),
        "empty JSON": ("c.json", ""),
        "invalid TOML": ("c.toml", "classes = \n"),
        "string for int": ("c.toml", 'classes = "ten"\n'),
        "list for float": ("c.toml", "beta = [1.0, 2.0]\n"),
        "bool for int": ("c.toml", "classes = true\n"),
        "float for int": ("c.toml", "classes = 3.5\n"),
        "table for choice": ("c.toml", "[setting]\nname = 'scl'\n"),
        "TOML array for scalar": ("c.toml", "epochs = [1, 2]\n"),
        "JSON bool for float": ("c.json", '{"lr": true}'),
        "JSON null for int": ("c.json", '{"classes": null}'),
        "unknown key": ("c.toml", "learning_rate = 0.1\n"),
        "wrong extension": ("c.yaml", "classes: 3\n"),
        "not UTF-8": ("c.toml", b"\xff\xfeclasses = 3"),
        "oversized": ("c.toml", "# " + "x" * (2**20 + 10) + "\n"),
    }


def _spec_files() -> dict[str, str]:
    return {
        "grid = 5": "grid = 5\n",
        "grid = 'x'": "grid = 'x'\n",
        "grid array of scalars": "grid = [1, 2]\n",
        "grid value scalar": "[grid]\nbeta = 5.0\n",
        "grid value word": "[[grid]]\nbeta = [1.0, 'ten']\n",
        "grid nested list": "[[grid]]\nseed = [[0, 1]]\n",
        "grid empty list": "[[grid]]\nseed = []\n",
        "grid unknown field": "[[grid]]\nlearning_rate = [0.1]\n",
        "grid bool for int": "[[grid]]\nclasses = [true]\n",
        "base string for int": "[base]\nclasses = 'ten'\n",
        "base array for scalar": "[base]\nbeta = [1.0, 2.0]\n",
        "base bool for int": "[base]\nepochs = true\n",
        "base = 5": "base = 5\n",
        "scale = 5": "quick = 5\n",
        "scale grid = 5": "[quick]\ngrid = 5\n",
        "scale string for float": "[tiny]\nlr = 'fast'\n",
        "unknown top-level key": "colour = 'red'\n",
        "name = 5": "name = 5\n",
        "name with a slash": "name = '../escape'\n",
        "description = list": "description = ['a']\n",
        "claim = 1": "claim = 1\n",
        "invalid TOML": "[base\n",
        "value out of range": "[base]\nlr = -1.0\n",
        "unknown choice": "[base]\nsetting = 'xcl'\n",
        "batch above N": "[base]\nclasses = 3\n[grid]\nbatch_size = [10000]\n",
        "huge classes (memory)": f"[base]\nclasses = {HUGE_INT}\n",
        "huge epochs in a grid (memory)": f"[[grid]]\nepochs = [1, {HUGE_INT}]\n",
    }


def _huge_grids() -> dict[str, str]:
    def grid(fields: int, width: int) -> str:
        names = ["seed", "beta", "lr", "tau", "margin", "spread", "separation", "noise_scale", "init_noise", "weight_decay"]
        lines = ["[[grid]]"]
        for name in names[:fields]:
            values = list(range(width)) if name == "seed" else [float(i + 1) for i in range(width)]
            lines.append(f"{name} = {values}")
        return "\n".join(lines) + "\n"

    over = MAX_GRID_RUNS + 1
    return {
        "10^10 grid": grid(10, 10),
        "10^6 grid": grid(6, 10),
        "10^20 grid": grid(10, 100),
        "limit + 1 in one list": f"[[grid]]\nseed = {list(range(over))}\n",
        "two tables one over the limit": grid(5, 10) + "[[grid]]\nseed = [0]\n",  # 10^5 + 1 runs
        "only the full scale too big": "[[full.grid]]\n" + grid(6, 10).split("\n", 1)[1],
    }


CASES = _cases()


def assert_one_line_error(code, out, err, command: str) -> None:
    assert "Traceback" not in out + err, err
    assert code == 2, (code, err)
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"ncgeom {command}: error: "), lines[0]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_bad_cli_input_is_one_line_and_exit_2(case, tmp_path, capsys, monkeypatch):
    monkeypatch.delenv(budget.ENV_VAR, raising=False)  # the default budget (4 GiB or half the memory)
    monkeypatch.chdir(tmp_path)
    argv = case.argv(tmp_path)
    start = time.perf_counter()
    code, out, err = run_main(argv, capsys)
    elapsed = time.perf_counter() - start
    assert_one_line_error(code, out, err, case.command)
    if case.out is not None:
        assert not (tmp_path / case.out).exists(), f"{case.out} written although the input was refused"
    # refused at the boundary: in seconds (bench imports torch once; everything else is milliseconds)
    assert elapsed < 20, elapsed


def test_corpus_size():
    """The counts quoted in docs/reliability.md: at least 200 cases over every family."""
    families: dict[str, int] = {}
    for c in CASES:
        families[c.family] = families.get(c.family, 0) + 1
    assert len(CASES) >= 200 and len({c.name for c in CASES}) == len(CASES), families
    assert set(families) == {"numeric options", "memory budget", "files", "specs and configs", "huge grids",
                             "choices"}, families
    assert {c.command for c in CASES} == {"nc-value", "metrics", "verify", "train", "sweep", "bench", "reproduce"}


# ---------------------------------------------------------------------------------------------------- accepted
def test_huge_but_cheap_values_are_computed(capsys):
    """nc-value's cost is O(k) and O(1) in C: C = 10^30 is a fine input (exit 0, a finite value)."""
    code, out, err = run_main(["nc-value", "--setting", "ucl", "--psi", "infonce", "--classes", HUGE_INT,
                               "--num-negatives", "3", "--json"], capsys)
    assert code == 0 and err == ""
    value = json.loads(out)["value"]
    # C -> inf: p = 1/C -> 0 and -C/(C-1) -> -1, so the value tends to log(1 + 3 e^-1)
    np.testing.assert_allclose(value, np.log1p(3 * np.exp(-1.0)), rtol=1e-12)


def test_refusals_are_instant():
    """A 10^10 grid and k = 10^9 negatives are refused in milliseconds, before any expansion or allocation."""
    start = time.perf_counter()
    with pytest.raises(ValueError, match="10000000000 runs"):
        spec_from_dict({"grid": {k: list(range(10)) for k in ("seed", "beta", "lr", "tau", "margin", "spread",
                                                               "separation", "noise_scale", "init_noise",
                                                               "weight_decay")}}, path="big.toml")
    with pytest.raises(ValueError, match=r"classes must be an integer in \[2, 1000000\]"):  # MAX_CLASSES
        Config(classes=10**9)
    assert time.perf_counter() - start < 1.0


def test_large_allowed_grid_is_validated_fast():
    """3 x 10^5 points (10^5 per scale, the limit) validate in seconds: each uncoupled value is checked once."""
    start = time.perf_counter()
    spec = spec_from_dict({"base": {"epochs": 1}, "grid": {"seed": list(range(1000)),
                                                          "beta": [float(b) for b in range(100)]}}, path="ok.toml")
    assert time.perf_counter() - start < 5.0
    assert spec.grids[0]["seed"][-1] == 999


def test_debug_flag_shows_the_traceback_before_or_after_the_command(capsys):
    argv = ["nc-value", "--setting", "ucl", "--psi", "infonce", "--classes", "1", "--num-negatives", "2"]
    for where in (["--debug", *argv], [*argv, "--debug"]):
        with pytest.raises(ValueError, match="--classes must be an integer >= 2"):
            main(where)
    code, _, err = run_main(argv, capsys)
    assert code == 2 and len(err.splitlines()) == 1


def test_internal_error_is_one_line_exit_1(capsys, monkeypatch):
    import ncgeom.cli.nc_value as nc_cli

    def broken(*args, **kwargs):
        raise ZeroDivisionError("boom")

    monkeypatch.setattr(nc_cli, "nc_value", broken)
    code, out, err = run_main(["nc-value", "--setting", "ucl", "--psi", "infonce", "--classes", "3",
                               "--num-negatives", "2"], capsys)
    assert code == 1 and out == ""
    assert err.splitlines() == ["ncgeom nc-value: error: internal error: ZeroDivisionError: boom "
                                "(rerun with --debug for the traceback)"]


@pytest.mark.parametrize("exc, code, fragment", [
    (KeyboardInterrupt(), 130, "interrupted"),
    (MemoryError(), 2, "not enough memory"),
    (RuntimeError("DefaultCPUAllocator: can't allocate memory: you tried to allocate 1 bytes"), 2, "not enough memory"),
    (OSError(28, "No space left on device", "/full/run/history.jsonl"), 2,
     "/full/run/history.jsonl: No space left on device (the disk is full)"),
    (PermissionError(13, "Permission denied", "/ro/out"), 2, "/ro/out: Permission denied"),
])
def test_exception_kinds_map_to_exit_codes(exc, code, fragment, capsys, monkeypatch):
    import ncgeom.cli.nc_value as nc_cli

    def raising(*args, **kwargs):
        raise exc

    monkeypatch.setattr(nc_cli, "nc_value", raising)
    got, out, err = run_main(["nc-value", "--setting", "ucl", "--psi", "infonce", "--classes", "3",
                              "--num-negatives", "2"], capsys)
    assert got == code and out == "" and len(err.splitlines()) == 1 and fragment in err, err


def test_max_memory_reaches_the_budget_and_is_restored(capsys, monkeypatch):
    monkeypatch.delenv(budget.ENV_VAR, raising=False)
    argv = ["nc-value", "--setting", "scl", "--psi", "infonce", "--classes", "3", "--num-negatives", "100000"]
    assert run_main([*argv, "--max-memory", "1M"], capsys)[0] == 2  # 6.4 MB needed
    assert run_main(["--max-memory", "64M", *argv], capsys)[0] == 0
    monkeypatch.setenv(budget.ENV_VAR, "1M")
    assert run_main(argv, capsys)[0] == 2
    assert run_main([*argv, "--max-memory", "64M"], capsys)[0] == 0
    assert os.environ[budget.ENV_VAR] == "1M"


# ---------------------------------------------------------------------------------------------------- subprocess
SUBPROCESS_CASES = [
    ("nc-value", ["nc-value", "--setting", "ucl", "--psi", "infonce", "--classes", "3", "--num-negatives", "1000000000"]),
    ("train", ["train", "--classes", HUGE_INT, "--quiet"]),
    ("metrics", None),  # the 16 GiB .npz, built in the test
    ("sweep", None),  # grid = 5
]


@pytest.mark.parametrize("command, argv", SUBPROCESS_CASES, ids=[c for c, _ in SUBPROCESS_CASES])
def test_bad_input_in_a_subprocess(command, argv, tmp_path):
    if command == "metrics":
        argv = ["metrics", _bomb_npz(tmp_path / "bomb.npz")]
    elif command == "sweep":
        argv = ["sweep", _write(tmp_path / "s.toml", "grid = 5\n"), "--out", str(tmp_path / "sw")]
    env = {k: v for k, v in os.environ.items() if k != budget.ENV_VAR}
    proc = subprocess.run([sys.executable, "-m", "ncgeom.cli.main", *argv], capture_output=True, text=True,
                          timeout=120, env=env, cwd=tmp_path)
    assert_one_line_error(proc.returncode, proc.stdout, proc.stderr, command)
    assert not (tmp_path / "sw").exists()


def test_debug_in_a_subprocess_prints_a_traceback(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "ncgeom.cli.main", "--debug", "sweep", _write(tmp_path / "s.toml", "grid = 5\n"),
                           "--out", str(tmp_path / "sw")], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1 and "Traceback" in proc.stderr and "grid: expected a table" in proc.stderr


# ---------------------------------------------------------------------------------------------------- library
@pytest.mark.parametrize("call, name", [
    (lambda: nc_value("ucl", num_classes=3, num_negatives=0), "num_negatives"),
    (lambda: nc_value("ucl", num_classes=1, num_negatives=2), "num_classes"),
    (lambda: nc_value("ucl", num_classes=3, num_negatives=2, tau=float("nan")), "tau"),
    (lambda: Config(classes=10**9), "classes"),
    (lambda: Config(epochs=10**30), "epochs"),
    (lambda: Config(batch_size=10**30), "batch_size"),
    (lambda: Config(classes="ten"), "classes"),
    (lambda: config_from_dict({"beta": [1.0]}), "beta"),
    (lambda: config_from_dict([1, 2]), "expected a table"),  # type: ignore[arg-type]
    (lambda: budget.parse_size("8Q"), "--max-memory"),
    (lambda: budget.memory_budget(0), "max_memory"),
    (lambda: run_budget.check_run_memory(Config(), budget=1), "the run needs"),
])
def test_library_rejects_bad_sizes_naming_the_argument(call, name):
    with pytest.raises(ValueError, match=name):
        call()


def test_parse_and_format_sizes():
    assert budget.parse_size("512M") == 512 * 2**20
    assert budget.parse_size("8G") == 8 * 2**30
    assert budget.parse_size("1.5GiB") == 3 * 2**29
    assert budget.parse_size("1000000") == 1_000_000
    assert budget.format_bytes(4 * 2**30) == "4 GiB"
    assert budget.format_bytes(12) == "12 B"
    physical = budget.physical_memory_bytes()
    assert budget.default_budget() == (budget.DEFAULT_CAP_BYTES if physical is None
                                       else min(budget.DEFAULT_CAP_BYTES, physical // 2))


def test_npz_headers_are_read_without_the_data(tmp_path):
    headers = array_file_headers(_bomb_npz(tmp_path / "b.npz"))
    shape, dtype = headers["z"]
    assert shape == (2**31, 2) and dtype == np.dtype("<f4")
    assert budget.array_bytes(shape, dtype.itemsize) == 16 * 2**30
    assert (tmp_path / "b.npz").stat().st_size < 10_000
