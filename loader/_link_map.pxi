# Libraries already loaded: the dynamic linker matches a DT_NEEDED name against the objects it
# has loaded (their path and soname) before it searches, and opens nothing for a match. The
# names are read from the link map (loader/native/elf/link_map.c); nothing is opened. A checked
# file's needed libraries are looked for there first: only those not loaded are searched for.
# Included into _core.pyx.

cdef int _collect_names(link_map.dl_phdr_info *info, size_t size, void *data) noexcept with gil:
    cdef set names = <set>data
    cdef const char *soname
    if info.dlpi_name == NULL or info.dlpi_name[0] == 0 \
            or strncmp(info.dlpi_name, b"linux-", 6) == 0:  # the program itself, the vDSO
        return 0
    names.add(<bytes>info.dlpi_name)
    soname = link_map.dbk_loaded_soname(info)
    if soname != NULL:
        names.add(<bytes>soname)
    return 0


cdef set _loaded_names():
    cdef set names = set()
    link_map.dl_iterate_phdr(_collect_names, <void *>names)
    return names


# Objects loaded before this module: the program's own libraries and Python's extension modules,
# which are never unloaded (a set of their paths and sonames, as bytes, for the common names such
# as libc). Those loaded later (backends and what they need, which may be unloaded again) are
# looked for in the link map itself, in C, on every question: no Python object per loaded
# library, however many backends are loaded.
cdef set _startup_names = _loaded_names()


cdef bint _is_loaded(const char *name) except -1:
    cdef link_map.dbk_wanted wanted
    if <bytes>name in _startup_names:
        return True
    wanted.name = name
    wanted.found = 0
    link_map.dl_iterate_phdr(link_map.dbk_match_loaded, &wanted)
    return wanted.found != 0


def is_library_loaded(str name):
    """Whether the dynamic linker would match DT_NEEDED ``name`` with an object it has already
    loaded (by path or soname), so that it would open nothing for it."""
    cdef bytes encoded = PyUnicode_EncodeFSDefault(name)
    return b"\0" not in encoded and _is_loaded(encoded)


cdef Py_ssize_t _first_unloaded(const elf_reader.dbk_elf *e) except -2:
    """The first of a checked file's DT_NEEDED names, then its DT_AUXILIARY and DT_FILTER names,
    that the dynamic linker has not loaded yet (its index in that order), or -1 when all are
    loaded: the common case, with nothing to look for and no Python object made for it."""
    cdef uint32_t i
    for i in range(e.n_needed):
        if not _is_loaded(e.strtab + e.needed[i]):
            return <Py_ssize_t>i
    for i in range(e.n_filters):
        if not _is_loaded(e.strtab + e.filters[i]):
            return <Py_ssize_t>e.n_needed + i
    return -1


cdef object _dynamic_dependencies(const elf_reader.dbk_elf *e, Py_ssize_t first):
    """``(needed, rpath, runpath, filters)`` of a checked file: its DT_NEEDED names in order, its
    DT_RPATH and DT_RUNPATH (None when absent) and its DT_AUXILIARY and DT_FILTER names, all
    taken from its string table (every offset already checked to lie inside it), each name the
    dynamic linker has already loaded left out. ``first`` is _first_unloaded(e): the names
    before it are known to be loaded and it is known not to be, so neither is looked up again."""
    cdef Py_ssize_t k, n = e.n_needed
    cdef const char *name
    needed, filters = [], []
    if first >= 0:
        for k in range(first, n + e.n_filters):
            name = e.strtab + (e.needed[k] if k < n else e.filters[k - n])
            if k == first or not _is_loaded(name):
                (needed if k < n else filters).append(PyUnicode_DecodeFSDefault(name))
    return needed, _string_at(e, e.rpath), _string_at(e, e.runpath), filters
