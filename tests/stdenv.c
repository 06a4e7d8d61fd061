/*
 * stdenv.c — the standard test graph, its random data (packed and with holes), binding, and
 * the comparison against the reference interpreter; the corpus of op groups and fused chains,
 * and the checks every GPU target runs on it. See stdenv.h.
 */
#include "stdenv.h"

#include <dlpack/dlpack.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

env env_new(rj_ctx *ctx, rj_dtype ft) {
    env e = {.ft = ft};
    e.g = rj_graph_new(ctx);
    e.B = rj_graph_dense(e.g, "B");
    e.J = rj_graph_ragged(e.g, "j1", e.B);
    e.L = rj_graph_dense(e.g, "L");
    e.x = rj_graph_input(e.g, "x", ft, 3, (rj_dim[]){e.B, e.J, D});
    e.y = rj_graph_input(e.g, "y", ft, 3, (rj_dim[]){e.B, e.J, D});
    e.w = rj_graph_input(e.g, "w", ft, 1, (rj_dim[]){D});
    e.v = rj_graph_input(e.g, "v", ft, 1, (rj_dim[]){D});
    e.m = rj_graph_input(e.g, "m", RJ_BOOL, 3, (rj_dim[]){e.B, e.J, D});
    e.xi = rj_graph_input(e.g, "xi", RJ_I32, 3, (rj_dim[]){e.B, e.J, D});
    e.pb = rj_graph_input(e.g, "pb", ft, 2, (rj_dim[]){e.B, D});
    e.p3 = rj_graph_input(e.g, "p3", ft, 3, (rj_dim[]){e.B, 1, D});
    e.tab = rj_graph_input(e.g, "tab", ft, 2, (rj_dim[]){V, D});
    e.ix = rj_graph_input(e.g, "ix", RJ_I64, 2, (rj_dim[]){e.B, e.J});
    e.sb = RJ_NONE; /* the graphs that use it add it (g_pairs) */
    e.J2 = RJ_DIM_NONE, e.kx = RJ_NONE; /* likewise (std_cross) */
    e.pd = RJ_NONE; /* likewise (dense_pd) */
    return e;
}

data data_new(len_pattern p, rj_dtype ft, uint64_t seed) {
    data d = {0};
    uint64_t s = seed * 1315423911u + (uint64_t)p;
    d.B = make_offsets(p, &s, &d.off);
    d.rows = d.off[d.B];
    for (int64_t b = 0; b < d.B; b++)
        if (d.off[b + 1] - d.off[b] > d.maxlen) d.maxlen = d.off[b + 1] - d.off[b];
    d.x = random_values(ft, d.rows * D, &s);
    d.y = random_values(ft, d.rows * D, &s);
    d.w = random_values(ft, D, &s);
    d.v = random_values(ft, D, &s);
    d.m = random_values(RJ_BOOL, d.rows * D, &s);
    d.xi = random_values(RJ_I32, d.rows * D, &s);
    d.pb = random_values(ft, d.B * D, &s);
    d.p3 = random_values(ft, d.B * D, &s);
    d.tab = random_values(ft, V * D, &s);
    d.ix = malloc(sizeof(int64_t) * (size_t)(d.rows + 1));
    for (int64_t r = 0; r < d.rows; r++) ((int64_t *)d.ix)[r] = rng_int(&s, 0, V - 1);
    for (int64_t b = 0; b < d.B; b++) d.sq += (d.off[b + 1] - d.off[b]) * (d.off[b + 1] - d.off[b]);
    d.sb = random_values(ft, d.sq, &s);
    d.pd = random_values(ft, d.B * (d.maxlen + 3) * D, &s);
    d.off2 = malloc(sizeof(int64_t) * (size_t)(d.B + 1));
    d.off2[0] = 0;
    for (int64_t b = 0; b < d.B; b++) d.off2[b + 1] = d.off2[b] + d.off[d.B - b] - d.off[d.B - 1 - b] + b % 2;
    d.rows2 = d.off2[d.B];
    d.kx = random_values(ft, d.rows2 * D, &s);
    return d;
}

void data_free(data *d) {
    free(d->off), free(d->x), free(d->y), free(d->w), free(d->v), free(d->m), free(d->xi);
    free(d->pb), free(d->p3), free(d->tab), free(d->ix), free(d->sb), free(d->pd), free(d->off2), free(d->kx);
}

/* src's rows (packed by off) at the rows of hoff/hlen, the gaps filled with what no reader
 * may see. */
static void *spread_by(int64_t B, const int64_t *off, const int64_t *hoff, const int64_t *hlen, int64_t hrows,
                       const void *src, rj_dtype t, int64_t inner) {
    size_t es = rj_dtype_size(t), row = es * (size_t)inner;
    char *p = malloc(row * (size_t)(hrows + 1));
    for (int64_t r = 0; r < hrows * inner; r++) {
        switch (t) {
        case RJ_F32:
        case RJ_F64:
        case RJ_F16:
        case RJ_BF16: rj_value_set(t, p, r, NAN); break;
        case RJ_I32: ((int32_t *)p)[r] = 1 << 30; break;
        case RJ_I64: ((int64_t *)p)[r] = (int64_t)1 << 40; break; /* an index far out of range */
        default: ((uint8_t *)p)[r] = 1; break;
        }
    }
    for (int64_t b = 0; b < B; b++) memcpy(p + row * (size_t)hoff[b], (const char *)src + row * (size_t)off[b], row * (size_t)hlen[b]);
    return p;
}

static void *spread_n(const data *d, const holes *h, const void *src, rj_dtype t, int64_t inner) {
    return spread_by(d->B, d->off, h->off, h->len, h->rows, src, t, inner);
}

static void *spread(const data *d, const holes *h, const void *src, rj_dtype t) { return spread_n(d, h, src, t, D); }

holes holes_new(const data *d, rj_dtype ft) {
    holes h = {0};
    h.off = malloc(sizeof(int64_t) * (size_t)(d->B + 1));
    h.len = malloc(sizeof(int64_t) * (size_t)(d->B + 1));
    for (int64_t b = 0; b <= d->B; b++) h.off[b] = d->off[b] + 2 * b;
    for (int64_t b = 0; b < d->B; b++) {
        h.len[b] = d->off[b + 1] - d->off[b];
        h.rows = h.off[b] + h.len[b];
    }
    h.x = spread(d, &h, d->x, ft);
    h.y = spread(d, &h, d->y, ft);
    h.m = spread(d, &h, d->m, RJ_BOOL);
    h.xi = spread(d, &h, d->xi, RJ_I32);
    h.ix = spread_n(d, &h, d->ix, RJ_I64, 1);
    h.off2 = malloc(sizeof(int64_t) * (size_t)(d->B + 1));
    h.len2 = malloc(sizeof(int64_t) * (size_t)(d->B + 1));
    for (int64_t b = 0; b <= d->B; b++) h.off2[b] = d->off2[b] + 3 * b;
    for (int64_t b = 0; b < d->B; b++) {
        h.len2[b] = d->off2[b + 1] - d->off2[b];
        h.rows2 = h.off2[b] + h.len2[b];
    }
    h.kx = spread_by(d->B, d->off2, h.off2, h.len2, h.rows2, d->kx, ft, D);
    return h;
}

void holes_free(holes *h) {
    free(h->off), free(h->len), free(h->x), free(h->y), free(h->m), free(h->xi), free(h->ix);
    free(h->off2), free(h->len2), free(h->kx);
}

void bind_all(rj_ctx *ctx, rj_bind *b, const env *e, const data *d, const holes *h) {
    if (h) {
        assert_ok(ctx, rj_bind_offsets(b, e->J, d->B, h->off, h->len));
        assert_ok(ctx, rj_bind_input(b, e->x, h->x, h->rows * D));
        assert_ok(ctx, rj_bind_input(b, e->y, h->y, h->rows * D));
        assert_ok(ctx, rj_bind_input(b, e->m, h->m, h->rows * D));
        assert_ok(ctx, rj_bind_input(b, e->xi, h->xi, h->rows * D));
        assert_ok(ctx, rj_bind_size(b, e->L, d->maxlen + 3));
        assert_ok(ctx, rj_bind_input(b, e->w, d->w, D));
        assert_ok(ctx, rj_bind_input(b, e->v, d->v, D));
        assert_ok(ctx, rj_bind_input(b, e->pb, d->pb, d->B * D));
        assert_ok(ctx, rj_bind_input(b, e->p3, d->p3, d->B * D));
        assert_ok(ctx, rj_bind_input(b, e->tab, d->tab, V * D));
        assert_ok(ctx, rj_bind_input(b, e->ix, h->ix, h->rows));
        if (e->sb != RJ_NONE) assert_ok(ctx, rj_bind_input(b, e->sb, d->sb, d->sq)); /* blocks: no holes */
        if (e->pd != RJ_NONE) assert_ok(ctx, rj_bind_input(b, e->pd, d->pd, d->B * (d->maxlen + 3) * D));
        if (e->kx != RJ_NONE) {
            assert_ok(ctx, rj_bind_offsets(b, e->J2, d->B, h->off2, h->len2));
            assert_ok(ctx, rj_bind_input(b, e->kx, h->kx, h->rows2 * D));
        }
        return;
    }
    if (e->kx != RJ_NONE) {
        assert_ok(ctx, rj_bind_offsets(b, e->J2, d->B, d->off2, NULL));
        assert_ok(ctx, rj_bind_input(b, e->kx, d->kx, d->rows2 * D));
    }
    assert_ok(ctx, rj_bind_offsets(b, e->J, d->B, d->off, NULL));
    assert_ok(ctx, rj_bind_size(b, e->L, d->maxlen + 3));
    assert_ok(ctx, rj_bind_input(b, e->x, d->x, d->rows * D));
    assert_ok(ctx, rj_bind_input(b, e->y, d->y, d->rows * D));
    assert_ok(ctx, rj_bind_input(b, e->w, d->w, D));
    assert_ok(ctx, rj_bind_input(b, e->v, d->v, D));
    assert_ok(ctx, rj_bind_input(b, e->m, d->m, d->rows * D));
    assert_ok(ctx, rj_bind_input(b, e->xi, d->xi, d->rows * D));
    assert_ok(ctx, rj_bind_input(b, e->pb, d->pb, d->B * D));
    assert_ok(ctx, rj_bind_input(b, e->p3, d->p3, d->B * D));
    assert_ok(ctx, rj_bind_input(b, e->tab, d->tab, V * D));
    assert_ok(ctx, rj_bind_input(b, e->ix, d->ix, d->rows));
    if (e->sb != RJ_NONE) assert_ok(ctx, rj_bind_input(b, e->sb, d->sb, d->sq));
    if (e->pd != RJ_NONE) assert_ok(ctx, rj_bind_input(b, e->pd, d->pd, d->B * (d->maxlen + 3) * D));
}

int64_t numel_of(const rj_tensor_info *t) {
    if (t->ragged_dim < 0) return t->rows;
    int64_t n = t->rows;
    for (int k = t->ragged_dims == 2 ? 3 : 2; k < t->rank; k++) n *= t->shape[k];
    return n;
}

static void compare_values(const char *what, rj_dtype t, const void *got, const void *want, int64_t n) {
    if (!(t == RJ_F32 || t == RJ_F64 || t == RJ_F16 || t == RJ_BF16)) {
        size_t es = rj_dtype_size(t);
        for (int64_t i = 0; i < n; i++)
            if (memcmp((const char *)got + i * es, (const char *)want + i * es, es))
                fail_msg("%s: element %lld is %g, expected %g", what, (long long)i,
                         elem_get(got, t, i), elem_get(want, t, i));
        return;
    }
    double scale = 1;
    for (int64_t i = 0; i < n; i++) {
        double v = fabs(elem_get(want, t, i));
        if (isfinite(v) && v > scale) scale = v;
    }
    /* 16-bit: each op's result is rounded, and where the f32 maths of two targets (their sums'
     * orders, their exp) lands on the two sides of a tie, the roundings differ by an ulp (2^-8
     * relative for bf16, 2^-11 for f16), which later ops carry and exp amplifies: a score s
     * of 16 one ulp apart is exp(s - m) 1.6% apart in f16 (seen in the corpus's pairs on
     * OpenCL: 8 ulps). About 16 ulps, of the output's largest value where values cancel. */
    static const double rtols[RJ_DTYPE_COUNT] = {[RJ_F32] = 1e-4, [RJ_F64] = 1e-10, [RJ_F16] = 8e-3, [RJ_BF16] = 6e-2};
    static const double atols[RJ_DTYPE_COUNT] = {[RJ_F32] = 2e-5, [RJ_F64] = 1e-12, [RJ_F16] = 8e-3, [RJ_BF16] = 6e-2};
    double rtol = rtols[t], atol = atols[t] * scale;
    for (int64_t i = 0; i < n; i++) {
        double a = elem_get(got, t, i), b = elem_get(want, t, i);
        if ((isnan(a) && isnan(b)) || (isinf(b) && a == b) || fabs(a - b) <= atol + rtol * fabs(b))
            continue;
        fail_msg("%s: element %lld of %lld is %.9g, expected %.9g", what, (long long)i, (long long)n, a, b);
    }
}

