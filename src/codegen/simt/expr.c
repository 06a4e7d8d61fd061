/*
 * expr.c (SIMT) — the expression printer: names, loads, operations, and a statement's
 * temporaries.
 *
 * Names. Loop-IR names come partly from the user (input names, symbols), so they can clash
 * with keywords, with each other once sanitised, or with math functions. Every C name is
 * therefore prefixed with its index: parameter i is p<i>_<name>, variable i is v<i>_<name>,
 * local array i is l<i>_<name>, shared subexpressions t<n>, helpers rj_*; the sanitised name
 * is kept for the reader.
 *
 * Expressions are a hash-consed DAG; printing them as trees could grow exponentially, so each
 * statement first binds the subexpressions it uses more than once to `const` temporaries
 * (loopir.c's binder, with this printer's policy). Only subexpressions the statement
 * evaluates unconditionally are bound: the index of a guarded load is evaluated only when its
 * guard holds (pad: "i < len ? x[row(i)] : v"), so anything reachable only through such an
 * index stays inside the conditional expression, where the load itself is
 * (`(g ? buf[i] : dflt)`). An operation prints in the form ops.c chooses for it, which this
 * file fills in with its operands (cem_put_form); constants print as const.c writes them, and
 * so does a cast of a constant, folded.
 */
#include <string.h>

#include "emit.h"

/* A loop-IR name as an identifier fragment. */
static void put_sanitised(sbuf *b, const char *s) {
    for (; *s; s++) {
        char c = *s;
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
        sbuf_putc(b, ok ? c : '_');
    }
}

void cem_put_param(cem *C, int32_t i) {
    sbuf_printf(C->b, "p%d_", (int)i);
    put_sanitised(C->b, C->k->params[i].name);
}

void cem_put_var(cem *C, int32_t v) {
    sbuf_printf(C->b, "v%d_", (int)v);
    put_sanitised(C->b, C->k->vars[v].name);
}

/* A helper of the preamble for operands of type t: overloaded, or named after the type. */
void cem_put_helper(cem *C, const char *name, int t) {
    sbuf_puts(C->b, name);
    if (!C->sp->overloads) sbuf_puts(C->b, cem_type_suffix[t]);
}

/* The memory a load or store addresses: a buffer, the thread's slice of the scratch a local's
 * parameter passes in, or a local array declared in the kernel. */
void cem_put_mem(cem *C, int mem, int32_t ref) {
    const llocal *l = mem == MEM_LOCAL ? &C->k->locals[ref] : NULL;
    if (!l) {
        cem_put_param(C, ref);
    } else if (l->param >= 0) {
        cem_put_param(C, l->param);
    } else {
        sbuf_printf(C->b, "l%d_", (int)ref);
        put_sanitised(C->b, l->name);
    }
}

static void load(cem *C, const lx *e) {
    int t = mem_dtype(C->k, e->fn, e->ref);
    bool bl = t == RJ_BOOL;
    if (bl) sbuf_putc(C->b, '(');
    if (t == RJ_F16) sbuf_puts(C->b, C->sp->vload_half ? "vload_half(0, (const __global half *)&" : "rj_f16_to_f32(");
    if (t == RJ_BF16) sbuf_puts(C->b, "rj_bf16_to_f32(");
    cem_put_mem(C, e->fn, e->ref);
    sbuf_putc(C->b, '[');
    cem_expr(C, e->a);
    sbuf_putc(C->b, ']');
    if (bl) sbuf_puts(C->b, " != 0)");
    if (t == RJ_F16 || t == RJ_BF16) sbuf_putc(C->b, ')');
}

/* Prints form f (ops.c) up to the place of its next operand, with the words of type t ($N,
 * $f) and of result type `to` ($T). Returns the text after that place, with the operand's
 * number in *opnd, or NULL once f is printed to its end (or is NULL). */
const char *cem_put_form(cem *C, const char *f, int t, int to, int *opnd) {
    while (f) {
        size_t n = strcspn(f, "$");
        sbuf_put(C->b, f, n);
        if (!f[n]) break;
        char w = f[n + 1];
        f += n + 2;
        switch (w) {
        case 'N':
            if (!C->sp->overloads) sbuf_puts(C->b, cem_type_suffix[t]);
            break;
        case 'f':
            if (t == RJ_F32 && C->sp->math_f) sbuf_putc(C->b, 'f');
            break;
        case 'T': sbuf_puts(C->b, ctype(C, to)); break;
        default: *opnd = w - '0'; return f;
        }
    }
    return NULL;
}

