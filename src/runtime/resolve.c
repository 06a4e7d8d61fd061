/*
 * resolve.c — the validation that resolves a run: from the bindings to the run's view.
 *
 * run_resolve, called by rj_program_run and by rj_bind_output_numel, which stops before
 * anything is allocated, walks the program's plan (plan.c) over what the caller bound
 * (bind.c) and fills the binding's run state (run.c) in the order a user would fix problems:
 *   1. every input some output depends on, and every ragged symbol the graph uses, is bound (an
 *      input no output depends on may stay unbound: then its symbols are not required either);
 *   2. offsets are well formed (offsets_check; every bound symbol's, used or not), batch sizes
 *      agree per parent dim;
 *   3. symbols declared `same` have equal lengths (all bound members of a class, whichever
 *      of them are bound);
 *   4. dense sizes are bound or solvable from input element counts; max(j) sizes computed;
 *   5. every input buffer has exactly the elements its shape needs (for jagged inputs: the
 *      last offset equals its row count);
 *   6. pad lengths and unpad sources are long enough for the longest row;
 *   7. outputs: caller memory is large enough, or ragjit memory is (re)allocated.
 * Each failure has its own status and names the input or symbol and the first bad index.
 * What it resolves (the value of each symbol, the logical offsets, batch and rows of each
 * ragged class, where each input is and where each output goes) is the view every backend
 * reads; the plan answers every question about the graph, so nothing here calls into it.
 */
#include <stdio.h>
#include <string.h>

#include "runtime.h"

static void mark_dims(const plan_shape *sh, uint8_t *used) {
    for (int k = 0; k < sh->rank; k++)
        if (dim_is_sym(sh->dims[k])) used[dim_sym(sh->dims[k])] = 1;
}

/* Elements of a tensor of shape sh in this run: rows x inner for jagged, the product for dense.
 * By NumPy's rule (util.h), the dims of an empty tensor must fit as well, so that every
 * partial product the backends compute fits. */
static rj_status shape_numel(const run_state *rs, const plan_shape *sh, const char *what, int64_t *out) {
    const run_view *v = &rs->v;
    int nf = 0;
    int64_t fact[RJ_MAX_RANK];
    if (sh->kind == SHAPE_PAIR) { /* the blocks of len1_b x len2_b rows, then the inner dims */
        const int64_t *sq = run_pair_off(v, sh->pkey);
        fact[nf++] = sq ? sq[rs->cls[sh->cls].batch] : 0;
        for (int k = 3; k < sh->rank; k++) fact[nf++] = run_dim(v, sh->dims[k]);
    } else {
        for (int k = 0; k < sh->rank; k++) {
            if (k == sh->rpos) fact[nf++] = rs->sym[sh->rsym].rows;
            else if (k != sh->rpos - 1) fact[nf++] = run_dim(v, sh->dims[k]); /* B: in the rows */
        }
    }
    if (!shape_count(nf, fact, out, NULL))
        return ctx_fail(v->ctx, RJ_ERR_OVERFLOW, "%s: the element count overflows", what);
    return RJ_OK;
}

/* 1. The inputs some output needs are bound; bound idle inputs make their symbols count. */
static rj_status take_inputs(rj_bind *b, run_state *rs) {
    const run_plan *pl = b->plan;
    memcpy(rs->used, pl->used, (size_t)pl->nsym);
    for (int32_t i = 0; i < pl->ninputs; i++) {
        const plan_io *pi = &pl->in[i];
        const in_bind *ib = &b->in[i];
        if (pi->idle && ib->set) mark_dims(&pi->sh, rs->used); /* checked as bound */
        if (!ib->set && !pi->idle)
            return ctx_fail(b->ctx, RJ_ERR_UNBOUND, "input %s is not bound (rj_bind_input or "
                            "rj_bind_tensor)", pi->name);
        rs->in[i] = (run_in){.data = ib->data, .ddata = ib->ddata, .numel = ib->numel, .set = ib->set, .dev = ib->dev,
                             .constant = ib->constant, .gen = ib->gen};
    }
    for (int32_t s = 0; s < pl->nsym; s++) {
        const rag_bind *r = &b->rag[s];
        run_sym *y = &rs->sym[s];
        y->bound = r->set;
        y->dev = r->dev;
        y->devcheck = false;
        y->batch = r->batch;
        y->off = r->dev ? NULL : r->off;
        y->len = r->dev ? NULL : r->len;
        y->doff = r->doff;
        y->dlen = r->dlen;
        y->info_rows = r->info_rows;
        y->info_maxlen = r->info_maxlen;
    }
    return RJ_OK;
}

