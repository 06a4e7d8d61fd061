/*
 * test_const.c — inputs promised constant across runs (rj_bind_constant): model weights
 * packed (or widened) once per binding instead of once per run.
 *
 * The promise may change how fast a run is, never what it computes, so every test compares a
 * binding with the promise against one without it, bit for bit, on 1 and 2 threads, and the
 * binding without it against the reference interpreter (within float tolerance). The program
 * covers what a weight's packing is keyed on: a transposed weight (linear), two slices of one
 * weight (two products over different columns of v) and a 16-bit weight widened to f32.
 *
 * That the copies are kept is checked from outside: rj_bind_stats' const_bytes covers every
 * weight (after rj_bind_prepare too), and a weight changed in place without binding it again
 * (breaking the promise) still gives the old results after the runs that make the copies (a
 * binding's first SETTLING runs, a part each), so the runs did use what they kept, and
 * rj_bind_prepare made all the copies (a weight changed between it and the first run is not
 * seen). Binding it again (the same pointer), or renewing the promise, must give the new
 * results: a cache that is not dropped fails there.
 */
#include "stdenv.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#define K 256
#define NY 512
#define NV 384
#define NU 192
#define ROWS 4096 /* enough rows for several chunks: w packed once for all of them */
#define SETTLING 4 /* runs that make the copies without rj_bind_prepare (cpu_gemm.c: CONST_RUNS) */

static const char *src = "ragged j1 : B\n"
                         "input x : f32[B, j1, 256]\n"
                         "input w : f32[512, 256]\n"
                         "input bias : f32[512]\n"
                         "input v : f32[256, 384]\n"
                         "input xh : f16[B, j1, 256]\n"
                         "input h : f16[256, 192]\n"
                         "y = linear(x, w, bias)\n"
                         "z = gelu(x @ v[:, 0:192])\n"
                         "t = x @ v[:, 192:384]\n"
                         "u = xh @ h\n"
                         "output y, z, t, u\n";
static const int64_t offs[5] = {0, 1000, 1000, 3001, ROWS};

typedef struct model {
    rj_graph *g;
    rj_program *p, *ref;
    rj_dim j;
    rj_node in[6], out[4];
    void *data[6];
    int64_t numel[6];
} model;

static const char *in_names[6] = {"x", "w", "bias", "v", "xh", "h"};
static const char *out_names[4] = {"y", "z", "t", "u"};
static const int64_t out_numel[4] = {ROWS * NY, ROWS * NU, ROWS * NU, ROWS * NU};
static const rj_dtype out_dtype[4] = {RJ_F32, RJ_F32, RJ_F32, RJ_F16};

static void model_new(fixture *f, model *m) {
    m->g = rj_graph_parse(f->ctx, src, "const.rj");
    assert_non_null(m->g);
    m->p = rj_program_new(m->g, RJ_TARGET_CPU);
    assert_non_null(m->p);
    m->ref = rj_program_new(m->g, RJ_TARGET_REFERENCE);
    assert_non_null(m->ref);
    m->j = rj_graph_find_dim(m->g, "j1");
    const int64_t numel[6] = {ROWS * K, NY * K, NY, K * NV, ROWS * K, K * NU};
    const rj_dtype dt[6] = {RJ_F32, RJ_F32, RJ_F32, RJ_F32, RJ_F16, RJ_F16};
    uint64_t seed = 7;
    for (int i = 0; i < 6; i++) {
        m->in[i] = rj_graph_find(m->g, in_names[i]);
        m->numel[i] = numel[i];
        m->data[i] = random_values(dt[i], numel[i], &seed);
        assert_non_null(m->data[i]);
    }
    for (int i = 0; i < 4; i++) m->out[i] = rj_graph_find(m->g, out_names[i]);
}

static void model_free(model *m) {
    for (int i = 0; i < 6; i++) free(m->data[i]);
    rj_program_free(m->p);
    rj_program_free(m->ref);
    rj_graph_free(m->g);
}

/* A binding of p with every input bound, the weights (w, bias, v, h) promised constant if so. */
static rj_bind *bound(fixture *f, model *m, rj_program *p, bool promise) {
    rj_bind *b = rj_bind_new(p);
    assert_non_null(b);
    assert_ok(f->ctx, rj_bind_offsets(b, m->j, 4, offs, NULL));
    for (int i = 0; i < 6; i++) {
        assert_ok(f->ctx, rj_bind_input(b, m->in[i], m->data[i], m->numel[i]));
        if (promise && i != 0 && i != 4) assert_ok(f->ctx, rj_bind_constant(b, m->in[i], true));
    }
    return b;
}

