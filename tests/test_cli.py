"""The backend-loader command (docs/report.md)."""
import base64
import json
import os
import signal
import subprocess

import pytest

import reference_backend
from helpers import install_mock, install_reference, run_module

ENV_WITHOUT_PATHS = {k: v for k, v in os.environ.items() if not k.startswith("DYNAMIC_BACKEND_")}


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


@pytest.mark.parametrize("make, reason", [
    (lambda tmp: "/does/not/exist", "not-found (no such directory)"),
    (lambda tmp: str(tmp / "file"), "not-a-directory"),
    (lambda tmp: "", "empty"),
    (lambda tmp: "missing/relative", "not-found"),
])
def test_a_path_named_on_the_command_line_that_cannot_be_scanned_is_a_usage_error(
        tmp_path, make, reason):
    (tmp_path / "file").write_text("")
    path = make(tmp_path)
    for command in (["scan"], ["scan", "--json"], ["plan", "net.json"]):
        result = run_module(*command, "--path", path, cwd=str(tmp_path))
        assert result.returncode == 2, (command, result.stderr)
        assert f"--path {path or repr('')}: {reason}" in result.stderr
        assert result.stdout == ""


def test_a_relative_path_on_the_command_line_is_taken_from_the_current_directory(tmp_path):
    (tmp_path / "backends").mkdir()
    install_reference(tmp_path / "backends")
    result = run_module("scan", "--json", "--path", "backends", cwd=str(tmp_path))
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["search_paths"][0]["path"] == str(tmp_path / "backends")
    assert report["registered"] == ["CpuRef"]
    dot = json.loads(run_module("scan", "--json", "--path", ".",
                                cwd=str(tmp_path / "backends")).stdout)
    assert dot["registered"] == ["CpuRef"]


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


# -- verbosity, version --------------------------------------------------------------------------

def test_verbose_is_accepted_after_the_subcommand_too(backend_dir):
    install_mock("null_id", backend_dir)
    for args in (["scan", "-v"], ["-v", "scan"], ["scan", "--verbose"]):
        result = run(*args, "--path", str(backend_dir))
        assert result.returncode == 0, result.stderr
        assert "invalid-backend-id" in result.stderr
    assert "loading" not in run("scan", "-vv", "--path", str(backend_dir)).stderr
    assert "loading" in run("-v", "scan", "-vv", "--path", str(backend_dir)).stderr  # they add up


def test_version_names_the_package_and_the_backend_api():
    import loader
    result = run("--version")
    assert result.returncode == 0
    assert result.stdout.strip() == \
        f"backend-loader {loader.__version__} (Backend API {loader.BACKEND_API_VERSION})"


# -- a backend that crashes the scan ----------------------------------------------------------------

def test_a_crash_while_loading_names_the_file_and_points_to_isolated(backend_dir):
    install_reference(backend_dir, "A_Ref_backend.so")
    crashing = install_mock("crash_at_load", backend_dir)
    result = run("scan", "-vvv", "--path", str(backend_dir))
    assert result.returncode == -signal.SIGSEGV
    lines = result.stderr.splitlines()
    # the log went out as the scan went: the registration before the crash, then the file
    assert any("registered backend 'CpuRef'" in line for line in lines)
    assert f"loader DEBUG: loading {crashing}" in lines
    [note] = [line for line in lines if "crashed" in line]
    assert note.startswith(f"backend-loader: crashed (SIGSEGV) while loading {crashing} (in dlopen")
    assert "--isolated" in note and "DYNAMIC_BACKEND_PROBE=isolated" in note
    # and --isolated does what the note says
    rerun = run("scan", "--isolated", "--json", "--path", str(backend_dir))
    assert rerun.returncode == 0
    assert json.loads(rerun.stdout)["registered"] == ["CpuRef"]


def test_scan_help_points_to_isolated_for_crashing_backends():
    help_text = " ".join(run("scan", "--help").stdout.split())
    assert "crashes the scan" in help_text and "--isolated" in help_text


# -- summary, candidates only, required backends ----------------------------------------------------

@pytest.fixture
def mixed_dir(backend_dir):
    install_reference(backend_dir)
    install_mock("major_too_new", backend_dir)
    for name in ("README", "libfoo.so", "notes.txt"):
        (backend_dir / name).write_text("x")
    return backend_dir


def test_summary_is_one_line_per_candidate_and_counts(mixed_dir):
    result = run("scan", "--summary", "--path", str(mixed_dir))
    assert result.returncode == 0
    lines = result.stdout.splitlines()
    assert [l.split()[:2] for l in lines if l.startswith(("registered", "skipped"))] == [
        ["skipped", "incompatible-version"], ["registered", "CpuRef"]]
    assert "README" not in result.stdout
    assert "2 candidates in 1 search path: 1 registered, 1 skipped; 3 other entries not named " \
           "like a backend" in lines


