# File names (docs/loading.md, File names): <vendor>_<name>_backend.so[.digits]*
# Included into _core.pyx.
# ---------------------------------------------------------------------------------------------

cdef inline bint _is_ascii_alnum(unsigned char c) noexcept nogil:
    return (b'a' <= c <= b'z') or (b'A' <= c <= b'Z') or (b'0' <= c <= b'9')


cdef inline bint _is_ascii_digit(unsigned char c) noexcept nogil:
    return b'0' <= c <= b'9'


cdef bint match_backend_filename(const unsigned char *s, size_t n) noexcept nogil:
    """True iff s[0:n] is a whole valid backend file name."""
    cdef const char *literal = b"_backend.so"
    cdef size_t literal_len = 11
    cdef size_t i = 0, start, k
    # <vendor>_
    start = i
    while i < n and _is_ascii_alnum(s[i]):
        i += 1
    if i == start or i >= n or s[i] != b'_':
        return False
    i += 1
    # <name>
    start = i
    while i < n and _is_ascii_alnum(s[i]):
        i += 1
    if i == start:
        return False
    # _backend.so
    if n - i < literal_len:
        return False
    for k in range(literal_len):
        if s[i + k] != <unsigned char>literal[k]:
            return False
    i += literal_len
    # (.digits)*
    while i < n:
        if s[i] != b'.':
            return False
        i += 1
        start = i
        while i < n and _is_ascii_digit(s[i]):
            i += 1
        if i == start:
            return False
    return True


def is_valid_backend_filename(name):
    """Whether ``name`` (str, bytes or path-like) is a valid backend file name. Never raises."""
    cdef const unsigned char[:] view
    try:
        if isinstance(name, os.PathLike):
            name = os.fspath(name)
        if isinstance(name, str):
            if not name.isascii():
                return False
            name = name.encode("ascii")
        if not isinstance(name, (bytes, bytearray)):
            return False
        if len(name) == 0:
            return False
        view = name
        return match_backend_filename(&view[0], <size_t>view.shape[0])
    except Exception:
        return False
