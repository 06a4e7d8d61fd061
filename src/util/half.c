/*
 * half.c — the 16-bit float formats as storage: f16 (IEEE binary16) and bf16 (the top half of
 * an f32), converted to and from f32 with round-to-nearest-even.
 *
 * ragjit computes 16-bit tensors in f32 and rounds each stored value once (DESIGN.md §1), so
 * every layer that touches 16-bit data on the host — the reference interpreter, tensor
 * filling, .npy and the CLI's random inputs and comparisons — needs the same two scalar
 * conversions, and they must agree bit for bit with what the compiled kernels do (F16C's
 * vcvtps2ph with imm 4 = the MXCSR's nearest-even mode; the bf16 integer sequence the backends
 * emit). Written with integer operations so that no libgcc helper (__truncsfhf2) or compiler
 * _Float16 support is needed.
 *
 * f32 -> bf16: add 0x7FFF plus the lowest kept bit, then keep the top 16 bits (ties go to the
 * even neighbour; overflow past the largest finite value carries into the exponent and gives
 * inf, as it should). NaN is kept a quiet NaN of the same sign rather than being rounded into
 * an infinity.
 * f32 -> f16: below 2^-14 the result is subnormal with a unit of 2^-24, which is exactly an f32
 * ulp at 0.5, so adding 0.5f lets the FPU's own nearest-even rounding do the work; above, the
 * same add-and-truncate as bf16 on the rebiased exponent; 65520 and above round to inf.
 *
 * Whole blocks of rows are converted too: a 16-bit matrix product widens its operands to f32
 * for sgemm (the runtime's GEMM loops, runtime/cpu_gemm.c) and rounds a fused attention's
 * output once. f16 goes through F16C (vcvtph2ps, vcvtps2ph with nearest even: the same bits
 * as the scalar code) where the CPU has it, bf16 through AVX2's integer operations (the scalar
 * sequence on 8 lanes), each compiled with a target attribute so that the rest builds for
 * baseline x86-64.
 */
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <immintrin.h>
#define HALF_F16C 1
#endif

#include "util.h"

static uint32_t f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float bits_f32(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

uint16_t half_from_f32(float f, bool bf16) {
    uint32_t u = f32_bits(f), sign = (u >> 16) & 0x8000, a = u & 0x7fffffffu;
    if (bf16) {
        if (a > 0x7f800000u) return (uint16_t)(sign | 0x7fc0 | ((a >> 16) & 0x3f));
        return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1)) >> 16);
    }
    if (a >= 0x7f800000u) /* inf stays inf; NaN stays a quiet NaN with its top payload bits */
        return (uint16_t)(sign | 0x7c00 | (a > 0x7f800000u ? 0x200 | ((a >> 13) & 0x3ff) : 0));
    if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00); /* >= 65520: rounds to inf */
    if (a < 0x38800000u) /* below 2^-14: subnormal or zero */
        return (uint16_t)(sign | (f32_bits(bits_f32(a) + 0.5f) - 0x3f000000u));
    a += ((uint32_t)(15 - 127) << 23) + 0xfffu + ((a >> 13) & 1);
    return (uint16_t)(sign | (a >> 13));
}

float half_to_f32(uint16_t h, bool bf16) {
    if (bf16) return bits_f32((uint32_t)h << 16);
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, e = (h >> 10) & 0x1f, m = h & 0x3ff;
    if (e == 0) { /* zero or subnormal: m * 2^-24, exact in f32 */
        float v = (float)m * 0x1p-24f;
        return bits_f32(f32_bits(v) | sign);
    }
    if (e == 31) /* inf; a NaN comes out quiet, as F16C's vcvtph2ps gives it (the kernels' widening) */
        return bits_f32(sign | 0x7f800000u | (m << 13) | (m ? 0x400000u : 0));
    return bits_f32(sign | ((e + 112) << 23) | (m << 13));
}

double half_round(double v, bool bf16) {
    return (double)half_to_f32(half_from_f32((float)v, bf16), bf16);
}

#ifdef HALF_F16C
__attribute__((target("avx,f16c"))) static void f16_row_to_f32(float *d, const uint16_t *s, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(d + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(s + i))));
    for (; i < n; i++) d[i] = half_to_f32(s[i], false);
}

