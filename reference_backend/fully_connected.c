/*
 * Fully connected: a GEMM, or for a few rows a single stream over the weights.
 */
#include "kernels_internal.h"

/* ------------------------------------------------------------------------- */
/* Fully connected                                                           */
/* ------------------------------------------------------------------------- */

/* Few-row case: the GEMM would waste most of each MR-row micro-tile and pack
   all of w just to use it a few times, so stream w once, applying each part
   of it to every row of x while it is in cache. The dot products keep 16
   independent partial sums, which the compiler vectorizes without having to
   reassociate a single accumulator (no -ffast-math needed). Threads split
   the output columns [j0, j1). */
typedef struct fc_task {
    const float *x, *w, *bias;
    float *y;
    int64_t n, k, m, j0, j1;
    int transpose_weights;
    const rk_epilogue *epilogue;
} fc_task;

#if defined(RK_X86_AVX512)
/* y[i, j] = x[i, :] . w[j, :] + bias[j] for j in [j0, j1): four weight rows at a time, each
   with its own 16-lane sum (the tail of k masked), so the four streams of w are read once per
   row of x, the later rows from L1. */
__attribute__((target("avx512f")))
static void fc_rows_wt_avx512(const fc_task *t)
{
    const int64_t n = t->n, k = t->k, m = t->m;
    const __mmask16 tail = (__mmask16)((1u << (k % 16)) - 1u);
    const int64_t kv = k - k % 16;
    int64_t j = t->j0;
    for (; j + 4 <= t->j1; j += 4) {
        const float *w0 = t->w + j * k, *w1 = w0 + k, *w2 = w1 + k, *w3 = w2 + k;
        for (int64_t i = 0; i < n; i++) {
            const float *xr = t->x + i * k;
            __m512 s0 = _mm512_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
            int64_t kk = 0;
            for (; kk < kv; kk += 16) {
                const __m512 xv = _mm512_loadu_ps(xr + kk);
                s0 = _mm512_fmadd_ps(xv, _mm512_loadu_ps(w0 + kk), s0);
                s1 = _mm512_fmadd_ps(xv, _mm512_loadu_ps(w1 + kk), s1);
                s2 = _mm512_fmadd_ps(xv, _mm512_loadu_ps(w2 + kk), s2);
                s3 = _mm512_fmadd_ps(xv, _mm512_loadu_ps(w3 + kk), s3);
            }
            if (tail) {
                const __m512 xv = _mm512_maskz_loadu_ps(tail, xr + kk);
                s0 = _mm512_fmadd_ps(xv, _mm512_maskz_loadu_ps(tail, w0 + kk), s0);
                s1 = _mm512_fmadd_ps(xv, _mm512_maskz_loadu_ps(tail, w1 + kk), s1);
                s2 = _mm512_fmadd_ps(xv, _mm512_maskz_loadu_ps(tail, w2 + kk), s2);
                s3 = _mm512_fmadd_ps(xv, _mm512_maskz_loadu_ps(tail, w3 + kk), s3);
            }
            float *yr = t->y + i * m + j;
            yr[0] = _mm512_reduce_add_ps(s0) + (t->bias ? t->bias[j] : 0.0f);
            yr[1] = _mm512_reduce_add_ps(s1) + (t->bias ? t->bias[j + 1] : 0.0f);
            yr[2] = _mm512_reduce_add_ps(s2) + (t->bias ? t->bias[j + 2] : 0.0f);
            yr[3] = _mm512_reduce_add_ps(s3) + (t->bias ? t->bias[j + 3] : 0.0f);
        }
    }
    for (; j < t->j1; j++) {
        const float *wr = t->w + j * k;
        for (int64_t i = 0; i < n; i++) {
            const float *xr = t->x + i * k;
            __m512 s0 = _mm512_setzero_ps();
            int64_t kk = 0;
            for (; kk < kv; kk += 16)
                s0 = _mm512_fmadd_ps(_mm512_loadu_ps(xr + kk), _mm512_loadu_ps(wr + kk), s0);
            if (tail)
                s0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(tail, xr + kk), _mm512_maskz_loadu_ps(tail, wr + kk), s0);
            t->y[i * m + j] = _mm512_reduce_add_ps(s0) + (t->bias ? t->bias[j] : 0.0f);
        }
    }
}

/* y[i, j0:j1] = bias + sum over k of x[i, k] * w[k, j0:j1]: 64 columns at a time (the tail
   masked), the partial rows of y in registers for every k. */
