/*
 * program.c — programs: compile a graph for a target, run it on a binding.
 *
 * A program owns a private copy of the graph (node ids preserved), so callers may free or
 * keep extending their graph, and binds by the ids they already hold. rj_program_run is the
 * single entry point for every target: it validates the binding (bind.c) and only then hands
 * the resolved run to the backend, so backends never see unchecked data.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
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

static void dump_all(rj_program *p, const char *dir);

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
    const char *dir = getenv("RAGJIT_DUMP");
    if (dir && *dir) dump_all(p, dir);
    return p;
}

/* RAGJIT_DUMP=<dir>: every stage of every program, one file each, named after the program's
 * first output: 0003-attn.loops.txt. A dump is a debugging aid: failing to write one prints a
 * warning and leaves the program and the context's last error untouched. */
static void dump_all(rj_program *p, const char *dir) {
    static int counter;
    static const struct {
        const char *stage, *ext;
    } files[] = {{"graph", "graph.rj"}, {"opt", "opt.rj"}, {"fused", "fused.txt"},
                 {"loops", "loops.txt"}, {"dot", "dot"}, {"llvm", "ll"}, {"llvm-opt", "opt.ll"},
                 {"asm", "s"}, {"cuda", "cu"}, {"ptx", "ptx"}};
    rj_ctx *ctx = p->ctx;
    char saved_err[sizeof ctx->err];
    memcpy(saved_err, ctx->err, sizeof saved_err);
    rj_status saved_status = ctx->status;
    int id = __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED);
    char name[48] = "program";
    if (p->g->noutputs) {
        snprintf(name, sizeof name, "%s", p->g->outputs[0].name);
    }
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char *text = rj_program_dump(p, files[i].stage);
        if (!text) continue; /* e.g. no NVRTC for ptx */
        char path[4096];
        snprintf(path, sizeof path, "%s/%04d-%s.%s", dir, id, name, files[i].ext);
        FILE *f = fopen(path, "w");
        bool ok = f && fputs(text, f) >= 0;
        if (f && fclose(f)) ok = false;
        rj_string_free(ctx, text);
        if (!ok) {
            fprintf(stderr, "ragjit: RAGJIT_DUMP: cannot write %s: %s\n", path, strerror(errno));
            break;
        }
    }
    memcpy(ctx->err, saved_err, sizeof saved_err);
    ctx->status = saved_status;
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
    if (pipeline_run(p->g, target_desc_for(RJ_TARGET_CPU), &c) != RJ_OK) return NULL;
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
