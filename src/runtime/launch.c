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
 * Tiles. Multi-pass item kernels (softmax over the ragged dim) stash each item's block and
 * re-read it, so the longest item's stash of a tile's columns should stay within the cache
 * budget the caller names (tile_bytes: on a CPU a worker's share of the last-level cache).
 *
 * Scratch. Item kernels keep per-lane accumulators (and softmax the tile's rows of one item)
 * in per-worker scratch, sized here from the longest item.
 *
 * Everything here reads the resolved view of the run (runtime.h, run_view) and the program's
 * plan: the sizes of symbols, the rows and offsets of classes, the shapes of buffers; nothing
 * goes back to the graph. Device runs (device_run) keep their memory in the binding's run state
 * and may return before their kernels finish; device_settle waits for such a run and judges its
 * checks (checks.c), for rj_bind_wait and for the next run on the binding.
 */
#include <string.h>

#include "launch.h"

static rj_status numel(const run_view *v, const rj_dim *dims, int n, int64_t *out) {
    int64_t c = 1;
    for (int k = 0; k < n; k++)
        if (!mul_i64(c, run_dim(v, dims[k]), &c))
            return ctx_fail(v->ctx, RJ_ERR_OVERFLOW, "a size of this run overflows 64 bits");
    *out = c;
    return RJ_OK;
}

/* The class's logical offsets and batch (resolved by run_resolve). For trusted device
 * offsets the host has no offsets: lo is NULL and only the batch and the class's rows are
 * known. */
static rj_status class_rows(const run_view *v, int32_t cls, const int64_t **lo, int64_t *B) {
    if (cls < 0 || cls >= v->plan->nsym || (!v->cls[cls].loff && !v->has_dev))
        return ctx_fail(v->ctx, RJ_ERR_INTERNAL, "launch: no offsets for ragged class %d", (int)cls);
    *lo = v->cls[cls].loff;
    *B = v->cls[cls].batch;
    return RJ_OK;
}

/* The longest item of a class, as validation found it or the caller gave it. */
static int64_t class_maxlen(const run_view *v, int32_t cls) {
    int64_t m = 0;
    for (int32_t s = 0; s < v->plan->nsym; s++)
        if (v->sym[s].bound && v->plan->sym[s].kind == SYM_RAGGED && v->plan->sym[s].root == cls && v->sym[s].val > m)
            m = v->sym[s].val;
    return m;
}

/* Bytes per element of kernel k's scratch. */
static int64_t scratch_es(const run_view *v, const lkernel *k) {
    return v->plan->scratch_es[k - v->lp->kernels];
}

rj_status launch_buf_elems(const run_view *v, int32_t i, int64_t *n) {
    const lbuf *lb = &v->lp->bufs[i];
    const plan_shape *sh = &v->plan->buf[i];
    if (lb->kind == LB_INPUT) return *n = v->in[lb->index].numel, RJ_OK;
    if (lb->kind == LB_OUTPUT) return *n = v->out[lb->index].numel, RJ_OK;
    if (sh->kind == SHAPE_DENSE) return numel(v, lb->dims, lb->rank, n);
    int32_t c = sh->cls;
    if (sh->kind == SHAPE_PAIR) { /* blocks of len1 x len2 rows, then the inner dims */
        int64_t inner;
        rj_status st = numel(v, lb->dims + 3, lb->rank - 3, &inner);
        if (st) return st;
        const int64_t *sq = run_pair_off(v, sh->pkey);
        if (!sq || !mul_i64(sq[v->cls[c].batch], inner, n))
            return ctx_fail(v->ctx, sq ? RJ_ERR_OVERFLOW : RJ_ERR_INTERNAL, "temporary %d: %s", lb->index,
                            sq ? "too large" : "no blocks for its two ragged dims");
        return RJ_OK;
    }
    const int64_t *lo = NULL;
    int64_t B = 0, inner;
    rj_status st;
    if ((st = class_rows(v, c, &lo, &B)) || (st = numel(v, lb->dims + 2, lb->rank - 2, &inner))) return st;
    (void)lo;
    if (!mul_i64(v->cls[c].rows, inner, n))
        return ctx_fail(v->ctx, RJ_ERR_OVERFLOW, "temporary %d is too large", lb->index);
    return RJ_OK;
}

/* Whether an item of maxw (its rows + 1) dominates a run of `total` such weights in units of
 * ntiles tiles an item, N columns each: then one worker would hold up the others, and
 * item_tiles shares the item among them by narrower tiles. Not in a run too small to share
 * at all (launch_plan_kernel runs it on one worker). */
static bool item_dominates(const launch_opts *o, int64_t maxw, int64_t total, int64_t ntiles, int64_t N) {
    int64_t work;
    if (!o->split_items || o->workers <= 1 || (mul_i64(total, N, &work) && work < o->small_work)) return false;
    return maxw * 2 * o->workers > total * ntiles;
}

/* The rows of an item's stash: the longest item's, or the padded axis's length where the
 * padding rows are stashed too (lkernel.tiling.stash_rows). */
static int64_t stash_rows(const run_view *v, const lkernel *k, int64_t maxlen) {
    return k->tiling.stash_rows ? run_dim(v, k->tiling.stash_rows) : maxlen;
}

bool launch_variant_runs(const run_view *v, const lkernel *k, const launch_opts *o) {
    if (k->tiling.stash_variant == KV_ALWAYS) return true;
    int64_t bytes, es = scratch_es(v, k);
    int64_t maxlen = stash_rows(v, k, class_maxlen(v, k->dom_class));
    int64_t vt = k->tiling.variant_tile;
    bool fits = mul_i64(maxlen, vt * es, &bytes) && (o->tile_bytes <= 0 || bytes <= o->tile_bytes);
    /* an item that dominates the run is shared among the workers by narrower tiles (item_tiles),
     * which the constant tiles cannot be: the twin takes such runs too */
    int64_t N, cls = k->dom_class;
    if (fits && cls >= 0 && cls < v->plan->nsym && vt > 0 && !numel(v, k->dom_dims, k->dom_rank, &N) && N > 0 &&
        item_dominates(o, maxlen + 1, v->cls[cls].rows + v->cls[cls].batch, (N + vt - 1) / vt, N))
        fits = false;
    return fits == (k->tiling.stash_variant == KV_STASH_FITS);
}

/* UD_ITEMS: the column tile. Starts with whole items (one unit per item), then narrows the
 * tile to fit the cache (an item's rows, or the stash's, `stashw`, + 1), then to share a
 * dominating item among workers. */
static void item_tiles(const lkernel *k, const launch_opts *o, int64_t N, int64_t maxw, int64_t stashw,
                       int64_t total, int64_t es, launch_plan *pl) {
    pl->tile = N > 0 ? N : 1;
    pl->ntiles = 1;
    if (!k->tiling.tiled) return;
    if (k->tiling.fixed_tile > 0) { /* the kernel's own constant */
        pl->tile = k->tiling.fixed_tile;
        pl->ntiles = N > 0 ? (N + k->tiling.fixed_tile - 1) / k->tiling.fixed_tile : 1;
        return;
    }
    const int64_t G = LANES_GRANULE; /* narrowed tiles are multiples of it (loopir.h) */
    if (o->tile_bytes > 0 && k->tiling.passes > 1 && N > G) {
        int64_t t = o->tile_bytes / ((stashw > 0 ? stashw : 1) * es);
        t = t / G * G;
        if (t < G) t = G;
        if (t < N) pl->tile = t, pl->ntiles = (N + t - 1) / t;
    }
    if (N >= 2 * G && item_dominates(o, maxw, total, pl->ntiles, N)) {
        int64_t want = 2 * (int64_t)o->workers;
        int64_t t = ((N + want - 1) / want + G - 1) / G * G;
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

rj_status launch_plan_kernel(const run_view *v, const lkernel *k, const launch_opts *o, launch_plan *pl) {
    memset(pl, 0, sizeof *pl);
    const int64_t *lo = NULL;
    int64_t B = 0, work = 0, maxlen = 0;
    rj_status s;
    switch (k->domain) {
    case UD_ROWS:
        if ((s = class_rows(v, k->dom_class, &lo, &B))) return s;
        pl->units = work = v->cls[k->dom_class].rows;
        break;
    case UD_ITEMS: {
        int64_t N, total = 0, maxw = 0;
        if ((s = class_rows(v, k->dom_class, &lo, &B)) || (s = numel(v, k->dom_dims, k->dom_rank, &N)))
            return s;
        for (int64_t i = 0; lo && i < B; i++) {
            int64_t w = lo[i + 1] - lo[i] + 1;
            total += w;
            if (w > maxw) maxw = w;
        }
        if (!lo) total = v->cls[k->dom_class].rows + B, maxw = class_maxlen(v, k->dom_class) + 1;
        maxlen = stash_rows(v, k, maxw > 0 ? maxw - 1 : 0);
        item_tiles(k, o, N, maxw, k->tiling.scratch_per_row ? maxlen + 1 : maxw, total, scratch_es(v, k), pl);
        pl->units = N > 0 ? B * pl->ntiles : 0; /* no columns: nothing to compute */
        if (!mul_i64(total, N > 0 ? N : 1, &work)) work = INT64_MAX;
        break;
    }
    case UD_PIECES: {
        int64_t N;
        if ((s = class_rows(v, k->dom_class, &lo, &B)) || (s = numel(v, k->dom_dims, k->dom_rank, &N)))
            return s;
        if (!o->pieces || k->tiling.fixed_tile <= 0)
            return ctx_fail(v->ctx, RJ_ERR_INTERNAL, "launch: kernel %s has no pieces", k->name);
        pl->tile = k->tiling.fixed_tile;
        pl->ntiles = (N + k->tiling.fixed_tile - 1) / k->tiling.fixed_tile;
        if (N <= 0 || !mul_i64(o->pieces[k->dom_class], pl->ntiles, &pl->units)) pl->units = 0;
        if (!mul_i64(v->cls[k->dom_class].rows, N > 0 ? N : 1, &work)) work = INT64_MAX;
        break;
    }
    default:
        if ((s = numel(v, k->dom_dims, k->dom_rank, &pl->units))) return s;
        work = pl->units;
        break;
    }
    int64_t per_unit = 1;
    if (k->unit_rank && (s = numel(v, k->unit_dims, k->unit_rank, &per_unit))) return s;
    if (per_unit == 0) pl->units = work = 0; /* units of no element: nothing to run */
    int64_t w = o->workers > 0 ? o->workers : 1;
    if (work < o->small_work || pl->units < 2) w = 1;
    if (w > pl->units) w = pl->units > 0 ? pl->units : 1;
    if (k->tiling.scratch_per_tile > 0 || (k->tiling.scratch_per_row && k->domain == UD_ITEMS)) {
        int64_t per = k->tiling.scratch_per_tile, es = scratch_es(v, k);
        if (k->tiling.scratch_per_row && k->domain == UD_ITEMS && !add_i64(per, maxlen, &per))
            return ctx_fail(v->ctx, RJ_ERR_OVERFLOW, "scratch size overflows");
        int64_t bytes;
        if (!mul_i64(per, pl->tile > 0 ? pl->tile : 1, &pl->scratch_elems) ||
            !mul_i64(pl->scratch_elems, es, &bytes) || !add_i64(bytes, 63, &bytes))
            return ctx_fail(v->ctx, RJ_ERR_OVERFLOW, "scratch size overflows");
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

void launch_args(const run_view *v, const lkernel *k, const launch_plan *pl, const launch_mem *m,
                 int64_t lo, int64_t hi, int worker, bool nt, uint64_t *vals) {
    for (int32_t a = 0; a < k->nparams; a++) {
        const lparam *pm = &k->params[a];
        uint64_t x = 0;
        switch (pm->kind) {
        case PK_BUF: x = m->buf[pm->ref]; break;
        case PK_OFF: x = m->off[pm->ref]; break;
        case PK_LOFF: x = m->loff[pm->ref]; break;
        case PK_SIZE: x = (uint64_t)v->sym[pm->ref].val; break;
        case PK_LO: x = (uint64_t)lo; break;
        case PK_HI: x = (uint64_t)hi; break;
        case PK_TILE: x = (uint64_t)pl->tile; break;
        case PK_SCRATCH: x = m->scratch + (uint64_t)worker * (uint64_t)pl->scratch_bytes; break;
        case PK_NT: x = nt; break;
        case PK_PITEM: x = m->pitem ? m->pitem[pm->ref] : 0; break;
        case PK_PSTART: x = m->pstart ? m->pstart[pm->ref] : 0; break;
        case PK_PROWS: x = m->prows ? (uint64_t)m->prows[pm->ref] : 0; break;
        case PK_ERR: x = m->err; break;
        case PK_SQOFF: {
            int32_t slot = plan_pair_slot(v->plan, pm->ref);
            x = m->sqoff && slot >= 0 ? m->sqoff[slot] : 0;
            break;
        }
        case PK_HEAD: x = 0; break; /* set by the attention's chunk loop (cpu_gemm.c) */
        case PK_BLO: { /* without host offsets: every item (SIMT kernels search within) */
            const run_class *c = &v->cls[k->dom_class];
            x = c->loff ? (uint64_t)item_at_or_before(c->loff, c->batch, lo) : 0;
            break;
        }
        case PK_BHI: {
            const run_class *c = &v->cls[k->dom_class];
            x = c->loff ? (uint64_t)item_at_or_after(c->loff, c->batch, hi) : (uint64_t)c->batch;
            break;
        }
        }
        vals[a] = x;
    }
}

rj_status launch_pieces_make(const run_view *v, int32_t cls, int64_t blocks, launch_pieces *lp) {
    memset(lp, 0, sizeof *lp);
    const int64_t *lo = NULL;
    int64_t B = 0;
    rj_status s = class_rows(v, cls, &lo, &B);
    if (s) return s;
    int64_t total = v->cls[cls].rows, rows = 64;
    if (B > 0) {
        int64_t mean2 = (total / B + 1) * 2;
        int64_t par = total / (blocks > 8 ? blocks / 8 : 1) + 1; /* eight column tiles a piece */
        rows = mean2 < par ? mean2 : par;
        if (rows < 64) rows = 64;
    }
    lp->batch = B;
    if (!lo) { /* no item lengths on the host: as many pieces for every item as the longest
                * needs, at most 64 (pieces past an item's end have no rows) */
        int64_t maxlen = class_maxlen(v, cls), k = maxlen > rows ? (maxlen + rows - 1) / rows : 1;
        if (k > 64) k = 64, rows = (maxlen + 63) / 64;
        lp->rows = rows;
        lp->count = B * k;
        if (!(lp->start = mem_alloc(v->ctx, sizeof(int64_t) * (size_t)(B + 1))) ||
            !(lp->item = mem_alloc(v->ctx, sizeof(int64_t) * (size_t)(lp->count ? lp->count : 1)))) {
            launch_pieces_free(v->ctx, lp);
            return RJ_ERR_NOMEM;
        }
        for (int64_t i = 0; i <= B; i++) lp->start[i] = i * k;
        for (int64_t p = 0; p < lp->count; p++) lp->item[p] = p / k;
        return RJ_OK;
    }
    lp->rows = rows;
    int64_t count = 0;
    for (int64_t i = 0; i < B; i++) {
        int64_t len = lo[i + 1] - lo[i];
        count += len > rows ? (len + rows - 1) / rows : 1; /* <= total + B: no overflow */
    }
    lp->count = count;
    if (!(lp->start = mem_alloc(v->ctx, sizeof(int64_t) * (size_t)(B + 1))) ||
        !(lp->item = mem_alloc(v->ctx, sizeof(int64_t) * (size_t)(count ? count : 1)))) {
        launch_pieces_free(v->ctx, lp);
        return RJ_ERR_NOMEM;
    }
    int64_t p = 0;
    for (int64_t i = 0; i < B; i++) {
        int64_t len = lo[i + 1] - lo[i], n = len > rows ? (len + rows - 1) / rows : 1;
        lp->start[i] = p;
        for (int64_t k = 0; k < n; k++) lp->item[p++] = i;
    }
    lp->start[B] = p;
    return RJ_OK;
}

void launch_pieces_free(rj_ctx *ctx, launch_pieces *lp) {
    mem_free(ctx, lp->start, sizeof(int64_t) * (size_t)(lp->batch + 1));
    mem_free(ctx, lp->item, sizeof(int64_t) * (size_t)(lp->count ? lp->count : 1));
    memset(lp, 0, sizeof *lp);
}

/* ---- host bindings run on a device --------------------------------------------------------- */

typedef struct dev_run {
    const run_view *v;
    bool settled;          /* the binding's previous run has finished (or never was early) */
    const lprog *lp;
    const device_ops *ops;
    void *ud;
    uint64_t *addr;        /* the launch_mem arrays: per buffer, per symbol, per class (offsets,
                            * pieces' items, pieces' starts) */
    size_t naddr;
    int64_t *npieces, *prows; /* per class: launch_pieces' count and rows (-1: not made) */
    int launches;
    launch_mem m;
    uint64_t scratch;
    int64_t scratch_bytes;
} dev_run;

/* Before memory of the previous run is overwritten: that run may have returned early, and
 * its failure (a device check of offsets) is this run's, as rj_bind_wait would have said. */
static rj_status dev_settle(dev_run *r) {
    if (r->settled || !r->v->async->pending) return RJ_OK;
    r->settled = true;
    bool checked;
    return device_settle(r->v, &checked);
}

/* Device memory of slot `slot` (an index of the addr arrays; the last one is the scratch),
 * kept by the binding across runs and grown when a run needs more. */
static rj_status dev_alloc(dev_run *r, size_t slot, uint64_t *d, int64_t bytes, const char *what) {
    *d = 0;
    rj_status s = run_reserve(r->v, bytes, what, -1);
    if (s) return s;
    dev_block *blk = &r->v->mem->dmem[slot];
    if (!blk->addr || blk->bytes < (size_t)bytes) {
        if (blk->addr) {
            if ((s = dev_settle(r))) return s; /* not under the previous run's kernels */
            r->ops->release(r->ud, blk->addr);
        }
        mem_free(r->v->ctx, blk->shadow, blk->shadow_bytes);
        *blk = (dev_block){0};
        if ((s = r->ops->alloc(r->ud, &blk->addr, bytes, what))) return s;
        blk->bytes = (size_t)bytes;
    }
    *d = blk->addr;
    return RJ_OK;
}

/* bytes at src copied into slot's memory; `small`: remember them, and skip the copy when the
 * slot already holds them (offsets and tables that did not change since the last run). */
static rj_status dev_upload(dev_run *r, size_t slot, uint64_t *d, const void *src, int64_t bytes, const char *what,
                            bool small) {
    rj_status s = dev_alloc(r, slot, d, bytes, what);
    if (s || bytes <= 0) return s;
    dev_block *blk = &r->v->mem->dmem[slot];
    if (small && blk->shadow && blk->shadow_bytes == (size_t)bytes && !memcmp(blk->shadow, src, (size_t)bytes))
        return RJ_OK;
    if ((s = dev_settle(r)) || (s = r->ops->write(r->ud, *d, src, (size_t)bytes, what))) return s;
    if (small) {
        void *sh = mem_realloc(r->v->ctx, blk->shadow, blk->shadow_bytes, (size_t)bytes);
        if (!sh) { /* the device holds the new bytes: the old shadow must not match them */
            mem_free(r->v->ctx, blk->shadow, blk->shadow_bytes);
            blk->shadow = NULL;
            blk->shadow_bytes = 0;
            return RJ_ERR_NOMEM;
        }
        memcpy(sh, src, (size_t)bytes);
        blk->shadow = sh;
        blk->shadow_bytes = (size_t)bytes;
    }
    return RJ_OK;
}

/* Device memory for every loop-IR buffer, and the offsets and logical offsets the kernels
 * read; inputs (and, with holes, outputs) copied in. */
static rj_status dev_memory(dev_run *r) {
    const run_view *v = r->v;
    const lprog *lp = r->lp;
    const int32_t nsym = v->plan->nsym;
    uint64_t *buf = r->addr, *off = buf + lp->nbufs, *loff = off + nsym;
    uint64_t *pitem = loff + nsym, *pstart = pitem + nsym, *sqoff = pstart + nsym;
    r->m = (launch_mem){.buf = buf, .off = off, .loff = loff, .pitem = pitem, .pstart = pstart, .prows = r->prows,
                        .sqoff = sqoff};
    /* the pieces of every class an item kernel splits (before the buffers: they size the
     * buffers of pieces) */
    for (int32_t ki = 0; ki < lp->nkernels; ki++) {
        const lkernel *k = &lp->kernels[ki];
        for (int32_t a = 0; a < k->nparams; a++) {
            int32_t sy = k->params[a].ref;
            if (k->params[a].kind != PK_PROWS && k->params[a].kind != PK_PSTART && k->params[a].kind != PK_PITEM)
                continue;
            if (sy < 0 || sy >= nsym)
                return ctx_fail(v->ctx, RJ_ERR_INTERNAL, "%s: pieces of an unknown class", r->ops->what);
            if (r->npieces[sy] >= 0) continue;
            launch_pieces pc;
            rj_status s = launch_pieces_make(v, sy, (r->ops->threads ? r->ops->threads(r->ud) : r->ops->max_threads) / 256, &pc);
            size_t nb = (size_t)lp->nbufs, ns = (size_t)nsym;
            if (!s) s = dev_upload(r, nb + 2 * ns + (size_t)sy, &pitem[sy], pc.item, (int64_t)sizeof(int64_t) * pc.count,
                                   "pieces' items", true);
            if (!s) s = dev_upload(r, nb + 3 * ns + (size_t)sy, &pstart[sy], pc.start,
                                   (int64_t)sizeof(int64_t) * (pc.batch + 1), "pieces' starts", true);
            r->npieces[sy] = pc.count;
            r->prows[sy] = pc.rows;
            launch_pieces_free(v->ctx, &pc);
            if (s) return s;
        }
    }
    bool holes = false;
    for (int32_t s = 0; s < nsym; s++) holes |= v->sym[s].bound && v->sym[s].len;
    for (int32_t i = 0; i < lp->nbufs; i++) {
        const lbuf *lb = &lp->bufs[i];
        int64_t n;
        size_t bytes;
        int64_t es = v->plan->buf[i].es;
        rj_status s = launch_buf_elems(v, i, &n);
        if (s) return s;
        if (!bytes_of(n, (size_t)es, &bytes))
            return ctx_fail(v->ctx, RJ_ERR_OVERFLOW, "%s: buffer %d is too large", r->ops->what, (int)i);
        if (lb->kind == LB_PIECES) { /* slots x inner extent per piece of the class */
            if (lb->index < 0 || lb->index >= nsym || r->npieces[lb->index] < 0)
                return ctx_fail(v->ctx, RJ_ERR_INTERNAL, "%s: buffer %d has no pieces", r->ops->what, (int)i);
            if (!mul_i64(n, r->npieces[lb->index], &n) || !bytes_of(n, (size_t)es, &bytes))
                return ctx_fail(v->ctx, RJ_ERR_OVERFLOW, "%s: buffer %d is too large", r->ops->what, (int)i);
            s = dev_alloc(r, (size_t)i, &buf[i], (int64_t)bytes, "partials of split items");
        } else if (lb->kind == LB_INPUT && v->in[lb->index].dev) { /* the caller's: used in place */
            buf[i] = v->in[lb->index].ddata;
        } else if (lb->kind == LB_OUTPUT && v->out[lb->index].dev) {
            run_out *o = &v->out[lb->index];
            if (!o->duser && o->down_bytes < bytes) { /* the binding's, grown to fit */
                if (o->down) r->ops->release(r->ud, o->down);
                o->down = 0;
                o->down_bytes = 0;
                if ((s = r->ops->alloc(r->ud, &o->down, (int64_t)bytes, "a device output"))) return s;
                o->down_bytes = bytes;
            }
            buf[i] = o->ddata = o->duser ? o->duser : o->down;
        } else if (lb->kind == LB_INPUT)
            s = dev_upload(r, (size_t)i, &buf[i], v->in[lb->index].data, (int64_t)bytes, "an input", false);
        else if (lb->kind == LB_OUTPUT && holes)
            s = dev_upload(r, (size_t)i, &buf[i], v->out[lb->index].data, (int64_t)bytes, "an output", false);
        else
            s = dev_alloc(r, (size_t)i, &buf[i], (int64_t)bytes, lb->kind == LB_OUTPUT ? "an output" : "a temporary");
        if (s) return s;
    }
    for (int32_t ki = 0; ki < lp->nkernels; ki++) {
        const lkernel *k = &lp->kernels[ki];
        for (int32_t a = 0; a < k->nparams; a++) {
            const lparam *pm = &k->params[a];
            int32_t sy = pm->ref;
            rj_status s = RJ_OK;
            int32_t slot = pm->kind == PK_SQOFF ? plan_pair_slot(v->plan, sy) : -1;
            if (pm->kind == PK_SQOFF && (slot < 0 || !sqoff[slot])) {
                if (slot < 0 || !v->pair[slot].sqoff)
                    return ctx_fail(v->ctx, RJ_ERR_INTERNAL, "%s: no blocks for %s", r->ops->what, pm->name);
                s = dev_upload(r, (size_t)lp->nbufs + 4 * (size_t)nsym + (size_t)slot, &sqoff[slot], v->pair[slot].sqoff,
                               (int64_t)sizeof(int64_t) * (v->cls[v->plan->pair[slot].r1].batch + 1), pm->name, true);
                if (s) return s;
                continue;
            }
            if (pm->kind == PK_OFF && !off[sy]) {
                if (sy < 0 || sy >= nsym || !v->sym[sy].bound)
                    return ctx_fail(v->ctx, RJ_ERR_INTERNAL, "%s: no offsets bound for %s", r->ops->what, pm->name);
                if (v->sym[sy].dev) { /* the caller's, used in place */
                    off[sy] = v->sym[sy].doff;
                    continue;
                }
                s = dev_upload(r, (size_t)lp->nbufs + (size_t)sy, &off[sy], v->sym[sy].off,
                               (int64_t)sizeof(int64_t) * (v->sym[sy].batch + 1), pm->name, true);
            } else if (pm->kind == PK_LOFF && !loff[sy]) {
                if (sy < 0 || sy >= nsym || (!v->cls[sy].loff && !v->has_dev))
                    return ctx_fail(v->ctx, RJ_ERR_INTERNAL, "%s: no offsets for ragged class %d", r->ops->what, (int)sy);
                if (!v->cls[sy].loff) { /* trusted device offsets: a packed member's are the logical ones */
                    for (int32_t m = 0; m < nsym && !loff[sy]; m++)
                        if (v->sym[m].bound && v->sym[m].dev && !v->sym[m].dlen && v->plan->sym[m].root == sy)
                            loff[sy] = v->sym[m].doff;
                    if (!loff[sy])
                        return ctx_fail(v->ctx, RJ_ERR_INTERNAL, "%s: no logical offsets for %s", r->ops->what, pm->name);
                    continue;
                }
                s = dev_upload(r, (size_t)lp->nbufs + (size_t)nsym + (size_t)sy, &loff[sy], v->cls[sy].loff,
                               (int64_t)sizeof(int64_t) * (v->cls[sy].batch + 1), pm->name, true);
            }
            if (s) return s;
        }
    }
    return RJ_OK;
}

/* Device scratch of at least `bytes`. */
static rj_status dev_scratch(dev_run *r, int64_t bytes) {
    if (bytes <= r->scratch_bytes) return RJ_OK;
    uint64_t d;
    rj_status s = dev_alloc(r, r->naddr, &d, bytes, "per-thread scratch"); /* the last slot */
    if (!s) r->scratch = d, r->scratch_bytes = bytes;
    return s;
}

/* Device offsets given with their facts and not trusted are checked on the device before the
 * run's kernels (which do nothing if the check fails): the check's words start all ones. */
static rj_status dev_check_offsets(dev_run *r, bool *check) {
    const run_view *v = r->v;
    *check = false;
    for (int32_t s = 0; s < v->plan->nsym; s++) *check |= v->sym[s].bound && v->sym[s].dev && v->sym[s].devcheck;
    if (!*check) return RJ_OK;
    if (!r->ops->check)
        return ctx_fail(v->ctx, RJ_ERR_INTERNAL, "%s: no device check of offsets", r->ops->what);
    size_t n = (size_t)v->plan->nsym + 1;
    uint32_t *ones = mem_alloc(v->ctx, n * sizeof(uint32_t));
    if (!ones) return RJ_ERR_NOMEM;
    memset(ones, 0xff, n * sizeof(uint32_t));
    rj_status s = dev_upload(r, r->naddr + 1, &r->m.err, ones, (int64_t)(n * sizeof(uint32_t)), "the offsets check", false);
    mem_free(v->ctx, ones, n * sizeof(uint32_t));
    for (int32_t sy = 0; !s && sy < v->plan->nsym; sy++) {
        const run_sym *rg = &v->sym[sy];
        if (!rg->bound || !rg->dev || !rg->devcheck) continue;
        uint64_t ref = 0; /* the first device member of its `same` class compares with none */
        for (int32_t m = 0; m < sy && !ref; m++)
            if (v->sym[m].bound && v->sym[m].dev && !v->sym[m].dlen && v->plan->sym[m].kind == SYM_RAGGED &&
                v->plan->sym[m].root == v->plan->sym[sy].root)
                ref = v->sym[m].doff;
        s = r->ops->check(r->ud, rg->doff, ref, rg->batch, rg->info_rows, rg->info_maxlen, r->m.err, sy);
    }
    return s;
}

/* The checks' verdicts after the run's kernels finished: reads through the target's calls. */
static rj_status dev_read_check(void *ud, void *dst, uint64_t addr, size_t bytes) {
    dev_run *r = ud;
    return r->ops->read(r->ud, dst, addr, bytes, "reading the run's checks");
}

/* A unit range [0, units) split across groups of the kernel's launch shape (one thread, a
 * warp, a block), at most max_threads threads in all, in blocks of the target's size; the
 * generated code gives each group one contiguous slice (codegen/simt/kernel.c), so any number
 * of groups is correct. Scratch is per group, and the planner lowers the group count so that
 * a launch's scratch stays within the budget. */
static rj_status dev_launch(dev_run *r, int32_t ki) {
    const lkernel *k = &r->lp->kernels[ki];
    rj_ctx *ctx = r->v->ctx;
    if (k->split_only && k->dom_class >= 0 && k->dom_class < r->v->plan->nsym &&
        r->npieces[k->dom_class] == r->v->cls[k->dom_class].batch)
        return RJ_OK; /* every item is one piece: nothing to combine */
    int64_t block = r->ops->block(r->ud, ki);
    int64_t group = k->launch.simt && k->launch.group > 1 ? k->launch.group : 1;
    if (group > block || block % group)
        return ctx_fail(ctx, RJ_ERR_INTERNAL, "%s: kernel %s groups %lld threads, blocks have %lld",
                        r->ops->what, k->name, (long long)group, (long long)block);
    int64_t most = (r->ops->threads ? r->ops->threads(r->ud) : r->ops->max_threads) / group;
    const launch_opts o = {.workers = most > 0 ? (int)most : 1, .scratch_budget = r->ops->scratch_budget,
                           .pieces = r->npieces};
    launch_plan pl;
    rj_status s = launch_plan_kernel(r->v, k, &o, &pl);
    if (s || pl.units <= 0) return s;
    int64_t threads = ((int64_t)pl.workers * group + block - 1) / block * block;
    if (pl.scratch_elems) {
        int64_t bytes;
        if (!mul_i64(pl.scratch_elems, threads / group, &bytes) ||
            !mul_i64(bytes, scratch_es(r->v, k), &bytes))
            return ctx_fail(ctx, RJ_ERR_OVERFLOW, "%s: scratch size overflows", r->ops->what);
        if ((s = dev_scratch(r, bytes))) return s;
        r->m.scratch = r->scratch;
    }
    size_t nslots = (size_t)k->nparams * 2 + 1;
    uint64_t *vals = mem_zalloc(ctx, sizeof(uint64_t) * nslots * 2);
    if (!vals) return RJ_ERR_NOMEM;
    uint64_t *args = vals + nslots;
    launch_args(r->v, k, &pl, &r->m, 0, pl.units, 0, false, vals);
    size_t n = 0;
    for (int32_t a = 0; a < k->nparams; a++) {
        args[n++] = vals[a];
        if (k->params[a].kind == PK_SCRATCH) args[n++] = (uint64_t)pl.scratch_elems;
    }
    s = r->ops->launch(r->ud, ki, block, threads, args);
    r->launches += s == RJ_OK;
    mem_free(ctx, vals, sizeof(uint64_t) * nslots * 2);
    return s;
}

rj_status device_run(const run_view *v, const device_ops *ops, void *ud) {
    rj_ctx *ctx = v->ctx;
    const lprog *lp = v->lp;
    run_mem *rm = v->mem;
    run_async *as = v->async;
    dev_run r = {.v = v, .lp = lp, .ops = ops, .ud = ud};
    r.naddr = (size_t)lp->nbufs + 4 * (size_t)v->plan->nsym + (size_t)v->plan->npairs;
    size_t nsym = (size_t)(v->plan->nsym ? v->plan->nsym : 1);
    rj_status s = RJ_OK;
    if (!rm->dmem) { /* the binding's device memory: a slot per address, the scratch, the check */
        if ((rm->dmem = mem_zalloc(ctx, sizeof(dev_block) * (r.naddr + 2)))) rm->ndmem = r.naddr + 2;
    }
    if (!rm->dmem || rm->ndmem != r.naddr + 2 ||
        !(r.addr = mem_zalloc(ctx, sizeof(uint64_t) * (r.naddr ? r.naddr : 1))) ||
        !(r.npieces = mem_alloc(ctx, sizeof(int64_t) * nsym)) || !(r.prows = mem_zalloc(ctx, sizeof(int64_t) * nsym)))
        s = rm->dmem && rm->ndmem != r.naddr + 2 ? ctx_fail(ctx, RJ_ERR_INTERNAL, "%s: the binding's device memory "
                                                             "does not fit the program", ops->what)
                                                  : RJ_ERR_NOMEM;
    for (int32_t i = 0; !s && i < v->plan->nsym; i++) r.npieces[i] = -1;
    double t0 = clock_ms();
    if (!s) s = dev_memory(&r);
    bool check = false;
    if (!s) s = dev_check_offsets(&r, &check);
    double t1 = clock_ms();
    for (int32_t ki = 0; !s && ki < lp->nkernels; ki++) s = dev_launch(&r, ki);
    /* every output in device memory: nothing to copy back, and the run may return as soon as
     * its kernels are queued (rj_bind_wait) */
    bool early = ops->leave != NULL;
    for (int32_t i = 0; i < lp->nbufs; i++)
        if (lp->bufs[i].kind == LB_OUTPUT && !v->out[lp->bufs[i].index].dev) early = false;
    double kms = -1;
    if (!s && early) {
        if (!(s = ops->leave(ud))) as->pending = true;
    } else if (!s) {
        s = ops->finish(ud, &kms);
        if (!s) as->pending = false; /* an earlier early run finished before this one */
        if (!s && check) s = device_verdict(v, CHECK_OFFSETS, r.m.err, dev_read_check, &r);
        if (!s && lp->nchecks) s = device_verdict(v, CHECK_INDICES, r.m.buf[lp->checks_buf], dev_read_check, &r);
    }
    as->err_addr = !s && as->pending && check ? r.m.err : 0;
    as->checks_addr = !s && as->pending && lp->nchecks ? r.m.buf[lp->checks_buf] : 0;
    double t2 = clock_ms();
    for (int32_t i = 0; !s && i < lp->nbufs; i++) {
        const lbuf *lb = &lp->bufs[i];
        if (lb->kind != LB_OUTPUT || v->out[lb->index].dev) continue;
        const run_out *ob = &v->out[lb->index];
        size_t bytes;
        if (!bytes_of(ob->numel, (size_t)v->plan->buf[i].es, &bytes))
            s = ctx_fail(ctx, RJ_ERR_OVERFLOW, "%s: output %d is too large", ops->what, lb->index);
        else if (bytes)
            s = ops->read(ud, ob->data, r.m.buf[i], bytes, "copying an output back");
    }
    /* the device memory stays with the binding (run_mem.dmem) for the next run */
    v->stats->copy_ms = (t1 - t0) + (clock_ms() - t2);
    v->stats->kernel_ms = as->pending ? -1 : kms >= 0 ? kms : t2 - t1;
    v->stats->kernels = r.launches;
    mem_free(ctx, r.addr, sizeof(uint64_t) * (r.naddr ? r.naddr : 1));
    mem_free(ctx, r.npieces, sizeof(int64_t) * nsym);
    mem_free(ctx, r.prows, sizeof(int64_t) * nsym);
    return s;
}

/* After the wait: the binding's own device read, on its stream. */
static rj_status settle_read(void *ud, void *dst, uint64_t addr, size_t bytes) {
    const run_view *v = ud;
    return v->be->dev_read(v->ctx, v->stream, dst, addr, bytes);
}

rj_status device_settle(const run_view *v, bool *checked) {
    run_async *as = v->async;
    *checked = false;
    if (!as->pending) return RJ_OK;
    double ms = -1;
    rj_status s = v->be->wait(v->ctx, as, &ms);
    as->pending = false;
    if (!s) v->stats->kernel_ms = ms;
    /* the run's device check of offsets (the kernels did nothing if it failed), its index checks */
    if (!s && as->err_addr) s = device_verdict(v, CHECK_OFFSETS, as->err_addr, settle_read, (void *)v);
    if (!s && as->checks_addr) s = device_verdict(v, CHECK_INDICES, as->checks_addr, settle_read, (void *)v);
    *checked = as->err_addr || as->checks_addr;
    as->err_addr = as->checks_addr = 0;
    return s;
}
