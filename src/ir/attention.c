/*
 * attention.c — fused attention: finding it in a graph, and the product its kernel computes.
 *
 * attention(F, v) is softmax(F, dim=-1) @ v with F a tensor of two ragged dims, the scores. Its
 * kernel (lower/attention.c) walks each query row's keys with an online softmax and never
 * writes F; what makes that pay is that F itself is never written either: F is an elementwise
 * expression (a scale, masks, biases from positions, tanh soft-capping) of one per-item product
 * q @ kᵀ, and the kernel computes that product's element as a dot product where it needs it.
 * attention_product decides which product that is: the one pair product F reaches through
 * inline nodes, provided that nothing but F's own expression reads it or anything computed from
 * it (else it is materialised anyway, and the kernel reads it). Fusion (fuse.c) then makes that
 * product an inline node of the attention's kernel instead of a kernel of its own.
 *
 * pass_find_attention is the compiler's half of the fusion: matmul(softmax(F, dim=-1), v), the
 * softmax read by nothing else and no output, becomes attention(F, v) where F's product can be
 * computed in the kernel. It rewrites the product node in place (the softmax is left dead, and
 * the next canonicalisation drops it): ids keep their order, and nothing else changes. Where
 * the pattern does not hold the unfused ops stay, and their kernels compute what they always
 * did. The semantics are the unfused ones exactly: a row of all -inf scores is NaN (softmax's
 * 0/0), an empty item has no rows.
 */
#include <string.h>

#include "passes.h"

/* Nodes an attention's kernel may evaluate at an index of its scores (fuse.c makes them inline):
 * no roots, and no index op with an index operand (its range check is a kernel of its own,
 * which would have to compute the product too). */
static bool walks_through(const node *n) {
    op_kind k = op_table[n->op].kind;
    if (n->op == RJ_OP_INPUT || k == KIND_REDUCE || k == KIND_SOFTMAX || k == KIND_NORM || k == KIND_MATMUL ||
        k == KIND_ATTENTION)
        return false;
    return k != KIND_INDEX || op_is_generator(n->op);
}

/* q @ kᵀ of jagged [B, j, E] operands: a pair [B, j, j]; per head, the heads pass's product of
 * [B, j, H, E] by the transpose of [B, j, Hkv, E]: [B, j, j, H]. */
static bool is_score_product(const rj_graph *g, const node *n) {
    if (n->op == RJ_OP_MATMUL && n->keepdim && n->ival) return true;
    if (n->op != RJ_OP_MATMUL || n->ival || !node_is_pair(g, n)) return false;
    const node *w = &g->nodes[n->in[1]];
    return w->op == RJ_OP_TRANSPOSE && dim_ragged_pos(g, w) == 2;
}

int32_t attention_product(const rj_graph *g, int32_t att, const uint8_t *live) {
    rj_ctx *ctx = g->ctx;
    size_t nb = (size_t)(g->n ? g->n : 1);
    uint8_t *in = mem_zalloc(ctx, nb); /* 1: F's expression (inline); 2: also depends on the product */
    if (!in) return -2;
    int32_t prod = -1, f = g->nodes[att].in[0];
    bool ok = true;
    /* F's inline expression, by id from F down (operands have smaller ids) */
    if (is_score_product(g, &g->nodes[f])) prod = f;
    else if (walks_through(&g->nodes[f])) in[f] = 1;
    for (int32_t i = f; i >= 0 && ok; i--) {
        if (in[i] != 1) continue;
        const node *n = &g->nodes[i];
        for (int k = 0; k < n->nin; k++) {
            int32_t o = n->in[k];
            if (is_score_product(g, &g->nodes[o])) {
                ok = prod < 0 || prod == o; /* exactly one product */
                prod = o;
            } else if (walks_through(&g->nodes[o])) {
                in[o] = 1;
            }
        }
    }
    if (prod < 0) ok = false;
    for (int32_t i = prod + 1; ok && i <= f; i++) { /* what depends on the product */
        const node *n = &g->nodes[i];
        for (int k = 0; in[i] && k < n->nin; k++)
            if (n->in[k] == prod || in[n->in[k]] == 2) in[i] = 2;
        /* the kernel binds the product's element at its own (i, j): only elementwise ops may lie
         * between them, never a view that reads it elsewhere ((q @ kᵀ).transpose(-2, -1)) */
        op_kind k = op_table[n->op].kind;
        if (in[i] == 2 && !(k == KIND_UNARY || k == KIND_BINARY || k == KIND_COMPARE || k == KIND_SELECT ||
                            k == KIND_CAST))
            ok = false;
    }
    /* the product and everything computed from it: read by F's expression and the attention
     * only, and no output */
    for (int32_t i = 0; ok && i < g->noutputs; i++) {
        int32_t o = g->outputs[i].node;
        ok = o != prod && in[o] != 2;
    }
    for (int32_t i = prod + 1; ok && i < g->n; i++) {
        const node *n = &g->nodes[i];
        if ((live && !live[i]) || i == att || in[i]) continue;
        for (int k = 0; k < n->nin && ok; k++) ok = n->in[k] != prod && in[n->in[k]] != 2;
    }
    mem_free(ctx, in, nb);
    return ok ? prod : -1;
}

