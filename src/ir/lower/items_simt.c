/*
 * lower/items_simt.c — reductions and softmax over the ragged or padded dim on a SIMT target.
 *
 * One block per (piece, tile) unit. The tile is TS columns wide (a warp's width, or less for a
 * narrow inner extent), and the block's BS threads are R = BS / TS row groups of TS threads:
 * thread v takes column t = v mod TS and rows r, r + R, r + 2R, ... with r = v / TS. A warp
 * therefore reads TS consecutive elements of one row (coalesced), the R row groups stream
 * different rows at once, and every thread folds its rows into registers: a compensated sum,
 * a max/min/product, or for softmax the running maximum m and the sum s of exp(x - m),
 * rescaled when m grows (the online softmax: one pass over the input for both statistics).
 * The threads' partial values meet in block-shared memory after a barrier, and the first TS
 * threads fold the R partials of their column.
 *
 * A piece is a run of at most PK_PROWS rows of one item; the runtime cuts items into pieces
 * per run (UD_PIECES in loopir.h), so that a typical item is one piece and an item far longer
 * than the others becomes many, folded by many blocks at once. So the template is up to three
 * kernels, run in order:
 *
 *   fold     per (piece, tile): the partial values of the piece's rows. An item of one piece is
 *            finished here: its padding rows added in closed form and its result written, or
 *            for softmax its m and 1/s (log s for log_softmax) left in shared memory, from which,
 *            after a second barrier, every thread writes its rows (the input read again, mostly
 *            from L2: the block read the same rows moments before). An item of several pieces
 *            leaves its partials in the global buffer of pieces (LB_PIECES).
 *   combine  per (item, tile) of an item of several pieces: the pieces' partials folded, the
 *            padding added, and the result written (softmax: m and 1/s, into the first piece's
 *            slots).
 *   rows     softmax, per (piece, tile) of an item of several pieces: the piece's rows written.
 *
 * Nothing goes through per-thread global scratch.
 *
 * The online softmax step folds x into (m, s) with a single exp: with mn = max(m, x), one of
 * exp(m - mn) and exp(x - mn) is 1, so
 *     x > m:   s = s * exp(m - x) + (x - x + 1)      (x - x + 1: NaN for x = +inf, as exp(x - mn))
 *     else:    s = s + exp(x - m)                    (0 for x = -inf, whatever m is)
 * which keeps the NaN of the two-pass form wherever it has one (an +inf or NaN in the column),
 * and the sum is compensated as the CPU's is (the compensation rescaled with the sum).
 */
#include <stdio.h>
#include <string.h>

#include "kit.h"

typedef enum { PH_FOLD, PH_COMBINE, PH_ROWS } simt_phase;

typedef struct simt_items {
    red_ctx *rc;
    simt_phase phase;
    blk ub;             /* the unit loop's body */
    int32_t part;       /* block-shared partials: [nslot][BS] (PH_FOLD) */
    int32_t pbuf;       /* the group's buffer of pieces */
    int32_t BS, TS, R, nslot;
    int32_t N;          /* the inner extent */
    int32_t b, f0, tn, len, cnt;
    int32_t p, p0, np;  /* the piece (not PH_COMBINE), the item's first piece, its pieces */
    int32_t r0, rn;     /* the piece's rows [r0, r0 + rn) (not PH_COMBINE) */
    int32_t last;       /* the piece is the item's last (row-dependent padding rows go there) */
    int32_t vv, vt, vr, vq; /* lane v, its column t and row group r, the row step q */
    at rows, pad;       /* element (b, i, f0 + t) in the rows / the padding rows */
    bool softmax, compensate;
} simt_items;

/* slot k of the block-shared partials of lane (expression) v */
static int32_t sp_at(lower *L, simt_items *s, int k, int32_t v) {
    return xlocal(L, s->part, xadd(L, xi(L, (int64_t)k * s->BS), v));
}

/* Index of slot k, column col of piece p in the buffer of pieces. */
static int32_t gp_index(lower *L, simt_items *s, int32_t p, int k, int32_t col) {
    return xadd(L, xmul(L, xadd(L, xmul(L, p, xi(L, s->nslot)), xi(L, k)), s->N), col);
}

