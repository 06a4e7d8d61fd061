/*
 * ops.c — the LLVM spelling of single operations: conversions, unary and binary operations,
 * comparisons.
 *
 * Each operation is built on scalars, or on vectors of E->vw lanes while the vector emitter
 * (vector.c) sets vw; the constants it needs are splatted to match (fconst, iconst). The
 * semantics are those every target shares with the interpreter: integer arithmetic wraps,
 * float maximum/minimum propagate NaN, float -> int conversions saturate with NaN -> 0, and
 * LOP_FMA is llvm.fmuladd. Composite ops (gelu, sigmoid, pow with a literal exponent...) never
 * reach this file: expand.c rewrote them as primitives. f32 exp, log, tanh and erfc are
 * mathlib.c's branch-free functions, so that loops calling them vectorise (in vector code,
 * their vector variants); the f64 ones are libm's, which has no vector forms, so a vector
 * operation calls it once a lane. An operation this backend does not implement sets E->fail.
 */
#include <math.h>

#include "emit.h"

/* ---- conversions --------------------------------------------------------------------------- */

LLVMValueRef em_convert(em *E, LLVMValueRef v, int from, int to) {
    LLVMBuilderRef b = E->b;
    if (from == to) return v;
    if (to == RJ_BOOL)
        return isf(from) ? LLVMBuildFCmp(b, LLVMRealUNE, v, fconst(E, from, 0), "")
                         : LLVMBuildICmp(b, LLVMIntNE, v, iconst(E, from, 0), "");
    if (isf(to)) {
        if (isf(from)) return to == RJ_F64 ? LLVMBuildFPExt(b, v, vty(E, to), "") : LLVMBuildFPTrunc(b, v, vty(E, to), "");
        return from == RJ_BOOL ? LLVMBuildUIToFP(b, v, vty(E, to), "") : LLVMBuildSIToFP(b, v, vty(E, to), "");
    }
    if (isf(from)) return ml_fptosi_sat(&E->ml, b, v, vty(E, to));
    if (from == RJ_BOOL) return LLVMBuildZExt(b, v, vty(E, to), "");
    return to == RJ_I64 ? LLVMBuildSExt(b, v, vty(E, to), "") : LLVMBuildTrunc(b, v, vty(E, to), "");
}

/* ---- ops ------------------------------------------------------------------------------------ */

/* libm's function of f64s on each lane of the vectors a[0..n), one call a lane (libm has no
 * vector forms). */
static LLVMValueRef per_lane(em *E, const char *libm, LLVMValueRef *a, int n) {
    LLVMValueRef r = LLVMGetPoison(LLVMTypeOf(a[0]));
    for (int i = 0; i < E->vw; i++) {
        LLVMValueRef lane = i32c(E, (unsigned)i), s[2];
        for (int k = 0; k < n; k++) s[k] = LLVMBuildExtractElement(E->b, a[k], lane, "");
        r = LLVMBuildInsertElement(E->b, r, ml_libm(&E->ml, E->b, libm, s, (unsigned)n), lane, "");
    }
    return r;
}

static LLVMValueRef call_f(em *E, int t, ml_func f32fn, const char *libm, LLVMValueRef x) {
    if (E->vw && t == RJ_F32) {
        LLVMValueRef v = ml_call_vec(&E->ml, E->b, f32fn, x, (unsigned)E->vw);
        if (!v) E->fail = true;
        return v ? v : x;
    }
    if (E->vw) return per_lane(E, libm, &x, 1);
    return t == RJ_F32 ? ml_call(&E->ml, E->b, f32fn, &x, 1) : ml_libm(&E->ml, E->b, libm, &x, 1);
}

/* The primitives of the loop IR (expand.c rewrote the composite ops into these). */
LLVMValueRef em_unary(em *E, int fn, int t, LLVMValueRef x) {
    LLVMBuilderRef b = E->b;
    if (!isf(t)) {
        LLVMValueRef z = iconst(E, t, 0);
        switch (fn) {
        case RJ_OP_NEG: return LLVMBuildSub(b, z, x, "");
        case RJ_OP_ABS: return LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSLT, x, z, ""), LLVMBuildSub(b, z, x, ""), x, "");
        case RJ_OP_LOGICAL_NOT: return LLVMBuildNot(b, x, "");
        default: break;
        }
        E->fail = true;
        return x;
    }
    switch (fn) {
    case RJ_OP_NEG: return LLVMBuildFNeg(b, x, "");
    case RJ_OP_ABS: return ml_intrinsic(&E->ml, b, "llvm.fabs", &x, 1);
    case RJ_OP_TANH: return call_f(E, t, ML_TANHF, "tanh", x);
    case RJ_OP_EXP: return call_f(E, t, ML_EXPF, "exp", x);
    case LOP_EXP_TERM: return call_f(E, t, ML_EXPF_TERM, "exp", x);
    case LOP_ERFC: return call_f(E, t, ML_ERFCF, "erfc", x);
    case LOP_ROUND_F16: return em_round_half(E, x, false);
    case LOP_ROUND_BF16: return em_round_half(E, x, true);
    case RJ_OP_LOG: return call_f(E, t, ML_LOGF, "log", x);
    case RJ_OP_SQRT: return ml_intrinsic(&E->ml, b, "llvm.sqrt", &x, 1);
    case RJ_OP_SIN: return ml_intrinsic(&E->ml, b, "llvm.sin", &x, 1);
    case RJ_OP_COS: return ml_intrinsic(&E->ml, b, "llvm.cos", &x, 1);
    default: break;
    }
    E->fail = true;
    return x;
}

