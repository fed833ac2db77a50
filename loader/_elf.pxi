# What can be decided from a file before dlopen: the ELF header, the structures the dynamic
# linker will trust, the needed libraries. Included into _core.pyx.

# ---------------------------------------------------------------------------------------------
# ELF pre-check: refuse what the dynamic linker would refuse, or crash on, with a precise reason.
# The linker trusts the file: a segment mapped past the end of a truncated file raises SIGBUS at
# its first touch, a table address or relocation offset outside the segments makes it read or
# write wild memory, a version index past its table sends it through garbage pointers. So every
# offset, size and count it will use is checked here first, in C, against the file's size and its
# loadable segments: overflow-checked, and with the work bounded (caps on counts and sizes).
# The checks, in order: program headers (entry size, count, table inside the file); PT_LOAD
# segments (inside the file, p_memsz >= p_filesz, power-of-two alignment, offset and address
# congruent, ascending and non-overlapping); exactly one PT_DYNAMIC, and PT_GNU_RELRO, PT_TLS,
# PT_PHDR, PT_NOTE and PT_GNU_PROPERTY, inside loaded segments; the dynamic section (ends with
# DT_NULL, bounded); the string table (inside the file, NUL-terminated; every name offset inside
# it); hash tables (buckets and chains inside the file, chains that end); version records
# (chains that end, files among DT_NEEDED); entry sizes; relocations (inside the file, whole
# entries, known types, offsets in writable segments, symbols inside the symbol table, init and
# fini functions in executable code; relative ones without a symbol, GOT and PLT slots with one,
# aligned, the PLT's ascending); symbols (names inside the string table, versions defined,
# values inside the segments, functions in executable code, no undefined local symbol); the
# section table, when there is a whole one, in agreement with the PT_LOAD segments.
# ---------------------------------------------------------------------------------------------


