/*
 * test_loopir.c — the loop IR: target descriptors, the parallel constructs, the printer.
 *
 * The printer keeps no state outside its caller's frame, so two contexts dumping on two
 * threads must each get exactly the single-threaded text: several programs are dumped from
 * two threads at once, many times over, and compared. The dumps of a softmax over the ragged
 * dim and of a layer_norm must show what lowering decided: loop mappings (units, lanes,
 * serial), the thread-local accumulator array, `reduce` statements, the launch shape; a
 * lowering for the CUDA descriptor records its block size. A kernel built by hand uses what
 * lowering does not produce yet (a block-scope local, barrier, a max reduce): it prints, it
 * JIT-compiles and computes the right values on the CPU, and it prints as CUDA C that NVRTC
 * compiles (skipped without NVRTC). The loop-IR checker rejects a reduce outside a lanes loop
 * and one that reads its own accumulator. Composite ops reach no backend (expand.c). A 16-bit
 * vector read alike by every row gets an f32 copy on the CPU alone (widen16.c).
 */
#include "harness.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../src/codegen/simt/simt.h"
#include "../src/codegen/llvm/llvm_backend.h"
#include "../src/ir/pipeline.h"

static const char softmax_src[] =
    "ragged j1 : B\n"
    "input x : f32[B, j1, 64]\n"
    "s = softmax(relu(x * 2.0 + 0.5), dim=1)\n"
    "output s\n";

static const char layernorm_src[] =
    "ragged j1 : B\n"
    "input x : f32[B, j1, 128]\n"
    "input gamma : f32[128]\n"
    "input beta : f32[128]\n"
    "h = layer_norm(x, 128, weight=gamma, bias=beta, eps=1e-5)\n"
    "y = gelu(h) + x\n"
    "output y\n";

static const char *const programs[] = {
    softmax_src,
    layernorm_src,
    "ragged j1 : B\n"
    "input scores : f32[B, j1, 8]\n"
    "input scale : f32[8]\n"
    "p = pad(scores * scale, value=-inf)\n"
    "a = softmax(p, dim=1)\n"
    "attn = unpad(a, j1)\n"
    "output attn\n",
    "ragged j1 : B\n"
    "input x : f32[B, j1, 32]\n"
    "total = sum(x, dim=1)\n"
    "peak = max(x, dim=1)\n"
    "rownorm = sqrt(sum(x * x, dim=2))\n"
    "centered = x - mean(x, dim=1, keepdim=True)\n"
    "d = log_softmax(x, dim=2)\n"
    "output total, peak, rownorm, centered, d\n",
    "ragged j1 : B\n"
    "input x : f64[B, j1, 4, 6]\n"
    "h = x * x + x\n"
    "output h\n",
};
#define NPROG ((int)(sizeof programs / sizeof programs[0]))

/* The "loops" dump of src for target t, or NULL with the context's error. */
static char *dump_loops(rj_ctx *ctx, const char *src, rj_target t) {
    rj_graph *g = rj_graph_parse(ctx, src, "test.rj");
    if (!g) return NULL;
    rj_program *p = rj_program_new(g, t);
    char *text = p ? rj_program_dump(p, "loops") : NULL;
    rj_program_free(p);
    rj_graph_free(g);
    return text;
}

static char *must_dump(rj_ctx *ctx, const char *src) {
    char *text = dump_loops(ctx, src, RJ_TARGET_CPU);
    if (!text) fail_msg("dumping loops: %s", rj_ctx_error(ctx));
    return text;
}

static void expect_in(const char *text, const char *want) {
    if (!strstr(text, want)) fail_msg("no `%s` in the loop IR:\n%s", want, text);
}

/* ---- target descriptors ---------------------------------------------------------------------- */

static void *probe(void *out) {
    *(const target_desc **)out = target_desc_for(RJ_TARGET_CPU);
    return NULL;
}

static void test_target_descriptors(void **state) {
    (void)state;
    /* the first use may come from two threads at once: both see the one probed descriptor */
    const target_desc *d[2];
    pthread_t th[2];
    for (int i = 0; i < 2; i++) assert_int_equal(pthread_create(&th[i], NULL, probe, &d[i]), 0);
    for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
    const target_desc *cpu = target_desc_for(RJ_TARGET_CPU);
    assert_ptr_equal(d[0], cpu);
    assert_ptr_equal(d[1], cpu);
    assert_string_equal(cpu->name, "cpu");
    assert_false(cpu->simt);
    assert_int_equal(cpu->warp, 1);
    assert_int_equal(cpu->max_block, 1);
    assert_int_equal(cpu->shared_bytes, 0);
    assert_true(cpu->vector_bytes == 16 || cpu->vector_bytes == 32 || cpu->vector_bytes == 64);
    assert_true(cpu->l1_bytes > 0 && cpu->l2_bytes >= cpu->l1_bytes);
    assert_ptr_equal(target_desc_for(RJ_TARGET_REFERENCE), cpu);
    const target_desc *cuda = target_desc_for(RJ_TARGET_CUDA);
    assert_non_null(cuda);
    assert_string_equal(cuda->name, "cuda");
    assert_true(cuda->simt);
    assert_int_equal(cuda->warp, 32);
    assert_int_equal(cuda->vector_bytes, 16);
    assert_int_equal(cuda->shared_bytes, 48 << 10);
    assert_int_equal(cuda->max_block, 1024);
    assert_int_equal(cuda->l2_bytes, 50 << 20);
    assert_null(target_desc_for(-1));
    assert_null(target_desc_for(99));
}