static int32_t gp_load(lower *L, simt_items *s, int32_t p, int k, int32_t col, int32_t guard) {
    return xload(L, buf_param(L, s->pbuf), gp_index(L, s, p, k, col), s->rc->acc_t, guard);
}

static void gp_store(lower *L, simt_items *s, blk *b, int32_t p, int k, int32_t col, int32_t v) {
    s_store(L, b, buf_param(L, s->pbuf), gp_index(L, s, p, k, col), v, 0);
}

static void simt_items_open(lower *L, red_ctx *rc, simt_items *s, blk *top, int32_t *fu) {
    const node *x = rc->ai.x;
    lkernel *k = L->k;
    int32_t cls = rc->ai.cls;
    k->domain = s->phase == PH_COMBINE ? UD_ITEMS : UD_PIECES;
    k->dom_class = cls;
    k->dom_rank = x->rank - 2;
    memcpy(k->dom_dims, x->dims + 2, sizeof(rj_dim) * (size_t)k->dom_rank);
    k->tiling.scratch_type = (uint8_t)rc->acc_t;
    k->tiling.passes = s->softmax && s->phase == PH_FOLD ? 2 : 1;
    k->tiling.tiled = true;
    k->tiling.fixed_tile = s->TS;
    k->launch.group = s->BS;
    int32_t vu = newvar(L, "u", RJ_I64);
    int32_t lo = xparam(L, PK_LO, 0, "lo"), hi = xparam(L, PK_HI, 0, "hi");
    *fu = s_for(L, top, vu, lo, hi, LM_UNITS);
    s->ub = NEWBLK;
    int32_t N = xi(L, 1);
    for (int d = 2; d < x->rank; d++) N = xmul(L, N, xsize(L, x->dims[d]));
    s->N = N;
    int32_t T = xi(L, s->TS);
    L->k->tiling.lanes_max = !L->err && L->k->ex[N].kind == LX_CONST && L->k->ex[N].i < s->TS ? L->k->ex[N].i : s->TS;
    int32_t nt = xbin(L, LOP_IDIV, RJ_I64, xadd(L, N, xi(L, s->TS - 1)), T);
    int32_t vb = newvar(L, "b", RJ_I64), vf0 = newvar(L, "f0", RJ_I64), vnt = newvar(L, "tn", RJ_I64);
    int32_t vlen = newvar(L, "len", RJ_I64), vp0 = newvar(L, "p0", RJ_I64), vnp = newvar(L, "np", RJ_I64);
    int32_t u = xvar(L, vu);
    int32_t outer = xbin(L, LOP_IDIV, RJ_I64, u, nt); /* the item or the piece */
    if (s->phase == PH_COMBINE) {
        s_set(L, &s->ub, vb, outer);
        s->p = -1;
    } else {
        int32_t vp = newvar(L, "p", RJ_I64);
        s_set(L, &s->ub, vp, outer);
        s->p = xvar(L, vp);
        s_set(L, &s->ub, vb, class_load(L, PK_PITEM, cls, "pitem", s->p));
    }
    s->b = xvar(L, vb);
    s_set(L, &s->ub, vf0, xmul(L, xsub(L, u, xmul(L, outer, nt)), T));
    s->f0 = xvar(L, vf0);
    s_set(L, &s->ub, vnt, xmin(L, T, xsub(L, N, s->f0)));
    s->tn = xvar(L, vnt);
    rc->ntile = s->tn;
    s_set(L, &s->ub, vlen, xlen(L, cls, s->b));
    s->len = xvar(L, vlen);
    s->cnt = rc->ai.padded ? xsub(L, xsize(L, rc->ai.L), s->len) : xi(L, 0);
    s_set(L, &s->ub, vp0, class_load(L, PK_PSTART, cls, "pstart", s->b));
    s->p0 = xvar(L, vp0);
    s_set(L, &s->ub, vnp, xsub(L, class_load(L, PK_PSTART, cls, "pstart", xadd(L, s->b, xi(L, 1))), s->p0));
    s->np = xvar(L, vnp);
    if (s->phase != PH_COMBINE) {
        int32_t vr0 = newvar(L, "r0", RJ_I64), vrn = newvar(L, "rn", RJ_I64);
        int32_t piece = xsub(L, s->p, s->p0);
        s_set(L, &s->ub, vr0, xmul(L, piece, class_param(L, PK_PROWS, cls, "prows")));
        s->r0 = xvar(L, vr0);
        s_set(L, &s->ub, vrn, xmin(L, class_param(L, PK_PROWS, cls, "prows"), xsub(L, s->len, s->r0)));
        s->rn = xvar(L, vrn);
        s->last = xcmp(L, RJ_OP_EQ, piece, xsub(L, s->np, xi(L, 1)));
    }
    if (s->phase == PH_FOLD) {
        s->part = L->err ? 0 : lk_local(k, "part", LL_BLOCK, rc->acc_t);
        if (s->part < 0) {
            L->err = RJ_ERR_NOMEM;
            s->part = 0;
        } else if (!L->err) {
            k->locals[s->part].elems = (int64_t)s->nslot * s->BS;
        }
    }
    rc->vi = newvar(L, "i", RJ_I64);
    s->vv = newvar(L, "v", RJ_I64);
    s->vt = newvar(L, "t", RJ_I64);
    s->vr = newvar(L, "r", RJ_I64);
    s->vq = newvar(L, "q", RJ_I64);
    s->rows = item_element(L, x, cls, s->b, xvar(L, rc->vi), xadd(L, s->f0, xvar(L, s->vt)), &s->pad);
}

