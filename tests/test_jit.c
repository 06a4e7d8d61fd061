/*
 * test_jit.c — the CPU JIT against the reference interpreter.
 *
 * Every op, a corpus of fused chains (pad -> op -> unpad chains whose padding value matters
 * among them) and random chains (stdenv.h: std_random_chain) are compiled for the CPU and
 * compared with the interpreter on random ragged data of every length pattern (B=1, B=0, empty rows, all empty, one item 1000x longer,
 * skewed), on 1 and on 2 threads, the second with streaming (non-temporal) stores forced.
 * Results on 1 and 2 threads must be bitwise identical.
 *
 * Tolerances (documented in docs/guide.md): the JIT computes f32 in f32 (accumulations
 * included, and FMA contraction is allowed) and uses polynomial exp/log/tanh/erf within
 * 2.5 ulp, while the interpreter computes in double and rounds each op; so for f32
 *     |jit - ref| <= 1e-4 |ref| + 2e-5 max(1, max |ref| of the output),
 * and for f64 the same with 1e-10 and 1e-12. Integers and bools must match exactly.
 */
#include "stdenv.h"

#include <dlpack/dlpack.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../src/runtime/runtime.h"


/* Compiles g for both targets and compares every output on every length pattern, with 1 and
 * 2 threads (the two must agree bitwise), and once more with the jagged inputs bound as views
 * with holes (hole rows hold values that would show in any result that read them). */
static void check_graph(rj_ctx *ctx, env *e, const char *name) {
    if (rj_graph_status(e->g) != RJ_OK) fail_msg("%s: building: %s", name, rj_ctx_error(ctx));
    rj_program *pc = rj_program_new(e->g, RJ_TARGET_CPU);
    if (!pc) fail_msg("%s: compiling: %s", name, rj_ctx_error(ctx));
    rj_program *pr = rj_program_new(e->g, RJ_TARGET_REFERENCE);
    assert_non_null(pr);
    rj_bind *bc = rj_bind_new(pc), *bc2 = rj_bind_new(pc), *br = rj_bind_new(pr);
    rj_bind *bh = rj_bind_new(pc), *brh = rj_bind_new(pr);
    int nout = rj_graph_output_count(e->g);
    for (int p = 0; p < LEN_PATTERN_COUNT; p++) {
        data d = data_new((len_pattern)p, e->ft, (uint64_t)strlen(name) + 7);
        bind_all(ctx, bc, e, &d, NULL);
        bind_all(ctx, bc2, e, &d, NULL);
        bind_all(ctx, br, e, &d, NULL);
        holes h = holes_new(&d, e->ft);
        bind_all(ctx, bh, e, &d, &h);
        bind_all(ctx, brh, e, &d, &h);
        rj_ctx_set_threads(ctx, 1);
        rj_status s = rj_program_run(pc, bc);
        if (s) fail_msg("%s (%s): run: %s", name, len_pattern_names[p], rj_ctx_error(ctx));
        rj_ctx_set_threads(ctx, 2);
        cpu_set_stream_bytes(ctx, 1); /* streaming stores forced on the 2-thread run */
        assert_ok(ctx, rj_program_run(pc, bc2));
        s = rj_program_run(pc, bh);
        if (s) fail_msg("%s (%s, with holes): run: %s", name, len_pattern_names[p], rj_ctx_error(ctx));
        cpu_set_stream_bytes(ctx, 0);
        assert_ok(ctx, rj_program_run(pr, br));
        assert_ok(ctx, rj_program_run(pr, brh));
        for (int o = 0; o < nout; o++) {
            rj_node out = rj_graph_output_at(e->g, o);
            rj_tensor_info gi, gi2, ri, hi, rhi;
            rj_tensor_get_info(rj_bind_result(bc, out), &gi);
            rj_tensor_get_info(rj_bind_result(bc2, out), &gi2);
            rj_tensor_get_info(rj_bind_result(br, out), &ri);
            rj_tensor_get_info(rj_bind_result(bh, out), &hi);
            rj_tensor_get_info(rj_bind_result(brh, out), &rhi);
            char what[160];
            snprintf(what, sizeof what, "%s, output %s, %s, %s", name, rj_node_name(e->g, out),
                     len_pattern_names[p], rj_dtype_name(e->ft));
            compare(what, &gi, &ri);
            if (memcmp(gi.values, gi2.values, (size_t)numel_of(&gi) * rj_dtype_size(gi.dtype)))
                fail_msg("%s: 1 and 2 threads differ", what);
            strncat(what, ", with holes", sizeof what - strlen(what) - 1);
            compare(what, &hi, &rhi);
        }
        holes_free(&h);
        data_free(&d);
    }
    rj_ctx_set_threads(ctx, 0);
    rj_bind_free(bc);
    rj_bind_free(bc2);
    rj_bind_free(br);
    rj_bind_free(bh);
    rj_bind_free(brh);
    rj_program_free(pc);
    rj_program_free(pr);
    rj_graph_free(e->g);
}

/* ---- every op ---------------------------------------------------------------------------- */

static void test_unary_ops(void **state) {
    fixture *f = *state;
    for (int op = RJ_OP_NEG; op <= RJ_OP_LOGICAL_NOT; op++)
        for (rj_dtype ft = RJ_F32; ft <= RJ_F64; ft++) {
            env e = env_new(f->ctx, ft);
            rj_graph_output(e.g, rj_graph_unary(e.g, (rj_op)op, e.x), "fl");
            rj_graph_output(e.g, rj_graph_unary(e.g, (rj_op)op, e.xi), "int");
            check_graph(f->ctx, &e, rj_op_name((rj_op)op));
        }
}

/* f32, f64 and the 16-bit types (whose corpus group of every binary op in one kernel has more
 * parameters than a CPU kernel takes: test_half_corpus leaves it to this test) */
static void test_binary_ops(void **state) {
    fixture *f = *state;
    static const rj_dtype fts[] = {RJ_F32, RJ_F64, RJ_F16, RJ_BF16};
    for (int op = RJ_OP_ADD; op <= RJ_OP_LOGICAL_OR; op++)
        for (size_t fi = 0; fi < sizeof fts / sizeof fts[0]; fi++) {
            rj_dtype ft = fts[fi];
            env e = env_new(f->ctx, ft);
            rj_op o = (rj_op)op;
            rj_graph_output(e.g, rj_graph_binary(e.g, o, e.x, e.y), "same");
            rj_graph_output(e.g, rj_graph_binary(e.g, o, e.x, e.w), "vec");
            rj_graph_output(e.g, rj_graph_binary(e.g, o, e.p3, e.x), "item");
            rj_graph_output(e.g, rj_graph_binary(e.g, o, e.x, rj_graph_scalar(e.g, 1.5)), "scalar");
            rj_graph_output(e.g, rj_graph_binary(e.g, o, e.xi, rj_graph_scalar_int(e.g, 3)), "int");
            rj_graph_output(e.g, rj_graph_binary(e.g, o, e.xi, e.x), "mixed");
            if (op == RJ_OP_ADD || op == RJ_OP_MUL || op >= RJ_OP_EQ)
                rj_graph_output(e.g, rj_graph_binary(e.g, o, e.m, rj_graph_unary(e.g, RJ_OP_LOGICAL_NOT, e.m)), "bool");
            check_graph(f->ctx, &e, rj_op_name(o));
        }
}

static void test_select_cast_ops(void **state) {
    fixture *f = *state;
    for (rj_dtype ft = RJ_F32; ft <= RJ_F64; ft++) {
        env e = env_new(f->ctx, ft);
        rj_graph_output(e.g, rj_graph_where(e.g, e.m, e.x, e.w), "where");
        rj_graph_output(e.g, rj_graph_where(e.g, e.m, e.xi, rj_graph_scalar(e.g, -0.5)), "where2");
        rj_graph_output(e.g, rj_graph_masked_fill(e.g, e.x, e.m, -7), "mf");
        rj_graph_output(e.g, rj_graph_masked_fill(e.g, e.xi, rj_graph_binary(e.g, RJ_OP_GT, e.x, e.w), 9), "mf2");
        for (rj_dtype t = RJ_BOOL; t < RJ_DTYPE_COUNT; t++) {
            char name[16];
            snprintf(name, sizeof name, "c%d", t);
            rj_graph_output(e.g, rj_graph_cast(e.g, rj_graph_binary(e.g, RJ_OP_MUL, e.x, rj_graph_scalar(e.g, 4)), t), name);
            snprintf(name, sizeof name, "ci%d", t);
            rj_graph_output(e.g, rj_graph_cast(e.g, e.xi, t), name);
        }
        check_graph(f->ctx, &e, "select/cast");
    }
}

static void test_reduce_ops(void **state) {
    fixture *f = *state;
    for (int op = RJ_OP_SUM; op <= RJ_OP_PROD; op++)
        for (rj_dtype ft = RJ_F32; ft <= RJ_F64; ft++) {
            env e = env_new(f->ctx, ft);
            rj_op o = (rj_op)op;
            rj_graph_output(e.g, rj_graph_reduce(e.g, o, e.x, 1, false), "ragged");
            rj_graph_output(e.g, rj_graph_reduce(e.g, o, e.x, 1, true), "ragged_keep");
            rj_graph_output(e.g, rj_graph_reduce(e.g, o, e.x, 2, false), "dense");
            rj_graph_output(e.g, rj_graph_reduce(e.g, o, e.x, -1, true), "dense_keep");
            rj_graph_output(e.g, rj_graph_reduce(e.g, o, e.pb, 0, false), "batch");
            rj_graph_output(e.g, rj_graph_reduce(e.g, o, e.w, 0, false), "scalar");
            if (o != RJ_OP_MEAN) {
                rj_graph_output(e.g, rj_graph_reduce(e.g, o, e.xi, 1, false), "int_ragged");
                rj_graph_output(e.g, rj_graph_reduce(e.g, o, e.xi, 2, false), "int_dense");
                rj_graph_output(e.g, rj_graph_reduce(e.g, o, e.m, 1, false), "bool_ragged");
            }
            check_graph(f->ctx, &e, rj_op_name(o));
        }
}

static void test_softmax_norm_ops(void **state) {
    fixture *f = *state;
    for (rj_dtype ft = RJ_F32; ft <= RJ_F64; ft++) {
        env e = env_new(f->ctx, ft);
        rj_graph_output(e.g, rj_graph_softmax(e.g, e.x, 1), "sm1");
        rj_graph_output(e.g, rj_graph_softmax(e.g, e.x, 2), "sm2");
        rj_graph_output(e.g, rj_graph_log_softmax(e.g, e.x, 1), "lsm1");
        rj_graph_output(e.g, rj_graph_log_softmax(e.g, e.x, -1), "lsm2");
        rj_graph_output(e.g, rj_graph_softmax(e.g, e.xi, 1), "smi");
        rj_graph_output(e.g, rj_graph_softmax(e.g, e.pb, 0), "smb");
        rj_graph_output(e.g, rj_graph_layer_norm(e.g, e.x, 1, RJ_NONE, RJ_NONE, -1), "ln");
        rj_graph_output(e.g, rj_graph_layer_norm(e.g, e.x, 1, e.w, e.v, 1e-3), "lnwb");
        rj_graph_output(e.g, rj_graph_rms_norm(e.g, e.x, 1, RJ_NONE, -1), "rms");
        rj_graph_output(e.g, rj_graph_rms_norm(e.g, e.x, 1, e.w, 1e-6), "rmsw");
        rj_graph_output(e.g, rj_graph_layer_norm(e.g, e.pb, 2, RJ_NONE, RJ_NONE, -1), "lnall");
        check_graph(f->ctx, &e, "softmax/norm");
    }
}

static void test_pad_ops(void **state) {
    fixture *f = *state;
    for (rj_dtype ft = RJ_F32; ft <= RJ_F64; ft++) {
        env e = env_new(f->ctx, ft);
        rj_node p = rj_graph_pad(e.g, e.x, -2.5, RJ_DIM_NONE);
        rj_graph_output(e.g, p, "pad");
        rj_graph_output(e.g, rj_graph_pad(e.g, e.xi, 4, e.L), "padL");
        rj_graph_output(e.g, rj_graph_unpad(e.g, p, e.J), "unpad");
        check_graph(f->ctx, &e, "pad/unpad");
    }
}

/* An op group of the standard corpus in floats of type ft against the interpreter. */
static void check_group_ft(fixture *f, const char *name, rj_dtype ft) {
    env e = env_new(f->ctx, ft);
    std_chain_add(&e, name);
    check_graph(f->ctx, &e, name);
}

/* An op group of the standard corpus, f32 and f64, against the interpreter. */
static void check_group(fixture *f, const char *name) {
    for (rj_dtype ft = RJ_F32; ft <= RJ_F64; ft++) check_group_ft(f, name, ft);
}

static void test_index_ops(void **state) { check_group(*state, "index ops and views"); }

static void test_matmul_ops(void **state) { check_group(*state, "matmul and linear"); }

