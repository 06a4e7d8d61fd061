/*
 * print.c — graphs and types as text.
 *
 * Types print as they are written in the text format, f32[B, j1, 64]. A graph prints as a
 * program in the text format itself (declarations, one assignment per node, outputs), with
 * each node's type in a trailing comment, so a dump can be read, diffed, and parsed back.
 * Intermediate nodes are named v<id>; scalar literals are printed inline where used.
 */
#include <string.h>

#include "ir.h"

void print_dim(sbuf *b, const rj_graph *g, rj_dim d) {
    const sym *s = graph_sym(g, d);
    if (s) sbuf_puts(b, s->name);
    else sbuf_printf(b, "%lld", (long long)d);
}

void print_type(sbuf *b, const rj_graph *g, rj_dtype t, int rank, const rj_dim *dims) {
    sbuf_puts(b, rj_dtype_name(t) ? rj_dtype_name(t) : "?");
    sbuf_putc(b, '[');
    for (int i = 0; i < rank; i++) {
        if (i) sbuf_puts(b, ", ");
        print_dim(b, g, dims[i]);
    }
    sbuf_putc(b, ']');
}

static void print_literal(sbuf *b, const node *n) {
    char num[40];
    switch (n->weak) {
    case WEAK_BOOL: sbuf_puts(b, n->ival ? "True" : "False"); break;
    case WEAK_INT: sbuf_printf(b, "%lld", (long long)n->ival); break;
    default:
        fmt_double(num, sizeof num, n->fval);
        sbuf_puts(b, num);
    }
}

void print_node_type(sbuf *b, const rj_graph *g, const node *n) {
    if (n->op == RJ_OP_SCALAR) {
        sbuf_puts(b, n->weak == WEAK_FLOAT ? "float " : n->weak == WEAK_INT ? "int " : "bool ");
        print_literal(b, n);
        return;
    }
    print_type(b, g, n->dtype, n->rank, n->dims);
}

static const char *output_name(const rj_graph *g, int32_t id) {
    for (int32_t i = 0; i < g->noutputs; i++)
        if (g->outputs[i].node == id) return g->outputs[i].name;
    return NULL;
}

/* Is `name` taken by another node (an input, an output, or an earlier label)? */
static bool name_taken(const rj_graph *g, int32_t id, const char *name) {
    for (int32_t i = 0; i < g->noutputs; i++)
        if (g->outputs[i].node != id && !strcmp(g->outputs[i].name, name)) return true;
    for (int32_t i = 0; i < g->n; i++)
        if (i != id && g->nodes[i].name && !strcmp(g->nodes[i].name, name) &&
            (g->nodes[i].op == RJ_OP_INPUT || i < id))
            return true;
    return false;
}

/* A node's name in the printed program: its input or output name, else its variable name
 * from the text format when unambiguous, else v<id>. */
void print_node_ref(sbuf *b, const rj_graph *g, int32_t id);
static void print_ref(sbuf *b, const rj_graph *g, int32_t id) {
    const node *n = &g->nodes[id];
    if (n->op == RJ_OP_SCALAR) {
        print_literal(b, n);
        return;
    }
    if (n->op == RJ_OP_INPUT) {
        sbuf_puts(b, n->name);
        return;
    }
    const char *o = output_name(g, id);
    if (o) sbuf_puts(b, o);
    else if (n->name && !name_taken(g, id, n->name)) sbuf_puts(b, n->name);
    else sbuf_printf(b, "v%d", id);
}

static void print_num(sbuf *b, const char *key, double v) {
    char num[40];
    fmt_double(num, sizeof num, v);
    sbuf_printf(b, ", %s=%s", key, num);
}

