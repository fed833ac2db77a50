"""Hostile files: needed libraries that are not regular files, ELF structures the dynamic linker
would trust blindly, arithmetic that wraps, and what isolated probing lets through to the host.

Every file is built or corrupted here, at test time. Scans that could hang or crash the process
when a check regresses run in a child process under a timeout, so a regression fails the test
instead of stopping the suite."""
import json
import os
import shutil
import socket
import struct
import subprocess
import sys

import pytest

import loader
import reference_backend
from helpers import entry_for, scan

CC = shutil.which("cc") or shutil.which("gcc")
needs_cc = pytest.mark.skipif(CC is None, reason="needs a C compiler")
elf64_le = pytest.mark.skipif(struct.calcsize("P") != 8 or sys.byteorder != "little",
                              reason="the test edits 64-bit little-endian ELF files")

BACKEND = ('#include <stdint.h>\n'
           'const char *GetBackendId(void) { return "Hostile"; }\n'
           'void GetVersion(uint32_t *a, uint32_t *b) { *a = 1; *b = 1; }\n'
           'void *BackendFactory(void) { return 0; }\n')


def _cc(directory, output, source, *flags):
    src = os.path.join(str(directory), os.path.basename(output) + ".c")
    with open(src, "w") as f:
        f.write(source)
    subprocess.run([CC, "-shared", "-fPIC", src, "-o", os.path.join(str(directory), output),
                    *flags], check=True, capture_output=True, cwd=str(directory))
    os.unlink(src)


def _scan_child(directory, *options, env=None, timeout=60):
    """``python -m loader scan --json`` on ``directory`` in a child process; its only entry."""
    result = subprocess.run([sys.executable, "-m", "loader", "scan", "--json", "--path",
                             str(directory), *options], capture_output=True, text=True,
                            timeout=timeout, cwd="/", env=env)
    assert result.returncode == 0, (result.returncode, result.stderr[-2000:])
    [entry] = json.loads(result.stdout)["entries"]
    return entry


# -- 1. a needed library the dynamic linker would reach as a FIFO, socket or device --------------

def _backend_needing(tmp_path, *flags):
    """scan/Acme_FifoDep_backend.so, needing libdep.so (built next to scan/ with ``flags``)."""
    (tmp_path / "scan").mkdir()
    _cc(tmp_path, "libdep.so", "int dep_fn(void) { return 1; }\n", *flags)
    _cc(tmp_path, "scan/Acme_FifoDep_backend.so", BACKEND, f"-L{tmp_path}", "-Wl,--no-as-needed",
        "-ldep")
    return tmp_path / "scan"


@needs_cc
@pytest.mark.parametrize("mode", [[], ["--isolated"]])
def test_a_needed_library_named_by_path_that_is_a_fifo_never_blocks_the_scan(tmp_path, mode):
    # The reproducer: the soname (and so the DT_NEEDED entry) is a path to a FIFO.
    scan_dir = _backend_needing(tmp_path, f"-Wl,-soname,{tmp_path}/dep.fifo")
    os.mkfifo(tmp_path / "dep.fifo")
    entry = _scan_child(scan_dir, *mode, timeout=30)
    assert entry["reason"] == "missing-dependency"
    assert f"{tmp_path}/dep.fifo" in entry["detail"] and "a FIFO" in entry["detail"]


def _plant(kind, path):
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "socket":
        here = os.getcwd()
        os.chdir(os.path.dirname(str(path)))  # a socket's path must be short: bind it relative
        try:
            sock = socket.socket(socket.AF_UNIX)
            sock.bind(os.path.basename(str(path)))
            sock.close()
        finally:
            os.chdir(here)
    elif kind == "device":
        os.symlink("/dev/zero", path)  # a link to a character device: the linker follows it


@needs_cc
@pytest.mark.parametrize("kind, words", [("fifo", "a FIFO"), ("socket", "a socket"),
                                         ("device", "a character device")])
