/*
 * lower/attention_lib.c — fused attention on a CPU whose products a library GEMM computes.
 *
 * The attention's FLOPs are its two products, 4·len²·E per (item, head), and a BLAS runs
 * them several times faster than any loop the JIT writes per query row (bench/NOTES.md: the
 * per-row kernel reached 0.45-0.50x the BLAS). So, per item b, head h and chunk of the item's
 * query rows (the runtime's unit, cpu_gemm.c):
 *
 *     C = Q_chunk · K_bᵀ        the BLAS, into a per-worker buffer C (rows × len_b) the cache holds
 *     P = softmax(F(C)) by rows  this template's kernel: F's expression with the product read
 *                                from C, the row's max, exp, the sum, and 1/l folded into P, in C
 *     O_chunk = P · V_b          the BLAS, written straight into the head's columns of the output
 *
 * Q, K, V and O are never copied: head h of q is columns h·E .. h·E+E-1 of rows of H·E (or of
 * the 3·H·E of a QKV projection the heads were split from), a strided matrix that a GEMM takes
 * with its leading dimension (head_source follows the narrows and the head split down to the
 * buffer). Query head h reads key and value head h / (H / Hkv) (GQA). Whole rows of scores are
 * in C, so the softmax takes two passes instead of the online rescaling of attention.c, and
 * its semantics are attention_rows': the shift is the row's max (0 where it is -inf), a row
 * whose weights sum to 0 (every score -inf) is 0/0 = NaN as softmax written out gives, or 0
 * in the safe form (PyTorch's SDPA). Memory stays O(len·D): C is a chunk per worker, not a
 * [B, H, j, j] tensor.
 *
 * 16-bit attention multiplies in f32 (the runtime widens q, k and v tile by tile into the
 * worker's scratch, cpu_gemm.c): C is f32, the scores and F's values are rounded once each as
 * value() makes them, the weights P stay f32 (as the online softmax of attention_rows keeps
 * them), and the output is rounded once as it is stored.
 *
 * attention_gemm (below) is the earlier form, kept where an operand is computed inline (v not
 * in memory) or a size is not a constant: only q kᵀ by the BLAS, attention_rows as epilogue.
 */
#include <math.h>

#include "kit.h"

/* Where operand id ([B, j, H, E] per head, [B, j, E] without) lies in memory: the node whose
 * buffer holds it, with head h's element e of a row at off + h·hs + e of the buffer's row of
 * ld elements. Follows narrows of dense dims and the head split (a reshape of the last dim
 * into [H, E]) that views are made of; false if the operand is computed inline, or a size on
 * the way is not a constant. */
typedef struct head_src {
    int32_t node;
    int64_t off, hs, ld;
} head_src;

static bool head_source(const lower *L, int32_t id, int32_t gi, head_src *src) {
    const rj_graph *g = L->g;
    bool split = g->nodes[id].rank == 4; /* coordinates still (head, column) */
    int64_t oh = 0, oe = 0, col = 0, hs = 0;
    if (!split && g->nodes[id].rank != 3) return false;
    for (int depth = 0; depth < 64; depth++) {
        const node *n = &g->nodes[id];
        int64_t row = 1;
        for (int k = 2; k < n->rank; k++) {
            if (n->dims[k] <= 0) return false;
            row *= n->dims[k];
        }
        if (will_have_buffer(L, id, gi)) {
            if (split) hs = n->dims[3], col = oh * hs + oe;
            *src = (head_src){.node = id, .off = col, .hs = hs, .ld = row};
            return true;
        }
        if (n->op == RJ_OP_NARROW && n->axis >= 2) {
            if (!split) col += n->ival;
            else if (n->axis == 2) oh += n->ival;
            else oe += n->ival;
        } else if (n->op == RJ_OP_RESHAPE && split) { /* [B, j, H·E] seen as [B, j, H, E] */
            const node *x = &g->nodes[n->in[0]];
            if (x->rank != 3 || x->dims[0] != n->dims[0] || x->dims[1] != n->dims[1] ||
                x->dims[2] != n->dims[2] * n->dims[3])
                return false;
            hs = n->dims[3], col = oh * hs + oe, split = false;
        } else {
            return false;
        }
        id = n->in[0];
    }
    return false;
}

