"""Training ResNet encoders on image data sets (ncgeom.runs.images, issue 13 items 1-4).

Every data set is generated (ncgeom.testing.images' writers); nothing touches the network: --download is
tested with a file:// URL of a generated archive (ARCHIVES monkeypatched). The acceptance commands,
the resume and the layouts train a real ResNet-18 on a few images, which takes tens of seconds on the
2-core machine: those tests are marked slow.
"""

import hashlib
import io
import json
import os
import tarfile
from pathlib import Path

import numpy as np
import pytest
import torch
from numpy.testing import assert_allclose, assert_array_equal

import ncgeom.data.images.download as download
import ncgeom.runs.budget as run_budget
import ncgeom.runs.checkpoint as checkpoints
import ncgeom.runs.image_data as image_data
import ncgeom.runs.images as image_train
from ncgeom.campaigns.plan import plan_units
from ncgeom.cli.main import main
from ncgeom.data import load_image_data
from ncgeom.data.augment import standardize, to_float_images
from ncgeom.metrics import class_means, nc_metrics, ncc_accuracy
from ncgeom.metrics.record import METRIC_NAMES
from ncgeom.models import build_model
from ncgeom.models.resnet import ResNetEncoder
from ncgeom.runs import Config, run
from ncgeom.runs.config import LATE_FIELDS, config_from_dict
from ncgeom.runs.integrity import check_run
from ncgeom.runs.records import EpochRecord, RunSummary, load_history
from ncgeom.testing.images import write_cifar_like, write_image_folder, write_stl10_like

EPS = np.finfo(np.float64).eps


def _indices(units) -> list[list[int]]:
    """The config indices of each unit of a plan (ncgeom.campaigns.plan.Unit)."""
    return [list(u.indices) for u in units]


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    """The acceptance tree: 4 classes of 32 x 32 PNGs, 8 train and 4 test images per class."""
    root = tmp_path_factory.mktemp("tree")
    write_image_folder(root, classes=4, size=32, num_per_class=8, num_test_per_class=4, rng=np.random.default_rng(0))
    return root


@pytest.fixture(scope="module")
def small_tree(tmp_path_factory):
    """A smaller tree for the resume checks: 4 classes of 16 x 16 PNGs, 4 train and 1 test image per class."""
    root = tmp_path_factory.mktemp("small")
    write_image_folder(root, classes=4, size=16, num_per_class=4, num_test_per_class=1, rng=np.random.default_rng(1))
    return root


def _image_config(tree, **changes) -> Config:
    values = dict(dataset="imagefolder", data_dir=str(tree), model="resnet18", classes=4, epochs=1, batch_size=16)
    values.update(changes)
    return Config(**values)


# --- the acceptance commands ----------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("options, source", [
    (["--setting", "hscl", "--beta", "5", "--norm", "ball"], "batch_nc_value"),
    (["--setting", "ucl", "--positives", "augment"], "two-view batch"),
])
def test_acceptance_command_writes_the_final_metrics(tree, tmp_path, capsys, options, source):
    out = tmp_path / "run"
    rc = main(["train", "--dataset", "imagefolder", "--data-dir", str(tree), "--model", "resnet18", "--epochs", "1",
               "--batch-size", "16", "--checkpoint-every", "1", "--quiet", "--out", str(out), *options])
    assert rc == 0, capsys.readouterr().err
    summary = RunSummary.load(out)
    assert summary is not None and summary.status == "completed" and summary.epochs_run == 1
    assert summary.config.classes == 4 and summary.config.embedding_dim == 3  # read from the tree: C = 4, d = C - 1
    assert source in summary.nc_value_source
    final = summary.final
    assert final.epoch == 1 and set(final.metrics) == set(METRIC_NAMES)
    assert [r.epoch for r in load_history(out)] == [1]
    assert "provenance" in json.loads((out / "config.json").read_text())
    assert check_run(out) is None  # the sweep's integrity check accepts an image run directory

    # the metrics are those of the saved features (N x d x 8 = 768 bytes: kept), computed in memory
    with np.load(out / "embeddings.npz") as saved:
        z, labels = saved["z"], saved["labels"]
    data = load_image_data("imagefolder", tree)
    assert z.shape == (32, 3)
    assert_array_equal(labels, data.y_train)
    expected = nc_metrics(z, labels).to_dict()
    # streaming vs in-memory: O(u N d) relative rounding (ncgeom.metrics.streaming, "Error bound") times the
    # condition number of Sigma_B (largest / smallest normalized class-mean eigenvalue), with a factor 64
    cond = 1.0 / max(min(expected["spectrum"]), EPS)
    tol = 64 * z.size * EPS * cond
    for key in METRIC_NAMES:
        assert_allclose(final.metrics[key], expected[key], rtol=tol, atol=tol, err_msg=key)
    assert_allclose(final.mean_norm, np.linalg.norm(z, axis=1).mean(), rtol=tol)

    # the test NCC accuracy: the final model (checkpoint.pt) in eval mode on the test images, with the train means
    model = ResNetEncoder(kind="resnet18", dim=3, norm=summary.config.norm, generator=torch.Generator())
    model.load_state_dict(torch.load(out / "checkpoint.pt", weights_only=True)["model"])
    model.eval()
    with torch.no_grad():
        x = torch.from_numpy(data.x_test).permute(0, 3, 1, 2)
        z_test = model(standardize(to_float_images(x))).double().numpy()
    assert final.test_ncc_accuracy == ncc_accuracy(z_test, data.y_test, class_means=class_means(z, labels))