/* max/min that propagate NaN (PyTorch's maximum): pick, then a + b if either is NaN. */
static LLVMValueRef fminmax(em *E, bool max, LLVMValueRef x, LLVMValueRef y) {
    LLVMBuilderRef b = E->b;
    LLVMValueRef pick = LLVMBuildSelect(b, LLVMBuildFCmp(b, max ? LLVMRealOGT : LLVMRealOLT, x, y, ""), x, y, "");
    return LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealUNO, x, y, ""), LLVMBuildFAdd(b, x, y, ""), pick, "");
}

LLVMValueRef em_binary(em *E, int fn, int t, LLVMValueRef x, LLVMValueRef y, LLVMValueRef z) {
    LLVMBuilderRef b = E->b;
    if (t == RJ_BOOL) {
        switch (fn) {
        case RJ_OP_ADD:
        case RJ_OP_MAXIMUM:
        case RJ_OP_LOGICAL_OR: return LLVMBuildOr(b, x, y, "");
        case RJ_OP_MUL:
        case RJ_OP_MINIMUM:
        case RJ_OP_LOGICAL_AND: return LLVMBuildAnd(b, x, y, "");
        default: break;
        }
    } else if (!isf(t)) {
        switch (fn) {
        case RJ_OP_ADD: return LLVMBuildAdd(b, x, y, "");
        case RJ_OP_SUB: return LLVMBuildSub(b, x, y, "");
        case RJ_OP_MUL: return LLVMBuildMul(b, x, y, "");
        case RJ_OP_MAXIMUM: return LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSGT, x, y, ""), x, y, "");
        case RJ_OP_MINIMUM: return LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSLT, x, y, ""), x, y, "");
        case RJ_OP_POW: return ml_call(&E->ml, b, t == RJ_I32 ? ML_IPOW32 : ML_IPOW64, (LLVMValueRef[]){x, y}, 2);
        case LOP_IDIV: return LLVMBuildSDiv(b, x, y, "");
        case LOP_IREM: return LLVMBuildSRem(b, x, y, "");
        case LOP_FMA: return LLVMBuildAdd(b, LLVMBuildMul(b, x, y, ""), z, "");
        default: break;
        }
    } else {
        switch (fn) {
        case RJ_OP_ADD: return LLVMBuildFAdd(b, x, y, "");
        case RJ_OP_SUB: return LLVMBuildFSub(b, x, y, "");
        case RJ_OP_MUL: return LLVMBuildFMul(b, x, y, "");
        case RJ_OP_DIV: return LLVMBuildFDiv(b, x, y, "");
        case RJ_OP_POW: return ml_intrinsic(&E->ml, b, "llvm.pow", (LLVMValueRef[]){x, y}, 2);
        case RJ_OP_MAXIMUM: return fminmax(E, true, x, y);
        case RJ_OP_MINIMUM: return fminmax(E, false, x, y);
        case LOP_FMA: return ml_intrinsic(&E->ml, b, "llvm.fmuladd", (LLVMValueRef[]){x, y, z}, 3);
        default: break;
        }
    }
    E->fail = true;
    return x;
}

LLVMValueRef em_compare(em *E, int fn, int t, LLVMValueRef x, LLVMValueRef y) {
    LLVMBuilderRef b = E->b;
    if (isf(t)) {
        static const LLVMRealPredicate p[] = {LLVMRealOEQ, LLVMRealUNE, LLVMRealOLT, LLVMRealOLE,
                                              LLVMRealOGT, LLVMRealOGE};
        return LLVMBuildFCmp(b, p[fn - RJ_OP_EQ], x, y, "");
    }
    static const LLVMIntPredicate s[] = {LLVMIntEQ, LLVMIntNE, LLVMIntSLT, LLVMIntSLE, LLVMIntSGT, LLVMIntSGE};
    static const LLVMIntPredicate u[] = {LLVMIntEQ, LLVMIntNE, LLVMIntULT, LLVMIntULE, LLVMIntUGT, LLVMIntUGE};
    return LLVMBuildICmp(b, t == RJ_BOOL ? u[fn - RJ_OP_EQ] : s[fn - RJ_OP_EQ], x, y, "");
}