/* The values of a jagged tensor's items, packed (a view with holes leaves the holes out). */
static void *packed(const rj_tensor_info *t, int64_t *n) {
    size_t es = rj_dtype_size(t->dtype);
    int64_t inner = 1;
    for (int k = 2; k < t->rank; k++) inner *= t->shape[k];
    int64_t rows = 0;
    for (int64_t b = 0; b < t->shape[0]; b++) rows += t->lengths[b];
    char *p = malloc(es * (size_t)(rows * inner + 1)), *q = p;
    for (int64_t b = 0; b < t->shape[0]; b++) {
        size_t bytes = es * (size_t)(t->lengths[b] * inner);
        memcpy(q, (const char *)t->values + es * (size_t)(t->offsets[b] * inner), bytes);
        q += bytes;
    }
    *n = rows * inner;
    return p;
}

void compare(const char *what, const rj_tensor_info *got, const rj_tensor_info *want) {
    assert_int_equal(got->dtype, want->dtype);
    assert_int_equal(got->rank, want->rank);
    int64_t n = numel_of(want);
    assert_int_equal(numel_of(got), n);
    assert_int_equal(got->ragged_dims, want->ragged_dims);
    if (want->ragged_dims == 2) /* blocks: the same offsets on both sides */
        for (int64_t b = 0; b <= want->shape[0]; b++) assert_int_equal(got->offsets[b], want->offsets[b]);
    if (!want->lengths) {
        compare_values(what, want->dtype, got->values, want->values, n);
        return;
    }
    int64_t ng, nw; /* holes hold whatever the memory held: compare the items only */
    void *g = packed(got, &ng), *w = packed(want, &nw);
    assert_int_equal(ng, nw);
    compare_values(what, want->dtype, g, w, nw);
    free(g);
    free(w);
}

/* ---- op groups --------------------------------------------------------------------------- */

/* every op */
static void g_unary(env *e) {
    for (int op = RJ_OP_NEG; op <= RJ_OP_LOGICAL_NOT; op++) {
        out(e, un(e, (rj_op)op, e->x));
        out(e, un(e, (rj_op)op, e->xi));
    }
}
static void g_binary(env *e) {
    for (int op = RJ_OP_ADD; op <= RJ_OP_LOGICAL_OR; op++) {
        rj_op o = (rj_op)op;
        out(e, bin(e, o, e->x, e->y));
        out(e, bin(e, o, e->p3, e->x));
        out(e, bin(e, o, e->xi, SI(e, 3)));
        out(e, bin(e, o, e->xi, e->x));
        if (op == RJ_OP_ADD || op == RJ_OP_MUL || op >= RJ_OP_MAXIMUM)
            out(e, bin(e, o, e->m, un(e, RJ_OP_LOGICAL_NOT, e->m)));
    }
    out(e, bin(e, RJ_OP_POW, e->x, S(e, 2)));
    out(e, bin(e, RJ_OP_POW, e->x, S(e, 3)));
    out(e, bin(e, RJ_OP_POW, e->x, S(e, -1)));
    out(e, bin(e, RJ_OP_POW, e->x, S(e, 1.5)));
    out(e, bin(e, RJ_OP_POW, e->xi, SI(e, -1)));
}
static void g_select_cast(env *e) {
    out(e, rj_graph_where(e->g, e->m, e->x, e->w));
    out(e, rj_graph_where(e->g, e->m, e->xi, S(e, -0.5)));
    out(e, rj_graph_masked_fill(e->g, e->x, e->m, -7));
    out(e, rj_graph_masked_fill(e->g, e->xi, bin(e, RJ_OP_GT, e->x, e->w), 9));
    for (rj_dtype t = RJ_BOOL; t < RJ_DTYPE_COUNT; t++) {
        out(e, rj_graph_cast(e->g, bin(e, RJ_OP_MUL, e->x, S(e, 4)), t));
        out(e, rj_graph_cast(e->g, e->xi, t));
        out(e, rj_graph_cast(e->g, e->m, t));
        out(e, rj_graph_cast(e->g, rj_graph_cast(e->g, e->xi, RJ_I64), t));
    }
}
static void g_reduce(env *e) {
    for (int op = RJ_OP_SUM; op <= RJ_OP_PROD; op++) {
        rj_op o = (rj_op)op;
        out(e, rj_graph_reduce(e->g, o, e->x, 1, false));
        out(e, rj_graph_reduce(e->g, o, e->x, 1, true));
        out(e, rj_graph_reduce(e->g, o, e->x, 2, false));
        out(e, rj_graph_reduce(e->g, o, e->pb, 0, false));
        out(e, rj_graph_reduce(e->g, o, e->w, 0, false));
        if (o != RJ_OP_MEAN) {
            out(e, rj_graph_reduce(e->g, o, e->xi, 1, false));
            out(e, rj_graph_reduce(e->g, o, e->xi, 2, false));
            out(e, rj_graph_reduce(e->g, o, e->m, 1, false));
        }
    }
}
static void g_softmax_norm(env *e) {
    out(e, rj_graph_softmax(e->g, e->x, 1));
    out(e, rj_graph_softmax(e->g, e->x, 2));
    out(e, rj_graph_log_softmax(e->g, e->x, 1));
    out(e, rj_graph_log_softmax(e->g, e->x, -1));
    out(e, rj_graph_softmax(e->g, e->xi, 1));
    out(e, rj_graph_softmax(e->g, e->pb, 0));
    out(e, rj_graph_layer_norm(e->g, e->x, 1, RJ_NONE, RJ_NONE, -1));
    out(e, rj_graph_layer_norm(e->g, e->x, 1, e->w, e->v, 1e-3));
    out(e, rj_graph_rms_norm(e->g, e->x, 1, RJ_NONE, -1));
    out(e, rj_graph_rms_norm(e->g, e->x, 1, e->w, 1e-6));
    out(e, rj_graph_layer_norm(e->g, e->pb, 2, RJ_NONE, RJ_NONE, -1));
}
static void g_pad(env *e) {
    rj_node p = rj_graph_pad(e->g, e->x, -2.5, RJ_DIM_NONE);
    out(e, p);
    out(e, rj_graph_pad(e->g, e->xi, 4, e->L));
    out(e, rj_graph_unpad(e->g, p, e->J));
}
/* constants that have no plain literal, and ones that must round-trip exactly */
static void g_constants(env *e) {
    out(e, bin(e, RJ_OP_ADD, e->x, S(e, NAN)));
    out(e, bin(e, RJ_OP_MINIMUM, e->x, S(e, INFINITY)));
    out(e, bin(e, RJ_OP_MAXIMUM, e->x, S(e, -INFINITY)));
    out(e, bin(e, RJ_OP_MUL, e->x, S(e, 0.1)));
    out(e, bin(e, RJ_OP_ADD, e->x, S(e, -0.0)));
    out(e, bin(e, RJ_OP_MUL, e->x, S(e, 1e-45)));
    out(e, bin(e, RJ_OP_MUL, e->x, S(e, 3.4e38)));
    out(e, bin(e, RJ_OP_ADD, e->xi, SI(e, INT32_MIN)));
    out(e, bin(e, RJ_OP_ADD, rj_graph_cast(e->g, e->xi, RJ_I64), SI(e, INT64_MIN)));
    /* literal arithmetic folded while lowering wraps as at run time (it was undefined
     * behaviour there: the API fuzzer) */
    out(e, bin(e, RJ_OP_ADD, rj_graph_cast(e->g, e->xi, RJ_I64),
               bin(e, RJ_OP_MUL, SI(e, INT64_MAX), bin(e, RJ_OP_SUB, SI(e, INT64_MIN), SI(e, 3)))));
}

static void g_index(env *e);
static void g_matmul(env *e);
static void g_pairs(env *e);
static void g_cross(env *e);

const std_chain std_ops[] = {
    {"index ops and views", g_index},
    {"matmul and linear", g_matmul},
    {"two ragged dims", g_pairs},
    {"two ragged classes", g_cross},
    {"unary ops", g_unary},
    {"binary ops", g_binary},
    {"select/cast", g_select_cast},
    {"reductions", g_reduce},
    {"softmax/norm", g_softmax_norm},
    {"pad/unpad", g_pad},
    {"constants", g_constants},
};
const int std_nops = (int)(sizeof std_ops / sizeof std_ops[0]);

/* ---- fused chains ------------------------------------------------------------------------ */

static void c_relu_affine(env *e) { out(e, un(e, RJ_OP_RELU, affine(e))); }
static void c_softmax_relu_affine(env *e) { out(e, rj_graph_softmax(e->g, un(e, RJ_OP_RELU, affine(e)), 1)); }
static void c_gelu_chain(env *e) { out(e, bin(e, RJ_OP_MUL, un(e, RJ_OP_GELU, affine(e)), S(e, 0.5))); }
static void c_gelu_tanh_silu(env *e) { out(e, un(e, RJ_OP_SILU, un(e, RJ_OP_GELU_TANH, e->x))); }
static void c_unpad_pad(env *e) {
    rj_node p = rj_graph_pad(e->g, e->x, 0, RJ_DIM_NONE);
    out(e, rj_graph_unpad(e->g, bin(e, RJ_OP_ADD, bin(e, RJ_OP_MUL, p, S(e, 2)), S(e, 1)), e->J));
}
static void c_sum_pad_nonzero(env *e) { out(e, rj_graph_reduce(e->g, RJ_OP_SUM, rj_graph_pad(e->g, e->x, 0.75, e->L), 1, false)); }
static void c_mean_pad(env *e) { out(e, rj_graph_reduce(e->g, RJ_OP_MEAN, rj_graph_pad(e->g, e->x, 0, RJ_DIM_NONE), 1, false)); }
static void c_max_pad(env *e) { out(e, rj_graph_reduce(e->g, RJ_OP_MAX, rj_graph_pad(e->g, e->x, 1.25, e->L), 1, true)); }
static void c_min_prod_pad(env *e) {
    out(e, rj_graph_reduce(e->g, RJ_OP_MIN, rj_graph_pad(e->g, e->x, -0.5, e->L), 1, false));
    out(e, rj_graph_reduce(e->g, RJ_OP_PROD, rj_graph_pad(e->g, e->x, 1.01, e->L), 1, false));
}
static void c_softmax_pad0(env *e) {
    rj_node s = rj_graph_softmax(e->g, rj_graph_pad(e->g, e->x, 0, e->L), 1);
    out(e, s);
    out(e, rj_graph_unpad(e->g, s, e->J));
}
static void c_masked_softmax_unpad(env *e) {
    rj_node s = rj_graph_softmax(e->g, rj_graph_pad(e->g, e->x, -INFINITY, RJ_DIM_NONE), 1);
    out(e, rj_graph_unpad(e->g, s, e->J));
}
/* non-finite and huge padding values: an item without padding rows (the longest, when the
 * pad length is max(j1)) gets the plain result, never NaN from 0 * inf in a closed form */