/* Runs b and copies its outputs into out[0..3] (malloc'd on first use). */
static void run_into(fixture *f, model *m, rj_program *p, rj_bind *b, void *out[4]) {
    assert_ok(f->ctx, rj_program_run(p, b));
    for (int i = 0; i < 4; i++) {
        rj_tensor_info ti;
        assert_ok(f->ctx, rj_tensor_get_info(rj_bind_result(b, m->out[i]), &ti));
        size_t bytes = (size_t)out_numel[i] * rj_dtype_size(out_dtype[i]);
        if (!out[i]) out[i] = malloc(bytes);
        assert_non_null(out[i]);
        memcpy(out[i], ti.values, bytes);
    }
}

static void outs_free(void *out[4]) {
    for (int i = 0; i < 4; i++) free(out[i]), out[i] = NULL;
}

/* The same bits in every output. */
static void assert_same_bits(void *a[4], void *b[4], const char *what) {
    for (int i = 0; i < 4; i++)
        if (memcmp(a[i], b[i], (size_t)out_numel[i] * rj_dtype_size(out_dtype[i])))
            fail_msg("%s: output %s differs", what, out_names[i]);
}

/* Whether some output differs at all. */
static bool any_differs(void *a[4], void *b[4]) {
    for (int i = 0; i < 4; i++)
        if (memcmp(a[i], b[i], (size_t)out_numel[i] * rj_dtype_size(out_dtype[i]))) return true;
    return false;
}

/* out against the reference interpreter's outputs on the same inputs. */
static void assert_like_reference(fixture *f, model *m, void *out[4]) {
    rj_bind *b = bound(f, m, m->ref, false);
    void *ref[4] = {0};
    run_into(f, m, m->ref, b, ref);
    for (int i = 0; i < 4; i++) {
        double *want = malloc(sizeof(double) * (size_t)out_numel[i]);
        assert_non_null(want);
        for (int64_t e = 0; e < out_numel[i]; e++) want[e] = elem_get(ref[i], out_dtype[i], e);
        assert_close_f(out_names[i], out[i], out_dtype[i], want, out_numel[i], 1e-3,
                       out_dtype[i] == RJ_F16 ? 4e-3 : 1e-4);
        free(want);
    }
    outs_free(ref);
    rj_bind_free(b);
}

/* The promise changes no bit, on 1 and 2 threads, over several runs (the first ones make the
 * copies, a part each, the later ones use them); what is kept covers every weight and is
 * freed with the binding (the tracker checks for leaks). */
static void test_const_same_bits(void **state) {
    fixture *f = *state;
    model m;
    model_new(f, &m);
    for (int threads = 1; threads <= 2; threads++) {
        assert_ok(f->ctx, rj_ctx_set_threads(f->ctx, threads));
        rj_bind *plain = bound(f, &m, m.p, false), *kept = bound(f, &m, m.p, true);
        void *a[4] = {0}, *b[4] = {0};
        run_into(f, &m, m.p, plain, a);
        if (threads == 1) assert_like_reference(f, &m, a);
        for (int r = 0; r < SETTLING + 2; r++) {
            run_into(f, &m, m.p, kept, b);
            assert_same_bits(a, b, r ? "a later run with the promise" : "the first run with the promise");
        }
        rj_run_stats st;
        assert_ok(f->ctx, rj_bind_stats(plain, &st));
        assert_int_equal(st.const_bytes, 0);
        assert_ok(f->ctx, rj_bind_stats(kept, &st));
        /* h widened to f32 at least; on x86-64 ragjit's sgemm packs the f32 weights too */
        int64_t widened = (int64_t)K * NU * 4, packed = (int64_t)4 * (NY * K + K * NU * 2);
        assert_true(st.const_bytes >= widened);
#if defined(__x86_64__)
        assert_true(st.const_bytes >= widened + packed);
        assert_true(st.const_bytes <= (widened + packed) * 3 / 2);
#endif
        /* rj_bind_prepare lays out, allocates and makes the copies */
        rj_bind *ready = bound(f, &m, m.p, true);
        rj_run_stats sp;
        assert_ok(f->ctx, rj_bind_prepare(ready));
        assert_ok(f->ctx, rj_bind_stats(ready, &sp));
        assert_int_equal(sp.const_bytes, st.const_bytes);
        run_into(f, &m, m.p, ready, b);
        assert_same_bits(a, b, "the first run after rj_bind_prepare with the promise");
        rj_bind_free(ready);
        outs_free(a), outs_free(b);
        rj_bind_free(plain), rj_bind_free(kept);
    }
    model_free(&m);
}

/* New contents of a constant weight are taken when it is bound again (the same pointer), or
 * when the promise is renewed; withdrawing the promise frees what was kept. */
