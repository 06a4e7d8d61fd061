/*
 * program.c — programs: compile a graph for a target, run it on a binding.
 *
 * A program owns a private copy of the graph (node ids preserved), so callers may free or
 * keep extending their graph, and binds by the ids they already hold. rj_program_run is the
 * single entry point for every target: it validates the binding (bind.c) and only then hands
 * the resolved run to the backend, so backends never see unchecked data.
 */
#include <string.h>

#include "../codegen/cuda/cuda_backend.h"
#include "../codegen/llvm/llvm_backend.h"
#include "../ir/pipeline.h"
#include "runtime.h"

static const backend *backend_for(rj_target t) {
    switch (t) {
    case RJ_TARGET_REFERENCE: return &backend_reference;
    case RJ_TARGET_CPU: return &backend_cpu;
    case RJ_TARGET_CUDA: return &backend_cuda;
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

char *rj_program_dump(rj_program *p, const char *stage) {
    if (!p) return NULL;
    rj_ctx *ctx = p->ctx;
    if (!stage) {
        ctx_fail(ctx, RJ_ERR_ARG, "rj_program_dump: stage is NULL");
        return NULL;
    }
    static const char *const stages[] = {"graph", "opt", "fused", "loops", "llvm", "llvm-opt", "asm",
                                         "cuda", "ptx", "dot"};
    size_t k = 0;
    while (k < sizeof stages / sizeof stages[0] && strcmp(stages[k], stage)) k++;
    if (k == sizeof stages / sizeof stages[0]) {
        ctx_fail(ctx, RJ_ERR_ARG, "rj_program_dump: unknown stage '%s' (graph, opt, fused, loops, "
                 "llvm, llvm-opt, asm, cuda, ptx, dot)", stage);
        return NULL;
    }
    sbuf b;
    sbuf_init(&b, ctx);
    if (k == 0) {
        print_graph(&b, p->g);
        return sbuf_finish(&b);
    }
    compiled c;
    if (pipeline_run(p->g, &c) != RJ_OK) return NULL;
    char *text = NULL;
    switch (k) {
    case 1: print_graph(&b, c.opt); break;
    case 2: print_fuse_plan(&b, c.opt, &c.plan); break;
    case 3: print_lprog(&b, c.opt, &c.lp); break;
    case 7: text = cuda_source(ctx, &c.lp); break;
    case 8: text = cuda_ptx(ctx, &c.lp, 0); break;
    case 9: print_dot(&b, c.opt, &c.plan); break;
    default: text = llvm_dump(ctx, &c.lp, stage); break;
    }
    compiled_free(&c);
    return k >= 4 && k <= 8 ? text : sbuf_finish(&b);
}
