/*
 * test_prepare.c — rj_bind_prepare: a binding made ready before its first run (issue 36: the
 * first run as fast as the later ones).
 *
 * What a first run paid for and later runs did not was mostly memory: the temporaries' arena
 * and the scratch, fresh from the allocator, faulted in page by page by the kernels, and
 * worker threads created by the run. rj_bind_prepare does that work at bind time, and these
 * tests check that it did, by what can be observed from outside: rj_bind_stats reports the
 * arena before any run; the memory limit is met (or refused, with the run's message) at
 * prepare; the run after it allocates nothing through the context's allocator and faults in
 * few pages (with its output bound by the caller or placed by ragjit), while the same run on a binding that was not prepared faults in at least half of
 * its arena (the control, which shows that the page count can see the difference); the workers
 * exist once prepare returns. Results are compared with the reference interpreter's.
 *
 * Page faults are counted with getrusage, with glibc's mmap threshold pinned (mallopt) so
 * that every large block is a fresh mapping, never heap memory an earlier test touched.
 *
 * Where the kernel gives transparent huge pages to memory that asks (enabled `always` or
 * `madvise`), a prepared arena of 16 MiB must be advised as such (/proc/self/smaps: the `hg`
 * flag on mappings covering its whole 2 MiB pages), and the advice withdrawn when the binding
 * is freed; whether the kernel then grants the pages is its business, not checked.
 */
#include "stdenv.h"

#include <dirent.h>
#include <malloc.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

/* Three softmaxes over the ragged dim: a and b are temporaries alive together (b's kernel
 * reads a and writes b), ROWS x 256 floats each. */
#define ROWS 8192
#define COLS 256
#define ARENA ((int64_t)2 * ROWS * COLS * 4)
static const char *prog_src = "ragged j1 : B\n"
                              "input x : f32[B, j1, 256]\n"
                              "a = softmax(x, dim=1)\n"
                              "b = softmax(a * 2.0, dim=1)\n"
                              "c = softmax(b * 3.0, dim=1)\n"
                              "output c\n";
static const int64_t offs[5] = {0, 1000, 1000, 5000, ROWS};

typedef struct setup {
    rj_graph *g;
    rj_program *p;
    rj_dim j;
    rj_node x, c;
    float *xs, *y;
} setup;

static void setup_new(fixture *f, setup *s, rj_target t) {
    s->g = rj_graph_parse(f->ctx, prog_src, "prepare.rj");
    assert_non_null(s->g);
    s->p = rj_program_new(s->g, t);
    assert_non_null(s->p);
    s->j = rj_graph_find_dim(s->g, "j1");
    s->x = rj_graph_find(s->g, "x");
    s->c = rj_graph_find(s->g, "c");
    s->xs = malloc(sizeof(float) * ROWS * COLS);
    s->y = malloc(sizeof(float) * ROWS * COLS);
    assert_non_null(s->xs);
    assert_non_null(s->y);
    for (int64_t i = 0; i < ROWS * COLS; i++) s->xs[i] = (float)((i * 37) % 23) / 7.0f - 1.5f;
    memset(s->y, 0, sizeof(float) * ROWS * COLS); /* the caller's pages: not what is counted */
}

static void setup_free(setup *s) {
    free(s->xs), free(s->y);
    rj_program_free(s->p);
    rj_graph_free(s->g);
}

/* A binding of s's program with everything bound (the output in s->y). */
static rj_bind *bound(fixture *f, setup *s) {
    rj_bind *b = rj_bind_new(s->p);
    assert_non_null(b);
    assert_ok(f->ctx, rj_bind_offsets(b, s->j, 4, offs, NULL));
    assert_ok(f->ctx, rj_bind_input(b, s->x, s->xs, ROWS * COLS));
    assert_ok(f->ctx, rj_bind_output(b, s->c, s->y, ROWS * COLS));
    return b;
}

static long faults_now(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_minflt + ru.ru_majflt;
}

