/*
 * Threads for the heavy kernels: one persistent pool per loaded library.
 *
 * The pool is created on first use (up to rk_thread_count() - 1 workers, started lazily as jobs
 * need them), runs one job at a time, and is stopped and joined by the library destructor, i.e.
 * before dlclose unmaps the code the workers run. Workers only ever return from their start
 * routine (never pthread_exit, which would unwind and may dlopen libgcc_s) and call nothing that
 * takes the dynamic linker's lock, so joining them under that lock in the destructor is safe.
 * A kernel that finds the pool busy (another thread's job) runs its blocks itself; results never
 * depend on how many blocks ran on which thread. Blocks are claimed without a lock (one atomic
 * word); a worker that runs out of blocks polls for the next job for RK_SPIN_NS (0.5 ms), or
 * RK_HOLD_SPIN_NS while a network's execute holds the pool, before it sleeps, and a job owner
 * polls RK_SPIN_NS for a worker's last block. A worker joining a job moves itself off a CPU
 * another participant runs on (see "placement").
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

/*
 * One job at a time: n argument blocks, claimed one by one through a single atomic word that
 * holds the job's generation and its next unclaimed block, so claiming takes no lock and a
 * claim made for an earlier job fails instead of taking a block of the current one. The job's
 * fields are written before the word announces the job and stay unchanged until every block
 * has finished, which its owner waits for before it returns; a worker that read them for an
 * older job finds its claim refused. Locks and condition variables are only for sleeping: a
 * worker that finds no job for its spin time, and a job owner whose last block is still being
 * run by a worker that the scheduler has taken off its CPU.
 */
#define CLAIM_GEN(w) ((uint32_t)((uint64_t)(w) >> 32))
#define CLAIM_NEXT(w) ((int)((uint64_t)(w) & 0xffffffffu))
#define CLAIM_WORD(gen, next) (((uint64_t)(gen) << 32) | (uint32_t)(next))
#define CLAIM_CLOSED 0x7fffffff

static struct {
    pthread_mutex_t job;      /* held by the thread whose job the pool runs */
    pthread_mutex_t mu;       /* sleeping and waking, starting and stopping workers */
    pthread_cond_t work;      /* sleeping workers wait here for a job or stop */
    pthread_cond_t idle;      /* a sleeping job owner waits here for the last block */
    pthread_t tid[RK_MAX_THREADS];
    atomic_int nworkers;      /* started, not yet joined (changed under mu) */
    atomic_int stop;
    /* the current job (relaxed: published by the release store of `claim`) */
    atomic_uintptr_t fn, base;
    atomic_size_t stride;
    atomic_int nblocks;
    _Atomic uint64_t claim;   /* generation << 32 | next unclaimed block */
    atomic_int finished;      /* blocks of the current job run to completion */
    atomic_int owner_waits;   /* the owner sleeps on `idle`, or is about to */
    atomic_int sleepers;      /* workers asleep on `work`, or about to */
    atomic_uint wakeups;      /* bumped to wake sleeping workers without a job (a hold) */
    atomic_int hold;          /* executes that keep the workers spinning between their jobs */
    /* placement: the CPUs of the current job's participants, the owner's first */
    atomic_int cpus[RK_MAX_THREADS];
    atomic_int ncpus;
    /* per worker, touched by that worker only: moved off a CPU another participant ran on,
       and the affinity it had before */
    int narrowed[RK_MAX_THREADS];
    cpu_set_t affinity[RK_MAX_THREADS];
    uint32_t first_gen[RK_MAX_THREADS]; /* the generation when it was started */
} g_pool; /* set by rk_pool_init() */

/* ---- short spins before sleeping ----------------------------------------------------------- */

int64_t rk_now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/*
 * Polls for a job of a generation other than `seen` (or stop) for up to RK_SPIN_NS, or, while
 * an execute holds the pool (rk_pool_hold), for up to RK_HOLD_SPIN_NS since the spin began;
 * 1 when one came. The spin ends RK_SPIN_NS after the last hold was seen released, so the
 * workers stay on their cores across the short gap between two executes.
 */