cdef extern from *:
    """
    #include <link.h>
    #include <dlfcn.h>
    #include <elf.h>
    #include <errno.h>
    #include <stdint.h>
    #include <stdlib.h>
    #include <string.h>
    #include <unistd.h>

    typedef ElfW(Ehdr) dbk_Ehdr;
    typedef ElfW(Phdr) dbk_Phdr;
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

    enum {
        DBK_MAX_PROGRAM_HEADERS = 512,
        DBK_MAX_DYNAMIC_BYTES = 64 << 10,     /* 4,096 entries; a real library has a few dozen */
        DBK_MAX_NEEDED = 256,
        DBK_MAX_FILTERS = 16,
        DBK_MAX_TABLE_BYTES = 64 << 20,       /* any one table: larger is not plausible */
        DBK_MAX_VERSION_RECORDS = 1 << 16,
        DBK_MAX_SECTIONS = 4096,              /* a larger section table is not checked */
        DBK_MAX_ARRAY_SLOTS = 4096,           /* init and fini functions */
        DBK_MAX_BUFFERS = 256,
        DBK_WINDOW_BYTES = 512,               /* a read for a small record brings its neighbours */
        DBK_SPAN_BYTES = 1 << 20,             /* tables closer than this are read in one go */
        /* Regions known in advance are read together when fewer bytes than this lie between
         * them: a gap shorter than the smallest page holds no page that separate reads would
         * not touch, and a read costs more than copying that many bytes more. */
        DBK_MERGE_GAP_BYTES = 4 << 10,
    };

    typedef struct {
        /* Outcome for the caller. */
        const char *problem;                  /* static text naming the bad field */
        int truncated;                        /* the problem is a segment past the end of the file */
        uint64_t needed_bytes;                /* when truncated: bytes the segments need */
        /* The string table and the names the dependency check needs (offsets into it). */
        const char *strtab;
        uint64_t strsz;
        uint32_t n_needed, n_filters;
        int64_t rpath, runpath;               /* -1: none */
        /* Private. */
        int fd;
        uint64_t file_size;
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
    } dbk_elf;

    static void dbk_elf_init(dbk_elf *e)
    {
        memset(e, 0, offsetof(dbk_elf, needed));
        e->fd = -1;
        e->rpath = e->runpath = -1;
    }

    static void dbk_elf_free(dbk_elf *e)
    {
        int i;
        for (i = 0; i < e->n_buffers; i++)
            free(e->buffers[i]);
        e->n_buffers = 0;
        free(e->span);
        e->span = NULL;
    }

    static int dbk_fail(dbk_elf *e, const char *problem)
    {
        e->problem = problem;
        return -1;
    }

    static int dbk_pread_all(int fd, void *buffer, uint64_t size, uint64_t offset)
    {
        uint64_t done = 0;
        while (done < size) {
            ssize_t got = pread(fd, (char *)buffer + done, size - done, (off_t)(offset + done));
            if (got < 0 && errno == EINTR)
                continue;
            if (got <= 0)
                return -1;
            done += (uint64_t)got;
        }
        return 0;
    }

    /* ``size`` bytes of the file at ``offset`` if a read has already brought them, else NULL. */
    static const unsigned char *dbk_held(const dbk_elf *e, uint64_t offset, uint64_t size)
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

    /* Reads ``size`` bytes at ``offset`` (inside the file, at most DBK_MAX_TABLE_BYTES) into a
     * new buffer; NULL when the read fails or there is no buffer left. */
    static const unsigned char *dbk_read_buffer(dbk_elf *e, uint64_t offset, uint64_t size)
    {
        unsigned char *buffer;
        if (size == 0 || size > DBK_MAX_TABLE_BYTES || e->n_buffers == DBK_MAX_BUFFERS
                || offset > e->file_size || size > e->file_size - offset)
            return NULL;
        buffer = malloc(size);
        if (buffer == NULL)
            return NULL;
        if (dbk_pread_all(e->fd, buffer, size, offset) != 0) {
            free(buffer);
            return NULL;
        }
        e->buffers[e->n_buffers] = buffer;
        e->buffer_offset[e->n_buffers] = offset;
        e->buffer_bytes[e->n_buffers++] = size;
        return buffer;
    }

    /* ``size`` bytes of the file at ``offset`` (already known to lie inside the file), or NULL. */
    static const unsigned char *dbk_bytes(dbk_elf *e, uint64_t offset, uint64_t size)
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

    /* The PT_LOAD that maps [vaddr, vaddr + size) from the file (size 0: vaddr itself), or NULL.
     * With ``memory``, the part past p_filesz (zero-filled memory) counts too. */
    static const dbk_Phdr *dbk_segment(const dbk_elf *e, uint64_t vaddr, uint64_t size, int memory,
                                       uint32_t flags)
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
    static int dbk_table_offset(const dbk_elf *e, uint64_t vaddr, uint64_t size, uint64_t *offset)
    {
        const dbk_Phdr *p = dbk_segment(e, vaddr, size, 0, PF_R);
        if (p == NULL)
            return -1;
        *offset = p->p_offset + (vaddr - p->p_vaddr);
        return 0;
    }

    static const unsigned char *dbk_table(dbk_elf *e, uint64_t vaddr, uint64_t size)
    {
        uint64_t offset;
        if (dbk_table_offset(e, vaddr, size, &offset) != 0)
            return NULL;
        return dbk_bytes(e, offset, size);
    }

    /* Bytes a table may span from vaddr to the end of its segment's file part (0 if unmapped). */
    static uint64_t dbk_room(const dbk_elf *e, uint64_t vaddr)
    {
        const dbk_Phdr *p = dbk_segment(e, vaddr, 1, 0, PF_R);
        return p == NULL ? 0 : p->p_filesz - (vaddr - p->p_vaddr);
    }

    static uint64_t dbk_image_end(const dbk_elf *e)
    {
        const dbk_Phdr *last = &e->phdrs[e->loads[e->n_loads - 1]];
        return last->p_vaddr + last->p_memsz;
    }

    static int dbk_is_power_of_two_or_zero(uint64_t x) { return (x & (x - 1)) == 0; }

    /* -- program headers -------------------------------------------------------------------- */

    static int dbk_check_segments(dbk_elf *e, const dbk_Ehdr *h, long page_size)
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
    static int dbk_check_notes(dbk_elf *e)
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

    /* -- the dynamic section ---------------------------------------------------------------- */

    typedef struct {
        uint64_t value[DT_NUM];
        unsigned char present[DT_NUM];
        uint64_t gnu_hash, versym, verdef, verneed, relcount;
        unsigned char has_gnu_hash, has_versym, has_verdef, has_verneed;
    } dbk_dynamic;

    #define DBK_HAS(d, tag) ((d)->present[tag])
    #define DBK_VAL(d, tag) ((d)->value[tag])

    static int dbk_read_dynamic(dbk_elf *e, dbk_dynamic *d)
    {
        const dbk_Phdr *p = NULL;
        const unsigned char *bytes;
        uint64_t n, i;
        int j, ended = 0;
        for (j = 0; j < e->n_phdrs; j++)
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

    static int dbk_check_strings(dbk_elf *e, const dbk_dynamic *d)
    {
        const unsigned char *bytes;
        uint32_t i;
        if (!DBK_HAS(d, DT_STRTAB) || !DBK_HAS(d, DT_STRSZ))
            return dbk_fail(e, "DT_STRTAB or DT_STRSZ is missing");
        if (DBK_VAL(d, DT_STRSZ) == 0 || DBK_VAL(d, DT_STRSZ) > DBK_MAX_TABLE_BYTES)
            return dbk_fail(e, "DT_STRSZ is 0 or above 64 MiB");
        bytes = dbk_table(e, DBK_VAL(d, DT_STRTAB), DBK_VAL(d, DT_STRSZ));
        if (bytes == NULL)
            return dbk_fail(e, "DT_STRTAB + DT_STRSZ lies outside the file part of every PT_LOAD segment");
        if (bytes[DBK_VAL(d, DT_STRSZ) - 1] != 0)
            return dbk_fail(e, "the string table (DT_STRTAB) does not end with a NUL byte");
        e->strtab = (const char *)bytes;
        e->strsz = DBK_VAL(d, DT_STRSZ);
        for (i = 0; i < e->n_needed; i++)
            if (e->needed[i] >= e->strsz)
                return dbk_fail(e, "a DT_NEEDED name lies outside the string table");
        for (i = 0; i < e->n_filters; i++)
            if (e->filters[i] >= e->strsz)
                return dbk_fail(e, "a DT_AUXILIARY or DT_FILTER name lies outside the string table");
        if (DBK_HAS(d, DT_RPATH)) {
            if (DBK_VAL(d, DT_RPATH) >= e->strsz)
                return dbk_fail(e, "DT_RPATH lies outside the string table");
            e->rpath = (int64_t)DBK_VAL(d, DT_RPATH);
        }
        if (DBK_HAS(d, DT_RUNPATH)) {
            if (DBK_VAL(d, DT_RUNPATH) >= e->strsz)
                return dbk_fail(e, "DT_RUNPATH lies outside the string table");
            e->runpath = (int64_t)DBK_VAL(d, DT_RUNPATH);
        }
        if (DBK_HAS(d, DT_SONAME) && DBK_VAL(d, DT_SONAME) >= e->strsz)
            return dbk_fail(e, "DT_SONAME lies outside the string table");
        return 0;
    }

    /* Number of symbols the hash tables cover (glibc's lookups read that many), or 0 without one. */
    static int dbk_check_hashes(dbk_elf *e, const dbk_dynamic *d, uint64_t *n_symbols)
    {
        *n_symbols = 0;
        if (DBK_HAS(d, DT_HASH)) {
            const unsigned char *bytes = dbk_table(e, DBK_VAL(d, DT_HASH), 8);
            uint32_t header[2], i, *words;
            uint64_t size;
            unsigned char *seen;
            if (bytes == NULL)
                return dbk_fail(e, "DT_HASH lies outside the file part of every PT_LOAD segment");
            memcpy(header, bytes, 8);
            size = (2 + (uint64_t)header[0] + header[1]) * 4;
            if (header[0] == 0)
                return dbk_fail(e, "DT_HASH has no buckets");
            if (size > DBK_MAX_TABLE_BYTES || (bytes = dbk_table(e, DBK_VAL(d, DT_HASH), size)) == NULL)
                return dbk_fail(e, "DT_HASH's buckets and chains lie outside the file");
            words = malloc(size);
            seen = calloc(header[1] + 1, 1);
            if (words == NULL || seen == NULL) {
                free(words);
                free(seen);
                return dbk_fail(e, "out of memory checking DT_HASH");
            }
            memcpy(words, bytes, size);
            for (i = 0; i < header[0]; i++) {
                uint32_t symbol = words[2 + i];
                while (symbol != 0) {  /* STN_UNDEF ends a chain */
                    if (symbol >= header[1] || seen[symbol]) {
                        free(words);
                        free(seen);
                        return dbk_fail(e, symbol >= header[1] ? "a DT_HASH chain leaves the table"
                                                              : "DT_HASH chains loop or merge");
                    }
                    seen[symbol] = 1;
                    symbol = words[2 + header[0] + symbol];
                }
            }
            free(words);
            free(seen);
            *n_symbols = header[1];
        }
        if (d->has_gnu_hash) {
            const unsigned char *bytes = dbk_table(e, d->gnu_hash, 16);
            uint32_t header[4], i, previous = 0, last = 0;
            uint64_t buckets_at, size, room, chains, bulk = 0;
            uint32_t highest_start = 0;
            const unsigned char *chain_bytes = NULL;
            if (bytes == NULL)
                return dbk_fail(e, "DT_GNU_HASH lies outside the file part of every PT_LOAD segment");
            memcpy(header, bytes, 16);  /* nbuckets, symoffset, bloom words, bloom shift */
            if (header[0] == 0 || header[2] == 0 || (header[2] & (header[2] - 1)) != 0)
                return dbk_fail(e, "DT_GNU_HASH has no buckets, or a bloom filter size that is not a power of two");
            buckets_at = 16 + (uint64_t)header[2] * sizeof(ElfW(Addr));
            size = buckets_at + (uint64_t)header[0] * 4;
            if (size > DBK_MAX_TABLE_BYTES || (bytes = dbk_table(e, d->gnu_hash, size)) == NULL)
                return dbk_fail(e, "DT_GNU_HASH's bloom filter and buckets lie outside the file");
            room = dbk_room(e, d->gnu_hash) - size;  /* bytes left for the chains */
            chains = room / 4;
            /* Buckets name where each chain starts; chains are consecutive, in bucket order, and
             * each ends with an odd hash. The chains up to the last start are read at once, the
             * last one word by word. */
            for (i = 0; i < header[0]; i++) {
                uint32_t start;
                memcpy(&start, bytes + buckets_at + (uint64_t)i * 4, 4);
                if (start > highest_start)
                    highest_start = start;
            }
            if (highest_start >= header[1]) {
                bulk = (uint64_t)highest_start - header[1] + 1;
                if (bulk > chains || (chain_bytes = dbk_table(e, d->gnu_hash + size, bulk * 4)) == NULL)
                    return dbk_fail(e, "a DT_GNU_HASH chain runs past its segment");
            }
            for (i = 0; i < header[0]; i++) {
                uint32_t start;
                uint64_t k;
                memcpy(&start, bytes + buckets_at + (uint64_t)i * 4, 4);
                if (start == 0)
                    continue;
                if (start < header[1] || start <= previous || (previous && start <= last))
                    return dbk_fail(e, "DT_GNU_HASH buckets are out of order or below symoffset");
                for (k = start;; k++) {
                    uint32_t hash;
                    const unsigned char *word;
                    if (k - header[1] < bulk)
                        word = chain_bytes + (k - header[1]) * 4;
                    else if (k - header[1] >= chains
                             || (word = dbk_table(e, d->gnu_hash + size + (k - header[1]) * 4, 4)) == NULL)
                        return dbk_fail(e, "a DT_GNU_HASH chain runs past its segment");
                    memcpy(&hash, word, 4);
                    if (hash & 1)
                        break;
                }
                previous = start;
                last = (uint32_t)k;
            }
            if ((uint64_t)(previous ? last + 1 : header[1]) > *n_symbols)
                *n_symbols = previous ? (uint64_t)last + 1 : header[1];
        }
        return 0;
    }

    /* Version records: chains that end, names inside the string table, files among DT_NEEDED. */
    #define DBK_SET(bits, i) ((bits)[(i) >> 6] |= (uint64_t)1 << ((i) & 63))
    #define DBK_ISSET(bits, i) (((bits)[(i) >> 6] >> ((i) & 63)) & 1)

    static int dbk_check_versions(dbk_elf *e, const dbk_dynamic *d, uint64_t *defined,
                                  uint32_t *highest)
    {
        uint32_t steps = 0;
        *highest = 0;
        if (d->has_verneed) {
            uint64_t at = d->verneed;
            uint32_t files = 0;
            for (;;) {
                const unsigned char *bytes = dbk_table(e, at, sizeof(dbk_Verneed));
                dbk_Verneed need;
                uint64_t aux_at;
                uint32_t i, found = 0;
                if (bytes == NULL || ++steps > DBK_MAX_VERSION_RECORDS)
                    return dbk_fail(e, "DT_VERNEED records lie outside the file or do not end");
                memcpy(&need, bytes, sizeof(need));
                if (need.vn_version != 1 || need.vn_file >= e->strsz)
                    return dbk_fail(e, "a DT_VERNEED record has a bad vn_version or vn_file");
                for (i = 0; i < e->n_needed && !found; i++)
                    found = strcmp(e->strtab + need.vn_file, e->strtab + e->needed[i]) == 0;
                if (!found)
                    return dbk_fail(e, "a DT_VERNEED record names a file that is not a DT_NEEDED entry");
                if (++files > e->n_needed)
                    return dbk_fail(e, "more DT_VERNEED records than DT_NEEDED entries");
                aux_at = at + need.vn_aux;
                for (i = 0; need.vn_aux != 0; i++) {
                    dbk_Vernaux aux;
                    bytes = dbk_table(e, aux_at, sizeof(dbk_Vernaux));
                    if (bytes == NULL || ++steps > DBK_MAX_VERSION_RECORDS)
                        return dbk_fail(e, "DT_VERNEED auxiliary records lie outside the file or do not end");
                    memcpy(&aux, bytes, sizeof(aux));
                    if (aux.vna_name >= e->strsz)
                        return dbk_fail(e, "a DT_VERNEED version name lies outside the string table");
                    DBK_SET(defined, aux.vna_other & 0x7fff);
                    if ((aux.vna_other & 0x7fff) > *highest)
                        *highest = aux.vna_other & 0x7fff;
                    if (aux.vna_next == 0)
                        break;
                    aux_at += aux.vna_next;
                }
                if (need.vn_next == 0)
                    break;
                at += need.vn_next;
            }
        }
        if (d->has_verdef) {
            uint64_t at = d->verdef;
            for (;;) {
                const unsigned char *bytes = dbk_table(e, at, sizeof(dbk_Verdef));
                dbk_Verdef def;
                dbk_Verdaux aux;
                if (bytes == NULL || ++steps > DBK_MAX_VERSION_RECORDS)
                    return dbk_fail(e, "DT_VERDEF records lie outside the file or do not end");
                memcpy(&def, bytes, sizeof(def));
                if (def.vd_version != 1)
                    return dbk_fail(e, "a DT_VERDEF record has a bad vd_version");
                bytes = dbk_table(e, at + def.vd_aux, sizeof(dbk_Verdaux));
                if (bytes == NULL)
                    return dbk_fail(e, "a DT_VERDEF name record lies outside the file");
                memcpy(&aux, bytes, sizeof(aux));
                if (aux.vda_name >= e->strsz)
                    return dbk_fail(e, "a DT_VERDEF version name lies outside the string table");
                DBK_SET(defined, def.vd_ndx & 0x7fff);
                if ((def.vd_ndx & 0x7fff) > *highest)
                    *highest = def.vd_ndx & 0x7fff;
                if (def.vd_next == 0)
                    break;
                at += def.vd_next;
            }
        }
        return 0;
    }

    /* -- relocations and symbols ------------------------------------------------------------ */

    typedef struct {
        uint64_t init_array, init_slots, fini_array, fini_slots;
        unsigned char *covered[2];  /* per init and fini slot: a relocation fills it */
        uint64_t image_start, image_end;
        uint64_t relative_count;    /* DT_RELACOUNT / DT_RELCOUNT */
        uint64_t symbol_capacity;   /* symbols DT_SYMTAB's segment holds from the file */
        uint64_t max_symbol;
        int text_relocations;
    } dbk_relocation_context;

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

    static int dbk_check_symbols(dbk_elf *e, const dbk_dynamic *d, uint64_t n_symbols,
                                 const uint64_t *defined, uint32_t highest)
    {
        const unsigned char *bytes, *versions = NULL;
        uint64_t i;
        if (n_symbols == 0)
            return 0;
        if (!DBK_HAS(d, DT_SYMTAB))
            return dbk_fail(e, "DT_SYMTAB is missing");
        if (n_symbols > DBK_MAX_TABLE_BYTES / sizeof(dbk_Sym)
                || (bytes = dbk_table(e, DBK_VAL(d, DT_SYMTAB), n_symbols * sizeof(dbk_Sym))) == NULL)
            return dbk_fail(e, "the symbol table (DT_SYMTAB) lies outside the file part of every PT_LOAD segment");
        if (d->has_versym) {
            if (!d->has_verneed && !d->has_verdef)
                return dbk_fail(e, "DT_VERSYM without DT_VERNEED or DT_VERDEF");
            if ((versions = dbk_table(e, d->versym, n_symbols * 2)) == NULL)
                return dbk_fail(e, "the version table (DT_VERSYM) lies outside the file part of every PT_LOAD segment");
        }
        for (i = 0; i < n_symbols; i++) {
            dbk_Sym s;
            memcpy(&s, bytes + i * sizeof(dbk_Sym), sizeof(s));
            if (s.st_name >= e->strsz)
                return dbk_fail(e, "a symbol's name lies outside the string table");
            if (versions != NULL) {
                uint16_t v;
                memcpy(&v, versions + i * 2, 2);
                v &= 0x7fff;
                if (v > 1 && (v > highest || !DBK_ISSET(defined, v)))
                    return dbk_fail(e, "a DT_VERSYM entry names a version no DT_VERNEED or DT_VERDEF record defines");
            }
            if (s.st_shndx == SHN_UNDEF && i > 0 && (s.st_other & 3) != STV_DEFAULT)
                return dbk_fail(e, "an undefined symbol has non-default visibility");
            /* The linker binds a local symbol to its own object without a lookup: an undefined
             * one would become the library's load address (a weak import turned non-NULL). */
            if (s.st_shndx == SHN_UNDEF && i > 0 && DBK_ST_BIND(s.st_info) == STB_LOCAL)
                return dbk_fail(e, "an undefined symbol is local (STB_LOCAL): the dynamic linker would bind it to the library's own load address");
            if (s.st_shndx == SHN_UNDEF || s.st_shndx >= SHN_LORESERVE
                    || DBK_ST_TYPE(s.st_info) == STT_TLS)
                continue;
            if (DBK_ST_TYPE(s.st_info) == STT_FUNC || DBK_ST_TYPE(s.st_info) == STT_GNU_IFUNC) {
                if (dbk_segment(e, s.st_value, 1, 1, PF_X) == NULL)
                    return dbk_fail(e, "a function symbol's st_value lies outside every executable segment");
            } else if (dbk_segment(e, s.st_value, 0, 1, 0) == NULL) {
                return dbk_fail(e, "a symbol's st_value lies outside every PT_LOAD segment");
            }
        }
        return 0;
    }

    /* -- the section table ------------------------------------------------------------------ */

    /* The size of the section table dbk_check_sections reads (at e_shoff), or 0 for none. */
    static uint64_t dbk_section_table(const dbk_elf *e, const dbk_Ehdr *h)
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
    static int dbk_check_sections(dbk_elf *e, const dbk_Ehdr *h)
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

    /* What the checks will read past the first page, known from the headers alone: the dynamic
     * section, the PT_GNU_PROPERTY notes and the section table (in a small or stripped library
     * the dynamic section lies near the end of the file, the section table at its end). Regions
     * with less than DBK_MERGE_GAP_BYTES between them are read together, in one read per group
     * of two or more (a lone region is read when it is checked). Only offsets inside the file
     * are planned; a failed read is no verdict: the check that needs the bytes reads them again. */
    enum { DBK_PLANNED_MAX = 8 };  /* more PT_GNU_PROPERTY segments are read when checked */

    static void dbk_plan_reads(dbk_elf *e, const dbk_Ehdr *h)
    {
        uint64_t starts[DBK_PLANNED_MAX], ends[DBK_PLANNED_MAX], offset, size, low, high;
        int i, j, n = 0, members;
        for (i = 0; i < e->n_phdrs; i++) {
            const dbk_Phdr *p = &e->phdrs[i];
            if (n == DBK_PLANNED_MAX - 1)
                break;
            if ((p->p_type != PT_DYNAMIC && p->p_type != PT_GNU_PROPERTY) || p->p_filesz == 0
                    || p->p_filesz > DBK_MAX_DYNAMIC_BYTES
                    || dbk_table_offset(e, p->p_vaddr, p->p_filesz, &offset) != 0
                    || offset > e->file_size || p->p_filesz > e->file_size - offset)
                continue;
            starts[n] = offset;
            ends[n++] = offset + p->p_filesz;
        }
        if ((size = dbk_section_table(e, h)) != 0) {
            starts[n] = h->e_shoff;
            ends[n++] = h->e_shoff + size;
        }
        /* Drop what the first page holds; sort the rest by offset (a handful of entries). */
        for (i = 0; i < n; )
            if (dbk_held(e, starts[i], ends[i] - starts[i]) != NULL) {
                starts[i] = starts[--n];
                ends[i] = ends[n];
            } else {
                i++;
            }
        for (i = 1; i < n; i++)
            for (j = i; j > 0 && starts[j] < starts[j - 1]; j--) {
                uint64_t t = starts[j]; starts[j] = starts[j - 1]; starts[j - 1] = t;
                t = ends[j]; ends[j] = ends[j - 1]; ends[j - 1] = t;
            }
        for (i = 0; i < n; i = j) {
            low = starts[i];
            high = ends[i];
            members = 1;
            for (j = i + 1; j < n && (starts[j] <= high || starts[j] - high < DBK_MERGE_GAP_BYTES)
                            && (ends[j] <= high || ends[j] - low <= DBK_SPAN_BYTES); j++) {
                if (ends[j] > high)
                    high = ends[j];
                members++;
            }
            if (members > 1)
                dbk_read_buffer(e, low, high - low);
        }
    }

    /* Read the tables the dynamic section names in one go when they lie close together past the
     * first page (which holds them all in a small library). A table of unknown size counts with
     * its first bytes; the rest of it, if any, is read when it is checked. A table an earlier
     * read holds is not read again. */
    static void dbk_prefetch(dbk_elf *e, const dbk_dynamic *d)
    {
        uint64_t low = UINT64_MAX, high = 0, offset, end;
        const int tags[] = {DT_STRTAB, DT_RELA, DT_REL, DT_JMPREL, DT_RELR, DT_SYMTAB, DT_HASH};
        const int sizes[] = {DT_STRSZ, DT_RELASZ, DT_RELSZ, DT_PLTRELSZ, DT_RELRSZ, -1, -1};
        uint64_t starts[11], lengths[11];
        int i, n = 0;
        for (i = 0; i < 7; i++)
            if (DBK_HAS(d, tags[i])) {
                starts[n] = DBK_VAL(d, tags[i]);
                lengths[n++] = sizes[i] >= 0 && DBK_HAS(d, sizes[i]) ? DBK_VAL(d, sizes[i]) : 64;
            }
        if (d->has_gnu_hash) { starts[n] = d->gnu_hash; lengths[n++] = 64; }
        if (d->has_versym) { starts[n] = d->versym; lengths[n++] = 64; }
        if (d->has_verneed) { starts[n] = d->verneed; lengths[n++] = 64; }
        if (d->has_verdef) { starts[n] = d->verdef; lengths[n++] = 64; }
        for (i = 0; i < n; i++) {
            if (lengths[i] > DBK_SPAN_BYTES || dbk_table_offset(e, starts[i], lengths[i], &offset) != 0)
                continue;
            end = offset + lengths[i];
            if (dbk_held(e, offset, lengths[i]) != NULL)
                continue;
            if (offset < low) low = offset;
            if (end > high) high = end;
        }
        if (high == 0 || high - low > DBK_SPAN_BYTES)
            return;
        e->span = malloc(high - low);
        if (e->span == NULL)
            return;
        if (dbk_pread_all(e->fd, e->span, high - low, low) != 0) {
            free(e->span);
            e->span = NULL;
            return;
        }
        e->span_offset = low;
        e->span_bytes = high - low;
    }

    /* Everything the dynamic linker will trust, checked against the file. 0, or -1 with e->problem. */
    static int dbk_check_structure(dbk_elf *e, const dbk_Ehdr *h, long page_size)
    {
        dbk_dynamic d;
        dbk_relocation_context *c;
        uint64_t defined[0x8000 / 64];  /* version indexes the version records define */
        uint64_t n_symbols;
        uint32_t highest;
        int i, k, result = -1;
        if (dbk_check_segments(e, h, page_size) != 0)
            return -1;
        dbk_plan_reads(e, h);
        if (dbk_check_notes(e) != 0 || dbk_read_dynamic(e, &d) != 0)
            return -1;
        dbk_prefetch(e, &d);
        if (dbk_check_strings(e, &d) != 0 || dbk_check_hashes(e, &d, &n_symbols) != 0)
            return -1;
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
            for (i = 0; i < (int)(sizeof(pairs) / sizeof(pairs[0])); i++)
                if (DBK_HAS(&d, pairs[i][0]) && !DBK_HAS(&d, pairs[i][1]))
                    return dbk_fail(e, problems[i]);
        }
        if ((d.has_verneed || d.has_verdef) && !d.has_versym)
            return dbk_fail(e, "DT_VERNEED or DT_VERDEF without DT_VERSYM");
        if (d.relcount > 0 && !DBK_HAS(&d, DBK_PLTREL == DT_RELA ? DT_RELA : DT_REL))
            return dbk_fail(e, "DT_RELACOUNT or DT_RELCOUNT without its relocation table");
        if (DBK_HAS(&d, DT_SYMENT) && DBK_VAL(&d, DT_SYMENT) != sizeof(dbk_Sym))
            return dbk_fail(e, "DT_SYMENT is not the size of a symbol");
        if (DBK_HAS(&d, DT_PLTREL) && DBK_VAL(&d, DT_PLTREL) != DBK_PLTREL)
            return dbk_fail(e, "DT_PLTREL names the other relocation format");
        if (DBK_HAS(&d, DT_RELA) && (!DBK_HAS(&d, DT_RELASZ) || !DBK_HAS(&d, DT_RELAENT)
                                     || DBK_VAL(&d, DT_RELAENT) != sizeof(dbk_Rela)))
            return dbk_fail(e, "DT_RELA without DT_RELASZ, or DT_RELAENT not the size of a relocation");
        if (DBK_HAS(&d, DT_REL) && (!DBK_HAS(&d, DT_RELSZ) || !DBK_HAS(&d, DT_RELENT)
                                    || DBK_VAL(&d, DT_RELENT) != sizeof(dbk_Rel)))
            return dbk_fail(e, "DT_REL without DT_RELSZ, or DT_RELENT not the size of a relocation");
        if (DBK_HAS(&d, DT_RELR) && (!DBK_HAS(&d, DT_RELRSZ)
                                     || (DBK_HAS(&d, DT_RELRENT) && DBK_VAL(&d, DT_RELRENT) != sizeof(ElfW(Relr)))))
            return dbk_fail(e, "DT_RELR without DT_RELRSZ, or DT_RELRENT not the size of an entry");
        if (DBK_HAS(&d, DT_JMPREL) && (!DBK_HAS(&d, DT_PLTRELSZ) || !DBK_HAS(&d, DT_PLTREL)))
            return dbk_fail(e, "DT_JMPREL without DT_PLTRELSZ or DT_PLTREL");
        if (DBK_HAS(&d, DT_INIT) && dbk_segment(e, DBK_VAL(&d, DT_INIT), 1, 1, PF_X) == NULL)
            return dbk_fail(e, "DT_INIT lies outside every executable segment");
        if (DBK_HAS(&d, DT_FINI) && dbk_segment(e, DBK_VAL(&d, DT_FINI), 1, 1, PF_X) == NULL)
            return dbk_fail(e, "DT_FINI lies outside every executable segment");
        memset(defined, 0, sizeof(defined));
        c = calloc(1, sizeof(*c));
        if (c == NULL) {
            e->problem = "out of memory";
            goto done;
        }
        for (k = 0; k < 2; k++) {
            int array_tag = k ? DT_FINI_ARRAY : DT_INIT_ARRAY;
            int size_tag = k ? DT_FINI_ARRAYSZ : DT_INIT_ARRAYSZ;
            uint64_t size = DBK_VAL(&d, size_tag);
            if (!DBK_HAS(&d, array_tag))
                continue;
            if (!DBK_HAS(&d, size_tag) || size % sizeof(ElfW(Addr)) != 0
                    || size / sizeof(ElfW(Addr)) > DBK_MAX_ARRAY_SLOTS
                    || dbk_segment(e, DBK_VAL(&d, array_tag), size, 1, 0) == NULL) {
                e->problem = k ? "DT_FINI_ARRAY or DT_FINI_ARRAYSZ is missing, misaligned or outside every PT_LOAD segment"
                               : "DT_INIT_ARRAY or DT_INIT_ARRAYSZ is missing, misaligned or outside every PT_LOAD segment";
                goto done;
            }
            if (k) {
                c->fini_array = DBK_VAL(&d, array_tag);
                c->fini_slots = size / sizeof(ElfW(Addr));
            } else {
                c->init_array = DBK_VAL(&d, array_tag);
                c->init_slots = size / sizeof(ElfW(Addr));
            }
            if (size > 0 && (c->covered[k] = calloc(size / sizeof(ElfW(Addr)), 1)) == NULL) {
                e->problem = "out of memory";
                goto done;
            }
        }
        c->image_start = e->phdrs[e->loads[0]].p_vaddr;
        c->image_end = e->phdrs[e->loads[e->n_loads - 1]].p_vaddr + e->phdrs[e->loads[e->n_loads - 1]].p_memsz;
        c->relative_count = d.relcount;
        c->symbol_capacity = DBK_HAS(&d, DT_SYMTAB) ? dbk_room(e, DBK_VAL(&d, DT_SYMTAB)) / sizeof(dbk_Sym) : 0;
        c->text_relocations = DBK_HAS(&d, DT_TEXTREL)
                              || (DBK_HAS(&d, DT_FLAGS) && (DBK_VAL(&d, DT_FLAGS) & DF_TEXTREL));
        if (dbk_check_versions(e, &d, defined, &highest) != 0)
            goto done;
        if (DBK_HAS(&d, DT_RELA) && dbk_check_relocations(e, c, DBK_VAL(&d, DT_RELA), DBK_VAL(&d, DT_RELASZ),
                sizeof(dbk_Rela), 1, "DT_RELA + DT_RELASZ lies outside the file or is not whole relocations",
                DBK_PLTREL == DT_RELA) != 0)
            goto done;
        if (DBK_HAS(&d, DT_REL) && dbk_check_relocations(e, c, DBK_VAL(&d, DT_REL), DBK_VAL(&d, DT_RELSZ),
                sizeof(dbk_Rel), 0, "DT_REL + DT_RELSZ lies outside the file or is not whole relocations",
                DBK_PLTREL == DT_REL) != 0)
            goto done;
        if (DBK_HAS(&d, DT_JMPREL) && dbk_check_relocations(e, c, DBK_VAL(&d, DT_JMPREL), DBK_VAL(&d, DT_PLTRELSZ),
                DBK_PLTREL == DT_RELA ? sizeof(dbk_Rela) : sizeof(dbk_Rel), DBK_PLTREL == DT_RELA,
                "DT_JMPREL + DT_PLTRELSZ lies outside the file or is not whole relocations", 0) != 0)
            goto done;
        if (DBK_HAS(&d, DT_RELR) && dbk_check_relr(e, c, DBK_VAL(&d, DT_RELR), DBK_VAL(&d, DT_RELRSZ)) != 0)
            goto done;
        for (k = 0; k < 2; k++)
            for (i = 0; i < (int)(k ? c->fini_slots : c->init_slots); i++)
                if (!c->covered[k][i]) {
                    e->problem = "a DT_INIT_ARRAY or DT_FINI_ARRAY slot has no relocation";
                    goto done;
                }
        /* The hash tables cover the defined symbols; relocations may name more (undefined ones
         * past the hashed range): every symbol the linker will read is checked. */
        if (c->max_symbol + 1 > n_symbols && c->max_symbol > 0)
            n_symbols = c->max_symbol + 1;
        if (dbk_check_symbols(e, &d, n_symbols, defined, highest) != 0
                || dbk_check_sections(e, h) != 0)
            goto done;
        result = 0;
    done:
        if (c != NULL) {
            free(c->covered[0]);
            free(c->covered[1]);
        }
        free(c);
        return result;
    }
    """
    ctypedef struct dbk_Ehdr:
        unsigned char e_ident[16]
        uint16_t e_type
        uint16_t e_machine

    ctypedef struct dbk_elf:
        const char *problem
        int truncated
        uint64_t needed_bytes
        const char *strtab
        uint64_t strsz
        uint32_t n_needed, n_filters
        uint64_t needed[1]
        uint64_t filters[1]
        int64_t rpath, runpath
        int fd
        uint64_t file_size
        const unsigned char *page
        uint64_t page_bytes

    int dbk_check_structure(dbk_elf *e, const dbk_Ehdr *h, long page_size) nogil
    void dbk_elf_init(dbk_elf *e) nogil
    void dbk_elf_free(dbk_elf *e) nogil


