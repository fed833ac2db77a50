"""pytest plugin: ``pytest --backend FILE.so`` runs the conformance cases as test items, with
the same engine, workers and isolation as ``backend-conformance run``.

PASS and WARNING pass (a WARNING also emits a pytest warning), NOT_SUPPORTED skips, FAIL, CRASH,
TIMEOUT and ERROR fail; after a blocking case fails the cases behind it are skipped as blocked.
"""
import os
import warnings

import pytest

from conformance import runner
from conformance.report import reproduce_command


class ConformanceWarning(UserWarning):
    """A quality finding that does not break conformance."""


def pytest_addoption(parser):
    group = parser.getgroup("backend-conformance")
    group.addoption("--backend", metavar="FILE.so",
                    help="run the dynamic-backend conformance cases against FILE.so")
    group.addoption("--backend-timeout", type=float, default=runner.DEFAULT_TIMEOUT, metavar="S",
                    help=f"seconds per conformance case (default {runner.DEFAULT_TIMEOUT:g})")


class _Session:
    """The controller shared by every item of a pytest session."""

    def __init__(self, backend_file, timeout):
        self.backend_file = os.path.abspath(backend_file)
        self.controller = runner.Controller(self.backend_file, timeout)
        self.blocked_by = None


class ConformanceItem(pytest.Item):
    def __init__(self, *, case, state, **kwargs):
        super().__init__(**kwargs)
        self.case = case
        self.state = state
        self.add_marker(pytest.mark.conformance)

    def runtest(self):
        state = self.state
        if state.blocked_by is not None:
            pytest.skip(f"blocked: {state.blocked_by.case.id} ended {state.blocked_by.status}")
        result = state.controller.run_one(self.case)
        if self.case.blocking and result.status in runner.BREAKING:
            state.blocked_by = result
        if result.status == "NOT_SUPPORTED":
            pytest.skip(f"not supported: {result.message}")
        if result.status == "WARNING":
            warnings.warn(ConformanceWarning(f"{self.case.requirement}: {result.message}"))
        if result.status in runner.BREAKING:
            raise ConformanceFailure(result, reproduce_command(runner.Run(state.backend_file),
                                                               self.case.id))

    def repr_failure(self, excinfo):
        if isinstance(excinfo.value, ConformanceFailure):
            return str(excinfo.value)
        return super().repr_failure(excinfo)

    def reportinfo(self):
        return self.state.backend_file, None, f"{self.case.id} ({self.case.requirement})"


class ConformanceFailure(Exception):
    def __init__(self, result, command):
        super().__init__(f"{result.status} {result.case.id} ({result.case.requirement}, stage "
                         f"{result.stage}): {result.message}\nreproduce: {command}")


def pytest_configure(config):
    config.addinivalue_line("markers", "conformance: a dynamic-backend conformance case")


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(session, config, items):
    backend_file = config.getoption("backend")
    if not backend_file:
        return
    try:
        runner.check_backend_file(backend_file)
    except runner.BackendFileError as error:
        raise pytest.UsageError(f"--backend {error}") from None
    state = _Session(backend_file, config.getoption("backend_timeout"))
    config._backend_conformance = state
    for case in runner.select_cases(None):
        items.append(ConformanceItem.from_parent(session, name=case.id, case=case, state=state))


def pytest_unconfigure(config):
    state = getattr(config, "_backend_conformance", None)
    if state is not None:
        state.controller.close()
