/*
 * stmt.c — statements and loops.
 *
 * Each statement is a few instructions: SET stores to its variable's alloca, REDUCE is the
 * accumulation v = v op e (an fma for LF_FMA), STORE writes one element (an atomic minimum for
 * LF_ATOMIC_MIN, where workers may meet), IF branches to two blocks that join, and FOR is a
 * canonical counted loop (the shapes are flow.c's). The parallel mappings need nothing else
 * on a CPU: `units` and `serial` loops are plain loops (the runtime hands each thread its unit
 * range), a `reduce` is the accumulation (the vectoriser splits v across the lanes and
 * combines the partial values after the loop), and `barrier` orders nothing, a block being
 * one thread.
 *
 * A lanes loop is vector code from the start where the vector emitter takes it (vplan.c,
 * vector.c). Where a run may stream its stores, stream_for tests each row and emits the loop
 * twice, streaming and plain, with stream.c's test and staging around the loops emitted here:
 * this file is the emitter's one recursion (a loop's body is statements), and the files it
 * calls never call back. A loop the vector emitter does not take (a nested loop, a branch on a
 * value that differs between lanes) is a scalar loop for LLVM's loop vectoriser: a
 * floating-point accumulation carries llvm.loop.vectorize.enable (which lets it reassociate the
 * sum), and the loop lists the access group of its loads and stores (expr.c) as
 * llvm.loop.parallel_accesses.
 */
#include <llvm-c/DebugInfo.h>

#include "emit.h"

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

/* Copies of the vector body a lanes loop gets. Two: the out-of-order core overlaps two
 * independent chains (softmax's exp polynomial is some 15 dependent vector operations) where
 * it found too little work in one; four gained no more
 * (bench/NOTES.md, "Interleaved lanes loops"). */
#define LANES_INTERLEAVE 2