static int spin_for_job(uint32_t seen)
{
    const int64_t start = rk_now_ns();
    int64_t held_until = start;
    for (;;) {
        for (int i = 0; i < 64; i++) {
            if (CLAIM_GEN(atomic_load_explicit(&g_pool.claim, memory_order_acquire)) != seen ||
                atomic_load_explicit(&g_pool.stop, memory_order_relaxed))
                return 1;
            rk_cpu_relax();
        }
        /* on a CPU shared with another runnable thread (another process, or this job's
           owner placed here), let it run: a spin that holds the CPU would slow the very
           step it waits for; with nothing else runnable the call returns at once */
        sched_yield();
        const int64_t now = rk_now_ns();
        if (atomic_load_explicit(&g_pool.hold, memory_order_relaxed) > 0) {
            if (now - start > RK_HOLD_SPIN_NS)
                return 0;
            held_until = now;
        } else if (now - held_until > RK_SPIN_NS) {
            return 0;
        }
    }
}

/* Claims and runs blocks of the job of generation `gen` until none is left; 0 when the job
   had none left (or is no longer current). */
static int run_blocks(uint32_t gen)
{
    int ran = 0;
    uint64_t w = atomic_load_explicit(&g_pool.claim, memory_order_acquire);
    for (;;) {
        if (CLAIM_GEN(w) != gen)
            return ran;
        const int i = CLAIM_NEXT(w), n = atomic_load_explicit(&g_pool.nblocks, memory_order_relaxed);
        if (i >= n)
            return ran;
        void *(*fn)(void *) = (void *(*)(void *))atomic_load_explicit(&g_pool.fn, memory_order_relaxed);
        char *base = (char *)atomic_load_explicit(&g_pool.base, memory_order_relaxed);
        const size_t stride = atomic_load_explicit(&g_pool.stride, memory_order_relaxed);
        /* on success the generation was still `gen`: the fields read above are its fields
           (an owner closes the word before it writes the next job's, and this fence pairs
           with the one after that), and they stay so until this block is counted finished */
        atomic_thread_fence(memory_order_acquire);
        if (!atomic_compare_exchange_weak_explicit(&g_pool.claim, &w, w + 1, memory_order_acquire,
                                                   memory_order_acquire))
            continue;
        fn(base + (size_t)i * stride);
        ran = 1;
        if (atomic_fetch_add(&g_pool.finished, 1) + 1 == n && atomic_load(&g_pool.owner_waits)) {
            /* the owner announced its sleep before reading `finished`: it holds mu until it
               waits, so this signal cannot come before the wait */
            pthread_mutex_lock(&g_pool.mu);
            pthread_cond_signal(&g_pool.idle);
            pthread_mutex_unlock(&g_pool.mu);
        }
        w = atomic_load_explicit(&g_pool.claim, memory_order_acquire);
    }
}

/* ---- placement ------------------------------------------------------------------------------ */

/*
 * The scheduler does not always spread a job's threads. On a virtual machine a worker woken while
 * its caller ran was seen to be placed on the caller's CPU and left there for whole jobs while
 * the other CPU idled, the two threads taking turns: FullyConnected at the single-thread time.
 * (An idle virtual CPU that the host has descheduled does not count as available to the guest's
 * wake-up placement.) So a worker joining a job that finds itself on a CPU another participant
 * of the job runs on (the owner, or a worker that joined first) moves itself to a CPU none of
 * them uses, by narrowing its own affinity (the kernel moves it before the call returns). It
 * keeps the narrowed affinity while it stays hot and gives back the mask it had before it
 * sleeps, so no narrowing outlives the spell of work it was made for. Nothing moves when no
 * allowed CPU is free, a CPU is unknown or the affinity calls fail; which blocks run where
 * never depends on it.
 */
static void join_job(int id)
{
    int cpu = sched_getcpu();
    const int taken = atomic_load(&g_pool.ncpus);
    int shared = 0, list[RK_MAX_THREADS];
    for (int i = 0; i < taken && i < RK_MAX_THREADS; i++) {
        list[i] = atomic_load_explicit(&g_pool.cpus[i], memory_order_relaxed);
        shared |= cpu >= 0 && list[i] == cpu;
    }
    if (shared) {
        cpu_set_t mine = g_pool.affinity[id];
        if (g_pool.narrowed[id] || pthread_getaffinity_np(pthread_self(), sizeof mine, &mine) == 0) {
            cpu_set_t free_cpus = mine;
            for (int i = 0; i < taken && i < RK_MAX_THREADS; i++)
                if (list[i] >= 0 && list[i] < CPU_SETSIZE)
                    CPU_CLR(list[i], &free_cpus);
            if (CPU_COUNT(&free_cpus) > 0 &&
                pthread_setaffinity_np(pthread_self(), sizeof free_cpus, &free_cpus) == 0) {
                cpu = sched_getcpu();
                if (!g_pool.narrowed[id]) {
                    g_pool.affinity[id] = mine;
                    g_pool.narrowed[id] = 1;
                }
            }
        }
    }
    const int slot = atomic_fetch_add(&g_pool.ncpus, 1);
    if (slot < RK_MAX_THREADS)
        atomic_store_explicit(&g_pool.cpus[slot], cpu, memory_order_relaxed);
}

