# Libraries and backend instances (docs/loading.md, The checks)
# Included into _core.pyx.
# ---------------------------------------------------------------------------------------------

ENTRY_POINTS = ("GetBackendId", "GetVersion", "BackendFactory")

# What a C++ compiler emits for the entry points when extern "C" was forgotten.
_MANGLED_ENTRY_POINTS = {
    "GetBackendId": b"_Z12GetBackendIdv",
    "GetVersion": b"_Z10GetVersionPjS_",
    "BackendFactory": b"_Z14BackendFactoryv",
}


include "_features.pxi"


cdef str _instance_problem(abi.BackendInstance *instance, bytes expected_id,
                           uint32_t major, uint32_t minor):
    """Why ``instance`` does not have a well-formed header for version major.minor, or None.

    Only the header every version shares is required here (size, version, get_id, destroy, the
    same id). Members beyond it are read only where struct_size covers them and count as absent
    otherwise; whether a backend provides everything its version promises is the conformance
    kit's question (ABI-1, ABI-2), not a reason to refuse loading it."""
    cdef const char *instance_id
    if instance == NULL:
        return "BackendFactory returned NULL"
    if major != API_VERSION_MAJOR:
        return f"no instance layout is known for version {major}.{minor}"
    if instance.struct_size < abi.BACKEND_INSTANCE_SIZE_1_0:
        return (f"struct_size is {instance.struct_size}, smaller than the instance header "
                f"({abi.BACKEND_INSTANCE_SIZE_1_0})")
    if instance.api_major != major or instance.api_minor != minor:
        return (f"instance declares version {instance.api_major}.{instance.api_minor}, "
                f"GetVersion reported {major}.{minor}")
    if instance.destroy == NULL:
        return "destroy is NULL"
    if instance.get_id == NULL:
        return "get_id is NULL"
    instance_id = instance.get_id(instance)
    if instance_id == NULL:
        return "get_id returned NULL"
    if _posix.strnlen(instance_id, abi.BACKEND_ID_MAX_LENGTH + 1) != <size_t>len(expected_id) \
            or strcmp(instance_id, expected_id) != 0:
        return f"get_id returned a different id than GetBackendId ({expected_id.decode('ascii')!r})"
    return None


def instance_size(uint32_t minor):
    """Size of BackendInstance at version <major>.<minor> of the current major, or None."""
    if minor >= sizeof(INSTANCE_SIZE_BY_MINOR) // sizeof(size_t):
        return None
    return INSTANCE_SIZE_BY_MINOR[minor]


cdef tuple _open_library(str path, bytes path_bytes):
    """dlopen ``path_bytes`` (RTLD_NOW | RTLD_LOCAL, rule 5.1) and look up the three entry points
    (rule 5.2): ``(library, None, "")``, or ``(None, reason, detail)`` with nothing left open.
    The caller holds a crash note for the file."""
    cdef const char *c_path = path_bytes
    cdef void *handle
    cdef const char *error
    cdef Library library
    cdef list missing, mangled
    with nogil:
        handle = dlopen(c_path, RTLD_NOW | RTLD_LOCAL)
        error = dlerror() if handle == NULL else NULL
    if handle == NULL:
        message = (<bytes>error).decode("utf-8", "replace") if error != NULL else "dlopen failed"
        return (None,) + _classify_dlopen_error(path, message)
    library = Library.__new__(Library)
    library._handle = handle
    library.path = path
    library._path_bytes = path_bytes
    library._get_backend_id = <abi.GetBackendIdFunction>dlsym(handle, b"GetBackendId")
    library._get_version = <abi.GetVersionFunction>dlsym(handle, b"GetVersion")
    library._backend_factory = <abi.BackendFactoryFunction>dlsym(handle, b"BackendFactory")
    if library._get_backend_id != NULL and library._get_version != NULL \
            and library._backend_factory != NULL:
        return library, None, ""
    missing = []
    if library._get_backend_id == NULL:
        missing.append("GetBackendId")
    if library._get_version == NULL:
        missing.append("GetVersion")
    if library._backend_factory == NULL:
        missing.append("BackendFactory")
    mangled = [name for name in missing if dlsym(handle, _MANGLED_ENTRY_POINTS[name]) != NULL]
    detail = "does not export " + ", ".join(missing)
    if mangled:
        detail += (f" (found C++-mangled {', '.join(mangled)}: declare the entry points "
                   f"extern \"C\")")
    library._close()
    return None, Reason.MISSING_SYMBOL, detail


cdef enum IdFault:
    ID_OK
    ID_NULL
    ID_EMPTY
    ID_RESERVED
    ID_TOO_LONG
    ID_BAD_CHARACTER


