"""Shuffled batches (``batches="shuffle"``, ncgeom.data.batches): a DataLoader's shuffle=True, drop_last=True.

Order of trust: the sampler against the two-line reference it is defined as (one permutation, cut into
floor(N / B) rows), its generator state and its errors; the training run's batches are the sampler's (the
run recomputed by hand: the same permutation stream fed to the same loss); the NC value against an explicit
loop over the documented draws; the engines (the stacked engine refuses, the sweep trains such a run alone,
bitwise as ``run``).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from numpy.testing import assert_array_equal

from ncgeom.campaigns.plan import plan_units
from ncgeom.campaigns.sweep import run_sweep
from ncgeom.data import batches_per_epoch, check_batches, class_balanced_batches, epoch_batches, shuffled_batches
from ncgeom.runs import Config, make_data, run, run_nc_value
from ncgeom.runs.nc_reference import NC_SHUFFLE_BATCHES
from ncgeom.runs.setup import seed_streams
from ncgeom.runs.stacked import run_stack, stackable
from ncgeom.theory import batch_nc_value


def _indices(units) -> list[list[int]]:
    """The config indices of each unit of a plan (ncgeom.campaigns.plan.Unit)."""
    return [list(u.indices) for u in units]


def _reference(n: int, b: int, rng: np.random.Generator) -> np.ndarray:
    return rng.permutation(n)[: (n // b) * b].reshape(n // b, b)


@pytest.mark.parametrize(("n", "b"), [(10, 4), (12, 4), (7, 7), (100, 3), (2, 2)])
def test_one_permutation_cut_into_floor_n_over_b_batches(n, b):
    rng, ref_rng = np.random.default_rng(5), np.random.default_rng(5)
    for _ in range(3):  # consecutive epochs on one generator
        got = shuffled_batches(n, b, rng=rng)
        assert_array_equal(got, _reference(n, b, ref_rng))
        assert got.shape == (n // b, b) and got.dtype.kind == "i"
        assert np.unique(got).size == got.size  # no sample twice in an epoch
    assert rng.bit_generator.state == ref_rng.bit_generator.state  # exactly one permutation per epoch


def test_epoch_batches_dispatches_and_counts_steps():
    y = np.arange(50) % 5
    assert batches_per_epoch("balanced", 50, 16) == 4 and batches_per_epoch("shuffle", 50, 16) == 3
    assert_array_equal(epoch_batches("shuffle", y, 16, rng=np.random.default_rng(1)),
                       shuffled_batches(50, 16, rng=np.random.default_rng(1)))
    assert_array_equal(epoch_batches("balanced", y, 16, rng=np.random.default_rng(1)),
                       class_balanced_batches(y, 16, num_batches=4, rng=np.random.default_rng(1)))


def test_check_batches_refuses_what_a_sampler_cannot_draw():
    y = np.repeat(np.arange(4), [16, 11, 8, 5])
    check_batches("balanced", y, 20)  # 5 of each class: the smallest has 5
    with pytest.raises(ValueError, match="smallest class has 5"):
        check_batches("balanced", y, 24)
    check_batches("shuffle", y, 40)  # any B <= N
    with pytest.raises(ValueError, match="batch_size"):
        check_batches("shuffle", y, 41)


def test_class_counts_follow_the_class_sizes():
    """Shuffled: a class's mean count per batch is B n_c / N (hypergeometric); balanced: equal counts."""
    y = np.repeat(np.arange(4), [70, 20, 6, 4])  # imbalanced, N = 100
    rng = np.random.default_rng(0)
    counts = np.array([np.bincount(y[row], minlength=4) for _ in range(400)
                       for row in shuffled_batches(100, 20, rng=rng)])
    expected = 20 * np.array([70, 20, 6, 4]) / 100
    # the epoch's 5 batches hold 100 distinct samples = every sample: each class's total per epoch is exact
    assert_array_equal(counts.reshape(400, 5, 4).sum(axis=1), np.tile([70, 20, 6, 4], (400, 1)))
    assert np.allclose(counts.mean(axis=0), expected, rtol=0, atol=1e-12)  # 5 batches cover the whole data set
    balanced = np.array([np.bincount(y[row], minlength=4)
                         for row in class_balanced_batches(y, 16, num_batches=50, rng=rng)])
    assert (balanced == 4).all()  # the smallest class (4) caps a class-balanced batch at 16


@pytest.mark.parametrize(("args", "message"), [
    ((0, 2), "num_samples"), ((5, 1), "batch_size"), ((5, 6), "batch_size"), ((5.5, 2), "num_samples"),
])
def test_bad_arguments_name_themselves(args, message):
    with pytest.raises(ValueError, match=message):
        shuffled_batches(*args, rng=np.random.default_rng(0))
    with pytest.raises(ValueError, match="rng"):
        shuffled_batches(5, 2, rng=0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="batches must be one of 'balanced', 'shuffle'"):
        batches_per_epoch("random", 5, 2)


