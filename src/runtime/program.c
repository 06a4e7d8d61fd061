/*
 * program.c — programs: compile a graph for a target, run it on a binding.
 *
 * A program owns a private copy of the graph (node ids preserved), so callers may free or
 * keep extending their graph, and binds by the ids they already hold. rj_program_run is the
 * single entry point for every target: it validates the binding (bind.c) and only then hands
 * the resolved run to the backend, so backends never see unchecked data.
 */
#include "runtime.h"

static const backend *backend_for(rj_target t) {
    switch (t) {
    case RJ_TARGET_REFERENCE: return &backend_reference;
    default: return NULL;
    }
}

rj_program *rj_program_new(rj_graph *g, rj_target target) {
    if (!g) return NULL;
    rj_ctx *ctx = g->ctx;
    if (g->status != RJ_OK) {
        ctx_fail(ctx, g->status, "the graph has errors: %s", g->first_err);
        return NULL;
    }
    if ((unsigned)target > RJ_TARGET_CUDA) {
        ctx_fail(ctx, RJ_ERR_ARG, "rj_program_new: invalid target %d", (int)target);
        return NULL;
    }
    const backend *be = backend_for(target);
    if (!be) {
        ctx_fail(ctx, RJ_ERR_UNSUPPORTED, "rj_program_new: target %d is not available in this "
                 "build", (int)target);
        return NULL;
    }
    if (g->noutputs == 0) {
        ctx_fail(ctx, RJ_ERR_ARG, "rj_program_new: the graph has no outputs");
        return NULL;
    }
    if (verify_graph(g) != RJ_OK) return NULL;
    rj_program *p = mem_zalloc(ctx, sizeof *p);
    if (!p) return NULL;
    p->ctx = ctx;
    p->target = target;
    p->be = be;
    if (!(p->g = graph_clone(ctx, g)) || be->compile(p) != RJ_OK) {
        rj_program_free(p);
        return NULL;
    }
    return p;
}

void rj_program_free(rj_program *p) {
    if (!p) return;
    if (p->be) p->be->release(p);
    rj_graph_free(p->g);
    mem_free(p->ctx, p, sizeof *p);
}

rj_status rj_program_run(rj_program *p, rj_bind *b) {
    if (!p || !b) return p ? ctx_fail(p->ctx, RJ_ERR_ARG, "rj_program_run: binding is NULL")
                           : RJ_ERR_ARG;
    if (b->p != p)
        return ctx_fail(p->ctx, RJ_ERR_ARG, "rj_program_run: the binding belongs to another "
                        "program");
    b->prepared = false;
    rj_status s = bind_prepare(b);
    if (s) return s;
    s = p->be->run(p, b);
    b->prepared = s == RJ_OK;
    return s;
}

void backends_shutdown(rj_ctx *ctx) {
    RJ_UNUSED(ctx);
}