/* A [B, j1, j1] result: blocks of len_b x len_b rows at offsets the binding derives from j1's;
 * what the tensor helpers cannot do with it yet is refused, not misread. */
static void test_pair_result(void **state) {
    fixture *f = *state;
    env e = env_new(f->ctx, RJ_F32);
    rj_node s = rj_graph_matmul(e.g, e.x, rj_graph_transpose(e.g, e.y, 1, 2));
    rj_graph_output(e.g, s, "s");
    rj_program *p = rj_program_new(e.g, RJ_TARGET_CPU);
    assert_non_null(p);
    rj_bind *b = rj_bind_new(p);
    data d = data_new(LEN_EMPTY, RJ_F32, 5);
    bind_all(f->ctx, b, &e, &d, NULL);
    int64_t numel = -1, want = 0;
    for (int64_t i = 0; i < d.B; i++) want += (d.off[i + 1] - d.off[i]) * (d.off[i + 1] - d.off[i]);
    assert_ok(f->ctx, rj_bind_output_numel(b, s, &numel));
    assert_int_equal(numel, want);
    assert_ok(f->ctx, rj_program_run(p, b));
    const rj_tensor *t = rj_bind_result(b, s);
    rj_tensor_info ti;
    assert_ok(f->ctx, rj_tensor_get_info(t, &ti));
    assert_int_equal(ti.ragged_dims, 2);
    assert_int_equal(ti.rows, want);
    assert_null(ti.lengths);
    for (int64_t i = 0, at = 0; i < d.B; i++) {
        int64_t l = d.off[i + 1] - d.off[i];
        assert_int_equal(ti.offsets[i], at);
        for (int64_t r = 0; r < l; r++) /* element (i, r, c) is x[r] . y[c] */
            for (int64_t c = 0; c < l; c++) {
                double dot = 0;
                for (int k = 0; k < D; k++)
                    dot += (double)((float *)d.x)[(d.off[i] + r) * D + k] * ((float *)d.y)[(d.off[i] + c) * D + k];
                float got = ((float *)ti.values)[at + r * l + c];
                if (fabs(got - dot) > 1e-4 * (1 + fabs(dot))) fail_msg("item %lld (%lld, %lld): %g, want %g",
                                                                     (long long)i, (long long)r, (long long)c, got, dot);
            }
        at += l * l;
    }
    assert_null(rj_tensor_to_padded(t, 0, -1));
    assert_int_equal(rj_ctx_status(f->ctx), RJ_ERR_UNSUPPORTED);
    assert_null(rj_tensor_contiguous(t));
    DLManagedTensor *v = NULL;
    assert_int_equal(rj_bind_export_dlpack(b, s, &v, NULL), RJ_ERR_UNSUPPORTED);
    rj_bind_free(b);
    rj_program_free(p);
    rj_graph_free(e.g);
    data_free(&d);
}

/* Sliced (FX_SLICED): f32 and f64 may run in different shards. */
static void test_pair_ops(void **state) {
    for (rj_dtype ft = RJ_F32; ft <= RJ_F64; ft++)
        if (in_shard(ft)) check_group_ft(*state, "two ragged dims", ft);
}

static void test_index_errors(void **state) {
    (void)state;
    std_index_errors(RJ_TARGET_CPU);
}

/* Found with fuzz/fuzz_parse (UBSan; the harness run on masked_fill and pad of an i32 input
 * with 1e300): lowering made integer constants of out-of-range fill values with a plain C cast,
 * undefined and wrapping where the interpreter saturates. Such values are now refused when the
 * graph is built (test_ops: test_int_fill_values), and lowering converts constants as a cast
 * does anyway, so no target can meet one. */
static void test_fuzz_int_fill_out_of_range(void **state) {
    fixture *f = *state;
    static const double values[] = {1e300, -1e300, NAN};
    for (int k = 0; k < 4; k++) {
        env e = env_new(f->ctx, RJ_F32);
        rj_node n = k < 3 ? rj_graph_masked_fill(e.g, e.xi, e.m, values[k])
                          : rj_graph_pad(e.g, e.xi, -1e300, RJ_DIM_NONE);
        assert_int_equal(n, RJ_NONE);
        assert_int_equal(rj_graph_status(e.g), RJ_ERR_ARG);
        assert_error_contains(f->ctx, "cannot be converted to i32 without overflow");
        rj_graph_free(e.g);
    }
}

/* ---- fused chains ------------------------------------------------------------------------ */


static void test_activation_tails(void **state) {
    std_check_tails(((fixture *)*state)->ctx, RJ_TARGET_CPU);
}

static void test_empty_identities(void **state) {
    std_check_identities(((fixture *)*state)->ctx, RJ_TARGET_CPU);
}

/* Sliced (FX_SLICED): a shard checks the chains that in_shard gives it. */
static void test_fused_chains(void **state) {
    fixture *f = *state;
    assert_true(std_nchains >= 30);
    int n = 0;
    for (int i = 0; i < std_nchains; i++) {
        if (!in_shard((uint64_t)i)) continue;
        for (rj_dtype ft = RJ_F32; ft <= RJ_F64; ft++) {
            env e = env_new(f->ctx, ft);
            std_chains[i].fn(&e);
            check_graph(f->ctx, &e, std_chains[i].name);
        }
        n++;
    }
    printf("%d of the %d fused chains match the interpreter (f32 and f64, %d length patterns, 1 and 2 "
           "threads, packed and with holes)\n", n, std_nchains, LEN_PATTERN_COUNT);
}

/* The whole corpus (every op group and fused chain) with f16 and bf16 floats against the
 * interpreter, which rounds each op's result as the compiled code does (16-bit storage, f32
 * arithmetic): check_graph's patterns, threads and holes, sliced across the shards. */
static void test_half_corpus(void **state) {
    fixture *f = *state;
    int n = 0;
    for (int i = 0; i < std_corpus_count(); i++) {
        if (!in_shard((uint64_t)i) || !strcmp(std_corpus_name(i), "binary ops")) continue;
        for (rj_dtype ft = RJ_F16; ft <= RJ_BF16; ft++) {
            env e = std_corpus_build(f->ctx, i, ft);
            check_graph(f->ctx, &e, std_corpus_name(i));
        }
        n++;
    }
    printf("%d of the %d corpus graphs match the interpreter in f16 and bf16\n", n, std_corpus_count());
}

/* Random chains (stdenv.h: std_random_chain) through check_graph: every length pattern, packed
 * and with holes, 1 and 2 threads bitwise equal. RJ_RANDOM_CHAINS=N runs chains 1..N (a fuzzing
 * campaign: 3000 without product steps and 1500 with them ran clean when the test was written),
 * RJ_RANDOM_SEED=S chain S alone. */
static void test_random_chains(void **state) {
    fixture *f = *state;
    uint64_t first, last;
    std_random_range(48, &first, &last);
    double t0 = now_ms();
    int n = 0;
    for (uint64_t seed = first; seed <= last; seed++) {
        if (first != last && !in_shard(seed)) continue; /* sliced; RJ_RANDOM_SEED runs anywhere */
        rj_dtype ft = seed % 4 ? RJ_F32 : RJ_F64;
        if (first == last) std_random_print(f->ctx, seed, ft);
        env e = env_new(f->ctx, ft);
        std_random_chain(&e, seed);
        char name[64];
        snprintf(name, sizeof name, "random chain %llu (RJ_RANDOM_SEED=%llu)", (unsigned long long)seed,
                 (unsigned long long)seed);
        check_graph(f->ctx, &e, name);
        n++;
    }
    printf("%d of random chains %llu..%llu match the interpreter in %.0f ms\n", n, (unsigned long long)first,
           (unsigned long long)last, now_ms() - t0);
}

/* ---- what fusion must guarantee ---------------------------------------------------------- */

/* pad -> elementwise -> unpad never allocates the padded tensor: the whole run allocates far
 * less than one padded buffer would take. */
static void test_no_padded_buffer(void **state) {
    fixture *f = *state;
    env e = env_new(f->ctx, RJ_F32);
    std_chain_add(&e, "unpad(pad(x,0)*2+1)");
    rj_program *p = rj_program_new(e.g, RJ_TARGET_CPU);
    assert_non_null(p);
    rj_bind *b = rj_bind_new(p);
    data d = data_new(LEN_ONE_LONG, RJ_F32, 3); /* one item of 1000 rows, four of 1 */
    bind_all(f->ctx, b, &e, &d, NULL);
    float *outbuf = malloc(sizeof(float) * (size_t)(d.rows * D));
    rj_node o = rj_graph_output_at(e.g, 0);
    assert_ok(f->ctx, rj_bind_output(b, o, outbuf, d.rows * D));
    long long before = f->tr.live_bytes;
    long allocs_before = f->tr.allocs;
    assert_ok(f->ctx, rj_program_run(p, b));
    long long padded = d.B * d.maxlen * D * (long long)sizeof(float);
    long long grew = f->tr.live_bytes - before;
    printf("pad->op->unpad: padded tensor would take %lld bytes; the run allocated %ld blocks, "
           "%lld bytes\n", padded, f->tr.allocs - allocs_before, grew);
    assert_true(grew < padded / 8);
    char *loops = rj_program_dump(p, "loops");
    assert_non_null(loops);
    assert_null(strstr(loops, ": temp ")); /* no intermediate buffer of any kind ("buffer 2: temp 0") */
    rj_string_free(f->ctx, loops);
    free(outbuf);
    data_free(&d);
    rj_bind_free(b);
    rj_program_free(p);
    rj_graph_free(e.g);
}

/* An identical graph compiles once; new offsets and batch sizes never recompile. A context of
 * its own: code that earlier tests left alive would be shared (kshare.c) and compile less. */
static void test_cache_no_recompile(void **state) {
    (void)state;
    fixture ff = {.ctx = rj_ctx_new(NULL, NULL)}, *f = &ff;
    assert_ok(f->ctx, rj_ctx_set_cache_dir(f->ctx, "off"));
    env e = env_new(f->ctx, RJ_F32);
    std_chain_add(&e, "softmax(relu(x*w+v), dim=1)");
    uint64_t c0 = cpu_compile_count(f->ctx);
    rj_program *p = rj_program_new(e.g, RJ_TARGET_CPU);
    assert_non_null(p);
    assert_int_equal(cpu_compile_count(f->ctx), c0 + 1);
    rj_bind *b = rj_bind_new(p);
    for (int pat = 0; pat < LEN_PATTERN_COUNT; pat++) {
        data d = data_new((len_pattern)pat, RJ_F32, 11);
        bind_all(f->ctx, b, &e, &d, NULL);
        assert_ok(f->ctx, rj_program_run(p, b));
        data_free(&d);
    }
    assert_int_equal(cpu_compile_count(f->ctx), c0 + 1);
    /* the same graph built again (other names) hits the cache */
    env e2 = env_new(f->ctx, RJ_F32);
    std_chain_add(&e2, "softmax(relu(x*w+v), dim=1)");
    rj_program *p2 = rj_program_new(e2.g, RJ_TARGET_CPU);
    assert_non_null(p2);
    assert_int_equal(cpu_compile_count(f->ctx), c0 + 1);
    /* after freeing both, the compiled code is still cached */
    rj_program_free(p2);
    rj_bind_free(b);
    rj_program_free(p);
    p = rj_program_new(e.g, RJ_TARGET_CPU);
    assert_int_equal(cpu_compile_count(f->ctx), c0 + 1);
    rj_program_free(p);
    /* a different constant dim is a different program */
    env e3 = env_new(f->ctx, RJ_F64);
    std_chain_add(&e3, "softmax(relu(x*w+v), dim=1)");
    p = rj_program_new(e3.g, RJ_TARGET_CPU);
    assert_int_equal(cpu_compile_count(f->ctx), c0 + 2);
    rj_program_free(p);
    rj_graph_free(e.g);
    rj_graph_free(e2.g);
    rj_graph_free(e3.g);
    rj_ctx_free(f->ctx);
}

/* Stage texts are kept once produced: asking again gives the same text and compiles nothing.
 * A backend's own stage comes from that backend whatever the program's target, rj_graph_dump
 * needs no device, and a binding may outlive its program. */
