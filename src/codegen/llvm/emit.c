/*
 * emit.c — loop IR to LLVM IR.
 *
 * A direct translation: each kernel becomes a function with one parameter per loop-IR
 * parameter (pointers noalias, nocapture, readonly where only read: inputs never overlap
 * outputs, which the runtime checks), each variable an alloca that mem2reg promotes, each FOR
 * a canonical counted loop, each expression a handful of instructions. The optimiser does the
 * rest: LICM hoists row starts and loop bounds, unswitching splits loops on the invariant
 * predicates of pads, and the vectoriser turns the lanes loops (contiguous in memory by
 * construction) into SIMD code. Lanes loops that accumulate in floating point carry
 * llvm.loop.vectorize.enable, which is what allows the vectoriser to reassociate the sum.
 * The iterations of a lanes loop are independent (loopir.h: the SIMT targets run them on
 * different threads), and the loop says so to LLVM: its loads and stores are in one access
 * group that the loop lists as llvm.loop.parallel_accesses, so the vectoriser does not guard
 * the vector loop with run-time overlap checks between, say, the accumulators and the stash
 * of one thread's scratch (offsets the vectoriser cannot prove apart). That is less code to
 * compile and to run: 15-18% fewer instructions compiling bench's W2 and W4.
 *
 * The parallel mappings need nothing else on a CPU: `units` and `serial` loops are plain
 * loops (the runtime hands each thread its unit range), a `reduce` is the accumulation
 * v = v op e (the vectoriser splits v across the lanes and combines the partial values after
 * the loop), and `barrier` orders nothing, a block being one thread. A thread-scope local is
 * the scratch pointer its parameter passes in; a local the backend allocates is an alloca.
 *
 * Expressions are emitted at their use, memoised within one statement; a guarded load gets
 * its own basic block, and what is emitted inside it is forgotten when the block ends, so a
 * value is never used outside the block that defines it.
 *
 * Streaming stores (outputs written once) go through a small L1 buffer per innermost loop
 * that is flushed with aligned non-temporal stores when the run's `nt` flag asks for it (see
 * staged_for): the loop itself stays an ordinary vectorisable loop.
 */
#include <llvm-c/Analysis.h>
#include <llvm-c/DebugInfo.h>
#include <llvm-c/IRReader.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llvm_backend.h"

typedef struct em {
    rj_ctx *ctx;
    LLVMContextRef c;
    LLVMModuleRef m;
    LLVMBuilderRef b;
    mathlib ml;
    const lkernel *k;
    LLVMValueRef fn;
    LLVMValueRef *args, *vars, *locals, *cache;
    int32_t *stack;
    int32_t nstack, capstack;
    int32_t ntp;      /* the nt parameter, or -1 */
    bool used_nt;     /* some loop has a streaming variant */
    unsigned md_nt, md_loop, md_group;
    LLVMValueRef group;  /* the lanes loops' access group (see lanes_group), or NULL */
    int lanes;           /* lanes loops around the statement being emitted */
    LLVMBasicBlockRef entry;   /* allocas go here */
    /* staging of streaming stores inside one innermost loop (see staged_for) */
    int nstage;
    int32_t stage_stmt[8];
    LLVMValueRef stage_buf[8], stage_d0, stage_idx;
    bool fail;  /* an op this backend does not implement */
    bool nomem;
} em;

static LLVMTypeRef vty(em *E, int t) {
    switch (t) {
    case RJ_BOOL: return LLVMInt1TypeInContext(E->c);
    case RJ_I32: return LLVMInt32TypeInContext(E->c);
    case RJ_I64: return LLVMInt64TypeInContext(E->c);
    case RJ_F32: return LLVMFloatTypeInContext(E->c);
    default: return LLVMDoubleTypeInContext(E->c);
    }
}

/* In memory, bool is a byte. */
static LLVMTypeRef mty(em *E, int t) {
    return t == RJ_BOOL ? LLVMInt8TypeInContext(E->c) : vty(E, t);
}

static bool isf(int t) { return t == RJ_F32 || t == RJ_F64; }

/* The access group of the loads and stores inside lanes loops (one for the module: every
 * lanes loop lists it, and each makes a claim only about its own iterations). LLVM wants a
 * distinct node, which its C API cannot make, so it comes from a one-line module parsed in
 * the same context (nodes belong to the context). */
static LLVMValueRef lanes_group(em *E) {
    if (E->group) return E->group;
    static const char src[] = "define void @g() {\n  ret void, !llvm.access.group !0\n}\n!0 = distinct !{}\n";
    LLVMMemoryBufferRef buf = LLVMCreateMemoryBufferWithMemoryRangeCopy(src, sizeof src - 1, "group");
    LLVMModuleRef m = NULL;
    char *msg = NULL;
    if (buf && !LLVMParseIRInContext(E->c, buf, &m, &msg)) { /* takes buf */
        LLVMValueRef f = LLVMGetNamedFunction(m, "g");
        LLVMValueRef ret = f ? LLVMGetFirstInstruction(LLVMGetFirstBasicBlock(f)) : NULL;
        E->group = ret ? LLVMGetMetadata(ret, E->md_group) : NULL;
        LLVMDisposeModule(m);
    }
    LLVMDisposeMessage(msg);
    return E->group;
}

