/*
 * rewrite.c — the graph rewriter every transforming pass is built on.
 *
 * Passes do not edit nodes in place: they rebuild the graph in topological order into a fresh
 * node array, mapping old ids to new ones. That keeps the "operands precede users" invariant
 * for free, gives dead-code elimination for free (only nodes reachable from the outputs are
 * visited; inputs are always kept, in order, so bindings by input index stay valid), and gives
 * common-subexpression elimination for free (new nodes are hash-consed). Each new node is
 * re-inferred, so a rewrite cannot produce an ill-typed node silently.
 */
#include <string.h>

#include "rewrite.h"

static uint64_t node_key(const node *n) {
    uint64_t h = hash_mix(0x243f6a8885a308d3ull, (uint64_t)n->op);
    h = hash_mix(h, ((uint64_t)n->dtype << 32) | ((uint64_t)n->weak << 8) | n->keepdim);
    for (int k = 0; k < n->nin; k++) h = hash_mix(h, (uint64_t)(int64_t)n->in[k]);
    uint64_t fb;
    memcpy(&fb, &n->fval, sizeof fb);
    h = hash_mix(h, fb);
    h = hash_mix(h, (uint64_t)n->ival);
    h = hash_mix(h, (uint64_t)(int64_t)n->axis);
    return h;
}

static bool node_same(const node *a, const node *b) {
    if (a->op != b->op || a->dtype != b->dtype || a->nin != b->nin || a->weak != b->weak ||
        a->keepdim != b->keepdim || a->axis != b->axis || a->ival != b->ival ||
        memcmp(&a->fval, &b->fval, sizeof a->fval) || a->rank != b->rank)
        return false;
    for (int k = 0; k < a->nin; k++)
        if (a->in[k] != b->in[k]) return false;
    return !memcmp(a->dims, b->dims, sizeof(rj_dim) * a->rank);
}

rj_status rw_begin(rewriter *rw, rj_graph *g) {
    memset(rw, 0, sizeof *rw);
    rw->g = g;
    rj_ctx *ctx = g->ctx;
    if (!(rw->out = graph_new(ctx))) return RJ_ERR_NOMEM;
    rw->out->cur_loc = -1;
    rw->out->derived = true;
    rw->nmap = g->n ? g->n : 1;
    if (!(rw->map = mem_alloc(ctx, sizeof(int32_t) * (size_t)rw->nmap))) goto fail;
    for (int32_t i = 0; i < g->n; i++) rw->map[i] = -1;
    rw->tcap = 64;
    while (rw->tcap < 2 * g->n + 16) rw->tcap *= 2;
    if (!(rw->table = mem_alloc(ctx, sizeof(int32_t) * (size_t)rw->tcap))) goto fail;
    for (int32_t i = 0; i < rw->tcap; i++) rw->table[i] = -1;
    for (int32_t s = 0; s < g->nsym; s++) {
        if (graph_add_sym(rw->out, g->syms[s].name, g->syms[s].kind, g->syms[s].parent) < 0)
            goto fail;
        rw->out->syms[s].uf = g->syms[s].uf;
    }
    /* inputs first, in order */
    for (int32_t k = 0; k < g->ninputs; k++) {
        const node *in = &g->nodes[g->inputs[k]];
        rj_node id = rj_graph_input(rw->out, in->name, in->dtype, in->rank, in->dims);
        if (id < 0) goto fail;
        rw->out->nodes[id].from = in->from;
        rw->map[g->inputs[k]] = id;
    }
    return RJ_OK;
fail:
    rw_abort(rw);
    return ctx_last_status(ctx) ? ctx_last_status(ctx) : RJ_ERR_NOMEM;
}

void rw_abort(rewriter *rw) {
    rj_ctx *ctx = rw->g->ctx;
    rj_graph_free(rw->out);
    mem_free(ctx, rw->map, sizeof(int32_t) * (size_t)rw->nmap);
    mem_free(ctx, rw->table, sizeof(int32_t) * (size_t)rw->tcap);
    rw->out = NULL;
    rw->map = NULL;
    rw->table = NULL;
}

static bool table_grow(rewriter *rw) {
    rj_ctx *ctx = rw->g->ctx;
    int32_t ncap = rw->tcap * 2;
    int32_t *t = mem_alloc(ctx, sizeof(int32_t) * (size_t)ncap);
    if (!t) return false;
    for (int32_t i = 0; i < ncap; i++) t[i] = -1;
    for (int32_t i = 0; i < rw->out->n; i++) {
        const node *n = &rw->out->nodes[i];
        if (n->op == RJ_OP_INPUT) continue;
        uint32_t h = (uint32_t)node_key(n) & (uint32_t)(ncap - 1);
        while (t[h] >= 0) h = (h + 1) & (uint32_t)(ncap - 1);
        t[h] = i;
    }
    mem_free(ctx, rw->table, sizeof(int32_t) * (size_t)rw->tcap);
    rw->table = t;
    rw->tcap = ncap;
    return true;
}

