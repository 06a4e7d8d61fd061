/*
 * gemm.c — ragjit's own sgemm (src/util/gemm.c) against OpenBLAS's, call for call.
 *
 * bench's W7 measures the product as ragjit runs it (chunks of rows on every worker, the
 * epilogue fused); this measures the kernel alone, on one thread, on the shapes ragjit gives
 * it: W7's chunk (512 rows of x [., 256] times Wᵀ, W [1024, 256]), MiniLM's projections and
 * FFN in chunks (K, N of 384 and 1536), per-item products of attention (q kᵀ and p v at
 * lengths 35 and 200, a head of 32), CoRa's MHA module (its projections' chunks, attention at
 * lengths 13 and 128, a head of 64: where run_attention switches to ragjit's own sgemm), and
 * small and odd ones. Each shape runs the two in
 * alternating pairs; it prints the medians' GFLOP/s and the median of the pairs' ratios, which
 * stays fair on a machine that other work shares.
 *
 *   bench_gemm [--reps N] [--isa best|avx512|avx2|portable]
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../src/util/util.h"

typedef void (*sgemm_fn)(int, int, int, int, int, int, float, const float *, int, const float *, int, float,
                         float *, int);

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

typedef struct shape {
    const char *what;
    int64_t m, n, k;
    bool tb;
} shape;

static const shape shapes[] = {
    {"W7 chunk: x Wt", 512, 1024, 256, true},      {"MiniLM qkv chunk", 455, 1152, 384, true},
    {"MiniLM FFN up chunk", 341, 1536, 384, true}, {"MiniLM FFN down chunk", 1365, 384, 1536, true},
    {"q kt, len 35, head 32", 35, 35, 32, true},   {"p v, len 35, head 32", 35, 32, 35, false},
    {"q kt, len 200, head 32", 200, 200, 32, true}, {"p v, len 200, head 32", 200, 32, 200, false},
    {"64 cube", 64, 64, 64, false},                {"odd 300 x 65 x 17", 300, 65, 17, false},
    {"CoRa qkv chunk", 341, 1536, 512, true},      {"CoRa out chunk", 1024, 512, 512, true},
    {"q kt, len 13, head 64", 13, 13, 64, true},   {"p v, len 13, head 64", 13, 64, 13, false},
    {"q kt, len 128, head 64", 128, 128, 64, true}, {"p v, len 128, head 64", 128, 64, 128, false},
};

int main(int argc, char **argv) {
    int reps = 21, isa = SGEMM_BEST;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--isa") && i + 1 < argc) {
            const char *s = argv[++i];
            isa = !strcmp(s, "avx512") ? SGEMM_AVX512 : !strcmp(s, "avx2") ? SGEMM_AVX2
                : !strcmp(s, "portable") ? SGEMM_PORTABLE : SGEMM_BEST;
        } else {
            fprintf(stderr, "usage: bench_gemm [--reps N] [--isa best|avx512|avx2|portable]\n");
            return 2;
        }
    }
    if (reps < 1) reps = 1;
    const sgemm_kernel *kn = sgemm_kernel_get(isa);
    void *h = dlopen("libopenblas.so.0", RTLD_NOW | RTLD_LOCAL);
    void *sym = h ? dlsym(h, "cblas_sgemm") : NULL, *th = h ? dlsym(h, "openblas_set_num_threads") : NULL;
    if (!kn || !sym) {
        fprintf(stderr, "bench_gemm: %s\n", !kn ? "this CPU lacks that ISA" : "OpenBLAS (libopenblas.so.0) does not load");
        return 1;
    }
    sgemm_fn sg;
    void (*threads)(int) = NULL;
    memcpy(&sg, &sym, sizeof sg);
    if (th) memcpy(&threads, &th, sizeof threads), threads(1);
    printf("ragjit's own sgemm (%s) against OpenBLAS's, one thread, median of %d alternating pairs\n\n", kn->name,
           reps);
    printf("%-24s %18s %10s %10s %8s\n", "shape", "m x n x k", "own GF/s", "BLAS GF/s", "own/BLAS");
    uint64_t seed = 1;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const shape *sh = &shapes[s];
        int64_t m = sh->m, n = sh->n, k = sh->k, ldb = sh->tb ? k : n;
        float *a = malloc(sizeof(float) * (size_t)(m * k)), *b = malloc(sizeof(float) * (size_t)(n * k));
        float *c = malloc(sizeof(float) * (size_t)(m * n));
        void *scratch = malloc(sgemm_scratch_bytes(kn, m, n, k));
        double *t = malloc(sizeof(double) * 3 * (size_t)reps), *tb = t + reps, *q = tb + reps;
        if (!a || !b || !c || !scratch || !t) return 1;
        for (int64_t i = 0; i < m * k; i++) a[i] = (float)((seed = seed * 6364136223846793005u + 1) >> 41) / 4.2e6f - 1;
        for (int64_t i = 0; i < n * k; i++) b[i] = (float)((seed = seed * 6364136223846793005u + 1) >> 41) / 4.2e6f - 1;
        /* enough calls a sample to last about a millisecond */
        int calls = (int)(1e-3 / (2.0 * (double)(m * n * k) / 50e9)) + 1;
        for (int r = -1; r < reps; r++) {
            double t0 = now();
            for (int i = 0; i < calls; i++)
                sgemm_run(kn, false, sh->tb, m, n, k, 1.0f, a, k, b, ldb, 0.0f, c, n, scratch);
            double t1 = now();
            for (int i = 0; i < calls; i++)
                sg(101, 111, sh->tb ? 112 : 111, (int)m, (int)n, (int)k, 1.0f, a, (int)k, b, (int)ldb, 0.0f, c, (int)n);
            if (r >= 0) t[r] = (t1 - t0) / calls, tb[r] = (now() - t1) / calls, q[r] = tb[r] / t[r];
        }
        double flops = 2.0 * (double)(m * n * k), ratio = median(q, reps);
        char dims[48];
        snprintf(dims, sizeof dims, "%lldx%lldx%lld%s", (long long)m, (long long)n, (long long)k, sh->tb ? " Bt" : "");
        printf("%-24s %18s %10.1f %10.1f %8.2f\n", sh->what, dims, flops / median(t, reps) / 1e9,
               flops / median(tb, reps) / 1e9, ratio);
        free(a), free(b), free(c), free(scratch), free(t);
    }
    return 0;
}
