"""ncgeom.campaigns.spec and .sweep: specs (shipped and TOML), scales, resumable parallel runs, CSV, Dask, CLI."""

import csv
import json
import multiprocessing
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from pathlib import Path

import pytest

import ncgeom.campaigns.executors as executors
import ncgeom.campaigns.sweep as sweep
import ncgeom.campaigns.units as units
from ncgeom.campaigns.claims import ALL_CLAIMS, PRESETS, ClaimResult
from ncgeom.campaigns.spec import expand, load_spec, run_name, spec_from_dict, spec_names
from ncgeom.campaigns.sweep import run_sweep
from ncgeom.cli.main import main
from ncgeom.vocabulary import SCALES

TINY_SPEC = """
name = "tiny"
description = "two settings x two betas, 2 epochs"
[base]
classes = 3
samples_per_class = 6
batch_size = 18
epochs = 2
[[grid]]
setting = ["scl"]
beta = [0.0]
[[grid]]
setting = ["hscl"]
beta = [1.0, 5.0]
[tiny]
[quick]
epochs = 1
[full]
epochs = 3
[[full.grid]]
setting = ["scl", "ucl"]
seed = [0, 1]
"""


pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py: one torch and one BLAS thread


@pytest.fixture
def spec_file(tmp_path):
    p = tmp_path / "tiny.toml"
    p.write_text(TINY_SPEC)
    return p


def test_all_exports_exist_once():
    assert len(sweep.__all__) == len(set(sweep.__all__))
    for name in sweep.__all__:
        assert hasattr(sweep, name), name


def test_expand_union_of_products_and_scales(spec_file):
    spec = load_spec(spec_file)
    tiny = expand(spec, scale="tiny")  # an empty [tiny] table: the [base] fields and the [[grid]] tables
    assert [(c.setting, c.beta, c.epochs) for c in tiny] == [("scl", 0.0, 2), ("hscl", 1.0, 2), ("hscl", 5.0, 2)]
    assert {c.epochs for c in expand(spec, scale="quick")} == {1}
    full = expand(spec, scale="full")
    assert len(full) == 4 and {c.epochs for c in full} == {3} and spec.grid_keys("full") == ("setting", "seed")
    # duplicates collapse
    dup = spec_from_dict({"base": {"classes": 3, "samples_per_class": 6, "batch_size": 18}, "grid": {"seed": [1, 1]}})
    assert len(expand(dup, scale="tiny")) == 1
    with pytest.raises(ValueError, match="scale must be one of"):
        expand(spec, scale="base")  # [base] holds shared fields; it is not a scale


def test_run_names_are_stable_and_distinct(spec_file):
    spec = load_spec(spec_file)
    cfgs = expand(spec, scale="quick")
    names = [run_name(c, spec.grid_keys("quick")) for c in cfgs]
    assert len(set(names)) == len(names) and names[1].startswith("setting=hscl,beta=1,")
    assert names == [run_name(c, spec.grid_keys("quick")) for c in expand(load_spec(spec_file), scale="quick")]


def test_seeds_key_repeats_every_grid_point_of_its_scale():
    base = {"classes": 3, "samples_per_class": 6, "batch_size": 18}
    spec = spec_from_dict({"base": base, "grid": {"beta": [0.0, 1.0]}, "quick": {"seeds": [4, 2, 9]},
                           "full": {"grid": [{"setting": ["ucl"]}, {"setting": ["hucl"], "beta": [5.0]}], "seeds": [0, 1]}})
    quick = expand(spec, scale="quick")
    assert sorted((c.beta, c.seed) for c in quick) == [(b, s) for b in (0.0, 1.0) for s in (2, 4, 9)]
    assert sorted((c.setting, c.seed) for c in expand(spec, scale="full")) == [
        ("hucl", 0), ("hucl", 1), ("ucl", 0), ("ucl", 1)]
    assert [c.seed for c in expand(spec, scale="tiny")] == [0, 0]  # no seeds key: the config's seed
    presets = {c.spec for c in PRESETS.values()}  # GPU-days at the full scale: 3 seeds, the fewest with an interval
    for shipped in spec_names():  # >= 3 seeds per grid point at the quick scale, >= 5 at the full one
        for scale, least in (("quick", 3), ("full", 3 if shipped in presets else 5)):
            points: dict = {}
            for c in expand(load_spec(shipped), scale=scale):
                points.setdefault(c.replace(seed=0), set()).add(c.seed)
            assert min(len(s) for s in points.values()) >= least, (shipped, scale)


@pytest.mark.parametrize("text, where", [
    ("[quick]\nseeds = []\n", "seeds"),
    ("[quick]\nseeds = [1, 1]\n", "distinct"),
    ("[quick]\nseeds = [-1]\n", "seeds"),
    ("[quick]\nseeds = 3\n", "seeds"),
    ("[quick]\nseed = 1\nseeds = [1, 2]\n", "not both"),
    ("[grid]\nseed = [1, 2]\n[quick]\nseeds = [1, 2]\n", "must not list seed"),
])
def test_bad_seeds_are_rejected(tmp_path, text, where):
    p = tmp_path / "bad.toml"
    p.write_text("[base]\nclasses = 3\nsamples_per_class = 6\nbatch_size = 18\n" + text)
    with pytest.raises(ValueError, match=where):
        load_spec(p)