/* for var in [lo, hi) { body }: a canonical counted loop over an alloca'd induction variable. */
static void counted_loop(em *E, const ls *st, LLVMValueRef lo, LLVMValueRef hi) {
    LLVMBuilderRef b = E->b;
    if (st->map == LM_LANES) {
        if (em_vector_plan(E, st)) {
            E->nvec++;
            em_vector_loop(E, st, lo, hi);
            return;
        }
        E->nscalar++;
    }
    LLVMValueRef var = E->vars[st->var];
    LLVMBasicBlockRef head, exit;
    LLVMValueRef i = em_loop_open(E, var, lo, hi, "loop", &head, &exit);
    if (E->nstage) E->stage_idx = i;
    E->lanes += st->map == LM_LANES;
    em_block(E, st->body);
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

/* A lanes loop whose stores may stream (stream.c), tested row by row: where the row streams,
 * the loop as aligned non-temporal vector stores or staged in chunks; elsewhere the plain
 * loop. */
static void stream_for(em *E, const ls *st, LLVMValueRef lo, LLVMValueRef hi) {
    LLVMBuilderRef b = E->b;
    bool direct;
    int32_t vloop;
    LLVMValueRef ok = em_stream_test(E, st, lo, hi, &direct, &vloop);
    LLVMBasicBlockRef nt = LLVMAppendBasicBlockInContext(E->c, E->fn, "nt");
    LLVMBasicBlockRef plain = LLVMAppendBasicBlockInContext(E->c, E->fn, "nt.plain");
    LLVMBasicBlockRef join = LLVMAppendBasicBlockInContext(E->c, E->fn, "nt.join");
    LLVMBuildCondBr(b, ok, nt, plain);
    LLVMPositionBuilderAtEnd(b, nt);
    em_forget_to(E, 0);
    if (direct) {
        E->vloop = vloop;
        E->nt_direct = true;
        em_vector_loop(E, st, lo, hi);
        E->nt_direct = false;
    } else {
        em_stage sg;
        em_stage_open(E, st, lo, hi, &sg);
        counted_loop(E, st, sg.d0, sg.d1);
        em_stage_close(E, st, &sg);
    }
    LLVMBuildBr(b, join);
    LLVMPositionBuilderAtEnd(b, plain);
    em_forget_to(E, 0);
    if (direct) {
        E->vloop = vloop;
        em_vector_loop(E, st, lo, hi);
        E->nvec++;
    } else {
        counted_loop(E, st, lo, hi);
    }
    LLVMBuildBr(b, join);
    LLVMPositionBuilderAtEnd(b, join);
    em_forget_to(E, 0);
    E->used_nt = true;
}

static void stmt(em *E, const ls *st) {
    LLVMBuilderRef b = E->b;
    const lkernel *k = E->k;
    em_forget_to(E, 0);
    switch (st->kind) {
    case LS_SET: {
        LLVMValueRef v = em_expr(E, st->a);
        LLVMBuildStore(b, v, E->vars[st->var]);
        break;
    }
    case LS_REDUCE: { /* v = v fn e, as the assignment compiles */
        LLVMValueRef v;
        int t = k->vars[st->var].type;
        if (st->flags & LF_FMA) {
            LLVMValueRef acc = LLVMBuildLoad2(b, vty(E, t), E->vars[st->var], "");
            LLVMValueRef y = em_expr(E, st->b), x = em_expr(E, st->a);
            v = em_binary(E, LOP_FMA, t, x, y, acc);
        } else {
            LLVMValueRef x = em_expr(E, st->a);
            LLVMValueRef acc = LLVMBuildLoad2(b, vty(E, t), E->vars[st->var], "");
            v = em_binary(E, st->fn, t, acc, x, NULL);
        }
        LLVMBuildStore(b, v, E->vars[st->var]);
        break;
    }
    case LS_BARRIER: break; /* a CPU block is one thread */
    case LS_STORE: {
        int t = st->mem == MEM_LOCAL ? k->locals[st->ref].dtype : k->params[st->ref].dtype;
        LLVMValueRef v = em_to_mem_held(E, em_expr(E, st->b), t, st->flags & LF_HELD);
        int sq = -1;
        for (int q = 0; q < E->nstage; q++)
            if (&k->st[E->stage_stmt[q]] == st) sq = q;
        if (sq >= 0) {
            LLVMValueRef off = LLVMBuildSub(b, E->stage_idx, E->stage_d0, "");
            LLVMValueRef sp = LLVMBuildInBoundsGEP2(b, mty(E, t), E->stage_buf[sq], &off, 1, "");
            LLVMSetAlignment(LLVMBuildStore(b, v, sp), (unsigned)rj_dtype_size((rj_dtype)t));
            break;
        }
        LLVMValueRef p = em_mem_addr(E, st->mem, st->ref, t, em_expr(E, st->a));
        if (st->flags & LF_ATOMIC_MIN) { /* workers may meet here: one read-modify-write */
            LLVMBuildAtomicRMW(b, LLVMAtomicRMWBinOpMin, p, v, LLVMAtomicOrderingMonotonic, 0);
            break;
        }
        LLVMValueRef sv = LLVMBuildStore(b, v, p);
        LLVMSetAlignment(sv, (unsigned)rj_dtype_size((rj_dtype)t));
        em_in_group(E, sv);
        break; /* streaming happens only through stream_for: an unaligned !nontemporal store
                * would stop the loop from vectorising */
    }
    case LS_IF: {
        em_if r = em_if_open(E, st->a);
        em_block(E, st->body);
        em_if_else(E, &r);
        em_block(E, st->els);
        em_if_close(E, &r);
        break;
    }
    case LS_FOR: {
        LLVMValueRef lo = em_expr(E, st->a), hi = em_expr(E, st->b);
        if (E->ntp >= 0 && st->map == LM_LANES && em_stageable(E, st)) {
            stream_for(E, st, lo, hi);
        } else {
            counted_loop(E, st, lo, hi);
        }
        break;
    }
    }
    em_forget_to(E, 0);
}

void em_block(em *E, int32_t s) {
    for (; s >= 0 && !E->fail && !E->nomem; s = E->k->st[s].next) stmt(E, &E->k->st[s]);
}
