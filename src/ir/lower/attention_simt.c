/*
 * lower/attention_simt.c — fused attention on a SIMT target in FlashAttention-2's form.
 *
 * softmax(F, dim=-1) @ v, F any elementwise expression of the scores q kᵀ (attention.c has the
 * semantics; this is its SIMT shape). A block is a unit: a piece of an item's query rows (the
 * runtime cuts long items into pieces, UD_PIECES, so one long item is many blocks) and, with
 * heads, one head: units are (piece, head) pairs. The block walks its piece in query tiles of
 * FA_BR rows, one row per thread (or per ns threads: wide heads, below), and for each query
 * tile walks the item's keys in tiles of Bc rows:
 *
 *     the block stages k's and v's Bc rows in shared memory (coalesced, each element loaded
 *     once for FA_BR query rows), barrier;
 *     every thread, for each key t of the tile:
 *         s = q_i · k_t        q_i in the thread's registers (loaded once per query tile),
 *                              k_t read from the tile (every thread reads the same word: a
 *                              broadcast, no bank conflict)
 *         x = F at (b, i, j)   F's expression with the product bound to s
 *         if x > m: a = exp(m - x); l = a l; O = a O; m = x     (rare after the first keys)
 *         p = exp(x - (m == -inf ? 0 : m)); l += p; O += p v_t  (v_t from the tile)
 *     barrier (the tiles are overwritten next);
 *
 * then every thread writes O / l for its row (0 where l = 0 in the safe form, as finish_row in
 * attention.c). m, l and O stay in registers: O and q are variables, one per element, written
 * out step by step (Dv and E are constants of the kernel, or the template does not apply), so
 * no per-thread array is indexed by a run-time value. The rescale happens only when the
 * running maximum grows, which keeps one exp per key (FlashAttention-2 rescales once per tile;
 * per key with a condition it needs no per-thread array of the tile's scores). The guards keep
 * FA's semantics: a -inf maximum subtracts 0, a NaN or +inf score makes the row NaN as the
 * softmax written out does.
 *
 * Wide heads. A thread's q and O take E + Dv registers (twice in f64); past FA_REGS words a
 * row is split across ns = 2 (or 4) threads, its parts: part p holds q's and O's p-th slices
 * (E / ns and Dv / ns elements), the block has FA_BR · ns threads, and a part's threads are
 * whole warps (FA_BR apart), so each warp still reads one tile word at a time. The score needs
 * all of q · k_t, so a key tile takes one more step: every part writes its partial dot for
 * each key of the tile into shared memory, barrier, and every part of a row sums the ns
 * partials in the same order, so the row's threads agree to the bit on x, m and l and each
 * rescales and accumulates its own slice of O. One exchange per tile, not per key: PoCL and
 * OpenCL 1.2 have no shuffles, and a barrier per key would cost more than the sums.
 *
 * Masks bound the keys. Where F hides keys with -inf through a mask of positions that
 * keyrange.c can read (causal, sliding window), the query tile's rows [i0, ilast] can see at
 * most the keys [lo, hi] of those bounds taken at the row where each is widest; the key tiles
 * start at lo and stop at hi, and F still masks key by key inside them. A hidden key adds
 * nothing to a row's sums, so the result is the same (but for an inf or NaN in a hidden v row,
 * which is no longer read: keyrange.c's note).
 *
 * 16-bit storage. k and v are widened to f32 once, when staged, into f32 tiles (registers
 * then match f32's; a 16-bit tile would halve the shared memory but convert on every read),
 * q into f32 registers; m, l, O and the dots are f32; the product's value is rounded to the
 * 16-bit format where the graph stores it (as the interpreter and attention_rows do), and the
 * output is rounded once, when stored.
 *
 * The key count is its own value, the length of item b in k's class (kcls), apart from the
 * query rows' class, so that keys of another ragged class slot in. Barriers stand in loops
 * whose bounds the whole block shares (the item's keys, the piece's query tiles); rows past
 * the piece's end take part in the staging and skip the rest.
 *
 * It applies where Dv and E (with a product) are constants that split evenly across a row's
 * threads, and a key tile of at least FA_BC_MIN rows fits the descriptor's shared memory;
 * else attention_rows (attention.c) lowers the group, and the dump's note says why.
 */