/* Device offsets read back for validation and planning (one copy each of offsets, lengths). */
static rj_status fetch_offsets(rj_bind *b, run_state *rs) {
    const run_plan *pl = b->plan;
    for (int32_t s = 0; s < pl->nsym; s++) {
        run_sym *r = &rs->sym[s];
        run_symmem *own = &rs->own[s];
        if (!r->bound || !r->dev) continue;
        if (b->trusted && !r->dlen && r->info_rows < 0)
            return ctx_fail(b->ctx, RJ_ERR_ARG, "trusted device offsets of %s need their rows given by "
                            "rj_bind_offsets_info", pl->sym[s].name);
        bool maxlen_used = false; /* a size max(j) of this symbol shapes something */
        for (int32_t m = 0; m < pl->nsym; m++)
            maxlen_used |= pl->sym[m].kind == SYM_MAXLEN && pl->sym[m].parent == s && rs->used[m];
        if (b->trusted && !r->dlen && maxlen_used && r->info_maxlen < 0)
            return ctx_fail(b->ctx, RJ_ERR_ARG, "trusted device offsets of %s need their longest item given by "
                            "rj_bind_offsets_info: max(%s) is a size of the program", pl->sym[s].name,
                            pl->sym[s].name);
        /* the device check reports an item in 32 bits (8 item + code): beyond 2^29 items the
         * offsets are read back instead, unless trusted */
        bool checkable = b->trusted || r->batch < ((int64_t)1 << 29);
        if (!r->dlen && r->info_rows >= 0 && (r->info_maxlen >= 0 || !maxlen_used) && checkable) {
            /* the caller's facts stand for the offsets; unless trusted, a kernel checks them on
             * the device (launch.c) */
            r->devcheck = !b->trusted;
            continue;
        } /* a view with holes, or offsets without the facts the program needs: read back and
           * checked here */
        size_t n = (size_t)(r->batch + 1) + (r->dlen ? (size_t)r->batch : 0), bytes = n * sizeof(int64_t);
        if (bytes > own->hcopy_bytes) {
            int64_t *h = mem_realloc(b->ctx, own->hcopy, own->hcopy_bytes, bytes);
            if (!h) return RJ_ERR_NOMEM;
            own->hcopy = h;
            own->hcopy_bytes = bytes;
        }
        char what[160];
        snprintf(what, sizeof what, "the device offsets of %s", pl->sym[s].name);
        rj_status st = b->be->dev_check(b->ctx, r->doff, sizeof(int64_t) * (size_t)(r->batch + 1), true, what);
        if (!st) st = b->be->dev_read(b->ctx, b->stream, own->hcopy, r->doff, sizeof(int64_t) * (size_t)(r->batch + 1));
        if (!st && r->dlen) {
            snprintf(what, sizeof what, "the device lengths of %s", pl->sym[s].name);
            st = b->be->dev_check(b->ctx, r->dlen, sizeof(int64_t) * (size_t)r->batch, true, what);
            if (!st) st = b->be->dev_read(b->ctx, b->stream, own->hcopy + r->batch + 1, r->dlen,
                                          sizeof(int64_t) * (size_t)r->batch);
        }
        if (st) return st;
        r->off = own->hcopy;
        r->len = r->dlen ? own->hcopy + r->batch + 1 : NULL;
    }
    return RJ_OK;
}

/* `same` symbols: every bound member has the lengths of the class's first bound member, row by
 * row (the class's root may be bound to nothing when no tensor uses it). */
