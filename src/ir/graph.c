/*
 * graph.c — graph storage: nodes, symbols, inputs and outputs, cloning, hashing, and the
 * public declaration and introspection calls.
 *
 * Storage is a few growable arrays owned by the graph and allocated through the context, so
 * one free releases everything. Building is sticky: the first failure is kept in the graph
 * (status and message) and later failures do not overwrite it, which lets callers build a
 * whole graph and check rj_graph_status once, and lets rj_program_new report the root cause.
 *
 * Failures are reported through util's error of the context (ctx_failv: the message the caller
 * reads with rj_ctx_error); graph_fail only adds the stickiness, keeping the first message in
 * the graph.
 *
 * Inputs, outputs and symbols share one namespace (graph_name_user): `ragjit run` names a
 * file after each in one directory, so two kinds with one name would read or overwrite each
 * other's data. The text format adds its values to the same namespace (parse.c).
 *
 * This file is the bottom of the IR and calls only util: the calls that add a node infer its
 * type first, so they are the builder's (builder.c, rj_graph_input included), and whatever
 * prints a node is print.c's (rj_node_type_str).
 */
#include <stdio.h>
#include <string.h>

#include "ir.h"

rj_graph *graph_new(rj_ctx *ctx) {
    rj_graph *g = mem_zalloc(ctx, sizeof *g);
    if (!g) return NULL;
    g->ctx = ctx;
    g->cur_loc = -1;
    return g;
}

rj_graph *rj_graph_new(rj_ctx *ctx) {
    if (!ctx) return NULL;
    return graph_new(ctx);
}

void rj_graph_free(rj_graph *g) {
    if (!g) return;
    rj_ctx *ctx = g->ctx;
    for (int32_t i = 0; i < g->n; i++) mem_strfree(ctx, g->nodes[i].name);
    for (int32_t i = 0; i < g->nsym; i++) mem_strfree(ctx, g->syms[i].name);
    for (int32_t i = 0; i < g->noutputs; i++) mem_strfree(ctx, g->outputs[i].name);
    mem_free(ctx, g->nodes, (size_t)g->cap * sizeof(node));
    mem_free(ctx, g->syms, (size_t)g->capsym * sizeof(sym));
    mem_free(ctx, g->inputs, (size_t)g->capinputs * sizeof(int32_t));
    mem_free(ctx, g->outputs, (size_t)g->capoutputs * sizeof(output));
    rj_string_free(ctx, g->warnings);
    mem_free(ctx, g->live, (size_t)g->nlive);
    mem_free(ctx, g, sizeof *g);
}

const char *rj_graph_warnings(const rj_graph *g) { return g ? g->warnings : NULL; }

rj_status rj_graph_status(const rj_graph *g) {
    return g ? g->status : RJ_ERR_ARG;
}

rj_status graph_fail(rj_graph *g, rj_status s, const char *fmt, ...) {
    if (g->status != RJ_OK) return s; /* keep the first failure's message */
    va_list ap;
    va_start(ap, fmt);
    ctx_failv(g->ctx, s, fmt, ap);
    va_end(ap);
    g->status = s;
    snprintf(g->first_err, sizeof g->first_err, "%s", ctx_last_error(g->ctx));
    return s;
}

rj_status graph_keep_error(rj_graph *g, rj_status s) {
    return graph_fail(g, s, "%s", ctx_last_error(g->ctx));
}

node *graph_node(const rj_graph *g, rj_node id) {
    return (id >= 0 && id < g->n) ? &g->nodes[id] : NULL;
}

int32_t graph_add_node(rj_graph *g, const node *n) {
    if (!mem_grow(g->ctx, (void **)&g->nodes, &g->cap, g->n + 1, sizeof(node))) {
        graph_keep_error(g, RJ_ERR_NOMEM);
        return -1;
    }
    g->nodes[g->n] = *n;
    if (!g->derived) g->nodes[g->n].from = g->n + 1; /* the user's graph: every node is its own */
    return g->n++;
}

int32_t graph_add_sym(rj_graph *g, const char *name, int kind, int32_t parent) {
    char *nm = mem_strdup(g->ctx, name);
    if (!nm || !mem_grow(g->ctx, (void **)&g->syms, &g->capsym, g->nsym + 1, sizeof(sym))) {
        mem_strfree(g->ctx, nm);
        graph_keep_error(g, RJ_ERR_NOMEM);
        return -1;
    }
    g->syms[g->nsym] = (sym){.name = nm, .kind = (uint8_t)kind, .parent = parent, .uf = g->nsym};
    return g->nsym++;
}

