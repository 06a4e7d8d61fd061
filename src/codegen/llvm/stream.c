/*
 * stream.c — streaming stores: outputs written once, past the caches.
 *
 * A run whose nt flag is set asks for non-temporal stores of its outputs. An unaligned
 * !nontemporal store would stop a loop from vectorising, so a store is never streamed where it
 * is emitted (stmt.c). Instead, a lanes loop whose streaming stores are unit-stride and of 2-, 4- or
 * 8-byte elements (em_stageable) tests, row by row, whether its row suits streaming
 * (em_stream_test): a loop of a constant extent that the vector emitter takes stores aligned
 * rows directly as aligned non-temporal vector stores (vector.c); another loop is staged: its
 * body runs as usual (and vectorises as usual) with the streaming stores redirected to small
 * buffers in L1, which are flushed in chunks with non-temporal stores for their whole cache
 * lines (rt.c: rj.ntcopy). A row that suits neither, and every row of a run without the flag,
 * is a plain loop.
 *
 * This file builds what is particular to streaming, the test and the staging around a chunk;
 * the loops themselves, whose bodies are ordinary statements, are emitted by stmt.c
 * (stream_for), which calls these pieces in order and puts its loops between them.
 */
#include "emit.h"

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
/* em_stream_test stages a row that is not whole aligned cache lines only from this many bytes */
#define STAGE_LONG_ROW 2048

/* Can the innermost loop's streaming stores be staged? They must be unit-stride along the
 * loop and of 2-, 4- or 8-byte elements (f16 and bf16 outputs stream too: without it their
 * stores read every line before writing it, a third more traffic than f32's streamed rows). */
bool em_stageable(em *E, const ls *loop) {
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
        if ((es != 2 && es != 4 && es != 8) || !unit_stride(E, st->a, loop->var, seen, &mark) || count == 8) ok = false;
        count++;
    }
    mem_free(E->ctx, seen, n);
    return ok && count > 0;
}

/* Staging (em_stream_test's staged rows), in chunks of STAGE_CHUNK iterations: the body runs as
 * usual (and vectorises as usual) with its streaming stores redirected to L1 buffers; each
 * chunk is then flushed to memory, with aligned non-temporal stores for its whole cache lines.
 * em_stage_open allocates the buffers and opens the loop over chunks; the caller emits the loop
 * over the chunk's iterations [sg->d0, sg->d1); em_stage_close flushes the chunk and closes. */
void em_stage_open(em *E, const ls *st, LLVMValueRef lo, LLVMValueRef hi, em_stage *sg) {
    LLVMBuilderRef b = E->b;
    const lkernel *k = E->k;
    LLVMTypeRef i64 = vty(E, RJ_I64);
    sg->d0v = em_entry_alloca(E, i64, "d0");
    E->nstage = 0;
    for (int32_t s = st->body; s >= 0; s = k->st[s].next) {
        const ls *x = &k->st[s];
        if (x->kind != LS_STORE || !(x->flags & LF_NT)) continue;
        int q = E->nstage++;
        E->stage_stmt[q] = s;
        E->stage_buf[q] = em_entry_alloca(E, LLVMArrayType(mty(E, k->params[x->ref].dtype), STAGE_CHUNK), "stage");
    }
    sg->head = sg->exit = NULL;
    /* one chunk, and no loop, where the bounds are constants at most a chunk apart */
    const lx *clo = &k->ex[st->a], *chi = &k->ex[st->b];
    bool one = clo->kind == LX_CONST && chi->kind == LX_CONST && chi->i - clo->i <= STAGE_CHUNK;
    sg->d0 = one ? lo : em_loop_open(E, sg->d0v, lo, hi, "chunk", &sg->head, &sg->exit);
    sg->end = LLVMBuildAdd(b, sg->d0, iconst(E, RJ_I64, STAGE_CHUNK), "");
    sg->d1 = one ? hi : LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSLT, sg->end, hi, ""), sg->end, hi, "");
    E->stage_d0 = sg->d0;
}

