/*
 * loopir.c — loop IR storage, hash-consing, walking, checking and printing.
 *
 * Everything that walks the IR generically lives here, once: lx_children says which operands
 * an expression has (the emitters' own recursions follow the same order), lx_visit is the
 * one traversal of an expression DAG, and lx_binder is the one shared-subexpression binder,
 * used by this printer and by the CUDA C printer, each with its own policy (the CUDA printer
 * must not hoist what a guarded load evaluates conditionally). All state of a walk lives in
 * its caller's frame or in the binder, so two contexts may print or compile on two threads.
 *
 * The printed form reads like C with explicit loops, one statement per line, so a dump shows
 * exactly what every kernel does, index arithmetic included:
 *
 *   // softmax over dim 1 of f32[B, j1, 64] (ragged dim)
 *   // launch: units = (item, tile) pairs of j1 over [64]; per thread: a chunk of units, ...
 *   kernel k0(lo: i64, hi: i64, tile: i64, ..., scratch: f32* local scratch, ...) {
 *     local thread f32 scratch[(2 + max(j1)) * tile]
 *     for u in lo .. hi units {
 *       ...
 *       for t in 0 .. tn lanes {
 *         scratch[t] = -inf
 *       }
 *       ...
 */
#include <string.h>

#include "loopir.h"

lkernel *lprog_add_kernel(lprog *p, const char *name) {
    if (!mem_grow(p->ctx, (void **)&p->kernels, &p->capkernels, p->nkernels + 1, sizeof(lkernel)))
        return NULL;
    lkernel *k = &p->kernels[p->nkernels++];
    memset(k, 0, sizeof *k);
    k->ctx = p->ctx;
    k->body = -1;
    k->launch.block = 1;
    k->launch.group = 1;
    snprintf(k->name, sizeof k->name, "%s", name);
    return k;
}

static void kernel_free(lkernel *k) {
    rj_ctx *ctx = k->ctx;
    mem_free(ctx, k->params, sizeof(lparam) * (size_t)k->capparams);
    mem_free(ctx, k->ex, sizeof(lx) * (size_t)k->capex);
    mem_free(ctx, k->htab, sizeof(int32_t) * (size_t)k->hcap);
    mem_free(ctx, k->st, sizeof(ls) * (size_t)k->capst);
    mem_free(ctx, k->vars, sizeof(lvar) * (size_t)k->capvars);
    mem_free(ctx, k->locals, sizeof(llocal) * (size_t)k->caplocals);
}

void lprog_free(lprog *p) {
    if (!p->ctx) return;
    for (int32_t i = 0; i < p->nkernels; i++) kernel_free(&p->kernels[i]);
    mem_free(p->ctx, p->kernels, sizeof(lkernel) * (size_t)p->capkernels);
    mem_free(p->ctx, p->bufs, sizeof(lbuf) * (size_t)p->capbufs);
    mem_free(p->ctx, p->checks, sizeof(lcheck) * (size_t)(p->nchecks ? p->nchecks : 1));
    memset(p, 0, sizeof *p);
}

void lprog_free_last_kernel(lprog *p) {
    if (p->nkernels > 0) kernel_free(&p->kernels[--p->nkernels]);
}

int32_t lk_param(lkernel *k, param_kind kind, int32_t ref, rj_dtype dtype, const char *name) {
    for (int32_t i = 0; i < k->nparams; i++)
        if (k->params[i].kind == kind && k->params[i].ref == ref) return i;
    if (!mem_grow(k->ctx, (void **)&k->params, &k->capparams, k->nparams + 1, sizeof(lparam)))
        return -1;
    lparam *p = &k->params[k->nparams];
    memset(p, 0, sizeof *p);
    p->kind = (uint8_t)kind;
    p->ref = ref;
    p->dtype = (uint8_t)(kind == PK_SCRATCH ? dtype_compute(dtype) : dtype); /* 16-bit: storage only */
    snprintf(p->name, sizeof p->name, "%s", name);
    return k->nparams++;
}

int32_t lk_var(lkernel *k, const char *name, rj_dtype type) {
    if (!mem_grow(k->ctx, (void **)&k->vars, &k->capvars, k->nvars + 1, sizeof(lvar))) return -1;
    lvar *v = &k->vars[k->nvars];
    snprintf(v->name, sizeof v->name, "%s", name);
    v->type = (uint8_t)dtype_compute(type);
    v->holds = 0;
    return k->nvars++;
}

int32_t lk_local(lkernel *k, const char *name, local_scope scope, rj_dtype dtype) {
    if (!mem_grow(k->ctx, (void **)&k->locals, &k->caplocals, k->nlocals + 1, sizeof(llocal)))
        return -1;
    llocal *l = &k->locals[k->nlocals];
    memset(l, 0, sizeof *l);
    snprintf(l->name, sizeof l->name, "%s", name);
    l->scope = (uint8_t)scope;
    l->dtype = (uint8_t)dtype_compute(dtype);
    l->param = -1;
    return k->nlocals++;
}

static uint64_t lx_hash(const lx *e) {
    uint64_t h = hash_mix(0x9e37ull, ((uint64_t)e->kind << 24) | ((uint64_t)e->type << 16) | e->fn);
    h = hash_mix(h, (uint64_t)(uint32_t)e->a | ((uint64_t)(uint32_t)e->b << 32));
    h = hash_mix(h, (uint64_t)(uint32_t)e->c | ((uint64_t)(uint32_t)e->ref << 32));
    uint64_t fb;
    memcpy(&fb, &e->f, sizeof fb);
    return hash_mix(hash_mix(h, (uint64_t)e->i), fb);
}

static bool lx_equal(const lx *x, const lx *y) {
    return x->kind == y->kind && x->type == y->type && x->fn == y->fn && x->a == y->a &&
           x->b == y->b && x->c == y->c && x->ref == y->ref && x->i == y->i &&
           !memcmp(&x->f, &y->f, sizeof x->f);
}

