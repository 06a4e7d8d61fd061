/*
 * lower/axis.c — reductions and softmax over a dense dim, and over the columns of a pair.
 */
#include <string.h>

#include "kit.h"

/* At a full index except the axis: the axis loops (max / sum / write for softmax, one fold for
 * a reduction) with scalar accumulators, then the result for a reduction. Along a contiguous
 * axis the loop is a lanes loop and the folds are `reduce` statements over it. */
static void dense_axis_body(lower *L, blk *b, at *a, void *ud) {
    red_ctx *rc = ud;
    const rj_graph *g = L->g;
    const node *root = rc->ai.root, *x = rc->ai.x;
    int32_t rid = (int32_t)(root - g->nodes);
    bool softmax = op_table[root->op].kind == KIND_SOFTMAX;
    rj_dtype t = rc->acc_t;
    int ax = rc->ai.axis;
    int32_t ext = x->dims[ax] == 1 ? xi(L, 1) : xextent(L, x->dims, ax, a);
    int32_t acc = newvar(L, "acc", t), acc2 = newvar(L, "acc2", t);
    int32_t va = newvar(L, "k", RJ_I64);
    int32_t saved = a->idx[ax];
    a->idx[ax] = xvar(L, va);
    bool vec = ax == x->rank - 1; /* contiguous along the axis */
    int passes = softmax ? 3 : 1;
    bool sums = softmax || root->op == RJ_OP_SUM || root->op == RJ_OP_MEAN;
    int32_t comp = sums && dtype_is_float(t) ? newvar(L, "c", t) : -1;
    /* a softmax in a GEMM's epilogue keeps each exp(x - max) in the chunk C, over the product
     * it no longer needs, so the write pass divides instead of computing exp again; C is in
     * cache, and the element is rewritten by the thread that wrote it */
    bool stash = root->op == RJ_OP_SOFTMAX && L->chunk_root >= 0 && ax == x->rank - 1 &&
                 L->g->nodes[L->chunk_root].dtype == t;
    for (int pass = 0; pass < passes; pass++) {
        bool write = softmax && pass == 2;
        int32_t target = softmax && pass == 1 ? acc2 : acc;
        /* an extent known to fit one block needs none */
        bool one_block = x->dims[ax] >= 0 && x->dims[ax] <= SUM_ONE_BLOCK;
        bool blocked = comp >= 0 && !one_block && (softmax ? pass == 1 : true);
        if (!write)
            s_set(L, b, target, softmax ? (pass == 0 ? xextreme(L, t, true) : xconst(L, t, 0))
                                        : identity(L, root->op, t));
        /* a float sum runs in blocks of SUM_BLOCK elements, each summed by the (vectorised)
         * loop into its own partial, the partials compensated (kahan_add): the error stays
         * that of one block whatever the extent */
        blk *into = b, bb = NEWBLK;
        int32_t fb = -1, lo = xi(L, 0), hi = ext, part = target;
        if (blocked) {
            s_set(L, b, comp, xconst(L, t, 0));
            int32_t vkb = newvar(L, "kb", RJ_I64);
            int32_t nb = xbin(L, LOP_IDIV, RJ_I64, xadd(L, ext, xi(L, SUM_BLOCK - 1)), xi(L, SUM_BLOCK));
            fb = s_for(L, b, vkb, xi(L, 0), nb, LM_SERIAL);
            lo = xmul(L, xvar(L, vkb), xi(L, SUM_BLOCK));
            hi = xmin(L, xadd(L, lo, xi(L, SUM_BLOCK)), ext);
            part = newvar(L, "part", t);
            s_set(L, &bb, part, xconst(L, t, 0));
            into = &bb;
        }
        blk ib = NEWBLK;
        int32_t fa = s_for(L, into, va, lo, hi, vec ? LM_LANES : LM_SERIAL);
        L->lanes += vec;
        int32_t v = red_input(L, rc, a);
        if (!softmax) {
            s_accum(L, &ib, part, combine_fn(root->op), v);
        } else if (pass == 0) {
            s_accum(L, &ib, target, RJ_OP_MAXIMUM, v);
        } else if (pass == 1) {
            int32_t e = xun(L, RJ_OP_EXP, t, xbin(L, RJ_OP_SUB, t, v, xvar(L, acc)));
            if (stash) { /* evaluated once, before the store overwrites what it reads */
                int32_t ev = newvar(L, "e", t);
                s_set(L, &ib, ev, e);
                e = xvar(L, ev);
                s_store(L, &ib, buf_param(L, L->chunk_buf), chunk_index(L, a), e, 0);
            }
            s_accum(L, &ib, part, RJ_OP_ADD, e);
        } else {
            int32_t m = xvar(L, acc), s = xvar(L, acc2);
            int32_t e = stash ? xload(L, buf_param(L, L->chunk_buf), chunk_index(L, a), t, -1)
                              : xun(L, RJ_OP_EXP, t, xbin(L, RJ_OP_SUB, t, v, m));
            int32_t y = root->op == RJ_OP_SOFTMAX
                            ? xbin(L, RJ_OP_DIV, t, e, s)
                            : xbin(L, RJ_OP_SUB, t, xbin(L, RJ_OP_SUB, t, v, m), xun(L, RJ_OP_LOG, t, s));
            store_group(L, &ib, rid, y, a, ROWS_ANY, LF_NT);
        }
        L->lanes -= vec;
        close_body(L, fa, &ib);
        if (blocked) {
            kahan_add(L, &bb, t, (place){-1, target}, (place){-1, comp}, xvar(L, part));
            close_body(L, fb, &bb);
            s_set(L, b, target, xbin(L, RJ_OP_SUB, t, xvar(L, target), xvar(L, comp)));
        }
    }
    a->idx[ax] = saved;
    if (softmax) return;
    int32_t r = xvar(L, acc);
    if (root->op == RJ_OP_MEAN) r = xbin(L, RJ_OP_DIV, t, r, xcast(L, t, ext));
    r = xcast(L, root->dtype, r);
    at oa = {.rank = root->rank, .inclass = a->inclass, .outclass = -1, .guard = -1};
    int o = 0;
    for (int d = 0; d < x->rank; d++) {
        if (d != ax) oa.idx[o++] = a->idx[d];
        else if (root->keepdim) oa.idx[o++] = xi(L, 0);
    }
    store_group(L, b, rid, r, &oa, ROWS_ANY, 0);
}

