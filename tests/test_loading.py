"""The checks (docs/loading.md): each mock backend breaks one rule and is skipped with that rule's code;
valid backends next to them still load."""
import json
import os
import shutil
import struct
import sys

import pytest

import loader
import mock_backends
import reference_backend
from helpers import entry_for, install, install_mock, run_module, scan

# mock source stem -> the reason code its one defect must produce
EXPECTED = {
    "missing_get_backend_id": "missing-symbol",
    "missing_get_version": "missing-symbol",
    "missing_backend_factory": "missing-symbol",
    "mangled_entry_points": "missing-symbol",
    "null_id": "invalid-backend-id",
    "empty_id": "invalid-backend-id",
    "unknown_id": "invalid-backend-id",
    "id_with_space": "invalid-backend-id",
    "id_with_control_character": "invalid-backend-id",
    "id_too_long": "invalid-backend-id",
    "major_too_new": "incompatible-version",
    "major_too_old": "incompatible-version",
    "minor_too_new": "incompatible-version",
    "factory_returns_null": "factory-failed",
    "factory_malformed_instance": "factory-failed",
    "factory_instance_id_mismatch": "factory-failed",
    "missing_dependency": "missing-dependency",
    "unresolved_symbol": "dlopen-failed",
    "unavailable": "backend-unavailable",
}

VALID = {"alpha": "MockAlpha", "beta": "MockBeta", "minor_older": "MockMinorOlder",
         "minor_previous": "MockMinorPrevious", "minor_1_2_says_yes": "MockMinor12SaysYes",
         "partial": "MockPartial",
         "views_miss_a_layer": "MockViewsMissALayer",
         "views_claim_a_layer_twice": "MockViewsClaimALayerTwice",
         "views_name_a_layer_not_offered": "MockViewsNameALayerNotOffered",
         "substitution_wrong_boundary": "MockSubstitutionWrongBoundary",
         "compiled_wrong_result": "MockCompiledWrongResult",
         "compiled_dies_with_instance": "MockCompiledDiesWithInstance",
         "profiling_bad_events": "MockProfilingBadEvents",
         "probed_once": "MockProbedOnce",
         "availability_flips": "MockAvailabilityFlips",
         "blob_not_round_trip": "MockBlobNotRoundTrip",
         "factory_missing_required_function": "MockMissingRequired"}


def test_every_installed_mock_is_covered_by_this_table():
    stems = set(EXPECTED) | set(VALID) | {"duplicate_of_alpha"}
    assert set(mock_backends.available()) == {mock_backends.library_name(s) for s in stems}


@pytest.mark.parametrize("stem, reason", sorted(EXPECTED.items()))
def test_a_broken_backend_is_skipped_with_its_reason(backend_dir, stem, reason):
    path = install_mock(stem, backend_dir)
    report = scan(backend_dir)
    entry = entry_for(report, path)
    assert (entry["status"], entry["reason"]) == ("skipped", reason), entry["detail"]
    assert entry["detail"]
    assert report["registered"] == []


@pytest.mark.parametrize("stem, reason", sorted(EXPECTED.items()))
def test_a_broken_backend_never_stops_the_others(backend_dir, stem, reason):
    install_mock("alpha", backend_dir, "A_First_backend.so")
    install_mock(stem, backend_dir, "M_Broken_backend.so")
    install_mock("beta", backend_dir, "Z_Last_backend.so")
    report = scan(backend_dir)
    assert entry_for(report, backend_dir / "M_Broken_backend.so")["reason"] == reason
    assert report["registered"] == ["MockAlpha", "MockBeta"]


def test_the_factory_is_probed_once_at_load(backend_dir):
    """Rule 5.5: one probe instance, checked, asked whether it can run here, destroyed; the
    mock answers no on any instance but the first its factory made."""
    install_mock("probed_once", backend_dir)
    with loader.Runtime(dynamic_backends_path=str(backend_dir)) as runtime:
        assert runtime.backend_ids == ["MockProbedOnce"], runtime.report["entries"]
        assert runtime.create_backend("MockProbedOnce").id == "MockProbedOnce"


