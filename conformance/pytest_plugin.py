"""pytest plugin: ``pytest --conformance-backend FILE.so`` runs the conformance cases as test
items, with the same engine, workers and isolation as ``backend-conformance run``.

PASS and WARNING pass (a WARNING also emits a pytest warning), NOT_SUPPORTED skips, FAIL, CRASH,
TIMEOUT and ERROR fail; after a blocking case fails the cases behind it are skipped as blocked.

The plugin is registered under the ``pytest11`` entry point ``backend_conformance``, so pytest
loads it in every session of an environment where dynamic-backends is installed. It does nothing
unless ``--conformance-backend`` is given, its options are namespaced so they never collide with
a suite's own, and ``-p no:backend_conformance`` keeps it out of a session altogether.

``--conformance-timeout S``, ``--conformance-quick`` and ``--conformance-seed N`` are the
command line's ``--timeout``, ``--quick`` and ``--seed``.

Every item's node id is ``<backend file name>::<case id>`` (``Acme_Npu_backend.so::entry.load``)
wherever pytest runs from and wherever its rootdir is: pytest shows a node id relative to the
directory it was started in, which for these items (not files under the rootdir) would make
``../Acme_Npu_backend.so``; the plugin shows theirs as they are. Given ``--conformance-backend``
and no test paths on the command line, a session collects the conformance cases only, not the
``testpaths`` of the project it runs in.

``--backend`` and ``--backend-timeout`` are the plugin's former option names. They still work,
with a deprecation warning, but only in sessions where no conftest or other plugin defines an
option of that name: then the suite's own option wins and the plugin stays silent.
"""
import argparse
import os
import warnings

import pytest

from conformance import runner
from conformance.report import reproduce_command

OPTION = "--conformance-backend"
TIMEOUT_OPTION = "--conformance-timeout"
QUICK_OPTION = "--conformance-quick"
SEED_OPTION = "--conformance-seed"
# former name -> (destination, current name)
DEPRECATED_OPTIONS = {"--backend": ("conformance_backend_deprecated", OPTION),
                      "--backend-timeout": ("conformance_timeout_deprecated", TIMEOUT_OPTION)}


class ConformanceWarning(UserWarning):
    """A quality finding that does not break conformance."""


class ConformanceDeprecationWarning(DeprecationWarning):
    """A former option name of the plugin was used."""


def _seconds(text):
    try:
        return runner.parse_seconds(text)
    except ValueError as error:  # pytest reports it as a usage error
        raise argparse.ArgumentTypeError(str(error)) from None


def pytest_addoption(parser):
    group = parser.getgroup("backend-conformance", "dynamic-backend conformance kit")
    group.addoption(OPTION, dest="conformance_backend", metavar="FILE.so",
                    help="run the dynamic-backend conformance cases against FILE.so")
    group.addoption(TIMEOUT_OPTION, dest="conformance_timeout", type=_seconds, default=None,
                    metavar="S", help=f"seconds per conformance case "
                                      f"(default {runner.DEFAULT_TIMEOUT:g})")
    group.addoption(QUICK_OPTION, dest="conformance_quick", action="store_true",
                    help="the quick tier only, as backend-conformance run --quick")
    group.addoption(SEED_OPTION, dest="conformance_seed", type=int, default=None, metavar="N",
                    help="seed of the generated cases' values, as backend-conformance run --seed")


def _defined_option_names(parser):
    # parser.addoption() outside a group lands in the anonymous group, which pytest before 9
    # keeps apart from _groups.
    groups = list(getattr(parser, "_groups", ()))
    anonymous = getattr(parser, "_anonymous", None)
    if anonymous is not None and anonymous not in groups:
        groups.append(anonymous)
    return {name for group in groups for option in group.options for name in option.names()}


@pytest.hookimpl(hookwrapper=True)
def pytest_load_initial_conftests(early_config, parser, args):
    """After the initial conftests have added their options: offer the former names only if
    nothing else took them."""
    yield
    taken = _defined_option_names(parser)
    group = parser.getgroup("backend-conformance")
    for name, (dest, current) in DEPRECATED_OPTIONS.items():
        if name in taken:
            continue
        try:
            group.addoption(name, dest=dest, default=None, help=f"deprecated: use {current}",
                            **({"type": _seconds} if "timeout" in name else {}))
        except ValueError:  # defined after all, under a spelling we did not see
            continue


def _option(config, dest):
    return getattr(config.option, dest, None)


def _backend_and_timeout(config):
    backend = _option(config, "conformance_backend")
    timeout = _option(config, "conformance_timeout")
    for name, (dest, current) in DEPRECATED_OPTIONS.items():
        value = _option(config, dest)
        if value is None:
            continue
        config.issue_config_time_warning(ConformanceDeprecationWarning(
            f"{name} is deprecated: use {current} (the plugin loads in every pytest session, and "
            f"a suite's own {name} would clash with it)"), stacklevel=2)
        if current == OPTION:
            backend = backend or value
        else:
            timeout = timeout or value
    return backend, timeout or runner.DEFAULT_TIMEOUT


class _Session:
    """The controller shared by every item of a pytest session."""

    def __init__(self, backend_file, timeout, quick=False, seed=None):
        self.backend_file = os.path.abspath(backend_file)
        self.controller = runner.Controller(self.backend_file, timeout, seed=seed, quick=quick)
        self.quick = quick
        self.blocked_by = None
        self.cases_only = False  # no test paths were given: nothing else is collected
        # The first part of every node id: the file name, never a path (a "::" in it would
        # end that part early).
        self.suite_name = os.path.basename(self.backend_file).replace("::", ":_")

    def owns(self, nodeid) -> bool:
        """Whether ``nodeid`` (a string, or pytest's NodeId) is the suite's or one of its
        items'."""
        text = str(nodeid)
        return text == self.suite_name or text.startswith(self.suite_name + "::")


