/*
 * lower/attention.c — fused attention: softmax(F, dim=-1) @ v in one pass over each item's keys.
 *
 * A unit is a query row (b, i) of the scores' ragged class (and, with heads, a loop over the
 * heads inside it), so a long item is many units and never serialises the launch. Per query
 * row the kernel walks the item's keys j once, with FlashAttention's online softmax:
 *
 *     s  = q_i · k_j            the product's element, a `reduce` over E (vectorised on a CPU,
 *                               a warp's shuffles or a block's shared memory on a SIMT target)
 *     x  = F at (b, i, j)       F's expression with the product's value bound to s (subst_node)
 *     m' = max(m, x); r = (m' == -inf ? 0 : m')       the guard keeps -inf - -inf out
 *     a  = exp(m - r); p = exp(x - r)
 *     l  = a l + p;  O[d] = a O[d] + p v_j[d]  (a lanes loop over Dv);  m = m'
 *
 * and writes O / l: a row whose scores are all -inf ends with l = 0, so it is 0/0 = NaN as the
 * softmax written out gives, or 0 in the safe form (PyTorch's SDPA). Nothing of size len x len
 * is ever written: the scores exist one at a time, in a register. exp is the accurate one, not
 * LOP_EXP_TERM, because a NaN score must stay NaN.
 *
 * O lives in a thread's local array where Dv is a constant and the target is a CPU (it stays in
 * cache, or in registers for small Dv); elsewhere in the attention's own output row, which each
 * lane reads and writes at the same elements on every key (fusion gives the attention no
 * epilogue, so that row always exists). Query head h reads kv head h / (H / Hkv) (GQA).
 */
#include <math.h>

#include "kit.h"

typedef struct att_ctx {
    const node *r, *f, *v, *prod;
    int32_t root, cls, b, i, h, hk; /* h, hk: -1 without heads */
    rj_dtype t;                     /* the accumulation type (the attention's) */
    rj_dim dv;
    int32_t acc_loc, acc_buf;       /* O: a local array, or the output buffer */
} att_ctx;

/* Element (b, i, [h], d) of the result: where O[d] is kept, and where it is stored. */
static at out_at(const att_ctx *c, int32_t d) {
    at a = {.rank = c->r->rank, .inclass = c->cls, .outclass = -1, .guard = -1};
    a.idx[0] = c->b;
    a.idx[1] = c->i;
    if (c->h >= 0) a.idx[2] = c->h;
    a.idx[a.rank - 1] = d;
    return a;
}

static int32_t acc_get(lower *L, const att_ctx *c, int32_t d) {
    if (c->acc_loc >= 0) return xlocal(L, c->acc_loc, d);
    at a = out_at(c, d);
    return xload(L, buf_param(L, c->acc_buf), xaddr(L, c->acc_buf, &a), c->t, -1);
}

static void acc_put(lower *L, const att_ctx *c, blk *b, int32_t d, int32_t val) {
    if (c->acc_loc >= 0) {
        s_store_local(L, b, c->acc_loc, d, val);
        return;
    }
    at a = out_at(c, d);
    s_store(L, b, buf_param(L, c->acc_buf), xaddr(L, c->acc_buf, &a), val, 0);
}

/* A lanes loop over d < Dv; returns the statement and opens its body. */
static int32_t lanes_d(lower *L, blk *b, int32_t vd, const att_ctx *c) {
    int32_t st = s_for(L, b, vd, xi(L, 0), xsize(L, c->dv), LM_LANES);
    L->lanes++;
    return st;
}

static void lanes_end(lower *L, int32_t st, blk *body) {
    L->lanes--;
    close_body(L, st, body);
}

