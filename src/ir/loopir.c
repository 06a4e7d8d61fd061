/*
 * loopir.c — loop IR storage, hash-consing and printing.
 *
 * The printed form reads like C with explicit loops, one statement per line, so a dump shows
 * exactly what every kernel does, index arithmetic included:
 *
 *   kernel k0(x: f32* in, y: f32* out, j1.off: i64*, B: i64, lo: i64, hi: i64)  // units: rows of j1
 *     for b in search(...) ..
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
}

void lprog_free(lprog *p) {
    if (!p->ctx) return;
    for (int32_t i = 0; i < p->nkernels; i++) kernel_free(&p->kernels[i]);
    mem_free(p->ctx, p->kernels, sizeof(lkernel) * (size_t)p->capkernels);
    mem_free(p->ctx, p->bufs, sizeof(lbuf) * (size_t)p->capbufs);
    memset(p, 0, sizeof *p);
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
    p->dtype = (uint8_t)dtype;
    snprintf(p->name, sizeof p->name, "%s", name);
    return k->nparams++;
}

int32_t lk_var(lkernel *k, const char *name, rj_dtype type) {
    if (!mem_grow(k->ctx, (void **)&k->vars, &k->capvars, k->nvars + 1, sizeof(lvar))) return -1;
    lvar *v = &k->vars[k->nvars];
    snprintf(v->name, sizeof v->name, "%s", name);
    v->type = (uint8_t)type;
    return k->nvars++;
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

/* ---- printing ---------------------------------------------------------------------------- */

static const char *type_name(int t) {
    return rj_dtype_name((rj_dtype)t) ? rj_dtype_name((rj_dtype)t) : "?";
}

static const char *fn_name(int fn) {
    switch (fn) {
    case LOP_IDIV: return "idiv";
    case LOP_IREM: return "irem";
    case LOP_FMA: return "fma";
    default: return rj_op_name((rj_op)fn);
    }
}

/* Shared subexpressions of one statement are printed once, as "%N = ..." lines before it;
 * printing trees would repeat them (exponentially for chains like h = h * h + h). */
typedef struct pctx {
    int32_t *uses;  /* per expression: references from the statement being printed */
    int32_t *name;  /* per expression: its %N number once printed, else -1 */
    int32_t next;
} pctx;

static pctx *P_;    /* set while printing a kernel (the printer is not reentrant per kernel) */

static void print_expr(sbuf *b, const lkernel *k, int32_t id);

static bool trivial(const lx *e) {
    return e->kind == LX_CONST || e->kind == LX_PARAM || e->kind == LX_VAR;
}

static void count_uses(const lkernel *k, int32_t id, int32_t *uses) {
    if (id < 0) return;
    if (uses[id]++) return; /* children counted on the first visit only */
    const lx *e = &k->ex[id];
    count_uses(k, e->a, uses);
    count_uses(k, e->b, uses);
    count_uses(k, e->c, uses);
}

static void print_expr_body(sbuf *b, const lkernel *k, int32_t id);

/* Emits "%N = ..." lines for the shared subexpressions below id, children first. */
static void print_shared(sbuf *b, const lkernel *k, int32_t id, int depth) {
    if (id < 0 || !P_ || P_->name[id] >= 0) return;
    const lx *e = &k->ex[id];
    print_shared(b, k, e->a, depth);
    print_shared(b, k, e->b, depth);
    print_shared(b, k, e->c, depth);
    if (P_->uses[id] < 2 || trivial(e) || P_->name[id] >= 0) return;
    for (int i = 0; i < depth; i++) sbuf_puts(b, "  ");
    int32_t n = P_->next++;
    sbuf_printf(b, "%%%d = ", n);
    print_expr_body(b, k, id);
    sbuf_putc(b, '\n');
    P_->name[id] = n;
}

static void print_expr(sbuf *b, const lkernel *k, int32_t id) {
    if (P_ && P_->name[id] >= 0) {
        sbuf_printf(b, "%%%d", P_->name[id]);
        return;
    }
    print_expr_body(b, k, id);
}

static void print_expr_body(sbuf *b, const lkernel *k, int32_t id) {
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
            print_expr(b, k, e->b);
            sbuf_puts(b, " ? ");
        }
        sbuf_printf(b, "%s[", k->params[e->ref].name);
        print_expr(b, k, e->a);
        sbuf_putc(b, ']');
        if (e->b >= 0) {
            sbuf_puts(b, " : ");
            print_expr(b, k, e->c);
            sbuf_putc(b, ')');
        }
        break;
    case LX_UNARY:
        sbuf_printf(b, "%s(", fn_name(e->fn));
        print_expr(b, k, e->a);
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
            print_expr(b, k, e->a);
            sbuf_printf(b, " %s ", op);
            print_expr(b, k, e->b);
            sbuf_putc(b, ')');
        } else {
            sbuf_printf(b, "%s(", fn_name(e->fn));
            print_expr(b, k, e->a);
            sbuf_puts(b, ", ");
            print_expr(b, k, e->b);
            if (e->fn == LOP_FMA) {
                sbuf_puts(b, ", ");
                print_expr(b, k, e->c);
            }
            sbuf_putc(b, ')');
        }
        break;
    }
    case LX_SELECT:
        sbuf_putc(b, '(');
        print_expr(b, k, e->a);
        sbuf_puts(b, " ? ");
        print_expr(b, k, e->b);
        sbuf_puts(b, " : ");
        print_expr(b, k, e->c);
        sbuf_putc(b, ')');
        break;
    case LX_CAST:
        sbuf_printf(b, "%s(", type_name(e->type));
        print_expr(b, k, e->a);
        sbuf_putc(b, ')');
        break;
    }
}