static void in_group(em *E, LLVMValueRef mem_op) {
    if (E->lanes > 0 && lanes_group(E)) LLVMSetMetadata(mem_op, E->md_group, E->group);
}

static LLVMValueRef fconst(em *E, int t, double v) { return LLVMConstReal(vty(E, t), v); }
static LLVMValueRef iconst(em *E, int t, long long v) {
    return LLVMConstInt(vty(E, t), (unsigned long long)v, 1);
}

/* ---- conversions --------------------------------------------------------------------------- */

static LLVMValueRef convert(em *E, LLVMValueRef v, int from, int to) {
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

static LLVMValueRef call_f(em *E, int t, ml_func f32fn, const char *libm, LLVMValueRef x) {
    return t == RJ_F32 ? ml_call(&E->ml, E->b, f32fn, &x, 1) : ml_libm(&E->ml, E->b, libm, &x, 1);
}

static LLVMValueRef sigmoid(em *E, int t, LLVMValueRef x) {
    LLVMValueRef e = call_f(E, t, ML_EXPF, "exp", LLVMBuildFNeg(E->b, x, ""));
    return LLVMBuildFDiv(E->b, fconst(E, t, 1), LLVMBuildFAdd(E->b, fconst(E, t, 1), e, ""), "");
}

static LLVMValueRef unary(em *E, int fn, int t, LLVMValueRef x) {
    LLVMBuilderRef b = E->b;
    if (!isf(t)) {
        LLVMValueRef z = iconst(E, t, 0);
        switch (fn) {
        case RJ_OP_NEG: return LLVMBuildSub(b, z, x, "");
        case RJ_OP_ABS: return LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSLT, x, z, ""), LLVMBuildSub(b, z, x, ""), x, "");
        case RJ_OP_SGN:
            return LLVMBuildSub(b, LLVMBuildZExt(b, LLVMBuildICmp(b, LLVMIntSGT, x, z, ""), vty(E, t), ""),
                                LLVMBuildZExt(b, LLVMBuildICmp(b, LLVMIntSLT, x, z, ""), vty(E, t), ""), "");
        case RJ_OP_RELU: return LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSGT, x, z, ""), x, z, "");
        case RJ_OP_LOGICAL_NOT: return LLVMBuildNot(b, x, "");
        default: break;
        }
        E->fail = true;
        return x;
    }
    LLVMValueRef zero = fconst(E, t, 0), one = fconst(E, t, 1), half = fconst(E, t, 0.5);
    switch (fn) {
    case RJ_OP_NEG: return LLVMBuildFNeg(b, x, "");
    case RJ_OP_ABS: return ml_intrinsic(&E->ml, b, "llvm.fabs", &x, 1);
    case RJ_OP_SGN:
        return LLVMBuildFSub(b, LLVMBuildUIToFP(b, LLVMBuildFCmp(b, LLVMRealOGT, x, zero, ""), vty(E, t), ""),
                             LLVMBuildUIToFP(b, LLVMBuildFCmp(b, LLVMRealOLT, x, zero, ""), vty(E, t), ""), "");
    case RJ_OP_RELU: return LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealOLT, x, zero, ""), zero, x, "");
    case RJ_OP_GELU: {
        LLVMValueRef e = call_f(E, t, ML_ERFF, "erf", LLVMBuildFMul(b, x, fconst(E, t, M_SQRT1_2), ""));
        return LLVMBuildFMul(b, LLVMBuildFMul(b, half, x, ""), LLVMBuildFAdd(b, one, e, ""), "");
    }
    case RJ_OP_GELU_TANH: {
        LLVMValueRef x3 = LLVMBuildFMul(b, LLVMBuildFMul(b, x, x, ""), x, "");
        LLVMValueRef in = LLVMBuildFMul(b, fconst(E, t, 0.7978845608028654),
                                        LLVMBuildFAdd(b, x, LLVMBuildFMul(b, fconst(E, t, 0.044715), x3, ""), ""), "");
        LLVMValueRef th = call_f(E, t, ML_TANHF, "tanh", in);
        return LLVMBuildFMul(b, LLVMBuildFMul(b, half, x, ""), LLVMBuildFAdd(b, one, th, ""), "");
    }
    case RJ_OP_SILU: return LLVMBuildFMul(b, x, sigmoid(E, t, x), "");
    case RJ_OP_SIGMOID: return sigmoid(E, t, x);
    case RJ_OP_TANH: return call_f(E, t, ML_TANHF, "tanh", x);
    case RJ_OP_EXP: return call_f(E, t, ML_EXPF, "exp", x);
    case LOP_EXP_TERM: return call_f(E, t, ML_EXPF_TERM, "exp", x);
    case RJ_OP_LOG: return call_f(E, t, ML_LOGF, "log", x);
    case RJ_OP_SQRT: return ml_intrinsic(&E->ml, b, "llvm.sqrt", &x, 1);
    case RJ_OP_RSQRT: return LLVMBuildFDiv(b, one, ml_intrinsic(&E->ml, b, "llvm.sqrt", &x, 1), "");
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

