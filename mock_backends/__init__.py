"""Deliberately broken backends, one defect each, for testing loaders and the conformance kit.

Each ``<defect>.c`` here is built into ``lib/Mock_<Defect>_backend.so`` (``null_id.c`` ->
``Mock_NullId_backend.so``). The header comment of each source file states its defect and the
rule it breaks. The installed directory is never on a default search path.
"""
import os
from typing import Dict

LIBRARY_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib")


def library_name(source_stem: str) -> str:
    """The installed file name of the mock built from ``<source_stem>.c``."""
    camel = "".join(part[:1].upper() + part[1:] for part in source_stem.split("_"))
    return f"Mock_{camel}_backend.so"


def path(source_stem: str) -> str:
    """Absolute path of the installed mock built from ``<source_stem>.c``/``.cpp``."""
    result = os.path.join(LIBRARY_DIR, library_name(source_stem))
    if not os.path.isfile(result):
        raise FileNotFoundError(f"no mock backend {source_stem!r} is installed ({result})")
    return result


def available() -> Dict[str, str]:
    """Every installed mock: file name -> absolute path."""
    if not os.path.isdir(LIBRARY_DIR):
        return {}
    return {name: os.path.join(LIBRARY_DIR, name) for name in sorted(os.listdir(LIBRARY_DIR))}
