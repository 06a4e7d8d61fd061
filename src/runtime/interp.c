/*
 * interp.c — the reference interpreter: the oracle every backend is tested against.
 *
 * It is deliberately naive. Nodes are evaluated one at a time in graph order, each into its
 * own freshly allocated buffer, padded tensors included; every element is visited through a
 * general index odometer and loaded through an explicit broadcasting index map. Arithmetic
 * runs on one scalar at a time in double (floating types; the result is rounded to the node's
 * dtype after each op, as f32 hardware would) or in wrapping 64-bit integers (integer and
 * bool types). Reductions accumulate in double or int64. Nothing here is fast, and nothing
 * here is clever: if a backend and this file disagree, this file is presumed right.
 *
 * Jagged values are stored packed: the rows of item b start at the prefix sum of the lengths
 * before it (per `same` class). Inputs with holes are packed on entry and outputs are
 * scattered into the caller's layout on exit.
 *
 * It is the one backend that reads the graph while it runs (run_view.g): evaluating it node by
 * node is what it is for. The sizes, offsets, inputs and outputs of the run come from the
 * resolved view, as every other backend's do.
 */
#include <float.h>
#include <math.h>
#include <string.h>

#include "runtime.h"

typedef union elem {
    double f;
    int64_t i;
} elem;

/* A materialised value and its run-time shape. */
typedef struct ival {
    void *data;
    size_t bytes;
    rj_dtype dtype;
    int rank;
    int rp;                 /* ragged dim or -1 */
    int bd;                 /* the dim indexing its items: rp - 1, or 0 for a row of columns [B, 1, j] */
    int64_t ext[RJ_MAX_RANK];
    const int64_t *lens;    /* rp >= 0: length of each item's ragged dim */
    const int64_t *poff;    /* rp >= 0: packed row offsets (B+1) */
    const int64_t *sq;      /* pair (dims rp and rp + 1 ragged): each item's block of len_b x
                             * lens2[b] rows starts at row sq[b] (B+1), else NULL */
    const int64_t *lens2;   /* pair: the lengths of dim rp + 1 (lens, or another class's) */
    int64_t inner;          /* elements per row (jagged) */
    int64_t numel;          /* elements in all */
} ival;

typedef struct interp {
    rj_ctx *ctx;
    const rj_graph *g;
    const run_view *v;      /* the resolved run */
    ival *vals;
    int64_t **lens, **poff; /* per symbol root, lengths and packed offsets */
    int64_t batch_alloc;    /* size of each lens/poff array */
} interp;

/* ---- scalar conversions ------------------------------------------------------------------ */

static bool is_f(rj_dtype t) { return dtype_is_float(t); }

static elem load(const void *p, rj_dtype t, int64_t k) {
    elem e;
    switch (t) {
    case RJ_BOOL: e.i = ((const uint8_t *)p)[k] != 0; break;
    case RJ_I32: e.i = ((const int32_t *)p)[k]; break;
    case RJ_I64: e.i = ((const int64_t *)p)[k]; break;
    case RJ_F32: e.f = ((const float *)p)[k]; break;
    case RJ_F16:
    case RJ_BF16: e.f = half_to_f32(((const uint16_t *)p)[k], t == RJ_BF16); break;
    default: e.f = ((const double *)p)[k]; break;
    }
    return e;
}

static void store(void *p, rj_dtype t, int64_t k, elem e) {
    switch (t) {
    case RJ_BOOL: ((uint8_t *)p)[k] = e.i != 0; break;
    case RJ_I32: ((int32_t *)p)[k] = (int32_t)(uint32_t)(uint64_t)e.i; break;
    case RJ_I64: ((int64_t *)p)[k] = e.i; break;
    case RJ_F32: ((float *)p)[k] = (float)e.f; break;
    case RJ_F16:
    case RJ_BF16: ((uint16_t *)p)[k] = half_from_f32((float)e.f, t == RJ_BF16); break;
    default: ((double *)p)[k] = e.f; break;
    }
}

/* A float of type t at t's precision: f32 rounds once, a 16-bit format after an f32 rounding
 * (as the compiled code rounds its f32 result). */
static double round_to(double v, rj_dtype t) {
    if (t == RJ_F32) return (double)(float)v;
    return dtype_is_half(t) ? half_round(v, t == RJ_BF16) : v;
}

static elem conv(elem e, rj_dtype from, rj_dtype to) {
    elem r;
    if (to == RJ_BOOL) {
        r.i = is_f(from) ? e.f != 0 || isnan(e.f) : e.i != 0;
    } else if (is_f(to)) {
        r.f = round_to(is_f(from) ? e.f : (double)e.i, to);
    } else if (is_f(from)) {
        r.i = cast_float_to_int(e.f, to);
    } else {
        r.i = to == RJ_I32 ? (int64_t)(int32_t)(uint32_t)(uint64_t)e.i : e.i;
    }
    return r;
}

/* Rounds a double result to the precision of t, so f32 and 16-bit chains round after every op. */
static elem fin(elem e, rj_dtype t) {
    if (is_f(t)) e.f = round_to(e.f, t);
    if (t == RJ_I32) e.i = (int64_t)(int32_t)(uint32_t)(uint64_t)e.i;
    return e;
}

/* ---- scalar ops -------------------------------------------------------------------------- */

static int64_t ipow(int64_t a, int64_t e) {
    if (e < 0) return a == 1 ? 1 : a == -1 ? ((e & 1) ? -1 : 1) : 0;
    uint64_t r = 1, x = (uint64_t)a;
    while (e) {
        if (e & 1) r *= x;
        x *= x;
        e >>= 1;
    }
    return (int64_t)r;
}