static void c_nonfinite_pad(env *e) {
    out(e, rj_graph_reduce(e->g, RJ_OP_SUM, rj_graph_pad(e->g, e->x, -INFINITY, RJ_DIM_NONE), 1, false));
    out(e, rj_graph_reduce(e->g, RJ_OP_MEAN, rj_graph_pad(e->g, e->x, INFINITY, RJ_DIM_NONE), 1, false));
    out(e, rj_graph_softmax(e->g, rj_graph_pad(e->g, e->x, NAN, RJ_DIM_NONE), 1));
    out(e, rj_graph_log_softmax(e->g, rj_graph_pad(e->g, e->x, 1e38, RJ_DIM_NONE), 1));
    /* the padding's value is the constant expression inf * 0 (NaN): the GPU emitter folds it,
     * PoCL once turned exp of it into garbage in the padding rows */
    out(e, rj_graph_softmax(e->g, bin(e, RJ_OP_MUL, rj_graph_pad(e->g, e->x, INFINITY, RJ_DIM_NONE), S(e, 0)), 1));
}
static void c_log_softmax_pad_affine(env *e) {
    rj_node p = rj_graph_pad(e->g, affine(e), 0.5, e->L);
    out(e, rj_graph_unpad(e->g, rj_graph_log_softmax(e->g, bin(e, RJ_OP_MUL, p, S(e, 3)), 1), e->J));
}
static void c_sum_padded_expr(env *e) {
    /* padding combined with per-column operands: still closed form */
    rj_node p = bin(e, RJ_OP_MUL, rj_graph_pad(e->g, e->x, 2, e->L), e->w);
    out(e, rj_graph_reduce(e->g, RJ_OP_SUM, un(e, RJ_OP_EXP, p), 1, false));
}
static void c_pad_mixed_two(env *e) {
    /* two padded tensors combined: the padding region is a loop, not a constant */
    rj_node p = bin(e, RJ_OP_ADD, rj_graph_pad(e->g, e->x, 1, e->L), rj_graph_pad(e->g, e->y, 2, e->L));
    out(e, rj_graph_reduce(e->g, RJ_OP_SUM, p, 1, false));
    out(e, p);
}
static void c_layernorm_gelu(env *e) {
    rj_node n = rj_graph_layer_norm(e->g, e->x, 1, e->w, e->v, -1);
    out(e, un(e, RJ_OP_GELU, bin(e, RJ_OP_ADD, n, S(e, 0.1))));
}
static void c_rmsnorm_residual(env *e) {
    out(e, bin(e, RJ_OP_ADD, rj_graph_rms_norm(e->g, bin(e, RJ_OP_ADD, e->x, e->y), 1, e->w, -1), e->x));
}
static void c_relu_sum(env *e) { out(e, un(e, RJ_OP_RELU, rj_graph_reduce(e->g, RJ_OP_SUM, un(e, RJ_OP_TANH, e->x), 1, false))); }
static void c_mean_center(env *e) {
    rj_node m = rj_graph_reduce(e->g, RJ_OP_MEAN, e->x, 1, true);
    out(e, bin(e, RJ_OP_SUB, e->x, m));
}
static void c_two_outputs(env *e) {
    rj_node h = un(e, RJ_OP_SIGMOID, affine(e));
    out(e, h);
    out(e, bin(e, RJ_OP_MUL, h, e->y));
    out(e, rj_graph_reduce(e->g, RJ_OP_MAX, h, 1, false));
}
static void c_where_chain(env *e) {
    rj_node c = bin(e, RJ_OP_GT, e->x, e->y);
    out(e, rj_graph_where(e->g, c, un(e, RJ_OP_EXP, e->x), bin(e, RJ_OP_SUB, e->y, e->w)));
}
static void c_masked_fill_softmax(env *e) {
    out(e, rj_graph_softmax(e->g, rj_graph_masked_fill(e->g, e->x, e->m, -1e9), 1));
}
static void c_int_chain(env *e) {
    rj_node a = bin(e, RJ_OP_MUL, e->xi, rj_graph_scalar_int(e->g, 3));
    out(e, bin(e, RJ_OP_MAXIMUM, bin(e, RJ_OP_POW, a, rj_graph_scalar_int(e->g, 2)), e->xi));
    out(e, rj_graph_reduce(e->g, RJ_OP_SUM, a, 1, false));
}
static void c_cast_chain(env *e) {
    rj_node c = rj_graph_cast(e->g, bin(e, RJ_OP_MUL, e->x, S(e, 10)), RJ_I32);
    out(e, bin(e, RJ_OP_DIV, c, rj_graph_scalar_int(e->g, 4)));
}
static void c_item_broadcast(env *e) {
    out(e, un(e, RJ_OP_SQRT, un(e, RJ_OP_ABS, bin(e, RJ_OP_ADD, bin(e, RJ_OP_MUL, e->x, e->p3), e->w))));
}
static void c_softmax_dense(env *e) { out(e, bin(e, RJ_OP_MUL, rj_graph_softmax(e->g, affine(e), 2), S(e, 4))); }
static void c_log_sigmoid_sum(env *e) {
    out(e, rj_graph_reduce(e->g, RJ_OP_SUM, un(e, RJ_OP_LOG, un(e, RJ_OP_SIGMOID, e->x)), 2, false));
}
static void c_pow_chain(env *e) { out(e, bin(e, RJ_OP_POW, un(e, RJ_OP_ABS, e->x), S(e, 0.5))); }
static void c_trig(env *e) { out(e, bin(e, RJ_OP_ADD, un(e, RJ_OP_SIN, e->x), un(e, RJ_OP_COS, e->y))); }
static void c_pad_output_affine(env *e) { out(e, rj_graph_pad(e->g, affine(e), -1, RJ_DIM_NONE)); }
static void c_unpad_of_padded_affine_sum(env *e) {
    rj_node p = rj_graph_pad(e->g, e->x, 0, RJ_DIM_NONE);
    rj_node u = rj_graph_unpad(e->g, un(e, RJ_OP_RELU, bin(e, RJ_OP_MUL, p, e->w)), e->J);
    out(e, rj_graph_reduce(e->g, RJ_OP_SUM, u, 1, false));
}
static void c_softmax_then_sum(env *e) {
    rj_node s = rj_graph_softmax(e->g, e->x, 1);
    out(e, rj_graph_reduce(e->g, RJ_OP_SUM, bin(e, RJ_OP_MUL, s, e->y), 1, false));
}
static void c_norm_of_softmax(env *e) {
    out(e, rj_graph_layer_norm(e->g, rj_graph_softmax(e->g, e->x, 1), 1, RJ_NONE, RJ_NONE, 1e-3));
}
static void c_compare_logic(env *e) {
    rj_node a = bin(e, RJ_OP_LT, e->x, e->w), b = bin(e, RJ_OP_GE, e->y, S(e, 0));
    out(e, bin(e, RJ_OP_LOGICAL_OR, bin(e, RJ_OP_LOGICAL_AND, a, b), e->m));
    out(e, rj_graph_reduce(e->g, RJ_OP_SUM, a, 1, false));
}
static void c_mean_pad_keepdim_center(env *e) {
    rj_node p = rj_graph_pad(e->g, e->x, 0, e->L);
    rj_node m = rj_graph_reduce(e->g, RJ_OP_MEAN, p, 1, true);
    out(e, rj_graph_unpad(e->g, bin(e, RJ_OP_SUB, p, m), e->J));
}

/* ---- found by an independent differential tester (issue 33): each failed before its fix ---- */

static rj_node dense_pd(env *e) {
    if (e->pd == RJ_NONE) e->pd = rj_graph_input(e->g, "pd", e->ft, 3, (rj_dim[]){e->B, e->L, D});
    return e->pd;
}
static rj_node pair_sb(env *e) {
    if (e->sb == RJ_NONE) e->sb = rj_graph_input(e->g, "sb", e->ft, 3, (rj_dim[]){e->B, e->J, e->J});
    return e->sb;
}
/* an unpad of a kernel over a dense dim: its output was never written (the store was left
 * out where the row was not known to be an item's) */
static void c_unpad_dense_axis(env *e) {
    rj_node pd = dense_pd(e);
    out(e, rj_graph_unpad(e->g, rj_graph_softmax(e->g, pd, 1), e->J));
    out(e, rj_graph_unpad(e->g, rj_graph_log_softmax(e->g, bin(e, RJ_OP_MUL, pd, S(e, 2)), 1), e->J));
    out(e, rj_graph_unpad(e->g, rj_graph_softmax(e->g, pd, 2), e->J));
    out(e, rj_graph_unpad(e->g, bin(e, RJ_OP_SUB, pd, rj_graph_reduce(e->g, RJ_OP_MAX, pd, 1, true)), e->J));
}
/* a softmax over pad(x, len=L) + pd, whose padding rows differ row by row, so the stash holds
 * L rows, more than any item's: it was sized by the longest item */
static void c_pad_len_rows_softmax(env *e) {
    rj_node h = bin(e, RJ_OP_ADD, rj_graph_pad(e->g, e->x, 0.5, e->L), dense_pd(e));
    out(e, rj_graph_softmax(e->g, h, 1));
    out(e, rj_graph_log_softmax(e->g, h, 1));
}
/* softmax over dim 1 of a padded pair tensor, unpadded: the store loop ran over the padded
 * columns, past each item's len x len block */
static void c_pair_pad_softmax_unpad(env *e) {
    rj_node p = rj_graph_pad(e->g, pair_sb(e), 0, RJ_DIM_NONE);
    out(e, rj_graph_unpad_blocks(e->g, rj_graph_softmax(e->g, p, 1), e->J));
    out(e, rj_graph_unpad_blocks(e->g, rj_graph_log_softmax(e->g, p, 1), e->J));
}
/* max(p, 1, keepdim) - p unpadded to [B, j1, j1]: pad elimination kept the [B, 1, max(j1)]
 * operand, padded along dim 2, beside the unpadded [B, j1, j1] (refused at compile time) */
static void c_pair_max_center(env *e) {
    rj_node p = rj_graph_pad(e->g, pair_sb(e), 0, RJ_DIM_NONE);
    out(e, rj_graph_unpad_blocks(e->g, bin(e, RJ_OP_SUB, rj_graph_reduce(e->g, RJ_OP_MAX, p, 1, true), p), e->J));
    out(e, rj_graph_unpad_blocks(e->g, bin(e, RJ_OP_MUL, p, rj_graph_reduce(e->g, RJ_OP_SUM, p, 2, true)), e->J));
}
/* i64 literals above 2^53 went through a double */
static void c_i64_literal(env *e) {
    out(e, bin(e, RJ_OP_ADD, e->ix, SI(e, 9007199254740993)));
    out(e, bin(e, RJ_OP_MUL, e->ix, SI(e, -4611686018427387903)));
}

/* the same subexpression many times over: printed as a tree, the text would grow as 3^n */
static void c_deep_sharing(env *e) {
    rj_node h = e->x;
    for (int i = 0; i < 8; i++) h = bin(e, RJ_OP_ADD, bin(e, RJ_OP_MUL, h, h), h);
    out(e, h);
}

/* ---- index ops and views: indices made in range (positions, |xi| < D, ix < V) ------------- */

static rj_node prev_row(env *e) { /* i64[B, j1, 1]: max(i - 1, 0) */
    rj_node pos = rj_graph_positions(e->g, e->J);
    return rj_graph_unsqueeze(e->g, bin(e, RJ_OP_MAXIMUM, bin(e, RJ_OP_SUB, pos, SI(e, 1)), SI(e, 0)), -1);
}
static void c_embedding_bag(env *e) {
    out(e, rj_graph_reduce(e->g, RJ_OP_SUM, rj_graph_embedding(e->g, e->tab, e->ix), 1, false));
}
static void c_nll(env *e) {
    rj_node lp = rj_graph_log_softmax(e->g, e->x, 2);
    rj_node ll = rj_graph_take_along_dim(e->g, lp, rj_graph_unsqueeze(e->g, e->ix, -1), 2);
    out(e, rj_graph_reduce(e->g, RJ_OP_MEAN, un(e, RJ_OP_NEG, rj_graph_squeeze(e->g, ll, -1)), 1, false));
}
static void c_gather_rows_of_softmax(env *e) {
    out(e, rj_graph_take_along_dim(e->g, rj_graph_softmax(e->g, e->x, 1), prev_row(e), 1));
}
static void c_gather_padded(env *e) {
    rj_node p = rj_graph_pad(e->g, e->x, -2, e->L);
    rj_node idx = rj_graph_pad(e->g, rj_graph_squeeze(e->g, prev_row(e), 2), 0, e->L); /* [B, L] */
    rj_node g = rj_graph_take_along_dim(e->g, p, rj_graph_unsqueeze(e->g, idx, 2), 1);
    out(e, rj_graph_reduce(e->g, RJ_OP_SUM, g, 1, false));
}
static void c_reshape_padded(env *e) {
    rj_node p = rj_graph_pad(e->g, bin(e, RJ_OP_MUL, e->x, e->w), 0.5, e->L);
    out(e, rj_graph_reshape(e->g, p, 3, (rj_dim[]){e->B, D, e->L}));
}

/* ---- matrix products: tab [V, D] is linear's weight, its reshape [D, V] a matmul's ---------- */

