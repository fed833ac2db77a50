/* objects.c - the handle table: what the host keeps for the runtime, what keeps what alive,
 * segments and the buffers that point into them, and the note of the call in progress. */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "host.h"

static dbk_object **slots;        /* pointers, so an object stays put when the table grows */
static uint32_t num_slots, capacity;
static uint32_t *free_slots;      /* a stack of released slots */
static uint32_t num_free;

static dbk_object *at(uint64_t handle)
{
    uint32_t slot = (uint32_t)(handle & 0xFFFFFFFFu);
    dbk_object *object;
    if (slot == 0 || slot > num_slots)
        return NULL;
    object = slots[slot - 1];
    if (object->kind == DBK_KIND_FREE || object->generation != (uint32_t)(handle >> 32))
        return NULL;
    return object;
}

static uint64_t handle_of(uint32_t slot)
{
    return ((uint64_t)slots[slot]->generation << 32) | (uint64_t)(slot + 1);
}

uint64_t dbk_object_add(uint32_t kind, void *pointer)
{
    uint32_t slot;
    dbk_object *object;
    if (num_free > 0) {
        slot = free_slots[--num_free];
    } else {
        if (num_slots == DBK_HOST_MAX_OBJECTS)
            return 0;
        if (num_slots == capacity) {
            uint32_t grown = capacity ? capacity * 2 : 64;
            dbk_object **more = realloc(slots, grown * sizeof *more);
            uint32_t *more_free;
            if (more == NULL)
                return 0;
            slots = more;
            more_free = realloc(free_slots, grown * sizeof *more_free);
            if (more_free == NULL)
                return 0;
            free_slots = more_free;
            capacity = grown;
        }
        object = calloc(1, sizeof *object);
        if (object == NULL)
            return 0;
        object->generation = 1;
        slot = num_slots;
        slots[num_slots++] = object;
    }
    object = slots[slot];
    object->kind = kind;
    object->refs = 1;
    object->owned = 1;
    object->pointer = pointer;
    memset(object->depends, 0, sizeof object->depends);
    return handle_of(slot);
}

dbk_object *dbk_object_get(uint64_t handle, uint32_t kind)
{
    dbk_object *object = at(handle);
    if (object == NULL || !object->owned || (kind != DBK_KIND_FREE && object->kind != kind))
        return NULL;
    return object;
}

void dbk_object_keep(uint64_t handle)
{
    dbk_object *object = at(handle);
    if (object != NULL)
        object->refs++;
}

static void destroy_sequence(dbk_sequence *sequence)
{
    for (uint32_t i = 0; i < sequence->num_keep; i++)
        dbk_object_release(sequence->keep[i]);
    free(sequence->steps);
    free(sequence->buffers);
    free(sequence->keep);
    free(sequence->times);
    free(sequence);
}

void dbk_object_release(uint64_t handle)
{
    dbk_object *object = at(handle);
    uint64_t depends[DBK_MAX_DEPENDENCIES];
    uint32_t kind;
    void *pointer;
    if (object == NULL || --object->refs > 0)
        return;
    kind = object->kind;
    pointer = object->pointer;
    memcpy(depends, object->depends, sizeof depends);
    /* The slot is free before the object goes, so nothing reached while destroying it (a
       dependency released below) can name it again. */
    object->kind = DBK_KIND_FREE;
    object->pointer = NULL;
    object->owned = 0;
    object->generation = object->generation == 0xFFFFFFFFu ? 1 : object->generation + 1;
    free_slots[num_free++] = (uint32_t)(handle & 0xFFFFFFFFu) - 1;
    if (kind == DBK_KIND_SEGMENT) {
        dbk_segment *segment = pointer;
        munmap(segment->base, segment->size);
        free(segment);
    } else if (kind == DBK_KIND_SEQUENCE) {
        destroy_sequence(pointer);
    } else if (kind == DBK_KIND_INSTANCE) {
        dbk_note("destroy (instance)");
        dbk_destroy_instance(pointer);
        dbk_note("");
    } else {
        dbk_destroy_backend_object(kind, pointer);
    }
    for (int i = 0; i < DBK_MAX_DEPENDENCIES; i++)
        if (depends[i] != 0)
            dbk_object_release(depends[i]);
}

