/*
 * widen16.c — 16-bit vectors that every unit reads alike, widened once per call (CPU).
 *
 * A load from an f16 or bf16 buffer is an f32 in the loop IR: the backend widens it where it
 * is read. Many kernels read the same short vector in every unit of their units loop —
 * layer_norm's weight and bias, a bias added to every row, a per-column scale — as w[t] in a
 * lanes loop of constant extent. Widened in every unit, such a vector costs two or three
 * vector instructions a step per operand, as much as the arithmetic of layer_norm's write
 * pass, and the loop's lanes may be kept in even/odd order for it (llvm/vplan.c). This pass
 * gives each such buffer a thread-local f32 copy, filled at the top of the kernel (once per
 * call, that is per chunk of units the runtime hands a thread), and the loads read the copy,
 * an f32 vector with nothing to widen. The values are the same (widening is exact), so the
 * results are the same bit for bit.
 *
 * A load is staged when it is not guarded, reads a 16-bit buffer the kernel does not write and
 * whose dims are all constants, at index t or t + c (c a constant), t the variable of a lanes
 * loop of constant bounds; an expression is shared by every statement that uses it, so every
 * use must be such a load (the copy spans the indices they reach, which the buffer holds), and
 * one of them must be inside a units loop (elsewhere it runs once a call anyway). The copies
 * take at most STAGE_MAX elements in all, on the stack of the thread running the kernel.
 * SIMT targets keep their loads: a copy per thread there would be registers or shared memory
 * and a barrier, not a saving.
 */
#include <stdio.h>

#include "loopir.h"

#define STAGE_MAX 8192 /* elements staged per kernel: 32 KiB of stack */
#define MAX_LANES 16   /* enclosing lanes loops tracked */

typedef struct cand {
    int32_t ex;     /* the load */
    int64_t lo, hi; /* indices its uses reach */
    bool bad;       /* some use is not a stageable one */
    bool hot;       /* some use is inside a units loop */
} cand;

typedef struct wctx {
    const lprog *p;
    lkernel *k;
    struct {
        int32_t var;
        int64_t lo, hi;
    } lanes[MAX_LANES];
    int nl;
    bool in_units;
    cand *c;
    int32_t nc, capc;
    int32_t *slot;   /* per expression: its entry in c + 1, or 0 */
    uint32_t *seen, mark;
    bool nomem;
} wctx;

/* Is load e one this pass may stage, whatever its index? */
static bool stageable_load(const wctx *W, const lx *e) {
    if (e->kind != LX_LOAD || e->fn != MEM_PARAM || e->b >= 0) return false;
    const lparam *pa = &W->k->params[e->ref];
    if (pa->kind != PK_BUF || pa->written || (pa->dtype != RJ_F16 && pa->dtype != RJ_BF16)) return false;
    const lbuf *bf = &W->p->bufs[pa->ref];
    for (int d = 0; d < bf->rank; d++)
        if (bf->dims[d] < 0) return false;
    return true;
}

/* The elements of the buffer a stageable load reads. */
static int64_t buf_elems(const wctx *W, const lx *e) {
    const lbuf *bf = &W->p->bufs[W->k->params[e->ref].ref];
    int64_t n = 1;
    for (int d = 0; d < bf->rank; d++) n *= bf->dims[d];
    return n;
}

/* The indices index expression a reaches in the current loops: t + c, t an enclosing lanes
 * loop's variable of constant bounds. */
static bool index_range(const wctx *W, int32_t a, int64_t *lo, int64_t *hi) {
    const lkernel *k = W->k;
    const lx *e = &k->ex[a];
    int32_t var = -1;
    int64_t c = 0;
    if (e->kind == LX_VAR) {
        var = e->ref;
    } else if (e->kind == LX_BINARY && e->fn == RJ_OP_ADD && e->type == RJ_I64) {
        const lx *x = &k->ex[e->a], *y = &k->ex[e->b];
        if (x->kind == LX_CONST) {
            const lx *s = x;
            x = y, y = s;
        }
        if (x->kind != LX_VAR || y->kind != LX_CONST) return false;
        var = x->ref, c = y->i;
    } else {
        return false;
    }
    for (int i = W->nl - 1; i >= 0; i--)
        if (W->lanes[i].var == var) {
            *lo = W->lanes[i].lo + c, *hi = W->lanes[i].hi + c;
            return true;
        }
    return false;
}

