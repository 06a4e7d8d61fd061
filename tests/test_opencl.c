/*
 * test_opencl.c — the OpenCL target: generated OpenCL C, and the GPU-shaped kernels run on
 * whatever OpenCL device there is (PoCL's CPU device in CI) against the interpreter.
 *
 * The corpus is test_cuda.c's (stdenv: every op group and every fused chain, in f32 and f64):
 *   - the "opencl" dump has one `__kernel` function per loop-IR kernel, under the kernel's
 *     name, is the same text when dumped twice, spells nothing of CUDA's, writes non-finite
 *     constants as bits, and uses double exactly when it enables cl_khr_fp64 — never for an
 *     f32 graph that computes nothing in f64, so those build on devices without doubles;
 *   - on a device, every graph is compiled once and run on every length pattern, with the
 *     inputs packed and as views with holes, and every output matches the interpreter within
 *     the CPU JIT's tolerances (stdenv's compare);
 *   - every allocation of compiling and running two chains fails once: RJ_ERR_NOMEM, no leak;
 *   - one program runs from several threads at once (they share the queue and the kernels);
 *   - without a loader (RAGJIT_OPENCL_LIBRARY pointing nowhere), without a platform
 *     (OCL_ICD_VENDORS, read by the ocl-icd loader, pointing nowhere) and with a device index
 *     that does not exist, rj_program_new fails with RJ_ERR_NO_DEVICE and the reason, leaking
 *     nothing. The loader is opened once per process, so each of these runs in a child process
 *     (this program again, re-executed with the variable set).
 * The device tests are skipped, saying why, where no OpenCL device exists. PoCL builds a new
 * source in about a second and caches it under ~/.cache/pocl, so the first run of this test on
 * a machine takes longest; the corpus is compiled once for both layouts to halve that.
 */
#include "stdenv.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dlfcn.h>
#include <dlpack/dlpack.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- the generated source ---------------------------------------------------------------- */

static void check_source(rj_ctx *ctx, rj_graph *g, rj_dtype ft, const char *what, size_t *bytes, int *no_double) {
    char *loops = rj_graph_dump(g, RJ_TARGET_OPENCL, "loops");
    char *src = rj_graph_dump(g, RJ_TARGET_OPENCL, "opencl");
    char *again = rj_graph_dump(g, RJ_TARGET_OPENCL, "opencl");
    if (!loops || !src || !again) fail_msg("%s: dump: %s", what, rj_ctx_error(ctx));
    int nk = 0;
    for (const char *s = loops; (s = strstr(s, "kernel ")); s++) {
        if (s != loops && s[-1] != '\n') continue;
        const char *a = s + 7, *p = strchr(a, '(');
        assert_non_null(p);
        char sig[96];
        snprintf(sig, sizeof sig, "__kernel void %.*s(", (int)(p - a), a);
        if (!strstr(src, sig)) fail_msg("%s: no `%s` in the OpenCL source", what, sig);
        nk++;
    }
    assert_true(nk > 0);
    if (count_substr(src, "__kernel void ") != nk + 1) /* and the device check of offsets */
        fail_msg("%s: %d kernels in the loop IR but %d __kernel functions", what, nk, count_substr(src, "__kernel void "));
    if (!strstr(src, "__kernel void rj_check_offsets(")) fail_msg("%s: no rj_check_offsets", what);
    if (strcmp(src, again)) fail_msg("%s: two dumps of the OpenCL source differ", what);
    static const char *const cuda_words[] = {"__global__", "__device__", "__shared__", "__syncthreads",
                                             "blockIdx", "threadIdx", "blockDim", "gridDim", "extern",
                                             "expf", "sqrtf", "fmaf", "__int_as_float", "inf", "nan"};
    for (size_t i = 0; i < sizeof cuda_words / sizeof cuda_words[0]; i++)
        if (has_code_word(src, cuda_words[i])) fail_msg("%s: `%s` in the OpenCL source", what, cuda_words[i]);
    if (strstr(src, "long long")) fail_msg("%s: `long long` (reserved in OpenCL C) in the source", what);
    bool dbl = has_code_word(src, "double"), fp64 = strstr(src, "#pragma OPENCL EXTENSION cl_khr_fp64 : enable");
    if (dbl != fp64) fail_msg("%s: double %s in the source, the cl_khr_fp64 pragma %s", what, dbl ? "used" : "unused",
                              fp64 ? "present" : "absent");
    if (ft == RJ_F32 && !dbl) (*no_double)++;
    *bytes += strlen(src);
    rj_string_free(ctx, loops);
    rj_string_free(ctx, src);
    rj_string_free(ctx, again);
}

