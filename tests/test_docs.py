"""Every fenced block of README.md and docs/*.md is executed, so the documentation cannot rot.

The blocks of one document run in order in one sandbox directory (files persist from block to
block), with a clean environment: no DYNAMIC_BACKEND_* or REFERENCE_BACKEND_* variable, HOME and
XDG_CACHE_HOME inside the sandbox, PATH starting with this Python's bin directory. A ```sh block
runs with ``bash -e``; a ```python block in a fresh ``sys.executable`` (so each must work pasted
alone). Each block is one test item, named by its file and line.

Directives are HTML comments on the line(s) right before a fence (invisible when rendered);
several may share a comment, separated by ``;``:

    <!-- doc-test: file NAME -->   write the block to NAME in the sandbox (a C source, a YAML or
                                   JSON file a later block uses)
    <!-- doc-test: output -->      the block is the expected output (stdout and stderr together)
                                   of the previous runnable block: a line ``...`` stands for any
                                   number of lines, ``…`` inside a line for any text in it
    <!-- doc-test: exit N -->      the runnable block ends with exit status N (default 0)
    <!-- doc-test: needs TOOL -->  skipped, saying so, when TOOL is not on PATH
    <!-- doc-test: slow -->        takes too long for the suite's loop (valgrind): runs only with
                                   SLOW_TESTS=1, which .ci/run sets
    <!-- doc-test: ci -->          an install or test command too slow for the suite: each of its
                                   lines must be a line of .ci/run (optionally followed by
                                   ``|| exit``, which set -e needs to stop inside an && list), so CI
                                   runs it as written

Strict: every sh and python block runs (or is ``ci``); console, shell-session and pycon blocks
are refused (write the command in a sh block and its output in an output block). Blocks of other
languages, and plain ``` blocks, are illustrations unless a directive says otherwise.
"""
import difflib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Dict, List, Optional

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CI_SCRIPT = os.path.join(ROOT, ".ci", "run")
SHELL = ("sh", "bash", "shell")
PYTHON = ("python", "py")
REFUSED = ("console", "shell-session", "pycon", "sh-session")
DIRECTIVES = ("file", "output", "exit", "needs", "slow", "ci")
SLOW = os.environ.get("SLOW_TESTS") == "1"
TIMEOUT = 120

_DIRECTIVE = re.compile(r"^<!--\s*doc-test:(.*?)-->\s*$")
_FENCE = re.compile(r"^(\s*)(```+|~~~+)\s*([^\s`]*)\s*$")


@dataclass
class Block:
    doc: str                 # path relative to ROOT
    line: int                # line of the opening fence, 1-based
    language: str
    text: str
    directives: Dict[str, str] = field(default_factory=dict)
    errors: List[str] = field(default_factory=list)

    @property
    def id(self) -> str:
        return f"{self.doc}:{self.line}"

    @property
    def runnable(self) -> bool:
        return (self.language in SHELL + PYTHON and "ci" not in self.directives
                and "file" not in self.directives)

    @property
    def kind(self) -> Optional[str]:
        """What the test does with the block; None for an illustration."""
        if "ci" in self.directives:
            return "ci"
        if "file" in self.directives:
            return "file"
        if "output" in self.directives:
            return "output"
        if self.runnable:
            return "run"
        return None


def _documents() -> List[str]:
    docs = [os.path.join(ROOT, "README.md")]
    docs_dir = os.path.join(ROOT, "docs")
    if os.path.isdir(docs_dir):
        docs += sorted(os.path.join(docs_dir, n) for n in os.listdir(docs_dir) if n.endswith(".md"))
    return [d for d in docs if os.path.isfile(d)]


def parse(doc: str, text: str) -> List[Block]:
    """The fenced blocks of ``text`` with their directives; misuse is recorded on the block (or,
    for a directive with no fence after it, on a pseudo-block of language ``directive``)."""
    lines = text.split("\n")
    blocks: List[Block] = []
    pending: List[tuple] = []      # (line number, directive text) right above the next fence
    i = 0
    while i < len(lines):
        line = lines[i]
        directive = _DIRECTIVE.match(line.strip())
        if directive:
            pending.append((i + 1, directive.group(1)))
            i += 1
            continue
        fence = _FENCE.match(line)
        if not fence:
            if pending:
                blocks.append(Block(doc, pending[0][0], "directive", "", errors=[
                    "a doc-test directive must be on the line right before a fence"]))
                pending = []
            i += 1
            continue
        indent, marker, language = fence.groups()
        start = i
        i += 1
        body = []
        while i < len(lines) and not (lines[i].strip().startswith(marker[0] * len(marker))
                                      and lines[i].strip().strip(marker[0]) == ""):
            body.append(lines[i][len(indent):] if lines[i].startswith(indent) else lines[i])
            i += 1
        i += 1  # the closing fence
        block = Block(doc, start + 1, language.lower(), "\n".join(body) + "\n" if body else "")
        if indent:
            block.errors.append("an indented fence: start fences at the beginning of the line")
        for _, spec in pending:
            for part in filter(None, (p.strip() for p in spec.split(";"))):
                name, _, argument = part.partition(" ")
                if name not in DIRECTIVES:
                    block.errors.append(f"unknown doc-test directive {name!r} (known: "
                                        f"{', '.join(DIRECTIVES)})")
                block.directives[name] = argument.strip()
        pending = []
        _check_directives(block)
        blocks.append(block)
    if pending:
        blocks.append(Block(doc, pending[0][0], "directive", "", errors=[
            "a doc-test directive must be on the line right before a fence"]))
    return blocks