/* The query, key and value operands of attention group gr (its product q kᵀ inline). */
static void attention_operands(const rj_graph *g, const fuse_group *gr, int32_t *q, int32_t *k, int32_t *v) {
    const node *r = &g->nodes[gr->product];
    *q = r->in[0];
    *k = r->keepdim ? r->in[1] : g->nodes[r->in[1]].in[0]; /* per head: k itself; else kᵀ's input */
    *v = g->nodes[gr->root].in[1];
}

/* The one buffer the attention's result is written to, or -1 (several, or it has epilogues:
 * the second GEMM writes the result as it is and nothing else). */
static int32_t result_buffer(const lower *L, const fuse_group *gr) {
    int32_t found = -1;
    for (int32_t m = 0; m < gr->nmembers; m++)
        if (L->plan->nodes[gr->members[m]].mat) return -1;
    for (int32_t bi = 0; bi < L->prog->nbufs; bi++) {
        const lbuf *lb = &L->prog->bufs[bi];
        if (lb->node != gr->root || lb->kind == LB_INPUT) continue;
        if (found >= 0 || lb->dtype != L->g->nodes[gr->root].dtype) return -1;
        found = bi;
    }
    return found;
}

bool attention_lib_applies(lower *L, const fuse_group *gr) {
    const rj_graph *g = L->g;
    if (gr->product < 0 || L->chunk_root >= 0 || !L->desc->gemm_lib) return false;
    int32_t gi = (int32_t)(gr - L->plan->groups), q, k, v;
    attention_operands(g, gr, &q, &k, &v);
    const node *a = &g->nodes[gr->root], *r = &g->nodes[gr->product], *f = &g->nodes[a->in[0]];
    rj_dtype t = a->dtype;
    head_src s;
    for (int32_t o = 0; o < 3; o++)
        if (g->nodes[o == 0 ? q : o == 1 ? k : v].dtype != t || !head_source(L, o == 0 ? q : o == 1 ? k : v, gi, &s))
            return false;
    for (int d = 2; d < a->rank; d++)
        if (a->dims[d] <= 0) return false;
    /* keys of the queries' class (cross attention's keys stay with attention_gemm) */
    if (r->dtype != t || f->dtype != t || root_of(g, r->dims[2]) != root_of(g, a->dims[1]) ||
        result_buffer(L, gr) < 0)
        return false;
    if (a->rank == 4 && (g->nodes[k].dims[2] != g->nodes[v].dims[2] || a->dims[2] % g->nodes[v].dims[2]))
        return false;
    const blas_fns *bl = blas_get(); /* ragjit's own sgemm has no dgemm: f64 stays attention_rows */
    return bl && (t == RJ_F32 || dtype_is_half(t) || (t == RJ_F64 && bl->dgemm));
}

static lview view_of(lower *L, int32_t id, int32_t gi) {
    head_src s;
    head_source(L, id, gi, &s);
    int32_t bi = L->bufof[s.node];
    return (lview){.buf = bi, .sym = buf_rows_sym(L, bi), .off = s.off, .hs = s.hs, .ld = s.ld};
}

/* Row (b, i) of C [and head h] becomes its softmax weights: x = F (the product read from C, F
 * written back unless it is the product),
 * m = max x, p = exp(x - m') (m' = 0 where m is -inf), l = sum p, P = p / l (safe: 0 where
 * l == 0). Three lanes loops over the row in cache. */
