/* The loader's ELF reader: what can be decided from a file before dlopen.
 *
 * The dynamic linker trusts the file: a segment mapped past the end of a truncated file raises
 * SIGBUS at its first touch, a table address or relocation offset outside the segments makes it
 * read or write wild memory, a version index past its table sends it through garbage pointers.
 * So every offset, size and count it will use is checked here first against the file's size and
 * its loadable segments: overflow-checked, and with the work bounded (caps on counts and sizes).
 * A file that passes can then be read without further checks: its dynamic symbols, its needed
 * libraries and search paths, all inside the tables already checked.
 *
 * The checks, in order (check.c), each in the file of the structure it checks:
 *   segments.c     program headers (entry size, count, table inside the file); PT_LOAD segments
 *                  (inside the file, p_memsz >= p_filesz, power-of-two alignment, offset and
 *                  address congruent, ascending and non-overlapping); exactly one PT_DYNAMIC,
 *                  and PT_GNU_RELRO, PT_TLS, PT_PHDR, PT_NOTE and PT_GNU_PROPERTY inside loaded
 *                  segments; the notes of PT_GNU_PROPERTY.
 *   dynamic.c      the dynamic section (ends with DT_NULL, bounded) and its entries' agreement
 *                  (sizes with tables, entry sizes, DT_INIT and DT_FINI in executable code).
 *   symbols.c      the string table (inside the file, NUL-terminated, every name offset inside
 *                  it); hash tables (buckets and chains inside the file, chains that end);
 *                  symbols (names inside the string table, versions defined, values inside the
 *                  segments, functions in executable code, no undefined local symbol).
 *   versions.c     version records (chains that end, files among DT_NEEDED).
 *   relocations.c  relocations (inside the file, whole entries, known types, offsets in
 *                  writable segments, symbols inside the symbol table, init and fini functions
 *                  in executable code; relative ones without a symbol, GOT and PLT slots with
 *                  one, aligned, the PLT's ascending).
 *   sections.c     the section table, when there is a whole one, in agreement with the PT_LOAD
 *                  segments.
 * file.c reads the file (bounded reads, planned to be few); internal.h maps addresses to file
 * offsets through the PT_LOAD segments.
 */
#ifndef DBK_ELF_READER_H
#define DBK_ELF_READER_H

#include <link.h>
#include <stdint.h>

typedef ElfW(Ehdr) dbk_Ehdr;
typedef ElfW(Phdr) dbk_Phdr;

enum {
    DBK_MAX_PROGRAM_HEADERS = 512,
    DBK_MAX_NEEDED = 256,
    DBK_MAX_FILTERS = 16,
    DBK_MAX_BUFFERS = 256,
    DBK_FIRST_PAGE_BYTES = 4096,          /* read first: ELF and program headers usually fit */
};

/* dbk_check_file's answer; ``detail`` says more where noted. */
typedef enum {
    DBK_ELF_OK,
    DBK_ELF_OPEN_FAILED,                  /* detail: errno */
    DBK_ELF_NOT_REGULAR,
    DBK_ELF_NOT_ELF,
    DBK_ELF_TRUNCATED_HEADER,
    DBK_ELF_WRONG_CLASS,                  /* detail: the file's class */
    DBK_ELF_WRONG_BYTE_ORDER,             /* detail: the file's byte order */
    DBK_ELF_WRONG_TYPE,                   /* detail: e_type */
    DBK_ELF_WRONG_MACHINE,                /* detail: e_machine */
    DBK_ELF_MALFORMED,                    /* problem names the field */
    DBK_ELF_TRUNCATED,                    /* needed_bytes: bytes the segments need; file_size */
} dbk_verdict;

/* What a file must be to load into this process. */
typedef struct {
    unsigned char elf_class, byte_order;
    uint16_t machine;
} dbk_identity;

typedef struct {
    /* Outcome for the caller. */
    const char *problem;                  /* static text naming the bad field */
    int truncated;                        /* the problem is a segment past the end of the file */
    uint64_t needed_bytes;                /* when truncated: bytes the segments need */
    uint64_t file_size;
    /* The string table and the names the dependency check needs (offsets into it). */
    const char *strtab;
    uint64_t strsz;
    uint32_t n_needed, n_filters;
    int64_t rpath, runpath;               /* -1: none */
    /* The dynamic symbols the hash tables and relocations reach (dbk_symbol_at). */
    const unsigned char *symtab;
    uint64_t n_symbols;
    /* Private. */
    int fd;
    const unsigned char *page;
    uint64_t page_bytes;
    unsigned char *span;
    uint64_t span_offset, span_bytes;
    int n_buffers, n_phdrs, n_loads;
    /* Arrays last, used up to their counts: dbk_elf_init clears only what is above. */
    uint64_t needed[DBK_MAX_NEEDED];
    uint64_t filters[DBK_MAX_FILTERS];
    unsigned char *buffers[DBK_MAX_BUFFERS];
    uint64_t buffer_offset[DBK_MAX_BUFFERS], buffer_bytes[DBK_MAX_BUFFERS];
    dbk_Phdr phdrs[DBK_MAX_PROGRAM_HEADERS];
    int loads[DBK_MAX_PROGRAM_HEADERS];   /* indexes of PT_LOAD headers, ascending */
    uint64_t first_page[DBK_FIRST_PAGE_BYTES / sizeof(uint64_t)];
} dbk_elf;

/* One dynamic symbol. ``name`` points into the checked string table (NULL for st_name 0). */
typedef struct {
    const char *name;
    unsigned char binding, type;          /* STB_*, STT_* */
    int defined;                          /* st_shndx is not SHN_UNDEF */
} dbk_symbol;

/* Before dbk_check_file; dbk_elf_free after it, whatever it answered. */
void dbk_elf_init(dbk_elf *e);
/* Closes the file and frees what the reads allocated; the strings and symbols go with them. */
void dbk_elf_free(dbk_elf *e);

/* Opens ``path`` (no symbolic link, no blocking) and checks the ELF header against ``own``, then
 * the structures the dynamic linker will trust (dbk_check_structure). */
dbk_verdict dbk_check_file(dbk_elf *e, const char *path, const dbk_identity *own, long page_size,
                           uint64_t *detail);

/* Everything the dynamic linker will trust, checked against the file. 0, or -1 with e->problem. */
int dbk_check_structure(dbk_elf *e, const dbk_Ehdr *h, long page_size);

/* Symbol ``index`` (below e->n_symbols) of a file dbk_check_file passed: 0, or -1 past the end. */
int dbk_symbol_at(const dbk_elf *e, uint64_t index, dbk_symbol *out);

#endif