static void c_linear_prologue_epilogue(env *e) {
    rj_node h = rj_graph_linear(e->g, un(e, RJ_OP_RELU, affine(e)), e->tab, RJ_NONE);
    out(e, un(e, RJ_OP_GELU, bin(e, RJ_OP_ADD, h, S(e, 0.25))));
}
/* a softmax over the product's rows, computed in the GEMM's epilogue (CPU with a BLAS) */
static void c_linear_softmax_rows(env *e) {
    rj_node h = bin(e, RJ_OP_MUL, rj_graph_linear(e->g, e->x, e->tab, RJ_NONE), S(e, 0.5));
    out(e, rj_graph_softmax(e->g, h, -1));
    out(e, rj_graph_log_softmax(e->g, rj_graph_linear(e->g, e->y, e->tab, RJ_NONE), 2));
}
static void c_matmul_softmax(env *e) {
    rj_node wt = rj_graph_reshape(e->g, e->tab, 2, (rj_dim[]){D, V});
    out(e, rj_graph_softmax(e->g, rj_graph_matmul(e->g, e->x, wt), 1));
}

static void g_matmul(env *e) {
    rj_graph *g = e->g;
    rj_node wt = rj_graph_reshape(g, e->tab, 2, (rj_dim[]){D, V});
    out(e, rj_graph_matmul(g, e->x, wt));                                          /* jagged */
    out(e, rj_graph_linear(g, e->pb, e->tab, RJ_NONE));                            /* dense 2-D */
    out(e, rj_graph_matmul(g, rj_graph_pad(g, e->y, 0.5, e->L), wt));              /* padded */
    out(e, rj_graph_linear(g, rj_graph_cast(g, e->xi, e->ft), e->tab, RJ_NONE));   /* a prologue */
    /* dense transposes (lowering read them as reshapes: silent wrong answers) */
    rj_node tt = rj_graph_transpose(g, e->tab, 0, 1);                                /* [D, V] */
    out(e, rj_graph_matmul(g, e->x, tt));
    out(e, bin(e, RJ_OP_ADD, tt, wt));
    out(e, rj_graph_reduce(g, RJ_OP_SUM, tt, 1, false));
    out(e, bin(e, RJ_OP_MUL, rj_graph_transpose(g, rj_graph_reshape(g, e->tab, 3, (rj_dim[]){V, 1, D}), 0, -1), S(e, 2)));
    out(e, bin(e, RJ_OP_MUL, e->x, rj_graph_transpose(g, rj_graph_unsqueeze(g, e->w, 1), 0, 1)));
}

/* ---- two ragged dims of one class: per-item products, and what applies to their blocks ----- */

static void c_attention(env *e) {
    rj_node s = bin(e, RJ_OP_MUL, rj_graph_matmul(e->g, e->x, rj_graph_transpose(e->g, e->y, 1, 2)), S(e, 0.25));
    out(e, rj_graph_matmul(e->g, rj_graph_softmax(e->g, s, 2), un(e, RJ_OP_RELU, e->y)));
}

static void c_causal_attention(env *e) {
    rj_node pos = rj_graph_positions(e->g, e->J);
    rj_node causal = bin(e, RJ_OP_GE, rj_graph_unsqueeze(e->g, pos, 2), rj_graph_unsqueeze(e->g, pos, 1));
    rj_node s = rj_graph_matmul(e->g, e->x, rj_graph_transpose(e->g, e->y, 1, 2));
    rj_node m = rj_graph_where(e->g, causal, s, S(e, -INFINITY));
    out(e, rj_graph_matmul(e->g, rj_graph_softmax(e->g, m, 2), e->y));
}

/* scaled_dot_product_attention by name: its scores computed inside the fused kernel, the safe
 * softmax (empty and fully masked rows give 0) */
static void c_sdpa(env *e) {
    out(e, rj_graph_sdpa(e->g, e->x, e->y, un(e, RJ_OP_RELU, e->y), RJ_NONE, true, 0.3, false));
}

/* ---- two ragged classes of B: queries of j1, keys of j2 (cross attention) ------------------- */

static void std_cross(env *e) {
    if (e->kx != RJ_NONE) return;
    e->J2 = rj_graph_ragged(e->g, "j2", e->B);
    e->kx = rj_graph_input(e->g, "kx", e->ft, 3, (rj_dim[]){e->B, e->J2, D});
}

static void c_cross_attention(env *e) {
    std_cross(e);
    rj_node s = bin(e, RJ_OP_MUL, rj_graph_matmul(e->g, e->x, rj_graph_transpose(e->g, e->kx, 1, 2)), S(e, 0.25));
    out(e, rj_graph_matmul(e->g, rj_graph_softmax(e->g, s, 2), un(e, RJ_OP_RELU, e->kx)));
}

/* causal top-left over two classes (ones(L, S).tril(0)): a query past the item's keys sees all */
static void c_cross_sdpa(env *e) {
    std_cross(e);
    out(e, rj_graph_sdpa(e->g, e->x, e->kx, un(e, RJ_OP_TANH, e->kx), RJ_NONE, true, 0.3, false));
}

/* [B, j1, j2]: items of len1_b x len2_b, elementwise, softmax and reductions over either dim, the
 * positions of both classes, and p v by values of j2 */
static void g_cross(env *e) {
    rj_graph *g = e->g;
    std_cross(e);
    rj_node s = rj_graph_matmul(g, affine(e), rj_graph_transpose(g, e->kx, 1, 2));
    out(e, s);
    rj_node p = rj_graph_softmax(g, s, 2);
    out(e, p);
    out(e, rj_graph_softmax(g, s, 1));
    out(e, rj_graph_matmul(g, p, e->kx));
    out(e, rj_graph_reduce(g, RJ_OP_SUM, s, 1, false));
    out(e, rj_graph_reduce(g, RJ_OP_MAX, s, 2, false));
    out(e, bin(e, RJ_OP_SUB, s, rj_graph_reduce(g, RJ_OP_MEAN, s, 2, true)));
    rj_node pi = rj_graph_positions(g, e->J), pj = rj_graph_positions(g, e->J2);
    rj_node keep = bin(e, RJ_OP_GE, rj_graph_unsqueeze(g, pi, 2), rj_graph_unsqueeze(g, pj, 1));
    out(e, rj_graph_where(g, keep, s, S(e, -1)));
    out(e, rj_graph_matmul(g, rj_graph_transpose(g, e->x, 1, 2), e->y)); /* j1's own product beside */
}

static void g_pairs(env *e) {
    rj_graph *g = e->g;
    e->sb = rj_graph_input(g, "sb", e->ft, 3, (rj_dim[]){e->B, e->J, e->J}); /* an input's blocks */
    rj_node s = rj_graph_matmul(g, affine(e), rj_graph_transpose(g, e->x, 1, 2)); /* [B, j1, j1] */
    out(e, s);
    rj_node m = rj_graph_reduce(g, RJ_OP_MAX, s, 2, true);                       /* [B, j1, 1] */
    rj_node p = un(e, RJ_OP_EXP, bin(e, RJ_OP_SUB, s, m));
    out(e, rj_graph_reduce(g, RJ_OP_SUM, p, -1, false));
    out(e, rj_graph_log_softmax(g, s, 2));
    out(e, rj_graph_matmul(g, p, e->y));                                         /* [B, j1, D] */
    out(e, rj_graph_matmul(g, rj_graph_transpose(g, e->x, 1, 2), e->y));         /* [B, D, D] */
    out(e, bin(e, RJ_OP_GT, s, S(e, 0)));
    out(e, rj_graph_softmax(g, s, 1));                                           /* over the columns */
    out(e, rj_graph_softmax(g, bin(e, RJ_OP_ADD, s, e->sb), 2));                 /* an input's blocks */
    out(e, rj_graph_reduce(g, RJ_OP_MIN, bin(e, RJ_OP_MUL, s, S(e, 0.5)), 1, false));
    rj_node ps = rj_graph_pad(g, s, -1, e->L);                                   /* [B, L, L] */
    out(e, ps);
    out(e, rj_graph_unpad_blocks(g, un(e, RJ_OP_TANH, ps), e->J));               /* and back */
    out(e, rj_graph_reduce(g, RJ_OP_SUM, rj_graph_pad(g, bin(e, RJ_OP_MUL, s, S(e, 0.5)), 0.25, RJ_DIM_NONE), 1, false));
    /* over the rows with keepdim: [B, 1, j1], a row of columns broadcast against the blocks */
    out(e, bin(e, RJ_OP_SUB, s, rj_graph_reduce(g, RJ_OP_MEAN, s, 1, true)));
    out(e, bin(e, RJ_OP_DIV, p, rj_graph_reduce(g, RJ_OP_SUM, p, -2, true)));
    /* and squeezed back to a jagged [B, j1] (and x's row of columns to x) */
    out(e, bin(e, RJ_OP_MUL, rj_graph_squeeze(g, rj_graph_reduce(g, RJ_OP_MAX, s, 1, true), 1), S(e, 2)));
    out(e, bin(e, RJ_OP_ADD, rj_graph_squeeze(g, bin(e, RJ_OP_MUL, rj_graph_unsqueeze(g, e->x, 1), S(e, 3)), 1), e->x));
    /* a transposed [B, j1, 1] is a row of columns too (the interpreter crashed on it) */
    rj_node mx = rj_graph_reduce(g, RJ_OP_MAX, s, 1, false);
    rj_node col = rj_graph_transpose(g, rj_graph_unsqueeze(g, mx, 2), 1, 2);
    out(e, bin(e, RJ_OP_SUB, s, col));
    /* the blocks transposed (a view: element (b, i, j) is (b, j, i)): elementwise, softmax,
     * a reduction, and pᵀ v, attention's backward product */
    rj_node st = rj_graph_transpose(g, s, 1, 2);
    out(e, bin(e, RJ_OP_SUB, st, s));
    out(e, rj_graph_softmax(g, st, 2));
    out(e, rj_graph_reduce(g, RJ_OP_SUM, st, 1, false));
    out(e, rj_graph_matmul(g, rj_graph_transpose(g, p, 1, 2), e->y));
    /* D = 1: q kᵀ of [B, j1, 1] operands (kᵀ is also a row of columns), its softmax times v */
    rj_node q1 = rj_graph_reduce(g, RJ_OP_SUM, e->x, 2, true), k1 = rj_graph_reduce(g, RJ_OP_MEAN, e->y, 2, true);
    rj_node s1 = rj_graph_matmul(g, q1, rj_graph_transpose(g, k1, 1, 2));
    out(e, s1);
    out(e, rj_graph_matmul(g, rj_graph_softmax(g, s1, 2), k1));
}

/* ---- narrow: views of a dense dim, read through by whatever consumes them ------------------ */

static rj_node nw(env *e, rj_node x, int dim, int64_t start, int64_t len) {
    return rj_graph_narrow(e->g, x, dim, start, len);
}
static void c_narrow_reduce_softmax(env *e) {
    rj_graph *g = e->g;
    out(e, rj_graph_reduce(g, RJ_OP_SUM, nw(e, e->x, 2, 3, 11), 2, false));          /* over the cut dim */
    out(e, rj_graph_reduce(g, RJ_OP_MAX, nw(e, affine(e), -1, -5, 5), 1, false));    /* over the rows */
    out(e, rj_graph_softmax(g, nw(e, e->x, 2, 1, 16), 2));
    out(e, rj_graph_softmax(g, bin(e, RJ_OP_MUL, nw(e, e->y, 2, 0, 7), S(e, 2)), 1));
    out(e, rj_graph_log_softmax(g, nw(e, rj_graph_pad(g, e->x, 0.5, e->L), 2, 2, 9), 1));
    out(e, bin(e, RJ_OP_MUL, nw(e, rj_graph_softmax(g, e->x, 1), 2, 5, 7), S(e, 3))); /* of a kernel's output */
}
static void c_narrow_linear(env *e) {
    rj_graph *g = e->g;
    out(e, rj_graph_linear(g, nw(e, e->x, 2, 4, 12), nw(e, e->tab, 1, 0, 12), RJ_NONE));
    rj_node wt = rj_graph_reshape(g, e->tab, 2, (rj_dim[]){D, V});
    out(e, rj_graph_matmul(g, e->y, nw(e, wt, 1, 2, 4)));                                 /* W[:, 2:6] */
    out(e, un(e, RJ_OP_RELU, rj_graph_linear(g, un(e, RJ_OP_TANH, nw(e, e->x, 2, 0, 12)), nw(e, nw(e, e->tab, 0, 1, 5), 1, 7, 12), RJ_NONE)));
}
static void c_narrow_norm_split(env *e) {
    rj_graph *g = e->g;
    rj_node h = affine(e);
    out(e, rj_graph_layer_norm(g, nw(e, h, 2, 0, 8), 1, RJ_NONE, RJ_NONE, 1e-5));
    out(e, rj_graph_rms_norm(g, nw(e, h, 2, 8, 11), 1, RJ_NONE, 1e-6));
    /* a split's pieces recombined: q * k + v over the three pieces of 6, 6, 7 */
    out(e, bin(e, RJ_OP_ADD, bin(e, RJ_OP_MUL, nw(e, e->x, 2, 0, 6), nw(e, e->x, 2, 6, 6)), nw(e, e->y, 2, 12, 6)));
    out(e, bin(e, RJ_OP_ADD, nw(e, e->pb, 1, 3, 4), nw(e, nw(e, e->p3, 2, 2, 10), 2, 6, 4))); /* per item, nested */
    out(e, rj_graph_squeeze(g, nw(e, e->x, -1, 18, 1), -1));                               /* x[..., -1] */
    out(e, nw(e, e->x, 2, 19, 0));                                                          /* empty */
}