#include <math.h>
#include <stdio.h>

#include "kit.h"

enum {
    FA_BR = 64,     /* query rows a block's tile: one a thread, or one a group of parts */
    FA_BC = 64,     /* key rows a tile, at most */
    FA_BC_MIN = 8,  /* ... and at least */
    FA_REGS = 128,  /* 4-byte registers a thread may give its part of q and O */
    FA_PARTS = 4,   /* threads a query row may be split across, at most */
    FA_DOTS = 4,    /* partial sums of q · k (independent chains for the pipeline) */
};

typedef struct fa_ctx {
    const node *r, *f, *v, *prod;
    int32_t qs, ks;             /* the product's q and k (per head: [B, j, H, E]), or -1 */
    int32_t root, cls, kcls;    /* the query rows' class and the keys' */
    rj_dtype t, pt;             /* arithmetic (f32 for 16-bit storage) of O and of the product */
    int E, Dv, Bc;              /* E: 0 without a product */
    int ns, ep, dp;             /* threads a row (parts); q's and O's elements a part */
    key_range kr;               /* the keys a mask leaves visible (keyrange.c) */
    int32_t ksh, vsh, psh;      /* the block's tiles of k and v; the parts' partial scores */
    int32_t qv[FA_REGS], ov[FA_REGS], dv[FA_DOTS]; /* a thread's part of q and O, partial dots */
    int32_t vm, vl, vi, vv, vr, vpart, vx, va; /* m, l, row i, lane, its row and part, x, alpha */
    int32_t part;               /* the thread's part (an expression: 0 with one part) */
    int32_t b, h, hk;           /* the item, head and kv head (-1 without heads) */
    int32_t i0, rend, j0, nk;   /* the query tile's first row, the piece's end; key tile */
} fa_ctx;

static int64_t const_dim(rj_dim d) { return d >= 0 ? d : -1; }

static int64_t dsize(rj_dtype t) { return t == RJ_F64 ? 8 : 4; }

/* Shared memory of a key tile of bc rows: k's and v's rows, and the parts' partial scores. */
static int64_t fa_tile_bytes(const fa_ctx *c, int64_t bc) {
    int64_t b = bc * ((int64_t)c->E * dsize(c->pt) + (int64_t)c->Dv * dsize(c->t));
    return b + (c->ns > 1 ? bc * FA_BR * c->ns * dsize(c->pt) : 0);
}

/* The shapes the template needs, into c; NULL where it applies, else why it does not. */
static const char *fa_shape(lower *L, const fuse_group *gr, fa_ctx *c) {
    const rj_graph *g = L->g;
    c->root = gr->root;
    c->r = &g->nodes[gr->root];
    c->f = &g->nodes[c->r->in[0]];
    c->v = &g->nodes[c->r->in[1]];
    c->prod = gr->product >= 0 ? &g->nodes[gr->product] : NULL;
    c->t = dtype_compute(c->r->dtype);
    c->pt = c->prod ? dtype_compute(c->prod->dtype) : c->t;
    c->cls = root_of(g, c->r->dims[1]);
    c->kcls = root_of(g, c->v->dims[1]);
    c->qs = c->ks = -1;
    c->E = 0;
    if (c->prod) {
        const node *kt = &g->nodes[c->prod->in[1]];
        c->qs = c->prod->in[0];
        c->ks = c->prod->keepdim ? c->prod->in[1] : kt->in[0]; /* per head: k itself */
        const node *q = &g->nodes[c->qs];
        c->E = (int)const_dim(q->dims[q->rank - 1]);
        if (c->E <= 0) return "q's head dim is not a constant";
    }
    int64_t dv = const_dim(c->r->dims[c->r->rank - 1]);
    if (dv <= 0) return "v's head dim is not a constant";
    c->Dv = (int)dv;
    /* q and O in registers, a row split across ns threads where one thread's would not fit */
    int64_t words = (c->E * dsize(c->pt) + dv * dsize(c->t)) / 4;
    for (c->ns = 1; c->ns < FA_PARTS && words > (int64_t)FA_REGS * c->ns;) c->ns *= 2;
    if (words > (int64_t)FA_REGS * c->ns) return "q and O exceed the registers of 4 threads a row";
    if (c->E % c->ns || c->Dv % c->ns) return "the head dims do not split evenly across a row's threads";
    if (FA_BR * c->ns > L->desc->max_block) return "a block of the row tile's threads exceeds the target's";
    c->ep = c->E / c->ns;
    c->dp = c->Dv / c->ns;
    c->Bc = FA_BC;
    while (c->Bc > FA_BC_MIN && fa_tile_bytes(c, c->Bc) > L->desc->shared_bytes) c->Bc /= 2;
    if (fa_tile_bytes(c, c->Bc) > L->desc->shared_bytes) return "a key tile exceeds the shared memory";
    c->kr = key_range_of(g, c->r->in[0]);
    return NULL;
}

