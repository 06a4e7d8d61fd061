/*
 * test_gemm.c — ragjit's own sgemm (src/util/gemm.c, gemm_x86.c), directly and end to end.
 *
 * Directly: every micro-kernel this CPU runs (portable, AVX2, AVX-512) against a float64
 * product computed here, over odd shapes (M, N, K of 1, 7, 17, 63, 64, 65 and 300, which cross
 * the micro-kernels' 4/6/14-row and 8/16/32-column blocks and the 256-step inner blocks),
 * each transposition of A and B, leading dimensions wider than the rows (the gaps hold NaN,
 * so a read of them shows, and C's gaps must stay as they were), alpha and beta as a BLAS
 * takes them (beta = 0 never reads C, which holds NaN), and a copy of each kernel with tiny
 * blocks so that every blocking loop runs several times on small shapes. NaN and inf in A or
 * B reach exactly the elements of C they would in float64. The tolerance is the float32 bound
 * of a sum of K products, (K + 3) eps sum |alpha a b| + |beta c|.
 *
 * End to end, with RAGJIT_BLAS=off (set before ragjit loads anything): rj_blas_info names
 * ragjit's own sgemm, and programs whose products gemm_lib hands to it (x @ w, linear with a
 * bias and relu, q @ kᵀ per item) match float64 products of the same inputs.
 */
#include "harness.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../src/util/util.h"

static const int64_t sizes[] = {1, 7, 17, 63, 64, 65, 300};
#define NSIZES (int)(sizeof sizes / sizeof sizes[0])

/* A (op(A) m x k) and B (op(B) k x n) as stored, with leading dims wider than their rows. */
typedef struct problem {
    int64_t m, n, k, lda, ldb, ldc;
    bool ta, tb;
    float alpha, beta;
    float *a, *b, *c;
} problem;

static float a_at(const problem *p, int64_t i, int64_t q) { return p->ta ? p->a[q * p->lda + i] : p->a[i * p->lda + q]; }
static float b_at(const problem *p, int64_t q, int64_t j) { return p->tb ? p->b[j * p->ldb + q] : p->b[q * p->ldb + j]; }

static void problem_fill(problem *p, uint64_t *rng) {
    int64_t ar = p->ta ? p->k : p->m, ac = p->ta ? p->m : p->k, br = p->tb ? p->n : p->k, bc = p->tb ? p->k : p->n;
    p->lda = ac + 3, p->ldb = bc + 5, p->ldc = p->n + 7;
    p->a = malloc(sizeof(float) * (size_t)(ar * p->lda));
    p->b = malloc(sizeof(float) * (size_t)(br * p->ldb));
    p->c = malloc(sizeof(float) * (size_t)(p->m * p->ldc));
    assert_true(p->a && p->b && p->c);
    for (int64_t i = 0; i < ar * p->lda; i++) p->a[i] = i % p->lda < ac ? (float)rng_uniform(rng, -1, 1) : NAN;
    for (int64_t i = 0; i < br * p->ldb; i++) p->b[i] = i % p->ldb < bc ? (float)rng_uniform(rng, -1, 1) : NAN;
}

static void problem_free(problem *p) { free(p->a), free(p->b), free(p->c); }

/* C's initial contents: NaN where beta = 0 (it must not be read), else values; 7 in the gaps. */
static void c_init(problem *p, uint64_t seed) {
    for (int64_t i = 0; i < p->m * p->ldc; i++)
        p->c[i] = i % p->ldc >= p->n ? 7.0f : p->beta == 0.0f ? NAN : (float)((seed + (uint64_t)i) % 13) / 8.0f - 0.75f;
}

/* C after sgemm_run against float64; c0: C before it. */
static void check(const problem *p, const float *c0, const char *what) {
    for (int64_t i = 0; i < p->m; i++)
        for (int64_t j = 0; j < p->ldc; j++) {
            float got = p->c[i * p->ldc + j];
            if (j >= p->n) {
                if (got != 7.0f) fail_msg("%s: C's gap at (%lld, %lld) was written", what, (long long)i, (long long)j);
                continue;
            }
            double ref = 0, mag = 0, cin = p->beta == 0.0f ? 0 : c0[i * p->ldc + j];
            for (int64_t q = 0; q < p->k; q++) {
                double t = (double)a_at(p, i, q) * (double)b_at(p, q, j);
                ref += t, mag += fabs(t);
            }
            ref = (double)p->alpha * ref + (double)p->beta * cin;
            bool ok;
            if (isnan(ref)) ok = isnan(got);
            else if (isinf(ref)) ok = (double)got == ref;
            else
                ok = fabs((double)got - ref) <= (double)(p->k + 3) * FLT_EPSILON *
                                                     (fabs((double)p->alpha) * mag + fabs((double)p->beta * cin)) + 1e-30;
            if (!ok)
                fail_msg("%s: C(%lld, %lld) = %.9g, float64 gives %.9g (m %lld n %lld k %lld, ta %d tb %d, alpha %g "
                         "beta %g)", what, (long long)i, (long long)j, (double)got, ref, (long long)p->m,
                         (long long)p->n, (long long)p->k, p->ta, p->tb, (double)p->alpha, (double)p->beta);
        }
}

