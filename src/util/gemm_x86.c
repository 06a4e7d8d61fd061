/*
 * gemm_x86.c — the x86 micro-kernels of ragjit's own sgemm (gemm.c): AVX-512 and AVX2 + FMA.
 *
 * A micro-kernel multiplies a sliver of A (MR rows) by a packed sliver of B (NR columns,
 * p-major: b[p * NR + j]) over kc steps of the inner dimension and writes the MR x NR block of
 * C (row stride ldc), or adds it to C when `load`. The whole block lives in vector registers
 * for the kc steps: each step loads NR floats of B (whole aligned vectors) and broadcasts MR
 * floats of A, then does MR x NR / lanes independent FMAs. The shapes fill the register file
 * without spilling: AVX-512's 32 registers hold 14 x 2 accumulators, two vectors of B and a
 * broadcast (14 x 32); AVX2's 16 hold 6 x 2 accumulators (6 x 16). Enough independent FMAs
 * (28, 12) cover the FMA latency (4 cycles) on both ports.
 *
 * Each comes twice: reading A packed (p-major: a[p * MR + r]), and reading A's rows in place.
 * Packing A transposes it element by element, which costs as much as the product itself when
 * few slivers of B meet each sliver of A (N of 32 to 64: per-item products, a head's width);
 * reading 14 rows in place costs nothing when A's rows are in cache, which in ragjit's chunks
 * they are (at W7's shape the in-place kernel also ran 5-10% faster than the packed one).
 *
 * And each of those twice again: storing the whole block, or only its first h rows and w
 * columns (at the edges of C) with masked loads and stores, which the zero-padded slivers
 * make exact and which save the copy through a buffer that made a 35 x 32 x 35 product take
 * 1.25 times as long (bench/NOTES.md).
 *
 * Written with intrinsics inside functions compiled for their ISA (target attributes), so the
 * rest of ragjit builds for the baseline x86-64 and gemm.c picks a kernel by what the CPU
 * running it supports (__builtin_cpu_supports). One macro spells every kernel; rows are
 * spelled out by macros, not loops: the accumulators must be named registers, never an array
 * the compiler might keep in memory.
 */
#include "util.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

/* Where the kernels read A: packed (row r of step p at a[p * MR + r]), or in place from A's
 * rows (row r at a + r lda, steps contiguous), through five row pointers each three rows
 * apart, so that every read is a base register plus 0, 1 or 2 times lda (one index register)
 * and a step advances five pointers, not fourteen. */
#define PACKED_SETUP(MR) (void)lda;
#define PACKED_AT(r) a[r]
#define PACKED_NEXT(MR) a += (MR)
#define ROWS_SETUP(MR)                                                                                 \
    const int64_t l = lda * (int64_t)sizeof(float);                                                    \
    const char *q0 = (const char *)a, *q3 = q0 + 3 * l * (3 < (MR)), *q6 = q0 + 6 * l * (6 < (MR));    \
    const char *q9 = q0 + 9 * l * (9 < (MR)), *q12 = q0 + 12 * l * (12 < (MR));
#define ROWS_AT(r) (*(const float *)(QB_##r + OFF_##r * l))
#define ROWS_NEXT(MR) q0 += sizeof(float), q3 += sizeof(float), q6 += sizeof(float), q9 += sizeof(float), \
                      q12 += sizeof(float)
#define QB_0 q0
#define QB_1 q0
#define QB_2 q0
#define QB_3 q3
#define QB_4 q3
#define QB_5 q3
#define QB_6 q6
#define QB_7 q6
#define QB_8 q6
#define QB_9 q9
#define QB_10 q9
#define QB_11 q9
#define QB_12 q12
#define QB_13 q12
#define OFF_0 0
#define OFF_1 1
#define OFF_2 2
#define OFF_3 0
#define OFF_4 1
#define OFF_5 2
#define OFF_6 0
#define OFF_7 1
#define OFF_8 2
#define OFF_9 0
#define OFF_10 1
#define OFF_11 2
#define OFF_12 0
#define OFF_13 1