cdef int _id_fault(const char *raw, size_t length) noexcept nogil:
    """Rule 5.3 on the ``length`` bytes at ``raw`` (NULL: GetBackendId returned NULL): ID_OK,
    or what is wrong (the first rule broken, in the order _checked_backend_id reports)."""
    cdef size_t i
    cdef unsigned char c
    if raw == NULL:
        return ID_NULL
    if length == 0:
        return ID_EMPTY
    if length == 7 and memcmp(raw, b"Unknown", 7) == 0:
        return ID_RESERVED
    if length > abi.BACKEND_ID_MAX_LENGTH:
        return ID_TOO_LONG
    for i in range(length):
        c = <unsigned char>raw[i]
        if c < 0x21 or c > 0x7E:
            return ID_BAD_CHARACTER
    return ID_OK


cdef tuple _checked_backend_id(const char *raw, size_t length):
    """``(id, "")`` when the ``length`` bytes at ``raw`` are a valid backend id (rule 5.3:
    non-empty, not ``Unknown``, printable ASCII without spaces, at most BACKEND_ID_MAX_LENGTH
    bytes), else ``(None, what is wrong with it)``. ``raw`` NULL is GetBackendId returning NULL."""
    cdef int fault = _id_fault(raw, length)
    cdef size_t i
    if fault == ID_OK:
        return PyUnicode_DecodeASCII(raw, length, NULL), ""
    if fault == ID_NULL:
        return None, "GetBackendId returned NULL"
    if fault == ID_EMPTY:
        return None, "GetBackendId returned an empty id"
    if fault == ID_RESERVED:
        return None, "GetBackendId returned the reserved id 'Unknown'"
    if fault == ID_TOO_LONG:
        return None, f"backend id is longer than {abi.BACKEND_ID_MAX_LENGTH} bytes"
    for i in range(length):
        if <unsigned char>raw[i] < 0x21 or <unsigned char>raw[i] > 0x7E:
            shown = raw[:length].decode("ascii", "backslashreplace")
            return None, (f"backend id {shown!r} contains {chr(<unsigned char>raw[i])!r}: "
                          f"only printable ASCII without spaces is allowed")
    return None, "invalid backend id"


def check_backend_id(raw):
    """``(id, "")`` for a valid backend id given as bytes, else ``(None, what is wrong with
    it)``; None stands for GetBackendId returning NULL (docs/loading.md, The checks)."""
    cdef bytes data
    if raw is None:
        return _checked_backend_id(NULL, 0)
    data = raw
    return _checked_backend_id(<const char *>data, len(data))


cdef inline bint _compatible(uint32_t major, uint32_t minor, uint32_t api_major,
                             uint32_t api_minor) noexcept:
    """Rule 5.4: a backend built against major.minor runs on a runtime of api_major.api_minor
    iff the majors are equal and the backend's minor is not newer."""
    return major == api_major and minor <= api_minor


def is_compatible(uint32_t major, uint32_t minor, uint32_t api_major, uint32_t api_minor):
    """Rule 5.4 on four uint32 (loader.is_backend_compatible checks and converts its
    arguments, then asks this)."""
    return _compatible(major, minor, api_major, api_minor)


cdef object _dependency_problem = None      # loader.dependencies.dependency_problem
cdef object _isolated_probe = None          # loader.isolation.probe
cdef object _make_version = None            # loader.versions.BackendVersion._from_checked
cdef dict _versions = {}                    # (major << 32 | minor) -> its BackendVersion


cdef object _backend_version(uint32_t major, uint32_t minor):
    """The loader.BackendVersion of a version read from a backend (one shared object for
    each version seen: they are immutable)."""
    global _make_version
    cdef uint64_t key = (<uint64_t>major << 32) | minor
    version = _versions.get(key)
    if version is None:
        if _make_version is None:
            from loader.versions import BackendVersion
            _make_version = BackendVersion._from_checked
        version = _make_version(major, minor)
        if len(_versions) < 64:
            _versions[key] = version
    return version


cpdef object load_entry(Entry entry, probe_timeout=None, bint secure=False, announce=None):
    """load_backend for a loader.loading.Entry: the accepted library (its ``detail`` says what
    an older minor version lacks), or None with the entry skipped; ``backend_id`` and
    ``version`` are set once they were read."""
    library, reason, detail, backend_id, major, minor = load_backend(
        entry.canonical, probe_timeout, secure, announce)
    if backend_id is not None:
        entry.backend_id = backend_id
    if major is not None:
        entry.version = _backend_version(major, minor)
    if library is None:
        entry.reason = reason
    entry.detail = detail
    return library


