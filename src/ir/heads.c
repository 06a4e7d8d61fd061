/*
 * heads.c — the heads pass: tensors seen per head are rewritten into the order they are stored in.
 *
 * A transformer splits its projections into heads as x.view(B, j, H, D).transpose(1, 2):
 * [B, H, j, D], the ragged dim at position 2, each (item, head) a len_b × D block. PyTorch's
 * jagged layout makes that transpose a view: the values stay rows of [H, D]. ragjit does the
 * same. A head view (node_is_headed: [B, H, j, D], the transposed key [B, H, D, j], the score
 * pair [B, H, j, j]) is stored in canonical order — the batch dim, the ragged dims, the other
 * dims in order — so the user's graph keeps PyTorch's shapes and dims (what the text format,
 * the messages and the interpreter see), and this pass, first in the pipeline, rewrites every
 * node into its stored order. After it, every tensor has its ragged dims at 1 (and 2), the
 * layouts all later passes and templates know:
 *
 *   transpose       the permutation of stored positions it amounts to: none for the head
 *                   split and merge and for kᵀ (the node disappears: a free view), else
 *                   swaps of dense dims (a real transpose, as before);
 *   elementwise     operands aligned to the result's stored order: a dense operand ([H, 1, 1]
 *                   against [B, H, j, j]) is reshaped (or transposed) into it;
 *   reduce, softmax, norm, narrow   their dim renumbered;
 *   reshape         of the dims after the ragged one: the stored dims of the result;
 *   matmul          q kᵀ and p v per (item, head) become the stored forms ([B, j, H, E] by the
 *                   transpose of [B, j, H, E] -> [B, j, j, H]; [B, j, j, H] @ [B, j, H, D]),
 *                   marked keepdim = 1 (infer.c, head_matmul; lowered by lower/heads.c).
 *
 * Every rebuilt node is re-inferred and must come out with the stored dims of the node it
 * replaces; anything else is refused by name rather than computed wrong.
 */
#include <string.h>

#include "passes.h"
#include "rewrite.h"

typedef struct heads {
    rewriter rw; /* rw.g: the graph in the user's order; rw.out: the one in stored order */
} heads;

static bool any_headed(const rj_graph *g) {
    for (int32_t i = 0; i < g->n; i++)
        if (node_is_headed(g, &g->nodes[i])) return true;
    return false;
}

static int32_t add(heads *h, node *n) {
    int32_t id = rw_add(&h->rw, n);
    if (id < 0 && !h->rw.out->status) ctx_fail(h->rw.g->ctx, RJ_ERR_NOMEM, "heads: out of memory");
    return id;
}

static int32_t reshape_to(heads *h, int32_t x, int rank, const rj_dim *dims, int32_t from) {
    const node *xn = &h->rw.out->nodes[x];
    if (xn->rank == rank && !memcmp(xn->dims, dims, sizeof(rj_dim) * (size_t)rank)) return x;
    node n = {.op = RJ_OP_RESHAPE, .nin = 1, .in = {x, -1, -1}, .rank = (uint8_t)rank, .loc = -1, .from = from};
    memcpy(n.dims, dims, sizeof(rj_dim) * (size_t)rank);
    return add(h, &n);
}

/* x (new graph) with its stored positions permuted: position p of the result is position
 * perm[p] of x, by swaps of two positions (transpose nodes). */
static int32_t permute(heads *h, int32_t x, const int *perm, int rank, int32_t from) {
    int cur[RJ_MAX_RANK]; /* cur[p]: which position of x sits at p now */
    for (int p = 0; p < rank; p++) cur[p] = p;
    for (int p = 0; p < rank && x >= 0; p++) {
        if (cur[p] == perm[p]) continue;
        int q = p + 1;
        while (cur[q] != perm[p]) q++;
        node n = {.op = RJ_OP_TRANSPOSE, .nin = 1, .in = {x, -1, -1}, .axis = p, .ival = q, .loc = -1, .from = from};
        x = add(h, &n);
        int t = cur[p];
        cur[p] = cur[q], cur[q] = t;
    }
    return x;
}

