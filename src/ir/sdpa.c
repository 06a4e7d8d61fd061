/*
 * sdpa.c — scaled_dot_product_attention, PyTorch's F.scaled_dot_product_attention, built of
 * the graph's own ops.
 *
 * It is the attention pattern by name: the scores q @ kᵀ, times the scale, masked (a bool mask
 * through where(mask, s, -inf), a float mask added, is_causal as positions compared), then
 * attention(s, v, safe=true). Nothing else reads the scores, so fusion computes the product
 * inside the attention's kernel (attention.c) and one online-softmax kernel serves this and the
 * pattern the compiler finds alike. The safe flag is PyTorch's current semantics: a row whose
 * keys are all masked gives 0 (at::_safe_softmax), where softmax written out gives NaN.
 *
 * Only the public builder calls are used, so every shape and dtype error is the one those ops
 * give, and the messages of this file are about what is SDPA's own: is_causal with a mask, the
 * mask's dtype, a default scale that needs a constant head dim.
 */
#include <math.h>

#include "ir.h"

static rj_node fail(rj_graph *g, rj_status s, const char *msg, const node *n) {
    sbuf b;
    sbuf_init(&b, g->ctx);
    if (n) print_node_type(&b, g, n);
    graph_fail(g, s, "scaled_dot_product_attention: %s%s", msg, b.s ? b.s : "");
    sbuf_free(&b);
    return RJ_NONE;
}

/* q @ kᵀ; with gqa (per head, enable_gqa) the key's heads may divide the query's: query head h
 * reads key head h / (H / Hkv), which the product is told by axis = 1 (infer.c, head_matmul). */
static rj_node product(rj_graph *g, rj_node q, rj_node kt, bool gqa) {
    if (!gqa || kt == RJ_NONE) return rj_graph_matmul(g, q, kt);
    node n = {.op = RJ_OP_MATMUL, .nin = 2, .in = {q, kt, -1}, .axis = 1, .loc = g->cur_loc};
    if (infer_node(g, &n) != RJ_OK) return RJ_NONE;
    int32_t id = graph_add_node(g, &n);
    return id < 0 ? (graph_keep_error(g, RJ_ERR_NOMEM), RJ_NONE) : id;
}

rj_node rj_graph_sdpa(rj_graph *g, rj_node q, rj_node k, rj_node v, rj_node attn_mask, bool is_causal,
                      double scale, bool enable_gqa) {
    if (!g) return RJ_NONE;
    const node *qn = graph_node(g, q), *kn = graph_node(g, k), *vn = graph_node(g, v);
    const node *mn = attn_mask == RJ_NONE ? NULL : graph_node(g, attn_mask);
    if (!qn || !kn || !vn || (attn_mask != RJ_NONE && !mn)) {
        if (g->status != RJ_OK) return RJ_NONE;
        return fail(g, RJ_ERR_GRAPH, "an operand is not a node of this graph", NULL);
    }
    if (is_causal && mn)
        return fail(g, RJ_ERR_ARG, "Explicit attn_mask should not be set when is_causal=True (PyTorch's rule)", NULL);
    bool heads = node_is_headed(g, qn) && dim_ragged_pos(g, qn) == 2 && !node_stores_pair(g, qn);
    if (!heads && (qn->rank != 3 || dim_ragged_pos(g, qn) != 1 || node_is_pair(g, qn)))
        return fail(g, RJ_ERR_UNSUPPORTED, "this version takes jagged query, key and value [B, j1, E], or per head "
                    "[B, H, j1, E]; the query is ", qn);
    if (heads && (!node_is_headed(g, kn) || kn->rank != 4 || !dim_equal(g, kn->dims[1], vn->dims[1])))
        return fail(g, RJ_ERR_SHAPE, "per head, key and value are [B, Hkv, j2, E] and [B, Hkv, j2, Dv] with one "
                    "Hkv; the key is ", kn);
    if (heads && !enable_gqa && !dim_equal(g, kn->dims[1], qn->dims[1]))
        return fail(g, RJ_ERR_SHAPE, "the key's heads differ from the query's (enable_gqa=True lets Hkv divide H); "
                    "the key is ", kn);
    if (mn && mn->dtype != RJ_BOOL && !dtype_is_float(mn->dtype))
        return fail(g, RJ_ERR_DTYPE, "attn_mask must be bool (True: takes part) or float (added to the scores), "
                    "not ", mn);
    /* nodes move as the graph grows: what is read of them below, read now */
    rj_dim e = qn->dims[qn->rank - 1], rows = qn->dims[heads ? 2 : 1], cols = kn->dims[heads ? 2 : 1];
    int mask = !mn ? 0 : mn->dtype == RJ_BOOL ? 1 : 2;
    if (isnan(scale)) {
        if (e <= 0)
            return fail(g, RJ_ERR_ARG, "scale=None is 1/sqrt(E), which needs a constant head dim E: pass scale "
                        "for the query ", qn);
        scale = 1.0 / sqrt((double)e);
    }
    rj_node s = product(g, q, rj_graph_transpose(g, k, -2, -1), heads && enable_gqa);
    s = rj_graph_binary(g, RJ_OP_MUL, s, rj_graph_scalar(g, scale));
    if (is_causal) { /* query i sees keys j <= i (top-left, PyTorch's ones(L, S).tril(0), also when the
                      * keys are of another class: cross attention, L != S) */
        rj_node pi = rj_graph_positions(g, rows), pj = dim_equal(g, rows, cols) ? pi : rj_graph_positions(g, cols);
        rj_node keep = rj_graph_binary(g, RJ_OP_GE, rj_graph_unsqueeze(g, pi, 2), rj_graph_unsqueeze(g, pj, 1));
        if (heads) keep = rj_graph_unsqueeze(g, keep, 1); /* [B, 1, j1, j2]: every head */
        s = rj_graph_where(g, keep, s, rj_graph_scalar(g, -INFINITY));
    } else if (mask == 1) {
        s = rj_graph_where(g, attn_mask, s, rj_graph_scalar(g, -INFINITY));
    } else if (mask == 2) {
        s = rj_graph_binary(g, RJ_OP_ADD, s, attn_mask);
    }
    return rj_graph_attention(g, s, v, true);
}
