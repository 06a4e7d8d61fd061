/*
 * stmt.c (SIMT) — statements as C statements.
 *
 * The parallel mappings need little: `units` and `serial` loops are ordinary loops of one
 * thread, and so is a `lanes` loop, except in a kernel whose threads work in groups, where its
 * iterations are spread across the group and its reductions combined after it (group.c); a
 * `reduce` is the accumulation v = v op e; `barrier` is the spelling's block barrier. A lanes
 * loop in which each thread takes a few iterations of constant bounds gets CUDA's unroll hint
 * (lanes_unroll): all of a thread's loads in flight at once.
 *
 * A FOR is C's `for`, which evaluates its condition before each iteration where the loop IR
 * evaluates the bound once: a bound that reads a variable the loop assigns is computed into a
 * temporary first. An assignment to a variable nothing reads is left out with the variable
 * (kernel.c). A statement's expressions first get their temporaries (expr.c).
 */
#include <string.h>

#include "emit.h"

static void mark_set_vars(cem *C, int32_t s, uint8_t v) {
    for (; s >= 0; s = C->k->st[s].next) {
        const ls *st = &C->k->st[s];
        if (st->kind == LS_SET || st->kind == LS_REDUCE || st->kind == LS_FOR) C->vset[st->var] = v;
        if (st->kind == LS_FOR || st->kind == LS_IF) {
            mark_set_vars(C, st->body, v);
            mark_set_vars(C, st->els, v);
        }
    }
}

static bool reads_marked(const lkernel *k, int32_t id, void *ud) {
    const cem *C = ud;
    return k->ex[id].kind == LX_VAR && C->vset[k->ex[id].ref];
}

/* Does the loop's upper bound read a variable its body (or the loop itself) assigns? The loop
 * IR evaluates bounds once, C's `for` re-evaluates the condition each iteration. */
static bool bound_varies(cem *C, const ls *st) {
    C->vset[st->var] = 1;
    mark_set_vars(C, st->body, 1);
    bool r = lx_visit(C->k, st->b, reads_marked, C, C->seen, ++C->walk);
    C->vset[st->var] = 0;
    mark_set_vars(C, st->body, 0);
    return r;
}

/* A condition inside if ( ): without the parentheses a comparison prints with, which
 * compilers warn about (-Wparentheses-equality). */
static void cond_text(cem *C, int32_t id) {
    sbuf *b = C->b;
    size_t at = b->len;
    cem_expr(C, id);
    if (b->failed || b->len < at + 2 || b->s[at] != '(' || b->s[b->len - 1] != ')') return;
    int depth = 0;
    for (size_t i = at; i < b->len; i++) {
        depth += b->s[i] == '(' ? 1 : b->s[i] == ')' ? -1 : 0;
        if (depth == 0 && i + 1 < b->len) return; /* "(a) && (b)": not one parenthesis */
    }
    memmove(b->s + at, b->s + at + 1, b->len - at - 2);
    b->len -= 2;
    b->s[b->len] = 0;
}

/* No loop inside s (nor inside its branches). */
static bool innermost(const lkernel *k, int32_t s) {
    for (; s >= 0; s = k->st[s].next) {
        const ls *st = &k->st[s];
        if (st->kind == LS_FOR) return false;
        if (st->kind == LS_IF && (!innermost(k, st->body) || !innermost(k, st->els))) return false;
    }
    return true;
}

/* The unroll hint of a lanes loop spread across a group, or -1 for none. Where each thread
 * takes a few iterations of constant bounds (a row of D = 256 across a warp's 32 threads: 8
 * each), all of them are unrolled, so that a thread has all its loads in flight at once: on
 * an H200 that took W1 from 0.93 to 0.97 of the device copy in f32 and from 0.54 to 0.62 in
 * bf16, and layer_norm from 0.79 to 0.98 and 0.40 to 0.63 (bench/NOTES.md). A loop of one
 * iteration a thread (items_simt's lanes over the block) gets none: there the hint only cost
 * registers (W2's softmax 20% slower). RAGJIT_SIMT_UNROLL_LANES=N sets it for an experiment
 * (0: no hint anywhere, as before). */
