/*
 * test_attention.c — fused attention (the attention op, the pattern the compiler finds, and
 * scaled_dot_product_attention) against the reference interpreter, and its errors.
 *
 * The interpreter computes attention as softmax then the product, each node into memory (and
 * for the explicit form it runs the user's graph, unfused); the JIT on the CPU and the OpenCL
 * kernels on PoCL run the one online-softmax kernel (on OpenCL in FlashAttention-2's tiled form,
 * attention_flash_simt, which each program must get, and once the per-row kernel where the
 * tiled one does not apply). Every program runs on every length pattern
 * of the harness (B = 0, B = 1, empty items, all empty, one item 1000 rows long among rows of 1,
 * skewed). Fully masked rows must agree in kind: NaN for softmax written out, 0 for SDPA's safe
 * softmax. The test also checks that the fused programs lay out no temporary (the score blocks
 * are never written) and that every new error path answers with its status and a message.
 */
#include "harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* heads as PyTorch code splits them from one projection, k and v narrowed to 2 heads (GQA): on a
 * CPU with a GEMM both products read the heads' columns in place (attention_lib) */
#define HEADS_VIEWS                                                                                   \
    "ragged j1 : B\ninput x : f32[B, j1, 96]\nq, k, v = x.split(32, dim=-1)\n"                          \
    "q = q.view(B, j1, 4, 8).transpose(1, 2)\nk = k.view(B, j1, 4, 8).transpose(1, 2).narrow(1, 1, 2)\n" \
    "v = v.view(B, j1, 4, 8).transpose(1, 2).narrow(1, 0, 2)\n"                                         \
    "out = scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)\noutput out\n"

static const char *const programs[][2] = {
    {"explicit",
     "ragged j1 : B\ninput q : f32[B, j1, 16]\ninput k : f32[B, j1, 16]\ninput v : f32[B, j1, 8]\n"
     "s = q @ k.transpose(1, 2) / 4.0\nout = softmax(s, dim=2) @ v\noutput out\n"},
    {"explicit_f64_causal",
     "ragged j1 : B\ninput q : f64[B, j1, 8]\ninput k : f64[B, j1, 8]\ninput v : f64[B, j1, 5]\n"
     "pos = positions(j1)\ns = where(pos.unsqueeze(2) >= pos.unsqueeze(1), q @ k.transpose(1, 2), -inf)\n"
     "out = softmax(s, dim=-1) @ v\noutput out\n"},
    {"explicit_masked_nan",
     "ragged j1 : B\ninput q : f32[B, j1, 16]\ninput k : f32[B, j1, 16]\ninput v : f32[B, j1, 8]\n"
     "input mb : bool[B, j1, j1]\ns = where(mb, q @ k.transpose(1, 2) * 0.25, -inf)\n"
     "out = softmax(s, dim=2) @ v\noutput out\n"},
    {"softcap_alibi",
     "ragged j1 : B\ninput q : f32[B, j1, 16]\ninput k : f32[B, j1, 16]\ninput v : f32[B, j1, 8]\n"
     "pos = positions(j1)\ns = 30.0 * tanh(q @ k.transpose(1, 2) / 120.0) + (pos.unsqueeze(1) - pos.unsqueeze(2)) * 0.25\n"
     "out = softmax(s, dim=2) @ v\noutput out\n"},
    {"sdpa_causal",
     "ragged j1 : B\ninput q : f32[B, j1, 16]\ninput k : f32[B, j1, 16]\ninput v : f32[B, j1, 8]\n"
     "out = scaled_dot_product_attention(q, k, v, is_causal=True)\noutput out\n"},
    {"sdpa_bool_mask",
     "ragged j1 : B\ninput q : f32[B, j1, 16]\ninput k : f32[B, j1, 16]\ninput v : f32[B, j1, 8]\n"
     "input mb : bool[B, j1, j1]\nout = scaled_dot_product_attention(q, k, v, attn_mask=mb, scale=0.5)\noutput out\n"},
    {"sdpa_float_mask",
     "ragged j1 : B\ninput q : f32[B, j1, 16]\ninput k : f32[B, j1, 16]\ninput v : f32[B, j1, 8]\n"
     "input mf : f32[B, j1, j1]\nout = scaled_dot_product_attention(q, k, v, mf)\noutput out\n"},
    /* head dims of 64: key tiles of 64 rows fill OpenCL's 32 KiB of local memory */
    {"sdpa_wide",
     "ragged j1 : B\ninput q : f32[B, j1, 64]\ninput k : f32[B, j1, 64]\ninput v : f32[B, j1, 64]\n"
     "out = scaled_dot_product_attention(q, k, v)\noutput out\n"},
    /* per head from views of packed rows, GQA (2 kv heads for 4), causal */
    {"heads_sdpa_gqa_causal",
     "ragged j1 : B\ninput x : f32[B, j1, 32]\ninput kv : f32[B, j1, 16]\n"
     "q = x.view(B, j1, 4, 8).transpose(1, 2)\nk = kv.view(B, j1, 2, 8).transpose(1, 2)\n"
     "out = scaled_dot_product_attention(q, k, k * 0.5, is_causal=True, enable_gqa=True)\noutput out\n"},
    /* heads at the op's own level: scores [B, j1, j1, H], values [B, j1, Hkv, Dv] (GQA) */
    {"heads_gqa",
     "ragged j1 : B\ninput s : f32[B, j1, j1, 4]\ninput v : f32[B, j1, 2, 8]\n"
     "out = attention(s, v)\noutput out\n"},
    {"heads_safe",
     "ragged j1 : B\ninput s : f32[B, j1, j1, 3]\ninput mb : bool[B, j1, j1, 3]\ninput v : f32[B, j1, 3, 4]\n"
     "out = attention(where(mb, s, -inf), v, safe=True)\noutput out\n"},
};