/* ---- dumps from two threads ------------------------------------------------------------------ */

#define ITERS 25

typedef struct job {
    char *const *want; /* the single-threaded dumps */
    int mismatches, failures;
    long leaked;
    char first[160];   /* what went wrong first */
} job;

static void *dump_many(void *arg) {
    job *j = arg;
    tracker tr = {0};
    rj_ctx *ctx = rj_ctx_new(tracking_alloc, &tr);
    if (!ctx) {
        j->failures++;
        return NULL;
    }
    for (int it = 0; it < ITERS; it++)
        for (int i = 0; i < NPROG; i++) {
            char *text = dump_loops(ctx, programs[i], RJ_TARGET_CPU);
            if (!text) {
                if (!j->failures++) snprintf(j->first, sizeof j->first, "program %d: %s", i, rj_ctx_error(ctx));
                continue;
            }
            if (strcmp(text, j->want[i]) && !j->mismatches++)
                snprintf(j->first, sizeof j->first, "program %d differs (iteration %d)", i, it);
            rj_string_free(ctx, text);
        }
    rj_ctx_free(ctx);
    j->leaked = tr.live_blocks;
    return NULL;
}

static void test_dump_two_threads(void **state) {
    fixture *f = *state;
    char *want[NPROG];
    for (int i = 0; i < NPROG; i++) want[i] = must_dump(f->ctx, programs[i]);
    job jobs[2] = {{.want = want}, {.want = want}};
    pthread_t th[2];
    for (int t = 0; t < 2; t++) assert_int_equal(pthread_create(&th[t], NULL, dump_many, &jobs[t]), 0);
    for (int t = 0; t < 2; t++) pthread_join(th[t], NULL);
    for (int i = 0; i < NPROG; i++) rj_string_free(f->ctx, want[i]);
    for (int t = 0; t < 2; t++) {
        if (jobs[t].failures || jobs[t].mismatches)
            fail_msg("thread %d: %d failures, %d dumps unlike the single-threaded one; first: %s", t,
                     jobs[t].failures, jobs[t].mismatches, jobs[t].first);
        if (jobs[t].leaked) fail_msg("thread %d leaked %ld blocks", t, jobs[t].leaked);
    }
    printf("%d dumps on each of two threads match the single-threaded ones\n", ITERS * NPROG);
}

/* ---- what the printer shows ---------------------------------------------------------------- */

static void test_print_softmax_ragged(void **state) {
    fixture *f = *state;
    char *t = must_dump(f->ctx, softmax_src);
    expect_in(t, "// launch: units = (item, tile) pairs of j1 over [64]; per thread: a chunk of units, "
                 "lanes vectorised\n");
    expect_in(t, "scratch: f32* local scratch");
    expect_in(t, "\n  local thread f32 scratch[(4 + max(j1)) * tile]\n");
    expect_in(t, "\n  for u in lo .. hi units {\n");
    /* the speculative maximum (lower/items.c, items_softmax): a retry loop run once more only where
     * a column's sum is out of range, its max pass over the first 16 rows the first time */
    expect_in(t, "\n    for pass in 0 .. 2 serial nounroll {\n      if (retry != 0) {\n");
    expect_in(t, "\n        for t in 0 .. tn lanes {\n          scratch[((3 * tn) + t)] = -inf\n");
    expect_in(t, "\n        for i in 0 .. ((pass == 0) ? minimum(len, 16) : len) serial {\n          for t in 0 .. tn lanes {\n");
    expect_in(t, "scratch[t] = (((pass == 0) || ((scratch[(tn + t)] <= 1.0000000150474662e+30) == false)) ? "
                 "scratch[((3 * tn) + t)] : scratch[t])");
    expect_in(t, "retry = maximum(retry, ((scratch[(tn + t)] <= 1.0000000150474662e+30) ? 0 : 1))");
    expect_in(t, "\n    for i in 0 .. len serial {\n      for t in 0 .. tn lanes {\n");
    /* per-lane accumulators over the serial row loop: stores to the local, no reduce */
    expect_in(t, "scratch[%0] = maximum(scratch[%0], ");
    assert_null(strstr(t, "reduce"));
    rj_string_free(f->ctx, t);
    /* 256 columns of f32 with AVX-512 (lower/items.c, state_tile): a kernel of two constant tiles of
     * 128 whose accumulators have an array of their own, and its twin of runtime tiles for
     * items too long for its stash (with AVX2, tiles of 32 columns would take 64) */
    if (target_desc_for(RJ_TARGET_CPU)->vector_bytes != 64) return;
    t = must_dump(f->ctx, "ragged j1 : B\ninput x : f32[B, j1, 256]\ns = softmax(x, dim=1)\noutput s\n");
    expect_in(t, "// launch: units = (item, 128-wide tile) pairs of j1 over [256]; per thread: a chunk of units, "
                 "lanes vectorised; runs when max(j1) rows of 128 columns fit the stash budget\nkernel k0(");
    expect_in(t, "\n  local thread f32 scratch[max(j1) * 128]\n  local thread f32 acc[512]\n");
    expect_in(t, "\n        for t in 0 .. 128 lanes {\n          acc[(384 + t)] = -inf\n");
    expect_in(t, "\n              scratch[((i * 128) + t)] = e\n");
    expect_in(t, "// launch: units = (item, tile) pairs of j1 over [256]; per thread: a chunk of units, lanes "
                 "vectorised; runs when max(j1) rows of 128 columns exceed the stash budget\nkernel k0_tiles(");
    expect_in(t, "\n  local thread f32 scratch[(4 + max(j1)) * tile]\n");
    rj_string_free(f->ctx, t);
}