static void invert(const int *order, int rank, int *inv) {
    for (int p = 0; p < rank; p++) inv[order[p]] = p;
}

/* Operand o of node n, laid out for n's stored order: o's dims right-aligned to n's, then
 * taken in n's stored order. A dense operand is reshaped (its size-1 dims moved) or
 * transposed into place; a jagged one must already be. */
static int32_t align_operand(heads *h, const node *n, int32_t o, const int *order) {
    const rj_graph *g = h->rw.g;
    const node *on = &g->nodes[o];
    int32_t x = h->rw.map[o];
    if (on->rank == 0 || x < 0) return x;
    int R = n->rank, shift = R - on->rank;
    rj_dim full[RJ_MAX_RANK], want[RJ_MAX_RANK];
    for (int k = 0; k < R; k++) full[k] = k < shift ? 1 : on->dims[k - shift];
    for (int p = 0; p < R; p++) want[p] = full[order[p]];
    const node *xn = &h->rw.out->nodes[x];
    int xs = R - xn->rank;
    bool same = xs >= 0;
    for (int p = 0; same && p < R; p++) same = want[p] == (p < xs ? 1 : xn->dims[p - xs]);
    if (same) return x;
    if (dim_ragged_pos(g, on) >= 0) {
        graph_fail(h->rw.out, RJ_ERR_UNSUPPORTED, "%s: an operand of rank %d broadcast against a jagged tensor per "
                   "head: this version broadcasts dense tensors and tensors of the same layout against it",
                   op_table[n->op].name, on->rank);
        return -1;
    }
    /* the non-1 dims in the same order: a reshape moves the 1s; else transposes */
    rj_dim a[RJ_MAX_RANK], b[RJ_MAX_RANK];
    int na = 0, nb = 0;
    for (int k = 0; k < R; k++) {
        if (full[k] != 1) a[na++] = full[k];
        if (want[k] != 1) b[nb++] = want[k];
    }
    if (na == nb && !memcmp(a, b, sizeof(rj_dim) * (size_t)na)) return reshape_to(h, x, R, want, n->from);
    x = reshape_to(h, x, R, full, n->from);
    return x < 0 ? x : permute(h, x, order, R, n->from);
}

/* n's dims and want differ only in where their 1s are. */
static bool same_but_ones(const node *n, const rj_dim *want) {
    int i = 0, k = 0;
    for (;;) {
        while (i < n->rank && n->dims[i] == 1) i++;
        while (k < n->rank && want[k] == 1) k++;
        if (i == n->rank || k == n->rank) return i == n->rank && k == n->rank;
        if (n->dims[i++] != want[k++]) return false;
    }
}

