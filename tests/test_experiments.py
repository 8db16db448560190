"""ncgeom.runs: Config validation, run() records, reproducibility, divergence, CLI train; the deprecated ncgeom.experiments."""

import json

import numpy as np
import pytest

import ncgeom.campaigns as campaigns
import ncgeom.experiments as experiments
import ncgeom.runs as runs
from ncgeom.cli.main import main
from ncgeom.metrics import METRIC_NAMES
from ncgeom.runs import Config, EpochRecord, RunSummary, config_fields, load_run, run, run_nc_value
from ncgeom.theory import batch_nc_value

TINY = dict(classes=3, samples_per_class=6, batch_size=18, epochs=3, lr=0.05)
HISTORY_KEYS = {"epoch", "loss", "nc_value", "gap", "test_ncc_accuracy", "metrics", "mean_norm", "time_s", "probe_loss",
                "grad_norm"}


pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py: one torch and one BLAS thread


def test_all_exports_exist_once():
    for module in (runs, campaigns):
        assert len(module.__all__) == len(set(module.__all__))
        for name in module.__all__:
            assert hasattr(module, name), name


def test_the_former_experiments_names_still_import_with_a_warning_naming_their_new_home():
    """ncgeom.experiments forwards each of its former public names for one release (CHANGELOG.md)."""
    for name, home in experiments.MOVED.items():
        with pytest.warns(DeprecationWarning, match=f"moved to {home}.{name}"):
            assert getattr(experiments, name) is getattr(__import__(home, fromlist=[name]), name)
    with pytest.raises(AttributeError, match="moved to ncgeom.runs and ncgeom.campaigns"):
        experiments.train  # noqa: B018 - the submodules are gone


def test_every_field_has_a_default_and_a_reason():
    for f in config_fields():
        assert len(f.metadata.get("help", "")) > 15, f.name
        Config()  # defaults are valid


@pytest.mark.parametrize("changes, field", [
    (dict(lr=-1.0), "lr"), (dict(lr=0.0), "lr"), (dict(dim=0), "dim"), (dict(setting="xcl"), "setting"),
    (dict(batch_size=10_000), "batch_size"), (dict(beta=-0.5), "beta"), (dict(tau=0.0), "tau"),
    (dict(norm="cube"), "norm"), (dict(classes=1), "classes"), (dict(epochs=0), "epochs"),
    (dict(num_negatives=0), "num_negatives"), (dict(num_negatives="all"), "num_negatives"),
    (dict(estimator="weighted", psi="triplet"), "psi"), (dict(positives="noise"), "positives"),
    (dict(init="near_nc", model="mlp"), "near_nc"), (dict(dataset="digits", classes=11), "classes"),
    (dict(seed=-1), "seed"), (dict(batch_size=290, samples_per_class=30, classes=10, imbalance=2.0), "batch_size"),
    (dict(imbalance=0.5), "imbalance"), (dict(noise_scale=-1.0), "noise_scale"),
])
def test_config_rejects_bad_values_naming_the_field(changes, field):
    with pytest.raises(ValueError, match=field):
        Config(**changes)


def test_config_from_dict_rejects_unknown_field():
    with pytest.raises(ValueError, match="unknown config field"):
        runs.config_from_dict({"learning_rate": 0.1})


def test_run_records_and_files(tmp_path):
    cfg = Config(**TINY, model="mlp", input_dim=4, hidden_dim=8, test_per_class=4)
    result = run(cfg, out_dir=tmp_path)
    assert result.status == "completed" and len(result.history) == 3
    for rec in result.history:
        assert set(rec.to_dict()) == HISTORY_KEYS
        assert set(rec.metrics) == set(METRIC_NAMES)
        np.testing.assert_allclose(rec.gap, rec.loss - rec.nc_value, rtol=0, atol=0)
        assert 0.0 <= rec.test_ncc_accuracy <= 1.0
    lines = (tmp_path / "history.jsonl").read_text().splitlines()
    assert [json.loads(line)["epoch"] for line in lines] == [1, 2, 3]
    assert set(json.loads(lines[0])["metrics"]) == set(METRIC_NAMES)  # one shape: metrics nested in every line
    conf = json.loads((tmp_path / "config.json").read_text())
    assert "git_commit" in conf["provenance"] and "torch" in conf["provenance"]["versions"]
    assert runs.config_from_dict({k: v for k, v in conf.items() if k != "provenance"}) == cfg
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["status"] == "completed" and summary["config"] == cfg.applicable_dict()
    assert "test_fraction" not in summary["config"] and "test_fraction" in conf  # summary.json: what the data set reads
    assert set(summary["final"]) == HISTORY_KEYS and set(summary["final"]["metrics"]) == set(METRIC_NAMES)
    np.testing.assert_allclose(summary["nc_value"], result.nc_value, rtol=0, atol=0)
    # the one reader gives back what the writer wrote
    saved = load_run(tmp_path)
    assert saved.config == cfg and saved.history == result.history
    assert saved.summary == result.summary_record()
    assert saved.series("etf_distance")[0] == [0.0, 1.0, 2.0, 3.0]  # the initial state, then every epoch
    emb = np.load(tmp_path / "embeddings.npz")
    assert emb["z"].shape == (18, 2) and np.array_equal(emb["labels"], result.labels)


