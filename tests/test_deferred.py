"""Deferred loading: backends registered from the per-user backend cache without dlopen, loaded and
fully checked at first use; the cache's trust rules; ``Runtime(backends=[...])``."""
import errno
import gc
import logging
import os
import struct
import threading

import numpy as np
import pytest

import loader
from loader import cache as backend_cache
from loader import paths as search_paths
from helpers import entry_for, install, install_mock, install_reference, mapped


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    """A private XDG cache home; returns the directory the backend cache lives in."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    return tmp_path / "xdg" / "dynamic-backends"


def cache_file(cache_dir):
    return cache_dir / backend_cache.FILE_NAME


def records(cache_dir):
    """What the cache file holds: canonical path -> (identity, backend id, version)."""
    c = backend_cache.BackendCache(str(cache_dir))
    c.read()
    return {path: (identity, backend_id, version)
            for path, identity, backend_id, version in c.entries()}


def deferred(directory, **kwargs):
    return loader.Runtime(dynamic_backends_path=str(directory), load="deferred", **kwargs)


def unmapped(path):
    gc.collect()
    return not mapped(path)


def test_a_cached_backend_registers_without_loading_and_loads_at_first_use(backend_dir, cache_dir):
    path = install_reference(backend_dir)
    with deferred(backend_dir) as runtime:  # not cached yet: loaded now, and recorded
        assert runtime.backend_ids == ["CpuRef"]
        assert entry_for(runtime.report, path)["deferred"] is False
    assert unmapped(path)
    _, backend_id, version = records(cache_dir)[path]
    assert (backend_id, version) == ("CpuRef", tuple(loader.BACKEND_API_VERSION))

    with deferred(backend_dir) as runtime:
        entry = entry_for(runtime.report, path)
        assert (entry["status"], entry["deferred"], entry["backend_id"]) == \
            ("registered", True, "CpuRef")
        assert runtime.backend_ids == ["CpuRef"] and "CpuRef" in runtime
        assert not mapped(path), "a deferred backend was loaded before it was needed"
        backend = runtime.create_backend("CpuRef")
        assert mapped(path)
        [y] = backend.execute("Activation", [np.array([-1, 2], np.float32)], {"function": "relu"})
        np.testing.assert_array_equal(y, [0, 2])
        assert runtime.create_backend("CpuRef").id == "CpuRef"
    del backend
    assert unmapped(path)


def test_eager_loading_neither_reads_nor_writes_the_cache(backend_dir, cache_dir):
    install_reference(backend_dir)
    with loader.Runtime(dynamic_backends_path=str(backend_dir)) as runtime:
        assert runtime.report["settings"]["load"] == "eager"
    assert not cache_dir.exists()


def test_the_environment_turns_on_deferred_loading(backend_dir, cache_dir, monkeypatch, caplog):
    path = install_reference(backend_dir)
    monkeypatch.setenv("DYNAMIC_BACKEND_LOAD", "deferred")
    for _ in range(2):
        with loader.Runtime(dynamic_backends_path=str(backend_dir)) as runtime:
            settings = runtime.report["settings"]
            was_deferred = entry_for(runtime.report, path)["deferred"]
    assert was_deferred and settings["load"] == "deferred"
    assert settings["sources"]["load"] == "DYNAMIC_BACKEND_LOAD"
    monkeypatch.setenv("DYNAMIC_BACKEND_LOAD", "lazy")
    with caplog.at_level(logging.WARNING, logger="loader"):
        with loader.Runtime(dynamic_backends_path=str(backend_dir)) as runtime:
            assert runtime.report["settings"]["load"] == "eager"
    assert any("DYNAMIC_BACKEND_LOAD" in r.getMessage() for r in caplog.records)
    with pytest.raises(ValueError, match="load"):
        loader.Runtime(dynamic_backends_path=str(backend_dir), load="lazy")


@pytest.mark.parametrize("change", ["touch", "replace"])
def test_a_changed_file_is_loaded_eagerly_and_recorded_again(backend_dir, cache_dir, change):
    path = install_reference(backend_dir, "Vendor_Thing_backend.so")
    with deferred(backend_dir):
        pass
    if change == "touch":
        st = os.stat(path)
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
        expected = "CpuRef"
    else:
        os.unlink(path)
        install_mock("alpha", backend_dir, "Vendor_Thing_backend.so")
        expected = "MockAlpha"
    with deferred(backend_dir) as runtime:
        entry = entry_for(runtime.report, path)
        assert (entry["deferred"], entry["backend_id"]) == (False, expected)
        assert runtime.backend_ids == [expected]
        assert mapped(path)
    identity, backend_id, _ = records(cache_dir)[path]
    assert backend_id == expected and identity == backend_cache.file_identity(path)
    with deferred(backend_dir) as runtime:
        assert entry_for(runtime.report, path)["deferred"] is True


def forge(cache_dir, path, backend_id):
    """Record ``path`` (as it is now) in the cache as providing ``backend_id``."""
    c = backend_cache.BackendCache(str(cache_dir))
    c.read()
    c.store(path, backend_cache.file_identity(path), backend_id, loader.BackendVersion(1, 2))
    c.write()


@pytest.mark.parametrize("stem, reason", [("factory_returns_null", "factory-failed"),
                                          ("null_id", "invalid-backend-id"),
                                          ("major_too_new", "incompatible-version"),
                                          ("missing_dependency", "missing-dependency")])
def test_a_deferred_backend_failing_its_checks_is_reported_as_eager_loading_would(
        backend_dir, cache_dir, stem, reason):
    """The cache is never trusted: a record claiming a broken file is a backend only defers
    the checks, which then skip it with eager loading's reason and detail."""
    path = install_mock(stem, backend_dir)
    eager = entry_for(loader.Runtime(dynamic_backends_path=str(backend_dir)).report, path)
    forge(cache_dir, path, "Claimed")
    with deferred(backend_dir) as runtime:
        assert runtime.backend_ids == ["Claimed"]
        with pytest.raises(loader.BackendNotFoundError, match=reason):
            runtime.create_backend("Claimed")
        entry = entry_for(runtime.report, path)
        assert (entry["status"], entry["reason"], entry["detail"]) == \
            ("skipped", reason, eager["detail"])
        assert entry["deferred"] is True
        assert runtime.backend_ids == [] and runtime.report["registered"] == []
        with pytest.raises(loader.BackendNotFoundError, match=reason):
            runtime.create_backend("Claimed")
    assert path not in records(cache_dir)