def test_candidates_only_omits_other_names_and_counts_them(mixed_dir):
    report = json.loads(run("scan", "--json", "--candidates-only", "--path", str(mixed_dir)).stdout)
    assert [os.path.basename(e["file"]) for e in report["entries"]] == [
        "Mock_MajorTooNew_backend.so", "Reference_CpuRef_backend.so"]
    assert report["omitted"] == {"invalid-filename": 3}
    table = run("scan", "--candidates-only", "--path", str(mixed_dir)).stdout
    assert "README" not in table and "3 other entries not named like a backend" in table


def test_summary_and_json_do_not_go_together():
    assert run("scan", "--summary", "--json").returncode == 2


def test_require_exits_1_naming_why_each_required_backend_is_missing(mixed_dir):
    ok = run("scan", "--require", "CpuRef", "--path", str(mixed_dir))
    assert ok.returncode == 0 and ok.stderr == ""
    result = run("scan", "--require", "CpuRef", "--require", "MockMajorTooNew", "--require",
                 "AcmeNpu", "--path", str(mixed_dir))
    assert result.returncode == 1
    assert "Registered: CpuRef" in result.stdout  # the report is still printed
    errors = result.stderr.splitlines()
    assert len(errors) == 2
    assert "'MockMajorTooNew'" in errors[0] and "incompatible-version" in errors[0]
    assert "'AcmeNpu'" in errors[1] and "no file on the search paths" in errors[1]
    listed = run("scan", "--require", "CpuRef,MockMajorTooNew", "--require", "AcmeNpu",
                 "--path", str(mixed_dir))
    assert listed.returncode == 1 and listed.stderr == result.stderr


# -- probe options ----------------------------------------------------------------------------------

@pytest.mark.parametrize("value", ["inf", "nan", "-inf", "0", "-1", "soon"])
def test_a_bad_probe_timeout_is_a_usage_error(value):
    result = run("scan", "--isolated", "--probe-timeout", value)
    assert result.returncode == 2
    assert "usage" in result.stderr and "Traceback" not in result.stderr


def test_probe_timeout_implies_isolated(backend_dir):
    install_mock("crash_at_load", backend_dir)
    result = run("scan", "--probe-timeout", "2", "--json", "--path", str(backend_dir))
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["entries"][0]["reason"] == "probe-crashed"
    assert report["settings"]["probe"] == "isolated" and report["settings"]["probe_timeout"] == 2


# -- search paths ------------------------------------------------------------------------------------

