/*
 * test_threads.c — one context shared by many threads, as a model runtime shares it.
 *
 * Eight threads compile, run, dump and free programs of a few graphs at once for a bounded
 * time, freeing programs and bindings in either order, each thread with its own graphs (of
 * the same structure: the cache serves them all) and its own bindings. Every result is
 * compared bit for bit with a single-threaded run made before the threads start (runs use
 * one worker thread each, so results are deterministic), and every dump with the
 * single-threaded dump. Each graph must compile exactly once however many threads ask for it
 * at the same moment. A second context dumps the loop IR from two more threads throughout.
 * The allocator is a thread-safe counting one: nothing may leak.
 *
 * A context left at the default worker count takes one per processor of the affinity mask the
 * process started with (a child started on one processor checks it), capped by a cgroup CPU
 * quota, counted once per process (not per run: that count read a file each time); the
 * quota is read from fake /proc and /sys trees.
 *
 * A kernel compiled late (a softmax's twin, by the first run that needs it) is compiled once
 * when two threads need it at the same moment.
 *
 * The ThreadSanitizer build (.ci/run) runs this test and test_pool (the CPU worker pool, runs
 * on several workers from several threads): the two that exercise ragjit's own concurrency;
 * here every run has one worker and every compile one thread (LLVM's compile threads are not
 * instrumented, so TSan would report noise in them).
 */
#include "stdenv.h"

#include "../src/runtime/runtime.h"

#include <ftw.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define THREADS 8
#define DUMPERS 2
#define SECONDS 2.0
static const char *const chains[] = {"relu(x*w+v)", "softmax(relu(x*w+v), dim=1)",
                                     "unpad(softmax(pad(x,-inf)))", "sum(pad(x,0.75,L),1)"};
#define NCHAINS (int)(sizeof chains / sizeof chains[0])
static const len_pattern patterns[] = {LEN_UNIFORM, LEN_EMPTY, LEN_ONE_LONG, LEN_B0};
#define NPAT (int)(sizeof patterns / sizeof patterns[0])

static long live; /* blocks */

static void *atomic_alloc(void *ud, void *ptr, size_t osize, size_t nsize) {
    (void)ud;
    (void)osize;
    if (nsize == 0) {
        if (ptr) __atomic_sub_fetch(&live, 1, __ATOMIC_RELAXED);
        free(ptr);
        return NULL;
    }
    void *p = realloc(ptr, nsize);
    if (p && !ptr) __atomic_add_fetch(&live, 1, __ATOMIC_RELAXED);
    return p;
}

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* What a single thread computed: the first output's values and the loop-IR dump. */
typedef struct expected {
    void *values[NPAT];
    size_t bytes[NPAT];
    char *loops;
} expected;

static expected want[NCHAINS];
static data inputs[NPAT];
static rj_ctx *shared;
static double deadline;

static size_t result_bytes(const rj_tensor *t) {
    rj_tensor_info ti;
    rj_tensor_get_info(t, &ti);
    return (size_t)numel_of(&ti) * rj_dtype_size(ti.dtype);
}

static const void *result_values(const rj_tensor *t) {
    rj_tensor_info ti;
    rj_tensor_get_info(t, &ti);
    return ti.values;
}

typedef struct worker {
    int id;
    uint64_t rng;
    env e[NCHAINS];
    long runs, dumps, bad;
    char why[256];
} worker;

static void mismatch(worker *w, const char *fmt, const char *what, const char *detail) {
    if (!w->bad++) snprintf(w->why, sizeof w->why, fmt, what, detail ? detail : "");
}

