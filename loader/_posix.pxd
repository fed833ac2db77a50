# libc declarations the loader needs that Cython's bundled posix/*.pxd lack.
# Declarations only.

cdef extern from "<dirent.h>" nogil:
    ctypedef struct DIR:
        pass

    struct dirent:
        char d_name[256]

    DIR *fdopendir(int fd)
    dirent *readdir(DIR *dirp)
    int closedir(DIR *dirp)
    int dirfd(DIR *dirp)


cdef extern from "<stdlib.h>" nogil:
    char *realpath(const char *path, char *resolved_path)


cdef extern from "<string.h>" nogil:
    char *strerror(int errnum)
    size_t strnlen(const char *s, size_t maxlen)


cdef extern from "<limits.h>" nogil:
    enum:
        PATH_MAX


cdef extern from "<sys/auxv.h>" nogil:
    unsigned long getauxval(unsigned long type)
    enum:
        AT_SECURE


cdef extern from "<fcntl.h>" nogil:
    enum:
        O_PATH
