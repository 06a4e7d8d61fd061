/*
 * expand.c — composite operations become primitives, once, for every target.
 *
 * The graph's op table has operations a model writes (gelu, silu, sigmoid, rsqrt, sgn, relu,
 * pow with a literal exponent) that are compositions of simpler ones. Each target used to
 * spell every one of them itself, and the spellings drifted apart (gelu through 1 + erf on the
 * CPU, through erfc on GPUs). This pass rewrites them in the loop IR, after lowering and before
 * any backend sees it, so a backend spells only the primitives:
 *
 *   arithmetic  neg abs add sub mul div pow(x, y) maximum minimum fma, integer idiv irem
 *   functions   exp exp_term log sqrt tanh erfc sin cos
 *   the rest    compare, select, cast, logical ops
 *
 * maximum/minimum (NaN-propagating for floats) and casts (saturating float -> int, NaN -> 0)
 * stay primitives on purpose: reductions combine with maximum, and every target has a
 * horizontal form of it and a saturating conversion instruction that a spelled-out select
 * chain would hide from it. Their semantics are defined once, in DESIGN.md and the interpreter.
 *
 * The expansions, exact for every input (PyTorch's definitions, written without cancellation):
 *   sigmoid(x)   1 / (1 + exp(-x))
 *   silu(x)      x * sigmoid(x)
 *   gelu(x)      (0.5 * x) * erfc(x * -sqrt(1/2))        = 0.5 x (1 + erf(x / sqrt 2)), without
 *                the cancellation of 1 + erf(t) for large negative t
 *   gelu_tanh(x) x * sigmoid(2 sqrt(2/pi) (x + 0.044715 x^3))   = 0.5 x (1 + tanh(u)), likewise
 *   rsqrt(x)     1 / sqrt(x)
 *   sgn(x)       (x > 0) - (x < 0), the comparisons converted to x's type (sgn(NaN) = 0, as
 *                PyTorch's sign)
 *   relu(x)      x < 0 ? 0 : x for floats (NaN stays NaN), x > 0 ? x : 0 for integers
 *   pow(x, c)    for a literal c in {1, 2, 3, 0.5, -1, -0.5, -2}: x, x*x, (x*x)*x, sqrt(x), 1/x,
 *                1/sqrt(x), 1/(x*x) (pow_expand, ir.h, which the interpreter follows too)
 *
 * Expressions are hash-consed DAGs whose operands precede them; an expanded expression keeps
 * its id (statements and other expressions point at it) and takes the value of the new
 * expression's root, whose operands come after it. Nothing after this pass relies on operands
 * preceding their users.
 */
#include <math.h>

#include "loopir.h"

typedef struct xp {
    lkernel *k;
    bool nomem;
} xp;

static int32_t put(xp *X, lx e) {
    if (X->nomem) return 0;
    int32_t id = lk_expr(X->k, &e);
    if (id < 0) X->nomem = true;
    return id < 0 ? 0 : id;
}

static int32_t fconst(xp *X, int t, double f) {
    return put(X, (lx){.kind = LX_CONST, .type = (uint8_t)t, .a = -1, .b = -1, .c = -1, .ref = -1,
                       .f = t == RJ_F32 ? (double)(float)f : f});
}

static int32_t zero(xp *X, int t) {
    if (dtype_is_float((rj_dtype)t)) return fconst(X, t, 0);
    return put(X, (lx){.kind = LX_CONST, .type = (uint8_t)t, .a = -1, .b = -1, .c = -1, .ref = -1});
}

static int32_t un(xp *X, int fn, int t, int32_t a) {
    return put(X, (lx){.kind = LX_UNARY, .type = (uint8_t)t, .fn = (uint16_t)fn, .a = a, .b = -1, .c = -1,
                       .ref = -1});
}

static int32_t bin(xp *X, int fn, int t, int32_t a, int32_t b) {
    return put(X, (lx){.kind = LX_BINARY, .type = (uint8_t)t, .fn = (uint16_t)fn, .a = a, .b = b, .c = -1,
                       .ref = -1});
}

static int32_t cmp(xp *X, int fn, int32_t a, int32_t b) {
    return put(X, (lx){.kind = LX_CMP, .type = RJ_BOOL, .fn = (uint16_t)fn, .a = a, .b = b, .c = -1,
                       .ref = -1});
}

static int32_t sel(xp *X, int t, int32_t c, int32_t a, int32_t b) {
    return put(X, (lx){.kind = LX_SELECT, .type = (uint8_t)t, .a = c, .b = a, .c = b, .ref = -1});
}

static int32_t cast(xp *X, int t, int32_t a) {
    return put(X, (lx){.kind = LX_CAST, .type = (uint8_t)t, .a = a, .b = -1, .c = -1, .ref = -1});
}

static int32_t sigmoid(xp *X, int t, int32_t x) {
    int32_t one = fconst(X, t, 1);
    return bin(X, RJ_OP_DIV, t, one, bin(X, RJ_OP_ADD, t, one, un(X, RJ_OP_EXP, t, un(X, RJ_OP_NEG, t, x))));
}