static rj_status check_same(rj_bind *b, run_state *rs) {
    const run_plan *pl = b->plan;
    rj_ctx *ctx = b->ctx;
    for (int32_t s = 0; s < pl->nsym; s++) {
        if (pl->sym[s].kind != SYM_RAGGED || !rs->sym[s].bound) continue;
        int32_t root = pl->sym[s].root, ref = 0;
        while (!rs->sym[ref].bound || pl->sym[ref].kind != SYM_RAGGED || pl->sym[ref].root != root) ref++;
        if (ref == s) continue;
        const run_sym *x = &rs->sym[ref], *y = &rs->sym[s];
        const char *xn = pl->sym[ref].name, *yn = pl->sym[s].name;
        if (x->batch != y->batch)
            return ctx_fail(ctx, RJ_ERR_SAME, "%s and %s are declared same but have batch sizes "
                            "%lld and %lld", xn, yn, (long long)x->batch, (long long)y->batch);
        if (!x->off || !y->off) { /* trusted device offsets: their facts must agree */
            if (x->rows != y->rows)
                return ctx_fail(ctx, RJ_ERR_SAME, "%s and %s are declared same but have %lld and %lld rows", xn, yn,
                                (long long)x->rows, (long long)y->rows);
            continue;
        }
        for (int64_t k = 0; k < x->batch; k++) {
            int64_t nx = row_len(x->off, x->len, k), ny = row_len(y->off, y->len, k);
            if (nx != ny)
                return ctx_fail(ctx, RJ_ERR_SAME, "%s and %s are declared same but item %lld has "
                                "length %lld vs %lld", xn, yn, (long long)k, (long long)nx, (long long)ny);
        }
    }
    return RJ_OK;
}

/* 2, 3. Offsets of every bound symbol, batch sizes per parent dim, `same` classes. */
static rj_status check_ragged(rj_bind *b, run_state *rs) {
    const run_plan *pl = b->plan;
    rj_ctx *ctx = b->ctx;
    for (int32_t s = 0; s < pl->nsym; s++) {
        const plan_sym *sy = &pl->sym[s];
        if (sy->kind != SYM_RAGGED) continue;
        run_sym *r = &rs->sym[s];
        if (!r->bound) {
            if (!rs->used[s]) continue;
            return ctx_fail(ctx, RJ_ERR_UNBOUND, "ragged symbol %s has no offsets bound "
                            "(rj_bind_offsets or rj_bind_tensor)", sy->name);
        }
        /* bound offsets are checked even where no tensor uses the symbol: a `same` class takes
         * its row layout from any bound member (class_offsets, the interpreter) */
        char what[200];
        snprintf(what, sizeof what, "ragged symbol %s", sy->name);
        rj_status st = RJ_OK;
        if (r->dev && !r->off) { /* rows and the longest item as the caller says */
            r->rows = r->info_rows;
            r->val = r->info_maxlen >= 0 ? r->info_maxlen : r->info_rows;
        } else {
            st = offsets_check(ctx, what, r->batch, r->off, r->len, &r->rows, &r->val);
        }
        if (st) return st;
        if (!rs->used[s]) continue;
        int32_t p = sy->parent;
        if (b->size_set[p] && b->size[p] != r->batch)
            return ctx_fail(ctx, RJ_ERR_BATCH, "ragged symbol %s has %lld offsets (batch %lld) "
                            "but %s is bound to %lld", sy->name, (long long)(r->batch + 1),
                            (long long)r->batch, pl->sym[p].name, (long long)b->size[p]);
        for (int32_t o = 0; o < s; o++) {
            const plan_sym *so = &pl->sym[o];
            if (so->kind == SYM_RAGGED && so->parent == p && rs->sym[o].bound && rs->used[o] &&
                rs->sym[o].batch != r->batch)
                return ctx_fail(ctx, RJ_ERR_BATCH, "ragged symbols %s and %s vary over the same "
                                "dim %s but have batch sizes %lld and %lld", so->name, sy->name,
                                pl->sym[p].name, (long long)rs->sym[o].batch, (long long)r->batch);
        }
        rs->sym[p].val = r->batch;
    }
    return check_same(b, rs);
}

/* Pair tensors ([B, j1, j2]): item b's len1_b x len2_b block starts at row sqoff[b] of the
 * pair's blocks, a prefix sum of the products of the lengths (from the logical offsets; j1 = j2
 * squares them). Both classes vary over one batch dim, so their batch sizes agree (checked
 * with the offsets). */
