"""File names (docs/loading.md): which directory entries are backend candidates."""
import os
import subprocess

import pytest
import yaml

import loader
from helpers import run_module, scan

with open(os.path.join(os.path.dirname(__file__), "data", "filenames.yaml"), encoding="utf-8") as f:
    CASES = yaml.safe_load(f)

IDS = [case["name"] for case in CASES]


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_name_rule(case):
    assert loader.is_valid_backend_filename(case["name"]) is case["valid"], case["why"]


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_name_rule_on_bytes(case):
    assert loader.is_valid_backend_filename(case["name"].encode("utf-8")) is case["valid"]


@pytest.fixture(scope="module")
def scanned_matrix(tmp_path_factory):
    """Every name of the matrix as a real directory entry, scanned once by a runtime."""
    directory = tmp_path_factory.mktemp("names")
    for case in CASES:
        if "link_to" not in case:
            (directory / case["name"]).write_bytes(b"not a shared object")
    for case in CASES:
        if "link_to" in case:
            os.symlink(case["link_to"], directory / case["name"])
    return directory, scan(directory)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_name_rule_through_a_real_scan(case, scanned_matrix):
    directory, report = scanned_matrix
    entry = next(e for e in report["entries"] if e["file"] == str(directory / case["name"]))
    if case["valid"]:
        assert entry["reason"] != "invalid-filename"
    else:
        assert entry["reason"] == "invalid-filename"
        assert entry["canonical"] is None


def test_symlinks_resolve_to_the_file_at_the_end_of_the_chain(scanned_matrix):
    directory, report = scanned_matrix
    target = os.path.realpath(directory / "Arm_CpuAcc_backend.so")
    for name in ("Arm_CpuAcc_backend.so.1", "Arm_CpuAcc_backend.so.1.2", "Arm_CpuAcc_backend.so.1.2.3"):
        entry = next(e for e in report["entries"] if e["file"] == str(directory / name))
        assert entry["canonical"] == target
        assert entry["reason"] == "duplicate-file"


def test_candidates_of_the_matrix_are_exactly_the_valid_regular_files(scanned_matrix):
    directory, _ = scanned_matrix
    expected = sorted(
        os.path.join(os.path.realpath(directory), case["name"]).encode()
        for case in CASES if case["valid"] and "link_to" not in case)
    found = loader.get_shared_objects([str(directory)])
    assert [p.encode() for p in found] == expected  # byte-wise order


def test_the_name_checked_is_the_entry_not_the_link_target(backend_dir):
    (backend_dir / "Arm_Real_backend.so").write_bytes(b"x")
    os.symlink("Arm_Real_backend.so", backend_dir / "not-a-backend-name")
    os.symlink("plain-file", backend_dir / "Arm_Link_backend.so")
    (backend_dir / "plain-file").write_bytes(b"x")
    found = loader.get_shared_objects([str(backend_dir)])
    # Arm_Link_backend.so is scanned before Arm_Real_backend.so and resolves to plain-file.
    assert found == [str(backend_dir / "plain-file"), str(backend_dir / "Arm_Real_backend.so")]


@pytest.mark.parametrize("value", [
    None, 0, 1.5, [], ["Arm_GpuAcc_backend.so"], object(), b"", "", "\udcff_x_backend.so",
    "Arm_GpuAcc_backend.so\x00", b"Arm_GpuAcc_backend.so\x00", b"\xff\xfe_x_backend.so",
    "a/Arm_GpuAcc_backend.so", "x" * 100_000,
])
def test_name_rule_never_raises(value):
    assert loader.is_valid_backend_filename(value) is False


def test_path_like_names_are_accepted():
    import pathlib
    assert loader.is_valid_backend_filename(pathlib.PurePath("Arm_GpuAcc_backend.so.1"))


def test_check_name_command_prints_a_verdict_per_name_and_fails_on_any_invalid():
    names = [case["name"] for case in CASES]
    result = run_module("check-name", *names)
    assert result.returncode == 1
    assert result.stdout.splitlines() == ["valid" if c["valid"] else "invalid" for c in CASES]


def test_check_name_command_succeeds_when_all_are_valid():
    valid = [case["name"] for case in CASES if case["valid"]]
    result = subprocess.run(["backend-loader", "check-name", "--with-names", *valid],
                            capture_output=True, text=True)
    assert result.returncode == 0
    assert result.stdout.splitlines() == [f"valid\t{name}" for name in valid]