int32_t rw_add(rewriter *rw, node *n) {
    rj_graph *out = rw->out;
    n->loc = -1;
    if (infer_node(out, n) != RJ_OK) return -1;
    uint32_t mask = (uint32_t)(rw->tcap - 1), h = (uint32_t)node_key(n) & mask;
    for (; rw->table[h] >= 0; h = (h + 1) & mask)
        if (node_same(&out->nodes[rw->table[h]], n)) return rw->table[h];
    int32_t id = graph_add_node(out, n);
    if (id < 0) return -1;
    rw->table[h] = id;
    if (2 * out->n > rw->tcap && !table_grow(rw)) return -1;
    return id;
}

int32_t rw_copy(rewriter *rw, int32_t old) {
    if (rw->map[old] >= 0) return rw->map[old];
    node n = rw->g->nodes[old];
    n.name = NULL;
    for (int k = 0; k < n.nin; k++) n.in[k] = rw->map[n.in[k]];
    int32_t id = rw_add(rw, &n);
    if (id >= 0) rw_label(rw, id, rw->g->nodes[old].name);
    return rw->map[old] = id;
}

void rw_label(rewriter *rw, int32_t id, const char *label) {
    node *n = &rw->out->nodes[id];
    if (!label || n->name || n->op == RJ_OP_INPUT || n->op == RJ_OP_SCALAR) return;
    n->name = mem_strdup(rw->g->ctx, label); /* a label is optional: no label on failure */
    if (!n->name) ctx_clear_error(rw->g->ctx);
}

void rw_live(const rj_graph *g, uint8_t *live) {
    memset(live, 0, (size_t)(g->n ? g->n : 1));
    for (int32_t i = 0; i < g->noutputs; i++) live[g->outputs[i].node] = 1;
    for (int32_t i = g->n - 1; i >= 0; i--)
        if (live[i])
            for (int k = 0; k < g->nodes[i].nin; k++) live[g->nodes[i].in[k]] = 1;
}

rj_status rw_finish(rewriter *rw) {
    rj_graph *g = rw->g, *out = rw->out;
    rj_ctx *ctx = g->ctx;
    for (int32_t i = 0; i < g->noutputs; i++) {
        int32_t id = rw->map[g->outputs[i].node];
        if (id < 0) {
            rw_abort(rw);
            return ctx_fail(ctx, RJ_ERR_INTERNAL, "rewrite: output %s was not rebuilt",
                            g->outputs[i].name);
        }
        bool dup = false; /* two outputs may have become one node (CSE) */
        for (int32_t k = 0; k < out->noutputs; k++) dup |= out->outputs[k].node == id;
        if (!dup) {
            if (rj_graph_output(out, id, g->outputs[i].name) != RJ_OK) {
                rj_status s = out->status;
                rw_abort(rw);
                return s;
            }
            continue;
        }
        char *nm = mem_strdup(ctx, g->outputs[i].name);
        if (!nm || !mem_grow(ctx, (void **)&out->outputs, &out->capoutputs, out->noutputs + 1,
                             sizeof(output))) {
            mem_strfree(ctx, nm);
            rw_abort(rw);
            return RJ_ERR_NOMEM;
        }
        out->outputs[out->noutputs++] = (output){.node = id, .name = nm};
    }
    if (out->status != RJ_OK) {
        rj_status s = out->status;
        rw_abort(rw);
        return s;
    }
    /* a node that replaces an old one computes what the old one did, so it takes its `from`
     * when it has none; each user's node is then claimed by one node at most (the first) */
    for (int32_t i = 0; i < g->n; i++) {
        int32_t id = rw->map[i];
        if (id >= 0 && !out->nodes[id].from) out->nodes[id].from = g->nodes[i].from;
    }
    int32_t most = 0;
    for (int32_t i = 0; i < out->n; i++) most = out->nodes[i].from > most ? out->nodes[i].from : most;
    uint8_t *claimed = mem_zalloc(ctx, (size_t)most + 1);
    if (!claimed) {
        rw_abort(rw);
        return RJ_ERR_NOMEM;
    }
    for (int32_t i = 0; i < out->n; i++) {
        node *n = &out->nodes[i];
        if (claimed[n->from]) n->from = 0;
        else if (n->from) claimed[n->from] = 1;
    }
    mem_free(ctx, claimed, (size_t)most + 1);
    /* move the new arrays into g */
    rj_graph tmp = *g;
    g->nodes = out->nodes, g->n = out->n, g->cap = out->cap;
    g->syms = out->syms, g->nsym = out->nsym, g->capsym = out->capsym;
    g->inputs = out->inputs, g->ninputs = out->ninputs, g->capinputs = out->capinputs;
    g->outputs = out->outputs, g->noutputs = out->noutputs, g->capoutputs = out->capoutputs;
    out->nodes = tmp.nodes, out->n = tmp.n, out->cap = tmp.cap;
    out->syms = tmp.syms, out->nsym = tmp.nsym, out->capsym = tmp.capsym;
    out->inputs = tmp.inputs, out->ninputs = tmp.ninputs, out->capinputs = tmp.capinputs;
    out->outputs = tmp.outputs, out->noutputs = tmp.noutputs, out->capoutputs = tmp.capoutputs;
    rw_abort(rw); /* frees the old arrays, now held by rw->out */
    return RJ_OK;
}
