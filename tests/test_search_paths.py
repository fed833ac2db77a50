"""Search paths (docs/loading.md): which directories are scanned, in which order, and why others are not."""
import logging
import os
import pathlib

import pytest

import loader
import reference_backend
from loader import paths as search_paths
from helpers import install_mock, slow

VAR = loader.ENVIRONMENT_VARIABLE
ADD = "DYNAMIC_BACKEND_ADD_PATHS"


@pytest.fixture
def dirs(tmp_path):
    """Three directories A, B, C and a regular file F."""
    made = {}
    for name in "ABC":
        made[name] = tmp_path / name
        made[name].mkdir()
    made["F"] = tmp_path / "file"
    made["F"].write_text("not a directory")
    return {k: str(v) for k, v in made.items()}


def reasons(override=None):
    return [(p.path, p.reason) for p in search_paths.resolve_search_paths(override)]


# -- the environment list ----------------------------------------------------------------------

@pytest.mark.parametrize("template, expected", [
    ("{A}", ["{A}"]),
    ("{A}:{B}", ["{A}", "{B}"]),
    ("{B}:{A}", ["{B}", "{A}"]),                     # order is kept
    ("{A}:{B}:{C}", ["{A}", "{B}", "{C}"]),
    ("{A}::{B}", ["{A}", "{B}"]),                   # empty entries are dropped
    (":{A}:", ["{A}"]),
    ("::::", []),
    ("{A}:{A}", ["{A}"]),                           # scanned once
    ("{A}:{A}/:{A}/.", ["{A}"]),                    # same canonical directory
    ("{A}:/does/not/exist:{B}", ["{A}", "{B}"]),    # invalid paths are dropped, others kept
    ("{F}:{A}", ["{A}"]),                           # a file is not a directory
    ("relative/dir:{A}", ["{A}"]),
])
def test_environment_list(monkeypatch, dirs, template, expected):
    monkeypatch.setenv(VAR, template.format(**dirs))
    assert loader.get_backend_paths() == [e.format(**dirs) for e in expected]


def test_environment_set_but_empty_disables_dynamic_loading(monkeypatch):
    monkeypatch.setenv(VAR, "")
    assert loader.get_backend_paths() == []
    with loader.Runtime() as runtime:
        assert runtime.backend_ids == []
        assert runtime.report["search_paths"] == []


@pytest.mark.parametrize("make, reason", [
    (lambda d: "/does/not/exist", "not-found"),
    (lambda d: d["F"], "not-a-directory"),
    (lambda d: d["F"] + "/below-a-file", "not-found"),
    (lambda d: d["A"] + "\x00nul", "not-found"),
])
def test_each_invalid_path_carries_its_reason(monkeypatch, dirs, make, reason):
    path = make(dirs)
    if "\x00" in path:
        # The environment cannot hold a NUL; the override can.
        assert reasons(path) == [(path, reason)]
    else:
        monkeypatch.setenv(VAR, f"{path}:{dirs['A']}")
        assert reasons() == [(path, reason), (dirs["A"], None)]


@pytest.mark.parametrize("exists", [True, False])
@pytest.mark.parametrize("variable", [VAR, ADD])
def test_a_relative_path_is_not_absolute_in_either_variable_whether_or_not_it_exists(
        monkeypatch, tmp_path, variable, exists):
    if exists:
        (tmp_path / "rel" / "dir").mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(variable, "rel/dir")
    monkeypatch.setenv(VAR if variable == ADD else ADD, "")
    assert reasons() == [("rel/dir", "not-absolute")]


def test_a_link_to_a_listed_directory_is_a_duplicate(monkeypatch, dirs, tmp_path):
    os.symlink(dirs["A"], tmp_path / "link")
    monkeypatch.setenv(VAR, f"{dirs['A']}:{tmp_path / 'link'}")
    assert reasons() == [(dirs["A"], None), (str(tmp_path / "link"), "duplicate-path")]


def test_each_dropped_path_is_logged_with_its_reason(monkeypatch, caplog, dirs):
    monkeypatch.setenv(VAR, f"/does/not/exist:{dirs['F']}")
    with caplog.at_level(logging.WARNING, logger="loader"):
        loader.get_backend_paths()
    messages = [r.getMessage() for r in caplog.records]
    assert any("/does/not/exist" in m and "not-found" in m for m in messages)
    assert any(dirs["F"] in m and "not-a-directory" in m for m in messages)