int32_t graph_find_sym(const rj_graph *g, const char *name) {
    for (int32_t i = 0; i < g->nsym; i++)
        if (!strcmp(g->syms[i].name, name)) return i;
    return -1;
}

int32_t sym_root(const rj_graph *g, int32_t s) {
    while (g->syms[s].uf != s) s = g->syms[s].uf;
    return s;
}

bool graph_is_valid_dim(const rj_graph *g, rj_dim d) {
    if (d >= 0) return true;
    return dim_is_sym(d) && dim_sym(d) < g->nsym;
}

const sym *graph_sym(const rj_graph *g, rj_dim d) {
    return dim_is_sym(d) && dim_sym(d) < g->nsym ? &g->syms[dim_sym(d)] : NULL;
}

/* Two dims are equal if they are the same constant or symbols of the same `same` class; the
 * run-time size max(j) of equal ragged symbols is equal too. */
bool dim_equal(const rj_graph *g, rj_dim a, rj_dim b) {
    if (a >= 0 || b >= 0) return a == b;
    const sym *sa = graph_sym(g, a), *sb = graph_sym(g, b);
    if (!sa || !sb || sa->kind != sb->kind) return false;
    if (sa->kind == SYM_MAXLEN) return sym_root(g, sa->parent) == sym_root(g, sb->parent);
    return sym_root(g, dim_sym(a)) == sym_root(g, dim_sym(b));
}

int dim_ragged_pos(const rj_graph *g, const node *n) {
    for (int i = 0; i < n->rank; i++) {
        const sym *s = graph_sym(g, n->dims[i]);
        if (s && s->kind == SYM_RAGGED) return i;
    }
    return -1;
}

/* Both ragged dims vary over the batch dim: of one class ([B, j1, j1], blocks len_b x len_b) or
 * of two ([B, j1, j2], queries by keys: blocks len1_b x len2_b). */
static bool ragged_pair_dims(const rj_graph *g, rj_dim b, rj_dim d1, rj_dim d2) {
    const sym *a = graph_sym(g, d1), *c = graph_sym(g, d2);
    if (!a || !c || a->kind != SYM_RAGGED || c->kind != SYM_RAGGED) return false;
    return dim_equal(g, d1, d2) ||
           (dim_equal(g, sym_dim(a->parent), sym_dim(c->parent)) && dim_equal(g, b, sym_dim(a->parent)));
}

bool node_is_pair(const rj_graph *g, const node *n) {
    return n->rank >= 3 && ragged_pair_dims(g, n->dims[0], n->dims[1], n->dims[2]);
}

bool node_is_cross(const rj_graph *g, const node *n) {
    if (!node_stores_pair(g, n)) return false;
    rj_dim d[RJ_MAX_RANK];
    node_phys_dims(g, n, d);
    return !dim_equal(g, d[1], d[2]);
}

bool node_is_column(const rj_graph *g, const node *n) {
    if (n->rank < 3 || n->dims[1] != 1) return false;
    const sym *j = graph_sym(g, n->dims[2]);
    return j && j->kind == SYM_RAGGED && dim_equal(g, n->dims[0], sym_dim(j->parent));
}

/* A head view: rank >= 4, the batch dim, one dense head dim, then the ragged dim(s) of the
 * batch: [B, H, j, D], [B, H, D, j] (a key transposed) or the pair [B, H, j, j]. Stored as
 * PyTorch stores a transposed jagged tensor: its canonical order (node_phys_order). */
bool node_is_headed(const rj_graph *g, const node *n) {
    if (n->rank < 4 || dim_is_sym(n->dims[1])) return false;
    /* one head ([B, 1, j, j]: a pair unsqueezed to broadcast over the heads) only with two ragged
     * dims: [B, 1, j, ...] with one is a row of columns (node_is_column) */
    if (n->dims[1] == 1 && !(n->rank == 4 && ragged_pair_dims(g, n->dims[0], n->dims[2], n->dims[3])))
        return false;
    int first = -1, count = 0;
    for (int k = 1; k < n->rank; k++) {
        const sym *s = graph_sym(g, n->dims[k]);
        if (!s || s->kind != SYM_RAGGED) continue;
        if (first < 0) first = k;
        if (!dim_equal(g, n->dims[0], sym_dim(s->parent))) return false;
        count++;
    }
    if (first < 2) return false;
    if (count == 1) return first == 2 || (first == 3 && n->rank == 4);
    return count == 2 && first == 2 && n->rank == 4 && ragged_pair_dims(g, n->dims[0], n->dims[2], n->dims[3]);
}

