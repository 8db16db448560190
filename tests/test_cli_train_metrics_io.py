"""`ncgeom train` prints numbers that parse back to what summary.json records."""

import re

import pytest
from numpy.testing import assert_allclose

from ncgeom.atomic_io import read_json
from ncgeom.cli.main import main
from ncgeom.cli.train import _number

LINE = re.compile(r"^loss (?P<loss>\S+) \| nc_value (?P<nc>\S+) \[.*\] \| gap (?P<gap>\S+)$", re.MULTILINE)


def test_printed_loss_and_gap_parse_back_to_the_summary(tmp_path, capsys):
    rc = main(["train", "--classes", "3", "--samples-per-class", "6", "--batch-size", "18", "--epochs", "2",
               "--out", str(tmp_path / "r"), "--quiet"])
    out = capsys.readouterr().out
    assert rc == 0
    summary = read_json(tmp_path / "r" / "summary.json")
    match = LINE.search(out)
    assert match is not None, out
    # %.Ng rounds to N significant digits: relative error at most 0.5 * 10^(1 - N)
    assert_allclose(float(match["gap"]), summary["final"]["gap"], rtol=0.5e-5, atol=0)
    assert_allclose(float(match["loss"]), summary["final"]["loss"], rtol=0.5e-9, atol=0)
    assert_allclose(float(match["nc"]), summary["nc_value"], rtol=0.5e-5, atol=0)


@pytest.mark.parametrize("value", [2.42749254e-05, -3.1e-12, 1234567.0, 0.5])
def test_number_format_keeps_the_exponent(value):
    # the old format cut str(2.42749254e-05) to 10 characters: "2.42749254", off by 10^5
    assert_allclose(float(_number(value, 6)), value, rtol=0.5e-5, atol=0)
    assert _number(None, 6) == "n/a"
