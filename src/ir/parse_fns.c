/*
 * parse_fns.c — PyTorch's functions that the text format builds of other ops: clamp,
 * logsumexp, normalize, norm and vector_norm, leaky_relu, the elementwise ones (square ...
 * softsign), the exp and log family (log1p, expm1, softplus, elu, celu, selu, mish), logsigmoid
 * ... logaddexp (build_more_fn), var/std, and argmax/argmin with the indices of max and min.
 * Each builds its nodes under its own name (built_as), so its errors name it; 16-bit inputs of
 * those made of several ops compute in f32 and round once, as PyTorch's kernels do.
 * parse_call.c's table has their rows.
 */
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "parse.h"

/* clamp(input, min=None, max=None) (and clip), clamp_min(input, min), clamp_max(input, max):
 * maximum with min, then minimum with max, which is PyTorch's clamp: NaN in the input or in a
 * bound gives NaN, min > max gives max, and the dtype is the promotion of the input and the
 * bounds (numbers or tensors that broadcast). */
value build_clamp(parser *P, const call_site *c, value **v) {
    bool only_min = !strcmp(c->name, "clamp_min"), only_max = !strcmp(c->name, "clamp_max");
    const value *lo = only_max ? NULL : v[1], *hi = only_max ? v[1] : only_min ? NULL : v[2];
    if (is_none(lo)) lo = NULL;
    if (is_none(hi)) hi = NULL;
    if (!lo && !hi) {
        fail_at(P, c->fn, RJ_ERR_ARG, "%s: at least one of min and max must be given", c->name);
        return nothing(c);
    }
    rj_node x = as_node(P, v[0]);
    if (lo && !P->failed) x = built_as(P, c->fn, c->name, rj_graph_binary(P->g, RJ_OP_MAXIMUM, x, as_node(P, lo)));
    if (hi && !P->failed) x = built_as(P, c->fn, c->name, rj_graph_binary(P->g, RJ_OP_MINIMUM, x, as_node(P, hi)));
    return P->failed ? nothing(c) : node_value(x, *c->fn);
}

/* x as a float tensor to compute in: f32 for integers and bool (PyTorch's default float) and
 * for f16 and bf16 (ragjit's arithmetic for them, rounded once at the end: *back). */
static rj_node float_work(parser *P, const call_site *c, rj_node x, rj_dtype *back) {
    rj_dtype t = rj_node_dtype(P->g, x);
    *back = t == RJ_F16 || t == RJ_BF16 || t == RJ_F64 ? t : RJ_F32;
    return t == RJ_F32 || t == RJ_F64 ? x : built_as(P, c->fn, c->name, rj_graph_cast(P->g, x, RJ_F32));
}

/* r, the result of a function built of ops, rounded to `back` where float_work set it (a dtype
 * other than r's; RJ_DTYPE_COUNT: r as it is); nothing after reporting. */
static value rounded_back(parser *P, const call_site *c, rj_node r, rj_dtype back) {
    r = built_as(P, c->fn, c->name, r);
    if (!P->failed && (int)back != RJ_DTYPE_COUNT && back != rj_node_dtype(P->g, r))
        r = built_as(P, c->fn, c->name, rj_graph_cast(P->g, r, back));
    return P->failed ? nothing(c) : node_value(r, *c->fn);
}

/* v as a float tensor operand, as PyTorch's vector norms and leaky_relu require; RJ_NONE after
 * reporting. */
static rj_node float_input(parser *P, const call_site *c, const value *v) {
    rj_node x = as_node(P, v);
    if (P->failed) return RJ_NONE;
    if (!dtype_is_float(rj_node_dtype(P->g, x))) {
        fail_at(P, c->fn, RJ_ERR_DTYPE, "%s: the input must be a float tensor (it is %s)", c->name,
                rj_dtype_name(rj_node_dtype(P->g, x)));
        return RJ_NONE;
    }
    return x;
}

/* logsumexp(input, dim, keepdim=False): PyTorch's, m + log(sum(exp(x - m), dim)) with m the
 * maximum over dim taken as 0 where it is infinite, so that a line of -inf (or an empty item)
 * gives -inf, one with +inf gives inf, and NaN gives NaN. Integer inputs give f32. */
