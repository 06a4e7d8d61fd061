/*
 * bind.c — bindings: what the caller bound for a run, recorded as given.
 *
 * Binding calls only record pointers and counts; they check what can be checked without
 * reading the data (ids, NULLs, kinds, where memory is), through the program's plan (plan.c)
 * rather than its graph. Nothing else is checked until rj_program_run, because an embedding
 * binds buffers once and refills them between runs: resolve.c validates the bindings then
 * and resolves the run, and everything a run makes of them (sizes, offsets,
 * placed outputs, memory kept across runs, a device run in flight, the last error) lives in
 * the binding's run state (run.c), which rj_bind_new creates and rj_bind_free gives back.
 * An input promised constant (rj_bind_constant) carries the number of its latest binding, so
 * that what runs keep of its contents is dropped when it is bound again.
 */
#include <stdio.h>
#include <string.h>

#include "runtime.h"

rj_bind *rj_bind_new(rj_program *p) {
    if (!p) return NULL;
    rj_ctx *ctx = p->ctx;
    const run_plan *pl = &p->art->plan;
    rj_bind *b = mem_zalloc(ctx, sizeof *b);
    if (!b) return NULL;
    b->ctx = ctx;
    b->prog_id = p->id;
    b->be = p->be;
    b->art = p->art;
    artifact_retain(ctx, b->art);
    b->plan = pl;
    size_t ns = (size_t)(pl->nsym ? pl->nsym : 1);
    if (!(b->size = mem_zalloc(ctx, ns * sizeof(int64_t))) || !(b->size_set = mem_zalloc(ctx, ns)) ||
        !(b->rag = mem_zalloc(ctx, ns * sizeof(rag_bind))) ||
        !(b->in = mem_zalloc(ctx, (size_t)(pl->ninputs ? pl->ninputs : 1) * sizeof(in_bind))) ||
        !(b->out = mem_zalloc(ctx, (size_t)(pl->noutputs ? pl->noutputs : 1) * sizeof(out_bind))) ||
        !(b->run = run_state_new(ctx, p->art, p->be))) {
        rj_bind_free(b);
        return NULL;
    }
    return b;
}

void rj_bind_free(rj_bind *b) {
    if (!b) return;
    rj_ctx *ctx = b->ctx;
    const run_plan *pl = b->plan;
    size_t ns = (size_t)(pl->nsym ? pl->nsym : 1);
    run_state_free(ctx, b->run);
    mem_free(ctx, b->size, ns * sizeof(int64_t));
    mem_free(ctx, b->size_set, ns);
    mem_free(ctx, b->rag, ns * sizeof(rag_bind));
    mem_free(ctx, b->in, (size_t)(pl->ninputs ? pl->ninputs : 1) * sizeof(in_bind));
    mem_free(ctx, b->out, (size_t)(pl->noutputs ? pl->noutputs : 1) * sizeof(out_bind));
    artifact_release(ctx, b->art);
    mem_free(ctx, b, sizeof *b);
}

/* Results describe the memory of the bindings they were made with: a new binding voids them. */
static void rebound(rj_bind *b) {
    b->run->prepared = b->run->ready = false;
}

static const plan_sym *bound_sym(rj_bind *b, rj_dim d, const char *call) {
    if (dim_is_sym(d) && dim_sym(d) < b->plan->nsym) return &b->plan->sym[dim_sym(d)];
    ctx_fail(b->ctx, RJ_ERR_ARG, "%s: not a symbol of the program's graph", call);
    return NULL;
}

rj_status rj_bind_size(rj_bind *b, rj_dim d, int64_t value) {
    if (!b) return RJ_ERR_ARG;
    const plan_sym *s = bound_sym(b, d, "rj_bind_size");
    if (!s) return RJ_ERR_ARG;
    if (s->kind != SYM_DENSE)
        return ctx_fail(b->ctx, RJ_ERR_ARG, "rj_bind_size: %s is not a dense size%s", s->name,
                        s->kind == SYM_RAGGED ? " (bind offsets for a ragged symbol)" : "");
    if (value < 0)
        return ctx_fail(b->ctx, RJ_ERR_SIZE, "rj_bind_size: %s = %lld is negative", s->name,
                        (long long)value);
    b->size[dim_sym(d)] = value;
    b->size_set[dim_sym(d)] = 1;
    rebound(b);
    return RJ_OK;
}

