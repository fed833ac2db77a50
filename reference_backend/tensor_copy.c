/*
 * Copies that move data without arithmetic: strided copies (Slice, Transpose), Pad and
 * Concatenation. Rows that are contiguous on both sides go through memcpy; a transpose goes
 * through cache-sized tiles of 4x4 register transposes, never one element at a time over the
 * whole tensor. Large copies are shared with the thread pool.
 */
#include "kernels_internal.h"

/* Tiles of TILE x TILE floats: 4 KiB read, 4 KiB written, both in L1. */
#define TILE 32
/* Transposes walk the output's contiguous axis in chunks of this many floats. */
#define CHUNK 256

void rk_strided_copy_plan(rk_strided_copy *p)
{
    int r = 0;
    for (int d = 0; d < p->rank; d++) {
        if (p->extent[d] == 1)
            continue;
        p->extent[r] = p->extent[d];
        p->stride[r] = p->stride[d];
        r++;
    }
    /* merge axis d into the one after it (already merged) when it continues its stride */
    int merged = 0;
    for (int d = 0; d < r; d++) {
        if (merged > 0 && p->stride[merged - 1] == p->stride[d] * p->extent[d]) {
            p->extent[merged - 1] *= p->extent[d];
            p->stride[merged - 1] = p->stride[d];
            continue;
        }
        p->extent[merged] = p->extent[d];
        p->stride[merged] = p->stride[d];
        merged++;
    }
    p->rank = merged;
}

typedef struct copy_call {
    const float *x;
    float *y;
    const rk_strided_copy *p;
    int q;                              /* Transpose: the axis that is contiguous in the input */
    int64_t q_blocks;
} copy_call;

/* Input offset and output offset of the row `row` of the axes before the last, leaving out
   axis `skip` (-1: none). Output offsets count in the output's dense layout. */
static void row_offsets(const rk_strided_copy *p, int64_t row, int skip, int64_t *in, int64_t *out)
{
    int64_t o_stride = p->extent[p->rank - 1];
    *in = p->offset;
    *out = 0;
    for (int d = p->rank - 2; d >= 0; d--) {
        if (d != skip) {
            int64_t i = row % p->extent[d];
            row /= p->extent[d];
            *in += i * p->stride[d];
            *out += i * o_stride;
        }
        o_stride *= p->extent[d];
    }
}

/* Every axis but the last is a row; the last is contiguous in the input (memcpy) or read with
   its stride. */
static void copy_rows(void *ctx, int64_t first, int64_t last)
{
    const copy_call *c = ctx;
    const rk_strided_copy *p = c->p;
    const int64_t n = p->extent[p->rank - 1], s = p->stride[p->rank - 1];
    for (int64_t row = first; row < last; row++) {
        int64_t in, out;
        row_offsets(p, row, -1, &in, &out);
        const float *src = c->x + in;
        float *dst = c->y + out;
        int64_t i = 0;
        if (s == 1) {
            memcpy(dst, src, (size_t)n * sizeof(float));
            continue;
        }
        /* the common steps 4 lanes at a time, never reading past the row's last element */
        if (s == 2)
            for (; i + 5 <= n; i += 4)
                vf4_store(dst + i, __builtin_shuffle(vf4_load(src + 2 * i), vf4_load(src + 2 * i + 4),
                                                     (vi4){ 0, 2, 4, 6 }));
        else if (s == -1)
            for (; i + 4 <= n; i += 4)
                vf4_store(dst + i, __builtin_shuffle(vf4_load(src - i - 3), (vi4){ 3, 2, 1, 0 }));
        for (; i < n; i++)
            dst[i] = src[i * s];
    }
}

