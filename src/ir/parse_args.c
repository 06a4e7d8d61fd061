/*
 * parse_args.c — what the functions of the text format share: attributes read as numbers and
 * flags, lists of dims, nodes built under a function's name (so that an error names clamp, not
 * maximum), and reductions over several dims (a mean over the batch and ragged dims of a jagged
 * tensor is over every row, not the items' means averaged).
 */
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "parse.h"

/* The literal value of a scalar node, for attributes given as numbers. */
bool literal(parser *P, const value *v, double *out) {
    const node *n = v->node >= 0 ? graph_node(P->g, v->node) : NULL;
    if (!n || n->op != RJ_OP_SCALAR) {
        fail_at(P, &v->at, RJ_ERR_PARSE, "expected a number");
        return false;
    }
    *out = n->weak == WEAK_FLOAT ? n->fval : (double)n->ival;
    return true;
}

/* An integer literal that a double cannot hold (|v| > 2^53, not a multiple of its spacing):
 * attributes taken as doubles (pad's value) would round it. */
bool inexact_int(parser *P, const value *v) {
    const node *n = v->node >= 0 ? graph_node(P->g, v->node) : NULL;
    if (!n || n->op != RJ_OP_SCALAR || n->weak != WEAK_INT) return false;
    double d = (double)n->ival;
    return d >= 9223372036854775808.0 || (int64_t)d != n->ival;
}

bool bool_arg(parser *P, const char *fname, const char *arg, const value *v, bool *out) {
    const node *n = scalar_of(P, v);
    if (!n || n->weak != WEAK_BOOL) {
        fail_at(P, &v->at, RJ_ERR_PARSE, "%s: %s must be True or False", fname, arg);
        return false;
    }
    *out = n->ival != 0;
    return true;
}

/* n, reporting at t if the builder failed, the message's op named `as` where it is not NULL:
 * the functions built of other ops (clamp, logsumexp...) name themselves, not their parts. */
rj_node built_as(parser *P, const token *t, const char *as, rj_node n) {
    if (n != RJ_NONE || P->failed || !as) return built(P, n, t);
    const char *m = ctx_last_error(P->ctx), *colon = strstr(m, ": ");
    size_t k = colon ? (size_t)(colon - m) : 0;
    for (size_t i = 0; i < k; i++)
        if (!is_ident_char(m[i])) k = 0;
    char msg[768];
    snprintf(msg, sizeof msg, "%s: %s", as, k ? colon + 2 : m);
    fail_at(P, t, rj_graph_status(P->g) ? rj_graph_status(P->g) : ctx_last_status(P->ctx), "%s", msg);
    return RJ_NONE;
}

/* The dims `t` names for a tensor of `rank` dims, normalised and in decreasing order: a tuple
 * (1, 2), or (any) an integer literal. Returns their number, 0 after reporting. */
int dim_list(parser *P, const char *name, const value *t, int rank, int dims[RJ_MAX_RANK]) {
    if (!t->is_tuple) {
        int64_t d;
        if (!int_arg(P, name, "dim", t, INT_MIN, INT_MAX, &d)) return 0;
        if (d < -rank || d >= rank) {
            fail_at(P, &t->at, RJ_ERR_SHAPE, "%s: dim %lld is out of range for a tensor of %d dims", name,
                    (long long)d, rank);
            return 0;
        }
        dims[0] = (int)(d < 0 ? d + rank : d);
        return 1;
    }
    if (t->ndims == 0) {
        fail_at(P, &t->at, RJ_ERR_PARSE, "%s: dim=() names no dim (name the dims to reduce)", name);
        return 0;
    }
    int n = 0;
    for (int i = 0; i < t->ndims; i++) {
        int64_t d = t->dims[i];
        if (t->tuple_syms >> i & 1) {
            fail_at(P, &t->at, RJ_ERR_PARSE, "%s: the dims must be integers", name);
            return 0;
        }
        if (d < -rank || d >= rank) {
            fail_at(P, &t->at, RJ_ERR_SHAPE, "%s: dim %lld is out of range for a tensor of %d dims", name,
                    (long long)d, rank);
            return 0;
        }
        int k = (int)(d < 0 ? d + rank : d), at = n;
        while (at > 0 && dims[at - 1] < k) at--; /* kept in decreasing order */
        if (at > 0 && dims[at - 1] == k) {
            fail_at(P, &t->at, RJ_ERR_SHAPE, "%s: dim %d appears multiple times in the list of dims", name, k);
            return 0;
        }
        memmove(dims + at + 1, dims + at, sizeof(int) * (size_t)(n - at));
        dims[at] = k;
        n++;
    }
    return n;
}

