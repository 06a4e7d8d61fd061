/*
 * run.c — runs: rj_program_run, and the state a binding keeps from one run to the next.
 *
 * A binding (bind.c) records what the caller bound; everything a run makes of it lives here,
 * in the binding's run_state (runtime.h): the resolved view the backends read (the value of
 * every symbol, the offsets of every class, where inputs are and outputs go), the memory runs
 * keep (outputs ragjit placed, logical and block offsets, device offsets read back, host and
 * device temporaries), a device run that returned before its kernels finished, the statistics
 * of the last run, and the last run's error, which rj_bind_result repeats.
 *
 * A run is three steps: resolve (resolve.c walks the program's plan over the bindings and
 * fills the view), the backend's run hook on that view, and the bookkeeping of the outcome.
 * Runs take no lock: the program's artifact and plan are immutable, and everything a run
 * writes is the binding's (one run at a time on a binding, as the API says).
 */
#include <stdio.h>
#include <string.h>

#include "launch.h"

run_state *run_state_new(rj_ctx *ctx, artifact *art, const backend *be) {
    const run_plan *pl = &art->plan;
    run_state *rs = mem_zalloc(ctx, sizeof *rs);
    if (!rs) return NULL;
    size_t ns = (size_t)(pl->nsym ? pl->nsym : 1);
    if (!(rs->sym = mem_zalloc(ctx, ns * sizeof(run_sym))) || !(rs->cls = mem_zalloc(ctx, ns * sizeof(run_class))) ||
        !(rs->own = mem_zalloc(ctx, ns * sizeof(run_symmem))) || !(rs->used = mem_zalloc(ctx, ns)) ||
        !(rs->pair = mem_zalloc(ctx, (size_t)(pl->npairs ? pl->npairs : 1) * sizeof(run_pair))) ||
        !(rs->in = mem_zalloc(ctx, (size_t)(pl->ninputs ? pl->ninputs : 1) * sizeof(run_in))) ||
        !(rs->out = mem_zalloc(ctx, (size_t)(pl->noutputs ? pl->noutputs : 1) * sizeof(run_out)))) {
        rs->v.plan = pl;
        run_state_free(ctx, rs);
        return NULL;
    }
    rs->v = (run_view){.ctx = ctx, .plan = pl, .be = be, .lp = art->ce ? &art->comp.lp : NULL,
                       .code = art->ce ? art->ce->code : NULL, .g = art->key, .sym = rs->sym, .cls = rs->cls,
                       .pair = rs->pair,
                       .in = rs->in, .out = rs->out, .mem = &rs->mem, .async = &rs->async, .stats = &rs->stats};
    return rs;
}

void run_state_free(rj_ctx *ctx, run_state *rs) {
    if (!rs) return;
    const run_plan *pl = rs->v.plan;
    const backend *be = rs->v.be;
    size_t ns = (size_t)(pl->nsym ? pl->nsym : 1);
    if (be && be->wait && rs->async.pending) {
        double ms;
        be->wait(ctx, &rs->async, &ms); /* nothing is freed under running kernels */
    }
    if (rs->out)
        for (int32_t i = 0; i < pl->noutputs; i++) {
            mem_free(ctx, rs->out[i].own, rs->out[i].own_bytes);
            if (rs->out[i].down && be && be->dev_free) be->dev_free(ctx, rs->out[i].down);
        }
    if (rs->own)
        for (size_t s = 0; s < ns; s++) {
            run_symmem *o = &rs->own[s];
            mem_free(ctx, o->loff, sizeof(int64_t) * (size_t)o->loff_cap);
            mem_free(ctx, o->hcopy, o->hcopy_bytes);
        }
    run_mem_free(ctx, be, &rs->mem);
    if (be && be->async_release) be->async_release(&rs->async);
    mem_free(ctx, rs->sym, ns * sizeof(run_sym));
    mem_free(ctx, rs->cls, ns * sizeof(run_class));
    mem_free(ctx, rs->own, ns * sizeof(run_symmem));
    if (rs->pair)
        for (int32_t k = 0; k < pl->npairs; k++) mem_free(ctx, rs->pair[k].own, sizeof(int64_t) * (size_t)rs->pair[k].cap);
    mem_free(ctx, rs->pair, (size_t)(pl->npairs ? pl->npairs : 1) * sizeof(run_pair));
    mem_free(ctx, rs->used, ns);
    mem_free(ctx, rs->in, (size_t)(pl->ninputs ? pl->ninputs : 1) * sizeof(run_in));
    mem_free(ctx, rs->out, (size_t)(pl->noutputs ? pl->noutputs : 1) * sizeof(run_out));
    mem_free(ctx, rs, sizeof *rs);
}

/* A failed run's error, kept for rj_bind_result to repeat (a later call would replace it). */
static rj_status run_failed(run_state *rs, rj_status s) {
    rs->failed = true;
    rs->status = s;
    snprintf(rs->msg, sizeof rs->msg, "%s", ctx_last_error(rs->v.ctx));
    return s;
}