def test_a_record_naming_another_id_than_the_file_reports_is_refused(backend_dir, cache_dir):
    path = install_reference(backend_dir)
    forge(cache_dir, path, "NotCpuRef")
    with deferred(backend_dir) as runtime:
        with pytest.raises(loader.BackendNotFoundError, match="invalid-backend-id.*'CpuRef'"):
            runtime.create_backend("NotCpuRef")
    assert unmapped(path)


@pytest.mark.parametrize("content", [b"", b"{", b"\xff\xfe", b"[]", b'{"format": 1}',
                                     b"x" * 100, b"DBKCACHE", b"DBKCACHE" + b"\0" * 100])
def test_a_corrupt_cache_is_ignored_with_a_warning_and_replaced(backend_dir, cache_dir, caplog,
                                                                content):
    path = install_reference(backend_dir)
    cache_dir.mkdir(parents=True, mode=0o700)
    cache_file(cache_dir).write_bytes(content)
    with caplog.at_level(logging.WARNING, logger="loader"):
        with deferred(backend_dir) as runtime:
            assert entry_for(runtime.report, path)["deferred"] is False
            assert runtime.backend_ids == ["CpuRef"]
    assert any("backend cache" in r.getMessage() and "ignored" in r.getMessage()
               for r in caplog.records)
    assert path in records(cache_dir)


def valid_cache_bytes(backend_dir, cache_dir):
    install_reference(backend_dir)
    with deferred(backend_dir):
        pass
    return cache_file(cache_dir).read_bytes()