static void test_print_layer_norm(void **state) {
    fixture *f = *state;
    char *t = must_dump(f->ctx, layernorm_src);
    expect_in(t, "// launch: units = rows of j1; per thread: a chunk of units, lanes vectorised\n");
    expect_in(t, "\n  for b in blo .. bhi units {\n");
    /* two rows a unit, phase by phase: statistics of both, then both rstd, then both writes */
    expect_in(t, "\n    for ip in 0 .. idiv((n + 1), 2) units {\n      two = ");
    expect_in(t, "\n        for d2 in 0 .. 128 lanes {\n          row[d2] = (x[");
    expect_in(t, "\n          reduce acc += (x[");
    expect_in(t, "\n          reduce acc2 += %0 * %0  // fused multiply-add\n");
    expect_in(t, "\n          row_2[d2] = (x[");
    expect_in(t, "\n        slow = maximum(retry, retry_2)\n        if (slow == 0) {\n          rstd = ");
    expect_in(t, "\n          rstd_2 = ");
    /* the statistics are scalars; x - k of each row is kept for the write pass, which reads
     * neither x nor anything fused into it again */
    expect_in(t, "\n  local thread f32 row[128]\n  local thread f32 row_2[128]\n");
    expect_in(t, "\n            r = ((((row[d2] - m1) * rstd) * gamma[d2]) + beta[d2])\n");
    expect_in(t, "\n            r = ((((row_2[d2] - m1_2) * rstd_2) * gamma[d2]) + beta[d2])\n");
    /* a pair that must be summed again, or an odd last row: row by row, one copy of the code,
     * where rows whose sums overflowed or whose first element is far from their mean are
     * summed again */
    expect_in(t, "\n      for q in 0 .. ((slow != 0) ? (two + 1) : 0) serial nounroll {\n        k0 = ");
    expect_in(t, "\n        if (retry != 0) {\n          for pass in 0 .. 2 serial nounroll {\n");
    assert_null(strstr(t, "retry_2 != 0"));
    rj_string_free(f->ctx, t);
    /* rms_norm keeps the row itself, here its fused producer's value */
    t = must_dump(f->ctx, "ragged j1 : B\ninput x : f32[B, j1, 96]\ninput a : f32[B, j1, 96]\n"
                          "y = rms_norm(x + a, 96)\noutput y\n");
    expect_in(t, "\n  local thread f32 row[96]\n");
    expect_in(t, "\n          row[d2] = (x[");
    expect_in(t, " = (row[d2] * rstd)");
    assert_null(strstr(t, "acc = (acc"));
    rj_string_free(f->ctx, t);
}

static void test_print_dense_axis(void **state) {
    fixture *f = *state;
    char *t = must_dump(f->ctx, programs[3]);
    expect_in(t, "// launch: units = rows of j1; per thread");
    expect_in(t, "\n        reduce acc max= x[");
    expect_in(t, "\n        reduce acc2 += exp((x[");
    expect_in(t, "\n        reduce acc += (%0 * %0)\n");
    expect_in(t, "\n  local thread f32 scratch[tile]\n");
    rj_string_free(f->ctx, t);
}

/* Lowering for the CUDA descriptor records a SIMT launch (printed from the internal API: a
 * CUDA program needs a device). */
static void test_print_simt_launch(void **state) {
    fixture *f = *state;
    rj_graph *g = rj_graph_parse(f->ctx, layernorm_src, "test.rj");
    assert_non_null(g);
    compiled c;
    assert_int_equal(pipeline_run(g, target_desc_for(RJ_TARGET_CUDA), &c), RJ_OK);
    assert_true(c.lp.nkernels > 0);
    assert_true(c.lp.kernels[0].launch.simt);
    assert_int_equal(c.lp.kernels[0].launch.block, 256);
    assert_int_equal(c.lp.kernels[0].launch.group, 32); /* a warp per row */
    sbuf b;
    sbuf_init(&b, f->ctx);
    print_lprog(&b, c.opt, &c.lp);
    char *t = sbuf_finish(&b);
    assert_non_null(t);
    expect_in(t, "// launch: units = rows of j1; blocks of 256 threads; per group of 32 threads: a chunk "
                 "of units, lanes across them\n");
    rj_string_free(f->ctx, t);
    compiled_free(&c);
    assert_int_equal(pipeline_run(g, target_desc_for(RJ_TARGET_CPU), &c), RJ_OK);
    assert_false(c.lp.kernels[0].launch.simt);
    assert_int_equal(c.lp.kernels[0].launch.block, 1);
    compiled_free(&c);
    rj_graph_free(g);
}

