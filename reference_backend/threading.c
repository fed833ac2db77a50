/*
 * Threads for the heavy kernels: one persistent pool per loaded library.
 *
 * The pool is created on first use (up to rk_thread_count() - 1 workers, started lazily as jobs
 * need them), runs one job at a time, and is stopped and joined by the library destructor, i.e.
 * before dlclose unmaps the code the workers run. Workers only ever return from their start
 * routine (never pthread_exit, which would unwind and may dlopen libgcc_s) and call nothing that
 * takes the dynamic linker's lock, so joining them under that lock in the destructor is safe.
 * A kernel that finds the pool busy (another thread's job) runs its blocks itself; results never
 * depend on how many blocks ran on which thread. A worker that runs out of blocks polls for the
 * next job for RK_SPIN_NS (0.5 ms) before it sleeps, and so does a job owner waiting for a
 * worker's last block. The job's threads are kept on distinct CPUs where the process may use
 * enough of them (see "placement").
 *
 * Every piece of this file's static state is set by rk_pool_init() when the library is loaded;
 * none is trusted to start zeroed (see there).
 */
#include "kernels_internal.h"

#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>

/* set by rk_pool_init() */
static pthread_once_t g_once;
static int g_threads;

static void init_once(void)
{
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    /* A process confined to some CPUs (taskset, a container's cpuset) gets no more threads
       than it may run at once: extra threads would only take turns on the same CPUs. */
    cpu_set_t allowed;
    if (sched_getaffinity(0, sizeof allowed, &allowed) == 0 && CPU_COUNT(&allowed) < ncpu)
        ncpu = CPU_COUNT(&allowed);
    int t = ncpu < 1 ? 1 : (ncpu > 8 ? 8 : (int)ncpu);
    const char *env = getenv("REFERENCE_BACKEND_THREADS");
    if (env && *env) {
        char *end = NULL;
        long v = strtol(env, &end, 10);
        /* Malformed or non-positive values are ignored rather than fatal. */
        if (end && *end == '\0' && v > 0)
            t = v > RK_MAX_THREADS ? RK_MAX_THREADS : (int)v;
    }
    g_threads = t;
}

/*
 * rk_thread_count: number of threads the heavy kernels may use (the caller and the pool's
 * workers). Output: >= 1 (the CPUs the process may run on, capped at 8, or
 * REFERENCE_BACKEND_THREADS, itself capped at 64). Read once; later changes of the environment
 * or of the affinity are not seen.
 */
int rk_thread_count(void)
{
    pthread_once(&g_once, init_once);
    return g_threads;
}

/* ---- the pool --------------------------------------------------------------------------- */

static struct {
    pthread_mutex_t job;      /* held by the thread whose job the pool runs */
    pthread_mutex_t mu;       /* guards everything below */
    pthread_cond_t work;      /* workers wait here for blocks or stop */
    pthread_cond_t idle;      /* the job owner waits here for running blocks */
    pthread_t tid[RK_MAX_THREADS];
    int nworkers;             /* started, not yet joined */
    int stop;
    /* current job: blocks next..nblocks-1 are unclaimed, `running` are being run (written
       under mu; read without it by a spinning job owner) */
    void *(*fn)(void *);
    char *base;
    size_t stride;
    int next, nblocks;
    atomic_int running;
    /* bumped (under mu) whenever a job is posted or stop is set: idle workers spin on it */
    atomic_uint posted;
    /* CPUs the current job's participants run on: the owner's first, then each worker's as it
       joins */
    int cpus[RK_MAX_THREADS];
    int ncpus;
    /* per worker: between jobs (spinning or asleep); the CPU it spins on, -1 asleep (written by
       the worker without mu); affinity narrowed by a job owner, and the mask to restore */
    int between_jobs[RK_MAX_THREADS];
    atomic_int where[RK_MAX_THREADS];
    int narrowed[RK_MAX_THREADS];
    cpu_set_t affinity[RK_MAX_THREADS];
} g_pool; /* set by rk_pool_init() */

/* ---- short spins before sleeping ----------------------------------------------------------- */

