/*
 * test_cuda.c — the CUDA backend: generated CUDA C, NVRTC, ptxas, and (with a GPU) results.
 *
 * A corpus of graphs covers every op and a set of fused chains (softmax/sum/mean over the
 * ragged dim, reductions over a padded dim, layer_norm, pad/unpad chains, int and bool ops,
 * casts), each in f32 and f64. For every graph:
 *   - the "cuda" dump has one `extern "C" __global__` function per loop-IR kernel, under the
 *     kernel's name, and dumping twice gives the same text;
 *   - NVRTC compiles it ("ptx" dump), the PTX has an .entry per kernel, and ptxas assembles
 *     it for the PTX's own target. Without NVRTC (or ptxas) the test says why and is skipped.
 * Every allocation of the "cuda" and "ptx" dumps is failed once: RJ_ERR_NOMEM, no leaks.
 * Compiling for RJ_TARGET_CUDA without a driver or device must fail cleanly with
 * RJ_ERR_NO_DEVICE and "no CUDA device" (the fixture checks nothing leaks). Where a device
 * exists, the corpus runs on it and is compared with the reference interpreter on every
 * length pattern, with the CPU JIT's tolerances (see test_jit.c), once with packed inputs and
 * once with the jagged inputs bound as views with holes; and every allocation of compiling
 * and running is failed once. Those device tests are skipped, saying why, without a GPU.
 */
#include "stdenv.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PTXAS "/usr/local/cuda/bin/ptxas"

/* ---- graphs ------------------------------------------------------------------------------- */


/* every op */
static void g_unary(env *e) {
    for (int op = RJ_OP_NEG; op <= RJ_OP_LOGICAL_NOT; op++) {
        out(e, un(e, (rj_op)op, e->x));
        out(e, un(e, (rj_op)op, e->xi));
    }
}
static void g_binary(env *e) {
    for (int op = RJ_OP_ADD; op <= RJ_OP_LOGICAL_OR; op++) {
        rj_op o = (rj_op)op;
        out(e, bin(e, o, e->x, e->y));
        out(e, bin(e, o, e->p3, e->x));
        out(e, bin(e, o, e->xi, SI(e, 3)));
        out(e, bin(e, o, e->xi, e->x));
        if (op == RJ_OP_ADD || op == RJ_OP_MUL || op >= RJ_OP_MAXIMUM)
            out(e, bin(e, o, e->m, un(e, RJ_OP_LOGICAL_NOT, e->m)));
    }
    out(e, bin(e, RJ_OP_POW, e->x, S(e, 2)));
    out(e, bin(e, RJ_OP_POW, e->x, S(e, 3)));
    out(e, bin(e, RJ_OP_POW, e->x, S(e, -1)));
    out(e, bin(e, RJ_OP_POW, e->x, S(e, 1.5)));
    out(e, bin(e, RJ_OP_POW, e->xi, SI(e, -1)));
}
static void g_select_cast(env *e) {
    out(e, rj_graph_where(e->g, e->m, e->x, e->w));
    out(e, rj_graph_where(e->g, e->m, e->xi, S(e, -0.5)));
    out(e, rj_graph_masked_fill(e->g, e->x, e->m, -7));
    out(e, rj_graph_masked_fill(e->g, e->xi, bin(e, RJ_OP_GT, e->x, e->w), 9));
    for (rj_dtype t = RJ_BOOL; t < RJ_DTYPE_COUNT; t++) {
        out(e, rj_graph_cast(e->g, bin(e, RJ_OP_MUL, e->x, S(e, 4)), t));
        out(e, rj_graph_cast(e->g, e->xi, t));
        out(e, rj_graph_cast(e->g, e->m, t));
        out(e, rj_graph_cast(e->g, rj_graph_cast(e->g, e->xi, RJ_I64), t));
    }
}
static void g_reduce(env *e) {
    for (int op = RJ_OP_SUM; op <= RJ_OP_PROD; op++) {
        rj_op o = (rj_op)op;
        out(e, rj_graph_reduce(e->g, o, e->x, 1, false));
        out(e, rj_graph_reduce(e->g, o, e->x, 1, true));
        out(e, rj_graph_reduce(e->g, o, e->x, 2, false));
        out(e, rj_graph_reduce(e->g, o, e->pb, 0, false));
        out(e, rj_graph_reduce(e->g, o, e->w, 0, false));
        if (o != RJ_OP_MEAN) {
            out(e, rj_graph_reduce(e->g, o, e->xi, 1, false));
            out(e, rj_graph_reduce(e->g, o, e->xi, 2, false));
            out(e, rj_graph_reduce(e->g, o, e->m, 1, false));
        }
    }
}
static void g_softmax_norm(env *e) {
    out(e, rj_graph_softmax(e->g, e->x, 1));
    out(e, rj_graph_softmax(e->g, e->x, 2));
    out(e, rj_graph_log_softmax(e->g, e->x, 1));
    out(e, rj_graph_log_softmax(e->g, e->x, -1));
    out(e, rj_graph_softmax(e->g, e->xi, 1));
    out(e, rj_graph_softmax(e->g, e->pb, 0));
    out(e, rj_graph_layer_norm(e->g, e->x, 1, RJ_NONE, RJ_NONE, -1));
    out(e, rj_graph_layer_norm(e->g, e->x, 1, e->w, e->v, 1e-3));
    out(e, rj_graph_rms_norm(e->g, e->x, 1, RJ_NONE, -1));
    out(e, rj_graph_rms_norm(e->g, e->x, 1, e->w, 1e-6));
    out(e, rj_graph_layer_norm(e->g, e->pb, 2, RJ_NONE, RJ_NONE, -1));
}
static void g_pad(env *e) {
    rj_node p = rj_graph_pad(e->g, e->x, -2.5, RJ_DIM_NONE);
    out(e, p);
    out(e, rj_graph_pad(e->g, e->xi, 4, e->L));
    out(e, rj_graph_unpad(e->g, p, e->J));
}
/* constants that have no plain literal, and ones that must round-trip exactly */
static void g_constants(env *e) {
    out(e, bin(e, RJ_OP_ADD, e->x, S(e, NAN)));
    out(e, bin(e, RJ_OP_MINIMUM, e->x, S(e, INFINITY)));
    out(e, bin(e, RJ_OP_MAXIMUM, e->x, S(e, -INFINITY)));
    out(e, bin(e, RJ_OP_MUL, e->x, S(e, 0.1)));
    out(e, bin(e, RJ_OP_ADD, e->x, S(e, -0.0)));
    out(e, bin(e, RJ_OP_MUL, e->x, S(e, 1e-45)));
    out(e, bin(e, RJ_OP_MUL, e->x, S(e, 3.4e38)));
    out(e, bin(e, RJ_OP_ADD, e->xi, SI(e, INT32_MIN)));
    out(e, bin(e, RJ_OP_ADD, rj_graph_cast(e->g, e->xi, RJ_I64), SI(e, INT64_MIN)));
}