static elem unary(rj_op op, rj_dtype t, elem a) {
    elem r;
    if (!is_f(t)) {
        uint64_t u = (uint64_t)a.i;
        switch (op) {
        case RJ_OP_NEG: r.i = (int64_t)(0 - u); break;
        case RJ_OP_ABS: r.i = a.i < 0 ? (int64_t)(0 - u) : a.i; break;
        case RJ_OP_SGN: r.i = (a.i > 0) - (a.i < 0); break;
        case RJ_OP_RELU: r.i = a.i > 0 ? a.i : 0; break;
        case RJ_OP_LOGICAL_NOT: r.i = a.i == 0; break;
        default: r.i = 0; break; /* float-only ops never see integers (promoted) */
        }
        return r;
    }
    double x = a.f;
    switch (op) {
    case RJ_OP_NEG: r.f = -x; break;
    case RJ_OP_ABS: r.f = fabs(x); break;
    case RJ_OP_SGN: r.f = (double)((x > 0) - (x < 0)); break;
    case RJ_OP_RELU: r.f = x < 0 ? 0.0 : x; break;
    /* gelu's two forms without the cancellation of 1 + erf(t) and 1 + tanh(u) in the negative
     * tail (the same functions; expand.c spells them so for every target) */
    case RJ_OP_GELU: r.f = 0.5 * x * erfc(-x * M_SQRT1_2); break;
    case RJ_OP_GELU_TANH:
        r.f = x / (1.0 + exp(-2.0 * 0.7978845608028654 * (x + 0.044715 * x * x * x)));
        break;
    case RJ_OP_SILU: r.f = x / (1.0 + exp(-x)); break;
    case RJ_OP_SIGMOID: r.f = 1.0 / (1.0 + exp(-x)); break;
    case RJ_OP_TANH: r.f = tanh(x); break;
    case RJ_OP_EXP: r.f = exp(x); break;
    case RJ_OP_LOG: r.f = log(x); break;
    case RJ_OP_SQRT: r.f = sqrt(x); break;
    case RJ_OP_RSQRT: r.f = 1.0 / sqrt(x); break;
    case RJ_OP_SIN: r.f = sin(x); break;
    case RJ_OP_COS: r.f = cos(x); break;
    case RJ_OP_LOGICAL_NOT: r.i = !(x != 0 || isnan(x)); break;
    default: r.f = NAN; break;
    }
    return r;
}

/* Binary arithmetic in compute type t (operands already converted to t). */
static elem binary(rj_op op, rj_dtype t, elem a, elem b) {
    elem r;
    if (!is_f(t)) {
        uint64_t x = (uint64_t)a.i, y = (uint64_t)b.i;
        bool bl = t == RJ_BOOL; /* bool + bool is or, bool * bool is and (PyTorch) */
        switch (op) {
        case RJ_OP_ADD: r.i = bl ? (a.i | b.i) : (int64_t)(x + y); break;
        case RJ_OP_SUB: r.i = (int64_t)(x - y); break;
        case RJ_OP_MUL: r.i = bl ? (a.i & b.i) : (int64_t)(x * y); break;
        case RJ_OP_POW: r.i = ipow(a.i, b.i); break;
        case RJ_OP_MAXIMUM: r.i = a.i > b.i ? a.i : b.i; break;
        case RJ_OP_MINIMUM: r.i = a.i < b.i ? a.i : b.i; break;
        default: r.i = 0; break;
        }
        return r;
    }
    double x = a.f, y = b.f;
    switch (op) {
    case RJ_OP_ADD: r.f = x + y; break;
    case RJ_OP_SUB: r.f = x - y; break;
    case RJ_OP_MUL: r.f = x * y; break;
    case RJ_OP_DIV: r.f = x / y; break;
    case RJ_OP_POW: r.f = pow(x, y); break;
    case RJ_OP_MAXIMUM: r.f = isnan(x) || isnan(y) ? NAN : x > y ? x : y; break;
    case RJ_OP_MINIMUM: r.f = isnan(x) || isnan(y) ? NAN : x < y ? x : y; break;
    default: r.f = NAN; break;
    }
    return r;
}

/* x ** c for a literal exponent c that every target expands (pow_expand, ir.h), each step
 * rounded as the targets' expansion computes it: in f32 for f32 and the 16-bit formats (x*x of
 * an f32 past 1.8e19 is inf, so 1/(x*x) is 0 there), in f64 for f64. The caller rounds the
 * last step to t, once: a 16-bit pow is one op, one rounding (the guide). */
static elem pow_literal(pow_expansion px, elem a, rj_dtype t) {
    double x = a.f;
    if (dtype_is_half(t)) t = RJ_F32;
    switch (px) {
    case POWX_ONE: break;
    case POWX_SQUARE: x = x * x; break;
    case POWX_CUBE: x = round_to(x * x, t) * x; break;
    case POWX_SQRT: x = sqrt(x); break;
    case POWX_RSQRT: x = 1.0 / round_to(sqrt(x), t); break;
    case POWX_RECIP_SQUARE: x = 1.0 / round_to(x * x, t); break;
    default: x = 1.0 / x; break;
    }
    return (elem){.f = x};
}

static bool truth(elem a, rj_dtype t) {
    return is_f(t) ? (a.f != 0 || isnan(a.f)) : a.i != 0;
}

/* op applied to x and y of one type (floats compared as floats, integers as integers) */
#define COMPARE(op, x, y)                                                                    \
    ((op) == RJ_OP_EQ ? (x) == (y) : (op) == RJ_OP_NE ? (x) != (y) : (op) == RJ_OP_LT ? (x) < (y) \
     : (op) == RJ_OP_LE ? (x) <= (y) : (op) == RJ_OP_GT ? (x) > (y) : (x) >= (y))

static int64_t compare(rj_op op, rj_dtype t, elem a, elem b) {
    return is_f(t) ? COMPARE(op, a.f, b.f) : COMPARE(op, a.i, b.i);
}

/* ---- indices ----------------------------------------------------------------------------- */

static int64_t ext_at(const ival *v, const int64_t *idx, int k) {
    if (k != v->rp && !(v->sq && k == v->rp + 1)) return v->ext[k];
    int64_t b = idx[v->bd];
    return b >= v->ext[v->bd] ? 0 : k == v->rp ? v->lens[b] : v->lens2[b];
}

/* Moves idx to the first valid index at or after it, given that dims left of `from` hold valid
 * positions and the others are 0. A dim of extent 0 at the current position (a dense 0, or an
 * empty row of the ragged dim) leaves nothing to visit to its right, so the walk advances the
 * dims before it at once instead of stepping through that empty subspace: pad(x, len=2^40) of
 * an empty batch is not 2^43 steps. */
static bool idx_settle(const ival *v, int64_t *idx, int pinned, int from) {
    for (;;) {
        int e = from;
        while (e < v->rank && idx[e] < ext_at(v, idx, e)) e++;
        if (e == v->rank) return true;
        int k = e - 1;
        for (; k >= 0; k--) {
            if (k == pinned) continue;
            if (++idx[k] < ext_at(v, idx, k)) break;
            idx[k] = 0;
        }
        if (k < 0) return false;
        from = k + 1;
    }
}

