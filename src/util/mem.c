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

/* Tensor data is 64-byte aligned, and a large block starts half a page past a page boundary.
 * The second is for the loads and stores of one kernel: a CPU checks a load against the
 * stores still in flight by the low 12 bits of their addresses first, and a load whose bits
 * match a recent store's waits for it (4K aliasing). A kernel streaming an input x into an
 * output y loads x + p shortly after it stored y + p - d for small d; when y - x is a small
 * multiple of the vector, modulo 4096, every load matches. Large blocks from malloc (mmap)
 * start 16 bytes past a page, from posix_memalign(64) (PyTorch's tensors) 64, from mmap 0:
 * with ragjit's outputs 64 bytes past a page (what aligning malloc's block gave), y - x was
 * 48 against a malloc'd input, and bf16 W1 took 1.9x as long on an AMD Zen 4 as with
 * y - x = -16 (bench/NOTES.md, "4K aliasing"). Half a page is as far as any of those can be.
 * ragjit's outputs share the offset, so one fed to the next program is 0 from its output: a
 * load and a store of the same step, which do not wait. */
#define DATA_ALIGN 64
#define DATA_PAGE 4096
#define DATA_LARGE ((size_t)64 << 10) /* smaller blocks: 64-byte aligned only */

size_t mem_data_pad(size_t n) { return DATA_ALIGN + (n >= DATA_LARGE ? DATA_PAGE : 0); }

void *mem_data_place(void *raw, size_t n) {
    uintptr_t at = ((uintptr_t)raw + DATA_ALIGN - 1) & ~(uintptr_t)(DATA_ALIGN - 1);
    if (n >= DATA_LARGE) at += ((uintptr_t)DATA_PAGE / 2 - (at & (DATA_PAGE - 1))) & (DATA_PAGE - 1);
    return (void *)at;
}

/* The hook's block is n + mem_data_pad(n) + a header's room: the distance from the block's
 * start to the data, a size_t just before the data. The hook sees the same size at the
 * allocation and at the free. */
#define DATA_HEADER 64

void *mem_alloc_data(rj_ctx *ctx, size_t n) {
    if (n == 0) n = 1;
    size_t pad = mem_data_pad(n) + DATA_HEADER;
    if (n > SIZE_MAX - pad) {
        ctx_fail(ctx, RJ_ERR_NOMEM, "out of memory (allocating %zu bytes)", n);
        return NULL;
    }
    unsigned char *raw = mem_alloc(ctx, n + pad);
    if (!raw) return NULL;
    unsigned char *at = mem_data_place(raw + sizeof(size_t), n);
    size_t dist = (size_t)(at - raw);
    memcpy(at - sizeof dist, &dist, sizeof dist);
    return at;
}

void mem_free_data(rj_ctx *ctx, void *p, size_t n) {
    if (!p) return;
    size_t dist;
    unsigned char *d = p;
    memcpy(&dist, d - sizeof dist, sizeof dist);
    if (n == 0) n = 1;
    mem_free(ctx, d - dist, n + mem_data_pad(n) + DATA_HEADER);
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

