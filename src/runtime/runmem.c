/*
 * runmem.c — the memory of runs: the memory limit, and what a binding keeps across runs.
 *
 * Every allocation a run makes whose size the data decides (outputs ragjit places,
 * temporaries, scratch, device uploads, the reference interpreter's values) is first counted
 * against the context's memory limit by run_reserve, which formats its message only on
 * failure, off the dispatch path. What runs allocate is kept by the binding's run state and
 * reused by the next run (host blocks grow, device slots grow), so a warm run allocates
 * nothing; run_mem_free gives it all back when the binding is freed. This file sits below
 * everything else of a run and calls nothing above it.
 */
#include <stdio.h>

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

static void host_mem_free(rj_ctx *ctx, host_mem *m) {
    if (!m) return;
    mem_free(ctx, m->arena.p, m->arena.bytes);
    mem_free(ctx, m->place, sizeof(int64_t) * 6 * (size_t)(m->nplace ? m->nplace : 1));
    mem_free(ctx, m->scratch.p, m->scratch.bytes);
    mem_free(ctx, m->addrs.p, m->addrs.bytes);
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