/* Advances idx over all valid indices of v (dim `pinned` held at 0). */
static bool idx_next(const ival *v, int64_t *idx, int pinned) {
    int k = v->rank - 1;
    for (; k >= 0; k--) {
        if (k == pinned) continue;
        if (++idx[k] < ext_at(v, idx, k)) break;
        idx[k] = 0;
    }
    return k >= 0 && idx_settle(v, idx, pinned, k + 1);
}

/* An empty value has no valid index, however large its other dims. */
static bool idx_first(const ival *v, int64_t *idx, int pinned) {
    memset(idx, 0, sizeof(int64_t) * RJ_MAX_RANK);
    return v->numel > 0 && idx_settle(v, idx, pinned, 0);
}

/* Linear element index in v of the result index idx (of rank R), with broadcasting: v's dims
 * align with the trailing dims of the result, and a dense dim of extent 1 reads index 0. */
static int64_t elem_at(const ival *v, const int64_t *idx, int R) {
    int shift = R - v->rank;
    int64_t off = 0;
    int k = 0;
    if (v->sq) { /* a pair: the item's block, row-major */
        int64_t b = idx[shift + v->bd];
        off = v->sq[b] + idx[shift + v->rp] * v->lens2[b] + idx[shift + v->rp + 1];
        k = v->rp + 2;
    } else if (v->rp >= 0) {
        off = v->poff[idx[shift + v->bd]] + idx[shift + v->rp];
        k = v->rp + 1;
    }
    /* per head ([B, H, j, D]): the rows' other dims in order, the heads among them (node_phys_order) */
    for (int h = v->bd + 1; v->rp >= 0 && h < v->rp; h++) off = off * v->ext[h] + (v->ext[h] == 1 ? 0 : idx[shift + h]);
    for (; k < v->rank; k++) off = off * v->ext[k] + (v->ext[k] == 1 ? 0 : idx[shift + k]);
    return off;
}

/* ---- values ------------------------------------------------------------------------------ */

static rj_status val_alloc(interp *in, const node *n, ival *v) {
    const rj_graph *g = in->g;
    memset(v, 0, sizeof *v);
    v->dtype = n->dtype;
    v->rank = n->rank;
    v->rp = dim_ragged_pos(g, n);
    v->bd = node_is_column(g, n) || node_is_headed(g, n) ? 0 : v->rp - 1;
    for (int k = 0; k < n->rank; k++) v->ext[k] = run_dim(in->v, n->dims[k]);
    /* the extents that multiply to the element count: the batch dim is folded into the rows */
    int64_t fact[RJ_MAX_RANK], numel;
    int nf = 0;
    bool pair = node_stores_pair(g, n);
    for (int k = 0; k < n->rank; k++) {
        if (k == v->bd || (pair && k == v->rp + 1)) continue;
        fact[nf] = v->ext[k];
        if (k == v->rp) {
            int32_t r = in->v->plan->sym[dim_sym(n->dims[k])].root;
            v->lens = in->lens[r];
            v->poff = in->poff[r];
            if (pair) { /* the blocks of the pair of j and the next dim's class (ir.h, pair_key) */
                int32_t r2 = in->v->plan->sym[dim_sym(n->dims[k + 1])].root;
                v->lens2 = in->lens[r2];
                v->sq = run_pair_off(in->v, pair_key(g->nsym, r, r2));
            }
            fact[nf] = pair ? v->sq[v->ext[v->bd]] : v->poff[v->ext[v->bd]];
        }
        nf++;
    }
    /* NumPy's rule (util.h): an empty value's other dims must fit too, so that products of
     * any of them (inner below, the index arithmetic) cannot overflow */
    if (!shape_count(nf, fact, &numel, NULL))
        return ctx_fail(in->ctx, RJ_ERR_OVERFLOW, "interp: node %d is too large",
                        (int)(n - g->nodes));
    v->numel = numel;
    v->inner = 1;
    for (int k = v->bd + 1; v->rp >= 0 && k < v->rank; k++)
        if (k != v->rp && !(pair && k == v->rp + 1)) v->inner *= v->ext[k];
    if (!bytes_of(numel, rj_dtype_size(n->dtype), &v->bytes))
        return ctx_fail(in->ctx, RJ_ERR_OVERFLOW, "interp: node %d is too large",
                        (int)(n - g->nodes));
    v->bytes = v->bytes ? v->bytes : 1;
    rj_status s = run_reserve(in->v, (int64_t)v->bytes, "the value of node", (int)(n - g->nodes));
    if (s) return s;
    v->data = mem_zalloc(in->ctx, v->bytes);
    return v->data ? RJ_OK : RJ_ERR_NOMEM;
}

/* Copies an input into packed form (rows of a view with holes are gathered). */
static void eval_input(interp *in, const node *n, ival *v, const run_in *ib) {
    size_t es = rj_dtype_size(n->dtype);
    if (v->rp < 0 || v->sq) { /* dense, or blocks: laid out as here */
        if (v->bytes && ib->numel) memcpy(v->data, ib->data, (size_t)ib->numel * es);
        return;
    }
    const run_sym *r = &in->v->sym[dim_sym(n->dims[v->rp])];
    int64_t B = v->ext[v->bd];
    for (int64_t b = 0; b < B; b++) {
        int64_t l = row_len(r->off, r->len, b);
        if (l)
            memcpy((char *)v->data + (size_t)(v->poff[b] * v->inner) * es,
                   (const char *)ib->data + (size_t)(r->off[b] * v->inner) * es,
                   (size_t)(l * v->inner) * es);
    }
}

/* The type operand o is converted to for an op computed in ct: a literal in a 16-bit op is an
 * f32 (the compiled code's f32 arithmetic takes it unrounded, as PyTorch's opmath does). */
static rj_dtype operand_t(const node *o, rj_dtype ct) {
    return o->weak && dtype_is_half(ct) ? RJ_F32 : ct;
}