/* Gives worker `id` back the affinity it had before it moved itself. */
static void restore_affinity(int id)
{
    if (!g_pool.narrowed[id])
        return;
    g_pool.narrowed[id] = 0;
    pthread_setaffinity_np(pthread_self(), sizeof g_pool.affinity[id], &g_pool.affinity[id]);
}

/*
 * A worker that runs out of blocks keeps polling for the next job (spin_for_job) before it
 * sleeps on the condition variable: waking a sleeping thread costs from tens of microseconds
 * (an idle virtual CPU) to milliseconds (a core busy with another process, where the woken
 * thread waits for its turn), while a kernel called again soon (the next step of a network,
 * the next inference) finds a spinning worker already running on its core.
 */
static void *worker_main(void *arg)
{
    const int id = (int)(intptr_t)arg;
    uint32_t seen = g_pool.first_gen[id];
    for (;;) {
        if (!spin_for_job(seen)) {
            restore_affinity(id);
            pthread_mutex_lock(&g_pool.mu);
            const unsigned nudged = atomic_load(&g_pool.wakeups);
            atomic_fetch_add(&g_pool.sleepers, 1);
            while (!atomic_load(&g_pool.stop) && CLAIM_GEN(atomic_load(&g_pool.claim)) == seen &&
                   atomic_load(&g_pool.wakeups) == nudged)
                pthread_cond_wait(&g_pool.work, &g_pool.mu);
            atomic_fetch_sub(&g_pool.sleepers, 1);
            pthread_mutex_unlock(&g_pool.mu);
        }
        if (atomic_load(&g_pool.stop))
            break;
        const uint64_t w = atomic_load(&g_pool.claim);
        const uint32_t gen = CLAIM_GEN(w);
        if (gen == seen)
            continue; /* woken by a hold, not a job: spin again */
        if (CLAIM_NEXT(w) == CLAIM_CLOSED) {
            rk_cpu_relax(); /* its owner is writing the job: a few stores */
            continue;
        }
        seen = gen;
        if (CLAIM_NEXT(w) < atomic_load_explicit(&g_pool.nblocks, memory_order_relaxed)) {
            join_job(id);
            run_blocks(gen);
        }
    }
    restore_affinity(id);
    return NULL; /* plain return: no unwinding, nothing that needs the loader's lock */
}

/* Starts workers until there are `want` (mu held). Workers block every signal: signals go to
   the application's own threads. A worker that cannot be started is simply not there; the
   job owner runs the blocks nobody claimed. */
