"""Phase maps (issue 24): the refinement, the classification of runs and cells, the mechanism of a run, the records,
the spec's one-line errors, the theory lines, and a map end to end (docs/theory.md, section 9, "Phase maps")."""

from __future__ import annotations

import itertools
import math
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import run_main
from hypothesis import given
from hypothesis import strategies as st
from numpy.testing import assert_allclose

from ncgeom.metrics.outcome import DC_SPECTRUM
from ncgeom.phase.cells import cell_label, class_counts, run_class
from ncgeom.phase.lattice import MIXED, Lattice
from ncgeom.phase.records import CELLS_FILE, PhaseMap, TheoryLine
from ncgeom.phase.spec import MAX_MAP_RUNS, load_map_spec, map_names, map_spec_from_dict
from ncgeom.runs import Config
from ncgeom.runs.mechanism import effective_rank, mechanism, nc_entry_epoch, rank_drop_epoch
from ncgeom.runs.records import EpochRecord, RunSummary

pytestmark = pytest.mark.usefixtures("one_thread")


# --- the refinement -------------------------------------------------------------------------------------------------

def refine_all(lattice: Lattice, truth) -> tuple[dict, set]:
    """Every label of the final grid by the lattice's refinement against ``truth(i, j)``, and the points trained."""
    labels = {p: truth(*p) for p in lattice.first()}
    trained = set(labels)
    for level in range(lattice.levels, 0, -1):
        step = lattice.refine(level, labels)
        labels.update(step.inferred)
        for p in step.train:
            labels[p] = truth(*p)
            trained.add(p)
    return labels, trained


def test_refine_by_hand():
    """A 3 x 3 grid, one level, corners A A / A B (B at the top right): the naive reading of the rule."""
    lat = Lattice(3, 3, levels=1, refine_x=True, refine_y=True)
    corners = {(0, 0): "A", (2, 0): "A", (0, 2): "A", (2, 2): "B"}
    step = lat.refine(1, corners)
    # the bottom and left edges agree (inferred A); the top and right edges and the centre disagree (trained)
    assert sorted(step.train) == [(1, 1), (1, 2), (2, 1)]
    assert dict(step.inferred) == {(0, 1): "A", (1, 0): "A"}


def test_refine_mixed_corner_is_always_split():
    lat = Lattice(3, 3, levels=1, refine_x=True, refine_y=True)
    step = lat.refine(1, {(0, 0): MIXED, (2, 0): MIXED, (0, 2): MIXED, (2, 2): MIXED})
    assert len(step.train) == 5 and not step.inferred


def test_refine_one_axis_only_bisects_rows():
    lat = Lattice(5, 2, levels=2, refine_x=True, refine_y=False)
    assert lat.first() == [(0, 0), (0, 1), (4, 0), (4, 1)]
    step = lat.refine(2, {(0, 0): "A", (4, 0): "B", (0, 1): "A", (4, 1): "A"})
    assert step.train == ((2, 0),) and dict(step.inferred) == {(2, 1): "A"}


def test_refine_needs_every_corner():
    lat = Lattice(3, 3, levels=1, refine_x=True, refine_y=True)
    with pytest.raises(ValueError, match="labels must hold every point"):
        lat.refine(1, {(0, 0): "A"})


@given(a=st.floats(-1, 1), b=st.floats(-1, 1), c=st.floats(-10, 10), n=st.sampled_from([5, 9, 17]),
       levels=st.integers(1, 3))
def test_refinement_is_exact_on_half_planes(a, b, c, n, levels):
    """A half-plane is convex: a box (or an edge) whose corners lie in it lies in it. So on any two-label map split by
    a straight line the refined map equals the truth at every cell, and trains no more cells than the uniform grid."""
    if (n - 1) % 2 ** levels:
        levels = 1
    lat = Lattice(n, n, levels=levels, refine_x=True, refine_y=True)

    def truth(i, j):
        return "A" if a * i + b * j < c else "B"

    labels, trained = refine_all(lat, truth)
    assert labels == {(i, j): truth(i, j) for i in range(n) for j in range(n)}
    assert len(trained) <= n * n