static void test_source(void **state) {
    fixture *f = *state;
    size_t bytes = 0;
    int no_double = 0;
    double t0 = now_ms();
    for (int i = 0; i < std_corpus_count(); i++)
        for (rj_dtype ft = RJ_F32; ft <= RJ_F64; ft++) {
            env e = std_corpus_build(f->ctx, i, ft);
            char what[96];
            snprintf(what, sizeof what, "%s (%s)", std_corpus_name(i), rj_dtype_name(ft));
            check_source(f->ctx, e.g, ft, what, &bytes, &no_double);
            rj_graph_free(e.g);
        }
    /* every f32 graph but the one that casts to every dtype builds without cl_khr_fp64 */
    if (no_double != std_corpus_count() - 1)
        fail_msg("%d of %d f32 graphs' sources are free of double", no_double, std_corpus_count());
    printf("OpenCL source of %d graphs (f32 and f64): %zu bytes in %.0f ms\n", 2 * std_corpus_count(), bytes,
           now_ms() - t0);
}

/* Exact literals: constants round-trip, and non-finite ones are written as bits (NaN through a
 * helper that hides it from constant folding). */
static void test_constants_text(void **state) {
    fixture *f = *state;
    static const char *const want[2][4] = {
        {"rj_nan_f32(0x7fc00000u)", "as_float(0x7f800000u)", "as_float(0xff800000u)", "0.1f"},
        {"rj_nan_f64(0x7ff8000000000000ul)", "as_double(0x7ff0000000000000ul)",
         "as_double(0xfff0000000000000ul)", "0.1)"}};
    for (rj_dtype ft = RJ_F32; ft <= RJ_F64; ft++) {
        env e = env_new(f->ctx, ft);
        std_chain_add(&e, "constants");
        char *src = rj_graph_dump(e.g, RJ_TARGET_OPENCL, "opencl");
        assert_non_null(src);
        for (int k = 0; k < 4; k++)
            if (!strstr(src, want[ft - RJ_F32][k]))
                fail_msg("%s source lacks %s", rj_dtype_name(ft), want[ft - RJ_F32][k]);
        assert_non_null(strstr(src, "(-2147483647 - 1)"));
        assert_non_null(strstr(src, "(-9223372036854775807L - 1)"));
        rj_string_free(f->ctx, src);
        rj_graph_free(e.g);
    }
}

/* ---- on a device --------------------------------------------------------------------------- */

static void test_activation_tails(void **state) {
    std_check_tails(((fixture *)*state)->ctx, RJ_TARGET_OPENCL);
}

static void test_empty_identities(void **state) {
    std_check_identities(((fixture *)*state)->ctx, RJ_TARGET_OPENCL);
}

static void test_device_runs(void **state) {
    std_corpus_run(((fixture *)*state)->ctx, RJ_TARGET_OPENCL, STD_PACKED | STD_HOLES);
}

/* Op groups of the corpus with 16-bit floats: vload_half/vstore_half_rte for f16, integer
 * bf16 on PoCL. Two: all of them took PoCL over 20 minutes on a busy 2-core machine, four
 * groups 9 (its compiles); half_numpy.py runs every op family on OpenCL (casts and pads
 * included), test_jit the whole corpus on the CPU. */
static void test_half_runs(void **state) {
    static const char *const groups[] = {"reductions", "softmax/norm", NULL};
    std_corpus_run_types(((fixture *)*state)->ctx, RJ_TARGET_OPENCL, STD_PACKED, RJ_F16, RJ_BF16, groups);
}

/* Random chains (stdenv.h), fewer than the CPU's (RJ_RANDOM_CHAINS, RJ_RANDOM_SEED as there). */
static void test_random_chains(void **state) {
    std_random_run(((fixture *)*state)->ctx, RJ_TARGET_OPENCL, 16);
}

static void test_index_errors(void **state) {
    (void)state;
    std_index_errors(RJ_TARGET_OPENCL);
}

static void test_alloc_failures_device(void **state) {
    (void)state;
    std_alloc_sweep_mode(RJ_TARGET_OPENCL, true);
}

static void test_alloc_failures(void **state) {
    (void)state;
    std_alloc_sweep(RJ_TARGET_OPENCL);
}

/* Several threads run one program at once, each with its own binding and data. */
typedef struct worker {
    rj_ctx *ctx;
    rj_program *p;
    const env *e;
    len_pattern pat;
    rj_status st;
    double got; /* the sum of the first output */
} worker;

static double first_output_sum(rj_bind *b, const env *e) {
    rj_tensor_info ti;
    rj_tensor_get_info(rj_bind_result(b, rj_graph_output_at(e->g, 0)), &ti);
    double s = 0;
    for (int64_t i = 0; i < numel_of(&ti); i++) s += elem_get(ti.values, ti.dtype, i);
    return s;
}