static void g_index(env *e) {
    rj_graph *g = e->g;
    out(e, rj_graph_positions(g, e->J));
    out(e, bin(e, RJ_OP_MUL, rj_graph_embedding(g, e->tab, e->ix), e->x));
    out(e, rj_graph_take_along_dim(g, e->x, prev_row(e), 1));
    rj_node col = rj_graph_cast(g, un(e, RJ_OP_ABS, e->xi), RJ_I64); /* 0..5 */
    out(e, rj_graph_gather(g, e->y, 2, col));
    rj_node sel = rj_graph_cast(g, bin(e, RJ_OP_MUL, un(e, RJ_OP_ABS, e->w), S(e, 3)), RJ_I64); /* [D] in 0..2 */
    out(e, rj_graph_index_select(g, e->x, 2, sel));
    out(e, rj_graph_reshape(g, e->tab, 2, (rj_dim[]){D, V}));
    out(e, rj_graph_squeeze(g, rj_graph_unsqueeze(g, bin(e, RJ_OP_ADD, e->x, e->p3), 2), 2));
    out(e, rj_graph_reshape(g, e->p3, 2, (rj_dim[]){e->B, D}));
}

/* cat along dense dims, read through by its consumers: a softmax over the ragged dim, a
 * linear whose weight is a cat too, a layer_norm, dense, padded and integer operands, and
 * stack */
static void c_cat(env *e) {
    rj_graph *g = e->g;
    rj_node h = rj_graph_cat(g, (rj_node[]){e->x, un(e, RJ_OP_RELU, e->y), affine(e)}, 3, -1); /* [B, j1, 3D] */
    out(e, rj_graph_softmax(g, h, 1));
    rj_node w3 = rj_graph_cat(g, (rj_node[]){e->tab, e->tab, bin(e, RJ_OP_MUL, e->tab, S(e, 0.5))}, 3, 1); /* [V, 3D] */
    out(e, un(e, RJ_OP_GELU, rj_graph_linear(g, h, w3, RJ_NONE)));
    out(e, rj_graph_layer_norm(g, rj_graph_cat(g, (rj_node[]){e->x, rj_graph_cast(g, e->xi, e->ft)}, 2, 2), 1,
                               RJ_NONE, RJ_NONE, -1));
    out(e, bin(e, RJ_OP_MUL, rj_graph_cat(g, (rj_node[]){e->pb, e->pb}, 2, 1), S(e, 2))); /* dense [B, 2D] */
    rj_node pq = rj_graph_cat(g, (rj_node[]){rj_graph_pad(g, e->x, 0.5, e->L), rj_graph_pad(g, e->y, 0, e->L)}, 2, -1);
    out(e, rj_graph_reduce(g, RJ_OP_SUM, pq, 1, false));
    out(e, rj_graph_stack(g, (rj_node[]){e->x, e->y}, 2, -1)); /* [B, j1, D, 2] */
    out(e, rj_graph_cat(g, (rj_node[]){rj_graph_cast(g, e->xi, RJ_I64), rj_graph_unsqueeze(g, e->ix, -1)}, 2, 2));
}

/* dense dims of a jagged tensor permuted (a view read through), under a softmax over the
 * ragged dim and a reduction, and flattened back */
static void c_permute(env *e) {
    rj_graph *g = e->g;
    rj_node s = rj_graph_stack(g, (rj_node[]){e->x, un(e, RJ_OP_EXP, e->y), e->x}, 3, -1); /* [B, j1, D, 3] */
    rj_node p = rj_graph_permute(g, s, 4, (int[]){0, 1, 3, 2});                           /* [B, j1, 3, D] */
    out(e, rj_graph_softmax(g, bin(e, RJ_OP_MUL, p, e->w), 1));
    out(e, rj_graph_reduce(g, RJ_OP_MAX, p, 2, false));
    out(e, rj_graph_reshape(g, p, 3, (rj_dim[]){e->B, e->J, 3 * D}));
}

/* constants computed from the index, broadcast into jagged and dense values and under a
 * softmax and a reduction */
static void c_constants(env *e) {
    rj_graph *g = e->g;
    rj_node ar = rj_graph_arange(g, D, e->ft);                                   /* [D] */
    out(e, rj_graph_softmax(g, bin(e, RJ_OP_MUL, e->x, ar), 1));
    out(e, bin(e, RJ_OP_ADD, e->pb, rj_graph_arange(g, D, RJ_I64)));             /* promoted */
    rj_node f = rj_graph_full(g, 2, (rj_dim[]){e->B, D}, 0.75, e->ft);           /* [B, D] */
    out(e, bin(e, RJ_OP_ADD, rj_graph_reduce(g, RJ_OP_SUM, e->x, 1, false), f));
    out(e, rj_graph_full(g, 3, (rj_dim[]){2, e->L, 3}, -2, RJ_I32));             /* an output itself */
    out(e, rj_graph_where(g, e->m, e->x, rj_graph_full(g, 1, (rj_dim[]){D}, 1.5, e->ft)));
}

const std_chain std_chains[] = {
    {"softmax(x @ yᵀ * 0.25, 2) @ relu(y)", c_attention},
    {"causal: softmax(where(i >= j, x @ yᵀ, -inf), 2) @ y", c_causal_attention},
    {"scaled_dot_product_attention(x, y, relu(y), is_causal=True, scale=0.3)", c_sdpa},
    {"cross: softmax(x @ kxᵀ * 0.25, 2) @ relu(kx)", c_cross_attention},
    {"cross: scaled_dot_product_attention(x, kx, tanh(kx), is_causal=True, scale=0.3)", c_cross_sdpa},
    {"gelu(linear(relu(x*w+v), tab)+0.25)", c_linear_prologue_epilogue},
    {"softmax(x @ tab', 1)", c_matmul_softmax},
    {"softmax(linear(x, tab) * 0.5, -1), log_softmax(linear(y, tab), 2)", c_linear_softmax_rows},
    {"sum(embedding(tab, ix), 1)", c_embedding_bag},
    {"mean(-take_along_dim(log_softmax(x,2), ix, 2), 1)", c_nll},
    {"take_along_dim(softmax(x,1), i-1, 1)", c_gather_rows_of_softmax},
    {"sum(take_along_dim(pad(x), pad(i-1), 1), 1)", c_gather_padded},
    {"reshape(pad(x*w), [B, D, L])", c_reshape_padded},
    {"relu(x*w+v)", c_relu_affine},
    {"softmax(relu(x*w+v), dim=1)", c_softmax_relu_affine},
    {"gelu(x*w+v)*0.5", c_gelu_chain},
    {"silu(gelu_tanh(x))", c_gelu_tanh_silu},
    {"unpad(pad(x,0)*2+1)", c_unpad_pad},
    {"sum(pad(x,0.75,L),1)", c_sum_pad_nonzero},
    {"mean(pad(x,0),1)", c_mean_pad},
    {"max(pad(x,1.25,L),1,keepdim)", c_max_pad},
    {"min/prod over pad", c_min_prod_pad},
    {"softmax(pad(x,0,L),1)", c_softmax_pad0},
    {"unpad(softmax(pad(x,-inf)))", c_masked_softmax_unpad},
    {"unpad(log_softmax(pad(x*w+v)*3))", c_log_softmax_pad_affine},
    {"sum/mean/softmax over pad(x, -inf/inf/nan/1e38)", c_nonfinite_pad},
    {"sum(exp(pad(x,2,L)*w),1)", c_sum_padded_expr},
    {"pad(x)+pad(y)", c_pad_mixed_two},
    {"gelu(layer_norm(x)+0.1)", c_layernorm_gelu},
    {"rms_norm(x+y)+x", c_rmsnorm_residual},
    {"relu(sum(tanh(x),1))", c_relu_sum},
    {"x-mean(x,1,keepdim)", c_mean_center},
    {"sigmoid(x*w+v) three ways", c_two_outputs},
    {"where(x>y, exp(x), y-w)", c_where_chain},
    {"softmax(masked_fill(x,m,-1e9),1)", c_masked_fill_softmax},
    {"int pow/max/sum", c_int_chain},
    {"cast(x*10,i32)/4", c_cast_chain},
    {"sqrt(abs(x*p3+w))", c_item_broadcast},
    {"softmax(x*w+v, dim=2)*4", c_softmax_dense},
    {"sum(log(sigmoid(x)),2)", c_log_sigmoid_sum},
    {"abs(x)**0.5", c_pow_chain},
    {"sin(x)+cos(y)", c_trig},
    {"pad(x*w+v,-1)", c_pad_output_affine},
    {"sum(unpad(relu(pad(x)*w)),1)", c_unpad_of_padded_affine_sum},
    {"sum(softmax(x,1)*y,1)", c_softmax_then_sum},
    {"layer_norm(softmax(x,1))", c_norm_of_softmax},
    {"logic and comparisons", c_compare_logic},
    {"unpad(pad(x)-mean(pad(x),1,keepdim))", c_mean_pad_keepdim_center},
    {"8 levels of h*h+h", c_deep_sharing},
    {"unpad(softmax(pd,1)), ... (dense axis, unpadded)", c_unpad_dense_axis},
    {"softmax(pad(x,0.5,L)+pd,1)", c_pad_len_rows_softmax},
    {"unpad(softmax(pad(sb),1), [j1,j1])", c_pair_pad_softmax_unpad},
    {"unpad(max(pad(sb),1,keepdim)-pad(sb), [j1,j1])", c_pair_max_center},
    {"ix + 9007199254740993", c_i64_literal},
    {"sum/max/softmax/log_softmax of narrow(x, 2, ...)", c_narrow_reduce_softmax},
    {"linear(narrow(x), narrow(tab)), x @ wt[:, 2:6]", c_narrow_linear},
    {"layer_norm/rms_norm of narrows, split pieces", c_narrow_norm_split},
    {"cat: softmax, linear, layer_norm, dense, padded, int, stack", c_cat},
    {"permute(stack(x, exp(y), x), 0, 1, 3, 2): softmax, max, flatten", c_permute},
    {"arange, full: softmax(x * arange(D)), pb + arange, sum + full, where", c_constants},
};
const int std_nchains = (int)(sizeof std_chains / sizeof std_chains[0]);

void std_chain_add(env *e, const char *name) {
    for (int i = 0; i < std_corpus_count(); i++)
        if (!strcmp(std_corpus_name(i), name)) {
            (i < std_nops ? std_ops[i].fn : std_chains[i - std_nops].fn)(e);
            return;
        }
    fail_msg("no op group or chain named %s", name);
}

/* ---- random chains ------------------------------------------------------------------------ */

/* What the generator keeps of each kind of value it has made: jagged [B, j1, D] (x's shape),
 * padded [B, L, D], per item [B, D] and [B, 1, D], per row [B, j1, 1]. */
enum { RK_J, RK_P, RK_D, RK_S, RK_K, RK_COUNT, RK_MAX = 32 };

typedef struct rgen {
    env *e;
    uint64_t s;
    rj_node v[RK_COUNT][RK_MAX];
    int n[RK_COUNT];
    int made[RK_COUNT]; /* how many the generator made (inputs excluded) */
} rgen;

static int rg_int(rgen *r, int lo, int hi) { return (int)rng_int(&r->s, lo, hi); }
static bool rg_chance(rgen *r, double p) { return rng_uniform(&r->s, 0, 1) < p; }
static rj_node rg_pick(rgen *r, int k) { return r->v[k][rg_int(r, 0, r->n[k] - 1)]; }

static rj_node rg_keep(rgen *r, int k, rj_node n) {
    if (r->n[k] < RK_MAX) r->v[k][r->n[k]++] = n, r->made[k]++;
    return n;
}