int node_phys_order(const rj_graph *g, const node *n, int *order) {
    int m = 0;
    bool headed = node_is_headed(g, n);
    for (int k = 0; k < n->rank; k++) order[k] = k;
    if (!headed) return n->rank;
    order[m++] = 0;
    for (int k = 1; k < n->rank; k++) {
        const sym *s = graph_sym(g, n->dims[k]);
        if (s && s->kind == SYM_RAGGED) order[m++] = k;
    }
    for (int k = 1; k < n->rank; k++) {
        const sym *s = graph_sym(g, n->dims[k]);
        if (!s || s->kind != SYM_RAGGED) order[m++] = k;
    }
    return m;
}

void node_phys_dims(const rj_graph *g, const node *n, rj_dim *dims) {
    int order[RJ_MAX_RANK];
    node_phys_order(g, n, order);
    for (int k = 0; k < n->rank; k++) dims[k] = n->dims[order[k]];
}

bool node_stores_pair(const rj_graph *g, const node *n) {
    if (!node_is_headed(g, n)) return node_is_pair(g, n);
    node t = *n;
    node_phys_dims(g, n, t.dims);
    return node_is_pair(g, &t);
}

bool graph_name_valid(const char *s) {
    if (!s || !*s) return false;
    if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || *s == '_')) return false;
    for (const char *p = s; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
              *p == '_'))
            return false;
    return strlen(s) < 128;
}

/* The input or output (other than node `self`) that has `name`, as a phrase, or NULL.
 * Inputs, outputs and symbols share one namespace: `ragjit run` gives each a file named after
 * it in one directory, so an output named like a ragged symbol would overwrite the symbol's
 * offsets. An input that is also an output may keep its name for both. */
static const char *io_user(const rj_graph *g, const char *name, rj_node self) {
    for (int32_t i = 0; i < g->noutputs; i++)
        if (g->outputs[i].node != self && !strcmp(g->outputs[i].name, name)) return "an output";
    for (int32_t i = 0; i < g->ninputs; i++)
        if (g->inputs[i] != self && !strcmp(g->nodes[g->inputs[i]].name, name)) return "an input";
    return NULL;
}

static const char *sym_user(const rj_graph *g, const char *name) {
    int32_t s = graph_find_sym(g, name);
    if (s < 0) return NULL;
    return g->syms[s].kind == SYM_RAGGED ? "a ragged symbol" : "a dense size";
}

const char *graph_name_user(const rj_graph *g, const char *name, rj_node self) {
    const char *user = io_user(g, name, self);
    return user ? user : sym_user(g, name);
}

static rj_dim declare_sym(rj_graph *g, const char *what, const char *name, int kind,
                          int32_t parent) {
    if (!graph_name_valid(name)) {
        graph_fail(g, RJ_ERR_ARG, "%s: '%s' is not a valid name (letters, digits, _; not "
                   "starting with a digit)", what, name ? name : "(NULL)");
        return RJ_DIM_NONE;
    }
    const char *user = io_user(g, name, RJ_NONE);
    if (user) {
        graph_fail(g, RJ_ERR_ARG, "%s: the name '%s' is already used by %s", what, name, user);
        return RJ_DIM_NONE;
    }
    int32_t s = graph_find_sym(g, name);
    if (s >= 0) {
        const sym *o = &g->syms[s];
        if (o->kind == kind && o->parent == parent) return sym_dim(s);
        graph_fail(g, RJ_ERR_ARG, "%s: '%s' is already declared as a %s", what, name,
                   o->kind == SYM_DENSE ? "dense size" : "ragged symbol with another parent");
        return RJ_DIM_NONE;
    }
    s = graph_add_sym(g, name, kind, parent);
    return s < 0 ? RJ_DIM_NONE : sym_dim(s);
}

rj_dim rj_graph_dense(rj_graph *g, const char *name) {
    if (!g) return RJ_DIM_NONE;
    return declare_sym(g, "rj_graph_dense", name, SYM_DENSE, -1);
}

