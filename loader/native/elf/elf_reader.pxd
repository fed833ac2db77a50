# Cython mirror of elf_reader.h: declarations only, named as in the header, and only what the
# loader uses. Logic lives in loader/_elf.pxi.
from libc.stdint cimport int64_t, uint16_t, uint32_t, uint64_t


cdef extern from "elf_reader.h" nogil:
    ctypedef enum dbk_verdict:
        DBK_ELF_OK
        DBK_ELF_OPEN_FAILED
        DBK_ELF_NOT_REGULAR
        DBK_ELF_NOT_ELF
        DBK_ELF_TRUNCATED_HEADER
        DBK_ELF_WRONG_CLASS
        DBK_ELF_WRONG_BYTE_ORDER
        DBK_ELF_WRONG_TYPE
        DBK_ELF_WRONG_MACHINE
        DBK_ELF_MALFORMED
        DBK_ELF_TRUNCATED

    ctypedef struct dbk_identity:
        unsigned char elf_class, byte_order
        uint16_t machine

    ctypedef struct dbk_elf:
        const char *problem
        int truncated
        uint64_t needed_bytes
        uint64_t file_size
        const char *strtab
        uint32_t n_needed, n_filters
        int64_t rpath, runpath
        uint64_t n_symbols
        uint64_t needed[1]
        uint64_t filters[1]

    ctypedef struct dbk_symbol:
        const char *name
        unsigned char binding, type
        int defined

    void dbk_elf_init(dbk_elf *e)
    void dbk_elf_free(dbk_elf *e)
    dbk_verdict dbk_check_file(dbk_elf *e, const char *path, const dbk_identity *own,
                               long page_size, uint64_t *detail)
    int dbk_symbol_at(const dbk_elf *e, uint64_t index, dbk_symbol *out)