value build_logsumexp(parser *P, const call_site *c, value **v) {
    bool keep = false;
    if (v[2] && !bool_arg(P, c->name, "keepdim", v[2], &keep)) return nothing(c);
    rj_node x = as_node(P, v[0]);
    if (P->failed) return nothing(c);
    rj_dim shape[RJ_MAX_RANK];
    int dims[RJ_MAX_RANK], n = dim_list(P, c->name, v[1], rj_node_shape(P->g, x, shape), dims);
    rj_dtype back;
    if (!n || (x = float_work(P, c, x, &back)) == RJ_NONE) return nothing(c);
    rj_graph *g = P->g;
    rj_node m = reduce_over(P, c->fn, c->name, RJ_OP_MAX, x, dims, n, true);
    if (m == RJ_NONE) return nothing(c);
    rj_node inf = rj_graph_binary(g, RJ_OP_EQ, rj_graph_unary(g, RJ_OP_ABS, m), rj_graph_scalar(g, INFINITY));
    m = built_as(P, c->fn, c->name, rj_graph_where(g, inf, rj_graph_scalar(g, 0.0), m));
    rj_node e = P->failed ? RJ_NONE : built_as(P, c->fn, c->name, rj_graph_unary(g, RJ_OP_EXP, rj_graph_binary(g, RJ_OP_SUB, x, m)));
    rj_node s = P->failed ? RJ_NONE : reduce_over(P, c->fn, c->name, RJ_OP_SUM, e, dims, n, keep);
    for (int i = 0; i < n && !keep && !P->failed; i++) m = built_as(P, c->fn, c->name, rj_graph_squeeze(g, m, dims[i]));
    if (P->failed) return nothing(c);
    return rounded_back(P, c, rj_graph_binary(g, RJ_OP_ADD, rj_graph_unary(g, RJ_OP_LOG, s), m), back);
}

/* The vector p-norm of x (already in its working float type) over dims[0..n): sqrt(sum(x * x))
 * for p = 2, sum(|x|) for 1, max(|x|) for inf, min(|x|) for -inf, the count of non-zeros for 0,
 * else sum(|x| ** p) ** (1 / p); RJ_NONE after reporting. */
static rj_node norm_of(parser *P, const call_site *c, rj_node x, double p, const int *dims, int n, bool keep) {
    rj_graph *g = P->g;
    rj_node a = p == 2 ? rj_graph_binary(g, RJ_OP_MUL, x, x) : rj_graph_unary(g, RJ_OP_ABS, x);
    if (p == 0) a = rj_graph_cast(g, rj_graph_binary(g, RJ_OP_NE, x, rj_graph_scalar(g, 0.0)), rj_node_dtype(g, x));
    else if (p != 1 && p != 2 && !isinf(p)) a = rj_graph_binary(g, RJ_OP_POW, a, rj_graph_scalar(g, p));
    rj_op red = isinf(p) ? (p > 0 ? RJ_OP_MAX : RJ_OP_MIN) : RJ_OP_SUM;
    rj_node r = reduce_over(P, c->fn, c->name, red, built_as(P, c->fn, c->name, a), dims, n, keep);
    if (r == RJ_NONE) return RJ_NONE;
    if (p == 2) return rj_graph_unary(g, RJ_OP_SQRT, r);
    if (p != 1 && p != 0 && !isinf(p)) return rj_graph_binary(g, RJ_OP_POW, r, rj_graph_scalar(g, 1 / p));
    return r;
}

/* normalize(input, p=2.0, dim=1, eps=1e-12): PyTorch's F.normalize, x / max(||x||_p, eps)
 * over dim (an integer or a tuple): p = 2 is sqrt(sum(x * x)), 1 sum(|x|), inf max(|x|), any
 * other positive p sum(|x| ** p) ** (1 / p). The input must be a float tensor, as PyTorch's
 * vector norm requires. */
value build_normalize(parser *P, const call_site *c, value **v) {
    double p = 2, eps = 1e-12;
    if ((v[1] && !literal(P, v[1], &p)) || (v[3] && !literal(P, v[3], &eps))) return nothing(c);
    if (!(p > 0)) {
        fail_at(P, &v[1]->at, RJ_ERR_ARG, "%s: p must be positive (or inf)", c->name);
        return nothing(c);
    }
    rj_node x = float_input(P, c, v[0]);
    if (x == RJ_NONE) return nothing(c);
    rj_graph *g = P->g;
    rj_dim shape[RJ_MAX_RANK];
    int dims[RJ_MAX_RANK], rank = rj_node_shape(g, x, shape);
    int n = v[2] ? dim_list(P, c->name, v[2], rank, dims) : rank > 1 ? (dims[0] = 1, 1) : 0;
    if (!n) {
        if (!P->failed) fail_at(P, c->fn, RJ_ERR_SHAPE, "%s: dim 1 is out of range for a tensor of %d dims", c->name, rank);
        return nothing(c);
    }
    rj_dtype back;
    if ((x = float_work(P, c, x, &back)) == RJ_NONE) return nothing(c);
    rj_node norm = norm_of(P, c, x, p, dims, n, true);
    if (norm == RJ_NONE) return nothing(c);
    return rounded_back(P, c, rj_graph_binary(g, RJ_OP_DIV, x, rj_graph_binary(g, RJ_OP_MAXIMUM, norm, rj_graph_scalar(g, eps))),
                        back);
}