def test_refinement_saves_runs_along_a_line():
    """On a 17 x 17 grid with one straight boundary the refinement trains a fraction of the cells (<= 40 %)."""
    lat = Lattice(17, 17, levels=3, refine_x=True, refine_y=True)
    labels, trained = refine_all(lat, lambda i, j: "A" if i + 0.5 * j < 9.6 else "B")
    assert len(labels) == 289
    assert len(trained) <= 0.4 * 289


# --- classification -------------------------------------------------------------------------------------------------

def _record(epoch, etf, within, spectrum, *, grad=None):
    metrics = {"etf_distance": etf, "within_class": within, "spectrum": spectrum}
    return EpochRecord(epoch=epoch, loss=None if epoch == 0 else 1.0, nc_value=1.0, gap=None, metrics=metrics,
                       grad_norm=grad)


def _summary(final, *, convergence="converged", status="completed", classes=4, dim=None):
    config = Config(classes=classes, dim=dim, samples_per_class=8, batch_size=8)
    return RunSummary(status=status, message="", final=final, initial=_record(0, 1.0, 1.0, [1.0, 0.5, 0.2]),
                      nc_value=1.0, nc_value_source="test", epochs_run=final.epoch, wall_time_s=1.0, config=config,
                      convergence=convergence)


@pytest.mark.parametrize(("final", "convergence", "status", "decide", "expected"), [
    (_record(10, 0.01, 0.01, [1.0, 0.99, 0.98]), "converged", "completed", "converged", "NC"),
    (_record(10, 0.4, 0.1, [1.0, 0.3, 1e-4]), "converged", "completed", "converged", "DC"),
    (_record(10, 0.3, 0.1, [1.0, 0.6, 0.4]), "converged", "completed", "converged", "neither"),
    (_record(10, 0.01, 0.01, [1.0, 0.99, 0.98]), "still moving", "completed", "converged", "not converged"),
    (_record(10, 0.01, 0.01, [1.0, 0.99, 0.98]), "stalled", "completed", "converged", "not converged"),
    (_record(10, 0.4, 0.1, [1.0, 0.3, 1e-4]), "still moving", "completed", "budget", "DC"),
    (_record(10, 0.01, 0.01, [1.0, 0.99, 0.98]), "converged", "diverged", "budget", "not converged"),
    (_record(10, 0.01, 0.01, [None, None, None]), "converged", "completed", "converged", "undefined"),
])
def test_run_class(final, convergence, status, decide, expected):
    """A run that has not converged is "not converged" under the end-state rule, never coerced into NC or DC; at the
    budget it is read as it is; a diverged run decides nothing under either rule."""
    assert run_class(_summary(final, convergence=convergence, status=status), decide=decide) == expected


def test_run_class_refuses_an_unknown_rule():
    with pytest.raises(ValueError, match="decide must be one of .converged., .budget."):
        run_class(_summary(_record(10, 0.0, 0.0, [1.0, 1.0, 1.0])), decide="sometimes")


def test_cell_label_and_counts():
    assert cell_label(["DC", "DC"]) == "DC"
    assert cell_label(["DC", "not converged", "DC"]) == "mixed"
    assert class_counts(["DC", "NC", "DC"]) == {"NC": 1, "DC": 2}
    with pytest.raises(ValueError, match="at least one run"):
        cell_label([])


# --- the mechanism of a run -----------------------------------------------------------------------------------------

@given(st.lists(st.floats(0.0, 1.0), min_size=1, max_size=12))
def test_effective_rank_against_numpy(values):
    """exp of the Shannon entropy of the normalized spectrum, by numpy on the same values."""
    v = np.array(values)
    if v.sum() <= 0:
        assert effective_rank(values) is None
        return
    p = v / v.sum()
    p = p[p > 0]
    assert_allclose(effective_rank(values), np.exp(-(p * np.log(p)).sum()), rtol=1e-12)
    assert 1.0 - 1e-12 <= effective_rank(values) <= len(values) + 1e-12


