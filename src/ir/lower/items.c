/*
 * lower/items.c — reductions and softmax over the ragged or padded dim on a CPU.
 *
 * A unit is an item b and a tile [f0, f0 + tn) of its inner extent. Each lane t of the tile
 * has its own accumulators in a thread-local array, and the item's rows are folded into them
 * by a serial row loop around a lanes loop: a reduction over the rows, vectorised across the
 * lanes, so the lanes loop does not reduce and there is no `reduce` statement here. A kernel is
 * a sequence of named phases over that shape:
 *
 *   reductions  init, fold the rows, fold the padding rows, write
 *   softmax     init, fold the rows (max), fold the padding rows, init, fold the rows (sum of
 *               exp), fold the padding rows, invert the sum (softmax), write the rows
 *
 * where the padding rows (a padded axis: rows len_b <= i < L) are folded in closed form when
 * their value does not depend on i, and row by row otherwise.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "kit.h"

typedef struct items {
    red_ctx *rc;
    blk ub;            /* the unit loop's body, where the phases append */
    int32_t loc;       /* the thread-local accumulators (and softmax's stash) */
    int32_t sloc;      /* the accumulators' local: loc, or a constant-sized one of their own
                        * when the tile is a constant (state_tile) */
    int32_t vt;        /* the lane variable t */
    int32_t len, cnt;  /* the item's rows; its padding rows (0 unless the axis is padded) */
    at rows, pad;      /* element (b, i, f0 + t): in the rows, in the padding rows */
    int32_t s0, s1;    /* lane t of the first and the second accumulator */
    int32_t sc, sp;    /* lane t of the compensation and the block partial of a float sum */
    int32_t s2;        /* softmax: the input stashed for row i, lane t */
    bool compensate;   /* float sums are compensated (fold_add) */
} items;

/* The local that holds slot: the stash (s2) is in the scratch the runtime passes, the
 * accumulators in sloc. */
static int32_t loc_of(const items *it, int32_t slot) { return slot == it->s2 ? it->loc : it->sloc; }

/* Rows of an item summed plainly into a block partial before the partial is added, with
 * compensation, to the item's sum. */
#define ROW_BLOCK 16
/* A sum, max or min folds target_desc.row_streams rows per step of the row loop where the
 * target reads several row streams at once (more than 1, a divisor of ROW_BLOCK; 8 read best:
 * bench/NOTES.md, "Row streams"). Softmax's passes, which stash their rows
 * and take exp, are not unrolled (it bought nothing there and doubled compile time), nor are
 * rows whose value calls the maths library or is a large expression. */
#define SPEC_ROWS 16
#define SPEC_BIG 1e30

/* How a fold combines element v of the input into an accumulator. */
typedef enum {
    STASH_NONE,
    STASH_SAVE, /* also store v in the stash: later passes read it from cache, not memory */
    STASH_EXP,  /* read v from the stash and replace it there by the term exp(v - shift) */
    STASH_TERM, /* read v afresh (from cache) and store the term exp(v - shift) in the stash */
} stash_mode;

typedef struct fold {
    rj_op op;          /* the reduction: RJ_OP_SUM (and mean), _MAX, _MIN, _PROD */
    int32_t slot;      /* the accumulator: s0 or s1 */
    int32_t shift;     /* >= 0: fold exp(v - shift) rather than v (softmax's sum) */
    stash_mode stash;
    bool compensated;  /* a float sum: compensated in slot sc */
} fold;

static void fold_add(lower *L, blk *b, rj_dtype t, int32_t loc, int32_t slot, int32_t cslot, int32_t term) {
    kahan_add(L, b, t, (place){loc, slot}, (place){loc, cslot}, term);
}

/* The compensated sum in slot, as fold_add leaves it. */
static int32_t fold_result(lower *L, items *it, const fold *f) {
    int32_t acc = xlocal(L, loc_of(it, f->slot), f->slot);
    if (!f->compensated) return acc;
    return xbin(L, RJ_OP_SUB, it->rc->acc_t, acc, xlocal(L, loc_of(it, it->sc), it->sc));
}

/* Opens "for t in 0 .. tn lanes" in `into`; the caller fills *body and closes it. */
static int32_t lanes_for(lower *L, items *it, blk *into, blk *body) {
    *body = NEWBLK;
    return s_for(L, into, it->vt, xi(L, 0), it->rc->ntile, LM_LANES);
}