static void weights_row(lower *L, blk *body, const node *f, int32_t cls, int32_t b, int32_t i, int32_t h, bool safe) {
    rj_dtype t = dtype_compute(f->dtype); /* C's: f32 for 16-bit attention */
    int32_t len = xlen(L, cls, b), vj = newvar(L, "j", RJ_I64), vx = newvar(L, "x", t), vm = newvar(L, "m", t);
    int32_t vr = newvar(L, "mr", t), vl = newvar(L, "l", t), vp = newvar(L, "p", t), vi = newvar(L, "inv", t);
    int32_t cb = buf_param(L, L->chunk_buf);
    at fa = at3(b, i, xvar(L, vj), cls);
    if (f->rank == 4) fa.rank = 4, fa.idx[3] = h;
    blk xb = NEWBLK, pb = NEWBLK, sb = NEWBLK;
    s_set(L, body, vm, xconst(L, t, -INFINITY));
    int32_t fx = s_for(L, body, vj, xi(L, 0), len, LM_LANES); /* x = F, its max */
    L->lanes++;
    int32_t idx = chunk_index(L, &fa); /* after the loop opens: hash-consed per variable */
    s_set(L, &xb, vx, value_fresh(L, (int32_t)(f - L->g->nodes), &fa));
    if (f - L->g->nodes != L->chunk_root) s_store(L, &xb, cb, idx, xvar(L, vx), 0); /* F is not the product itself */
    s_accum(L, &xb, vm, RJ_OP_MAXIMUM, xvar(L, vx));
    L->lanes--;
    close_body(L, fx, &xb);
    s_set(L, body, vr, xsel(L, xcmp(L, RJ_OP_EQ, xvar(L, vm), xconst(L, t, -INFINITY)), xconst(L, t, 0), xvar(L, vm)));
    s_set(L, body, vl, xconst(L, t, 0));
    int32_t fp = s_for(L, body, vj, xi(L, 0), len, LM_LANES); /* p = exp(x - m'), their sum */
    L->lanes++;
    s_set(L, &pb, vp, xun(L, RJ_OP_EXP, t, xbin(L, RJ_OP_SUB, t, xload(L, cb, idx, t, -1), xvar(L, vr))));
    s_store(L, &pb, cb, idx, xvar(L, vp), 0);
    s_accum(L, &pb, vl, RJ_OP_ADD, xvar(L, vp));
    L->lanes--;
    close_body(L, fp, &pb);
    int32_t inv = xbin(L, RJ_OP_DIV, t, xconst(L, t, 1), xvar(L, vl));
    if (safe) inv = xsel(L, xcmp(L, RJ_OP_EQ, xvar(L, vl), xconst(L, t, 0)), xconst(L, t, 0), inv);
    s_set(L, body, vi, inv);
    int32_t fs = s_for(L, body, vj, xi(L, 0), len, LM_LANES); /* P = p / l */
    L->lanes++;
    s_store(L, &sb, cb, idx, xbin(L, RJ_OP_MUL, t, xload(L, cb, idx, t, -1), xvar(L, vi)), 0);
    L->lanes--;
    close_body(L, fs, &sb);
}

/* Whether F (node f) is the product (node r) itself, or the product times (or over) a float
 * constant, and that constant as F's f32 op reads it, the product and F of the attention's type
 * t (f32, or a 16-bit one: each rounded to it): then the runtime may turn the scores into
 * weights with its own code (util/head_softmax.c), which knows no other F. */
static bool plain_scores(const rj_graph *g, const node *f, int32_t r, rj_dtype t, lgemm *gm) {
    gm->att_scale = 1.0f;
    if (g->nodes[r].dtype != t) return false;
    if (f == &g->nodes[r]) return true;
    if ((f->op != RJ_OP_MUL && f->op != RJ_OP_DIV) || f->dtype != t || f->nin != 2) return false;
    for (int x = 0; x < (f->op == RJ_OP_DIV ? 1 : 2); x++) { /* s / c, not c / s */
        const node *c = &g->nodes[f->in[1 - x]];
        if (f->in[x] == r && c->op == RJ_OP_SCALAR && dtype_is_float(c->dtype)) { /* a literal: F's f32 */
            gm->att_scale = (float)c->fval, gm->att_div = f->op == RJ_OP_DIV;
            return true;
        }
    }
    return false;
}

