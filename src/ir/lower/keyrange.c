/*
 * lower/keyrange.c — the keys a mask leaves visible to a query row, read from the scores.
 *
 * A fused attention's scores F [B, i, j(, H)] are often where(keep, s, -inf) with keep built
 * from positions: causal (pos_i >= pos_j), sliding window (pos_i - pos_j < W), or both
 * (`&`). A key that keep hides adds exp(-inf - m) = 0 to every sum of its row, so a kernel
 * that walks keys in tiles may leave out a tile that no row of its query tile can see, and
 * stop at the last tile its rows can see (FlashAttention's causal loop bound). This file finds
 * what of keep is of that form and says it as bounds on j, linear in i with integer slopes:
 *
 *     j <= a_hi i + b_hi      (from pos_j <= pos_i, pos_j < pos_i + 1, ...)
 *     j >= a_lo i + b_lo      (from pos_i - pos_j < W, pos_j > pos_i - W, ...)
 *
 * Every bound it gives is implied by keep, never the reverse: a condition it does not
 * understand (an input mask, an `|`, a float position) bounds nothing, and a conjunction
 * keeps what its parts bound. So leaving out the keys outside the bounds changes no sum, with
 * one exception the guide states: a hidden key's v row is not read, so an inf or NaN there no
 * longer turns the rows that cannot see it into NaN (0 · inf), as FlashAttention's kernels.
 *
 * The reading is symbolic over the graph: positions(j) is i or j by the dim of F it lines up
 * with (operands broadcast from the right, as NumPy; reshapes that only add or drop size-1
 * dims keep the line-up), and sums, differences, negations, products by literals and integer
 * casts of them stay affine in i and j. Nothing here emits code.
 */
#include <math.h>

#include "kit.h"

enum { KR_DEPTH = 32 }; /* deeper conditions bound nothing (and no recursion runs away) */

typedef struct aff {
    bool ok;
    double ci, cj, k; /* ci i + cj j + k */
} aff;

/* Where dim p of n (of rank rn) lies in operand o, broadcasting from the right; -1 where o has
 * no such dim or broadcasts a 1 there. */
static int operand_dim(const rj_graph *g, const node *n, const node *o, int p) {
    if (p < 0) return -1;
    int q = p - (n->rank - o->rank);
    if (q < 0) return -1;
    if (o->dims[q] == 1 && n->dims[p] != 1) return -1;
    return dim_equal(g, o->dims[q], n->dims[p]) ? q : -1;
}

/* Where dim p of a reshape n lies in its input x, when the reshape only adds or drops dims of
 * size 1; -2 for any other reshape (nothing can be said), -1 where p is a dim of size 1. */
static int reshape_dim(const rj_graph *g, const node *n, const node *x, int p) {
    int a = 0, b = 0, to = -1;
    for (;;) {
        while (a < n->rank && n->dims[a] == 1) a++;
        while (b < x->rank && x->dims[b] == 1) b++;
        if (a == n->rank || b == x->rank) break;
        if (!dim_equal(g, n->dims[a], x->dims[b])) return -2;
        if (a == p) to = b;
        a++, b++;
    }
    return a == n->rank && b == x->rank ? to : -2;
}

static aff aff_none(void) { return (aff){.ok = false}; }

/* Node id as ci i + cj j + k, where its dims ri and rj line up with F's i and j (-1: not
 * there). */
