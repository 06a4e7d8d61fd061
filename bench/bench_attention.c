/*
 * bench_attention.c — the fused attention kernel on a RACE-like batch (issue 35).
 *
 * B = 32 items with lengths drawn to match RACE's published statistics (min/max 80/512,
 * p10/p50/p90 210/374/502: a piecewise-linear inverse CDF through those quantiles), E = Dv = 64.
 * In one run, on the same threads:
 *   fused     softmax(q @ kᵀ * 0.125, dim=2) @ v, which the compiler turns into one
 *             online-softmax kernel (nothing of len x len written);
 *   unfused   the same with the weights p also an output, so the pattern does not apply and the
 *             product, the softmax and the second product run as before (p written as it always
 *             was, as a temporary or an output);
 *   BLAS      the BLAS's sgemm doing the same two products per item (q kᵀ, then that times v)
 *             with nothing else: the machine's GEMM throughput on these shapes.
 * Useful GFLOP/s count the two products only, 4 Σ len² E, for all three.
 *
 *   bench_attention [--threads N] [--reps N]
 */
#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ragjit.h"

enum { B = 32, E = 64 };

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static uint64_t rng = 35;
static double uniform(void) {
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(rng >> 11) / 9007199254740992.0;
}

/* RACE-like lengths: the inverse CDF through (0, 80), (.1, 210), (.5, 374), (.9, 502), (1, 512). */
static int64_t race_length(void) {
    static const double q[] = {0, 0.1, 0.5, 0.9, 1}, v[] = {80, 210, 374, 502, 512};
    double u = uniform();
    int i = 0;
    while (i < 3 && u > q[i + 1]) i++;
    return (int64_t)(v[i] + (v[i + 1] - v[i]) * (u - q[i]) / (q[i + 1] - q[i]) + 0.5);
}

typedef void (*sgemm_fn)(int, int, int, int, int, int, float, const float *, int, const float *, int, float,
                         float *, int);

/* The BLAS ragjit loads (rj_blas_info: "... (soname)"), for the same-run comparison. */
static sgemm_fn load_sgemm(int threads) {
    const char *info = rj_blas_info(), *l = strrchr(info, '('), *r = l ? strchr(l, ')') : NULL;
    if (!strncmp(info, "none", 4) || !l || !r) return NULL;
    char name[256];
    snprintf(name, sizeof name, "%.*s", (int)(r - l - 1), l + 1);
    void *h = dlopen(name, RTLD_NOW | RTLD_LOCAL), *sym = h ? dlsym(h, "cblas_sgemm") : NULL;
    void *th = h ? dlsym(h, "openblas_set_num_threads") : NULL;
    if (th) {
        void (*set)(int);
        memcpy(&set, &th, sizeof set);
        set(threads);
    }
    if (!sym) return NULL;
    sgemm_fn sg;
    memcpy(&sg, &sym, sizeof sg);
    return sg;
}

typedef struct prog {
    rj_graph *g;
    rj_program *p;
    rj_bind *b;
} prog;

static prog make(rj_ctx *ctx, bool fused, const int64_t *off, int64_t rows, const float *q, const float *k,
                 const float *v) {
    char src[512];
    snprintf(src, sizeof src,
             "ragged j1 : B\ninput q : f32[B, j1, %d]\ninput k : f32[B, j1, %d]\ninput v : f32[B, j1, %d]\n"
             "p = softmax(q @ k.transpose(1, 2) * 0.125, dim=2)\nout = p @ v\noutput out%s\n",
             E, E, E, fused ? "" : ", p");
    prog r = {.g = rj_graph_parse(ctx, src, "bench.rj")};
    if (!r.g || !(r.p = rj_program_new(r.g, RJ_TARGET_CPU)) || !(r.b = rj_bind_new(r.p)) ||
        rj_bind_offsets(r.b, rj_graph_find_dim(r.g, "j1"), B, off, NULL) ||
        rj_bind_input(r.b, rj_graph_find(r.g, "q"), q, rows * E) ||
        rj_bind_input(r.b, rj_graph_find(r.g, "k"), k, rows * E) ||
        rj_bind_input(r.b, rj_graph_find(r.g, "v"), v, rows * E)) {
        fprintf(stderr, "bench_attention: %s\n", rj_ctx_error(ctx));
        exit(1);
    }
    return r;
}

