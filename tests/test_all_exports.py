"""Every module of ncgeom and proofs_check declares __all__, and each entry exists exactly once.

Modules are discovered with pkgutil at test time, so new modules are covered automatically (style.md:
"__all__ listing names that do not exist" is an anti-pattern).
"""

import importlib
import pkgutil

import pytest

import ncgeom
import proofs_check


def _modules():
    names = []
    for pkg in (ncgeom, proofs_check):
        names.append(pkg.__name__)
        names += [m.name for m in pkgutil.walk_packages(pkg.__path__, prefix=pkg.__name__ + ".")]
    return sorted(set(names))


MODULES = _modules()


def test_discovery_finds_known_modules():
    for name in ("ncgeom.geometry", "ncgeom.theory.closed_forms", "ncgeom.population.loss", "proofs_check.records"):
        assert name in MODULES


@pytest.mark.parametrize("name", MODULES)
def test_module_all(name):
    module = importlib.import_module(name)
    exported = getattr(module, "__all__", None)
    assert exported is not None, f"{name} does not declare __all__"
    assert all(isinstance(e, str) for e in exported), f"{name}.__all__ holds a non-string"
    duplicates = sorted({e for e in exported if list(exported).count(e) > 1})
    assert not duplicates, f"{name}.__all__ lists {duplicates} more than once"
    missing = [e for e in exported if not hasattr(module, e)]
    assert not missing, f"{name}.__all__ lists names that do not exist: {missing}"