rj_status rj_bind_offsets(rj_bind *b, rj_dim d, int64_t batch, const int64_t *offsets,
                          const int64_t *lengths) {
    if (!b) return RJ_ERR_ARG;
    const plan_sym *s = bound_sym(b, d, "rj_bind_offsets");
    if (!s) return RJ_ERR_ARG;
    if (s->kind != SYM_RAGGED)
        return ctx_fail(b->ctx, RJ_ERR_ARG, "rj_bind_offsets: %s is not a ragged symbol",
                        s->name);
    if (!offsets) return ctx_fail(b->ctx, RJ_ERR_ARG, "rj_bind_offsets: %s: offsets is NULL",
                                  s->name);
    if (batch < 0)
        return ctx_fail(b->ctx, RJ_ERR_BATCH, "rj_bind_offsets: %s: batch %lld is negative",
                        s->name, (long long)batch);
    rag_bind *r = &b->rag[dim_sym(d)];
    *r = (rag_bind){.off = offsets, .len = lengths, .batch = batch, .set = true};
    rebound(b);
    return RJ_OK;
}

/* ---- device memory ----------------------------------------------------------------------- */

static int input_index(rj_bind *b, rj_node n, const char *call) {
    return plan_find(b->plan, b->ctx, false, n, call);
}

static int output_index(rj_bind *b, rj_node n, const char *call) {
    return plan_find(b->plan, b->ctx, true, n, call);
}

static rj_status need_device(rj_bind *b, const char *call) {
    if (b->be && b->be->dev_read) return RJ_OK;
    return ctx_fail(b->ctx, RJ_ERR_UNSUPPORTED, "%s: the %s target has no device memory (bind host "
                    "memory, or compile for cuda or opencl)", call, b->be ? b->be->name : "program's");
}

rj_status rj_bind_offsets_device(rj_bind *b, rj_dim d, int64_t batch, rj_devptr offsets, rj_devptr lengths) {
    if (!b) return RJ_ERR_ARG;
    rj_status st = need_device(b, "rj_bind_offsets_device");
    if (st) return st;
    const plan_sym *s = bound_sym(b, d, "rj_bind_offsets_device");
    if (!s) return RJ_ERR_ARG;
    if (s->kind != SYM_RAGGED)
        return ctx_fail(b->ctx, RJ_ERR_ARG, "rj_bind_offsets_device: %s is not a ragged symbol", s->name);
    if (!offsets) return ctx_fail(b->ctx, RJ_ERR_ARG, "rj_bind_offsets_device: %s: offsets is 0", s->name);
    if (batch < 0 || batch > ((int64_t)1 << 40))
        return ctx_fail(b->ctx, RJ_ERR_BATCH, "rj_bind_offsets_device: %s: batch %lld is out of range "
                        "(0 .. 2^40)", s->name, (long long)batch);
    rag_bind *r = &b->rag[dim_sym(d)];
    *r = (rag_bind){.batch = batch, .set = true, .dev = true, .doff = offsets, .dlen = lengths, .info_rows = -1,
                    .info_maxlen = -1};
    b->has_dev = true;
    rebound(b);
    return RJ_OK;
}