@pytest.mark.parametrize("where", ["rpath", "runpath", "LD_LIBRARY_PATH"])
def test_a_needed_library_on_the_search_path_that_is_not_a_file_is_refused(tmp_path, kind, words,
                                                                            where):
    scan_dir = _backend_needing(tmp_path, "-Wl,-soname,libdep.so")
    trap = tmp_path / "trap"
    trap.mkdir()
    _plant(kind, trap / "libdep.so")
    backend = scan_dir / "Acme_FifoDep_backend.so"
    env = dict(os.environ)
    if where == "LD_LIBRARY_PATH":
        env["LD_LIBRARY_PATH"] = str(trap)
    else:
        tag = "--disable-new-dtags" if where == "rpath" else "--enable-new-dtags"
        _cc(tmp_path, "scan/Acme_FifoDep_backend.so", BACKEND, f"-L{tmp_path}",
            "-Wl,--no-as-needed", "-ldep", f"-Wl,-rpath,{trap}", f"-Wl,{tag}")
    for mode in ([], ["--isolated"]):
        entry = _scan_child(scan_dir, *mode, env=env, timeout=30)
        assert entry["reason"] == "missing-dependency", entry
        assert f"{trap}/libdep.so" in entry["detail"] and words in entry["detail"]
    assert backend.exists()


@needs_cc
@pytest.mark.parametrize("at_start, later", [(None, "trap"), ("trap", "/nonexistent")])
def test_ld_library_path_counts_as_the_process_started_with_it(tmp_path, at_start, later):
    # The dynamic linker reads LD_LIBRARY_PATH once, at start-up; so does the dependency check.
    scan_dir = _backend_needing(tmp_path, "-Wl,-soname,libdep.so")
    trap = tmp_path / "trap"
    trap.mkdir()
    _plant("fifo", trap / "libdep.so")
    os.unlink(tmp_path / "libdep.so")
    env = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
    if at_start:
        env["LD_LIBRARY_PATH"] = str(trap)
    code = ("import json, os, sys, loader\n"
            f"os.environ['LD_LIBRARY_PATH'] = {str(trap) if later == 'trap' else later!r}\n"
            "with loader.Runtime(dynamic_backends_path=sys.argv[1]) as runtime:\n"
            "    print(json.dumps(runtime.report['entries']))\n")
    result = subprocess.run([sys.executable, "-c", code, str(scan_dir)], capture_output=True,
                            text=True, timeout=60, cwd="/", env=env)
    assert result.returncode == 0, result.stderr[-2000:]
    [entry] = json.loads(result.stdout)
    assert entry["reason"] == "missing-dependency", entry
    if at_start:
        assert f"{trap}/libdep.so" in entry["detail"] and "a FIFO" in entry["detail"], entry
    else:
        assert entry["detail"] == "needs libdep.so, which the dynamic linker cannot find", entry