static cand *cand_of(wctx *W, int32_t id) {
    if (W->slot[id]) return &W->c[W->slot[id] - 1];
    if (!mem_grow(W->k->ctx, (void **)&W->c, &W->capc, W->nc + 1, sizeof(cand))) {
        W->nomem = true;
        return NULL;
    }
    cand *c = &W->c[W->nc++];
    *c = (cand){.ex = id, .lo = INT64_MAX, .hi = INT64_MIN};
    W->slot[id] = W->nc;
    return c;
}

/* Expression id as used by the current statement (its loops: W->lanes, W->in_units). A
 * guarded load's operands are not entered: what it reads may be read only when its guard
 * holds, and a load there is left alone (marked bad). */
static void scan_expr(wctx *W, int32_t id, bool guarded) {
    if (id < 0 || W->nomem) return;
    if (W->seen[id] == W->mark && !guarded) return;
    W->seen[id] = W->mark;
    const lx *e = &W->k->ex[id];
    if (stageable_load(W, e)) {
        cand *c = cand_of(W, id);
        int64_t lo, hi;
        if (!c) return;
        if (guarded || !index_range(W, e->a, &lo, &hi) || lo < 0 || hi > buf_elems(W, e)) {
            c->bad = true;
        } else {
            if (lo < c->lo) c->lo = lo;
            if (hi > c->hi) c->hi = hi;
            c->hot |= W->in_units;
        }
    }
    int32_t kids[3];
    int n = lx_children(e, kids);
    bool g = guarded || (e->kind == LX_LOAD && e->b >= 0);
    for (int i = 0; i < n; i++) scan_expr(W, kids[i], g);
}

static void scan_block(wctx *W, int32_t s) {
    const lkernel *k = W->k;
    for (; s >= 0 && !W->nomem; s = k->st[s].next) {
        const ls *st = &k->st[s];
        int32_t ex[2];
        int ne = ls_exprs(st, ex);
        W->mark++;
        for (int i = 0; i < ne; i++) scan_expr(W, ex[i], false);
        if (st->kind == LS_IF) {
            scan_block(W, st->body);
            scan_block(W, st->els);
        } else if (st->kind == LS_FOR) {
            bool units = W->in_units, pushed = false;
            const lx *lo = &k->ex[st->a], *hi = &k->ex[st->b];
            if (st->map == LM_UNITS) W->in_units = true;
            if (st->map == LM_LANES && lo->kind == LX_CONST && hi->kind == LX_CONST && W->nl < MAX_LANES) {
                W->lanes[W->nl].var = st->var;
                W->lanes[W->nl].lo = lo->i;
                W->lanes[W->nl++].hi = hi->i;
                pushed = true;
            }
            scan_block(W, st->body);
            if (pushed) W->nl--;
            W->in_units = units;
        }
    }
}

/* Stages param's loads among the n candidates c (those kept: not bad, hot) over indices
 * [lo, hi): one local of hi elements, filled at [lo, hi) by a lanes loop put at the top of the
 * kernel. */