static void *work(void *arg) {
    worker *w = arg;
    data d = data_new(w->pat, RJ_F32, 11);
    rj_bind *b = rj_bind_new(w->p);
    w->st = RJ_ERR_NOMEM;
    if (b) {
        bind_all(w->ctx, b, w->e, &d, NULL);
        for (int rep = 0; rep < 5 && (w->st = rj_program_run(w->p, b)) == RJ_OK; rep++) w->got = first_output_sum(b, w->e);
    }
    rj_bind_free(b);
    data_free(&d);
    return NULL;
}

static void test_threads(void **state) {
    fixture *f = *state;
    env e = env_new(f->ctx, RJ_F32);
    std_chain_add(&e, "softmax(relu(x*w+v), dim=1)");
    std_chain_add(&e, "sum(pad(x,0.75,L),1)");
    rj_program *p = rj_program_new(e.g, RJ_TARGET_OPENCL);
    if (!p) {
        assert_int_equal(rj_ctx_status(f->ctx), RJ_ERR_NO_DEVICE);
        printf("skipped: %s\n", rj_ctx_error(f->ctx));
        rj_graph_free(e.g);
        skip();
    }
    rj_program *pr = rj_program_new(e.g, RJ_TARGET_REFERENCE);
    assert_non_null(pr);
    enum { NW = 4 };
    worker w[NW];
    pthread_t t[NW];
    for (int i = 0; i < NW; i++) {
        w[i] = (worker){.ctx = f->ctx, .p = p, .e = &e, .pat = i % 2 ? LEN_SKEWED : LEN_ONE_LONG};
        assert_int_equal(pthread_create(&t[i], NULL, work, &w[i]), 0);
    }
    for (int i = 0; i < NW; i++) pthread_join(t[i], NULL);
    for (int i = 0; i < NW; i++) {
        if (w[i].st) fail_msg("thread %d: %s", i, rj_status_str(w[i].st));
        worker ref = {.ctx = f->ctx, .p = pr, .e = &e, .pat = w[i].pat};
        work(&ref);
        assert_int_equal(ref.st, RJ_OK);
        double tol = 1e-4 * (1 + fabs(ref.got));
        if (fabs(w[i].got - ref.got) > tol) fail_msg("thread %d: sum %.9g, interpreter %.9g", i, w[i].got, ref.got);
    }
    rj_program_free(p);
    rj_program_free(pr);
    rj_graph_free(e.g);
}

/* rj_bind_stats after a run: the kernels timed by the device within the run's time, the
 * launches counted (a softmax over the ragged dim is a fold, a combine and a rows kernel, a
 * sum a fold and a combine); the copy probe measures something. */
static void test_stats_and_probe(void **state) {
    fixture *f = *state;
    env e = env_new(f->ctx, RJ_F32);
    std_chain_add(&e, "softmax(relu(x*w+v), dim=1)");
    rj_program *p = rj_program_new(e.g, RJ_TARGET_OPENCL);
    if (!p) {
        assert_int_equal(rj_ctx_status(f->ctx), RJ_ERR_NO_DEVICE);
        printf("skipped: %s\n", rj_ctx_error(f->ctx));
        rj_graph_free(e.g);
        skip();
    }
    data d = data_new(LEN_ONE_LONG, RJ_F32, 5);
    rj_bind *b = rj_bind_new(p);
    assert_non_null(b);
    rj_run_stats st;
    assert_int_equal(rj_bind_stats(b, &st), RJ_ERR_ARG); /* no run yet */
    bind_all(f->ctx, b, &e, &d, NULL);
    assert_int_equal(rj_program_run(p, b), RJ_OK);
    assert_int_equal(rj_bind_stats(b, &st), RJ_OK);
    assert_int_equal(st.kernels, 3);
    assert_true(st.kernel_ms > 0 && st.copy_ms >= 0 && st.run_ms >= st.kernel_ms);
    assert_int_equal(rj_bind_stats(b, NULL), RJ_ERR_ARG);
    double gbs = 0;
    assert_int_equal(rj_device_copy_bandwidth(f->ctx, RJ_TARGET_OPENCL, 1 << 20, &gbs), RJ_OK);
    assert_true(gbs > 0);
    printf("run %.3f ms: kernels %.3f ms (device timers), copies %.3f ms; copy probe %.2f GB/s\n", st.run_ms,
           st.kernel_ms, st.copy_ms, gbs);
    assert_int_equal(rj_device_copy_bandwidth(f->ctx, RJ_TARGET_OPENCL, 0, &gbs), RJ_ERR_ARG);
    assert_int_equal(rj_device_copy_bandwidth(f->ctx, RJ_TARGET_OPENCL, 1 << 20, NULL), RJ_ERR_ARG);
    rj_bind_free(b);
    data_free(&d);
    rj_program_free(p);
    rj_graph_free(e.g);
}

