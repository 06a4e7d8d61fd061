/*
 * call.c — rj_graph_call: a graph used as a function of another (a layer built once, called
 * many times from C, as the text format's `def`).
 *
 * The function is an ordinary graph: its inputs are the parameters, in order, its outputs the
 * results. A call copies its nodes into the caller's graph with each parameter replaced by the
 * argument, re-inferring every node there, so a call is exactly its body written out and every
 * shape is checked in the caller's terms. The function's symbols are bound by the arguments:
 * where a parameter has B or j1, the argument's dim there is what B or j1 means in this call
 * (the same symbol must get the same dim everywhere, and a ragged symbol a ragged dim whose
 * parent is what the function's parent is bound to). A dense size no parameter binds (one only
 * a reshape names) is the caller's size of that name, declared if the caller has none;
 * max(j1) follows j1. Kernels that come out the same in every call compile once.
 */
#include <string.h>

#include "ir.h"

typedef struct caller {
    rj_graph *g;
    const rj_graph *fn;
    rj_dim *map; /* per symbol of fn: its dim in g, or RJ_DIM_NONE */
} caller;

static rj_status bind_dim(caller *c, int k, int d, rj_dim fd, rj_dim gd) {
    rj_graph *g = c->g;
    if (!dim_is_sym(fd)) {
        if (fd == gd) return RJ_OK;
        return graph_fail(g, RJ_ERR_SHAPE, "call: argument %d, dim %d: the function's parameter has %lld there", k + 1,
                          d, (long long)fd);
    }
    int32_t s = dim_sym(fd);
    const sym *fs = &c->fn->syms[s], *gs = graph_sym(g, gd);
    if (fs->kind == SYM_RAGGED && (!gs || gs->kind != SYM_RAGGED))
        return graph_fail(g, RJ_ERR_SHAPE, "call: argument %d, dim %d: the function's parameter has the ragged %s "
                          "there, the argument a dense dim", k + 1, d, fs->name);
    if (fs->kind != SYM_RAGGED && gs && gs->kind == SYM_RAGGED)
        return graph_fail(g, RJ_ERR_SHAPE, "call: argument %d, dim %d: the argument's dim is the ragged %s, the "
                          "function's parameter has the dense %s", k + 1, d, gs->name, fs->name);
    if (c->map[s] == RJ_DIM_NONE) {
        c->map[s] = gd;
    } else if (!dim_equal(g, c->map[s], gd)) {
        return graph_fail(g, RJ_ERR_SHAPE, "call: argument %d, dim %d: the function's %s is bound to two different "
                          "dims by its arguments", k + 1, d, fs->name);
    }
    return RJ_OK;
}

/* The caller's dim for dim fd of the function (binding what no argument bound). */
static rj_dim map_dim(caller *c, rj_dim fd) {
    if (!dim_is_sym(fd)) return fd;
    int32_t s = dim_sym(fd);
    if (c->map[s] != RJ_DIM_NONE) return c->map[s];
    const sym *fs = &c->fn->syms[s];
    rj_graph *g = c->g;
    if (fs->kind == SYM_RAGGED) {
        graph_fail(g, RJ_ERR_SHAPE, "call: the function's ragged %s is in no parameter's shape", fs->name);
        return RJ_DIM_NONE;
    }
    if (fs->kind == SYM_MAXLEN) {
        rj_dim r = map_dim(c, sym_dim(fs->parent));
        if (r == RJ_DIM_NONE) return r;
        char name[160];
        snprintf(name, sizeof name, "max(%s)", graph_sym(g, r)->name);
        int32_t m = graph_find_sym(g, name);
        if (m < 0) m = graph_add_sym(g, name, SYM_MAXLEN, dim_sym(r));
        return c->map[s] = m < 0 ? RJ_DIM_NONE : sym_dim(m);
    }
    int32_t m = graph_find_sym(g, fs->name);
    if (m >= 0 && g->syms[m].kind != SYM_DENSE) {
        graph_fail(g, RJ_ERR_SHAPE, "call: the function's size %s is a ragged symbol of the caller", fs->name);
        return RJ_DIM_NONE;
    }
    if (m < 0) m = graph_add_sym(g, fs->name, SYM_DENSE, -1);
    return c->map[s] = m < 0 ? RJ_DIM_NONE : sym_dim(m);
}

