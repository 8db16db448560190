"""The hypothesis profiles of tests/conftest.py: ``ci`` is reproducible, ``explore`` really explores."""

import os

from hypothesis import Phase, settings


def test_ci_and_explore_profiles_differ():
    ci, explore = settings.get_profile("ci"), settings.get_profile("explore")
    assert ci.derandomize is True and ci.database is None
    assert explore.derandomize is False
    assert explore.max_examples >= 10 * ci.max_examples
    assert Phase.explain in explore.phases and explore.print_blob is True


def test_the_profile_in_use_is_the_selected_one(pytestconfig):
    # ci unless HYPOTHESIS_PROFILE (or hypothesis' --hypothesis-profile option) names another
    expected = pytestconfig.getoption("hypothesis_profile") or os.environ.get("HYPOTHESIS_PROFILE", "ci")
    assert settings.get_current_profile_name() == expected