static void one_step(worker *w) {
    int c = (int)rng_int(&w->rng, 0, NCHAINS - 1), pi = (int)rng_int(&w->rng, 0, NPAT - 1);
    env *e = &w->e[c];
    rj_program *p = rj_program_new(e->g, RJ_TARGET_CPU);
    if (!p) {
        mismatch(w, "%s: compile: %s", chains[c], rj_ctx_error(shared));
        return;
    }
    if (rng_int(&w->rng, 0, 3) == 0) {
        char *loops = rj_program_dump(p, "loops");
        if (!loops || strcmp(loops, want[c].loops)) mismatch(w, "%s: loops dump differs%s", chains[c], NULL);
        rj_string_free(shared, loops);
        w->dumps++;
    }
    rj_bind *b = rj_bind_new(p);
    if (!b) {
        rj_program_free(p);
        mismatch(w, "%s: bind: %s", chains[c], rj_ctx_error(shared));
        return;
    }
    bind_all(shared, b, e, &inputs[pi], NULL);
    bool program_first = rng_int(&w->rng, 0, 1);
    if (rj_program_run(p, b)) {
        mismatch(w, "%s: run: %s", chains[c], rj_ctx_error(shared));
    } else {
        if (program_first) rj_program_free(p), p = NULL; /* results outlive the program */
        const rj_tensor *t = rj_bind_result(b, rj_graph_output_at(e->g, 0));
        if (!t || result_bytes(t) != want[c].bytes[pi] ||
            memcmp(result_values(t), want[c].values[pi], want[c].bytes[pi]))
            mismatch(w, "%s: a result differs from the single-threaded run%s", chains[c], NULL);
        w->runs++;
    }
    rj_bind_free(b);
    rj_program_free(p);
}

static void *work(void *arg) {
    worker *w = arg;
    while (now() < deadline && w->bad == 0) one_step(w);
    return NULL;
}

typedef struct dumper {
    rj_ctx *ctx;
    env e;
    char *want;
    long dumps, bad;
} dumper;

static void *dump_loop(void *arg) {
    dumper *d = arg;
    while (now() < deadline && !d->bad) {
        char *s = rj_graph_dump(d->e.g, RJ_TARGET_CUDA, "loops");
        if (!s || strcmp(s, d->want)) d->bad++;
        rj_string_free(d->ctx, s);
        d->dumps++;
    }
    return NULL;
}

