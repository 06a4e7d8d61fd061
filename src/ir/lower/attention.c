/*
 * lower/attention.c — fused attention: softmax(F, dim=-1) @ v in one pass over each item's keys.
 *
 * A unit is a query row (b, i) of the scores' ragged class (and, with heads, a loop over the
 * heads inside it), so a long item is many units and never serialises the launch. Per query
 * row the kernel walks the item's keys j once (of the keys' own class: cross attention's
 * queries and keys have their own lengths), with FlashAttention's online softmax:
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
 * On a CPU with a GEMM, attention_lib.c usually runs both products in it instead; where it
 * cannot (an operand computed inline), its attention_gemm still takes the scores' product from
 * a GEMM's chunk and makes this kernel its epilogue: value() reads it from C, and nothing here
 * changes but that.
 *
 * O lives in a thread's local array where Dv is a constant and the target is a CPU (it stays in
 * cache, or in registers for small Dv); elsewhere in the attention's own output row, which each
 * lane reads and writes at the same elements on every key (fusion gives the attention no
 * epilogue, so that row always exists) — but for a 16-bit output, which would round O at
 * every key (3-4 ulps off at 400 keys): there each SIMT thread keeps an f32 array of Dv (up to
 * SIMT_HALF_ACC) and touches the elements of its own lanes only, private memory spent for
 * exactness. Query head h reads kv head h / (H / Hkv) (GQA).
 */
#include <math.h>

#include "kit.h"

#define SIMT_HALF_ACC 512 /* the largest Dv of a 16-bit SIMT attention's f32 accumulator array */

