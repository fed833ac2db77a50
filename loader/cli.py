"""``backend-loader``: scan search paths and check file names from the command line."""
import argparse
import json
import logging
import os
import re
import sys
from typing import Iterable, List, Optional

import loader
from loader import environment, timeouts
from loader._core import is_valid_backend_filename
from loader.networks.cli import add_network_commands
from loader.errors import InvalidSearchPathError
from loader.paths import command_line_path, one_line
from loader.reasons import Reason
from loader.runtime import Runtime
from loader.versions import BACKEND_API_VERSION

PROG = "backend-loader"


# -- scan ---------------------------------------------------------------------------------------

def _scan(args) -> int:
    probe = "isolated" if args.isolated or args.probe_timeout is not None else None
    with Runtime(dynamic_backends_path=args.path, probe=probe, probe_timeout=args.probe_timeout,
                 strict_permissions=True if args.strict_permissions else None) as runtime:
        report = runtime.report
        required = [b.strip() for option in args.require or () for b in option.split(",")]
        missing = {backend_id: runtime._why_missing(backend_id)
                   for backend_id in dict.fromkeys(b for b in required if b)
                   if backend_id not in report["registered"]}
    if args.candidates_only:
        report = candidates_only(report)
    if args.json:
        json.dump(report, sys.stdout, indent=2)
        sys.stdout.write("\n")
    elif args.summary:
        sys.stdout.write(format_summary(report))
    else:
        sys.stdout.write(format_report(report))
    sys.stdout.flush()
    for backend_id, why in missing.items():
        sys.stderr.write(f"{PROG}: required backend {backend_id!r} is not registered: {why}\n")
    return 1 if missing else 0


def candidates_only(report: dict) -> dict:
    """The report without the entries whose name is not a backend file name; ``omitted`` counts
    what was left out, by reason."""
    kept = [e for e in report["entries"] if e["reason"] != Reason.INVALID_FILENAME.value]
    return {**report, "entries": kept,
            "omitted": {Reason.INVALID_FILENAME.value: len(report["entries"]) - len(kept)}}


def _counts(report: dict) -> dict:
    entries = report["entries"]
    candidates = [e for e in entries if e["reason"] != Reason.INVALID_FILENAME.value]
    return {
        "candidates": len(candidates),
        "registered": sum(e["status"] == "registered" for e in candidates),
        "skipped": sum(e["status"] != "registered" for e in candidates),
        "other": len(entries) - len(candidates) + report.get("omitted", {}).get(
            Reason.INVALID_FILENAME.value, 0),
        "paths": sum(p["valid"] for p in report["search_paths"]),
        "dropped_paths": sum(not p["valid"] for p in report["search_paths"]),
    }


def _counts_line(report: dict) -> str:
    c = _counts(report)
    line = (f"{c['candidates']} candidate{'s' * (c['candidates'] != 1)} in {c['paths']} search "
            f"path{'s' * (c['paths'] != 1)}: {c['registered']} registered, {c['skipped']} skipped; "
            f"{c['other']} other entr{'ies' if c['other'] != 1 else 'y'} not named like a backend")
    if c["dropped_paths"]:
        line += f"; {c['dropped_paths']} search path{'s' * (c['dropped_paths'] != 1)} dropped"
    return line


def _header(report: dict) -> List[str]:
    lines = [f"Backend API {report['api_version']}"]
    for note in report.get("notes", ()):
        lines.append(f"Note: {note}")
    filters = report.get("filters") or {}
    active = [f"{filters[k + '_source']}={','.join(filters[k])}" for k in ("select", "disable")
              if filters.get(k)]
    if active:
        lines.append("Filters: " + "; ".join(active))
    for pattern in filters.get("unmatched_select", ()):
        lines.append(f"Note: {filters['select_source']} pattern {pattern!r} matches no backend "
                     f"file (patterns match <vendor>_<name> or the file name, not the backend id)")
    settings = report.get("settings") or {}
    if settings.get("probe") == "isolated":
        lines.append(f"Probing: isolated, {settings['probe_timeout']:g} s per backend")
    if settings.get("strict_permissions"):
        lines.append("Strict permissions: on")
    return lines


