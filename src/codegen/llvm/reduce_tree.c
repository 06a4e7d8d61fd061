/*
 * reduce_tree.c — horizontal floating-point reductions as trees, after optimisation.
 *
 * The loop vectoriser turns a float accumulation (sum, sum of squares, a product) into vector
 * accumulators and, after the loop, one call of llvm.vector.reduce.fadd / .fmul that folds the
 * lanes into a scalar. ragjit's loops carry llvm.loop.vectorize.enable, which is what lets the
 * vectoriser reassociate, but the fold it emits carries no fast-math flags (the LLVM-C API of
 * LLVM 16 cannot set them), so code generation keeps the strict lane order: a chain of 16
 * dependent scalar adds for a <16 x float>, ~64 cycles of latency. In a row-wise kernel such as
 * layer_norm over 256 columns, two of those chains per row cost more than the row's memory
 * traffic (bench/ W5).
 *
 * This step rewrites each such call as a tree of half-vector operations (log2 N levels of
 * shuffle + fadd), then the start value. The result is what the vectoriser would have produced
 * with `reassoc`, and it is deterministic: the order depends only on the vector width, never on
 * thread counts or data. The documented tolerances (docs/guide.md) already allow reassociated
 * accumulation; the interpreter computes in double.
 */
#include <string.h>

#include "llvm_backend.h"

/* v folded by op into one scalar, halving the vector at each level. */
static LLVMValueRef tree(LLVMBuilderRef b, LLVMOpcode op, LLVMValueRef v, unsigned n) {
    LLVMContextRef c = LLVMGetTypeContext(LLVMTypeOf(v));
    LLVMTypeRef i32 = LLVMInt32TypeInContext(c);
    while (n > 1) {
        unsigned h = n / 2;
        LLVMValueRef lo[32], hi[32];
        for (unsigned k = 0; k < h; k++) {
            lo[k] = LLVMConstInt(i32, k, 0);
            hi[k] = LLVMConstInt(i32, h + k, 0);
        }
        LLVMValueRef poison = LLVMGetPoison(LLVMTypeOf(v));
        LLVMValueRef a = LLVMBuildShuffleVector(b, v, poison, LLVMConstVector(lo, h), "");
        LLVMValueRef z = LLVMBuildShuffleVector(b, v, poison, LLVMConstVector(hi, h), "");
        v = LLVMBuildBinOp(b, op, a, z, "");
        n = h;
    }
    return LLVMBuildExtractElement(b, v, LLVMConstInt(i32, 0, 0), "");
}

/* The reduction a call performs, or 0 if it is not one this step rewrites. */
static LLVMOpcode reduction_of(LLVMValueRef call) {
    LLVMValueRef callee = LLVMGetCalledValue(call);
    if (!callee || !LLVMIsAFunction(callee)) return 0;
    size_t len;
    const char *name = LLVMGetValueName2(callee, &len);
    if (len > 24 && !strncmp(name, "llvm.vector.reduce.fadd.", 24)) return LLVMFAdd;
    if (len > 24 && !strncmp(name, "llvm.vector.reduce.fmul.", 24)) return LLVMFMul;
    return 0;
}

int llvm_reduce_trees(LLVMModuleRef m) {
    int rewritten = 0;
    LLVMBuilderRef b = LLVMCreateBuilderInContext(LLVMGetModuleContext(m));
    for (LLVMValueRef f = LLVMGetFirstFunction(m); f; f = LLVMGetNextFunction(f))
        for (LLVMBasicBlockRef bb = LLVMGetFirstBasicBlock(f); bb; bb = LLVMGetNextBasicBlock(bb)) {
            LLVMValueRef next;
            for (LLVMValueRef i = LLVMGetFirstInstruction(bb); i; i = next) {
                next = LLVMGetNextInstruction(i);
                LLVMOpcode op = LLVMIsACallInst(i) ? reduction_of(i) : 0;
                if (!op || LLVMGetNumArgOperands(i) != 2) continue;
                LLVMValueRef start = LLVMGetOperand(i, 0), vec = LLVMGetOperand(i, 1);
                LLVMTypeRef vt = LLVMTypeOf(vec);
                if (LLVMGetTypeKind(vt) != LLVMVectorTypeKind) continue;
                unsigned n = LLVMGetVectorSize(vt);
                if (n < 2 || n > 64 || (n & (n - 1))) continue;
                LLVMPositionBuilderBefore(b, i);
                LLVMValueRef r = LLVMBuildBinOp(b, op, start, tree(b, op, vec, n), "");
                LLVMReplaceAllUsesWith(i, r);
                LLVMInstructionEraseFromParent(i);
                rewritten++;
            }
        }
    LLVMDisposeBuilder(b);
    /* the declarations left without callers */
    LLVMValueRef next;
    for (LLVMValueRef f = LLVMGetFirstFunction(m); f; f = next) {
        next = LLVMGetNextFunction(f);
        size_t len;
        const char *name = LLVMGetValueName2(f, &len);
        if (len > 19 && !strncmp(name, "llvm.vector.reduce.", 19) && !LLVMGetFirstUse(f)) LLVMDeleteFunction(f);
    }
    return rewritten;
}
