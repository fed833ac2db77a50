"""Discovery (docs/loading.md) resolves, filters and de-duplicates without opening anything
that is not a regular file, and no filesystem error escapes."""
import base64
import json
import os
import pathlib
import shutil
import socket
import tempfile

import pytest

import loader
from helpers import entry_for, install_mock, install_reference, scan


def reason_of(report, path):
    return entry_for(report, path)["reason"]


def test_entries_are_taken_in_bytewise_order(backend_dir):
    names = ["b_x_backend.so", "B_x_backend.so", "a_x_backend.so", "A_x_backend.so",
             "A_x_backend.so.10", "A_x_backend.so.9", "0_x_backend.so"]
    for name in names:
        (backend_dir / name).write_bytes(name.encode())
    found = [os.path.basename(p) for p in loader.get_shared_objects([str(backend_dir)])]
    assert found == sorted(names, key=lambda n: n.encode())
    assert found == ["0_x_backend.so", "A_x_backend.so", "A_x_backend.so.10", "A_x_backend.so.9",
                     "B_x_backend.so", "a_x_backend.so", "b_x_backend.so"]


def test_every_entry_is_reported_including_those_with_other_names(backend_dir):
    (backend_dir / "README").write_text("hello")
    (backend_dir / "libfoo.so").write_text("x")
    report = scan(backend_dir)
    assert {os.path.basename(e["file"]) for e in report["entries"]} == {"README", "libfoo.so"}
    assert {e["reason"] for e in report["entries"]} == {"invalid-filename"}


def test_a_symlink_chain_resolves_to_its_last_file(backend_dir):
    real = install_reference(backend_dir, "Ref_Chain_backend.so.1.2.3")
    os.symlink("Ref_Chain_backend.so.1.2.3", backend_dir / "Ref_Chain_backend.so.1.2")
    os.symlink("Ref_Chain_backend.so.1.2", backend_dir / "Ref_Chain_backend.so.1")
    os.symlink(str(backend_dir / "Ref_Chain_backend.so.1"), backend_dir / "Ref_Chain_backend.so")
    report = scan(backend_dir)
    first = entry_for(report, backend_dir / "Ref_Chain_backend.so")
    assert first["status"] == "registered" and first["canonical"] == real
    for name in ("Ref_Chain_backend.so.1", "Ref_Chain_backend.so.1.2", "Ref_Chain_backend.so.1.2.3"):
        entry = entry_for(report, backend_dir / name)
        assert (entry["reason"], entry["canonical"]) == ("duplicate-file", real)


def test_links_into_other_directories_are_followed(tmp_path, backend_dir):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    real = install_mock("alpha", elsewhere)
    os.symlink(os.path.relpath(real, backend_dir), backend_dir / "Mock_Alpha_backend.so")
    report = scan(backend_dir)
    assert entry_for(report, backend_dir / "Mock_Alpha_backend.so")["canonical"] == real
    assert report["registered"] == ["MockAlpha"]


