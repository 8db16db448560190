"""Figure modules (ncgeom.figures) and the saved results they read (ncgeom.figures.runs, ncgeom.runs.load_run).

The figures are exercised on synthetic results written with the record types that own the run-directory
format (config.json, history.jsonl, summary.json; sweep.json naming the claim) and on theory JSON files
of the formats ncgeom.reproduce.theory_data writes; no training happens here.
"""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import ncgeom.figures
from ncgeom.atomic_io import atomic_write_json
from ncgeom.campaigns.claims import CLAIMS
from ncgeom.figures import FIGURES, figure_module, figure_names, get_figure, render_figure
from ncgeom.figures.runs import (
    MissingResults,
    describe_runs,
    grid_point,
    group_by_point,
    hyperparameters,
    load_theory,
    run_beta,
    seed_band,
    select_runs,
    sweep_folders,
)
from ncgeom.reproduce.theory_data import harris_gaps, nc_value_curves
from ncgeom.runs import Config, EpochRecord, RunSummary, load_runs
from ncgeom.runs.records import save_config, save_history
from ncgeom.vocabulary import effective_beta
from proofs_check.ablations.dimension import dimension_table

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


SEEDS = (0, 1, 2)  # seeds per grid point of the synthetic sweeps, as at the quick scale


def _write_sweep_json(folder: Path, claim: str, scale: str = "quick") -> None:
    """The sweep.json of a sweep folder: the keys the figures read (the claim it tests, its scale)."""
    folder.mkdir(parents=True, exist_ok=True)
    atomic_write_json(folder / "sweep.json", {"name": folder.name, "claim": claim, "scale": scale})


def write_synthetic_results(root: Path, rng: np.random.Generator) -> Path:
    """Synthetic sweeps for every claim (each grid point over :data:`SEEDS`, scale quick) and synthetic theory
    files under ``root``, with the reproduction's manifest naming the scale."""
    counter = iter(range(10_000))

    def run(claim: str, **config):
        folder = root / "sweeps" / f"sweep_for_claim_{claim}"
        _write_sweep_json(folder, claim)
        for seed in SEEDS:
            _write_run(folder / f"run{next(counter):03d}", rng, seed=seed, **config)

    for b in (0.0, 2.0, 5.0, 10.0, 30.0):
        run("1", setting="scl" if b == 0 else "hscl", beta=b)
        run("6", setting="hscl", beta=b)
        run("6", setting="hucl", beta=b)
        run("3", setting="ucl" if b == 0 else "hucl", beta=b)
        for s in (("scl", "hscl"), ("ucl", "hucl")):
            run("5", setting=s[0] if b == 0 else s[1], beta=b, dataset="digits", norm="ball", classes=10, model="linear")
            run("5cpu", setting=s[0] if b == 0 else s[1], beta=b, norm="ball", classes=10, model="mlp")
    for norm in ("none", "ball", "sphere"):
        for setting, b in (("scl", 0.0), ("hscl", 5.0), ("ucl", 0.0), ("hucl", 5.0)):
            run("4", setting=setting, beta=b, norm=norm)
    for positives in ("label", "noise"):
        run("2", setting="ucl", positives=positives, model="linear")
    for init in ("random", "near_nc"):
        for setting, b in (("scl", 0.0), ("hscl", 5.0), ("ucl", 0.0), ("hucl", 10.0), ("hucl", 30.0)):
            run("7", setting=setting, beta=b, init=init, lr=0.05 if init == "near_nc" else 0.01)  # as the specs: not equal lr
    for bs in (32, 64, 128, 256, 512):
        for setting, b in (("scl", 0.0), ("hscl", 5.0)):
            run("8", setting=setting, beta=b, batch_size=bs, samples_per_class=150)

    atomic_write_json(root / "reproduce.json", {"scale": "quick", "provenance": {}})
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
    atomic_write_json(theory / "ablation_dimension.json", dimension_table(quick=True))
    ratios = [1.0, 3.0, 10.0]  # the shape of proofs_check.ablations.imbalance.imbalance_table, synthetic values
    imbalance = [{"setting": s, "beta": b, "num_classes": 4, "dim": 3, "ratios": ratios, "gap": [0.0, -0.01, -0.05],
                  "minority_inner": [[-1 / 3, -1 / 3], [0.2, 0.2], [1.0, 1.0]], "merged": [False, False, True],
                  "merge_bracket": [6.5, 6.6], "merge_ratio_closed_form": 6.54 if b == 0 else None}
                 for s, b in (("scl", 0.0), ("hscl", 5.0), ("ucl", 0.0))]
    atomic_write_json(theory / "ablation_imbalance.json", {"curves": imbalance})
    from proofs_check.hucl.optimum import record as optimum_record  # the shipped record, as the quick theory stage

    atomic_write_json(theory / "hucl_optimum.json", optimum_record.theory_data())
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
        assert set(spec.claims) <= set(CLAIMS)  # the claim ids of the reproduction (1-8 and 5cpu)
    # every claim the reproduction decides is shown by at least one figure
    assert {c for spec in FIGURES for c in spec.claims} == set(CLAIMS)
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
    assert status.status == "done", status.traceback or status.error
    _assert_valid_png(tmp_path / f"{name}.png")
    assert not (tmp_path / f"{name}.pdf").exists()