static void eval_elementwise(interp *in, const node *n, ival *v) {
    const rj_graph *g = in->g;
    rj_dtype ct = node_compute_dtype(g, n);
    int64_t idx[RJ_MAX_RANK];
    for (bool ok = idx_first(v, idx, -1); ok; ok = idx_next(v, idx, -1)) {
        elem a[3], r;
        for (int i = 0; i < n->nin; i++) {
            const ival *o = &in->vals[n->in[i]];
            a[i] = load(o->data, o->dtype, elem_at(o, idx, n->rank));
        }
        const node *x = &g->nodes[n->in[0]];
        switch (op_table[n->op].kind) {
        case KIND_UNARY:
            r = unary(n->op, ct, conv(a[0], x->dtype, ct));
            r = op_table[n->op].rule == RULE_BOOL ? r : fin(r, ct);
            break;
        case KIND_BINARY: {
            const node *y = &g->nodes[n->in[1]];
            elem p = conv(a[0], x->dtype, operand_t(x, ct)), q = conv(a[1], y->dtype, operand_t(y, ct));
            pow_expansion px = n->op == RJ_OP_POW && is_f(ct) && y->op == RJ_OP_SCALAR ? pow_expand(q.f)
                                                                                      : POWX_NONE;
            r = fin(px != POWX_NONE ? pow_literal(px, p, ct) : binary(n->op, ct, p, q), ct);
            break;
        }
        case KIND_COMPARE:
            if (n->op == RJ_OP_LOGICAL_AND || n->op == RJ_OP_LOGICAL_OR) {
                bool p = truth(a[0], x->dtype), q = truth(a[1], g->nodes[n->in[1]].dtype);
                r.i = n->op == RJ_OP_LOGICAL_AND ? (p && q) : (p || q);
            } else {
                const node *y = &g->nodes[n->in[1]];
                r.i = compare(n->op, ct, conv(a[0], x->dtype, operand_t(x, ct)), conv(a[1], y->dtype, operand_t(y, ct)));
            }
            break;
        case KIND_SELECT:
            if (n->op == RJ_OP_WHERE) {
                int pick = a[0].i ? 1 : 2;
                r = conv(a[pick], g->nodes[n->in[pick]].dtype, ct);
            } else {
                r = a[1].i ? conv((elem){.f = n->fval}, RJ_F64, ct) : a[0];
            }
            break;
        default: /* CAST */
            r = conv(a[0], x->dtype, n->dtype);
            break;
        }
        store(v->data, v->dtype, elem_at(v, idx, n->rank), r);
    }
}

/* Input index (of x's rank) for output index oi of a reduction over `axis`. */
static void reduce_src(const node *n, const int64_t *oi, int xrank, int64_t *xi) {
    int k = 0;
    for (int d = 0; d < xrank; d++) {
        if (d == n->axis) {
            xi[d] = 0;
            if (n->keepdim) k++;
        } else {
            xi[d] = oi[k++];
        }
    }
}

static void eval_reduce(interp *in, const node *n, ival *v) {
    const ival *x = &in->vals[n->in[0]];
    bool fl = is_f(x->dtype);
    int64_t oi[RJ_MAX_RANK], xi[RJ_MAX_RANK];
    for (bool ok = idx_first(v, oi, -1); ok; ok = idx_next(v, oi, -1)) {
        reduce_src(n, oi, x->rank, xi);
        int64_t cnt = ext_at(x, xi, n->axis);
        op_identity_value id = op_identity(n->op, x->dtype, false);
        double fa = id.f;
        long double sum = 0; /* sums in extended precision: the oracle must beat the JIT's */
        int64_t ia = id.i;
        for (int64_t r = 0; r < cnt; r++) {
            xi[n->axis] = r;
            elem e = load(x->data, x->dtype, elem_at(x, xi, x->rank));
            if (fl) {
                switch (n->op) {
                case RJ_OP_MAX: fa = isnan(e.f) || isnan(fa) ? NAN : fmax(fa, e.f); break;
                case RJ_OP_MIN: fa = isnan(e.f) || isnan(fa) ? NAN : fmin(fa, e.f); break;
                case RJ_OP_PROD: fa *= e.f; break;
                default: sum += e.f; break;
                }
            } else {
                switch (n->op) {
                case RJ_OP_MAX: ia = e.i > ia ? e.i : ia; break;
                case RJ_OP_MIN: ia = e.i < ia ? e.i : ia; break;
                case RJ_OP_PROD: ia = (int64_t)((uint64_t)ia * (uint64_t)e.i); break;
                default: ia = (int64_t)((uint64_t)ia + (uint64_t)e.i); break;
                }
            }
        }
        elem r;
        bool sums = n->op == RJ_OP_SUM || n->op == RJ_OP_MEAN;
        if (fl && sums) r.f = (double)(n->op == RJ_OP_MEAN ? sum / (long double)cnt : sum);
        else if (fl) r.f = fa;
        else r.i = ia;
        store(v->data, v->dtype, elem_at(v, oi, n->rank), r);
    }
}

static void eval_softmax(interp *in, const node *n, ival *v) {
    const ival *x = &in->vals[n->in[0]];
    int64_t idx[RJ_MAX_RANK];
    for (bool ok = idx_first(x, idx, n->axis); ok; ok = idx_next(x, idx, n->axis)) {
        int64_t cnt = ext_at(x, idx, n->axis);
        double m = -INFINITY;
        long double s = 0;
        for (int64_t r = 0; r < cnt; r++) {
            idx[n->axis] = r;
            double e = conv(load(x->data, x->dtype, elem_at(x, idx, x->rank)), x->dtype, RJ_F64).f;
            m = isnan(e) || isnan(m) ? NAN : fmax(m, e);
        }
        for (int64_t r = 0; r < cnt; r++) {
            idx[n->axis] = r;
            double e = conv(load(x->data, x->dtype, elem_at(x, idx, x->rank)), x->dtype, RJ_F64).f;
            s += exp(e - m);
        }
        for (int64_t r = 0; r < cnt; r++) {
            idx[n->axis] = r;
            double e = conv(load(x->data, x->dtype, elem_at(x, idx, x->rank)), x->dtype, RJ_F64).f;
            elem o = {.f = n->op == RJ_OP_SOFTMAX ? (double)(exp(e - m) / s) : e - m - (double)logl(s)};
            store(v->data, v->dtype, elem_at(v, idx, n->rank), o);
        }
        idx[n->axis] = 0;
    }
}

