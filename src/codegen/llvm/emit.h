/*
 * emit.h — what the pieces of the LLVM emitter share: its state, the type and constant
 * helpers every piece uses, and each file's entry points.
 *
 * llvm_emit_module (emit.c) emits a kernel at a time: its statements and loops (stmt.c), their
 * expressions (expr.c), each operation as ops.c spells them. A lanes loop the vector emitter
 * takes is planned by vplan.c and emitted by vector.c; one whose stores may stream is tested
 * and staged by stream.c around the loops stmt.c emits. The blocks, loop heads and allocas
 * they all build are flow.c's. Functions one piece calls in another carry the prefix em_; the
 * rest stay static in their file. The declarations below are grouped by the file that
 * defines them, each file calling only those above it (stmt.c, on top, is the one recursion:
 * a loop's body is statements).
 */
#ifndef RJ_LLVM_EMIT_H
#define RJ_LLVM_EMIT_H

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
    bool nt_direct;   /* vstmt: streaming stores as aligned non-temporal vector stores (stream.c) */
    unsigned md_nt, md_loop, md_group;
    LLVMValueRef group;  /* the lanes loops' access group (expr.c: lanes_group), or NULL */
    int lanes;           /* lanes loops around the statement being emitted */
    LLVMBasicBlockRef entry;   /* allocas go here */
    /* staging of streaming stores inside one innermost loop (stream.c: em_stage_open) */
    int nstage;
    int32_t stage_stmt[8];
    LLVMValueRef stage_buf[8], stage_d0, stage_idx;
    bool fail;  /* an op this backend does not implement */
    bool nomem;
    /* lanes loops emitted as vector code (vplan.c, vector.c) */
    int vbits;             /* the vector registers' bits; 0: every lanes loop goes to LLVM's vectoriser */
    int vw;                /* > 0 while an operation is built on vectors of vw lanes (vty, constants) */
    int32_t vloop;         /* the variable of the lanes loop being emitted as vectors, or -1 */
    int vf;                /* its lanes per step */
    uint8_t *vclass;       /* per expression: 0 not known yet, VC_UNIFORM or VC_VARYING */
    uint8_t *vvar;         /* per variable: VV_* */
    LLVMValueRef *vvals;   /* per variable: its vector (an alloca) for VV_PRIVATE and VV_REDUCE */
    LLVMValueRef *vcache;  /* per expression: its vector value within the statement */
    LLVMValueRef vmask;    /* the last, partial step's lanes; NULL in full steps */
    LLVMValueRef vmask_mem; /* the same lanes in memory's order (differs from vmask with vpair) */
    int nheld;             /* with vpair: lanes variables set to a bf16 rounding in this stretch of */
    int32_t held_var[8];   /* straight-line code, and that rounding's bits in memory's order */
    LLVMValueRef held_bits[8];
    bool vpair;            /* the step's lanes in even/odd order: the even elements, then the odd
                            * ones (vplan.c: vpair_block; half.c: em_from_pairs) */
    LLVMValueRef vlast;    /* the step's last lane on (i32) */
    LLVMValueRef t0;       /* the step's first lane */
    int nvec, nscalar;     /* lanes loops emitted as vectors, and left to LLVM (!ragjit.lanes) */
    bool f16c;             /* the target converts f16 in hardware (half.c) */
    bool bf16cvt;          /* and narrows f32 to bf16 in hardware (AVX512-BF16, half.c) */
    bool avx512;           /* AVX-512F: vfixupimmps for the integer bf16 rounding's NaNs (half.c) */
    int prefetch;          /* bytes ahead a streaming vector load prefetches (vector.c), 0: none */
} em;

/* ---- types and constants ---- */

static inline LLVMTypeRef sty(em *E, int t) {
    switch (t) {
    case RJ_BOOL: return LLVMInt1TypeInContext(E->c);
    case RJ_I32: return LLVMInt32TypeInContext(E->c);
    case RJ_I64: return LLVMInt64TypeInContext(E->c);
    case RJ_F16:
    case RJ_BF16: /* never a value's type (loopir.h); as in memory, f32 once widened */
    case RJ_F32: return LLVMFloatTypeInContext(E->c);
    default: return LLVMDoubleTypeInContext(E->c);
    }
}

/* A value's type: a scalar, or a vector of E->vw while an operation is built on vectors. */
static inline LLVMTypeRef vty(em *E, int t) {
    return E->vw ? LLVMVectorType(sty(E, t), (unsigned)E->vw) : sty(E, t);
}

static inline LLVMValueRef splat_const(LLVMValueRef c, int n) { return ml_splat(c, (unsigned)n); }

static inline LLVMValueRef i32c(em *E, unsigned v) { return LLVMConstInt(LLVMInt32TypeInContext(E->c), v, 0); }

/* In memory, bool is a byte and a 16-bit float its bits (half.c converts). */
static inline LLVMTypeRef mty(em *E, int t) {
    LLVMTypeRef s = t == RJ_BOOL ? LLVMInt8TypeInContext(E->c)
                  : t == RJ_F16 || t == RJ_BF16 ? LLVMInt16TypeInContext(E->c) : NULL;
    if (!s) return vty(E, t);
    return E->vw ? LLVMVectorType(s, (unsigned)E->vw) : s;
}

/* The element type of memory `mem` / `ref` (a load's fn / ref, a store's mem / ref). */
static inline int mem_dtype(const lkernel *k, int mem, int32_t ref) {
    return mem == MEM_LOCAL ? k->locals[ref].dtype : k->params[ref].dtype;
}

static inline bool isf(int t) { return t == RJ_F32 || t == RJ_F64; }

