/*
 * amx.c — bf16 products by AMX tiles (Intel Sapphire Rapids and later): ragjit's own
 * cblas_sbgemm, for bf16 products where the BLAS exports none (blas.c).
 *
 * One TDPBF16PS multiplies a 16 x 32 tile of bf16 A by a 32 x 16 tile of bf16 B into a 16 x 16
 * tile of f32 C: 16 K of products a cycle where AVX-512's FMAs do 32 f32 multiply-adds. A naive
 * loop of it ran bf16 products at 1.1 TFLOP/s on one core of the project's machine, where
 * ragjit's f32 sgemm (which 16-bit products otherwise use, their operands widened) reaches
 * 175-185 GFLOP/s (bench/NOTES.md, "bf16 products by AMX").
 *
 * C (m x n, f32, row-major) = A (m x k, bf16, row-major, not transposed) op(B) with op(B) = B
 * (k x n) or Bᵀ (B stored n x k: a linear's weight). B goes into a block of 32 columns at a
 * time, in the tiles' pair-interleaved layout (row p of a B tile holds, for each of its 16
 * columns, the elements of steps 2p and 2p + 1), with zeros past n and past k; A's tiles are
 * read in place, 16 rows by 32 steps, except at its edges (the last rows, the last steps),
 * which go through a zero-padded copy: past k a tile would read the next row's elements, and
 * 0 times a NaN there would not be 0. Blocks of 32 x 32 of C use the eight tile registers
 * (four C, two A, two B). The block of B is on the caller's stack (2 x 32 x k bytes, 64 KiB
 * at most: longer k is multiplied in steps of 512, C accumulated).
 *
 * Numerics: each product of two bf16 is exact in f32 and each pair of steps is summed into the
 * f32 accumulator, rounding to nearest even; the instruction treats subnormal inputs as zero and
 * flushes subnormal results (the documented behaviour of TDPBF16PS, as of oneDNN's bf16
 * products, which PyTorch's CPU uses). Every element of C is one sum over k in the same
 * order whatever m is, so results do not depend on how the runtime cuts the rows into chunks.
 *
 * The tiles' state is per thread: each call loads the configuration and releases the tiles
 * before it returns (no tile state is left for the kernel to save across context switches).
 * Linux gives a process the tiles only after it asks (arch_prctl ARCH_REQ_XCOMP_PERM), once,
 * here; a CPU without AMX-BF16, a kernel that refuses, or RAGJIT_AMX=0 leave amx_sbgemm_get()
 * NULL and bf16 products widened to f32 as before.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

#if defined(__x86_64__) && defined(__GNUC__) && defined(__linux__) && (__GNUC__ >= 11 || defined(__clang__))
#include <cpuid.h>
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

#define AMX_TARGET __attribute__((target("amx-tile,amx-bf16,avx512f")))
enum { KMAX = 512 }; /* steps of B in one block (a 32-column block: 64 KiB of stack) */

typedef struct tile_config {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} tile_config;

/* Steps k rounded up to whole 32-step tiles. */
static int64_t amx_kq(int64_t k) { return (k + 31) / 32 * 32; }

/* The pair-interleaved tiles of B's columns [j0, j0 + 32) and steps [p0, p0 + kb): tile t of
 * step pair q at dst[(t * kq + q) * 32 + 2 * c + s] = op(B)[p0 + 2q + s][j0 + 16t + c], zeros
 * past n and past kb (kq = kb rounded up to 32, in pairs). */
static void pack_b(bool tb, const uint16_t *b, int64_t ldb, int64_t n, int64_t j0, int64_t p0, int64_t kb, int64_t kq,
                   uint16_t *dst) {
    memset(dst, 0, sizeof(uint16_t) * 2 * 32 * (size_t)kq);
    for (int64_t c = 0; c < 32 && j0 + c < n; c++) {
        uint16_t *d = dst + (c / 16) * kq * 32 + 2 * (c % 16);
        if (tb) { /* column j of op(B) is row j of B: its steps are contiguous, a pair a word */
            const uint16_t *s = b + (j0 + c) * ldb + p0;
            int64_t p = 0;
            for (; p + 2 <= kb; p += 2) memcpy(d + (p / 2) * 32, s + p, 4);
            if (p < kb) d[(p / 2) * 32] = s[p];
        } else {
            for (int64_t p = 0; p < kb; p++) d[(p / 2) * 32 + (p & 1)] = b[(p0 + p) * ldb + j0 + c];
        }
    }
}