static aff aff_of(const rj_graph *g, int32_t id, int ri, int rj, int depth) {
    const node *n = &g->nodes[id];
    /* in f32 or 16 bits, large positions round (a comparison may turn): integers or f64 only */
    if (depth > KR_DEPTH || (dtype_is_float(n->dtype) && n->dtype != RJ_F64)) return aff_none();
    switch (n->op) {
    case RJ_OP_POSITIONS:
        if (n->rank != 2 || (ri == 1) == (rj == 1)) return aff_none();
        return (aff){.ok = true, .ci = ri == 1, .cj = rj == 1};
    case RJ_OP_SCALAR:
        if (dtype_is_float(n->dtype))
            return isfinite(n->fval) ? (aff){.ok = true, .k = n->fval} : aff_none();
        return (aff){.ok = true, .k = (double)n->ival};
    case RJ_OP_RESHAPE: {
        const node *x = &g->nodes[n->in[0]];
        int xi_ = ri < 0 ? -1 : reshape_dim(g, n, x, ri), xj = rj < 0 ? -1 : reshape_dim(g, n, x, rj);
        if (xi_ == -2 || xj == -2) return aff_none();
        return aff_of(g, n->in[0], xi_, xj, depth + 1);
    }
    case RJ_OP_CAST: /* integers, or a float that holds them exactly */
        if (n->dtype != RJ_I32 && n->dtype != RJ_I64 && n->dtype != RJ_F64) return aff_none();
        return aff_of(g, n->in[0], ri, rj, depth + 1);
    case RJ_OP_NEG: {
        aff a = aff_of(g, n->in[0], operand_dim(g, n, &g->nodes[n->in[0]], ri),
                       operand_dim(g, n, &g->nodes[n->in[0]], rj), depth + 1);
        return (aff){.ok = a.ok, .ci = -a.ci, .cj = -a.cj, .k = -a.k};
    }
    case RJ_OP_ADD:
    case RJ_OP_SUB:
    case RJ_OP_MUL: {
        const node *x = &g->nodes[n->in[0]], *y = &g->nodes[n->in[1]];
        aff a = aff_of(g, n->in[0], operand_dim(g, n, x, ri), operand_dim(g, n, x, rj), depth + 1);
        aff b = aff_of(g, n->in[1], operand_dim(g, n, y, ri), operand_dim(g, n, y, rj), depth + 1);
        if (!a.ok || !b.ok) return aff_none();
        if (n->op == RJ_OP_MUL) { /* by a literal only: the result stays affine */
            if (b.ci != 0 || b.cj != 0) {
                aff t = a;
                a = b, b = t;
            }
            if (b.ci != 0 || b.cj != 0) return aff_none();
            return (aff){.ok = true, .ci = a.ci * b.k, .cj = a.cj * b.k, .k = a.k * b.k};
        }
        double s = n->op == RJ_OP_SUB ? -1 : 1;
        return (aff){.ok = true, .ci = a.ci + s * b.ci, .cj = a.cj + s * b.cj, .k = a.k + s * b.k};
    }
    default:
        return aff_none();
    }
}

/* Tightens kr by j <= a i + b (hi) or j >= a i + b: of two bounds of one slope the tighter is
 * kept; of two slopes, the first (either is implied). */
static void bound_add(key_bound *kb, bool hi, int64_t a, int64_t b) {
    if (!kb->has) {
        *kb = (key_bound){.has = true, .a = a, .b = b};
    } else if (kb->a == a) {
        kb->b = hi ? (b < kb->b ? b : kb->b) : (b > kb->b ? b : kb->b);
    }
}

/* The comparison op(x, y) (negated when neg) as bounds on j. */
static void compare_bounds(const rj_graph *g, const node *n, int ri, int rj, bool neg, key_range *kr, int depth) {
    rj_op op = n->op;
    if (neg) /* not (x < y) is x >= y: positions are integers, never NaN */
        op = op == RJ_OP_LT ? RJ_OP_GE : op == RJ_OP_LE ? RJ_OP_GT : op == RJ_OP_GT ? RJ_OP_LE
           : op == RJ_OP_GE ? RJ_OP_LT : op == RJ_OP_NE ? RJ_OP_EQ : RJ_OP_NE;
    if (op == RJ_OP_NE) return;
    const node *x = &g->nodes[n->in[0]], *y = &g->nodes[n->in[1]];
    aff a = aff_of(g, n->in[0], operand_dim(g, n, x, ri), operand_dim(g, n, x, rj), depth + 1);
    aff b = aff_of(g, n->in[1], operand_dim(g, n, y, ri), operand_dim(g, n, y, rj), depth + 1);
    if (!a.ok || !b.ok) return;
    /* d = x - y = ci i + cj j + k, and d op 0; with cj = ±1: j op' -(ci i + k) / cj */
    double ci = a.ci - b.ci, cj = a.cj - b.cj, k = a.k - b.k;
    if (cj != 1 && cj != -1) return;
    double sa = -ci / cj, sb = -k / cj;
    if (sa != floor(sa) || fabs(sa) > 1e6 || fabs(sb) > 1e15) return;
    if (cj < 0) /* divided by a negative: the comparison turns */
        op = op == RJ_OP_LT ? RJ_OP_GT : op == RJ_OP_LE ? RJ_OP_GE : op == RJ_OP_GT ? RJ_OP_LT
           : op == RJ_OP_GE ? RJ_OP_LE : op;
    int64_t ia = (int64_t)sa; /* j op ia i + sb, i an integer: floor/ceil act on sb alone */
    switch (op) {
    case RJ_OP_LT: bound_add(&kr->hi, true, ia, (int64_t)ceil(sb) - 1); break;
    case RJ_OP_LE: bound_add(&kr->hi, true, ia, (int64_t)floor(sb)); break;
    case RJ_OP_GT: bound_add(&kr->lo, false, ia, (int64_t)floor(sb) + 1); break;
    case RJ_OP_GE: bound_add(&kr->lo, false, ia, (int64_t)ceil(sb)); break;
    case RJ_OP_EQ:
        bound_add(&kr->hi, true, ia, (int64_t)floor(sb));
        bound_add(&kr->lo, false, ia, (int64_t)ceil(sb));
        break;
    default: break;
    }
}