/* Per-item products on a SIMT target: q kᵀ and p v are block-wide kernels over pieces of
 * items that stage tiles in shared memory between barriers (the plain kernel has neither). */
static void test_simt_item_products_tiled(void **state) {
    fixture *f = *state;
    rj_graph *g = rj_graph_parse(f->ctx,
                                 "ragged j1 : B\n"
                                 "input q : f32[B, j1, 64]\n"
                                 "input k : f32[B, j1, 64]\n"
                                 "input v : f32[B, j1, 48]\n"
                                 "p = softmax(q @ k.transpose(1, 2) / 8.0, dim=2)\n"
                                 "o = p @ v\n"
                                 "output p, o\n",
                                 "test.rj");
    assert_non_null(g);
    for (rj_target t = RJ_TARGET_CUDA; t <= RJ_TARGET_OPENCL; t++) {
        compiled c;
        assert_int_equal(pipeline_run(g, target_desc_for(t), &c), RJ_OK);
        int tiled = 0;
        for (int32_t i = 0; i < c.lp.nkernels; i++) {
            const lkernel *k = &c.lp.kernels[i];
            if (!strstr(k->what, "per-item product")) continue;
            assert_non_null(strstr(k->what, "tiled in shared memory"));
            assert_int_equal(k->domain, UD_PIECES);
            assert_int_equal(k->launch.group, k->launch.block);
            int block_locals = 0, barriers = 0;
            for (int32_t l = 0; l < k->nlocals; l++) block_locals += k->locals[l].scope == LL_BLOCK;
            for (int32_t s = 0; s < k->nst; s++) barriers += k->st[s].kind == LS_BARRIER;
            assert_int_equal(block_locals, 2);
            assert_int_equal(barriers, 2);
            tiled++;
        }
        assert_int_equal(tiled, 2);
        compiled_free(&c);
    }
    rj_graph_free(g);
}

/* Composite ops reach no backend: after the pipeline (expand.c) the loop IR of every target
 * holds no gelu, gelu_tanh, silu, sigmoid, rsqrt, sgn or relu, and no pow whose exponent is a
 * literal pow_expand names; erfc stands in gelu's place, and a pow of another exponent stays. */
static bool composite(const lkernel *k, int32_t id, void *ud) {
    (void)ud;
    const lx *e = &k->ex[id];
    if (e->kind == LX_UNARY)
        switch (e->fn) {
        case RJ_OP_GELU: case RJ_OP_GELU_TANH: case RJ_OP_SILU: case RJ_OP_SIGMOID:
        case RJ_OP_RSQRT: case RJ_OP_SGN: case RJ_OP_RELU: return true;
        default: return false;
        }
    if (e->kind != LX_BINARY || e->fn != RJ_OP_POW || k->ex[e->b].kind != LX_CONST) return false;
    return pow_expand(k->ex[e->b].f) != POWX_NONE;
}

static bool is_fn(const lkernel *k, int32_t id, void *ud) {
    return (k->ex[id].kind == LX_UNARY || k->ex[id].kind == LX_BINARY) && k->ex[id].fn == *(const int *)ud;
}

/* Whether fn (NULL: composite) holds anywhere in the statements of the kernels of lp. */
static bool lprog_has(const lprog *lp, lx_visit_fn fn, void *ud) {
    for (int32_t i = 0; i < lp->nkernels; i++) {
        const lkernel *k = &lp->kernels[i];
        uint32_t *seen = calloc((size_t)k->nex + 1, sizeof *seen);
        bool hit = false;
        for (int32_t s = 0; s < k->nst && !hit; s++) {
            int32_t ex[2];
            int n = ls_exprs(&k->st[s], ex);
            for (int j = 0; j < n && !hit; j++) hit = lx_visit(k, ex[j], fn, ud, seen, 1);
        }
        free(seen);
        if (hit) return true;
    }
    return false;
}

static void test_expand_composites(void **state) {
    fixture *f = *state;
    rj_graph *g = rj_graph_parse(f->ctx,
                                 "ragged j1 : B\n"
                                 "input x : f32[B, j1, 16]\n"
                                 "input d : f64[B, j1, 16]\n"
                                 "input n : i32[B, j1, 16]\n"
                                 "a = gelu(x) + gelu(x, approximate=\"tanh\") + silu(x) + sigmoid(x) + rsqrt(x)\n"
                                 "b = sign(x) + relu(x) + pow(x, 2) + pow(x, 3) + pow(x, 0.5) + pow(x, -1) + pow(x, 1.0) + pow(x, 1.5)\n"
                                 "c = gelu(d) * sign(d) + relu(d)\n"
                                 "m = sign(n) + relu(n)\n"
                                 "s = softmax(a + b, dim=1)\n"
                                 "output a, b, c, m, s\n",
                                 "test.rj");
    assert_non_null(g);
    for (rj_target t = RJ_TARGET_CPU; t <= RJ_TARGET_OPENCL; t++) {
        compiled c;
        assert_int_equal(pipeline_run(g, target_desc_for(t), &c), RJ_OK);
        assert_false(lprog_has(&c.lp, composite, NULL));
        int erfc = LOP_ERFC, pow = RJ_OP_POW;
        assert_true(lprog_has(&c.lp, is_fn, &erfc));
        assert_true(lprog_has(&c.lp, is_fn, &pow)); /* pow(x, 1.5) */
        compiled_free(&c);
    }
    rj_graph_free(g);
}