def test_mechanism_epochs():
    records = [_record(0, 1.0, 1.0, [1.0, 0.5, 0.2]), _record(5, 0.2, 0.04, [1.0, 0.4, 0.05]),
               EpochRecord(6, 1.0, 1.0, 0.0), _record(10, 0.04, 0.03, [1.0, 0.98, 0.97]),
               _record(15, 0.5, 0.2, [1.0, 0.2, DC_SPECTRUM / 2])]
    assert rank_drop_epoch(records) == 15
    assert nc_entry_epoch(records) == 10
    mech = mechanism(records)
    assert mech.epochs == (0, 5, 10, 15)
    assert_allclose(mech.effective_rank[2], effective_rank([1.0, 0.98, 0.97]))
    assert mech.spectrum_min == (0.2, 0.05, 0.97, DC_SPECTRUM / 2)


# --- specs: the one-line errors -------------------------------------------------------------------------------------

def _spec(**changes):
    raw = {"name": "m", "levels": 1, "x": {"field": "beta", "values": [0.0, 1.0, 2.0]},
           "y": {"field": "dim", "values": [3, 4], "refine": False},
           "base": {"setting": "hucl", "classes": 4, "samples_per_class": 8, "batch_size": 8, "epochs": 2},
           "quick": {"seeds": [0]}, "tiny": {"seeds": [0]}, "full": {"seeds": [0]}}
    for key, value in changes.items():
        if value is None:
            raw.pop(key)
        else:
            raw[key] = value
    return raw


