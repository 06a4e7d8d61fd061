/*
 * head_gemm.c — an attention head's two products on short items (AVX-512): S = Q Kᵀ, O = P V.
 *
 * Per (item, head) the fused attention (runtime/cpu_gemm.c: attention_task) multiplies a few
 * dozen rows by a few dozen columns over 64 steps: MNLI's items are 9-128 tokens, CoLA's
 * 6-37. A BLAS call of that size is mostly its fixed costs and its packing: OpenBLAS's small
 * kernels and its packed path ran the CoRa module's attention at about 32 GFLOP/s on MNLI's
 * lengths, a fifth of what the same machine's projections reach, and ragjit's own sgemm
 * (gemm.c) wastes half of its 14 x 32 block on a 43 x 43 product. Here the block is 6 rows by
 * up to 64 columns (four vectors), narrowed to the product's width, and nothing is packed but
 * K, transposed once per call into the caller's scratch (k x n, n rounded up to 16, zeros
 * after n) so that a step of S's block reads whole vectors; P V reads V's rows in place (a
 * step is one row of V: 64 contiguous floats). A's rows (Q's, or P's in C) are read in place
 * too; rows past the block's last read row 0 again and are not stored. On MNLI's lengths the
 * attention alone ran 1.13-1.16x faster than through OpenBLAS (bench/NOTES.md); from 128 keys
 * on, the own sgemm's larger blocks win (SQuAD, RACE: 0.96-0.97x with this kernel instead).
 *
 * Results do not depend on the thread count or on where the rows start: every element of C is
 * one sum over k in order 0, 1, ..., k-1 (fused multiply-adds), whatever the block's shape.
 * Without AVX-512 head_gemm_ok() is false and the caller keeps its BLAS.
 */
#include "util.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#define HG_MR 6 /* rows of a block: 6 x 4 accumulators, 4 of B and a broadcast fit 32 registers */