/* One product by kernel kn, with scratch of exactly sgemm_scratch_bytes (ASan sees overruns)
 * plus a guard that must stay untouched. */
static void run_check(const sgemm_kernel *kn, problem *p, uint64_t seed) {
    c_init(p, seed);
    size_t cbytes = sizeof(float) * (size_t)(p->m * p->ldc), sb = sgemm_scratch_bytes(kn, p->m, p->n, p->k);
    float *c0 = malloc(cbytes);
    unsigned char *scratch = malloc(sb + 64);
    assert_true(c0 && scratch);
    memcpy(c0, p->c, cbytes);
    memset(scratch + sb, 0xA5, 64);
    sgemm_run(kn, p->ta, p->tb, p->m, p->n, p->k, p->alpha, p->a, p->lda, p->b, p->ldb, p->beta, p->c, p->ldc, scratch);
    for (int i = 0; i < 64; i++) assert_int_equal(scratch[sb + i], 0xA5);
    check(p, c0, kn->name);
    free(c0), free(scratch);
}

/* The kernels to test: each this CPU runs, and each again with tiny blocks. */
static int kernels(sgemm_kernel *out) {
    int n = 0;
    static const int isas[] = {SGEMM_PORTABLE, SGEMM_AVX2, SGEMM_AVX512};
    for (size_t i = 0; i < sizeof isas / sizeof isas[0]; i++) {
        const sgemm_kernel *k = sgemm_kernel_get(isas[i]);
        if (!k) {
            printf("no %s kernel on this CPU: not tested\n", isas[i] == SGEMM_AVX2 ? "AVX2" : "AVX-512");
            continue;
        }
        out[n++] = *k;
        out[n] = *k, out[n].kc = 5, out[n].mc = 2 * k->mr, out[n].nc = 2 * k->nr, n++;
    }
    assert_ptr_equal(sgemm_kernel_get(SGEMM_BEST)->run, out[n - 2].run); /* the best one serves */
    return n;
}

static void test_shapes(void **state) {
    (void)state;
    sgemm_kernel ks[6];
    int nk = kernels(ks);
    uint64_t rng = 36, cases = 0;
    for (int mi = 0; mi < NSIZES; mi++)
        for (int ni = 0; ni < NSIZES; ni++)
            for (int ki = 0; ki < NSIZES; ki++) {
                int big = (mi == NSIZES - 1) + (ni == NSIZES - 1) + (ki == NSIZES - 1);
                if (big > 1 || !in_shard(cases++)) continue; /* at most one dim of 300: seconds, not minutes */
                for (int t = 0; t < 4; t++) {
                    problem p = {.m = sizes[mi], .n = sizes[ni], .k = sizes[ki], .ta = t & 1, .tb = t >> 1};
                    problem_fill(&p, &rng);
                    static const float ab[][2] = {{1, 0}, {1, 1}, {-0.5f, 0.75f}, {2, 0}};
                    for (int v = 0; v < nk; v++) {
                        p.alpha = ab[(t + v) % 4][0], p.beta = ab[(t + v) % 4][1];
                        run_check(&ks[v], &p, (uint64_t)(mi + ni + ki + v));
                    }
                    problem_free(&p);
                }
            }
}

/* B packed once (sgemm_pack_b_block, blocks in reverse order), then products of several
 * chunks of rows of A against it (sgemm_run_packed), as the CPU runtime runs a projection:
 * every chunk against float64, and the packed buffer's guard untouched. */
