"""``backend-conformance init``: a minimal backend and Makefile that pass the kit as written."""
import os
import re
from typing import List

TEMPLATE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "template")
_FIELD = re.compile(r"[A-Za-z0-9]+")


def library_name(vendor: str, name: str) -> str:
    return f"{vendor}_{name}_backend.so"


def write(directory: str, vendor: str, name: str) -> List[str]:
    """Write backend.c and Makefile into ``directory``; returns their paths."""
    for label, value in (("vendor", vendor), ("name", name)):
        if not _FIELD.fullmatch(value):
            raise ValueError(f"--{label} {value!r}: only ASCII letters and digits are allowed")
    os.makedirs(directory, exist_ok=True)
    values = {"@VENDOR@": vendor, "@ID@": f"{vendor}{name}", "@LIBRARY@": library_name(vendor, name)}
    written = []
    for source, target in (("backend.c.in", "backend.c"), ("Makefile.in", "Makefile")):
        path = os.path.join(directory, target)
        if os.path.exists(path):
            raise FileExistsError(f"{path} exists; choose an empty directory")
        with open(os.path.join(TEMPLATE_DIR, source)) as f:
            text = f.read()
        for key, value in values.items():
            text = text.replace(key, value)
        with open(path, "w") as f:
            f.write(text)
        written.append(path)
    return written
