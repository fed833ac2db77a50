/*
 * dynamic-backend-host PARENT_PID FILE BACKEND_ID MAJOR MINOR DEV INO SIZE MTIME_NS
 *                      [--address-space BYTES] [--cpu-time SECONDS]
 *
 * Serves one backend library to the runtime that started it, so that a backend that crashes,
 * exits or hangs takes only this process down (CONTRACT-models section 16). The runtime starts
 * it with the channel on DBK_HOST_CHANNEL_FD and the status page on DBK_HOST_STATUS_FD (see
 * protocol.h), its output on a pipe the runtime reads, in a session of its own.
 *
 * Start-up, before any of the backend's code runs: the process dies with its parent
 * (PR_SET_PDEATHSIG, then a check that the parent is still the one named), closes every
 * descriptor but its own, leads its own process group, writes no core files, and takes the
 * limits an operator set (address space, CPU time). Then it loads FILE as the loader does:
 * the same file it was registered from (device, inode, size and modification time), the ELF
 * pre-checks, dlopen with RTLD_NOW | RTLD_LOCAL, the three entry points, the id and version it
 * was registered with, one instance from the factory with a well-formed header, and
 * is_available. It answers READY, or REFUSED with the reason, then serves requests, one at a
 * time, until the channel closes or SHUTDOWN.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../elf/elf_reader.h"
#include "../struct_members.h"
#include "host.h"

enum {
    EXIT_USAGE = 2,               /* bad arguments: the runtime's mistake */
    EXIT_ORPHANED = 3,            /* the parent was gone before the host was ready */
    EXIT_CHANNEL = 4,             /* the channel broke (a frame of an impossible size) */
};

typedef struct options {
    pid_t parent;
    const char *path, *backend_id;
    uint32_t major, minor;
    uint64_t dev, ino, size, mtime_ns;
    uint64_t address_space, cpu_time;        /* 0: no limit */
} options;

static int number(const char *text, uint64_t *value)
{
    char *end;
    if (text == NULL || *text < '0' || *text > '9')
        return -1;
    errno = 0;
    *value = strtoull(text, &end, 10);
    return errno != 0 || *end != 0 ? -1 : 0;
}

static int parse(int argc, char **argv, options *o)
{
    /* PARENT_PID, then MAJOR through MTIME_NS (argv[4] to argv[9]). */
    static const int numbers[] = {1, 4, 5, 6, 7, 8, 9};
    uint64_t v[7];
    memset(o, 0, sizeof *o);
    if (argc < 10)
        return -1;
    for (int i = 0; i < 7; i++)
        if (number(argv[numbers[i]], &v[i]) != 0)
            return -1;
    if (v[0] == 0 || v[0] > 0x7FFFFFFF || v[1] > 0xFFFFFFFFu || v[2] > 0xFFFFFFFFu)
        return -1;
    o->parent = (pid_t)v[0];
    o->path = argv[2];
    o->backend_id = argv[3];
    o->major = (uint32_t)v[1];
    o->minor = (uint32_t)v[2];
    o->dev = v[3];
    o->ino = v[4];
    o->size = v[5];
    o->mtime_ns = v[6];
    for (int i = 10; i < argc; i += 2) {
        uint64_t *target = strcmp(argv[i], "--address-space") == 0 ? &o->address_space
                         : strcmp(argv[i], "--cpu-time") == 0 ? &o->cpu_time : NULL;
        if (target == NULL || i + 1 >= argc || number(argv[i + 1], target) != 0 || *target == 0)
            return -1;
    }
    return 0;
}

/* ---- containment ------------------------------------------------------------------------- */

static void close_other_descriptors(void)
{
    /* close_range(2) where the kernel has it; otherwise every descriptor /proc lists. */
    if (syscall(SYS_close_range, DBK_HOST_STATUS_FD + 1, ~0U, 0) == 0)
        return;
    long last = sysconf(_SC_OPEN_MAX);
    for (long fd = DBK_HOST_STATUS_FD + 1; fd < (last > 0 ? last : 65536); fd++)
        close((int)fd);
}

static void contain(const options *o)
{
    struct rlimit limit;
    /* The signal reaches this process when the thread that started it ends: the runtime starts
       hosts from one thread that lives as long as it does. The check below closes the window
       between fork and prctl, in which the parent may already have died. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != o->parent)
        _exit(EXIT_ORPHANED);
    close_other_descriptors();
    if (getpgrp() != getpid())
        setsid();
    signal(SIGPIPE, SIG_IGN);
    limit.rlim_cur = limit.rlim_max = 0;
    setrlimit(RLIMIT_CORE, &limit);
    if (o->address_space != 0) {
        limit.rlim_cur = limit.rlim_max = (rlim_t)o->address_space;
        setrlimit(RLIMIT_AS, &limit);
    }
    if (o->cpu_time != 0) {
        /* SIGXCPU at the soft limit, SIGKILL a second later. */
        limit.rlim_cur = (rlim_t)o->cpu_time;
        limit.rlim_max = (rlim_t)o->cpu_time + 1;
        setrlimit(RLIMIT_CPU, &limit);
    }
}