static void test_packed_b(void **state) {
    (void)state;
    sgemm_kernel ks[6];
    int nk = kernels(ks);
    uint64_t rng = 53;
    static const int64_t shapes[][3] = {{300, 65, 17}, {64, 300, 63}, {17, 7, 300}, {65, 64, 1}, {7, 1, 65}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int tb = 0; tb < 2; tb++) {
            problem p = {.m = shapes[s][0], .n = shapes[s][1], .k = shapes[s][2], .tb = tb, .alpha = 1, .beta = 0};
            problem_fill(&p, &rng);
            for (int v = 0; v < nk; v++) {
                size_t pb = sgemm_packed_b_bytes(&ks[v], p.n, p.k), sb = sgemm_scratch_bytes(&ks[v], p.m, p.n, p.k);
                unsigned char *packed = aligned_alloc(64, (pb + 64 + 63) / 64 * 64), *scratch = malloc(sb);
                assert_true(packed && scratch);
                memset(packed + pb, 0xA5, 64);
                for (int64_t blk = sgemm_packed_b_blocks(&ks[v], p.n, p.k) - 1; blk >= 0; blk--)
                    sgemm_pack_b_block(&ks[v], p.tb, p.n, p.k, p.b, p.ldb, blk, (float *)packed);
                for (int i = 0; i < 64; i++) assert_int_equal(packed[pb + i], 0xA5);
                c_init(&p, (uint64_t)v);
                for (int64_t i0 = 0, step = p.m / 3 + 1; i0 < p.m; i0 += step) /* three chunks of rows */
                    sgemm_run_packed(&ks[v], i0 + step < p.m ? step : p.m - i0, p.n, p.k, p.a + i0 * p.lda, p.lda,
                                     (const float *)packed, p.c + i0 * p.ldc, p.ldc, scratch);
                check(&p, NULL, ks[v].name);
                free(packed), free(scratch);
            }
            problem_free(&p);
        }
}

/* NaN and inf in A and B, and the degenerate calls (k = 0, alpha = 0) a BLAS defines. */
static void test_special_values(void **state) {
    (void)state;
    sgemm_kernel ks[6];
    int nk = kernels(ks);
    uint64_t rng = 7;
    for (int v = 0; v < nk; v++) {
        problem p = {.m = 37, .n = 70, .k = 300, .tb = v & 1, .alpha = 1, .beta = 0};
        problem_fill(&p, &rng);
        for (int64_t i = 0; i < 37; i++) p.a[i * p.lda + 3] = fabsf(p.a[i * p.lda + 3]) + 0.5f;
        p.a[2 * p.lda + 200] = NAN;     /* row 2 of C: NaN */
        p.a[30 * p.lda + 5] = INFINITY; /* row 30: inf or -inf, NaN where B(5, j) = 0 */
        p.b[p.tb ? 1 * p.ldb + 5 : 5 * p.ldb + 1] = 0;
        p.b[p.tb ? 66 * p.ldb + 3 : 3 * p.ldb + 66] = INFINITY; /* column 66: inf, a(i, 3) > 0 */
        run_check(&ks[v], &p, 1);
        assert_true(isnan(p.c[2 * p.ldc + 10]) && isnan(p.c[30 * p.ldc + 1]) && isinf(p.c[0 * p.ldc + 66]));
        /* k = 0 and alpha = 0: C = beta C, and beta = 0 gives zeros (NaN in C not read) */
        for (int z = 0; z < 2; z++) {
            p.beta = 0;
            c_init(&p, 3);
            float *a = z ? p.a : NULL;
            sgemm_run(&ks[v], false, p.tb, p.m, p.n, z ? p.k : 0, z ? 0.0f : 1.0f, a, p.lda, p.b, p.ldb, 0.0f, p.c,
                      p.ldc, NULL);
            for (int64_t i = 0; i < p.m * p.ldc; i++) assert_true(p.c[i] == (i % p.ldc >= p.n ? 7.0f : 0.0f));
        }
        problem_free(&p);
    }
}

/* ---- end to end ---------------------------------------------------------------------------- */

static void test_blas_info(void **state) {
    (void)state;
    if (!strstr(rj_blas_info(), "ragjit's own sgemm") || !strstr(rj_blas_info(), "RAGJIT_BLAS=off"))
        fail_msg("rj_blas_info: %s", rj_blas_info());
}

