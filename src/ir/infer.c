/*
 * infer.c — shape and dtype inference, and the checks that make a graph well-formed.
 *
 * Every node is inferred when it is built, so an ill-formed graph is rejected at the call
 * that made it, with a message naming the op and the shapes involved:
 *
 *     add: f32[B, j1, 128] and f32[B, j2, 128] differ in dim 1 (ragged j1 vs j2)
 *
 * The rules, all of them in this file:
 *   - Broadcasting aligns trailing dims (NumPy). Two dims combine when they are equal
 *     (same constant, same dense symbol, same ragged class) or one is the constant 1; a
 *     dense size never matches a ragged symbol, so a dense tensor only crosses a ragged dim
 *     through pad/unpad.
 *   - A ragged dim must directly follow its parent dim. This version supports one ragged dim
 *     per tensor, at position 1 (after the batch dim); the representation itself allows more
 *     (several ragged dims, nested symbols), which later versions will accept here.
 *   - Dtypes follow the op table's rule (see ops.c for promotion).
 *   - The constant dims of any shape multiply to at most 2^48 elements (check_const_numel).
 * The verifier re-runs this inference over a whole graph to check a pass's output.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ir.h"

/* A shape as text for a message; short enough for a stack buffer. */
typedef struct tybuf {
    char s[256];
} tybuf;

static tybuf type_text(const rj_graph *g, const node *n) {
    tybuf t = {{0}};
    sbuf b;
    sbuf_init(&b, g->ctx);
    print_node_type(&b, g, n);
    if (b.s) snprintf(t.s, sizeof t.s, "%s", b.s);
    else snprintf(t.s, sizeof t.s, "?");
    sbuf_free(&b);
    return t;
}

static void dim_text(const rj_graph *g, rj_dim d, char *out, size_t n) {
    const sym *s = graph_sym(g, d);
    if (!s) snprintf(out, n, "%lld", (long long)d);
    else snprintf(out, n, "%s%s", s->kind == SYM_RAGGED ? "ragged " : "", s->name);
}

static const node *in(const rj_graph *g, const node *n, int i);

static rj_status fail_dims(rj_graph *g, const char *op, const node *a, const node *b, int k,
                           rj_dim da, rj_dim db) {
    char x[160], y[160];
    dim_text(g, da, x, sizeof x);
    const sym *sa = graph_sym(g, da), *sb = graph_sym(g, db);
    if (sa && sb && sa->kind == SYM_RAGGED && sb->kind == SYM_RAGGED)
        snprintf(y, sizeof y, "%s", sb->name);
    else
        dim_text(g, db, y, sizeof y);
    /* what the user most likely meant */
    char hint[1200] = "";
    const node *pre = NULL, *whole = NULL; /* [B, j1] against [B, j1, D]: a prefix, not a suffix */
    if (b->rank == a->rank - 1) pre = b, whole = a;
    if (a->rank == b->rank - 1) pre = a, whole = b;
    for (int d = 0; pre && d < pre->rank; d++)
        if (!dim_equal(g, pre->dims[d], whole->dims[d])) pre = NULL;
    const sym *rag = sa && sa->kind == SYM_RAGGED ? sa : sb && sb->kind == SYM_RAGGED ? sb : NULL;
    const sym *dense = rag == sa ? sb : sa;
    if (sa && sb && sa->kind == SYM_RAGGED && sb->kind == SYM_RAGGED && sa->parent == sb->parent) {
        snprintf(hint, sizeof hint, "; if their items have equal lengths, declare `same %s %s`", sa->name, sb->name);
    } else if (rag && dense && dense->kind == SYM_DENSE && a->rank == b->rank && dense != &g->syms[rag->parent]) {
        /* a name never declared ragged became a dense size where it was first used */
        snprintf(hint, sizeof hint, "; %s is a dense size (a name is one unless declared ragged): if its length varies "
                 "by item, declare `ragged %s : %s` before its first use", dense->name, dense->name,
                 g->syms[rag->parent].name);
    } else if (pre && pre->rank >= 1) {
        /* broadcasting aligns trailing dims; PyTorch users write mask.unsqueeze(-1) for this.
         * Named after the nearest named value through elementwise unary ops (~mask). */
        const node *named = pre;
        while (!named->name && op_table[named->op].kind == KIND_UNARY && named->nin == 1) named = in(g, named, 0);
        node one = *pre; /* the same tensor with a trailing 1 */
        one.rank = pre->rank + 1;
        one.dims[pre->rank] = 1;
        snprintf(hint, sizeof hint, "; dims are matched from the last: to apply %s along the leading dims of %s, write "
                 "%.100s%s.unsqueeze(-1) (%s)", type_text(g, pre).s, type_text(g, whole).s, named->name ? named->name : "",
                 named->name ? "" : "(...)", type_text(g, &one).s);
    } else {
        const node *jag = NULL, *per = NULL; /* [B, j, ...] against a per-item [B, ...] */
        if (dim_ragged_pos(g, a) == 1 && b->rank == a->rank - 1) jag = a, per = b;
        if (dim_ragged_pos(g, b) == 1 && a->rank == b->rank - 1) jag = b, per = a;
        if (jag && per->rank >= 1 && dim_equal(g, per->dims[0], jag->dims[0])) {
            node one = *per; /* the same tensor with a 1 after the batch dim */
            one.rank = per->rank + 1;
            one.dims[1] = 1;
            for (int d = 1; d < per->rank; d++) one.dims[d + 1] = per->dims[d];
            snprintf(hint, sizeof hint, "; a per-item tensor broadcasts over an item's rows as %s (keepdim=True, "
                     "or declare it so)", type_text(g, &one).s);
        }
    }
    return graph_fail(g, RJ_ERR_SHAPE, "%s: %s and %s differ in dim %d (%s vs %s)%s", op,
                      type_text(g, a).s, type_text(g, b).s, k, x, y, hint);
}

static bool dim_is_one(rj_dim d) { return d == 1; }

/* Broadcast the shape in *out (rank *rank) with operand b; out starts as operand a. */
static rj_status broadcast(rj_graph *g, const char *op, const node *a, const node *b,
                           int *rank, rj_dim *out) {
    int ra = *rank, rb = b->rank, r = ra > rb ? ra : rb;
    rj_dim res[RJ_MAX_RANK];
    for (int k = 0; k < r; k++) {
        int ka = k - (r - ra), kb = k - (r - rb);
        rj_dim da = ka >= 0 ? out[ka] : 1, db = kb >= 0 ? b->dims[kb] : 1;
        if (dim_equal(g, da, db) || dim_is_one(db)) res[k] = da;
        else if (dim_is_one(da)) res[k] = db;
        else return fail_dims(g, op, a, b, k, da, db);
    }
    memcpy(out, res, sizeof(rj_dim) * (size_t)r);
    *rank = r;
    return RJ_OK;
}

/* A shape is supported when each ragged dim follows its parent; today also: at most one
 * ragged dim, at position 1. */
