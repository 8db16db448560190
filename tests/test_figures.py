"""Figure modules (ncgeom.figures) and the saved results they read (ncgeom.figures.runs, ncgeom.experiments.load_run).

The figures are exercised on synthetic results written with the record types that own the run-directory
format (config.json, history.jsonl, summary.json; sweep.json naming the claim) and on theory JSON files
of the formats ncgeom.reproduce.theory_data writes; no training happens here.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import ncgeom.figures
from ncgeom.atomic_io import atomic_write_json
from ncgeom.experiments import Config, EpochRecord, RunSummary, load_runs
from ncgeom.experiments.records import save_config, save_history
from ncgeom.figures import FIGURES, figure_module, figure_names, get_figure, render_figure
from ncgeom.figures.runs import MissingResults, load_theory, run_beta, select_runs, sweep_folders
from ncgeom.reproduce.theory_data import harris_gaps, nc_value_curves
from ncgeom.vocabulary import effective_beta

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _write_run(path: Path, rng: np.random.Generator, *, epochs: int = 5, classes: int = 4, **config) -> None:
    """A synthetic run directory (written by the record types): NC metrics decaying at a beta-dependent rate."""
    cfg = Config(**{"setting": "hscl", "beta": 0.0, "batch_size": 64, "classes": classes, "epochs": epochs, **config})
    path.mkdir(parents=True, exist_ok=True)
    save_config(path, cfg, {"git_commit": None})
    beta = effective_beta(cfg.setting, cfg.beta)
    records = []
    for epoch in range(epochs + 1):
        d = math.exp(-(0.3 + 0.05 * beta) * epoch) + 0.01 * rng.random()
        spectrum = np.sort(np.concatenate([[1.0], np.exp(-rng.random(classes - 2) * (3.0 if cfg.norm == "none" else 0.3) * epoch)]))[::-1]
        metrics = {"unit_norm": d, "zero_sum": d / 2, "equal_inner_product": 0.8 * d, "within_class": 1.2 * d, "nc1": d * d,
                   "etf_distance": d, "spectrum": spectrum.tolist(), "rankme": classes - 1 - d, "ncc_accuracy": 1 - d / 2}
        test_acc = None if cfg.model == "unconstrained" else 1 - 0.6 * d
        loss = None if epoch == 0 else 1 + d
        records.append(EpochRecord(epoch, loss, 1.0, None if loss is None else d, test_acc, 1.0, float(epoch), metrics))
    save_history(path, records[1:])
    RunSummary("completed", "", records[-1], records[0], 1.0, "test", epochs, 0.0, cfg).save(path)


def write_synthetic_results(root: Path, rng: np.random.Generator) -> Path:
    """Synthetic sweeps for every claim and synthetic theory files under ``root``."""
    counter = iter(range(10_000))

    def run(claim: str, **config):
        folder = root / "sweeps" / f"sweep_for_claim_{claim}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "sweep.json").write_text(json.dumps({"name": folder.name, "claim": claim}))
        _write_run(folder / f"run{next(counter):03d}", rng, **config)

    for b in (0.0, 2.0, 5.0, 10.0, 30.0):
        run("1", setting="scl" if b == 0 else "hscl", beta=b)
        run("6", setting="hscl", beta=b)
        run("6", setting="hucl", beta=b)
        run("3", setting="ucl" if b == 0 else "hucl", beta=b)
        for s in (("scl", "hscl"), ("ucl", "hucl")):
            run("5", setting=s[0] if b == 0 else s[1], beta=b, dataset="digits", norm="ball", classes=10, model="linear")
    for norm in ("none", "ball", "sphere"):
        for setting, b in (("scl", 0.0), ("hscl", 5.0), ("ucl", 0.0), ("hucl", 5.0)):
            run("4", setting=setting, beta=b, norm=norm)
    for positives in ("label", "noise"):
        run("2", setting="ucl", positives=positives, model="linear")
    for init in ("random", "near_nc"):
        for setting, b in (("scl", 0.0), ("hscl", 5.0), ("ucl", 0.0), ("hucl", 10.0), ("hucl", 30.0)):
            run("7", setting=setting, beta=b, init=init)
    for bs in (32, 64, 128, 256, 512):
        for setting, b in (("scl", 0.0), ("hscl", 5.0)):
            run("8", setting=setting, beta=b, batch_size=bs, samples_per_class=150)

    theory = root / "theory"
    atomic_write_json(theory / "nc_values.json", nc_value_curves(num_classes=10, num_negatives=(1, 16), betas=(0.0, 2.0, 5.0, 30.0)))
    atomic_write_json(theory / "harris_gap.json", harris_gaps(num_models=2, betas=(0.0, 2.0), num_negatives=1, num_classes=2, points_per_class=2, dim=2))
    cert = [{"name": f"certificate_{s}_infonce_sphere_C{c}_k1_tau1", "setting": s, "psi": "infonce", "num_classes": c, "num_negatives": 1,
             "domain": "sphere", "tau": 1.0, "margin": 1.0, "primal_value": 0.3 + c / 100, "closed_form": 0.3 + c / 100 + 1e-9,
             "dual_bound": 0.3 + c / 100, "gap": 1e-9, "distance_to_etf": 1e-7, "status": "pass", "origin": "test"} for s in ("scl", "ucl") for c in (3, 4)]
    atomic_write_json(theory / "certificates.json", {"cases": cert})
    rows = [{"beta": b, "min_found": 0.35 + 0.03 * b, "nc_value": 0.35 + 0.04 * b, "harris_bound": 0.35, "etf_distance": 0.5 * b} for b in (0.0, 1.0, 5.0)]
    atomic_write_json(theory / "hucl_exploration.json", {"explorations": [{"name": "hucl_exploration_C4_d3_k1", "num_classes": 4, "dim": 3, "num_negatives": 1, "rows": rows}]})
    betas = [0.0, 0.5, 1.0, 1.5]
    thresholds = [{"num_classes": 4, "dim": d, "local_threshold": loc, "global_switch": sw, "switch_bracket": None if sw is None else [sw, sw]}
                  for d, loc, sw in ((3, 1.285, 1.198), (4, 0.877, 0.877))]
    curves = {f"C4_d{d}": {"betas": betas, "min_eigenvalue": [0.04 - 0.04 * b / loc for b in betas]} for d, loc in ((3, 1.285), (4, 0.877))}
    batch = [{"num_classes": 4, "dim": 3, "batch_size": 64, "batch_local": {"beta": 1.2}, "detached_flow": {"beta": None}, "switch": {"bracket": [1.1, 1.1]}}]
    atomic_write_json(theory / "hucl_thresholds.json", {"rows": thresholds, "curves": curves, "batch": batch})
    return root


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> Path:
    return write_synthetic_results(tmp_path_factory.mktemp("results"), np.random.default_rng(0))


def _assert_valid_png(path: Path) -> None:
    import matplotlib.image

    assert path.read_bytes()[:8] == PNG_SIGNATURE, f"{path} is not a PNG"
    image = matplotlib.image.imread(path)
    assert image.ndim == 3 and image.shape[0] > 100 and image.shape[1] > 100


def test_registry_matches_the_modules():
    modules = {p.stem for p in Path(ncgeom.figures.__file__).parent.glob("fig_*.py")}
    assert modules == set(figure_names())
    assert len(set(figure_names())) == len(FIGURES)
    for spec in FIGURES:
        assert spec.caption and spec.title
        assert spec.claims or spec.statements, f"{spec.name} bears on no claim or statement"
        assert set(spec.claims) <= {str(n) for n in range(1, 9)}
    # every claim of docs/theory.md, section 9 is shown by at least one figure
    assert {c for spec in FIGURES for c in spec.claims} == {str(n) for n in range(1, 9)}
    with pytest.raises(ValueError, match="figure must be one of"):
        get_figure("fig_nope")


@pytest.mark.parametrize("name", figure_names())
def test_module_has_docstring_name_and_entry_point(name):
    module = figure_module(name)
    doc = module.__doc__ or ""
    assert module.NAME == name
    assert f"python -m ncgeom.figures.{name} --results DIR --out DIR" in doc
    assert "docs/theory.md" in doc and ("claim" in doc or "Theorem" in doc or "section" in doc)
    assert callable(module.plot)


@pytest.mark.slow  # ~3 s a figure; the tiny end-to-end test of test_reproduce.py renders all of them by default
@pytest.mark.parametrize("name", figure_names())
def test_figure_renders_from_saved_results(name, results, tmp_path):
    status = render_figure(name, results, tmp_path, formats=("png",))  # PDF: one test below (slow to write)
    assert status["status"] == "done", status.get("traceback", status["error"])
    _assert_valid_png(tmp_path / f"{name}.png")
    assert not (tmp_path / f"{name}.pdf").exists()


@pytest.mark.parametrize("name", ["fig_scl_panels", "fig_ucl_panels", "fig_init", "fig_batch_size"])
def test_run_figure_renders_from_synthetic_runs(name, results, tmp_path):
    """Run-based figures on synthetic runs holding every configuration they can show."""
    status = render_figure(name, results, tmp_path, formats=("png",))
    assert status["status"] == "done", status.get("traceback", status["error"])
    _assert_valid_png(tmp_path / f"{name}.png")


def test_figures_are_written_as_png_and_pdf_by_default(results, tmp_path):
    status = render_figure("fig_harris_gap", results, tmp_path)
    assert status["status"] == "done"
    assert sorted(Path(f).suffix for f in status["files"]) == [".pdf", ".png"]
    _assert_valid_png(tmp_path / "fig_harris_gap.png")
    assert (tmp_path / "fig_harris_gap.pdf").read_bytes()[:5] == b"%PDF-"


@pytest.mark.parametrize("name", figure_names())
def test_figure_without_results_reports_no_data(name, tmp_path):
    status = render_figure(name, tmp_path, tmp_path / "out")
    assert status["status"] == "no data", status
    assert not (tmp_path / "out" / f"{name}.png").exists()


def test_module_command_line(results, tmp_path):
    command = [sys.executable, "-m", "ncgeom.figures.fig_nc_values"]
    done = subprocess.run([*command, "--results", str(results), "--out", str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    _assert_valid_png(tmp_path / "fig_nc_values.png")
    missing = subprocess.run([*command, "--results", str(tmp_path / "nowhere"), "--out", str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert missing.returncode == 2
    assert len(missing.stderr.strip().splitlines()) == 1 and "error" in missing.stderr


def test_load_runs_skips_unfinished_and_tolerates_a_torn_history_line(tmp_path):
    rng = np.random.default_rng(1)
    _write_run(tmp_path / "done", rng, epochs=3, setting="scl")
    _write_run(tmp_path / "running", rng, epochs=3)
    (tmp_path / "running" / "summary.json").unlink()
    with open(tmp_path / "done" / "history.jsonl", "a") as handle:
        handle.write('{"epoch": 4, "loss": 1.')  # killed mid-write
    runs = load_runs(tmp_path)
    assert [r.path.name for r in runs] == ["done"]
    assert len(runs[0].history) == 3


def test_run_accessors_and_selection(tmp_path):
    rng = np.random.default_rng(2)
    _write_run(tmp_path / "a", rng, setting="hscl", beta=5.0, norm="ball")
    _write_run(tmp_path / "b", rng, setting="scl", beta=5.0, norm="sphere")
    _write_run(tmp_path / "c", rng, setting="ucl", beta=2.0, norm="sphere")
    runs = load_runs(tmp_path)
    assert [r.path.name for r in select_runs(runs, setting=("hscl", "ucl"))] == ["a", "c"]
    assert select_runs(runs, setting="ucl")[0].config.beta == 2.0
    run_a = select_runs(runs, norm="ball")[0]
    epochs, values = run_a.series("etf_distance")
    assert epochs == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0] and len(values) == 6  # the initial state, then each epoch
    assert run_a.final("etf_distance") == values[-1]
    assert run_beta(select_runs(runs, setting="scl")[0]) == 0.0  # scl ignores beta
    assert run_beta(run_a) == 5.0


def test_sweep_folders_follow_the_claim_tag(results):
    assert [f.name for f in sweep_folders(results, ("6",))] == ["sweep_for_claim_6"]
    assert [f.name for f in sweep_folders(results, ("8",))] == ["sweep_for_claim_8"]
    assert sweep_folders(results, ("9",)) == []
    # a folder of `ncgeom sweep` outputs, or one of them, works too
    assert [f.name for f in sweep_folders(results / "sweeps", ("8",))] == ["sweep_for_claim_8"]
    assert sweep_folders(results / "sweeps" / "sweep_for_claim_8", ("8",)) == [results / "sweeps" / "sweep_for_claim_8"]


def test_load_theory_missing_raises(tmp_path):
    with pytest.raises(MissingResults, match="nc_values.json"):
        load_theory(tmp_path, "nc_values")
