/*
 * test_pool.c — the CPU target's threads: ragjit's own pool (src/runtime/pool.c) and an
 * embedder's pool given through rj_ctx_set_parallel.
 *
 * The pool itself, through its internal call: every chunk runs exactly once and has finished
 * when pool_run returns, slots stay in range and no two chunks running at once share one
 * (each slot's flag is taken with an atomic exchange), with a dozen callers at once (more
 * than the pool has job entries, so some runs find none free and run alone) and with chunks
 * that sleep, as a worker the OS does not schedule would.
 *
 * Programs: a model-like program (a linear layer with GELU and a second product, softmax over
 * the ragged dim, per-item attention products: row chunks, item chunks and per-thread scratch)
 * on a few thousand rows of random lengths runs on the interpreter (the reference, compared
 * under test_jit's tolerances) and on 4 threads of ragjit's pool; then on a pool written here
 * and given as the hook, whose results must be bitwise those of ragjit's pool (chunks do not
 * depend on which thread runs them); then on a hook pool that runs call 0 to its end before
 * it starts the others, late, on a thread that sleeps first: results the same, and the late
 * calls find nothing left to do (they take far less time than call 0). Last, several threads
 * run the program at once on one context with ragjit's pool (the ThreadSanitizer stage of
 * build.sh runs this test as it runs test_threads). A caller pinned to one processor starts
 * workers that are not pinned with it (they take the mask the process started with).
 */
#include "stdenv.h"

#include "../src/runtime/pool.h"

#include <dirent.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double mono_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

/* ---- the pool, directly ------------------------------------------------------------------- */

#define MAX_SLOTS 8
#define MAX_CHUNKS 300

typedef struct chunk_check {
    int slots;
    int count[MAX_CHUNKS]; /* atomic */
    int busy[MAX_SLOTS];   /* atomic: 1 while a chunk runs in the slot */
    int bad;               /* atomic: a slot out of range or shared */
    int sleepy;            /* chunks c with c % 16 == 15 sleep this many microseconds */
} chunk_check;

static void check_task(void *arg, int64_t c, int slot) {
    chunk_check *k = arg;
    if (slot < 0 || slot >= k->slots || __atomic_exchange_n(&k->busy[slot], 1, __ATOMIC_ACQ_REL)) {
        __atomic_add_fetch(&k->bad, 1, __ATOMIC_RELAXED);
        return;
    }
    if (k->sleepy && c % 16 == 15) usleep((useconds_t)k->sleepy);
    else
        for (volatile int i = 0; i < 200; i = i + 1) {
        }
    __atomic_store_n(&k->busy[slot], 0, __ATOMIC_RELEASE);
    __atomic_add_fetch(&k->count[c], 1, __ATOMIC_RELEASE);
}

typedef struct caller {
    rj_ctx *ctx;
    pool *p;
    uint64_t rng;
    int reps, bad;
} caller;

static void *call_loop(void *arg) {
    caller *c = arg;
    static chunk_check zero;
    chunk_check *k = malloc(sizeof *k);
    for (int r = 0; r < c->reps && !c->bad; r++) {
        *k = zero;
        int64_t n = rng_int(&c->rng, 0, MAX_CHUNKS);
        k->slots = (int)rng_int(&c->rng, 1, MAX_SLOTS);
        k->sleepy = r % 8 == 7 ? 300 : 0;
        pool_run(c->ctx, c->p, n, k->slots, check_task, k);
        if (__atomic_load_n(&k->bad, __ATOMIC_RELAXED)) c->bad = 1;
        for (int64_t i = 0; i < MAX_CHUNKS; i++)
            if (__atomic_load_n(&k->count[i], __ATOMIC_ACQUIRE) != (i < n)) c->bad = 2;
    }
    free(k);
    return NULL;
}

