/*
 * Packed, cache-blocked SGEMM: C = A * B [+ bias per column], then an optional epilogue, on the
 * micro-kernel chosen for this CPU (gemm_kernels.c): blocking and the sharing of the work
 * among threads; the operands are packed by gemm_pack.c. Fully connected and conv2d are both
 * expressed as this GEMM; conv2d packs its im2col operand directly from the NHWC input, block
 * by block, so no full im2col matrix is ever materialized.
 */
#include "kernels_internal.h"

#include <pthread.h>
#include <stdatomic.h>

/* ------------------------------------------------------------------------- */
/* SGEMM driver                                                              */
/* ------------------------------------------------------------------------- */

/*
 * Parallel scheme. B is packed into a shared "slab" (all of K x up to slab_w
 * columns of B), then C is cut into units of nrow row blocks x nu columns;
 * each unit packs its own A block per K block into a private buffer. Row
 * blocks are whole micro-panels (see row_blocks): in a unit's tile order with
 * column panels outer (see gemm_unit), a B micro-panel brought into L1 serves
 * every A micro-panel of its unit, so tall units stream the packed B through
 * the cache fewer times, while short units at the end let
 * the threads finish together.
 *
 * All work is one ordered list of items, claimed through an atomic counter:
 *   [B-pack items of slab 0][units of slab 0][B-pack items of slab 1]...
 * A unit needs every pack item of its slab done, and a pack item needs every
 * unit of the previous slab done (it overwrites the slab buffer). Since items
 * are claimed in order, "phase p is complete" is simply "the number of
 * completed items has reached the start of phase p + 1", so one completion
 * counter expresses every dependency, and a claimed item only ever waits for
 * items that running threads have already claimed.
 *
 * Nothing waits for a thread that has not started yet: a worker that the OS
 * schedules late (other load on the machine, or placed on the caller's core)
 * just finds less work left. With a fixed split or a full barrier, such a
 * straggler would stall the whole call.
 */
typedef struct gemm_shared {
    const gemm_op *op;
    int64_t kc, slab_w, slab_wp, nu;
    int64_t nrow;       /* row blocks: micro-panels row_start[r] .. row_start[r + 1] - 1 */
    const int64_t *row_start;
    int64_t nslabs, items_full, total_items;
    float *bp;          /* packed slab: K block at offset pc * slab_wp */
    float *ap;          /* per-thread A buffers, a_stride floats each */
    size_t a_stride;
    int single;         /* one participant: never wait, never lock */
    int tail;           /* the kernel applies op->epilogue on full tiles (ukr_tail below) */
    int in_place;       /* C is the epilogue's residual (one K block: rk_gemm_in_place) */
    ukr_tail tail_base; /* its clamp; residual set per tile */
    atomic_llong next, done;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    atomic_int waiters; /* threads sleeping on cv, or about to (changed under mu) */
} gemm_shared;

typedef struct gemm_worker {
    gemm_shared *sh;
    int id;
} gemm_worker;

#define RK_PACK_GROUP 4 /* B micro-panels per packing work item */

static int64_t slab_pack_items(const gemm_shared *sh, int64_t slab_w)
{
    const int nr = sh->op->u->nr;
    if (sh->op->bpacked != NULL)
        return 0;
    return ceil_div(sh->op->k, sh->kc) * ceil_div(ceil_div(slab_w, nr), RK_PACK_GROUP);
}

static int64_t slab_units(const gemm_shared *sh, int64_t slab_w)
{
    return sh->nrow * ceil_div(slab_w, sh->nu);
}

static void wait_done(gemm_shared *sh, int64_t need)
{
    if (sh->single || atomic_load(&sh->done) >= need)
        return;
    /* the items waited for are being run by other threads right now: poll a while first */
    const int64_t start = rk_now_ns();
    while (rk_now_ns() - start < RK_SPIN_NS) {
        for (int i = 0; i < 64; i++) {
            if (atomic_load_explicit(&sh->done, memory_order_acquire) >= need)
                return;
            rk_cpu_relax();
        }
    }
    pthread_mutex_lock(&sh->mu);
    atomic_fetch_add(&sh->waiters, 1);
    while (atomic_load(&sh->done) < need)
        pthread_cond_wait(&sh->cv, &sh->mu);
    atomic_fetch_sub(&sh->waiters, 1);
    pthread_mutex_unlock(&sh->mu);
}

