/*
 * emit.c — loop IR to LLVM IR.
 *
 * A direct translation: each kernel becomes a function with one parameter per loop-IR
 * parameter (pointers noalias, nocapture, readonly where only read: inputs never overlap
 * outputs, which the runtime checks), each variable an alloca that mem2reg promotes, each FOR
 * a canonical counted loop, each expression a handful of instructions. The optimiser does the
 * rest: LICM hoists row starts and loop bounds, and unswitching splits loops on the invariant
 * predicates of pads.
 *
 * Lanes loops are vector code from the start (see "lanes loops as vectors" below): their
 * iterations are independent by construction (loopir.h: the SIMT targets run them on
 * different threads) and their accesses along the lanes contiguous, so there is nothing for
 * LLVM's loop vectoriser to find out, and its work (legality and cost analyses, an
 * interleaved loop, a vector epilogue and a scalar remainder for every loop) was about half of
 * a reduction's or softmax's compile time. A loop the vector emitter does not take (a nested
 * loop, a branch on a value that differs between lanes) is emitted as before, a scalar loop
 * for the vectoriser: floating-point accumulations carry llvm.loop.vectorize.enable (which
 * lets it reassociate the sum), and its loads and stores are in one access group that the loop
 * lists as llvm.loop.parallel_accesses, so the vectoriser does not guard the vector loop with
 * run-time overlap checks between, say, the accumulators and the stash of one thread's
 * scratch. The module records how many loops went each way (!ragjit.lanes), and jit.c picks a
 * shorter pipeline where none is left to the vectoriser.
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
    bool nt_direct;   /* vstmt: streaming stores as aligned non-temporal vector stores (stream_for) */
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
    /* lanes loops emitted as vector code (see "lanes loops as vectors" below) */
    int vbits;             /* the vector registers' bits; 0: every lanes loop goes to LLVM's vectoriser */
    int vw;                /* > 0 while an operation is built on vectors of vw lanes (vty, constants) */
    int32_t vloop;         /* the variable of the lanes loop being emitted as vectors, or -1 */
    int vf;                /* its lanes per step */
    uint8_t *vclass;       /* per expression: 0 not known yet, VC_UNIFORM or VC_VARYING */
    uint8_t *vvar;         /* per variable: VV_* */
    LLVMValueRef *vvals;   /* per variable: its vector (an alloca) for VV_PRIVATE and VV_REDUCE */
    LLVMValueRef *vcache;  /* per expression: its vector value within the statement */
    LLVMValueRef vmask;    /* the last, partial step's lanes; NULL in full steps */
    LLVMValueRef vlast;    /* the step's last lane on (i32) */
    LLVMValueRef t0;       /* the step's first lane */
    int nvec, nscalar;     /* lanes loops emitted as vectors, and left to LLVM (!ragjit.lanes) */
} em;

static LLVMTypeRef sty(em *E, int t) {
    switch (t) {
    case RJ_BOOL: return LLVMInt1TypeInContext(E->c);
    case RJ_I32: return LLVMInt32TypeInContext(E->c);
    case RJ_I64: return LLVMInt64TypeInContext(E->c);
    case RJ_F32: return LLVMFloatTypeInContext(E->c);
    default: return LLVMDoubleTypeInContext(E->c);
    }
}

/* A value's type: a scalar, or a vector of E->vw while an operation is built on vectors. */
static LLVMTypeRef vty(em *E, int t) {
    return E->vw ? LLVMVectorType(sty(E, t), (unsigned)E->vw) : sty(E, t);
}

static LLVMValueRef splat_const(LLVMValueRef c, int n) { return ml_splat(c, (unsigned)n); }

static LLVMValueRef i32c(em *E, unsigned v) { return LLVMConstInt(LLVMInt32TypeInContext(E->c), v, 0); }

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