/* norm(input, p="fro", dim=None, keepdim=False, dtype=None), PyTorch's torch.norm of vectors, and
 * vector_norm(input, ord=2, dim=None, keepdim=False, dtype=None), torch.linalg's: over dim (a
 * dim, a tuple, or every dim) sum(|x| ** p) ** (1 / p); "fro" and 2 are sqrt(sum(x * x)), 1
 * sum(|x|), inf max(|x|), -inf min(|x|), 0 the count of non-zeros; over an empty item 0, but
 * inf for -inf (PyTorch refuses the infinite ones there). A float input (16-bit:
 * computed in f32, rounded once); dtype casts the input first. Matrix norms ("nuc", and
 * torch.linalg.norm) are not supported. */
value build_norm_fn(parser *P, const call_site *c, value **v) {
    bool keep = false;
    double p = 2;
    if (v[1] && !is_none(v[1]) && !(v[1]->is_string && v[1]->slen == 3 && !strncmp(v[1]->str, "fro", 3))) {
        if (v[1]->is_string) {
            fail_at(P, &v[1]->at, RJ_ERR_UNSUPPORTED, "%s: of the string norms only \"fro\" is supported", c->name);
            return nothing(c);
        }
        if (!literal(P, v[1], &p)) return nothing(c);
    }
    if (v[3] && !bool_arg(P, c->name, "keepdim", v[3], &keep)) return nothing(c);
    rj_node x = as_node(P, v[0]);
    rj_dtype dt;
    if (P->failed) return nothing(c);
    if (v[4] && !is_none(v[4])) {
        if (!dtype_value(v[4], &dt)) {
            fail_at(P, &v[4]->at, RJ_ERR_PARSE, "%s: dtype must be a float dtype", c->name);
            return nothing(c);
        }
        x = built_as(P, c->fn, c->name, rj_graph_cast(P->g, x, dt));
    }
    value xv = node_value(x, v[0]->at);
    x = float_input(P, c, &xv);
    if (x == RJ_NONE) return nothing(c);
    rj_graph *g = P->g;
    rj_dim shape[RJ_MAX_RANK];
    int rank = rj_node_shape(g, x, shape), dims[RJ_MAX_RANK], n = rank;
    if (v[2] && !is_none(v[2])) n = dim_list(P, c->name, v[2], rank, dims);
    else for (int i = 0; i < rank; i++) dims[i] = rank - 1 - i;
    rj_dtype back;
    if (!n || (x = float_work(P, c, x, &back)) == RJ_NONE) return nothing(c);
    rj_node r = norm_of(P, c, x, p, dims, n, keep);
    if (r == RJ_NONE) return nothing(c);
    if (isinf(p) && p > 0) r = rj_graph_binary(g, RJ_OP_MAXIMUM, r, rj_graph_scalar(g, 0.0)); /* empty: 0 */
    return rounded_back(P, c, r, back);
}

/* leaky_relu(input, negative_slope=0.01): x where x > 0, else x * negative_slope (PyTorch's;
 * a float input). */
value build_leaky_relu(parser *P, const call_site *c, value **v) {
    double slope = 0.01;
    if (v[1] && !literal(P, v[1], &slope)) return nothing(c);
    rj_node x = float_input(P, c, v[0]);
    if (x == RJ_NONE) return nothing(c);
    rj_graph *g = P->g;
    rj_node pos = rj_graph_binary(g, RJ_OP_GT, x, rj_graph_scalar(g, 0.0));
    rj_node r = built_as(P, c->fn, c->name, rj_graph_where(g, pos, x, rj_graph_binary(g, RJ_OP_MUL, x, rj_graph_scalar(g, slope))));
    return node_value(r, *c->fn);
}

/* square, reciprocal, relu6, hardtanh(input, min_val=-1.0, max_val=1.0), hardsigmoid,
 * hardswish, softsign: PyTorch's, in the order of its CPU kernels' arithmetic:
 *   square x * x            reciprocal 1 / x (an integer input gives f32)
 *   relu6 min(max(x, 0), 6)   hardtanh min(max(x, min_val), max_val)
 *   hardsigmoid min(max(x + 3, 0), 6) / 6     hardswish x * min(max(x + 3, 0), 6) / 6
 *   softsign x / (1 + |x|)
 * max and min keep NaN, as PyTorch's clamps do. */