/* ---- loading ----------------------------------------------------------------------------- */

static int same_file(const options *o, const struct stat *s)
{
    uint64_t mtime = (uint64_t)s->st_mtim.tv_sec * 1000000000u + (uint64_t)s->st_mtim.tv_nsec;
    return (uint64_t)s->st_dev == o->dev && (uint64_t)s->st_ino == o->ino &&
           (uint64_t)s->st_size == o->size && mtime == o->mtime_ns;
}

static int own_identity(dbk_identity *own)
{
    unsigned char header[20];
    int fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
    ssize_t got = fd < 0 ? -1 : pread(fd, header, sizeof header, 0);
    if (fd >= 0)
        close(fd);
    if (got != (ssize_t)sizeof header)
        return -1;
    own->elf_class = header[4];
    own->byte_order = header[5];
    memcpy(&own->machine, header + 18, sizeof own->machine);
    return 0;
}

static const char *elf_problem(dbk_verdict verdict, const dbk_elf *e, char *text)
{
    switch (verdict) {
    case DBK_ELF_OPEN_FAILED: return "the file cannot be opened";
    case DBK_ELF_NOT_REGULAR: return "no longer a regular file";
    case DBK_ELF_NOT_ELF: return "not an ELF file";
    case DBK_ELF_TRUNCATED_HEADER: return "truncated ELF header";
    case DBK_ELF_WRONG_CLASS:
    case DBK_ELF_WRONG_BYTE_ORDER:
    case DBK_ELF_WRONG_MACHINE: return "built for another architecture";
    case DBK_ELF_WRONG_TYPE: return "not a shared object";
    case DBK_ELF_TRUNCATED: return "truncated: its segments lie past the end of the file";
    default:
        snprintf(text, DBK_HOST_MESSAGE_BYTES, "malformed ELF file: %s",
                 e->problem ? e->problem : "?");
        return text;
    }
}

/* Every check the loader made when it registered the file, made again here: NULL when the file
   may be served, else why not (in `text`, or a literal). */
static const char *load(const options *o, char *text)
{
    struct stat status;
    dbk_identity own;
    dbk_elf *elf;
    dbk_verdict verdict;
    uint64_t detail = 0;
    void *handle;
    GetBackendIdFunction get_id;
    GetVersionFunction get_version;
    const char *id, *problem;
    uint32_t major = 0xFFFFFFFFu, minor = 0xFFFFFFFFu;
    BackendInstance *instance;
    char message[DBK_HOST_MESSAGE_BYTES];

    if (stat(o->path, &status) != 0 || !same_file(o, &status))
        return "the file changed since it was registered (device, inode, size or modification "
               "time)";
    if (own_identity(&own) != 0)
        return "cannot read the host's own ELF header";
    elf = malloc(sizeof *elf);
    if (elf == NULL)
        return "no memory for the ELF checks";
    dbk_elf_init(elf);
    verdict = dbk_check_file(elf, o->path, &own, sysconf(_SC_PAGESIZE), &detail);
    problem = verdict == DBK_ELF_OK ? NULL : elf_problem(verdict, elf, text);
    dbk_elf_free(elf);
    free(elf);
    if (problem != NULL)
        return problem;

    dbk_note("dlopen: the library's constructors");
    handle = dlopen(o->path, RTLD_NOW | RTLD_LOCAL);
    if (handle == NULL) {
        const char *error = dlerror();
        snprintf(text, DBK_HOST_MESSAGE_BYTES, "dlopen failed: %s", error ? error : "?");
        return text;
    }
    get_id = (GetBackendIdFunction)dlsym(handle, "GetBackendId");
    get_version = (GetVersionFunction)dlsym(handle, "GetVersion");
    dbk_loaded.factory = (BackendFactoryFunction)dlsym(handle, "BackendFactory");
    if (get_id == NULL || get_version == NULL || dbk_loaded.factory == NULL)
        return "the library no longer exports GetBackendId, GetVersion and BackendFactory";
    dbk_note("GetBackendId");
    id = get_id();
    if (id == NULL || strnlen(id, BACKEND_ID_MAX_LENGTH + 1) > BACKEND_ID_MAX_LENGTH ||
        strcmp(id, o->backend_id) != 0) {
        snprintf(text, DBK_HOST_MESSAGE_BYTES,
                 "the library no longer reports the id it was registered with (%s)",
                 o->backend_id);
        return text;
    }
    dbk_note("GetVersion");
    get_version(&major, &minor);
    if (major != o->major || minor != o->minor) {
        snprintf(text, DBK_HOST_MESSAGE_BYTES, "the library reports Backend API %u.%u, it was "
                 "registered as %u.%u", (unsigned)major, (unsigned)minor, (unsigned)o->major,
                 (unsigned)o->minor);
        return text;
    }
    dbk_loaded.path = o->path;
    dbk_loaded.backend_id = o->backend_id;
    dbk_loaded.major = major;
    dbk_loaded.minor = minor;
    dbk_note("the BackendFactory probe");
    instance = dbk_loaded.factory();
    problem = dbk_instance_problem(instance, text);
    if (problem == NULL && dbk_has_is_available(instance)) {
        dbk_note("is_available");
        message[0] = message[sizeof message - 1] = 0;
        if (instance->is_available(instance, message, sizeof message) != BACKEND_STATUS_OK) {
            message[sizeof message - 1] = 0;
            snprintf(text, DBK_HOST_MESSAGE_BYTES, "backend-unavailable: %s",
                     message[0] ? message : "is_available answered without a message");
            problem = text;
        }
    }
    dbk_note("destroy (instance)");
    dbk_destroy_instance(instance);
    if (problem != NULL)
        return problem;
    /* The library that was loaded is the file that was checked, unless it was replaced in the
       meantime: then it is refused too. */
    if (stat(o->path, &status) != 0 || !same_file(o, &status))
        return "the file changed while it was being loaded";
    return NULL;
}