__attribute__((target("avx512f")))
static void fc_rows_w_avx512(const fc_task *t)
{
    const int64_t n = t->n, k = t->k, m = t->m;
    for (int64_t i = 0; i < n; i++) {
        const float *xr = t->x + i * k;
        float *yr = t->y + i * m;
        for (int64_t j = t->j0; j < t->j1; j += 64) {
            __mmask16 mask[4];
            __m512 acc[4];
            for (int v = 0; v < 4; v++) {
                const int64_t left = t->j1 - (j + 16 * v);
                mask[v] = left >= 16 ? (__mmask16)0xFFFF
                                     : left <= 0 ? (__mmask16)0 : (__mmask16)((1u << left) - 1u);
                acc[v] = t->bias ? _mm512_maskz_loadu_ps(mask[v], t->bias + j + 16 * v) : _mm512_setzero_ps();
            }
            for (int64_t kk = 0; kk < k; kk++) {
                const __m512 xv = _mm512_set1_ps(xr[kk]);
                const float *wr = t->w + kk * m + j;
                for (int v = 0; v < 4; v++)
                    acc[v] = _mm512_fmadd_ps(xv, _mm512_maskz_loadu_ps(mask[v], wr + 16 * v), acc[v]);
            }
            for (int v = 0; v < 4; v++)
                _mm512_mask_storeu_ps(yr + j + 16 * v, mask[v], acc[v]);
        }
    }
}
#endif

static void *fc_few_rows_run(void *arg)
{
    const fc_task *t = (const fc_task *)arg;
    const int64_t n = t->n, k = t->k, m = t->m;
#if defined(RK_X86_AVX512)
    if (rk_use_avx512()) {
        if (t->transpose_weights)
            fc_rows_wt_avx512(t);
        else
            fc_rows_w_avx512(t);
        if (t->epilogue != NULL && t->j1 > t->j0)
            rk_apply_epilogue(t->epilogue, t->y + t->j0, m, 0, t->j0, n, t->j1 - t->j0);
        return NULL;
    }
#endif
    if (t->transpose_weights) {
        for (int64_t j = t->j0; j < t->j1; j++) {
            const float *wr = t->w + j * k;
            for (int64_t i = 0; i < n; i++) {
                const float *xr = t->x + i * k;
                float lane[16] = { 0 };
                int64_t kk = 0;
                for (; kk + 16 <= k; kk += 16)
                    for (int l = 0; l < 16; l++)
                        lane[l] += xr[kk + l] * wr[kk + l];
                float s = 0.0f;
                for (; kk < k; kk++)
                    s += xr[kk] * wr[kk];
                for (int l = 0; l < 8; l++)
                    lane[l] += lane[l + 8];
                for (int l = 0; l < 4; l++)
                    lane[l] += lane[l + 4];
                s += (lane[0] + lane[2]) + (lane[1] + lane[3]);
                t->y[i * m + j] = s + (t->bias ? t->bias[j] : 0.0f);
            }
        }
    } else {
        for (int64_t i = 0; i < n; i++)
            for (int64_t j = t->j0; j < t->j1; j++)
                t->y[i * m + j] = t->bias ? t->bias[j] : 0.0f;
        for (int64_t kk = 0; kk < k; kk++) {
            const float *wr = t->w + kk * m;
            for (int64_t i = 0; i < n; i++) {
                const float xv = t->x[i * k + kk];
                float *yr = t->y + i * m;
                for (int64_t j = t->j0; j < t->j1; j++)
                    yr[j] += xv * wr[j];
            }
        }
    }
    if (t->epilogue != NULL && t->j1 > t->j0)
        rk_apply_epilogue(t->epilogue, t->y + t->j0, m, 0, t->j0, n, t->j1 - t->j0);
    return NULL;
}

static void fc_few_rows(const float *x, const float *w, const float *bias, float *y,
                        int64_t n, int64_t k, int64_t m, int transpose_weights,
                        const rk_epilogue *epilogue, int threads)
{
    int nt = threads > 0 ? (int)min_i64(threads, rk_thread_count())
                         : rk_threads_for((double)k * (double)m, RK_STREAM_MIN_WEIGHTS_PER_THREAD);
    if (nt > m)
        nt = (int)m;
    fc_task tasks[RK_MAX_THREADS];
    for (int i = 0; i < nt; i++) {
        /* column ranges in multiples of 16 floats, so threads do not share
           cache lines of y */
        int64_t blocks = ceil_div(m, 16);
        fc_task t = { x, w, bias, y, n, k, m, min_i64(m, blocks * i / nt * 16),
                      min_i64(m, blocks * (i + 1) / nt * 16), transpose_weights, epilogue };
        tasks[i] = t;
    }
    if (nt == 1)
        fc_few_rows_run(&tasks[0]);
    else
        rk_run_tasks(fc_few_rows_run, tasks, sizeof(fc_task), nt);
}