def test_config_accepts_batches_a_balanced_sampler_cannot_fill():
    """Class sizes 16, 11, 8, 5 (imbalance 4): a class-balanced batch of 24 needs 6 of each class (refused);
    shuffled batches take any B <= N."""
    with pytest.raises(ValueError, match="class-balanced batch"):
        Config(classes=4, samples_per_class=10, imbalance=4.0, batch_size=24)
    config = Config(classes=4, samples_per_class=10, imbalance=4.0, batch_size=24, batches="shuffle")
    assert config.batches == "shuffle" and "batches" in config.to_dict()
    assert "batches" not in Config().to_dict()  # a late field: written only away from its default
    with pytest.raises(ValueError, match="batches must be one of"):
        Config(batches="iid")


# --- runs -----------------------------------------------------------------------------------------------------
def _config(**changes) -> Config:
    values = dict(setting="ucl", classes=4, samples_per_class=10, imbalance=4.0, batch_size=8, epochs=3,
                  batches="shuffle", dtype="float64", lr=0.05)
    values.update(changes)
    return Config(**values)


def test_nc_value_is_the_mean_over_the_documented_draws():
    config = _config()
    data = make_data(config, rng=seed_streams(config.seed)[0])
    value, source = run_nc_value(config, labels=data.y_train)
    rng = np.random.default_rng([config.seed, NC_SHUFFLE_BATCHES])
    values = []
    for _ in range(NC_SHUFFLE_BATCHES):
        idx = rng.choice(data.num_train, config.batch_size, replace=False)
        values.append(batch_nc_value("ucl", class_counts=np.bincount(data.y_train[idx], minlength=4),
                                     num_negatives=1, beta=0.0, tau=config.tau))
    assert value == pytest.approx(float(np.mean(values)), rel=1e-14)
    assert np.std(values) > 0  # UCL: the collision fraction, hence the value, varies with the batch
    assert f"mean over {NC_SHUFFLE_BATCHES} shuffled batches" in source and "s.e." in source
    with pytest.raises(ValueError, match="labels="):
        run_nc_value(config)


def test_run_trains_on_the_shuffled_batches():
    """The run's trajectory is the one recomputed here from the same seed streams: the batch stream's
    shuffled_batches each epoch, the loss of batch_loss, torch's fused Adam, the engines' update (float64, so equality is exact)."""
    from ncgeom.losses import batch_loss
    from ncgeom.models import build_model

    config = _config(model="unconstrained", setting="hscl", beta=2.0)
    result = run(config)
    assert result.status == "completed" and len(result.history) == config.epochs
    data_rng, init_rng, batch_rng, generator = seed_streams(config.seed)
    data = make_data(config, rng=data_rng)
    model = build_model("unconstrained", dim=3, norm="sphere", num_samples=data.num_train, labels=data.y_train,
                        generator=generator, rng=init_rng, dtype=torch.float64)
    optimizer = torch.optim.Adam(model.parameters(), lr=config.lr, fused=True)
    y = torch.as_tensor(data.y_train)
    steps = data.num_train // config.batch_size
    for epoch in range(config.epochs):
        total = 0.0
        for idx in torch.from_numpy(shuffled_batches(data.num_train, config.batch_size, rng=batch_rng)):
            loss = batch_loss(model(idx), y[idx], "hscl", beta=2.0, tau=config.tau)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            total += loss.item()
        assert result.history[epoch].loss == total / steps


def test_stacked_engine_refuses_and_the_sweep_trains_alone():
    shuffled, balanced = _config(model="unconstrained"), _config(model="unconstrained", batches="balanced",
                                                                 imbalance=1.0)
    assert not stackable(shuffled) and stackable(balanced)
    with pytest.raises(ValueError, match="batches='shuffle' are not stacked"):
        run_stack([shuffled])
    configs = [balanced, shuffled, balanced.replace(seed=1), shuffled.replace(seed=1)]
    assert sorted(map(sorted, _indices(plan_units(configs, engine="stacked", workers=1)))) == [[0, 2], [1], [3]]


SPEC = """
name = "shuffle"
description = "shuffled batches next to class-balanced ones"
[base]
model = "unconstrained"
setting = "ucl"
classes = 4
samples_per_class = 10
imbalance = 4.0
batch_size = 8
epochs = 3
dtype = "float64"
[[grid]]
batches = ["shuffle", "balanced"]
seed = [0, 1]
[tiny]
[quick]
[full]
"""


def test_both_engines_train_a_shuffled_run_as_run_does(tmp_path):
    """The batched engine hands a shuffled config to ``run``: its files hold exactly run's numbers."""
    path = tmp_path / "shuffle.toml"
    path.write_text(SPEC)
    for engine in ("stacked", "sequential"):
        result = run_sweep(path, tmp_path / engine, engine=engine, workers=1)
        shuffled = [r.summary for r in result.runs if r.summary.config.batches == "shuffle"]
        assert len(shuffled) == 2 and len(result.runs) == 4
        for summary in shuffled:
            alone = run(summary.config)
            assert summary.final.loss == alone.history[-1].loss
            assert summary.final.metrics == alone.history[-1].metrics
            assert summary.nc_value == alone.summary()["nc_value"]