/* Eight tiles of 16 rows of 64 bytes (palette 1), for this thread until _tile_release. */
AMX_TARGET static void load_tiles(void) {
    tile_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    for (int t = 0; t < 8; t++) cfg.rows[t] = 16, cfg.colsb[t] = 64;
    _tile_loadconfig(&cfg);
}

/* C's 16 x 16 tile t into c (rows h, columns w of it), added to what c holds when `add`: a
 * whole tile stored in place, else through tmp. */
AMX_TARGET static void store_c(int t, float *c, int64_t ldc, int h, int w, bool add, float *tmp) {
    bool direct = h == 16 && w == 16 && !add;
    float *d = direct ? c : tmp;
    int64_t ld = direct ? ldc * (int64_t)sizeof(float) : 64;
    switch (t) { /* the tile is an immediate */
    case 0: _tile_stored(0, d, ld); break;
    case 1: _tile_stored(1, d, ld); break;
    case 2: _tile_stored(2, d, ld); break;
    default: _tile_stored(3, d, ld); break;
    }
    if (direct) return;
    for (int r = 0; r < h; r++)
        for (int q = 0; q < w; q++) c[r * ldc + q] = add ? c[r * ldc + q] + tmp[r * 16 + q] : tmp[r * 16 + q];
}

/* Rows [i, i + 32) of C's columns [j0, j0 + 32) over steps [p0, p0 + kb) of this block. */
AMX_TARGET static void block(const uint16_t *a, int64_t lda, int64_t m, int64_t i, const uint16_t *pb, int64_t kb,
                             int64_t kq, int64_t p0, float *c, int64_t ldc, int64_t n, int64_t j0, bool add,
                             uint16_t *edge) {
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    int64_t h0 = m - i < 16 ? m - i : 16, h1 = m - i - 16 < 16 ? m - i - 16 : 16; /* rows of each A tile */
    if (h1 < 0) h1 = 0;
    for (int64_t q = 0; q < kq; q += 32) {
        bool whole = q + 32 <= kb;
        for (int u = 0; u < 2; u++) {
            int64_t h = u ? h1 : h0;
            const void *src;
            int64_t stride;
            if (h == 16 && whole) {
                src = a + (i + 16 * u) * lda + p0 + q;
                stride = lda * 2;
            } else { /* an edge: the rows and steps there are, zeros after (each tile its half) */
                uint16_t *e = edge + u * 16 * 32;
                memset(e, 0, 16 * 64);
                for (int64_t r = 0; r < h; r++)
                    memcpy(e + r * 32, a + (i + 16 * u + r) * lda + p0 + q,
                           sizeof(uint16_t) * (size_t)(kb - q < 32 ? kb - q : 32));
                src = e;
                stride = 64;
            }
            if (u) _tile_loadd(5, src, stride);
            else _tile_loadd(4, src, stride);
        }
        _tile_loadd(6, pb + q * 16, 64);
        _tile_loadd(7, pb + kq * 32 + q * 16, 64);
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
    }
    float tmp[256];
    for (int t = 0; t < 4; t++) {
        int64_t r0 = i + (t >> 1) * 16, c0 = j0 + (t & 1) * 16;
        int h = (int)(m - r0 < 16 ? m - r0 : 16), w = (int)(n - c0 < 16 ? n - c0 : 16);
        if (h > 0 && w > 0) store_c(t, c + r0 * ldc + c0, ldc, h, w, add, tmp);
    }
}