static void test_pool_chunks(void **state) {
    (void)state;
    rj_ctx *ctx = rj_ctx_new(NULL, NULL);
    pool *p = pool_new(ctx, MAX_SLOTS);
    assert_non_null(p);
    enum { CALLERS = 12 };
    caller cs[CALLERS];
    pthread_t th[CALLERS];
    for (int t = 0; t < CALLERS; t++) {
        cs[t] = (caller){.ctx = ctx, .p = p, .rng = 77 + (uint64_t)t, .reps = t == 0 ? 400 : 100};
        assert_int_equal(pthread_create(&th[t], NULL, call_loop, &cs[t]), 0);
    }
    for (int t = 0; t < CALLERS; t++) pthread_join(th[t], NULL);
    for (int t = 0; t < CALLERS; t++)
        if (cs[t].bad) fail_msg("caller %d: %s", t, cs[t].bad == 1 ? "a slot out of range or shared" :
                                "a chunk not run exactly once, or not finished when pool_run returned");
    pool_free(ctx, p);
    rj_ctx_free(ctx);
}

/* ---- programs ------------------------------------------------------------------------------ */

static const char *const source =
    "ragged j1 : B\n"
    "input x : f32[B, j1, 64]\n"
    "input w1 : f32[128, 64]\n"
    "input b1 : f32[128]\n"
    "input w2 : f32[128, 64]\n"
    "h = gelu(linear(x, w1, b1))\n"
    "y = h @ w2 + x\n"
    "s = softmax(y * 0.5, dim=1)\n"
    "p = softmax(y @ x.transpose(1, 2) / 8.0, dim=2)\n"
    "o = p @ x\n"
    "output s, o\n";

enum { ITEMS = 16 };

typedef struct model {
    rj_ctx *ctx;
    rj_graph *g;
    int64_t off[ITEMS + 1], rows;
    float *x, *w1, *b1, *w2;
} model;

static float *random_floats(uint64_t *rng, int64_t n, double scale) {
    float *f = malloc(sizeof(float) * (size_t)(n ? n : 1));
    for (int64_t i = 0; i < n; i++) f[i] = (float)rng_uniform(rng, -scale, scale);
    return f;
}

static model model_new(rj_ctx *ctx) {
    model m = {.ctx = ctx, .g = rj_graph_parse(ctx, source, "pool.rj")};
    if (!m.g) fail_msg("parse: %s", rj_ctx_error(ctx));
    uint64_t rng = 5;
    for (int b = 0; b < ITEMS; b++) m.off[b + 1] = m.off[b] + (b == 3 ? 0 : rng_int(&rng, 1, 120));
    m.rows = m.off[ITEMS];
    m.x = random_floats(&rng, m.rows * 64, 1.0);
    m.w1 = random_floats(&rng, 128 * 64, 0.2);
    m.b1 = random_floats(&rng, 128, 0.2);
    m.w2 = random_floats(&rng, 128 * 64, 0.2);
    return m;
}

static void model_free(model *m) {
    rj_graph_free(m->g);
    free(m->x);
    free(m->w1);
    free(m->b1);
    free(m->w2);
}

static void model_bind(const model *m, rj_bind *b) {
    rj_ctx *ctx = m->ctx;
    assert_ok(ctx, rj_bind_offsets(b, rj_graph_find_dim(m->g, "j1"), ITEMS, m->off, NULL));
    assert_ok(ctx, rj_bind_input(b, rj_graph_find(m->g, "x"), m->x, m->rows * 64));
    assert_ok(ctx, rj_bind_input(b, rj_graph_find(m->g, "w1"), m->w1, 128 * 64));
    assert_ok(ctx, rj_bind_input(b, rj_graph_find(m->g, "b1"), m->b1, 128));
    assert_ok(ctx, rj_bind_input(b, rj_graph_find(m->g, "w2"), m->w2, 128 * 64));
}

static void result_info(const model *m, rj_bind *b, int o, rj_tensor_info *ti) {
    assert_int_equal(rj_tensor_get_info(rj_bind_result(b, rj_graph_output_at(m->g, o)), ti), RJ_OK);
}

/* Runs p on a new binding and checks each output bitwise against want's (a binding that ran
 * the same program); when want is NULL, checks against the interpreter's binding ref instead. */