static void ensure_workers(int want)
{
    if (want > RK_MAX_THREADS - 1)
        want = RK_MAX_THREADS - 1;
    if (g_pool.nworkers >= want || atomic_load(&g_pool.stop))
        return;
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    while (g_pool.nworkers < want) {
        const int id = g_pool.nworkers;
        g_pool.narrowed[id] = 0;
        g_pool.first_gen[id] = CLAIM_GEN(atomic_load(&g_pool.claim));
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
    atomic_store(&g_pool.sleepers, 0);
    atomic_store(&g_pool.owner_waits, 0);
    atomic_store(&g_pool.hold, 0);
    atomic_store(&g_pool.claim, CLAIM_WORD(CLAIM_GEN(atomic_load(&g_pool.claim)) + 1, CLAIM_CLOSED));
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
    atomic_init(&g_pool.stop, 0);
    atomic_init(&g_pool.nworkers, 0);
    atomic_init(&g_pool.fn, 0);
    atomic_init(&g_pool.base, 0);
    atomic_init(&g_pool.stride, 0);
    atomic_init(&g_pool.nblocks, 0);
    atomic_init(&g_pool.claim, CLAIM_WORD(0, CLAIM_CLOSED));
    atomic_init(&g_pool.finished, 0);
    atomic_init(&g_pool.owner_waits, 0);
    atomic_init(&g_pool.sleepers, 0);
    atomic_init(&g_pool.wakeups, 0);
    atomic_init(&g_pool.hold, 0);
    atomic_init(&g_pool.ncpus, 0);
    for (int i = 0; i < RK_MAX_THREADS; i++)
        atomic_init(&g_pool.cpus[i], -1);
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
    atomic_store(&g_pool.stop, 1);
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
    if (g_pool.nworkers < n - 1) {
        pthread_mutex_lock(&g_pool.mu);
        ensure_workers(n - 1);
        pthread_mutex_unlock(&g_pool.mu);
    }
    /* every block of the previous job has finished; closing the word under a new generation
       before the fields change makes a late claim for that job fail (see run_blocks) */
    const uint32_t gen = CLAIM_GEN(atomic_load(&g_pool.claim)) + 1;
    atomic_store(&g_pool.claim, CLAIM_WORD(gen, CLAIM_CLOSED));
    atomic_thread_fence(memory_order_release);
    atomic_store_explicit(&g_pool.fn, (uintptr_t)fn, memory_order_relaxed);
    atomic_store_explicit(&g_pool.base, (uintptr_t)base, memory_order_relaxed);
    atomic_store_explicit(&g_pool.stride, stride, memory_order_relaxed);
    atomic_store_explicit(&g_pool.nblocks, n, memory_order_relaxed);
    atomic_store(&g_pool.finished, 0);
    atomic_store_explicit(&g_pool.cpus[0], sched_getcpu(), memory_order_relaxed);
    atomic_store(&g_pool.ncpus, 1);
    atomic_store(&g_pool.claim, CLAIM_WORD(gen, 1)); /* block 0 is the caller's */
    const int asleep = atomic_load(&g_pool.sleepers);
    if (asleep > 0) {
        /* a worker counted in `sleepers` holds mu until it waits: the signal reaches it */
        pthread_mutex_lock(&g_pool.mu);
        for (int i = 0; i < n - 1 && i < asleep; i++)
            pthread_cond_signal(&g_pool.work);
        pthread_mutex_unlock(&g_pool.mu);
    }
    fn(base);
    atomic_fetch_add(&g_pool.finished, 1);
    run_blocks(gen);
    if (atomic_load_explicit(&g_pool.finished, memory_order_acquire) < n) {
        /* a worker is finishing its block: usually soon, so poll before sleeping */
        const int64_t start = rk_now_ns();
        while (atomic_load_explicit(&g_pool.finished, memory_order_acquire) < n &&
               rk_now_ns() - start < RK_SPIN_NS) {
            for (int i = 0; i < 64; i++)
                rk_cpu_relax();
            sched_yield(); /* the worker may be waiting for this CPU */
        }
        if (atomic_load(&g_pool.finished) < n) {
            pthread_mutex_lock(&g_pool.mu);
            atomic_store(&g_pool.owner_waits, 1);
            while (atomic_load(&g_pool.finished) < n)
                pthread_cond_wait(&g_pool.idle, &g_pool.mu);
            atomic_store(&g_pool.owner_waits, 0);
            pthread_mutex_unlock(&g_pool.mu);
        }
    }
    pthread_mutex_unlock(&g_pool.job);
}

/*
 * Holds the pool for a network's execute: its workers (started now, up to threads - 1) keep
 * spinning between the steps' jobs for up to RK_HOLD_SPIN_NS instead of RK_SPIN_NS, and
 * sleeping ones are woken at once, so that the first threaded step finds them running. Pairs
 * with rk_pool_release(); holds from several threads add up.
 */
void rk_pool_hold(int threads)
{
    atomic_fetch_add(&g_pool.hold, 1);
    if (threads <= 1)
        return;
    pthread_once(&g_fork_once, register_fork_handlers);
    pthread_mutex_lock(&g_pool.mu);
    ensure_workers(threads - 1);
    if (atomic_load(&g_pool.sleepers) > 0) {
        atomic_fetch_add(&g_pool.wakeups, 1);
        pthread_cond_broadcast(&g_pool.work);
    }
    pthread_mutex_unlock(&g_pool.mu);
}

void rk_pool_release(void)
{
    atomic_fetch_sub(&g_pool.hold, 1);
}

int rk_pool_held(void)
{
    return atomic_load_explicit(&g_pool.hold, memory_order_relaxed) > 0;
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

void rk_parallel_for(int64_t n, int64_t grain, double work_per_item, double min_work_per_thread,
                     void (*fn)(void *ctx, int64_t begin, int64_t end), void *ctx)
{
    rk_parallel_for_threads(n, grain, rk_threads_for((double)n * work_per_item, min_work_per_thread),
                            fn, ctx);
}

void rk_parallel_for_threads(int64_t n, int64_t grain, int nt,
                             void (*fn)(void *ctx, int64_t begin, int64_t end), void *ctx)
{
    int64_t units = (n + grain - 1) / grain;
    range_task tasks[RK_MAX_THREADS];
    if (nt > RK_MAX_THREADS)
        nt = RK_MAX_THREADS;
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
