/*
 * bench.c — ragjit's speed, measured against the machine itself in the same run.
 *
 * Workloads (B = 256 items, lengths uniform in 1..1024 from a fixed seed, D = 256, f32):
 *   W1 relu(x * w + b)                 W4 sum(x, dim=1)
 *   W2 softmax(x, dim=1)               W5 layer_norm(x, D) with weight and bias
 *   W3 unpad(pad(x, 0) * 2 + 1, j1)    W6 pad(x, 0) as an output
 * For each: the median time, GB/s of unique bytes (each input read once, each output written
 * once), and ratios against the best copy and the non-temporal triad bandwidth measured here
 * (each run of the workload followed by a run of each probe; the median of the pairs' ratios:
 * paired_ratios), and against a hand-written C loop (bench/baseline.c, -O3 -march=native, same
 * threads).
 * W4 also runs in pairs with two hand-written sums (bench/baseline.c: base_w4_rows, 256-bit
 * loads into accumulators in memory, one plain and one compensated as ragjit's), each run
 * followed by the read probe: ragjit's kernel against what C does at the same moments.
 * W7 relu(linear(x, W, b)) with x [B, j1, 256] and W [1024, 256]: its GFLOP/s, and the ratio to
 * the BLAS's GEMM alone (multi-threaded, the same library ragjit loads) on the same packed rows,
 * the two run in alternating pairs. Where ragjit's own sgemm serves (RAGJIT_BLAS=off, or no
 * optimised BLAS found), against OpenBLAS's sgemm if it loads.
 * W8 softmax(q kᵀ / 16, dim=2) ([B, j1, j1]) and W9 its product with v: against padding to the
 * longest item with a BLAS product per item and a masked softmax, with the padding ratio.
 * Then: compile latency (the first program of the process, later programs, an in-memory cache
 * hit; the persistent cache is off for these), loads from the persistent cache (in a context
 * that compiled before, as the first program of a fresh context, and as the first program of
 * new processes: bench itself started with --disk-hit-child, the library's first use
 * included) and dispatch overhead of a tiny run (B = 8, D = 16).
 *
 *   bench [--quick] [--threads N] [--reps N] [--only W2,W8,...] [--target cpu|cuda|opencl] [--dtype bf16|f16]
 * --quick shrinks everything (CI runs it as a smoke test; its numbers mean nothing).
 * --only runs just the named CPU workloads (the bandwidth probes and compile lines still run).
 * --dtype bf16 (or f16) adds a table of W1..W6 and W7 in that type against f32 (half_table);
 * with bf16, W1 also as plain C loops in both types (its bits checked against ragjit's).
 *
 * With --target cuda or opencl the same workloads run on the device at the GPU issue's size
 * (B = 2048, lengths 1..1024, D = 256: 1.08 GB a tensor), plus W2 and W4 with one item 1000x
 * longer than the others and the same total rows. Each reports the kernels' time by the
 * device's timers (rj_bind_stats: the copies of a run with host pointers are apart), its GB/s
 * of unique bytes, and the ratio to a device-to-device copy of one tensor measured in the same
 * run (rj_device_copy_bandwidth). Then W7, W8 and W9 (ragjit's own product kernels on the device) in
 * GFLOP/s by the device's timers, a tiny run's host overhead, and the persistent cache across
 * processes: a new process's first program compiled into an empty cache, then loaded by new
 * processes, beyond the driver's start-up (bench --disk-hit-child DIR TARGET). With --dtype,
 * W1..W6 also in that type against f32 by the device's timers (gpu_half_table).
 */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "baseline.h"
#include "ragjit.h"

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static void die(rj_ctx *ctx, const char *what) {
    fprintf(stderr, "bench: %s: %s\n", what, rj_ctx_error(ctx));
    exit(1);
}

static uint64_t rng = 42;
static uint64_t next(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return rng;
}

static float *falloc(int64_t n) {
    size_t bytes = ((size_t)(n ? n : 1) * sizeof(float) + 63) / 64 * 64;
    float *p = aligned_alloc(64, bytes);
    if (!p) {
        fprintf(stderr, "bench: out of memory\n");
        exit(1);
    }
    memset(p, 0, bytes);
    return p;
}

typedef struct wl {
    const char *name;
    rj_graph *g;
    rj_node out;
    rj_program *p;
    rj_bind *b;
    double compile_ms;
    int kernels;
} wl;

typedef struct setup {
    int64_t B, D, rows, L, *off;
    float *x, *w, *bias;
    uint16_t *xh, *wh, *biash; /* the same values in the 16-bit dtype of --dtype (half_table) */
    rj_dtype ht;
    int threads, reps;
} setup;

/* The processors this process may run on (a default context's workers, unless a cgroup CPU
 * quota caps them), so the probes run as many threads as the workloads. */