/* A literal: mostly ordinary, sometimes at the edges of f32 (overflow, exp's range, tiny). */
static rj_node rg_lit(rgen *r) {
    static const double plain[] = {2.0, 0.5, -1.5, 3.0, 1e-3, 0.0, -0.25};
    /* not near FLT_MAX: a sum of such values over a long item overflows f32 (inf, as in
     * PyTorch and NumPy; NaN next to an infinite pad value) where the interpreter's double sum
     * does not (docs/guide.md, Accuracy); 1e33 times a few thousand rows stays finite */
    static const double edge[] = {1e20, -1e30, 88.0, 1e-30, 1e33};
    return S(r->e, rg_chance(r, 0.1) ? edge[rg_int(r, 0, 4)] : plain[rg_int(r, 0, 6)]);
}

static double rg_fill(rgen *r) {
    static const double v[] = {0.0, -1.0, 2.5, -INFINITY, INFINITY, 1e30, NAN};
    return v[rg_chance(r, 0.4) ? rg_int(r, 0, 6) : rg_int(r, 0, 2)];
}

/* An elementwise op on a value of kind k (the result has kind k). */
static rj_node rg_elementwise(rgen *r, int k) {
    env *e = r->e;
    rj_node a = rg_pick(r, k);
    static const rj_op unary[] = {RJ_OP_NEG, RJ_OP_ABS, RJ_OP_RELU, RJ_OP_SILU, RJ_OP_SIGMOID, RJ_OP_TANH,
                                  RJ_OP_EXP, RJ_OP_SGN, RJ_OP_GELU, RJ_OP_GELU_TANH, RJ_OP_SIN, RJ_OP_COS};
    static const rj_op positive[] = {RJ_OP_LOG, RJ_OP_SQRT, RJ_OP_RSQRT};
    static const rj_op binary[] = {RJ_OP_ADD, RJ_OP_SUB, RJ_OP_MUL, RJ_OP_MAXIMUM, RJ_OP_MINIMUM, RJ_OP_DIV};
    double u = rng_uniform(&r->s, 0, 1);
    /* not sin or cos of a per-item value: a sum over a long item is large, and they turn its
     * last bit of rounding into an absolute error in the result (cos(5000 (1 + 6e-8))) */
    if (u < 0.35) return un(e, unary[rg_int(r, 0, k == RK_D || k == RK_S ? 9 : 11)], a);
    if (u < 0.42) return un(e, positive[rg_int(r, 0, 2)], bin(e, RJ_OP_ADD, un(e, RJ_OP_ABS, a), S(e, 0.5)));
    if (u < 0.8) {
        /* the other operand: the same kind, a literal, or one that broadcasts */
        rj_node c[5];
        int nc = 0;
        c[nc++] = rg_pick(r, k);
        c[nc++] = rg_lit(r);
        if (k != RK_K) c[nc++] = rg_chance(r, 0.5) ? e->w : e->v;
        if (k == RK_J && r->n[RK_S]) c[nc++] = rg_pick(r, RK_S);
        if (k == RK_J && r->n[RK_K]) c[nc++] = rg_pick(r, RK_K);
        rj_node b = c[rg_int(r, 0, nc - 1)];
        rj_op op = binary[rg_int(r, 0, 5)];
        if (op == RJ_OP_DIV) return bin(e, op, a, bin(e, RJ_OP_ADD, un(e, RJ_OP_ABS, b), S(e, 0.5)));
        return rg_chance(r, 0.5) ? bin(e, op, a, b) : bin(e, op, b, a);
    }
    if (u < 0.9) {
        rj_node b = rg_pick(r, k);
        return rj_graph_where(e->g, bin(e, RJ_OP_GT, a, b), a, rg_chance(r, 0.5) ? b : rg_lit(r));
    }
    if (u < 0.93) {
        /* no negative exponents: near 0 they turn a sum's rounding into any error at all */
        static const double ex[] = {2, 3, 0.5};
        int i = rg_int(r, 0, 2);
        return bin(e, RJ_OP_POW, a, i < 2 && rg_chance(r, 0.5) ? SI(e, (int64_t)ex[i]) : S(e, ex[i]));
    }
    if (u < 0.96) {
        static const rj_dtype via[] = {RJ_F64, RJ_F32, RJ_I32};
        return rj_graph_cast(e->g, rj_graph_cast(e->g, a, via[rg_int(r, 0, 2)]), e->ft);
    }
    if (k == RK_J) return rj_graph_masked_fill(e->g, a, e->m, rg_chance(r, 0.3) ? rg_fill(r) : 2.0);
    return bin(e, RJ_OP_MUL, a, rg_lit(r));
}

/* A product step: attention over x and y (scores q kᵀ of a calm q, a causal mask or a shift by
 * the row's or column's maximum, softmax over each row, the product with y; the maximum of
 * each row of probabilities an output), or a linear layer on a calm value with an activation
 * and a sum over the items' rows as an output. Well conditioned: the scores' inputs are x, y
 * or a bounded function of x. */
static void rg_products(rgen *r) {
    env *e = r->e;
    rj_graph *g = e->g;
    static const rj_op calm[] = {RJ_OP_TANH, RJ_OP_SIN, RJ_OP_RELU, RJ_OP_SIGMOID};
    rj_node q = rg_chance(r, 0.5) ? e->x : un(e, calm[rg_int(r, 0, 3)], e->x);
    if (rg_chance(r, 0.3)) { /* linear(q, tab [+ v-like bias]) -> [B, j1, V] */
        rj_node h = rj_graph_linear(g, q, e->tab, RJ_NONE);
        h = un(e, rg_chance(r, 0.5) ? RJ_OP_GELU : RJ_OP_RELU, bin(e, RJ_OP_ADD, h, S(e, 0.25)));
        out(e, rj_graph_reduce(g, rg_chance(r, 0.5) ? RJ_OP_SUM : RJ_OP_MAX, h, 1, false));
        return;
    }
    rj_node sc = bin(e, RJ_OP_MUL, rj_graph_matmul(g, q, rj_graph_transpose(g, e->y, 1, 2)),
                     S(e, rg_chance(r, 0.5) ? 0.25 : 1.0));
    double u = rng_uniform(&r->s, 0, 1);
    if (u < 0.4) {
        rj_node pos = rj_graph_positions(g, e->J);
        rj_node causal = bin(e, RJ_OP_GE, rj_graph_unsqueeze(g, pos, 2), rj_graph_unsqueeze(g, pos, 1));
        sc = rj_graph_where(g, causal, sc, S(e, rg_chance(r, 0.5) ? -INFINITY : -1e9));
    } else if (u < 0.7) {
        sc = bin(e, RJ_OP_SUB, sc, rj_graph_reduce(g, RJ_OP_MAX, sc, rg_chance(r, 0.5) ? 2 : 1, true));
    }
    rj_node p = rj_graph_softmax(g, sc, 2);
    if (rg_chance(r, 0.5)) out(e, rj_graph_reduce(g, RJ_OP_MAX, p, 2, false));
    rg_keep(r, RK_J, rj_graph_matmul(g, p, e->y));
}

/* A gather: rows of the table (an embedding of ix, times a jagged value), each row's previous
 * row in its item (take_along_dim over the ragged dim), one column of each row (over D, at ix),
 * or rows of a padded value at the padded previous row. */
static void rg_gather(rgen *r, rj_dim padlen) {
    env *e = r->e;
    rj_graph *g = e->g;
    double u = rng_uniform(&r->s, 0, 1);
    if (u < 0.25) {
        rg_keep(r, RK_J, bin(e, RJ_OP_MUL, rj_graph_embedding(g, e->tab, e->ix), rg_pick(r, RK_J)));
    } else if (u < 0.5) {
        rg_keep(r, RK_J, rj_graph_take_along_dim(g, rg_pick(r, RK_J), prev_row(e), 1));
    } else if (u < 0.75 || !r->n[RK_P]) {
        rg_keep(r, RK_K, rj_graph_take_along_dim(g, rg_pick(r, RK_J), rj_graph_unsqueeze(g, e->ix, -1), 2));
    } else { /* every padded value the generator made has padlen's length */
        rj_node idx = rj_graph_pad(g, rj_graph_squeeze(g, prev_row(e), 2), 0, padlen);
        rg_keep(r, RK_P, rj_graph_take_along_dim(g, rg_pick(r, RK_P), rj_graph_unsqueeze(g, idx, 2), 1));
    }
}

void std_random_chain(env *e, uint64_t seed) {
    rgen r = {.e = e, .s = seed * 0x9E3779B97F4A7C15ull + 1};
    r.v[RK_J][0] = e->x, r.v[RK_J][1] = e->y, r.n[RK_J] = 2;
    r.v[RK_D][0] = e->pb, r.n[RK_D] = 1;
    r.v[RK_S][0] = e->p3, r.n[RK_S] = 1;
    static const rj_op reduce[] = {RJ_OP_SUM, RJ_OP_MEAN, RJ_OP_MAX, RJ_OP_MIN, RJ_OP_SUM, RJ_OP_MEAN};
    rj_dim padlen = rg_chance(&r, 0.3) ? e->L : RJ_DIM_NONE; /* one for all, so padded values combine */
    int steps = rg_int(&r, 3, 10);
    for (int i = 0; i < steps; i++) {
        if (rg_chance(&r, 0.08)) {
            rg_products(&r);
            continue;
        }
        if (rg_chance(&r, 0.06)) {
            rg_gather(&r, padlen);
            continue;
        }
        double u = rng_uniform(&r.s, 0, 1);
        rj_node a = rg_pick(&r, RK_J);
        if (u < 0.45) {
            static const int kinds[] = {RK_J, RK_J, RK_J, RK_D, RK_P, RK_S, RK_K};
            int k = kinds[rg_int(&r, 0, 6)];
            if (!r.n[k]) k = RK_J;
            rg_keep(&r, k, rg_elementwise(&r, k));
        } else if (u < 0.58) {
            bool keep = rg_chance(&r, 0.3);
            rg_keep(&r, keep ? RK_S : RK_D, rj_graph_reduce(e->g, reduce[rg_int(&r, 0, 5)], a, 1, keep));
        } else if (u < 0.62) {
            int k = r.n[RK_S] && rg_chance(&r, 0.5) ? RK_S : RK_D;
            rj_node b = rg_pick(&r, k);
            rg_keep(&r, k, rg_chance(&r, 0.5) ? rj_graph_softmax(e->g, b, -1) : rj_graph_log_softmax(e->g, b, -1));
        } else if (u < 0.64) { /* prod of values kept near 1 */
            rj_node c = bin(e, RJ_OP_MINIMUM, bin(e, RJ_OP_MAXIMUM, a, S(e, -1.2)), S(e, 1.2));
            rg_keep(&r, RK_D, rj_graph_reduce(e->g, RJ_OP_PROD, c, 1, false));
        } else if (u < 0.70) {
            rg_keep(&r, RK_K, rj_graph_reduce(e->g, reduce[rg_int(&r, 0, 3)], a, 2, true));
        } else if (u < 0.80) {
            int dim = rg_chance(&r, 0.5) ? 1 : -1;
            rg_keep(&r, RK_J, rg_chance(&r, 0.5) ? rj_graph_softmax(e->g, a, dim) : rj_graph_log_softmax(e->g, a, dim));
        } else if (u < 0.86) {
            /* a norm of a nearly constant row (1.5 + a softmax) turns rounding into any error
             * at all: norms take x or y, through a unary op at most */
            static const rj_op calm[] = {RJ_OP_RELU, RJ_OP_TANH, RJ_OP_EXP, RJ_OP_SIN, RJ_OP_ABS};
            a = rg_chance(&r, 0.5) ? e->x : e->y;
            if (rg_chance(&r, 0.5)) a = un(e, calm[rg_int(&r, 0, 4)], a);
            rj_node w = rg_chance(&r, 0.5) ? e->w : RJ_NONE;
            rg_keep(&r, RK_J, rg_chance(&r, 0.5) ? rj_graph_layer_norm(e->g, a, 1, w, rg_chance(&r, 0.5) ? e->v : RJ_NONE, -1)
                                                  : rj_graph_rms_norm(e->g, a, 1, w, -1));
        } else {
            rj_node p = rg_keep(&r, RK_P, rj_graph_pad(e->g, a, rg_fill(&r), padlen));
            double v = rng_uniform(&r.s, 0, 1);
            if (v < 0.3) rg_keep(&r, RK_J, rj_graph_unpad(e->g, rg_elementwise(&r, RK_P), e->J));
            else if (v < 0.6) rg_keep(&r, RK_D, rj_graph_reduce(e->g, reduce[rg_int(&r, 0, 3)], p, 1, false));
            else if (v < 0.8) rg_keep(&r, RK_J, rj_graph_unpad(e->g, rj_graph_softmax(e->g, p, 1), e->J));
        }
    }
    /* outputs: the newest value of each kind the generator made */
    int outs = rj_graph_output_count(e->g); /* a product step's */
    for (int k = 0; k < RK_COUNT; k++)
        if (r.made[k]) out(e, r.v[k][r.n[k] - 1]), outs++;
    if (!outs) out(e, rg_elementwise(&r, RK_J));
}