/* Softmax's term exp(v - m) with m the column's maximum (not positive where m is finite, and
 * where it is not, items_finish_sum makes the column NaN, as it is in the reference) or a
 * speculative shift below it, whose sums items_softmax checks. */
static int32_t softmax_term(lower *L, rj_dtype t, int32_t v, int32_t m) {
    return xun(L, LOP_EXP_TERM, t, xbin(L, RJ_OP_SUB, t, v, m));
}

static int32_t fold_term(lower *L, const fold *f, rj_dtype t, int32_t v) {
    return f->shift >= 0 ? softmax_term(L, t, v, f->shift) : v;
}

/* Softmax (and log_softmax) over the ragged dim on a CPU, over a constant inner extent N, may
 * take column tiles of a constant width. Its lanes loops then have a constant extent, which
 * the LLVM backend writes out step by step (lkernel.tiling.lanes_whole: llvm/vector.c), and
 * its accumulators (the maximum, the sum and its compensation, the block partial) live in an
 * array of their own of constant size, apart from the stash, which LLVM keeps in registers
 * across the row loops. Two shapes paid (bench/NOTES.md, "Constant softmax tiles"): whole
 * rows of at most row_registers vector registers, and N of two tiles of tile_registers
 * registers each (target_desc); otherwise 0: the runtime's tiles. The runtime narrows tiles
 * wider than LANES_GRANULE for long items, to keep their stash in cache; a constant tile
 * cannot be, so such a kernel gets a twin of runtime tiles, and the runtime runs whichever the
 * longest item's stash calls for (lower_items_cpu); log_softmax, which has none, takes the
 * same twin and the same rule. */
static int64_t state_tile(const lower *L, const lkernel *k, int32_t N, bool softmax, rj_dtype acc) {
    if (!softmax || !k->tiling.tiled || L->err || k->ex[N].kind != LX_CONST) return 0;
    int64_t lanes = L->desc->vector_bytes / (int64_t)rj_dtype_size(acc), n = k->ex[N].i;
    int64_t w = L->desc->tile_registers * lanes;
    if (n <= 0 || lanes <= 0 || w <= 0) return 0;
    if (n <= L->desc->row_registers * lanes) return n;
    return n == 2 * w ? w : 0;
}

/* The unit loop and the unit's decomposition: item b, tile start f0, tile extent tn, item
 * length len; the accumulators and the index of an element of the tile. */
