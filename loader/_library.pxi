# Libraries and backend instances (contract section 5)
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
        cdef const char *c_path = path_bytes
        cdef void *handle
        cdef const char *error
        cdef str message
        cdef Library library
        cdef list missing, mangled
        cdef void *symbol
        cdef int note
        if not elf_checked:
            failure = _check_elf_file(path_bytes)
            if failure is not None:
                return (None,) + failure
        note = _crash_note_open(path_bytes, "dlopen: the library's constructors")
        with nogil:
            handle = dlopen(c_path, RTLD_NOW | RTLD_LOCAL)
            error = dlerror() if handle == NULL else NULL
        _crash_note_close(note)
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
        missing = []
        if library._get_backend_id == NULL:
            missing.append("GetBackendId")
        if library._get_version == NULL:
            missing.append("GetVersion")
        if library._backend_factory == NULL:
            missing.append("BackendFactory")
        if missing:
            mangled = [name for name in missing
                       if dlsym(handle, _MANGLED_ENTRY_POINTS[name]) != NULL]
            detail = "does not export " + ", ".join(missing)
            if mangled:
                detail += (f" (found C++-mangled {', '.join(mangled)}: declare the entry points "
                           f"extern \"C\")")
            library._close()
            return None, Reason.MISSING_SYMBOL, detail
        return library, None, ""

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

    def unavailable_reason(self):
        """Why the backend cannot run on this machine (rule 12.6), or None when it can: one
        fresh instance asked through its optional is_available()."""
        cdef abi.BackendInstance *instance
        cdef abi.BackendStatus status = abi.BACKEND_STATUS_OK
        cdef char message[MESSAGE_SIZE]
        cdef int note
        self._require_accepted()
        note = _crash_note_open(self._path_bytes, "is_available")
        try:
            instance = <abi.BackendInstance *>self._backend_factory()
            if _instance_problem(instance, self.backend_id.encode("ascii"), self.major,
                                 self.minor) is not None:
                _destroy_instance(instance)
                return None                 # the factory probe reports such an instance
            if dbk_has_is_available(instance):
                _clear(message)
                status = instance.is_available(instance, message, MESSAGE_SIZE)
            _destroy_instance(instance)
        finally:
            _crash_note_close(note)
        if status == abi.BACKEND_STATUS_OK:
            return None
        message[MESSAGE_SIZE - 1] = 0
        text = message.decode("utf-8", "replace").strip() if message[0] else ""
        return text or f"is_available answered status {<int>status} without a message"

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