class ConformanceSuite(pytest.Collector):
    """The kit's cases for one backend. Its name, the backend's file name, is the first part of
    every node id (``Acme_Npu_backend.so::layers.conv-valid``) and the JUnit classname."""

    def __init__(self, *, state, **kwargs):
        super().__init__(**kwargs)
        self.state = state

    def collect(self):
        for case in runner.select_cases(None, quick=self.state.quick):
            yield ConformanceItem.from_parent(self, name=case.id, case=case, state=self.state)

    def reportinfo(self):
        return self.path, None, self.name


class ConformanceItem(pytest.Item):
    def __init__(self, *, case, state, **kwargs):
        super().__init__(**kwargs)
        self.case = case
        self.state = state
        self.add_marker(pytest.mark.conformance)

    def runtest(self):
        state = self.state
        if state.blocked_by is not None and state.blocked_by.case.blocks_case(self.case):
            pytest.skip(f"blocked: {state.blocked_by.case.id} ended {state.blocked_by.status}")
        result = state.controller.run_one(self.case)
        if self.case.blocking and result.status in runner.BREAKING:
            state.blocked_by = result
        if result.status == "NOT_SUPPORTED":
            pytest.skip(f"not supported: {result.message}")
        if result.status == "WARNING":
            warnings.warn(ConformanceWarning(f"{self.case.requirement}: {result.message}"))
        if result.status in runner.BREAKING:
            raise ConformanceFailure(result, reproduce_command(
                runner.Run(state.backend_file, seed=state.controller.seed), self.case.id))

    def repr_failure(self, excinfo):
        if isinstance(excinfo.value, ConformanceFailure):
            return str(excinfo.value)
        return super().repr_failure(excinfo)

    def reportinfo(self):
        # The items have no source file; their location is the session's root, never a path
        # climbing out of it.
        return self.path, None, f"{self.case.id} ({self.case.requirement})"


class ConformanceFailure(Exception):
    def __init__(self, result, command):
        super().__init__(f"{result.status} {result.case.id} ({result.case.requirement}, stage "
                         f"{result.stage}): {result.message}\nreproduce: {command}")


def pytest_configure(config):
    config.addinivalue_line("markers", "conformance: a dynamic-backend conformance case")
    backend_file, timeout = _backend_and_timeout(config)
    if not backend_file:
        return
    try:
        runner.check_backend_file(backend_file)
    except runner.BackendFileError as error:
        raise pytest.UsageError(f"{OPTION} {error}") from None
    state = _Session(backend_file, timeout, bool(_option(config, "conformance_quick")),
                     _option(config, "conformance_seed"))
    config._backend_conformance = state
    if not getattr(config.option, "file_or_dir", None):
        # No test paths given: the conformance cases only, not the ini file's testpaths (or
        # the current directory) collected beside them.
        config.args = []
        state.cases_only = True
    _show_node_ids_as_they_are(config, state)


def _show_node_ids_as_they_are(config, state):
    """pytest shows a node id's first part as a path from the directory it was started in to
    the rootdir joined with that part; the suite's first part is the backend's file name, not a
    path, and is shown as it is."""
    relative = config.cwd_relative_nodeid

    def cwd_relative_nodeid(nodeid):
        return nodeid if state.owns(nodeid) else relative(nodeid)
    config.cwd_relative_nodeid = cwd_relative_nodeid


@pytest.hookimpl(trylast=True)
def pytest_sessionstart(session):
    """The progress lines (``Acme_Npu_backend.so ....``) name the file part the same way."""
    state = getattr(session.config, "_backend_conformance", None)
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if state is None or reporter is None or not hasattr(reporter, "write_fspath_result"):
        return
    write = reporter.write_fspath_result

    def write_fspath_result(nodeid, res, **markup):
        if not state.owns(nodeid):
            return write(nodeid, res, **markup)
        started_in = reporter.startpath
        reporter.startpath = session.config.rootpath  # the file part, relative to the rootdir
        try:
            return write(nodeid, res, **markup)
        finally:
            reporter.startpath = started_in
    reporter.write_fspath_result = write_fspath_result


def pytest_report_header(config):
    state = getattr(config, "_backend_conformance", None)
    if state is None:
        return None
    canonical = state.controller.canonical
    shown = state.backend_file + (f" -> {canonical}" if canonical != state.backend_file else "")
    tier = "quick" if state.quick else "full"
    only = "; the conformance cases only (no test paths given)" if state.cases_only else ""
    return f"backend-conformance: {shown} ({tier} tier, seed {state.controller.seed}){only}"


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    """The cases are collected as a child of the session, next to the suite's own tests, so
    pytest counts, selects and deselects them like any other items."""
    outcome = yield
    state = getattr(collector.config, "_backend_conformance", None)
    if state is None or not isinstance(collector, pytest.Session):
        return
    report = outcome.get_result()
    if report.outcome == "passed":
        report.result.append(ConformanceSuite.from_parent(
            collector, name=state.suite_name, nodeid=state.suite_name, state=state))


def pytest_unconfigure(config):
    state = getattr(config, "_backend_conformance", None)
    if state is not None:
        state.controller.close()