static rj_status pair_offsets(const run_plan *pl, run_state *rs) {
    rj_ctx *ctx = rs->v.ctx;
    for (int32_t k = 0; k < pl->npairs; k++) {
        const plan_pair *pp = &pl->pair[k];
        const run_class *c1 = &rs->cls[pp->r1], *c2 = &rs->cls[pp->r2];
        run_pair *p = &rs->pair[k];
        p->sqoff = NULL;
        bool used = rs->used[pp->r1] && rs->used[pp->r2];
        if (!used && (!c1->loff || !c2->loff)) continue; /* only idle inputs have it */
        if (!c1->loff || !c2->loff)
            return ctx_fail(ctx, RJ_ERR_UNSUPPORTED, "ragged symbol %s: a program with two ragged dims (%s by %s) "
                            "needs its offsets on the host (not trusted device offsets)",
                            pl->sym[c1->loff ? pp->r2 : pp->r1].name, pl->sym[pp->r1].name, pl->sym[pp->r2].name);
        int64_t B = c1->batch;
        if (c2->batch != B)
            return ctx_fail(ctx, RJ_ERR_BATCH, "ragged symbols %s and %s: batch sizes %lld and %lld differ",
                            pl->sym[pp->r1].name, pl->sym[pp->r2].name, (long long)B, (long long)c2->batch);
        if (p->cap < B + 1) {
            int64_t *n = mem_realloc(ctx, p->own, sizeof(int64_t) * (size_t)p->cap, sizeof(int64_t) * (size_t)(B + 1));
            if (!n) return RJ_ERR_NOMEM;
            p->own = n;
            p->cap = B + 1;
        }
        int64_t *q = p->own;
        q[0] = 0;
        for (int64_t b = 0; b < B; b++) {
            int64_t l1 = c1->loff[b + 1] - c1->loff[b], l2 = c2->loff[b + 1] - c2->loff[b], l12;
            if (!mul_i64(l1, l2, &l12) || !add_i64(q[b], l12, &q[b + 1]))
                return ctx_fail(ctx, RJ_ERR_OVERFLOW, "ragged symbols %s and %s: the blocks of their items' "
                                "lengths overflow", pl->sym[pp->r1].name, pl->sym[pp->r2].name);
        }
        p->sqoff = q;
    }
    return RJ_OK;
}

/* Logical offsets per ragged class: a packed member's offsets serve the whole class (members
 * have equal lengths, checked above); if every member is a view with holes, a prefix sum of
 * the lengths, kept in memory the binding reuses. Kernels iterate a class's rows in this
 * packed order and address each tensor through its own symbol's offsets. */
static rj_status class_offsets(const run_plan *pl, run_state *rs) {
    for (int32_t r = 0; r < pl->nroots; r++) {
        int32_t s = pl->roots[r];
        run_class *c = &rs->cls[s];
        run_symmem *own = &rs->own[s];
        const run_sym *src = NULL;
        c->loff = NULL;
        for (int32_t m = 0; m < pl->nsym; m++)
            if (rs->sym[m].bound && pl->sym[m].kind == SYM_RAGGED && pl->sym[m].root == s &&
                (!src || (src->len && !rs->sym[m].len)))
                src = &rs->sym[m];
        if (!src) continue;
        c->batch = src->batch;
        if (!src->off) { /* trusted device offsets */
            c->rows = src->rows;
            continue;
        }
        if (!src->len) {
            c->loff = src->off;
            c->rows = src->off[src->batch];
            continue;
        }
        if (own->loff_cap < src->batch + 1) {
            int64_t *n = mem_realloc(rs->v.ctx, own->loff, sizeof(int64_t) * (size_t)own->loff_cap,
                                     sizeof(int64_t) * (size_t)(src->batch + 1));
            if (!n) return RJ_ERR_NOMEM;
            own->loff = n;
            own->loff_cap = src->batch + 1;
        }
        int64_t *lo = own->loff;
        lo[0] = 0;
        for (int64_t k = 0; k < src->batch; k++) lo[k + 1] = lo[k] + src->len[k];
        c->loff = lo;
        c->rows = lo[src->batch];
    }
    return pl->npairs ? pair_offsets(pl, rs) : RJ_OK;
}