rj_status rj_program_run(rj_program *p, rj_bind *b) {
    if (!p || !b) return p ? ctx_fail(p->ctx, RJ_ERR_ARG, "rj_program_run: binding is NULL")
                           : RJ_ERR_ARG;
    if (b->prog_id != p->id)
        return ctx_fail(p->ctx, RJ_ERR_ARG, "rj_program_run: the binding belongs to another "
                        "program");
    run_state *rs = b->run;
    rs->prepared = rs->ready = false;
    double t0 = clock_ms();
    rj_status s = run_resolve(b);
    if (s) return run_failed(rs, s);
    rs->stats = (rj_run_stats){.kernel_ms = -1};
    s = p->be->run(&rs->v);
    rs->prepared = s == RJ_OK;
    if (s) return run_failed(rs, s);
    rs->failed = false;
    rs->stats.run_ms = clock_ms() - t0;
    if (rs->stats.kernel_ms < 0 && !rs->async.pending) rs->stats.kernel_ms = rs->stats.run_ms;
    if (!rs->stats.kernels && rs->v.lp) rs->stats.kernels = rs->v.lp->nkernels;
    return s;
}

rj_status rj_bind_prepare(rj_bind *b) {
    if (!b) return RJ_ERR_ARG;
    run_state *rs = b->run;
    bool checked;
    rj_status s = device_settle(&rs->v, &checked); /* nothing is moved under a device run */
    if (s) return s;
    rs->prepared = rs->ready = false; /* outputs may move: the last run's results go */
    s = run_resolve(b);
    if (s) return s;
    rs->stats = (rj_run_stats){0};
    if (b->be && b->be->prepare && (s = b->be->prepare(&rs->v))) return s;
    rs->ready = true;
    return RJ_OK;
}

rj_status rj_bind_wait(rj_bind *b) {
    if (!b) return RJ_ERR_ARG;
    run_state *rs = b->run;
    bool checked;
    rj_status s = device_settle(&rs->v, &checked);
    if (s && checked) rs->prepared = false;
    return s;
}

rj_status rj_bind_output_numel(rj_bind *b, rj_node n, int64_t *numel) {
    if (!b) return RJ_ERR_ARG;
    int i = plan_find(b->plan, b->ctx, true, n, "rj_bind_output_numel");
    if (i < 0) return RJ_ERR_ARG;
    if (!numel) return ctx_fail(b->ctx, RJ_ERR_ARG, "rj_bind_output_numel: numel is NULL");
    run_state *rs = b->run;
    bool prepared = rs->prepared; /* the last run's results stay readable */
    rs->sizing = true;            /* everything a run checks, nothing it allocates */
    rj_status s = run_resolve(b);
    rs->sizing = false;
    rs->prepared = prepared && !s;
    if (!s) *numel = rs->out[i].sized;
    return s;
}

const rj_tensor *rj_bind_result(rj_bind *b, rj_node n) {
    if (!b) return NULL;
    int i = plan_find(b->plan, b->ctx, true, n, "rj_bind_result");
    if (i < 0) return NULL;
    run_state *rs = b->run;
    if (!rs->prepared) { /* after a failed run, its error is the one worth repeating */
        if (rs->failed) ctx_fail(b->ctx, rs->status, "%s", rs->msg);
        else
            ctx_fail(b->ctx, RJ_ERR_UNBOUND, "rj_bind_result: %s: the program has not run "
                     "successfully with this binding", b->plan->out[i].name);
        return NULL;
    }
    return &rs->out[i].result;
}

rj_status rj_bind_result_device(rj_bind *b, rj_node n, rj_devptr *data, int64_t *numel) {
    if (!b) return RJ_ERR_ARG;
    int i = plan_find(b->plan, b->ctx, true, n, "rj_bind_result_device");
    if (i < 0) return RJ_ERR_ARG;
    const run_out *o = &b->run->out[i];
    if (!b->run->prepared)
        return ctx_fail(b->ctx, RJ_ERR_UNBOUND, "rj_bind_result_device: %s: the program has not run "
                        "successfully with this binding", b->plan->out[i].name);
    if (!o->dev)
        return ctx_fail(b->ctx, RJ_ERR_ARG, "rj_bind_result_device: %s is in host memory (rj_bind_result)",
                        b->plan->out[i].name);
    if (data) *data = o->ddata;
    if (numel) *numel = o->numel;
    return RJ_OK;
}

rj_status rj_bind_stats(const rj_bind *b, rj_run_stats *stats) {
    if (!b || !stats) return b ? ctx_fail(b->ctx, RJ_ERR_ARG, "rj_bind_stats: stats is NULL") : RJ_ERR_ARG;
    if (!b->run->prepared && !b->run->ready)
        return ctx_fail(b->ctx, RJ_ERR_ARG, "rj_bind_stats: the binding has no successful run (nor rj_bind_prepare)");
    *stats = b->run->stats;
    return RJ_OK;
}