AMX_TARGET static void amx_sbgemm(int order, int ta, int tb, int m, int n, int k, float alpha, const uint16_t *a,
                                  int lda, const uint16_t *b, int ldb, float beta, float *c, int ldc) {
    if (m <= 0 || n <= 0) return;
    if (order != BLAS_ROW_MAJOR || ta != BLAS_NO_TRANS || alpha != 1.0f || beta != 0.0f || k <= 0) {
        /* not what ragjit asks for (gemm_full: row-major, A as it is, C = A op(B)) */
        sbgemm_by_definition(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
        return;
    }
    load_tiles();
    uint16_t pb[2 * 32 * KMAX] __attribute__((aligned(64)));
    uint16_t edge[2 * 16 * 32] __attribute__((aligned(64)));
    for (int64_t p0 = 0; p0 < k; p0 += KMAX) {
        int64_t kb = k - p0 < KMAX ? k - p0 : KMAX, kq = amx_kq(kb);
        for (int64_t j0 = 0; j0 < n; j0 += 32) {
            pack_b(tb == BLAS_TRANS, b, ldb, n, j0, p0, kb, kq, pb);
            for (int64_t i = 0; i < m; i += 32)
                block(a, lda, m, i, pb, kb, kq, p0, c, ldc, n, j0, p0 > 0, edge);
        }
    }
    _tile_release();
}

/* The packed form of op(B) for many calls (every chunk of rows of one product, packed once a
 * run by the pool, or once a binding for a constant weight: cpu_gemm.c), through the packed
 * calls of gemm.c: a block of 32 columns over all of k per unit. */
static int64_t amx_packed_blocks(int64_t n, int64_t k) {
    (void)k;
    return (n + 31) / 32;
}

static size_t amx_packed_bytes(int64_t n, int64_t k) {
    return (size_t)amx_packed_blocks(n, k) * 2 * 32 * (size_t)amx_kq(k) * sizeof(uint16_t);
}

static void amx_pack_block(bool tb, int64_t n, int64_t k, const void *b, int64_t ldb, int64_t blk, void *packed) {
    if (blk * 32 >= n || k <= 0) return;
    pack_b(tb, b, ldb, n, blk * 32, 0, k, amx_kq(k), (uint16_t *)packed + blk * 2 * 32 * amx_kq(k));
}

AMX_TARGET static void amx_run_packed(int64_t m, int64_t n, int64_t k, const void *a, int64_t lda, const void *packed,
                                      float *c, int64_t ldc) {
    if (m <= 0 || n <= 0) return;
    if (k <= 0) {
        for (int64_t i = 0; i < m; i++) memset(c + i * ldc, 0, sizeof(float) * (size_t)n);
        return;
    }
    load_tiles();
    uint16_t edge[2 * 16 * 32] __attribute__((aligned(64)));
    int64_t kq = amx_kq(k);
    for (int64_t j0 = 0; j0 < n; j0 += 32) {
        const uint16_t *pb = (const uint16_t *)packed + (j0 / 32) * 2 * 32 * kq;
        for (int64_t i = 0; i < m; i += 32) block(a, lda, m, i, pb, k, kq, 0, c, ldc, n, j0, false, edge);
    }
    _tile_release();
}

static const sgemm_kernel amx_kern = {.name = "AMX bf16 tiles 32x32", .isa = SGEMM_AMX_BF16, .mr = 32, .nr = 32,
                                      .packed_blocks = amx_packed_blocks, .packed_bytes = amx_packed_bytes,
                                      .pack_block = amx_pack_block, .run_packed = amx_run_packed};

/* CPUID leaf 7: EDX bit 22 AMX-BF16, bit 24 AMX-TILE; then the kernel's permission (Linux 5.16+:
 * ARCH_REQ_XCOMP_PERM for XFEATURE_XTILEDATA, which fails where the OS does not manage the
 * tiles' state). */
static bool amx_usable;
static void amx_probe(void) {
    const char *env = getenv("RAGJIT_AMX");
    if (env && !strcmp(env, "0")) return;
    unsigned eax, ebx, ecx, edx;
    if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) || !(edx >> 22 & 1) || !(edx >> 24 & 1)) return;
    amx_usable = syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18 /* XFEATURE_XTILEDATA */) == 0;
}

static pthread_once_t amx_once = PTHREAD_ONCE_INIT;

sbgemm_fn *amx_sbgemm_get(void) {
    pthread_once(&amx_once, amx_probe);
    return amx_usable ? amx_sbgemm : NULL;
}

const sgemm_kernel *amx_kernel(void) {
    pthread_once(&amx_once, amx_probe);
    return amx_usable ? &amx_kern : NULL;
}

#else

sbgemm_fn *amx_sbgemm_get(void) {
    return NULL;
}

const sgemm_kernel *amx_kernel(void) {
    return NULL;
}

#endif