static LLVMValueRef fpow(em *E, int t, LLVMValueRef x, LLVMValueRef y) {
    LLVMBuilderRef b = E->b;
    if (LLVMIsAConstantFP(y)) {
        LLVMBool lossy;
        switch (pow_expand(LLVMConstRealGetDouble(y, &lossy))) {
        case POWX_ONE: return x;
        case POWX_SQUARE: return LLVMBuildFMul(b, x, x, "");
        case POWX_CUBE: return LLVMBuildFMul(b, LLVMBuildFMul(b, x, x, ""), x, "");
        case POWX_SQRT: return ml_intrinsic(&E->ml, b, "llvm.sqrt", &x, 1);
        case POWX_RECIP: return LLVMBuildFDiv(b, fconst(E, t, 1), x, "");
        case POWX_NONE: break;
        }
    }
    LLVMValueRef a[2] = {x, y};
    return ml_intrinsic(&E->ml, b, "llvm.pow", a, 2);
}

static LLVMValueRef binary(em *E, int fn, int t, LLVMValueRef x, LLVMValueRef y, LLVMValueRef z) {
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
        case RJ_OP_POW: return fpow(E, t, x, y);
        case RJ_OP_MAXIMUM: return fminmax(E, true, x, y);
        case RJ_OP_MINIMUM: return fminmax(E, false, x, y);
        case LOP_FMA: return ml_intrinsic(&E->ml, b, "llvm.fmuladd", (LLVMValueRef[]){x, y, z}, 3);
        default: break;
        }
    }
    E->fail = true;
    return x;
}

