"""``backend-conformance``: validate a prebuilt backend shared object.

    backend-conformance run --backend FILE.so [--json F|-] [--junit-xml F|-] [-k EXPR]
                            [--expectations F [--exit-zero-on-expected]] [--timeout S]
                            [--in-process] [--backend-host MODE] [-q] [--quick] [--seed N]
    backend-conformance list [-k EXPR]
    backend-conformance info --backend FILE.so [--json]
    backend-conformance init --vendor V --name N DIR
    backend-conformance --version

Exit codes (the README has the same table):

    0    conformant (list, info, init: success)
    1    not conformant: a case ended FAIL, CRASH, TIMEOUT or ERROR, or cases were blocked
         (info: the backend could not be inspected)
    2    usage error: a bad option, value, path or expectations file; nothing was run
    3    internal error of the kit, or a report could not be written
    4    partial run: the selected cases passed, but not every case ran (-k): no verdict
    130  interrupted (Ctrl-C): the reports asked for are written, marked interrupted
"""
import argparse
import json
import os
import signal
import sys
import traceback
from typing import List, Optional

from conformance import report, runner, scaffold
from conformance.expectations import Expectations, ExpectationsError

EXIT_CONFORMANT = 0
EXIT_NOT_CONFORMANT = 1
EXIT_USAGE = 2
EXIT_INTERNAL = 3
EXIT_PARTIAL = 4
EXIT_INTERRUPTED = 130

STDOUT = "-"


class UsageError(Exception):
    """A bad option value found after parsing (a path, a file's contents)."""


class ReportWriteError(Exception):
    """A report could not be written after the run."""