static void test_dumps_and_lifetimes(void **state) {
    fixture *f = *state;
    env e = env_new(f->ctx, RJ_F32);
    std_chain_add(&e, "softmax(relu(x*w+v), dim=1)");
    rj_program *p = rj_program_new(e.g, RJ_TARGET_CPU);
    rj_program *pr = rj_program_new(e.g, RJ_TARGET_REFERENCE);
    assert_non_null(p);
    assert_non_null(pr);
    uint64_t c0 = cpu_compile_count(f->ctx);
    static const char *const stages[] = {"graph", "opt", "fused", "loops", "llvm", "llvm-opt", "asm", "dot"};
    for (size_t i = 0; i < sizeof stages / sizeof stages[0]; i++) {
        char *a = rj_program_dump(p, stages[i]), *b = rj_program_dump(p, stages[i]);
        char *r = rj_program_dump(pr, stages[i]);
        if (!a || !b || !r) fail_msg("%s: %s", stages[i], rj_ctx_error(f->ctx));
        assert_string_equal(a, b);
        assert_string_equal(a, r); /* the reference target lowers with the host's descriptor */
        rj_string_free(f->ctx, a);
        rj_string_free(f->ctx, b);
        rj_string_free(f->ctx, r);
    }
    assert_int_equal(cpu_compile_count(f->ctx), c0);
    char *loops = rj_graph_dump(e.g, RJ_TARGET_CUDA, "loops");
    char *cuda = rj_graph_dump(e.g, RJ_TARGET_CUDA, "cuda");
    if (!loops || !cuda) fail_msg("rj_graph_dump for CUDA: %s", rj_ctx_error(f->ctx));
    assert_non_null(strstr(cuda, "extern \"C\" __global__ void __launch_bounds__(256, 4) k0("));
    rj_string_free(f->ctx, loops);
    rj_string_free(f->ctx, cuda);
    assert_null(rj_graph_dump(e.g, (rj_target)7, "loops"));
    assert_error_contains(f->ctx, "rj_graph_dump: invalid target 7");
    assert_null(rj_graph_dump(e.g, RJ_TARGET_CPU, "nope"));
    assert_error_contains(f->ctx, "rj_graph_dump: unknown stage 'nope' (graph, opt, fused, loops,");
    assert_null(rj_program_dump(p, NULL));
    assert_error_contains(f->ctx, "rj_program_dump: stage is NULL");

    /* the binding keeps what it needs: results stay readable after the program is freed */
    rj_bind *b = rj_bind_new(p);
    data d = data_new(LEN_UNIFORM, RJ_F32, 5);
    bind_all(f->ctx, b, &e, &d, NULL);
    assert_ok(f->ctx, rj_program_run(p, b));
    rj_program_free(p);
    rj_program_free(pr);
    const rj_tensor *t = rj_bind_result(b, rj_graph_output_at(e.g, 0));
    assert_non_null(t);
    rj_tensor_info ti;
    assert_ok(f->ctx, rj_tensor_get_info(t, &ti));
    assert_int_equal(ti.shape[0], d.B);
    assert_int_equal(ti.rows, d.rows);
    rj_bind_free(b);
    data_free(&d);
    rj_graph_free(e.g);
}

/* Long sums stay accurate: 10^6 rows (or a dense dim of 10^6) of 0.1f sum to 100000 within
 * 0.03 (PyTorch: 0.008; a plain running f32 sum gives 100958), on the CPU and in the
 * interpreter. */
static void test_long_sums(void **state) {
    fixture *f = *state;
    enum { N = 1000000 };
    float *x = malloc(sizeof(float) * N);
    for (int i = 0; i < N; i++) x[i] = 0.1f;
    for (int dense = 0; dense < 2; dense++) {
        rj_graph *g = rj_graph_new(f->ctx);
        rj_dim B = rj_graph_dense(g, "B"), J = rj_graph_ragged(g, "j1", B), Dn = rj_graph_dense(g, "D");
        rj_node in = dense ? rj_graph_input(g, "x", RJ_F32, 2, (rj_dim[]){B, Dn})
                           : rj_graph_input(g, "x", RJ_F32, 3, (rj_dim[]){B, J, 1});
        rj_graph_output(g, rj_graph_reduce(g, RJ_OP_SUM, in, 1, false), "s");
        rj_graph_output(g, rj_graph_reduce(g, RJ_OP_MEAN, in, 1, false), "m");
        for (rj_target t = RJ_TARGET_REFERENCE; t <= RJ_TARGET_CPU; t++) {
            rj_program *p = rj_program_new(g, t);
            assert_non_null(p);
            rj_bind *b = rj_bind_new(p);
            int64_t off[2] = {0, N};
            if (dense) assert_ok(f->ctx, rj_bind_size(b, Dn, N));
            else assert_ok(f->ctx, rj_bind_offsets(b, J, 1, off, NULL));
            assert_ok(f->ctx, rj_bind_input(b, in, x, N));
            assert_ok(f->ctx, rj_program_run(p, b));
            rj_tensor_info si, mi;
            assert_ok(f->ctx, rj_tensor_get_info(rj_bind_result(b, rj_graph_output_at(g, 0)), &si));
            assert_ok(f->ctx, rj_tensor_get_info(rj_bind_result(b, rj_graph_output_at(g, 1)), &mi));
            double sum = ((float *)si.values)[0], mean = ((float *)mi.values)[0];
            if (fabs(sum - 100000.0) > 0.03 || fabs(mean - 0.1) > 1e-7)
                fail_msg("%s, %s: sum %.4f, mean %.9f", dense ? "dense dim" : "ragged dim",
                         t == RJ_TARGET_CPU ? "cpu" : "reference", sum, mean);
            rj_bind_free(b);
            rj_program_free(p);
        }
        rj_graph_free(g);
    }
    /* layer_norm statistics over a row of 10^6: values 0.1 and 0.3 alternating, so mean 0.2,
     * variance 0.01, and every output +-0.1 / sqrt(0.01 + 1e-5) */
    for (int i = 0; i < N; i++) x[i] = i % 2 ? 0.3f : 0.1f;
    rj_graph *g = rj_graph_new(f->ctx);
    rj_dim B = rj_graph_dense(g, "B"), J = rj_graph_ragged(g, "j1", B), Dn = rj_graph_dense(g, "D");
    rj_node in = rj_graph_input(g, "x", RJ_F32, 3, (rj_dim[]){B, J, Dn});
    rj_node y = rj_graph_layer_norm(g, in, 1, RJ_NONE, RJ_NONE, 1e-5);
    rj_graph_output(g, y, "y");
    rj_program *p = rj_program_new(g, RJ_TARGET_CPU);
    rj_bind *b = rj_bind_new(p);
    int64_t off[2] = {0, 1};
    assert_ok(f->ctx, rj_bind_offsets(b, J, 1, off, NULL));
    assert_ok(f->ctx, rj_bind_input(b, in, x, N));
    assert_ok(f->ctx, rj_program_run(p, b));
    rj_tensor_info ti;
    rj_tensor_get_info(rj_bind_result(b, y), &ti);
    double want = 0.1 / sqrt(0.01 + 1e-5);
    for (int i = 0; i < N; i += 99991) {
        double got = ((float *)ti.values)[i], w = i % 2 ? want : -want;
        if (fabs(got - w) > 2e-4 * want) fail_msg("layer_norm of a 10^6 row: y[%d] = %.7f, expected %.7f", i, got, w);
    }
    rj_bind_free(b);
    rj_program_free(p);
    rj_graph_free(g);
    free(x);
}

/* The memory limit stops a run before it allocates: a hostile pad length under the default
 * limit, and outputs, temporaries and the interpreter's intermediates under a small one. */
static void test_memory_limit(void **state) {
    fixture *f = *state;
    rj_graph *g = rj_graph_parse(f->ctx,
                                 "ragged j1 : B\n"
                                 "input x : f32[B, j1, 16]\n"
                                 "p = pad(x * 2.0, value=0.0, len=L)\n"
                                 "m = sum(x, dim=1, keepdim=True)\n"
                                 "c = x - m\n"
                                 "output p, c\n", "limit.rj");
    assert_non_null(g);
    rj_dim J = rj_graph_find_dim(g, "j1"), Ld = rj_graph_find_dim(g, "L");
    rj_node x = rj_graph_input_at(g, 0);
    float xs[4 * 16] = {0};
    int64_t off[3] = {0, 1, 4};
    for (rj_target t = RJ_TARGET_REFERENCE; t <= RJ_TARGET_CPU; t++) {
        rj_program *p = rj_program_new(g, t);
        assert_non_null(p);
        rj_bind *b = rj_bind_new(p);
        assert_ok(f->ctx, rj_bind_offsets(b, J, 2, off, NULL));
        assert_ok(f->ctx, rj_bind_input(b, x, xs, 4 * 16));
        /* 2 x 10^12 x 16 floats: refused under the default limit, nothing allocated */
        assert_ok(f->ctx, rj_bind_size(b, Ld, 1000000000000));
        assert_int_equal(rj_program_run(p, b), RJ_ERR_SIZE);
        assert_error_contains(f->ctx, "output p needs 128000000000000 bytes");
        assert_error_contains(f->ctx, "(rj_ctx_set_memory_limit)");
        /* a small limit: the padded output fits alone, not with what else the run needs */
        assert_ok(f->ctx, rj_bind_size(b, Ld, 3));
        assert_ok(f->ctx, rj_ctx_set_memory_limit(f->ctx, 400));
        assert_int_equal(rj_program_run(p, b), RJ_ERR_SIZE);
        assert_error_contains(f->ctx, "above the memory limit of 400 bytes");
        assert_ok(f->ctx, rj_ctx_set_memory_limit(f->ctx, 0)); /* the default again */
        assert_ok(f->ctx, rj_program_run(p, b));
        rj_bind_free(b);
        rj_program_free(p);
    }
    assert_int_equal(rj_ctx_set_memory_limit(f->ctx, -1), RJ_ERR_ARG);
    assert_error_contains(f->ctx, "rj_ctx_set_memory_limit: -1 bytes is negative");
    rj_graph_free(g);
}

/* The assembly of an elementwise kernel uses packed vector instructions. */
static void test_vectorized(void **state) {
    fixture *f = *state;
    env e = env_new(f->ctx, RJ_F32);
    std_chain_add(&e, "relu(x*w+v)");
    rj_program *p = rj_program_new(e.g, RJ_TARGET_CPU);
    char *as = rj_program_dump(p, "asm");
    assert_non_null(as);
    bool packed = strstr(as, "mulps") || strstr(as, "fmadd") || strstr(as, "addps");
    if (!packed) fail_msg("no packed float instructions in:\n%.2000s", as);
    rj_string_free(f->ctx, as);
    rj_program_free(p);
    rj_graph_free(e.g);

    /* float accumulations over the vectorised dense dim (layer_norm's statistics, a sum over
     * D): vectorised, and their horizontal folds rewritten as trees (reduce_tree.c) */
    for (rj_dtype ft = RJ_F32; ft <= RJ_F64; ft++) {
        env e2 = env_new(f->ctx, ft);
        std_chain_add(&e2, "gelu(layer_norm(x)+0.1)");
        std_chain_add(&e2, "sum(log(sigmoid(x)),2)");
        rj_program *p2 = rj_program_new(e2.g, RJ_TARGET_CPU);
        assert_non_null(p2);
        char *ir = rj_program_dump(p2, "llvm-opt");
        assert_non_null(ir);
        if (!strstr(ir, "shufflevector")) fail_msg("no vector fold in:\n%.3000s", ir);
        if (strstr(ir, "llvm.vector.reduce.fadd")) fail_msg("an ordered horizontal sum is left in:\n%.3000s", ir);
        rj_string_free(f->ctx, ir);
        rj_program_free(p2);
        rj_graph_free(e2.g);
    }
}

/* How many times the program's assembly names s. */
static int asm_count(rj_ctx *ctx, rj_program *p, const char *s) {
    char *as = rj_program_dump(p, "asm");
    assert_non_null(as);
    int n = 0;
    for (const char *q = as; (q = strstr(q, s)); q++) n++;
    rj_string_free(ctx, as);
    return n;
}

/* RAGJIT_LLVM_PREFETCH (jit.c, vector.c: vprefetch): a vector loop's loads that stream through
 * memory (x, its index moving with the row) prefetch ahead, those of row-invariant operands
 * (w, v: indexed by the lanes alone) do not, and 0 turns prefetching off; the answers are
 * the interpreter's every way. In relu(x*w+v) in f32, a full step loads 128 bytes of x (two
 * lines: two prefetches) and multiplies two registers; had w or v been prefetched too, the
 * full steps alone would prefetch more than the kernel multiplies. */