static LLVMValueRef compare(em *E, int fn, int t, LLVMValueRef x, LLVMValueRef y) {
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

/* ---- expressions ----------------------------------------------------------------------------- */

static void remember(em *E, int32_t id, LLVMValueRef v) {
    E->cache[id] = v;
    if (!mem_grow(E->ctx, (void **)&E->stack, &E->capstack, E->nstack + 1, sizeof(int32_t))) {
        E->nomem = true;
        return;
    }
    E->stack[E->nstack++] = id;
}

static void forget_to(em *E, int32_t mark) {
    while (E->nstack > mark) E->cache[E->stack[--E->nstack]] = NULL;
}

static LLVMValueRef addr(em *E, int32_t param, int t, LLVMValueRef idx) {
    return LLVMBuildInBoundsGEP2(E->b, mty(E, t), E->args[param], &idx, 1, "");
}

/* Element idx of a buffer parameter (MEM_PARAM) or a local array (MEM_LOCAL). */
static LLVMValueRef mem_addr(em *E, int mem, int32_t ref, int t, LLVMValueRef idx) {
    if (mem != MEM_LOCAL) return addr(E, ref, t, idx);
    return LLVMBuildInBoundsGEP2(E->b, mty(E, t), E->locals[ref], &idx, 1, "");
}

static LLVMValueRef expr(em *E, int32_t id);

static LLVMValueRef load(em *E, const lx *e) {
    LLVMValueRef p = mem_addr(E, e->fn, e->ref, e->type, expr(E, e->a));
    LLVMValueRef v = LLVMBuildLoad2(E->b, mty(E, e->type), p, "");
    LLVMSetAlignment(v, (unsigned)rj_dtype_size((rj_dtype)e->type));
    in_group(E, v);
    return e->type == RJ_BOOL ? LLVMBuildICmp(E->b, LLVMIntNE, v, LLVMConstInt(mty(E, RJ_BOOL), 0, 0), "") : v;
}

static LLVMValueRef guarded_load(em *E, const lx *e) {
    LLVMValueRef g = expr(E, e->b), dflt = expr(E, e->c);
    LLVMBasicBlockRef from = LLVMGetInsertBlock(E->b);
    LLVMBasicBlockRef yes = LLVMAppendBasicBlockInContext(E->c, E->fn, "guarded");
    LLVMBasicBlockRef join = LLVMAppendBasicBlockInContext(E->c, E->fn, "join");
    LLVMBuildCondBr(E->b, g, yes, join);
    LLVMPositionBuilderAtEnd(E->b, yes);
    int32_t mark = E->nstack;
    LLVMValueRef v = load(E, e);
    forget_to(E, mark);
    LLVMBasicBlockRef yes_end = LLVMGetInsertBlock(E->b);
    LLVMBuildBr(E->b, join);
    LLVMPositionBuilderAtEnd(E->b, join);
    LLVMValueRef phi = LLVMBuildPhi(E->b, vty(E, e->type), "");
    LLVMAddIncoming(phi, (LLVMValueRef[]){v, dflt}, (LLVMBasicBlockRef[]){yes_end, from}, 2);
    return phi;
}

static LLVMValueRef expr(em *E, int32_t id) {
    if (E->cache[id]) return E->cache[id];
    const lx *e = &E->k->ex[id];
    LLVMValueRef v;
    switch (e->kind) {
    case LX_CONST: v = isf(e->type) ? fconst(E, e->type, e->f) : iconst(E, e->type, e->i); break;
    case LX_PARAM: v = E->args[e->ref]; break;
    case LX_VAR: v = LLVMBuildLoad2(E->b, vty(E, e->type), E->vars[e->ref], ""); break;
    case LX_LOAD: v = e->b >= 0 ? guarded_load(E, e) : load(E, e); break;
    case LX_UNARY: v = unary(E, e->fn, e->type, expr(E, e->a)); break;
    case LX_BINARY:
        v = binary(E, e->fn, e->type, expr(E, e->a), expr(E, e->b), e->c >= 0 ? expr(E, e->c) : NULL);
        break;
    case LX_CMP: v = compare(E, e->fn, E->k->ex[e->a].type, expr(E, e->a), expr(E, e->b)); break;
    case LX_SELECT: v = LLVMBuildSelect(E->b, expr(E, e->a), expr(E, e->b), expr(E, e->c), ""); break;
    default: v = convert(E, expr(E, e->a), E->k->ex[e->a].type, e->type); break;
    }
    remember(E, id, v);
    return v;
}

/* ---- statements ------------------------------------------------------------------------------ */

/* A distinct, self-referencing loop id carrying hints for the vectoriser:
 *   llvm.loop.vectorize.enable  lets it reassociate floating-point accumulations;
 *   llvm.loop.interleave.count  bounds the copies of the vector body (code size, compile time);
 * or (interleave < 0) llvm.loop.unroll.disable alone, for a serial loop marked LF_NOUNROLL. */
static LLVMValueRef loop_md(em *E, bool enable, int interleave) {
    LLVMMetadataRef tmp = LLVMTemporaryMDNode(E->c, NULL, 0);
    LLVMMetadataRef ops[4] = {tmp};
    int n = 1;
    if (interleave < 0) { /* a serial loop not to be unrolled (LF_NOUNROLL) */
        static const char key[] = "llvm.loop.unroll.disable";
        LLVMMetadataRef k1 = LLVMMDStringInContext2(E->c, key, sizeof key - 1);
        ops[n++] = LLVMMDNodeInContext2(E->c, &k1, 1);
        LLVMMetadataRef id = LLVMMDNodeInContext2(E->c, ops, (size_t)n);
        LLVMMetadataReplaceAllUsesWith(tmp, id);
        return LLVMMetadataAsValue(E->c, id);
    }
    if (enable) {
        static const char key[] = "llvm.loop.vectorize.enable";
        LLVMMetadataRef kv[2] = {LLVMMDStringInContext2(E->c, key, sizeof key - 1),
                                 LLVMValueAsMetadata(LLVMConstInt(LLVMInt1TypeInContext(E->c), 1, 0))};
        ops[n++] = LLVMMDNodeInContext2(E->c, kv, 2);
    }
    if (interleave > 0) {
        static const char key[] = "llvm.loop.interleave.count";
        LLVMMetadataRef kv[2] = {LLVMMDStringInContext2(E->c, key, sizeof key - 1),
                                 LLVMValueAsMetadata(LLVMConstInt(LLVMInt32TypeInContext(E->c), (unsigned)interleave, 0))};
        ops[n++] = LLVMMDNodeInContext2(E->c, kv, 2);
    }
    if (E->group) { /* the lanes loops' loads and stores are independent across iterations */
        static const char key[] = "llvm.loop.parallel_accesses";
        LLVMMetadataRef kv[2] = {LLVMMDStringInContext2(E->c, key, sizeof key - 1), LLVMValueAsMetadata(E->group)};
        ops[n++] = LLVMMDNodeInContext2(E->c, kv, 2);
    }
    LLVMMetadataRef id = LLVMMDNodeInContext2(E->c, ops, (size_t)n);
    LLVMMetadataReplaceAllUsesWith(tmp, id);
    return LLVMMetadataAsValue(E->c, id);
}

/* Does the block set a floating-point variable (an accumulator)? */
static bool sets_float(const lkernel *k, int32_t s) {
    for (; s >= 0; s = k->st[s].next) {
        const ls *st = &k->st[s];
        if ((st->kind == LS_SET || st->kind == LS_REDUCE) && isf(k->vars[st->var].type)) return true;
        if ((st->kind == LS_FOR || st->kind == LS_IF) && (sets_float(k, st->body) || sets_float(k, st->els)))
            return true;
    }
    return false;
}

/* Copies of the vector body a lanes loop gets. Two: on a Zen 3 (AVX2, 2 threads), alternating
 * runs of bench's W1-W5 were 5-15% faster than with one, softmax over the ragged dim (W2, whose
 * exp polynomial is a chain of some 15 dependent vector operations) 15-25%; the out-of-order
 * core overlaps two independent chains where it found too little work in one. Four gained no
 * more beyond noise. Compile times were unchanged. */
#define LANES_INTERLEAVE 2

static void block(em *E, int32_t s);

static LLVMValueRef entry_alloca(em *E, LLVMTypeRef t, const char *name) {
    LLVMBuilderRef ab = LLVMCreateBuilderInContext(E->c);
    LLVMValueRef first = LLVMGetFirstInstruction(E->entry);
    if (first) LLVMPositionBuilderBefore(ab, first);
    else LLVMPositionBuilderAtEnd(ab, E->entry);
    LLVMValueRef a = LLVMBuildAlloca(ab, t, name);
    LLVMSetAlignment(a, 64);
    LLVMDisposeBuilder(ab);
    return a;
}

/* Opens `for (var = lo; var < hi; )`: stores lo, builds the <name> head block testing the
 * loaded var against hi, and leaves the builder in <name>.body. Returns the loaded var; the
 * caller closes the loop with loop_close after advancing var. */
static LLVMValueRef loop_open(em *E, LLVMValueRef var, LLVMValueRef lo, LLVMValueRef hi, const char *name,
                              LLVMBasicBlockRef *head, LLVMBasicBlockRef *exit) {
    LLVMBuilderRef b = E->b;
    char bn[32], en[32];
    snprintf(bn, sizeof bn, "%s.body", name);
    snprintf(en, sizeof en, "%s.exit", name);
    LLVMBuildStore(b, lo, var);
    *head = LLVMAppendBasicBlockInContext(E->c, E->fn, name);
    LLVMBasicBlockRef body = LLVMAppendBasicBlockInContext(E->c, E->fn, bn);
    *exit = LLVMAppendBasicBlockInContext(E->c, E->fn, en);
    LLVMBuildBr(b, *head);
    LLVMPositionBuilderAtEnd(b, *head);
    LLVMValueRef i = LLVMBuildLoad2(b, vty(E, RJ_I64), var, "");
    LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSLT, i, hi, ""), body, *exit);
    LLVMPositionBuilderAtEnd(b, body);
    return i;
}