rj_dim rj_graph_ragged(rj_graph *g, const char *name, rj_dim parent) {
    if (!g) return RJ_DIM_NONE;
    const sym *p = graph_sym(g, parent);
    if (!p) {
        graph_fail(g, RJ_ERR_ARG, "rj_graph_ragged: the parent of '%s' must be a declared "
                   "size symbol", name ? name : "(NULL)");
        return RJ_DIM_NONE;
    }
    if (p->kind != SYM_DENSE) {
        graph_fail(g, RJ_ERR_UNSUPPORTED, "rj_graph_ragged: parent '%s' of '%s' is ragged: "
                   "nested raggedness is not supported yet", p->name, name ? name : "(NULL)");
        return RJ_DIM_NONE;
    }
    return declare_sym(g, "rj_graph_ragged", name, SYM_RAGGED, dim_sym(parent));
}

rj_status rj_graph_same(rj_graph *g, rj_dim a, rj_dim b) {
    if (!g) return RJ_ERR_ARG;
    const sym *sa = graph_sym(g, a), *sb = graph_sym(g, b);
    if (!sa || !sb || sa->kind != SYM_RAGGED || sb->kind != SYM_RAGGED)
        return graph_fail(g, RJ_ERR_ARG, "same: both arguments must be ragged symbols");
    if (sym_root(g, sa->parent) != sym_root(g, sb->parent))
        return graph_fail(g, RJ_ERR_SHAPE, "same: %s and %s have different parents (%s vs %s)",
                          sa->name, sb->name, g->syms[sa->parent].name,
                          g->syms[sb->parent].name);
    int32_t ra = sym_root(g, dim_sym(a)), rb = sym_root(g, dim_sym(b));
    /* the older symbol stays the representative, so printed shapes are stable */
    if (ra < rb) g->syms[rb].uf = ra;
    else if (rb < ra) g->syms[ra].uf = rb;
    return RJ_OK;
}

rj_dim rj_graph_find_dim(const rj_graph *g, const char *name) {
    if (!g || !name) return RJ_DIM_NONE;
    int32_t s = graph_find_sym(g, name);
    return s < 0 ? RJ_DIM_NONE : sym_dim(s);
}

const char *rj_dim_name(const rj_graph *g, rj_dim d) {
    const sym *s = g ? graph_sym(g, d) : NULL;
    return s ? s->name : NULL;
}

/* ---- inputs and outputs ---------------------------------------------------------------- */

rj_node rj_graph_find(const rj_graph *g, const char *name) {
    if (!g || !name) return RJ_NONE;
    for (int32_t i = 0; i < g->noutputs; i++)
        if (!strcmp(g->outputs[i].name, name)) return g->outputs[i].node;
    for (int32_t i = 0; i < g->ninputs; i++)
        if (!strcmp(g->nodes[g->inputs[i]].name, name)) return g->inputs[i];
    return RJ_NONE;
}

/* g->live for the outputs as they are now; false after an allocation failure. */
static bool keep_live(rj_graph *g) {
    uint8_t *live = mem_realloc(g->ctx, g->live, (size_t)g->nlive, (size_t)(g->n ? g->n : 1));
    if (!live) return false;
    g->live = live;
    g->nlive = g->n;
    graph_live(g, live);
    return true;
}