static rj_status check_ragged_layout(rj_graph *g, const char *what, const node *n) {
    if (node_is_headed(g, n)) return RJ_OK; /* [B, H, j, D], [B, H, D, j], [B, H, j, j] */
    int count = 0;
    for (int k = 0; k < n->rank; k++) {
        const sym *s = graph_sym(g, n->dims[k]);
        if (!s || s->kind != SYM_RAGGED) continue;
        count++;
        if (k == 2 && count == 2 && node_is_pair(g, n)) continue; /* [B, j1, j1]: both vary over B */
        if (k == 2 && count == 1 && node_is_column(g, n)) continue; /* [B, 1, j1]: a row of columns */
        bool after_batch = k > 1 && dim_equal(g, n->dims[0], sym_dim(s->parent)); /* [B, H, j]: the next check */
        if (k == 0 || (!after_batch && !dim_equal(g, n->dims[k - 1], sym_dim(s->parent))))
            return graph_fail(g, RJ_ERR_SHAPE, "%s: %s: ragged %s must directly follow its "
                              "parent dim %s", what, type_text(g, n).s, s->name,
                              g->syms[s->parent].name);
        if (k != 1)
            return graph_fail(g, RJ_ERR_UNSUPPORTED, "%s: %s: a ragged dim at position %d is "
                              "not supported yet (only dim 1, after the batch dim, and heads: [B, H, j, D] and "
                              "[B, H, j, j])", what,
                              type_text(g, n).s, k);
    }
    if (count > 1 && !(count == 2 && node_is_pair(g, n)))
        return graph_fail(g, RJ_ERR_UNSUPPORTED, "%s: %s: several ragged dims in one tensor are not supported yet "
                          "(but for [B, j1, j1, ...], two of one class: what matmul(q, transpose(k, 1, 2)) makes)",
                          what, type_text(g, n).s);
    return RJ_OK;
}

static const node *in(const rj_graph *g, const node *n, int i) {
    return &g->nodes[n->in[i]];
}

static rj_status infer_input(rj_graph *g, node *n) {
    for (int k = 0; k < n->rank; k++)
        if (n->dims[k] < 0 && graph_sym(g, n->dims[k]) == NULL)
            return graph_fail(g, RJ_ERR_ARG, "input %s: dim %d is invalid", n->name, k);
    return check_ragged_layout(g, "input", n);
}

static rj_status elementwise(rj_graph *g, node *n, const char *op) {
    const node *a = in(g, n, 0);
    int rank = a->rank;
    rj_dim dims[RJ_MAX_RANK];
    memcpy(dims, a->dims, sizeof(rj_dim) * (size_t)rank);
    for (int i = 1; i < n->nin; i++) {
        /* for messages, compare against the running result's type */
        node acc = *a;
        acc.rank = (uint8_t)rank;
        memcpy(acc.dims, dims, sizeof(rj_dim) * (size_t)rank);
        if (i > 1) acc.weak = 0;
        rj_status s = broadcast(g, op, &acc, in(g, n, i), &rank, dims);
        if (s) return s;
    }
    n->rank = (uint8_t)rank;
    memcpy(n->dims, dims, sizeof(rj_dim) * (size_t)rank);
    return check_ragged_layout(g, op, n);
}

/* An integer literal combined with an i32 tensor computes in i32 (a literal never widens a
 * tensor); one that does not fit would wrap silently, so it is refused, as PyTorch refuses
 * it ("value cannot be converted to type int32_t without overflow"). */
static rj_status check_int_literals(rj_graph *g, const node *n, rj_dtype ct, const char *op) {
    if (ct != RJ_I32) return RJ_OK;
    for (int i = 0; i < n->nin; i++) {
        const node *o = in(g, n, i);
        if (o->op == RJ_OP_SCALAR && o->weak == WEAK_INT && (o->ival < INT32_MIN || o->ival > INT32_MAX))
            return graph_fail(g, RJ_ERR_ARG, "%s: the literal %lld cannot be converted to i32 without "
                              "overflow", op, (long long)o->ival);
    }
    return RJ_OK;
}

static rj_status infer_unary(rj_graph *g, node *n, const char *op) {
    const node *x = in(g, n, 0);
    if (op_table[n->op].rule == RULE_SAME && x->dtype == RJ_BOOL && !x->weak)
        return graph_fail(g, RJ_ERR_DTYPE, "%s: %s: not supported for bool%s", op,
                          type_text(g, x).s, n->op == RJ_OP_NEG ? " (use logical_not)" : "");
    n->rank = x->rank;
    memcpy(n->dims, x->dims, sizeof(rj_dim) * x->rank);
    rj_dtype ct = node_compute_dtype(g, n);
    n->dtype = op_table[n->op].rule == RULE_BOOL ? RJ_BOOL : ct;
    return RJ_OK;
}

static rj_status infer_binary(rj_graph *g, node *n, const char *op) {
    rj_status s = elementwise(g, n, op);
    if (s) return s;
    rj_dtype ct = node_compute_dtype(g, n);
    if (ct == RJ_BOOL && (n->op == RJ_OP_SUB || n->op == RJ_OP_POW))
        return graph_fail(g, RJ_ERR_DTYPE, "%s: %s and %s: not supported for bool%s", op,
                          type_text(g, in(g, n, 0)).s, type_text(g, in(g, n, 1)).s,
                          n->op == RJ_OP_SUB ? " (use logical ops)" : "");
    if ((s = check_int_literals(g, n, ct, op))) return s;
    n->dtype = op_table[n->op].rule == RULE_BOOL ? RJ_BOOL : ct;
    return RJ_OK;
}

/* A fill value (pad's, masked_fill's) of an integer tensor must fit its dtype: it is then
 * truncated toward zero, as PyTorch's fill_ does, and every target agrees. A value that does
 * not fit (1e10 in i32, inf, NaN) is refused, as PyTorch refuses it, instead of being
 * converted one way by one target and another way by the next. */
static rj_status check_fill(rj_graph *g, const node *n, const char *op) {
    if (!dtype_is_int(n->dtype)) return RJ_OK;
    double v = trunc(n->fval);
    double lo = n->dtype == RJ_I32 ? -2147483648.0 : -9223372036854775808.0, hi = -lo;
    if (v >= lo && v < hi) return RJ_OK;
    char text[32];
    fmt_double(text, sizeof text, n->fval);
    return graph_fail(g, RJ_ERR_ARG, "%s: value %s cannot be converted to %s without overflow", op,
                      text, rj_dtype_name(n->dtype));
}

static rj_status infer_select(rj_graph *g, node *n, const char *op) {
    const node *c = in(g, n, n->op == RJ_OP_WHERE ? 0 : 1);
    if (c->dtype != RJ_BOOL)
        return graph_fail(g, RJ_ERR_DTYPE, "%s: the %s must be bool, got %s", op,
                          n->op == RJ_OP_WHERE ? "condition" : "mask", type_text(g, c).s);
    rj_status s = elementwise(g, n, op);
    if (s) return s;
    if (n->op == RJ_OP_MASKED_FILL) {
        const node *x = in(g, n, 0);
        bool same = n->rank == x->rank;
        for (int k = 0; same && k < n->rank; k++) same = dim_equal(g, n->dims[k], x->dims[k]);
        if (!same)
            return graph_fail(g, RJ_ERR_SHAPE, "%s: mask %s does not broadcast to %s", op,
                              type_text(g, c).s, type_text(g, x).s);
    }
    n->dtype = node_compute_dtype(g, n);
    return n->op == RJ_OP_MASKED_FILL ? check_fill(g, n, op) : RJ_OK;
}

static rj_status normalise_axis(rj_graph *g, node *n, const node *x, const char *op) {
    int r = x->rank;
    if (r == 0)
        return graph_fail(g, RJ_ERR_SHAPE, "%s: cannot reduce a scalar %s", op, type_text(g, x).s);
    if (n->axis < -r || n->axis >= r)
        return graph_fail(g, RJ_ERR_SHAPE, "%s: dim %d is out of range for %s (rank %d)", op,
                          n->axis, type_text(g, x).s, r);
    if (n->axis < 0) n->axis += r;
    int rp = dim_ragged_pos(g, x);
    if (rp > 0 && n->axis < (node_is_headed(g, x) ? 1 : rp)) /* per head: dim 1 holds the heads */
        return graph_fail(g, RJ_ERR_SHAPE, "%s: cannot reduce over the batch dim %d of the "
                          "jagged tensor %s", op, n->axis, type_text(g, x).s);
    return RJ_OK;
}