typedef void (*graph_fn)(env *e);

static const struct {
    const char *name;
    graph_fn fn;
} groups[] = {
    {"unary ops", g_unary},
    {"binary ops", g_binary},
    {"select/cast", g_select_cast},
    {"reductions", g_reduce},
    {"softmax/norm", g_softmax_norm},
    {"pad/unpad", g_pad},
    {"constants", g_constants},
};
#define NGROUPS ((int)(sizeof groups / sizeof groups[0]))
#define NCORPUS (NGROUPS + std_nchains)

/* The corpus: the op groups above, then the shared chains. */
static const char *corpus_name(int i) { return i < NGROUPS ? groups[i].name : std_chains[i - NGROUPS].name; }

static env build(rj_ctx *ctx, int i, rj_dtype ft) {
    env e = env_new(ctx, ft);
    (i < NGROUPS ? groups[i].fn : std_chains[i - NGROUPS].fn)(&e);
    if (rj_graph_status(e.g) != RJ_OK) fail_msg("%s: building: %s", corpus_name(i), rj_ctx_error(ctx));
    return e;
}

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

/* Kernel names of the loop IR ("kernel k0(...") into names[], returns how many. */
static int kernel_names(const char *loops, char names[][32], int cap) {
    int n = 0;
    for (const char *s = loops; (s = strstr(s, "kernel ")) && n < cap; s++) {
        if (s != loops && s[-1] != '\n') continue;
        const char *a = s + 7, *p = strchr(a, '(');
        if (!p || p - a >= 32) continue;
        memcpy(names[n], a, (size_t)(p - a));
        names[n][p - a] = 0;
        n++;
    }
    return n;
}

/* Does s contain `word` as a whole C token? */
static bool has_word(const char *s, const char *word) {
    size_t n = strlen(word);
    for (const char *p = s; (p = strstr(p, word)); p++) {
        bool before = p > s && (isalnum((unsigned char)p[-1]) || p[-1] == '_');
        bool after = isalnum((unsigned char)p[n]) || p[n] == '_';
        if (!before && !after) return true;
    }
    return false;
}