/* Products of jagged x [B, j1, K] run through gemm_lib's chunks into ragjit's own sgemm. */
static void test_programs(void **state) {
    fixture *f = *state;
    static const int64_t shapes[][2] = {{65, 300}, {300, 17}, {7, 64}};
    uint64_t rng = 99;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int form = 0; form < 3; form++) {
            int64_t K = shapes[s][0], N = shapes[s][1], B = 5, off[6] = {0, 3, 3, 260, 261, 700}, rows = off[B];
            if (form == 2) N = 0; /* q @ kᵀ per item: N is each item's length */
            rj_graph *g = rj_graph_new(f->ctx);
            rj_dim Bd = rj_graph_dense(g, "B"), J = rj_graph_ragged(g, "j1", Bd);
            rj_node x = rj_graph_input(g, "x", RJ_F32, 3, (rj_dim[]){Bd, J, K}), w = x, b = x, y;
            if (form == 0) { /* x @ w, w [K, N] */
                w = rj_graph_input(g, "w", RJ_F32, 2, (rj_dim[]){K, N});
                y = rj_graph_matmul(g, x, w);
            } else if (form == 1) { /* relu(linear(x, w, b)), w [N, K] */
                w = rj_graph_input(g, "w", RJ_F32, 2, (rj_dim[]){N, K});
                b = rj_graph_input(g, "b", RJ_F32, 1, (rj_dim[]){N});
                y = rj_graph_unary(g, RJ_OP_RELU, rj_graph_linear(g, x, w, b));
            } else { /* x @ xᵀ per item */
                y = rj_graph_matmul(g, x, rj_graph_transpose(g, x, 1, 2));
            }
            rj_graph_output(g, y, "y");
            rj_program *p = rj_program_new(g, RJ_TARGET_CPU);
            if (!p) fail_msg("compile: %s", rj_ctx_error(f->ctx));
            int64_t outn = 0;
            for (int64_t i = 0; i < B; i++) outn += form == 2 ? (off[i + 1] - off[i]) * (off[i + 1] - off[i]) : 0;
            if (form != 2) outn = rows * N;
            float *xv = malloc(sizeof(float) * (size_t)(rows * K)), *wv = malloc(sizeof(float) * (size_t)(K * N + 1));
            float *bv = malloc(sizeof(float) * (size_t)(N + 1)), *yv = malloc(sizeof(float) * (size_t)(outn + 1));
            for (int64_t i = 0; i < rows * K; i++) xv[i] = (float)rng_uniform(&rng, -1, 1);
            for (int64_t i = 0; i < K * N; i++) wv[i] = (float)rng_uniform(&rng, -1, 1);
            for (int64_t i = 0; i < N; i++) bv[i] = (float)rng_uniform(&rng, -1, 1);
            rj_bind *bd = rj_bind_new(p);
            assert_non_null(bd);
            assert_int_equal(rj_bind_offsets(bd, J, B, off, NULL), RJ_OK);
            assert_int_equal(rj_bind_input(bd, x, xv, rows * K), RJ_OK);
            if (form != 2) assert_int_equal(rj_bind_input(bd, w, wv, K * N), RJ_OK);
            if (form == 1) assert_int_equal(rj_bind_input(bd, b, bv, N), RJ_OK);
            assert_int_equal(rj_bind_output(bd, y, yv, outn), RJ_OK);
            if (rj_program_run(p, bd)) fail_msg("run: %s", rj_ctx_error(f->ctx));
            int64_t at = 0;
            for (int64_t it = 0; it < B; it++) {
                int64_t len = off[it + 1] - off[it], cols = form == 2 ? len : N;
                for (int64_t i = off[it]; i < off[it + 1]; i++)
                    for (int64_t j = 0; j < cols; j++, at++) {
                        double ref = 0, mag = 0;
                        for (int64_t q = 0; q < K; q++) {
                            double wq = form == 0 ? wv[q * N + j] : form == 1 ? wv[j * K + q] : xv[(off[it] + j) * K + q];
                            ref += (double)xv[i * K + q] * wq, mag += fabs((double)xv[i * K + q] * wq);
                        }
                        if (form == 1) ref = fmax(ref + bv[j], 0.0), mag += fabs(bv[j]);
                        if (fabs((double)yv[at] - ref) > (double)(K + 3) * FLT_EPSILON * mag + 1e-30)
                            fail_msg("form %d, K %lld N %lld: y[%lld] = %.9g, float64 gives %.9g", form, (long long)K,
                                     (long long)N, (long long)at, (double)yv[at], ref);
                    }
            }
            assert_int_equal(at, outn);
            rj_bind_free(bd);
            rj_program_free(p);
            rj_graph_free(g);
            free(xv), free(wv), free(bv), free(yv);
        }
}

/* head_gemm (util/head_gemm.c), an attention head's products on short items: C = A Bᵀ (B
 * stored n x k, transposed into the scratch) and C = A B, for shapes across its 6-row blocks,
 * 16-column vectors and 64-column blocks, leading dimensions wider than the rows (NaN in the
 * gaps, C's gaps must keep their 7s), against float64 with the bound of run_check; the scratch
 * is exactly head_gemm_scratch_bytes with a guard after it. Skipped without AVX-512. */