static int32_t items_open(lower *L, red_ctx *rc, items *it, blk *top, bool allow_state) {
    const node *root = rc->ai.root, *x = rc->ai.x;
    lkernel *k = L->k;
    bool softmax = op_table[root->op].kind == KIND_SOFTMAX;
    int32_t cls = rc->ai.cls;
    it->rc = rc;
    k->domain = UD_ITEMS;
    k->dom_class = cls;
    k->dom_rank = x->rank - 2;
    memcpy(k->dom_dims, x->dims + 2, sizeof(rj_dim) * (size_t)k->dom_rank);
    k->tiling.tiled = x->rank == 3;
    k->tiling.scratch_type = (uint8_t)rc->acc_t;
    bool sums = softmax || root->op == RJ_OP_SUM || root->op == RJ_OP_MEAN;
    it->compensate = sums && dtype_is_float(rc->acc_t);
    /* softmax: max, sum, its compensation and block partial, then the stash; sums: the sum,
     * its compensation and block partial; other reductions: the accumulator */
    k->tiling.scratch_per_tile = softmax ? 4 : it->compensate ? 3 : 1;
    k->tiling.passes = softmax ? 3 : 1;
    /* softmax keeps the tile's rows of one item in scratch (sized by the runtime to stay in
     * cache): the sum pass stashes exp(x - m) (the max pass stashes a costly input first, see
     * items_softmax), the write pass rescales it by 1/s. The input is read from memory once,
     * exp runs once per element, and the output is written once, streaming. */
    k->tiling.scratch_per_row = root->op == RJ_OP_SOFTMAX;
    int32_t vu = newvar(L, "u", RJ_I64);
    int32_t lo = xparam(L, PK_LO, 0, "lo"), hi = xparam(L, PK_HI, 0, "hi"); /* in this order */
    int32_t fu = s_for(L, top, vu, lo, hi, LM_UNITS);
    it->ub = NEWBLK;
    /* unit -> item b, tile [f0, f0 + ntile) of the inner extent N */
    int32_t N = xi(L, 1);
    for (int d = 2; d < x->rank; d++) N = xmul(L, N, xsize(L, x->dims[d]));
    int64_t TC = allow_state ? state_tile(L, k, N, softmax, rc->acc_t) : 0;
    int32_t T = TC > 0 ? xi(L, TC) : k->tiling.tiled ? xparam(L, PK_TILE, 0, "tile") : N;
    if (TC > 0) {
        k->tiling.fixed_tile = (int32_t)TC;
        k->tiling.scratch_per_tile = 0;
        /* the runtime narrows tiles wider than LANES_GRANULE for long items, to keep their
         * stash in cache: a twin of runtime tiles runs where this one's stash would not fit */
        if (k->ex[N].i > LANES_GRANULE) k->tiling.stash_variant = KV_STASH_FITS, k->tiling.variant_tile = (int32_t)TC;
    }
    if (!L->err && k->ex[N].kind == LX_CONST && k->ex[N].i > 0) {
        /* tiles are N or multiples of LANES_GRANULE, so every tile's extent (a tile, or what is
         * left of N after whole ones) is a multiple of their greatest common divisor */
        int64_t a = k->ex[N].i, g = LANES_GRANULE;
        while (g) {
            int64_t r = a % g;
            a = g, g = r;
        }
        k->tiling.lanes_max = TC > 0 ? TC : k->ex[N].i;
        k->tiling.lanes_multiple = a;
        k->tiling.lanes_whole = TC > 0;
    }
    int32_t nt = k->tiling.tiled ? xbin(L, LOP_IDIV, RJ_I64, xadd(L, N, xsub(L, T, xi(L, 1))), T) : xi(L, 1);
    int32_t vb = newvar(L, "b", RJ_I64), vf0 = newvar(L, "f0", RJ_I64), vnt = newvar(L, "tn", RJ_I64);
    int32_t vlen = newvar(L, "len", RJ_I64);
    int32_t u = xvar(L, vu);
    s_set(L, &it->ub, vb, xbin(L, LOP_IDIV, RJ_I64, u, nt));
    int32_t b = xvar(L, vb);
    s_set(L, &it->ub, vf0, xmul(L, xsub(L, u, xmul(L, b, nt)), T));
    int32_t f0 = xvar(L, vf0);
    if (TC > 0) { /* every tile whole: the extent is the constant */
        rc->ntile = T;
    } else {
        s_set(L, &it->ub, vnt, xmin(L, T, xsub(L, N, f0)));
        k->tiling.lanes_var = vnt;
        rc->ntile = xvar(L, vnt);
    }
    s_set(L, &it->ub, vlen, xlen(L, cls, b));
    it->len = xvar(L, vlen);
    it->cnt = rc->ai.padded ? xsub(L, xsize(L, rc->ai.L), it->len) : xi(L, 0);
    /* the accumulators: a thread-local array whose storage the runtime passes in */
    it->loc = L->err ? -1 : lk_local(k, "scratch", LL_THREAD, rc->acc_t);
    int32_t scr = it->loc < 0 ? -1 : lk_param(k, PK_SCRATCH, it->loc, rc->acc_t, "scratch");
    if (scr < 0) {
        if (!L->err) L->err = RJ_ERR_NOMEM;
        it->loc = 0;
    } else {
        k->locals[it->loc].param = scr;
    }
    it->sloc = it->loc;
    if (TC > 0 && !L->err) { /* the accumulators in an array of their own, of constant size */
        it->sloc = lk_local(k, "acc", LL_THREAD, rc->acc_t);
        if (it->sloc < 0) {
            L->err = RJ_ERR_NOMEM;
            it->sloc = it->loc;
        } else {
            k->locals[it->sloc].elems = 4 * TC;
        }
    }
    rc->vi = newvar(L, "i", RJ_I64);
    it->vt = newvar(L, "t", RJ_I64);

    /* index of element (b, i, f0 + t) with the inner dims unflattened */
    it->rows = item_element(L, x, cls, b, xvar(L, rc->vi), xadd(L, f0, xvar(L, it->vt)), &it->pad);
    int32_t t = xvar(L, it->vt);
    it->s0 = t;
    it->s1 = xadd(L, rc->ntile, t);
    it->sc = softmax ? xadd(L, xmul(L, xi(L, 2), rc->ntile), t) : it->s1;
    it->sp = xadd(L, xmul(L, xi(L, softmax ? 3 : 2), rc->ntile), t);
    int32_t srow = TC > 0 ? xvar(L, rc->vi) : xadd(L, xi(L, 4), xvar(L, rc->vi)); /* the stash after them */
    it->s2 = xadd(L, xmul(L, srow, rc->ntile), t);
    return fu;
}

