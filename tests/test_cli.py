"""Contract section 7: the backend-loader command."""
import json
import os
import subprocess

import pytest

import reference_backend
from helpers import install_mock

ENV_WITHOUT_PATHS = {k: v for k, v in os.environ.items() if k != "DYNAMIC_BACKEND_PATHS"}


def run(*args, env=None):
    return subprocess.run(["backend-loader", *args], capture_output=True, text=True, timeout=60,
                          env=ENV_WITHOUT_PATHS if env is None else env)


def test_scan_of_the_default_path_registers_the_reference_backend():
    result = run("scan")
    assert result.returncode == 0
    assert reference_backend.LIBRARY_DIR in result.stdout
    assert "Reference_CpuRef_backend.so" in result.stdout
    assert "Registered: CpuRef" in result.stdout


def test_scan_json_of_the_default_path():
    report = json.loads(run("scan", "--json").stdout)
    assert report["registered"] == ["CpuRef"]
    assert report["search_paths"][0]["path"] == reference_backend.LIBRARY_DIR


def test_scan_uses_the_environment(backend_dir):
    install_mock("alpha", backend_dir)
    report = json.loads(run("scan", "--json",
                            env={**ENV_WITHOUT_PATHS, "DYNAMIC_BACKEND_PATHS": str(backend_dir)}).stdout)
    assert report["registered"] == ["MockAlpha"]


def test_scan_table_explains_each_skip(backend_dir):
    install_mock("null_id", backend_dir)
    result = run("scan", "--path", str(backend_dir))
    line = next(l for l in result.stdout.splitlines() if "Mock_NullId_backend.so" in l)
    assert "skipped" in line and "invalid-backend-id" in line and "NULL" in line
    assert "Registered: none" in result.stdout


def test_scan_of_an_invalid_path_still_succeeds():
    result = run("scan", "--path", "/does/not/exist", "--json")
    assert result.returncode == 0
    report = json.loads(result.stdout)
    assert report["search_paths"] == [{"path": "/does/not/exist", "valid": False,
                                       "reason": "not-found", "detail": "no such directory",
                                       "source": "override"}]
    assert report["entries"] == [] and report["registered"] == []


def test_scan_is_quiet_on_stderr_unless_asked(backend_dir):
    install_mock("null_id", backend_dir)
    assert run("scan", "--path", str(backend_dir)).stderr == ""
    assert "invalid-backend-id" in run("-v", "scan", "--path", str(backend_dir)).stderr


@pytest.mark.parametrize("args", [[], ["scan", "--bogus"], ["frobnicate"], ["check-name"],
                                  ["scan", "--path"]])
def test_usage_errors_exit_2(args):
    result = run(*args)
    assert result.returncode == 2
    assert "usage" in result.stderr


def test_check_name_single():
    assert (run("check-name", "Arm_GpuAcc_backend.so").stdout, run("check-name", "x").stdout) == \
        ("valid\n", "invalid\n")
    assert run("check-name", "Arm_GpuAcc_backend.so").returncode == 0
    assert run("check-name", "x").returncode == 1
