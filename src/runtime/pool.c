/*
 * pool.c — ragjit's own worker threads, and the embedder's pool (rj_ctx_set_parallel).
 *
 * Why not OpenMP. A `parallel for` ends only when every thread of its team has arrived, so
 * one worker the OS does not schedule — a core shared with another process, a model runtime's
 * own pool, other requests — holds the whole kernel up, however small the chunks: with one of
 * two cores busy, a 2-thread run took three times as long as a 1-thread run (issue 36). Here a
 * run counts finished chunks, not threads: the calling thread claims chunks itself, workers
 * that are awake claim the others, and the run ends when the last chunk is finished. A worker
 * that wakes late finds no chunk left and goes back to sleep; one descheduled while it holds a
 * chunk delays the run by that chunk only.
 *
 * Jobs. Each parallel kernel publishes a job: the chunks, a counter that hands them out (an
 * atomic add), a counter of finished ones and a counter of slots (the scratch indices, 0 the
 * caller's). Several runs may be in flight on one context (one program on many threads), so
 * the pool holds a few jobs at once and a worker takes any job with chunks left; a run that
 * finds every job entry taken runs its kernel on its own thread. Job entries belong to the
 * pool, not to the run: a worker that entered a job and was then descheduled still holds a
 * reference to it, and the run returns without waiting for it (it finds the claim counter
 * past the end and lets go). An entry is reused only once nobody holds it.
 *
 * Sleeping. Workers wait on a condition variable when there is no work; between a kernel and
 * the next (a run is a sequence of kernels, microseconds apart) a worker first spins for a
 * bounded time, watching the publication counter, so it does not pay a wake-up per kernel.
 * A caller waiting for chunks that others hold spins briefly too, then sleeps: on a busy
 * machine the thread it waits for may need its core. Workers run under SCHED_BATCH, so that
 * waking one does not take the processor from the caller at once (worker_main). Where the
 * machine is so busy that woken workers keep missing jobs they had time for, the caller stops
 * waking them for every job (publish): with a 5 to 10 times oversubscribed 2-core machine
 * and one core spinning, a 1 ms softmax's 2-thread median went from 1.5-2.7x its 1-thread
 * median in 3 of 7 trials to 0.53-0.75x in 8 of 8 (bench_busy; bench/NOTES.md).
 *
 * The embedder's pool gets the same job through its function: n calls, each claiming chunks
 * with its own slot until none is left, so the pool's scheduling cannot hold a run up either.
 */
#include <time.h>

#include "pool.h"

#define POOL_JOBS 8
#define WORKER_SPIN_NS 50000 /* a worker between kernels */
#define CALLER_SPIN_NS 5000  /* a caller waiting for the last chunks */
#define MISSES 4             /* jobs in a row that woken workers missed ... */
#define PROBE_EVERY 8        /* ... and workers are woken for one job in this many */
#define LATE_WAKE_NS 5000000 /* ... or once a job has run this long */
#define SHORT_JOB_NS 50000   /* a job this short says nothing of the workers */

typedef struct job {
    pool_task task;
    void *arg;
    int64_t nchunks;
    int slots;
    int64_t next;  /* the next chunk to claim (atomic; past nchunks once all are claimed) */
    int64_t done;  /* chunks finished (atomic) */
    int slot_next; /* the next slot for a thread joining the job (atomic) */
    int refs;      /* the caller and the workers inside (atomic; 0: the entry is free) */
} job;

struct pool {
    pthread_mutex_t lock;
    pthread_cond_t work;   /* workers wait here for a job */
    pthread_cond_t fin;    /* callers wait here for their job's last chunks */
    unsigned gen;          /* jobs published (atomic): what spinning workers watch */
    int missed;            /* long jobs in a row the caller ran alone, up to MISSES (atomic) */
    int ready;             /* workers that have entered their loop (atomic): until all have, a
                            * job the caller ran alone says nothing of them */
    int sleepers, waiters; /* workers on `work`, callers on `fin` */
    bool stop;
    int nthreads, max_threads;
    pthread_t *threads;
    job jobs[POOL_JOBS];
};

