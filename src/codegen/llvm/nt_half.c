/*
 * nt_half.c — non-temporal stores of f16 vectors, after optimisation.
 *
 * A streamed f16 output is stored as 16-bit integers with !nontemporal (vector.c). Where the
 * CPU has AVX512-FP16, instcombine folds the integers' bitcast into the store, which then
 * stores a vector of half; LLVM 16's x86 back end has no non-temporal pattern for that type
 * and emits a plain store, so the row is read into the cache before it is written (a third
 * more traffic than a streamed one). A store of the bits as integers is folded back the same
 * way by the back end's DAG combiner, so this step (x86 only) writes each such store as the
 * instruction itself, `vmovntdq` of the same bits (SSE2/AVX/AVX-512 by the vector's width),
 * in inline assembly, which nothing folds.
 */
#include "llvm_backend.h"

static void flush(LLVMValueRef *dead, int *n) {
    for (int k = 0; k < *n; k++) LLVMInstructionEraseFromParent(dead[k]);
    *n = 0;
}

int llvm_nt_half_stores(LLVMModuleRef m, unsigned md_nt) {
    int rewritten = 0, ndead = 0;
    LLVMValueRef dead[64];
    LLVMContextRef c = LLVMGetModuleContext(m);
    LLVMBuilderRef b = LLVMCreateBuilderInContext(c);
    for (LLVMValueRef f = LLVMGetFirstFunction(m); f; f = LLVMGetNextFunction(f))
        for (LLVMBasicBlockRef bb = LLVMGetFirstBasicBlock(f); bb; bb = LLVMGetNextBasicBlock(bb))
            for (LLVMValueRef i = LLVMGetFirstInstruction(bb); i; i = LLVMGetNextInstruction(i)) {
                if (!LLVMIsAStoreInst(i) || !LLVMGetMetadata(i, md_nt)) continue;
                LLVMValueRef v = LLVMGetOperand(i, 0);
                LLVMTypeRef vt = LLVMTypeOf(v);
                if (LLVMGetTypeKind(vt) != LLVMVectorTypeKind || LLVMGetTypeKind(LLVMGetElementType(vt)) != LLVMHalfTypeKind)
                    continue;
                unsigned bitsz = LLVMGetVectorSize(vt) * 16;
                if (bitsz != 128 && bitsz != 256 && bitsz != 512) continue;
                LLVMPositionBuilderBefore(b, i);
                LLVMTypeRef it = LLVMVectorType(LLVMInt64TypeInContext(c), bitsz / 64);
                LLVMValueRef args[2] = {LLVMGetOperand(i, 1), LLVMBuildBitCast(b, v, it, "")};
                LLVMTypeRef params[2] = {LLVMTypeOf(args[0]), it};
                LLVMTypeRef fty = LLVMFunctionType(LLVMVoidTypeInContext(c), params, 2, 0);
                static const char code[] = "vmovntdq $1, ($0)", cons[] = "r,v,~{memory}";
                LLVMValueRef asm_ = LLVMGetInlineAsm(fty, (char *)code, sizeof code - 1, (char *)cons, sizeof cons - 1, 1, 0,
                                                     LLVMInlineAsmDialectATT, 0);
                LLVMBuildCall2(b, fty, asm_, args, 2, "");
                dead[ndead++] = i;
                rewritten++;
                if (ndead == 64) flush(dead, &ndead);
            }
    flush(dead, &ndead);
    LLVMDisposeBuilder(b);
    return rewritten;
}
