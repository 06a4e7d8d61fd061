/*
 * canon.c — canonicalisation: dead code and duplicates out, trivial identities folded.
 *
 * The rewriter already removes nodes no output depends on and merges structurally equal
 * nodes. On top of that this pass folds identities that are exact in IEEE arithmetic and
 * leave the dtype and shape unchanged: cast to the same dtype, x * 1, x / 1, x - 0,
 * neg(neg(x)), logical_not(logical_not(b)), and unpad(pad(x, v, L), j) when x is already
 * laid out by j. (x + 0 is not folded: -0.0 + 0 is +0.0.)
 *
 * A replacement must have exactly the dims of the node it replaces, symbols included: an
 * output's ragged symbol decides which bound offsets lay it out in memory.
 */
#include <string.h>

#include "passes.h"
#include "rewrite.h"

static bool is_weak(const rj_graph *g, int32_t id, double v) {
    const node *n = &g->nodes[id];
    return n->op == RJ_OP_SCALAR && n->weak && (n->weak == WEAK_FLOAT ? n->fval : (double)n->ival) == v;
}

static bool same_type(const node *a, const node *b) {
    return a->dtype == b->dtype && a->rank == b->rank &&
           !memcmp(a->dims, b->dims, sizeof(rj_dim) * a->rank);
}

/* The new id n simplifies to, or -1. n is inferred (its type is known). */
static int32_t simplify(const rj_graph *o, const node *n) {
    const node *a = n->nin > 0 ? &o->nodes[n->in[0]] : NULL;
    const node *b = n->nin > 1 ? &o->nodes[n->in[1]] : NULL;
    int32_t cand = -1;
    switch (n->op) {
    case RJ_OP_CAST: cand = n->in[0]; break;
    case RJ_OP_MUL:
        if (is_weak(o, n->in[1], 1)) cand = n->in[0];
        else if (is_weak(o, n->in[0], 1)) cand = n->in[1];
        break;
    case RJ_OP_DIV:
        if (is_weak(o, n->in[1], 1)) cand = n->in[0];
        break;
    case RJ_OP_SUB:
        if (is_weak(o, n->in[1], 0)) cand = n->in[0];
        break;
    case RJ_OP_NEG:
    case RJ_OP_LOGICAL_NOT:
        if (a->op == n->op) cand = a->in[0];
        break;
    case RJ_OP_UNPAD:
        if (a->op == RJ_OP_PAD) cand = a->in[0];
        break;
    default: break;
    }
    RJ_UNUSED(b);
    /* never a literal: `2 * 1` stays a computed value, so it can be an output (a literal
     * cannot) on every target, as it is on the interpreter */
    return cand >= 0 && o->nodes[cand].op != RJ_OP_SCALAR && same_type(&o->nodes[cand], n) ? cand : -1;
}

rj_status pass_canonicalize(rj_graph *g) {
    rewriter rw;
    rj_status s = rw_begin(&rw, g);
    if (s) return s;
    uint8_t *live = mem_alloc(g->ctx, (size_t)(g->n ? g->n : 1));
    if (!live) {
        rw_abort(&rw);
        return RJ_ERR_NOMEM;
    }
    rw_live(g, live);
    for (int32_t i = 0; i < g->n; i++) {
        if (!live[i] || rw.map[i] >= 0) continue;
        node n = g->nodes[i];
        n.name = NULL;
        for (int k = 0; k < n.nin; k++) n.in[k] = rw.map[n.in[k]];
        int32_t id = -1;
        if (infer_node(rw.out, &n) == RJ_OK) id = simplify(rw.out, &n);
        if (id < 0 && (id = rw_add(&rw, &n)) >= 0) rw_label(&rw, id, g->nodes[i].name);
        if ((rw.map[i] = id) < 0) {
            mem_free(g->ctx, live, (size_t)(g->n ? g->n : 1));
            s = rw.out->status ? rw.out->status : RJ_ERR_NOMEM;
            rw_abort(&rw);
            return s;
        }
    }
    mem_free(g->ctx, live, (size_t)(g->n ? g->n : 1));
    return rw_finish(&rw);
}
