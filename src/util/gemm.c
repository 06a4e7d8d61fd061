/*
 * gemm.c — ragjit's own sgemm: packed panels, cache blocking, a register-blocked micro-kernel.
 *
 * CPU products go to an optimised BLAS where one is installed (blas.c). Where none is (or only
 * the netlib reference BLAS, 27 times slower than OpenBLAS), the product's core is this
 * kernel: the JIT's loop template ran at about 3% of OpenBLAS, and a GEMM's speed is not in
 * its loops but in its data movement, which a generic loop nest does not arrange. The scheme
 * is the one every fast GEMM uses (Goto and van de Geijn; BLIS):
 *
 *   for each block of nc columns of B:
 *     for each block of kc steps of the inner dimension:
 *       pack B's kc x nc block into slivers of nr columns (contiguous, zero-padded): L2 holds it
 *       for each block of mc rows of A:
 *         pack A's mc x kc block into slivers of mr rows (alpha folded in)
 *         for each sliver of A (stays in L1):  for each sliver of B (from L2):
 *           micro-kernel: the mr x nr block of C, in registers for all kc steps
 *
 * Packing turns any layout (A or B transposed, leading dimensions wider than the rows) into
 * the unit-stride streams the micro-kernel reads, and costs O(mk + kn) against the O(mnk) of
 * the product; A is read in place instead where it needs neither scaling nor transposing
 * (gemm_x86.c says why). The micro-kernels live in gemm_x86.c (AVX-512 14x32, AVX2 6x16),
 * chosen by what the running CPU supports; the portable one below (6x8, GCC's generic
 * vectors) serves elsewhere. Blocks at the edges of C (fewer than mr rows or nr columns) are
 * computed whole from the zero-padded slivers, and only their valid part is stored: by the
 * kernel's masked twin, or through a small buffer. Per-item products are mostly edges (a length
 * of 35 is two 14-row slivers and half of one), so the edges are not an afterthought.
 *
 * One call runs on one thread: the CPU runtime already gives each worker its own chunk of rows
 * (runtime/cpu.c), so that the product and the fused work after it share the worker's cache.
 * The packing buffers are scratch the caller provides (sgemm_scratch_bytes), so that they come
 * from the binding's per-worker scratch, through the context's allocator, and are reused.
 */
#include <string.h>

#include "util.h"

#define PORT_MR 6
#define PORT_NR 8

/* The portable micro-kernel, in GCC's generic vectors of 16 bytes, which every 64-bit target
 * has in hardware (SSE on a baseline x86-64, NEON on AArch64; a wider generic vector than the
 * target's lives in memory): two a row, 6 x 8 keeping the block in 12 of the 16 registers of
 * the smaller. b is packed, so its rows are 32-byte aligned. */
typedef float port_vec __attribute__((vector_size(16)));