/* A 16-bit vector every row reads alike gets an f32 copy, filled once a call (widen16.c): on
 * the CPU only, for constant shapes only, and within the stack budget. */
static bool has_copy(const lprog *p, const char *name) {
    for (int32_t k = 0; k < p->nkernels; k++)
        for (int32_t l = 0; l < p->kernels[k].nlocals; l++)
            if (!strcmp(p->kernels[k].locals[l].name, name)) return true;
    return false;
}

static void test_widen16(void **state) {
    fixture *f = *state;
    char *t = must_dump(f->ctx,
                        "ragged j1 : B\n"
                        "input x : bf16[B, j1, 128]\n"
                        "input gamma : bf16[128]\n"
                        "input beta : bf16[128]\n"
                        "input big : bf16[9000]\n"
                        "input z : bf16[B, j1, 9000]\n"
                        "input h : f32[128]\n"
                        "y = layer_norm(x, 128, weight=gamma, bias=beta) * h\n"
                        "u = z * big\n"
                        "output y, u\n");
    expect_in(t, "\n  local thread f32 gamma_f32[128]\n");
    expect_in(t, "\n  local thread f32 beta_f32[128]\n");
    expect_in(t, " lanes {\n    gamma_f32[ws] = gamma[ws]\n  }\n");
    expect_in(t, " * gamma_f32[d2]) + beta_f32[d2])");
    assert_null(strstr(t, "x_f32"));   /* ragged: not a constant size */
    assert_null(strstr(t, "h_f32"));   /* f32 already */
    assert_null(strstr(t, "big_f32")); /* 9000 elements: over the budget of 8192 */
    rj_string_free(f->ctx, t);
    rj_graph *g = rj_graph_parse(f->ctx,
                                 "ragged j1 : B\n"
                                 "input x : f16[B, j1, 64]\n"
                                 "input w : f16[64]\n"
                                 "y = relu(x * w)\n"
                                 "output y\n",
                                 "test.rj");
    assert_non_null(g);
    for (rj_target tg = RJ_TARGET_CPU; tg <= RJ_TARGET_OPENCL; tg++) {
        compiled c;
        assert_int_equal(pipeline_run(g, target_desc_for(tg), &c), RJ_OK);
        assert_int_equal(has_copy(&c.lp, "w_f32"), tg == RJ_TARGET_CPU); /* SIMT targets keep their loads */
        compiled_free(&c);
    }
    rj_graph_free(g);
}

/* An index tensor is checked once a run per bound, however many index ops use it: two
 * embeddings of the same ids in tables of the same rows share one check; a table of another
 * row count, or other ids, gets its own. */
static void test_checks_once(void **state) {
    fixture *f = *state;
    rj_graph *g = rj_graph_parse(f->ctx,
                                 "ragged j1 : B\n"
                                 "input ids : i64[B, j1]\n"
                                 "input other : i64[B, j1]\n"
                                 "input t1 : f32[V, 8]\n"
                                 "input t2 : f32[V, 8]\n"
                                 "input t3 : f32[W, 8]\n"
                                 "a = embedding(t1, ids).sum(dim=1) + embedding(t2, ids).sum(dim=1)\n"
                                 "b = embedding(t1, ids).mean(dim=1) + embedding(t3, ids).sum(dim=1)\n"
                                 "c = embedding(t1, other).sum(dim=1)\n"
                                 "output a, b, c\n",
                                 "test.rj");
    assert_non_null(g);
    for (rj_target t = RJ_TARGET_CPU; t <= RJ_TARGET_OPENCL; t++) {
        compiled c;
        assert_int_equal(pipeline_run(g, target_desc_for(t), &c), RJ_OK);
        assert_int_equal(c.lp.nchecks, 3); /* ids < V, ids < W, other < V */
        compiled_free(&c);
    }
    rj_graph_free(g);
}

/* ---- a kernel built by hand ------------------------------------------------------------------ */

#define ROW 8