static LLVMValueRef fconst(em *E, int t, double v) {
    LLVMValueRef c = LLVMConstReal(sty(E, t), v);
    return E->vw ? splat_const(c, E->vw) : c;
}
static LLVMValueRef iconst(em *E, int t, long long v) {
    LLVMValueRef c = LLVMConstInt(sty(E, t), (unsigned long long)v, 1);
    return E->vw ? splat_const(c, E->vw) : c;
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
        /* x * sigmoid(2u) rather than 0.5x * (1 + tanh(u)): the same function, without the
         * cancellation of 1 + tanh(u) in the negative tail (see the SIMT spelling) */
        return LLVMBuildFMul(b, x, sigmoid(E, t, LLVMBuildFAdd(b, in, in, "")), "");
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
    LLVMValueRef yc = LLVMIsAConstantDataVector(y) || LLVMIsAConstantVector(y) ? LLVMGetAggregateElement(y, 0) : y;
    if (LLVMIsAConstantFP(yc)) {
        LLVMBool lossy;
        switch (pow_expand(LLVMConstRealGetDouble(yc, &lossy))) {
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
    while (E->nstack > mark) {
        int32_t id = E->stack[--E->nstack];
        if (id >= 0) E->cache[id] = NULL;
        else E->vcache[~id] = NULL; /* a vector value (remember_v) */
    }
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

/* g ? ld(e) : dflt, the load in a block of its own that only g enters; what it computes is
 * forgotten after it. ld gets dflt (a vector load's lanes past the end take it). */
static LLVMValueRef when(em *E, LLVMValueRef g, LLVMValueRef dflt, const lx *e,
                         LLVMValueRef (*ld)(em *, const lx *, LLVMValueRef)) {
    LLVMBasicBlockRef from = LLVMGetInsertBlock(E->b);
    LLVMBasicBlockRef yes = LLVMAppendBasicBlockInContext(E->c, E->fn, "guarded");
    LLVMBasicBlockRef join = LLVMAppendBasicBlockInContext(E->c, E->fn, "join");
    LLVMBuildCondBr(E->b, g, yes, join);
    LLVMPositionBuilderAtEnd(E->b, yes);
    int32_t mark = E->nstack;
    LLVMValueRef v = ld(E, e, dflt);
    forget_to(E, mark);
    LLVMBasicBlockRef yes_end = LLVMGetInsertBlock(E->b);
    LLVMBuildBr(E->b, join);
    LLVMPositionBuilderAtEnd(E->b, join);
    LLVMValueRef phi = LLVMBuildPhi(E->b, LLVMTypeOf(v), "");
    LLVMAddIncoming(phi, (LLVMValueRef[]){v, dflt}, (LLVMBasicBlockRef[]){yes_end, from}, 2);
    return phi;
}

static LLVMValueRef load_unguarded(em *E, const lx *e, LLVMValueRef dflt) {
    (void)dflt;
    return load(E, e);
}

static LLVMValueRef guarded_load(em *E, const lx *e) {
    LLVMValueRef g = expr(E, e->b), dflt = expr(E, e->c);
    return when(E, g, dflt, e, load_unguarded);
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

/* if (st's condition) { st's body } else { st's else }, each block emitted by blk (scalar or
 * vector statements). */
static void if_else(em *E, const ls *st, void (*blk)(em *, int32_t)) {
    LLVMValueRef c = expr(E, st->a);
    LLVMBasicBlockRef yes = LLVMAppendBasicBlockInContext(E->c, E->fn, "then");
    LLVMBasicBlockRef no = LLVMAppendBasicBlockInContext(E->c, E->fn, "else");
    LLVMBasicBlockRef join = LLVMAppendBasicBlockInContext(E->c, E->fn, "endif");
    LLVMBuildCondBr(E->b, c, yes, no);
    LLVMPositionBuilderAtEnd(E->b, yes);
    blk(E, st->body);
    LLVMBuildBr(E->b, join);
    LLVMPositionBuilderAtEnd(E->b, no);
    blk(E, st->els);
    LLVMBuildBr(E->b, join);
    LLVMPositionBuilderAtEnd(E->b, join);
}

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

/* ---- lanes loops as vectors --------------------------------------------------------------------
 * A lanes loop whose body is straight-line code (assignments, stores, reductions, branches on
 * values the same in every lane) is emitted here as vector code of vf lanes: two vector
 * registers of the widest element the loop loads or stores (LLVM splits each operation into
 * two independent ones, interleaved, which hides the latency of long chains such as exp's as
 * the vectoriser's interleaving did), halved while the loop has fewer lanes than that (a step
 * with lanes masked off is slower than a narrower full one). Full steps of vf lanes, then at
 * most one step with the lanes past the end masked off (masked loads and stores), with no
 * scalar remainder; where the bounds are constants, no masked step when vf divides the extent,
 * and no loop at all for a few steps. LLVM's loop vectoriser, which would otherwise widen the loop, adds an
 * interleaved main loop, a vector epilogue and a scalar remainder with run-time checks between
 * them, about four copies of the body, and its analyses are a good part of the compile time
 * of a kernel. What the vectoriser finds out, the loop IR already says: the iterations are
 * independent (lanes), and the loads and stores along the lanes are contiguous (unit_stride).
 *
 * Each expression is uniform (the same in every lane: computed once, as a scalar) or varying
 * (a vector). A variable set in the loop is private to a lane (a vector); a variable the loop
 * only reduces into (REDUCE directly in its body) keeps a vector of partial results that is
 * folded (a tree of shuffles) into the variable after the loop, as the vectoriser's
 * reductions are. Loads and stores along the lanes are vector loads and stores at the first
 * lane's address, others gathers and scatters; a store every lane makes to one address keeps
 * the last lane's value, as the scalar loop's last iteration would. libm's f64 functions,
 * which have no vector forms, are called once a lane. Anything else (a nested loop, a branch
 * on a varying value, an atomic store, an integer power) leaves the loop to LLVM's vectoriser
 * as before. */

enum { VC_UNIFORM = 1, VC_VARYING = 2 };
/* variables: uniform; private to each lane (a vector); reduced across the lanes; or private
 * and set once, at the top of the body, to t + (uniform terms): an index along the lanes, kept
 * as its first lane's value (so loads and stores through it stay contiguous) */
enum { VV_UNIFORM = 0, VV_PRIVATE = 1, VV_REDUCE = 2, VV_AFFINE = 3 };

static bool varying(em *E, int32_t id) {
    uint8_t *c = &E->vclass[id];
    if (*c) return *c == VC_VARYING;
    const lx *e = &E->k->ex[id];
    bool v = false;
    if (e->kind == LX_VAR) {
        v = e->ref == E->vloop || E->vvar[e->ref] != VV_UNIFORM;
    } else {
        int32_t kids[3];
        int n = lx_children(e, kids);
        for (int i = 0; i < n && !v; i++) v = varying(E, kids[i]);
    }
    *c = v ? VC_VARYING : VC_UNIFORM;
    return v;
}

/* Is e = t + (uniform terms), t the loop's variable: consecutive lanes, consecutive elements? */
static bool vunit(em *E, int32_t id) {
    const lx *e = &E->k->ex[id];
    if (e->kind == LX_VAR) return e->ref == E->vloop || E->vvar[e->ref] == VV_AFFINE;
    if (e->kind != LX_BINARY || e->fn != RJ_OP_ADD || e->type != RJ_I64) return false;
    bool va = varying(E, e->a), vb = varying(E, e->b);
    if (va == vb) return false;
    return vunit(E, va ? e->a : e->b);
}

typedef struct vscan {
    uint8_t *set, *red; /* per variable: SET in the loop (times, at most 2), REDUCE in its body */
    int32_t *def;       /* per variable: the statement of its one SET at the top of the body */
    uint32_t *seen, mark;
    int maxbytes;       /* the widest element loaded or stored */
    bool ok;
} vscan;

/* After classification: the widest element a varying load of id's tree reads. */
static void vscan_expr(em *E, int32_t id, vscan *v) {
    if (id < 0 || v->seen[id] == v->mark) return;
    v->seen[id] = v->mark;
    const lx *e = &E->k->ex[id];
    if (!varying(E, id)) return;
    if (e->kind == LX_LOAD) {
        int b = (int)rj_dtype_size((rj_dtype)e->type);
        if (b > v->maxbytes) v->maxbytes = b;
    }
    int32_t kids[3];
    int n = lx_children(e, kids);
    for (int i = 0; i < n; i++) vscan_expr(E, kids[i], v);
}

static void vscan_loads(em *E, int32_t s, vscan *v) {
    for (; s >= 0; s = E->k->st[s].next) {
        const ls *st = &E->k->st[s];
        int32_t ex[2];
        for (int i = 0, n = ls_exprs(st, ex); i < n; i++) vscan_expr(E, ex[i], v);
        if (st->kind == LS_IF) {
            vscan_loads(E, st->body, v);
            vscan_loads(E, st->els, v);
        }
    }
}

/* What the body sets and reduces, and the widest element it stores; nested loops and
 * reductions under branches are not for vectors. */
static void vscan_block(em *E, int32_t s, vscan *v, int depth) {
    const lkernel *k = E->k;
    for (; s >= 0 && v->ok; s = k->st[s].next) {
        const ls *st = &k->st[s];
        switch (st->kind) {
        case LS_FOR: v->ok = false; break;
        case LS_IF:
            vscan_block(E, st->body, v, depth + 1);
            vscan_block(E, st->els, v, depth + 1);
            break;
        case LS_SET:
            v->set[st->var] = (uint8_t)(v->set[st->var] < 2 ? v->set[st->var] + 1 : 2);
            v->def[st->var] = depth == 0 ? s : -1;
            if (depth > 0) v->set[st->var] = 2;
            break;
        case LS_REDUCE:
            if (depth > 0) v->ok = false;
            v->red[st->var] = 1;
            break;
        case LS_STORE: {
            if (st->flags & LF_ATOMIC_MIN) v->ok = false;
            int t = st->mem == MEM_LOCAL ? k->locals[st->ref].dtype : k->params[st->ref].dtype;
            int b = (int)rj_dtype_size((rj_dtype)t);
            if (b > v->maxbytes) v->maxbytes = b;
            break;
        }
        default: break;
        }
    }
}

/* Does any expression of the statements from s on (and their children) read variable var?
 * `skip` is a FOR whose body is not looked into. */
static bool block_reads(em *E, int32_t s, int32_t var, int32_t skip, uint32_t *seen, uint32_t *mark) {
    const lkernel *k = E->k;
    for (; s >= 0; s = k->st[s].next) {
        const ls *st = &k->st[s];
        int32_t ex[2];
        for (int i = 0, n = ls_exprs(st, ex); i < n; i++)
            if (lx_reads_var(k, ex[i], var, seen, ++*mark)) return true;
        if ((st->kind == LS_FOR && s != skip) || st->kind == LS_IF) {
            if (block_reads(E, st->body, var, skip, seen, mark)) return true;
            if (st->kind == LS_IF && block_reads(E, st->els, var, skip, seen, mark)) return true;
        }
    }
    return false;
}

/* Does the varying expression id raise integers to a power (rj.ipow, a loop of its own, which
 * a vector step would inline once a lane)? */
static bool int_pow(em *E, int32_t id) {
    const lx *e = &E->k->ex[id];
    if (!varying(E, id)) return false;
    if (e->kind == LX_BINARY && e->fn == RJ_OP_POW && !isf(e->type)) return true;
    int32_t kids[3];
    int n = lx_children(e, kids);
    for (int i = 0; i < n; i++)
        if (int_pow(E, kids[i])) return true;
    return false;
}

/* Checks the statements of a vector loop's body: branches on uniform conditions, no integer
 * powers, reduced variables read nowhere in the loop and combined by an operation with an
 * identity. */
static bool vcheck_block(em *E, int32_t s, uint32_t *seen, uint32_t *mark) {
    const lkernel *k = E->k;
    for (; s >= 0; s = k->st[s].next) {
        const ls *st = &k->st[s];
        if (st->kind == LS_IF &&
            (varying(E, st->a) || !vcheck_block(E, st->body, seen, mark) || !vcheck_block(E, st->els, seen, mark)))
            return false;
        if (st->kind == LS_REDUCE && E->vvar[st->var] == VV_REDUCE && st->fn != RJ_OP_ADD && st->fn != RJ_OP_MUL &&
            st->fn != RJ_OP_MAXIMUM && st->fn != RJ_OP_MINIMUM)
            return false;
        int32_t ex[2];
        for (int i = 0, n = ls_exprs(st, ex); i < n; i++) {
            if (int_pow(E, ex[i])) return false;
            for (int32_t v = 0; v < k->nvars; v++)
                if (E->vvar[v] == VV_REDUCE && lx_reads_var(k, ex[i], v, seen, ++*mark)) return false;
        }
    }
    return true;
}

/* One round of: a variable set in the loop becomes private to each lane once any value it
 * is given varies (or it accumulates). Whether anything changed. */
static bool vpromote(em *E, int32_t s) {
    bool changed = false;
    for (; s >= 0; s = E->k->st[s].next) {
        const ls *x = &E->k->st[s];
        if ((x->kind == LS_SET || x->kind == LS_REDUCE) && E->vvar[x->var] == VV_UNIFORM &&
            (x->kind == LS_REDUCE || varying(E, x->a))) {
            E->vvar[x->var] = VV_PRIVATE;
            changed = true;
        }
        if (x->kind == LS_IF) {
            changed |= vpromote(E, x->body);
            changed |= vpromote(E, x->els);
        }
    }
    return changed;
}

/* At most how many lanes the loop st runs (0: not known): its bounds' difference where both
 * are constants, else what lowering knows of the kernel's lanes (lkernel.lanes_max). */
static int64_t lanes_bound(em *E, const ls *st) {
    const lx *lo = &E->k->ex[st->a], *hi = &E->k->ex[st->b];
    if (lo->kind == LX_CONST && hi->kind == LX_CONST) return hi->i > lo->i ? hi->i - lo->i : 1;
    return E->k->lanes_max;
}

/* A step covers this many vector registers: LLVM splits each operation on it into that many
 * independent ones, interleaved, as its vectoriser's interleaving does. */
#define VREGS 2

/* Sets up E for emitting the lanes loop st as vectors; false leaves it to LLVM. */
static bool vector_plan(em *E, const ls *st) {
    const lkernel *k = E->k;
    if (!E->vbits || E->vloop >= 0) return false;
    size_t nv = (size_t)k->nvars + 1, ne = (size_t)k->nex + 1;
    vscan v = {.set = mem_zalloc(E->ctx, nv), .red = mem_zalloc(E->ctx, nv),
               .def = mem_zalloc(E->ctx, sizeof(int32_t) * nv),
               .seen = mem_zalloc(E->ctx, sizeof(uint32_t) * ne), .mark = 1, .ok = true};
    bool ok = v.set && v.red && v.def && v.seen;
    if (!ok) E->nomem = true;
    if (ok) vscan_block(E, st->body, &v, 0);
    ok = ok && v.ok;
    if (ok) {
        E->vloop = st->var;
        for (int32_t i = 0; i < k->nvars; i++) E->vvar[i] = v.red[i] && !v.set[i] ? VV_REDUCE : VV_UNIFORM;
        do memset(E->vclass, 0, ne);
        while (vpromote(E, st->body));
        /* indices along the lanes held in variables (each may build on an earlier one) */
        for (bool changed = true; changed;) {
            changed = false;
            for (int32_t i = 0; i < k->nvars; i++)
                if (E->vvar[i] == VV_PRIVATE && v.set[i] == 1 && !v.red[i] && v.def[i] >= 0 &&
                    k->vars[i].type == RJ_I64 && vunit(E, k->st[v.def[i]].a)) {
                    E->vvar[i] = VV_AFFINE;
                    changed = true;
                }
        }
        for (int32_t i = 0; i < k->nvars; i++)
            if (v.red[i]) {
                int b = (int)rj_dtype_size((rj_dtype)k->vars[i].type);
                if (b > v.maxbytes) v.maxbytes = b;
            }
        vscan_loads(E, st->body, &v);
        E->vf = VREGS * E->vbits / 8 / (v.maxbytes > 0 ? v.maxbytes : 4);
        if (E->vf > 32) E->vf = 32;
        /* no wider than the lanes there can be: a step with lanes masked off costs more than
         * a full one of half the width (masked_softmax.rj's 8 columns ran 1.45x slower in
         * 16-lane masked steps than in 8-lane full ones on a Zen 4) */
        int64_t most = lanes_bound(E, st);
        while (most > 0 && E->vf > 2 && E->vf > most) E->vf /= 2;
        uint32_t mark = ++v.mark;
        ok = E->vf >= 2 && vcheck_block(E, st->body, v.seen, &mark);
        /* a lane's private variable must not be read after the loop */
        for (int32_t i = 0; ok && i < k->nvars; i++)
            if ((E->vvar[i] == VV_PRIVATE || E->vvar[i] == VV_AFFINE) && block_reads(E, k->body, i, (int32_t)(st - k->st), v.seen, &mark))
                ok = false;
        if (!ok) E->vloop = -1;
    }
    mem_free(E->ctx, v.set, nv);
    mem_free(E->ctx, v.red, nv);
    mem_free(E->ctx, v.def, sizeof(int32_t) * nv);
    mem_free(E->ctx, v.seen, sizeof(uint32_t) * ne);
    return ok;
}

/* ---- emitting a planned loop ---- */

static LLVMValueRef vexpr(em *E, int32_t id);

static void remember_v(em *E, int32_t id, LLVMValueRef v) {
    E->vcache[id] = v;
    if (!mem_grow(E->ctx, (void **)&E->stack, &E->capstack, E->nstack + 1, sizeof(int32_t))) {
        E->nomem = true;
        return;
    }
    E->stack[E->nstack++] = ~id; /* forget_to clears vcache for the complemented ids */
}

static LLVMValueRef splat(em *E, LLVMValueRef x, int n) {
    if (LLVMIsConstant(x)) return splat_const(x, n);
    LLVMTypeRef vt = LLVMVectorType(LLVMTypeOf(x), (unsigned)n);
    LLVMValueRef one = LLVMBuildInsertElement(E->b, LLVMGetPoison(vt), x, i32c(E, 0), "");
    LLVMValueRef zeros = LLVMConstNull(LLVMVectorType(LLVMInt32TypeInContext(E->c), (unsigned)n));
    return LLVMBuildShuffleVector(E->b, one, LLVMGetPoison(vt), zeros, "");
}

/* id's value in every lane: a vector of vf */
static LLVMValueRef vvec(em *E, int32_t id) {
    LLVMValueRef v = vexpr(E, id);
    return LLVMGetTypeKind(LLVMTypeOf(v)) == LLVMVectorTypeKind ? v : splat(E, v, E->vf);
}

/* <base, base + 1, ...>: the lanes' indices from a scalar i64 */
static LLVMValueRef iota_from(em *E, LLVMValueRef base) {
    LLVMValueRef e[64];
    LLVMTypeRef i64 = LLVMInt64TypeInContext(E->c);
    for (int i = 0; i < E->vf; i++) e[i] = LLVMConstInt(i64, (unsigned long long)i, 0);
    return LLVMBuildAdd(E->b, splat(E, base, E->vf), LLVMConstVector(e, (unsigned)E->vf), "");
}

static LLVMValueRef vintrinsic(em *E, const char *name, LLVMTypeRef *tys, unsigned nt, LLVMValueRef *args, unsigned n) {
    unsigned id = LLVMLookupIntrinsicID(name, strlen(name));
    LLVMValueRef fn = LLVMGetIntrinsicDeclaration(E->m, id, tys, nt);
    return LLVMBuildCall2(E->b, LLVMIntrinsicGetType(E->c, id, tys, nt), fn, args, n, "");
}

static LLVMValueRef all_lanes(em *E) {
    return LLVMConstAllOnes(LLVMVectorType(LLVMInt1TypeInContext(E->c), (unsigned)E->vf));
}

/* A vector of memory `mem`/`ref` elements of type t at index idx (an expression): contiguous
 * from the first lane's element when idx runs along the lanes, else gathered; lanes off in
 * mask (NULL: all on) are not read and take passthru's values. */
static LLVMValueRef vload_at(em *E, int mem, int32_t ref, int t, int32_t idx, LLVMValueRef mask, LLVMValueRef passthru) {
    LLVMTypeRef et = mty(E, t), vt = LLVMVectorType(et, (unsigned)E->vf);
    LLVMTypeRef ptr = LLVMPointerTypeInContext(E->c, 0);
    unsigned align = (unsigned)rj_dtype_size((rj_dtype)t);
    if (passthru && t == RJ_BOOL) passthru = LLVMBuildZExt(E->b, passthru, vt, "");
    LLVMValueRef v;
    if (vunit(E, idx)) {
        LLVMValueRef p = mem_addr(E, mem, ref, t, expr(E, idx));
        if (!mask) {
            v = LLVMBuildLoad2(E->b, vt, p, "");
            LLVMSetAlignment(v, align);
        } else {
            LLVMTypeRef tys[2] = {vt, ptr};
            LLVMValueRef a[4] = {p, i32c(E, align), mask, passthru ? passthru : LLVMGetPoison(vt)};
            v = vintrinsic(E, "llvm.masked.load", tys, 2, a, 4);
        }
    } else {
        LLVMValueRef ps = mem_addr(E, mem, ref, t, vvec(E, idx));
        LLVMTypeRef tys[2] = {vt, LLVMTypeOf(ps)};
        LLVMValueRef a[4] = {ps, i32c(E, align), mask ? mask : all_lanes(E), passthru ? passthru : LLVMGetPoison(vt)};
        v = vintrinsic(E, "llvm.masked.gather", tys, 2, a, 4);
    }
    if (t == RJ_BOOL) v = LLVMBuildICmp(E->b, LLVMIntNE, v, LLVMConstNull(vt), "");
    return v;
}

static LLVMValueRef vload_step(em *E, const lx *e, LLVMValueRef dflt) {
    return vload_at(E, e->fn, e->ref, e->type, e->a, E->vmask, dflt);
}

static LLVMValueRef vload(em *E, const lx *e) {
    if (e->b < 0) return vload_at(E, e->fn, e->ref, e->type, e->a, E->vmask, NULL);
    LLVMValueRef dflt = vvec(E, e->c);
    if (varying(E, e->b)) { /* lanes whose guard is off are not read */
        LLVMValueRef g = vvec(E, e->b);
        LLVMValueRef m = E->vmask ? LLVMBuildAnd(E->b, g, E->vmask, "") : g;
        return vload_at(E, e->fn, e->ref, e->type, e->a, m, dflt);
    }
    return when(E, expr(E, e->b), dflt, e, vload_step); /* one guard for every lane: a branch */
}

/* c ? b : d for a condition c the same in every lane: a branch to the arm chosen, so that
 * what only that arm needs (a load under the same guard, as pads have) is not computed for
 * the other, and the guard's test folds into the branch. */
static LLVMValueRef vselect_branch(em *E, const lx *e) {
    LLVMValueRef c = expr(E, e->a);
    LLVMBasicBlockRef yes = LLVMAppendBasicBlockInContext(E->c, E->fn, "vsel.then");
    LLVMBasicBlockRef no = LLVMAppendBasicBlockInContext(E->c, E->fn, "vsel.else");
    LLVMBasicBlockRef join = LLVMAppendBasicBlockInContext(E->c, E->fn, "vsel.join");
    LLVMBuildCondBr(E->b, c, yes, no);
    LLVMValueRef v[2];
    LLVMBasicBlockRef from[2];
    for (int i = 0; i < 2; i++) {
        LLVMPositionBuilderAtEnd(E->b, i ? no : yes);
        int32_t mark = E->nstack;
        v[i] = vvec(E, i ? e->c : e->b);
        forget_to(E, mark); /* what the arm computed is not available after the join */
        from[i] = LLVMGetInsertBlock(E->b);
        LLVMBuildBr(E->b, join);
    }
    LLVMPositionBuilderAtEnd(E->b, join);
    LLVMValueRef phi = LLVMBuildPhi(E->b, LLVMTypeOf(v[0]), "");
    LLVMAddIncoming(phi, v, from, 2);
    return phi;
}

/* An expression inside a vector loop: a scalar where uniform, else a vector of vf lanes. */
static LLVMValueRef vexpr(em *E, int32_t id) {
    if (!varying(E, id)) return expr(E, id);
    if (E->vcache[id]) return E->vcache[id];
    const lx *e = &E->k->ex[id];
    LLVMValueRef v, x, y, z;
    switch (e->kind) {
    case LX_VAR:
        if (e->ref == E->vloop) v = iota_from(E, E->t0);
        else if (E->vvar[e->ref] == VV_AFFINE) v = iota_from(E, LLVMBuildLoad2(E->b, sty(E, RJ_I64), E->vars[e->ref], ""));
        else v = LLVMBuildLoad2(E->b, LLVMVectorType(sty(E, e->type), (unsigned)E->vf), E->vvals[e->ref], "");
        break;
    case LX_LOAD: v = vload(E, e); break;
    case LX_UNARY:
        x = vvec(E, e->a);
        E->vw = E->vf;
        v = unary(E, e->fn, e->type, x);
        break;
    case LX_BINARY:
        x = vvec(E, e->a), y = vvec(E, e->b), z = e->c >= 0 ? vvec(E, e->c) : NULL;
        E->vw = E->vf;
        v = binary(E, e->fn, e->type, x, y, z);
        break;
    case LX_CMP:
        x = vvec(E, e->a), y = vvec(E, e->b);
        E->vw = E->vf;
        v = compare(E, e->fn, E->k->ex[e->a].type, x, y);
        break;
    case LX_SELECT:
        if (!varying(E, e->a)) { /* one choice for all lanes: a branch, only it computed */
            v = vselect_branch(E, e);
            break;
        }
        x = vexpr(E, e->a), y = vvec(E, e->b), z = vvec(E, e->c);
        v = LLVMBuildSelect(E->b, x, y, z, "");
        break;
    default:
        x = vvec(E, e->a);
        E->vw = E->vf;
        v = convert(E, x, E->k->ex[e->a].type, e->type);
        break;
    }
    E->vw = 0;
    remember_v(E, id, v);
    return v;
}

/* The identity of a reduction's operation, in every lane. */
static LLVMValueRef videntity(em *E, int fn, int t) {
    E->vw = E->vf;
    op_identity_value id = op_identity(fn, (rj_dtype)t, true); /* the lanes' partials */
    LLVMValueRef v = isf(t) ? fconst(E, t, id.f) : iconst(E, t, id.i);
    E->vw = 0;
    return v;
}

/* The lanes of v combined by fn: halves folded onto each other, a tree. */
static LLVMValueRef vfold(em *E, int fn, int t, LLVMValueRef v) {
    for (int w = E->vf / 2; w >= 1; w /= 2) {
        LLVMValueRef lo[32], hi[32];
        for (int i = 0; i < w; i++) lo[i] = i32c(E, (unsigned)i), hi[i] = i32c(E, (unsigned)(i + w));
        LLVMValueRef a = LLVMBuildShuffleVector(E->b, v, LLVMGetPoison(LLVMTypeOf(v)), LLVMConstVector(lo, (unsigned)w), "");
        LLVMValueRef c = LLVMBuildShuffleVector(E->b, v, LLVMGetPoison(LLVMTypeOf(v)), LLVMConstVector(hi, (unsigned)w), "");
        E->vw = w;
        v = binary(E, fn, t, a, c, NULL);
        E->vw = 0;
    }
    return LLVMBuildExtractElement(E->b, v, i32c(E, 0), "");
}

/* The alignment of stream_for's direct vector stores of type t: a vector's bytes, at most a machine
 * register's (a wider vector is stored register by register). */
static unsigned nt_align(const em *E, int t) {
    unsigned a = (unsigned)E->vf * (unsigned)rj_dtype_size((rj_dtype)t), r = (unsigned)E->vbits / 8;
    return a < r ? a : r;
}

static void vblock(em *E, int32_t s);

static void vstmt(em *E, const ls *st) {
    LLVMBuilderRef b = E->b;
    const lkernel *k = E->k;
    forget_to(E, 0);
    switch (st->kind) {
    case LS_SET:
        if (E->vvar[st->var] == VV_PRIVATE) LLVMBuildStore(b, vvec(E, st->a), E->vvals[st->var]);
        else LLVMBuildStore(b, expr(E, st->a), E->vars[st->var]); /* uniform, or an index's first lane */
        break;
    case LS_REDUCE: {
        int t = k->vars[st->var].type;
        LLVMTypeRef vt = LLVMVectorType(sty(E, t), (unsigned)E->vf);
        LLVMValueRef x = vvec(E, st->a), y = st->flags & LF_FMA ? vvec(E, st->b) : NULL;
        LLVMValueRef slot = E->vvals[st->var];
        LLVMValueRef acc = LLVMBuildLoad2(b, vt, slot, "");
        E->vw = E->vf;
        LLVMValueRef v = y ? binary(E, LOP_FMA, t, x, y, acc) : binary(E, st->fn, t, acc, x, NULL);
        E->vw = 0;
        if (E->vmask && E->vvar[st->var] == VV_REDUCE) v = LLVMBuildSelect(b, E->vmask, v, acc, "");
        LLVMBuildStore(b, v, slot);
        break;
    }
    case LS_STORE: {
        int t = st->mem == MEM_LOCAL ? k->locals[st->ref].dtype : k->params[st->ref].dtype;
        unsigned align = (unsigned)rj_dtype_size((rj_dtype)t);
        if (!varying(E, st->a)) { /* every lane at one address: the last lane's value, as the
                                   * scalar loop's last iteration leaves it */
            LLVMValueRef x = vexpr(E, st->b);
            if (LLVMGetTypeKind(LLVMTypeOf(x)) == LLVMVectorTypeKind) x = LLVMBuildExtractElement(b, x, E->vlast, "");
            if (t == RJ_BOOL) x = LLVMBuildZExt(b, x, mty(E, t), "");
            LLVMSetAlignment(LLVMBuildStore(b, x, mem_addr(E, st->mem, st->ref, t, expr(E, st->a))), align);
            break;
        }
        LLVMTypeRef vt = LLVMVectorType(mty(E, t), (unsigned)E->vf), ptr = LLVMPointerTypeInContext(E->c, 0);
        LLVMValueRef v = vvec(E, st->b);
        if (t == RJ_BOOL) v = LLVMBuildZExt(b, v, vt, "");
        int sq = -1;
        for (int q = 0; q < E->nstage; q++)
            if (&k->st[E->stage_stmt[q]] == st) sq = q;
        LLVMValueRef p = NULL;
        if (sq >= 0) {
            LLVMValueRef off = LLVMBuildSub(b, E->stage_idx, E->stage_d0, "");
            p = LLVMBuildInBoundsGEP2(b, mty(E, t), E->stage_buf[sq], &off, 1, "");
        } else if (vunit(E, st->a)) {
            p = mem_addr(E, st->mem, st->ref, t, expr(E, st->a));
        }
        if (p && !E->vmask) {
            LLVMValueRef sv = LLVMBuildStore(b, v, p);
            if (E->nt_direct && (st->flags & LF_NT) && sq < 0) { /* aligned: stream_for checked */
                align = nt_align(E, t);
                LLVMValueRef one = LLVMConstInt(LLVMInt32TypeInContext(E->c), 1, 0);
                LLVMMetadataRef md = LLVMValueAsMetadata(one);
                LLVMSetMetadata(sv, E->md_nt, LLVMMetadataAsValue(E->c, LLVMMDNodeInContext2(E->c, &md, 1)));
            }
            LLVMSetAlignment(sv, align);
        } else if (p) {
            LLVMTypeRef tys[2] = {vt, ptr};
            LLVMValueRef a[4] = {v, p, i32c(E, align), E->vmask};
            vintrinsic(E, "llvm.masked.store", tys, 2, a, 4);
        } else {
            LLVMValueRef ps = mem_addr(E, st->mem, st->ref, t, vvec(E, st->a));
            LLVMTypeRef tys[2] = {vt, LLVMTypeOf(ps)};
            LLVMValueRef a[4] = {v, ps, i32c(E, align), E->vmask ? E->vmask : all_lanes(E)};
            vintrinsic(E, "llvm.masked.scatter", tys, 2, a, 4);
        }
        break;
    }
    case LS_IF: if_else(E, st, vblock); break; /* a uniform condition (vector_plan) */
    default: break; /* BARRIER: one thread; FOR: not planned */
    }
    forget_to(E, 0);
}

static void vblock(em *E, int32_t s) {
    for (; s >= 0 && !E->fail && !E->nomem; s = E->k->st[s].next) vstmt(E, &E->k->st[s]);
}

/* The loop's metadata: already vectorised (LLVM's vectoriser leaves it alone). */
static LLVMValueRef vloop_md(em *E) {
    LLVMMetadataRef tmp = LLVMTemporaryMDNode(E->c, NULL, 0);
    static const char key[] = "llvm.loop.isvectorized";
    LLVMMetadataRef kv[2] = {LLVMMDStringInContext2(E->c, key, sizeof key - 1),
                             LLVMValueAsMetadata(LLVMConstInt(LLVMInt32TypeInContext(E->c), 1, 0))};
    LLVMMetadataRef ops[2] = {tmp, LLVMMDNodeInContext2(E->c, kv, 2)};
    LLVMMetadataRef id = LLVMMDNodeInContext2(E->c, ops, 2);
    LLVMMetadataReplaceAllUsesWith(tmp, id);
    return LLVMMetadataAsValue(E->c, id);
}

/* Loops with constant bounds of at most this many steps are emitted without a loop; in a
 * kernel with lanes_whole (a softmax's constant tiles, lower.c: state_tile), loops of up to
 * lanes_max lanes, so that its accumulators stay in registers across the row loops. */
#define VSTRAIGHT 2

/* One step of the body over lanes t0 .. t0 + vf - 1 (t0: an i64), those off in mask (NULL:
 * all on) neither read nor written; last: the last lane on (an i32). */
static void vstep(em *E, const ls *st, LLVMValueRef t0, LLVMValueRef mask, LLVMValueRef last) {
    LLVMBuildStore(E->b, t0, E->vars[st->var]); /* scalar index expressions read the first lane */
    E->t0 = t0;
    if (E->nstage) E->stage_idx = t0;
    E->vmask = mask;
    E->vlast = last;
    forget_to(E, 0);
    vblock(E, st->body);
    E->vmask = NULL;
    forget_to(E, 0);
}

/* The lanes below n (an i32), as a mask. */
static LLVMValueRef lanes_below(em *E, LLVMValueRef n) {
    LLVMValueRef lanes[64];
    for (int i = 0; i < E->vf; i++) lanes[i] = i32c(E, (unsigned)i);
    return LLVMBuildICmp(E->b, LLVMIntULT, LLVMConstVector(lanes, (unsigned)E->vf), splat(E, n, E->vf), "");
}

/* for t in [lo, hi) lanes, planned by vector_plan: full steps of vf lanes, then steps of at
 * most vf lanes, masked, for the rest (none where the bounds are constants a multiple of vf
 * apart; with constant bounds a few steps apart, the steps in a row without a loop); then the
 * reductions' partial results folded into their variables. */
static void vector_loop(em *E, const ls *st, LLVMValueRef lo, LLVMValueRef hi) {
    LLVMBuilderRef b = E->b;
    const lkernel *k = E->k;
    int vf = E->vf;
    LLVMTypeRef i64 = sty(E, RJ_I64), i32 = LLVMInt32TypeInContext(E->c);
    for (int32_t v = 0; v < k->nvars; v++) {
        E->vvals[v] = NULL;
        if (E->vvar[v] == VV_PRIVATE || E->vvar[v] == VV_REDUCE)
            E->vvals[v] = entry_alloca(E, LLVMVectorType(sty(E, k->vars[v].type), (unsigned)vf), k->vars[v].name);
    }
    /* the reductions' partial results start at their operation's identity */
    for (int32_t s = st->body; s >= 0; s = k->st[s].next) {
        const ls *x = &k->st[s];
        if (x->kind == LS_REDUCE && E->vvar[x->var] == VV_REDUCE)
            LLVMBuildStore(b, videntity(E, x->fn, k->vars[x->var].type), E->vvals[x->var]);
    }
    LLVMValueRef var = E->vars[st->var], vfc = LLVMConstInt(i64, (unsigned long long)vf, 0);
    const lx *clo = &k->ex[st->a], *chi = &k->ex[st->b];
    bool fixed = clo->kind == LX_CONST && chi->kind == LX_CONST;
    if (fixed && (chi->i - clo->i <= VSTRAIGHT * vf || (k->lanes_whole && chi->i - clo->i <= k->lanes_max))) {
        int64_t t = clo->i;
        for (; t + vf <= chi->i; t += vf) vstep(E, st, LLVMConstInt(i64, (unsigned long long)t, 1), NULL, i32c(E, (unsigned)vf - 1));
        if (t < chi->i)
            vstep(E, st, LLVMConstInt(i64, (unsigned long long)t, 1), lanes_below(E, i32c(E, (unsigned)(chi->i - t))),
                  i32c(E, (unsigned)(chi->i - t - 1)));
    } else {
        LLVMBuildStore(b, lo, var);
        LLVMBasicBlockRef head = LLVMAppendBasicBlockInContext(E->c, E->fn, "vloop");
        LLVMBasicBlockRef body = LLVMAppendBasicBlockInContext(E->c, E->fn, "vloop.body");
        LLVMBasicBlockRef rest = LLVMAppendBasicBlockInContext(E->c, E->fn, "vloop.rest");
        LLVMBasicBlockRef exit = LLVMAppendBasicBlockInContext(E->c, E->fn, "vloop.exit");
        LLVMBuildBr(b, head);
        LLVMPositionBuilderAtEnd(b, head);
        LLVMValueRef t0 = LLVMBuildLoad2(b, i64, var, "");
        LLVMValueRef end = LLVMBuildAdd(b, t0, vfc, "");
        LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSLE, end, hi, ""), body, rest);
        LLVMPositionBuilderAtEnd(b, body);
        vstep(E, st, t0, NULL, i32c(E, (unsigned)vf - 1));
        LLVMBuildStore(b, end, var);
        LLVMSetMetadata(LLVMBuildBr(b, head), E->md_loop, vloop_md(E));
        LLVMPositionBuilderAtEnd(b, rest);
        /* no lanes left over where vf divides every extent: a constant one, or the unit's tile
         * of an item kernel whose tiles are multiples of lanes_multiple */
        bool tiles = k->lanes_multiple > 0 && k->lanes_multiple % vf == 0 && clo->kind == LX_CONST && clo->i == 0 &&
                     chi->kind == LX_VAR && chi->ref == k->lanes_var;
        if ((fixed && (chi->i - clo->i) % vf == 0) || tiles) {
            LLVMBuildBr(b, exit);
        } else { /* fewer than vf lanes left: one masked step */
            LLVMBasicBlockRef part = LLVMAppendBasicBlockInContext(E->c, E->fn, "vloop.part");
            LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntSLT, t0, hi, ""), part, exit);
            LLVMPositionBuilderAtEnd(b, part);
            LLVMValueRef left = LLVMBuildTrunc(b, LLVMBuildSub(b, hi, t0, ""), i32, "");
            vstep(E, st, t0, lanes_below(E, left), LLVMBuildSub(b, left, i32c(E, 1), ""));
            LLVMBuildBr(b, exit);
        }
        LLVMPositionBuilderAtEnd(b, exit);
    }
    LLVMBuildStore(b, hi, var);
    for (int32_t s = st->body; s >= 0; s = k->st[s].next) {
        const ls *x = &k->st[s];
        if (x->kind != LS_REDUCE || E->vvar[x->var] != VV_REDUCE) continue;
        int t = k->vars[x->var].type;
        int fn = x->flags & LF_FMA ? RJ_OP_ADD : x->fn;
        LLVMValueRef acc = LLVMBuildLoad2(b, LLVMVectorType(sty(E, t), (unsigned)vf), E->vvals[x->var], "");
        LLVMValueRef cur = LLVMBuildLoad2(b, sty(E, t), E->vars[x->var], "");
        LLVMBuildStore(b, binary(E, fn, t, cur, vfold(E, fn, t, acc), NULL), E->vars[x->var]);
        E->vvar[x->var] = VV_UNIFORM; /* folded once, however many statements reduce into it */
    }
    E->vloop = -1;
}

