/*
 * verify.c — the verifier: checks the invariants every pass relies on.
 *
 * Operands precede their users (the array is a topological order), each op has the operand
 * count its kind requires, and re-inferring every node reproduces the dtype and shape it
 * carries. It runs on graphs received from users and, in debug builds, after every pass, so
 * a pass that breaks the IR is caught where it did so rather than in generated code.
 */
#include <string.h>

#include "ir.h"

static int arity_ok(const node *n) {
    switch (op_table[n->op].kind) {
    case KIND_LEAF: return n->nin == 0;
    case KIND_UNARY:
    case KIND_CAST:
    case KIND_REDUCE:
    case KIND_SOFTMAX:
    case KIND_PAD: return n->nin == 1;
    case KIND_BINARY:
    case KIND_COMPARE: return n->nin == 2;
    case KIND_SELECT: return n->nin == (n->op == RJ_OP_WHERE ? 3 : 2);
    case KIND_NORM: return n->nin >= 1 && n->nin <= 3;
    case KIND_INDEX: return n->nin == (op_is_generator(n->op) ? 0 : 2);
    case KIND_VIEW: return n->nin == (n->op == RJ_OP_CAT ? 2 : 1);
    case KIND_MATMUL:
    case KIND_ATTENTION: return n->nin == 2;
    }
    return 0;
}

rj_status verify_graph(rj_graph *g) {
    rj_ctx *ctx = g->ctx;
    if (g->status != RJ_OK)
        return ctx_fail(ctx, g->status, "%s", g->first_err[0] ? g->first_err : "graph failed");
    for (int32_t i = 0; i < g->n; i++) {
        node *n = &g->nodes[i];
        if ((unsigned)n->op >= RJ_OP_COUNT)
            return ctx_fail(ctx, RJ_ERR_INTERNAL, "verify: node %d has invalid op %d", i, n->op);
        if (!arity_ok(n))
            return ctx_fail(ctx, RJ_ERR_INTERNAL, "verify: node %d (%s) has %d operands", i,
                            op_table[n->op].name, n->nin);
        for (int k = 0; k < n->nin; k++)
            if (n->in[k] < 0 || n->in[k] >= i)
                return ctx_fail(ctx, RJ_ERR_INTERNAL, "verify: node %d (%s) operand %d is %d",
                                i, op_table[n->op].name, k, n->in[k]);
        node copy = *n;
        int saved_axis = copy.axis;
        rj_status s = infer_node(g, &copy);
        if (s) return s;
        if (copy.dtype != n->dtype || copy.rank != n->rank || copy.axis != saved_axis ||
            memcmp(copy.dims, n->dims, sizeof(rj_dim) * n->rank))
            return ctx_fail(ctx, RJ_ERR_INTERNAL, "verify: node %d (%s) does not have the type "
                            "its operands imply", i, op_table[n->op].name);
    }
    for (int32_t i = 0; i < g->noutputs; i++)
        if (g->outputs[i].node < 0 || g->outputs[i].node >= g->n)
            return ctx_fail(ctx, RJ_ERR_INTERNAL, "verify: output %d is node %d", i,
                            g->outputs[i].node);
    return RJ_OK;
}