def test_corrupt_image_is_exit_2_with_one_line(tmp_path, capsys):
    write_image_folder(tmp_path / "data", classes=2, size=8, num_per_class=2, num_test_per_class=1,
                       rng=np.random.default_rng(2))
    bad = tmp_path / "data" / "train" / "class01" / "00003.png"
    bad.write_bytes(b"not a png")
    rc = main(["train", "--dataset", "imagefolder", "--data-dir", str(tmp_path / "data"), "--model", "resnet18",
               "--batch-size", "4", "--out", str(tmp_path / "run")])
    err = capsys.readouterr().err
    assert rc == 2
    assert err.count("\n") == 1 and err.startswith("ncgeom train: error: ") and str(bad) in err
    assert "Traceback" not in err
    assert not (tmp_path / "run").exists()  # refused before the run directory is made


@pytest.mark.parametrize("argv, message", [
    (["--model", "resnet18"], "data_dir is required"),
    (["--data-dir", "{missing}", "--model", "resnet18"], "no such folder"),
    (["--data-dir", "{tree}", "--model", "mlp"], "model must be one of resnet18"),
    (["--data-dir", "{tree}", "--model", "resnet18", "--classes", "3"], "holds 4 classes, the config says 3"),
    (["--data-dir", "{tree}", "--model", "resnet18", "--batch-size", "64"], "batch_size"),
])
def test_bad_image_options_are_exit_2(tree, tmp_path, capsys, argv, message):
    argv = [a.format(tree=tree, missing=tmp_path / "missing") for a in argv]
    rc = main(["train", "--dataset", "imagefolder", "--quiet", *argv])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and message in err, err


# --- config -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("values, message", [
    (dict(dataset="imagefolder", model="resnet18"), "data_dir is required"),
    (dict(dataset="imagefolder", model="mlp", data_dir="d"), "model must be one of resnet18, resnet34, resnet50"),
    (dict(model="resnet18"), "model='resnet18' encodes images"),
    (dict(model="mlp", positives="augment"), "positives='augment' draws SimCLR views of images"),
    (dict(data_dir="d"), "data_dir applies to image data sets"),
    (dict(workers=1), "workers applies to image data sets"),
    (dict(checkpoint_every=2), "checkpoint_every applies to image data sets"),
    (dict(eval_batch_size=64), "eval_batch_size applies to image data sets"),
    (dict(dataset="cifar10", model="resnet18", data_dir="d", workers=2), "workers applies to dataset 'imagefolder'"),
    (dict(dataset="cifar100", model="resnet18", data_dir="d"), "classes must be 100 for dataset 'cifar100'"),
    (dict(dataset="stl10", model="resnet18", data_dir="d", classes=4), "classes must be 10 for dataset 'stl10'"),
    (dict(dataset="cifar10", model="resnet18", data_dir="d", positives="noise"), "positives='noise'"),
    (dict(dataset="cifar10", model="resnet18", data_dir="d", precision="bf16"), "precision='bf16' needs a CUDA device"),
    (dict(dataset="cifar10", model="resnet18", data_dir="d", init="near_nc"), "init='near_nc' needs model='unconstrained'"),
    (dict(dataset="cifar10", model="resnet18", data_dir=""), "data_dir must be a folder path"),
    (dict(dataset="cifar10", model="resnet18", data_dir="d", workers=-1), "workers"),
    (dict(dataset="cifar10", model="resnet18", data_dir="d", eval_batch_size=0), "eval_batch_size"),
    (dict(dataset="cifar10", model="resnet18", data_dir="d", checkpoint_every=-1), "checkpoint_every"),
])
def test_config_refuses(values, message):
    with pytest.raises(ValueError) as info:
        Config(**values)
    assert message in str(info.value)