static void eval_norm(interp *in, const node *n, ival *v) {
    const rj_graph *g = in->g;
    const ival *x = &in->vals[n->in[0]];
    const ival *w = (n->ival & 1) ? &in->vals[n->in[1]] : NULL;
    const ival *bias = (n->ival & 2) ? &in->vals[n->in[n->nin - 1]] : NULL;
    int k = n->axis, lead = x->rank - k;
    int64_t cnt = 1;
    for (int d = lead; d < x->rank; d++) cnt *= x->ext[d];
    double eps = n->fval >= 0 ? n->fval : (dtype_compute(g->nodes[n->in[0]].dtype) == RJ_F32 ? FLT_EPSILON
                                                                               : DBL_EPSILON);
    /* iterate over the leading index; the normalised block is contiguous in both layouts */
    ival lv = *x;
    lv.rank = lead;
    int64_t idx[RJ_MAX_RANK];
    for (bool ok = idx_first(&lv, idx, -1); ok; ok = idx_next(&lv, idx, -1)) {
        for (int d = lead; d < x->rank; d++) idx[d] = 0;
        int64_t base = elem_at(x, idx, x->rank), obase = elem_at(v, idx, n->rank);
        /* two passes in extended precision, the mean shifted by the first element: a constant
         * row has mean exactly that element and variance exactly 0, however large it is */
        long double shift = cnt ? load(x->data, x->dtype, base).f : 0, acc = 0, acc2 = 0;
        for (int64_t t = 0; t < cnt; t++) acc += load(x->data, x->dtype, base + t).f - shift;
        long double mean = cnt ? shift + acc / (long double)cnt : NAN;
        for (int64_t t = 0; t < cnt; t++) {
            long double e = load(x->data, x->dtype, base + t).f;
            acc2 += n->op == RJ_OP_LAYER_NORM ? (e - mean) * (e - mean) : e * e;
        }
        /* the variance and its reciprocal root in extended precision too: the variance of f64
         * values beyond about 1e154 is beyond a double (where long double is wider) */
        long double var = cnt ? acc2 / (long double)cnt : NAN;
        long double inv = 1.0L / sqrtl(var + eps);
        for (int64_t t = 0; t < cnt; t++) {
            double e = load(x->data, x->dtype, base + t).f;
            double y = (double)(n->op == RJ_OP_LAYER_NORM ? (e - mean) * inv : e * inv);
            if (w) y *= load(w->data, w->dtype, t).f;
            if (bias) y += load(bias->data, bias->dtype, t).f;
            store(v->data, v->dtype, obase + t, (elem){.f = y});
        }
    }
}

static void eval_pad(interp *in, const node *n, ival *v) {
    const ival *x = &in->vals[n->in[0]];
    elem pv = conv((elem){.f = n->fval}, RJ_F64, n->dtype);
    int64_t idx[RJ_MAX_RANK];
    for (bool ok = idx_first(v, idx, -1); ok; ok = idx_next(v, idx, -1)) {
        elem e;
        if (n->op == RJ_OP_PAD) /* a pair's column too */
            e = idx[1] < x->lens[idx[0]] && (!x->sq || idx[2] < x->lens2[idx[0]])
                    ? load(x->data, x->dtype, elem_at(x, idx, n->rank)) : pv;
        else e = load(x->data, x->dtype, elem_at(x, idx, n->rank));
        store(v->data, v->dtype, elem_at(v, idx, n->rank), e);
    }
}

/* ---- index ops and views ----------------------------------------------------------------- */

/* The size an index of n may not reach at position idx of its index tensor. */
static int64_t index_bound(const interp *in, const node *n, const int64_t *idx, bool *per_item) {
    const ival *x = &in->vals[n->in[0]];
    int axis = n->op == RJ_OP_EMBEDDING ? 0 : n->axis;
    *per_item = x->rp == axis;
    return *per_item ? x->lens[idx[0]] : x->ext[axis];
}

/* Every index in range, checked over the index tensor in its packed order (checks.c). */
static rj_status check_indices(interp *in, const node *n) {
    int32_t src = index_tensor(in->g, n);
    const ival *iv = &in->vals[src];
    int64_t idx[RJ_MAX_RANK];
    for (bool ok = idx_first(iv, idx, -1); ok; ok = idx_next(iv, idx, -1)) {
        int64_t k = load(iv->data, iv->dtype, elem_at(iv, idx, iv->rank)).i;
        bool per_item;
        int64_t bound = index_bound(in, n, idx, &per_item);
        if (k >= 0 && k < bound) continue;
        sbuf w;
        sbuf_init(&w, in->ctx);
        print_operand_what(&w, in->g, src);
        index_fault f = {.op = op_table[n->op].name, .what = w.s ? w.s : "the index", .rank = iv->rank,
                         .has_value = in->g->nodes[src].op == RJ_OP_INPUT, /* as compiled targets */
                         .value = k, .bound = bound, .per_item = per_item};
        memcpy(f.at, idx, sizeof(int64_t) * (size_t)iv->rank);
        rj_status s = w.failed ? RJ_ERR_NOMEM : index_fault_fail(in->ctx, &f);
        sbuf_free(&w);
        return s;
    }
    return RJ_OK;
}

static rj_status eval_index(interp *in, const node *n, ival *v) {
    if (!op_is_generator(n->op)) {
        rj_status s = check_indices(in, n);
        if (s) return s;
    }
    const ival *x = n->nin ? &in->vals[n->in[0]] : NULL, *iv = n->nin > 1 ? &in->vals[n->in[1]] : NULL;
    int64_t idx[RJ_MAX_RANK], xi[RJ_MAX_RANK];
    for (bool ok = idx_first(v, idx, -1); ok; ok = idx_next(v, idx, -1)) {
        elem e;
        if (n->op == RJ_OP_POSITIONS) {
            e.i = idx[1];
        } else if (n->op == RJ_OP_ARANGE) {
            e = conv((elem){.i = idx[0]}, RJ_I64, v->dtype);
        } else if (n->op == RJ_OP_FULL) {
            e = dtype_is_float(v->dtype) ? (elem){.f = n->fval} : (elem){.i = n->ival};
        } else if (n->op == RJ_OP_EMBEDDING) {
            int s = iv->rank;
            int64_t row = load(iv->data, iv->dtype, elem_at(iv, idx, s)).i;
            e = load(x->data, x->dtype, row * x->ext[1] + idx[s]);
        } else if (n->op == RJ_OP_INDEX_SELECT) {
            memcpy(xi, idx, sizeof xi);
            xi[n->axis] = load(iv->data, iv->dtype, idx[n->axis]).i;
            e = load(x->data, x->dtype, elem_at(x, xi, n->rank));
        } else { /* gather, take_along_dim: x and the index broadcast (elem_at reads 0 there) */
            memcpy(xi, idx, sizeof xi);
            xi[n->axis] = load(iv->data, iv->dtype, elem_at(iv, idx, n->rank)).i;
            e = load(x->data, x->dtype, elem_at(x, xi, n->rank));
        }
        store(v->data, v->dtype, elem_at(v, idx, n->rank), e);
    }
    return RJ_OK;
}

