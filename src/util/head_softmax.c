/*
 * head_softmax.c — an attention head's softmax weights over rows of scores in cache (AVX-512).
 *
 * Between its two products the fused attention (runtime/cpu_gemm.c) turns each row of the
 * scores C into the softmax's weights. The JIT's kernel for that (lower/attention_lib.c:
 * weights_row) serves any score function F, but pays a loop nest per row: item offsets
 * reloaded, three lanes loops each with its set-up and a masked tail, and its exp a call of
 * the JIT's vector routine. On MNLI's lengths (rows of ~45 scores) it was 29% of the
 * short-item attention (bench/NOTES.md), most of it per-row overhead, not exp. Where F is the
 * product itself, or the product times or over a constant (CoRa's module, SDPA without a mask,
 * q kᵀ / sqrt(d) written out), this
 * file does the row instead: the scale and the max in one pass, exp and its sum in a second,
 * the scale by 1/l in a third, each a plain loop over whole vectors of the row that L1 holds,
 * four rows at a time, their passes interleaved (softmax_rows).
 *
 * Semantics are weights_row's: x = s * scale or s / scale (rounded once, as F's f32 op is), the
 * shift m' is the row's max (0 where it is -inf), p = exp(x - m'), l = sum of p, P = p * (1/l),
 * and where l is 0 (every score -inf) the row is NaN, or 0 in the safe form (PyTorch's SDPA).
 * In a 16-bit attention the scores are values of 16-bit ops (the guide): the product is
 * rounded to the format, and so is x, to nearest even (f16 by vcvtps2ph, bf16 by integer
 * operations, NaN kept quiet), as the kernel's round_bf16/round_f16 do; the weights, their max
 * and sum stay f32.
 * exp is this file's own (below): within 2 ulp of the correctly rounded value, exactly 0 at -inf
 * and below f32's range, inf above it, NaN for NaN. The sum's order is fixed by the row's
 * length alone (16 lanes, then the lanes' tree), so results do not depend on the threads.
 */
#include <math.h>

#include "util.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#define HS_TARGET __attribute__((target("avx512f")))

/* exp(x) lane by lane: x = n ln2 + r with |r| <= ln2/2 (ln2 in two parts, so r is exact to a
 * few ulp), exp(r) by its Taylor polynomial to r^7 (error under 1e-8 relative on that range),
 * times 2^n by scalef, which rounds to the denormals and to 0 below them, and to inf above
 * f32's range. x is clamped to [-104, 89] first: exp is 0 below (f32's least denormal is
 * e^-103.3) and inf above, and -inf must give 0, not the NaN of -inf - (-inf). A NaN passes the
 * clamp (max and min return their second operand for a NaN) and stays NaN. */
HS_TARGET static inline __m512 exp16(__m512 x) {
    x = _mm512_min_ps(_mm512_set1_ps(89.0f), _mm512_max_ps(_mm512_set1_ps(-104.0f), x));
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693145751953125f), x); /* ln2's upper bits: n·hi is exact */
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.42860682030941723e-6f), r);
    __m512 p = _mm512_set1_ps(1.0f / 5040.0f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 720.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    return _mm512_scalef_ps(p, n);
}

/* x rounded to the 16-bit format `round` (HS_ROUND_BF16, HS_ROUND_F16) and widened back: to
 * nearest even, overflow to inf, subnormals kept, a NaN stays a (quiet) NaN. bf16 adds 0x7FFF
 * plus the lowest kept bit and clears the low half; a NaN's quiet bit is set first, or a
 * payload in the low half alone would carry into an infinity. */
HS_TARGET static inline __m512 round16(__m512 x, int round) {
    if (round == HS_ROUND_F16)
        return _mm512_cvtph_ps(_mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    __m512i u = _mm512_castps_si512(x);
    __m512i r = _mm512_add_epi32(u, _mm512_add_epi32(_mm512_set1_epi32(0x7FFF),
                                                     _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1))));
    r = _mm512_mask_or_epi32(r, _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), u, _mm512_set1_epi32(0x400000));
    return _mm512_castsi512_ps(_mm512_and_si512(r, _mm512_set1_epi32((int)0xFFFF0000u)));
}

/* The mask of the first `left` lanes of a vector (all of them from 16 on). */
static inline __mmask16 lanes(int64_t left) {
    return (__mmask16)(left >= 16 ? 0xFFFF : (1u << left) - 1);
}