/* s = q_i · k_j of the product, into variable sv (rank 3 q, k; with heads [B, j, H, E]). */
static void score_dot(lower *L, blk *jb, const att_ctx *c, int32_t vj, int32_t sv) {
    const rj_graph *g = L->g;
    const node *pr = c->prod, *kt = &g->nodes[pr->in[1]];
    int32_t qs = pr->in[0], ks = kt->in[0];
    const node *q = &g->nodes[qs];
    rj_dtype pt = pr->dtype;
    int32_t ve = newvar(L, "e", RJ_I64);
    s_set(L, jb, sv, xconst(L, pt, 0));
    int32_t fe = s_for(L, jb, ve, xi(L, 0), xsize(L, q->dims[q->rank - 1]), LM_LANES);
    blk eb = NEWBLK;
    L->lanes++;
    at qa = at3(c->b, c->i, xvar(L, ve), c->cls), ka = at3(c->b, xvar(L, vj), xvar(L, ve), c->cls);
    if (q->rank == 4) {
        qa.rank = ka.rank = 4;
        qa.idx[3] = ka.idx[3] = xvar(L, ve);
        qa.idx[2] = c->h;
        ka.idx[2] = c->hk;
    }
    int32_t qv = xcast(L, pt, value_fresh(L, qs, &qa)), kv = xcast(L, pt, value(L, ks, &ka));
    s_accum_fma(L, &eb, sv, qv, kv);
    L->lanes--;
    close_body(L, fe, &eb);
}

/* The online softmax over the item's keys, for query row (b, i) [and head h]. */
static void attend_row(lower *L, blk *body, att_ctx *c) {
    rj_dtype t = c->t;
    int32_t len = xlen(L, c->cls, c->b), vd = newvar(L, "d", RJ_I64), vj = newvar(L, "j", RJ_I64);
    int32_t vm = newvar(L, "m", t), vl = newvar(L, "l", t), vx = newvar(L, "x", t), vr = newvar(L, "mr", t);
    int32_t va = newvar(L, "alpha", t), vp = newvar(L, "p", t);
    s_set(L, body, vm, xconst(L, t, -INFINITY));
    s_set(L, body, vl, xconst(L, t, 0));
    blk zb = NEWBLK, jb = NEWBLK, ub = NEWBLK, ob = NEWBLK;
    int32_t fz = lanes_d(L, body, vd, c);
    acc_put(L, c, &zb, xvar(L, vd), xconst(L, t, 0));
    lanes_end(L, fz, &zb);
    int32_t fj = s_for(L, body, vj, xi(L, 0), len, LM_SERIAL);
    if (c->prod) {
        int32_t sv = newvar(L, "s", c->prod->dtype);
        score_dot(L, &jb, c, vj, sv);
        L->subst_node = (int32_t)(c->prod - L->g->nodes);
        L->subst_expr = xvar(L, sv);
    }
    at fa = at3(c->b, c->i, xvar(L, vj), c->cls);
    if (c->f->rank == 4) fa.rank = 4, fa.idx[3] = c->h;
    s_set(L, &jb, vx, xcast(L, t, value_fresh(L, (int32_t)(c->f - L->g->nodes), &fa)));
    L->subst_node = -1;
    int32_t mn = xbin(L, RJ_OP_MAXIMUM, t, xvar(L, vm), xvar(L, vx));
    int32_t ninf = xcmp(L, RJ_OP_EQ, mn, xconst(L, t, -INFINITY));
    s_set(L, &jb, vr, xsel(L, ninf, xconst(L, t, 0), mn));
    s_set(L, &jb, va, xun(L, RJ_OP_EXP, t, xbin(L, RJ_OP_SUB, t, xvar(L, vm), xvar(L, vr))));
    s_set(L, &jb, vp, xun(L, RJ_OP_EXP, t, xbin(L, RJ_OP_SUB, t, xvar(L, vx), xvar(L, vr))));
    s_set(L, &jb, vl, xfma(L, t, xvar(L, va), xvar(L, vl), xvar(L, vp)));
    int32_t fu = lanes_d(L, &jb, vd, c);
    at va_at = at3(c->b, xvar(L, vj), xvar(L, vd), c->cls);
    if (c->v->rank == 4) va_at.rank = 4, va_at.idx[2] = c->hk, va_at.idx[3] = xvar(L, vd);
    int32_t vv = xcast(L, t, value(L, (int32_t)(c->v - L->g->nodes), &va_at));
    int32_t old = acc_get(L, c, xvar(L, vd));
    acc_put(L, c, &ub, xvar(L, vd), xfma(L, t, xvar(L, vp), vv, xbin(L, RJ_OP_MUL, t, xvar(L, va), old)));
    lanes_end(L, fu, &ub);
    s_set(L, &jb, vm, mn);
    close_body(L, fj, &jb);
    /* O / l; safe: l == 0 (every score -inf, or no key) gives 0 */
    int32_t fo = lanes_d(L, body, vd, c);
    int32_t res = xbin(L, RJ_OP_DIV, t, acc_get(L, c, xvar(L, vd)), xvar(L, vl));
    if (c->r->ival) res = xsel(L, xcmp(L, RJ_OP_EQ, xvar(L, vl), xconst(L, t, 0)), xconst(L, t, 0), res);
    at oa = out_at(c, xvar(L, vd));
    store_group(L, &ob, c->root, res, &oa, ROWS_IN, LF_NT);
    lanes_end(L, fo, &ob);
}