def format_report(report: dict) -> str:
    """The scan report as a readable table: one block per search path, one row per entry."""
    lines = _header(report)
    if not report["search_paths"]:
        lines.append("No search paths: dynamic loading is disabled.")
    by_directory = {}
    for entry in report["entries"]:
        by_directory.setdefault(os.path.dirname(entry["file"]), []).append(entry)
    omitted = report.get("omitted", {}).get(Reason.INVALID_FILENAME.value)
    for search_path in report["search_paths"]:
        lines.append("")
        source = f"  ({search_path['source']})" if search_path.get("source") else ""
        if not search_path["valid"]:
            lines.append(f"{one_line(search_path['path']) or repr('')}{source}  "
                         f"[{search_path['reason']}: {one_line(search_path['detail'])}]")
            continue
        lines.append(one_line(search_path["path"]) + source)
        # Entries were named os.path.join(search path, name): group them the same way.
        entries = by_directory.get(os.path.dirname(os.path.join(search_path["path"], "x")), [])
        if not entries:
            lines.append("  (no backend files)" if omitted is not None else "  (empty)")
            continue
        rows = [(one_line(os.path.basename(e["file"])), e["status"], one_line(_outcome(e)))
                for e in entries]
        width = max(len(r[0]) for r in rows)
        lines.extend(f"  {name:<{width}}  {status:<10}  {outcome}" for name, status, outcome in rows)
    registered = report["registered"]
    lines.append("")
    if omitted is not None:
        lines.append(_counts_line(report) + " (not listed)")
    lines.append(f"Registered: {', '.join(registered) if registered else 'none'}")
    return "\n".join(lines) + "\n"


def format_summary(report: dict) -> str:
    """One line per candidate backend (registered or skipped), then the counts."""
    lines = _header(report)
    rows = []
    for entry in report["entries"]:
        if entry["reason"] == Reason.INVALID_FILENAME.value:
            continue
        if entry["status"] == "registered":
            rows.append(("registered", f"{entry['backend_id']} {entry['version']}", entry["file"]))
        else:
            rows.append(("skipped", entry["reason"], f"{entry['file']}: {entry['detail']}"))
    width = max((len(r[1]) for r in rows), default=0)
    lines.extend(f"{status:<10}  {what:<{width}}  {one_line(where)}"
                 for status, what, where in rows)
    for search_path in report["search_paths"]:
        if not search_path["valid"]:
            lines.append(f"dropped path  {one_line(search_path['path']) or repr('')}: "
                         f"{search_path['reason']} ({one_line(search_path['detail'])})")
    lines.append(_counts_line(report))
    registered = report["registered"]
    lines.append(f"Registered: {', '.join(registered) if registered else 'none'}")
    return "\n".join(lines) + "\n"


def _outcome(entry: dict) -> str:
    if entry["status"] == "registered":
        deferred = (", deferred: not opened yet, registered from the backend cache"
                    if entry.get("deferred") else "")
        return f"{entry['backend_id']} (Backend API {entry['version']}{deferred})"
    return f"{entry['reason']}: {entry['detail']}"


# -- check-name ---------------------------------------------------------------------------------

_VERSION_SUFFIX = re.compile(rb"(\.[0-9]+)*")
_ALNUM = re.compile(rb"[A-Za-z0-9]+")
_LITERAL = b"_backend.so"


