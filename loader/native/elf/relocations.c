/* Relocations: DT_RELA, DT_REL, DT_JMPREL and DT_RELR, each inside the file and written as a
 * linker writes them, and every DT_INIT_ARRAY and DT_FINI_ARRAY slot filled by one. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#if defined(__x86_64__) && !defined(__ILP32__)
/* The relocation types a shared object for x86-64 uses; glibc trusts what the others imply. */
static int dbk_reloc_type_ok(uint32_t t, int text_relocations)
{
    if (t == R_X86_64_PC32 || t == R_X86_64_32 || t == R_X86_64_PC64)
        return text_relocations;  /* only position-dependent code needs them */
    return t == R_X86_64_NONE || t == R_X86_64_64 || t == R_X86_64_GLOB_DAT
        || t == R_X86_64_JUMP_SLOT || t == R_X86_64_RELATIVE || t == R_X86_64_DTPMOD64
        || t == R_X86_64_DTPOFF64 || t == R_X86_64_TPOFF64 || t == R_X86_64_IRELATIVE
        || t == R_X86_64_TLSDESC || t == R_X86_64_RELATIVE64;
}
#define DBK_RELATIVE R_X86_64_RELATIVE
#define DBK_IRELATIVE R_X86_64_IRELATIVE
#define DBK_GLOB_DAT R_X86_64_GLOB_DAT
#define DBK_JUMP_SLOT R_X86_64_JUMP_SLOT
#define DBK_HAS_RELOC_TYPES 1
#else
static int dbk_reloc_type_ok(uint32_t t, int text_relocations) { (void)t; (void)text_relocations; return 1; }
#define DBK_HAS_RELOC_TYPES 0
#endif

static int dbk_check_relocations(dbk_elf *e, dbk_relocation_context *c, uint64_t vaddr,
                                 uint64_t size, uint64_t entry_size, int with_addend,
                                 const char *name, int counted)
{
    const unsigned char *bytes;
    uint64_t i, n, last_slot = 0;
    int any_slot = 0;
    if (size % entry_size != 0 || size > DBK_MAX_TABLE_BYTES)
        return dbk_fail(e, name);
    if (size == 0)
        return 0;
    bytes = dbk_table(e, vaddr, size);
    if (bytes == NULL)
        return dbk_fail(e, name);
    n = size / entry_size;
    if (counted && c->relative_count > n)
        return dbk_fail(e, "DT_RELACOUNT or DT_RELCOUNT exceeds the number of relocations");
    for (i = 0; i < n; i++) {
        dbk_Rela r;
        uint64_t symbol;
        uint32_t type;
        if (with_addend) {
            memcpy(&r, bytes + i * entry_size, sizeof(dbk_Rela));
        } else {
            dbk_Rel rel;
            memcpy(&rel, bytes + i * entry_size, sizeof(dbk_Rel));
            r.r_offset = rel.r_offset;
            r.r_info = rel.r_info;
            r.r_addend = 0;
        }
        symbol = DBK_R_SYM(r.r_info);
        type = DBK_R_TYPE(r.r_info);
        if (!dbk_reloc_type_ok(type, c->text_relocations))
            return dbk_fail(e, "a relocation has a type the dynamic linker does not handle in a shared object");
#if DBK_HAS_RELOC_TYPES
        if (counted && i < c->relative_count && type != DBK_RELATIVE)
            return dbk_fail(e, "DT_RELACOUNT counts a relocation that is not relative");
#endif
        if (type != 0 && dbk_segment(e, r.r_offset, sizeof(ElfW(Addr)), 1,
                                     c->text_relocations ? 0 : PF_W) == NULL)
            return dbk_fail(e, "a relocation's r_offset lies outside every writable PT_LOAD segment");
        if (symbol != 0 && symbol >= c->symbol_capacity)
            return dbk_fail(e, "a relocation names a symbol past the end of the symbol table");
        if (symbol > c->max_symbol)
            c->max_symbol = symbol;
#if DBK_HAS_RELOC_TYPES
        /* A linker writes relative relocations without a symbol, GOT and PLT slots with one,
         * aligned, the PLT's in ascending order, one each: a symbol's relocation turned
         * relative, or a slot's without its symbol, gets the load address; a moved PLT one
         * leaves a slot unrelocated. */
        if (type == DBK_RELATIVE && symbol != 0)
            return dbk_fail(e, "a relative relocation names a symbol: its slot would get the load address, not the symbol's");
        if (type == DBK_GLOB_DAT || type == DBK_JUMP_SLOT) {
            if (symbol == 0)
                return dbk_fail(e, "a GLOB_DAT or JUMP_SLOT relocation names no symbol: its slot would get the library's own load address");
            if (r.r_offset % sizeof(ElfW(Addr)) != 0)
                return dbk_fail(e, "a GLOB_DAT or JUMP_SLOT relocation's r_offset is not a whole GOT slot");
        }
        if (type == DBK_JUMP_SLOT) {
            if (any_slot && r.r_offset <= last_slot)
                return dbk_fail(e, "JUMP_SLOT relocations are not in ascending slot order: a PLT slot would be filled twice or left unrelocated");
            any_slot = 1;
            last_slot = r.r_offset;
        }
        if (with_addend && type == DBK_RELATIVE
                && ((uint64_t)r.r_addend < c->image_start || (uint64_t)r.r_addend > c->image_end))
            return dbk_fail(e, "a relative relocation's addend points outside the loaded segments");
        if (with_addend && type == DBK_IRELATIVE
                && dbk_segment(e, (uint64_t)r.r_addend, 1, 1, PF_X) == NULL)
            return dbk_fail(e, "an IRELATIVE relocation's resolver lies outside every executable segment");
#endif
        {
            int k;
            for (k = 0; k < 2; k++) {
                uint64_t start = k ? c->fini_array : c->init_array;
                uint64_t slots = k ? c->fini_slots : c->init_slots;
                if (r.r_offset >= start && r.r_offset - start < slots * sizeof(ElfW(Addr))) {
                    if ((r.r_offset - start) % sizeof(ElfW(Addr)) != 0)
                        return dbk_fail(e, "a relocation splits a DT_INIT_ARRAY or DT_FINI_ARRAY slot");
#if DBK_HAS_RELOC_TYPES
                    if (with_addend && type == DBK_RELATIVE
                            && dbk_segment(e, (uint64_t)r.r_addend, 1, 1, PF_X) == NULL)
                        return dbk_fail(e, "a DT_INIT_ARRAY or DT_FINI_ARRAY function lies outside every executable segment");
#endif
                    c->covered[k][(r.r_offset - start) / sizeof(ElfW(Addr))] = 1;
                }
            }
        }
    }
    return 0;
}