/* 4. Dense sizes: bound ones, then ones solvable from an input's element count (a dense size
 * appearing exactly once among otherwise known dims of an input). */
static rj_status resolve_dense(rj_bind *b, run_state *rs, uint8_t *known) {
    const run_plan *pl = b->plan;
    run_sym *y = rs->sym;
    for (int32_t s = 0; s < pl->nsym; s++) {
        const plan_sym *sy = &pl->sym[s];
        if (sy->kind == SYM_RAGGED && y[s].bound) known[s] = known[sy->parent] = 1;
        if (sy->kind == SYM_DENSE && b->size_set[s] && !known[s]) {
            y[s].val = b->size[s];
            known[s] = 1;
        }
        if (sy->kind == SYM_MAXLEN && y[sy->parent].bound) {
            y[s].val = y[sy->parent].val;
            known[s] = 1;
        }
    }
    for (bool progress = true; progress;) {
        progress = false;
        for (int32_t i = 0; i < pl->ninputs; i++) {
            const plan_shape *sh = &pl->in[i].sh;
            if (!rs->in[i].set || sh->kind == SHAPE_PAIR) continue; /* sizes come from elsewhere for blocks */
            int rp = sh->rpos, unknown = -1, nunknown = 0;
            int64_t c = 1;
            bool ok = true;
            for (int k = 0; k < sh->rank && ok; k++) {
                if (k == rp - 1) continue;
                rj_dim d = sh->dims[k];
                int64_t val;
                if (k == rp) val = y[dim_sym(d)].rows;
                else if (d >= 0) val = d;
                else if (known[dim_sym(d)]) val = y[dim_sym(d)].val;
                else {
                    if (unknown >= 0 && sh->dims[unknown] == d) ok = false;
                    unknown = k;
                    nunknown++;
                    continue;
                }
                ok = mul_i64(c, val, &c);
            }
            if (!ok || nunknown != 1 || c == 0 || rs->in[i].numel % c) continue;
            int32_t s = dim_sym(sh->dims[unknown]);
            y[s].val = rs->in[i].numel / c;
            known[s] = 1;
            progress = true;
        }
    }
    for (int32_t s = 0; s < pl->nsym; s++)
        if (!known[s] && pl->sym[s].kind == SYM_DENSE && rs->used[s])
            return ctx_fail(b->ctx, RJ_ERR_UNBOUND, "dense size %s is not bound (rj_bind_size) "
                            "and cannot be derived from the inputs", pl->sym[s].name);
    return RJ_OK;
}

/* 5. Every bound input has the elements its shape needs. */
static rj_status check_inputs(const run_plan *pl, run_state *rs) {
    rj_ctx *ctx = rs->v.ctx;
    for (int32_t i = 0; i < pl->ninputs; i++) {
        const plan_shape *sh = &pl->in[i].sh;
        const run_in *ib = &rs->in[i];
        if (!ib->set) continue; /* idle */
        int64_t need;
        char what[200];
        snprintf(what, sizeof what, "input %s", pl->in[i].name);
        rj_status s = shape_numel(rs, sh, what, &need);
        if (s) return s;
        size_t bytes;
        if (!bytes_of(need, (size_t)sh->es, &bytes))
            return ctx_fail(ctx, RJ_ERR_OVERFLOW, "%s: %lld elements overflow the address "
                            "space", what, (long long)need);
        if (ib->numel == need) continue;
        if (sh->kind == SHAPE_PAIR) /* blocks: no view with holes, the count is the whole story */
            return ctx_fail(ctx, RJ_ERR_SIZE, "%s: bound %lld elements but its blocks of len_b x len_b rows need "
                            "%lld", what, (long long)ib->numel, (long long)need);
        if (sh->rpos < 0)
            return ctx_fail(ctx, RJ_ERR_SIZE, "%s: bound %lld elements but its shape needs "
                            "%lld", what, (long long)ib->numel, (long long)need);
        const run_sym *r = &rs->sym[sh->rsym];
        int64_t rows = r->rows, inner = rows ? need / rows : 0;
        if (!rows) {
            /* no rows addressed: inner size alone decides */
            int64_t c = 1;
            for (int k = sh->rpos + 1; k < sh->rank; k++) c *= run_dim(&rs->v, sh->dims[k]);
            inner = c;
        }
        if (inner == 0 || ib->numel % inner)
            return ctx_fail(ctx, RJ_ERR_SIZE, "%s: bound %lld elements, not a whole number "
                            "of rows of %lld", what, (long long)ib->numel, (long long)inner);
        int64_t have = ib->numel / inner;
        if (r->len && have >= rows) continue; /* a view with holes may have spare rows */
        return ctx_fail(ctx, RJ_ERR_OFFSETS_END, "%s: the offsets of %s %s %lld (index "
                        "%lld) but the values have %lld rows", what, pl->sym[sh->rsym].name,
                        r->len ? "address rows up to" : "end at", (long long)rows,
                        (long long)r->batch, (long long)have);
    }
    return RJ_OK;
}