static void test_const_rebind(void **state) {
    fixture *f = *state;
    model m;
    model_new(f, &m);
    assert_ok(f->ctx, rj_ctx_set_threads(f->ctx, 2));
    rj_bind *kept = bound(f, &m, m.p, true);
    void *old[4] = {0}, *now[4] = {0}, *want[4] = {0};
    for (int r = 0; r < SETTLING; r++) run_into(f, &m, m.p, kept, old);
    rj_bind *ready = bound(f, &m, m.p, true); /* its copies made by rj_bind_prepare, before any run */
    assert_ok(f->ctx, rj_bind_prepare(ready));
    float *w = m.data[1], *v = m.data[3];
    uint16_t *h = m.data[5];
    for (int64_t i = 0; i < NY * K; i++) w[i] = -w[i] * 0.5f;
    for (int64_t i = 0; i < K * NV; i++) v[i] = v[i] * 2.0f;
    for (int64_t i = 0; i < K * NU; i++) h[i] ^= 0x8000; /* sign flip */
    rj_bind *plain = bound(f, &m, m.p, false);
    run_into(f, &m, m.p, plain, want);
    assert_true(any_differs(old, want));
    /* the promise broken (contents changed, nothing bound): the kept copies are what runs use */
    run_into(f, &m, m.p, kept, now);
    assert_same_bits(old, now, "a run whose constant weights changed unannounced");
    run_into(f, &m, m.p, ready, now);
    assert_same_bits(old, now, "the first run after rj_bind_prepare, the weights changed unannounced since");
    rj_bind_free(ready);
    /* bound again, at the same addresses: the new contents */
    assert_ok(f->ctx, rj_bind_input(kept, m.in[1], w, NY * K));
    assert_ok(f->ctx, rj_bind_input(kept, m.in[3], v, K * NV));
    assert_ok(f->ctx, rj_bind_input(kept, m.in[5], h, K * NU));
    run_into(f, &m, m.p, kept, now);
    assert_same_bits(want, now, "a run after binding the weights again");
    /* the promise renewed after another change in place */
    for (int64_t i = 0; i < NY * K; i++) w[i] = w[i] + 0.25f;
    assert_ok(f->ctx, rj_bind_input(plain, m.in[1], w, NY * K));
    run_into(f, &m, m.p, plain, want);
    assert_ok(f->ctx, rj_bind_constant(kept, m.in[1], true));
    run_into(f, &m, m.p, kept, now);
    assert_same_bits(want, now, "a run after renewing the promise");
    /* withdrawn: nothing kept, the same results */
    for (int i = 1; i < 6; i++)
        if (i != 4) assert_ok(f->ctx, rj_bind_constant(kept, m.in[i], false));
    run_into(f, &m, m.p, kept, now);
    assert_same_bits(want, now, "a run without the promise");
    rj_run_stats st;
    assert_ok(f->ctx, rj_bind_stats(kept, &st));
    assert_int_equal(st.const_bytes, 0);
    outs_free(old), outs_free(now), outs_free(want);
    rj_bind_free(plain), rj_bind_free(kept);
    model_free(&m);
}

/* A product whose copy no run makes (its few rows are one chunk: nothing packed for it) does
 * not hold up the others' copies: each run makes the next of them, so after a few runs the
 * promise broken (weights changed in place) gives the old results on every large product.
 * The small product comes first, where it is the first copy not made in every run. */