/* Phase: a compensated sum's accumulator (s1 for softmax, else s0), compensation and block
 * partial all zero. */
static void items_init_sum(lower *L, items *it) {
    rj_dtype t = it->rc->acc_t;
    int32_t slot = op_table[it->rc->ai.root->op].kind == KIND_SOFTMAX ? it->s1 : it->s0;
    blk ib;
    int32_t ft = lanes_for(L, it, &it->ub, &ib);
    s_store_local(L, &ib, loc_of(it, slot), slot, xconst(L, t, 0));
    s_store_local(L, &ib, loc_of(it, it->sc), it->sc, xconst(L, t, 0));
    s_store_local(L, &ib, loc_of(it, it->sp), it->sp, xconst(L, t, 0));
    close_body(L, ft, &ib);
}

/* Phase: every lane's accumulator `slot` set to `value`. */
static void items_init(lower *L, items *it, int32_t slot, int32_t value) {
    blk ib;
    int32_t ft = lanes_for(L, it, &it->ub, &ib);
    s_store_local(L, &ib, loc_of(it, slot), slot, value);
    close_body(L, ft, &ib);
}

/* Rows [lo, hi) of the item folded into the accumulators, v being the element at row i. A
 * compensated sum runs in blocks of ROW_BLOCK rows: each block is summed plainly into a
 * partial per lane (one add per element, as an uncompensated sum), and only the partials are
 * added with compensation (kahan_add), so the cost of compensation is one step per block. */
static void fold_rows(lower *L, items *it, const fold *f, int32_t lo, int32_t hi, int32_t v, const at *rows) {
    red_ctx *rc = it->rc;
    rj_dtype t = rc->acc_t;
    int32_t term = fold_term(L, f, t, v);
    int32_t slot = f->compensated ? it->sp : f->slot;
    blk *into = &it->ub, bb = NEWBLK;
    int32_t fb = -1;
    if (f->compensated) {
        int32_t vib = newvar(L, "ib", RJ_I64);
        int32_t nb = xbin(L, LOP_IDIV, RJ_I64, xadd(L, xsub(L, hi, lo), xi(L, ROW_BLOCK - 1)), xi(L, ROW_BLOCK));
        fb = s_for(L, into, vib, xi(L, 0), nb, LM_SERIAL);
        lo = xadd(L, lo, xmul(L, xvar(L, vib), xi(L, ROW_BLOCK)));
        hi = xmin(L, xadd(L, lo, xi(L, ROW_BLOCK)), hi);
        into = &bb;
    }
    int nr = L->desc->row_streams; /* rows a step */
    bool unroll = nr > 1 && nr <= ROW_BLOCK && ROW_BLOCK % nr == 0 && f->stash == STASH_NONE &&
                  (f->op == RJ_OP_SUM || f->op == RJ_OP_MAX || f->op == RJ_OP_MIN);
    if (rows && unroll && expr_cheap(L, term)) {
        /* nr rows at a time, combined pairwise before they meet the accumulator: 1/nr of the
         * accumulator's loads and stores, and nr row streams in flight */
        int32_t vq = newvar(L, "iq", RJ_I64), vr = newvar(L, "r", RJ_I64);
        int32_t nq = xbin(L, LOP_IDIV, RJ_I64, xsub(L, hi, lo), xi(L, nr));
        blk qb = NEWBLK, qt;
        int32_t fq = s_for(L, into, vq, xi(L, 0), nq, LM_SERIAL);
        s_set(L, &qb, vr, xadd(L, lo, xmul(L, xvar(L, vq), xi(L, nr))));
        int32_t fqt = lanes_for(L, it, &qb, &qt);
        int32_t terms[ROW_BLOCK];
        for (int k = 0; k < nr; k++) {
            at a = *rows;
            a.idx[1] = xadd(L, xvar(L, vr), xi(L, k));
            terms[k] = fold_term(L, f, t, red_input(L, rc, &a));
        }
        for (int w = 1; w < nr; w *= 2)
            for (int k = 0; k + w < nr; k += 2 * w) terms[k] = combine(L, f->op, t, terms[k], terms[k + w]);
        s_store_local(L, &qt, loc_of(it, slot), slot, combine(L, f->op, t, xlocal(L, loc_of(it, slot), slot), terms[0]));
        close_body(L, fqt, &qt);
        close_body(L, fq, &qb);
        lo = xadd(L, lo, xmul(L, nq, xi(L, nr)));
    }
    blk ib = NEWBLK, tb;
    int32_t fi = s_for(L, into, rc->vi, lo, hi, LM_SERIAL);
    int32_t ft = lanes_for(L, it, &ib, &tb);
    if (f->stash == STASH_SAVE) s_store_local(L, &tb, loc_of(it, it->s2), it->s2, v);
    if (f->stash == STASH_EXP || f->stash == STASH_TERM) {
        /* a variable: the store below overwrites what the expression reads */
        int32_t ve = newvar(L, "e", t);
        s_set(L, &tb, ve, term);
        term = xvar(L, ve);
        s_store_local(L, &tb, loc_of(it, it->s2), it->s2, term);
    }
    s_store_local(L, &tb, loc_of(it, slot), slot, combine(L, f->op, t, xlocal(L, loc_of(it, slot), slot), term));
    close_body(L, ft, &tb);
    close_body(L, fi, &ib);
    if (f->compensated) {
        blk kb;
        int32_t fk = lanes_for(L, it, &bb, &kb);
        fold_add(L, &kb, t, it->sloc, f->slot, it->sc, xlocal(L, loc_of(it, it->sp), it->sp));
        s_store_local(L, &kb, loc_of(it, it->sp), it->sp, xconst(L, t, 0));
        close_body(L, fk, &kb);
        close_body(L, fb, &bb);
    }
}