value build_elementwise_fn(parser *P, const call_site *c, value **v) {
    rj_graph *g = P->g;
    const char *f = c->name;
    bool hard = f[0] == 'h' && f[4] == 's'; /* hardsigmoid, hardswish: of x + 3, a float input */
    rj_node x = hard ? float_input(P, c, v[0]) : as_node(P, v[0]), r = RJ_NONE;
    if (P->failed) return nothing(c);
    rj_dtype t = rj_node_dtype(g, x), back = (rj_dtype)RJ_DTYPE_COUNT; /* the dtype to round to at the end */
    /* several ops in 16 bits would round after each: compute in f32, round once (PyTorch's
     * kernels do) */
    bool several = hard || !strcmp(f, "softsign");
    if (several && (t == RJ_F16 || t == RJ_BF16) && (x = float_work(P, c, x, &back)) == RJ_NONE) return nothing(c);
    if (!strcmp(f, "square")) r = rj_graph_binary(g, RJ_OP_MUL, x, x);
    else if (!strcmp(f, "reciprocal")) r = rj_graph_binary(g, RJ_OP_DIV, rj_graph_scalar_int(g, 1), x);
    else if (!strcmp(f, "softsign"))
        r = rj_graph_binary(g, RJ_OP_DIV, x, rj_graph_binary(g, RJ_OP_ADD, rj_graph_scalar_int(g, 1), rj_graph_unary(g, RJ_OP_ABS, x)));
    else {
        bool tanh = !strcmp(f, "hardtanh");
        /* the bounds are numbers, integer ones keeping an integer input's dtype (relu6 and
         * hardtanh of i64 are i64) */
        double num;
        if (tanh && ((v[1] && !literal(P, v[1], &num)) || (v[2] && !literal(P, v[2], &num)))) return nothing(c);
        rj_node lon = tanh ? (v[1] ? as_node(P, v[1]) : rj_graph_scalar_int(g, -1)) : rj_graph_scalar_int(g, 0);
        rj_node hin = tanh ? (v[2] ? as_node(P, v[2]) : rj_graph_scalar_int(g, 1)) : rj_graph_scalar_int(g, 6);
        rj_node in = hard ? rj_graph_binary(g, RJ_OP_ADD, x, rj_graph_scalar_int(g, 3)) : x;
        r = rj_graph_binary(g, RJ_OP_MINIMUM, rj_graph_binary(g, RJ_OP_MAXIMUM, in, lon), hin);
        if (!strcmp(f, "hardswish")) r = rj_graph_binary(g, RJ_OP_MUL, x, r);
        if (hard) r = rj_graph_binary(g, RJ_OP_DIV, r, rj_graph_scalar_int(g, 6));
    }
    return rounded_back(P, c, r, back);
}

/* log1p(x) and expm1(x), accurate where x is near 0, from the exp and log every target has,
 * by Goldberg's and Kahan's identities: with u = 1 + x (log1p) or u = exp(x) (expm1),
 *   log1p(x) = x where u rounds to 1, else log(u) * (x / (u - 1))
 *   expm1(x) = x where u rounds to 1, -1 where u - 1 rounds to -1, else (u - 1) * (x / log(u))
 * (u - 1 is exact; the quotient corrects u's rounding), and u itself where u is inf (x = inf,
 * or exp overflowing: inf / inf would be NaN). NaN stays NaN and -0.0 stays -0.0. Integer
 * inputs give f32; 16-bit ones compute in f32 and round once. In the working type of x. */
static rj_node log1p_of(rj_graph *g, rj_node x) {
    rj_node u = rj_graph_binary(g, RJ_OP_ADD, rj_graph_scalar_int(g, 1), x);
    rj_node q = rj_graph_binary(g, RJ_OP_MUL, rj_graph_unary(g, RJ_OP_LOG, u),
                                rj_graph_binary(g, RJ_OP_DIV, x, rj_graph_binary(g, RJ_OP_SUB, u, rj_graph_scalar_int(g, 1))));
    q = rj_graph_where(g, rj_graph_binary(g, RJ_OP_EQ, u, rj_graph_scalar(g, INFINITY)), u, q);
    return rj_graph_where(g, rj_graph_binary(g, RJ_OP_EQ, u, rj_graph_scalar_int(g, 1)), x, q);
}

static rj_node expm1_of(rj_graph *g, rj_node x) {
    rj_node u = rj_graph_unary(g, RJ_OP_EXP, x), um1 = rj_graph_binary(g, RJ_OP_SUB, u, rj_graph_scalar_int(g, 1));
    rj_node q = rj_graph_binary(g, RJ_OP_MUL, um1, rj_graph_binary(g, RJ_OP_DIV, x, rj_graph_unary(g, RJ_OP_LOG, u)));
    q = rj_graph_where(g, rj_graph_binary(g, RJ_OP_EQ, u, rj_graph_scalar(g, INFINITY)), u, q);
    q = rj_graph_where(g, rj_graph_binary(g, RJ_OP_EQ, um1, rj_graph_scalar_int(g, -1)), um1, q);
    return rj_graph_where(g, rj_graph_binary(g, RJ_OP_EQ, u, rj_graph_scalar_int(g, 1)), x, q);
}

/* alpha * expm1(x / scale_in) where x <= 0 (or NaN), x where x > 0: elu's, celu's and selu's
 * negative side. */
static rj_node elu_of(rj_graph *g, rj_node x, double alpha, double scale_in) {
    rj_node in = scale_in == 1 ? x : rj_graph_binary(g, RJ_OP_DIV, x, rj_graph_scalar(g, scale_in));
    rj_node neg = rj_graph_binary(g, RJ_OP_MUL, rj_graph_scalar(g, alpha), expm1_of(g, in));
    return rj_graph_where(g, rj_graph_binary(g, RJ_OP_GT, x, rj_graph_scalar_int(g, 0)), x, neg);
}