/* The threads of this process (/proc/self/task), or -1 where it cannot be read. */
static int thread_count(void) {
    DIR *d = opendir("/proc/self/task");
    if (!d) return -1;
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

/* Bytes of this process's mappings advised as huge pages (VmFlags `hg` in /proc/self/smaps),
 * or -1 where smaps cannot be read. */
static long long huge_advised_bytes(void) {
    FILE *f = fopen("/proc/self/smaps", "r");
    if (!f) return -1;
    char line[512];
    long long total = 0, size_kb = 0;
    while (fgets(line, sizeof line, f)) {
        if (!strncmp(line, "Size:", 5)) size_kb = atoll(line + 5);
        else if (!strncmp(line, "VmFlags:", 8) && strstr(line, " hg")) total += size_kb * 1024;
    }
    fclose(f);
    return total;
}

/* Whether this kernel gives huge pages to memory that asks, and ragjit is not told otherwise. */
static bool thp_on(void) {
    const char *off = getenv("RAGJIT_HUGE_PAGES");
    if (off && !strcmp(off, "0")) return false;
    FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
    if (!f) return false;
    char buf[128] = {0};
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    return strstr(buf, "[always]") || strstr(buf, "[madvise]");
}

/* A prepared arena of 16 MiB is advised as huge pages (all 8 of them: the block starts at a huge
 * page), and the advice is gone with the binding; so is an arena that a later run grows. */
static void test_prepare_huge_pages(void **state) {
    fixture *f = *state;
    if (!thp_on() || huge_advised_bytes() < 0) skip();
    setup s;
    setup_new(f, &s, RJ_TARGET_CPU);
    long long before = huge_advised_bytes();
    rj_bind *b = bound(f, &s);
    assert_ok(f->ctx, rj_bind_prepare(b));
    long long advised = huge_advised_bytes() - before;
    if (advised < ARENA)
        fail_msg("after rj_bind_prepare %lld bytes more are advised as huge pages; the arena has %lld", advised,
                 (long long)ARENA);
    assert_ok(f->ctx, rj_program_run(s.p, b));
    float *want = malloc(sizeof(float) * ROWS * COLS);
    assert_non_null(want);
    memcpy(want, s.y, sizeof(float) * ROWS * COLS);
    rj_bind_free(b);
    if (huge_advised_bytes() - before >= ARENA)
        fail_msg("%lld bytes are still advised as huge pages after rj_bind_free", huge_advised_bytes() - before);

    /* a binding's first run on 8 rows, then on all: the arena grows into huge pages at once,
     * and the second run's result is the prepared one's */
    static const int64_t small[2] = {0, 8};
    b = rj_bind_new(s.p);
    assert_ok(f->ctx, rj_bind_offsets(b, s.j, 1, small, NULL));
    assert_ok(f->ctx, rj_bind_input(b, s.x, s.xs, 8 * COLS));
    assert_ok(f->ctx, rj_bind_output(b, s.c, s.y, 8 * COLS));
    assert_ok(f->ctx, rj_program_run(s.p, b));
    assert_ok(f->ctx, rj_bind_offsets(b, s.j, 4, offs, NULL));
    assert_ok(f->ctx, rj_bind_input(b, s.x, s.xs, ROWS * COLS));
    assert_ok(f->ctx, rj_bind_output(b, s.c, s.y, ROWS * COLS));
    memset(s.y, 0, sizeof(float) * ROWS * COLS);
    assert_ok(f->ctx, rj_program_run(s.p, b));
    advised = huge_advised_bytes() - before;
    if (advised < ARENA)
        fail_msg("after a run that grew the arena %lld bytes more are advised as huge pages; it has %lld", advised,
                 (long long)ARENA);
    assert_memory_equal(want, s.y, sizeof(float) * ROWS * COLS);
    free(want);
    rj_bind_free(b);
    setup_free(&s);
}

/* The run's memory is planned, allocated and faulted in at prepare; the run adds nothing. */
static void test_prepare_then_run(void **state) {
    fixture *f = *state;
    setup s, r;
    setup_new(f, &s, RJ_TARGET_CPU);
    setup_new(f, &r, RJ_TARGET_REFERENCE);
    assert_ok(f->ctx, rj_ctx_set_threads(f->ctx, 3));
    rj_bind *b = bound(f, &s);
    rj_run_stats st;
    assert_int_equal(rj_bind_stats(b, &st), RJ_ERR_ARG); /* nothing yet */
    int before = thread_count();
    assert_ok(f->ctx, rj_bind_prepare(b));
    if (before > 0) assert_int_equal(thread_count(), before + 2); /* the workers of 3 threads */
    assert_ok(f->ctx, rj_bind_stats(b, &st));
    assert_int_equal(st.temp_bytes, ARENA);
    assert_true(st.run_ms == 0 && st.kernels == 0);
    long allocs = f->tr.allocs, live = f->tr.live_blocks, pf = faults_now();
    assert_ok(f->ctx, rj_program_run(s.p, b));
    pf = faults_now() - pf;
    assert_int_equal(f->tr.allocs, allocs); /* everything the run needed was there */
    assert_int_equal(f->tr.live_blocks, live);
    if (pf > ARENA / 4096 / 8)
        fail_msg("the run after rj_bind_prepare faulted in %ld pages (its arena has %lld)", pf,
                 (long long)(ARENA / 4096));
    assert_ok(f->ctx, rj_bind_stats(b, &st));
    assert_int_equal(st.temp_bytes, ARENA);

    /* the control: a binding that was not prepared faults its arena in during its first run */
    rj_bind *b2 = bound(f, &s);
    pf = faults_now();
    assert_ok(f->ctx, rj_program_run(s.p, b2));
    pf = faults_now() - pf;
    if (pf < ARENA / 4096 / 2)
        fail_msg("a first run without rj_bind_prepare faulted in only %ld pages of %lld: the count "
                 "cannot tell", pf, (long long)(ARENA / 4096));

    /* outputs ragjit places are allocated and touched at prepare too */
    rj_bind *b3 = rj_bind_new(s.p);
    assert_ok(f->ctx, rj_bind_offsets(b3, s.j, 4, offs, NULL));
    assert_ok(f->ctx, rj_bind_input(b3, s.x, s.xs, ROWS * COLS));
    assert_ok(f->ctx, rj_bind_prepare(b3));
    pf = faults_now();
    assert_ok(f->ctx, rj_program_run(s.p, b3));
    pf = faults_now() - pf;
    if (pf > (ARENA + ROWS * COLS * 4) / 4096 / 8)
        fail_msg("a prepared run placing its output faulted in %ld pages", pf);
    rj_tensor_info ti;
    assert_ok(f->ctx, rj_tensor_get_info(rj_bind_result(b3, s.c), &ti));
    assert_memory_equal(ti.values, s.y, sizeof(float) * ROWS * COLS);
    rj_bind_free(b3);

    /* the result is the reference's */
    float *want = malloc(sizeof(float) * ROWS * COLS);
    assert_non_null(want);
    memcpy(want, s.y, sizeof(float) * ROWS * COLS);
    rj_bind *br = bound(f, &r);
    assert_ok(f->ctx, rj_program_run(r.p, br));
    for (int64_t i = 0; i < ROWS * COLS; i++)
        if (fabsf(want[i] - r.y[i]) > 1e-5f + 1e-4f * fabsf(r.y[i]))
            fail_msg("c[%lld] = %g, reference %g", (long long)i, want[i], r.y[i]);
    free(want);
    rj_bind_free(b), rj_bind_free(b2), rj_bind_free(br);
    setup_free(&s), setup_free(&r);
}

/* The memory limit counts what prepare plans, and a plan above it fails there with the message
 * a run gives; bindings it cannot resolve fail as a run would; the reference target only
 * checks. */
static void test_prepare_limit_and_errors(void **state) {
    fixture *f = *state;
    setup s;
    setup_new(f, &s, RJ_TARGET_CPU);
    rj_bind *b = bound(f, &s);
    assert_ok(f->ctx, rj_ctx_set_memory_limit(f->ctx, ARENA - 1));
    assert_int_equal(rj_bind_prepare(b), RJ_ERR_SIZE);
    assert_error_contains(f->ctx, "the temporaries needs 16777216 bytes");
    assert_error_contains(f->ctx, "above the memory limit of 16777215 bytes");
    rj_run_stats st;
    assert_int_equal(rj_bind_stats(b, &st), RJ_ERR_ARG); /* a failed prepare reports nothing */
    assert_int_equal(rj_program_run(s.p, b), RJ_ERR_SIZE); /* nor does the run get around it */
    assert_ok(f->ctx, rj_ctx_set_memory_limit(f->ctx, 0));
    assert_ok(f->ctx, rj_bind_prepare(b));
    assert_ok(f->ctx, rj_bind_stats(b, &st));
    assert_int_equal(st.temp_bytes, ARENA);
    /* binding again voids the plan's report, not its memory: the run needs nothing new */
    assert_ok(f->ctx, rj_bind_input(b, s.x, s.xs, ROWS * COLS));
    assert_int_equal(rj_bind_stats(b, &st), RJ_ERR_ARG);
    long allocs = f->tr.allocs;
    assert_ok(f->ctx, rj_program_run(s.p, b));
    assert_int_equal(f->tr.allocs, allocs);
    rj_bind_free(b);

    /* an input not bound: the run's message */
    b = rj_bind_new(s.p);
    assert_ok(f->ctx, rj_bind_offsets(b, s.j, 4, offs, NULL));
    assert_int_equal(rj_bind_prepare(b), RJ_ERR_UNBOUND);
    assert_error_contains(f->ctx, "x");
    rj_bind_free(b);
    assert_int_equal(rj_bind_prepare(NULL), RJ_ERR_ARG);
    setup_free(&s);

    setup_new(f, &s, RJ_TARGET_REFERENCE);
    b = bound(f, &s);
    assert_ok(f->ctx, rj_bind_prepare(b));
    assert_ok(f->ctx, rj_bind_stats(b, &st));
    assert_int_equal(st.temp_bytes, 0);
    assert_ok(f->ctx, rj_program_run(s.p, b));
    rj_bind_free(b);
    setup_free(&s);
}

int main(int argc, char **argv) {
    mallopt(M_MMAP_THRESHOLD, 1 << 20); /* large blocks always fresh mappings (see the top) */
    const struct CMUnitTest tests[] = {
        FX(test_prepare_then_run),
        FX(test_prepare_limit_and_errors),
        FX(test_prepare_huge_pages),
    };
    return run_group(tests, NULL, NULL, argc, argv);
}