__attribute__((target("avx,f16c"))) static void f16_row_from_f32(uint16_t *d, const float *s, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(d + i), _mm256_cvtps_ph(_mm256_loadu_ps(s + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; i++) d[i] = half_from_f32(s[i], false);
}

/* bf16 rows by AVX2, 8 elements a step: widening is a zero-extension and a shift; rounding is
 * the scalar code's integer sequence on every lane (add 0x7FFF plus the lowest kept bit; a NaN
 * instead gets its quiet bit and keeps its top payload bits), then the top halves packed. The
 * attention's 16-bit tiles are rows of a head's width (32 to 128 elements), which the scalar
 * loops, compiled for baseline x86-64, converted at a fraction of this speed (perf: the bf16
 * encoder spent 6% of its run in them). */
__attribute__((target("avx2"))) static void bf16_row_to_f32(float *d, const uint16_t *s, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(s + i)));
        _mm256_storeu_si256((__m256i *)(d + i), _mm256_slli_epi32(w, 16));
    }
    for (; i < n; i++) d[i] = half_to_f32(s[i], true);
}

__attribute__((target("avx2"))) static void bf16_row_from_f32(uint16_t *d, const float *s, int64_t n) {
    int64_t i = 0;
    const __m256i one = _mm256_set1_epi32(1), bias = _mm256_set1_epi32(0x7FFF), quiet = _mm256_set1_epi32(0x400000);
    for (; i + 8 <= n; i += 8) {
        __m256 x = _mm256_loadu_ps(s + i);
        __m256i u = _mm256_castps_si256(x);
        __m256i r = _mm256_add_epi32(u, _mm256_add_epi32(bias, _mm256_and_si256(_mm256_srli_epi32(u, 16), one)));
        __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(x, x, _CMP_UNORD_Q));
        r = _mm256_srli_epi32(_mm256_blendv_epi8(r, _mm256_or_si256(u, quiet), nan), 16);
        _mm_storeu_si128((__m128i *)(d + i),
                         _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1)));
    }
    for (; i < n; i++) d[i] = half_from_f32(s[i], true);
}

static bool has_avx2(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2");
}

/* CPUID and XGETBV directly: clang 14's __builtin_cpu_supports does not know "f16c". The
 * answer is kept (a benign race: every thread computes the same value). */
static bool has_f16c(void) {
    static _Atomic int known = -1;
    int k = known;
    if (k < 0) {
        unsigned a, b, c, d, lo = 0, hi = 0;
        k = __get_cpuid(1, &a, &b, &c, &d) && (c & bit_OSXSAVE) && (c & bit_AVX) && (c & bit_F16C);
        if (k) __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0)); /* the OS saves AVX state */
        (void)hi;
        k = k && (lo & 6) == 6;
        known = k;
    }
    return k;
}
#endif

void half_rows_to_f32(float *dst, int64_t ldd, const uint16_t *src, int64_t lds, int64_t rows, int64_t cols,
                      bool bf16) {
#ifdef HALF_F16C
    if (!bf16 && has_f16c()) {
        for (int64_t r = 0; r < rows; r++) f16_row_to_f32(dst + r * ldd, src + r * lds, cols);
        return;
    }
    if (bf16 && has_avx2()) {
        for (int64_t r = 0; r < rows; r++) bf16_row_to_f32(dst + r * ldd, src + r * lds, cols);
        return;
    }
#endif
    for (int64_t r = 0; r < rows; r++) {
        float *d = dst + r * ldd;
        const uint16_t *s = src + r * lds;
        if (bf16)
            for (int64_t c = 0; c < cols; c++) d[c] = bits_f32((uint32_t)s[c] << 16);
        else
            for (int64_t c = 0; c < cols; c++) d[c] = half_to_f32(s[c], false);
    }
}

void half_rows_from_f32(uint16_t *dst, int64_t ldd, const float *src, int64_t lds, int64_t rows, int64_t cols,
                        bool bf16) {
#ifdef HALF_F16C
    if (!bf16 && has_f16c()) {
        for (int64_t r = 0; r < rows; r++) f16_row_from_f32(dst + r * ldd, src + r * lds, cols);
        return;
    }
    if (bf16 && has_avx2()) {
        for (int64_t r = 0; r < rows; r++) bf16_row_from_f32(dst + r * ldd, src + r * lds, cols);
        return;
    }
#endif
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++) dst[r * ldd + c] = half_from_f32(src[r * lds + c], bf16);
}

/* The arguments of a cblas_sbgemm that ragjit's own kernels (amx.c, bf16dot.c) do not take
 * (column-major aside: A transposed, alpha != 1, beta != 0, k of 0), by the definition. */
void sbgemm_by_definition(int ta, int tb, int m, int n, int k, float alpha, const uint16_t *a, int lda,
                          const uint16_t *b, int ldb, float beta, float *c, int ldc) {
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            float s = 0;
            for (int p = 0; p < k; p++)
                s += half_to_f32(a[ta == BLAS_NO_TRANS ? i * lda + p : p * lda + i], true) *
                     half_to_f32(b[tb == BLAS_NO_TRANS ? p * ldb + j : j * ldb + p], true);
            c[i * ldc + j] = alpha * s + (beta == 0.0f ? 0.0f : beta * c[i * ldc + j]);
        }
}