cdef extern from "<unistd.h>" nogil:
    long sysconf(int name)
    enum:
        _SC_PAGESIZE


cdef enum ElfVerdict:
    ELF_OK
    ELF_OPEN_FAILED         # detail: errno
    ELF_NOT_REGULAR
    ELF_NOT_ELF
    ELF_TRUNCATED_HEADER
    ELF_WRONG_CLASS         # detail: the file's class
    ELF_WRONG_BYTE_ORDER    # detail: the file's byte order
    ELF_WRONG_TYPE          # detail: e_type
    ELF_WRONG_MACHINE       # detail: e_machine
    ELF_MALFORMED           # e.problem names the field
    ELF_TRUNCATED           # e.needed_bytes: bytes the segments need; e.file_size

cdef unsigned char _own_class = 0, _own_data = 0
cdef unsigned int _own_machine = 0
cdef long _page_size = sysconf(_SC_PAGESIZE)


cdef enum:
    FIRST_PAGE_WORDS = 512      # the first 4 KiB of a file: ELF and program headers usually fit


cdef int _check_elf(const char *path, dbk_elf *e, uint64_t *page, uint64_t *detail) noexcept nogil:
    """Check the ELF header, then the structures the dynamic linker will trust. ``e`` must have
    been through dbk_elf_init; ``page`` holds FIRST_PAGE_WORDS words. On return ``e.fd`` is the open file (or -1)
    for the caller to close, with dbk_elf_free."""
    cdef struct_stat st
    cdef dbk_Ehdr header
    cdef ssize_t got
    e.fd = c_open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY)
    if e.fd < 0:
        detail[0] = errno
        return ELF_OPEN_FAILED
    if fstat(e.fd, &st) != 0 or not S_ISREG(st.st_mode):
        return ELF_NOT_REGULAR
    e.file_size = <uint64_t>st.st_size
    got = pread(e.fd, page, FIRST_PAGE_WORDS * sizeof(uint64_t), 0)
    e.page = <const unsigned char *>page
    e.page_bytes = <uint64_t>got if got > 0 else 0
    memset(&header, 0, sizeof(header))
    if got > 0:
        memcpy(&header, page, <size_t>got if <size_t>got < sizeof(header) else sizeof(header))
    if got < 4 or header.e_ident[0] != 0x7f or header.e_ident[1] != b'E' \
            or header.e_ident[2] != b'L' or header.e_ident[3] != b'F':
        return ELF_NOT_ELF
    if got < 6:
        return ELF_TRUNCATED_HEADER
    if header.e_ident[4] != _own_class:
        detail[0] = header.e_ident[4]
        return ELF_WRONG_CLASS
    if header.e_ident[5] != _own_data:
        detail[0] = header.e_ident[5]
        return ELF_WRONG_BYTE_ORDER
    if got < <ssize_t>sizeof(header):
        return ELF_TRUNCATED_HEADER
    if header.e_type != 3:  # ET_DYN
        detail[0] = header.e_type
        return ELF_WRONG_TYPE
    if header.e_machine != _own_machine:
        detail[0] = header.e_machine
        return ELF_WRONG_MACHINE
    if dbk_check_structure(e, &header, _page_size) != 0:
        return ELF_TRUNCATED if e.truncated else ELF_MALFORMED
    return ELF_OK