/* for var in [lo, hi) { body }: a canonical counted loop over an alloca'd induction variable. */
static void counted_loop(em *E, const ls *st, LLVMValueRef lo, LLVMValueRef hi) {
    LLVMBuilderRef b = E->b;
    LLVMValueRef var = E->vars[st->var];
    LLVMBasicBlockRef head, exit;
    LLVMValueRef i = loop_open(E, var, lo, hi, "loop", &head, &exit);
    if (E->nstage) E->stage_idx = i;
    E->lanes += st->map == LM_LANES;
    block(E, st->body);
    E->lanes -= st->map == LM_LANES;
    LLVMValueRef i2 = LLVMBuildLoad2(b, vty(E, RJ_I64), var, "");
    LLVMBuildStore(b, LLVMBuildAdd(b, i2, iconst(E, RJ_I64, 1), ""), var);
    LLVMValueRef br = LLVMBuildBr(b, head);
    if (st->map == LM_LANES)
        LLVMSetMetadata(br, E->md_loop, loop_md(E, sets_float(E->k, st->body), LANES_INTERLEAVE));
    else if (st->flags & LF_NOUNROLL)
        LLVMSetMetadata(br, E->md_loop, loop_md(E, false, -1));
    LLVMPositionBuilderAtEnd(b, exit);
}

/* Is e = v + (terms independent of v), i.e. unit stride along the loop over v? seen/mark:
 * lx_visit's, each walk with a fresh mark. */
static bool unit_stride(em *E, int32_t e, int32_t v, uint32_t *seen, uint32_t *mark) {
    const lx *x = &E->k->ex[e];
    if (x->kind == LX_VAR) return x->ref == v;
    if (x->kind != LX_BINARY || x->fn != RJ_OP_ADD || x->type != RJ_I64) return false;
    bool ra = lx_reads_var(E->k, x->a, v, seen, ++*mark);
    bool rb = lx_reads_var(E->k, x->b, v, seen, ++*mark);
    if (ra == rb) return false;
    return unit_stride(E, ra ? x->a : x->b, v, seen, mark);
}

#define STAGE_CHUNK 512

/* Can the innermost loop's streaming stores be staged? They must be unit-stride along the
 * loop and of 4- or 8-byte elements. */
