/*
 * bench_attention.c — the fused attention kernel on a RACE-like batch (issue 35).
 *
 * B = 32 items with lengths drawn to match RACE's published statistics (min/max 80/512,
 * p10/p50/p90 210/374/502: a piecewise-linear inverse CDF through those quantiles), E = Dv = 64,
 * H heads (default 8, as CoRa's MHA module): q, k and v are the heads of one packed [B, j1, 3·H·E]
 * projection output (split, view, transpose(1, 2)), which the kernels read in place; --heads 1
 * takes three [B, j1, E] inputs instead. In one run, on the same threads:
 *   fused     softmax(q @ kᵀ * 0.125, dim=-1) @ v, which the compiler turns into one fused
 *             attention kernel (nothing of len x len written to memory);
 *   unfused   the same with the weights p also an output, so the pattern does not apply and the
 *             product, the softmax and the second product run as before (p written as it always
 *             was, as a temporary or an output);
 *   BLAS      the BLAS's sgemm doing the same two products per item and head (q kᵀ, then that
 *             times v, the head's columns read with their leading dimension) with nothing else:
 *             the machine's GEMM throughput on these shapes.
 * Useful GFLOP/s count the two products only, 4 Σ len² E H, for all three. The fused run's
 * extra memory is the peak of what ragjit holds through the context's allocator during its
 * first run beyond what it held before (temporaries, chunk buffers, packing scratch), beside
 * the output's size.
 *
 *   bench_attention [--threads N] [--reps N] [--heads H] [--unfused 0]   (0: skip the unfused run)
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

static int H = 8; /* heads; 1: three [B, j1, E] inputs */

/* The context's allocator, counting: what ragjit holds now and at most since the last reset. */
static size_t held, peak;
static void *counting_alloc(void *ud, void *ptr, size_t osize, size_t nsize) {
    (void)ud;
    if (ptr) held -= osize;
    if (nsize == 0) {
        free(ptr);
        return NULL;
    }
    void *r = realloc(ptr, nsize);
    held += r ? nsize : ptr ? osize : 0;
    if (held > peak) peak = held;
    return r;
}

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

/* q, k, v: the packed [rows, 3·H·E] projection (H > 1), or three [rows, E] inputs. */
static prog make(rj_ctx *ctx, bool fused, const int64_t *off, int64_t rows, const float *q, const float *k,
                 const float *v) {
    char src[1024];
    const char *tail = fused ? "" : ", p";
    if (H == 1)
        snprintf(src, sizeof src,
                 "ragged j1 : B\ninput q : f32[B, j1, %d]\ninput k : f32[B, j1, %d]\ninput v : f32[B, j1, %d]\n"
                 "p = softmax(q @ k.transpose(1, 2) * 0.125, dim=2)\nout = p @ v\noutput out%s\n", E, E, E, tail);
    else
        snprintf(src, sizeof src,
                 "ragged j1 : B\ninput x : f32[B, j1, %d]\nq, k, v = x.split(%d, dim=-1)\n"
                 "q = q.view(B, j1, %d, %d).transpose(1, 2)\nk = k.view(B, j1, %d, %d).transpose(1, 2)\n"
                 "v = v.view(B, j1, %d, %d).transpose(1, 2)\n"
                 "p = softmax(q @ k.transpose(-2, -1) * 0.125, dim=-1)\nout = p @ v\noutput out%s\n",
                 3 * H * E, H * E, H, E, H, E, H, E, tail);
    prog r = {.g = rj_graph_parse(ctx, src, "bench.rj")};
    bool ok = r.g && (r.p = rj_program_new(r.g, RJ_TARGET_CPU)) && (r.b = rj_bind_new(r.p)) &&
              !rj_bind_offsets(r.b, rj_graph_find_dim(r.g, "j1"), B, off, NULL);
    if (ok && H == 1)
        ok = !rj_bind_input(r.b, rj_graph_find(r.g, "q"), q, rows * E) &&
             !rj_bind_input(r.b, rj_graph_find(r.g, "k"), k, rows * E) &&
             !rj_bind_input(r.b, rj_graph_find(r.g, "v"), v, rows * E);
    else if (ok)
        ok = !rj_bind_input(r.b, rj_graph_find(r.g, "x"), q, rows * 3 * H * E);
    if (!ok) {
        fprintf(stderr, "bench_attention: %s\n", rj_ctx_error(ctx));
        exit(1);
    }
    return r;
}