rj_status rj_graph_output(rj_graph *g, rj_node n, const char *name) {
    if (!g) return RJ_ERR_ARG;
    if (n == RJ_NONE && g->status != RJ_OK) return RJ_ERR_GRAPH;
    node *nd = graph_node(g, n);
    if (!nd) return graph_fail(g, RJ_ERR_GRAPH, "output: node %d does not exist", (int)n);
    if (nd->op == RJ_OP_SCALAR)
        return graph_fail(g, RJ_ERR_ARG, "output: a scalar literal cannot be an output");
    if (dim_ragged_pos(g, nd) > 1 && !node_is_headed(g, nd))
        return graph_fail(g, RJ_ERR_UNSUPPORTED, "output: a jagged tensor with its ragged dim at position %d (a "
                          "transpose, or a row of columns [B, 1, j]) cannot be an output in this version",
                          dim_ragged_pos(g, nd));
    char auto_name[32];
    if (!name) { /* the first free one of out0, out1, ... */
        for (int32_t k = g->noutputs;; k++) {
            snprintf(auto_name, sizeof auto_name, "out%d", (int)k);
            if (!graph_name_user(g, auto_name, n)) break;
        }
        name = auto_name;
    }
    if (!graph_name_valid(name))
        return graph_fail(g, RJ_ERR_ARG, "output: '%s' is not a valid name", name);
    for (int32_t i = 0; i < g->noutputs; i++) {
        if (g->outputs[i].node == n)
            return graph_fail(g, RJ_ERR_ARG, "output %s: node is already output '%s'", name,
                              g->outputs[i].name);
    }
    const char *user = graph_name_user(g, name, n);
    if (user)
        return graph_fail(g, RJ_ERR_ARG, "output: the name '%s' is already used by %s", name,
                          user);
    char *nm = mem_strdup(g->ctx, name);
    if (!nm || !mem_grow(g->ctx, (void **)&g->outputs, &g->capoutputs, g->noutputs + 1,
                         sizeof(output))) {
        mem_strfree(g->ctx, nm);
        return graph_keep_error(g, RJ_ERR_NOMEM);
    }
    g->outputs[g->noutputs++] = (output){.node = n, .name = nm};
    return keep_live(g) ? RJ_OK : graph_keep_error(g, RJ_ERR_NOMEM);
}

/* ---- introspection --------------------------------------------------------------------- */

/* Index checks for the numbered accessors. They leave a message but never touch the graph's
 * sticky status: asking a wrong question about a graph does not make the graph wrong. */
static bool index_in_range(const rj_graph *g, const char *what, int i, int32_t n) {
    if (!g) return false;
    if (i >= 0 && i < n) return true;
    ctx_fail(g->ctx, RJ_ERR_ARG, "%s: index %d is out of range (the graph has %d)", what, i,
             (int)n);
    return false;
}

int rj_graph_input_count(const rj_graph *g) { return g ? g->ninputs : 0; }
int rj_graph_output_count(const rj_graph *g) { return g ? g->noutputs : 0; }
int rj_graph_dim_count(const rj_graph *g) { return g ? g->nsym : 0; }

rj_node rj_graph_input_at(const rj_graph *g, int i) {
    return index_in_range(g, "rj_graph_input_at", i, g ? g->ninputs : 0) ? g->inputs[i] : RJ_NONE;
}

rj_dim rj_graph_input_index_bound(const rj_graph *g, int i) {
    if (!index_in_range(g, "rj_graph_input_index_bound", i, g ? g->ninputs : 0)) return RJ_DIM_NONE;
    for (int32_t k = 0; k < g->n; k++) {
        const node *n = &g->nodes[k];
        if (op_table[n->op].kind != KIND_INDEX || n->nin != 2 || index_tensor(g, n) != g->inputs[i]) continue;
        return g->nodes[n->in[0]].dims[n->op == RJ_OP_EMBEDDING ? 0 : n->axis];
    }
    return RJ_DIM_NONE;
}

rj_node rj_graph_output_at(const rj_graph *g, int i) {
    return index_in_range(g, "rj_graph_output_at", i, g ? g->noutputs : 0) ? g->outputs[i].node
                                                                      : RJ_NONE;
}

void graph_live(const rj_graph *g, uint8_t *live) {
    memset(live, 0, (size_t)g->n);
    for (int32_t k = 0; k < g->noutputs; k++) live[g->outputs[k].node] = 1;
    for (int32_t i = g->n - 1; i >= 0; i--) /* operands come before their users */
        for (int k = 0; live[i] && k < g->nodes[i].nin; k++) live[g->nodes[i].in[k]] = 1;
}

/* Whether some output depends on node i, as far as g->live knows (without it: every node). */
static bool node_live(const rj_graph *g, int32_t i) {
    return !g->live || (i < g->nlive && g->live[i]);
}

bool rj_graph_input_used(const rj_graph *g, int i) {
    return index_in_range(g, "rj_graph_input_used", i, g ? g->ninputs : 0) && node_live(g, g->inputs[i]);
}

const char *rj_graph_input_name(const rj_graph *g, int i) {
    return index_in_range(g, "rj_graph_input_name", i, g ? g->ninputs : 0)
               ? g->nodes[g->inputs[i]].name
               : NULL;
}

const char *rj_graph_output_name(const rj_graph *g, int i) {
    return index_in_range(g, "rj_graph_output_name", i, g ? g->noutputs : 0) ? g->outputs[i].name
                                                                        : NULL;
}