def damaged(data, damage):
    """``data`` (a cache of one record) with one thing wrong, as the layout in
    loader/_cache.pxi places it."""
    data = bytearray(data)
    loader_length = struct.unpack_from("<I", data, 16)[0]
    record = 20 + loader_length                 # the record's fixed part
    path_length, id_length = struct.unpack_from("<II", data, record + 48)
    path, backend_id = record + 56, record + 56 + path_length
    if damage == "truncated":
        return bytes(data[:len(data) // 2])
    if damage == "trailing byte":
        return bytes(data) + b"\0"
    if damage == "other format":
        struct.pack_into("<I", data, 8, 1)
    elif damage == "more records than present":
        struct.pack_into("<I", data, 12, 2)
    elif damage == "too many records":
        struct.pack_into("<I", data, 12, 0xFFFFFFFF)
    elif damage == "other loader":
        data[20] ^= 1
    elif damage == "loader length past the end":
        struct.pack_into("<I", data, 16, 0xFFFFFFF0)
    elif damage == "path length past the end":
        struct.pack_into("<I", data, record + 48, 0xFFFFFFFF)
    elif damage == "id too long":
        struct.pack_into("<I", data, record + 52, 257)
    elif damage == "relative path":
        data[path] = ord("x")
    elif damage == "NUL in the path":
        data[path + 1] = 0
    elif damage == "bad id":
        data[backend_id] = ord(" ")
    elif damage == "empty id":
        struct.pack_into("<I", data, record + 52, 0)
        del data[backend_id:]
    return bytes(data)


@pytest.mark.parametrize("damage", ["truncated", "trailing byte", "other format",
                                    "more records than present", "too many records",
                                    "other loader", "loader length past the end",
                                    "path length past the end", "id too long", "relative path",
                                    "NUL in the path", "bad id", "empty id"])
def test_a_malformed_cache_is_ignored_with_a_warning(backend_dir, cache_dir, caplog, damage):
    data = valid_cache_bytes(backend_dir, cache_dir)
    [path] = records(cache_dir)
    cache_file(cache_dir).write_bytes(damaged(data, damage))
    assert records(cache_dir) == {}
    with caplog.at_level(logging.WARNING, logger="loader"):
        with deferred(backend_dir) as runtime:
            assert entry_for(runtime.report, path)["deferred"] is False
    assert any("backend cache" in r.getMessage() and "ignored" in r.getMessage()
               for r in caplog.records), caplog.text
    assert path in records(cache_dir), "the damaged cache was not replaced"


def test_a_cache_round_trips_every_record(backend_dir, cache_dir, tmp_path):
    c = backend_cache.BackendCache(str(cache_dir))
    extremes = [("/a", (0, 0, 0, -(1 << 63), (1 << 63) - 1), "A", (1, 0)),
                ("/b/" + "é" * 100, ((1 << 64) - 1, (1 << 64) - 1, (1 << 64) - 1, 0, 0),
                 "B" * 256, (1, 2))]
    for path, identity, backend_id, version in extremes:
        c.store(path, identity, backend_id, loader.BackendVersion(*version))
    c.write()
    assert records(cache_dir) == {path: (identity, backend_id, version)
                                  for path, identity, backend_id, version in extremes}
    again = backend_cache.BackendCache(str(cache_dir))
    again.read()
    assert again.lookup("/a", extremes[0][1]) == ("A", (1, 0))
    assert again.lookup("/a", (0, 0, 0, -(1 << 63), 0)) is None      # another identity
    assert again.lookup("/b", extremes[0][1]) is None                # another path


def test_records_of_versions_this_runtime_cannot_load_are_dropped(cache_dir):
    c = backend_cache.BackendCache(str(cache_dir))
    c.store("/old", (1, 1, 1, 1, 1), "Old", loader.BackendVersion(1, 0))
    c.store("/new", (2, 2, 2, 2, 2), "New", loader.BackendVersion(1, 99))
    c.store("/next", (3, 3, 3, 3, 3), "Next", loader.BackendVersion(2, 0))
    c.write()
    assert set(records(cache_dir)) == {"/old"}


@pytest.mark.parametrize("where", ["file", "directory"])
def test_a_cache_others_can_write_is_refused(backend_dir, cache_dir, caplog, where):
    valid_cache_bytes(backend_dir, cache_dir)
    target = cache_file(cache_dir) if where == "file" else cache_dir
    os.chmod(target, 0o666 if where == "file" else 0o777)
    with caplog.at_level(logging.WARNING, logger="loader"):
        with deferred(backend_dir) as runtime:
            assert runtime.report["entries"][0]["deferred"] is False
    assert any("writable by others" in r.getMessage() for r in caplog.records)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give the cache to another user")
@pytest.mark.parametrize("where", ["file", "directory"])
def test_a_cache_owned_by_another_user_is_refused(backend_dir, cache_dir, caplog, where):
    valid_cache_bytes(backend_dir, cache_dir)
    os.chown(cache_file(cache_dir) if where == "file" else cache_dir, 12345, 12345)
    with caplog.at_level(logging.WARNING, logger="loader"):
        with deferred(backend_dir) as runtime:
            assert runtime.report["entries"][0]["deferred"] is False
    assert any("owned by uid 12345" in r.getMessage() for r in caplog.records)


def test_a_symlinked_cache_is_refused(backend_dir, cache_dir, tmp_path, caplog):
    data = valid_cache_bytes(backend_dir, cache_dir)
    elsewhere = tmp_path / "elsewhere.cache"
    elsewhere.write_bytes(data)
    cache_file(cache_dir).unlink()
    cache_file(cache_dir).symlink_to(elsewhere)
    with caplog.at_level(logging.WARNING, logger="loader"):
        with deferred(backend_dir) as runtime:
            assert runtime.report["entries"][0]["deferred"] is False
    assert any("backend cache" in r.getMessage() for r in caplog.records)


def warnings_about_the_cache(caplog):
    return [r.getMessage() for r in caplog.records
            if r.levelno >= logging.WARNING and r.getMessage().startswith("backend cache")]


@pytest.mark.parametrize("missing", ["directory", "file"])
def test_a_missing_cache_is_an_empty_cache_without_a_warning(backend_dir, cache_dir, caplog,
                                                              missing):
    path = install_reference(backend_dir)
    if missing == "file":
        cache_dir.mkdir(parents=True, mode=0o700)
    with caplog.at_level(logging.WARNING, logger="loader"):
        with deferred(backend_dir) as runtime:
            assert entry_for(runtime.report, path)["deferred"] is False
    assert warnings_about_the_cache(caplog) == []
    assert path in records(cache_dir)


def test_a_cache_replaced_by_a_fifo_is_ignored_without_waiting_for_a_writer(backend_dir, cache_dir,
                                                                             caplog):
    valid_cache_bytes(backend_dir, cache_dir)
    [path] = records(cache_dir)
    cache_file(cache_dir).unlink()
    os.mkfifo(cache_file(cache_dir), 0o600)
    found = []
    with caplog.at_level(logging.WARNING, logger="loader"):
        reader = threading.Thread(target=lambda: found.append(records(cache_dir)), daemon=True)
        reader.start()
        reader.join(10)
        if reader.is_alive():               # blocked opening the FIFO: a writer lets it go
            os.close(os.open(cache_file(cache_dir), os.O_WRONLY | os.O_NONBLOCK))
            reader.join()
            pytest.fail("reading the cache waited for a writer on a FIFO")
    assert found == [{}]
    assert warnings_about_the_cache(caplog) == \
        [f"backend cache {cache_file(cache_dir)} ignored: not a regular file"]
    with deferred(backend_dir):             # replaced by a regular file at the next write
        pass
    assert path in records(cache_dir)


@pytest.mark.parametrize("what", ["symbolic link to a directory", "regular file"])
def test_a_cache_directory_that_is_not_a_directory_is_neither_read_nor_written(
        backend_dir, cache_dir, tmp_path, caplog, what):
    valid_cache_bytes(backend_dir, cache_dir)
    real = tmp_path / "real"
    cache_dir.rename(real)
    if what == "regular file":
        cache_dir.write_bytes(b"")
    else:
        cache_dir.symlink_to(real)
    before = os.stat(real / backend_cache.FILE_NAME)
    with caplog.at_level(logging.WARNING, logger="loader"):
        with deferred(backend_dir) as runtime:
            assert runtime.report["entries"][0]["deferred"] is False
    assert warnings_about_the_cache(caplog) == \
        [f"backend cache {cache_dir} not used: not a directory (or a symbolic link)"]
    assert os.stat(real / backend_cache.FILE_NAME).st_ino == before.st_ino, "written through"


def test_a_cache_home_that_is_not_a_directory_is_named_in_the_warning(backend_dir, tmp_path,
                                                                      monkeypatch, caplog):
    install_reference(backend_dir)
    home = tmp_path / "xdg"
    home.write_bytes(b"")
    monkeypatch.setenv("XDG_CACHE_HOME", str(home))
    cache_dir = str(home / "dynamic-backends")
    with caplog.at_level(logging.WARNING, logger="loader"):
        with deferred(backend_dir) as runtime:
            assert runtime.backend_ids == ["CpuRef"]
    error = NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), cache_dir)
    assert warnings_about_the_cache(caplog) == [f"backend cache {cache_dir} not used: {error}"]


