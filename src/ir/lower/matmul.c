/*
 * lower/matmul.c — the JIT's own matrix products: dense rows and per-item products.
 *
 * Per row of the product (a unit), a lanes loop over its N columns; each lane runs the dot
 * product over K serially, with x's element (its producers inlined) and w's, and then the
 * epilogue at that element. On a SIMT target a warp takes a row: w's rows are read coalesced
 * and x's element is one broadcast load. It is what every target runs where no BLAS serves.
 */
#include "kit.h"

static void matmul_body(lower *L, blk *b, at *a, void *ud) {
    const fuse_group *gr = ud;
    const node *r = &L->g->nodes[gr->root], *x = &L->g->nodes[r->in[0]];
    int R = r->rank;
    rj_dtype t = r->dtype;
    int32_t acc = newvar(L, "acc", t), vk = newvar(L, "k", RJ_I64);
    s_set(L, b, acc, xconst(L, t, 0));
    int32_t st = s_for(L, b, vk, xi(L, 0), xsize(L, x->dims[R - 1]), LM_SERIAL);
    blk kb = NEWBLK;
    at xa = *a;
    xa.idx[R - 1] = xvar(L, vk);
    if (R == 2) xa.inclass = xa.outclass = -1; /* dim 1 is K now */
    int32_t av = xcast(L, t, value_fresh(L, r->in[0], &xa));
    at wa = {.rank = 2, .inclass = -1, .outclass = -1, .guard = a->guard};
    wa.idx[0] = r->ival ? a->idx[R - 1] : xvar(L, vk);
    wa.idx[1] = r->ival ? xvar(L, vk) : a->idx[R - 1];
    int32_t wv = xcast(L, t, value(L, r->in[1], &wa));
    s_set(L, &kb, acc, xfma(L, t, av, wv, xvar(L, acc)));
    close_body(L, st, &kb);
    store_group(L, b, gr->root, xvar(L, acc), a, ROWS_ANY, LF_NT);
}

void lower_matmul(lower *L, const fuse_group *gr) {
    const node *r = &L->g->nodes[gr->root];
    L->k->heavy = true;
    sbuf w;
    sbuf_init(&w, L->ctx);
    sbuf_puts(&w, "matmul of ");
    print_node_type(&w, L->g, &L->g->nodes[r->in[0]]);
    sbuf_puts(&w, r->ival ? " by the transpose of " : " by ");
    print_node_type(&w, L->g, &L->g->nodes[r->in[1]]);
    set_what(L, &w);
    element_nest(L, r, r->dims, matmul_body, (void *)gr);
}

/* ---- per-item products over a ragged dim ----------------------------------------------------
 *   q kᵀ  [B, j1, j1]: per row (b, i), for each column j < len_b, a dot product over D as a
 *         `reduce` over a lanes loop (vectorised on a CPU, a warp's shuffles on a SIMT target);
 *   p v   [B, j1, D] and xᵀ y [B, K, N]: per row, the contraction over the item's rows j (or
 *         i) into one accumulator per output column. On a CPU with a constant width those are a
 *         local array and the columns the inner lanes loop (acc[n] += p[i, j] v[j, n],
 *         vectorised, p read once per j); otherwise each lane keeps its own accumulator over a
 *         serial loop (a SIMT target: a warp per row, the lanes its threads).
 * On a SIMT target q kᵀ and p v are the block-wide tiled kernels of lower_item_matmul_tiled
 * instead (below); xᵀ y keeps this form.
 * The item's rows are read from cache: an item's k or v is len_b rows. The product's epilogue
 * (a scale, a mask, ...) is computed as each element is stored. */

/* local: the contraction may keep its accumulators in a local array (a CPU), else each lane
 * keeps its own (a SIMT target's threads). */