def _learn_own_elf_identity(str module_path):
    """This process's ELF class, byte order and machine, read from this very extension module."""
    global _own_class, _own_data, _own_machine
    cdef dbk_Ehdr header
    cdef bytes path = os.fsencode(module_path)
    cdef int fd = c_open(path, O_RDONLY | O_CLOEXEC)
    if fd < 0:
        raise OSError(errno, "cannot read own ELF header", module_path)
    got = pread(fd, &header, sizeof(header), 0)
    c_close(fd)
    if got != sizeof(header):
        raise OSError("cannot read own ELF header", module_path)
    _own_class = header.e_ident[4]
    _own_data = header.e_ident[5]
    _own_machine = header.e_machine


_learn_own_elf_identity(__file__)

_ELF_CLASS_NAMES = {1: "32-bit", 2: "64-bit"}
_ELF_DATA_NAMES = {1: "little-endian", 2: "big-endian"}
_ELF_TYPE_NAMES = {0: "of no type", 1: "a relocatable object", 2: "an executable", 4: "a core file"}
_ELF_MACHINE_NAMES = {
    2: "SPARC", 3: "i386", 4: "Motorola 68000", 8: "MIPS", 15: "PA-RISC", 18: "SPARC32+",
    20: "PowerPC", 21: "PowerPC64", 22: "s390x", 40: "ARM", 42: "SuperH", 43: "SPARC V9",
    50: "IA-64", 62: "x86-64", 183: "AArch64", 190: "CUDA", 224: "AMDGPU", 243: "RISC-V",
    247: "BPF", 258: "LoongArch",
}