/* for var in [lo, hi) { body }: a canonical counted loop over an alloca'd induction variable. */
static void counted_loop(em *E, const ls *st, LLVMValueRef lo, LLVMValueRef hi) {
    LLVMBuilderRef b = E->b;
    if (st->map == LM_LANES) {
        if (vector_plan(E, st)) {
            E->nvec++;
            vector_loop(E, st, lo, hi);
            return;
        }
        E->nscalar++;
    }
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
/* stream_for stages a row that is not whole aligned cache lines only from this many bytes */
#define STAGE_LONG_ROW 2048

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

/* An innermost loop with streaming stores, where the run streams (stream_for): in chunks of
 * STAGE_CHUNK iterations, the body runs as usual (and vectorises as usual) with its streaming
 * stores redirected to L1 buffers; each chunk is then flushed to memory, with aligned
 * non-temporal stores for its whole cache lines. */
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
    LLVMBasicBlockRef head = NULL, exit = NULL;
    /* one chunk, and no loop, where the bounds are constants at most a chunk apart */
    const lx *clo = &k->ex[st->a], *chi = &k->ex[st->b];
    bool one = clo->kind == LX_CONST && chi->kind == LX_CONST && chi->i - clo->i <= STAGE_CHUNK;
    LLVMValueRef d0 = one ? lo : loop_open(E, d0v, lo, hi, "chunk", &head, &exit);
    LLVMValueRef end = LLVMBuildAdd(b, d0, iconst(E, RJ_I64, STAGE_CHUNK), "");
    LLVMValueRef d1 = one ? hi : LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSLT, end, hi, ""), end, hi, "");
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
    if (one) return;
    LLVMBuildStore(b, end, d0v);
    LLVMBuildBr(b, head);
    LLVMPositionBuilderAtEnd(b, exit);
}

