/*
 * ctx.c — the context: allocator hook, last-error message, settings, and status names.
 *
 * The context is the root of ownership (Lua's lua_State plays the same role): it carries the
 * allocator through which every byte flows, so tests can count and fail allocations, and the
 * last error message, so every function can return a small status code and still explain
 * itself. Backend state that is expensive to create (the LLVM JIT) hangs off the context and
 * is created lazily, so contexts that only build graphs or interpret stay cheap.
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

rj_ctx *rj_ctx_new(rj_alloc_fn alloc, void *ud) {
    if (!alloc) alloc = default_alloc;
    rj_ctx *ctx = alloc(ud, NULL, 0, sizeof *ctx);
    if (!ctx) return NULL;
    memset(ctx, 0, sizeof *ctx);
    ctx->alloc = alloc;
    ctx->ud = ud;
    return ctx;
}

void rj_ctx_free(rj_ctx *ctx) {
    if (!ctx) return;
    backends_shutdown(ctx);
    ctx->alloc(ctx->ud, ctx, sizeof *ctx, 0);
}

const char *rj_ctx_error(const rj_ctx *ctx) {
    return ctx ? ctx->err : "no context (NULL)";
}

rj_status rj_ctx_status(const rj_ctx *ctx) {
    return ctx ? ctx->status : RJ_ERR_ARG;
}

rj_status rj_ctx_set_threads(rj_ctx *ctx, int threads) {
    if (!ctx) return RJ_ERR_ARG;
    if (threads < 0 || threads > 4096)
        return ctx_fail(ctx, RJ_ERR_ARG, "rj_ctx_set_threads: %d threads is out of range 0..4096",
                        threads);
    ctx->threads = threads;
    return RJ_OK;
}

int ctx_threads(const rj_ctx *ctx) {
    if (ctx->threads > 0) return ctx->threads;
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

/* ---- memory ---------------------------------------------------------------------------- */

void *mem_alloc(rj_ctx *ctx, size_t n) {
    if (n == 0) n = 1;
    void *p = ctx->alloc(ctx->ud, NULL, 0, n);
    if (!p) ctx_fail(ctx, RJ_ERR_NOMEM, "out of memory (allocating %zu bytes)", n);
    return p;
}

void *mem_zalloc(rj_ctx *ctx, size_t n) {
    void *p = mem_alloc(ctx, n);
    if (p) memset(p, 0, n ? n : 1);
    return p;
}

void *mem_realloc(rj_ctx *ctx, void *p, size_t osize, size_t nsize) {
    if (!p) osize = 0;
    void *q = ctx->alloc(ctx->ud, p, osize, nsize ? nsize : 1);
    if (!q) ctx_fail(ctx, RJ_ERR_NOMEM, "out of memory (allocating %zu bytes)", nsize);
    return q;
}

void mem_free(rj_ctx *ctx, void *p, size_t n) {
    if (p) ctx->alloc(ctx->ud, p, n ? n : 1, 0);
}

char *mem_strdup(rj_ctx *ctx, const char *s) {
    size_t n = strlen(s) + 1;
    char *d = mem_alloc(ctx, n);
    if (d) memcpy(d, s, n);
    return d;
}

void mem_strfree(rj_ctx *ctx, char *s) {
    if (s) mem_free(ctx, s, strlen(s) + 1);
}

bool mem_grow(rj_ctx *ctx, void **arr, int32_t *cap, int32_t need, size_t es) {
    if (need <= *cap) return true;
    int64_t ncap = *cap ? *cap : 8;
    while (ncap < need) ncap *= 2;
    if (ncap > INT32_MAX) {
        ctx_fail(ctx, RJ_ERR_OVERFLOW, "too many elements (%d)", need);
        return false;
    }
    void *n = mem_realloc(ctx, *arr, (size_t)*cap * es, (size_t)ncap * es);
    if (!n) return false;
    *arr = n;
    *cap = (int32_t)ncap;
    return true;
}

/* ---- errors ---------------------------------------------------------------------------- */

rj_status ctx_failv(rj_ctx *ctx, rj_status s, const char *fmt, va_list ap) {
    if (!ctx) return s;
    char msg[sizeof ctx->err]; /* the arguments may point into ctx->err */
    vsnprintf(msg, sizeof msg, fmt, ap);
    memcpy(ctx->err, msg, sizeof msg);
    ctx->status = s;
    return s;
}

rj_status ctx_fail(rj_ctx *ctx, rj_status s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    ctx_failv(ctx, s, fmt, ap);
    va_end(ap);
    return s;
}

void ctx_clear_error(rj_ctx *ctx) {
    ctx->err[0] = 0;
    ctx->status = RJ_OK;
}

rj_status ctx_last_status(const rj_ctx *ctx) {
    return ctx->status;
}

const char *rj_status_str(rj_status s) {
    static const char *const names[RJ_STATUS_COUNT] = {
        [RJ_OK] = "ok",
        [RJ_ERR_NOMEM] = "out of memory",
        [RJ_ERR_ARG] = "invalid argument",
        [RJ_ERR_GRAPH] = "graph already failed or node is RJ_NONE",
        [RJ_ERR_SHAPE] = "incompatible shapes",
        [RJ_ERR_DTYPE] = "unsupported dtype",
        [RJ_ERR_UNSUPPORTED] = "not supported",
        [RJ_ERR_UNBOUND] = "missing binding",
        [RJ_ERR_SIZE] = "size mismatch",
        [RJ_ERR_BATCH] = "batch size mismatch",
        [RJ_ERR_OFFSETS_START] = "offsets do not start at 0",
        [RJ_ERR_OFFSETS_ORDER] = "offsets decrease",
        [RJ_ERR_OFFSETS_END] = "offsets do not end at the row count",
        [RJ_ERR_SAME] = "symbols declared same differ",
        [RJ_ERR_OVERFLOW] = "size overflow",
        [RJ_ERR_PAD_LEN] = "pad length too small",
        [RJ_ERR_PARSE] = "syntax error",
        [RJ_ERR_IO] = "I/O error",
        [RJ_ERR_COMPILE] = "compile error",
        [RJ_ERR_NO_DEVICE] = "no CUDA device",
        [RJ_ERR_INTERNAL] = "internal error",
    };
    if ((unsigned)s >= RJ_STATUS_COUNT) return "unknown status";
    return names[s];
}