def elf_machine_name(int machine):
    """x86-64 for 62, AArch64 for 183, ...; "ELF machine N" for a number without a name."""
    return _ELF_MACHINE_NAMES.get(machine, f"ELF machine {machine}")


cdef tuple _check_elf_file(bytes path):
    """(reason, detail) when the file cannot be a shared object for this process, else None."""
    cdef uint64_t detail = 0
    cdef uint64_t page[FIRST_PAGE_WORDS]
    cdef dbk_elf elf
    cdef dbk_elf *e = &elf
    cdef int verdict
    cdef const char *c_path = path
    dbk_elf_init(e)
    try:
        with nogil:
            verdict = _check_elf(c_path, e, page, &detail)
        return None if verdict == ELF_OK else _elf_verdict(verdict, detail, e)
    finally:
        _release(e)


cdef void _release(dbk_elf *e) noexcept nogil:
    if e.fd >= 0:
        c_close(e.fd)
    dbk_elf_free(e)


cdef tuple _elf_verdict(int verdict, uint64_t detail, const dbk_elf *e):
    """(reason, detail) for a failed _check_elf."""
    if verdict == ELF_OPEN_FAILED:
        return Reason.UNREADABLE, _strerror(<int>detail)
    if verdict == ELF_NOT_REGULAR:
        return Reason.NOT_A_REGULAR_FILE, "no longer a regular file"
    if verdict == ELF_NOT_ELF:
        return Reason.NOT_A_SHARED_OBJECT, "not an ELF file"
    if verdict == ELF_TRUNCATED_HEADER:
        return Reason.NOT_A_SHARED_OBJECT, "truncated ELF header"
    if verdict == ELF_WRONG_CLASS:
        return (Reason.WRONG_ARCHITECTURE, f"ELF class is {_ELF_CLASS_NAMES.get(detail, detail)}, "
                f"this process is {_ELF_CLASS_NAMES.get(_own_class, _own_class)}")
    if verdict == ELF_WRONG_BYTE_ORDER:
        return (Reason.WRONG_ARCHITECTURE, f"{_ELF_DATA_NAMES.get(detail, detail)} ELF file, "
                f"this process is {_ELF_DATA_NAMES.get(_own_data, _own_data)}")
    if verdict == ELF_WRONG_TYPE:
        return Reason.NOT_A_SHARED_OBJECT, f"ELF file is {_ELF_TYPE_NAMES.get(detail, detail)}"
    if verdict == ELF_WRONG_MACHINE:
        return (Reason.WRONG_ARCHITECTURE, f"built for {elf_machine_name(<int>detail)}, "
                f"this process is {elf_machine_name(_own_machine)}")
    if verdict == ELF_TRUNCATED:
        return (Reason.NOT_A_SHARED_OBJECT,
                f"truncated: its segments need {e.needed_bytes} bytes, the file has {e.file_size}")
    return (Reason.NOT_A_SHARED_OBJECT,
            "malformed ELF file: " + (<bytes>e.problem).decode("ascii") if e.problem != NULL
            else "malformed ELF file")