static bool stageable(em *E, const ls *loop) {
    const lkernel *k = E->k;
    int count = 0;
    size_t n = sizeof(uint32_t) * (size_t)k->nex;
    uint32_t *seen = mem_zalloc(E->ctx, n), mark = 0;
    if (!seen) {
        E->nomem = true;
        return false;
    }
    bool ok = true;
    for (int32_t s = loop->body; s >= 0; s = k->st[s].next) {
        const ls *st = &k->st[s];
        if (st->kind == LS_FOR || st->kind == LS_IF) ok = false;
        if (!ok || st->kind != LS_STORE || !(st->flags & LF_NT)) continue;
        size_t es = rj_dtype_size((rj_dtype)k->params[st->ref].dtype);
        if ((es != 4 && es != 8) || !unit_stride(E, st->a, loop->var, seen, &mark) || count == 8) ok = false;
        count++;
    }
    mem_free(E->ctx, seen, n);
    return ok && count > 0;
}

/* An innermost loop with streaming stores: in chunks of STAGE_CHUNK iterations, the body runs
 * as usual (and vectorises as usual) with its streaming stores redirected to L1 buffers; each
 * chunk is then flushed to memory, with aligned non-temporal stores when the run's nt flag is
 * set and as a plain copy otherwise. One loop serves both cases. */
static void staged_for(em *E, const ls *st, LLVMValueRef lo, LLVMValueRef hi) {
    LLVMBuilderRef b = E->b;
    const lkernel *k = E->k;
    LLVMTypeRef i64 = vty(E, RJ_I64);
    LLVMValueRef d0v = entry_alloca(E, i64, "d0");
    E->nstage = 0;
    for (int32_t s = st->body; s >= 0; s = k->st[s].next) {
        const ls *x = &k->st[s];
        if (x->kind != LS_STORE || !(x->flags & LF_NT)) continue;
        int q = E->nstage++;
        E->stage_stmt[q] = s;
        E->stage_buf[q] = entry_alloca(E, LLVMArrayType(mty(E, k->params[x->ref].dtype), STAGE_CHUNK), "stage");
    }
    LLVMBasicBlockRef head, exit;
    LLVMValueRef d0 = loop_open(E, d0v, lo, hi, "chunk", &head, &exit);
    LLVMValueRef end = LLVMBuildAdd(b, d0, iconst(E, RJ_I64, STAGE_CHUNK), "");
    LLVMValueRef d1 = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSLT, end, hi, ""), end, hi, "");
    E->stage_d0 = d0;
    counted_loop(E, st, d0, d1);
    int nstage = E->nstage;
    E->nstage = 0;
    /* flush: destination of element d0 of each staged store */
    LLVMBuildStore(b, d0, E->vars[st->var]);
    forget_to(E, 0);
    for (int q = 0; q < nstage; q++) {
        const ls *x = &k->st[E->stage_stmt[q]];
        size_t es = rj_dtype_size((rj_dtype)k->params[x->ref].dtype);
        LLVMValueRef dst = addr(E, x->ref, k->params[x->ref].dtype, expr(E, x->a));
        LLVMValueRef args[4] = {dst, E->stage_buf[q], LLVMBuildSub(b, d1, d0, ""), E->args[E->ntp]};
        ml_call(&E->ml, b, es == 4 ? ML_NTCOPY4 : ML_NTCOPY8, args, 4);
        forget_to(E, 0);
    }
    LLVMBuildStore(b, end, d0v);
    LLVMBuildBr(b, head);
    LLVMPositionBuilderAtEnd(b, exit);
}