def _check_directives(block: Block) -> None:
    d = block.directives
    if block.language in REFUSED:
        block.errors.append(f"```{block.language} blocks are not run: put the commands in a ```sh "
                            f"block and what they print in an output block after it")
    if "file" in d and not d["file"]:
        block.errors.append("file needs a name: <!-- doc-test: file NAME -->")
    if "exit" in d and not re.fullmatch(r"[0-9]+", d["exit"]):
        block.errors.append(f"exit needs a number, not {d['exit']!r}")
    if "needs" in d and not d["needs"]:
        block.errors.append("needs names a program: <!-- doc-test: needs gdb -->")
    if "ci" in d and block.language not in SHELL:
        block.errors.append("ci is for ```sh blocks of install or test commands")
    if ("exit" in d or "needs" in d or "slow" in d) and not block.runnable:
        block.errors.append("exit, needs and slow apply to a runnable ```sh or ```python block")
    if "output" in d and block.runnable:
        block.errors.append("an output block must not be ```sh or ```python: leave it plain")
    if len({"file", "output", "ci"} & set(d)) > 1:
        block.errors.append("file, output and ci exclude each other")


def _all_blocks() -> List[Block]:
    blocks = []
    for path in _documents():
        with open(path, encoding="utf-8") as f:
            blocks += parse(os.path.relpath(path, ROOT), f.read())
    return blocks


BLOCKS = _all_blocks()
ITEMS = [b for b in BLOCKS if b.kind is not None or b.errors]


# -- running a document ---------------------------------------------------------------------------

@dataclass
class Result:
    returncode: Optional[int] = None
    output: str = ""
    skipped: Optional[str] = None     # why the block did not run


