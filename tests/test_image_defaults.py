"""Image defaults that fit images (issue 26 item 4): the ResNet learning rate and its warning, opt-in checkpoints,
summary.json with the fields the data set reads, and a single ImageFolder split with --test-fraction."""

from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest
from numpy.testing import assert_array_equal

from ncgeom.cli.main import main
from ncgeom.data.images import image_folder_layout, load_image_folder, single_folder, split_image_folder
from ncgeom.runs import Config, load_run, run
from ncgeom.runs.config import DATASET_FIELDS, config_from_dict
from ncgeom.runs.defaults import FREE_FEATURE_LR, RESNET_LR, LearningRateWarning, default_lr, lr_warning
from ncgeom.runs.image_data import image_class_count, read_image_data
from ncgeom.runs.integrity import check_run
from ncgeom.testing.images import write_image_folder

GAUSSIAN_ONLY = ("samples_per_class", "test_per_class", "input_dim", "separation", "spread", "imbalance")


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    root = tmp_path_factory.mktemp("tree")
    write_image_folder(root, classes=3, size=16, num_per_class=4, num_test_per_class=2, rng=np.random.default_rng(0))
    return root


@pytest.fixture(scope="module")
def single(tmp_path_factory):
    """A single ImageFolder root/<class>/<image>: 3 classes of 10, 7 and 5 images."""
    base = tmp_path_factory.mktemp("single")
    for c, n in enumerate((10, 7, 5)):
        part = base / f"part{c}"
        write_image_folder(part, classes=1, size=16, num_per_class=n, num_test_per_class=0,
                           rng=np.random.default_rng(c))
        shutil.move(str(part / "train" / "class00"), str(base / "root" / f"kind{c}") if (base / "root").exists()
                    else _mkdir_then(base / "root", part / "train" / "class00", f"kind{c}"))
        shutil.rmtree(part)
    return base / "root"


def _mkdir_then(root: Path, source: Path, name: str) -> str:
    root.mkdir()
    return str(root / name)


def _argv(tree, out, *extra):
    return ["train", "--dataset", "imagefolder", "--data-dir", str(tree), "--model", "resnet18", "--epochs", "1",
            "--batch-size", "6", "--quiet", "--out", str(out), *extra]


# ---------------------------------------------------------------- learning rate


def test_default_lr_per_model_and_the_warning():
    assert default_lr("resnet50") == RESNET_LR == 1e-3 and default_lr("mlp") == FREE_FEATURE_LR == Config().lr
    image = dict(dataset="imagefolder", data_dir="d", model="resnet18", classes=3)
    assert lr_warning(Config(**image, lr=1e-3)) is None and lr_warning(Config(**image, lr=1e-2)) is None
    text = lr_warning(Config(**image, lr=0.05))
    assert text is not None and "50 times the authors' Adam rate 0.001" in text and "--lr 0.001" in text
    assert lr_warning(Config(lr=0.05)) is None  # free features: their default


def test_train_takes_the_resnet_default_and_warns_on_a_free_feature_lr(tree, tmp_path, capsys):
    assert main(_argv(tree, tmp_path / "a")) == 0
    err = capsys.readouterr().err
    assert err == "" and json.loads((tmp_path / "a" / "config.json").read_text())["lr"] == RESNET_LR
    assert main(_argv(tree, tmp_path / "b", "--lr", "0.05")) == 0
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ncgeom train: warning: lr = 0.05 with the ResNet resnet18")
    config = Config(dataset="imagefolder", data_dir=str(tree), model="resnet18", classes=3, epochs=1, batch_size=6)
    with pytest.warns(LearningRateWarning, match="free-feature default"):
        run(config)  # the library: Config's lr 0.05 with a ResNet
    with warnings.catch_warnings():
        warnings.simplefilter("error", LearningRateWarning)
        run(config.replace(lr=RESNET_LR))


# ---------------------------------------------------------------- checkpoints and summary.json


def test_checkpoints_are_opt_in(tree, tmp_path, capsys):
    assert main(_argv(tree, tmp_path / "none")) == 0
    out = capsys.readouterr().out
    assert not (tmp_path / "none" / "checkpoint.pt").exists() and "checkpoint.pt" not in out
    code = main(_argv(tree, tmp_path / "none", "--resume"))
    err = capsys.readouterr().err
    assert code == 2 and "no checkpoint to resume from" in err and "the default 0 writes none" in err
    assert main(_argv(tree, tmp_path / "one", "--checkpoint-every", "1")) == 0
    assert (tmp_path / "one" / "checkpoint.pt").is_file() and "checkpoint.pt" in capsys.readouterr().out
    assert main(_argv(tree, tmp_path / "one", "--checkpoint-every", "1", "--epochs", "2", "--resume")) == 0
    assert load_run(tmp_path / "one").summary.epochs_run == 2  # type: ignore[union-attr]