rj_status rj_bind_offsets_info(rj_bind *b, rj_dim d, int64_t rows, int64_t maxlen) {
    if (!b) return RJ_ERR_ARG;
    const plan_sym *s = bound_sym(b, d, "rj_bind_offsets_info");
    if (!s) return RJ_ERR_ARG;
    rag_bind *r = &b->rag[dim_sym(d)];
    if (s->kind != SYM_RAGGED || !r->set || !r->dev)
        return ctx_fail(b->ctx, RJ_ERR_ARG, "rj_bind_offsets_info: %s has no device offsets bound "
                        "(rj_bind_offsets_device first)", s->name);
    if (rows < 0 || maxlen < -1 || maxlen > rows || (r->batch == 0 && rows > 0))
        return ctx_fail(b->ctx, RJ_ERR_ARG, "rj_bind_offsets_info: %s: rows %lld and longest item %lld "
                        "cannot describe %lld items", s->name, (long long)rows, (long long)maxlen,
                        (long long)r->batch);
    r->info_rows = rows;
    r->info_maxlen = maxlen;
    rebound(b);
    return RJ_OK;
}

rj_status rj_bind_trust_offsets(rj_bind *b, bool trusted) {
    if (!b) return RJ_ERR_ARG;
    rj_status st = need_device(b, "rj_bind_trust_offsets");
    if (st) return st;
    b->trusted = trusted;
    rebound(b);
    return RJ_OK;
}

rj_status rj_bind_input_device(rj_bind *b, rj_node n, rj_devptr data, int64_t numel) {
    if (!b) return RJ_ERR_ARG;
    rj_status st = need_device(b, "rj_bind_input_device");
    if (st) return st;
    int i = input_index(b, n, "rj_bind_input_device");
    if (i < 0) return RJ_ERR_ARG;
    const char *name = b->plan->in[i].name;
    if (numel < 0)
        return ctx_fail(b->ctx, RJ_ERR_SIZE, "rj_bind_input_device: %s: numel %lld is negative", name,
                        (long long)numel);
    if (!data && numel > 0) return ctx_fail(b->ctx, RJ_ERR_ARG, "rj_bind_input_device: %s: data is 0", name);
    b->in[i] = (in_bind){.numel = numel, .set = true, .dev = true, .ddata = data, .constant = b->in[i].constant,
                         .gen = ++b->gens};
    b->has_dev = true;
    rebound(b);
    return RJ_OK;
}

rj_status rj_bind_output_device(rj_bind *b, rj_node n, rj_devptr data, int64_t capacity) {
    if (!b) return RJ_ERR_ARG;
    rj_status st = need_device(b, "rj_bind_output_device");
    if (st) return st;
    int i = output_index(b, n, "rj_bind_output_device");
    if (i < 0) return RJ_ERR_ARG;
    if (capacity < 0 || (!data && capacity > 0))
        return ctx_fail(b->ctx, RJ_ERR_ARG, "rj_bind_output_device: %s: %s", b->plan->out[i].name,
                        capacity < 0 ? "negative capacity" : "data is 0 (ragjit allocates: capacity 0)");
    out_bind *o = &b->out[i];
    o->dev = true;
    o->duser = data;
    o->user = NULL;
    o->cap = data ? capacity : 0;
    b->has_dev = true;
    rebound(b);
    return RJ_OK;
}

rj_status rj_bind_stream(rj_bind *b, void *stream) {
    if (!b) return RJ_ERR_ARG;
    rj_status st = need_device(b, "rj_bind_stream");
    if (st) return st;
    if (stream != b->stream && (st = rj_bind_wait(b))) return st; /* its memory, on another stream */
    b->stream = stream;
    return RJ_OK;
}

rj_status rj_bind_input(rj_bind *b, rj_node n, const void *data, int64_t numel) {
    if (!b) return RJ_ERR_ARG;
    int i = input_index(b, n, "rj_bind_input");
    if (i < 0) return RJ_ERR_ARG;
    const char *name = b->plan->in[i].name;
    if (numel < 0)
        return ctx_fail(b->ctx, RJ_ERR_SIZE, "rj_bind_input: %s: numel %lld is negative", name,
                        (long long)numel);
    if (!data && numel > 0)
        return ctx_fail(b->ctx, RJ_ERR_ARG, "rj_bind_input: %s: data is NULL", name);
    b->in[i] = (in_bind){.data = data, .numel = numel, .set = true, .constant = b->in[i].constant, .gen = ++b->gens};
    rebound(b);
    return RJ_OK;
}

