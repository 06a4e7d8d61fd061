/*
 * print.c — graphs and types as text.
 *
 * Types print as they are written in the text format, f32[B, j1, 64] (rj_node_type_str gives
 * one to the user). A graph prints as a program in the text format itself (declarations, one
 * assignment per node, outputs), with each node's type in a trailing comment, so a dump can
 * be read, diffed, and parsed back.
 * Intermediate nodes are named v<id> (made unique among the graph's names); scalar literals
 * are printed inline where used. A whole graph is printed in linear time, through indexes of
 * its names (namer), however many statements it has.
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

char *rj_node_type_str(const rj_graph *g, rj_node n) {
    if (!g) return NULL;
    const node *nd = graph_node(g, n);
    if (!nd) {
        ctx_fail(g->ctx, RJ_ERR_ARG, "rj_node_type_str: node %d does not exist", (int)n);
        return NULL;
    }
    sbuf b;
    sbuf_init(&b, g->ctx);
    print_node_type(&b, g, nd);
    return sbuf_finish(&b);
}

static const char *output_name(const rj_graph *g, int32_t id) {
    for (int32_t i = 0; i < g->noutputs; i++)
        if (g->outputs[i].node == id) return g->outputs[i].name;
    return NULL;
}

/* Indexes of a graph's names, so that printing a whole graph takes linear time; without them
 * (a node printed on its own) the same questions are answered by scanning. */
struct namer {
    strmap inp;   /* an input's name -> its node */
    strmap out;   /* an output's name -> its node */
    strmap all;   /* every name: symbols, inputs, outputs, labels */
    uint8_t *own; /* own[id]: node id is printed under its label (label_kept) */
    int32_t n;
};

/* May node i be printed under its label at all: a labelled operation that is not an output
 * (outputs print under their output names) and whose label no input and no other node's
 * output has? */
static bool label_free(const rj_graph *g, const namer *nm, int32_t i) {
    const node *n = &g->nodes[i];
    if (!n->name || n->op == RJ_OP_INPUT || n->op == RJ_OP_SCALAR) return false;
    if (nm) {
        int32_t o = strmap_get(&nm->out, n->name), in = strmap_get(&nm->inp, n->name);
        return o < 0 && in < 0;
    }
    for (int32_t k = 0; k < g->noutputs; k++)
        if (!strcmp(g->outputs[k].name, n->name)) return false;
    for (int32_t k = 0; k < g->n; k++)
        if (g->nodes[k].op == RJ_OP_INPUT && !strcmp(g->nodes[k].name, n->name)) return false;
    return true;
}

/* The last node that reads node i (-1: none). */
static int32_t last_use(const rj_graph *g, int32_t i) {
    int32_t last = -1;
    for (int32_t j = i + 1; j < g->n; j++)
        for (int k = 0; k < g->nodes[j].nin; k++)
            if (g->nodes[j].in[k] == i) last = j;
    return last;
}

/* Labels are the text format's variable names, and a program may bind one name again
 * (x = f(x), or a statement repeated), so several nodes may share a label. Printed in order,
 * a label binds its node until the next node printed under it, as it did in the source: node
 * i keeps its label unless an earlier node still printed under it is read after i. Keeping
 * them keeps the user's names through print and parse, in every stage's dump. */
static bool namer_init(namer *nm, const rj_graph *g) {
    strmap_init(&nm->inp, g->ctx);
    strmap_init(&nm->out, g->ctx);
    strmap_init(&nm->all, g->ctx);
    nm->n = g->n;
    nm->own = mem_zalloc(g->ctx, (size_t)(g->n ? g->n : 1));
    int32_t *last = mem_alloc(g->ctx, sizeof(int32_t) * (size_t)(g->n ? g->n : 1));
    strmap holder; /* a label -> the node printed under it so far */
    strmap_init(&holder, g->ctx);
    bool ok = nm->own && last;
    for (int32_t i = 0; ok && i < g->nsym; i++) ok = strmap_put(&nm->all, g->syms[i].name, 1);
    for (int32_t i = 0; ok && i < g->noutputs; i++)
        ok = strmap_put(&nm->out, g->outputs[i].name, g->outputs[i].node) &&
             strmap_put(&nm->all, g->outputs[i].name, 1);
    for (int32_t i = 0; ok && i < g->n; i++) {
        last[i] = -1;
        for (int k = 0; k < g->nodes[i].nin; k++) last[g->nodes[i].in[k]] = i;
        const char *l = g->nodes[i].name;
        if (!l) continue;
        ok = (g->nodes[i].op != RJ_OP_INPUT || strmap_put(&nm->inp, l, i)) &&
             strmap_put(&nm->all, l, 1);
    }
    for (int32_t i = 0; ok && i < g->n; i++) {
        if (!label_free(g, nm, i)) continue;
        int32_t h = strmap_get(&holder, g->nodes[i].name);
        if (h >= 0 && last[h] > i) continue;
        nm->own[i] = 1;
        ok = strmap_put(&holder, g->nodes[i].name, i);
    }
    strmap_free(&holder);
    mem_free(g->ctx, last, sizeof(int32_t) * (size_t)(g->n ? g->n : 1));
    return ok;
}