/* ---- the corpus on a GPU target ----------------------------------------------------------- */

int std_corpus_count(void) { return std_nops + std_nchains; }

const char *std_corpus_name(int i) { return i < std_nops ? std_ops[i].name : std_chains[i - std_nops].name; }

env std_corpus_build(rj_ctx *ctx, int i, rj_dtype ft) {
    env e = env_new(ctx, ft);
    (i < std_nops ? std_ops[i].fn : std_chains[i - std_nops].fn)(&e);
    if (rj_graph_status(e.g) != RJ_OK) fail_msg("%s: building: %s", std_corpus_name(i), rj_ctx_error(ctx));
    return e;
}

double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

static const char *target_name(rj_target t) {
    return t == RJ_TARGET_CUDA ? "CUDA" : t == RJ_TARGET_OPENCL ? "OpenCL" : t == RJ_TARGET_CPU ? "CPU" : "reference";
}

/* One length pattern of graph i in one layout on the program pt, against the interpreter. */
static void run_pattern(rj_ctx *ctx, const env *e, const char *name, uint64_t seed, rj_program *pt,
                        rj_program *pr, int pat, bool with_holes) {
    rj_dtype ft = e->ft;
    data d = data_new((len_pattern)pat, ft, seed);
    holes h = {0};
    if (with_holes) h = holes_new(&d, ft);
    rj_bind *bt = rj_bind_new(pt), *br = rj_bind_new(pr);
    bind_all(ctx, bt, e, &d, with_holes ? &h : NULL);
    bind_all(ctx, br, e, &d, with_holes ? &h : NULL);
    if (rj_program_run(pt, bt))
        fail_msg("%s (%s%s): run: %s", name, len_pattern_names[pat], with_holes ? ", with holes" : "",
                 rj_ctx_error(ctx));
    assert_ok(ctx, rj_program_run(pr, br));
    for (int o = 0; o < rj_graph_output_count(e->g); o++) {
        rj_node on = rj_graph_output_at(e->g, o);
        rj_tensor_info gi, ri;
        rj_tensor_get_info(rj_bind_result(bt, on), &gi);
        rj_tensor_get_info(rj_bind_result(br, on), &ri);
        char what[160];
        snprintf(what, sizeof what, "%s, output %s, %s, %s%s", name, rj_node_name(e->g, on),
                 len_pattern_names[pat], rj_dtype_name(ft), with_holes ? ", with holes" : "");
        compare(what, &gi, &ri);
    }
    rj_bind_free(bt);
    rj_bind_free(br);
    if (with_holes) holes_free(&h);
    data_free(&d);
}

/* Compiles e's graph for target and checks it against the interpreter on every length pattern
 * in the layouts asked for (seed: the data's), then frees the graph; skips the test, saying
 * why, when the target has no device. Returns the compile time in ms. */
static double run_graph(rj_ctx *ctx, env *e, const char *name, uint64_t seed, rj_target target, int layouts) {
    if (rj_graph_status(e->g) != RJ_OK) fail_msg("%s: building: %s", name, rj_ctx_error(ctx));
    double tc = now_ms();
    rj_program *pt = rj_program_new(e->g, target);
    tc = now_ms() - tc;
    if (!pt) {
        if (rj_ctx_status(ctx) != RJ_ERR_NO_DEVICE)
            fail_msg("%s: compiling for %s: %s", name, target_name(target), rj_ctx_error(ctx));
        printf("skipped: %s\n", rj_ctx_error(ctx));
        rj_graph_free(e->g);
        skip();
    }
    rj_program *pr = rj_program_new(e->g, RJ_TARGET_REFERENCE);
    assert_non_null(pr);
    for (int pat = 0; pat < LEN_PATTERN_COUNT; pat++) {
        if (layouts & STD_PACKED) run_pattern(ctx, e, name, seed, pt, pr, pat, false);
        if (layouts & STD_HOLES) run_pattern(ctx, e, name, seed, pt, pr, pat, true);
    }
    rj_program_free(pt);
    rj_program_free(pr);
    rj_graph_free(e->g);
    return tc;
}

/* g compiled for target; without its device, the test is skipped (and g freed). */
static rj_program *program_or_skip(rj_ctx *ctx, rj_graph *g, rj_target target, const char *what) {
    rj_program *p = rj_program_new(g, target);
    if (!p) {
        if (rj_ctx_status(ctx) != RJ_ERR_NO_DEVICE) fail_msg("%s: %s", what, rj_ctx_error(ctx));
        printf("skipped: %s\n", rj_ctx_error(ctx));
        rj_graph_free(g);
        skip();
    }
    return p;
}

/* Composite activations where their textbook forms cancel: 0.5x(1 + tanh(u)) and
 * 0.5x(1 + erf(t)) for large negative x, where a tanh or erf one ulp short of -1 (within the
 * OpenCL and CUDA bounds) times x is far from the true value (gelu_tanh(-6843.7) was -2e-4 on
 * PoCL). The wanted values come from forms without the cancellation, in long double; a
 * result must be within 1e-5 of them, relatively, or exactly 0 where they are too small for
 * the textbook forms to resolve. */
static long double tail_want(rj_op op, long double x) {
    long double u = 0.7978845608028654L * (x + 0.044715L * x * x * x);
    switch (op) {
    case RJ_OP_GELU: return 0.5L * x * erfcl(-x * 0.70710678118654752440L);
    case RJ_OP_GELU_TANH: return x / (1 + expl(-2 * u));
    case RJ_OP_SILU: return x / (1 + expl(-x));
    case RJ_OP_SIGMOID: return 1 / (1 + expl(-x));
    default: return tanhl(x);
    }
}

void std_check_tails(rj_ctx *ctx, rj_target target) {
    static const float xs[] = {-1e30f, -6843.7f, -1e4f, -200, -100, -30, -20, -12, -10, -6, -3,
                               -0.5f, 0, 0.5f, 3, 6, 10, 20, 100, 1e4f, 1e30f};
    static const rj_op ops[] = {RJ_OP_GELU, RJ_OP_GELU_TANH, RJ_OP_SILU, RJ_OP_SIGMOID, RJ_OP_TANH};
    enum { NX = sizeof xs / sizeof xs[0], NOPS = sizeof ops / sizeof ops[0] };
    rj_graph *g = rj_graph_new(ctx);
    rj_dim n = rj_graph_dense(g, "N");
    rj_node x = rj_graph_input(g, "x", RJ_F32, 1, &n), y[NOPS];
    for (int k = 0; k < NOPS; k++) rj_graph_output(g, y[k] = rj_graph_unary(g, ops[k], x), NULL);
    rj_program *p = program_or_skip(ctx, g, target, "tails");
    rj_bind *b = rj_bind_new(p);
    float got[NOPS][NX];
    assert_ok(ctx, rj_bind_size(b, n, NX));
    assert_ok(ctx, rj_bind_input(b, x, xs, NX));
    for (int k = 0; k < NOPS; k++) assert_ok(ctx, rj_bind_output(b, y[k], got[k], NX));
    assert_ok(ctx, rj_program_run(p, b));
    for (int k = 0; k < NOPS; k++)
        for (int i = 0; i < NX; i++) {
            long double w = tail_want(ops[k], xs[i]);
            /* 0 for a value below the textbook form's resolution, |x| 2^-24, as PyTorch gives */
            bool flushed = got[k][i] == 0 && fabsl(w) < 6e-8L * fmaxl(1, fabsl((long double)xs[i]));
            if (!flushed && fabsl(got[k][i] - w) > 1e-5L * fabsl(w) + 1e-30L)
                fail_msg("%s(%g) on %s: %.9g, want %.9Lg", rj_op_name(ops[k]), (double)xs[i], target_name(target),
                         (double)got[k][i], w);
        }
    rj_bind_free(b);
    rj_program_free(p);
    rj_graph_free(g);
}

/* The identities of reductions over empty items (ir.h: op_identity, defined once): a sum is
 * +0.0 (PyTorch's; not -0.0, the partial accumulators' start), a product 1, max -inf, min
 * +inf, on a target and on the interpreter alike. */
void std_check_identities(rj_ctx *ctx, rj_target target) {
    static const rj_op ops[] = {RJ_OP_SUM, RJ_OP_PROD, RJ_OP_MAX, RJ_OP_MIN};
    static const double want[] = {0.0, 1.0, -INFINITY, INFINITY};
    enum { NOPS = sizeof ops / sizeof ops[0], B = 3, W = 5 };
    static const int64_t off[B + 1] = {0, 0, 0, 0};
    rj_graph *g = rj_graph_new(ctx);
    rj_dim b = rj_graph_dense(g, "B"), j = rj_graph_ragged(g, "j1", b);
    rj_node x = rj_graph_input(g, "x", RJ_F32, 3, (rj_dim[]){b, j, W}), y[NOPS];
    for (int k = 0; k < NOPS; k++) rj_graph_output(g, y[k] = rj_graph_reduce(g, ops[k], x, 1, false), NULL);
    rj_target targets[2] = {target, RJ_TARGET_REFERENCE};
    for (int t = 0; t < 2; t++) {
        rj_program *p = program_or_skip(ctx, g, targets[t], "identities");
        rj_bind *bd = rj_bind_new(p);
        float got[NOPS][B * W], none = 0;
        assert_ok(ctx, rj_bind_offsets(bd, j, B, off, NULL));
        assert_ok(ctx, rj_bind_input(bd, x, &none, 0));
        for (int k = 0; k < NOPS; k++) assert_ok(ctx, rj_bind_output(bd, y[k], got[k], B * W));
        assert_ok(ctx, rj_program_run(p, bd));
        for (int k = 0; k < NOPS; k++)
            for (int i = 0; i < B * W; i++)
                if (got[k][i] != want[k] || !signbit(got[k][i]) != !signbit(want[k]))
                    fail_msg("%s of an empty item on %s: %g, want %g", rj_op_name(ops[k]), target_name(targets[t]),
                             (double)got[k][i], want[k]);
        rj_bind_free(bd);
        rj_program_free(p);
    }
    rj_graph_free(g);
}

void std_corpus_run(rj_ctx *ctx, rj_target target, int layouts) {
    std_corpus_run_types(ctx, target, layouts, RJ_F32, RJ_F64, NULL);
}

void std_corpus_run_types(rj_ctx *ctx, rj_target target, int layouts, rj_dtype ft0, rj_dtype ft1,
                          const char *const *only) {
    int graphs = 0;
    double t0 = now_ms(), t_compile = 0;
    for (int i = 0; i < std_corpus_count(); i++) {
        bool take = !only;
        for (int k = 0; only && only[k]; k++) take |= !strcmp(only[k], std_corpus_name(i));
        if (!take) continue;
        for (rj_dtype ft = ft0; ft <= ft1; ft++) {
            env e = std_corpus_build(ctx, i, ft);
            t_compile += run_graph(ctx, &e, std_corpus_name(i), (uint64_t)i + 7, target, layouts);
            graphs++;
        }
    }
    printf("%d graphs match the interpreter on %s (%d length patterns%s%s) in %.0f ms (compiling: %.0f ms)\n",
           graphs, target_name(target), LEN_PATTERN_COUNT, layouts & STD_PACKED ? ", packed inputs" : "",
           layouts & STD_HOLES ? ", inputs with holes" : "", now_ms() - t0, t_compile);
}

void std_random_range(int fallback, uint64_t *first, uint64_t *last) {
    const char *one = getenv("RJ_RANDOM_SEED"), *n = getenv("RJ_RANDOM_CHAINS");
    *first = 1, *last = (uint64_t)fallback;
    if (one && *one) *first = *last = strtoull(one, NULL, 10);
    else if (n && *n) { /* N, or A..B to go on with a campaign */
        char *end;
        *last = strtoull(n, &end, 10);
        if (!strncmp(end, "..", 2)) *first = *last, *last = strtoull(end + 2, NULL, 10);
    }
}