static int64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* Wakes up to n sleeping workers. Under the pool's lock. */
static void wake_workers(pool *p, int n) {
    for (int k = 0; k < n && k < p->sleepers; k++) pthread_cond_signal(&p->work);
}

/* Claims chunks of j and runs them with `slot` until none is left; true when this thread
 * finished the job's last chunk. *ran (if not NULL): the chunks it ran. A caller that has not
 * woken the workers (publish) passes the time to do so in *wake_at (0: none), cleared once
 * done. */
static bool job_work(pool *p, job *j, int slot, int64_t *wake_at, int64_t *ran) {
    int64_t c, n = 0;
    bool last = false;
    while ((c = __atomic_fetch_add(&j->next, 1, __ATOMIC_RELAXED)) < j->nchunks) {
        j->task(j->arg, c, slot);
        n++;
        last = __atomic_add_fetch(&j->done, 1, __ATOMIC_ACQ_REL) == j->nchunks;
        if (wake_at && *wake_at && now_ns() >= *wake_at) {
            *wake_at = 0;
            pthread_mutex_lock(&p->lock);
            wake_workers(p, j->slots - 1);
            pthread_mutex_unlock(&p->lock);
        }
    }
    if (ran) *ran = n;
    return last;
}

static bool job_wants(const job *j) {
    return __atomic_load_n(&j->refs, __ATOMIC_ACQUIRE) > 0 &&
           __atomic_load_n(&j->next, __ATOMIC_RELAXED) < j->nchunks &&
           __atomic_load_n(&j->slot_next, __ATOMIC_RELAXED) < j->slots;
}

/* Spins until a job is published after `gen` or `ns` pass; whether one was. */
static bool spin_for_job(pool *p, unsigned gen, int64_t ns) {
    int64_t end = now_ns() + ns;
    do {
        for (int i = 0; i < 32; i++) {
            if (__atomic_load_n(&p->gen, __ATOMIC_ACQUIRE) != gen) return true;
            cpu_relax();
        }
    } while (now_ns() < end);
    return false;
}