typedef struct att_ctx {
    const node *r, *f, *v, *prod;
    int32_t root, cls, b, i, h, hk; /* h, hk: -1 without heads */
    int32_t kcls;                   /* the keys' class: cls, or another in cross attention */
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

/* s = q_i · k_j of the product (j an expression), into variable sv (rank 3 q, k; with heads [B, j, H, E]). */
static void score_dot(lower *L, blk *jb, const att_ctx *c, int32_t j, int32_t sv) {
    const rj_graph *g = L->g;
    const node *pr = c->prod, *kt = &g->nodes[pr->in[1]];
    int32_t qs = pr->in[0], ks = pr->keepdim ? pr->in[1] : kt->in[0]; /* per head: k itself, [B, j, Hkv, E] */
    const node *q = &g->nodes[qs];
    rj_dtype pt = pr->dtype;
    int32_t ve = newvar(L, "e", RJ_I64);
    s_set(L, jb, sv, xconst(L, pt, 0));
    int32_t fe = s_for(L, jb, ve, xi(L, 0), xsize(L, q->dims[q->rank - 1]), LM_LANES);
    blk eb = NEWBLK;
    L->lanes++;
    at qa = at3(c->b, c->i, xvar(L, ve), c->cls), ka = at3(c->b, j, xvar(L, ve), c->kcls);
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

/* F at (b, i, j) [and head h], in the accumulation type, with the product's element computed
 * into a variable first (statements into jb). */
static int32_t score(lower *L, blk *jb, const att_ctx *c, int32_t j) {
    if (c->prod && L->chunk_root != (int32_t)(c->prod - L->g->nodes)) { /* else value() reads it from C */
        int32_t sv = newvar(L, "s", c->prod->dtype);
        score_dot(L, jb, c, j, sv);
        L->subst_node = (int32_t)(c->prod - L->g->nodes);
        L->subst_expr = xvar(L, sv);
    }
    at fa = at3(c->b, c->i, j, c->cls);
    if (c->f->rank == 4) fa.rank = 4, fa.idx[3] = c->h;
    int32_t x = xcast(L, c->t, value_fresh(L, (int32_t)(c->f - L->g->nodes), &fa));
    L->subst_node = -1;
    return x;
}

/* v at (b, j, [hk], d) in the accumulation type. */
static int32_t v_at(lower *L, const att_ctx *c, int32_t j, int32_t d) {
    at va = at3(c->b, j, d, c->kcls);
    if (c->v->rank == 4) va.rank = 4, va.idx[2] = c->hk, va.idx[3] = d;
    return xcast(L, c->t, value(L, (int32_t)(c->v - L->g->nodes), &va));
}

/* The row's result O / l stored (a lanes loop over d); safe: l == 0 (every score -inf, or no
 * key) gives 0. Without keys (len 0: cross attention's empty key item) it is 0 either way, as
 * the ops written out give: a softmax over an empty row is empty, and p @ v an empty sum. */
static void finish_row(lower *L, blk *body, const att_ctx *c, int32_t vd, int32_t vl, int32_t len) {
    rj_dtype t = c->t;
    blk ob = NEWBLK;
    int32_t fo = lanes_d(L, body, vd, c);
    int32_t res = xbin(L, RJ_OP_DIV, t, acc_get(L, c, xvar(L, vd)), xvar(L, vl));
    if (c->r->ival) res = xsel(L, xcmp(L, RJ_OP_EQ, xvar(L, vl), xconst(L, t, 0)), xconst(L, t, 0), res);
    else if (c->kcls != c->cls) res = xsel(L, xcmp(L, RJ_OP_EQ, len, xi(L, 0)), xconst(L, t, 0), res);
    at oa = out_at(c, xvar(L, vd));
    store_group(L, &ob, c->root, res, &oa, ROWS_IN, LF_NT);
    lanes_end(L, fo, &ob);
}

/* The online softmax over the item's keys, for query row (b, i) [and head h]. */
static void attend_row(lower *L, blk *body, att_ctx *c) {
    rj_dtype t = c->t;
    int32_t len = xlen(L, c->kcls, c->b), vd = newvar(L, "d", RJ_I64), vj = newvar(L, "j", RJ_I64);
    int32_t vm = newvar(L, "m", t), vl = newvar(L, "l", t), vx = newvar(L, "x", t), vr = newvar(L, "mr", t);
    int32_t va = newvar(L, "alpha", t), vp = newvar(L, "p", t);
    s_set(L, body, vm, xconst(L, t, -INFINITY));
    s_set(L, body, vl, xconst(L, t, 0));
    blk zb = NEWBLK, jb = NEWBLK, ub = NEWBLK;
    int32_t fz = lanes_d(L, body, vd, c);
    acc_put(L, c, &zb, xvar(L, vd), xconst(L, t, 0));
    lanes_end(L, fz, &zb);
    int32_t fj = s_for(L, body, vj, xi(L, 0), len, LM_SERIAL);
    s_set(L, &jb, vx, score(L, &jb, c, xvar(L, vj)));
    int32_t mn = xbin(L, RJ_OP_MAXIMUM, t, xvar(L, vm), xvar(L, vx));
    int32_t ninf = xcmp(L, RJ_OP_EQ, mn, xconst(L, t, -INFINITY));
    s_set(L, &jb, vr, xsel(L, ninf, xconst(L, t, 0), mn));
    s_set(L, &jb, va, xun(L, RJ_OP_EXP, t, xbin(L, RJ_OP_SUB, t, xvar(L, vm), xvar(L, vr))));
    s_set(L, &jb, vp, xun(L, RJ_OP_EXP, t, xbin(L, RJ_OP_SUB, t, xvar(L, vx), xvar(L, vr))));
    s_set(L, &jb, vl, xfma(L, t, xvar(L, va), xvar(L, vl), xvar(L, vp)));
    int32_t fu = lanes_d(L, &jb, vd, c);
    int32_t vv = v_at(L, c, xvar(L, vj), xvar(L, vd));
    int32_t old = acc_get(L, c, xvar(L, vd));
    acc_put(L, c, &ub, xvar(L, vd), xfma(L, t, xvar(L, vp), vv, xbin(L, RJ_OP_MUL, t, xvar(L, va), old)));
    lanes_end(L, fu, &ub);
    s_set(L, &jb, vm, mn);
    close_body(L, fj, &jb);
    finish_row(L, body, c, vd, vl, len);
}

/* The same on a CPU, a block of KEYS_CPU keys at a time: their scores into the local sc, one
 * rescale per block, exp over the block as a vector loop, and O[d] += p_t v_{j0+t}[d] as a
 * vector loop over d per key of the block (the innermost loop is the one a CPU vectorises):
 * the serial chain of m and l advances once per block instead of once per key. */
enum { KEYS_CPU = 16 };

static void attend_row_blocked(lower *L, blk *body, att_ctx *c, int32_t sc) {
    rj_dtype t = c->t;
    int32_t len = xlen(L, c->kcls, c->b), vd = newvar(L, "d", RJ_I64), vk = newvar(L, "j0", RJ_I64);
    int32_t vt = newvar(L, "t", RJ_I64), vn = newvar(L, "n", RJ_I64);
    int32_t vm = newvar(L, "m", t), vl = newvar(L, "l", t), vbm = newvar(L, "bm", t), vr = newvar(L, "mr", t);
    int32_t va = newvar(L, "alpha", t), vps = newvar(L, "ps", t), vo = newvar(L, "o", t);
    s_set(L, body, vm, xconst(L, t, -INFINITY));
    s_set(L, body, vl, xconst(L, t, 0));
    blk zb = NEWBLK, kb = NEWBLK, sb = NEWBLK, mb = NEWBLK, pb = NEWBLK, ub = NEWBLK, tb = NEWBLK;
    int32_t fz = lanes_d(L, body, vd, c);
    acc_put(L, c, &zb, xvar(L, vd), xconst(L, t, 0));
    lanes_end(L, fz, &zb);
    int32_t nblk = xbin(L, LOP_IDIV, RJ_I64, xadd(L, len, xi(L, KEYS_CPU - 1)), xi(L, KEYS_CPU));
    int32_t vb = newvar(L, "kb", RJ_I64), fk = s_for(L, body, vb, xi(L, 0), nblk, LM_SERIAL);
    s_set(L, &kb, vk, xmul(L, xvar(L, vb), xi(L, KEYS_CPU)));
    s_set(L, &kb, vn, xmin(L, xi(L, KEYS_CPU), xsub(L, len, xvar(L, vk))));
    /* the block's scores: a vector loop where the product comes from the BLAS's chunk */
    bool dots = c->prod && L->chunk_root != (int32_t)(c->prod - L->g->nodes);
    int32_t fs = s_for(L, &kb, vt, xi(L, 0), xvar(L, vn), dots ? LM_SERIAL : LM_LANES);
    L->lanes += !dots;
    s_store_local(L, &sb, sc, xvar(L, vt), score(L, &sb, c, xadd(L, xvar(L, vk), xvar(L, vt))));
    L->lanes -= !dots;
    close_body(L, fs, &sb);
    s_set(L, &kb, vbm, xconst(L, t, -INFINITY)); /* their max */
    int32_t fm = s_for(L, &kb, vt, xi(L, 0), xvar(L, vn), LM_LANES);
    L->lanes++;
    s_accum(L, &mb, vbm, RJ_OP_MAXIMUM, xlocal(L, sc, xvar(L, vt)));
    lanes_end(L, fm, &mb);
    int32_t mn = xbin(L, RJ_OP_MAXIMUM, t, xvar(L, vm), xvar(L, vbm));
    s_set(L, &kb, vr, xsel(L, xcmp(L, RJ_OP_EQ, mn, xconst(L, t, -INFINITY)), xconst(L, t, 0), mn));
    s_set(L, &kb, va, xun(L, RJ_OP_EXP, t, xbin(L, RJ_OP_SUB, t, xvar(L, vm), xvar(L, vr))));
    s_set(L, &kb, vps, xconst(L, t, 0)); /* the weights, and their sum */
    int32_t fp = s_for(L, &kb, vt, xi(L, 0), xvar(L, vn), LM_LANES);
    L->lanes++;
    int32_t vp = newvar(L, "p", t); /* read before the store overwrites sc[t] */
    s_set(L, &pb, vp, xun(L, RJ_OP_EXP, t, xbin(L, RJ_OP_SUB, t, xlocal(L, sc, xvar(L, vt)), xvar(L, vr))));
    s_store_local(L, &pb, sc, xvar(L, vt), xvar(L, vp));
    s_accum(L, &pb, vps, RJ_OP_ADD, xvar(L, vp));
    lanes_end(L, fp, &pb);
    s_set(L, &kb, vl, xfma(L, t, xvar(L, va), xvar(L, vl), xvar(L, vps)));
    int32_t fu = lanes_d(L, &kb, vd, c); /* O = alpha O, then + each weight times v's row */
    acc_put(L, c, &ub, xvar(L, vd), xbin(L, RJ_OP_MUL, t, xvar(L, va), acc_get(L, c, xvar(L, vd))));
    lanes_end(L, fu, &ub);
    int32_t ft = s_for(L, &kb, vt, xi(L, 0), xvar(L, vn), LM_SERIAL);
    s_set(L, &tb, vo, xlocal(L, sc, xvar(L, vt)));
    int32_t fv = lanes_d(L, &tb, vd, c);
    blk vb2 = NEWBLK;
    acc_put(L, c, &vb2, xvar(L, vd), xfma(L, t, xvar(L, vo), v_at(L, c, xadd(L, xvar(L, vk), xvar(L, vt)), xvar(L, vd)),
                                          acc_get(L, c, xvar(L, vd))));
    lanes_end(L, fv, &vb2);
    close_body(L, ft, &tb);
    s_set(L, &kb, vm, mn);
    close_body(L, fk, &kb);
    finish_row(L, body, c, vd, vl, len);
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
    c.kcls = root_of(g, c.v->dims[1]);
    L->k->heavy = true;
    sbuf w;
    sbuf_init(&w, L->ctx);
    sbuf_puts(&w, "fused attention: softmax over the keys of ");
    print_node_type(&w, g, c.f);
    sbuf_puts(&w, !c.prod ? " times " : L->chunk_root >= 0 ? " (its q kᵀ by the BLAS) times " : " (its q kᵀ computed here) times ");
    print_node_type(&w, g, c.v);
    set_what(L, &w);
    int32_t sc = -1;
    bool cpu = !L->desc->simt && c.dv > 0 && c.dv <= 4096;
    /* a 16-bit output row cannot hold O between keys (each update would round it): O goes in
     * the thread's own f32 array on a SIMT target too, where Dv is a constant */
    if (cpu || (dtype_is_half(c.t) && c.dv > 0 && c.dv <= SIMT_HALF_ACC)) {
        c.acc_loc = L->err ? -1 : lk_local(L->k, "acc", LL_THREAD, c.t);
        sc = c.acc_loc < 0 || !cpu ? -1 : lk_local(L->k, "sc", LL_THREAD, c.t);
        if (c.acc_loc < 0 || (cpu && sc < 0)) {
            if (!L->err) L->err = RJ_ERR_NOMEM;
            return;
        }
        L->k->locals[c.acc_loc].elems = c.dv;
        if (sc >= 0) L->k->locals[sc].elems = KEYS_CPU;
    } else if (dtype_is_half(c.t)) {
        L->err = RJ_ERR_UNSUPPORTED;
        ctx_fail(L->ctx, RJ_ERR_UNSUPPORTED, "fused attention in %s on a GPU needs the value's last dim to be "
                 "a constant of at most %d (it is kept in f32 per thread)", rj_dtype_name(c.t), SIMT_HALF_ACC);
        return;
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
        if (sc >= 0) attend_row_blocked(L, &hb, &c, sc);
        else attend_row(L, &hb, &c);
        close_body(L, fh, &hb);
    } else if (sc >= 0) {
        attend_row_blocked(L, body, &c, sc);
    } else {
        attend_row(L, body, &c);
    }
    rows_close(L, &rn);
    L->k->body = top.first;
}