void std_random_print(rj_ctx *ctx, uint64_t seed, rj_dtype ft) {
    env e = env_new(ctx, ft);
    std_random_chain(&e, seed);
    char *text = rj_graph_dump(e.g, RJ_TARGET_CPU, "graph");
    printf("random chain %llu (%s):\n%s", (unsigned long long)seed, rj_dtype_name(ft), text ? text : rj_ctx_error(ctx));
    rj_string_free(ctx, text);
    rj_graph_free(e.g);
}

void std_random_run(rj_ctx *ctx, rj_target target, int fallback) {
    uint64_t first, last;
    std_random_range(fallback, &first, &last);
    double t0 = now_ms();
    for (uint64_t seed = first; seed <= last; seed++) {
        rj_dtype ft = seed % 4 ? RJ_F32 : RJ_F64;
        if (first == last) std_random_print(ctx, seed, ft);
        env e = env_new(ctx, ft);
        std_random_chain(&e, seed);
        char name[64];
        snprintf(name, sizeof name, "random chain %llu (RJ_RANDOM_SEED=%llu)", (unsigned long long)seed,
                 (unsigned long long)seed);
        run_graph(ctx, &e, name, seed, target, STD_PACKED | STD_HOLES);
    }
    printf("random chains %llu..%llu match the interpreter on %s (%d length patterns, packed and with holes) "
           "in %.0f ms\n", (unsigned long long)first, (unsigned long long)last, target_name(target),
           LEN_PATTERN_COUNT, now_ms() - t0);
}

/* Compiles and runs a small graph on target with the nth allocation failing (0: none). */
static rj_status failing_run(rj_target target, tracker *tr, long nth, long *attempts, bool device) {
    rj_ctx *ctx = rj_ctx_new(tracking_alloc, tr);
    assert_non_null(ctx);
    env e = env_new(ctx, RJ_F32);
    std_chain_add(&e, "softmax(relu(x*w+v), dim=1)");
    std_chain_add(&e, "sum(pad(x,0.75,L),1)");
    std_chain_add(&e, "sum(embedding(tab, ix), 1)"); /* the index checks' buffer and verdict */
    std_chain_add(&e, "gelu(linear(relu(x*w+v), tab)+0.25)"); /* a GEMM's chunk loop (CPU) */
    std_chain_add(&e, "softmax(x @ yᵀ * 0.25, 2) @ relu(y)"); /* two ragged dims: blocks' offsets */
    data d = data_new(LEN_UNIFORM, RJ_F32, 5);
    rj_bind *b = NULL;
    long before = tr->attempts;
    tr->fail_at = nth ? before + nth : 0;
    rj_program *p = rj_program_new(e.g, target);
    rj_status st = p ? RJ_OK : rj_ctx_status(ctx);
    if (p && !(b = rj_bind_new(p))) st = rj_ctx_status(ctx);
    if (b) {
        rj_bind_offsets(b, e.J, d.B, d.off, NULL);
        rj_bind_size(b, e.L, d.maxlen + 3);
        const void *in[] = {d.x, d.y, d.w, d.v, d.m, d.xi, d.pb, d.p3, d.tab, d.ix, d.sb};
        rj_node nodes[] = {e.x, e.y, e.w, e.v, e.m, e.xi, e.pb, e.p3, e.tab, e.ix, e.sb};
        int64_t numel[] = {d.rows * D, d.rows * D, D, D, d.rows * D, d.rows * D, d.B * D, d.B * D, V * D, d.rows, d.sq};
        for (int i = 0; i < 11; i++)
            if (nodes[i] != RJ_NONE) rj_bind_input(b, nodes[i], in[i], numel[i]);
        if (device) /* outputs in device memory that the binding allocates, run twice, exported */
            for (int i = 0; i < rj_graph_output_count(e.g); i++) rj_bind_output_device(b, rj_graph_output_at(e.g, i), 0, 0);
        st = rj_program_run(p, b);
        if (device && !st) st = rj_program_run(p, b);
        if (device && !st) st = rj_bind_wait(b);
        if (device && !st) {
            DLManagedTensor *v = NULL;
            st = rj_bind_export_dlpack(b, rj_graph_output_at(e.g, 1), &v, NULL); /* sum: dense */
            if (v) v->deleter(v);
        }
    }
    tr->fail_at = 0;
    *attempts = tr->attempts - before;
    data_free(&d);
    rj_bind_free(b);
    rj_program_free(p);
    rj_graph_free(e.g);
    rj_ctx_free(ctx);
    return st;
}

void std_alloc_sweep(rj_target target) { std_alloc_sweep_mode(target, false); }

void std_alloc_sweep_mode(rj_target target, bool device) {
    tracker clean = {0};
    long total;
    double t0 = now_ms();
    rj_status st = failing_run(target, &clean, 0, &total, device);
    if (st == RJ_ERR_NO_DEVICE) {
        printf("skipped: no %s device\n", target_name(target));
        skip();
    }
    assert_int_equal(st, RJ_OK);
    for (long nth = 1; nth <= total; nth++) {
        tracker tr = {0};
        long n;
        st = failing_run(target, &tr, nth, &n, device);
        if (st != RJ_ERR_NOMEM)
            fail_msg("failing allocation %ld of %ld gave %s", nth, total, rj_status_str(st));
        if (tr.live_blocks || tr.bad_size)
            fail_msg("failing allocation %ld of %ld leaked %ld blocks", nth, total, tr.live_blocks);
    }
    printf("alloc sweep (%s compile and run%s): %ld allocation points, each failed once, in %.0f ms\n",
           target_name(target), device ? ", device outputs run twice and exported" : "", total, now_ms() - t0);
}

/* ---- indices out of range ------------------------------------------------------------------ */

/* Runs graph e (built by fn) on `target` and on the interpreter with data d (holes: h): both
 * fail with RJ_ERR_INDEX and the same message, which contains `want`. false: no device. */
static bool index_error_case(rj_ctx *ctx, rj_target target, void (*fn)(env *), const data *d, const holes *h,
                             const char *want) {
    env e = env_new(ctx, RJ_F32);
    fn(&e);
    if (rj_graph_status(e.g)) fail_msg("building: %s", rj_ctx_error(ctx));
    rj_program *pt = rj_program_new(e.g, target);
    if (!pt && rj_ctx_status(ctx) == RJ_ERR_NO_DEVICE) {
        rj_graph_free(e.g);
        return false;
    }
    if (!pt) fail_msg("compiling: %s", rj_ctx_error(ctx));
    rj_program *pr = rj_program_new(e.g, RJ_TARGET_REFERENCE);
    rj_bind *bt = rj_bind_new(pt), *br = rj_bind_new(pr);
    bind_all(ctx, bt, &e, d, h);
    bind_all(ctx, br, &e, d, h);
    assert_int_equal(rj_program_run(pr, br), RJ_ERR_INDEX);
    char ref[512];
    snprintf(ref, sizeof ref, "%s", rj_ctx_error(ctx));
    rj_status s = rj_program_run(pt, bt);
    if (s != RJ_ERR_INDEX) fail_msg("%s: expected RJ_ERR_INDEX (%s), got %s: %s", target_name(target), ref,
                                    rj_status_str(s), rj_ctx_error(ctx));
    if (strcmp(rj_ctx_error(ctx), ref)) fail_msg("%s says \"%s\", the interpreter \"%s\"", target_name(target),
                                                 rj_ctx_error(ctx), ref);
    if (!strstr(ref, want)) fail_msg("\"%s\" does not say \"%s\"", ref, want);
    /* a failed run has no results; the error stays */
    assert_null(rj_bind_result(bt, rj_graph_output_at(e.g, 0)));
    assert_int_equal(rj_ctx_status(ctx), RJ_ERR_INDEX);
    rj_bind_free(bt);
    rj_bind_free(br);
    rj_program_free(pt);
    rj_program_free(pr);
    rj_graph_free(e.g);
    return true;
}

static void e_embedding(env *e) { std_chain_add(e, "sum(embedding(tab, ix), 1)"); }
static void e_rows(env *e) { /* ix (0..6) as rows of items, most of them shorter */
    out(e, rj_graph_take_along_dim(e->g, e->x, rj_graph_unsqueeze(e->g, e->ix, -1), 1));
}
static void e_select(env *e) {
    rj_node sel = rj_graph_cast(e->g, bin(e, RJ_OP_MUL, e->w, S(e, 40)), RJ_I32); /* -40..40 */
    out(e, rj_graph_index_select(e->g, e->x, 2, sel));
}

void std_index_errors(rj_target target) {
    rj_ctx *ctx = rj_ctx_new(NULL, NULL);
    double t0 = now_ms();
    for (int layout = 0; layout < 2; layout++) {
        data d = data_new(LEN_UNIFORM, RJ_F32, 11);
        /* two bad indices: the message names the first */
        int64_t b1 = 0, b2 = 0;
        while (b1 < d.B && d.off[b1 + 1] - d.off[b1] < 2) b1++;
        for (b2 = d.B - 1; b2 > b1 && d.off[b2 + 1] == d.off[b2]; b2--) {}
        assert_true(b2 > b1);
        ((int64_t *)d.ix)[d.off[b1] + 1] = V;
        ((int64_t *)d.ix)[d.off[b2]] = -1;
        holes h = {0};
        if (layout) h = holes_new(&d, RJ_F32);
        char want[96];
        snprintf(want, sizeof want, "embedding: the index at [%lld, 1] of input ix is 7, out of range [0, 7)",
                 (long long)b1);
        if (!index_error_case(ctx, target, e_embedding, &d, layout ? &h : NULL, want)) {
            printf("skipped: no %s device\n", target_name(target));
            data_free(&d);
            rj_ctx_free(ctx);
            skip();
        }
        index_error_case(ctx, target, e_rows, &d, layout ? &h : NULL, "take_along_dim: the index at [");
        index_error_case(ctx, target, e_select, &d, layout ? &h : NULL, "index_select: the index at [");
        if (layout) holes_free(&h);
        data_free(&d);
    }
    printf("indices out of range (%s, packed and with holes): the interpreter's error, in %.0f ms\n",
           target_name(target), now_ms() - t0);
    rj_ctx_free(ctx);
}

/* ---- kernels compiled late -------------------------------------------------------------- */

rj_graph *late_graph(rj_ctx *ctx, int64_t *n) {
    static const int64_t widths[] = {256, 64, 32};
    for (size_t i = 0; i < sizeof widths / sizeof *widths; i++) {
        char src[160];
        snprintf(src, sizeof src, "ragged j1 : B\ninput x : f32[B, j1, %lld]\ny = softmax(x, dim=1)\noutput y\n",
                 (long long)widths[i]);
        rj_graph *g = rj_graph_parse(ctx, src, "late");
        if (!g) fail_msg("late_graph: %s", rj_ctx_error(ctx));
        char *loops = rj_graph_dump(g, RJ_TARGET_CPU, "loops");
        if (!loops) fail_msg("late_graph: %s", rj_ctx_error(ctx));
        bool twin = strstr(loops, "kernel k0_tiles(") != NULL;
        rj_string_free(ctx, loops);
        if (twin) {
            *n = widths[i];
            return g;
        }
        rj_graph_free(g);
    }
    fail_msg("late_graph: no width gives softmax a twin of runtime tiles on this host");
    return NULL;
}

void late_check(rj_ctx *ctx, const rj_graph *g, rj_program *p, rj_program *pr, const int64_t *len, int64_t B,
                int64_t n) {
    int64_t *off = malloc(sizeof *off * (size_t)(B + 1));
    assert_non_null(off);
    off[0] = 0;
    for (int64_t b = 0; b < B; b++) off[b + 1] = off[b] + len[b];
    uint64_t seed = 7;
    float *x = random_values(RJ_F32, off[B] * n + 1, &seed);
    rj_tensor_info got, want;
    rj_bind *bs[2] = {rj_bind_new(p), rj_bind_new(pr)};
    for (int k = 0; k < 2; k++) {
        assert_ok(ctx, rj_bind_offsets(bs[k], rj_graph_find_dim(g, "j1"), B, off, NULL));
        assert_ok(ctx, rj_bind_input(bs[k], rj_graph_find(g, "x"), x, off[B] * n));
        assert_ok(ctx, rj_program_run(k ? pr : p, bs[k]));
        assert_ok(ctx, rj_tensor_get_info(rj_bind_result(bs[k], rj_graph_find(g, "y")), k ? &want : &got));
    }
    compare("late kernel", &got, &want);
    rj_bind_free(bs[0]);
    rj_bind_free(bs[1]);
    free(x);
    free(off);
}