bool attention_flash_applies(lower *L, const fuse_group *gr) {
    fa_ctx c;
    const char *why = fa_shape(L, gr, &c);
    if (why) L->why = why;
    return !why;
}

/* Element (b, row, [head], col) of a rank-3 or per-head ([B, j, H, .]) node of class cls. */
static at fa_at(const node *n, int32_t b, int32_t row, int32_t head, int32_t col, int32_t cls) {
    at a = at3(b, row, col, cls);
    if (n->rank == 4) a.rank = 4, a.idx[2] = head, a.idx[3] = col;
    return a;
}

/* Opens "for v in 0 .. FA_BR·ns lanes { part = v / FA_BR; i = i0 + v mod FA_BR; if i < rend
 * {": one iteration a thread, on its part of its row; returns the loop and sets *in to the
 * body of the row's condition. A part's threads are FA_BR apart, whole warps: the warps of a
 * part read one k or v element of the tile at a time (a broadcast). */
static int32_t fa_rows(lower *L, fa_ctx *c, blk *into, blk *lb, blk *in, int32_t *fi) {
    *lb = NEWBLK;
    int32_t f = s_for(L, into, c->vv, xi(L, 0), xi(L, (int64_t)FA_BR * c->ns), LM_LANES);
    int32_t row = xvar(L, c->vv);
    c->part = xi(L, 0);
    if (c->ns > 1) {
        s_set(L, lb, c->vpart, xbin(L, LOP_IDIV, RJ_I64, row, xi(L, FA_BR)));
        c->part = xvar(L, c->vpart);
        s_set(L, lb, c->vr, xsub(L, row, xmul(L, c->part, xi(L, FA_BR))));
        row = xvar(L, c->vr);
    }
    s_set(L, lb, c->vi, xadd(L, c->i0, row));
    *fi = s_if(L, lb, in, xcmp(L, RJ_OP_LT, xvar(L, c->vi), c->rend));
    return f;
}

static void fa_rows_end(lower *L, int32_t f, const blk *lb, int32_t fi, const blk *in) {
    close_body(L, fi, in);
    close_body(L, f, lb);
}

/* The key tile's rows j0 .. j0 + nk of node n (width elements a row) into the block's tile sh
 * as type t, element w of the tile by thread w mod the block: consecutive threads read
 * consecutive elements. 16-bit storage is widened here, once per element. */
static void fa_stage(lower *L, fa_ctx *c, blk *into, int32_t sh, int32_t n, int width, rj_dtype ty) {
    int32_t vw = newvar(L, "w", RJ_I64);
    blk wb = NEWBLK, sb;
    int32_t fw = s_for(L, into, vw, xi(L, 0), xi(L, (int64_t)c->Bc * width), LM_LANES);
    int32_t w = xvar(L, vw), wd = xi(L, width);
    int32_t t = xbin(L, LOP_IDIV, RJ_I64, w, wd), e = xbin(L, LOP_IREM, RJ_I64, w, wd);
    int32_t fi = s_if(L, &wb, &sb, xcmp(L, RJ_OP_LT, t, c->nk));
    at a = fa_at(&L->g->nodes[n], c->b, xadd(L, c->j0, t), c->hk, e, c->kcls);
    s_store_local(L, &sb, sh, w, xcast(L, ty, value_fresh(L, n, &a)));
    close_body(L, fi, &sb);
    close_body(L, fw, &wb);
}