/* Opens "for v in 0 .. BS lanes { t = v mod TS; r = v / TS; ...": one iteration per thread. */
static int32_t simt_lane_loop(lower *L, simt_items *s, blk *into, blk *body) {
    *body = NEWBLK;
    int32_t f = s_for(L, into, s->vv, xi(L, 0), xi(L, s->BS), LM_LANES);
    int32_t v = xvar(L, s->vv);
    s_set(L, body, s->vt, s->TS == 1 ? xi(L, 0) : xbin(L, LOP_IREM, RJ_I64, v, xi(L, s->TS)));
    s_set(L, body, s->vr, s->TS == 1 ? v : xbin(L, LOP_IDIV, RJ_I64, v, xi(L, s->TS)));
    return f;
}

/* Opens the row loop of a lane: rows [lo, lo + n) of the item with i = lo + r + q * R, none
 * when the lane's column is outside the tile; sets i. */
static int32_t simt_row_loop(lower *L, simt_items *s, blk *into, blk *body, int32_t lo, int32_t n) {
    *body = NEWBLK;
    int32_t r = xvar(L, s->vr);
    int32_t steps = xbin(L, LOP_IDIV, RJ_I64, xadd(L, xsub(L, n, r), xi(L, s->R - 1)), xi(L, s->R));
    int32_t ok = xcmp(L, RJ_OP_LT, xvar(L, s->vt), s->tn);
    steps = xsel(L, ok, xmax(L, steps, xi(L, 0)), xi(L, 0));
    int32_t f = s_for(L, into, s->vq, xi(L, 0), steps, LM_SERIAL);
    s_set(L, body, s->rc->vi, xadd(L, lo, xadd(L, r, xmul(L, xvar(L, s->vq), xi(L, s->R)))));
    return f;
}

/* The end of an online softmax step or merge: (s, c) rescaled to the new maximum where the
 * value x (above m: big) raises it (by ex = e^(m - x)), term added, m raised to x. */
static void online_fold(lower *L, blk *b, rj_dtype t, int32_t vm, int32_t vs, int32_t vc, int32_t big, int32_t ex,
                        int32_t term, int32_t x) {
    int32_t m = xvar(L, vm);
    int32_t vsc = newvar(L, "scale", t);
    s_set(L, b, vsc, xsel(L, big, ex, xconst(L, t, 1)));
    s_set(L, b, vs, xbin(L, RJ_OP_MUL, t, xvar(L, vs), xvar(L, vsc)));
    s_set(L, b, vc, xbin(L, RJ_OP_MUL, t, xvar(L, vc), xvar(L, vsc)));
    kahan_add(L, b, t, (place){-1, vs}, (place){-1, vc}, term);
    s_set(L, b, vm, xbin(L, RJ_OP_MAXIMUM, t, m, x));
}