/* An operation in form f with operands opnd[]: expressions, except operand number var (-1:
 * none), which is the variable opnd[var]. A NULL form (an operation this printer does not
 * know) fails the printer. */
void cem_put_op(cem *C, const char *f, int t, int to, const int32_t *opnd, int var) {
    if (!f) C->bad = true;
    int i;
    while ((f = cem_put_form(C, f, t, to, &i))) {
        if (i == var) cem_put_var(C, opnd[i]);
        else cem_expr(C, opnd[i]);
    }
}

static void put_const(cem *C, int t, double f, int64_t i) {
    if (isf(t)) cem_put_float(C, t, f);
    else cem_put_int(C, t, i);
}

void cem_expr(cem *C, int32_t id) {
    int32_t temp = lx_binder_name(&C->bd, id);
    if (temp >= 0) {
        sbuf_printf(C->b, "t%d", (int)temp);
        return;
    }
    const lx *e = &C->k->ex[id];
    double folded;
    if ((e->kind == LX_BINARY || e->kind == LX_UNARY) && cem_fold_float(C->k, id, &folded)) {
        cem_put_float(C, e->type, folded);
        return;
    }
    cval v;
    switch (e->kind) {
    case LX_CONST: put_const(C, e->type, e->f, e->i); break;
    case LX_PARAM: cem_put_param(C, e->ref); break;
    case LX_VAR: cem_put_var(C, e->ref); break;
    case LX_LOAD:
        if (e->b >= 0) { /* the load happens only when the guard holds */
            sbuf_putc(C->b, '(');
            cem_expr(C, e->b);
            sbuf_puts(C->b, " ? ");
            load(C, e);
            sbuf_puts(C->b, " : ");
            cem_expr(C, e->c);
            sbuf_putc(C->b, ')');
        } else {
            load(C, e);
        }
        break;
    case LX_SELECT:
        sbuf_putc(C->b, '(');
        cem_expr(C, e->a);
        sbuf_puts(C->b, " ? ");
        cem_expr(C, e->b);
        sbuf_puts(C->b, " : ");
        cem_expr(C, e->c);
        sbuf_putc(C->b, ')');
        break;
    case LX_CAST:
        if (cem_const_eval(C->k, id, &v)) { /* folded, as NVRTC would: "0.5f" reads better than a cast */
            put_const(C, e->type, v.f, v.i);
            break;
        }
        /* fall through */
    case LX_UNARY:
    case LX_BINARY:
    case LX_CMP: {
        int t = e->kind == LX_CAST ? C->k->ex[e->a].type : e->type; /* a cast's helpers: its operand's */
        int32_t opnd[3] = {e->a, e->b, e->c};
        cem_put_op(C, cem_op_form(e->kind, e->fn, e->type, t), t, e->type, opnd, -1);
        break;
    }
    default: C->bad = true; break;
    }
}

/* Worth a temporary: not a leaf, and not a cast of a constant (printed as a literal). */
static bool bindable(const lkernel *k, int32_t id) {
    const lx *e = &k->ex[id];
    cval v;
    if (e->kind == LX_CAST) return !cem_const_eval(k, id, &v);
    return e->kind != LX_CONST && e->kind != LX_PARAM && e->kind != LX_VAR;
}

/* The binder's callback: the temporary's definition, on its own line. */
static void bind_temp(void *ud, int32_t id, int32_t name) {
    cem *C = ud;
    indent(C);
    sbuf_printf(C->b, "const %s t%d = ", ctype(C, C->k->ex[id].type), (int)name);
    cem_expr(C, id);
    sbuf_puts(C->b, ";\n");
}

/* The binder of temporaries with this printer's policy (see the top of the file). */
bool cem_binder_init(cem *C, const lkernel *k) {
    bool ok = lx_binder_init(&C->bd, C->ctx, k);
    C->bd.lazy_guards = true;
    C->bd.bindable = bindable;
    C->bd.bind = bind_temp;
    C->bd.ud = C;
    return ok;
}

/* Starts a statement whose expressions are roots[0..n). */
void cem_begin_stmt(cem *C, const int32_t *roots, int n) {
    lx_binder_stmt(&C->bd, roots, n);
}