_CANNOT_OPEN = ": cannot open shared object file"


cdef tuple _classify_dlopen_error(str path, str message):
    """Map the dynamic linker's message to a reason code."""
    cdef Py_ssize_t at = message.find(_CANNOT_OPEN)
    if at > 0 and message[:at] != path:
        return Reason.MISSING_DEPENDENCY, f"needs {message[:at]}, which the dynamic linker cannot find"
    if ("invalid ELF header" in message or "file too short" in message
            or "position-independent executable" in message or "not a shared object" in message.lower()):
        return Reason.NOT_A_SHARED_OBJECT, message
    if "wrong ELF class" in message:
        return Reason.WRONG_ARCHITECTURE, message
    return Reason.DLOPEN_FAILED, message


def classify_dlopen_error(str path, str message):
    """``(reason, detail)`` for the dynamic linker's message on failing to load ``path``."""
    return _classify_dlopen_error(path, message)


cdef Py_ssize_t _first_unloaded(const dbk_elf *e) except -2:
    """The first of a checked file's DT_NEEDED names, then its DT_AUXILIARY and DT_FILTER names,
    that the dynamic linker has not loaded yet (its index in that order), or -1 when all are
    loaded: the common case, with nothing to look for and no Python object made for it."""
    cdef uint32_t i
    for i in range(e.n_needed):
        if not _is_loaded(e.strtab + e.needed[i]):
            return <Py_ssize_t>i
    for i in range(e.n_filters):
        if not _is_loaded(e.strtab + e.filters[i]):
            return <Py_ssize_t>e.n_needed + i
    return -1


