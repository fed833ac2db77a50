"""Deliberately broken backends, one defect each, for testing loaders and the conformance kit.

Each ``<defect>.c`` here is built into ``lib/Mock_<Defect>_backend.so`` (``null_id.c`` ->
``Mock_NullId_backend.so``); each ``hostile/<defect>.c`` into ``hostile/``. The header comment
of each source file states its defect and the rule it breaks. Mocks in ``lib/`` are safe to
load in-process: the loader skips each with a reason. Mocks in ``hostile/`` crash, hang, exit or
misbehave once loaded or called: load them only in a child process (the conformance kit's
workers, or the loader's isolated probing). Neither directory is on a default search path.

``faults/<fault>.c`` (crash, abort, exit, hang, leak a thread) are correct backends with a
fault in the call the environment names, built into ``faults/lib/Fault_<Fault>_backend.so``: the
backend host's tests (loader.host) choose where it strikes.

``one_defect/<defect>.c`` are the conformance kit's mutation tests: each a complete backend with
one realistic defect, built into ``one_defect/lib/Defect_<Defect>_backend.so``; its header names
the requirement that must catch it. ``one_defect/correct/*.c`` are independent correct backends
(``one_defect/correct/lib/Correct_<Name>_backend.so``). Load them only in a child process.
"""
import os
import re
from dataclasses import dataclass
from typing import Dict

LIBRARY_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib")
HOSTILE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "hostile")


def library_name(source_stem: str) -> str:
    """The installed file name of the mock built from ``<source_stem>.c``."""
    camel = "".join(part[:1].upper() + part[1:] for part in source_stem.split("_"))
    return f"Mock_{camel}_backend.so"


def path(source_stem: str) -> str:
    """Absolute path of the installed mock built from ``<source_stem>.c``/``.cpp``, in ``lib/``
    or ``hostile/``."""
    result = os.path.join(LIBRARY_DIR, library_name(source_stem))
    if not os.path.isfile(result):
        result = os.path.join(HOSTILE_DIR, library_name(source_stem))
    if not os.path.isfile(result):
        raise FileNotFoundError(f"no mock backend {source_stem!r} is installed ({result})")
    return result


def available(directory: str = LIBRARY_DIR) -> Dict[str, str]:
    """Every installed mock of ``directory`` (LIBRARY_DIR or HOSTILE_DIR): file name -> path."""
    if not os.path.isdir(directory):
        return {}
    # In a checkout built in place, hostile/ also holds the sources.
    return {name: os.path.join(directory, name) for name in sorted(os.listdir(directory))
            if name.endswith("_backend.so")}


# -- faults in a chosen call: the backend host's tests -------------------------------------------

FAULTS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "faults", "lib")
FAULTS = ("crash", "abort", "exit", "hang", "leak_thread")


def fault_library_name(source_stem: str) -> str:
    """The installed file name of ``faults/<source_stem>.c`` (``leak_thread`` ->
    ``Fault_LeakThread_backend.so``, backend id ``FaultLeakThread``)."""
    camel = "".join(part[:1].upper() + part[1:] for part in source_stem.split("_"))
    return f"Fault_{camel}_backend.so"


def fault_path(source_stem: str) -> str:
    """Absolute path of the installed fault backend built from ``faults/<source_stem>.c``. It
    is correct until the environment names a call (MOCK_FAULT_IN, MOCK_FAULT_EVERY: see
    faults/fault.h); load it only in a backend host or another child process."""
    result = os.path.join(FAULTS_DIR, fault_library_name(source_stem))
    if not os.path.isfile(result):
        raise FileNotFoundError(f"no fault backend {source_stem!r} is installed ({result})")
    return result


# -- one-defect backends: the conformance kit's own mutation tests ------------------------------

ONE_DEFECT_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "one_defect")
CORRECT_DIR = os.path.join(ONE_DEFECT_DIR, "correct")


@dataclass(frozen=True)
class OneDefect:
    """A backend built from ``one_defect/<stem>.c``: its defect and the requirement that must
    catch it, both read from the source's header comment."""

    stem: str
    source: str
    path: str           # the built library
    defect: str
    requirement: str


def one_defect_library_name(source_stem: str, correct: bool = False) -> str:
    camel = "".join(part[:1].upper() + part[1:] for part in source_stem.split("_"))
    return f"{'Correct' if correct else 'Defect'}_{camel}_backend.so"


_HEADER = re.compile(r"/\*\s*Defect:(?P<defect>.*?)Requirement:\s*(?P<requirement>[A-Z]+-\d+)", re.S)


def one_defect_backends() -> Dict[str, OneDefect]:
    """Every ``one_defect/*.c`` (a checkout holds the sources): stem -> OneDefect."""
    found = {}
    for name in sorted(os.listdir(ONE_DEFECT_DIR)):
        if not name.endswith(".c"):
            continue
        stem = name[:-2]
        source = os.path.join(ONE_DEFECT_DIR, name)
        with open(source) as f:
            match = _HEADER.search(f.read(2000))
        if match is None:
            raise ValueError(f"{source}: the header comment must say 'Defect: ...' and "
                             f"'Requirement: ID'")
        found[stem] = OneDefect(stem, source, os.path.join(ONE_DEFECT_DIR, "lib",
                                                           one_defect_library_name(stem)),
                                " ".join(match["defect"].split()), match["requirement"])
    return found


def correct_backends() -> Dict[str, str]:
    """Every ``one_defect/correct/*.c``: stem -> path of the built library."""
    return {name[:-2]: os.path.join(CORRECT_DIR, "lib", one_defect_library_name(name[:-2], True))
            for name in sorted(os.listdir(CORRECT_DIR)) if name.endswith(".c")}
