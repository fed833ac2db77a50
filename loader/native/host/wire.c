/* wire.c - frames on the channel, untrusted payloads read with bounds, replies, layers. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "host.h"

/* ---- reading a payload ------------------------------------------------------------------- */

void dbk_refuse(dbk_reader *r, const char *problem)
{
    if (r->problem == NULL)
        r->problem = problem;
    r->left = 0;
}

const void *dbk_take(dbk_reader *r, size_t bytes)
{
    const void *at = r->at;
    if (r->problem != NULL || bytes > r->left) {
        dbk_refuse(r, "the request is shorter than its contents say");
        return NULL;
    }
    r->at += bytes;
    r->left -= bytes;
    return at;
}

uint32_t dbk_take_u32(dbk_reader *r)
{
    uint32_t value = 0;
    const void *at = dbk_take(r, sizeof value);
    if (at != NULL)
        memcpy(&value, at, sizeof value);
    return value;
}

uint64_t dbk_take_u64(dbk_reader *r)
{
    uint64_t value = 0;
    const void *at = dbk_take(r, sizeof value);
    if (at != NULL)
        memcpy(&value, at, sizeof value);
    return value;
}

uint32_t dbk_take_count(dbk_reader *r, size_t item_bytes)
{
    uint32_t count = dbk_take_u32(r);
    /* Every item takes at least item_bytes of what is left: a count beyond that is a lie,
       refused before anything is allocated for it. */
    if (item_bytes > 0 && count > r->left / item_bytes) {
        dbk_refuse(r, "a count is larger than the request can hold");
        return 0;
    }
    return count;
}

/* ---- writing a reply --------------------------------------------------------------------- */

int dbk_fits(const dbk_writer *w, size_t bytes)
{
    return !w->failed && bytes <= DBK_HOST_MAX_FRAME - sizeof(dbk_frame) - w->size;
}

void dbk_put(dbk_writer *w, const void *data, size_t bytes)
{
    size_t capacity;
    unsigned char *grown;
    if (!dbk_fits(w, bytes)) {
        w->failed = 1;
        return;
    }
    if (w->size + bytes > w->capacity) {
        capacity = w->capacity ? w->capacity : 256;
        while (capacity < w->size + bytes)
            capacity *= 2;
        grown = realloc(w->data, capacity);
        if (grown == NULL) {
            w->failed = 1;
            return;
        }
        w->data = grown;
        w->capacity = capacity;
    }
    if (bytes > 0)
        memcpy(w->data + w->size, data, bytes);
    w->size += bytes;
}

void dbk_put_u32(dbk_writer *w, uint32_t value) { dbk_put(w, &value, sizeof value); }
void dbk_put_u64(dbk_writer *w, uint64_t value) { dbk_put(w, &value, sizeof value); }
void dbk_put_i64(dbk_writer *w, int64_t value) { dbk_put(w, &value, sizeof value); }
void dbk_put_f64(dbk_writer *w, double value) { dbk_put(w, &value, sizeof value); }

void dbk_put_string(dbk_writer *w, const char *text, size_t length)
{
    dbk_put_u32(w, (uint32_t)length);
    dbk_put(w, text, length);
}

void dbk_put_message(dbk_writer *w, char *message)
{
    message[DBK_HOST_MESSAGE_BYTES - 1] = 0;
    dbk_put_string(w, message, strlen(message));
}

void dbk_reply_problem(dbk_reply *reply, uint32_t outcome, const char *text)
{
    reply->outcome = outcome;
    reply->handle = 0;
    reply->payload.size = 0;
    reply->payload.failed = 0;
    dbk_put_string(&reply->payload, text, strlen(text));
}

/* ---- the channel ------------------------------------------------------------------------- */

static int64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* Before the blocking read of a request: polls the channel for up to DBK_HOST_SPIN_NS when the
   last request was waited for less than that (protocol.h); 1 when something arrived. */
static int arrived_soon(dbk_channel *c)
{
    unsigned char peek;
    int64_t start = now_ns(), now = start;
    if (c->last_wait_ns > DBK_HOST_SPIN_NS)
        return 0;
    do {
        ssize_t got = recv(c->fd, &peek, 1, MSG_PEEK | MSG_DONTWAIT);
        if (got >= 0 || (errno != EAGAIN && errno != EINTR))
            return 1;           /* data, end of file or an error: recvmsg says which */
        now = now_ns();
    } while (now - start <= DBK_HOST_SPIN_NS);
    return 0;
}