/* The thread's part of q_i · k_t (FA_DOTS chains, summed) into dv[0]; its value. */
static int32_t fa_dot(lower *L, fa_ctx *c, blk *tb, int32_t t) {
    rj_dtype pt = c->pt;
    int nd = c->ep < FA_DOTS ? c->ep : FA_DOTS;
    int32_t row = xadd(L, xmul(L, t, xi(L, c->E)), xmul(L, c->part, xi(L, c->ep)));
    for (int d = 0; d < nd; d++) s_set(L, tb, c->dv[d], xconst(L, pt, 0));
    for (int e = 0; e < c->ep; e++) {
        int32_t acc = c->dv[e % nd];
        s_set(L, tb, acc, xfma(L, pt, xvar(L, c->qv[e]), xlocal(L, c->ksh, xadd(L, row, xi(L, e))), xvar(L, acc)));
    }
    int32_t s = xvar(L, c->dv[0]);
    for (int d = 1; d < nd; d++) s = xbin(L, RJ_OP_ADD, pt, s, xvar(L, c->dv[d]));
    s_set(L, tb, c->dv[0], s);
    return xvar(L, c->dv[0]);
}

/* Where the parts' partial scores of key t are: part p of row r at t·FA_BR·ns + p·FA_BR + r. */
static int32_t fa_pslot(lower *L, fa_ctx *c, int32_t t, int32_t p, int32_t r) {
    return xadd(L, xmul(L, t, xi(L, (int64_t)FA_BR * c->ns)), xadd(L, xmul(L, p, xi(L, FA_BR)), r));
}

/* x = F at (b, i, j0 + t) [and head h] into c->vx. The product's element is q_i · k_t: the
 * thread's own dot with one part, else the sum of the parts' partial scores (in part order,
 * so the threads of a row agree to the bit and keep the same m and l). */
static void fa_score(lower *L, fa_ctx *c, blk *tb, int32_t t) {
    if (c->prod) {
        int32_t s;
        if (c->ns == 1) {
            s = fa_dot(L, c, tb, t);
        } else {
            s = xlocal(L, c->psh, fa_pslot(L, c, t, xi(L, 0), xvar(L, c->vr)));
            for (int p = 1; p < c->ns; p++)
                s = xbin(L, RJ_OP_ADD, c->pt, s, xlocal(L, c->psh, fa_pslot(L, c, t, xi(L, p), xvar(L, c->vr))));
            s_set(L, tb, c->dv[0], s);
            s = xvar(L, c->dv[0]);
        }
        L->subst_node = (int32_t)(c->prod - L->g->nodes);
        L->subst_expr = xcast(L, c->prod->dtype, s); /* 16-bit: rounded, as the op's result */
    }
    at fa = at3(c->b, xvar(L, c->vi), xadd(L, c->j0, t), c->cls);
    if (c->f->rank == 4) fa.rank = 4, fa.idx[3] = c->h;
    s_set(L, tb, c->vx, xcast(L, c->t, value_fresh(L, (int32_t)(c->f - L->g->nodes), &fa)));
    L->subst_node = -1;
}