/* A transposed jagged [B, D, j] stands for its operand: per-item products read that. With
 * D = 1 it is also a row of columns [B, 1, j], which elementwise ops read as any column: such
 * a node is evaluated too (eval_view), so both readers find what they read. */
static bool jagged_t(const interp *in, const node *n) {
    return n->op == RJ_OP_TRANSPOSE && n->rank == 3 && dim_ragged_pos(in->g, n) == 2;
}

/* Per-item products (ragjit.h): q kᵀ into blocks, p v, and xᵀ y summed over each item's rows. */
static void eval_item_matmul(interp *in, const node *n, ival *v) {
    const rj_graph *g = in->g;
    const node *xn = &g->nodes[n->in[0]], *wn = &g->nodes[n->in[1]];
    const ival *x = &in->vals[jagged_t(in, xn) ? xn->in[0] : n->in[0]];
    const ival *w = &in->vals[jagged_t(in, wn) ? wn->in[0] : n->in[1]];
    int64_t idx[RJ_MAX_RANK], a[RJ_MAX_RANK] = {0}, c[RJ_MAX_RANK] = {0};
    for (bool ok = idx_first(v, idx, -1); ok; ok = idx_next(v, idx, -1)) {
        int64_t b = idx[0], cnt;
        long double acc = 0;
        if (jagged_t(in, wn)) cnt = x->ext[2];        /* q kᵀ: over D */
        else if (jagged_t(in, xn)) cnt = x->lens[b];  /* xᵀ y: over the item's rows */
        else cnt = x->lens2[b];                       /* p v: over the block's columns */
        for (int64_t t = 0; t < cnt; t++) {
            a[0] = c[0] = b;
            if (jagged_t(in, wn)) a[1] = idx[1], a[2] = t, c[1] = idx[2], c[2] = t;
            else if (jagged_t(in, xn)) a[1] = t, a[2] = idx[1], c[1] = t, c[2] = idx[2];
            else a[1] = idx[1], a[2] = t, c[1] = t, c[2] = idx[2];
            acc += (long double)load(x->data, x->dtype, elem_at(x, a, 3)).f * load(w->data, w->dtype, elem_at(w, c, 3)).f;
        }
        store(v->data, v->dtype, elem_at(v, idx, n->rank), fin((elem){.f = (double)acc}, v->dtype));
    }
}

/* Per (item, head): [B, H, j, E] @ [B, H, E, j] and [B, H, j, j] @ [B, H, j, D], each (b, h) a
 * plain product whose contracted extent may be the item's length. */
static void eval_head_matmul(interp *in, const node *n, ival *v) {
    const ival *x = &in->vals[n->in[0]], *w = &in->vals[n->in[1]];
    int64_t idx[RJ_MAX_RANK], a[RJ_MAX_RANK], c[RJ_MAX_RANK];
    for (bool ok = idx_first(v, idx, -1); ok; ok = idx_next(v, idx, -1)) {
        memcpy(a, idx, sizeof a);
        memcpy(c, idx, sizeof c);
        int64_t cnt = ext_at(x, idx, 3);
        int64_t group = w->ext[1] && x->ext[1] / w->ext[1] ? x->ext[1] / w->ext[1] : 1;
        c[1] = idx[1] / group; /* GQA (SDPA's enable_gqa): kv head h / (H / Hkv) */
        long double acc = 0;
        for (int64_t t = 0; t < cnt; t++) {
            a[3] = t, c[2] = t;
            acc += (long double)load(x->data, x->dtype, elem_at(x, a, 4)).f * load(w->data, w->dtype, elem_at(w, c, 4)).f;
        }
        store(v->data, v->dtype, elem_at(v, idx, n->rank), fin((elem){.f = (double)acc}, v->dtype));
    }
}

/* matmul: every row of x (all dims but the last) times w, summed in double. */
static void eval_matmul(interp *in, const node *n, ival *v) {
    const rj_graph *g = in->g;
    if (node_is_headed(g, &g->nodes[n->in[0]]) && node_is_headed(g, &g->nodes[n->in[1]])) {
        eval_head_matmul(in, n, v);
        return;
    }
    if (g->nodes[n->in[1]].rank == 3 || jagged_t(in, &g->nodes[n->in[0]])) {
        eval_item_matmul(in, n, v);
        return;
    }
    const ival *x = &in->vals[n->in[0]], *w = &in->vals[n->in[1]];
    int R = n->rank;
    int64_t K = x->ext[R - 1], N = v->ext[R - 1];
    int64_t idx[RJ_MAX_RANK];
    for (bool ok = idx_first(v, idx, -1); ok; ok = idx_next(v, idx, -1)) {
        int64_t col = idx[R - 1];
        double acc = 0;
        for (int64_t k = 0; k < K; k++) {
            idx[R - 1] = k;
            double a = load(x->data, x->dtype, elem_at(x, idx, R)).f;
            double b = load(w->data, w->dtype, n->ival ? col * K + k : k * N + col).f;
            acc += a * b;
        }
        idx[R - 1] = col;
        store(v->data, v->dtype, elem_at(v, idx, R), fin((elem){.f = acc}, v->dtype));
    }
}

/* attention(F, v): per row (b, i) (and head h), softmax over the item's columns j of F, then
 * those weights times v's rows, as softmax and the product p v compute them (in double); the
 * safe form gives a row of -inf scores 0 instead of NaN. Query head h reads value head
 * h / (H / Hkv). */