/* The online softmax step: (m, s, c) folded with `times` copies (an expression of the type,
 * or -1 for one) of x; times > 0 is the caller's guard. */
static void online_step(lower *L, blk *b, rj_dtype t, int32_t vm, int32_t vs, int32_t vc, int32_t x,
                        int32_t times) {
    int32_t m = xvar(L, vm);
    int32_t big = xcmp(L, RJ_OP_GT, x, m);
    int32_t ex = xun(L, RJ_OP_EXP, t, xbin(L, RJ_OP_SUB, t, xbin(L, RJ_OP_MINIMUM, t, x, m),
                                         xbin(L, RJ_OP_MAXIMUM, t, x, m)));
    int32_t one = xbin(L, RJ_OP_ADD, t, xbin(L, RJ_OP_SUB, t, x, x), xconst(L, t, 1));
    int32_t neginf = xcmp(L, RJ_OP_EQ, x, xextreme(L, t, true));
    int32_t term = xsel(L, big, one, xsel(L, neginf, xconst(L, t, 0), ex));
    if (times >= 0) term = xbin(L, RJ_OP_MUL, t, term, times);
    online_fold(L, b, t, vm, vs, vc, big, ex, term, x);
}

/* Merges a partial (m2, sum2) of the online softmax into (m, s, c). */
static void online_merge(lower *L, blk *b, rj_dtype t, int32_t vm, int32_t vs, int32_t vc, int32_t m2,
                         int32_t sum2) {
    int32_t m = xvar(L, vm);
    int32_t big = xcmp(L, RJ_OP_GT, m2, m);
    int32_t ex = xun(L, RJ_OP_EXP, t, xbin(L, RJ_OP_SUB, t, xbin(L, RJ_OP_MINIMUM, t, m2, m),
                                         xbin(L, RJ_OP_MAXIMUM, t, m2, m)));
    int32_t neginf = xcmp(L, RJ_OP_EQ, m2, xextreme(L, t, true));
    int32_t term = xsel(L, neginf, xconst(L, t, 0), xsel(L, big, sum2, xbin(L, RJ_OP_MUL, t, sum2, ex)));
    online_fold(L, b, t, vm, vs, vc, big, ex, term, m2);
}

/* Folds element v into the lane's accumulators a (and c) or (m, s, c). */
static void simt_fold(lower *L, simt_items *s, blk *b, int32_t va, int32_t vs, int32_t vc, int32_t v) {
    red_ctx *rc = s->rc;
    rj_dtype t = rc->acc_t;
    int32_t vx = newvar(L, "x", t); /* read once, used by several statements */
    s_set(L, b, vx, v);
    v = xvar(L, vx);
    if (s->softmax) online_step(L, b, t, va, vs, vc, v, -1);
    else if (s->compensate) kahan_add(L, b, t, (place){-1, va}, (place){-1, vc}, v);
    else s_set(L, b, va, combine(L, (rj_op)rc->ai.root->op, t, xvar(L, va), v));
}

/* Merges partial k (its slots' values) into the accumulators. */
static void simt_merge(lower *L, simt_items *s, blk *b, int32_t va, int32_t vs, int32_t vc,
                       const int32_t *slot) {
    rj_dtype t = s->rc->acc_t;
    if (s->softmax)
        online_merge(L, b, t, va, vs, vc, slot[0], xbin(L, RJ_OP_SUB, t, slot[1], slot[2]));
    else if (s->compensate)
        kahan_add(L, b, t, (place){-1, va}, (place){-1, vc}, xbin(L, RJ_OP_SUB, t, slot[0], slot[1]));
    else
        s_set(L, b, va, combine(L, (rj_op)s->rc->ai.root->op, t, xvar(L, va), slot[0]));
}

/* The accumulators set from a partial's slots. */
static void simt_load_acc(lower *L, simt_items *s, blk *b, int32_t va, int32_t vs, int32_t vc,
                          const int32_t *slot) {
    s_set(L, b, va, slot[0]);
    if (s->softmax) s_set(L, b, vs, slot[1]);
    if (s->softmax || s->compensate) s_set(L, b, vc, slot[s->softmax ? 2 : 1]);
}