static void print_call(sbuf *b, const rj_graph *g, const node *n) {
    const char *name = op_table[n->op].name;
    if (n->op == RJ_OP_GELU_TANH) name = "gelu";
    sbuf_printf(b, "%s(", name);
    int shown = op_table[n->op].kind == KIND_NORM ? 1 : n->nin;
    for (int i = 0; i < shown; i++) {
        if (i) sbuf_puts(b, ", ");
        print_ref(b, g, n->in[i]);
    }
    switch (op_table[n->op].kind) {
    case KIND_CAST: sbuf_printf(b, ", dtype=\"%s\"", rj_dtype_name(n->dtype)); break;
    case KIND_REDUCE:
        sbuf_printf(b, ", dim=%d", n->axis);
        if (n->keepdim) sbuf_puts(b, ", keepdim=True");
        break;
    case KIND_SOFTMAX: sbuf_printf(b, ", dim=%d", n->axis); break;
    case KIND_NORM: {
        const node *x = &g->nodes[n->in[0]];
        sbuf_puts(b, ", ");
        if (n->axis > 1) sbuf_putc(b, '[');
        for (int d = x->rank - n->axis; d < x->rank; d++) {
            if (d > x->rank - n->axis) sbuf_puts(b, ", ");
            print_dim(b, g, x->dims[d]);
        }
        if (n->axis > 1) sbuf_putc(b, ']');
        int k = 1;
        if (n->ival & 1) {
            sbuf_puts(b, ", weight=");
            print_ref(b, g, n->in[k++]);
        }
        if (n->ival & 2) {
            sbuf_puts(b, ", bias=");
            print_ref(b, g, n->in[k++]);
        }
        if (n->fval >= 0) print_num(b, "eps", n->fval);
        break;
    }
    case KIND_PAD:
        if (n->op == RJ_OP_PAD) {
            print_num(b, "value", n->fval);
            if (n->ival != RJ_DIM_NONE) {
                sbuf_puts(b, ", len=");
                print_dim(b, g, (rj_dim)n->ival);
            }
        } else {
            sbuf_puts(b, ", ");
            print_dim(b, g, (rj_dim)n->ival);
        }
        break;
    default:
        if (n->op == RJ_OP_MASKED_FILL) {
            sbuf_puts(b, ", ");
            char num[40];
            fmt_double(num, sizeof num, n->fval);
            sbuf_puts(b, num);
        }
        if (n->op == RJ_OP_GELU_TANH) sbuf_puts(b, ", approximate=\"tanh\"");
        break;
    }
    sbuf_putc(b, ')');
}

void print_graph(sbuf *b, const rj_graph *g) {
    for (int32_t i = 0; i < g->nsym; i++) {
        const sym *s = &g->syms[i];
        if (s->kind == SYM_RAGGED) sbuf_printf(b, "ragged %s : %s\n", s->name,
                                               g->syms[s->parent].name);
    }
    for (int32_t i = 0; i < g->nsym; i++) {
        int32_t r = sym_root(g, i);
        if (r != i) sbuf_printf(b, "same %s %s\n", g->syms[r].name, g->syms[i].name);
    }
    for (int32_t i = 0; i < g->n; i++) {
        const node *n = &g->nodes[i];
        if (n->op == RJ_OP_SCALAR) continue;
        size_t start = b->len;
        if (n->op == RJ_OP_INPUT) {
            sbuf_printf(b, "input %s : ", n->name);
            print_node_type(b, g, n);
            sbuf_putc(b, '\n');
            continue;
        }
        print_ref(b, g, i);
        sbuf_puts(b, " = ");
        print_call(b, g, n);
        size_t w = b->len - start;
        for (size_t k = w; k < 40; k++) sbuf_putc(b, ' ');
        sbuf_puts(b, "  # ");
        print_node_type(b, g, n);
        sbuf_putc(b, '\n');
    }
    for (int32_t i = 0; i < g->noutputs; i++) {
        const output *o = &g->outputs[i];
        const node *n = &g->nodes[o->node];
        if (n->op == RJ_OP_INPUT && strcmp(n->name, o->name)) /* an input returned as an output */
            sbuf_printf(b, "%s = %s\n", o->name, n->name);
    }
    if (g->noutputs) {
        sbuf_puts(b, "output ");
        for (int32_t i = 0; i < g->noutputs; i++) {
            if (i) sbuf_puts(b, ", ");
            sbuf_puts(b, g->outputs[i].name);
        }
        sbuf_putc(b, '\n');
    }
}

void print_node_ref(sbuf *b, const rj_graph *g, int32_t id) {
    print_ref(b, g, id);
}

void print_node_call(sbuf *b, const rj_graph *g, int32_t id) {
    print_call(b, g, &g->nodes[id]);
}