static void test_head_gemm(void **state) {
    (void)state;
    if (!head_gemm_ok()) {
        printf("no AVX-512: head_gemm not tested\n");
        return;
    }
    static const int64_t ms[] = {1, 5, 6, 7, 13, 47, 64, 65, 127}, ks[] = {1, 17, 64};
    uint64_t rng = 35;
    for (int mi = 0; mi < 9; mi++)
        for (int ni = 0; ni < 9; ni++)
            for (int ki = 0; ki < 3; ki++)
                for (int tb = 0; tb < 2; tb++) {
                    problem p = {.m = ms[mi], .n = ms[(ni + mi) % 9], .k = ks[ki], .tb = tb, .alpha = 1};
                    problem_fill(&p, &rng);
                    c_init(&p, 0);
                    size_t sb = head_gemm_scratch_bytes(p.n, p.k);
                    unsigned char *scratch = malloc(sb + 64);
                    assert_true(scratch);
                    memset(scratch + sb, 0xA5, 64);
                    if (tb)
                        head_gemm_nt(p.m, p.n, p.k, p.a, p.lda, p.b, p.ldb, p.c, p.ldc, scratch);
                    else
                        head_gemm_nn(p.m, p.n, p.k, p.a, p.lda, p.b, p.ldb, p.c, p.ldc);
                    for (int i = 0; i < 64; i++) assert_int_equal(scratch[sb + i], 0xA5);
                    check(&p, NULL, tb ? "head_gemm_nt" : "head_gemm_nn");
                    free(scratch);
                    problem_free(&p);
                }
}

/* x rounded to bf16 by the definition: of the two bf16 values around it (its bits truncated, and
 * the next one up in magnitude) the nearer, the one with an even last bit on a tie; past the
 * largest finite value the next one is 2^128, which rounds to inf. */
static float bf16_nearest(float x) {
    if (isnan(x) || isinf(x)) return x;
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    uint32_t lo = u & 0xFFFF0000u, hi = lo + 0x10000u;
    float flo, fhi;
    memcpy(&flo, &lo, sizeof flo);
    memcpy(&fhi, &hi, sizeof fhi);
    double dlo = fabs((double)x - (double)flo);
    double dhi = fabs((double)x - (isinf(fhi) ? copysign(ldexp(1.0, 128), (double)x) : (double)fhi));
    return dlo < dhi || (dlo == dhi && !(lo & 0x10000u)) ? flo : fhi;
}

/* x rounded to the 16-bit format of round (HS_ROUND_*), by the compiler's _Float16 for f16
 * (test_head_softmax leaves f16 out where the compiler has none). */
static float round16_ref(float x, int round) {
#if defined(__FLT16_MAX__)
    if (round == HS_ROUND_F16) return __extension__(float)(_Float16)x;
#endif
    return round == HS_ROUND_BF16 ? bf16_nearest(x) : x;
}

/* half_rows_to_f32 / half_rows_from_f32 (util/half.c), the 16-bit tiles' conversions (F16C for
 * f16, AVX2 for bf16 where the CPU has them), against the scalar half_to_f32 / half_from_f32
 * bit for bit: every 16-bit pattern widened, and 2^20 f32 patterns spread over all of them
 * (every sign, exponent and NaN payload) plus ties, the largest values and subnormals rounded,
 * in rows of 37 (8-lane steps and a tail) with wider strides whose gaps must stay. */
static void test_half_rows(void **state) {
    (void)state;
    enum { COLS = 37, LD = 41, ROWS = (1 << 20) / COLS };
    uint16_t *h = malloc(sizeof(uint16_t) * LD * (ROWS + 1));
    float *f = malloc(sizeof(float) * LD * (ROWS + 1));
    assert_true(h && f);
    for (int bf = 0; bf < 2; bf++) {
        for (int64_t i = 0; i < (int64_t)LD * ROWS; i++) /* every pattern, 0xBEEF in the gaps */
            h[i] = (uint16_t)(i % LD < COLS ? i / LD * COLS + i % LD : 0xBEEF);
        memset(f, 0x5A, sizeof(float) * LD * ROWS);
        half_rows_to_f32(f, LD, h, LD, 65536 / COLS + 1, COLS, bf);
        for (int64_t r = 0; r <= 65536 / COLS; r++)
            for (int64_t c = 0; c < LD; c++) {
                uint32_t got, want = 0x5A5A5A5Au;
                memcpy(&got, &f[r * LD + c], sizeof got);
                if (c < COLS) {
                    float w = half_to_f32(h[r * LD + c], bf);
                    memcpy(&want, &w, sizeof want);
                }
                if (got != want)
                    fail_msg("%s widened 0x%04x: 0x%08x, want 0x%08x", bf ? "bf16" : "f16", h[r * LD + c], got, want);
            }
        static const uint32_t edges[] = {0x3F808000u, 0x3F818000u, 0x3F807FFFu, 0x7F7FFFFFu, 0x7F7F8000u, 0x477FF000u,
                                         0x477FEFFFu, 0x00000001u, 0x00008000u, 0x33000000u, 0x33000001u, 0x7F800001u,
                                         0xFF800001u, 0x7FFFFFFFu, 0x80000000u, 0x387FE000u};
        for (int64_t i = 0; i < (int64_t)LD * ROWS; i++) {
            uint32_t u = (uint32_t)(i * 4099u) ^ (uint32_t)(i << 20); /* spread over every pattern */
            if (i % 97 < 16) u = edges[i % 97];
            memcpy(&f[i], &u, sizeof u);
        }
        memset(h, 0xA5, sizeof(uint16_t) * LD * ROWS);
        half_rows_from_f32(h, LD, f, LD, ROWS, COLS, bf);
        for (int64_t r = 0; r < ROWS; r++)
            for (int64_t c = 0; c < LD; c++) {
                uint16_t got = h[r * LD + c], want = c < COLS ? half_from_f32(f[r * LD + c], bf) : 0xA5A5;
                if (got != want) {
                    uint32_t u;
                    memcpy(&u, &f[r * LD + c], sizeof u);
                    fail_msg("%s rounded 0x%08x: 0x%04x, want 0x%04x", bf ? "bf16" : "f16", u, got, want);
                }
            }
    }
    free(h), free(f);
}