/* Row r of the block: two accumulators of LANES columns each. V and the V... operations are
 * the ISA's vectors, defined around each pair of kernels below, as A_AT is around each one. */
#define R_DECL(r, P) V c##r##0 = VZERO(), c##r##1 = VZERO();
#define R_STEP(r, A_AT)                                                                                \
    do {                                                                                               \
        V ar = VSET1(A_AT(r));                                                                         \
        c##r##0 = VFMA(ar, b0, c##r##0);                                                               \
        c##r##1 = VFMA(ar, b1, c##r##1);                                                               \
    } while (0)
#define R_OUT(r, P)                                                                                    \
    do {                                                                                               \
        float *cr = c + (r) * ldc;                                                                     \
        if (load) c##r##0 = VADD(c##r##0, VLOADU(cr)), c##r##1 = VADD(c##r##1, VLOADU(cr + LANES));    \
        VSTOREU(cr, c##r##0);                                                                          \
        VSTOREU(cr + LANES, c##r##1);                                                                  \
    } while (0)
/* At an edge of C: the first h rows, the first w columns (masked loads and stores, which
 * touch no memory in the lanes they leave out). */
#define R_OUT_EDGE(r, P)                                                                               \
    do {                                                                                               \
        if ((r) >= h) break;                                                                           \
        float *cr = c + (r) * ldc;                                                                     \
        if (load) c##r##0 = VADD(c##r##0, VLOADM(cr, m0)), c##r##1 = VADD(c##r##1, VLOADM(cr + LANES, m1)); \
        VSTOREM(cr, m0, c##r##0);                                                                      \
        VSTOREM(cr + LANES, m1, c##r##1);                                                              \
    } while (0)
#define FULL_PRE (void)h, (void)w;
#define EDGE_PRE VMASK m0 = VMASK_OF(w), m1 = VMASK_OF(w - LANES);
/* X(r, P) for each row r: P is what X reads A by (PACKED_AT, ROWS_AT) */
#define ROWS14(X, P) X(0, P) X(1, P) X(2, P) X(3, P) X(4, P) X(5, P) X(6, P) X(7, P) X(8, P) X(9, P) X(10, P) \
    X(11, P) X(12, P) X(13, P)
#define STEPS14(X, P) X(0, P); X(1, P); X(2, P); X(3, P); X(4, P); X(5, P); X(6, P); X(7, P); X(8, P); X(9, P); \
    X(10, P); X(11, P); X(12, P); X(13, P)
#define ROWS6(X, P) X(0, P) X(1, P) X(2, P) X(3, P) X(4, P) X(5, P)
#define STEPS6(X, P) X(0, P); X(1, P); X(2, P); X(3, P); X(4, P); X(5, P)

/* A kernel of MR rows (ROWS and STEPS spell them) and 2 LANES columns, reading A as A_AT says,
 * writing C as OUT does. */
#define KERNEL(name, isa, MR, ROWS, STEPS, SETUP, AT, NEXT, PRE, OUT)                                      \
    __attribute__((target(isa))) static void name(int64_t kc, const float *restrict a, int64_t lda,    \
                                                  const float *restrict b, float *restrict c,          \
                                                  int64_t ldc, int load, int h, int w) {                \
        SETUP(MR)                                                                                      \
        ROWS(R_DECL, AT)                                                                               \
        for (int64_t p = 0; p < kc; p++) {                                                             \
            V b0 = VLOAD(b), b1 = VLOAD(b + LANES);                                                    \
            _mm_prefetch((const char *)(b + 16 * LANES), _MM_HINT_T0); /* the sliver's next rows */    \
            _mm_prefetch((const char *)(b + 16 * LANES + 16), _MM_HINT_T0);                            \
            STEPS(R_STEP, AT);                                                                         \
            NEXT(MR);                                                                                  \
            b += 2 * LANES;                                                                            \
        }                                                                                              \
        PRE                                                                                            \
        STEPS(OUT, AT);                                                                                \
    }

/* The four kernels of an ISA: A packed or in place, C whole or at an edge. */
#define KERNELS(packed, rows, packed_edge, rows_edge, isa, MR, ROWS, STEPS)                           \
    KERNEL(packed, isa, MR, ROWS, STEPS, PACKED_SETUP, PACKED_AT, PACKED_NEXT, FULL_PRE, R_OUT)        \
    KERNEL(packed_edge, isa, MR, ROWS, STEPS, PACKED_SETUP, PACKED_AT, PACKED_NEXT, EDGE_PRE, R_OUT_EDGE) \
    KERNEL(rows, isa, MR, ROWS, STEPS, ROWS_SETUP, ROWS_AT, ROWS_NEXT, FULL_PRE, R_OUT)                \
    KERNEL(rows_edge, isa, MR, ROWS, STEPS, ROWS_SETUP, ROWS_AT, ROWS_NEXT, EDGE_PRE, R_OUT_EDGE)

#define V __m512
#define LANES 16
#define VZERO _mm512_setzero_ps
#define VSET1 _mm512_set1_ps
#define VFMA _mm512_fmadd_ps
#define VADD _mm512_add_ps
#define VLOAD _mm512_load_ps
#define VLOADU _mm512_loadu_ps
#define VSTOREU _mm512_storeu_ps
#define VMASK __mmask16
#define VMASK_OF(n) ((__mmask16)((n) >= 16 ? 0xFFFF : (n) <= 0 ? 0 : (1u << (n)) - 1))
#define VLOADM(p, m) _mm512_maskz_loadu_ps(m, p)
#define VSTOREM(p, m, v) _mm512_mask_storeu_ps(p, m, v)
KERNELS(kernel_avx512, rows_avx512, edge_avx512, rows_edge_avx512, "avx512f", 14, ROWS14, STEPS14)
#undef V
#undef LANES
#undef VZERO
#undef VSET1
#undef VFMA
#undef VADD
#undef VLOAD
#undef VLOADU
#undef VSTOREU
#undef VMASK
#undef VMASK_OF
#undef VLOADM
#undef VSTOREM

#define V __m256
#define LANES 8
#define VZERO _mm256_setzero_ps
#define VSET1 _mm256_set1_ps
#define VFMA _mm256_fmadd_ps
#define VADD _mm256_add_ps
#define VLOAD _mm256_load_ps
#define VLOADU _mm256_loadu_ps
#define VSTOREU _mm256_storeu_ps
#define VMASK __m256i
#define VMASK_OF(n) _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7))
#define VLOADM(p, m) _mm256_maskload_ps(p, m)
#define VSTOREM(p, m, v) _mm256_maskstore_ps(p, m, v)
KERNELS(kernel_avx2, rows_avx2, edge_avx2, rows_edge_avx2, "avx2,fma", 6, ROWS6, STEPS6)

/* Blocking (gemm.c): kc steps of a sliver pair; a packed block of B (kc x nc) that L2 holds
 * while every sliver of A meets it (AVX-512 machines have 1-2 MiB of L2, AVX2 ones 0.5-1 MiB);
 * and mc rows of A packed at a time (the packed A block streams from L3, once per block of B). */
static const sgemm_kernel kernels[] = {
    {.name = "AVX-512 14x32", .isa = SGEMM_AVX512, .mr = 14, .nr = 32, .kc = 256, .mc = 1008,
     .nc = 512, .run = kernel_avx512, .rows = rows_avx512,
     .run_edge = edge_avx512, .rows_edge = rows_edge_avx512},
    {.name = "AVX2 6x16", .isa = SGEMM_AVX2, .mr = 6, .nr = 16, .kc = 256, .mc = 1008, .nc = 256,
     .run = kernel_avx2, .rows = rows_avx2, .run_edge = edge_avx2, .rows_edge = rows_edge_avx2},
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