static int32_t ex(lkernel *k, lx e) {
    if (e.kind != LX_LOAD && e.kind != LX_BINARY && e.kind != LX_UNARY) e.a = e.b = e.c = -1;
    int32_t id = lk_expr(k, &e);
    assert_true(id >= 0);
    return id;
}
static int32_t ci(lkernel *k, int64_t v) { return ex(k, (lx){.kind = LX_CONST, .type = RJ_I64, .i = v, .ref = -1}); }
static int32_t cf(lkernel *k, double v) { return ex(k, (lx){.kind = LX_CONST, .type = RJ_F32, .f = v, .ref = -1}); }
static int32_t var(lkernel *k, int32_t v) {
    return ex(k, (lx){.kind = LX_VAR, .type = k->vars[v].type, .ref = v});
}
static int32_t param(lkernel *k, int32_t p) { return ex(k, (lx){.kind = LX_PARAM, .type = RJ_I64, .ref = p}); }
static int32_t bin(lkernel *k, int fn, int t, int32_t a, int32_t b) {
    return ex(k, (lx){.kind = LX_BINARY, .type = (uint8_t)t, .fn = (uint16_t)fn, .a = a, .b = b, .c = -1, .ref = -1});
}
static int32_t load(lkernel *k, int mem, int32_t ref, int t, int32_t idx) {
    return ex(k, (lx){.kind = LX_LOAD, .type = (uint8_t)t, .fn = (uint16_t)mem, .ref = ref, .a = idx, .b = -1, .c = -1});
}

/* Appends statement s to the block whose last statement is *last (or that starts at *first). */
static int32_t add(lkernel *k, int32_t *first, int32_t *last, ls s) {
    if (s.kind != LS_FOR) s.body = -1;
    s.els = -1;
    int32_t id = lk_stmt(k, &s);
    assert_true(id >= 0);
    if (*last >= 0) k->st[*last].next = id;
    else *first = id;
    *last = id;
    return id;
}

/*
 *   for u in lo .. hi units {
 *     m = -inf; s = 0
 *     for t in 0 .. ROW lanes { reduce m max= x[u*ROW + t]; reduce s += x[..] * x[..] (fma) }
 *     sh[0] = m; part[1] = s          (block-scope and thread-scope locals)
 *     barrier
 *     y[u] = sh[0] + part[1]
 *   }
 */
static void build_kernel(lkernel *k) {
    int32_t plo = lk_param(k, PK_LO, 0, RJ_I64, "lo"), phi = lk_param(k, PK_HI, 0, RJ_I64, "hi");
    int32_t px = lk_param(k, PK_BUF, 0, RJ_F32, "x"), py = lk_param(k, PK_BUF, 1, RJ_F32, "y");
    k->params[py].written = 1;
    int32_t sh = lk_local(k, "sh", LL_BLOCK, RJ_F32), part = lk_local(k, "part", LL_THREAD, RJ_F32);
    assert_true(plo >= 0 && phi >= 0 && px >= 0 && py >= 0 && sh >= 0 && part >= 0);
    k->locals[sh].elems = 4;
    k->locals[part].elems = 2;
    int32_t vu = lk_var(k, "u", RJ_I64), vt = lk_var(k, "t", RJ_I64);
    int32_t vm = lk_var(k, "m", RJ_F32), vs = lk_var(k, "s", RJ_F32);
    k->domain = UD_DENSE;
    k->dom_rank = 1;
    k->dom_dims[0] = 5;
    int32_t top = -1, topl = -1, ub = -1, ubl = -1, lb = -1, lbl = -1;
    int32_t fu = add(k, &top, &topl, (ls){.kind = LS_FOR, .map = LM_UNITS, .var = vu, .a = param(k, plo),
                                          .b = param(k, phi), .ref = -1, .body = -1});
    add(k, &ub, &ubl, (ls){.kind = LS_SET, .var = vm, .a = cf(k, -INFINITY), .b = -1, .ref = -1});
    add(k, &ub, &ubl, (ls){.kind = LS_SET, .var = vs, .a = cf(k, 0), .b = -1, .ref = -1});
    int32_t ft = add(k, &ub, &ubl, (ls){.kind = LS_FOR, .map = LM_LANES, .var = vt, .a = ci(k, 0),
                                        .b = ci(k, ROW), .ref = -1, .body = -1});
    int32_t xv = load(k, MEM_PARAM, px, RJ_F32,
                      bin(k, RJ_OP_ADD, RJ_I64, bin(k, RJ_OP_MUL, RJ_I64, var(k, vu), ci(k, ROW)), var(k, vt)));
    add(k, &lb, &lbl, (ls){.kind = LS_REDUCE, .fn = RJ_OP_MAXIMUM, .var = vm, .a = xv, .b = -1, .ref = -1});
    add(k, &lb, &lbl, (ls){.kind = LS_REDUCE, .flags = LF_FMA, .fn = RJ_OP_ADD, .var = vs, .a = xv, .b = xv,
                           .ref = -1});
    k->st[ft].body = lb;
    add(k, &ub, &ubl, (ls){.kind = LS_STORE, .mem = MEM_LOCAL, .var = -1, .a = ci(k, 0), .b = var(k, vm), .ref = sh});
    add(k, &ub, &ubl, (ls){.kind = LS_STORE, .mem = MEM_LOCAL, .var = -1, .a = ci(k, 1), .b = var(k, vs), .ref = part});
    add(k, &ub, &ubl, (ls){.kind = LS_BARRIER, .var = -1, .a = -1, .b = -1, .ref = -1});
    int32_t y = bin(k, RJ_OP_ADD, RJ_F32, load(k, MEM_LOCAL, sh, RJ_F32, ci(k, 0)),
                    load(k, MEM_LOCAL, part, RJ_F32, ci(k, 1)));
    add(k, &ub, &ubl, (ls){.kind = LS_STORE, .mem = MEM_PARAM, .var = -1, .a = var(k, vu), .b = y, .ref = py});
    k->st[fu].body = ub;
    k->body = top;
    snprintf(k->what, sizeof k->what, "built by hand");
}