/* ---- device memory -------------------------------------------------------------------------- */

/* The few OpenCL calls a caller makes to hand ragjit device memory, through the loader (the
 * test, like ragjit, builds without OpenCL headers). */
typedef struct ocl {
    void *lib;
    void *(*CreateBuffer)(void *, uint64_t, size_t, void *, int32_t *);
    int32_t (*ReleaseMemObject)(void *);
    int32_t (*EnqueueWriteBuffer)(void *, void *, uint32_t, size_t, size_t, const void *, uint32_t, const void *, void *);
    int32_t (*EnqueueReadBuffer)(void *, void *, uint32_t, size_t, size_t, void *, uint32_t, const void *, void *);
} ocl;

static bool ocl_load(ocl *o) {
    memset(o, 0, sizeof *o);
    if (!(o->lib = dlopen("libOpenCL.so.1", RTLD_NOW | RTLD_LOCAL))) return false;
    *(void **)&o->CreateBuffer = dlsym(o->lib, "clCreateBuffer");
    *(void **)&o->ReleaseMemObject = dlsym(o->lib, "clReleaseMemObject");
    *(void **)&o->EnqueueWriteBuffer = dlsym(o->lib, "clEnqueueWriteBuffer");
    *(void **)&o->EnqueueReadBuffer = dlsym(o->lib, "clEnqueueReadBuffer");
    return o->CreateBuffer && o->ReleaseMemObject && o->EnqueueWriteBuffer && o->EnqueueReadBuffer;
}

/* A cl_mem holding a copy of `bytes` at src (at least 8 bytes: OpenCL has no empty buffers). */
static rj_devptr ocl_upload(ocl *o, void *cx, void *q, const void *src, size_t bytes) {
    int32_t e = 0;
    void *m = o->CreateBuffer(cx, 1 /* CL_MEM_READ_WRITE */, bytes > 8 ? bytes : 8, NULL, &e);
    assert_true(m && !e);
    if (bytes && src) assert_int_equal(o->EnqueueWriteBuffer(q, m, 1, 0, bytes, src, 0, NULL, NULL), 0);
    return (rj_devptr)(uintptr_t)m;
}

/* Every input, the offsets (and lengths) and every output in device memory: the first output in
 * a cl_mem of the caller's, the others allocated by ragjit. The outputs must be bitwise those
 * of a run of the same program on host memory; the binding is run twice, on two length
 * patterns, to reuse (and grow) its device outputs. */