cpdef tuple load_backend(str path, probe_timeout=None, bint secure=False, announce=None):
    """Every check of docs/loading.md's table on one candidate file, in its order; the
    first failure is the reason:

        ELF header and segments            (_check_elf)
        needed libraries                   (loader.dependencies, only when some are not loaded)
        isolated probe, with probe_timeout (loader.isolation)
        dlopen and the entry points        (rules 5.1, 5.2)
        backend id                         (rule 5.3)
        version                            (rule 5.4)
        factory probe and availability     (factory-failed, backend-unavailable), on one instance

    Returns ``(library, reason, detail, backend_id, major, minor)``. An accepted library is
    open, with ``reason`` None and ``detail`` saying what an older minor version lacks (or "").
    A skipped file has ``library`` None and nothing left open; ``backend_id`` and ``major`` /
    ``minor`` are given once they were read (else None). ``announce`` is called with no
    argument just before dlopen (the debug log line). Never raises for a bad file."""
    global _dependency_problem, _isolated_probe
    cdef bytes path_bytes = PyUnicode_EncodeFSDefault(path)
    cdef const char *c_path = path_bytes
    cdef uint64_t detail = 0
    cdef elf_reader.dbk_elf elf
    cdef elf_reader.dbk_elf *e = &elf
    cdef elf_reader.dbk_verdict verdict
    cdef int note
    cdef Library library
    cdef const char *raw
    cdef uint32_t major = 0xFFFFFFFF, minor = 0xFFFFFFFF
    cdef abi.BackendInstance *instance
    cdef abi.BackendStatus status = abi.BACKEND_STATUS_OK
    cdef char message[MESSAGE_SIZE]
    cdef bint available_asked = False
    cdef Py_ssize_t first_unloaded
    # Everything that can be decided from the file alone, before any of its code runs.
    elf_reader.dbk_elf_init(e)
    try:
        with nogil:
            verdict = _check_elf(c_path, e, &detail)
        if verdict != elf_reader.DBK_ELF_OK:
            return (None,) + _elf_verdict(verdict, detail, e) + (None, None, None)
        first_unloaded = _first_unloaded(e)
        if first_unloaded >= 0:
            if _dependency_problem is None:
                from loader.dependencies import dependency_problem as _dependency_problem
            problem = _dependency_problem(path, secure, _dynamic_dependencies(e, first_unloaded))
            if problem is not None:
                return None, Reason.MISSING_DEPENDENCY, problem, None, None, None
    finally:
        _release(e)
    if probe_timeout is not None:
        if _isolated_probe is None:
            from loader.isolation import probe as _isolated_probe
        failure = _isolated_probe(path, probe_timeout)
        if failure is not None:
            return (None,) + tuple(failure) + (None, None, None)
    if announce is not None:
        announce()

    note = _crash_note_open(path_bytes, "dlopen: the library's constructors")
    try:
        opened = _open_library(path, path_bytes)
        if opened[0] is None:
            return opened + (None, None, None)
        library = opened[0]
        dbk_note_stage(note, "GetBackendId")
        raw = library._get_backend_id()
        backend_id, problem = _checked_backend_id(
            raw, 0 if raw == NULL else _posix.strnlen(raw, abi.BACKEND_ID_MAX_LENGTH + 1))
        if backend_id is None:
            library._close()
            return None, Reason.INVALID_BACKEND_ID, problem, None, None, None
        dbk_note_stage(note, "GetVersion")
        library._get_version(&major, &minor)
        if not _compatible(major, minor, API_VERSION_MAJOR, API_VERSION_MINOR):
            library._close()
            return (None, Reason.INCOMPATIBLE_VERSION,
                    f"backend built against Backend API {major}.{minor}, "
                    f"this runtime implements {API_VERSION_MAJOR}.{API_VERSION_MINOR}",
                    backend_id, major, minor)
        library.backend_id = backend_id
        library.major = major
        library.minor = minor
        # One probe instance: its header is checked (factory-failed), then it is asked whether
        # it can run here (backend-unavailable).
        dbk_note_stage(note, "the BackendFactory probe")
        instance = <abi.BackendInstance *>library._backend_factory()
        problem = _instance_problem(instance, backend_id.encode("ascii"), major, minor)
        if problem is None and dbk_has_is_available(instance):
            dbk_note_stage(note, "is_available")
            _clear(message)
            status = instance.is_available(instance, message, MESSAGE_SIZE)
            available_asked = True
        dbk_note_stage(note, "the BackendFactory probe")
        _destroy_instance(instance)
        if problem is not None:
            library._close()
            return None, Reason.FACTORY_FAILED, problem, backend_id, major, minor
        if available_asked and status != abi.BACKEND_STATUS_OK:
            library._close()
            return (None, Reason.BACKEND_UNAVAILABLE, _unavailable_message(message, status),
                    backend_id, major, minor)
        return library, None, skew_detail(minor), backend_id, major, minor
    finally:
        _crash_note_close(note)


cdef str _unavailable_message(char *message, abi.BackendStatus status):
    """is_available's message (a buffer of MESSAGE_SIZE the backend wrote to), or a stand-in."""
    message[MESSAGE_SIZE - 1] = 0
    text = message.decode("utf-8", "replace").strip() if message[0] else ""
    return text or f"is_available answered status {<int>status} without a message"