/* Counts an item done and wakes the waiters, if any. Lock-free when nobody waits: both sides use
   sequentially consistent operations (a waiter announces itself, then reads done; this adds to
   done, then reads waiters), so either the waiter sees the new count or this sees the waiter,
   and then takes mu, which the waiter holds until it sleeps on cv. (A mutex per item made the
   threads sleep on it, and a thread that sleeps is placed again by the scheduler when it
   wakes, possibly on the other thread's CPU.) */
static void mark_done(gemm_shared *sh)
{
    atomic_fetch_add(&sh->done, 1);
    if (sh->single || atomic_load(&sh->waiters) == 0)
        return;
    pthread_mutex_lock(&sh->mu);
    pthread_cond_broadcast(&sh->cv);
    pthread_mutex_unlock(&sh->mu);
}

/*
 * The order of a unit's tiles. Column panels outer (the default): a B micro-panel stays in L1
 * while the unit's A panels stream from L2. Row panels outer: an A micro-panel stays in L1
 * while the unit's B block streams from L2, and C is written a whole row band at a time, in
 * the order of its addresses, which the hardware prefetcher follows. That pays where C is
 * large and cold, as in a residual network's 1 x 1 expansions (56 x 56 x 64 -> 256, a 3.2 MB
 * output added to a 3.2 MB residual): 5-15% less time per step on ResNet-50, the other steps
 * unchanged. It is taken while the unit's B block (kc x its columns) fits in half of L2.
 */
#ifndef RK_ROWS_OUTER_MAX_B
#define RK_ROWS_OUTER_MAX_B (256 * 1024) /* floats */
#endif