def _python_on_path(bin_dir: str) -> str:
    """A directory whose ``python`` is this interpreter (the docs say ``python``)."""
    here = os.path.dirname(sys.executable)
    if os.path.basename(sys.executable) == "python" or os.path.exists(os.path.join(here, "python")):
        return here
    os.makedirs(bin_dir, exist_ok=True)
    shim = os.path.join(bin_dir, "python")
    with open(shim, "w") as f:
        f.write(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    os.chmod(shim, 0o755)
    return bin_dir + os.pathsep + here


class DocumentRun:
    """One document's sandbox; its blocks run in order, each at most once, on first demand (so
    ``-k`` on one block still runs the blocks before it), from a test item or from the
    background thread that runs the document ahead of its items."""

    def __init__(self, doc: str, root: str):
        self.blocks = [b for b in BLOCKS if b.doc == doc]
        self.root = root
        self.work = os.path.join(root, "work")
        home = os.path.join(root, "home")
        for directory in (self.work, home):
            os.makedirs(directory)
        path = _python_on_path(os.path.join(root, "bin"))
        self.env = {
            "PATH": path + os.pathsep + os.environ.get("PATH", os.defpath),
            "HOME": home,
            "XDG_CACHE_HOME": os.path.join(home, ".cache"),
            "LANG": "C.UTF-8",
            "LC_ALL": "C.UTF-8",
            "TERM": "dumb",
        }
        self.results: Dict[int, Result] = {}
        self.failures: List[str] = []     # ids of runnable blocks that did not end as documented
        self._lock = threading.Lock()

    def result(self, block: Block) -> Result:
        for earlier in self.blocks:
            if earlier.line > block.line:
                break
            with self._lock:
                if earlier.line not in self.results:
                    self.results[earlier.line] = self._execute(earlier)
        return self.results[block.line]

    def _execute(self, block: Block) -> Result:
        if block.errors:
            return Result(skipped="malformed")
        if block.kind == "file":
            target = os.path.join(self.work, block.directives["file"])
            os.makedirs(os.path.dirname(target), exist_ok=True)
            with open(target, "w", encoding="utf-8") as f:
                f.write(block.text)
            return Result(returncode=0)
        if block.kind != "run":
            return Result(skipped="not runnable")
        tool = block.directives.get("needs")
        if tool and shutil.which(tool, path=self.env["PATH"]) is None:
            return Result(skipped=f"needs {tool}, which is not on PATH")
        if "slow" in block.directives and not SLOW:
            return Result(skipped="a slow example: set SLOW_TESTS=1 to run it (.ci/run does)")
        if block.language in SHELL:
            command, stdin = ["bash", "-e", "-c", block.text], subprocess.DEVNULL
        else:
            command, stdin = [sys.executable, "-"], None
        try:
            completed = subprocess.run(
                command, input=block.text if stdin is None else None, stdin=stdin,
                cwd=self.work, env=self.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                text=True, errors="backslashreplace",
                timeout=None if "slow" in block.directives else TIMEOUT)
        except subprocess.TimeoutExpired as expired:
            output = expired.stdout or ""
            if isinstance(output, bytes):
                output = output.decode("utf-8", "backslashreplace")
            result = Result(returncode=None, output=output + f"\n[no end within {TIMEOUT} s]")
        else:
            # A process killed by a signal reads as a shell shows it: 128 + the signal.
            code = completed.returncode
            result = Result(returncode=128 - code if code < 0 else code, output=completed.stdout)
        if result.returncode != int(block.directives.get("exit", "0")):
            self.failures.append(block.id)
        return result

    def runnable_before(self, block: Block) -> Optional[Block]:
        before = [b for b in self.blocks if b.line < block.line and b.kind in ("run", "output")]
        return before[-1] if before and before[-1].kind == "run" else None


_RUNS: Dict[str, DocumentRun] = {}
_RUNS_LOCK = threading.Lock()
# Documents are independent, and their blocks spend much of their time waiting on processes
# they started (the conformance kit's workers, gdb): a few documents run at once.
PARALLEL_DOCUMENTS = 4


@pytest.fixture(scope="session")
def _sandboxes(tmp_path_factory, request):
    root = str(tmp_path_factory.mktemp("docs"))
    last: Dict[str, Block] = {}     # each document's last selected block
    for item in request.session.items:
        block = getattr(item, "callspec", None) and item.callspec.params.get("block")
        if isinstance(block, Block) and block.kind not in (None, "ci") and not block.errors:
            if block.doc not in last or block.line > last[block.doc].line:
                last[block.doc] = block
    pool = ThreadPoolExecutor(PARALLEL_DOCUMENTS, thread_name_prefix="docs")
    # The longest documents first, so that none is left to run alone at the end.
    for doc in sorted(last, key=lambda d: -sum(b.kind == "run" for b in BLOCKS if b.doc == d)):
        pool.submit(_run_of(doc, root).result, last[doc])
    yield root
    pool.shutdown(wait=True, cancel_futures=True)
    _RUNS.clear()


def _run_of(doc: str, sandboxes: str) -> DocumentRun:
    with _RUNS_LOCK:
        if doc not in _RUNS:
            _RUNS[doc] = DocumentRun(doc, tempfile.mkdtemp(prefix=doc.replace("/", "-") + ".",
                                                           dir=sandboxes))
        return _RUNS[doc]


# -- matching output --------------------------------------------------------------------------------

def output_pattern(expected: str) -> "re.Pattern":
    """``expected`` as a regular expression: ``...`` on a line of its own matches any number of
    lines, ``…`` any text within one line; trailing spaces are not compared."""
    parts = []
    for line in expected.rstrip("\n").split("\n"):
        if line.strip() == "...":
            parts.append(r"(?:[^\n]*\n)*?")
        else:
            parts.append("[^\n]*?".join(re.escape(piece) for piece in line.rstrip().split("…"))
                         + r"\n")
    return re.compile("".join(parts))


def _normalized(output: str) -> str:
    lines = [line.rstrip() for line in output.rstrip("\n").split("\n")]
    return "\n".join(lines) + "\n"


def output_matches(expected: str, actual: str) -> bool:
    return output_pattern(expected).fullmatch(_normalized(actual)) is not None


# -- the items --------------------------------------------------------------------------------------

def _ci_lines() -> List[str]:
    with open(CI_SCRIPT, encoding="utf-8") as f:
        return [line.strip() for line in f.read().replace("\\\n", " ").split("\n")]


def _commands(text: str) -> List[str]:
    joined = text.replace("\\\n", " ")
    return [line.strip() for line in joined.split("\n")
            if line.strip() and not line.strip().startswith("#")]


def _earlier_failures(run: DocumentRun, block: Block) -> str:
    earlier = [f for f in run.failures if f != block.id
               and int(f.rpartition(":")[2]) < block.line]
    return f" (earlier blocks of this document failed too: {', '.join(earlier)})" if earlier else ""


@pytest.mark.skipif(not BLOCKS, reason="README.md and docs/ are not beside the tests")
@pytest.mark.parametrize("block", ITEMS, ids=[b.id for b in ITEMS])
def test_doc_block(block: Block, _sandboxes):
    assert not block.errors, f"{block.id}: " + "; ".join(block.errors)
    if block.kind == "ci":
        if not os.path.exists(CI_SCRIPT):
            pytest.skip(".ci/run is not beside the tests")
        ci = _ci_lines()
        missing = [c for c in _commands(block.text)
                   if c not in ci and f"{c} || exit" not in ci]
        assert not missing, (f"{block.id}: CI must run this command of the docs as written, but "
                             f".ci/run has no line {missing[0]!r}")
        return
    run = _run_of(block.doc, _sandboxes)
    if block.kind == "output":
        source = run.runnable_before(block)
        assert source is not None, (f"{block.id}: an output block must follow a runnable "
                                    f"```sh or ```python block")
        result = run.result(source)
        if result.skipped:
            pytest.skip(f"the block it shows the output of ({source.id}) did not run: "
                        f"{result.skipped}")
        if not output_matches(block.text, result.output):
            diff = "\n".join(difflib.unified_diff(
                block.text.rstrip("\n").split("\n"), _normalized(result.output).rstrip("\n").split("\n"),
                "documented", "printed", lineterm=""))
            pytest.fail(f"{block.id}: the output of {source.id} is not what the docs show"
                        f"{_earlier_failures(run, source)}:\n{diff}", pytrace=False)
        return
    result = run.result(block)
    if result.skipped:
        pytest.skip(result.skipped)
    expected = int(block.directives.get("exit", "0"))
    if result.returncode != expected:
        pytest.fail(f"{block.id}: ```{block.language} block ended with status "
                    f"{result.returncode}, the docs say {expected}"
                    f"{_earlier_failures(run, block)}; its output:\n{result.output}",
                    pytrace=False)


# -- the checker itself ---------------------------------------------------------------------------

def test_output_patterns():
    assert output_matches("a\n...\nd\n", "a\nb\nc\nd\n")
    assert output_matches("a\n...\nd\n", "a\nd\n")
    assert output_matches("x = …!\n", "x = anything at all!  \n")
    assert not output_matches("x = …!\n", "x = one\nline more!\n")      # … stays in its line
    assert not output_matches("a\nb\n", "a\nb\nc\n")                    # nothing unaccounted for
    assert not output_matches("registered\n", "skipped\n")
    assert output_matches("a (b) [c] $d\n", "a (b) [c] $d\n")           # nothing else is special


def test_directives_are_checked():
    text = ("<!-- doc-test: exit 1 -->\n```sh\nfalse\n```\n"
            "<!-- doc-test: output -->\n```\nhello\n```\n"
            "<!-- doc-test: file acme.c -->\n```c\nint x;\n```\n"
            "<!-- doc-test: frobnicate -->\n```sh\ntrue\n```\n"
            "```console\n$ true\n```\n"
            "<!-- doc-test: ci -->\n```python\npass\n```\n"
            "<!-- doc-test: output -->\nnot a fence\n"
            "```\nan illustration\n```\n")
    blocks = parse("x.md", text)
    kinds = [(b.line, b.kind, bool(b.errors)) for b in blocks]
    assert kinds == [(2, "run", False), (6, "output", False), (10, "file", False),
                     (14, "run", True), (17, None, True), (21, "ci", True),
                     (24, None, True), (26, None, False)]
    assert blocks[0].directives == {"exit": "1"} and blocks[2].directives == {"file": "acme.c"}


# -- links ------------------------------------------------------------------------------------------

_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def _anchor(heading: str) -> str:
    """The anchor GitHub gives a heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower().replace("`", ""))
    return text.replace(" ", "-")


def _anchors(path: str) -> set:
    with open(path, encoding="utf-8") as f:
        text = re.sub(r"^```.*?^```", "", f.read(), flags=re.S | re.M)
    return {_anchor(m.group(1)) for m in re.finditer(r"^#+\s+(.*)$", text, re.M)}


@pytest.mark.skipif(not BLOCKS, reason="README.md and docs/ are not beside the tests")
@pytest.mark.parametrize("doc", [os.path.relpath(d, ROOT) for d in _documents()])
def test_links_lead_somewhere(doc):
    """Every relative link of the docs names a file that exists, and a heading there."""
    path = os.path.join(ROOT, doc)
    with open(path, encoding="utf-8") as f:
        text = re.sub(r"^```.*?^```", "", f.read(), flags=re.S | re.M)
    broken = []
    for target in _LINK.findall(text):
        if re.match(r"[a-z]+:", target):
            continue
        file_part, _, anchor = target.partition("#")
        linked = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) if file_part else path
        if not os.path.exists(linked):
            broken.append(f"{target}: no such file")
        elif anchor and linked.endswith(".md") and anchor not in _anchors(linked):
            broken.append(f"{target}: no heading with that anchor")
    assert not broken, f"{doc}: " + "; ".join(broken)