static void stmt(em *E, const ls *st) {
    LLVMBuilderRef b = E->b;
    const lkernel *k = E->k;
    forget_to(E, 0);
    switch (st->kind) {
    case LS_SET: {
        LLVMValueRef v = expr(E, st->a);
        LLVMBuildStore(b, v, E->vars[st->var]);
        break;
    }
    case LS_REDUCE: { /* v = v fn e, as the assignment compiles */
        LLVMValueRef v;
        int t = k->vars[st->var].type;
        if (st->flags & LF_FMA) {
            LLVMValueRef acc = LLVMBuildLoad2(b, vty(E, t), E->vars[st->var], "");
            LLVMValueRef y = expr(E, st->b), x = expr(E, st->a);
            v = binary(E, LOP_FMA, t, x, y, acc);
        } else {
            LLVMValueRef x = expr(E, st->a);
            LLVMValueRef acc = LLVMBuildLoad2(b, vty(E, t), E->vars[st->var], "");
            v = binary(E, st->fn, t, acc, x, NULL);
        }
        LLVMBuildStore(b, v, E->vars[st->var]);
        break;
    }
    case LS_BARRIER: break; /* a CPU block is one thread */
    case LS_STORE: {
        int t = st->mem == MEM_LOCAL ? k->locals[st->ref].dtype : k->params[st->ref].dtype;
        LLVMValueRef v = expr(E, st->b);
        if (t == RJ_BOOL) v = LLVMBuildZExt(b, v, mty(E, RJ_BOOL), "");
        int sq = -1;
        for (int q = 0; q < E->nstage; q++)
            if (&k->st[E->stage_stmt[q]] == st) sq = q;
        if (sq >= 0) {
            LLVMValueRef off = LLVMBuildSub(b, E->stage_idx, E->stage_d0, "");
            LLVMValueRef sp = LLVMBuildInBoundsGEP2(b, mty(E, t), E->stage_buf[sq], &off, 1, "");
            LLVMSetAlignment(LLVMBuildStore(b, v, sp), (unsigned)rj_dtype_size((rj_dtype)t));
            break;
        }
        LLVMValueRef p = mem_addr(E, st->mem, st->ref, t, expr(E, st->a));
        if (st->flags & LF_ATOMIC_MIN) { /* workers may meet here: one read-modify-write */
            LLVMBuildAtomicRMW(b, LLVMAtomicRMWBinOpMin, p, v, LLVMAtomicOrderingMonotonic, 0);
            break;
        }
        LLVMValueRef sv = LLVMBuildStore(b, v, p);
        LLVMSetAlignment(sv, (unsigned)rj_dtype_size((rj_dtype)t));
        in_group(E, sv);
        break; /* streaming happens only through staged_for: an unaligned !nontemporal store
                * would stop the loop from vectorising */
    }
    case LS_IF: {
        LLVMValueRef c = expr(E, st->a);
        LLVMBasicBlockRef yes = LLVMAppendBasicBlockInContext(E->c, E->fn, "then");
        LLVMBasicBlockRef no = LLVMAppendBasicBlockInContext(E->c, E->fn, "else");
        LLVMBasicBlockRef join = LLVMAppendBasicBlockInContext(E->c, E->fn, "endif");
        LLVMBuildCondBr(b, c, yes, no);
        LLVMPositionBuilderAtEnd(b, yes);
        block(E, st->body);
        LLVMBuildBr(b, join);
        LLVMPositionBuilderAtEnd(b, no);
        block(E, st->els);
        LLVMBuildBr(b, join);
        LLVMPositionBuilderAtEnd(b, join);
        break;
    }
    case LS_FOR: {
        LLVMValueRef lo = expr(E, st->a), hi = expr(E, st->b);
        if (E->ntp >= 0 && st->map == LM_LANES && stageable(E, st)) {
            staged_for(E, st, lo, hi);
            E->used_nt = true;
        } else {
            counted_loop(E, st, lo, hi);
        }
        break;
    }
    }
    forget_to(E, 0);
}

static void block(em *E, int32_t s) {
    for (; s >= 0 && !E->fail && !E->nomem; s = E->k->st[s].next) stmt(E, &E->k->st[s]);
}

static void add_attr(em *E, LLVMValueRef fn, unsigned idx, const char *name) {
    LLVMAddAttributeAtIndex(fn, idx, LLVMCreateEnumAttribute(E->c, LLVMGetEnumAttributeKindForName(name, strlen(name)), 0));
}