/* Phase: the item's rows i < len folded into the accumulators. */
static void items_fold_rows(lower *L, items *it, const fold *f) {
    int32_t v = f->stash == STASH_EXP ? xlocal(L, loc_of(it, it->s2), it->s2) : red_input(L, it->rc, &it->rows);
    fold_rows(L, it, f, xi(L, 0), it->len, v, &it->rows);
}

/* Phase: the padding rows len <= i < L folded in, at once when they all hold one value. */
static void items_fold_padding(lower *L, items *it, const fold *f) {
    red_ctx *rc = it->rc;
    if (!rc->ai.padded) return;
    rj_dtype t = rc->acc_t;
    int32_t v = red_input(L, rc, &it->pad);
    if (expr_uses_var(L, v, rc->vi)) {
        /* row by row, into the stash where there is one: it then holds L rows, not len_b */
        if (L->k->tiling.scratch_per_row) L->k->tiling.stash_rows = rc->ai.L;
        fold_rows(L, it, f, it->len, xadd(L, it->len, it->cnt), v, &it->pad);
        return;
    }
    int32_t term = fold_term(L, f, t, v), acc = xlocal(L, loc_of(it, f->slot), f->slot);
    blk tb;
    int32_t ft = lanes_for(L, it, &it->ub, &tb);
    if (f->compensated) /* cnt copies of the term as one, exact when there are none */
        fold_add(L, &tb, t, it->sloc, f->slot, it->sc,
                 xsel(L, xcmp(L, RJ_OP_GT, it->cnt, xi(L, 0)),
                      xbin(L, RJ_OP_MUL, t, term, xcast(L, t, it->cnt)), xconst(L, t, 0)));
    else
        s_store_local(L, &tb, loc_of(it, f->slot), f->slot, combine_n(L, f->op, t, acc, term, it->cnt));
    close_body(L, ft, &tb);
}

/* Phase (softmax): the sum finished, and replaced by its reciprocal so the write pass
 * multiplies (log_softmax keeps the sum). A column whose maximum is not finite (a NaN, an
 * infinity, or nothing but -inf) is NaN in the reference, every term being NaN or the sum
 * NaN; its sum is made NaN here, whatever softmax_term gave for such terms. */
static void items_finish_sum(lower *L, items *it, const fold *f, bool invert) {
    rj_dtype t = it->rc->acc_t;
    blk ib;
    int32_t ft = lanes_for(L, it, &it->ub, &ib);
    int32_t m = xlocal(L, loc_of(it, it->s0), it->s0);
    int32_t finite = xcmp(L, RJ_OP_EQ, xbin(L, RJ_OP_SUB, t, m, m), xconst(L, t, 0));
    int32_t sum = xsel(L, finite, fold_result(L, it, f), xconst(L, t, NAN));
    s_store_local(L, &ib, loc_of(it, it->s1), it->s1, invert ? xbin(L, RJ_OP_DIV, t, xconst(L, t, 1), sum) : sum);
    close_body(L, ft, &ib);
}