/* 6. pad(x, len=L) and unpad(p[B, L, ...], j) need L >= the longest row. */
static rj_status check_pad_lengths(const run_plan *pl, run_state *rs) {
    for (int32_t i = 0; i < pl->npads; i++) {
        const plan_pad *pd = &pl->pad[i];
        rj_dim L = pd->len;
        int64_t lv = run_dim(&rs->v, L), maxlen = rs->sym[pd->sym].val;
        if (pd->len2 != RJ_DIM_NONE && run_dim(&rs->v, pd->len2) < lv) /* [B, L, L2]: the shorter */
            L = pd->len2, lv = run_dim(&rs->v, L);
        if (lv >= maxlen) continue;
        const run_sym *r = &rs->sym[pd->sym];
        int64_t item = 0;
        while (r->off && item < r->batch && row_len(r->off, r->len, item) <= lv) item++;
        char num[24];
        snprintf(num, sizeof num, "%lld", (long long)L);
        return ctx_fail(rs->v.ctx, RJ_ERR_PAD_LEN, "%s: length %s = %lld is shorter than "
                        "item %lld of %s (%lld rows); truncation is not supported", pd->op,
                        L >= 0 ? num : pl->sym[dim_sym(L)].name, (long long)lv, (long long)item,
                        pl->sym[pd->sym].name, (long long)maxlen);
    }
    return RJ_OK;
}

/* The result tensor of output i: its memory with the symbol's addressing. */
static void describe_output(run_state *rs, const plan_shape *sh, run_out *o) {
    rj_tensor *t = &o->result;
    memset(t, 0, sizeof *t);
    t->ctx = rs->v.ctx;
    t->owned_by_bind = true;
    t->info.dtype = (rj_dtype)sh->dtype;
    t->info.rank = sh->rank;
    t->info.values = o->data;
    t->info.ragged_dim = sh->rpos;
    for (int k = 0; k < sh->rank; k++) t->info.shape[k] = run_dim(&rs->v, sh->dims[k]);
    t->info.ragged_dims = sh->rpos >= 0 ? 1 : 0;
    if (sh->kind == SHAPE_PAIR) { /* blocks of len1_b x len2_b rows */
        const int64_t *sq = run_pair_off(&rs->v, sh->pkey);
        t->info.ragged_dims = 2;
        t->info.rows = sq[rs->cls[sh->cls].batch];
        t->info.offsets = sq;
        t->info.lengths = NULL;
    } else if (sh->rpos >= 0) {
        t->info.rows = rs->sym[sh->rsym].rows;
        t->info.offsets = rs->sym[sh->rsym].off;
        t->info.lengths = rs->sym[sh->rsym].len;
    } else {
        t->info.rows = o->numel;
    }
}

