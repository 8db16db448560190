"""The paper presets (specs ``paper_*``, ncgeom.campaigns.claims.PRESETS; docs/experiments.md, "Paper presets").

Each preset's full scale must be the authors' settings (rjiang03/HCL at 7a55a2f, main/SCL and main/UCL
train_mean_classifier.py and model.py: CIFAR-100 through torchvision, ResNet-50 with the 3 x 3 stem and no
max-pool, the head Linear(2048, 512) -> BatchNorm -> ReLU -> Linear(512, C - 1), ball clipping, temperature 1,
the test transform only (no augmentation), DataLoader(shuffle=True, drop_last=True) with batch 512, Adam 1e-3
without weight decay, 401 epochs); ``ncgeom reproduce`` must not run them (they need a GPU and the data set);
``ncgeom sweep NAME --data-dir DIR`` must run them and decide them by their claim's rule.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from ncgeom.campaigns.claims import ALL_CLAIMS, CLAIMS, PRESETS, claim_of_spec, claim_spec, run_claims
from ncgeom.campaigns.plan import sweep_configs
from ncgeom.campaigns.spec import expand, load_spec, spec_names
from ncgeom.cli.main import main
from ncgeom.testing.images import write_cifar_like
from ncgeom.vocabulary import effective_beta

AUTHORS = dict(dataset="cifar100", classes=100, model="resnet50", norm="ball", tau=1.0, positives="label",
               convention="authors", batches="shuffle", epochs=401, lr=1e-3, weight_decay=0.0, estimator="weighted")


@pytest.mark.parametrize("claim_id", list(PRESETS))
def test_full_scale_is_the_authors_setup(claim_id):
    spec = claim_spec(claim_id)
    assert spec.name.startswith("paper_cifar100_") and claim_of_spec(spec) is PRESETS[claim_id]
    configs = expand(spec, scale="full")
    for c in configs:
        assert {k: getattr(c, k) for k in AUTHORS} == AUTHORS
        assert c.embedding_dim == 99 and c.device == "cuda" and c.precision == "bf16"
        assert c.batch_size == 512 or claim_id == "8-cifar100"
    seeds: dict[tuple, set[int]] = {}
    for c in configs:
        seeds.setdefault((c.setting, effective_beta(c.setting, c.beta), c.batch_size), set()).add(c.seed)
    assert all(s == {0, 1, 2} for s in seeds.values())  # the fewest seeds that give an interval
    assert len(expand(spec, scale="quick")) == len(configs)  # quick: the same grid on a smaller budget


def test_grids_are_the_claims():
    grid = lambda cid: {(c.setting, effective_beta(c.setting, c.beta)) for c in expand(claim_spec(cid), scale="full")}  # noqa: E731
    assert grid("5-cifar100") == {("scl", 0.0), ("ucl", 0.0), ("hscl", 5.0), ("hscl", 10.0), ("hucl", 5.0), ("hucl", 10.0)}
    betas = (0.0, 1.0, 2.0, 5.0, 10.0, 30.0)
    assert grid("6-cifar100") == {("hscl", b) for b in betas} | {("hucl", b) for b in betas}
    assert {c.batch_size for c in expand(claim_spec("8-cifar100"), scale="full")} == {32, 64, 128, 256, 512}


def test_reproduce_runs_the_claims_without_the_presets(tmp_path, monkeypatch):
    assert not set(CLAIMS) & set(PRESETS) and ALL_CLAIMS == {**CLAIMS, **PRESETS}
    assert {c.spec for c in CLAIMS.values()} | {c.spec for c in PRESETS.values()} == set(spec_names())
    seen = []
    monkeypatch.setattr("ncgeom.campaigns.claims._run_claims_locked",
                        lambda out, ids, *args, **kwargs: seen.append(ids) or ())
    run_claims(tmp_path / "out", scale="tiny")
    assert seen == [list(CLAIMS)]


def test_data_dir_replaces_the_folder_of_image_configs_only(tmp_path):
    configs = sweep_configs(load_spec("paper_cifar100_claim5"), scale="tiny", data_dir=tmp_path)
    assert {c.data_dir for c in configs} == {str(tmp_path.absolute())}
    synthetic = sweep_configs(load_spec("claim6_hardness_nc"), scale="tiny", data_dir=tmp_path)
    assert {c.data_dir for c in synthetic} == {None}


def test_missing_data_folder_and_missing_gpu_are_one_line(tmp_path, capsys):
    rc = main(["sweep", "paper_cifar100_claim5", "--scale", "tiny", "--data-dir", str(tmp_path / "none"),
               "--out", str(tmp_path / "a")])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "no such folder" in err[0] and not (tmp_path / "a").exists()
    import torch

    if not torch.cuda.is_available():  # the full scale asks for CUDA
        rc = main(["sweep", "paper_cifar100_claim5", "--scale", "full", "--data-dir", str(tmp_path),
                   "--out", str(tmp_path / "b")])
        err = capsys.readouterr().err.strip().splitlines()
        assert rc == 2 and len(err) == 1 and "CUDA is not available" in err[0]


@pytest.mark.slow
def test_tiny_sweep_runs_on_a_generated_folder_and_decides_by_the_claims_rule(tmp_path, capsys):
    data = tmp_path / "data"
    write_cifar_like(data, name="cifar10", num_per_class=2, num_test_per_class=1, rng=np.random.default_rng(0))
    out = tmp_path / "p5"
    rc = main(["sweep", "paper_cifar100_claim5", "--scale", "tiny", "--data-dir", str(data), "--out", str(out),
               "--quiet"])
    printed = capsys.readouterr().out
    assert rc == 0 and "2/2 runs finished" in printed and "claim 5-cifar100 |" in printed
    from ncgeom.campaigns.claims import ClaimResult

    rows = ClaimResult.read(out / "claim.json").rows  # claim.json is a ClaimResult, read through its type
    assert {r.claim for r in rows} == {"5-cifar100"} and rows[-1].setting == "overall"
    for run_dir in sorted(p for p in out.iterdir() if p.is_dir()):
        config = json.loads((run_dir / "config.json").read_text())
        assert Path(config["data_dir"]) == data.absolute() and config["model"] == "resnet18"
        assert json.loads((run_dir / "summary.json").read_text())["status"] == "completed"