static bool rehash(lkernel *k, int32_t ncap) {
    int32_t *t = mem_alloc(k->ctx, sizeof(int32_t) * (size_t)ncap);
    if (!t) return false;
    for (int32_t i = 0; i < ncap; i++) t[i] = -1;
    for (int32_t i = 0; i < k->nex; i++) {
        uint32_t h = (uint32_t)lx_hash(&k->ex[i]) & (uint32_t)(ncap - 1);
        while (t[h] >= 0) h = (h + 1) & (uint32_t)(ncap - 1);
        t[h] = i;
    }
    mem_free(k->ctx, k->htab, sizeof(int32_t) * (size_t)k->hcap);
    k->htab = t;
    k->hcap = ncap;
    return true;
}

int32_t lk_expr(lkernel *k, const lx *e) {
    if (2 * (k->nex + 1) > k->hcap && !rehash(k, k->hcap ? k->hcap * 2 : 256)) return -1;
    uint32_t mask = (uint32_t)(k->hcap - 1), h = (uint32_t)lx_hash(e) & mask;
    for (; k->htab[h] >= 0; h = (h + 1) & mask)
        if (lx_equal(&k->ex[k->htab[h]], e)) return k->htab[h];
    if (!mem_grow(k->ctx, (void **)&k->ex, &k->capex, k->nex + 1, sizeof(lx))) return -1;
    k->ex[k->nex] = *e;
    k->htab[h] = k->nex;
    return k->nex++;
}

int32_t lk_stmt(lkernel *k, const ls *s) {
    if (!mem_grow(k->ctx, (void **)&k->st, &k->capst, k->nst + 1, sizeof(ls))) return -1;
    k->st[k->nst] = *s;
    k->st[k->nst].next = -1;
    return k->nst++;
}

/* ---- walking ------------------------------------------------------------------------------- */

int lx_children(const lx *e, int32_t out[3]) {
    int n = 0;
    switch (e->kind) {
    case LX_LOAD: /* index, then guard and default */
        out[n++] = e->a;
        if (e->b >= 0) {
            out[n++] = e->b;
            out[n++] = e->c;
        }
        break;
    case LX_UNARY:
    case LX_CAST: out[n++] = e->a; break;
    case LX_BINARY:
        out[n++] = e->a;
        out[n++] = e->b;
        if (e->fn == LOP_FMA) out[n++] = e->c;
        break;
    case LX_CMP:
        out[n++] = e->a;
        out[n++] = e->b;
        break;
    case LX_SELECT:
        out[n++] = e->a;
        out[n++] = e->b;
        out[n++] = e->c;
        break;
    default: break; /* leaves */
    }
    return n;
}

int ls_exprs(const ls *s, int32_t out[2]) {
    switch (s->kind) {
    case LS_FOR:
    case LS_STORE:
        out[0] = s->a;
        out[1] = s->b;
        return 2;
    case LS_REDUCE:
        out[0] = s->a;
        out[1] = s->b;
        return s->b >= 0 ? 2 : 1;
    case LS_IF:
    case LS_SET:
        out[0] = s->a;
        return 1;
    default: return 0;
    }
}

bool lx_visit(const lkernel *k, int32_t e, lx_visit_fn fn, void *ud, uint32_t *seen, uint32_t mark) {
    if (e < 0 || seen[e] == mark) return false;
    seen[e] = mark;
    if (fn(k, e, ud)) return true;
    int32_t kids[3];
    int n = lx_children(&k->ex[e], kids);
    for (int i = 0; i < n; i++)
        if (lx_visit(k, kids[i], fn, ud, seen, mark)) return true;
    return false;
}

static bool is_var(const lkernel *k, int32_t id, void *ud) {
    return k->ex[id].kind == LX_VAR && k->ex[id].ref == *(const int32_t *)ud;
}

bool lx_reads_var(const lkernel *k, int32_t e, int32_t var, uint32_t *seen, uint32_t mark) {
    return lx_visit(k, e, is_var, &var, seen, mark);
}

/* ---- the shared-subexpression binder ---------------------------------------------------------- */

bool lx_binder_init(lx_binder *bd, rj_ctx *ctx, const lkernel *k) {
    size_t n = (size_t)(k->nex ? k->nex : 1);
    bd->ctx = ctx;
    bd->k = k;
    bd->count = 0;
    bd->epoch = 0;
    bd->stamp = mem_zalloc(ctx, n * sizeof(uint32_t));
    bd->seen = mem_zalloc(ctx, n * sizeof(uint32_t));
    bd->uses = mem_alloc(ctx, n * sizeof(int32_t));
    bd->name = mem_alloc(ctx, n * sizeof(int32_t));
    if (bd->stamp && bd->seen && bd->uses && bd->name) return true;
    lx_binder_free(bd);
    return false;
}

void lx_binder_free(lx_binder *bd) {
    if (!bd->k) return;
    size_t n = (size_t)(bd->k->nex ? bd->k->nex : 1);
    mem_free(bd->ctx, bd->stamp, n * sizeof(uint32_t));
    mem_free(bd->ctx, bd->seen, n * sizeof(uint32_t));
    mem_free(bd->ctx, bd->uses, n * sizeof(int32_t));
    mem_free(bd->ctx, bd->name, n * sizeof(int32_t));
    bd->stamp = bd->seen = NULL;
    bd->uses = bd->name = NULL;
    bd->k = NULL;
}

/* Per-expression state is reset lazily, on first touch in a statement: statements are many
 * and most touch few of the kernel's expressions. */
static void bd_touch(lx_binder *bd, int32_t id) {
    if (bd->stamp[id] != bd->epoch) {
        bd->stamp[id] = bd->epoch;
        bd->uses[id] = 0;
        bd->name[id] = -1;
    }
}

