/*
 * busy.c — runs on a core that another process keeps busy (issue 36, item 5).
 *
 * A model runtime shares its cores with other processes, its own pools and other requests.
 * With OpenMP's parallel regions a 2-thread run waited for a worker the OS had not scheduled,
 * at every kernel, and took three times as long as a 1-thread run with one of two cores busy.
 * This measures that case in one run: the workloads quiet, then with a child process spinning
 * on one processor (pinned to the last processor this process may use), each timed on 1 and
 * on 2 threads in alternation; printed as medians (and the quartiles), with the 2-thread
 * median over the 1-thread one. The same workloads as OpenMP loops written in C
 * (bench/baseline.c) run beside them for comparison: their parallel regions wait for every
 * thread of the team, as ragjit's kernels did.
 *
 * Workloads as bench's (bench.c): B = 256 items of lengths 1..1024, D = 256, f32; W1
 * relu(x * w + b) and W2 softmax(x, dim=1); and W2 small, 64 items of 1..128 rows (a run of
 * about a millisecond, where waiting for a worker costs most).
 *
 *   bench_busy [--quick] [--reps N]
 * --quick shrinks the sizes and repetitions (a smoke test: its numbers mean nothing).
 */
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "baseline.h"
#include "ragjit.h"

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + 1e-6 * (double)t.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The q-quantile of v (sorted in place). */
static double quantile(double *v, int n, double q) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return v[(int)(q * (n - 1) + 0.5)];
}

static pid_t spinner; /* the busy child, or 0 */

static void die(rj_ctx *ctx, const char *what) {
    fprintf(stderr, "bench_busy: %s: %s\n", what, ctx ? rj_ctx_error(ctx) : "failed");
    if (spinner > 0) kill(spinner, SIGKILL);
    exit(1);
}

static uint64_t rng = 42;
static uint64_t rnd(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return rng;
}

typedef struct data {
    int64_t B, D, rows, *off;
    float *x, *w, *b, *y;
} data;

static data data_new(int64_t B, int64_t maxlen, int64_t D) {
    data d = {.B = B, .D = D, .off = malloc(sizeof(int64_t) * (size_t)(B + 1))};
    d.off[0] = 0;
    for (int64_t i = 0; i < B; i++) d.off[i + 1] = d.off[i] + 1 + (int64_t)(rnd() % (uint64_t)maxlen);
    d.rows = d.off[B];
    size_t n = (size_t)(d.rows * D);
    d.x = malloc(sizeof(float) * n), d.y = malloc(sizeof(float) * n);
    d.w = malloc(sizeof(float) * (size_t)D), d.b = malloc(sizeof(float) * (size_t)D);
    if (!d.x || !d.y || !d.w || !d.b) die(NULL, "out of memory");
    for (size_t i = 0; i < n; i++) d.x[i] = (float)(rnd() % 2001) / 1000.0f - 1.0f, d.y[i] = 0;
    for (int64_t i = 0; i < D; i++) d.w[i] = 0.5f + (float)i / (float)D, d.b[i] = 0.25f;
    return d;
}

static void data_free(data *d) {
    free(d->off), free(d->x), free(d->w), free(d->b), free(d->y);
}

/* One workload: ragjit's program with its binding, and the same computation in C. */
typedef struct wl {
    const char *name;
    const data *d;
    bool softmax;
    rj_graph *g;
    rj_program *p;
    rj_bind *bnd;
} wl;

static wl wl_new(rj_ctx *ctx, const char *name, const data *d, bool softmax) {
    char src[512];
    snprintf(src, sizeof src,
             "ragged j1 : B\ninput x : f32[B, j1, %lld]\ninput w : f32[%lld]\ninput b : f32[%lld]\n"
             "y = %s\noutput y\n", (long long)d->D, (long long)d->D, (long long)d->D,
             softmax ? "softmax(x, dim=1)" : "relu(x * w + b)");
    wl w = {.name = name, .d = d, .softmax = softmax, .g = rj_graph_parse(ctx, src, name)};
    if (!w.g || !(w.p = rj_program_new(w.g, RJ_TARGET_CPU)) || !(w.bnd = rj_bind_new(w.p))) die(ctx, name);
    rj_node out = rj_graph_find(w.g, "y");
    if (rj_bind_offsets(w.bnd, rj_graph_find_dim(w.g, "j1"), d->B, d->off, NULL) ||
        rj_bind_input(w.bnd, rj_graph_find(w.g, "x"), d->x, d->rows * d->D) ||
        (!softmax && (rj_bind_input(w.bnd, rj_graph_find(w.g, "w"), d->w, d->D) ||
                      rj_bind_input(w.bnd, rj_graph_find(w.g, "b"), d->b, d->D))) ||
        rj_bind_output(w.bnd, out, d->y, d->rows * d->D))
        die(ctx, name);
    return w;
}

