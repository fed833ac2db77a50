# Cython mirror of link_map.h (and of the part of <link.h> it uses): declarations only.


cdef extern from "link_map.h" nogil:
    struct dl_phdr_info:
        const char *dlpi_name

    ctypedef struct dbk_wanted:
        const char *name
        int found

    int dl_iterate_phdr(int (*callback)(dl_phdr_info *, size_t, void *) noexcept, void *data)
    const char *dbk_loaded_soname(const dl_phdr_info *info)
    int dbk_match_loaded(dl_phdr_info *info, size_t size, void *data) noexcept