/* The promise is a flag on the input; a new number says that what runs kept of its contents
 * is stale (cpu_gemm.c compares it), whether the promise is given, renewed or withdrawn. */
rj_status rj_bind_constant(rj_bind *b, rj_node n, bool constant) {
    if (!b) return RJ_ERR_ARG;
    int i = input_index(b, n, "rj_bind_constant");
    if (i < 0) return RJ_ERR_ARG;
    b->in[i].constant = constant;
    b->in[i].gen = ++b->gens;
    return RJ_OK;
}

rj_status rj_bind_output(rj_bind *b, rj_node n, void *data, int64_t capacity) {
    if (!b) return RJ_ERR_ARG;
    int i = output_index(b, n, "rj_bind_output");
    if (i < 0) return RJ_ERR_ARG;
    if (capacity < 0 || (!data && capacity > 0))
        return ctx_fail(b->ctx, RJ_ERR_ARG, "rj_bind_output: %s: %s", b->plan->out[i].name,
                        capacity < 0 ? "negative capacity" : "data is NULL");
    b->out[i].user = data;
    b->out[i].cap = data ? capacity : 0;
    b->out[i].dev = false;
    b->out[i].duser = 0;
    rebound(b);
    return RJ_OK;
}

rj_status rj_bind_tensor(rj_bind *b, rj_node n, const rj_tensor *t) {
    if (!b) return RJ_ERR_ARG;
    if (!t) return ctx_fail(b->ctx, RJ_ERR_ARG, "rj_bind_tensor: tensor is NULL");
    int i = input_index(b, n, "rj_bind_tensor");
    if (i < 0) return RJ_ERR_ARG;
    const plan_io *in = &b->plan->in[i];
    const plan_shape *sh = &in->sh;
    const rj_tensor_info *ti = &t->info;
    int rp = sh->rpos;
    if (ti->ragged_dims == 2 || sh->kind == SHAPE_PAIR)
        return ctx_fail(b->ctx, RJ_ERR_UNSUPPORTED, "rj_bind_tensor: %s: a tensor with two ragged dims is bound with "
                        "rj_bind_input (its blocks, len_b x len_b rows an item)", in->name);
    if (ti->dtype != (rj_dtype)sh->dtype || ti->rank != sh->rank || (rp >= 0) != (ti->ragged_dim >= 0))
        return ctx_fail(b->ctx, RJ_ERR_SHAPE, "rj_bind_tensor: %s is %s%s[rank %d] but the "
                        "tensor is %s%s[rank %d]", in->name, rp >= 0 ? "jagged " : "",
                        rj_dtype_name((rj_dtype)sh->dtype), sh->rank, ti->ragged_dim >= 0 ? "jagged " : "",
                        rj_dtype_name(ti->dtype), ti->rank);
    int64_t numel = ti->rows;
    if (rp >= 0) {
        int64_t inner = 1;
        for (int d = 2; d < ti->rank; d++) inner *= ti->shape[d];
        numel = ti->rows * inner;
        rj_dim j = sh->dims[rp];
        rag_bind *r = &b->rag[sh->rsym];
        if (r->set && (r->off != ti->offsets || r->len != ti->lengths)) {
            /* another tensor bound this symbol: they must address rows identically (device
             * offsets are not read here: they differ) */
            bool same = r->off && r->batch == ti->shape[0] && (!r->len) == (!ti->lengths);
            for (int64_t k = 0; same && k <= r->batch; k++)
                same = r->off[k] == ti->offsets[k] && (k == r->batch || !r->len ||
                                                        r->len[k] == ti->lengths[k]);
            if (!same)
                return ctx_fail(b->ctx, RJ_ERR_SAME, "rj_bind_tensor: %s: its offsets differ "
                                "from those already bound to %s", in->name,
                                b->plan->sym[sh->rsym].name);
        } else {
            rj_status s = rj_bind_offsets(b, j, ti->shape[0], ti->offsets, ti->lengths);
            if (s) return s;
        }
    }
    return rj_bind_input(b, n, ti->values, numel);
}