cdef class Library:
    """One dlopen'ed backend library. dlclose runs when the last reference goes away, so any
    Backend created from it keeps it mapped."""
    cdef void *_handle
    cdef abi.GetBackendIdFunction _get_backend_id
    cdef abi.GetVersionFunction _get_version
    cdef abi.BackendFactoryFunction _backend_factory
    cdef readonly str path
    cdef bytes _path_bytes          # the path for crash notes
    cdef readonly str backend_id
    cdef readonly uint32_t major
    cdef readonly uint32_t minor
    cdef object __weakref__

    def __dealloc__(self):
        self._close()

    cdef void _close(self) noexcept:
        cdef void *handle = self._handle
        self._handle = NULL
        if handle != NULL:
            dlclose(handle)

    def close(self):
        """Drop this reference to the library (the dynamic linker unmaps it with the last one)."""
        self._close()

    @property
    def closed(self):
        return self._handle == NULL

    @staticmethod
    def open(str path, bint elf_checked=False):
        """dlopen ``path`` (after the ELF pre-check, unless ``elf_checked`` says the caller just
        made it) and look up the entry points.

        Returns ``(library, None, "")`` or ``(None, reason, detail)``; never raises for a bad
        file. The library is closed again before a failure is returned.
        """
        cdef bytes path_bytes = os.fsencode(path)
        cdef int note
        if not elf_checked:
            failure = _check_elf_file(path_bytes)
            if failure is not None:
                return (None,) + failure
        note = _crash_note_open(path_bytes, "dlopen: the library's constructors")
        try:
            return _open_library(path, path_bytes)
        finally:
            _crash_note_close(note)

    def read_backend_id(self):
        """GetBackendId() as bytes (at most BACKEND_ID_MAX_LENGTH + 1 of them), or None for NULL."""
        cdef const char *raw
        cdef int note
        self._require_open()
        note = _crash_note_open(self._path_bytes, "GetBackendId")
        raw = self._get_backend_id()
        _crash_note_close(note)
        if raw == NULL:
            return None
        return raw[:_posix.strnlen(raw, abi.BACKEND_ID_MAX_LENGTH + 1)]

    def read_version(self):
        """GetVersion() as a (major, minor) tuple."""
        cdef uint32_t major = 0xFFFFFFFF, minor = 0xFFFFFFFF
        cdef int note
        self._require_open()
        note = _crash_note_open(self._path_bytes, "GetVersion")
        self._get_version(&major, &minor)
        _crash_note_close(note)
        return major, minor

    def accept(self, str backend_id, uint32_t major, uint32_t minor):
        """Record the id and version the loading checks accepted."""
        self.backend_id = backend_id
        self.major = major
        self.minor = minor

    def probe_factory(self):
        """Create and destroy one instance; the problem with it as a string, or None."""
        cdef abi.BackendInstance *instance
        cdef str problem
        cdef int note
        self._require_accepted()
        note = _crash_note_open(self._path_bytes, "the BackendFactory probe")
        try:
            instance = <abi.BackendInstance *>self._backend_factory()
            problem = _instance_problem(instance, self.backend_id.encode("ascii"), self.major,
                                        self.minor)
            _destroy_instance(instance)
        finally:
            _crash_note_close(note)
        return problem

    def create_backend(self):
        """A new Backend from BackendFactory()."""
        cdef abi.BackendInstance *instance
        cdef str problem
        cdef Backend backend
        self._require_accepted()
        instance = <abi.BackendInstance *>self._backend_factory()
        problem = _instance_problem(instance, self.backend_id.encode("ascii"), self.major, self.minor)
        if problem is not None:
            _destroy_instance(instance)
            from loader.errors import BackendCreationError
            raise BackendCreationError(f"backend {self.backend_id!r} ({self.path}): {problem}")
        backend = Backend.__new__(Backend)
        backend._instance = instance
        backend._library = self
        return backend

    cdef _require_open(self):
        if self._handle == NULL:
            from loader.errors import LibraryClosedError
            raise LibraryClosedError(f"library {self.path} is closed")

    cdef _require_accepted(self):
        self._require_open()
        if self.backend_id is None:
            raise RuntimeError("library has not passed the loading checks")

    def __repr__(self):
        state = "closed" if self._handle == NULL else "open"
        return f"<Library {self.path!r} id={self.backend_id!r} {state}>"


cdef void _destroy_instance(abi.BackendInstance *instance) noexcept:
    """Release an instance if it can be released at all (a NULL destroy leaks it)."""
    if instance != NULL and instance.struct_size >= abi.BACKEND_INSTANCE_SIZE_1_0 \
            and instance.destroy != NULL:
        instance.destroy(instance)


include "_backend.pxi"