def test_a_colon_separated_path_says_path_takes_one_directory(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir(), b.mkdir()
    result = run("scan", "--json", "--path", f"{a}:{b}")
    assert result.returncode == 2
    assert "one directory" in result.stderr and "DYNAMIC_BACKEND_PATHS" in result.stderr
    assert str(a) in result.stderr and str(b) in result.stderr
    plain = run("scan", "--json", "--path", f"{a}:/does/not/exist")
    assert plain.returncode == 2 and "(no such directory)" in plain.stderr
    assert "one directory" not in plain.stderr


def test_scan_shows_where_each_path_came_from(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir(), b.mkdir()
    env = {**ENV_WITHOUT_PATHS, "DYNAMIC_BACKEND_PATHS": str(b), "DYNAMIC_BACKEND_ADD_PATHS": str(a)}
    result = run("scan", env=env)
    assert f"{a}  (environment-add)" in result.stdout
    assert f"{b}  (environment)" in result.stdout


def test_json_is_strict_utf8_even_for_non_utf8_names(tmp_path):
    directory = os.path.join(os.fsencode(str(tmp_path)), b"\xe9t\xe9")
    os.mkdir(directory)
    with open(os.path.join(directory, b"Arm_\xff_backend.so"), "wb") as f:
        f.write(b"x")
    result = subprocess.run(["backend-loader", "scan", "--json", "--path", directory],
                            capture_output=True, timeout=60, env=ENV_WITHOUT_PATHS)
    assert result.returncode == 0
    report = json.loads(result.stdout.decode("utf-8", "strict"))
    [entry] = report["entries"]
    entry["file"].encode("utf-8")  # no lone surrogate
    assert base64.b64decode(entry["file_base64"]) == os.path.join(directory, b"Arm_\xff_backend.so")
    table = subprocess.run(["backend-loader", "scan", "--path", directory], capture_output=True,
                           timeout=60, env=ENV_WITHOUT_PATHS)
    assert table.returncode == 0 and b"Arm_\\xff_backend.so" in table.stdout


# -- check-name -------------------------------------------------------------------------------------

def test_check_name_checks_a_path_on_its_last_component():
    result = run("check-name", "--with-names", "/opt/Arm_GpuAcc_backend.so", "/opt_x/lib/x.so")
    assert result.stdout == "valid\t/opt/Arm_GpuAcc_backend.so\ninvalid\t/opt_x/lib/x.so\n"
    assert result.returncode == 1
    assert "last component" in " ".join(run("check-name", "--help").stdout.split())


@pytest.mark.parametrize("name, words", [
    ("x", "does not contain '_backend.so'"),
    ("Arm_GpuAcc_Backend.so", "spelled exactly"),
    ("Arm-GpuAcc_backend.so", "before '_backend.so' must be <vendor>_<name>"),
    ("Arm_Gpu_Acc_backend.so", "found 3"),
    ("_GpuAcc_backend.so", "vendor part is empty"),
    ("Arm_Gpu.Acc_backend.so", "name part 'Gpu.Acc' contains '.'"),
    ("Arm_GpuAcc_backend.so.1a", "version '.1a'"),
    ("Arm_GpuAcc_backend.so.", "version '.'"),
    ("", "empty name"),
])
def test_check_name_says_why_a_name_is_invalid(name, words):
    result = run("check-name", name)
    assert result.stdout == "invalid\n"  # stdout keeps its one word per name
    assert result.stderr.startswith(f"backend-loader: invalid: {name}: ")
    assert words in result.stderr
    assert run("check-name", "--quiet", name).stderr == ""


def test_explanations_agree_with_the_rule():
    from loader.cli import explain_invalid_name
    import loader
    samples = [b"A_B_backend.so", b"a_b_backend.so.1.2", b"A__backend.so", b"A_B_backend.so.1..2",
               b"A_B_backend.so1", b"AB_backend.so", b"A_B_C_backend.so", b"A_B_backend.sox",
               b"\xff_B_backend.so", b"A_B_backend.so_backend.so"]
    for name in samples:
        if not loader.is_valid_backend_filename(name):
            assert "does not match the rule" not in explain_invalid_name(name), name


def test_check_name_reads_names_from_stdin():
    result = subprocess.run(["backend-loader", "check-name", "--with-names", "-", "x"],
                            input=b"Arm_GpuAcc_backend.so\n/opt/B_C_backend.so.1\nnope\n",
                            capture_output=True, timeout=60)
    assert result.stdout == (b"valid\tArm_GpuAcc_backend.so\nvalid\t/opt/B_C_backend.so.1\n"
                             b"invalid\tnope\ninvalid\tx\n")
    assert result.returncode == 1


def test_check_name_reads_nul_separated_names_holding_newlines():
    names = [b"Arm_Gpu_backend.so", b"Arm\n_Gpu_backend.so", b"dir\nname/Arm_Npu_backend.so"]
    result = subprocess.run(["backend-loader", "check-name", "-0", "--with-names", "-"],
                            input=b"\0".join(names) + b"\0", capture_output=True, timeout=60)
    assert result.stdout.split(b"\0") == [b"valid\tArm_Gpu_backend.so",
                                          b"invalid\tArm\n_Gpu_backend.so",
                                          b"valid\tdir\nname/Arm_Npu_backend.so", b""]
    assert result.returncode == 1
    assert b"Arm\\n_Gpu_backend.so" in result.stderr  # one line per explanation


def test_a_name_holding_a_newline_is_one_line_of_output():
    result = run("check-name", "--with-names", "A_b_backend.so\nfoo", "Arm\t_Gpu_backend.so")
    assert result.stdout == "invalid\tA_b_backend.so\\nfoo\ninvalid\tArm\\t_Gpu_backend.so\n"


def test_the_scan_listing_shows_a_name_holding_a_newline_on_one_line(tmp_path):
    (tmp_path / "bad\nname_backend.so").write_bytes(b"")
    table = run("scan", "--path", str(tmp_path)).stdout
    assert "  bad\\nname_backend.so  " in table
    assert not any(line.startswith("name_backend.so") for line in table.splitlines())


def test_check_name_on_stdin_skips_blank_lines_and_reads_crlf_line_ends():
    result = subprocess.run(["backend-loader", "check-name", "--with-names", "-"],
                            input=b"Arm_Gpu_backend.so\r\n\r\n\nB_C_backend.so.1\r\nnope\r\n",
                            capture_output=True, timeout=60)
    assert result.stdout == b"valid\tArm_Gpu_backend.so\nvalid\tB_C_backend.so.1\ninvalid\tnope\n"
    assert result.returncode == 1


def test_null_without_stdin_is_a_usage_error():
    result = run("check-name", "-0", "Arm_Gpu_backend.so")
    assert result.returncode == 2 and "'-'" in result.stderr


def test_the_debug_variable_and_verbose_options_the_more_verbose_wins(backend_dir):
    install_mock("null_id", backend_dir)
    install_reference(backend_dir)
    quiet_env = {**ENV_WITHOUT_PATHS, "DYNAMIC_BACKEND_DEBUG": "warning"}
    loud = run("scan", "-vvv", "--path", str(backend_dir), env=quiet_env).stderr
    assert "loader DEBUG: loading" in loud and "registered backend" in loud
    loud_env = {**ENV_WITHOUT_PATHS, "DYNAMIC_BACKEND_DEBUG": "debug"}
    assert "loader DEBUG: loading" in run("scan", "--path", str(backend_dir), env=loud_env).stderr
    warnings = run("scan", "--path", str(backend_dir), env=quiet_env).stderr
    assert "invalid-backend-id" in warnings and "registered backend" not in warnings
