/*
 * pipeline.c — the compilation pipeline, as one flat list of passes.
 *
 * Backends share everything up to the loop IR, and never run it themselves: the runtime
 * runs it once per (graph, target) and hands the loop IR, lowered for the target's
 * descriptor, to the target's compile hook. The graph is verified once, by the caller, before
 * it is cloned here; in builds configured with -Ddebug_verify=true the verifier also runs
 * before and after every graph pass, and the loop-IR checker after lowering, so a pass that
 * breaks an invariant is caught at the pass rather than in generated code.
 */
#include "pipeline.h"

#include <string.h>

#ifdef RJ_DEBUG_VERIFY
#define VERIFY(g) verify_graph(g)
#define VERIFY_LOOPS(p) lprog_verify(p)
#else
#define VERIFY(g) RJ_OK
#define VERIFY_LOOPS(p) RJ_OK
#endif

rj_status pipeline_run(const rj_graph *user, const target_desc *desc, compiled *c) {
    rj_ctx *ctx = user->ctx;
    memset(c, 0, sizeof *c);
    if (!(c->opt = graph_clone(ctx, user))) return RJ_ERR_NOMEM;
    rj_status s;
    if ((s = VERIFY(c->opt)) ||
        (s = pass_heads(c->opt)) || (s = VERIFY(c->opt)) ||
        (s = pass_canonicalize(c->opt)) || (s = VERIFY(c->opt)) ||
        (s = pass_eliminate_pads(c->opt)) || (s = VERIFY(c->opt)) ||
        (s = pass_find_attention(c->opt)) || (s = VERIFY(c->opt)) ||
        (s = pass_canonicalize(c->opt)) || (s = VERIFY(c->opt)) ||
        (s = pass_fuse(c->opt, desc, &c->plan)) ||
        (s = pass_lower(c->opt, user, &c->plan, desc, &c->lp)) || (s = pass_expand(&c->lp)) ||
        (s = pass_widen16(&c->lp, desc)) ||
        (s = VERIFY_LOOPS(&c->lp))) {
        compiled_free(c);
        return s;
    }
    return RJ_OK;
}

void compiled_free(compiled *c) {
    lprog_free(&c->lp);
    fuse_plan_free(&c->plan);
    rj_graph_free(c->opt);
    memset(c, 0, sizeof *c);
}