static inline LLVMValueRef fconst(em *E, int t, double v) {
    LLVMValueRef c = LLVMConstReal(sty(E, t), v);
    return E->vw ? splat_const(c, E->vw) : c;
}
static inline LLVMValueRef iconst(em *E, int t, long long v) {
    LLVMValueRef c = LLVMConstInt(sty(E, t), (unsigned long long)v, 1);
    return E->vw ? splat_const(c, E->vw) : c;
}

/* ---- half.c: memory's types to and from values (bool bytes, 16-bit floats' bits) ---- */
LLVMValueRef em_from_mem(em *E, LLVMValueRef v, int t);
LLVMValueRef em_to_mem(em *E, LLVMValueRef v, int t);
LLVMValueRef em_to_mem_held(em *E, LLVMValueRef v, int t, bool held); /* LF_HELD stores */
LLVMValueRef em_round_half(em *E, LLVMValueRef v, bool bf16);
LLVMValueRef em_from_pairs(em *E, LLVMValueRef v);                /* vpair loads (half.c) */
LLVMValueRef em_to_pairs(em *E, LLVMValueRef v, bool held);       /* vpair stores */
LLVMValueRef em_pairs_interleave(em *E, LLVMValueRef h);

/* ---- ops.c: single operations, on scalars or on vectors of E->vw lanes ---- */
LLVMValueRef em_convert(em *E, LLVMValueRef v, int from, int to);
LLVMValueRef em_unary(em *E, int fn, int t, LLVMValueRef x);
/* z: LOP_FMA's addend, else NULL */
LLVMValueRef em_binary(em *E, int fn, int t, LLVMValueRef x, LLVMValueRef y, LLVMValueRef z);
/* t: the operands' type */
LLVMValueRef em_compare(em *E, int fn, int t, LLVMValueRef x, LLVMValueRef y);

/* ---- expr.c: expressions, memoised within a statement ---- */
/* Forgets the values remembered since the stack held mark entries (0: all of them). */
void em_forget_to(em *E, int32_t mark);
/* Remembers the vector value of varying expression id (vector.c), until em_forget_to. */
void em_remember_v(em *E, int32_t id, LLVMValueRef v);
/* Element idx of buffer parameter `param` of type t. */
LLVMValueRef em_addr(em *E, int32_t param, int t, LLVMValueRef idx);
LLVMValueRef em_mem_addr(em *E, int mem, int32_t ref, int t, LLVMValueRef idx);
LLVMValueRef em_expr(em *E, int32_t id);
typedef struct em_when {
    LLVMBasicBlockRef from, join;
    int32_t mark;
} em_when;
em_when em_when_open(em *E, LLVMValueRef g);
LLVMValueRef em_when_close(em *E, const em_when *w, LLVMValueRef v, LLVMValueRef dflt);
/* Puts a load or store inside a lanes loop into the lanes loops' access group. */
void em_in_group(em *E, LLVMValueRef mem_op);

/* ---- flow.c: control-flow shapes the statement emitters share ---- */
/* An alloca in the function's entry block, aligned to 64 bytes. */
LLVMValueRef em_entry_alloca(em *E, LLVMTypeRef t, const char *name);
LLVMValueRef em_loop_open(em *E, LLVMValueRef var, LLVMValueRef lo, LLVMValueRef hi, const char *name,
                          LLVMBasicBlockRef *head, LLVMBasicBlockRef *exit);
/* if (cond) { ... } else { ... }: em_if_open, the then block, em_if_else, the else block,
 * em_if_close. */
typedef struct em_if {
    LLVMBasicBlockRef no, join;
} em_if;
em_if em_if_open(em *E, int32_t cond);
void em_if_else(em *E, const em_if *r);
void em_if_close(em *E, const em_if *r);

/* ---- vplan.c: which lanes loops become vector code ---- */
enum { VC_UNIFORM = 1, VC_VARYING = 2 };
/* variables: uniform; private to each lane (a vector); reduced across the lanes; or private
 * and set once, at the top of the body, to t + (uniform terms): an index along the lanes, kept
 * as its first lane's value (so loads and stores through it stay contiguous) */
enum { VV_UNIFORM = 0, VV_PRIVATE = 1, VV_REDUCE = 2, VV_AFFINE = 3 };
/* Does expression id differ between the lanes of the loop being planned or emitted? */
bool em_varying(em *E, int32_t id);
bool em_vunit(em *E, int32_t id);
bool em_vector_plan(em *E, const ls *st);

/* ---- vector.c: planned lanes loops as vector code ---- */
void em_vector_loop(em *E, const ls *st, LLVMValueRef lo, LLVMValueRef hi);
unsigned em_nt_align(const em *E, int t);

/* ---- stream.c: what lanes loops with streaming stores need around their loops ---- */
bool em_stageable(em *E, const ls *loop);
LLVMValueRef em_stream_test(em *E, const ls *st, LLVMValueRef lo, LLVMValueRef hi, bool *direct, int32_t *vloop);
typedef struct em_stage {
    LLVMValueRef d0, d1;           /* the chunk's iterations, for the caller's loop */
    LLVMValueRef d0v, end;         /* the chunk loop's variable, and the next chunk's start */
    LLVMBasicBlockRef head, exit;  /* the chunk loop's blocks; NULL: one chunk, no loop */
} em_stage;
void em_stage_open(em *E, const ls *st, LLVMValueRef lo, LLVMValueRef hi, em_stage *sg);
void em_stage_close(em *E, const ls *st, const em_stage *sg);

/* ---- stmt.c: statements and loops ---- */
void em_block(em *E, int32_t s);

#endif
