/* The FP32 arithmetic floor of this machine: the widest fused multiply-add the CPU has, in a
 * register-blocked loop with enough independent accumulators to hide the FMA latency, on T
 * threads at once. Prints one line: "<threads> <GFLOP/s>" (2 flops per lane per FMA).
 *
 *   cc -O2 -march=native -pthread fma_peak.c -o fma_peak && ./fma_peak 2
 *
 * No real kernel reaches this: it is the distance to the limit, not a target. */
#define _GNU_SOURCE
#include <immintrin.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define ITERATIONS 20000000L

#if defined(__AVX512F__)
typedef __m512 vec;
#define LANES 16
#define SET1 _mm512_set1_ps
#define FMA _mm512_fmadd_ps
#define ADD _mm512_add_ps
#define SUM(v) _mm512_reduce_add_ps(v)
#elif defined(__FMA__)
typedef __m256 vec;
#define LANES 8
#define SET1 _mm256_set1_ps
#define FMA _mm256_fmadd_ps
#define ADD _mm256_add_ps
static float SUM(__m256 v)
{
    float lanes[8];
    _mm256_storeu_ps(lanes, v);
    float s = 0;
    for (int i = 0; i < 8; i++)
        s += lanes[i];
    return s;
}
#else
#error "needs FMA (build with -march=native on a CPU that has it)"
#endif

static volatile float g_sink;
static pthread_barrier_t g_start;

static void *spin(void *arg)
{
    (void)arg;
    vec a = SET1(0.999999f), b = SET1(1e-7f);
    vec c0 = SET1(0), c1 = SET1(1), c2 = SET1(2), c3 = SET1(3), c4 = SET1(4), c5 = SET1(5);
    vec c6 = SET1(6), c7 = SET1(7), c8 = SET1(8), c9 = SET1(9), c10 = SET1(10), c11 = SET1(11);
    pthread_barrier_wait(&g_start);
    for (long i = 0; i < ITERATIONS; i++) {
        c0 = FMA(c0, a, b); c1 = FMA(c1, a, b); c2 = FMA(c2, a, b); c3 = FMA(c3, a, b);
        c4 = FMA(c4, a, b); c5 = FMA(c5, a, b); c6 = FMA(c6, a, b); c7 = FMA(c7, a, b);
        c8 = FMA(c8, a, b); c9 = FMA(c9, a, b); c10 = FMA(c10, a, b); c11 = FMA(c11, a, b);
    }
    vec s = ADD(ADD(ADD(c0, c1), ADD(c2, c3)), ADD(ADD(c4, c5), ADD(c6, c7)));
    g_sink = SUM(ADD(s, ADD(ADD(c8, c9), ADD(c10, c11))));
    return NULL;
}

int main(int argc, char **argv)
{
    int threads = argc > 1 ? atoi(argv[1]) : 1;
    if (threads < 1 || threads > 1024)
        return 2;
    pthread_t *ids = calloc((size_t)threads, sizeof *ids);
    if (!ids)
        return 1;
    pthread_barrier_init(&g_start, NULL, (unsigned)threads + 1);
    for (int t = 0; t < threads; t++)
        if (pthread_create(&ids[t], NULL, spin, NULL) != 0)
            return 1;
    struct timespec t0, t1;
    pthread_barrier_wait(&g_start);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int t = 0; t < threads; t++)
        pthread_join(ids[t], NULL);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double seconds = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    double flops = 2.0 * LANES * 12.0 * (double)ITERATIONS * threads;
    printf("%d %.1f\n", threads, flops / seconds / 1e9);
    free(ids);
    return 0;
}