int64_t rk_now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* Polls `*word != seen` for up to RK_SPIN_NS, publishing the CPU it spins on in `*where`; 1 if
   the word changed. */
static int spin_while_equal(atomic_uint *word, unsigned seen, atomic_int *where)
{
    const int64_t start = rk_now_ns();
    for (;;) {
        atomic_store_explicit(where, sched_getcpu(), memory_order_relaxed);
        for (int i = 0; i < 64; i++) {
            if (atomic_load_explicit(word, memory_order_acquire) != seen)
                return 1;
            rk_cpu_relax();
        }
        if (rk_now_ns() - start > RK_SPIN_NS)
            return 0;
    }
}

/* Claims and runs blocks of the current job until none is left; called with mu held, returns
   with mu held. */
static void run_claimed_blocks(void)
{
    while (g_pool.next < g_pool.nblocks) {
        int i = g_pool.next++;
        void *(*fn)(void *) = g_pool.fn;
        char *arg = g_pool.base + (size_t)i * g_pool.stride;
        atomic_fetch_add(&g_pool.running, 1);
        pthread_mutex_unlock(&g_pool.mu);
        fn(arg);
        pthread_mutex_lock(&g_pool.mu);
        if (atomic_fetch_sub(&g_pool.running, 1) == 1 && g_pool.next >= g_pool.nblocks)
            pthread_cond_signal(&g_pool.idle);
    }
}

/* ---- placement ------------------------------------------------------------------------------ */

/*
 * The scheduler does not always spread a job's threads. On a virtual machine a worker woken while
 * its caller ran was seen to be placed on the caller's CPU and left there for whole jobs while
 * the other CPU idled, the two threads taking turns: FullyConnected at the single-thread time.
 * (An idle virtual CPU that the host has descheduled does not count as available to the guest's
 * wake-up placement.) So the pool places the threads of a job itself, without changing which
 * blocks run where:
 *  - the job owner steers each idle worker that sleeps, or spins on the owner's CPU, away from
 *    that CPU by narrowing its affinity to the other CPUs it may use (the kernel moves a queued
 *    thread at once, and wakes a sleeping one elsewhere);
 *  - a worker joining the job that still shares a CPU with another participant (two workers
 *    met, or it had moved since it last said where it was) moves itself to a free one the same
 *    way.
 * A narrowed or moved worker keeps its narrowed affinity until it leaves the job, since a
 * thread that sleeps during the job (on a lock, or waiting for other blocks) is placed again
 * when it wakes; then it restores the mask it had. No narrowing outlives the job it was made
 * for. Nothing moves when no allowed CPU is free, a CPU is unknown or the affinity calls fail.
 */

/* Narrows the affinity of the idle workers that sleep or spin on `cpu` to exclude it (mu held).
   A worker still narrowed is narrowed again from its own mask. */
static void steer_idle_workers(int cpu)
{
    if (cpu < 0 || cpu >= CPU_SETSIZE)
        return;
    for (int i = 0; i < g_pool.nworkers; i++) {
        const int at = atomic_load_explicit(&g_pool.where[i], memory_order_relaxed);
        if (!g_pool.between_jobs[i] || (at != -1 && at != cpu))
            continue;
        cpu_set_t *mine = &g_pool.affinity[i];
        if (!g_pool.narrowed[i] &&
            (pthread_getaffinity_np(g_pool.tid[i], sizeof *mine, mine) != 0 ||
             !CPU_ISSET(cpu, mine)))
            continue;
        cpu_set_t others = *mine;
        CPU_CLR(cpu, &others);
        if (CPU_COUNT(&others) > 0 &&
            pthread_setaffinity_np(g_pool.tid[i], sizeof others, &others) == 0)
            g_pool.narrowed[i] = 1;
    }
}

/* Gives worker `id` back the affinity it had before an owner narrowed it (mu held, released
   around the call; the worker counts as busy meanwhile, so no owner narrows it again). */
static void restore_affinity(int id)
{
    if (!g_pool.narrowed[id])
        return;
    const int between = g_pool.between_jobs[id];
    cpu_set_t mine = g_pool.affinity[id];
    g_pool.narrowed[id] = g_pool.between_jobs[id] = 0;
    pthread_mutex_unlock(&g_pool.mu);
    pthread_setaffinity_np(pthread_self(), sizeof mine, &mine);
    pthread_mutex_lock(&g_pool.mu);
    g_pool.between_jobs[id] = between;
}