static void test_device_memory(void **state) {
    fixture *f = *state;
    rj_ctx *ctx = f->ctx;
    void *cx = NULL, *q = NULL;
    ocl o = {0};
    if (rj_device_handles(ctx, RJ_TARGET_OPENCL, &cx, &q) != RJ_OK || !ocl_load(&o)) {
        printf("skipped: %s\n", rj_ctx_error(ctx));
        skip();
    }
    env e = env_new(ctx, RJ_F32);
    std_chain_add(&e, "softmax(relu(x*w+v), dim=1)");
    std_chain_add(&e, "sum(pad(x,0.75,L),1)");
    std_chain_add(&e, "relu(x*w+v)");
    rj_program *p = rj_program_new(e.g, RJ_TARGET_OPENCL);
    assert_non_null(p);
    rj_bind *bd = rj_bind_new(p);
    assert_non_null(bd);
    assert_ok(ctx, rj_bind_stream(bd, q));
    int nout = rj_graph_output_count(e.g);
    rj_devptr user_out = 0;
    static const len_pattern pats[] = {LEN_SKEWED, LEN_ONE_LONG, LEN_EMPTY, LEN_B0};
    for (size_t pi = 0; pi < sizeof pats / sizeof pats[0]; pi++) {
        data d = data_new(pats[pi], RJ_F32, 7 + pi);
        rj_bind *bh = rj_bind_new(p);
        bind_all(ctx, bh, &e, &d, NULL);
        assert_ok(ctx, rj_program_run(p, bh));
        /* the same inputs in device memory */
        size_t fs = sizeof(float);
        struct {
            rj_node n;
            const void *src;
            int64_t numel;
            size_t es;
        } in[] = {{e.x, d.x, d.rows * D, fs}, {e.y, d.y, d.rows * D, fs}, {e.w, d.w, D, fs}, {e.v, d.v, D, fs},
                  {e.m, d.m, d.rows * D, 1},  {e.xi, d.xi, d.rows * D, 4}, {e.pb, d.pb, d.B * D, fs},
                  {e.p3, d.p3, d.B * D, fs}, {e.tab, d.tab, V * D, fs}, {e.ix, d.ix, d.rows, 8}, {e.sb, d.sb, d.sq, fs}};
        rj_devptr mem[11];
        for (int i = 0; i < 11; i++) {
            mem[i] = 0;
            if (in[i].n == RJ_NONE) continue;
            mem[i] = ocl_upload(&o, cx, q, in[i].src, (size_t)in[i].numel * in[i].es);
            assert_ok(ctx, rj_bind_input_device(bd, in[i].n, mem[i], in[i].numel));
        }
        rj_devptr doff = ocl_upload(&o, cx, q, d.off, sizeof(int64_t) * (size_t)(d.B + 1));
        assert_ok(ctx, rj_bind_offsets_device(bd, e.J, d.B, doff, 0));
        /* the offsets read back and checked on the host (pattern 0), their facts given and
         * trusted (1, 3), their facts given and the offsets checked on the device (2) */
        bool trusted = pi % 2 == 1;
        assert_ok(ctx, rj_bind_trust_offsets(bd, trusted));
        if (pi > 0) assert_ok(ctx, rj_bind_offsets_info(bd, e.J, d.rows, d.maxlen));
        assert_ok(ctx, rj_bind_size(bd, e.L, d.maxlen + 3));
        rj_tensor_info first;
        assert_ok(ctx, rj_tensor_get_info(rj_bind_result(bh, rj_graph_output_at(e.g, 0)), &first));
        int64_t n0 = numel_of(&first);
        if (user_out) o.ReleaseMemObject((void *)(uintptr_t)user_out);
        user_out = ocl_upload(&o, cx, q, NULL, (size_t)n0 * rj_dtype_size(first.dtype));
        assert_ok(ctx, rj_bind_output_device(bd, rj_graph_output_at(e.g, 0), user_out, n0));
        for (int i = 1; i < nout; i++) assert_ok(ctx, rj_bind_output_device(bd, rj_graph_output_at(e.g, i), 0, 0));
        assert_ok(ctx, rj_program_run(p, bd));
        for (int i = 0; i < nout; i++) {
            rj_node on = rj_graph_output_at(e.g, i);
            rj_tensor_info wi, ti;
            assert_ok(ctx, rj_tensor_get_info(rj_bind_result(bh, on), &wi));
            const rj_tensor_info *want = &wi;
            rj_devptr at = 0;
            int64_t n = -1;
            assert_ok(ctx, rj_bind_result_device(bd, on, &at, &n));
            assert_int_equal(n, numel_of(want));
            if (i == 0) assert_true(at == user_out);
            size_t bytes = (size_t)n * rj_dtype_size(want->dtype);
            void *got = malloc(bytes ? bytes : 1);
            if (bytes) assert_int_equal(o.EnqueueReadBuffer(q, (void *)(uintptr_t)at, 1, 0, bytes, got, 0, NULL, NULL), 0);
            if (bytes && memcmp(got, want->values, bytes))
                fail_msg("%s: output %d in device memory differs from the host-memory run", len_pattern_names[pats[pi]], i);
            assert_ok(ctx, rj_tensor_get_info(rj_bind_result(bd, on), &ti));
            assert_null(ti.values); /* in device memory */
            free(got);
        }
        assert_ok(ctx, rj_bind_wait(bd));
        rj_run_stats st;
        assert_ok(ctx, rj_bind_stats(bd, &st));
        if (pi == 0) printf("device-memory run: %.3f ms, kernels %.3f ms, copies %.3f ms\n", st.run_ms, st.kernel_ms, st.copy_ms);
        for (int i = 0; i < 11; i++)
            if (mem[i]) o.ReleaseMemObject((void *)(uintptr_t)mem[i]);
        o.ReleaseMemObject((void *)(uintptr_t)doff);
        rj_bind_free(bh);
        data_free(&d);
    }
    { /* a view with holes: offsets and lengths on the device; rows compared, holes left out */
        data d = data_new(LEN_SKEWED, RJ_F32, 21);
        holes h = holes_new(&d, RJ_F32);
        rj_bind *bh = rj_bind_new(p);
        bind_all(ctx, bh, &e, &d, &h);
        assert_ok(ctx, rj_program_run(p, bh));
        bind_all(ctx, bd, &e, &d, NULL); /* the dense inputs, host memory */
        rj_devptr hx = ocl_upload(&o, cx, q, h.x, sizeof(float) * (size_t)(h.rows * D));
        rj_devptr hoff = ocl_upload(&o, cx, q, h.off, sizeof(int64_t) * (size_t)(d.B + 1));
        rj_devptr hlen = ocl_upload(&o, cx, q, h.len, sizeof(int64_t) * (size_t)d.B);
        assert_ok(ctx, rj_bind_input_device(bd, e.x, hx, h.rows * D));
        assert_ok(ctx, rj_bind_input(bd, e.y, h.y, h.rows * D));
        assert_ok(ctx, rj_bind_input(bd, e.m, h.m, h.rows * D));
        assert_ok(ctx, rj_bind_input(bd, e.xi, h.xi, h.rows * D));
        assert_ok(ctx, rj_bind_input(bd, e.ix, h.ix, h.rows));
        if (e.sb != RJ_NONE) assert_ok(ctx, rj_bind_input(bd, e.sb, d.sb, d.sq));
        assert_ok(ctx, rj_bind_offsets_device(bd, e.J, d.B, hoff, hlen));
        for (int i = 0; i < nout; i++) assert_ok(ctx, rj_bind_output_device(bd, rj_graph_output_at(e.g, i), 0, 0));
        assert_ok(ctx, rj_program_run(p, bd));
        for (int i = 0; i < nout; i++) {
            rj_node on = rj_graph_output_at(e.g, i);
            rj_tensor_info want, got;
            assert_ok(ctx, rj_tensor_get_info(rj_bind_result(bh, on), &want));
            assert_ok(ctx, rj_tensor_get_info(rj_bind_result(bd, on), &got));
            rj_devptr at = 0;
            int64_t n = 0;
            assert_ok(ctx, rj_bind_result_device(bd, on, &at, &n));
            size_t bytes = (size_t)n * rj_dtype_size(want.dtype);
            void *host = malloc(bytes ? bytes : 1);
            if (bytes) assert_int_equal(o.EnqueueReadBuffer(q, (void *)(uintptr_t)at, 1, 0, bytes, host, 0, NULL, NULL), 0);
            got.values = host;
            compare("holes, device memory", &got, &want);
            free(host);
        }
        o.ReleaseMemObject((void *)(uintptr_t)hx);
        o.ReleaseMemObject((void *)(uintptr_t)hoff);
        o.ReleaseMemObject((void *)(uintptr_t)hlen);
        rj_bind_free(bh);
        holes_free(&h);
        data_free(&d);
    }
    { /* DLPack: x and its offsets as kDLOpenCL tensors; the outputs exported as such */
        data d = data_new(LEN_SKEWED, RJ_F32, 9);
        rj_bind *bh = rj_bind_new(p);
        bind_all(ctx, bh, &e, &d, NULL);
        assert_ok(ctx, rj_program_run(p, bh));
        bind_all(ctx, bd, &e, &d, NULL);
        assert_ok(ctx, rj_bind_trust_offsets(bd, false));
        rj_devptr mx = ocl_upload(&o, cx, q, d.x, sizeof(float) * (size_t)(d.rows * D));
        rj_devptr mo = ocl_upload(&o, cx, q, d.off, sizeof(int64_t) * (size_t)(d.B + 1));
        int64_t xs[2] = {d.rows, D}, os[1] = {d.B + 1};
        DLTensor tx = {.data = (void *)(uintptr_t)mx, .device = {kDLOpenCL, 0}, .ndim = 2, .dtype = {kDLFloat, 32, 1},
                       .shape = xs};
        DLTensor to = {.data = (void *)(uintptr_t)mo, .device = {kDLOpenCL, 0}, .ndim = 1, .dtype = {kDLInt, 64, 1},
                       .shape = os};
        assert_ok(ctx, rj_bind_dlpack(bd, e.x, &tx, &to));
        assert_ok(ctx, rj_bind_input(bd, e.y, d.y, d.rows * D)); /* host memory beside it */
        for (int i = 0; i < nout; i++) assert_ok(ctx, rj_bind_output_device(bd, rj_graph_output_at(e.g, i), 0, 0));
        assert_ok(ctx, rj_program_run(p, bd));
        rj_node on = rj_graph_output_at(e.g, 0);
        struct DLManagedTensor *ev = NULL, *eo = NULL;
        assert_ok(ctx, rj_bind_export_dlpack(bd, on, &ev, &eo));
        assert_int_equal(ev->dl_tensor.device.device_type, kDLOpenCL);
        assert_int_equal(eo->dl_tensor.device.device_type, kDLOpenCL);
        assert_true(eo->dl_tensor.data == (void *)(uintptr_t)mo);
        rj_tensor_info want;
        assert_ok(ctx, rj_tensor_get_info(rj_bind_result(bh, on), &want));
        size_t bytes = (size_t)numel_of(&want) * sizeof(float);
        void *got = malloc(bytes ? bytes : 1);
        if (bytes) assert_int_equal(o.EnqueueReadBuffer(q, ev->dl_tensor.data, 1, 0, bytes, got, 0, NULL, NULL), 0);
        if (bytes && memcmp(got, want.values, bytes)) fail_msg("DLPack: the exported output differs");
        free(got);
        assert_ok(ctx, rj_program_run(p, bd)); /* a new output buffer: the exported one is the tensor's */
        ev->deleter(ev);
        eo->deleter(eo);
        o.ReleaseMemObject((void *)(uintptr_t)mx);
        o.ReleaseMemObject((void *)(uintptr_t)mo);
        rj_bind_free(bh);
        data_free(&d);
    }
    { /* offsets checked on the device: what the host check finds, found there */
        data d = data_new(LEN_SKEWED, RJ_F32, 5);
        bind_all(ctx, bd, &e, &d, NULL);
        for (int i = 0; i < nout; i++) assert_ok(ctx, rj_bind_output_device(bd, rj_graph_output_at(e.g, i), 0, 0));
        assert_ok(ctx, rj_bind_trust_offsets(bd, false));
        int64_t *bad = malloc(sizeof(int64_t) * (size_t)(d.B + 1));
        struct {
            int64_t item, delta, rows, maxlen;
            rj_status want;
            const char *says;
        } cases[] = {
            {0, 0, d.rows, d.maxlen, RJ_OK, NULL},
            {3, -1000, d.rows, d.maxlen, RJ_ERR_OFFSETS_ORDER, "decrease at item"},
            {0, 1, d.rows, d.maxlen, RJ_ERR_OFFSETS_START, "do not start at 0"},
            {d.B, -1, d.rows, d.maxlen, RJ_ERR_OFFSETS_END, "end at another row"},
            {0, 0, d.rows, d.maxlen - 1, RJ_ERR_SIZE, "longer than the longest item"},
        };
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
            memcpy(bad, d.off, sizeof(int64_t) * (size_t)(d.B + 1));
            bad[cases[c].item] += cases[c].delta;
            rj_devptr doff = ocl_upload(&o, cx, q, bad, sizeof(int64_t) * (size_t)(d.B + 1));
            assert_ok(ctx, rj_bind_offsets_device(bd, e.J, d.B, doff, 0));
            assert_ok(ctx, rj_bind_offsets_info(bd, e.J, cases[c].rows, cases[c].maxlen));
            rj_status st = rj_program_run(p, bd);
            if (!st) st = rj_bind_wait(bd); /* every output on the device: the run returned early */
            if (st != cases[c].want)
                fail_msg("device check case %zu: %s, expected %s (%s)", c, rj_status_str(st), rj_status_str(cases[c].want),
                         rj_ctx_error(ctx));
            if (cases[c].says) assert_error_contains(ctx, cases[c].says);
            if (cases[c].says) assert_error_contains(ctx, "ragged symbol j");
            o.ReleaseMemObject((void *)(uintptr_t)doff);
        }
        free(bad);
        data_free(&d);
    }
    { /* trusted offsets need their facts; facts that cannot be */
        data d = data_new(LEN_SKEWED, RJ_F32, 5);
        rj_devptr doff = ocl_upload(&o, cx, q, d.off, sizeof(int64_t) * (size_t)(d.B + 1));
        bind_all(ctx, bd, &e, &d, NULL);
        assert_ok(ctx, rj_bind_offsets_device(bd, e.J, d.B, doff, 0));
        assert_ok(ctx, rj_bind_trust_offsets(bd, true));
        assert_int_equal(rj_program_run(p, bd), RJ_ERR_ARG);
        assert_error_contains(ctx, "rj_bind_offsets_info");
        assert_int_equal(rj_bind_offsets_info(bd, e.J, d.rows, d.rows + 1), RJ_ERR_ARG);
        assert_int_equal(rj_bind_offsets_info(bd, e.J, -1, 0), RJ_ERR_ARG);
        assert_ok(ctx, rj_bind_trust_offsets(bd, false));
        assert_ok(ctx, rj_program_run(p, bd)); /* read back and checked instead */
        o.ReleaseMemObject((void *)(uintptr_t)doff);
        data_free(&d);
    }
    /* misuse: a device input smaller than bound; a host output asked for its device address */
    data d = data_new(LEN_SKEWED, RJ_F32, 3);
    bind_all(ctx, bd, &e, &d, NULL);
    rj_devptr small = ocl_upload(&o, cx, q, d.x, 16);
    assert_ok(ctx, rj_bind_output_device(bd, rj_graph_output_at(e.g, 0), user_out, 0));
    assert_int_equal(rj_program_run(p, bd), RJ_ERR_SIZE); /* the caller's output is too small */
    assert_error_contains(ctx, "output out0: the bound device buffer holds 0 elements");
    assert_ok(ctx, rj_bind_output_device(bd, rj_graph_output_at(e.g, 0), 0, 0));
    assert_ok(ctx, rj_bind_input_device(bd, e.x, small, d.rows * D));
    assert_int_equal(rj_program_run(p, bd), RJ_ERR_SIZE);
    assert_error_contains(ctx, "input x");
    assert_ok(ctx, rj_bind_input(bd, e.x, d.x, d.rows * D));
    assert_ok(ctx, rj_bind_output(bd, rj_graph_output_at(e.g, 0), NULL, 0));
    assert_ok(ctx, rj_program_run(p, bd));
    assert_int_equal(rj_bind_result_device(bd, rj_graph_output_at(e.g, 0), NULL, NULL), RJ_ERR_ARG);
    o.ReleaseMemObject((void *)(uintptr_t)small);
    o.ReleaseMemObject((void *)(uintptr_t)user_out);
    data_free(&d);
    rj_bind_free(bd);
    rj_program_free(p);
    /* the CPU has no device memory */
    rj_program *pc = rj_program_new(e.g, RJ_TARGET_CPU);
    rj_bind *bc = rj_bind_new(pc);
    assert_int_equal(rj_bind_input_device(bc, e.x, 64, 1), RJ_ERR_UNSUPPORTED);
    assert_int_equal(rj_bind_stream(bc, NULL), RJ_ERR_UNSUPPORTED);
    assert_int_equal(rj_device_handles(ctx, RJ_TARGET_CPU, &cx, &q), RJ_ERR_UNSUPPORTED);
    rj_bind_free(bc);
    rj_program_free(pc);
    rj_graph_free(e.g);
    dlclose(o.lib);
}