rj_dim rj_graph_dim_at(const rj_graph *g, int i) {
    return index_in_range(g, "rj_graph_dim_at", i, g ? g->nsym : 0) ? sym_dim(i) : RJ_DIM_NONE;
}

rj_status rj_dim_get_info(const rj_graph *g, rj_dim d, rj_dim_info *info) {
    if (!g) return RJ_ERR_ARG;
    if (!info) return ctx_fail(g->ctx, RJ_ERR_ARG, "rj_dim_get_info: info is NULL");
    if (!graph_is_valid_dim(g, d))
        return ctx_fail(g->ctx, RJ_ERR_ARG, "rj_dim_get_info: %lld is not a constant or a "
                        "symbol of this graph", (long long)d);
    *info = (rj_dim_info){.kind = RJ_DIM_CONST, .parent = RJ_DIM_NONE, .same = d};
    const sym *s = graph_sym(g, d);
    if (s) {
        static const rj_dim_kind kinds[] = {[SYM_DENSE] = RJ_DIM_DENSE,
                                            [SYM_RAGGED] = RJ_DIM_RAGGED,
                                            [SYM_MAXLEN] = RJ_DIM_MAXLEN};
        info->kind = kinds[s->kind];
        info->name = s->name;
        if (s->parent >= 0) info->parent = sym_dim(s->parent);
        info->same = sym_dim(sym_root(g, dim_sym(d)));
    }
    for (int32_t i = 0; i < g->n && !info->used; i++)
        for (int k = 0; node_live(g, i) && k < g->nodes[i].rank; k++) info->used |= g->nodes[i].dims[k] == d;
    return RJ_OK;
}

const char *rj_node_name(const rj_graph *g, rj_node n) {
    const node *nd = g ? graph_node(g, n) : NULL;
    if (!nd) return NULL;
    for (int32_t i = 0; i < g->noutputs; i++)
        if (g->outputs[i].node == n) return g->outputs[i].name;
    return nd->name; /* an input's name, or a variable name from the text format */
}

rj_dtype rj_node_dtype(const rj_graph *g, rj_node n) {
    const node *nd = g ? graph_node(g, n) : NULL;
    return nd ? nd->dtype : RJ_DTYPE_COUNT;
}

int rj_node_shape(const rj_graph *g, rj_node n, rj_dim dims[RJ_MAX_RANK]) {
    const node *nd = g ? graph_node(g, n) : NULL;
    if (!nd) return -1;
    if (dims) memcpy(dims, nd->dims, sizeof(rj_dim) * nd->rank);
    return nd->rank;
}

/* ---- clone and hash -------------------------------------------------------------------- */

rj_graph *graph_clone(rj_ctx *ctx, const rj_graph *g) {
    rj_graph *c = graph_new(ctx);
    if (!c) return NULL;
    c->status = g->status;
    c->derived = g->derived;
    if (!mem_grow(ctx, (void **)&c->nodes, &c->cap, g->n, sizeof(node)) ||
        !mem_grow(ctx, (void **)&c->syms, &c->capsym, g->nsym, sizeof(sym)) ||
        !mem_grow(ctx, (void **)&c->inputs, &c->capinputs, g->ninputs, sizeof(int32_t)) ||
        !mem_grow(ctx, (void **)&c->outputs, &c->capoutputs, g->noutputs, sizeof(output)))
        goto fail;
    for (int32_t i = 0; i < g->n; i++) {
        c->nodes[i] = g->nodes[i];
        c->nodes[i].name = NULL;
        c->n = i + 1;
        if (g->nodes[i].name && !(c->nodes[i].name = mem_strdup(ctx, g->nodes[i].name)))
            goto fail;
    }
    for (int32_t i = 0; i < g->nsym; i++) {
        c->syms[i] = g->syms[i];
        c->syms[i].name = NULL;
        c->nsym = i + 1;
        if (!(c->syms[i].name = mem_strdup(ctx, g->syms[i].name))) goto fail;
    }
    /* a graph without inputs has no array to copy from (memcpy's pointers must be valid) */
    if (g->ninputs) memcpy(c->inputs, g->inputs, sizeof(int32_t) * (size_t)g->ninputs);
    c->ninputs = g->ninputs;
    for (int32_t i = 0; i < g->noutputs; i++) {
        c->outputs[i].node = g->outputs[i].node;
        c->outputs[i].name = NULL;
        c->noutputs = i + 1;
        if (!(c->outputs[i].name = mem_strdup(ctx, g->outputs[i].name))) goto fail;
    }
    if (g->live && !keep_live(c)) goto fail;
    return c;
fail:
    rj_graph_free(c);
    return NULL;
}