/* ---- the loop ---------------------------------------------------------------------------- */

static void serve(dbk_channel *channel)
{
    dbk_frame frame;
    const unsigned char *payload = NULL;
    dbk_reply reply;
    dbk_reader r;
    int fd, got;
    memset(&reply, 0, sizeof reply);
    for (;;) {
        dbk_note("");
        got = dbk_channel_next(channel, &frame, &payload);
        if (got == 0)
            _exit(0);            /* the runtime closed the channel or is gone */
        if (got < 0)
            _exit(EXIT_CHANNEL);
        r.at = payload;
        r.left = frame.size - sizeof frame;
        r.problem = NULL;
        if (frame.op == DBK_OP_DESTROY) {
            uint32_t count = dbk_take_count(&r, 8);
            for (uint32_t i = 0; i < count && r.problem == NULL; i++)
                dbk_object_disown(dbk_take_u64(&r));
            continue;
        }
        fd = frame.op == DBK_OP_ADD_SEGMENT ? dbk_channel_take_fd(channel) : -1;
        reply.payload.size = 0;
        reply.payload.failed = 0;
        reply.handle = 0;
        reply.value = 0;
        reply.outcome = DBK_OUTCOME_OK;
        if (frame.op == DBK_OP_SHUTDOWN) {
            dbk_objects_destroy_all();
            dbk_channel_reply(channel, frame.op, &reply);
            _exit(0);
        }
        if (frame.op < DBK_OP_COUNT && dbk_handlers[frame.op] != NULL)
            dbk_handlers[frame.op](&frame, &r, &reply, fd);
        else
            dbk_refuse(&r, "no such request");
        if (r.problem != NULL && reply.outcome == DBK_OUTCOME_OK)
            dbk_reply_problem(&reply, DBK_OUTCOME_REFUSED, r.problem);
        /* ADD_SEGMENT mapped its descriptor; none is kept open. */
        if (fd >= 0)
            close(fd);
        dbk_note("");
        if (dbk_channel_reply(channel, frame.op, &reply) != 0)
            _exit(0);
    }
}

int main(int argc, char **argv)
{
    options o;
    dbk_channel channel = {DBK_HOST_CHANNEL_FD, NULL, 0, 0, 0, {0}, 0, 0};
    dbk_reply ready;
    char text[DBK_HOST_MESSAGE_BYTES];
    const char *refusal;
    void *page;

    if (parse(argc, argv, &o) != 0) {
        fprintf(stderr, "usage: %s PARENT_PID FILE BACKEND_ID MAJOR MINOR DEV INO SIZE MTIME_NS "
                "[--address-space BYTES] [--cpu-time SECONDS]\n", argv[0]);
        return EXIT_USAGE;
    }
    contain(&o);
    page = mmap(NULL, DBK_HOST_STATUS_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED,
                DBK_HOST_STATUS_FD, 0);
    close(DBK_HOST_STATUS_FD);
    dbk_note_init(page == MAP_FAILED ? NULL : page);
    refusal = load(&o, text);
    dbk_note("");
    memset(&ready, 0, sizeof ready);
    if (refusal != NULL)
        dbk_reply_problem(&ready, DBK_OUTCOME_REFUSED, refusal);
    if (dbk_channel_reply(&channel, DBK_OP_READY, &ready) != 0 || refusal != NULL)
        return 0;
    free(ready.payload.data);
    serve(&channel);
    return 0;
}
