"""Deliberately broken backends, one defect each, for testing loaders and the conformance kit.

Each ``<defect>.c`` here is built into ``lib/Mock_<Defect>_backend.so`` (``null_id.c`` ->
``Mock_NullId_backend.so``); each ``hostile/<defect>.c`` into ``hostile/``. The header comment
of each source file states its defect and the rule it breaks. Mocks in ``lib/`` are safe to
load in-process: the loader skips each with a reason. Mocks in ``hostile/`` crash, hang, exit or
misbehave once loaded or called: load them only in a child process (the conformance kit's
workers, or the loader's isolated probing). Neither directory is on a default search path.
"""
import os
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