/* References along the paths the printed statement evaluates; operands on the first visit. */
static void bd_count(lx_binder *bd, int32_t id) {
    bd_touch(bd, id);
    if (bd->uses[id]++ > 0) return;
    const lx *e = &bd->k->ex[id];
    int32_t kids[3];
    int n = lx_children(e, kids);
    int first = bd->lazy_guards && e->kind == LX_LOAD && e->b >= 0; /* skip the index */
    for (int i = first; i < n; i++) bd_count(bd, kids[i]);
}

/* Names what is used more than once, operands first. The walk enters guarded indices too: a
 * name bound here may be used inside one, so its binding must come first. */
static void bd_bind(lx_binder *bd, int32_t id) {
    if (bd->seen[id] == bd->epoch) return;
    bd->seen[id] = bd->epoch;
    const lx *e = &bd->k->ex[id];
    int32_t kids[3];
    int n = lx_children(e, kids);
    for (int i = 0; i < n; i++) bd_bind(bd, kids[i]);
    bd_touch(bd, id);
    bool leaf = e->kind == LX_CONST || e->kind == LX_PARAM || e->kind == LX_VAR;
    if (bd->uses[id] < 2 || leaf || (bd->bindable && !bd->bindable(bd->k, id))) return;
    int32_t name = bd->count++;
    bd->bind(bd->ud, id, name); /* before name[id] is set: prints its own text, not its name */
    bd->name[id] = name;
}

void lx_binder_stmt(lx_binder *bd, const int32_t *roots, int nroots) {
    bd->epoch++;
    for (int i = 0; i < nroots; i++) bd_count(bd, roots[i]);
    for (int i = 0; i < nroots; i++) bd_bind(bd, roots[i]);
}

int32_t lx_binder_name(const lx_binder *bd, int32_t id) {
    return bd->stamp[id] == bd->epoch ? bd->name[id] : -1;
}

/* ---- checking -------------------------------------------------------------------------------- */

typedef struct vctx {
    const lkernel *k;
    uint32_t *seen;
    uint32_t mark;
    const char *why; /* the first rule broken */
} vctx;

/* Does a statement of block s (or below) assign var other than by reducing into it? */
static bool assigns(const lkernel *k, int32_t s, int32_t var) {
    for (; s >= 0; s = k->st[s].next) {
        const ls *st = &k->st[s];
        if ((st->kind == LS_SET || st->kind == LS_FOR) && st->var == var) return true;
        if ((st->kind == LS_FOR || st->kind == LS_IF) && (assigns(k, st->body, var) || assigns(k, st->els, var)))
            return true;
    }
    return false;
}

static bool bad_ref(const lkernel *k, int32_t id, void *ud) {
    const lx *e = &k->ex[id];
    if (e->kind == LX_PARAM) return e->ref < 0 || e->ref >= k->nparams;
    if (e->kind == LX_VAR) return e->ref < 0 || e->ref >= k->nvars;
    if (e->kind != LX_LOAD) return false;
    if (e->fn == MEM_LOCAL) return e->ref < 0 || e->ref >= k->nlocals;
    return e->fn != MEM_PARAM || e->ref < 0 || e->ref >= k->nparams;
}

/* lanes: the innermost enclosing lanes loop statement, or -1. */
static void verify_block(vctx *V, int32_t s, int32_t lanes) {
    const lkernel *k = V->k;
    for (; s >= 0 && !V->why; s = k->st[s].next) {
        const ls *st = &k->st[s];
        int32_t ex[2];
        int n = ls_exprs(st, ex);
        V->mark++;
        for (int i = 0; i < n; i++)
            if (lx_visit(k, ex[i], bad_ref, NULL, V->seen, V->mark)) V->why = "an expression refers past the kernel's parameters, variables or locals";
        switch (st->kind) {
        case LS_FOR:
            if (st->map == LM_LANES && lanes >= 0 && k->launch.simt && k->launch.group > 1)
                V->why = "a lanes loop inside a lanes loop of a kernel whose lanes are threads";
            verify_block(V, st->body, st->map == LM_LANES ? s : lanes);
            break;
        case LS_IF:
            verify_block(V, st->body, lanes);
            verify_block(V, st->els, lanes);
            break;
        case LS_STORE:
            if (st->mem == MEM_LOCAL ? st->ref >= k->nlocals : st->ref >= k->nparams)
                V->why = "a store refers past the kernel's parameters or locals";
            break;
        case LS_REDUCE: {
            if (lanes < 0) {
                V->why = "a reduce outside any lanes loop";
                break;
            }
            const ls *loop = &k->st[lanes];
            V->mark++;
            bool self = false;
            for (int i = 0; i < n; i++) self |= lx_reads_var(k, ex[i], st->var, V->seen, V->mark);
            if (self) V->why = "a reduce whose value reads its own accumulator";
            else if (loop->var == st->var || assigns(k, loop->body, st->var))
                V->why = "a reduce into a variable its lanes loop assigns";
            else if (st->fn != RJ_OP_ADD && st->fn != RJ_OP_MUL && st->fn != RJ_OP_MAXIMUM &&
                     st->fn != RJ_OP_MINIMUM)
                V->why = "a reduce with an op other than add, mul, maximum, minimum";
            else if ((st->flags & LF_FMA) && (st->fn != RJ_OP_ADD || st->b < 0))
                V->why = "a fused multiply-add reduce without two factors";
            break;
        }
        case LS_BARRIER:
            if (lanes >= 0) V->why = "a barrier inside a lanes loop (threads of a block would wait apart)";
            else if (k->launch.simt && k->launch.group != k->launch.block)
                V->why = "a barrier in a kernel whose thread groups are not whole blocks";
            break;
        default: break;
        }
    }
}

