/*
 * lower/matmul_simt.c — per-item products on a SIMT target, tiled in shared memory.
 *
 * q kᵀ and p v as a block-wide tiled GEMM per item. A block takes a piece of an item
 * (UD_PIECES: an item's rows cut into pieces, so that a long item is many units) and walks its
 * rows in tiles of MM_T rows and the product's columns (q kᵀ: the item's rows j; p v: the
 * dense columns n) in tiles of MM_T. Per tile of MM_T contraction indices (q kᵀ: d; p v: the
 * item's rows j) every thread stages MM_T² / block elements of A (q's or p's rows, read along
 * the contraction: coalesced) and of B (k's rows transposed, or v's rows) in shared memory;
 * after a barrier every thread accumulates MM_T² / block outputs of the tile (one column,
 * rows r, r + block / MM_T, ...) from them, A's element a broadcast across the warp and B's
 * rows padded to MM_T + 1 elements so that k's transposed stores hit distinct banks; a second
 * barrier frees the tiles for the next step. Each global element is read once per tile pair
 * instead of once per output element, and no output needs a cross-thread reduction. Elements
 * past the piece's rows, the columns or the contraction are staged as zeros and never stored;
 * every loop around a barrier has bounds the whole block shares. Returns false where the
 * block's shape does not suit the tiles (the caller lowers the plain kernel).
 */
#include <stdio.h>

#include "kit.h"

#define MM_T 32

/* One staged element: local[slot] = ok ? value of node n at a : 0. */
static void mm_stage(lower *L, blk *b, int32_t loc, int32_t slot, int32_t ok, int32_t n, const at *a, rj_dtype t) {
    blk yes, no = NEWBLK;
    int32_t fi = s_if(L, b, &yes, ok);
    s_store_local(L, &yes, loc, slot, xcast(L, t, value_fresh(L, n, a)));
    s_store_local(L, &no, loc, slot, xconst(L, t, 0));
    close_body(L, fi, &yes);
    if (!L->err) L->k->st[fi].els = no.first;
}

/* ceil(n / MM_T), for a non-negative n */
static int32_t mm_tiles(lower *L, int32_t n) {
    return xbin(L, LOP_IDIV, RJ_I64, xadd(L, xmax(L, n, xi(L, 0)), xi(L, MM_T - 1)), xi(L, MM_T));
}

/* The shapes of one tiled kernel, shared by its steps. */
typedef struct mm_ctx {
    bool qk;           /* q kᵀ (else p v) */
    int32_t xs, ws;    /* the nodes staged into A and B */
    int32_t cls, kcls; /* the rows' class, the keys' (k's and v's rows: another in cross attention) */
    rj_dtype t;
    int BS, M, RS;     /* threads a block, outputs a thread, rows between a thread's outputs */
    int32_t as, bs;    /* the block-shared tiles */
    int32_t acc[MM_T]; /* a thread's accumulators */
    int32_t b, rend, ncols, ncon; /* the item, the end of the piece's rows, columns, contraction */
    int32_t i0, c0, t0; /* the current tiles' first row, column and contraction index */
    int32_t vv, vq, vbv; /* lane v, contraction step q, B's element */
    int32_t col, rg;   /* a lane's column in the tile and row group */
} mm_ctx;

/* Does the block's shape suit the tiles? (q kᵀ and p v of a pair; not xᵀ y.) */
bool item_matmul_tiled_applies(lower *L, const fuse_group *gr) {
    const rj_graph *g = L->g;
    const node *r = &g->nodes[gr->root], *xn = &g->nodes[r->in[0]], *wn = &g->nodes[r->in[1]];
    int BS = L->k->launch.block;
    bool qk = is_jagged_t(g, wn);
    return !is_jagged_t(g, xn) && (qk || node_is_pair(g, xn)) && BS >= MM_T && BS % MM_T == 0 &&
           (MM_T * MM_T) % BS == 0;
}

/* Per lane, M elements of A [i][t] and of B [t][c] (rows of MM_T + 1) staged. */
static void mm_stage_tiles(lower *L, mm_ctx *c, blk *ttb) {
    blk lb = NEWBLK;
    int32_t fl = s_for(L, ttb, c->vv, xi(L, 0), xi(L, c->BS), LM_LANES);
    int32_t v = xvar(L, c->vv);
    for (int l = 0; l < c->M; l++) {
        int32_t e = xadd(L, v, xi(L, (int64_t)l * c->BS));
        int32_t hi = xbin(L, LOP_IDIV, RJ_I64, e, xi(L, MM_T)), lo = xbin(L, LOP_IREM, RJ_I64, e, xi(L, MM_T));
        /* A: row i0 + hi, contraction t0 + lo */
        int32_t ai = xadd(L, c->i0, hi), at_ = xadd(L, c->t0, lo);
        int32_t aok = xbin(L, RJ_OP_LOGICAL_AND, RJ_BOOL, xcmp(L, RJ_OP_LT, ai, c->rend), xcmp(L, RJ_OP_LT, at_, c->ncon));
        at aa = at3(c->b, ai, at_, c->cls);
        mm_stage(L, &lb, c->as, e, aok, c->xs, &aa, c->t);
        /* B: q kᵀ reads k's row c0 + hi along d = t0 + lo; p v reads v's row t0 + hi along
         * n = c0 + lo: both coalesced */
        bool qk = c->qk;
        int32_t bc = qk ? xadd(L, c->c0, hi) : xadd(L, c->c0, lo), bt = qk ? xadd(L, c->t0, lo) : xadd(L, c->t0, hi);
        int32_t bok = xbin(L, RJ_OP_LOGICAL_AND, RJ_BOOL, xcmp(L, RJ_OP_LT, bc, c->ncols), xcmp(L, RJ_OP_LT, bt, c->ncon));
        at ba = qk ? at3(c->b, bc, bt, c->kcls) : at3(c->b, bt, bc, c->kcls);
        int32_t slot = xadd(L, xmul(L, qk ? lo : hi, xi(L, MM_T + 1)), qk ? hi : lo);
        mm_stage(L, &lb, c->bs, slot, bok, c->ws, &ba, c->t);
    }
    close_body(L, fl, &lb);
}