static void test_prefetch(void **state) {
    (void)state;
    const char *vec = getenv("RAGJIT_LLVM_VECTOR");
#if defined(__x86_64__)
    bool x86 = true;
#else
    bool x86 = false;
#endif
    static const char *const dist[] = {"0", "64", "2048", "65536"};
    for (size_t d = 0; d < sizeof dist / sizeof dist[0]; d++) {
        setenv("RAGJIT_LLVM_PREFETCH", dist[d], 1);
        rj_ctx *ctx = rj_ctx_new(NULL, NULL);
        assert_non_null(ctx);
        assert_ok(ctx, rj_ctx_set_cache_dir(ctx, "off"));
        env e = env_new(ctx, RJ_F32);
        std_chain_add(&e, "relu(x*w+v)");
        rj_program *p = rj_program_new(e.g, RJ_TARGET_CPU); /* creates the context's JIT: reads the setting */
        unsetenv("RAGJIT_LLVM_PREFETCH");
        assert_non_null(p);
        if (x86 && !(vec && !strcmp(vec, "0"))) {
            int pf = asm_count(ctx, p, "prefetch"), mul = asm_count(ctx, p, "vmulps");
            if (d == 0 ? pf != 0 : pf == 0) fail_msg("RAGJIT_LLVM_PREFETCH=%s: %d prefetches", dist[d], pf);
            if (pf > mul) fail_msg("RAGJIT_LLVM_PREFETCH=%s: %d prefetches for %d multiplications", dist[d], pf, mul);
        }
        rj_program_free(p);
        check_graph(ctx, &e, "relu(x*w+v)"); /* frees the graph */
        static const char *const chains[] = {"gelu(layer_norm(x)+0.1)", "softmax(x*w+v, dim=2)*4", "mean(pad(x,0),1)",
                                             "unpad(pad(x,0)*2+1)", "sum(unpad(relu(pad(x)*w)),1)"};
        for (size_t c = 0; c < sizeof chains / sizeof chains[0]; c++) {
            env e2 = env_new(ctx, c & 1 ? RJ_BF16 : RJ_F32);
            std_chain_add(&e2, chains[c]);
            check_graph(ctx, &e2, chains[c]);
        }
        rj_ctx_free(ctx);
    }
}

/* How many times the program's assembly names a 512-bit register. */
static int zmm_uses(rj_ctx *ctx, rj_program *p) {
    char *as = rj_program_dump(p, "asm");
    assert_non_null(as);
    int n = 0;
    for (const char *q = as; (q = strstr(q, "%zmm")); q++) n++;
    rj_string_free(ctx, as);
    return n;
}

/* RAGJIT_LLVM_STREAM_VECTOR: kernels that stream their input through additions (sums over the
 * ragged dim without exp and its kin) take the width it names, the others the CPU's widest
 * (jit.c: stream_bits, lkernel.streams); the interpreter's answers either way. With
 * AVX-512 a sum over the ragged dim is 512-bit code under 512 and has none under 256, while a
 * maximum over the ragged dim is 512-bit code under both. */
static void test_stream_width(void **state) {
    (void)state;
    static const char *const widths[] = {"256", "512"};
    static const char *const chains[] = {"sum(pad(x,0.75,L),1)", "mean(pad(x,0),1)", "x-mean(x,1,keepdim)",
                                         "sum(embedding(tab, ix), 1)", "int pow/max/sum", "min/prod over pad",
                                         "sum(take_along_dim(pad(x), pad(i-1), 1), 1)"};
    bool avx512 = false;
#if defined(__x86_64__)
    __builtin_cpu_init();
    avx512 = __builtin_cpu_supports("avx512f");
#endif
    const char *vec = getenv("RAGJIT_LLVM_VECTOR"); /* narrower code for every kernel: no zmm to see */
    if (vec && strcmp(vec, "512")) avx512 = false;
    for (int w = 0; w < 2; w++) {
        setenv("RAGJIT_LLVM_STREAM_VECTOR", widths[w], 1);
        rj_ctx *ctx = rj_ctx_new(NULL, NULL);
        assert_non_null(ctx);
        assert_ok(ctx, rj_ctx_set_cache_dir(ctx, "off"));
        env e = env_new(ctx, RJ_F32);
        out(&e, rj_graph_reduce(e.g, RJ_OP_SUM, e.x, 1, false));
        rj_program *p = rj_program_new(e.g, RJ_TARGET_CPU); /* creates the context's JIT: reads the setting */
        unsetenv("RAGJIT_LLVM_STREAM_VECTOR");
        assert_non_null(p);
        env e2 = env_new(ctx, RJ_F32);
        out(&e2, rj_graph_reduce(e2.g, RJ_OP_MAX, e2.x, 1, false));
        rj_program *p2 = rj_program_new(e2.g, RJ_TARGET_CPU);
        assert_non_null(p2);
        if (avx512) {
            int sum = zmm_uses(ctx, p), max = zmm_uses(ctx, p2);
            if (w == 0 ? sum != 0 : sum == 0) fail_msg("STREAM_VECTOR=%s: the sum names zmm %d times", widths[w], sum);
            if (!max) fail_msg("STREAM_VECTOR=%s: the maximum is not 512-bit code", widths[w]);
        }
        rj_program_free(p);
        rj_program_free(p2);
        rj_graph_free(e.g);
        rj_graph_free(e2.g);
        for (size_t c = 0; c < sizeof chains / sizeof chains[0]; c++) {
            env e3 = env_new(ctx, RJ_F32);
            std_chain_add(&e3, chains[c]);
            check_graph(ctx, &e3, chains[c]); /* frees the graph */
        }
        rj_ctx_free(ctx);
    }
    printf("sums over the ragged dim in 256 and 512 bits match the interpreter%s\n",
           avx512 ? " (256-bit and 512-bit code)" : "");
}

/* x ** c for the literal exponents every target expands: the interpreter agrees with the JIT
 * on the special values where sqrt and C's pow differ (-inf, -0.0), and both give PyTorch's
 * (its kernels take 0.5, -0.5 and -2 as sqrt, rsqrt and 1/(x*x)). In bf16 and f16 the pow is
 * one op, rounded once from f32 (the guide): the interpreter and the JIT agree bit for bit on
 * values where rounding x*x to the format first would differ (it did, for x ** 3 and x ** -2
 * in bf16, in one build of the interpreter). */
static void test_pow_literals(void **state) {
    fixture *f = *state;
    enum { NS = 9, N = NS + 200 };
    static const float special[NS] = {-INFINITY, -0.0f, 0.0f, 4.0f, -1.0f, 2.5f, INFINITY, NAN, 1e20f};
    static const double es[] = {0.5, 2, 3, -1, 1, 1.5, -0.5, -2};
    static const rj_dtype fts[] = {RJ_F32, RJ_BF16, RJ_F16};
    double xs[N];
    for (int i = 0; i < N; i++) xs[i] = i < NS ? special[i] : 0.1 + 0.0491 * (i - NS);
    int64_t off[] = {0, N};
    for (size_t d = 0; d < sizeof fts / sizeof fts[0]; d++) {
        rj_dtype ft = fts[d];
        char in[4 * N];
        for (int i = 0; i < N; i++) rj_value_set(ft, in, i, xs[i]);
        for (size_t k = 0; k < sizeof es / sizeof es[0]; k++) {
            rj_graph *g = rj_graph_new(f->ctx);
            rj_dim B = rj_graph_dense(g, "B"), J = rj_graph_ragged(g, "j", B);
            rj_node x = rj_graph_input(g, "x", ft, 2, (rj_dim[]){B, J});
            rj_node y = rj_graph_binary(g, RJ_OP_POW, x, rj_graph_scalar(g, es[k]));
            rj_graph_output(g, y, "y");
            double got[2][N];
            for (rj_target t = RJ_TARGET_REFERENCE; t <= RJ_TARGET_CPU; t++) {
                rj_program *p = rj_program_new(g, t);
                rj_bind *b = rj_bind_new(p);
                rj_bind_offsets(b, J, 1, off, NULL);
                rj_bind_input(b, x, in, N);
                assert_ok(f->ctx, rj_program_run(p, b));
                rj_tensor_info ti;
                rj_tensor_get_info(rj_bind_result(b, y), &ti);
                for (int i = 0; i < N; i++) got[t][i] = rj_value_get(ft, ti.values, i);
                rj_bind_free(b);
                rj_program_free(p);
            }
            for (int i = 0; i < N; i++) {
                double r = got[0][i], c = got[1][i];
                bool same = isnan(r) ? isnan(c) : (r == c && signbit(r) == signbit(c)) ||
                                                      (ft == RJ_F32 && fabs(r - c) <= 3e-7 * fabs(r));
                if (!same) fail_msg("%s %g ** %g: cpu %.9g, reference %.9g", rj_dtype_name(ft), xs[i], es[k], c, r);
            }
            for (int t = 0; t < 2; t++) {
                if (es[k] == 0.5 && !(isnan(got[t][0]) && got[t][1] == 0 && signbit(got[t][1])))
                    fail_msg("x ** 0.5 is not sqrt: (-inf) ** 0.5 = %g, (-0.0) ** 0.5 = %g", got[t][0], got[t][1]);
                if (es[k] == -0.5 && !(isnan(got[t][0]) && isinf(got[t][1]) && got[t][1] < 0 && got[t][3] == 0.5))
                    fail_msg("x ** -0.5 is not 1/sqrt(x): (-inf) ** -0.5 = %g, (-0.0) ** -0.5 = %g, 4 ** -0.5 = %g",
                             got[t][0], got[t][1], got[t][3]);
                if (es[k] == -2 && ft == RJ_F32 && !(got[t][8] == 0 && got[t][3] == 0.0625))
                    fail_msg("x ** -2 is not 1/(x*x): 1e20 ** -2 = %g, 4 ** -2 = %g", got[t][8], got[t][3]);
            }
            rj_graph_free(g);
        }
    }
}

/* layer_norm of a constant row is 0 on every target, however large the constant (the
 * interpreter once gave -1 for 1e30 in f64: its mean was rounded). */
static void test_layer_norm_constant_rows(void **state) {
    fixture *f = *state;
    for (rj_dtype ft = RJ_F32; ft <= RJ_F64; ft++) {
        rj_graph *g = rj_graph_new(f->ctx);
        rj_dim B = rj_graph_dense(g, "B"), J = rj_graph_ragged(g, "j", B);
        rj_node x = rj_graph_input(g, "x", ft, 3, (rj_dim[]){B, J, 7});
        rj_node y = rj_graph_layer_norm(g, x, 1, RJ_NONE, RJ_NONE, 1e-5);
        rj_graph_output(g, y, "y");
        double xd[3 * 7];
        float xf[3 * 7];
        for (int i = 0; i < 21; i++) xd[i] = xf[i] = i < 7 ? 1e30f : i < 14 ? -3e38f : 0.1f;
        int64_t off[] = {0, 3};
        for (rj_target t = RJ_TARGET_REFERENCE; t <= RJ_TARGET_CPU; t++) {
            rj_program *p = rj_program_new(g, t);
            rj_bind *b = rj_bind_new(p);
            rj_bind_offsets(b, J, 1, off, NULL);
            rj_bind_input(b, x, ft == RJ_F32 ? (void *)xf : (void *)xd, 21);
            assert_ok(f->ctx, rj_program_run(p, b));
            rj_tensor_info ti;
            rj_tensor_get_info(rj_bind_result(b, y), &ti);
            for (int i = 0; i < 21; i++) {
                double v = ft == RJ_F32 ? ((float *)ti.values)[i] : ((double *)ti.values)[i];
                if (v != 0) fail_msg("%s, %s: element %d is %g, not 0", rj_dtype_name(ft),
                                     t == RJ_TARGET_CPU ? "cpu" : "reference", i, v);
            }
            rj_bind_free(b);
            rj_program_free(p);
        }
        rj_graph_free(g);
    }
}

/* layer_norm and rms_norm of rows far from 0 and of rows of huge values, f32 and f64, one
 * block (7) and compensated blocks (300), against the interpreter (which computes in double):
 * the mean of data around 1e4 or 1e6 once rounded to f32 shifted every result by up to 1e-3,
 * a row whose first element is far from the others (the shift of the one-pass variance) lost
 * log2(300) bits of its variance, and a row whose sum of squares overflowed (values beyond
 * about 1e18) was NaN or 0. A row
 * with an infinity is as the interpreter has it (layer_norm: NaN; rms_norm: 0, NaN at inf). */