static void eval_attention(interp *in, const node *n, ival *v) {
    const ival *f = &in->vals[n->in[0]], *x = &in->vals[n->in[1]];
    bool heads = n->rank == 4, user = node_is_headed(in->g, n); /* user: [B, H, j, D], else [B, j, H, D] */
    int64_t group = !heads ? 1 : user ? f->ext[1] / x->ext[1] : f->ext[3] / x->ext[2], dv = v->ext[n->rank - 1];
    int64_t idx[RJ_MAX_RANK], fi[RJ_MAX_RANK] = {0}, xi[RJ_MAX_RANK] = {0};
    int fj = user ? 3 : 2, xj = user ? 2 : 1; /* the key dim of f and of x */
    for (bool ok = idx_first(v, idx, n->rank - 1); ok; ok = idx_next(v, idx, n->rank - 1)) {
        int64_t b = idx[0], len = f->lens2[b]; /* the item's keys */
        fi[0] = xi[0] = b;
        fi[1] = idx[1];
        if (user) fi[2] = idx[2], xi[1] = idx[1] / group;
        else if (heads) fi[3] = idx[2], xi[2] = idx[2] / group;
        double m = -INFINITY;
        long double sum = 0;
        for (int64_t j = 0; j < len; j++) {
            fi[fj] = j;
            double e = conv(load(f->data, f->dtype, elem_at(f, fi, f->rank)), f->dtype, RJ_F64).f;
            m = isnan(e) || isnan(m) ? NAN : fmax(m, e);
        }
        for (int64_t j = 0; j < len; j++) {
            fi[fj] = j;
            sum += exp(conv(load(f->data, f->dtype, elem_at(f, fi, f->rank)), f->dtype, RJ_F64).f - m);
        }
        for (int64_t d = 0; d < dv; d++) {
            long double acc = 0;
            for (int64_t j = 0; j < len && !(n->ival && m == -INFINITY); j++) {
                fi[fj] = j;
                xi[xj] = j;
                xi[x->rank - 1] = d;
                double e = conv(load(f->data, f->dtype, elem_at(f, fi, f->rank)), f->dtype, RJ_F64).f;
                acc += (long double)(exp(e - m) / (double)sum) * conv(load(x->data, x->dtype, elem_at(x, xi, x->rank)), x->dtype, RJ_F64).f;
            }
            idx[n->rank - 1] = d;
            store(v->data, v->dtype, elem_at(v, idx, n->rank), fin((elem){.f = (double)acc}, v->dtype));
        }
        idx[n->rank - 1] = 0;
    }
}

/* reshape: the dims after the kept ones (batch and ragged) re-laid out in C order; transpose
 * of a dense tensor: two dims swapped; narrow: one dim read from its start on. */
static void eval_view(interp *in, const node *n, ival *v) {
    const ival *x = &in->vals[n->in[0]];
    if (n->op == RJ_OP_CAT) { /* along a dense dim: the first operand's elements, then the second's */
        const ival *y = &in->vals[n->in[1]];
        int64_t idx[RJ_MAX_RANK], xi[RJ_MAX_RANK], n1 = x->ext[n->axis];
        for (bool ok = idx_first(v, idx, -1); ok; ok = idx_next(v, idx, -1)) {
            memcpy(xi, idx, sizeof xi);
            bool first = idx[n->axis] < n1; /* x and y may be one value: cat([t, t]) */
            const ival *src = first ? x : y;
            if (!first) xi[n->axis] -= n1;
            elem e = load(src->data, src->dtype, elem_at(src, xi, n->rank));
            store(v->data, v->dtype, elem_at(v, idx, n->rank), conv(e, src->dtype, v->dtype));
        }
        return;
    }
    if (n->op == RJ_OP_TRANSPOSE) {
        int64_t idx[RJ_MAX_RANK], xi[RJ_MAX_RANK];
        for (bool ok = idx_first(v, idx, -1); ok; ok = idx_next(v, idx, -1)) {
            memcpy(xi, idx, sizeof xi);
            xi[n->axis] = idx[n->ival];
            xi[n->ival] = idx[n->axis];
            store(v->data, v->dtype, elem_at(v, idx, n->rank), load(x->data, x->dtype, elem_at(x, xi, x->rank)));
        }
        return;
    }
    if (n->op == RJ_OP_NARROW) {
        int64_t idx[RJ_MAX_RANK], xi[RJ_MAX_RANK];
        for (bool ok = idx_first(v, idx, -1); ok; ok = idx_next(v, idx, -1)) {
            memcpy(xi, idx, sizeof xi);
            xi[n->axis] += n->ival;
            store(v->data, v->dtype, elem_at(v, idx, n->rank), load(x->data, x->dtype, elem_at(x, xi, x->rank)));
        }
        return;
    }
    int keep = x->rp >= 0 ? x->rp + 1 + (x->sq != NULL) : 0;
    int64_t idx[RJ_MAX_RANK], xi[RJ_MAX_RANK];
    if (x->sq && node_is_headed(in->g, n)) { /* unsqueeze(s, 1) of a pair: (b, 0, i, j) is (b, i, j) */
        for (bool ok = idx_first(v, idx, -1); ok; ok = idx_next(v, idx, -1)) {
            xi[0] = idx[0], xi[1] = idx[2], xi[2] = idx[3];
            store(v->data, v->dtype, elem_at(v, idx, n->rank), load(x->data, x->dtype, elem_at(x, xi, x->rank)));
        }
        return;
    }
    bool to_col = node_is_column(in->g, n), from_col = node_is_column(in->g, &in->g->nodes[n->in[0]]);
    if (to_col != from_col) { /* unsqueeze(x, 1) or squeeze(x, 1): (b, 0, j, ...) is (b, j, ...) */
        for (bool ok = idx_first(v, idx, -1); ok; ok = idx_next(v, idx, -1)) {
            xi[0] = idx[0];
            if (to_col) {
                for (int k = 1; k < x->rank; k++) xi[k] = idx[k + 1];
            } else {
                xi[1] = 0;
                for (int k = 1; k < n->rank; k++) xi[k + 1] = idx[k];
            }
            store(v->data, v->dtype, elem_at(v, idx, n->rank), load(x->data, x->dtype, elem_at(x, xi, x->rank)));
        }
        return;
    }
    for (bool ok = idx_first(v, idx, -1); ok; ok = idx_next(v, idx, -1)) {
        int64_t flat = 0;
        for (int k = keep; k < v->rank; k++) flat = flat * v->ext[k] + idx[k];
        for (int k = x->rank - 1; k >= keep; k--) {
            xi[k] = x->ext[k] ? flat % x->ext[k] : 0;
            flat = x->ext[k] ? flat / x->ext[k] : 0;
        }
        for (int k = 0; k < keep; k++) xi[k] = idx[k];
        store(v->data, v->dtype, elem_at(v, idx, n->rank), load(x->data, x->dtype, elem_at(x, xi, x->rank)));
    }
    RJ_UNUSED(in);
}