/* The CUDA image of lp (NVRTC present): for sm_90 PTX and a cubin (ELF for EM_CUDA) from one
 * compile; for an architecture newer than NVRTC knows, PTX alone. Packed and unpacked, the
 * image comes back byte for byte; every truncation, a length field off by one, a PTX without
 * its NUL or a byte too many is refused. */
static void check_cuda_image(rj_ctx *ctx, const lprog *lp) {
    cuda_image im, back, newer;
    assert_int_equal(cuda_image_build(ctx, lp, 90, true, &im), RJ_OK);
    expect_in(im.ptx, ".entry k0(");
    expect_in(im.ptx, ".target sm_90");
    assert_non_null(im.cubin);
    assert_true(im.cubin_len > 64);
    assert_memory_equal(im.cubin, "\x7f" "ELF", 4);
    assert_int_equal(im.cubin[18] | im.cubin[19] << 8, 190); /* e_machine: EM_CUDA */
    assert_int_equal(cuda_image_build(ctx, lp, 9999, true, &newer), RJ_OK);
    assert_null(newer.cubin);
    expect_in(newer.ptx, ".entry k0(");
    cuda_image_free(ctx, &newer);
    void *data;
    size_t len;
    assert_int_equal(cuda_image_pack(ctx, &im, &data, &len), RJ_OK);
    assert_true(cuda_image_unpack(ctx, data, len, &back));
    assert_string_equal(back.ptx, im.ptx);
    assert_int_equal(back.cubin_len, im.cubin_len);
    assert_memory_equal(back.cubin, im.cubin, im.cubin_len);
    cuda_image_free(ctx, &back);
    for (size_t n = 0; n < len; n++) {
        assert_false(cuda_image_unpack(ctx, data, n, &back));
        assert_null(back.ptx);
    }
    unsigned char *b = data, *more = malloc(len + 1);
    assert_non_null(more);
    memcpy(more, b, len);
    more[len] = 0;
    assert_false(cuda_image_unpack(ctx, more, len + 1, &back));
    free(more);
    size_t pl = strlen(im.ptx) + 1;
    for (int d = -1; d <= 1; d += 2) {
        b[0] = (unsigned char)(b[0] + d); /* the PTX's length */
        assert_false(cuda_image_unpack(ctx, data, len, &back));
        b[0] = (unsigned char)(b[0] - d);
        b[8 + pl] = (unsigned char)(b[8 + pl] + d); /* the cubin's */
        assert_false(cuda_image_unpack(ctx, data, len, &back));
        b[8 + pl] = (unsigned char)(b[8 + pl] - d);
    }
    b[8 + pl - 1] = 'x'; /* the PTX's NUL */
    assert_false(cuda_image_unpack(ctx, data, len, &back));
    b[8 + pl - 1] = 0;
    assert_true(cuda_image_unpack(ctx, data, len, &back));
    cuda_image_free(ctx, &back);
    mem_free(ctx, data, len);
    cuda_image_free(ctx, &im);
}

