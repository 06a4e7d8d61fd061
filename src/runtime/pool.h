/*
 * pool.h — the CPU target's threads: a kernel's chunks run on the calling thread and on
 * ragjit's own workers (pool.c), or on the embedder's pool (rj_ctx_set_parallel).
 */
#ifndef RJ_POOL_H
#define RJ_POOL_H

#include "runtime.h"

/* One chunk of a kernel's work; slot (0 <= slot < the run's slots) is the scratch of the
 * thread running it: no two chunks running at once have the same slot. */
typedef void (*pool_task)(void *arg, int64_t chunk, int slot);

typedef struct pool pool;

/* A pool of at most max_threads - 1 workers, none started yet (the first run that wants them
 * starts them). NULL on failure, with the error recorded. */
pool *pool_new(rj_ctx *ctx, int max_threads);
/* Starts workers up to n - 1 (n: the threads a run will want), so that the first run does not
 * wait for threads to be created (rj_bind_prepare); one that cannot be started is done without,
 * as in a run. */
void pool_start(pool *p, int n);
/* Stops and joins the workers; no run may be in flight. Accepts NULL. */
void pool_free(rj_ctx *ctx, pool *p);

/* task(arg, c, slot) for every chunk c in [0, nchunks), returning when all have returned:
 * on the calling thread alone when slots <= 1 (or p is NULL), else on the calling thread and
 * up to slots - 1 others, the context's hook's (rj_ctx_set_parallel) where it has one. */
void pool_run(rj_ctx *ctx, pool *p, int64_t nchunks, int slots, pool_task task, void *arg);

#endif