/* softplus(x, beta, threshold): x where x * beta > threshold, else log1p(exp(x * beta)) / beta */
static rj_node softplus_of(rj_graph *g, rj_node x, double beta, double threshold) {
    rj_node bx = beta == 1 ? x : rj_graph_binary(g, RJ_OP_MUL, x, rj_graph_scalar(g, beta));
    rj_node soft = log1p_of(g, rj_graph_unary(g, RJ_OP_EXP, bx));
    if (beta != 1) soft = rj_graph_binary(g, RJ_OP_DIV, soft, rj_graph_scalar(g, beta));
    return rj_graph_where(g, rj_graph_binary(g, RJ_OP_GT, bx, rj_graph_scalar(g, threshold)), x, soft);
}

/* log1p, expm1 (input): see log1p_of. softplus(input, beta=1.0, threshold=20.0), elu(input,
 * alpha=1.0), celu(input, alpha=1.0), selu(input), mish(input): PyTorch's activations, float
 * inputs:
 *   softplus  x where x * beta > threshold, else log1p(exp(x * beta)) / beta
 *   elu       x where x > 0, else alpha * expm1(x)
 *   celu      x where x > 0, else alpha * expm1(x / alpha)
 *   selu      scale * elu(x, alpha), PyTorch's alpha = 1.6732632423543772 and scale = 1.0507009873554805
 *   mish      x * tanh(softplus(x))
 * 16-bit inputs compute in f32 and round once, as PyTorch's kernels do. */
value build_exp_family(parser *P, const call_site *c, value **v) {
    const char *f = c->name;
    bool plain = !strcmp(f, "log1p") || !strcmp(f, "expm1"), soft = !strcmp(f, "softplus");
    bool alpha = !strcmp(f, "elu") || !strcmp(f, "celu"); /* v holds as many as the row names */
    rj_node x = plain ? as_node(P, v[0]) : float_input(P, c, v[0]);
    double a = 1, b = 20;
    if (P->failed || x == RJ_NONE || ((soft || alpha) && v[1] && !literal(P, v[1], &a)) ||
        (soft && v[2] && !literal(P, v[2], &b)))
        return nothing(c);
    if (!strcmp(f, "celu") && a == 0) {
        fail_at(P, &v[1]->at, RJ_ERR_ARG, "%s: alpha must not be 0", f);
        return nothing(c);
    }
    rj_dtype back;
    if ((x = float_work(P, c, x, &back)) == RJ_NONE) return nothing(c);
    rj_graph *g = P->g;
    rj_node r;
    if (!strcmp(f, "log1p")) r = log1p_of(g, x);
    else if (!strcmp(f, "expm1")) r = expm1_of(g, x);
    else if (!strcmp(f, "softplus")) r = softplus_of(g, x, a, b);
    else if (!strcmp(f, "elu")) r = elu_of(g, x, a, 1);
    else if (!strcmp(f, "celu")) r = elu_of(g, x, a, a);
    else if (!strcmp(f, "selu"))
        r = rj_graph_binary(g, RJ_OP_MUL, rj_graph_scalar(g, 1.0507009873554804934193349852946),
                            elu_of(g, x, 1.6732632423543772848170429916717, 1));
    else r = rj_graph_binary(g, RJ_OP_MUL, x, rj_graph_unary(g, RJ_OP_TANH, softplus_of(g, x, 1, 20))); /* mish */
    return rounded_back(P, c, r, back);
}

/* var and std (input, dim=None, unbiased=True, keepdim=False, correction=None): PyTorch's,
 * sum((x - mean)^2) / max(N - correction, 0) over dim (a dim, a tuple, or every dim), N the
 * elements reduced (an item's length along the ragged dim), correction 1 unless given
 * (unbiased=False is 0); std its square root. Two passes, the mean first. An empty item, or
 * N <= correction, gives NaN (0 / 0), as PyTorch does; a float input (16-bit: computed in f32,
 * rounded once). */