static void run_and_check(const model *m, rj_program *p, rj_bind *want, rj_bind *ref, const char *what) {
    rj_ctx *ctx = m->ctx;
    rj_bind *b = rj_bind_new(p);
    model_bind(m, b);
    rj_status s = rj_program_run(p, b);
    if (s) fail_msg("%s: run: %s", what, rj_ctx_error(ctx));
    for (int o = 0; o < rj_graph_output_count(m->g); o++) {
        rj_tensor_info got, exp;
        result_info(m, b, o, &got);
        result_info(m, want ? want : ref, o, &exp);
        if (!want) {
            compare(what, &got, &exp);
            continue;
        }
        assert_int_equal(numel_of(&got), numel_of(&exp));
        if (memcmp(got.values, exp.values, sizeof(float) * (size_t)numel_of(&got)))
            fail_msg("%s: output %d differs from ragjit's pool's", what, o);
    }
    rj_bind_free(b);
}

/* A thread pool of the embedder's, as the hook sees it: THREADS - 1 threads and the caller.
 * late_first: call 0 runs on the caller to its end before the others start, and thread 1
 * sleeps before each call it takes (a worker the OS does not schedule). */
#define HOOK_THREADS 4
typedef struct hook_pool {
    pthread_mutex_t lock;
    pthread_cond_t go, fin;
    rj_task_fn task;
    void *arg;
    int n, next, done;
    bool stop, late_first, open; /* open: the threads may take calls */
    pthread_t th[HOOK_THREADS - 1];
    int calls, bad;         /* fn calls; calls out of contract */
    int worker_tasks;       /* task calls made by the pool's threads */
    double first_ms, late_ms; /* time inside call 0, and inside the late calls */
} hook_pool;

typedef struct hook_thread {
    hook_pool *hp;
    int id;
} hook_thread;

static void hook_one(hook_pool *hp, int i, bool late) {
    double t0 = mono_ms();
    hp->task(hp->arg, i);
    double dt = mono_ms() - t0;
    pthread_mutex_lock(&hp->lock);
    if (late) hp->late_ms += dt;
    else if (i == 0) hp->first_ms += dt;
    pthread_mutex_unlock(&hp->lock);
}

static void *hook_thread_main(void *arg) {
    hook_thread *t = arg;
    hook_pool *hp = t->hp;
    pthread_mutex_lock(&hp->lock);
    for (;;) {
        while (!hp->stop && !(hp->open && hp->next < hp->n)) pthread_cond_wait(&hp->go, &hp->lock);
        if (hp->stop) break;
        int i = hp->next++;
        hp->worker_tasks++;
        bool late = hp->late_first;
        pthread_mutex_unlock(&hp->lock);
        if (late && t->id == 1) usleep(2000);
        hook_one(hp, i, late);
        pthread_mutex_lock(&hp->lock);
        if (++hp->done == hp->n) pthread_cond_broadcast(&hp->fin);
    }
    pthread_mutex_unlock(&hp->lock);
    return NULL;
}

static void hook_fn(void *user, int n, rj_task_fn task, void *arg) {
    hook_pool *hp = user;
    pthread_mutex_lock(&hp->lock);
    hp->calls++;
    if (n < 2 || n > HOOK_THREADS || hp->n) hp->bad++; /* one run at a time in these tests */
    hp->task = task, hp->arg = arg, hp->n = n, hp->done = 0;
    hp->next = 1; /* call 0 is the caller's */
    hp->open = !hp->late_first;
    if (hp->open) pthread_cond_broadcast(&hp->go);
    pthread_mutex_unlock(&hp->lock);
    hook_one(hp, 0, false);
    pthread_mutex_lock(&hp->lock);
    if (!hp->open) { /* the others only now */
        hp->open = true;
        pthread_cond_broadcast(&hp->go);
    }
    hp->done++;
    while (hp->done < n) pthread_cond_wait(&hp->fin, &hp->lock);
    hp->n = 0;
    hp->open = false;
    pthread_mutex_unlock(&hp->lock);
}