/* The scores F of matmul(softmax(F, dim=-1), v) at node i, or -1. */
static int32_t softmax_scores(const rj_graph *g, int32_t i, const int32_t *users) {
    const node *n = &g->nodes[i];
    if (n->op != RJ_OP_MATMUL || n->ival) return -1;
    const node *p = &g->nodes[n->in[0]], *v = &g->nodes[n->in[1]];
    int r = n->keepdim ? 4 : 3; /* per head (the heads pass's p v): [B, j, j, H] by [B, j, H, D] */
    if (p->op != RJ_OP_SOFTMAX || p->axis != 2 || p->rank != r || !node_is_pair(g, p)) return -1;
    if (!dtype_is_float(g->nodes[p->in[0]].dtype)) return -1; /* softmax of an integer F: f32 */
    if (users[n->in[0]] != 1 || v->rank != r || dim_ragged_pos(g, v) != 1 || node_is_pair(g, v)) return -1;
    return p->in[0];
}

rj_status pass_find_attention(rj_graph *g) {
    rj_ctx *ctx = g->ctx;
    size_t nb = (size_t)(g->n ? g->n : 1);
    uint8_t *live = mem_alloc(ctx, nb);
    int32_t *users = mem_zalloc(ctx, nb * sizeof(int32_t));
    if (!live || !users) {
        mem_free(ctx, live, nb);
        mem_free(ctx, users, nb * sizeof(int32_t));
        return ctx_fail(ctx, RJ_ERR_NOMEM, "find_attention: out of memory");
    }
    graph_live(g, live);
    for (int32_t i = 0; i < g->n; i++)
        for (int k = 0; live[i] && k < g->nodes[i].nin; k++) users[g->nodes[i].in[k]]++;
    for (int32_t i = 0; i < g->noutputs; i++) users[g->outputs[i].node]++;
    bool oom = false;
    for (int32_t i = 0; i < g->n && !oom; i++) {
        int32_t f = live[i] ? softmax_scores(g, i, users) : -1;
        if (f < 0) continue;
        node *n = &g->nodes[i];
        node keep = *n;
        int32_t p = n->in[0];
        n->op = RJ_OP_ATTENTION; /* tentatively: the softmax is dead if it holds */
        n->in[0] = f;
        n->ival = 0;
        live[p] = 0;
        /* the product of the softmax and v was checked: attention's type is the same */
        int32_t pr = attention_product(g, i, live);
        if (pr >= 0) continue;
        *n = keep;
        live[p] = 1;
        oom = pr < -1;
    }
    mem_free(ctx, live, nb);
    mem_free(ctx, users, nb * sizeof(int32_t));
    return oom ? ctx_fail(ctx, RJ_ERR_NOMEM, "find_attention: out of memory") : RJ_OK;
}