/* ---- without a device ---------------------------------------------------------------------- */

/* Does the message contain one of the '|'-separated needles? */
static bool contains_one(const char *msg, const char *needles) {
    char buf[512];
    snprintf(buf, sizeof buf, "%s", needles);
    for (char *save = NULL, *n = strtok_r(buf, "|", &save); n; n = strtok_r(NULL, "|", &save))
        if (strstr(msg, n)) return true;
    return false;
}

/* In the child: compiling for OpenCL fails with RJ_ERR_NO_DEVICE and one of `needles`, twice
 * (the second time from the loader's remembered state), leaking nothing. The exit status says
 * how it went. */
static int child_no_device(const char *needles) {
    tracker tr = {0};
    rj_ctx *ctx = rj_ctx_new(tracking_alloc, &tr);
    env e = env_new(ctx, RJ_F32);
    std_chain_add(&e, "relu(x*w+v)");
    int bad = 0;
    for (int round = 0; round < 2; round++) {
        rj_program *p = rj_program_new(e.g, RJ_TARGET_OPENCL);
        if (p || rj_ctx_status(ctx) != RJ_ERR_NO_DEVICE || !contains_one(rj_ctx_error(ctx), needles)) {
            fprintf(stderr, "expected RJ_ERR_NO_DEVICE with \"%s\", got %s: %s\n", needles,
                    p ? "a program" : rj_status_str(rj_ctx_status(ctx)), rj_ctx_error(ctx));
            bad = 1;
        }
        if (round == 0) printf("    %s\n", rj_ctx_error(ctx));
        rj_program_free(p);
    }
    rj_graph_free(e.g);
    rj_ctx_free(ctx);
    if (tr.live_blocks || tr.bad_size) fprintf(stderr, "leaked %ld blocks\n", tr.live_blocks), bad = 1;
    return bad;
}