static void test_shared_context(void **state) {
    (void)state;
    /* single-threaded expectations, from a context of their own (the results themselves are
     * checked against the interpreter in test_jit) */
    rj_ctx *ref = rj_ctx_new(atomic_alloc, NULL);
    assert_non_null(ref);
    assert_int_equal(rj_ctx_set_threads(ref, 1), RJ_OK);
    for (int pi = 0; pi < NPAT; pi++) inputs[pi] = data_new(patterns[pi], RJ_F32, 40 + (uint64_t)pi);
    for (int c = 0; c < NCHAINS; c++) {
        env e = env_new(ref, RJ_F32);
        std_chain_add(&e, chains[c]);
        rj_program *p = rj_program_new(e.g, RJ_TARGET_CPU);
        assert_non_null(p);
        want[c].loops = rj_program_dump(p, "loops");
        assert_non_null(want[c].loops);
        rj_bind *b = rj_bind_new(p);
        for (int pi = 0; pi < NPAT; pi++) {
            bind_all(ref, b, &e, &inputs[pi], NULL);
            assert_int_equal(rj_program_run(p, b), RJ_OK);
            const rj_tensor *t = rj_bind_result(b, rj_graph_output_at(e.g, 0));
            want[c].bytes[pi] = result_bytes(t);
            want[c].values[pi] = malloc(want[c].bytes[pi] + 1);
            memcpy(want[c].values[pi], result_values(t), want[c].bytes[pi]);
        }
        rj_bind_free(b);
        rj_program_free(p);
        rj_graph_free(e.g);
    }
    assert_int_equal(cpu_compile_count(ref), NCHAINS);

    /* a fresh context: the threads' first compiles of each graph race */
    shared = rj_ctx_new(atomic_alloc, NULL);
    assert_non_null(shared);
    assert_int_equal(rj_ctx_set_threads(shared, 1), RJ_OK);
    static worker ws[THREADS];
    for (int t = 0; t < THREADS; t++) {
        ws[t] = (worker){.id = t, .rng = 1000 + (uint64_t)t};
        for (int c = 0; c < NCHAINS; c++) {
            ws[t].e[c] = env_new(shared, RJ_F32);
            std_chain_add(&ws[t].e[c], chains[c]);
        }
    }
    rj_ctx *other = rj_ctx_new(atomic_alloc, NULL);
    static dumper ds[DUMPERS];
    for (int t = 0; t < DUMPERS; t++) {
        ds[t] = (dumper){.ctx = other, .e = env_new(other, RJ_F32)};
        std_chain_add(&ds[t].e, "softmax(relu(x*w+v), dim=1)");
    }
    char *cuda_loops = rj_graph_dump(ds[0].e.g, RJ_TARGET_CUDA, "loops");
    assert_non_null(cuda_loops);
    for (int t = 0; t < DUMPERS; t++) ds[t].want = cuda_loops;

    deadline = now() + SECONDS;
    pthread_t th[THREADS + DUMPERS];
    for (int t = 0; t < THREADS; t++) assert_int_equal(pthread_create(&th[t], NULL, work, &ws[t]), 0);
    for (int t = 0; t < DUMPERS; t++) assert_int_equal(pthread_create(&th[THREADS + t], NULL, dump_loop, &ds[t]), 0);
    for (int t = 0; t < THREADS + DUMPERS; t++) pthread_join(th[t], NULL);

    long runs = 0, dumps = 0;
    for (int t = 0; t < THREADS; t++) {
        if (ws[t].bad) fail_msg("thread %d: %s", t, ws[t].why);
        runs += ws[t].runs;
        dumps += ws[t].dumps;
        for (int c = 0; c < NCHAINS; c++) rj_graph_free(ws[t].e[c].g);
    }
    long cross = 0;
    for (int t = 0; t < DUMPERS; t++) {
        if (ds[t].bad) fail_msg("dumper %d: a CUDA loops dump differs", t);
        cross += ds[t].dumps;
        rj_graph_free(ds[t].e.g);
    }
    printf("%d threads: %ld runs and %ld dumps on one context, %ld dumps on another, in %.1f s; "
           "%llu compiles\n", THREADS, runs, dumps, cross, SECONDS,
           (unsigned long long)cpu_compile_count(shared));
    assert_true(runs > 0);
    /* each graph compiled once, however many threads asked for it at the same moment */
    assert_int_equal(cpu_compile_count(shared), NCHAINS);
    rj_string_free(other, cuda_loops);
    rj_ctx_free(other);
    for (int c = 0; c < NCHAINS; c++) {
        for (int pi = 0; pi < NPAT; pi++) free(want[c].values[pi]);
        rj_string_free(ref, want[c].loops);
    }
    for (int pi = 0; pi < NPAT; pi++) data_free(&inputs[pi]);
    rj_ctx_free(shared);
    rj_ctx_free(ref);
    assert_int_equal(__atomic_load_n(&live, __ATOMIC_RELAXED), 0);
}

/* Each thread sees its own last error, whatever other threads do with the context. */
static void *fail_and_read(void *arg) {
    rj_ctx *ctx = arg;
    for (int i = 0; i < 2000; i++) {
        int k = (int)(((uintptr_t)&i >> 4) % 1000) + i;
        rj_ctx_set_threads(ctx, -k - 1);
        char want_msg[96];
        snprintf(want_msg, sizeof want_msg, "rj_ctx_set_threads: %d threads is out of range 0..4096", -k - 1);
        if (rj_ctx_status(ctx) != RJ_ERR_ARG || strcmp(rj_ctx_error(ctx), want_msg)) return (void *)1;
    }
    return NULL;
}

static void test_errors_per_thread(void **state) {
    (void)state;
    rj_ctx *ctx = rj_ctx_new(NULL, NULL);
    pthread_t th[4];
    for (int t = 0; t < 4; t++) assert_int_equal(pthread_create(&th[t], NULL, fail_and_read, ctx), 0);
    for (int t = 0; t < 4; t++) {
        void *r;
        pthread_join(th[t], &r);
        assert_null(r);
    }
    /* this thread failed nothing on ctx */
    assert_int_equal(rj_ctx_status(ctx), RJ_OK);
    assert_string_equal(rj_ctx_error(ctx), "");
    rj_ctx_free(ctx);
}

/* test_threads --default-threads: prints a new default context's worker count (the child of
 * test_default_threads, started under a mask of one processor). */