/* 7. Where each output goes: the caller's memory if large enough, else ragjit's. */
static rj_status place_outputs(rj_bind *b, run_state *rs) {
    const run_plan *pl = b->plan;
    for (int32_t i = 0; i < pl->noutputs; i++) {
        const plan_shape *sh = &pl->out[i].sh;
        const out_bind *ob = &b->out[i];
        run_out *o = &rs->out[i];
        char what[200];
        snprintf(what, sizeof what, "output %s", pl->out[i].name);
        int64_t need;
        size_t bytes;
        rj_status s = shape_numel(rs, sh, what, &need);
        if (s) return s;
        if (!bytes_of(need, (size_t)sh->es, &bytes))
            return ctx_fail(b->ctx, RJ_ERR_OVERFLOW, "%s: %lld elements overflow the address "
                            "space", what, (long long)need);
        if (rs->sizing) { /* the size only: the last run's results stay as they are */
            o->sized = need;
            continue;
        }
        o->dev = ob->dev;
        o->duser = ob->dev ? ob->duser : 0;
        if (ob->dev) {
            if (ob->duser && ob->cap < need)
                return ctx_fail(b->ctx, RJ_ERR_SIZE, "%s: the bound device buffer holds %lld elements "
                                "but this run writes %lld", what, (long long)ob->cap, (long long)need);
            if (!ob->duser && (s = run_reserve(&rs->v, (int64_t)bytes, what, -1))) return s;
            o->data = NULL; /* the run sets ddata */
        } else if (ob->user) {
            if (ob->cap < need)
                return ctx_fail(b->ctx, RJ_ERR_SIZE, "%s: the bound buffer holds %lld elements "
                                "but this run writes %lld", what, (long long)ob->cap,
                                (long long)need);
            o->data = ob->user;
        } else if ((s = run_reserve(&rs->v, (int64_t)bytes, what, -1))) {
            return s;
        } else {
            /* placed as tensor data (mem.c): 64-byte aligned, whole cache lines per row for
             * streaming stores and vectors; large ones half a page off the inputs' pages */
            size_t nb = bytes + mem_data_pad(bytes);
            if (nb > o->own_bytes || !o->own) {
                void *m = mem_realloc(b->ctx, o->own, o->own_bytes, nb);
                if (!m) return RJ_ERR_NOMEM;
                o->own = m;
                o->own_bytes = nb;
            }
            o->data = mem_data_place(o->own, bytes);
        }
        o->numel = need;
        describe_output(rs, sh, o);
    }
    return RJ_OK;
}

/* A device output against the device inputs and outputs before it: address ranges on CUDA;
 * on OpenCL, where a cl_mem is a handle, the same handle. */
static rj_status check_overlap_device(rj_bind *b, const run_state *rs, int32_t o, size_t ob_bytes) {
    const run_plan *pl = b->plan;
    const out_bind *ob = &b->out[o];
    bool ranges = b->be && b->be->target == RJ_TARGET_CUDA;
    if (!ob->duser || !ob_bytes) return RJ_OK;
    uint64_t lo = ob->duser, hi = lo + ob_bytes;
    for (int32_t i = 0; i < pl->ninputs; i++) {
        const run_in *ib = &rs->in[i];
        uint64_t n = (uint64_t)ib->numel * (uint64_t)pl->in[i].sh.es;
        if (ib->dev && n && (ranges ? ib->ddata < hi && lo < ib->ddata + n : ib->ddata == lo))
            return ctx_fail(b->ctx, RJ_ERR_ARG, "output %s overlaps input %s (outputs must not alias inputs)",
                            pl->out[o].name, pl->in[i].name);
    }
    for (int32_t k = 0; k < o; k++) {
        const out_bind *q = &b->out[k];
        uint64_t n = (uint64_t)rs->out[k].numel * (uint64_t)pl->out[k].sh.es;
        if (q->dev && q->duser && n && (ranges ? q->duser < hi && lo < q->duser + n : q->duser == lo))
            return ctx_fail(b->ctx, RJ_ERR_ARG, "outputs %s and %s overlap", pl->out[k].name, pl->out[o].name);
    }
    return RJ_OK;
}

/* Outputs must not overlap inputs or each other: kernels read inputs after writing outputs
 * (softmax's passes) and the generated code assumes no aliasing. */