static void test_norm_large_values(void **state) {
    fixture *f = *state;
    enum { NROW = 10 };
    for (int dsel = 0; dsel < 2; dsel++)
        for (rj_dtype ft = RJ_F32; ft <= RJ_F64; ft++)
            for (int rms = 0; rms < 2; rms++) {
                int64_t W = dsel ? 300 : 7, n = NROW * W;
                rj_graph *g = rj_graph_new(f->ctx);
                rj_dim B = rj_graph_dense(g, "B"), J = rj_graph_ragged(g, "j", B);
                rj_node x = rj_graph_input(g, "x", ft, 3, (rj_dim[]){B, J, W});
                rj_node y = rms ? rj_graph_rms_norm(g, x, 1, RJ_NONE, -1)
                                : rj_graph_layer_norm(g, x, 1, RJ_NONE, RJ_NONE, 1e-5);
                rj_graph_output(g, y, "y");
                double *xd = malloc(sizeof(double) * (size_t)n);
                float *xf = malloc(sizeof(float) * (size_t)n);
                assert_true(xd && xf);
                uint64_t seed = 11;
                for (int64_t r = 0; r < NROW; r++)
                    for (int64_t d = 0; d < W; d++) {
                        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
                        double u = (double)((seed >> 40) & 0xffffff) / 16777216.0 * 2 - 1; /* [-1, 1) */
                        double big = ft == RJ_F32 ? 3e38 : 1e308, v;
                        switch (r) {
                        case 0: v = 1e4 + u; break;
                        case 1: v = 1e6 + 10 * u; break;
                        case 2: v = big * u; break;                             /* squares overflow */
                        case 3: v = d % 4 == 1 ? 1e30 * u : u; break;           /* f32: they overflow */
                        case 4: v = d == 0 ? 1e20 : u; break;                   /* k an outlier */
                        case 5: v = d == 3 ? INFINITY : u; break;               /* NaN on both */
                        case 6: v = 1e-40 * u; break;
                        case 7: v = -big + (d % 2) * big * 1e-3; break;        /* x - k overflows */
                        case 8: v = d == 0 ? 1000 : u; break; /* k an outlier: the shifted sums cancel */
                        default: v = u; break;
                        }
                        xd[r * W + d] = v;
                        xf[r * W + d] = (float)v;
                    }
                int64_t off[] = {0, 4, NROW};
                double *res[2];
                rj_program *p[2];
                rj_bind *b[2];
                for (int k = 0; k < 2; k++) {
                    p[k] = rj_program_new(g, k ? RJ_TARGET_REFERENCE : RJ_TARGET_CPU);
                    assert_non_null(p[k]);
                    b[k] = rj_bind_new(p[k]);
                    assert_ok(f->ctx, rj_bind_offsets(b[k], J, 2, off, NULL));
                    assert_ok(f->ctx, rj_bind_input(b[k], x, ft == RJ_F32 ? (void *)xf : (void *)xd, n));
                    assert_ok(f->ctx, rj_program_run(p[k], b[k]));
                    rj_tensor_info ti;
                    rj_tensor_get_info(rj_bind_result(b[k], y), &ti);
                    res[k] = malloc(sizeof(double) * (size_t)n);
                    assert_non_null(res[k]);
                    for (int64_t i = 0; i < n; i++)
                        res[k][i] = ft == RJ_F32 ? ((float *)ti.values)[i] : ((double *)ti.values)[i];
                }
                int nans = 0;
                for (int64_t i = 0; i < n; i++) {
                    double got = res[0][i], want = res[1][i];
                    double tol = ft == RJ_F32 ? 2e-6 + 1e-6 * fabs(want) : 1e-12 + 1e-10 * fabs(want);
                    nans += isnan(want);
                    if (isnan(want) ? isnan(got) : fabs(got - want) <= tol) continue;
                    fail_msg("%s, %s, W %d: row %d, element %d: %.9g, expected %.9g (input %.9g)",
                             rms ? "rms_norm" : "layer_norm", rj_dtype_name(ft), (int)W, (int)(i / W),
                             (int)(i % W), got, want, xd[i]);
                }
                assert_int_equal(nans, rms ? 1 : W); /* row 5 alone (rms_norm: x / inf is 0) */
                for (int k = 0; k < 2; k++) {
                    free(res[k]);
                    rj_bind_free(b[k]);
                    rj_program_free(p[k]);
                }
                free(xd);
                free(xf);
                rj_graph_free(g);
            }
}

static void test_math_special_values(void **state) {
    fixture *f = *state;
    static const float xs[] = {0.0f, -0.0f, 1e-45f, -1e-45f, 1e-38f, 1.17e-38f, 1e-30f, 0.5f, -0.5f,
                               0.625f, 0.6249f, 0.99f, 1.0f, 1.01f, 3.99f, 4.0f, 4.5f, 9.0f, 10.0f,
                               -87.3f, -87.4f, -88.0f, -103.0f, -104.0f, 88.3f, 88.5f, 88.72f, 88.73f,
                               100.0f, 1e30f, -1e30f, 3.4e38f, INFINITY, -INFINITY, NAN};
    static const rj_op ops[] = {RJ_OP_EXP, RJ_OP_LOG, RJ_OP_TANH, RJ_OP_GELU, RJ_OP_GELU_TANH,
                                RJ_OP_SIGMOID, RJ_OP_SILU};
    int n = (int)(sizeof xs / sizeof xs[0]);
    int64_t off[] = {0, n};
    for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++) {
        rj_graph *g = rj_graph_new(f->ctx);
        rj_dim B = rj_graph_dense(g, "B"), J = rj_graph_ragged(g, "j", B);
        rj_node x = rj_graph_input(g, "x", RJ_F32, 2, (rj_dim[]){B, J});
        rj_node y = rj_graph_unary(g, ops[k], x);
        rj_graph_output(g, y, "y");
        rj_program *pc = rj_program_new(g, RJ_TARGET_CPU), *pr = rj_program_new(g, RJ_TARGET_REFERENCE);
        rj_bind *bc = rj_bind_new(pc), *br = rj_bind_new(pr);
        rj_bind_offsets(bc, J, 1, off, NULL);
        rj_bind_offsets(br, J, 1, off, NULL);
        rj_bind_input(bc, x, xs, n);
        rj_bind_input(br, x, xs, n);
        assert_ok(f->ctx, rj_program_run(pc, bc));
        assert_ok(f->ctx, rj_program_run(pr, br));
        rj_tensor_info a, r;
        rj_tensor_get_info(rj_bind_result(bc, y), &a);
        rj_tensor_get_info(rj_bind_result(br, y), &r);
        for (int i = 0; i < n; i++) {
            float got = ((float *)a.values)[i], want = ((float *)r.values)[i];
            if (want == 0 && got == 0 && signbit(got) != signbit(want)) /* tanh(-0.0) is -0.0 */
                fail_msg("%s(%.9g) = %g, expected %g", rj_op_name(ops[k]), xs[i], got, want);
            if (isnan(want) ? isnan(got) : (got == want || fabsf(got - want) <= 3e-7f * fabsf(want) + 1e-37f))
                continue;
            /* results the interpreter rounds to subnormals may flush to zero */
            if (fabsf(want) < 1.2e-38f && fabsf(got) < 1.2e-38f) continue;
            fail_msg("%s(%.9g) = %.9g, expected %.9g", rj_op_name(ops[k]), xs[i], got, want);
        }
        rj_bind_free(bc);
        rj_bind_free(br);
        rj_program_free(pc);
        rj_program_free(pr);
        rj_graph_free(g);
    }
}

/* softmax (log: log_softmax) over the ragged dim of xs (f32[B, j, ncol], nb items at off) on
 * the CPU and on the reference: the results in cpu and ref until sm_pair_free. */
typedef struct sm_pair {
    rj_graph *g;
    rj_program *p[2];
    rj_bind *b[2];
    const float *cpu, *ref;
} sm_pair;

static sm_pair sm_pair_run(fixture *f, bool log, const float *xs, int64_t ncol, int64_t nb, const int64_t *off) {
    sm_pair s = {.g = rj_graph_new(f->ctx)};
    rj_dim B = rj_graph_dense(s.g, "B"), J = rj_graph_ragged(s.g, "j", B), N = rj_graph_dense(s.g, "D");
    rj_node x = rj_graph_input(s.g, "x", RJ_F32, 3, (rj_dim[]){B, J, N});
    rj_node y = log ? rj_graph_log_softmax(s.g, x, 1) : rj_graph_softmax(s.g, x, 1);
    rj_graph_output(s.g, y, "y");
    const rj_target targets[2] = {RJ_TARGET_CPU, RJ_TARGET_REFERENCE};
    const float **out[2] = {&s.cpu, &s.ref};
    for (int k = 0; k < 2; k++) {
        s.p[k] = rj_program_new(s.g, targets[k]);
        assert_non_null(s.p[k]);
        s.b[k] = rj_bind_new(s.p[k]);
        assert_ok(f->ctx, rj_bind_size(s.b[k], N, ncol));
        assert_ok(f->ctx, rj_bind_offsets(s.b[k], J, nb, off, NULL));
        assert_ok(f->ctx, rj_bind_input(s.b[k], x, xs, off[nb] * ncol));
        assert_ok(f->ctx, rj_program_run(s.p[k], s.b[k]));
        rj_tensor_info ti;
        rj_tensor_get_info(rj_bind_result(s.b[k], y), &ti);
        *out[k] = ti.values;
    }
    return s;
}

static void sm_pair_free(sm_pair *s) {
    for (int k = 0; k < 2; k++) {
        rj_bind_free(s->b[k]);
        rj_program_free(s->p[k]);
    }
    rj_graph_free(s->g);
}

/* softmax and log_softmax over the ragged dim, with columns holding NaN (payloads included:
 * bits that reach exp's exponent field if nothing stops them), +-inf, only -inf, and huge
 * values: every element as the reference has it (NaN for NaN, the same infinities). The CPU
 * takes exp of x - max without the checks for overflow and NaN, relying on the column's
 * result being NaN whenever its maximum is not finite. */
static void test_softmax_nonfinite_columns(void **state) {
    fixture *f = *state;
    enum { NCOL = 9, NROW = 40 };
    static float xs[NROW * NCOL];
    static const uint32_t nan_bits[] = {0x7fc00001u, 0xffc001ffu, 0x7fc00000u, 0x7f800001u};
    for (int i = 0; i < NROW * NCOL; i++) xs[i] = (float)((i * 37) % 101 - 50) * 0.7f;
    for (int r = 0; r < NROW; r++) {
        memcpy(&xs[r * NCOL + 0], &nan_bits[r % 4], sizeof(float)); /* column 0: NaNs in every item */
        xs[r * NCOL + 1] = -INFINITY;                               /* column 1: nothing but -inf */
        if (r % 7 == 3) xs[r * NCOL + 2] = INFINITY;                 /* column 2: some +inf */
        if (r % 5 == 0) xs[r * NCOL + 3] = -INFINITY;                /* column 3: some -inf */
        xs[r * NCOL + 4] = r % 2 ? 3e38f : -3e38f;                   /* column 4: huge of both signs */
    }
    memcpy(&xs[17 * NCOL + 5], &nan_bits[0], sizeof(float));         /* column 5: one NaN in item 1 */
    int64_t off[] = {0, 0, 13, 31, 31, NROW};                      /* empty items among them */
    for (int op = 0; op < 2; op++) {
        sm_pair sp = sm_pair_run(f, op, xs, NCOL, 5, off);
        int nan_cols = 0;
        for (int i = 0; i < NROW * NCOL; i++) {
            float got = sp.cpu[i], want = sp.ref[i];
            nan_cols += isnan(want);
            /* ragjit check's tolerance: x - max - log(sum) cancels */
            if (isnan(want) ? isnan(got) : (got == want || fabsf(got - want) <= 2e-5f + 1e-4f * fabsf(want))) continue;
            fail_msg("%s: element %d (row %d, column %d) = %.9g, expected %.9g", op ? "log_softmax" : "softmax", i,
                     i / NCOL, i % NCOL, got, want);
        }
        assert_true(nan_cols >= 3 * NROW); /* the test does reach the non-finite columns */
        sm_pair_free(&sp);
    }
}

/* Softmax over the ragged dim takes its shift from the first and last 16 rows of an item and
 * runs the item again with the true maximum where a column's sum leaves the range it can
 * trust (lower/items.c, items_softmax). Columns that pass and columns that must run again, in long
 * and short items, against the reference: a row 100 above the rest in the middle of an item
 * (the retry), a first block of -inf, rows rising slowly and steeply, falling, large random
 * values, a NaN and a +inf in the middle of an item (the retry), a row in the middle of an
 * item above the rest by 3e6 up to FLT_MAX (the retry, with exp's argument out of range). */