static double median_run(rj_ctx *ctx, prog *p, int reps) {
    double t[64];
    if (rj_program_run(p->p, p->b)) { /* warm-up */
        fprintf(stderr, "bench_attention: %s\n", rj_ctx_error(ctx));
        exit(1);
    }
    for (int i = 0; i < reps; i++) {
        double t0 = now();
        rj_program_run(p->p, p->b);
        t[i] = now() - t0;
    }
    qsort(t, (size_t)reps, sizeof t[0], cmp_double);
    return t[reps / 2];
}

static double median_blas(sgemm_fn sg, const int64_t *off, const float *q, const float *k, const float *v,
                          float *s, float *o, int reps) {
    double t[64];
    for (int rep = -1; rep < reps; rep++) {
        double t0 = now();
        for (int b = 0; b < B; b++) {
            int n = (int)(off[b + 1] - off[b]);
            const float *qb = q + off[b] * E, *kb = k + off[b] * E, *vb = v + off[b] * E;
            /* CblasRowMajor 101, CblasNoTrans 111, CblasTrans 112 */
            sg(101, 111, 112, n, n, E, 1.0f, qb, E, kb, E, 0.0f, s, n);
            sg(101, 111, 111, n, E, n, 1.0f, s, n, vb, E, 0.0f, o + off[b] * E, E);
        }
        if (rep >= 0) t[rep] = now() - t0;
    }
    qsort(t, (size_t)reps, sizeof t[0], cmp_double);
    return t[reps / 2];
}

int main(int argc, char **argv) {
    int threads = 1, reps = 9;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--threads")) threads = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--reps")) reps = atoi(argv[i + 1]);
    }
    if (reps < 1) reps = 1;
    if (reps > 64) reps = 64;
    int64_t off[B + 1] = {0}, maxlen = 0, lens[B];
    double sq = 0;
    for (int b = 0; b < B; b++) {
        lens[b] = race_length();
        off[b + 1] = off[b] + lens[b];
        sq += (double)lens[b] * (double)lens[b];
        if (lens[b] > maxlen) maxlen = lens[b];
    }
    int64_t rows = off[B];
    float *q = malloc(sizeof(float) * (size_t)(rows * E)), *k = malloc(sizeof(float) * (size_t)(rows * E));
    float *v = malloc(sizeof(float) * (size_t)(rows * E)), *o = malloc(sizeof(float) * (size_t)(rows * E));
    float *s = malloc(sizeof(float) * (size_t)(maxlen * maxlen));
    for (int64_t i = 0; i < rows * E; i++) q[i] = (float)(uniform() * 2 - 1), k[i] = (float)(uniform() * 2 - 1),
                                           v[i] = (float)(uniform() * 2 - 1);
    rj_ctx *ctx = rj_ctx_new(NULL, NULL);
    rj_ctx_set_threads(ctx, threads);
    double flops = 4.0 * sq * E;
    printf("fused attention, RACE-like lengths: B=%d, E=Dv=%d, %lld rows (max %lld), sum len^2 = %.3g; "
           "%d thread(s), median of %d; BLAS: %s\n", B, E, (long long)rows, (long long)maxlen, sq, threads, reps,
           rj_blas_info());
    prog f = make(ctx, true, off, rows, q, k, v), u = make(ctx, false, off, rows, q, k, v);
    double tf = median_run(ctx, &f, reps), tu = median_run(ctx, &u, reps);
    rj_run_stats st;
    rj_bind_stats(f.b, &st);
    printf("%-34s %9.3f ms %8.2f GFLOP/s  (temporaries %lld bytes)\n", "fused (found by the compiler)", tf * 1e3,
           flops / tf / 1e9, (long long)st.temp_bytes);
    rj_bind_stats(u.b, &st);
    printf("%-34s %9.3f ms %8.2f GFLOP/s  (temporaries %lld bytes; p written)\n", "unfused (p also an output)",
           tu * 1e3, flops / tu / 1e9, (long long)st.temp_bytes);
    sgemm_fn sg = load_sgemm(threads);
    if (sg) {
        double tb = median_blas(sg, off, q, k, v, s, o, reps);
        printf("%-34s %9.3f ms %8.2f GFLOP/s\n", "BLAS sgemm, the two products", tb * 1e3, flops / tb / 1e9);
        printf("fused / BLAS throughput: %.2f; fused / unfused time: %.2f\n", tb / tf, tf / tu);
    } else {
        printf("no BLAS: %s\n", rj_blas_info());
    }
    rj_bind_free(f.b), rj_bind_free(u.b);
    rj_program_free(f.p), rj_program_free(u.p);
    rj_graph_free(f.g), rj_graph_free(u.g);
    rj_ctx_free(ctx);
    free(q), free(k), free(v), free(o), free(s);
    return 0;
}
