/*
 * flow.c — the control flow the statement emitters share.
 *
 * The scalar statements (stmt.c), the vector ones (vector.c) and the streaming rows
 * (stream.c) build the same few shapes: allocas in the function's entry block, where mem2reg
 * promotes them; the head of a counted loop over an alloca'd variable; and an if/else whose
 * two blocks join. The shapes live here, below all three, and each caller emits what goes
 * inside them itself: an if/else is opened, given its blocks by the caller, and closed.
 */
#include <stdio.h>

#include "emit.h"

LLVMValueRef em_entry_alloca(em *E, LLVMTypeRef t, const char *name) {
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
 * caller closes the loop: advances var, branches back to *head and goes on in *exit. */
LLVMValueRef em_loop_open(em *E, LLVMValueRef var, LLVMValueRef lo, LLVMValueRef hi, const char *name,
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

/* if (cond) {: branches on expression cond and leaves the builder in the then block. */
em_if em_if_open(em *E, int32_t cond) {
    LLVMValueRef c = em_expr(E, cond);
    LLVMBasicBlockRef yes = LLVMAppendBasicBlockInContext(E->c, E->fn, "then");
    em_if r;
    r.no = LLVMAppendBasicBlockInContext(E->c, E->fn, "else");
    r.join = LLVMAppendBasicBlockInContext(E->c, E->fn, "endif");
    LLVMBuildCondBr(E->b, c, yes, r.no);
    LLVMPositionBuilderAtEnd(E->b, yes);
    return r;
}

/* } else {: the builder goes on in the else block. */
void em_if_else(em *E, const em_if *r) {
    LLVMBuildBr(E->b, r->join);
    LLVMPositionBuilderAtEnd(E->b, r->no);
}

/* }: the builder goes on after the join. */
void em_if_close(em *E, const em_if *r) {
    LLVMBuildBr(E->b, r->join);
    LLVMPositionBuilderAtEnd(E->b, r->join);
}
