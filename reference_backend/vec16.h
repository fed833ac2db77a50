/*
 * 16-lane (AVX-512F) forms of the 4-lane math in vec4.h that give its bits: the same
 * operations in the same order, products and sums apart (the sources are compiled without
 * contracting them into fused multiply-adds), so a result does not depend on which path or
 * which lane computed it.
 */
#ifndef RK_VEC16_H
#define RK_VEC16_H

#include "kernels_internal.h"

#if defined(RK_X86_AVX512)

/* The 4-lane code's exp_v4 (vec4.h) on 16 lanes, operation for operation (products
   and sums apart, the same clamps and the same two power-of-two factors): the same bits. */
__attribute__((target("avx512f"), always_inline)) static inline __m512 exp16_v4_bits(__m512 x)
{
    const __m512 magic = _mm512_set1_ps(12582912.0f);
    const __m512i magic_bits = _mm512_set1_epi32(0x4B400000), bias = _mm512_set1_epi32(127);
    x = _mm512_max_ps(_mm512_set1_ps(-104.0f), x);     /* a NaN in x passes, as vf4_max's second operand */
    x = _mm512_min_ps(_mm512_set1_ps(89.0f), x);
    const __m512 n = _mm512_sub_ps(_mm512_add_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)), magic), magic);
    __m512 r = _mm512_sub_ps(x, _mm512_mul_ps(n, _mm512_set1_ps(0.693145751953125f)));
    r = _mm512_sub_ps(r, _mm512_mul_ps(n, _mm512_set1_ps(1.428606765330187e-06f)));
    __m512 p = _mm512_set1_ps(1.0f / 5040.0f);
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(1.0f / 720.0f));
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(1.0f / 120.0f));
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(1.0f / 24.0f));
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(1.0f / 6.0f));
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(0.5f));
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(1.0f));
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(1.0f));
    const __m512 th = _mm512_add_ps(_mm512_mul_ps(n, _mm512_set1_ps(0.5f)), magic);
    const __m512 t2 = _mm512_add_ps(_mm512_sub_ps(n, _mm512_sub_ps(th, magic)), magic);
    const __m512i e1 = _mm512_slli_epi32(_mm512_add_epi32(_mm512_sub_epi32(_mm512_castps_si512(th), magic_bits), bias), 23);
    const __m512i e2 = _mm512_slli_epi32(_mm512_add_epi32(_mm512_sub_epi32(_mm512_castps_si512(t2), magic_bits), bias), 23);
    return _mm512_mul_ps(_mm512_mul_ps(p, _mm512_castsi512_ps(e1)), _mm512_castsi512_ps(e2));
}

#endif
#endif