@pytest.mark.parametrize("name", ["fig_scl_panels", "fig_ucl_panels", "fig_init", "fig_batch_size"])
def test_run_figure_renders_from_synthetic_runs(name, results, tmp_path):
    """Run-based figures on synthetic runs holding every configuration they can show."""
    status = render_figure(name, results, tmp_path, formats=("png",))
    assert status.status == "done", status.traceback or status.error
    _assert_valid_png(tmp_path / f"{name}.png")


def test_figures_are_written_as_png_and_pdf_by_default(results, tmp_path):
    status = render_figure("fig_harris_gap", results, tmp_path)
    assert status.status == "done"
    assert sorted(Path(f).suffix for f in status.files) == [".pdf", ".png"]
    _assert_valid_png(tmp_path / "fig_harris_gap.png")
    assert (tmp_path / "fig_harris_gap.pdf").read_bytes()[:5] == b"%PDF-"


@pytest.mark.parametrize("name", figure_names())
def test_figure_without_results_reports_no_data(name, tmp_path):
    status = render_figure(name, tmp_path, tmp_path / "out")
    assert status.status == "no data", status
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


# --- seeds: one line per grid point (mean over seeds, min-max band) and the computed captions ----------------


def _seeded_runs(root: Path, scale: str = "quick") -> list:
    """Two grid points (near-NC start at lr 0.05, random start at lr 0.01) over SEEDS, in one sweep folder."""
    folder = root / "sweep"
    _write_sweep_json(folder, "7", scale)
    rng = np.random.default_rng(3)
    for seed in SEEDS:
        _write_run(folder / f"near_s{seed}", rng, setting="hscl", beta=5.0, init="near_nc", init_noise=0.05, lr=0.05, seed=seed)
        _write_run(folder / f"random_s{seed}", rng, setting="hscl", beta=5.0, init="random", lr=0.01, seed=seed)
    return load_runs(folder)


def test_grid_points_group_the_seeds_and_the_band_is_their_mean_min_and_max(tmp_path):
    runs = _seeded_runs(tmp_path)
    groups = group_by_point(runs)
    assert sorted(tuple(r.config.seed for r in g) for g in groups) == [SEEDS, SEEDS]
    assert sorted({g[0].config.init for g in groups}) == ["near_nc", "random"]
    for group in groups:
        assert len({grid_point(r) for r in group}) == 1
        band = seed_band([r.series("etf_distance") for r in group])
        stacked = np.array([r.series("etf_distance")[1] for r in group])  # [seeds, epochs]: every seed at every epoch
        np.testing.assert_array_equal(band.x, group[0].series("etf_distance")[0])
        # a mean of 3 numbers: numpy may sum them in another order, so up to a few roundings apart
        np.testing.assert_allclose(band.mean, stacked.mean(axis=0), rtol=4 * np.finfo(float).eps, atol=0)
        np.testing.assert_array_equal(band.lo, stacked.min(axis=0))
        np.testing.assert_array_equal(band.hi, stacked.max(axis=0))
        np.testing.assert_array_equal(band.count, np.full(stacked.shape[1], len(SEEDS)))


def test_seed_band_skips_missing_values_and_counts_the_seeds_at_each_x():
    band = seed_band([([0, 1, 2], [1.0, 3.0, 5.0]), ([0, 1, 2], [3.0, math.nan, 7.0]), ([0, 2], [2.0, 9.0])])
    np.testing.assert_array_equal(band.x, [0.0, 1.0, 2.0])
    np.testing.assert_array_equal(band.mean, [2.0, 3.0, 7.0])
    np.testing.assert_array_equal(band.lo, [1.0, 3.0, 5.0])
    np.testing.assert_array_equal(band.hi, [3.0, 3.0, 9.0])
    np.testing.assert_array_equal(band.count, [3, 1, 3])
    with pytest.raises(ValueError, match=r"series\[0\]"):
        seed_band([([0, 1], [1.0])])


