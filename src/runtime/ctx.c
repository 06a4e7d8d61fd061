/*
 * ctx.c — the context's life and settings.
 *
 * The context is the root of ownership (Lua's lua_State plays the same role): it carries the
 * allocator through which every byte flows (util/mem.c), so tests can count and fail
 * allocations, and the last error message (util/error.c), so every function can return a
 * small status code and still explain itself. State that is expensive to create (the program
 * cache, the LLVM JIT, a device context) hangs off the context's slots and is created lazily
 * by whoever owns it, so contexts that only build graphs or interpret stay cheap; freeing the
 * context calls each slot's release hook and needs to know nothing about what they hold.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime.h"

static void *default_alloc(void *ud, void *ptr, size_t osize, size_t nsize) {
    RJ_UNUSED(ud);
    RJ_UNUSED(osize);
    if (nsize == 0) {
        free(ptr);
        return NULL;
    }
    return realloc(ptr, nsize);
}

static int64_t default_run_limit(void) {
    long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);
    if (pages <= 0 || size <= 0) return (int64_t)1 << 34; /* unknown: 16 GiB */
    return (int64_t)pages / 2 * (int64_t)size;
}

rj_ctx *rj_ctx_new(rj_alloc_fn alloc, void *ud) {
    if (!alloc) alloc = default_alloc;
    rj_ctx *ctx = alloc(ud, NULL, 0, sizeof *ctx);
    if (!ctx) return NULL;
    memset(ctx, 0, sizeof *ctx);
    static uint64_t serial;
    ctx->id = __atomic_add_fetch(&serial, 1, __ATOMIC_RELAXED);
    ctx->alloc = alloc;
    ctx->ud = ud;
    ctx->run_limit = default_run_limit();
    ctx->refs = 1;
    if (pthread_mutex_init(&ctx->lock, NULL)) {
        alloc(ud, ctx, sizeof *ctx, 0);
        return NULL;
    }
    return ctx;
}

void rj_ctx_free(rj_ctx *ctx) { ctx_unref(ctx); }

void ctx_ref(rj_ctx *ctx) { __atomic_add_fetch(&ctx->refs, 1, __ATOMIC_RELAXED); }

/* The last reference gone (rj_ctx_free, and every DLPack tensor exported from the context
 * deleted): everything the context holds is released. */
void ctx_unref(rj_ctx *ctx) {
    if (!ctx || __atomic_sub_fetch(&ctx->refs, 1, __ATOMIC_ACQ_REL) > 0) return;
    for (int i = 0; i < CTX_SLOTS; i++)
        if (ctx->slot[i].state) ctx->slot[i].release(ctx, ctx->slot[i].state);
    mem_strfree(ctx, ctx->cache_dir);
    pthread_mutex_destroy(&ctx->lock);
    ctx->alloc(ctx->ud, ctx, sizeof *ctx, 0);
}

const char *rj_ctx_error(const rj_ctx *ctx) {
    return ctx ? ctx_last_error(ctx) : "no context (NULL)";
}

rj_status rj_ctx_status(const rj_ctx *ctx) {
    return ctx ? ctx_last_status(ctx) : RJ_ERR_ARG;
}

const char *rj_blas_info(void) { return blas_info(); }

rj_status rj_ctx_set_threads(rj_ctx *ctx, int threads) {
    if (!ctx) return RJ_ERR_ARG;
    if (threads < 0 || threads > 4096)
        return ctx_fail(ctx, RJ_ERR_ARG, "rj_ctx_set_threads: %d threads is out of range 0..4096",
                        threads);
    __atomic_store_n(&ctx->threads, threads, __ATOMIC_RELAXED); /* runs may be reading it */
    return RJ_OK;
}

rj_status rj_ctx_set_parallel(rj_ctx *ctx, rj_parallel_fn fn, void *user) {
    if (!ctx) return RJ_ERR_ARG;
    ctx->parallel_user = fn ? user : NULL;
    ctx->parallel = fn;
    return RJ_OK;
}

rj_status rj_ctx_set_memory_limit(rj_ctx *ctx, int64_t bytes) {
    if (!ctx) return RJ_ERR_ARG;
    if (bytes < 0)
        return ctx_fail(ctx, RJ_ERR_ARG, "rj_ctx_set_memory_limit: %lld bytes is negative", (long long)bytes);
    __atomic_store_n(&ctx->run_limit, bytes ? bytes : default_run_limit(), __ATOMIC_RELAXED);
    return RJ_OK;
}

int ctx_threads(const rj_ctx *ctx) {
    int t = __atomic_load_n(&ctx->threads, __ATOMIC_RELAXED);
    return t > 0 ? t : cpus_usable(); /* read once per process (cpus.c), never per run */
}

