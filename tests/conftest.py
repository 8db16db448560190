"""Shared pytest configuration: hypothesis profiles (in the spirit of numpy's conftest.py).

Profiles
--------
``ci`` (the default, with or without CI=true)
    Derandomized (the same examples on every run and machine, no example database), 30 examples per
    property, no deadline. A red CI run is reproducible by rerunning it.
``explore``
    Random: 500 examples per property, a fresh seed each run, printed in the pytest header together
    with the command that replays it; failures print a ``@reproduce_failure`` blob and hypothesis'
    explanation of the failing example (``Phase.explain``). Use it to look for new counterexamples.
``dev``
    Random, 100 examples: a quick local exploration.

Select a profile with the environment variable (or hypothesis' own pytest option)::

    HYPOTHESIS_PROFILE=explore pytest tests/test_theory.py
    pytest --hypothesis-profile=explore tests/test_theory.py
    HYPOTHESIS_PROFILE=explore pytest --hypothesis-seed=1234 tests/test_theory.py   # replay a seed

A test that sets ``@settings(max_examples=...)`` itself keeps its own count under every profile.
"""

import os
import random
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, settings

from ncgeom.cli.main import main

_COMMON: dict[str, Any] = {"deadline": None, "suppress_health_check": [HealthCheck.too_slow], "print_blob": True}

settings.register_profile("ci", derandomize=True, max_examples=30, database=None, **_COMMON)
settings.register_profile("explore", derandomize=False, max_examples=500, phases=tuple(Phase), **_COMMON)
settings.register_profile("dev", derandomize=False, max_examples=100, **_COMMON)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
    # Runs before hypothesis' own pytest_configure, which turns --hypothesis-seed into the global seed:
    # a random profile without an explicit seed gets one drawn here, so that the header can print it.
    profile = config.getoption("hypothesis_profile", None) or settings.get_current_profile_name()
    if profile != "ci" and config.getoption("hypothesis_seed", None) is None:
        config.option.hypothesis_seed = str(random.SystemRandom().randrange(2**32))


def pytest_report_header(config):
    seed = config.getoption("hypothesis_seed", None)
    profile = config.getoption("hypothesis_profile", None) or settings.get_current_profile_name()
    if seed is None:
        return f"hypothesis profile {profile!r} (derandomized)"
    return (f"hypothesis profile {profile!r}, seed {seed}: replay with "
            f"HYPOTHESIS_PROFILE={profile} pytest --hypothesis-seed={seed} ...")


def run_main(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int | str | None, str, str]:
    """(exit code, stdout, stderr) of main(argv); argparse's own errors arrive as SystemExit."""
    code: int | str | None
    try:
        code = main(argv)
    except SystemExit as exc:
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def one_thread():
    """One torch and one BLAS thread for a test module (as the CLI and the sweep workers use), restored afterwards.

    Use it with ``pytestmark = pytest.mark.usefixtures("one_thread")``: float32 training results depend on
    the thread count, so tests that compare runs bitwise fix it.
    """
    import torch  # heavy: only for the modules that ask for this fixture
    from threadpoolctl import threadpool_limits

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    with threadpool_limits(limits=1):
        yield
    torch.set_num_threads(before)


def random_batch(seed: int, size: int = 12, dim: int = 3):
    """(z [size, dim] on the unit sphere, float64; labels in {0, 1, 2} with the last one 7, a singleton class that
    has no positive under the "theory" convention), drawn from a torch Generator seeded with ``seed``: the batches
    of the sampled-estimator tests."""
    import torch

    gen = torch.Generator().manual_seed(seed)
    z = torch.nn.functional.normalize(torch.randn(size, dim, generator=gen, dtype=torch.float64), dim=1)
    labels = torch.randint(0, 3, (size,), generator=gen)
    labels[-1] = 7
    return z, labels


def tilt_matrix(z, labels, setting: str, beta: float):
    """q_i over all B columns (0 off N(i)), a float64 [B, B] matrix from the docs/theory.md section 7 definition
    ("theory" convention), by a loop over the anchors: the reference the sampled estimators' draws are tested on."""
    import torch

    from ncgeom.vocabulary import effective_beta, is_supervised

    sim = (z @ z.T).double()
    size = len(labels)
    b = effective_beta(setting, beta)
    q = torch.zeros(size, size, dtype=torch.float64)
    for i in range(size):
        neg = [m for m in range(size) if (labels[m] != labels[i] if is_supervised(setting) else m != i)]
        if neg:
            w = torch.exp(b * (sim[i, neg] - sim[i, neg].max()))
            q[i, neg] = w / w.sum()
    return q


def naive_psi(psi_name: str, sim, i: int, j: int, drawn, tau: float, margin: float = 1.0) -> float:
    """psi_k(S_{i m_1} - S_ij, ...) of the docs/theory.md section 2 definition in float64 for the drawn negatives
    m_l, by a Python loop; log1p(e^L) = max(L, 0) + log1p(e^{-|L|}) with L the shifted log-sum-exp."""
    import math

    t = [sim[i][m] - sim[i][j] for m in drawn]
    if psi_name == "triplet":
        return math.fsum(max(0.0, x + margin) for x in t) / len(t)
    top = max(t) / tau
    lse = top + math.log(math.fsum(math.exp(x / tau - top) for x in t))
    if psi_name == "infonce-mean":
        lse -= math.log(len(t))
    return max(lse, 0.0) + math.log1p(math.exp(-abs(lse)))