def test_a_cache_larger_than_the_limit_is_ignored(backend_dir, cache_dir, caplog, monkeypatch):
    data = valid_cache_bytes(backend_dir, cache_dir)
    monkeypatch.setattr(backend_cache, "MAX_BYTES", len(data))
    assert len(records(cache_dir)) == 1
    monkeypatch.setattr(backend_cache, "MAX_BYTES", len(data) - 1)
    with caplog.at_level(logging.WARNING, logger="loader"):
        assert records(cache_dir) == {}
    assert warnings_about_the_cache(caplog) == [
        f"backend cache {cache_file(cache_dir)} ignored: "
        f"{len(data)} bytes, more than the {len(data) - 1} a cache may have"]


@pytest.mark.parametrize("what", ["symbolic link", "writable by others"])
def test_the_cache_is_never_written_into_an_untrusted_directory(cache_dir, tmp_path, caplog, what):
    if what == "symbolic link":
        real = tmp_path / "real"
        real.mkdir(mode=0o700)
        cache_dir.parent.mkdir()
        cache_dir.symlink_to(real)
        problem = "not a directory (or a symbolic link)"
    else:
        real = cache_dir
        cache_dir.mkdir(parents=True)
        os.chmod(cache_dir, 0o777)
        problem = "writable by others (mode 777)"
    c = backend_cache.BackendCache(str(cache_dir))
    c.store("/a", (1, 1, 1, 1, 1), "A", loader.BackendVersion(1, 0))
    with caplog.at_level(logging.WARNING, logger="loader"):
        c.write()
    assert warnings_about_the_cache(caplog) == [f"backend cache {cache_dir} not written: {problem}"]
    assert os.listdir(real) == []