static int count_substr(const char *s, const char *needle) {
    int n = 0;
    for (; (s = strstr(s, needle)); s += strlen(needle)) n++;
    return n;
}

/* ---- the generated source ---------------------------------------------------------------- */

static void check_source(rj_ctx *ctx, const rj_graph *g, const char *what, size_t *bytes) {
    rj_program *p = rj_program_new((rj_graph *)g, RJ_TARGET_REFERENCE);
    assert_non_null(p);
    char *loops = rj_program_dump(p, "loops");
    char *src = rj_program_dump(p, "cuda");
    char *again = rj_program_dump(p, "cuda");
    if (!loops || !src || !again) fail_msg("%s: dump: %s", what, rj_ctx_error(ctx));
    char names[64][32];
    int nk = kernel_names(loops, names, 64);
    assert_true(nk > 0);
    if (count_substr(src, "extern \"C\" __global__ void ") != nk)
        fail_msg("%s: %d kernels in the loop IR but %d __global__ functions", what, nk,
                 count_substr(src, "extern \"C\" __global__ void "));
    for (int i = 0; i < nk; i++) {
        char sig[96];
        snprintf(sig, sizeof sig, "extern \"C\" __global__ void %.31s(", names[i]);
        if (!strstr(src, sig)) fail_msg("%s: no `%s` in the CUDA source", what, sig);
    }
    if (strcmp(src, again)) fail_msg("%s: two dumps of the CUDA source differ", what);
    if (strlen(src) > 200000) fail_msg("%s: %zu bytes of CUDA source", what, strlen(src));
    /* no bare inf/nan outside comments: they have no C literal */
    for (const char *line = src; *line;) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        const char *c = line;
        while (c < line + len && *c == ' ') c++;
        if (c[0] != '/' || c[1] != '/') {
            char buf[4096];
            snprintf(buf, sizeof buf, "%.*s", (int)(len < sizeof buf - 1 ? len : sizeof buf - 1), line);
            if (has_word(buf, "inf") || has_word(buf, "nan"))
                fail_msg("%s: a non-finite constant printed as text: %s", what, buf);
        }
        line += len + (end ? 1 : 0);
    }
    *bytes += strlen(src);
    rj_string_free(ctx, loops);
    rj_string_free(ctx, src);
    rj_string_free(ctx, again);
    rj_program_free(p);
}

static void test_source(void **state) {
    fixture *f = *state;
    size_t bytes = 0;
    double t0 = now_ms();
    for (int i = 0; i < NCORPUS; i++)
        for (rj_dtype ft = RJ_F32; ft <= RJ_F64; ft++) {
            env e = build(f->ctx, i, ft);
            char what[96];
            snprintf(what, sizeof what, "%s (%s)", corpus_name(i), rj_dtype_name(ft));
            check_source(f->ctx, e.g, what, &bytes);
            rj_graph_free(e.g);
        }
    printf("CUDA source of %d graphs (f32 and f64): %zu bytes in %.0f ms\n", 2 * NCORPUS, bytes,
           now_ms() - t0);
}

/* Exact literals: constants round-trip, and non-finite ones are written as bits. */
static void test_constants_text(void **state) {
    fixture *f = *state;
    static const char *const want[2][4] = {
        {"__int_as_float((int)0x7fc00000u)", "__int_as_float((int)0x7f800000u)",
         "__int_as_float((int)0xff800000u)", "0.1f"},
        {"__longlong_as_double((long long)0x7ff8000000000000ull)",
         "__longlong_as_double((long long)0x7ff0000000000000ull)",
         "__longlong_as_double((long long)0xfff0000000000000ull)", "0.1)"}};
    for (rj_dtype ft = RJ_F32; ft <= RJ_F64; ft++) {
        env e = env_new(f->ctx, ft);
        g_constants(&e);
        rj_program *p = rj_program_new(e.g, RJ_TARGET_REFERENCE);
        char *src = rj_program_dump(p, "cuda");
        assert_non_null(src);
        for (int k = 0; k < 4; k++)
            if (!strstr(src, want[ft - RJ_F32][k]))
                fail_msg("%s source lacks %s", rj_dtype_name(ft), want[ft - RJ_F32][k]);
        assert_non_null(strstr(src, "(-2147483647 - 1)"));
        assert_non_null(strstr(src, "(-9223372036854775807LL - 1)"));
        if (ft == RJ_F32) assert_non_null(strstr(src, "1e-45f"));
        rj_string_free(f->ctx, src);
        rj_program_free(p);
        rj_graph_free(e.g);
    }
}