void lower_attention(lower *L, const fuse_group *gr) {
    const rj_graph *g = L->g;
    att_ctx c = {.root = gr->root, .r = &g->nodes[gr->root], .h = -1, .hk = -1, .acc_loc = -1, .acc_buf = -1};
    c.f = &g->nodes[c.r->in[0]];
    c.v = &g->nodes[c.r->in[1]];
    c.prod = gr->product >= 0 ? &g->nodes[gr->product] : NULL;
    c.t = c.r->dtype;
    c.dv = c.r->dims[c.r->rank - 1];
    c.cls = root_of(g, c.r->dims[1]);
    L->k->heavy = true;
    sbuf w;
    sbuf_init(&w, L->ctx);
    sbuf_puts(&w, "fused attention: softmax over the keys of ");
    print_node_type(&w, g, c.f);
    sbuf_puts(&w, c.prod ? " (its q kᵀ computed here) times " : " times ");
    print_node_type(&w, g, c.v);
    set_what(L, &w);
    if (!L->desc->simt && c.dv > 0 && c.dv <= 4096) {
        c.acc_loc = L->err ? -1 : lk_local(L->k, "acc", LL_THREAD, c.t);
        if (c.acc_loc < 0) {
            if (!L->err) L->err = RJ_ERR_NOMEM;
            return;
        }
        L->k->locals[c.acc_loc].elems = c.dv;
    } else {
        c.acc_buf = L->bufof[gr->root];
    }
    at a = {.rank = 3, .inclass = -1, .outclass = -1, .guard = -1};
    blk top = NEWBLK;
    rows_nest rn;
    blk *body = rows_open(L, &top, &a, c.cls, &rn);
    c.b = a.idx[0];
    c.i = a.idx[1];
    if (c.r->rank == 4) { /* heads: each row's heads in turn */
        int32_t vh = newvar(L, "h", RJ_I64), fh = s_for(L, body, vh, xi(L, 0), xsize(L, c.r->dims[2]), LM_SERIAL);
        blk hb = NEWBLK;
        c.h = xvar(L, vh);
        rj_dim hkv = c.v->dims[2];
        c.hk = dim_equal(g, hkv, c.r->dims[2]) ? c.h : xbin(L, LOP_IDIV, RJ_I64, c.h, xi(L, c.r->dims[2] / hkv));
        attend_row(L, &hb, &c);
        close_body(L, fh, &hb);
    } else {
        attend_row(L, body, &c);
    }
    rows_close(L, &rn);
    L->k->body = top.first;
}