value build_var(parser *P, const call_site *c, value **v) {
    bool keep = false, unbiased = true;
    double corr = 1;
    if (v[4] && is_none(v[4])) v[4] = NULL;
    if ((v[2] && !bool_arg(P, c->name, "unbiased", v[2], &unbiased)) || (v[3] && !bool_arg(P, c->name, "keepdim", v[3], &keep)) ||
        (v[4] && !literal(P, v[4], &corr)))
        return nothing(c);
    if (v[2] && v[4]) {
        fail_at(P, &v[4]->at, RJ_ERR_ARG, "%s: give unbiased or correction, not both", c->name);
        return nothing(c);
    }
    if (!v[4]) corr = unbiased ? 1 : 0;
    rj_node x = float_input(P, c, v[0]);
    if (x == RJ_NONE) return nothing(c);
    rj_graph *g = P->g;
    rj_dim shape[RJ_MAX_RANK];
    int rank = rj_node_shape(g, x, shape), dims[RJ_MAX_RANK], n = rank;
    if (v[1] && !is_none(v[1])) n = dim_list(P, c->name, v[1], rank, dims);
    else for (int i = 0; i < rank; i++) dims[i] = rank - 1 - i; /* every dim, the last first */
    rj_dtype back;
    if (!n || (x = float_work(P, c, x, &back)) == RJ_NONE) return nothing(c);
    rj_node m = mean_over(P, c->fn, c->name, x, dims, n, true);
    if (m == RJ_NONE) return nothing(c);
    rj_node d = rj_graph_binary(g, RJ_OP_SUB, x, m);
    rj_node ss = reduce_over(P, c->fn, c->name, RJ_OP_SUM, built_as(P, c->fn, c->name, rj_graph_binary(g, RJ_OP_MUL, d, d)), dims, n, keep);
    rj_node ones = P->failed ? RJ_NONE : built_as(P, c->fn, c->name, ones_like(g, x, rj_node_dtype(g, x)));
    rj_node cnt = P->failed ? RJ_NONE : reduce_over(P, c->fn, c->name, RJ_OP_SUM, ones, dims, n, keep);
    if (P->failed) return nothing(c);
    rj_node div = rj_graph_binary(g, RJ_OP_MAXIMUM, rj_graph_binary(g, RJ_OP_SUB, cnt, rj_graph_scalar(g, corr)), rj_graph_scalar_int(g, 0));
    rj_node r = rj_graph_binary(g, RJ_OP_DIV, ss, div);
    if (!strcmp(c->name, "std")) r = rj_graph_unary(g, RJ_OP_SQRT, r);
    return rounded_back(P, c, r, back);
}

rj_node index_along(parser *P, const token *fn, const char *as, rj_node x, int d) {
    rj_graph *g = P->g;
    rj_dim shape[RJ_MAX_RANK];
    int rank = rj_node_shape(g, x, shape);
    const sym *s = graph_sym(g, shape[d]);
    bool ragged = s && s->kind == SYM_RAGGED;
    rj_node idx = ragged ? rj_graph_positions(g, shape[d]) : rj_graph_arange(g, shape[d], RJ_I64);
    for (int i = 1; ragged && i < d && !P->failed; i++) idx = built_as(P, fn, as, rj_graph_unsqueeze(g, idx, 1));
    for (int i = d + 1; i < rank && !P->failed; i++) idx = built_as(P, fn, as, rj_graph_unsqueeze(g, idx, -1));
    return P->failed ? RJ_NONE : built_as(P, fn, as, idx);
}

/* argmax and argmin (input, dim=None, keepdim=False): PyTorch's, the index of the first
 * maximum (minimum) along dim, i64, a NaN counting as the maximum (minimum), as PyTorch's do:
 * min over dim of where(x == m or x is NaN, the index along dim, INT64_MAX), m the maximum over
 * dim; -0.0 and 0.0 are equal. The index along a ragged dim is each row's place in its item
 * (positions); along a dense dim an arange. An empty item (or a dim of size 0), which PyTorch
 * refuses, gives -1, which any index op then reports as out of range. dim=None is the index
 * into the flattened tensor (a dense one; keepdim then keeps every dim as 1). Bool inputs are
 * refused, as PyTorch refuses them. */
static rj_node arg_extreme(parser *P, const token *fn, const char *as, rj_node x, int d, bool keep, bool is_min,
                           rj_node m) {
    rj_graph *g = P->g;
    rj_dtype t = rj_node_dtype(g, x);
    if (t == RJ_BOOL) {
        fail_at(P, fn, RJ_ERR_DTYPE, "%s: the input is bool, which PyTorch's %s refuses too (cast it first: x.int())",
                as, as);
        return RJ_NONE;
    }
    if (m == RJ_NONE) m = reduce_over(P, fn, as, is_min ? RJ_OP_MIN : RJ_OP_MAX, x, &d, 1, true);
    if (m == RJ_NONE) return RJ_NONE;
    rj_node idx = index_along(P, fn, as, x, d);
    if (idx == RJ_NONE) return RJ_NONE;
    rj_node hit = rj_graph_binary(g, RJ_OP_EQ, x, m);
    if (dtype_is_float(t)) hit = rj_graph_binary(g, RJ_OP_LOGICAL_OR, hit, rj_graph_binary(g, RJ_OP_NE, x, x));
    rj_node cand = built_as(P, fn, as, rj_graph_where(g, hit, idx, rj_graph_scalar_int(g, INT64_MAX)));
    rj_node r = P->failed ? RJ_NONE : reduce_over(P, fn, as, RJ_OP_MIN, cand, &d, 1, keep);
    if (r == RJ_NONE) return RJ_NONE;
    rj_node none = rj_graph_binary(g, RJ_OP_EQ, r, rj_graph_scalar_int(g, INT64_MAX));
    r = built_as(P, fn, as, rj_graph_where(g, none, rj_graph_scalar_int(g, -1), r));
    return P->failed ? RJ_NONE : r;
}