static void gemm_unit(const gemm_shared *sh, float *ap, int64_t slab0, int64_t slab_w, int64_t unit)
{
    const gemm_op *op = sh->op;
    const ukr_desc *u = op->u;
    const int mr = u->mr, nr = u->nr;
    const int64_t nnb = ceil_div(slab_w, sh->nu), rb = unit / nnb;
    const int64_t i0 = sh->row_start[rb] * mr, j0 = unit % nnb * sh->nu;
    const int64_t mc = min_i64(sh->row_start[rb + 1] * mr, op->m) - i0;
    const int64_t jend = min_i64(j0 + sh->nu, slab_w);
    float tile[RK_MAX_MR * RK_MAX_NR] __attribute__((aligned(64)));
    float bias_pad[RK_MAX_NR] __attribute__((aligned(64)));

    for (int64_t pc = 0; pc < op->k; pc += sh->kc) {
        const int64_t kc = min_i64(sh->kc, op->k - pc);
        const int accumulate = pc > 0;
        const float *bblk = sh->bp + pc * sh->slab_wp;
        /* The kernel reads the convolution's input directly, and A panels are packed (one at a
           time) only where it cannot:
           - one B micro-panel: a packed A panel would serve a single kernel call;
           - a pointwise convolution to at most RK_DIRECT_POINTWISE_PANELS micro-panels: the A
             rows are the input's own rows, read once from memory by the first tile of a row
             band (the tiles are row panels outer, see above) and from L1 by the others.
             ResNet-50's 56 x 56 x 256 -> 64 took 15% less time (C loop), its 1 x 1
             reductions 6-12% less per step. Other convolutions read a window per tap, and
             there reading directly for several panels was 15-30% slower (3 x 3, stride 2);
           - few channels: the packers move a handful of floats per tap, and the kernel's runs
             span whole window rows (taps merged), so reading directly pays for any width. */
        const int64_t panels = ceil_div(jend - j0, nr);
        const int direct = op->conv != NULL && u->direct != NULL &&
                           (op->conv->c < 8 || panels == 1 ||
                            (rk_conv_is_pointwise(op->conv) && panels <= RK_DIRECT_POINTWISE_PANELS));
        if (!direct)
            rk_gemm_pack_a(op, i0, mc, pc, kc, ap);
        const int64_t nrp = ceil_div(mc, mr);
        const int rows_outer = kc * (jend - j0) <= RK_ROWS_OUTER_MAX_B;
        /* tile (ip, jp) of the unit; stepped without dividing: a tile of a short K block is a
           few hundred cycles */
        int64_t ip = 0, jp = 0;
        for (int64_t t = 0; t < panels * nrp; t++) {
            const int64_t jr = j0 + jp * nr, ir = ip * mr;
            if (rows_outer && ++jp == panels)
                jp = 0, ip++;
            else if (!rows_outer && ++ip == nrp)
                ip = 0, jp++;
            const int64_t cols = min_i64(nr, jend - jr);
            const float *bpanel = bblk + jr * kc;
            const float *bias = op->bias ? op->bias + slab0 + jr : NULL;
            if (bias && cols < nr) {
                /* the micro-kernel reads a full NR bias row */
                for (int j = 0; j < nr; j++)
                    bias_pad[j] = j < cols ? bias[j] : 0.0f;
                bias = bias_pad;
            }
            const int64_t rows = min_i64(mr, mc - ir);
            const float *apanel = ap + ir * kc;
            float *cp = op->c + (i0 + ir) * op->ldc + slab0 + jr;
            int nseg = -1;
            const float *seg[RK_DIRECT_MAX_SEGS];
            int64_t seg_len[RK_DIRECT_MAX_SEGS];
            if (direct) {
                if (rows == mr)
                    nseg = rk_conv_direct_segments(op->conv, mr, i0 + ir, pc, kc, op->a, seg, seg_len);
                if (nseg < 0)
                    rk_gemm_pack_a(op, i0 + ir, rows, pc, kc, ap + ir * kc);
            }
            const int half = cols <= nr / 2 && u->half != NULL;
            const int full = rows == mr && cols == (half ? nr / 2 : nr);
            /* the tile is final after the last K block: the epilogue is applied while it
               is hot, in the kernel's own store where it can */
            const int last = op->epilogue != NULL && pc + kc >= op->k;
            ukr_tail tail;
            const ukr_tail *tp = NULL;
            if (last && full && sh->tail) {
                tail = sh->tail_base;
                if (op->epilogue->residual != NULL)
                    tail.residual = op->epilogue->residual + (i0 + ir) * tail.ldr + slab0 + jr;
                tp = &tail;
            }
            /* Edge tile: go through a full-size local tile so the kernel never touches C
               outside the matrix. So does a final tile whose epilogue the kernel does not
               apply when C is its own residual: the residual is read before C is written. */
            const int local = !full || (last && tp == NULL && sh->in_place);
            float *cd = local ? tile : cp;
            const int64_t ldd = local ? nr : op->ldc;
            if (local && accumulate)
                for (int64_t i = 0; i < rows; i++)
                    memcpy(tile + i * nr, cp + i * op->ldc, (size_t)cols * sizeof(float));
            if (nseg >= 0)
                (half ? u->direct_half : u->direct)(seg, seg_len, nseg, op->conv->stride_w * op->conv->c,
                                                    bpanel, cd, ldd, bias, accumulate, tp);
            else if (rows < mr && !half && u->part[1] != NULL)
                /* a last row panel of few rows (local): its rows alone, RK_PART_ROWS - 1 at most
                   a call, rather than multiply-adds on the panel's zero rows */
                for (int64_t r0 = 0; r0 < rows; r0 += RK_PART_ROWS - 1)
                    u->part[min_i64(rows - r0, RK_PART_ROWS - 1)](kc, apanel + r0, bpanel, cd + r0 * ldd, ldd,
                                                                   bias, accumulate, NULL);
            else
                (half ? u->half : u->fn)(kc, apanel, bpanel, cd, ldd, bias, accumulate, tp);
            if (last && tp == NULL)
                rk_apply_epilogue(op->epilogue, cd, ldd, i0 + ir, slab0 + jr, rows, cols);
            if (local)
                for (int64_t i = 0; i < rows; i++)
                    memcpy(cp + i * op->ldc, tile + i * nr, (size_t)cols * sizeof(float));
        }
    }
}