/* The accumulators' values in slot order. */
static void simt_acc_slots(lower *L, simt_items *s, int32_t va, int32_t vs, int32_t vc, int32_t *slot) {
    slot[0] = xvar(L, va);
    slot[1] = xvar(L, s->softmax ? vs : vc);
    slot[2] = xvar(L, vc);
}

/* Pass 1 (PH_FOLD): every lane folds its rows of the piece (and, in the item's last piece, the
 * padding rows whose value depends on the row) into registers and leaves them in the block's
 * partials. */
static void simt_pass_fold(lower *L, simt_items *s, int32_t va, int32_t vs, int32_t vc) {
    red_ctx *rc = s->rc;
    rj_dtype t = rc->acc_t;
    blk lb;
    int32_t fl = simt_lane_loop(L, s, &s->ub, &lb);
    s_set(L, &lb, va, s->softmax ? xextreme(L, t, true) : identity(L, (rj_op)rc->ai.root->op, t));
    if (s->softmax) s_set(L, &lb, vs, xconst(L, t, 0));
    if (s->softmax || s->compensate) s_set(L, &lb, vc, xconst(L, t, 0));
    for (int part = 0; part < 2; part++) {
        int32_t v;
        if (part == 1) {
            if (!rc->ai.padded) break;
            v = red_input(L, rc, &s->pad);
            if (!expr_uses_var(L, v, rc->vi)) break; /* closed form, when the item is finished */
        }
        blk rb;
        int32_t fr = part ? simt_row_loop(L, s, &lb, &rb, s->len, xsel(L, s->last, s->cnt, xi(L, 0)))
                          : simt_row_loop(L, s, &lb, &rb, s->r0, s->rn);
        v = red_input(L, rc, part ? &s->pad : &s->rows);
        simt_fold(L, s, &rb, va, vs, vc, v);
        close_body(L, fr, &rb);
    }
    int32_t slot[3];
    simt_acc_slots(L, s, va, vs, vc, slot);
    for (int k = 0; k < s->nslot; k++)
        s_store_local(L, &lb, s->part, xadd(L, xi(L, (int64_t)k * s->BS), xvar(L, s->vv)), slot[k]);
    close_body(L, fl, &lb);
    put(L, &s->ub, s_barrier());
}

/* The padding rows of one value, in closed form, when the item is complete. */
static void simt_padding(lower *L, simt_items *s, blk *cb, int32_t va, int32_t vs, int32_t vc) {
    red_ctx *rc = s->rc;
    rj_dtype t = rc->acc_t;
    if (!rc->ai.padded) return;
    int32_t v = red_input(L, rc, &s->pad);
    if (expr_uses_var(L, v, rc->vi)) return; /* folded row by row */
    int32_t some = xcmp(L, RJ_OP_GT, s->cnt, xi(L, 0));
    if (s->softmax) {
        blk ib;
        int32_t fi = s_if(L, cb, &ib, some);
        online_step(L, &ib, t, va, vs, vc, v, xcast(L, t, s->cnt));
        close_body(L, fi, &ib);
    } else if (s->compensate) {
        kahan_add(L, cb, t, (place){-1, va}, (place){-1, vc},
                  xsel(L, some, xbin(L, RJ_OP_MUL, t, v, xcast(L, t, s->cnt)), xconst(L, t, 0)));
    } else {
        s_set(L, cb, va, combine_n(L, (rj_op)rc->ai.root->op, t, xvar(L, va), v, s->cnt));
    }
}

/* The item's result for column t (reductions), then the epilogue; softmax: its m and its 1/s
 * (log s) through store(slot, value). */