/* ---- NVRTC and ptxas ---------------------------------------------------------------------- */

/* Assembles PTX with ptxas for the PTX's own target; fails the test with ptxas's output. */
static void assemble(const char *ptx, const char *what) {
    const char *t = strstr(ptx, ".target sm_");
    assert_non_null(t);
    int arch = atoi(t + 11);
    char path[] = "/tmp/ragjit_cuda_XXXXXX.ptx";
    int fd = mkstemps(path, 4);
    assert_true(fd >= 0);
    FILE *fp = fdopen(fd, "w");
    assert_non_null(fp);
    fputs(ptx, fp);
    fclose(fp);
    char cmd[256];
    snprintf(cmd, sizeof cmd, "%s -arch=sm_%d -o /dev/null %s 2>&1", PTXAS, arch, path);
    FILE *pp = popen(cmd, "r");
    assert_non_null(pp);
    char msg[2048] = "";
    size_t n = fread(msg, 1, sizeof msg - 1, pp);
    msg[n] = 0;
    int st = pclose(pp);
    unlink(path);
    if (st == -1 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
        fail_msg("%s: ptxas -arch=sm_%d failed (status %d): %s", what, arch, st, msg);
}

static void test_ptx(void **state) {
    fixture *f = *state;
    bool have_ptxas = access(PTXAS, X_OK) == 0;
    double t_nvrtc = 0, t_ptxas = 0;
    int graphs = 0, kernels = 0;
    for (int i = 0; i < NCORPUS; i++)
        for (rj_dtype ft = RJ_F32; ft <= RJ_F64; ft++) {
            env e = build(f->ctx, i, ft);
            char what[96];
            snprintf(what, sizeof what, "%s (%s)", corpus_name(i), rj_dtype_name(ft));
            rj_program *p = rj_program_new(e.g, RJ_TARGET_REFERENCE);
            assert_non_null(p);
            double t0 = now_ms();
            char *ptx = rj_program_dump(p, "ptx");
            t_nvrtc += now_ms() - t0;
            if (!ptx) {
                if (rj_ctx_status(f->ctx) != RJ_ERR_NO_DEVICE)
                    fail_msg("%s: NVRTC: %s", what, rj_ctx_error(f->ctx));
                printf("skipped: %s\n", rj_ctx_error(f->ctx));
                rj_program_free(p);
                rj_graph_free(e.g);
                skip();
            }
            char *loops = rj_program_dump(p, "loops");
            assert_non_null(loops);
            char names[64][32];
            int nk = kernel_names(loops, names, 64);
            for (int k = 0; k < nk; k++) {
                char entry[96];
                snprintf(entry, sizeof entry, ".entry %.31s(", names[k]);
                if (!strstr(ptx, entry)) fail_msg("%s: no `%s` in the PTX", what, entry);
            }
            kernels += nk;
            graphs++;
            if (have_ptxas) {
                t0 = now_ms();
                assemble(ptx, what);
                t_ptxas += now_ms() - t0;
            }
            rj_string_free(f->ctx, loops);
            rj_string_free(f->ctx, ptx);
            rj_program_free(p);
            rj_graph_free(e.g);
        }
    printf("NVRTC compiled %d graphs (%d kernels) in %.0f ms", graphs, kernels, t_nvrtc);
    if (!have_ptxas) {
        printf("\nskipped: %s not found, the PTX was not assembled\n", PTXAS);
        skip();
    }
    printf("; ptxas assembled them in %.0f ms\n", t_ptxas);
}

/* ---- allocation failures ------------------------------------------------------------------ */

/* Dumps `stage` of a small graph with the nth allocation of the dump failing (0: none). */
static rj_status dump_failing(tracker *tr, const char *stage, long nth, long *attempts) {
    rj_ctx *ctx = rj_ctx_new(tracking_alloc, tr);
    assert_non_null(ctx);
    env e = env_new(ctx, RJ_F32);
    std_chain_add(&e, "softmax(relu(x*w+v), dim=1)");
    std_chain_add(&e, "sum(pad(x,0.75,L),1)");
    std_chain_add(&e, "gelu(layer_norm(x)+0.1)");
    rj_program *p = rj_program_new(e.g, RJ_TARGET_REFERENCE);
    assert_non_null(p);
    long before = tr->attempts;
    tr->fail_at = nth ? before + nth : 0;
    char *text = rj_program_dump(p, stage);
    rj_status st = text ? RJ_OK : rj_ctx_status(ctx);
    tr->fail_at = 0;
    *attempts = tr->attempts - before;
    rj_string_free(ctx, text);
    rj_program_free(p);
    rj_graph_free(e.g);
    rj_ctx_free(ctx);
    return st;
}

/* Every allocation of the "cuda" and "ptx" dumps fails once: RJ_ERR_NOMEM, nothing leaks. */
static void test_alloc_failures(void **state) {
    (void)state;
    static const char *const stages[] = {"cuda", "ptx"};
    for (int k = 0; k < 2; k++) {
        tracker clean = {0};
        long total;
        rj_status st = dump_failing(&clean, stages[k], 0, &total);
        if (st == RJ_ERR_NO_DEVICE) {
            printf("alloc sweep (ptx) skipped: NVRTC is not available\n");
            continue;
        }
        assert_int_equal(st, RJ_OK);
        assert_int_equal(clean.live_blocks, 0);
        for (long nth = 1; nth <= total; nth++) {
            tracker tr = {0};
            long n;
            st = dump_failing(&tr, stages[k], nth, &n);
            if (st != RJ_ERR_NOMEM)
                fail_msg("%s: failing allocation %ld of %ld gave %s", stages[k], nth, total, rj_status_str(st));
            if (tr.live_blocks || tr.bad_size)
                fail_msg("%s: failing allocation %ld of %ld leaked %ld blocks", stages[k], nth, total, tr.live_blocks);
        }
        printf("alloc sweep (%s dump): %ld allocation points, each failed once\n", stages[k], total);
    }
}

/* ---- the RJ_TARGET_CUDA program ------------------------------------------------------------ */

/* Without a device the program fails cleanly; with one, test_device_runs covers it. */
static void test_no_device(void **state) {
    fixture *f = *state;
    env e = env_new(f->ctx, RJ_F32);
    std_chain_add(&e, "softmax(relu(x*w+v), dim=1)");
    for (int round = 0; round < 2; round++) { /* the second time from the cached driver state */
        rj_program *p = rj_program_new(e.g, RJ_TARGET_CUDA);
        if (p) {
            rj_program_free(p);
            rj_graph_free(e.g);
            printf("skipped: a CUDA device is present (test_device_runs checks results)\n");
            skip();
        }
        assert_int_equal(rj_ctx_status(f->ctx), RJ_ERR_NO_DEVICE);
        assert_error_contains(f->ctx, "no CUDA device");
        if (round == 0) printf("rj_program_new(RJ_TARGET_CUDA): %s\n", rj_ctx_error(f->ctx));
    }
    rj_graph_free(e.g);
}

/* The corpus on the device against the interpreter, every length pattern; with_holes binds the
 * jagged inputs as views with holes (logical offsets computed by the runtime). */
static void device_corpus(fixture *f, bool with_holes) {
    int graphs = 0;
    double t0 = now_ms();
    for (int i = 0; i < NCORPUS; i++)
        for (rj_dtype ft = RJ_F32; ft <= RJ_F64; ft++) {
            env e = build(f->ctx, i, ft);
            rj_program *pc = rj_program_new(e.g, RJ_TARGET_CUDA);
            if (!pc) {
                if (rj_ctx_status(f->ctx) != RJ_ERR_NO_DEVICE)
                    fail_msg("%s: compiling for CUDA: %s", corpus_name(i), rj_ctx_error(f->ctx));
                printf("skipped: %s\n", rj_ctx_error(f->ctx));
                rj_graph_free(e.g);
                skip();
            }
            rj_program *pr = rj_program_new(e.g, RJ_TARGET_REFERENCE);
            assert_non_null(pr);
            rj_bind *bc = rj_bind_new(pc), *br = rj_bind_new(pr);
            int nout = rj_graph_output_count(e.g);
            for (int pat = 0; pat < LEN_PATTERN_COUNT; pat++) {
                data d = data_new((len_pattern)pat, ft, (uint64_t)i + 7);
                holes h = {0};
                if (with_holes) h = holes_new(&d, ft);
                bind_all(f->ctx, bc, &e, &d, with_holes ? &h : NULL);
                bind_all(f->ctx, br, &e, &d, with_holes ? &h : NULL);
                if (rj_program_run(pc, bc))
                    fail_msg("%s (%s): CUDA run: %s", corpus_name(i), len_pattern_names[pat], rj_ctx_error(f->ctx));
                assert_ok(f->ctx, rj_program_run(pr, br));
                for (int o = 0; o < nout; o++) {
                    rj_node on = rj_graph_output_at(e.g, o);
                    rj_tensor_info gi, ri;
                    rj_tensor_get_info(rj_bind_result(bc, on), &gi);
                    rj_tensor_get_info(rj_bind_result(br, on), &ri);
                    char what[160];
                    snprintf(what, sizeof what, "%s, output %s, %s, %s%s", corpus_name(i),
                             rj_node_name(e.g, on), len_pattern_names[pat], rj_dtype_name(ft),
                             with_holes ? ", with holes" : "");
                    compare(what, &gi, &ri);
                }
                if (with_holes) holes_free(&h);
                data_free(&d);
            }
            rj_bind_free(bc);
            rj_bind_free(br);
            rj_program_free(pc);
            rj_program_free(pr);
            rj_graph_free(e.g);
            graphs++;
        }
    printf("%d graphs match the interpreter on the GPU (%d length patterns%s) in %.0f ms\n", graphs,
           LEN_PATTERN_COUNT, with_holes ? ", inputs with holes" : "", now_ms() - t0);
}

static void test_device_runs(void **state) { device_corpus(*state, false); }

/* Compiles and runs a small graph on the device with the nth allocation failing (0: none). */
static rj_status device_failing(tracker *tr, long nth, long *attempts) {
    rj_ctx *ctx = rj_ctx_new(tracking_alloc, tr);
    assert_non_null(ctx);
    env e = env_new(ctx, RJ_F32);
    std_chain_add(&e, "softmax(relu(x*w+v), dim=1)");
    std_chain_add(&e, "sum(pad(x,0.75,L),1)");
    data d = data_new(LEN_UNIFORM, RJ_F32, 5);
    rj_bind *b = NULL;
    long before = tr->attempts;
    tr->fail_at = nth ? before + nth : 0;
    rj_program *p = rj_program_new(e.g, RJ_TARGET_CUDA);
    rj_status st = p ? RJ_OK : rj_ctx_status(ctx);
    if (p && !(b = rj_bind_new(p))) st = rj_ctx_status(ctx);
    if (b) {
        rj_bind_offsets(b, e.J, d.B, d.off, NULL);
        rj_bind_size(b, e.L, d.maxlen + 3);
        const void *in[] = {d.x, d.y, d.w, d.v, d.m, d.xi, d.pb, d.p3};
        rj_node nodes[] = {e.x, e.y, e.w, e.v, e.m, e.xi, e.pb, e.p3};
        int64_t numel[] = {d.rows * D, d.rows * D, D, D, d.rows * D, d.rows * D, d.B * D, d.B * D};
        for (int i = 0; i < 8; i++) rj_bind_input(b, nodes[i], in[i], numel[i]);
        st = rj_program_run(p, b);
    }
    tr->fail_at = 0;
    *attempts = tr->attempts - before;
    data_free(&d);
    rj_bind_free(b);
    rj_program_free(p);
    rj_graph_free(e.g);
    rj_ctx_free(ctx);
    return st;
}

/* With a device: every allocation of compiling and running fails once, cleanly. */
static void test_device_alloc_failures(void **state) {
    (void)state;
    tracker clean = {0};
    long total;
    rj_status st = device_failing(&clean, 0, &total);
    if (st == RJ_ERR_NO_DEVICE) {
        printf("skipped: no CUDA device\n");
        skip();
    }
    assert_int_equal(st, RJ_OK);
    for (long nth = 1; nth <= total; nth++) {
        tracker tr = {0};
        long n;
        st = device_failing(&tr, nth, &n);
        if (st != RJ_ERR_NOMEM)
            fail_msg("failing allocation %ld of %ld gave %s", nth, total, rj_status_str(st));
        if (tr.live_blocks || tr.bad_size)
            fail_msg("failing allocation %ld of %ld leaked %ld blocks", nth, total, tr.live_blocks);
    }
    printf("alloc sweep (CUDA compile and run): %ld allocation points, each failed once\n", total);
}
static void test_device_holes(void **state) { device_corpus(*state, true); }

int main(void) {
    const struct CMUnitTest tests[] = {
        FX(test_source), FX(test_constants_text), FX(test_ptx), FX(test_alloc_failures),
        FX(test_no_device),
        FX(test_device_runs), FX(test_device_holes), FX(test_device_alloc_failures),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