static bool kernel(em *E, const lkernel *k, const char *prefix, const emit_target *t) {
    E->k = k;
    LLVMTypeRef ptr = LLVMPointerTypeInContext(E->c, 0), i64 = vty(E, RJ_I64);
    LLVMTypeRef *pt = mem_alloc(E->ctx, sizeof(LLVMTypeRef) * (size_t)(k->nparams + 1));
    size_t na = (size_t)(k->nparams + 1), nv = (size_t)(k->nvars + 1), ne = (size_t)(k->nex + 1);
    size_t nl = (size_t)(k->nlocals + 1);
    E->args = mem_zalloc(E->ctx, sizeof(LLVMValueRef) * na);
    E->vars = mem_zalloc(E->ctx, sizeof(LLVMValueRef) * nv);
    E->locals = mem_zalloc(E->ctx, sizeof(LLVMValueRef) * nl);
    E->cache = mem_zalloc(E->ctx, sizeof(LLVMValueRef) * ne);
    bool ok = pt && E->args && E->vars && E->locals && E->cache;
    if (ok) {
        for (int32_t i = 0; i < k->nparams; i++) {
            int kind = k->params[i].kind;
            pt[i] = kind == PK_BUF || kind == PK_OFF || kind == PK_LOFF || kind == PK_SCRATCH || kind == PK_PITEM ||
                kind == PK_PSTART || kind == PK_SQOFF ? ptr : i64;
        }
        char name[96];
        snprintf(name, sizeof name, "%s%s", prefix, k->name);
        LLVMTypeRef fty = LLVMFunctionType(LLVMVoidTypeInContext(E->c), pt, (unsigned)k->nparams, 0);
        E->fn = LLVMAddFunction(E->m, name, fty);
        add_attr(E, E->fn, LLVMAttributeFunctionIndex, "nounwind");
        LLVMAddTargetDependentFunctionAttr(E->fn, "target-cpu", t->cpu);
        LLVMAddTargetDependentFunctionAttr(E->fn, "target-features", t->features);
        /* 512-bit vectors where the CPU has them: exp-heavy loops (softmax) gain ~25%, memory
         * bound loops are unaffected (measured with bench/) */
        if (strstr(t->features, "+avx512f")) LLVMAddTargetDependentFunctionAttr(E->fn, "prefer-vector-width", "512");
        for (int32_t i = 0; i < k->nparams; i++) {
            const lparam *p = &k->params[i];
            E->args[i] = LLVMGetParam(E->fn, (unsigned)i);
            LLVMSetValueName2(E->args[i], p->name, strlen(p->name));
            if (pt[i] != ptr) continue;
            add_attr(E, E->fn, (unsigned)i + 1, "noalias");
            add_attr(E, E->fn, (unsigned)i + 1, "nocapture");
            if (p->kind != PK_SCRATCH && !(p->kind == PK_BUF && p->written))
                add_attr(E, E->fn, (unsigned)i + 1, "readonly");
        }
        LLVMBasicBlockRef entry = LLVMAppendBasicBlockInContext(E->c, E->fn, "entry");
        E->entry = entry;
        LLVMPositionBuilderAtEnd(E->b, entry);
        for (int32_t v = 0; v < k->nvars; v++)
            E->vars[v] = LLVMBuildAlloca(E->b, vty(E, k->vars[v].type), k->vars[v].name);
        for (int32_t l = 0; l < k->nlocals; l++) {
            const llocal *lc = &k->locals[l];
            E->locals[l] = lc->param >= 0 ? E->args[lc->param]
                                          : entry_alloca(E, LLVMArrayType(mty(E, lc->dtype), (unsigned)lc->elems), lc->name);
        }
        E->ntp = -1;
        for (int32_t i = 0; i < k->nparams; i++)
            if (k->params[i].kind == PK_NT) E->ntp = i;
        block(E, k->body);
        if (E->used_nt && strstr(t->triple, "x86_64")) { /* order streaming stores before returning */
            static const char sf[] = "llvm.x86.sse.sfence";
            unsigned id = LLVMLookupIntrinsicID(sf, sizeof sf - 1);
            LLVMValueRef fence = LLVMGetIntrinsicDeclaration(E->m, id, NULL, 0);
            LLVMBuildCall2(E->b, LLVMIntrinsicGetType(E->c, id, NULL, 0), fence, NULL, 0, "");
        }
        LLVMBuildRetVoid(E->b);
    }
    mem_free(E->ctx, pt, sizeof(LLVMTypeRef) * na);
    mem_free(E->ctx, E->args, sizeof(LLVMValueRef) * na);
    mem_free(E->ctx, E->vars, sizeof(LLVMValueRef) * nv);
    mem_free(E->ctx, E->locals, sizeof(LLVMValueRef) * nl);
    mem_free(E->ctx, E->cache, sizeof(LLVMValueRef) * ne);
    E->args = E->vars = E->locals = E->cache = NULL;
    E->nstack = 0;
    E->used_nt = false;
    if (!ok || E->nomem) {
        ctx_fail(E->ctx, RJ_ERR_NOMEM, "out of memory while generating LLVM IR");
        return false;
    }
    if (E->fail) ctx_fail(E->ctx, RJ_ERR_INTERNAL, "emit: kernel %s uses an operation the LLVM "
                          "backend does not implement", k->name);
    return !E->fail;
}

LLVMModuleRef llvm_emit_module(rj_ctx *ctx, LLVMContextRef c, const lprog *p, int32_t first, int32_t count,
                               const char *prefix, const emit_target *t) {
    em E = {.ctx = ctx, .c = c};
    E.m = LLVMModuleCreateWithNameInContext(prefix, c);
    LLVMSetTarget(E.m, t->triple);
    LLVMSetDataLayout(E.m, t->layout);
    E.b = LLVMCreateBuilderInContext(c);
    E.ml = (mathlib){.c = c, .m = E.m};
    ml_set_features(&E.ml, t->features);
    E.md_nt = LLVMGetMDKindIDInContext(c, "nontemporal", 11);
    E.md_loop = LLVMGetMDKindIDInContext(c, "llvm.loop", 9);
    E.md_group = LLVMGetMDKindIDInContext(c, "llvm.access.group", 17);
    bool ok = true;
    for (int32_t i = first; i < first + count && ok; i++) ok = kernel(&E, &p->kernels[i], prefix, t);
    if (ok) ml_finish(&E.ml);
    LLVMDisposeBuilder(E.b);
    mem_free(ctx, E.stack, sizeof(int32_t) * (size_t)E.capstack);
    if (ok) {
        char *msg = NULL;
        if (LLVMVerifyModule(E.m, LLVMReturnStatusAction, &msg)) {
            ctx_fail(ctx, RJ_ERR_INTERNAL, "emit: generated LLVM IR is invalid: %.600s", msg ? msg : "");
            ok = false;
        }
        LLVMDisposeMessage(msg);
    }
    if (!ok) {
        LLVMDisposeModule(E.m);
        return NULL;
    }
    return E.m;
}