/* The online softmax step for key t of the tile (see the top), on the thread's part of O. */
static void fa_step(lower *L, fa_ctx *c, blk *tb, int32_t t) {
    rj_dtype ty = c->t;
    fa_score(L, c, tb, t);
    int32_t x = xvar(L, c->vx), m = xvar(L, c->vm);
    blk gb;
    int32_t fg = s_if(L, tb, &gb, xcmp(L, RJ_OP_GT, x, m)); /* the maximum grows: rescale */
    s_set(L, &gb, c->va, xun(L, RJ_OP_EXP, ty, xbin(L, RJ_OP_SUB, ty, m, x)));
    int32_t a = xvar(L, c->va);
    s_set(L, &gb, c->vl, xbin(L, RJ_OP_MUL, ty, xvar(L, c->vl), a));
    for (int d = 0; d < c->dp; d++) s_set(L, &gb, c->ov[d], xbin(L, RJ_OP_MUL, ty, xvar(L, c->ov[d]), a));
    s_set(L, &gb, c->vm, x);
    close_body(L, fg, &gb);
    int32_t mr = xsel(L, xcmp(L, RJ_OP_EQ, m, xconst(L, ty, -INFINITY)), xconst(L, ty, 0), m);
    s_set(L, tb, c->va, xun(L, RJ_OP_EXP, ty, xbin(L, RJ_OP_SUB, ty, x, mr))); /* p */
    int32_t p = xvar(L, c->va);
    s_set(L, tb, c->vl, xbin(L, RJ_OP_ADD, ty, xvar(L, c->vl), p));
    int32_t row = xadd(L, xmul(L, t, xi(L, c->Dv)), xmul(L, c->part, xi(L, c->dp)));
    for (int d = 0; d < c->dp; d++)
        s_set(L, tb, c->ov[d], xfma(L, ty, p, xlocal(L, c->vsh, xadd(L, row, xi(L, d))), xvar(L, c->ov[d])));
}

/* The keys the query tile's rows [i0, ilast] may see, [*kbeg, *kend): the item's, narrowed by
 * the mask's bounds (keyrange.c) taken at the row where each is widest. */
static void fa_key_span(lower *L, fa_ctx *c, blk *qb, int32_t klen, int32_t *kbeg, int32_t *kend) {
    int32_t ilast = xsub(L, xmin(L, xadd(L, c->i0, xi(L, FA_BR)), c->rend), xi(L, 1));
    int32_t lo = xi(L, 0), hi = klen;
    const key_bound *kl = &c->kr.lo, *kh = &c->kr.hi;
    if (kl->has) lo = xmax(L, lo, xadd(L, xmul(L, xi(L, kl->a), kl->a >= 0 ? c->i0 : ilast), xi(L, kl->b)));
    if (kh->has) hi = xmin(L, hi, xadd(L, xmul(L, xi(L, kh->a), kh->a >= 0 ? ilast : c->i0), xi(L, kh->b + 1)));
    int32_t vlo = newvar(L, "kbeg", RJ_I64), vhi = newvar(L, "kend", RJ_I64);
    s_set(L, qb, vlo, lo);
    s_set(L, qb, vhi, hi);
    *kbeg = xvar(L, vlo);
    *kend = xvar(L, vhi);
}

/* One key tile: staged, then (with parts) the partial scores, then every key folded. */
static void fa_key_tile(lower *L, fa_ctx *c, blk *kb) {
    if (c->prod) fa_stage(L, c, kb, c->ksh, c->ks, c->E, c->pt);
    fa_stage(L, c, kb, c->vsh, (int32_t)(c->v - L->g->nodes), c->Dv, c->t);
    put(L, kb, s_barrier());
    blk lb, in, tb;
    int32_t fi, f, ft, vt = newvar(L, "t", RJ_I64);
    if (c->prod && c->ns > 1) { /* each part's share of q_i · k_t, every t, for the row's parts */
        f = fa_rows(L, c, kb, &lb, &in, &fi);
        tb = NEWBLK;
        ft = s_for(L, &in, vt, xi(L, 0), c->nk, LM_SERIAL);
        int32_t t = xvar(L, vt);
        s_store_local(L, &tb, c->psh, fa_pslot(L, c, t, c->part, xvar(L, c->vr)), fa_dot(L, c, &tb, t));
        close_body(L, ft, &tb);
        fa_rows_end(L, f, &lb, fi, &in);
        put(L, kb, s_barrier());
    }
    f = fa_rows(L, c, kb, &lb, &in, &fi);
    tb = NEWBLK;
    ft = s_for(L, &in, vt, xi(L, 0), c->nk, LM_SERIAL);
    fa_step(L, c, &tb, xvar(L, vt));
    close_body(L, ft, &tb);
    fa_rows_end(L, f, &lb, fi, &in);
    put(L, kb, s_barrier());
}