static int affinity_cpus(void) {
    cpu_set_t set;
    if (!sched_getaffinity(0, sizeof set, &set) && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

/* x: t[B, j1, D], w, b: t[D] */
static rj_graph *new_graph_t(rj_ctx *ctx, int64_t D, rj_dim *J, rj_node *x, rj_node *w, rj_node *b, rj_dtype t) {
    rj_graph *g = rj_graph_new(ctx);
    rj_dim B = rj_graph_dense(g, "B");
    *J = rj_graph_ragged(g, "j1", B);
    *x = rj_graph_input(g, "x", t, 3, (rj_dim[]){B, *J, D});
    *w = rj_graph_input(g, "w", t, 1, (rj_dim[]){D});
    *b = rj_graph_input(g, "b", t, 1, (rj_dim[]){D});
    return g;
}

static rj_graph *new_graph(rj_ctx *ctx, int64_t D, rj_dim *J, rj_node *x, rj_node *w, rj_node *b) {
    return new_graph_t(ctx, D, J, x, w, b, RJ_F32);
}

static rj_node build(rj_graph *g, int which, rj_dim J, rj_node x, rj_node w, rj_node b) {
    switch (which) {
    case 1:
        return rj_graph_unary(g, RJ_OP_RELU,
                              rj_graph_binary(g, RJ_OP_ADD, rj_graph_binary(g, RJ_OP_MUL, x, w), b));
    case 2: return rj_graph_softmax(g, x, 1);
    case 3:
        return rj_graph_unpad(g, rj_graph_binary(g, RJ_OP_ADD,
                                                 rj_graph_binary(g, RJ_OP_MUL, rj_graph_pad(g, x, 0, RJ_DIM_NONE),
                                                                 rj_graph_scalar(g, 2)),
                                                 rj_graph_scalar(g, 1)), J);
    case 4: return rj_graph_reduce(g, RJ_OP_SUM, x, 1, false);
    case 5: return rj_graph_layer_norm(g, x, 1, w, b, 1e-5);
    default: return rj_graph_pad(g, x, 0, RJ_DIM_NONE);
    }
}

/* Workload `which` in dtype t (f32, or s->ht with the 16-bit copies of the data). */
static wl make_workload_on(rj_ctx *ctx, const setup *s, int which, rj_dtype t, rj_target target) {
    static const char *const names[] = {"", "W1 relu(x*w+b)", "W2 softmax(x,1)",
                                        "W3 unpad(pad(x)*2+1)", "W4 sum(x,1)",
                                        "W5 layer_norm(x,D)", "W6 pad(x) output"};
    wl w = {.name = names[which]};
    rj_dim J;
    rj_node x, wv, bv;
    bool h = t != RJ_F32;
    w.g = new_graph_t(ctx, s->D, &J, &x, &wv, &bv, t);
    w.out = build(w.g, which, J, x, wv, bv);
    if (rj_graph_output(w.g, w.out, "y") != RJ_OK) die(ctx, w.name);
    double t0 = now();
    if (!(w.p = rj_program_new(w.g, target))) die(ctx, w.name);
    w.compile_ms = (now() - t0) * 1e3;
    char *fused = rj_program_dump(w.p, "fused");
    for (char *q = fused; q && (q = strstr(q, "kernel ")); q++) w.kernels++;
    rj_string_free(ctx, fused);
    w.b = rj_bind_new(w.p);
    if (!w.b || rj_bind_offsets(w.b, J, s->B, s->off, NULL) ||
        rj_bind_input(w.b, x, h ? (void *)s->xh : s->x, s->rows * s->D) ||
        rj_bind_input(w.b, wv, h ? (void *)s->wh : s->w, s->D) || rj_bind_input(w.b, bv, h ? (void *)s->biash : s->bias, s->D))
        die(ctx, w.name);
    return w;
}

static wl make_workload_t(rj_ctx *ctx, const setup *s, int which, rj_dtype t) {
    return make_workload_on(ctx, s, which, t, RJ_TARGET_CPU);
}

static wl make_workload(rj_ctx *ctx, const setup *s, int which) { return make_workload_t(ctx, s, which, RJ_F32); }

/* s's inputs in the 16-bit dtype ht as well (xh, wh, biash: --dtype), and their release. */
static void half_inputs(rj_ctx *ctx, setup *s, rj_dtype ht) {
    s->ht = ht;
    s->xh = malloc(sizeof(uint16_t) * (size_t)(s->rows * s->D + 1));
    s->wh = malloc(sizeof(uint16_t) * (size_t)s->D), s->biash = malloc(sizeof(uint16_t) * (size_t)s->D);
    if (!s->xh || !s->wh || !s->biash) die(ctx, "out of memory");
    for (int64_t i = 0; i < s->rows * s->D; i++) rj_value_set(ht, s->xh, i, s->x[i]);
    for (int64_t i = 0; i < s->D; i++) rj_value_set(ht, s->wh, i, s->w[i]), rj_value_set(ht, s->biash, i, s->bias[i]);
}

static void half_inputs_free(setup *s) {
    free(s->xh), free(s->wh), free(s->biash);
    s->xh = s->wh = s->biash = NULL;
}

static double time_jit(rj_ctx *ctx, wl *w, int reps);

/* W7: relu(linear(x, W, b)), x [B, j1, K], W [N, K]: ragjit against the BLAS's sgemm alone on the
 * same packed rows (C = x Wᵀ, nothing fused), in the same run. */
typedef void (*sgemm_fn)(int, int, int, int, int, int, float, const float *, int, const float *, int, float,
                         float *, int);

/* The BLAS ragjit loads (rj_blas_info: "... (soname)"), for the same-run comparisons; where
 * ragjit's own sgemm serves (RAGJIT_BLAS=off, or no optimised BLAS found), OpenBLAS if it
 * loads, so that the own kernel is measured against it; NULL if neither. */
static sgemm_fn load_sgemm(void **handle) {
    const char *info = rj_blas_info(), *l = strrchr(info, '('), *r = l ? strchr(l, ')') : NULL;
    char name[256];
    *handle = NULL;
    if (!strncmp(info, "ragjit's own", 12)) snprintf(name, sizeof name, "libopenblas.so.0");
    else if (!strncmp(info, "none", 4) || !l || !r) return NULL;
    else snprintf(name, sizeof name, "%.*s", (int)(r - l - 1), l + 1);
    void *h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    void *sym = h ? dlsym(h, "cblas_sgemm") : NULL;
    *handle = h;
    if (!sym) return NULL;
    sgemm_fn sg;
    memcpy(&sg, &sym, sizeof sg);
    return sg;
}

static void blas_threads(void *h, int n) {
    void *th = h ? dlsym(h, "openblas_set_num_threads") : NULL;
    if (!th) return;
    void (*set)(int);
    memcpy(&set, &th, sizeof set);
    set(n);
}

static void w7(rj_ctx *ctx, const setup *s, int64_t N, int reps) {
    int64_t K = s->D;
    rj_graph *g = rj_graph_new(ctx);
    rj_dim B = rj_graph_dense(g, "B"), J = rj_graph_ragged(g, "j1", B);
    rj_node x = rj_graph_input(g, "x", RJ_F32, 3, (rj_dim[]){B, J, K});
    rj_node W = rj_graph_input(g, "W", RJ_F32, 2, (rj_dim[]){N, K});
    rj_node b = rj_graph_input(g, "b", RJ_F32, 1, (rj_dim[]){N});
    rj_node y = rj_graph_unary(g, RJ_OP_RELU, rj_graph_linear(g, x, W, b));
    rj_graph_output(g, y, "y");
    float *wv = falloc(N * K), *bv = falloc(N), *out = falloc(s->rows * N);
    for (int64_t i = 0; i < N * K; i++) wv[i] = (float)((int64_t)(next() % 2001) - 1000) / 16000.0f;
    for (int64_t i = 0; i < N; i++) bv[i] = 0.01f * (float)(i % 7);
    double t0 = now();
    wl wk = {.name = "W7", .g = g, .out = y, .p = rj_program_new(g, RJ_TARGET_CPU)};
    if (!wk.p) die(ctx, "W7 compile");
    wk.compile_ms = (now() - t0) * 1e3;
    wk.b = rj_bind_new(wk.p);
    if (rj_bind_offsets(wk.b, J, s->B, s->off, NULL) || rj_bind_input(wk.b, x, s->x, s->rows * K) ||
        rj_bind_input(wk.b, W, wv, N * K) || rj_bind_input(wk.b, b, bv, N) || rj_bind_output(wk.b, y, out, s->rows * N))
        die(ctx, "W7 bind");
    double flops = 2.0 * (double)s->rows * (double)K * (double)N;
    void *h;
    sgemm_fn sg = load_sgemm(&h);
    if (!sg) {
        double t = time_jit(ctx, &wk, reps);
        printf("%-24s %9.3f ms %8.1f GFLOP/s", "W7 relu(linear(x,W,b))", t * 1e3, flops / t / 1e9);
        printf("   (no BLAS here: ragjit's own %s, nothing to compare)\n",
               strncmp(rj_blas_info(), "ragjit's own", 12) ? "loops" : "sgemm");
    } else { /* in alternating pairs, the ratio the median of the pairs': fair on a busy machine */
        blas_threads(h, s->threads);
        double *ts = malloc(sizeof(double) * (size_t)reps * 3), *tj = ts + reps, *q = tj + reps;
        for (int r = -1; r < reps; r++) { /* r = -1: warm-up (pages, caches, OpenBLAS's threads) */
            double a = now();
            if (rj_program_run(wk.p, wk.b)) die(ctx, "W7");
            double b0 = now();
            sg(101, 111, 112, (int)s->rows, (int)N, (int)K, 1.0f, s->x, (int)K, wv, (int)K, 0.0f, out, (int)N);
            if (r >= 0) tj[r] = b0 - a, ts[r] = now() - b0, q[r] = ts[r] / tj[r];
        }
        double t = median(tj, reps), tb = median(ts, reps), ratio = median(q, reps);
        free(ts);
        bool own = !strncmp(rj_blas_info(), "ragjit's own", 12);
        printf("%-24s %9.3f ms %8.1f GFLOP/s", "W7 relu(linear(x,W,b))", t * 1e3, flops / t / 1e9);
        printf("   %s sgemm alone %9.3f ms %8.1f GFLOP/s   ragjit%s/BLAS %.2f\n", own ? "OpenBLAS" : "BLAS",
               tb * 1e3, flops / tb / 1e9, own ? "'s own sgemm" : "", ratio);
        blas_threads(h, 1); /* as ragjit keeps it: its workers take chunks of rows */
    }
    rj_bind_free(wk.b);
    rj_program_free(wk.p);
    rj_graph_free(g);
    free(wv), free(bv), free(out);
}

/* W8 softmax(q kᵀ / 16, dim=2) as an output, W9 its product with v: ragjit on the items' blocks
 * against what PyTorch users write on padded tensors (to_padded, one dense product per item
 * with the BLAS, a softmax masked beyond each item's length, the second product), in the same
 * run; the padding ratio B max² / Σ len² is the work padding adds. */
static void masked_softmax_rows(float *sc, int64_t B, int64_t L, const int64_t *len, float scale) {
#pragma omp parallel for schedule(dynamic, 4)
    for (int64_t r = 0; r < B * L; r++) {
        int64_t b = r / L, n = len[b];
        float *row = sc + r * L, m = -INFINITY;
        if (r % L >= n) { /* a padding row */
            for (int64_t j = 0; j < L; j++) row[j] = 0;
            continue;
        }
        for (int64_t j = 0; j < n; j++) m = fmaxf(m, row[j] * scale);
        float sum = 0;
        for (int64_t j = 0; j < n; j++) sum += row[j] = expf(row[j] * scale - m);
        for (int64_t j = 0; j < L; j++) row[j] = j < n ? row[j] / sum : 0;
    }
}

static void w89(rj_ctx *ctx, const setup *s, int reps) {
    int64_t D = s->D, B = s->B, L = s->L, *len = malloc(sizeof(int64_t) * (size_t)B);
    double sq = 0;
    for (int64_t b = 0; b < B; b++) len[b] = s->off[b + 1] - s->off[b], sq += (double)len[b] * (double)len[b];
    float *k = falloc(s->rows * D), *v = falloc(s->rows * D);
    for (int64_t i = 0; i < s->rows * D; i++) k[i] = s->x[(i * 7) % (s->rows * D)], v[i] = s->x[(i * 13) % (s->rows * D)];
    void *h;
    sgemm_fn sg = load_sgemm(&h);
    double ratio = (double)B * (double)L * (double)L / (sq > 0 ? sq : 1);
    printf("\nW8/W9 attention, D=%lld: padding ratio B max^2 / sum len^2 = %.2f\n", (long long)D, ratio);
    for (int which = 8; which <= 9; which++) {
        rj_graph *g = rj_graph_new(ctx);
        rj_dim Bd = rj_graph_dense(g, "B"), J = rj_graph_ragged(g, "j1", Bd);
        rj_node q = rj_graph_input(g, "q", RJ_F32, 3, (rj_dim[]){Bd, J, D});
        rj_node kn = rj_graph_input(g, "k", RJ_F32, 3, (rj_dim[]){Bd, J, D});
        rj_node vn = rj_graph_input(g, "v", RJ_F32, 3, (rj_dim[]){Bd, J, D});
        rj_node sc = rj_graph_binary(g, RJ_OP_DIV, rj_graph_matmul(g, q, rj_graph_transpose(g, kn, 1, 2)),
                                     rj_graph_scalar(g, sqrt((double)D)));
        rj_node p = rj_graph_softmax(g, sc, 2), y = which == 8 ? p : rj_graph_matmul(g, p, vn);
        rj_graph_output(g, y, "y");
        double t0 = now();
        wl wk = {.name = which == 8 ? "W8" : "W9", .g = g, .out = y, .p = rj_program_new(g, RJ_TARGET_CPU)};
        if (!wk.p) die(ctx, "W8/W9 compile");
        wk.compile_ms = (now() - t0) * 1e3;
        wk.b = rj_bind_new(wk.p);
        if (rj_bind_offsets(wk.b, J, B, s->off, NULL) || rj_bind_input(wk.b, q, s->x, s->rows * D) ||
            rj_bind_input(wk.b, kn, k, s->rows * D) || rj_bind_input(wk.b, vn, v, s->rows * D))
            die(ctx, "W8/W9 bind");
        double t = time_jit(ctx, &wk, reps);
        double flops = 2.0 * sq * (double)D * (which == 8 ? 1 : 2);
        printf("%-26s %9.3f ms %8.1f GFLOP/s", which == 8 ? "W8 softmax(q@kT/16,2)" : "W9 softmax(q@kT/16,2)@v",
               t * 1e3, flops / t / 1e9);
        if (sg) { /* padded: to_padded, a product per item, masked softmax (, a second product) */
            float *qp = falloc(B * L * D), *kp = falloc(B * L * D), *vp = falloc(B * L * D), *scp = falloc(B * L * L);
            float *yp = falloc(B * L * D);
            blas_threads(h, 1);
            double *ts = malloc(sizeof(double) * (size_t)reps);
            for (int r = -1; r < reps; r++) {
                double a = now();
#pragma omp parallel for schedule(dynamic, 1)
                for (int64_t b = 0; b < B; b++) {
                    memset(qp + b * L * D, 0, sizeof(float) * (size_t)(L * D));
                    memset(kp + b * L * D, 0, sizeof(float) * (size_t)(L * D));
                    memcpy(qp + b * L * D, s->x + s->off[b] * D, sizeof(float) * (size_t)(len[b] * D));
                    memcpy(kp + b * L * D, k + s->off[b] * D, sizeof(float) * (size_t)(len[b] * D));
                    if (which == 9) {
                        memset(vp + b * L * D, 0, sizeof(float) * (size_t)(L * D));
                        memcpy(vp + b * L * D, v + s->off[b] * D, sizeof(float) * (size_t)(len[b] * D));
                    }
                    sg(101, 111, 112, (int)L, (int)L, (int)D, 1.0f, qp + b * L * D, (int)D, kp + b * L * D, (int)D,
                       0.0f, scp + b * L * L, (int)L);
                }
                masked_softmax_rows(scp, B, L, len, 1.0f / (float)sqrt((double)D));
                if (which == 9) {
#pragma omp parallel for schedule(dynamic, 1)
                    for (int64_t b = 0; b < B; b++)
                        sg(101, 111, 111, (int)L, (int)D, (int)L, 1.0f, scp + b * L * L, (int)L, vp + b * L * D, (int)D,
                           0.0f, yp + b * L * D, (int)D);
                }
                if (r >= 0) ts[r] = now() - a;
            }
            double tp = median(ts, reps);
            free(ts);
            printf("   padded + BLAS %9.3f ms   padded/ragjit %.2f (padding ratio %.2f)\n", tp * 1e3, tp / t, ratio);
            free(qp), free(kp), free(vp), free(scp), free(yp);
        } else {
            printf("   (no BLAS here: no padded baseline)\n");
        }
        rj_bind_free(wk.b);
        rj_program_free(wk.p);
        rj_graph_free(g);
    }
    free(k), free(v), free(len);
}

typedef void (*base_fn)(const setup *s, float *y);
static void b1(const setup *s, float *y) { base_w1(y, s->x, s->w, s->bias, s->rows, s->D, s->threads); }
static void b2(const setup *s, float *y) { base_w2(y, s->x, s->off, s->B, s->D, s->threads); }
static void b3(const setup *s, float *y) { base_w3(y, s->x, s->rows * s->D, s->threads); }
static void b4(const setup *s, float *y) { base_w4(y, s->x, s->off, s->B, s->D, s->threads); }
static void b5(const setup *s, float *y) { base_w5(y, s->x, s->w, s->bias, s->rows, s->D, s->threads); }
static void b6(const setup *s, float *y) { base_w6(y, s->x, s->off, s->B, s->L, s->D, s->threads); }

static double time_base(const setup *s, base_fn f, float *y) {
    double *t = malloc(sizeof(double) * (size_t)s->reps);
    f(s, y);
    for (int r = 0; r < s->reps; r++) {
        double t0 = now();
        f(s, y);
        t[r] = now() - t0;
    }
    double m = median(t, s->reps);
    free(t);
    return m;
}

typedef struct bw {
    double read, copy, copy_nt, triad, triad_nt; /* GB/s */
} bw;

/* The bandwidth probes over arrays of the workloads' size, kept for the whole run so that each
 * workload's runs can be paired with probe runs (paired_ratios). */
typedef enum { P_COPY, P_COPY_NT, P_TRIAD, P_TRIAD_NT, P_READ, P_KINDS } probe_kind;

typedef struct probes {
    float *a, *b, *c;
    int64_t n;
    int threads;
    volatile float sink;
} probes;

static double probe_bytes(const probes *pr, probe_kind k) {
    return (k == P_READ ? 1.0 : k < P_TRIAD ? 2.0 : 3.0) * (double)pr->n * 4;
}

/* One run of probe k over the arrays' first n elements, in seconds. */
static double probe_run_n(probes *pr, probe_kind k, int64_t n) {
    double t0 = now();
    switch (k) {
    case P_COPY: base_copy(pr->a, pr->b, n, pr->threads); break;
    case P_COPY_NT: base_copy_nt(pr->a, pr->b, n, pr->threads); break;
    case P_TRIAD: base_triad(pr->a, pr->b, pr->c, 3.0f, n, pr->threads); break;
    case P_TRIAD_NT: base_triad_nt(pr->a, pr->b, pr->c, 3.0f, n, pr->threads); break;
    default: pr->sink += base_read(pr->b, n, pr->threads); break;
    }
    return now() - t0;
}

/* One run of probe k, in seconds. */
static double probe_run(probes *pr, probe_kind k) { return probe_run_n(pr, k, pr->n); }

/* W4 and the hand-written sums of base_w4_rows, each run followed by a read probe: the
 * medians of their read GB/s over the probe's. What separates ragjit's kernel from the probe
 * then splits into the cost of its loop (against the plain C sum) and of its compensation
 * (the compensated C sum against the plain one), all measured in the same moments. */
static void w4_breakdown(rj_ctx *ctx, wl *w, const setup *s, probes *pr) {
    int reps = s->reps * 2;
    double *t = malloc(sizeof(double) * (size_t)reps * 3);
    float *y = falloc(s->B * s->D);
    if (!t) die(ctx, "out of memory");
    for (int r = 0; r < reps; r++)
        for (int k = 0; k < 3; k++) {
            double t0 = now();
            if (k == 0 && rj_program_run(w->p, w->b)) die(ctx, w->name);
            if (k > 0) base_w4_rows(y, s->x, s->off, s->B, s->D, s->threads, k == 2);
            double tw = now() - t0, tp = probe_run(pr, P_READ);
            t[k * reps + r] = tp / tw; /* the same bytes read */
        }
    /* y holds the compensated C sum: it must agree with ragjit's */
    rj_tensor_info ti;
    if (rj_tensor_get_info(rj_bind_result(w->b, w->out), &ti)) die(ctx, "W4's output");
    for (int64_t i = 0; i < s->B * s->D; i++) {
        float a = ((const float *)ti.values)[i], c = y[i];
        if (!(fabsf(a - c) <= 1e-5f + 1e-5f * fabsf(c))) {
            fprintf(stderr, "bench: W4 element %lld is %.9g, the compensated C sum %.9g\n", (long long)i, a, c);
            exit(1);
        }
    }
    printf("W4 and hand-written sums in C (256-bit loads, accumulators in memory), reads over the read "
           "probe's in the same pairs: ragjit %.2f, plain C sum %.2f, compensated C sum (as ragjit's) %.2f\n",
           median(t, reps), median(t + reps, reps), median(t + 2 * reps, reps));
    free(y);
    free(t);
}

static bw bandwidth(const setup *s, probes *pr) {
    double *t = malloc(sizeof(double) * (size_t)s->reps), g[P_KINDS];
    for (int k = 0; k < P_KINDS; k++) {
        probe_run(pr, (probe_kind)k);
        for (int r = 0; r < s->reps; r++) t[r] = probe_run(pr, (probe_kind)k);
        g[k] = probe_bytes(pr, (probe_kind)k) / median(t, s->reps) / 1e9;
    }
    free(t);
    return (bw){.copy = g[P_COPY], .copy_nt = g[P_COPY_NT], .triad = g[P_TRIAD], .triad_nt = g[P_TRIAD_NT],
                .read = g[P_READ]};
}

/* A workload's runs, each followed by a run of every probe in `kinds`: the median time of the
 * workload, and for each probe the median over the pairs of (workload GB/s) / (probe GB/s).
 * This machine's bandwidth drifts by up to 2x from one second to the next (other tenants of the
 * host), so a ratio of medians measured seconds apart says as much about the drift as about
 * the workload; the runs of a pair are milliseconds apart and see the same machine. */
static double paired_ratios(rj_ctx *ctx, wl *w, int reps, double bytes, probes *pr, const probe_kind *kinds,
                            int nk, double *ratio) {
    double *t = malloc(sizeof(double) * (size_t)reps * (size_t)(1 + nk));
    if (!t) die(ctx, "out of memory");
    if (rj_program_run(w->p, w->b)) die(ctx, w->name); /* warm-up: pages, caches */
    for (int r = 0; r < reps; r++) {
        double t0 = now();
        if (rj_program_run(w->p, w->b)) die(ctx, w->name);
        t[r] = now() - t0;
        for (int k = 0; k < nk; k++) {
            double tp = probe_run(pr, kinds[k]);
            t[(size_t)reps * (size_t)(1 + k) + (size_t)r] = (bytes / t[r]) / (probe_bytes(pr, kinds[k]) / tp);
        }
    }
    for (int k = 0; k < nk; k++) ratio[k] = median(t + (size_t)reps * (size_t)(1 + k), reps);
    double m = median(t, reps);
    free(t);
    return m;
}

/* Median time of a workload over reps runs (after a warm-up run), in seconds. */
static double time_jit(rj_ctx *ctx, wl *w, int reps) { return paired_ratios(ctx, w, reps, 0, NULL, NULL, 0, NULL); }

static double cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Workload `which` in f32 and in the 16-bit type run alternately, reps pairs (each run followed
 * by the copy probe over as many bytes as its input: the f32 arrays, or their first half):
 * into o the median f32 and 16-bit times, their fractions of the copy bandwidth (bytes moved
 * per second over the probe's), the median of the pairs' f32/16 time ratios, of their ratios
 * of process CPU time, and of the two copies' time ratio (what half the bytes gives the
 * machine's own copy at the same moments). CPU time is all threads': on a loaded machine what
 * a run costs, where wall time is mostly the other jobs; read it with --threads 1, as idle
 * workers may spin. */
static void half_pairs(rj_ctx *ctx, const setup *s, int which, const double bytes[2], probes *pr, probe_kind ck,
                       double o[6]) {
    wl wk[2] = {make_workload_t(ctx, s, which, RJ_F32), make_workload_t(ctx, s, which, s->ht)};
    int n = s->reps;
    double *v = malloc(sizeof(double) * (size_t)n * 7);
    if (!v) die(ctx, "out of memory");
    for (int k = 0; k < 2; k++)
        if (rj_program_run(wk[k].p, wk[k].b)) die(ctx, wk[k].name); /* warm-up: pages, caches */
    for (int r = 0; r < n; r++) {
        double wall[2], cpu[2], copy[2];
        for (int k = 0; k < 2; k++) {
            double t0 = now(), c0 = cpu_now();
            if (rj_program_run(wk[k].p, wk[k].b)) die(ctx, wk[k].name);
            cpu[k] = cpu_now() - c0, wall[k] = now() - t0;
            v[n * k + r] = wall[k];
            copy[k] = probe_run_n(pr, ck, k ? pr->n / 2 : pr->n); /* the copy of as many bytes */
            v[n * (2 + k) + r] = (bytes[k] / wall[k]) / (probe_bytes(pr, ck) / (k ? 2 : 1) / copy[k]);
        }
        v[n * 4 + r] = wall[0] / wall[1];
        v[n * 5 + r] = cpu[0] / cpu[1];
        v[n * 6 + r] = copy[0] / copy[1];
    }
    for (int q = 0; q < 7; q++) o[q] = median(v + n * q, n);
    free(v);
    for (int k = 0; k < 2; k++) {
        rj_bind_free(wk[k].b);
        rj_program_free(wk[k].p);
        rj_graph_free(wk[k].g);
    }
}

/* W1 as hand-written C in f32 and in bf16 (bench/baseline.c), run alternately as half_pairs
 * runs ragjit's, each followed by the copy probe: how much half the bytes gives a plain loop on
 * this machine at the same moments. The C loop's bf16 output must equal ragjit's bit for bit
 * (PyTorch's rounding per op on both sides). */
static void half_c_w1(rj_ctx *ctx, const setup *s, probes *pr, probe_kind ck, double ragjit_ratio) {
    int64_t n = s->rows * s->D;
    float *yf = falloc(n);
    uint16_t *yh = malloc(sizeof(uint16_t) * (size_t)n);
    double *v = malloc(sizeof(double) * (size_t)s->reps * 3);
    if (!yh || !v) die(ctx, "out of memory");
    wl wk = make_workload_t(ctx, s, 1, RJ_BF16);
    rj_tensor_info ti;
    if (rj_program_run(wk.p, wk.b) || rj_tensor_get_info(rj_bind_result(wk.b, wk.out), &ti)) die(ctx, "W1 bf16");
    base_w1_bf16(yh, s->xh, s->wh, s->biash, s->rows, s->D, s->threads);
    int64_t bad = 0;
    for (int64_t i = 0; i < n; i++) bad += ((const uint16_t *)ti.values)[i] != yh[i];
    if (bad) {
        fprintf(stderr, "bench: W1 in bf16: %lld elements of the C loop differ from ragjit's\n", (long long)bad);
        exit(1);
    }
    base_w1(yf, s->x, s->w, s->bias, s->rows, s->D, s->threads); /* warm-up */
    for (int r = 0; r < s->reps; r++) {
        double t0 = now();
        base_w1(yf, s->x, s->w, s->bias, s->rows, s->D, s->threads);
        double tf = now() - t0;
        probe_run(pr, ck);
        t0 = now();
        base_w1_bf16(yh, s->xh, s->wh, s->biash, s->rows, s->D, s->threads);
        double th = now() - t0;
        probe_run_n(pr, ck, pr->n / 2);
        v[r] = tf, v[s->reps + r] = th, v[2 * s->reps + r] = tf / th;
    }
    printf("%-24s %9.3f %8s %7s %9.3f %8s %7s %9.2f   (ragjit's %.2f; the same bits as ragjit's bf16)\n",
           "W1 as C loops", median(v, s->reps) * 1e3, "", "", median(v + s->reps, s->reps) * 1e3, "", "",
           median(v + 2 * s->reps, s->reps), ragjit_ratio);
    rj_bind_free(wk.b);
    rj_program_free(wk.p);
    rj_graph_free(wk.g);
    free(v), free(yh), free(yf);
}

/* --dtype bf16|f16: W1..W6 in the 16-bit type against the same workloads in f32, in the same
 * run, alternating (half_pairs): each one's time and GB/s of unique bytes (2 bytes an element
 * against 4), the fraction of the copy bandwidth of as many bytes (which should be the same for
 * both), the f32 / 16-bit ratios of time and of CPU time (half the bytes: up to 2x), and the
 * same ratio for the copies themselves (half the bytes is not half the time where a copy's
 * fixed costs, such as writing back what the cache holds dirty, do not halve). Then W7 in both
 * (f32 through the BLAS's sgemm, 16-bit through the same GEMM with its operands widened to f32,
 * or an sbgemm — the BLAS's, or AMX tiles (util/amx.c) where the CPU has them: lower/gemm_lib.c). */
static void half_table(rj_ctx *ctx, setup *s, probes *pr, probe_kind copy_kind, unsigned only, int64_t w7n, int w7reps) {
    const char *tn = rj_dtype_name(s->ht);
    printf("\n%s against f32 (same run, same data rounded to %s; GB/s of unique bytes):\n", tn, tn);
    printf("%-24s %9s %8s %7s %9s %8s %7s %9s %8s %9s\n", "workload", "f32 ms", "GB/s", "/copy", "16-bit ms", "GB/s",
           "/copy", "f32/16", "cpu f/16", "copy f/16");
    double N = (double)s->rows * (double)s->D;
    for (int which = 1; which <= 6; which++) {
        if (!(only >> which & 1)) continue;
        double out_elems = which == 4 ? (double)(s->B * s->D) : which == 6 ? (double)(s->B * s->L * s->D) : N;
        double o[7], bytes[2] = {(N + out_elems) * 4, (N + out_elems) * 2};
        half_pairs(ctx, s, which, bytes, pr, copy_kind, o);
        static const char *const names[] = {"", "W1 relu(x*w+b)", "W2 softmax(x,1)", "W3 unpad(pad(x)*2+1)",
                                            "W4 sum(x,1)", "W5 layer_norm(x,D)", "W6 pad(x) output"};
        printf("%-24s %9.3f %8.2f %7.2f %9.3f %8.2f %7.2f %9.2f %8.2f %9.2f\n", names[which], o[0] * 1e3,
               bytes[0] / o[0] / 1e9, o[2], o[1] * 1e3, bytes[1] / o[1] / 1e9, o[3], o[4], o[5], o[6]);
        if (which == 1 && s->ht == RJ_BF16) half_c_w1(ctx, s, pr, copy_kind, o[4]);
    }
    if (!(only >> 7 & 1)) return;
    int64_t K = s->D, Nn = w7n;
    double times[2];
    for (int k = 0; k < 2; k++) { /* relu(linear(x, W, b)) */
        rj_dtype t = k ? s->ht : RJ_F32;
        rj_graph *g = rj_graph_new(ctx);
        rj_dim B = rj_graph_dense(g, "B"), J = rj_graph_ragged(g, "j1", B);
        rj_node x = rj_graph_input(g, "x", t, 3, (rj_dim[]){B, J, K});
        rj_node W = rj_graph_input(g, "W", t, 2, (rj_dim[]){Nn, K});
        rj_node b = rj_graph_input(g, "b", t, 1, (rj_dim[]){Nn});
        rj_node y = rj_graph_unary(g, RJ_OP_RELU, rj_graph_linear(g, x, W, b));
        rj_graph_output(g, y, "y");
        size_t es = rj_dtype_size(t);
        char *wv = calloc((size_t)(Nn * K), es), *bv = calloc((size_t)Nn, es);
        for (int64_t i = 0; i < Nn * K; i++) rj_value_set(t, wv, i, (double)((int64_t)(next() % 2001) - 1000) / 16000.0);
        for (int64_t i = 0; i < Nn; i++) rj_value_set(t, bv, i, 0.01 * (double)(i % 7));
        wl wk = {.name = "W7", .g = g, .out = y, .p = rj_program_new(g, RJ_TARGET_CPU)};
        if (!wk.p) die(ctx, "W7 compile");
        wk.b = rj_bind_new(wk.p);
        if (rj_bind_offsets(wk.b, J, s->B, s->off, NULL) || rj_bind_input(wk.b, x, k ? (void *)s->xh : s->x, s->rows * K) ||
            rj_bind_input(wk.b, W, wv, Nn * K) || rj_bind_input(wk.b, b, bv, Nn))
            die(ctx, "W7 bind");
        times[k] = time_jit(ctx, &wk, w7reps);
        rj_bind_free(wk.b);
        rj_program_free(wk.p);
        rj_graph_free(g);
        free(wv), free(bv);
    }
    double flops = 2.0 * (double)s->rows * (double)K * (double)Nn;
    printf("%-24s %9.3f %8.1f GFLOP/s  %9.3f %8.1f GFLOP/s  f32/16 %.2f\n", "W7 relu(linear(x,W,b))", times[0] * 1e3,
           flops / times[0] / 1e9, times[1] * 1e3, flops / times[1] / 1e9, times[0] / times[1]);
}

/* ---- a GPU target ------------------------------------------------------------------------- */

/* Median kernel time (device timers) of a workload over reps runs, in seconds. */
static double time_device(rj_ctx *ctx, wl *w, int reps, double *copy_ms) {
    double *t = malloc(sizeof(double) * (size_t)reps * 2), *c = t + reps;
    if (rj_program_run(w->p, w->b)) die(ctx, w->name);
    for (int r = 0; r < reps; r++) {
        rj_run_stats st;
        if (rj_program_run(w->p, w->b) || rj_bind_stats(w->b, &st)) die(ctx, w->name);
        t[r] = st.kernel_ms * 1e-3;
        c[r] = st.copy_ms;
    }
    double m = median(t, reps);
    *copy_ms = median(c, reps);
    free(t);
    return m;
}

static void make_lengths(setup *s, int64_t maxlen, bool one_long) {
    s->off = malloc(sizeof(int64_t) * (size_t)(s->B + 1));
    s->off[0] = 0;
    s->L = 0;
    int64_t total = s->B * (1 + maxlen) / 2, base = total / (s->B - 1 + 1000);
    if (base < 1) base = 1;
    for (int64_t i = 0; i < s->B; i++) {
        int64_t len = one_long ? (i == s->B / 2 ? 1000 * base : base) : 1 + (int64_t)(next() % (uint64_t)maxlen);
        s->off[i + 1] = s->off[i] + len;
        if (len > s->L) s->L = len;
    }
    s->rows = s->off[s->B];
}

/* n values of type t copied to device memory with the public API alone: a program returning
 * its input, run with its output in device memory that stays with the binding (kept in *keep
 * until the caller frees it). */
static rj_devptr to_device(rj_ctx *ctx, rj_target target, const void *data, int64_t n, bool i64, rj_bind **keep,
                           rj_program **prog, rj_graph **graph) {
    rj_graph *g = rj_graph_new(ctx);
    rj_dim N = rj_graph_dense(g, "N");
    rj_node a = rj_graph_input(g, "a", i64 ? RJ_I64 : RJ_F32, 1, (rj_dim[]){N});
    rj_graph_output(g, a, "b");
    rj_program *p = rj_program_new(g, target);
    if (!p) die(ctx, "to_device");
    rj_bind *b = rj_bind_new(p);
    rj_node out = rj_graph_output_at(g, 0);
    rj_devptr d = 0;
    if (!b || rj_bind_input(b, a, data, n) || rj_bind_output_device(b, out, 0, 0) || rj_program_run(p, b) ||
        rj_bind_wait(b) || rj_bind_result_device(b, out, &d, NULL))
        die(ctx, "to_device");
    *keep = b, *prog = p, *graph = g;
    return d;
}

typedef struct resident {
    rj_bind *keep[5];
    rj_program *prog[5];
    rj_graph *graph[5];
    rj_devptr x, w, bias, off;
} resident;

static void resident_free(resident *r) {
    for (int i = 0; i < 5; i++) rj_bind_free(r->keep[i]), rj_program_free(r->prog[i]), rj_graph_free(r->graph[i]);
}

/* A workload's binding with everything in device memory: inputs, trusted offsets and their
 * facts, ragjit's device outputs. Returns the median wall time per run (run + wait), seconds. */
static double time_resident(rj_ctx *ctx, wl *w, const setup *s, const resident *r, rj_dim J, rj_node x, rj_node wv,
                            rj_node bv, double *kernel_s) {
    rj_bind *b = rj_bind_new(w->p);
    rj_node out = rj_graph_output_at(w->g, 0);
    if (!b || rj_bind_offsets_device(b, J, s->B, r->off, 0) || rj_bind_offsets_info(b, J, s->rows, s->L) ||
        rj_bind_trust_offsets(b, true) || rj_bind_input_device(b, x, r->x, s->rows * s->D) ||
        rj_bind_input_device(b, wv, r->w, s->D) || rj_bind_input_device(b, bv, r->bias, s->D) ||
        rj_bind_output_device(b, out, 0, 0))
        die(ctx, "resident bind");
    double *t = malloc(sizeof(double) * (size_t)s->reps * 2), *k = t + s->reps;
    for (int i = -1; i < s->reps; i++) {
        double t0 = now();
        rj_run_stats st;
        if (rj_program_run(w->p, b) || rj_bind_wait(b) || rj_bind_stats(b, &st)) die(ctx, "resident run");
        if (i >= 0) t[i] = now() - t0, k[i] = st.kernel_ms * 1e-3;
    }
    double m = median(t, s->reps);
    *kernel_s = median(k, s->reps);
    free(t);
    rj_bind_free(b);
    return m;
}

/* bench --disk-hit-child DIR TARGET: a new process's first program (W1 of the tiny setup) for
 * TARGET (cpu, cuda or opencl), with the persistent cache in DIR; prints rj_program_new's time,
 * the time from rj_ctx_new on, and (device targets) the driver's start-up before it, in ms.
 * What a process started after another compiled the graph pays: on the CPU the first use of
 * the library and of LLVM (host queries), the read and the link; on a GPU the load beyond the
 * driver's start-up (a device copy of 1 MB first, which creates the driver's context). */
static int disk_hit_child(const char *dir, const char *tname) {
    rj_target target = !strcmp(tname, "cuda") ? RJ_TARGET_CUDA : !strcmp(tname, "opencl") ? RJ_TARGET_OPENCL : RJ_TARGET_CPU;
    double c0 = now(), startup = 0;
    rj_ctx *c = rj_ctx_new(NULL, NULL);
    if (!c) return 1;
    rj_ctx_set_cache_dir(c, dir);
    if (target != RJ_TARGET_CPU) {
        double gbs, d0 = now();
        if (rj_device_copy_bandwidth(c, target, 1 << 20, &gbs)) die(c, "device start-up");
        startup = now() - d0;
    }
    rj_dim J;
    rj_node x, w, b;
    rj_graph *g = new_graph(c, 16, &J, &x, &w, &b);
    rj_graph_output(g, build(g, 1, J, x, w, b), "y");
    double c1 = now();
    rj_program *p = rj_program_new(g, target);
    double c2 = now();
    if (!p) die(c, "cache load");
    printf("%.4f %.4f %.4f\n", (c2 - c1) * 1e3, (c2 - c0) * 1e3, startup * 1e3);
    rj_program_free(p);
    rj_graph_free(g);
    rj_ctx_free(c);
    return 0;
}

/* A cache directory of bench's (mkdtemp's) and what is in it. */
static void remove_dir(const char *dir) {
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd)) fprintf(stderr, "bench: could not remove %s\n", dir);
}

/* Entries (files) in dir: a child that compiled instead of loading adds one. */
static int count_entries(const char *dir) {
    DIR *d = opendir(dir);
    int n = 0;
    if (!d) return -1;
    for (struct dirent *e; (e = readdir(d));) n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

typedef struct child_ms {
    double program, from_ctx, startup; /* as disk_hit_child prints them */
} child_ms;

/* Runs bench --disk-hit-child DIR TARGET nc times (at most 9): the medians of its times. False
 * if a child failed, or (hits) if DIR held no entry or a child stored one: it compiled instead
 * of loading. */
static bool child_processes(const char *dir, const char *tname, int nc, bool hits, child_ms *med) {
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0 || nc < 1 || nc > 9) return false;
    self[n] = 0;
    char cmd[4096 + 256];
    snprintf(cmd, sizeof cmd, "'%s' --disk-hit-child '%s' %s", self, dir, tname);
    double a[9], b[9], c[9];
    int before = count_entries(dir);
    for (int i = 0; i < nc; i++) {
        FILE *f = popen(cmd, "r");
        bool ok = f && fscanf(f, "%lf %lf %lf", &a[i], &b[i], &c[i]) == 3;
        if (f && pclose(f) != 0) ok = false;
        if (!ok) return false;
    }
    if (hits && (before <= 0 || count_entries(dir) != before)) return false; /* nothing to load, or a miss */
    *med = (child_ms){median(a, nc), median(b, nc), median(c, nc)};
    return true;
}

/* A device target's persistent cache across processes: a new process compiles into an empty
 * directory, then new processes load from it. */
static void gpu_disk_cache(const char *tname, bool quick) {
    char cdir[] = "/tmp/ragjit-bench-cache-XXXXXX";
    if (!mkdtemp(cdir)) return;
    child_ms miss, hit;
    int nc = quick ? 3 : 9;
    if (child_processes(cdir, tname, 1, false, &miss) && child_processes(cdir, tname, nc, true, &hit))
        printf("disk cache: a new process's first program %.1f ms compiling (an empty cache), %.2f ms loading "
               "(median of %d processes), beyond the driver's start-up (%.1f ms)\n", miss.program, hit.program,
               nc, hit.startup);
    else
        printf("disk cache: a new process did not load from the cache (see above)\n");
    remove_dir(cdir);
}

/* W7, W8, W9 on the device (ragjit's own product kernels: no cuBLAS yet), by the device's
 * timers, in GFLOP/s. W8/W9 take the first B/8 items (their blocks grow as len^2). */
static void gpu_products(rj_ctx *ctx, rj_target target, const setup *s, bool quick) {
    int64_t D = s->D, N = quick ? 64 : 1024, B8 = s->B / 8 > 0 ? s->B / 8 : 1, rows8 = s->off[B8];
    double sq = 0;
    for (int64_t b = 0; b < B8; b++) sq += (double)(s->off[b + 1] - s->off[b]) * (double)(s->off[b + 1] - s->off[b]);
    float *wv = falloc(N * D), *bv = falloc(N);
    for (int64_t i = 0; i < N * D; i++) wv[i] = (float)((int64_t)(next() % 2001) - 1000) / 16000.0f;
    printf("\n%-26s %10s %10s %11s\n", "products", "kernel ms", "GFLOP/s", "copies ms");
    for (int which = 7; which <= 9; which++) {
        rj_graph *g = rj_graph_new(ctx);
        rj_dim Bd = rj_graph_dense(g, "B"), J = rj_graph_ragged(g, "j1", Bd);
        rj_node x = rj_graph_input(g, "x", RJ_F32, 3, (rj_dim[]){Bd, J, D}), y;
        rj_node W = RJ_NONE, b = RJ_NONE;
        if (which == 7) {
            W = rj_graph_input(g, "W", RJ_F32, 2, (rj_dim[]){N, D});
            b = rj_graph_input(g, "b", RJ_F32, 1, (rj_dim[]){N});
            y = rj_graph_unary(g, RJ_OP_RELU, rj_graph_linear(g, x, W, b));
        } else {
            rj_node sc = rj_graph_binary(g, RJ_OP_DIV, rj_graph_matmul(g, x, rj_graph_transpose(g, x, 1, 2)),
                                         rj_graph_scalar(g, sqrt((double)D)));
            y = rj_graph_softmax(g, sc, 2);
            if (which == 9) y = rj_graph_matmul(g, y, x);
        }
        rj_graph_output(g, y, "y");
        wl wk = {.name = which == 7 ? "W7 relu(linear(x,W,b))" : which == 8 ? "W8 softmax(x@xT/16,2)" : "W9 ... @x",
                 .g = g, .out = y, .p = rj_program_new(g, target)};
        if (!wk.p) die(ctx, "product compile");
        wk.b = rj_bind_new(wk.p);
        int64_t B = which == 7 ? s->B : B8, rows = which == 7 ? s->rows : rows8;
        if (rj_bind_offsets(wk.b, J, B, s->off, NULL) || rj_bind_input(wk.b, x, s->x, rows * D) ||
            (which == 7 && (rj_bind_input(wk.b, W, wv, N * D) || rj_bind_input(wk.b, b, bv, N))))
            die(ctx, "product bind");
        double cms = 0, t = time_device(ctx, &wk, quick ? 2 : 5, &cms);
        double flops = which == 7 ? 2.0 * (double)rows * (double)D * (double)N : 2.0 * sq * (double)D * (which == 9 ? 2 : 1);
        printf("%-26s %10.3f %10.1f %11.1f%s\n", wk.name, t * 1e3, flops / t / 1e9, cms,
               which == 7 ? "" : which == 8 ? "   (first B/8 items)" : "");
        rj_bind_free(wk.b);
        rj_program_free(wk.p);
        rj_graph_free(g);
    }
    free(wv), free(bv);
}

/* --dtype on a device: W1..W6 in the 16-bit type against f32, each by the device's timers
 * (median of the reps), the two types alternating run by run so that clocks and temperature
 * are shared; GB/s of unique bytes at 2 bytes an element, and the f32 / 16-bit time ratio
 * (half the bytes: up to 2x where the kernels are bound by memory). */
static void gpu_half_table(rj_ctx *ctx, rj_target target, setup *s, rj_dtype ht, double probe) {
    int64_t n = s->rows * s->D;
    half_inputs(ctx, s, ht);
    printf("\n%s against f32 on the device (kernel time by the device's timers, median of %d, the two "
           "alternating):\n", rj_dtype_name(ht), s->reps);
    printf("%-26s %10s %9s %8s %10s %9s %8s %9s\n", "workload", "f32 ms", "GB/s", "/copy", "16-bit ms", "GB/s",
           "/copy", "f32/16");
    for (int which = 1; which <= 6; which++) {
        wl wk[2] = {make_workload_on(ctx, s, which, RJ_F32, target), make_workload_on(ctx, s, which, ht, target)};
        for (int k = 0; k < 2; k++)
            if (rj_program_run(wk[k].p, wk[k].b)) die(ctx, wk[k].name); /* warm-up */
        double *v = malloc(sizeof(double) * (size_t)s->reps * 2);
        if (!v) die(ctx, "out of memory");
        for (int r = 0; r < s->reps; r++)
            for (int k = 0; k < 2; k++) {
                rj_run_stats st;
                if (rj_program_run(wk[k].p, wk[k].b) || rj_bind_stats(wk[k].b, &st)) die(ctx, wk[k].name);
                v[k * s->reps + r] = st.kernel_ms * 1e-3;
            }
        double t[2] = {median(v, s->reps), median(v + s->reps, s->reps)};
        free(v);
        double N = (double)n, out = which == 4 ? (double)(s->B * s->D) : which == 6 ? (double)(s->B * s->L * s->D) : N;
        double g32 = (N + out) * 4 / t[0] / 1e9, g16 = (N + out) * 2 / t[1] / 1e9;
        printf("%-26s %10.3f %9.1f %8.2f %10.3f %9.1f %8.2f %8.2fx\n", wk[0].name, t[0] * 1e3, g32, g32 / probe,
               t[1] * 1e3, g16, g16 / probe, t[0] / t[1]);
        for (int k = 0; k < 2; k++) rj_bind_free(wk[k].b), rj_program_free(wk[k].p), rj_graph_free(wk[k].g);
    }
    half_inputs_free(s);
}

static int gpu_bench(rj_ctx *ctx, rj_target target, bool quick, int reps, rj_dtype half) {
    const char *tname = target == RJ_TARGET_CUDA ? "cuda" : "opencl";
    setup s = {.B = quick ? 64 : 2048, .D = quick ? 32 : 256, .reps = reps ? reps : (quick ? 2 : 10)};
    int64_t maxlen = quick ? 128 : 1024;
    make_lengths(&s, maxlen, false);
    int64_t n = s.rows * s.D;
    s.x = falloc(n);
    s.w = falloc(s.D);
    s.bias = falloc(s.D);
    for (int64_t i = 0; i < n; i++) s.x[i] = (float)((int64_t)(next() % 2001) - 1000) / 500.0f;
    for (int64_t i = 0; i < s.D; i++) s.w[i] = 1.0f + (float)i / (float)s.D, s.bias[i] = 0.25f;
    double probe = 0;
    rj_status ps = rj_device_copy_bandwidth(ctx, target, n * 4, &probe);
    if (ps == RJ_ERR_NO_DEVICE) { /* 77: meson's "skipped" */
        printf("bench --target %s: skipped: %s\n", tname, rj_ctx_error(ctx));
        free(s.off), free(s.x), free(s.w), free(s.bias);
        return 77;
    }
    if (ps) die(ctx, "copy probe");
    printf("ragjit bench --target %s: B=%lld, lengths 1..%lld (total %lld rows), D=%lld, f32 (%.2f GB a "
           "tensor), median of %d%s\n", tname, (long long)s.B, (long long)maxlen, (long long)s.rows,
           (long long)s.D, (double)n * 4 / 1e9, s.reps, quick ? " (QUICK: numbers are meaningless)" : "");
    printf("device copy probe (same run, one tensor): %.1f GB/s (read + write)\n\n", probe);
    resident res = {0};
    res.x = to_device(ctx, target, s.x, n, false, &res.keep[0], &res.prog[0], &res.graph[0]);
    res.w = to_device(ctx, target, s.w, s.D, false, &res.keep[1], &res.prog[1], &res.graph[1]);
    res.bias = to_device(ctx, target, s.bias, s.D, false, &res.keep[2], &res.prog[2], &res.graph[2]);
    res.off = to_device(ctx, target, s.off, s.B + 1, true, &res.keep[3], &res.prog[3], &res.graph[3]);
    printf("%-26s %10s %9s %8s %11s %8s %13s\n", "workload", "kernel ms", "GB/s", "/copy", "copies ms", "kernels",
           "resident ms");
    double t_uniform[7] = {0};
    for (int which = 1; which <= 8; which++) {
        int w = which <= 6 ? which : which == 7 ? 2 : 4;
        setup *sp = &s, sl;
        float *xl = NULL;
        if (which > 6) { /* one long item, the same total rows */
            sl = s;
            make_lengths(&sl, maxlen, true);
            xl = falloc(sl.rows * sl.D);
            for (int64_t i = 0; i < sl.rows * sl.D; i++) xl[i] = s.x[i % n];
            sl.x = xl;
            sp = &sl;
        }
        double N = (double)sp->rows * (double)sp->D;
        wl wk = {0};
        rj_dim J;
        rj_node x, wv, bv;
        wk.name = which <= 6 ? NULL : which == 7 ? "W2 softmax, 1 long item" : "W4 sum, 1 long item";
        wk.g = new_graph(ctx, sp->D, &J, &x, &wv, &bv);
        wk.out = build(wk.g, w, J, x, wv, bv);
        if (rj_graph_output(wk.g, wk.out, "y") != RJ_OK) die(ctx, "output");
        if (!(wk.p = rj_program_new(wk.g, target))) die(ctx, "compile");
        wk.b = rj_bind_new(wk.p);
        if (!wk.b || rj_bind_offsets(wk.b, J, sp->B, sp->off, NULL) || rj_bind_input(wk.b, x, sp->x, sp->rows * sp->D) ||
            rj_bind_input(wk.b, wv, sp->w, sp->D) || rj_bind_input(wk.b, bv, sp->bias, sp->D))
            die(ctx, "bind");
        static const char *const names[] = {"", "W1 relu(x*w+b)", "W2 softmax(x,1)", "W3 unpad(pad(x)*2+1)",
                                            "W4 sum(x,1)", "W5 layer_norm(x,D)", "W6 pad(x) output"};
        if (!wk.name) wk.name = names[w];
        double cms = 0, t = time_device(ctx, &wk, sp->reps, &cms);
        double out_elems = w == 4 ? (double)(sp->B * sp->D) : w == 6 ? (double)(sp->B * sp->L * sp->D) : N;
        double gbs = (N + out_elems) * 4 / t / 1e9;
        rj_run_stats st = {0};
        rj_bind_stats(wk.b, &st);
        printf("%-26s %10.3f %9.1f %8.2f %11.1f %8d", wk.name, t * 1e3, gbs, gbs / probe, cms, st.kernels);
        if (which <= 6) { /* the same run on device memory: wall time per run against kernel time */
            double ks = 0, rt = time_resident(ctx, &wk, sp, &res, J, x, wv, bv, &ks);
            printf(" %7.3f (%+.1f us)", rt * 1e3, (rt - ks) * 1e6);
        }
        if (which <= 6) t_uniform[w] = t;
        else printf("   %.2fx the uniform time", t / t_uniform[w]);
        printf("\n");
        rj_bind_free(wk.b);
        rj_program_free(wk.p);
        rj_graph_free(wk.g);
        if (xl) free(xl), free(sl.off);
    }
    printf("\nresident ms: wall time per run with every buffer in device memory and trusted offsets "
           "(run + rj_bind_wait), and its excess over the kernels' time\n");
    if (half != RJ_F32) gpu_half_table(ctx, target, &s, half, probe);
    gpu_products(ctx, target, &s, quick);
    /* host overhead of a tiny device-resident run (B = 8, D = 16) */
    {
        setup tiny = {.B = 8, .D = 16, .reps = 2000};
        int64_t toff[9] = {0, 1, 3, 4, 8, 9, 12, 14, 16};
        float tx[16 * 16], tw[16], tb[16];
        for (int i = 0; i < 256; i++) tx[i] = (float)i;
        for (int i = 0; i < 16; i++) tw[i] = 1, tb[i] = 0;
        tiny.off = toff, tiny.rows = 16, tiny.L = 4;
        resident tr = {0};
        tr.x = to_device(ctx, target, tx, 256, false, &tr.keep[0], &tr.prog[0], &tr.graph[0]);
        tr.w = to_device(ctx, target, tw, 16, false, &tr.keep[1], &tr.prog[1], &tr.graph[1]);
        tr.bias = to_device(ctx, target, tb, 16, false, &tr.keep[2], &tr.prog[2], &tr.graph[2]);
        tr.off = to_device(ctx, target, toff, 9, true, &tr.keep[3], &tr.prog[3], &tr.graph[3]);
        wl wk = {.name = "tiny"};
        rj_dim J;
        rj_node x, wv, bv;
        wk.g = new_graph(ctx, tiny.D, &J, &x, &wv, &bv);
        wk.out = build(wk.g, 1, J, x, wv, bv);
        rj_graph_output(wk.g, wk.out, "y");
        if (!(wk.p = rj_program_new(wk.g, target))) die(ctx, "tiny");
        double ks = 0, rt = time_resident(ctx, &wk, &tiny, &tr, J, x, wv, bv, &ks);
        printf("tiny device-resident run (B=8, D=16, trusted offsets): %.1f us per run, kernels %.1f us, "
               "host overhead %.1f us (median of %d)\n", rt * 1e6, ks * 1e6, (rt - ks) * 1e6, tiny.reps);
        rj_program_free(wk.p);
        rj_graph_free(wk.g);
        resident_free(&tr);
    }
    gpu_disk_cache(tname, quick);
    resident_free(&res);
    free(s.off), free(s.x), free(s.w), free(s.bias);
    return 0;
}

/* A whole-string integer in lo..hi, or -1: atoi read "x" as 0 and "-5" as a count. */
static int count_arg(const char *s, int lo, int hi) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    return errno || end == s || *end || v < lo || v > hi ? -1 : (int)v;
}