def test_config_types_and_late_fields():
    with pytest.raises(ValueError, match="data_dir: expected a folder path"):
        config_from_dict({"data_dir": 3})
    assert {"data_dir", "workers", "precision", "checkpoint_every", "eval_batch_size"} <= LATE_FIELDS
    synthetic = Config()
    assert not set(synthetic.to_dict()) & {"data_dir", "workers", "precision", "checkpoint_every", "eval_batch_size"}
    image = Config(dataset="cifar10", model="resnet34", data_dir="/data", positives="augment", setting="hucl")
    assert config_from_dict(json.loads(image.to_json())) == image
    assert image.is_image and not synthetic.is_image
    with pytest.raises(ValueError, match="known once /data is read"):
        _ = image.num_train


def test_synthetic_run_refuses_resume():
    with pytest.raises(ValueError, match="resume applies to image data sets"):
        run(Config(epochs=1), resume=True)


def test_build_model_dispatches_to_resnet():
    model = build_model("resnet18", dim=5, norm="ball", generator=torch.Generator().manual_seed(0))
    same = ResNetEncoder(kind="resnet18", dim=5, norm="ball", generator=torch.Generator().manual_seed(0))
    assert isinstance(model, ResNetEncoder) and model.dim == 5 and model.norm.mode == "ball"
    for (name, a), (_, b) in zip(model.state_dict().items(), same.state_dict().items()):
        torch.testing.assert_close(a, b, rtol=0, atol=0, msg=name)


def test_sweep_never_stacks_image_configs(tree):
    synthetic = Config(epochs=1, samples_per_class=8, batch_size=16)
    image = _image_config(tree)
    configs = [synthetic, image, synthetic.replace(seed=1), image.replace(seed=1)]
    units = _indices(plan_units(configs, engine="stacked", workers=1))
    assert sorted(map(sorted, units)) == [[0, 2], [1], [3]]


# --- checkpoints and resume ---------------------------------------------------------------------------------
def _fake_checkpoint(path: Path, config: Config, *, epoch: int = 1) -> None:
    model = torch.nn.Linear(2, 2)
    optimizer = torch.optim.Adam(model.parameters())
    rng = np.random.default_rng(0)
    g = torch.Generator().manual_seed(0)
    record = EpochRecord(0, None, 0.0, None)
    checkpoints.save_checkpoint(path, config=config, epoch=epoch, model=model, optimizer=optimizer, history=[],
                                initial=record, elapsed_s=0.0, rng=checkpoints.rng_states(rng, rng, rng, g, g))


def test_checkpoint_of_another_config_is_refused(tree, tmp_path, capsys):
    _fake_checkpoint(tmp_path / "checkpoint.pt", _image_config(tree, beta=2.0, norm="ball"))
    with pytest.raises(ValueError) as info:
        run(_image_config(tree, epochs=3), out_dir=tmp_path, resume=True)
    text = str(info.value)
    assert str(tmp_path / "checkpoint.pt") in text
    assert "beta = 2.0 in the checkpoint, 5.0 now" in text and "norm = 'ball' in the checkpoint, 'sphere' now" in text
    assert "epochs" not in text.split("(")[1].split(")")[0]  # epochs may change on resume
    rc = main(["train", "--dataset", "imagefolder", "--data-dir", str(tree), "--model", "resnet18", "--batch-size",
               "16", "--out", str(tmp_path), "--resume", "--quiet"])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "another config" in err


def test_checkpoint_problems_are_value_errors(tree, tmp_path):
    config = _image_config(tree)
    with pytest.raises(ValueError, match="no checkpoint to resume from"):
        run(config, out_dir=tmp_path, resume=True)
    _fake_checkpoint(tmp_path / "checkpoint.pt", config, epoch=2)
    with pytest.raises(ValueError, match="at epoch 2, beyond epochs=1"):
        run(config, out_dir=tmp_path, resume=True)
    (tmp_path / "checkpoint.pt").write_bytes(b"garbage")
    with pytest.raises(ValueError, match="is not the one recorded in checkpoint_digest.json"):
        run(config, out_dir=tmp_path, resume=True)
    (tmp_path / checkpoints.DIGEST_FILE).unlink()  # a checkpoint of an earlier version: no digest, checked by torch
    with pytest.raises(ValueError, match=r"not readable with torch.load\(weights_only=True\)"):
        run(config, out_dir=tmp_path, resume=True)