/* Per lane: acc[m] += A[rg + m RS][q] B[q][col] over the tile's contraction. */
static void mm_accumulate(lower *L, mm_ctx *c, blk *ttb) {
    rj_dtype t = c->t;
    blk lb = NEWBLK, qb = NEWBLK;
    int32_t fl = s_for(L, ttb, c->vv, xi(L, 0), xi(L, c->BS), LM_LANES);
    int32_t fq = s_for(L, &lb, c->vq, xi(L, 0), xi(L, MM_T), LM_SERIAL);
    int32_t q = xvar(L, c->vq);
    s_set(L, &qb, c->vbv, xlocal(L, c->bs, xadd(L, xmul(L, q, xi(L, MM_T + 1)), c->col)));
    for (int m = 0; m < c->M; m++) {
        int32_t row = xadd(L, c->rg, xi(L, (int64_t)m * c->RS));
        int32_t av = xlocal(L, c->as, xadd(L, xmul(L, row, xi(L, MM_T)), q));
        s_set(L, &qb, c->acc[m], xfma(L, t, av, xvar(L, c->vbv), xvar(L, c->acc[m])));
    }
    close_body(L, fq, &qb);
    close_body(L, fl, &lb);
}

/* Per lane: the tile's outputs within the piece and the columns, and what is fused after
 * them. */
static void mm_store(lower *L, mm_ctx *c, blk *tcb, const fuse_group *gr) {
    blk lb = NEWBLK;
    int32_t fl = s_for(L, tcb, c->vv, xi(L, 0), xi(L, c->BS), LM_LANES);
    for (int m = 0; m < c->M; m++) {
        int32_t i = xadd(L, c->i0, xadd(L, c->rg, xi(L, (int64_t)m * c->RS))), j = xadd(L, c->c0, c->col);
        int32_t ok = xbin(L, RJ_OP_LOGICAL_AND, RJ_BOOL, xcmp(L, RJ_OP_LT, i, c->rend), xcmp(L, RJ_OP_LT, j, c->ncols));
        blk sb;
        int32_t fs = s_if(L, &lb, &sb, ok);
        at oa = at3(c->b, i, j, c->cls);
        store_group(L, &sb, gr->root, xvar(L, c->acc[m]), &oa, ROWS_ANY, LF_NT);
        close_body(L, fs, &sb);
    }
    close_body(L, fl, &lb);
}

/* The kernel's description, launch and tiles; false when out of memory. */
static bool mm_open(lower *L, const fuse_group *gr, mm_ctx *c) {
    const rj_graph *g = L->g;
    const node *r = &g->nodes[gr->root], *wn = &g->nodes[r->in[1]];
    lkernel *k = L->k;
    c->BS = k->launch.block;
    c->qk = is_jagged_t(g, wn);
    c->xs = r->in[0], c->ws = c->qk ? wn->in[0] : r->in[1];
    const node *xv = &g->nodes[c->xs], *wv = &g->nodes[c->ws];
    c->cls = root_of(g, c->qk ? xv->dims[1] : r->dims[1]);
    c->kcls = root_of(g, c->qk ? wv->dims[1] : xv->dims[2]);
    c->t = r->dtype;
    c->M = MM_T * MM_T / c->BS, c->RS = c->BS / MM_T;
    k->heavy = true;
    sbuf w;
    sbuf_init(&w, L->ctx);
    sbuf_printf(&w, "per-item product %s of ", c->qk ? "q kᵀ" : "p v");
    print_node_type(&w, g, xv);
    sbuf_puts(&w, " and ");
    print_node_type(&w, g, wv);
    sbuf_puts(&w, ", tiled in shared memory");
    set_what(L, &w);
    k->domain = UD_PIECES;
    k->dom_class = c->cls;
    k->dom_rank = 0;
    k->tiling.tiled = true;
    k->tiling.fixed_tile = 1;
    k->launch.group = c->BS;
    c->as = L->err ? -1 : lk_local(k, "atile", LL_BLOCK, c->t);
    c->bs = L->err || c->as < 0 ? -1 : lk_local(k, "btile", LL_BLOCK, c->t);
    if (c->as < 0 || c->bs < 0) {
        if (!L->err) L->err = RJ_ERR_NOMEM;
        return false;
    }
    if (!L->err) {
        k->locals[c->as].elems = (int64_t)MM_T * MM_T;
        k->locals[c->bs].elems = (int64_t)MM_T * (MM_T + 1);
    }
    for (int m = 0; m < c->M; m++) {
        char name[16];
        snprintf(name, sizeof name, "acc%d", m);
        c->acc[m] = newvar(L, name, c->t);
    }
    return true;
}