static int fill(dbk_channel *c, size_t wanted)
{
    struct msghdr message;
    struct iovec vector;
    union {
        struct cmsghdr header;
        char space[CMSG_SPACE(sizeof(int) * 4)];
    } control;
    struct cmsghdr *cmsg;
    ssize_t got;
    int64_t waiting = c->used == 0 ? now_ns() : -1;  /* between frames: how long the wait */
    if (c->used == 0)
        arrived_soon(c);
    while (c->used < wanted) {
        memset(&message, 0, sizeof message);
        vector.iov_base = c->buffer + c->used;
        vector.iov_len = c->capacity - c->used;
        message.msg_iov = &vector;
        message.msg_iovlen = 1;
        message.msg_control = control.space;
        message.msg_controllen = sizeof control.space;
        got = recvmsg(c->fd, &message, MSG_CMSG_CLOEXEC);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            return got == 0 ? 0 : -1;
        for (cmsg = CMSG_FIRSTHDR(&message); cmsg != NULL; cmsg = CMSG_NXTHDR(&message, cmsg)) {
            if (cmsg->cmsg_level != SOL_SOCKET || cmsg->cmsg_type != SCM_RIGHTS)
                continue;
            size_t count = (cmsg->cmsg_len - CMSG_LEN(0)) / sizeof(int);
            for (size_t i = 0; i < count; i++) {
                int received;
                memcpy(&received, CMSG_DATA(cmsg) + i * sizeof(int), sizeof received);
                /* More waiting than frames can claim: the runtime is not sending them. */
                if (c->num_fds < DBK_CHANNEL_MAX_FDS)
                    c->fds[c->num_fds++] = received;
                else
                    close(received);
            }
        }
        c->used += (size_t)got;
        if (waiting >= 0) {
            c->last_wait_ns = now_ns() - waiting;
            waiting = -1;
        }
    }
    return 1;
}

static int grow(dbk_channel *c, size_t capacity)
{
    unsigned char *grown;
    if (capacity <= c->capacity)
        return 0;
    grown = realloc(c->buffer, capacity);
    if (grown == NULL)
        return -1;
    c->buffer = grown;
    c->capacity = capacity;
    return 0;
}

int dbk_channel_take_fd(dbk_channel *c)
{
    int fd;
    if (c->num_fds == 0)
        return -1;
    fd = c->fds[0];
    memmove(c->fds, c->fds + 1, (size_t)(c->num_fds - 1) * sizeof(int));
    c->num_fds--;
    return fd;
}

int dbk_channel_next(dbk_channel *c, dbk_frame *frame, const unsigned char **payload)
{
    int filled;
    /* Drop the frame returned last; a frame that came with it in one read moves to the front. */
    if (c->consumed > 0) {
        memmove(c->buffer, c->buffer + c->consumed, c->used - c->consumed);
        c->used -= c->consumed;
        c->consumed = 0;
    }
    if (grow(c, 1 << 16) != 0)
        return -1;
    filled = fill(c, sizeof *frame);
    if (filled <= 0)
        return filled;
    memcpy(frame, c->buffer, sizeof *frame);
    if (frame->size < sizeof *frame || frame->size > DBK_HOST_MAX_FRAME) {
        /* A stream cannot be read past a frame whose length is wrong. */
        fprintf(stderr, "dynamic-backend-host: a frame of %u bytes; the channel is broken\n",
                (unsigned)frame->size);
        return -1;
    }
    if (grow(c, frame->size) != 0) {
        fprintf(stderr, "dynamic-backend-host: no memory for a frame of %u bytes\n",
                (unsigned)frame->size);
        return -1;
    }
    filled = fill(c, frame->size);
    if (filled <= 0)
        return filled < 0 ? -1 : 0;
    *payload = c->buffer + sizeof *frame;
    c->consumed = frame->size;
    return 1;
}