@pytest.mark.parametrize("stem, backend_id", sorted(VALID.items()))
def test_a_valid_backend_is_registered(backend_dir, stem, backend_id):
    path = install_mock(stem, backend_dir)
    report = scan(backend_dir)
    entry = entry_for(report, path)
    assert (entry["status"], entry["reason"], entry["backend_id"]) == ("registered", None, backend_id)
    assert report["registered"] == [backend_id]


def test_missing_symbol_names_the_missing_entry_point(backend_dir):
    for stem, name in [("missing_get_backend_id", "GetBackendId"),
                       ("missing_get_version", "GetVersion"),
                       ("missing_backend_factory", "BackendFactory")]:
        path = install_mock(stem, backend_dir)
        assert name in entry_for(scan(backend_dir), path)["detail"]
        os.unlink(path)


def test_mangled_entry_points_get_a_hint(backend_dir):
    path = install_mock("mangled_entry_points", backend_dir)
    detail = entry_for(scan(backend_dir), path)["detail"]
    assert "mangled" in detail and 'extern "C"' in detail


def test_missing_dependency_names_the_library(backend_dir):
    path = install_mock("missing_dependency", backend_dir)
    assert "libdbk_absent_dependency.so" in entry_for(scan(backend_dir), path)["detail"]


def test_incompatible_version_shows_both_versions(backend_dir):
    path = install_mock("major_too_new", backend_dir)
    entry = entry_for(scan(backend_dir), path)
    assert entry["version"] == f"{loader.BACKEND_API_VERSION.major + 1}.{loader.BACKEND_API_VERSION.minor}"
    assert entry["version"] in entry["detail"] and str(loader.BACKEND_API_VERSION) in entry["detail"]


def test_the_first_of_two_backends_with_one_id_wins(backend_dir):
    install_mock("duplicate_of_alpha", backend_dir, "A_Duplicate_backend.so")
    install_mock("alpha", backend_dir, "B_Alpha_backend.so")
    report = scan(backend_dir)
    assert entry_for(report, backend_dir / "A_Duplicate_backend.so")["status"] == "registered"
    second = entry_for(report, backend_dir / "B_Alpha_backend.so")
    assert second["reason"] == "duplicate-backend-id"
    assert str(backend_dir / "A_Duplicate_backend.so") in second["detail"]
    assert report["registered"] == ["MockAlpha"]


# -- files that are not backends at all ---------------------------------------------------------

def _patched(source, directory, name, offset, value):
    path = install(source, directory, name)
    with open(path, "r+b") as f:
        f.seek(offset)
        f.write(value)
    return path


def test_a_text_file_with_a_valid_name(backend_dir):
    (backend_dir / "Arm_Text_backend.so").write_text("#!/bin/sh\necho not a library\n")
    assert entry_for(scan(backend_dir), backend_dir / "Arm_Text_backend.so")["reason"] == \
        "not-a-shared-object"


def test_an_empty_file_and_a_truncated_library(backend_dir):
    (backend_dir / "Arm_Empty_backend.so").write_bytes(b"")
    with open(reference_backend.LIBRARY_PATH, "rb") as f:
        head = f.read(1000)
    (backend_dir / "Arm_Cut_backend.so").write_bytes(head)
    (backend_dir / "Arm_Stub_backend.so").write_bytes(head[:10])
    report = scan(backend_dir)
    for name in ("Arm_Empty_backend.so", "Arm_Cut_backend.so", "Arm_Stub_backend.so"):
        assert entry_for(report, backend_dir / name)["reason"] == "not-a-shared-object", name


def test_an_executable(backend_dir):
    install(shutil.which("true") or "/bin/true", backend_dir, "Arm_True_backend.so")
    assert entry_for(scan(backend_dir), backend_dir / "Arm_True_backend.so")["reason"] == \
        "not-a-shared-object"


def test_a_library_for_another_machine(backend_dir):
    # e_machine (offset 18, 2 bytes, little-endian here) set to 0x1234.
    path = _patched(reference_backend.LIBRARY_PATH, backend_dir, "Arm_Other_backend.so", 18,
                    struct.pack("<H", 0x1234))
    entry = entry_for(scan(backend_dir), path)
    assert entry["reason"] == "wrong-architecture" and "machine" in entry["detail"]