/* The expansion of unary fn of type t on x, or -1: fn is a primitive for t. */
static int32_t expand_unary(xp *X, int fn, int t, int32_t x) {
    bool f = dtype_is_float((rj_dtype)t);
    if (t == RJ_BOOL) return -1;
    switch (fn) {
    case RJ_OP_SGN:
        return bin(X, RJ_OP_SUB, t, cast(X, t, cmp(X, RJ_OP_GT, x, zero(X, t))),
                   cast(X, t, cmp(X, RJ_OP_LT, x, zero(X, t))));
    case RJ_OP_RELU:
        return f ? sel(X, t, cmp(X, RJ_OP_LT, x, zero(X, t)), zero(X, t), x)
                 : sel(X, t, cmp(X, RJ_OP_GT, x, zero(X, t)), x, zero(X, t));
    default: break;
    }
    if (!f) return -1;
    switch (fn) {
    case RJ_OP_SIGMOID: return sigmoid(X, t, x);
    case RJ_OP_SILU: return bin(X, RJ_OP_MUL, t, x, sigmoid(X, t, x));
    case RJ_OP_GELU:
        return bin(X, RJ_OP_MUL, t, bin(X, RJ_OP_MUL, t, fconst(X, t, 0.5), x),
                   un(X, LOP_ERFC, t, bin(X, RJ_OP_MUL, t, x, fconst(X, t, -0.707106781186547524))));
    case RJ_OP_GELU_TANH: {
        int32_t x3 = bin(X, RJ_OP_MUL, t, bin(X, RJ_OP_MUL, t, x, x), x);
        int32_t in = bin(X, RJ_OP_ADD, t, x, bin(X, RJ_OP_MUL, t, fconst(X, t, 0.044715), x3));
        return bin(X, RJ_OP_MUL, t, x, sigmoid(X, t, bin(X, RJ_OP_MUL, t, fconst(X, t, 1.5957691216057308), in)));
    }
    case RJ_OP_RSQRT: return bin(X, RJ_OP_DIV, t, fconst(X, t, 1), un(X, RJ_OP_SQRT, t, x));
    default: return -1;
    }
}

/* The value of a constant float exponent, through casts of a literal, with the conversions of
 * the generated code; false if e is not one. */
static bool const_float(const lkernel *k, int32_t id, double *out) {
    const lx *e = &k->ex[id];
    if (e->kind == LX_CAST) {
        const lx *c = &k->ex[e->a];
        if (c->kind != LX_CONST || !dtype_is_float((rj_dtype)e->type)) return false;
        double v = dtype_is_float((rj_dtype)c->type) ? c->f
                 : c->type == RJ_I32 ? (double)(int32_t)(uint32_t)(uint64_t)c->i
                 : c->type == RJ_BOOL ? (double)(c->i != 0) : (double)c->i;
        *out = e->type == RJ_F32 ? (double)(float)v : v;
        return true;
    }
    if (e->kind != LX_CONST || !dtype_is_float((rj_dtype)e->type)) return false;
    *out = e->type == RJ_F32 ? (double)(float)e->f : e->f;
    return true;
}

/* pow(x, c) for the literal exponents pow_expand names, or -1. */
static int32_t expand_pow(xp *X, int t, int32_t x, int32_t y) {
    double c;
    if (!dtype_is_float((rj_dtype)t) || !const_float(X->k, y, &c)) return -1;
    switch (pow_expand(c)) {
    case POWX_ONE: return x;
    case POWX_SQUARE: return bin(X, RJ_OP_MUL, t, x, x);
    case POWX_CUBE: return bin(X, RJ_OP_MUL, t, bin(X, RJ_OP_MUL, t, x, x), x);
    case POWX_SQRT: return un(X, RJ_OP_SQRT, t, x);
    case POWX_RECIP: return bin(X, RJ_OP_DIV, t, fconst(X, t, 1), x);
    case POWX_RSQRT: return expand_unary(X, RJ_OP_RSQRT, t, x);
    case POWX_RECIP_SQUARE: return bin(X, RJ_OP_DIV, t, fconst(X, t, 1), bin(X, RJ_OP_MUL, t, x, x));
    case POWX_NONE: break;
    }
    return -1;
}

static rj_status expand_kernel(lkernel *k) {
    xp X = {.k = k};
    int32_t n = k->nex; /* the expansions' own expressions are primitives */
    for (int32_t id = 0; id < n; id++) {
        lx e = k->ex[id];
        int32_t r = e.kind == LX_UNARY ? expand_unary(&X, e.fn, e.type, e.a)
                  : e.kind == LX_BINARY && e.fn == RJ_OP_POW ? expand_pow(&X, e.type, e.a, e.b) : -1;
        if (X.nomem) return RJ_ERR_NOMEM;
        if (r >= 0) k->ex[id] = k->ex[r]; /* the hash table keeps r for this value */
    }
    return RJ_OK;
}

rj_status pass_expand(lprog *p) {
    for (int32_t i = 0; i < p->nkernels; i++) {
        rj_status s = expand_kernel(&p->kernels[i]);
        if (s) return s;
    }
    return RJ_OK;
}
