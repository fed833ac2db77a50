"""Shared fixtures. The suite runs against the installed package, never the source tree: the
fixtures build every directory they scan in a temporary directory at test time."""
import os
import sys

import pytest

# Importing from the checkout would find loader/ without its compiled core.
_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _REPO]

import loader  # noqa: E402

if os.path.dirname(os.path.dirname(os.path.abspath(loader.__file__))) == _REPO:
    raise RuntimeError("tests must run against the installed package: pip install '.[test]'")


@pytest.fixture(autouse=True)
def _no_environment_paths(monkeypatch):
    """Each test starts without DYNAMIC_BACKEND_PATHS; tests that need it set it."""
    monkeypatch.delenv(loader.ENVIRONMENT_VARIABLE, raising=False)


@pytest.fixture
def backend_dir(tmp_path):
    """An empty directory to put backends in."""
    path = tmp_path / "backends"
    path.mkdir()
    return path