static rj_status infer_reduce(rj_graph *g, node *n, const char *op) {
    const node *x = in(g, n, 0);
    rj_status s = normalise_axis(g, n, x, op);
    if (s) return s;
    switch (op_table[n->op].rule) {
    case RULE_SUM: n->dtype = dtype_is_float(x->dtype) ? x->dtype : RJ_I64; break;
    case RULE_FLOAT:
        if (!dtype_is_float(x->dtype))
            return graph_fail(g, RJ_ERR_DTYPE, "%s: %s: expected a float tensor (cast it first)",
                              op, type_text(g, x).s);
        n->dtype = x->dtype;
        break;
    default: n->dtype = x->dtype; break;
    }
    int r = 0;
    for (int k = 0; k < x->rank; k++) {
        if (k == n->axis) {
            if (n->keepdim) n->dims[r++] = 1;
        } else {
            n->dims[r++] = x->dims[k];
        }
    }
    n->rank = (uint8_t)r;
    return check_ragged_layout(g, op, n);
}

static rj_status infer_softmax(rj_graph *g, node *n, const char *op) {
    const node *x = in(g, n, 0);
    rj_status s = normalise_axis(g, n, x, op);
    if (s) return s;
    n->dtype = dtype_is_float(x->dtype) ? x->dtype : RJ_F32;
    n->rank = x->rank;
    memcpy(n->dims, x->dims, sizeof(rj_dim) * x->rank);
    return RJ_OK;
}

static rj_status infer_norm(rj_graph *g, node *n, const char *op) {
    const node *x = in(g, n, 0);
    int k = n->axis;
    if (k < 1 || k > x->rank)
        return graph_fail(g, RJ_ERR_SHAPE, "%s: normalized_shape has %d dims but %s has rank %d",
                          op, k, type_text(g, x).s, x->rank);
    for (int d = x->rank - k; d < x->rank; d++) {
        const sym *sy = graph_sym(g, x->dims[d]);
        if (sy && sy->kind == SYM_RAGGED)
            return graph_fail(g, RJ_ERR_SHAPE, "%s: cannot normalise over the ragged dim %d of "
                              "%s (normalized dims must be dense)", op, d, type_text(g, x).s);
    }
    if (!dtype_is_float(x->dtype))
        return graph_fail(g, RJ_ERR_DTYPE, "%s: %s: expected a float tensor (cast it first)", op,
                          type_text(g, x).s);
    rj_dtype t = x->dtype;
    static const char *const role[] = {"input", "weight", "bias"};
    for (int i = 1; i < n->nin; i++) {
        const node *w = in(g, n, i);
        bool ok = w->rank == k;
        for (int d = 0; ok && d < k; d++) ok = dim_equal(g, w->dims[d], x->dims[x->rank - k + d]);
        if (!ok) {
            node tail = *x;
            tail.rank = (uint8_t)k;
            memmove(tail.dims, x->dims + x->rank - k, sizeof(rj_dim) * (size_t)k);
            tail.weak = 0;
            return graph_fail(g, RJ_ERR_SHAPE, "%s: %s %s must have the normalized shape %s",
                              op, role[i], type_text(g, w).s, type_text(g, &tail).s);
        }
        if (!dtype_is_float(w->dtype))
            return graph_fail(g, RJ_ERR_DTYPE, "%s: %s %s must be a float tensor", op, role[i],
                              type_text(g, w).s);
        t = dtype_promote(t, w->dtype);
    }
    n->dtype = t;
    n->rank = x->rank;
    memcpy(n->dims, x->dims, sizeof(rj_dim) * x->rank);
    return RJ_OK;
}

static rj_status infer_pad(rj_graph *g, node *n, const char *op) {
    const node *x = in(g, n, 0);
    n->dtype = x->dtype;
    n->rank = x->rank;
    memcpy(n->dims, x->dims, sizeof(rj_dim) * x->rank);
    if (n->op == RJ_OP_PAD) {
        rj_status st = check_fill(g, n, op);
        if (st) return st;
        int rp = dim_ragged_pos(g, x);
        if (rp != 1)
            return graph_fail(g, RJ_ERR_SHAPE, "pad: %s has no ragged dim to pad",
                              type_text(g, x).s);
        rj_dim len = n->ival == RJ_DIM_NONE ? RJ_DIM_NONE : (rj_dim)n->ival;
        if (len == RJ_DIM_NONE) {
            const sym *j = graph_sym(g, x->dims[1]);
            char name[160];
            snprintf(name, sizeof name, "max(%s)", j->name);
            int32_t s = graph_find_sym(g, name);
            if (s < 0) s = graph_add_sym(g, name, SYM_MAXLEN, dim_sym(x->dims[1]));
            if (s < 0) return g->status;
            len = sym_dim(s);
        } else {
            const sym *s = graph_sym(g, len);
            if (len < 0 && (!s || s->kind == SYM_RAGGED))
                return graph_fail(g, RJ_ERR_ARG, "pad: len must be a constant or a dense size");
        }
        if (node_is_cross(g, x)) /* the blocks' rows and columns would pad to two lengths */
            return graph_fail(g, RJ_ERR_UNSUPPORTED, "pad: %s: a tensor of two ragged classes (%s by %s) is not padded "
                              "in this version", type_text(g, x).s, graph_sym(g, x->dims[1])->name, graph_sym(g, x->dims[2])->name);
        n->dims[1] = len;
        if (node_is_pair(g, x)) n->dims[2] = len; /* [B, j1, j1] -> [B, L, L] */
        return RJ_OK;
    }
    /* unpad(p, j) */
    rj_dim j = (rj_dim)n->ival;
    const sym *sj = graph_sym(g, j);
    if (!sj || sj->kind != SYM_RAGGED)
        return graph_fail(g, RJ_ERR_ARG, "%s: the second argument must be a ragged symbol", op);
    if (x->rank < 2 || dim_ragged_pos(g, x) >= 0)
        return graph_fail(g, RJ_ERR_SHAPE, "%s: expected a padded dense tensor [%s, L, ...], "
                          "got %s", op, g->syms[sj->parent].name, type_text(g, x).s);
    if (!dim_equal(g, x->dims[0], sym_dim(sj->parent))) {
        char d0[160];
        dim_text(g, x->dims[0], d0, sizeof d0);
        return graph_fail(g, RJ_ERR_SHAPE, "%s: %s: dim 0 is %s but %s varies over %s", op,
                          type_text(g, x).s, d0, sj->name, g->syms[sj->parent].name);
    }
    n->dims[1] = j;
    if (n->keepdim) { /* both dims: the blocks of a [B, j, j] tensor */
        if (x->rank < 3)
            return graph_fail(g, RJ_ERR_SHAPE, "%s: unpadding dims 1 and 2 needs [%s, L, L, ...], got %s", op,
                              g->syms[sj->parent].name, type_text(g, x).s);
        n->dims[2] = j;
    }
    return RJ_OK;
}

/* ---- index ops and views ---------------------------------------------------------------------- */

static rj_status index_dtype(rj_graph *g, const node *idx, const char *op, const char *what) {
    if (dtype_is_int(idx->dtype) && !idx->weak) return RJ_OK;
    return graph_fail(g, RJ_ERR_DTYPE, "%s: the %s must be an integer tensor (i32 or i64), got %s%s", op, what,
                      idx->weak ? "a literal" : type_text(g, idx).s,
                      idx->dtype == RJ_BOOL && !idx->weak ? " (a bool mask selects with where or masked_fill)" : "");
}

/* The dim of an index op over x, normalised; a jagged x's batch dim is never indexed. */
static rj_status index_axis(rj_graph *g, node *n, const node *x, const char *op) {
    int r = x->rank;
    if (n->axis < -r || n->axis >= r)
        return graph_fail(g, RJ_ERR_SHAPE, "%s: dim %d is out of range for %s (rank %d)", op, n->axis,
                          type_text(g, x).s, r);
    if (n->axis < 0) n->axis += r;
    int rp = dim_ragged_pos(g, x);
    if (rp > 0 && n->axis < rp)
        return graph_fail(g, RJ_ERR_SHAPE, "%s: cannot index the batch dim %d of the jagged tensor %s", op,
                          n->axis, type_text(g, x).s);
    return RJ_OK;
}