def test_summary_json_holds_the_fields_the_data_set_reads(tree, tmp_path, capsys):
    assert main(_argv(tree, tmp_path / "img", "--lr", "0.001")) == 0
    summary = json.loads((tmp_path / "img" / "summary.json").read_text())["config"]
    config = json.loads((tmp_path / "img" / "config.json").read_text())
    assert not set(summary) & set(GAUSSIAN_ONLY + ("hidden_dim", "depth", "init_scale", "init_noise", "noise_scale"))
    assert set(GAUSSIAN_ONLY) <= set(config)  # config.json keeps every field: run names (a hash of it) unchanged
    assert "test_fraction" in summary  # an ImageFolder may be split with it
    assert check_run(tmp_path / "img") is None  # the sweep's integrity check accepts it
    gaussian = Config(samples_per_class=20).applicable_dict()
    assert "test_fraction" not in gaussian and gaussian["samples_per_class"] == 20
    digits = Config(dataset="digits").applicable_dict()
    assert not set(digits) & set(GAUSSIAN_ONLY) and "test_fraction" in digits
    for name, reads in DATASET_FIELDS.items():  # every field a data set reads exists
        assert set(reads) <= set(Config().to_dict()) | {"data_dir", "workers", "precision", "checkpoint_every",
                                                          "eval_batch_size"}, name
    cfg = Config(dataset="cifar10", data_dir="d", model="resnet18", lr=1e-3)
    assert config_from_dict(cfg.applicable_dict()) == cfg  # the dropped fields were at their defaults


# ---------------------------------------------------------------- a single ImageFolder


def test_single_image_folder_split_is_stratified_and_seeded(single):
    assert image_folder_layout(single) == "single" and single_folder(single) == single
    a = split_image_folder(single, test_fraction=0.3, rng=np.random.default_rng(1))
    b = split_image_folder(single, test_fraction=0.3, rng=np.random.default_rng(1))
    c = split_image_folder(single, test_fraction=0.3, rng=np.random.default_rng(2))
    assert a.classes == ("kind0", "kind1", "kind2")
    assert np.bincount(a.y_test).tolist() == [round(0.3 * n) for n in (10, 7, 5)] == [3, 2, 2]  # digits' rule
    assert np.bincount(a.y_train).tolist() == [7, 5, 3]
    assert_array_equal(a.x_test, b.x_test)  # the same seed, the same split
    assert not np.array_equal(a.x_test, c.x_test)
    # train and test partition the images of each class
    whole = np.concatenate([a.x_train.reshape(len(a.y_train), -1), a.x_test.reshape(len(a.y_test), -1)])
    assert len({row.tobytes() for row in whole}) == 22


def test_train_splits_a_single_image_folder(single, tree, tmp_path, capsys):
    assert image_class_count("imagefolder", single) == 3
    assert main(_argv(single, tmp_path / "r", "--test-fraction", "0.3")) == 0
    saved = load_run(tmp_path / "r")
    assert saved.summary is not None and saved.summary.final.test_ncc_accuracy is not None
    config = Config(dataset="imagefolder", data_dir=str(single), model="resnet18", classes=3, test_fraction=0.3,
                    seed=4, lr=1e-3)
    data = read_image_data(config)
    assert data.y_test.size == 7 and data.y_train.size == 15
    again = read_image_data(config)
    assert_array_equal(data.x_test.load(np.arange(7)) if hasattr(data.x_test, "load") else data.x_test,
                       again.x_test.load(np.arange(7)) if hasattr(again.x_test, "load") else again.x_test)
    # a train/test tree with an explicit test_fraction: refused, one line
    code = main(_argv(tree, tmp_path / "x", "--test-fraction", "0.2"))
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "has train/ and test/ already" in err
    assert load_image_folder(tree).y_test.size == 6  # the two-split tree is read as before


def test_single_folder_bad_input(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    code = main(_argv(tmp_path / "empty", tmp_path / "r"))
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "no class folders" in err
    (tmp_path / "only_test" / "test" / "a").mkdir(parents=True)
    with pytest.raises(ValueError, match="train: no such folder"):
        single_folder(tmp_path / "only_test")
    code = main(_argv(tmp_path / "empty", tmp_path / "r", "--classes", "3", "--test-fraction", "1.5"))
    err = capsys.readouterr().err
    assert code == 2 and "test_fraction" in err
    with pytest.raises(ValueError, match="rng"):
        split_image_folder(tmp_path / "empty", test_fraction=0.3, rng=None)  # type: ignore[arg-type]