static int print_default_threads(void) {
    rj_ctx *ctx = rj_ctx_new(NULL, NULL);
    if (!ctx) return 1;
    printf("%d\n", ctx_threads(ctx));
    rj_ctx_free(ctx);
    return 0;
}

/* The default worker count is the affinity mask the process started with (capped by a CPU
 * quota): a process started under a mask of one processor runs one worker by default, while a
 * context made after this thread was pinned to one processor (as OMP_PROC_BIND pins the thread
 * that runs a parallel region) keeps the process's count; rj_ctx_set_threads overrides it and
 * 0 restores it. Nothing runs while the mask is narrowed (workers started then inherit it). */
static void test_default_threads(void **state) {
    (void)state;
    cpu_set_t all, one;
    assert_int_equal(sched_getaffinity(0, sizeof all, &all), 0);
    int n = CPU_COUNT(&all), first = 0, q = cpus_quota("");
    if (q > 0 && q < n) n = q;
    while (!CPU_ISSET(first, &all)) first++;
    CPU_ZERO(&one);
    CPU_SET(first, &one);
    /* a process started on one processor */
    int fd[2];
    assert_int_equal(pipe(fd), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(fd[1], 1);
        close(fd[0]);
        if (sched_setaffinity(0, sizeof one, &one) == 0)
            execl("/proc/self/exe", "test_threads", "--default-threads", (char *)NULL);
        _exit(127);
    }
    close(fd[1]);
    char out[32] = {0};
    ssize_t got = read(fd[0], out, sizeof out - 1);
    close(fd[0]);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    assert_true(got > 0);
    assert_int_equal(atoi(out), 1);
    /* this thread pinned to one processor after the process started */
    rj_ctx *before = rj_ctx_new(NULL, NULL);
    assert_int_equal(ctx_threads(before), n);
    assert_int_equal(sched_setaffinity(0, sizeof one, &one), 0);
    rj_ctx *pinned = rj_ctx_new(NULL, NULL);
    assert_int_equal(sched_setaffinity(0, sizeof all, &all), 0);
    assert_int_equal(ctx_threads(pinned), n);
    assert_int_equal(rj_ctx_set_threads(pinned, 3), RJ_OK);
    assert_int_equal(ctx_threads(pinned), 3);
    assert_int_equal(rj_ctx_set_threads(pinned, 0), RJ_OK);
    assert_int_equal(ctx_threads(pinned), n);
    assert_int_equal(rj_ctx_set_threads(pinned, -1), RJ_ERR_ARG);
    printf("default worker threads: %d (the process's affinity mask, capped by a CPU quota), also "
           "for a context made on a thread pinned since; 1 in a process started on one processor\n", n);
    rj_ctx_free(pinned);
    rj_ctx_free(before);
}

/* root/rel with its directories, holding text */
static void put(const char *root, const char *rel, const char *text) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", root, rel);
    for (char *s = path + strlen(root) + 1; (s = strchr(s, '/')); s++) {
        *s = 0;
        mkdir(path, 0755);
        *s = '/';
    }
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static int unlink_one(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st, (void)flag, (void)ftw;
    return remove(path);
}

/* cpus_quota over fake trees: cgroup v2's cpu.max on the process's cgroup and its ancestors
 * (the smallest limit, rounded up; "max" none), v1's quota and period on the cpu hierarchy
 * (found under a mount named either way; a path missing under the mount is walked up to it, as
 * in a container that sees its own cgroup as the root), and what is no limit: -1, nonsense,
 * missing files, a hierarchy without the cpu controller. */
