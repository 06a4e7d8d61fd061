/*
 * bf16dot.c — bf16 products by AVX512-BF16's VDPBF16PS (AMD Zen 4 on, Intel Cooper Lake): a
 * cblas_sbgemm of ragjit's own where the BLAS exports none and the CPU has no AMX (amx.c).
 *
 * One VDPBF16PS multiplies 16 pairs of bf16 by 16 pairs and adds each pair's two products to
 * an f32 lane: 32 multiply-adds an instruction where an f32 FMA does 16, at the same rate on
 * the CPUs that have it. bf16 products otherwise widen both operands to f32 for sgemm, which
 * costs the widening and then runs at the f32 rate.
 *
 * The scheme is gemm.c's, at half the steps: a micro-kernel keeps a 14 x 32 block of C in 28
 * registers over a block of the inner dimension; each step takes a pair of steps of k: two
 * vectors of B (32 columns, each column's two elements side by side, as the instruction pairs
 * them) and, per row of A, its two elements as one 32-bit broadcast straight from A's row
 * (read in place, seven row pointers two rows apart). B goes into that pair-interleaved layout
 * a block of 32 columns and KC steps at a time (16 KiB, on the stack: L1), zero past n and
 * past k; the rows of A past m (the last sliver) go through a zero-padded copy, and an odd k's
 * last step is a 16-bit load widened to a pair with a zero, so that nothing past a row is read
 * (0 times a NaN there would not be 0). The packed calls keep op(B) in the same layout for a
 * product's every chunk of rows (cpu_gemm.c), a block of 32 columns over all of k each.
 *
 * Numerics: each product of two bf16 is exact in f32; the instruction adds a pair's two
 * products to the accumulator, rounding to nearest even, treats subnormal inputs as zero and
 * flushes subnormal results (its documented behaviour, as AMX's TDPBF16PS and oneDNN's bf16
 * products, which PyTorch's CPU uses). Every element of C is one sum over k in the same order
 * whatever m is, so results do not depend on how the runtime cuts rows into chunks.
 *
 * RAGJIT_AVX512BF16=0 leaves bf16 products widened (bf16dot_sbgemm_get() NULL), as a CPU
 * without the instruction does.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

#if defined(__x86_64__) && defined(__GNUC__) && (__GNUC__ >= 11 || defined(__clang__))
#include <cpuid.h>
#include <immintrin.h>

#define DP_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))
enum { DP_MR = 14, DP_NR = 32, DP_KC = 256 /* steps of k a block: 128 pairs, 16 KiB of B */ };

/* Pairs of steps for k steps (an odd last step padded with a zero). */
static int64_t dp_pairs(int64_t k) { return (k + 1) / 2; }

/* op(B)'s columns [j0, j0 + 32) over steps [p0, p0 + kb) in the pair-interleaved layout: pair
 * q of column c at dst[q * 64 + 2 c + s] = op(B)[p0 + 2q + s][j0 + c]; zeros past n and kb. */
static void pack_b(bool tb, const uint16_t *b, int64_t ldb, int64_t n, int64_t j0, int64_t p0, int64_t kb,
                   uint16_t *dst) {
    memset(dst, 0, sizeof(uint16_t) * DP_NR * 2 * (size_t)dp_pairs(kb));
    for (int64_t c = 0; c < DP_NR && j0 + c < n; c++) {
        uint16_t *d = dst + 2 * c;
        if (tb) { /* column j of op(B) is row j of B: its steps are contiguous */
            const uint16_t *s = b + (j0 + c) * ldb + p0;
            int64_t p = 0;
            for (; p + 2 <= kb; p += 2) memcpy(d + (p / 2) * 64, s + p, 4);
            if (p < kb) d[(p / 2) * 64] = s[p];
        } else {
            for (int64_t p = 0; p < kb; p++) d[(p / 2) * 64 + (p & 1)] = b[(p0 + p) * ldb + j0 + c];
        }
    }
}

