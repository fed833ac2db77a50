"""Shared fixtures. The fixtures build every directory they scan in a temporary directory at
test time.

Which copy of the package runs: the checkout itself when it has been built in place (an editable
install, ``pip install -e '.[test]'``, the contributor loop), so edits are what is tested;
otherwise the installed package, and the report header says so.
"""
import glob
import os
import sys

import pytest

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_CHECKOUT_BUILT = bool(glob.glob(os.path.join(_REPO, "loader", "_core.*.so")))

if not _CHECKOUT_BUILT:
    # An unbuilt checkout on sys.path would shadow the installed package with a loader/ that has
    # no compiled core: test the installed copy instead.
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _REPO]

import loader  # noqa: E402

_TESTED = os.path.dirname(os.path.dirname(os.path.abspath(loader.__file__)))


def pytest_report_header(config):
    if _TESTED == _REPO:
        return f"dynamic-backends: testing the checkout at {_REPO} (built in place)"
    return (f"dynamic-backends: testing the INSTALLED package at {_TESTED}, not the checkout: "
            f"edits to {_REPO} are not tested until `pip install -e '.[test]'`")


@pytest.fixture(autouse=True)
def _no_environment_paths(monkeypatch):
    """Each test starts without the loader's environment variables; tests that need one set it."""
    for name in list(os.environ):
        if name.startswith("DYNAMIC_BACKEND_"):
            monkeypatch.delenv(name)


@pytest.fixture
def backend_dir(tmp_path):
    """An empty directory to put backends in."""
    path = tmp_path / "backends"
    path.mkdir()
    return path