static void wl_free(wl *w) {
    rj_bind_free(w->bnd);
    rj_program_free(w->p);
    rj_graph_free(w->g);
}

static double time_ragjit(rj_ctx *ctx, wl *w, int threads) {
    if (rj_ctx_set_threads(ctx, threads)) die(ctx, "threads");
    double t0 = now_ms();
    if (rj_program_run(w->p, w->bnd)) die(ctx, w->name);
    return now_ms() - t0;
}

static double time_openmp(wl *w, int threads) {
    const data *d = w->d;
    double t0 = now_ms();
    if (w->softmax) base_w2(d->y, d->x, d->off, d->B, d->D, threads);
    else base_w1(d->y, d->x, d->w, d->b, d->rows, d->D, threads);
    return now_ms() - t0;
}

/* A child spinning on the last processor this process may use; its pid. */
static pid_t spinner_start(void) {
    cpu_set_t set;
    int last = -1;
    if (!sched_getaffinity(0, sizeof set, &set))
        for (int c = 0; c < CPU_SETSIZE; c++)
            if (CPU_ISSET(c, &set)) last = c;
    pid_t pid = fork();
    if (pid < 0) die(NULL, "fork");
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlive the bench */
        if (getppid() == 1) _exit(0);
        if (last >= 0) {
            CPU_ZERO(&set);
            CPU_SET(last, &set);
            sched_setaffinity(0, sizeof set, &set);
        }
        for (volatile unsigned long i = 0;; i = i + 1) {
        }
    }
    usleep(50000); /* let it start */
    return pid;
}

static void spinner_stop(pid_t pid) {
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
}

/* Both engines on 1 and 2 threads, alternating, reps times each; one line per engine. */
static void measure(rj_ctx *ctx, wl *w, int reps, const char *load) {
    double *t = malloc(sizeof(double) * 4 * (size_t)reps);
    for (int e = 0; e < 2; e++) { /* warm: first touch of outputs, workers started */
        time_ragjit(ctx, w, 1 + e);
        time_openmp(w, 1 + e);
    }
    for (int r = 0; r < reps; r++)
        for (int k = 0; k < 4; k++) t[k * reps + r] = k < 2 ? time_ragjit(ctx, w, 1 + k) : time_openmp(w, k - 1);
    for (int e = 0; e < 2; e++) {
        double *a = t + 2 * e * reps, *b = a + reps;
        double m1 = quantile(a, reps, 0.5), m2 = quantile(b, reps, 0.5);
        printf("%-9s %-6s %-7s 1 thread %8.2f ms (%7.2f-%7.2f)  2 threads %8.2f ms (%7.2f-%7.2f)  2t/1t %.2f\n",
               w->name, load, e ? "openmp" : "ragjit", m1, quantile(a, reps, 0.25), quantile(a, reps, 0.75), m2,
               quantile(b, reps, 0.25), quantile(b, reps, 0.75), m2 / m1);
    }
    free(t);
}

int main(int argc, char **argv) {
    bool quick = false;
    int reps = 21;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick")) quick = true, reps = 3;
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc && atoi(argv[i + 1]) > 0) reps = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: bench_busy [--quick] [--reps N]\n");
            return 2;
        }
    }
    rj_ctx *ctx = rj_ctx_new(NULL, NULL);
    if (!ctx) die(NULL, "context");
    data big = data_new(quick ? 16 : 256, quick ? 64 : 1024, quick ? 64 : 256);
    data small = data_new(quick ? 8 : 64, quick ? 32 : 128, quick ? 64 : 256);
    wl ws[] = {wl_new(ctx, "W1", &big, false), wl_new(ctx, "W2", &big, true), wl_new(ctx, "W2 small", &small, true)};
    int nw = (int)(sizeof ws / sizeof ws[0]);
    printf("%lld and %lld rows of %lld; medians (quartiles) of %d runs, 1 and 2 threads alternating; "
           "busy: a process spinning on one processor\n", (long long)big.rows, (long long)small.rows,
           (long long)big.D, reps);
    for (int k = 0; k < nw; k++) measure(ctx, &ws[k], reps, "quiet");
    spinner = spinner_start();
    for (int k = 0; k < nw; k++) measure(ctx, &ws[k], reps, "busy");
    spinner_stop(spinner);
    spinner = 0;
    for (int k = 0; k < nw; k++) wl_free(&ws[k]);
    data_free(&big);
    data_free(&small);
    rj_ctx_free(ctx);
    return 0;
}
