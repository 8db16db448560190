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