void lower_attention_lib(lower *L, const fuse_group *gr) {
    const rj_graph *g = L->g;
    const node *a = &g->nodes[gr->root], *r = &g->nodes[gr->product], *f = &g->nodes[a->in[0]];
    int32_t gi = (int32_t)(gr - L->plan->groups), epi = (int32_t)(L->k - L->prog->kernels), q, k, v;
    attention_operands(g, gr, &q, &k, &v);
    bool heads = a->rank == 4;
    int32_t cls = root_of(g, a->dims[1]);
    int64_t H = heads ? a->dims[2] : 1, dv = a->dims[a->rank - 1];
    lgemm gm = {.on = true, .mode = GEMM_ATTN, .dtype = (uint8_t)a->dtype, .prologue = -1, .a_sym = -1,
                .b_sym = -1, .a_cls = cls, .chunk_a = -1, .K = g->nodes[q].dims[g->nodes[q].rank - 1], .N = dv,
                .heads = H, .kv_heads = heads ? g->nodes[v].dims[2] : 1};
    gm.att_plain = (a->dtype == RJ_F32 || dtype_is_half(a->dtype)) && plain_scores(g, f, gr->product, a->dtype, &gm);
    gm.att_safe = a->ival != 0;
    gm.att[0] = view_of(L, q, gi);
    gm.att[1] = view_of(L, k, gi);
    gm.att[2] = view_of(L, v, gi);
    int32_t ob = result_buffer(L, gr);
    gm.att[3] = (lview){.buf = ob, .sym = buf_rows_sym(L, ob), .hs = heads ? dv : 0, .ld = H * dv};
    gm.a_buf = gm.att[0].buf, gm.w_buf = gm.att[1].buf; /* what the run's liveness plan reads */
    gm.chunk_c = chunk_buf_add(L, 1, dtype_compute(a->dtype), r->dims[2]);
    if (L->err) return;
    sbuf w;
    sbuf_init(&w, L->ctx);
    sbuf_puts(&w, "fused attention, both products by the BLAS: softmax weights of ");
    print_node_type(&w, g, f);
    sbuf_puts(&w, " in C");
    set_what(L, &w);
    L->chunk_root = gr->product, L->chunk_buf = gm.chunk_c, L->chunk_cols = r->dims[2];
    at at0 = {.rank = 3, .inclass = -1, .outclass = -1, .guard = -1};
    blk top = NEWBLK;
    rows_nest rn;
    blk *body = rows_open(L, &top, &at0, cls, &rn);
    int32_t h = heads ? xparam(L, PK_HEAD, 0, "head") : -1;
    weights_row(L, body, f, cls, at0.idx[0], at0.idx[1], h, a->ival != 0);
    rows_close(L, &rn);
    L->k->body = top.first;
    L->chunk_root = -1;
    if (L->err) return;
    L->prog->kernels[epi].gemm = gm;
}

/* Fused attention on a CPU with a BLAS: the product q kᵀ that the attention's kernel needs
 * (fuse_group.product) by the BLAS, a chunk of an item's query rows at a time into C (GEMM_QK),
 * and the attention's own kernel (attention_rows, which the table picks once chunk_root is set)
 * as the GEMM's epilogue, reading the scores from C: the dot products run at the BLAS's speed,
 * and C, a few rows of one item for each worker, stays in cache. q and k must be in memory. */
bool attention_gemm_applies(lower *L, const fuse_group *gr) {
    const rj_graph *g = L->g;
    if (gr->product < 0 || L->chunk_root >= 0 || !L->desc->gemm_lib) return false;
    if (dtype_is_half(g->nodes[gr->product].dtype)) return false; /* 16-bit: the JIT's loops */
    const node *r = &g->nodes[gr->product];
    if (r->keepdim) return false; /* per head: the head's columns of q and k are strided, not the BLAS's rows */
    int32_t gi = (int32_t)(gr - L->plan->groups), q = r->in[0], k = g->nodes[r->in[1]].in[0];
    const blas_fns *bl = blas_get(); /* ragjit's own sgemm has no dgemm: f64 scores stay dot products */
    return g->nodes[q].dtype == r->dtype && g->nodes[k].dtype == r->dtype && will_have_buffer(L, q, gi) &&
           will_have_buffer(L, k, gi) && bl && (r->dtype != RJ_F64 || bl->dgemm);
}

void lower_attention_gemm(lower *L, const fuse_group *gr) {
    const rj_graph *g = L->g;
    const node *r = &g->nodes[gr->product];
    int32_t q = r->in[0], k = g->nodes[r->in[1]].in[0], epi = (int32_t)(L->k - L->prog->kernels);
    lgemm gm = {.on = true, .mode = GEMM_QK, .dtype = (uint8_t)r->dtype, .prologue = -1, .a_buf = L->bufof[q],
                .a_cls = root_of(g, r->dims[1]), .b_cls = root_of(g, r->dims[2]), .w_buf = L->bufof[k], .chunk_a = -1,
                .K = g->nodes[q].dims[2], .N = r->dims[2]};
    gm.a_sym = buf_rows_sym(L, gm.a_buf);
    gm.b_sym = buf_rows_sym(L, gm.w_buf);
    gm.chunk_c = chunk_buf_add(L, 1, r->dtype, gm.N);
    if (L->err) return;
    L->chunk_root = gr->product, L->chunk_buf = gm.chunk_c, L->chunk_cols = gm.N;
    L->lower_in_kernel(L, gr);
    L->chunk_root = -1;
    if (L->err) return;
    L->prog->kernels[epi].gemm = gm;
    L->k = &L->prog->kernels[epi];
}
