"""Property tests: the name rule, path lists and scan reports against simple independent models,
on inputs hypothesis makes up."""
import json
import os
import re
import shutil
import tempfile

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import loader

# The rule, written independently of the loader's hand-written matcher.
NAME = re.compile(rb"[A-Za-z0-9]+_[A-Za-z0-9]+_backend\.so(\.[0-9]+)*")

name_parts = st.sampled_from(["Arm", "x", "1", "GpuAcc", "", "_", ".", "so", "backend", "9", "A%",
                              "é", " ", "\x00", "-"])
names = st.one_of(
    st.lists(name_parts, max_size=8).map("".join),
    st.builds(lambda v, n, ver: f"{v}_{n}_backend.so{ver}",
              st.text("ab9Z_.", max_size=4), st.text("cd7Y_.", max_size=4),
              st.text(".0123456789a", max_size=6)),
    st.text(max_size=40),
)


@given(names)
def test_name_rule_matches_the_model(name):
    encoded = name.encode("utf-8", "surrogatepass")
    expected = NAME.fullmatch(encoded) is not None
    assert loader.is_valid_backend_filename(name) is expected
    assert loader.is_valid_backend_filename(encoded) is expected


@given(st.binary(max_size=64))
def test_name_rule_on_arbitrary_bytes(raw):
    assert loader.is_valid_backend_filename(raw) is (NAME.fullmatch(raw) is not None)


# -- path lists --------------------------------------------------------------------------------

path_kinds = st.lists(st.sampled_from(["dir1", "dir2", "link1", "file", "missing", "relative",
                                       "empty", "dir1/", "dir1/."]), max_size=8)


def _make_tree(root):
    os.mkdir(os.path.join(root, "dir1"))
    os.mkdir(os.path.join(root, "dir2"))
    os.symlink(os.path.join(root, "dir1"), os.path.join(root, "link1"))
    open(os.path.join(root, "file"), "w").close()


def _spell(root, kind):
    return {"missing": os.path.join(root, "missing"), "relative": "relative/path",
            "empty": ""}.get(kind, os.path.join(root, kind))


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], max_examples=60)
@given(path_kinds)
def test_path_lists_match_the_model(monkeypatch, kinds):
    root = tempfile.mkdtemp()
    try:
        _make_tree(root)
        spelled = [_spell(root, k) for k in kinds]
        monkeypatch.setenv(loader.ENVIRONMENT_VARIABLE, ":".join(spelled))
        expected, seen = [], set()
        for path in spelled:
            if path and os.path.isabs(path) and os.path.isdir(path):
                canonical = os.path.realpath(path)
                if canonical not in seen:
                    seen.add(canonical)
                    expected.append(path)
        assert loader.get_backend_paths() == expected
    finally:
        shutil.rmtree(root)


# -- reports -----------------------------------------------------------------------------------

entry_kinds = st.sampled_from(["file", "link", "dangling", "dir", "fifo", "loop"])
entries = st.dictionaries(
    st.one_of(st.builds(lambda v, n, ver: f"{v}_{n}_backend.so{ver}", st.sampled_from(["A", "b1"]),
                        st.sampled_from(["X", "y2"]), st.sampled_from(["", ".1", ".1.2"])),
              st.sampled_from(["README", "lib.so", "A__backend.so", ".hidden"])),
    entry_kinds, max_size=10)


@settings(max_examples=60)
@given(entries)
def test_every_entry_is_reported_once_with_a_consistent_outcome(layout):
    root = tempfile.mkdtemp()
    try:
        for name, kind in layout.items():
            path = os.path.join(root, name)
            if kind == "file":
                with open(path, "w") as f:
                    f.write("not a library")
            elif kind == "link":
                os.symlink("target-file", path)
                open(os.path.join(root, "target-file"), "w").close()
            elif kind == "dangling":
                os.symlink("nowhere", path)
            elif kind == "loop":
                os.symlink(name, path)
            elif kind == "dir":
                os.mkdir(path)
            else:
                os.mkfifo(path)
        with loader.Runtime(dynamic_backends_path=root) as runtime:
            report = runtime.report
        json.loads(json.dumps(report))
        files = [os.path.basename(e["file"]) for e in report["entries"]]
        assert sorted(files) == sorted(os.listdir(root))
        assert [f.encode() for f in files] == sorted(f.encode() for f in files)
        assert report["registered"] == []
        for entry in report["entries"]:
            name = os.path.basename(entry["file"])
            assert entry["status"] == "skipped"
            valid = loader.is_valid_backend_filename(name)
            assert (entry["reason"] == "invalid-filename") is (not valid)
            if valid:
                kind = layout.get(name)
                expected = {"dangling": {"dangling-symlink"}, "loop": {"dangling-symlink"},
                            "dir": {"not-a-regular-file"}, "fifo": {"not-a-regular-file"},
                            "file": {"not-a-shared-object", "duplicate-file"},
                            "link": {"not-a-shared-object", "duplicate-file"}}[kind]
                assert entry["reason"] in expected, (name, kind, entry)
    finally:
        shutil.rmtree(root)


# -- the backend cache file: untrusted bytes -------------------------------------------------------

def _cache_bytes(records):
    """A cache file holding ``records`` [(path, identity, id, (major, minor))], as the loader
    writes it."""
    from loader import _core, cache
    c = _core.CacheRecords()
    for path, identity, backend_id, (major, minor) in records:
        c.store(path, identity, backend_id, major, minor)
    return c.serialize(cache.loader_version(), cache.MAX_RECORDS)


cache_records = st.lists(st.tuples(
    st.text(st.characters(blacklist_characters="\x00", blacklist_categories=("Cs",)), min_size=1,
            max_size=20).map(lambda s: "/" + s),
    st.tuples(*[st.integers(0, 2**64 - 1)] * 3, *[st.integers(-2**63, 2**63 - 1)] * 2),
    st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7e), min_size=1, max_size=12)
      .filter(lambda s: s != "Unknown"),
    st.tuples(st.just(1), st.integers(0, 2))), max_size=6, unique_by=lambda r: r[0])


@settings(max_examples=150)
@given(cache_records, st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), max_size=4),
       st.integers(0, 10**6))
def test_a_cache_file_parses_to_its_records_or_is_refused_whatever_its_bytes(records, flips, cut):
    """A cache the loader wrote reads back exactly; the same bytes with bytes changed or cut
    off read back as some records or raise ValueError, never anything else (the parser bounds
    every count, length and string it reads)."""
    from loader import _core, cache
    data = _cache_bytes(records)
    parsed = _core.CacheRecords.parse(data, cache.loader_version(), cache.MAX_RECORDS)
    assert sorted(parsed.items()) == sorted(records)
    damaged = bytearray(data)
    for at, value in flips:
        damaged[at % len(damaged)] = value
    damaged = bytes(damaged[:len(damaged) - cut % (len(damaged) + 1)])
    try:
        again = _core.CacheRecords.parse(damaged, cache.loader_version(), cache.MAX_RECORDS)
    except ValueError:
        return
    from loader.loading import check_backend_id
    for path, identity, backend_id, version in again.items():
        assert path.startswith("/") and "\x00" not in path
        assert check_backend_id(backend_id.encode("ascii")) == (backend_id, "")
        assert loader.is_backend_compatible(version)