/* Worker `id` joins the current job (mu held, released around system calls): off any CPU
   another participant uses, its CPU recorded among theirs. A move counts as a narrowing: it
   lasts until the worker leaves the job. The free CPUs are taken from the worker's own mask,
   not from a narrowing made for this job or an earlier one. */
static void join_job(int id)
{
    int cpu = sched_getcpu(), shared = 0;
    for (int i = 0; i < g_pool.ncpus; i++)
        shared |= cpu >= 0 && g_pool.cpus[i] == cpu;
    if (shared) {
        int taken[RK_MAX_THREADS], ntaken = g_pool.ncpus;
        memcpy(taken, g_pool.cpus, sizeof(int) * (size_t)ntaken);
        const int narrowed = g_pool.narrowed[id];
        cpu_set_t mine = g_pool.affinity[id];
        pthread_mutex_unlock(&g_pool.mu); /* not between jobs: no owner narrows it meanwhile */
        int moved = 0;
        if (narrowed || pthread_getaffinity_np(pthread_self(), sizeof mine, &mine) == 0) {
            cpu_set_t free_cpus = mine;
            for (int i = 0; i < ntaken; i++)
                if (taken[i] >= 0 && taken[i] < CPU_SETSIZE)
                    CPU_CLR(taken[i], &free_cpus);
            /* the kernel moves a thread whose CPU leaves its affinity before the call returns */
            if (CPU_COUNT(&free_cpus) > 0 &&
                pthread_setaffinity_np(pthread_self(), sizeof free_cpus, &free_cpus) == 0) {
                cpu = sched_getcpu();
                moved = 1;
            }
        }
        pthread_mutex_lock(&g_pool.mu);
        if (moved && !narrowed) {
            g_pool.affinity[id] = mine;
            g_pool.narrowed[id] = 1;
        }
    }
    if (g_pool.ncpus < RK_MAX_THREADS)
        g_pool.cpus[g_pool.ncpus++] = cpu;
}

/*
 * A worker that runs out of blocks keeps polling for the next job for RK_SPIN_NS before it
 * sleeps on the condition variable: waking a sleeping thread costs from tens of microseconds
 * (an idle virtual CPU) to milliseconds (a core busy with another process, where the woken
 * thread waits for its turn), while a kernel called again soon (the next layer, the next
 * inference) finds a spinning worker already running on its core.
 */
static void *worker_main(void *arg)
{
    const int id = (int)(intptr_t)arg;
    pthread_mutex_lock(&g_pool.mu);
    for (;;) {
        g_pool.between_jobs[id] = 1;
        if (!g_pool.stop && g_pool.next >= g_pool.nblocks) {
            const unsigned seen = atomic_load(&g_pool.posted);
            pthread_mutex_unlock(&g_pool.mu);
            spin_while_equal(&g_pool.posted, seen, &g_pool.where[id]);
            pthread_mutex_lock(&g_pool.mu);
        }
        while (!g_pool.stop && g_pool.next >= g_pool.nblocks) {
            if (g_pool.narrowed[id]) {
                /* narrowed for a job whose blocks were all taken; mu was released: look again */
                restore_affinity(id);
                continue;
            }
            atomic_store(&g_pool.where[id], -1);
            pthread_cond_wait(&g_pool.work, &g_pool.mu);
        }
        g_pool.between_jobs[id] = 0;
        if (g_pool.stop)
            break;
        join_job(id);
        run_claimed_blocks();
        restore_affinity(id);
    }
    pthread_mutex_unlock(&g_pool.mu);
    return NULL; /* plain return: no unwinding, nothing that needs the loader's lock */
}

/* Starts workers until there are `want` (mu held). Workers block every signal: signals go to
   the application's own threads. A worker that cannot be started is simply not there; the
   job owner runs the blocks nobody claimed. */