/* One query tile: the thread's row started, every key tile it may see folded, the row written. */
static void fa_query_tile(lower *L, fa_ctx *c, blk *qb, int32_t klen) {
    rj_dtype t = c->t;
    blk lb, in;
    int32_t fi, f = fa_rows(L, c, qb, &lb, &in, &fi);
    s_set(L, &lb, c->vm, xconst(L, t, -INFINITY));
    s_set(L, &lb, c->vl, xconst(L, t, 0));
    for (int d = 0; d < c->dp; d++) s_set(L, &lb, c->ov[d], xconst(L, t, 0));
    for (int e = 0; e < c->ep; e++) {
        int32_t col = xadd(L, xmul(L, c->part, xi(L, c->ep)), xi(L, e));
        at qa = fa_at(&L->g->nodes[c->qs], c->b, xvar(L, c->vi), c->h, col, c->cls);
        s_set(L, &in, c->qv[e], xcast(L, c->pt, value_fresh(L, c->qs, &qa)));
    }
    fa_rows_end(L, f, &lb, fi, &in);
    /* for each key tile: stage, barrier, fold, barrier */
    int32_t kbeg, kend;
    fa_key_span(L, c, qb, klen, &kbeg, &kend);
    int32_t vkt = newvar(L, "kt", RJ_I64), vj0 = newvar(L, "j0", RJ_I64), vnk = newvar(L, "nk", RJ_I64);
    int32_t span = xmax(L, xsub(L, kend, kbeg), xi(L, 0));
    int32_t ntiles = xbin(L, LOP_IDIV, RJ_I64, xadd(L, span, xi(L, c->Bc - 1)), xi(L, c->Bc));
    blk kb = NEWBLK;
    int32_t fk = s_for(L, qb, vkt, xi(L, 0), ntiles, LM_SERIAL);
    s_set(L, &kb, vj0, xadd(L, kbeg, xmul(L, xvar(L, vkt), xi(L, c->Bc))));
    c->j0 = xvar(L, vj0);
    s_set(L, &kb, vnk, xmin(L, xi(L, c->Bc), xsub(L, kend, c->j0)));
    c->nk = xvar(L, vnk);
    fa_key_tile(L, c, &kb);
    close_body(L, fk, &kb);
    /* the row's result O / l (safe: l == 0 gives 0; so does an item without keys in cross
     * attention, as the ops written out do: lower/attention.c's finish_row) */
    f = fa_rows(L, c, qb, &lb, &in, &fi);
    int32_t l = xvar(L, c->vl);
    for (int d = 0; d < c->dp; d++) {
        int32_t res = xbin(L, RJ_OP_DIV, t, xvar(L, c->ov[d]), l);
        if (c->r->ival) res = xsel(L, xcmp(L, RJ_OP_EQ, l, xconst(L, t, 0)), xconst(L, t, 0), res);
        else if (c->kcls != c->cls) res = xsel(L, xcmp(L, RJ_OP_EQ, klen, xi(L, 0)), xconst(L, t, 0), res);
        int32_t col = xadd(L, xmul(L, c->part, xi(L, c->dp)), xi(L, d));
        at oa = fa_at(c->r, c->b, xvar(L, c->vi), c->h, col, c->cls);
        store_group(L, &in, c->root, res, &oa, ROWS_IN, LF_NT); /* 16-bit: rounded once, there */
    }
    fa_rows_end(L, f, &lb, fi, &in);
}

/* Bound kb as the note writes it: "j <= i", "j >= i - 6", "j <= 2 i + 1". */
static void fa_note_bound(sbuf *w, const key_bound *kb, const char *rel) {
    sbuf_printf(w, "; keys j %s ", rel);
    if (kb->a == 0) {
        sbuf_printf(w, "%lld", (long long)kb->b);
        return;
    }
    if (kb->a == -1) sbuf_puts(w, "-");
    else if (kb->a != 1) sbuf_printf(w, "%lld ", (long long)kb->a);
    sbuf_puts(w, "i");
    if (kb->b) sbuf_printf(w, " %c %lld", kb->b < 0 ? '-' : '+', (long long)(kb->b < 0 ? -kb->b : kb->b));
}