static void hook_start(hook_pool *hp, hook_thread *ts) {
    memset(hp, 0, sizeof *hp);
    pthread_mutex_init(&hp->lock, NULL);
    pthread_cond_init(&hp->go, NULL);
    pthread_cond_init(&hp->fin, NULL);
    for (int t = 0; t < HOOK_THREADS - 1; t++) {
        ts[t] = (hook_thread){.hp = hp, .id = t + 1};
        assert_int_equal(pthread_create(&hp->th[t], NULL, hook_thread_main, &ts[t]), 0);
    }
}

static void hook_stop(hook_pool *hp) {
    pthread_mutex_lock(&hp->lock);
    hp->stop = true;
    pthread_cond_broadcast(&hp->go);
    pthread_mutex_unlock(&hp->lock);
    for (int t = 0; t < HOOK_THREADS - 1; t++) pthread_join(hp->th[t], NULL);
    pthread_mutex_destroy(&hp->lock);
    pthread_cond_destroy(&hp->go);
    pthread_cond_destroy(&hp->fin);
}

/* Several threads run the program at once on one context, with ragjit's pool. */
typedef struct runner {
    const model *m;
    rj_program *p;
    rj_bind *want, *b;
    int reps, bad; /* cmocka's asserts belong to the main thread: failures are counted */
} runner;

static void *run_loop(void *arg) {
    runner *r = arg;
    for (int i = 0; i < r->reps && !r->bad; i++) {
        if (rj_program_run(r->p, r->b)) r->bad++;
        for (int o = 0; !r->bad && o < rj_graph_output_count(r->m->g); o++) {
            rj_tensor_info got, exp;
            if (rj_tensor_get_info(rj_bind_result(r->b, rj_graph_output_at(r->m->g, o)), &got) ||
                rj_tensor_get_info(rj_bind_result(r->want, rj_graph_output_at(r->m->g, o)), &exp) ||
                numel_of(&got) != numel_of(&exp) ||
                memcmp(got.values, exp.values, sizeof(float) * (size_t)numel_of(&got)))
                r->bad++;
        }
    }
    return NULL;
}

static void test_programs(void **state) {
    fixture *f = *state;
    rj_ctx *ctx = f->ctx;
    model m = model_new(ctx);
    /* compiled on one thread: LLVM's compile threads are noise to ThreadSanitizer (test_threads) */
    assert_ok(ctx, rj_ctx_set_threads(ctx, 1));
    rj_program *pr = rj_program_new(m.g, RJ_TARGET_REFERENCE), *pc = rj_program_new(m.g, RJ_TARGET_CPU);
    assert_non_null(pr);
    if (!pc) fail_msg("compile: %s", rj_ctx_error(ctx));
    rj_bind *ref = rj_bind_new(pr), *own = rj_bind_new(pc);
    model_bind(&m, ref);
    assert_ok(ctx, rj_program_run(pr, ref));
    /* ragjit's own pool, against the interpreter */
    assert_ok(ctx, rj_ctx_set_threads(ctx, HOOK_THREADS));
    model_bind(&m, own);
    assert_ok(ctx, rj_program_run(pc, own));
    run_and_check(&m, pc, NULL, ref, "ragjit's pool");

    /* the embedder's pool: called, and the same results */
    hook_pool hp;
    hook_thread ts[HOOK_THREADS - 1];
    hook_start(&hp, ts);
    assert_ok(ctx, rj_ctx_set_parallel(ctx, hook_fn, &hp));
    run_and_check(&m, pc, own, NULL, "the hook's pool");
    printf("hook: %d calls, %d task calls on its threads\n", hp.calls, hp.worker_tasks);
    assert_true(hp.calls > 0);
    assert_int_equal(hp.bad, 0);
    assert_true(hp.worker_tasks > 0);

    /* a hook whose other threads start only after call 0 has finished, one of them asleep
     * first: call 0 does every chunk, the late calls find none */
    hp.late_first = true;
    bool idle = false; /* up to three tries: a late call the OS preempts would look busy */
    for (int attempt = 0; attempt < 3 && !idle; attempt++) {
        hp.calls = 0, hp.first_ms = hp.late_ms = 0;
        run_and_check(&m, pc, own, NULL, "the hook's pool, calls after the first late");
        printf("late calls: %.3f ms in all, against %.3f ms in the first calls\n", hp.late_ms, hp.first_ms);
        assert_true(hp.calls > 0);
        assert_int_equal(hp.bad, 0);
        idle = hp.late_ms < hp.first_ms / 4;
    }
    assert_true(idle);
    assert_ok(ctx, rj_ctx_set_parallel(ctx, NULL, NULL));
    hook_stop(&hp);

    /* one context, runs from several threads at once, ragjit's pool */
    enum { RUNNERS = 4 };
    runner rs[RUNNERS];
    pthread_t th[RUNNERS];
    for (int t = 0; t < RUNNERS; t++) {
        rs[t] = (runner){.m = &m, .p = pc, .want = own, .b = rj_bind_new(pc), .reps = 6};
        model_bind(&m, rs[t].b);
        assert_int_equal(pthread_create(&th[t], NULL, run_loop, &rs[t]), 0);
    }
    for (int t = 0; t < RUNNERS; t++) pthread_join(th[t], NULL);
    for (int t = 0; t < RUNNERS; t++) {
        if (rs[t].bad) fail_msg("concurrent runs: thread %d: a run failed or differs (%s)", t, rj_ctx_error(ctx));
        rj_bind_free(rs[t].b);
    }

    /* NULL context */
    assert_int_equal(rj_ctx_set_parallel(NULL, hook_fn, NULL), RJ_ERR_ARG);
    rj_bind_free(own);
    rj_bind_free(ref);
    rj_program_free(pc);
    rj_program_free(pr);
    model_free(&m);
}

