# What can be decided from a file before dlopen: the ELF header, segments inside the file,
# the needed libraries. Included into _core.pyx.

# ---------------------------------------------------------------------------------------------
# ELF pre-check: refuse what the dynamic linker would refuse (or crash on), with a precise reason.
# A truncated library is the important case: its segments are mapped past the end of the file
# and the first touch of such a page kills the process with SIGBUS inside dlopen.
# ---------------------------------------------------------------------------------------------

cdef extern from *:
    """
    #include <link.h>
    typedef ElfW(Ehdr) dbk_Ehdr;
    typedef ElfW(Phdr) dbk_Phdr;
    typedef ElfW(Dyn) dbk_Dyn;
    #define dbk_dyn_value(d) ((uint64_t)(d)->d_un.d_val)
    """
    ctypedef struct dbk_Ehdr:
        unsigned char e_ident[16]
        uint16_t e_type
        uint16_t e_machine
        uint64_t e_phoff
        uint16_t e_phentsize
        uint16_t e_phnum

    ctypedef struct dbk_Phdr:
        uint32_t p_type
        uint64_t p_offset
        uint64_t p_vaddr
        uint64_t p_filesz

    ctypedef struct dbk_Dyn:
        int64_t d_tag

    uint64_t dbk_dyn_value(const dbk_Dyn *d)

    enum:
        PT_LOAD
        PT_DYNAMIC
        DT_NULL
        DT_NEEDED
        DT_STRTAB
        DT_STRSZ
        DT_RPATH
        DT_RUNPATH


cdef enum ElfVerdict:
    ELF_OK
    ELF_OPEN_FAILED         # detail: errno
    ELF_NOT_REGULAR
    ELF_NOT_ELF
    ELF_TRUNCATED_HEADER
    ELF_WRONG_CLASS         # detail: the file's class
    ELF_WRONG_BYTE_ORDER    # detail: the file's byte order
    ELF_WRONG_TYPE          # detail: e_type
    ELF_WRONG_MACHINE       # detail: e_machine
    ELF_BAD_PROGRAM_HEADERS
    ELF_TRUNCATED           # detail: bytes the segments need; file size in *size

cdef enum:
    MAX_PROGRAM_HEADERS = 512

cdef unsigned char _own_class = 0, _own_data = 0
cdef unsigned int _own_machine = 0


cdef enum:
    FIRST_PAGE_WORDS = 512      # the first 4 KiB of a file: ELF and program headers usually fit


cdef int _check_elf(const char *path, uint64_t *detail, uint64_t *size, int *keep_fd,
                    uint64_t *page, ssize_t *page_bytes) noexcept nogil:
    """Check the ELF header and that every loadable segment lies inside the file. With
    ``keep_fd`` and a passing file, the open descriptor is handed over instead of closed; with
    ``page`` (FIRST_PAGE_WORDS words), the file's first bytes are left there for the caller."""
    cdef int fd = c_open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY)
    cdef struct_stat st
    cdef dbk_Ehdr header
    cdef uint64_t local_page[FIRST_PAGE_WORDS]
    cdef const dbk_Phdr *segments = NULL
    cdef dbk_Phdr *allocated = NULL
    cdef ssize_t got
    cdef uint64_t end, needed = 0
    cdef size_t table_size
    cdef int i, verdict = ELF_OK
    if page == NULL:
        page = local_page
    if fd < 0:
        detail[0] = errno
        return ELF_OPEN_FAILED
    if fstat(fd, &st) != 0 or not S_ISREG(st.st_mode):
        c_close(fd)
        return ELF_NOT_REGULAR
    size[0] = <uint64_t>st.st_size
    got = pread(fd, page, FIRST_PAGE_WORDS * sizeof(uint64_t), 0)
    if page_bytes != NULL:
        page_bytes[0] = got
    memset(&header, 0, sizeof(header))
    if got > 0:
        memcpy(&header, page, <size_t>got if <size_t>got < sizeof(header) else sizeof(header))
    if got < 4 or header.e_ident[0] != 0x7f or header.e_ident[1] != b'E' \
            or header.e_ident[2] != b'L' or header.e_ident[3] != b'F':
        verdict = ELF_NOT_ELF
    elif got < 6:
        verdict = ELF_TRUNCATED_HEADER
    elif header.e_ident[4] != _own_class:
        detail[0] = header.e_ident[4]
        verdict = ELF_WRONG_CLASS
    elif header.e_ident[5] != _own_data:
        detail[0] = header.e_ident[5]
        verdict = ELF_WRONG_BYTE_ORDER
    elif got < <ssize_t>sizeof(header):
        verdict = ELF_TRUNCATED_HEADER
    elif header.e_type != 3:  # ET_DYN
        detail[0] = header.e_type
        verdict = ELF_WRONG_TYPE
    elif header.e_machine != _own_machine:
        detail[0] = header.e_machine
        verdict = ELF_WRONG_MACHINE
    elif header.e_phentsize != sizeof(dbk_Phdr) or header.e_phnum == 0 \
            or header.e_phnum > MAX_PROGRAM_HEADERS:
        verdict = ELF_BAD_PROGRAM_HEADERS
    else:
        table_size = header.e_phnum * sizeof(dbk_Phdr)
        if header.e_phoff + table_size > size[0]:
            detail[0] = header.e_phoff + table_size
            verdict = ELF_TRUNCATED
        else:
            if header.e_phoff + table_size <= <uint64_t>got and header.e_phoff % 8 == 0:
                segments = <const dbk_Phdr *>(<const char *>page + header.e_phoff)
            else:
                allocated = <dbk_Phdr *>malloc(table_size)
                if allocated != NULL and \
                        pread(fd, allocated, table_size, header.e_phoff) == <ssize_t>table_size:
                    segments = allocated
            if segments == NULL:
                verdict = ELF_BAD_PROGRAM_HEADERS
            else:
                for i in range(header.e_phnum):
                    if segments[i].p_type == PT_LOAD or segments[i].p_type == PT_DYNAMIC:
                        end = segments[i].p_offset + segments[i].p_filesz
                        if end < segments[i].p_offset:  # wrapped around
                            end = <uint64_t>-1
                        if end > needed:
                            needed = end
                if needed > size[0]:
                    detail[0] = needed
                    verdict = ELF_TRUNCATED
            free(allocated)
    if keep_fd != NULL and verdict == ELF_OK:
        keep_fd[0] = fd
    else:
        c_close(fd)
    return verdict