/* The block's row r: a pointer into A (row 0 again past the block's h rows). */
#define HG_ROWPTR(r) const float *a##r = a + (int64_t)((r) < h ? (r) : 0) * lda;
#define HG_DECL(r) __m512 c##r##0 = _mm512_setzero_ps(), c##r##1 = c##r##0, c##r##2 = c##r##0, c##r##3 = c##r##0;
#define HG_STEP(r, NV)                                                                                 \
    do {                                                                                               \
        __m512 ar = _mm512_set1_ps(a##r[p]);                                                           \
        c##r##0 = _mm512_fmadd_ps(ar, b0, c##r##0);                                                    \
        if ((NV) > 1) c##r##1 = _mm512_fmadd_ps(ar, b1, c##r##1);                                      \
        if ((NV) > 2) c##r##2 = _mm512_fmadd_ps(ar, b2, c##r##2);                                      \
        if ((NV) > 3) c##r##3 = _mm512_fmadd_ps(ar, b3, c##r##3);                                      \
    } while (0)
/* Vector v of NV: whole, or the last one masked to the block's width. */
#define HG_LOAD(v, NV) ((v) == (NV) - 1 ? _mm512_maskz_loadu_ps(ml, b + (v) * 16) : _mm512_loadu_ps(b + (v) * 16))
#define HG_PUT(cr, v, x, NV)                                                                           \
    do {                                                                                               \
        if ((v) == (NV) - 1) _mm512_mask_storeu_ps(cr + (v) * 16, ml, x);                              \
        else if ((v) < (NV)) _mm512_storeu_ps(cr + (v) * 16, x);                                       \
    } while (0)
#define HG_OUT(r, NV)                                                                                  \
    do {                                                                                               \
        if ((r) >= h) break;                                                                           \
        float *cr = c + (int64_t)(r) * ldc;                                                            \
        HG_PUT(cr, 0, c##r##0, NV);                                                                    \
        HG_PUT(cr, 1, c##r##1, NV);                                                                    \
        HG_PUT(cr, 2, c##r##2, NV);                                                                    \
        HG_PUT(cr, 3, c##r##3, NV);                                                                    \
    } while (0)
#define HG_ROWS(X, NV) X(0, NV); X(1, NV); X(2, NV); X(3, NV); X(4, NV); X(5, NV)

/* C's block (h <= 6 rows, NV vectors of 16 columns, the last masked by ml) = A's h rows (row
 * stride lda) times B's k rows (stride ldb). */
#define HG_TILE(name, NV)                                                                              \
    __attribute__((target("avx512f"))) static void name(int64_t k, const float *a, int64_t lda,         \
                                                       const float *b, int64_t ldb, float *c,          \
                                                       int64_t ldc, int h, __mmask16 ml) {             \
        HG_ROWPTR(0) HG_ROWPTR(1) HG_ROWPTR(2) HG_ROWPTR(3) HG_ROWPTR(4) HG_ROWPTR(5)                 \
        HG_DECL(0) HG_DECL(1) HG_DECL(2) HG_DECL(3) HG_DECL(4) HG_DECL(5)                             \
        for (int64_t p = 0; p < k; p++, b += ldb) {                                                    \
            __m512 b0 = HG_LOAD(0, NV), b1 = (NV) > 1 ? HG_LOAD(1, NV) : b0;                           \
            __m512 b2 = (NV) > 2 ? HG_LOAD(2, NV) : b0, b3 = (NV) > 3 ? HG_LOAD(3, NV) : b0;           \
            HG_ROWS(HG_STEP, NV);                                                                      \
        }                                                                                              \
        HG_ROWS(HG_OUT, NV);                                                                           \
    }

HG_TILE(tile1, 1)
HG_TILE(tile2, 2)
HG_TILE(tile3, 3)
HG_TILE(tile4, 4)

typedef void hg_tile(int64_t k, const float *a, int64_t lda, const float *b, int64_t ldb, float *c, int64_t ldc,
                     int h, __mmask16 ml);
static hg_tile *const tiles[4] = {tile1, tile2, tile3, tile4};

/* C (m x n) = A (m x k) B (k x n, row stride ldb), blocks of 6 rows by 64 columns. */
static void run_tiles(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda, const float *b, int64_t ldb,
                      float *c, int64_t ldc) {
    for (int64_t j0 = 0; j0 < n; j0 += 64) {
        int64_t w = n - j0 < 64 ? n - j0 : 64, nv = (w + 15) / 16, last = w - 16 * (nv - 1);
        __mmask16 ml = (__mmask16)(last >= 16 ? 0xFFFF : (1u << last) - 1);
        for (int64_t i0 = 0; i0 < m; i0 += HG_MR) {
            int h = (int)(m - i0 < HG_MR ? m - i0 : HG_MR);
            tiles[nv - 1](k, a + i0 * lda, lda, b + j0, ldb, c + i0 * ldc + j0, ldc, h, ml);
        }
    }
}

/* B's n rows of k (stride ldb) as k rows of np (n rounded up to 16, zeros after n): four rows
 * at a time through a 4 x 4 transpose in registers. */
__attribute__((target("avx512f"))) static void transpose_b(int64_t n, int64_t k, const float *b, int64_t ldb,
                                                         float *bt, int64_t np) {
    int64_t j = 0;
    for (; j + 4 <= n; j += 4) {
        const float *r0 = b + j * ldb, *r1 = r0 + ldb, *r2 = r1 + ldb, *r3 = r2 + ldb;
        int64_t p = 0;
        for (; p + 4 <= k; p += 4) {
            __m128 x0 = _mm_loadu_ps(r0 + p), x1 = _mm_loadu_ps(r1 + p), x2 = _mm_loadu_ps(r2 + p);
            __m128 x3 = _mm_loadu_ps(r3 + p);
            _MM_TRANSPOSE4_PS(x0, x1, x2, x3);
            _mm_storeu_ps(bt + p * np + j, x0);
            _mm_storeu_ps(bt + (p + 1) * np + j, x1);
            _mm_storeu_ps(bt + (p + 2) * np + j, x2);
            _mm_storeu_ps(bt + (p + 3) * np + j, x3);
        }
        for (; p < k; p++)
            bt[p * np + j] = r0[p], bt[p * np + j + 1] = r1[p], bt[p * np + j + 2] = r2[p], bt[p * np + j + 3] = r3[p];
    }
    for (; j < n; j++)
        for (int64_t p = 0; p < k; p++) bt[p * np + j] = b[j * ldb + p];
    for (int64_t p = 0; j < np && p < k; p++)
        for (int64_t q = n; q < np; q++) bt[p * np + q] = 0.0f;
}

bool head_gemm_ok(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f");
}

void head_gemm_nt(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda, const float *b, int64_t ldb, float *c,
                  int64_t ldc, void *scratch) {
    if (m <= 0 || n <= 0) return;
    int64_t np = (n + 15) / 16 * 16;
    float *bt = (float *)(((uintptr_t)scratch + 63) & ~(uintptr_t)63);
    transpose_b(n, k, b, ldb, bt, np);
    run_tiles(m, n, k, a, lda, bt, np, c, ldc);
}

void head_gemm_nn(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda, const float *b, int64_t ldb, float *c,
                  int64_t ldc) {
    if (m > 0 && n > 0) run_tiles(m, n, k, a, lda, b, ldb, c, ldc);
}

#else

bool head_gemm_ok(void) {
    return false;
}

void head_gemm_nt(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda, const float *b, int64_t ldb, float *c,
                  int64_t ldc, void *scratch) {
    (void)m, (void)n, (void)k, (void)a, (void)lda, (void)b, (void)ldb, (void)c, (void)ldc, (void)scratch;
}

void head_gemm_nn(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda, const float *b, int64_t ldb, float *c,
                  int64_t ldc) {
    (void)m, (void)n, (void)k, (void)a, (void)lda, (void)b, (void)ldb, (void)c, (void)ldc;
}

#endif

size_t head_gemm_scratch_bytes(int64_t n, int64_t k) {
    return (size_t)(((n + 15) / 16 * 16) * (k > 0 ? k : 1)) * sizeof(float) + 64;
}