@pytest.mark.parametrize("text, where", [
    ("[base]\nlr = -1.0\n", "lr"),
    ("[base]\nsetting = 'xcl'\n", "setting"),
    ("[grid]\nlearning_rate = [0.1]\n", "learning_rate"),
    ("colour = 'red'\n", "colour"),
    ("[base]\nclasses = 3\n[grid]\nbatch_size = [10000]\n", "batch_size"),
    ("[base\n", "invalid TOML"),
])
def test_bad_specs_are_rejected_before_running(tmp_path, text, where):
    p = tmp_path / "bad.toml"
    p.write_text(text)
    with pytest.raises(ValueError, match=where):
        load_spec(p)


def test_sweep_runs_then_resumes_without_rerunning(spec_file, tmp_path):
    out = tmp_path / "out"
    first = run_sweep(spec_file, out, scale="quick")
    assert [r.status for r in first.runs] == ["completed"] * 3 and not any(r.skipped for r in first.runs)
    stamps = {r.name: (out / r.name / "summary.json").stat().st_mtime_ns for r in first.runs}
    with open(first.table_path) as fh:
        rows = list(csv.DictReader(fh))
    assert [row["run"] for row in rows] == [r.name for r in first.runs]
    assert {"setting", "beta", "etf_distance", "nc_value", "gap", "status"} <= set(rows[0])
    # "kill" one run: its summary.json is gone (as if the process died before the atomic write)
    killed = first.runs[1].name
    (out / killed / "summary.json").unlink()
    second = run_sweep(spec_file, out, scale="quick")
    assert [r.skipped for r in second.runs] == [True, False, True]
    for r in second.runs:
        if r.name != killed:
            assert (out / r.name / "summary.json").stat().st_mtime_ns == stamps[r.name]
    assert not list(out.rglob("*.tmp"))  # atomic writes leave no temp files
    sweep_json = json.loads((out / "sweep.json").read_text())
    assert sweep_json["scale"] == "quick" and len(sweep_json["runs"]) == 3


def test_any_executor_is_accepted(spec_file, tmp_path):
    with ThreadPoolExecutor(max_workers=2) as ex:
        res = run_sweep(spec_file, tmp_path / "t", scale="quick", executor=ex)
    assert [r.status for r in res.runs] == ["completed"] * 3


def test_failed_run_is_recorded_and_retried(spec_file, tmp_path, monkeypatch):
    real = units.train_unit

    def flaky(kind, config_dicts, run_dirs):
        if config_dicts[0]["beta"] == 1.0:
            raise RuntimeError("boom")
        return real(kind, config_dicts, run_dirs)

    monkeypatch.setattr(units, "train_unit", flaky)
    res = run_sweep(spec_file, tmp_path / "f", scale="quick", engine="sequential")
    assert [r.status for r in res.runs] == ["completed", "failed", "completed"]
    assert "boom" in res.failed[0].error
    monkeypatch.setattr(units, "train_unit", real)
    again = run_sweep(spec_file, tmp_path / "f", scale="quick", engine="sequential")
    assert [r.status for r in again.runs] == ["completed"] * 3 and [r.skipped for r in again.runs] == [True, False, True]


def test_failed_stack_fails_all_its_runs_and_is_retried(spec_file, tmp_path, monkeypatch):
    real = units.train_unit

    def flaky(kind, config_dicts, run_dirs):
        if any(c["beta"] == 1.0 for c in config_dicts):
            raise RuntimeError("boom")
        return real(kind, config_dicts, run_dirs)

    monkeypatch.setattr(units, "train_unit", flaky)
    # a two-thread executor: the 3 runs (one stack key) go as two stacks, [scl] and [hscl beta 1, hscl beta 5]
    with ThreadPoolExecutor(max_workers=2) as ex:
        res = run_sweep(spec_file, tmp_path / "f", scale="quick", executor=ex, engine="stacked")
    assert [r.status for r in res.runs] == ["completed", "failed", "failed"]
    assert all("boom" in r.error for r in res.failed) and not (tmp_path / "f" / res.runs[2].name / "summary.json").exists()
    monkeypatch.setattr(units, "train_unit", real)
    again = run_sweep(spec_file, tmp_path / "f", scale="quick", engine="stacked")
    assert [r.status for r in again.runs] == ["completed"] * 3 and [r.skipped for r in again.runs] == [True, False, False]