value build_argmax(parser *P, const call_site *c, value **v) {
    bool keep = false, all = !v[1] || is_none(v[1]);
    int64_t dim = 0;
    if ((!all && !int_arg(P, c->name, "dim", v[1], INT_MIN, INT_MAX, &dim)) ||
        (v[2] && !bool_arg(P, c->name, "keepdim", v[2], &keep)))
        return nothing(c);
    rj_node x = as_node(P, v[0]);
    if (P->failed) return nothing(c);
    rj_graph *g = P->g;
    rj_dim shape[RJ_MAX_RANK];
    int rank = rj_node_shape(g, x, shape), kept = rank;
    if (all) {
        if (node_is_jagged(g, &g->nodes[x])) {
            fail_at(P, c->fn, RJ_ERR_SHAPE,
                    "%s: dim=None would index the flattened tensor, which a jagged tensor has no index into; give a dim",
                    c->name);
            return nothing(c);
        }
        for (int i = 0; i < rank && rank > 1; i++)
            if (shape[i] < 0) {
                fail_at(P, c->fn, RJ_ERR_SHAPE, "%s: dim=None would flatten the tensor, whose dim %d has a size known "
                        "only at run time; give a dim", c->name, i);
                return nothing(c);
            }
        rj_dim flat = RJ_DIM_NONE;
        if (rank != 1) x = built_as(P, c->fn, c->name, rj_graph_reshape(g, x, 1, &flat));
        if (P->failed) return nothing(c);
        rank = 1;
    } else if (dim < -rank || dim >= rank) {
        fail_at(P, &v[1]->at, RJ_ERR_SHAPE, "%s: dim %lld is out of range for a tensor of %d dims", c->name,
                (long long)dim, rank);
        return nothing(c);
    }
    int d = (int)(dim < 0 ? dim + rank : dim);
    rj_node r = arg_extreme(P, c->fn, c->name, x, d, keep && !all, !strcmp(c->name, "argmin"), RJ_NONE);
    if (r != RJ_NONE && all && keep) {
        rj_dim ones[RJ_MAX_RANK];
        for (int i = 0; i < kept; i++) ones[i] = 1;
        r = built_as(P, c->fn, c->name, rj_graph_reshape(g, r, kept, ones));
    }
    return P->failed || r == RJ_NONE ? nothing(c) : node_value(r, *c->fn);
}

rj_node indices_of(parser *P, const token *t, const value *v) {
    const char *as = v->ind_min ? "min" : "max";
    rj_node x = v->ind_x, m = RJ_NONE; /* the values, kept as the extreme to compare with */
    if (rj_node_dtype(P->g, x) == RJ_BOOL) x = built_as(P, t, as, rj_graph_cast(P->g, x, RJ_I32));
    else m = v->ind_keep ? v->node : built_as(P, t, as, rj_graph_unsqueeze(P->g, v->node, v->ind_dim));
    return P->failed ? RJ_NONE : arg_extreme(P, t, as, x, v->ind_dim, v->ind_keep, v->ind_min, m);
}

/* logsigmoid(input), tanhshrink(input), softshrink(input, lambd=0.5), hardshrink(input,
 * lambd=0.5), threshold(input, threshold, value), softmin(input, dim), glu(input, dim=-1),
 * logaddexp(input, other): PyTorch's, as its kernels compute them:
 *   logsigmoid  min(x, 0) - log1p(exp(-|x|))          tanhshrink  x - tanh(x)
 *   softshrink  x - l where x > l, x + l where x < -l, else 0
 *   hardshrink  x where |x| > l, else 0               threshold   value where x <= threshold, else x
 *   softmin     softmax(-x, dim)                       glu         a * sigmoid(b), a and b the halves along dim
 *   logaddexp   m + log1p(exp(-|a - b|)) with m = max(a, b), and a where a == b is infinite
 * NaN stays NaN; float inputs (16-bit: computed in f32, rounded once). */
/* log1p(exp(-|t|)), the tail of logsigmoid and logaddexp, never overflowing */
static rj_node log1p_exp_neg_abs(rj_graph *g, rj_node t) {
    return log1p_of(g, rj_graph_unary(g, RJ_OP_EXP, rj_graph_unary(g, RJ_OP_NEG, rj_graph_unary(g, RJ_OP_ABS, t))));
}