/* What the dump's note says of the kernel: its key tiles, the split rows, the mask's bounds. */
static void fa_note(lower *L, const fa_ctx *c) {
    sbuf w;
    sbuf_init(&w, L->ctx);
    sbuf_printf(&w, "key tiles of %d rows", c->Bc);
    if (c->ns > 1) sbuf_printf(&w, "; a row over %d threads", c->ns);
    if (c->kr.lo.has) fa_note_bound(&w, &c->kr.lo, ">=");
    if (c->kr.hi.has) fa_note_bound(&w, &c->kr.hi, "<=");
    if (c->kr.lo.has || c->kr.hi.has) sbuf_puts(&w, " only (the mask's)");
    if (w.failed) L->err = RJ_ERR_NOMEM;
    else snprintf(L->k->note, sizeof L->k->note, "%s", w.s ? w.s : "");
    sbuf_free(&w);
}

/* The kernel's description, launch, tiles and variables; false when out of memory. */
static bool fa_open(lower *L, fa_ctx *c) {
    const rj_graph *g = L->g;
    lkernel *k = L->k;
    k->heavy = true;
    sbuf w;
    sbuf_init(&w, L->ctx);
    sbuf_puts(&w, "attention in key tiles: softmax over the keys of ");
    print_node_type(&w, g, c->f);
    sbuf_puts(&w, " times ");
    print_node_type(&w, g, c->v);
    set_what(L, &w);
    fa_note(L, c);
    k->domain = UD_PIECES;
    k->dom_class = c->cls;
    k->dom_rank = c->r->rank == 4 ? 1 : 0; /* with heads, a unit per (piece, head) */
    if (k->dom_rank) k->dom_dims[0] = c->r->dims[2];
    k->tiling.tiled = true;
    k->tiling.fixed_tile = 1;
    k->launch.block = k->launch.group = FA_BR * c->ns;
    /* registers for a part of q and O and some 72 more (addresses, m, l, the dots): the most
     * threads a multiprocessor's 64 Ki registers hold at that (ptxas spills below it) */
    int64_t regs = (c->E * dsize(c->pt) + c->Dv * dsize(c->t)) / 4 / c->ns + 72;
    k->launch.sm_threads = regs <= 64 ? 1024 : regs <= 128 ? 512 : 256;
    c->ksh = L->err || !c->prod ? -1 : lk_local(k, "ktile", LL_BLOCK, c->pt);
    c->vsh = L->err ? -1 : lk_local(k, "vtile", LL_BLOCK, c->t);
    c->psh = L->err || !c->prod || c->ns == 1 ? -1 : lk_local(k, "ptile", LL_BLOCK, c->pt);
    if ((c->prod && c->ksh < 0) || c->vsh < 0 || (c->prod && c->ns > 1 && c->psh < 0)) {
        if (!L->err) L->err = RJ_ERR_NOMEM;
        return false;
    }
    if (c->prod) k->locals[c->ksh].elems = (int64_t)c->Bc * c->E;
    k->locals[c->vsh].elems = (int64_t)c->Bc * c->Dv;
    if (c->psh >= 0) k->locals[c->psh].elems = (int64_t)c->Bc * FA_BR * c->ns;
    char name[16];
    for (int e = 0; e < c->ep; e++) {
        snprintf(name, sizeof name, "q%d", e);
        c->qv[e] = newvar(L, name, c->pt);
    }
    for (int d = 0; d < c->dp; d++) {
        snprintf(name, sizeof name, "o%d", d);
        c->ov[d] = newvar(L, name, c->t);
    }
    for (int d = 0; d < FA_DOTS && c->prod; d++) {
        snprintf(name, sizeof name, "s%d", d);
        c->dv[d] = newvar(L, name, c->pt);
    }
    c->vm = newvar(L, "m", c->t);
    c->vl = newvar(L, "l", c->t);
    c->vx = newvar(L, "x", c->t);
    c->va = newvar(L, "a", c->t);
    c->vi = newvar(L, "i", RJ_I64);
    c->vv = newvar(L, "v", RJ_I64);
    c->vr = c->ns > 1 ? newvar(L, "row", RJ_I64) : -1;
    c->vpart = c->ns > 1 ? newvar(L, "part", RJ_I64) : -1;
    return !L->err;
}