def _learn_own_elf_identity(str module_path):
    """This process's ELF class, byte order and machine, read from this very extension module."""
    global _own_class, _own_data, _own_machine
    cdef dbk_Ehdr header
    cdef bytes path = os.fsencode(module_path)
    cdef int fd = c_open(path, O_RDONLY | O_CLOEXEC)
    if fd < 0:
        raise OSError(errno, "cannot read own ELF header", module_path)
    got = pread(fd, &header, sizeof(header), 0)
    c_close(fd)
    if got != sizeof(header):
        raise OSError("cannot read own ELF header", module_path)
    _own_class = header.e_ident[4]
    _own_data = header.e_ident[5]
    _own_machine = header.e_machine


_learn_own_elf_identity(__file__)

_ELF_CLASS_NAMES = {1: "32-bit", 2: "64-bit"}
_ELF_DATA_NAMES = {1: "little-endian", 2: "big-endian"}
_ELF_TYPE_NAMES = {0: "of no type", 1: "a relocatable object", 2: "an executable", 4: "a core file"}


cdef tuple _check_elf_file(bytes path):
    """(reason, detail) when the file cannot be a shared object for this process, else None."""
    cdef uint64_t detail = 0, size = 0
    cdef int verdict
    cdef const char *c_path = path
    with nogil:
        verdict = _check_elf(c_path, &detail, &size, NULL, NULL, NULL)
    if verdict == ELF_OK:
        return None
    return _elf_verdict(verdict, detail, size)


cdef tuple _elf_verdict(int verdict, uint64_t detail, uint64_t size):
    """(reason, detail) for a failed _check_elf."""
    if verdict == ELF_OPEN_FAILED:
        return Reason.UNREADABLE, _strerror(<int>detail)
    if verdict == ELF_NOT_REGULAR:
        return Reason.NOT_A_REGULAR_FILE, "no longer a regular file"
    if verdict == ELF_NOT_ELF:
        return Reason.NOT_A_SHARED_OBJECT, "not an ELF file"
    if verdict == ELF_TRUNCATED_HEADER:
        return Reason.NOT_A_SHARED_OBJECT, "truncated ELF header"
    if verdict == ELF_WRONG_CLASS:
        return (Reason.WRONG_ARCHITECTURE, f"ELF class is {_ELF_CLASS_NAMES.get(detail, detail)}, "
                f"this process is {_ELF_CLASS_NAMES.get(_own_class, _own_class)}")
    if verdict == ELF_WRONG_BYTE_ORDER:
        return (Reason.WRONG_ARCHITECTURE, f"{_ELF_DATA_NAMES.get(detail, detail)} ELF file, "
                f"this process is {_ELF_DATA_NAMES.get(_own_data, _own_data)}")
    if verdict == ELF_WRONG_TYPE:
        return Reason.NOT_A_SHARED_OBJECT, f"ELF file is {_ELF_TYPE_NAMES.get(detail, detail)}"
    if verdict == ELF_WRONG_MACHINE:
        return (Reason.WRONG_ARCHITECTURE,
                f"ELF machine is {detail}, this process is ELF machine {_own_machine}")
    if verdict == ELF_TRUNCATED:
        return (Reason.NOT_A_SHARED_OBJECT,
                f"truncated: its segments need {detail} bytes, the file has {size}")
    return Reason.NOT_A_SHARED_OBJECT, "malformed ELF program headers"


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



