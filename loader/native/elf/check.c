/* The order of the checks: the ELF header first, then each structure before those that rely on
 * it (a table is looked for only through segments already checked, a name only in a string
 * table already checked). The first problem is the verdict. */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"

dbk_verdict dbk_check_file(dbk_elf *e, const char *path, const dbk_identity *own, long page_size,
                           uint64_t *detail)
{
    struct stat st;
    dbk_Ehdr header;
    ssize_t got;
    e->fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
    if (e->fd < 0) {
        *detail = (uint64_t)errno;
        return DBK_ELF_OPEN_FAILED;
    }
    if (fstat(e->fd, &st) != 0 || !S_ISREG(st.st_mode))
        return DBK_ELF_NOT_REGULAR;
    e->file_size = (uint64_t)st.st_size;
    got = pread(e->fd, e->first_page, sizeof(e->first_page), 0);
    e->page = (const unsigned char *)e->first_page;
    e->page_bytes = got > 0 ? (uint64_t)got : 0;
    memset(&header, 0, sizeof(header));
    memcpy(&header, e->first_page, e->page_bytes < sizeof(header) ? e->page_bytes : sizeof(header));
    if (got < SELFMAG || memcmp(header.e_ident, ELFMAG, SELFMAG) != 0)
        return DBK_ELF_NOT_ELF;
    if (got <= EI_DATA)
        return DBK_ELF_TRUNCATED_HEADER;
    if (header.e_ident[EI_CLASS] != own->elf_class) {
        *detail = header.e_ident[EI_CLASS];
        return DBK_ELF_WRONG_CLASS;
    }
    if (header.e_ident[EI_DATA] != own->byte_order) {
        *detail = header.e_ident[EI_DATA];
        return DBK_ELF_WRONG_BYTE_ORDER;
    }
    if (got < (ssize_t)sizeof(header))
        return DBK_ELF_TRUNCATED_HEADER;
    if (header.e_type != ET_DYN) {
        *detail = header.e_type;
        return DBK_ELF_WRONG_TYPE;
    }
    if (header.e_machine != own->machine) {
        *detail = header.e_machine;
        return DBK_ELF_WRONG_MACHINE;
    }
    if (dbk_check_structure(e, &header, page_size) != 0)
        return e->truncated ? DBK_ELF_TRUNCATED : DBK_ELF_MALFORMED;
    return DBK_ELF_OK;
}

int dbk_check_structure(dbk_elf *e, const dbk_Ehdr *h, long page_size)
{
    dbk_dynamic d;
    dbk_relocation_context c;
    uint64_t defined[DBK_MAX_VERSION_INDEX / 64];
    uint64_t n_symbols;
    uint32_t highest;
    int result = -1;
    if (dbk_check_segments(e, h, page_size) != 0)
        return -1;
    dbk_plan_reads(e, h);
    if (dbk_check_notes(e) != 0 || dbk_read_dynamic(e, &d) != 0)
        return -1;
    dbk_prefetch(e, &d);
    if (dbk_check_strings(e, &d) != 0 || dbk_check_hashes(e, &d, &n_symbols) != 0
            || dbk_check_dynamic_entries(e, &d) != 0)
        return -1;
    memset(defined, 0, sizeof(defined));
    memset(&c, 0, sizeof(c));
    if (dbk_prepare_relocations(e, &d, &c) != 0
            || dbk_check_versions(e, &d, defined, &highest) != 0
            || dbk_check_relocation_tables(e, &d, &c) != 0)
        goto done;
    /* The hash tables cover the defined symbols; relocations may name more (undefined ones
     * past the hashed range): every symbol the linker will read is checked. */
    if (c.max_symbol + 1 > n_symbols && c.max_symbol > 0)
        n_symbols = c.max_symbol + 1;
    if (dbk_check_symbols(e, &d, n_symbols, defined, highest) != 0
            || dbk_check_sections(e, h) != 0)
        goto done;
    result = 0;
done:
    dbk_release_relocations(&c);
    return result;
}