/* R rows of n scores (ldc apart), in place, their passes interleaved; R is a constant where
 * this is inlined (1, or HS_ROWS). Each row's arithmetic is the same, in the same order,
 * whatever R, so the bits are; what R changes is that the rows' horizontal max and sum, 1/l
 * and exp chains are independent of each other, where one short row (an attention's ~35
 * scores: two or three vectors) is a chain of latencies: four rows at a time took the
 * encoder's softmax rows from 1.8% of its samples to 1.1% (bench/NOTES.md). */
#define HS_ROWS 4
#define HS_UNROLL _Pragma("GCC unroll 4") /* the rows' vectors in registers, not an array */
HS_TARGET static inline __attribute__((always_inline)) void softmax_rows(float *c, int64_t ldc, int64_t n, float scale,
                                                                         bool divide, bool safe, int round, int R) {
    __m512 vs = _mm512_set1_ps(scale), vm[HS_ROWS], vl[HS_ROWS], sh[HS_ROWS];
    HS_UNROLL
    for (int r = 0; r < R; r++) vm[r] = _mm512_set1_ps(-INFINITY), vl[r] = _mm512_setzero_ps();
    for (int64_t j = 0; j < n; j += 16) { /* x = s * scale (or s / scale), its max */
        __mmask16 k = lanes(n - j);
        HS_UNROLL
        for (int r = 0; r < R; r++) {
            float *row = c + r * ldc;
            __m512 s = _mm512_maskz_loadu_ps(k, row + j);
            if (round) s = round16(s, round);
            __m512 x = scale == 1.0f ? s : divide ? _mm512_div_ps(s, vs) : _mm512_mul_ps(s, vs);
            if (round && scale != 1.0f) x = round16(x, round);
            if (scale != 1.0f || round) _mm512_mask_storeu_ps(row + j, k, x);
            vm[r] = _mm512_mask_max_ps(vm[r], k, vm[r], x);
        }
    }
    HS_UNROLL
    for (int r = 0; r < R; r++) {
        float m = _mm512_reduce_max_ps(vm[r]);
        sh[r] = _mm512_set1_ps(m == -INFINITY ? 0.0f : m);
    }
    for (int64_t j = 0; j < n; j += 16) { /* p = exp(x - m'), their sum */
        __mmask16 k = lanes(n - j);
        HS_UNROLL
        for (int r = 0; r < R; r++) {
            float *row = c + r * ldc;
            __m512 p = exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, row + j), sh[r]));
            _mm512_mask_storeu_ps(row + j, k, p);
            vl[r] = _mm512_mask_add_ps(vl[r], k, vl[r], p);
        }
    }
    HS_UNROLL
    for (int r = 0; r < R; r++) {
        float l = _mm512_reduce_add_ps(vl[r]);
        sh[r] = _mm512_set1_ps(safe && l == 0.0f ? 0.0f : 1.0f / l);
    }
    for (int64_t j = 0; j < n; j += 16) { /* P = p / l */
        __mmask16 k = lanes(n - j);
        HS_UNROLL
        for (int r = 0; r < R; r++) {
            float *row = c + r * ldc;
            _mm512_mask_storeu_ps(row + j, k, _mm512_mul_ps(_mm512_maskz_loadu_ps(k, row + j), sh[r]));
        }
    }
}

HS_TARGET static void softmax_four(float *c, int64_t ldc, int64_t n, float scale, bool divide, bool safe, int round) {
    softmax_rows(c, ldc, n, scale, divide, safe, round, HS_ROWS);
}

HS_TARGET static void softmax_one(float *c, int64_t n, float scale, bool divide, bool safe, int round) {
    softmax_rows(c, 0, n, scale, divide, safe, round, 1);
}

bool head_softmax_ok(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f");
}

void head_softmax_rows(int64_t m, int64_t n, float *c, int64_t ldc, float scale, bool divide, bool safe, int round) {
    if (n <= 0) return;
    int64_t i = 0;
    for (; i + HS_ROWS <= m; i += HS_ROWS) softmax_four(c + i * ldc, ldc, n, scale, divide, safe, round);
    for (; i < m; i++) softmax_one(c + i * ldc, n, scale, divide, safe, round);
}

#else

bool head_softmax_ok(void) {
    return false;
}

void head_softmax_rows(int64_t m, int64_t n, float *c, int64_t ldc, float scale, bool divide, bool safe, int round) {
    (void)m, (void)n, (void)c, (void)ldc, (void)scale, (void)divide, (void)safe, (void)round;
}

#endif