static rj_status bind_args(caller *c, const rj_node *args, int nargs) {
    rj_graph *g = c->g;
    const rj_graph *fn = c->fn;
    for (int k = 0; k < nargs; k++) {
        const node *p = &fn->nodes[fn->inputs[k]], *a = graph_node(g, args[k]);
        if (!a) return graph_fail(g, RJ_ERR_GRAPH, "call: argument %d is not a node of the graph", k + 1);
        if (a->rank != p->rank || (!a->weak && a->dtype != p->dtype))
            return graph_fail(g, a->rank != p->rank ? RJ_ERR_SHAPE : RJ_ERR_DTYPE, "call: argument %d has %s %s where "
                              "the function's parameter %s has %s %s", k + 1, a->rank != p->rank ? "rank" : "dtype",
                              a->rank != p->rank ? "" : rj_dtype_name(a->dtype), p->name,
                              a->rank != p->rank ? "rank" : "dtype", a->rank != p->rank ? "" : rj_dtype_name(p->dtype));
        for (int d = 0; d < p->rank; d++) {
            rj_status s = bind_dim(c, k, d, p->dims[d], a->dims[d]);
            if (s) return s;
        }
    }
    /* a ragged symbol's parent is bound to the parent of the dim it is bound to */
    for (int32_t s = 0; s < fn->nsym; s++) {
        const sym *fs = &fn->syms[s];
        if (fs->kind != SYM_RAGGED || c->map[s] == RJ_DIM_NONE) continue;
        rj_dim gp = sym_dim(graph_sym(g, c->map[s])->parent);
        if (c->map[fs->parent] == RJ_DIM_NONE) c->map[fs->parent] = gp;
        else if (!dim_equal(g, c->map[fs->parent], gp))
            return graph_fail(g, RJ_ERR_SHAPE, "call: the function's %s varies over %s, but the argument's does not "
                              "vary over what %s is bound to", fs->name, fn->syms[fs->parent].name,
                              fn->syms[fs->parent].name);
    }
    return RJ_OK;
}

rj_status rj_graph_call(rj_graph *g, const rj_graph *fn, const rj_node *args, int nargs, rj_node *results,
                        int nresults) {
    if (!g) return RJ_ERR_ARG;
    if (g->status) return RJ_ERR_GRAPH;
    if (!fn || fn == g || fn->ctx != g->ctx)
        return graph_fail(g, RJ_ERR_ARG, "call: the function must be another graph of the same context");
    if (fn->status) return graph_fail(g, RJ_ERR_GRAPH, "call: the function's graph failed to build");
    if (nargs != fn->ninputs || (nargs && !args))
        return graph_fail(g, RJ_ERR_ARG, "call: the function takes %d arguments, %d given", (int)fn->ninputs, nargs);
    if (nresults != fn->noutputs || (nresults && !results))
        return graph_fail(g, RJ_ERR_ARG, "call: the function gives %d results, room for %d given", (int)fn->noutputs,
                          nresults);
    size_t nmap = (size_t)(fn->nsym ? fn->nsym : 1), nnodes = (size_t)(fn->n ? fn->n : 1);
    caller c = {.g = g, .fn = fn, .map = mem_alloc(g->ctx, nmap * sizeof(rj_dim))};
    int32_t *id = mem_alloc(g->ctx, nnodes * sizeof(int32_t));
    rj_status st = c.map && id ? RJ_OK : graph_keep_error(g, RJ_ERR_NOMEM);
    for (size_t s = 0; !st && s < nmap; s++) c.map[s] = RJ_DIM_NONE;
    if (!st) st = bind_args(&c, args, nargs);
    for (int k = 0; !st && k < nargs; k++) id[fn->inputs[k]] = args[k];
    for (int32_t i = 0; !st && i < fn->n; i++) {
        const node *o = &fn->nodes[i];
        if (o->op == RJ_OP_INPUT) continue;
        node n = *o;
        n.name = NULL, n.from = 0, n.loc = g->cur_loc;
        for (int k = 0; k < n.nin; k++) n.in[k] = id[o->in[k]];
        for (int k = 0; k < n.rank && !g->status; k++) n.dims[k] = map_dim(&c, o->dims[k]);
        bool dim_attr = o->op == RJ_OP_PAD || o->op == RJ_OP_UNPAD || o->op == RJ_OP_POSITIONS;
        if (dim_attr && dim_is_sym((rj_dim)o->ival) && !g->status) n.ival = map_dim(&c, (rj_dim)o->ival);
        if (g->status) st = g->status;
        else if (infer_node(g, &n) || (id[i] = graph_add_node(g, &n)) < 0) st = g->status ? g->status : RJ_ERR_NOMEM;
    }
    for (int k = 0; !st && k < nresults; k++) results[k] = id[fn->outputs[k].node];
    mem_free(g->ctx, c.map, nmap * sizeof(rj_dim));
    mem_free(g->ctx, id, nnodes * sizeof(int32_t));
    return st;
}
