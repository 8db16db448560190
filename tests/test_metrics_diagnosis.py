"""``ncgeom metrics`` gives a diagnosis (issue 26 item 1): the verdict by the rule of the claims, the NCC rule, test
embeddings scored with train means, the loss against NC and the bound (and when it is not one), the warnings, and
one-line errors for every bad input of the new options (ncgeom.metrics.diagnosis, ncgeom.cli.metrics)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch
from conftest import run_main
from numpy.testing import assert_allclose

from ncgeom.geometry import normalize, simplex_etf
from ncgeom.losses import batch_loss
from ncgeom.metrics import DC_SPECTRUM, NC_ETF, NC_WITHIN, class_means, field_metrics, nc_metrics, ncc_accuracy
from ncgeom.metrics.diagnosis import LossSpec, detect_normalization, diagnose
from ncgeom.population import model_from_embeddings, population_loss
from ncgeom.theory import batch_nc_value, nc_value

EPS = np.finfo(np.float64).eps


def _save(path, z, y) -> str:
    np.savez(path, z=z, labels=y)
    return str(path)


def _json(argv, capsys) -> dict:
    code, out, err = run_main(["metrics", *argv, "--json"], capsys)
    assert code == 0 and err == "", err
    return json.loads(out)


def _error(argv, capsys, fragment: str) -> None:
    code, out, err = run_main(["metrics", *argv], capsys)
    assert code == 2 and out == "", (argv, out)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ncgeom metrics: error: ") and fragment in lines[0], (argv, err)


def _spectrum_means(smallest: float, rng) -> np.ndarray:
    """C = 4 class means in R^3 whose normalized class-mean spectrum is exactly [1, 1, smallest]."""
    etf = simplex_etf(4)  # [4, 3], centred, spectrum [1, 1, 1]
    q = np.linalg.qr(rng.standard_normal((3, 3)))[0]
    return etf @ np.diag([1.0, 1.0, math.sqrt(smallest)]) @ q


# ---------------------------------------------------------------- the verdict


def test_a_smallest_eigenvalue_of_0_0075_is_dc(tmp_path, capsys):
    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(4), 5)
    z = _spectrum_means(0.0075, rng)[y]
    # the spectrum by an independent route: the eigenvalues of np.cov of the class means
    eig = np.sort(np.linalg.eigvalsh(np.cov(class_means(z, y).T)))[::-1]
    assert_allclose(eig[-1] / eig[0], 0.0075, rtol=1e4 * EPS)
    path = _save(tmp_path / "dc.npz", z, y)
    result = _json([path], capsys)
    assert result["verdict"] == "DC" and result["rule"]["dc_spectrum"] == DC_SPECTRUM == 1e-2
    assert_allclose(result["spectrum_min"], 0.0075, rtol=1e4 * EPS)
    code, out, _ = run_main(["metrics", path], capsys)
    assert code == 0 and "1 below 0.01, the DC threshold of the verdict (DC_SPECTRUM)" in out
    assert "verdict: DC: the smallest normalized class-mean eigenvalue 0.0075 < 0.01 (DC_SPECTRUM)" in out
    above = _json([_save(tmp_path / "not.npz", _spectrum_means(0.0125, rng)[y], y)], capsys)
    assert above["verdict"] != "DC"  # just above the threshold


def test_nc_and_neither_follow_the_rule_of_the_claims(tmp_path, capsys):
    rng = np.random.default_rng(1)
    y = np.repeat(np.arange(5), 8)
    near = simplex_etf(5)[y] + 0.001 * rng.standard_normal((40, 4))
    result = _json([_save(tmp_path / "nc.npz", near, y)], capsys)
    assert result["verdict"] == "NC" and result["etf_distance"] < NC_ETF and result["within_class"] < NC_WITHIN
    far = simplex_etf(5)[y] + 0.5 * rng.standard_normal((40, 4))
    result = _json([_save(tmp_path / "far.npz", far, y)], capsys)
    assert result["verdict"] == "neither" and "etf_distance" in result["verdict_reason"]


def test_below_c_minus_one_dimensions_nc_is_unreachable(tmp_path, capsys):
    rng = np.random.default_rng(2)
    y = np.repeat(np.arange(6), 4)
    z = normalize(rng.standard_normal((6, 3))[y], "sphere")
    path = _save(tmp_path / "low.npz", z, y)
    code, out, _ = run_main(["metrics", path], capsys)
    rows = {line.split()[0]: line for line in out.splitlines()[2:] if line and not line.startswith(" ")}
    assert "unreachable (d < C - 1)" in rows["etf_distance"] and "unreachable" in rows["equal_inner_product"]
    assert "warning: d = 3 < C - 1 = 5: no simplex ETF exists" in out
    assert _json([path], capsys)["verdict"] != "NC"


# ---------------------------------------------------------------- NCC rules, train means, normalization


def _naive_ncc(z, y, means, labels_of_means, rule):
    correct = 0
    for zi, yi in zip(z, y):
        if rule == "inner":
            scores = [float(zi @ m) for m in means]
            best = int(np.argmax(scores))
        else:
            dists = [float(np.sum((zi - m) ** 2)) for m in means]
            best = int(np.argmin(dists))
        correct += labels_of_means[best] == yi
    return correct / len(y)


def test_ncc_rules_and_train_means_against_a_naive_loop(tmp_path, capsys):
    rng = np.random.default_rng(3)
    y_train, y_test = np.repeat([2, 5, 9], 10), np.repeat([2, 5, 9], 6)
    centres = np.array([[4.0, 0.0], [0.0, 1.0], [0.7, 1.4]])  # a long mean: the inner rule favours it
    z_train = centres[np.searchsorted([2, 5, 9], y_train)] + 0.4 * rng.standard_normal((30, 2))
    z_test = centres[np.searchsorted([2, 5, 9], y_test)] + 0.4 * rng.standard_normal((18, 2))
    means = class_means(z_train, y_train)
    for rule in ("inner", "euclidean"):
        train_acc = _naive_ncc(z_train, y_train, means, [2, 5, 9], rule)
        test_acc = _naive_ncc(z_test, y_test, means, [2, 5, 9], rule)
        assert ncc_accuracy(z_train, y_train, rule=rule) == train_acc
        result = _json([_save(tmp_path / "test.npz", z_test, y_test), "--train", _save(tmp_path / "train.npz", z_train, y_train),
                        "--ncc", rule], capsys)
        assert result["ncc_rule"] == rule and result["test_ncc_accuracy"] == test_acc
        own = _json([str(tmp_path / "train.npz"), "--ncc", rule], capsys)
        assert own["ncc_accuracy"] == train_acc
    inner, euclid = (_naive_ncc(z_train, y_train, means, [2, 5, 9], r) for r in ("inner", "euclidean"))
    assert inner < euclid  # the case the issue met: the rules differ on unnormalized features
    default = _json([str(tmp_path / "train.npz")], capsys)
    assert default["ncc_rule"] == "inner" and default["ncc_accuracy"] == nc_metrics(z_train, y_train).ncc_accuracy
    warning = next(w for w in default["warnings"] if "not normalized" in w)
    assert f"inner {inner:.4g}, euclidean {euclid:.4g}" in warning


def test_normalize_option_and_detection(tmp_path, capsys):
    rng = np.random.default_rng(4)
    y = np.repeat(np.arange(3), 5)
    z = 3.0 * rng.standard_normal((15, 4))
    path = _save(tmp_path / "raw.npz", z, y)
    raw = _json([path], capsys)
    assert raw["normalization_detected"] == "none" and any("not normalized" in w for w in raw["warnings"])
    sphere = _json([path, "--normalize", "sphere"], capsys)
    assert sphere["normalization_detected"] == "sphere" and sphere["warnings"] == []
    expected = nc_metrics(normalize(z, "sphere"), y).to_dict()
    assert {k: sphere[k] for k in expected} == expected
    ball = _json([path, "--normalize", "ball"], capsys)
    assert ball["normalization_detected"] in ("ball", "sphere") and ball["norm_max"] <= 1.0 + 4 * 2.0**-24
    # float32 rounding of unit rows still reads as the sphere (tolerance d 2^-24)
    unit32 = normalize(rng.standard_normal((50, 64)), "sphere").astype(np.float32).astype(np.float64)
    assert detect_normalization(unit32)[0] == "sphere"


# ---------------------------------------------------------------- the loss against NC


@pytest.mark.parametrize("setting, beta", [("scl", 0.0), ("hscl", 3.0), ("ucl", 0.0), ("hucl", 2.0)])
def test_loss_at_an_exact_nc_configuration_equals_the_closed_forms(setting, beta):
    c, per = 4, 5
    y = np.repeat(np.arange(c), per)
    z = simplex_etf(c)[y]
    report = diagnose(z, y, loss=LossSpec(setting, beta=beta, tau=0.5)).loss
    assert report is not None
    # batch: the loss of the batch at NC is the closed form of section 7 (independent code)
    assert_allclose(report.batch_loss, report.batch_nc_value, rtol=1e3 * EPS)
    assert_allclose(report.batch_nc_value, batch_nc_value(setting, class_counts=[per] * c, beta=beta, tau=0.5), rtol=EPS)
    # population: the empirical law of NC embeddings is the NC model: its loss is the closed form of section 5
    assert report.population_method == "exact"
    assert_allclose(report.population_loss, nc_value(setting, "infonce", num_classes=c, num_negatives=1, beta=beta, tau=0.5),
                    rtol=1e3 * EPS)
    assert report.is_bound and report.population_loss >= report.bound - 1e3 * EPS
    if setting == "hucl":
        assert report.bound < report.nc_value and "not attained" in report.bound_reason


def test_loss_of_random_embeddings_matches_the_library_and_respects_the_bound():
    rng = np.random.default_rng(5)
    c, per, d = 3, 6, 3
    y = np.repeat(np.arange(c), per)
    z = normalize(rng.standard_normal((c * per, d)), "sphere")
    report = diagnose(z, y, loss=LossSpec("hscl", beta=1.0, tau=0.5, num_negatives=2)).loss
    assert report is not None
    direct = float(batch_loss(torch.as_tensor(z), torch.as_tensor(y), "hscl", beta=1.0, tau=0.5, num_negatives=2))
    assert report.batch_loss == direct
    model = model_from_embeddings(z, y)
    assert_allclose(report.population_loss, population_loss(model, "hscl", "infonce", num_negatives=2, eta=1.0,
                                                             tau=0.5).value, rtol=EPS)
    assert report.is_bound and report.population_loss >= report.bound  # Theorems 1 + 2 (can fail: a test of them)


def test_when_the_bound_is_not_one(tmp_path, capsys):
    rng = np.random.default_rng(6)
    y = np.repeat(np.arange(4), 5)
    scaled = 2.0 * simplex_etf(4)[y]
    loss = _json([_save(tmp_path / "big.npz", scaled, y), "--setting", "scl"], capsys)["loss"]
    assert not loss["is_bound"] and "normalized fails" in loss["bound_reason"]
    # beyond the ball NC is beaten: the scaled ETF is below the "bound" (docs/theory.md, hypothesis 2.2)
    assert loss["population_loss"] < loss["bound"]
    low = normalize(rng.standard_normal((4, 2))[y], "sphere")
    loss = _json([_save(tmp_path / "low.npz", low, y), "--setting", "ucl"], capsys)["loss"]
    assert not loss["is_bound"] and "dim_ge_c_minus_1 fails" in loss["bound_reason"]
    lop = np.repeat(np.arange(4), [8, 4, 4, 4])
    loss = _json([_save(tmp_path / "imb.npz", simplex_etf(4)[lop], lop), "--setting", "scl"], capsys)["loss"]
    assert not loss["is_bound"] and "balanced fails" in loss["bound_reason"]
    code, out, _ = run_main(["metrics", str(tmp_path / "big.npz"), "--setting", "scl"], capsys)
    assert "NOT a lower bound here: normalized fails" in out


def test_sampled_psi_and_population_skipped_over_the_budget(tmp_path, capsys):
    rng = np.random.default_rng(7)
    y = np.repeat(np.arange(3), 40)
    z = normalize(rng.standard_normal((120, 3)), "sphere")
    path = _save(tmp_path / "z.npz", z, y)
    loss = _json([path, "--setting", "ucl", "--psi", "triplet", "--num-negatives", "2"], capsys)["loss"]
    assert loss["estimator"] == "sampled"
    assert_allclose(loss["batch_nc_value"], nc_value("ucl", "triplet", num_classes=3, num_negatives=2), rtol=EPS)
    again = _json([path, "--setting", "ucl", "--psi", "triplet", "--num-negatives", "2"], capsys)["loss"]
    assert again["batch_loss"] == loss["batch_loss"]  # --seed 0: the same draws
    skipped = _json([path, "--setting", "scl", "--max-memory", "400K"], capsys)["loss"]
    assert skipped["population_loss"] is None and skipped["population_note"].startswith("skipped")


# ---------------------------------------------------------------- the classifier


def test_classifier_adds_the_field_metrics(tmp_path, capsys):
    rng = np.random.default_rng(8)
    y = np.repeat(np.arange(3), 6)
    z = simplex_etf(3)[y] + 0.1 * rng.standard_normal((18, 2))
    weights = simplex_etf(3) + 0.05 * rng.standard_normal((3, 2))
    np.save(tmp_path / "W.npy", weights)
    result = _json([_save(tmp_path / "z.npz", z, y), "--classifier", str(tmp_path / "W.npy")], capsys)
    assert result["field"] == field_metrics(z, y, classifier=weights).to_dict()
    np.save(tmp_path / "W4.npy", np.zeros((4, 2)))
    _error([str(tmp_path / "z.npz"), "--classifier", str(tmp_path / "W4.npy")], capsys,
           "--classifier " + str(tmp_path / "W4.npy") + ": expected weights [C, d] = [3, 2]")


# ---------------------------------------------------------------- bad input: one line, exit 2


def test_new_options_reject_bad_input_in_one_line(tmp_path, capsys):
    rng = np.random.default_rng(9)
    y = np.repeat(np.arange(3), 4)
    path = _save(tmp_path / "z.npz", rng.standard_normal((12, 3)), y)
    other = _save(tmp_path / "other.npz", rng.standard_normal((12, 5)), y)
    unseen = _save(tmp_path / "unseen.npz", rng.standard_normal((12, 3)), y + 1)
    np.save(tmp_path / "z.npy", rng.standard_normal((12, 3)))
    (tmp_path / "W.txt").write_text("1 2 3\n")
    np.save(tmp_path / "W1.npy", np.zeros(3))
    cases = [
        (["--normalize", "unit"], "--normalize must be one of"),
        (["--ncc", "cosine"], "--ncc must be one of"),
        (["--train", str(tmp_path / "missing.npz")], "--train " + str(tmp_path / "missing.npz") + ": no such file"),
        (["--train", other], "train embeddings have d = 5 columns, the embeddings 3"),
        (["--train", str(tmp_path / "z.npy")], "--train-labels FILE"),
        (["--train-labels", str(tmp_path / "z.npy")], "give --train too"),
        (["--classifier", str(tmp_path / "W.txt")], "expected a .npy file of weights"),
        (["--classifier", str(tmp_path / "missing.npy")], "no such file"),
        (["--classifier", str(tmp_path / "W1.npy")], "expected weights [C, d] = [3, 3]"),
        (["--setting", "xcl"], "--setting must be one of"),
        (["--setting", "hscl"], "--beta B is required with --setting hscl"),
        (["--beta", "2"], "give --setting too"),
        (["--psi", "triplet"], "give --setting too"),
        (["--setting", "hscl", "--beta", "-1"], "--beta must be"),
        (["--setting", "scl", "--tau", "0"], "--tau must be"),
        (["--setting", "scl", "--psi", "mine"], "--psi must be one of"),
        (["--setting", "scl", "--num-negatives", "0"], "--num-negatives must be an integer >= 1"),
        (["--seed", "-1"], "--seed must be an integer >= 0"),
    ]
    for argv, fragment in cases:
        _error([path, *argv], capsys, fragment)
    _error([path, "--train", unseen], capsys, "label 0 is not among class_labels")