static void test_hand_built_kernel(void **state) {
    fixture *f = *state;
    rj_ctx *ctx = f->ctx;
    lprog lp = {.ctx = ctx};
    lkernel *k = lprog_add_kernel(&lp, "k0");
    assert_non_null(k);
    build_kernel(k);
    assert_int_equal(lprog_verify(&lp), RJ_OK);

    /* the printer */
    rj_graph *g = rj_graph_new(ctx);
    sbuf b;
    sbuf_init(&b, ctx);
    print_lprog(&b, g, &lp);
    char *t = sbuf_finish(&b);
    assert_non_null(t);
    expect_in(t, "// launch: units = indices of [5]; per thread: a chunk of units, lanes vectorised\n"
                 "kernel k0(lo: i64, hi: i64, x: f32* in, y: f32* out) {\n"
                 "  local block f32 sh[4]\n"
                 "  local thread f32 part[2]\n"
                 "  for u in lo .. hi units {\n");
    expect_in(t, "    for t in 0 .. 8 lanes {\n"
                 "      reduce m max= x[((u * 8) + t)]\n"
                 "      %0 = x[((u * 8) + t)]\n"
                 "      reduce s += %0 * %0  // fused multiply-add\n"
                 "    }\n"
                 "    sh[0] = m\n"
                 "    part[1] = s\n"
                 "    barrier\n"
                 "    y[u] = (sh[0] + part[1])\n");
    rj_string_free(ctx, t);
    rj_graph_free(g);

    /* on the CPU: reduce accumulates, barrier is nothing, locals are stack arrays */
    void *fn = NULL;
    llvm_module_code *code = NULL;
    struct llvm_jit *jit = NULL;
    void *obj = NULL;
    size_t len = 0;
    if (llvm_jit_new(ctx, &jit) || llvm_object(ctx, jit, &lp, "t_", NULL, 1, &obj, &len) ||
        llvm_load(ctx, jit, &lp, "t_", NULL, obj, len, &fn, &code))
        fail_msg("llvm_object/llvm_load: %s", rj_ctx_error(ctx));
    mem_free(ctx, obj, len);
    float x[5 * ROW], y[5] = {0};
    for (int i = 0; i < 5 * ROW; i++) x[i] = (float)((i * 7) % 11) - 4.0f;
    void (*kernel)(int64_t, int64_t, const float *, float *);
    memcpy(&kernel, &fn, sizeof kernel); /* ISO C has no object-to-function pointer cast */
    kernel(1, 5, x, y);
    assert_true(y[0] == 0.0f); /* outside [lo, hi) */
    for (int u = 1; u < 5; u++) {
        float m = -INFINITY, s = 0;
        for (int t2 = 0; t2 < ROW; t2++) {
            float v = x[u * ROW + t2];
            m = v > m ? v : m;
            s += v * v;
        }
        if (y[u] != m + s) fail_msg("y[%d] = %g, expected %g", u, (double)y[u], (double)(m + s));
    }
    llvm_code_free(ctx, code);
    llvm_jit_free(jit);

    /* as CUDA C: __shared__ for the block local, __syncthreads() for the barrier */
    char *src = cuda_source(ctx, &lp);
    assert_non_null(src);
    expect_in(src, "    __shared__ float l0_sh[4];\n    float l1_part[2];\n");
    expect_in(src, " = rj_max(v2_m, p2_x[");
    expect_in(src, " = fmaf(t0, t0, v3_s);\n");
    expect_in(src, "        __syncthreads();\n");
    expect_in(src, "        p3_y[v0_u] = (l0_sh[0LL] + l1_part[1LL]);\n");
    rj_string_free(ctx, src);
    char *ptx = cuda_ptx(ctx, &lp, 90);
    if (!ptx) {
        if (rj_ctx_status(ctx) != RJ_ERR_NO_DEVICE) fail_msg("NVRTC: %s", rj_ctx_error(ctx));
        printf("NVRTC not compiled: %s\n", rj_ctx_error(ctx));
    } else {
        expect_in(ptx, ".entry k0(");
        expect_in(ptx, "bar.sync");
        rj_string_free(ctx, ptx);
        check_cuda_image(ctx, &lp);
    }
    lprog_free(&lp);
}

/* ---- the checker ------------------------------------------------------------------------------ */

static void test_verify_rejects(void **state) {
    fixture *f = *state;
    rj_ctx *ctx = f->ctx;
    { /* on a SIMT target, a barrier needs the block to run its units in step */
        lprog lp = {.ctx = ctx};
        lkernel *k = lprog_add_kernel(&lp, "k0");
        assert_non_null(k);
        build_kernel(k);
        k->launch = (launch_shape){.simt = true, .block = 256, .group = 256};
        assert_int_equal(lprog_verify(&lp), RJ_OK);
        k->launch.group = 32;
        assert_int_equal(lprog_verify(&lp), RJ_ERR_INTERNAL);
        expect_in(rj_ctx_error(ctx), "not whole blocks");
        lprog_free(&lp);
    }
    for (int c = 0; c < 3; c++) {
        lprog lp = {.ctx = ctx};
        lkernel *k = lprog_add_kernel(&lp, "k0");
        assert_non_null(k);
        build_kernel(k);
        /* the lanes loop is the third statement of the unit loop's body */
        int32_t ub = k->st[k->body].body, ft = k->st[k->st[ub].next].next;
        int32_t red = k->st[ft].body;
        const char *want;
        if (c == 0) {
            k->st[ft].map = LM_SERIAL;
            want = "a reduce outside any lanes loop";
        } else if (c == 1) {
            k->st[red].a = var(k, k->st[red].var);
            want = "a reduce whose value reads its own accumulator";
        } else {
            k->st[red].fn = RJ_OP_SUB;
            want = "a reduce with an op other than";
        }
        assert_int_equal(lprog_verify(&lp), RJ_ERR_INTERNAL);
        expect_in(rj_ctx_error(ctx), want);
        expect_in(rj_ctx_error(ctx), "kernel k0");
        lprog_free(&lp);
    }
}

int main(void) {
    /* the dumps below read one row a step, as the CPU descriptor chooses on AMD processors
     * (target.c: row_streams); elsewhere it folds eight, so the expectations fix it */
    setenv("RAGJIT_ROW_STREAMS", "1", 1);
    const struct CMUnitTest tests[] = {
        FX(test_target_descriptors),   FX(test_dump_two_threads), FX(test_print_softmax_ragged),
        FX(test_print_layer_norm),     FX(test_print_dense_axis), FX(test_print_simt_launch),
        FX(test_simt_item_products_tiled), FX(test_expand_composites), FX(test_checks_once),
        FX(test_widen16),
        FX(test_hand_built_kernel),    FX(test_verify_rejects),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