/* A pair of A's row as a broadcast: 32 bits at q (unaligned), or at a tail one element and a
 * zero. */
#define PAIR_AT(q) _mm512_set1_epi32(ld32(q))
#define HALF_AT(q) _mm512_set1_epi32((int32_t)ld16(q))
static inline int32_t ld32(const char *q) {
    int32_t v;
    memcpy(&v, q, 4);
    return v;
}
static inline uint16_t ld16(const char *q) {
    uint16_t v;
    memcpy(&v, q, 2);
    return v;
}

/* Rows 2i and 2i + 1 of the block: row 2i at r_i, row 2i + 1 one row (l bytes) past it. */
#define DP_STEP(i, AT)                                                                             \
    do {                                                                                           \
        __m512bh e = (__m512bh)AT(r##i), o = (__m512bh)AT(r##i + l);                               \
        c##i##e0 = _mm512_dpbf16_ps(c##i##e0, e, b0), c##i##e1 = _mm512_dpbf16_ps(c##i##e1, e, b1); \
        c##i##o0 = _mm512_dpbf16_ps(c##i##o0, o, b0), c##i##o1 = _mm512_dpbf16_ps(c##i##o1, o, b1); \
    } while (0)
#define DP_ALL(AT)                                                                                 \
    do {                                                                                           \
        DP_STEP(0, AT);                                                                            \
        DP_STEP(1, AT);                                                                            \
        DP_STEP(2, AT);                                                                            \
        DP_STEP(3, AT);                                                                            \
        DP_STEP(4, AT);                                                                            \
        DP_STEP(5, AT);                                                                            \
        DP_STEP(6, AT);                                                                            \
    } while (0)
#define DP_DECL(i) __m512 c##i##e0 = z, c##i##e1 = z, c##i##o0 = z, c##i##o1 = z
#define DP_PUT(i)                                                                                  \
    do {                                                                                           \
        dp_put(c##i##e0, c##i##e1, c + (2 * (i)) * ldc, 2 * (i) < h, load, m0, m1);                \
        dp_put(c##i##o0, c##i##o1, c + (2 * (i) + 1) * ldc, 2 * (i) + 1 < h, load, m0, m1);        \
    } while (0)

/* One row of C's block: its first columns by masks m0 (0-15) and m1 (16-31), added to what C
 * holds when `load`. */
DP_TARGET static inline void dp_put(__m512 v0, __m512 v1, float *c, bool row, int load, __mmask16 m0, __mmask16 m1) {
    if (!row) return;
    if (load) {
        v0 = _mm512_add_ps(v0, _mm512_maskz_loadu_ps(m0, c));
        v1 = _mm512_add_ps(v1, _mm512_maskz_loadu_ps(m1, c + 16));
    }
    _mm512_mask_storeu_ps(c, m0, v0);
    _mm512_mask_storeu_ps(c + 16, m1, v1);
}

/* C's block (rows h <= 14, columns w <= 32, row stride ldc) = (or += when load) A's 14 rows
 * (row stride lda, elements) times B's packed block over kb steps. */
DP_TARGET static void kernel(int64_t kb, const uint16_t *a, int64_t lda, const uint16_t *b, float *c, int64_t ldc,
                             int load, int h, int w) {
    const int64_t l = lda * (int64_t)sizeof(uint16_t);
    const char *r0 = (const char *)a, *r1 = r0 + 2 * l, *r2 = r0 + 4 * l, *r3 = r0 + 6 * l, *r4 = r0 + 8 * l,
               *r5 = r0 + 10 * l, *r6 = r0 + 12 * l;
    const __m512 z = _mm512_setzero_ps();
    DP_DECL(0);
    DP_DECL(1);
    DP_DECL(2);
    DP_DECL(3);
    DP_DECL(4);
    DP_DECL(5);
    DP_DECL(6);
    for (int64_t q = 0; q < kb / 2; q++, b += 64) {
        __m512bh b0 = (__m512bh)_mm512_loadu_si512(b), b1 = (__m512bh)_mm512_loadu_si512(b + 32);
        DP_ALL(PAIR_AT);
        r0 += 4, r1 += 4, r2 += 4, r3 += 4, r4 += 4, r5 += 4, r6 += 4;
    }
    if (kb & 1) { /* the last step alone: its pair's other half is zero in B, and not read in A */
        __m512bh b0 = (__m512bh)_mm512_loadu_si512(b), b1 = (__m512bh)_mm512_loadu_si512(b + 32);
        DP_ALL(HALF_AT);
    }
    __mmask16 m0 = (__mmask16)(w >= 16 ? 0xFFFF : (1u << w) - 1);
    __mmask16 m1 = (__mmask16)(w >= 32 ? 0xFFFF : w > 16 ? (1u << (w - 16)) - 1 : 0);
    DP_PUT(0);
    DP_PUT(1);
    DP_PUT(2);
    DP_PUT(3);
    DP_PUT(4);
    DP_PUT(5);
    DP_PUT(6);
}

/* C (m x n, row-major, ldc) = A (m x k, lda) op(B), op(B) for steps [p0, p0 + kb) given by
 * blk(j0) (its packed block of columns [j0, j0 + 32)), added to C when p0 > 0. edge: 14 x KC
 * elements of scratch for the last rows. */
typedef const uint16_t *block_fn(void *ctx, int64_t j0);
static void run_block(int64_t m, int64_t n, int64_t kb, int64_t p0, const uint16_t *a, int64_t lda, block_fn *blk,
                      void *bctx, float *c, int64_t ldc, uint16_t *edge) {
    for (int64_t j0 = 0; j0 < n; j0 += DP_NR) {
        const uint16_t *pb = blk(bctx, j0);
        int w = (int)(n - j0 < DP_NR ? n - j0 : DP_NR);
        for (int64_t i = 0; i < m; i += DP_MR) {
            int h = (int)(m - i < DP_MR ? m - i : DP_MR);
            const uint16_t *ai = a + i * lda + p0;
            int64_t la = lda;
            if (h < DP_MR) { /* the last rows: a copy with zero rows after them (made once a k block:
                              * only the last sliver of rows is short) */
                if (j0 == 0) {
                    memset(edge, 0, sizeof(uint16_t) * DP_MR * (size_t)kb);
                    for (int r = 0; r < h; r++) memcpy(edge + r * kb, ai + r * lda, sizeof(uint16_t) * (size_t)kb);
                }
                ai = edge, la = kb;
            }
            kernel(kb, ai, la, pb, c + i * ldc + j0, ldc, p0 > 0, h, w);
        }
    }
}

typedef struct pack_ctx {
    bool tb;
    const uint16_t *b;
    int64_t ldb, n, p0, kb;
    uint16_t *buf;
} pack_ctx;

static const uint16_t *pack_now(void *ctx, int64_t j0) {
    pack_ctx *p = ctx;
    pack_b(p->tb, p->b, p->ldb, p->n, j0, p->p0, p->kb, p->buf);
    return p->buf;
}

typedef struct packed_ctx {
    const uint16_t *packed;
    int64_t block, p0; /* a block's elements; the steps before this one */
} packed_ctx;

static const uint16_t *packed_at(void *ctx, int64_t j0) {
    const packed_ctx *p = ctx;
    return p->packed + (j0 / DP_NR) * p->block + (p->p0 / 2) * 64;
}

static void dp_sbgemm(int order, int ta, int tb, int m, int n, int k, float alpha, const uint16_t *a, int lda,
                      const uint16_t *b, int ldb, float beta, float *c, int ldc) {
    if (m <= 0 || n <= 0) return;
    if (order != BLAS_ROW_MAJOR || ta != BLAS_NO_TRANS || alpha != 1.0f || beta != 0.0f || k <= 0) {
        /* not what ragjit asks for (gemm_full: row-major, A as it is, C = A op(B)) */
        sbgemm_by_definition(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
        return;
    }
    uint16_t pb[DP_NR * DP_KC] __attribute__((aligned(64)));
    uint16_t edge[DP_MR * DP_KC];
    for (int64_t p0 = 0; p0 < k; p0 += DP_KC) {
        int64_t kb = k - p0 < DP_KC ? k - p0 : DP_KC;
        pack_ctx pc = {.tb = tb == BLAS_TRANS, .b = b, .ldb = ldb, .n = n, .p0 = p0, .kb = kb, .buf = pb};
        run_block(m, n, kb, p0, a, lda, pack_now, &pc, c, ldc, edge);
    }
}

/* The packed form of op(B) for many calls: blocks of 32 columns over all of k. */
static int64_t dp_packed_blocks(int64_t n, int64_t k) {
    (void)k;
    return (n + DP_NR - 1) / DP_NR;
}

static size_t dp_packed_bytes(int64_t n, int64_t k) {
    return (size_t)dp_packed_blocks(n, k) * DP_NR * 2 * (size_t)dp_pairs(k) * sizeof(uint16_t);
}

static void dp_pack_block(bool tb, int64_t n, int64_t k, const void *b, int64_t ldb, int64_t blk, void *packed) {
    if (blk * DP_NR >= n || k <= 0) return;
    pack_b(tb, b, ldb, n, blk * DP_NR, 0, k, (uint16_t *)packed + blk * DP_NR * 2 * dp_pairs(k));
}

static void dp_run_packed(int64_t m, int64_t n, int64_t k, const void *a, int64_t lda, const void *packed, float *c,
                          int64_t ldc) {
    if (m <= 0 || n <= 0) return;
    if (k <= 0) {
        for (int64_t i = 0; i < m; i++) memset(c + i * ldc, 0, sizeof(float) * (size_t)n);
        return;
    }
    uint16_t edge[DP_MR * DP_KC];
    for (int64_t p0 = 0; p0 < k; p0 += DP_KC) {
        int64_t kb = k - p0 < DP_KC ? k - p0 : DP_KC;
        packed_ctx pc = {.packed = packed, .block = DP_NR * 2 * dp_pairs(k), .p0 = p0};
        run_block(m, n, kb, p0, a, lda, packed_at, &pc, c, ldc, edge);
    }
}

static const sgemm_kernel dp_kern = {.name = "AVX512-BF16 14x32", .isa = SGEMM_AVX512_BF16, .mr = DP_MR,
                                     .nr = DP_NR, .packed_blocks = dp_packed_blocks,
                                     .packed_bytes = dp_packed_bytes, .pack_block = dp_pack_block,
                                     .run_packed = dp_run_packed};

/* CPUID leaf 7 subleaf 1: EAX bit 5 AVX512_BF16; AVX-512's state enabled by the OS is what
 * __builtin_cpu_supports("avx512f") checks. */
static bool dp_usable;
static void dp_probe(void) {
    const char *env = getenv("RAGJIT_AVX512BF16");
    if (env && !strcmp(env, "0")) return;
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("avx512f") || !__builtin_cpu_supports("avx512bw") ||
        !__builtin_cpu_supports("avx512vl"))
        return;
    unsigned eax, ebx, ecx, edx;
    dp_usable = __get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx) && (eax >> 5 & 1);
}

static pthread_once_t dp_once = PTHREAD_ONCE_INIT;

static const sgemm_kernel *dp_get(void) {
    pthread_once(&dp_once, dp_probe);
    return dp_usable ? &dp_kern : NULL;
}

sbgemm_fn *bf16dot_sbgemm_get(void) { return dp_get() ? dp_sbgemm : NULL; }

const sgemm_kernel *bf16dot_kernel(void) { return dp_get(); }

#else

sbgemm_fn *bf16dot_sbgemm_get(void) { return NULL; }

const sgemm_kernel *bf16dot_kernel(void) { return NULL; }

#endif