static void simt_finish(lower *L, simt_items *s, blk *cb, int32_t va, int32_t vs, int32_t vc,
                        void (*store)(lower *, simt_items *, blk *, int, int32_t)) {
    red_ctx *rc = s->rc;
    const node *root = rc->ai.root, *x = rc->ai.x;
    rj_dtype t = rc->acc_t;
    simt_padding(L, s, cb, va, vs, vc);
    if (s->softmax) {
        int32_t sum = xbin(L, RJ_OP_SUB, t, xvar(L, vs), xvar(L, vc));
        store(L, s, cb, 0, xvar(L, va));
        store(L, s, cb, 1, root->op == RJ_OP_SOFTMAX ? xbin(L, RJ_OP_DIV, t, xconst(L, t, 1), sum)
                                                     : xun(L, RJ_OP_LOG, t, sum));
        return;
    }
    int32_t r = xvar(L, va);
    if (s->compensate) r = xbin(L, RJ_OP_SUB, t, r, xvar(L, vc));
    if (root->op == RJ_OP_MEAN) {
        int32_t n = rc->ai.padded ? xsize(L, rc->ai.L) : s->len;
        r = xbin(L, RJ_OP_DIV, t, r, xcast(L, t, n));
    }
    r = xcast(L, root->dtype, r);
    at oa = {.rank = root->rank, .inclass = -1, .outclass = -1, .guard = -1};
    oa.idx[0] = s->b;
    int o = 1;
    if (root->keepdim) oa.idx[o++] = xi(L, 0);
    for (int d = 2; d < x->rank; d++) oa.idx[o++] = s->rows.idx[d];
    store_group(L, cb, (int32_t)(root - L->g->nodes), r, &oa, ROWS_OUT, 0);
}

static void store_shared(lower *L, simt_items *s, blk *b, int k, int32_t v) {
    s_store_local(L, b, s->part, xadd(L, xi(L, (int64_t)k * s->BS), xvar(L, s->vt)), v);
}

static void store_first_piece(lower *L, simt_items *s, blk *b, int k, int32_t v) {
    gp_store(L, s, b, s->p0, k, xadd(L, s->f0, xvar(L, s->vt)), v);
}

/* Softmax: every lane writes its rows of the piece (and, in the item's last piece, the padding
 * rows where something padded is materialised) from its column's m and 1/s (log s). */
static void simt_write_rows(lower *L, const fuse_group *gr, simt_items *s, blk *into, int32_t m, int32_t kv) {
    red_ctx *rc = s->rc;
    const rj_graph *g = L->g;
    const node *root = rc->ai.root;
    rj_dtype t = rc->acc_t;
    bool padded_out = rows_padded_out(L, gr);
    blk lb;
    int32_t fl = simt_lane_loop(L, s, into, &lb);
    int32_t vm = newvar(L, "m", t), vk = newvar(L, "k", t);
    s_set(L, &lb, vm, m);
    s_set(L, &lb, vk, kv);
    for (int part = 0; part < (rc->ai.padded && padded_out ? 2 : 1); part++) {
        const at *pa = part ? &s->pad : &s->rows;
        blk rb;
        int32_t fr = part ? simt_row_loop(L, s, &lb, &rb, s->len, xsel(L, s->last, s->cnt, xi(L, 0)))
                          : simt_row_loop(L, s, &lb, &rb, s->r0, s->rn);
        int32_t v = red_input(L, rc, pa);
        int32_t y = root->op == RJ_OP_SOFTMAX
                        ? xbin(L, RJ_OP_MUL, t, xun(L, RJ_OP_EXP, t, xbin(L, RJ_OP_SUB, t, v, xvar(L, vm))), xvar(L, vk))
                        : xbin(L, RJ_OP_SUB, t, xbin(L, RJ_OP_SUB, t, v, xvar(L, vm)), xvar(L, vk));
        store_group(L, &rb, (int32_t)(root - g->nodes), y, pa, part == 0 ? ROWS_IN : ROWS_OUT, LF_NT);
        close_body(L, fr, &rb);
    }
    close_body(L, fl, &lb);
}