def test_run_is_bitwise_reproducible_for_a_seed():
    cfg = Config(**TINY, setting="hucl", beta=2.0)
    a, b = run(cfg), run(cfg)
    strip = lambda h: [{k: v for k, v in r.to_dict().items() if k != "time_s"} for r in h]  # noqa: E731
    assert strip(a.history) == strip(b.history)
    assert np.array_equal(a.embeddings, b.embeddings)
    c = run(cfg.replace(seed=1))
    assert not np.array_equal(a.embeddings, c.embeddings)


def test_sampled_estimator_and_noise_positives_reproducible():
    cfg = Config(**TINY, estimator="sampled", psi="triplet", num_negatives=3, setting="ucl")
    a, b = run(cfg), run(cfg)
    assert np.array_equal(a.embeddings, b.embeddings) and a.status == "completed"
    noisy = Config(**TINY, model="linear", positives="noise", noise_scale=0.3, setting="ucl", input_dim=4)
    assert np.array_equal(run(noisy).embeddings, run(noisy).embeddings)


@pytest.mark.parametrize("setting", ["scl", "hscl", "ucl", "hucl"])
def test_nc_value_is_batch_nc_value_of_the_batch_counts(setting):
    cfg = Config(classes=10, batch_size=128, setting=setting, beta=3.0, num_negatives=2)
    counts = [13] * 8 + [12] * 2  # class_balanced_counts(10, 128)
    value, source = run_nc_value(cfg)
    assert source.startswith("batch_nc_value")
    np.testing.assert_allclose(value, batch_nc_value(setting, class_counts=counts, num_negatives=2, beta=3.0), rtol=1e-15)


@pytest.mark.parametrize("setting", ["ucl", "hucl"])
def test_noise_positive_nc_value_agrees_with_doubled_counts(setting):
    # Independent methods: the batch loss at an exact NC two-view batch (instance ids) equals the
    # closed form with every class count doubled, since N(i) = all m != i for UCL/HUCL.
    cfg = Config(classes=4, samples_per_class=10, batch_size=16, setting=setting, beta=2.0, model="mlp",
                 positives="noise")
    value, source = run_nc_value(cfg)
    assert source.startswith("batch_loss")
    np.testing.assert_allclose(value, batch_nc_value(setting, class_counts=[8, 8, 8, 8], beta=2.0), rtol=1e-12)


def test_divergence_stops_with_status_and_keeps_last_good_state(tmp_path):
    cfg = Config(classes=3, samples_per_class=4, batch_size=12, epochs=4, norm="none", lr=1e30)
    result = run(cfg, out_dir=tmp_path)
    assert result.status == "diverged" and "non-finite" in result.message
    assert len(result.history) == 1 and result.final.epoch == 1
    assert np.isfinite(result.embeddings).all()
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["status"] == "diverged" and summary["epochs_run"] == 1


def test_defaults_reach_nc_for_hscl_on_the_sphere():
    r = run(Config())  # unconstrained, hscl beta 5, sphere, C = 10, d = 9
    assert r.final.value("etf_distance") < 0.05
    assert abs(r.gap) < 0.01 * r.nc_value


def test_no_normalization_blows_up_norms_with_dimensional_collapse():
    r = run(Config(norm="none", setting="scl", beta=0.0))
    assert r.final.mean_norm > 2.0 * r.initial.mean_norm
    assert min(r.final.value("spectrum")) < 0.1  # DC: one order of magnitude
    assert r.final.value("etf_distance") > 0.05 and r.final.loss < r.nc_value  # below the unit-ETF value


def test_digits_tiny_run():
    r = run(Config(dataset="digits", model="mlp", classes=3, epochs=2, batch_size=64, lr=0.01, hidden_dim=16))
    assert r.status == "completed" and 0.5 < r.final.test_ncc_accuracy <= 1.0