/* A lanes loop with streaming stores (stageable), run once per row of an output (an
 * elementwise kernel's row of D, a softmax's tile of a row): where the run's nt flag is clear,
 * a plain loop; where it is set, the stores stream if the row suits it, tested per row. A loop
 * of a constant extent that is a multiple of the vector width streams directly, as aligned
 * non-temporal vector stores, when every streaming store's first lane lies on a vector's
 * alignment (at most a register's). Any other loop is staged (staged_for) when its row is
 * whole aligned cache lines or at least STAGE_LONG_ROW bytes. Every other row is a plain loop.
 * Staging costs a call per row, which clobbers every vector register, and the part lines at
 * either end of a row are copied element by element: a short unaligned row lost more that
 * way than streaming saved. It used to serve every row, the plain case too, as a copy.
 * Measured on a Zen 4 (AVX-512, paired runs with ragjit bench --ab, from memory unless
 * said): rows of 8 f32 ran 2.66x faster streaming directly than staged (bench/'s W1 at
 * D = 8, 8192 items of up to 1024 rows) and 3.6x from the caches as plain stores;
 * examples/masked_softmax.rj (8 columns) 1.68x from memory and 1.23x from the caches;
 * bench/'s W2 (256 columns in two constant tiles) 1.08x on one thread and 1.01-1.03x on two;
 * W1, W3, W5 and W6 at D = 256 and W1 at D = 32 and 64 within noise (0.99-1.09). Rows that
 * are not whole lines, plain rather than staged: W1 at D = 19 1.71x faster, at D = 100 1.60x,
 * softmax over the ragged dim at D = 19 1.35x, 100 1.44x, 300 1.23x; D = 48, 64 and 1000
 * (staged either way) and W1 at D = 300 within noise. From the caches (64 items of up to 256
 * rows, the nt flag clear) W1 at D = 19 ran 1.54x faster with a plain loop than staged,
 * softmax at D = 19 1.38x and at D = 64 1.16x, W5 the same. Compile times did not change. */