static void namer_free(namer *nm) {
    strmap_free(&nm->inp);
    strmap_free(&nm->out);
    strmap_free(&nm->all);
    mem_free(nm->inp.ctx, nm->own, (size_t)(nm->n ? nm->n : 1));
    nm->own = NULL;
}

/* Is node id printed under its label? (namer_init's rule, by scanning when there is no
 * namer.) */
static bool label_kept(const rj_graph *g, const namer *nm, int32_t id) {
    if (nm) return nm->own[id];
    if (!label_free(g, NULL, id)) return false;
    int32_t h = -1;
    for (int32_t i = 0; i <= id; i++)
        if (g->nodes[i].name && !strcmp(g->nodes[i].name, g->nodes[id].name) &&
            label_free(g, NULL, i) && (h < 0 || last_use(g, h) <= i))
            h = i;
    return h == id;
}

/* Does any symbol, input, output or node of the graph have `name`? */
static bool name_in_graph(const rj_graph *g, const namer *nm, const char *name) {
    if (nm) return strmap_get(&nm->all, name) >= 0;
    for (int32_t i = 0; i < g->nsym; i++)
        if (!strcmp(g->syms[i].name, name)) return true;
    for (int32_t i = 0; i < g->noutputs; i++)
        if (!strcmp(g->outputs[i].name, name)) return true;
    for (int32_t i = 0; i < g->n; i++)
        if (g->nodes[i].name && !strcmp(g->nodes[i].name, name)) return true;
    return false;
}

/* A node's name in the printed program: its input or output name, else its variable name
 * from the text format while it names this node (label_kept), else v<id> — with underscores added while that is
 * some other name of the graph, since a printed program that reassigned an input named v3
 * would parse back as a different program. */
void print_node_ref(sbuf *b, const rj_graph *g, int32_t id);
static void print_ref(sbuf *b, const rj_graph *g, const namer *nm, int32_t id) {
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
    if (o) {
        sbuf_puts(b, o);
        return;
    }
    if (label_kept(g, nm, id)) {
        sbuf_puts(b, n->name);
        return;
    }
    char gen[160]; /* names are shorter than 128 bytes, so one this long is always free */
    /* numbered as the user's graph numbers it, in every stage's dump; t<id>: made by a pass */
    int len = n->from ? snprintf(gen, sizeof gen, "v%d", (int)n->from - 1) : snprintf(gen, sizeof gen, "t%d", (int)id);
    while (len < 150 && name_in_graph(g, nm, gen)) gen[len++] = '_', gen[len] = 0;
    sbuf_puts(b, gen);
}

void print_operand_what(sbuf *b, const rj_graph *g, int32_t id) {
    if (g->nodes[id].op == RJ_OP_INPUT) sbuf_puts(b, "input ");
    print_ref(b, g, NULL, id);
}

static void print_num(sbuf *b, const char *key, double v) {
    char num[40];
    fmt_double(num, sizeof num, v);
    sbuf_printf(b, ", %s=%s", key, num);
}

/* Index ops and views, in PyTorch's argument order. */
static void print_index_call(sbuf *b, const rj_graph *g, const namer *nm, const node *n) {
    sbuf_printf(b, "%s(", op_table[n->op].name);
    switch (n->op) {
    case RJ_OP_POSITIONS: print_dim(b, g, (rj_dim)n->ival); break;
    case RJ_OP_ARANGE:
        print_dim(b, g, n->dims[0]);
        sbuf_printf(b, ", dtype=\"%s\"", rj_dtype_name(n->dtype));
        break;
    case RJ_OP_FULL: {
        sbuf_putc(b, '[');
        for (int k = 0; k < n->rank; k++) {
            if (k) sbuf_puts(b, ", ");
            print_dim(b, g, n->dims[k]);
        }
        char num[40];
        if (dtype_is_float(n->dtype)) fmt_double(num, sizeof num, n->fval);
        else snprintf(num, sizeof num, "%lld", (long long)n->ival);
        sbuf_printf(b, "], %s, dtype=\"%s\"", n->dtype == RJ_BOOL ? (n->ival ? "True" : "False") : num,
                    rj_dtype_name(n->dtype));
        break;
    }
    case RJ_OP_GATHER:
    case RJ_OP_INDEX_SELECT:
        print_ref(b, g, nm, n->in[0]);
        sbuf_printf(b, ", %d, ", n->axis);
        print_ref(b, g, nm, n->in[1]);
        break;
    case RJ_OP_CAT: /* a chain of binary cats prints as one: cat([a, b, c], dim=2) */
        sbuf_puts(b, "[");
        print_ref(b, g, nm, n->in[0]);
        sbuf_puts(b, ", ");
        print_ref(b, g, nm, n->in[1]);
        sbuf_printf(b, "], dim=%d", n->axis);
        break;
    case RJ_OP_TRANSPOSE:
        print_ref(b, g, nm, n->in[0]);
        sbuf_printf(b, ", %d, %d", n->axis, (int)n->ival);
        break;
    case RJ_OP_NARROW:
        print_ref(b, g, nm, n->in[0]);
        sbuf_printf(b, ", %d, %lld, %lld", n->axis, (long long)n->ival, (long long)n->dims[n->axis]);
        break;
    case RJ_OP_RESHAPE:
        print_ref(b, g, nm, n->in[0]);
        sbuf_puts(b, ", [");
        for (int k = 0; k < n->rank; k++) {
            if (k) sbuf_puts(b, ", ");
            print_dim(b, g, n->dims[k]);
        }
        sbuf_putc(b, ']');
        break;
    default: /* embedding, take_along_dim */
        print_ref(b, g, nm, n->in[0]);
        sbuf_puts(b, ", ");
        print_ref(b, g, nm, n->in[1]);
        if (n->op == RJ_OP_TAKE_ALONG_DIM) sbuf_printf(b, ", dim=%d", n->axis);
        break;
    }
    sbuf_putc(b, ')');
}