/*
 * rk_fully_connected: y[n, m] = x[n, k] @ W + bias, W = w.T ([m, k] storage) if
 * transpose_weights else w ([k, m] storage). bias [m] or NULL.
 * Preconditions: n, k, m >= 0 (k = 0 gives y = bias); y does not alias x, w
 * or bias. Up to 4 rows: w is streamed once (threads split the columns of
 * y), no scratch. Otherwise GEMM, scratch as for gemm_run (for n=512,
 * k=m=1024: 4 MiB + 0.33 MiB per thread).
 * Returns 1 if the scratch allocation fails.
 */
int rk_fully_connected(const float *x, const float *w, const float *bias, float *y,
                       int64_t n, int64_t k, int64_t m, int transpose_weights)
{
    return rk_fully_connected_fused(x, w, bias, y, n, k, m, transpose_weights, NULL);
}

int rk_fully_connected_fused(const float *x, const float *w, const float *bias, float *y,
                             int64_t n, int64_t k, int64_t m, int transpose_weights,
                             const rk_epilogue *epilogue)
{
    return rk_fully_connected_packed(x, w, NULL, bias, y, n, k, m, transpose_weights, epilogue, 0);
}

int rk_fully_connected_uses_packed(int64_t n)
{
    return n > RK_FC_STREAM_ROWS;
}

int rk_fully_connected_packed(const float *x, const float *w, const float *packed,
                              const float *bias, float *y, int64_t n, int64_t k, int64_t m,
                              int transpose_weights, const rk_epilogue *epilogue, int threads)
{
    if (n <= 0 || m <= 0)
        return 0;
    /* Streaming beats GEMM + packing up to ~4 rows (measured for k, m from
       1024 to 4096; for [m, k] weights with small k*m up to ~8 rows). */
    if (k > 0 && n <= RK_FC_STREAM_ROWS) {
        fc_few_rows(x, w, bias, y, n, k, m, transpose_weights, epilogue, threads);
        return 0;
    }
    gemm_op op;
    memset(&op, 0, sizeof op);
    op.u = rk_gemm_kernel();
    op.a = x;
    op.lda = k;
    op.b = w;
    if (transpose_weights) {
        op.rsb = 1;
        op.csb = k;
    } else {
        op.rsb = m;
        op.csb = 1;
    }
    op.bpacked = packed;
    op.bias = bias;
    op.c = y;
    op.ldc = m;
    op.m = n;
    op.n = m;
    op.k = k;
    op.epilogue = epilogue;
    op.threads = threads;
    return rk_gemm_run(&op);
}

/*
 * rk_matmul: each batch index's [m, k] @ [k, n] through rk_fully_connected (the packed SGEMM, or
 * the weight stream for a few rows). When b is one matrix for every batch and a's batches are
 * all distinct and dense, the batches are one product of batch * m rows.
 */
int rk_matmul(const float *a, const float *b, float *y, const rk_matmul_plan *p)
{
    int64_t batches = 1, a_dense = p->m * p->k;
    int shared_b = 1, dense_a = 1;
    for (int d = p->batch_rank - 1; d >= 0; d--) {
        shared_b &= p->b_stride[d] == 0;
        dense_a &= p->a_stride[d] == a_dense;
        a_dense *= p->batch[d];
        batches *= p->batch[d];
    }
    if (shared_b && dense_a)
        return rk_fully_connected(a, b, NULL, y, batches * p->m, p->k, p->n, 0);
    int64_t idx[6] = { 0 }, a_off = 0, b_off = 0;
    for (int64_t i = 0; i < batches; i++) {
        if (rk_fully_connected(a + a_off, b + b_off, NULL, y + i * p->m * p->n, p->m, p->k, p->n, 0))
            return 1;
        for (int d = p->batch_rank - 1; d >= 0; d--) {
            a_off += p->a_stride[d];
            b_off += p->b_stride[d];
            if (++idx[d] < p->batch[d])
                break;
            a_off -= p->a_stride[d] * p->batch[d];
            b_off -= p->b_stride[d] * p->batch[d];
            idx[d] = 0;
        }
    }
    return 0;
}