/* arange, full: a dense shape given with the node (constants and dense sizes), dtype in axis. */
static rj_status infer_constant(rj_graph *g, node *n, const char *op) {
    if ((unsigned)n->axis >= RJ_DTYPE_COUNT)
        return graph_fail(g, RJ_ERR_ARG, "%s: invalid dtype %d", op, n->axis);
    n->dtype = (rj_dtype)n->axis;
    if (n->op == RJ_OP_ARANGE && n->rank != 1)
        return graph_fail(g, RJ_ERR_INTERNAL, "arange: rank %d", n->rank);
    for (int k = 0; k < n->rank; k++) {
        if (!graph_is_valid_dim(g, n->dims[k]))
            return graph_fail(g, RJ_ERR_ARG, "%s: dim %d of the shape is invalid", op, k);
        const sym *s = graph_sym(g, n->dims[k]);
        if (s && s->kind != SYM_DENSE)
            return graph_fail(g, RJ_ERR_SHAPE, "%s: dim %d is %s %s: constants have dense shapes (sizes and "
                              "dense size names)", op, k, s->kind == SYM_RAGGED ? "the ragged symbol" : "the length",
                              s->name);
    }
    return RJ_OK;
}

static rj_status infer_index(rj_graph *g, node *n, const char *op) {
    if (n->op == RJ_OP_ARANGE || n->op == RJ_OP_FULL) return infer_constant(g, n, op);
    if (n->op == RJ_OP_POSITIONS) {
        const sym *j = graph_sym(g, (rj_dim)n->ival);
        if (!j || j->kind != SYM_RAGGED)
            return graph_fail(g, RJ_ERR_ARG, "positions: the argument must be a ragged symbol");
        n->dtype = RJ_I64;
        n->rank = 2;
        n->dims[0] = sym_dim(j->parent);
        n->dims[1] = (rj_dim)n->ival;
        return RJ_OK;
    }
    const node *x = in(g, n, 0), *idx = in(g, n, 1);
    rj_status s = index_dtype(g, idx, op, n->op == RJ_OP_EMBEDDING ? "indices" : "index");
    if (s) return s;
    n->dtype = x->dtype;
    if (x->weak || x->rank == 0)
        return graph_fail(g, RJ_ERR_SHAPE, "%s: cannot index a scalar %s", op, type_text(g, x).s);
    switch (n->op) {
    case RJ_OP_EMBEDDING:
        if (x->rank != 2 || dim_ragged_pos(g, x) >= 0)
            return graph_fail(g, RJ_ERR_SHAPE, "embedding: the table must be a dense [V, D] tensor, got %s",
                              type_text(g, x).s);
        if (idx->rank < 1 || idx->rank + 1 > RJ_MAX_RANK)
            return graph_fail(g, RJ_ERR_SHAPE, "embedding: the indices %s must have 1 to %d dims", type_text(g, idx).s,
                              RJ_MAX_RANK - 1);
        n->rank = (uint8_t)(idx->rank + 1);
        memcpy(n->dims, idx->dims, sizeof(rj_dim) * idx->rank);
        n->dims[idx->rank] = x->dims[1];
        break;
    case RJ_OP_GATHER:
    case RJ_OP_TAKE_ALONG_DIM: {
        if ((s = index_axis(g, n, x, op))) return s;
        if (idx->rank != x->rank)
            return graph_fail(g, RJ_ERR_SHAPE, "%s: the index %s must have the rank of the input %s", op,
                              type_text(g, idx).s, type_text(g, x).s);
        n->rank = x->rank;
        for (int k = 0; k < x->rank; k++) {
            rj_dim a = x->dims[k], b = idx->dims[k];
            n->dims[k] = b;
            if (k == n->axis || dim_equal(g, a, b)) continue;
            if (n->op == RJ_OP_GATHER && a >= 0 && b >= 0 && b <= a) continue; /* the first b rows */
            if (n->op == RJ_OP_TAKE_ALONG_DIM && (a == 1 || b == 1)) {
                n->dims[k] = a == 1 ? b : a;
                continue;
            }
            return fail_dims(g, op, x, idx, k, a, b);
        }
        const sym *ax = graph_sym(g, x->dims[n->axis]);
        if (ax && ax->kind == SYM_RAGGED && !dim_equal(g, idx->dims[0], x->dims[0]))
            return graph_fail(g, RJ_ERR_SHAPE, "%s: the index %s into the ragged dim %d of %s needs a row of indices "
                              "per item (its dim 0 must be %s)", op, type_text(g, idx).s, n->axis, type_text(g, x).s,
                              g->syms[ax->parent].name);
        break;
    }
    case RJ_OP_INDEX_SELECT: {
        if ((s = index_axis(g, n, x, op))) return s;
        if (idx->rank != 1)
            return graph_fail(g, RJ_ERR_SHAPE, "index_select: the index %s must have one dim", type_text(g, idx).s);
        if (n->axis == dim_ragged_pos(g, x))
            return graph_fail(g, RJ_ERR_SHAPE, "index_select: dim %d of %s is ragged (gather or take_along_dim "
                              "index an item's rows)", n->axis, type_text(g, x).s);
        n->rank = x->rank;
        memcpy(n->dims, x->dims, sizeof(rj_dim) * x->rank);
        n->dims[n->axis] = idx->dims[0];
        break;
    }
    default: break;
    }
    return check_ragged_layout(g, op, n);
}

/* A jagged [B, j, D] transposed: [B, D, j] (an operand of per-item products only). */
static bool is_jagged_t(const rj_graph *g, const node *n) {
    return n->op == RJ_OP_TRANSPOSE && n->rank == 3 && dim_ragged_pos(g, n) == 2;
}
static bool is_jagged3(const rj_graph *g, const node *n) {
    return n->rank == 3 && dim_ragged_pos(g, n) == 1 && !node_is_pair(g, n);
}

/* Per-item products (matmul's docs in ragjit.h); false: not one of those shapes. */
static bool item_matmul(rj_graph *g, node *n, const node *x, const node *w, rj_status *st) {
    bool qk = is_jagged3(g, x) && is_jagged_t(g, w), pv = node_is_pair(g, x) && x->rank == 3 && is_jagged3(g, w),
         gw = is_jagged_t(g, x) && is_jagged3(g, w);
    if (!qk && !pv && !gw) return false;
    /* batch and contracted dims agree; q kᵀ's ragged dims may be of two classes of B ([B, j1, j2]) */
    rj_dim b0 = x->dims[0], b1 = w->dims[0], c0 = x->dims[2], c1 = w->dims[1];
    const sym *sx = graph_sym(g, x->dims[qk ? 1 : 2]), *sw = graph_sym(g, w->dims[qk ? 2 : 1]); /* ragged */
    if (!dim_equal(g, b0, b1) || !dim_equal(g, sym_dim(sx->parent), sym_dim(sw->parent))) {
        *st = graph_fail(g, RJ_ERR_SHAPE, "matmul: %s times %s: per item, both operands must vary over one batch "
                         "dim (ragged %s : %s, ragged %s : %s)", type_text(g, x).s, type_text(g, w).s, sx->name,
                         g->syms[sx->parent].name, sw->name, g->syms[sw->parent].name);
        return true;
    }
    if (!dim_equal(g, c0, c1)) {
        char a[160], b[160];
        dim_text(g, c0, a, sizeof a), dim_text(g, c1, b, sizeof b);
        *st = graph_fail(g, RJ_ERR_SHAPE, "matmul: %s times %s: per item, the contracted dims differ (%s vs %s)%s",
                         type_text(g, x).s, type_text(g, w).s, a, b,
                         pv ? "; the values must be of the keys' ragged class (p [B, j1, j2] @ v [B, j2, D])" : "");
        return true;
    }
    n->dtype = dtype_promote(x->dtype, w->dtype);
    n->rank = 3;
    n->dims[0] = b0;
    n->dims[1] = x->dims[1];
    n->dims[2] = w->dims[2];
    *st = check_ragged_layout(g, "matmul", n);
    return true;
}