def test_cli_train_json_and_errors(tmp_path, capsys):
    rc = main(["train", "--classes", "3", "--samples-per-class", "6", "--batch-size", "18", "--epochs", "2",
               "--setting", "ucl", "--num-negatives", "batch", "--out", str(tmp_path / "r"), "--json", "--quiet"])
    out = capsys.readouterr().out
    assert rc == 0
    summary = json.loads(out)
    assert summary["config"]["num_negatives"] == "batch" and summary["status"] == "completed"
    assert (tmp_path / "r" / "history.jsonl").read_text().count("\n") == 2
    # the run's config.json can be passed back
    rc = main(["train", "--config", str(tmp_path / "r" / "config.json"), "--epochs", "1", "--quiet"])
    assert rc == 0
    capsys.readouterr()
    for bad, field in [(["--lr", "-1"], "lr"), (["--dim", "0"], "dim"), (["--setting", "foo"], "setting"),
                       (["--batch-size", "100000"], "batch_size"), (["--beta", "-1"], "beta")]:
        rc = main(["train", *bad, "--quiet"])
        err = capsys.readouterr().err
        assert rc == 2 and err.count("\n") == 1 and err.startswith("ncgeom train: error: ") and field in err


def test_cli_train_out_that_is_a_file_is_a_usage_error(tmp_path, capsys):
    # used to be a FileExistsError / NotADirectoryError traceback; the file must survive untouched
    (tmp_path / "f").write_text("keep")
    for out in (tmp_path / "f", tmp_path / "f" / "run"):
        rc = main(["train", "--classes", "3", "--samples-per-class", "4", "--batch-size", "12", "--epochs", "1",
                   "--out", str(out), "--quiet"])
        err = capsys.readouterr().err
        assert rc == 2 and err.count("\n") == 1 and err.startswith("ncgeom train: error: out_dir")
    assert (tmp_path / "f").read_text() == "keep"


def test_cli_train_diverged_exit_code(capsys):
    rc = main(["train", "--classes", "3", "--samples-per-class", "4", "--batch-size", "12", "--epochs", "3",
               "--norm", "none", "--lr", "1e30", "--quiet"])
    assert rc == 1 and "non-finite" in capsys.readouterr().err


def test_config_choices_are_the_vocabulary():
    from ncgeom import vocabulary

    choices = {f.name: f.metadata.get("choices") for f in config_fields()}
    assert choices["backend"] == vocabulary.BACKENDS and choices["setting"] == vocabulary.SETTINGS
    assert choices["psi"] == vocabulary.PSI_NAMES and choices["norm"] == vocabulary.NORMALIZATIONS
    with pytest.raises(ValueError, match="backend"):
        Config(backend="cuda")


def test_metrics_every_skips_epochs_but_not_the_last(tmp_path):
    r = run(Config(**{**TINY, "epochs": 5}, metrics_every=2), out_dir=tmp_path, progress=True)
    assert [rec.metrics is None for rec in r.history] == [True, False, True, False, False]
    assert r.final.epoch == 5 and r.final.value("etf_distance") == r.history[-1].metrics["etf_distance"]
    lines = [json.loads(line) for line in (tmp_path / "history.jsonl").read_text().splitlines()]
    assert lines[0]["metrics"] is None and lines[0]["loss"] == r.history[0].loss


def test_records_reject_unknown_and_missing_keys():
    rec = EpochRecord(1, 0.5, 0.4, 0.1, metrics={"etf_distance": 0.2})
    assert EpochRecord.from_dict(rec.to_dict()) == rec
    with pytest.raises(ValueError, match="unknown key.*claim_id"):
        EpochRecord.from_dict({**rec.to_dict(), "claim_id": "1"})
    with pytest.raises(ValueError, match="missing key.*gap"):
        EpochRecord.from_dict({k: v for k, v in rec.to_dict().items() if k != "gap"})
    with pytest.raises(ValueError, match="unknown key.*etf"):
        EpochRecord.from_dict({**rec.to_dict(), "metrics": {"etf": 0.2}})
    with pytest.raises(ValueError, match="key must be"):
        rec.value("etf")
    summary = run(Config(**TINY)).summary()
    assert RunSummary.from_dict(summary).to_dict() == summary
    with pytest.raises(ValueError, match="status must be one of completed, diverged"):
        RunSummary.from_dict({**summary, "status": "failed"})
    with pytest.raises(ValueError, match="unknown key.*gap_rel"):
        RunSummary.from_dict({**summary, "gap_rel": 0.0})