/* Random data for every input of g (jagged, pair or dense of constant dims) on lengths off. */
typedef struct data {
    void *vals[8];
    int64_t numel[8];
} data;

static data make_data(rj_graph *g, const int64_t *off, int64_t B, uint64_t *seed) {
    data d;
    memset(&d, 0, sizeof d);
    int64_t rows = off[B], sq = 0;
    for (int64_t b = 0; b < B; b++) sq += (off[b + 1] - off[b]) * (off[b + 1] - off[b]);
    for (int i = 0; i < rj_graph_input_count(g); i++) {
        rj_node in = rj_graph_input_at(g, i);
        rj_dim dims[RJ_MAX_RANK];
        int rank = rj_node_shape(g, in, dims);
        bool pair = rank >= 3 && dims[2] < 0;
        int64_t n = pair ? sq : rows;
        for (int k = pair ? 3 : 2; k < rank; k++) n *= dims[k];
        d.numel[i] = n;
        d.vals[i] = random_values(rj_node_dtype(g, in), n, seed);
        if (rj_node_dtype(g, in) == RJ_BOOL) /* mostly kept, so most rows have some keys */
            for (int64_t e = 0; e < n; e++) ((uint8_t *)d.vals[i])[e] = rng_uniform(seed, 0, 1) < 0.7;
    }
    return d;
}

static void bind_data(rj_ctx *ctx, rj_bind *bd, rj_graph *g, const data *d, const int64_t *off, int64_t B) {
    assert_ok(ctx, rj_bind_offsets(bd, rj_graph_find_dim(g, "j1"), B, off, NULL));
    for (int i = 0; i < rj_graph_input_count(g); i++)
        assert_ok(ctx, rj_bind_input(bd, rj_graph_input_at(g, i), d->vals[i], d->numel[i]));
}

static void compare_out(const char *what, const rj_tensor_info *got, const rj_tensor_info *want) {
    assert_int_equal(got->rows, want->rows);
    int64_t n = want->rows;
    for (int k = 2; k < want->rank; k++) n *= want->shape[k];
    double *w = malloc(sizeof(double) * (size_t)(n ? n : 1)), big = 1;
    for (int64_t i = 0; i < n; i++) {
        w[i] = elem_get(want->values, want->dtype, i);
        if (isfinite(w[i]) && fabs(w[i]) > big) big = fabs(w[i]);
    }
    bool f32 = want->dtype == RJ_F32;
    assert_close_f(what, got->values, got->dtype, w, n, (f32 ? 2e-5 : 1e-12) * big, f32 ? 1e-4 : 1e-10);
    free(w);
}