/* The softmax's weights of one row of n scores, in float64 from the f32 x = s * scale (s /
 * scale where div) that F's f32 op gives (in 16-bit, s rounded to the format and x rounded
 * again): the reference head_softmax_rows must meet. */
static void softmax_ref(const float *s, int64_t n, float scale, bool div, bool safe, int round, double *p,
                        double *shift) {
    double m = -INFINITY, l = 0;
    for (int64_t j = 0; j < n; j++) {
        float r = round16_ref(s[j], round), x = round16_ref(div ? r / scale : r * scale, round);
        p[j] = x, m = x > m ? x : m;
    }
    if (m == -INFINITY) m = 0;
    for (int64_t j = 0; j < n; j++) shift[j] = isfinite(p[j]) ? fabs(p[j] - m) : 0, l += p[j] = exp(p[j] - m);
    for (int64_t j = 0; j < n; j++) p[j] = safe && l == 0 ? 0 : p[j] / l; /* 0/0: NaN */
}

/* head_softmax_rows (util/head_softmax.c), an attention head's weights over rows of scores in
 * place: rows of 1 to 300 scores (its 16-lane vectors and their masked tails), rows ldc apart
 * (the gaps' 7s must stay), a scale, a divisor or none, scores of -inf (weights exactly 0), a
 * row all -inf (NaN, or 0 in the safe form), a row whose scores overflow exp without the shift,
 * scores as they are or as 16-bit values (rounded to bf16 or f16 before and after the scale),
 * against float64 within (n + 8 + |x - m'|) eps of each weight (x - m' rounds in f32): a
 * rounding left out moves weights by hundreds of eps. Row 3 of 16-bit scores holds ties, the
 * largest values and subnormals of the format. Skipped without AVX-512. */