static void test_cpu_quota(void **state) {
    (void)state;
    char root[64];
    snprintf(root, sizeof root, "/tmp/ragjit-cpus-XXXXXX");
    assert_non_null(mkdtemp(root));
    assert_int_equal(cpus_quota(root), 0); /* no /proc/self/cgroup */
    /* each step writes a file, then (want >= 0) checks the quota */
    static const struct {
        const char *file, *text;
        int want;
    } steps[] = {
        {"proc/self/cgroup", "0::/a/b\n", -1},
        {"sys/fs/cgroup/a/b/cpu.max", "max 100000\n", 0},
        {"sys/fs/cgroup/a/cpu.max", "250000 100000\n", 3},
        {"sys/fs/cgroup/a/b/cpu.max", "50000 100000\n", 1},
        {"sys/fs/cgroup/cpu.max", "100000 100000\n", -1}, /* the root's limit applies too */
        {"sys/fs/cgroup/a/b/cpu.max", "max 100000\n", 1},
        {"sys/fs/cgroup/cpu.max", "lots\n", -1},
        {"sys/fs/cgroup/a/cpu.max", "200000 0\n", 0},
        /* v1: the path is missing under the mount, whose files are the container's */
        {"proc/self/cgroup", "5:memory:/docker/abc\n3:cpu,cpuacct:/docker/abc\n0::/\n", -1},
        {"sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us", "150000\n", -1},
        {"sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us", "100000\n", 2},
        {"sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_quota_us", "-1\n", -1},
        {"sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_period_us", "100000\n", 2},
        {"sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us", "-1\n", 0},
        {"proc/self/cgroup", "2:cpuacct:/\n1:cpu:/x\n", -1},
        {"sys/fs/cgroup/cpu/x/cpu.cfs_quota_us", "400000\n", -1},
        {"sys/fs/cgroup/cpu/x/cpu.cfs_period_us", "100000\n", 4},
        {"sys/fs/cgroup/cpuacct/cpu.cfs_quota_us", "100000\n", -1}, /* not the cpu hierarchy */
        {"sys/fs/cgroup/cpuacct/cpu.cfs_period_us", "100000\n", 4},
        {"sys/fs/cgroup/x/cpu.cfs_quota_us", "100000\n", -1},
        {"sys/fs/cgroup/x/cpu.cfs_period_us", "100000\n", -1},
        {"proc/self/cgroup", "1:cpu:/../x\n", 0}, /* outside the namespace: the mount only */
        {"sys/fs/cgroup/cpu/cpu.cfs_quota_us", "300000\n", -1},
        {"sys/fs/cgroup/cpu/cpu.cfs_period_us", "100000\n", 3},
        {"proc/self/cgroup", "garbage without colons\n::\n", 0},
    };
    for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++) {
        put(root, steps[i].file, steps[i].text);
        if (steps[i].want >= 0 && cpus_quota(root) != steps[i].want)
            fail_msg("step %zu (%s): quota %d, want %d", i, steps[i].file, cpus_quota(root), steps[i].want);
    }
    assert_int_equal(nftw(root, unlink_one, 16, FTW_DEPTH | FTW_PHYS), 0);
    int q = cpus_quota("");
    printf("cgroup CPU quotas read from fake trees; this process's: %d (0: none)\n", q);
}

/* ---- kernels compiled on first need ---------------------------------------------------- */

typedef struct late_job {
    rj_ctx *ctx;
    const rj_graph *g;
    rj_program *p;
    const int64_t *off;
    int64_t B;
    const float *x;
    pthread_barrier_t *start;
    rj_status s;
    float *y; /* a copy of the result (off[B] rows of n), malloc'd */
    int64_t n;
} late_job;

static void *late_thread(void *arg) {
    late_job *j = arg;
    rj_bind *b = rj_bind_new(j->p);
    j->s = !b ? RJ_ERR_NOMEM : rj_bind_offsets(b, rj_graph_find_dim(j->g, "j1"), j->B, j->off, NULL);
    if (!j->s) j->s = rj_bind_input(b, rj_graph_find(j->g, "x"), j->x, j->off[j->B] * j->n);
    pthread_barrier_wait(j->start);
    if (!j->s) j->s = rj_program_run(j->p, b);
    rj_tensor_info ti;
    if (!j->s && !(j->s = rj_tensor_get_info(rj_bind_result(b, rj_graph_find(j->g, "y")), &ti)) &&
        (j->y = malloc(sizeof(float) * (size_t)(j->off[j->B] * j->n + 1))))
        memcpy(j->y, ti.values, sizeof(float) * (size_t)(j->off[j->B] * j->n));
    rj_bind_free(b);
    return NULL;
}