static int lanes_unroll(cem *C, const ls *st) {
    int knob = cem_knob("UNROLL_LANES");
    if (knob >= 0) return knob;
    const lx *a = &C->k->ex[st->a], *e = &C->k->ex[st->b];
    if (a->kind != LX_CONST || e->kind != LX_CONST || C->group <= 1) return -1;
    int64_t per = (e->i - a->i + C->group - 1) / C->group;
    return per >= 2 && per <= 16 ? (int)per : -1;
}

/* for (v = a; v < b; v++) { body }, spread across a group for a lanes loop (group.c). */
static void for_stmt(cem *C, const ls *st) {
    const lkernel *k = C->k;
    sbuf *b = C->b;
    int32_t roots[2] = {st->a, st->b};
    bool hoist = bound_varies(C, st);
    cem_begin_stmt(C, roots, 2);
    int end = -1;
    if (hoist) {
        end = C->bd.count++;
        indent(C);
        sbuf_printf(b, "const %s t%d = ", C->sp->i64, end);
        cem_expr(C, st->b);
        sbuf_puts(b, ";\n");
    }
    bool spread = st->map == LM_LANES && C->group > 1;
    lane_red red[MAX_LANE_REDUCES];
    int nred = 0, first = C->nred;
    if (spread) cem_collect_reduces(C, st->body, red, &nred);
    for (int i = 0; i < nred; i++) { /* set aside what the accumulator holds */
        int t = k->vars[red[i].var].type;
        indent(C);
        sbuf_printf(b, "const %s rj_r%d = ", ctype(C, t), first + i);
        cem_put_var(C, red[i].var);
        sbuf_puts(b, ";\n");
        indent(C);
        cem_put_var(C, red[i].var);
        sbuf_puts(b, " = ");
        cem_put_identity(C, t, red[i].fn);
        sbuf_puts(b, ";\n");
    }
    C->nred += nred;
    int unroll = !C->sp->unroll ? -1 : spread ? lanes_unroll(C, st)
                 : st->map == LM_SERIAL && innermost(k, st->body) ? cem_knob("UNROLL_SERIAL") : -1;
    if (unroll > 0) {
        indent(C);
        sbuf_printf(b, C->sp->unroll, unroll);
    }
    indent(C);
    sbuf_puts(b, "for (");
    cem_put_var(C, st->var);
    sbuf_puts(b, " = ");
    cem_expr(C, st->a);
    if (spread) sbuf_puts(b, " + rj_lane");
    sbuf_puts(b, "; ");
    cem_put_var(C, st->var);
    sbuf_puts(b, " < ");
    if (hoist) sbuf_printf(b, "t%d", end);
    else cem_expr(C, st->b);
    sbuf_puts(b, "; ");
    cem_put_var(C, st->var);
    if (spread) sbuf_printf(b, " += %d) {\n", (int)C->group);
    else sbuf_puts(b, "++) {\n");
    C->depth++;
    cem_block(C, st->body);
    C->depth--;
    indent(C);
    sbuf_puts(b, "}\n");
    for (int i = 0; i < nred; i++) {
        cem_combine_group(C, &red[i]);
        const char *rest = cem_open_combine(C, red[i].var, red[i].fn);
        sbuf_printf(b, "rj_r%d", first + i);
        cem_close_combine(C, red[i].var, rest);
    }
}

static void if_stmt(cem *C, const ls *st) {
    sbuf *b = C->b;
    cem_begin_stmt(C, &st->a, 1);
    indent(C);
    sbuf_puts(b, "if (");
    cond_text(C, st->a);
    sbuf_puts(b, ") {\n");
    C->depth++;
    cem_block(C, st->body);
    C->depth--;
    indent(C);
    if (st->els >= 0) {
        sbuf_puts(b, "} else {\n");
        C->depth++;
        cem_block(C, st->els);
        C->depth--;
        indent(C);
    }
    sbuf_puts(b, "}\n");
}