/* Per-(item, head) products. As the user writes them (heads as PyTorch's jagged layout has
 * them): q kᵀ [B, H, j, E] @ [B, H, E, j] -> [B, H, j, j] and p v [B, H, j, j] @ [B, H, j, D]
 * -> [B, H, j, D]. As the heads pass rewrites them (keepdim = 1; operands and result in
 * canonical order): [B, j, H, E] by the transpose (ival = 1) of [B, j, H, E] -> [B, j, j, H],
 * and [B, j, j, H] @ [B, j, H, D] -> [B, j, H, D]. false: not one of those shapes. */
static bool head_matmul(rj_graph *g, node *n, const node *x, const node *w, rj_status *st) {
    bool phys = n->keepdim, pair = phys ? node_is_pair(g, x) : node_is_headed(g, x) && dim_ragged_pos(g, x) == 2 &&
                                   graph_sym(g, x->dims[3]) && graph_sym(g, x->dims[3])->kind == SYM_RAGGED;
    if (!phys && (!node_is_headed(g, x) || !node_is_headed(g, w))) return false;
    if (phys && (x->rank != 4 || w->rank != 4)) return false;
    /* names: H heads, c the contracted dim, i the rows, o the result's columns */
    rj_dim b0 = x->dims[0], b1 = w->dims[0], h0, h1, c0, c1, i0, o1;
    if (phys) {
        h0 = x->dims[pair ? 3 : 2], h1 = w->dims[2], i0 = x->dims[1];
        c0 = pair ? x->dims[2] : x->dims[3], c1 = pair ? w->dims[1] : w->dims[3], o1 = pair ? w->dims[3] : w->dims[1];
    } else {
        h0 = x->dims[1], h1 = w->dims[1], i0 = x->dims[2], c0 = x->dims[3], c1 = w->dims[2], o1 = w->dims[3];
    }
    const sym *sc = graph_sym(g, c0), *so = graph_sym(g, o1);
    bool c_ragged = sc && sc->kind == SYM_RAGGED, o_ragged = so && so->kind == SYM_RAGGED;
    bool heads_ok = dim_equal(g, h0, h1) || (n->axis == 1 && h0 > 0 && h1 > 0 && h0 % h1 == 0); /* GQA (sdpa.c) */
    bool ok = dim_equal(g, b0, b1) && heads_ok && dim_equal(g, c0, c1) && c_ragged == pair &&
              (pair ? !o_ragged : o_ragged && dim_equal(g, b0, sym_dim(so->parent))) && n->ival == (phys && !pair);
    if (!ok) {
        *st = graph_fail(g, RJ_ERR_SHAPE, "matmul: %s times %s: per item and head, the batch dims, the head dims "
                         "and the contracted dims must agree (q @ k.transpose(-2, -1) with q [B, H, j1, E], k [B, H, j2, "
                         "E]; p @ v with p [B, H, j1, j2], v [B, H, j2, D]; both ragged classes varying over B)",
                         type_text(g, x).s, type_text(g, w).s);
        return true;
    }
    n->dtype = dtype_promote(x->dtype, w->dtype);
    n->rank = 4;
    n->dims[0] = b0;
    if (phys) {
        n->dims[1] = i0, n->dims[2] = pair ? w->dims[2] : o1, n->dims[3] = pair ? w->dims[3] : h0;
    } else {
        n->dims[1] = h0, n->dims[2] = i0, n->dims[3] = o1;
    }
    *st = check_ragged_layout(g, "matmul", n);
    return true;
}

/* matmul(x, w): x [..., M, K] with a dense last dim, w a dense [K, N] ([N, K] for linear). */
static rj_status infer_matmul(rj_graph *g, node *n, const char *op) {
    const node *x = in(g, n, 0), *w = in(g, n, 1);
    const char *fn = n->ival ? "linear" : op;
    rj_status ist;
    if (!x->weak && !w->weak && (!dtype_is_float(x->dtype) || !dtype_is_float(w->dtype)))
        return graph_fail(g, RJ_ERR_DTYPE, "%s: %s and %s: expected float tensors (cast them first)", fn,
                          type_text(g, x).s, type_text(g, w).s);
    if ((n->keepdim || (!n->ival && x->rank == 4 && w->rank == 4)) && head_matmul(g, n, x, w, &ist)) return ist;
    if (!n->ival && item_matmul(g, n, x, w, &ist)) return ist;
    if (x->weak || w->weak || x->rank < 2)
        return graph_fail(g, RJ_ERR_SHAPE, "%s: the input %s must have at least 2 dims", fn,
                          x->weak ? "(a literal)" : type_text(g, x).s);
    if (w->rank != 2 || dim_ragged_pos(g, w) >= 0 || dim_ragged_pos(g, x) == x->rank - 1) {
        node t = *w;
        t.weak = 0;
        return graph_fail(g, w->rank == 2 && dim_ragged_pos(g, w) < 0 ? RJ_ERR_SHAPE : RJ_ERR_UNSUPPORTED,
                          "%s: %s times %s: this version multiplies by a dense 2-D %s only (products of two "
                          "jagged tensors are not supported yet)", fn, type_text(g, x).s, type_text(g, &t).s,
                          n->ival ? "weight [N, K]" : "matrix [K, N]");
    }
    if (!dtype_is_float(x->dtype) || !dtype_is_float(w->dtype))
        return graph_fail(g, RJ_ERR_DTYPE, "%s: %s and %s: expected float tensors (cast them first)", fn,
                          type_text(g, x).s, type_text(g, w).s);
    rj_dim k = w->dims[n->ival ? 1 : 0], cols = w->dims[n->ival ? 0 : 1];
    if (!dim_equal(g, x->dims[x->rank - 1], k)) {
        char a[160], b[160];
        dim_text(g, x->dims[x->rank - 1], a, sizeof a);
        dim_text(g, k, b, sizeof b);
        return graph_fail(g, RJ_ERR_SHAPE, "%s: %s times %s: the inner dims differ (%s vs %s)%s", fn,
                          type_text(g, x).s, type_text(g, w).s, a, b,
                          n->ival ? " (linear's weight is [out_features, in_features])" : "");
    }
    n->dtype = dtype_promote(x->dtype, w->dtype);
    n->rank = x->rank;
    memcpy(n->dims, x->dims, sizeof(rj_dim) * x->rank);
    n->dims[x->rank - 1] = cols;
    return check_ragged_layout(g, fn, n);
}

/* attention(scores, v): softmax(scores, dim=-1) @ v per item (and head). scores [B, j, j] or
 * [B, j, j, H] (two ragged dims of one class); v [B, j, Dv] or [B, j, Hkv, Dv] of that class,
 * Hkv dividing H (grouped-query attention). The result is [B, j, Dv] or [B, j, H, Dv]. */
