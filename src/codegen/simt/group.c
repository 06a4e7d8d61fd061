/*
 * group.c (SIMT) — lanes loops across the threads of a group: their reductions.
 *
 * A kernel whose launch shape has groups of G > 1 threads spreads the iterations of each lanes
 * loop across the G threads of the group (thread l of the group: iterations l, l + G, ...,
 * rj_lane being l: stmt.c), and every `reduce` inside such a loop accumulates a partial value per
 * thread that the group combines after the loop: with warp shuffles (a butterfly, so that
 * every thread ends with the same bits: each level combines a and b in one thread and b and a
 * in its partner, and the ops are commutative), or through block-shared memory (a tree with a
 * barrier per level) where the spelling has no shuffles, in which case the group is the whole
 * block. The accumulator's value before the loop is set aside and folded in once at the end,
 * so each thread starts from the identity.
 */
#include "emit.h"

/* The distinct accumulators the reduces inside block s (and below) update, with their ops. */
void cem_collect_reduces(cem *C, int32_t s, lane_red *r, int *n) {
    for (; s >= 0; s = C->k->st[s].next) {
        const ls *st = &C->k->st[s];
        if (st->kind == LS_REDUCE) {
            uint16_t fn = (st->flags & LF_FMA) ? RJ_OP_ADD : st->fn;
            int i = 0;
            while (i < *n && r[i].var != st->var) i++;
            if (i < *n) {
                if (r[i].fn != fn) C->bad = true; /* one accumulator, two ops */
            } else if (*n == MAX_LANE_REDUCES) {
                C->bad = true;
            } else {
                r[(*n)++] = (lane_red){st->var, fn};
            }
        }
        if (st->kind == LS_FOR || st->kind == LS_IF) {
            cem_collect_reduces(C, st->body, r, n);
            cem_collect_reduces(C, st->els, r, n);
        }
    }
}

/* The identity of reduction fn in type t. */
void cem_put_identity(cem *C, int t, int fn) {
    op_identity_value id = op_identity(fn, (rj_dtype)t, true); /* the threads' partials */
    if (isf(t)) cem_put_float(C, t, id.f);
    else cem_put_int(C, t, id.i);
}

/* "v = fn(v, <other>);" in fn's form: prints up to the other operand's place and returns
 * the rest of the form, which cem_close_combine prints after the caller has printed other. */
const char *cem_open_combine(cem *C, int32_t var, int fn) {
    int t = C->k->vars[var].type, at;
    const char *f = cem_combine_form(fn, t);
    indent(C);
    cem_put_var(C, var);
    sbuf_puts(C->b, " = ");
    if (!f) {
        C->bad = true;
        return NULL;
    }
    f = cem_put_form(C, f, t, t, &at); /* the accumulator's place, $0 */
    cem_put_var(C, var);
    return cem_put_form(C, f, t, t, &at);
}

void cem_close_combine(cem *C, int32_t var, const char *rest) {
    int t = C->k->vars[var].type, at;
    cem_put_form(C, rest, t, t, &at);
    sbuf_puts(C->b, ";\n");
}

/* The group's partial values of r combined into every thread. */
void cem_combine_group(cem *C, const lane_red *r) {
    sbuf *b = C->b;
    int t = C->k->vars[r->var].type;
    if (C->shuffle) {
        indent(C);
        sbuf_printf(b, "for (int rj_o = %d; rj_o > 0; rj_o >>= 1)\n", (int)C->group / 2);
        C->depth++;
        const char *rest = cem_open_combine(C, r->var, r->fn);
        if (t == RJ_BOOL) sbuf_printf(b, "(%s(rj_mask, (int)", C->sp->shuffle);
        else sbuf_printf(b, "%s(rj_mask, ", C->sp->shuffle);
        cem_put_var(C, r->var);
        sbuf_printf(b, ", rj_o, %d)%s", (int)C->group, t == RJ_BOOL ? " != 0)" : "");
        cem_close_combine(C, r->var, rest);
        C->depth--;
        return;
    }
    const char *sfx = cem_type_suffix[t] ? cem_type_suffix[t] : "_b8";
    indent(C);
    sbuf_printf(b, "rj_red%s[rj_lane] = ", sfx);
    cem_put_var(C, r->var);
    sbuf_printf(b, ";\n");
    indent(C);
    sbuf_printf(b, "%s\n", C->sp->barrier);
    indent(C);
    sbuf_printf(b, "for (int rj_o = %d; rj_o > 0; rj_o >>= 1) {\n", (int)C->group / 2);
    C->depth++;
    indent(C);
    sbuf_puts(b, "if (rj_lane < rj_o) {\n");
    C->depth++;
    indent(C);
    cem_put_var(C, r->var);
    sbuf_printf(b, " = rj_red%s[rj_lane + rj_o];\n", sfx);
    const char *rest = cem_open_combine(C, r->var, r->fn);
    sbuf_printf(b, "rj_red%s[rj_lane]", sfx);
    cem_close_combine(C, r->var, rest);
    indent(C);
    sbuf_printf(b, "rj_red%s[rj_lane] = ", sfx);
    cem_put_var(C, r->var);
    sbuf_puts(b, ";\n");
    C->depth--;
    indent(C);
    sbuf_puts(b, "}\n");
    indent(C);
    sbuf_printf(b, "%s\n", C->sp->barrier);
    C->depth--;
    indent(C);
    sbuf_puts(b, "}\n");
    indent(C);
    cem_put_var(C, r->var);
    sbuf_printf(b, " = rj_red%s[0];\n", sfx);
    indent(C);
    sbuf_printf(b, "%s\n", C->sp->barrier);
}

/* Block-shared arrays for the reductions of a kernel without shuffles: one per type. */
void cem_declare_group_arrays(cem *C) {
    const lkernel *k = C->k;
    if (C->group <= 1 || C->shuffle) return;
    bool used[RJ_DTYPE_COUNT] = {false};
    for (int32_t i = 0; i < k->nst; i++)
        if (k->st[i].kind == LS_REDUCE && k->st[i].var >= 0 && k->st[i].var < k->nvars)
            used[k->vars[k->st[i].var].type] = true;
    for (int t = 0; t < RJ_DTYPE_COUNT; t++) {
        if (!used[t]) continue;
        sbuf_printf(C->b, "    %s%s rj_red%s[%d];\n", C->sp->shared, mtype(C, t),
                    cem_type_suffix[t] ? cem_type_suffix[t] : "_b8", (int)C->group);
    }
}
