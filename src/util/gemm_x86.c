/*
 * gemm_x86.c — the x86 micro-kernels of ragjit's own sgemm (gemm.c): AVX-512 and AVX2 + FMA.
 *
 * A micro-kernel multiplies a packed sliver of A (MR rows, p-major: a[p * MR + i]) by a packed
 * sliver of B (NR columns, p-major: b[p * NR + j]) over kc steps of the inner dimension and
 * writes the MR x NR block of C (row stride ldc) — or adds it to C when `load`. The whole
 * block lives in vector registers for the kc steps: each step loads NR floats of B (whole
 * vectors, aligned) and broadcasts MR floats of A, then does MR x NR / lanes independent
 * FMAs. The shapes fill the register file without spilling: AVX-512's 32 registers hold 14 x 2
 * accumulators, two vectors of B and a broadcast (14 x 32); AVX2's 16 hold 6 x 2 accumulators
 * (6 x 16). Enough independent FMAs (28, 12) cover the FMA latency (4 cycles) on both ports.
 *
 * Written with intrinsics inside functions compiled for their ISA (target attributes), so the
 * rest of ragjit builds for the baseline x86-64 and gemm.c picks a kernel by what the CPU
 * running it supports (__builtin_cpu_supports). Rows are spelled out by macros, not loops: the
 * accumulators must be named registers, never an array the compiler might keep in memory.
 */
#include "util.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#define A512_MR 14
#define A512_NR 32

/* Row r of the block: two accumulators (columns 0-15 and 16-31). */
#define R512_DECL(r) __m512 c##r##0 = _mm512_setzero_ps(), c##r##1 = _mm512_setzero_ps();
#define R512_STEP(r)                                                                                   \
    do {                                                                                               \
        __m512 ar = _mm512_set1_ps(a[r]);                                                              \
        c##r##0 = _mm512_fmadd_ps(ar, b0, c##r##0);                                                    \
        c##r##1 = _mm512_fmadd_ps(ar, b1, c##r##1);                                                    \
    } while (0)
#define R512_OUT(r)                                                                                    \
    do {                                                                                               \
        float *cr = c + (r) * ldc;                                                                     \
        if (load) c##r##0 = _mm512_add_ps(c##r##0, _mm512_loadu_ps(cr)),                               \
                  c##r##1 = _mm512_add_ps(c##r##1, _mm512_loadu_ps(cr + 16));                          \
        _mm512_storeu_ps(cr, c##r##0);                                                                 \
        _mm512_storeu_ps(cr + 16, c##r##1);                                                            \
    } while (0)
#define ROWS14(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11) X(12) X(13)
#define STEPS14(X) X(0); X(1); X(2); X(3); X(4); X(5); X(6); X(7); X(8); X(9); X(10); X(11); X(12); X(13)

__attribute__((target("avx512f"))) static void kernel_avx512(int64_t kc, const float *restrict a,
                                                             const float *restrict b, float *restrict c,
                                                             int64_t ldc, int load) {
    ROWS14(R512_DECL)
    for (int64_t p = 0; p < kc; p++) {
        __m512 b0 = _mm512_load_ps(b), b1 = _mm512_load_ps(b + 16);
        _mm_prefetch((const char *)(b + 8 * A512_NR), _MM_HINT_T0); /* the next slivers' rows, from L2 */
        _mm_prefetch((const char *)(b + 8 * A512_NR + 16), _MM_HINT_T0);
        STEPS14(R512_STEP);
        a += A512_MR;
        b += A512_NR;
    }
    STEPS14(R512_OUT);
}

#define A256_MR 6
#define A256_NR 16

#define R256_DECL(r) __m256 c##r##0 = _mm256_setzero_ps(), c##r##1 = _mm256_setzero_ps();
#define R256_STEP(r)                                                                                   \
    do {                                                                                               \
        __m256 ar = _mm256_broadcast_ss(a + (r));                                                      \
        c##r##0 = _mm256_fmadd_ps(ar, b0, c##r##0);                                                    \
        c##r##1 = _mm256_fmadd_ps(ar, b1, c##r##1);                                                    \
    } while (0)
#define R256_OUT(r)                                                                                    \
    do {                                                                                               \
        float *cr = c + (r) * ldc;                                                                     \
        if (load) c##r##0 = _mm256_add_ps(c##r##0, _mm256_loadu_ps(cr)),                               \
                  c##r##1 = _mm256_add_ps(c##r##1, _mm256_loadu_ps(cr + 8));                           \
        _mm256_storeu_ps(cr, c##r##0);                                                                 \
        _mm256_storeu_ps(cr + 8, c##r##1);                                                             \
    } while (0)
#define ROWS6(X) X(0) X(1) X(2) X(3) X(4) X(5)
#define STEPS6(X) X(0); X(1); X(2); X(3); X(4); X(5)

__attribute__((target("avx2,fma"))) static void kernel_avx2(int64_t kc, const float *restrict a,
                                                            const float *restrict b, float *restrict c,
                                                            int64_t ldc, int load) {
    ROWS6(R256_DECL)
    for (int64_t p = 0; p < kc; p++) {
        __m256 b0 = _mm256_load_ps(b), b1 = _mm256_load_ps(b + 8);
        _mm_prefetch((const char *)(b + 8 * A256_NR), _MM_HINT_T0);
        STEPS6(R256_STEP);
        a += A256_MR;
        b += A256_NR;
    }
    STEPS6(R256_OUT);
}

/* Blocking (gemm.c): kc steps of a sliver pair; a packed block of B (kc x nc) that L2 holds
 * while every sliver of A meets it (AVX-512 machines have 1-2 MiB of L2, AVX2 ones 0.5-1 MiB);
 * and mc rows of A packed at a time (the packed A block streams from L3, once per block of B). */
static const sgemm_kernel kernels[] = {
    {.name = "AVX-512 14x32", .isa = SGEMM_AVX512, .mr = A512_MR, .nr = A512_NR, .kc = 256, .mc = 1008,
     .nc = 512, .run = kernel_avx512},
    {.name = "AVX2 6x16", .isa = SGEMM_AVX2, .mr = A256_MR, .nr = A256_NR, .kc = 256, .mc = 1008, .nc = 256,
     .run = kernel_avx2},
};

const sgemm_kernel *sgemm_x86_kernel(int isa) {
    __builtin_cpu_init();
    if (isa == SGEMM_AVX512 && __builtin_cpu_supports("avx512f")) return &kernels[0];
    if (isa == SGEMM_AVX2 && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return &kernels[1];
    return NULL;
}

#else

const sgemm_kernel *sgemm_x86_kernel(int isa) {
    (void)isa;
    return NULL;
}

#endif