static rj_status infer_attention(rj_graph *g, node *n, const char *op) {
    const node *s = in(g, n, 0), *v = in(g, n, 1);
    if (s->weak || v->weak || !dtype_is_float(s->dtype) || !dtype_is_float(v->dtype))
        return graph_fail(g, RJ_ERR_DTYPE, "%s: the scores %s and the values %s: expected float tensors", op,
                          s->weak ? "(a literal)" : type_text(g, s).s, v->weak ? "(a literal)" : type_text(g, v).s);
    if (node_is_headed(g, s) && node_is_headed(g, v)) { /* [B, H, j, j] and [B, Hkv, j, Dv] as the user writes them */
        rj_dim h = s->dims[1], hk = v->dims[1];
        if (!node_stores_pair(g, s) || dim_ragged_pos(g, v) != 2 || !dim_equal(g, v->dims[0], s->dims[0]) ||
            !dim_equal(g, v->dims[2], s->dims[3]) || !(dim_equal(g, h, hk) || (h >= 0 && hk > 0 && h % hk == 0)))
            return graph_fail(g, RJ_ERR_SHAPE, "%s: the scores %s and the values %s: per head, [B, H, j1, j2] and [B, "
                              "Hkv, j2, Dv], Hkv dividing H", op, type_text(g, s).s, type_text(g, v).s);
        n->dtype = dtype_promote(s->dtype, v->dtype);
        n->rank = 4;
        n->dims[0] = s->dims[0], n->dims[1] = h, n->dims[2] = s->dims[2], n->dims[3] = v->dims[3];
        return RJ_OK;
    }
    if (!node_is_pair(g, s) || (s->rank != 3 && s->rank != 4))
        return graph_fail(g, RJ_ERR_SHAPE, "%s: the scores %s must have two ragged dims varying over the batch "
                          "dim, [B, j1, j2] (or [B, j1, j2, H] with heads)", op, type_text(g, s).s);
    bool heads = s->rank == 4;
    if (v->rank != s->rank || dim_ragged_pos(g, v) != 1 || node_is_pair(g, v) || !dim_equal(g, v->dims[0], s->dims[0]) ||
        !dim_equal(g, v->dims[1], s->dims[2]))
        return graph_fail(g, RJ_ERR_SHAPE, "%s: the values %s must be jagged %s with the scores' batch dim and "
                          "the ragged class of their keys, %s (the scores are %s)", op, type_text(g, v).s,
                          heads ? "[B, j2, Hkv, Dv]" : "[B, j2, Dv]", graph_sym(g, s->dims[2])->name, type_text(g, s).s);
    if (heads) {
        rj_dim h = s->dims[3], hk = v->dims[2];
        bool ok = dim_equal(g, h, hk) || (h >= 0 && hk > 0 && h % hk == 0);
        if (!ok)
            return graph_fail(g, RJ_ERR_SHAPE, "%s: the scores %s have heads that the values %s do not divide "
                              "(query head h reads value head h / (H / Hkv))", op, type_text(g, s).s,
                              type_text(g, v).s);
    }
    n->dtype = dtype_promote(s->dtype, v->dtype);
    n->rank = s->rank;
    n->dims[0] = s->dims[0];
    n->dims[1] = s->dims[1];
    if (heads) n->dims[2] = s->dims[3];
    n->dims[n->rank - 1] = v->dims[v->rank - 1];
    return check_ragged_layout(g, op, n);
}

/* A dense shape's element count as a constant and a sorted list of symbol classes. */
typedef struct count {
    int64_t c;
    int n;
    int32_t s[RJ_MAX_RANK];
} count;

static count count_of(const rj_graph *g, const rj_dim *dims, int from, int to) {
    count r = {.c = 1};
    for (int k = from; k < to; k++) {
        if (dims[k] >= 0) {
            r.c = dims[k] && r.c <= INT64_MAX / dims[k] ? r.c * dims[k] : dims[k] ? INT64_MAX : 0;
            continue;
        }
        int32_t v = sym_root(g, dim_sym(dims[k])), i = r.n++;
        while (i > 0 && r.s[i - 1] > v) r.s[i] = r.s[i - 1], i--;
        r.s[i] = v;
    }
    return r;
}

/* reshape: n's dims are the target. A jagged x keeps its batch and ragged dims; what follows
 * (all of a dense x) is re-laid out, with the same count of elements. */
static rj_status infer_transpose(rj_graph *g, node *n) {
    const node *x = in(g, n, 0);
    int r = x->rank, a = n->axis, b = (int)n->ival;
    if (x->weak || r < 2 || a < -r || a >= r || b < -r || b >= r)
        return graph_fail(g, RJ_ERR_SHAPE, "transpose: dims %d and %d are out of range for %s", n->axis, (int)n->ival,
                          x->weak ? "a literal" : type_text(g, x).s);
    if (a < 0) a += r;
    if (b < 0) b += r;
    if (a > b) {
        int t = a;
        a = b, b = t;
    }
    n->axis = a;
    n->ival = b;
    n->dtype = x->dtype;
    n->rank = x->rank;
    memcpy(n->dims, x->dims, sizeof(rj_dim) * (size_t)r);
    n->dims[a] = x->dims[b];
    n->dims[b] = x->dims[a];
    int rp = dim_ragged_pos(g, x);
    if (rp < 0 || a == b) return RJ_OK;
    if (is_jagged3(g, x) && a == 1 && b == 2) return RJ_OK; /* [B, D, j1]: for matmul */
    const sym *sa = graph_sym(g, x->dims[a]), *sb = graph_sym(g, x->dims[b]);
    if (node_is_cross(g, x) && sa && sa->kind == SYM_RAGGED && sb && sb->kind == SYM_RAGGED)
        return graph_fail(g, RJ_ERR_UNSUPPORTED, "transpose: dims %d and %d of %s: the blocks of two ragged classes "
                          "(%s by %s) are not transposed in this version", a, b, type_text(g, x).s, sa->name, sb->name);
    if (node_is_pair(g, x) && a == 1 && b == 2) return RJ_OK; /* [B, j1, j1] blocks transposed */
    if (rp == 1 && !node_is_pair(g, x) && a >= 2) return RJ_OK; /* two dense dims: [B, j1, D, H] */
    /* heads: [B, j1, H, D] <-> [B, H, j1, D] <-> [B, H, D, j1], and a pair's blocks [B, H, j1, j1] */
    bool plain = rp == 1 && !node_is_pair(g, x) && r >= 4 && a >= 1;
    if ((plain || (node_is_headed(g, x) && a >= 1)) &&
        (node_is_headed(g, n) || (dim_ragged_pos(g, n) == 1 && !node_is_pair(g, n))))
        return RJ_OK;
    return graph_fail(g, RJ_ERR_UNSUPPORTED, "transpose: dims %d and %d of %s: a jagged tensor transposes only "
                      "dims 1 and 2 of [B, j1, D] (an operand of matmul) and of [B, j1, j1] (its blocks), its "
                      "dense dims after the ragged dim, and heads ([B, j1, H, D] to [B, H, j1, D], then [B, H, D, j1])",
                      a, b, type_text(g, x).s);
}

/* cat: b joins a (operands ia and ib of the user's list, numbered from 1) along dim *axis
 * (normalised here). They must agree in layout, rank and every other dim, and have a constant
 * size in the cat dim: the result's size there is the sum, which a symbol cannot carry. */