/* x reduced by op over dims[0..n) (decreasing: with keepdim=False the dims still to reduce
 * keep their numbers); RJ_NONE after reporting at fn (as `as`: built_as). */
rj_node reduce_over(parser *P, const token *fn, const char *as, rj_op op, rj_node x, const int *dims, int n,
                           bool keep) {
    for (int i = 0; i < n && !P->failed; i++) x = built_as(P, fn, as, rj_graph_reduce(P->g, op, x, dims[i], keep));
    return P->failed ? RJ_NONE : x;
}

/* ones of x's shape, ragged dims included (a literal tensor is dense): x == x or x != x of a
 * float (true for NaN too), x * 0 + 1 of an integer and x or not x of a bool, which no C
 * compiler warns of as a comparison of a value with itself (OpenCL's prints the warning) */
rj_node ones_like(rj_graph *g, rj_node x, rj_dtype t) {
    rj_dtype xt = rj_node_dtype(g, x);
    rj_node one = dtype_is_float(xt) ? rj_graph_binary(g, RJ_OP_LOGICAL_OR, rj_graph_binary(g, RJ_OP_EQ, x, x),
                                                       rj_graph_binary(g, RJ_OP_NE, x, x))
                : xt == RJ_BOOL ? rj_graph_binary(g, RJ_OP_LOGICAL_OR, x, rj_graph_unary(g, RJ_OP_LOGICAL_NOT, x))
                                : rj_graph_binary(g, RJ_OP_ADD, rj_graph_binary(g, RJ_OP_MUL, x, rj_graph_scalar_int(g, 0)),
                                                  rj_graph_scalar_int(g, 1));
    return rj_graph_cast(g, one, t);
}

/* mean over dims: nested means, the last dim first, wherever each reduced row holds as many
 * elements as the others; but a mean over the batch dim of a jagged tensor (dim=(0, 1), or
 * every dim) is over every element of every item, not the mean of the items' means: there it
 * is sum / count, in f64 for f64 and else f32 (the callers widen 16-bit inputs first, to round
 * once over all the dims). */
rj_node mean_over(parser *P, const token *fn, const char *as, rj_node x, const int *dims, int n, bool keep) {
    bool batch = false;
    for (int i = 0; i < n; i++) batch |= dims[i] == 0;
    if (!batch || !node_is_jagged(P->g, &P->g->nodes[x])) return reduce_over(P, fn, as, RJ_OP_MEAN, x, dims, n, keep);
    rj_graph *g = P->g;
    rj_dtype t = rj_node_dtype(g, x), w = t == RJ_F64 ? RJ_F64 : RJ_F32;
    rj_node xw = t == w ? x : built_as(P, fn, as, rj_graph_cast(g, x, w));
    rj_node s = P->failed ? RJ_NONE : reduce_over(P, fn, as, RJ_OP_SUM, xw, dims, n, keep);
    rj_node cnt = P->failed ? RJ_NONE : reduce_over(P, fn, as, RJ_OP_SUM, built_as(P, fn, as, ones_like(g, x, w)), dims, n, keep);
    if (P->failed) return RJ_NONE;
    rj_node m = built_as(P, fn, as, rj_graph_binary(g, RJ_OP_DIV, s, cnt));
    return P->failed ? RJ_NONE : m;
}