def test_no_cache_in_strict_mode_or_secure_execution(backend_dir, cache_dir, monkeypatch):
    valid_cache_bytes(backend_dir, cache_dir)
    os.unlink(cache_file(cache_dir))
    with deferred(backend_dir, strict_permissions=True) as runtime:
        assert runtime.report["entries"][0]["deferred"] is False
    assert not cache_file(cache_dir).exists()
    monkeypatch.setattr(search_paths, "_force_secure_execution", True)
    with deferred(backend_dir) as runtime:
        assert runtime.report["entries"][0]["deferred"] is False
    assert not cache_file(cache_dir).exists()


def test_duplicate_ids_among_deferred_backends(backend_dir, cache_dir):
    first = install_mock("alpha", backend_dir, "A_First_backend.so")
    second = install_mock("alpha", backend_dir, "B_Second_backend.so")
    with deferred(backend_dir):
        pass
    with deferred(backend_dir) as runtime:
        assert runtime.backend_ids == ["MockAlpha"]
        assert entry_for(runtime.report, second)["reason"] == "duplicate-backend-id"
        assert first in entry_for(runtime.report, second)["detail"]


# -- Runtime(backends=[...]) ---------------------------------------------------------------------

def test_only_the_named_backends_register(backend_dir):
    install_mock("alpha", backend_dir)
    beta = install_mock("beta", backend_dir)
    with loader.Runtime(dynamic_backends_path=str(backend_dir), backends=["MockAlpha"]) as runtime:
        assert runtime.backend_ids == ["MockAlpha"]
        entry = entry_for(runtime.report, beta)
        assert (entry["reason"], entry["backend_id"]) == ("filtered-out", "MockBeta")
        assert "not among the requested backends" in entry["detail"]
        assert not mapped(beta)
    with pytest.raises(TypeError, match="backends"):
        loader.Runtime(dynamic_backends_path=str(backend_dir), backends=[1])