def test_process_pool_matches_serial_bitwise(spec_file, tmp_path):
    # fork start method: the workers inherit the imports, so the test stays fast. The sequential engine: a
    # float32 stacked run is equal only to rounding across stack compositions (tests/test_sweep_engines.py
    # checks the batched engine across worker counts in float64, where it is bitwise)
    serial = run_sweep(spec_file, tmp_path / "s", scale="quick", engine="sequential")
    with ProcessPoolExecutor(max_workers=2, mp_context=multiprocessing.get_context("fork")) as ex:
        pooled = run_sweep(spec_file, tmp_path / "p", scale="quick", executor=ex, engine="sequential")
    for a, b in zip(serial.runs, pooled.runs):
        assert a.name == b.name
        assert a.summary.final.metrics == b.summary.final.metrics and a.summary.final.loss == b.summary.final.loss


@pytest.mark.slow
def test_default_spawn_process_pool(spec_file, tmp_path):
    serial = run_sweep(spec_file, tmp_path / "s", scale="quick", engine="sequential")
    pooled = run_sweep(spec_file, tmp_path / "p", scale="quick", workers=2, engine="sequential")
    assert [a.summary.final.metrics for a in serial.runs] == [b.summary.final.metrics for b in pooled.runs]


def test_dask_local_cluster(spec_file, tmp_path):
    distributed = pytest.importorskip("dask.distributed")
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False, protocol="tcp://",
                                  host="127.0.0.1", dashboard_address=None) as cluster:  # loopback only
        assert cluster.scheduler_address.startswith("tcp://127.0.0.1:")
        with executors.dask_executor(cluster.scheduler_address) as ex:
            res = run_sweep(spec_file, tmp_path / "d", scale="quick", executor=ex)
    assert [r.status for r in res.runs] == ["completed"] * 3


def test_dask_missing_gives_a_clear_error(monkeypatch):
    import builtins

    real_import = builtins.__import__

    def fake_import(name, *args, **kwargs):
        if name.startswith("dask"):
            raise ImportError("no dask")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", fake_import)
    with pytest.raises(ValueError, match=r"ncgeom\[distributed\]"):
        with executors.dask_executor("tcp://127.0.0.1:1"):
            pass


def test_cli_sweep(spec_file, tmp_path, capsys):
    rc = main(["sweep", str(spec_file), "--out", str(tmp_path / "c"), "--quiet"])
    out = capsys.readouterr().out
    assert rc == 0 and "3/3 runs finished" in out and Path(tmp_path / "c" / "summary.csv").is_file()
    rc = main(["sweep", str(spec_file), "--out", str(tmp_path / "c"), "--quiet", "--json"])
    data = json.loads(capsys.readouterr().out)
    assert rc == 0 and all(r["skipped"] for r in data["runs"])
    bad = tmp_path / "bad.toml"
    bad.write_text("[base]\nlr = -1.0\n")
    rc = main(["sweep", str(bad), "--out", str(tmp_path / "b")])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "lr" in err
    rc = main(["sweep", str(spec_file), "--out", str(tmp_path / "b"), "--workers", "0"])
    assert rc == 2 and "workers" in capsys.readouterr().err


def test_shipped_specs_state_every_scale():
    names = spec_names()
    # claims 1-8 (claim 5 on digits and on a CPU setup) and the three paper presets on CIFAR-100
    assert len(names) == 12 and {c.spec for c in ALL_CLAIMS.values()} == set(names)
    assert all(n.startswith("claim") for n in names if n not in {c.spec for c in PRESETS.values()})
    for name in names:
        spec = load_spec(name)
        assert spec.shipped and spec.name == name
        for scale in SCALES:
            assert spec.scales[scale], f"{name}: no [{scale}] table"
        tiny = expand(spec, scale="tiny")
        assert tiny and max(c.epochs for c in tiny) == 2, name  # the test scale, stated in the spec
        assert len(expand(spec, scale="full")) >= len(expand(spec, scale="quick")) >= len(tiny)
    with pytest.raises(ValueError, match="shipped specs claim1_scl_hscl_nc"):
        load_spec("claim9_nothing")


def test_cli_sweep_lists_and_runs_a_shipped_spec_by_name(tmp_path, capsys, monkeypatch):
    assert main(["sweep", "--list"]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0] for line in listed] == list(spec_names())
    monkeypatch.chdir(tmp_path)  # the spec comes from the package, not from the working directory
    rc = main(["sweep", "claim8_batch_size", "--scale", "tiny", "--out", "c8", "--quiet"])
    out = capsys.readouterr().out
    assert rc == 0 and "claim8_batch_size: 2/2 runs finished" in out and "claim 8 |" in out
    saved = ClaimResult.read(tmp_path / "c8" / "claim.json")  # the format of claims/<id>.json, one owner
    assert {r.claim for r in saved.rows} == {"8"} and saved.rows[-1].setting == "overall"
    assert saved.seeds == "confirmatory" and saved.scale == "tiny"
    assert main(["sweep", "--out", "x"]) == 2
    assert "give a spec" in capsys.readouterr().err