static rj_status stage_param(lkernel *k, const cand *c, int32_t n, int32_t param, int64_t lo, int64_t hi) {
    char name[24];
    snprintf(name, sizeof name, "%.18s_f32", k->params[param].name);
    int32_t loc = lk_local(k, name, LL_THREAD, RJ_F32), var = lk_var(k, "ws", RJ_I64);
    if (loc < 0 || var < 0) return RJ_ERR_NOMEM;
    k->locals[loc].elems = hi;
    lx vx = {.kind = LX_VAR, .type = RJ_I64, .a = -1, .b = -1, .c = -1, .ref = var};
    int32_t iv = lk_expr(k, &vx);
    lx ld = {.kind = LX_LOAD, .type = RJ_F32, .fn = MEM_PARAM, .a = iv, .b = -1, .c = -1, .ref = param};
    int32_t val = iv < 0 ? -1 : lk_expr(k, &ld);
    lx cl = {.kind = LX_CONST, .type = RJ_I64, .a = -1, .b = -1, .c = -1, .ref = -1, .i = lo};
    lx ch = cl;
    ch.i = hi;
    int32_t elo = lk_expr(k, &cl), ehi = lk_expr(k, &ch);
    if (val < 0 || elo < 0 || ehi < 0) return RJ_ERR_NOMEM;
    ls store = {.kind = LS_STORE, .mem = MEM_LOCAL, .a = iv, .b = val, .ref = loc, .body = -1, .els = -1};
    int32_t sst = lk_stmt(k, &store);
    ls loop = {.kind = LS_FOR, .map = LM_LANES, .var = var, .a = elo, .b = ehi, .ref = -1, .body = sst, .els = -1};
    int32_t fst = sst < 0 ? -1 : lk_stmt(k, &loop);
    if (fst < 0) return RJ_ERR_NOMEM;
    k->st[fst].next = k->body;
    k->body = fst;
    /* the loads become loads of the copy, in place (every statement using them sees it) */
    for (int32_t i = 0; i < n; i++)
        if (!c[i].bad && c[i].hot && k->ex[c[i].ex].ref == param) {
            k->ex[c[i].ex].fn = MEM_LOCAL;
            k->ex[c[i].ex].ref = loc;
        }
    return RJ_OK;
}

static rj_status widen_kernel(const lprog *p, lkernel *k) {
    if (k->body < 0 || k->nex == 0) return RJ_OK;
    wctx W = {.p = p, .k = k};
    W.slot = mem_zalloc(k->ctx, sizeof(int32_t) * (size_t)k->nex);
    W.seen = mem_zalloc(k->ctx, sizeof(uint32_t) * (size_t)k->nex);
    rj_status s = RJ_OK;
    if (!W.slot || !W.seen) s = RJ_ERR_NOMEM;
    int32_t nex = k->nex;
    if (!s) scan_block(&W, k->body);
    if (W.nomem) s = RJ_ERR_NOMEM;
    /* per buffer: the span of its staged loads, while the copies fit */
    int64_t total = 0;
    for (int32_t i = 0; !s && i < W.nc; i++) {
        const cand *ci = &W.c[i];
        int32_t param = k->ex[ci->ex].ref;
        if (ci->bad || !ci->hot || k->ex[ci->ex].fn != MEM_PARAM) continue; /* or staged already */
        int64_t lo = INT64_MAX, hi = INT64_MIN;
        for (int32_t j = i; j < W.nc; j++) {
            const cand *cj = &W.c[j];
            if (cj->bad || !cj->hot || k->ex[cj->ex].fn != MEM_PARAM || k->ex[cj->ex].ref != param) continue;
            if (cj->lo < lo) lo = cj->lo;
            if (cj->hi > hi) hi = cj->hi;
        }
        if (hi <= lo || total + hi > STAGE_MAX) continue;
        total += hi;
        s = stage_param(k, W.c, W.nc, param, lo, hi);
    }
    mem_free(k->ctx, W.slot, sizeof(int32_t) * (size_t)nex);
    mem_free(k->ctx, W.seen, sizeof(uint32_t) * (size_t)nex);
    mem_free(k->ctx, W.c, sizeof(cand) * (size_t)W.capc);
    return s;
}

rj_status pass_widen16(lprog *p, const target_desc *desc) {
    if (desc->simt) return RJ_OK;
    for (int32_t i = 0; i < p->nkernels; i++) {
        rj_status s = widen_kernel(p, &p->kernels[i]);
        if (s) return s;
    }
    return RJ_OK;
}