/* Phase (reductions): one result per (b, f), then the epilogue. */
static void items_write_result(lower *L, items *it, const fold *f) {
    red_ctx *rc = it->rc;
    const node *root = rc->ai.root, *x = rc->ai.x;
    rj_dtype t = rc->acc_t;
    blk ib;
    int32_t ft = lanes_for(L, it, &it->ub, &ib);
    int32_t r = fold_result(L, it, f);
    if (root->op == RJ_OP_MEAN) {
        int32_t n = rc->ai.padded ? xsize(L, rc->ai.L) : it->len;
        r = xbin(L, RJ_OP_DIV, t, r, xcast(L, t, n));
    }
    r = xcast(L, root->dtype, r);
    at oa = {.rank = root->rank, .inclass = -1, .outclass = -1, .guard = -1};
    oa.idx[0] = it->rows.idx[0];
    int o = 1;
    if (root->keepdim) oa.idx[o++] = xi(L, 0);
    for (int d = 2; d < x->rank; d++) oa.idx[o++] = it->rows.idx[d];
    store_group(L, &ib, (int32_t)(root - L->g->nodes), r, &oa, ROWS_OUT, 0);
    close_body(L, ft, &ib);
}

/* Phase (softmax): one result per row, streaming; the padding rows only where something
 * materialised is padded (the padded softmax itself, or an epilogue other than unpad). */
static void items_write_rows(lower *L, const fuse_group *gr, items *it) {
    red_ctx *rc = it->rc;
    const rj_graph *g = L->g;
    const node *root = rc->ai.root;
    rj_dtype t = rc->acc_t;
    bool padded_out = rows_padded_out(L, gr);
    for (int part = 0; part < (rc->ai.padded && padded_out ? 2 : 1); part++) {
        const at *pa = part ? &it->pad : &it->rows;
        blk ib = NEWBLK, tb;
        int32_t fi = s_for(L, &it->ub, rc->vi, part ? it->len : xi(L, 0),
                           part ? xadd(L, it->len, it->cnt) : it->len, LM_SERIAL);
        int32_t ft = lanes_for(L, it, &ib, &tb);
        int32_t m = xlocal(L, loc_of(it, it->s0), it->s0), s = xlocal(L, loc_of(it, it->s1), it->s1);
        int32_t y;
        if (root->op == RJ_OP_SOFTMAX) { /* s holds 1 / sum here */
            int32_t e = part == 0 ? xlocal(L, loc_of(it, it->s2), it->s2) : softmax_term(L, t, red_input(L, rc, pa), m);
            y = xbin(L, RJ_OP_MUL, t, e, s);
        } else {
            int32_t v = red_input(L, rc, pa);
            y = xbin(L, RJ_OP_SUB, t, xbin(L, RJ_OP_SUB, t, v, m), xun(L, RJ_OP_LOG, t, s));
        }
        store_group(L, &tb, (int32_t)(root - g->nodes), y, pa, part == 0 ? ROWS_IN : ROWS_OUT, LF_NT);
        close_body(L, ft, &tb);
        close_body(L, fi, &ib);
    }
}

static void items_reduction(lower *L, items *it) {
    red_ctx *rc = it->rc;
    rj_op op = (rj_op)rc->ai.root->op;
    fold f = {.op = op, .slot = it->s0, .shift = -1, .stash = STASH_NONE, .compensated = it->compensate};
    /* a sum of a cheap input streams it (lkernel.streams), which a Zen 4 does faster in
     * 256-bit vectors; the other kernels tried lost from the caches, and an input with exp
     * keeps the widest vectors for vscalefps (bench/NOTES.md, "Narrower vectors for sums") */
    if ((op == RJ_OP_SUM || op == RJ_OP_MEAN) && expr_cheap(L, red_input(L, rc, &it->rows))) L->k->streams = true;
    items_init(L, it, it->s0, identity(L, op, rc->acc_t));
    if (f.compensated) items_init_sum(L, it);
    items_fold_rows(L, it, &f);
    items_fold_padding(L, it, &f);
    items_write_result(L, it, &f);
}

