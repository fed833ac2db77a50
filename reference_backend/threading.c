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
 * worker's last block.
 */
#include "kernels_internal.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static int g_threads = 1;

static void init_once(void)
{
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
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
 * workers). Output: >= 1 (online CPUs capped at 8, or REFERENCE_BACKEND_THREADS, itself
 * capped at 64). Read once; later changes of the environment are not seen.
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
} g_pool = {
    .job = PTHREAD_MUTEX_INITIALIZER,
    .mu = PTHREAD_MUTEX_INITIALIZER,
    .work = PTHREAD_COND_INITIALIZER,
    .idle = PTHREAD_COND_INITIALIZER,
};

/* ---- short spins before sleeping ----------------------------------------------------------- */

int64_t rk_now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* Polls `*word != seen` for up to RK_SPIN_NS; 1 if it changed. */
static int spin_while_equal(atomic_uint *word, unsigned seen)
{
    const int64_t start = rk_now_ns();
    for (;;) {
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

/*
 * A worker that runs out of blocks keeps polling for the next job for RK_SPIN_NS before it
 * sleeps on the condition variable: waking a sleeping thread costs from tens of microseconds
 * (an idle virtual CPU) to milliseconds (a core busy with another process, where the woken
 * thread waits for its turn), while a kernel called again soon (the next layer, the next
 * inference) finds a spinning worker already running on its core.
 */
static void *worker_main(void *unused)
{
    (void)unused;
    pthread_mutex_lock(&g_pool.mu);
    for (;;) {
        if (!g_pool.stop && g_pool.next >= g_pool.nblocks) {
            const unsigned seen = atomic_load(&g_pool.posted);
            pthread_mutex_unlock(&g_pool.mu);
            spin_while_equal(&g_pool.posted, seen);
            pthread_mutex_lock(&g_pool.mu);
        }
        while (!g_pool.stop && g_pool.next >= g_pool.nblocks)
            pthread_cond_wait(&g_pool.work, &g_pool.mu);
        if (g_pool.stop)
            break;
        run_claimed_blocks();
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
        if (pthread_create(&g_pool.tid[g_pool.nworkers], NULL, worker_main, NULL) != 0)
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

static pthread_once_t g_fork_once = PTHREAD_ONCE_INIT;
static void register_fork_handlers(void)
{
    pthread_atfork(pool_before_fork, pool_after_fork_parent, pool_after_fork_child);
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