static void item_matmul(lower *L, const fuse_group *gr, bool local_acc) {
    const rj_graph *g = L->g;
    const node *r = &g->nodes[gr->root], *xn = &g->nodes[r->in[0]], *wn = &g->nodes[r->in[1]];
    bool qk = is_jagged_t(g, wn), gw = is_jagged_t(g, xn);
    int32_t xs = gw ? xn->in[0] : r->in[0], ws = qk ? wn->in[0] : r->in[1];
    const node *xv = &g->nodes[xs], *wv = &g->nodes[ws];
    int32_t cls = root_of(g, gw ? xv->dims[1] : qk ? xv->dims[1] : r->dims[1]);
    /* the class of the contracted or iterated keys: k's and v's rows (another class than the
     * queries' in cross attention); xᵀ y sums over the rows themselves */
    int32_t kcls = gw ? cls : root_of(g, qk ? wv->dims[1] : xv->dims[2]);
    rj_dtype t = r->dtype;
    L->k->heavy = true;
    sbuf w;
    sbuf_init(&w, L->ctx);
    sbuf_printf(&w, "per-item product %s of ", qk ? "q kᵀ" : gw ? "xᵀ y" : "p v");
    print_node_type(&w, g, xv);
    sbuf_puts(&w, " and ");
    print_node_type(&w, g, wv);
    set_what(L, &w);
    at a = {.rank = 3, .inclass = -1, .outclass = -1, .guard = -1};
    blk top = NEWBLK, inner, *body;
    rows_nest rn;
    int32_t fs = -1;
    if (gw) { /* units (b, k) of the dense [B, K, N] */
        dense_loop(L, &top, &a, r->dims, 2, &inner, &fs);
        body = &inner;
    } else {
        body = rows_open(L, &top, &a, cls, &rn);
    }
    int32_t b = a.idx[0], len = xlen(L, kcls, b);
    if (qk) {
        int32_t vj = newvar(L, "j", RJ_I64), vd = newvar(L, "d", RJ_I64), acc = newvar(L, "acc", t);
        int32_t fj = s_for(L, body, vj, xi(L, 0), len, LM_SERIAL);
        blk jb = NEWBLK, db = NEWBLK;
        s_set(L, &jb, acc, xconst(L, t, 0));
        int32_t fd = s_for(L, &jb, vd, xi(L, 0), xsize(L, xv->dims[2]), LM_LANES);
        L->lanes++;
        at qa = at3(b, a.idx[1], xvar(L, vd), cls), ka = at3(b, xvar(L, vj), xvar(L, vd), kcls);
        int32_t qv = xcast(L, t, value_fresh(L, xs, &qa)), kv = xcast(L, t, value(L, ws, &ka));
        s_accum_fma(L, &db, acc, qv, kv);
        L->lanes--;
        close_body(L, fd, &db);
        at oa = at3(b, a.idx[1], xvar(L, vj), cls);
        store_group(L, &jb, gr->root, xvar(L, acc), &oa, ROWS_ANY, LF_NT);
        close_body(L, fj, &jb);
    } else {
        /* the contraction: p v sums over the block's columns j, xᵀ y over the item's rows */
        rj_dim ncols = r->dims[2];
        int32_t vn = newvar(L, "n", RJ_I64), vj = newvar(L, "j", RJ_I64);
        bool local = local_acc && ncols > 0 && ncols <= 4096;
        if (local) {
            int32_t loc = L->err ? -1 : lk_local(L->k, "acc", LL_THREAD, t);
            if (loc < 0) {
                if (!L->err) L->err = RJ_ERR_NOMEM;
                return;
            }
            L->k->locals[loc].elems = ncols;
            blk zb = NEWBLK, jb = NEWBLK, nb = NEWBLK, ob = NEWBLK;
            int32_t fz = s_for(L, body, vn, xi(L, 0), xi(L, ncols), LM_LANES);
            s_store_local(L, &zb, loc, xvar(L, vn), xconst(L, t, 0));
            close_body(L, fz, &zb);
            int32_t fj = s_for(L, body, vj, xi(L, 0), len, LM_SERIAL);
            at ca = gw ? at3(b, xvar(L, vj), a.idx[1], cls) : at3(b, a.idx[1], xvar(L, vj), cls);
            int32_t cv = newvar(L, "c", t);
            s_set(L, &jb, cv, xcast(L, t, value_fresh(L, xs, &ca)));
            int32_t fn = s_for(L, &jb, vn, xi(L, 0), xi(L, ncols), LM_LANES);
            L->lanes++;
            at va = at3(b, xvar(L, vj), xvar(L, vn), kcls);
            int32_t vv = xcast(L, t, value(L, ws, &va));
            s_store_local(L, &nb, loc, xvar(L, vn), xfma(L, t, xvar(L, cv), vv, xlocal(L, loc, xvar(L, vn))));
            L->lanes--;
            close_body(L, fn, &nb);
            close_body(L, fj, &jb);
            int32_t fo = s_for(L, body, vn, xi(L, 0), xi(L, ncols), LM_LANES);
            L->lanes++;
            at oa = at3(b, a.idx[1], xvar(L, vn), gw ? -1 : cls);
            store_group(L, &ob, gr->root, xlocal(L, loc, xvar(L, vn)), &oa, ROWS_ANY, LF_NT);
            L->lanes--;
            close_body(L, fo, &ob);
        } else {
            int32_t acc = newvar(L, "acc", t);
            blk nb = NEWBLK, jb = NEWBLK;
            int32_t fn = s_for(L, body, vn, xi(L, 0), xsize(L, ncols), LM_LANES);
            L->lanes++;
            s_set(L, &nb, acc, xconst(L, t, 0));
            int32_t fj = s_for(L, &nb, vj, xi(L, 0), len, LM_SERIAL);
            at ca = gw ? at3(b, xvar(L, vj), a.idx[1], cls) : at3(b, a.idx[1], xvar(L, vj), cls);
            at va = at3(b, xvar(L, vj), xvar(L, vn), kcls);
            int32_t cvv = xcast(L, t, value_fresh(L, xs, &ca)), vv = xcast(L, t, value(L, ws, &va));
            s_set(L, &jb, acc, xfma(L, t, cvv, vv, xvar(L, acc)));
            close_body(L, fj, &jb);
            at oa = at3(b, a.idx[1], xvar(L, vn), gw ? -1 : cls);
            store_group(L, &nb, gr->root, xvar(L, acc), &oa, ROWS_ANY, LF_NT);
            L->lanes--;
            close_body(L, fn, &nb);
        }
    }
    if (gw) close_body(L, fs, &inner);
    else rows_close(L, &rn);
    L->k->body = top.first;
}

void lower_item_matmul_cpu(lower *L, const fuse_group *gr) { item_matmul(L, gr, true); }
void lower_item_matmul_threads(lower *L, const fuse_group *gr) { item_matmul(L, gr, false); }