rj_status cat_check(rj_graph *g, const node *a, const node *b, int ia, int ib, int *axis) {
    const node *o[2] = {a, b};
    int at[2] = {ia, ib};
    for (int i = 0; i < 2; i++)
        if (o[i]->weak || o[i]->rank == 0)
            return graph_fail(g, RJ_ERR_SHAPE, "cat: operand %d is %s: cat joins tensors of at least one dim", at[i],
                              o[i]->weak ? "a literal" : "a 0-dim tensor");
    int r = a->rank;
    if (*axis < -r || *axis >= r)
        return graph_fail(g, RJ_ERR_SHAPE, "cat: dim %d is out of range for %s (rank %d)", *axis, type_text(g, a).s, r);
    if (*axis < 0) *axis += r;
    int d = *axis, ra = dim_ragged_pos(g, a), rb = dim_ragged_pos(g, b);
    if ((ra >= 0) != (rb >= 0))
        return graph_fail(g, RJ_ERR_SHAPE, "cat: operand %d %s is %s where operand %d %s is %s", ib, type_text(g, b).s,
                          rb >= 0 ? "jagged" : "dense", ia, type_text(g, a).s, ra >= 0 ? "jagged" : "dense");
    if (b->rank != r)
        return graph_fail(g, RJ_ERR_SHAPE, "cat: operand %d has %d dims where operand %d has %d", ib, b->rank, ia, r);
    if (ra >= 0 && d <= ra)
        return graph_fail(g, RJ_ERR_UNSUPPORTED, "cat: dim %d of %s is its %s dim: this version concatenates jagged "
                          "tensors along dense dims after the ragged one", d, type_text(g, a).s,
                          d == ra ? "ragged" : "batch");
    for (int k = 0; k < r; k++) {
        if (k == d || dim_equal(g, a->dims[k], b->dims[k])) continue;
        char x[160], y[160];
        dim_text(g, b->dims[k], x, sizeof x);
        dim_text(g, a->dims[k], y, sizeof y);
        return graph_fail(g, RJ_ERR_SHAPE, "cat: operand %d has %s in dim %d where operand %d has %s (operands "
                          "agree in every dim but the cat dim %d)", ib, x, k, ia, y, d);
    }
    for (int i = 0; i < 2; i++)
        if (o[i]->dims[d] < 0) {
            char x[160];
            dim_text(g, o[i]->dims[d], x, sizeof x);
            return graph_fail(g, RJ_ERR_UNSUPPORTED, "cat: operand %d has the run-time size %s in the cat dim %d: "
                              "this version concatenates along dims of constant size", at[i], x, d);
        }
    return RJ_OK;
}

static rj_status infer_cat(rj_graph *g, node *n) {
    const node *a = in(g, n, 0), *b = in(g, n, 1);
    int axis = n->axis;
    rj_status s = cat_check(g, a, b, 1, 2, &axis);
    if (s) return s;
    n->axis = axis;
    n->dtype = dtype_promote(a->dtype, b->dtype);
    n->rank = a->rank;
    memcpy(n->dims, a->dims, sizeof(rj_dim) * a->rank);
    n->dims[axis] = a->dims[axis] + b->dims[axis];
    return check_ragged_layout(g, "cat", n);
}

/* narrow: dim `axis` cut to `fval` (the length) elements from `ival` (the start), normalised
 * here to a non-negative dim and start. Only a dense dim of constant size: the batch dim and a
 * ragged dim would change the offsets, and a size bound at run time leaves the bounds
 * unchecked until the run. */
static rj_status infer_narrow(rj_graph *g, node *n) {
    const node *x = in(g, n, 0);
    int r = x->rank, d = n->axis;
    if (x->weak) return graph_fail(g, RJ_ERR_SHAPE, "narrow: cannot narrow a literal");
    if (d < -r || d >= r)
        return graph_fail(g, RJ_ERR_SHAPE, "narrow: dim %d is out of range for %s (%d dims)", d, type_text(g, x).s, r);
    if (d < 0) d += r;
    const sym *sy = graph_sym(g, x->dims[d]);
    int rp = dim_ragged_pos(g, x);
    if (sy && sy->kind == SYM_RAGGED)
        return graph_fail(g, RJ_ERR_UNSUPPORTED, "narrow: dim %d of %s is the ragged dim %s: slicing a ragged dim is "
                          "not supported", d, type_text(g, x).s, sy->name);
    if (rp >= 0 && d == 0)
        return graph_fail(g, RJ_ERR_UNSUPPORTED, "narrow: dim 0 of %s is the batch dim: slicing the batch dim of a "
                          "jagged tensor is not supported", type_text(g, x).s);
    if (sy) {
        char a[160];
        dim_text(g, x->dims[d], a, sizeof a);
        return graph_fail(g, RJ_ERR_UNSUPPORTED, "narrow: dim %d of %s has the size %s, known only at run time: narrow "
                          "needs a dim of constant size", d, type_text(g, x).s, a);
    }
    int64_t size = x->dims[d], start = n->ival, len = (int64_t)n->fval;
    if (len < 0) return graph_fail(g, RJ_ERR_ARG, "narrow: length %lld is negative", (long long)len);
    if (start < -size || start > size)
        return graph_fail(g, RJ_ERR_ARG, "narrow: start %lld is out of range for dim %d of %s (from %lld to %lld)",
                          (long long)start, d, type_text(g, x).s, (long long)-size, (long long)size);
    if (start < 0) start += size;
    if (len > size - start)
        return graph_fail(g, RJ_ERR_ARG, "narrow: start %lld + length %lld exceeds the size %lld of dim %d of %s",
                          (long long)start, (long long)len, (long long)size, d, type_text(g, x).s);
    n->axis = d;
    n->ival = start;
    n->dtype = x->dtype;
    n->rank = x->rank;
    memcpy(n->dims, x->dims, sizeof(rj_dim) * (size_t)r);
    n->dims[d] = len;
    return RJ_OK;
}

static rj_status infer_view(rj_graph *g, node *n, const char *op) {
    if (n->op == RJ_OP_TRANSPOSE) return infer_transpose(g, n);
    if (n->op == RJ_OP_NARROW) return infer_narrow(g, n);
    if (n->op == RJ_OP_CAT) return infer_cat(g, n);
    const node *x = in(g, n, 0);
    n->dtype = x->dtype;
    if (x->weak) return graph_fail(g, RJ_ERR_SHAPE, "%s: cannot reshape a literal", op);
    int rp = dim_ragged_pos(g, x), keep = rp >= 0 ? rp + (node_is_pair(g, x) ? 2 : 1) : 0; /* a pair keeps its blocks */
    node t = *n;
    t.weak = 0;
    if (rp == 1 && !node_is_pair(g, x) && n->rank == x->rank + 1 && node_is_column(g, n)) { /* unsqueeze(x, 1) */
        bool same = n->dims[0] == x->dims[0];
        for (int k = 1; same && k < x->rank; k++) same = n->dims[k + 1] == x->dims[k];
        if (same) return RJ_OK;
    }
    if (node_is_pair(g, x) && x->rank == 3 && n->rank == 4 && n->dims[1] == 1 && n->dims[0] == x->dims[0] &&
        n->dims[2] == x->dims[1] && n->dims[3] == x->dims[2])
        return RJ_OK; /* unsqueeze(s, 1) of a pair: [B, 1, j, j], to broadcast over heads */
    if (node_is_column(g, x) && n->rank == x->rank - 1 && !node_is_column(g, n)) { /* squeeze(x, 1) of a column */
        bool same = n->dims[0] == x->dims[0];
        for (int k = 1; same && k < n->rank; k++) same = n->dims[k] == x->dims[k + 1];
        if (same) return RJ_OK;
    }
    for (int k = 0; k < n->rank; k++)
        if (!graph_is_valid_dim(g, n->dims[k]))
            return graph_fail(g, RJ_ERR_ARG, "%s: dim %d of the new shape is invalid", op, k);
    if (rp >= 0) {
        bool same = n->rank >= keep;
        for (int k = 0; same && k < keep; k++) same = n->dims[k] == x->dims[k];
        if (!same)
            return graph_fail(g, RJ_ERR_SHAPE, "%s: %s to %s: a jagged tensor keeps its batch and ragged dims in "
                              "place (only the dims after %s change)", op, type_text(g, x).s, type_text(g, &t).s,
                              g->syms[dim_sym(x->dims[rp])].name);
    }
    for (int k = keep; k < n->rank; k++) {
        const sym *sy = graph_sym(g, n->dims[k]);
        if (sy && sy->kind == SYM_RAGGED)
            return graph_fail(g, RJ_ERR_SHAPE, "%s: %s to %s: a ragged dim cannot be made by a reshape", op,
                              type_text(g, x).s, type_text(g, &t).s);
    }
    count a = count_of(g, x->dims, keep, x->rank), b = count_of(g, n->dims, keep, n->rank);
    bool eq = (a.c == b.c && a.n == b.n && !memcmp(a.s, b.s, sizeof(int32_t) * (size_t)a.n)) ||
              (a.c == 0 && b.c == 0);
    if (!eq)
        return graph_fail(g, RJ_ERR_SHAPE, "%s: %s to %s: the element counts differ%s", op, type_text(g, x).s,
                          type_text(g, &t).s, a.n || b.n ? " (or cannot be shown equal: sizes bound at run time "
                          "must appear on both sides)" : "");
    return check_ragged_layout(g, op, n);
}