# -- the override -------------------------------------------------------------------------------

def test_the_override_is_one_path_never_split(tmp_path):
    colon = tmp_path / "with:colon"
    colon.mkdir()
    assert loader.get_backend_paths(str(colon)) == [str(colon)]
    assert reasons(f"{tmp_path}:{tmp_path}") == [(f"{tmp_path}:{tmp_path}", "not-found")]


@pytest.mark.parametrize("bad", ["", "/does/not/exist", "relative"])
def test_an_invalid_override_loads_nothing_and_does_not_fall_back(monkeypatch, dirs, bad):
    install_mock("alpha", dirs["A"])
    monkeypatch.setenv(VAR, dirs["A"])
    assert loader.get_backend_paths(bad) == []
    with loader.Runtime(dynamic_backends_path=bad) as runtime:
        assert runtime.backend_ids == []
        [path] = runtime.report["search_paths"]
        assert path["path"] == bad and path["valid"] is False
        assert path["reason"] in ("empty", "not-found", "not-absolute")


def test_an_empty_override_is_reported_as_empty():
    assert reasons("") == [("", "empty")]


def test_the_override_accepts_path_like_objects(dirs):
    assert loader.get_backend_paths(pathlib.Path(dirs["A"])) == [dirs["A"]]


@pytest.mark.parametrize("bad", [1, 2.5, ["/tmp"], object()])
def test_an_override_of_the_wrong_type_is_a_type_error(bad):
    with pytest.raises(loader.InvalidSearchPathError) as raised:
        loader.Runtime(dynamic_backends_path=bad)
    assert isinstance(raised.value, TypeError) and isinstance(raised.value, loader.BackendError)


# -- precedence ---------------------------------------------------------------------------------

def test_compiled_in_list_defaults_to_the_reference_backend_directory():
    assert loader.get_backend_paths() == [reference_backend.LIBRARY_DIR]
    with loader.Runtime() as runtime:
        assert reference_backend.BACKEND_ID in runtime.backend_ids


def test_environment_replaces_the_compiled_in_list(monkeypatch, dirs):
    install_mock("alpha", dirs["A"])
    monkeypatch.setenv(VAR, dirs["A"])
    with loader.Runtime() as runtime:
        assert runtime.backend_ids == ["MockAlpha"]


def test_override_replaces_environment_and_compiled_in_list(monkeypatch, dirs):
    install_mock("alpha", dirs["A"])
    install_mock("beta", dirs["B"])
    monkeypatch.setenv(VAR, dirs["A"])
    with loader.Runtime(dynamic_backends_path=dirs["B"]) as runtime:
        assert runtime.backend_ids == ["MockBeta"]
    assert loader.get_backend_paths(dirs["B"]) == [dirs["B"]]


def test_secure_execution_ignores_the_environment(monkeypatch, caplog, dirs):
    install_mock("alpha", dirs["A"])
    monkeypatch.setenv(VAR, dirs["A"])
    monkeypatch.setattr(search_paths, "_force_secure_execution", True)
    with caplog.at_level(logging.WARNING, logger="loader"):
        with loader.Runtime() as runtime:
            assert "MockAlpha" not in runtime.backend_ids
            assert reference_backend.BACKEND_ID in runtime.backend_ids
            ignored = runtime.report["search_paths"][0]
    assert ignored == {"path": dirs["A"], "valid": False, "reason": "ignored-secure-execution",
                       "detail": ignored["detail"], "source": "environment"}
    assert any("ignored-secure-execution" in r.getMessage() for r in caplog.records)


def test_this_test_process_is_not_in_secure_execution():
    assert loader._core.is_secure_execution() is False


def _source_tree():
    repo = pathlib.Path(__file__).resolve().parents[1]
    if not (repo / "setup.py").exists():
        pytest.skip("the source tree is not beside the tests")
    return repo