def _seconds(text: str) -> float:
    """argparse type of --timeout."""
    try:
        return runner.parse_seconds(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _check_output(option: str, path: Optional[str]):
    """Refuse, before anything runs, a report path that cannot be written. Missing directories
    are never created."""
    if path is None or path == STDOUT:
        return
    if os.path.isdir(path):
        raise UsageError(f"{option} {path}: is a directory; give a file name")
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise UsageError(f"{option} {path}: directory {directory} does not exist (the kit does "
                         f"not create it)")
    if not os.access(directory, os.W_OK | os.X_OK) or (os.path.exists(path)
                                                     and not os.access(path, os.W_OK)):
        raise UsageError(f"{option} {path}: not writable")


def _write_output(option: str, path: str, data: bytes):
    if path == STDOUT:
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
        return
    try:
        report.write(path, data)
    except OSError as error:
        raise ReportWriteError(f"{option} {path}: cannot write the report: "
                               f"{error.strerror or error}") from None


def _backend_file(path):
    try:
        return runner.check_backend_file(path)
    except runner.BackendFileError as error:
        raise UsageError(f"--backend {error}") from None


def _run(parser, args) -> int:
    backend = _backend_file(args.backend)
    selected = runner.select_cases(args.k, quick=args.quick)
    if not selected:
        raise UsageError(f"-k {args.k!r} selects no case (see: backend-conformance list)")
    if args.json == STDOUT and args.junit_xml == STDOUT:
        raise UsageError("--json - and --junit-xml - cannot both go to standard output")
    _check_output("--json", args.json)
    _check_output("--junit-xml", args.junit_xml)
    expectations = None
    if args.expectations:
        try:
            expectations = Expectations.load(args.expectations, [c.id for c in runner.select_cases(None)])
        except ExpectationsError as error:
            raise UsageError(str(error)) from None
    elif args.exit_zero_on_expected:
        raise UsageError("--exit-zero-on-expected needs --expectations")
    # With a report on standard output, everything meant for people goes to standard error.
    terminal = sys.stderr if STDOUT in (args.json, args.junit_xml) else sys.stdout
    progress = report.Progress(sys.stderr, quiet=args.quiet)
    run = runner.Controller(backend, args.timeout, progress, args.in_process, seed=args.seed,
                            quick=args.quick, backend_host=args.backend_host).run(selected, args.k)
    if run.interrupted is not None:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not lose the reports
    if args.json:
        document = report.summary(run, expectations, options=_options(args))
        _write_output("--json", args.json, json.dumps(document, indent=2).encode() + b"\n")
    if args.junit_xml:
        _write_output("--junit-xml", args.junit_xml, report.junit_xml(run))
    terminal.write(report.terminal_summary(run, expectations,
                                           report.line_width(terminal, len(run.selected))))
    terminal.flush()
    return _exit_code(run, expectations if args.exit_zero_on_expected else None)


def _exit_code(run, excusing_expectations) -> int:
    """The table at the top of this module."""
    if run.interrupted is not None:
        return EXIT_INTERRUPTED
    if run.failed and not (excusing_expectations is not None
                           and excusing_expectations.only_expected_failures(run)):
        return EXIT_NOT_CONFORMANT
    return EXIT_PARTIAL if run.partial else EXIT_CONFORMANT


def _options(args) -> dict:
    """The options of a run, as given, for the JSON summary."""
    return {"k": args.k, "timeout": args.timeout, "expectations": args.expectations,
            "exit_zero_on_expected": args.exit_zero_on_expected, "in_process": args.in_process,
            "backend_host": args.backend_host, "json": args.json,
            "junit_xml": args.junit_xml}


def _list(parser, args) -> int:
    from conformance.requirements import REQUIREMENTS
    for case in runner.select_cases(args.k):
        print(f"{case.id:<36} {case.requirement:<8} {REQUIREMENTS[case.requirement].title}")
    return 0


def _info(parser, args) -> int:
    backend = _backend_file(args.backend)
    from conformance.cases import INFO
    run = runner.Controller(backend, args.timeout).run([INFO])
    [result] = run.results
    if result.status != "PASS":
        print(f"cannot inspect {backend}: {result.status}: {result.message}", file=sys.stderr)
        return 1
    info = json.loads(result.message)
    if args.json:
        print(json.dumps(info, indent=2))
        return 0
    canonical = os.path.realpath(backend)
    print(f"file          {backend}" + (f" -> {canonical}" if canonical != backend else ""))
    print(f"id            {info['id']}")
    print(f"version       {info['version']}")
    print(f"features      {', '.join(k for k, v in info['features'].items() if v) or 'none'}")
    print(f"capabilities  {', '.join(f'{k}={v}' for k, v in info['capabilities'].items()) or 'none'}")
    print(f"layers        {', '.join(info['layers']) or 'none of the kit cases'}")
    return 0


def _init(parser, args) -> int:
    try:
        written = scaffold.write(args.directory, args.vendor, args.name)
    except ValueError as error:
        raise UsageError(str(error)) from None
    for path in written:
        print(f"wrote {path}")
    library = scaffold.library_name(args.vendor, args.name)
    print(f"\nnext:  make -C {args.directory} && backend-conformance run --backend "
          f"{os.path.join(args.directory, library)}")
    return 0


class _Version(argparse.Action):
    """--version: the kit's version and the Backend API it implements. Looked up only when
    asked (the kit's version comes from the installed distribution's metadata)."""

    def __init__(self, option_strings, dest, **kwargs):
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS,
                         help="print the kit's version and the Backend API version, and exit")

    def __call__(self, parser, namespace, values, option_string=None):
        import conformance
        import loader
        print(f"{parser.prog} {conformance.version()} (Backend API {loader.BACKEND_API_VERSION})")
        parser.exit(0)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="backend-conformance", description="Validate a prebuilt dynamic backend.",
        epilog="exit codes: 0 conformant, 1 not conformant, 2 usage error, 3 internal error, "
               "4 partial run (-k) whose cases passed, 130 interrupted")
    parser.add_argument("--version", action=_Version)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    run = commands.add_parser("run", help="run the conformance cases against a backend")
    run.add_argument("--backend", required=True, metavar="FILE.so")
    run.add_argument("--json", metavar="FILE", help="write the JSON summary to FILE ('-': "
                     "standard output, and the summary for people goes to standard error)")
    run.add_argument("--junit-xml", metavar="FILE", help="write JUnit XML to FILE ('-': standard "
                     "output)")
    run.add_argument("-k", metavar="EXPR", help="only cases whose id contains one of these "
                     "comma-separated substrings or globs ('not X' excludes; a whole case id "
                     "selects that case alone)")
    run.add_argument("--expectations", metavar="FILE", help="YAML file of expected failures")
    run.add_argument("--exit-zero-on-expected", action="store_true",
                     help="exit 0 when every failure is listed in --expectations (the verdict "
                          "stays not-conformant)")
    run.add_argument("--timeout", type=_seconds, default=runner.DEFAULT_TIMEOUT, metavar="S",
                     help=f"seconds a case may take before it is a TIMEOUT "
                          f"(default {runner.DEFAULT_TIMEOUT:g})")
    run.add_argument("--in-process", action="store_true",
                     help="run the cases in this process, without isolation or timeout, to debug "
                          "one under gdb, valgrind or ASan (a crash ends the kit)")
    run.add_argument("--backend-host", choices=("in-process", "process"), default="in-process",
                     help="process: run every backend call in a backend host process (as "
                          "loader.Runtime(backend_host='process') does), where a crash or a hang "
                          "ends the case and the run goes on without a new worker")
    run.add_argument("-q", "--quiet", action="store_true", help="no progress output")
    run.add_argument("--quick", action="store_true",
                     help="the quick tier: the fixed cases only, without the raw-interface, "
                          "generated, guarded-memory, resource and speed cases")
    run.add_argument("--seed", type=int, default=None, metavar="N",
                     help="seed of the generated cases' values (default: the kit's fixed seed; "
                          "the report and every reproduce command give it)")
    run.set_defaults(handler=_run)

    listing = commands.add_parser("list", help="list the case ids and their requirements")
    listing.add_argument("-k", metavar="EXPR")
    listing.set_defaults(handler=_list)

    info = commands.add_parser("info", help="id, version and claimed layers of a backend")
    info.add_argument("--backend", required=True, metavar="FILE.so")
    info.add_argument("--json", action="store_true")
    info.add_argument("--timeout", type=_seconds, default=runner.DEFAULT_TIMEOUT, metavar="S")
    info.set_defaults(handler=_info)

    init = commands.add_parser("init", help="write a minimal backend and Makefile that pass")
    rule = (f"{scaffold.FIELD_RULE} only: the library is <vendor>_<name>_backend.so, the backend "
            f"id <vendor><name>")
    init.add_argument("--vendor", required=True, help=f"the vendor; {rule}")
    init.add_argument("--name", required=True, help=f"the backend's name; {rule}")
    init.add_argument("directory", metavar="DIR")
    init.set_defaults(handler=_init)
    return parser


def main(argv: Optional[List[str]] = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)  # exits 2 on a usage error
    try:
        return args.handler(parser, args)
    except UsageError as error:
        print(f"{parser.prog}: error: {error}", file=sys.stderr)
        return EXIT_USAGE
    except ReportWriteError as error:
        print(f"{parser.prog}: error: {error}", file=sys.stderr)
        return EXIT_INTERNAL
    except BrokenPipeError:
        sys.stderr.close()
        return 0
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except Exception:
        print(f"{parser.prog}: internal error (a bug in the kit; please report it with this "
              f"trace):\n{traceback.format_exc()}", file=sys.stderr, end="")
        return EXIT_INTERNAL