/* The fold kernel: see above. */
static void simt_kernel_fold(lower *L, const fuse_group *gr, simt_items *s, int32_t va, int32_t vs, int32_t vc) {
    simt_pass_fold(L, s, va, vs, vc);
    /* the first TS lanes fold the R partials of their column */
    blk cb = NEWBLK;
    int32_t fc = s_for(L, &s->ub, s->vt, xi(L, 0), s->tn, LM_LANES);
    int32_t col = xvar(L, s->vt), slot[3];
    for (int k = 0; k < s->nslot; k++) slot[k] = sp_at(L, s, k, col);
    simt_load_acc(L, s, &cb, va, vs, vc, slot);
    if (s->R > 1) {
        blk rb = NEWBLK;
        int32_t fr = s_for(L, &cb, s->vr, xi(L, 1), xi(L, s->R), LM_SERIAL);
        int32_t ix = xadd(L, xmul(L, xvar(L, s->vr), xi(L, s->TS)), col);
        for (int k = 0; k < s->nslot; k++) slot[k] = sp_at(L, s, k, ix);
        simt_merge(L, s, &rb, va, vs, vc, slot);
        close_body(L, fr, &rb);
    }
    /* an item of one piece is finished here; the pieces of a longer one are left for the
     * combine kernel */
    blk one, many = NEWBLK;
    int32_t fi = s_if(L, &cb, &one, xcmp(L, RJ_OP_EQ, s->np, xi(L, 1)));
    simt_finish(L, s, &one, va, vs, vc, store_shared);
    simt_acc_slots(L, s, va, vs, vc, slot);
    for (int k = 0; k < s->nslot; k++) gp_store(L, s, &many, s->p, k, xadd(L, s->f0, col), slot[k]);
    close_body(L, fi, &one);
    if (!L->err) L->k->st[fi].els = many.first;
    close_body(L, fc, &cb);
    if (s->softmax) { /* an item of one piece: its rows from m and 1/s in shared memory */
        blk ib;
        int32_t fw = s_if(L, &s->ub, &ib, xcmp(L, RJ_OP_EQ, s->np, xi(L, 1)));
        put(L, &ib, s_barrier());
        simt_write_rows(L, gr, s, &ib, sp_at(L, s, 0, xvar(L, s->vt)), sp_at(L, s, 1, xvar(L, s->vt)));
        close_body(L, fw, &ib);
    }
    put(L, &s->ub, s_barrier()); /* the next unit overwrites the partials */
}

/* The combine kernel: the pieces of an item of several, folded. */
static void simt_kernel_combine(lower *L, simt_items *s, int32_t va, int32_t vs, int32_t vc) {
    blk ib;
    int32_t fi = s_if(L, &s->ub, &ib, xcmp(L, RJ_OP_GT, s->np, xi(L, 1)));
    blk cb = NEWBLK;
    int32_t fc = s_for(L, &ib, s->vt, xi(L, 0), s->tn, LM_LANES);
    int32_t col = xadd(L, s->f0, xvar(L, s->vt)), slot[3];
    for (int k = 0; k < s->nslot; k++) slot[k] = gp_load(L, s, s->p0, k, col, -1);
    simt_load_acc(L, s, &cb, va, vs, vc, slot);
    blk rb = NEWBLK;
    int32_t fr = s_for(L, &cb, s->vq, xi(L, 1), s->np, LM_SERIAL);
    int32_t p = xadd(L, s->p0, xvar(L, s->vq));
    for (int k = 0; k < s->nslot; k++) slot[k] = gp_load(L, s, p, k, col, -1);
    simt_merge(L, s, &rb, va, vs, vc, slot);
    close_body(L, fr, &rb);
    simt_finish(L, s, &cb, va, vs, vc, store_first_piece);
    close_body(L, fc, &cb);
    close_body(L, fi, &ib);
}

/* The rows kernel (softmax): the rows of the pieces of an item of several. */
static void simt_kernel_rows(lower *L, const fuse_group *gr, simt_items *s) {
    blk ib;
    int32_t fi = s_if(L, &s->ub, &ib, xcmp(L, RJ_OP_GT, s->np, xi(L, 1)));
    int32_t col = xadd(L, s->f0, xvar(L, s->vt));
    int32_t in_tile = xcmp(L, RJ_OP_LT, xvar(L, s->vt), s->tn); /* no column past the tile */
    simt_write_rows(L, gr, s, &ib, gp_load(L, s, s->p0, 0, col, in_tile), gp_load(L, s, s->p0, 1, col, in_tile));
    close_body(L, fi, &ib);
}

