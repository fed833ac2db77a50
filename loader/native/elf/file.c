/* Reading the file: the first page, then bounded reads that bring neighbouring records along,
 * planned from the headers and the dynamic section so that a library takes few reads. (The
 * lookups every check makes many times, of held bytes and of addresses in the PT_LOAD
 * segments, are inline in internal.h.) */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

enum {
    DBK_SPAN_BYTES = 1 << 20,             /* tables closer than this are read in one go */
    /* Regions known in advance are read together when fewer bytes than this lie between
     * them: a gap shorter than the smallest page holds no page that separate reads would
     * not touch, and a read costs more than copying that many bytes more. */
    DBK_MERGE_GAP_BYTES = 4 << 10,
};

void dbk_elf_init(dbk_elf *e)
{
    memset(e, 0, offsetof(dbk_elf, needed));
    e->fd = -1;
    e->rpath = e->runpath = -1;
}

void dbk_elf_free(dbk_elf *e)
{
    int i;
    if (e->fd >= 0)
        close(e->fd);
    e->fd = -1;
    for (i = 0; i < e->n_buffers; i++)
        free(e->buffers[i]);
    e->n_buffers = 0;
    free(e->span);
    e->span = NULL;
}

int dbk_fail(dbk_elf *e, const char *problem)
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

const unsigned char *dbk_read_buffer(dbk_elf *e, uint64_t offset, uint64_t size)
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

uint64_t dbk_room(const dbk_elf *e, uint64_t vaddr)
{
    const dbk_Phdr *p = dbk_segment(e, vaddr, 1, 0, PF_R);
    return p == NULL ? 0 : p->p_filesz - (vaddr - p->p_vaddr);
}

uint64_t dbk_image_end(const dbk_elf *e)
{
    const dbk_Phdr *last = &e->phdrs[e->loads[e->n_loads - 1]];
    return last->p_vaddr + last->p_memsz;
}

/* What the checks will read past the first page, known from the headers alone: the dynamic
 * section, the PT_GNU_PROPERTY notes and the section table (in a small or stripped library
 * the dynamic section lies near the end of the file, the section table at its end). Regions
 * with less than DBK_MERGE_GAP_BYTES between them are read together, in one read per group
 * of two or more (a lone region is read when it is checked). Only offsets inside the file
 * are planned; a failed read is no verdict: the check that needs the bytes reads them again. */
enum { DBK_PLANNED_MAX = 8 };  /* more PT_GNU_PROPERTY segments are read when checked */

void dbk_plan_reads(dbk_elf *e, const dbk_Ehdr *h)
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
void dbk_prefetch(dbk_elf *e, const dbk_dynamic *d)
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

