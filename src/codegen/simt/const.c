/*
 * const.c (SIMT) — constants as C literals, and constant expressions evaluated.
 *
 * A float prints as the shortest decimal that reads back as the same value (with the f suffix
 * for an f32), a negative one in parentheses; an infinity or a NaN, which have no literal, as
 * its bits, reinterpreted as the spelling says (emit.c). An integer prints with the spelling's
 * 64-bit suffix, the most negative values as an expression. A cast of a constant, and a float
 * expression of constants only, is evaluated here with the rounding the generated code would
 * apply and printed as its value (cem_fold_float says why that matters on PoCL).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emit.h"

/* Shortest decimal that reads back as the same float. */
static void fmt_float(char *out, size_t n, float v) {
    for (int prec = 1; prec <= 9; prec++) {
        snprintf(out, n, "%.*g", prec, (double)v);
        if (strtof(out, NULL) == v) break;
    }
    if (!strpbrk(out, ".eE") && strlen(out) + 3 < n) strcat(out, ".0");
}

void cem_put_float(cem *C, int t, double v) {
    sbuf *b = C->b;
    const spelling *sp = C->sp;
    char num[48];
    if (t == RJ_F32) {
        float f = (float)v;
        if (!isfinite(f)) { /* no literal for inf/nan: the exact bits */
            uint32_t bits;
            memcpy(&bits, &f, sizeof bits);
            const char *const *w = isnan(f) && sp->f32_nan[0] ? sp->f32_nan : sp->f32_bits;
            sbuf_printf(b, "%s%08x%s", w[0], (unsigned)bits, w[1]);
            return;
        }
        fmt_float(num, sizeof num, f);
        sbuf_printf(b, signbit(f) ? "(%sf)" : "%sf", num);
        return;
    }
    if (!isfinite(v)) {
        uint64_t bits;
        memcpy(&bits, &v, sizeof bits);
        const char *const *w = isnan(v) && sp->f64_nan[0] ? sp->f64_nan : sp->f64_bits;
        sbuf_printf(b, "%s%016llx%s", w[0], (unsigned long long)bits, w[1]);
        return;
    }
    fmt_double(num, sizeof num, v);
    sbuf_printf(b, signbit(v) ? "(%s)" : "%s", num);
}

void cem_put_int(cem *C, int t, int64_t v) {
    sbuf *b = C->b;
    if (t == RJ_BOOL) {
        sbuf_puts(b, v ? "true" : "false");
    } else if (t == RJ_I32) {
        int32_t x = (int32_t)(uint32_t)(uint64_t)v;
        if (x == INT32_MIN) sbuf_puts(b, "(-2147483647 - 1)");
        else sbuf_printf(b, x < 0 ? "(%d)" : "%d", (int)x);
    } else {
        const char *sfx = C->sp->i64_lit;
        if (v == INT64_MIN) sbuf_printf(b, "(-9223372036854775807%s - 1)", sfx);
        else sbuf_printf(b, v < 0 ? "(%lld%s)" : "%lld%s", (long long)v, sfx);
    }
}

/* Evaluates a constant, through any casts of it, with the conversions of the generated code
 * (LLVM's constant folder does the same on the CPU); false if id is not constant. */
bool cem_const_eval(const lkernel *k, int32_t id, cval *v) {
    const lx *e = &k->ex[id];
    if (e->kind == LX_CONST) {
        v->t = e->type;
        v->f = e->type == RJ_F32 ? (double)(float)e->f : e->f;
        v->i = e->type == RJ_BOOL ? e->i != 0
             : e->type == RJ_I32 ? (int64_t)(int32_t)(uint32_t)(uint64_t)e->i : e->i;
        return true;
    }
    cval a;
    if (e->kind != LX_CAST || !cem_const_eval(k, e->a, &a)) return false;
    int to = e->type;
    v->t = to;
    v->f = 0;
    v->i = 0;
    if (to == RJ_BOOL) v->i = isf(a.t) ? a.f != 0 || isnan(a.f) : a.i != 0;
    else if (to == RJ_F32) v->f = isf(a.t) ? (double)(float)a.f : (double)(float)a.i;
    else if (to == RJ_F64) v->f = isf(a.t) ? a.f : (double)a.i;
    else if (isf(a.t)) v->i = cast_float_to_int(a.f, (rj_dtype)to);
    else v->i = to == RJ_I32 ? (int64_t)(int32_t)(uint32_t)(uint64_t)a.i : a.i;
    return true;
}

/* A float expression of constants only (+, -, *, / and negation, through casts), evaluated
 * with the rounding of its type; false for anything else. The emitter prints such an
 * expression as its value: lowering substitutes a pad value into the expressions of the
 * padding's closed form, and `inf * 0.0`, left to the device compiler, reached exp() as a
 * literal NaN, which PoCL folds into garbage (see the spelling's f32_nan): softmax over a
 * padded dim wrote garbage to its padding rows where the reference has NaN. Folded here, the
 * NaN is printed as a constant, through the volatile read. */
bool cem_fold_float(const lkernel *k, int32_t id, double *out) {
    const lx *e = &k->ex[id];
    if (!isf(e->type)) return false;
    double a, b;
    if (e->kind == LX_CONST || e->kind == LX_CAST) {
        cval v;
        if (!cem_const_eval(k, id, &v)) return false;
        *out = v.f;
        return true;
    }
    if (e->kind == LX_UNARY && e->fn == RJ_OP_NEG && cem_fold_float(k, e->a, &a)) {
        *out = -a;
        return true;
    }
    if (e->kind != LX_BINARY || !cem_fold_float(k, e->a, &a) || !cem_fold_float(k, e->b, &b)) return false;
    switch (e->fn) {
    case RJ_OP_ADD: *out = a + b; break;
    case RJ_OP_SUB: *out = a - b; break;
    case RJ_OP_MUL: *out = a * b; break;
    case RJ_OP_DIV: *out = a / b; break;
    default: return false;
    }
    /* one IEEE operation in double, then rounded to f32: the correctly rounded f32 result
     * (double has more than twice f32's precision) */
    if (e->type == RJ_F32) *out = (double)(float)*out;
    return true;
}