rj_status lprog_verify(const lprog *p) {
    for (int32_t i = 0; i < p->nkernels; i++) {
        const lkernel *k = &p->kernels[i];
        vctx V = {.k = k};
        if (!(V.seen = mem_zalloc(p->ctx, sizeof(uint32_t) * (size_t)(k->nex ? k->nex : 1))))
            return RJ_ERR_NOMEM;
        verify_block(&V, k->body, -1);
        for (int32_t l = 0; l < k->nlocals && !V.why; l++)
            if (k->locals[l].scope == LL_BLOCK && k->launch.simt && k->launch.group != k->launch.block)
                V.why = "a block-scope local in a kernel whose thread groups are not whole blocks";
        if (!V.why && k->launch.group > 1 && (k->launch.group & (k->launch.group - 1)))
            V.why = "threads grouped in a number that is not a power of two";
        mem_free(p->ctx, V.seen, sizeof(uint32_t) * (size_t)(k->nex ? k->nex : 1));
        if (V.why) return ctx_fail(p->ctx, RJ_ERR_INTERNAL, "loop IR of kernel %s: %s", k->name, V.why);
    }
    return RJ_OK;
}

/* ---- printing ---------------------------------------------------------------------------- */

static const char *type_name(int t) {
    return rj_dtype_name((rj_dtype)t) ? rj_dtype_name((rj_dtype)t) : "?";
}

static const char *fn_name(int fn) {
    switch (fn) {
    case LOP_IDIV: return "idiv";
    case LOP_IREM: return "irem";
    case LOP_FMA: return "fma";
    case LOP_EXP_TERM: return "exp_term";
    case LOP_ERFC: return "erfc";
    case LOP_ROUND_F16: return "round_f16";
    case LOP_ROUND_BF16: return "round_bf16";
    default: return rj_op_name((rj_op)fn);
    }
}

/* The printer's state for one kernel: passed to every function, never global, so dumps from
 * two contexts on two threads do not meet. */
typedef struct pctx {
    sbuf *b;
    const rj_graph *g;
    const lkernel *k;
    lx_binder bd;    /* shared subexpressions of the statement being printed */
    int depth;       /* indentation of the statement being printed */
} pctx;

static void print_expr_body(pctx *P, int32_t id);

static void print_expr(pctx *P, int32_t id) {
    int32_t n = lx_binder_name(&P->bd, id);
    if (n >= 0) sbuf_printf(P->b, "%%%d", n);
    else print_expr_body(P, id);
}

static void indent(sbuf *b, int depth) {
    for (int i = 0; i < depth; i++) sbuf_puts(b, "  ");
}

/* The binder's callback: "%N = ..." on its own line before the statement. */
static void print_binding(void *ud, int32_t id, int32_t name) {
    pctx *P = ud;
    indent(P->b, P->depth);
    sbuf_printf(P->b, "%%%d = ", name);
    print_expr_body(P, id);
    sbuf_putc(P->b, '\n');
}

static const char *mem_name(const lkernel *k, int mem, int32_t ref) {
    return mem == MEM_LOCAL ? k->locals[ref].name : k->params[ref].name;
}

static void print_expr_body(pctx *P, int32_t id) {
    sbuf *b = P->b;
    const lkernel *k = P->k;
    const lx *e = &k->ex[id];
    char num[40];
    switch (e->kind) {
    case LX_CONST:
        if (dtype_is_float((rj_dtype)e->type)) {
            fmt_double(num, sizeof num, e->f);
            sbuf_puts(b, num);
        } else if (e->type == RJ_BOOL) {
            sbuf_puts(b, e->i ? "true" : "false");
        } else {
            sbuf_printf(b, "%lld", (long long)e->i);
        }
        break;
    case LX_PARAM: sbuf_puts(b, k->params[e->ref].name); break;
    case LX_VAR: sbuf_puts(b, k->vars[e->ref].name); break;
    case LX_LOAD:
        if (e->b >= 0) {
            sbuf_putc(b, '(');
            print_expr(P, e->b);
            sbuf_puts(b, " ? ");
        }
        sbuf_printf(b, "%s[", mem_name(k, e->fn, e->ref));
        print_expr(P, e->a);
        sbuf_putc(b, ']');
        if (e->b >= 0) {
            sbuf_puts(b, " : ");
            print_expr(P, e->c);
            sbuf_putc(b, ')');
        }
        break;
    case LX_UNARY:
        sbuf_printf(b, "%s(", fn_name(e->fn));
        print_expr(P, e->a);
        sbuf_putc(b, ')');
        break;
    case LX_BINARY:
    case LX_CMP: {
        static const char *const infix[RJ_OP_COUNT] = {
            [RJ_OP_ADD] = "+", [RJ_OP_SUB] = "-", [RJ_OP_MUL] = "*", [RJ_OP_DIV] = "/",
            [RJ_OP_EQ] = "==", [RJ_OP_NE] = "!=", [RJ_OP_LT] = "<", [RJ_OP_LE] = "<=",
            [RJ_OP_GT] = ">", [RJ_OP_GE] = ">=", [RJ_OP_LOGICAL_AND] = "&&",
            [RJ_OP_LOGICAL_OR] = "||"};
        const char *op = e->fn < RJ_OP_COUNT ? infix[e->fn] : NULL;
        if (op) {
            sbuf_putc(b, '(');
            print_expr(P, e->a);
            sbuf_printf(b, " %s ", op);
            print_expr(P, e->b);
            sbuf_putc(b, ')');
        } else {
            sbuf_printf(b, "%s(", fn_name(e->fn));
            print_expr(P, e->a);
            sbuf_puts(b, ", ");
            print_expr(P, e->b);
            if (e->fn == LOP_FMA) {
                sbuf_puts(b, ", ");
                print_expr(P, e->c);
            }
            sbuf_putc(b, ')');
        }
        break;
    }
    case LX_SELECT:
        sbuf_putc(b, '(');
        print_expr(P, e->a);
        sbuf_puts(b, " ? ");
        print_expr(P, e->b);
        sbuf_puts(b, " : ");
        print_expr(P, e->c);
        sbuf_putc(b, ')');
        break;
    case LX_CAST:
        sbuf_printf(b, "%s(", type_name(e->type));
        print_expr(P, e->a);
        sbuf_putc(b, ')');
        break;
    }
}