static void stream_for(em *E, const ls *st, LLVMValueRef lo, LLVMValueRef hi) {
    const lkernel *k = E->k;
    LLVMBuilderRef b = E->b;
    const lx *clo = &k->ex[st->a], *chi = &k->ex[st->b];
    bool direct = clo->kind == LX_CONST && chi->kind == LX_CONST && chi->i > clo->i;
    for (int32_t s = st->body; direct && s >= 0; s = k->st[s].next)
        if (k->st[s].kind != LS_STORE && k->st[s].kind != LS_SET) direct = false;
    if (direct && !vector_plan(E, st)) direct = false;
    int32_t vloop = E->vloop;
    if (direct && (chi->i - clo->i) % E->vf) direct = false;
    E->vloop = -1;
    LLVMTypeRef i64 = vty(E, RJ_I64);
    LLVMValueRef zero = LLVMConstInt(i64, 0, 0), ok = LLVMBuildICmp(b, LLVMIntNE, E->args[E->ntp], zero, "");
    /* direct: every row aligned to a vector; staged: every row whole aligned lines, or long */
    LLVMValueRef cnt = LLVMBuildSub(b, hi, lo, ""), lines = ok, longrow = ok;
    LLVMBuildStore(b, lo, E->vars[st->var]);
    forget_to(E, 0);
    for (int32_t s = st->body; s >= 0; s = k->st[s].next) {
        const ls *x = &k->st[s];
        if (x->kind != LS_STORE || !(x->flags & LF_NT)) continue;
        int t = k->params[x->ref].dtype;
        LLVMValueRef es = LLVMConstInt(i64, rj_dtype_size((rj_dtype)t), 0);
        LLVMValueRef at = LLVMBuildPtrToInt(b, addr(E, x->ref, t, expr(E, x->a)), i64, "");
        if (direct) {
            LLVMValueRef low = LLVMBuildAnd(b, at, LLVMConstInt(i64, nt_align(E, t) - 1, 0), "");
            ok = LLVMBuildAnd(b, ok, LLVMBuildICmp(b, LLVMIntEQ, low, zero, ""), "");
            continue;
        }
        LLVMValueRef bytes = LLVMBuildMul(b, cnt, es, ""), line = LLVMConstInt(i64, 63, 0);
        LLVMValueRef whole = LLVMBuildOr(b, LLVMBuildAnd(b, at, line, ""), LLVMBuildAnd(b, bytes, line, ""), "");
        lines = LLVMBuildAnd(b, lines, LLVMBuildICmp(b, LLVMIntEQ, whole, zero, ""), "");
        longrow = LLVMBuildAnd(b, longrow, LLVMBuildICmp(b, LLVMIntSGE, bytes, LLVMConstInt(i64, STAGE_LONG_ROW, 0), ""), "");
    }
    if (!direct) ok = LLVMBuildOr(b, lines, longrow, "");
    LLVMBasicBlockRef nt = LLVMAppendBasicBlockInContext(E->c, E->fn, "nt");
    LLVMBasicBlockRef plain = LLVMAppendBasicBlockInContext(E->c, E->fn, "nt.plain");
    LLVMBasicBlockRef join = LLVMAppendBasicBlockInContext(E->c, E->fn, "nt.join");
    LLVMBuildCondBr(b, ok, nt, plain);
    LLVMPositionBuilderAtEnd(b, nt);
    forget_to(E, 0);
    if (direct) {
        E->vloop = vloop;
        E->nt_direct = true;
        vector_loop(E, st, lo, hi);
        E->nt_direct = false;
    } else {
        staged_for(E, st, lo, hi);
    }
    LLVMBuildBr(b, join);
    LLVMPositionBuilderAtEnd(b, plain);
    forget_to(E, 0);
    if (direct) {
        E->vloop = vloop;
        vector_loop(E, st, lo, hi);
        E->nvec++;
    } else {
        counted_loop(E, st, lo, hi);
    }
    LLVMBuildBr(b, join);
    LLVMPositionBuilderAtEnd(b, join);
    forget_to(E, 0);
    E->used_nt = true;
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
        break; /* streaming happens only through stream_for: an unaligned !nontemporal store
                * would stop the loop from vectorising */
    }
    case LS_IF: if_else(E, st, block); break;
    case LS_FOR: {
        LLVMValueRef lo = expr(E, st->a), hi = expr(E, st->b);
        if (E->ntp >= 0 && st->map == LM_LANES && stageable(E, st)) {
            stream_for(E, st, lo, hi);
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
    int wide = E->vbits;
    /* a kernel that streams its input through additions (lkernel.streams) in the target's
     * stream_bits (jit.c: 256 on a Zen 4) */
    bool narrow = E->vbits && t->stream_bits && t->stream_bits < E->vbits && k->streams;
    if (narrow) E->vbits = t->stream_bits;
    LLVMTypeRef ptr = LLVMPointerTypeInContext(E->c, 0), i64 = vty(E, RJ_I64);
    LLVMTypeRef *pt = mem_alloc(E->ctx, sizeof(LLVMTypeRef) * (size_t)(k->nparams + 1));
    size_t na = (size_t)(k->nparams + 1), nv = (size_t)(k->nvars + 1), ne = (size_t)(k->nex + 1);
    size_t nl = (size_t)(k->nlocals + 1);
    E->args = mem_zalloc(E->ctx, sizeof(LLVMValueRef) * na);
    E->vars = mem_zalloc(E->ctx, sizeof(LLVMValueRef) * nv);
    E->locals = mem_zalloc(E->ctx, sizeof(LLVMValueRef) * nl);
    E->cache = mem_zalloc(E->ctx, sizeof(LLVMValueRef) * ne);
    E->vcache = mem_zalloc(E->ctx, sizeof(LLVMValueRef) * ne);
    E->vvals = mem_zalloc(E->ctx, sizeof(LLVMValueRef) * nv);
    E->vclass = mem_zalloc(E->ctx, ne);
    E->vvar = mem_zalloc(E->ctx, nv);
    E->vloop = -1;
    bool ok = pt && E->args && E->vars && E->locals && E->cache && E->vcache && E->vvals && E->vclass && E->vvar;
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
        /* 512-bit vectors where the CPU has them: exp-heavy loops (softmax) gain ~25%; sums over
         * the ragged dim take the target's stream_bits (256 on a Zen 4, jit.c) */
        if (strstr(t->features, "+avx512f") && (!E->vbits || E->vbits >= 512))
            LLVMAddTargetDependentFunctionAttr(E->fn, "prefer-vector-width", "512");
        if (narrow && strstr(t->features, "+avx512f")) { /* 256 bits: LLVM splits wider vectors */
            char w[16];
            snprintf(w, sizeof w, "%d", E->vbits);
            LLVMAddTargetDependentFunctionAttr(E->fn, "prefer-vector-width", w);
            LLVMAddTargetDependentFunctionAttr(E->fn, "min-legal-vector-width", w);
        }
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
    mem_free(E->ctx, E->vcache, sizeof(LLVMValueRef) * ne);
    mem_free(E->ctx, E->vvals, sizeof(LLVMValueRef) * nv);
    mem_free(E->ctx, E->vclass, ne);
    mem_free(E->ctx, E->vvar, nv);
    E->args = E->vars = E->locals = E->cache = E->vcache = E->vvals = NULL;
    E->vclass = E->vvar = NULL;
    E->nstack = 0;
    E->used_nt = false;
    E->vbits = wide;
    if (!ok || E->nomem) {
        ctx_fail(E->ctx, RJ_ERR_NOMEM, "out of memory while generating LLVM IR");
        return false;
    }
    if (E->fail) ctx_fail(E->ctx, RJ_ERR_INTERNAL, "emit: kernel %s uses an operation the LLVM "
                          "backend does not implement", k->name);
    return !E->fail;
}

LLVMModuleRef llvm_emit_module(rj_ctx *ctx, LLVMContextRef c, const lprog *p, int32_t first, int32_t count,
                               const char *prefix, const emit_target *t, int32_t *lanes_left) {
    em E = {.ctx = ctx, .c = c};
    E.m = LLVMModuleCreateWithNameInContext(prefix, c);
    LLVMSetTarget(E.m, t->triple);
    LLVMSetDataLayout(E.m, t->layout);
    E.b = LLVMCreateBuilderInContext(c);
    E.ml = (mathlib){.c = c, .m = E.m};
    ml_set_features(&E.ml, t->features);
    E.vbits = t->vector_bits;
    if (E.vbits && E.vbits < 512) E.ml.scalef = 0, E.ml.scalef_vl = false; /* as on a CPU without AVX-512 */
    E.md_nt = LLVMGetMDKindIDInContext(c, "nontemporal", 11);
    E.md_loop = LLVMGetMDKindIDInContext(c, "llvm.loop", 9);
    E.md_group = LLVMGetMDKindIDInContext(c, "llvm.access.group", 17);
    bool ok = true;
    for (int32_t i = first; i < first + count && ok; i++) ok = kernel(&E, &p->kernels[i], prefix, t);
    if (ok) ml_finish(&E.ml);
    *lanes_left = E.nscalar;
    if (ok && E.vbits && E.vbits < 512 && strstr(t->features, "+avx512f")) {
        /* narrower vectors than the CPU has (RAGJIT_LLVM_VECTOR=256: code as for AVX2): every
         * function says so, the math it inlines included (inlining keeps the attribute only
         * where both functions have it) */
        for (LLVMValueRef f = LLVMGetFirstFunction(E.m); f; f = LLVMGetNextFunction(f)) {
            if (LLVMIsDeclaration(f)) continue;
            LLVMAddTargetDependentFunctionAttr(f, "prefer-vector-width", "256");
            LLVMAddTargetDependentFunctionAttr(f, "min-legal-vector-width", "256");
        }
    }
    if (ok) { /* for the dumps: !ragjit.lanes = !{!{!"vector", i32 n, !"llvm", i32 m}} */
        LLVMTypeRef i32 = LLVMInt32TypeInContext(c);
        LLVMMetadataRef ops[4] = {LLVMMDStringInContext2(c, "vector", 6),
                                  LLVMValueAsMetadata(LLVMConstInt(i32, (unsigned)E.nvec, 0)),
                                  LLVMMDStringInContext2(c, "llvm", 4),
                                  LLVMValueAsMetadata(LLVMConstInt(i32, (unsigned)E.nscalar, 0))};
        LLVMAddNamedMetadataOperand(E.m, "ragjit.lanes", LLVMMetadataAsValue(c, LLVMMDNodeInContext2(c, ops, 4)));
    }
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