def test_the_start_up_environment_is_read_whole_however_large():
    # /proc/self/environ is read into a buffer that grows: a value far past its first size counts.
    env = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
    env["PADDING"] = "x" * 100_000
    env["LD_LIBRARY_PATH"] = "/after/the/padding"   # after the padding in /proc/self/environ
    code = ("from loader import _core\n"
            "print(_core.startup_environment_value(b'LD_LIBRARY_PATH'),"
            " _core.startup_environment_value(b'NOT_SET_AT_START'))\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=60, cwd="/", env=env)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split() == ["b'/after/the/padding'", "None"]


@needs_cc
@pytest.mark.parametrize("library_path", [":/nonexistent", "/nonexistent;{trap}"])
def test_ld_library_path_is_split_and_read_as_the_linker_reads_it(tmp_path, library_path):
    # The dynamic linker splits LD_LIBRARY_PATH on ':' and ';', and an empty element is the
    # current directory. A FIFO reached that way, before the regular library the backend's
    # run path holds, would block dlopen: the backend is refused instead.
    scan_dir = _backend_needing(tmp_path, "-Wl,-soname,libdep.so")
    _cc(tmp_path, "scan/Acme_FifoDep_backend.so", BACKEND, f"-L{tmp_path}", "-Wl,--no-as-needed",
        "-ldep", f"-Wl,-rpath,{tmp_path}", "-Wl,--enable-new-dtags")
    trap = tmp_path / "trap"
    trap.mkdir()
    _plant("fifo", trap / "libdep.so")
    env = dict(os.environ, LD_LIBRARY_PATH=library_path.format(trap=trap))
    result = subprocess.run([sys.executable, "-m", "loader", "scan", "--json", "--path",
                             str(scan_dir)], capture_output=True, text=True, timeout=60,
                            cwd=str(trap), env=env)
    assert result.returncode == 0, result.stderr[-2000:]
    [entry] = json.loads(result.stdout)["entries"]
    assert entry["reason"] == "missing-dependency", entry
    assert f"{trap}/libdep.so" in entry["detail"] and "a FIFO" in entry["detail"], entry


@needs_cc
def test_a_regular_needed_library_after_the_search_path_is_still_found(tmp_path):
    scan_dir = _backend_needing(tmp_path, "-Wl,-soname,libdep.so")
    _cc(tmp_path, "scan/Acme_FifoDep_backend.so", BACKEND, f"-L{tmp_path}", "-Wl,--no-as-needed",
        "-ldep", f"-Wl,-rpath,{tmp_path}")
    # It loads: its factory is reached (and returns NULL, as this one does).
    assert _scan_child(scan_dir)["reason"] == "factory-failed"


def test_libraries_already_loaded_are_recognised_by_soname_and_path():
    assert loader._core.is_library_loaded("libc.so.6")
    assert loader._core.is_library_loaded(os.path.realpath(loader._core.__file__))
    assert not loader._core.is_library_loaded("libdbk_never_built.so.7")


@needs_cc
def test_a_library_loaded_then_unloaded_counts_as_loaded_only_meanwhile(tmp_path):
    import _ctypes
    import ctypes
    _cc(tmp_path, "libdbk_passing.so", "int passing(void) { return 1; }\n",
        "-Wl,-soname,libdbk_passing.so.3")
    assert not loader._core.is_library_loaded("libdbk_passing.so.3")
    library = ctypes.CDLL(str(tmp_path / "libdbk_passing.so"), mode=os.RTLD_LOCAL)
    assert loader._core.is_library_loaded("libdbk_passing.so.3")  # by soname
    assert loader._core.is_library_loaded(str(tmp_path / "libdbk_passing.so"))  # by path
    _ctypes.dlclose(library._handle)
    assert not loader._core.is_library_loaded("libdbk_passing.so.3")


# -- 2. arithmetic on offsets, sizes and counts from the file ------------------------------------

def _reference():
    with open(reference_backend.LIBRARY_PATH, "rb") as f:
        return bytearray(f.read())


class Elf:
    """Just enough of a 64-bit little-endian ELF file to find the fields the tests corrupt."""

    def __init__(self, data):
        self.data = data
        self.phoff, = struct.unpack_from("<Q", data, 32)
        self.phnum, = struct.unpack_from("<H", data, 56)

    def phdr(self, index):
        """Offset of program header ``index``."""
        return self.phoff + 56 * index

    def phdrs(self, p_type):
        return [i for i in range(self.phnum) if struct.unpack_from("<I", self.data, self.phdr(i))[0] == p_type]

    def field(self, index, name):
        offsets = {"type": 0, "flags": 4, "offset": 8, "vaddr": 16, "filesz": 32, "memsz": 40,
                   "align": 48}
        return self.phdr(index) + offsets[name]

    def get(self, at, size=8):
        return int.from_bytes(self.data[at:at + size], "little")

    def put(self, at, value, size=8):
        self.data[at:at + size] = (value % (1 << (8 * size))).to_bytes(size, "little")

    def file_offset(self, vaddr):
        for i in self.phdrs(1):
            start, offset = self.get(self.field(i, "vaddr")), self.get(self.field(i, "offset"))
            if start <= vaddr < start + self.get(self.field(i, "filesz")):
                return offset + vaddr - start
        raise LookupError(hex(vaddr))

    def dynamic(self):
        """[(tag, offset of the entry)] up to DT_NULL."""
        [index] = self.phdrs(2)
        at = self.file_offset(self.get(self.field(index, "vaddr")))
        entries = []
        while True:
            tag = self.get(at)
            entries.append((tag, at))
            if tag == 0:
                return entries
            at += 16

    def dyn(self, tag):
        """Offset of the value of the (last) dynamic entry with ``tag``."""
        return [at for t, at in self.dynamic() if t == tag][-1] + 8

    def table(self, tag):
        """File offset of the table a dynamic entry points to."""
        return self.file_offset(self.get(self.dyn(tag)))

    def section(self, wanted):
        """(sh_addr, sh_offset, sh_size) of the section named ``wanted``."""
        shoff, shnum, shstrndx = self.get(40), self.get(60, 2), self.get(62, 2)
        names = self.get(shoff + 64 * shstrndx + 24)
        for i in range(shnum):
            at = shoff + 64 * i
            start = names + self.get(at, 4)
            if self.data[start:self.data.index(b"\0", start)].decode() == wanted:
                return self.get(at + 16), self.get(at + 24), self.get(at + 32)
        raise LookupError(wanted)

    def symbol(self, name):
        """File offset of the dynamic symbol ``name``."""
        symbols, strings = self.table(DT_SYMTAB), self.table(DT_STRTAB)
        for i in range(1, 10_000):
            start = strings + self.get(symbols + 24 * i, 4)
            if self.data[start:self.data.index(b"\0", start)] == name.encode():
                return symbols + 24 * i
        raise LookupError(name)


def _check(data, tmp_path, name="Acme_Bad_backend.so"):
    path = tmp_path / name
    path.write_bytes(bytes(data))
    return loader._core.check_elf_file(str(path))


@elf64_le
@pytest.mark.parametrize("phoff", [2**64 - 504, 2**64 - 8, 2**63, 2**64 - 56 * 9 + 1])
def test_program_header_offsets_that_wrap_are_refused_the_same_way_every_time(tmp_path, phoff):
    elf = Elf(_reference())
    elf.put(32, phoff)
    first = _check(elf.data, tmp_path)
    assert first == ("not-a-shared-object",
                     "malformed ELF file: the program header table (e_phoff, e_phnum) lies "
                     "outside the file")
    assert all(_check(elf.data, tmp_path) == first for _ in range(5))


@elf64_le
def test_a_needed_name_outside_the_string_table_is_refused_not_skipped(tmp_path):
    elf = Elf(_reference())
    elf.put(elf.dyn(1), elf.get(elf.dyn(10)) + 100)  # DT_NEEDED past DT_STRSZ
    reason, detail = _check(elf.data, tmp_path)
    assert reason == "not-a-shared-object" and "DT_NEEDED" in detail
    entry = _scan_child(tmp_path, timeout=30)  # the file is alone in tmp_path
    assert entry["reason"] == "not-a-shared-object" and "DT_NEEDED" in entry["detail"]


def _many_needed(count):
    """A minimal 64-bit shared object whose dynamic section lists ``count`` DT_NEEDED entries."""
    strings = b"\0libc.so.6\0"
    dynamic = struct.pack("<qQ", 1, 1) * count + struct.pack("<qQqQqQ", 5, 0, 10, len(strings), 0, 0)
    header_size, phdr_size = 64, 56
    strtab_at = header_size + 2 * phdr_size
    dynamic_at = (strtab_at + len(strings) + 7) & ~7
    size = dynamic_at + len(dynamic)
    dynamic = dynamic.replace(struct.pack("<qQ", 5, 0), struct.pack("<qQ", 5, strtab_at))
    machine = 62 if sys.platform == "linux" else 0
    ident = b"\x7fELF" + bytes([2, 1, 1, 0]) + bytes(8)
    header = ident + struct.pack("<HHIQQQIHHHHHH", 3, machine, 1, 0, header_size, 0, 0,
                                 header_size, phdr_size, 2, 64, 0, 0)
    load = struct.pack("<IIQQQQQQ", 1, 6, 0, 0, 0, size, size, 0x1000)
    dyn = struct.pack("<IIQQQQQQ", 2, 6, dynamic_at, dynamic_at, dynamic_at, len(dynamic),
                      len(dynamic), 8)
    data = header + load + dyn + strings
    return data + bytes(dynamic_at - len(data)) + dynamic


@elf64_le
@pytest.mark.skipif(os.uname().machine != "x86_64", reason="the file is built for x86-64")
@pytest.mark.parametrize("count, words", [(40_000, "PT_DYNAMIC"), (300, "more than 256 DT_NEEDED")])
def test_absurd_numbers_of_needed_libraries_are_refused_before_any_work(tmp_path, count, words):
    (tmp_path / "Acme_Many_backend.so").write_bytes(_many_needed(count))
    reason, detail = loader._core.check_elf_file(str(tmp_path / "Acme_Many_backend.so"))
    assert reason == "not-a-shared-object" and words in detail
    (tmp_path / "Acme_Many_backend.so").write_bytes(_many_needed(3))
    assert loader._core.check_elf_file(str(tmp_path / "Acme_Many_backend.so")) == (None, "")


# -- 4. structure: what the dynamic linker trusts, checked against the file ----------------------

PT_LOAD, PT_DYNAMIC, PT_NOTE, PT_GNU_RELRO = 1, 2, 4, 0x6474E552
DT_NEEDED, DT_STRTAB, DT_SYMTAB, DT_RELA, DT_RELASZ, DT_RELAENT, DT_STRSZ, DT_INIT = 1, 5, 6, 7, 8, 9, 10, 12
DT_INIT_ARRAY, DT_GNU_HASH, DT_VERSYM, DT_VERNEED = 25, 0x6FFFFEF5, 0x6FFFFFF0, 0x6FFFFFFE


def _loads(elf):
    return elf.phdrs(PT_LOAD)


def _first_relocation(elf):
    return elf.table(DT_RELA)


STRUCTURE = {
    # name: (how to break the reference backend, words the detail must contain)
    "memsz below filesz": (lambda e: e.put(e.field(_loads(e)[1], "memsz"), 16), "p_memsz"),
    "alignment not a power of two": (lambda e: e.put(e.field(_loads(e)[0], "align"), 0x3000),
                                     "p_align"),
    "offset and address not congruent": (lambda e: e.put(e.field(_loads(e)[1], "vaddr"),
                                                         e.get(e.field(_loads(e)[1], "vaddr")) + 8),
                                         "p_offset and p_vaddr"),
    "segments out of order": (lambda e: e.put(e.field(_loads(e)[2], "vaddr"), 0), "ascending"),
    "two dynamic segments": (lambda e: e.put(e.field(e.phdrs(PT_NOTE)[0], "type"), PT_DYNAMIC, 4),
                             "more than one PT_DYNAMIC"),
    "dynamic segment outside the loads": (lambda e: e.put(e.field(e.phdrs(PT_DYNAMIC)[0], "vaddr"),
                                                          1 << 40), "PT_DYNAMIC"),
    "relro outside the loads": (lambda e: e.put(e.field(e.phdrs(PT_GNU_RELRO)[0], "memsz"), 1 << 30),
                                "PT_GNU_RELRO"),
    "string table outside the file": (lambda e: e.put(e.dyn(DT_STRTAB), 1 << 40), "DT_STRTAB"),
    "string table size past its segment": (lambda e: e.put(e.dyn(DT_STRSZ), 1 << 20), "DT_STRTAB"),
    "relocations past the file": (lambda e: e.put(e.dyn(DT_RELASZ), 2**64 - 24), "DT_RELA"),
    "relocation entry size": (lambda e: e.put(e.dyn(DT_RELAENT), 16), "DT_RELAENT"),
    "relocation offset outside the segments": (lambda e: e.put(_first_relocation(e), 1 << 40),
                                               "r_offset"),
    "relocation offset in read-only code": (lambda e: e.put(_first_relocation(e), 0x1000),
                                            "writable"),
    "relocation symbol past the table": (lambda e: e.put(_first_relocation(e) + 12, 0xFFFFFF, 4),
                                         "symbol"),
    "relocation of unknown type": (lambda e: e.put(_first_relocation(e) + 8, 0xEE, 4), "type"),
    "hash table without buckets": (lambda e: e.put(e.table(DT_GNU_HASH), 0, 4), "DT_GNU_HASH"),
    "version index past the version records": (lambda e: e.put(e.table(DT_VERSYM) + 2, 0x7000, 2),
                                               "DT_VERSYM"),
    "version record naming no needed library": (lambda e: e.put(e.table(DT_VERNEED) + 4, 1, 4),
                                                "DT_VERNEED"),
    "init function outside the code": (lambda e: e.put(e.dyn(DT_INIT), 0x10), "DT_INIT"),
    "init array function outside the code": (lambda e: _break_init_array(e), "DT_INIT_ARRAY"),
    "symbol table gone": (lambda e: e.put(e.dyn(DT_SYMTAB) - 8, 0x7FFF0000), "DT_SYMENT"),
    # The file agrees with itself but not with its section table: the segments map other bytes
    # than the linker put there.
    ".bss filled with file bytes": (lambda e: _fill_bss_from_the_file(e), "SHT_NOBITS section (.bss)"),
    "code mapped from another file offset": (lambda e: _move_code_segment(e), "p_offset disagrees"),
    "data cut from the file part": (lambda e: _cut_data(e), "p_filesz disagrees"),
    "weak import made local": (lambda e: _make_local(e, "__cxa_finalize"), "undefined symbol is local"),
    # Relocations a linker never writes.
    "symbol relocation turned relative": (lambda e: e.put(_relocations(e, DT_RELA, DT_RELASZ, R_GLOB_DAT)[0] + 8,
                                                          R_RELATIVE, 4), "relative relocation names a symbol"),
    "PLT relocation without its symbol": (lambda e: e.put(_relocations(e, DT_JMPREL, DT_PLTRELSZ, R_JUMP_SLOT)[0] + 12,
                                                          0, 4), "names no symbol"),
    "PLT relocation off its slot": (lambda e: _shift(e, _relocations(e, DT_JMPREL, DT_PLTRELSZ, R_JUMP_SLOT)[0], 4),
                                    "not a whole GOT slot"),
    "PLT slot filled twice": (lambda e: _shift(e, _relocations(e, DT_JMPREL, DT_PLTRELSZ, R_JUMP_SLOT)[0], 8),
                              "ascending slot order"),
}

DT_PLTRELSZ, DT_JMPREL = 2, 23
R_GLOB_DAT, R_JUMP_SLOT, R_RELATIVE = 6, 7, 8


def _relocations(elf, table_tag, size_tag, r_type):
    """File offsets of the relocations of type ``r_type`` in a table."""
    at = elf.table(table_tag)
    return [at + k for k in range(0, elf.get(elf.dyn(size_tag)), 24) if elf.get(at + k + 8, 4) == r_type]


def _shift(elf, relocation, by):
    elf.put(relocation, elf.get(relocation) + by)


def _writable_load(elf):
    [index] = [i for i in _loads(elf) if elf.get(elf.field(i, "flags"), 4) & 2]
    return index


def _fill_bss_from_the_file(elf):
    """The writable segment's p_filesz grows (still below p_memsz) to cover the start of .bss."""
    index = _writable_load(elf)
    bss, _, _ = elf.section(".bss")
    elf.put(elf.field(index, "filesz"), bss - elf.get(elf.field(index, "vaddr")) + 0x100)
    assert elf.get(elf.field(index, "filesz")) <= elf.get(elf.field(index, "memsz"))


def _move_code_segment(elf):
    """The executable segment is mapped from one page earlier in the file (still congruent)."""
    [index] = [i for i in _loads(elf) if elf.get(elf.field(i, "flags"), 4) & 1]
    elf.put(elf.field(index, "offset"), elf.get(elf.field(index, "offset")) - 0x1000)


def _cut_data(elf):
    """The writable segment's file part ends before .data does: its tail would be zeros."""
    index = _writable_load(elf)
    data, _, size = elf.section(".data")
    elf.put(elf.field(index, "filesz"), data - elf.get(elf.field(index, "vaddr")) + size // 2)


def _make_local(elf, name):
    """The weak undefined symbol ``name`` becomes STB_LOCAL (type kept)."""
    at = elf.symbol(name) + 4
    elf.put(at, elf.get(at, 1) & 0xF, 1)


def _break_init_array(elf):
    """The relative relocation that fills the first init_array slot now points into data."""
    slot = elf.get(elf.dyn(DT_INIT_ARRAY))
    at = _first_relocation(elf)
    while elf.get(at) != slot:
        at += 24
    elf.put(at + 16, elf.get(elf.dyn(DT_INIT_ARRAY)))


# The checks read the dynamic section and the section table together when they lie close (a
# small or stripped library), apart otherwise: every layout gets every check.
SMALL_BACKEND = ('#include <stdint.h>\n#include <stdlib.h>\n'
                 'static int calls[256];\n'  # a .bss
                 'const char *GetBackendId(void) '
                 '{ calls[0]++; return getenv("DBK_UNSET") ? "Hostile" : "Hostile"; }\n'
                 'void GetVersion(uint32_t *a, uint32_t *b) '
                 '{ *a = 1; *b = (uint32_t)atoi("1") + (uint32_t)calls[0]; }\n'  # two PLT slots
                 'void *BackendFactory(void) { return 0; }\n')
LAYOUTS = ("as linked", "section table beside the dynamic section", "small library")


def _bytes_between_dynamic_section_and_section_table(data):
    elf = Elf(data)
    [dynamic] = elf.phdrs(PT_DYNAMIC)
    return elf.get(40) - (elf.get(elf.field(dynamic, "offset")) + elf.get(elf.field(dynamic, "filesz")))


def _section_table_beside_the_dynamic_section():
    """The reference backend with its section table moved to just past the writable segment's
    file part (over debugging data the loader never reads): a few hundred bytes after the dynamic
    section, instead of 420 KiB."""
    data = _reference()
    elf = Elf(data)
    shoff, shnum = elf.get(40), elf.get(60, 2)
    index = _writable_load(elf)
    at = (elf.get(elf.field(index, "offset")) + elf.get(elf.field(index, "filesz")) + 63) & ~63
    data[at:at + 64 * shnum] = data[shoff:shoff + 64 * shnum]
    elf.put(40, at)
    assert 0 < _bytes_between_dynamic_section_and_section_table(data) < 1024
    return data


@pytest.fixture(scope="module")
def small_backend(tmp_path_factory):
    """A small backend with everything the defects need: PLT slots, version records, a .bss.
    Its dynamic section (past its first page) and its section table lie less than 4 KiB apart."""
    if CC is None:
        pytest.skip("needs a C compiler")
    directory = tmp_path_factory.mktemp("small")
    _cc(directory, "Acme_Small_backend.so", SMALL_BACKEND)
    data = (directory / "Acme_Small_backend.so").read_bytes()
    assert 0 < _bytes_between_dynamic_section_and_section_table(bytearray(data)) < 4096
    return data


def _layout(request, layout):
    if layout == "small library":
        return bytearray(request.getfixturevalue("small_backend"))
    return _reference() if layout == "as linked" else _section_table_beside_the_dynamic_section()


@elf64_le
@pytest.mark.skipif(os.uname().machine != "x86_64", reason="relocation types are x86-64's")
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("name", sorted(STRUCTURE))
def test_structural_defects_are_refused_with_the_field_named(tmp_path, request, name, layout):
    original = _layout(request, layout)
    assert _check(original, tmp_path) == (None, ""), f"the {layout} backend itself must pass"
    breaker, words = STRUCTURE[name]
    elf = Elf(original)
    breaker(elf)
    reason, detail = _check(elf.data, tmp_path)
    assert reason == "not-a-shared-object", (name, reason, detail)
    assert detail.startswith("malformed ELF file: ") and words in detail, detail


@elf64_le
@pytest.mark.parametrize("name", [".bss filled with file bytes", "code mapped from another file offset",
                                  "weak import made local"])
def test_a_file_whose_segments_contradict_its_sections_never_reaches_dlopen(tmp_path, name):
    # Loaded, these die (code read from the headers; the weak __cxa_finalize bound to the load
    # address and called at unload) or, in a backend that trusts its .bss to start zeroed, hang
    # (the reference backend no longer does: test_reference_bss.py).
    elf = Elf(_reference())
    STRUCTURE[name][0](elf)
    (tmp_path / "Acme_Bad_backend.so").write_bytes(bytes(elf.data))
    entry = _scan_child(tmp_path, timeout=30)
    assert entry["reason"] == "not-a-shared-object", entry
    assert STRUCTURE[name][1] in entry["detail"], entry


@elf64_le
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("header, value, size", [(40, 0, 8),         # e_shoff: no section table
                                                 (40, 64, 8),        # e_shoff: the program headers
                                                 (58, 40, 2),        # e_shentsize
                                                 (60, 0xFFFF, 2)])   # e_shnum: past the file
def test_a_section_table_that_is_not_whole_is_no_evidence(tmp_path, request, header, value, size,
                                                          layout):
    # Without a section table to contradict, the enlarged .bss cannot be told from a real one:
    # the file is not refused for it (isolated probing is what protects the host then).
    elf = Elf(_layout(request, layout))
    elf.put(header, value, size)
    assert _check(elf.data, tmp_path) == (None, "")
    elf = Elf(_layout(request, layout))
    _fill_bss_from_the_file(elf)
    assert "SHT_NOBITS" in _check(elf.data, tmp_path)[1]
    elf.put(header, value, size)
    assert _check(elf.data, tmp_path) == (None, "")


@needs_cc
def test_thread_local_bss_inside_the_file_part_is_not_a_contradiction(tmp_path):
    # .tbss is a template: its address lies among the data that follow it, inside the file part.
    source = BACKEND.replace("return \"Hostile\";", "return counter + seeded ? \"Tls\" : \"Tls\";")
    _cc(tmp_path, "Acme_Tls_backend.so", "__thread int counter; __thread int seeded = 7;\n" + source)
    elf = Elf(bytearray((tmp_path / "Acme_Tls_backend.so").read_bytes()))
    tbss, _, _ = elf.section(".tbss")
    index = _writable_load(elf)
    start = elf.get(elf.field(index, "vaddr"))
    assert start <= tbss < start + elf.get(elf.field(index, "filesz"))
    assert loader._core.check_elf_file(str(tmp_path / "Acme_Tls_backend.so")) == (None, "")


def test_every_shared_object_of_this_process_passes_the_checks():
    """No false alarms on real libraries: the ones this very process has loaded."""
    with open("/proc/self/maps") as f:
        paths = {line.split()[-1] for line in f if ".so" in line and line.split()[-1].startswith("/")}
    checked = 0
    for path in sorted(paths):
        if os.path.isfile(path):
            assert loader._core.check_elf_file(path) == (None, ""), path
            checked += 1
    assert checked >= 5


@pytest.mark.parametrize("machine, name", [(183, "AArch64"), (3, "i386"), (40, "ARM"),
                                           (243, "RISC-V"), (21, "PowerPC64"), (22, "s390x"),
                                           (0x1234, "ELF machine 4660")])
@elf64_le
def test_wrong_architecture_names_the_machine(tmp_path, machine, name):
    data = _reference()
    data[18:20] = struct.pack("<H", machine)
    reason, detail = _check(data, tmp_path)
    assert reason == "wrong-architecture"
    assert detail.startswith(f"built for {name}, this process is ")


# -- 3. isolated mode never repeats in the host a load the probe did not complete ---------------

HOST_ONLY = ('#include <signal.h>\n'
             'extern void *PyExc_RuntimeError;\n'  # exported by Python, not by the probe program
             '__attribute__((constructor)) static void boom(void) '
             '{ if (PyExc_RuntimeError) raise(SIGSEGV); }\n' + BACKEND)


@needs_cc
def test_a_library_the_probe_could_not_load_never_reaches_the_host(tmp_path):
    scan_dir = tmp_path / "scan"
    scan_dir.mkdir()
    _cc(scan_dir, "Acme_HostOnly_backend.so", HOST_ONLY)
    entry = _scan_child(scan_dir, "--isolated", timeout=30)
    assert entry["reason"] == "dlopen-failed"
    assert "PyExc_RuntimeError" in entry["detail"]


@needs_cc
def test_a_library_the_probe_loaded_cleanly_gets_the_hosts_precise_reason(tmp_path):
    # Loaded and unloaded cleanly in the probe, but without BackendFactory: the host loads it
    # and names the missing entry point.
    scan_dir = tmp_path / "scan"
    scan_dir.mkdir()
    _cc(scan_dir, "Acme_Fine_backend.so", BACKEND.replace("BackendFactory", "BackendFactorie"))
    with loader.Runtime(dynamic_backends_path=str(scan_dir), probe="isolated") as runtime:
        [entry] = runtime.report["entries"]
    assert entry["reason"] == "missing-symbol" and "BackendFactory" in entry["detail"]


# -- 5. the fuzzer, on a small fixed set of mutants ---------------------------------------------

def _fuzzer():
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                    "benchmarks"))
    try:
        import fuzz_elf
    finally:
        sys.path.pop(0)
    return fuzz_elf


@elf64_le
def test_corrupted_copies_of_the_reference_backend_never_kill_hang_or_raise(tmp_path):
    # Mutants 0-39 of seed 1: 14 of them killed the scanning process before the structural checks.
    summary = _fuzzer().run(range(40), seed=1, jobs=2, timeout=30, probe_timeout=5,
                            save=str(tmp_path / "crashers"))
    assert summary["mutants"] == 40
    for mode, stats in summary["modes"].items():
        assert stats["outcomes"] == {"death": [], "hang": [], "exception": []}, mode
        assert stats["reasons"]["not-a-shared-object"] > 10, stats["reasons"]
