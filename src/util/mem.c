/*
 * mem.c — every byte ragjit allocates goes through the context's allocator hook.
 *
 * The hook has Lua's contract (ptr, osize, nsize), so callers give back the size they asked
 * for; in exchange an embedding can account for, cap or fail any allocation, and the tests
 * fail each allocation point in turn to prove that every failure path returns RJ_ERR_NOMEM
 * without leaking. A failed allocation records the error in the context, so call sites only
 * propagate. Zero-byte requests are rounded up to one: the hook reserves nsize == 0 for free.
 */
#include <stdint.h>
#include <string.h>

#include "util.h"


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

/* The hook's block is n + DATA_ALIGN bytes; the data starts at the first aligned address past
 * its start (1 to DATA_ALIGN bytes in), and the byte before the data holds that distance. The
 * hook sees the same size at the allocation and at the free. */
#define DATA_ALIGN 64

void *mem_alloc_data(rj_ctx *ctx, size_t n) {
    if (n == 0) n = 1;
    if (n > SIZE_MAX - DATA_ALIGN) {
        ctx_fail(ctx, RJ_ERR_NOMEM, "out of memory (allocating %zu bytes)", n);
        return NULL;
    }
    unsigned char *raw = mem_alloc(ctx, n + DATA_ALIGN);
    if (!raw) return NULL;
    unsigned char *p = (unsigned char *)(((uintptr_t)raw + DATA_ALIGN) & ~(uintptr_t)(DATA_ALIGN - 1));
    p[-1] = (unsigned char)(p - raw);
    return p;
}

void mem_free_data(rj_ctx *ctx, void *p, size_t n) {
    if (!p) return;
    unsigned char *d = p;
    mem_free(ctx, d - d[-1], (n ? n : 1) + DATA_ALIGN);
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