static void indent(sbuf *b, int depth) {
    for (int i = 0; i < depth; i++) sbuf_puts(b, "  ");
}

/* Before a statement: names for the subexpressions its expressions share. */
static void prepare_statement(sbuf *b, const lkernel *k, const ls *st, int depth) {
    if (!P_) return;
    memset(P_->uses, 0, sizeof(int32_t) * (size_t)k->nex);
    for (int32_t i = 0; i < k->nex; i++) P_->name[i] = -1;
    int32_t roots[2] = {st->a, st->b};
    int nroots = st->kind == LS_STORE || st->kind == LS_FOR ? 2 : 1;
    for (int r = 0; r < nroots; r++) count_uses(k, roots[r], P_->uses);
    for (int r = 0; r < nroots; r++) print_shared(b, k, roots[r], depth);
}

static void print_block(sbuf *b, const lkernel *k, int32_t s, int depth) {
    for (; s >= 0; s = k->st[s].next) {
        const ls *st = &k->st[s];
        prepare_statement(b, k, st, depth);
        indent(b, depth);
        switch (st->kind) {
        case LS_FOR:
            sbuf_printf(b, "for %s in ", k->vars[st->var].name);
            print_expr(b, k, st->a);
            sbuf_puts(b, " .. ");
            print_expr(b, k, st->b);
            sbuf_puts(b, st->flags & LF_INNER ? " vector {\n" : " {\n");
            print_block(b, k, st->body, depth + 1);
            indent(b, depth);
            sbuf_puts(b, "}\n");
            break;
        case LS_IF:
            sbuf_puts(b, "if ");
            print_expr(b, k, st->a);
            sbuf_puts(b, " {\n");
            print_block(b, k, st->body, depth + 1);
            if (st->els >= 0) {
                indent(b, depth);
                sbuf_puts(b, "} else {\n");
                print_block(b, k, st->els, depth + 1);
            }
            indent(b, depth);
            sbuf_puts(b, "}\n");
            break;
        case LS_SET:
            sbuf_printf(b, "%s = ", k->vars[st->var].name);
            print_expr(b, k, st->a);
            sbuf_putc(b, '\n');
            break;
        case LS_STORE:
            sbuf_printf(b, "%s[", k->params[st->ref].name);
            print_expr(b, k, st->a);
            sbuf_puts(b, "] = ");
            print_expr(b, k, st->b);
            sbuf_puts(b, st->flags & LF_NT ? "  // streaming\n" : "\n");
            break;
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
        case PK_SCRATCH: sbuf_printf(b, "%s: %s* scratch", p->name, type_name(p->dtype)); break;
        case PK_OFF:
        case PK_LOFF: sbuf_printf(b, "%s: i64*", p->name); break;
        default: sbuf_printf(b, "%s: i64", p->name); break;
        }
    }
    sbuf_putc(b, ')');
}

void print_lprog(sbuf *b, const rj_graph *g, const lprog *p) {
    static const char *const kinds[] = {"input", "output", "temp"};
    for (int32_t i = 0; i < p->nbufs; i++) {
        const lbuf *lb = &p->bufs[i];
        sbuf_printf(b, "buffer %d: %s %d (v%d) ", i, kinds[lb->kind], lb->index, lb->node);
        print_type(b, g, (rj_dtype)lb->dtype, lb->rank, lb->dims);
        sbuf_putc(b, '\n');
    }
    for (int32_t i = 0; i < p->nkernels; i++) {
        const lkernel *k = &p->kernels[i];
        sbuf_putc(b, '\n');
        sbuf_printf(b, "// %s\n", k->what);
        print_kernel_signature(b, k);
        sbuf_puts(b, " {\n");
        pctx pc = {.next = 0};
        size_t n = (size_t)(k->nex ? k->nex : 1);
        pc.uses = mem_alloc(p->ctx, n * sizeof(int32_t));
        pc.name = mem_alloc(p->ctx, n * sizeof(int32_t));
        if (!pc.uses || !pc.name) b->failed = true; /* sbuf_finish reports it */
        else P_ = &pc;
        print_block(b, k, k->body, 1);
        P_ = NULL;
        mem_free(p->ctx, pc.uses, n * sizeof(int32_t));
        mem_free(p->ctx, pc.name, n * sizeof(int32_t));
        sbuf_puts(b, "}\n");
    }
}
