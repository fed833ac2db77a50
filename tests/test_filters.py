"""Operator filters (DYNAMIC_BACKEND_SELECT / DYNAMIC_BACKEND_DISABLE, filtered-out): what the
patterns match, and what a filtered entry and the report say about them."""
import json
import logging

import pytest

import loader
from helpers import entry_for, install_mock, install_reference, run_module


@pytest.fixture
def acme(backend_dir):
    install_mock("alpha", backend_dir, "Acme_Npu_backend.so.2")
    install_reference(backend_dir)
    return backend_dir


def registered(directory, **filters):
    with loader.Runtime(dynamic_backends_path=str(directory), **filters) as runtime:
        return runtime.backend_ids


@pytest.mark.parametrize("pattern", [
    "Acme_Npu",                    # <vendor>_<name>
    "acme_npu", "ACME_*",          # ignoring ASCII case
    "Acme_Npu_backend.so.2",       # the whole file name
    "*_backend.so.2", "acme_*.so.*",
])
def test_select_matches_vendor_name_or_file_name_ignoring_case(acme, pattern):
    assert registered(acme, select=pattern) == ["MockAlpha"]
    assert registered(acme, disable=pattern) == ["CpuRef"]


def test_the_backend_id_is_not_a_key(acme):
    assert registered(acme, select="MockAlpha") == []


def test_a_filtered_entry_names_the_variable_the_pattern_and_the_key(acme, monkeypatch):
    monkeypatch.setenv("DYNAMIC_BACKEND_DISABLE", "Other_*, acme_*")
    with loader.Runtime(dynamic_backends_path=str(acme)) as runtime:
        entry = entry_for(runtime.report, acme / "Acme_Npu_backend.so.2")
    assert entry["reason"] == "filtered-out"
    assert entry["detail"] == "excluded by DYNAMIC_BACKEND_DISABLE pattern 'acme_*' (matched 'Acme_Npu')"


def test_an_unselected_entry_names_the_variable_and_the_keys_tried(acme, monkeypatch):
    monkeypatch.setenv("DYNAMIC_BACKEND_SELECT", "AcmeNpu")
    with loader.Runtime(dynamic_backends_path=str(acme)) as runtime:
        entry = entry_for(runtime.report, acme / "Reference_CpuRef_backend.so")
    assert entry["reason"] == "filtered-out"
    assert entry["detail"].startswith("not selected by DYNAMIC_BACKEND_SELECT='AcmeNpu'")
    assert "'Reference_CpuRef'" in entry["detail"] and "not the backend id" in entry["detail"]


def test_a_filtered_entry_names_the_runtime_argument(acme, monkeypatch):
    monkeypatch.setenv("DYNAMIC_BACKEND_SELECT", "*")
    with loader.Runtime(dynamic_backends_path=str(acme), disable=["Reference_*"]) as runtime:
        entry = entry_for(runtime.report, acme / "Reference_CpuRef_backend.so")
    assert entry["detail"].startswith("excluded by Runtime(disable=...) pattern 'Reference_*'")


def test_a_select_pattern_that_matches_nothing_is_a_warning(acme, monkeypatch, caplog):
    monkeypatch.setenv("DYNAMIC_BACKEND_SELECT", "AcmeNpu,Reference_*")
    with caplog.at_level(logging.WARNING, logger="loader"):
        with loader.Runtime(dynamic_backends_path=str(acme)) as runtime:
            filters = runtime.report["filters"]
    [warning] = [r.getMessage() for r in caplog.records if "matches no backend" in r.getMessage()]
    assert "DYNAMIC_BACKEND_SELECT pattern 'AcmeNpu'" in warning and "backend id" in warning
    assert filters["unmatched_select"] == ["AcmeNpu"]


def test_the_report_shows_the_active_filters(acme, monkeypatch):
    monkeypatch.setenv("DYNAMIC_BACKEND_SELECT", "Acme_*, Reference_*")
    with loader.Runtime(dynamic_backends_path=str(acme), disable="*_Old") as runtime:
        assert runtime.report["filters"] == {
            "select": ["Acme_*", "Reference_*"], "select_source": "DYNAMIC_BACKEND_SELECT",
            "disable": ["*_Old"], "disable_source": "Runtime(disable=...)",
            "unmatched_select": []}
    with loader.Runtime(dynamic_backends_path=str(acme), select="", disable=()) as runtime:
        assert runtime.report["filters"] == {"select": [], "select_source": None, "disable": [],
                                             "disable_source": None, "unmatched_select": []}


def test_scan_shows_the_filters_and_the_pattern_that_matched_nothing(acme):
    import os
    env = {k: v for k, v in os.environ.items() if not k.startswith("DYNAMIC_BACKEND_")}
    env["DYNAMIC_BACKEND_SELECT"] = "acmenpu"
    result = run_module("scan", "--path", str(acme), env=env)
    assert "Filters: DYNAMIC_BACKEND_SELECT=acmenpu" in result.stdout
    assert "pattern 'acmenpu' matches no backend file" in result.stdout
    report = json.loads(run_module("scan", "--json", "--path", str(acme), env=env).stdout)
    assert report["filters"]["unmatched_select"] == ["acmenpu"]


def test_a_pattern_of_the_wrong_type_is_a_type_error(acme):
    with pytest.raises(TypeError, match="select"):
        loader.Runtime(dynamic_backends_path=str(acme), select=[1])