static void print_call(sbuf *b, const rj_graph *g, const namer *nm, const node *n) {
    const char *name = op_table[n->op].name;
    if (n->op == RJ_OP_MATMUL && n->ival) { /* linear's weight, [N, K] */
        sbuf_puts(b, "linear(");
        print_ref(b, g, nm, n->in[0]);
        sbuf_puts(b, ", ");
        print_ref(b, g, nm, n->in[1]);
        sbuf_putc(b, ')');
        return;
    }
    if (op_table[n->op].kind == KIND_INDEX || op_table[n->op].kind == KIND_VIEW) {
        print_index_call(b, g, nm, n);
        return;
    }
    if (n->op == RJ_OP_GELU_TANH) name = "gelu";
    sbuf_printf(b, "%s(", name);
    int shown = op_table[n->op].kind == KIND_NORM ? 1 : n->nin;
    for (int i = 0; i < shown; i++) {
        if (i) sbuf_puts(b, ", ");
        print_ref(b, g, nm, n->in[i]);
    }
    switch (op_table[n->op].kind) {
    case KIND_CAST: sbuf_printf(b, ", dtype=\"%s\"", rj_dtype_name(n->dtype)); break;
    case KIND_REDUCE:
        sbuf_printf(b, ", dim=%d", n->axis);
        if (n->keepdim) sbuf_puts(b, ", keepdim=True");
        break;
    case KIND_SOFTMAX: sbuf_printf(b, ", dim=%d", n->axis); break;
    case KIND_ATTENTION:
        if (n->ival) sbuf_puts(b, ", safe=True");
        break;
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
            print_ref(b, g, nm, n->in[k++]);
        }
        if (n->ival & 2) {
            sbuf_puts(b, ", bias=");
            print_ref(b, g, nm, n->in[k++]);
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
        } else if (n->keepdim) { /* dims 1 and 2 */
            sbuf_puts(b, ", [");
            print_dim(b, g, (rj_dim)n->ival);
            sbuf_puts(b, ", ");
            print_dim(b, g, (rj_dim)n->ival);
            sbuf_putc(b, ']');
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
    namer nm;
    if (!namer_init(&nm, g)) { /* reported as the buffer's own allocation failures are */
        namer_free(&nm);
        b->failed = true;
        return;
    }
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
        print_ref(b, g, &nm, i);
        sbuf_puts(b, " = ");
        print_call(b, g, &nm, n);
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
    namer_free(&nm);
}

void print_node_ref(sbuf *b, const rj_graph *g, int32_t id) {
    print_ref(b, g, NULL, id);
}

void print_node_call(sbuf *b, const rj_graph *g, int32_t id) {
    print_call(b, g, NULL, &g->nodes[id]);
}

namer *print_names_new(const rj_graph *g) {
    namer *nm = mem_zalloc(g->ctx, sizeof *nm);
    if (nm && !namer_init(nm, g)) {
        namer_free(nm);
        mem_free(g->ctx, nm, sizeof *nm);
        nm = NULL;
    }
    return nm;
}

void print_names_free(const rj_graph *g, namer *nm) {
    if (!nm) return;
    namer_free(nm);
    mem_free(g->ctx, nm, sizeof *nm);
}

void print_node_ref_nm(sbuf *b, const rj_graph *g, const namer *nm, int32_t id) { print_ref(b, g, nm, id); }

void print_node_call_nm(sbuf *b, const rj_graph *g, const namer *nm, int32_t id) {
    print_call(b, g, nm, &g->nodes[id]);
}