/* Runs program text on target and on the interpreter over every length pattern; tmpl: the
 * template the target must lower it with (NULL: any fused attention). */
static void check_program(rj_ctx *ctx, const char *name, const char *text, rj_target target, const char *tmpl) {
    rj_graph *g = rj_graph_parse(ctx, text, "t.rj");
    if (!g) fail_msg("%s: %s", name, rj_ctx_error(ctx));
    rj_program *p = rj_program_new(g, target), *r = rj_program_new(g, RJ_TARGET_REFERENCE);
    if (!p && rj_ctx_status(ctx) == RJ_ERR_NO_DEVICE) {
        printf("skipped on this target: %s\n", rj_ctx_error(ctx));
        rj_program_free(r);
        rj_graph_free(g);
        return;
    }
    if (!p || !r) fail_msg("%s: compiling: %s", name, rj_ctx_error(ctx));
    char *loops = rj_program_dump(p, "loops");
    assert_non_null(loops);
    if (!strstr(loops, "template: attention_") || strstr(loops, ": temp "))
        fail_msg("%s: not one fused attention kernel without temporaries:\n%s", name, loops);
    char want[64];
    snprintf(want, sizeof want, "template: %s", tmpl ? tmpl : "attention_");
    if (!strstr(loops, want)) fail_msg("%s: not lowered by %s:\n%s", name, want + 10, loops);
    rj_string_free(ctx, loops);
    rj_node out = rj_graph_find(g, "out");
    for (int pat = 0; pat < LEN_PATTERN_COUNT; pat++) {
        uint64_t seed = 35 + (uint64_t)pat;
        int64_t *off, B = make_offsets((len_pattern)pat, &seed, &off);
        data d = make_data(g, off, B, &seed);
        rj_bind *bp = rj_bind_new(p), *br = rj_bind_new(r);
        bind_data(ctx, bp, g, &d, off, B);
        bind_data(ctx, br, g, &d, off, B);
        assert_ok(ctx, rj_program_run(p, bp));
        assert_ok(ctx, rj_program_run(r, br));
        if (target == RJ_TARGET_CPU) {
            rj_run_stats st;
            assert_ok(ctx, rj_bind_stats(bp, &st));
            assert_int_equal(st.temp_bytes, 0); /* no [B, j1, j1] block anywhere */
        }
        rj_tensor_info gi, ri;
        assert_ok(ctx, rj_tensor_get_info(rj_bind_result(bp, out), &gi));
        assert_ok(ctx, rj_tensor_get_info(rj_bind_result(br, out), &ri));
        char what[128];
        snprintf(what, sizeof what, "%s on %s, %s", name, target == RJ_TARGET_CPU ? "cpu" : "opencl",
                 len_pattern_names[pat]);
        compare_out(what, &gi, &ri);
        rj_bind_free(bp);
        rj_bind_free(br);
        for (int i = 0; i < 8; i++) free(d.vals[i]);
        free(off);
    }
    rj_program_free(p);
    rj_program_free(r);
    rj_graph_free(g);
}

static void test_cpu(void **state) {
    fixture *f = *state;
    for (size_t i = 0; i < sizeof programs / sizeof programs[0]; i++)
        check_program(f->ctx, programs[i][0], programs[i][1], RJ_TARGET_CPU, NULL);
}

/* Where a GEMM serves, per-head attention over views of one projection runs both products in
 * it, reading q, k and v where they are (no copy of a head: no temporary, no prologue), and
 * agrees with the interpreter on every length pattern (OpenCL's run of such programs is
 * heads_numpy.py's and attention_heads_numpy.py's). */
static void test_both_products_by_gemm(void **state) {
    fixture *f = *state;
    check_program(f->ctx, "heads_views_gqa_causal", HEADS_VIEWS, RJ_TARGET_CPU, NULL);
    if (!strncmp(rj_blas_info(), "none", 4)) skip();
    rj_graph *g = rj_graph_parse(f->ctx, HEADS_VIEWS, "t.rj");
    assert_non_null(g);
    rj_program *p = rj_program_new(g, RJ_TARGET_CPU);
    assert_non_null(p);
    char *loops = rj_program_dump(p, "loops");
    assert_non_null(loops);
    if (!strstr(loops, "template: attention_lib") || !strstr(loops, "q's head h at column 0 + h·8 of rows of 96") ||
        strstr(loops, "prologue") || strstr(loops, ": temp "))
        fail_msg("not both products by the GEMM on the heads' columns in place:\n%s", loops);
    rj_string_free(f->ctx, loops);
    rj_program_free(p);
    rj_graph_free(g);
}