/* "W2,W8" -> bits 2 and 8; 0 for a malformed list */
static unsigned only_arg(const char *s) {
    unsigned m = 0;
    while (*s) {
        if (*s != 'W' || s[1] < '1' || s[1] > '9' || (s[2] && s[2] != ',')) return 0;
        m |= 1u << (s[1] - '0');
        s += s[2] ? 3 : 2;
    }
    return m;
}

/* The load average beside the figures (when: "before" or "after"): on a machine whose other
 * processes want more processors than it has, absolute times and GB/s are the load's, and only
 * the same-run ratios say something about ragjit (bench/NOTES.md's loaded sections). */
static void print_load(const char *when) {
    double l[3];
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    FILE *f = fopen("/proc/loadavg", "r");
    if (!f) return;
    if (fscanf(f, "%lf %lf %lf", &l[0], &l[1], &l[2]) == 3)
        printf("load average %s: %.2f %.2f %.2f on %ld processors%s\n", when, l[0], l[1], l[2], ncpu,
               l[0] > (double)ncpu + 0.5 ? " (LOADED: read only the same-run ratios)" : "");
    fclose(f);
}

int main(int argc, char **argv) {
    bool quick = false;
    unsigned only = ~0u;
    int threads = 0, reps = 0;
    rj_target target = RJ_TARGET_CPU;
    rj_dtype half = RJ_F32; /* --dtype: a 16-bit type also measured against f32 (half_table) */
    if (argc == 4 && !strcmp(argv[1], "--disk-hit-child")) return disk_hit_child(argv[2], argv[3]);
    /* The probes and C loops run on OpenMP (libgomp), whose idle threads spin by default after a
     * parallel loop, on the very processors ragjit's run after it needs: W1 took 1.25x longer on
     * 2 threads (9.1 ms against 7.3, f32 and bf16 alike), ragjit's worker sharing its core with
     * a spinning OpenMP thread. libgomp reads the policy once, before main: so bench starts
     * itself again with idle OpenMP threads asleep, as ragjit's own workers sleep, unless the
     * caller chose a policy. */
    if (!getenv("OMP_WAIT_POLICY")) {
        setenv("OMP_WAIT_POLICY", "passive", 1);
        execv("/proc/self/exe", argv); /* on failure, go on as started */
    }
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick")) quick = true;
        else if (!strcmp(argv[i], "--target") && i + 1 < argc) {
            const char *t = argv[++i];
            if (!strcmp(t, "cpu")) target = RJ_TARGET_CPU;
            else if (!strcmp(t, "cuda")) target = RJ_TARGET_CUDA;
            else if (!strcmp(t, "opencl")) target = RJ_TARGET_OPENCL;
            else {
                fprintf(stderr, "bench: --target is cpu, cuda or opencl, not '%s'\n", t);
                return 2;
            }
        }
        else if (!strcmp(argv[i], "--dtype") && i + 1 < argc) {
            const char *t = argv[++i];
            if (!strcmp(t, "bf16")) half = RJ_BF16;
            else if (!strcmp(t, "f16")) half = RJ_F16;
            else if (strcmp(t, "f32")) {
                fprintf(stderr, "bench: --dtype is f32, bf16 or f16, not '%s'\n", t);
                return 2;
            }
        } else if (!strcmp(argv[i], "--threads") || !strcmp(argv[i], "--reps")) {
            bool t = argv[i][2] == 't';
            int v = i + 1 < argc ? count_arg(argv[++i], 1, t ? 4096 : 1000000) : -1;
            if (v < 0) {
                fprintf(stderr, "bench: %s needs an integer in 1..%d\n", t ? "--threads" : "--reps",
                        t ? 4096 : 1000000);
                return 2;
            }
            *(t ? &threads : &reps) = v;
        } else if (!strcmp(argv[i], "--only") && i + 1 < argc) {
            if (!(only = only_arg(argv[++i]))) {
                fprintf(stderr, "bench: --only takes workloads like W2,W8, not '%s'\n", argv[i]);
                return 2;
            }
        } else {
            fprintf(stderr, "usage: bench [--quick] [--threads N] [--reps N] [--only W2,W8,...] [--target cpu|cuda|opencl] "
                            "[--dtype bf16|f16]\n");
            return 2;
        }
    }
    rj_ctx *ctx = rj_ctx_new(NULL, NULL);
    if (!ctx) return 1;
    rj_ctx_set_cache_dir(ctx, ""); /* compile times are compiles, not loads from disk */
    if (threads > 0) rj_ctx_set_threads(ctx, threads);
    if (target != RJ_TARGET_CPU) {
        int r = gpu_bench(ctx, target, quick, reps, half);
        rj_ctx_free(ctx);
        return r;
    }
    setup s = {.B = quick ? 16 : 256, .D = quick ? 32 : 256, .reps = reps ? reps : (quick ? 2 : 15)};
    int64_t maxlen = quick ? 64 : 1024;
    s.threads = threads > 0 ? threads : affinity_cpus(); /* the library's default, quota aside */

    /* compile latency of the very first program (includes LLVM's set-up in the process) */
    setup tiny = {.B = 8, .D = 16};
    rj_dim J;
    rj_node x, w, b;
    rj_graph *g0 = new_graph(ctx, tiny.D, &J, &x, &w, &b);
    rj_graph_output(g0, build(g0, 1, J, x, w, b), "y");
    double t0 = now();
    rj_program *p0 = rj_program_new(g0, RJ_TARGET_CPU);
    double first_ms = (now() - t0) * 1e3;
    if (!p0) die(ctx, "first compile");

    s.off = malloc(sizeof(int64_t) * (size_t)(s.B + 1));
    s.off[0] = 0;
    for (int64_t i = 0; i < s.B; i++) {
        int64_t len = 1 + (int64_t)(next() % (uint64_t)maxlen);
        s.off[i + 1] = s.off[i] + len;
        if (len > s.L) s.L = len;
    }
    s.rows = s.off[s.B];
    s.x = falloc(s.rows * s.D);
    s.w = falloc(s.D);
    s.bias = falloc(s.D);
    for (int64_t i = 0; i < s.rows * s.D; i++) s.x[i] = (float)((int64_t)(next() % 2001) - 1000) / 500.0f;
    for (int64_t i = 0; i < s.D; i++) s.w[i] = 1.0f + (float)i / (float)s.D, s.bias[i] = 0.25f;
    double N = (double)s.rows * (double)s.D;
    printf("ragjit bench: B=%lld, lengths 1..%lld (total %lld rows), D=%lld, f32, %d threads, "
           "median of %d%s\nBLAS: %s\nOMP_WAIT_POLICY=%s (the probes' and C loops' idle threads)\n\n",
           (long long)s.B, (long long)maxlen, (long long)s.rows, (long long)s.D, s.threads, s.reps,
           quick ? " (QUICK: numbers are meaningless)" : "", rj_blas_info(), getenv("OMP_WAIT_POLICY"));
    print_load("before");

    probes pr = {.n = s.rows * s.D, .threads = s.threads};
    pr.a = falloc(pr.n), pr.b = falloc(pr.n), pr.c = falloc(pr.n);
    for (int64_t i = 0; i < pr.n; i++) pr.b[i] = (float)i, pr.c[i] = 1;
    bw m = bandwidth(&s, &pr);
    probe_kind copy_kind = m.copy > m.copy_nt ? P_COPY : P_COPY_NT; /* the better copy */
    printf("memory bandwidth (same run, %.0f MB arrays): copy %.2f GB/s, copy-nt %.2f GB/s, "
           "triad %.2f GB/s, triad-nt %.2f GB/s, read %.2f GB/s\n\n", N * 4 / 1e6, m.copy, m.copy_nt,
           m.triad, m.triad_nt, m.read);

    printf("%-24s %9s %8s %9s %9s %9s %8s %9s\n", "workload", "time ms", "GB/s", "/copy",
           "/triadnt", "C ms", "/C loop", "compile");
    static const base_fn bases[] = {NULL, b1, b2, b3, b4, b5, b6};
    double per_kernel[6], w4_read = 0, w4_ratio = 0;
    int compile_n = 0;
    for (int which = 1; which <= 6; which++) {
        if (!(only >> which & 1)) continue;
        wl wk = make_workload(ctx, &s, which);
        double out_elems = which == 4 ? (double)(s.B * s.D) : which == 6 ? (double)(s.B * s.L * s.D) : N;
        double bytes = (N + out_elems) * 4;
        const probe_kind kinds[] = {copy_kind, P_TRIAD_NT, P_READ};
        double ratio[3];
        double t = paired_ratios(ctx, &wk, s.reps, bytes, &pr, kinds, which == 4 ? 3 : 2, ratio);
        float *y = falloc((int64_t)out_elems);
        double tc = time_base(&s, bases[which], y);
        free(y);
        double gbs = bytes / t / 1e9;
        printf("%-24s %9.3f %8.2f %9.2f %9.2f %9.3f %8.2f %6.1f ms/%dk\n", wk.name, t * 1e3, gbs, ratio[0],
               ratio[1], tc * 1e3, tc / t, wk.compile_ms, wk.kernels);
        per_kernel[compile_n++] = wk.compile_ms / (wk.kernels ? wk.kernels : 1);
        if (which == 4) w4_read = N * 4 / t / 1e9, w4_ratio = ratio[2] * (N * 4) / bytes;
        if (which == 4) w4_breakdown(ctx, &wk, &s, &pr);
        rj_bind_free(wk.b);
        rj_program_free(wk.p);
        rj_graph_free(wk.g);
    }

    if (only >> 4 & 1)
        printf("\nW4 only reads (its output is 1/%lld of its input): %.2f GB/s of reads = %.2fx the "
               "read probe\n", (long long)(s.rows / s.B), w4_read, w4_ratio);

    if (half != RJ_F32) {
        half_inputs(ctx, &s, half);
        half_table(ctx, &s, &pr, copy_kind, only, quick ? 64 : 1024, quick ? 2 : 5);
        half_inputs_free(&s);
    }

    if (only >> 7 & 1) w7(ctx, &s, quick ? 64 : 1024, quick ? 2 : 5);
    if (only & (3u << 8)) w89(ctx, &s, quick ? 2 : 3);

    /* compile latency: later programs, cache hits */
    double hits[200];
    int nh = quick ? 20 : 200;
    for (int i = 0; i < nh; i++) {
        double h0 = now();
        rj_program *p = rj_program_new(g0, RJ_TARGET_CPU);
        hits[i] = now() - h0;
        if (!p) die(ctx, "cache hit");
        rj_program_free(p);
    }
    double mean_kernel = 0;
    for (int i = 0; i < compile_n; i++) mean_kernel += per_kernel[i] / compile_n;
    printf("compile latency: first program %.1f ms (LLVM's set-up in the process included); later "
           "programs %.1f ms per fused kernel (median of W1..W6; mean %.1f); cache hit %.2f us (median of %d)\n",
           first_ms, median(per_kernel, compile_n), mean_kernel, median(hits, nh) * 1e6, nh);

    /* the persistent cache: g0's kernel written to a fresh directory by one context, then
     * loaded by fresh contexts (each with its own JIT, as a new process has), then by new
     * processes */
    char cdir[] = "/tmp/ragjit-bench-cache-XXXXXX";
    if (mkdtemp(cdir)) {
        double first[9], warm[9];
        int nc = quick ? 3 : 9;
        rj_ctx *cw = rj_ctx_new(NULL, NULL);
        rj_ctx_set_cache_dir(cw, cdir);
        rj_graph *gw = new_graph(cw, tiny.D, &J, &x, &w, &b);
        rj_graph_output(gw, build(gw, 1, J, x, w, b), "y");
        rj_program_free(rj_program_new(gw, RJ_TARGET_CPU));
        rj_graph_free(gw);
        rj_ctx_free(cw);
        for (int i = 0; i < nc; i++) {
            rj_ctx *c2 = rj_ctx_new(NULL, NULL);
            rj_ctx_set_cache_dir(c2, cdir);
            rj_graph *g2 = new_graph(c2, tiny.D, &J, &x, &w, &b);
            rj_graph_output(g2, build(g2, 1, J, x, w, b), "y");
            double c0 = now();
            rj_program *p2 = rj_program_new(g2, RJ_TARGET_CPU);
            first[i] = now() - c0;
            if (!p2) die(c2, "cache load");
            rj_program_free(p2);
            /* again in a context that compiled before (W3's kernel: in the cache after the first) */
            rj_graph *g3 = new_graph(c2, tiny.D, &J, &x, &w, &b);
            rj_graph_output(g3, build(g3, 3, J, x, w, b), "y");
            rj_program_free(rj_program_new(g3, RJ_TARGET_CPU));
            rj_graph_free(g3);
            rj_ctx *c3 = rj_ctx_new(NULL, NULL);
            rj_ctx_set_cache_dir(c3, "");
            rj_graph *g4 = new_graph(c3, tiny.D, &J, &x, &w, &b);
            rj_graph_output(g4, build(g4, 1, J, x, w, b), "y");
            rj_program_free(rj_program_new(g4, RJ_TARGET_CPU)); /* creates c3's JIT */
            rj_ctx_set_cache_dir(c3, cdir);
            g3 = new_graph(c3, tiny.D, &J, &x, &w, &b);
            rj_graph_output(g3, build(g3, 3, J, x, w, b), "y");
            c0 = now();
            p2 = rj_program_new(g3, RJ_TARGET_CPU);
            warm[i] = now() - c0;
            if (!p2) die(c3, "cache load");
            rj_program_free(p2);
            rj_graph_free(g3);
            rj_graph_free(g4);
            rj_ctx_free(c3);
            rj_graph_free(g2);
            rj_ctx_free(c2);
        }
        printf("disk cache: hit %.2f ms in a context that compiled before, %.2f ms as the first "
               "program of a fresh context (its code generator's state created; medians of %d)\n",
               median(warm, nc) * 1e3, median(first, nc) * 1e3, nc);
        child_ms hm;
        if (child_processes(cdir, "cpu", nc, true, &hm))
            printf("disk cache: hit %.2f ms as the first program of a new process (the library's "
                   "first use included; %.2f ms from rj_ctx_new on; medians of %d processes)\n",
                   hm.program, hm.from_ctx, nc);
        else
            printf("disk cache: a new process did not load from the cache (see above)\n");
        remove_dir(cdir);
    }

    /* dispatch overhead: a tiny run */
    rj_graph *gt = new_graph(ctx, tiny.D, &J, &x, &w, &b);
    rj_node yt = build(gt, 1, J, x, w, b);
    rj_graph_output(gt, yt, "y");
    rj_program *pt = rj_program_new(gt, RJ_TARGET_CPU);
    if (!pt) die(ctx, "tiny compile");
    int64_t toff[9] = {0, 1, 3, 4, 8, 9, 12, 14, 16};
    float tx[16 * 16], tw[16], tb[16], ty[16 * 16];
    for (int i = 0; i < 256; i++) tx[i] = (float)i;
    for (int i = 0; i < 16; i++) tw[i] = 1, tb[i] = 0;
    rj_bind *bt = rj_bind_new(pt);
    if (rj_bind_offsets(bt, J, 8, toff, NULL) || rj_bind_input(bt, x, tx, 256) ||
        rj_bind_input(bt, w, tw, 16) || rj_bind_input(bt, b, tb, 16) || rj_bind_output(bt, yt, ty, 256))
        die(ctx, "tiny bind");
    int nd = quick ? 1000 : 20000;
    double *dt = malloc(sizeof(double) * (size_t)nd);
    for (int i = 0; i < nd; i++) {
        double d0 = now();
        if (rj_program_run(pt, bt)) die(ctx, "tiny run");
        dt[i] = now() - d0;
    }
    printf("dispatch: tiny run (B=8, D=16, 16 rows) %.2f us (median of %d)\n", median(dt, nd) * 1e6, nd);
    free(dt);
    rj_bind_free(bt);
    rj_program_free(pt);
    rj_graph_free(gt);
    rj_program_free(p0);
    rj_graph_free(g0);
    free(s.off), free(s.x), free(s.w), free(s.bias);
    free(pr.a), free(pr.b), free(pr.c);
    rj_ctx_free(ctx);
    print_load("after");
    return 0;
}