static void simt_kernel(lower *L, const fuse_group *gr, red_ctx *rc, simt_phase ph, int32_t pbuf) {
    simt_items s = {.rc = rc, .phase = ph, .pbuf = pbuf};
    const node *root = rc->ai.root, *x = rc->ai.x;
    s.softmax = op_table[root->op].kind == KIND_SOFTMAX;
    bool sums = s.softmax || root->op == RJ_OP_SUM || root->op == RJ_OP_MEAN;
    s.compensate = sums && dtype_is_float(rc->acc_t);
    s.nslot = s.softmax ? 3 : s.compensate ? 2 : 1;
    int64_t n = 1;
    bool known = true;
    for (int d = 2; d < x->rank; d++) {
        if (x->dims[d] < 0) known = false;
        else n *= x->dims[d];
    }
    s.BS = L->k->launch.block;
    s.TS = L->desc->warp < s.BS ? L->desc->warp : s.BS;
    while (known && s.TS > 1 && s.TS / 2 >= n) s.TS /= 2;
    s.R = s.BS / s.TS;
    L->memo_n = 0;
    blk top = NEWBLK;
    int32_t fu;
    simt_items_open(L, rc, &s, &top, &fu);
    rj_dtype t = rc->acc_t;
    int32_t va = newvar(L, s.softmax ? "mx" : "acc", t);
    int32_t vs = newvar(L, "s", t), vc = newvar(L, "c", t);
    switch (ph) {
    case PH_FOLD: simt_kernel_fold(L, gr, &s, va, vs, vc); break;
    case PH_COMBINE: simt_kernel_combine(L, &s, va, vs, vc); break;
    default: simt_kernel_rows(L, gr, &s); break;
    }
    close_body(L, fu, &s.ub);
    L->k->body = top.first;
}

/* The buffer of pieces of a group's item kernels: nslot values per element of the inner
 * extent per piece. */
static int32_t add_pieces_buf(lower *L, red_ctx *rc) {
    lprog *p = L->prog;
    const node *root = rc->ai.root, *x = rc->ai.x;
    if (!mem_grow(L->ctx, (void **)&p->bufs, &p->capbufs, p->nbufs + 1, sizeof(lbuf))) {
        L->err = RJ_ERR_NOMEM;
        return 0;
    }
    bool softmax = op_table[root->op].kind == KIND_SOFTMAX;
    bool compensate = (softmax || root->op == RJ_OP_SUM || root->op == RJ_OP_MEAN) && dtype_is_float(rc->acc_t);
    lbuf *b = &p->bufs[p->nbufs];
    memset(b, 0, sizeof *b);
    b->kind = LB_PIECES;
    b->dtype = (uint8_t)rc->acc_t;
    b->index = rc->ai.cls;
    b->node = -1;
    b->rank = x->rank - 1;
    b->dims[0] = softmax ? 3 : compensate ? 2 : 1;
    for (int d = 2; d < x->rank; d++) b->dims[d - 1] = x->dims[d];
    return p->nbufs++;
}

static void lower_items_simt(lower *L, const fuse_group *gr, red_ctx *rc) {
    int32_t pbuf = add_pieces_buf(L, rc);
    if (L->err) return;
    char base[32], what[96];
    snprintf(base, sizeof base, "%s", L->k->name);
    snprintf(what, sizeof what, "%s", L->k->what);
    simt_kernel(L, gr, rc, PH_FOLD, pbuf);
    int nk = op_table[rc->ai.root->op].kind == KIND_SOFTMAX ? 3 : 2;
    static const char *const sfx[] = {"", "_combine", "_rows"};
    static const char *const role[] = {"", "combine the pieces of long items", "rows of long items"};
    for (int ph = 1; ph < nk && !L->err; ph++) {
        char name[48];
        snprintf(name, sizeof name, "%s%s", base, sfx[ph]);
        if (!open_kernel(L, name)) return;
        snprintf(L->k->what, sizeof L->k->what, "%.60s: %s", what, role[ph]);
        L->k->split_only = true;
        simt_kernel(L, gr, rc, (simt_phase)ph, pbuf);
    }
}

void lower_items_simt_group(lower *L, const fuse_group *gr) {
    red_ctx rc;
    axis_begin(L, gr, &rc);
    if (L->err) return; /* its axis unknown (out of memory): no class to address items by */
    lower_items_simt(L, gr, &rc);
}