static inline void transpose4(const float *src, int64_t ld_src, float *dst, int64_t ld_dst)
{
    vf4 r0 = vf4_load(src), r1 = vf4_load(src + ld_src);
    vf4 r2 = vf4_load(src + 2 * ld_src), r3 = vf4_load(src + 3 * ld_src);
    vf4 t0 = __builtin_shuffle(r0, r1, (vi4){ 0, 4, 1, 5 });
    vf4 t1 = __builtin_shuffle(r2, r3, (vi4){ 0, 4, 1, 5 });
    vf4 t2 = __builtin_shuffle(r0, r1, (vi4){ 2, 6, 3, 7 });
    vf4 t3 = __builtin_shuffle(r2, r3, (vi4){ 2, 6, 3, 7 });
    vf4_store(dst, __builtin_shuffle(t0, t1, (vi4){ 0, 1, 4, 5 }));
    vf4_store(dst + ld_dst, __builtin_shuffle(t0, t1, (vi4){ 2, 3, 6, 7 }));
    vf4_store(dst + 2 * ld_dst, __builtin_shuffle(t2, t3, (vi4){ 0, 1, 4, 5 }));
    vf4_store(dst + 3 * ld_dst, __builtin_shuffle(t2, t3, (vi4){ 2, 3, 6, 7 }));
}

/* dst[j * ld_dst + i] = src[i * ld_src + j] for i < ni, j < nj: one tile. */
static void transpose_tile(const float *src, int64_t ld_src, float *dst, int64_t ld_dst,
                           int64_t ni, int64_t nj)
{
    int64_t i = 0;
    for (; i + 4 <= ni; i += 4) {
        int64_t j = 0;
        for (; j + 4 <= nj; j += 4)
            transpose4(src + i * ld_src + j, ld_src, dst + j * ld_dst + i, ld_dst);
        for (; j < nj; j++)
            for (int64_t k = 0; k < 4; k++)
                dst[j * ld_dst + i + k] = src[(i + k) * ld_src + j];
    }
    for (; i < ni; i++)
        for (int64_t j = 0; j < nj; j++)
            dst[j * ld_dst + i] = src[i * ld_src + j];
}

/* Units of work: (the row of the axes other than q and the last, a chunk of CHUNK indices of
   the last axis, a TILE-wide strip of q), q fastest. In each, the plane [q, last] is a
   transpose: the input is contiguous along q, the output along the last axis. The units of
   one chunk read CHUNK input rows of the plane between them (each once, while they stay in
   cache) and write CHUNK-float pieces of as many output rows. */
static void copy_transposed(void *ctx, int64_t first, int64_t last)
{
    const copy_call *c = ctx;
    const rk_strided_copy *p = c->p;
    const int q = c->q;
    const int64_t ni = p->extent[p->rank - 1], s = p->stride[p->rank - 1], nq = p->extent[q];
    const int64_t chunks = ceil_div(ni, CHUNK);
    int64_t ld_out = 1;
    for (int d = q + 1; d < p->rank; d++)
        ld_out *= p->extent[d];
    for (int64_t unit = first; unit < last; unit++) {
        int64_t j0 = unit % c->q_blocks * TILE, chunk = unit / c->q_blocks % chunks;
        int64_t row = unit / c->q_blocks / chunks, in, out;
        int64_t nj = min_i64(TILE, nq - j0), end = min_i64(ni, (chunk + 1) * CHUNK);
        row_offsets(p, row, q, &in, &out);
        for (int64_t i0 = chunk * CHUNK; i0 < end; i0 += TILE)
            transpose_tile(c->x + in + i0 * s + j0, s, c->y + out + j0 * ld_out + i0, ld_out,
                           min_i64(TILE, end - i0), nj);
    }
}

/* Output pixels per unit of copy_interleaved. */
#define INTERLEAVE_CHUNK 4096

#if defined(RK_X86_AVX512)
/* y[j * 3 + c] = x[c * s + j] for j < n: 16 pixels of three planes into three vectors of
   interleaved channels, by two permutes each. */
__attribute__((target("avx512f")))
static void interleave3_avx512(const float *x, int64_t s, float *y, int64_t n)
{
    int32_t ab[3][16], cc[3][16];
    __mmask16 from_c[3] = { 0, 0, 0 };
    for (int v = 0; v < 3; v++)
        for (int l = 0; l < 16; l++) {
            const int p = 16 * v + l, j = p / 3, ch = p % 3;
            ab[v][l] = ch == 1 ? 16 + j : j;
            cc[v][l] = j;
            if (ch == 2)
                from_c[v] |= (__mmask16)(1u << l);
        }
    __m512i iab[3], ic[3];
    for (int v = 0; v < 3; v++) {
        iab[v] = _mm512_loadu_si512(ab[v]);
        ic[v] = _mm512_loadu_si512(cc[v]);
    }
    int64_t j = 0;
    for (; j + 16 <= n; j += 16) {
        const __m512 a = _mm512_loadu_ps(x + j), b = _mm512_loadu_ps(x + s + j), c = _mm512_loadu_ps(x + 2 * s + j);
        for (int v = 0; v < 3; v++)
            _mm512_storeu_ps(y + 3 * j + 16 * v,
                             _mm512_mask_permutexvar_ps(_mm512_permutex2var_ps(a, iab[v], b), from_c[v], ic[v], c));
    }
    for (; j < n; j++)
        for (int c = 0; c < 3; c++)
            y[3 * j + c] = x[c * s + j];
}
#endif

