/*
 * The per-step thread decisions of a network's compiled program: how many threads each fused
 * step runs on, decided once when the program is compiled or loaded, for a pool its execute
 * holds (rk_pool_hold: workers spinning between the steps, a hand-off of about a microsecond).
 * The cost model is the step's work over the work that pays one more hot thread
 * (RK_STEP_*_PER_THREAD), capped by the parts the kernel can split the step into, so that no
 * step takes more threads than its work and its shape can use however many cores there are:
 *   GEMM (convolution, fully connected of many rows): row micro-panels times column micro-panels
 *     of the output (a 7 x 7 image has four row panels of 14 pixels: its parts are mostly
 *     columns, i.e. output channels);
 *   depthwise: output rows times channel blocks;
 *   Winograd (3 x 3 stride-1 convolutions, winograd.c): its products' multiply-adds, parts of one
 *     row micro-panel of tiles times column micro-panels;
 *   grouped: output rows;
 *   fully connected of few rows (and pointwise convolutions of few pixels): the weights
 *     streamed once, 16 output columns a part.
 * A new kernel decides the same way and takes the count it is given (the kernels' `threads`
 * argument; 0 keeps the per-call decision of a lone layer).
 */
#include "kernels_internal.h"

static int capped(double work, double per_thread, int64_t parts)
{
    int nt = rk_threads_for(work, per_thread);
    return parts < nt ? (int)max_i64(1, parts) : nt;
}

static int gemm_step_threads(int64_t m, int64_t n, int64_t k)
{
    const ukr_desc *u = rk_gemm_kernel();
    const double flops = 2.0 * (double)m * (double)n * (double)k;
    return capped(flops, RK_STEP_GEMM_MIN_FLOP_PER_THREAD, ceil_div(m, u->mr) * ceil_div(n, u->nr));
}

int rk_depthwise_step_threads(const rk_conv_params *p, int64_t mult)
{
    const double work = 2.0 * (double)(p->n * p->oh) * (double)p->ow * (double)(p->c * mult) *
                        (double)(p->kh * p->kw);
    /* larger windows do more multiply-adds per byte the step reads from the other cores'
       caches: a thread pays from proportionally fewer */
    const double taps = (double)(p->kh * p->kw), per = taps > 9.0 ? 9.0 / taps : 1.0;
    return capped(work, RK_STEP_DEPTHWISE_MIN_FLOP_PER_THREAD * per, rk_depthwise_parts(p, mult));
}

int rk_conv2d_step_threads(const rk_conv_params *p, int64_t o, int64_t groups)
{
    if (groups == p->c && groups > 1)
        return rk_depthwise_step_threads(p, o / p->c);
    if (groups > 1) {
        const double work = 2.0 * (double)(p->n * p->oh) * (double)p->ow * (double)o *
                            (double)(p->kh * p->kw) * (double)(p->c / groups);
        return capped(work, RK_STEP_SMALL_MIN_WORK_PER_THREAD, p->n * p->oh);
    }
    if (rk_conv_streams_weights(p))
        return rk_fully_connected_step_threads(p->n * p->h * p->w, p->c, o);
    const int tile = rk_winograd_tile(p, o);
    if (tile != 0) {
        /* the Winograd convolution (the form a compiled step's constant filter takes): its
           products' multiply-adds, parts of one micro-panel of tiles by column micro-panels */
        const ukr_desc *u = rk_gemm_kernel();
        const int64_t a = tile + 2, tiles = p->n * ceil_div(p->oh, tile) * ceil_div(p->ow, tile);
        const double flops = 2.0 * (double)(a * a) * (double)tiles * (double)p->c * (double)o;
        return capped(flops, RK_STEP_GEMM_MIN_FLOP_PER_THREAD,
                      ceil_div(tiles, u->mr) * ceil_div(o, u->nr));
    }
    return gemm_step_threads(p->n * p->oh * p->ow, o, p->kh * p->kw * p->c);
}

int rk_fully_connected_step_threads(int64_t n, int64_t k, int64_t m)
{
    if (k > 0 && !rk_fully_connected_uses_packed(n))
        return capped((double)k * (double)m, RK_STEP_STREAM_MIN_WEIGHTS_PER_THREAD, ceil_div(m, 16));
    return gemm_step_threads(n, m, k);
}