/* Scatters a packed value into the output memory with its symbol's addressing. */
static void write_output(interp *in, const ival *v, const run_out *o) {
    size_t es = rj_dtype_size(v->dtype);
    const rj_tensor_info *ti = &o->result.info;
    if (v->rp < 0 || v->sq) { /* dense, or a pair's blocks: laid out as here */
        if (o->numel) memcpy(o->data, v->data, (size_t)o->numel * es);
        return;
    }
    int64_t B = v->ext[v->bd];
    for (int64_t b = 0; b < B; b++) {
        int64_t l = v->lens[b];
        if (l)
            memcpy((char *)o->data + (size_t)(ti->offsets[b] * v->inner) * es,
                   (char *)v->data + (size_t)(v->poff[b] * v->inner) * es,
                   (size_t)(l * v->inner) * es);
    }
    RJ_UNUSED(in);
}

static rj_status setup_lengths(interp *in) {
    const rj_graph *g = in->g;
    const run_view *rv = in->v;
    const run_plan *pl = rv->plan;
    size_t ns = (size_t)(g->nsym ? g->nsym : 1);
    if (!(in->lens = mem_zalloc(in->ctx, ns * sizeof(int64_t *))) ||
        !(in->poff = mem_zalloc(in->ctx, ns * sizeof(int64_t *))))
        return RJ_ERR_NOMEM;
    in->batch_alloc = 0;
    for (int32_t s = 0; s < g->nsym; s++)
        if (pl->sym[s].kind == SYM_RAGGED && rv->sym[s].bound && rv->sym[s].batch > in->batch_alloc)
            in->batch_alloc = rv->sym[s].batch;
    for (int32_t s = 0; s < g->nsym; s++) {
        if (pl->sym[s].kind != SYM_RAGGED || pl->sym[s].root != s) continue;
        /* a class's lengths come from any bound member (run_resolve checked that they agree):
         * the root itself is bound to nothing when no tensor uses it */
        const run_sym *rb = NULL;
        for (int32_t m = s; m < g->nsym && !rb; m++)
            if (rv->sym[m].bound && pl->sym[m].kind == SYM_RAGGED && pl->sym[m].root == s)
                rb = &rv->sym[m];
        if (!rb) continue;
        size_t n = (size_t)in->batch_alloc + 1;
        if (!(in->lens[s] = mem_zalloc(in->ctx, n * sizeof(int64_t))) ||
            !(in->poff[s] = mem_alloc(in->ctx, n * sizeof(int64_t))))
            return RJ_ERR_NOMEM;
        in->poff[s][0] = 0;
        for (int64_t k = 0; k < rb->batch; k++) {
            in->lens[s][k] = row_len(rb->off, rb->len, k);
            in->poff[s][k + 1] = in->poff[s][k] + in->lens[s][k];
        }
    }
    return RJ_OK;
}

static void teardown(interp *in) {
    const rj_graph *g = in->g;
    size_t ns = (size_t)(g->nsym ? g->nsym : 1), n = (size_t)in->batch_alloc + 1;
    if (in->vals)
        for (int32_t i = 0; i < g->n; i++) mem_free(in->ctx, in->vals[i].data, in->vals[i].bytes);
    mem_free(in->ctx, in->vals, (size_t)(g->n ? g->n : 1) * sizeof(ival));
    for (size_t s = 0; s < ns; s++) {
        if (in->lens && in->lens[s]) mem_free(in->ctx, in->lens[s], n * sizeof(int64_t));
        if (in->poff && in->poff[s]) mem_free(in->ctx, in->poff[s], n * sizeof(int64_t));
    }
    mem_free(in->ctx, in->lens, ns * sizeof(int64_t *));
    mem_free(in->ctx, in->poff, ns * sizeof(int64_t *));
}

rj_status interp_run(const run_view *rv) {
    interp in = {.ctx = rv->ctx, .g = rv->g, .v = rv};
    const rj_graph *g = rv->g;
    rj_status s = setup_lengths(&in);
    if (!s && !(in.vals = mem_zalloc(in.ctx, (size_t)(g->n ? g->n : 1) * sizeof(ival))))
        s = RJ_ERR_NOMEM;
    /* only what the outputs need, as compiled programs do: an index op no output reads
     * checks no index */
    uint8_t *live = s ? NULL : mem_alloc(in.ctx, (size_t)(g->n ? g->n : 1));
    if (!s && !live) s = RJ_ERR_NOMEM;
    if (!s) {
        memset(live, 0, (size_t)(g->n ? g->n : 1));
        for (int32_t k = 0; k < g->noutputs; k++) live[g->outputs[k].node] = 1;
        for (int32_t i = g->n - 1; i >= 0; i--)
            if (live[i])
                for (int k = 0; k < g->nodes[i].nin; k++) live[g->nodes[i].in[k]] = 1;
    }
    for (int32_t i = 0; !s && i < g->n; i++) {
        const node *n = &g->nodes[i];
        ival *v = &in.vals[i];
        if (!live[i] || (jagged_t(&in, n) && !node_is_column(g, n))) continue; /* its matmul reads its operand */
        if ((s = val_alloc(&in, n, v))) break;
        switch (op_table[n->op].kind) {
        case KIND_LEAF:
            if (n->op == RJ_OP_SCALAR) {
                elem e = n->weak == WEAK_FLOAT ? (elem){.f = n->fval} : (elem){.i = n->ival};
                store(v->data, v->dtype, 0, e);
            } else {
                for (int32_t k = 0; k < g->ninputs; k++)
                    if (g->inputs[k] == i) eval_input(&in, n, v, &rv->in[k]);
            }
            break;
        case KIND_REDUCE: eval_reduce(&in, n, v); break;
        case KIND_SOFTMAX: eval_softmax(&in, n, v); break;
        case KIND_NORM: eval_norm(&in, n, v); break;
        case KIND_PAD: eval_pad(&in, n, v); break;
        case KIND_INDEX: s = eval_index(&in, n, v); break;
        case KIND_VIEW: eval_view(&in, n, v); break;
        case KIND_MATMUL: eval_matmul(&in, n, v); break;
        case KIND_ATTENTION: eval_attention(&in, n, v); break;
        default: eval_elementwise(&in, n, v); break;
        }
    }
    if (live) mem_free(in.ctx, live, (size_t)(g->n ? g->n : 1));
    for (int32_t k = 0; !s && k < g->noutputs; k++)
        write_output(&in, &in.vals[g->outputs[k].node], &rv->out[k]);
    teardown(&in);
    return s;
}

/* The interpreter runs the graph itself: nothing to compile, no stages of its own. */
const backend backend_reference = {.name = "reference", .target = RJ_TARGET_REFERENCE, .run = interp_run};