static void test_const_idle_copy(void **state) {
    fixture *f = *state;
    const char *src2 = "ragged j1 : B\n"
                       "input xs : f32[4, 256]\n"
                       "input x : f32[B, j1, 256]\n"
                       "input w0 : f32[256, 256]\n"
                       "input w1 : f32[256, 256]\n"
                       "input w2 : f32[256, 256]\n"
                       "input w3 : f32[256, 256]\n"
                       "input w4 : f32[256, 256]\n"
                       "s = xs @ w0\n"
                       "y1 = x @ w1\n"
                       "y2 = x @ w2\n"
                       "y3 = x @ w3\n"
                       "y4 = x @ w4\n"
                       "output s, y1, y2, y3, y4\n";
    const char *names[7] = {"xs", "x", "w0", "w1", "w2", "w3", "w4"};
    const int64_t numel[7] = {4 * K, ROWS * K, K * K, K * K, K * K, K * K, K * K};
    rj_graph *g = rj_graph_parse(f->ctx, src2, "idle.rj");
    assert_non_null(g);
    rj_program *p = rj_program_new(g, RJ_TARGET_CPU);
    assert_non_null(p);
    assert_ok(f->ctx, rj_ctx_set_threads(f->ctx, 2));
    void *vals[7];
    uint64_t seed = 11;
    rj_bind *b = rj_bind_new(p);
    assert_non_null(b);
    assert_ok(f->ctx, rj_bind_offsets(b, rj_graph_find_dim(g, "j1"), 4, offs, NULL));
    for (int i = 0; i < 7; i++) {
        assert_non_null(vals[i] = random_values(RJ_F32, numel[i], &seed));
        rj_node n = rj_graph_find(g, names[i]);
        assert_ok(f->ctx, rj_bind_input(b, n, vals[i], numel[i]));
        if (i >= 2) assert_ok(f->ctx, rj_bind_constant(b, n, true));
    }
    const char *outs[4] = {"y1", "y2", "y3", "y4"};
    float *old[4];
    for (int r = 0; r < 2 * SETTLING; r++) assert_ok(f->ctx, rj_program_run(p, b));
    for (int i = 0; i < 4; i++) {
        rj_tensor_info ti;
        assert_ok(f->ctx, rj_tensor_get_info(rj_bind_result(b, rj_graph_find(g, outs[i])), &ti));
        assert_non_null(old[i] = malloc(sizeof(float) * ROWS * K));
        memcpy(old[i], ti.values, sizeof(float) * ROWS * K);
    }
    for (int i = 3; i < 7; i++)
        for (int64_t e = 0; e < K * K; e++) ((float *)vals[i])[e] *= -2.0f; /* the promise broken */
    assert_ok(f->ctx, rj_program_run(p, b));
    for (int i = 0; i < 4; i++) {
        rj_tensor_info ti;
        assert_ok(f->ctx, rj_tensor_get_info(rj_bind_result(b, rj_graph_find(g, outs[i])), &ti));
#if defined(__x86_64__)
        if (memcmp(old[i], ti.values, sizeof(float) * ROWS * K))
            fail_msg("output %s: its weight's copy was not made in %d runs", outs[i], 2 * SETTLING);
#endif
        free(old[i]);
    }
    for (int i = 0; i < 7; i++) free(vals[i]);
    rj_bind_free(b);
    rj_program_free(p);
    rj_graph_free(g);
}

/* Bad arguments: a status and a message naming the call, never a crash; the memory limit
 * counts what is kept. */
static void test_const_errors(void **state) {
    fixture *f = *state;
    model m;
    model_new(f, &m);
    rj_bind *b = bound(f, &m, m.p, false);
    assert_int_equal(rj_bind_constant(NULL, m.in[1], true), RJ_ERR_ARG);
    assert_int_equal(rj_bind_constant(b, m.out[0], true), RJ_ERR_ARG); /* an output, not an input */
    assert_error_contains(f->ctx, "rj_bind_constant: node");
    assert_error_contains(f->ctx, "is not an input");
    assert_int_equal(rj_bind_constant(b, RJ_NONE, true), RJ_ERR_ARG);
    assert_error_contains(f->ctx, "rj_bind_constant");
    assert_int_equal(rj_bind_constant(b, 1 << 20, true), RJ_ERR_ARG);
    assert_error_contains(f->ctx, "is not an input");
    /* the memory limit counts the copies: the least limit a run without the promise fits in
     * (to 4 KiB) is too little with it, and enough once their bytes are added */
    int64_t lo = 0, hi = (int64_t)1 << 30;
    while (hi - lo > 4096) {
        int64_t mid = lo + (hi - lo) / 2;
        assert_ok(f->ctx, rj_ctx_set_memory_limit(f->ctx, mid));
        if (rj_program_run(m.p, b) == RJ_OK) hi = mid;
        else lo = mid;
    }
    for (int i = 1; i < 6; i++)
        if (i != 4) assert_ok(f->ctx, rj_bind_constant(b, m.in[i], true));
    assert_int_equal(rj_program_run(m.p, b), RJ_ERR_SIZE);
    assert_error_contains(f->ctx, "memory limit");
    assert_ok(f->ctx, rj_ctx_set_memory_limit(f->ctx, 0));
    assert_ok(f->ctx, rj_program_run(m.p, b));
    rj_run_stats st;
    assert_ok(f->ctx, rj_bind_stats(b, &st));
    assert_true(st.const_bytes > 0);
    assert_ok(f->ctx, rj_ctx_set_memory_limit(f->ctx, hi + st.const_bytes));
    assert_ok(f->ctx, rj_program_run(m.p, b));
    rj_bind_free(b);
    model_free(&m);
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        FX(test_const_same_bits),
        FX(test_const_rebind),
        FX(test_const_idle_copy),
        FX(test_const_errors),
    };
    return run_group(tests, NULL, NULL, argc, argv);
}
