/*
 * lower/heads.c — per-(item, head) products, as the heads pass leaves them (heads.c).
 *
 *   q kᵀ  [B, j, H, E] by [B, j, H, E] -> [B, j, j, H]: per row (b, i), per head h, for each
 *         key j < len_b a dot product over E (a `reduce` over a lanes loop);
 *   p v   [B, j, j, H] by [B, j, H, D] -> [B, j, H, D]: per row (b, i), per head h, per
 *         column d (the lanes) the contraction over the item's keys j.
 *
 * This is the unfused form, kept for programs that need the scores themselves (an output, a
 * use beside the softmax); attention proper is the fused online-softmax kernel, which never
 * writes the score blocks. The item's k and v rows are read from cache: len_b rows of H·E.
 * The product's epilogue (a scale, a mask) is computed as each element is stored.
 */
#include "kit.h"

static at at4(int32_t b, int32_t i, int32_t j, int32_t k, int32_t cls) {
    return (at){.rank = 4, .idx = {b, i, j, k}, .inclass = cls, .outclass = -1, .guard = -1};
}

void lower_head_matmul(lower *L, const fuse_group *gr) {
    const rj_graph *g = L->g;
    const node *r = &g->nodes[gr->root], *xn = &g->nodes[r->in[0]], *wn = &g->nodes[r->in[1]];
    bool qk = r->ival != 0;
    int32_t cls = root_of(g, r->dims[1]);
    /* the keys' class (of k's and v's rows: another in cross attention) */
    int32_t kcls = root_of(g, qk ? wn->dims[1] : xn->dims[2]);
    rj_dtype t = r->dtype;
    /* f32 products accumulate in f64: a contraction over a long item's keys is a sum of hundreds
     * of terms, which the BLAS would block and this plain loop would not */
    rj_dtype acc_t = t == RJ_F32 || dtype_is_half(t) ? RJ_F64 : t;
    L->k->heavy = true;
    sbuf w;
    sbuf_init(&w, L->ctx);
    sbuf_printf(&w, "per-(item, head) product %s of ", qk ? "q kᵀ" : "p v");
    print_node_type(&w, g, xn);
    sbuf_puts(&w, " and ");
    print_node_type(&w, g, wn);
    set_what(L, &w);
    at a = {.rank = 4, .inclass = -1, .outclass = -1, .guard = -1};
    blk top = NEWBLK;
    rows_nest rn;
    blk *body = rows_open(L, &top, &a, cls, &rn);
    int32_t b = a.idx[0], i = a.idx[1], len = xlen(L, kcls, b);
    int32_t vh = newvar(L, "h", RJ_I64), vj = newvar(L, "j", RJ_I64), vc = newvar(L, "c", RJ_I64);
    int32_t acc = newvar(L, "acc", acc_t);
    blk hb = NEWBLK, ob = NEWBLK, cb = NEWBLK;
    int32_t fh = s_for(L, body, vh, xi(L, 0), xsize(L, qk ? xn->dims[2] : xn->dims[3]), LM_SERIAL);
    int32_t h = xvar(L, vh);
    int32_t hk = h; /* GQA (axis = 1): query head h reads key head h / (H / Hkv) */
    if (qk && r->axis == 1 && xn->dims[2] != wn->dims[2])
        hk = xbin(L, LOP_IDIV, RJ_I64, h, xi(L, xn->dims[2] / wn->dims[2]));
    if (qk) { /* for j: acc = sum over c < E of q[b, i, h, c] k[b, j, hk, c] */
        int32_t fj = s_for(L, &hb, vj, xi(L, 0), len, LM_SERIAL);
        s_set(L, &ob, acc, xconst(L, acc_t, 0));
        int32_t fc = s_for(L, &ob, vc, xi(L, 0), xsize(L, xn->dims[3]), LM_LANES);
        L->lanes++;
        at qa = at4(b, i, h, xvar(L, vc), cls), ka = at4(b, xvar(L, vj), hk, xvar(L, vc), kcls);
        int32_t qv = xcast(L, acc_t, value_fresh(L, r->in[0], &qa)), kv = xcast(L, acc_t, value(L, r->in[1], &ka));
        s_accum_fma(L, &cb, acc, qv, kv);
        L->lanes--;
        close_body(L, fc, &cb);
        at oa = at4(b, i, xvar(L, vj), h, cls);
        store_group(L, &ob, gr->root, xcast(L, t, xvar(L, acc)), &oa, ROWS_ANY, LF_NT);
        close_body(L, fj, &ob);
    } else { /* for c < D (lanes): acc = sum over j < len of p[b, i, j, h] v[b, j, h, c] */
        int32_t fc = s_for(L, &hb, vc, xi(L, 0), xsize(L, wn->dims[3]), LM_LANES);
        L->lanes++;
        s_set(L, &ob, acc, xconst(L, acc_t, 0));
        int32_t fj = s_for(L, &ob, vj, xi(L, 0), len, LM_SERIAL);
        at pa = at4(b, i, xvar(L, vj), h, cls), va = at4(b, xvar(L, vj), h, xvar(L, vc), kcls);
        int32_t pv = xcast(L, acc_t, value_fresh(L, r->in[0], &pa)), vv = xcast(L, acc_t, value(L, r->in[1], &va));
        s_set(L, &cb, acc, xfma(L, acc_t, pv, vv, xvar(L, acc)));
        close_body(L, fj, &cb);
        at oa = at4(b, i, h, xvar(L, vc), cls);
        store_group(L, &ob, gr->root, xcast(L, t, xvar(L, acc)), &oa, ROWS_ANY, LF_NT);
        L->lanes--;
        close_body(L, fc, &ob);
    }
    close_body(L, fh, &hb);
    rows_close(L, &rn);
    L->k->body = top.first;
}