/* "+=" for a sum, "max=" for a maximum: reduce statements read like C's compound assignment. */
static const char *reduce_op(int fn) {
    switch (fn) {
    case RJ_OP_ADD: return "+=";
    case RJ_OP_MUL: return "*=";
    case RJ_OP_MAXIMUM: return "max=";
    case RJ_OP_MINIMUM: return "min=";
    default: return "?=";
    }
}

static void print_block(pctx *P, int32_t s) {
    static const char *const maps[] = {"serial", "units", "lanes"};
    sbuf *b = P->b;
    const lkernel *k = P->k;
    for (; s >= 0; s = k->st[s].next) {
        const ls *st = &k->st[s];
        int32_t roots[2];
        lx_binder_stmt(&P->bd, roots, ls_exprs(st, roots));
        indent(b, P->depth);
        switch (st->kind) {
        case LS_FOR:
            sbuf_printf(b, "for %s in ", k->vars[st->var].name);
            print_expr(P, st->a);
            sbuf_puts(b, " .. ");
            print_expr(P, st->b);
            sbuf_printf(b, " %s%s {\n", st->map <= LM_LANES ? maps[st->map] : "?", st->flags & LF_NOUNROLL ? " nounroll" : "");
            P->depth++;
            print_block(P, st->body);
            P->depth--;
            indent(b, P->depth);
            sbuf_puts(b, "}\n");
            break;
        case LS_IF:
            sbuf_puts(b, "if ");
            print_expr(P, st->a);
            sbuf_puts(b, " {\n");
            P->depth++;
            print_block(P, st->body);
            if (st->els >= 0) {
                indent(b, P->depth - 1);
                sbuf_puts(b, "} else {\n");
                print_block(P, st->els);
            }
            P->depth--;
            indent(b, P->depth);
            sbuf_puts(b, "}\n");
            break;
        case LS_SET:
            sbuf_printf(b, "%s = ", k->vars[st->var].name);
            print_expr(P, st->a);
            sbuf_putc(b, '\n');
            break;
        case LS_STORE:
            sbuf_printf(b, "%s[", mem_name(k, st->mem, st->ref));
            print_expr(P, st->a);
            sbuf_puts(b, "] = ");
            print_expr(P, st->b);
            sbuf_puts(b, st->flags & LF_NT ? "  // streaming\n" : st->flags & LF_ATOMIC_MIN ? "  // atomic minimum\n" : "\n");
            break;
        case LS_REDUCE:
            sbuf_printf(b, "reduce %s %s ", k->vars[st->var].name, reduce_op(st->fn));
            print_expr(P, st->a);
            if (st->flags & LF_FMA) {
                sbuf_puts(b, " * ");
                print_expr(P, st->b);
                sbuf_puts(b, "  // fused multiply-add");
            }
            sbuf_putc(b, '\n');
            break;
        case LS_BARRIER: sbuf_puts(b, "barrier\n"); break;
        }
    }
}

void print_kernel_signature(sbuf *b, const lkernel *k) {
    sbuf_printf(b, "kernel %s(", k->name);
    for (int32_t i = 0; i < k->nparams; i++) {
        const lparam *p = &k->params[i];
        if (i) sbuf_puts(b, ", ");
        switch (p->kind) {
        case PK_BUF:
            sbuf_printf(b, "%s: %s* %s", p->name, type_name(p->dtype), p->written ? "out" : "in");
            break;
        case PK_SCRATCH:
            sbuf_printf(b, "%s: %s* local %s", p->name, type_name(p->dtype),
                        p->ref >= 0 && p->ref < k->nlocals ? k->locals[p->ref].name : "?");
            break;
        case PK_OFF:
        case PK_LOFF:
        case PK_PITEM:
        case PK_PSTART: sbuf_printf(b, "%s: i64*", p->name); break;
        case PK_SQOFF: sbuf_printf(b, "%s: i64*", p->name); break;
        case PK_ERR: sbuf_printf(b, "%s: u32* (offsets check)", p->name); break;
        default: sbuf_printf(b, "%s: i64", p->name); break;
        }
    }
    sbuf_putc(b, ')');
}

/* dims joined by sep: "[B, 64]" with ", ", "4 * 64" with " * " */
static void print_dims(sbuf *b, const rj_graph *g, const rj_dim *dims, int n, const char *sep) {
    for (int d = 0; d < n; d++) {
        if (d) sbuf_puts(b, sep);
        print_dim(b, g, dims[d]);
    }
}

static const char *class_name(const rj_graph *g, const lkernel *k) {
    return k->dom_class >= 0 && k->dom_class < g->nsym ? g->syms[k->dom_class].name : "?";
}

/* "// launch: units = rows of j1; per thread: a chunk of units, lanes vectorised" */
/* The routine a product's core runs, as dumps name it. */
static const char *gemm_core_name(const lgemm *gm) {
    return gm->core == GC_SBGEMM ? "sbgemm" : gm->core == GC_WIDEN ? "sgemm (16-bit operands widened to f32)"
         : gm->dtype == RJ_F64   ? "dgemm" : "sgemm";
}