/* Structural hash: everything that changes generated code, nothing that only names things,
 * so graphs differing in input names share compiled kernels. */
uint64_t graph_hash(const rj_graph *g) {
    uint64_t h = 0xcbf29ce484222325ull;
    h = hash_mix(h, (uint64_t)g->nsym);
    for (int32_t i = 0; i < g->nsym; i++) {
        const sym *s = &g->syms[i];
        h = hash_mix(h, s->kind);
        h = hash_mix(h, (uint64_t)(int64_t)s->parent);
        h = hash_mix(h, (uint64_t)sym_root(g, i));
    }
    h = hash_mix(h, (uint64_t)g->n);
    for (int32_t i = 0; i < g->n; i++) {
        const node *n = &g->nodes[i];
        h = hash_mix(h, (uint64_t)n->op);
        h = hash_mix(h, (uint64_t)n->dtype);
        h = hash_mix(h, ((uint64_t)n->rank << 16) | ((uint64_t)n->weak << 8) | n->keepdim);
        for (int k = 0; k < n->nin; k++) h = hash_mix(h, (uint64_t)(int64_t)n->in[k]);
        h = hash_mix(h, (uint64_t)(int64_t)n->axis);
        uint64_t fb;
        memcpy(&fb, &n->fval, sizeof fb);
        h = hash_mix(h, fb);
        h = hash_mix(h, (uint64_t)n->ival);
        for (int k = 0; k < n->rank; k++) h = hash_mix(h, (uint64_t)n->dims[k]);
    }
    for (int32_t i = 0; i < g->ninputs; i++) h = hash_mix(h, (uint64_t)g->inputs[i]);
    for (int32_t i = 0; i < g->noutputs; i++) h = hash_mix(h, (uint64_t)g->outputs[i].node);
    return h;
}

static uint64_t hash_name(uint64_t h, const char *s) {
    return s ? hash_str(h, s) : hash_mix(h, 0x6e6f6e65ull);
}

uint64_t graph_names_hash(const rj_graph *g) {
    uint64_t h = 0x84222325cbf29ce4ull;
    for (int32_t i = 0; i < g->nsym; i++) h = hash_name(h, g->syms[i].name);
    for (int32_t i = 0; i < g->n; i++) h = hash_name(h, g->nodes[i].name);
    for (int32_t i = 0; i < g->noutputs; i++) h = hash_name(h, g->outputs[i].name);
    return h;
}

static bool same_name(const char *a, const char *b) {
    return a == b || (a && b && !strcmp(a, b));
}

bool graph_equal(const rj_graph *a, const rj_graph *b, bool names) {
    if (a->n != b->n || a->nsym != b->nsym || a->ninputs != b->ninputs || a->noutputs != b->noutputs)
        return false;
    for (int32_t i = 0; i < a->nsym; i++)
        if (a->syms[i].kind != b->syms[i].kind || a->syms[i].parent != b->syms[i].parent ||
            sym_root(a, i) != sym_root(b, i) || (names && !same_name(a->syms[i].name, b->syms[i].name)))
            return false;
    for (int32_t i = 0; i < a->n; i++) {
        const node *x = &a->nodes[i], *y = &b->nodes[i];
        if (x->op != y->op || x->dtype != y->dtype || x->rank != y->rank || x->nin != y->nin ||
            x->weak != y->weak || x->keepdim != y->keepdim || x->axis != y->axis ||
            x->ival != y->ival || memcmp(&x->fval, &y->fval, sizeof x->fval) ||
            memcmp(x->in, y->in, sizeof(int32_t) * x->nin) ||
            memcmp(x->dims, y->dims, sizeof(rj_dim) * x->rank) || (names && !same_name(x->name, y->name)))
            return false;
    }
    for (int32_t i = 0; i < a->ninputs; i++)
        if (a->inputs[i] != b->inputs[i]) return false;
    for (int32_t i = 0; i < a->noutputs; i++)
        if (a->outputs[i].node != b->outputs[i].node ||
            (names && !same_name(a->outputs[i].name, b->outputs[i].name)))
            return false;
    return true;
}
