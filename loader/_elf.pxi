# What can be decided from a file before dlopen: the ELF reader of loader/native/elf/ checks the
# header and every structure the dynamic linker will trust (elf_reader.h lists the checks); here
# its verdict becomes a reason code, and what it read becomes Python objects: the needed
# libraries for the loader, the dynamic symbols for the conformance kit. Included into _core.pyx.

cdef extern from "<unistd.h>" nogil:
    long sysconf(int name)
    enum:
        _SC_PAGESIZE


cdef elf_reader.dbk_identity _own  # this process's class, byte order and machine
cdef long _page_size = sysconf(_SC_PAGESIZE)


cdef elf_reader.dbk_verdict _check_elf(const char *path, elf_reader.dbk_elf *e,
                                       uint64_t *detail) noexcept nogil:
    """Check the file against this process. ``e`` must have been through dbk_elf_init; the
    caller releases it with _release, whatever the verdict."""
    return elf_reader.dbk_check_file(e, path, &_own, _page_size, detail)


cdef void _release(elf_reader.dbk_elf *e) noexcept nogil:
    elf_reader.dbk_elf_free(e)


def _learn_own_elf_identity(str module_path):
    """This process's ELF class, byte order and machine, read from this very extension module."""
    cdef unsigned char header[20]  # e_ident, e_type, e_machine
    cdef uint16_t machine
    cdef bytes path = os.fsencode(module_path)
    cdef int fd = c_open(path, O_RDONLY | O_CLOEXEC)
    if fd < 0:
        raise OSError(errno, "cannot read own ELF header", module_path)
    got = pread(fd, header, sizeof(header), 0)
    c_close(fd)
    if got != sizeof(header):
        raise OSError("cannot read own ELF header", module_path)
    memcpy(&machine, header + 18, sizeof(machine))
    _own.elf_class = header[4]
    _own.byte_order = header[5]
    _own.machine = machine


_learn_own_elf_identity(__file__)

_ELF_CLASS_NAMES = {1: "32-bit", 2: "64-bit"}
_ELF_DATA_NAMES = {1: "little-endian", 2: "big-endian"}
_ELF_TYPE_NAMES = {0: "of no type", 1: "a relocatable object", 2: "an executable", 4: "a core file"}
_ELF_MACHINE_NAMES = {
    2: "SPARC", 3: "i386", 4: "Motorola 68000", 8: "MIPS", 15: "PA-RISC", 18: "SPARC32+",
    20: "PowerPC", 21: "PowerPC64", 22: "s390x", 40: "ARM", 42: "SuperH", 43: "SPARC V9",
    50: "IA-64", 62: "x86-64", 183: "AArch64", 190: "CUDA", 224: "AMDGPU", 243: "RISC-V",
    247: "BPF", 258: "LoongArch",
}


def elf_machine_name(int machine):
    """x86-64 for 62, AArch64 for 183, ...; "ELF machine N" for a number without a name."""
    return _ELF_MACHINE_NAMES.get(machine, f"ELF machine {machine}")


cdef tuple _check_elf_file(bytes path):
    """(reason, detail) when the file cannot be a shared object for this process, else None."""
    cdef uint64_t detail = 0
    cdef elf_reader.dbk_elf elf
    cdef elf_reader.dbk_elf *e = &elf
    cdef elf_reader.dbk_verdict verdict
    cdef const char *c_path = path
    elf_reader.dbk_elf_init(e)
    try:
        with nogil:
            verdict = _check_elf(c_path, e, &detail)
        return None if verdict == elf_reader.DBK_ELF_OK else _elf_verdict(verdict, detail, e)
    finally:
        _release(e)


cdef tuple _elf_verdict(elf_reader.dbk_verdict verdict, uint64_t detail,
                        const elf_reader.dbk_elf *e):
    """(reason, detail) for a failed _check_elf."""
    if verdict == elf_reader.DBK_ELF_OPEN_FAILED:
        return Reason.UNREADABLE, _strerror(<int>detail)
    if verdict == elf_reader.DBK_ELF_NOT_REGULAR:
        return Reason.NOT_A_REGULAR_FILE, "no longer a regular file"
    if verdict == elf_reader.DBK_ELF_NOT_ELF:
        return Reason.NOT_A_SHARED_OBJECT, "not an ELF file"
    if verdict == elf_reader.DBK_ELF_TRUNCATED_HEADER:
        return Reason.NOT_A_SHARED_OBJECT, "truncated ELF header"
    if verdict == elf_reader.DBK_ELF_WRONG_CLASS:
        return (Reason.WRONG_ARCHITECTURE, f"ELF class is {_ELF_CLASS_NAMES.get(detail, detail)}, "
                f"this process is {_ELF_CLASS_NAMES.get(_own.elf_class, _own.elf_class)}")
    if verdict == elf_reader.DBK_ELF_WRONG_BYTE_ORDER:
        return (Reason.WRONG_ARCHITECTURE, f"{_ELF_DATA_NAMES.get(detail, detail)} ELF file, "
                f"this process is {_ELF_DATA_NAMES.get(_own.byte_order, _own.byte_order)}")
    if verdict == elf_reader.DBK_ELF_WRONG_TYPE:
        return Reason.NOT_A_SHARED_OBJECT, f"ELF file is {_ELF_TYPE_NAMES.get(detail, detail)}"
    if verdict == elf_reader.DBK_ELF_WRONG_MACHINE:
        return (Reason.WRONG_ARCHITECTURE, f"built for {elf_machine_name(<int>detail)}, "
                f"this process is {elf_machine_name(_own.machine)}")
    if verdict == elf_reader.DBK_ELF_TRUNCATED:
        return (Reason.NOT_A_SHARED_OBJECT,
                f"truncated: its segments need {e.needed_bytes} bytes, the file has {e.file_size}")
    return (Reason.NOT_A_SHARED_OBJECT,
            "malformed ELF file: " + (<bytes>e.problem).decode("ascii") if e.problem != NULL
            else "malformed ELF file")