/* Units: (the row of the axes before q, an INTERLEAVE_CHUNK of q). The last axis has a few
   elements (an image's channels) and q, the axis before it, is contiguous in the input: each
   output row of q interleaves that many contiguous input runs (NCHW to NHWC). */
static void copy_interleaved(void *ctx, int64_t first, int64_t last)
{
    const copy_call *c = ctx;
    const rk_strided_copy *p = c->p;
    const int q = c->q;
    const int64_t e = p->extent[p->rank - 1], s = p->stride[p->rank - 1], nq = p->extent[q];
    const int64_t chunks = ceil_div(nq, INTERLEAVE_CHUNK);
    for (int64_t unit = first; unit < last; unit++) {
        const int64_t row = unit / chunks, j0 = unit % chunks * INTERLEAVE_CHUNK;
        const int64_t n = min_i64(INTERLEAVE_CHUNK, nq - j0);
        int64_t in, out;
        row_offsets(p, row, q, &in, &out);
        rk_interleave_planes(c->x + in + j0, s, e, c->y + out + j0 * e, n);
    }
}

void rk_interleave_planes(const float *x, int64_t plane, int64_t c, float *y, int64_t n)
{
#if defined(RK_X86_AVX512)
    if (c == 3 && rk_use_avx512()) {
        interleave3_avx512(x, plane, y, n);
        return;
    }
#endif
    for (int64_t j = 0; j < n; j++)
        for (int64_t k = 0; k < c; k++)
            y[j * c + k] = x[k * plane + j];
}

/*
 * rk_copy_strided: y (dense, p's extents) from x as p says (rk_strided_copy_plan applied). No
 * scratch; y must not overlap x.
 */
int rk_copy_strided(const float *x, float *y, const rk_strided_copy *p)
{
    copy_call c = { x, y, p, -1, 0 };
    int64_t rows = 1, total;
    if (p->rank == 0) {
        y[0] = x[p->offset];
        return 0;
    }
    for (int d = 0; d < p->rank - 1; d++)
        rows *= p->extent[d];
    total = rows * p->extent[p->rank - 1];
    if (p->stride[p->rank - 1] != 1)
        for (int d = p->rank - 2; d >= 0 && c.q < 0; d--)
            if (p->stride[d] == 1)
                c.q = d;
    if (c.q < 0) {
        rk_parallel_for(rows, 1, (double)p->extent[p->rank - 1],
                        p->stride[p->rank - 1] == 1 ? RK_COPY_MIN_PER_THREAD : RK_MATH_MIN_PER_THREAD,
                        copy_rows, &c);
        return 0;
    }
    if (c.q == p->rank - 2 && p->extent[p->rank - 1] <= 4) {
        const int64_t units = rows / p->extent[c.q] * ceil_div(p->extent[c.q], INTERLEAVE_CHUNK);
        rk_parallel_for(units, 1, (double)total / (double)units, RK_COPY_MIN_PER_THREAD,
                        copy_interleaved, &c);
        return 0;
    }
    c.q_blocks = ceil_div(p->extent[c.q], TILE);
    int64_t units = rows / p->extent[c.q] * ceil_div(p->extent[p->rank - 1], CHUNK) * c.q_blocks;
    rk_parallel_for(units, 1, (double)total / (double)units, RK_COPY_MIN_PER_THREAD,
                    copy_transposed, &c);
    return 0;
}

/* ---- Pad ---------------------------------------------------------------------------------- */