def test_trajectory_panel_draws_one_mean_line_and_one_band_per_grid_point(tmp_path):
    from ncgeom.figures.panels import plot_metric
    from ncgeom.figures.style import new_figure

    runs = _seeded_runs(tmp_path)
    fig, axes = new_figure(1, 1)
    ax = axes[0][0]
    assert plot_metric(ax, runs, "etf_distance", label_runs=False)
    assert len(ax.get_lines()) == len(group_by_point(runs)) == 2  # not one line per run (6)
    assert len(ax.collections) == 2  # the min-max bands
    means = {tuple(np.round(seed_band([r.series("etf_distance") for r in g]).mean, 12)) for g in group_by_point(runs)}
    assert {tuple(np.round(line.get_ydata(), 12)) for line in ax.get_lines()} == means


def test_hyperparameters_are_the_values_applied():
    scl = hyperparameters(Config(setting="scl", beta=5.0))
    assert scl["beta"] == 0.0  # scl ignores beta
    assert scl["dim"] == 9  # d = C - 1 when unset
    assert scl["init_noise"] is None and scl["noise_scale"] is None and scl["hidden_dim"] is None
    assert "seed" not in scl and "device" not in scl
    assert hyperparameters(Config(init="near_nc", init_noise=0.05))["init_noise"] == 0.05


def test_describe_runs_names_the_scale_the_seeds_and_what_differs(tmp_path):
    about = describe_runs(_seeded_runs(tmp_path))
    assert about.scale == "quick"
    assert about.seeds_per_point == (3, 3) and about.seeds == SEEDS
    assert (about.points, about.runs) == (2, 6)
    # init and lr change together (one lr per kind of start): one entry pairing each init with its lr
    assert about.varying == (("init, lr", (("near_nc", 0.05), ("random", 0.01))),)
    text = about.text()
    assert "Scale: quick" in text and "3 seeds (0, 1, 2) per grid point" in text
    assert "(init = near_nc, lr = 0.05) vs (init = random, lr = 0.01)" in text
    assert "Metrics every 1 epoch and at the last." in text and "Metrics" not in about.text(cadence=False)


def test_describe_runs_lists_independent_fields_apart_and_uneven_seeds(tmp_path):
    folder = tmp_path / "sweep"
    _write_sweep_json(folder, "1", "full")
    rng = np.random.default_rng(4)
    for name, seeds, config in (("a", (0, 1), {"setting": "scl", "norm": "sphere"}), ("b", (0,), {"setting": "hscl", "beta": 5.0, "norm": "sphere"}),
                                ("c", (0, 1), {"setting": "hscl", "beta": 5.0, "norm": "ball"}),
                                ("d", (0, 1), {"setting": "hscl", "beta": 2.0, "norm": "ball"})):
        for seed in seeds:
            _write_run(folder / f"{name}{seed}", rng, seed=seed, **config)
    about = describe_runs(load_runs(folder))
    assert about.scale == "full"
    assert about.seeds_per_point == (1, 2) and about.seeds == ()
    # no two of setting, beta, norm determine each other here: three entries
    assert about.varying == (("setting", ("hscl", "scl")), ("beta", (0.0, 2.0, 5.0)), ("norm", ("ball", "sphere")))
    assert "1 to 2 seeds per grid point" in about.text()
    assert "setting: hscl, scl; beta: 0, 2, 5; norm: ball, sphere" in about.text()
    with pytest.raises(ValueError, match="runs"):
        describe_runs([])


@pytest.mark.parametrize("name", ["fig_scl_panels", "fig_init", "fig_hardness", "fig_nc_values"])
def test_rendered_caption_states_scale_seeds_and_differences(name, results, tmp_path):
    spec = get_figure(name)
    status = render_figure(name, results, tmp_path, formats=("png",))
    assert status.status == "done", status.traceback or status.error
    caption = status.caption
    assert caption.startswith(spec.caption)  # the registered text, then the computed sentences
    assert "Scale: quick" in caption
    if spec.data != ("theory",):
        assert f"{len(SEEDS)} seeds (0, 1, 2) per grid point" in caption and "Differ between curves:" in caption
    if name == "fig_init":  # near-NC runs (claim 7) at their lr vs random runs (claim 6) at theirs: said, computed
        assert "(init = near_nc, lr = 0.05) vs (init = random, lr = 0.01)" in caption
        assert "mean over the seeds" in caption
