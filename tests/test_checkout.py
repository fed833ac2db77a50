"""Working from a source checkout: an unbuilt checkout says why it cannot be imported and what
to do; a checkout built in place (``pip install -e .``) is what runs and what the tests test."""
import glob
import os
import shutil
import subprocess
import sys

import pytest

import loader
import mock_backends
import reference_backend

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TESTED = os.path.dirname(os.path.abspath(loader.__file__))     # the loader/ under test
CHECKOUT_BUILT = bool(glob.glob(os.path.join(REPO, "loader", "_core.*.so")))
SOURCE_PATTERNS = ("*.py", "*.pyx", "*.pxi", "*.pxd", "*.pyi", "*.yaml")


def _copy_sources(package, target):
    """``package``'s source files (no compiled parts) into ``target/package``."""
    source = os.path.join(REPO, package)
    if not os.path.isfile(os.path.join(source, "__init__.py")):
        pytest.skip(f"the source tree of {package}/ is not beside the tests")
    os.makedirs(os.path.join(target, package))
    for pattern in SOURCE_PATTERNS:
        for path in glob.glob(os.path.join(source, pattern)):
            shutil.copy(path, os.path.join(target, package))


@pytest.fixture
def unbuilt_checkout(tmp_path):
    """A source tree without the compiled core, as a fresh clone is."""
    if not os.path.isfile(os.path.join(REPO, "loader", "_core.pyx")):
        pytest.skip("the loader's Cython sources are not beside the tests")
    _copy_sources("loader", str(tmp_path))
    _copy_sources("conformance", str(tmp_path))
    assert not [p for p in os.listdir(tmp_path / "loader") if p.startswith("_core.")
                and p.endswith(".so")]
    return tmp_path


def _python(cwd, *args, site=True):
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    command = [sys.executable] + ([] if site else ["-S"]) + list(args)
    return subprocess.run(command, cwd=str(cwd), env=env, capture_output=True, text=True,
                          timeout=120)


def _assert_explains(stderr, checkout, installed):
    assert "No module named 'loader._core'" not in stderr
    assert f"source checkout {checkout}/loader" in stderr
    assert "not built for this Python" in stderr
    if installed:
        assert f"An installed copy is at {installed}" in stderr
        assert "cd elsewhere" in stderr
    else:
        assert "No installed copy was found" in stderr
    assert f"`pip install -e .` in {checkout}" in stderr


def test_importing_an_unbuilt_checkout_names_it_and_the_installed_copy(unbuilt_checkout):
    result = _python(unbuilt_checkout, "-c", "import loader")
    assert result.returncode == 1
    assert "ImportError: cannot import loader from the source checkout" in result.stderr
    _assert_explains(result.stderr, unbuilt_checkout, installed=TESTED)


def test_importing_an_unbuilt_checkout_with_nothing_installed_says_how_to_build(unbuilt_checkout):
    # -S: no site-packages, so the checkout is the only copy on sys.path.
    result = _python(unbuilt_checkout, "-c", "import loader", site=False)
    assert result.returncode == 1
    _assert_explains(result.stderr, unbuilt_checkout, installed=None)


def test_python_m_loader_in_an_unbuilt_checkout_explains(unbuilt_checkout):
    result = _python(unbuilt_checkout, "-m", "loader", "scan")
    assert result.returncode == 1 and result.stdout == ""
    _assert_explains(result.stderr, unbuilt_checkout, installed=TESTED)


def test_python_m_conformance_in_an_unbuilt_checkout_explains_without_a_traceback(
        unbuilt_checkout):
    result = _python(unbuilt_checkout, "-m", "conformance", "list")
    assert result.returncode == 1 and result.stdout == ""
    assert "Traceback" not in result.stderr
    assert result.stderr.startswith("python -m conformance: cannot import loader")
    _assert_explains(result.stderr, unbuilt_checkout, installed=TESTED)


def test_a_checkout_built_in_place_imports_from_its_own_root():
    if not CHECKOUT_BUILT:
        pytest.skip("the checkout is not built in place")
    result = _python(REPO, "-c", "import loader; print(loader.__file__)")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == os.path.join(REPO, "loader", "__init__.py")


# -- which copy the tests test ------------------------------------------------------------------

def test_the_tests_test_the_checkout_when_it_is_built_in_place():
    if CHECKOUT_BUILT:
        assert TESTED == os.path.join(REPO, "loader")
        for path in (reference_backend.LIBRARY_PATH, mock_backends.LIBRARY_DIR,
                     os.path.join(loader.get_include(), "backend_api.h")):
            assert path.startswith(REPO + os.sep) and os.path.exists(path), path
    else:
        # The unbuilt checkout cannot run: the installed package is what the tests test.
        assert not TESTED.startswith(REPO + os.sep)


def test_python_started_elsewhere_runs_the_copy_under_test():
    """An editable install maps the packages to the checkout wherever Python starts; a plain
    install is what the tests test when the checkout is not built."""
    result = _python("/", "-c", "import loader, reference_backend, mock_backends; "
                                "print(loader.__file__); print(reference_backend.LIBRARY_PATH); "
                                "print(mock_backends.LIBRARY_DIR)")
    assert result.returncode == 0, result.stderr
    assert result.stdout.split("\n")[:3] == [os.path.abspath(loader.__file__),
                                             reference_backend.LIBRARY_PATH,
                                             mock_backends.LIBRARY_DIR]
    assert os.path.isfile(reference_backend.LIBRARY_PATH)


def test_the_pytest_header_names_the_copy_under_test(tmp_path):
    # Started outside the checkout, as the pytest command is (python -m pytest in the checkout
    # would put an unbuilt checkout first on sys.path).
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-p", "no:cacheprovider",
         "--rootdir", REPO, "-c", os.path.join(REPO, "pyproject.toml"),
         os.path.join(REPO, "tests", "test_abi.py")],
        cwd=str(tmp_path), capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    header = "the checkout at" if CHECKOUT_BUILT else "the INSTALLED package at"
    assert f"dynamic-backends: testing {header} {os.path.dirname(TESTED)}" in result.stdout