/* Phase (softmax): the sum of the terms from zero: the rows, then the padding. */
static void items_sum_pass(lower *L, items *it, const fold *sum) {
    if (sum->compensated) items_init_sum(L, it);
    else items_init(L, it, it->s1, xconst(L, it->rc->acc_t, 0));
    items_fold_rows(L, it, sum);
    items_fold_padding(L, it, sum);
}

/* Is a lane's sum of speculative terms within the range items_softmax trusts? (Not for NaN.) */
static int32_t sum_trusted(lower *L, items *it) {
    return xcmp(L, RJ_OP_LE, xlocal(L, loc_of(it, it->s1), it->s1), xconst(L, it->rc->acc_t, SPEC_BIG));
}

/* Softmax stashes its terms exp(x - m) so that the write pass does not take exp again. Where
 * the input is cheap (loads and a few operations), the max pass only reads it and the sum
 * pass reads it again, from cache, and stashes the term: the max pass streams like a plain
 * reduction, and the stash is written once rather than twice, which made bench's W2 faster
 * (bench/NOTES.md, "Softmax's stash and speculative maximum"). A costly input (one that
 * calls exp or log) is still computed once, in the max pass.
 *
 * With a cheap input the maximum is also speculative: m is first the maximum of the item's
 * first and last SPEC_ROWS rows only, and the sum pass, which then reads the rows from memory,
 * takes exp(x - m) with it. Softmax does not depend on the shift (any m gives the same
 * ratios), and a shift below the true maximum loses nothing: every term is as exact relative
 * to itself as with the true maximum, the largest is at least 1 (the row that gave m), and a
 * term that underflows would have underflowed with the true maximum too. What a low m can do
 * is overflow, so the sum is checked: a column whose sum is not at most SPEC_BIG (it
 * overflowed, is NaN, or could overflow in the write pass) makes the unit run its max and sum
 * passes again, that column with the true maximum, as it runs without speculation: a later
 * row that exceeds those blocks by more than ln(SPEC_BIG) = 69, an infinity, a NaN or a
 * column of -inf all end there, and its result is the exact path's. The unit's other columns
 * keep their first shift and so compute their first results again, bit for bit: a column's
 * value never depends on which columns share its tile, which depends on the thread count.
 * On ordinary data the separate max pass over the whole item, a third of the kernel's time
 * that streamed from memory without computing, becomes a pass over 32 rows (W2 5-7% faster:
 * bench/NOTES.md, same heading). The last block is there for data whose first rows are
 * masked (-1e9): with the first block alone every unit ran twice; now it is as fast as
 * ordinary data. Data whose middle lies far above both ends pays for a second sum pass.
 * log_softmax keeps the exact maximum: its result x - m - log(sum) would subtract two values
 * as large as the distance between the blocks' maximum and the true one, losing absolute
 * accuracy. */