/* A softmax's twin of runtime tiles is left out of its program's compile and compiled by the
 * first run that needs it (cpu.c, compiled_late): once, when two threads need it at the same
 * moment, and never by runs whose items fit the constant tile's stash (a budget of 64 KiB
 * here, RAGJIT_STASH_BYTES) or that are too small to share among workers. The results match
 * the interpreter's, and each other's bit for bit. */
static void test_late_kernels(void **state) {
    (void)state;
    assert_int_equal(setenv("RAGJIT_STASH_BYTES", "65536", 1), 0);
    rj_ctx *ctx = rj_ctx_new(atomic_alloc, NULL);
    assert_non_null(ctx);
    assert_ok(ctx, rj_ctx_set_cache_dir(ctx, "off"));
    assert_ok(ctx, rj_ctx_set_threads(ctx, 1));
    int64_t n;
    rj_graph *g = late_graph(ctx, &n);
    rj_program *p = rj_program_new(g, RJ_TARGET_CPU), *pr = rj_program_new(g, RJ_TARGET_REFERENCE);
    unsetenv("RAGJIT_STASH_BYTES"); /* read by the context's first compile */
    if (!p || !pr) fail_msg("%s", rj_ctx_error(ctx));
    uint64_t lc, lh;
    cpu_late_counts(ctx, &lc, &lh);
    assert_int_equal(lc + lh, 0);
    static const int64_t short_len[] = {3, 0, 7, 1}, long_len[] = {3, 300, 0, 5};
    late_check(ctx, g, p, pr, short_len, 4, n);
    assert_ok(ctx, rj_ctx_set_threads(ctx, 2)); /* a run too small to share: still one worker */
    late_check(ctx, g, p, pr, short_len, 4, n);
    assert_ok(ctx, rj_ctx_set_threads(ctx, 1));
    cpu_late_counts(ctx, &lc, &lh);
    assert_int_equal(lc + lh, 0);
    /* two threads need the twin at once */
    int64_t off[5] = {0};
    for (int b = 0; b < 4; b++) off[b + 1] = off[b] + long_len[b];
    uint64_t seed = 3;
    float *x = random_values(RJ_F32, off[4] * n + 1, &seed);
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, 2);
    late_job jobs[2];
    pthread_t th[2];
    for (int t = 0; t < 2; t++) {
        jobs[t] = (late_job){.ctx = ctx, .g = g, .p = p, .off = off, .B = 4, .x = x, .start = &start, .n = n};
        assert_int_equal(pthread_create(&th[t], NULL, late_thread, &jobs[t]), 0);
    }
    for (int t = 0; t < 2; t++) pthread_join(th[t], NULL);
    pthread_barrier_destroy(&start);
    for (int t = 0; t < 2; t++)
        if (jobs[t].s || !jobs[t].y) fail_msg("thread %d: %s", t, rj_status_str(jobs[t].s));
    assert_memory_equal(jobs[0].y, jobs[1].y, sizeof(float) * (size_t)(off[4] * n));
    cpu_late_counts(ctx, &lc, &lh);
    assert_int_equal(lc, 1);
    late_check(ctx, g, p, pr, long_len, 4, n); /* against the interpreter; compiles nothing more */
    rj_program *p2 = rj_program_new(g, RJ_TARGET_CPU); /* shares the code, twin included */
    assert_non_null(p2);
    late_check(ctx, g, p2, pr, long_len, 4, n);
    cpu_late_counts(ctx, &lc, &lh);
    assert_int_equal(lc, 1);
    for (int t = 0; t < 2; t++) free(jobs[t].y);
    free(x);
    rj_program_free(p2);
    rj_program_free(p);
    rj_program_free(pr);
    rj_graph_free(g);
    rj_ctx_free(ctx);
    assert_int_equal(__atomic_load_n(&live, __ATOMIC_RELAXED), 0);
}

int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "--default-threads")) return print_default_threads();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shared_context),
        cmocka_unit_test(test_errors_per_thread),
        cmocka_unit_test(test_default_threads),
        cmocka_unit_test(test_cpu_quota),
        cmocka_unit_test(test_late_kernels),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