_CANNOT_OPEN = ": cannot open shared object file"


cdef tuple _classify_dlopen_error(str path, str message):
    """Map the dynamic linker's message to a reason code."""
    cdef Py_ssize_t at = message.find(_CANNOT_OPEN)
    if at > 0 and message[:at] != path:
        return Reason.MISSING_DEPENDENCY, f"needs {message[:at]}, which the dynamic linker cannot find"
    if ("invalid ELF header" in message or "file too short" in message
            or "position-independent executable" in message or "not a shared object" in message.lower()):
        return Reason.NOT_A_SHARED_OBJECT, message
    if "wrong ELF class" in message:
        return Reason.WRONG_ARCHITECTURE, message
    return Reason.DLOPEN_FAILED, message


def classify_dlopen_error(str path, str message):
    """``(reason, detail)`` for the dynamic linker's message on failing to load ``path``."""
    return _classify_dlopen_error(path, message)


cdef inline object _string_at(const elf_reader.dbk_elf *e, int64_t offset):
    """The string at ``offset`` of a checked file's string table (DT_RPATH, DT_RUNPATH), or None
    for -1 (absent)."""
    return PyUnicode_DecodeFSDefault(e.strtab + offset) if offset >= 0 else None


def inspect_elf_file(str path):
    """The pre-dlopen look at a file: ``(reason, detail, dependencies)``. ``reason`` and
    ``detail`` as check_elf_file gives them; ``dependencies`` is, for a file that passed,
    ``(needed, rpath, runpath, filters)`` as read from its dynamic section (without the names
    already loaded), else None."""
    cdef bytes encoded = os.fsencode(path)
    cdef const char *c_path = encoded
    cdef uint64_t detail = 0
    cdef elf_reader.dbk_elf elf
    cdef elf_reader.dbk_elf *e = &elf
    cdef elf_reader.dbk_verdict verdict
    elf_reader.dbk_elf_init(e)
    try:
        with nogil:
            verdict = _check_elf(c_path, e, &detail)
        if verdict != elf_reader.DBK_ELF_OK:
            return _elf_verdict(verdict, detail, e) + (None,)
        return None, "", _dynamic_dependencies(e, _first_unloaded(e))
    finally:
        _release(e)


def check_elf_file(path):
    """``(reason, detail)`` when ``path`` cannot be a shared object for this process, else
    ``(None, "")``. Reads the file; never loads it."""
    failure = _check_elf_file(os.fsencode(path))
    return (None, "") if failure is None else failure


def read_elf_file(str path):
    """What the conformance kit reads from a file, without loading it: ``(reason, detail,
    None)`` when the pre-dlopen checks refuse it (as check_elf_file), else ``(None, "",
    contents)``, ``contents`` being ``(elf_class, byte_order, file_type, machine, symbols,
    needed, rpath, runpath)``: ``symbols`` as ``(name, binding, type, defined)`` for each named
    dynamic symbol the hash tables or relocations reach (what a lookup by name can find), in
    table order; ``needed`` every DT_NEEDED name, loaded or not; DT_RPATH and DT_RUNPATH or
    None."""
    cdef bytes encoded = os.fsencode(path)
    cdef const char *c_path = encoded
    cdef uint64_t detail = 0, i
    cdef elf_reader.dbk_elf elf
    cdef elf_reader.dbk_elf *e = &elf
    cdef elf_reader.dbk_symbol symbol
    cdef elf_reader.dbk_verdict verdict
    elf_reader.dbk_elf_init(e)
    try:
        with nogil:
            verdict = _check_elf(c_path, e, &detail)
        if verdict != elf_reader.DBK_ELF_OK:
            return _elf_verdict(verdict, detail, e) + (None,)
        symbols = []
        for i in range(e.n_symbols):
            elf_reader.dbk_symbol_at(e, i, &symbol)
            if symbol.name != NULL:
                symbols.append(((<bytes>symbol.name).decode("utf-8", "replace"), symbol.binding,
                                symbol.type, symbol.defined != 0))
        needed = [PyUnicode_DecodeFSDefault(e.strtab + e.needed[i]) for i in range(e.n_needed)]
        return None, "", (_own.elf_class, _own.byte_order, 3, _own.machine,  # 3: ET_DYN
                          symbols, needed, _string_at(e, e.rpath), _string_at(e, e.runpath))
    finally:
        _release(e)