/* A caller pinned to one processor: the workers it starts keep the process's processors. */
typedef struct pinned {
    model *m;
    rj_program *p;
    int status;
} pinned;

static void *pinned_run(void *arg) {
    pinned *pn = arg;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(sched_getcpu() >= 0 ? sched_getcpu() : 0, &one);
    pn->status = -1;
    if (sched_setaffinity(0, sizeof one, &one)) return NULL;
    rj_bind *b = rj_bind_new(pn->p);
    model_bind(pn->m, b);
    pn->status = rj_program_run(pn->p, b);
    rj_bind_free(b);
    return NULL;
}

/* Threads of this process allowed on fewer processors than the process. */
static int narrow_threads(int want) {
    DIR *d = opendir("/proc/self/task");
    int narrow = 0;
    for (struct dirent *e; d && (e = readdir(d));) {
        if (e->d_name[0] == '.') continue;
        cpu_set_t set;
        if (!sched_getaffinity((pid_t)atoi(e->d_name), sizeof set, &set) && CPU_COUNT(&set) < want) narrow++;
    }
    if (d) closedir(d);
    return narrow;
}

static void test_pinned_caller(void **state) {
    fixture *f = *state;
    cpu_set_t all;
    assert_int_equal(sched_getaffinity(0, sizeof all, &all), 0);
    if (CPU_COUNT(&all) < 2) skip();
    model m = model_new(f->ctx);
    assert_ok(f->ctx, rj_ctx_set_threads(f->ctx, 1));
    rj_program *p = rj_program_new(m.g, RJ_TARGET_CPU);
    assert_non_null(p);
    assert_ok(f->ctx, rj_ctx_set_threads(f->ctx, 2));
    pinned pn = {.m = &m, .p = p};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, pinned_run, &pn), 0);
    pthread_join(th, NULL);
    assert_int_equal(pn.status, RJ_OK);
    /* the worker the pinned thread started is alive (the context is) and not pinned */
    assert_int_equal(narrow_threads(CPU_COUNT(&all)), 0);
    rj_program_free(p);
    model_free(&m);
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pool_chunks),
        FX(test_programs),
        FX(test_pinned_caller),
    };
    return run_group(tests, NULL, NULL, argc, argv);
}