static void test_opencl(void **state) {
    fixture *f = *state;
    for (size_t i = 0; i < sizeof programs / sizeof programs[0]; i++)
        check_program(f->ctx, programs[i][0], programs[i][1], RJ_TARGET_OPENCL, "attention_flash_simt");
    /* where q and O exceed a thread's registers (E + Dv > 128) and do not split evenly across
     * a row's threads (Dv odd), the per-row kernel stays (the dump's note says why) */
    check_program(f->ctx, "wide_dv_rows",
                  "ragged j1 : B\ninput q : f32[B, j1, 8]\ninput k : f32[B, j1, 8]\ninput v : f32[B, j1, 137]\n"
                  "out = scaled_dot_product_attention(q, k, v, is_causal=True)\noutput out\n",
                  RJ_TARGET_OPENCL, "attention_rows");
}

/* Masks that bound the key tiles of the SIMT kernel (lower/keyrange.c) and masks that must not:
 * each program's loops dump on OpenCL has the note named (or no bound at all: "keys j" absent),
 * and its results equal the interpreter's on every length pattern, the 1000-row item included. */
static void test_mask_bounds(void **state) {
    fixture *f = *state;
#define MASK_HEAD                                                                                  \
    "ragged j1 : B\ninput q : f32[B, j1, 16]\ninput k : f32[B, j1, 16]\ninput v : f32[B, j1, 8]\n" \
    "pi = positions(j1).unsqueeze(2)\npj = positions(j1).unsqueeze(1)\ns = q @ k.transpose(1, 2) * 0.25\n"
    static const char *const cases[][3] = {
        /* not (j > i), the -inf first: j <= i */
        {"not_later", MASK_HEAD "out = softmax(where(~(pj > pi), s, -inf), dim=-1) @ v\noutput out\n", "keys j <= i only"},
        /* a window ahead of the row, no causal bound; and its mirror with both bounds */
        {"ahead", MASK_HEAD "out = softmax(where(pj >= pi - 3, s, -inf), dim=-1) @ v\noutput out\n", "keys j >= i - 3 only"},
        {"band", MASK_HEAD "hide = (pi - pj > 4) | (pj - pi >= 2)\n"
                 "out = softmax(s.masked_fill(hide, -inf), dim=-1) @ v\noutput out\n", "keys j >= i - 4; keys j <= i + 1 only"},
        /* an or of bounds bounds nothing: key 0 stays visible to every row */
        {"or_first", MASK_HEAD "out = softmax(where((pi >= pj) | (pj == 0), s, -inf), dim=-1) @ v\noutput out\n", NULL},
    };
#undef MASK_HEAD
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        rj_graph *g = rj_graph_parse(f->ctx, cases[i][1], "t.rj");
        if (!g) fail_msg("%s: %s", cases[i][0], rj_ctx_error(f->ctx));
        char *loops = rj_graph_dump(g, RJ_TARGET_OPENCL, "loops");
        assert_non_null(loops);
        if (cases[i][2] ? !strstr(loops, cases[i][2]) : strstr(loops, "keys j") != NULL)
            fail_msg("%s: the note is not \"%s\":\n%.1500s", cases[i][0], cases[i][2] ? cases[i][2] : "(none)", loops);
        rj_string_free(f->ctx, loops);
        rj_graph_free(g);
        check_program(f->ctx, cases[i][0], cases[i][1], RJ_TARGET_OPENCL, "attention_flash_simt");
    }
}

