/*
 * expr.c — expressions, emitted at their use and memoised within one statement.
 *
 * An expression's value is emitted where a statement first needs it and kept (E->cache) until
 * the statement ends, so a subexpression the statement uses twice is computed once. What is
 * remembered is also pushed on a stack (E->stack) that em_forget_to pops to a mark: a guarded
 * load gets its own basic block (em_when_open), and what is emitted inside it is forgotten
 * when the block ends (em_when_close), so a value is never used outside the block that
 * defines it; the vector emitter's guarded loads (vector.c) take the same two calls around
 * their own load. The vector emitter's values go on the same stack, their ids complemented.
 *
 * Inside a lanes loop left to LLVM's loop vectoriser, loads and stores join one access group
 * that the loop lists as llvm.loop.parallel_accesses (stmt.c), so the vectoriser does not guard
 * the vector loop with run-time overlap checks between, say, the accumulators and the stash of
 * one thread's scratch.
 */
#include <llvm-c/IRReader.h>

#include "emit.h"

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

void em_in_group(em *E, LLVMValueRef mem_op) {
    if (E->lanes > 0 && lanes_group(E)) LLVMSetMetadata(mem_op, E->md_group, E->group);
}

static void remember(em *E, int32_t id, LLVMValueRef v) {
    E->cache[id] = v;
    if (!mem_grow(E->ctx, (void **)&E->stack, &E->capstack, E->nstack + 1, sizeof(int32_t))) {
        E->nomem = true;
        return;
    }
    E->stack[E->nstack++] = id;
}

void em_forget_to(em *E, int32_t mark) {
    while (E->nstack > mark) {
        int32_t id = E->stack[--E->nstack];
        if (id >= 0) E->cache[id] = NULL;
        else E->vcache[~id] = NULL; /* a vector value (em_remember_v) */
    }
}

LLVMValueRef em_addr(em *E, int32_t param, int t, LLVMValueRef idx) {
    return LLVMBuildInBoundsGEP2(E->b, mty(E, t), E->args[param], &idx, 1, "");
}

/* Element idx of a buffer parameter (MEM_PARAM) or a local array (MEM_LOCAL). */
LLVMValueRef em_mem_addr(em *E, int mem, int32_t ref, int t, LLVMValueRef idx) {
    if (mem != MEM_LOCAL) return em_addr(E, ref, t, idx);
    return LLVMBuildInBoundsGEP2(E->b, mty(E, t), E->locals[ref], &idx, 1, "");
}

void em_remember_v(em *E, int32_t id, LLVMValueRef v) {
    E->vcache[id] = v;
    if (!mem_grow(E->ctx, (void **)&E->stack, &E->capstack, E->nstack + 1, sizeof(int32_t))) {
        E->nomem = true;
        return;
    }
    E->stack[E->nstack++] = ~id; /* em_forget_to clears vcache for the complemented ids */
}

static LLVMValueRef load(em *E, const lx *e) {
    int t = mem_dtype(E->k, e->fn, e->ref);
    LLVMValueRef p = em_mem_addr(E, e->fn, e->ref, t, em_expr(E, e->a));
    LLVMValueRef v = LLVMBuildLoad2(E->b, mty(E, t), p, "");
    LLVMSetAlignment(v, (unsigned)rj_dtype_size((rj_dtype)t));
    em_in_group(E, v);
    return em_from_mem(E, v, t);
}

/* g ? v : dflt, v computed in a block of its own that only g enters (a guarded load):
 * em_when_open branches on g and leaves the builder in that block, the caller computes v, and
 * em_when_close joins, forgetting what the block computed. */
em_when em_when_open(em *E, LLVMValueRef g) {
    em_when w;
    w.from = LLVMGetInsertBlock(E->b);
    LLVMBasicBlockRef yes = LLVMAppendBasicBlockInContext(E->c, E->fn, "guarded");
    w.join = LLVMAppendBasicBlockInContext(E->c, E->fn, "join");
    LLVMBuildCondBr(E->b, g, yes, w.join);
    LLVMPositionBuilderAtEnd(E->b, yes);
    w.mark = E->nstack;
    return w;
}

LLVMValueRef em_when_close(em *E, const em_when *w, LLVMValueRef v, LLVMValueRef dflt) {
    em_forget_to(E, w->mark);
    LLVMBasicBlockRef yes_end = LLVMGetInsertBlock(E->b);
    LLVMBuildBr(E->b, w->join);
    LLVMPositionBuilderAtEnd(E->b, w->join);
    LLVMValueRef phi = LLVMBuildPhi(E->b, LLVMTypeOf(v), "");
    LLVMAddIncoming(phi, (LLVMValueRef[]){v, dflt}, (LLVMBasicBlockRef[]){yes_end, w->from}, 2);
    return phi;
}

static LLVMValueRef guarded_load(em *E, const lx *e) {
    LLVMValueRef g = em_expr(E, e->b), dflt = em_expr(E, e->c);
    em_when w = em_when_open(E, g);
    return em_when_close(E, &w, load(E, e), dflt);
}

LLVMValueRef em_expr(em *E, int32_t id) {
    if (E->cache[id]) return E->cache[id];
    const lx *e = &E->k->ex[id];
    LLVMValueRef v;
    switch (e->kind) {
    case LX_CONST: v = isf(e->type) ? fconst(E, e->type, e->f) : iconst(E, e->type, e->i); break;
    case LX_PARAM: v = E->args[e->ref]; break;
    case LX_VAR: v = LLVMBuildLoad2(E->b, vty(E, e->type), E->vars[e->ref], ""); break;
    case LX_LOAD: v = e->b >= 0 ? guarded_load(E, e) : load(E, e); break;
    case LX_UNARY: v = em_unary(E, e->fn, e->type, em_expr(E, e->a)); break;
    case LX_BINARY:
        v = em_binary(E, e->fn, e->type, em_expr(E, e->a), em_expr(E, e->b), e->c >= 0 ? em_expr(E, e->c) : NULL);
        break;
    case LX_CMP: v = em_compare(E, e->fn, E->k->ex[e->a].type, em_expr(E, e->a), em_expr(E, e->b)); break;
    case LX_SELECT: v = LLVMBuildSelect(E->b, em_expr(E, e->a), em_expr(E, e->b), em_expr(E, e->c), ""); break;
    default: v = em_convert(E, em_expr(E, e->a), E->k->ex[e->a].type, e->type); break;
    }
    remember(E, id, v);
    return v;
}