/* Runs this program again with `var` set to `value`, checking for one of `needles`. */
static void run_child(const char *var, const char *value, const char *needles) {
    fflush(stdout);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        setenv(var, value, 1);
        execl("/proc/self/exe", "test_opencl", "--no-device", needles, (char *)NULL);
        _exit(127);
    }
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        fail_msg("%s=%s: the child process failed (status %d)", var, value, st);
}

/* Without the loader; with it but without a platform (where the loader itself is missing, the
 * child says that instead); with a device index beyond the devices there are. */
static void test_no_device(void **state) {
    (void)state;
    run_child("RAGJIT_OPENCL_LIBRARY", "/nonexistent/libOpenCL.so.1",
              "no OpenCL device: /nonexistent/libOpenCL.so.1 not found");
    run_child("OCL_ICD_VENDORS", "/nonexistent", "the ICD loader finds no platform|libOpenCL.so.1 not found");
    run_child("RAGJIT_OPENCL_DEVICE", "99",
              "RAGJIT_OPENCL_DEVICE=99 is not a device index|finds no platform|libOpenCL.so.1 not found");
}

int main(int argc, char **argv) {
    if (argc == 3 && !strcmp(argv[1], "--no-device")) return child_no_device(argv[2]);
    const struct CMUnitTest tests[] = {
        FX(test_source), FX(test_constants_text), FX(test_no_device), FX(test_device_runs), FX(test_half_runs),
        FX(test_threads), FX(test_stats_and_probe), FX(test_device_memory), FX(test_alloc_failures), FX(test_index_errors),
        FX(test_alloc_failures_device), FX(test_random_chains), FX(test_activation_tails), FX(test_empty_identities),
    };
    return run_group(tests, NULL, NULL, argc, argv);
}