static void print_launch(sbuf *b, const rj_graph *g, const lkernel *k) {
    sbuf_puts(b, "// launch: units = ");
    switch (k->domain) {
    case UD_ROWS: sbuf_printf(b, "rows of %s", class_name(g, k)); break;
    case UD_ITEMS:
        if (k->tiling.fixed_tile > 0)
            sbuf_printf(b, "(item, %d-wide tile) pairs of %s over [", (int)k->tiling.fixed_tile, class_name(g, k));
        else
            sbuf_printf(b, "(item, %s) pairs of %s over [", k->tiling.tiled ? "tile" : "whole", class_name(g, k));
        print_dims(b, g, k->dom_dims, k->dom_rank, ", ");
        sbuf_putc(b, ']');
        break;
    case UD_PIECES:
        sbuf_printf(b, "(piece, %d-wide tile) pairs of %s over [", (int)k->tiling.fixed_tile, class_name(g, k));
        print_dims(b, g, k->dom_dims, k->dom_rank, ", ");
        sbuf_putc(b, ']');
        break;
    default:
        sbuf_puts(b, "indices of [");
        print_dims(b, g, k->dom_dims, k->dom_rank, ", ");
        sbuf_putc(b, ']');
        break;
    }
    if (!k->launch.simt) {
        sbuf_puts(b, "; per thread: a chunk of units, lanes vectorised");
        if (k->tiling.stash_variant != KV_ALWAYS)
            sbuf_printf(b, "; runs when max(%s) rows of %d columns %s the stash budget", class_name(g, k),
                        (int)k->tiling.variant_tile, k->tiling.stash_variant == KV_STASH_FITS ? "fit" : "exceed");
        sbuf_putc(b, '\n');
        return;
    }
    sbuf_printf(b, "; blocks of %d threads", (int)k->launch.block);
    if (k->launch.group <= 1) sbuf_puts(b, "; per thread: a chunk of units, lanes in turn\n");
    else if (k->launch.group == k->launch.block) sbuf_puts(b, "; per block: a chunk of units, lanes across its threads\n");
    else sbuf_printf(b, "; per group of %d threads: a chunk of units, lanes across them\n", (int)k->launch.group);
}

/* A local array: its constant size, or for the runtime-sized thread scratch what the runtime
 * sizes it by (elements per element of the unit's tile, plus per row of the longest item). */
static void print_local(sbuf *b, const rj_graph *g, const lkernel *k, const llocal *l) {
    sbuf_printf(b, "  local %s %s %s[", l->scope == LL_BLOCK ? "block" : "thread", type_name(l->dtype),
                l->name);
    if (l->param < 0) {
        sbuf_printf(b, "%lld]\n", (long long)l->elems);
        return;
    }
    if (k->tiling.scratch_per_row) {
        sbuf_puts(b, k->tiling.scratch_per_tile ? "(" : "");
        if (k->tiling.scratch_per_tile) sbuf_printf(b, "%d + ", (int)k->tiling.scratch_per_tile);
        if (k->tiling.stash_rows) print_dim(b, g, k->tiling.stash_rows);
        else sbuf_printf(b, "max(%s)", class_name(g, k));
        sbuf_puts(b, k->tiling.scratch_per_tile ? ")" : "");
        sbuf_puts(b, " * ");
    } else if (k->tiling.scratch_per_tile != 1) {
        sbuf_printf(b, "%d * ", (int)k->tiling.scratch_per_tile);
    }
    else if (k->tiling.scratch_per_tile != 1) sbuf_printf(b, "%d * ", (int)k->tiling.scratch_per_tile);
    if (k->tiling.fixed_tile > 0) sbuf_printf(b, "%d", (int)k->tiling.fixed_tile);
    else if (k->tiling.tiled) sbuf_puts(b, "tile");
    else print_dims(b, g, k->dom_dims, k->dom_rank, " * ");
    sbuf_puts(b, "]\n");
}