static void items_softmax(lower *L, const fuse_group *gr, items *it) {
    rj_dtype t = it->rc->acc_t;
    bool stash = it->rc->ai.root->op == RJ_OP_SOFTMAX;
    bool reread = stash && expr_cheap(L, red_input(L, it->rc, &it->rows));
    fold max = {.op = RJ_OP_MAX, .slot = it->s0, .shift = -1, .stash = stash && !reread ? STASH_SAVE : STASH_NONE};
    fold sum = {.op = RJ_OP_SUM, .slot = it->s1, .shift = xlocal(L, loc_of(it, it->s0), it->s0),
                .stash = !stash ? STASH_NONE : reread ? STASH_TERM : STASH_EXP, .compensated = it->compensate};
    if (!reread) {
        items_init(L, it, it->s0, xextreme(L, t, true));
        items_fold_rows(L, it, &max);
        items_fold_padding(L, it, &max);
        items_sum_pass(L, it, &sum);
    } else {
        int32_t vretry = newvar(L, "retry", RJ_I64), vpass = newvar(L, "pass", RJ_I64);
        s_set(L, &it->ub, vretry, xi(L, 1));
        blk pb = NEWBLK, ib;
        int32_t fp = s_for(L, &it->ub, vpass, xi(L, 0), xi(L, 2), LM_SERIAL);
        if (!L->err) L->k->st[fp].flags |= LF_NOUNROLL;
        int32_t fi = s_if(L, &pb, &ib, xcmp(L, RJ_OP_NE, xvar(L, vretry), xi(L, 0)));
        blk outer = it->ub;
        it->ub = ib;
        /* the maximum into sp (free until the sum), then into m where it applies: every column
         * on the first pass, on the second only those whose sum failed (s1 still holds it),
         * the others keeping their shift and so their first pass's results bit for bit */
        int32_t pass0 = xcmp(L, RJ_OP_EQ, xvar(L, vpass), xi(L, 0));
        max.slot = it->sp;
        items_init(L, it, it->sp, xextreme(L, t, true));
        int32_t hi = xsel(L, pass0, xmin(L, it->len, xi(L, SPEC_ROWS)), it->len);
        fold_rows(L, it, &max, xi(L, 0), hi, red_input(L, it->rc, &it->rows), &it->rows);
        /* and on the first pass the last SPEC_ROWS rows too (a masked first block) */
        int32_t lo2 = xsel(L, pass0, xmax(L, hi, xsub(L, it->len, xi(L, SPEC_ROWS))), it->len);
        fold_rows(L, it, &max, lo2, it->len, red_input(L, it->rc, &it->rows), &it->rows);
        items_fold_padding(L, it, &max);
        blk mb;
        int32_t fm = lanes_for(L, it, &it->ub, &mb);
        int32_t failed = xcmp(L, RJ_OP_EQ, sum_trusted(L, it), xconst(L, RJ_BOOL, 0));
        s_store_local(L, &mb, loc_of(it, it->s0), it->s0,
                      xsel(L, xbin(L, RJ_OP_LOGICAL_OR, RJ_BOOL, pass0, failed), xlocal(L, loc_of(it, it->sp), it->sp),
                           xlocal(L, loc_of(it, it->s0), it->s0)));
        close_body(L, fm, &mb);
        items_sum_pass(L, it, &sum);
        s_set(L, &it->ub, vretry, xi(L, 0));
        blk cb = NEWBLK;
        int32_t fc = s_for(L, &it->ub, it->vt, xi(L, 0), it->rc->ntile, LM_SERIAL);
        s_set(L, &cb, vretry, xmax(L, xvar(L, vretry), xsel(L, sum_trusted(L, it), xi(L, 0), xi(L, 1))));
        close_body(L, fc, &cb);
        ib = it->ub;
        it->ub = outer;
        close_body(L, fi, &ib);
        close_body(L, fp, &pb);
    }
    items_finish_sum(L, it, &sum, stash);
    items_write_rows(L, gr, it);
}

static void items_kernel(lower *L, const fuse_group *gr, red_ctx *rc, bool allow_state) {
    items it;
    blk top = NEWBLK;
    int32_t fu = items_open(L, rc, &it, &top, allow_state);
    if (op_table[rc->ai.root->op].kind == KIND_SOFTMAX) items_softmax(L, gr, &it);
    else items_reduction(L, &it);
    close_body(L, fu, &it.ub);
    L->k->body = top.first;
}

/* A group's kernel, and where its tile is a constant (state_tile) the twin of runtime tiles
 * the runtime runs instead when the longest item's stash does not fit at that tile. */
static void lower_items_cpu(lower *L, const fuse_group *gr, red_ctx *rc) {
    items_kernel(L, gr, rc, true);
    if (L->err || L->k->tiling.stash_variant != KV_STASH_FITS) return;
    if (L->k->has_nt) xparam(L, PK_NT, 0, "nt"); /* as pass_lower adds it to the last kernel */
    char name[48], what[sizeof L->k->what];
    snprintf(name, sizeof name, "%s_tiles", L->k->name);
    snprintf(what, sizeof what, "%s", L->k->what);
    int32_t vt = L->k->tiling.variant_tile;
    bool heavy = L->k->heavy;
    if (!open_kernel(L, name)) return;
    snprintf(L->k->what, sizeof L->k->what, "%s", what);
    L->k->heavy = heavy;
    L->k->tiling.stash_variant = KV_STASH_EXCEEDS;
    L->k->tiling.variant_tile = vt;
    L->memo_n = 0;
    items_kernel(L, gr, rc, false);
}

void lower_items_cpu_group(lower *L, const fuse_group *gr) {
    red_ctx rc;
    axis_begin(L, gr, &rc);
    if (L->err) return; /* its axis unknown (out of memory): no class to address items by */
    lower_items_cpu(L, gr, &rc);
}