@pytest.mark.parametrize("paths", ["/opt/vendor-a:/opt/vendor-b", None])
def test_build_time_paths_become_the_compiled_in_list(tmp_path, paths):
    """DYNAMIC_BACKEND_PATHS seen by the build is what an installed runtime falls back to (None:
    the reference backend's directory), and the build says so on stderr, where a verbose build
    log (pip -v) shows it. The Python part of a build, without compiling anything."""
    import subprocess
    import sys
    repo = _source_tree()
    env = {k: v for k, v in os.environ.items() if k != VAR}
    if paths is not None:
        env[VAR] = paths
    built = subprocess.run([sys.executable, "setup.py", "-q", "build_py", "--build-lib",
                            str(tmp_path)], cwd=repo, env=env, capture_output=True, text=True,
                           timeout=300)
    assert built.returncode == 0, built.stderr[-2000:]
    announced = "at build time becomes the compiled-in search path list" in built.stderr
    assert announced == (paths is not None)
    if paths is not None:
        assert f"DYNAMIC_BACKEND_PATHS={paths!r}" in built.stderr
    namespace = {}
    exec((tmp_path / "loader" / "_build_config.py").read_text(), namespace)
    assert namespace["COMPILED_IN_PATHS"] == paths
    assert (tmp_path / "loader" / "include" / "backend_api.h").read_bytes() == \
        (repo / "abi" / "backend_api.h").read_bytes()


@slow
def test_a_wheel_carries_the_build_time_paths_and_what_an_install_needs(tmp_path):
    """The whole build through pip: the announcement in pip -v's log, the compiled-in list in
    the wheel, and the compiled parts a fresh install needs."""
    import subprocess
    import sys
    import zipfile
    repo = _source_tree()
    env = {**os.environ, VAR: "/opt/vendor-a:/opt/vendor-b"}
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-v", "-w",
                            str(tmp_path), str(repo)], env=env, capture_output=True, text=True,
                           timeout=600)
    if built.returncode != 0 and "No matching distribution" in built.stderr:
        pytest.skip("the build requirements cannot be fetched here")
    assert built.returncode == 0, built.stderr[-2000:]
    log = built.stdout + built.stderr
    assert "DYNAMIC_BACKEND_PATHS='/opt/vendor-a:/opt/vendor-b' at build time becomes the " \
           "compiled-in search path list" in log
    [wheel] = tmp_path.glob("*.whl")
    with zipfile.ZipFile(wheel) as archive:
        config = archive.read("loader/_build_config.py").decode()
        names = archive.namelist()
    namespace = {}
    exec(config, namespace)
    assert namespace["COMPILED_IN_PATHS"] == "/opt/vendor-a:/opt/vendor-b"
    # and the wheel carries what a fresh install needs
    assert "reference_backend/backends/Reference_CpuRef_backend.so" in names
    assert "loader/include/backend_api.h" in names
    assert "loader/dynamic-backend-probe" in names


# -- where each path came from ----------------------------------------------------------------------



def sources(override=None):
    return [(p.path, p.source) for p in search_paths.resolve_search_paths(override)]


def test_each_path_records_its_source(monkeypatch, dirs):
    assert sources() == [(reference_backend.LIBRARY_DIR, "compiled-in")]
    assert sources(dirs["A"]) == [(dirs["A"], "override")]
    monkeypatch.setenv(VAR, dirs["B"])
    monkeypatch.setenv(ADD, dirs["A"])
    assert sources() == [(dirs["A"], "environment-add"), (dirs["B"], "environment")]
    with loader.Runtime() as runtime:
        assert [(p["path"], p["source"]) for p in runtime.report["search_paths"]] == \
            [(dirs["A"], "environment-add"), (dirs["B"], "environment")]


# -- the additive variable ---------------------------------------------------------------------------

def test_added_paths_are_scanned_first_and_keep_the_compiled_in_list(monkeypatch, dirs):
    install_mock("alpha", dirs["A"])
    install_mock("beta", dirs["B"])
    monkeypatch.setenv(ADD, f"{dirs['A']}:{dirs['B']}")
    assert loader.get_backend_paths() == [dirs["A"], dirs["B"], reference_backend.LIBRARY_DIR]
    with loader.Runtime() as runtime:
        assert runtime.backend_ids == ["MockAlpha", "MockBeta", reference_backend.BACKEND_ID]