/* What the bool node id (negated when neg) implies of j, into kr. */
static void cond_bounds(const rj_graph *g, int32_t id, int ri, int rj, bool neg, key_range *kr, int depth) {
    const node *n = &g->nodes[id];
    if (depth > KR_DEPTH || n->dtype != RJ_BOOL) return;
    switch (n->op) {
    case RJ_OP_LOGICAL_AND:
    case RJ_OP_LOGICAL_OR:
        /* a and b: each part's bounds hold; not (a or b) is (not a) and (not b) */
        if ((n->op == RJ_OP_LOGICAL_AND) == !neg)
            for (int s = 0; s < 2; s++) {
                const node *o = &g->nodes[n->in[s]];
                cond_bounds(g, n->in[s], operand_dim(g, n, o, ri), operand_dim(g, n, o, rj), neg, kr, depth + 1);
            }
        break;
    case RJ_OP_LOGICAL_NOT: {
        const node *o = &g->nodes[n->in[0]];
        cond_bounds(g, n->in[0], operand_dim(g, n, o, ri), operand_dim(g, n, o, rj), !neg, kr, depth + 1);
        break;
    }
    case RJ_OP_RESHAPE: {
        const node *x = &g->nodes[n->in[0]];
        int xi_ = ri < 0 ? -1 : reshape_dim(g, n, x, ri), xj = rj < 0 ? -1 : reshape_dim(g, n, x, rj);
        if (xi_ != -2 && xj != -2) cond_bounds(g, n->in[0], xi_, xj, neg, kr, depth + 1);
        break;
    }
    case RJ_OP_LT:
    case RJ_OP_LE:
    case RJ_OP_GT:
    case RJ_OP_GE:
    case RJ_OP_EQ:
    case RJ_OP_NE:
        compare_bounds(g, n, ri, rj, neg, kr, depth);
        break;
    default:
        break;
    }
}

static bool is_minus_inf(const node *n) {
    return n->op == RJ_OP_SCALAR && dtype_is_float(n->dtype) && n->fval == -INFINITY;
}

/* Scores id with F's i and j at dims ri and rj: where(keep, x, -inf), where(hide, -inf, x)
 * and masked_fill(x, hide, -inf), nested, and what their conditions bound. */
static void score_bounds(const rj_graph *g, int32_t id, int ri, int rj, key_range *kr, int depth) {
    const node *n = &g->nodes[id];
    if (depth > KR_DEPTH) return;
    int32_t cond = -1, x = -1;
    bool neg = false;
    if (n->op == RJ_OP_WHERE && is_minus_inf(&g->nodes[n->in[2]])) {
        cond = n->in[0], x = n->in[1];
    } else if (n->op == RJ_OP_WHERE && is_minus_inf(&g->nodes[n->in[1]])) {
        cond = n->in[0], x = n->in[2], neg = true;
    } else if (n->op == RJ_OP_MASKED_FILL && n->fval == -INFINITY) {
        cond = n->in[1], x = n->in[0], neg = true;
    } else {
        return;
    }
    const node *c = &g->nodes[cond], *xn = &g->nodes[x];
    cond_bounds(g, cond, operand_dim(g, n, c, ri), operand_dim(g, n, c, rj), neg, kr, depth + 1);
    score_bounds(g, x, operand_dim(g, n, xn, ri), operand_dim(g, n, xn, rj), kr, depth + 1);
}

key_range key_range_of(const rj_graph *g, int32_t scores) {
    key_range kr = {0};
    score_bounds(g, scores, 1, 2, &kr, 0);
    return kr;
}
