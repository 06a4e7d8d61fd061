/*
 * launch.c — the arithmetic of a run, shared by every target (see launch.h).
 *
 * Units. A kernel's unit domain (loopir.h) says what one unit is: a logical row of a ragged
 * class (UD_ROWS: uniform cost), an (item, column tile) pair (UD_ITEMS: cost proportional to
 * the item's length plus one), or an element of some dense dims (UD_DENSE: uniform). Units
 * are split so that every worker gets the same amount of work, not the same number of items:
 * row ranges for row kernels (an item longer than all others is simply split), and weighted
 * ranges of (item, tile) units for reductions over the ragged dim, with columns tiled when
 * one item would otherwise dominate. A few more chunks than workers, taken dynamically,
 * absorb workers that start late or share a core (common on VMs) without changing a result.
 *
 * Tiles. Multi-pass item kernels (softmax over the ragged dim) re-read each item's block, so
 * a tile's input and output columns of the longest item should stay within the cache the
 * caller names (half of L2 on a CPU).
 *
 * Scratch. Item kernels keep per-lane accumulators (and softmax the tile's rows of one item)
 * in per-worker scratch, sized here from the longest item.
 */
#include <string.h>

#include "launch.h"

static rj_status numel(rj_bind *b, const rj_dim *dims, int n, int64_t *out) {
    int64_t c = 1;
    for (int k = 0; k < n; k++)
        if (!mul_i64(c, bind_dim_value(b, dims[k]), &c))
            return ctx_fail(b->ctx, RJ_ERR_OVERFLOW, "a size of this run overflows 64 bits");
    *out = c;
    return RJ_OK;
}

/* The class's logical offsets and batch (resolved by bind_prepare). */
static rj_status class_rows(rj_bind *b, int32_t cls, const int64_t **lo, int64_t *B) {
    if (cls < 0 || cls >= b->nsym || !b->loff[cls])
        return ctx_fail(b->ctx, RJ_ERR_INTERNAL, "launch: no offsets for ragged class %d", (int)cls);
    *lo = b->loff[cls];
    *B = b->cbatch[cls];
    return RJ_OK;
}

rj_status launch_buf_elems(rj_bind *b, const lbuf *lb, int64_t *n) {
    if (lb->kind == LB_INPUT) return *n = b->in[lb->index].numel, RJ_OK;
    if (lb->kind == LB_OUTPUT) return *n = b->out[lb->index].numel, RJ_OK;
    const rj_graph *g = b->g;
    const sym *s = lb->rank > 1 ? graph_sym(g, lb->dims[1]) : NULL;
    if (!s || s->kind != SYM_RAGGED) return numel(b, lb->dims, lb->rank, n);
    const int64_t *lo = NULL;
    int64_t B = 0, inner;
    rj_status st;
    if ((st = class_rows(b, sym_root(g, dim_sym(lb->dims[1])), &lo, &B)) ||
        (st = numel(b, lb->dims + 2, lb->rank - 2, &inner)))
        return st;
    if (!mul_i64(lo[B], inner, n))
        return ctx_fail(b->ctx, RJ_ERR_OVERFLOW, "temporary %d is too large", lb->index);
    return RJ_OK;
}

/* UD_ITEMS: the column tile. Starts with whole items (one unit per item), then narrows the
 * tile to fit the cache, then to share a dominating item among workers. */
static void item_tiles(const lkernel *k, const launch_opts *o, int64_t N, int64_t maxw, int64_t total,
                       launch_plan *pl) {
    pl->tile = N > 0 ? N : 1;
    pl->ntiles = 1;
    if (!k->tiled) return;
    if (o->tile_bytes > 0 && k->passes > 1 && N > 16) {
        int64_t es = (int64_t)rj_dtype_size((rj_dtype)k->scratch_type);
        int64_t t = o->tile_bytes / ((maxw > 0 ? maxw : 1) * es * 2);
        t = t / 16 * 16;
        if (t < 16) t = 16;
        if (t < N) pl->tile = t, pl->ntiles = (N + t - 1) / t;
    }
    if (o->split_items && o->workers > 1 && N >= 32 && maxw * 2 * o->workers > total * pl->ntiles) {
        int64_t want = 2 * (int64_t)o->workers;
        int64_t t = ((N + want - 1) / want + 15) / 16 * 16;
        if (t < pl->tile) pl->tile = t, pl->ntiles = (N + t - 1) / t;
    }
}

/* Chunk bounds: even for uniform units, weighted by len_b + 1 for item units. */
static void split(const lkernel *k, const int64_t *lo, launch_plan *pl) {
    int nc = pl->nchunks;
    if (k->domain != UD_ITEMS || nc == 1) {
        for (int c = 0; c <= nc; c++) pl->chunk[c] = pl->units * c / nc;
        return;
    }
    int64_t total = 0;
    for (int64_t u = 0; u < pl->units; u++) {
        int64_t b = u / pl->ntiles;
        total += lo[b + 1] - lo[b] + 1;
    }
    int c = 1;
    int64_t acc = 0;
    pl->chunk[0] = 0;
    for (int64_t u = 0; u < pl->units && c < nc; u++) {
        int64_t b = u / pl->ntiles;
        acc += lo[b + 1] - lo[b] + 1;
        while (c < nc && acc * nc >= total * c) pl->chunk[c++] = u + 1;
    }
    while (c <= nc) pl->chunk[c++] = pl->units;
}

