"""``backend-loader``: scan search paths and check file names from the command line."""
import argparse
import json
import logging
import os
import sys
from typing import List, Optional

from loader import isolation
from loader._core import is_valid_backend_filename
from loader.runtime import Runtime


def _scan(args) -> int:
    with Runtime(dynamic_backends_path=args.path,
                 probe="isolated" if args.isolated else "in-process",
                 probe_timeout=args.probe_timeout,
                 strict_permissions=args.strict_permissions) as runtime:
        report = runtime.report
    if args.json:
        json.dump(report, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(format_report(report))
    return 0


def format_report(report: dict) -> str:
    """The scan report as a readable table: one block per search path, one row per entry."""
    lines = [f"Backend API {report['api_version']}"]
    if not report["search_paths"]:
        lines.append("No search paths: dynamic loading is disabled.")
    by_directory = {}
    for entry in report["entries"]:
        by_directory.setdefault(os.path.dirname(entry["file"]), []).append(entry)
    for search_path in report["search_paths"]:
        lines.append("")
        if not search_path["valid"]:
            lines.append(f"{search_path['path'] or repr('')}  "
                         f"[{search_path['reason']}: {search_path['detail']}]")
            continue
        lines.append(search_path["path"])
        # Entries were named os.path.join(search path, name): group them the same way.
        entries = by_directory.get(os.path.dirname(os.path.join(search_path["path"], "x")), [])
        if not entries:
            lines.append("  (empty)")
            continue
        rows = [(os.path.basename(e["file"]), e["status"], _outcome(e)) for e in entries]
        width = max(len(r[0]) for r in rows)
        lines.extend(f"  {name:<{width}}  {status:<10}  {outcome}" for name, status, outcome in rows)
    registered = report["registered"]
    lines.append("")
    lines.append(f"Registered: {', '.join(registered) if registered else 'none'}")
    return "\n".join(lines) + "\n"


def _outcome(entry: dict) -> str:
    if entry["status"] == "registered":
        return f"{entry['backend_id']} (Backend API {entry['version']})"
    return f"{entry['reason']}: {entry['detail']}"


def _check_name(args) -> int:
    all_valid = True
    for name in args.names:
        valid = is_valid_backend_filename(name)
        all_valid = all_valid and valid
        verdict = "valid" if valid else "invalid"
        print(f"{verdict}\t{name}" if args.with_names else verdict)
    return 0 if all_valid else 1


def _positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not positive")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="backend-loader",
        description="Find, check and load dynamic backends, and explain what was skipped.")
    parser.add_argument("-v", "--verbose", action="count", default=0,
                        help="log skipped files (-v) and registrations (-vv) to stderr")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    scan = commands.add_parser(
        "scan", help="scan the search paths and report every entry",
        description="Run discovery and loading exactly as a Runtime would and report every "
                    "directory entry of every search path.")
    scan.add_argument("--path", metavar="DIR",
                      help="scan only DIR (replaces DYNAMIC_BACKEND_PATHS and the compiled-in list)")
    scan.add_argument("--json", action="store_true", help="print the report as JSON")
    scan.add_argument("--isolated", action="store_true",
                      help="load each candidate in a child process first; skip those that crash, "
                           "exit or hang there (probe-crashed, probe-timeout)")
    scan.add_argument("--probe-timeout", type=_positive, default=isolation.DEFAULT_TIMEOUT,
                      metavar="S", help="seconds a probe may take (default %(default)g)")
    scan.add_argument("--strict-permissions", action="store_true",
                      help="refuse directories and files writable by others or owned by a third "
                           "user (untrusted-permissions)")
    scan.set_defaults(handler=_scan)

    check = commands.add_parser(
        "check-name", help="check backend file names against the naming rule",
        description="Print 'valid' or 'invalid' for each NAME; exit 1 if any is invalid.")
    check.add_argument("names", nargs="+", metavar="NAME")
    check.add_argument("--with-names", action="store_true",
                       help="print each verdict followed by a tab and the name")
    check.set_defaults(handler=_check_name)
    return parser


def main(argv: Optional[List[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    level = {0: logging.ERROR, 1: logging.WARNING}.get(args.verbose, logging.INFO)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(levelname)s: %(message)s"))
    logger = logging.getLogger("loader")
    logger.addHandler(handler)
    logger.setLevel(level)
    logger.propagate = False
    try:
        return args.handler(args)
    except BrokenPipeError:  # e.g. piped into `head`: not an error of ours
        sys.stderr.close()
        return 0