cdef bytes _pread_bytes(int fd, uint64_t offset, uint64_t size):
    """Exactly ``size`` bytes at ``offset``, or None."""
    cdef bytes buffer
    cdef ssize_t got
    if size > (16 << 20):
        return None
    buffer = bytes(size)
    got = pread(fd, <char *>buffer, size, offset)
    return buffer if got == <ssize_t>size else None


cdef object _dynamic_dependencies(int fd, const uint64_t *page, ssize_t page_bytes):
    """``(needed, rpath, runpath)`` from the dynamic segment of the ELF file open as ``fd`` (of
    this process's class; found through the program headers, so stripped files work too), with
    every needed library already loaded into this process left out. None if unreadable."""
    cdef dbk_Ehdr header
    cdef const dbk_Phdr *segments
    cdef const dbk_Dyn *dynamic
    cdef bytes table, entries, strings
    cdef int i, j, n
    cdef uint64_t strtab = 0, strsz = 0, offset
    cdef void *handle
    try:
        # The ELF check has verified the header and found the program headers in the file.
        memcpy(&header, page, sizeof(header))
        if header.e_phoff + header.e_phnum * sizeof(dbk_Phdr) <= <uint64_t>page_bytes \
                and header.e_phoff % 8 == 0:
            segments = <const dbk_Phdr *>(<const char *>page + header.e_phoff)
        else:
            table = _pread_bytes(fd, header.e_phoff, header.e_phnum * sizeof(dbk_Phdr))
            if table is None:
                return None
            segments = <const dbk_Phdr *><const char *>table
        entries = None
        for i in range(header.e_phnum):
            if segments[i].p_type == PT_DYNAMIC:
                entries = _pread_bytes(fd, segments[i].p_offset, segments[i].p_filesz)
        if entries is None:
            return [], None, None
        dynamic = <const dbk_Dyn *><const char *>entries
        n = len(entries) // sizeof(dbk_Dyn)
        for i in range(n):
            if dynamic[i].d_tag == DT_NULL:
                n = i
                break
            if dynamic[i].d_tag == DT_STRTAB:
                strtab = dbk_dyn_value(&dynamic[i])
            elif dynamic[i].d_tag == DT_STRSZ:
                strsz = dbk_dyn_value(&dynamic[i])
        # DT_STRTAB is an address: find the loadable segment that maps it.
        strings = None
        for j in range(header.e_phnum):
            if segments[j].p_type == PT_LOAD and segments[j].p_vaddr <= strtab < \
                    segments[j].p_vaddr + segments[j].p_filesz:
                offset = strtab - segments[j].p_vaddr + segments[j].p_offset
                strings = _pread_bytes(fd, offset, strsz)
                break
        if strings is None:
            return None
        needed, rpath, runpath = [], None, None
        for i in range(n):
            if dbk_dyn_value(&dynamic[i]) >= strsz:
                continue
            if dynamic[i].d_tag == DT_NEEDED:
                name = strings[dbk_dyn_value(&dynamic[i]):strings.index(b"\0", dbk_dyn_value(&dynamic[i]))]
                handle = dlopen(name, RTLD_NOLOAD | RTLD_LAZY)
                if handle != NULL:
                    dlclose(handle)
                else:
                    dlerror()
                    needed.append(os.fsdecode(name))
            elif dynamic[i].d_tag == DT_RPATH or dynamic[i].d_tag == DT_RUNPATH:
                value = os.fsdecode(strings[dbk_dyn_value(&dynamic[i]):
                                            strings.index(b"\0", dbk_dyn_value(&dynamic[i]))])
                if dynamic[i].d_tag == DT_RPATH:
                    rpath = value
                else:
                    runpath = value
        return needed, rpath, runpath
    except ValueError:  # a string without its terminating NUL
        return None


def inspect_elf_file(str path):
    """The pre-dlopen look at a file: ``(reason, detail, dependencies)``. ``reason`` and
    ``detail`` as check_elf_file gives them; ``dependencies`` is, for a file that passed,
    ``(needed libraries not yet loaded, rpath, runpath)`` or None if the dynamic segment could
    not be read."""
    cdef bytes encoded = os.fsencode(path)
    cdef const char *c_path = encoded
    cdef uint64_t detail = 0, size = 0
    cdef uint64_t page[FIRST_PAGE_WORDS]
    cdef ssize_t page_bytes = 0
    cdef int fd = -1, verdict
    with nogil:
        verdict = _check_elf(c_path, &detail, &size, &fd, page, &page_bytes)
    if verdict != ELF_OK:
        return _elf_verdict(verdict, detail, size) + (None,)
    try:
        return None, "", _dynamic_dependencies(fd, page, page_bytes)
    finally:
        c_close(fd)


def check_elf_file(path):
    """``(reason, detail)`` when ``path`` cannot be a shared object for this process, else
    ``(None, "")``. Reads the file; never loads it."""
    failure = _check_elf_file(os.fsencode(path))
    return (None, "") if failure is None else failure