static void test_softmax_speculative_max(void **state) {
    fixture *f = *state;
    enum { NCOL = 40 };
    static const int64_t off[] = {0, 40, 1040, 1045, 1045, 1345, 1362};
    enum { NB = 6, NROW = 1362 };
    float *xs = malloc(sizeof(float) * NROW * NCOL);
    assert_non_null(xs);
    uint64_t seed = 7;
    for (int b = 0; b < NB; b++)
        for (int64_t r = off[b]; r < off[b + 1]; r++) {
            int64_t i = r - off[b], len = off[b + 1] - off[b];
            for (int c = 0; c < NCOL; c++) {
                seed = seed * 6364136223846793005ull + 1442695040888963407ull;
                float u = (float)((seed >> 40) & 0xffffff) / 16777216.0f - 0.5f; /* [-0.5, 0.5) */
                float v;
                switch (c) {
                case 1: v = i == 30 ? 100.0f : u; break;
                case 2: v = i < 16 ? -INFINITY : u; break;
                case 3: v = 0.06f * (float)i + u; break;
                case 4: v = 0.5f * (float)i; break;
                case 5: v = -0.3f * (float)i; break;
                case 6: v = 100.0f * u; break;
                case 7: v = b == 1 && i == 500 ? NAN : u; break;
                case 8: v = b == 4 && i == 200 ? INFINITY : u; break;
                /* one row in the middle far above the first and last 16, which give the
                 * shift: x - shift so large that exp's argument reduction is out of range
                 * (37794552 made a term of -inf, which the sum's check let through, and
                 * NaN results), up to the most negative float as a mask value */
                case 9: v = i == len / 2 ? 0.0f : -37794552.0f; break;
                case 10: v = i == len / 2 ? 1.0f : -37795040.0f; break;
                case 11: v = i == len / 2 ? 0.5f : -1e38f; break;
                case 12: v = i == len / 2 ? 0.0f : -FLT_MAX; break;
                case 13: v = i == len / 2 ? 0.0f : -3e6f; break;
                default: v = 4.0f * u; break;
                }
                xs[r * NCOL + c] = v;
            }
        }
    sm_pair sp = sm_pair_run(f, false, xs, NCOL, NB, off);
    int nan = 0;
    for (int b = 0; b < NB; b++)
        for (int c = 0; c < NCOL; c++) {
            float m = -INFINITY;
            for (int64_t row = off[b]; row < off[b + 1]; row++) m = fmaxf(m, xs[row * NCOL + c]);
            for (int64_t row = off[b]; row < off[b + 1]; row++) {
                int64_t i = row * NCOL + c;
                float got = sp.cpu[i], want = sp.ref[i];
                nan += isnan(want);
                /* a few ulps (exp's 2.5, the sum's, the reciprocal's), and the rounding of the
                 * argument x - m in f32, which exp turns into a relative error of the result */
                float tol = want * (1e-6f + 1.2e-7f * fabsf(xs[i] - m)) + 1e-38f;
                if (isnan(want) ? isnan(got) : got == want || fabsf(got - want) <= tol) continue;
                fail_msg("softmax: item %d, row %d, column %d: %.9g, expected %.9g", b, (int)(row - off[b]), c,
                         got, want);
            }
        }
    /* NaN: the columns with a NaN and a +inf, and column 2 of item 2 (five rows, all -inf) */
    assert_int_equal(nan, (int)((off[2] - off[1]) + (off[5] - off[4]) + (off[3] - off[2])));
    /* A column's result does not depend on its neighbours: on two threads the long item is
     * split into tiles of 16 columns, so the columns that run again with column 1 are not the
     * same as on one thread (one tile of 40); the results must still be the same bits. */
    size_t bytes = sizeof(float) * NROW * NCOL;
    float *one = malloc(bytes);
    assert_non_null(one);
    for (int th = 1; th <= 2; th++) {
        assert_ok(f->ctx, rj_ctx_set_threads(f->ctx, th));
        assert_ok(f->ctx, rj_program_run(sp.p[0], sp.b[0]));
        rj_tensor_info ti;
        rj_tensor_get_info(rj_bind_result(sp.b[0], rj_graph_output_at(sp.g, 0)), &ti);
        if (th == 1) memcpy(one, ti.values, bytes);
        else if (memcmp(one, ti.values, bytes)) {
            int i = 0;
            while (!memcmp(&one[i], &((const float *)ti.values)[i], sizeof(float))) i++;
            fail_msg("softmax: 1 and 2 threads differ at row %d, column %d: %a vs %a", i / NCOL, i % NCOL,
                     (double)one[i], (double)((const float *)ti.values)[i]);
        }
    }
    assert_ok(f->ctx, rj_ctx_set_threads(f->ctx, 0));
    free(one);
    sm_pair_free(&sp);
    free(xs);
}

/* Streaming rows (llvm/stream.c): rows of a constant width, a multiple of the vector
 * width, stored directly, with non-temporal vector stores where a row starts on a vector's
 * alignment and plain stores elsewhere (an elementwise kernel's rows, softmax's constant
 * tiles, lower/items.c: state_tile); other rows staged where they are whole aligned lines or long,
 * and plain otherwise. With streaming forced on, each shape writes the same bits into
 * ragjit's own (aligned) output and into user buffers 4, 8 and 32 bytes past an alignment (2 as
 * well for 16-bit outputs, which stream too: rt.c's 2-byte flush; a
 * vmovntps at an unaligned address would fault, a staged row's part lines are copied apart),
 * and matches the interpreter. On x86-64 the code of the direct kernels holds the
 * non-temporal stores. */
static void test_streaming_rows(void **state) {
    fixture *f = *state;
    /* direct: the code has non-temporal stores ('y'), has none ('n': staged, through rt.c, or
     * plain), has them where the kernel has constant tiles ('t'), or depends on the vector
     * width ('?'; 24 columns are a constant tile with a masked step on AVX-512). 48 f32 columns
     * are staged when a row is aligned (192 bytes, whole lines), 600 (2400 bytes) always, 19
     * never. */
    static const struct {
        int cols;
        const char *type, *expr;
        char direct;
    } shapes[] = {{8, "f32", "softmax(x, dim=1) * 2 + 1", 't'},   {16, "f32", "softmax(x, dim=1) * 2 + 1", 't'},
                  {256, "f32", "softmax(x, dim=1) * 2 + 1", 't'}, {8, "f64", "softmax(x, dim=1) * 2 + 1", 't'},
                  {24, "f32", "softmax(x, dim=1) * 2 + 1", '?'},  {32, "f32", "softmax(x, dim=1) * 2 + 1", 't'},
                  {48, "f32", "softmax(x, dim=1) * 2 + 1", 'n'},  {19, "f32", "log_softmax(x, dim=1)", '?'},
                  {256, "f32", "log_softmax(x, dim=1) - 1", 't'},
                  {8, "f32", "relu(x * 2 - 1)", 'y'},
                  {64, "f64", "relu(x * 2 - 1)", 'y'},            {19, "f32", "relu(x * 2 - 1)", 'n'},
                  {48, "f32", "relu(x * 2 - 1)", '?'},            {600, "f32", "relu(x * 2 - 1)", 'n'},
                  {256, "bf16", "relu(x * 2 - 1)", 'y'},          {64, "f16", "relu(x * 2 - 1)", 'y'},
                  {19, "bf16", "relu(x * 2 - 1)", 'n'},           {1100, "f16", "relu(x * 2 - 1)", 'n'},
                  {256, "bf16", "softmax(x, dim=1) * 2 + 1", '?'}, {40, "f16", "log_softmax(x, dim=1)", '?'}};
    static const int64_t off[] = {0, 3, 3, 700, 701, 733, 1200};
    enum { NB = 6, NROW = 1200 };
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
        int n = shapes[k].cols;
        rj_dtype t = !strcmp(shapes[k].type, "f64") ? RJ_F64 : !strcmp(shapes[k].type, "f32") ? RJ_F32
                     : !strcmp(shapes[k].type, "bf16") ? RJ_BF16 : RJ_F16;
        size_t es = rj_dtype_size(t), bytes = (size_t)NROW * (size_t)n * es;
        char src[200];
        snprintf(src, sizeof src, "ragged j1 : B\ninput x : %s[B, j1, %d]\ny = %s\noutput y\n", shapes[k].type, n,
                 shapes[k].expr);
        rj_graph *g = rj_graph_parse(f->ctx, src, "tiles.rj");
        assert_non_null(g);
        rj_node x = rj_graph_find(g, "x"), y = rj_graph_find(g, "y");
        rj_dim J = rj_graph_find_dim(g, "j1");
        char *xs = malloc(bytes), *user = malloc(bytes + 128), *own = malloc(bytes);
        assert_true(xs && user && own);
        uint64_t seed = 11 + k;
        for (int64_t i = 0; i < (int64_t)NROW * n; i++) {
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            double u = (double)((seed >> 40) & 0xffffff) / 16777216.0 * 8.0 - 4.0;
            rj_value_set(t, xs, i, u);
        }
        rj_program *pr = rj_program_new(g, RJ_TARGET_REFERENCE), *pc = rj_program_new(g, RJ_TARGET_CPU);
        assert_non_null(pr);
        if (!pc) fail_msg("%s: %s", src, rj_ctx_error(f->ctx));
        rj_bind *br = rj_bind_new(pr);
        assert_ok(f->ctx, rj_bind_offsets(br, J, NB, off, NULL));
        assert_ok(f->ctx, rj_bind_input(br, x, xs, (int64_t)NROW * n));
        assert_ok(f->ctx, rj_program_run(pr, br));
        rj_tensor_info want;
        assert_ok(f->ctx, rj_tensor_get_info(rj_bind_result(br, y), &want));
        cpu_set_stream_bytes(f->ctx, 1);
        for (int th = 1; th <= 2; th++) {
            assert_ok(f->ctx, rj_ctx_set_threads(f->ctx, th));
            static const size_t shifts[] = {SIZE_MAX, 2, 4, 8, 32};
            for (size_t q = 0; q < sizeof shifts / sizeof shifts[0]; q++) {
                if (shifts[q] != SIZE_MAX && shifts[q] % es) continue;
                rj_bind *b = rj_bind_new(pc);
                assert_ok(f->ctx, rj_bind_offsets(b, J, NB, off, NULL));
                assert_ok(f->ctx, rj_bind_input(b, x, xs, (int64_t)NROW * n));
                char *at = NULL;
                if (shifts[q] != SIZE_MAX) { /* shifts[q] bytes past a 64-byte boundary */
                    at = (char *)(((uintptr_t)user + 63) & ~(uintptr_t)63) + shifts[q];
                    assert_ok(f->ctx, rj_bind_output(b, y, at, (int64_t)NROW * n));
                }
                assert_ok(f->ctx, rj_program_run(pc, b));
                rj_tensor_info got;
                assert_ok(f->ctx, rj_tensor_get_info(rj_bind_result(b, y), &got));
                if (at) assert_ptr_equal(got.values, at);
                char what[240];
                snprintf(what, sizeof what, "%s of %s[B, j1, %d], %d thread(s), output %s%zu bytes past a line",
                         shapes[k].expr, shapes[k].type, n, th, at ? "" : "ragjit's own, ", at ? shifts[q] : 0);
                compare(what, &got, &want);
                if (th == 1 && !at) memcpy(own, got.values, bytes);
                else if (memcmp(own, got.values, bytes)) fail_msg("%s: not the bits of the aligned run", what);
                rj_bind_free(b);
            }
        }
        cpu_set_stream_bytes(f->ctx, 0);
        assert_ok(f->ctx, rj_ctx_set_threads(f->ctx, 0));
#if defined(__x86_64__)
        char *loops = rj_program_dump(pc, "loops"), *code = rj_program_dump(pc, "asm");
        assert_true(loops && code);
        bool direct = shapes[k].direct == 'y' || (shapes[k].direct == 't' && strstr(loops, "-wide tile) pairs"));
        if (shapes[k].direct != '?' && direct != !!strstr(code, "vmovnt"))
            fail_msg("%s: %s non-temporal stores:\n%s", src, direct ? "without" : "with", loops);
        rj_string_free(f->ctx, loops);
        rj_string_free(f->ctx, code);
#endif
        rj_bind_free(br);
        rj_program_free(pc);
        rj_program_free(pr);
        rj_graph_free(g);
        free(xs);
        free(user);
        free(own);
    }
}

/* exp (and softmax's exp of x - max) gives the same bits for the same argument whichever lane
 * of a vector loop, epilogue or scalar remainder computes it: with AVX-512 the three are
 * separate functions (mathlib.c), and a scalar remainder that flushed tiny results to zero
 * while the vector body kept them subnormal would make a column's value depend on its
 * position. Every row holds one value in all of its 23 columns (16 + 4 + 3 lanes). */
static void test_exp_lanes_agree(void **state) {
    fixture *f = *state;
    enum { NCOL = 23 };
    static const float vals[] = {0.0f, -0.5f, -20.0f, -87.0f, -87.5f, -88.0f, -95.0f, -100.0f, -103.9f, -104.0f,
                                 -104.5f, -1e30f, -INFINITY, 0.3f, 5.0f, 88.0f, 88.72f, 88.73f, 1e30f, INFINITY, NAN};
    enum { NROW = (int)(sizeof vals / sizeof vals[0]) };
    static float xs[NROW * NCOL];
    for (int r = 0; r < NROW; r++)
        for (int c = 0; c < NCOL; c++) xs[r * NCOL + c] = vals[r];
    /* softmax's rows: the maximum is 0 (row 0), so its terms reach the subnormal range; the
     * items after the first leave out the rows that make the column NaN */
    int64_t off_exp[] = {0, NROW}, off_sm[] = {0, 11, 13};
    for (int op = 0; op < 2; op++) {
        rj_graph *g = rj_graph_new(f->ctx);
        rj_dim B = rj_graph_dense(g, "B"), J = rj_graph_ragged(g, "j", B), N = rj_graph_dense(g, "D");
        rj_node x = rj_graph_input(g, "x", RJ_F32, 3, (rj_dim[]){B, J, N});
        rj_node y = op ? rj_graph_softmax(g, x, 1) : rj_graph_unary(g, RJ_OP_EXP, x);
        rj_graph_output(g, y, "y");
        rj_program *p = rj_program_new(g, RJ_TARGET_CPU);
        assert_non_null(p);
        rj_bind *b = rj_bind_new(p);
        int rows = op ? 13 : NROW;
        assert_ok(f->ctx, rj_bind_size(b, N, NCOL));
        assert_ok(f->ctx, rj_bind_offsets(b, J, op ? 2 : 1, op ? off_sm : off_exp, NULL));
        assert_ok(f->ctx, rj_bind_input(b, x, xs, (int64_t)rows * NCOL));
        assert_ok(f->ctx, rj_program_run(p, b));
        rj_tensor_info a;
        rj_tensor_get_info(rj_bind_result(b, y), &a);
        const float *v = a.values;
        for (int r = 0; r < rows; r++) {
            uint32_t w, u;
            memcpy(&w, &v[r * NCOL], 4);
            for (int c = 1; c < NCOL; c++) {
                memcpy(&u, &v[r * NCOL + c], 4);
                if (u != w && !(isnan(v[r * NCOL]) && isnan(v[r * NCOL + c])))
                    fail_msg("%s(%g): column %d gives %a, column 0 %a", op ? "softmax" : "exp", (double)xs[r * NCOL], c,
                             (double)v[r * NCOL + c], (double)v[r * NCOL]);
            }
        }
        rj_bind_free(b);
        rj_program_free(p);
        rj_graph_free(g);
    }
}

