/*
 * vplan.c — which lanes loops are emitted as vector code, and how wide.
 *
 * A lanes loop whose body is straight-line code (assignments, stores, reductions, branches on
 * values the same in every lane) is emitted as vector code (vector.c) rather than left to
 * LLVM's loop vectoriser. What the vectoriser would find out, the loop IR already says: the
 * iterations are independent (loopir.h: the SIMT targets run them on different threads), and
 * the loads and stores along the lanes are contiguous (unit stride). em_vector_plan decides
 * whether a loop qualifies and classifies what the emitter needs.
 *
 * Each expression is uniform (the same in every lane: computed once, as a scalar) or varying
 * (a vector). A variable set in the loop is private to a lane (a vector); a variable the loop
 * only reduces into (REDUCE directly in its body) keeps a vector of partial results that is
 * folded into the variable after the loop; a private variable set once, at the top of the body,
 * to t + (uniform terms) is an index along the lanes. Anything else (a nested loop, a branch on
 * a varying value, an atomic store, an integer power, a reduction without an identity, a
 * reduced variable read inside the loop, a private one read after it) leaves the loop to
 * LLVM's vectoriser. A step covers two vector registers of the widest element the loop loads,
 * stores or reduces, halved while the loop has fewer lanes than that.
 *
 * A loop that reads and writes bf16 along the lanes may keep them in even/odd order (E->vpair,
 * half.c): widening a bf16 vector is then a shift and an and instead of a port-5 shuffle and a
 * shift. It qualifies when nothing sees the order: every access unit-stride (bf16, or 4-byte
 * elements, which are shuffled into that order and back, so bf16 ones must outnumber them),
 * no guard that varies by lane, no lane position used as a value.
 */
#include <string.h>

#include "emit.h"

bool em_varying(em *E, int32_t id) {
    uint8_t *c = &E->vclass[id];
    if (*c) return *c == VC_VARYING;
    const lx *e = &E->k->ex[id];
    bool v = false;
    if (e->kind == LX_VAR) {
        v = e->ref == E->vloop || E->vvar[e->ref] != VV_UNIFORM;
    } else {
        int32_t kids[3];
        int n = lx_children(e, kids);
        for (int i = 0; i < n && !v; i++) v = em_varying(E, kids[i]);
    }
    *c = v ? VC_VARYING : VC_UNIFORM;
    return v;
}

/* Is e = t + (uniform terms), t the loop's variable: consecutive lanes, consecutive elements? */
bool em_vunit(em *E, int32_t id) {
    const lx *e = &E->k->ex[id];
    if (e->kind == LX_VAR) return e->ref == E->vloop || E->vvar[e->ref] == VV_AFFINE;
    if (e->kind != LX_BINARY || e->fn != RJ_OP_ADD || e->type != RJ_I64) return false;
    bool va = em_varying(E, e->a), vb = em_varying(E, e->b);
    if (va == vb) return false;
    return em_vunit(E, va ? e->a : e->b);
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
    if (!em_varying(E, id)) return;
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
    if (!em_varying(E, id)) return false;
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
            (em_varying(E, st->a) || !vcheck_block(E, st->body, seen, mark) || !vcheck_block(E, st->els, seen, mark)))
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
            (x->kind == LS_REDUCE || em_varying(E, x->a))) {
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
 * are constants, else what lowering knows of the kernel's lanes (lkernel.tiling.lanes_max). */
static int64_t lanes_bound(em *E, const ls *st) {
    const lx *lo = &E->k->ex[st->a], *hi = &E->k->ex[st->b];
    if (lo->kind == LX_CONST && hi->kind == LX_CONST) return hi->i > lo->i ? hi->i - lo->i : 1;
    return E->k->tiling.lanes_max;
}

/* A step covers this many vector registers: LLVM splits each operation on it into that many
 * independent ones, interleaved, as its vectoriser's interleaving does. */
#define VREGS 2

/* Can varying expression id be computed with the lanes in even/odd order? Its loads must be
 * unit-stride, bf16 or of 4-byte elements (n[0], n[1] count them), under a guard the same in
 * every lane, and it must not use a lane's position as a value (the loop's index or an index
 * variable outside a load's index). */
static bool vpair_expr(em *E, int32_t id, vscan *v, int n[2]) {
    if (id < 0 || !em_varying(E, id) || v->seen[id] == v->mark) return true;
    v->seen[id] = v->mark;
    const lx *e = &E->k->ex[id];
    if (e->kind == LX_VAR) return e->ref != E->vloop && E->vvar[e->ref] == VV_PRIVATE;
    if (e->kind == LX_LOAD) {
        int t = mem_dtype(E->k, e->fn, e->ref);
        if (t != RJ_BF16 && rj_dtype_size((rj_dtype)t) != 4) return false;
        n[t != RJ_BF16]++;
        return em_vunit(E, e->a) && (e->b < 0 || !em_varying(E, e->b)) && (e->b < 0 || vpair_expr(E, e->c, v, n));
    }
    int32_t kids[3];
    int nk = lx_children(e, kids);
    for (int i = 0; i < nk; i++)
        if (!vpair_expr(E, kids[i], v, n)) return false;
    return true;
}

/* Does every statement from s on keep to vpair_expr's rules, and every store go along the lanes
 * to bf16 or 4-byte elements? */
static bool vpair_block(em *E, int32_t s, vscan *v, int n[2]) {
    const lkernel *k = E->k;
    for (; s >= 0; s = k->st[s].next) {
        const ls *st = &k->st[s];
        if (st->kind == LS_IF && (!vpair_block(E, st->body, v, n) || !vpair_block(E, st->els, v, n))) return false;
        if (st->kind == LS_STORE) {
            int t = st->mem == MEM_LOCAL ? k->locals[st->ref].dtype : k->params[st->ref].dtype;
            if ((t != RJ_BF16 && rj_dtype_size((rj_dtype)t) != 4) || !em_varying(E, st->a) || !em_vunit(E, st->a)) return false;
            n[t != RJ_BF16]++;
        }
        if (st->kind == LS_SET && E->vvar[st->var] == VV_AFFINE) continue; /* an index */
        int32_t ex[2];
        for (int i = 0, ne = ls_exprs(st, ex); i < ne; i++)
            if (st->kind != LS_STORE || ex[i] != st->a)
                if (!vpair_expr(E, ex[i], v, n)) return false;
    }
    return true;
}

/* Sets up E for emitting the lanes loop st as vectors; false leaves it to LLVM. */
bool em_vector_plan(em *E, const ls *st) {
    const lkernel *k = E->k;
    if (!E->vbits || E->vloop >= 0) return false;
    E->vpair = false;
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
                    k->vars[i].type == RJ_I64 && em_vunit(E, k->st[v.def[i]].a)) {
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
        /* the lanes in even/odd order where every access is unit-stride, and bf16 ones (each
         * saving two shuffles of a widening) outnumber those of 4-byte elements (each costing
         * two shuffles into or out of that order; vector.c) */
        int n[2] = {0, 0};
        v.mark = mark + 1;
        E->vpair = ok && E->vf >= 4 && vpair_block(E, st->body, &v, n) && n[0] > n[1];
    }
    mem_free(E->ctx, v.set, nv);
    mem_free(E->ctx, v.red, nv);
    mem_free(E->ctx, v.def, sizeof(int32_t) * nv);
    mem_free(E->ctx, v.seen, sizeof(uint32_t) * ne);
    return ok;
}
