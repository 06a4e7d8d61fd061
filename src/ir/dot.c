/*
 * dot.c — the graph as a Graphviz picture.
 *
 * One box per node (inputs and outputs highlighted), one edge per operand labelled with the
 * operand's type, so shapes can be followed through the program; the kernels chosen by fusion
 * are clusters, so the picture shows at a glance what runs together. Literals are folded into
 * their users' labels rather than drawn. Render with: dot -Tsvg prog.dot -o prog.svg
 */
#include <string.h>

#include "passes.h"

static void dot_escape(sbuf *b, const char *s) {
    for (; *s; s++) {
        if (*s == '\n') {
            sbuf_puts(b, "\\n");
            continue;
        }
        if (*s == '"' || *s == '\\') sbuf_putc(b, '\\');
        sbuf_putc(b, *s);
    }
}

/* A node's box: "name = op(...)" and its type. */
static void node_label(sbuf *b, const rj_graph *g, const namer *nm, int32_t id) {
    sbuf t;
    sbuf_init(&t, g->ctx);
    const node *n = &g->nodes[id];
    if (n->op == RJ_OP_INPUT) {
        sbuf_printf(&t, "input %s\n", n->name); /* a newline: dot_escape writes it as \\n */
    } else {
        print_node_ref_nm(&t, g, nm, id);
        sbuf_puts(&t, " = ");
        print_node_call_nm(&t, g, nm, id);
        sbuf_putc(&t, '\n');
    }
    print_node_type(&t, g, n);
    if (t.failed) b->failed = true;
    else if (t.s) dot_escape(b, t.s);
    sbuf_free(&t);
}

static bool is_output(const rj_graph *g, int32_t id) {
    for (int32_t i = 0; i < g->noutputs; i++)
        if (g->outputs[i].node == id) return true;
    return false;
}

static void emit_node(sbuf *b, const rj_graph *g, const namer *nm, int32_t id, const char *indent) {
    const node *n = &g->nodes[id];
    const char *style = n->op == RJ_OP_INPUT ? ", shape=box, style=filled, fillcolor=\"#dbeafe\""
                        : is_output(g, id)   ? ", shape=box, style=\"filled,bold\", fillcolor=\"#dcfce7\""
                                             : ", shape=box";
    sbuf_printf(b, "%sn%d [label=\"", indent, id);
    node_label(b, g, nm, id);
    sbuf_printf(b, "\"%s];\n", style);
}

void print_dot(sbuf *b, const rj_graph *g, const fuse_plan *p) {
    sbuf_puts(b, "digraph ragjit {\n  rankdir=TB;\n  node [fontname=\"monospace\", fontsize=10];\n"
                 "  edge [fontname=\"monospace\", fontsize=9];\n");
    /* kernels as clusters, holding their root, epilogue and map nodes, and the producers they
     * evaluate inline (a producer inlined into several kernels is drawn in the first) */
    size_t nn = (size_t)(g->n ? g->n : 1);
    uint8_t *inl = mem_zalloc(g->ctx, nn), *reads = mem_zalloc(g->ctx, nn), *drawn = mem_zalloc(g->ctx, nn);
    int32_t *stack = mem_alloc(g->ctx, sizeof(int32_t) * (size_t)(5 * (g->n + 1)));
    namer *nm = print_names_new(g);
    if (!inl || !reads || !drawn || !stack || !nm) b->failed = true; /* out of memory */
    for (int32_t gi = 0; !b->failed && gi < p->ngroups; gi++) {
        const fuse_group *gr = &p->groups[gi];
        sbuf_printf(b, "  subgraph cluster_k%d {\n    label=\"kernel %d%s\";\n    style=dashed;\n", gi, gi,
                    gr->kind == FG_CHECK ? " (index check)" : "");
        if (gr->kind == FG_ROOT) emit_node(b, g, nm, gr->root, "    ");
        for (int32_t m = 0; m < gr->nmembers; m++) emit_node(b, g, nm, gr->members[m], "    ");
        memset(inl, 0, nn);
        fuse_kernel_uses(g, p, gi, inl, reads, stack);
        for (int32_t i = 0; i < g->n; i++)
            if (inl[i] && !drawn[i] && g->nodes[i].op != RJ_OP_SCALAR && p->nodes[i].group < 0) {
                emit_node(b, g, nm, i, "    ");
                drawn[i] = 1;
            }
        sbuf_puts(b, "  }\n");
    }
    for (int32_t i = 0; !b->failed && i < g->n; i++) {
        const fuse_node *f = &p->nodes[i];
        const node *nd = &g->nodes[i];
        if (f->role == FR_DEAD || nd->op == RJ_OP_SCALAR || f->group >= 0 || drawn[i]) continue;
        emit_node(b, g, nm, i, "  "); /* inputs */
    }
    mem_free(g->ctx, inl, nn);
    mem_free(g->ctx, reads, nn);
    mem_free(g->ctx, drawn, nn);
    mem_free(g->ctx, stack, sizeof(int32_t) * (size_t)(5 * (g->n + 1)));
    print_names_free(g, nm);
    for (int32_t i = 0; i < g->n; i++) {
        const node *n = &g->nodes[i];
        if (p->nodes[i].role == FR_DEAD || n->op == RJ_OP_SCALAR) continue;
        for (int k = 0; k < n->nin; k++) {
            const node *o = &g->nodes[n->in[k]];
            if (o->op == RJ_OP_SCALAR) continue;
            sbuf_printf(b, "  n%d -> n%d [label=\"", n->in[k], i);
            sbuf t;
            sbuf_init(&t, g->ctx);
            print_node_type(&t, g, o);
            if (t.failed) b->failed = true;
            else if (t.s) dot_escape(b, t.s);
            sbuf_free(&t);
            sbuf_puts(b, "\"];\n");
        }
    }
    sbuf_puts(b, "}\n");
}