void lower_item_matmul_tiled(lower *L, const fuse_group *gr) {
    const rj_graph *g = L->g;
    const node *r = &g->nodes[gr->root];
    mm_ctx c = {0};
    if (!mm_open(L, gr, &c)) return;
    const node *xv = &g->nodes[c.xs];
    int32_t cls = c.cls;
    rj_dtype t = c.t;
    /* the unit u: a piece of item b, its rows [r0, rend) */
    blk top = NEWBLK, ub = NEWBLK;
    int32_t vu = newvar(L, "u", RJ_I64);
    int32_t fu = s_for(L, &top, vu, xparam(L, PK_LO, 0, "lo"), xparam(L, PK_HI, 0, "hi"), LM_UNITS);
    int32_t vb = newvar(L, "b", RJ_I64), vlen = newvar(L, "len", RJ_I64), vr0 = newvar(L, "r0", RJ_I64);
    int32_t vre = newvar(L, "rend", RJ_I64);
    int32_t u = xvar(L, vu);
    s_set(L, &ub, vb, class_load(L, PK_PITEM, cls, "pitem", u));
    c.b = xvar(L, vb);
    s_set(L, &ub, vlen, xlen(L, cls, c.b));
    int32_t len = xvar(L, vlen), prows = class_param(L, PK_PROWS, cls, "prows");
    s_set(L, &ub, vr0, xmul(L, xsub(L, u, class_load(L, PK_PSTART, cls, "pstart", c.b)), prows));
    int32_t r0 = xvar(L, vr0);
    s_set(L, &ub, vre, xmax(L, xmin(L, xadd(L, r0, prows), len), r0)); /* rows [r0, rend) */
    c.rend = xvar(L, vre);
    int32_t klen = c.kcls == cls ? len : xlen(L, c.kcls, c.b);
    c.ncols = c.qk ? klen : xsize(L, r->dims[2]), c.ncon = c.qk ? xsize(L, xv->dims[2]) : klen;
    /* for each tile of rows i0 and of columns c0 */
    int32_t vti = newvar(L, "ti", RJ_I64), vtc = newvar(L, "tc", RJ_I64), vtt = newvar(L, "tt", RJ_I64);
    int32_t vi0 = newvar(L, "i0", RJ_I64), vc0 = newvar(L, "c0", RJ_I64), vt0 = newvar(L, "t0", RJ_I64);
    c.vv = newvar(L, "v", RJ_I64), c.vq = newvar(L, "q", RJ_I64), c.vbv = newvar(L, "bv", t);
    blk tib = NEWBLK, tcb = NEWBLK, ttb = NEWBLK;
    int32_t fti = s_for(L, &ub, vti, xi(L, 0), mm_tiles(L, xsub(L, c.rend, r0)), LM_SERIAL);
    s_set(L, &tib, vi0, xadd(L, r0, xmul(L, xvar(L, vti), xi(L, MM_T))));
    c.i0 = xvar(L, vi0);
    int32_t ftc = s_for(L, &tib, vtc, xi(L, 0), mm_tiles(L, c.ncols), LM_SERIAL);
    s_set(L, &tcb, vc0, xmul(L, xvar(L, vtc), xi(L, MM_T)));
    c.c0 = xvar(L, vc0);
    int32_t v = xvar(L, c.vv);
    c.col = xbin(L, LOP_IREM, RJ_I64, v, xi(L, MM_T));
    c.rg = xbin(L, LOP_IDIV, RJ_I64, v, xi(L, MM_T));
    { /* zero the thread's accumulators */
        blk lb = NEWBLK;
        int32_t fl = s_for(L, &tcb, c.vv, xi(L, 0), xi(L, c.BS), LM_LANES);
        for (int m = 0; m < c.M; m++) s_set(L, &lb, c.acc[m], xconst(L, t, 0));
        close_body(L, fl, &lb);
    }
    int32_t ftt = s_for(L, &tcb, vtt, xi(L, 0), mm_tiles(L, c.ncon), LM_SERIAL);
    s_set(L, &ttb, vt0, xmul(L, xvar(L, vtt), xi(L, MM_T)));
    c.t0 = xvar(L, vt0);
    mm_stage_tiles(L, &c, &ttb);
    put(L, &ttb, s_barrier());
    mm_accumulate(L, &c, &ttb);
    put(L, &ttb, s_barrier());
    close_body(L, ftt, &ttb);
    mm_store(L, &c, &tcb, gr);
    close_body(L, ftc, &tcb);
    close_body(L, fti, &tib);
    close_body(L, fu, &ub);
    L->k->body = top.first;
}