static void *worker_main(void *arg) {
    pool *p = arg;
    bool spun = false;
    /* SCHED_BATCH: the same share of the processor, but a worker woken for a job never
     * preempts the thread running where it wakes, which is most often the caller that woke it
     * (the scheduler places a wakee beside its waker). Without it, on a 2-core machine shared
     * with other processes, the caller lost its processor at the wake-up in about one run of
     * three and waited behind the other processes for several milliseconds: a 1 ms softmax
     * took 3-9 ms (median) on 2 threads against 1.1 ms on one (bench_busy, W2 small); with it
     * 0.9-1.0 ms against 0.9-1.2 (4 of 4 phases). A refusal (no such policy) changes nothing
     * else. */
    struct sched_param sp = {0};
    pthread_setschedparam(pthread_self(), SCHED_BATCH, &sp);
    __atomic_add_fetch(&p->ready, 1, __ATOMIC_RELEASE);
    pthread_mutex_lock(&p->lock);
    while (!p->stop) {
        job *j = NULL;
        for (int i = 0; i < POOL_JOBS && !j; i++)
            if (job_wants(&p->jobs[i])) j = &p->jobs[i];
        unsigned gen = __atomic_load_n(&p->gen, __ATOMIC_RELAXED);
        if (j) {
            __atomic_add_fetch(&j->refs, 1, __ATOMIC_RELAXED); /* under the lock: the entry stays */
            pthread_mutex_unlock(&p->lock);
            int slot = __atomic_fetch_add(&j->slot_next, 1, __ATOMIC_RELAXED);
            bool last = slot < j->slots && job_work(p, j, slot, NULL, NULL);
            if (last) {
                pthread_mutex_lock(&p->lock);
                if (p->waiters) pthread_cond_broadcast(&p->fin);
                pthread_mutex_unlock(&p->lock);
            }
            __atomic_sub_fetch(&j->refs, 1, __ATOMIC_RELEASE);
            spun = false;
            pthread_mutex_lock(&p->lock);
        } else if (!spun) { /* the next kernel is likely microseconds away */
            pthread_mutex_unlock(&p->lock);
            spin_for_job(p, gen, WORKER_SPIN_NS);
            spun = true;
            pthread_mutex_lock(&p->lock);
        } else {
            p->sleepers++;
            pthread_cond_wait(&p->work, &p->lock);
            p->sleepers--;
            spun = false;
        }
    }
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

pool *pool_new(rj_ctx *ctx, int max_threads) {
    pool *p = mem_zalloc(ctx, sizeof *p);
    if (!p) return NULL;
    p->max_threads = max_threads > 1 ? max_threads - 1 : 0;
    if (p->max_threads && !(p->threads = mem_zalloc(ctx, sizeof(pthread_t) * (size_t)p->max_threads))) {
        mem_free(ctx, p, sizeof *p);
        return NULL;
    }
    bool m = !pthread_mutex_init(&p->lock, NULL), w = !pthread_cond_init(&p->work, NULL),
         f = !pthread_cond_init(&p->fin, NULL);
    if (m && w && f) return p;
    if (m) pthread_mutex_destroy(&p->lock);
    if (w) pthread_cond_destroy(&p->work);
    if (f) pthread_cond_destroy(&p->fin);
    mem_free(ctx, p->threads, sizeof(pthread_t) * (size_t)p->max_threads);
    mem_free(ctx, p, sizeof *p);
    ctx_fail(ctx, RJ_ERR_NOMEM, "cannot create the CPU worker pool's lock");
    return NULL;
}

void pool_free(rj_ctx *ctx, pool *p) {
    if (!p) return;
    pthread_mutex_lock(&p->lock);
    p->stop = true;
    pthread_cond_broadcast(&p->work);
    pthread_mutex_unlock(&p->lock);
    for (int i = 0; i < p->nthreads; i++) pthread_join(p->threads[i], NULL);
    pthread_mutex_destroy(&p->lock);
    pthread_cond_destroy(&p->work);
    pthread_cond_destroy(&p->fin);
    mem_free(ctx, p->threads, sizeof(pthread_t) * (size_t)p->max_threads);
    mem_free(ctx, p, sizeof *p);
}

/* The embedder's pool: call i claims chunks with slot i. */
static void hook_task(void *arg, int i) {
    job *j = arg;
    if (i >= 0 && i < j->slots) job_work(NULL, j, i, NULL, NULL);
}

/* A new worker, on the processors the process started with (cpus_start_set), not only the
 * calling thread's: a caller pinned to one processor would otherwise pin its workers there. */
static bool start_worker(pool *p) {
    pthread_attr_t attr;
    cpu_set_t set;
    if (pthread_attr_init(&attr)) return false;
    if (cpus_start_set(&set)) pthread_attr_setaffinity_np(&attr, sizeof set, &set);
    bool ok = !pthread_create(&p->threads[p->nthreads], &attr, worker_main, p);
    pthread_attr_destroy(&attr);
    return ok;
}

void pool_start(pool *p, int n) {
    if (!p || n <= 1) return;
    pthread_mutex_lock(&p->lock);
    while (p->nthreads < n - 1 && p->nthreads < p->max_threads && start_worker(p)) p->nthreads++;
    pthread_mutex_unlock(&p->lock);
}

/* A free job entry, filled and published, with the workers it wants started and (*woken)
 * woken, (*started) whether every worker had entered its loop; NULL when every entry is taken.
 * Under the pool's lock. */
static job *publish(pool *p, int64_t nchunks, int slots, pool_task task, void *arg, bool *woken, bool *started) {
    job *j = NULL;
    for (int i = 0; i < POOL_JOBS && !j; i++)
        if (!__atomic_load_n(&p->jobs[i].refs, __ATOMIC_ACQUIRE)) j = &p->jobs[i];
    if (!j) return NULL;
    *j = (job){.task = task, .arg = arg, .nchunks = nchunks, .slots = slots, .slot_next = 1, .refs = 1};
    /* workers are started as runs first want them (or rj_bind_prepare); one that cannot be
     * started is done without */
    while (p->nthreads < slots - 1 && p->nthreads < p->max_threads && start_worker(p)) p->nthreads++;
    *started = __atomic_load_n(&p->ready, __ATOMIC_ACQUIRE) >= p->nthreads;
    unsigned gen = __atomic_add_fetch(&p->gen, 1, __ATOMIC_RELEASE);
    /* Sleeping workers are woken now unless the last long jobs ran without them: on a machine
     * busier than its processors a woken worker may get none before the caller is done, and a
     * wake-up still costs the caller (the scheduler may give the wakee its processor at the
     * next tick, and the caller then waits behind other processes). Then one job in
     * PROBE_EVERY wakes them, to see whether they would help again, and the others only once
     * they have run LATE_WAKE_NS (pool_run); spinning workers take part whatever this says. */
    *woken = __atomic_load_n(&p->missed, __ATOMIC_RELAXED) < MISSES || gen % PROBE_EVERY == 0;
    if (*woken) wake_workers(p, slots - 1);
    return j;
}

void pool_run(rj_ctx *ctx, pool *p, int64_t nchunks, int slots, pool_task task, void *arg) {
    if (slots > nchunks) slots = (int)nchunks;
    if (slots > 1 && ctx->parallel) {
        job j = {.task = task, .arg = arg, .nchunks = nchunks, .slots = slots};
        ctx->parallel(ctx->parallel_user, slots, hook_task, &j);
        return;
    }
    job *j = NULL;
    bool woken = false, started = false;
    if (slots > 1 && p) {
        pthread_mutex_lock(&p->lock);
        j = publish(p, nchunks, slots, task, arg, &woken, &started);
        pthread_mutex_unlock(&p->lock);
    }
    if (!j) { /* one thread, or every job entry taken by other runs */
        for (int64_t c = 0; c < nchunks; c++) task(arg, c, 0);
        return;
    }
    int64_t mine = 0, t0 = now_ns(), wake_at = woken ? 0 : t0 + LATE_WAKE_NS;
    job_work(p, j, 0, &wake_at, &mine);
    /* the others' last chunks: briefly spin, then sleep until the last one is finished */
    int64_t end = now_ns() + CALLER_SPIN_NS;
    while (__atomic_load_n(&j->done, __ATOMIC_ACQUIRE) < nchunks && now_ns() < end)
        for (int i = 0; i < 32; i++) cpu_relax();
    if (__atomic_load_n(&j->done, __ATOMIC_ACQUIRE) < nchunks) {
        pthread_mutex_lock(&p->lock);
        while (__atomic_load_n(&j->done, __ATOMIC_ACQUIRE) < nchunks) {
            p->waiters++;
            pthread_cond_wait(&p->fin, &p->lock);
            p->waiters--;
        }
        pthread_mutex_unlock(&p->lock);
    }
    __atomic_sub_fetch(&j->refs, 1, __ATOMIC_RELEASE);
    /* whether woken workers took part in a job long enough for them to (see publish); not
     * while a worker is still starting: a fresh process's first jobs, which a new thread
     * misses while it is created (hundreds of microseconds in a VM), would otherwise count,
     * and after MISSES of them the pool stopped waking workers that were by then ready */
    if (mine < nchunks) __atomic_store_n(&p->missed, 0, __ATOMIC_RELAXED);
    else if (started && !wake_at && now_ns() - t0 > SHORT_JOB_NS && __atomic_load_n(&p->missed, __ATOMIC_RELAXED) < MISSES)
        __atomic_add_fetch(&p->missed, 1, __ATOMIC_RELAXED);
}