void em_stage_close(em *E, const ls *st, const em_stage *sg) {
    LLVMBuilderRef b = E->b;
    const lkernel *k = E->k;
    int nstage = E->nstage;
    E->nstage = 0;
    /* flush: destination of element d0 of each staged store */
    LLVMBuildStore(b, sg->d0, E->vars[st->var]);
    em_forget_to(E, 0);
    for (int q = 0; q < nstage; q++) {
        const ls *x = &k->st[E->stage_stmt[q]];
        size_t es = rj_dtype_size((rj_dtype)k->params[x->ref].dtype);
        LLVMValueRef dst = em_addr(E, x->ref, k->params[x->ref].dtype, em_expr(E, x->a));
        LLVMValueRef args[4] = {dst, E->stage_buf[q], LLVMBuildSub(b, sg->d1, sg->d0, ""), E->args[E->ntp]};
        ml_call(&E->ml, b, es == 2 ? ML_NTCOPY2 : es == 4 ? ML_NTCOPY4 : ML_NTCOPY8, args, 4);
        em_forget_to(E, 0);
    }
    if (!sg->head) return;
    LLVMBuildStore(b, sg->end, sg->d0v);
    LLVMBuildBr(b, sg->head);
    LLVMPositionBuilderAtEnd(b, sg->exit);
}

/* Does this row of a lanes loop with streaming stores (em_stageable) stream? Run once per row
 * of an output (an elementwise kernel's row of D, a softmax's tile of a row), the test is false
 * where the run's nt flag is clear, and where it is set, true if the row suits streaming. A
 * loop of a constant extent that is a multiple of the vector width streams directly
 * (*direct), as aligned non-temporal vector stores, when every streaming store's first lane
 * lies on a vector's alignment (at most a register's); em_vector_plan has then planned it, and
 * *vloop is the E->vloop to emit it with. Any other loop is staged (em_stage_open) when its row
 * is whole aligned cache lines or at least STAGE_LONG_ROW bytes. Every other row is a plain
 * loop. Staging costs a call per row, which clobbers every vector register, and the part lines
 * at either end of a row are copied element by element: a short unaligned row lost more that
 * way than streaming saved (bench/NOTES.md, "Streaming rows"). */
LLVMValueRef em_stream_test(em *E, const ls *st, LLVMValueRef lo, LLVMValueRef hi, bool *direct, int32_t *vloop) {
    const lkernel *k = E->k;
    LLVMBuilderRef b = E->b;
    const lx *clo = &k->ex[st->a], *chi = &k->ex[st->b];
    bool dir = clo->kind == LX_CONST && chi->kind == LX_CONST && chi->i > clo->i;
    for (int32_t s = st->body; dir && s >= 0; s = k->st[s].next)
        if (k->st[s].kind != LS_STORE && k->st[s].kind != LS_SET) dir = false;
    if (dir && !em_vector_plan(E, st)) dir = false;
    *vloop = E->vloop;
    if (dir && (chi->i - clo->i) % E->vf) dir = false;
    E->vloop = -1;
    LLVMTypeRef i64 = vty(E, RJ_I64);
    LLVMValueRef zero = LLVMConstInt(i64, 0, 0), ok = LLVMBuildICmp(b, LLVMIntNE, E->args[E->ntp], zero, "");
    /* direct: every row aligned to a vector; staged: every row whole aligned lines, or long */
    LLVMValueRef cnt = LLVMBuildSub(b, hi, lo, ""), lines = ok, longrow = ok;
    LLVMBuildStore(b, lo, E->vars[st->var]);
    em_forget_to(E, 0);
    for (int32_t s = st->body; s >= 0; s = k->st[s].next) {
        const ls *x = &k->st[s];
        if (x->kind != LS_STORE || !(x->flags & LF_NT)) continue;
        int t = k->params[x->ref].dtype;
        LLVMValueRef es = LLVMConstInt(i64, rj_dtype_size((rj_dtype)t), 0);
        LLVMValueRef at = LLVMBuildPtrToInt(b, em_addr(E, x->ref, t, em_expr(E, x->a)), i64, "");
        if (dir) {
            LLVMValueRef low = LLVMBuildAnd(b, at, LLVMConstInt(i64, em_nt_align(E, t) - 1, 0), "");
            ok = LLVMBuildAnd(b, ok, LLVMBuildICmp(b, LLVMIntEQ, low, zero, ""), "");
            continue;
        }
        LLVMValueRef bytes = LLVMBuildMul(b, cnt, es, ""), line = LLVMConstInt(i64, 63, 0);
        LLVMValueRef whole = LLVMBuildOr(b, LLVMBuildAnd(b, at, line, ""), LLVMBuildAnd(b, bytes, line, ""), "");
        lines = LLVMBuildAnd(b, lines, LLVMBuildICmp(b, LLVMIntEQ, whole, zero, ""), "");
        longrow = LLVMBuildAnd(b, longrow, LLVMBuildICmp(b, LLVMIntSGE, bytes, LLVMConstInt(i64, STAGE_LONG_ROW, 0), ""), "");
    }
    *direct = dir;
    return dir ? ok : LLVMBuildOr(b, lines, longrow, "");
}