static double median_run(rj_ctx *ctx, prog *p, int reps, size_t *extra) {
    double t[64];
    size_t before = held;
    peak = held;
    if (rj_program_run(p->p, p->b)) { /* warm-up */
        fprintf(stderr, "bench_attention: %s\n", rj_ctx_error(ctx));
        exit(1);
    }
    *extra = peak - before;
    for (int i = 0; i < reps; i++) {
        double t0 = now();
        rj_program_run(p->p, p->b);
        t[i] = now() - t0;
    }
    qsort(t, (size_t)reps, sizeof t[0], cmp_double);
    return t[reps / 2];
}

/* ld: the row stride of q, k and v (3·H·E packed, or E), with head h's columns at h·E of q's
 * part and k's and v's at H·E and 2·H·E after it. */
static double median_blas(sgemm_fn sg, const int64_t *off, const float *q, const float *k, const float *v,
                          float *s, float *o, int reps) {
    double t[64];
    int ld = H == 1 ? E : 3 * H * E;
    for (int rep = -1; rep < reps; rep++) {
        double t0 = now();
        for (int b = 0; b < B; b++)
            for (int h = 0; h < H; h++) {
                int n = (int)(off[b + 1] - off[b]);
                const float *qb = q + off[b] * ld + h * E, *kb = k + off[b] * ld + h * E, *vb = v + off[b] * ld + h * E;
                /* CblasRowMajor 101, CblasNoTrans 111, CblasTrans 112 */
                sg(101, 111, 112, n, n, E, 1.0f, qb, ld, kb, ld, 0.0f, s, n);
                sg(101, 111, 111, n, E, n, 1.0f, s, n, vb, ld, 0.0f, o + off[b] * H * E + h * E, H * E);
            }
        if (rep >= 0) t[rep] = now() - t0;
    }
    qsort(t, (size_t)reps, sizeof t[0], cmp_double);
    return t[reps / 2];
}

int main(int argc, char **argv) {
    int threads = 1, reps = 9, unfused = 1;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--threads")) threads = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--reps")) reps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--heads")) H = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--unfused")) unfused = atoi(argv[i + 1]);
    }
    if (H < 1 || H > 64) H = 8;
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
    int64_t rows = off[B], per = H == 1 ? E : 3 * H * E; /* elements of a row of each input */
    size_t n_in = (size_t)(rows * per);
    float *q = malloc(sizeof(float) * n_in), *k = malloc(sizeof(float) * n_in), *v = malloc(sizeof(float) * n_in);
    float *o = malloc(sizeof(float) * (size_t)(rows * H * E)), *s = malloc(sizeof(float) * (size_t)(maxlen * maxlen));
    for (size_t i = 0; i < n_in; i++) q[i] = (float)(uniform() * 2 - 1), k[i] = (float)(uniform() * 2 - 1),
                                      v[i] = (float)(uniform() * 2 - 1);
    if (H > 1) k = memcpy(k, q, sizeof(float) * n_in), v = memcpy(v, q, sizeof(float) * n_in); /* one packed x */
    rj_ctx *ctx = rj_ctx_new(counting_alloc, NULL);
    rj_ctx_set_threads(ctx, threads);
    double flops = 4.0 * sq * E * H, out_bytes = (double)rows * H * E * sizeof(float);
    printf("fused attention, RACE-like lengths: B=%d, H=%d, E=Dv=%d, %lld rows (max %lld), sum len^2 = %.3g; "
           "%d thread(s), median of %d; BLAS: %s\n", B, H, E, (long long)rows, (long long)maxlen, sq, threads, reps,
           rj_blas_info());
    prog f = make(ctx, true, off, rows, q, k, v), u = {0};
    size_t fx, ux;
    double tf = median_run(ctx, &f, reps, &fx), tu = NAN;
    rj_run_stats st;
    rj_bind_stats(f.b, &st);
    printf("%-34s %9.3f ms %8.2f GFLOP/s  (temporaries %lld bytes; memory held, output included, %.2f MB = %.3fx the output's "
           "%.2f MB)\n", "fused (found by the compiler)", tf * 1e3, flops / tf / 1e9, (long long)st.temp_bytes,
           (double)fx / 1e6, (double)fx / out_bytes, out_bytes / 1e6);
    if (unfused) {
        u = make(ctx, false, off, rows, q, k, v);
        tu = median_run(ctx, &u, reps, &ux);
        rj_bind_stats(u.b, &st);
        printf("%-34s %9.3f ms %8.2f GFLOP/s  (temporaries %lld bytes; p written)\n", "unfused (p also an output)",
               tu * 1e3, flops / tu / 1e9, (long long)st.temp_bytes);
    }
    sgemm_fn sg = load_sgemm(threads);
    if (sg) {
        double tb = median_blas(sg, off, q, H == 1 ? k : q + H * E, H == 1 ? v : q + 2 * H * E, s, o, reps);
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