#define PORT_ROW(r) c##r##0 += a[r] * b0, c##r##1 += a[r] * b1
#define PORT_OUT(r)                                                                                    \
    do {                                                                                               \
        float v[PORT_NR];                                                                              \
        memcpy(v, &c##r##0, sizeof c##r##0);                                                           \
        memcpy(v + 4, &c##r##1, sizeof c##r##1);                                                       \
        for (int j = 0; j < PORT_NR; j++) c[r * ldc + j] = load ? c[r * ldc + j] + v[j] : v[j];        \
    } while (0)

static void kernel_portable(int64_t kc, const float *restrict a, int64_t lda, const float *restrict b,
                            float *restrict c, int64_t ldc, int load, int h, int w) {
    /* named accumulators: an array indexed in a loop stays in memory at -O2 */
    port_vec c00 = {0}, c01 = {0}, c10 = {0}, c11 = {0}, c20 = {0}, c21 = {0}, c30 = {0}, c31 = {0}, c40 = {0},
             c41 = {0}, c50 = {0}, c51 = {0};
    for (int64_t p = 0; p < kc; p++, a += PORT_MR, b += PORT_NR) {
        port_vec b0 = *(const port_vec *)b, b1 = *(const port_vec *)(b + 4);
        PORT_ROW(0), PORT_ROW(1), PORT_ROW(2), PORT_ROW(3), PORT_ROW(4), PORT_ROW(5);
    }
    PORT_OUT(0);
    PORT_OUT(1);
    PORT_OUT(2);
    PORT_OUT(3);
    PORT_OUT(4);
    PORT_OUT(5);
}

static const sgemm_kernel portable = {.name = "portable 6x8", .isa = SGEMM_PORTABLE, .mr = PORT_MR,
                                      .nr = PORT_NR, .kc = 256, .mc = 256, .nc = 256, .run = kernel_portable};

const sgemm_kernel *sgemm_kernel_get(int isa) {
    if (isa == SGEMM_PORTABLE) return &portable;
    if (isa != SGEMM_BEST) return sgemm_x86_kernel(isa);
    const sgemm_kernel *k = sgemm_x86_kernel(SGEMM_AVX512);
    if (!k) k = sgemm_x86_kernel(SGEMM_AVX2);
    return k ? k : &portable;
}

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t round_up(int64_t a, int64_t b) { return (a + b - 1) / b * b; }

/* The size of each block of n split into blocks of at most cap, as equal as the splitting
 * allows (300 steps in blocks of 256 are two of 150, not 256 and 44), rounded up to `unit`. */
static int64_t block_of(int64_t n, int64_t cap, int64_t unit) {
    int64_t blocks = (n + cap - 1) / cap;
    return round_up((n + blocks - 1) / blocks, unit);
}

typedef struct sgemm_blocks {
    int64_t kb, mb, nb;               /* block sizes (mb, nb: multiples of mr, nr) */
    size_t a_bytes, b_bytes, e_bytes; /* each buffer's bytes, whole cache lines */
} sgemm_blocks;

static sgemm_blocks blocks_for(const sgemm_kernel *kn, int64_t m, int64_t n, int64_t k) {
    sgemm_blocks b = {.kb = block_of(k > 0 ? k : 1, kn->kc, 1), .mb = block_of(m > 0 ? m : 1, kn->mc, kn->mr),
                      .nb = block_of(n > 0 ? n : 1, kn->nc, kn->nr)};
    b.a_bytes = (size_t)round_up(b.mb * b.kb * (int64_t)sizeof(float), 64);
    b.b_bytes = (size_t)round_up(b.kb * b.nb * (int64_t)sizeof(float), 64);
    b.e_bytes = (size_t)round_up((int64_t)kn->mr * kn->nr * (int64_t)sizeof(float), 64);
    return b;
}

/* Enough for every product of at most m x n x k: a block is at most min(extent, cap) rounded
 * up (block_of), which grows with the extent, where block_of itself does not (257 -> 129). */
size_t sgemm_scratch_bytes(const sgemm_kernel *kn, int64_t m, int64_t n, int64_t k) {
    if (kn->run_packed) return 0; /* a kernel of its own (amx.c) keeps its edges on its stack */
    int64_t kb = min64(k > 0 ? k : 1, kn->kc), mb = round_up(min64(m > 0 ? m : 1, kn->mc), kn->mr);
    int64_t nb = round_up(min64(n > 0 ? n : 1, kn->nc), kn->nr), f = (int64_t)sizeof(float);
    return (size_t)(round_up(mb * kb * f, 64) + round_up(kb * nb * f, 64) + round_up((int64_t)kn->mr * kn->nr * f, 64) +
                    64); /* and room to align the start */
}

/* A's rows [i0, i0 + rows) and steps [p0, p0 + kb), times alpha, into slivers of mr rows:
 * sliver s holds dst[s * mr * kb + p * mr + i]; rows past the end are zeros. */
static void pack_a(int mr, bool ta, const float *a, int64_t lda, int64_t i0, int64_t rows, int64_t p0, int64_t kb,
                   float alpha, float *dst) {
    for (int64_t s = 0; s < rows; s += mr, dst += mr * kb) {
        int64_t h = min64(mr, rows - s);
        if (!ta) { /* row i of A is contiguous in p */
            for (int64_t i = 0; i < h; i++) {
                const float *src = a + (i0 + s + i) * lda + p0;
                for (int64_t p = 0; p < kb; p++) dst[p * mr + i] = alpha * src[p];
            }
        } else { /* A stored k x m: step p's rows are contiguous */
            for (int64_t p = 0; p < kb; p++) {
                const float *src = a + (p0 + p) * lda + i0 + s;
                for (int64_t i = 0; i < h; i++) dst[p * mr + i] = alpha * src[i];
            }
        }
        for (int64_t p = 0; h < mr && p < kb; p++) memset(dst + p * mr + h, 0, sizeof(float) * (size_t)(mr - h));
    }
}

/* w floats: a whole sliver's row as a copy of constant size (a few vector moves, where a call
 * of memcpy costs as much as the copy for the 32 to 128 bytes of a row). */
static void copy_row(float *restrict d, const float *restrict s, int64_t w) {
    switch (w) {
    case 32: memcpy(d, s, 32 * sizeof(float)); break;
    case 16: memcpy(d, s, 16 * sizeof(float)); break;
    case 8: memcpy(d, s, 8 * sizeof(float)); break;
    default: memcpy(d, s, sizeof(float) * (size_t)w);
    }
}

/* Four rows of kb floats (src, row stride lds) as kb rows of four (dst, row stride ldd):
 * transposed four by four in registers. Element by element, a weight's rows into B's slivers
 * ran at about a float every four cycles (each store to its own line, 128 bytes from the
 * last), which made packing a projection's weight once cost 16% of the CoRa module on CoLA's
 * lengths. */
static void transpose_rows4(const float *src, int64_t lds, int64_t kb, float *dst, int64_t ldd) {
    const float *r0 = src, *r1 = src + lds, *r2 = src + 2 * lds, *r3 = src + 3 * lds;
    int64_t p = 0;
    for (; p + 4 <= kb; p += 4) {
        port_vec a0, a1, a2, a3;
        memcpy(&a0, r0 + p, sizeof a0);
        memcpy(&a1, r1 + p, sizeof a1);
        memcpy(&a2, r2 + p, sizeof a2);
        memcpy(&a3, r3 + p, sizeof a3);
        port_vec t0 = __builtin_shufflevector(a0, a1, 0, 4, 1, 5), t1 = __builtin_shufflevector(a0, a1, 2, 6, 3, 7);
        port_vec t2 = __builtin_shufflevector(a2, a3, 0, 4, 1, 5), t3 = __builtin_shufflevector(a2, a3, 2, 6, 3, 7);
        port_vec o0 = __builtin_shufflevector(t0, t2, 0, 1, 4, 5), o1 = __builtin_shufflevector(t0, t2, 2, 3, 6, 7);
        port_vec o2 = __builtin_shufflevector(t1, t3, 0, 1, 4, 5), o3 = __builtin_shufflevector(t1, t3, 2, 3, 6, 7);
        memcpy(dst + p * ldd, &o0, sizeof o0);
        memcpy(dst + (p + 1) * ldd, &o1, sizeof o1);
        memcpy(dst + (p + 2) * ldd, &o2, sizeof o2);
        memcpy(dst + (p + 3) * ldd, &o3, sizeof o3);
    }
    for (; p < kb; p++) {
        float *d = dst + p * ldd;
        d[0] = r0[p], d[1] = r1[p], d[2] = r2[p], d[3] = r3[p];
    }
}

/* op(B)'s steps [p0, p0 + kb) and columns [j0, j0 + cols) into slivers of nr columns:
 * dst[s * nr * kb + p * nr + j]; columns past the end are zeros. */
static void pack_b(int nr, bool tb, const float *b, int64_t ldb, int64_t p0, int64_t kb, int64_t j0, int64_t cols,
                   float *dst) {
    for (int64_t s = 0; s < cols; s += nr, dst += nr * kb) {
        int64_t w = min64(nr, cols - s);
        if (!tb) { /* step p is a contiguous row of B */
            for (int64_t p = 0; p < kb; p++) copy_row(dst + p * nr, b + (p0 + p) * ldb + j0 + s, w);
        } else { /* B stored n x k: column j of op(B) is a contiguous row */
            int64_t j = 0;
            for (; j + 4 <= w; j += 4) transpose_rows4(b + (j0 + s + j) * ldb + p0, ldb, kb, dst + j, nr);
            for (; j < w; j++) {
                const float *src = b + (j0 + s + j) * ldb + p0;
                for (int64_t p = 0; p < kb; p++) dst[p * nr + j] = src[p];
            }
        }
        for (int64_t p = 0; w < nr && p < kb; p++) memset(dst + p * nr + w, 0, sizeof(float) * (size_t)(nr - w));
    }
}

/* Where a block's slivers of A come from: packed (pa), or A itself (a, lda: its rows read in
 * place by the kernel's `rows` twin, with pa holding only the sliver at the bottom edge). */
typedef struct a_source {
    const float *pa, *a;
    int64_t lda;
} a_source;

/* The mh x nw block of C from A's mh rows and packed B (nw columns), kb steps: full blocks
 * straight into C, edge blocks by the kernel's edge twin, or without one through `edge`
 * (mr x nr) and copied out. */
static void macro_kernel(const sgemm_kernel *kn, int64_t mh, int64_t nw, int64_t kb, a_source as, const float *pb,
                         float *c, int64_t ldc, int load, float *edge) {
    for (int64_t i = 0; i < mh; i += kn->mr) {
        int h = (int)min64(kn->mr, mh - i);
        const float *a = as.pa + i * kb;
        bool direct = as.a && h == kn->mr;
        if (as.a && !direct) { /* the edge sliver: packed, zero rows below */
            pack_a(kn->mr, false, as.a, as.lda, i, h, 0, kb, 1.0f, (float *)as.pa);
            a = as.pa;
        }
        if (direct) a = as.a + i * as.lda;
        int64_t lda = direct ? as.lda : kn->mr;
        for (int64_t j = 0; j < nw; j += kn->nr) {
            int w = (int)min64(kn->nr, nw - j);
            float *cp = c + i * ldc + j;
            const float *b = pb + j * kb;
            if (h == kn->mr && w == kn->nr) {
                (direct ? kn->rows : kn->run)(kb, a, lda, b, cp, ldc, load, h, w);
            } else if (kn->run_edge) {
                (direct ? kn->rows_edge : kn->run_edge)(kb, a, lda, b, cp, ldc, load, h, w);
            } else {
                (direct ? kn->rows : kn->run)(kb, a, lda, b, edge, kn->nr, 0, kn->mr, kn->nr);
                for (int64_t r = 0; r < h; r++)
                    for (int64_t q = 0; q < w; q++)
                        cp[r * ldc + q] = load ? cp[r * ldc + q] + edge[r * kn->nr + q] : edge[r * kn->nr + q];
            }
        }
    }
}

/* C = beta C, for the calls that leave the product out or add it later: beta == 0 writes
 * zeros without reading C (a BLAS's contract: C may hold NaN). */
static void scale_c(int64_t m, int64_t n, float beta, float *c, int64_t ldc) {
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) c[i * ldc + j] = beta == 0.0f ? 0.0f : beta * c[i * ldc + j];
}

/* The product's loops over blocks, B's blocks packed here per block into the scratch, or taken
 * from `packed` (sgemm_pack_b_block's layout) where the caller packed B once for many calls. */
static void run_blocks(const sgemm_kernel *kn, bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
                       const float *a, int64_t lda, const float *b, int64_t ldb, const float *packed, float beta,
                       float *c, int64_t ldc, void *scratch) {
    if (beta != 0.0f && beta != 1.0f) scale_c(m, n, beta, c, ldc);
    sgemm_blocks bk = blocks_for(kn, m, n, k);
    char *base = (char *)(((uintptr_t)scratch + 63) & ~(uintptr_t)63);
    /* A's rows are read in place where they need no scaling or transposing: packing them
     * costs as much as the product when few slivers of B meet each sliver of A (small n) */
    bool direct = kn->rows && !ta && alpha == 1.0f;
    float *pa = (float *)base, *pb = (float *)(base + bk.a_bytes), *edge = (float *)(base + bk.a_bytes + bk.b_bytes);
    int64_t nk = (k + bk.kb - 1) / bk.kb;
    for (int64_t j0 = 0; j0 < n; j0 += bk.nb) {
        int64_t nw = min64(bk.nb, n - j0);
        for (int64_t p0 = 0; p0 < k; p0 += bk.kb) {
            int64_t kb = min64(bk.kb, k - p0);
            int load = p0 > 0 || beta != 0.0f; /* the first block of steps writes C, later ones add */
            const float *blk = packed ? packed + (j0 / bk.nb * nk + p0 / bk.kb) * bk.kb * bk.nb : pb;
            if (!packed) pack_b(kn->nr, tb, b, ldb, p0, kb, j0, nw, pb);
            for (int64_t i0 = 0; i0 < m; i0 += bk.mb) {
                int64_t mh = min64(bk.mb, m - i0);
                a_source as = {.pa = pa};
                if (direct) as.a = a + i0 * lda + p0, as.lda = lda;
                else pack_a(kn->mr, ta, a, lda, i0, mh, p0, kb, alpha, pa);
                macro_kernel(kn, mh, nw, kb, as, blk, c + i0 * ldc + j0, ldc, load, edge);
            }
        }
    }
}

void sgemm_run(const sgemm_kernel *kn, bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
               const float *a, int64_t lda, const float *b, int64_t ldb, float beta, float *c, int64_t ldc,
               void *scratch) {
    if (m <= 0 || n <= 0) return;
    if (k <= 0 || alpha == 0.0f) {
        if (beta != 1.0f) scale_c(m, n, beta, c, ldc);
        return;
    }
    run_blocks(kn, ta, tb, m, n, k, alpha, a, lda, b, ldb, NULL, beta, c, ldc, scratch);
}

/* B packed whole: its blocks of kc steps x nc columns, each in pack_b's slivers, block (jb, pb)
 * at (jb * blocks of steps + pb) * kb * nb floats. The blocks depend on n and k only, never
 * on m, so one packing serves every chunk of rows of a product (a projection's weight is
 * packed once a run instead of once a chunk: 10-17% of the CoRa module's time was OpenBLAS
 * packing the weight again for every chunk). */
int64_t sgemm_packed_b_blocks(const sgemm_kernel *kn, int64_t n, int64_t k) {
    if (kn->packed_blocks) return kn->packed_blocks(n, k);
    sgemm_blocks bk = blocks_for(kn, 1, n, k);
    return ((n + bk.nb - 1) / bk.nb) * ((k + bk.kb - 1) / bk.kb);
}

size_t sgemm_packed_b_bytes(const sgemm_kernel *kn, int64_t n, int64_t k) {
    if (kn->packed_bytes) return kn->packed_bytes(n, k);
    sgemm_blocks bk = blocks_for(kn, 1, n, k);
    return (size_t)sgemm_packed_b_blocks(kn, n, k) * (size_t)(bk.kb * bk.nb) * sizeof(float);
}

void sgemm_pack_b_block(const sgemm_kernel *kn, bool tb, int64_t n, int64_t k, const float *b, int64_t ldb,
                        int64_t block, float *packed) {
    if (kn->pack_block) {
        kn->pack_block(tb, n, k, b, ldb, block, packed);
        return;
    }
    sgemm_blocks bk = blocks_for(kn, 1, n, k);
    int64_t nk = (k + bk.kb - 1) / bk.kb, j0 = block / nk * bk.nb, p0 = block % nk * bk.kb;
    if (j0 >= n || p0 >= k) return;
    pack_b(kn->nr, tb, b, ldb, p0, min64(bk.kb, k - p0), j0, min64(bk.nb, n - j0), packed + block * bk.kb * bk.nb);
}

void sgemm_run_packed(const sgemm_kernel *kn, int64_t m, int64_t n, int64_t k, const float *a, int64_t lda,
                      const float *packed, float *c, int64_t ldc, void *scratch) {
    if (kn->run_packed) {
        kn->run_packed(m, n, k, a, lda, packed, c, ldc);
        return;
    }
    if (m <= 0 || n <= 0) return;
    if (k <= 0) {
        scale_c(m, n, 0.0f, c, ldc);
        return;
    }
    run_blocks(kn, false, false, m, n, k, 1.0f, a, lda, NULL, 0, packed, 0.0f, c, ldc, scratch);
}