/* RAGJIT_PERF_MAP=1: a context whose JIT is created with it lists its kernels in
 * /tmp/perf-<pid>.map, each with the address of its code and its symbol's size (not a
 * placeholder). Programs loaded from the persistent cache are linked by the same code. */
static void test_perf_map(void **state) {
    (void)state;
    char path[64];
    snprintf(path, sizeof path, "/tmp/perf-%d.map", (int)getpid());
    unlink(path);
    setenv("RAGJIT_PERF_MAP", "1", 1);
    rj_ctx *ctx = rj_ctx_new(NULL, NULL);
    assert_non_null(ctx);
    assert_ok(ctx, rj_ctx_set_cache_dir(ctx, "off"));
    rj_graph *g = rj_graph_new(ctx);
    rj_dim B = rj_graph_dense(g, "B"), J = rj_graph_ragged(g, "j", B);
    rj_node x = rj_graph_input(g, "x", RJ_F32, 3, (rj_dim[]){B, J, 8});
    rj_graph_output(g, rj_graph_softmax(g, rj_graph_unary(g, RJ_OP_RELU, x), 1), "y");
    rj_program *p = rj_program_new(g, RJ_TARGET_CPU); /* creates the context's JIT: reads the setting */
    unsetenv("RAGJIT_PERF_MAP");
    assert_non_null(p);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    unsigned long long addr = 0, size = 0;
    char name[128] = "";
    int lines = 0;
    while (fscanf(f, "%llx %llx %127s", &addr, &size, name) == 3) {
        lines++;
        if (strncmp(name, "rj", 2) || !strstr(name, "_k0") || size < 16 || size > (1u << 20))
            fail_msg("perf map line %d: %llx %llx %s", lines, addr, size, name);
        /* the kernel's first bytes are code: an x86-64 function does not start with zeros */
        const unsigned char *code = (const unsigned char *)(uintptr_t)addr;
        assert_true(code[0] || code[1] || code[2] || code[3]);
    }
    fclose(f);
    assert_int_equal(lines, 1);
    unlink(path);
    rj_program_free(p);
    rj_graph_free(g);
    rj_ctx_free(ctx);
}

/* CPU runs report their time as the kernels' time, with no copies; there is no device probe. */
static void test_run_stats(void **state) {
    fixture *f = *state;
    env e = env_new(f->ctx, RJ_F32);
    std_chain_add(&e, "softmax(relu(x*w+v), dim=1)");
    rj_program *p = rj_program_new(e.g, RJ_TARGET_CPU);
    assert_non_null(p);
    rj_bind *b = rj_bind_new(p);
    data d = data_new(LEN_SKEWED, RJ_F32, 2);
    bind_all(f->ctx, b, &e, &d, NULL);
    rj_run_stats st;
    assert_int_equal(rj_bind_stats(b, &st), RJ_ERR_ARG);
    assert_error_contains(f->ctx, "no successful run");
    assert_int_equal(rj_program_run(p, b), RJ_OK);
    assert_int_equal(rj_bind_stats(b, &st), RJ_OK);
    assert_true(st.run_ms > 0 && st.kernel_ms == st.run_ms && st.copy_ms == 0 && st.kernels >= 1);
    double gbs = 1;
    assert_int_equal(rj_device_copy_bandwidth(f->ctx, RJ_TARGET_CPU, 1 << 20, &gbs), RJ_ERR_UNSUPPORTED);
    assert_true(gbs == 0);
    assert_int_equal(rj_device_copy_bandwidth(f->ctx, (rj_target)99, 1 << 20, &gbs), RJ_ERR_ARG);
    assert_int_equal(rj_bind_stats(NULL, &st), RJ_ERR_ARG);
    rj_bind_free(b);
    data_free(&d);
    rj_program_free(p);
    rj_graph_free(e.g);
}

/* Temporaries share memory by liveness: in a chain of four softmaxes each kernel reads the
 * temporary the one before wrote and writes the next, so the first and the third are never
 * alive together and share bytes: the run holds two temporaries, not three (rj_run_stats
 * .temp_bytes); the result still matches the reference on every length pattern. */
static void test_temp_planning(void **state) {
    fixture *f = *state;
    rj_graph *g = rj_graph_parse(f->ctx,
                                 "ragged j1 : B\n"
                                 "input x : f32[B, j1, 16]\n"
                                 "a = softmax(x, dim=1)\n"
                                 "b = softmax(a * 2.0, dim=1)\n"
                                 "c = softmax(b * 3.0, dim=1)\n"
                                 "d = softmax(c * 4.0, dim=1)\n"
                                 "output d\n", "chain.rj");
    assert_non_null(g);
    rj_program *p = rj_program_new(g, RJ_TARGET_CPU), *ref = rj_program_new(g, RJ_TARGET_REFERENCE);
    assert_non_null(p);
    assert_non_null(ref);
    rj_dim J = rj_graph_find_dim(g, "j1");
    rj_node x = rj_graph_find(g, "x"), d = rj_graph_find(g, "d");
    int64_t off[5] = {0, 5, 5, 12, 75};
    float *xs = malloc(sizeof(float) * 75 * 16), *y = malloc(sizeof(float) * 75 * 16),
          *yr = malloc(sizeof(float) * 75 * 16);
    for (int i = 0; i < 75 * 16; i++) xs[i] = (float)((i * 37) % 23) / 7.0f - 1.5f;
    rj_program *progs[2] = {p, ref};
    float *outs[2] = {y, yr};
    for (int k = 0; k < 2; k++) {
        rj_bind *b = rj_bind_new(progs[k]);
        assert_ok(f->ctx, rj_bind_offsets(b, J, 4, off, NULL));
        assert_ok(f->ctx, rj_bind_input(b, x, xs, 75 * 16));
        assert_ok(f->ctx, rj_bind_output(b, d, outs[k], 75 * 16));
        assert_ok(f->ctx, rj_program_run(progs[k], b));
        rj_run_stats st;
        assert_ok(f->ctx, rj_bind_stats(b, &st));
        if (k == 0) assert_int_equal(st.temp_bytes, 2 * 75 * 16 * 4); /* 4800 bytes each, 64-byte multiples */
        rj_bind_free(b);
    }
    for (int i = 0; i < 75 * 16; i++) assert_true(fabsf(y[i] - yr[i]) <= 1e-5f);
    free(xs), free(y), free(yr);
    rj_program_free(p);
    rj_program_free(ref);
    rj_graph_free(g);
}

/* A function called three times: its kernels are compiled once and run three times
 * (cpu_shared_kernel_count), the result the reference's. */
/* Runs a program of x : f32[B, j1, 16], w, w2 : f32[16] -> y (names looked up in g) on fixed
 * data of 4 items (one empty), into out (75 * 16 floats). */
static void run_block_prog(rj_ctx *ctx, rj_program *p, rj_graph *g, float *out) {
    rj_dim J = rj_graph_find_dim(g, "j1");
    rj_node x = rj_graph_find(g, "x"), w = rj_graph_find(g, "w"), w2 = rj_graph_find(g, "w2"), y = rj_graph_find(g, "y");
    int64_t off[5] = {0, 5, 5, 12, 75};
    float ws[16], ws2[16], *xs = malloc(sizeof(float) * 75 * 16);
    for (int i = 0; i < 16; i++) ws[i] = (float)(i % 5) / 4.0f - 0.3f, ws2[i] = 0.5f - ws[i];
    for (int i = 0; i < 75 * 16; i++) xs[i] = (float)((i * 37) % 23) / 7.0f - 1.5f;
    rj_bind *b = rj_bind_new(p);
    assert_ok(ctx, rj_bind_offsets(b, J, 4, off, NULL));
    assert_ok(ctx, rj_bind_input(b, x, xs, 75 * 16));
    assert_ok(ctx, rj_bind_input(b, w, ws, 16));
    if (w2 >= 0) assert_ok(ctx, rj_bind_input(b, w2, ws2, 16));
    assert_ok(ctx, rj_bind_output(b, y, out, 75 * 16));
    assert_ok(ctx, rj_program_run(p, b));
    rj_bind_free(b);
    free(xs);
}

static void assert_close16(const float *out, const float *ref) {
    for (int i = 0; i < 75 * 16; i++)
        if (!(fabsf(out[i] - ref[i]) <= 2e-5f)) fail_msg("element %d: %g, reference %g", i, out[i], ref[i]);
}

#define BLOCK_DEF                                                                                                      \
    "ragged j1 : B\n"                                                                                                   \
    "input x : f32[B, j1, 16]\n"                                                                                        \
    "input w : f32[16]\n"                                                                                               \
    "def block(h, w):\n"                                                                                                \
    "    s = softmax(relu(h * w) + h, dim=1)\n"                                                                         \
    "    return layer_norm(s * 4.0 + h, 16)\n"

static void test_function_kernels_shared(void **state) {
    fixture *f = *state;
    rj_graph *g = rj_graph_parse(f->ctx, BLOCK_DEF "input w2 : f32[16]\ny = block(block(block(x, w), w2), w)\noutput y\n",
                                 "fn.rj");
    assert_non_null(g);
    uint64_t s0 = cpu_shared_kernel_count(f->ctx);
    rj_program *p = rj_program_new(g, RJ_TARGET_CPU), *ref = rj_program_new(g, RJ_TARGET_REFERENCE);
    assert_non_null(p);
    assert_non_null(ref);
    uint64_t shared = cpu_shared_kernel_count(f->ctx) - s0;
    if (shared < 2) fail_msg("%d kernels shared, expected at least 2 (one per repeated call)", (int)shared);
    float *out = malloc(sizeof(float) * 75 * 16), *outr = malloc(sizeof(float) * 75 * 16);
    run_block_prog(f->ctx, p, g, out);
    run_block_prog(f->ctx, ref, g, outr);
    assert_close16(out, outr);
    free(out), free(outr);
    rj_program_free(p);
    rj_program_free(ref);
    rj_graph_free(g);
}

/* Kernels of one context's programs are compiled once (kshare.c): a second program whose
 * kernels the first has (the same layers, their weights swapped: another program, the same
 * code) compiles nothing and runs the first's code, which stays alive after the first program
 * is freed; a tracking allocator sees every byte returned. */
static void test_context_kernels_shared(void **state) {
    (void)state;
    tracker tr = {0};
    rj_ctx *ctx = rj_ctx_new(tracking_alloc, &tr);
    assert_ok(ctx, rj_ctx_set_cache_dir(ctx, "off"));
    rj_graph *g1 = rj_graph_parse(ctx, BLOCK_DEF "input w2 : f32[16]\ny = block(block(x, w), w2)\noutput y\n", "one.rj");
    rj_graph *g2 = rj_graph_parse(ctx, BLOCK_DEF "input w2 : f32[16]\ny = block(block(x, w2), w)\noutput y\n", "two.rj");
    assert_non_null(g1);
    assert_non_null(g2);
    rj_program *p1 = rj_program_new(g1, RJ_TARGET_CPU);
    assert_non_null(p1);
    uint64_t c0 = cpu_compile_count(ctx), s0 = cpu_shared_kernel_count(ctx);
    rj_program *p2 = rj_program_new(g2, RJ_TARGET_CPU), *ref = rj_program_new(g2, RJ_TARGET_REFERENCE);
    assert_non_null(p2);
    assert_non_null(ref);
    uint64_t shared = cpu_shared_kernel_count(ctx) - s0;
    if (shared < 2) fail_msg("%d kernels of the second program ran the first's code, expected at least 2", (int)shared);
    assert_int_equal(cpu_compile_count(ctx), c0); /* nothing left to compile */
    rj_program_free(p1); /* p2 keeps p1's code */
    rj_graph_free(g1);
    float *out = malloc(sizeof(float) * 75 * 16), *outr = malloc(sizeof(float) * 75 * 16);
    run_block_prog(ctx, p2, g2, out);
    run_block_prog(ctx, ref, g2, outr);
    assert_close16(out, outr);
    free(out), free(outr);
    rj_program_free(p2);
    rj_program_free(ref);
    rj_graph_free(g2);
    rj_ctx_free(ctx);
    assert_int_equal(tr.live_blocks, 0);
}

