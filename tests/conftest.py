"""Shared pytest configuration: hypothesis profiles (numpy's conftest.py style).

- ``ci`` (default under CI=true): derandomized, modest example counts, no deadline;
- ``deterministic``: derandomized, for reproducing a failure;
- ``dev``: random, more examples. Select with HYPOTHESIS_PROFILE=<name>.
"""

import os

from hypothesis import HealthCheck, settings

settings.register_profile("ci", derandomize=True, max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow], print_blob=True)
settings.register_profile("deterministic", derandomize=True, max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow], print_blob=True)
settings.register_profile("dev", max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "deterministic"))
