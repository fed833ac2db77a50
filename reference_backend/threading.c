/*
 * Threads for the heavy kernels: plain pthreads created per call (no pool, no global state
 * besides the once-read thread count).
 */
#include "kernels_internal.h"

#include <pthread.h>
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
 * rk_thread_count: number of worker threads the heavy kernels may use.
 * Output: >= 1 (online CPUs capped at 8, or REFERENCE_BACKEND_THREADS, itself
 * capped at 64). Read once; later changes of the environment are not seen.
 */
int rk_thread_count(void)
{
    pthread_once(&g_once, init_once);
    return g_threads;
}

/* Runs fn on n argument blocks (args + i*stride), n-1 of them on new threads
   and one on the caller. If a thread cannot be created its block runs on the
   caller afterwards, so the result never depends on thread availability. */
void rk_run_tasks(void *(*fn)(void *), void *args, size_t stride, int n)
{
    pthread_t tid[RK_MAX_THREADS];
    int started[RK_MAX_THREADS];
    char *base = (char *)args;
    if (n > RK_MAX_THREADS)
        n = RK_MAX_THREADS;
    for (int i = 1; i < n; i++)
        started[i] = pthread_create(&tid[i], NULL, fn, base + (size_t)i * stride) == 0;
    fn(base);
    for (int i = 1; i < n; i++) {
        if (started[i])
            pthread_join(tid[i], NULL);
        else
            fn(base + (size_t)i * stride);
    }
}

/* Threads worth using for `work` units when each thread should get at least
   `min_per_thread` units (thread start-up costs tens of microseconds). */
int rk_threads_for(double work, double min_per_thread)
{
    int t = rk_thread_count();
    double cap = work / min_per_thread;
    if (cap < (double)t)
        t = cap < 1.0 ? 1 : (int)cap;
    return t;
}