/* DLPack on host memory: a jagged input as values + offsets tensors, a dense one as one tensor;
 * outputs exported without a copy (ragjit's memory handed over, freed by the deleter, which
 * may run after rj_ctx_free); what DLPack can say that ragjit cannot take is refused. */
static void test_dlpack(void **state) {
    (void)state;
    tracker tr = {0};
    rj_ctx *ctx = rj_ctx_new(tracking_alloc, &tr);
    rj_graph *g = rj_graph_parse(ctx, "ragged j1 : B\ninput x : f32[B, j1, 4]\ninput w : f32[4]\n"
                                      "y = softmax(x * w, dim=1)\ns = sum(x, dim=1)\noutput y\noutput s\n", "t.rj");
    assert_non_null(g);
    rj_program *p = rj_program_new(g, RJ_TARGET_CPU);
    assert_non_null(p);
    rj_node x = rj_graph_find(g, "x"), w = rj_graph_find(g, "w"), y = rj_graph_find(g, "y"), s = rj_graph_find(g, "s");
    int64_t off[4] = {0, 2, 2, 5};
    float xv[20], wv[4] = {1, 2, 0.5f, -1};
    for (int i = 0; i < 20; i++) xv[i] = (float)((i * 7) % 11) / 4.0f;
    int64_t xshape[2] = {5, 4}, oshape[1] = {4}, wshape[1] = {4}, xstrides[2] = {4, 1};
    DLTensor tx = {.data = xv, .device = {kDLCPU, 0}, .ndim = 2, .dtype = {kDLFloat, 32, 1}, .shape = xshape,
                   .strides = xstrides};
    DLTensor to = {.data = off, .device = {kDLCPU, 0}, .ndim = 1, .dtype = {kDLInt, 64, 1}, .shape = oshape};
    DLTensor tw = {.data = wv, .device = {kDLCPU, 0}, .ndim = 1, .dtype = {kDLFloat, 32, 1}, .shape = wshape};
    rj_bind *b = rj_bind_new(p);
    assert_ok(ctx, rj_bind_dlpack(b, x, &tx, &to));
    assert_ok(ctx, rj_bind_dlpack(b, w, &tw, NULL));
    assert_ok(ctx, rj_program_run(p, b));
    /* the same run bound the plain way */
    rj_bind *ref = rj_bind_new(p);
    rj_dim J = rj_graph_find_dim(g, "j1");
    assert_ok(ctx, rj_bind_offsets(ref, J, 3, off, NULL));
    assert_ok(ctx, rj_bind_input(ref, x, xv, 20));
    assert_ok(ctx, rj_bind_input(ref, w, wv, 4));
    assert_ok(ctx, rj_program_run(p, ref));
    rj_tensor_info want;
    assert_ok(ctx, rj_tensor_get_info(rj_bind_result(ref, y), &want));
    struct DLManagedTensor *mv = NULL, *mo = NULL, *ms = NULL;
    assert_ok(ctx, rj_bind_export_dlpack(b, y, &mv, &mo));
    assert_non_null(mv);
    assert_non_null(mo);
    DLTensor *ty = &mv->dl_tensor, *tyo = &mo->dl_tensor;
    assert_int_equal(ty->ndim, 2);
    assert_int_equal(ty->shape[0], 5);
    assert_int_equal(ty->shape[1], 4);
    assert_int_equal(ty->dtype.code, kDLFloat);
    assert_int_equal(ty->device.device_type, kDLCPU);
    assert_null(ty->strides);
    assert_memory_equal(ty->data, want.values, 20 * sizeof(float));
    assert_int_equal(tyo->shape[0], 4);
    assert_true(tyo->data == (void *)off); /* aliases the bound offsets */
    assert_ok(ctx, rj_bind_export_dlpack(b, s, &ms, NULL)); /* dense: no offsets */
    assert_int_equal(ms->dl_tensor.ndim, 2);
    assert_int_equal(ms->dl_tensor.shape[0], 3);
    /* the next run writes new memory: the exported values stay as they were */
    float keep[20];
    memcpy(keep, ty->data, sizeof keep);
    wv[0] = 3;
    assert_ok(ctx, rj_program_run(p, b));
    assert_memory_equal(ty->data, keep, sizeof keep);
    /* refusals */
    DLTensor bad = tx;
    bad.dtype = (DLDataType){kDLFloat, 8, 1}; /* (16 bits is f16: test_dlpack_half) */
    assert_int_equal(rj_bind_dlpack(b, x, &bad, &to), RJ_ERR_UNSUPPORTED);
    bad = tx;
    int64_t tstrides[2] = {1, 5};
    bad.strides = tstrides; /* a transposed view */
    assert_int_equal(rj_bind_dlpack(b, x, &bad, &to), RJ_ERR_UNSUPPORTED);
    assert_error_contains(ctx, "not contiguous");
    bad = tx;
    bad.device.device_type = kDLCUDA;
    assert_int_equal(rj_bind_dlpack(b, x, &bad, &to), RJ_ERR_UNSUPPORTED);
    assert_error_contains(ctx, "CUDA memory");
    bad = tx;
    int64_t wrong[2] = {5, 3};
    bad.shape = wrong;
    bad.strides = NULL;
    assert_int_equal(rj_bind_dlpack(b, x, &bad, &to), RJ_ERR_SHAPE);
    assert_int_equal(rj_bind_dlpack(b, x, &tx, NULL), RJ_ERR_ARG);
    assert_int_equal(rj_bind_dlpack(b, w, &tw, &to), RJ_ERR_ARG);
    DLTensor bo = to;
    bo.dtype = (DLDataType){kDLInt, 32, 1};
    assert_int_equal(rj_bind_dlpack(b, x, &tx, &bo), RJ_ERR_SHAPE);
    /* the exported tensors outlive the binding, the program and the context */
    rj_bind_free(b);
    rj_bind_free(ref);
    rj_program_free(p);
    rj_graph_free(g);
    rj_ctx_free(ctx);
    assert_true(tr.live_blocks > 0);
    mo->deleter(mo);
    ms->deleter(ms);
    float v0 = ((float *)ty->data)[0];
    (void)v0;
    mv->deleter(mv);
    assert_int_equal(tr.live_blocks, 0);
}

/* 16-bit tensors through DLPack: f16 is (kDLFloat, 16), bf16 (kDLBfloat, 16), as PyTorch's
 * __dlpack__ gives them; a float tensor of the wrong width is refused by name. */
static void test_dlpack_half(void **state) {
    fixture *f = *state;
    rj_ctx *ctx = f->ctx;
    rj_graph *g = rj_graph_parse(ctx, "ragged j1 : B\ninput x : bf16[B, j1, 2]\ninput h : f16[2]\n"
                                      "y = x * h\nz = cast(x, \"f16\") * h\noutput y, z\n", "t.rj");
    assert_non_null(g);
    rj_program *p = rj_program_new(g, RJ_TARGET_CPU);
    assert_non_null(p);
    rj_node x = rj_graph_find(g, "x"), h = rj_graph_find(g, "h"), y = rj_graph_find(g, "y"), z = rj_graph_find(g, "z");
    int64_t off[3] = {0, 1, 3}, xshape[2] = {3, 2}, oshape[1] = {3}, hshape[1] = {2};
    uint16_t xv[6], hv[2];
    for (int i = 0; i < 6; i++) rj_value_set(RJ_BF16, xv, i, 0.25 * i - 0.5);
    rj_value_set(RJ_F16, hv, 0, 3.0);
    rj_value_set(RJ_F16, hv, 1, -0.5);
    DLTensor tx = {.data = xv, .device = {kDLCPU, 0}, .ndim = 2, .dtype = {kDLBfloat, 16, 1}, .shape = xshape};
    DLTensor to = {.data = off, .device = {kDLCPU, 0}, .ndim = 1, .dtype = {kDLInt, 64, 1}, .shape = oshape};
    DLTensor th = {.data = hv, .device = {kDLCPU, 0}, .ndim = 1, .dtype = {kDLFloat, 16, 1}, .shape = hshape};
    rj_bind *b = rj_bind_new(p);
    DLTensor wrong = th;
    wrong.dtype = (DLDataType){kDLBfloat, 16, 1};
    assert_int_equal(rj_bind_dlpack(b, h, &wrong, NULL), RJ_ERR_SHAPE);
    assert_error_contains(ctx, "bf16");
    assert_ok(ctx, rj_bind_dlpack(b, x, &tx, &to));
    assert_ok(ctx, rj_bind_dlpack(b, h, &th, NULL));
    assert_ok(ctx, rj_program_run(p, b));
    struct DLManagedTensor *my = NULL, *mz = NULL, *oy = NULL, *oz = NULL;
    assert_ok(ctx, rj_bind_export_dlpack(b, y, &my, &oy));
    assert_ok(ctx, rj_bind_export_dlpack(b, z, &mz, &oz));
    /* bf16 * f16 is f32 (PyTorch's promotion); cast to f16 then * f16 stays f16 */
    assert_int_equal(my->dl_tensor.dtype.code, kDLFloat);
    assert_int_equal(my->dl_tensor.dtype.bits, 32);
    assert_int_equal(mz->dl_tensor.dtype.code, kDLFloat);
    assert_int_equal(mz->dl_tensor.dtype.bits, 16);
    for (int i = 0; i < 6; i++) {
        double xi = 0.25 * i - 0.5, hi = i % 2 ? -0.5 : 3.0;
        assert_true(rj_value_get(RJ_F32, my->dl_tensor.data, i) == xi * hi); /* exact in both */
        assert_true(rj_value_get(RJ_F16, mz->dl_tensor.data, i) == xi * hi);
    }
    my->deleter(my), oy->deleter(oy);
    mz->deleter(mz), oz->deleter(oz);
    rj_bind_free(b);
    rj_program_free(p);
    rj_graph_free(g);
}

static void test_run_errors(void **state) {
    fixture *f = *state;
    env e = env_new(f->ctx, RJ_F32);
    std_chain_add(&e, "relu(x*w+v)");
    rj_program *p = rj_program_new(e.g, RJ_TARGET_CPU);
    rj_bind *b = rj_bind_new(p);
    data d = data_new(LEN_UNIFORM, RJ_F32, 1);
    bind_all(f->ctx, b, &e, &d, NULL);
    rj_node o = rj_graph_output_at(e.g, 0);
    assert_ok(f->ctx, rj_bind_output(b, o, d.x, d.rows * D)); /* in place: refused */
    assert_int_equal(rj_program_run(p, b), RJ_ERR_ARG);
    assert_error_contains(f->ctx, "output out0 overlaps input x");
    assert_ok(f->ctx, rj_bind_output(b, o, NULL, 0));
    int64_t bad[] = {0, 5, 3, 9, 9, 9, 9, 9};
    rj_bind_offsets(b, e.J, 7, bad, NULL);
    assert_int_equal(rj_program_run(p, b), RJ_ERR_OFFSETS_ORDER);
    assert_null(rj_bind_result(b, o));
    data_free(&d);
    rj_bind_free(b);
    rj_program_free(p);
    rj_graph_free(e.g);
}

int main(int argc, char **argv) {
    /* the slowest tests are sliced (FX_SLICED): run as shards (tests/meson.build: jit-1of8 ...),
     * each shard does a part of their loops */
    const struct CMUnitTest tests[] = {
        FX(test_unary_ops),       FX(test_binary_ops),        FX(test_select_cast_ops),
        FX(test_reduce_ops),      FX(test_softmax_norm_ops),  FX(test_pad_ops), FX(test_index_ops), FX(test_matmul_ops), FX_SLICED(test_pair_ops), FX(test_pair_result), FX(test_index_errors), FX(test_fuzz_int_fill_out_of_range),
        FX_SLICED(test_fused_chains), FX_SLICED(test_half_corpus), FX_SLICED(test_random_chains), FX(test_activation_tails), FX(test_empty_identities),
        FX(test_no_padded_buffer),  FX(test_cache_no_recompile),
        FX(test_vectorized),      FX(test_run_errors), FX(test_run_stats), FX(test_temp_planning), FX(test_function_kernels_shared), FX(test_context_kernels_shared), FX(test_dlpack), FX(test_dlpack_half),        FX(test_math_special_values), FX(test_softmax_nonfinite_columns), FX(test_exp_lanes_agree), FX(test_softmax_speculative_max), FX(test_streaming_rows), FX(test_norm_large_values), FX(test_perf_map), FX(test_stream_width), FX(test_prefetch),
        FX(test_dumps_and_lifetimes), FX(test_long_sums),  FX(test_memory_limit),
        FX(test_pow_literals),    FX(test_layer_norm_constant_rows),
    };
    return run_group(tests, NULL, NULL, argc, argv);
}