static void test_head_softmax(void **state) {
    (void)state;
    if (!head_softmax_ok()) {
        printf("no AVX-512: head_softmax not tested\n");
        return;
    }
    static const int64_t ns[] = {1, 5, 16, 17, 45, 64, 300};
    static const float scales[] = {1.0f, 0.125f, 8.0f, 0.17677669f}; /* the last one, 1/sqrt(32), inexact */
    uint64_t rng = 36;
    for (int ni = 0; ni < 7; ni++)
        for (int si = 0; si < 4; si++)
            for (int div = 0; div < 2; div++)
                for (int rd = 0; rd < 2; rd++) /* scores as they are, or 16-bit ones */
                for (int safe = 0; safe < 2; safe++) {
                    int round = !rd ? HS_ROUND_NONE : ni % 2 ? HS_ROUND_BF16 : HS_ROUND_F16;
#if !defined(__FLT16_MAX__)
                    if (round == HS_ROUND_F16) continue;
#endif
                    int64_t n = ns[ni], ldc = n + 3, m = 5;
                    float *c = malloc(sizeof(float) * (size_t)(m * ldc)), *s = malloc(sizeof(float) * (size_t)(m * ldc));
                    double *want = malloc(sizeof(double) * (size_t)n), *shift = malloc(sizeof(double) * (size_t)n);
                    assert_true(c && s && want && shift);
                    for (int64_t i = 0; i < m * ldc; i++) {
                        rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
                        float u = (float)((rng >> 40) & 0xFFFF) / 65536.0f;
                        s[i] = i % ldc >= n ? 7.0f : 40.0f * u - 20.0f;
                        if (i % ldc < n && (rng >> 20) % 7 == 0) s[i] = -INFINITY; /* masked keys */
                    }
                    for (int64_t j = 0; j < n; j++) s[ldc + j] = -INFINITY; /* row 1: every key masked */
                    for (int64_t j = 0; j < n; j++) s[2 * ldc + j] = 1000.0f + (float)j; /* row 2: exp(x) overflows */
                    static const float edges[] = {1.00390625f, 1.01171875f, 3.3895314e38f, 6.5504e4f, 6.5519e4f,
                                                  1e-40f, 5.9604645e-8f, -2.9802322e-8f, 1.0009766f, -7.0f};
                    if (round) /* row 3: ties, the largest values, subnormals (of bf16, of f16) */
                        for (int64_t j = 0; j < n; j++) s[3 * ldc + j] = edges[j % 10];
                    memcpy(c, s, sizeof(float) * (size_t)(m * ldc));
                    head_softmax_rows(m, n, c, ldc, scales[si], div, safe, round);
                    for (int64_t i = 0; i < m; i++) {
                        softmax_ref(s + i * ldc, n, scales[si], div, safe, round, want, shift);
                        for (int64_t j = 0; j < ldc; j++) {
                            float got = c[i * ldc + j];
                            if (j >= n) {
                                assert_true(got == 7.0f);
                                continue;
                            }
                            if (isnan(want[j])) {
                                assert_true(isnan(got));
                                continue;
                            }
                            /* x - m' rounds in f32: exp's relative error grows with |x - m'| */
                            double tol = ((double)(n + 8) + shift[j]) * FLT_EPSILON * fabs(want[j]) + 1e-38;
                            if (!(fabs((double)got - want[j]) <= tol))
                                fail_msg("n %lld scale %g div %d safe %d round %d row %lld col %lld: %.9g, want %.9g",
                                         (long long)n, (double)scales[si], div, safe, round, (long long)i,
                                         (long long)j, (double)got, want[j]);
                            if (want[j] == 0) assert_true(got == 0.0f);
                        }
                    }
                    free(c), free(s), free(want), free(shift);
                }
}