static void *gemm_worker_run(void *arg)
{
    const gemm_worker *w = (const gemm_worker *)arg;
    gemm_shared *sh = w->sh;
    const gemm_op *op = sh->op;
    const int nr = op->u->nr;
    float *ap = sh->ap + (size_t)w->id * sh->a_stride;
    int64_t it;

    while ((it = atomic_fetch_add(&sh->next, 1)) < sh->total_items) {
        const int64_t s = min_i64(it / sh->items_full, sh->nslabs - 1);
        const int64_t base = s * sh->items_full, r = it - base;
        const int64_t slab0 = s * sh->slab_w;
        const int64_t slab_w = min_i64(sh->slab_w, op->n - slab0);
        const int64_t npack = slab_pack_items(sh, slab_w);
        if (r < npack) {
            wait_done(sh, base); /* previous slab fully consumed */
            const int64_t ngroups = ceil_div(ceil_div(slab_w, nr), RK_PACK_GROUP);
            const int64_t pc = r / ngroups * sh->kc, jp = r % ngroups * RK_PACK_GROUP * nr;
            const int64_t kc = min_i64(sh->kc, op->k - pc);
            const int64_t cols = min_i64(RK_PACK_GROUP * nr, slab_w - jp);
            rk_gemm_pack_b_block(op, slab0 + jp, cols, pc, kc, sh->bp + pc * sh->slab_wp + jp * kc);
        } else {
            wait_done(sh, base + npack); /* this slab fully packed */
            gemm_unit(sh, ap, slab0, slab_w, r - npack);
        }
        mark_done(sh);
    }
    return NULL;
}

/*
 * Splits P micro-panels of rows into blocks of at most max_p; writes the block starts and P to
 * start[0..n] when start is not NULL, returns n. One thread: n = ceil(P / max_p) blocks as even
 * as possible. Several threads: guided, each block takes 1/nt of the panels still left (at
 * most max_p, at least RK_MIN_BLOCK_PANELS): tall blocks first, where a B micro-panel in L1
 * serves many A panels, then shorter ones, so that when the threads run out of work they do so
 * within a short block of each other (for 512 rows of 14-row panels and two threads: 19, 9, 5,
 * 2, 2 panels; the units then split the columns, see rk_gemm_run). Every block streams all of
 * the packed B through the cache once more: taking 1/(2 nt) instead (nine blocks here) was
 * 3-4% slower on two threads (bench_gemm.py, 512 x 1024 x 1024 and other shapes).
 */
#define RK_MIN_BLOCK_PANELS 2
/* A GEMM of at most this many row panels whose packed B holds more than RK_FEW_ROWS_MIN_B
   floats is one row block (rk_gemm_run). */
#ifndef RK_FEW_ROW_PANELS
#define RK_FEW_ROW_PANELS 4
#endif
#ifndef RK_FEW_ROWS_MIN_B
#define RK_FEW_ROWS_MIN_B (256 * 1024)
#endif
static int64_t row_blocks(int64_t P, int64_t max_p, int nt, int64_t *start)
{
    int64_t n = 0;
    if (nt <= 1) {
        n = ceil_div(P, max_p);
        for (int64_t i = 0; start && i < n; i++)
            start[i] = i * P / n;
    } else {
        for (int64_t r = 0; r < P; n++) {
            int64_t size = max_i64(RK_MIN_BLOCK_PANELS, ceil_div(P - r, (int64_t)nt));
            if (start)
                start[n] = r;
            r += min_i64(min_i64(size, max_p), P - r);
        }
    }
    if (start)
        start[n] = P;
    return n;
}

/* Rebalances a block size so the last block is not tiny, e.g. K = 576 with a
   nominal 384 becomes two blocks of 288 instead of 384 + 192. */
static int64_t balanced_block(int64_t total, int64_t nominal, int64_t unit)
{
    int64_t nblocks = ceil_div(total, nominal);
    int64_t b = ceil_div(total, nblocks);
    return ceil_div(b, unit) * unit;
}

