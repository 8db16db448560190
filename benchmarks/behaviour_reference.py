"""A reference set of runs, checks and figures, and a comparison of two such sets: "behaviour unchanged, shown".

``record OUT`` runs, through the installed ``ncgeom`` command only (so the same script records before and after a
refactor of the library), in the folder OUT:

- ``sweep-stacked`` and ``sweep-sequential``: one spec (``reference.toml``, written here) through both engines:
  unconstrained, linear and MLP encoders; SCL, HSCL, UCL, HUCL; label and noise positives; the sampled estimator;
  the authors' convention; shuffled batches (trained one at a time by either engine); metrics every 2 epochs;
- ``train-single``: one ``ncgeom train`` run (MLP, HSCL, float64);
- ``image-full`` (2 epochs, checkpoint every epoch), ``image-resumed`` (1 epoch, then ``--resume --epochs 2``):
  ResNet-18 on a generated CIFAR-10-like folder (the same seed: the two must agree too);
- ``claim1``: ``ncgeom sweep claim1_scl_hscl_nc --scale tiny`` (a sweep with verdicts, claim.json);
- ``verify.json``: ``ncgeom verify --quick --json``;
- ``reproduce``: ``ncgeom reproduce --tiny``.

``compare A B`` walks both folders and compares every file: JSON and JSON-lines with the timing and provenance
fields left out (:data:`VOLATILE_KEYS`), CSV without the wall-time column, ``.npz`` array by array bitwise,
``checkpoint.pt`` tensor by tensor bitwise (read with ``weights_only=True``), PNG byte for byte, ``report.md``
with durations and commit hashes masked. It prints one line per difference and the counts, and exits 1 when
anything differs. ``compare A A2`` of two records of the same code is the control: it must print no difference.

Usage::

    python benchmarks/behaviour_reference.py record /tmp/ref-before
    python benchmarks/behaviour_reference.py record /tmp/ref-after
    python benchmarks/behaviour_reference.py compare /tmp/ref-before /tmp/ref-after
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

#: Keys whose values are times, places or provenance: left out of the comparison wherever they appear.
VOLATILE_KEYS = frozenset({
    "time_s", "wall_time_s", "elapsed_s", "seconds", "provenance", "time_utc", "started", "finished", "duration_s",
    "git_commit", "git_dirty", "hostname", "python", "versions", "platform", "argv", "cwd", "spec_path", "out",
    "out_dir", "path", "table_path", "total_seconds", "wall_s", "cpu_s",
})
#: Keys that name an engine: "batched" and "stacked" are the same engine (renamed, docs/CHANGELOG.md).
ENGINE_KEYS = frozenset({"engine"})
ENGINE_SPELLINGS = {"batched": "stacked"}

REFERENCE_SPEC = '''name = "reference"
description = "behaviour reference: every model kind, setting and estimator path of both engines"

[base]
classes = 4
samples_per_class = 12
test_per_class = 6
input_dim = 8
hidden_dim = 16
batch_size = 16
epochs = 4
metrics_every = 2
lr = 0.02
beta = 2.0
tau = 0.5

[[grid]]
model = ["unconstrained", "linear", "mlp"]
setting = ["scl", "hscl", "ucl", "hucl"]
norm = ["sphere", "ball"]

[[grid]]
model = ["linear", "mlp"]
setting = ["hucl", "ucl"]
positives = ["noise"]

[[grid]]
model = ["unconstrained", "mlp"]
setting = ["hscl", "hucl"]
estimator = ["sampled"]
num_negatives = [3]
psi = ["infonce", "triplet"]

[[grid]]
model = ["unconstrained", "mlp"]
setting = ["hscl", "hucl"]
convention = ["authors"]

[[grid]]
model = ["unconstrained", "mlp"]
setting = ["scl", "hscl"]
batches = ["shuffle"]

[[grid]]
model = ["unconstrained"]
setting = ["hscl"]
init = ["near_nc"]
dtype = ["float64"]

[quick]
seeds = [0, 1]
[full]
seeds = [0, 1]
[tiny]
seeds = [0, 1]
'''


def _ncgeom(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    exe = shutil.which("ncgeom") or str(Path(sys.executable).with_name("ncgeom"))
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    proc = subprocess.run([exe, *args], cwd=cwd, env=env, capture_output=True, text=True)
    print(f"$ ncgeom {' '.join(args)}  -> exit {proc.returncode}", flush=True)
    if proc.returncode not in (0, 1):
        print(proc.stdout[-2000:], proc.stderr[-4000:], sep="\n")
        raise SystemExit(f"ncgeom {args[0]} failed with exit code {proc.returncode}")
    return proc


def _write_cifar(folder: Path) -> None:
    """A CIFAR-10-like folder from the test fixtures, wherever the installed version keeps the writer."""
    for module in ("ncgeom.testing.images", "ncgeom.data.images"):
        try:
            writer = __import__(module, fromlist=["write_cifar_like"]).write_cifar_like
            break
        except (ImportError, AttributeError):
            continue
    else:
        raise SystemExit("no write_cifar_like in ncgeom.testing.images or ncgeom.data.images")
    import numpy as np

    writer(folder, name="cifar10", num_per_class=3, num_test_per_class=2, rng=np.random.default_rng(0))


def record(out: Path) -> None:
    if out.exists():
        raise SystemExit(f"{out} exists: record into a new folder")
    out.mkdir(parents=True)
    (out / "reference.toml").write_text(REFERENCE_SPEC, encoding="utf-8")
    for engine in ("batched", "sequential"):
        _ncgeom("sweep", "reference.toml", "--out", f"sweep-{'stacked' if engine == 'batched' else engine}",
                "--engine", engine, "--workers", "1", "--scale", "quick", cwd=out)
    _ncgeom("train", "--model", "mlp", "--setting", "hscl", "--beta", "3", "--classes", "5", "--samples-per-class", "10",
            "--batch-size", "20", "--epochs", "5", "--dtype", "float64", "--lr", "0.01", "--metrics-every", "2",
            "--out", "train-single", "--quiet", "--json", cwd=out)
    _write_cifar(out / "cifar")
    image = ["--dataset", "cifar10", "--data-dir", "cifar", "--model", "resnet18", "--dim", "9", "--batch-size", "10",
             "--lr", "0.001", "--eval-batch-size", "7", "--quiet", "--json"]
    _ncgeom("train", *image, "--epochs", "2", "--checkpoint-every", "1", "--out", "image-full", cwd=out)
    _ncgeom("train", *image, "--epochs", "1", "--out", "image-resumed", cwd=out)
    _ncgeom("train", *image, "--epochs", "2", "--resume", "--out", "image-resumed", cwd=out)
    claim = _ncgeom("sweep", "claim1_scl_hscl_nc", "--scale", "tiny", "--out", "claim1", "--workers", "1", cwd=out)
    (out / "claim1-stdout.txt").write_text(claim.stdout, encoding="utf-8")
    verify = _ncgeom("verify", "--quick", "--json", cwd=out)
    (out / "verify.json").write_text(verify.stdout, encoding="utf-8")
    _ncgeom("reproduce", "--tiny", "--out", "reproduce", "--quiet", cwd=out)
    print(f"recorded {sum(1 for p in out.rglob('*') if p.is_file())} files under {out}")


# --- comparison ------------------------------------------------------------------------------------------
def _strip(value):
    if isinstance(value, dict):
        return {k: (ENGINE_SPELLINGS.get(v, v) if k in ENGINE_KEYS else _strip(v))
                for k, v in value.items() if k not in VOLATILE_KEYS}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value


def _json_text(text: str):
    return _strip(json.loads(text)) if text.strip() else None


def _compare_json(a: Path, b: Path) -> str | None:
    if a.suffix == ".jsonl":
        la, lb = a.read_text().splitlines(), b.read_text().splitlines()
        if len(la) != len(lb):
            return f"{len(la)} lines vs {len(lb)}"
        for i, (x, y) in enumerate(zip(la, lb)):
            if _json_text(x) != _json_text(y):
                return f"line {i + 1} differs: {_first_diff(_json_text(x), _json_text(y))}"
        return None
    ja, jb = _json_text(a.read_text()), _json_text(b.read_text())
    return None if ja == jb else f"differs: {_first_diff(ja, jb)}"


def _first_diff(x, y, where: str = "") -> str:
    if isinstance(x, dict) and isinstance(y, dict):
        for k in sorted(set(x) | set(y), key=str):
            if k not in x or k not in y:
                return f"{where}.{k} only in {'B' if k not in x else 'A'}"
            if x[k] != y[k]:
                return _first_diff(x[k], y[k], f"{where}.{k}")
    if isinstance(x, list) and isinstance(y, list) and len(x) == len(y):
        for i, (u, v) in enumerate(zip(x, y)):
            if u != v:
                return _first_diff(u, v, f"{where}[{i}]")
    return f"{where or 'value'}: {str(x)[:120]!r} vs {str(y)[:120]!r}"


def _compare_csv(a: Path, b: Path) -> str | None:
    def rows(p: Path):
        table = list(csv.reader(io.StringIO(p.read_text())))
        if not table:
            return table
        keep = [i for i, h in enumerate(table[0]) if h not in VOLATILE_KEYS]
        return [[r[i] for i in keep if i < len(r)] for r in table]
    ra, rb = rows(a), rows(b)
    return None if ra == rb else f"differs: {_first_diff(ra, rb)}"


def _compare_npz(a: Path, b: Path) -> str | None:
    import numpy as np

    with np.load(a, allow_pickle=False) as x, np.load(b, allow_pickle=False) as y:
        if sorted(x.files) != sorted(y.files):
            return f"members {sorted(x.files)} vs {sorted(y.files)}"
        for k in x.files:
            u, v = x[k], y[k]
            if u.dtype != v.dtype or u.shape != v.shape or u.tobytes() != v.tobytes():
                return f"array {k} differs ({u.dtype}{list(u.shape)} vs {v.dtype}{list(v.shape)})"
    return None


def _tensors_equal(x, y, where: str = "") -> str | None:
    import torch

    if isinstance(x, dict) and isinstance(y, dict):
        if set(x) != set(y):
            return f"{where}: keys {sorted(map(str, x))} vs {sorted(map(str, y))}"
        for k in x:
            if k in VOLATILE_KEYS:
                continue
            problem = _tensors_equal(x[k], y[k], f"{where}.{k}")
            if problem:
                return problem
        return None
    if isinstance(x, (list, tuple)) and isinstance(y, (list, tuple)):
        if len(x) != len(y):
            return f"{where}: {len(x)} items vs {len(y)}"
        for i, (u, v) in enumerate(zip(x, y)):
            problem = _tensors_equal(u, v, f"{where}[{i}]")
            if problem:
                return problem
        return None
    if isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor):
        same = x.dtype == y.dtype and x.shape == y.shape and bool(torch.equal(x, y) or (x.isnan() == y.isnan()).all()
                                                                  and torch.equal(x.nan_to_num(), y.nan_to_num()))
        return None if same else f"{where}: tensors differ"
    return None if x == y else f"{where}: {x!r} vs {y!r}"


def _compare_checkpoint(a: Path, b: Path) -> str | None:
    import torch

    x = torch.load(a, map_location="cpu", weights_only=True)
    y = torch.load(b, map_location="cpu", weights_only=True)
    return _tensors_equal(x, y)


_MASKS = [
    (re.compile(r"\b\d+(\.\d+)?\s*(s|ms|min)\b"), "<time>"),
    (re.compile(r"\b[0-9a-f]{7,40}\b(\+dirty)?"), "<hash>"),
    (re.compile(r"\d{4}-\d\d-\d\dT[\d:.+Z-]+"), "<date>"),
    (re.compile(r"python [\d.]+|torch [\w.+]+"), "<version>"),
    (re.compile(r"(/tmp|/work)/[^\s)`'\"]+"), "<path>"),
]


def _without_time_columns(lines: list[str]) -> list[str]:
    """Markdown table rows with the cells of a "seconds" column blanked (stage and check timings)."""
    out, drop = [], None
    for line in lines:
        if not line.startswith("|"):
            drop = None
            out.append(line)
            continue
        cells = line.split("|")
        if drop is None:
            drop = {i for i, c in enumerate(cells) if c.strip() in ("seconds", "time", "wall")}
        out.append("|".join("" if i in drop else c for i, c in enumerate(cells)))
    return out


def _compare_text(a: Path, b: Path) -> str | None:
    def masked(p: Path) -> list[str]:
        text = p.read_text()
        for pattern, repl in _MASKS:
            text = pattern.sub(repl, text)
        return _without_time_columns(text.splitlines())
    la, lb = masked(a), masked(b)
    if la == lb:
        return None
    for i, (x, y) in enumerate(zip(la, lb)):
        if x != y:
            return f"line {i + 1}: {x[:120]!r} vs {y[:120]!r}"
    return f"{len(la)} lines vs {len(lb)}"


def _compare_bytes(a: Path, b: Path) -> str | None:
    return None if a.read_bytes() == b.read_bytes() else "bytes differ"


def _comparer(path: Path):
    name = path.name
    if name.endswith((".json", ".jsonl")):
        return _compare_json
    if name.endswith(".csv"):
        return _compare_csv
    if name.endswith(".npz"):
        return _compare_npz
    if name == "checkpoint.pt":
        return _compare_checkpoint
    if name.endswith((".md", ".txt", ".toml")):
        return _compare_text
    if name.endswith(".pdf"):
        return None  # matplotlib writes a creation date into PDFs; the PNG beside each is compared
    return _compare_bytes


def _files(root: Path) -> set[str]:
    skip = ("/.lock", "/cifar/")
    out = set()
    for p in root.rglob("*"):
        rel = "/" + str(p.relative_to(root))
        if p.is_file() and not any(s in rel for s in skip) and not p.name.startswith("."):
            out.add(rel[1:])
        elif p.is_file() and "/.stages/" in rel:
            out.add(rel[1:])
    return out


def compare(a: Path, b: Path) -> int:
    fa, fb = _files(a), _files(b)
    problems = [f"only in A: {f}" for f in sorted(fa - fb)] + [f"only in B: {f}" for f in sorted(fb - fa)]
    counts: dict[str, int] = {}
    for rel in sorted(fa & fb):
        fn = _comparer(Path(rel))
        if fn is None:
            continue
        kind = fn.__name__.removeprefix("_compare_")
        counts[kind] = counts.get(kind, 0) + 1
        try:
            problem = fn(a / rel, b / rel)
        except (ValueError, OSError, zipfile.BadZipFile, RuntimeError) as exc:
            problem = f"unreadable: {type(exc).__name__}: {exc}"
        if problem:
            problems.append(f"{rel}: {problem}")
    for line in problems:
        print(line)
    print(f"compared {sum(counts.values())} files ({', '.join(f'{v} {k}' for k, v in sorted(counts.items()))}); "
          f"{len(problems)} difference(s)")
    return 1 if problems else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    rec = sub.add_parser("record", help="run the reference set into a new folder")
    rec.add_argument("out", type=Path)
    cmp_ = sub.add_parser("compare", help="compare two recorded folders (exit 1 on any difference)")
    cmp_.add_argument("a", type=Path)
    cmp_.add_argument("b", type=Path)
    cmp_.add_argument("--ignore", default="", metavar="KEYS",
                      help="comma-separated JSON keys added or changed on purpose since A (left out like the timings)")
    args = parser.parse_args()
    if args.command == "record":
        record(args.out.absolute())
        return 0
    global VOLATILE_KEYS
    VOLATILE_KEYS = VOLATILE_KEYS | {k for k in args.ignore.split(",") if k}
    return compare(args.a, args.b)


if __name__ == "__main__":
    sys.exit(main())