def test_the_same_file_in_two_search_paths_is_loaded_once(monkeypatch, tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir(), b.mkdir()
    install_mock("alpha", a)
    os.symlink(str(a / "Mock_Alpha_backend.so"), b / "Mock_Alpha_backend.so")
    monkeypatch.setenv(loader.ENVIRONMENT_VARIABLE, f"{a}:{b}")
    with loader.Runtime() as runtime:
        report = runtime.report
    assert reason_of(report, a / "Mock_Alpha_backend.so") is None
    assert reason_of(report, b / "Mock_Alpha_backend.so") == "duplicate-file"
    assert loader.get_shared_objects([str(a), str(b)]) == [str(a / "Mock_Alpha_backend.so")]


def test_files_with_the_same_name_in_two_directories_are_distinct(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir(), b.mkdir()
    (a / "Arm_GpuAcc_backend.so").write_bytes(b"one")
    (b / "Arm_GpuAcc_backend.so").write_bytes(b"two")
    assert loader.get_shared_objects([str(a), str(b)]) == [
        str(a / "Arm_GpuAcc_backend.so"), str(b / "Arm_GpuAcc_backend.so")]


def test_hard_links_are_the_same_file(backend_dir):
    install_mock("alpha", backend_dir, "Mock_A_backend.so")
    os.link(backend_dir / "Mock_A_backend.so", backend_dir / "Mock_B_backend.so")
    report = scan(backend_dir)
    assert reason_of(report, backend_dir / "Mock_B_backend.so") == "duplicate-file"


def test_a_dangling_link_is_skipped(backend_dir):
    os.symlink("nothing", backend_dir / "Arm_no_backend.so")
    os.symlink("Arm_no_backend.so", backend_dir / "Arm_no_backend.so.1")
    os.symlink("file/below", backend_dir / "Arm_no_backend.so.2")
    (backend_dir / "file").write_text("x")
    report = scan(backend_dir)
    for name in ("Arm_no_backend.so", "Arm_no_backend.so.1", "Arm_no_backend.so.2"):
        assert reason_of(report, backend_dir / name) == "dangling-symlink"


def test_a_link_loop_is_skipped(backend_dir):
    os.symlink("Arm_Loop_backend.so.2", backend_dir / "Arm_Loop_backend.so.1")
    os.symlink("Arm_Loop_backend.so.1", backend_dir / "Arm_Loop_backend.so.2")
    os.symlink("Arm_Self_backend.so", backend_dir / "Arm_Self_backend.so")
    report = scan(backend_dir)
    for name in ("Arm_Loop_backend.so.1", "Arm_Loop_backend.so.2", "Arm_Self_backend.so"):
        entry = entry_for(report, backend_dir / name)
        assert entry["reason"] == "dangling-symlink" and "loop" in entry["detail"]


def test_a_fifo_is_never_opened(backend_dir):
    # Opening a FIFO for reading blocks until a writer comes: a loader that opened it would hang.
    os.mkfifo(backend_dir / "Arm_Fifo_backend.so")
    os.symlink("Arm_Fifo_backend.so", backend_dir / "Arm_FifoLink_backend.so")
    report = scan(backend_dir)
    assert reason_of(report, backend_dir / "Arm_Fifo_backend.so") == "not-a-regular-file"
    assert reason_of(report, backend_dir / "Arm_FifoLink_backend.so") == "not-a-regular-file"


def test_directories_sockets_and_devices_are_not_regular_files(backend_dir):
    (backend_dir / "Arm_Dir_backend.so").mkdir()
    os.symlink("/dev/null", backend_dir / "Arm_Null_backend.so")
    os.symlink("/", backend_dir / "Arm_Root_backend.so")
    server = socket.socket(socket.AF_UNIX)
    try:
        server.bind(str(backend_dir / "Arm_Sock_backend.so"))
        report = scan(backend_dir)
    finally:
        server.close()
    for name in ("Arm_Dir_backend.so", "Arm_Null_backend.so", "Arm_Root_backend.so",
                 "Arm_Sock_backend.so"):
        assert reason_of(report, backend_dir / name) == "not-a-regular-file"


def _deep_directories(top_fd, levels):
    """Make ``levels`` nested directories with 250-byte names below the directory ``top_fd``.
    Returns (their relative path, an open descriptor of the deepest)."""
    name = "d" * 250
    fd = os.dup(top_fd)
    for _ in range(levels):
        os.mkdir(name, dir_fd=fd)
        below = os.open(name, os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = below
    return "/".join([name] * levels), fd


def test_a_path_longer_than_path_max_is_unreadable_not_an_exception(backend_dir):
    # The link resolves through 20 levels of 250-byte names: longer than PATH_MAX (4096).
    top = os.open(str(backend_dir), os.O_RDONLY)
    first_half, middle = _deep_directories(top, 10)
    second_half, bottom = _deep_directories(middle, 10)
    os.close(os.open("file", os.O_CREAT | os.O_WRONLY, dir_fd=bottom))
    os.symlink(second_half + "/file", "link", dir_fd=middle)
    for fd in (top, middle, bottom):
        os.close(fd)
    os.symlink(first_half + "/link", backend_dir / "Arm_Long_backend.so")
    report = scan(backend_dir)
    entry = entry_for(report, backend_dir / "Arm_Long_backend.so")
    assert entry["reason"] == "unreadable"
    assert "too long" in entry["detail"]


def test_non_utf8_names_are_reported_not_raised(backend_dir):
    name = b"Arm_\xff_backend.so"
    with open(os.path.join(os.fsencode(str(backend_dir)), name), "wb") as f:
        f.write(b"x")
    install_mock("alpha", backend_dir)
    report = scan(backend_dir)
    assert report["registered"] == ["MockAlpha"]
    entry = entry_for(report, os.path.join(str(backend_dir), "Arm_\\xff_backend.so"))
    assert entry["reason"] == "invalid-filename"
    assert base64.b64decode(entry["file_base64"]) == os.path.join(os.fsencode(str(backend_dir)),
                                                                  name)


def test_longest_names_are_handled(backend_dir):
    name = "A" * 231 + "_B_backend.so." + "1" * 10
    assert len(name) == 255
    (backend_dir / name).write_bytes(b"x")
    assert loader.get_shared_objects([str(backend_dir)]) == [str(backend_dir / name)]


def test_an_empty_directory_yields_nothing(backend_dir):
    assert loader.get_shared_objects([str(backend_dir)]) == []
    assert scan(backend_dir)["entries"] == []


def test_get_shared_objects_ignores_invalid_paths(backend_dir):
    (backend_dir / "Arm_X_backend.so").write_bytes(b"x")
    found = loader.get_shared_objects(["/does/not/exist", "", "relative", str(backend_dir)])
    assert found == [str(backend_dir / "Arm_X_backend.so")]


def test_get_shared_objects_returns_canonical_paths(tmp_path):
    real = tmp_path / "real"
    real.mkdir()
    (real / "Arm_X_backend.so").write_bytes(b"x")
    os.symlink(str(real), tmp_path / "alias")
    assert loader.get_shared_objects([str(tmp_path / "alias")]) == [str(real / "Arm_X_backend.so")]


def test_an_entry_is_named_as_found_under_an_aliased_search_path(tmp_path):
    real = tmp_path / "real"
    real.mkdir()
    install_mock("alpha", real)
    os.symlink(str(real), tmp_path / "alias")
    entries = scan(tmp_path / "alias")["entries"]
    assert [(e["file"], e["canonical"], e["status"]) for e in entries] == [
        (str(tmp_path / "alias" / "Mock_Alpha_backend.so"), str(real / "Mock_Alpha_backend.so"),
         "registered")]


def _scan_as_unprivileged(path):
    """Scan ``path`` as a user that permissions apply to (root ignores them): a forked child
    drops to ``nobody`` and sends the report back through a pipe."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: never returns into pytest
        status = 1
        try:
            os.close(read_end)
            if os.geteuid() == 0:
                os.setgroups([])
                os.setgid(65534)
                os.setuid(65534)
            with loader.Runtime(dynamic_backends_path=path) as runtime:
                payload = json.dumps(runtime.report).encode()
            while payload:
                payload = payload[os.write(write_end, payload):]
            status = 0
        finally:
            os._exit(status)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        payload = pipe.read()
    _, status = os.waitpid(pid, 0)
    assert status == 0, "the unprivileged scan failed"
    return json.loads(payload)


@pytest.fixture
def shared_dir():
    """A directory other users can enter (pytest's own temporary directories are private)."""
    path = tempfile.mkdtemp(prefix="dynamic-backends-")
    os.chmod(path, 0o755)
    yield pathlib.Path(path)
    for root, dirs, _ in os.walk(path):
        for d in dirs:
            os.chmod(os.path.join(root, d), 0o755)
    shutil.rmtree(path)


def test_an_unlistable_search_path_is_dropped_not_raised(shared_dir):
    locked = shared_dir / "locked"
    locked.mkdir()
    (locked / "Arm_X_backend.so").write_bytes(b"x")
    locked.chmod(0)
    report = _scan_as_unprivileged(str(locked))
    assert report["search_paths"][0]["reason"] == "unreadable"
    assert report["entries"] == []


def test_a_link_into_a_locked_directory_is_unreadable(shared_dir):
    locked, scanned = shared_dir / "locked", shared_dir / "scanned"
    locked.mkdir(), scanned.mkdir()
    (locked / "real.so").write_bytes(b"x")
    os.symlink(str(locked / "real.so"), scanned / "Arm_Locked_backend.so")
    locked.chmod(0)
    report = _scan_as_unprivileged(str(scanned))
    [entry] = report["entries"]
    assert entry["reason"] == "unreadable" and "Permission denied" in entry["detail"]


# -- what each skip says ---------------------------------------------------------------------------

def test_a_non_regular_file_says_which_kind_it_is(backend_dir):
    (backend_dir / "Arm_Dir_backend.so").mkdir()
    os.mkfifo(backend_dir / "Arm_Fifo_backend.so")
    os.symlink("/dev/null", backend_dir / "Arm_Null_backend.so")
    os.symlink("Arm_Dir_backend.so", backend_dir / "Arm_DirLink_backend.so")
    server = socket.socket(socket.AF_UNIX)
    try:
        server.bind(str(backend_dir / "Arm_Sock_backend.so"))
        report = scan(backend_dir)
    finally:
        server.close()
    details = {os.path.basename(e["file"]): e["detail"] for e in report["entries"]}
    assert details["Arm_Dir_backend.so"] == "a directory, not a regular file"
    assert details["Arm_Fifo_backend.so"] == "a FIFO, not a regular file"
    assert details["Arm_Sock_backend.so"] == "a socket, not a regular file"
    assert details["Arm_Null_backend.so"] == "symlink to a character device, not a regular file"
    assert details["Arm_DirLink_backend.so"] == "symlink to a directory, not a regular file"


def test_a_block_device_is_named_as_one(backend_dir):
    devices = [os.path.join("/dev", d) for d in sorted(os.listdir("/dev"))
               if os.path.exists(os.path.join("/dev", d))
               and __import__("stat").S_ISBLK(os.stat(os.path.join("/dev", d)).st_mode)]
    if not devices:
        pytest.skip("no block device on this machine")
    os.symlink(devices[0], backend_dir / "Arm_Block_backend.so")
    entry = entry_for(scan(backend_dir), backend_dir / "Arm_Block_backend.so")
    assert entry["detail"] == "symlink to a block device, not a regular file"


def test_a_duplicate_names_the_file_that_came_first(backend_dir):
    # The standard layout: X.so -> X.so.2. X.so sorts first and wins; X.so.2 is its duplicate.
    install_reference(backend_dir, "Acme_Npu_backend.so.2")
    os.symlink("Acme_Npu_backend.so.2", backend_dir / "Acme_Npu_backend.so")
    report = scan(backend_dir)
    entry = entry_for(report, backend_dir / "Acme_Npu_backend.so.2")
    assert entry["reason"] == "duplicate-file"
    assert entry["detail"] == f"same file as {backend_dir / 'Acme_Npu_backend.so'}, already a candidate"


def test_a_duplicate_across_search_paths_names_the_first_file(monkeypatch, tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir(), b.mkdir()
    install_mock("alpha", a, "Mock_A_backend.so")
    os.link(a / "Mock_A_backend.so", b / "Mock_B_backend.so")
    monkeypatch.setenv(loader.ENVIRONMENT_VARIABLE, f"{a}:{b}")
    with loader.Runtime() as runtime:
        entry = entry_for(runtime.report, b / "Mock_B_backend.so")
    assert entry["detail"].startswith(f"same file as {a / 'Mock_A_backend.so'}")


# -- paths that are not UTF-8 --------------------------------------------------------------------

def _strict_json(text):
    """Parse as a strict parser would: the text must be valid UTF-8 and hold no lone surrogate."""
    data = text.encode("utf-8")  # raises on a lone surrogate
    parsed = json.loads(data.decode("utf-8", "strict"))

    def walk(value):
        if isinstance(value, str):
            value.encode("utf-8")
        elif isinstance(value, dict):
            for k, v in value.items():
                walk(k), walk(v)
        elif isinstance(value, list):
            for v in value:
                walk(v)
    walk(parsed)
    return parsed


def test_non_utf8_paths_are_valid_utf8_in_json_and_recoverable(tmp_path):
    directory = os.path.join(os.fsencode(str(tmp_path)), b"dir\xfe")
    os.mkdir(directory)
    with open(os.path.join(directory, b"Arm_Gpu_backend.so.\xff"), "wb") as f:
        f.write(b"x")
    with open(os.path.join(directory, b"Arm_Gpu\xff_backend.so"), "wb") as f:
        f.write(b"x")
    valid = os.path.join(directory, b"Arm_Text_backend.so")
    with open(valid, "wb") as f:
        f.write(b"not an ELF file")
    with loader.Runtime(dynamic_backends_path=os.fsdecode(directory)) as runtime:
        report = _strict_json(json.dumps(runtime.report, ensure_ascii=False))
    [search_path] = report["search_paths"]
    assert search_path["path"] == str(tmp_path) + "/dir\\xfe"
    assert base64.b64decode(search_path["path_base64"]) == directory
    recovered = {base64.b64decode(e["file_base64"]) for e in report["entries"]}
    assert recovered == {os.path.join(directory, b"Arm_Gpu_backend.so.\xff"),
                         os.path.join(directory, b"Arm_Gpu\xff_backend.so"), valid}
    text_file = next(e for e in report["entries"] if e["file"].endswith("Arm_Text_backend.so"))
    assert text_file["reason"] == "not-a-shared-object"
    assert base64.b64decode(text_file["canonical_base64"]) == valid


def test_utf8_paths_carry_no_base64(backend_dir):
    install_reference(backend_dir, "Ref_Ünï_backend.so")  # not a valid name, but valid UTF-8
    install_reference(backend_dir)
    report = scan(backend_dir)
    assert all("file_base64" not in e and "canonical_base64" not in e for e in report["entries"])
    assert "path_base64" not in report["search_paths"][0]