void dbk_object_depend(dbk_object *object, int slot, uint64_t dependency)
{
    uint64_t before = object->depends[slot];
    if (dependency != 0)
        dbk_object_keep(dependency);
    object->depends[slot] = dependency;
    if (before != 0)
        dbk_object_release(before);
}

void dbk_object_disown(uint64_t handle)
{
    dbk_object *object = at(handle);
    if (object == NULL || !object->owned)
        return;
    object->owned = 0;
    dbk_object_release(handle);
}

void dbk_objects_destroy_all(void)
{
    /* Sequences first, then compiled sub-graphs, workloads and factories, then what they kept:
       the order the runtime destroys them in, whatever the runtime did before. */
    static const uint32_t order[] = {DBK_KIND_SEQUENCE, DBK_KIND_COMPILED, DBK_KIND_WORKLOAD,
                                     DBK_KIND_FACTORY, DBK_KIND_CONTEXT, DBK_KIND_PROFILING,
                                     DBK_KIND_MEMORY_MANAGER, DBK_KIND_INSTANCE,
                                     DBK_KIND_SEGMENT};
    for (size_t k = 0; k < sizeof order / sizeof order[0]; k++)
        for (uint32_t slot = 0; slot < num_slots; slot++)
            if (slots[slot]->kind == order[k] && slots[slot]->owned)
                dbk_object_disown(handle_of(slot));
}

/* ---- segments and buffers ---------------------------------------------------------------- */

void *dbk_segment_span(dbk_reader *r, uint64_t handle, uint64_t offset, uint64_t size,
                       int writable)
{
    dbk_object *object = dbk_object_get(handle, DBK_KIND_SEGMENT);
    dbk_segment *segment;
    if (object == NULL) {
        dbk_refuse(r, "a buffer names no live segment");
        return NULL;
    }
    segment = object->pointer;
    if (offset > segment->size || size > segment->size - offset) {
        dbk_refuse(r, "a buffer lies outside its segment");
        return NULL;
    }
    if (writable && !segment->writable) {
        dbk_refuse(r, "an output buffer lies in a read-only segment");
        return NULL;
    }
    return segment->base + offset;
}

int dbk_read_buffers(dbk_reader *r, uint32_t count, BackendBuffer *buffers, uint32_t minor,
                     int outputs)
{
    dbk_wire_buffer wire;
    const void *raw;
    for (uint32_t i = 0; i < count; i++) {
        raw = dbk_take(r, sizeof wire);
        if (raw == NULL)
            return -1;
        memcpy(&wire, raw, sizeof wire);
        memset(&buffers[i], 0, sizeof buffers[i]);
        buffers[i].struct_size = sizeof buffers[i];
        buffers[i].data = dbk_segment_span(r, wire.segment, wire.offset, wire.size, outputs);
        if (buffers[i].data == NULL)
            return -1;
        buffers[i].size_bytes = wire.size;
        /* Backends before 1.3 read a reserved zero there. */
        if (minor >= 3) {
            buffers[i].flags = wire.flags & BACKEND_BUFFER_READ_ONLY;
            if (!outputs && !((dbk_segment *)dbk_object_get(wire.segment, DBK_KIND_SEGMENT)
                              ->pointer)->writable)
                buffers[i].flags |= BACKEND_BUFFER_READ_ONLY;
        }
    }
    return 0;
}

/* ---- the call note ----------------------------------------------------------------------- */

static char *note_page;

void dbk_note_init(void *page)
{
    note_page = page;
}

void dbk_note(const char *call)
{
    size_t length;
    if (note_page == NULL)
        return;
    length = strlen(call);
    if (length >= DBK_HOST_NOTE_BYTES)
        length = DBK_HOST_NOTE_BYTES - 1;
    /* The terminator first: a reader that looks in the middle sees a shorter note, never a
       longer one. */
    note_page[length] = 0;
    memcpy(note_page, call, length);
}