@pytest.mark.parametrize(("changes", "message"), [
    ({"base": {"nonsense": 1}}, "base: unknown config field 'nonsense'"),
    ({"x": {"field": "betta", "values": [0.0, 1.0, 2.0]}}, r"x.field: unknown config field 'betta'"),
    ({"x": {"field": "beta", "values": [0.0]}}, "an axis needs at least two values, got 1"),
    ({"x": {"field": "norm", "values": ["ball", "sphere", "none"], "refine": True}},
     "refine = true needs a numeric axis"),
    ({"x": {"field": "beta", "values": [0.0, 1.0, 2.0, 3.0]}}, r"4 values cannot be refined over 1 level\(s\)"),
    ({"x": {"field": "beta", "values": [2.0, 1.0, 0.0]}}, "strictly increasing"),
    ({"quick": {"seeds": []}}, "quick.seeds: expected a non-empty list of seeds"),
    ({"quick": {"exploratory_seeds": [0, 1], "confirmatory_seeds": [1]}}, "must be disjoint"),
    ({"quick": {}}, "no seeds"),
    ({"quick": {"seeds": list(range(MAX_MAP_RUNS // 6 + 1))}}, "above the limit of"),
    ({"x": {"field": "dim", "values": [3, 4, 5]}}, "both set dim"),
    ({"panel": [{"beta": 1.0}]}, "the panel sets beta, which an axis of the map varies"),
    ({"base": {"seed": 3}}, "seed is not a map field"),
    ({"levels": 1, "x": {"field": "beta", "values": [0.0, 1.0, 2.0], "refine": False}}, "needs an axis to refine"),
    ({"y": {"field": "batch_size", "values": [8, 999], "refine": False}}, r"batch_size=999: batch_size must be"),
    ({"x": None}, r"a map needs two axes, \[x\] and \[y\]"),
    ({"extra": 1}, "unknown key"),
])
def test_bad_specs_are_one_line(changes, message):
    with pytest.raises(ValueError, match=message) as info:
        map_spec_from_dict(_spec(**changes), path="m.toml")
    assert "\n" not in str(info.value)


def test_shipped_maps_load_at_every_scale():
    assert {"phase_classes_batch", "phase_norm_encoder", "phase_hucl_beta_dim"} <= set(map_names())
    for name in map_names():
        spec = load_map_spec(name)
        for scale in ("tiny", "quick", "full"):
            plan = spec.at(scale)
            assert plan.cells() >= 4 and plan.seeds("confirmatory")
        tiny = spec.at("tiny")
        assert tiny.cells() == 4 * len(tiny.panels)  # a 2 x 2 smoke map per panel


def test_first_map_has_64_cells_and_three_seeds_at_the_quick_scale():
    plan = load_map_spec("phase_classes_batch").at("quick")
    assert all(len(p.x) * len(p.y) >= 64 for p in plan.panels)
    assert len(plan.seeds("confirmatory")) == 3 and len(plan.seeds("exploratory")) == 3


@pytest.mark.parametrize(("argv", "message"), [
    (["phase", "nonexistent_map", "--out", "OUT"], "map must be a TOML file or one of the shipped maps"),
    (["phase", "SPEC", "--out", "OUT"], "an axis needs at least two values"),
    (["phase", "phase_classes_batch", "--out", "OUT", "--scale", "huge"], "--scale must be one of"),
    (["phase", "phase_classes_batch", "--out", "OUT", "--workers", "0"], "--workers"),
])
def test_cli_refuses_in_one_line_before_writing(tmp_path, capsys, argv, message):
    spec = tmp_path / "bad.toml"
    spec.write_text('seeds = [0]\n[x]\nfield = "beta"\nvalues = [1.0]\n[y]\nfield = "dim"\nvalues = [3, 4]\n')
    out = tmp_path / "out"
    argv = [str(spec) if a == "SPEC" else str(out) if a == "OUT" else a for a in argv]
    code, stdout, err = run_main(argv, capsys)
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1, err
    assert not out.exists()


def test_cli_lists_the_shipped_maps(capsys):
    code, out, _ = run_main(["phase", "--list"], capsys)
    assert code == 0 and "phase_classes_batch:" in out


# --- the theory lines -----------------------------------------------------------------------------------------------

def test_hucl_lines_are_proofs_check_values_and_constant_above_c():
    """The overlay's values are proofs_check's local threshold at (C, C - 1) and (C, C), carried to d > C."""
    from ncgeom.phase.overlays import theory_lines
    from proofs_check.hucl.local import local_threshold

    plan = map_spec_from_dict(_spec(y={"field": "dim", "values": [3, 4, 5, 6], "refine": False}), path="m").at("quick")
    overlays = theory_lines(plan)
    local = next(line for line in overlays.lines if line.name == "hucl_local_threshold")
    assert local.axis == "x" and local.evidence == "exact"
    assert_allclose(local.values[0], local_threshold(num_classes=4, dim=3).beta, rtol=0, atol=1e-9)
    assert_allclose(local.values[1:], [local_threshold(num_classes=4, dim=4).beta] * 3, rtol=0, atol=1e-9)
    names = {line.name for line in overlays.lines}
    assert {"hucl_global_switch", "batch_loss_threshold", "etf_dimension"} <= names


def test_collapsed_loss_is_the_same_in_larger_dimensions():
    """The reason the lines are carried from d = C to every d > C: C unit vectors in R^(C+3), rotated at random,
    have the loss of their Gram matrix, the same as in R^C (hucl_collapsed_loss computed in both)."""
    import torch

    from ncgeom.losses import make_psi
    from proofs_check.hucl.loss import hucl_collapsed_loss

    rng = np.random.default_rng(3)
    v = rng.standard_normal((4, 4))
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    q, _ = np.linalg.qr(rng.standard_normal((7, 7)))
    lifted = np.hstack([v, np.zeros((4, 3))]) @ q.T
    psi = make_psi("infonce", tau=1.0)
    small = float(hucl_collapsed_loss(torch.as_tensor(v), beta=2.0, num_negatives=1, psi=psi))
    large = float(hucl_collapsed_loss(torch.as_tensor(lifted), beta=2.0, num_negatives=1, psi=psi))
    assert_allclose(large, small, rtol=1e-12)


def test_merge_ratio_line_and_the_lines_that_do_not_apply():
    from ncgeom.phase.overlays import theory_lines
    from proofs_check.ablations.imbalance import merge_ratio

    raw = _spec(x={"field": "imbalance", "values": [1.0, 4.0, 8.0]},
                y={"field": "classes", "values": [3, 4], "refine": False},
                base={"setting": "scl", "samples_per_class": 20, "batch_size": 8, "epochs": 2})
    overlays = theory_lines(map_spec_from_dict(raw, path="m").at("quick"))
    (line,) = overlays.lines
    assert line.name == "merge_ratio" and line.axis == "x"
    assert_allclose(line.values, [merge_ratio(3, "scl"), merge_ratio(4, "scl")])
    raw["base"]["setting"] = "hscl"
    assert not theory_lines(map_spec_from_dict(raw, path="m").at("quick")).lines
    sphere = _spec(base={"setting": "hscl", "classes": 4, "samples_per_class": 8, "batch_size": 8, "epochs": 2})
    notes = theory_lines(map_spec_from_dict(sphere, path="m").at("quick")).notes
    assert any("setting = 'hscl'" in n for n in notes)


def test_theory_line_refuses_unknown_evidence():
    with pytest.raises(ValueError, match="evidence must be one of"):
        TheoryLine(0, "x", "x", "vibes", "x", (1.0,), "here")  # type: ignore[arg-type]


def test_axis_position():
    from ncgeom.phase.figure import axis_position, boundary_segments
    from ncgeom.phase.records import AxisRecord

    axis = AxisRecord("beta", "beta", "beta", ("0", "2", "4"), (0.0, 2.0, 4.0), True, ({}, {}, {}))
    assert axis_position(axis, 3.0) == 1.5 and axis_position(axis, 5.0) is None
    assert boundary_segments({(0, 0): "A", (1, 0): "B"}) == [((0.5, -0.5), (0.5, 0.5))]


# --- a map end to end -----------------------------------------------------------------------------------------------

SMOKE = """
name = "smoke"
levels = 1
[x]
field = "beta"
values = [0.0, 2.0, 4.0]
[y]
field = "dim"
values = [3, 4]
refine = false
[base]
setting = "hucl"
classes = 4
samples_per_class = 8
test_per_class = 2
batch_size = 16
epochs = 10
metrics_every = 2
stop = "converged"
seeds = [0, 1]
"""


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    from ncgeom.phase.run import run_map

    root = tmp_path_factory.mktemp("phase")
    (root / "smoke.toml").write_text(SMOKE)
    result = run_map(root / "smoke.toml", root / "out", scale="quick", figures=True)
    return root, result


def test_map_end_to_end(smoke):
    """10 epochs do not converge: every run is "not converged", so the corners agree and the refinement trains the
    first grid only (4 of 6 cells) and infers the midpoints; the records read back equal."""
    root, result = smoke
    assert result.status == "complete" and result.runs_trained == 8 and result.runs_uniform == 12
    trained = [c for c in result.cells if c.source == "trained"]
    inferred = [c for c in result.cells if c.source == "inferred"]
    assert len(trained) == 4 and len(inferred) == 2 and {c.ix for c in inferred} == {1}
    assert all(c.label == "not converged" for c in result.cells)
    assert all(len(c.runs) == 2 and c.estimates["etf_distance"].n == 2 for c in trained)
    assert all(r.effective_rank and r.steps == r.epochs_run * 2 for c in trained for r in c.runs)
    assert PhaseMap.load(root / "out").to_dict() == result.to_dict()  # (NaN estimates: compared as JSON)
    for name in ("cells.csv", "table.txt", "overlays.json", "phase_map.png", "runs/sweep.json"):
        assert (root / "out" / name).is_file(), name
    assert "lower case: inferred" in (root / "out" / "table.txt").read_text()


def test_map_resumes_at_run_granularity(smoke):
    """A second call trains nothing: every run is found finished (its files unchanged)."""
    from ncgeom.phase.run import run_map

    root, first = smoke
    summaries = sorted((root / "out" / "runs").glob("*/summary.json"))
    stamps = [p.stat().st_mtime_ns for p in summaries]
    again = run_map(root / "smoke.toml", root / "out", scale="quick", figures=False)
    assert [p.stat().st_mtime_ns for p in summaries] == stamps
    assert again.to_dict()["cells"] == first.to_dict()["cells"]


def test_uniform_map_trains_every_cell_and_agrees(smoke, tmp_path):
    from ncgeom.phase.run import run_map

    root, adaptive = smoke
    uniform = run_map(root / "smoke.toml", tmp_path / "u", scale="quick", uniform=True, figures=False)
    assert uniform.runs_trained == 12 and all(c.source == "trained" for c in uniform.cells)
    for a, u in zip(adaptive.cells, uniform.cells):
        assert (a.panel, a.ix, a.iy, a.label) == (u.panel, u.ix, u.iy, u.label)
        if a.source == "trained":  # the same runs, bitwise: the same numbers
            assert a.runs == u.runs


def test_cells_json_refuses_another_shape(smoke, tmp_path):
    root, result = smoke
    data = result.to_dict()
    data["surprise"] = 1
    (tmp_path / CELLS_FILE).write_text(__import__("json").dumps(data))
    with pytest.raises(ValueError, match="cells.json: not a phase map record.*surprise"):
        PhaseMap.load(tmp_path)


def test_cli_runs_the_tiny_map(tmp_path, capsys):
    code, out, err = run_main(["phase", "phase_classes_batch", "--scale", "tiny", "--out", str(tmp_path / "o"),
                               "--quiet"], capsys)
    assert code == 0, err
    assert "SCL: batch size B (rows) x number of classes C (columns)" in out
    record = PhaseMap.load(tmp_path / "o")
    assert record.runs_trained == 8 and len(record.panels) == 2
    assert not math.isnan(record.cells[0].estimates["etf_distance"].mean)


def test_every_cell_of_the_product_is_there(smoke):
    _, result = smoke
    assert {(c.ix, c.iy) for c in result.cells} == set(itertools.product(range(3), range(2)))
    assert Path(result.spec_path or "").name == "smoke.toml"


def test_a_dask_cluster_trains_the_same_map(smoke, tmp_path):
    """The units of a map go to a Dask cluster as to the process pool; the map is the same, run for run."""
    distributed = pytest.importorskip("dask.distributed")
    from ncgeom.campaigns.executors import dask_executor
    from ncgeom.phase.run import run_map

    root, serial = smoke
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False, protocol="tcp://",
                                  host="127.0.0.1", dashboard_address=None) as cluster:  # loopback only
        with dask_executor(cluster.scheduler_address) as ex:
            remote = run_map(root / "smoke.toml", tmp_path / "d", scale="quick", executor=ex, figures=False)
    assert remote.to_dict()["cells"] == serial.to_dict()["cells"]


@pytest.mark.slow
def test_a_process_pool_trains_the_same_map(smoke, tmp_path):
    from ncgeom.phase.run import run_map

    root, serial = smoke
    pooled = run_map(root / "smoke.toml", tmp_path / "p", scale="quick", workers=2, figures=False)
    assert pooled.to_dict()["cells"] == serial.to_dict()["cells"]


def test_the_benchmark_replay_reproduces_the_adaptive_map(smoke, tmp_path):
    """benchmarks/bench_phase.py replays the refinement on a uniform map's cells: with the map's levels and label it
    trains the adaptive map's cells and labels every cell as the uniform map does (the smoke map: one label)."""
    import importlib.util

    from ncgeom.phase.run import run_map

    path = Path(__file__).resolve().parent.parent / "benchmarks" / "bench_phase.py"
    spec = importlib.util.spec_from_file_location("bench_phase", path)
    bench = importlib.util.module_from_spec(spec)
    sys.modules["bench_phase"] = bench  # dataclasses look their module up there
    spec.loader.exec_module(bench)
    root, adaptive = smoke
    uniform = run_map(root / "smoke.toml", tmp_path / "u", scale="quick", uniform=True, figures=False)
    replayed = bench.replay(uniform, levels=adaptive.levels)
    assert replayed == {"cells_trained": sum(c.source == "trained" for c in adaptive.cells), "cells": 6,
                        "cells_wrong": 0}
    assert bench.agreement(adaptive, uniform) == (6, 6, 2, 2)
    record = bench.build(root / "out", 10.0, tmp_path / "u", 20.0, workers=1, machine="test", load_average="-",
                         origin="test")
    assert bench.PhaseBenchmark.from_dict(record.to_dict()) == record


# --- the shipped records: read by the reproduction at quick and full --------------------------------------------------

def test_shipped_records_round_trip(smoke, tmp_path, monkeypatch):
    """A finished confirmatory map ships through its types and is written back into a reproduction's folder as the map
    wrote it (cells.json equal, the CSV and table the same text, the heat map redrawn); an absent map writes nothing;
    an exploratory map does not ship."""
    import dataclasses

    from ncgeom.phase import shipping as shipped

    root, result = smoke
    monkeypatch.setattr(shipped, "shipped_folder", lambda name: tmp_path / "shipped" / name)
    assert shipped.ship(root / "out", tmp_path / "shipped" / "smoke").to_dict() == result.to_dict()
    assert sorted(p.name for p in (tmp_path / "shipped" / "smoke").iterdir()) == ["cells.json", "overlays.json"]
    loaded = shipped.load_shipped("smoke")
    assert loaded is not None and loaded[0].to_dict() == result.to_dict()
    written = shipped.write_shipped("smoke", tmp_path / "o")
    assert written is not None and PhaseMap.load(tmp_path / "o").to_dict() == result.to_dict()
    for name in ("cells.csv", "table.txt"):
        assert (tmp_path / "o" / name).read_text() == (root / "out" / name).read_text(), name
    assert (tmp_path / "o" / "phase_map.png").read_bytes()[:4] == b"\x89PNG" and not (tmp_path / "o" / "runs").exists()
    assert shipped.load_shipped("absent") is None and shipped.write_shipped("absent", tmp_path / "n") is None
    assert not (tmp_path / "n").exists()
    dataclasses.replace(result, seeds="exploratory").save(tmp_path / "x")
    (tmp_path / "x" / "overlays.json").write_bytes((root / "out" / "overlays.json").read_bytes())
    with pytest.raises(ValueError, match="only a complete map on its confirmatory seeds ships"):
        shipped.ship(tmp_path / "x", tmp_path / "shipped" / "x")


def test_the_package_ships_only_complete_confirmatory_maps():
    """Every record in ncgeom/phase/shipped/ reads through its type and is a complete map on its confirmatory seeds, at
    the quick scale, under the name of its spec (a map not yet computed simply has none)."""
    from ncgeom.phase.shipping import load_shipped

    for name in map_names():
        shipped = load_shipped(name)
        if shipped is None:
            continue
        record, _ = shipped
        assert (record.name, record.status, record.seeds, record.scale) == (name, "complete", "confirmatory", "quick")
        assert record.seed_values == load_map_spec(name).at("quick").seeds("confirmatory")
        assert record.runs_trained == sum(len(c.runs) for c in record.cells)


def test_the_quick_phase_stage_reads_shipped_records_and_trains_nothing(smoke, tmp_path, monkeypatch):
    """At quick and full the reproduction's phase stage writes the shipped records into its folder, trains no run, and
    says in its summary and in the report where each map came from; a map without a shipped record is a status line
    of the report, not a failure."""
    import dataclasses

    from ncgeom.phase import shipping as shipped
    from ncgeom.reproduce import pipeline
    from ncgeom.reproduce.report import phase_section
    from ncgeom.reproduce.scales import scale_parameters
    from ncgeom.reproduce.stages import StageRecord

    root, result = smoke
    monkeypatch.setattr(shipped, "shipped_folder", lambda name: tmp_path / "shipped" / name)
    shipped.ship(root / "out", tmp_path / "shipped" / "smoke")
    monkeypatch.setattr(pipeline, "run_map", lambda *a, **k: pytest.fail("the quick phase stage trained a map"))
    scale = dataclasses.replace(scale_parameters("quick"), phase_maps=("smoke", "phase_hucl_beta_dim"))
    assert scale_parameters("quick").phase_source == scale_parameters("full").phase_source == "shipped"
    assert scale_parameters("tiny").phase_source == "train"
    out = tmp_path / "repro"
    lines: list[str] = []
    summary = pipeline._stage_phase(pipeline.Context(out=out, scale=scale, workers=1, log=lines.append))
    assert summary.failed == () and summary.maps is not None
    assert summary.maps["smoke"].startswith("shipped record: computed by `ncgeom phase smoke` at the quick scale on the "
                                            "confirmatory seeds [0, 1]; complete: 8 of 12")
    assert summary.maps["phase_hucl_beta_dim"].startswith("no shipped record yet")
    assert PhaseMap.load(out / "phase" / "smoke").to_dict() == result.to_dict()
    assert not (out / "phase" / "smoke" / "runs").exists() and not (out / "phase" / "phase_hucl_beta_dim").exists()
    StageRecord("phase", "done", 0.1, summary=summary).save(out)
    report = "\n".join(phase_section(out))
    assert "Not trained by this reproduction: the record shipped with ncgeom (`ncgeom/phase/shipped/smoke/`)" in report
    assert "`phase_hucl_beta_dim`: no shipped record yet" in report and "](phase/smoke/phase_map.png)" in report