/* The node replacing old node i, in stored order. */
static int32_t rebuild(heads *h, int32_t i) {
    const rj_graph *g = h->rw.g;
    const node *o = &g->nodes[i];
    node n = *o;
    n.name = NULL;
    int order[RJ_MAX_RANK], xorder[RJ_MAX_RANK], inv[RJ_MAX_RANK];
    node_phys_order(g, o, order);
    for (int k = 0; k < n.nin; k++) n.in[k] = h->rw.map[o->in[k]];
    op_kind kind = op_table[o->op].kind;
    const node *x = o->nin ? &g->nodes[o->in[0]] : NULL;
    if (x) {
        node_phys_order(g, x, xorder);
        invert(xorder, x->rank, inv);
    }
    switch (kind) {
    case KIND_UNARY:
    case KIND_BINARY:
    case KIND_COMPARE:
    case KIND_SELECT:
    case KIND_CAST:
        for (int k = 0; k < n.nin; k++)
            if ((n.in[k] = align_operand(h, o, o->in[k], order)) < 0) return -1;
        break;
    case KIND_REDUCE:
    case KIND_SOFTMAX: n.axis = inv[o->axis]; break;
    case KIND_MATMUL:
        if (node_is_headed(g, x) && node_is_headed(g, &g->nodes[o->in[1]])) {
            n.keepdim = 1;
            const sym *c = graph_sym(g, x->dims[3]); /* p v contracts x's ragged dim 3; q kᵀ its E */
            n.ival = !(c && c->kind == SYM_RAGGED);
        }
        break;
    case KIND_VIEW:
        if (o->op == RJ_OP_NARROW) {
            n.axis = inv[o->axis];
        } else if (o->op == RJ_OP_RESHAPE) {
            node_phys_dims(g, o, n.dims);
        } else if (o->op == RJ_OP_TRANSPOSE) {
            /* stored position p of the result holds dim order[p], which is dim sw(order[p]) of x */
            int perm[RJ_MAX_RANK];
            for (int p = 0; p < o->rank; p++) {
                int d = order[p];
                d = d == o->axis ? (int)o->ival : d == o->ival ? o->axis : d;
                perm[p] = inv[d];
            }
            return permute(h, n.in[0], perm, o->rank, o->from);
        } else {
            break;
        }
        break;
    default: break;
    }
    int32_t id = add(h, &n);
    if (id < 0) return -1;
    rj_dim want[RJ_MAX_RANK];
    node_phys_dims(g, o, want);
    const node *nn = &h->rw.out->nodes[id];
    if (nn->rank == o->rank && memcmp(nn->dims, want, sizeof(rj_dim) * o->rank) && same_but_ones(nn, want) &&
        o->rank > 1 && nn->dims[1] == want[1]) /* a reshape keeps the ragged dim where it is */
        return reshape_to(h, id, o->rank, want, o->from); /* a kept dim in its place: [B, j, 1, H] -> [B, j, H, 1] */
    nn = &h->rw.out->nodes[id];
    if (nn->rank != o->rank || memcmp(nn->dims, want, sizeof(rj_dim) * o->rank)) {
        sbuf b;
        sbuf_init(&b, g->ctx);
        print_node_type(&b, g, o);
        ctx_fail(g->ctx, RJ_ERR_UNSUPPORTED, "%s: %s from a jagged tensor per head: this version cannot compute it "
                 "in this form (transpose(1, 2) back to [B, j, H, D] first)", op_table[o->op].name, b.s ? b.s : "");
        sbuf_free(&b);
        return -1;
    }
    return id;
}

static bool touches_heads(const rj_graph *g, const node *n) {
    if (node_is_headed(g, n)) return true;
    for (int k = 0; k < n->nin; k++)
        if (node_is_headed(g, &g->nodes[n->in[k]])) return true;
    return false;
}

rj_status pass_heads(rj_graph *g) {
    if (!any_headed(g)) return RJ_OK;
    heads h = {0};
    rj_status s = rw_begin(&h.rw, g);
    if (s) return s;
    size_t nl = (size_t)(g->n ? g->n : 1);
    uint8_t *live = mem_alloc(g->ctx, nl);
    if (!live) {
        rw_abort(&h.rw);
        return RJ_ERR_NOMEM;
    }
    rw_live(g, live);
    for (int32_t i = 0; i < g->n; i++) {
        if (!live[i] || h.rw.map[i] >= 0) continue;
        int32_t id = touches_heads(g, &g->nodes[i]) ? rebuild(&h, i) : rw_copy(&h.rw, i);
        if (id >= 0) rw_label(&h.rw, id, g->nodes[i].name);
        if ((h.rw.map[i] = id) < 0) {
            mem_free(g->ctx, live, nl);
            s = h.rw.out->status ? h.rw.out->status : ctx_last_status(g->ctx) ? ctx_last_status(g->ctx) : RJ_ERR_INTERNAL;
            rw_abort(&h.rw);
            return s;
        }
    }
    mem_free(g->ctx, live, nl);
    return rw_finish(&h.rw);
}
