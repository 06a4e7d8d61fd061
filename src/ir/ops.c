/*
 * ops.c — the op table expanded into data, op and dtype names, and dtype promotion.
 *
 * Everything per-op that is data rather than code lives in RJ_OP_TABLE (ragjit.h) and is
 * expanded here once; passes switch on kinds and rules, not on lists of ops they must keep
 * in sync. Promotion follows PyTorch's type categories: bool < integer < floating, the wider
 * type within a category, and literals ("weak" scalars) that only matter when they belong to a
 * higher category than every tensor operand.
 */
#include <math.h>
#include <string.h>

#include "ir.h"

const op_info op_table[RJ_OP_COUNT] = {
#define X(e, name, kind, rule) [RJ_OP_##e] = {name, KIND_##kind, RULE_##rule},
    RJ_OP_TABLE(X)
#undef X
};

const char *rj_op_name(rj_op op) {
    return (unsigned)op < RJ_OP_COUNT ? op_table[op].name : NULL;
}

rj_op rj_op_from_name(const char *s) {
    if (!s) return RJ_OP_COUNT;
    for (int i = 0; i < RJ_OP_COUNT; i++)
        if (!strcmp(op_table[i].name, s)) return (rj_op)i;
    return RJ_OP_COUNT;
}

const char *rj_dtype_name(rj_dtype t) {
    static const char *const names[] = {"bool", "i32", "i64", "f32", "f64", "f16", "bf16"};
    return (unsigned)t < RJ_DTYPE_COUNT ? names[t] : NULL;
}

size_t rj_dtype_size(rj_dtype t) {
    static const size_t sizes[] = {1, 4, 8, 4, 8, 2, 2};
    return (unsigned)t < RJ_DTYPE_COUNT ? sizes[t] : 0;
}

bool dtype_is_float(rj_dtype t) { return t == RJ_F32 || t == RJ_F64 || dtype_is_half(t); }
bool dtype_is_half(rj_dtype t) { return t == RJ_F16 || t == RJ_BF16; }
rj_dtype dtype_compute(rj_dtype t) { return dtype_is_half(t) ? RJ_F32 : t; }
bool dtype_is_int(rj_dtype t) { return t == RJ_I32 || t == RJ_I64; }

/* Promotion of typed tensors is the larger rank: bool < i32 < i64 < {f16, bf16} < f32 < f64,
 * and the two 16-bit formats, neither of which holds the other, meet at f32 (PyTorch's). */
op_identity_value op_identity(int fn, rj_dtype t, bool partial) {
    bool lowest = fn == RJ_OP_MAXIMUM || fn == RJ_OP_MAX, highest = fn == RJ_OP_MINIMUM || fn == RJ_OP_MIN;
    bool one = fn == RJ_OP_MUL || fn == RJ_OP_PROD;
    op_identity_value v = {.f = one ? 1.0 : partial ? -0.0 : 0.0, .i = one};
    if (lowest || highest) {
        v.f = lowest ? -INFINITY : INFINITY;
        v.i = t == RJ_BOOL ? highest : t == RJ_I32 ? (lowest ? INT32_MIN : INT32_MAX) : (lowest ? INT64_MIN : INT64_MAX);
    }
    return v;
}

static int promote_rank(rj_dtype t) {
    static const int rank[RJ_DTYPE_COUNT] = {[RJ_BOOL] = 0, [RJ_I32] = 1, [RJ_I64] = 2, [RJ_F16] = 3,
                                             [RJ_BF16] = 3, [RJ_F32] = 4, [RJ_F64] = 5};
    return (unsigned)t < RJ_DTYPE_COUNT ? rank[t] : 0;
}

rj_dtype dtype_promote(rj_dtype a, rj_dtype b) {
    if (a != b && dtype_is_half(a) && dtype_is_half(b)) return RJ_F32;
    return promote_rank(a) >= promote_rank(b) ? a : b;
}

static int category(rj_dtype t) {
    return t == RJ_BOOL ? WEAK_BOOL : dtype_is_int(t) ? WEAK_INT : WEAK_FLOAT;
}

/* Result of promoting the operands of n (inputs 0..nin-1, skipping a where-condition). */
static rj_dtype promote_operands(const rj_graph *g, const node *n, int first) {
    int have_typed = 0;
    rj_dtype typed = RJ_BOOL;
    int weak_cat = WEAK_NONE;
    for (int i = first; i < n->nin; i++) {
        const node *a = &g->nodes[n->in[i]];
        if (a->weak) {
            if (a->weak > weak_cat) weak_cat = a->weak;
        } else {
            typed = have_typed ? dtype_promote(typed, a->dtype) : a->dtype;
            have_typed = 1;
        }
    }
    if (!have_typed) {
        /* only literals: the default dtype of the highest category */
        return weak_cat == WEAK_FLOAT ? RJ_F32 : weak_cat == WEAK_INT ? RJ_I64 : RJ_BOOL;
    }
    if (weak_cat > category(typed)) return weak_cat == WEAK_FLOAT ? RJ_F32 : RJ_I64;
    return typed;
}

rj_dtype node_compute_dtype(const rj_graph *g, const node *n) {
    const op_info *oi = &op_table[n->op];
    switch (oi->kind) {
    case KIND_UNARY:
    case KIND_BINARY:
    case KIND_COMPARE: {
        rj_dtype t = promote_operands(g, n, 0);
        if (oi->rule == RULE_FLOAT && !dtype_is_float(t)) t = RJ_F32;
        if (n->op == RJ_OP_LOGICAL_NOT || n->op == RJ_OP_LOGICAL_AND ||
            n->op == RJ_OP_LOGICAL_OR)
            t = g->nodes[n->in[0]].dtype; /* truthiness is read per operand */
        return t;
    }
    case KIND_SELECT:
        return n->op == RJ_OP_WHERE ? promote_operands(g, n, 1) : g->nodes[n->in[0]].dtype;
    case KIND_CAST:
        return g->nodes[n->in[0]].dtype;
    default:
        return n->dtype;
    }
}
