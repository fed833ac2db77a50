/* The section table: the dynamic linker never reads it, but it tells where the program headers
 * should map each section. */
#include <string.h>

#include "internal.h"

uint64_t dbk_section_table(const dbk_elf *e, const dbk_Ehdr *h)
{
    uint64_t table;
    if (h->e_shoff == 0 || h->e_shnum == 0 || h->e_shnum > DBK_MAX_SECTIONS
            || h->e_shentsize != sizeof(dbk_Shdr))
        return 0;
    table = (uint64_t)h->e_shnum * sizeof(dbk_Shdr);
    return h->e_shoff > e->file_size || table > e->file_size - h->e_shoff ? 0 : table;
}

/* The dynamic linker never reads the section table, but a linker writes it in agreement with
 * the program headers. When the file has one that looks whole (entry size, inside the file,
 * a null first entry, a string table for the names), every allocated section must lie where
 * the PT_LOAD segment holding its address maps it: a section with contents inside the
 * segment's file part at the matching file offset, an SHT_NOBITS one (.bss; not the TLS
 * template .tbss) past it. A segment whose p_offset or p_filesz was changed maps other bytes
 * than its sections hold: code taken from another place of the file, or .bss filled with
 * file bytes instead of zeros. A table that does not look whole is not evidence: skipped. */
int dbk_check_sections(dbk_elf *e, const dbk_Ehdr *h)
{
    const unsigned char *bytes;
    dbk_Shdr s;
    uint64_t table = dbk_section_table(e, h);
    int i, j;
    if (table == 0 || (bytes = dbk_bytes(e, h->e_shoff, table)) == NULL)
        return 0;
    memcpy(&s, bytes, sizeof(s));
    if (s.sh_type != SHT_NULL || s.sh_flags != 0 || s.sh_addr != 0 || s.sh_offset != 0)
        return 0;
    if (h->e_shstrndx != SHN_UNDEF) {
        if (h->e_shstrndx >= h->e_shnum)
            return 0;
        memcpy(&s, bytes + (uint64_t)h->e_shstrndx * sizeof(s), sizeof(s));
        if (s.sh_type != SHT_STRTAB)
            return 0;
    }
    for (i = 1; i < h->e_shnum; i++) {
        memcpy(&s, bytes + (uint64_t)i * sizeof(s), sizeof(s));
        if (!(s.sh_flags & SHF_ALLOC) || s.sh_size == 0
                || (s.sh_type == SHT_NOBITS && (s.sh_flags & SHF_TLS)))
            continue;
        for (j = 0; j < e->n_loads; j++) {
            const dbk_Phdr *p = &e->phdrs[e->loads[j]];
            uint64_t into;
            if (s.sh_addr < p->p_vaddr || s.sh_addr - p->p_vaddr >= p->p_memsz)
                continue;
            into = s.sh_addr - p->p_vaddr;
            if (s.sh_type == SHT_NOBITS) {
                if (into < p->p_filesz)
                    return dbk_fail(e, "an allocated SHT_NOBITS section (.bss) starts inside the file part of its PT_LOAD segment: its memory would hold file bytes instead of zeros (p_filesz disagrees with the section table)");
            } else if (into > p->p_filesz || s.sh_size > p->p_filesz - into) {
                return dbk_fail(e, "an allocated section runs past the file part of its PT_LOAD segment: its contents would be zeros (p_filesz disagrees with the section table)");
            } else if (s.sh_offset != p->p_offset + into) {
                return dbk_fail(e, "an allocated section's file offset differs from where its PT_LOAD segment maps it: the segment would map other bytes (p_offset disagrees with the section table)");
            }
            break;
        }
    }
    return 0;
}