def explain_invalid_name(name: bytes) -> str:
    """Why ``name`` (one file name, not a path) is not a valid backend file name. Only meaningful
    for a name the rule refused; the generic answer is the rule itself."""
    rule = "a backend file name is <vendor>_<name>_backend.so[.version]"
    if not name:
        return "empty name"
    if b"\0" in name:
        return "contains a NUL byte"
    at = name.find(_LITERAL)
    if at < 0:
        if _LITERAL.lower() in name.lower() or b"-backend.so" in name.lower():
            return f"'_backend.so' must be spelled exactly so (lowercase, with '_'): {rule}"
        return f"does not contain '_backend.so': {rule}"
    parts = name[:at].split(b"_")
    if len(parts) != 2:
        return (f"'{one_line(name[:at])}' before '_backend.so' must be <vendor>_<name>: two "
                f"parts joined by one '_' (found {len(parts)})")
    for label, part in zip(("vendor", "name"), parts):
        if not part:
            return f"the {label} part is empty: {rule}"
        if not _ALNUM.fullmatch(part):
            decoded = part.decode("utf-8", "surrogateescape")
            bad = next(c for c in decoded if not (c.isascii() and c.isalnum()))
            return (f"the {label} part '{one_line(part)}' contains "
                    f"'{one_line(bad.encode('utf-8', 'surrogateescape'))}': vendor and name are "
                    f"ASCII letters and digits only")
    suffix = name[at + len(_LITERAL):]
    if not _VERSION_SUFFIX.fullmatch(suffix):
        return (f"the version '{one_line(suffix)}' after '_backend.so' must be groups of '.' and "
                f"digits, like '.1' or '.1.2.3'")
    return f"does not match the rule: {rule}"


def _names(args) -> Iterable[bytes]:
    """Each NAME as bytes; ``-`` stands for the names read from stdin."""
    separator = b"\0" if args.null else b"\n"
    for name in args.names:
        if name != "-":
            yield os.fsencode(name)
            continue
        data = sys.stdin.buffer.read()
        records = data.split(separator)
        if records and records[-1] == b"":  # the terminator of the last record
            records.pop()
        if args.null:                       # NUL-separated records are exact bytes
            yield from records
            continue
        for record in records:              # a line: CRLF ends it too; a blank line is no name
            record = record[:-1] if record.endswith(b"\r") else record
            if record:
                yield record


def _check_name(args) -> int:
    if args.null and "-" not in args.names:
        _usage_error(args, "-0/--null reads NUL-separated names from stdin: give '-' as NAME")
    terminator = b"\0" if args.null else b"\n"
    out = sys.stdout.buffer
    all_valid = True
    for name in _names(args):
        # A path is checked on its last component: the rule is about the file's own name.
        base = name.rpartition(b"/")[2]
        valid = is_valid_backend_filename(base)
        all_valid = all_valid and valid
        verdict = b"valid" if valid else b"invalid"
        # NUL-terminated records carry the exact bytes; a line carries the name on one line.
        shown = name if args.null else one_line(name).encode("utf-8", "surrogateescape")
        out.write(verdict + (b"\t" + shown if args.with_names else b"") + terminator)
        if not valid and not args.quiet:
            out.flush()
            sys.stderr.write(f"{PROG}: invalid: {one_line(name)}: {explain_invalid_name(base)}\n")
    out.flush()
    return 0 if all_valid else 1


# -- the parser ---------------------------------------------------------------------------------

def _seconds(text: str) -> float:
    try:
        return timeouts.parse(text, "")
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: give {timeouts.describe()}") from None


def _usage_error(args, message: str) -> None:
    args.parser_of_command.error(message)


def _check_path_option(args) -> None:
    """``--path``, when given, made absolute; a usage error when it is not a usable directory."""
    if getattr(args, "path", None) is not None:
        try:
            args.path = command_line_path(args.path)
        except InvalidSearchPathError as error:
            _usage_error(args, str(error))


