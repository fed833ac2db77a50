"""Rule 12.6: a backend that cannot run on this machine is skipped with backend-unavailable and
its message, after the factory probe and before the duplicate-id check."""
import json

from helpers import entry_for, install_mock, install_reference, run_module, scan


def test_an_unavailable_backend_is_skipped_with_its_message(backend_dir):
    path = install_mock("unavailable", backend_dir)
    entry = entry_for(scan(backend_dir), path)
    assert (entry["status"], entry["reason"]) == ("skipped", "backend-unavailable")
    assert entry["detail"] == "no MockUnavailable device on this machine"
    assert entry["backend_id"] == "MockUnavailable"


def test_availability_is_checked_before_the_duplicate_id(backend_dir):
    # Two copies of one unavailable backend: neither registers, so neither is a duplicate.
    first = install_mock("unavailable", backend_dir, "A_First_backend.so")
    second = install_mock("unavailable", backend_dir, "B_Second_backend.so")
    report = scan(backend_dir)
    assert [entry_for(report, p)["reason"] for p in (first, second)] == [
        "backend-unavailable", "backend-unavailable"]


def test_an_unavailable_backend_never_stops_the_others(backend_dir):
    install_mock("alpha", backend_dir, "A_First_backend.so")
    install_mock("unavailable", backend_dir, "M_Middle_backend.so")
    install_reference(backend_dir)
    assert scan(backend_dir)["registered"] == ["MockAlpha", "CpuRef"]


def test_scan_shows_the_reason_and_message(backend_dir):
    install_mock("unavailable", backend_dir)
    text = run_module("scan", "--path", str(backend_dir))
    assert "backend-unavailable: no MockUnavailable device on this machine" in text.stdout
    report = json.loads(run_module("scan", "--path", str(backend_dir), "--json").stdout)
    assert report["entries"][0]["reason"] == "backend-unavailable"