/*
 * gemm_run: C = A * B + bias as described by op; M, N, K >= 0.
 * Scratch (one allocation per call, freed before returning):
 *   packed B slab: K x min(N, slab) floats rounded up to NR columns, where the
 *   slab is all of N if that fits RK_SLAB_BYTES (16 MiB), else the widest
 *   slab that fits, but at least RK_MIN_SLAB_COLS columns (so at most
 *   max(16 MiB, 1 KiB * K));
 *   plus one packed A block per thread, at most 336 x 256 floats (336 KiB), and
 *   8 bytes per row block.
 * Returns 1 if that allocation fails (C untouched), else 0.
 */
int rk_gemm_run(const gemm_op *op)
{
    const ukr_desc *u = op->u;
    const int64_t M = op->m, N = op->n, K = op->k;
    const int mr = u->mr, nr = u->nr;
    if (M <= 0 || N <= 0)
        return 0;
    if (K <= 0) {
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++)
                op->c[i * op->ldc + j] = op->bias ? op->bias[j] : 0.0f;
        if (op->epilogue != NULL)
            rk_apply_epilogue(op->epilogue, op->c, op->ldc, 0, 0, M, N);
        return 0;
    }

    gemm_shared sh;
    memset(&sh, 0, sizeof sh);
    sh.op = op;
    sh.kc = balanced_block(K, u->kc, 4);
    sh.tail = u->tail && op->epilogue != NULL && rk_epilogue_tail(op->epilogue, &sh.tail_base);
    sh.in_place = op->epilogue != NULL && op->epilogue->residual == op->c;

    /* Slab width: all of N when the packed copy fits the budget (or was packed before the
       call), else as many columns as fit, but never so few that A gets re-packed too often. */
    int64_t slab_w = ceil_div(N, nr) * nr;
    if (op->bpacked == NULL && slab_w * K * (int64_t)sizeof(float) > RK_SLAB_BYTES) {
        slab_w = RK_SLAB_BYTES / ((int64_t)sizeof(float) * K) / nr * nr;
        slab_w = max_i64(slab_w, ceil_div(RK_MIN_SLAB_COLS, nr) * nr);
        slab_w = balanced_block(N, slab_w, nr);
    }
    sh.slab_w = slab_w;
    sh.slab_wp = ceil_div(min_i64(slab_w, N), nr) * nr;

    /* Starting a thread costs ~40 us here (more when the OS places it on a
       busy core), and the shared B packing is a short serial-ish phase:
       measured, a second thread only pays off from ~50 MFLOP on. */
    double flops = 2.0 * (double)M * (double)N * (double)K;
    int nt = op->threads > 0 ? min_i64(op->threads, rk_thread_count())
                             : rk_threads_for(flops, RK_GEMM_MIN_FLOP_PER_THREAD);

    /* Units: row blocks of at most the cache-sized A block (guided with several
       threads); then, when that gives too few units (few rows), narrower columns
       (which re-pack A) until every thread can claim RK_UNITS_PER_THREAD, so a
       late or slowed thread is absorbed by the others. Columns narrower than 4 micro-panels
       only where there are fewer units than threads (a 7 x 7 image has four row panels):
       there the threads would otherwise idle. */
    int64_t w_eff = min_i64(slab_w, N);
    const int64_t target = nt > 1 ? RK_UNITS_PER_THREAD * (int64_t)nt : 1;
    const int64_t row_panels = ceil_div(M, mr), max_p = max_i64(1, u->mc / mr);
    /* few rows (a 7 x 7 image's four panels) and a B read from memory: one row block, the
       threads splitting the columns, so each B value is read from memory once rather than once
       per row block (the A block, packed again for every column unit, is the smaller) */
    const int one_block = row_panels <= RK_FEW_ROW_PANELS && op->bpacked != NULL &&
                          K * N > RK_FEW_ROWS_MIN_B;
    const int nt_blocks = one_block ? 1 : nt; /* nt may shrink below; the block starts are computed again */
    sh.nrow = row_blocks(row_panels, max_p, nt_blocks, NULL);
    sh.nu = balanced_block(w_eff, u->nc, nr);
    while (sh.nrow * ceil_div(w_eff, sh.nu) < target &&
           (sh.nu > 4 * nr || (sh.nu > nr && sh.nrow * ceil_div(w_eff, sh.nu) < nt)))
        sh.nu = balanced_block(w_eff, ceil_div(sh.nu, 2 * nr) * nr, nr);
    int64_t nunits = sh.nrow * ceil_div(w_eff, sh.nu);
    if (nt > nunits)
        nt = (int)nunits;

    sh.nslabs = ceil_div(N, slab_w);
    sh.items_full = slab_pack_items(&sh, w_eff) + slab_units(&sh, w_eff);
    {
        const int64_t last_w = N - (sh.nslabs - 1) * slab_w;
        sh.total_items = (sh.nslabs - 1) * sh.items_full + slab_pack_items(&sh, last_w) + slab_units(&sh, last_w);
    }

    /* the tallest row block (max_p panels at most), times kc; a multiple of 16 floats keeps
       each buffer 64-byte aligned, and the row block starts follow the A buffers */
    sh.a_stride = (size_t)(ceil_div(min_i64(max_p, row_panels) * mr * sh.kc, 16) * 16);
    size_t b_elems = op->bpacked != NULL ? 0 : (size_t)(ceil_div(sh.slab_wp * K, 16) * 16);
    size_t f_elems = b_elems + sh.a_stride * (size_t)nt;
    float *scratch = (float *)alloc_aligned(f_elems * sizeof(float) + (size_t)(sh.nrow + 1) * sizeof(int64_t));
    if (!scratch)
        return 1;
    sh.bp = op->bpacked != NULL ? (float *)op->bpacked : scratch;
    sh.ap = scratch + b_elems;
    int64_t *row_start = (int64_t *)(void *)(scratch + f_elems);
    row_blocks(row_panels, max_p, nt_blocks, row_start);
    sh.row_start = row_start;
    atomic_init(&sh.next, 0);
    atomic_init(&sh.done, 0);
    atomic_init(&sh.waiters, 0);

    gemm_worker workers[RK_MAX_THREADS];
    for (int i = 0; i < nt; i++) {
        workers[i].sh = &sh;
        workers[i].id = i;
    }
    if (nt > 1) {
        if (pthread_mutex_init(&sh.mu, NULL) != 0) {
            nt = 1;
        } else if (pthread_cond_init(&sh.cv, NULL) != 0) {
            pthread_mutex_destroy(&sh.mu);
            nt = 1;
        }
    }
    if (nt > 1) {
        /* Work is claimed dynamically: a block the pool runs late (or the caller runs after
           its own) finds nothing left, so any number of participants stays correct. */
        rk_run_tasks(gemm_worker_run, workers, sizeof(gemm_worker), nt);
        pthread_cond_destroy(&sh.cv);
        pthread_mutex_destroy(&sh.mu);
    } else {
        sh.single = 1;
        gemm_worker_run(&workers[0]);
    }
    free(scratch);
    return 0;
}

/* The K blocks and the slab of rk_gemm_run when all of N is one slab: block pc at
   pc * ceil(n / nr) * nr floats, its micro-panels nr * kc floats apart. */
int64_t rk_gemm_packed_b_floats(const ukr_desc *u, int64_t k, int64_t n)
{
    return ceil_div(n, u->nr) * u->nr * k;
}

int64_t rk_gemm_packed_b_kc(const ukr_desc *u, int64_t k)
{
    return balanced_block(k, u->kc, 4);
}

int rk_gemm_in_place(const ukr_desc *u, int64_t k)
{
    return k > 0 && k <= u->kc;
}

void rk_gemm_pack_b(const gemm_op *op, float *dst)
{
    const int64_t kc = rk_gemm_packed_b_kc(op->u, op->k);
    const int64_t width = ceil_div(op->n, op->u->nr) * op->u->nr;
    for (int64_t pc = 0; pc < op->k; pc += kc)
        rk_gemm_pack_b_block(op, 0, op->n, pc, min_i64(kc, op->k - pc), dst + pc * width);
}