/* Softmax or a reduction over dim 1 of a tensor with two ragged dims: a unit per column
 * (b, j) of an item's block, the rows i < len_b the axis loop (strided: one column of a
 * row-major block). The units are enumerated as the rows of the columns' class, j in the role
 * of i (with two classes, [B, j1, j2], the keys' rows: j < len2_b, i < len1_b). */
static void pair_columns(lower *L, red_ctx *rc) {
    const node *x = rc->ai.x;
    blk top = NEWBLK;
    at a = {.rank = x->rank, .inclass = -1, .outclass = -1, .guard = -1};
    rows_nest rn;
    int32_t c1 = root_of(L->g, x->dims[1]), c2 = root_of(L->g, x->dims[2]);
    blk *in = rows_open(L, &top, &a, c2, &rn);
    if (c1 != c2) a.inclass = -1; /* it says j < len2_b, which the axis loop's i is not */
    a.idx[2] = a.idx[1]; /* the unit's row index is the column j */
    a.idx[1] = xi(L, 0); /* replaced by the axis loop */
    rj_dim dims[RJ_MAX_RANK];
    memcpy(dims, x->dims, sizeof(rj_dim) * x->rank);
    dims[1] = dims[2] = 1; /* looped by the axis body and the units */
    loops_v(L, in, &a, dims, 3, x->rank, dense_axis_body, rc, false);
    rows_close(L, &rn);
    L->k->body = top.first;
}

static void dense_axis(lower *L, red_ctx *rc) {
    const node *root = rc->ai.root, *x = rc->ai.x;
    blk top = NEWBLK;
    /* units: the dims before the axis; the dims after it are looped inside each unit, and the
     * axis itself by the body (its extent replaced by 1 here) */
    rj_dim dims[RJ_MAX_RANK];
    memcpy(dims, x->dims, sizeof(rj_dim) * x->rank);
    dims[rc->ai.axis] = 1;
    int first = leading_units(L, &top, dims, x->rank, rc->ai.axis, x->rank, dense_axis_body, rc);
    /* a reduction's unit writes the dims after the axis (its identities where the axis is
     * empty); a softmax's writes the axis too, and nothing where it holds no element */
    if (op_table[root->op].kind == KIND_SOFTMAX) unit_extent(L, x->dims, first, x->rank);
    L->k->body = top.first;
}

void lower_dense_axis(lower *L, const fuse_group *gr) {
    red_ctx rc;
    axis_begin(L, gr, &rc);
    if (!L->err) dense_axis(L, &rc);
}

void lower_pair_columns(lower *L, const fuse_group *gr) {
    red_ctx rc;
    axis_begin(L, gr, &rc);
    if (!L->err) pair_columns(L, &rc);
}
