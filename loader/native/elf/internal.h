/* Shared by the ELF reader's files only: the checks' limits, the dynamic section as read, and
 * the functions one file of the reader gives the others. Each function returning int answers 0,
 * or -1 with e->problem set (dbk_fail). */
#ifndef DBK_ELF_INTERNAL_H
#define DBK_ELF_INTERNAL_H

#include <stddef.h>
#include <elf.h>
#include <link.h>
#include <stdint.h>

#include "elf_reader.h"

typedef ElfW(Shdr) dbk_Shdr;
typedef ElfW(Dyn) dbk_Dyn;
typedef ElfW(Sym) dbk_Sym;
typedef ElfW(Rela) dbk_Rela;
typedef ElfW(Rel) dbk_Rel;
typedef ElfW(Verneed) dbk_Verneed;
typedef ElfW(Vernaux) dbk_Vernaux;
typedef ElfW(Verdef) dbk_Verdef;
typedef ElfW(Verdaux) dbk_Verdaux;
#define dbk_dyn_value(d) ((uint64_t)(d)->d_un.d_val)
#if __ELF_NATIVE_CLASS == 64
#define DBK_R_SYM ELF64_R_SYM
#define DBK_R_TYPE ELF64_R_TYPE
#define DBK_ST_TYPE ELF64_ST_TYPE
#define DBK_ST_BIND ELF64_ST_BIND
#else
#define DBK_R_SYM ELF32_R_SYM
#define DBK_R_TYPE ELF32_R_TYPE
#define DBK_ST_TYPE ELF32_ST_TYPE
#define DBK_ST_BIND ELF32_ST_BIND
#endif

#if defined(__x86_64__) || defined(__aarch64__) || defined(__riscv) || defined(__powerpc64__) || defined(__s390x__)
#define DBK_PLTREL DT_RELA
#else
#define DBK_PLTREL DT_REL
#endif

enum {
    DBK_MAX_DYNAMIC_BYTES = 64 << 10,     /* 4,096 entries; a real library has a few dozen */
    DBK_MAX_TABLE_BYTES = 64 << 20,       /* any one table: larger is not plausible */
    DBK_MAX_VERSION_RECORDS = 1 << 16,
    DBK_MAX_SECTIONS = 4096,              /* a larger section table is not checked */
    DBK_MAX_ARRAY_SLOTS = 4096,           /* init and fini functions */
    DBK_MAX_VERSION_INDEX = 0x8000,       /* version indexes are 15 bits */
};

/* -- the dynamic section, as dynamic.c reads it ----------------------------------------------- */

typedef struct {
    uint64_t value[DT_NUM];
    unsigned char present[DT_NUM];
    uint64_t gnu_hash, versym, verdef, verneed, relcount;
    unsigned char has_gnu_hash, has_versym, has_verdef, has_verneed;
} dbk_dynamic;

#define DBK_HAS(d, tag) ((d)->present[tag])
#define DBK_VAL(d, tag) ((d)->value[tag])

/* Version indexes the version records define: a bit each (versions.c sets, symbols.c asks). */
#define DBK_SET(bits, i) ((bits)[(i) >> 6] |= (uint64_t)1 << ((i) & 63))
#define DBK_ISSET(bits, i) (((bits)[(i) >> 6] >> ((i) & 63)) & 1)

/* What the relocation checks learn and share (relocations.c). */
typedef struct {
    uint64_t init_array, init_slots, fini_array, fini_slots;
    unsigned char *covered[2];  /* per init and fini slot: a relocation fills it */
    uint64_t image_start, image_end;
    uint64_t relative_count;    /* DT_RELACOUNT / DT_RELCOUNT */
    uint64_t symbol_capacity;   /* symbols DT_SYMTAB's segment holds from the file */
    uint64_t max_symbol;
    int text_relocations;
} dbk_relocation_context;

static inline int dbk_is_power_of_two_or_zero(uint64_t x) { return (x & (x - 1)) == 0; }

/* -- file.c: reading the file; the lookups every check makes many times are inline ------------- */

enum { DBK_WINDOW_BYTES = 512 };         /* a read for a small record brings its neighbours */

int dbk_fail(dbk_elf *e, const char *problem);
/* Reads ``size`` bytes at ``offset`` (inside the file, at most DBK_MAX_TABLE_BYTES) into a
 * new buffer; NULL when the read fails or there is no buffer left. */
const unsigned char *dbk_read_buffer(dbk_elf *e, uint64_t offset, uint64_t size);
/* Bytes a table may span from vaddr to the end of its segment's file part (0 if unmapped). */
uint64_t dbk_room(const dbk_elf *e, uint64_t vaddr);
uint64_t dbk_image_end(const dbk_elf *e);
/* Reads ahead what the checks will need, in few reads; a failed read here is no verdict. */
void dbk_plan_reads(dbk_elf *e, const dbk_Ehdr *h);
void dbk_prefetch(dbk_elf *e, const dbk_dynamic *d);

