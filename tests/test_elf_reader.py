"""The ELF reader of loader/native/elf/: its C is held to -Wall -Wextra, and the conformance kit
reads files through it (loader.elf), behind the loader's own pre-dlopen checks.

Every library read here is compiled or corrupted at test time."""
import glob
import os
import shutil
import struct
import subprocess
import sys

import pytest

import mock_backends
import reference_backend
from loader import _core, elf

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ELF_READER = os.path.join(REPO, "loader", "native", "elf")
CC = shutil.which("cc") or shutil.which("gcc")
needs_cc = pytest.mark.skipif(CC is None, reason="needs a C compiler")
elf64_le = pytest.mark.skipif(struct.calcsize("P") != 8 or sys.byteorder != "little",
                              reason="the test edits 64-bit little-endian ELF files")

BACKEND = ('#include <math.h>\n#include <stdint.h>\n'
           'const char *GetBackendId(void) { return "Reader"; }\n'
           'void GetVersion(uint32_t *a, uint32_t *b) { *a = 1; *b = 1; }\n'
           'void *BackendFactory(void) { return 0; }\n'
           'int exported_counter = 1;\n'
           'double Scale(double x) { return sqrt(x); }\n'
           '__attribute__((visibility("hidden"))) int hidden_helper(void) { return 2; }\n')


def _build(directory, *flags):
    source = os.path.join(str(directory), "backend.c")
    output = os.path.join(str(directory), "Acme_Reader_backend.so")
    with open(source, "w") as f:
        f.write(BACKEND)
    subprocess.run([CC, "-shared", "-fPIC", source, "-o", output, "-Wl,--no-as-needed", "-lm",
                    *flags], check=True, capture_output=True)
    return output


NATIVE = os.path.join(REPO, "loader", "native")
SOURCES = sorted(glob.glob(os.path.join(NATIVE, "**", "*.[ch]"), recursive=True))


@needs_cc
@pytest.mark.skipif(not SOURCES, reason="the loader's C sources are not beside the tests")
@pytest.mark.parametrize("source", SOURCES, ids=lambda p: os.path.relpath(p, NATIVE))
def test_the_loaders_native_code_compiles_without_warnings(source):
    result = subprocess.run([CC, "-std=c11", "-D_GNU_SOURCE", "-Wall", "-Wextra", "-Werror",
                             "-I", os.path.join(REPO, "abi"), "-fsyntax-only", "-x", "c", source],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


@needs_cc
def test_the_kit_reads_symbols_needed_libraries_and_search_paths(tmp_path):
    path = _build(tmp_path, "-Wl,-rpath,/opt/acme/lib:$ORIGIN", "-Wl,--disable-new-dtags")
    info = elf.read(path)
    assert (info.elf_class, info.file_type) == (2 if sys.maxsize > 2**32 else 1, 3)
    exported = {s.name: s for s in info.exported()}
    assert {"GetBackendId", "GetVersion", "BackendFactory", "Scale", "exported_counter"} \
        <= set(exported)
    assert "hidden_helper" not in exported
    assert exported["Scale"].kind == elf.STT_FUNC
    assert exported["exported_counter"].kind == elf.STT_OBJECT
    assert info.find("sqrt") is None  # imported: named, not defined
    assert any(s.name == "sqrt" and not s.defined for s in info.symbols)
    assert info.needed[:1] == ["libm.so.6"] and "libc.so.6" in info.needed
    assert (info.rpath, info.runpath) == ("/opt/acme/lib:$ORIGIN", None)
    info = elf.read(_build(tmp_path, "-Wl,-rpath,/opt/acme/lib", "-Wl,--enable-new-dtags"))
    assert (info.rpath, info.runpath) == (None, "/opt/acme/lib")


@needs_cc
@elf64_le
def test_symbols_come_from_the_dynamic_section_not_the_section_table(tmp_path):
    # The dynamic linker never reads the section table; a file without one loads, and a lookup
    # by name finds its entry points through the hash tables.
    path = _build(tmp_path)
    with open(path, "r+b") as f:
        f.seek(0x28)
        f.write(struct.pack("<Q", 0))          # e_shoff
        f.seek(0x3C)
        f.write(struct.pack("<HH", 0, 0))      # e_shnum, e_shstrndx
    assert _core.check_elf_file(path) == (None, "")
    assert {"GetBackendId", "GetVersion", "BackendFactory"} \
        <= {s.name for s in elf.read(path).exported()}


def test_the_mangled_twins_of_the_entry_points_are_found():
    info = elf.read(mock_backends.path("mangled_entry_points"))
    assert info.find("GetBackendId") is None
    assert info.find("_Z12GetBackendIdv") is not None


@elf64_le
@pytest.mark.parametrize("damage", ["garbage", "text", "truncated", "dynamic outside the file",
                                    "missing"])
def test_a_file_the_pre_checks_refuse_is_not_read(tmp_path, damage):
    path = str(tmp_path / "Acme_Bad_backend.so")
    with open(reference_backend.LIBRARY_PATH, "rb") as f:
        original = f.read()
    phoff, = struct.unpack_from("<Q", original, 0x20)
    phnum, = struct.unpack_from("<H", original, 0x38)
    headers = [phoff + i * 56 for i in range(phnum)]
    segments_end = max(struct.unpack_from("<Q", original, at + 8)[0]      # p_offset
                       + struct.unpack_from("<Q", original, at + 32)[0]   # p_filesz
                       for at in headers)
    data = {"garbage": bytes(range(256)) * 64, "text": b"#!/bin/sh\necho hello\n",
            "truncated": original[:segments_end - 1]}.get(damage, original)
    if damage == "dynamic outside the file":
        data = bytearray(data)
        for at in headers:
            if struct.unpack_from("<I", data, at)[0] == 2:  # PT_DYNAMIC: p_vaddr far away
                struct.pack_into("<Q", data, at + 16, 1 << 40)
    if damage != "missing":
        with open(path, "wb") as f:
            f.write(bytes(data))
    reason, detail = _core.check_elf_file(path)
    assert reason is not None
    with pytest.raises(elf.ElfError) as raised:
        elf.read(path)
    assert str(raised.value) == detail