cdef object _dynamic_dependencies(const dbk_elf *e, Py_ssize_t first):
    """``(needed, rpath, runpath, filters)`` of a checked file: its DT_NEEDED names in order, its
    DT_RPATH and DT_RUNPATH (None when absent) and its DT_AUXILIARY and DT_FILTER names, all
    taken from its string table (every offset already checked to lie inside it), each name the
    dynamic linker has already loaded left out. ``first`` is _first_unloaded(e): the names
    before it are known to be loaded and it is known not to be, so neither is looked up again."""
    cdef Py_ssize_t k, n = e.n_needed
    cdef const char *name
    needed, filters = [], []
    if first >= 0:
        for k in range(first, n + e.n_filters):
            name = e.strtab + (e.needed[k] if k < n else e.filters[k - n])
            if k == first or not _is_loaded(name):
                (needed if k < n else filters).append(PyUnicode_DecodeFSDefault(name))
    rpath = PyUnicode_DecodeFSDefault(e.strtab + e.rpath) if e.rpath >= 0 else None
    runpath = PyUnicode_DecodeFSDefault(e.strtab + e.runpath) if e.runpath >= 0 else None
    return needed, rpath, runpath, filters


def inspect_elf_file(str path):
    """The pre-dlopen look at a file: ``(reason, detail, dependencies)``. ``reason`` and
    ``detail`` as check_elf_file gives them; ``dependencies`` is, for a file that passed,
    ``(needed, rpath, runpath, filters)`` as read from its dynamic section (without the names
    already loaded), else None."""
    cdef bytes encoded = os.fsencode(path)
    cdef const char *c_path = encoded
    cdef uint64_t detail = 0
    cdef uint64_t page[FIRST_PAGE_WORDS]
    cdef dbk_elf elf
    cdef dbk_elf *e = &elf
    cdef int verdict
    dbk_elf_init(e)
    try:
        with nogil:
            verdict = _check_elf(c_path, e, page, &detail)
        if verdict != ELF_OK:
            return _elf_verdict(verdict, detail, e) + (None,)
        return None, "", _dynamic_dependencies(e, _first_unloaded(e))
    finally:
        _release(e)