rj_status launch_plan_kernel(rj_bind *b, const lkernel *k, const launch_opts *o, launch_plan *pl) {
    memset(pl, 0, sizeof *pl);
    const int64_t *lo = NULL;
    int64_t B = 0, work = 0, maxlen = 0;
    rj_status s;
    switch (k->domain) {
    case UD_ROWS:
        if ((s = class_rows(b, k->dom_class, &lo, &B))) return s;
        pl->units = work = lo[B];
        break;
    case UD_ITEMS: {
        int64_t N, total = 0, maxw = 0;
        if ((s = class_rows(b, k->dom_class, &lo, &B)) || (s = numel(b, k->dom_dims, k->dom_rank, &N)))
            return s;
        for (int64_t i = 0; i < B; i++) {
            int64_t w = lo[i + 1] - lo[i] + 1;
            total += w;
            if (w > maxw) maxw = w;
        }
        maxlen = maxw > 0 ? maxw - 1 : 0;
        item_tiles(k, o, N, maxw, total, pl);
        pl->units = N > 0 ? B * pl->ntiles : 0; /* no columns: nothing to compute */
        if (!mul_i64(total, N > 0 ? N : 1, &work)) work = INT64_MAX;
        break;
    }
    default:
        if ((s = numel(b, k->dom_dims, k->dom_rank, &pl->units))) return s;
        work = pl->units;
        break;
    }
    int64_t w = o->workers > 0 ? o->workers : 1;
    if (work < o->small_work || pl->units < 2) w = 1;
    if (w > pl->units) w = pl->units > 0 ? pl->units : 1;
    if (k->scratch_per_tile > 0) {
        int64_t per = k->scratch_per_tile, es = (int64_t)rj_dtype_size((rj_dtype)k->scratch_type);
        if (k->scratch_per_row && k->domain == UD_ITEMS && !add_i64(per, maxlen, &per))
            return ctx_fail(b->ctx, RJ_ERR_OVERFLOW, "scratch size overflows");
        int64_t bytes;
        if (!mul_i64(per, pl->tile > 0 ? pl->tile : 1, &pl->scratch_elems) ||
            !mul_i64(pl->scratch_elems, es, &bytes) || !add_i64(bytes, 63, &bytes))
            return ctx_fail(b->ctx, RJ_ERR_OVERFLOW, "scratch size overflows");
        pl->scratch_bytes = bytes / 64 * 64;
        if (o->scratch_budget > 0 && pl->scratch_bytes > 0 && w > o->scratch_budget / pl->scratch_bytes) {
            w = o->scratch_budget / pl->scratch_bytes;
            if (w < 1) w = 1;
        }
    }
    pl->workers = (int)w;
    int64_t nc = 1;
    if (o->chunks_per_worker > 0 && w > 1) nc = w * o->chunks_per_worker;
    if (nc > LAUNCH_MAX_CHUNKS) nc = LAUNCH_MAX_CHUNKS;
    if (nc > pl->units) nc = pl->units > 0 ? pl->units : 1;
    pl->nchunks = (int)nc;
    split(k, lo, pl);
    return RJ_OK;
}

void launch_args(rj_bind *b, const lkernel *k, const launch_plan *pl, const launch_mem *m,
                 int64_t lo, int64_t hi, int worker, bool nt, uint64_t *vals) {
    for (int32_t a = 0; a < k->nparams; a++) {
        const lparam *pm = &k->params[a];
        uint64_t v = 0;
        switch (pm->kind) {
        case PK_BUF: v = m->buf[pm->ref]; break;
        case PK_OFF: v = m->off[pm->ref]; break;
        case PK_LOFF: v = m->loff[pm->ref]; break;
        case PK_SIZE: v = (uint64_t)b->val[pm->ref]; break;
        case PK_LO: v = (uint64_t)lo; break;
        case PK_HI: v = (uint64_t)hi; break;
        case PK_TILE: v = (uint64_t)pl->tile; break;
        case PK_SCRATCH: v = m->scratch + (uint64_t)worker * (uint64_t)pl->scratch_bytes; break;
        case PK_NT: v = nt; break;
        case PK_BLO:
            v = (uint64_t)item_at_or_before(b->loff[k->dom_class], b->cbatch[k->dom_class], lo);
            break;
        case PK_BHI:
            v = (uint64_t)item_at_or_after(b->loff[k->dom_class], b->cbatch[k->dom_class], hi);
            break;
        }
        vals[a] = v;
    }
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

void host_mem_free(rj_ctx *ctx, host_mem *m) {
    if (!m) return;
    for (int32_t i = 0; i < m->ntemp; i++) mem_free(ctx, m->temp[i].p, m->temp[i].bytes);
    mem_free(ctx, m->temp, sizeof(host_block) * (size_t)(m->ntemp ? m->ntemp : 1));
    mem_free(ctx, m->scratch.p, m->scratch.bytes);
    mem_free(ctx, m->addrs.p, m->addrs.bytes);
    mem_free(ctx, m, sizeof *m);
}
