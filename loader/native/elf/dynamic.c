/* The dynamic section: read once, up to DT_NULL and bounded by PT_DYNAMIC, and its entries
 * checked against each other (a size without its table, entry sizes of this process's format). */
#include <string.h>

#include "internal.h"

int dbk_read_dynamic(dbk_elf *e, dbk_dynamic *d)
{
    const dbk_Phdr *p = NULL;
    const unsigned char *bytes;
    uint64_t n, i;
    int j, ended = 0;
    for (j = 0; j < e->n_phdrs; j++)  /* exactly one: dbk_check_segments */
        if (e->phdrs[j].p_type == PT_DYNAMIC)
            p = &e->phdrs[j];
    /* What the dynamic linker reads is the memory at p_vaddr, mapped from the file. */
    bytes = dbk_table(e, p->p_vaddr, p->p_filesz);
    if (bytes == NULL)
        return dbk_fail(e, "the dynamic section cannot be read");
    memset(d, 0, sizeof(*d));
    e->rpath = e->runpath = -1;
    n = p->p_filesz / sizeof(dbk_Dyn);
    for (i = 0; i < n; i++) {
        dbk_Dyn dyn;
        uint64_t value;
        memcpy(&dyn, bytes + i * sizeof(dbk_Dyn), sizeof(dyn));
        value = dbk_dyn_value(&dyn);
        if (dyn.d_tag == DT_NULL) {
            ended = 1;
            break;
        }
        if (dyn.d_tag == DT_NEEDED) {
            if (e->n_needed == DBK_MAX_NEEDED)
                return dbk_fail(e, "more than 256 DT_NEEDED entries");
            e->needed[e->n_needed++] = value;
        } else if (dyn.d_tag == DT_AUXILIARY || dyn.d_tag == DT_FILTER) {
            if (e->n_filters == DBK_MAX_FILTERS)
                return dbk_fail(e, "more than 16 DT_AUXILIARY and DT_FILTER entries");
            e->filters[e->n_filters++] = value;
        } else if (dyn.d_tag >= 0 && dyn.d_tag < DT_NUM) {
            d->present[dyn.d_tag] = 1;
            d->value[dyn.d_tag] = value;
        } else if (dyn.d_tag == DT_GNU_HASH) {
            d->has_gnu_hash = 1; d->gnu_hash = value;
        } else if (dyn.d_tag == DT_VERSYM) {
            d->has_versym = 1; d->versym = value;
        } else if (dyn.d_tag == DT_VERDEF) {
            d->has_verdef = 1; d->verdef = value;
        } else if (dyn.d_tag == DT_VERNEED) {
            d->has_verneed = 1; d->verneed = value;
        } else if (dyn.d_tag == DT_RELACOUNT || dyn.d_tag == DT_RELCOUNT) {
            d->relcount = value;
        }
    }
    if (!ended)
        return dbk_fail(e, "the dynamic section has no DT_NULL within PT_DYNAMIC");
    return 0;
}

/* A size, entry size or count without its table; entry sizes of another format; DT_INIT and
 * DT_FINI outside executable code. */
int dbk_check_dynamic_entries(dbk_elf *e, const dbk_dynamic *d)
{
    static const int pairs[][2] = {{DT_PLTRELSZ, DT_JMPREL}, {DT_PLTREL, DT_JMPREL},
        {DT_RELASZ, DT_RELA}, {DT_RELAENT, DT_RELA}, {DT_RELSZ, DT_REL}, {DT_RELENT, DT_REL},
        {DT_INIT_ARRAYSZ, DT_INIT_ARRAY}, {DT_FINI_ARRAYSZ, DT_FINI_ARRAY},
        {DT_RELRSZ, DT_RELR}, {DT_RELRENT, DT_RELR}, {DT_SYMENT, DT_SYMTAB}};
    static const char *const problems[] = {"DT_PLTRELSZ without DT_JMPREL", "DT_PLTREL without DT_JMPREL",
        "DT_RELASZ without DT_RELA", "DT_RELAENT without DT_RELA", "DT_RELSZ without DT_REL",
        "DT_RELENT without DT_REL", "DT_INIT_ARRAYSZ without DT_INIT_ARRAY",
        "DT_FINI_ARRAYSZ without DT_FINI_ARRAY", "DT_RELRSZ without DT_RELR",
        "DT_RELRENT without DT_RELR", "DT_SYMENT without DT_SYMTAB"};
    int i;
    for (i = 0; i < (int)(sizeof(pairs) / sizeof(pairs[0])); i++)
        if (DBK_HAS(d, pairs[i][0]) && !DBK_HAS(d, pairs[i][1]))
            return dbk_fail(e, problems[i]);
    if ((d->has_verneed || d->has_verdef) && !d->has_versym)
        return dbk_fail(e, "DT_VERNEED or DT_VERDEF without DT_VERSYM");
    if (d->relcount > 0 && !DBK_HAS(d, DBK_PLTREL == DT_RELA ? DT_RELA : DT_REL))
        return dbk_fail(e, "DT_RELACOUNT or DT_RELCOUNT without its relocation table");
    if (DBK_HAS(d, DT_SYMENT) && DBK_VAL(d, DT_SYMENT) != sizeof(dbk_Sym))
        return dbk_fail(e, "DT_SYMENT is not the size of a symbol");
    if (DBK_HAS(d, DT_PLTREL) && DBK_VAL(d, DT_PLTREL) != DBK_PLTREL)
        return dbk_fail(e, "DT_PLTREL names the other relocation format");
    if (DBK_HAS(d, DT_RELA) && (!DBK_HAS(d, DT_RELASZ) || !DBK_HAS(d, DT_RELAENT)
                                || DBK_VAL(d, DT_RELAENT) != sizeof(dbk_Rela)))
        return dbk_fail(e, "DT_RELA without DT_RELASZ, or DT_RELAENT not the size of a relocation");
    if (DBK_HAS(d, DT_REL) && (!DBK_HAS(d, DT_RELSZ) || !DBK_HAS(d, DT_RELENT)
                               || DBK_VAL(d, DT_RELENT) != sizeof(dbk_Rel)))
        return dbk_fail(e, "DT_REL without DT_RELSZ, or DT_RELENT not the size of a relocation");
    if (DBK_HAS(d, DT_RELR) && (!DBK_HAS(d, DT_RELRSZ)
                                || (DBK_HAS(d, DT_RELRENT) && DBK_VAL(d, DT_RELRENT) != sizeof(ElfW(Relr)))))
        return dbk_fail(e, "DT_RELR without DT_RELRSZ, or DT_RELRENT not the size of an entry");
    if (DBK_HAS(d, DT_JMPREL) && (!DBK_HAS(d, DT_PLTRELSZ) || !DBK_HAS(d, DT_PLTREL)))
        return dbk_fail(e, "DT_JMPREL without DT_PLTRELSZ or DT_PLTREL");
    if (DBK_HAS(d, DT_INIT) && dbk_segment(e, DBK_VAL(d, DT_INIT), 1, 1, PF_X) == NULL)
        return dbk_fail(e, "DT_INIT lies outside every executable segment");
    if (DBK_HAS(d, DT_FINI) && dbk_segment(e, DBK_VAL(d, DT_FINI), 1, 1, PF_X) == NULL)
        return dbk_fail(e, "DT_FINI lies outside every executable segment");
    return 0;
}
