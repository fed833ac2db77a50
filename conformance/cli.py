"""``backend-conformance``: validate a prebuilt backend shared object.

    backend-conformance run --backend FILE.so [--json F] [--junit-xml F] [-k EXPR]
                            [--expectations F [--exit-zero-on-expected]] [--timeout S] [-q]
    backend-conformance list [-k EXPR]
    backend-conformance info --backend FILE.so
    backend-conformance init --vendor V --name N DIR

Exit codes: 0 conformant (or, for list/info/init, success), 1 not conformant, 2 usage error.
"""
import argparse
import json
import os
import sys
from typing import List, Optional

from conformance import report, runner
from conformance.expectations import Expectations, ExpectationsError


def _backend_file(parser, path):
    try:
        return runner.check_backend_file(path)
    except runner.BackendFileError as error:
        parser.error(f"--backend {error}")


def _run(parser, args) -> int:
    backend = _backend_file(parser, args.backend)
    selected = runner.select_cases(args.k)
    if not selected:
        parser.error(f"-k {args.k!r} selects no case (see: backend-conformance list)")
    expectations = None
    if args.expectations:
        try:
            expectations = Expectations.load(args.expectations, [c.id for c in runner.select_cases(None)])
        except ExpectationsError as error:
            parser.error(str(error))
    elif args.exit_zero_on_expected:
        parser.error("--exit-zero-on-expected needs --expectations")
    progress = report.Progress(sys.stderr, quiet=args.quiet)
    run = runner.Controller(backend, args.timeout, progress).run(selected)
    if args.json:
        report.write(args.json, json.dumps(report.summary(run, expectations), indent=2).encode() + b"\n")
    if args.junit_xml:
        report.write(args.junit_xml, report.junit_xml(run))
    sys.stdout.write(report.terminal_summary(run, expectations))
    if run.conformant:
        return 0
    if args.exit_zero_on_expected and expectations.only_expected_failures(run):
        return 0
    return 1


def _list(parser, args) -> int:
    from conformance.requirements import REQUIREMENTS
    for case in runner.select_cases(args.k):
        print(f"{case.id:<36} {case.requirement:<8} {REQUIREMENTS[case.requirement].title}")
    return 0


def _info(parser, args) -> int:
    backend = _backend_file(parser, args.backend)
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
    from conformance import scaffold
    try:
        written = scaffold.write(args.directory, args.vendor, args.name)
    except (ValueError, FileExistsError) as error:
        parser.error(str(error))
    for path in written:
        print(f"wrote {path}")
    library = scaffold.library_name(args.vendor, args.name)
    print(f"\nnext:  make -C {args.directory} && backend-conformance run --backend "
          f"{os.path.join(args.directory, library)}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="backend-conformance",
                                     description="Validate a prebuilt dynamic backend.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    run = commands.add_parser("run", help="run the conformance cases against a backend")
    run.add_argument("--backend", required=True, metavar="FILE.so")
    run.add_argument("--json", metavar="FILE", help="write the JSON summary to FILE")
    run.add_argument("--junit-xml", metavar="FILE", help="write JUnit XML to FILE")
    run.add_argument("-k", metavar="EXPR", help="only cases whose id contains one of these "
                     "comma-separated substrings or globs ('not X' excludes)")
    run.add_argument("--expectations", metavar="FILE", help="YAML file of expected failures")
    run.add_argument("--exit-zero-on-expected", action="store_true",
                     help="exit 0 when every failure is listed in --expectations (the verdict "
                          "stays not-conformant)")
    run.add_argument("--timeout", type=float, default=runner.DEFAULT_TIMEOUT, metavar="S",
                     help=f"seconds a case may take before it is a TIMEOUT "
                          f"(default {runner.DEFAULT_TIMEOUT:g})")
    run.add_argument("-q", "--quiet", action="store_true", help="no progress output")
    run.set_defaults(handler=_run)

    listing = commands.add_parser("list", help="list the case ids and their requirements")
    listing.add_argument("-k", metavar="EXPR")
    listing.set_defaults(handler=_list)

    info = commands.add_parser("info", help="id, version and claimed layers of a backend")
    info.add_argument("--backend", required=True, metavar="FILE.so")
    info.add_argument("--json", action="store_true")
    info.add_argument("--timeout", type=float, default=runner.DEFAULT_TIMEOUT, metavar="S")
    info.set_defaults(handler=_info)

    init = commands.add_parser("init", help="write a minimal backend and Makefile that pass")
    init.add_argument("--vendor", required=True)
    init.add_argument("--name", required=True)
    init.add_argument("directory", metavar="DIR")
    init.set_defaults(handler=_init)
    return parser


def main(argv: Optional[List[str]] = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "timeout", 1) <= 0:
        parser.error("--timeout must be positive")
    try:
        return args.handler(parser, args)
    except BrokenPipeError:
        sys.stderr.close()
        return 0
    except KeyboardInterrupt:
        return 130