def test_a_library_of_the_other_elf_class(backend_dir):
    path = _patched(reference_backend.LIBRARY_PATH, backend_dir, "Arm_Class_backend.so", 4,
                    b"\x01" if struct.calcsize("P") == 8 else b"\x02")
    entry = entry_for(scan(backend_dir), path)
    assert entry["reason"] == "wrong-architecture" and "class" in entry["detail"]


def test_an_object_file_is_not_a_shared_object(backend_dir):
    # e_type (offset 16) = ET_REL
    path = _patched(reference_backend.LIBRARY_PATH, backend_dir, "Arm_Rel_backend.so", 16,
                    struct.pack("<H", 1))
    assert entry_for(scan(backend_dir), path)["reason"] == "not-a-shared-object"


# -- the whole mock directory through the command line ------------------------------------------

def test_scanning_every_mock_at_once_reports_each_reason():
    result = run_module("scan", "--path", mock_backends.LIBRARY_DIR, "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    by_name = {os.path.basename(e["file"]): e for e in report["entries"]}
    for stem, reason in EXPECTED.items():
        assert by_name[mock_backends.library_name(stem)]["reason"] == reason, stem
    for stem, backend_id in VALID.items():
        assert by_name[mock_backends.library_name(stem)]["status"] == "registered", stem
    # Mock_Alpha_backend.so sorts before Mock_DuplicateOfAlpha_backend.so, so it wins.
    assert by_name[mock_backends.library_name("duplicate_of_alpha")]["reason"] == \
        "duplicate-backend-id"
    assert report["registered"] == [
        "MockAlpha", "MockAvailabilityFlips", "MockBeta", "MockBlobNotRoundTrip",
        "MockCompiledDiesWithInstance",
        "MockCompiledWrongResult",
        "MockMissingRequired", "MockMinor12SaysYes", "MockMinorOlder", "MockMinorPrevious",
        "MockPartial",
        "MockProbedOnce", "MockProfilingBadEvents",
        "MockSubstitutionWrongBoundary", "MockViewsClaimALayerTwice", "MockViewsMissALayer",
        "MockViewsNameALayerNotOffered"]


def _end_of_segments(data):
    """Offset just past the last byte a 64-bit little-endian ELF file's segments map."""
    phoff, = struct.unpack_from("<Q", data, 32)
    phentsize, phnum = struct.unpack_from("<HH", data, 54)
    end = 0
    for i in range(phnum):
        p_type, _, p_offset, _, _, p_filesz = struct.unpack_from("<IIQQQQ", data, phoff + i * phentsize)
        if p_type in (1, 2):  # PT_LOAD, PT_DYNAMIC
            end = max(end, p_offset + p_filesz)
    return end


def _scan_in_child(directory):
    result = run_module("scan", "--path", str(directory), "--json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


@pytest.mark.skipif(struct.calcsize("P") != 8 or sys.byteorder != "little",
                    reason="the test parses 64-bit little-endian ELF")
@pytest.mark.parametrize("fraction", [0.02, 0.25, 0.5, 0.9, 0.999])
def test_a_library_cut_short_is_refused_before_dlopen(backend_dir, fraction):
    # dlopen maps segments past the end of a truncated file; touching them raises SIGBUS.
    # The scan runs in a child process so that a miss fails this test, not the suite.
    with open(reference_backend.LIBRARY_PATH, "rb") as f:
        data = f.read()
    cut = int(_end_of_segments(data) * fraction)
    (backend_dir / "Arm_Cut_backend.so").write_bytes(data[:cut])
    [entry] = _scan_in_child(backend_dir)["entries"]
    assert entry["reason"] == "not-a-shared-object"
    assert "truncated" in entry["detail"] or "ELF" in entry["detail"]


@pytest.mark.skipif(struct.calcsize("P") != 8 or sys.byteorder != "little",
                    reason="the test parses 64-bit little-endian ELF")
def test_a_library_missing_only_its_unmapped_tail_still_loads(backend_dir):
    with open(reference_backend.LIBRARY_PATH, "rb") as f:
        data = f.read()
    (backend_dir / "Arm_Cut_backend.so").write_bytes(data[:_end_of_segments(data)])
    assert _scan_in_child(backend_dir)["registered"] == [reference_backend.BACKEND_ID]
