"""ncgeom.metrics.outcome: NC / DC / neither / undefined, on hand-built embeddings with known metrics."""

import numpy as np
import pytest

from ncgeom.geometry import simplex_etf
from ncgeom.metrics import DC_SPECTRUM, NC_ETF, NC_WITHIN, classify_geometry, nc_metrics


def _classes(means: np.ndarray, per_class: int = 4, noise: float = 0.0, seed: int = 0):
    rng = np.random.default_rng(seed)
    y = np.repeat(np.arange(len(means)), per_class)
    return means[y] + noise * rng.standard_normal((y.size, means.shape[1])), y


def test_an_exact_etf_is_nc_and_a_collapsed_spectrum_is_dc():
    z, y = _classes(simplex_etf(5, 6, rng=np.random.default_rng(1)))
    assert classify_geometry(nc_metrics(z, y).to_dict()) == "NC"
    rng = np.random.default_rng(2)  # class means spanning 2 of 6 directions, 1e-3 beside: a collapsed spectrum
    flat = np.hstack([rng.standard_normal((5, 2)), 1e-3 * rng.standard_normal((5, 4))])
    z, y = _classes(flat)
    m = nc_metrics(z, y).to_dict()
    assert min(m["spectrum"]) < DC_SPECTRUM
    assert classify_geometry(m) == "DC"


def test_the_thresholds_decide_at_their_values():
    base = {"etf_distance": NC_ETF / 2, "within_class": NC_WITHIN / 2, "spectrum": [1.0, 0.5]}
    assert classify_geometry(base) == "NC"
    assert classify_geometry({**base, "etf_distance": NC_ETF}) == "neither"  # strict: < NC_ETF
    assert classify_geometry({**base, "within_class": NC_WITHIN}) == "neither"
    assert classify_geometry({**base, "spectrum": [1.0, DC_SPECTRUM]}) == "NC"  # strict: < DC_SPECTRUM
    assert classify_geometry({**base, "spectrum": [1.0, np.nextafter(DC_SPECTRUM, 0)]}) == "DC"


@pytest.mark.parametrize("bad", [{"spectrum": None}, {"spectrum": [float("nan")]}, {"etf_distance": float("nan")},
                                 {"within_class": None}])
def test_missing_or_non_finite_metrics_are_undefined(bad):
    base = {"etf_distance": 0.01, "within_class": 0.01, "spectrum": [1.0, 0.9]}
    assert classify_geometry({**base, **bad}) == "undefined"


def test_nc_is_never_reported_below_d_equal_c_minus_1():
    metrics = {"etf_distance": 0.0, "within_class": 0.0, "spectrum": [1.0, 1.0]}
    assert classify_geometry(metrics, dim=2, num_classes=4) == "neither"
    assert classify_geometry(metrics, dim=3, num_classes=4) == "NC"
