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


# Backend hosts (loader/host/_segment.pxi, _channel.pxi): shared memory, the channel, waiting on both.
cdef extern from "<sys/mman.h>" nogil:
    enum:
        PROT_READ
        PROT_WRITE
        MAP_SHARED
        MFD_CLOEXEC
        MFD_ALLOW_SEALING
    void *MAP_FAILED
    void *mmap(void *addr, size_t length, int prot, int flags, int fd, long offset)
    int munmap(void *addr, size_t length)
    int memfd_create(const char *name, unsigned int flags)


cdef extern from "<fcntl.h>" nogil:
    enum:
        F_ADD_SEALS
        F_SEAL_SEAL
        F_SEAL_SHRINK
        F_SEAL_GROW
        F_SEAL_WRITE
        F_GETFL
        F_SETFL
    int fcntl(int fd, int cmd, ...)


cdef extern from "<unistd.h>" nogil:
    int ftruncate(int fd, long length)


cdef extern from "<sys/uio.h>" nogil:
    struct iovec:
        void *iov_base
        size_t iov_len


cdef extern from "<sys/socket.h>" nogil:
    struct msghdr:
        void *msg_name
        unsigned int msg_namelen
        iovec *msg_iov
        size_t msg_iovlen
        void *msg_control
        size_t msg_controllen
        int msg_flags
    struct cmsghdr:
        size_t cmsg_len
        int cmsg_level
        int cmsg_type
    enum:
        SOL_SOCKET
        SCM_RIGHTS
        MSG_NOSIGNAL
        MSG_DONTWAIT
        MSG_PEEK
    cmsghdr *CMSG_FIRSTHDR(msghdr *message)
    unsigned char *CMSG_DATA(cmsghdr *header)
    size_t CMSG_SPACE(size_t length)
    size_t CMSG_LEN(size_t length)
    ssize_t sendmsg(int fd, const msghdr *message, int flags)
    ssize_t recv(int fd, void *buffer, size_t length, int flags)


cdef extern from "<poll.h>" nogil:
    struct pollfd:
        int fd
        short events
        short revents
    enum:
        POLLIN
        POLLOUT
        POLLERR
        POLLHUP
        POLLNVAL
    int poll(pollfd *fds, unsigned long nfds, int timeout)
