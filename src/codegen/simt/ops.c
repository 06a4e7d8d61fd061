/*
 * ops.c (SIMT) — how single operations are spelled.
 *
 * Each loop-IR operation prints as a C operator, a C math function or a helper of the preamble
 * (preamble.c), chosen by its type, with the semantics emit.c lists: integer add/sub/mul/neg
 * are the wrapping helpers, float maximum/minimum the NaN-propagating ones, bool add/max/or
 * are || and mul/min/and are &&. A math function is named as the spelling names it (expf in
 * CUDA, the overloaded exp in OpenCL), a helper overloaded by type or named after it. Composite
 * ops (gelu, sigmoid, pow with a literal exponent...) never reach this file: expand.c rewrote
 * them as primitives. LOP_FMA is fma() for floats and a wrapping multiply-add for integers. A
 * cast is a C conversion where C's is exact and a saturating helper from float to int (a cast
 * of a constant is folded before it gets here: expr.c).
 *
 * This file only decides; it prints nothing. An operation's form is its text with the places
 * of its operands, $0 $1 $2 in order, and the words that depend on the spelling, written as in
 * preamble.c's templates: $N the helper suffix and $f the math suffix of the operation's type
 * (a cast's: its operand's), $T the C type of the result. expr.c prints a form with its
 * operands' text (cem_put_form); a reduction's form (cem_combine_form) is printed with the
 * accumulator in one place (stmt.c, group.c). NULL: an operation this printer does not know,
 * which makes the printer fail (C->bad).
 */
#include "emit.h"

/* fn(a, b) where it may also combine an accumulator with a value (reduce): an infix operator
 * or a helper. Float pow and fma are no reductions' steps. */
const char *cem_combine_form(int fn, int t) {
    if (t == RJ_BOOL) {
        switch (fn) {
        case RJ_OP_ADD:
        case RJ_OP_MAXIMUM:
        case RJ_OP_LOGICAL_OR: return "($0 || $1)";
        case RJ_OP_MUL:
        case RJ_OP_MINIMUM:
        case RJ_OP_LOGICAL_AND: return "($0 && $1)";
        default: return NULL;
        }
    }
    if (!isf(t)) {
        switch (fn) {
        case RJ_OP_ADD: return "rj_add$N($0, $1)";
        case RJ_OP_SUB: return "rj_sub$N($0, $1)";
        case RJ_OP_MUL: return "rj_mul$N($0, $1)";
        case RJ_OP_MAXIMUM: return "rj_max$N($0, $1)";
        case RJ_OP_MINIMUM: return "rj_min$N($0, $1)";
        case RJ_OP_POW: return "rj_ipow$N($0, $1)";
        case LOP_IDIV: return "($0 / $1)";
        case LOP_IREM: return "($0 % $1)";
        default: return NULL;
        }
    }
    switch (fn) {
    case RJ_OP_ADD: return "($0 + $1)";
    case RJ_OP_SUB: return "($0 - $1)";
    case RJ_OP_MUL: return "($0 * $1)";
    case RJ_OP_DIV: return "($0 / $1)";
    case RJ_OP_MAXIMUM: return "rj_max$N($0, $1)";
    case RJ_OP_MINIMUM: return "rj_min$N($0, $1)";
    default: return NULL;
    }
}

static const char *binary_form(int fn, int t) {
    const char *f = cem_combine_form(fn, t);
    if (f) return f;
    if (isf(t) && fn == RJ_OP_POW) return "pow$f($0, $1)";
    if (t == RJ_BOOL || fn != LOP_FMA) return NULL;
    /* a * b + c with the rounding of LOP_FMA: one fused rounding for floats, wrapping for ints */
    return isf(t) ? "fma$f($0, $1, $2)" : "rj_add$N(rj_mul$N($0, $1), $2)";
}

static const char *unary_form(int fn, int t) {
    if (fn == RJ_OP_LOGICAL_NOT) return "(!$0)"; /* operand already bool (lowering takes its truth) */
    if (t == RJ_BOOL) return NULL;
    switch (fn) {
    case RJ_OP_NEG: return isf(t) ? "(-$0)" : "rj_neg$N($0)";
    case RJ_OP_ABS: return isf(t) ? "fabs$f($0)" : "rj_abs$N($0)";
    default: break;
    }
    if (!isf(t)) return NULL;
    switch (fn) {
    case RJ_OP_TANH: return "tanh$f($0)";
    case RJ_OP_EXP:
    case LOP_EXP_TERM: return "exp$f($0)";
    case LOP_ERFC: return "erfc$f($0)";
    case LOP_ROUND_F16: return "rj_round_f16($0)";
    case LOP_ROUND_BF16: return "rj_round_bf16($0)";
    case RJ_OP_LOG: return "log$f($0)";
    case RJ_OP_SQRT: return "sqrt$f($0)";
    case RJ_OP_SIN: return "sin$f($0)";
    case RJ_OP_COS: return "cos$f($0)";
    default: return NULL;
    }
}

/* C's float comparisons are LLVM's ordered ones, and != is unordered (true for NaN); bools
 * compare as 0/1, i.e. unsigned. */
static const char *compare_form(int fn) {
    switch (fn) {
    case RJ_OP_LOGICAL_AND: return "($0 && $1)";
    case RJ_OP_LOGICAL_OR: return "($0 || $1)";
    case RJ_OP_EQ: return "($0 == $1)";
    case RJ_OP_NE: return "($0 != $1)";
    case RJ_OP_LT: return "($0 < $1)";
    case RJ_OP_LE: return "($0 <= $1)";
    case RJ_OP_GT: return "($0 > $1)";
    case RJ_OP_GE: return "($0 >= $1)";
    default: return NULL;
    }
}

static const char *cast_form(int to, int from) {
    if (to == RJ_BOOL) /* != 0 is true for NaN too, as LLVM's une */
        return from == RJ_F32 ? "($0 != 0.0f)" : from == RJ_F64 ? "($0 != 0.0)" : "($0 != 0)";
    if (!isf(to) && isf(from)) return to == RJ_I32 ? "rj_to_i32$N($0)" : "rj_to_i64$N($0)";
    /* the rest are exact C conversions: int/bool -> float rounds to nearest, float widening or
     * narrowing rounds to nearest, bool -> int is 0/1, i64 -> i32 keeps the low bits (NVCC
     * and OpenCL's clang define the out-of-range signed conversion as modular) */
    return "($T)($0)";
}

const char *cem_op_form(int kind, int fn, int t, int from) {
    switch (kind) {
    case LX_UNARY: return unary_form(fn, t);
    case LX_BINARY: return binary_form(fn, t);
    case LX_CMP: return compare_form(fn);
    case LX_CAST: return cast_form(t, from);
    default: return NULL;
    }
}
