/* The string table, the hash tables and the symbols: what a lookup by name reads. The symbols
 * checked are those the hash tables reach and those relocations name; they are the dynamic
 * symbols dbk_symbol_at gives. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

int dbk_check_strings(dbk_elf *e, const dbk_dynamic *d)
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

int dbk_check_hashes(dbk_elf *e, const dbk_dynamic *d, uint64_t *n_symbols)
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


int dbk_check_symbols(dbk_elf *e, const dbk_dynamic *d, uint64_t n_symbols,
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
    e->symtab = bytes;
    e->n_symbols = n_symbols;
    return 0;
}

int dbk_symbol_at(const dbk_elf *e, uint64_t index, dbk_symbol *out)
{
    dbk_Sym s;
    if (index >= e->n_symbols)
        return -1;
    memcpy(&s, e->symtab + index * sizeof(s), sizeof(s));
    out->name = s.st_name == 0 ? NULL : e->strtab + s.st_name;  /* checked: inside, NUL-ended */
    out->binding = (unsigned char)DBK_ST_BIND(s.st_info);
    out->type = (unsigned char)DBK_ST_TYPE(s.st_info);
    out->defined = s.st_shndx != SHN_UNDEF;
    return 0;
}
