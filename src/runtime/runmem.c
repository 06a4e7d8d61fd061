/*
 * runmem.c — the memory of runs: the memory limit, and what a binding keeps across runs.
 *
 * Every allocation a run makes whose size the data decides (outputs ragjit places,
 * temporaries, scratch, device uploads, the reference interpreter's values) is first counted
 * against the context's memory limit by run_reserve, which formats its message only on
 * failure, off the dispatch path. What runs allocate is kept by the binding's run state and
 * reused by the next run (host blocks grow, device slots grow), so a warm run allocates
 * nothing; run_mem_free gives it all back when the binding is freed, with the copies kept of
 * inputs promised constant (rj_bind_constant, cpu_gemm.c). This file sits below
 * everything else of a run and calls nothing above it.
 *
 * The large blocks a CPU run keeps (the temporaries' arena, the scratch: 16 MB for the
 * encoder) may be in transparent huge pages (host_block_fresh, host_block_advise), which most
 * kernels give only to memory that asks (enabled = madvise). Later runs are 4-9% faster with
 * them (the encoder, same-process A/B, bench/NOTES.md): fewer TLB misses in the GEMMs. The block
 * is allocated a huge page larger, through the context's allocator like any other, and used
 * from a huge page boundary, so that every whole huge page of it can be one; the tail past the
 * last whole one stays in small pages and the slack before the start is never touched, so what
 * is mapped is what the run uses, and the memory limit counts exactly that. When to ask is the
 * caller's (cpu.h: cpu_block_get): a huge page's first fault is cheaper per byte than 512 small
 * ones where its memory is warm (20 MB: 1-3 ms against 5-10 ms), but in a VM whose host has not
 * backed the memory, huge pages (taken from large free blocks, long unused) cost far more than
 * small ones (from the per-CPU free lists, recently used): the encoder's first run took
 * 1.14-1.26x its later ones with huge pages faulted in against 1.02-1.12x with small ones.
 * A block that grows is allocated afresh, not reallocated: its content is dead between runs,
 * and copying it would touch the old pages once more.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if defined(__linux__)
#include <sys/mman.h>
#endif

#include "runtime.h"

rj_status run_reserve(const run_view *v, int64_t bytes, const char *what, int index) {
    int64_t limit = __atomic_load_n(&v->ctx->run_limit, __ATOMIC_RELAXED), total;
    if (!add_i64(v->mem->reserved, bytes, &total)) total = INT64_MAX;
    if (total > limit) {
        char name[224];
        if (index >= 0) snprintf(name, sizeof name, "%s %d", what, index);
        else snprintf(name, sizeof name, "%s", what);
        return ctx_fail(v->ctx, RJ_ERR_SIZE, "%s needs %lld bytes, and this run would then use %lld "
                        "bytes, above the memory limit of %lld bytes (rj_ctx_set_memory_limit)", name,
                        (long long)bytes, (long long)total, (long long)limit);
    }
    v->mem->reserved = total;
    return RJ_OK;
}

void *host_block_get(rj_ctx *ctx, host_block *blk, size_t bytes) {
    size_t need = bytes + 64;
    if (need > blk->bytes || !blk->p) {
        void *n = mem_realloc(ctx, blk->p, blk->bytes, need);
        if (!n) return NULL;
        blk->p = n;
        blk->bytes = need;
    }
    return (void *)(((uintptr_t)blk->p + 63) & ~(uintptr_t)63);
}

#if defined(__linux__) && defined(MADV_HUGEPAGE)
/* The huge page size, or 0 where transparent huge pages are `never` (or unknown). */
static size_t read_huge_pages(void) {
    const char *env = getenv("RAGJIT_HUGE_PAGES");
    if (env && !strcmp(env, "0")) return 0;
    char buf[128] = {0};
    FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
    if (!f) return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    if (!strstr(buf, "[always]") && !strstr(buf, "[madvise]")) return 0;
    unsigned long long size = 0;
    if ((f = fopen("/sys/kernel/mm/transparent_hugepage/hpage_pmd_size", "r"))) {
        if (fscanf(f, "%llu", &size) != 1) size = 0;
        fclose(f);
    }
    /* a power of two of at least 64 KiB, or the x86-64 and arm64 (4 KiB granule) size */
    return size >= ((size_t)64 << 10) && size <= ((size_t)1 << 30) && !(size & (size - 1)) ? (size_t)size
                                                                                         : (size_t)2 << 20;
}
#endif