class _Payload:
    """A pickle that would create a folder when unpickled: weights_only loading must refuse it."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return os.mkdir, (str(self.marker),)


def test_checkpoint_is_never_unpickled(tree, tmp_path):
    marker = tmp_path / "unpickled"
    buffer = io.BytesIO()
    torch.save({"format": 1, "model": _Payload(marker)}, buffer)
    (tmp_path / "checkpoint.pt").write_bytes(buffer.getvalue())
    with pytest.raises(ValueError, match=r"not readable with torch.load\(weights_only=True\)"):
        run(_image_config(tree), out_dir=tmp_path, resume=True)
    assert not marker.exists()


def _run_files(run_dir: Path):
    """(history lines without time_s, summary.final without time_s, z, labels, model state) of a run directory."""
    history = [dict(json.loads(line), time_s=None) for line in (run_dir / "history.jsonl").read_text().splitlines()]
    summary = json.loads((run_dir / "summary.json").read_text())
    final = dict(summary["final"], time_s=None)
    with np.load(run_dir / "embeddings.npz") as saved:
        z, labels = saved["z"], saved["labels"]
    state = torch.load(run_dir / "checkpoint.pt", weights_only=True)
    return history, final, z, labels, state


@pytest.mark.slow
def test_resume_is_bitwise_on_the_cpu(small_tree, tmp_path):
    # augment positives: the torch stream (views) and the batch stream both carry over
    config = _image_config(small_tree, epochs=2, batch_size=8, positives="augment", setting="hucl", lr=1e-3,
                           checkpoint_every=1)
    whole = run(config, out_dir=tmp_path / "whole")
    run(config.replace(epochs=1), out_dir=tmp_path / "split")
    resumed = run(config, out_dir=tmp_path / "split", resume=True)
    assert resumed.status == whole.status == "completed" and "resumed at epoch 1" in resumed.message
    a, b = _run_files(tmp_path / "whole"), _run_files(tmp_path / "split")
    assert a[0] == b[0] and len(a[0]) == 2 and a[1] == b[1]
    assert_array_equal(a[2], b[2])
    assert_array_equal(a[3], b[3])
    assert a[4]["epoch"] == b[4]["epoch"] == 2
    for name, tensor in a[4]["model"].items():
        torch.testing.assert_close(b[4]["model"][name], tensor, rtol=0, atol=0, msg=name)
    assert a[4]["rng"]["batch"] == b[4]["rng"]["batch"]
    assert torch.equal(a[4]["rng"]["torch"], b[4]["rng"]["torch"])
    assert json.loads((tmp_path / "split" / "config.json").read_text())["epochs"] == 2


@pytest.mark.slow
def test_lazy_folder_with_workers_equals_the_eager_run(small_tree, tmp_path, monkeypatch):
    config = _image_config(small_tree, batch_size=8, workers=1)
    eager = run(config.replace(workers=0))
    monkeypatch.setattr(image_data, "EAGER_MAX_BYTES", 0)  # decode per batch, in one worker process
    assert not isinstance(image_data.read_image_data(config).x_train, np.ndarray)
    lazy = run(config)
    assert_array_equal(lazy.embeddings, eager.embeddings)
    assert lazy.final.metrics == eager.final.metrics


def test_shuffled_batches_of_an_image_run(small_tree, monkeypatch):
    """batches='shuffle': floor(16 / 6) = 2 steps of one permutation per epoch (ncgeom.data.batches), any B <= N."""
    seen = []
    original = image_train.epoch_batches

    def spy(batches, labels, batch_size, *, rng):
        out = original(batches, labels, batch_size, rng=rng)
        seen.append((batches, out.shape))
        return out

    monkeypatch.setattr(image_train, "epoch_batches", spy)
    result = run(_image_config(small_tree, epochs=1, batch_size=6, batches="shuffle", lr=1e-3))
    assert result.status == "completed" and "shuffled batches" in result.summary()["nc_value_source"]
    assert seen[-1] == ("shuffle", (2, 6))


def test_large_features_keep_the_class_means(small_tree, monkeypatch):
    monkeypatch.setattr(run_budget, "EMBEDDINGS_MAX_BYTES", 0)  # features re-encoded per pass, means saved
    result = run(_image_config(small_tree, epochs=1, batch_size=16, metrics_every=1, lr=1e-3), out_dir=None)
    assert result.embeddings.shape == (4, 3)
    assert_array_equal(result.labels, np.arange(4))
    assert set(result.final.metrics) == set(METRIC_NAMES)


# --- the other layouts and --download -----------------------------------------------------------------------
def _tarball(folder: Path, archive: Path, arcname: str) -> str:
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(folder, arcname=arcname)
    return hashlib.md5(archive.read_bytes()).hexdigest()


def test_download_fetches_checks_and_unpacks(tmp_path, monkeypatch):
    written = write_cifar_like(tmp_path / "src", num_per_class=2, rng=np.random.default_rng(3))
    archive = tmp_path / "cifar-10-python.tar.gz"
    md5 = _tarball(tmp_path / "src" / "cifar-10-batches-py", archive, "cifar-10-batches-py")
    entry = download.Archive(archive.as_uri(), archive.name, md5, "cifar-10-batches-py")
    monkeypatch.setitem(download.ARCHIVES, "cifar10", entry)
    root = download.download_image_data("cifar10", tmp_path / "data")
    got = load_image_data("cifar10", root)
    assert_array_equal(got.x_train, written.x_train)
    assert_array_equal(got.y_test, written.y_test)
    # the archive is kept with its md5: a second call fetches nothing (the URL is gone)
    monkeypatch.setitem(download.ARCHIVES, "cifar10", entry._replace(url=(tmp_path / "gone.tar.gz").as_uri()))
    download.download_image_data("cifar10", tmp_path / "data")
    # a wrong md5 is refused and leaves no file behind
    monkeypatch.setitem(download.ARCHIVES, "cifar10", entry._replace(md5="0" * 32))
    with pytest.raises(ValueError, match=f"md5 {md5} differs from the official {'0' * 32}"):
        download.download_image_data("cifar10", tmp_path / "other")
    assert os.listdir(tmp_path / "other") == []


def test_download_refuses_members_outside_the_folder(tmp_path, monkeypatch):
    evil = tmp_path / "evil.tar.gz"
    with tarfile.open(evil, "w:gz") as tar:
        info = tarfile.TarInfo("../outside.txt")
        info.size = 2
        tar.addfile(info, io.BytesIO(b"hi"))
    md5 = hashlib.md5(evil.read_bytes()).hexdigest()
    monkeypatch.setitem(download.ARCHIVES, "stl10", download.Archive(evil.as_uri(), "stl10_binary.tar.gz", md5,
                                                                      "stl10_binary"))
    with pytest.raises(ValueError, match="cannot be unpacked safely"):
        download.download_image_data("stl10", tmp_path / "data")
    assert not (tmp_path / "outside.txt").exists()


def test_download_needs_an_official_data_set(tmp_path, capsys):
    rc = main(["train", "--dataset", "imagefolder", "--data-dir", str(tmp_path), "--model", "resnet18", "--download"])
    assert rc == 2 and "--download fetches cifar10, cifar100, stl10" in capsys.readouterr().err


@pytest.mark.slow
def test_cifar_download_then_one_step(tmp_path, monkeypatch, capsys):
    write_cifar_like(tmp_path / "src", num_per_class=2, rng=np.random.default_rng(4))
    archive = tmp_path / "cifar-10-python.tar.gz"
    md5 = _tarball(tmp_path / "src" / "cifar-10-batches-py", archive, "cifar-10-batches-py")
    monkeypatch.setitem(download.ARCHIVES, "cifar10",
                        download.Archive(archive.as_uri(), archive.name, md5, "cifar-10-batches-py"))
    rc = main(["train", "--dataset", "cifar10", "--data-dir", str(tmp_path / "data"), "--download", "--model",
               "resnet18", "--epochs", "1", "--batch-size", "20", "--eval-batch-size", "10", "--quiet", "--out",
               str(tmp_path / "run")])
    assert rc == 0, capsys.readouterr().err
    summary = RunSummary.load(tmp_path / "run")
    assert summary is not None and summary.config.classes == 10 and summary.final.epoch == 1


@pytest.mark.slow
def test_stl10_layout_trains_one_step(tmp_path):
    write_stl10_like(tmp_path, num_per_class=2, num_test_per_class=1, rng=np.random.default_rng(5))
    config = Config(dataset="stl10", data_dir=str(tmp_path), model="resnet18", epochs=1, batch_size=20,
                    eval_batch_size=10, positives="augment", setting="ucl")
    result = run(config)
    assert result.status == "completed" and len(result.history) == 1 and result.embeddings.shape == (20, 9)
    assert result.final.test_ncc_accuracy is not None