void print_lprog(sbuf *b, const rj_graph *g, const lprog *p) {
    static const char *const kinds[] = {"input", "output", "temp", "pieces", "chunk"};
    for (int32_t i = 0; i < p->nbufs; i++) {
        const lbuf *lb = &p->bufs[i];
        if (lb->kind == LB_PIECES) {
            sbuf_printf(b, "buffer %d: per piece of %s, ", i,
                        lb->index >= 0 && lb->index < g->nsym ? g->syms[lb->index].name : "?");
            print_type(b, g, (rj_dtype)lb->dtype, lb->rank, lb->dims);
            sbuf_puts(b, " (partials of split items)\n");
            continue;
        }
        if (lb->kind == LB_CHUNK) {
            sbuf_printf(b, "buffer %d: per worker, a GEMM's chunk of rows of %s: ", i, lb->index ? "C" : "A");
            print_type(b, g, (rj_dtype)lb->dtype, lb->rank, lb->dims);
            sbuf_puts(b, " a row\n");
            continue;
        }
        if (i == p->checks_buf) {
            sbuf_printf(b, "buffer %d: temp %d, i64[%d] (index checks: the first bad position per index op)\n", i,
                        lb->index, (int)p->nchecks);
            continue;
        }
        sbuf_printf(b, "buffer %d: %s %d (", i, kinds[lb->kind], lb->index);
        print_node_ref(b, g, lb->node);
        sbuf_puts(b, ") ");
        print_type(b, g, (rj_dtype)lb->dtype, lb->rank, lb->dims);
        sbuf_putc(b, '\n');
    }
    for (int32_t i = 0; i < p->nkernels; i++) {
        const lkernel *k = &p->kernels[i];
        sbuf_putc(b, '\n');
        sbuf_printf(b, "// %s\n", k->what);
        if (k->tmpl[0]) sbuf_printf(b, "// template: %s\n", k->tmpl);
        if (k->note[0]) sbuf_printf(b, "// %s\n", k->note);
        if (k->gemm.on) {
            const lgemm *gm = &k->gemm;
            if (gm->mode == GEMM_ROWS && gm->w_ld)
                sbuf_printf(b, "// per chunk of rows [lo, hi): C (buffer %d) = A @ w%s (buffer %d from element %lld, rows "
                            "%lld apart) by the BLAS's %s, ", (int)gm->chunk_c, gm->w_nk ? "ᵀ" : "", (int)gm->w_buf,
                            (long long)gm->w_off, (long long)gm->w_ld, gemm_core_name(gm));
            else if (gm->mode == GEMM_ROWS)
                sbuf_printf(b, "// per chunk of rows [lo, hi): C (buffer %d) = A @ w%s (buffer %d) by the BLAS's %s, ",
                            (int)gm->chunk_c, gm->w_nk ? "ᵀ" : "", (int)gm->w_buf, gemm_core_name(gm));
            else if (gm->mode == GEMM_ATTN)
                sbuf_printf(b, "// per item, head h < %lld and chunk of its query rows [lo, hi): C (buffer %d) = q kᵀ by the BLAS's "
                            "%s (q, k: buffers %d, %d), this kernel's weights P in C, then o (buffer %d) = P v "
                            "(buffer %d) by the BLAS; q's head h at column %lld + h·%lld of rows of %lld\n",
                            (long long)gm->heads, (int)gm->chunk_c, gemm_core_name(gm), (int)gm->att[0].buf,
                            (int)gm->att[1].buf, (int)gm->att[3].buf, (int)gm->att[2].buf, (long long)gm->att[0].off,
                            (long long)gm->att[0].hs, (long long)gm->att[0].ld);
            else if (gm->mode == GEMM_QK)
                sbuf_printf(b, "// per chunk of an item's rows [lo, hi): C (buffer %d) = A @ (the item's rows of buffer "
                            "%d)ᵀ by the BLAS's %s, ", (int)gm->chunk_c, (int)gm->w_buf, gemm_core_name(gm));
            else
                sbuf_printf(b, "// per chunk of an item's rows [lo, hi): C (buffer %d) = A @ (the item's rows of buffer "
                            "%d) by the BLAS's %s, ", (int)gm->chunk_c, (int)gm->w_buf, gemm_core_name(gm));
            if (gm->mode == GEMM_ATTN) {
                if (gm->att_plain)
                    sbuf_printf(b, "// F = the scores %s %.9g: the runtime's own softmax stands in for this kernel "
                                "where the CPU has one (util/head_softmax.c)\n", gm->att_div ? "over" : "times",
                                (double)gm->att_scale);
            } else if (gm->prologue >= 0) {
                sbuf_printf(b, "A written by kernel %s; then this kernel, which reads C\n", p->kernels[gm->prologue].name);
            } else {
                sbuf_printf(b, "A the rows of buffer %d; then this kernel, which reads C\n", (int)gm->a_buf);
            }
        }
        if (k->inner_only) sbuf_puts(b, "// run inside a GEMM's chunk loop only\n");
        print_launch(b, g, k);
        print_kernel_signature(b, k);
        sbuf_puts(b, " {\n");
        for (int32_t l = 0; l < k->nlocals; l++) print_local(b, g, k, &k->locals[l]);
        pctx P = {.b = b, .g = g, .k = k, .depth = 1};
        if (!lx_binder_init(&P.bd, p->ctx, k)) {
            b->failed = true; /* sbuf_finish reports it */
            return;
        }
        P.bd.bind = print_binding;
        P.bd.ud = &P;
        print_block(&P, k->body);
        lx_binder_free(&P.bd);
        sbuf_puts(b, "}\n");
    }
}

/* ---- fingerprint ----------------------------------------------------------------------------
 * Every field of the program that a backend or the runtime reads, as bytes: two programs with
 * the same fingerprint compile to the same code. The persistent kernel cache keys entries by
 * it (and compares it whole before loading one), so a field added to the loop IR must be
 * added here. Pointers, capacities and the hash-consing table are not part of a program. */

static void fp_int(sbuf *b, int64_t v) {
    unsigned char le[8];
    for (int i = 0; i < 8; i++) le[i] = (unsigned char)((uint64_t)v >> (8 * i));
    sbuf_put(b, le, 8);
}

static void fp_f64(sbuf *b, double v) {
    uint64_t u;
    memcpy(&u, &v, sizeof u);
    fp_int(b, (int64_t)u);
}

static void fp_str(sbuf *b, const char *s, size_t cap) {
    size_t n = strnlen(s, cap);
    fp_int(b, (int64_t)n);
    sbuf_put(b, s, n);
}

/* code: only what the kernel's machine code depends on (not its name, nor which buffers and
 * symbols its parameters are bound to at launch: lprog_code_dups) */