/* The constant dims of a shape multiply to at most 2^48 elements (zeros aside: lowering may
 * multiply the others before it sees the zero). No such tensor fits in memory anyway, and the
 * bound leaves compile-time arithmetic on constant extents (strides, tile counts, element
 * sizes) far from overflowing int64. */
#define CONST_NUMEL_MAX ((int64_t)1 << 48)

static rj_status check_const_numel(rj_graph *g, const node *n, const char *op) {
    int64_t c = 1;
    for (int k = 0; k < n->rank; k++) {
        if (n->dims[k] <= 0) continue; /* symbols, and 0 */
        if (n->dims[k] > CONST_NUMEL_MAX / c)
            return graph_fail(g, RJ_ERR_OVERFLOW, "%s: %s: its constant dims multiply to more "
                              "than 2^48 elements", op, type_text(g, n).s);
        c *= n->dims[k];
    }
    return RJ_OK;
}

static rj_status infer_kind(rj_graph *g, node *n, const char *op);

/* What this version computes on tensors with two ragged dims and on transposed jagged ones:
 * everything else is refused here, by name, rather than computed wrong further down. */
static rj_status check_special_operands(rj_graph *g, const node *n, const char *op) {
    op_kind k = op_table[n->op].kind;
    for (int i = 0; i < n->nin; i++) {
        const node *o = in(g, n, i);
        if (node_is_column(g, o)) {
            if (k == KIND_UNARY || k == KIND_BINARY || k == KIND_COMPARE || k == KIND_SELECT || k == KIND_CAST) continue;
            if (k == KIND_VIEW && n->op != RJ_OP_TRANSPOSE && dim_ragged_pos(g, n) == 1) continue; /* squeeze(x, 1) */
            /* a transposed [B, j1, 1] (D = 1) is a row of columns and a matmul operand */
            if (o->op == RJ_OP_TRANSPOSE && n->op == RJ_OP_MATMUL && !n->ival) continue;
            return graph_fail(g, RJ_ERR_UNSUPPORTED, "%s: %s (a jagged tensor as a row of columns) only takes "
                              "elementwise ops (broadcast against [B, j1, j1]) and squeeze(1) in this version", op, type_text(g, o).s);
        }
        if (node_is_headed(g, o)) continue; /* check_headed_operands */
        if (dim_ragged_pos(g, o) > 1 && !(n->op == RJ_OP_MATMUL && !n->ival))
            return graph_fail(g, RJ_ERR_UNSUPPORTED, "%s: %s is a transposed jagged tensor: this version only "
                              "multiplies it (matmul)", op, type_text(g, o).s);
        if (!node_is_pair(g, o)) continue;
        bool ok = k == KIND_UNARY || k == KIND_BINARY || k == KIND_COMPARE || k == KIND_SELECT || k == KIND_CAST ||
                  (n->op == RJ_OP_TRANSPOSE && n->axis == 1 && n->ival == 2) ||
                  (n->op == RJ_OP_RESHAPE && (node_is_pair(g, n) || node_is_headed(g, n))) ||
                  ((k == KIND_REDUCE || k == KIND_SOFTMAX) && n->axis >= 1) || (n->op == RJ_OP_MATMUL && i == 0) ||
                  n->op == RJ_OP_PAD || (n->op == RJ_OP_ATTENTION && i == 0);
        if (!ok)
            return graph_fail(g, RJ_ERR_UNSUPPORTED, "%s: %s has two ragged dims: this version applies elementwise "
                              "ops, softmax, log_softmax and reductions over dims 1 and later, pad, and matmul by a jagged "
                              "tensor to it", op, type_text(g, o).s);
    }
    return RJ_OK;
}

/* What this version computes on tensors per head ([B, H, j, D]); checked before the op's own
 * rules, whose messages assume the ragged dim at 1. */
static rj_status check_headed_operands(rj_graph *g, const node *n, const char *op) {
    op_kind k = op_table[n->op].kind;
    bool ok = k == KIND_UNARY || k == KIND_BINARY || k == KIND_COMPARE || k == KIND_SELECT || k == KIND_CAST ||
              k == KIND_REDUCE || k == KIND_SOFTMAX || k == KIND_NORM || k == KIND_MATMUL || k == KIND_ATTENTION ||
              n->op == RJ_OP_TRANSPOSE || n->op == RJ_OP_NARROW || n->op == RJ_OP_RESHAPE;
    for (int i = 0; i < n->nin && !ok; i++) {
        const node *o = in(g, n, i);
        if (node_is_headed(g, o))
            return graph_fail(g, RJ_ERR_UNSUPPORTED, "%s: %s is a jagged tensor per head: this version applies "
                              "elementwise ops, reductions, softmax, norms, matmul, narrow, reshape of the dims "
                              "after the ragged one and transpose to it (transpose(1, 2) first for the rest)",
                              op, type_text(g, o).s);
    }
    return RJ_OK;
}

rj_status infer_node(rj_graph *g, node *n) {
    const char *op = op_table[n->op].name;
    rj_status s = check_headed_operands(g, n, op);
    if (!s) s = infer_kind(g, n, op);
    if (!s) s = check_special_operands(g, n, op);
    return s ? s : check_const_numel(g, n, op);
}

static rj_status infer_kind(rj_graph *g, node *n, const char *op) {
    switch (op_table[n->op].kind) {
    case KIND_LEAF:
        if (n->op == RJ_OP_INPUT) return infer_input(g, n);
        /* a literal is stored at full precision; promotion ignores its dtype (ops.c) */
        n->rank = 0;
        n->dtype = n->weak == WEAK_FLOAT ? RJ_F64 : n->weak == WEAK_INT ? RJ_I64 : RJ_BOOL;
        return RJ_OK;
    case KIND_UNARY: return infer_unary(g, n, op);
    case KIND_BINARY:
    case KIND_COMPARE: return infer_binary(g, n, op);
    case KIND_SELECT: return infer_select(g, n, op);
    case KIND_CAST:
        if ((unsigned)n->ival >= RJ_DTYPE_COUNT)
            return graph_fail(g, RJ_ERR_ARG, "cast: invalid dtype %lld", (long long)n->ival);
        n->dtype = (rj_dtype)n->ival;
        n->rank = in(g, n, 0)->rank;
        memcpy(n->dims, in(g, n, 0)->dims, sizeof(rj_dim) * n->rank);
        return RJ_OK;
    case KIND_REDUCE: return infer_reduce(g, n, op);
    case KIND_SOFTMAX: return infer_softmax(g, n, op);
    case KIND_NORM: return infer_norm(g, n, op);
    case KIND_PAD: return infer_pad(g, n, op);
    case KIND_INDEX: return infer_index(g, n, op);
    case KIND_VIEW: return infer_view(g, n, op);
    case KIND_MATMUL: return infer_matmul(g, n, op);
    case KIND_ATTENTION: return infer_attention(g, n, op);
    }
    return graph_fail(g, RJ_ERR_INTERNAL, "infer: unknown op %d", (int)n->op);
}