size_t host_huge_pages(void) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    static size_t cached = 1; /* 1: not read yet; any thread may read it, all read the same */
    size_t h = __atomic_load_n(&cached, __ATOMIC_RELAXED);
    if (h == 1) __atomic_store_n(&cached, h = read_huge_pages(), __ATOMIC_RELAXED);
    return h;
#else
    return 0;
#endif
}

/* madvise(advice) on blk's whole huge pages (a block host_block_fresh aligned as such). */
static void advise(host_block *blk, bool huge) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    if (!blk->p || !blk->huge) return;
    uintptr_t lo = ((uintptr_t)blk->p + blk->huge - 1) & ~(uintptr_t)(blk->huge - 1);
    uintptr_t hi = ((uintptr_t)blk->p + blk->bytes) & ~(uintptr_t)(blk->huge - 1);
    /* advice only: a kernel that refuses it leaves small pages, which work the same */
    if (hi > lo) madvise((void *)lo, hi - lo, huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
#else
    RJ_UNUSED(blk), RJ_UNUSED(huge);
#endif
}

void *host_block_fresh(rj_ctx *ctx, host_block *blk, size_t bytes, size_t huge, bool *fresh) {
    /* from a huge page's boundary, or a small page's for a block of 64 KiB on, else a cache
     * line; a large block half a page past it, as tensor data (util/mem.c: no 4K aliasing
     * against the inputs), so that what is placed in it on page multiples is too (cpu.c,
     * place_temps) */
    bool large = bytes >= ((size_t)64 << 10);
    size_t align = huge && bytes >= huge ? huge : large ? 4096 : 64, skew = large ? 2048 : 0;
    *fresh = false;
    if (blk->p) {
        size_t a = blk->align ? blk->align : 64;
        uintptr_t at = (((uintptr_t)blk->p + a - 1) & ~(uintptr_t)(a - 1)) + blk->skew;
        if (at + bytes <= (uintptr_t)blk->p + blk->bytes) return (void *)at;
        host_block_free(ctx, blk);
    }
    if (bytes > SIZE_MAX - align - skew) return NULL;
    void *p = mem_alloc(ctx, bytes + align + skew);
    if (!p) return NULL;
    *blk = (host_block){.p = p, .bytes = bytes + align + skew, .huge = align > 4096 ? align : 0, .align = align,
                        .skew = skew};
    *fresh = true;
    return (void *)((((uintptr_t)p + align - 1) & ~(uintptr_t)(align - 1)) + skew);
}

void host_block_advise(host_block *blk) {
    advise(blk, true);
}

/* The advice is withdrawn first, so that the allocator's later blocks there (heap memory,
 * which free does not unmap) are in small pages again. */
void host_block_free(rj_ctx *ctx, host_block *blk) {
    advise(blk, false);
    mem_free(ctx, blk->p, blk->bytes);
    *blk = (host_block){0};
}

static void host_mem_free(rj_ctx *ctx, host_mem *m) {
    if (!m) return;
    host_block_free(ctx, &m->arena);
    mem_free(ctx, m->place, sizeof(int64_t) * 6 * (size_t)(m->nplace ? m->nplace : 1));
    host_block_free(ctx, &m->scratch);
    mem_free(ctx, m->addrs.p, m->addrs.bytes);
    host_block_free(ctx, &m->const_block);
    mem_free(ctx, m->consts, sizeof(const_copy) * (size_t)m->nconsts);
    mem_free(ctx, m, sizeof *m);
}

void run_mem_free(rj_ctx *ctx, const backend *be, run_mem *rm) {
    for (size_t i = 0; i < rm->ndmem; i++) {
        if (rm->dmem[i].addr && be && be->dev_free) be->dev_free(ctx, rm->dmem[i].addr);
        mem_free(ctx, rm->dmem[i].shadow, rm->dmem[i].shadow_bytes);
    }
    mem_free(ctx, rm->dmem, sizeof(dev_block) * rm->ndmem);
    host_mem_free(ctx, rm->host);
    *rm = (run_mem){0};
}