/* A fully masked row: NaN when softmax is written out, 0 through SDPA (and attention(safe)). */
static void test_fully_masked_rows(void **state) {
    fixture *f = *state;
    static const char *const text[2] = {
        "ragged j1 : B\ninput q : f32[B, j1, 4]\ninput k : f32[B, j1, 4]\ninput v : f32[B, j1, 2]\n"
        "s = where(positions(j1).unsqueeze(1) > 5, q @ k.transpose(1, 2), -inf)\nout = softmax(s, dim=2) @ v\noutput out\n",
        "ragged j1 : B\ninput q : f32[B, j1, 4]\ninput k : f32[B, j1, 4]\ninput v : f32[B, j1, 2]\n"
        "out = scaled_dot_product_attention(q, k, v, attn_mask=positions(j1).unsqueeze(1) > 5)\noutput out\n"};
    int64_t off[] = {0, 3};
    float vals[12];
    for (int i = 0; i < 12; i++) vals[i] = (float)i * 0.1f;
    for (int safe = 0; safe < 2; safe++) {
        rj_graph *g = rj_graph_parse(f->ctx, text[safe], "t.rj");
        assert_non_null(g);
        rj_program *p = rj_program_new(g, RJ_TARGET_CPU);
        assert_non_null(p);
        rj_bind *b = rj_bind_new(p);
        assert_ok(f->ctx, rj_bind_offsets(b, rj_graph_find_dim(g, "j1"), 1, off, NULL));
        for (int i = 0; i < 3; i++) assert_ok(f->ctx, rj_bind_input(b, rj_graph_input_at(g, i), vals, i < 2 ? 12 : 6));
        assert_ok(f->ctx, rj_program_run(p, b));
        rj_tensor_info ti;
        assert_ok(f->ctx, rj_tensor_get_info(rj_bind_result(b, rj_graph_find(g, "out")), &ti));
        for (int i = 0; i < 6; i++) {
            float x = ((float *)ti.values)[i];
            if (safe ? x != 0.0f : !isnan(x)) fail_msg("%s: element %d is %g", safe ? "sdpa" : "explicit", i, x);
        }
        rj_bind_free(b);
        rj_program_free(p);
        rj_graph_free(g);
    }
}

/* Where the pattern does not hold (the scores minus their max: a root reads the product), the
 * unfused ops stay and a temporary holds the blocks; an output softmax stays too. */
static void test_fallback(void **state) {
    fixture *f = *state;
    static const char *const text[2] = {
        "ragged j1 : B\ninput q : f32[B, j1, 4]\ninput k : f32[B, j1, 4]\ninput v : f32[B, j1, 2]\n"
        "s = q @ k.transpose(1, 2)\nout = softmax(s - max(s, dim=2, keepdim=True), dim=2) @ v\noutput out\n",
        "ragged j1 : B\ninput q : f32[B, j1, 4]\ninput k : f32[B, j1, 4]\ninput v : f32[B, j1, 2]\n"
        "p = softmax(q @ k.transpose(1, 2), dim=2)\nout = p @ v\noutput out, p\n"};
    for (int i = 0; i < 2; i++) {
        rj_graph *g = rj_graph_parse(f->ctx, text[i], "t.rj");
        assert_non_null(g);
        char *fused = rj_graph_dump(g, RJ_TARGET_CPU, "fused");
        assert_non_null(fused);
        if (strstr(fused, "attention(")) fail_msg("fused where it must not be:\n%s", fused);
        rj_string_free(f->ctx, fused);
        rj_graph_free(g);
    }
}

static void expect_error(rj_ctx *ctx, const char *src, rj_status want, const char *needle) {
    rj_graph *g = rj_graph_parse(ctx, src, "t.rj");
    if (g) fail_msg("accepted: %s", src);
    if (rj_ctx_status(ctx) != want)
        fail_msg("%s: status %s, not %s: %s", src, rj_status_str(rj_ctx_status(ctx)), rj_status_str(want), rj_ctx_error(ctx));
    assert_error_contains(ctx, needle);
}