value build_more_fn(parser *P, const call_site *c, value **v) {
    const char *f = c->name;
    rj_graph *g = P->g;
    rj_node x = float_input(P, c, v[0]), r;
    if (x == RJ_NONE) return nothing(c);
    double l = 0.5, val = 0;
    bool shrink = strstr(f, "shrink") && f[0] != 't';
    if ((shrink && v[1] && !literal(P, v[1], &l)) ||
        (!strcmp(f, "threshold") && (!literal(P, v[1], &l) || !literal(P, v[2], &val))))
        return nothing(c);
    if (shrink && !(l >= 0)) {
        fail_at(P, &v[1]->at, RJ_ERR_ARG, "%s: lambd must not be negative (it is %g)", f, l);
        return nothing(c);
    }
    if (!strcmp(f, "softmin") || !strcmp(f, "glu")) { /* along a dim */
        int64_t dim = -1;
        if (v[1] && !is_none(v[1]) && !int_arg(P, f, "dim", v[1], INT_MIN, INT_MAX, &dim)) return nothing(c);
        if (f[0] == 's') {
            if (!v[1] || is_none(v[1])) {
                fail_at(P, c->fn, RJ_ERR_PARSE, "softmin: give dim (PyTorch's implicit choice is deprecated)");
                return nothing(c);
            }
            return node_value(built_as(P, c->fn, f, rj_graph_softmax(g, rj_graph_unary(g, RJ_OP_NEG, x), (int)dim)), *c->fn);
        }
        rj_dim shape[RJ_MAX_RANK];
        int rank = rj_node_shape(g, x, shape), d = (int)(dim < 0 ? dim + rank : dim);
        if (d < 0 || d >= rank || shape[d] < 0 || shape[d] % 2) {
            fail_at(P, c->fn, RJ_ERR_SHAPE, "glu: dim %lld must be a dense dim of constant, even size", (long long)dim);
            return nothing(c);
        }
        rj_dtype back;
        if ((x = float_work(P, c, x, &back)) == RJ_NONE) return nothing(c);
        rj_node a = rj_graph_narrow(g, x, d, 0, shape[d] / 2), b = rj_graph_narrow(g, x, d, shape[d] / 2, shape[d] / 2);
        return rounded_back(P, c, rj_graph_binary(g, RJ_OP_MUL, a, rj_graph_unary(g, RJ_OP_SIGMOID, b)), back);
    }
    rj_node y = RJ_NONE;
    rj_dtype back;
    if (!strcmp(f, "logaddexp")) { /* the promoted float type; 16-bit ones computed in f32 */
        if ((y = float_input(P, c, v[1])) == RJ_NONE) return nothing(c);
        rj_dtype tx = rj_node_dtype(g, x), ty = rj_node_dtype(g, y);
        back = tx == ty ? tx : tx == RJ_F64 || ty == RJ_F64 ? RJ_F64 : RJ_F32;
        rj_dtype w = back == RJ_F64 ? RJ_F64 : RJ_F32;
        if (tx != w) x = rj_graph_cast(g, x, w);
        if (ty != w) y = rj_graph_cast(g, y, w);
    } else if ((x = float_work(P, c, x, &back)) == RJ_NONE) {
        return nothing(c);
    }
    rj_node zero = rj_graph_scalar(g, 0.0);
    if (!strcmp(f, "logsigmoid")) {
        r = rj_graph_binary(g, RJ_OP_SUB, rj_graph_binary(g, RJ_OP_MINIMUM, x, zero), log1p_exp_neg_abs(g, x));
    } else if (!strcmp(f, "tanhshrink")) {
        r = rj_graph_binary(g, RJ_OP_SUB, x, rj_graph_unary(g, RJ_OP_TANH, x));
    } else if (!strcmp(f, "softshrink")) { /* x * 0 in the middle: -0.0 below 0, NaN for NaN */
        rj_node lo = rj_graph_binary(g, RJ_OP_LT, x, rj_graph_scalar(g, -l));
        r = rj_graph_where(g, rj_graph_binary(g, RJ_OP_GT, x, rj_graph_scalar(g, l)), rj_graph_binary(g, RJ_OP_SUB, x, rj_graph_scalar(g, l)),
                           rj_graph_where(g, lo, rj_graph_binary(g, RJ_OP_ADD, x, rj_graph_scalar(g, l)),
                                          rj_graph_binary(g, RJ_OP_MUL, x, zero)));
    } else if (!strcmp(f, "hardshrink")) { /* 0 where -l <= x <= l: NaN stays */
        rj_node in = rj_graph_binary(g, RJ_OP_LOGICAL_AND, rj_graph_binary(g, RJ_OP_GE, x, rj_graph_scalar(g, -l)),
                                     rj_graph_binary(g, RJ_OP_LE, x, rj_graph_scalar(g, l)));
        r = rj_graph_where(g, in, zero, x);
    } else if (!strcmp(f, "threshold")) {
        r = rj_graph_where(g, rj_graph_binary(g, RJ_OP_LE, x, rj_graph_scalar(g, l)), rj_graph_scalar(g, val), x);
    } else { /* logaddexp */
        rj_node m = rj_graph_binary(g, RJ_OP_MAXIMUM, x, y);
        rj_node same_inf = rj_graph_binary(g, RJ_OP_LOGICAL_AND, rj_graph_binary(g, RJ_OP_EQ, x, y),
                                           rj_graph_binary(g, RJ_OP_EQ, rj_graph_unary(g, RJ_OP_ABS, x), rj_graph_scalar(g, INFINITY)));
        r = rj_graph_where(g, same_inf, x, rj_graph_binary(g, RJ_OP_ADD, m, log1p_exp_neg_abs(g, rj_graph_binary(g, RJ_OP_SUB, x, y))));
    }
    return rounded_back(P, c, r, back);
}