def test_added_paths_come_before_the_environment_list(monkeypatch, dirs):
    monkeypatch.setenv(VAR, f"{dirs['B']}:{dirs['C']}")
    monkeypatch.setenv(ADD, dirs["A"])
    assert loader.get_backend_paths() == [dirs["A"], dirs["B"], dirs["C"]]


def test_added_paths_are_validated_like_the_others(monkeypatch, dirs, caplog):
    monkeypatch.setenv(ADD, f"relative:/does/not/exist::{dirs['F']}:{dirs['A']}:{dirs['A']}")
    monkeypatch.setenv(VAR, dirs["A"])
    with caplog.at_level(logging.WARNING, logger="loader"):
        assert reasons() == [("relative", "not-absolute"), ("/does/not/exist", "not-found"),
                             (dirs["F"], "not-a-directory"), (dirs["A"], None),
                             (dirs["A"], "duplicate-path"), (dirs["A"], "duplicate-path")]
    assert any("/does/not/exist" in r.getMessage() and "environment-add" in r.getMessage()
               for r in caplog.records)


def test_the_override_replaces_the_added_paths_too(monkeypatch, dirs):
    monkeypatch.setenv(ADD, dirs["A"])
    assert loader.get_backend_paths(dirs["B"]) == [dirs["B"]]


def test_an_empty_environment_list_still_scans_the_added_paths(monkeypatch, dirs):
    monkeypatch.setenv(VAR, "")
    monkeypatch.setenv(ADD, dirs["A"])
    assert loader.get_backend_paths() == [dirs["A"]]


def test_secure_execution_ignores_the_added_paths(monkeypatch, dirs):
    install_mock("alpha", dirs["A"])
    monkeypatch.setenv(ADD, dirs["A"])
    monkeypatch.setattr(search_paths, "_force_secure_execution", True)
    with loader.Runtime() as runtime:
        assert runtime.backend_ids == [reference_backend.BACKEND_ID]
        ignored, kept = runtime.report["search_paths"]
    assert (ignored["path"], ignored["reason"], ignored["source"]) == \
        (dirs["A"], "ignored-secure-execution", "environment-add")
    assert "DYNAMIC_BACKEND_ADD_PATHS" in ignored["detail"]
    assert kept["source"] == "compiled-in"


# -- a compiled-in list without the bundled backend -------------------------------------------------

def test_a_build_time_list_without_the_bundled_directory_is_pointed_out(monkeypatch, dirs):
    monkeypatch.setattr(search_paths, "build_time_paths", lambda: dirs["A"])
    with loader.Runtime() as runtime:
        assert runtime.search_paths == [dirs["A"]]
        [note] = runtime.report["notes"]
    assert "at build time" in note and reference_backend.LIBRARY_DIR in note
    # not when the environment replaced the compiled-in list, nor when the list holds the directory
    monkeypatch.setenv(VAR, dirs["B"])
    with loader.Runtime() as runtime:
        assert runtime.report["notes"] == []
    monkeypatch.delenv(VAR)
    monkeypatch.setattr(search_paths, "build_time_paths",
                        lambda: f"{dirs['A']}:{reference_backend.LIBRARY_DIR}")
    with loader.Runtime() as runtime:
        assert runtime.report["notes"] == []


def test_scan_prints_the_note(dirs):
    import subprocess
    import sys
    code = ("import sys; from loader import cli, paths; "
            f"paths.build_time_paths = lambda: {dirs['A']!r}; sys.exit(cli.main(['scan']))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0, result.stderr
    assert "Note: the compiled-in search path list" in result.stdout
    assert "CpuRef is not found" in result.stdout


def test_an_override_no_file_name_can_spell_is_reported_not_raised():
    import base64
    import json
    with loader.Runtime(dynamic_backends_path="/tmp/\ud800x") as runtime:
        [path] = runtime.report["search_paths"]
    json.dumps(path, ensure_ascii=False).encode("utf-8")
    assert path["reason"] == "not-found" and path["path"] == "/tmp/\\xed\\xa0\\x80x"
    assert base64.b64decode(path["path_base64"]) == "/tmp/\ud800x".encode("utf-8", "surrogatepass")
