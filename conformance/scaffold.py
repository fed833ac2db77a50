"""``backend-conformance init``: a minimal backend and Makefile that pass the kit as written.

The Makefile records where this installation keeps ``backend_api.h``, so building needs no
Python (and no active environment); it can be pointed elsewhere with BACKEND_API_INCLUDE."""
import os
import re
from typing import List

TEMPLATE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "template")
# <vendor> and <name> of the file name <vendor>_<name>_backend.so; the backend id is both joined.
FIELD_RULE = "ASCII letters and digits"
_FIELD = re.compile(r"[A-Za-z0-9]+")


def library_name(vendor: str, name: str) -> str:
    return f"{vendor}_{name}_backend.so"


def write(directory: str, vendor: str, name: str) -> List[str]:
    """Write backend.c and Makefile into ``directory``; returns their paths."""
    for label, value in (("vendor", vendor), ("name", name)):
        if not _FIELD.fullmatch(value):
            raise ValueError(f"--{label} {value!r}: only {FIELD_RULE} are allowed")
    _make_directory(directory)
    import loader
    values = {"@VENDOR@": vendor, "@ID@": f"{vendor}{name}", "@LIBRARY@": library_name(vendor, name),
              "@INCLUDE@": loader.get_include()}
    written = []
    for source, target in (("backend.c.in", "backend.c"), ("Makefile.in", "Makefile")):
        path = os.path.join(directory, target)
        if os.path.lexists(path):
            raise ValueError(f"{path} exists; choose an empty directory")
        with open(os.path.join(TEMPLATE_DIR, source)) as f:
            text = f.read()
        for key, value in values.items():
            text = text.replace(key, value)
        try:
            with open(path, "x") as f:
                f.write(text)
        except OSError as error:
            raise ValueError(f"cannot write {path}: {error.strerror or error}") from None
        written.append(path)
    return written


def _make_directory(directory: str):
    """Create ``directory`` itself if needed, never its missing parents."""
    parent = os.path.dirname(os.path.abspath(directory))
    if os.path.isdir(directory):
        return
    if os.path.lexists(directory):
        raise ValueError(f"{directory} exists and is not a directory")
    if not os.path.isdir(parent):
        raise ValueError(f"{directory}: directory {parent} does not exist (init creates only "
                         f"{os.path.basename(os.path.abspath(directory))} itself)")
    try:
        os.mkdir(directory)
    except OSError as error:
        raise ValueError(f"cannot create {directory}: {error.strerror or error}") from None
