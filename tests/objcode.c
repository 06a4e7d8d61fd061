/*
 * objcode.c — object files compiled by LLVM from IR text (objcode.h).
 */
#include "objcode.h"

#include <llvm-c/Core.h>
#include <llvm-c/IRReader.h>
#include <llvm-c/Target.h>
#include <llvm-c/TargetMachine.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static unsigned char *fail(char *err, size_t err_size, const char *what, char *msg) {
    snprintf(err, err_size, "%s: %s", what, msg ? msg : "");
    LLVMDisposeMessage(msg);
    return NULL;
}

unsigned char *objcode_compile(const char *ir, size_t *len, char *err, size_t err_size) {
    LLVMInitializeNativeTarget();
    LLVMInitializeNativeAsmPrinter();
    *len = 0;
    char *msg = NULL;
    LLVMContextRef c = LLVMContextCreate();
    LLVMMemoryBufferRef src = LLVMCreateMemoryBufferWithMemoryRangeCopy(ir, strlen(ir), "ir");
    LLVMModuleRef m = NULL;
    if (LLVMParseIRInContext(c, src, &m, &msg)) { /* takes src */
        LLVMContextDispose(c);
        return fail(err, err_size, "parsing the IR", msg);
    }
    char *triple = LLVMGetDefaultTargetTriple(), *cpu = LLVMGetHostCPUName(), *features = LLVMGetHostCPUFeatures();
    LLVMTargetRef target;
    LLVMTargetMachineRef tm = NULL;
    LLVMMemoryBufferRef out = NULL;
    unsigned char *obj = NULL;
    if (LLVMGetTargetFromTriple(triple, &target, &msg)) fail(err, err_size, "no LLVM target", msg);
    else {
        tm = LLVMCreateTargetMachine(target, triple, cpu, features, LLVMCodeGenLevelDefault, LLVMRelocPIC,
                                     LLVMCodeModelSmall);
        LLVMSetTarget(m, triple);
        if (LLVMTargetMachineEmitToMemoryBuffer(tm, m, LLVMObjectFile, &msg, &out))
            fail(err, err_size, "emitting the object", msg);
        else if (!(obj = malloc(LLVMGetBufferSize(out))))
            snprintf(err, err_size, "out of memory");
        else {
            *len = LLVMGetBufferSize(out);
            memcpy(obj, LLVMGetBufferStart(out), *len);
        }
    }
    if (out) LLVMDisposeMemoryBuffer(out);
    if (tm) LLVMDisposeTargetMachine(tm);
    LLVMDisposeModule(m);
    LLVMDisposeMessage(triple);
    LLVMDisposeMessage(cpu);
    LLVMDisposeMessage(features);
    LLVMContextDispose(c);
    return obj;
}