/* One relative relocation of a DT_RELR table: a word the linker adds the load address to. */
static int dbk_relr_word(dbk_elf *e, dbk_relocation_context *c, uint64_t where)
{
    int k;
    if (dbk_segment(e, where, sizeof(ElfW(Addr)), 1, c->text_relocations ? 0 : PF_W) == NULL)
        return dbk_fail(e, "a DT_RELR address lies outside every writable PT_LOAD segment");
    for (k = 0; k < 2; k++) {
        uint64_t start = k ? c->fini_array : c->init_array;
        uint64_t slots = k ? c->fini_slots : c->init_slots;
        if (where >= start && where - start < slots * sizeof(ElfW(Addr))) {
            const unsigned char *bytes = dbk_table(e, where, sizeof(ElfW(Addr)));
            ElfW(Addr) function;
            if ((where - start) % sizeof(ElfW(Addr)) != 0 || bytes == NULL)
                return dbk_fail(e, "a DT_RELR address splits a DT_INIT_ARRAY or DT_FINI_ARRAY slot");
            memcpy(&function, bytes, sizeof(function));
            if (dbk_segment(e, function, 1, 1, PF_X) == NULL)
                return dbk_fail(e, "a DT_INIT_ARRAY or DT_FINI_ARRAY function lies outside every executable segment");
            c->covered[k][(where - start) / sizeof(ElfW(Addr))] = 1;
        }
    }
    return 0;
}

static int dbk_check_relr(dbk_elf *e, dbk_relocation_context *c, uint64_t vaddr, uint64_t size)
{
    const unsigned char *bytes;
    uint64_t i, where = 0, bit;
    const uint64_t bits = 8 * sizeof(ElfW(Relr)) - 1;
    if (size % sizeof(ElfW(Relr)) != 0 || size > DBK_MAX_TABLE_BYTES
            || (size > 0 && (bytes = dbk_table(e, vaddr, size)) == NULL))
        return dbk_fail(e, "DT_RELR + DT_RELRSZ lies outside the file or is not whole entries");
    for (i = 0; i < size / sizeof(ElfW(Relr)); i++) {
        ElfW(Relr) entry;
        memcpy(&entry, bytes + i * sizeof(entry), sizeof(entry));
        if ((entry & 1) == 0) {
            where = entry;
            if (dbk_relr_word(e, c, where) != 0)
                return -1;
            where += sizeof(ElfW(Addr));
        } else {
            for (bit = 1; bit <= bits; bit++)
                if (((entry >> bit) & 1) && dbk_relr_word(e, c, where + (bit - 1) * sizeof(ElfW(Addr))) != 0)
                    return -1;
            where += bits * sizeof(ElfW(Addr));
        }
    }
    return 0;
}