/* The input index that output index o reads along axis d, or -1 for the constant. */
static int64_t pad_source(const rk_pad_plan *p, int d, int64_t o)
{
    int64_t i = o - p->begin[d], lo = p->lo[d], hi = p->hi[d];
    if (i >= lo && i < hi)
        return i;
    if (p->mode == 0)
        return -1;
    if (p->mode == 2 || hi - lo == 1)
        return i < lo ? lo : hi - 1;
    /* reflect: the mirror images of [lo, hi) repeat with period 2 (m - 1) */
    int64_t period = 2 * (hi - lo - 1), t = (i - lo) % period;
    if (t < 0)
        t += period;
    return lo + (t < hi - lo ? t : period - t);
}

typedef struct pad_call {
    const float *x;
    float *y;
    const rk_pad_plan *p;
} pad_call;

static void fill(float *y, int64_t n, float value)
{
    for (int64_t i = 0; i < n; i++)
        y[i] = value;
}

static void pad_rows(void *ctx, int64_t first, int64_t last)
{
    const pad_call *c = ctx;
    const rk_pad_plan *p = c->p;
    const int r = p->rank - 1;
    const int64_t e = p->element, n = p->out[r];
    /* the outputs along the last axis that read the input directly: [o0, o1) */
    const int64_t o0 = min_i64(n, max_i64(0, p->lo[r] + p->begin[r]));
    const int64_t o1 = max_i64(o0, min_i64(n, p->hi[r] + p->begin[r]));
    for (int64_t row = first; row < last; row++) {
        float *dst = c->y + row * n * e;
        int64_t in = 0, in_stride = p->in[r], rest = row;
        int outside = 0;
        for (int d = r - 1; d >= 0; d--) {
            int64_t i = pad_source(p, d, rest % p->out[d]);
            rest /= p->out[d];
            outside |= i < 0;
            in += i * in_stride;
            in_stride *= p->in[d];
        }
        if (outside) {
            fill(dst, n * e, p->value);
            continue;
        }
        const float *src = c->x + in * e;
        memcpy(dst + o0 * e, src + (o0 - p->begin[r]) * e, (size_t)((o1 - o0) * e) * sizeof(float));
        for (int64_t o = 0; o < n; o++) {
            if (o == o0)
                o = o1;                 /* the part copied above */
            if (o == n)
                break;
            int64_t i = pad_source(p, r, o);
            if (i < 0)
                fill(dst + o * e, e, p->value);
            else
                memcpy(dst + o * e, src + i * e, (size_t)e * sizeof(float));
        }
    }
}

/* rk_pad: y (p->out, dense) from x (p->in, dense). No scratch; y must not overlap x. */
int rk_pad(const float *x, float *y, const rk_pad_plan *p)
{
    pad_call c = { x, y, p };
    int64_t rows = 1;
    for (int d = 0; d < p->rank - 1; d++)
        rows *= p->out[d];
    rk_parallel_for(rows, 1, (double)(p->out[p->rank - 1] * p->element), RK_COPY_MIN_PER_THREAD,
                    pad_rows, &c);
    return 0;
}

/* ---- Concatenation ------------------------------------------------------------------------ */

typedef struct concat_call {
    const float *const *x;
    const int64_t *chunk;
    uint32_t n;
    int64_t row;
    float *y;
} concat_call;

/* The output floats [first, last): each row's part of every input that falls inside. */
static void concat_range(void *ctx, int64_t first, int64_t last)
{
    const concat_call *c = ctx;
    for (int64_t row = first / c->row; row * c->row < last; row++) {
        int64_t base = row * c->row, offset = 0;
        for (uint32_t i = 0; i < c->n && base + offset < last; i++) {
            int64_t begin = max_i64(base + offset, first), end = min_i64(base + offset + c->chunk[i], last);
            if (begin < end)
                memcpy(c->y + begin, c->x[i] + row * c->chunk[i] + (begin - base - offset),
                       (size_t)(end - begin) * sizeof(float));
            offset += c->chunk[i];
        }
    }
}

/* rk_concat: no scratch; y must not overlap any input. */
int rk_concat(const float *const *x, const int64_t *chunk, uint32_t n, int64_t outer, int64_t row,
              float *y)
{
    concat_call c = { x, chunk, n, row, y };
    rk_parallel_for(outer * row, 16, 1.0, RK_COPY_MIN_PER_THREAD, concat_range, &c);
    return 0;
}