/* ``size`` bytes of the file at ``offset`` if a read has already brought them, else NULL. */
static inline const unsigned char *dbk_held(const dbk_elf *e, uint64_t offset, uint64_t size)
{
    int i;
    if (offset > e->page_bytes || size > e->page_bytes - offset) {
        if (e->span != NULL && offset >= e->span_offset && offset - e->span_offset <= e->span_bytes
                && size <= e->span_bytes - (offset - e->span_offset))
            return e->span + (offset - e->span_offset);
        for (i = e->n_buffers - 1; i >= 0; i--)
            if (offset >= e->buffer_offset[i] && offset - e->buffer_offset[i] <= e->buffer_bytes[i]
                    && size <= e->buffer_bytes[i] - (offset - e->buffer_offset[i]))
                return e->buffers[i] + (offset - e->buffer_offset[i]);
        return NULL;
    }
    return e->page + offset;
}

/* ``size`` bytes of the file at ``offset``, or NULL (outside the file, or the read failed). */
static inline const unsigned char *dbk_bytes(dbk_elf *e, uint64_t offset, uint64_t size)
{
    const unsigned char *held;
    uint64_t window;
    if (size == 0)
        return e->page;
    if (offset > e->file_size || size > e->file_size - offset)
        return NULL;
    if ((held = dbk_held(e, offset, size)) != NULL)
        return held;
    if (size > DBK_MAX_TABLE_BYTES)
        return NULL;
    window = size < DBK_WINDOW_BYTES ? DBK_WINDOW_BYTES : size;
    if (window > e->file_size - offset)
        window = e->file_size - offset;
    return dbk_read_buffer(e, offset, window);
}

/* The PT_LOAD that maps [vaddr, vaddr + size) from the file (size 0: vaddr itself) and has all
 * of ``flags``, or NULL. With ``memory``, the part past p_filesz (zero-filled memory) counts. */
static inline const dbk_Phdr *dbk_segment(const dbk_elf *e, uint64_t vaddr, uint64_t size,
                                           int memory, uint32_t flags)
{
    int i;
    for (i = 0; i < e->n_loads; i++) {
        const dbk_Phdr *p = &e->phdrs[e->loads[i]];
        uint64_t extent = memory ? p->p_memsz : p->p_filesz;
        if (vaddr >= p->p_vaddr && vaddr - p->p_vaddr <= extent
                && size <= extent - (vaddr - p->p_vaddr)
                && (size > 0 || vaddr - p->p_vaddr < extent || memory))
            return (p->p_flags & flags) == flags ? p : NULL;
    }
    return NULL;
}

/* File offset of a table of ``size`` bytes at ``vaddr``; -1 when no PT_LOAD maps it from the file. */
static inline int dbk_table_offset(const dbk_elf *e, uint64_t vaddr, uint64_t size, uint64_t *offset)
{
    const dbk_Phdr *p = dbk_segment(e, vaddr, size, 0, PF_R);
    if (p == NULL)
        return -1;
    *offset = p->p_offset + (vaddr - p->p_vaddr);
    return 0;
}

/* ``size`` bytes at address ``vaddr``, read from the file through a readable PT_LOAD, or NULL. */
static inline const unsigned char *dbk_table(dbk_elf *e, uint64_t vaddr, uint64_t size)
{
    uint64_t offset;
    if (dbk_table_offset(e, vaddr, size, &offset) != 0)
        return NULL;
    return dbk_bytes(e, offset, size);
}


/* -- the checks, in the files of the structures they check ------------------------------------- */

int dbk_check_segments(dbk_elf *e, const dbk_Ehdr *h, long page_size);
int dbk_check_notes(dbk_elf *e);
int dbk_read_dynamic(dbk_elf *e, dbk_dynamic *d);
int dbk_check_dynamic_entries(dbk_elf *e, const dbk_dynamic *d);
int dbk_check_strings(dbk_elf *e, const dbk_dynamic *d);
/* *n_symbols: the symbols the hash tables cover (glibc's lookups read that many), 0 without. */
int dbk_check_hashes(dbk_elf *e, const dbk_dynamic *d, uint64_t *n_symbols);
/* ``defined``: DBK_MAX_VERSION_INDEX bits, cleared; *highest: the highest index defined. */
int dbk_check_versions(dbk_elf *e, const dbk_dynamic *d, uint64_t *defined, uint32_t *highest);
/* Fills ``c`` (zeroed) from the dynamic section; dbk_release_relocations frees what it holds. */
int dbk_prepare_relocations(dbk_elf *e, const dbk_dynamic *d, dbk_relocation_context *c);
int dbk_check_relocation_tables(dbk_elf *e, const dbk_dynamic *d, dbk_relocation_context *c);
void dbk_release_relocations(dbk_relocation_context *c);
int dbk_check_symbols(dbk_elf *e, const dbk_dynamic *d, uint64_t n_symbols,
                      const uint64_t *defined, uint32_t highest);
/* The size of the section table dbk_check_sections reads (at e_shoff), or 0 for none. */
uint64_t dbk_section_table(const dbk_elf *e, const dbk_Ehdr *h);
int dbk_check_sections(dbk_elf *e, const dbk_Ehdr *h);

#endif