void lower_attention_flash(lower *L, const fuse_group *gr) {
    fa_ctx c;
    if (fa_shape(L, gr, &c)) { /* the table asked attention_flash_applies first */
        L->err = ctx_fail(L->ctx, RJ_ERR_INTERNAL, "lower: the tiled attention does not serve group %d", L->group);
        return;
    }
    if (!fa_open(L, &c)) return; /* out of memory: L->err says so */
    const rj_graph *g = L->g;
    int32_t cls = c.cls;
    /* the unit u: head h of piece p, the piece's rows [r0, rend) of item b */
    blk top = NEWBLK, ub = NEWBLK;
    int32_t vu = newvar(L, "u", RJ_I64), vp = newvar(L, "p", RJ_I64), vb = newvar(L, "b", RJ_I64);
    int32_t vr0 = newvar(L, "r0", RJ_I64), vre = newvar(L, "rend", RJ_I64), vkl = newvar(L, "klen", RJ_I64);
    int32_t fu = s_for(L, &top, vu, xparam(L, PK_LO, 0, "lo"), xparam(L, PK_HI, 0, "hi"), LM_UNITS);
    int32_t u = xvar(L, vu), nh = c.r->rank == 4 ? xsize(L, c.r->dims[2]) : xi(L, 1);
    s_set(L, &ub, vp, xbin(L, LOP_IDIV, RJ_I64, u, nh));
    c.h = c.hk = -1;
    if (c.r->rank == 4) {
        int32_t vh = newvar(L, "h", RJ_I64);
        s_set(L, &ub, vh, xsub(L, u, xmul(L, xvar(L, vp), nh)));
        c.h = xvar(L, vh);
        rj_dim hkv = c.v->dims[2];
        c.hk = dim_equal(g, hkv, c.r->dims[2]) ? c.h : xbin(L, LOP_IDIV, RJ_I64, c.h, xi(L, c.r->dims[2] / hkv));
    }
    s_set(L, &ub, vb, class_load(L, PK_PITEM, cls, "pitem", xvar(L, vp)));
    c.b = xvar(L, vb);
    int32_t len = xlen(L, cls, c.b), prows = class_param(L, PK_PROWS, cls, "prows");
    s_set(L, &ub, vr0, xmul(L, xsub(L, xvar(L, vp), class_load(L, PK_PSTART, cls, "pstart", c.b)), prows));
    int32_t r0 = xvar(L, vr0);
    s_set(L, &ub, vre, xmax(L, xmin(L, xadd(L, r0, prows), len), r0));
    c.rend = xvar(L, vre);
    s_set(L, &ub, vkl, xlen(L, c.kcls, c.b)); /* the keys: their own class's length */
    /* for each query tile of the piece */
    int32_t vqt = newvar(L, "qt", RJ_I64), vi0 = newvar(L, "i0", RJ_I64);
    int32_t nqt = xbin(L, LOP_IDIV, RJ_I64, xadd(L, xsub(L, c.rend, r0), xi(L, FA_BR - 1)), xi(L, FA_BR));
    blk qb = NEWBLK;
    int32_t fq = s_for(L, &ub, vqt, xi(L, 0), nqt, LM_SERIAL);
    s_set(L, &qb, vi0, xadd(L, r0, xmul(L, xvar(L, vqt), xi(L, FA_BR))));
    c.i0 = xvar(L, vi0);
    fa_query_tile(L, &c, &qb, xvar(L, vkl));
    close_body(L, fq, &qb);
    close_body(L, fu, &ub);
    L->k->body = top.first;
}