def check_elf_file(path):
    """``(reason, detail)`` when ``path`` cannot be a shared object for this process, else
    ``(None, "")``. Reads the file; never loads it."""
    failure = _check_elf_file(os.fsencode(path))
    return (None, "") if failure is None else failure


# ---------------------------------------------------------------------------------------------
# Libraries already loaded: the dynamic linker matches a DT_NEEDED name against the objects it
# has loaded (their path and soname) before it searches, and opens nothing for a match. The
# names are read from the link map with dl_iterate_phdr; nothing is opened.
# ---------------------------------------------------------------------------------------------

cdef extern from *:
    """
    #include <link.h>
    typedef struct { const char *name; int found; } dbk_wanted;

    /* The DT_SONAME of a loaded object, or NULL; only memory its own segments map is read. */
    static const char *dbk_loaded_soname(const struct dl_phdr_info *info)
    {
        const ElfW(Dyn) *dyn = NULL;
        uint64_t strtab = 0, soname = 0, at;
        int i, has_strtab = 0, has_soname = 0;
        for (i = 0; i < info->dlpi_phnum; i++)
            if (info->dlpi_phdr[i].p_type == PT_DYNAMIC)
                dyn = (const ElfW(Dyn) *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
        if (dyn == NULL)
            return NULL;
        for (; dyn->d_tag != DT_NULL; dyn++) {
            if (dyn->d_tag == DT_STRTAB) { strtab = dyn->d_un.d_ptr; has_strtab = 1; }
            else if (dyn->d_tag == DT_SONAME) { soname = dyn->d_un.d_val; has_soname = 1; }
        }
        if (!has_strtab || !has_soname)
            return NULL;
        /* The linker relocates DT_STRTAB in place in a writable dynamic section only. */
        at = (strtab < info->dlpi_addr ? info->dlpi_addr + strtab : strtab) + soname;
        for (i = 0; i < info->dlpi_phnum; i++) {
            const ElfW(Phdr) *p = &info->dlpi_phdr[i];
            uint64_t start = info->dlpi_addr + p->p_vaddr;
            if (p->p_type == PT_LOAD && at >= start && at < start + p->p_filesz)
                return (const char *)at;
        }
        return NULL;
    }

    /* dl_iterate_phdr callback: stops (returns 1) at the first loaded object whose path or
       soname is the wanted name. */
    static int dbk_match_loaded(struct dl_phdr_info *info, size_t size, void *data)
    {
        dbk_wanted *wanted = (dbk_wanted *)data;
        const char *soname;
        (void)size;
        if (info->dlpi_name == NULL || info->dlpi_name[0] == 0
                || strncmp(info->dlpi_name, "linux-", 6) == 0)   /* the program, the vDSO */
            return 0;
        if (strcmp(info->dlpi_name, wanted->name) == 0)
            return wanted->found = 1;
        soname = dbk_loaded_soname(info);
        if (soname != NULL && strcmp(soname, wanted->name) == 0)
            return wanted->found = 1;
        return 0;
    }
    """
    struct dl_phdr_info:
        const char *dlpi_name

    int dl_iterate_phdr(int (*callback)(dl_phdr_info *, size_t, void *) noexcept, void *data)
    ctypedef struct dbk_wanted:
        const char *name
        int found
    int dbk_match_loaded(dl_phdr_info *info, size_t size, void *data) noexcept
    const char *dbk_loaded_soname(const dl_phdr_info *info)


cdef int _collect_names(dl_phdr_info *info, size_t size, void *data) noexcept with gil:
    cdef set names = <set>data
    cdef const char *soname
    if info.dlpi_name == NULL or info.dlpi_name[0] == 0 \
            or strncmp(info.dlpi_name, b"linux-", 6) == 0:  # the program itself, the vDSO
        return 0
    names.add(<bytes>info.dlpi_name)
    soname = dbk_loaded_soname(info)
    if soname != NULL:
        names.add(<bytes>soname)
    return 0


cdef extern from "<string.h>" nogil:
    int strncmp(const char *a, const char *b, size_t n)


cdef set _loaded_names():
    cdef set names = set()
    dl_iterate_phdr(_collect_names, <void *>names)
    return names


# Objects loaded before this module: the program's own libraries and Python's extension modules,
# which are never unloaded (a set of their paths and sonames, as bytes, for the common names such
# as libc). Those loaded later (backends and what they need, which may be unloaded again) are
# looked for in the link map itself, in C, on every question: no Python object per loaded
# library, however many backends are loaded.
cdef set _startup_names = _loaded_names()


cdef bint _is_loaded(const char *name) except -1:
    cdef dbk_wanted wanted
    if <bytes>name in _startup_names:
        return True
    wanted.name = name
    wanted.found = 0
    dl_iterate_phdr(dbk_match_loaded, &wanted)
    return wanted.found != 0


def is_library_loaded(str name):
    """Whether the dynamic linker would match DT_NEEDED ``name`` with an object it has already
    loaded (by path or soname), so that it would open nothing for it."""
    cdef bytes encoded = PyUnicode_EncodeFSDefault(name)
    return b"\0" not in encoded and _is_loaded(encoded)