static rj_status check_overlap(rj_bind *b, const run_state *rs) {
    const run_plan *pl = b->plan;
    for (int32_t o = 0; o < pl->noutputs; o++) {
        const out_bind *ob = &b->out[o];
        size_t ob_bytes = (size_t)rs->out[o].numel * (size_t)pl->out[o].sh.es;
        if (ob->dev) {
            rj_status s = check_overlap_device(b, rs, o, ob_bytes);
            if (s) return s;
            continue;
        }
        if (!ob->user || !ob_bytes) continue;
        const char *lo = ob->user, *hi = lo + ob_bytes;
        for (int32_t i = 0; i < pl->ninputs; i++) {
            const char *p = rs->in[i].data;
            size_t n = (size_t)rs->in[i].numel * (size_t)pl->in[i].sh.es;
            if (p && n && p < hi && lo < p + n)
                return ctx_fail(b->ctx, RJ_ERR_ARG, "output %s overlaps input %s (outputs must not "
                                "alias inputs)", pl->out[o].name, pl->in[i].name);
        }
        for (int32_t k = 0; k < o; k++) {
            const out_bind *q = &b->out[k];
            size_t qn = (size_t)rs->out[k].numel * (size_t)pl->out[k].sh.es;
            if (q->user && qn && (const char *)q->user < hi && lo < (const char *)q->user + qn)
                return ctx_fail(b->ctx, RJ_ERR_ARG, "outputs %s and %s overlap", pl->out[k].name,
                                pl->out[o].name);
        }
    }
    return RJ_OK;
}

/* Every buffer where the binding says it is, as far as the driver can tell, and as large as
 * bound (device memory). */
static rj_status check_memory(rj_bind *b, const run_state *rs) {
    const run_plan *pl = b->plan;
    if (!b->be || !b->be->dev_check) return RJ_OK;
    char what[200];
    for (int32_t i = 0; i < pl->ninputs; i++) {
        const run_in *ib = &rs->in[i];
        if (!ib->set) continue; /* idle */
        size_t bytes = (size_t)ib->numel * (size_t)pl->in[i].sh.es;
        snprintf(what, sizeof what, "input %s", pl->in[i].name);
        rj_status s = ib->dev ? b->be->dev_check(b->ctx, ib->ddata, bytes, true, what)
                              : b->be->dev_check(b->ctx, (uint64_t)(uintptr_t)ib->data, bytes, false, what);
        if (s) return s;
    }
    for (int32_t i = 0; i < pl->noutputs; i++) {
        const out_bind *o = &b->out[i];
        snprintf(what, sizeof what, "output %s", pl->out[i].name);
        size_t bytes = (size_t)rs->out[i].numel * (size_t)pl->out[i].sh.es;
        rj_status s = RJ_OK;
        if (o->dev && o->duser) s = b->be->dev_check(b->ctx, o->duser, bytes, true, what);
        else if (!o->dev && o->user) s = b->be->dev_check(b->ctx, (uint64_t)(uintptr_t)o->user, bytes, false, what);
        if (s) return s;
    }
    for (int32_t s = 0; s < pl->nsym; s++) {
        const rag_bind *r = &b->rag[s];
        if (!r->set || r->dev) continue;
        snprintf(what, sizeof what, "the offsets of %s", pl->sym[s].name);
        rj_status st = b->be->dev_check(b->ctx, (uint64_t)(uintptr_t)r->off, 0, false, what);
        if (st) return st;
    }
    return RJ_OK;
}

rj_status run_resolve(rj_bind *b) {
    const run_plan *pl = b->plan;
    run_state *rs = b->run;
    rj_ctx *ctx = b->ctx;
    rs->prepared = false;
    rs->mem.reserved = 0;
    rs->v.stream = b->stream;
    rs->v.has_dev = b->has_dev;
    rj_status s = take_inputs(b, rs);
    if (s || (b->has_dev && (s = fetch_offsets(b, rs))) || (s = check_ragged(b, rs)) || (s = class_offsets(pl, rs)))
        return s;
    uint8_t stack_known[64], *known = stack_known;
    size_t kn = (size_t)pl->nsym;
    if (kn > sizeof stack_known && !(known = mem_alloc(ctx, kn))) return RJ_ERR_NOMEM;
    memset(known, 0, kn ? kn : 1);
    s = resolve_dense(b, rs, known);
    if (known != stack_known) mem_free(ctx, known, kn);
    if (s) return s;
    if ((s = check_inputs(pl, rs)) || (s = check_pad_lengths(pl, rs)) || (s = place_outputs(b, rs))) return s;
    if (rs->sizing) return RJ_OK;
    if ((s = check_overlap(b, rs))) return s;
    return check_memory(b, rs);
}