def test_backends_left_out_on_request_are_logged_as_information_not_warnings(backend_dir,
                                                                            caplog):
    install_mock("alpha", backend_dir)
    beta = install_mock("beta", backend_dir)
    install_mock("null_id", backend_dir, "Mock_Null_backend.so")
    with caplog.at_level(logging.INFO, logger="loader"):
        loader.Runtime(dynamic_backends_path=str(backend_dir), backends=["MockAlpha"]).close()
    levels = {r.getMessage().split(":")[0]: r.levelname for r in caplog.records
              if r.getMessage().startswith("skipped")}
    assert levels == {f"skipped {beta}": "INFO",
                      f"skipped {backend_dir / 'Mock_Null_backend.so'}": "WARNING"}


def test_with_the_cache_unnamed_backends_are_never_loaded(backend_dir, cache_dir):
    reference = install_reference(backend_dir)
    alpha = install_mock("alpha", backend_dir)
    with deferred(backend_dir):
        pass
    assert unmapped(reference) and unmapped(alpha)
    with deferred(backend_dir, backends="MockAlpha") as runtime:
        assert runtime.backend_ids == ["MockAlpha"]
        assert entry_for(runtime.report, reference)["reason"] == "filtered-out"
        runtime.create_backend("MockAlpha")
        assert mapped(alpha) and not mapped(reference)


def test_load_network_loads_the_deferred_backends_whose_contexts_it_creates(backend_dir,
                                                                             cache_dir):
    """Every registered backend's context exists from the first load_network on (docs/networks.md,
    What load_network does): that loads every deferred backend; Runtime(backends=...) narrows it."""
    reference = install_reference(backend_dir)
    alpha = install_mock("alpha", backend_dir)
    with deferred(backend_dir):
        pass
    net = loader.Network()
    x = net.add_input("x", (2, 3))
    net.add_output(net.add_layer("Activation", [x], {"function": "relu"}), "y")
    data = np.array([[-1, 2, -3], [4, -5, 6]], np.float32)
    with deferred(backend_dir) as runtime:
        assert not mapped(reference) and not mapped(alpha)
        with runtime.load_network(net, backends=["CpuRef"]) as loaded:
            np.testing.assert_array_equal(loaded.execute({"x": data})["y"], np.maximum(data, 0))
        assert mapped(reference) and mapped(alpha)
        assert [e["deferred"] for e in runtime.report["entries"]] == [True, True]
    assert unmapped(reference) and unmapped(alpha)
    with deferred(backend_dir, backends=["CpuRef"]) as runtime:
        with runtime.load_network(net) as loaded:
            np.testing.assert_array_equal(loaded.execute({"x": data})["y"], np.maximum(data, 0))
        assert mapped(reference) and not mapped(alpha)


def test_concurrent_first_uses_load_a_deferred_backend_once(backend_dir, cache_dir, caplog):
    import threading
    install_reference(backend_dir)
    with deferred(backend_dir):
        pass
    with deferred(backend_dir) as runtime, caplog.at_level(logging.DEBUG, logger="loader"):
        results, errors = [], []

        def use():
            try:
                results.append(runtime.create_backend("CpuRef"))
            except Exception as error:  # pragma: no cover - reported below
                errors.append(error)
        threads = [threading.Thread(target=use) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert not errors and len(results) == 8
        loads = [r for r in caplog.records if r.getMessage().startswith("loading ")]
        assert len(loads) == 1, "loaded more than once"
        assert runtime.report["entries"][0]["status"] == "registered"


def test_the_scan_listing_says_a_deferred_backend_was_not_opened(backend_dir, cache_dir):
    from helpers import run_module
    install_reference(backend_dir)
    env = {"XDG_CACHE_HOME": str(cache_dir.parent), "DYNAMIC_BACKEND_LOAD": "deferred"}
    first = run_module("scan", "--path", str(backend_dir), env_extra=env).stdout
    assert "not opened" not in first                       # loaded and recorded now
    again = run_module("scan", "--path", str(backend_dir), env_extra=env).stdout
    assert f"CpuRef (Backend API {loader.BACKEND_API_VERSION}, deferred: not opened yet" in again