static void test_errors(void **state) {
    fixture *f = *state;
    rj_ctx *c = f->ctx;
    const char *head = "ragged j1 : B\nragged j2 : B\ninput q : f32[B, j1, 16]\ninput k : f32[B, j1, 16]\n"
                       "input v : f32[B, j1, 8]\ninput w : f32[B, j2, 8]\ninput qi : i32[B, j1, 16]\n"
                       "input mb : bool[B, j1, j1]\ninput s4 : f32[B, j1, j1, 3]\ninput v4 : f32[B, j1, 2, 8]\n";
    static const struct {
        const char *stmt;
        rj_status st;
        const char *needle;
    } cases[] = {
        {"o = scaled_dot_product_attention(q, k, v, attn_mask=mb, is_causal=True)", RJ_ERR_ARG,
         "Explicit attn_mask should not be set when is_causal=True"},
        {"o = scaled_dot_product_attention(q, k, v, attn_mask=q)", RJ_ERR_SHAPE, ""},
        {"o = scaled_dot_product_attention(q, k, v, attn_mask=positions(j1).unsqueeze(1))", RJ_ERR_DTYPE,
         "attn_mask must be bool"},
        {"o = scaled_dot_product_attention(qi, k, v)", RJ_ERR_DTYPE, "expected float tensors"},
        {"o = scaled_dot_product_attention(q, k, w)", RJ_ERR_SHAPE, "ragged class"},
        {"o = scaled_dot_product_attention(q, k, v, dropout_p=0.1)", RJ_ERR_ARG, "dropout_p must be 0.0"},
        {"o = attention(q, v)", RJ_ERR_SHAPE, "must have two ragged dims"},
        {"o = attention(mb, v)", RJ_ERR_DTYPE, "expected float tensors"},
        {"o = attention(s4, v)", RJ_ERR_SHAPE, "[B, j2, Hkv, Dv]"},
        {"o = attention(s4, v4)", RJ_ERR_SHAPE, "do not divide"},
        {"o = attention(q @ k.transpose(1, 2), w)", RJ_ERR_SHAPE, "ragged class"},
        {"o = scaled_dot_product_attention(v4, v4, v4)", RJ_ERR_UNSUPPORTED, "jagged query, key and value [B, j1, E]"},
        {"o = scaled_dot_product_attention(q, k, v, scale=None, is_causal=1)", RJ_ERR_PARSE, "is_causal must be True or False"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char src[1024];
        snprintf(src, sizeof src, "%s%s\noutput o\n", head, cases[i].stmt);
        expect_error(c, src, cases[i].st, cases[i].needle);
    }
    /* the builder: a default scale needs a constant E */
    rj_graph *g = rj_graph_new(c);
    rj_dim B = rj_graph_dense(g, "B"), E = rj_graph_dense(g, "E"), j = rj_graph_ragged(g, "j1", B);
    rj_node q = rj_graph_input(g, "q", RJ_F32, 3, (rj_dim[]){B, j, E});
    assert_int_equal(rj_graph_sdpa(g, q, q, q, RJ_NONE, false, NAN, false), RJ_NONE);
    assert_int_equal(rj_graph_status(g), RJ_ERR_ARG);
    assert_error_contains(c, "needs a constant head dim");
    rj_graph_free(g);
    g = rj_graph_new(c);
    assert_int_equal(rj_graph_attention(g, RJ_NONE, RJ_NONE, false), RJ_NONE);
    assert_int_equal(rj_graph_status(g), RJ_ERR_GRAPH);
    rj_graph_free(g);
}

/* The builder form and the text form are one graph; the fused dump names the kernel. */
static void test_builder(void **state) {
    fixture *f = *state;
    rj_graph *g = rj_graph_new(f->ctx);
    rj_dim B = rj_graph_dense(g, "B"), j = rj_graph_ragged(g, "j1", B);
    rj_node q = rj_graph_input(g, "q", RJ_F32, 3, (rj_dim[]){B, j, 64});
    rj_node k = rj_graph_input(g, "k", RJ_F32, 3, (rj_dim[]){B, j, 64});
    rj_node v = rj_graph_input(g, "v", RJ_F32, 3, (rj_dim[]){B, j, 32});
    rj_node o = rj_graph_sdpa(g, q, k, v, RJ_NONE, true, NAN, false);
    assert_ok(f->ctx, rj_graph_output(g, o, "out"));
    char *fused = rj_graph_dump(g, RJ_TARGET_CPU, "fused");
    assert_non_null(fused);
    if (!strstr(fused, "attention(") || !strstr(fused, "safe=True") || !strstr(fused, "inline"))
        fail_msg("%s", fused);
    rj_string_free(f->ctx, fused);
    rj_graph_free(g);
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        FX(test_cpu), FX(test_both_products_by_gemm), FX(test_opencl), FX(test_mask_bounds), FX(test_fully_masked_rows), FX(test_fallback), FX(test_errors),
        FX(test_builder),
    };
    return run_group(tests, NULL, NULL, argc, argv);
}