def _verbosity(parser: argparse.ArgumentParser, dest: str) -> None:
    parser.add_argument("-v", "--verbose", action="count", default=0, dest=dest,
                        help="log skipped files (-v), registrations (-vv) and each file as it "
                             "is loaded (-vvv) to stderr")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Find, check and load dynamic backends, and explain what was skipped.",
        epilog=f"Environment: {', '.join(environment.ALL)} (see the README).")
    parser.add_argument("--version", action="version",
                        version=f"{PROG} {loader.__version__} (Backend API {BACKEND_API_VERSION})")
    _verbosity(parser, "verbose")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    scan = commands.add_parser(
        "scan", help="scan the search paths and report every entry",
        description="Run discovery and loading exactly as a Runtime would and report every "
                    "directory entry of every search path. Backends are loaded in this process: "
                    "if one crashes the scan (a bare 'Segmentation fault'), rerun with "
                    "--isolated to load each in a child process first and skip those that "
                    "crash or hang there.")
    _verbosity(scan, "command_verbose")
    scan.add_argument("--path", metavar="DIR",
                      help="scan only DIR, one directory never split on ':' (replaces "
                           "DYNAMIC_BACKEND_ADD_PATHS, DYNAMIC_BACKEND_PATHS and the compiled-in "
                           "list)")
    output = scan.add_mutually_exclusive_group()
    output.add_argument("--json", action="store_true", help="print the report as JSON")
    output.add_argument("--summary", action="store_true",
                        help="one line per candidate backend (registered or skipped) and counts")
    scan.add_argument("--candidates-only", action="store_true",
                      help="leave out entries not named like a backend file (counted instead)")
    scan.add_argument("--require", action="append", metavar="ID[,ID...]",
                      help="exit 1, saying why, unless each backend ID registered (repeatable, "
                           "or comma-separated)")
    scan.add_argument("--isolated", action="store_true",
                      help="load each candidate in a child process first; skip those that crash, "
                           "exit or hang there (probe-crashed, probe-timeout). Use it when a "
                           "backend crashes the scan")
    scan.add_argument("--probe-timeout", type=_seconds, default=None, metavar="S",
                      help="seconds a probe may take (default 5); implies --isolated")
    scan.add_argument("--strict-permissions", action="store_true",
                      help="refuse directories and files writable by others or owned by a third "
                           "user (untrusted-permissions)")
    scan.set_defaults(handler=_scan, parser_of_command=scan)

    check = commands.add_parser(
        "check-name", help="check backend file names against the naming rule",
        description="Print 'valid' or 'invalid' for each NAME, one line each, and why each "
                    "invalid name is invalid on stderr; exit 1 if any is invalid. A path is "
                    "checked on its last component (the file's own name).")
    _verbosity(check, "command_verbose")
    check.add_argument("names", nargs="+", metavar="NAME",
                       help="a file name or path; '-' reads names from stdin, one per line")
    check.add_argument("--with-names", action="store_true",
                       help="print each verdict followed by a tab and the name")
    check.add_argument("-0", "--null", action="store_true",
                       help="names on stdin are NUL-separated (for names holding newlines); "
                            "output records end in NUL too")
    check.add_argument("-q", "--quiet", action="store_true",
                       help="do not explain invalid names on stderr")
    check.set_defaults(handler=_check_name, parser_of_command=check)
    add_network_commands(commands)
    return parser


def _configure_logging(verbosity: int) -> None:
    environment.log_to_stderr(
        {0: logging.ERROR, 1: logging.WARNING, 2: logging.INFO}.get(verbosity, logging.DEBUG))
    environment.apply_debug()
    logging.getLogger("loader").propagate = False


def main(argv: Optional[List[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    _configure_logging(args.verbose + getattr(args, "command_verbose", 0))
    _check_path_option(args)
    # A command has nothing to keep when a backend hangs while it is loaded: the first Ctrl-C
    # ends it, naming the file (a host process keeps the default, its KeyboardInterrupt).
    from loader import _core
    _core.set_interrupt_ends_loading(True)
    try:
        return args.handler(args)
    except BrokenPipeError:  # e.g. piped into `head`: not an error of ours
        sys.stderr.close()
        return 0