static void fp_kernel(sbuf *b, const lkernel *k, bool code) {
    if (!code) fp_str(b, k->name, sizeof k->name);
    fp_str(b, k->tmpl, sizeof k->tmpl);
    fp_int(b, k->nparams);
    for (int32_t i = 0; i < k->nparams; i++) {
        const lparam *q = &k->params[i];
        fp_int(b, q->kind), fp_int(b, q->dtype), fp_int(b, q->written);
        if (code) continue;
        fp_int(b, q->ref);
        fp_str(b, q->name, sizeof q->name);
    }
    fp_int(b, k->nex);
    for (int32_t i = 0; i < k->nex; i++) {
        const lx *e = &k->ex[i];
        fp_int(b, e->kind), fp_int(b, e->type), fp_int(b, e->fn);
        fp_int(b, e->a), fp_int(b, e->b), fp_int(b, e->c), fp_int(b, e->ref), fp_int(b, e->i);
        fp_f64(b, e->f);
    }
    fp_int(b, k->nst);
    for (int32_t i = 0; i < k->nst; i++) {
        const ls *s = &k->st[i];
        fp_int(b, s->kind), fp_int(b, s->flags), fp_int(b, s->map), fp_int(b, s->mem), fp_int(b, s->fn);
        fp_int(b, s->var), fp_int(b, s->a), fp_int(b, s->b), fp_int(b, s->ref);
        fp_int(b, s->body), fp_int(b, s->els), fp_int(b, s->next);
    }
    fp_int(b, k->nvars);
    for (int32_t i = 0; i < k->nvars; i++) {
        fp_str(b, k->vars[i].name, sizeof k->vars[i].name);
        fp_int(b, k->vars[i].type);
    }
    fp_int(b, k->nlocals);
    for (int32_t i = 0; i < k->nlocals; i++) {
        const llocal *l = &k->locals[i];
        fp_str(b, l->name, sizeof l->name);
        fp_int(b, l->scope), fp_int(b, l->dtype), fp_int(b, l->param), fp_int(b, l->elems);
    }
    fp_int(b, k->body);
    fp_int(b, k->domain), fp_int(b, k->dom_class), fp_int(b, k->dom_rank);
    for (int d = 0; d < RJ_MAX_RANK; d++) fp_int(b, d < k->dom_rank ? k->dom_dims[d] : 0);
    fp_int(b, k->launch.simt), fp_int(b, k->launch.block), fp_int(b, k->launch.group), fp_int(b, k->launch.cover);
    fp_int(b, k->launch.sm_threads);
    const lk_tiling *t = &k->tiling;
    fp_int(b, t->scratch_type), fp_int(b, t->scratch_per_tile), fp_int(b, t->scratch_per_row);
    fp_int(b, t->stash_rows);
    fp_int(b, k->has_nt), fp_int(b, t->tiled), fp_int(b, t->passes), fp_int(b, t->fixed_tile);
    fp_int(b, k->split_only), fp_int(b, k->inner_only), fp_int(b, k->heavy), fp_int(b, k->streams);
    fp_int(b, t->lanes_max), fp_int(b, t->lanes_var), fp_int(b, t->lanes_multiple), fp_int(b, t->lanes_whole);
    fp_int(b, t->stash_variant), fp_int(b, t->variant_tile);
    const lgemm *g = &k->gemm;
    fp_int(b, g->on);
    if (g->on) {
        fp_int(b, g->mode), fp_int(b, g->b_sym), fp_int(b, g->dtype), fp_int(b, g->core), fp_int(b, g->w_nk);
        fp_int(b, g->prologue), fp_int(b, g->a_buf), fp_int(b, g->a_sym), fp_int(b, g->a_cls), fp_int(b, g->b_cls);
        fp_int(b, g->w_buf), fp_int(b, g->chunk_a), fp_int(b, g->chunk_c), fp_int(b, g->K), fp_int(b, g->N);
        fp_int(b, g->w_off), fp_int(b, g->w_ld);
    }
}

void lprog_fingerprint(const lprog *p, sbuf *b) {
    fp_int(b, p->nkernels);
    for (int32_t i = 0; i < p->nkernels; i++) fp_kernel(b, &p->kernels[i], false);
    fp_int(b, p->nbufs);
    for (int32_t i = 0; i < p->nbufs; i++) {
        const lbuf *u = &p->bufs[i];
        fp_int(b, u->kind), fp_int(b, u->dtype), fp_int(b, u->index), fp_int(b, u->node), fp_int(b, u->rank);
        for (int d = 0; d < RJ_MAX_RANK; d++) fp_int(b, d < u->rank ? u->dims[d] : 0);
    }
    fp_int(b, p->ntemps);
    fp_int(b, p->nchecks);
    for (int32_t i = 0; i < p->nchecks; i++) {
        const lcheck *c = &p->checks[i];
        fp_int(b, c->op), fp_int(b, c->dtype), fp_int(b, c->input), fp_int(b, c->rank), fp_int(b, c->bound);
        for (int d = 0; d < RJ_MAX_RANK; d++) fp_int(b, d < c->rank ? c->dims[d] : 0);
        fp_str(b, c->what, sizeof c->what);
    }
    fp_int(b, p->checks_buf);
}

/* Kernel k's code key into b (the code fingerprint: names and the bindings of its parameters
 * left out, which only the launch reads); false, b untouched, for a kernel that must keep its
 * own code: one a GEMM's library call drives (its buffers are part of the call) or one only
 * another kernel calls. */
bool lprog_kernel_code_key(const lprog *p, int32_t k, sbuf *b) {
    const lkernel *kk = &p->kernels[k];
    if (kk->gemm.on || kk->inner_only) return false;
    fp_kernel(b, kk, true);
    return true;
}

/* Kernels whose code is the same (a function's body in each call, any repeat): dup[i] is the
 * first kernel with kernel i's code, or -1 (its own), by lprog_kernel_code_key. */
rj_status lprog_code_dups(const lprog *p, int32_t *dup) {
    rj_ctx *ctx = p->ctx;
    size_t n = (size_t)(p->nkernels ? p->nkernels : 1);
    sbuf *keys = mem_zalloc(ctx, n * sizeof(sbuf));
    uint64_t *h = mem_alloc(ctx, n * sizeof(uint64_t));
    rj_status st = keys && h ? RJ_OK : RJ_ERR_NOMEM;
    for (int32_t i = 0; !st && i < p->nkernels; i++) {
        dup[i] = -1;
        sbuf_init(&keys[i], ctx);
        if (!lprog_kernel_code_key(p, i, &keys[i])) {
            sbuf_free(&keys[i]);
            continue;
        }
        if (keys[i].failed) {
            st = RJ_ERR_NOMEM;
            break;
        }
        h[i] = 0xcbf29ce484222325ull;
        for (size_t c = 0; c < keys[i].len; c++) h[i] = (h[i] ^ (unsigned char)keys[i].s[c]) * 0x100000001b3ull;
        for (int32_t j = 0; j < i && dup[i] < 0; j++)
            if (keys[j].s && dup[j] < 0 && h[j] == h[i] && keys[j].len == keys[i].len &&
                !memcmp(keys[j].s, keys[i].s, keys[i].len))
                dup[i] = j;
    }
    for (int32_t i = 0; keys && i < p->nkernels; i++)
        if (keys[i].s) sbuf_free(&keys[i]);
    mem_free(ctx, keys, n * sizeof(sbuf));
    mem_free(ctx, h, n * sizeof(uint64_t));
    return st;
}