/* v = v fn e, in the form of fn(v, e); v = fma(a, b, v) for LF_FMA. */
static void reduce_stmt(cem *C, const ls *st) {
    int32_t roots[2];
    cem_begin_stmt(C, roots, ls_exprs(st, roots));
    indent(C);
    cem_put_var(C, st->var);
    sbuf_puts(C->b, " = ");
    int t = C->k->vars[st->var].type;
    if (st->flags & LF_FMA) {
        int32_t opnd[3] = {st->a, st->b, st->var};
        cem_put_op(C, cem_op_form(LX_BINARY, LOP_FMA, t, t), t, t, opnd, 2);
    } else {
        int32_t opnd[2] = {st->var, st->a};
        cem_put_op(C, cem_combine_form(st->fn, t), t, t, opnd, 0);
    }
    sbuf_puts(C->b, ";\n");
}

static void store_stmt(cem *C, const ls *st) {
    const lkernel *k = C->k;
    sbuf *b = C->b;
    int32_t roots[2] = {st->a, st->b};
    cem_begin_stmt(C, roots, 2);
    indent(C);
    if (st->flags & LF_ATOMIC_MIN) { /* the index checks' first bad position */
        sbuf_printf(b, "%s&", C->sp->atomic_min64[0]);
        cem_put_mem(C, st->mem, st->ref);
        sbuf_putc(b, '[');
        cem_expr(C, st->a);
        sbuf_printf(b, "], %s(", C->sp->atomic_min64[1]);
        cem_expr(C, st->b);
        sbuf_puts(b, "));\n");
        return;
    }
    int t = mem_dtype(k, st->mem, st->ref);
    if (t == RJ_F16 && C->sp->vload_half) { /* correctly rounded to nearest even */
        sbuf_puts(b, "vstore_half_rte(");
        cem_expr(C, st->b);
        sbuf_puts(b, ", 0, (__global half *)&");
        cem_put_mem(C, st->mem, st->ref);
        sbuf_putc(b, '[');
        cem_expr(C, st->a);
        sbuf_puts(b, "]);\n");
        return;
    }
    cem_put_mem(C, st->mem, st->ref);
    sbuf_putc(b, '[');
    cem_expr(C, st->a);
    sbuf_puts(b, "] = ");
    sbuf_puts(b, t == RJ_BOOL ? "(unsigned char)" : t == RJ_F16 ? "rj_f32_to_f16(" : t == RJ_BF16 ? "rj_f32_to_bf16(" : "");
    cem_expr(C, st->b);
    sbuf_puts(b, t == RJ_F16 || t == RJ_BF16 ? ");\n" : ";\n");
}

static void stmt(cem *C, const ls *st) {
    sbuf *b = C->b;
    switch (st->kind) {
    case LS_FOR: for_stmt(C, st); break;
    case LS_IF: if_stmt(C, st); break;
    case LS_SET:
        if (!C->vread[st->var]) break;
        cem_begin_stmt(C, &st->a, 1);
        indent(C);
        cem_put_var(C, st->var);
        sbuf_puts(b, " = ");
        cem_expr(C, st->a);
        sbuf_puts(b, ";\n");
        break;
    case LS_REDUCE: reduce_stmt(C, st); break;
    case LS_BARRIER:
        indent(C);
        sbuf_printf(b, "%s\n", C->sp->barrier);
        break;
    case LS_STORE: store_stmt(C, st); break;
    default: C->bad = true; break;
    }
}

void cem_block(cem *C, int32_t s) {
    for (; s >= 0 && !C->bad; s = C->k->st[s].next) stmt(C, &C->k->st[s]);
}
