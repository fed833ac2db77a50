/* The program headers: the table itself, the PT_LOAD segments the dynamic linker maps, and the
 * segments that must lie inside them (PT_DYNAMIC, PT_GNU_RELRO, PT_TLS, PT_PHDR, the notes). */
#include <string.h>

#include "internal.h"

int dbk_check_segments(dbk_elf *e, const dbk_Ehdr *h, long page_size)
{
    uint64_t table, end, previous_end = 0, needed = 0;
    int i, n_dynamic = 0;
    if (h->e_phentsize != sizeof(dbk_Phdr))
        return dbk_fail(e, "e_phentsize is not the size of a program header");
    if (h->e_phnum == 0 || h->e_phnum > DBK_MAX_PROGRAM_HEADERS)
        return dbk_fail(e, "e_phnum is 0 or above 512");
    table = (uint64_t)h->e_phnum * sizeof(dbk_Phdr);
    if (h->e_phoff > e->file_size || table > e->file_size - h->e_phoff)
        return dbk_fail(e, "the program header table (e_phoff, e_phnum) lies outside the file");
    {
        const unsigned char *bytes = dbk_bytes(e, h->e_phoff, table);
        if (bytes == NULL)
            return dbk_fail(e, "the program header table cannot be read");
        memcpy(e->phdrs, bytes, table);
    }
    e->n_phdrs = h->e_phnum;
    for (i = 0; i < e->n_phdrs; i++) {
        const dbk_Phdr *p = &e->phdrs[i];
        if (p->p_type != PT_LOAD && p->p_type != PT_DYNAMIC)
            continue;
        end = p->p_offset + p->p_filesz;
        if (end < p->p_offset)
            return dbk_fail(e, "a segment's p_offset + p_filesz wraps around");
        if (end > needed)
            needed = end;
    }
    if (needed > e->file_size) {
        e->truncated = 1;
        e->needed_bytes = needed;
        return dbk_fail(e, "truncated");
    }
    for (i = 0; i < e->n_phdrs; i++) {
        const dbk_Phdr *p = &e->phdrs[i];
        if (p->p_type == PT_DYNAMIC)
            n_dynamic++;
        if (p->p_type != PT_LOAD)
            continue;
        if (p->p_memsz < p->p_filesz)
            return dbk_fail(e, "a PT_LOAD segment's p_memsz is smaller than its p_filesz");
        if ((p->p_flags & PF_X) && p->p_memsz != p->p_filesz)
            return dbk_fail(e, "an executable PT_LOAD segment's p_memsz differs from its p_filesz (code would be zero-filled)");
        if (p->p_vaddr + p->p_memsz < p->p_vaddr)
            return dbk_fail(e, "a PT_LOAD segment's p_vaddr + p_memsz wraps around");
        if (!dbk_is_power_of_two_or_zero(p->p_align))
            return dbk_fail(e, "a PT_LOAD segment's p_align is not a power of two");
        if ((p->p_align > 1 && (p->p_vaddr - p->p_offset) % p->p_align != 0)
                || (p->p_vaddr - p->p_offset) % (uint64_t)page_size != 0)
            return dbk_fail(e, "a PT_LOAD segment's p_offset and p_vaddr differ modulo its alignment");
        if (e->n_loads > 0 && p->p_vaddr < previous_end)
            return dbk_fail(e, "PT_LOAD segments are not in ascending, non-overlapping address order");
        previous_end = p->p_vaddr + p->p_memsz;
        e->loads[e->n_loads++] = i;
    }
    if (e->n_loads == 0)
        return dbk_fail(e, "no PT_LOAD segment");
    if (n_dynamic != 1)
        return dbk_fail(e, n_dynamic ? "more than one PT_DYNAMIC segment" : "no PT_DYNAMIC segment");
    for (i = 0; i < e->n_phdrs; i++) {
        const dbk_Phdr *p = &e->phdrs[i];
        switch (p->p_type) {
        case PT_DYNAMIC:
            if (p->p_filesz < sizeof(dbk_Dyn) || p->p_filesz > DBK_MAX_DYNAMIC_BYTES)
                return dbk_fail(e, "PT_DYNAMIC's p_filesz is below one entry or above 64 KiB");
            if (dbk_segment(e, p->p_vaddr, p->p_filesz, 0, PF_R) == NULL)
                return dbk_fail(e, "PT_DYNAMIC lies outside the file part of every readable PT_LOAD segment");
            break;
        case PT_GNU_RELRO:
            /* It may run on over the page-rounded end of one segment into the next. */
            if (p->p_vaddr + p->p_memsz < p->p_vaddr || dbk_segment(e, p->p_vaddr, 1, 1, 0) == NULL
                    || p->p_vaddr + p->p_memsz > dbk_image_end(e))
                return dbk_fail(e, "PT_GNU_RELRO lies outside the PT_LOAD segments");
            break;
        case PT_TLS:
            if (p->p_filesz > p->p_memsz || !dbk_is_power_of_two_or_zero(p->p_align)
                    || p->p_align > (1u << 20))
                return dbk_fail(e, "PT_TLS has p_filesz above p_memsz or a bad p_align");
            if (p->p_filesz > 0 && dbk_segment(e, p->p_vaddr, p->p_filesz, 0, 0) == NULL)
                return dbk_fail(e, "PT_TLS lies outside the file part of every PT_LOAD segment");
            break;
        case PT_PHDR:
            if (p->p_filesz < table || dbk_segment(e, p->p_vaddr, table, 0, 0) == NULL)
                return dbk_fail(e, "PT_PHDR lies outside the file part of every PT_LOAD segment");
            break;
        case PT_NOTE:
        case PT_GNU_PROPERTY:
        case PT_GNU_EH_FRAME:
            if (p->p_filesz > 0 && dbk_segment(e, p->p_vaddr, p->p_filesz, 0, PF_R) == NULL)
                return dbk_fail(e, "PT_NOTE, PT_GNU_PROPERTY or PT_GNU_EH_FRAME lies outside every readable PT_LOAD segment");
            break;
        }
    }
    return 0;
}

/* Notes of a PT_GNU_PROPERTY segment: each header and its name and descriptor inside it. */
int dbk_check_notes(dbk_elf *e)
{
    int i;
    for (i = 0; i < e->n_phdrs; i++) {
        const dbk_Phdr *p = &e->phdrs[i];
        const unsigned char *bytes;
        uint64_t at = 0, align = p->p_align == 8 ? 8 : 4;
        if (p->p_type != PT_GNU_PROPERTY || p->p_filesz == 0)
            continue;
        if (p->p_filesz > DBK_MAX_DYNAMIC_BYTES
                || (bytes = dbk_table(e, p->p_vaddr, p->p_filesz)) == NULL)
            return dbk_fail(e, "PT_GNU_PROPERTY cannot be read");
        while (p->p_filesz - at >= sizeof(ElfW(Nhdr))) {
            ElfW(Nhdr) note;
            uint64_t name, desc;
            memcpy(&note, bytes + at, sizeof(note));
            /* name and descriptor each start aligned, as the linker reads them */
            name = (sizeof(note) + (uint64_t)note.n_namesz + align - 1) & ~(align - 1);
            desc = ((uint64_t)note.n_descsz + align - 1) & ~(align - 1);
            if (name > p->p_filesz - at || desc > p->p_filesz - at - name)
                return dbk_fail(e, "a note in PT_GNU_PROPERTY runs past its segment");
            at += name + desc;
        }
    }
    return 0;
}