int dbk_prepare_relocations(dbk_elf *e, const dbk_dynamic *d, dbk_relocation_context *c)
{
    int k;
    for (k = 0; k < 2; k++) {
        int array_tag = k ? DT_FINI_ARRAY : DT_INIT_ARRAY;
        int size_tag = k ? DT_FINI_ARRAYSZ : DT_INIT_ARRAYSZ;
        uint64_t size = DBK_VAL(d, size_tag);
        if (!DBK_HAS(d, array_tag))
            continue;
        if (!DBK_HAS(d, size_tag) || size % sizeof(ElfW(Addr)) != 0
                || size / sizeof(ElfW(Addr)) > DBK_MAX_ARRAY_SLOTS
                || dbk_segment(e, DBK_VAL(d, array_tag), size, 1, 0) == NULL)
            return dbk_fail(e, k ? "DT_FINI_ARRAY or DT_FINI_ARRAYSZ is missing, misaligned or outside every PT_LOAD segment"
                                 : "DT_INIT_ARRAY or DT_INIT_ARRAYSZ is missing, misaligned or outside every PT_LOAD segment");
        if (k) {
            c->fini_array = DBK_VAL(d, array_tag);
            c->fini_slots = size / sizeof(ElfW(Addr));
        } else {
            c->init_array = DBK_VAL(d, array_tag);
            c->init_slots = size / sizeof(ElfW(Addr));
        }
        if (size > 0 && (c->covered[k] = calloc(size / sizeof(ElfW(Addr)), 1)) == NULL)
            return dbk_fail(e, "out of memory");
    }
    c->image_start = e->phdrs[e->loads[0]].p_vaddr;
    c->image_end = dbk_image_end(e);
    c->relative_count = d->relcount;
    c->symbol_capacity = DBK_HAS(d, DT_SYMTAB) ? dbk_room(e, DBK_VAL(d, DT_SYMTAB)) / sizeof(dbk_Sym) : 0;
    c->text_relocations = DBK_HAS(d, DT_TEXTREL)
                          || (DBK_HAS(d, DT_FLAGS) && (DBK_VAL(d, DT_FLAGS) & DF_TEXTREL));
    return 0;
}

int dbk_check_relocation_tables(dbk_elf *e, const dbk_dynamic *d, dbk_relocation_context *c)
{
    uint64_t i;
    int k;
    if (DBK_HAS(d, DT_RELA) && dbk_check_relocations(e, c, DBK_VAL(d, DT_RELA), DBK_VAL(d, DT_RELASZ),
            sizeof(dbk_Rela), 1, "DT_RELA + DT_RELASZ lies outside the file or is not whole relocations",
            DBK_PLTREL == DT_RELA) != 0)
        return -1;
    if (DBK_HAS(d, DT_REL) && dbk_check_relocations(e, c, DBK_VAL(d, DT_REL), DBK_VAL(d, DT_RELSZ),
            sizeof(dbk_Rel), 0, "DT_REL + DT_RELSZ lies outside the file or is not whole relocations",
            DBK_PLTREL == DT_REL) != 0)
        return -1;
    if (DBK_HAS(d, DT_JMPREL) && dbk_check_relocations(e, c, DBK_VAL(d, DT_JMPREL), DBK_VAL(d, DT_PLTRELSZ),
            DBK_PLTREL == DT_RELA ? sizeof(dbk_Rela) : sizeof(dbk_Rel), DBK_PLTREL == DT_RELA,
            "DT_JMPREL + DT_PLTRELSZ lies outside the file or is not whole relocations", 0) != 0)
        return -1;
    if (DBK_HAS(d, DT_RELR) && dbk_check_relr(e, c, DBK_VAL(d, DT_RELR), DBK_VAL(d, DT_RELRSZ)) != 0)
        return -1;
    for (k = 0; k < 2; k++)
        for (i = 0; i < (k ? c->fini_slots : c->init_slots); i++)
            if (!c->covered[k][i])
                return dbk_fail(e, "a DT_INIT_ARRAY or DT_FINI_ARRAY slot has no relocation");
    return 0;
}

void dbk_release_relocations(dbk_relocation_context *c)
{
    free(c->covered[0]);
    free(c->covered[1]);
    c->covered[0] = c->covered[1] = NULL;
}