int dbk_channel_reply(dbk_channel *c, uint32_t op, dbk_reply *reply)
{
    dbk_frame frame;
    struct iovec parts[2];
    struct msghdr message;
    size_t total, sent = 0;
    ssize_t got;
    if (reply->payload.failed)
        dbk_reply_problem(reply, DBK_OUTCOME_NO_MEMORY,
                          "the reply is larger than the host can send or allocate");
    memset(&frame, 0, sizeof frame);
    frame.size = (uint32_t)(sizeof frame + reply->payload.size);
    frame.op = op;
    frame.handle = reply->handle;
    frame.value = reply->value;
    frame.outcome = reply->outcome;
    total = frame.size;
    while (sent < total) {
        size_t skip = sent;
        int n = 0;
        if (skip < sizeof frame) {
            parts[n].iov_base = (char *)&frame + skip;
            parts[n++].iov_len = sizeof frame - skip;
            skip = 0;
        } else {
            skip -= sizeof frame;
        }
        if (reply->payload.size > skip) {
            parts[n].iov_base = reply->payload.data + skip;
            parts[n++].iov_len = reply->payload.size - skip;
        }
        memset(&message, 0, sizeof message);
        message.msg_iov = parts;
        message.msg_iovlen = (size_t)n;
        got = sendmsg(c->fd, &message, MSG_NOSIGNAL);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            return -1;
        sent += (size_t)got;
    }
    return 0;
}

/* ---- layers ------------------------------------------------------------------------------ */

int dbk_read_layer(dbk_reader *r, dbk_layer *layer)
{
    uint32_t count, descriptor_bytes, struct_size;
    const void *raw;
    memset(layer, 0, sizeof *layer);
    layer->description.struct_size = sizeof layer->description;
    layer->description.layer_type = dbk_take_u32(r);
    layer->description.num_inputs = dbk_take_u32(r);
    layer->description.num_outputs = dbk_take_u32(r);
    descriptor_bytes = dbk_take_u32(r);
    if (r->problem != NULL)
        return -1;
    if (layer->description.num_inputs > 0xFFFF || layer->description.num_outputs > 0xFFFF) {
        dbk_refuse(r, "a layer with more than 65535 inputs or outputs");
        return -1;
    }
    count = layer->description.num_inputs + layer->description.num_outputs;
    if (count > r->left / sizeof(BackendTensorInfo)) {
        dbk_refuse(r, "a layer's tensor infos run past the request");
        return -1;
    }
    if (descriptor_bytes != 0 &&
        (descriptor_bytes < sizeof(uint32_t) || descriptor_bytes > DBK_HOST_MAX_DESCRIPTOR)) {
        dbk_refuse(r, "a layer descriptor's size is out of range");
        return -1;
    }
    layer->infos = calloc(count ? count : 1, sizeof(BackendTensorInfo));
    if (layer->infos == NULL) {
        dbk_refuse(r, "no memory for a layer's tensor infos");
        return -1;
    }
    raw = dbk_take(r, (size_t)count * sizeof(BackendTensorInfo));
    if (raw == NULL)
        return -1;
    memcpy(layer->infos, raw, (size_t)count * sizeof(BackendTensorInfo));
    for (uint32_t i = 0; i < count; i++) {
        if (layer->infos[i].struct_size != sizeof(BackendTensorInfo) ||
            layer->infos[i].num_dimensions > BACKEND_MAX_DIMENSIONS) {
            dbk_refuse(r, "a tensor info of the wrong size or with too many dimensions");
            return -1;
        }
    }
    layer->description.inputs = layer->infos;
    layer->description.outputs = layer->infos + layer->description.num_inputs;
    if (descriptor_bytes != 0) {
        raw = dbk_take(r, descriptor_bytes);
        if (raw == NULL)
            return -1;
        memcpy(&struct_size, raw, sizeof struct_size);
        /* A backend reads struct_size bytes of it: no more than there are. */
        if (struct_size != descriptor_bytes) {
            dbk_refuse(r, "a layer descriptor's struct_size is not its size");
            return -1;
        }
        layer->descriptor = calloc(1, DBK_HOST_MAX_DESCRIPTOR);
        if (layer->descriptor == NULL) {
            dbk_refuse(r, "no memory for a layer descriptor");
            return -1;
        }
        memcpy(layer->descriptor, raw, descriptor_bytes);
        layer->description.descriptor = layer->descriptor;
    }
    return 0;
}

void dbk_free_layer(dbk_layer *layer)
{
    free(layer->infos);
    free(layer->descriptor);
    layer->infos = NULL;
    layer->descriptor = NULL;
}