static void ensure_workers(int want)
{
    if (want > RK_MAX_THREADS - 1)
        want = RK_MAX_THREADS - 1;
    if (g_pool.nworkers >= want || g_pool.stop)
        return;
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    while (g_pool.nworkers < want) {
        const int id = g_pool.nworkers;
        g_pool.between_jobs[id] = g_pool.narrowed[id] = 0;
        atomic_store(&g_pool.where[id], -1);
        if (pthread_create(&g_pool.tid[id], NULL, worker_main, (void *)(intptr_t)id) != 0)
            break;
        g_pool.nworkers++;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
}

/* After fork the child has the pool's memory but none of its threads: forget them. */
static void pool_after_fork_child(void)
{
    pthread_mutex_init(&g_pool.job, NULL);
    pthread_mutex_init(&g_pool.mu, NULL);
    pthread_cond_init(&g_pool.work, NULL);
    pthread_cond_init(&g_pool.idle, NULL);
    g_pool.nworkers = 0;
    g_pool.next = g_pool.nblocks = 0;
    atomic_store(&g_pool.running, 0);
}

static void pool_before_fork(void) { pthread_mutex_lock(&g_pool.mu); }
static void pool_after_fork_parent(void) { pthread_mutex_unlock(&g_pool.mu); }

static pthread_once_t g_fork_once; /* set by rk_pool_init() */
static void register_fork_handlers(void)
{
    pthread_atfork(pool_before_fork, pool_after_fork_parent, pool_after_fork_child);
}

/*
 * Sets every piece of the static state above, the once-controls included, when the library is
 * loaded (before dlopen returns, so before any kernel runs). Static initializers of zero would
 * leave it to the .bss starting zeroed, which a file can break while staying loadable (its
 * writable segment mapping file bytes over the .bss): the once-controls would read "done", the
 * locks held, the workers started, and the pool would hang or call into garbage.
 */
__attribute__((constructor)) static void rk_pool_init(void)
{
    const pthread_once_t once_init = PTHREAD_ONCE_INIT;
    g_once = once_init;
    g_fork_once = once_init;
    g_threads = 1;
    memset(&g_pool, 0, sizeof g_pool);
    pthread_mutex_init(&g_pool.job, NULL);
    pthread_mutex_init(&g_pool.mu, NULL);
    pthread_cond_init(&g_pool.work, NULL);
    pthread_cond_init(&g_pool.idle, NULL);
    atomic_init(&g_pool.running, 0);
    atomic_init(&g_pool.posted, 0);
    for (int i = 0; i < RK_MAX_THREADS; i++)
        atomic_init(&g_pool.where[i], 0);
}

/*
 * Stops and joins every worker. Runs when the library is unloaded (dlclose or process exit),
 * before its code is unmapped; workers finish the block they run, then return. (The fork
 * handlers go with the library: glibc unregisters a library's atfork handlers when it is
 * unloaded.)
 */
__attribute__((destructor)) static void rk_pool_shutdown(void)
{
    pthread_mutex_lock(&g_pool.mu);
    g_pool.stop = 1;
    atomic_fetch_add(&g_pool.posted, 1);
    int n = g_pool.nworkers;
    pthread_cond_broadcast(&g_pool.work);
    pthread_mutex_unlock(&g_pool.mu);
    for (int i = 0; i < n; i++)
        pthread_join(g_pool.tid[i], NULL);
    pthread_mutex_lock(&g_pool.mu);
    g_pool.nworkers = 0;
    pthread_mutex_unlock(&g_pool.mu);
}

/*
 * Runs fn on n argument blocks (args + i*stride): block 0 on the caller, the others on the
 * pool's workers; the caller also claims blocks no worker has picked up yet, so a worker the
 * scheduler starts late costs nothing. If the pool is running another caller's job, the caller
 * runs all blocks itself.
 */
void rk_run_tasks(void *(*fn)(void *), void *args, size_t stride, int n)
{
    char *base = (char *)args;
    if (n > RK_MAX_THREADS)
        n = RK_MAX_THREADS;
    if (n <= 1 || pthread_mutex_trylock(&g_pool.job) != 0) {
        for (int i = 0; i < n; i++)
            fn(base + (size_t)i * stride);
        return;
    }
    pthread_once(&g_fork_once, register_fork_handlers);
    pthread_mutex_lock(&g_pool.mu);
    ensure_workers(n - 1);
    g_pool.fn = fn;
    g_pool.base = base;
    g_pool.stride = stride;
    g_pool.nblocks = n;
    g_pool.next = 1; /* block 0 is the caller's */
    g_pool.cpus[0] = sched_getcpu();
    g_pool.ncpus = 1;
    steer_idle_workers(g_pool.cpus[0]);
    atomic_store(&g_pool.running, 0);
    atomic_fetch_add(&g_pool.posted, 1);
    if (n - 1 < g_pool.nworkers)
        for (int i = 1; i < n; i++)
            pthread_cond_signal(&g_pool.work);
    else
        pthread_cond_broadcast(&g_pool.work);
    pthread_mutex_unlock(&g_pool.mu);
    fn(base);

    pthread_mutex_lock(&g_pool.mu);
    run_claimed_blocks();
    if (atomic_load(&g_pool.running) > 0) {
        /* a worker is finishing its block: usually soon, so poll before sleeping */
        pthread_mutex_unlock(&g_pool.mu);
        const int64_t start = rk_now_ns();
        while (atomic_load_explicit(&g_pool.running, memory_order_acquire) > 0 &&
               rk_now_ns() - start < RK_SPIN_NS)
            for (int i = 0; i < 64; i++)
                rk_cpu_relax();
        pthread_mutex_lock(&g_pool.mu);
    }
    while (atomic_load(&g_pool.running) > 0)
        pthread_cond_wait(&g_pool.idle, &g_pool.mu);
    g_pool.nblocks = g_pool.next = 0;
    pthread_mutex_unlock(&g_pool.mu);
    pthread_mutex_unlock(&g_pool.job);
}

/* Threads worth using for `work` units when each thread should get at least
   `min_per_thread` units. */
int rk_threads_for(double work, double min_per_thread)
{
    int t = rk_thread_count();
    double cap = work / min_per_thread;
    if (cap < (double)t)
        t = cap < 1.0 ? 1 : (int)cap;
    return t;
}

/* rk_parallel_for's shared state: its participants claim chunks of the range in order until none
   is left, so a thread that starts late or runs slowly (a CPU shared with another process) takes
   fewer chunks instead of holding up the others with a fixed share. */
typedef struct range_shared {
    void (*fn)(void *ctx, int64_t begin, int64_t end);
    void *ctx;
    int64_t n, chunk;
    atomic_llong next;
} range_shared;

typedef struct range_task {
    range_shared *shared;
} range_task;

static void *range_task_run(void *arg)
{
    range_shared *s = ((const range_task *)arg)->shared;
    int64_t begin;
    while ((begin = atomic_fetch_add(&s->next, s->chunk)) < s->n)
        s->fn(s->ctx, begin, begin + s->chunk < s->n ? begin + s->chunk : s->n);
    return NULL;
}

/* Chunks per thread: enough that the threads finish close together when one is slowed down,
   few enough that each claim (one atomic add) stays negligible next to the chunk's work. */
#define RK_CHUNKS_PER_THREAD 4

void rk_parallel_for(int64_t n, int64_t grain, double work_per_item, double min_work_per_thread,
                     void (*fn)(void *ctx, int64_t begin, int64_t end), void *ctx)
{
    int64_t units = (n + grain - 1) / grain;
    int nt = rk_threads_for((double)n * work_per_item, min_work_per_thread);
    range_task tasks[RK_MAX_THREADS];
    if (nt > units)
        nt = (int)units;
    if (nt <= 1) {
        if (n > 0)
            fn(ctx, 0, n);
        return;
    }
    range_shared shared = { fn, ctx, n, 0, 0 };
    shared.chunk = (units + (int64_t)nt * RK_CHUNKS_PER_THREAD - 1) / ((int64_t)nt * RK_CHUNKS_PER_THREAD) * grain;
    atomic_init(&shared.next, 0);
    for (int i = 0; i < nt; i++)
        tasks[i].shared = &shared;
    rk_run_tasks(range_task_run, tasks, sizeof(range_task), nt);
}