/* bf16 by the definition: the top 16 bits, rounded to nearest even (no NaN here). */
static uint16_t to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return (uint16_t)((u + 0x7FFF + (u >> 16 & 1)) >> 16);
}
static float from_bf16(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* One of ragjit's own sbgemms (amx.c, bf16dot.c) and its packed calls (mode 2) against float64
 * products of the same bf16 values: shapes across AMX's 16-row and 16-column tiles and
 * bf16dot's 14 x 32 blocks (m of 13-15, 28-29: the zero-padded copy of the last rows; n of 31-33),
 * odd k (a last step alone: k of 1, 31, 33, 257), AMX's 32-step tiles, the 256- and 512-step
 * blocks (k = 257, 1100: C accumulated over two and three), B as a linear's weight (n x k) and
 * as k x n, leading dims wider than the rows with NaN in the gaps (a kernel that read them
 * would make NaN of C), and the arguments ragjit never passes (A transposed, beta != 0), which
 * go by the definition. */
static void check_own_sbgemm(const char *what, sbgemm_fn *f, const sgemm_kernel *pk) {
    static const int64_t ms[] = {1, 13, 14, 15, 16, 17, 29, 70}, ns[] = {1, 16, 31, 33, 48, 65},
                         ks[] = {1, 31, 32, 33, 100, 257, 1100};
    uint64_t rng = 99;
    for (size_t a = 0; a < sizeof ms / sizeof ms[0]; a++)
        for (size_t b = 0; b < sizeof ns / sizeof ns[0]; b++)
            for (size_t q = 0; q < sizeof ks / sizeof ks[0]; q++)
                for (int mode = 0; mode < 4; mode++) {
                    int64_t m = ms[a], n = ns[b], k = ks[q];
                    if (mode == 3 && (m > 17 || k > 100)) continue; /* the definition's path: small shapes */
                    bool tb = (mode & 1) || mode == 2, ta = mode == 3; /* 2: packed, B a linear's weight */
                    float beta = mode == 3 ? 0.5f : 0.0f;
                    int64_t lda = (ta ? m : k) + 3, ldb = (tb ? k : n) + 5, ldc = n + 7;
                    int64_t ar = ta ? k : m, br = tb ? n : k;
                    uint16_t *A = malloc(sizeof(uint16_t) * (size_t)(ar * lda)), *B = malloc(sizeof(uint16_t) * (size_t)(br * ldb));
                    float *C = malloc(sizeof(float) * (size_t)(m * ldc));
                    assert_true(A && B && C);
                    for (int64_t i = 0; i < ar * lda; i++) A[i] = i % lda < lda - 3 ? to_bf16((float)rng_uniform(&rng, -1, 1)) : 0x7FC0;
                    for (int64_t i = 0; i < br * ldb; i++) B[i] = i % ldb < ldb - 5 ? to_bf16((float)rng_uniform(&rng, -1, 1)) : 0x7FC0;
                    for (int64_t i = 0; i < m * ldc; i++) C[i] = i % ldc >= n ? 7.0f : beta != 0 ? 0.25f : NAN;
                    if (mode == 2) { /* the packed calls (cpu_gemm.c: op(B) packed once for all chunks) */
                        size_t pb = sgemm_packed_b_bytes(pk, n, k);
                        unsigned char *packed = aligned_alloc(64, (pb + 64 + 63) / 64 * 64);
                        assert_non_null(packed);
                        memset(packed + pb, 0xA5, 64);
                        for (int64_t blk = sgemm_packed_b_blocks(pk, n, k) - 1; blk >= 0; blk--) /* any order */
                            sgemm_pack_b_block(pk, true, n, k, (const float *)(const void *)B, ldb, blk, (float *)(void *)packed);
                        for (int i = 0; i < 64; i++) assert_int_equal(packed[pb + (size_t)i], 0xA5);
                        sgemm_run_packed(pk, m, n, k, (const float *)(const void *)A, lda, (const float *)(const void *)packed,
                                         C, ldc, NULL);
                        free(packed);
                        tb = true;
                    } else {
                        f(BLAS_ROW_MAJOR, ta ? BLAS_TRANS : BLAS_NO_TRANS, tb ? BLAS_TRANS : BLAS_NO_TRANS, (int)m, (int)n,
                          (int)k, 1.0f, A, (int)lda, B, (int)ldb, beta, C, (int)ldc);
                    }
                    for (int64_t i = 0; i < m; i++)
                        for (int64_t j = 0; j < ldc; j++) {
                            float got = C[i * ldc + j];
                            if (j >= n) {
                                if (got != 7.0f) fail_msg("%s: C's gap at (%lld, %lld) was written", what, (long long)i, (long long)j);
                                continue;
                            }
                            double ref = beta != 0 ? 0.25 * beta : 0, mag = fabs(ref);
                            for (int64_t p = 0; p < k; p++) {
                                double t = (double)from_bf16(ta ? A[p * lda + i] : A[i * lda + p]) *
                                           (double)from_bf16(tb ? B[j * ldb + p] : B[p * ldb + j]);
                                ref += t, mag += fabs(t);
                            }
                            if (!(fabs((double)got - ref) <= (double)(k + 3) * FLT_EPSILON * mag + 1e-30))
                                fail_msg("%s: C(%lld, %lld) = %.9g, float64 gives %.9g (m %lld n %lld k %lld, ta %d tb %d)",
                                         what, (long long)i, (long long)j, (double)got, ref, (long long)m, (long long)n,
                                         (long long)k, ta, tb);
                        }
                    free(A), free(B), free(C);
                }
    printf("%s's sbgemm matches float64 on %d shapes\n", what, 4 * 8 * 6 * 7);
}

/* Each own sbgemm this CPU runs (the others say why they are not tested). */
static void test_own_sbgemm(void **state) {
    (void)state;
    static const struct {
        const char *name, *absent;
        sbgemm_fn *(*get)(void);
        const sgemm_kernel *(*kernel)(void);
    } own[] = {
        {"amx.c", "no AMX-BF16 on this CPU (or the OS refuses it, or RAGJIT_AMX=0)", amx_sbgemm_get, amx_kernel},
        {"bf16dot.c", "no AVX512-BF16 on this CPU (or RAGJIT_AVX512BF16=0)", bf16dot_sbgemm_get, bf16dot_kernel},
    };
    for (size_t i = 0; i < sizeof own / sizeof own[0]; i++) {
        sbgemm_fn *f = own[i].get();
        if (!f) {
            printf("%s: %s not tested\n", own[i].absent, own[i].name);
            continue;
        }
        assert_non_null(own[i].kernel());
        check_own_sbgemm(own[i].name, f, own[i].kernel());
    }
}

int main(int argc, char **argv) {
    setenv("RAGJIT_BLAS", "off", 1); /* read once, at ragjit's first product or rj_blas_info */
    const struct CMUnitTest tests[] = {
        FX_SLICED(test_shapes),
        FX(test_special_values),
        FX(test_packed_b),
        FX(test_head_gemm),
        FX(test_head_softmax),
        FX(test_half_rows),
        FX(test_blas_info),
        FX(test_programs),
        FX(test_own_sbgemm),
    };
    return run_group(tests, NULL, NULL, argc, argv);
}
